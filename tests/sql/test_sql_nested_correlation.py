"""Correlated subqueries whose reference to an outer query sits two or more subquery levels
down, checked against DuckDB after every commit of random streams (inserts, deletes,
updates, duplicates, NULLs, emptied and refilled tables): EXISTS / NOT EXISTS, IN / NOT IN
with NULLs, ANY / ALL, scalar subqueries aggregating in the middle level (a count over no
rows is 0, anything else NULL), references to the outermost query and an intermediate one
at once, in WHERE, SELECT and HAVING, three and four levels deep, and TPC-H-like shapes.
A few shapes are also checked in the SQLite dialect against ``sqlite3``."""

from __future__ import annotations

import random
import sqlite3
from typing import Any

import pytest
from oracle import Change, Del, Ins, Oracle, case, same_rows

import ddflow.sql as dsql

DDL = [
    "CREATE TABLE d (dept INT, b INT)",
    "CREATE TABLE e (dept INT, sal INT, k INT)",
    "CREATE TABLE m (dept INT, sal INT, k INT)",
]

TPCH_DDL = [
    "CREATE TABLE part (pk INT, brand INT)",
    "CREATE TABLE supp (sk INT, nk INT)",
    "CREATE TABLE ps (pk INT, sk INT, cost INT, avail INT)",
    "CREATE TABLE li (pk INT, sk INT, q INT, price INT)",
    "CREATE TABLE cust (ck INT, bal INT, cc INT)",
    "CREATE TABLE ord (ok INT, ck INT)",
]

_WIDTHS = {"d": 2, "e": 3, "m": 3, "part": 2, "supp": 2, "ps": 4, "li": 4, "cust": 3, "ord": 2}


def _stream(
    tables: list[str], seed: int, commits: int = 9, most: int = 6, values: int = 4
) -> list[list[Change]]:
    """Random commits over ``tables``: up to ``most`` rows inserted into each table, of
    values from ``values`` small integers and NULL (so that matches flip), duplicate rows,
    deletes of live rows beside inserts (updates), and one commit that empties every table
    before the last ones refill them."""
    rnd = random.Random(seed)
    choices = [*range(values), None]
    live: dict[str, list[tuple[Any, ...]]] = {t: [] for t in tables}
    out: list[list[Change]] = []
    for i in range(commits):
        changes: list[Change] = []
        if i == commits - 3:
            for t, rows in live.items():
                if rows:
                    changes.append(Del(t, list(rows)))
                rows.clear()
            out.append(changes)
            continue
        for t, rows in live.items():
            ins = [
                tuple(rnd.choice(choices) for _ in range(_WIDTHS[t]))
                for _ in range(rnd.randrange(0, most))
            ]
            if t == "part":  # (a part's brand follows from its key, as in TPC-H)
                ins = [(pk, pk % 2 if pk is not None else b) for pk, b in ins]
            if ins and rnd.random() < 0.4:
                ins.append(ins[0])  # a duplicate row
            dels = rnd.sample(rows, min(len(rows), rnd.randrange(0, 4)))
            for r in dels:
                rows.remove(r)
            rows.extend(ins)
            if dels:
                changes.append(Del(t, dels))
            if ins:
                changes.append(Ins(t, ins))
        out.append(changes)
    return out


def _check(
    ddl: list[str], sql: str, duck: str | None, ordered: bool, seed: int, **stream: int
) -> None:
    tables = [s.split()[2] for s in ddl]
    o = Oracle(ddl)
    o.view(sql, duck, ordered)  # (made over empty tables: checked from the first commit)
    for c in _stream(tables, seed, **stream):
        o.commit(c)


NESTED = [
    case(
        "SELECT d.dept FROM d WHERE EXISTS (SELECT 1 FROM e WHERE e.dept = d.dept "
        "AND e.sal > (SELECT avg(m.sal) FROM m WHERE m.dept = d.dept))",
        id="exists-over-scalar-avg",
    ),
    case(
        "SELECT d.dept, d.b FROM d WHERE NOT EXISTS (SELECT 1 FROM e WHERE e.dept = d.dept "
        "AND e.sal > (SELECT avg(m.sal) FROM m WHERE m.dept = d.b))",
        id="not-exists-over-scalar-avg",
    ),
    case(
        "SELECT d.dept, d.b FROM d WHERE EXISTS (SELECT 1 FROM e WHERE e.k = d.b "
        "AND EXISTS (SELECT 1 FROM m WHERE m.dept = d.dept AND m.k = e.k))",
        id="exists-reads-outermost-and-intermediate",
    ),
    case(
        "SELECT d.dept, d.b FROM d WHERE d.b <> 2 AND NOT EXISTS (SELECT 1 FROM e WHERE "
        "e.sal > (SELECT count(*) FROM m WHERE m.dept = d.dept AND m.k = e.k))",
        id="not-exists-only-the-deep-reference",
    ),
    case(
        "SELECT d.dept, d.b FROM d WHERE d.b NOT IN (SELECT e.k FROM e WHERE e.dept = d.dept "
        "AND e.sal NOT IN (SELECT m.sal FROM m WHERE m.dept = d.dept))",
        id="not-in-over-not-in-with-nulls",
    ),
    case(
        "SELECT d.dept, d.b, d.b NOT IN (SELECT e.k FROM e WHERE e.sal > "
        "(SELECT min(m.sal) FROM m WHERE m.dept = d.dept)), d.b IN (SELECT e.k FROM e "
        "WHERE EXISTS (SELECT 1 FROM m WHERE m.dept = d.dept AND m.k = e.sal)) FROM d",
        id="in-and-not-in-as-values",
    ),
    case(
        "SELECT d.dept, d.b FROM d WHERE EXISTS (SELECT 1 FROM e WHERE e.dept = d.dept "
        "AND e.sal > ALL (SELECT m.sal FROM m WHERE m.dept = d.b)) OR d.b = ANY (SELECT e.k "
        "FROM e WHERE e.sal = ANY (SELECT m.sal FROM m WHERE m.k = d.dept AND m.dept = e.k))",
        id="all-and-any",
    ),
    case(
        "SELECT d.dept, (SELECT count(*) + (SELECT max(m.sal) FROM m WHERE m.dept = d.b) "
        "FROM e WHERE e.dept = d.dept) FROM d",
        id="select-of-the-middle-beside-its-count",
    ),
    case(
        "SELECT d.dept, (SELECT max((SELECT count(*) FROM m WHERE m.dept = d.dept "
        "AND m.k = e.k)) FROM e WHERE e.dept = d.b) FROM d",
        id="select-of-the-middle-in-its-aggregate",
    ),
    case(
        "SELECT d.dept, d.b, (SELECT sum((SELECT max(m.sal + d.b) FROM m WHERE m.k = e.k)) "
        "FROM e WHERE e.dept = d.dept) FROM d",
        id="select-of-the-innermost-reads-the-outermost",
    ),
    case(
        "SELECT e.dept, count(*) FROM e GROUP BY e.dept HAVING count(*) > (SELECT count(*) "
        "FROM d WHERE d.dept = e.dept AND EXISTS (SELECT 1 FROM m WHERE m.dept = e.dept "
        "AND m.k = d.b))",
        id="having-of-the-outermost",
    ),
    case(
        "SELECT d.dept, d.b, (SELECT count(*) FROM e WHERE e.k = d.b HAVING count(*) > "
        "(SELECT count(*) FROM m WHERE m.dept = d.dept)), (SELECT sum(e.sal) FROM e "
        "WHERE e.dept = d.dept GROUP BY e.dept HAVING sum(e.sal) > (SELECT avg(m.sal) "
        "FROM m WHERE m.dept = d.b)) FROM d",
        id="having-of-the-middle",
    ),
    case(
        "SELECT d.dept, d.b FROM d WHERE (SELECT count(*) FROM e WHERE e.dept = d.dept "
        "AND (SELECT count(*) FROM m WHERE m.k = e.k AND m.dept = d.b) = 0) = 0",
        id="count-bug-at-both-levels",
    ),
    case(
        "SELECT d.dept, d.b FROM d WHERE (SELECT sum(e.sal) FROM e WHERE e.dept = d.dept "
        "AND e.k IN (SELECT m.k FROM m WHERE m.sal IS NULL OR m.sal = d.b)) IS NULL",
        id="sum-over-no-rows-is-null",
    ),
    case(
        "SELECT d.dept, d.b FROM d WHERE EXISTS (SELECT 1 FROM e WHERE e.dept = d.dept "
        "AND EXISTS (SELECT 1 FROM m WHERE m.k = e.k AND EXISTS (SELECT 1 FROM e e2 "
        "WHERE e2.sal = m.sal AND e2.dept = d.b AND e2.k = e.sal)))",
        id="three-levels-exists",
    ),
    case(
        "SELECT d.dept, d.b, (SELECT count(*) FROM e WHERE e.dept = d.dept AND e.sal <= "
        "(SELECT max(m.sal) FROM m WHERE m.k = e.k AND m.sal > (SELECT min(e2.sal) FROM e e2 "
        "WHERE e2.dept = d.b AND e2.k = m.k))) FROM d",
        id="three-levels-scalars",
    ),
    case(
        "SELECT d.dept, d.b FROM d WHERE NOT EXISTS (SELECT 1 FROM e WHERE e.dept = d.dept "
        "AND NOT EXISTS (SELECT 1 FROM m WHERE m.k = e.k AND m.sal NOT IN (SELECT e2.k "
        "FROM e e2 WHERE e2.dept = d.b AND EXISTS (SELECT 1 FROM m m2 WHERE m2.k = e2.sal "
        "AND m2.dept = d.dept AND m2.sal = e.k))))",
        id="four-levels",
    ),
    case(
        "SELECT d.dept, m.k FROM d LEFT JOIN m ON d.dept = m.dept WHERE EXISTS (SELECT 1 "
        "FROM e WHERE e.k = m.k AND e.sal > (SELECT count(*) FROM e e2 WHERE e2.dept = d.dept "
        "AND e2.sal = m.sal))",
        id="outer-values-padded-by-a-left-join",
    ),
    case(
        "SELECT x.dept FROM (SELECT d.dept, d.b FROM d WHERE d.b IS NOT NULL) x WHERE EXISTS "
        "(SELECT 1 FROM e WHERE e.dept = x.dept AND e.sal > (SELECT avg(m.sal) FROM m "
        "WHERE m.dept = x.b))",
        id="outer-derived-table",
    ),
    case(
        "SELECT d.dept, (SELECT min(e.sal) FROM e WHERE e.dept = d.dept AND e.sal > "
        "(SELECT avg(m.sal) FROM m WHERE m.dept = d.b) ORDER BY 1 LIMIT 1) FROM d",
        id="middle-with-order-and-limit",
    ),
    case(
        "SELECT d.dept FROM d WHERE d.b IN (SELECT e.k FROM e WHERE e.sal > (SELECT "
        "avg(m.sal) FROM m WHERE m.dept = d.dept) UNION SELECT m.k FROM m WHERE m.sal = "
        "(SELECT max(e2.sal) FROM e e2 WHERE e2.dept = d.dept))",
        id="middle-union",
    ),
    case(
        "SELECT d.dept FROM d WHERE EXISTS (SELECT * FROM e, m WHERE e.dept = d.dept "
        "AND m.k = e.k AND e.sal > (SELECT avg(m2.sal) FROM m m2 WHERE m2.dept = d.b))",
        id="exists-star-over-a-join",
    ),
]

# the middle level aggregates: a count over no rows is 0, any other aggregate NULL
MIDDLE_AGGREGATES = [
    "count(*)",
    "count(e.sal)",
    "sum(e.sal)",
    "avg(e.sal)",
    "min(e.sal)",
    "max(e.k)",
]

TPCH_LIKE = [
    case(
        # Q2: the cheapest supplier of a part, among those that shipped it
        "SELECT p.pk, ps.sk, ps.cost FROM part p, ps WHERE p.pk = ps.pk AND ps.cost = "
        "(SELECT min(ps2.cost) FROM ps ps2 WHERE ps2.pk = p.pk AND EXISTS (SELECT 1 FROM li "
        "WHERE li.pk = p.pk AND li.sk = ps2.sk))",
        id="q2-like",
    ),
    case(
        # Q17: small line items against an average over the part's stocked suppliers
        "SELECT sum(li.price), count(*) FROM li, part p WHERE p.pk = li.pk AND p.brand = 0 "
        "AND li.q <= (SELECT 0.8 * avg(l2.q) FROM li l2 WHERE l2.pk = p.pk AND l2.sk IN "
        "(SELECT ps.sk FROM ps WHERE ps.pk = p.pk AND ps.avail > 0))",
        id="q17-like",
    ),
    case(
        # Q20: the outermost supplier and the intermediate part-supplier read at once
        "SELECT s.sk FROM supp s WHERE s.sk IN (SELECT ps.sk FROM ps WHERE ps.pk IN "
        "(SELECT p.pk FROM part p WHERE p.brand = s.nk) AND 2 * ps.avail > (SELECT sum(li.q) "
        "FROM li WHERE li.pk = ps.pk AND li.sk = s.sk))",
        id="q20-like",
    ),
    case(
        # Q22: customers above their country's average without a late order
        "SELECT c.cc, count(*), sum(c.bal) FROM cust c WHERE c.bal > (SELECT avg(c2.bal) "
        "FROM cust c2 WHERE c2.bal > 0 AND c2.cc = c.cc) AND NOT EXISTS (SELECT 1 FROM ord o "
        "WHERE o.ck = c.ck AND o.ok > (SELECT count(*) FROM ord o2 WHERE o2.ck = c.ck)) "
        "GROUP BY c.cc",
        id="q22-like",
    ),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), NESTED)
def test_nested_correlation_equals_duckdb(sql: str, duck: str | None, ordered: bool) -> None:
    """Each shape gives DuckDB's rows after every commit of two random streams."""
    _check(DDL, sql, duck, ordered, 1)
    _check(DDL, sql, duck, ordered, 2, most=8, values=3)  # (denser: more matches)


@pytest.mark.parametrize("agg", MIDDLE_AGGREGATES)
def test_aggregate_of_the_middle_level_equals_duckdb(agg: str) -> None:
    """An aggregate in the middle level over rows that a NOT IN two levels down picks."""
    sql = (
        f"SELECT d.dept, d.b, (SELECT {agg} FROM e WHERE e.dept = d.dept AND e.k NOT IN "
        "(SELECT m.k FROM m WHERE m.sal = d.b)) FROM d"
    )
    for seed in (3, 4):
        _check(DDL, sql, None, False, seed)


@pytest.mark.parametrize(("sql", "duck", "ordered"), TPCH_LIKE)
def test_tpch_like_shapes_equal_duckdb(sql: str, duck: str | None, ordered: bool) -> None:
    """TPC-H's Q2, Q17, Q20 and Q22 shapes, with a reference moved two levels down."""
    for seed in (5, 6):
        _check(TPCH_DDL, sql, duck, ordered, seed, most=12, values=3, commits=12)


def test_two_levels_down_as_reported() -> None:
    """The reported query: a department whose employee earns above its average."""
    db = dsql.Database()
    db.execute("CREATE TABLE d (dept INT)")
    db.execute("CREATE TABLE e (dept INT, sal INT)")
    v = db.view(
        "SELECT d.dept FROM d WHERE EXISTS (SELECT 1 FROM e WHERE e.dept = d.dept "
        "AND e.sal > (SELECT avg(m.sal) FROM e m WHERE m.dept = d.dept))"
    )
    db.insert("d", [(1,)])
    db.insert("e", [(1, 1), (1, 3)])
    db.commit()
    assert v.rows() == [(1,)]
    db.delete("e", [(1, 1)])  # one salary left: none above the average
    db.commit()
    assert v.rows() == []


def test_null_outer_value_and_empty_groups_by_hand() -> None:
    """A NULL outer value reaches the innermost level as NULL (a count of 0 there, so the
    row passes), and NOT IN turns NULL when a NULL arrives in the innermost subquery."""
    o = Oracle(DDL)
    o.view(
        "SELECT d.dept, d.b FROM d WHERE EXISTS (SELECT 1 FROM e WHERE e.k = d.b "
        "AND e.sal > (SELECT count(*) FROM m WHERE m.dept = d.dept))"
    )
    o.view(
        "SELECT d.dept, (SELECT count(*) FROM e WHERE e.k = d.b AND e.sal NOT IN "
        "(SELECT m.sal FROM m WHERE m.dept = d.dept OR d.dept IS NULL)) FROM d"
    )
    o.commit([Ins("d", [(None, 1), (1, 1)]), Ins("e", [(0, 1, 1), (0, 5, 1)])])
    o.commit([Ins("m", [(1, 1, 0), (None, 2, 0)])])
    o.commit([Ins("m", [(1, None, 0)])])  # a NULL in the NOT IN list: nothing passes
    o.commit([Del("m", [(1, None, 0), (1, 1, 0)])])
    o.commit([Del("e", [(0, 1, 1), (0, 5, 1)]), Ins("e", [(0, None, 1)])])


def test_explain_shows_the_domain() -> None:
    """The plan carries the outer values as a distinct domain joined on its key."""
    db = dsql.Database()
    for s in DDL:
        db.execute(s)
    text = db.explain(
        "SELECT d.dept FROM d WHERE EXISTS (SELECT 1 FROM e WHERE e.dept = d.dept "
        "AND e.sal > (SELECT avg(m.sal) FROM m WHERE m.dept = d.dept))"
    )
    assert "Distinct\n" in text and "Project dept AS _dm" in text, text
    assert "SemiJoin null-safe" in text, text
    assert "Join inner on []" not in text, text  # (no cross product)


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        (
            "SELECT d.dept, (SELECT max(x.r) FROM (SELECT row_number() OVER (PARTITION BY e.k "
            "ORDER BY e.sal) AS r FROM e WHERE e.dept = d.dept AND e.sal > (SELECT avg(m.sal) "
            "FROM m WHERE m.dept = d.b)) x) FROM d",
            "a window function",
        ),
        (
            "SELECT d.dept FROM d WHERE EXISTS (SELECT 1 FROM e LEFT JOIN (SELECT m.k FROM m "
            "WHERE m.dept = d.dept) x ON x.k = e.k WHERE e.sal > (SELECT count(*) FROM m "
            "WHERE m.dept = d.b))",
            "an outer join with a derived table",
        ),
        (
            "SELECT d.dept, (SELECT max(e.sal) FROM e WHERE e.k = (SELECT max(m.k) FROM m "
            "WHERE m.dept = max(d.b))) FROM d GROUP BY d.dept",
            "an aggregate of an outer query's rows",
        ),
    ],
    ids=["window-on-the-way", "outer-join-carrying-it", "outer-aggregate-two-levels-down"],
)
def test_what_cannot_be_carried_is_named(sql: str, words: str) -> None:
    """What stands in the way of carrying the outer values down is named in the error."""
    db = dsql.Database()
    for s in DDL:
        db.execute(s)
    with pytest.raises(dsql.UnsupportedSQL, match=words):
        db.view(sql)


SQLITE_SHAPES = [
    "SELECT d.dept, d.b FROM d WHERE EXISTS (SELECT 1 FROM e WHERE e.dept = d.dept "
    "AND e.sal > (SELECT avg(m.sal) FROM m WHERE m.dept = d.b))",
    "SELECT d.dept, (SELECT count(*) FROM e WHERE e.dept = d.dept AND e.k NOT IN "
    "(SELECT m.k FROM m WHERE m.sal = d.b)) FROM d",
    "SELECT d.dept, (SELECT sum(e.sal) FROM e WHERE e.k = d.b AND e.sal >= (SELECT "
    "min(m.sal) FROM m WHERE m.k = e.k AND m.dept = d.dept)) FROM d",
]


@pytest.mark.parametrize("sql", SQLITE_SHAPES)
def test_sqlite_dialect_equals_sqlite3(sql: str) -> None:
    """In the SQLite dialect the same shapes give sqlite3's rows after every commit."""
    db = dsql.Database(dialect="sqlite")
    con = sqlite3.connect(":memory:")
    for s in DDL:
        db.execute(s)
        con.execute(s)
    v = db.view(sql)
    for changes in _stream(["d", "e", "m"], 7):
        for c in changes:
            width = _WIDTHS[c.table]
            marks = ", ".join("?" * width)
            if isinstance(c, Ins):
                db.insert(c.table, list(c.rows))
                con.executemany(f"INSERT INTO {c.table} VALUES ({marks})", c.rows)
            else:
                db.delete(c.table, list(c.rows))
                for r in c.rows:
                    cols = ["dept", "b"] if c.table == "d" else ["dept", "sal", "k"]
                    cond = " AND ".join(f"{n} IS ?" for n in cols)
                    con.execute(
                        f"DELETE FROM {c.table} WHERE rowid = (SELECT rowid FROM {c.table} "
                        f"WHERE {cond} LIMIT 1)",
                        r,
                    )
        db.commit()
        want = con.execute(sql).fetchall()
        extra, missing = same_rows(v.rows(), want)
        assert not extra and not missing, (sql, sorted(v.rows(), key=repr), want)
