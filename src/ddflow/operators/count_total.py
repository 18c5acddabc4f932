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
    Rows,
    TupleDiff,
    int_column,
)
from ddflow.core.errors import DiffTypeError, TimeError
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, consolidate, split_complete, take_times
from ddflow.engine.operator import Operator, State, Stream
from ddflow.engine.worker import Worker
from ddflow.operators.arrange import Arrange
from ddflow.operators.linear import user_error
from ddflow.trace.batch import TraceBatch
from ddflow.trace.spine import int_key_sums_small, key_sums, sums_fit, tuple_key_sums_small

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
        #: each key's count so far, when kept (``KeyTotals``); None: not yet made (it is
        #: made from the trace at the next batch); False: not kept (the trace is read)
        self.totals: KeyTotals | None | Literal[False] = None
        self._layout: tuple[DiffType, Layout] | None = None

    def state(self) -> State:
        return {"handle": self.handle.state()}

    def load_state(self, state: State) -> None:
        self.handle.load_state(state["handle"])
        self.totals = None  # (rebuilt from the trace at the next batch)

    def run(self, frontier: Antichain) -> None:
        batches = self.take()
        try:
            outs = [self._batch(b) for b in batches]
        except BaseException:
            # a run is transactional (the engine puts the batches back): totals that may
            # have taken some of them are remade from the trace at the next run
            self.totals = None
            raise
        for out in outs:
            if out is not None:
                self.output.push(*out)
        self.handle.set_compaction(frontier, frontier)

    def _count_layout(self, dt: DiffType) -> Layout:
        """The layout of ``(key, count)`` records for counts of type ``dt`` (made once)."""
        if self._layout is None or self._layout[0] != dt:
            key_layout = self.arrangement.key_layout
            assert key_layout is not None
            self._layout = (dt, Tup((key_layout, dt.value_layout())))
        return self._layout[1]

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

    def _batch(self, batch: TraceBatch) -> tuple[Updates, Layout] | None:
        dt = batch.diff_type
        totals = self._key_totals(batch) if len(batch) else None
        history = (
            [] if totals is not None else self.arrangement.spine.batches_through(batch.desc.lower)
        )
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
        if small and _int_tuple(dt) and all(b.diff_type == dt for b in history):
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
            fit = True  # (``admit`` checked it)
            prior = totals.prior(batch)
        else:
            fit = sums_fit([*history, batch])
            prior = key_sums(history, batch.keys, dt, bounded=fit)
        new = dt.running_sums(batch.diffs, starts, prior, bounded=fit)
        if totals is not None:
            one_row_per_key = len(starts) == len(batch)
            totals.store(batch, new if one_row_per_key else dt.take(new, batch.bounds[1:] - 1))
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
            out_t = np.concatenate([take_times(times, ro), take_times(times, rn)])
            out_d = np.concatenate([np.full(len(ro), -1, np.int64), np.ones(len(rn), np.int64)])
            layout: Layout = self._count_layout(dt)
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
            Updates(tuple(c[keep] for c in key_cols), take_times(times, keep), d[keep], INT_DIFF),
            key_layout,
        )

    def _batch_dense_count(
        self, batch: TraceBatch, totals: DenseTotals
    ) -> tuple[Updates, Layout] | None:
        """``_batch`` in ``count`` mode for a batch of one row per key (one time) with dense
        kept totals: each key's count before is its total, after it the total plus the
        row's diff, all parts at once as matrices (a column per key). The same output as
        the general path, in the same order."""
        dt = batch.diff_type
        old = totals.prior_matrix()
        new = old + _diff_matrix(batch.diffs)  # (``admit`` bounds every sum in int64)
        totals.store_matrix(new)
        ro = np.flatnonzero(old.any(axis=0))
        rn = np.flatnonzero(new.any(axis=0))
        if not len(ro) and not len(rn):
            return None
        idx = np.concatenate((ro, rn))
        vals = np.concatenate((old.take(ro, axis=1), new.take(rn, axis=1)), axis=1)
        key_cols = batch.data[: self.arrangement.key_width]
        out_d = np.ones(len(idx), dtype=np.int64)
        out_d[: len(ro)] = -1
        return (
            Updates(
                tuple(c.take(idx, axis=0) for c in key_cols) + tuple(vals),
                batch.times.take(idx, axis=0),
                out_d,
                INT_DIFF,
            ),
            self._count_layout(dt),
        )

    def _key_parts(self, batch: TraceBatch) -> tuple[Any, Layout, np.ndarray]:
        """A batch's key columns, the keys' layout and the batch's times."""
        key_layout = self.arrangement.key_layout
        assert key_layout is not None
        return batch.data[: self.arrangement.key_width], key_layout, batch.times

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
        if totals is not None:
            totals.store_list(batch, [[f] for f in finals] if one_part else finals)
        n = len(new)
        key_cols, key_layout, times = self._key_parts(batch)
        if self.mode == "count":
            ro = [r for r in range(n) if old[r]]
            rn = [r for r in range(n) if new[r]]
            if not ro and not rn:
                return None
            idx = np.array(ro + rn, dtype=np.int64)
            vals = np.array([old[r] for r in ro] + [new[r] for r in rn], dtype=np.int64)
            out_d = np.array([-1] * len(ro) + [1] * len(rn), dtype=np.int64)
            cols = tuple(c[idx] for c in key_cols) + (vals,)
            return Updates(cols, take_times(times, idx), out_d, INT_DIFF), self._count_layout(dt)
        # distinct: (new != 0) - (old != 0)
        d = [(new[r] != 0) - (old[r] != 0) for r in range(n)]
        return _distinct_rows(key_cols, times, d, key_layout)

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
        if totals is None:  # (kept totals prove every count fits: ``KeyTotals.admit``)
            for v in (*old, *new):
                for x in v:
                    if not I64_MIN <= x <= I64_MAX:
                        return False
        else:
            totals.store_list(batch, finals)
        n = len(new)
        key_cols, key_layout, times = self._key_parts(batch)
        if self.mode == "count":
            ro = [r for r in range(n) if any(old[r])]
            rn = [r for r in range(n) if any(new[r])]
            if not ro and not rn:
                return None
            idx = np.array(ro + rn, dtype=np.int64)
            values = [old[r] for r in ro] + [new[r] for r in rn]
            # (one array of the parts as rows: each part a contiguous row of it)
            vals = np.array(list(zip(*values, strict=True)), dtype=np.int64)
            out_d = np.array([-1] * len(ro) + [1] * len(rn), dtype=np.int64)
            cols = tuple(c[idx] for c in key_cols) + tuple(vals)
            return Updates(cols, take_times(times, idx), out_d, INT_DIFF), self._count_layout(dt)
        # distinct: (new != 0) - (old != 0)
        d = [any(new[r]) - any(old[r]) for r in range(n)]
        return _distinct_rows(key_cols, times, d, key_layout)


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


class KeyTotals:
    """Each key's count so far (the sum of every diff ``count_total`` has counted), kept
    by the operator so that a batch's counts before it are read here instead of summed
    from the trace's batches (with a total order the count before a batch is the sum of
    all batches before it, and the operator sees each batch once, in order).

    It is a cache of what the trace holds, not state of its own: made from the trace when
    the first batch arrives (or after a checkpoint is loaded), and given up for good
    (``admit`` says no; the operator then reads the trace) as soon as a batch falls outside
    what it holds exactly: diffs that are not int64 ints or tuples of them, keys of another
    representation, a sum that could leave int64 (the batches' ``diff_bound``s, added up,
    above the int64 maximum), keys too many or too spread out. Two forms:
    ``DenseTotals`` (one integer key column: an array indexed by ``key - lo``) and
    ``DictTotals`` (few keys of integer columns: a dict)."""

    def __init__(self, dt: DiffType) -> None:
        self.dt = dt
        self.width = len(dt.parts) if isinstance(dt, TupleDiff) else 1
        self.bound = 0  # the sum of the diff bounds of the batches taken so far

    @staticmethod
    def make(key_width: int, batch: TraceBatch, history: list[TraceBatch]) -> KeyTotals | None:
        """Totals holding the sums of ``history`` (the trace before ``batch``), in the form
        ``batch``'s keys suit; None when none suits or ``history`` does not fit one."""
        dt = batch.diff_type
        if not (type(dt) is IntDiff or _int_tuple(dt)) or key_width < 1:
            return None
        kd = batch.keys.dtype
        totals: KeyTotals
        if key_width == 1 and _packable_int(kd):
            totals = DenseTotals(dt)
        elif kd.names and all(_packable_int(kd[f]) for f in kd.names):
            totals = DictTotals(dt)
        else:
            return None
        if sum(len(b) for b in history) > HISTORY_ROWS:
            return None  # (a large trace: read as it is)
        for b in history:
            if len(b) and not totals.admit(b):
                return None
            if len(b):
                totals.add(b)
        return totals

    def _admit_diffs(self, batch: TraceBatch) -> bool:
        """Whether ``batch``'s diffs are of this type, in int64 columns, and every key's
        total stays in int64 with them (then the bound grows by the batch's)."""
        if batch.diff_type is not self.dt and batch.diff_type != self.dt:
            return False
        cols = batch.diffs if isinstance(batch.diffs, tuple) else (batch.diffs,)
        if not all(c.dtype == np.int64 for c in cols):
            return False
        b = batch.diff_bound()
        if b is None or self.bound + b > I64_MAX:
            return False
        self.bound += b
        return True

    def admit(self, batch: TraceBatch) -> bool:
        """Whether ``batch`` can be counted with these totals (see the class doc); it is
        then the batch the next ``prior`` / ``store`` calls are about."""
        raise NotImplementedError

    def add(self, batch: TraceBatch) -> None:
        """Add every row of the admitted ``batch`` (making the totals from a trace)."""
        raise NotImplementedError

    def prior(self, batch: TraceBatch) -> Any:
        """The admitted batch's keys' totals, as a diff column."""
        raise NotImplementedError

    def prior_list(self, batch: TraceBatch) -> Any:
        """The same as Python ints (lists of them for tuple diffs)."""
        raise NotImplementedError

    def store(self, batch: TraceBatch, finals: Any) -> None:
        """Set the admitted batch's keys' totals to ``finals`` (a diff column)."""
        raise NotImplementedError

    def store_list(self, batch: TraceBatch, finals: list[Any]) -> None:
        """The same from Python ints (lists of them for tuple diffs)."""
        raise NotImplementedError


#: key totals are not made from a trace of more rows than this (it is read instead)
HISTORY_ROWS = 1 << 20
#: a dense table may span this many keys whatever the rows seen, ...
DENSE_MIN_SPAN = 1 << 16
#: ... and otherwise at most this many times the rows counted so far
DENSE_ROWS_FACTOR = 4
#: at most this many non-zero keys are kept in a dict, and this many taken from one batch
DICT_KEYS = 4096
DICT_BATCH_KEYS = 256


def _packable_int(dt: np.dtype) -> bool:
    """Whether every value of dtype ``dt`` is an integer that fits int64."""
    return dt.kind in "ib" or (dt.kind == "u" and dt.itemsize < 8)


class DenseTotals(KeyTotals):
    """Totals of one integer key column in one int64 matrix (a row per diff part, a column
    per key) indexed by ``key - lo``, grown (doubling) to cover the keys seen, as long as
    they span at most ``DENSE_MIN_SPAN`` keys or ``DENSE_ROWS_FACTOR`` times the rows
    counted."""

    def __init__(self, dt: DiffType) -> None:
        super().__init__(dt)
        self.lo = 0
        self.m = np.zeros((self.width, 0), dtype=np.int64)
        self.rows = 0
        self.idx = np.zeros(0, dtype=np.int64)  # the admitted batch's keys, as positions

    def admit(self, batch: TraceBatch) -> bool:
        keys = batch.keys
        if not _packable_int(keys.dtype) or keys.ndim != 1 or not self._admit_diffs(batch):
            return False
        self.rows += len(batch)
        klo, khi = int(keys[0]), int(keys[-1])
        cap = self.m.shape[1]
        if not cap or klo < self.lo or khi >= self.lo + cap:
            lo = min(self.lo, klo) if cap else klo
            end = max(self.lo + cap, khi + 1) if cap else khi + 1
            new_cap = max(end - lo, 2 * cap, 64)
            if new_cap > max(DENSE_MIN_SPAN, DENSE_ROWS_FACTOR * self.rows):
                return False
            if cap and klo < self.lo:
                lo = end - new_cap  # (room below: keys may keep growing downwards)
            if lo < I64_MIN or lo + new_cap > I64_MAX:
                return False
            grown = np.zeros((self.width, new_cap), dtype=np.int64)
            grown[:, self.lo - lo : self.lo - lo + cap] = self.m
            self.m, self.lo = grown, lo
        self.idx = keys.astype(np.int64, copy=False) - self.lo
        return True

    def add(self, batch: TraceBatch) -> None:
        rows = np.repeat(self.idx, np.diff(batch.bounds))
        for c, d in zip(self.m, _diff_rows(batch.diffs), strict=True):
            np.add.at(c, rows, d)

    def prior_matrix(self) -> np.ndarray:
        """The admitted batch's keys' totals, a column per key."""
        return self.m.take(self.idx, axis=1)

    def store_matrix(self, finals: np.ndarray) -> None:
        """Set the admitted batch's keys' totals to the columns of ``finals``."""
        self.m[:, self.idx] = finals

    def prior(self, batch: TraceBatch) -> Any:
        p = self.prior_matrix()
        return p[0] if type(self.dt) is IntDiff else Rows(p)

    def prior_list(self, batch: TraceBatch) -> Any:
        p = self.prior_matrix()
        return p[0].tolist() if type(self.dt) is IntDiff else p.T.tolist()

    def store(self, batch: TraceBatch, finals: Any) -> None:
        self.m[:, self.idx] = _diff_matrix(finals)

    def store_list(self, batch: TraceBatch, finals: list[Any]) -> None:
        if type(self.dt) is IntDiff:
            self.m[0, self.idx] = finals
        else:
            self.m[:, self.idx] = np.array(finals, dtype=np.int64).reshape(-1, self.width).T


def _diff_rows(d: Any) -> tuple[np.ndarray, ...]:
    """The parts of a diff column (an int column is its one part)."""
    return d if isinstance(d, tuple) else (d,)


def _diff_matrix(d: Any) -> np.ndarray:
    """The parts of an int64 diff column as the rows of one matrix."""
    m = getattr(d, "matrix", None)
    if m is not None:
        return m
    rows = _diff_rows(d)
    return np.concatenate(rows).reshape(len(rows), len(rows[0]))


class DictTotals(KeyTotals):
    """Totals of a few keys (of integer columns) in a dict from the key, as Python values,
    to its non-zero total (an int, or a tuple of ints for tuple diffs)."""

    def __init__(self, dt: DiffType) -> None:
        super().__init__(dt)
        self.totals: dict[Any, Any] = {}
        self.keys: list[Any] = []  # the admitted batch's keys, as Python values
        self.zero: Any = 0 if type(dt) is IntDiff else (0,) * self.width
        self.key_dtype: np.dtype | None = None  # a key dtype known to be integer fields

    def admit(self, batch: TraceBatch) -> bool:
        kd = batch.keys.dtype
        if kd != self.key_dtype:  # (checked once per key dtype)
            if not kd.names or not all(_packable_int(kd[f]) for f in kd.names):
                return False
            self.key_dtype = kd
        if (
            batch.num_keys > DICT_BATCH_KEYS
            or len(self.totals) + batch.num_keys > DICT_KEYS
            or not self._admit_diffs(batch)
        ):
            return False
        self.keys = batch.keys.tolist()
        return True

    def add(self, batch: TraceBatch) -> None:
        bounds = batch.bounds.tolist()
        diffs = batch.diffs if isinstance(batch.diffs, tuple) else (batch.diffs,)
        cols = [d.tolist() for d in diffs]
        prior = self.prior_list(batch)
        finals: list[Any] = []
        for j, t in enumerate(prior):
            acc = [t] if type(self.dt) is IntDiff else t
            for r in range(bounds[j], bounds[j + 1]):
                acc = [a + c[r] for a, c in zip(acc, cols, strict=True)]
            finals.append(acc[0] if type(self.dt) is IntDiff else acc)
        self.store_list(batch, finals)

    def prior(self, batch: TraceBatch) -> Any:
        vals = self.prior_list(batch)
        if type(self.dt) is IntDiff:
            return np.array(vals, dtype=np.int64)
        arr = np.array(list(zip(*vals, strict=True)), dtype=np.int64)
        return tuple(arr.reshape(self.width, len(vals)))

    def prior_list(self, batch: TraceBatch) -> Any:
        get, zero = self.totals.get, self.zero
        if type(self.dt) is IntDiff:
            return [get(k, 0) for k in self.keys]
        return [list(get(k, zero)) for k in self.keys]

    def store(self, batch: TraceBatch, finals: Any) -> None:
        if type(self.dt) is IntDiff:
            self.store_list(batch, finals.tolist())
        else:
            self.store_list(
                batch, [list(r) for r in zip(*(f.tolist() for f in finals), strict=True)]
            )

    def store_list(self, batch: TraceBatch, finals: list[Any]) -> None:
        totals = self.totals
        for k, f in zip(self.keys, finals, strict=True):
            if type(self.dt) is IntDiff:
                if f:
                    totals[k] = f
                else:
                    totals.pop(k, None)
            elif any(f):
                totals[k] = tuple(f)
            else:
                totals.pop(k, None)


def _int_tuple(dt: DiffType) -> bool:
    """Whether ``dt`` is a tuple diff (plain, ``Sum`` or ``DiffPair``) of int parts."""
    return type(dt) is TupleDiff and all(type(p) is IntDiff for p in dt.parts)


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
            take_times(u.times, idx),
            np.array(signs, dtype=np.int64),
            INT_DIFF,
        )
