"""Aggregates against DuckDB after every commit: count/sum/avg/min/max and DISTINCT forms,
NULLs skipped, NULL group keys together, GROUP BY expressions, HAVING, SELECT DISTINCT, and
the global aggregate that keeps its one row while its input empties and refills."""

from __future__ import annotations

import math
from decimal import Decimal as D

import pytest
from oracle import Del, Ins, Oracle, case, check_stream
from sqldata import WIDE_DDL, WIDE_STREAM

import ddflow.sql as dsql

# Spark's avg of DECIMAL(10,2) is a DECIMAL(14,6), DuckDB's a DOUBLE: round DuckDB's.
GLOBAL = [
    case(
        "SELECT count(*), count(i), count(s), count(d), count(bo) FROM w",
        id="count-star-vs-count-column",
    ),
    case("SELECT sum(ti), sum(si), sum(i), sum(bi), sum(de), sum(db) FROM w", id="sums"),
    case(
        "SELECT avg(i), avg(db), avg(de) FROM w",
        "SELECT avg(i), avg(db), round(avg(de), 6) FROM w",
        id="avgs",
    ),
    case("SELECT min(i), max(i), min(de), max(de), min(db), max(db) FROM w", id="min-max-numbers"),
    case("SELECT min(s), max(s), min(vc), max(ch) FROM w", id="min-max-strings"),
    case(
        "SELECT min(d), max(d), min(ts), max(ts), min(bo), max(bo) FROM w", id="min-max-dates-bools"
    ),
    case(
        "SELECT count(*), sum(i), max(s) FROM w WHERE i > 100000000", id="global-aggregate-no-match"
    ),
    case("SELECT count(*) FROM w", id="count-star-only"),
    case("SELECT sum(i) FROM w", id="sum-only"),
    case("SELECT max(d) FROM w", id="max-only"),
    case("SELECT count(DISTINCT s) FROM w", id="count-distinct"),
    case("SELECT sum(DISTINCT i) FROM w", id="sum-distinct"),
    case("SELECT avg(DISTINCT i) FROM w", id="avg-distinct"),
    case("SELECT sum(DISTINCT de) FROM w", id="sum-distinct-decimal"),
    case(
        "SELECT count(DISTINCT s), count(DISTINCT i), sum(DISTINCT i), avg(DISTINCT i) FROM w",
        id="several-distinct-aggregates",
    ),
    case("SELECT count(DISTINCT de), sum(DISTINCT de) FROM w", id="count-and-sum-distinct"),
    case("SELECT count(DISTINCT i), sum(i) FROM w", id="distinct-and-plain-aggregate"),
    case(
        "SELECT count(*) + 1, sum(i) * 2, max(i) - min(i) FROM w", id="expressions-over-aggregates"
    ),
    case(
        "SELECT sum(i + ti), max(upper(s)), count(CASE WHEN i > 0 THEN 1 END) FROM w",
        id="aggregates-over-expressions",
    ),
    case("SELECT sum(CASE WHEN i > 0 THEN de ELSE 0 END) FROM w", id="conditional-sum"),
]

GROUPED = [
    case("SELECT s, count(*), count(i), sum(de) FROM w GROUP BY s", id="group-by-string-nulls"),
    case("SELECT bo, d, count(*) FROM w GROUP BY bo, d", id="group-by-two-with-nulls"),
    case("SELECT i, min(s), max(s), min(ts) FROM w GROUP BY i", id="min-max-per-group"),
    case(
        "SELECT id, avg(de), avg(i) FROM w GROUP BY id",
        "SELECT id, round(avg(de), 6), avg(i) FROM w GROUP BY id",
        id="avg-per-group",
    ),
    case("SELECT i % 2, sum(bi) FROM w GROUP BY i % 2", id="group-by-expression"),
    case("SELECT upper(s) AS u, count(*) FROM w GROUP BY upper(s)", id="group-by-function"),
    case(
        "SELECT CASE WHEN i > 0 THEN 'p' ELSE 'n' END AS k, count(*) FROM w GROUP BY 1",
        id="group-by-ordinal",
    ),
    case("SELECT s AS k, count(*) FROM w GROUP BY k", id="group-by-alias"),
    case(
        "SELECT ch, count(DISTINCT s), sum(DISTINCT ti) FROM w GROUP BY ch",
        id="distinct-aggregates-per-group",
    ),
    case("SELECT vc, count(*) FROM w GROUP BY vc HAVING count(*) > 1", id="having-count"),
    case("SELECT vc, sum(de) FROM w GROUP BY vc HAVING sum(de) > 0", id="having-sum"),
    case("SELECT s FROM w GROUP BY s HAVING min(i) IS NULL", id="having-aggregate-not-selected"),
    case(
        "SELECT s, count(*) FROM w GROUP BY s HAVING s LIKE 'a%' OR count(*) > 1",
        id="having-on-key-and-aggregate",
    ),
    case("SELECT count(*) FROM w HAVING count(*) > 3", id="having-on-global-aggregate"),
    case(
        "SELECT d, count(*) FROM w WHERE i IS NOT NULL GROUP BY d HAVING max(i) > 0",
        id="where-group-having",
    ),
    case("SELECT s, i FROM w GROUP BY s, i", id="group-by-without-aggregates"),
]

DISTINCT = [
    case("SELECT DISTINCT s, bo FROM w", id="distinct-with-nulls"),
    case("SELECT DISTINCT upper(s) FROM w", id="distinct-expression"),
    case("SELECT DISTINCT de, db FROM w", id="distinct-numbers"),
    case("SELECT DISTINCT d FROM w WHERE d IS NOT NULL", id="distinct-dates"),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), GLOBAL)
def test_global_aggregate(sql: str, duck: str | None, ordered: bool) -> None:
    """Aggregates without GROUP BY: one row always, NULLs skipped, empty input gives 0/NULL."""
    check_stream(WIDE_DDL, [(sql, duck, ordered)], WIDE_STREAM, create_after=1)


@pytest.mark.parametrize(("sql", "duck", "ordered"), GROUPED)
def test_grouped_aggregate(sql: str, duck: str | None, ordered: bool) -> None:
    """GROUP BY columns and expressions (NULL keys in one group) and HAVING."""
    check_stream(WIDE_DDL, [(sql, duck, ordered)], WIDE_STREAM, create_after=1)


@pytest.mark.parametrize(("sql", "duck", "ordered"), DISTINCT)
def test_select_distinct(sql: str, duck: str | None, ordered: bool) -> None:
    """SELECT DISTINCT keeps one of each row, NULLs equal for this purpose."""
    check_stream(WIDE_DDL, [(sql, duck, ordered)], WIDE_STREAM, create_after=1)


def test_global_aggregate_on_empty_table_before_any_row() -> None:
    """A global aggregate over a table that never held a row is (0, NULL, NULL, NULL)."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT, s STRING, c DECIMAL(5,2))")
    v = db.view("SELECT count(*), sum(a), max(s), avg(c) FROM t")
    db.commit()
    assert v.rows() == [(0, None, None, None)]


def test_global_aggregate_keeps_its_row_as_input_comes_and_goes() -> None:
    """The one row of a global aggregate survives emptying: (0, NULL) then back again."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT)")
    v = db.view("SELECT count(*), sum(a), count(a) FROM t")
    seen = []
    for change in [
        ("+", (1,)),
        ("+", (None,)),
        ("-", (1,)),
        ("-", (None,)),
        ("+", (5,)),
        ("-", (5,)),
    ]:
        (db.insert if change[0] == "+" else db.delete)("t", [change[1]])
        db.commit()
        seen.append(v.rows())
    assert seen == [
        [(1, 1, 1)],
        [(2, 1, 1)],
        [(1, None, 0)],
        [(0, None, 0)],
        [(1, 5, 1)],
        [(0, None, 0)],
    ]


def test_sum_returns_to_null_when_only_nulls_remain() -> None:
    """sum/min/max/avg go back to NULL when the last non-NULL value of a group leaves."""
    o = Oracle("CREATE TABLE t (g STRING, x DECIMAL(8,2))")
    o.view("SELECT g, sum(x), min(x), max(x), count(x), count(*) FROM t GROUP BY g")
    o.view("SELECT g, avg(x) FROM t GROUP BY g", "SELECT g, round(avg(x), 6) FROM t GROUP BY g")
    o.commit([Ins("t", [("a", D("1.00")), ("a", None), ("b", D("-2.50"))])])
    o.commit([Del("t", [("a", D("1.00"))])])
    o.commit([Ins("t", [("a", D("0.00"))]), Del("t", [("b", D("-2.50"))])])
    o.commit([Del("t", [("a", D("0.00")), ("a", None)])])


def test_min_max_follow_retractions() -> None:
    """Deleting the minimum reveals the next one; deleting every copy of it, the one after."""
    o = Oracle("CREATE TABLE t (g INT, x INT, s STRING)")
    o.view("SELECT g, min(x), max(x), min(s), max(s) FROM t GROUP BY g")
    rows = [(1, 5, "m"), (1, 3, "c"), (1, 3, "c"), (1, 9, "z"), (2, None, None), (2, 4, "d")]
    o.commit([Ins("t", rows)])
    o.commit([Del("t", [(1, 3, "c")])])
    o.commit([Del("t", [(1, 3, "c"), (1, 9, "z")])])
    o.commit([Ins("t", [(1, 1, "a"), (1, 10, "zz")]), Del("t", [(2, 4, "d")])])


def test_count_distinct_follows_duplicates() -> None:
    """count(DISTINCT x) drops a value only when its last copy leaves."""
    o = Oracle("CREATE TABLE t (g INT, x STRING)")
    o.view("SELECT g, count(DISTINCT x), count(x) FROM t GROUP BY g")
    o.commit([Ins("t", [(1, "a"), (1, "a"), (1, "b"), (1, None), (2, None)])])
    o.commit([Del("t", [(1, "a")])])
    o.commit([Del("t", [(1, "a")])])
    o.commit([Del("t", [(1, "b"), (1, None)])])


def test_having_flips_as_groups_change() -> None:
    """A group enters and leaves a HAVING view as its aggregate crosses the bound."""
    o = Oracle("CREATE TABLE t (g INT, x INT)")
    o.view("SELECT g, sum(x) FROM t GROUP BY g HAVING sum(x) >= 10")
    o.commit([Ins("t", [(1, 5), (2, 20)])])
    o.commit([Ins("t", [(1, 5)]), Del("t", [(2, 20)]), Ins("t", [(2, 9)])])
    o.commit([Del("t", [(1, 5)])])
    o.commit([Ins("t", [(2, 1), (1, 5)])])


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT g, count(*), avg(f) FROM fl GROUP BY g",
        "SELECT g, sum(f), max(k) FROM fl GROUP BY g",
        "SELECT g, count(*) FROM fl GROUP BY g HAVING sum(f) > 0",
    ],
    ids=["avg", "sum-with-max", "having"],
)
def test_group_whose_float_sum_does_not_return_to_zero_is_gone(sql: str) -> None:
    """A group's rows all deleted while its floating-point sum keeps a residue
    (0.1 + 0.2 - 0.1 - 0.2 is not 0.0 in binary floating point): the group is gone, as
    in DuckDB, with or without other parts (max) beside the sums; then it comes back."""
    ddl = "CREATE TABLE fl (k INT, g STRING, f DOUBLE)"
    a, b, c = (1, "x", 0.1), (2, "x", 0.2), (3, "y", 1.5)
    check_stream(
        ddl,
        [sql],
        [
            [Ins("fl", [a, b, c])],
            [Del("fl", [a])],
            [Del("fl", [b])],  # x's sum is now a residue of about 2.8e-17
            [Ins("fl", [(4, "x", 0.7)])],
            [Del("fl", [(4, "x", 0.7), c])],
        ],
    )


# (DuckDB's count_if is NULL where no row is TRUE; Spark's, like count, is 0: DuckDB is
# asked the count of a CASE instead)
@pytest.mark.parametrize(
    ("sql", "duck"),
    [
        (
            "SELECT g, count_if(a > 0) AS c, bool_and(a > 0) AS x, bool_or(b) AS y "
            "FROM t GROUP BY g",
            "SELECT g, count(CASE WHEN a > 0 THEN 1 END) AS c, bool_and(a > 0) AS x, "
            "bool_or(b) AS y FROM t GROUP BY g",
        ),
        (
            "SELECT count_if(b) AS c, bool_and(b) AS x, bool_or(a > 5) AS y FROM t",
            "SELECT count(CASE WHEN b THEN 1 END) AS c, bool_and(b) AS x, bool_or(a > 5) AS y "
            "FROM t",
        ),
        (
            "SELECT g FROM t GROUP BY g HAVING bool_or(b) AND count_if(a IS NULL) = 0",
            None,
        ),
    ],
)
def test_count_if_bool_and_bool_or_equal_duckdb(sql: str, duck: str | None) -> None:
    """count_if counts the rows where its condition is TRUE (0 where none is, as Spark);
    bool_and / bool_or are the least / greatest BOOLEAN (NULL over no values), as rows
    come and go."""
    rows = [(1, 1, True), (1, -1, None), (2, None, None), (3, 5, False), (3, 6, True)]
    commits = [
        [Ins("t", rows)],
        [Del("t", [(1, -1, None), (3, 6, True)]), Ins("t", [(2, 7, True)])],
        [Del("t", [(2, None, None)])],
        [Del("t", [(1, 1, True), (3, 5, False), (2, 7, True)])],
    ]
    check_stream(["CREATE TABLE t (g INT, a INT, b BOOLEAN)"], [(sql, duck, False)], commits)


def _distinct_tuples(cols: str, where: str = "TRUE") -> str:
    """DuckDB's count of the distinct non-NULL tuples of ``cols`` in the group of ``w1``."""
    present = " AND ".join(f"{c} IS NOT NULL" for c in cols.split(", "))
    return (
        f"(SELECT count(*) FROM (SELECT DISTINCT {cols} FROM w w2 WHERE "
        f"w2.s IS NOT DISTINCT FROM w1.s AND {present} AND {where}))"
    )


# count(DISTINCT a, b) counts the distinct tuples with no NULL among them (DuckDB has no
# such call: it is asked the count of a DISTINCT subquery per group)
@pytest.mark.parametrize(
    ("sql", "duck"),
    [
        (
            "SELECT s, count(DISTINCT i, vc) AS n, count(DISTINCT de, db, d) AS m, "
            "count(*) AS k FROM w GROUP BY s",
            f"SELECT s, {_distinct_tuples('i, vc')} AS n, {_distinct_tuples('de, db, d')} AS m, "
            "count(*) AS k FROM w w1 GROUP BY s",
        ),
        (
            "SELECT count(DISTINCT bo, ts) AS n, count(DISTINCT s, ch) AS m FROM w",
            "SELECT (SELECT count(*) FROM (SELECT DISTINCT bo, ts FROM w WHERE bo IS NOT NULL "
            "AND ts IS NOT NULL)) AS n, (SELECT count(*) FROM (SELECT DISTINCT s, ch FROM w "
            "WHERE s IS NOT NULL AND ch IS NOT NULL)) AS m",
        ),
    ],
)
def test_count_distinct_of_several_columns_equals_duckdb(sql: str, duck: str) -> None:
    check_stream([WIDE_DDL], [(sql, duck, False)], WIDE_STREAM)


def test_only_count_takes_distinct_several_columns() -> None:
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT, b INT)")
    with pytest.raises(dsql.SQLError, match="takes one argument"):
        db.view("SELECT sum(DISTINCT a, b) FROM t")


# DuckDB's spread aggregates have Spark's forms: NULL over no values, and the sample forms
# NULL over one value too
@pytest.mark.parametrize(
    ("sql", "duck"),
    [
        (
            "SELECT s, var_samp(i) AS a, var_pop(si) AS b, stddev(de) AS c, "
            "stddev_pop(db) AS d, variance(bi) AS e, std(ti) AS f FROM w GROUP BY s",
            "SELECT s, var_samp(i) AS a, var_pop(si) AS b, stddev_samp(de) AS c, "
            "stddev_pop(db) AS d, var_samp(bi) AS e, stddev_samp(ti) AS f FROM w GROUP BY s",
        ),
        (
            "SELECT var_samp(db) AS a, stddev_samp(de) AS b, var_pop(i) AS c, count(*) AS n FROM w",
            None,
        ),
        (
            "SELECT s FROM w GROUP BY s HAVING coalesce(stddev_pop(i), 0) < 10",
            None,
        ),
    ],
)
def test_variance_and_stddev_equal_duckdb(sql: str, duck: str | None) -> None:
    check_stream([WIDE_DDL], [(sql, duck, False)], WIDE_STREAM)


def test_variance_of_doubles_is_exact_where_naive_sums_lose_it() -> None:
    """The sums of the values and of their squares are exact, so a spread of values near
    1e9 (and after a far larger value came and went) is the exact one rounded once."""
    db = dsql.Database()
    db.execute("CREATE TABLE u (c DOUBLE, e DECIMAL(20,2))")
    v = db.view("SELECT var_samp(c), stddev_pop(c), var_pop(e) FROM u")
    vals = [1e9 + i * 0.25 for i in range(10)]
    db.insert("u", [(x, D(x).quantize(D("0.01"))) for x in vals + [3e15 + 1.0]])
    db.commit()
    db.delete("u", [(3e15 + 1.0, D("3000000000000001.00"))])
    db.commit()
    # exact: 0.25^2 * var(0..9) = 0.0625 * 55/6 (sample), 0.0625 * 8.25 (population)
    ((a, b, c),) = v.rows()
    assert a == 0.0625 * 55 / 6
    assert b == math.sqrt(0.0625 * 8.25)
    assert c == 0.0625 * 8.25


def test_variance_at_the_edges_of_doubles() -> None:
    """As Spark: NULL over one value for the sample forms, NaN with an infinity or NaN in
    the group; a spread beyond a DOUBLE is infinite (the exact value, rounded), where
    Spark's running update gives NaN."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (g INT, x DOUBLE)")
    v = db.view(
        "SELECT g, var_samp(x), var_pop(x), stddev_samp(x), stddev_pop(x) FROM t GROUP BY g"
    )
    inf, nan = math.inf, math.nan
    db.insert(
        "t",
        [(1, 2.0), (2, 1.0), (2, inf), (3, inf), (4, nan), (4, 1.0), (5, None), (6, 1e308)]
        + [(6, -1e308)],
    )
    db.commit()
    got = {r[0]: r[1:] for r in v.rows()}
    assert got[1] == (None, 0.0, None, 0.0)
    assert all(math.isnan(x) for x in got[2] + got[4])
    assert got[3][0] is None and got[3][2] is None
    assert math.isnan(got[3][1]) and math.isnan(got[3][3])
    assert got[5] == (None, None, None, None)
    assert got[6] == (inf, inf, inf, inf)
    db.delete("t", [(2, inf), (4, nan), (6, -1e308)])  # (exact again once they leave)
    db.commit()
    got = {r[0]: r[1:] for r in v.rows()}
    assert got[2] == (None, 0.0, None, 0.0) and got[4] == got[2] and got[6] == got[2]


def test_variance_needs_a_number() -> None:
    db = dsql.Database()
    db.execute("CREATE TABLE t (s STRING, b BOOLEAN)")
    with pytest.raises(dsql.SQLError, match="needs a number"):
        db.view("SELECT stddev(b) FROM t")
    # text is read as a DOUBLE (Spark, SQLite)
    view = db.view("SELECT var_samp(s) FROM t")
    db.insert("t", [("1", None), ("3", None), (None, True)])
    db.commit()
    assert view.rows() == [(2.0,)]
    with pytest.raises(dsql.UnsupportedSQL, match="DISTINCT"):
        db.view("SELECT var_pop(DISTINCT 1) FROM t")
