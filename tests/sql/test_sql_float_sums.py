"""Sums and averages of DOUBLE columns against DuckDB as rows come and go: groups of very
different magnitudes side by side in one commit, infinities and NaNs that arrive and
leave (they are counted apart from the finite values, so ``inf`` then its deletion gives
back the finite total, not ``inf - inf``), plain, DISTINCT, grouped, global and over a join.

A finite total is kept by adding and subtracting values, so one that rounded a small value
away next to a much larger one keeps that rounding after the large value leaves; the
streams here keep each group's finite values of one magnitude.
"""

from __future__ import annotations

import pytest
from oracle import Del, Ins, case, check_stream

INF, NAN = float("inf"), float("nan")

DDL = ["CREATE TABLE t (g INT, c DOUBLE)", "CREATE TABLE u (g INT, z INT)"]

_COMMITS: list[list[Ins | Del]] = [
    [Ins("u", [(1, 0), (2, 0), (3, 0), (4, 0), (5, 0)])],
    [Ins("t", [(1, 1e20), (2, 5.0), (3, INF), (4, -INF), (5, 0.5), (5, 0.25), (2, None)])],
    [Ins("t", [(3, 2.0), (4, INF), (5, NAN), (1, 3e20), (6, -1e-300)])],
    [Del("t", [(3, INF), (5, NAN)]), Ins("t", [(2, 7.0), (4, NAN)])],
    [Del("t", [(4, INF), (4, NAN)])],
    [Del("t", [(4, -INF), (1, 1e20)]), Ins("t", [(4, 1.5), (3, -INF), (3, -INF)])],
    [Del("t", [(3, -INF)])],
    [Del("t", [(3, -INF), (3, 2.0), (1, 3e20), (2, 5.0), (2, 7.0), (2, None)])],
]

VIEWS = [
    case("SELECT g, sum(c) AS s, avg(c) AS m, count(c) AS n FROM t GROUP BY g", id="grouped"),
    # (group 1 holds the values of 1e20: apart from them, as the module says)
    case("SELECT sum(c) AS s, avg(c) AS m FROM t WHERE g <> 1", id="global"),
    case(
        "SELECT g, sum(DISTINCT c) AS s, avg(DISTINCT c) AS m, count(DISTINCT c) AS n "
        "FROM t GROUP BY g",
        id="distinct",
    ),
    case(
        "SELECT g, sum(c) AS s, min(c) AS lo, max(c) AS hi, count(DISTINCT c) AS n "
        "FROM t GROUP BY g",
        id="with_min_max",
    ),
    case("SELECT t.g, sum(c) AS s FROM t JOIN u ON t.g = u.g GROUP BY t.g", id="over_join"),
    case("SELECT g FROM t GROUP BY g HAVING sum(c) > 1", id="having"),
    case(
        "SELECT sum(s) AS total FROM (SELECT g, sum(c) AS s FROM t WHERE g <> 1 GROUP BY g)",
        id="sum_of_sums",
    ),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), VIEWS)
def test_float_sums_equal_duckdb(sql: str, duck: str | None, ordered: bool) -> None:
    check_stream(DDL, [(sql, duck, ordered)], _COMMITS)
