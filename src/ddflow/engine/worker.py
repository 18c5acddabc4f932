"""The engine's worker: it hosts a dataflow graph and steps its operators.

A worker owns the operators (created in topological order: each after its inputs'
producers), the scopes they live in (the root and loops), the time kind of the root scope
and a communicator to its peers. ``step`` runs every operator once, in order, each with the
input frontier progress tracking gives it (``ddflow.engine.progress``); ``step_while`` and
``run`` repeat steps. A step is transactional per operator: an operator that raises leaves
its inbox as it was and has pushed nothing, so the error reaches the caller and the dataflow
stays usable; only a loop stopped mid-way or a retraction inside a subtraction-free
collection closes the dataflow (``DataflowClosedError`` afterwards, naming the cause).

Several workers: a worker built with a communicator (``ddflow.engine.comm``) is one of
``peers`` workers that each host the same dataflow for a share of the keys. Keyed operators
are preceded by an ``Exchange`` that routes updates by key and agrees on frontiers. All
workers step in lockstep: exchanges run at every step, and ``step``, ``step_while`` and
``run`` decide together (any worker busy or wanting to continue keeps everyone going). An
error in one worker fails the whole job (the communicator tells the peers); only a single
worker can carry on after an operator raised.

This module leaves out how inputs are fed (``ddflow.io``) and the user API that builds the
graph (``ddflow.dataflow``). ``checkpoint``/``restore`` write and load the worker's state
(``ddflow.engine.checkpoint``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ddflow.core.errors import DataflowClosedError, RetractionError, TimeError
from ddflow.core.time import INT_TIME, TimeKind
from ddflow.engine import progress
from ddflow.engine.comm import Communicator, LocalComm
from ddflow.engine.operator import Operator
from ddflow.engine.scope import IterationLimitError, Scope

if TYPE_CHECKING:
    from ddflow.engine.checkpoint import CheckpointLog

__all__ = ["SideDictionary", "Worker"]


class SideDictionary(Protocol):
    """A dictionary whose new entries travel with a worker's exchanges (the SQL layer's
    content-coded strings): what this worker made since its last exchange, and what a peer
    made."""

    def take_new(self) -> Any: ...

    def learn(self, entries: Any) -> None: ...


class Worker:
    """One worker hosting a dataflow (see the module docstring)."""

    def __init__(self, comm: Communicator | None = None) -> None:
        self.comm: Communicator = comm if comm is not None else LocalComm()
        self.operators: list[Operator] = []
        self._kind: TimeKind | None = None
        self.started = False
        self.root = Scope(self, None)
        self.failed: BaseException | None = None
        #: a dictionary whose new entries go to the peers with every exchange (or None)
        self.string_dict: SideDictionary | None = None
        #: what checkpoints into which directory have written (``ddflow.engine.checkpoint``)
        self.checkpoint_log: CheckpointLog | None = None

    @property
    def index(self) -> int:
        """This worker's index among its peers (0 for a single worker)."""
        return self.comm.index

    @property
    def peers(self) -> int:
        """How many workers host this dataflow."""
        return self.comm.peers

    @property
    def time_kind(self) -> TimeKind:
        """The times of the root scope (int until an input says otherwise)."""
        return self._kind if self._kind is not None else INT_TIME

    def set_time_kind(self, kind: TimeKind) -> None:
        """Fix the root scope's time kind (the first input does). It is an error to give
        another kind once one is fixed, or a partially ordered one after operators were built
        assuming int times; raises ``TimeError``."""
        if self._kind is None:
            if self.operators and kind != INT_TIME:
                raise TimeError("create inputs before operators when using Product times")
            self._kind = kind
        elif kind != self._kind:
            raise TimeError(
                f"this worker's times are {self._kind.describe()}; an input with "
                f"{kind.describe()} times cannot join it (one time type per scope)"
            )

    def add_operator(self, op: Operator) -> None:
        """Register a new operator (operators call this as they are built). It is an error to
        add one other than an input once the dataflow has run."""
        if self.started and not op.is_input:
            raise RuntimeError(
                "the dataflow is already running: build every operator before the first step"
            )
        self.operators.append(op)
        op.scope.nodes.append(op)
        if self.started:
            self.root.order = None  # an input added while running: schedule again

    def iterative(
        self, *, limit: int | None = None, name: str | None = None, parent: Scope | None = None
    ) -> Scope:
        """A new loop scope (inside ``parent``, default the root) for ``Variable``s; bring
        collections in with ``enter(scope)`` and out with ``leave()``. ``limit`` bounds the
        iterations per epoch (``IterationLimitError`` beyond it)."""
        if self.started:
            raise RuntimeError(
                "the dataflow is already running: build every operator before the first step"
            )
        return Scope(self, parent if parent is not None else self.root, limit=limit, name=name)

    # -- stepping ------------------------------------------------------------------------------
    def step(self) -> bool:
        """Run every operator once; return whether anything changed (on any worker)."""
        changed = self._step_local()
        if self.comm.peers > 1:
            changed = any(self.comm.all_gather(changed))
        return changed

    def _step_local(self) -> bool:
        """Run every operator once (loops until they settle); whether anything changed on
        this worker."""
        if self.failed is not None:
            raise DataflowClosedError(
                f"this dataflow stopped after an error ({self.failed}); build it again"
            ) from self.failed
        if self.root.order is None:
            self.root.check()
            self.root.schedule()
        self.started = True
        try:
            return progress.run_nodes(self.root, self.comm.peers > 1)
        except (IterationLimitError, RetractionError) as e:
            # the dataflow cannot go on from here (a loop stopped mid-way, or a retraction
            # already inside a subtraction-free collection): close it with the cause
            self.failed = e
            raise

    def _agree(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any worker (every worker gets the same answer)."""
        if self.comm.peers == 1:
            return flag
        return any(self.comm.all_gather(flag))

    def step_while(
        self,
        condition: Callable[[], bool],
        max_steps: int | None = None,
        *,
        at_least_once: bool = False,
    ) -> None:
        """Step while ``condition()`` holds on some worker (at most ``max_steps`` steps);
        ``at_least_once`` steps once before the first check (saves a collective when the
        caller knows there is work, e.g. right after an input advanced).

        With several workers, every worker must call this with the same arguments.
        """
        steps = 0
        if self.comm.peers > 1:
            # One collective per step: (anything changed, still wanted) from every worker.
            if not at_least_once and not self._agree(condition()):
                return
            while True:
                flags = self.comm.all_gather((self._step_local(), condition()))
                steps += 1
                if not any(w for _, w in flags) or not any(c for c, _ in flags):
                    return  # done, or nothing can change until some input advances
                if max_steps is not None and steps >= max_steps:
                    return
        if at_least_once:
            self.step()
            steps += 1
            if max_steps is not None and steps >= max_steps:
                return
        while condition():
            if not self.step() and condition():
                # Nothing can change until some input advances: stop instead of spinning.
                return
            steps += 1
            if max_steps is not None and steps >= max_steps:
                return

    def run(self) -> None:
        """Step until no operator has work for the current input frontiers (on any worker)."""
        while self.step():
            pass

    # -- statistics and state ------------------------------------------------------------------
    def stats(self) -> list[dict[str, Any]]:
        """Per-arrangement statistics: batches, updates held, merge work outstanding.

        Each entry also has ``held``: the updates (or pending ``(key, time)`` work) its
        operator keeps outside the trace, waiting for the frontier. Operators without an
        arrangement that keep updates (a capture's output, updates a loop's feedback or
        ``consolidate`` hold back) get an entry too, with ``batches`` and ``updates`` 0;
        one that keeps state of its own instead of a trace (a total-order count's totals
        per key) has its records as ``updates`` and their ``bytes``.
        """
        out = []
        for op in self.operators:
            held = op.held_count()
            kept = op.kept()
            if op.spine is not None:
                out.append({"operator": op.name, **op.spine.stats(), "held": held})
            elif kept is not None:
                records, nbytes = kept
                out.append(
                    {
                        "operator": op.name,
                        "batches": 0,
                        "updates": records,
                        "bytes": nbytes,
                        "held": held,
                    }
                )
            elif held:
                out.append({"operator": op.name, "batches": 0, "updates": 0, "held": held})
        return out

    def checkpoint(self, path: Any, **kw: Any) -> dict[str, Any]:
        """Write this worker's state into directory ``path`` (incrementally: only trace
        batches new since the last checkpoint there); see ``ddflow.engine.checkpoint``."""
        from ddflow.engine.checkpoint import write_checkpoint

        return write_checkpoint(self, path, **kw)

    def restore(self, path: Any, **kw: Any) -> dict[str, Any]:
        """Load the newest committed checkpoint in ``path`` into this worker, which hosts the
        same dataflow, built and not yet stepped; see ``ddflow.engine.checkpoint``."""
        from ddflow.engine.checkpoint import restore_checkpoint

        return restore_checkpoint(self, path, **kw)
