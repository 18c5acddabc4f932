"""TPC-H change streams: the tables inserted in batches, then the refresh functions.

Why it exists: an incremental query is only interesting while its input changes, and TPC-H
defines how its data changes: RF1 inserts new orders with their line items, RF2 deletes
old ones. A stream here is a sequence of *events* (one table row inserted or deleted),
cut into batches of ``batch`` events; batch ``i`` happens at time ``i``.

Order of events:

1. the load: ``region``, ``nation``, ``supplier``, ``part``, ``partsupp``, ``customer``,
   then ``orders`` and ``lineitem`` interleaved by order key (each order just before its
   line items), leaving out the orders held back for RF1 (with their line items);
2. RF1: the held-back orders (the ``refresh`` fraction of orders with the highest keys,
   at least one) inserted with their line items, in the same interleaved order;
3. RF2: as many of the oldest orders (lowest keys) deleted with their line items.

A stream for a query keeps only the events of the tables the query reads, so a batch of
1000 events is 1000 rows of *its* tables. Batches never mix RF1, RF2 and the load: each
phase starts a new batch. ``present(table, t)`` is the set of rows live after batch ``t``
(what DuckDB is given to check the answer at time ``t``).

The invariants: every row is inserted at most once and deleted at most once, after its
insertion; a line item's order is live whenever the line item is (orders come first in
RF1 and go together in RF2).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ddflow.tpch.tables import TABLES, Tables

__all__ = ["Stream", "make_stream"]


@dataclass
class Stream:
    """Events as columns: ``table`` (index into ``tables``), ``row``, ``diff`` (+1/-1) and
    ``time`` (the batch), sorted by time."""

    tables: tuple[str, ...]
    table: np.ndarray
    row: np.ndarray
    diff: np.ndarray
    time: np.ndarray
    batch: int
    phases: dict[str, tuple[int, int]]  # phase -> [first, last + 1) batch

    @property
    def rounds(self) -> int:
        return int(self.time[-1]) + 1 if len(self.time) else 0

    def __len__(self) -> int:
        return len(self.row)

    def events(
        self, table: str, lo_time: int = 0, hi_time: int | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rows, diffs, times)`` of ``table``'s events at times in ``[lo_time, hi_time)``."""
        ti = self.tables.index(table)
        lo = int(np.searchsorted(self.time, lo_time, side="left"))
        hi = (
            len(self.time)
            if hi_time is None
            else int(np.searchsorted(self.time, hi_time, side="left"))
        )
        sel = np.flatnonzero(self.table[lo:hi] == ti) + lo
        return self.row[sel], self.diff[sel], self.time[sel]

    def windows(self, rows_per_window: int) -> Iterator[tuple[int, int]]:
        """``[lo, hi)`` time ranges covering whole batches, about ``rows_per_window`` events
        each (at least one batch): how far input may run ahead of the computation."""
        per = max(1, rows_per_window // max(self.batch, 1))
        for lo in range(0, self.rounds, per):
            yield lo, min(lo + per, self.rounds)

    def present(self, table: str, t: int, nrows: int) -> np.ndarray:
        """Boolean mask of ``table``'s rows live after batch ``t`` (of ``nrows`` rows)."""
        rows, diffs, _ = self.events(table, 0, t + 1)
        count = np.zeros(nrows, dtype=np.int64)
        np.add.at(count, rows, diffs)
        if (count < 0).any() or (count > 1).any():
            raise AssertionError(f"stream invariant broken for {table}")
        return count == 1


def make_stream(
    data: Tables, tables: Sequence[str] = TABLES, batch: int = 10_000, refresh: float = 0.001
) -> Stream:
    """The change stream over ``tables`` (see the module doc) in batches of ``batch`` events;
    ``refresh`` is the fraction of orders RF1 inserts and RF2 deletes (TPC-H: 0.1%)."""
    if batch < 1:
        raise ValueError(f"batch must be at least 1 row, got {batch}")
    if not 0 <= refresh < 0.5:
        raise ValueError(f"refresh must be in [0, 0.5), got {refresh}")
    tables = tuple(t for t in TABLES if t in set(tables))
    if not tables:
        raise ValueError("a stream needs at least one table")
    index = {t: i for i, t in enumerate(TABLES)}

    okey = data.columns["orders"]["o_orderkey"] if "orders" in data.columns else None
    lkey = data.columns["lineitem"]["l_orderkey"] if "lineitem" in data.columns else None
    keys = okey if okey is not None else (np.unique(lkey) if lkey is not None else None)
    held_lo = dropped_hi = None
    if keys is not None and len(keys):
        sk = np.sort(keys)
        k = max(1, int(round(len(sk) * refresh))) if refresh > 0 else 0
        held_lo = sk[-k] if k else sk[-1] + 1  # keys >= held_lo: RF1
        dropped_hi = sk[k - 1] if k else sk[0] - 1  # keys <= dropped_hi: RF2

    load_t, load_r = [], []
    fact: list[tuple[Any, ...]] = []
    for t in tables:
        n = data.rows(t)
        if t == "orders":
            fact.append((np.full(n, index[t]), np.arange(n), okey, np.zeros(n, np.int64)))
        elif t == "lineitem":
            fact.append((np.full(n, index[t]), np.arange(n), lkey, data.columns[t]["l_linenumber"]))
        else:
            load_t.append(np.full(n, index[t]))
            load_r.append(np.arange(n))
    phase_tables, phase_rows, phase_diffs, names = [], [], [], []
    dim_t = np.concatenate(load_t) if load_t else np.empty(0, np.int64)
    dim_r = np.concatenate(load_r) if load_r else np.empty(0, np.int64)
    if fact:
        ft = np.concatenate([f[0] for f in fact])
        fr = np.concatenate([f[1] for f in fact])
        fk = np.concatenate([f[2] for f in fact])
        fl = np.concatenate([f[3] for f in fact])
        order = np.lexsort((fl, fk))
        ft, fr, fk = ft[order], fr[order], fk[order]
        load = fk < held_lo
        rf1 = ~load
        rf2 = fk <= dropped_hi
        phase_tables += [np.concatenate([dim_t, ft[load]]), ft[rf1], ft[rf2]]
        phase_rows += [np.concatenate([dim_r, fr[load]]), fr[rf1], fr[rf2]]
        phase_diffs += [1, 1, -1]
        names += ["load", "rf1", "rf2"]
    else:
        phase_tables.append(dim_t)
        phase_rows.append(dim_r)
        phase_diffs.append(1)
        names.append("load")

    t_parts, r_parts, d_parts, time_parts = [], [], [], []
    phases: dict[str, tuple[int, int]] = {}
    next_time = 0
    for name, pt, pr, pd in zip(names, phase_tables, phase_rows, phase_diffs, strict=True):
        n = len(pr)
        times = next_time + np.arange(n, dtype=np.int64) // batch
        rounds = -(-n // batch)
        phases[name] = (next_time, next_time + rounds)
        next_time += rounds
        t_parts.append(pt.astype(np.int64))
        r_parts.append(pr.astype(np.int64))
        d_parts.append(np.full(n, pd, dtype=np.int64))
        time_parts.append(times)
    table_idx = np.concatenate(t_parts)
    # Tables are named by their index in ``tables`` (the query's own list).
    remap = np.full(len(TABLES), -1, dtype=np.int64)
    for i, t in enumerate(tables):
        remap[index[t]] = i
    return Stream(
        tables,
        remap[table_idx],
        np.concatenate(r_parts),
        np.concatenate(d_parts),
        np.concatenate(time_parts),
        batch,
        phases,
    )
