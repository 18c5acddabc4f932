"""``count_total``, ``distinct_total``, ``threshold_total``: counting for totally ordered time.

The total-order count, vectorized. For each batch of an arrangement by self: look up each
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
from typing import Any, Literal

import numpy as np

from ddflow.core.columns import Layout, Leaf, Tup
from ddflow.core.diff import (
    I64_MAX,
    I64_MIN,
    INT_DIFF,
    DiffType,
    FloatDiff,
    IntDiff,
    TupleDiff,
    int_column,
)
from ddflow.core.errors import DiffTypeError, TimeError
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, consolidate, split_complete
from ddflow.engine.operator import Operator, State, Stream
from ddflow.engine.worker import Worker
from ddflow.operators.arrange import Arrange
from ddflow.operators.linear import user_error
from ddflow.trace.batch import TraceBatch
from ddflow.trace.spine import int_key_sums_small, key_sums, sums_fit

__all__ = ["CountFew", "CountTotal", "threshold_values"]


def threshold_values(
    op: Operator,
    dt: DiffType,
    counts: Any,
    mode: str,
    f: Callable[..., Any] | None,
    vectorized: bool = False,
) -> np.ndarray:
    """The int output diff of a key for each count: 0 where the count is zero, else 1 for
    ``distinct`` (DD: every record with a non-zero count, once) or ``f(count)``."""
    nz = np.flatnonzero(~dt.zero_mask(counts))
    out = np.zeros(dt.length(counts), dtype=np.int64)
    if mode == "distinct":
        out[nz] = 1
        return out
    assert f is not None
    sub = dt.take(counts, nz)
    try:
        if vectorized:
            res = np.asarray(f(sub))
            vals = res.astype(np.int64) if res.dtype.kind in "bi" else int_column(res.tolist())
        else:
            vals = int_column([int(f(v)) for v in dt.to_values(sub)])
    except Exception as e:
        raise user_error(op, e) from e
    return INT_DIFF.put(out, nz, vals)  # (Python ints where f's values leave int64)


#: batches of at most this many rows are counted in Python (``CountTotal._batch_small``)
SMALL_ROWS = 32


class CountTotal(Operator):
    """``mode``: ``"count"`` -> ``(key, count)``; ``"distinct"`` -> key with diff 1;
    ``"threshold"`` -> key with diff ``f(count)``."""

    state_version = 1
    wakes_on_frontier = False

    def __init__(
        self,
        worker: Worker,
        arrangement: Arrange,
        mode: str,
        f: Callable[..., Any] | None = None,
        vectorized: bool = False,
        name: str | None = None,
    ) -> None:
        if not arrangement.kind.total:
            raise TimeError(
                f"{mode}_total needs totally ordered (int) times; this worker has "
                f"{arrangement.kind.describe()} times: use {mode}() instead"
            )
        super().__init__(worker, [arrangement.output], name or f"{mode}_total")
        self.arrangement = arrangement
        self.mode, self.f, self.vectorized = mode, f, vectorized
        self.handle = arrangement.spine.handle()
        kl = arrangement.key_layout
        if kl is not None and mode != "count":
            self.output.layout = kl

    def state(self) -> State:
        return {"handle": self.handle.state()}

    def load_state(self, state: State) -> None:
        self.handle.load_state(state["handle"])

    def run(self, frontier: Antichain) -> None:
        batches = self.take()
        outs = [self._batch(b) for b in batches]
        for out in outs:
            if out is not None:
                self.output.push(*out)
        self.handle.set_compaction(frontier, frontier)

    def _batch(self, batch: TraceBatch) -> tuple[Updates, Layout] | None:
        dt = batch.diff_type
        history = self.arrangement.spine.batches_through(batch.desc.lower)
        if (
            len(batch) <= SMALL_ROWS
            and type(dt) is IntDiff
            and self.mode != "threshold"
            and all(type(b.diff_type) is IntDiff for b in history)
        ):
            small = self._batch_small(batch, history)
            if small is not False:
                return small
        # counts before and during the batch are sums of these batches' diffs
        fit = sums_fit([*history, batch])
        prior = key_sums(history, batch.keys, dt, bounded=fit)
        starts = batch.bounds[:-1]
        new = dt.running_sums(batch.diffs, starts, prior, bounded=fit)
        # value before each row: the previous row's running value, or the prior at a key start
        old = dt.previous(new, starts, prior)
        key_cols = batch.data[: self.arrangement.key_width]
        key_layout = self.arrangement.key_layout
        assert key_layout is not None
        times = batch.times
        if self.mode == "count":
            ro = np.flatnonzero(~dt.zero_mask(old))
            rn = np.flatnonzero(~dt.zero_mask(new))
            vals = dt.value_columns(dt.concat([dt.take(old, ro), dt.take(new, rn)]))
            cols = tuple(np.concatenate([c[ro], c[rn]]) for c in key_cols) + vals
            out_t = np.concatenate([times[ro], times[rn]])
            out_d = np.concatenate([np.full(len(ro), -1, np.int64), np.ones(len(rn), np.int64)])
            layout: Layout = Tup((key_layout, dt.value_layout()))
            if not len(out_d):
                return None
            return Updates(cols, out_t, out_d, INT_DIFF), layout
        # distinct / threshold: output diff f(new) - f(old) on the key
        g_new = threshold_values(self, dt, new, self.mode, self.f, self.vectorized)
        g_old = threshold_values(self, dt, old, self.mode, self.f, self.vectorized)
        # (distinct's values are 0 and 1; a threshold function's may be any ints)
        d = (
            g_new - g_old
            if self.mode == "distinct"
            else INT_DIFF.add(g_new, INT_DIFF.negate(g_old))
        )
        keep = np.flatnonzero(d != 0)
        if not len(keep):
            return None
        return (
            Updates(tuple(c[keep] for c in key_cols), times[keep], d[keep], INT_DIFF),
            key_layout,
        )

    def _batch_small(
        self, batch: TraceBatch, history: list[TraceBatch]
    ) -> tuple[Updates, Layout] | None | Literal[False]:
        """``_batch`` for a few rows of int diffs (``count`` and ``distinct``), the counts
        as exact Python ints: the same output, in the same order, without the fixed cost of
        some forty numpy calls on tiny arrays. ``False`` when a count leaves int64 (the
        general path then gives the exact column)."""
        if not len(batch):
            return None
        prior = int_key_sums_small(history, batch.keys)
        bounds = batch.bounds.tolist()
        diffs = batch.diffs.tolist()
        old: list[int] = []
        new: list[int] = []
        for j, acc in enumerate(prior):
            for r in range(bounds[j], bounds[j + 1]):
                old.append(acc)
                acc += diffs[r]
                new.append(acc)
        lo, hi = min(min(old), min(new)), max(max(old), max(new))
        if not (lo >= I64_MIN and hi <= I64_MAX):
            return False
        n = len(new)
        key_cols = batch.data[: self.arrangement.key_width]
        key_layout = self.arrangement.key_layout
        assert key_layout is not None
        times = batch.times
        if self.mode == "count":
            ro = [r for r in range(n) if old[r]]
            rn = [r for r in range(n) if new[r]]
            if not ro and not rn:
                return None
            idx = np.array(ro + rn, dtype=np.int64)
            vals = np.array([old[r] for r in ro] + [new[r] for r in rn], dtype=np.int64)
            out_d = np.array([-1] * len(ro) + [1] * len(rn), dtype=np.int64)
            cols = tuple(c[idx] for c in key_cols) + (vals,)
            return Updates(cols, times[idx], out_d, INT_DIFF), Tup(
                (key_layout, INT_DIFF.value_layout())
            )
        # distinct: (new != 0) - (old != 0)
        d = [(new[r] != 0) - (old[r] != 0) for r in range(n)]
        keep = [r for r in range(n) if d[r]]
        if not keep:
            return None
        idx = np.array(keep, dtype=np.int64)
        return (
            Updates(
                tuple(c[idx] for c in key_cols),
                times[idx],
                np.array([d[r] for r in keep], dtype=np.int64),
                INT_DIFF,
            ),
            key_layout,
        )


def _numeric_parts(dt: DiffType) -> tuple[DiffType, ...] | None:
    """The parts of an int diff or of a plain tuple of int / float diffs; None for others."""
    if type(dt) in (IntDiff, FloatDiff):
        return (dt,)
    if (
        isinstance(dt, TupleDiff)
        and dt.cls is None
        and all(type(p) in (IntDiff, FloatDiff) for p in dt.parts)
    ):
        return dt.parts
    return None


class CountFew(Operator):
    """The total-order count of a collection with few distinct records (a global
    aggregate's one key, a handful of groups), without an arrangement: each record's total
    so far is kept in a dict, as exact Python numbers per diff part. The output is
    ``CountTotal``'s in ``"count"`` mode, ``((record, total), t, -1 / +1)``; a step costs a
    few numpy calls and a Python loop over the distinct ``(record, time)`` pairs it
    changes, so it suits collections whose records are few, not large ones.

    Updates are held until the frontier passes their times (the count at ``t`` needs every
    change before ``t``); diffs are ints or plain tuples of ints and floats."""

    name = "count_few"
    wakes_on_frontier = False
    state_version = 1

    def __init__(
        self, worker: Worker, s: Stream, diff_type: DiffType, name: str | None = None
    ) -> None:
        kind = s.producer_scope.kind
        if not kind.total:
            raise TimeError(
                "count_total(few=True) needs totally ordered (int) times; this worker has "
                f"{kind.describe()} times: use count() instead"
            )
        parts = _numeric_parts(diff_type)
        if parts is None:
            raise DiffTypeError(
                "count_total(few=True) counts int diffs or plain tuples of int and float "
                f"diffs, not {diff_type.name} diffs: use count_total() instead"
            )
        super().__init__(worker, [s], name)
        self.dt = diff_type
        self.floats = tuple(type(p) is FloatDiff for p in parts)
        self.held: list[Updates] = []
        self.upper = Antichain.of([self.kind.minimum()], self.kind.dim)
        #: record (a tuple of its column values) -> its total, one Python number per part
        self.totals: dict[tuple[Any, ...], list[Any]] = {}
        if s.layout is not None:
            self.output.layout = Tup((s.layout, diff_type.value_layout()))

    def outstanding_times(self) -> np.ndarray | None:
        if not self.held:
            return None
        return np.concatenate([u.times for u in self.held])

    def state(self) -> State:
        return {"held": list(self.held), "upper": self.upper, "totals": dict(self.totals)}

    def load_state(self, state: State) -> None:
        self.held, self.upper = list(state["held"]), state["upper"]
        self.totals = {k: list(v) for k, v in state["totals"].items()}

    def run(self, frontier: Antichain) -> None:
        new = self.take()
        if frontier == self.upper:
            self.held.extend(new)
            return
        ready, rest = split_complete(self.held + new, frontier)
        self.held, self.upper = rest, frontier
        if ready is None or not len(ready):
            return
        out = self._count(ready)
        if out is not None:
            if self.output.layout is None:
                rec = self.inputs[0].layout or Leaf()
                self.output.layout = Tup((rec, self.dt.value_layout()))
            self.output.push(out)

    def _count(self, u: Updates) -> Updates | None:
        dt = self.dt
        if len(u) > 1 and all(bool((c == c[0]).all()) for c in (*u.data, u.times)):
            # one record at one time (a global aggregate's step): its diffs summed exactly
            sums = dt.sum_segments(u.diffs, np.zeros(1, np.int64))
            u = Updates(tuple(c[:1] for c in u.data), u.times[:1], sums, dt)
        else:
            u = consolidate(u)
        n = len(u)
        if not n:
            return None
        parts = u.diffs if isinstance(dt, TupleDiff) else (u.diffs,)
        deltas = list(zip(*(p.tolist() for p in parts), strict=True))
        keys = list(zip(*(c.tolist() for c in u.data), strict=True))
        width = len(self.floats)
        zero = [0.0 if f else 0 for f in self.floats]
        rows: list[int] = []  # the input row of each output row
        signs: list[int] = []
        values: list[list[Any]] = [[] for _ in range(width)]
        totals = self.totals
        for i in range(n):
            key = keys[i]
            old = totals.get(key)
            new = [a + b for a, b in zip(old or zero, deltas[i], strict=True)]
            if old is not None:
                rows.append(i)
                signs.append(-1)
                for j in range(width):
                    values[j].append(old[j])
            if any(new):
                totals[key] = new
                rows.append(i)
                signs.append(1)
                for j in range(width):
                    values[j].append(new[j])
            elif old is not None:
                del totals[key]
        if not rows:
            return None
        idx = np.array(rows, dtype=np.int64)
        cols = [
            np.array(values[j], dtype=np.float64) if self.floats[j] else int_column(values[j])
            for j in range(width)
        ]
        return Updates(
            tuple(c[idx] for c in u.data) + tuple(cols),
            u.times[idx],
            np.array(signs, dtype=np.int64),
            INT_DIFF,
        )
