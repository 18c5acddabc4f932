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
        "SELECT k, s FROM t WHERE s = 'x'",  # projected as it is
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
