"""Numeric functions at their edges, as Spark SQL (ANSI mode) and SQLite compute them.

The Spark answers written out here were read off Spark 4.3 on the same rows; the SQLite
ones are checked against Python's ``sqlite3`` in the test itself. Rounding to tens and
hundreds, ``DIV`` of decimals, decimal results that leave their type's digits, ``round``
of a DOUBLE whose decimal form ends in 5, ``sqrt`` of a negative, a DOUBLE written as text.
"""

from __future__ import annotations

import math
import sqlite3
from decimal import Decimal as D
from typing import Any

import pytest

import ddflow.sql as dsql


def _view(ddl: str, sql: str, rows: list[tuple[Any, ...]], dialect: str = "spark") -> Any:
    db = dsql.Database(dialect=dialect)
    db.execute(ddl)
    v = db.view(sql)
    db.insert("t", rows + [rows[0]])
    db.commit()
    db.delete("t", [rows[0]])  # (the answer after a delete, too)
    db.commit()
    return v


def test_round_a_decimal_to_tens_and_hundreds() -> None:
    v = _view(
        "CREATE TABLE t (b DECIMAL(12,3))",
        "SELECT b, round(b, -1), round(b, -2), round(b, -20) FROM t",
        [(D("25.000"),), (D("123456789.999"),), (D("-5.000"),), (D("-149.999"),)],
    )
    assert sorted(v.rows()) == [
        (D("-149.999"), D("-150"), D("-100"), D("0")),
        (D("-5.000"), D("-10"), D("0"), D("0")),
        (D("25.000"), D("30"), D("0"), D("0")),
        (D("123456789.999"), D("123456790"), D("123456800"), D("0")),
    ]
    # Spark's type: no places, and at least the digits of the unit rounded to
    assert [str(t) for t in v.types][1:] == ["DECIMAL(10,0)", "DECIMAL(10,0)", "DECIMAL(21,0)"]


def test_round_an_integer_to_tens_raises_past_its_type() -> None:
    v = _view(
        "CREATE TABLE t (i BIGINT, j INT)",
        "SELECT round(i, -1), round(j, -2) FROM t",
        [(15, 149), (-15, -150), (0, 2147483549)],
    )
    assert sorted(v.rows()) == [(-20, -200), (0, 2147483500), (20, 100)]
    for ddl, sql, row in [
        ("CREATE TABLE t (i BIGINT)", "SELECT round(i, -1) FROM t", (9223372036854775807,)),
        ("CREATE TABLE t (i BIGINT)", "SELECT round(i, -1) FROM t", (-9223372036854775807,)),
        ("CREATE TABLE t (i INT)", "SELECT round(i, -1) FROM t", (2147483647,)),
    ]:
        db = dsql.Database()
        db.execute(ddl)
        db.view(sql)
        db.insert("t", [row])
        with pytest.raises(dsql.DataError, match="overflow"):
            db.commit()


def test_div_of_decimals_divides_them_as_they_are() -> None:
    v = _view(
        "CREATE TABLE t (b DECIMAL(10,3), a INT)",
        "SELECT b DIV 1.5, a DIV 0.5, b DIV 0.3, b DIV a, a DIV 0.0 FROM t",
        [(D("5.500"), 4), (D("-7.250"), -3)],
    )
    assert sorted(v.rows()) == [(-4, -6, -24, 2, None), (3, 8, 18, 1, None)]


@pytest.mark.parametrize(
    ("ddl", "sql", "row"),
    [
        ("CREATE TABLE t (f DECIMAL(38,0))", "SELECT f * f FROM t", (D("6E37"),)),
        ("CREATE TABLE t (f DECIMAL(38,0))", "SELECT f + f FROM t", (D("6E37"),)),
        (
            "CREATE TABLE t (f DECIMAL(5,3))",
            "SELECT CAST(f AS DECIMAL(3,2)) FROM t",
            (D("-99.999"),),
        ),
        ("CREATE TABLE t (s STRING)", "SELECT CAST(s AS DECIMAL(10,2)) FROM t", ("99999999.995",)),
        ("CREATE TABLE t (s SMALLINT)", "SELECT CAST(s AS DECIMAL(5,1)) FROM t", (32767,)),
        ("CREATE TABLE t (s STRING)", "SELECT CAST(s AS INT) FROM t", ("99999999999",)),
    ],
    ids=["product", "sum", "narrower_decimal", "string_to_decimal", "smallint", "string_to_int"],
)
def test_a_value_past_its_type_raises(ddl: str, sql: str, row: tuple[Any, ...]) -> None:
    """Spark (ANSI) raises NUMERIC_VALUE_OUT_OF_RANGE or CAST_OVERFLOW; nothing changes."""
    db = dsql.Database()
    db.execute(ddl)
    v = db.view(sql)
    db.commit()
    db.insert("t", [row])
    with pytest.raises(dsql.DataError, match="overflow"):
        db.commit()
    assert v.rows() == []


def test_casts_that_fit_are_unchanged() -> None:
    v = _view(
        "CREATE TABLE t (f DECIMAL(5,3), s SMALLINT)",
        "SELECT CAST(f AS DECIMAL(4,2)), CAST(f AS DECIMAL(3,2)), CAST(s AS DECIMAL(6,1)), "
        "f * 2 FROM t",
        [(D("9.994"), 32767), (D("-9.994"), -32768)],
    )
    assert sorted(v.rows()) == [
        (D("-9.99"), D("-9.99"), D("-32768.0"), D("-19.988")),
        (D("9.99"), D("9.99"), D("32767.0"), D("19.988")),
    ]


def test_sqrt_of_a_negative() -> None:
    spark = _view(
        "CREATE TABLE t (c DOUBLE, a INT)", "SELECT sqrt(c), sqrt(a) FROM t", [(-1.0, -4), (4.0, 9)]
    )
    got = sorted(spark.rows(), key=lambda r: (not math.isnan(r[0]), r[0]))
    assert math.isnan(got[0][0]) and math.isnan(got[0][1]) and got[1] == (2.0, 3.0)
    lite = _view(
        "CREATE TABLE t (c DOUBLE, a INT)",
        "SELECT sqrt(c), sqrt(a) FROM t",
        [(-1.0, -4), (4.0, 9)],
        "sqlite",
    )
    assert sorted(lite.rows(), key=repr) == sorted([(None, None), (2.0, 3.0)], key=repr)


_HALVES = [1.005, 0.285, -1.005, 2.675, 1234.5, 0.1, -0.5, 15.0, 1e300, 0.125, 2.5e-7]


def test_round_of_a_double_rounds_its_decimal_form() -> None:
    """1.005 is 1.00499999999999989... in binary; Spark and SQLite round what it reads as."""
    v = _view(
        "CREATE TABLE t (c DOUBLE)",
        "SELECT c, round(c, 2), round(c, -1) FROM t",
        [(x,) for x in _HALVES],
    )
    got = {r[0]: r[1:] for r in v.rows()}
    assert got[1.005] == (1.01, 0.0) and got[-1.005] == (-1.01, -0.0)
    assert got[0.285] == (0.29, 0.0) and got[2.675] == (2.68, 0.0)
    assert got[1234.5] == (1234.5, 1230.0) and got[15.0] == (15.0, 20.0)
    assert got[-0.5] == (-0.5, -0.0) and got[0.125] == (0.13, 0.0) and got[1e300] == (1e300, 1e300)
    lite = _view(
        "CREATE TABLE t (c DOUBLE)",
        "SELECT c, round(c, 2), round(c, -1), round(c) FROM t",
        [(x,) for x in _HALVES],
        "sqlite",
    )
    con = sqlite3.connect(":memory:")
    want = sorted(
        con.execute("SELECT ?, round(?, 2), round(?, -1), round(?)", (x, x, x, x)).fetchone()
        for x in _HALVES
    )
    assert sorted(lite.rows()) == want


_TEXTS = [1e10, 1e-4, 123456789.123, 100.0, 0.001, 0.1, 1234567.0, 12345678.0, -2.5, 1e21, 1 / 3]


def test_a_double_as_text() -> None:
    """Spark writes a DOUBLE as Java does (``1.0E10``); SQLite with 15 digits (``1.0e+21``)."""
    v = _view(
        "CREATE TABLE t (c DOUBLE)", "SELECT c, CAST(c AS STRING) FROM t", [(x,) for x in _TEXTS]
    )
    got = dict(v.rows())
    assert [got[x] for x in _TEXTS] == [
        "1.0E10",
        "1.0E-4",
        "1.23456789123E8",
        "100.0",
        "0.001",
        "0.1",
        "1234567.0",
        "1.2345678E7",
        "-2.5",
        "1.0E21",
        "0.3333333333333333",
    ]
    lite = _view(
        "CREATE TABLE t (c DOUBLE)",
        "SELECT c, CAST(c AS TEXT) FROM t",
        [(x,) for x in _TEXTS],
        "sqlite",
    )
    con = sqlite3.connect(":memory:")
    want = {x: con.execute("SELECT CAST(? AS TEXT)", (x,)).fetchone()[0] for x in _TEXTS}
    assert dict(lite.rows()) == want


def test_sqlite_truth_values_as_arrow() -> None:
    """SQLite's truth values are the integers 0 and 1: rows() and to_arrow() agree."""
    v = _view("CREATE TABLE t (a INT)", "SELECT a > 1 AS x FROM t", [(1,), (2,), (None,)], "sqlite")
    assert sorted(v.rows(), key=repr) == sorted([(0,), (1,), (None,)], key=repr)
    assert sorted(v.to_arrow().column("x").to_pylist(), key=repr) == sorted([0, 1, None], key=repr)


def test_sqlite_remainder_of_reals_takes_their_integer_parts() -> None:
    rows = [(5.5, 2.5, 7), (5.5, 0.5, 5), (-7.9, 2.0, -7)]
    v = _view(
        "CREATE TABLE t (c DOUBLE, d DOUBLE, i INT)",
        "SELECT c % 2, c % d, -c % 2, i % d, i % 2 FROM t",
        rows,
        "sqlite",
    )
    con = sqlite3.connect(":memory:")
    q = "SELECT ? % 2, ? % ?, -? % 2, ? % ?, ? % 2"
    want = [con.execute(q, (c, c, d, c, i, d, i)).fetchone() for c, d, i in rows]
    assert sorted(v.rows(), key=repr) == sorted(want, key=repr)


def _sqlite_same(ddl: str, tables: dict[str, list[tuple[Any, ...]]], sql: str) -> None:
    """A sqlite-dialect view over ``tables`` (fed with a duplicate row, then that row
    deleted) equals sqlite3's answer to the same query on the same rows."""
    db = dsql.Database(dialect="sqlite")
    con = sqlite3.connect(":memory:")
    for stmt in ddl.split(";"):
        db.execute(stmt)
        con.execute(stmt)
    v = db.view(sql)
    for name, rows in tables.items():
        db.insert(name, rows + rows[:1])
        con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    db.commit()
    for name, rows in tables.items():
        db.delete(name, rows[:1])
    db.commit()
    want = con.execute(sql).fetchall()
    assert sorted(v.rows(), key=repr) == sorted(want, key=repr)


_TABS = (
    "CREATE TABLE tab0 (col0 INTEGER, col1 INTEGER, col2 REAL);"
    "CREATE TABLE tab1 (col0 INTEGER, col1 INTEGER, col2 REAL)"
)
_ROWS = {
    "tab0": [(1, 2, 0.5), (4, 2, 1.5), (None, 3, None)],
    "tab1": [(1, 7, 2.0), (9, 7, None)],
}


@pytest.mark.parametrize(
    "sql",
    [
        # NULLIF's value keeps its first argument's type (73 / -42 is integer division)
        "SELECT NULLIF(73, -3522.0) / -42, NULLIF(col0, 1.0) / 2, NULLIF(col2, 1) FROM tab0",
        # arguments after a constant are never evaluated, so need not be grouped
        "SELECT DISTINCT COALESCE(77, tab0.col0) AS c FROM tab0 GROUP BY tab0.col1",
        "SELECT col1 + COALESCE(82 + 87, col2 * col2, col0) FROM tab0 GROUP BY col1",
        "SELECT COALESCE(NULL, 5, col0) FROM tab0 GROUP BY col1",
        # ... but an aggregate among them still makes one row of the whole table
        "SELECT COALESCE(18, -COUNT(*)) * 2 FROM tab0",
        "SELECT 36 / COALESCE(CAST(76 AS INTEGER), COUNT(*) * COALESCE(61, -AVG(41) / -34)) "
        "FROM tab0",
        # a join in parentheses at the start of FROM
        "SELECT -COUNT(*) FROM (tab1 AS cor0 CROSS JOIN tab0 AS cor1)",
        "SELECT cor0.col0, cor1.col2, t.col1 FROM (tab1 AS cor0 JOIN tab0 AS cor1 "
        "ON cor0.col0 = cor1.col0) LEFT JOIN tab0 AS t ON t.col0 = cor1.col0 + 3",
    ],
)
def test_sqlite_constructs_of_the_logic_tests(sql: str) -> None:
    _sqlite_same(_TABS, _ROWS, sql)


@pytest.mark.parametrize(
    ("sql", "want"),
    [
        # a NULL row's slot holds 0 - 2147483647, and 8 less than that leaves INT: but the
        # row is NULL, so nothing overflows
        ("SELECT a - 2147483647 - 8 FROM t", [(-2147483645,), (None,)]),
        ("SELECT a - 2147483647 - c FROM t", [(-2147483645,), (None,)]),
        ("SELECT b - 9223372036854775800 - 9 FROM t", [(-9223372036854775799,), (None,)]),
        ("SELECT CAST(a - 2147483647 - 8 AS SMALLINT) IS NULL FROM t", None),
        ("SELECT d - 999.99 - 99999.99 FROM t", [(D("-100998.48"),), (None,)]),
        ("SELECT sum(a - 2147483647 - 8) FROM t", [(-2147483645,)]),
        ("SELECT -(a - 2147483647 - 1) FROM t", [(2147483638,), (None,)]),
    ],
)
def test_null_rows_do_not_overflow(sql: str, want: list[tuple[Any, ...]] | None) -> None:
    """Arithmetic on NULL rows gives NULL, never an overflow: their slots hold whatever the
    arithmetic of their placeholders gave, and overflow checks look at non-NULL rows only
    (the non-NULL row here is in range, so only a NULL row could have raised)."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT, b BIGINT, c INT, d DECIMAL(7,2))")
    view = db.view(sql)
    db.insert("t", [(10, 10, 8, D("1.50")), (None, None, None, None)])
    if "SMALLINT" in sql:
        with pytest.raises(dsql.DataError):  # (the non-NULL row does not fit SMALLINT)
            db.commit()
        return
    db.commit()
    assert sorted(view.rows(), key=repr) == sorted(want or [], key=repr)
