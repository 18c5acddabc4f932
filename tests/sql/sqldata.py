"""Shared tables for the SQL tests: a table with a column of every type, and an
employees/departments pair for joins and subqueries, each with NULLs in every column,
duplicate rows, and change streams (updates, deletes, emptying and refilling)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal as D
from typing import Any

from oracle import Change, Del, Ins, churn

__all__ = [
    "EMP_DDL",
    "EMP_STREAM",
    "GRAPH_DDL",
    "GRAPH_STREAM",
    "WIDE_A",
    "WIDE_B",
    "WIDE_DDL",
    "WIDE_STREAM",
]

# -- every type ---------------------------------------------------------------------------

WIDE_DDL = (
    "CREATE TABLE w (id INT, bo BOOLEAN, ti TINYINT, si SMALLINT, i INT, bi BIGINT, "
    "de DECIMAL(10,2), db DOUBLE, s STRING, vc VARCHAR(10), ch CHAR(3), d DATE, "
    "ts TIMESTAMP)"
)

_NULLS = (None,) * 12

WIDE_A: list[tuple[Any, ...]] = [
    (
        1,
        True,
        1,
        100,
        1000,
        10**12,
        D("12.50"),
        1.5,
        "apple",
        "Red",
        "abc",
        dt.date(2024, 1, 15),
        dt.datetime(2024, 1, 15, 10, 30),
    ),
    (
        2,
        False,
        -5,
        -200,
        -7,
        -3,
        D("-0.75"),
        -2.25,
        "Banana",
        "green",
        "xyz",
        dt.date(2023, 12, 31),
        dt.datetime(2023, 12, 31, 23, 59, 59),
    ),
    (3, *_NULLS),
    (
        4,
        True,
        7,
        7,
        7,
        7,
        D("7.00"),
        7.0,
        "apple",
        "Red",
        "abc",
        dt.date(2024, 2, 29),
        dt.datetime(2024, 2, 29, 0, 0),
    ),
    (
        5,
        False,
        1,
        100,
        1000,
        10**12,
        D("12.50"),
        1.5,
        "",
        "x y",
        "a b",
        dt.date(2000, 1, 1),
        dt.datetime(2000, 1, 1, 0, 0, 0, 1),
    ),
    (None, *_NULLS),
    (
        2,
        False,
        -5,
        -200,
        -7,
        -3,
        D("-0.75"),
        -2.25,
        "Banana",
        "green",
        "xyz",
        dt.date(2023, 12, 31),
        dt.datetime(2023, 12, 31, 23, 59, 59),
    ),
    (
        6,
        None,
        0,
        0,
        0,
        0,
        D("0.00"),
        0.0,
        "  pad  ",
        None,
        "héé",
        dt.date(1969, 12, 31),
        dt.datetime(1969, 12, 31, 23, 0),
    ),
    (
        7,
        True,
        None,
        -1,
        12,
        None,
        D("99999999.99"),
        None,
        "héllo wörld",
        "Red",
        None,
        None,
        dt.datetime(2024, 3, 31, 12, 0),
    ),
]

WIDE_B: list[tuple[Any, ...]] = [
    (
        1,
        False,
        2,
        100,
        999,
        10**12 + 1,
        D("12.49"),
        1.25,
        "apple",
        "red",
        "abd",
        dt.date(2024, 1, 16),
        dt.datetime(2024, 1, 15, 10, 31),
    ),
    (
        8,
        True,
        -128,
        -32000,
        -1000,
        -(10**15),
        D("-99999999.99"),
        -0.5,
        "cherry",
        "",
        "   ",
        dt.date(2024, 3, 31),
        dt.datetime(2024, 3, 31, 0, 0),
    ),
    (9, *_NULLS),
    (
        10,
        None,
        3,
        3,
        3,
        3,
        D("0.01"),
        1e-3,
        "Apple",
        "RED",
        "ABC",
        dt.date(2024, 1, 15),
        dt.datetime(2024, 1, 15, 10, 30),
    ),
    (None, True, 3, None, 3, None, D("0.01"), None, "apple", None, "abc", None, None),
]

WIDE_STREAM: list[list[Change]] = churn("w", WIDE_A, WIDE_B)

# -- employees and departments ------------------------------------------------------------

EMP_DDL = [
    "CREATE TABLE emp (id INT, name STRING, dept INT, salary DECIMAL(10,2), mgr INT)",
    "CREATE TABLE dept (dept INT, dname STRING, region STRING)",
]

_E = [
    (1, "ann", 10, D("100.00"), None),
    (2, "bob", 10, D("80.50"), 1),
    (3, "cid", 20, D("120.00"), 1),
    (4, "dee", None, D("60.00"), 2),
    (5, "eve", 30, None, 3),
    (6, "fay", 40, D("95.25"), 99),  # department 40 does not exist
    (6, "fay", 40, D("95.25"), 99),  # a duplicate row
    (7, None, 20, D("120.00"), None),
    (None, "gus", 10, D("70.00"), 1),
]
_D = [
    (10, "sales", "EU"),
    (20, "eng", "US"),
    (30, "ops", None),
    (50, "empty", "EU"),  # no employees
    (None, "nulldept", "US"),
    (20, "eng2", "EU"),  # a second row for key 20
]

EMP_STREAM: list[list[Change]] = [
    [Ins("emp", _E), Ins("dept", _D)],
    # dimension updates that flip join matches: 30 moves to 40, 10 changes region
    [
        Del("dept", [(30, "ops", None), (10, "sales", "EU")]),
        Ins("dept", [(40, "ops", "APAC"), (10, "sales", "US")]),
    ],
    # fact updates: bob changes department, eve gets a salary, a NULL-key employee arrives
    [
        Del("emp", [(2, "bob", 10, D("80.50"), 1), (5, "eve", 30, None, 3)]),
        Ins(
            "emp",
            [
                (2, "bob", 50, D("80.50"), 1),
                (5, "eve", 30, D("55.00"), 3),
                (8, "hal", None, None, None),
            ],
        ),
    ],
    # the NULL-key department goes away (NOT IN answers change), one duplicate goes
    [Del("dept", [(None, "nulldept", "US")]), Del("emp", [(6, "fay", 40, D("95.25"), 99)])],
    # every department goes away
    [
        Del(
            "dept",
            [
                (10, "sales", "US"),
                (20, "eng", "US"),
                (50, "empty", "EU"),
                (20, "eng2", "EU"),
                (40, "ops", "APAC"),
            ],
        )
    ],
    # every employee goes away too: both tables empty
    [
        Del(
            "emp",
            [
                (1, "ann", 10, D("100.00"), None),
                (2, "bob", 50, D("80.50"), 1),
                (3, "cid", 20, D("120.00"), 1),
                (4, "dee", None, D("60.00"), 2),
                (5, "eve", 30, D("55.00"), 3),
                (6, "fay", 40, D("95.25"), 99),
                (7, None, 20, D("120.00"), None),
                (None, "gus", 10, D("70.00"), 1),
                (8, "hal", None, None, None),
            ],
        )
    ],
    # refill both
    [Ins("emp", _E), Ins("dept", _D)],
    # a department row's key changes under its employees, and changes back in two steps
    [Del("dept", [(10, "sales", "EU")]), Ins("dept", [(11, "sales", "EU")])],
    [
        Del("dept", [(11, "sales", "EU")]),
        Ins("dept", [(10, "sales", "EU")]),
        Ins("emp", [(9, "ivy", 50, D("0.01"), 9)]),
    ],
]

# -- a graph for recursion ----------------------------------------------------------------

GRAPH_DDL = ["CREATE TABLE edges (src INT, dst INT)", "CREATE TABLE roots (n INT)"]

_CHAIN = [(1, 2), (2, 3), (3, 4), (4, 5)]
GRAPH_STREAM: list[list[Change]] = [
    [Ins("edges", _CHAIN), Ins("roots", [(1,)])],
    # a cycle and a duplicate edge
    [Ins("edges", [(5, 3), (2, 3), (6, 7)])],
    # cut the chain in the middle: everything past 2 becomes unreachable from 1
    [Del("edges", [(2, 3)])],
    [Del("edges", [(2, 3)])],
    # a shortcut appears, and a NULL edge that must not join
    [Ins("edges", [(1, 4), (None, 1), (4, None)]), Ins("roots", [(6,), (None,)])],
    # remove the cycle's back edge, then everything
    [Del("edges", [(5, 3)])],
    [Del("edges", [(1, 2), (3, 4), (4, 5), (6, 7), (1, 4), (None, 1), (4, None)])],
    # refill with a longer cycle
    [Ins("edges", [(i, i % 8 + 1) for i in range(1, 9)])],
    # break it in one place (an update: the edge is redirected)
    [Del("edges", [(4, 5)]), Ins("edges", [(4, 1)])],
]
