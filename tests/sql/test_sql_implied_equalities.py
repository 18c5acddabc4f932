"""Equalities of columns implied by transitivity join sources the query never joins
directly: ``p.pk = l.pk AND ps.pk = l.pk`` also joins ``ps`` to ``p``, so a filtered
source's neighbours through a shared column can meet it first. A join that would match one
column twice with columns already known equal (``l.pk = p.pk`` and ``l.pk = ps.pk`` once
``p`` and ``ps`` are joined) keeps one key column. Columns of different types, and classes
of equal columns that only share a source pair through another class, derive nothing they
should not. Checked against DuckDB after every commit of streams with NULL keys,
duplicates, deletes and updates, on hand-written queries and on random equality graphs
(chains, stars, cycles, a table joined twice)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from oracle import Del, Ins, Oracle, random_changes

import ddflow.sql as dsql

DDL = [
    "CREATE TABLE a (x INT, y INT, v INT)",
    "CREATE TABLE b (x INT, y INT, w INT)",
    "CREATE TABLE c (x INT, y INT, z INT)",
    "CREATE TABLE d (x BIGINT, u INT)",
]

QUERIES = [
    # a chain: a.x = c.x is implied
    "SELECT a.v, b.w, c.z FROM a, b, c WHERE a.x = b.x AND b.x = c.x",
    # a star through one column, with a filter on the far end
    "SELECT a.v, c.z, count(*) FROM a, b, c WHERE a.x = b.x AND a.x = c.x AND c.z > 2 "
    "GROUP BY a.v, c.z",
    # two classes: a and b share x; y ties a and b to c. a.y = b.y holds only through c,
    # so c's two matches on y must both be applied (a and b are joined on x alone)
    "SELECT a.v, b.w, c.z FROM a, b, c WHERE a.x = b.x AND a.y = c.y AND b.y = c.y",
    # two columns of one source in a class: a.x = a.y is implied
    "SELECT a.v, b.w FROM a, b WHERE a.x = b.x AND a.y = b.x",
    # different types (INT and BIGINT): nothing is implied across them
    "SELECT a.v, d.u FROM a, b, d WHERE a.x = b.x AND b.x = d.x",
    # a column matched with a class's column and with an expression: both apply
    "SELECT a.v, b.w, c.z FROM a, b, c WHERE a.x = b.x AND b.x = c.x AND abs(b.y) = c.x",
    "SELECT a.v, b.w, c.z FROM a, b, c WHERE a.x = b.x AND b.x = c.x AND abs(c.y) = a.x",
    # an explicit JOIN chain with the implied equality and a filter at the end
    "SELECT a.v, c.z FROM a JOIN b ON a.x = b.x JOIN c ON c.x = b.x AND c.y = b.y WHERE a.v < 5",
]


def _rows(rng: random.Random, table: str) -> list[tuple[Any, ...]]:
    def k() -> int | None:
        return None if rng.random() < 0.1 else rng.randrange(5)

    n = rng.randrange(0, 5)
    if table == "d":
        return [(k(), rng.randrange(4)) for _ in range(n)]
    return [(k(), k(), rng.randrange(8)) for _ in range(n)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_implied_equalities_keep_duckdbs_answers(seed: int) -> None:
    rng = random.Random(seed)
    random.seed(seed)  # (random_changes picks the deletes)
    o = Oracle(DDL)
    live: dict[str, list[tuple[Any, ...]]] = {t: [] for t in "abcd"}
    first = random_changes(live, lambda t: _rows(rng, t) + _rows(rng, t), most_deleted=1)
    o.commit(first)
    for sql in QUERIES:
        o.view(sql)
    for _ in range(6):
        o.commit(random_changes(live, lambda t: _rows(rng, t)))
    # a row of each table updated (deleted and put back changed) in one commit
    last = []
    for t, rows in live.items():
        if rows:
            old = rows.pop(0)
            new = (old[0], *reversed(old[1:]))
            rows.append(new)
            last += [Del(t, [old]), Ins(t, [new])]
    o.commit(last)


def _joins(plan: str) -> list[list[str]]:
    out = []
    for line in plan.splitlines():
        if "Join inner" in line:
            out.append(line[line.index("[") + 1 : line.rindex("]")].split(", "))
    return out


def test_a_filtered_source_meets_its_neighbour_through_a_shared_column() -> None:
    """``p`` (filtered) and ``ps`` are joined on the part key, which neither condition
    names; the line items then match on two key columns, not four."""
    db = dsql.Database()
    db.execute("CREATE TABLE p (pk INT, name STRING, PRIMARY KEY (pk))")
    db.execute("CREATE TABLE s (sk INT, nat INT, PRIMARY KEY (sk))")
    db.execute("CREATE TABLE l (lk INT, lpk INT, lsk INT, q INT)")
    db.execute("CREATE TABLE ps (pspk INT, pssk INT, cost INT, PRIMARY KEY (pspk, pssk))")
    sql = (
        "SELECT s.nat, sum(l.q * ps.cost) FROM p, s, l, ps "
        "WHERE s.sk = l.lsk AND ps.pssk = l.lsk AND ps.pspk = l.lpk AND p.pk = l.lpk "
        "AND p.name LIKE '%green%' GROUP BY s.nat"
    )
    plan = db.explain(sql)
    joins = _joins(plan)
    assert any(sorted(k) == ["pspk = pk"] or k == ["pk = pspk"] for k in joins), plan
    line_join = [k for k in joins if any("lpk" in x or "lsk" in x for x in k)]
    assert len(line_join) == 1 and len(line_join[0]) == 2, plan
    # and the answers are the plain join's
    rng = random.Random(4)
    parts = [(i, rng.choice(["green x", "red", None])) for i in range(6)]
    supps = [(i, rng.randrange(3)) for i in range(4)]
    lines = [(i, rng.randrange(7), rng.randrange(5), rng.randrange(9)) for i in range(40)]
    offers = [(p, s, rng.randrange(5)) for p in range(6) for s in range(4) if rng.random() < 0.6]
    o = Oracle(
        [
            "CREATE TABLE p (pk INT, name STRING)",
            "CREATE TABLE s (sk INT, nat INT)",
            "CREATE TABLE l (lk INT, lpk INT, lsk INT, q INT)",
            "CREATE TABLE ps (pspk INT, pssk INT, cost INT)",
        ]
    )
    o.view(sql)
    o.commit([Ins("p", parts), Ins("s", supps), Ins("l", lines), Ins("ps", offers)])
    o.commit([Del("ps", offers[:3]), Del("p", parts[:2]), Ins("p", [(0, "green again")])])
    o.commit([Del("l", lines[:10]), Ins("ps", [(o_[0], o_[1], 7) for o_ in offers[:3]])])


def _random_join(rng: random.Random) -> str:
    """A query over 3 or 4 of the tables with random equalities among their int columns
    (chains, stars, cycles and repeats of one column), a random filter, and a projection
    or an aggregate."""
    tables = rng.sample(["a", "b", "c"], rng.randint(2, 3)) + (["a2"] if rng.random() < 0.4 else [])
    if len(tables) < 3:
        tables.append("a2")
    cols = {"a": ["x", "y", "v"], "b": ["x", "y", "w"], "c": ["x", "y", "z"], "a2": ["x", "y", "v"]}
    names = {t: ("a" if t == "a2" else t) for t in tables}
    conds = []
    # a spanning chain first (every table joined), then extra equalities
    for i in range(1, len(tables)):
        t, u = tables[i], rng.choice(tables[:i])
        conds.append(f"{t}.{rng.choice(['x', 'y'])} = {u}.{rng.choice(['x', 'y'])}")
    for _ in range(rng.randint(0, 3)):
        t, u = rng.sample(tables, 2)
        conds.append(f"{t}.{rng.choice(cols[t][:2])} = {u}.{rng.choice(cols[u][:2])}")
    if rng.random() < 0.5:
        t = rng.choice(tables)
        conds.append(f"{t}.{cols[t][2]} {rng.choice(['<', '>=', '<>'])} {rng.randrange(8)}")
    frm = ", ".join(f"{names[t]} AS {t}" for t in tables)
    where = " AND ".join(conds)
    if rng.random() < 0.5:
        outs = ", ".join(f"{t}.{cols[t][2]}" for t in tables)
        return f"SELECT {outs} FROM {frm} WHERE {where}"
    g = rng.choice(tables)
    s = rng.choice(tables)
    return f"SELECT {g}.x, count(*), sum({s}.{cols[s][2]}) FROM {frm} WHERE {where} GROUP BY {g}.x"


@pytest.mark.parametrize("seed", range(8))
def test_random_equality_graphs_keep_duckdbs_answers(seed: int) -> None:
    """Random joins whose equalities chain, cycle and repeat columns (so classes of equal
    columns of three or more, implied joins and repeated key columns all occur), checked
    against DuckDB after every commit of a stream with NULL keys, deletes and updates."""
    rng = random.Random(1000 + seed)
    random.seed(1000 + seed)  # (random_changes picks the deletes)
    sqls = [_random_join(rng) for _ in range(6)]
    o = Oracle(DDL[:3])
    live: dict[str, list[tuple[Any, ...]]] = {t: [] for t in "abc"}
    o.commit(random_changes(live, lambda t: _rows(rng, t) + _rows(rng, t), most_deleted=1))
    for sql in sqls:
        o.view(sql)
    for _ in range(5):
        o.commit(random_changes(live, lambda t: _rows(rng, t)))
