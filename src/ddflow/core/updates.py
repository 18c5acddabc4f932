"""Columnar update batches: many ``(data, time, diff)`` triples as columns, and consolidation.

``Updates`` holds ``n`` updates: ``data`` is a tuple of 1-d columns (the record's layout),
``times`` an ``int64`` array of shape ``(n, d)`` (flat times), ``diffs`` a diff column of its
``DiffType``. It is a plain value; operators build new ones rather than mutate.

Consolidation sorts by ``(data, time)``, adds the diffs of equal ``(data, time)`` and drops
zero diffs. The result is the canonical form of the same collection history:
``consolidate(consolidate(u)) == consolidate(u)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ddflow.core.columns import (
    Columns,
    Layout,
    Ranges,
    concat_columns,
    const_view,
    int_ranges,
    lex_order,
    pack_small,
    run_starts,
    take_columns,
)
from ddflow.core.diff import I64_MAX, I64_MIN, DiffType, IntDiff, TupleDiff
from ddflow.core.frontier import Antichain
from ddflow.core.time import TimeKind

__all__ = [
    "Updates",
    "accumulated_at",
    "concat_updates",
    "consolidate",
    "held_times",
    "split_complete",
    "take_times",
    "update_records",
]


def take_times(times: np.ndarray, idx: Any) -> np.ndarray:
    """``times[idx]`` for a ``(n, d)`` time column: rows picked by ``ndarray.take`` (fancy
    indexing of a 2-d array is several times slower: 59 against 5 us for 5000 rows), and a
    zero-stride column (a compact batch's one time) copied out of its one row. Boolean
    masks and slices index as usual."""
    if not isinstance(idx, np.ndarray) or idx.dtype.kind not in "iu":
        return times[idx]
    if times.strides[0] == 0 and times.shape[0]:
        out = np.empty((idx.shape[0], times.shape[1]), dtype=times.dtype)
        out[...] = times[:1]
        return out
    return times.take(idx, axis=0)


@dataclass(frozen=True, slots=True)
class Updates:
    """``n`` updates as columns: ``data`` columns, ``times`` (n, d) int64, ``diffs``."""

    data: Columns
    times: np.ndarray
    diffs: Any
    diff_type: DiffType

    def __len__(self) -> int:
        return int(self.times.shape[0])

    def take(self, idx: Any) -> Updates:
        return Updates(
            take_columns(self.data, idx),
            take_times(self.times, idx),
            self.diff_type.take(self.diffs, idx),
            self.diff_type,
        )

    def with_times(self, times: np.ndarray) -> Updates:
        return Updates(self.data, times, self.diffs, self.diff_type)


def concat_updates(parts: Sequence[Updates]) -> Updates:
    """All updates of ``parts`` in one batch (same layout and diff type); every value of
    the data columns is kept exactly (``concat_columns``)."""
    parts = [p for p in parts if len(p)] or list(parts[:1])
    if len(parts) == 1:
        return parts[0]
    width = len(parts[0].data)
    data = tuple(concat_columns([p.data[i] for p in parts]) for i in range(width))
    times = np.concatenate([p.times for p in parts])
    dt = parts[0].diff_type
    return Updates(data, times, dt.concat([p.diffs for p in parts]), dt)


def consolidate(
    u: Updates,
    *,
    runs: bool = False,
    compact: bool = False,
    bounded: bool = False,
) -> Updates:
    """Sort by ``(data, time)``, sum diffs of equal ``(data, time)``, drop zero diffs.

    ``runs=True`` hints that ``u`` is a concatenation of a few sorted runs (a merge).
    ``bounded=True`` says the caller knows no sum of int diffs leaves int64 (a merge, from
    its batches' bounds), which spares the sums their check. ``compact=True`` (for trace
    batches, which store such columns so) returns times that are all equal as a
    zero-stride, read-only view of one row, and does not reorder an integer diff column
    whose diffs are all equal (typically all 1: inserted records).
    """
    n = len(u)
    if n == 0:
        return u
    if n <= SMALL_ROWS:
        small = _consolidate_small(u, compact)
        if small is not None:
            return small
    d = u.times.shape[1]
    tcols = [u.times[:, j] for j in range(d)]
    const_time = n > 0 and bool((u.times == u.times[0]).all())
    cols = list(u.data) + ([] if const_time else tcols)
    ranges = int_ranges(cols)
    if not runs and n >= 256:
        grouped = _consolidate_counting(u, cols, const_time, compact, ranges)
        if grouped is not None:
            return grouped
    order = lex_order(cols, runs=runs, ranges=ranges)
    scols = [c[order] for c in cols]
    starts = run_starts(scols, n)
    dt = u.diff_type
    if compact and _constant_ints(u.diffs):
        sorted_diffs = const_view(u.diffs[:1].copy(), u.diffs.shape)  # any order: equal
    else:
        sorted_diffs = dt.take(u.diffs, order)
    diffs = dt.sum_segments(sorted_diffs, starts, bounded=bounded)
    keep = ~dt.zero_mask(diffs)
    all_kept = bool(keep.all())
    idx = starts if all_kept else starts[keep]
    width = len(u.data)
    data = tuple(scols[:width]) if len(idx) == n else tuple(c[idx] for c in scols[:width])
    if const_time:
        times = _one_time(u.times, len(idx), compact)
    else:
        times = np.stack([c[idx] for c in scols[width:]], axis=1)
    if not all_kept:
        diffs = dt.take(diffs, keep)
    return Updates(data, times.astype(np.int64, copy=False), diffs, dt)


#: updates of at most this many rows are consolidated in Python (``_consolidate_small``)
SMALL_ROWS = 32


def _consolidate_small(u: Updates, compact: bool) -> Updates | None:
    """``consolidate`` of a few updates with integer data and int64 diffs (or tuples of
    them), in Python: the same result (rows sorted by ``(data, time)``, equal rows summed,
    zeros dropped) without numpy's per-call cost, which dominates on a handful of rows.
    None when a column is not integer (the numpy path decides how those compare) or a sum
    leaves int64."""
    dt = u.diff_type
    if type(dt) is IntDiff:
        if u.diffs.dtype != np.int64:
            return None
        parts = None
    elif isinstance(dt, TupleDiff) and dt.ints and all(c.dtype == np.int64 for c in u.diffs):
        m = getattr(u.diffs, "matrix", None)
        parts = (
            m.T.tolist()
            if m is not None
            else [list(r) for r in zip(*(c.tolist() for c in u.diffs), strict=True)]
        )
    else:
        return None
    for c in u.data:
        if c.dtype.kind not in "biu":
            return None
    times = u.times
    tl = [tuple(t) for t in times.tolist()]
    const_time = tl.count(tl[0]) == len(tl)
    keys = zip(*[c.tolist() for c in u.data], tl, strict=True)
    if parts is None:
        acc: dict[tuple[Any, ...], Any] = {}
        for k, v in zip(keys, u.diffs.tolist(), strict=True):
            acc[k] = acc.get(k, 0) + v
        items = sorted(kv for kv in acc.items() if kv[1])
        if items and not all(I64_MIN <= v <= I64_MAX for _, v in items):
            return None
    else:
        acc = {}
        for k, v in zip(keys, parts, strict=True):
            got = acc.get(k)
            acc[k] = v if got is None else [a + b for a, b in zip(got, v, strict=True)]
        items = sorted(kv for kv in acc.items() if any(kv[1]))
        if not all(I64_MIN <= x <= I64_MAX for _, v in items for x in v):
            return None
    m = len(items)
    data = tuple(np.array([k[i] for k, _ in items], dtype=c.dtype) for i, c in enumerate(u.data))
    if const_time:
        out_t = _one_time(times, m, compact)
    else:
        out_t = np.array([k[-1] for k, _ in items], dtype=np.int64).reshape(m, times.shape[1])
    if parts is None:
        diffs: Any = np.array([v for _, v in items], dtype=np.int64)
    else:
        assert isinstance(dt, TupleDiff)
        width = len(dt.parts)
        cols = np.array([v for _, v in items], dtype=np.int64).reshape(m, width).T
        diffs = (
            dt.from_columns(tuple(np.ascontiguousarray(c) for c in cols), m)
            if m
            else tuple(np.empty(0, np.int64) for _ in range(width))
        )
    return Updates(data, out_t, diffs, dt)


def _constant_ints(d: Any) -> bool:
    """Whether ``d`` is a non-empty integer diff array whose values are all equal."""
    if not isinstance(d, np.ndarray) or d.ndim != 1 or not len(d) or d.dtype.kind not in "iu":
        return False
    return d.strides[0] == 0 or bool(d[0] == d[-1] and (d == d[0]).all())


def _one_time(times: np.ndarray, n: int, compact: bool) -> np.ndarray:
    """``n`` copies of ``times[0]``: a zero-stride view of a copied row if ``compact``."""
    row = times[:1].copy()
    return const_view(row, (n, times.shape[1])) if compact else row.repeat(n, axis=0)


def _consolidate_counting(
    u: Updates,
    cols: list[np.ndarray],
    const_time: bool,
    compact: bool = False,
    ranges: Ranges | None = None,
) -> Updates | None:
    """``consolidate`` without sorting, for batches whose (data, time) rows pack into at
    most ``n / 4`` codes (aggregates over few groups, such as TPC-H Q1's exploded line
    items): rows are grouped by their code and diffs added per group with ``np.add.at``.
    None when the rows do not pack that small or the diff type has no grouped sum."""
    n = len(u)
    small = pack_small(cols, max(n // 4, 1), ranges)
    if small is None:
        return None
    codes, span = small
    counts = np.bincount(codes, minlength=span)
    present = counts.nonzero()[0]
    if len(present) == span:
        group = codes
    else:
        rank = np.zeros(span, dtype=np.int64)
        rank[present] = np.arange(len(present))
        group = rank[codes]
    dt = u.diff_type
    diffs = dt.sum_groups(u.diffs, group, len(present))
    if diffs is None:
        return None
    rep = np.empty(len(present), dtype=np.int64)
    rep[group] = np.arange(n)  # any row of a group stands for it (they are all equal)
    keep = ~dt.zero_mask(diffs)
    if not keep.all():
        rep = rep[keep]
        diffs = dt.take(diffs, keep.nonzero()[0])
    data = tuple(c.take(rep, axis=0) for c in u.data)
    times = _one_time(u.times, len(rep), compact) if const_time else take_times(u.times, rep)
    return Updates(data, times.astype(np.int64, copy=False), diffs, dt)


def held_times(held: Sequence[Updates]) -> np.ndarray | None:
    """The times of updates an operator holds back (None when it holds none): what it
    reports as ``outstanding_times``."""
    if not held:
        return None
    if len(held) == 1:
        return held[0].times
    return np.concatenate([u.times for u in held])


def split_complete(
    parts: Sequence[Updates], frontier: Antichain
) -> tuple[Updates | None, list[Updates]]:
    """Split held updates into those the frontier has passed (complete) and the rest."""
    if not parts:
        return None, []
    u = concat_updates(parts)
    beyond = frontier.beyond_mask(u.times)
    if not beyond.any():
        return u, []
    if beyond.all():
        return None, [u]
    return u.take((~beyond).nonzero()[0]), [u.take(beyond.nonzero()[0])]


def update_records(
    u: Updates | None, layout: Layout | None, kind: TimeKind
) -> list[tuple[Any, Any, Any]]:
    """``u``'s updates as ``(record, time, diff)`` values, sorted by time then data."""
    if u is None or layout is None or len(u) == 0:
        return []
    u = u.take(lex_order([u.times[:, j] for j in range(u.times.shape[1])] + list(u.data)))
    recs = layout.to_records(u.data)
    times = [kind.unflatten(t) for t in u.times.tolist()]
    return list(zip(recs, times, u.diff_type.to_values(u.diffs), strict=True))


def accumulated_at(
    u: Updates | None, layout: Layout | None, kind: TimeKind, t: Any
) -> dict[Any, Any]:
    """The collection ``u`` describes at time ``t``: record -> accumulated diff (no zeros)."""
    if u is None or layout is None or len(u) == 0:
        return {}
    ft = np.array(kind.flatten(t), dtype=np.int64)
    sel = u.take(np.flatnonzero(np.all(u.times <= ft, axis=1)))
    if len(sel) == 0:
        return {}
    sel = consolidate(sel.with_times(np.zeros_like(sel.times)))
    recs = layout.to_records(sel.data)
    return dict(zip(recs, sel.diff_type.to_values(sel.diffs), strict=True))
