"""A string column that a view reads only to compare with literals (``CASE WHEN s = 'x'``,
``s <> 'y'``, ``s IN (...)``, ``s IS NULL``) enters the dataflow as the string's class
among those literals, found on the raw strings as rows arrive, instead of dictionary
codes. The answers must be those of the strings themselves:

- against DuckDB after every commit of random streams with deletes, NULLs, duplicates,
  strings sharing a literal's length or prefix, multi-byte text and the empty string,
  fed as tuples and as Arrow tables;
- on Arrow arrays that are slices, ``large_string`` or dictionary encoded, and whose NULL
  slots hold a literal's bytes;
- where another view (or the same one) reads the column itself, and where two views
  compare it with different literals;
- and a column read any other way (projected, ordered, matched by LIKE, compared with
  another column) is not made a class.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from oracle import Del, Ins, Oracle

import ddflow.sql as dsql

DDL = "CREATE TABLE t (k INTEGER, s VARCHAR, m VARCHAR, x INTEGER)"

LITS = ["1-URGENT", "2-HIGH", "", "é", "ABCDEFGHIJKL"]
OTHERS = ["3-MEDIUM", "2-HIGX", "1-URGENT ", "2-HIG", "ABCDEFGHIJKM", "è", "x", "5-LOW"]
VALUES = [*LITS, *OTHERS, None]

VIEWS = [
    # the shape of TPC-H Q12: two CASEs over one column, summed per group
    "SELECT m, sum(CASE WHEN s = '1-URGENT' OR s = '2-HIGH' THEN 1 ELSE 0 END) AS hi, "
    "sum(CASE WHEN s <> '1-URGENT' AND s <> '2-HIGH' THEN 1 ELSE 0 END) AS lo "
    "FROM t GROUP BY m",
    "SELECT k, s = '' AS e, s IN ('é', 'ABCDEFGHIJKL') AS w, s IS NULL AS n FROM t",
    "SELECT k, CASE WHEN s IN ('1-URGENT', NULL) THEN 'u' WHEN s = 'é' THEN 'e' END FROM t",
    "SELECT count(*), sum(x) FROM t WHERE x > 2 AND s <> 'ABCDEFGHIJKL'",
    "SELECT k, s NOT IN ('2-HIGH', '') AS a, 'é' = s AS b FROM t WHERE x IS NOT NULL",
    # two columns classified in one scan, one of them beside a plain read of another
    "SELECT x, s = '2-HIGH' AND m = 'x' AS both_ FROM t",
    # the column read itself by another view over the same table
    "SELECT s, count(*) FROM t GROUP BY s",
]


def _row() -> tuple[Any, ...]:
    return (
        random.randrange(5),
        random.choice(VALUES),
        random.choice(["x", "y", None, "1-URGENT"]),
        random.choice([1, 2, 3, 4, None]),
    )


@pytest.mark.parametrize("arrow", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_classes_against_duckdb(seed: int, arrow: bool) -> None:
    random.seed(seed)
    o = Oracle(DDL, arrow=arrow)
    for sql in VIEWS:
        o.view(sql)
    live: list[tuple[Any, ...]] = []
    for _ in range(8):
        ins = [_row() for _ in range(random.randrange(0, 40))]
        dels = random.sample(live, min(len(live), random.randrange(0, 15)))
        for r in dels:
            live.remove(r)
        live.extend(ins)
        changes: list[Any] = []
        if ins:
            changes.append(Ins("t", ins))
        if dels:
            changes.append(Del("t", dels))
        o.commit(changes)
    o.commit([Del("t", list(live))])  # empty again


def test_explain_shows_classes_only_where_read_by_literals() -> None:
    db = dsql.Database()
    db.execute(DDL)
    plan = db.explain(VIEWS[0])
    assert "class of s in ('1-URGENT', '2-HIGH')" in plan
    assert "class of m" not in plan  # grouped by: read itself
    for sql in [
        "SELECT k, s FROM t WHERE s <> 'x'",  # projected, and not held to literals
        "SELECT k FROM t WHERE s LIKE 'x%' OR s = 'y'",  # LIKE reads the text
        "SELECT k, s < 'b' FROM t",  # order of strings
        "SELECT k, s = m FROM t",  # compared with another column
        "SELECT k, upper(s) = 'X' FROM t",  # a function of it
        "SELECT k FROM t ORDER BY s LIMIT 2",
    ]:
        assert "class of" not in db.explain(sql), sql


def _expected(ss: list[Any]) -> list[tuple[Any, ...]]:
    return sorted(
        (i, None if s is None else s == "2-HIGH", None if s is None else s in ("", "é"))
        for i, s in enumerate(ss)
    )


def _arrays(values: list[Any]) -> list[pa.Array]:
    plain = pa.array(values, pa.string())
    padded = pa.array(["pad", *values, "pad"], pa.string()).slice(1, len(values))
    # NULL slots whose bytes spell a literal: built from buffers by hand
    filled = ["2-HIGH" if v is None else v for v in values]
    base = pa.array(filled, pa.string())
    valid = pa.array([v is not None for v in values], pa.bool_())
    nulls_spelled = pa.StringArray.from_buffers(
        len(values), base.buffers()[1], base.buffers()[2], valid.buffers()[1]
    )
    return [
        plain,
        padded,
        pa.array(values, pa.large_string()),
        pa.array(values, pa.string()).dictionary_encode(),
        nulls_spelled,
    ]


@pytest.mark.parametrize("which", range(5))
def test_arrow_layouts(which: int) -> None:
    random.seed(which)
    values = [random.choice(VALUES) for _ in range(300)]
    if which == 4:
        values[-1] = "2-HIGH"  # a literal ends the data buffer
    db = dsql.Database()
    db.execute("CREATE TABLE u (i BIGINT, s STRING)")
    v = db.view("SELECT i, s = '2-HIGH' AS h, s IN ('', 'é') AS e FROM u")
    assert "class of s" in db.explain("SELECT i, s = '2-HIGH' AS h, s IN ('', 'é') AS e FROM u")
    arr = _arrays(values)[which]
    table = pa.table({"i": pa.array(range(len(values)), pa.int64()), "s": arr})
    db.insert("u", table)
    db.commit()
    assert sorted(v.rows()) == _expected(values)
    # rows taken by a filter on another column first
    w = db.view("SELECT i, s = '2-HIGH' AS h, s IN ('', 'é') AS e FROM u WHERE i % 3 = 1")
    assert sorted(w.rows()) == [r for r in _expected(values) if r[0] % 3 == 1]
    db.delete("u", table.slice(0, 100))
    db.commit()
    assert sorted(v.rows()) == _expected(values)[100:]


def test_two_literal_sets_and_a_plain_read_share_a_table() -> None:
    db = dsql.Database()
    db.execute("CREATE TABLE u (i BIGINT, s STRING)")
    a = db.view("SELECT i FROM u WHERE CASE WHEN s = 'a' THEN true ELSE false END")
    b = db.view("SELECT i, s IN ('b', 'c') FROM u")
    c = db.view("SELECT i, s FROM u")
    rows = [(1, "a"), (2, "b"), (3, "c"), (4, None), (5, "ab"), (6, "a")]
    db.insert("u", rows)
    db.commit()
    assert sorted(a.rows()) == [(1,), (6,)]
    assert sorted(b.rows()) == [(1, False), (2, True), (3, True), (4, None), (5, False), (6, False)]
    assert sorted(c.rows(), key=lambda r: r[0]) == rows
    db.delete("u", [(6, "a"), (2, "b")])
    db.commit()
    assert sorted(a.rows()) == [(1,)]
    assert sorted(b.rows()) == [(1, False), (3, True), (4, None), (5, False)]
    # a one-off query reads the stored rows the same way
    assert sorted(db.query("SELECT i, s = 'c' FROM u")) == [
        (1, False),
        (3, True),
        (4, None),
        (5, False),
    ]


# -- strings held to literals by a view's condition -------------------------------------

#: views whose condition holds ``s`` (or ``m``) to a few literals and which then read the
#: string itself: projected, grouped, joined on, ordered, matched, measured
HELD = [
    "SELECT k, s FROM t WHERE s = '1-URGENT'",
    "SELECT s, count(*), sum(x) FROM t WHERE s IN ('2-HIGH', 'é', NULL) GROUP BY s",
    "SELECT s, m, k FROM t WHERE s IN ('', 'ABCDEFGHIJKL') AND m IN ('x', 'y') AND x > 1",
    "SELECT upper(s), length(s), s LIKE '%G%' FROM t WHERE s IN ('2-HIGH', '1-URGENT')",
    "SELECT t.k, t.s, u.v FROM t JOIN u ON t.s = u.s WHERE t.s IN ('1-URGENT', '2-HIGH', 'é')",
    "SELECT u.v, t.s FROM u LEFT JOIN t ON t.k = u.k AND t.s = 'é'",
    "SELECT s FROM t WHERE s = '2-HIGH' AND s IN ('1-URGENT', '2-HIGH') ORDER BY s LIMIT 3",
    "SELECT s, count(*) FROM t WHERE s = 'é' AND s = '' GROUP BY s",
    "SELECT s || '!' FROM t WHERE s IN ('1-URGENT', '2-HIGH') OR k = 1",
]


@pytest.mark.parametrize("arrow", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_held_strings_against_duckdb(seed: int, arrow: bool) -> None:
    """Batches large and small, so that the filter keeps most rows of some (their classes
    read on the kept rows in place) and few of others (the other columns taken out)."""
    random.seed(seed)
    o = Oracle([DDL, "CREATE TABLE u (k INTEGER, s VARCHAR, v INTEGER)"], arrow=arrow)
    for sql in HELD:
        o.view(sql)
    live: list[tuple[Any, ...]] = []
    urows: list[tuple[Any, ...]] = []
    for step in range(10):
        size = random.choice([0, 3, 40, 120])
        if step % 3 == 2:  # mostly literal strings: the filter keeps most rows
            ins = [(random.randrange(5), random.choice(LITS), "x", 2) for _ in range(size)]
        else:
            ins = [_row() for _ in range(size)]
        dels = random.sample(live, min(len(live), random.randrange(0, 25)))
        for r in dels:
            live.remove(r)
        live.extend(ins)
        uins = [(random.randrange(5), random.choice(VALUES), step) for _ in range(3)]
        udel = urows[:1] if step % 2 else []
        urows = [r for r in urows if r not in udel] + uins
        changes: list[Any] = [Ins("u", uins)]
        if udel:
            changes.append(Del("u", udel))
        if ins:
            changes.append(Ins("t", ins))
        if dels:
            changes.append(Del("t", dels))
        o.commit(changes)
    o.commit([Del("t", list(live)), Del("u", list(urows))])  # empty again


def test_explain_shows_strings_held_to_literals() -> None:
    db = dsql.Database()
    db.execute(DDL)
    cases = {
        "SELECT k, s FROM t WHERE s = 'x'": "class of s in ('x')",
        "SELECT s, count(*) FROM t WHERE s IN ('b', NULL, 'a', 'b') GROUP BY s": (
            "class of s in ('b', 'a')"
        ),
        "SELECT s FROM t WHERE s IN ('a', 'b', 'c') AND s <> 'z' AND s IN ('c', 'a')": (
            "class of s in ('a', 'c')"
        ),
    }
    for sql, shown in cases.items():
        assert shown in db.explain(sql), sql
    for sql in [
        "SELECT s FROM t WHERE s = 'a' OR k = 1",  # not every row held
        "SELECT s FROM t WHERE s LIKE 'a'",
        "SELECT s FROM t WHERE NOT s IN ('a', 'b')",
        "SELECT s FROM t WHERE s = m",
        "SELECT s FROM t WHERE s IN ('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i')",  # many
    ]:
        assert "class of s" not in db.explain(sql), sql


def test_held_strings_on_arrow_layouts() -> None:
    """The kept rows' classes read on slices, ``large_string`` and dictionary arrays, and
    on NULL slots whose bytes spell a literal, through both feeding paths (few and most
    rows kept)."""
    random.seed(7)
    for which in range(5):
        for share in (0.05, 0.9):
            values = [
                random.choice(["2-HIGH", "é"]) if random.random() < share else random.choice(VALUES)
                for _ in range(400)
            ]
            db = dsql.Database()
            db.execute("CREATE TABLE u (i BIGINT, s STRING)")
            v = db.view("SELECT i, s FROM u WHERE s IN ('2-HIGH', 'é')")
            table = pa.table(
                {"i": pa.array(range(len(values)), pa.int64()), "s": _arrays(values)[which]}
            )
            db.insert("u", table)
            db.commit()
            want = [(i, s) for i, s in enumerate(values) if s in ("2-HIGH", "é")]
            assert sorted(v.rows()) == want, (which, share)
            db.delete("u", table.slice(0, 150))
            db.commit()
            assert sorted(v.rows()) == [r for r in want if r[0] >= 150], (which, share)


# -- values of a class computed after a join ---------------------------------------------

#: views where a join input computes two or more values from one string's class
OVER_JOINS = [
    # Q12's shape: the CASEs of one side summed per group of the other side's string
    "SELECT u.s, sum(CASE WHEN t.s = '1-URGENT' OR t.s = '2-HIGH' THEN 1 ELSE 0 END) AS hi, "
    "sum(CASE WHEN t.s <> '1-URGENT' AND t.s <> '2-HIGH' THEN 1 ELSE 0 END) AS lo "
    "FROM t JOIN u ON t.k = u.k WHERE u.s IN ('x', 'é', '') GROUP BY u.s",
    # the values projected, beside a residual condition and a value of the other side
    "SELECT t.k, u.v, t.s = 'é' AS e, t.s IS NULL AS n, t.s IN ('', 'x') AS w "
    "FROM t JOIN u ON t.k = u.k AND t.x < u.v",
    # both sides computing values from their classes
    "SELECT t.s = '2-HIGH' AS a, t.s <> '' AS b, u.s = 'x' AS c, u.s IS NULL AS d, "
    "count(*) FROM t JOIN u ON t.k = u.k GROUP BY 1, 2, 3, 4",
    # outer joins: the padded side's values stay NULL
    "SELECT u.v, CASE WHEN t.s = 'é' THEN 1 ELSE 0 END AS e, t.s IS NULL AS n "
    "FROM u LEFT JOIN t ON t.k = u.k",
    "SELECT t.k, coalesce(u.s = 'x', false) AS a, u.s IS NOT NULL AS b "
    "FROM t FULL JOIN u ON t.k = u.k",
]


@pytest.mark.parametrize("arrow", [False, True])
@pytest.mark.parametrize("seed", [4, 5])
def test_classes_over_joins_against_duckdb(seed: int, arrow: bool) -> None:
    random.seed(seed)
    o = Oracle([DDL, "CREATE TABLE u (k INTEGER, s VARCHAR, v INTEGER)"], arrow=arrow)
    for sql in OVER_JOINS:
        o.view(sql)
    live: list[tuple[Any, ...]] = []
    urows: list[tuple[Any, ...]] = []
    for _ in range(8):
        ins = [_row() for _ in range(random.randrange(0, 30))]
        dels = random.sample(live, min(len(live), random.randrange(0, 12)))
        for r in dels:
            live.remove(r)
        live.extend(ins)
        uins = [
            (random.randrange(6), random.choice(["x", "y", "é", "", None]), random.randrange(4))
            for _ in range(random.randrange(0, 6))
        ]
        udel = random.sample(urows, min(len(urows), random.randrange(0, 3)))
        for r in udel:
            urows.remove(r)
        urows.extend(uins)
        changes: list[Any] = []
        for table, rows, kind in (
            ("t", ins, Ins),
            ("t", dels, Del),
            ("u", uins, Ins),
            ("u", udel, Del),
        ):
            if rows:
                changes.append(kind(table, rows))
        o.commit(changes)
    o.commit([Del("t", list(live)), Del("u", list(urows))])


def test_explain_shows_classes_carried_over_joins() -> None:
    db = dsql.Database()
    db.execute(DDL)
    db.execute("CREATE TABLE u (k INTEGER, s VARCHAR, v INTEGER)")
    inner = db.explain(OVER_JOINS[0])
    # the side carries the class, and the two CASEs are computed above the join
    assert "AS _class" in inner
    above, below = inner.split("Join inner", 1)
    assert "AS _e0" in above and "AS _e1" in above
    assert "AS _e0" not in below and "AS _e1" not in below
    # one value of a class: nothing to gain, left where it is
    assert "AS _class" not in db.explain("SELECT u.v, t.s = 'é' AS e FROM t JOIN u ON t.k = u.k")
    # an outer join's padded side: its values are computed after the join already (a CASE
    # of a padded row is the CASE of NULL), and the join keeps its inputs as they are
    left = db.explain(OVER_JOINS[3])
    assert "AS _class" not in left
    assert left.index("case(") < left.index("Join left")
