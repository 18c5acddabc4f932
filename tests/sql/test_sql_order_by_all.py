"""Spark 4's ``ORDER BY ALL`` orders by every column of the result, left to right, after
every commit of a change stream: rows as ``rows()`` returns them, and kept as a top-k with
LIMIT / OFFSET, equal to the live rows sorted in Python.

The oracle shares no code with ``ddflow``: Python's sort of the rows with Spark's rules
(checked against a live Spark in ``tests/spark/test_sql_spark_try_order_all.py``): each
column in the direction given (ascending unless ``DESC``), NULLs first ascending and last
descending unless ``NULLS FIRST`` / ``LAST`` says; strings by their text. Where ``all``
names a column (of the result or of the table) Spark orders by that column instead.
"""

from __future__ import annotations

import functools
import random
from typing import Any

import pytest
from oracle import apply_commit

import ddflow.sql as dsql


def _sorted(rows: list[tuple[Any, ...]], desc: bool, nulls_first: bool) -> list[tuple[Any, ...]]:
    """``rows`` ordered by each column in turn: ``desc`` or not, NULLs first or last."""

    def cmp(a: tuple[Any, ...], b: tuple[Any, ...]) -> int:
        for x, y in zip(a, b, strict=True):
            if x == y:
                continue
            if x is None or y is None:
                return -1 if (x is None) == nulls_first else 1
            c = -1 if x < y else 1
            return -c if desc else c
        return 0

    return sorted(rows, key=functools.cmp_to_key(cmp))


#: ``ORDER BY ALL ...`` as written -> (descending, NULLs first)
_DIRECTIONS = {
    "": (False, True),
    " DESC": (True, False),
    " NULLS LAST": (False, False),
    " DESC NULLS FIRST": (True, True),
    " ASC NULLS FIRST": (False, True),
}


@pytest.mark.parametrize("how", sorted(_DIRECTIONS), ids=lambda h: h.strip() or "plain")
def test_order_by_all_sorts_by_every_column_after_every_commit(how: str) -> None:
    """The SELECT items in their order (not the table's), an expression among them, with
    NULLs, duplicates and deletes; with LIMIT / OFFSET the rows kept are those of the
    sorted live rows; grouped, and over a UNION, the same rule."""
    desc, nulls_first = _DIRECTIONS[how]
    rng = random.Random(len(how))
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT, b STRING, c INT)")
    plain = db.view(f"SELECT c, a, b FROM t ORDER BY ALL{how}")
    expr = db.view(f"SELECT b, a + c AS s FROM t ORDER BY ALL{how}")
    top = db.view(f"SELECT a, c, b FROM t ORDER BY ALL{how} LIMIT 4 OFFSET 1")
    grouped = db.view(f"SELECT b, count(*) AS n FROM t GROUP BY b ORDER BY ALL{how}")
    union = db.view(f"SELECT a FROM t UNION SELECT c FROM t ORDER BY ALL{how}")
    live: list[tuple[Any, ...]] = []
    for step in range(7):
        ins = [
            (
                rng.choice([None, rng.randint(-3, 3)]),
                rng.choice([None, "pear", "Apple", "fig", ""]),
                rng.choice([None, rng.randint(0, 2)]),
            )
            for _ in range(rng.randint(1, 8))
        ]
        if step == 3 and live:
            ins.append(live[0])  # a duplicate
        dels = rng.sample(live, k=min(len(live), rng.randint(0, 4)))
        apply_commit(db, live, ins, dels)
        assert plain.rows() == _sorted([(c, a, b) for a, b, c in live], desc, nulls_first)
        sums = [(b, None if a is None or c is None else a + c) for a, b, c in live]
        assert expr.rows() == _sorted(sums, desc, nulls_first)
        assert top.rows() == _sorted([(a, c, b) for a, b, c in live], desc, nulls_first)[1:5]
        counts = [(b, sum(1 for r in live if r[1] == b)) for b in {r[1] for r in live}]
        assert grouped.rows() == _sorted(counts, desc, nulls_first)
        values = {(r[0],) for r in live} | {(r[2],) for r in live}
        assert union.rows() == _sorted(list(values), desc, nulls_first)


def test_all_that_names_a_column_is_that_column() -> None:
    """As in Spark: a column ``all`` of the table (selected, renamed or not selected at
    all) or a result column named ``all`` is what ``ORDER BY ALL`` orders by; ``ALL``
    beside other keys is a column too (unknown without one)."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (a INT, `all` INT, b INT)")
    views = {
        "selected": db.view("SELECT a, `all` FROM t ORDER BY ALL"),
        "renamed": db.view("SELECT a, `all` AS z FROM t ORDER BY ALL DESC"),
        "unselected": db.view("SELECT a FROM t ORDER BY ALL"),
        "alias": db.view("SELECT b AS `all`, a FROM t ORDER BY ALL DESC"),
        "quoted": db.view("SELECT a, b FROM t ORDER BY `all` DESC"),
    }
    rows = [(1, 30, 7), (2, 10, 9), (3, 20, 8), (4, None, 6)]
    db.insert("t", rows)
    db.commit()
    by_all = [1, 3, 2, 4]  # the rows' order by the column ``all``, NULL first
    assert views["selected"].rows() == [(rows[i - 1][0], rows[i - 1][1]) for i in [4, 2, 3, 1]]
    assert views["renamed"].rows() == [(rows[i - 1][0], rows[i - 1][1]) for i in by_all]
    assert views["unselected"].rows() == [(4,), (2,), (3,), (1,)]
    assert views["alias"].rows() == [(9, 2), (8, 3), (7, 1), (6, 4)]  # (by b: not by a)
    assert views["quoted"].rows() == [(1, 7), (3, 8), (2, 9), (4, 6)]
    with pytest.raises(dsql.SQLError):
        db.view("SELECT a, count(*) FROM t GROUP BY a ORDER BY ALL")  # (`all` not grouped)
    other = dsql.Database()
    other.execute("CREATE TABLE t (a INT, b INT)")
    with pytest.raises(dsql.SQLError):
        other.view("SELECT a, b FROM t ORDER BY ALL, a")
