"""The loop operators behind ``enter``, ``leave`` and ``Variable`` (see ``ddflow.runtime.scope``
for how a loop runs and why its frontiers are right)."""

from __future__ import annotations

import numpy as np

from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, concat_updates, consolidate
from ddflow.runtime.scope import Scope
from ddflow.runtime.worker import Operator, Stream, Worker

__all__ = ["Enter", "Feedback", "Leave"]


def _shift(u: Updates, col: int, delta: int) -> Updates:
    times = u.times.copy()
    times[:, col] += delta
    return u.with_times(times)


class Enter(Operator):
    """Brings a collection of the parent scope into a loop, at counter 0."""

    name = "enter"

    def __init__(self, worker: Worker, s: Stream, scope: Scope, name: str | None = None):
        super().__init__(worker, [s], name, scope=scope)
        scope.enters.append(self)

    def run(self, frontier: Antichain) -> None:
        for u in self.take():
            n = len(u)
            times = np.zeros((n, u.times.shape[1] + 1), dtype=np.int64)
            times[:, :-1] = u.times
            self.output.push(Updates(u.data, times, u.diffs, u.diff_type),
                             self.inputs[0].layout)

    def output_frontier(self, frontier: Antichain) -> Antichain:
        return Antichain.of([tuple(f) + (0,) for f in frontier.elements], frontier.dim + 1)

class Leave(Operator):
    """Takes a loop's collection out to the parent scope (drops the counter).

    Runs inside the loop; its output (and its frontier) belong to the parent."""

    name = "leave"
    leaves_scope = True

    def __init__(self, worker: Worker, s: Stream, name: str | None = None):
        scope = s.producer.scope
        super().__init__(worker, [s], name, scope=scope)
        assert scope.parent is not None
        self.frontier = Antichain.of([scope.parent.kind.minimum()], scope.parent.kind.dim)
        self.parts: list[Updates] = []
        scope.leaves.append(self)

    def run(self, frontier: Antichain) -> None:
        for u in self.take():
            self.parts.append(u.with_times(u.times[:, :-1]))

    def output_frontier(self, frontier: Antichain) -> Antichain:
        return self.frontier

    def finish(self, frontier: Antichain) -> None:
        if self.parts:
            u = consolidate(concat_updates(self.parts))
            self.parts = []
            self.output.push(u, self.inputs[0].layout)
        self.frontier = frontier

class Feedback(Operator):
    """A loop variable's way back: the result at counter ``j`` re-enters at ``j + 1``.

    Updates are consolidated (a loop whose result stops changing sends nothing, which is
    how the loop ends) and those at outer times not yet complete are kept back."""

    name = "variable"

    def __init__(self, worker: Worker, scope: Scope, name: str | None = None):
        super().__init__(worker, [], name, scope=scope)
        self.inbox = [[]]
        self.source: Stream | None = None
        self.held: list[Updates] = []
        scope.feedbacks.append(self)

    def connect(self, s: Stream) -> None:
        self.source = s
        s.consumers.append((self, 0))

    def input_frontier(self) -> Antichain:
        f = self.scope.round_frontier
        return f if f is not None else self.frontier

    def run(self, frontier: Antichain) -> None:
        parts = self.held + [_shift(u, -1, 1) for u in self.take()]
        if not parts:
            return
        u = consolidate(concat_updates(parts))
        oc = self.scope.outer_complete
        if oc is not None and len(u):
            later = oc.beyond_mask(u.times)
        else:
            later = np.zeros(len(u), dtype=bool)
        self.held = [u.take(np.flatnonzero(later))] if later.any() else []
        if not later.all():
            assert self.source is not None
            self.output.push(u.take(np.flatnonzero(~later)) if later.any() else u,
                             self.source.layout)

    def held_times(self) -> np.ndarray | None:
        return self.held[0].times if self.held else None

