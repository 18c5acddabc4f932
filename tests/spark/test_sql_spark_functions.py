"""Text functions and RANGE frames of intervals in ``ddflow.sql`` equal Spark SQL's answers on
the same rows: Spark itself is the oracle (its own semantics for overlapping delimiters,
negative indexes, characters beyond ASCII, calendar months at a month's end)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import ddflow.sql as dsql

_STRINGS = [
    "a,b,,c",
    "",
    ",",
    ",,",
    "www.apache.org",
    "héllo wörld",
    "日本,語",
    "ab,cd,ab",
    "aaa",
    "aaaa",
    "ababab",
    "baaab",
    None,
]

_TEXT = [
    "split_part(s, ',', 1)",
    "split_part(s, ',', 3)",
    "split_part(s, ',', -1)",
    "split_part(s, ',', -3)",
    "split_part(s, ',', 9)",
    "split_part(s, '', 1)",
    "split_part(s, '', 2)",
    "split_part(s, 'aa', 2)",
    "split_part(s, 'ab', -1)",
    "substring_index(s, '.', 2)",
    "substring_index(s, '.', -2)",
    "substring_index(s, ',', 1)",
    "substring_index(s, ',', -1)",
    "substring_index(s, ',', 0)",
    "substring_index(s, '', 1)",
    "substring_index(s, ',', 5)",
    "substring_index(s, 'aa', 2)",
    "substring_index(s, 'aa', -1)",
    "substring_index(s, 'aba', -2)",
    "translate(s, 'ab,', 'xy')",
    "translate(s, 'aba', 'xyz')",
    "translate(s, 'é', 'e')",
    "ascii(s)",
    "octet_length(s)",
    "bit_length(s)",
    "md5(s)",
    "sha1(s)",
    "sha2(s, 0)",
    "sha2(s, 224)",
    "sha2(s, 384)",
    "sha2(s, 512)",
    "sha2(s, 100)",
    "crc32(s)",
    "pi() + length(s)",
    "e()",
]


def test_text_functions_equal_spark_sql(spark: Any) -> None:
    sqls = [f"SELECT i, {e} FROM ddflow_text" for e in _TEXT]
    wants, db = _both(spark, "ddflow_text", "i int, s string", list(enumerate(_STRINGS)), sqls)
    differ = _differences(wants, db)
    assert not differ, "\n".join(differ)


_T = dt.datetime
_D = dt.date
_EVENTS = [
    (1, "a", _T(2024, 1, 31, 12, 0), _D(2024, 1, 31), 1),
    (2, "a", _T(2024, 2, 29, 12, 0), _D(2024, 2, 29), 2),
    (3, "a", _T(2024, 2, 29, 11, 0), _D(2024, 2, 28), 4),
    (4, "a", _T(2024, 3, 31, 12, 0), _D(2024, 3, 31), 8),
    (5, "a", _T(2024, 3, 31, 12, 0), _D(2024, 3, 31), 8),
    (6, "b", _T(2024, 3, 31, 11, 0, 0, 1), _D(2023, 12, 31), 16),
    (7, "b", _T(2024, 4, 30, 12, 0), _D(2024, 4, 30), 32),
    (8, "b", None, None, 64),
    (9, None, _T(2024, 3, 1, 0, 0), _D(2024, 3, 1), 128),
]

_FRAMES = [
    "sum(x) OVER (PARTITION BY g ORDER BY ts RANGE BETWEEN INTERVAL 1 HOUR PRECEDING "
    "AND CURRENT ROW)",
    "count(*) OVER (ORDER BY d DESC RANGE BETWEEN INTERVAL 7 DAYS PRECEDING AND CURRENT ROW)",
    "sum(x) OVER (ORDER BY d RANGE BETWEEN INTERVAL 1 MONTH PRECEDING AND CURRENT ROW)",
    "sum(x) OVER (PARTITION BY g ORDER BY d DESC RANGE BETWEEN INTERVAL 1 MONTH PRECEDING "
    "AND INTERVAL 1 MONTH FOLLOWING)",
    "max(x) OVER (ORDER BY ts RANGE BETWEEN INTERVAL 2 MONTHS PRECEDING "
    "AND INTERVAL 1 MONTH PRECEDING)",
    "count(x) OVER (ORDER BY d RANGE BETWEEN INTERVAL 1 YEAR PRECEDING "
    "AND INTERVAL 1 YEAR FOLLOWING)",
]


def _both(
    spark: Any, table: str, columns: str, rows: list[Any], sqls: list[str]
) -> tuple[dict[str, list[Any]], dsql.Database]:
    """Spark's sorted rows of each query over ``rows`` (``columns``: Spark's schema,
    ``name type, ...``; its session time zone UTC while it runs), and a ``ddflow.sql``
    database holding the same rows in a table of the same columns."""
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        spark.createDataFrame(rows, columns).createOrReplaceTempView(table)
        wants = {q: sorted(tuple(r) for r in spark.sql(q).collect()) for q in sqls}
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    db = dsql.Database()
    db.execute(f"CREATE TABLE {table} ({columns})")
    db.insert(table, rows)
    db.commit()
    return wants, db


def _differences(wants: dict[str, list[Any]], db: dsql.Database) -> list[str]:
    """The queries whose ``ddflow.sql`` view (made after the rows were committed) differs
    from Spark's answer."""
    differ = []
    for q, want in wants.items():
        view = db.view(q)
        db.commit()
        if sorted(view.rows()) != want:
            differ.append(f"{q}: Spark {want} ddflow {sorted(view.rows())}")
    return differ


@pytest.mark.parametrize("frame", _FRAMES)
def test_range_frames_of_intervals_equal_spark_sql(spark: Any, frame: str) -> None:
    sql = f"SELECT i, {frame} FROM ddflow_events"
    wants, db = _both(
        spark, "ddflow_events", "i int, g string, ts timestamp, d date, x int", _EVENTS, [sql]
    )
    assert not _differences(wants, db)


_EPOCH_ROWS = [
    (1, _T(2024, 5, 17, 13, 45, 12, 345678), _D(2024, 2, 29), 1715953512),
    (2, _T(1969, 12, 31, 23, 59, 59, 999999), _D(1969, 12, 31), -1),
    (3, _T(1970, 1, 1), _D(1970, 1, 1), 0),
    (4, None, None, None),
]

_EPOCH = [
    "unix_seconds(ts)",
    "unix_millis(ts)",
    "unix_micros(ts)",
    "unix_timestamp(ts)",
    "to_unix_timestamp(ts)",
    "unix_timestamp(d)",
    "unix_timestamp(ts) - unix_seconds(ts)",
    "unix_date(d)",
    "date_from_unix_date(n % 100000)",
    "timestamp_seconds(n)",
    "timestamp_millis(n)",
    "timestamp_micros(n)",
    "from_unixtime(n)",
    "from_unixtime(n, 'yyyy/MM/dd HH')",
    "date_part('year', d)",
    "date_part('doy', ts)",
    "date_part('second', ts)",
    "date_part('dow_iso', d)",
    "extract(dayofweek_iso FROM ts)",
]


def test_epoch_conversions_equal_spark_sql(spark: Any) -> None:
    """Times to numbers since the epoch and back, seconds of times before 1970 rounded
    down (``unix_seconds``) or toward zero (``unix_timestamp``) as Spark rounds them."""
    sqls = [f"SELECT k, {e} FROM ddflow_epoch" for e in _EPOCH]
    columns = "k int, ts timestamp, d date, n bigint"
    wants, db = _both(spark, "ddflow_epoch", columns, _EPOCH_ROWS, sqls)
    differ = _differences(wants, db)
    assert not differ, "\n".join(differ)
