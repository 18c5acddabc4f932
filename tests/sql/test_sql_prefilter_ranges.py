"""The prefilter compiled per batch shape: an OR of ranges of one column decided as the
union of its intervals (overlapping and adjacent intervals merged), and a two-value IN
list of strings decided as an OR of equalities. Both must keep exactly the rows DuckDB
keeps: NULLs, boundaries, adjacent integers, literals at and beyond the int64 and INT
ends, columns read in place from Arrow buffers (narrow integers, dates, decimals) and
converted ones, NULL in an IN list, NOT over an IN list; string conditions beside number
conditions evaluated only on the rows those keep.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal as D
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from oracle import Del, Ins, Oracle
from test_sql_speedups import ArrowOracle

import ddflow.sql as dsql
from ddflow.sql import rawfilter
from ddflow.sql.expr import Call, Col, Lit
from ddflow.sql.types import SqlType

DDL = [
    "CREATE TABLE r (k BIGINT NOT NULL, i INT, b BIGINT, q DECIMAL(15,2), d DATE, s STRING, "
    "m STRING)",
]

I64_MAX = 2**63 - 1
I64_MIN = -(2**63)

#: views whose whole condition is an OR of ranges of one column (an interval union) or
#: string conditions with a short IN list; each is decided in the scan
VIEWS = [
    # overlapping and touching ranges (TPC-H Q19's quantities): one interval
    "SELECT k FROM r WHERE (q >= 1 AND q <= 11) OR (q >= 10 AND q <= 20) OR (q >= 20 AND q <= 30)",
    # disjoint ranges, one of them open
    "SELECT k FROM r WHERE (i >= -2 AND i < 0) OR (i > 2 AND i <= 4) OR i >= 6",
    # adjacent integers merge ([1, 1] [2, 2] [3, 3]); a branch that keeps nothing
    "SELECT k FROM r WHERE i = 1 OR i = 2 OR i = 3 OR (i > 5 AND i < 5)",
    # a range inside an earlier one
    "SELECT k FROM r WHERE (i >= -3 AND i <= 6) OR i = 1 OR (i > 0 AND i < 3)",
    # literals on the left, strict bounds, BETWEEN
    "SELECT k FROM r WHERE (-1 < i AND 2 >= i) OR i BETWEEN 4 AND 5",
    # both sides open: everything but NULL
    "SELECT k FROM r WHERE i < 3 OR i >= 3",
    "SELECT k FROM r WHERE i <= 0 OR i > -5",
    # int64 ends: a bound past the end keeps nothing / everything on that side
    # (-9223372036854775808 is read as a DECIMAL(19): the lowest BIGINT literal is -2**63+1)
    f"SELECT k FROM r WHERE b > {I64_MAX} OR b < {I64_MIN + 1}",
    f"SELECT k FROM r WHERE b >= {I64_MAX} OR b <= {I64_MIN + 1} OR b = 0",
    f"SELECT k FROM r WHERE (b > {I64_MIN + 1} AND b < -3) OR (b >= 5 AND b < {I64_MAX})",
    f"SELECT k FROM r WHERE b < {I64_MIN + 1} OR b > {I64_MAX - 1}",
    # literals outside an INT column's range (read in place as int32)
    "SELECT k FROM r WHERE i > 3000000000 OR i < -3000000000 OR i = 2",
    "SELECT k FROM r WHERE (i > -3000000000 AND i < 0) OR i >= 3000000000",
    # dates
    "SELECT k FROM r WHERE (d >= DATE '1995-01-01' AND d < DATE '1995-03-01') "
    "OR d = DATE '1995-03-01' OR d > DATE '1995-12-30'",
    # decimals, negative
    "SELECT k FROM r WHERE (q > -5.00 AND q <= -1.25) OR (q >= -1.24 AND q < 0.00)",
    # with other conditions beside the OR
    "SELECT k, i FROM r WHERE ((i >= 1 AND i <= 3) OR (i >= 2 AND i <= 4)) AND q > 0",
    # short IN lists of strings, NULL in the column and in the list, NOT over them
    "SELECT k FROM r WHERE s IN ('a', 'b')",
    "SELECT k FROM r WHERE s IN ('a', NULL)",
    "SELECT k FROM r WHERE s NOT IN ('a', 'b')",
    "SELECT k FROM r WHERE s NOT IN ('a', NULL)",
    "SELECT k FROM r WHERE s IN ('ab', 'b') AND m = 'x' AND (i = 1 OR i = 2 OR i = 5)",
    "SELECT k FROM r WHERE s IN ('', 'ba') OR m IN ('y', 'zz')",
    "SELECT k FROM r WHERE s IN ('a', 'b', 'ab')",
    # string conditions beside number conditions that keep few rows: decided on those rows
    "SELECT k FROM r WHERE i = 3 AND s NOT IN ('a', NULL)",
    "SELECT k, s FROM r WHERE d >= DATE '1995-06-01' AND d < DATE '1995-07-01' "
    "AND (s LIKE 'a%' OR m IS NULL)",
    "SELECT k FROM r WHERE i > 7 AND s = 'ba' AND m <> 'zz'",
    "SELECT k FROM r WHERE b = 5 AND NOT (s = 'b' OR m = 'x')",
    "SELECT k FROM r WHERE q > 0 AND s <> 'a'",
    # not an interval union: two columns, <>, stays a plain OR of masks
    "SELECT k FROM r WHERE i < 0 OR b > 3",
    "SELECT k FROM r WHERE i <> 2 OR i = 2",
]


def _rows(rng: random.Random, n: int, k0: int) -> list[tuple[Any, ...]]:
    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.15 else v

    day = dt.date(1994, 12, 25)
    big = [I64_MAX, I64_MIN, I64_MAX - 1, I64_MIN + 1, 0, -3, -4, 4, 5, 6]
    out = []
    for k in range(k0, k0 + n):
        out.append(
            (
                k,
                maybe(rng.randrange(-6, 9)),
                maybe(rng.choice(big)),
                maybe(D(rng.randrange(-600, 3200, 25)) / 100),
                maybe(day + dt.timedelta(days=rng.randrange(0, 380))),
                maybe(rng.choice(["a", "ab", "b", "ba", ""])),
                maybe(rng.choice(["x", "y", "zz"])),
            )
        )
    return out


def _commits() -> list[list[Ins | Del]]:
    rng = random.Random(7)
    first = _rows(rng, 120, 0)
    second = _rows(rng, 90, 120)
    # exact boundary values of the views, so each comparison meets equality
    edges = [
        (1000 + j, i, b, q, d, "a", "x")
        for j, (i, b, q, d) in enumerate(
            [
                (1, I64_MAX, D("1.00"), dt.date(1995, 1, 1)),
                (3, I64_MIN, D("11.00"), dt.date(1995, 3, 1)),
                (-2, 5, D("30.00"), dt.date(1995, 2, 28)),
                (6, -3, D("30.01"), dt.date(1995, 12, 31)),
                (0, I64_MAX - 1, D("-1.25"), dt.date(1995, 12, 30)),
                (2, I64_MIN + 1, D("-1.24"), dt.date(1994, 12, 31)),
                (-1, 0, D("0.99"), dt.date(1995, 3, 2)),
                (4, 4, D("0.00"), dt.date(1995, 1, 1)),
            ]
        )
    ]
    return [
        [],
        [Ins("r", first + edges)],
        [Ins("r", second), Del("r", first[:30] + edges[:3])],
        [Del("r", second[10:50]), Ins("r", first[:7])],
        [Del("r", first[30:120] + edges[3:])],
    ]


def _scan_line(db: dsql.Database, sql: str) -> str:
    return next(x for x in db.explain(sql).splitlines() if "Scan r " in x)


@pytest.mark.parametrize("sql", VIEWS)
def test_condition_decided_in_the_scan(sql: str) -> None:
    db = dsql.Database()
    for ddl in DDL:
        db.execute(ddl)
    plan = db.explain(sql)
    assert " where " in _scan_line(db, sql), plan
    assert not any(x.strip().startswith("Filter") for x in plan.splitlines()), plan


@pytest.mark.parametrize("arrow", [False, True], ids=["tuples", "arrow"])
@pytest.mark.parametrize("sql", VIEWS)
def test_prefilter_equals_duckdb(sql: str, arrow: bool) -> None:
    """One view per database, so its prefilter meets the batch's columns as they came
    (Arrow buffers read in place, or values converted from tuples)."""
    o = (ArrowOracle if arrow else Oracle)(DDL)
    o.view(sql)
    for c in _commits():
        o.commit(c)


def _col(i: int, kind: str, **kw: Any) -> Col:
    return Col(i, SqlType(kind, **kw), True, f"c{i}")


def _cmp(op: str, a: Any, b: Any) -> Call:
    return Call(op, (a, b), SqlType("boolean"), True)


def _or(*xs: Any) -> Call:
    out = xs[0]
    for x in xs[1:]:
        out = Call("or", (out, x), SqlType("boolean"), True)
    return out


def _and(*xs: Any) -> Call:
    out = xs[0]
    for x in xs[1:]:
        out = Call("and", (out, x), SqlType("boolean"), True)
    return out


def test_interval_union_merges_exactly() -> None:
    """The intervals themselves: overlapping and adjacent merged, gaps kept, open ends."""
    t = SqlType("int", 64)
    c = _col(0, "int", bits=64)

    def lit(v: int) -> Lit:
        return Lit(v, t)

    got = rawfilter.range_union(
        _or(
            _and(_cmp("ge", c, lit(1)), _cmp("le", c, lit(11))),
            _and(_cmp("ge", c, lit(12)), _cmp("lt", c, lit(20))),
            _cmp("eq", c, lit(25)),
            _and(_cmp("gt", c, lit(25)), _cmp("lt", c, lit(27))),
            _cmp("gt", lit(-5), c),
        )
    )
    assert got is not None
    assert got[1] == [(None, -6), (1, 19), (25, 26)]
    got = rawfilter.range_union(_or(_cmp("ge", c, lit(3)), _cmp("lt", c, lit(10))))
    assert got is not None and got[1] == [(None, None)]
    got = rawfilter.range_union(
        _or(_and(_cmp("ge", c, lit(0)), _cmp("le", c, lit(8))), _cmp("eq", c, lit(3)))
    )
    assert got is not None and got[1] == [(0, 8)]
    # an empty branch drops out; two columns or <> are not an interval union
    got = rawfilter.range_union(
        _or(_and(_cmp("gt", c, lit(5)), _cmp("lt", c, lit(6))), _cmp("eq", c, lit(9)))
    )
    assert got is not None and got[1] == [(9, 9)]
    assert (
        rawfilter.range_union(_or(_cmp("lt", c, lit(1)), _cmp("gt", _col(1, "int"), lit(1))))
        is None
    )
    assert rawfilter.range_union(_or(_cmp("ne", c, lit(1)), _cmp("gt", c, lit(1)))) is None


def test_few_kept_rows_read_from_their_decimal_words() -> None:
    """A prefilter that keeps few rows: the kept rows of a DECIMAL column the prefilter
    does not read are read from their own 128-bit words (negative values, junk under
    NULLs, an offset), a word that does not fit in a row left out is not looked at, and
    one in a kept row is refused."""
    from test_sql_speedups import _decimal_array, _with_garbage_under_nulls

    db = dsql.Database()
    db.execute("CREATE TABLE a (k BIGINT NOT NULL, i INT, p DECIMAL(15,2))")
    view = db.view("SELECT k, p FROM a WHERE i = 1")
    # NULLs are one group whatever their slots hold
    groups = db.view("SELECT p, count(*) AS c FROM a WHERE i = 1 GROUP BY p")
    n = 400
    want: list[tuple[Any, ...]] = []
    for part, junk in enumerate((-5, -7, None)):
        ks = list(range(part * n, (part + 1) * n))
        iv = [1 if k % 9 == 0 else 0 for k in ks]  # about one row in nine kept
        pv = [None if k % 4 == 0 else D(k * 37 % 1000 - 500) / 100 for k in ks]
        arr = pa.array(pv, pa.decimal128(15, 2))
        if junk is None:  # an offset without NULLs
            pv = [D(0) if p is None else p for p in pv]
            col = pa.concat_arrays([pa.array([D("9.99")], arr.type), arr.fill_null(0)]).slice(1)
        else:  # junk under NULLs (two kinds: NULLs are still one group), an offset
            col = _with_garbage_under_nulls(arr, junk)
        tbl = pa.table({"k": pa.array(ks, pa.int64()), "i": pa.array(iv, pa.int32()), "p": col})
        db.insert("a", tbl)
        db.commit()
        want += [(k, p) for k, i, p in zip(ks, iv, pv, strict=True) if i == 1]
        assert sorted(view.rows(), key=str) == sorted(want, key=str)
    counts: dict[Any, int] = {}
    for _, p in want:
        counts[p] = counts.get(p, 0) + 1
    assert sorted(groups.rows(), key=str) == sorted(counts.items(), key=str)

    def words(bad_row: int) -> list[int]:
        out: list[int] = []
        for r in range(8):
            out += [7, 1] if r == bad_row else [r * 100 - 300, -1 if r * 100 - 300 < 0 else 0]
        return out

    # row 4 kept (i = 1; one row in eight: the rows are taken, not the column converted
    # whole); a word that does not fit 64 bits in row 5 (left out)
    keep_i = [1 if r == 4 else 0 for r in range(8)]
    ok = pa.table(
        {
            "k": pa.array(range(1000, 1008), pa.int64()),
            "i": pa.array(keep_i, pa.int32()),
            "p": _decimal_array(words(5), pa.decimal128(15, 2)),
        }
    )
    db.insert("a", ok)
    db.commit()
    assert sorted(view.rows()) == sorted(want + [(1004, D("1.00"))])
    # the same word in a kept row: refused
    bad = pa.table(
        {
            "k": pa.array(range(2000, 2008), pa.int64()),
            "i": pa.array(keep_i, pa.int32()),
            "p": _decimal_array(words(4), pa.decimal128(15, 2)),
        }
    )
    with pytest.raises(dsql.DataError, match="does not fit"):
        db.insert("a", bad)
        db.commit()
    # the same beside a NULL among the kept rows (its slot is not checked; row 4's is)
    valid = np.array([r != 2 for r in range(16)], dtype=bool)
    bad_nulls = pa.table(
        {
            "k": pa.array(range(3000, 3016), pa.int64()),
            "i": pa.array([1 if r in (2, 4) else 0 for r in range(16)], pa.int32()),
            "p": pa.Array.from_buffers(
                pa.decimal128(15, 2),
                16,
                [
                    pa.py_buffer(np.packbits(valid, bitorder="little").tobytes()),
                    pa.py_buffer(np.array(words(4) + words(9), dtype=np.int64).tobytes()),
                ],
                1,
            ),
        }
    )
    with pytest.raises(dsql.DataError, match="does not fit"):
        db.insert("a", bad_nulls)
        db.commit()


def test_most_kept_rows_read_in_place_exactly() -> None:
    """A prefilter that keeps most rows but not all: the kept rows of each column are read
    from the Arrow buffers in one pass (integers of two widths, dates, decimals with junk
    under their NULLs and an offset, strings), NULL flags kept, the dropped rows never
    reaching the view; NULLs are one group whatever their slots held."""
    from test_sql_speedups import _with_garbage_under_nulls

    db = dsql.Database()
    db.execute(
        "CREATE TABLE a (k BIGINT NOT NULL, i INT, b BIGINT, p DECIMAL(15,2), d DATE, s STRING)"
    )
    view = db.view("SELECT k, i, b, p, d, s FROM a WHERE k % 10 <> 3 AND b <> 7")
    groups = db.view("SELECT p, d, count(*) AS c FROM a WHERE b <> 7 GROUP BY p, d")
    day = dt.date(1995, 1, 1)
    want: list[tuple[Any, ...]] = []
    for part, junk in enumerate((-5, 9)):
        n = 500
        ks = list(range(part * n, (part + 1) * n))
        iv = [None if k % 6 == 0 else k % 11 - 5 for k in ks]
        bv = [7 if k % 4 == 1 else (None if k % 7 == 0 else k * 3) for k in ks]
        pv = [None if k % 5 == 0 else D(k * 37 % 1000 - 500) / 100 for k in ks]
        dv = [None if k % 8 == 0 else day + dt.timedelta(days=k % 30) for k in ks]
        sv = [None if k % 9 == 0 else "xy"[k % 2] * (k % 3) for k in ks]
        tbl = pa.table(
            {
                "k": pa.array(ks, pa.int64()),
                "i": _with_garbage_under_nulls(pa.array(iv, pa.int32()), junk),
                "b": _with_garbage_under_nulls(pa.array(bv, pa.int64()), junk),
                "p": _with_garbage_under_nulls(pa.array(pv, pa.decimal128(15, 2)), junk),
                "d": _with_garbage_under_nulls(pa.array(dv, pa.date32()), junk),
                "s": pa.array(sv, pa.string()),
            }
        )
        db.insert("a", tbl)
        db.commit()
        rows = list(zip(ks, iv, bv, pv, dv, sv, strict=True))
        kept = [r for r in rows if r[2] is not None and r[2] != 7]
        assert len(kept) * 4 >= n and len(kept) < n  # the mostly-kept path
        want += kept
        got = view.rows()
        assert sorted(got, key=str) == sorted([r for r in want if r[0] % 10 != 3], key=str)
        counts: dict[Any, int] = {}
        for r in want:
            counts[r[3], r[4]] = counts.get((r[3], r[4]), 0) + 1
        assert sorted(groups.rows(), key=str) == sorted(
            [(p, d, c) for (p, d), c in counts.items()], key=str
        )


@pytest.mark.parametrize("offset", [0, 3, 8, 13])
def test_arrow_bitmaps_read_as_numpy(offset: int) -> None:
    """Arrow boolean values and validity bitmaps unpacked to numpy: TRUE only where the
    value is TRUE and not NULL, NULL flags, at any offset into the bitmaps."""
    from ddflow.sql.batch import arrow_true

    rng = random.Random(offset)
    vals = [rng.choice([True, False, None]) for _ in range(70)]
    # the value bits under NULLs set (Arrow leaves them undefined)
    data = np.packbits([v is not False for v in vals], bitorder="little").tobytes()
    valid = np.packbits([v is not None for v in vals], bitorder="little").tobytes()
    arr = pa.Array.from_buffers(
        pa.bool_(), 70, [pa.py_buffer(valid), pa.py_buffer(data)], vals.count(None)
    ).slice(offset, 50)
    assert arr.to_pylist() == vals[offset : offset + 50]
    want = [v is True for v in vals[offset : offset + 50]]
    assert arrow_true(arr).tolist() == want
    nonull = pa.array([bool(v) for v in vals], pa.bool_()).slice(offset, 50)
    assert arrow_true(nonull).tolist() == [bool(v) for v in vals[offset : offset + 50]]
    # NULL flags of a sliced column, through a view that counts them
    db = dsql.Database()
    db.execute("CREATE TABLE a (x INT, s STRING)")
    v = db.view("SELECT count(*) AS n, count(x) AS m, count(s) AS c FROM a")
    ints = pa.array([None if x is None else int(x) for x in vals], pa.int32()).slice(offset, 50)
    strs = pa.array([None if x is None else str(x) for x in vals], pa.string()).slice(offset, 50)
    db.insert("a", pa.table({"x": ints, "s": strs}))
    db.commit()
    m = sum(x is not None for x in vals[offset : offset + 50])
    assert v.rows() == [(50, m, m)]
