"""Window functions (``OVER (PARTITION BY ... ORDER BY ... [frame])``) against DuckDB after
every commit of a change stream with NULLs in every column, duplicate rows, updates that
move rows between partitions, an emptied table and a refill.

Orders are written with explicit NULLS FIRST / LAST (DuckDB's default differs from Spark's)
and, for the functions that depend on the order of tied rows (``row_number``, ``lag``,
``ROWS`` frames), continue over every column, so the answer is determined up to identical
rows.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal as _M

import pytest
from oracle import Del, Ins, check_stream, churn

import ddflow.sql as dsql
from ddflow.sql import DataError, SQLError, UnsupportedSQL

_DDL = ["CREATE TABLE w (g STRING, a INT, c DECIMAL(10,2), d DOUBLE, e DATE)"]

_D = dt.date
_FIRST = [
    ("x", 1, _M("1.50"), 0.5, _D(2024, 1, 1)),
    ("x", 2, _M("2.00"), None, _D(2024, 1, 3)),
    ("x", 2, _M("2.00"), None, _D(2024, 1, 3)),  # a duplicate row
    ("y", 3, None, 2.5, None),
    (None, 4, _M("7.25"), -1.0, _D(2023, 5, 1)),
    ("y", None, _M("3.00"), 4.0, _D(2024, 2, 1)),
    ("x", 5, _M("-2.50"), 8.0, _D(2024, 1, 2)),
    (None, None, None, None, None),
]
_SECOND = [
    ("y", 1, _M("9.99"), 1.5, _D(2022, 1, 1)),  # replaces the first row: moves it to y
    ("z", 7, _M("0.01"), 3.0, _D(2024, 3, 1)),
    ("x", 2, _M("4.00"), 2.0, _D(2024, 1, 5)),
    ("z", 7, _M("0.01"), 3.0, _D(2024, 3, 1)),
]
_COMMITS = churn("w", _FIRST, _SECOND)

_ALL = "a NULLS FIRST, c NULLS FIRST, d NULLS FIRST, e NULLS FIRST"
#: every column: rows tied in it are identical
_EVERY = f"g NULLS LAST, {_ALL}"

_VIEWS = [
    # ranks
    f"SELECT g, a, row_number() OVER (PARTITION BY g ORDER BY {_ALL}) FROM w",
    "SELECT g, a, rank() OVER (PARTITION BY g ORDER BY a NULLS FIRST) FROM w",
    "SELECT g, a, dense_rank() OVER (PARTITION BY g ORDER BY a DESC NULLS LAST) FROM w",
    "SELECT a, c, rank() OVER (ORDER BY a NULLS LAST, c DESC NULLS FIRST) FROM w",
    "SELECT g, a, percent_rank() OVER (PARTITION BY g ORDER BY a NULLS FIRST) FROM w",
    "SELECT g, a, cume_dist() OVER (PARTITION BY g ORDER BY a NULLS LAST) FROM w",
    "SELECT g, a, ntile(3) OVER (PARTITION BY g ORDER BY " + _ALL + ") FROM w",
    "SELECT a, ntile(2) OVER (ORDER BY " + _EVERY + ") FROM w",
    # strings and dates as the order
    "SELECT g, e, rank() OVER (ORDER BY g DESC NULLS FIRST, e NULLS LAST) FROM w",
    # neighbours
    f"SELECT g, a, lag(a) OVER (PARTITION BY g ORDER BY {_ALL}) FROM w",
    f"SELECT g, c, lead(c, 2) OVER (PARTITION BY g ORDER BY {_ALL}) FROM w",
    f"SELECT g, a, lag(a, 1, -1) OVER (PARTITION BY g ORDER BY {_ALL}) FROM w",
    f"SELECT g, lead(g, 1, 'none') OVER (ORDER BY g NULLS FIRST, {_ALL}) FROM w",
    # running and framed aggregates
    "SELECT g, a, sum(c) OVER (PARTITION BY g ORDER BY a NULLS FIRST) FROM w",
    "SELECT g, a, count(*) OVER (PARTITION BY g ORDER BY a NULLS LAST), "
    "count(c) OVER (PARTITION BY g ORDER BY a NULLS LAST) FROM w",
    "SELECT g, a, min(c) OVER (PARTITION BY g ORDER BY a NULLS FIRST), "
    "max(e) OVER (PARTITION BY g ORDER BY a NULLS FIRST) FROM w",
    f"SELECT g, a, sum(a) OVER (PARTITION BY g ORDER BY {_ALL} "
    "ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM w",
    f"SELECT a, max(c) OVER (ORDER BY {_EVERY} ROWS BETWEEN 2 PRECEDING AND CURRENT ROW), "
    f"min(g) OVER (ORDER BY {_EVERY} ROWS BETWEEN CURRENT ROW AND 3 FOLLOWING) FROM w",
    f"SELECT a, sum(d) OVER (ORDER BY {_EVERY} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    " FROM w",
    f"SELECT a, count(*) OVER (ORDER BY {_EVERY} ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING), "
    f"sum(c) OVER (ORDER BY {_EVERY} ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) FROM w",
    "SELECT g, a, sum(c) OVER (PARTITION BY g ORDER BY a NULLS FIRST "
    "RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) FROM w",
    "SELECT g, sum(a) OVER (PARTITION BY g ORDER BY a NULLS FIRST "
    "RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM w",
    # spreads over frames, from exact sums of values and squares
    "SELECT g, a, stddev_samp(c) OVER (PARTITION BY g ORDER BY a NULLS FIRST), "
    f"var_pop(d) OVER (ORDER BY {_EVERY} ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM w",
    # first / last / nth over frames
    f"SELECT g, a, first_value(c) OVER (PARTITION BY g ORDER BY {_ALL}), "
    f"last_value(c) OVER (PARTITION BY g ORDER BY {_ALL}) FROM w",
    f"SELECT g, nth_value(a, 2) OVER (PARTITION BY g ORDER BY {_ALL} "
    "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM w",
    # windows over groups, in expressions, filtered afterwards, several specs at once
    "SELECT g, sum(a), rank() OVER (ORDER BY sum(a) DESC NULLS LAST) FROM w GROUP BY g",
    "SELECT g, count(*) AS n, sum(count(*)) OVER (ORDER BY g NULLS FIRST) FROM w GROUP BY g",
    "SELECT * FROM (SELECT g, a, row_number() OVER (PARTITION BY g ORDER BY "
    + _ALL
    + ") AS rn FROM w) q WHERE rn <= 2",
    "SELECT g, a, a - lag(a) OVER (PARTITION BY g ORDER BY " + _ALL + ") AS step, "
    "rank() OVER (ORDER BY a NULLS FIRST) + dense_rank() OVER (PARTITION BY g ORDER BY a "
    "NULLS FIRST) FROM w WHERE e IS NOT NULL OR a > 3",
]


@pytest.mark.parametrize("sql", _VIEWS)
def test_window_functions_equal_duckdb(sql: str) -> None:
    check_stream(_DDL, [(sql, None, False)], _COMMITS)


# QUALIFY: rows kept by conditions on window functions, before DISTINCT, ORDER BY and LIMIT
_QUALIFY = [
    f"SELECT g, a, c FROM w QUALIFY row_number() OVER (PARTITION BY g ORDER BY {_ALL}) = 1",
    "SELECT * FROM w QUALIFY rank() OVER (PARTITION BY g ORDER BY a DESC NULLS LAST) <= 1",
    f"SELECT g, a, row_number() OVER (PARTITION BY g ORDER BY {_ALL}) AS rn FROM w "
    "QUALIFY rn <= 2 AND a > 1",
    "SELECT g, e FROM w WHERE a > 0 QUALIFY count(*) OVER (PARTITION BY g) > 1 "
    "AND max(c) OVER (PARTITION BY g) = c",
    f"SELECT DISTINCT g FROM w QUALIFY row_number() OVER (PARTITION BY g ORDER BY {_ALL}) <= 2",
    "SELECT g, sum(a) AS s FROM w GROUP BY g QUALIFY rank() OVER (ORDER BY sum(a) DESC "
    "NULLS LAST) <= 2",
]


@pytest.mark.parametrize("sql", _QUALIFY)
def test_qualify_equals_duckdb(sql: str) -> None:
    check_stream(_DDL, [(sql, None, False)], _COMMITS)


def test_qualify_then_order_and_limit() -> None:
    """ORDER BY and LIMIT apply to the rows QUALIFY keeps (not the other way round)."""
    db = dsql.Database()
    db.execute(_DDL[0])
    v = db.view(
        f"SELECT g, a AS n FROM w QUALIFY row_number() OVER (PARTITION BY g ORDER BY {_ALL}) "
        "= 1 ORDER BY w.g DESC NULLS LAST, n LIMIT 2"
    )
    db.insert("w", _FIRST)
    db.commit()
    assert v.rows() == [("y", None), ("x", 1)]  # (NULLS FIRST in each group's order)
    db.delete("w", [r for r in _FIRST if r[0] == "y"])
    db.commit()
    assert v.rows() == [("x", 1), (None, None)]
    with pytest.raises(UnsupportedSQL, match="not selected"):
        db.view("SELECT g FROM w QUALIFY rank() OVER (ORDER BY a) = 1 ORDER BY a")


# RANGE frames with offsets from the one ORDER BY value (ascending and descending, over
# INT, DOUBLE, DECIMAL and DATE values, NULLs forming their own peers)
_RANGES = [
    "SELECT g, a, sum(a) OVER (PARTITION BY g ORDER BY a NULLS FIRST "
    "RANGE BETWEEN 2 PRECEDING AND 1 FOLLOWING) FROM w",
    "SELECT g, a, count(*) OVER (PARTITION BY g ORDER BY a DESC NULLS LAST "
    "RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM w",
    "SELECT d, sum(d) OVER (ORDER BY d NULLS LAST RANGE BETWEEN 1.5 PRECEDING AND 0.5 FOLLOWING)"
    " FROM w",
    "SELECT c, max(c) OVER (ORDER BY c DESC NULLS FIRST "
    "RANGE BETWEEN CURRENT ROW AND 2.25 FOLLOWING) FROM w",
    "SELECT e, count(e) OVER (ORDER BY e NULLS FIRST RANGE BETWEEN 3 PRECEDING AND 3 FOLLOWING)"
    " FROM w",
    "SELECT a, min(g) OVER (ORDER BY a NULLS LAST "
    "RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) FROM w",
    "SELECT a, sum(a) OVER (ORDER BY a NULLS LAST "
    "RANGE BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) FROM w",
]


@pytest.mark.parametrize("sql", _RANGES)
def test_range_frames_with_offsets_equal_duckdb(sql: str) -> None:
    check_stream(_DDL, [(sql, None, False)], _COMMITS)


# RANGE frames with INTERVAL offsets over a TIMESTAMP or DATE order: rolling windows of
# time (rows an hour apart, a minute apart, at the same instant, a day and a week apart)
_EV_DDL = ["CREATE TABLE ev (g STRING, ts TIMESTAMP, d DATE, x INT)"]
_T = dt.datetime
_EV_FIRST = [
    ("a", _T(2024, 1, 1, 10, 0), _D(2024, 1, 1), 1),
    ("a", _T(2024, 1, 1, 10, 30), _D(2024, 1, 1), 2),
    ("a", _T(2024, 1, 1, 11, 0), _D(2024, 1, 2), 4),
    ("a", _T(2024, 1, 1, 11, 0), _D(2024, 1, 2), 4),  # a duplicate row
    ("a", _T(2024, 1, 1, 11, 0, 59, 999999), _D(2024, 1, 8), None),
    ("b", _T(2024, 1, 1, 9, 59), _D(2024, 1, 9), 8),
    ("b", _T(2024, 1, 1, 10, 59, 0, 1), _D(2024, 1, 16), 512),  # an hour and 1 us later
    ("b", None, None, 16),
    (None, _T(2024, 1, 2, 10, 0), _D(2024, 1, 15), 32),
]
_EV_SECOND = [
    ("a", _T(2024, 1, 1, 10, 0), _D(2023, 12, 31), 64),  # replaces the first row
    ("b", _T(2024, 1, 1, 11, 1), _D(2024, 1, 3), 128),
    ("a", _T(2024, 1, 1, 12, 0), _D(2024, 1, 22), 256),
]
_EV_COMMITS = churn("ev", _EV_FIRST, _EV_SECOND)
_INTERVALS = [
    "SELECT g, ts, sum(x) OVER (PARTITION BY g ORDER BY ts NULLS FIRST "
    "RANGE BETWEEN INTERVAL 1 HOUR PRECEDING AND CURRENT ROW) FROM ev",
    "SELECT ts, count(*) OVER (ORDER BY ts DESC NULLS LAST "
    "RANGE BETWEEN INTERVAL 30 MINUTES PRECEDING AND INTERVAL '1' HOUR FOLLOWING) FROM ev",
    "SELECT ts, max(x) OVER (ORDER BY ts NULLS LAST "
    "RANGE BETWEEN INTERVAL 59 SECONDS PRECEDING AND INTERVAL 1 MINUTE FOLLOWING) FROM ev",
    "SELECT d, sum(x) OVER (ORDER BY d NULLS FIRST "
    "RANGE BETWEEN INTERVAL 7 DAYS PRECEDING AND CURRENT ROW) FROM ev",
    "SELECT g, d, count(x) OVER (PARTITION BY g ORDER BY d DESC NULLS FIRST "
    "RANGE BETWEEN INTERVAL 1 WEEK PRECEDING AND INTERVAL '1' DAY FOLLOWING) FROM ev",
    "SELECT ts, sum(x) OVER (ORDER BY ts NULLS FIRST "
    "RANGE BETWEEN INTERVAL 1 DAY PRECEDING AND INTERVAL 1 DAY FOLLOWING) FROM ev",
]


@pytest.mark.parametrize("sql", _INTERVALS)
def test_range_frames_with_interval_offsets_equal_duckdb(sql: str) -> None:
    check_stream(_EV_DDL, [(sql, None, False)], _EV_COMMITS)


# calendar months: each row's frame edge is its own date moved by whole months, a day past
# the new month's end its last day (January 31st a month on is February 29th in 2024)
_MO_FIRST = [
    ("a", _T(2024, 1, 31, 12, 0), _D(2024, 1, 31), 1),
    ("a", _T(2024, 2, 29, 12, 0), _D(2024, 2, 29), 2),
    ("a", _T(2024, 2, 29, 11, 59), _D(2024, 2, 28), 4),
    ("a", _T(2024, 3, 31, 12, 0), _D(2024, 3, 31), 8),
    ("a", _T(2024, 3, 31, 12, 0), _D(2024, 3, 31), 8),  # a duplicate row
    ("b", _T(2023, 12, 31, 0, 0), _D(2023, 12, 31), 16),
    ("b", _T(2024, 4, 30, 12, 0, 0, 1), _D(2024, 4, 30), 32),
    ("b", None, None, 64),
    (None, _T(2025, 2, 28, 12, 0), _D(2025, 2, 28), 128),
]
_MO_SECOND = [
    ("a", _T(2024, 3, 1, 0, 0), _D(2024, 3, 1), 256),  # replaces the first row
    ("b", _T(2024, 1, 29, 12, 0), _D(2024, 1, 29), 512),
    ("a", _T(2024, 5, 31, 12, 0), _D(2024, 5, 31), 1024),
]
_MO_COMMITS = churn("ev", _MO_FIRST, _MO_SECOND)
_MONTHS = [
    "SELECT d, sum(x) OVER (ORDER BY d NULLS FIRST "
    "RANGE BETWEEN INTERVAL 1 MONTH PRECEDING AND CURRENT ROW) FROM ev",
    "SELECT g, d, count(*) OVER (PARTITION BY g ORDER BY d DESC NULLS LAST "
    "RANGE BETWEEN INTERVAL 1 MONTH PRECEDING AND INTERVAL 1 MONTH FOLLOWING) FROM ev",
    "SELECT ts, sum(x) OVER (ORDER BY ts NULLS LAST "
    "RANGE BETWEEN INTERVAL 2 MONTHS PRECEDING AND INTERVAL 1 MONTH PRECEDING) FROM ev",
    "SELECT ts, max(x) OVER (ORDER BY ts DESC NULLS FIRST "
    "RANGE BETWEEN CURRENT ROW AND INTERVAL 1 MONTH FOLLOWING) FROM ev",
    "SELECT d, count(x) OVER (ORDER BY d NULLS FIRST "
    "RANGE BETWEEN INTERVAL 1 YEAR PRECEDING AND INTERVAL 1 QUARTER FOLLOWING) FROM ev",
    "SELECT d, sum(x) OVER (ORDER BY d NULLS LAST "
    "RANGE BETWEEN UNBOUNDED PRECEDING AND INTERVAL 1 MONTH PRECEDING) FROM ev",
]


@pytest.mark.parametrize("sql", _MONTHS)
def test_range_frames_of_calendar_months_equal_duckdb(sql: str) -> None:
    check_stream(_EV_DDL, [(sql, None, False)], _MO_COMMITS)


@pytest.mark.parametrize(
    ("sql", "error", "words"),
    [
        (
            "SELECT sum(x) OVER (ORDER BY d RANGE BETWEEN INTERVAL 1 MONTH PRECEDING "
            "AND INTERVAL 3 DAYS FOLLOWING) FROM ev",
            UnsupportedSQL,
            "month offset and a fixed one",
        ),
        (
            "SELECT sum(x) OVER (ORDER BY d RANGE BETWEEN INTERVAL 1 MONTH FOLLOWING "
            "AND CURRENT ROW) FROM ev",
            SQLError,
            "start after it ends",
        ),
        (
            "SELECT sum(x) OVER (ORDER BY x RANGE BETWEEN INTERVAL 1 YEAR PRECEDING "
            "AND CURRENT ROW) FROM ev",
            SQLError,
            "DATE or TIMESTAMP",
        ),
        (
            "SELECT sum(x) OVER (ORDER BY d RANGE BETWEEN INTERVAL 2 HOURS PRECEDING "
            "AND CURRENT ROW) FROM ev",
            UnsupportedSQL,
            "over a DATE",
        ),
        (
            "SELECT sum(x) OVER (ORDER BY x RANGE BETWEEN INTERVAL 2 DAYS PRECEDING "
            "AND CURRENT ROW) FROM ev",
            SQLError,
            "DATE or TIMESTAMP",
        ),
        (
            "SELECT sum(x) OVER (ORDER BY ts ROWS BETWEEN INTERVAL 2 DAYS PRECEDING "
            "AND CURRENT ROW) FROM ev",
            SQLError,
            "ROWS frame offset",
        ),
        (
            "SELECT sum(x) OVER (ORDER BY ts RANGE BETWEEN INTERVAL '1 12:00:00' DAY TO SECOND "
            "PRECEDING AND CURRENT ROW) FROM ev",
            UnsupportedSQL,
            "RANGE offset",
        ),
    ],
)
def test_interval_frame_errors_name_the_problem(
    sql: str, error: type[Exception], words: str
) -> None:
    db = dsql.Database()
    db.execute(_EV_DDL[0])
    with pytest.raises(error, match=words):
        db.view(sql)


# IGNORE NULLS: Spark writes it after the call, DuckDB inside it
_OVER = f"OVER (PARTITION BY a ORDER BY g NULLS FIRST, {_ALL})"
_IGNORING = [
    (
        f"SELECT a, g, lag(g, 1) IGNORE NULLS {_OVER}, lead(g, 2) IGNORE NULLS {_OVER} FROM w",
        f"SELECT a, g, lag(g, 1 IGNORE NULLS) {_OVER}, lead(g, 2 IGNORE NULLS) {_OVER} FROM w",
    ),
    (
        f"SELECT g, lag(c, 2, -1) IGNORE NULLS OVER (ORDER BY g NULLS FIRST, {_ALL}) FROM w",
        f"SELECT g, lag(c, 2, -1 IGNORE NULLS) OVER (ORDER BY g NULLS FIRST, {_ALL}) FROM w",
    ),
    (
        f"SELECT g, first_value(c) IGNORE NULLS OVER (ORDER BY {_ALL}), "
        f"last_value(g) IGNORE NULLS OVER (ORDER BY {_EVERY} ROWS BETWEEN 1 PRECEDING "
        "AND 1 FOLLOWING) FROM w",
        f"SELECT g, first_value(c IGNORE NULLS) OVER (ORDER BY {_ALL}), "
        f"last_value(g IGNORE NULLS) OVER (ORDER BY {_EVERY} ROWS BETWEEN 1 PRECEDING "
        "AND 1 FOLLOWING) FROM w",
    ),
    (
        f"SELECT a, nth_value(d, 2) IGNORE NULLS OVER (ORDER BY {_ALL} "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM w",
        f"SELECT a, nth_value(d, 2 IGNORE NULLS) OVER (ORDER BY {_ALL} "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM w",
    ),
]


_IGNORING.append(
    (
        f"SELECT g, first_value(c, true) OVER (ORDER BY {_EVERY}), "
        f"last_value(d, false) OVER (ORDER BY {_EVERY}) FROM w",
        f"SELECT g, first_value(c IGNORE NULLS) OVER (ORDER BY {_EVERY}), "
        f"last_value(d) OVER (ORDER BY {_EVERY}) FROM w",
    )
)


# Spark's first(x) / last(x) over a window are the frame's first / last value (as
# aggregates they are some value of the group); first(x, true) ignores NULLs
_IGNORING.append(
    (
        f"SELECT g, first(c) OVER (PARTITION BY g ORDER BY {_ALL}), "
        f"last(c) OVER (PARTITION BY g ORDER BY {_ALL} ROWS BETWEEN UNBOUNDED PRECEDING "
        f"AND UNBOUNDED FOLLOWING), first(d, true) OVER (ORDER BY {_EVERY}), "
        f"last(d) IGNORE NULLS OVER (ORDER BY {_EVERY}) FROM w",
        f"SELECT g, first_value(c) OVER (PARTITION BY g ORDER BY {_ALL}), "
        f"last_value(c) OVER (PARTITION BY g ORDER BY {_ALL} ROWS BETWEEN UNBOUNDED PRECEDING "
        f"AND UNBOUNDED FOLLOWING), first_value(d IGNORE NULLS) OVER (ORDER BY {_EVERY}), "
        f"last_value(d IGNORE NULLS) OVER (ORDER BY {_EVERY}) FROM w",
    )
)


@pytest.mark.parametrize(("sql", "duck"), _IGNORING)
def test_ignore_nulls_equal_duckdb(sql: str, duck: str) -> None:
    check_stream(_DDL, [(sql, duck, False)], _COMMITS)


def test_named_windows_and_filters() -> None:
    spec = f"PARTITION BY g ORDER BY {_ALL}"
    sql = (
        "SELECT g, a, sum(a) OVER w, rank() OVER (w), count(c) FILTER (WHERE a > 1) OVER w "
        f"FROM w WINDOW w AS ({spec})"
    )
    duck = (
        f"SELECT g, a, sum(a) OVER ({spec}), rank() OVER ({spec}), "
        f"count(c) FILTER (WHERE a > 1) OVER ({spec}) FROM w"
    )
    grouped = (
        "SELECT g, count(*) FILTER (WHERE a > 1), sum(c) FILTER (WHERE d > 0) FROM w GROUP BY g"
    )
    check_stream(_DDL, [(sql, duck, False), (grouped, None, False)], _COMMITS)


def test_window_average_of_decimals_has_six_places() -> None:
    # Spark's avg of a DECIMAL(10, 2) is a DECIMAL(14, 6); DuckDB's is a DOUBLE
    over = "OVER (PARTITION BY g ORDER BY a NULLS FIRST)"
    sql = f"SELECT g, a, avg(c) {over} FROM w"
    duck = f"SELECT g, a, CAST(avg(c) {over} AS DECIMAL(14, 6)) FROM w"
    check_stream(_DDL, [(sql, duck, False)], _COMMITS)


def test_top_rows_per_group_follow_updates() -> None:
    # the rows ranked first per group, ORDER BY + LIMIT over the ranked rows
    sql = (
        "SELECT g, a FROM (SELECT g, a, rank() OVER (PARTITION BY g ORDER BY a DESC NULLS "
        "LAST) AS r FROM w) q WHERE r = 1 ORDER BY g NULLS FIRST, a LIMIT 2"
    )
    check_stream(_DDL, [(sql, None, True)], _COMMITS)


def test_window_rows_change_only_in_changed_partitions() -> None:
    db = dsql.Database()
    db.execute(_DDL[0])
    v = db.view("SELECT g, a, row_number() OVER (PARTITION BY g ORDER BY a) FROM w")
    db.insert("w", [("x", 1, None, None, None), ("x", 2, None, None, None)])
    db.insert("w", [("y", 5, None, None, None)])
    db.commit()
    v.changes()
    db.insert("w", [("x", 0, None, None, None)])
    db.commit()
    changed = {(r[0], r[1], r[2], r[-1]) for r in v.changes()}
    # x's rows are renumbered; y's row is untouched
    assert changed == {
        ("x", 0, 1, 1),
        ("x", 1, 1, -1),
        ("x", 1, 2, 1),
        ("x", 2, 2, -1),
        ("x", 2, 3, 1),
    }


@pytest.mark.parametrize(
    ("sql", "error", "words"),
    [
        ("SELECT ntile(0) OVER (ORDER BY a) FROM w", SQLError, "ntile"),
        ("SELECT lag(a, -1) OVER (ORDER BY a) FROM w", SQLError, "lag"),
        ("SELECT lag(a, a) OVER (ORDER BY a) FROM w", UnsupportedSQL, "non-constant"),
        (
            "SELECT sum(a) OVER (ORDER BY a, c RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM w",
            SQLError,
            "exactly one ORDER BY",
        ),
        (
            "SELECT sum(a) OVER (ORDER BY g RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM w",
            SQLError,
            "number or a date",
        ),
        (
            "SELECT sum(a) OVER (ORDER BY a ROWS BETWEEN 1 FOLLOWING AND 1 PRECEDING) FROM w",
            SQLError,
            "start after it ends",
        ),
        ("SELECT sum(a) IGNORE NULLS OVER (ORDER BY a) FROM w", UnsupportedSQL, "IGNORE"),
        ("SELECT sum(a) OVER v FROM w WINDOW w AS (ORDER BY a)", SQLError, "unknown window"),
        ("SELECT count(DISTINCT a) OVER (ORDER BY a) FROM w", UnsupportedSQL, "DISTINCT"),
        ("SELECT stddev(g) OVER (ORDER BY a) FROM w", SQLError, "number"),
        ("SELECT a FROM w WHERE rank() OVER (ORDER BY a) = 1", UnsupportedSQL, "window"),
        (
            "SELECT sum(a) OVER (ORDER BY a ROWS BETWEEN UNBOUNDED FOLLOWING AND CURRENT ROW) "
            "FROM w",
            SQLError,
            "UNBOUNDED FOLLOWING",
        ),
    ],
)
def test_window_errors_name_the_problem(sql: str, error: type[Exception], words: str) -> None:
    db = dsql.Database()
    db.execute(_DDL[0])
    with pytest.raises(error, match=words):
        db.view(sql)


def test_window_sums_beyond_int64_are_exact() -> None:
    db = dsql.Database()
    db.execute("CREATE TABLE b (k INT, v BIGINT)")
    v = db.view("SELECT k, sum(v) OVER (ORDER BY k ROWS 1 PRECEDING) FROM b")
    big = 2**62
    # every frame's sum fits a BIGINT though the prefix sums need not
    db.insert("b", [(1, big), (2, -big), (3, big), (4, 5), (5, big - 6)])
    db.commit()
    assert sorted(v.rows()) == [(1, big), (2, 0), (3, 0), (4, big + 5), (5, big - 1)]
    # a frame's sum beyond BIGINT is an error, as for a grouped sum
    db.insert("b", [(6, big + 10)])
    with pytest.raises(DataError, match="BIGINT"):
        db.commit()


def test_window_delete_missing_row_leaves_views_usable() -> None:
    db = dsql.Database()
    db.execute(_DDL[0])
    v = db.view("SELECT a, rank() OVER (ORDER BY a) FROM w")
    db.insert("w", [("x", 1, None, None, None)])
    db.commit()
    with pytest.raises(DataError):
        db.delete("w", [("x", 2, None, None, None)])
    db.insert("w", [("x", 0, None, None, None)])
    db.commit()
    assert sorted(v.rows()) == [(0, 1), (1, 2)]


def test_window_in_a_stream_with_one_commit_per_change() -> None:
    # the same answers whether changes come one commit at a time or all at once
    sql = f"SELECT g, a, sum(c) OVER (PARTITION BY g ORDER BY {_ALL} ROWS 1 PRECEDING) FROM w"
    singles = [[Ins("w", [r])] for r in _FIRST] + [[Del("w", [r])] for r in _FIRST[:3]]
    check_stream(_DDL, [(sql, None, False)], singles)


def test_window_benchmark_answer_equals_duckdb() -> None:
    # the benchmark's own check, on a small table: many partitions touched per commit
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from sql_windows import main

    out = main(["--rows", "3000", "--partitions", "7", "--commits", "6", "--changes", "40"])
    assert out["equal_to_duckdb"] is True
    assert out["rows"] == 3000


def _random_commits(seed: int, steps: int) -> list[list[object]]:
    import random

    rng = random.Random(seed)
    live: list[tuple[object, ...]] = []
    commits: list[list[object]] = []
    for _ in range(steps):
        new = [
            (
                rng.choice(["x", "y", None]),
                rng.choice([None, 0, 1, 2, 3, 5, 8]),
                rng.choice([None, _M("1.50"), _M("2.00"), _M("-3.75")]),
                rng.choice([None, 0.5, 1.0, 2.25, -1.0]),
                rng.choice([None, _D(2024, 1, 1), _D(2024, 1, 3), _D(2024, 1, 7)]),
            )
            for _ in range(rng.randint(1, 6))
        ]
        gone = rng.sample(live, min(len(live), rng.randint(0, 4)))
        for r in gone:
            live.remove(r)
        live.extend(new)
        step: list[object] = [Ins("w", new)]
        if gone:
            step.append(Del("w", gone))
        commits.append(step)
    return commits


def test_windows_under_random_changes_equal_duckdb() -> None:
    # random inserts and deletes (duplicates and NULLs included), every view checked
    # against DuckDB after each commit
    views = [
        "SELECT g, a, sum(a) OVER (PARTITION BY g ORDER BY a NULLS FIRST "
        "RANGE BETWEEN 2 PRECEDING AND 1 FOLLOWING) FROM w",
        "SELECT d, sum(d) OVER (ORDER BY d DESC NULLS LAST "
        "RANGE BETWEEN 1.5 PRECEDING AND 0.5 FOLLOWING) FROM w",
        "SELECT e, count(e) OVER (ORDER BY e NULLS FIRST RANGE BETWEEN 3 PRECEDING AND 3 FOLLOWING)"
        " FROM w",
        f"SELECT g, a, rank() OVER (PARTITION BY g ORDER BY a NULLS LAST), "
        f"row_number() OVER (PARTITION BY g ORDER BY {_ALL}), "
        f"ntile(3) OVER (ORDER BY g NULLS FIRST, {_ALL}) FROM w",
        f"SELECT a, c, max(c) OVER (ORDER BY {_EVERY} ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING), "
        f"min(g) OVER (PARTITION BY a ORDER BY {_EVERY} ROWS BETWEEN UNBOUNDED PRECEDING "
        "AND 1 PRECEDING) FROM w",
        f"SELECT g, lag(c, 2) OVER (PARTITION BY g ORDER BY {_ALL}), "
        f"first_value(e) OVER (ORDER BY {_EVERY} ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING) FROM w",
    ]
    check_stream(_DDL, [(v, None, False) for v in views], _random_commits(7, 25))


def test_range_offsets_at_the_ends_of_bigint() -> None:
    # value + offset leaves BIGINT: the frame is still the values within the offset
    top = 2**63 - 1
    db = dsql.Database()
    db.execute("CREATE TABLE b (v BIGINT)")
    asc = db.view(
        "SELECT v, count(*) OVER (ORDER BY v RANGE BETWEEN 3 PRECEDING AND 3 FOLLOWING) FROM b"
    )
    desc = db.view(
        "SELECT v, sum(1) OVER (ORDER BY v DESC RANGE BETWEEN 2 PRECEDING AND CURRENT ROW) FROM b"
    )
    db.insert("b", [(top,), (top - 1,), (top - 5,), (0,), (-top - 1,), (-top,)])
    db.commit()
    assert sorted(asc.rows()) == [
        (-top - 1, 2),
        (-top, 2),
        (0, 1),
        (top - 5, 1),
        (top - 1, 2),
        (top, 2),
    ]
    assert sorted(desc.rows()) == [
        (-top - 1, 2),
        (-top, 1),
        (0, 1),
        (top - 5, 1),
        (top - 1, 2),
        (top, 1),
    ]
