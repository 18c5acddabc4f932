"""Many-argument ``max``/``min`` (``greatest``/``least``) and NULL, by dialect: SQLite's
``max(a, b)`` is NULL when any argument is; Spark's ``greatest(a, b)`` skips NULLs and is
NULL only when all are. Checked against sqlite3 on the same rows after every commit,
through inserts, deletes and an update that makes a value NULL."""

from __future__ import annotations

from typing import Any

import pytest
from oracle import check_sqlite_commits

import ddflow.sql as dsql

SQLITE_QUERIES = [
    "SELECT max(a, b) FROM t1",
    "SELECT min(a, b) FROM t1",
    "SELECT max(a, b, c), min(c, a, b) FROM t1",
    "SELECT max(1, NULL), min(NULL, 2)",
    "SELECT a FROM t1 WHERE max(a, b) > 2",
    "SELECT count(*) FROM t1 WHERE min(a, c) IS NULL",
    "SELECT max(a, 2.5) FROM t1",
    "SELECT sum(max(a, b)) FROM t1",
]

COMMITS: list[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]] = [
    ([(1, 2, 3), (None, 3, 1), (4, None, None), (5, 1, 0)], []),
    ([(2, 2, None)], [(None, 3, 1)]),
    ([(4, 7, 9)], [(4, None, None)]),  # an update: the NULL is gone
    ([], [(1, 2, 3), (5, 1, 0), (2, 2, None), (4, 7, 9)]),  # empty again
    ([(None, None, None)], []),
]


def _key(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=repr)


def test_sqlite_many_argument_max_min_is_null_when_any_argument_is() -> None:
    check_sqlite_commits(
        "CREATE TABLE t1(a INTEGER, b INTEGER, c INTEGER)",
        "t1",
        SQLITE_QUERIES,
        COMMITS,
        lambda got, want: _key(got) == _key(want),
    )


@pytest.mark.parametrize(
    "expr, want",
    [
        ("greatest(a, b)", [(2,), (3,), (None,)]),
        ("least(a, b)", [(1,), (3,), (None,)]),
        ("greatest(1, NULL)", [(1,), (1,), (1,)]),
    ],
)
def test_spark_greatest_least_skip_nulls(expr: str, want: list[tuple[Any, ...]]) -> None:
    db = dsql.Database(dialect="spark")
    db.execute("CREATE TABLE t1 (a INT, b INT)")
    v = db.view(f"SELECT {expr} FROM t1")
    db.insert("t1", [(1, 2), (None, 3), (None, None)])
    db.commit()
    assert _key(v.rows()) == _key(want)
