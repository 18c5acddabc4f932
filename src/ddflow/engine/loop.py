"""The loop operators behind ``enter``, ``leave`` and ``Variable``: how updates cross a loop
scope's boundary and go around it.

* ``Enter`` brings a collection of the parent scope into the loop at iteration 0 (a time
  ``t`` becomes ``(t, 0)``);
* ``Leave`` takes a loop collection out (``(t, i)`` becomes ``t``); it runs inside the loop
  and pushes, consolidated, once an epoch ends (changes at many iterations of one outer
  time usually cancel);
* ``Feedback`` carries the loop's result at iteration ``i`` to iteration ``i + 1``. It holds
  back updates whose outer time is not complete (they wait for a later epoch), so data at
  future outer times does not circle the loop.

Their frontiers, and why they are right, are in ``ddflow.engine.progress``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, concat_updates, consolidate
from ddflow.engine.operator import Operator, State, Stream

if TYPE_CHECKING:
    from ddflow.engine.scope import Scope
    from ddflow.engine.worker import Worker

__all__ = ["Enter", "Feedback", "Leave"]


def _shift(u: Updates, col: int, delta: int) -> Updates:
    times = u.times.copy()
    times[:, col] += delta
    return u.with_times(times)


class Enter(Operator):
    """Brings a collection of the parent scope into a loop, at iteration 0."""

    name = "enter"
    wakes_on_frontier = False

    def __init__(self, worker: Worker, s: Stream, scope: Scope, name: str | None = None):
        super().__init__(worker, [s], name, scope=scope)
        self.output.layout = s.layout
        scope.enters.append(self)

    def run(self, frontier: Antichain) -> None:
        for u in self.take():
            n = len(u)
            times = np.zeros((n, u.times.shape[1] + 1), dtype=np.int64)
            times[:, :-1] = u.times
            self.output.push(Updates(u.data, times, u.diffs, u.diff_type), self.inputs[0].layout)


class Leave(Operator):
    """Takes a loop's collection out to the parent scope (drops the iteration).

    Runs inside the loop; its output (and its frontier) belong to the parent. What it takes
    in during an epoch is held until the epoch ends (``finish``)."""

    name = "leave"
    wakes_on_frontier = False
    state_version = 1

    def __init__(self, worker: Worker, s: Stream, name: str | None = None):
        scope = s.producer.scope
        super().__init__(worker, [s], name, scope=scope)
        assert scope.parent is not None
        self.frontier = Antichain.of([scope.parent.kind.minimum()], scope.parent.kind.dim)
        self.output.layout = s.layout
        self.held: list[Updates] = []
        scope.leaves.append(self)

    def output_scope(self) -> Scope:
        parent = self.scope.parent
        assert parent is not None
        return parent

    def run(self, frontier: Antichain) -> None:
        for u in self.take():
            self.held.append(u.with_times(u.times[:, :-1]))

    def finish(self) -> None:
        """The epoch ended: push what the loop produced, consolidated."""
        if self.held:
            u = consolidate(concat_updates(self.held))
            self.held = []
            self.output.push(u, self.inputs[0].layout)

    def outstanding_times(self) -> np.ndarray | None:
        # held only until the epoch ends, which no iteration waits for: not outstanding
        return None

    def state(self) -> State:
        return {"held": list(self.held)}

    def load_state(self, state: State) -> None:
        self.held = list(state["held"])


class Feedback(Operator):
    """A loop variable's way back: the result at iteration ``i`` re-enters at ``i + 1``.

    Updates are consolidated (a loop whose result stops changing sends nothing, which is
    how the loop ends) and those at outer times not yet complete are held back."""

    name = "variable"
    state_version = 1
    wakes_on_frontier = False

    def __init__(self, worker: Worker, scope: Scope, name: str | None = None):
        super().__init__(worker, [], name, scope=scope)
        self.inbox = [[]]
        self.source: Stream | None = None
        self.held: list[Updates] = []
        scope.feedbacks.append(self)

    def connect(self, s: Stream) -> None:
        self.source = s
        self.output.layout = s.layout
        s.consumers.append((self, 0))

    def run(self, frontier: Antichain) -> None:
        parts = self.held + [_shift(u, -1, 1) for u in self.take()]
        if not parts:
            return
        u = consolidate(concat_updates(parts))
        oc = self.scope.progress.outer_complete
        if oc is not None and len(u):
            later = oc.beyond_mask(u.times)
        else:
            later = np.zeros(len(u), dtype=bool)
        self.held = [u.take(later.nonzero()[0])] if later.any() else []
        if not later.all():
            assert self.source is not None
            self.output.push(
                u.take((~later).nonzero()[0]) if later.any() else u, self.source.layout
            )

    def wakes(self, frontier: Antichain) -> bool:
        # held updates leave by the loop's outer frontier (a new epoch), not by ``frontier``
        return bool(self.held)

    def outstanding_times(self) -> np.ndarray | None:
        return self.held[0].times if self.held else None

    def state(self) -> State:
        return {"held": list(self.held)}

    def load_state(self, state: State) -> None:
        self.held = list(state["held"])
