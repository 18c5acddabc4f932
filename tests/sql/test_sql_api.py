"""The public API of ``ddflow.sql`` as the issue states it: views made before or after data,
commits without reading, ``changes()`` stamped with commit numbers, ``to_arrow``, Arrow and
pandas input, SQL DML, ``CREATE VIEW``, ``explain``, and the sqlite dialect against SQLite."""

from __future__ import annotations

import datetime as dt
import sqlite3
from decimal import Decimal as D

import pyarrow as pa
import pytest
from oracle import Del, Ins, Oracle, same_rows
from sqldata import EMP_DDL, EMP_STREAM, WIDE_A, WIDE_DDL, WIDE_STREAM

import ddflow.sql as dsql

# queries with something to lose when views exist before any row: global aggregates over
# empty tables, NULL padding of strings, NULL strings, min/max of strings
EARLY_WIDE = [
    "SELECT count(*), sum(i), max(s), min(d), avg(db) FROM w",
    "SELECT s, count(*) FROM w GROUP BY s",
    "SELECT min(s), max(vc) FROM w",
    "SELECT id, s, vc FROM w WHERE s IS NULL OR vc IS NULL",
]
EARLY_EMP = [
    "SELECT e.name, d.dname FROM emp e LEFT JOIN dept d ON e.dept = d.dept",
    "SELECT e.name, d.dname FROM emp e FULL JOIN dept d ON e.dept = d.dept",
    "SELECT e.id, (SELECT max(d.dname) FROM dept d WHERE d.dept = e.dept) FROM emp e",
    "SELECT count(*), max(name) FROM emp WHERE salary > 1000",
    "SELECT max(name) FROM emp ORDER BY 1 LIMIT 3",
]


@pytest.mark.parametrize("sql", EARLY_WIDE)
def test_view_made_before_any_row_wide(sql: str) -> None:
    """A view made on empty tables answers right from the first commit on (every type)."""
    o = Oracle(WIDE_DDL)
    o.view(sql)
    o.commit([])
    for c in WIDE_STREAM:
        o.commit(c)


@pytest.mark.parametrize("sql", EARLY_EMP)
def test_view_made_before_any_row_joins(sql: str) -> None:
    """Outer joins and scalar subqueries made on empty tables pad with NULL strings right."""
    o = Oracle(EMP_DDL)
    o.view(sql)
    o.commit([])
    for c in EMP_STREAM:
        o.commit(c)


def test_view_made_after_rows_answers_before_next_commit() -> None:
    """A view made once tables hold rows starts from them: rows() is right at once."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT, s STRING)")
    db.insert("t", [(1, "x"), (2, "y"), (2, "y")])
    db.commit()
    db.insert("t", [(3, "z")])  # not committed: the view starts from the last commit
    v = db.view("SELECT s, count(*) FROM t GROUP BY s")
    assert sorted(v.rows()) == [("x", 1), ("y", 2)]
    db.commit()
    assert sorted(v.rows()) == [("x", 1), ("y", 2), ("z", 1)]


def test_commits_without_reading_then_rows_and_changes() -> None:
    """Commits with no reads: rows() is the last answer, changes() every commit's, numbered."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT)")
    v = db.view("SELECT a, count(*) FROM t GROUP BY a")
    db.insert("t", [(1,), (1,)])
    t0 = db.commit()
    db.delete("t", [(1,)])
    db.insert("t", [(2,)])
    t1 = db.commit()
    db.delete("t", [(2,)])
    t2 = db.commit()
    assert t0 < t1 < t2
    assert v.rows() == [(1, 1)]
    ch = v.changes()
    assert sorted(ch) == sorted(
        [(1, 2, t0, 1), (1, 2, t1, -1), (1, 1, t1, 1), (2, 1, t1, 1), (2, 1, t2, -1)]
    )
    assert [c[-2] for c in ch] == sorted(c[-2] for c in ch)
    assert v.changes() == []


def test_changes_of_many_commits_unread() -> None:
    """Two hundred commits without a read: changes() hands out each commit's changes."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT)")
    v = db.view("SELECT count(*) FROM t")
    times = []
    for i in range(200):
        db.insert("t", [(i,)])
        times.append(db.commit())
    ch = v.changes()
    want = []  # (the view held its count 0 from the start)
    for i in range(200):
        want += [(i, times[i], -1), (i + 1, times[i], 1)]
    assert sorted(ch, key=lambda r: (r[1], r[2])) == sorted(want, key=lambda r: (r[1], r[2]))
    assert [c[-2] for c in ch] == sorted(c[-2] for c in ch)
    db.insert("t", [(-1,)])
    last = db.commit()
    assert sorted(v.changes()) == [(200, last, -1), (201, last, 1)]


def test_commit_with_no_changes_changes_nothing() -> None:
    """An empty commit leaves rows() as they were and adds nothing to changes()."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT)")
    v = db.view("SELECT count(*) FROM t")
    db.insert("t", [(1,)])
    db.commit()
    v.changes()
    db.commit()
    assert v.rows() == [(1,)] and v.changes() == []


def test_one_batch_equals_many_commits() -> None:
    """The answer is the same whether rows arrive in one commit or one per commit."""
    sql = (
        "SELECT e.dept, count(*), sum(e.salary), max(e.name) FROM emp e LEFT JOIN dept d "
        "ON e.dept = d.dept WHERE d.region IS NULL OR d.region <> 'XX' GROUP BY e.dept"
    )
    rows_e = [(i, f"n{i % 4}", i % 5 if i % 7 else None, D(i) / 4, None) for i in range(40)]
    rows_d = [(k, f"d{k}", "EU" if k % 2 else None) for k in range(5)]
    one = dsql.Database()
    many = dsql.Database()
    for db in (one, many):
        for ddl in EMP_DDL:
            db.execute(ddl)
    v1, v2 = one.view(sql), many.view(sql)
    one.insert("emp", rows_e)
    one.insert("dept", rows_d)
    one.commit()
    for r in rows_d:
        many.insert("dept", [r])
        many.commit()
    for r in rows_e:
        many.insert("emp", [r])
        many.commit()
    extra, missing = same_rows(v2.rows(), v1.rows())
    assert not extra and not missing


def test_to_arrow_has_names_and_types() -> None:
    """to_arrow() gives the view's columns with their names and Arrow types."""
    db = dsql.Database()
    db.execute(WIDE_DDL)
    v = db.view("SELECT id, s AS name, de, d, ts, bo FROM w")
    db.insert("w", WIDE_A[:2])
    db.commit()
    t = v.to_arrow()
    assert isinstance(t, pa.Table)
    assert t.column_names == ["id", "name", "de", "d", "ts", "bo"]
    assert t.schema.field("de").type == pa.decimal128(10, 2)
    assert t.schema.field("d").type == pa.date32()
    assert pa.types.is_timestamp(t.schema.field("ts").type)
    assert t.schema.field("bo").type == pa.bool_()
    assert sorted(t.column("id").to_pylist()) == [1, 2]


def test_view_columns_are_named() -> None:
    """A view's columns carry their aliases and column names."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT, b STRING)")
    v = db.view("SELECT a AS x, b, count(*) AS n FROM t GROUP BY a, b")
    assert v.columns == ["x", "b", "n"]


def test_insert_arrow_and_pandas() -> None:
    """Rows may come as a pyarrow Table, a RecordBatch or a pandas DataFrame."""
    import pandas as pd

    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT, s STRING, c DECIMAL(8,2), d DATE)")
    v = db.view("SELECT a, s, c, d FROM t")
    tbl = pa.table(
        {
            "a": pa.array([1, None], pa.int32()),
            "s": ["x", None],
            "c": pa.array([D("1.50"), None], pa.decimal128(8, 2)),
            "d": pa.array([dt.date(2024, 1, 1), None], pa.date32()),
        }
    )
    db.insert("t", tbl)
    db.insert("t", tbl.to_batches()[0])
    db.insert(
        "t", pd.DataFrame({"a": [3], "s": ["z"], "c": [D("2.25")], "d": [dt.date(2020, 2, 2)]})
    )
    db.commit()
    assert sorted(v.rows(), key=repr) == sorted(
        [(1, "x", D("1.50"), dt.date(2024, 1, 1)), (None, None, None, None)] * 2
        + [(3, "z", D("2.25"), dt.date(2020, 2, 2))],
        key=repr,
    )
    db.delete("t", tbl)
    db.commit()
    assert sorted(v.rows(), key=repr) == sorted(
        [
            (1, "x", D("1.50"), dt.date(2024, 1, 1)),
            (None, None, None, None),
            (3, "z", D("2.25"), dt.date(2020, 2, 2)),
        ],
        key=repr,
    )


def test_create_table_from_arrow_schema() -> None:
    """create_table takes a pyarrow schema; the table then works like a DDL one."""
    db = dsql.Database()
    db.create_table(
        "u", pa.schema([("k", pa.int64()), ("name", pa.string()), ("amt", pa.decimal128(12, 2))])
    )
    v = db.view("SELECT name, sum(amt) FROM u GROUP BY name")
    db.insert("u", [(1, "a", D("1.10")), (2, "a", D("2.20")), (3, None, None)])
    db.commit()
    assert sorted(v.rows(), key=repr) == sorted([("a", D("3.30")), (None, None)], key=repr)


def test_sql_dml_matches_duckdb() -> None:
    """INSERT/DELETE/UPDATE statements change tables as DuckDB's do; views follow."""
    import duckdb

    ddl = "CREATE TABLE t (a INT, s STRING, c DECIMAL(8,2))"
    db = dsql.Database()
    duck = duckdb.connect()
    db.execute(ddl)
    duck.execute(ddl)
    v = db.view("SELECT a, s, c FROM t")
    g = db.view("SELECT s, count(*), sum(c) FROM t GROUP BY s")
    steps = [
        "INSERT INTO t VALUES (1, 'x', 1.50), (2, 'y', NULL), (3, NULL, 2.25), (3, NULL, 2.25)",
        "INSERT INTO t (a, s) VALUES (4, 'x')",
        "UPDATE t SET c = c * 2 WHERE s = 'x'",
        "DELETE FROM t WHERE a > 2",
        "INSERT INTO t SELECT a + 10, s, c FROM t WHERE c IS NOT NULL",
        "UPDATE t SET s = NULL, a = a + 1 WHERE a IN (SELECT a FROM t WHERE a < 2)",
        "DELETE FROM t",
        "INSERT INTO t VALUES (7, 'q', -0.01)",
    ]
    for i, stmt in enumerate(steps):
        db.execute(stmt)
        duck.execute(stmt)
        db.commit()
        for view, q in [
            (v, "SELECT a, s, c FROM t"),
            (g, "SELECT s, count(*), sum(c) FROM t GROUP BY s"),
        ]:
            extra, missing = same_rows(view.rows(), duck.execute(q).fetchall())
            assert not extra and not missing, (i, stmt, q, extra, missing)


def test_create_view_statement() -> None:
    """CREATE VIEW defines a named view that db.views returns and that stays up to date."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT)")
    db.execute("CREATE VIEW big AS SELECT a FROM t WHERE a > 1")
    db.insert("t", [(1,), (2,), (3,)])
    db.commit()
    assert sorted(db.views["big"].rows()) == [(2,), (3,)]


def test_query_sees_uncommitted_changes() -> None:
    """A one-off query (execute of SELECT) reads the tables including uncommitted rows."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT)")
    db.insert("t", [(1,), (2,)])
    assert sorted(db.execute("SELECT a FROM t")) == [(1,), (2,)]


def test_explain_shows_the_plan() -> None:
    """explain() returns readable text naming the plan's operators and tables."""
    db = dsql.Database()
    for ddl in EMP_DDL:
        db.execute(ddl)
    text = db.explain(
        "SELECT d.dname, sum(e.salary) FROM emp e JOIN dept d "
        "ON e.dept = d.dept WHERE e.salary > 10 GROUP BY d.dname"
    )
    assert isinstance(text, str) and len(text.splitlines()) >= 3
    low = text.lower()
    assert "emp" in low and "dept" in low and "join" in low and "aggregate" in low


# -- the sqlite dialect against SQLite ------------------------------------------------------

SQLITE_DDL = "CREATE TABLE t (a INTEGER, b INTEGER, s TEXT, x REAL)"
SQLITE_QUERIES = [
    "SELECT a / b, a % b FROM t WHERE b <> 0",
    "SELECT s || '!', a || s FROM t",
    "SELECT s, count(*), sum(a), avg(a), sum(x) FROM t GROUP BY s",
    "SELECT s, total(x) FROM t GROUP BY s",
    "SELECT a FROM t ORDER BY a LIMIT 3",
    "SELECT a, b FROM t WHERE a NOT IN (SELECT b FROM t)",
    "SELECT max(s), min(x) FROM t",
]


@pytest.mark.parametrize("sql", SQLITE_QUERIES)
def test_sqlite_dialect_matches_sqlite(sql: str) -> None:
    """dialect="sqlite": integer division, || and aggregates as SQLite computes them."""
    db = dsql.Database(dialect="sqlite")
    lite = sqlite3.connect(":memory:")
    db.execute(SQLITE_DDL)
    lite.execute(SQLITE_DDL)
    v = db.view(sql)
    ordered = "ORDER BY" in sql
    batches = [
        (
            "+",
            [
                (7, 2, "a", 1.5),
                (-7, 2, "a", None),
                (None, 3, None, 2.0),
                (1, 0, "b", -1.0),
                (5, None, "b", 0.25),
                (5, None, "b", 0.25),
            ],
        ),
        ("-", [(7, 2, "a", 1.5)]),
        ("+", [(9, 4, "c", 3.0), (2, 5, "a", 1.0)]),
        (
            "-",
            [
                (-7, 2, "a", None),
                (None, 3, None, 2.0),
                (1, 0, "b", -1.0),
                (5, None, "b", 0.25),
                (5, None, "b", 0.25),
                (9, 4, "c", 3.0),
                (2, 5, "a", 1.0),
            ],
        ),
        ("+", [(3, 3, "z", 3.0)]),
    ]
    for i, (op, rows) in enumerate(batches):
        if op == "+":
            db.insert("t", rows)
            lite.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
        else:
            db.delete("t", rows)
            for r in rows:
                lite.execute(
                    "DELETE FROM t WHERE rowid = (SELECT rowid FROM t WHERE a IS ? AND "
                    "b IS ? AND s IS ? AND x IS ? LIMIT 1)",
                    r,
                )
        db.commit()
        want = lite.execute(sql).fetchall()
        extra, missing = same_rows(v.rows(), want, ordered)
        assert not extra and not missing, (i, sql, v.rows(), want)


def test_views_are_independent_of_each_other() -> None:
    """Many views over the same tables all stay right through one stream."""
    o = Oracle(EMP_DDL)
    o.view("SELECT dept, count(*) FROM emp GROUP BY dept")
    o.view("SELECT e.name, d.dname FROM emp e JOIN dept d ON e.dept = d.dept")
    o.view("SELECT dept FROM dept EXCEPT SELECT dept FROM emp")
    o.view("SELECT count(*) FROM dept")
    for c in EMP_STREAM:
        o.commit(c)
    o.commit([Del("emp", [o.tables["emp"][0]]), Ins("emp", [(100, "zed", 20, D("1.00"), 1)])])


def test_update_to_the_same_row_changes_nothing() -> None:
    """A no-op update (delete and insert the same row) leaves rows() and gives no changes()."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT, s STRING)")
    v = db.view("SELECT s, count(*), sum(a) FROM t GROUP BY s")
    w = db.view("SELECT a, s FROM t")
    db.insert("t", [(1, "x"), (2, "x")])
    db.commit()
    v.changes()
    w.changes()
    db.delete("t", [(1, "x")])
    db.insert("t", [(1, "x")])
    db.execute("UPDATE t SET a = a WHERE a = 2")
    db.commit()
    assert v.rows() == [("x", 2, 3)] and v.changes() == [] and w.changes() == []


def test_view_over_a_view_is_right_or_unsupported() -> None:
    """A view over a view follows it, or is refused naming it; it is never silently wrong."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT)")
    db.execute("CREATE VIEW big AS SELECT a FROM t WHERE a > 1")
    try:
        v = db.view("SELECT count(*) FROM big")
    except (dsql.UnsupportedSQL, dsql.SQLError) as e:
        assert "big" in str(e)
        return
    db.insert("t", [(1,), (2,), (3,)])
    db.commit()
    assert v.rows() == [(2,)]
