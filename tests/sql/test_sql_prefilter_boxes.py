"""A prefilter's comparisons of columns with literals joined by AND, decided as one closed
interval per column (two comparisons of a column as one pass over it). Each view must keep
exactly the rows DuckDB keeps: boundaries on both sides, several bounds on a side,
intervals that are empty, that hold every value of a narrow column, that reach past a
column's width (TINYINT, SMALLINT, INT read in place from Arrow buffers) or span nearly
all of BIGINT, equalities written as two bounds, literals on the left, comparisons that
are not intervals (``<>``, two columns) beside them, NULLs (and junk in the Arrow slots
under them).
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal as D
from typing import Any

import pyarrow as pa
import pytest
from oracle import Del, Ins, Oracle
from test_sql_speedups import ArrowOracle, _with_garbage_under_nulls

import ddflow.sql as dsql

DDL = [
    "CREATE TABLE w (k BIGINT NOT NULL, t TINYINT, h SMALLINT, i INT, b BIGINT, "
    "q DECIMAL(15,2), d DATE)",
]

I64_MAX = 2**63 - 1
I64_MIN = -(2**63)

VIEWS = [
    # two bounds on a narrow column (int8 in place)
    "SELECT k FROM w WHERE t >= -3 AND t <= 4",
    "SELECT k FROM w WHERE t > -3 AND t < 4 AND t <> 0",
    # every value of the column's width: only NULL is left out
    "SELECT k FROM w WHERE t >= -128 AND t <= 127",
    # reaching past the width on one side, or wholly outside it
    "SELECT k FROM w WHERE t > 100 AND t < 300",
    "SELECT k FROM w WHERE t >= -300 AND t < -126",
    "SELECT k FROM w WHERE t > 200 AND i > 0",
    "SELECT k FROM w WHERE h BETWEEN -32768 AND -1 AND i > 0",
    "SELECT k FROM w WHERE i > -3000000000 AND i < 3 AND h >= -2",
    # one value as two bounds, and an equality beside a bound
    "SELECT k FROM w WHERE i >= 2 AND i <= 2",
    "SELECT k FROM w WHERE i = 2 AND i >= 2 AND b < 6",
    # several bounds on each side: the tightest of each holds
    "SELECT k FROM w WHERE i >= -1 AND i > 1 AND i <= 5 AND i < 4",
    "SELECT k FROM w WHERE i < 4 AND i <= 5 AND i > 1 AND i >= -1",
    "SELECT k FROM w WHERE q >= 0.05 AND q > 0.04 AND q <= 3.00 AND q < 0.08",
    # empty intervals
    "SELECT k FROM w WHERE i > 5 AND i < 3",
    "SELECT k FROM w WHERE i >= 3 AND i <= 2 AND t > 0",
    # nearly all of BIGINT: the interval's width does not fit a signed word
    f"SELECT k FROM w WHERE b >= -5 AND b <= {I64_MAX - 1}",
    f"SELECT k FROM w WHERE b > {I64_MIN + 1} AND b < {I64_MAX}",
    f"SELECT k FROM w WHERE b >= {I64_MIN + 1} AND b <= 4",
    f"SELECT k FROM w WHERE b > {I64_MAX - 1} AND b <= {I64_MAX}",
    # literals on the left
    "SELECT k FROM w WHERE 3 > i AND -2 <= i AND 5 >= t",
    # decimals and dates (TPC-H Q6's shape)
    "SELECT k, q FROM w WHERE d >= DATE '1995-01-01' AND d < DATE '1995-07-01' "
    "AND q BETWEEN 0.05 AND 0.07 AND i < 4",
    "SELECT k FROM w WHERE q > -1.25 AND q <= 3.00 AND q <> 0.00",
    "SELECT k FROM w WHERE q >= -0.50 AND q < 0.50 AND d <= DATE '1995-03-01'",
    # beside comparisons of two columns
    "SELECT k FROM w WHERE i < t AND i >= -2 AND t <= 5",
]


def _rows(rng: random.Random, n: int, k0: int) -> list[tuple[Any, ...]]:
    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.15 else v

    day = dt.date(1994, 12, 20)
    big = [I64_MAX, I64_MIN, I64_MAX - 1, I64_MIN + 1, 0, -5, -6, 4, 5, 6]
    out = []
    for k in range(k0, k0 + n):
        out.append(
            (
                k,
                maybe(rng.choice([-128, 127, -127, -126, 100, 101, *range(-5, 7)])),
                maybe(rng.choice([-32768, 32767, -1, 0, -2, -3, 1, 2])),
                maybe(rng.randrange(-4, 7)),
                maybe(rng.choice(big)),
                maybe(
                    D(rng.choice([-126, -125, -124, -51, -50, -49, 0, 4, 5, 6, 7, 8, 300, 301]))
                    / 100
                ),
                maybe(day + dt.timedelta(days=rng.randrange(0, 200))),
            )
        )
    return out


def _commits() -> list[list[Ins | Del]]:
    rng = random.Random(11)
    first = _rows(rng, 150, 0)
    second = _rows(rng, 120, 150)
    return [
        [Ins("w", first)],
        [Ins("w", second), Del("w", first[:40])],
        [Del("w", second[20:80]), Ins("w", first[:9])],
    ]


@pytest.mark.parametrize("arrow", [False, True], ids=["tuples", "arrow"])
@pytest.mark.parametrize("sql", VIEWS)
def test_intervals_per_column_equal_duckdb(sql: str, arrow: bool) -> None:
    """One view per database, so its prefilter meets the batch's columns as they came
    (Arrow buffers of each width read in place, or values converted from tuples)."""
    db = dsql.Database()
    for ddl in DDL:
        db.execute(ddl)
    scan = next(x for x in db.explain(sql).splitlines() if "Scan w " in x)
    assert " where " in scan  # (decided in the scan)
    o = (ArrowOracle if arrow else Oracle)(DDL)
    o.view(sql)
    for c in _commits():
        o.commit(c)


def test_intervals_read_past_junk_under_nulls() -> None:
    """Columns read in place whose slots under NULLs hold values inside the intervals,
    sliced so they start at an offset: NULL rows are never kept."""
    db = dsql.Database()
    db.execute("CREATE TABLE a (k BIGINT NOT NULL, t TINYINT, i INT, q DECIMAL(15,2), d DATE)")
    view = db.view(
        "SELECT k FROM a WHERE t >= 1 AND t <= 3 AND i BETWEEN -1 AND 1 "
        "AND q > 0.00 AND q < 0.10 AND d >= DATE '1995-01-01' AND d < DATE '1995-01-03'"
    )
    rng = random.Random(3)
    n = 300
    base = dt.date(1995, 1, 1)
    tv = [None if rng.random() < 0.2 else rng.randrange(0, 5) for _ in range(n)]
    iv = [None if rng.random() < 0.2 else rng.randrange(-2, 3) for _ in range(n)]
    qv = [None if rng.random() < 0.2 else D(rng.randrange(-2, 12)) / 100 for _ in range(n)]
    dv = [
        None if rng.random() < 0.2 else base + dt.timedelta(rng.randrange(-1, 4)) for _ in range(n)
    ]
    tbl = pa.table(
        {
            "k": pa.array(range(n), pa.int64()),
            "t": _with_garbage_under_nulls(pa.array(tv, pa.int8()), 2),
            "i": _with_garbage_under_nulls(pa.array(iv, pa.int32()), 0),
            "q": _with_garbage_under_nulls(pa.array(qv, pa.decimal128(15, 2)), 5),
            "d": _with_garbage_under_nulls(pa.array(dv, pa.date32()), 9131),
        }
    )
    db.insert("a", tbl)
    db.commit()
    want = [
        (k,)
        for k, t, i, q, d in zip(range(n), tv, iv, qv, dv, strict=True)
        if t is not None
        and i is not None
        and q is not None
        and d is not None
        and 1 <= t <= 3
        and -1 <= i <= 1
        and D("0.00") < q < D("0.10")
        and base <= d < base + dt.timedelta(2)
    ]
    assert want and sorted(view.rows()) == want
