"""A semi join on the keys of a relation that a join above meets again on the same key
(TPC-H Q18: orders ``IN`` the order keys whose line items sum over 300, and the same sums
joined to those orders) is planned as one join with that relation, where the semi join
was: the relation is distinct on the key (an aggregate's groups), so each row meets at most
one of its rows, the same one the join above would meet. Checked against DuckDB after
every commit, with the semi join under filters, projections and joins on either side, an
anti join on the way, a condition on the join above, NULL keys and duplicates."""

from __future__ import annotations

import random
from typing import Any

import pytest
from oracle import Del, Oracle, random_changes

import ddflow.sql as dsql

DDL = [
    "CREATE TABLE o (ok INTEGER, ck INTEGER, tp INTEGER)",
    "CREATE TABLE l (lk INTEGER, q INTEGER)",
    "CREATE TABLE c (ck INTEGER, name VARCHAR)",
    "CREATE TABLE x (ok INTEGER)",
]

VIEWS = [
    # Q18's shape: the semi join under the customers' join, on its right side
    "SELECT name, c.ck, o.ok, tp, sum(q) FROM c, o, l "
    "WHERE o.ok IN (SELECT lk FROM l GROUP BY lk HAVING sum(q) > 3) "
    "AND c.ck = o.ck AND o.ok = l.lk GROUP BY name, c.ck, o.ok, tp",
    # on the left side of a join, under a condition on both of its sides
    "SELECT o.ok, name, sum(q) FROM o, c, l WHERE o.ck = c.ck AND o.ok = l.lk "
    "AND o.ok IN (SELECT lk FROM l GROUP BY lk HAVING sum(q) > 3) AND tp < c.ck + 3 "
    "GROUP BY o.ok, name",
    # right under the join above
    "SELECT o.ok, o.tp, sum(q) FROM o JOIN l ON o.ok = l.lk "
    "WHERE o.ok IN (SELECT lk FROM l GROUP BY lk HAVING sum(q) > 3) GROUP BY o.ok, o.tp",
    # the relation on the left of the join above
    "SELECT o.ok, o.tp, sum(q) FROM l JOIN o ON l.lk = o.ok "
    "WHERE o.ok IN (SELECT lk FROM l GROUP BY lk HAVING sum(q) > 3) GROUP BY o.ok, o.tp",
    # another semi join first on the way: left as it is
    "SELECT c.name, o.ok, max(q) FROM c JOIN o ON c.ck = o.ck JOIN l ON o.ok = l.lk "
    "WHERE o.ok IN (SELECT lk FROM l GROUP BY lk HAVING max(q) >= 2) "
    "AND o.ok IN (SELECT ok FROM x) GROUP BY c.name, o.ok",
]


def _rows(table: str, n: int) -> list[tuple[Any, ...]]:
    pick = random.randrange
    if table == "o":
        return [(random.choice([pick(8), None]), pick(4), pick(4)) for _ in range(n)]
    if table == "l":
        return [(random.choice([pick(8), pick(8), None]), pick(4)) for _ in range(n)]
    if table == "c":
        return [(pick(4), random.choice(["a", "b", None])) for _ in range(n)]
    return [(pick(8),) for _ in range(n)]


def test_the_plan_meets_the_relation_once() -> None:
    db = dsql.Database()
    for s in DDL:
        db.execute(s)
    for sql in VIEWS[:-1]:
        plan = db.explain(sql)
        assert "SemiJoin" not in plan, plan
        assert plan.count("Aggregate keys [lk]") == 1, plan
    assert db.explain(VIEWS[-1]).count("Aggregate keys [lk]") == 2


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_absorbed_semijoins_against_duckdb(seed: int) -> None:
    random.seed(seed)
    o = Oracle(DDL)
    for sql in VIEWS:
        o.view(sql)
    live: dict[str, list[tuple[Any, ...]]] = {t: [] for t in ("o", "l", "c", "x")}
    for _ in range(10):
        o.commit(
            random_changes(live, lambda t: _rows(t, random.randrange(0, 12 if t == "l" else 5)))
        )
    o.commit([Del(t, list(rows)) for t, rows in live.items() if rows])
