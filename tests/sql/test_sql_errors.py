"""Bad input gets an error that names the problem, and a statement that fails changes no
table and no view: unknown tables and columns, type mismatches, rows of the wrong width or
type, deleting rows that are not there (``DataError``), unsupported SQL (``UnsupportedSQL``
naming the construct), and a commit whose dataflow fails."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal as D
from typing import Any

import pytest

import ddflow.sql as dsql

DDL = "CREATE TABLE t (a INT, b STRING, c DECIMAL(6,2), d DATE, e TINYINT NOT NULL)"
ROWS = [(1, "x", D("1.50"), dt.date(2024, 1, 1), 1), (2, None, None, None, 2)]


def _db() -> tuple[dsql.Database, Any]:
    db = dsql.Database()
    db.execute(DDL)
    v = db.view("SELECT a, b, c, d, e FROM t")
    db.insert("t", ROWS)
    db.commit()
    v.changes()
    return db, v


def _unchanged(db: dsql.Database, v: Any) -> None:
    """Nothing changed: the next commit leaves the view's rows as they were, no changes."""
    db.commit()
    assert sorted(v.rows(), key=repr) == sorted(ROWS, key=repr)
    assert v.changes() == []
    assert sorted(db.execute("SELECT a, b, c, d, e FROM t"), key=repr) == sorted(ROWS, key=repr)


# -- SQL that does not fit the tables --------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "names"),
    [
        ("SELECT a FROM nope", ["nope"]),
        ("SELECT zz FROM t", ["zz"]),
        ("SELECT t.a FROM t JOIN nope2 ON t.a = nope2.a", ["nope2"]),
        ("SELECT a FROM t WHERE qq > 1", ["qq"]),
        ("SELECT a, count(*) FROM t GROUP BY ww", ["ww"]),
        ("SELECT a FROM t WHERE a IN (SELECT yy FROM t)", ["yy"]),
    ],
)
def test_unknown_table_or_column_is_named(sql: str, names: list[str]) -> None:
    """An unknown table or column raises SQLError naming it; no view is made."""
    db, v = _db()
    before = dict(db.views)
    with pytest.raises(dsql.SQLError) as ei:
        db.view(sql)
    for n in names:
        assert n in str(ei.value)
    assert dict(db.views) == before
    _unchanged(db, v)


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("SELECT a FROM t WHERE d = TRUE", ["DATE", "BOOLEAN"]),
        ("SELECT d + c FROM t", ["DATE", "DECIMAL"]),
        ("SELECT a FROM t WHERE a AND d", ["boolean", "INT"]),
        ("SELECT sum(d) FROM t", ["sum", "DATE"]),
    ],
)
def test_type_mismatch_is_named(sql: str, words: list[str]) -> None:
    """An expression whose operand types do not fit raises SQLError naming the types."""
    db, v = _db()
    with pytest.raises(dsql.SQLError) as ei:
        db.view(sql)
    msg = str(ei.value)
    for w in words:
        assert w.lower() in msg.lower(), msg
    _unchanged(db, v)


def test_aggregate_in_where_is_an_error() -> None:
    """An aggregate in WHERE is an SQLError naming the aggregate, not a crash."""
    db, v = _db()
    with pytest.raises(dsql.SQLError) as ei:
        db.view("SELECT a FROM t WHERE sum(a) > 1")
    assert "sum" in str(ei.value).lower()


def test_non_grouped_column_is_an_error() -> None:
    """Selecting a column that is neither grouped nor aggregated is an SQLError naming it."""
    db, v = _db()
    with pytest.raises(dsql.SQLError) as ei:
        db.view("SELECT a, b FROM t GROUP BY a")
    assert "b" in str(ei.value)


def test_ambiguous_column_is_an_error() -> None:
    """A column name two joined tables share, unqualified, is an SQLError naming it."""
    db, v = _db()
    db.execute("CREATE TABLE u (a INT, z INT)")
    with pytest.raises(dsql.SQLError) as ei:
        db.view("SELECT a FROM t JOIN u ON t.a = u.z")
    assert "a" in str(ei.value)


def test_parse_error_is_an_sql_error() -> None:
    """Text that does not parse raises SQLError, not a parser's own exception."""
    db, v = _db()
    with pytest.raises(dsql.SQLError):
        db.view("SELEC a FRM t")
    _unchanged(db, v)


def test_unknown_dialect() -> None:
    """An unknown dialect is refused with an error naming it."""
    with pytest.raises(dsql.DDError) as ei:
        dsql.Database(dialect="oracle9")
    assert "oracle9" in str(ei.value)


# -- rows that do not fit --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "names"),
    [
        ((1, "x", D("1.00"), None), ["4", "5"]),  # too few values
        ((1, "x", D("1.00"), None, 1, 9), ["6", "5"]),  # too many values
        (("one", "x", D("1.00"), None, 1), ["a"]),  # str into INT
        ((1.5, "x", D("1.00"), None, 1), ["a"]),  # float into INT
        ((1, 7, D("1.00"), None, 1), ["b"]),  # int into STRING
        ((1, "x", "1.00x", None, 1), ["c"]),  # str into DECIMAL
        ((1, "x", D("12345.67"), None, 1), ["c"]),  # too many digits
        ((1, "x", D("1.00"), "someday", 1), ["d"]),  # not a date
        ((1, "x", D("1.00"), None, 300), ["e"]),  # out of TINYINT
        ((2**40, "x", D("1.00"), None, 1), ["a"]),  # out of INT
        ((1, "x", D("1.00"), None, None), ["e"]),  # NULL into NOT NULL
    ],
)
def test_bad_row_is_refused_naming_the_problem(row: tuple[Any, ...], names: list[str]) -> None:
    """A row of wrong width or type raises DataError naming it; no row of the call goes in."""
    db, v = _db()
    with pytest.raises(dsql.DataError) as ei:
        db.insert("t", [(3, "ok", D("3.00"), None, 3), row])
    msg = str(ei.value)
    for n in names:
        assert f"'{n}'" in msg or n in msg, msg
    _unchanged(db, v)


def test_insert_into_unknown_table() -> None:
    """Inserting into a table that does not exist raises SQLError naming it."""
    db, v = _db()
    with pytest.raises(dsql.SQLError) as ei:
        db.insert("nope", [(1,)])
    assert "nope" in str(ei.value)


def test_delete_absent_row_changes_nothing() -> None:
    """Deleting an absent row raises DataError naming it and deletes nothing of the call."""
    db, v = _db()
    with pytest.raises(dsql.DataError) as ei:
        db.delete("t", [ROWS[0], (9, "zz", None, None, 9)])
    assert "zz" in str(ei.value)
    _unchanged(db, v)


def test_delete_more_copies_than_present_changes_nothing() -> None:
    """Deleting two copies of a row held once raises DataError and deletes nothing."""
    db, v = _db()
    with pytest.raises(dsql.DataError):
        db.delete("t", [ROWS[1], ROWS[1]])
    _unchanged(db, v)


def test_delete_counts_pending_changes() -> None:
    """A row inserted earlier in the same commit can be deleted; deleted twice cannot."""
    db, v = _db()
    new = (5, "n", None, None, 5)
    db.insert("t", [new])
    db.delete("t", [new])
    with pytest.raises(dsql.DataError):
        db.delete("t", [new])
    _unchanged(db, v)


# -- statements that fail change nothing ---------------------------------------------------


@pytest.mark.parametrize(
    "stmt",
    [
        "INSERT INTO t VALUES (3, 'ok', 3.00, NULL, 3), ('bad', 'x', 1, NULL, 1)",
        "INSERT INTO t VALUES (3, 'ok', 3.00, NULL, 3), (4, 'x', 1, NULL, 1000)",
        "INSERT INTO t VALUES (3, 'ok', 3.00, NULL, 3), (4, 'x')",
        "INSERT INTO t (a, zz) VALUES (3, 4)",
        "INSERT INTO t VALUES (3, 'ok', 3.00, NULL, NULL)",
        "UPDATE t SET zz = 1",
        "UPDATE t SET e = NULL",
        "UPDATE t SET e = e + 200",
        "DELETE FROM t WHERE zz = 1",
        "DELETE FROM nope",
    ],
)
def test_failing_statement_changes_nothing(stmt: str) -> None:
    """A DML statement that raises leaves every table and view as it was."""
    db, v = _db()
    with pytest.raises(dsql.DDError):
        db.execute(stmt)
    _unchanged(db, v)


def test_failing_view_leaves_no_view_and_other_views_work() -> None:
    """A view that fails to plan is not registered; its name stays free."""
    db, v = _db()
    with pytest.raises(dsql.DDError):
        db.execute("CREATE VIEW bad AS SELECT zz FROM t")
    assert "bad" not in db.views
    db.execute("CREATE VIEW bad AS SELECT a FROM t")
    db.insert("t", [(3, None, None, None, 3)])
    db.commit()
    assert sorted(db.views["bad"].rows()) == [(1,), (2,), (3,)]


def test_failing_commit_is_undone() -> None:
    """A commit that overflows raises, keeps the last commit's tables, and later commits work."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a TINYINT, b TINYINT)")
    s = db.view("SELECT a + b FROM t")
    n = db.view("SELECT count(*) FROM t")
    db.insert("t", [(1, 2)])
    db.commit()
    db.insert("t", [(100, 100)])
    with pytest.raises(dsql.DDError) as ei:
        db.commit()
    assert "overflow" in str(ei.value).lower()
    assert s.rows() == [(3,)] and n.rows() == [(1,)]
    db.insert("t", [(4, 5)])
    db.commit()
    assert sorted(s.rows()) == [(3,), (9,)] and n.rows() == [(2,)]


def test_failing_commit_raises_data_error() -> None:
    """The error of a commit that overflows is a DataError, caught like bad rows."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a TINYINT, b TINYINT)")
    db.view("SELECT a + b FROM t")
    db.insert("t", [(100, 100)])
    with pytest.raises(dsql.DataError):
        db.commit()


def test_failing_query_raises_data_error() -> None:
    """A query run once (``execute`` of a SELECT) that overflows raises the DataError
    itself, not the operator's wrapper; the database goes on."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a BIGINT)")
    db.insert("t", [(2**63 - 1,)])
    with pytest.raises(dsql.DataError, match="overflow"):
        db.execute("SELECT a + 1 FROM t")
    assert db.execute("SELECT a - 1 FROM t") == [(2**63 - 2,)]


def test_drop_table_used_by_a_view_is_refused() -> None:
    """DROP TABLE of a table a view reads raises SQLError naming the view."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT)")
    db.execute("CREATE VIEW vv AS SELECT a FROM t")
    with pytest.raises(dsql.SQLError) as ei:
        db.execute("DROP TABLE t")
    assert "vv" in str(ei.value)


# -- unsupported SQL -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("SELECT a, count(DISTINCT c) OVER (ORDER BY a) FROM t", "distinct"),
        ("SELECT a FROM t WHERE row_number() OVER (ORDER BY a) = 1", "window"),
        ("SELECT DISTINCT b, sum(a) FROM t GROUP BY ROLLUP (b)", "rollup"),
        ("SELECT a FROM t WHERE d > current_date()", "current_date"),
        ("SELECT a, rand() FROM t", "rand"),
        ("SELECT a FROM t TABLESAMPLE (50 PERCENT)", "tablesample"),
        ("SELECT 1 FROM range(1000000000)", "range() of more than"),
        ("SELECT * FROM explode(array(1, 2))", "table-valued function explode"),
        # the outer row read beside a window function in the subquery's derived table
        (
            "SELECT a FROM t WHERE a < (SELECT sum(x) FROM (SELECT row_number() OVER "
            "(ORDER BY u.a) + t.b AS x FROM t u))",
            "correlated reference to 't.b'",
        ),
    ],
)
def test_unsupported_sql_names_the_construct(sql: str, construct: str) -> None:
    """SQL outside what ddflow runs raises UnsupportedSQL naming the construct."""
    db, v = _db()
    with pytest.raises(dsql.UnsupportedSQL) as ei:
        db.view(sql)
    assert construct in str(ei.value).lower()
    _unchanged(db, v)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT bit_xor(a) FROM t",
        "SELECT collect_list(a) FROM t",
    ],
)
def test_beyond_the_issue_is_right_or_unsupported(sql: str) -> None:
    """SQL beyond the issue gives DuckDB's answer or UnsupportedSQL, never a wrong one."""
    import duckdb

    db, v = _db()
    try:
        view = db.view(sql)
    except dsql.UnsupportedSQL:
        return
    duck = duckdb.connect()
    duck.execute(DDL)
    duck.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", ROWS)
    from oracle import same_rows

    duck_sql = sql.replace("collect_list", "list")
    extra, missing = same_rows(view.rows(), duck.execute(duck_sql).fetchall())
    assert not extra and not missing
