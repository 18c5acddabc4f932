"""A dimension reached through another dimension (an order's customer, the customer's
nation) is joined to that dimension first: ``(facts join D1) join D2`` is planned as
``facts join (D1 join D2)`` when D2 is looked up by its declared key from D1's columns
and D1 by its own key from what came before. Inner joins are associative, so the rows
are the same whatever the declared keys say; a key declared wrongly (duplicates) may
cost speed, never answers. Checked against DuckDB after every commit of a stream that
changes every table, moves dimension rows to other parents and duplicates keys."""

from __future__ import annotations

import random
from typing import Any

import pytest
from oracle import Oracle, random_changes

import ddflow.sql as dsql

DDL = [
    "CREATE TABLE sale (id INTEGER, item INTEGER, qty INTEGER, PRIMARY KEY (id))",
    "CREATE TABLE item (ik INTEGER, shop INTEGER, iname VARCHAR, PRIMARY KEY (ik))",
    "CREATE TABLE shop (sk INTEGER, city INTEGER, sname VARCHAR, PRIMARY KEY (sk))",
    "CREATE TABLE city (ck INTEGER, cname VARCHAR, PRIMARY KEY (ck))",
]

QUERIES = [
    "SELECT cname, sum(qty), count(*) FROM sale, item, shop, city "
    "WHERE item = ik AND shop = sk AND city = ck GROUP BY cname",
    "SELECT id, iname, sname, cname FROM sale JOIN item ON item = ik "
    "JOIN shop ON shop = sk JOIN city ON city = ck WHERE qty > 1",
    "SELECT sname, iname, qty FROM sale, item, shop WHERE item = ik AND shop = sk AND sname <> 'b'",
]


def _plan_nests_the_chain(db: Any) -> None:
    text = db.explain(QUERIES[0])
    lines = [ln for ln in text.splitlines() if "Join" in ln]
    depth = [len(ln) - len(ln.lstrip()) for ln in lines]
    # the fact table's join is the outermost; each dimension's join sits inside the one
    # before it (a right-deep chain), not stacked on top of the facts
    assert "item = ik" in lines[0] and "shop = sk" in lines[1] and "city = ck" in lines[2]
    assert depth[0] < depth[1] < depth[2]


def test_the_plan_joins_dimensions_to_each_other_first() -> None:
    db = dsql.Database()
    for s in DDL:
        db.execute(s)
    _plan_nests_the_chain(db)
    # without declared keys nothing says a join is a lookup: the written order stays
    plain = dsql.Database()
    for s in DDL:
        plain.execute(s.split(", PRIMARY KEY")[0] + ")")
    lines = [ln for ln in plain.explain(QUERIES[0]).splitlines() if "Join" in ln]
    depth = [len(ln) - len(ln.lstrip()) for ln in lines]
    assert depth[0] < depth[1] < depth[2]
    assert "city = ck" in lines[0]  # (the last joined is the outermost)


def _rows(table: str, n: int, span: int) -> list[tuple[Any, ...]]:
    """``n`` random rows; dimension keys drawn from ``span`` values, so some repeat (the
    declared keys are not enforced) and a later row may move a key to another parent."""
    names = ["a", "b", "c", None]
    pick = random.randrange
    name = lambda: random.choice(names)  # noqa: E731
    if table == "sale":
        return [(pick(1000), pick(8), pick(4)) for _ in range(n)]
    if table == "item":
        return [(pick(span), random.choice([0, 1, 2, None]), name()) for _ in range(n)]
    if table == "shop":
        return [(pick(span) % 3, random.choice([0, 1, None]), name()) for _ in range(n)]
    return [(pick(span) % 2, name()) for _ in range(n)]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_chains_against_duckdb(seed: int) -> None:
    random.seed(seed)
    # DuckDB enforces keys and the stream repeats them: it gets the tables without them,
    # ddflow with them (informational there)
    o = Oracle([s.split(", PRIMARY KEY")[0] + ")" for s in DDL])
    o.db = dsql.Database()
    for s in DDL:
        o.db.execute(s)
    _plan_nests_the_chain(o.db)
    for q in QUERIES:
        o.view(q)
    live: dict[str, list[tuple[Any, ...]]] = {t: [] for t in ("sale", "item", "shop", "city")}
    for step in range(10):
        span = 3 if step % 3 == 2 else 8
        o.commit(
            random_changes(
                live, lambda t: _rows(t, random.randrange(0, 6 if t != "sale" else 25), span)
            )
        )


# -- a child table joined with its filtered parent first ---------------------------------

#: orders and their lines: a line's key holds its order's key (the parent's whole key)
FAMILY = [
    "CREATE TABLE ord (ok INTEGER, cust INTEGER, day INTEGER, PRIMARY KEY (ok))",
    "CREATE TABLE line (lok INTEGER, ln INTEGER, part INTEGER, qty INTEGER, PRIMARY KEY (lok, ln))",
    "CREATE TABLE part (pk INTEGER, kind VARCHAR, PRIMARY KEY (pk))",
    "CREATE TABLE cust (ck INTEGER, seg VARCHAR, PRIMARY KEY (ck))",
]

FAMILY_QUERIES = [
    # the shape of TPC-H Q5 / Q8: a pinned dimension, a filtered parent, the lines
    "SELECT kind, sum(qty), count(*) FROM part, line, ord "
    "WHERE pk = part AND lok = ok AND kind = 'a' AND day >= 3 GROUP BY kind",
    "SELECT seg, sum(qty) FROM cust, ord, line, part "
    "WHERE ck = cust AND ok = lok AND part = pk AND seg IN ('a', 'b') AND day < 5 GROUP BY seg",
    # no filter on the parent: the written order and the other rules decide
    "SELECT kind, count(*) FROM part, line, ord WHERE pk = part AND lok = ok AND kind = 'b' "
    "GROUP BY kind",
    # a parent without a filter: the customers join the lines that met their orders, not
    # every order (TPC-H Q7's shape)
    "SELECT seg, sum(qty) FROM line, ord, cust, part "
    "WHERE lok = ok AND cust = ck AND part = pk AND kind = 'a' GROUP BY seg",
]


def _joins(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if "Join" in ln]


def test_a_child_is_joined_with_its_filtered_parent_first() -> None:
    db = dsql.Database()
    for s in FAMILY:
        db.execute(s)
    for q in FAMILY_QUERIES[:2]:
        # the innermost join of the line items (the last Join line on their side) is
        # with their orders, before the dimensions looked up from either
        text = db.explain(q)
        first_line_join = max(i for i, ln in enumerate(text.splitlines()) if "lok = ok" in ln)
        below = text.splitlines()[first_line_join + 1 :]
        assert any("Scan line " in ln for ln in below), q
        assert not any("part = pk" in ln or "pk = part" in ln for ln in below), q
    # the parent's own lookups (an order's customer) join the parent before the child
    # meets it; the child's other lookups (its part) come after
    lines = db.explain(FAMILY_QUERIES[1]).splitlines()
    at = {
        name: next(i for i, ln in enumerate(lines) if "Join" in ln and cond in ln)
        for name, cond in (("child", "= ok"), ("cust", "= ck"), ("part", "= pk"))
    }
    depth = {name: len(lines[i]) - len(lines[i].lstrip()) for name, i in at.items()}
    assert depth["part"] < depth["child"] < depth["cust"], lines
    # an unfiltered parent's lookups are not joined into its side
    lines = db.explain(FAMILY_QUERIES[3]).splitlines()
    at = {
        name: next(i for i, ln in enumerate(lines) if "Join" in ln and cond in ln)
        for name, cond in (("child", "= ok"), ("cust", "= ck"))
    }
    depth = {name: len(lines[i]) - len(lines[i].lstrip()) for name, i in at.items()}
    assert depth["cust"] < depth["child"], lines
    # a parent with no filter of its own: the pinned dimension starts, as before
    joins = _joins(db.explain(FAMILY_QUERIES[2]))
    assert "pk = part" in joins[-1] or "part = pk" in joins[-1]
    # without declared keys nothing says which table is the child
    plain = dsql.Database()
    for s in FAMILY:
        plain.execute(s.split(", PRIMARY KEY")[0] + ")")
    joins = _joins(plain.explain(FAMILY_QUERIES[0]))
    assert "pk = part" in joins[-1] or "part = pk" in joins[-1]


def _family_rows(table: str, n: int) -> list[tuple[Any, ...]]:
    pick = random.randrange
    if table == "ord":
        return [(pick(12), pick(4), random.choice([0, 3, 6, None])) for _ in range(n)]
    if table == "line":
        return [(pick(12), pick(3), pick(5), random.choice([1, 2, None])) for _ in range(n)]
    if table == "part":
        return [(pick(6), random.choice(["a", "b", None])) for _ in range(n)]
    return [(pick(5), random.choice(["a", "b", "c", None])) for _ in range(n)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_child_first_against_duckdb(seed: int) -> None:
    random.seed(seed)
    o = Oracle([s.split(", PRIMARY KEY")[0] + ")" for s in FAMILY])
    o.db = dsql.Database()
    for s in FAMILY:
        o.db.execute(s)
    for q in FAMILY_QUERIES:
        o.view(q)
    live: dict[str, list[tuple[Any, ...]]] = {t: [] for t in ("ord", "line", "part", "cust")}
    for _ in range(10):
        o.commit(
            random_changes(
                live, lambda t: _family_rows(t, random.randrange(0, 20 if t == "line" else 5))
            )
        )
