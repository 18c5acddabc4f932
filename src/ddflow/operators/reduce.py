"""``reduce`` / ``reduce_abelian`` / ``count`` / ``distinct`` / ``threshold``: per-key logic
over the accumulated input, correct for any lattice of times.

The output at time ``t`` must be ``logic(key, input accumulated at t)`` for every ``t``. Input
accumulations change only at joins of input update times, so for each key touched by a batch
``[lower, upper)`` the operator evaluates the logic at its *interesting times*: the new update
times of the key, closed under ``join`` with every time in the key's input and output history,
that lie in ``[lower, upper)``. Times of that closure beyond ``upper`` are kept (``pending``)
and evaluated when the frontier reaches them. At each interesting time (in a linear extension
of the partial order) the output is corrected by ``desired - current``, where ``current`` is
the output trace accumulated at that time plus corrections already made in this batch.
Correctness: every output update sits at a closure time, and for any time ``t`` the join of
the closure times ``<= t`` is itself a closure time with the same input and output.

The built-in reducers (``min``, ``max``, ``count``, ``distinct``, ``threshold`` and
``solve_min`` for ``MinSum``) run this over columns for all keys at once
(``ddflow.operators.lattice``); user ``logic`` runs per key in Python.

With totally ordered times the interesting times of a key are just its new update times, and
``count``/``distinct``/``threshold`` run vectorized over all keys at once (running sums from
the input trace, retractions from the output trace). Everything else uses the per-key
reference path, with the user's Python ``logic``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ddflow.core.columns import Layout, Tup, concat_columns, infer_layout, lex_order, run_starts
from ddflow.core.diff import INT_DIFF, DiffType, MinSumDiff, diff_type_of
from ddflow.core.errors import DataError, DiffTypeError
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, concat_updates, consolidate
from ddflow.operators.arrange import Arrange
from ddflow.operators.count_total import threshold_values
from ddflow.operators.lattice import lattice_reduce
from ddflow.operators.linear import user_error
from ddflow.runtime.worker import Operator, Worker
from ddflow.trace.batch import Description, TraceBatch, comparable, key_index
from ddflow.trace.spine import Spine, key_sums, sums_fit

__all__ = ["Reduce"]

Flat = tuple[int, ...]


def _join(a: Flat, b: Flat) -> Flat:
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


def _le(a: Flat, b: Flat) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True))


LATTICE_MODES = ("min", "max", "top_k", "count", "distinct", "threshold", "solve_min")


class Reduce(Operator):
    """``mode`` is ``"count"``, ``"distinct"``, ``"threshold"`` (with ``f``), ``"min"``,
    ``"max"``, ``"solve_min"`` (``MinSum`` diffs), ``"general"`` (with
    ``logic(key, [(val, diff)]) -> [(out, diff)]`` and output diff type ``out_diff``) or
    ``"solve"`` (with ``logic(key, input, output) -> [(out, diff)]`` updates that are only
    added, DD's ``group_solve``)."""

    def __init__(self, worker: Worker, arr: Arrange, mode: str, *,
                 logic: Callable[..., Any] | None = None, f: Callable[..., Any] | None = None,
                 out_diff: Any = int, abelian_required: bool = True,
                 name: str | None = None) -> None:
        super().__init__(worker, [arr.output], name or (mode if mode != "general" else "reduce"))
        self.arr = arr
        self.mode, self.logic, self.f = mode, logic, f
        self.out_dt: DiffType | None = diff_type_of(out_diff) if out_diff is not None else None
        self.abelian_required = abelian_required
        dim = self.kind.dim
        self.in_h = arr.spine.handle()
        self.out_spine = Spine(0, dim)
        self.out_h = self.out_spine.handle()
        self.spine = self.out_spine  # statistics
        self.lower = Antichain.of([self.kind.minimum()], dim)
        self.pending: dict[Any, set[Flat]] = {}
        self._in_dt: DiffType | None = None
        # pending work of the vectorized path: key columns and times, one row each
        self.pend_keys: tuple[np.ndarray, ...] | None = None
        self.pend_times = np.zeros((0, dim), dtype=np.int64)
        self.out_val_layout: Layout | None = None
        if mode in ("distinct", "threshold", "solve_min"):  # "solve": learnt from its logic
            self.out_val_layout = Tup(())
        if mode in ("min", "max", "top_k"):
            self.out_val_layout = arr.val_layout

    def held_times(self) -> np.ndarray | None:
        parts = [self.pend_times] if len(self.pend_times) else []
        if self.pending:
            parts.append(np.array([t for ts in self.pending.values() for t in ts],
                                  dtype=np.int64).reshape(-1, self.kind.dim))
        return np.concatenate(parts) if parts else None

    # -- driver --------------------------------------------------------------------------------
    def run(self, frontier: Antichain) -> None:
        batches = self.take()
        lower, upper = self.lower, frontier
        if lower == upper and not batches:
            return
        lattice = self.mode in LATTICE_MODES and not (
            self.kind.total and self.mode in ("count", "distinct", "threshold")
            and self._in_abelian())
        if lattice:
            due_rows = (np.flatnonzero(~upper.beyond_mask(self.pend_times))
                        if len(self.pend_times) else np.empty(0, dtype=np.int64))
            has_due = len(due_rows) > 0
            due: list[Any] = []
        else:
            due = [k for k, ts in self.pending.items()
                   if any(not upper.less_equal(t) for t in ts)]
            has_due = bool(due)
        out: Updates | None = None
        new_pending = None
        new_pend_arrays = None
        if self.arr.key_layout is not None and (batches or has_due):
            # (due pending work can meet a trace whose updates all cancelled away: then the
            # diff type is the one seen last)
            held = self.arr.spine.batches()
            in_dt = (batches[0].diff_type if batches else held[0].diff_type if held
                     else self._in_dt or INT_DIFF)
            self._in_dt = in_dt
            if self.abelian_required and not in_dt.abelian:
                raise DiffTypeError(
                    f"'{self.name}' needs diffs with subtraction (an abelian group); "
                    f"{in_dt.name} is a monoid: use reduce_solve or *_total operators"
                )
            if self.mode == "solve_min" and not isinstance(in_dt, MinSumDiff):
                raise DiffTypeError(
                    f"'{self.name}' (reduce_solve of the least value) needs MinSum diffs, "
                    f"got {in_dt.name}"
                )
            if not lattice and self.kind.total and self.mode not in ("general", "solve"):
                out = self._total_vectorized(batches, lower, in_dt)
            elif lattice:
                out, new_pend_arrays = self._lattice(batches, due_rows, lower, upper, in_dt)
            else:
                out, new_pending = self._general(batches, due, lower, upper, in_dt)
        # commit
        if new_pending is not None:
            self.pending = new_pending
        if new_pend_arrays is not None:
            self.pend_keys, self.pend_times = new_pend_arrays
        self.lower = upper
        kw = self.arr.key_width
        if out is not None and len(out):
            out_batch = TraceBatch.build(kw, out, Description(lower, upper, self.out_spine.logical))
            self.out_spine.insert(out_batch)
        else:
            self.out_spine.advance_upper(upper)
        self.out_h.set_compaction(upper, upper)
        self.in_h.set_compaction(upper, upper)
        if out is not None and len(out):
            self.output.push(*self._as_output(out))

    def _in_abelian(self) -> bool:
        """Whether the input diffs subtract (monoid counts take the lattice path, whose
        sums need no running prefix)."""
        bs = self.arr.spine.batches()
        return bool(bs) and bs[0].diff_type.abelian

    def _as_output(self, out: Updates) -> tuple[Updates, Layout]:
        kl = self.arr.key_layout
        assert kl is not None and self.out_val_layout is not None
        if self.mode in ("distinct", "threshold", "solve_min"):
            return Updates(out.data[: kl.width], out.times, out.diffs, out.diff_type), kl
        return out, Tup((kl, self.out_val_layout))

    # -- totally ordered times, vectorized ---------------------------------------------------------
    def _total_vectorized(self, batches: list[TraceBatch], lower: Antichain,
                          dt: DiffType) -> Updates | None:
        kw = self.arr.key_width
        if self.arr.val_layout is not None and self.arr.val_layout.width:
            raise DataError(f"'{self.name}' needs an arrangement by self")
        if len(batches) == 1:
            nb = batches[0]
        else:
            u = concat_updates([b.updates() for b in batches])
            nb = TraceBatch.build(kw, u, batches[0].desc)
        spine = self.arr.spine
        history = [b for b in spine.batches_through(lower)]
        fit = sums_fit([*history, nb])
        prior = key_sums(history, nb.keys, dt, bounded=fit)
        starts = nb.bounds[:-1]
        new = dt.running_sums(nb.diffs, starts, prior, bounded=fit)
        n = len(nb)
        not_first = np.ones(n, dtype=bool)
        not_first[starts] = False
        prev_rows = np.flatnonzero(not_first)
        key_cols = nb.data[:kw]
        times = nb.times
        parts: list[Updates] = []
        # current output of each key, retracted at the key's first new time
        cur, owner = self.out_spine.gather(nb.keys, self.out_spine.batches())
        if cur is not None:
            cur_t = times[starts][owner]
            parts.append(Updates(cur.data, cur_t, cur.diff_type.negate(cur.diffs),
                                 cur.diff_type))
        old = dt.take(new, prev_rows - 1)
        if self.mode == "count":
            if self.out_val_layout is None:
                self.out_val_layout = dt.value_layout()
            for rows, vals, sign in ((np.arange(n), new, 1), (prev_rows, old, -1)):
                ok = np.flatnonzero(~dt.zero_mask(vals))
                r = rows[ok]
                parts.append(Updates(
                    tuple(c[r] for c in key_cols) + dt.value_columns(dt.take(vals, ok)),
                    times[r], np.full(len(r), sign, dtype=np.int64), INT_DIFF,
                ))
        else:
            g_new = threshold_values(self, dt, new, self.mode, self.f)
            g_old = threshold_values(self, dt, old, self.mode, self.f)
            parts.append(Updates(tuple(key_cols), times, g_new, INT_DIFF))
            parts.append(Updates(tuple(c[prev_rows] for c in key_cols), times[prev_rows],
                                 INT_DIFF.negate(g_old), INT_DIFF))
        return consolidate(concat_updates(parts))

    # -- any lattice, built-in reducers: over columns ---------------------------------------------
    def _lattice(self, batches: list[TraceBatch], due_rows: np.ndarray, lower: Antichain,
                 upper: Antichain, in_dt: DiffType
                 ) -> tuple[Updates | None, tuple[tuple[np.ndarray, ...] | None, np.ndarray]]:
        kl = self.arr.key_layout
        assert kl is not None
        kw = kl.width
        dim = self.kind.dim
        if self.mode == "count" and self.out_val_layout is None:
            self.out_val_layout = in_dt.value_layout()
        if self.out_val_layout is None:
            self.out_val_layout = self.arr.val_layout
        out_dt = in_dt if self.mode == "solve_min" else INT_DIFF
        self.out_dt = out_dt
        key_parts: list[tuple[np.ndarray, ...]] = []
        time_parts: list[np.ndarray] = []
        for b in batches:
            key_parts.append(tuple(b.data[:kw]))
            time_parts.append(b.times)
        pk = self.pend_keys
        if pk is not None and len(due_rows):
            key_parts.append(tuple(c[due_rows] for c in pk))
        kcols = tuple(concat_columns([p[i] for p in key_parts]) for i in range(kw))
        order = lex_order(kcols)
        kcols = tuple(c[order] for c in kcols)
        starts = run_starts(kcols, len(order))
        probe_cols = tuple(c[starts] for c in kcols)
        probe = key_index(probe_cols)
        c_owner = [np.searchsorted(*comparable(probe, key_index(p)))
                   for p in key_parts[: len(batches)]]
        c_times = list(time_parts)
        keep_pending = np.ones(len(self.pend_times), dtype=bool)
        if pk is not None and len(self.pend_times):
            sprobe, pidx = comparable(probe, key_index(pk))
            pos = np.searchsorted(sprobe, pidx)
            posc = np.minimum(pos, len(probe) - 1)
            hit = np.asarray(sprobe[posc] == pidx, dtype=bool)
            c_owner.append(pos[hit])
            c_times.append(self.pend_times[hit])
            keep_pending = ~hit
        co = np.concatenate(c_owner) if c_owner else np.empty(0, dtype=np.int64)
        ct = (np.concatenate(c_times) if c_times else np.empty((0, dim), dtype=np.int64))
        closure = self.mode != "solve_min"
        if closure:
            in_u, in_owner = self.arr.spine.gather(probe, self.arr.spine.batches_through(upper))
        else:
            # The least value, added whenever the input's minimum drops below the output's,
            # keeps the output's accumulation equal to the input's at every time once each
            # new input time has been evaluated: every input update at s <= t was evaluated
            # at s, so out(t) <= in(t), and every output is some in(s) with s <= t, so
            # out(t) >= in(t). Hence only the new times need evaluating (no interesting
            # times), against the new updates and the output: O(batch), the monoid's gain.
            in_u = concat_updates([b.updates() for b in batches]) if batches else None
            in_owner = (np.concatenate(c_owner[: len(batches)]) if batches
                        else np.empty(0, dtype=np.int64))
        out_u, out_owner = self.out_spine.gather(probe, self.out_spine.batches())
        f = self.f
        out, pend_o, pend_t = lattice_reduce(
            self.mode, probe_cols, len(probe), co.astype(np.int64), ct, in_owner, in_u,
            out_owner, out_u, kw, in_dt, out_dt, lower, upper, dim, f=f,
            threshold_of=lambda totals: threshold_values(self, in_dt, totals, self.mode, f),
            count_columns=in_dt.value_columns, closure=closure,
        )
        new_keys: list[tuple[np.ndarray, ...]] = []
        new_times: list[np.ndarray] = []
        if pk is not None and keep_pending.any():
            kp = np.flatnonzero(keep_pending)
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
    def _solve_at(self, key: Any, t: Flat, inp: list[tuple[Any, Any]],
                  outputs: list[tuple[Any, Flat, Any]],
                  produced: list[tuple[Any, Flat, Any]]) -> None:
        """``group_solve`` at one time: the logic sees input and current output and proposes
        updates that are added (never a difference: no subtraction needed)."""
        odt = self.out_dt
        current: dict[Any, Any] = {}
        for v, s, d in list(outputs) + produced:
            if _le(s, t):
                current[v] = d if v not in current else (odt or diff_type_of(d)).py_plus(
                    current[v], d)
        cur = sorted(((v, d) for v, d in current.items()
                      if not (odt or diff_type_of(d)).py_is_zero(d)), key=lambda vd: vd[0])
        assert self.logic is not None
        try:
            ups = list(self.logic(key, inp, cur))
        except Exception as e:
            raise user_error(self, e) from e
        for v, d in ups:
            if self.out_dt is None:
                self.out_dt = diff_type_of(d)
            if not self.out_dt.py_is_zero(d):
                produced.append((v, t, d))

    def _mode_logic(self, in_dt: DiffType) -> Callable[[Any, list[tuple[Any, Any]]], list]:
        if self.mode in ("general", "solve"):
            assert self.logic is not None
            return self.logic
        if self.mode == "count":
            def count(_k: Any, inp: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
                total = None
                for _v, d in inp:
                    total = in_dt.py_plus(total, d)
                return [] if in_dt.py_is_zero(total) else [(total, 1)]
            return count
        if self.mode == "distinct":
            def distinct(_k: Any, inp: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
                return [((), 1)] if inp else []
            return distinct
        f = self.f
        assert f is not None

        def threshold(_k: Any, inp: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
            total = None
            for _v, d in inp:
                total = in_dt.py_plus(total, d)
            if in_dt.py_is_zero(total):
                return []
            r = int(f(total))
            return [((), r)] if r else []
        return threshold

    def _general(self, batches: list[TraceBatch], due: list[Any], lower: Antichain,
                 upper: Antichain, in_dt: DiffType) -> tuple[Updates | None, dict[Any, set[Flat]]]:
        kl, vl = self.arr.key_layout, self.arr.val_layout
        assert kl is not None and vl is not None
        kw = kl.width
        logic = self._mode_logic(in_dt)
        if self.mode == "count" and self.out_val_layout is None:
            self.out_val_layout = in_dt.value_layout()
        if self.out_dt is None and self.mode != "general":
            self.out_dt = INT_DIFF
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

        in_u, in_owner = self.arr.spine.gather(probe, self.arr.spine.batches_through(upper))
        inputs = grouped(in_u, in_owner, vl)
        out_u, out_owner = self.out_spine.gather(probe, self.out_spine.batches())
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
                if self.mode == "solve":
                    self._solve_at(key, t, inp, outputs[i], produced)
                    continue
                try:
                    desired_list = list(logic(key, inp)) if inp else []
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
