"""Outputs: probes report how far a point of the dataflow has progressed, captures record
every update that reaches it.

A ``Probe`` is the handle a driver steps against (``worker.step_while(lambda:
probe.less_than(t))``): its frontier is the frontier of the collection it watches. A
``Capture`` keeps every update it receives, consolidated on demand, and reads back the
updates or the collection accumulated at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, accumulated_at, concat_updates, consolidate, update_records
from ddflow.engine.operator import Operator, State, Stream

if TYPE_CHECKING:
    from ddflow.engine.worker import Worker

__all__ = ["Capture", "Probe"]


class Probe(Operator):
    """Reports the frontier reached at a point of the dataflow."""

    name = "probe"
    wakes_on_frontier = False

    def run(self, frontier: Antichain) -> None:
        self.take()

    def less_than(self, t: Any) -> bool:
        """Whether some time before ``t`` may still change at this point."""
        return self.frontier.less_than(self.kind.flatten(t))

    def less_equal(self, t: Any) -> bool:
        """Whether ``t`` or a time before it may still change at this point."""
        return self.frontier.less_equal(self.kind.flatten(t))

    def done(self) -> bool:
        return self.frontier.is_empty()


#: a capture joins its newest parts into one once it holds this many
CAPTURE_PARTS = 64


class Capture(Operator):
    """Records every output update; reads back updates and the collection at a time.

    The updates are kept as they arrive (``parts``). Once there are more than
    ``CAPTURE_PARTS`` of them the newest are joined into one *chunk*, and the newest chunk
    is joined with the one before while it is at least half as long (as a binary counter
    carries), so chunks at least double in length from the newest back: each update is
    copied a logarithmic number of times in all, not once per join of everything (which
    made a long run of small batches quadratic)."""

    name = "capture"
    wakes_on_frontier = False
    state_version = 1

    def __init__(self, worker: Worker, inputs: Sequence[Stream], name: str | None = None) -> None:
        super().__init__(worker, inputs, name)
        self.parts: list[Updates] = []
        self._chunks = 0  # the first parts are chunks, longest first (not state: 0 is safe)

    def run(self, frontier: Antichain) -> None:
        parts = self.parts
        parts.extend(self.take())
        if len(parts) > CAPTURE_PARTS:
            k = self._chunks
            chunks = [*parts[:k], concat_updates(parts[k:])]
            while len(chunks) > 1 and 2 * len(chunks[-1]) >= len(chunks[-2]):
                chunks[-2:] = [concat_updates(chunks[-2:])]
            self.parts, self._chunks = chunks, len(chunks)

    def columns(self) -> Updates | None:
        """Every update captured so far, consolidated, as columns (None if there is none)."""
        if not self.parts:
            return None
        u = consolidate(concat_updates(self.parts))
        self.parts, self._chunks = [u], 1
        return u

    def clear(self) -> None:
        """Forget the updates captured so far (a job resumed from an earlier job's checkpoint
        returns only its own output)."""
        self.parts, self._chunks = [], 0

    def updates(self) -> list[tuple[Any, Any, Any]]:
        """Every output update so far, consolidated, sorted by time then data."""
        return update_records(self.columns(), self.inputs[0].layout, self.kind)

    def at(self, t: Any) -> dict[Any, Any]:
        """The output collection at time ``t``: data -> accumulated diff (zeros dropped)."""
        return accumulated_at(self.columns(), self.inputs[0].layout, self.kind, t)

    def frontier_reached(self) -> Antichain:
        return self.frontier

    def held_count(self) -> int:
        return sum(len(u) for u in self.parts)

    def state(self) -> State:
        return {"parts": list(self.parts)}

    def load_state(self, state: State) -> None:
        self.parts, self._chunks = list(state["parts"]), 0
