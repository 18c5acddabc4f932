"""Operators and streams: the nodes and edges of a dataflow graph, as the engine runs them.

An ``Operator`` reads the updates its input streams deliver into its inboxes (one per input)
and pushes updates to its output ``Stream``, whose consumers are other operators' inboxes.
The engine decides when an operator runs and with which input frontier
(``ddflow.engine.progress``); ``run(frontier)`` then acts on every update whose time the
frontier has passed, in one vectorized batch however many distinct times it holds. An
operator never computes a frontier itself: it keeps back what is not complete (its *held
updates*, or *pending work* for later times) and reports their times when asked
(``outstanding_times``), so loops know whether another iteration is needed.

A step is transactional per operator: ``run`` either returns having taken its inboxes and
pushed its output, or raises having changed nothing (the engine puts the inboxes back).

State. An operator whose behaviour depends on what it has seen (a trace, held updates,
pending work) declares it, as differential dataflow's batches carry a ``Description``:

* ``state_version`` (an int; ``None`` for a stateless operator) names the format of its
  state; it enters every checkpoint's fingerprint, so a checkpoint written with another
  version is refused whole;
* ``state()`` returns the state as a dict of plain data (numpy arrays, frontiers, layouts,
  update batches, diff types, trace batches and the state of spines), never live dataflow
  objects; ``load_state(state)`` puts it back into a freshly built operator of the same
  dataflow, before it first runs.

It is an error to change what ``state()`` returns (a key renamed, added or dropped, or a
value's meaning) without raising ``state_version``: a test records every stateful
operator's keys and version and fails until both change together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ddflow.core.columns import Layout
from ddflow.core.errors import DataError, ScopeError
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates

if TYPE_CHECKING:
    from ddflow.engine.scope import Scope
    from ddflow.engine.worker import Worker
    from ddflow.trace.spine import Spine

__all__ = ["Operator", "State", "Stream"]

#: an operator's state: named values of plain data (see the module docstring)
State = dict[str, Any]


class Stream:
    """The output edge of an operator: its consumers and the layout of its records.

    ``layout`` is known when the dataflow is built wherever the records' shape is (an input
    given a shape, operators that keep or fix their input's shape); otherwise the first
    batch through sets it. Either way, a later batch of another width is refused."""

    def __init__(self, worker: Worker, producer: Operator) -> None:
        self.worker = worker
        self.producer = producer
        self.layout: Layout | None = None
        self.consumers: list[tuple[Operator, int]] = []

    @property
    def producer_scope(self) -> Scope:
        """The scope whose times this stream carries (a loop's ``leave`` produces its
        parent's)."""
        return self.producer.output_scope()

    def set_layout(self, layout: Layout) -> None:
        if self.layout is None:
            self.layout = layout
        elif self.layout.width != layout.width:
            raise DataError(
                f"operator '{self.producer.name}' produced records of shape {layout} after "
                f"records of shape {self.layout}; a collection's records must keep one shape"
            )

    def push(self, u: Updates | Any, layout: Layout | None = None) -> None:
        if layout is not None:
            self.set_layout(layout)
        if isinstance(u, Updates) and len(u) == 0:
            return
        for op, port in self.consumers:
            op.inbox[port].append(u)


class Operator:
    """A dataflow node: reads its inboxes when the engine runs it, pushes downstream."""

    name = "operator"
    #: run at every step even without input (exchanges: their peers expect a message)
    always_run: ClassVar[bool] = False
    #: fed from outside the dataflow (an input session's operator): may join a running
    #: dataflow, and its input frontier is the one its feeder promises (``source_frontier``)
    is_input: ClassVar[bool] = False
    #: whether the operator must run when only its input frontier moved (empty inboxes).
    #: False promises that such a run would do nothing but bookkeeping (advance its trace
    #: handles' compaction, its uppers) unless one of its ``outstanding_times`` became
    #: complete: the engine then skips it (``ddflow.engine.progress.run_operator``), which
    #: spares every idle operator of a loop its run at each iteration. True (the default)
    #: is always correct.
    wakes_on_frontier: ClassVar[bool] = True
    #: the format of ``state()``; None: the operator keeps no state between runs
    state_version: ClassVar[int | None] = None
    #: the arrangement's trace this operator maintains, if any (statistics)
    spine: Spine | None = None

    def __init__(
        self,
        worker: Worker,
        inputs: Sequence[Stream],
        name: str | None = None,
        *,
        scope: Scope | None = None,
    ) -> None:
        self.worker = worker
        if name is not None:
            self.name = name
        self.inputs = list(inputs)
        if scope is None:
            scope = _common_scope(worker, self.inputs, self.name)
        self.scope = scope
        self.kind = scope.kind
        self.inbox: list[list[Any]] = [[] for _ in inputs]
        self.output = Stream(worker, self)
        # progress: set by the engine only (``ddflow.engine.progress``)
        self.frontier = Antichain.of([self.kind.minimum()], self.kind.dim)
        self.seen: Antichain | None = None  # the input frontier of the last run
        worker.add_operator(self)
        for port, s in enumerate(inputs):
            s.consumers.append((self, port))

    def take(self, port: int = 0) -> list[Any]:
        items = self.inbox[port]
        self.inbox[port] = []
        return items

    def run(self, frontier: Antichain) -> None:
        raise NotImplementedError

    def wakes(self, frontier: Antichain) -> bool:
        """Whether a run with empty inboxes at the input frontier ``frontier`` (moved since
        the last run) could do more than bookkeeping: always, unless the operator opts out
        (``wakes_on_frontier``); then only if one of its outstanding times is complete."""
        if self.wakes_on_frontier:
            return True
        t = self.outstanding_times()
        return t is not None and len(t) > 0 and not bool(frontier.beyond_mask(t).all())

    def output_scope(self) -> Scope:
        """The scope whose times this operator's output carries."""
        return self.scope

    def source_frontier(self) -> Antichain | None:
        """For an input operator: the frontier its feeder promises (None for the others,
        whose input frontier the engine computes from their inputs')."""
        return None

    def spines(self) -> list[Spine]:
        """The traces this operator maintains (checkpoints follow their merges)."""
        return [] if self.spine is None else [self.spine]

    def outstanding_times(self) -> np.ndarray | None:
        """Times ``(n, d)`` of this operator's held updates and pending work: where it may
        still produce output once the frontier passes them (loops ask, to know whether
        another iteration is needed)."""
        return None

    def kept(self) -> tuple[int, int] | None:
        """What this operator keeps as its own state beside any trace, as ``(records,
        bytes)`` (statistics); None when it keeps none of note."""
        return None

    def held_count(self) -> int:
        """How many updates (or pending ``(key, time)`` evaluations) this operator keeps
        outside any trace (statistics)."""
        t = self.outstanding_times()
        return 0 if t is None else len(t)

    def identity(self) -> tuple[Any, ...]:
        """What, beyond its class, name and wiring, a checkpoint of this operator must match
        (an input's diff and time types)."""
        return ()

    # -- state ---------------------------------------------------------------------------------
    def state(self) -> State:
        """This operator's state (see the module docstring); ``{}`` when stateless."""
        if self.state_version is not None:
            raise NotImplementedError(f"{type(self).__name__} declares state but no state()")
        return {}

    def load_state(self, state: State) -> None:
        """Put back what ``state()`` returned, into this operator built afresh."""
        if self.state_version is not None:
            raise NotImplementedError(f"{type(self).__name__} declares state but no load_state()")


def _common_scope(worker: Worker, inputs: Sequence[Stream], name: str) -> Scope:
    if not inputs:
        return worker.root
    scope = inputs[0].producer_scope
    for s in inputs[1:]:
        if s.producer_scope is not scope:
            raise ScopeError(
                f"'{name}' combines collections of different scopes ({scope!r} and "
                f"{s.producer_scope!r}); bring outer collections into a loop with "
                "collection.enter(scope) and results out with leave()"
            )
    return scope
