"""TPC-H query 1 as a dataflow: the aggregates of each ``(returnflag, linestatus)`` group moved
into a tuple diff with ``explode`` and added up by ``count_total`` (the total-order count
over tuple diffs, an abelian group).

Why it exists: Q1 is the standard benchmark for ``count_total`` with vector diffs, and its
answer can be checked exactly against SQL engines (DuckDB, Spark SQL) on the same Parquet.

The dataflow's input records are ``(returnflag, linestatus, quantity, extendedprice,
discount, tax, shipdate)`` ints as in ``lineitem_q1.parquet`` (see ``ddflow.tpch.data``); its
output records are ``((returnflag, linestatus), (count, sum_qty, sum_base_price,
sum_disc_price, sum_charge, sum_disc))`` with diff 1, one per non-empty group, where every
sum is an exact integer at a fixed scale:

    sum_qty        = sum quantity                                  (units)
    sum_base_price = sum extendedprice                             (cents, 1e-2)
    sum_disc_price = sum extendedprice * (100 - discount)          (1e-4)
    sum_charge     = sum extendedprice * (100 - discount) * (100 + tax)   (1e-6)
    sum_disc       = sum discount                                  (hundredths, 1e-2)

Results (``q1_answer`` and the references) are rows in Q1's column order with
``decimal.Decimal`` sums at SQL's scales (2, 2, 4, 6) and averages rounded half-up to 6
places (``AVG_PLACES``, the scale of Spark's ``avg(decimal(15, 2))``), sorted by flag and
status. Sums and counts from ``q1_answer``, DuckDB and Spark are equal exactly; Spark's
averages too (it divides decimals). DuckDB's ``avg`` of a decimal is a double, so its
rounded average could differ in the last place if the exact average lay within ~1e-12 of a
rounding midpoint; ``q1_mismatches`` compares averages with a tolerance of one unit in the
last place for that reason (the SF 0.01 test data compare equal outright).

Deleted rows: ``deleted_row_ranges`` names ``lineitem_q1`` rows (``row`` indices, which count
line items in ``(l_orderkey, l_linenumber)`` order) as half-open ranges ``[lo, hi)``. The
references turn each range into a key range, ``(l_orderkey, l_linenumber)`` from the key of
row ``lo`` up to (excluding) the key of row ``hi``, and leave those rows out in SQL; this is
exact because the key is unique.
"""

from __future__ import annotations

import datetime as _dt
import decimal
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ddflow.tpch.data import Q1_COLUMNS

if TYPE_CHECKING:
    from ddflow.dataflow.collection import Collection

__all__ = [
    "AVG_PLACES",
    "Q1_HEADER",
    "Q1_SQL",
    "SHIP_CUTOFF",
    "format_q1",
    "q1",
    "q1_answer",
    "q1_input_columns",
    "q1_mismatches",
    "q1_reference_duckdb",
    "q1_reference_spark",
]

#: ``date '1998-12-01' - interval '90' day`` = 1998-09-02, in days since 1970-01-01 (10471).
SHIP_CUTOFF = (_dt.date(1998, 9, 2) - _dt.date(1970, 1, 1)).days

#: Decimal places of the averages in result rows.
AVG_PLACES = 6

#: Q1's output columns, in order.
Q1_HEADER = (
    "l_returnflag",
    "l_linestatus",
    "sum_qty",
    "sum_base_price",
    "sum_disc_price",
    "sum_charge",
    "avg_qty",
    "avg_price",
    "avg_disc",
    "count_order",
)

#: TPC-H Q1 (delta 90 days); ``{table}`` is the lineitem relation, ``{where}`` extra conjuncts.
Q1_SQL = """
select
    l_returnflag,
    l_linestatus,
    sum(l_quantity) as sum_qty,
    sum(l_extendedprice) as sum_base_price,
    sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
    sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,
    avg(l_quantity) as avg_qty,
    avg(l_extendedprice) as avg_price,
    avg(l_discount) as avg_disc,
    count(*) as count_order
from
    {table}
where
    l_shipdate <= date '1998-12-01' - interval '90' day{where}
group by
    l_returnflag,
    l_linestatus
order by
    l_returnflag,
    l_linestatus
"""

_SCALES = (2, 2, 4, 6)  # sum_qty, sum_base_price, sum_disc_price, sum_charge, as in SQL
_AVG_QUANTUM = Decimal(1).scaleb(-AVG_PLACES)
# Exact decimal arithmetic: 80 digits hold any int64 sum at any scale used here, and a trap
# on Inexact turns a silent rounding into an error.
_EXACT = decimal.Context(prec=80, rounding=decimal.ROUND_HALF_UP, traps=[decimal.Inexact])
# Averages: one rounding, half-up, of a quotient held to 60 digits (far more than the
# distance of any ``sum / count`` from a 6-place midpoint needs).
_ROUND = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_UP)

Row = tuple[Any, ...]


def q1_input_columns(table: pa.Table) -> tuple[np.ndarray, ...]:
    """The seven int64 record columns of a ``lineitem_q1`` table, for ``insert_columns``."""
    return tuple(
        table.column(name).to_numpy().astype(np.int64, copy=False) for name in Q1_COLUMNS[1:]
    )


def q1(lineitem: Collection) -> Collection:
    """Q1 over records ``(returnflag, linestatus, quantity, extendedprice, discount, tax,
    shipdate)``: ``((returnflag, linestatus), (count, sum_qty, sum_base_price,
    sum_disc_price, sum_charge, sum_disc))`` per group (needs int times: ``count_total``)."""
    cutoff = SHIP_CUTOFF

    def to_diffs(cols: tuple[np.ndarray, ...]) -> tuple[Any, Any, Any]:
        flag, status, qty, price, disc, tax, ship = cols
        disc_price = price * (100 - disc)
        # int64 headroom: per row the charge is <= 10_494_950 cents * 100 * 108 ~ 1.1e11. At
        # SF 1 the largest group (N, O: 2.92 M rows) has sum_charge 1.104e17, 83x below
        # 2**63 ~ 9.22e18 (sum_disc_price 1.06e15); group sums grow linearly with the scale
        # factor, so int64 diffs are exact up to about SF 80 and overflow (silently) beyond.
        return (
            (flag, status),
            (
                np.ones(len(qty), dtype=np.int64),
                qty,
                price,
                disc_price,
                disc_price * (100 + tax),
                disc,
            ),
            ship <= cutoff,
        )

    # The WHERE clause is explode's keep mask: one pass over the batch instead of a filter
    # that copies all seven columns first (measured: about 1.3x faster at SF 1).
    return lineitem.explode(to_diffs, vectorized=True, name="q1_explode").count_total(
        name="q1_count_total"
    )


def _avg(x: Decimal | float) -> Decimal:
    """An average rounded half-up to ``AVG_PLACES`` (floats from their exact binary value)."""
    return Decimal(x).quantize(_AVG_QUANTUM, context=_ROUND)


def _sum(x: Decimal | int, scale: int) -> Decimal:
    """A sum as a Decimal with exactly ``scale`` places (raises if that would round)."""
    return Decimal(x).quantize(Decimal(1).scaleb(-scale), context=_EXACT)


def q1_answer(accumulated: Mapping[Any, Any]) -> list[Row]:
    """Q1's result rows from the accumulated output of ``q1`` (``Capture.at(t)``: record ->
    diff). Raises ``ValueError`` if a record's diff is not 1 or a group's count is not
    positive (not the output of ``q1`` over a collection of line items)."""
    rows = []
    for record, diff in accumulated.items():
        (flag, status), sums = record
        if int(diff) != 1:
            raise ValueError(f"q1 output record {record!r} has diff {diff!r}, expected 1")
        count, qty, price, disc_price, charge, disc = (int(s) for s in sums)
        if count <= 0:
            raise ValueError(f"q1 group {(flag, status)!r} has count {count}")
        with decimal.localcontext(_EXACT):
            rows.append(
                (
                    chr(int(flag)),
                    chr(int(status)),
                    _sum(qty, 2),
                    _sum(Decimal(price).scaleb(-2), 2),
                    _sum(Decimal(disc_price).scaleb(-4), 4),
                    _sum(Decimal(charge).scaleb(-6), 6),
                    _avg(_exact_div(Decimal(qty), count)),
                    _avg(_exact_div(Decimal(price).scaleb(-2), count)),
                    _avg(_exact_div(Decimal(disc).scaleb(-2), count)),
                    count,
                )
            )
    return sorted(rows)


def _exact_div(a: Decimal, n: int) -> Decimal:
    """``a / n`` to 60 significant digits (rounded once more by ``_avg``)."""
    return _ROUND.divide(a, Decimal(n))


def _normalize(row: Sequence[Any]) -> Row:
    """A SQL result row (Decimal or float averages) in the rows' common format."""
    flag, status, qty, base, disc_price, charge, aq, ap, ad, count = row
    sums = tuple(
        _sum(Decimal(v), s) for v, s in zip((qty, base, disc_price, charge), _SCALES, strict=True)
    )
    return (str(flag), str(status), *sums, _avg(aq), _avg(ap), _avg(ad), int(count))


# --- deleted rows -> key ranges ----------------------------------------------------------

RowRanges = int | Iterable[tuple[int, int]] | None


def _ranges(deleted: RowRanges) -> list[tuple[int, int]]:
    """``deleted_row_ranges`` as non-empty ``[lo, hi)`` pairs (an int ``D`` means ``[0, D)``)."""
    if deleted is None:
        return []
    pairs = [(0, deleted)] if isinstance(deleted, int) else [tuple(p) for p in deleted]
    out = []
    for lo, hi in pairs:
        if not 0 <= lo <= hi:
            raise ValueError(f"deleted row range [{lo}, {hi}) is not 0 <= lo <= hi")
        if lo < hi:
            out.append((int(lo), int(hi)))
    return out


def _keys_where(raw_lineitem: str | Path, deleted: RowRanges) -> str:
    """SQL conjuncts leaving out the rows of ``deleted`` (row index = rank of the key)."""
    ranges = _ranges(deleted)
    if not ranges:
        return ""
    keys = pq.read_table(raw_lineitem, columns=["l_orderkey", "l_linenumber"])
    okey = keys.column("l_orderkey").to_numpy()
    line = keys.column("l_linenumber").to_numpy()
    order = np.lexsort((line, okey))
    n = len(order)

    def at_least(i: int) -> str:  # key >= key of row i
        a, b = int(okey[order[i]]), int(line[order[i]])
        return f"(l_orderkey > {a} or (l_orderkey = {a} and l_linenumber >= {b}))"

    conds = []
    for lo, hi in ranges:
        if lo >= n:
            continue
        cond = at_least(lo)
        if hi < n:
            cond += f" and not {at_least(hi)}"
        conds.append(f"\n    and not ({cond})")
    return "".join(conds)


def q1_reference_duckdb(
    raw_lineitem: str | Path, deleted_row_ranges: RowRanges = None
) -> list[Row]:
    """Q1 by DuckDB on the raw ``tpchgen-cli`` lineitem Parquet, without the rows of
    ``deleted_row_ranges`` (see the module doc), in ``q1_answer``'s format."""
    import duckdb

    path = str(raw_lineitem).replace("'", "''")
    sql = Q1_SQL.format(
        table=f"read_parquet('{path}')", where=_keys_where(raw_lineitem, deleted_row_ranges)
    )
    with duckdb.connect() as con:
        return [_normalize(r) for r in con.execute(sql).fetchall()]


def q1_reference_spark(
    spark: Any, raw_lineitem: str | Path, deleted_row_ranges: RowRanges = None
) -> list[Row]:
    """Q1 by Spark SQL (``spark``: a SparkSession) on the raw lineitem Parquet, without the
    rows of ``deleted_row_ranges``, in ``q1_answer``'s format. The path must also be readable
    by this process (the deleted ranges' keys are looked up locally with pyarrow)."""
    view = "ddflow_q1_lineitem"
    spark.read.parquet(str(raw_lineitem)).createOrReplaceTempView(view)
    try:
        sql = Q1_SQL.format(table=view, where=_keys_where(raw_lineitem, deleted_row_ranges))
        return [_normalize(tuple(r)) for r in spark.sql(sql).collect()]
    finally:
        spark.catalog.dropTempView(view)


def q1_mismatches(
    got: Sequence[Row], want: Sequence[Row], avg_tolerance: Decimal = _AVG_QUANTUM
) -> list[str]:
    """Differences between two Q1 results: groups, sums and counts must be equal exactly,
    averages within ``avg_tolerance``. An empty list means they agree."""
    out = []
    g = {r[:2]: r for r in got}
    w = {r[:2]: r for r in want}
    for key in sorted(g.keys() ^ w.keys()):
        out.append(f"group {key}: only in {'got' if key in g else 'want'}")
    for key in sorted(g.keys() & w.keys()):
        for i, name in enumerate(Q1_HEADER[2:], start=2):
            a, b = g[key][i], w[key][i]
            same = abs(a - b) <= avg_tolerance if name.startswith("avg_") else a == b
            if not same:
                out.append(f"group {key} {name}: got {a}, want {b}")
    return out


def format_q1(rows: Sequence[Row]) -> str:
    """Q1 rows as an aligned text table (flags left-aligned, numbers right-aligned)."""
    cells = [list(Q1_HEADER)] + [[str(v) for v in r] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(Q1_HEADER))]

    def line(c: list[str]) -> str:
        return "  ".join(
            v.ljust(wd) if i < 2 else v.rjust(wd)
            for i, (v, wd) in enumerate(zip(c, widths, strict=True))
        ).rstrip()

    rule = "  ".join("-" * wd for wd in widths)
    return "\n".join([line(cells[0]), rule] + [line(c) for c in cells[1:]])
