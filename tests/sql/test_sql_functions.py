"""Scalar functions Spark users write, against Spark's own answers.

The rows expected here were read off Spark 4 (session time zone UTC) on the same rows; the
same expressions are also compared with a live Spark in
``tests/spark/test_sql_spark_types.py``. Each view is fed its rows with a duplicate that
is then deleted, so the answer is the one after a retraction too.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest

import ddflow.sql as dsql

_UTC = dt.UTC
_DEC = decimal.Decimal

_ROWS = [
    (
        1,
        "hello world",
        7,
        -3,
        dt.date(2024, 2, 29),
        dt.datetime(2024, 5, 17, 13, 45, 12, 345678, tzinfo=_UTC),
        8.0,
    ),
    (
        2,
        "aBC dEF  gh",
        -7,
        3,
        dt.date(1969, 12, 31),
        dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=_UTC),
        -27.0,
    ),
    (3, None, None, None, None, None, None),
]
_DDL = "CREATE TABLE t (k INT, s STRING, a INT, b INT, d DATE, ts TIMESTAMP, x DOUBLE)"


def _rows(sql: str) -> list[tuple[Any, ...]]:
    db = dsql.Database()
    db.execute(_DDL)
    v = db.view(sql)
    db.insert("t", _ROWS + _ROWS[:1])
    db.commit()
    db.delete("t", _ROWS[:1])
    db.commit()
    return sorted(v.rows(), key=lambda r: r[0])


def _ts(*args: int) -> dt.datetime:
    return dt.datetime(*args)  # (a TIMESTAMP comes back as a naive UTC datetime)


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        ("left(s, 2)", ["he", "aB", None]),
        ("right(s, 3)", ["rld", " gh", None]),
        ("repeat(s, b)", ["", "aBC dEF  gh" * 3, None]),
        ("initcap(s)", ["Hello World", "Abc Def  Gh", None]),
        (
            "concat_ws('-', s, CAST(a AS STRING), NULL, 'z')",
            ["hello world-7-z", "aBC dEF  gh--7-z", "z"],
        ),
        ("last_day(d)", [dt.date(2024, 2, 29), dt.date(1969, 12, 31), None]),
        ("weekofyear(d)", [9, 1, None]),
        ("trunc(d, 'MM')", [dt.date(2024, 2, 1), dt.date(1969, 12, 1), None]),
        ("trunc(d, 'WEEK')", [dt.date(2024, 2, 26), dt.date(1969, 12, 29), None]),
        ("trunc(d, 'YEAR')", [dt.date(2024, 1, 1), dt.date(1969, 1, 1), None]),
        ("trunc(d, 'DD')", [None, None, None]),
        ("date_trunc('QUARTER', ts)", [_ts(2024, 4, 1), _ts(1969, 10, 1), None]),
        ("date_trunc('HOUR', ts)", [_ts(2024, 5, 17, 13), _ts(1969, 12, 31, 23), None]),
        (
            "date_trunc('MILLISECOND', ts)",
            [_ts(2024, 5, 17, 13, 45, 12, 345000), _ts(1969, 12, 31, 23, 59, 59, 999000), None],
        ),
        ("nvl2(s, a, b)", [7, -7, None]),
        ("pmod(a, b)", [1, 2, None]),
        ("cbrt(x)", [2.0, -3.0, None]),
        ("log(2, 8.0D)", [3.0, 3.0, 3.0]),
        ("log10(100.0D)", [2.0, 2.0, 2.0]),
        # dates as text by Java's pattern letters
        (
            "date_format(ts, 'yyyy-MM-dd HH:mm:ss.SSS')",
            ["2024-05-17 13:45:12.345", "1969-12-31 23:59:59.999", None],
        ),
        (
            "date_format(d, 'MMM d, yyyy EEEE')",
            ["Feb 29, 2024 Thursday", "Dec 31, 1969 Wednesday", None],
        ),
        ("date_format(ts, 'yy/M/d h:mm a')", ["24/5/17 1:45 PM", "69/12/31 11:59 PM", None]),
        ("date_format(d, 'QQQ ''''yy')", ["Q1 '24", "Q4 '69", None]),
        ("date_format(ts, 'D DDD y')", ["138 138 2024", "365 365 1969", None]),
        # regular expressions as Java reads them (Spark's RLIKE and regexp_*)
        ("s RLIKE 'o w'", [True, False, None]),
        ("regexp_like(s, '^[a-z]+ ')", [True, False, None]),
        ("regexp_replace(s, '([a-z])([A-Z])', '$2$1')", ["hello world", "BaC EdF  gh", None]),
        ("regexp_replace(s, ' +', '_')", ["hello_world", "aBC_dEF_gh", None]),
        ("regexp_extract(s, '([a-z]+) ([a-z]+)', 2)", ["world", "", None]),
        ("regexp_extract(s, '(x)?([A-Z]+)', 1)", ["", "", None]),
        ("regexp_extract(s, '[A-Z]+', 0)", ["", "BC", None]),
        # text functions (also compared with a live Spark in test_sql_spark_functions.py)
        ("split_part(s, ' ', 2)", ["world", "dEF", None]),
        ("split_part(s, ' ', -1)", ["world", "gh", None]),
        ("split_part(s, ' ', -3)", ["", "dEF", None]),
        ("split_part(s, ' ', 7)", ["", "", None]),
        ("substring_index(s, ' ', 2)", ["hello world", "aBC dEF", None]),
        ("substring_index(s, 'l', -2)", ["o world", "aBC dEF  gh", None]),
        ("substring_index(s, 'l', 2)", ["hel", "aBC dEF  gh", None]),
        ("translate(s, 'lo ', 'L')", ["heLLwrLd", "aBCdEFgh", None]),
        ("ascii(s)", [104, 97, None]),
        ("octet_length(s)", [11, 11, None]),
        ("bit_length(s)", [88, 88, None]),
        ("md5(s)", ["5eb63bbbe01eeed093cb22bb8f5acdc3", "d3158847b3ce35533b84bfeda303cbca", None]),
        ("crc32(s)", [222957957, 2022625545, None]),
        # numbers since the epoch (also compared with a live Spark)
        ("unix_seconds(ts)", [1715953512, -1, None]),
        ("unix_timestamp(ts)", [1715953512, 0, None]),
        ("unix_millis(ts)", [1715953512345, -1, None]),
        ("unix_date(d)", [19782, -1, None]),
        ("date_from_unix_date(a)", [dt.date(1970, 1, 8), dt.date(1969, 12, 25), None]),
        ("timestamp_seconds(a)", [_ts(1970, 1, 1, 0, 0, 7), _ts(1969, 12, 31, 23, 59, 53), None]),
        ("from_unixtime(a)", ["1970-01-01 00:00:07", "1969-12-31 23:59:53", None]),
        ("from_unixtime(b, 'HH:mm:ss')", ["23:59:57", "00:00:03", None]),
        ("date_part('dayofweek_iso', d)", [4, 3, None]),
        ("date_part('YEAR', ts)", [2024, 1969, None]),
        # dates, numbers, bits and text (also compared with a live Spark, rows added and
        # deleted, in test_sql_spark_functions.py)
        ("make_date(2000 + a, b + 4, 29)", [dt.date(2007, 1, 29), dt.date(1993, 7, 29), None]),
        (
            "make_timestamp(2024, 2, 29, a + 10, b + 50, 59.9999995)",
            [dt.datetime(2024, 2, 29, 17, 48), dt.datetime(2024, 2, 29, 3, 54), None],
        ),
        ("months_between(d, DATE'2024-01-31')", [1.0, -649.0, None]),
        ("months_between(ts, d, false)", [2.631388888888889, 0.0, None]),
        ("next_day(d, 'fri')", [dt.date(2024, 3, 1), dt.date(1970, 1, 2), None]),
        ("dayname(d)", ["Thu", "Wed", None]),
        ("monthname(ts)", ["May", "Dec", None]),
        ("bround(x / 10, 0)", [1.0, -3.0, None]),
        ("bround(a * 2.5, 0)", [_DEC("18"), _DEC("-18"), None]),
        ("bround(b * 5, -1)", [-20, 20, None]),
        ("nanvl(sqrt(b), a)", [7.0, 1.7320508075688772, None]),
        ("degrees(x)", [458.3662361046586, -1546.9860468532227, None]),
        ("radians(a)", [0.12217304763960307, -0.12217304763960307, None]),
        ("hypot(a, b)", [7.615773105863909, 7.615773105863909, None]),
        ("sinh(b)", [-10.017874927409903, 10.017874927409903, None]),
        ("cosh(b)", [10.067661995777765, 10.067661995777765, None]),
        ("tanh(a / 10)", [0.6043677771171636, -0.6043677771171636, None]),
        ("rint(x / 2)", [4.0, -14.0, None]),
        ("positive(b)", [-3, 3, None]),
        ("negative(a)", [-7, 7, None]),
        ("factorial(a)", [5040, None, None]),
        ("width_bucket(x, -30, 10, 4)", [4, 1, None]),
        ("a & b", [5, 1, None]),
        ("a | b", [-1, -5, None]),
        ("a ^ b", [-6, -6, None]),
        ("~a", [-8, 6, None]),
        ("shiftleft(a, 30)", [-1073741824, 1073741824, None]),
        ("shiftright(a, 1)", [3, -4, None]),
        ("shiftrightunsigned(a, 28)", [0, 15, None]),
        ("bit_count(a)", [3, 62, None]),
        ("equal_null(a, -b * 7 / 3)", [True, True, True]),
        ("nullifzero(a + 7)", [14, None, None]),
        ("zeroifnull(b)", [-3, 3, 0]),
        ("decode(a, 7, 'seven', NULL, 'none', 'other')", ["seven", "other", "none"]),
        ("try_add(a, 2147483641)", [None, 2147483634, None]),
        ("try_subtract(b, 2147483647)", [None, -2147483644, None]),
        ("try_multiply(a * 1000000, 1000)", [None, None, None]),
        ("chr(a + 70)", ["M", "?", None]),
        ("hex(b)", ["FFFFFFFFFFFFFFFD", "3", None]),
        ("hex(s)", ["68656C6C6F20776F726C64", "6142432064454620206768", None]),
        ("btrim(s, 'hg')", ["ello world", "aBC dEF  ", None]),
        ("space(b)", ["", "   ", None]),
        ("find_in_set('dEF', replace(s, ' ', ','))", [0, 2, None]),
        ("bround(x / 16, 0)", [0.0, -2.0, None]),
        ("elt(pmod(a, 3), s, 'x')", ["hello world", "x", None]),
        ("bround(x / 16 + 2, 0)", [2.0, 0.0, None]),
        # times moved and measured in calendar units (also compared with a live Spark)
        ("timestampadd(MONTH, a, d)", [_ts(2024, 9, 29), _ts(1969, 5, 31), None]),
        (
            "timestampadd(HOUR, b, ts)",
            [_ts(2024, 5, 17, 10, 45, 12, 345678), _ts(1970, 1, 1, 2, 59, 59, 999999), None],
        ),
        (
            "dateadd(QUARTER, 1, ts)",
            [_ts(2024, 8, 17, 13, 45, 12, 345678), _ts(1970, 3, 31, 23, 59, 59, 999999), None],
        ),
        ("date_add(WEEK, b, d)", [_ts(2024, 2, 8), _ts(1970, 1, 21), None]),
        ("timestampdiff(MONTH, d, ts)", [2, 0, None]),
        ("datediff(HOUR, d, ts)", [1885, 23, None]),
        ("date_diff(YEAR, ts, DATE'2026-05-17')", [1, 56, None]),
        ("timestampdiff(MICROSECOND, ts, d)", [-6788712345678, -86399999999, None]),
        ("datediff(DAY, d, ts)", [78, 0, None]),
        # regular expressions counted and located (also compared with a live Spark)
        ("regexp_count(s, 'l|[A-Z]')", [3, 4, None]),
        ("regexp_count(s, '')", [12, 12, None]),
        ("regexp_substr(s, '[A-Z]+')", [None, "BC", None]),
        ("regexp_substr(s, 'o w')", ["o w", None, None]),
        ("regexp_instr(s, ' +')", [6, 4, None]),
        ("regexp_instr(s, '[A-Z](?=F)', 1)", [0, 6, None]),
        # more text and number functions (also compared with a live Spark)
        ("levenshtein(s, 'hello')", [6, 11, None]),
        ("levenshtein(s, 'hello', b)", [-1, -1, None]),
        ("soundex(s)", ["H464", "A123", None]),
        ("overlay(s PLACING '*' FROM a FOR 2)", ["hello *rld", "*F  gh", None]),
        ("base64(s)", ["aGVsbG8gd29ybGQ=", "YUJDIGRFRiAgZ2g=", None]),
        ("conv(s, 36, 10)", ["29234652", "13368", None]),
        ("conv(a, 10, -2)", ["111", "-111", None]),
        ("bin(b)", ["1" * 62 + "01", "11", None]),
        ("typeof(x + a)", ["double", "double", "double"]),
        ("typeof(d)", ["date", "date", "date"]),
        (
            "typeof(-1L) || typeof(-2147483648) || typeof(-CAST(a AS BIGINT))",
            ["bigintintbigint"] * 3,
        ),
        ("-1L * 2147483647 * a", [-15032385529, 15032385529, None]),
        ("luhn_check(CAST(a AS STRING))", [False, False, None]),
        # Java's Formatter and DecimalFormat (also compared with a live Spark)
        (
            "format_string('%s has %d, %x, %05.1f', s, a, b, x)",
            [
                "hello world has 7, fffffffd, 008.0",
                "aBC dEF  gh has -7, 3, -27.0",
                "null has null, null,     n",
            ],
        ),
        (
            "printf('%-8s|%8.3e|%o', s, x, a)",
            [
                "hello world|8.000e+00|7",
                "aBC dEF  gh|-2.700e+01|37777777771",
                "null    |     nul|null",
            ],
        ),
        ("format_string('%.2f%%', a / 3.0D)", ["2.33%", "-2.33%", "nu%"]),
        ("format_number(x * 1234.5, 1)", ["9,876.0", "-33,331.5", None]),
        ("format_number(a * 1000000, b + 3)", ["7,000,000", "-7,000,000.000000", None]),
        ("format_number(CAST(a AS DECIMAL(10,3)) / 8, 2)", ["0.88", "-0.88", None]),
        # text read for its time of day: a timestamp's, or a time alone
        ("hour('2024-03-01 10:11:12')", [10, 10, 10]),
        ("minute(concat('2024-03-01 10:', CAST(a + 10 AS STRING), ':12'))", [17, 3, None]),
        ("second('2024-03-01 10:11:12.5')", [12, 12, 12]),
        ("hour(concat(CAST(b + 10 AS STRING), ':11'))", [7, 13, None]),
        ("hour('2024-03-01')", [0, 0, 0]),
        ("extract(MINUTE FROM concat('2024-03-01 10:', CAST(b + 30 AS STRING)))", [27, 33, None]),
        # floor / ceil to places: a DECIMAL (an integer as one of its digits, a DOUBLE as
        # a DECIMAL(30, 15))
        ("ceil(a * 1.25, 1)", [_DEC("8.8"), _DEC("-8.7"), None]),
        ("floor(x / 7, 2)", [_DEC("1.14"), _DEC("-3.86"), None]),
        ("ceil(a, -1)", [_DEC("10"), _DEC("0"), None]),
        ("floor(a, -1)", [_DEC("0"), _DEC("-10"), None]),
        ("typeof(ceil(x, 2))", ["decimal(18,2)"] * 3),
        ("typeof(floor(a, 3))", ["decimal(11,0)"] * 3),
        ("weekday(d)", [3, 2, None]),
        ("weekday('2024-03-03 10:00:00')", [6, 6, 6]),
        # the first place at or after a position (none before 1 or at NULL)
        ("locate('l', s, a)", [10, 0, 0]),
        ("locate(substr(s, 3, 1), s, 2)", [3, 3, None]),
        ("locate('', s, b + 4)", [1, 1, 0]),
        # text moved by days or a time: a TIMESTAMP written back as text
        ("'2024-02-28' + INTERVAL 1 DAY", ["2024-02-29 00:00:00"] * 3),
        ("'2024-03-01 10:00:00' - INTERVAL 2 HOURS", ["2024-03-01 08:00:00"] * 3),
        ("d < '2024-02-28' + INTERVAL 2 DAY", [True, True, None]),
    ],
)
def test_function_equals_spark(expr: str, want: list[Any]) -> None:
    got = _rows(f"SELECT k, {expr} FROM t")
    assert [r[1] for r in got] == want


def test_every_some_any_are_bool_and_bool_or() -> None:
    got = _rows("SELECT 1, every(a > 0), some(a > 0), any(a < 0), every(a > -10) FROM t")
    assert got == [(1, False, True, True, True)]


@pytest.mark.parametrize(
    ("sql", "error", "words"),
    [
        ("SELECT regexp_extract(s, '(a)(b)', 3) FROM t", dsql.SQLError, "group 3"),
        ("SELECT s RLIKE '(' FROM t", dsql.SQLError, "invalid regular expression"),
        ("SELECT regexp_replace(s, '(a)', '$2') FROM t", dsql.SQLError, "no group 2"),
        ("SELECT s RLIKE '\\\\p{Alpha}' FROM t", dsql.UnsupportedSQL, "Unicode class"),
        ("SELECT s RLIKE s FROM t", dsql.UnsupportedSQL, "not a constant"),
        ("SELECT date_format(d, 'yyyy ww') FROM t", dsql.UnsupportedSQL, "'ww'"),
        ("SELECT date_format(d, 'yyyy ''x') FROM t", dsql.SQLError, "not closed"),
        ("SELECT split_part(s, ',', 0) FROM t", dsql.SQLError, "index 0"),
        ("SELECT split_part(s, s, 1) FROM t", dsql.UnsupportedSQL, "not a constant"),
        ("SELECT substring_index(s, ',', 'x') FROM t", dsql.SQLError, "integer count"),
        ("SELECT sha2(s) FROM t", dsql.SQLError, "2 argument"),
        ("SELECT unix_timestamp() FROM t", dsql.UnsupportedSQL, "clock"),
        ("SELECT unix_timestamp(s) FROM t", dsql.UnsupportedSQL, "CAST it AS TIMESTAMP"),
        ("SELECT timestamp_seconds(x) FROM t", dsql.UnsupportedSQL, "whole numbers"),
        ("SELECT unix_date(ts) FROM t", dsql.SQLError, "needs a DATE"),
        ("SELECT timestampadd(FORTNIGHT, 1, ts) FROM t", dsql.SQLError, "not a unit"),
        ("SELECT timestampdiff(DAYOFYEAR, d, ts) FROM t", dsql.SQLError, "not a unit"),
        ("SELECT datediff(WEEKS, d, ts) FROM t", dsql.SQLError, "not a unit"),
        ("SELECT regexp_count(s, '[a') FROM t", dsql.SQLError, "invalid regular expression"),
        ("SELECT regexp_substr(s, '\\\\p{L}') FROM t", dsql.UnsupportedSQL, "Unicode class"),
        ("SELECT regexp_instr(s, s) FROM t", dsql.UnsupportedSQL, "not a constant"),
        ("SELECT regexp_instr(s, 'a', 'x') FROM t", dsql.SQLError, "group number"),
        ("SELECT base64(a) FROM t", dsql.UnsupportedSQL, "no BINARY type"),
        ("SELECT conv(s, 10) FROM t", dsql.SQLError, "3 argument"),
        ("SELECT levenshtein(s) FROM t", dsql.SQLError, "levenshtein"),
        ("SELECT bin(d) FROM t", dsql.SQLError, "needs a number"),
        ("SELECT format_string('%q', a) FROM t", dsql.UnsupportedSQL, "only %s"),
        ("SELECT format_string('%+d', a) FROM t", dsql.UnsupportedSQL, "only %s"),
        ("SELECT printf('%2$s', a, b) FROM t", dsql.UnsupportedSQL, "only %s"),
        ("SELECT format_string('%-d', a) FROM t", dsql.SQLError, "needs a width"),
        ("SELECT format_string('%-05d', a) FROM t", dsql.SQLError, "both with zeros"),
        ("SELECT format_string('%05s', s) FROM t", dsql.SQLError, "text with zeros"),
        ("SELECT format_string('%.2d', a) FROM t", dsql.SQLError, "has a precision"),
        ("SELECT format_string('%d %', a) FROM t", dsql.SQLError, "without a conversion"),
        ("SELECT format_string('%d %d', a) FROM t", dsql.SQLError, "needs 2 values"),
        ("SELECT format_string(s, a) FROM t", dsql.UnsupportedSQL, "not a constant"),
        ("SELECT format_number(x, '#,##0.0') FROM t", dsql.UnsupportedSQL, "pattern"),
        ("SELECT format_number(s, 2) FROM t", dsql.SQLError, "needs a number"),
        ("SELECT format_number(x, 2L) FROM t", dsql.SQLError, "INT count"),
        ("SELECT * FROM t PIVOT (sum(a) FOR s IN ('x', 'y'))", dsql.UnsupportedSQL, "^PIVOT$"),
        ("SELECT * FROM t UNPIVOT (v FOR c IN (a, b))", dsql.UnsupportedSQL, "^UNPIVOT$"),
        ("SELECT '2024-01-31' + INTERVAL 1 MONTH FROM t", dsql.SQLError, "STRING \\+ INTERVAL"),
        ("SELECT s - INTERVAL '2' YEAR FROM t", dsql.SQLError, "STRING - INTERVAL"),
    ],
)
def test_patterns_refused_by_name(sql: str, error: type[Exception], words: str) -> None:
    """A regular expression or date pattern ddflow cannot read is refused when the view is
    made, naming what is wrong."""
    db = dsql.Database()
    db.execute(_DDL)
    with pytest.raises(error, match=words):
        db.view(sql)


def test_two_quotes_in_a_string_literal_are_one_quote() -> None:
    """Spark reads 'O''Brien' as O'Brien (literals side by side are joined: 'x' 'y' is
    'xy'); a view filtering on such a literal finds the row."""
    db = dsql.Database()
    assert db.execute("SELECT 'O''Brien', 'it''s', 'x' 'y', '''', 'a\\'b', ''") == [
        ("O'Brien", "it's", "xy", "'", "a'b", "")
    ]
    db.execute("CREATE TABLE p (name STRING)")
    v = db.view("SELECT count(*) FROM p WHERE name = 'O''Brien'")
    db.insert("p", [("O'Brien",), ("OBrien",)])
    db.commit()
    assert v.rows() == [(1,)]


def test_a_date_beyond_year_9999_is_a_data_error_and_changes_nothing() -> None:
    """``date_from_unix_date`` of a number of days past the year 9999 fails the commit (or
    the view's creation over such rows) with ``DataError``; the database stays usable."""
    db = dsql.Database()
    db.execute("CREATE TABLE n (v BIGINT)")
    v = db.view("SELECT date_from_unix_date(v) FROM n")
    db.insert("n", [(1,), (10**12,)])
    with pytest.raises(dsql.DataError, match="out of range"):
        db.commit()
    db.insert("n", [(2,)])
    db.commit()
    assert v.rows() == [(dt.date(1970, 1, 3),)]
    # a view over rows already there fails when it is made, naming the function
    with pytest.raises(dsql.DataError, match="date_from_unix_date"):
        db.view("SELECT date_from_unix_date(v * 10000000) FROM n")
    db.insert("n", [(3,)])
    db.commit()
    assert sorted(v.rows()) == [(dt.date(1970, 1, 3),), (dt.date(1970, 1, 4),)]


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("make_date(2023, 2, a + 22)", "February 29 is not a day of 2023"),
        ("make_date(2024, a + 6, 1)", "month 13"),
        ("make_timestamp(2024, 1, 1, 0, 0, a + 53.5)", "seconds are 0 to 60"),
        ("next_day(d, s)", "'hello world' is not a day of the week"),
        ("elt(a, s, 'x')", "index 7 is out of bounds"),
        ("negative(a * -306783378 - 2)", "overflow"),
        ("bround(a * 306783378, -1)", "overflow"),
        ("timestampadd(YEAR, a * 1200, ts)", "overflows"),
        ("timestampadd(DAY, a * 306783378, ts)", "overflows"),
        ("conv(replace(repeat(s, 2), ' ', ''), 36, 10)", "overflows 64 bits"),
        ("nullif(format_string('%d', x), 'null')", "cannot format a DOUBLE"),
    ],
)
def test_values_spark_refuses_fail_the_commit(expr: str, words: str) -> None:
    """Where Spark's ANSI mode fails at run time (a date that does not exist, a day of
    the week misspelled, an index past the values, an overflow), the commit fails with
    ``DataError``; the rows of a later commit still reach the view."""
    db = dsql.Database()
    db.execute(_DDL)
    v = db.view(f"SELECT k, {expr} FROM t")
    db.insert("t", _ROWS[:1])
    with pytest.raises(dsql.DataError, match=words):
        db.commit()
    db.insert("t", _ROWS[2:])
    db.commit()
    assert v.rows() == [(3, None)]
