"""``count_total``, ``distinct_total``, ``threshold_total``: counting for totally ordered time.

Seed 000's algorithm, vectorized. For each batch of an arrangement by self: look up each
key's accumulated count in the trace *before* the batch, then walk the batch's times in
order, emitting ``((key, old), t, -1)`` and ``((key, new), t, +1)`` for counts that are not
zero. With a total order the count "now" is always the count before plus the batch's
changes up to now, so no output trace is needed (unlike ``count``).

Vectorized: prior counts come from one ``searchsorted`` per spine batch; running counts are
segmented prefix sums over the batch's ``(key, time)``-sorted rows. Any semigroup diff
works as the count (tuple diffs give tuple counts, ``Sum`` gives ``Sum`` counts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ddflow.core.columns import Layout, Tup
from ddflow.core.diff import DiffType, IntDiff
from ddflow.core.errors import TimeError
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates
from ddflow.operators.arrange import Arrange
from ddflow.operators.linear import user_error
from ddflow.runtime.worker import Operator, Worker
from ddflow.trace.batch import TraceBatch
from ddflow.trace.spine import Spine

__all__ = ["CountTotal", "prior_sums", "zeros_of"]


def zeros_of(dt: DiffType, n: int) -> Any:
    """``n`` zero diffs (None entries for user semigroups, which have no zero)."""
    from ddflow.core.diff import MINSUM_ZERO, MinSumDiff, ObjectDiff, TupleDiff

    if isinstance(dt, TupleDiff):
        return tuple(zeros_of(p, n) for p in dt.parts)
    if isinstance(dt, MinSumDiff):
        return np.full(n, MINSUM_ZERO, dtype=np.int64)
    if isinstance(dt, ObjectDiff):
        return np.full(n, None, dtype=object)
    if isinstance(dt, IntDiff):
        return np.zeros(n, dtype=np.float64 if dt.name == "float" else np.int64)
    raise TypeError(dt)


def _scatter(dt: DiffType, target: Any, idx: np.ndarray, values: Any) -> None:
    if isinstance(target, tuple):
        for p, t, v in zip(dt.parts, target, values, strict=True):  # type: ignore[attr-defined]
            _scatter(p, t, idx, v)
    else:
        target[idx] = values


def _combine(dt: DiffType, a: Any, b: Any) -> Any:
    """Elementwise ``a + b`` of two diff columns of equal length (``None`` is no value)."""
    from ddflow.core.diff import MinSumDiff, ObjectDiff

    if isinstance(dt, IntDiff):
        return a + b
    if isinstance(dt, MinSumDiff):
        return np.minimum(a, b)
    if isinstance(dt, ObjectDiff):
        out = np.empty(len(a), dtype=object)
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out[i] = y if x is None else (x if y is None else x.plus(y))
        return out
    both = dt.concat([a, b])
    n = dt.length(a)
    order = np.concatenate([np.arange(n), np.arange(n)]).argsort(kind="stable")
    return dt.sum_segments(dt.take(both, order), np.arange(0, 2 * n, 2))


def prior_sums(spine: Spine, batches: list[TraceBatch], probe: np.ndarray, dt: DiffType) -> Any:
    """For each probe key (sorted, distinct), the sum of the diffs of its rows in ``batches``."""
    acc = zeros_of(dt, probe.shape[0])
    for b in batches:
        rows, owner = b.rows_for(probe)
        if not len(rows):
            continue
        if len(owner) == 1:
            starts = np.zeros(1, dtype=np.int64)
        else:
            flags = np.empty(len(owner), dtype=bool)
            flags[0] = True
            np.not_equal(owner[1:], owner[:-1], out=flags[1:])
            starts = np.flatnonzero(flags)
        sums = dt.sum_segments(dt.take(b.diffs, rows), starts)
        keys = owner[starts]
        cur = dt.take(acc, keys)
        _scatter(dt, acc, keys, _combine(dt, cur, sums))
    return acc


class CountTotal(Operator):
    """``mode``: ``"count"`` -> ``(key, count)``; ``"distinct"`` -> key with diff 1;
    ``"threshold"`` -> key with diff ``f(count)``."""

    def __init__(self, worker: Worker, arr: Arrange, mode: str,
                 f: Callable[..., Any] | None = None, vectorized: bool = False,
                 name: str | None = None) -> None:
        if not worker.time_kind.total:
            raise TimeError(
                f"{mode}_total needs totally ordered (int) times; this worker has "
                f"{worker.time_kind.describe()} times: use {mode}() instead"
            )
        super().__init__(worker, [arr.output], name or f"{mode}_total")
        self.arr = arr
        self.mode, self.f, self.vectorized = mode, f, vectorized
        self.handle = arr.spine.handle()

    def run(self, frontier: Antichain) -> None:
        batches = self.take()
        outs = [self._batch(b) for b in batches]
        for out in outs:
            if out is not None:
                self.output.push(*out)
        self.handle.set_compaction(frontier, frontier)

    def _values(self, dt: DiffType, counts: Any) -> np.ndarray:
        """The output diff of a key whose count is ``counts`` (0 where the count is zero)."""
        nz = np.flatnonzero(~_empty_mask(dt, counts))
        out = np.zeros(dt.length(counts), dtype=np.int64)
        sub = dt.take(counts, nz)
        if self.mode == "distinct":
            out[nz] = 1  # DD: every record with a non-zero count, once
            return out
        assert self.f is not None
        try:
            if self.vectorized:
                out[nz] = np.asarray(self.f(sub), dtype=np.int64)
            else:
                vals = dt.to_values(sub)
                out[nz] = np.fromiter((int(self.f(v)) for v in vals), np.int64, count=len(vals))
        except Exception as e:
            raise user_error(self, e) from e
        return out

    def _batch(self, batch: TraceBatch) -> tuple[Updates, Layout] | None:
        dt = batch.diff_type
        spine = self.arr.spine
        history = spine.batches_through(batch.desc.lower)
        prior = prior_sums(spine, history, batch.keys, dt)
        starts = batch.bounds[:-1]
        new = dt.running_sums(batch.diffs, starts, prior)
        n = len(batch)
        # value before each row: the previous row's running value, or the prior at a key start
        prev_idx = np.arange(-1, n - 1)
        old = dt.take(new, np.maximum(prev_idx, 0))
        _scatter(dt, old, starts, prior)
        key_cols = batch.data[: self.arr.key_width]
        key_layout = self.arr.key_layout
        assert key_layout is not None
        times = batch.times
        if self.mode == "count":
            old_ok = ~_empty_mask(dt, old)
            new_ok = ~_empty_mask(dt, new)
            ro = np.flatnonzero(old_ok)
            rn = np.flatnonzero(new_ok)
            vals = dt.value_columns(dt.concat([dt.take(old, ro), dt.take(new, rn)]))
            cols = tuple(np.concatenate([c[ro], c[rn]]) for c in key_cols) + vals
            out_t = np.concatenate([times[ro], times[rn]])
            out_d = np.concatenate([np.full(len(ro), -1, np.int64), np.ones(len(rn), np.int64)])
            layout: Layout = Tup((key_layout, dt.value_layout()))
            if not len(out_d):
                return None
            return Updates(cols, out_t, out_d, IntDiff()), layout
        # distinct / threshold: output diff f(new) - f(old) on the key
        d = self._values(dt, new) - self._values(dt, old)
        keep = np.flatnonzero(d != 0)
        if not len(keep):
            return None
        return (
            Updates(tuple(c[keep] for c in key_cols), times[keep], d[keep], IntDiff()),
            key_layout,
        )


def _empty_mask(dt: DiffType, d: Any) -> np.ndarray:
    """Zero (or absent) counts: no output record for them."""
    from ddflow.core.diff import ObjectDiff

    if isinstance(dt, ObjectDiff):
        return np.fromiter((v is None or bool(v.is_zero()) for v in d), dtype=bool, count=len(d))
    return dt.zero_mask(d)
