"""Set operations and ordering against DuckDB after every commit: UNION [ALL], INTERSECT,
EXCEPT (NULLs equal to each other there), ORDER BY alone, ORDER BY with LIMIT / OFFSET kept
as a top-k, and Spark's default NULL order (first ascending, last descending)."""

from __future__ import annotations

import pytest
from oracle import Del, Ins, Oracle, case, check_stream
from sqldata import EMP_DDL, EMP_STREAM

import ddflow.sql as dsql

SETOPS = [
    case("SELECT dept FROM emp UNION SELECT dept FROM dept", id="union"),
    case("SELECT dept FROM emp UNION ALL SELECT dept FROM dept", id="union-all"),
    case("SELECT dept FROM emp INTERSECT SELECT dept FROM dept", id="intersect"),
    case("SELECT dept FROM emp EXCEPT SELECT dept FROM dept", id="except"),
    case("SELECT dept FROM dept EXCEPT SELECT dept FROM emp", id="except-reversed"),
    case(
        "SELECT dept, name FROM emp UNION SELECT dept, dname FROM dept",
        id="union-two-columns-null-equal",
    ),
    case(
        "SELECT dept, salary FROM emp INTERSECT SELECT dept, salary FROM emp WHERE mgr = 1",
        id="intersect-self",
    ),
    case(
        "SELECT name FROM emp WHERE dept = 10 UNION ALL SELECT name FROM emp WHERE dept = 10",
        id="union-all-doubles",
    ),
    case(
        "SELECT dept FROM emp UNION SELECT dept FROM dept EXCEPT SELECT dept FROM dept "
        "WHERE region = 'EU'",
        id="union-then-except",
    ),
    case(
        "SELECT x.dept, count(*) FROM (SELECT dept FROM emp UNION ALL SELECT dept FROM dept) x "
        "GROUP BY x.dept",
        id="aggregate-over-union-all",
    ),
    case("SELECT salary FROM emp UNION SELECT 0.5", id="union-literal-row-widens-type"),
    case(
        "SELECT dept FROM emp INTERSECT ALL SELECT dept FROM emp WHERE salary > 70",
        id="intersect-all",
    ),
    case("SELECT dept FROM emp EXCEPT ALL SELECT dept FROM dept", id="except-all"),
]

# Spark sorts NULLs first ascending and last descending; DuckDB needs it spelled out.
ORDERS = [
    case(
        "SELECT id, name, salary FROM emp ORDER BY salary DESC, id, name",
        "SELECT id, name, salary FROM emp ORDER BY salary DESC NULLS LAST, id NULLS FIRST, "
        "name NULLS FIRST",
        ordered=True,
        id="order-by-default-null-order",
    ),
    case(
        "SELECT name FROM emp ORDER BY name",
        "SELECT name FROM emp ORDER BY name NULLS FIRST",
        ordered=True,
        id="order-by-string",
    ),
    case(
        "SELECT name FROM emp ORDER BY name DESC NULLS FIRST",
        ordered=True,
        id="order-by-string-desc-nulls-first",
    ),
    case(
        "SELECT id, name, salary FROM emp ORDER BY salary DESC NULLS LAST, id NULLS FIRST, "
        "name NULLS FIRST LIMIT 3",
        ordered=True,
        id="top-3",
    ),
    case(
        "SELECT id, name, salary FROM emp ORDER BY salary NULLS LAST, id NULLS LAST, "
        "name NULLS LAST LIMIT 2 OFFSET 2",
        ordered=True,
        id="limit-offset",
    ),
    case(
        "SELECT name FROM emp ORDER BY salary DESC NULLS LAST, id NULLS FIRST, "
        "name NULLS FIRST LIMIT 2",
        ordered=True,
        id="order-by-column-not-selected",
    ),
    case(
        "SELECT dept, sum(salary) AS s FROM emp GROUP BY dept ORDER BY s DESC NULLS LAST, "
        "dept NULLS FIRST LIMIT 2",
        ordered=True,
        id="top-k-of-aggregate",
    ),
    case(
        "SELECT name, dept FROM emp ORDER BY upper(name) NULLS FIRST, dept NULLS FIRST LIMIT 4",
        ordered=True,
        id="order-by-expression",
    ),
    case("SELECT id FROM emp ORDER BY id NULLS FIRST LIMIT 0", ordered=True, id="limit-0"),
    case(
        "SELECT DISTINCT dept FROM emp ORDER BY dept NULLS LAST LIMIT 2",
        ordered=True,
        id="distinct-top-k",
    ),
    case(
        "SELECT id, name FROM emp ORDER BY 2 NULLS FIRST, 1 NULLS FIRST LIMIT 3",
        ordered=True,
        id="order-by-ordinal",
    ),
    case(
        "SELECT d.dname, e.name FROM emp e JOIN dept d ON e.dept = d.dept "
        "ORDER BY d.dname, e.name LIMIT 3",
        "SELECT d.dname, e.name FROM emp e JOIN dept d ON e.dept = d.dept "
        "ORDER BY d.dname NULLS FIRST, e.name NULLS FIRST LIMIT 3",
        ordered=True,
        id="top-k-of-join",
    ),
    case("SELECT id FROM emp LIMIT 100", id="limit-larger-than-table"),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), SETOPS)
def test_set_operation(sql: str, duck: str | None, ordered: bool) -> None:
    """UNION/INTERSECT/EXCEPT (distinct) and UNION ALL (bag) give DuckDB's rows."""
    check_stream(EMP_DDL, [(sql, duck, ordered)], EMP_STREAM, create_after=1)


@pytest.mark.parametrize(("sql", "duck", "ordered"), ORDERS)
def test_order_limit(sql: str, duck: str | None, ordered: bool) -> None:
    """ORDER BY orders rows(); with LIMIT/OFFSET the right rows in the right order."""
    check_stream(EMP_DDL, [(sql, duck, ordered)], EMP_STREAM, create_after=1)


def test_top_k_ties_at_the_boundary_keep_a_tied_row() -> None:
    """With ties at the LIMIT boundary the row count is exact and every row is a top row."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (k INT, v STRING)")
    v = db.view("SELECT k, v FROM t ORDER BY k LIMIT 2")
    db.insert("t", [(1, "a"), (2, "b"), (2, "c"), (3, "d")])
    db.commit()
    rows = v.rows()
    assert len(rows) == 2 and rows[0] == (1, "a") and rows[1] in [(2, "b"), (2, "c")]
    db.delete("t", [(1, "a")])
    db.commit()
    assert sorted(v.rows()) == [(2, "b"), (2, "c")]


def test_top_k_refills_as_rows_leave() -> None:
    """A top-k pulls the next rows in as top rows leave, and shrinks below k with the table."""
    o = Oracle("CREATE TABLE t (k INT)")
    o.view("SELECT k FROM t ORDER BY k DESC NULLS LAST LIMIT 3", ordered=True)
    o.view("SELECT k FROM t ORDER BY k NULLS FIRST LIMIT 2 OFFSET 1", ordered=True)
    o.commit([Ins("t", [(i,) for i in range(10)] + [(None,), (9,)])])
    o.commit([Del("t", [(9,), (8,)])])
    o.commit([Del("t", [(9,), (7,), (None,)]), Ins("t", [(100,)])])
    o.commit([Del("t", [(i,) for i in range(7)])])
    o.commit([Del("t", [(100,)])])
    o.commit([Ins("t", [(5,), (5,), (5,), (None,)])])
