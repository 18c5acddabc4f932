"""``count_total``, ``distinct_total``, ``threshold_total``: counting for totally ordered time.

The total-order count, vectorized. For each batch of keyed runs (updates consolidated by
``(key, time)``): take each key's accumulated count *before* the batch, then walk the
batch's times in order, emitting ``((key, old), t, -1)`` and ``((key, new), t, +1)`` for
counts that are not zero. With a total order the count "now" is always the count before
plus the batch's changes up to now, so no output trace is needed (unlike ``count``).

Where the count before a batch comes from, one class each:

* ``CountTotal`` counts an arrangement by self that other operators may read too: the
  counts before come from totals it keeps as a cache of the trace (``KeyTotals``) or else
  from the trace's batches (one ``searchsorted`` per spine batch);
* ``CountTotalPrivate`` counts a collection arranged for it alone, so it keeps no trace:
  each key's total so far is its declared state, and a round of one time is grouped by key
  straight from the columns.

Running counts are segmented prefix sums over the batch's ``(key, time)``-sorted rows. Any
semigroup diff works as the count (tuple diffs give tuple counts, ``Sum`` gives ``Sum``
counts).
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
    Rows,
    TupleDiff,
    int_column,
    magnitude,
)
from ddflow.core.errors import DiffTypeError
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, consolidate, held_times, split_complete, take_times
from ddflow.engine.operator import Operator, State, Stream
from ddflow.engine.worker import Worker
from ddflow.operators.arrange import Arrange
from ddflow.operators.key_totals import (
    DenseTotals,
    DictTotals,
    KeyTotals,
    SortedTotals,
    diff_matrix,
    int_tuple,
    packable_int,
)
from ddflow.operators.linear import user_error
from ddflow.trace.batch import Description, TraceBatch
from ddflow.trace.spine import int_key_sums_small, key_sums, sums_fit, tuple_key_sums_small

__all__ = [
    "CountFew",
    "CountTotal",
    "CountTotalPrivate",
    "DenseTotals",
    "DictTotals",
    "KeyTotals",
    "SortedTotals",
    "threshold_values",
]


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


class _TotalCount(Operator):
    """What the total-order counts share: counting one batch of keyed runs against each
    key's count before it, ``mode`` ``"count"`` -> ``(key, count)``, ``"distinct"`` -> key
    with diff 1, ``"threshold"`` -> key with diff ``f(count)``. Subclasses say where the
    counts before a batch come from (a trace, kept totals) and what the keys look like.

    Every path below computes its whole output before it stores a key's new count in the
    totals, so a user function that raises leaves the totals as they were."""

    mode: str
    f: Callable[..., Any] | None
    vectorized: bool
    _layout: tuple[DiffType, Layout] | None

    @property
    def key_width(self) -> int:
        raise NotImplementedError

    @property
    def key_layout(self) -> Layout | None:
        raise NotImplementedError

    def _count_layout(self, dt: DiffType) -> Layout:
        """The layout of ``(key, count)`` records for counts of type ``dt`` (made once)."""
        got = self._layout
        if got is not None and (got[0] is dt or got[0] == dt):
            return got[1]
        key_layout = self.key_layout
        assert key_layout is not None
        self._layout = (dt, Tup((key_layout, dt.value_layout())))
        return self._layout[1]

    def _key_parts(self, batch: TraceBatch) -> tuple[Any, Layout, np.ndarray]:
        """A batch's key columns, the keys' layout and the batch's times."""
        key_layout = self.key_layout
        assert key_layout is not None
        return batch.data[: self.key_width], key_layout, batch.times

    def _batch(
        self, batch: TraceBatch, totals: KeyTotals | None, history: list[TraceBatch]
    ) -> tuple[Updates, Layout] | None:
        """Count ``batch``: the counts before it are ``totals``' (when given, having admitted
        it) or the sums of ``history`` (the trace before it)."""
        dt = batch.diff_type
        small = len(batch) <= SMALL_ROWS and self.mode != "threshold"
        if small and type(dt) is IntDiff and all(type(b.diff_type) is IntDiff for b in history):
            prior_ints = (
                totals.prior_list(batch)
                if totals is not None
                else int_key_sums_small(history, batch.keys)
            )
            out = self._batch_small(batch, prior_ints, totals)
            if out is not False:
                return out
        if small and int_tuple(dt) and all(b.diff_type == dt for b in history):
            width = len(dt.parts)  # type: ignore[attr-defined]
            prior_lists = (
                totals.prior_list(batch)
                if totals is not None
                else tuple_key_sums_small(history, batch.keys, width)
            )
            out = (
                self._batch_small(batch, [p[0] for p in prior_lists], totals)
                if width == 1  # (counted as ints: Q13's histogram of order counts)
                else self._batch_small_tuple(batch, prior_lists, totals)
            )
            if out is not False:
                return out
        # counts before and during the batch are sums of these batches' diffs (kept in
        # ``totals``, or read from the trace)
        starts = batch.bounds[:-1]
        if isinstance(totals, DenseTotals) and self.mode == "count" and len(starts) == len(batch):
            return self._batch_dense_count(batch, totals)
        if totals is not None:
            fit = totals.bounded  # (compact totals: ``admit`` checked it)
            prior = totals.prior(batch)
        else:
            fit = sums_fit([*history, batch])
            prior = key_sums(history, batch.keys, dt, bounded=fit)
        new = dt.running_sums(batch.diffs, starts, prior, bounded=fit)
        # value before each row: the previous row's running value, or the prior at a key start
        old = dt.previous(new, starts, prior)
        out = self._outputs(batch, old, new)
        if totals is not None:
            one_row_per_key = len(starts) == len(batch)
            totals.store(batch, new if one_row_per_key else dt.take(new, batch.bounds[1:] - 1))
        return out

    def _outputs(self, batch: TraceBatch, old: Any, new: Any) -> tuple[Updates, Layout] | None:
        """The output of ``batch`` whose rows' counts go from ``old`` to ``new``."""
        dt = batch.diff_type
        key_cols, key_layout, times = self._key_parts(batch)
        if self.mode == "count":
            ro = np.flatnonzero(~dt.zero_mask(old))
            rn = np.flatnonzero(~dt.zero_mask(new))
            vals = dt.value_columns(dt.concat([dt.take(old, ro), dt.take(new, rn)]))
            cols = tuple(np.concatenate([c[ro], c[rn]]) for c in key_cols) + vals
            out_t = np.concatenate([take_times(times, ro), take_times(times, rn)])
            out_d = np.concatenate([np.full(len(ro), -1, np.int64), np.ones(len(rn), np.int64)])
            layout: Layout = self._count_layout(dt)
            if not len(out_d):
                return None
            return Updates(cols, out_t, out_d, INT_DIFF), layout
        keep, d = self._presence(dt, old, new)
        if not len(keep):
            return None
        return (
            Updates(tuple(c[keep] for c in key_cols), take_times(times, keep), d[keep], INT_DIFF),
            key_layout,
        )

    def _presence(self, dt: DiffType, old: Any, new: Any) -> tuple[np.ndarray, np.ndarray]:
        """``distinct`` / ``threshold``: the rows whose output diff ``f(new) - f(old)`` is not
        zero, and every row's output diff."""
        g_new = threshold_values(self, dt, new, self.mode, self.f, self.vectorized)
        g_old = threshold_values(self, dt, old, self.mode, self.f, self.vectorized)
        # (distinct's values are 0 and 1; a threshold function's may be any ints)
        d = (
            g_new - g_old
            if self.mode == "distinct"
            else INT_DIFF.add(g_new, INT_DIFF.negate(g_old))
        )
        return np.flatnonzero(d != 0), d

    def _batch_dense_count(
        self, batch: TraceBatch, totals: DenseTotals
    ) -> tuple[Updates, Layout] | None:
        """``_batch`` in ``count`` mode for a batch of one row per key (one time) with dense
        kept totals: each key's count before is its total, after it the total plus the
        row's diff, all parts at once as matrices (a column per key). The same output as
        the general path, in the same order."""
        dt = batch.diff_type
        old = totals.prior_matrix()
        new = old + diff_matrix(batch.diffs)  # (``admit`` bounds every sum in int64)
        ro = np.flatnonzero(old.any(axis=0))
        rn = np.flatnonzero(new.any(axis=0))
        if not len(ro) and not len(rn):
            totals.store_matrix(new)
            return None
        idx = np.concatenate((ro, rn))
        vals = np.concatenate((old.take(ro, axis=1), new.take(rn, axis=1)), axis=1)
        key_cols = batch.data[: self.key_width]
        out_d = np.ones(len(idx), dtype=np.int64)
        out_d[: len(ro)] = -1
        out = (
            Updates(
                tuple(c.take(idx, axis=0) for c in key_cols) + tuple(vals),
                batch.times.take(idx, axis=0),
                out_d,
                INT_DIFF,
            ),
            self._count_layout(dt),
        )
        totals.store_matrix(new)
        return out

    def _batch_small(
        self, batch: TraceBatch, prior: list[int], totals: KeyTotals | None
    ) -> tuple[Updates, Layout] | None | Literal[False]:
        """``_batch`` for a few rows of int diffs or one-part tuples of them (``count`` and
        ``distinct``), the counts as exact Python ints, ``prior`` each key's count before
        the batch: the same output, in the same order, without the fixed cost of some forty
        numpy calls on tiny arrays. ``False`` when a count leaves int64 (the general path
        then gives the exact column). Stores each key's final count in ``totals`` if given."""
        if not len(batch):
            return None
        dt = batch.diff_type
        one_part = type(dt) is not IntDiff  # (a tuple of one int part)
        bounds = batch.bounds.tolist()
        diffs = (batch.diffs[0] if one_part else batch.diffs).tolist()
        old: list[int] = []
        new: list[int] = []
        finals: list[int] = []
        for j, acc in enumerate(prior):
            for r in range(bounds[j], bounds[j + 1]):
                old.append(acc)
                acc += diffs[r]
                new.append(acc)
            finals.append(acc)
        lo, hi = min(min(old), min(new)), max(max(old), max(new))
        if not (lo >= I64_MIN and hi <= I64_MAX):
            return False
        n = len(new)
        key_cols, key_layout, times = self._key_parts(batch)
        if self.mode == "count":
            ro = [r for r in range(n) if old[r]]
            rn = [r for r in range(n) if new[r]]
            out: tuple[Updates, Layout] | None = None
            if ro or rn:
                idx = np.array(ro + rn, dtype=np.int64)
                vals = np.array([old[r] for r in ro] + [new[r] for r in rn], dtype=np.int64)
                out_d = np.array([-1] * len(ro) + [1] * len(rn), dtype=np.int64)
                cols = tuple(c[idx] for c in key_cols) + (vals,)
                out = Updates(cols, take_times(times, idx), out_d, INT_DIFF), self._count_layout(dt)
        else:  # distinct: (new != 0) - (old != 0)
            d = [(new[r] != 0) - (old[r] != 0) for r in range(n)]
            out = _distinct_rows(key_cols, times, d, key_layout)
        if totals is not None:
            totals.store_list(batch, [[f] for f in finals] if one_part else finals)
        return out

    def _batch_small_tuple(
        self, batch: TraceBatch, prior: list[list[int]], totals: KeyTotals | None
    ) -> tuple[Updates, Layout] | None | Literal[False]:
        """``_batch_small`` for tuple diffs of int parts (TPC-H Q1's six sums over four
        groups): each count a list of exact Python ints, a count zero when every part is.
        ``False`` when a part leaves int64."""
        if not len(batch):
            return None
        dt = batch.diff_type
        assert isinstance(dt, TupleDiff)
        bounds = batch.bounds.tolist()
        m = getattr(batch.diffs, "matrix", None)
        rows = (
            m.T.tolist()  # (a ``Rows`` column: all parts listed in one call)
            if m is not None
            else list(zip(*(c.tolist() for c in batch.diffs), strict=True))
        )
        old: list[list[int]] = []
        new: list[list[int]] = []
        finals: list[list[int]] = []
        for j, acc in enumerate(prior):
            for r in range(bounds[j], bounds[j + 1]):
                old.append(acc)
                acc = [a + d for a, d in zip(acc, rows[r], strict=True)]
                new.append(acc)
            finals.append(acc)
        if totals is None or not totals.bounded:  # (compact totals prove every count fits)
            for v in (*old, *new):
                for x in v:
                    if not I64_MIN <= x <= I64_MAX:
                        return False
        n = len(new)
        key_cols, key_layout, times = self._key_parts(batch)
        out: tuple[Updates, Layout] | None = None
        if self.mode == "count":
            ro = [r for r in range(n) if any(old[r])]
            rn = [r for r in range(n) if any(new[r])]
            if ro or rn:
                idx = np.array(ro + rn, dtype=np.int64)
                values = [old[r] for r in ro] + [new[r] for r in rn]
                # (one array of the parts as rows: each part a contiguous row of it)
                vals = np.array(list(zip(*values, strict=True)), dtype=np.int64)
                out_d = np.array([-1] * len(ro) + [1] * len(rn), dtype=np.int64)
                cols = tuple(c[idx] for c in key_cols) + tuple(vals)
                out = Updates(cols, take_times(times, idx), out_d, INT_DIFF), self._count_layout(dt)
        else:  # distinct: (new != 0) - (old != 0)
            d = [any(new[r]) - any(old[r]) for r in range(n)]
            out = _distinct_rows(key_cols, times, d, key_layout)
        if totals is not None:
            totals.store_list(batch, finals)
        return out


class CountTotal(_TotalCount):
    """The total-order count of an arrangement by self (one other operators may read too).

    Each key's count before a batch is read from totals it keeps (``KeyTotals``, a cache of
    the trace: made from the trace at the first batch, after a checkpoint is loaded or a
    run that raised; given up for good when a batch falls outside what they hold exactly),
    or else summed from the trace's batches before it."""

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
        arrangement.kind.require_total(f"{mode}_total", f"{mode}()")
        super().__init__(worker, [arrangement.output], name or f"{mode}_total")
        self.arrangement = arrangement
        self.mode, self.f, self.vectorized = mode, f, vectorized
        self.handle = arrangement.spine.handle()
        kl = arrangement.key_layout
        if kl is not None and mode != "count":
            self.output.layout = kl
        #: each key's count so far, when kept (``KeyTotals``); None: not yet made (it is
        #: made from the trace at the next batch); False: not kept (the trace is read)
        self.totals: KeyTotals | None | Literal[False] = None
        self._layout = None

    @property
    def key_width(self) -> int:
        return self.arrangement.key_width

    @property
    def key_layout(self) -> Layout | None:
        return self.arrangement.key_layout

    def state(self) -> State:
        return {"handle": self.handle.state()}

    def load_state(self, state: State) -> None:
        self.handle.load_state(state["handle"])
        self.totals = None  # (rebuilt from the trace at the next batch)

    def run(self, frontier: Antichain) -> None:
        batches = self.take()
        try:
            outs = [self._trace_batch(b) for b in batches]
        except BaseException:
            # a run is transactional (the engine puts the batches back): totals that may
            # have taken some of them are remade from the trace at the next run
            self.totals = None
            raise
        for out in outs:
            if out is not None:
                self.output.push(*out)
        self.handle.set_compaction(frontier, frontier)

    def _key_totals(self, batch: TraceBatch) -> KeyTotals | None:
        """The kept totals if they can take ``batch`` (made from the trace first if need
        be); None when the trace is to be read instead (from now on)."""
        if self.totals is None:
            history = self.arrangement.spine.batches_through(batch.desc.lower)
            self.totals = KeyTotals.make(self.arrangement.key_width, batch, history) or False
        if self.totals is False:
            return None
        if not self.totals.admit(batch):
            self.totals = False
            return None
        return self.totals

    def _trace_batch(self, batch: TraceBatch) -> tuple[Updates, Layout] | None:
        totals = self._key_totals(batch) if len(batch) else None
        history = (
            [] if totals is not None else self.arrangement.spine.batches_through(batch.desc.lower)
        )
        return self._batch(batch, totals, history)


class CountTotalPrivate(_TotalCount):
    """The total-order count of a collection arranged for it alone: no other operator could
    read that arrangement, so there is none. The count keeps each key's total so far as its
    declared state (``KeyTotals``) and reads nothing else: with a total order a key's count
    before a batch is the sum of every batch before it.

    Updates wait (``held``) until the input frontier passes their times, as an arrangement's
    would; then every complete update (however many times) is counted at once. Updates of
    one time are grouped by key straight from the columns when the totals are compact
    (``_dense_round``, ``_dict_round``); otherwise they are consolidated by ``(key, time)``
    into a batch of keyed runs and counted as a trace batch would be. When a compact form
    cannot take a batch (diffs that are not int64 ints or tuples of them, sums that could
    leave int64, keys too spread out or too many) the totals become the general form
    (``SortedTotals``), which takes every batch: the state is complete on its own."""

    state_version = 1
    wakes_on_frontier = False

    def __init__(
        self,
        worker: Worker,
        s: Stream,
        mode: str,
        f: Callable[..., Any] | None = None,
        vectorized: bool = False,
        name: str | None = None,
    ) -> None:
        kind = s.producer_scope.kind
        kind.require_total(f"{mode}_total", f"{mode}()")
        super().__init__(worker, [s], name or f"{mode}_total")
        self.mode, self.f, self.vectorized = mode, f, vectorized
        if s.layout is not None and mode != "count":
            self.output.layout = s.layout
        self.held: list[Updates] = []
        self.upper = Antichain.of([kind.minimum()], kind.dim)
        #: each key's count so far (None until the first batch picks a form)
        self.totals: KeyTotals | None = None
        self._layout = None
        self._key_dtype: tuple[tuple[np.dtype, ...], np.dtype] | None = None
        #: ``_code_keys``'s table: the columns' ranges it holds for, and code -> key
        self._decoded: tuple[tuple[list[int], list[int]], dict[int, Any]] | None = None

    @property
    def key_width(self) -> int:
        layout = self.inputs[0].layout
        return layout.width if layout is not None else 0

    @property
    def key_layout(self) -> Layout | None:
        return self.inputs[0].layout

    def kept(self) -> tuple[int, int] | None:
        return (0, 0) if self.totals is None else self.totals.size()

    def outstanding_times(self) -> np.ndarray | None:
        return held_times(self.held)

    def state(self) -> State:
        return {
            "held": list(self.held),
            "upper": self.upper,
            "totals": None if self.totals is None else self.totals.state(),
        }

    def load_state(self, state: State) -> None:
        self.held, self.upper = list(state["held"]), state["upper"]
        got = state["totals"]
        self.totals = None if got is None else KeyTotals.from_state(got)

    def run(self, frontier: Antichain) -> None:
        new = self.take()
        if frontier == self.upper:
            self.held.extend(new)
            return
        ready: Updates | None
        rest: list[Updates]
        if not self.held and len(new) == 1 and _all_before(new[0].times, frontier):
            ready, rest = new[0], []  # (a round's one batch, complete: nothing to split)
        else:
            ready, rest = split_complete(self.held + new, frontier)
        # The complete updates are at times in [upper, frontier): updates reach an operator
        # at times its input frontier had not passed when it last ran (those it held, and
        # those pushed since, at times its producers' frontiers had not passed), which is
        # what an arrangement's batch description rests on too. A frontier one past the
        # last is then one time, known without reading the time column.
        one = (
            bool(frontier.elements)
            and bool(self.upper.elements)
            and frontier.elements[0][0] == self.upper.elements[0][0] + 1
        )
        # (counting raises having changed no count: the engine puts the updates back)
        out = self._count(ready, one) if ready is not None and len(ready) else None
        self.held, self.upper = rest, frontier
        if out is not None:
            self.output.push(*out)

    def _count(self, u: Updates, one_time: bool = False) -> tuple[Updates, Layout] | None:
        """Count the complete updates ``u`` (``one_time``: they are known to be at one
        time)."""
        dt = u.diff_type
        kw = self.key_width
        totals = self.totals
        if totals is None:
            totals = self.totals = KeyTotals.compact(
                kw, dt, self._index_dtype(u.data[:kw])
            ) or SortedTotals(dt)
        if totals.bounded and (one_time or _one_time(u.times)):
            if isinstance(totals, DenseTotals):
                out = self._dense_round(u, totals)
            elif isinstance(totals, DictTotals):
                out = self._dict_round(u, totals)
            else:
                out = NotImplemented
            if out is not NotImplemented:
                return out
        batch = TraceBatch.build(kw, u, _NO_DESC)
        if not len(batch):
            return None
        if not totals.admit(batch):
            totals = self.totals = totals.widen()
            totals.admit(batch)
        return self._batch(batch, totals, [])

    def _index_dtype(self, cols: tuple[np.ndarray, ...]) -> np.dtype:
        """The dtype of the key index of key columns ``cols`` (``key_index``'s)."""
        dts = tuple(c.dtype for c in cols)
        if self._key_dtype is None or self._key_dtype[0] != dts:
            if len(cols) == 1:
                kd = dts[0]
            elif cols and all(d.kind in "biuf" for d in dts):
                kd = np.dtype([(f"f{i}", d) for i, d in enumerate(dts)])
            else:
                kd = np.dtype(object)
            self._key_dtype = (dts, kd)
        return self._key_dtype[1]

    def _dense_round(self, u: Updates, totals: DenseTotals) -> Any:
        """Count updates of one time whose one int key column indexes dense totals: rows
        grouped by key without sorting, each group's diffs summed, and every key's count
        before and after read off the totals' matrix. Keys packed closely (spanning at most
        twice the rows) are counted over their range (``np.bincount``); others are grouped
        through a scratch array (``DenseTotals.group``). NotImplemented when the batch does
        not fit the totals (the general path then decides)."""
        keys = u.data[0]
        m = _int_matrix(u.diffs, totals.dt, u.diff_type)
        if m is None or keys.ndim != 1 or not packable_int(keys.dtype):
            return NotImplemented
        n = len(u)
        b = n * _magnitude(m)
        if totals.bound + b > I64_MAX:
            return NotImplemented
        if n <= SMALL_ROWS:
            kl = keys.tolist()
            klo, khi = min(kl), max(kl)
        else:
            klo, khi = int(keys.min()), int(keys.max())
        if not totals.cover(klo, khi, n):
            return NotImplemented
        totals.bound += b
        span = khi - klo + 1
        if span <= 2 * n and b <= FLOAT_EXACT:
            # each part summed over the keys' range, exactly in float64 (every partial sum
            # is an integer within 2**53); the keys present are those of non-zero sums
            rel = keys.astype(np.int64, copy=False) - klo
            full = np.empty((m.shape[0], span), dtype=np.int64)
            for i, row in enumerate(m):
                full[i] = np.bincount(rel, weights=row, minlength=span)
            live = _any_part(full).nonzero()[0]
            if not len(live):
                return None
            sums = full.take(live, axis=1)
            uk = live + (klo - totals.lo)
            ukeys = live + klo
            if ukeys.dtype != keys.dtype:
                ukeys = ukeys.astype(keys.dtype)
        else:
            idx = keys.astype(np.int64, copy=False) - totals.lo
            rep, grp, g = totals.group(idx)
            sums = m if grp is None else _group_sums(m, grp, g)  # (None: a key per row)
            uk = idx.take(rep)
            nz = _any_part(sums)
            if not nz.all():  # (keys whose changes cancel: nothing happens to them)
                live = nz.nonzero()[0]
                rep, uk, sums = rep.take(live), uk.take(live), sums.take(live, axis=1)
            if not len(uk):
                return None
            ukeys = keys.take(rep)
        old = totals.m.take(uk, axis=1)
        new = old + sums
        out = self._round_outputs(u, ukeys, old, new, u.diff_type)
        totals.set_columns(uk, new)
        return out

    def _round_outputs(
        self, u: Updates, ukeys: np.ndarray, old: np.ndarray, new: np.ndarray, dt: DiffType
    ) -> tuple[Updates, Layout] | None:
        """The output of a round of one time (``u``'s) whose keys ``ukeys`` (one key
        column, distinct) go from counts ``old`` to ``new`` (int64 matrices, a row per diff
        part, a column per key)."""
        if self.mode == "count":
            ro, rn = _any_part(old).nonzero()[0], _any_part(new).nonzero()[0]
            if not len(ro) and not len(rn):
                return None
            sel = np.concatenate((ro, rn))
            vals = np.concatenate((old.take(ro, axis=1), new.take(rn, axis=1)), axis=1)
            out_d = np.ones(len(sel), dtype=np.int64)
            out_d[: len(ro)] = -1
            return (
                Updates(
                    (ukeys.take(sel), *vals),
                    u.times[:1].repeat(len(sel), axis=0),
                    out_d,
                    INT_DIFF,
                ),
                self._count_layout(dt),
            )
        as_col = (lambda x: x[0]) if type(dt) is IntDiff else Rows
        keep, d = self._presence(dt, as_col(old), as_col(new))
        if not len(keep):
            return None
        key_layout = self.key_layout
        assert key_layout is not None
        return (
            Updates(
                (ukeys.take(keep),),
                u.times[:1].repeat(len(keep), axis=0),
                d.take(keep),
                INT_DIFF,
            ),
            key_layout,
        )

    def _dict_round(self, u: Updates, totals: DictTotals) -> Any:
        """Count updates of one time whose keys (integer columns) are few: rows grouped by
        a code packing the key columns (counted, not sorted), each group's diffs summed in
        one grouped sum, and the groups' counts read from and written to the dict in
        Python, the output built from those lists. NotImplemented when the batch does not
        fit the totals, or is a few rows (the general path counts those in Python)."""
        n = len(u)
        if n <= SMALL_ROWS:
            return NotImplemented
        cols = u.data[: self.key_width]
        m = _int_matrix(u.diffs, totals.dt, u.diff_type)
        if m is None:
            return NotImplemented
        # each row's code: the key columns' offsets from their least values, first column
        # most significant (so the codes of the rows' keys are one-to-one)
        los: list[int] = []
        spans: list[int] = []
        span = 1
        for c in cols:
            if c.dtype.kind not in "ib":
                return NotImplemented
            lo, hi = int(c.min()), int(c.max())
            los.append(lo)
            spans.append(hi - lo + 1)
            span *= hi - lo + 1
            if span > DICT_SPAN:
                return NotImplemented
        codes: np.ndarray | None = None
        for c, lo, w in zip(cols, los, spans, strict=True):
            term = c.astype(np.int64, copy=False) - lo
            codes = term if codes is None else codes * w + term
        assert codes is not None
        present = np.bincount(codes, minlength=span).nonzero()[0]
        b = n * _magnitude(m)
        if totals.bound + b > I64_MAX or not totals.admit_keys(len(present)):
            return NotImplemented
        totals.bound += b
        sums = _code_sums(m, codes, present, span, b).T.tolist()
        keys = self._code_keys(los, spans, present.tolist())
        int_diffs = type(totals.dt) is IntDiff
        get, zero = totals.totals.get, totals.zero
        live_keys, olds, news = [], [], []
        for k, s in zip(keys, sums, strict=True):
            if not any(s):
                continue  # (changes that cancel: nothing happens to the key)
            o = [get(k, 0)] if int_diffs else list(get(k, zero))
            live_keys.append(k)
            olds.append(o)
            news.append([a + c for a, c in zip(o, s, strict=True)])
        if not live_keys:
            return None
        out = self._listed_outputs(u, live_keys, olds, news)
        totals.put(live_keys, [f[0] for f in news] if int_diffs else news)
        return out

    def _code_keys(self, los: list[int], spans: list[int], codes: list[int]) -> list[Any]:
        """The keys (tuples of Python ints) of ``codes`` made from columns with least values
        ``los`` and ``spans``: decoded once per code while the columns' ranges stay the same
        (a few groups keep their codes from one round to the next)."""
        known = self._decoded
        if known is None or known[0] != (los, spans):
            known = self._decoded = ((los, spans), {})
        table = known[1]
        out = []
        for code in codes:
            k = table.get(code)
            if k is None:
                parts = []
                c = code
                for lo, w in zip(reversed(los), reversed(spans), strict=True):
                    c, r = divmod(c, w)
                    parts.append(lo + r)
                k = table[code] = tuple(reversed(parts))
            out.append(k)
        return out

    def _listed_outputs(
        self, u: Updates, keys: list[Any], olds: list[list[int]], news: list[list[int]]
    ) -> tuple[Updates, Layout] | None:
        """The output of a round of one time (``u``'s) whose ``keys`` (tuples of the key
        columns' values) go from counts ``olds`` to ``news`` (lists of int64 parts)."""
        dt = u.diff_type
        kcols = u.data[: self.key_width]
        if self.mode == "count":
            # every output row (key values, then count parts) in one int64 array, read by
            # columns: the retracted counts, then the new ones
            rows = [(*k, *o) for k, o in zip(keys, olds, strict=True) if any(o)]
            retracted = len(rows)
            rows += [(*k, *nw) for k, nw in zip(keys, news, strict=True) if any(nw)]
            if not rows:
                return None
            table = np.ascontiguousarray(np.array(rows, dtype=np.int64).T)
            kw = len(kcols)
            signs = np.ones(len(rows), dtype=np.int64)
            signs[:retracted] = -1
            return (
                Updates(
                    tuple(
                        t if c.dtype == np.int64 else t.astype(c.dtype)
                        for t, c in zip(table[:kw], kcols, strict=True)
                    )
                    + tuple(table[kw:]),
                    u.times[:1].repeat(len(rows), axis=0),
                    signs,
                    INT_DIFF,
                ),
                self._count_layout(dt),
            )
        if self.mode == "distinct":
            ds = [bool(any(nw)) - bool(any(o)) for o, nw in zip(olds, news, strict=True)]
            keep = [j for j, x in enumerate(ds) if x]
            d = np.array([ds[j] for j in keep], dtype=np.int64)
        else:
            width = len(olds[0])
            as_col = (lambda x: x[0]) if type(dt) is IntDiff else Rows
            old = np.array(olds, dtype=np.int64).reshape(len(olds), width).T
            new = np.array(news, dtype=np.int64).reshape(len(news), width).T
            at, dd = self._presence(dt, as_col(old), as_col(new))
            keep, d = at.tolist(), dd.take(at)
        if not keep:
            return None
        key_layout = self.key_layout
        assert key_layout is not None
        return (
            Updates(
                _listed_columns(kcols, [keys[j] for j in keep]),
                u.times[:1].repeat(len(keep), axis=0),
                d,
                INT_DIFF,
            ),
            key_layout,
        )


def _listed_columns(cols: tuple[np.ndarray, ...], keys: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """Key columns of the dtypes of ``cols`` holding ``keys`` (tuples of Python values)."""
    return tuple(np.array([k[j] for k in keys], dtype=c.dtype) for j, c in enumerate(cols))


#: the description of the batches a private count makes (read by no one: it keeps no trace)
_NO_DESC = Description(Antichain.of([(0,)], 1), Antichain.of([(0,)], 1), Antichain.of([(0,)], 1))
#: one-time rounds whose key columns pack into more codes than this take the general path
DICT_SPAN = 1024


def _all_before(times: np.ndarray, frontier: Antichain) -> bool:
    """Whether every time of a column of totally ordered times is complete at
    ``frontier`` (before its one element, or any time if it is empty)."""
    if not frontier.elements:
        return True
    if times.shape[0] == 0:
        return True
    return int(times.max()) < frontier.elements[0][0]


def _one_time(times: np.ndarray) -> bool:
    """Whether every row of a time column holds the same time."""
    n = times.shape[0]
    if n <= 1 or times.strides[0] == 0:
        return True
    if times.shape[1] == 1:
        t = times[:, 0]
        return bool((t == t[0]).all())
    return bool((times == times[0]).all())


def _int_matrix(d: Any, want: DiffType, dt: DiffType) -> np.ndarray | None:
    """The diff column ``d`` (of type ``dt``) as an int64 matrix, a row per part, when it
    is an int or int tuple column of the totals' type ``want``; None otherwise."""
    if dt is not want and dt != want:
        return None
    if type(dt) is IntDiff:
        return d.reshape(1, -1) if d.dtype == np.int64 else None
    m = getattr(d, "matrix", None)
    if m is not None:
        return m if m.dtype == np.int64 else None
    if not all(c.dtype == np.int64 for c in d):
        return None
    return diff_matrix(d)


def _any_part(m: np.ndarray) -> np.ndarray:
    """Per column of a matrix of diff parts: whether some part is not zero."""
    return np.logical_or.reduce(m, axis=0)


def _magnitude(m: np.ndarray) -> int:
    """The largest ``|value|`` of an int64 matrix (0 when empty)."""
    if not m.size:
        return 0
    if m.shape[0] == 1:
        return magnitude(m[0])
    return max(int(m.max()), -int(m.min()))


#: a matrix whose column sums are all within this is summed exactly in float64 arithmetic
FLOAT_EXACT = 1 << 53
#: at most this many groups are summed by a product with their indicator matrix
MATMUL_GROUPS = 16


def _code_sums(
    m: np.ndarray, codes: np.ndarray, present: np.ndarray, span: int, bound: int
) -> np.ndarray:
    """The sums of the columns of int64 matrix ``m`` per code (``codes[i]`` in ``[0,
    span)``), a column per code of ``present`` (the codes that occur, sorted). ``bound``
    bounds every partial sum's magnitude (rows times the largest ``|value|``).

    A few groups are summed as one matrix product with the groups' 0/1 indicator matrix in
    float64, which is exact while ``bound`` is within 2**53: every value, product and
    partial sum is then an integer float64 holds exactly, whatever order BLAS adds in.
    Otherwise one grouped ``np.add.at`` (exact in int64: ``bound`` is within int64)."""
    if len(present) <= MATMUL_GROUPS and bound <= FLOAT_EXACT:
        ind = (codes == present[:, None]).astype(np.float64)
        return (m.astype(np.float64) @ ind.T).astype(np.int64)
    return _group_sums(m, codes, span).take(present, axis=1)


def _group_sums(m: np.ndarray, grp: np.ndarray, g: int) -> np.ndarray:
    """The sums of the columns of int64 matrix ``m`` per group (``grp[i]`` in ``[0, g)``
    names column ``i``'s), a column per group. It is an error to call this when a sum
    could leave int64 (``np.add.at`` wraps)."""
    p = m.shape[0]
    out = np.zeros(p * g, dtype=np.int64)
    if p == 1:
        np.add.at(out, grp, m[0])
    else:
        cells = (np.arange(0, p * g, g)[:, None] + grp).ravel()
        np.add.at(out, cells, m.ravel())
    return out.reshape(p, g)


def _distinct_rows(
    key_cols: Any, times: np.ndarray, d: list[int], key_layout: Layout
) -> tuple[Updates, Layout] | None:
    """The output of ``distinct`` on a few rows: the keys of the rows whose presence
    changed, with ``d`` (each row's +1, -1 or 0); None when none did."""
    keep = [r for r, x in enumerate(d) if x]
    if not keep:
        return None
    idx = np.array(keep, dtype=np.int64)
    out = np.array([d[r] for r in keep], dtype=np.int64)
    return Updates(
        tuple(c[idx] for c in key_cols), take_times(times, idx), out, INT_DIFF
    ), key_layout


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
        s.producer_scope.kind.require_total("count_total(few=True)", "count()")
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
        return held_times(self.held)

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
            take_times(u.times, idx),
            np.array(signs, dtype=np.int64),
            INT_DIFF,
        )
