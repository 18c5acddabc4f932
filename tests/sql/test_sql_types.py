"""Every SQL type with NULLs, against DuckDB after every commit of a churning stream:
projection, comparison, arithmetic, string functions, dates/timestamps and CAST; plus the
exact decimal results (value and scale) checked by hand."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal as D

import pytest
from oracle import Del, Ins, Oracle, case, check_stream
from sqldata import WIDE_DDL, WIDE_STREAM

import ddflow.sql as dsql

PROJECTIONS = [
    case("SELECT * FROM w", id="select-star"),
    case("SELECT id, bo, ti, si, i, bi FROM w WHERE id > 1", id="ints-and-bool"),
    case("SELECT de, db, s, vc, ch FROM w", id="decimal-double-strings"),
    case("SELECT d, ts, id FROM w", id="date-timestamp"),
]

COMPARISONS = [
    case("SELECT id FROM w WHERE bo", id="bool-column-as-predicate"),
    case("SELECT id FROM w WHERE NOT bo", id="not-bool"),
    case("SELECT id FROM w WHERE ti > 0", id="tinyint-gt"),
    case("SELECT id FROM w WHERE si <= 7", id="smallint-le"),
    case("SELECT id FROM w WHERE bi >= 1000000000000", id="bigint-ge"),
    case("SELECT id FROM w WHERE de >= 7", id="decimal-vs-int"),
    case("SELECT id FROM w WHERE de = 12.5", id="decimal-eq-literal"),
    case("SELECT id FROM w WHERE db < 0", id="double-lt"),
    case("SELECT id FROM w WHERE db = 1.5", id="double-eq"),
    case("SELECT id FROM w WHERE s = 'apple'", id="string-eq"),
    case("SELECT id FROM w WHERE s <> 'apple'", id="string-ne"),
    case("SELECT id FROM w WHERE s < 'b'", id="string-lt-uses-string-order"),
    case("SELECT id FROM w WHERE s >= 'Banana' AND s < 'apple'", id="string-range"),
    case("SELECT id FROM w WHERE vc > s", id="string-vs-string-column"),
    case("SELECT id FROM w WHERE ch = 'abc'", id="char-eq"),
    case("SELECT id FROM w WHERE d < DATE '2024-01-01'", id="date-lt-literal"),
    case(
        "SELECT id FROM w WHERE d BETWEEN DATE '2023-12-31' AND DATE '2024-02-29'",
        id="date-between",
    ),
    case("SELECT id FROM w WHERE ts >= TIMESTAMP '2024-01-15 10:30:00'", id="timestamp-ge"),
    case("SELECT id FROM w WHERE ts < TIMESTAMP '1970-01-01 00:00:00'", id="timestamp-pre-epoch"),
    case(
        "SELECT id, ti < si, de > db, s = vc, d = CAST(ts AS DATE) FROM w",
        id="comparisons-as-values-with-nulls",
    ),
]

ARITHMETIC = [
    case("SELECT id, ti + si, i * 2, bi - i, -i FROM w", id="int-arithmetic"),
    case("SELECT id, i % 3, bi % 7 FROM w", id="int-modulo-negative"),
    case("SELECT id, i / 2, bi / 4 FROM w", id="int-division-gives-double"),
    case(
        "SELECT id, de + 1, de - de, de * 2, de * de, de + i FROM w",
        "SELECT id, de + 1, de - de, de * 2, CAST(de AS DECIMAL(21,2)) * de, de + i FROM w",
        id="decimal-arithmetic",
    ),
    case(
        "SELECT id, de / 4 FROM w",
        "SELECT id, round(de / 4, 6) FROM w",
        id="decimal-division-scale-6",
    ),
    case("SELECT id, db * 2, db + i, db - de, db / 4 FROM w", id="double-arithmetic"),
    case("SELECT id, abs(i), abs(de), abs(db) FROM w", id="abs"),
    case(
        "SELECT id, round(de, 1), round(db, 1), floor(de), ceil(db) FROM w", id="round-floor-ceil"
    ),
    case("SELECT id, i + NULL, de * NULL FROM w", id="arithmetic-with-null-literal"),
    case(
        "SELECT id, i DIV 2, bi DIV -3 FROM w",
        "SELECT id, i // 2, bi // -3 FROM w",
        id="div-integer-division-truncates",
    ),
    case(
        "SELECT id, i / 0, i DIV 0, de / 0, i % 0 FROM w",
        "SELECT id, NULL, NULL, NULL, NULL FROM w",
        id="division-by-zero-is-null",
    ),
    case("SELECT id, sqrt(abs(db)), power(i, 2), power(db, 2) FROM w", id="sqrt-power"),
    case("SELECT id, power(de, 2) FROM w", id="power-of-decimal-is-double"),
]

STRINGS = [
    case("SELECT id, upper(s), lower(vc), upper(ch) FROM w", id="upper-lower"),
    case("SELECT id, length(s), length(vc), length(ch) FROM w", id="length"),
    case(
        "SELECT id, substring(s, 2, 3), substring(s, 1, 1), substring(s, 3) FROM w", id="substring"
    ),
    case("SELECT id, substring(s, -3, 2) FROM w", id="substring-negative-start"),
    case("SELECT id, s || '-' || vc FROM w", id="concat-operator-null-propagates"),
    case(
        "SELECT id, concat(s, vc) FROM w",
        "SELECT id, s || vc FROM w",
        id="concat-function-null-propagates",
    ),
    case("SELECT id, trim(s), ltrim(s), rtrim(s) FROM w", id="trim"),
    case("SELECT id FROM w WHERE s LIKE 'a%'", id="like-prefix"),
    case("SELECT id FROM w WHERE s LIKE '%an%'", id="like-infix"),
    case("SELECT id FROM w WHERE s LIKE '_pple'", id="like-underscore"),
    case("SELECT id FROM w WHERE s NOT LIKE 'a%'", id="not-like-null-excluded"),
    case("SELECT id, s LIKE '%e%' FROM w", id="like-as-value"),
    case("SELECT id FROM w WHERE upper(s) = 'APPLE'", id="upper-in-where"),
    case("SELECT upper(s), count(*) FROM w GROUP BY upper(s)", id="group-by-upper"),
    case("SELECT id FROM w WHERE s LIKE ''", id="like-empty-pattern"),
    case("SELECT id, replace(s, 'p', 'P') FROM w", id="replace"),
    case("SELECT id FROM w WHERE s ILIKE 'A%'", id="ilike"),
    case("SELECT id, lpad(s, 7, '*'), rpad(vc, 4, '-'), lpad(ch, 2, 'x') FROM w", id="lpad-rpad"),
    case("SELECT id, instr(s, 'an'), instr(s, 'p') FROM w", id="instr"),
    case(
        "SELECT id, substring(s, 0, 2) FROM w",
        "SELECT id, substring(s, 1, 2) FROM w",
        id="substring-position-0-is-first-char",
    ),
]

DATES = [
    case(
        "SELECT id, d + INTERVAL 1 DAY FROM w",
        "SELECT id, CAST(d + INTERVAL 1 DAY AS DATE) FROM w",
        id="date-plus-interval-day",
    ),
    case(
        "SELECT id, d - INTERVAL 1 MONTH FROM w",
        "SELECT id, CAST(d - INTERVAL 1 MONTH AS DATE) FROM w",
        id="date-minus-interval-month-clamps",
    ),
    case(
        "SELECT id, d + INTERVAL 1 YEAR FROM w",
        "SELECT id, CAST(d + INTERVAL 1 YEAR AS DATE) FROM w",
        id="date-plus-year-leap",
    ),
    case(
        "SELECT id, date_add(d, 30), date_sub(d, 1) FROM w",
        "SELECT id, d + 30, d - 1 FROM w",
        id="date_add-date_sub",
    ),
    case(
        "SELECT id, datediff(d, DATE '2024-01-01') FROM w",
        "SELECT id, datediff('day', DATE '2024-01-01', d) FROM w",
        id="datediff",
    ),
    case(
        "SELECT id, ts + INTERVAL 2 HOUR, ts - INTERVAL 30 MINUTE FROM w", id="timestamp-interval"
    ),
    case(
        "SELECT id, EXTRACT(YEAR FROM d), EXTRACT(MONTH FROM d), EXTRACT(DAY FROM d) FROM w",
        id="extract-date-parts",
    ),
    case(
        "SELECT id, EXTRACT(HOUR FROM ts), EXTRACT(MINUTE FROM ts), EXTRACT(YEAR FROM ts) FROM w",
        id="extract-timestamp-parts",
    ),
    case("SELECT id, year(d), month(d), dayofmonth(d) FROM w", id="year-month-day-functions"),
    case("SELECT id FROM w WHERE d + INTERVAL 10 DAY > DATE '2024-01-20'", id="interval-in-where"),
    case(
        "SELECT EXTRACT(YEAR FROM d), count(*) FROM w GROUP BY EXTRACT(YEAR FROM d)",
        id="group-by-extract",
    ),
    case(
        "SELECT id, add_months(d, 1), add_months(d, -13) FROM w",
        "SELECT id, CAST(d + INTERVAL 1 MONTH AS DATE), CAST(d - INTERVAL 13 MONTH AS DATE) FROM w",
        id="add_months",
    ),
    case(
        "SELECT id, EXTRACT(QUARTER FROM d), dayofweek(d), day(d) FROM w",
        "SELECT id, EXTRACT(QUARTER FROM d), dayofweek(d) + 1, day(d) FROM w",
        id="quarter-dayofweek-sunday-is-1",
    ),
    case(
        "SELECT id, d + INTERVAL '3' DAY FROM w",
        "SELECT id, CAST(d + INTERVAL 3 DAY AS DATE) FROM w",
        id="interval-quoted-number",
    ),
]

CASTS = [
    case("SELECT id, CAST(i AS STRING), CAST(bi AS STRING) FROM w", id="int-to-string"),
    case(
        "SELECT id, CAST(i AS DOUBLE), CAST(i AS DECIMAL(12,2)), CAST(ti AS BIGINT) FROM w",
        id="int-to-double-decimal-bigint",
    ),
    case(
        "SELECT id, CAST(de AS INT), CAST(db AS INT) FROM w",
        "SELECT id, CAST(trunc(de) AS INT), CAST(trunc(db) AS INT) FROM w",
        id="decimal-double-to-int-truncates",
    ),
    case(
        "SELECT id, CAST(de AS DOUBLE), CAST(db AS DECIMAL(12,3)) FROM w",
        id="decimal-double-conversions",
    ),
    case("SELECT id, CAST(ts AS DATE), CAST(d AS TIMESTAMP) FROM w", id="date-timestamp-casts"),
    case("SELECT id, CAST(bo AS INT) FROM w", id="bool-to-int"),
    case("SELECT id FROM w WHERE d = CAST('2024-01-15' AS DATE)", id="string-literal-to-date"),
    case("SELECT id, CAST(d AS STRING) FROM w", id="date-to-string"),
    case("SELECT id, CAST(s AS VARCHAR(20)) FROM w", id="string-to-varchar"),
]


def _run(sql: str, duck: str | None, ordered: bool) -> None:
    check_stream(WIDE_DDL, [(sql, duck, ordered)], WIDE_STREAM, create_after=1)


@pytest.mark.parametrize(("sql", "duck", "ordered"), PROJECTIONS)
def test_projection(sql: str, duck: str | None, ordered: bool) -> None:
    """Columns of every type, NULLs included, come back as DuckDB has them."""
    _run(sql, duck, ordered)


@pytest.mark.parametrize(("sql", "duck", "ordered"), COMPARISONS)
def test_comparison(sql: str, duck: str | None, ordered: bool) -> None:
    """Comparisons of every type (strings in string order, not code order) keep TRUE rows."""
    _run(sql, duck, ordered)


@pytest.mark.parametrize(("sql", "duck", "ordered"), ARITHMETIC)
def test_arithmetic(sql: str, duck: str | None, ordered: bool) -> None:
    """Integer, decimal and double arithmetic matches DuckDB (NULL in, NULL out)."""
    _run(sql, duck, ordered)


@pytest.mark.parametrize(("sql", "duck", "ordered"), STRINGS)
def test_string_function(sql: str, duck: str | None, ordered: bool) -> None:
    """LIKE, substring, upper/lower, length, concat/||, trim behave as in DuckDB."""
    _run(sql, duck, ordered)


@pytest.mark.parametrize(("sql", "duck", "ordered"), DATES)
def test_date_function(sql: str, duck: str | None, ordered: bool) -> None:
    """Date/interval arithmetic and EXTRACT match DuckDB (Spark: date + interval is a date)."""
    _run(sql, duck, ordered)


@pytest.mark.parametrize(("sql", "duck", "ordered"), CASTS)
def test_cast(sql: str, duck: str | None, ordered: bool) -> None:
    """CAST between types matches Spark (decimal/double to int truncates)."""
    _run(sql, duck, ordered)


# -- exact decimals, checked by hand --------------------------------------------------------


def _db(ddl: str) -> dsql.Database:
    db = dsql.Database(dialect="spark")
    db.execute(ddl)
    return db


def test_decimal_sum_exact_with_scale() -> None:
    """sum of DECIMAL(12,2) is exact (0.10 thirty times is 3.00) and keeps scale 2."""
    db = _db("CREATE TABLE t (g INT, c DECIMAL(12,2))")
    v = db.view("SELECT g, sum(c) FROM t GROUP BY g")
    db.insert("t", [(1, D("0.10"))] * 30 + [(2, D("-0.01")), (2, D("0.01"))])
    db.commit()
    got = dict(v.rows())
    assert got == {1: D("3.00"), 2: D("0.00")}
    assert got[1].as_tuple().exponent == -2
    assert got[2].as_tuple().exponent == -2


def test_decimal_avg_has_scale_plus_4() -> None:
    """Spark: avg of DECIMAL(12,2) is a DECIMAL with scale 6, rounded half up."""
    db = _db("CREATE TABLE t (c DECIMAL(12,2))")
    v = db.view("SELECT avg(c) FROM t")
    db.insert("t", [(D("1.00"),), (D("1.00"),), (D("2.00"),)])
    db.commit()
    ((avg,),) = v.rows()
    assert avg == D("1.333333")
    assert avg.as_tuple().exponent == -6
    db.insert("t", [(D("0.01"),)] * 5)  # 4.05 / 8 = 0.50625 exactly
    db.commit()
    ((avg,),) = v.rows()
    assert avg == D("0.506250") and avg.as_tuple().exponent == -6


def test_decimal_sum_beyond_int64_is_exact() -> None:
    """A DECIMAL(38,2) sum whose unscaled value exceeds 2**63 stays exact (no wrap)."""
    db = _db("CREATE TABLE t (c DECIMAL(38,2))")
    v = db.view("SELECT sum(c), count(*) FROM t")
    big = D("50000000000000000.01")  # 5e18 unscaled
    db.insert("t", [(big,)] * 4)
    db.commit()
    assert v.rows() == [(big * 4, 4)]
    db.delete("t", [(big,)] * 3)
    db.commit()
    assert v.rows() == [(big, 1)]


def test_decimal_multiplication_adds_scales() -> None:
    """DECIMAL(10,2) * DECIMAL(10,3) is exact with scale 5."""
    db = _db("CREATE TABLE t (a DECIMAL(10,2), b DECIMAL(10,3))")
    v = db.view("SELECT a * b FROM t")
    db.insert("t", [(D("1.25"), D("0.333"))])
    db.commit()
    ((x,),) = v.rows()
    assert x == D("0.41625") and x.as_tuple().exponent == -5


def test_float_column_is_32_bit() -> None:
    """FLOAT is single precision: 0.1 reads back as float32(0.1), as in DuckDB."""
    o = Oracle("CREATE TABLE t (f FLOAT, g DOUBLE)")
    o.view("SELECT f, g, f + g FROM t")
    o.commit([Ins("t", [(0.1, 0.1), (None, 2.5), (-1.5, None)])])
    o.commit([Del("t", [(0.1, 0.1)])])


def test_integer_widths_hold_their_extremes() -> None:
    """TINYINT..BIGINT hold their full ranges, extremes included."""
    o = Oracle("CREATE TABLE t (a TINYINT, b SMALLINT, c INT, d BIGINT)")
    o.view("SELECT * FROM t")
    o.view("SELECT min(a), max(a), min(b), max(b), min(c), max(c), min(d), max(d) FROM t")
    o.commit(
        [
            Ins(
                "t",
                [
                    (-128, -32768, -(2**31), -(2**63)),
                    (127, 32767, 2**31 - 1, 2**63 - 1),
                    (None, None, None, None),
                ],
            )
        ]
    )
    o.commit([Del("t", [(127, 32767, 2**31 - 1, 2**63 - 1)])])


def test_boolean_values_are_bools() -> None:
    """A BOOLEAN column and boolean expressions read back as True/False/None, not 0/1."""
    db = _db("CREATE TABLE t (b BOOLEAN, i INT)")
    v = db.view("SELECT b, i > 0, NOT b FROM t")
    db.insert("t", [(True, 1), (False, -1), (None, None)])
    db.commit()
    rows = v.rows()
    assert sorted(rows, key=repr) == sorted(
        [(True, True, False), (False, False, True), (None, None, None)], key=repr
    )
    assert all(type(x) is bool for r in rows for x in r if x is not None)


def test_date_and_timestamp_values_are_python_types() -> None:
    """DATE reads back as datetime.date, TIMESTAMP as datetime.datetime (microseconds)."""
    db = _db("CREATE TABLE t (d DATE, ts TIMESTAMP)")
    v = db.view("SELECT d, ts FROM t")
    ts = dt.datetime(1900, 5, 6, 7, 8, 9, 123456)
    db.insert("t", [(dt.date(1900, 5, 6), ts)])
    db.commit()
    ((d, t),) = v.rows()
    assert type(d) is dt.date and d == dt.date(1900, 5, 6)
    assert type(t) is dt.datetime and t == ts


def test_strings_compare_by_string_order_after_new_strings_arrive() -> None:
    """String order is by the strings, also for strings that arrive after the view."""
    o = Oracle("CREATE TABLE t (s STRING)")
    o.commit([Ins("t", [("zebra",), ("apple",), ("mango",)])])
    o.view("SELECT s FROM t WHERE s > 'm'")
    o.view("SELECT min(s), max(s) FROM t")
    o.view("SELECT s FROM t ORDER BY s NULLS FIRST", ordered=True)
    o.view("SELECT s FROM t ORDER BY s DESC NULLS LAST LIMIT 2", ordered=True)
    o.view("SELECT s FROM t ORDER BY s NULLS LAST LIMIT 2", ordered=True)
    o.view("SELECT s FROM t WHERE s BETWEEN 'b' AND 'n'")
    o.commit([Ins("t", [("banana",), ("nectarine",), ("",), (None,), ("Zulu",)])])
    o.commit([Del("t", [("zebra",), ("apple",)]), Ins("t", [("aardvark",), ("zz",)])])


def test_sum_of_int_is_bigint() -> None:
    """sum of INT values past 2**31 is exact (the result is BIGINT), as is count."""
    o = Oracle("CREATE TABLE t (g INT, x INT)")
    o.view("SELECT g, sum(x), count(*) FROM t GROUP BY g")
    o.view("SELECT sum(x) FROM t")
    o.commit([Ins("t", [(1, 2**31 - 1)] * 3 + [(2, -(2**31))] * 2)])
    o.commit([Del("t", [(1, 2**31 - 1)])])


def test_decimal_avg_rounds_half_up_away_from_zero() -> None:
    """avg of decimals rounds a tie at the 7th place away from zero (Spark's HALF_UP)."""
    db = _db("CREATE TABLE t (g INT, c DECIMAL(12,2))")
    v = db.view("SELECT g, avg(c) FROM t GROUP BY g")
    # -0.01 / 32 = -0.0003125 and 0.01 / 32 = 0.0003125: ties
    db.insert(
        "t", [(1, D("-0.01"))] + [(1, D("0.00"))] * 31 + [(2, D("0.01"))] + [(2, D("0.00"))] * 31
    )
    db.commit()
    assert dict(v.rows()) == {1: D("-0.000313"), 2: D("0.000313")}
