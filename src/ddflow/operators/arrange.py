"""Arrange: turns a stream of updates into a shared, indexed trace and a stream of its batches.

Updates wait in the batcher until the input frontier passes their times; then all complete
updates (however many distinct times) are consolidated into one ``TraceBatch`` with
description ``[previous frontier, new frontier)``, appended to the spine, and handed to every
consumer. Consumers read the trace through their own ``TraceHandle`` (see ``trace.spine``);
several operators share one arrangement this way.

``by_self`` arranges whole records as keys (no values); otherwise records are ``(key, val)``.
"""

from __future__ import annotations

import numpy as np

from ddflow.core.columns import Layout, Tup
from ddflow.core.errors import DataError
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, held_times, split_complete
from ddflow.engine.operator import Operator, State, Stream
from ddflow.engine.worker import Worker
from ddflow.trace.batch import Description, TraceBatch
from ddflow.trace.spine import Spine

__all__ = ["Arrange", "split_layout"]


def split_layout(layout: Layout, by_self: bool, op_name: str) -> tuple[Layout, Layout]:
    """``(key layout, value layout)`` of an arranged record layout."""
    if by_self:
        return layout, Tup(())
    if not isinstance(layout, Tup) or len(layout.children) != 2:
        raise DataError(
            f"'{op_name}' needs (key, value) records, got records of shape {layout}; "
            "use map(lambda x: (key, value)) first, or arrange_by_self"
        )
    return layout.children[0], layout.children[1]


class Arrange(Operator):
    """Arranges a stream: ``held`` keeps updates until the frontier passes their times,
    ``spine`` the trace of the batches made so far, ``upper`` the frontier it reached."""

    name = "arrange"
    wakes_on_frontier = False
    state_version = 1

    def __init__(
        self,
        worker: Worker,
        s: Stream,
        by_self: bool,
        name: str | None = None,
        effort: int | None = 4,
        fanin: int | str = 2,
    ) -> None:
        if s.layout is not None:  # a shape known already is checked as the dataflow is built
            split_layout(s.layout, by_self, name or self.name)
        super().__init__(worker, [s], name)
        self.by_self = by_self
        dim = self.kind.dim
        if effort is not None and (not isinstance(effort, int) or effort < 1):
            raise ValueError(f"merge effort must be an int >= 1 or None, got {effort!r}")
        self.spine: Spine = Spine(0, dim, effort=effort, fanin=fanin)
        self.held: list[Updates] = []
        self.upper = Antichain.of([self.kind.minimum()], dim)
        self.key_layout: Layout | None = None
        self.val_layout: Layout | None = None
        self._learn_layout()

    @property
    def key_width(self) -> int:
        return self.key_layout.width if self.key_layout is not None else 0

    def _learn_layout(self) -> None:
        if self.key_layout is None and self.inputs[0].layout is not None:
            self.key_layout, self.val_layout = split_layout(
                self.inputs[0].layout, self.by_self, self.name
            )
            self.spine.key_width = self.key_layout.width

    def outstanding_times(self) -> np.ndarray | None:
        return held_times(self.held)

    def state(self) -> State:
        return {
            "spine": self.spine.state(),
            "held": list(self.held),
            "upper": self.upper,
            "key_layout": self.key_layout,
            "val_layout": self.val_layout,
        }

    def load_state(self, state: State) -> None:
        self.spine.load_state(state["spine"])
        self.held, self.upper = list(state["held"]), state["upper"]
        self.key_layout, self.val_layout = state["key_layout"], state["val_layout"]

    def run(self, frontier: Antichain) -> None:
        new = self.take()
        self._learn_layout()
        if frontier == self.upper:
            self.held.extend(new)
            return
        ready, rest = split_complete(self.held + new, frontier)
        desc = Description(self.upper, frontier, self.spine.logical)
        batch = None
        if ready is not None and len(ready):
            batch = TraceBatch.build(self.key_width, ready, desc)
        # commit: nothing above can have changed state
        self.held = rest
        self.upper = frontier
        if batch is not None and len(batch):
            self.spine.insert(batch)
            self.output.push(batch)
        else:
            self.spine.advance_upper(frontier)
