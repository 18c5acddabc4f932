"""Two semi / anti joins of the same rows on the groups of two aggregates of one table,
one of them over a filter of it (TPC-H Q21: orders with another supplier, and without
another late one), are planned as one aggregate of the table whose filtered aggregates are
taken over the rows meeting the filter, and one join with the groups meeting both
conditions. Checked against DuckDB after every commit: semi and anti joins in every
combination, conditions that are NULL, filtered rows under a DISTINCT, a filter that both
sides share, NULLs in every column, duplicates, and rows that move in and out of both."""

from __future__ import annotations

import random
from typing import Any

import pytest
from oracle import Del, Oracle, random_changes

import ddflow.sql as dsql

DDL = [
    "CREATE TABLE l (ok INTEGER, sk INTEGER, a INTEGER, b INTEGER, x INTEGER)",
    "CREATE TABLE m (ok INTEGER NOT NULL, sk INTEGER NOT NULL, a INTEGER, b INTEGER)",
    "CREATE TABLE o (ok INTEGER, v INTEGER)",
]

_OTHER = "EXISTS (SELECT * FROM m m2 WHERE m2.ok = m1.ok AND m2.sk <> m1.sk)"
_OTHER_LATE = "EXISTS (SELECT * FROM m m3 WHERE m3.ok = m1.ok AND m3.sk <> m1.sk AND m3.a > m3.b)"

#: views planned with one aggregate of the table for both conditions
FUSED = [
    # Q21's shape: another supplier, and no other late one
    f"SELECT m1.ok, m1.sk, count(*) FROM m m1 WHERE m1.a > m1.b AND {_OTHER} "
    f"AND NOT {_OTHER_LATE} GROUP BY m1.ok, m1.sk",
    # both semi joins
    f"SELECT m1.ok, m1.sk FROM m m1 WHERE m1.a > m1.b AND {_OTHER} AND {_OTHER_LATE}",
    # both anti joins
    f"SELECT m1.ok, m1.sk, m1.a FROM m m1 WHERE m1.a > m1.b AND NOT {_OTHER} AND NOT {_OTHER_LATE}",
    # the filtered groups first, then all of them
    f"SELECT m1.ok, m1.b FROM m m1 WHERE m1.a > m1.b AND NOT {_OTHER_LATE} AND {_OTHER}",
    # groups by aggregates of nullable values, one over the rows where x > 1
    "SELECT * FROM o WHERE ok IN (SELECT ok FROM l GROUP BY ok HAVING count(*) >= 2) "
    "AND ok IN (SELECT ok FROM l WHERE x > 1 GROUP BY ok HAVING sum(x) > 4)",
    # a filter both sides share; a DISTINCT aggregate and an average
    "SELECT * FROM o WHERE ok IN (SELECT ok FROM l WHERE a > 0 GROUP BY ok "
    "HAVING count(DISTINCT sk) >= 2) AND ok IN (SELECT ok FROM l WHERE a > 0 AND b < 3 "
    "GROUP BY ok HAVING avg(x) > 1)",
    # correlated, the second one absent: conditions NULL where the group has no x
    "SELECT * FROM o WHERE EXISTS (SELECT ok FROM l WHERE l.ok = o.ok GROUP BY ok "
    "HAVING max(x) > 2) AND NOT EXISTS (SELECT ok FROM l WHERE l.ok = o.ok AND a < b "
    "GROUP BY ok HAVING min(x) < 2)",
    # a condition TRUE for a group without filtered rows (count 0 < 3)
    "SELECT * FROM o WHERE ok IN (SELECT ok FROM l WHERE a > b GROUP BY ok "
    "HAVING count(*) < 3) AND ok IN (SELECT ok FROM l GROUP BY ok "
    "HAVING max(x) IS NULL OR max(x) > 1)",
    # the filtered side's every group, no condition on it
    "SELECT * FROM o WHERE ok IN (SELECT ok FROM l WHERE x > 2 GROUP BY ok) "
    "AND ok IN (SELECT ok FROM l GROUP BY ok HAVING count(*) > 1)",
    # the narrow side first, every group of the wide side (no condition on it)
    "SELECT * FROM o WHERE NOT EXISTS (SELECT ok FROM l WHERE l.ok = o.ok AND x IS NULL "
    "GROUP BY ok HAVING count(*) > 1) AND EXISTS (SELECT ok, sum(x) FROM l "
    "WHERE l.ok = o.ok GROUP BY ok)",
]

#: views of a similar shape that are left as they are
APART = [
    # two different tables
    "SELECT * FROM o WHERE ok IN (SELECT ok FROM l GROUP BY ok HAVING count(*) >= 2) "
    "AND ok IN (SELECT ok FROM m WHERE a > 1 GROUP BY ok HAVING count(*) > 1)",
    # filters that differ both ways
    "SELECT * FROM o WHERE ok IN (SELECT ok FROM l WHERE a > 0 GROUP BY ok "
    "HAVING count(*) >= 2) AND ok IN (SELECT ok FROM l WHERE b > 0 GROUP BY ok "
    "HAVING count(*) >= 2)",
    # groups of (ok, sk) met on ok alone
    "SELECT * FROM o WHERE ok IN (SELECT ok FROM l GROUP BY ok, sk HAVING count(*) >= 2) "
    "AND ok NOT IN (SELECT ok FROM l WHERE a > 1 AND ok IS NOT NULL GROUP BY ok, sk)",
]


def _rows(table: str, n: int) -> list[tuple[Any, ...]]:
    pick = random.randrange

    def maybe(v: int) -> int | None:
        return None if random.random() < 0.2 else v

    if table == "l":
        return [
            (maybe(pick(6)), maybe(pick(3)), maybe(pick(4)), maybe(pick(4)), maybe(pick(5)))
            for _ in range(n)
        ]
    if table == "m":
        return [(pick(6), pick(3), maybe(pick(4)), maybe(pick(4))) for _ in range(n)]
    return [(maybe(pick(7)), pick(3)) for _ in range(n)]


def test_the_plans() -> None:
    db = dsql.Database()
    for s in DDL:
        db.execute(s)
    for sql in FUSED:
        plan = db.explain(sql)
        # one aggregate for both conditions, one join with its groups
        assert plan.count("_where > 0)") == 1, plan
        assert plan.count("SemiJoin") + plan.count("AntiJoin") == 1, plan
    # the distinct suppliers of an order and its distinct late ones, counted in one pass
    assert "Distinct" not in db.explain(FUSED[0])
    for sql in APART:
        assert "_where > 0)" not in db.explain(sql)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_fused_counts_against_duckdb(seed: int) -> None:
    random.seed(seed)
    o = Oracle(DDL)
    for sql in FUSED + APART:
        o.view(sql)
    live: dict[str, list[tuple[Any, ...]]] = {t: [] for t in ("l", "m", "o")}
    for _ in range(12):
        o.commit(random_changes(live, lambda t: _rows(t, random.randrange(0, 9))))
    o.commit([Del(t, list(rows)) for t, rows in live.items() if rows])
