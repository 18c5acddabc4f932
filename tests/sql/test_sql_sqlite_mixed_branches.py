"""SQLite's values keep their own type: ``COALESCE(i, r)``, ``IFNULL(i, r)`` and a CASE
with an INTEGER and a REAL branch give an INTEGER where the INTEGER branch is chosen, so
``/`` and ``%`` on it work on integers. The sqlite dialect types such a result REAL but
keeps its INTEGER branches visible, and arithmetic over it is done branch by branch.
Checked against sqlite3 on the same rows after every commit (numerically: a REAL result
column holds ``0.0`` where SQLite holds the integer ``0``)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from oracle import check_sqlite_commits

import ddflow.sql as dsql

QUERIES = [
    "SELECT COALESCE(a, b) / 2 FROM t1",
    "SELECT IFNULL(a, b) / 2 FROM t1",
    "SELECT CASE WHEN a IS NULL THEN b ELSE a END / 2 FROM t1",
    "SELECT CASE a WHEN 3 THEN b WHEN 5 THEN 7 ELSE a END / 2 FROM t1",
    "SELECT COALESCE(a, b) FROM t1",
    "SELECT COALESCE(a, b) % 3, 7 / COALESCE(a, b) FROM t1",
    "SELECT -COALESCE(a, b) / 2, (COALESCE(a, b) * 3) / 2, COALESCE(a, b) / 2 / 2 FROM t1",
    "SELECT COALESCE(a, b) / COALESCE(c, b) FROM t1",
    "SELECT -(COALESCE(a, b) / COALESCE(c, b)) / 2, -COALESCE(c, b, a) % 2 FROM t1",
    "SELECT COALESCE(SUM(a), AVG(a)) / 2 FROM t1",
    "SELECT 8 / CASE WHEN COUNT(*) = 0 THEN AVG(a) ELSE 39 END FROM t1",
    "SELECT a FROM t1 WHERE COALESCE(a, b) / 2 = 0",
    "SELECT sum(COALESCE(a, b) / 2) FROM t1",
]

COMMITS: list[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]] = [
    ([(1, 2.5, 2), (None, 3.5, None), (5, None, 3), (3, 9.0, None)], []),
    ([(None, None, 4), (-7, 1.5, -2)], [(1, 2.5, 2)]),
    ([], [(None, 3.5, None), (5, None, 3), (3, 9.0, None), (None, None, 4), (-7, 1.5, -2)]),
    ([(4, 0.5, 1)], []),
]


def _same(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> bool:
    def norm(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        return sorted(
            (tuple(None if v is None else round(float(v), 9) for v in r) for r in rows),
            key=repr,
        )

    return norm(got) == norm(want)


def test_integer_branches_of_a_real_result_divide_as_integers() -> None:
    check_sqlite_commits(
        "CREATE TABLE t1(a INTEGER, b REAL, c INTEGER)", "t1", QUERIES, COMMITS, _same
    )


def test_the_corpus_queries_that_found_it() -> None:
    # sqllogictest random/expr/slt_good_7.test and slt_good_30.test (no FROM)
    con = sqlite3.connect(":memory:")
    for q in [
        "SELECT DISTINCT COALESCE ( - CAST ( NULL AS INTEGER ), + - SUM ( + - 43 ), "
        "+ + AVG ( ALL - 28 ) ) / - + 65 * 41 col2, 40 / + 66",
        "SELECT + - 15 - - + 8 / CASE - 99 WHEN + CAST ( NULL AS INTEGER ) THEN + COUNT ( * ) "
        "* - 78 * - ( - 59 ) + AVG ( + 1 ) + + 35 + - 39 - - 92 / - 1 WHEN 40 THEN NULL "
        "ELSE + 39 END",
    ]:
        db = dsql.Database(dialect="sqlite")
        v = db.view(q)
        db.commit()
        assert _same(v.rows(), con.execute(q).fetchall()), q


def test_several_mixed_values_combined_and_too_many_refused() -> None:
    # arithmetic branch by branch copies the other operand into each branch: mixed values
    # combined with each other multiply the branches, so past a size the view is refused,
    # naming the construct, rather than answered with REAL arithmetic
    ddl = "CREATE TABLE t1(a INTEGER, b REAL, c INTEGER)"
    rows = [(1, 2.5, 3), (None, 1.5, 2), (2, None, None), (None, None, 5), (7, 0.5, 2)]
    con = sqlite3.connect(":memory:")
    con.execute(ddl)
    con.executemany("INSERT INTO t1 VALUES (?, ?, ?)", rows)
    db = dsql.Database(dialect="sqlite")
    db.execute(ddl)
    term = "COALESCE(a, b, c)"
    q = "SELECT " + " / ".join([term] * 4) + " FROM t1"
    v = db.view(q)
    db.insert("t1", rows)
    db.commit()
    assert _same(v.rows(), con.execute(q).fetchall())
    with pytest.raises(dsql.UnsupportedSQL, match="mix INTEGER and REAL"):
        db.view("SELECT " + " / ".join([term] * 12) + " FROM t1")
    assert _same(v.rows(), con.execute(q).fetchall())  # (the database is as it was)
