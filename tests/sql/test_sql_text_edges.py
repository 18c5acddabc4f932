"""Text read as numbers and dates, timestamps written as text, and SQLite's string rules.

The Spark answers written out here were read off Spark 4.3 (ANSI mode, its default) on the
same rows; ``CAST`` of text that is not a value gives NULL here as in Spark's older mode
(docs/sql.md says why), ``try_cast`` reads text by ANSI mode's rules. The SQLite answers are
checked against Python's ``sqlite3`` in the test itself.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from decimal import Decimal as D
from typing import Any

import pytest

import ddflow.sql as dsql


def _rows(ddl: str, sql: str, rows: list[tuple[Any, ...]], dialect: str = "spark") -> Any:
    db = dsql.Database(dialect=dialect)
    db.execute(ddl)
    v = db.view(sql)
    db.insert("t", rows)
    db.commit()
    db.delete("t", rows[:1])
    db.insert("t", rows[:1])
    db.commit()
    return v.rows()


_NUMBERS = [
    "1.5",
    "1e3",
    "1_000",
    "１２",
    "٣",
    "12",
    " 7 ",
    "-2.7",
    "1.5d",
    "inf",
    "abc",
    "2147483648",
]


def test_text_as_numbers() -> None:
    got = {
        r[0]: r[1:]
        for r in _rows(
            "CREATE TABLE t (s STRING)",
            "SELECT s, try_cast(s AS INT), try_cast(s AS DOUBLE), CAST(s AS DOUBLE), "
            "try_cast(s AS DECIMAL(6,2)) FROM t",
            [(x,) for x in _NUMBERS],
        )
    }
    assert got["1.5"] == (None, 1.5, 1.5, D("1.50"))
    assert got["1e3"] == (None, 1000.0, 1000.0, D("1000.00"))
    for odd in ("1_000", "１２", "٣", "abc"):  # only ASCII digits are digits
        assert got[odd] == (None, None, None, None), odd
    assert got["12"] == (12, 12.0, 12.0, D("12.00")) and got[" 7 "] == (7, 7.0, 7.0, D("7.00"))
    assert got["1.5d"] == (None, 1.5, 1.5, None) and got["inf"][1] == float("inf")
    assert got["2147483648"] == (None, 2147483648.0, 2147483648.0, None)  # past INT: NULL


def test_cast_of_text_to_int_truncates_a_fraction_and_raises_past_the_type() -> None:
    got = dict(
        _rows(
            "CREATE TABLE t (s STRING)",
            "SELECT s, CAST(s AS INT) FROM t",
            [(x,) for x in ["1.5", "-2.7", "1e3", "1_000", "12"]],
        )
    )
    assert got == {"1.5": 1, "-2.7": -2, "1e3": None, "1_000": None, "12": 12}
    db = dsql.Database()
    db.execute("CREATE TABLE t (s STRING)")
    db.view("SELECT CAST(s AS INT) FROM t")
    db.insert("t", [("2147483648",)])
    with pytest.raises(dsql.DataError, match="overflow"):
        db.commit()


_DATES = {
    "2020-01-01x": None,
    "20200101": None,
    "2020-1-5": dt.date(2020, 1, 5),
    "2020": dt.date(2020, 1, 1),
    "2020-05": dt.date(2020, 5, 1),
    "+2020-01-01": dt.date(2020, 1, 1),
    "2020-01-01 12:30": dt.date(2020, 1, 1),
    "2020-02-30": None,
}


def test_text_as_dates_and_timestamps() -> None:
    got = {
        r[0]: r[1:]
        for r in _rows(
            "CREATE TABLE t (s STRING)",
            "SELECT s, try_cast(s AS DATE), CAST(s AS TIMESTAMP) FROM t",
            [(x,) for x in [*_DATES, "2020-01-01T12:30:15.25Z", "2020-01-01 01:00:00+05:30"]],
        )
    }
    for text, day in _DATES.items():
        assert got[text][0] == day, text
    assert got["2020-1-5"][1] == dt.datetime(2020, 1, 5)
    assert got["20200101"][1] is None and got["2020-01-01 12:30"][1] == dt.datetime(
        2020, 1, 1, 12, 30
    )
    assert got["2020-01-01T12:30:15.25Z"][1] == dt.datetime(2020, 1, 1, 12, 30, 15, 250000)
    assert got["2020-01-01 01:00:00+05:30"][1] == dt.datetime(2019, 12, 31, 19, 30)


def test_a_date_compared_with_short_text() -> None:
    rows = _rows(
        "CREATE TABLE t (d DATE)",
        "SELECT d FROM t WHERE d = '2020-1-5'",
        [(dt.date(2020, 1, 5),), (dt.date(2020, 1, 6),)],
    )
    assert rows == [(dt.date(2020, 1, 5),)]


def test_timestamps_as_text_and_their_seconds() -> None:
    rows = _rows(
        "CREATE TABLE t (ts TIMESTAMP)",
        "SELECT CAST(ts AS STRING), concat('', ts), EXTRACT(SECOND FROM ts), second(ts) FROM t",
        [
            (dt.datetime(2000, 2, 29, 23, 0, 0, 500000),),
            (dt.datetime(1950, 6, 15, 6, 30, 0, 250),),
            (dt.datetime(2020, 1, 1, 0, 0, 59, 500000),),
            (dt.datetime(2020, 1, 1, 1, 2, 3),),
        ],
    )
    assert sorted(rows) == [
        ("1950-06-15 06:30:00.00025", "1950-06-15 06:30:00.00025", D("0.000250"), 0),
        ("2000-02-29 23:00:00.5", "2000-02-29 23:00:00.5", D("0.500000"), 0),
        ("2020-01-01 00:00:59.5", "2020-01-01 00:00:59.5", D("59.500000"), 59),
        ("2020-01-01 01:02:03", "2020-01-01 01:02:03", D("3.000000"), 3),
    ]


def test_subtracting_timestamps_is_refused_not_rounded_to_days() -> None:
    db = dsql.Database()
    db.execute("CREATE TABLE t (ts TIMESTAMP, d DATE)")
    for sql in ("SELECT ts - d FROM t", "SELECT ts - ts FROM t", "SELECT d - ts FROM t"):
        with pytest.raises(dsql.UnsupportedSQL, match="interval"):
            db.view(sql)
    v = db.view("SELECT d - DATE '2020-01-01', datediff(ts, d) FROM t")
    db.insert("t", [(dt.datetime(2020, 1, 3, 12), dt.date(2020, 1, 2))])
    db.commit()
    assert v.rows() == [(1, 1)]


_TEXTS = [("ab",), ("É",), (" 5x",), ("a",), ("10",), ("é",), ("éa",), ("Ab",), ("hello",)]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT s FROM t WHERE s > 5",
        "SELECT s, s < 5, 5 < s, s = 10 FROM t",
        "SELECT s, substr(s, 2, -1), substr(s, 0), substr(s, -2, 1), substr(s, 3, -5) FROM t",
        "SELECT s, lower(s), upper(s) FROM t",
        "SELECT s FROM t WHERE s LIKE 'é%'",
        "SELECT s FROM t WHERE s LIKE 'a%'",
        "SELECT s, CAST(s AS REAL), CAST(s AS INTEGER) FROM t",
    ],
)
def test_sqlite_string_rules_equal_sqlite(sql: str) -> None:
    got = _rows("CREATE TABLE t (s TEXT)", sql, list(_TEXTS), "sqlite")
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (s TEXT)")
    con.executemany("INSERT INTO t VALUES (?)", _TEXTS)
    assert sorted(got, key=repr) == sorted(con.execute(sql).fetchall(), key=repr)


# LIKE '%a%' and '%a%b%' on a table's text are decided as rows arrive, by searching the
# column's bytes; checked against DuckDB after every commit on random texts with repeats,
# overlaps, non-ASCII letters, empty strings and NULLs
_LIKE_PATTERNS = [
    "%ab%",
    "%ba%ab%",
    "%é%",
    "%aé%b%",
    "%bb%",
    "%a%a%",
    "%abc%ab%",
    # the rarest byte with its left / right neighbour, alone (q), at either end
    "%cab%",
    "%bca%",
    "%q%",
    "%aq%cb%",
    "%cqa%",
]


@pytest.mark.parametrize("pattern", _LIKE_PATTERNS)
def test_like_inner_texts_equal_duckdb(pattern: str) -> None:
    import random

    from oracle import Del, Ins, check_stream

    rng = random.Random(len(pattern) * 31 + ord(pattern[1]))
    alphabet = ["a", "b", "c", "é", "ab", " ", "q", "ca"]

    def text() -> str | None:
        if rng.random() < 0.1:
            return None
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 10)))

    rows = [(i, text()) for i in range(300)]
    ddl = ["CREATE TABLE s (k INT, x STRING)"]
    sqls = [
        f"SELECT k, x FROM s WHERE x LIKE '{pattern}'",
        f"SELECT count(*) FROM s WHERE x NOT LIKE '{pattern}' AND k > 10",
    ]
    commits = [[Ins("s", rows[:200])], [Ins("s", rows[200:]), Del("s", rows[:50])]]
    check_stream(ddl, sqls, commits)
