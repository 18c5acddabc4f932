"""``reduce`` and its family (``reduce_abelian``, ``count``, ``distinct``, ``threshold``,
``min``, ``max``, ``top_k``, ``reduce_solve``): per-key reducers over the accumulated input,
correct for any lattice of times. What is computed per key is a ``Reducer``
(``ddflow.operators.reducers``); this operator decides when.

The output at time ``t`` must be ``reducer(key, input accumulated at t)`` for every ``t``.
Input accumulations change only at joins of input update times, so for each key touched by
a batch ``[lower, upper)`` the operator evaluates the reducer at its *interesting times*:
the new update times of the key, closed under ``join`` with every time in the key's input
and output history, that lie in ``[lower, upper)``. Times of that closure beyond ``upper``
are kept as *pending work* and evaluated when the frontier reaches them. At each interesting
time (in a linear extension of the partial order) the output is corrected by ``desired -
current``, where ``current`` is the output trace accumulated at that time plus corrections
already made in this batch. Correctness: every output update sits at a closure time, and for
any time ``t`` the join of the closure times ``<= t`` is itself a closure time with the same
input and output.

Three paths, one meaning:

* vectorized reducers run over columns for all keys at once (``ddflow.operators.lattice``);
* with totally ordered times, a reducer of a key's total diff (``TotalsReducer``: count,
  distinct, threshold) over subtractable diffs needs no interesting times: running sums from
  the input trace, retractions from the output trace;
* reducers without a kernel (user logic) run per key in Python: the reference path, which
  also runs any reducer's ``reference`` (``Reference``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ddflow.core.columns import Layout, Tup, concat_columns, infer_layout, lex_order, run_starts
from ddflow.core.diff import INT_DIFF, DiffType, diff_type_of
from ddflow.core.errors import DataError
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, concat_updates, consolidate, take_times
from ddflow.engine.operator import Operator, State
from ddflow.operators.arrange import Arrange
from ddflow.operators.lattice import lattice_reduce
from ddflow.operators.linear import user_error
from ddflow.operators.reducers import Reducer, TopK, TotalsReducer, group_starts
from ddflow.trace.batch import Description, TraceBatch, comparable, key_index, ranges_to_indices
from ddflow.trace.spine import Spine, key_sums, sums_fit

if TYPE_CHECKING:
    from ddflow.engine.worker import Worker

__all__ = ["Reduce"]

Flat = tuple[int, ...]


def _join(a: Flat, b: Flat) -> Flat:
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


def _le(a: Flat, b: Flat) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True))


class Reduce(Operator):
    """Applies ``reducer`` to each key of ``arrangement`` (see the module docstring).

    State: the output trace (``out_spine``), the frontier reached (``lower``), pending work
    (``pend_keys``/``pend_times`` for vectorized reducers, ``pending`` per key otherwise) and
    what was learnt of the input and output (diff types, the output values' layout)."""

    wakes_on_frontier = False

    state_version = 1

    def __init__(
        self,
        worker: Worker,
        arrangement: Arrange,
        reducer: Reducer,
        *,
        in_diff: DiffType | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(worker, [arrangement.output], name or reducer.name)
        self.arrangement = arrangement
        self.reducer = reducer
        self.out_dt: DiffType | None = reducer.output_diffs(in_diff)
        dim = self.kind.dim
        self.in_h = arrangement.spine.handle()
        self.out_spine = Spine(0, dim)
        self.out_h = self.out_spine.handle()
        self.spine = self.out_spine  # statistics
        self.lower = Antichain.of([self.kind.minimum()], dim)
        self.pending: dict[Any, set[Flat]] = {}
        self._in_dt: DiffType | None = None
        # pending work of the vectorized path: key columns and times, one row each
        self.pend_keys: tuple[np.ndarray, ...] | None = None
        self.pend_times = np.zeros((0, dim), dtype=np.int64)
        self.out_val_layout: Layout | None = reducer.output_values(in_diff, arrangement.val_layout)
        kl = arrangement.key_layout
        if kl is not None and self.out_val_layout is not None:
            # the output's shape follows from the input's (known as the dataflow is built)
            self.output.layout = kl if reducer.keys_only else Tup((kl, self.out_val_layout))

    def outstanding_times(self) -> np.ndarray | None:
        parts = [self.pend_times] if len(self.pend_times) else []
        if self.pending:
            parts.append(
                np.array([t for ts in self.pending.values() for t in ts], dtype=np.int64).reshape(
                    -1, self.kind.dim
                )
            )
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else None

    def state(self) -> State:
        return {
            "in_h": self.in_h.state(),
            "out_spine": self.out_spine.state(),
            "out_h": self.out_h.state(),
            "lower": self.lower,
            "pending": {k: set(ts) for k, ts in self.pending.items()},
            "pend_keys": self.pend_keys,
            "pend_times": self.pend_times,
            "in_dt": self._in_dt,
            "out_dt": self.out_dt,
            "out_val_layout": self.out_val_layout,
        }

    def load_state(self, state: State) -> None:
        self.in_h.load_state(state["in_h"])
        self.out_spine.load_state(state["out_spine"])
        self.out_h.load_state(state["out_h"])
        self.lower = state["lower"]
        self.pending = {k: set(ts) for k, ts in state["pending"].items()}
        self.pend_keys, self.pend_times = state["pend_keys"], state["pend_times"]
        self._in_dt, self.out_dt = state["in_dt"], state["out_dt"]
        self.out_val_layout = state["out_val_layout"]

    # -- driver --------------------------------------------------------------------------------
    def _total_path(self) -> bool:
        """Whether the totally ordered fast path applies: a reducer of totals, int times and
        subtractable input diffs (monoid totals take the lattice path, whose sums need no
        running prefix)."""
        if not (isinstance(self.reducer, TotalsReducer) and self.kind.total):
            return False
        bs = self.arrangement.spine.batches()
        return bool(bs) and bs[0].diff_type.abelian

    def run(self, frontier: Antichain) -> None:
        batches = self.take()
        lower, upper = self.lower, frontier
        if lower == upper and not batches:
            return
        reducer = self.reducer
        total = reducer.vectorized and self._total_path()
        vectorized = reducer.vectorized and not total
        prefix = vectorized and self._prefix_path(batches)
        few = vectorized and not prefix and self._few(batches)
        if few:
            self._pending_as_dict()
            vectorized = False
        elif vectorized:
            self._pending_as_arrays()
        if vectorized:
            due_rows = (
                (~upper.beyond_mask(self.pend_times)).nonzero()[0]
                if len(self.pend_times)
                else np.empty(0, dtype=np.int64)
            )
            has_due = len(due_rows) > 0
            due: list[Any] = []
        else:
            due = [k for k, ts in self.pending.items() if any(not upper.less_equal(t) for t in ts)]
            has_due = bool(due)
        out: Updates | None = None
        new_pending = None
        new_pend_arrays = None
        if self.arrangement.key_layout is not None and (batches or has_due):
            # (due pending work can meet a trace whose updates all cancelled away: then the
            # diff type is the one seen last)
            held = self.arrangement.spine.batches()
            in_dt = (
                batches[0].diff_type
                if batches
                else held[0].diff_type
                if held
                else self._in_dt or INT_DIFF
            )
            self._in_dt = in_dt
            reducer.check_input(in_dt, self.name)
            if total:
                out = self._total_vectorized(batches, lower, in_dt)
            elif prefix:
                out = self.top_k_prefix(batches, lower, in_dt)
            elif vectorized:
                out, new_pend_arrays = self._lattice(batches, due_rows, lower, upper, in_dt)
            else:
                done = self._per_key(
                    batches, due, lower, upper, in_dt, max_history=self.FEW_HISTORY if few else None
                )
                if done is not None:
                    out, new_pending = done
                else:  # a key's history too long for the per-key path: over columns after all
                    self._pending_as_arrays()
                    due_rows = (~upper.beyond_mask(self.pend_times)).nonzero()[0]
                    out, new_pend_arrays = self._lattice(batches, due_rows, lower, upper, in_dt)
        # commit
        if new_pending is not None:
            self.pending = new_pending
        if new_pend_arrays is not None:
            self.pend_keys, self.pend_times = new_pend_arrays
        self.lower = upper
        kw = self.arrangement.key_width
        if out is not None and len(out):
            out_batch = TraceBatch.build(kw, out, Description(lower, upper, self.out_spine.logical))
            self.out_spine.insert(out_batch)
        else:
            self.out_spine.advance_upper(upper)
        self.out_h.set_compaction(upper, upper)
        self.in_h.set_compaction(upper, upper)
        if out is not None and len(out):
            self.output.push(*self._as_output(out))

    # -- a few updates: the per-key path for a vectorized reducer --------------------------------
    #: at most this many new updates and pending times in a run go through the per-key path
    #: (a handful of keys costs less there than the fixed cost of the column kernels, a few
    #: hundred numpy calls), when keys, values and diffs are plain ints
    FEW_UPDATES = 16
    #: ... and at most this many rows of the keys' input and output history together
    FEW_HISTORY = 256

    def _few(self, batches: list[TraceBatch]) -> bool:
        """Whether this run of a vectorized reducer that has its per-key form goes through the
        per-key path: a few new updates and pending times, over ``int64`` key and value
        columns and int diffs (the per-key path's records then come back as the same
        ``int64`` columns)."""
        n = len(self.pend_times)
        if self.pending:
            n += sum(map(len, self.pending.values()))
        for b in batches:
            n += len(b)
        if (
            n > self.FEW_UPDATES
            or self.arrangement.key_width == 0
            or not self.reducer.has_reference
        ):
            return False
        sample = batches[0] if batches else None
        if sample is None:
            held = self.arrangement.spine.batches()
            if not held:
                return False
            sample = held[0]
        if sample.diff_type is not INT_DIFF or sample.diffs.dtype != np.int64:
            return False
        return all(c.dtype == np.int64 for b in batches or [sample] for c in b.data)

    def _pending_as_dict(self) -> None:
        """Pending work of the column path moved into the per-key path's form."""
        n = len(self.pend_times)
        if not n:
            return
        kl = self.arrangement.key_layout
        assert kl is not None and self.pend_keys is not None
        pending = self.pending
        for k, t in zip(kl.to_records(self.pend_keys, n), self.pend_times.tolist(), strict=True):
            ts = pending.get(k)
            if ts is None:
                pending[k] = {tuple(t)}
            else:
                ts.add(tuple(t))
        self.pend_keys = None
        self.pend_times = np.zeros((0, self.kind.dim), dtype=np.int64)

    def _pending_as_arrays(self) -> None:
        """Pending work of the per-key path moved into the column path's form."""
        if not self.pending or not self.reducer.vectorized:
            return
        kl = self.arrangement.key_layout
        assert kl is not None
        keys = [k for k, ts in self.pending.items() for _ in ts]
        times = np.array([t for ts in self.pending.values() for t in ts], dtype=np.int64).reshape(
            -1, self.kind.dim
        )
        cols = kl.to_columns(keys)
        if self.pend_keys is not None and len(self.pend_times):
            cols = tuple(concat_columns([a, b]) for a, b in zip(self.pend_keys, cols, strict=True))
            times = np.concatenate([self.pend_times, times])
        self.pend_keys, self.pend_times = cols, times
        self.pending = {}

    def _as_output(self, out: Updates) -> tuple[Updates, Layout]:
        kl = self.arrangement.key_layout
        assert kl is not None and self.out_val_layout is not None
        if self.reducer.keys_only:
            return Updates(out.data[: kl.width], out.times, out.diffs, out.diff_type), kl
        return out, Tup((kl, self.out_val_layout))

    # -- totally ordered times, a reducer of totals, vectorized -----------------------------------
    def _total_vectorized(
        self, batches: list[TraceBatch], lower: Antichain, dt: DiffType
    ) -> Updates | None:
        reducer = self.reducer
        assert isinstance(reducer, TotalsReducer)
        arrangement = self.arrangement
        kw = arrangement.key_width
        if arrangement.val_layout is not None and arrangement.val_layout.width:
            raise DataError(f"'{self.name}' needs an arrangement by self")
        if self.out_val_layout is None:
            self.out_val_layout = reducer.output_values(dt, arrangement.val_layout)
        if len(batches) == 1:
            nb = batches[0]
        else:
            u = concat_updates([b.updates() for b in batches])
            nb = TraceBatch.build(kw, u, batches[0].desc)
        history = list(arrangement.spine.batches_through(lower))
        fit = sums_fit([*history, nb])
        prior = key_sums(history, nb.keys, dt, bounded=fit)
        starts = nb.bounds[:-1]
        new = dt.running_sums(nb.diffs, starts, prior, bounded=fit)
        n = len(nb)
        not_first = np.ones(n, dtype=bool)
        not_first[starts] = False
        prev_rows = not_first.nonzero()[0]
        key_cols = nb.data[:kw]
        times = nb.times
        parts: list[Updates] = []
        # current output of each key, retracted at the key's first new time
        cur, owner = self.out_spine.gather(nb.keys, self.out_spine.batches())
        if cur is not None:
            cur_t = take_times(take_times(times, starts), owner)
            parts.append(Updates(cur.data, cur_t, cur.diff_type.negate(cur.diffs), cur.diff_type))
        # the output of each row's running total, minus that of the total before it
        old = dt.take(new, prev_rows - 1)
        for rows, totals, sign in ((np.arange(n), new, 1), (prev_rows, old, -1)):
            r, vals, diffs = reducer.of_totals(self, dt, totals)
            r = rows[r]
            parts.append(
                Updates(
                    tuple(c[r] for c in key_cols) + vals,
                    take_times(times, r),
                    diffs if sign == 1 else INT_DIFF.negate(diffs),
                    INT_DIFF,
                )
            )
        return consolidate(concat_updates(parts))

    # -- totally ordered times, the k least values: a prefix of each key's values -------------
    #: rows of each key's run read from each batch at first (times the ``k`` kept), the
    #: prefix growing fourfold for the keys it leaves undecided
    PREFIX_ROWS = 2
    #: ... and at least this many
    PREFIX_MIN = 8

    def _prefix_path(self, batches: list[TraceBatch]) -> bool:
        """Whether this run of ``top_k`` reads each changed key's least values only: totally
        ordered times with no work pending, one new batch whose updates share one time,
        keyed input and int64 diffs."""
        if type(self.reducer) is not TopK or not self.kind.total or len(batches) != 1:
            return False  # (several new batches in one run: the column path)
        if len(self.pend_times) or self.pending or not self.arrangement.key_width:
            # (pending work, in either path's form, is left to the paths that hold it)
            return False
        b = batches[0]
        if b.diff_type is not INT_DIFF or b.diffs.dtype != np.int64 or not len(b):
            return False
        return bool((b.times == b.times[:1]).all())

    def top_k_prefix(self, batches: list[TraceBatch], lower: Antichain, in_dt: DiffType) -> Any:
        """``top_k`` at the one time ``t`` of the new updates, for the keys they touch,
        reading each key's least values only. Each batch holds a key's rows sorted by value,
        so the first ``j`` rows of its run hold its least values; a value below the first
        row left unread in every batch that had more is complete (all its rows read), and
        once the complete values of a key add up to ``k`` or more, its ``k`` least values
        are known. Keys left undecided (values that cancel, counts of one) read four times
        as many rows, until decided. The output is corrected by what is desired minus what
        the output trace holds."""
        reducer = self.reducer
        assert isinstance(reducer, TopK)
        arrangement = self.arrangement
        kw = arrangement.key_width
        self._learn_output(in_dt)
        b = batches[0]
        probe = b.keys
        probe_cols = tuple(c[b.bounds[:-1]] for c in b.data[:kw])
        nq = len(probe)
        t = b.times[:1]
        readable = [*arrangement.spine.batches_through(lower), b]
        k = reducer.k
        j = max(self.PREFIX_ROWS * k, self.PREFIX_MIN)
        open_q = np.arange(nq)
        parts: list[tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray]] = []
        while len(open_q):
            sub = probe[open_q]
            q, vals, sums, cut = least_rows(readable, sub, kw, j)
            q = open_q[q]
            decided = np.ones(len(open_q), dtype=bool)
            if len(cut):
                # a key cut short in some batch is decided once its complete values add up
                # to k places
                if (sums < 0).any():
                    raise DataError("top_k needs non-negative accumulated counts")
                held = np.bincount(q, weights=sums, minlength=nq)  # (compared with k only)
                decided[cut] = held[open_q[cut]] >= k
            keep = decided[np.searchsorted(open_q, q)]
            parts.append((q[keep], tuple(c[keep] for c in vals), sums[keep]))
            open_q = open_q[~decided]
            j *= 4
        iq = np.concatenate([p[0] for p in parts])
        nv = len(parts[0][1])
        iv = tuple(concat_columns([p[1][i] for p in parts]) for i in range(nv))
        isum = np.concatenate([p[2] for p in parts])
        if len(parts) > 1:
            order = lex_order((iq, *iv))
            iq, iv, isum = iq[order], tuple(c[order] for c in iv), isum[order]
        want = reducer.desired(self, nq, iq, iv, isum, in_dt)
        have = _accumulated(self.out_spine, probe, kw)
        cq, cv, cd = reducer.corrections(nq, want, have, INT_DIFF)
        if not len(cq):
            return None
        times = np.repeat(np.asarray(t, dtype=np.int64), len(cq), axis=0)
        return Updates(tuple(c[cq] for c in probe_cols) + tuple(cv), times, cd, INT_DIFF)

    def _learn_output(self, in_dt: DiffType) -> DiffType:
        """The output's value layout (the reducer's, else the input's) and diff type, noted
        once the input's diff type is known; returns the diff type."""
        arrangement = self.arrangement
        if self.out_val_layout is None:
            self.out_val_layout = self.reducer.output_values(in_dt, arrangement.val_layout)
        if self.out_val_layout is None:
            self.out_val_layout = arrangement.val_layout
        self.out_dt = self.reducer.output_diffs(in_dt) or INT_DIFF
        return self.out_dt

    # -- any lattice, vectorized reducers: over columns ------------------------------------------
    def _lattice(
        self,
        batches: list[TraceBatch],
        due_rows: np.ndarray,
        lower: Antichain,
        upper: Antichain,
        in_dt: DiffType,
    ) -> tuple[Updates | None, tuple[tuple[np.ndarray, ...] | None, np.ndarray]]:
        arrangement = self.arrangement
        kl = arrangement.key_layout
        assert kl is not None
        kw = kl.width
        dim = self.kind.dim
        reducer = self.reducer
        out_dt = self._learn_output(in_dt)
        key_parts: list[tuple[np.ndarray, ...]] = []
        time_parts: list[np.ndarray] = []
        for b in batches:
            key_parts.append(tuple(b.data[:kw]))
            time_parts.append(b.times)
        pk = self.pend_keys
        c_owner: list[np.ndarray]
        if len(batches) == 1 and not len(due_rows):
            # the probe keys are the batch's own: its key index, sorted and distinct
            b = batches[0]
            starts = b.bounds[:-1]
            probe_cols = tuple(c[starts] for c in key_parts[0])
            probe = b.keys
            c_owner = [np.arange(len(starts)).repeat(b.bounds[1:] - starts)]
        else:
            if pk is not None and len(due_rows):
                key_parts.append(tuple(c[due_rows] for c in pk))
            kcols = tuple(concat_columns([p[i] for p in key_parts]) for i in range(kw))
            order = lex_order(kcols)
            kcols = tuple(c[order] for c in kcols)
            starts = run_starts(kcols, len(order))
            probe_cols = tuple(c[starts] for c in kcols)
            probe = key_index(probe_cols)
            c_owner = [
                np.searchsorted(*comparable(probe, key_index(p))) for p in key_parts[: len(batches)]
            ]
        c_times = list(time_parts)
        keep_pending = np.ones(len(self.pend_times), dtype=bool)
        if pk is not None and len(self.pend_times):
            sprobe, pidx = comparable(probe, key_index(pk))
            pos = sprobe.searchsorted(pidx)
            posc = np.minimum(pos, len(probe) - 1)
            hit = np.asarray(sprobe[posc] == pidx, dtype=bool)
            c_owner.append(pos[hit])
            c_times.append(self.pend_times.compress(hit, axis=0))
            keep_pending = ~hit
        co = np.concatenate(c_owner) if c_owner else np.empty(0, dtype=np.int64)
        ct = np.concatenate(c_times) if c_times else np.empty((0, dim), dtype=np.int64)
        if reducer.closure:
            in_u, in_owner = arrangement.spine.gather(
                probe, arrangement.spine.batches_through(upper)
            )
        else:
            # evaluated at the new times only: against the new updates (see ``SolveMin``)
            in_u = concat_updates([b.updates() for b in batches]) if batches else None
            in_owner = (
                np.concatenate(c_owner[: len(batches)]) if batches else np.empty(0, dtype=np.int64)
            )
        out_u, out_owner = self.out_spine.gather(probe, self.out_spine.batches())
        out, pend_o, pend_t = lattice_reduce(
            reducer,
            self,
            probe_cols,
            len(probe),
            co.astype(np.int64),
            ct,
            in_owner,
            in_u,
            out_owner,
            out_u,
            kw,
            in_dt,
            out_dt,
            lower,
            upper,
            dim,
        )
        new_keys: list[tuple[np.ndarray, ...]] = []
        new_times: list[np.ndarray] = []
        if pk is not None and keep_pending.any():
            kp = keep_pending.nonzero()[0]
            new_keys.append(tuple(c[kp] for c in pk))
            new_times.append(self.pend_times[kp])
        if len(pend_o):
            new_keys.append(tuple(c[pend_o] for c in probe_cols))
            new_times.append(pend_t)
        if new_keys:
            nk = tuple(concat_columns([p[i] for p in new_keys]) for i in range(kw))
            return out, (nk, np.concatenate(new_times))
        return out, (None, np.zeros((0, dim), dtype=np.int64))

    # -- any lattice: the per-key reference path -------------------------------------------------
    def _current(
        self, t: Flat, outputs: list[tuple[Any, Flat, Any]], produced: list[tuple[Any, Flat, Any]]
    ) -> dict[Any, Any]:
        """The output accumulated at ``t``: ``value -> diff`` (zeros kept)."""
        odt = self.out_dt
        current: dict[Any, Any] = {}
        for v, s, d in list(outputs) + produced:
            if _le(s, t):
                current[v] = (
                    d if v not in current else (odt or diff_type_of(d)).py_plus(current[v], d)
                )
        return current

    def _solve_at(
        self,
        key: Any,
        t: Flat,
        inp: list[tuple[Any, Any]],
        outputs: list[tuple[Any, Flat, Any]],
        produced: list[tuple[Any, Flat, Any]],
        in_dt: DiffType,
    ) -> None:
        """An ``adds_only`` reducer at one time: it sees input and current output and
        proposes updates that are added (never a difference: no subtraction needed)."""
        odt = self.out_dt
        current = self._current(t, outputs, produced)
        cur = sorted(
            ((v, d) for v, d in current.items() if not (odt or diff_type_of(d)).py_is_zero(d)),
            key=lambda vd: vd[0],
        )
        try:
            ups = self.reducer.reference(self, key, inp, cur, in_dt)
        except Exception as e:
            raise user_error(self, e) from e
        for v, d in ups:
            if self.out_dt is None:
                self.out_dt = diff_type_of(d)
            if not self.out_dt.py_is_zero(d):
                produced.append((v, t, d))

    def _per_key(
        self,
        batches: list[TraceBatch],
        due: list[Any],
        lower: Antichain,
        upper: Antichain,
        in_dt: DiffType,
        max_history: int | None = None,
    ) -> tuple[Updates | None, dict[Any, set[Flat]]] | None:
        """The per-key path; None (nothing done) when ``max_history`` is given and the
        probed keys' input and output history hold more rows than that."""
        arrangement = self.arrangement
        reducer = self.reducer
        kl, vl = arrangement.key_layout, arrangement.val_layout
        assert kl is not None and vl is not None
        kw = kl.width
        if self.out_val_layout is None:
            self.out_val_layout = reducer.output_values(in_dt, vl)
        if self.out_dt is None:
            self.out_dt = reducer.output_diffs(in_dt)
        new_u = concat_updates([b.updates() for b in batches]) if batches else None
        # distinct probe keys: keys of new updates and keys with due pending times
        key_parts = []
        if new_u is not None:
            key_parts.append(tuple(new_u.data[:kw]))
        if due:
            key_parts.append(kl.to_columns(due))
        kcols = tuple(concat_columns([p[i] for p in key_parts]) for i in range(kw))
        order = lex_order(kcols) if kw else np.arange(0)
        kcols = tuple(c[order] for c in kcols)
        starts = run_starts(kcols, len(order))
        kcols = tuple(c[starts] for c in kcols)
        probe = key_index(kcols)
        keys = kl.to_records(kcols, len(starts))
        nk = len(keys)

        def grouped(u: Updates | None, owner: np.ndarray, vlayout: Layout) -> list[list[tuple]]:
            groups: list[list[tuple]] = [[] for _ in range(nk)]
            if u is None or not len(u):
                return groups
            vals = vlayout.to_records(u.data[kw:], len(u))
            times = [tuple(t) for t in u.times.tolist()]
            diffs = u.diff_type.to_values(u.diffs)
            for o, v, t, d in zip(owner.tolist(), vals, times, diffs, strict=True):
                groups[o].append((v, t, d))
            return groups

        in_u, in_owner = arrangement.spine.gather(probe, arrangement.spine.batches_through(upper))
        out_u, out_owner = self.out_spine.gather(probe, self.out_spine.batches())
        if max_history is not None and len(in_owner) + len(out_owner) > max_history:
            return None
        inputs = grouped(in_u, in_owner, vl)
        out_vl = self.out_val_layout or Tup(())
        outputs = grouped(out_u, out_owner, out_vl) if out_u is not None else [[] for _ in keys]
        new_times: list[set[Flat]] = [set() for _ in range(nk)]
        if new_u is not None:
            pos = np.searchsorted(*comparable(probe, key_index(tuple(new_u.data[:kw]))))
            for p, t in zip(pos.tolist(), new_u.times.tolist(), strict=True):
                new_times[p].add(tuple(t))
        pending = {k: set(ts) for k, ts in self.pending.items()}
        total = self.kind.total
        emitted: list[tuple[Any, Any, Flat, Any]] = []
        for i, key in enumerate(keys):
            ts = new_times[i] | pending.pop(key, set())
            if total:
                now = sorted(ts)
                later: list[Flat] = []
            else:
                hist = {t for _v, t, _d in inputs[i]} | {t for _v, t, _d in outputs[i]}
                closure = set(ts)
                work = list(closure)
                while work:
                    c = work.pop()
                    for h in list(hist | closure):
                        j = _join(c, h)
                        if j not in closure:
                            closure.add(j)
                            work.append(j)
                now = sorted(t for t in closure if not upper.less_equal(t))
                later = [t for t in closure if upper.less_equal(t)]
            if later:
                pending[key] = set(later)
            produced: list[tuple[Any, Flat, Any]] = []
            for t in now:
                acc: dict[Any, Any] = {}
                for v, s, d in inputs[i]:
                    if _le(s, t):
                        acc[v] = in_dt.py_plus(acc.get(v), d)
                inp = [(v, d) for v, d in acc.items() if not in_dt.py_is_zero(d)]
                try:
                    inp.sort(key=lambda vd: vd[0])
                except TypeError as e:
                    raise DataError(f"values of key {key!r} cannot be ordered: {e}") from e
                if reducer.adds_only:
                    self._solve_at(key, t, inp, outputs[i], produced, in_dt)
                    continue
                try:
                    desired_list = reducer.reference(self, key, inp, [], in_dt)
                except Exception as e:
                    raise user_error(self, e) from e
                if self.out_dt is None and desired_list:
                    self.out_dt = diff_type_of(desired_list[0][1])
                odt = self.out_dt or INT_DIFF
                desired: dict[Any, Any] = {}
                for v, d in desired_list:
                    desired[v] = odt.py_plus(desired.get(v), d)
                current: dict[Any, Any] = {}
                for v, s, d in outputs[i]:
                    if _le(s, t):
                        current[v] = odt.py_plus(current.get(v), d)
                for v, s, d in produced:
                    if _le(s, t):
                        current[v] = odt.py_plus(current.get(v), d)
                for v in set(desired) | set(current):
                    want, have = desired.get(v), current.get(v)
                    delta = want if have is None else odt.py_plus(want, odt.py_negate(have))
                    if not odt.py_is_zero(delta):
                        produced.append((v, t, delta))
            for v, t, d in produced:
                emitted.append((key, v, t, d))
        if not emitted:
            return None, pending
        if self.out_val_layout is None:
            self.out_val_layout = infer_layout(emitted[0][1])
        odt = self.out_dt or INT_DIFF
        try:
            kcols_out = kl.to_columns([e[0] for e in emitted])
            vcols = self.out_val_layout.to_columns([e[1] for e in emitted])
        except DataError as e:
            raise DataError(f"'{self.name}': output values must keep one shape: {e}") from e
        times_arr = np.array([e[2] for e in emitted], dtype=np.int64)
        diffs = odt.from_values([e[3] for e in emitted])
        return consolidate(Updates(kcols_out + vcols, times_arr, diffs, odt)), pending


def least_rows(
    batches: list[TraceBatch], probe: np.ndarray, kw: int, j: int
) -> tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
    """The complete least values of the probe keys (sorted, distinct, each in some batch)
    read from the first ``j`` rows of each key's run in each batch: ``(probe index, value
    columns, summed count)`` sorted by key then value, zero sums left out, and the probe
    indices of the keys whose run was cut short in some batch. A value is complete when it
    lies below the first unread row of every batch that cut its key short."""
    qs: list[np.ndarray] = []
    vs: list[tuple[np.ndarray, ...]] = []
    ds: list[np.ndarray] = []
    marks: list[np.ndarray] = []  # 0: the first unread value of a cut run; 1: a row read
    cut_q: list[np.ndarray] = []
    for b in batches:
        hit, lo, hi = b.key_spans(probe)
        if not len(hit):
            continue
        long_ = (hi - lo > j).nonzero()[0]
        end = np.minimum(hi, lo + j) if len(long_) else hi
        rows, run = ranges_to_indices(lo, end)
        u = b.take_rows(rows)
        qs.append(hit[run])
        vs.append(tuple(u.data[kw:]))
        ds.append(np.asarray(u.diffs, dtype=np.int64))
        marks.append(np.ones(len(rows), dtype=np.int8))
        if len(long_):
            at = end[long_]  # each cut run's first unread row
            qs.append(hit[long_])
            vs.append(tuple(c[at] for c in b.data[kw:]))
            ds.append(np.zeros(len(at), dtype=np.int64))
            marks.append(np.zeros(len(at), dtype=np.int8))
            cut_q.append(hit[long_])
    cq = np.unique(np.concatenate(cut_q)) if cut_q else np.empty(0, dtype=np.int64)
    q = np.concatenate(qs)
    vals = tuple(concat_columns([v[i] for v in vs]) for i in range(len(vs[0])))
    d = np.concatenate(ds)
    mark = np.concatenate(marks)
    # by key, value, then a cut's mark before the rows of its value: a key's rows before
    # its first mark are its complete values
    order = lex_order((q, *vals, mark))
    q, vals, d, mark = q[order], tuple(c[order] for c in vals), d[order], mark[order]
    cut = mark == 0
    if cut.any():
        seen = np.cumsum(cut)
        ks = run_starts((q,), len(q))
        before = seen[ks] - cut[ks]  # marks before each key's first row
        complete = (seen - np.repeat(before, np.diff(np.append(ks, len(q))))) == 0
        q, vals, d = q[complete], tuple(c[complete] for c in vals), d[complete]
    return (*_summed(q, vals, d), cq)


def _accumulated(
    spine: Spine, probe: np.ndarray, kw: int
) -> tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray]:
    """The output trace's rows of the probe keys accumulated over its times (totally
    ordered, all before the time being corrected): ``(probe index, values, count)``, sorted
    by key then value, zero counts left out."""
    u, owner = spine.gather(probe, spine.batches())
    if u is None or not len(owner):
        e = np.empty(0, dtype=np.int64)
        return e, (), e
    vals = tuple(u.data[kw:])
    order = lex_order((owner, *vals))
    d = np.asarray(u.diffs, dtype=np.int64)[order]
    return _summed(owner[order], tuple(c[order] for c in vals), d)


def _summed(
    q: np.ndarray, vals: tuple[np.ndarray, ...], d: np.ndarray
) -> tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray]:
    """Rows sorted by ``(q, vals)`` with their counts ``d`` summed per distinct row, zero
    sums left out."""
    if not len(q):
        return q, vals, d
    gs = group_starts(q, vals).nonzero()[0]
    sums = np.add.reduceat(d, gs)
    nz = sums != 0
    at = gs[nz]
    return q[at], tuple(c[at] for c in vals), sums[nz]
