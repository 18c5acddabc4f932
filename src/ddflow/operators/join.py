"""``join`` / ``join_map`` / ``semijoin`` / ``antijoin``: matching two arrangements by key.

For new batches ``dA`` and ``dB`` of the two inputs the output changes by
``dA x B_old + (A_old + dA) x dB``: batches of the first input are matched against the second
trace through what this operator has already acknowledged of it, then batches of the second
input against the first trace including ``dA``. A matched pair of updates
``(k, a, s, x)``, ``(k, b, t, y)`` gives ``(k, (a, b))`` at ``join(s, t)`` with diff ``x * y``
(diff types with a product: ints, tuple diffs times ints, ``MinSum`` times ``MinSum`` is ``+``).

Each trace may be compacted up to the *other* input's frontier: only times beyond it are ever
joined with it again, and ``advance_by`` keeps ``join(s, t)`` for those.

Vectorized: each batch's distinct keys are searched in every trace batch at once and the
matched rows are expanded into pairs with ``repeat``/``arange`` arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ddflow.core.columns import Layout, Tup, infer_layout, layout_of_view
from ddflow.core.diff import I64_MAX, INT_DIFF, DiffType, IntDiff
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, concat_updates, take_times
from ddflow.engine.operator import Operator, State
from ddflow.engine.worker import Worker
from ddflow.operators.arrange import Arrange
from ddflow.operators.linear import user_error
from ddflow.trace.batch import TraceBatch, ranges_to_indices

__all__ = ["Join"]


class Join(Operator):
    """Joins arrangements ``a`` and ``b``; ``f(k, va, vb)`` (or vectorized over columns)
    makes each output record, default ``(k, (va, vb))``; ``f=None, keep='a'`` gives
    ``(k, va)`` (semijoin)."""

    name = "join"
    wakes_on_frontier = False
    state_version = 1

    def __init__(
        self,
        worker: Worker,
        a: Arrange,
        b: Arrange,
        f: Callable[..., Any] | None = None,
        vectorized: bool = False,
        semijoin: bool = False,
        name: str | None = None,
    ) -> None:
        super().__init__(worker, [a.output, b.output], name)
        self.a, self.b = a, b
        self.f, self.vectorized, self.semijoin = f, vectorized, semijoin
        self.ha = a.spine.handle()
        self.hb = b.spine.handle()
        self.a_ack = a.upper
        self.b_ack = b.upper
        kl, val, vbl = a.key_layout, a.val_layout, b.val_layout
        if f is None and kl is not None and val is not None and vbl is not None:
            # the output's shape follows from the inputs' (known as the dataflow is built)
            self.output.layout = Tup((kl, val)) if semijoin else Tup((kl, Tup((val, vbl))))

    def state(self) -> State:
        return {
            "a_ack": self.a_ack,
            "b_ack": self.b_ack,
            "ha": self.ha.state(),
            "hb": self.hb.state(),
        }

    def load_state(self, state: State) -> None:
        self.a_ack, self.b_ack = state["a_ack"], state["b_ack"]
        self.ha.load_state(state["ha"])
        self.hb.load_state(state["hb"])

    def run(self, frontier: Antichain) -> None:
        da = self.take(0)
        db = self.take(1)
        outs = []
        if da:
            b_hist = self.b.spine.batches_through(self.b_ack)
            for batch in da:
                outs.extend(self._match(batch, b_hist, batch_is_a=True))
        a_now = self.a.frontier
        if db:
            a_hist = self.a.spine.batches_through(a_now)
            for batch in db:
                outs.extend(self._match(batch, a_hist, batch_is_a=False))
        for u, layout in _merged(outs):
            self.output.push(u, layout)
        self.a_ack = a_now
        self.b_ack = self.b.frontier
        self.ha.set_compaction(self.b.frontier, self.a_ack)
        self.hb.set_compaction(self.a.frontier, self.b_ack)

    def _match(
        self, batch: TraceBatch, others: list[TraceBatch], batch_is_a: bool
    ) -> list[tuple[Updates, Layout]]:
        if self.a.key_layout != self.b.key_layout:
            # keys of different shapes (pairs and ints, ((1, 2), 3) and (1, (2, 3))) are
            # never equal records, whatever their columns hold: a dict join matches none
            return []
        # the rows of the batch's keys in every trace batch, gathered into one table (one
        # expansion into pairs and one output batch, whatever the number of trace batches)
        parts: list[Updates] = []
        owners: list[np.ndarray] = []
        bound: int | None = 0
        for other in others:
            rows, owner = other.rows_for(batch.keys)
            if not len(rows):
                continue
            parts.append(other.take_rows(rows))
            owners.append(owner)
            ob = other.diff_bound()
            bound = None if ob is None or bound is None else max(bound, ob)
        if not parts:
            return []
        if len(parts) == 1:
            found, owner = parts[0], owners[0]
        else:
            owner = np.concatenate(owners)
            by_key = owner.argsort(kind="stable")
            owner = owner[by_key]
            found = concat_updates(parts).take(by_key)
        nk = batch.num_keys
        ct = np.bincount(owner, minlength=nk)
        cb = np.diff(batch.bounds)
        npairs = cb * ct
        with_pairs = npairs.nonzero()[0]
        p, grp = ranges_to_indices(np.zeros(len(with_pairs), np.int64), npairs[with_pairs])
        k = with_pairs[grp]
        ctk = ct[k]
        first_other = (ct.cumsum() - ct)[k]
        b_rows = batch.bounds[k] + p // ctk
        o_rows = first_other + p % ctk
        mine = (batch.updates(), b_rows, batch.diff_bound())
        theirs = (found, o_rows, bound)
        return [self._emit(mine, theirs) if batch_is_a else self._emit(theirs, mine)]

    def _emit(
        self,
        a: tuple[Updates, np.ndarray, int | None],
        b: tuple[Updates, np.ndarray, int | None],
    ) -> tuple[Updates, Layout]:
        """The output of the pairs of rows ``ra`` of ``ua`` and ``rb`` of ``ub``, each side
        with a bound on any of its rows' ``|diff|`` (None: unknown)."""
        (ua, ra, ma), (ub, rb, mb) = a, b
        kw = self.a.key_width
        kcols = tuple(c[ra] for c in ua.data[:kw])
        va = tuple(c[ra] for c in ua.data[kw:])
        vb = tuple(c[rb] for c in ub.data[kw:])
        times = np.maximum(take_times(ua.times, ra), take_times(ub.times, rb))
        da, db = ua.diff_type.take(ua.diffs, ra), ub.diff_type.take(ub.diffs, rb)
        dt: DiffType
        if (
            type(ua.diff_type) is IntDiff
            and type(ub.diff_type) is IntDiff
            and ma is not None
            and mb is not None
            and ma * mb <= I64_MAX
        ):
            dt, diffs = INT_DIFF, da * db  # int64 products that cannot leave int64
        else:
            dt, diffs = ua.diff_type.multiply(da, ub.diff_type, db)  # exact, checked
        kl, val, vbl = self.a.key_layout, self.a.val_layout, self.b.val_layout
        assert kl is not None and val is not None and vbl is not None
        n = len(times)
        if self.semijoin:
            return Updates(kcols + va, times, diffs, dt), Tup((kl, val))
        if self.f is None:
            return Updates(kcols + va + vb, times, diffs, dt), Tup((kl, Tup((val, vbl))))
        try:
            if self.vectorized:
                res = self.f(kl.view(kcols), val.view(va), vbl.view(vb))
            else:
                recs = [
                    self.f(k, x, y)
                    for k, x, y in zip(
                        kl.to_records(kcols), val.to_records(va), vbl.to_records(vb), strict=True
                    )
                ]
        except Exception as e:
            raise user_error(self, e) from e
        if self.vectorized:
            layout = self.output.layout or layout_of_view(res)
            cols = layout.from_view(res, n)
        else:
            layout = self.output.layout or infer_layout(recs[0])
            cols = layout.to_columns(recs)
        return Updates(cols, times, diffs, dt), layout


def _merged(outs: list[tuple[Updates, Layout]]) -> list[tuple[Updates, Layout]]:
    """The outputs of one run with each stretch of the same layout and diff type made one
    batch: a batch matched against several trace batches gives one output, not one per
    trace batch, so every operator downstream pays its fixed cost per step once."""
    if len(outs) < 2:
        return outs
    merged: list[tuple[Updates, Layout]] = []
    group: list[Updates] = []
    for u, layout in outs:
        if group and (layout != merged[-1][1] or u.diff_type != group[0].diff_type):
            merged[-1] = (concat_updates(group), merged[-1][1])
            group = []
        if not group:
            merged.append((u, layout))
        group.append(u)
    merged[-1] = (concat_updates(group), merged[-1][1])
    return merged
