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


class Capture(Operator):
    """Records every output update; reads back updates and the collection at a time."""

    name = "capture"
    wakes_on_frontier = False
    state_version = 1

    def __init__(self, worker: Worker, inputs: Sequence[Stream], name: str | None = None) -> None:
        super().__init__(worker, inputs, name)
        self.parts: list[Updates] = []

    def run(self, frontier: Antichain) -> None:
        self.parts.extend(self.take())
        if len(self.parts) > 64:
            self.parts = [concat_updates(self.parts)]

    def columns(self) -> Updates | None:
        """Every update captured so far, consolidated, as columns (None if there is none)."""
        if not self.parts:
            return None
        u = consolidate(concat_updates(self.parts))
        self.parts = [u]
        return u

    def clear(self) -> None:
        """Forget the updates captured so far (a job resumed from an earlier job's checkpoint
        returns only its own output)."""
        self.parts = []

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
        self.parts = list(state["parts"])
