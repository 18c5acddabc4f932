"""Speedups of ``ddflow.sql`` that must never change an answer, checked against DuckDB
where they apply and where they must not:

- comparisons of a number / date column with a literal or with a column of the same type,
  decided as rows come in (the scan's prefilter), so the other columns of rows they drop
  are never converted and never enter the dataflow;
- Arrow batches read by a per-schema plan cached for the table (a new schema, a NULL in a
  NOT NULL column, a type that needs checking still take the general path);
- DECIMAL(p <= 18) Arrow columns read from their 128-bit words with a cheap check that
  must still refuse a value that does not fit 64 bits.
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

import ddflow.sql as dsql

DDL = [
    "CREATE TABLE t (k BIGINT NOT NULL, i INT, j INT, b BIGINT, q DECIMAL(8,2), "
    "r DECIMAL(8,2), w DECIMAL(10,3), d DATE, e DATE, x DOUBLE, s STRING)",
    "CREATE TABLE u (k BIGINT NOT NULL, name STRING)",
]

# (view, whether the numeric conditions must all be decided in the scan)
VIEWS = [
    (
        "SELECT sum(q * r) AS v, count(*) AS c FROM t WHERE d >= DATE '1995-01-01' "
        "AND d < DATE '1996-01-01' AND r BETWEEN 0.05 AND 0.07 AND q < 24",
        True,
    ),
    ("SELECT k, q FROM t WHERE i < j", True),  # two columns of one type
    ("SELECT k, i, b FROM t WHERE i <= b AND b <> 3", True),  # INT against BIGINT
    ("SELECT k FROM t WHERE d < e AND q >= -1.50", True),
    ("SELECT k, s FROM t WHERE q = r AND s LIKE 'a%'", True),  # with a string condition
    ("SELECT i, count(*) AS c, sum(q) AS sq FROM t WHERE e > DATE '1995-06-01' GROUP BY i", True),
    ("SELECT t.k, u.name FROM t JOIN u ON t.k = u.k WHERE t.i > 2 AND t.q < 50", True),
    # AND / OR trees, with string conditions among them
    ("SELECT k FROM t WHERE i < 3 OR q > 10", True),
    ("SELECT k, s FROM t WHERE (i < 3 AND q > 1) OR (j >= 2 AND s LIKE 'a%') OR d = e", True),
    ("SELECT count(*) AS c FROM t WHERE s = 'b' OR (i IS NULL AND b < 2)", True),
    # must stay in the dataflow: NOT over numbers, a cast between scales, doubles,
    # arithmetic, NULL
    ("SELECT k FROM t WHERE NOT (i < 3 AND s = 'a')", False),
    ("SELECT k FROM t WHERE q < w", False),
    ("SELECT k FROM t WHERE x > 0.5", False),
    ("SELECT k FROM t WHERE i + 1 < j", False),
    ("SELECT k FROM t WHERE q > 2.125", False),  # a literal of another scale
    ("SELECT k FROM t WHERE i < NULL", False),
]


def _rows(rng: random.Random, n: int, k0: int) -> list[tuple[Any, ...]]:
    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.15 else v

    day = dt.date(1994, 6, 1)
    out = []
    for k in range(k0, k0 + n):
        out.append(
            (
                k,
                maybe(rng.randrange(-3, 8)),
                maybe(rng.randrange(-3, 8)),
                maybe(rng.randrange(-3, 8)),
                maybe(D(rng.randrange(-500, 6000)) / 100),
                maybe(D(rng.choice([4, 5, 6, 7, 8, -6])) / 100),
                maybe(D(rng.randrange(-5000, 60000)) / 1000),
                maybe(day + dt.timedelta(days=rng.randrange(0, 900))),
                maybe(day + dt.timedelta(days=rng.randrange(0, 900))),
                maybe(rng.choice([0.25, 0.5, 0.75, -1.0, float("nan")])),
                maybe(rng.choice(["a", "ab", "b", "ba", ""])),
            )
        )
    return out


def _commits() -> list[list[Ins | Del]]:
    rng = random.Random(11)
    first = _rows(rng, 80, 0)
    second = _rows(rng, 60, 80)
    names = [(k, f"n{k % 4}") for k in range(0, 140, 3)]
    return [
        [Ins("t", first), Ins("u", names)],
        [Ins("t", second), Del("t", first[:25])],
        [Del("t", second[10:40]), Ins("t", first[:5]), Del("u", names[:5])],
        [Del("t", first[25:80])],
    ]


class ArrowOracle(Oracle):
    """The oracle with ddflow fed Arrow tables (DuckDB's types) instead of tuples."""

    def __init__(self, ddl: Any, dialect: str = "spark") -> None:
        super().__init__(ddl, dialect, arrow=True)


def _prefilter_of(explain: str) -> str:
    line = next(x for x in explain.splitlines() if "Scan t " in x)
    return line.split(" where ", 1)[1] if " where " in line else ""


@pytest.mark.parametrize("sql,moved", VIEWS)
def test_numeric_conditions_decided_in_the_scan(sql: str, moved: bool) -> None:
    db = dsql.Database()
    for ddl in DDL:
        db.execute(ddl)
    plan = db.explain(sql)
    lines = plan.splitlines()
    has_filter = any(x.strip().startswith("Filter") for x in lines)
    if moved:
        assert not has_filter and _prefilter_of(plan), plan
    else:
        assert has_filter, plan


@pytest.mark.parametrize("arrow", [False, True], ids=["tuples", "arrow"])
def test_numeric_prefilters_equal_duckdb(arrow: bool) -> None:
    o = (ArrowOracle if arrow else Oracle)(DDL)
    for sql, _ in VIEWS:
        o.view(sql)
    for c in _commits():
        o.commit(c)


def test_arrow_batches_of_changing_schemas() -> None:
    """A cached plan is only used for the schema it was made for: columns in another
    order, an integer type that must be range checked, a NULL in a NOT NULL column."""
    db = dsql.Database()
    db.execute("CREATE TABLE a (k BIGINT NOT NULL, v INT, p DECIMAL(6,2))")
    view = db.view("SELECT sum(v) AS sv, sum(p) AS sp, count(*) AS c FROM a WHERE v < 100")
    t1 = pa.table(
        {
            "k": pa.array([1, 2], pa.int64()),
            "v": pa.array([5, 7], pa.int32()),
            "p": pa.array([D("1.50"), D("-2.25")], pa.decimal128(6, 2)),
        }
    )
    db.insert("a", t1)
    db.commit()
    t2 = pa.table(
        {
            "p": pa.array([D("0.25")], pa.decimal128(6, 2)),
            "v": pa.array([9], pa.int64()),
            "k": pa.array([3], pa.int64()),
        }
    )
    db.insert("a", t2)
    db.commit()
    assert view.rows() == [(21, D("-0.50"), 3)]
    big = pa.table(
        {
            "k": pa.array([4], pa.int64()),
            "v": pa.array([2**40], pa.int64()),
            "p": pa.array([D("1.00")], pa.decimal128(6, 2)),
        }
    )
    with pytest.raises(dsql.DataError, match="out of range"):
        db.insert("a", big)
    nul = pa.table(
        {
            "k": pa.array([None, 5], pa.int64()),
            "v": pa.array([1, 1], pa.int32()),
            "p": pa.array([D("1.00"), None], pa.decimal128(6, 2)),
        }
    )
    with pytest.raises(dsql.DataError, match="NOT NULL"):
        db.insert("a", nul)
    db.insert("a", t1)  # the first schema again, after others
    db.delete("a", t2)
    db.commit()
    assert view.rows() == [(24, D("-1.50"), 4)]


def _decimal_array(words: list[int], typ: pa.DataType) -> pa.Array:
    buf = np.array(words, dtype=np.int64).tobytes()
    return pa.Array.from_buffers(typ, len(words) // 2, [None, pa.py_buffer(buf)])


@pytest.mark.parametrize(
    "words,ok",
    [
        ([150, 0, -225, -1, 0, 0], True),  # negative values: high word -1
        ([150, 0, 7, 0], True),
        ([150, 0, 7, 1], False),  # a high word of 1 over a small low word
        ([5, 0, -3, 0], False),  # a negative low word without its sign
        ([5, -1, 3, 0], False),  # a sign word over a positive low word
    ],
)
def test_decimal_words_must_fit(words: list[int], ok: bool) -> None:
    db = dsql.Database()
    db.execute("CREATE TABLE a (p DECIMAL(15,2))")
    arr = _decimal_array(words, pa.decimal128(15, 2))
    tbl = pa.table({"p": arr})
    view = db.view("SELECT p FROM a")
    if not ok:
        with pytest.raises(dsql.DataError, match="does not fit"):
            db.insert("a", tbl)
            db.commit()
        return
    db.insert("a", tbl)
    db.commit()
    want = sorted(D(w) / 100 for w in words[0::2])
    assert sorted(r[0] for r in view.rows()) == want


def test_scalar_aggregates_count_their_constant_row_once() -> None:
    """An aggregate without GROUP BY keeps one row on empty input by a constant row that
    adds 1 to the row count: every count, sum and average must leave it out, also over no
    rows at all, over rows all deleted again, and as a scalar subquery."""
    ddl = ["CREATE TABLE a (k BIGINT NOT NULL, v INT, p DECIMAL(6,2) NOT NULL)"]
    views = [
        "SELECT count(*) AS c, count(v) AS cv, count(p) AS cp, sum(v) AS sv, sum(p) AS sp, "
        "avg(p) AS ap, count(1) AS c1 FROM a",
        "SELECT count(*) AS c, sum(p) AS sp FROM a WHERE v > 100",
        "SELECT k FROM a WHERE p > (SELECT avg(p) FROM a WHERE v IS NOT NULL)",
        "SELECT (SELECT count(*) FROM a) AS n, (SELECT count(p) FROM a WHERE k > 2) AS m",
    ]
    rows = [(1, 5, D("1.50")), (2, None, D("-2.25")), (3, 7, D("0.25")), (4, None, D("9.00"))]
    commits: list[list[Ins | Del]] = [
        [],
        [Ins("a", rows)],
        [Del("a", rows[:2])],
        [Del("a", rows[2:])],
        [Ins("a", rows[1:3])],
    ]
    o = Oracle(ddl)
    for v in views:
        o.view(v, duck=v.replace("avg(p)", "CAST(avg(p) AS DECIMAL(10,6))"))
    for c in commits:
        o.commit(c)


@pytest.mark.parametrize("sql", [v for v, moved in VIEWS if moved])
def test_prefilter_alone_on_arrow_batches(sql: str) -> None:
    """One view per database, so its prefilter meets the Arrow columns unconverted (Arrow's
    kernels compare them) and equal values are common (the boundary of each comparison)."""
    o = ArrowOracle(DDL)
    o.view(sql)
    for c in _commits():
        o.commit(c)


def _with_garbage_under_nulls(arr: pa.Array, junk: int) -> pa.Array:
    """``arr`` (int32 / int64 / date32 / decimal128) with ``junk`` written into the data
    buffer under every NULL (Arrow leaves those slots undefined), sliced so it starts at
    an offset."""
    width = arr.type.byte_width
    data = np.frombuffer(arr.buffers()[1], dtype=np.uint8).copy()
    word = np.dtype(f"int{8 * min(width, 8)}")
    view = data.view(word).reshape(len(arr), -1)
    nulls = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    view[nulls] = junk
    pad = pa.Array.from_buffers(
        arr.type, len(arr), [arr.buffers()[0], pa.py_buffer(data.tobytes())], arr.null_count
    )
    front = pa.array([None], arr.type)
    return pa.concat_arrays([front, pad]).slice(1)


def test_prefilter_reads_arrow_buffers_exactly() -> None:
    """Comparisons decided on the Arrow buffers in place: sliced arrays (an offset), junk
    under NULLs, negative decimals, a literal outside an INT column's range, and decimal
    words that do not fit 64 bits (refused, never compared wrongly)."""
    db = dsql.Database()
    db.execute("CREATE TABLE a (k BIGINT NOT NULL, i INT, p DECIMAL(15,2), d DATE)")
    views = {
        "lt": db.view("SELECT k FROM a WHERE p < 0.50"),
        "ge": db.view("SELECT k FROM a WHERE i >= -2 AND d >= DATE '1995-03-01'"),
        "big": db.view("SELECT k FROM a WHERE i < 3000000000"),
        "neg": db.view("SELECT k FROM a WHERE i > -3000000000 AND p >= -1.00"),
    }
    rng = np.random.default_rng(5)
    n = 200
    ks = np.arange(n)
    iv = [None if x % 7 == 0 else int(x) for x in rng.integers(-5, 5, n)]
    pv = [None if x % 5 == 0 else D(int(x)) / 100 for x in rng.integers(-300, 300, n)]
    base = dt.date(1995, 1, 1)
    dv = [None if x % 6 == 0 else base + dt.timedelta(days=int(x)) for x in rng.integers(0, 150, n)]
    tbl = pa.table(
        {
            "k": pa.array(ks, pa.int64()),
            "i": _with_garbage_under_nulls(pa.array(iv, pa.int32()), -7),
            "p": _with_garbage_under_nulls(pa.array(pv, pa.decimal128(15, 2)), -1),
            "d": _with_garbage_under_nulls(pa.array(dv, pa.date32()), 9000),
        }
    )
    db.insert("a", tbl)
    db.commit()

    def want(f: Any) -> list[tuple[int]]:
        return sorted(
            (k,) for k, i, p, d in zip(ks.tolist(), iv, pv, dv, strict=True) if f(i, p, d)
        )

    def got(name: str) -> list[tuple[int]]:
        return sorted(views[name].rows())

    assert got("lt") == want(lambda i, p, d: p is not None and p < D("0.50"))
    assert got("ge") == want(
        lambda i, p, d: i is not None and d is not None and i >= -2 and d >= dt.date(1995, 3, 1)
    )
    assert got("big") == want(lambda i, p, d: i is not None)
    assert got("neg") == want(lambda i, p, d: i is not None and p is not None and p >= -1)
    # a decimal whose 128-bit integer is not its low word: refused as the column is read
    bad = pa.table(
        {
            "k": pa.array([1000, 1001], pa.int64()),
            "i": pa.array([1, 1], pa.int32()),
            "p": _decimal_array([5, 1, 7, 0], pa.decimal128(15, 2)),
            "d": pa.array([base, base], pa.date32()),
        }
    )
    with pytest.raises(dsql.DataError, match="does not fit"):
        db.insert("a", bad)
        db.commit()


def test_top_k_of_groups_as_their_sums_move() -> None:
    """A top-k over an aggregate's groups (it reads only the least rows of its index at
    each commit): groups whose sums move past each other, ties broken by the key, groups
    that vanish, an OFFSET."""
    rng = random.Random(3)
    ddl = ["CREATE TABLE s (g INT NOT NULL, h STRING, v INT NOT NULL)"]
    views = [
        "SELECT g, h, sum(v) AS t, count(*) AS n FROM s GROUP BY g, h ORDER BY t DESC, g, h "
        "LIMIT 3",
        "SELECT g, sum(v) AS t FROM s GROUP BY g ORDER BY t, g LIMIT 2 OFFSET 1",
        "SELECT g, max(v) AS m FROM s GROUP BY g ORDER BY m DESC, g LIMIT 70",
        "SELECT g, v FROM s ORDER BY v DESC, g LIMIT 4",
    ]
    live: list[tuple[Any, ...]] = []
    commits: list[list[Ins | Del]] = []
    for _ in range(8):
        ins = [
            (rng.randrange(200), rng.choice(["a", "b", None]), rng.randrange(-5, 50))
            for _ in range(60)
        ]
        dels = rng.sample(live, min(len(live), 40))
        for r in dels:
            live.remove(r)
        live.extend(ins)
        commits.append([Ins("s", ins), *([Del("s", dels)] if dels else [])])
    o = Oracle(ddl)
    for v in views:
        o.view(v, ordered=True)
    for c in commits:
        o.commit(c)
