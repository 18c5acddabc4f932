"""Per-commit savings of ``ddflow.sql`` that must never change an answer, checked against
DuckDB:

- a table's kept rows are frozen chunk by chunk (few objects for the garbage collector) and
  thawed when a delete, an UPDATE or a new view reads them: deletes of rows spread over many
  Arrow and tuple chunks (strings, NULLs, duplicates) find exactly the rows there, and a
  delete of a row that is not there still raises ``DataError`` and changes nothing;
- grouped sums and averages read without looking for empty groups when the row count
  says there are none (groups that empty and come back, NULL arguments, scalar aggregates
  over no rows);
- overflow checks of ``+``, ``-``, ``*`` that derive a result's range from its operands'
  ranges instead of reading it: products near and beyond 64 bits stay exact.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal as D
from typing import Any

import pyarrow as pa
import pytest
from oracle import Del, Ins, Oracle

import ddflow.sql as dsql
from ddflow.core.errors import DataError

DDL = [
    "CREATE TABLE t (k BIGINT NOT NULL, g STRING, f STRING NOT NULL, q DECIMAL(15,2) NOT NULL, "
    "r DECIMAL(15,2), d DATE, i INT)",
]

VIEWS = [
    "SELECT g, f, sum(q) AS sq, sum(q * (1 - r)) AS sd, sum(q * (1 - r) * (1 + r)) AS sc, "
    "count(*) AS c, count(r) AS cr, sum(i) AS si FROM t GROUP BY g, f",
    "SELECT f, sum(r) AS sr, count(*) AS c FROM t WHERE d <= DATE '1995-06-01' GROUP BY f",
    "SELECT sum(q * r) AS v, count(*) AS c, sum(i) AS si FROM t WHERE i < 3",
    "SELECT k, g, q, r FROM t WHERE q > 50",
]


class ArrowOracle(Oracle):
    """The oracle with ddflow fed Arrow tables (DuckDB's types) where ``arrow`` says so,
    every other one with its columns in reverse order (they are matched by name)."""

    def __init__(self, ddl: Any, arrow: bool) -> None:
        super().__init__(ddl, arrow=arrow)
        self.batches = 0

    def given(self, table: str, rows: list[tuple[Any, ...]]) -> Any:
        out = super().given(table, rows)
        if self.arrow:
            self.batches += 1
            if self.batches % 2:  # (columns matched by name)
                out = out.select(self.schemas[table].names[::-1])
        return out


def _rows(rng: random.Random, n: int, k0: int) -> list[tuple[Any, ...]]:
    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.15 else v

    day = dt.date(1994, 6, 1)
    return [
        (
            k0 + rng.randrange(0, n // 2 + 1),  # (keys repeat: duplicates of whole rows too)
            maybe(rng.choice(["A", "N", "R", "long string value"])),
            rng.choice(["F", "O"]),
            D(rng.randrange(100, 10000)) / 100,
            maybe(D(rng.randrange(0, 11)) / 100),
            maybe(day + dt.timedelta(days=rng.randrange(0, 800))),
            maybe(rng.randrange(-5, 6)),
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize("arrow", [False, True], ids=["tuples", "arrow"])
def test_deletes_across_frozen_chunks_equal_duckdb(arrow: bool) -> None:
    """Rows inserted over many commits (one chunk each) are deleted in several chunks at
    once, duplicates one copy at a time; views made later start from the kept rows."""
    rng = random.Random(7 + arrow)
    o = ArrowOracle(DDL, arrow)
    for v in VIEWS[:2]:
        o.view(v)
    live: list[tuple[Any, ...]] = []
    for c in range(24):
        ins = _rows(rng, rng.randrange(0, 30), 10 * c)
        dels = rng.sample(live, min(len(live), rng.randrange(0, 25))) if c % 3 == 2 else []
        for r in dels:
            live.remove(r)
        live.extend(ins)
        o.commit([Ins("t", ins), *([Del("t", dels)] if dels else [])])
        if c == 12:
            for v in VIEWS[2:]:
                o.view(v)  # built from the kept (frozen) rows
    # whole rows twice: the second delete takes the second copy, a third finds none
    dup = live[0]
    o.commit([Ins("t", [dup])])
    o.commit([Del("t", [dup, dup])])
    n = sum(1 for r in o.tables["t"] if r == dup)
    with pytest.raises(DataError):
        o.db.delete("t", [dup] * (n + 1))
    o.commit([])  # the failed delete changed nothing
    # DML that reads the kept rows
    o.db.execute("DELETE FROM t WHERE q > 90")
    o.tables["t"] = [r for r in o.tables["t"] if not r[3] > 90]
    o.commit([])


def test_delete_of_a_missing_row_after_many_chunks_raises() -> None:
    """A row that differs from a kept one in one column only (a string, a NULL, a decimal)
    is not there: ``DataError``, and the table is unchanged."""
    db = dsql.Database()
    db.execute(DDL[0])
    v = db.view("SELECT count(*) AS c, sum(q) AS s FROM t")
    schema = pa.schema(
        [
            ("k", pa.int64()),
            ("g", pa.string()),
            ("f", pa.string()),
            ("q", pa.decimal128(15, 2)),
            ("r", pa.decimal128(15, 2)),
            ("d", pa.date32()),
            ("i", pa.int32()),
        ]
    )
    rows = []
    for c in range(20):
        batch = [
            (c * 10 + j, "A" if j % 2 else None, "F", D(j), D(1) / 100, None, j) for j in range(10)
        ]
        rows.extend(batch)
        db.insert(
            "t",
            pa.Table.from_pylist(
                [dict(zip(schema.names, r, strict=True)) for r in batch], schema=schema
            ),
        )
        db.commit()
    base = rows[55]
    for bad in (
        (base[0], "B", *base[2:]),
        (base[0], base[1], base[2], base[3] + D("0.01"), *base[4:]),
        (base[0], base[1], base[2], base[3], None, *base[5:]),
    ):
        with pytest.raises(DataError):
            db.delete("t", [rows[3], bad])
    db.commit()
    assert v.rows() == [(200, sum(r[3] for r in rows))]
    db.delete("t", [base, rows[3]])
    db.commit()
    assert v.rows() == [(198, sum(r[3] for r in rows) - base[3] - rows[3][3])]


def test_group_sums_when_groups_empty_and_return() -> None:
    """Groups whose rows all go (and come back) and NULL-only arguments: the grouped sums
    and averages read without an emptiness check equal DuckDB's; a scalar aggregate over
    no rows keeps its one row of NULL sums."""
    o = Oracle(
        ["CREATE TABLE a (g INT NOT NULL, x DECIMAL(12,2) NOT NULL, y DECIMAL(12,2), z DOUBLE)"]
    )
    o.view(
        "SELECT g, sum(x) AS sx, sum(y) AS sy, count(*) AS c, sum(z) AS sz, avg(z) AS az "
        "FROM a GROUP BY g"
    )
    o.view(
        "SELECT g, avg(x) AS ax FROM a GROUP BY g",
        duck="SELECT g, CAST(avg(x) AS DECIMAL(16,6)) AS ax FROM a GROUP BY g",
    )
    o.view("SELECT sum(x) AS sx, count(*) AS c, sum(z) AS sz FROM a")
    r1 = [(1, D("1.25"), None, 0.5), (1, D("-3.10"), D("2.00"), None), (2, D("7.00"), None, 1.5)]
    r2 = [(2, D("0.01"), D("-1.00"), None), (3, D("5.55"), None, None)]
    o.commit([Ins("a", r1)])
    o.commit([Ins("a", r2), Del("a", r1[:2])])  # group 1 empties
    o.commit([Del("a", [r1[2], *r2])])  # every group empties
    o.commit([Ins("a", r1[:1])])  # group 1 comes back
    o.commit([Ins("a", r1[1:] + r1[1:])])


@pytest.mark.parametrize(
    "ddl_type,values",
    [
        # decimals whose products need more than 64 bits at some rows, not at others
        (
            "DECIMAL(18,2)",
            # a * b's physical value crosses 2^63 between the first two
            [D("30370004.99"), D("30370005.00"), D("-30370005.00"), D("99999999.99"), D("3.07")],
        ),
        ("DECIMAL(15,2)", [D("99999999.99"), D("-1.00"), D("0.05"), D("12.34")]),
        ("DECIMAL(9,4)", [D("99999.9999"), D("-99999.9999"), D("0.0001"), D("1.0000")]),
    ],
)
def test_products_near_64_bits_equal_duckdb(ddl_type: str, values: list[D]) -> None:
    """``a * (1 - b)``, ``a * (1 - b) * (1 + b)``, ``a * b``: a shared subexpression's
    range is derived once and reused; results that leave 64 bits are still exact."""
    o = Oracle([f"CREATE TABLE p (a {ddl_type} NOT NULL, b {ddl_type})"])
    sql = (
        "SELECT a * (1 - b) AS x, a * (1 - b) * (1 + b) AS y, a * b AS z, a - b AS w, "
        "b + 2 AS u, 3 * a AS v FROM p"
    )
    # (DuckDB multiplies two DECIMAL(p <= 18)s in 64 bits and raises; Spark SQL's result is
    # exact: DuckDB is asked with 38-digit operands)
    wide = "DECIMAL(38," + ddl_type.split(",")[1]
    o.view(
        sql, duck=sql.replace("a *", f"CAST(a AS {wide}) *").replace("a -", f"CAST(a AS {wide}) -")
    )
    rng = random.Random(len(values))
    rows = [(a, b) for a in values for b in [*values, None]]
    o.commit([Ins("p", rows[: len(rows) // 2])])
    o.commit([Ins("p", rows[len(rows) // 2 :]), Del("p", rng.sample(rows[: len(rows) // 2], 3))])


def test_bigint_products_that_overflow_raise() -> None:
    """A BIGINT product beyond 64 bits raises ``DataError`` (DuckDB raises too) whether the
    operand ranges come from the columns or from an inner product; the commit is undone."""
    db = dsql.Database()
    db.execute("CREATE TABLE b (x BIGINT NOT NULL, y BIGINT NOT NULL)")
    v = db.view("SELECT x * (y - 1) AS p, (x * y) * 2 AS q FROM b")
    db.insert("b", [(3, 5), (-7, 2)])
    db.commit()
    assert sorted(v.rows()) == [(-7, -28), (12, 30)]
    db.insert("b", [(2**40, 2**23 + 1)])  # x * (y - 1) fits exactly; (x * y) * 2 does not
    with pytest.raises(DataError):
        db.commit()
    assert sorted(v.rows()) == [(-7, -28), (12, 30)]
    db.insert("b", [(2**40, 2**21)])  # both fit: 2^61, 2^62
    db.commit()
    assert sorted(v.rows()) == [(-7, -28), (12, 30), (2**40 * (2**21 - 1), 2**62)]
