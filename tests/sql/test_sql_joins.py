"""Joins against DuckDB after every commit of a stream that updates dimension rows so join
matches flip: inner, LEFT/RIGHT/FULL OUTER (NULL padding retracted and restored), CROSS,
comma joins with WHERE, USING, non-equi conditions, self joins, NULL keys never matching."""

from __future__ import annotations

import pytest
from oracle import Del, Ins, Oracle, case, check_stream
from sqldata import EMP_DDL, EMP_STREAM

JOINS = [
    case("SELECT e.name, d.dname FROM emp e JOIN dept d ON e.dept = d.dept", id="inner"),
    case(
        "SELECT e.name, d.dname FROM emp e INNER JOIN dept d ON d.dept = e.dept "
        "WHERE d.region = 'EU'",
        id="inner-with-where",
    ),
    case(
        "SELECT e.id, e.name, d.dname, d.region FROM emp e LEFT JOIN dept d ON e.dept = d.dept",
        id="left-outer",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e RIGHT JOIN dept d ON e.dept = d.dept", id="right-outer"
    ),
    case(
        "SELECT e.name, e.dept, d.dept, d.dname FROM emp e FULL OUTER JOIN dept d "
        "ON e.dept = d.dept",
        id="full-outer",
    ),
    case("SELECT e.id, d.dept FROM emp e CROSS JOIN dept d", id="cross"),
    case(
        "SELECT e.name, d.dname FROM emp e, dept d WHERE e.dept = d.dept AND d.region = 'US'",
        id="comma-join-with-where",
    ),
    case("SELECT e.name, d.dname FROM emp e, dept d WHERE e.dept > d.dept", id="comma-non-equi"),
    case("SELECT name, dname, dept FROM emp JOIN dept USING (dept)", id="using"),
    case("SELECT dept, name, dname FROM emp LEFT JOIN dept USING (dept)", id="left-using"),
    case(
        "SELECT dept, name, dname FROM emp FULL JOIN dept USING (dept)",
        id="full-using-coalesces-key",
    ),
    case("SELECT e.name, d.dname FROM emp e JOIN dept d ON e.dept < d.dept", id="non-equi-lt"),
    case(
        "SELECT e.name, d.dname FROM emp e JOIN dept d ON e.dept = d.dept AND e.salary > 90",
        id="equi-plus-residual",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e LEFT JOIN dept d ON e.dept = d.dept AND d.region = 'EU'",
        id="left-with-right-side-condition-in-on",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e LEFT JOIN dept d ON e.dept = d.dept "
        "WHERE d.dept IS NULL",
        id="left-anti-via-is-null",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e LEFT JOIN dept d ON e.dept = d.dept AND e.salary > 90",
        id="left-with-left-side-condition-in-on",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e LEFT JOIN dept d ON e.dept < d.dept", id="left-non-equi"
    ),
    case(
        "SELECT e.name, d.dname FROM emp e FULL JOIN dept d ON e.dept = d.dept AND "
        "d.region <> 'EU'",
        id="full-with-condition",
    ),
    case("SELECT e.name, m.name FROM emp e JOIN emp m ON e.mgr = m.id", id="self-join"),
    case("SELECT e.name, m.name FROM emp e LEFT JOIN emp m ON e.mgr = m.id", id="self-left-join"),
    case(
        "SELECT e.name, m.name, d.dname FROM emp e JOIN emp m ON e.mgr = m.id "
        "JOIN dept d ON m.dept = d.dept",
        id="three-way",
    ),
    case(
        "SELECT e.name, m.name, d.dname FROM emp e LEFT JOIN emp m ON e.mgr = m.id "
        "LEFT JOIN dept d ON m.dept = d.dept",
        id="three-way-left",
    ),
    case(
        "SELECT d.dname, count(e.id), count(*), sum(e.salary) FROM dept d "
        "LEFT JOIN emp e ON e.dept = d.dept GROUP BY d.dname",
        id="left-join-aggregate",
    ),
    case(
        "SELECT d.region, count(DISTINCT e.dept) FROM emp e JOIN dept d "
        "ON e.dept = d.dept GROUP BY d.region",
        id="join-group-distinct",
    ),
    case("SELECT DISTINCT d.region FROM emp e JOIN dept d ON e.dept = d.dept", id="join-distinct"),
    case(
        "SELECT e.name, d.dname FROM emp e JOIN dept d ON e.dept + 10 = d.dept",
        id="join-on-expression",
    ),
    case(
        "SELECT e.name, d.dname FROM emp e JOIN dept d ON upper(d.dname) = upper(e.name) "
        "OR e.dept = d.dept",
        id="join-on-or",
    ),
    case(
        "SELECT e.name, x.dname FROM emp e JOIN (SELECT dept, dname FROM dept "
        "WHERE region IS NOT NULL) x ON e.dept = x.dept",
        id="join-derived-table",
    ),
    case(
        "SELECT a.name, b.name FROM emp a JOIN emp b ON a.dept = b.dept AND a.id < b.id",
        id="self-join-pairs",
    ),
    # Spark (and the SQL standard) put the USING key first; DuckDB keeps the left order
    case(
        "SELECT * FROM emp JOIN dept USING (dept)",
        "SELECT dept, id, name, salary, mgr, dname, region FROM emp JOIN dept USING (dept)",
        id="using-star-has-key-once-first",
    ),
    case("SELECT * FROM emp e LEFT JOIN dept d ON e.dept = d.dept", id="left-join-star"),
    case(
        "SELECT e.name, d.dname FROM emp e RIGHT JOIN dept d ON e.dept = d.dept "
        "AND e.salary > 90 WHERE d.region IS NOT NULL",
        id="right-join-condition-and-where",
    ),
    case(
        "SELECT e.name, d.dname, d2.dname FROM emp e FULL JOIN dept d ON e.dept = d.dept "
        "LEFT JOIN dept d2 ON d.dept = d2.dept + 10",
        id="full-then-left",
    ),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), JOINS)
def test_join(sql: str, duck: str | None, ordered: bool) -> None:
    """Each join kind gives DuckDB's rows after every commit (NULL keys never match)."""
    check_stream(EMP_DDL, [(sql, duck, ordered)], EMP_STREAM, create_after=1)


def test_dimension_update_flips_left_join_padding() -> None:
    """Outer-join padding goes when a match arrives and comes back when it leaves."""
    o = Oracle(["CREATE TABLE f (k INT, v STRING)", "CREATE TABLE d (k INT, name STRING)"])
    o.view("SELECT f.v, d.name FROM f LEFT JOIN d ON f.k = d.k")
    o.view("SELECT f.v, d.name FROM f FULL JOIN d ON f.k = d.k")
    o.commit([Ins("f", [(1, "a"), (1, "b"), (2, "c"), (None, "d")])])
    o.commit([Ins("d", [(1, "one")])])
    o.commit([Del("d", [(1, "one")]), Ins("d", [(2, "one")])])  # key 1 -> 2
    o.commit([Ins("d", [(2, "two")])])  # a second match for 2
    o.commit([Del("d", [(2, "one"), (2, "two")]), Ins("d", [(None, "null")])])
    o.commit([Del("f", [(1, "a"), (1, "b"), (2, "c"), (None, "d")])])
    o.commit([Ins("f", [(2, "e")]), Ins("d", [(2, "back")])])
