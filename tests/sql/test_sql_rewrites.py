"""Plan rewrites against DuckDB after every commit: outer joins that a WHERE condition
makes inner (or one-sided), aggregates grouped by a join key computed without the join,
and aggregates joined on their group keys restricted to the keys a filtered table holds.
The emp / dept stream has NULL keys, duplicate rows on both sides, keys that change under
their matches and both tables emptied and refilled, so a rewrite that is wrong for any of
them shows."""

from __future__ import annotations

from decimal import Decimal as D

import pytest
from oracle import Del, Ins, Oracle, case, check_stream, explain_over
from sqldata import EMP_DDL, EMP_STREAM, WIDE_A, WIDE_B, WIDE_DDL

import ddflow.sql as dsql

OUTER_MADE_INNER = [
    case(
        "SELECT e.name, d.dname FROM emp e LEFT JOIN dept d ON e.dept = d.dept "
        "WHERE d.region = 'EU'",
        id="left-where-right-eq",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e LEFT JOIN dept d ON e.dept = d.dept "
        "WHERE d.region = 'EU' OR d.dname = 'eng'",
        id="left-where-or-of-right",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e LEFT JOIN dept d ON e.dept = d.dept "
        "WHERE d.region = 'EU' OR e.salary > 90",
        id="left-where-or-mixed-stays-left",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e LEFT JOIN dept d ON e.dept = d.dept "
        "WHERE coalesce(d.region, 'none') = 'none'",
        id="left-where-coalesce-stays-left",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e LEFT JOIN dept d ON e.dept = d.dept "
        "WHERE d.dept IS NOT NULL",
        id="left-where-is-not-null",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e LEFT JOIN dept d ON e.dept = d.dept "
        "WHERE NOT (d.dept IS NULL)",
        id="left-where-not-is-null",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e RIGHT JOIN dept d ON e.dept = d.dept "
        "WHERE e.salary > 90",
        id="right-where-left-cmp",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e FULL JOIN dept d ON e.dept = d.dept WHERE e.salary > 90",
        id="full-where-left-side-is-left-join",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e FULL JOIN dept d ON e.dept = d.dept "
        "WHERE d.region = 'EU'",
        id="full-where-right-side-is-right-join",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e FULL JOIN dept d ON e.dept = d.dept "
        "WHERE d.region = 'EU' AND e.salary > 50",
        id="full-where-both-is-inner",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e LEFT JOIN dept d ON e.dept = d.dept "
        "WHERE d.region IS NULL",
        id="left-where-is-null-stays-left",
    ),
]

GROUPED_BY_JOIN_KEY = [
    case(
        "SELECT d.dept, count(*), count(e.id), sum(e.salary), avg(e.salary), "
        "count(d.dname), sum(1), count(1) FROM dept d LEFT JOIN emp e ON e.dept = d.dept "
        "GROUP BY d.dept",
        id="left-join-all-linear",
    ),
    case(
        "SELECT d.dept, count(*), sum(e.salary), min(d.dname) FROM dept d "
        "LEFT JOIN emp e ON e.dept = d.dept GROUP BY d.dept",
        id="left-join-with-min",
    ),
    case(
        "SELECT e.dept, count(*), sum(e.salary), count(d.region) FROM emp e "
        "JOIN dept d ON e.dept = d.dept GROUP BY e.dept",
        id="inner-grouped-by-left-key",
    ),
    case(
        "SELECT d.dept, count(*), sum(e.salary) FROM emp e JOIN dept d "
        "ON e.dept = d.dept GROUP BY d.dept",
        id="inner-grouped-by-right-key",
    ),
    case(
        "SELECT d.dept, count(*), count(e.name), sum(e.mgr) FROM emp e "
        "RIGHT JOIN dept d ON e.dept = d.dept GROUP BY d.dept",
        id="right-join",
    ),
    case(
        "SELECT e.dept, count(*), sum(d.dept) FROM emp e LEFT JOIN dept d "
        "ON e.dept = d.dept GROUP BY e.dept",
        id="left-join-null-key-group",
    ),
    case(
        "SELECT c_count, count(*) AS custdist FROM (SELECT d.dept, count(e.id) AS c_count "
        "FROM dept d LEFT JOIN emp e ON e.dept = d.dept AND e.name <> 'zed' "
        "GROUP BY d.dept) t GROUP BY c_count",
        id="histogram-of-left-join-counts",
    ),
    case(
        "SELECT a.mgr, a.dept, count(*), sum(b.salary), sum(a.salary) FROM emp a "
        "JOIN emp b ON a.dept = b.dept AND a.mgr = b.mgr GROUP BY a.mgr, a.dept",
        id="two-keys-other-order",
    ),
    case(
        "SELECT d.dept, count(*) FROM dept d LEFT JOIN emp e ON e.dept = d.dept "
        "AND e.salary > d.dept GROUP BY d.dept",
        id="residual-not-rewritten",
    ),
    case(
        "SELECT d.dept, d.dname, count(e.id) FROM dept d LEFT JOIN emp e "
        "ON e.dept = d.dept GROUP BY d.dept, d.dname",
        id="more-keys-not-rewritten",
    ),
]

RESTRICTED_GROUPS = [
    case(
        "SELECT e.name FROM emp e, dept d WHERE e.dept = d.dept AND d.region = 'EU' "
        "AND e.salary >= (SELECT avg(e2.salary) FROM emp e2 WHERE e2.dept = d.dept)",
        id="avg-per-filtered-key",
    ),
    case(
        "SELECT d.dname, (SELECT count(*) FROM emp e WHERE e.dept = d.dept) AS n "
        "FROM dept d WHERE d.region = 'US'",
        id="scalar-count-in-select",
    ),
    case(
        "SELECT d.dname, (SELECT sum(e.salary) FROM emp e WHERE e.dept = d.dept) AS s "
        "FROM dept d WHERE d.region <> 'US' OR d.region IS NULL",
        id="scalar-sum-in-select",
    ),
    case(
        "SELECT d.dname FROM dept d WHERE d.region = 'EU' AND "
        "(SELECT max(e.salary) FROM emp e WHERE e.dept = d.dept) > 90",
        id="max-in-where",
    ),
    case(
        "SELECT e.name FROM emp e WHERE e.dept IN (SELECT dept FROM dept "
        "WHERE region = 'EU') AND e.salary > (SELECT 0.5 * sum(e2.salary) FROM emp e2 "
        "WHERE e2.dept = e.dept AND e2.mgr = e.mgr)",
        id="two-key-correlation-via-in",
    ),
    case(
        "SELECT e.name FROM emp e, dept d WHERE e.dept = d.dept AND d.region = 'EU' "
        "AND e.salary > (SELECT 0.5 * sum(e2.salary) FROM emp e2 WHERE e2.dept = d.dept "
        "AND e2.mgr IS NOT NULL AND e2.salary < 110)",
        id="filtered-input-under-the-restriction",
    ),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), OUTER_MADE_INNER)
def test_outer_join_made_inner(sql: str, duck: str | None, ordered: bool) -> None:
    check_stream(EMP_DDL, [(sql, duck, ordered)], EMP_STREAM, create_after=1)


@pytest.mark.parametrize(("sql", "duck", "ordered"), GROUPED_BY_JOIN_KEY)
def test_aggregate_grouped_by_join_key(sql: str, duck: str | None, ordered: bool) -> None:
    check_stream(EMP_DDL, [(sql, duck, ordered)], EMP_STREAM, create_after=1)


@pytest.mark.parametrize(("sql", "duck", "ordered"), RESTRICTED_GROUPS)
def test_restricted_groups(sql: str, duck: str | None, ordered: bool) -> None:
    check_stream(EMP_DDL, [(sql, duck, ordered)], EMP_STREAM, create_after=1)


def _plan(sql: str) -> str:
    return explain_over(EMP_DDL, sql)


def test_rewrites_apply() -> None:
    """The rewrites fire where they should (so the oracle tests above exercise them)."""
    plan = _plan(
        "SELECT e.name FROM emp e LEFT JOIN dept d ON e.dept = d.dept WHERE d.region = 'EU'"
    )
    assert "Join inner" in plan and "Join left" not in plan
    plan = _plan(
        "SELECT e.name FROM emp e LEFT JOIN dept d ON e.dept = d.dept WHERE d.region IS NULL"
    )
    assert "Join left" in plan
    plan = _plan("SELECT e.name FROM emp e FULL JOIN dept d ON e.dept = d.dept WHERE e.salary > 90")
    assert "Join left" in plan and "Join full" not in plan
    plan = _plan(
        "SELECT e.name FROM emp e FULL JOIN dept d ON e.dept = d.dept "
        "WHERE d.region = 'EU' AND e.salary > 50"
    )
    assert "Join inner" in plan
    plan = _plan(
        "SELECT e.name FROM emp e, dept d WHERE e.dept = d.dept AND "
        "d.region = 'EU' AND e.salary >= (SELECT avg(e2.salary) FROM emp e2 "
        "WHERE e2.dept = d.dept)"
    )
    assert "SemiJoin" in plan


def test_restriction_above_the_filters() -> None:
    """The semi join restricting an aggregate's input sits over the input's filters (it
    arranges the rows they keep), and a condition on the scan is the scan's prefilter."""
    plan = _plan(
        "SELECT e.name FROM emp e, dept d WHERE e.dept = d.dept AND d.region = 'EU' "
        "AND e.salary > (SELECT 0.5 * sum(e2.salary) FROM emp e2 WHERE e2.dept = d.dept "
        "AND e2.mgr IS NOT NULL AND e2.salary < 110)"
    )
    lines = plan.splitlines()
    semi = next(i for i, line in enumerate(lines) if "SemiJoin" in line)
    assert "Filter" in lines[semi + 1]
    assert "Scan emp" in lines[semi + 2] and "110" in lines[semi + 2]


def test_grouped_by_join_key_has_no_join() -> None:
    """A count per key of a left join is one total-order count of both sides."""
    plan = _plan(
        "SELECT d.dept, count(e.id) FROM dept d LEFT JOIN emp e ON e.dept = d.dept GROUP BY d.dept"
    )
    assert "without the join" in plan
    plan = _plan(
        "SELECT d.dept, d.dname, count(e.id) FROM dept d LEFT JOIN emp e "
        "ON e.dept = d.dept GROUP BY d.dept, d.dname"
    )
    assert "without the join" not in plan


def test_grouped_by_join_key_counts_of_never_null_columns() -> None:
    """A count of a column its side never holds NULL in is that side's row count (no
    component of its own): per key of a left / right / inner join, with keys that only one
    side holds, duplicates, and deletes that unmatch a key."""
    ddl = [
        "CREATE TABLE c (ck INT NOT NULL, tag STRING NOT NULL, v INT)",
        "CREATE TABLE o (ok INT NOT NULL, ck INT NOT NULL, amt INT NOT NULL, note STRING)",
    ]
    views = [
        "SELECT c.ck, count(o.ok), count(c.tag), count(o.note), count(*), sum(o.amt) "
        "FROM c LEFT JOIN o ON c.ck = o.ck GROUP BY c.ck",
        "SELECT o.ck, count(c.tag), count(o.ok), count(c.v), sum(o.amt) "
        "FROM c RIGHT JOIN o ON c.ck = o.ck GROUP BY o.ck",
        "SELECT c.ck, count(o.ok), count(c.tag), avg(o.amt) FROM c JOIN o ON c.ck = o.ck "
        "GROUP BY c.ck",
        "SELECT n, count(*) FROM (SELECT c.ck, count(o.ok) AS n FROM c LEFT JOIN o "
        "ON c.ck = o.ck GROUP BY c.ck) x GROUP BY n",
    ]
    for v in views:
        assert "without the join" in explain_over(ddl, v), v
    commits = [
        [
            Ins("c", [(1, "a", 5), (2, "b", None), (3, "c", 7), (3, "c", 7)]),
            Ins("o", [(10, 1, 4, "x"), (11, 1, 6, None), (12, 4, 1, "y")]),
        ],
        [Ins("o", [(13, 3, 2, None), (13, 3, 2, None), (14, 2, 9, "z")])],
        [Del("o", [(10, 1, 4, "x"), (11, 1, 6, None)]), Ins("c", [(4, "d", None)])],
        [Del("c", [(3, "c", 7)]), Del("o", [(12, 4, 1, "y")])],
        [Del("c", [(1, "a", 5), (2, "b", None), (3, "c", 7), (4, "d", None)])],
    ]
    check_stream(ddl, views, commits)


def test_grouped_by_join_key_double_and_float_sums() -> None:
    """Sums of doubles per join key (values multiplied by the other side's count)."""
    ddl = [WIDE_DDL, "CREATE TABLE k (i INT, tag STRING)"]
    sql = (
        "SELECT w.i, count(*), sum(w.db), avg(w.db), sum(w.bi) FROM w JOIN k "
        "ON w.i = k.i GROUP BY w.i"
    )
    commits = [
        [Ins("w", WIDE_A), Ins("k", [(1000, "a"), (1000, "b"), (-7, "c"), (None, "n")])],
        [Ins("w", WIDE_B)],
        [Del("k", [(1000, "a")])],
        [Del("w", WIDE_A)],
    ]
    check_stream(ddl, [(sql, None, False)], commits)


def test_restriction_follows_filtered_keys_changing() -> None:
    """The restricted aggregate follows keys entering and leaving the filtered table."""
    o = Oracle(["CREATE TABLE f (k INT, v INT)", "CREATE TABLE d (k INT, tag STRING)"])
    o.view(
        "SELECT f.k, f.v FROM f, d WHERE f.k = d.k AND d.tag = 'x' AND "
        "f.v > (SELECT avg(f2.v) FROM f f2 WHERE f2.k = d.k)"
    )
    o.view("SELECT d.k, (SELECT sum(f.v) FROM f WHERE f.k = d.k) FROM d WHERE d.tag = 'x'")
    o.commit([Ins("f", [(1, 1), (1, 5), (2, 3), (2, 9), (None, 4)])])
    o.commit([Ins("d", [(1, "x"), (2, "y")])])
    o.commit([Del("d", [(2, "y")]), Ins("d", [(2, "x"), (None, "x")])])
    o.commit([Ins("f", [(2, 100), (1, 0)])])
    o.commit([Del("d", [(1, "x")]), Ins("d", [(1, "x"), (1, "x")])])
    o.commit([Del("f", [(2, 3), (2, 9), (2, 100)])])


# -- scalar aggregates met only on a key (``keyed_scalars``) and one min / max alone ---------

SCALAR_DDL = [
    "CREATE TABLE s (k INT NOT NULL, g INT, v DECIMAL(8,2) NOT NULL, w INT)",
    "CREATE TABLE u (k INT, name STRING)",
]

_S = [
    (1, 1, D("5.00"), 3),
    (2, 1, D("9.50"), None),
    (3, 2, D("9.50"), 0),  # the maximum twice
    (4, None, D("-2.00"), 7),
    (4, None, D("-2.00"), 7),  # a duplicate row
    (5, 3, D("0.00"), None),
]

# empty tables first, then rows, the maximum deleted (once, then again), emptied, refilled
SCALAR_STREAM: list[list[Ins | Del]] = [
    [],
    [Ins("s", _S), Ins("u", [(1, "a"), (3, "c"), (4, "d"), (0, "z"), (None, "n")])],
    [Del("s", [_S[1]])],
    [Del("s", [_S[2]]), Ins("s", [(6, 2, D("1.25"), 0)])],
    [Del("s", [*_S[:1], *_S[3:], (6, 2, D("1.25"), 0)]), Del("u", [(0, "z")])],
    [Ins("s", _S[2:4]), Ins("u", [(0, "z")])],
]

KEYED_SCALARS = [
    case("SELECT k, v FROM s WHERE v = (SELECT max(v) FROM s)", id="eq-max"),
    case("SELECT k FROM s WHERE v = (SELECT min(v) FROM s WHERE g IS NOT NULL)", id="eq-min"),
    case("SELECT k FROM s WHERE w = (SELECT max(w) FROM s)", id="eq-max-nullable-arg"),
    case("SELECT k FROM s WHERE w = (SELECT sum(w) FROM s WHERE g = 1)", id="eq-sum"),
    # must stay scalar: count of no rows is 0, which meets w = 0
    case("SELECT k FROM s WHERE w = (SELECT count(*) FROM s WHERE g = 7)", id="eq-count"),
    case("SELECT k FROM s WHERE w = (SELECT count(w) FROM s WHERE g = 1)", id="eq-count-col"),
    # must stay scalar: the aggregate is the side a left join keeps
    case(
        "SELECT m.mx, u.name FROM (SELECT max(k) AS mx FROM s) m LEFT JOIN u ON m.mx = u.k",
        id="kept-side-of-left-join",
    ),
    case(
        "SELECT u.name, m.mx FROM u LEFT JOIN (SELECT max(k) AS mx FROM s) m ON m.mx = u.k",
        id="dropped-side-of-left-join",
    ),
    case("SELECT (SELECT max(v) FROM s) AS mx", id="scalar-alone"),
    # one min / max alone per group, of never-NULL and of nullable arguments
    case("SELECT g, max(v) AS mx FROM s GROUP BY g", id="grouped-max"),
    case("SELECT g, min(k) AS mn, min(k) AS mn2 FROM s GROUP BY g", id="grouped-min-twice"),
    case("SELECT g, max(w) AS mx FROM s GROUP BY g", id="grouped-max-nullable"),
    case("SELECT g, sum(v) AS sv, avg(v) AS av FROM s GROUP BY g", id="grouped-sum-never-null"),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), KEYED_SCALARS)
def test_keyed_scalars(sql: str, duck: str | None, ordered: bool) -> None:
    check_stream(SCALAR_DDL, [(sql, duck, ordered)], SCALAR_STREAM)


def test_keyed_scalars_apply() -> None:
    """The scalar aggregate is made grouped only where a join drops its NULL row."""

    def plan(sql: str) -> str:
        db = dsql.Database()
        for ddl in SCALAR_DDL:
            db.execute(ddl)
        return db.explain(sql)

    assert "Aggregate scalar" not in plan("SELECT k FROM s WHERE v = (SELECT max(v) FROM s)")
    assert "Aggregate scalar" in plan("SELECT k FROM s WHERE w = (SELECT count(*) FROM s)")
    assert "Aggregate scalar" in plan(
        "SELECT m.mx, u.name FROM (SELECT max(k) AS mx FROM s) m LEFT JOIN u ON m.mx = u.k"
    )


# -- a shared partial aggregate restricted to the keys its filter keeps --------------------

PARTIAL_DDL = [
    "CREATE TABLE o (k INT, c INT, t DECIMAL(8,2))",
    "CREATE TABLE l (k INT, q INT)",
]

_O = [
    (1, 2, D("5.00")),
    (2, 1, D("6.00")),
    (3, 1, D("7.00")),
    (3, 1, D("7.00")),  # a duplicate row
    (None, 1, D("1.00")),
]
_L = [(1, 6), (1, 6), (2, 3), (3, 11), (None, 50), (4, 20), (2, 9)]

# sums that cross the threshold both ways, keys of o duplicated, NULL keys on both sides
PARTIAL_STREAM: list[list[Ins | Del]] = [
    [Ins("o", _O), Ins("l", _L)],
    [Del("l", [(2, 9)]), Ins("l", [(3, 1)])],
    [Ins("l", [(2, 9), (2, 1)]), Del("o", [(3, 1, D("7.00"))])],
    [Del("l", [(1, 6)]), Ins("o", [(4, 3, D("9.00")), (None, 2, D("0.50"))])],
    [Del("l", _L[2:4] + [(3, 1), (2, 1)]), Ins("l", [(5, 100)])],
]

RESTRICTED_PARTIALS = [
    case(
        "SELECT o.k, o.c, sum(l.q) AS s FROM o JOIN l ON o.k = l.k "
        "WHERE o.k IN (SELECT k FROM l GROUP BY k HAVING sum(q) > 10) GROUP BY o.k, o.c",
        id="in-having-sum",
    ),
    case(
        "SELECT o.k, o.t, sum(l.q) AS s, count(*) AS n FROM o JOIN l ON o.k = l.k "
        "WHERE o.k IN (SELECT k FROM l GROUP BY k HAVING sum(q) <= 12) GROUP BY o.k, o.t",
        id="in-having-sum-le-with-count",
    ),
    case(
        "SELECT o.k, o.c, sum(l.q) AS s FROM o JOIN l ON o.k = l.k "
        "WHERE o.k IN (SELECT k FROM l GROUP BY k HAVING sum(q) > 10) "
        "AND o.k IN (SELECT k FROM l GROUP BY k HAVING max(q) > 5) GROUP BY o.k, o.c",
        id="two-filtered-aggregates",
    ),
    case(
        "SELECT o.k, o.c, sum(l.q) AS s FROM l JOIN o ON l.k = o.k "
        "WHERE o.k IN (SELECT k FROM l GROUP BY k HAVING sum(q) > 10) GROUP BY o.k, o.c",
        id="partials-on-the-left",
    ),
    case(
        "SELECT o.c, o.k, sum(l.q) AS s FROM l JOIN o ON l.k = o.k "
        "WHERE o.c IN (SELECT k FROM l GROUP BY k HAVING sum(q) > 10) GROUP BY o.k, o.c",
        id="partials-on-the-left-other-column",
    ),
    # must not be restricted: the semi join is on another column, or an anti join
    case(
        "SELECT o.k, o.c, sum(l.q) AS s FROM o JOIN l ON o.k = l.k "
        "WHERE o.c IN (SELECT k FROM l GROUP BY k HAVING sum(q) > 10) GROUP BY o.k, o.c",
        id="in-on-other-column",
    ),
    case(
        "SELECT o.k, o.c, sum(l.q) AS s FROM o JOIN l ON o.k = l.k "
        "WHERE NOT EXISTS (SELECT 1 FROM (SELECT k FROM l GROUP BY k HAVING sum(q) > 10) h "
        "WHERE h.k = o.k) GROUP BY o.k, o.c",
        id="not-exists",
    ),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), RESTRICTED_PARTIALS)
def test_restricted_partials(sql: str, duck: str | None, ordered: bool) -> None:
    check_stream(PARTIAL_DDL, [(sql, duck, ordered)], PARTIAL_STREAM)


def test_restricted_partials_apply() -> None:
    """The shared partial aggregate is joined through its filter only where a semi join
    on the join key with that filter's keys guarantees it."""

    def plan(sql: str) -> str:
        db = dsql.Database()
        for ddl in PARTIAL_DDL:
            db.execute(ddl)
        return db.explain(sql)

    def filters(sql: str) -> int:
        return plan(sql).count("Filter (_a0 > 10)")

    body = "SELECT o.k, o.c, sum(l.q) AS s FROM o JOIN l ON o.k = l.k WHERE "
    sub = "(SELECT k FROM l GROUP BY k HAVING sum(q) > 10)"
    left = "SELECT o.k, o.c, sum(l.q) AS s FROM l JOIN o ON l.k = o.k WHERE "
    for head in (body, left):
        # on the join key: the partial aggregate joined through its filter, and that join
        # is the IN's semi join too (one filtered aggregate, no semi join left)
        on_key = head + f"o.k IN {sub} GROUP BY o.k, o.c"
        assert filters(on_key) == 1 and "SemiJoin" not in plan(on_key)
        # on another column: the semi join keeps the filter, the partials are unfiltered
        other = head + f"o.c IN {sub} GROUP BY o.k, o.c"
        assert filters(other) == 1 and "SemiJoin" in plan(other)
