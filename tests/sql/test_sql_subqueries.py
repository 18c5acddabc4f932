"""Subqueries against DuckDB after every commit: EXISTS / NOT EXISTS, IN / NOT IN (NULLs in
the subquery and in the probe), scalar subqueries (uncorrelated, correlated; in WHERE, SELECT
and HAVING; empty ones giving NULL or a count of 0), derived tables and CTEs."""

from __future__ import annotations

import pytest
from oracle import Del, Ins, Oracle, case, check_stream
from sqldata import EMP_DDL, EMP_STREAM

SUBQUERIES = [
    case(
        "SELECT e.name FROM emp e WHERE EXISTS (SELECT 1 FROM dept d WHERE d.dept = e.dept)",
        id="exists",
    ),
    case(
        "SELECT e.name FROM emp e WHERE NOT EXISTS (SELECT 1 FROM dept d WHERE d.dept = e.dept)",
        id="not-exists",
    ),
    case(
        "SELECT e.name FROM emp e WHERE EXISTS (SELECT 1 FROM dept d WHERE d.dept = e.dept "
        "AND d.region = 'EU')",
        id="exists-with-filter",
    ),
    case(
        "SELECT e.name FROM emp e WHERE EXISTS (SELECT 1 FROM emp m WHERE m.dept = e.dept "
        "AND m.salary > e.salary)",
        id="exists-non-equi-correlation",
    ),
    case(
        "SELECT d.dname FROM dept d WHERE NOT EXISTS (SELECT 1 FROM emp e "
        "WHERE e.dept = d.dept AND e.salary IS NOT NULL)",
        id="not-exists-with-filter",
    ),
    case("SELECT e.name FROM emp e WHERE EXISTS (SELECT 1 FROM dept)", id="exists-uncorrelated"),
    case(
        "SELECT e.name FROM emp e WHERE e.dept IN (SELECT dept FROM dept WHERE region = 'EU')",
        id="in-subquery",
    ),
    case(
        "SELECT e.name FROM emp e WHERE e.dept NOT IN (SELECT dept FROM dept)",
        id="not-in-subquery-with-nulls",
    ),
    case(
        "SELECT e.name FROM emp e WHERE e.dept NOT IN (SELECT dept FROM dept "
        "WHERE dept IS NOT NULL)",
        id="not-in-subquery-null-probe",
    ),
    case(
        "SELECT e.name FROM emp e WHERE e.id NOT IN (SELECT mgr FROM emp)",
        id="not-in-self-with-nulls",
    ),
    case(
        "SELECT e.name, e.dept IN (SELECT dept FROM dept), e.dept NOT IN (SELECT dept "
        "FROM dept) FROM emp e",
        id="in-subquery-as-value",
    ),
    case(
        "SELECT e.name FROM emp e WHERE e.dept IN (SELECT d.dept FROM dept d "
        "WHERE d.dname <> e.name)",
        id="in-correlated",
    ),
    case(
        "SELECT e.name FROM emp e WHERE e.salary > (SELECT avg(salary) FROM emp)",
        id="scalar-uncorrelated-where",
    ),
    case(
        "SELECT e.name, (SELECT max(salary) FROM emp) - e.salary FROM emp e",
        id="scalar-uncorrelated-select",
    ),
    case(
        "SELECT e.id, (SELECT max(dept) FROM dept WHERE region = 'XX') FROM emp e",
        id="scalar-over-empty-is-null",
    ),
    case(
        "SELECT e.name FROM emp e WHERE e.salary > (SELECT avg(e2.salary) FROM emp e2 "
        "WHERE e2.dept = e.dept)",
        id="scalar-correlated-where",
    ),
    case(
        "SELECT e.name, (SELECT count(*) FROM dept d WHERE d.dept = e.dept) FROM emp e",
        id="scalar-correlated-count-is-0-not-null",
    ),
    case(
        "SELECT e.name, (SELECT max(d.dname) FROM dept d WHERE d.dept = e.dept) FROM emp e",
        id="scalar-correlated-select",
    ),
    case(
        "SELECT d.dname, (SELECT sum(e.salary) FROM emp e WHERE e.dept = d.dept) FROM dept d",
        id="scalar-correlated-sum-null-when-none",
    ),
    case(
        "SELECT e.dept, count(*) FROM emp e GROUP BY e.dept HAVING count(*) > "
        "(SELECT count(*) FROM dept d WHERE d.dept = e.dept)",
        id="scalar-correlated-having",
    ),
    case(
        "SELECT dept, sum(salary) FROM emp GROUP BY dept HAVING sum(salary) > "
        "(SELECT avg(salary) FROM emp)",
        id="scalar-uncorrelated-having",
    ),
    case(
        "SELECT x.dept, x.c FROM (SELECT dept, count(*) AS c FROM emp GROUP BY dept) x "
        "WHERE x.c > 1",
        id="derived-table",
    ),
    case(
        "SELECT x.region, max(x.total) FROM (SELECT d.region, e.dept, sum(e.salary) AS total "
        "FROM emp e JOIN dept d ON e.dept = d.dept GROUP BY d.region, e.dept) x "
        "GROUP BY x.region",
        id="aggregate-over-aggregate",
    ),
    case(
        "WITH big AS (SELECT * FROM emp WHERE salary > 75) SELECT d.dname, count(*) "
        "FROM big JOIN dept d ON big.dept = d.dept GROUP BY d.dname",
        id="cte",
    ),
    case(
        "WITH c AS (SELECT dept, count(*) AS n FROM emp GROUP BY dept) "
        "SELECT a.dept, b.dept FROM c a JOIN c b ON a.n = b.n AND a.dept < b.dept",
        id="cte-used-twice",
    ),
    case(
        "WITH a AS (SELECT dept FROM dept WHERE region = 'EU'), "
        "b AS (SELECT e.name FROM emp e JOIN a ON e.dept = a.dept) SELECT * FROM b",
        id="cte-chain",
    ),
    case(
        "SELECT e.name FROM emp e WHERE e.dept IN (SELECT dept FROM dept) AND "
        "NOT EXISTS (SELECT 1 FROM emp m WHERE m.mgr = e.id)",
        id="in-and-not-exists",
    ),
    case(
        "SELECT e.name FROM emp e WHERE e.dept IN (SELECT dept FROM dept) OR e.salary > 100",
        id="in-subquery-under-or",
    ),
    case(
        "SELECT e.name FROM emp e WHERE EXISTS (SELECT 1 FROM dept d WHERE d.dept = e.dept) "
        "OR e.dept IS NULL",
        id="exists-under-or",
    ),
    case(
        "SELECT e.name, (SELECT count(*) FROM dept d WHERE d.dept < e.dept) FROM emp e",
        id="scalar-correlated-non-equi",
    ),
    case(
        "SELECT e.name FROM emp e WHERE EXISTS (SELECT 1 FROM emp m WHERE m.id = e.mgr AND "
        "m.dept = e.dept)",
        id="exists-two-correlation-columns",
    ),
    case(
        "SELECT e.name FROM emp e WHERE e.dept + 10 IN (SELECT dept FROM dept)",
        id="in-subquery-expression-probe",
    ),
    case(
        "SELECT e.name FROM emp e WHERE e.dept NOT IN (SELECT d.dept FROM dept d "
        "WHERE d.region = e.name OR d.region IS NULL)",
        id="not-in-correlated",
    ),
    case(
        "SELECT d.dname FROM dept d WHERE EXISTS (SELECT 1 FROM emp e WHERE e.dept = d.dept "
        "AND EXISTS (SELECT 1 FROM emp m WHERE m.id = e.mgr))",
        id="nested-exists",
    ),
    case(
        "SELECT d.dname FROM dept d WHERE EXISTS (SELECT 1 FROM emp e WHERE e.dept = d.dept "
        "AND e.salary > (SELECT avg(m.salary) FROM emp m WHERE m.dept = d.dept))",
        id="correlated-two-levels",
    ),
    case(
        "SELECT e.name, e.salary = (SELECT max(m.salary) FROM emp m WHERE m.dept = e.dept) "
        "FROM emp e",
        id="scalar-correlated-in-comparison-value",
    ),
    case(
        "SELECT e.name, (SELECT count(*) + e.id FROM emp m WHERE m.dept = e.dept) FROM emp e",
        id="scalar-count-beside-outer-column",
    ),
    case(
        "SELECT e.name, (SELECT sum(m.salary * e.id) FROM emp m WHERE m.mgr = e.id) FROM emp e",
        id="aggregate-of-inner-and-outer-columns",
    ),
    case(
        "SELECT e.name, e.dept NOT IN (SELECT m.dept FROM emp m WHERE m.salary > e.salary "
        "GROUP BY m.dept HAVING count(*) > 1) FROM emp e WHERE EXISTS (SELECT m.dept FROM "
        "emp m WHERE m.id <> e.id GROUP BY m.dept HAVING count(*) > 2)",
        id="grouped-subqueries-correlated-by-non-equalities",
    ),
    case(
        "SELECT e.name FROM emp e WHERE e.dept > ALL (SELECT dept FROM dept WHERE region = 'EU')",
        id="gt-all-with-nulls-and-empty",
    ),
    case("SELECT e.name FROM emp e WHERE e.dept = ANY (SELECT dept FROM dept)", id="eq-any"),
    case(
        "SELECT e.name, e.dept < ALL (SELECT d.dept FROM dept d WHERE d.region = 'US') FROM emp e",
        id="lt-all-as-value",
    ),
    case(
        "SELECT e.name FROM emp e WHERE e.salary >= ALL (SELECT m.salary FROM emp m "
        "WHERE m.dept = e.dept)",
        id="ge-all-correlated",
    ),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), SUBQUERIES)
def test_subquery(sql: str, duck: str | None, ordered: bool) -> None:
    """Each kind of subquery gives DuckDB's rows after every commit."""
    check_stream(EMP_DDL, [(sql, duck, ordered)], EMP_STREAM, create_after=1)


def test_not_in_tracks_null_arriving_and_leaving() -> None:
    """NOT IN follows a NULL arriving in and leaving the subquery, and NULL probes."""
    o = Oracle(["CREATE TABLE a (x INT)", "CREATE TABLE b (y INT)"])
    o.view("SELECT x FROM a WHERE x NOT IN (SELECT y FROM b)")
    o.view("SELECT x, x NOT IN (SELECT y FROM b) FROM a")
    o.commit([Ins("a", [(1,), (2,), (None,)])])  # b empty: every x, NULL too
    o.commit([Ins("b", [(2,)])])
    o.commit([Ins("b", [(None,)])])  # a NULL in b: nothing passes
    o.commit([Del("b", [(None,)])])
    o.commit([Del("b", [(2,)]), Ins("b", [(3,)])])
    o.commit([Del("b", [(3,)])])


def test_correlated_count_subquery_zero_for_missing_groups() -> None:
    """A correlated count(*) is 0 (not NULL, not a missing row) for rows with no match."""
    o = Oracle(["CREATE TABLE a (k INT)", "CREATE TABLE b (k INT)"])
    o.view("SELECT a.k, (SELECT count(*) FROM b WHERE b.k = a.k) FROM a")
    o.view("SELECT a.k FROM a WHERE (SELECT count(*) FROM b WHERE b.k = a.k) = 0")
    o.commit([Ins("a", [(1,), (2,), (None,)]), Ins("b", [(1,), (1,)])])
    o.commit([Del("b", [(1,), (1,)])])
    o.commit([Ins("b", [(2,), (None,)])])
