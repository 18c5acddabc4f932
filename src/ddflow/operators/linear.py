"""Linear operators: each output update depends on one input update (or passes it through).

``map``, ``filter``, ``flat_map``, ``explode``, ``negate``, ``concat``, ``inspect`` act on
updates as soon as they arrive, whatever their times; ``consolidate`` waits until the
frontier passes their times and then adds up equal ``(data, time)``.

Each takes a per-record Python callable (DD's API; correct for any record) or, with
``vectorized=True``, a callable over numpy columns in the record's shape (the fast path).
A user function that raises is re-raised as ``OperatorError`` naming the operator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ddflow.core.columns import Layout, infer_layout, layout_of_view
from ddflow.core.diff import DiffType, IntDiff, diff_column_from_view, diff_type_of
from ddflow.core.errors import DataError, DiffTypeError, OperatorError
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, consolidate, held_times, split_complete, take_times
from ddflow.engine.operator import Operator, State, Stream
from ddflow.engine.worker import Worker

__all__ = [
    "Concat",
    "Consolidate",
    "Explode",
    "FlatMap",
    "Filter",
    "Inspect",
    "Map",
    "Negate",
    "user_error",
]


def user_error(op: Operator, e: BaseException) -> OperatorError:
    """The error to raise when a user function of ``op`` raised ``e``."""
    return OperatorError(f"user function of operator '{op.name}' raised {type(e).__name__}: {e}")


class _PerBatch(Operator):
    """An operator applying ``apply`` to every incoming batch of updates."""

    wakes_on_frontier = False

    def __init__(self, worker: Worker, inputs: Sequence[Stream], name: str | None) -> None:
        super().__init__(worker, inputs, name)

    def run(self, frontier: Antichain) -> None:
        items = [u for port in range(len(self.inbox)) for u in self.inbox[port]]
        if not items:
            return
        outs = [self.apply(u) for u in items]
        for port in range(len(self.inbox)):
            self.inbox[port] = []
        for out in outs:
            if out is not None:
                self.output.push(out[0], out[1])

    def apply(self, u: Updates) -> tuple[Updates, Layout | None] | None:
        raise NotImplementedError

    @property
    def in_layout(self) -> Layout:
        layout = self.inputs[0].layout
        assert layout is not None
        return layout


class Map(_PerBatch):
    name = "map"

    def __init__(
        self,
        worker: Worker,
        s: Stream,
        f: Callable[..., Any],
        vectorized: bool,
        name: str | None = None,
    ) -> None:
        super().__init__(worker, [s], name)
        self.f, self.vectorized = f, vectorized

    def apply(self, u: Updates) -> tuple[Updates, Layout]:
        n = len(u)
        try:
            if self.vectorized:
                res = self.f(self.in_layout.view(u.data))
            else:
                res = [self.f(r) for r in self.in_layout.to_records(u.data)]
        except Exception as e:
            raise user_error(self, e) from e
        if self.vectorized:
            layout = self.output.layout or layout_of_view(res)
            cols = layout.from_view(res, n)
        else:
            layout = self.output.layout or infer_layout(res[0])
            cols = layout.to_columns(res)
        return Updates(cols, u.times, u.diffs, u.diff_type), layout


class Filter(_PerBatch):
    name = "filter"

    def __init__(
        self,
        worker: Worker,
        s: Stream,
        p: Callable[..., Any],
        vectorized: bool,
        name: str | None = None,
    ) -> None:
        super().__init__(worker, [s], name)
        self.output.layout = s.layout
        self.p, self.vectorized = p, vectorized

    def apply(self, u: Updates) -> tuple[Updates, Layout]:
        try:
            if self.vectorized:
                mask = np.asarray(self.p(self.in_layout.view(u.data)), dtype=bool)
            else:
                recs = self.in_layout.to_records(u.data)
                mask = np.fromiter((bool(self.p(r)) for r in recs), dtype=bool, count=len(recs))
        except Exception as e:
            raise user_error(self, e) from e
        return u.take(mask.nonzero()[0]), self.in_layout


class FlatMap(_PerBatch):
    """Per record ``f(x)`` returns an iterable of records; vectorized ``f(cols)`` returns
    ``(rows, out_cols)``: the input row of each output record and the output columns
    (``rows`` None: one output record per input row, in order)."""

    name = "flat_map"

    def __init__(
        self,
        worker: Worker,
        s: Stream,
        f: Callable[..., Any],
        vectorized: bool,
        name: str | None = None,
    ) -> None:
        super().__init__(worker, [s], name)
        self.f, self.vectorized = f, vectorized

    def apply(self, u: Updates) -> tuple[Updates, Layout] | None:
        try:
            if self.vectorized:
                rows, view = self.f(self.in_layout.view(u.data))
                if rows is None:
                    layout = self.output.layout or layout_of_view(view)
                    return Updates(
                        layout.from_view(view, len(u)), u.times, u.diffs, u.diff_type
                    ), layout
                rows = np.asarray(rows, dtype=np.int64)
            else:
                outs: list[Any] = []
                counts = []
                for r in self.in_layout.to_records(u.data):
                    items = list(self.f(r))
                    outs.extend(items)
                    counts.append(len(items))
        except Exception as e:
            raise user_error(self, e) from e
        if self.vectorized:
            layout = self.output.layout or layout_of_view(view)
            cols = layout.from_view(view, len(rows))
        else:
            if not outs:
                return None
            rows = (np.arange(len(counts))).repeat(counts)
            layout = self.output.layout or infer_layout(outs[0])
            cols = layout.to_columns(outs)
        dt = u.diff_type
        return Updates(cols, take_times(u.times, rows), dt.take(u.diffs, rows), dt), layout


class Explode(_PerBatch):
    """Moves data into diffs: per record ``f(x)`` yields ``(data, diff)`` pairs; the output
    diff is ``diff * input multiplicity``. Vectorized ``f(cols)`` returns
    ``(out_cols, diff_cols)`` or ``(out_cols, diff_cols, keep_mask)``, one output per row, or
    ``(out_cols, diff_cols, rows)`` with an integer array ``rows``: outputs for those input
    rows only."""

    name = "explode"
    state_version = 1

    def __init__(
        self,
        worker: Worker,
        s: Stream,
        f: Callable[..., Any],
        vectorized: bool,
        diff: Any,
        name: str | None = None,
    ) -> None:
        super().__init__(worker, [s], name)
        self.f, self.vectorized = f, vectorized
        self.dt: DiffType | None = diff_type_of(diff) if diff is not None else None

    def state(self) -> State:
        # the output diff type, learnt from the first diffs when none was given
        return {"diff_type": self.dt}

    def load_state(self, state: State) -> None:
        self.dt = state["diff_type"]

    def apply(self, u: Updates) -> tuple[Updates, Layout] | None:
        if not isinstance(u.diff_type, IntDiff):
            raise DiffTypeError(
                f"explode needs a collection with int diffs (got {u.diff_type.name}): the exploded "
                "diff is multiplied by each record's multiplicity"
            )
        n = len(u)
        try:
            if self.vectorized:
                res = self.f(self.in_layout.view(u.data))
                view, dview = res[0], res[1]
                keep = given = None
                if len(res) > 2:
                    sel = np.asarray(res[2])
                    if sel.dtype.kind in "iu":
                        given = sel.astype(np.int64, copy=False)  # outputs for these rows
                    else:
                        keep = sel.astype(bool, copy=False)
            else:
                outs: list[Any] = []
                dvals: list[Any] = []
                counts = []
                for r in self.in_layout.to_records(u.data):
                    c = 0
                    for data, d in self.f(r):
                        outs.append(data)
                        dvals.append(d)
                        c += 1
                    counts.append(c)
        except Exception as e:
            raise user_error(self, e) from e
        if self.vectorized and given is not None:
            layout = self.output.layout or layout_of_view(view)
            cols = layout.from_view(view, len(given))
            dt, dcol = diff_column_from_view(self.dt, dview, len(given))
            rows = given
        elif self.vectorized:
            layout = self.output.layout or layout_of_view(view)
            cols = layout.from_view(view, n)
            dt, dcol = diff_column_from_view(self.dt, dview, n)
            if keep is None or bool(keep.all()):
                # one output per input row, in order: the input's times and multiplicities
                # as they are (no copies)
                self.dt = dt
                if not bool((u.diffs == 1).all()):
                    dcol = dt.scale(dcol, u.diffs)
                return Updates(cols, u.times, dcol, dt), layout
            rows = keep.nonzero()[0]
            cols = tuple(c.take(rows, axis=0) for c in cols)
            dcol = dt.take(dcol, rows)
        else:
            if not outs:
                return None
            dt = self.dt or diff_type_of(dvals[0])
            dcol = dt.from_values(dvals)
            rows = (np.arange(n)).repeat(counts)
            layout = self.output.layout or infer_layout(outs[0])
            cols = layout.to_columns(outs)
        self.dt = dt
        if not bool((u.diffs == 1).all()):  # (checked before the rows are taken)
            dcol = dt.scale(dcol, u.diffs[rows])
        return Updates(cols, take_times(u.times, rows), dcol, dt), layout


class Negate(_PerBatch):
    name = "negate"

    def __init__(self, worker: Worker, s: Stream, name: str | None = None) -> None:
        super().__init__(worker, [s], name)
        self.output.layout = s.layout

    def apply(self, u: Updates) -> tuple[Updates, Layout]:
        dt = u.diff_type
        return Updates(u.data, u.times, dt.negate(u.diffs), dt), self.in_layout


class Concat(Operator):
    """The updates of every input, as they arrive. All inputs must hold records of one shape
    (the first batch through fixes it): a batch of another shape is refused with a
    ``DataError`` naming both shapes (the worker drops it; later batches flow on)."""

    name = "concat"
    wakes_on_frontier = False

    def __init__(self, worker: Worker, streams: Sequence[Stream], name: str | None = None) -> None:
        known = [(port, s.layout) for port, s in enumerate(streams) if s.layout is not None]
        for port, lay in known[1:]:
            if lay != known[0][1]:  # shapes known as the dataflow is built: refused now
                raise DataError(
                    f"'{name or self.name}' joins records of shape {known[0][1]} (input "
                    f"{known[0][0]}) and {lay} (input {port}): the collections a concat joins "
                    "must have one record shape (map them to one first)"
                )
        super().__init__(worker, streams, name)
        if known and len(known) == len(streams):
            self.output.layout = known[0][1]

    def run(self, frontier: Antichain) -> None:
        layout = self.output.layout
        out: list[tuple[Updates, Layout | None]] = []
        refused: list[tuple[int, Updates, Layout | None]] = []
        for port, q in enumerate(self.inbox):
            lay = self.inputs[port].layout
            for u in q:
                if layout is None:
                    layout = lay
                if lay == layout:
                    out.append((u, lay))
                else:
                    refused.append((port, u, lay))
        if refused:
            port, _u, lay = refused[0]
            n = sum(len(u) for _p, u, _l in refused)
            raise DataError(
                f"'{self.name}' got records of shape {lay} from its input {port}, but the "
                f"collection holds records of shape {layout}: the collections a concat joins "
                "must have one record shape (map them to one first). The batch was refused "
                f"({n} updates not taken in); other batches go on.",
                refused=[u for _p, u, _l in refused],
            )
        for port in range(len(self.inbox)):
            self.inbox[port] = []
        for u, lay in out:
            self.output.push(u, lay)


class Inspect(_PerBatch):
    """Calls ``f((data, time, diff))`` for every update, in arrival order, and passes it on."""

    name = "inspect"

    def __init__(self, worker: Worker, s: Stream, f: Callable[[Any], Any], name: str | None = None):
        super().__init__(worker, [s], name)
        self.output.layout = s.layout
        self.f = f

    def apply(self, u: Updates) -> tuple[Updates, Layout]:
        kind = self.kind
        recs = self.in_layout.to_records(u.data)
        diffs = u.diff_type.to_values(u.diffs)
        try:
            for r, t, d in zip(recs, u.times.tolist(), diffs, strict=True):
                self.f((r, kind.unflatten(t), d))
        except Exception as e:
            raise user_error(self, e) from e
        return u, self.in_layout


class Consolidate(Operator):
    """Holds updates until the frontier passes their times, then emits them consolidated."""

    name = "consolidate"
    wakes_on_frontier = False
    state_version = 1

    def __init__(self, worker: Worker, s: Stream, name: str | None = None) -> None:
        super().__init__(worker, [s], name)
        self.output.layout = s.layout
        self.held: list[Updates] = []

    def outstanding_times(self) -> np.ndarray | None:
        return held_times(self.held)

    def state(self) -> State:
        return {"held": list(self.held)}

    def load_state(self, state: State) -> None:
        self.held = list(state["held"])

    def run(self, frontier: Antichain) -> None:
        ready, rest = split_complete(self.held + self.take(), frontier)
        self.held = rest
        if ready is not None:
            self.output.push(consolidate(ready), self.inputs[0].layout)
