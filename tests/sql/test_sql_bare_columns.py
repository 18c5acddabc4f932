"""SQLite's bare columns: in a query that aggregates, a column that is neither grouped by
nor inside an aggregate takes its value from one of the group's rows (the row holding the
extreme when ``min`` / ``max`` is the query's one aggregate). The queries here have one
answer whichever row is taken, and SQLite itself is the oracle after every commit."""

from __future__ import annotations

import random
import sqlite3
from typing import Any

import pytest

import ddflow.sql as dsql

_DDL = "CREATE TABLE t (k INTEGER, a INTEGER, b INTEGER, u INTEGER)"

_QUERIES = [
    # one row per group (k unique among the live rows): any row is that row
    "SELECT k, a, b FROM t GROUP BY u",
    "SELECT u AS b FROM t GROUP BY u HAVING b > 10",
    "SELECT u FROM t GROUP BY u HAVING NULL > a",
    "SELECT CASE 5 WHEN u - u THEN a ELSE 3 END FROM t GROUP BY u",
    "SELECT NULLIF(NULL, b), count(*) FROM t GROUP BY u",
    # the row holding the extreme (the extremes are unique)
    "SELECT k, a, max(u) FROM t GROUP BY k",
    "SELECT k, b, min(u) FROM t GROUP BY k",
    "SELECT a, max(u) FROM t",
    # a column the same throughout its group
    "SELECT k * 2, k + 1, count(*) FROM t GROUP BY k * 2",
    "SELECT u FROM t GROUP BY u ORDER BY a, u",
]


def _rows(rng: random.Random, used: set[int]) -> list[tuple[Any, ...]]:
    out = []
    for _ in range(rng.randint(1, 6)):
        u = rng.randint(0, 10**6)
        if u in used:
            continue
        used.add(u)
        out.append(
            (rng.randint(0, 3), rng.choice([None, rng.randint(-20, 20)]), rng.randint(0, 30), u)
        )
    return out


@pytest.mark.parametrize("sql", _QUERIES)
def test_bare_columns_equal_sqlite_after_every_commit(sql: str) -> None:
    rng = random.Random(sql)
    con = sqlite3.connect(":memory:")
    con.execute(_DDL)
    db = dsql.Database(dialect="sqlite")
    db.execute(_DDL)
    view = db.view(sql)
    live: list[tuple[Any, ...]] = []
    used: set[int] = set()
    for _ in range(6):
        ins = _rows(rng, used)
        dels = rng.sample(live, k=min(len(live), rng.randint(0, 3)))
        db.insert("t", ins)
        db.delete("t", dels)
        db.commit()
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", ins)
        for r in dels:
            live.remove(r)
            con.execute("DELETE FROM t WHERE u = ?", (r[3],))
        live.extend(ins)
        want = con.execute(sql).fetchall()
        got = view.rows()
        if "ORDER BY" in sql:
            assert got == want
        else:
            assert sorted(got, key=repr) == sorted(want, key=repr)


def test_bare_columns_stay_an_error_in_spark() -> None:
    db = dsql.Database()
    db.execute("CREATE TABLE t (k INT, a INT)")
    with pytest.raises(dsql.SQLError, match="GROUP BY"):
        db.view("SELECT k, a FROM t GROUP BY k")
