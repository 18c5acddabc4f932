"""Deletes of many rows at once, checked against DuckDB after every commit.

A delete finds each given row among the table's kept rows by comparing whole rows (NULL
equal to NULL), its copies counted once per distinct row; the rows' strings are compared as
they came, so deleting rows never gives their strings dictionary codes. Covered here:
thousands of rows with long strings deleted in one call, given as tuples and as Arrow;
copies of one row inside the delete itself; rows that differ from a kept one only in a
string, a NULL or a decimal; a row repeated so often that pairing copies would be slow; a
delete and an insert of the same rows in one commit.
"""

from __future__ import annotations

import random
from decimal import Decimal as D
from typing import Any

import pytest
from oracle import Del, Ins, Oracle

import ddflow.sql as dsql
from ddflow.core.errors import DataError

DDL = [
    "CREATE TABLE t (k BIGINT NOT NULL, g STRING, c STRING NOT NULL, q DECIMAL(15,2), d DATE)",
]

VIEWS = [
    "SELECT g, count(*) AS n, sum(q) AS s, count(q) AS nq FROM t GROUP BY g",
    "SELECT k, g, q FROM t WHERE q > 40",
    "SELECT count(*) AS n, count(DISTINCT c) AS dc, sum(k) AS sk FROM t",
]


def _rows(rng: random.Random, n: int, k0: int) -> list[tuple[Any, ...]]:
    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.2 else v

    return [
        (
            k0 + rng.randrange(0, max(n // 3, 1)),  # keys repeat; whole rows do too
            maybe(rng.choice(["A", "B", "a long group name " * 3])),
            rng.choice([f"comment {rng.randrange(0, 50)}", "x" * rng.randrange(0, 40)]),
            maybe(D(rng.randrange(0, 10000)) / 100),
            None,
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize("arrow", [False, True], ids=["tuples", "arrow"])
def test_bulk_deletes_equal_duckdb(arrow: bool) -> None:
    rng = random.Random(11 + arrow)
    o = Oracle(DDL, arrow=arrow)
    for v in VIEWS:
        o.view(v)
    first = _rows(rng, 3000, 0)
    o.commit([Ins("t", first)])
    # a third of the rows in one call, the delete holding copies of some rows itself
    live = list(first)
    rng.shuffle(live)
    gone = live[:1000]
    o.commit([Del("t", gone)])
    rest = live[1000:]
    # an update of many rows (delete + insert in one commit), the new rows near-misses of
    # the old ones (one string, a NULL or a decimal changed)
    old = rest[:500]
    new = [
        (r[0], r[1], r[2] + "!", r[3], r[4])
        if i % 3 == 0
        else (r[0], None if r[1] is not None else "A", r[2], r[3], r[4])
        if i % 3 == 1
        else (r[0], r[1], r[2], None if r[3] is None else r[3] + D("0.01"), r[4])
        for i, r in enumerate(old)
    ]
    o.commit([Del("t", old), Ins("t", new)])
    # everything left, and the same rows back again
    everything = [*rest[500:], *new]
    o.commit([Del("t", everything)])
    o.commit([Ins("t", everything)])


def test_delete_of_more_copies_than_kept_raises_and_changes_nothing() -> None:
    db = dsql.Database()
    db.execute(DDL[0])
    v = db.view("SELECT c, count(*) AS n FROM t GROUP BY c")
    row = (1, None, "same", D("1.50"), None)
    near = (1, None, "same", D("1.51"), None)
    others = [(i, "A", f"row {i}", None, None) for i in range(2, 400)]
    db.insert("t", [row, row, near, *others])
    db.commit()
    with pytest.raises(DataError):
        db.delete("t", [*others[:100], row, row, row])  # three copies asked, two kept
    with pytest.raises(DataError):
        db.delete("t", [(1, None, "same", D("1.52"), None)])
    db.commit()
    assert sorted(v.rows()) == sorted([("same", 3), *((f"row {i}", 1) for i in range(2, 400))])
    db.delete("t", [row, *others[:100], row])
    db.commit()
    assert sorted(v.rows()) == sorted([("same", 1), *((f"row {i}", 1) for i in range(102, 400))])


def test_a_row_repeated_thousands_of_times() -> None:
    """Copies of one row too many to pair one by one (the delete sorts full records)."""
    db = dsql.Database()
    db.execute(DDL[0])
    v = db.view("SELECT g, c, count(*) AS n, sum(q) AS s FROM t GROUP BY g, c")
    row = (7, "G", "the same comment", D("2.25"), None)
    db.insert("t", [row] * 3000 + [(8, "G", "other", None, None)])
    db.commit()
    db.delete("t", [row] * 2999)
    db.commit()
    assert sorted(v.rows()) == [("G", "other", 1, None), ("G", "the same comment", 1, D("2.25"))]
    with pytest.raises(DataError):
        db.delete("t", [row] * 2)
    db.commit()
    db.delete("t", [row])
    db.commit()
    assert v.rows() == [("G", "other", 1, None)]


def test_deleted_strings_get_no_codes() -> None:
    """Deleting rows whose strings no view reads adds nothing to the string dictionary."""
    db = dsql.Database()
    db.execute(DDL[0])
    v = db.view("SELECT k, q FROM t WHERE q > 1")
    rows = [(i, None, f"a comment no view reads, number {i}", D(i % 7), None) for i in range(2000)]
    db.insert("t", rows)
    db.commit()
    before = len(db.strings)
    db.delete("t", rows[::2])
    db.commit()
    assert len(db.strings) == before
    assert sorted(v.rows()) == sorted((r[0], r[3]) for r in rows[1::2] if r[3] > 1)


@pytest.mark.parametrize("arrow", [False, True])
def test_deletes_find_rows_by_the_key_ranges_of_chunks(arrow: bool) -> None:
    """Rows coming in key order, chunk by chunk (each chunk's least and greatest key are
    noted as it comes, for Arrow integer columns), then deleted across chunks: rows that
    are there go, a row that is not raises and changes nothing, and after enough deletes
    the kept rows are packed again (new chunks, new key ranges) and deletes still find
    them."""
    import pyarrow as pa

    db = dsql.Database()
    db.execute("CREATE TABLE e (k BIGINT NOT NULL, s STRING, v INTEGER)")
    view = db.view("SELECT count(*), sum(k), sum(v) FROM e")
    live: list[tuple[Any, ...]] = []

    def feed(rows: list[tuple[Any, ...]], op: Any) -> None:
        if arrow:
            op(
                "e",
                pa.table(
                    {
                        "k": pa.array([r[0] for r in rows], pa.int64()),
                        "s": pa.array([r[1] for r in rows], pa.string()),
                        "v": pa.array([r[2] for r in rows], pa.int32()),
                    }
                ),
            )
        else:
            op("e", rows)

    rng = random.Random(11)
    for chunk in range(30):
        rows = [
            (chunk * 100 + i, rng.choice(["a", None, "bb"]), rng.randrange(9)) for i in range(100)
        ]
        feed(rows, db.insert)
        live += rows
        db.commit()
    for step in range(6):
        gone = rng.sample(live, 300)
        feed(gone, db.delete)
        for r in gone:
            live.remove(r)
        db.commit()
        want = (len(live), sum(r[0] for r in live) or None, sum(r[2] for r in live) or None)
        assert view.rows() == [want], step
        with pytest.raises(DataError):
            feed([gone[0]], db.delete)  # (deleted already)
        assert view.rows() == [want], step
        # one row alone, the least or greatest key of its chunk: its chunk's key range must
        # hold it exactly
        edge = min((r for r in live if r[0] % 100 in (0, 99)), key=lambda r: r[0], default=None)
        if edge is not None:
            feed([edge], db.delete)
            live.remove(edge)
            db.commit()
            assert view.rows()[0][0] == len(live), step
