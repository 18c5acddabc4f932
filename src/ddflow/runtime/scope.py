"""Scopes: the root dataflow and iterative subscopes (loops) with ``Product(outer, inner)`` times.

A scope holds operators and child scopes (its *nodes*). Inside a child scope every time has
one more component than outside: the loop counter (flat times append it as the last
column). ``Enter`` brings a collection in at counter 0, ``Leave`` takes one out (dropping
the counter), and ``Feedback`` (the operator behind ``Variable``) carries the loop's result
around to the next iteration, adding one to the counter.

Order. Nodes run in a topological order of the graph without feedback edges (computed when
the dataflow starts), so a child scope runs as one node of its parent: after the operators
that feed its ``Enter``s, before the ones reading its ``Leave``s.

Progress inside a loop (why no pointstamp counting is needed). A child scope runs in
*epochs*: each time its parent asks, with ``F`` the meet of its inputs' frontiers (parent
times) and ``P`` the ``F`` of the previous epoch. Epoch round ``i`` runs every node once
with the frontier::

    A_i = minimal({(f, 0) : f in F}  U  {(g, i + 1) : g in P})

that is: a time ``(o, j)`` is complete once ``o`` is complete outside and, for outer times
new in this epoch, ``j <= i``. This is sound because every operator emits only at times
that were not yet complete (reduce at newly complete times, join at joins with newly
complete times, linear operators at their input's times), so everything at counter ``<= i``
has reached ``Feedback`` by the end of round ``i - 1`` and re-enters at ``<= i``. Frontiers
only advance: within an epoch ``i`` grows; the next epoch starts at
``{(F', 0)} U {(F, 1)}``, beyond ``{(F, 0)} U {(P, i + 1)}``.

The epoch ends when no work remains at a time whose outer part is complete: no operator
inbox holds updates, and no operator holds updates or pending work (``held_times``) at such
a time, recursively through child scopes. ``Feedback`` keeps back updates whose outer time
is not complete (they wait for a later epoch), so data at future outer times does not
circle the loop. Then the ``Leave`` operators push their output, consolidated (changes at
many counters of one outer time usually cancel), and report ``F`` as their frontier.

With several workers the decisions (run the epoch at all, run another round) are
collective, so every worker runs the same rounds and the exchanges inside stay in step.

An iteration limit turns a loop that does not converge into ``IterationLimitError``; the
worker is then closed (its loop state is mid-iteration), and further steps raise
``DataflowClosedError`` naming the cause.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

import numpy as np

from ddflow.core.errors import DDError, ScopeError
from ddflow.core.frontier import Antichain
from ddflow.core.time import TimeKind

if TYPE_CHECKING:
    from ddflow.runtime.worker import Operator, Worker

__all__ = ["IterationLimitError", "Scope"]


class IterationLimitError(DDError, RuntimeError):
    """A loop still had updates after its iteration limit."""


class Scope:
    """The root dataflow of a worker (``parent is None``) or a loop inside ``parent``."""

    def __init__(self, worker: Worker, parent: Scope | None, *, limit: int | None = None,
                 name: str | None = None) -> None:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 1):
            raise ValueError(f"an iteration limit must be a positive int, got {limit!r}")
        self.worker = worker
        self.parent = parent
        self.limit = limit
        self.name = name or ("root" if parent is None else "iterate")
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.nodes: list[Operator | Scope] = []
        self.enters: list[Any] = []  # ddflow.operators.iterate.Enter
        self.leaves: list[Any] = []  # Leave
        self.feedbacks: list[Any] = []  # Feedback
        self.order: list[Operator | Scope] | None = None
        self._kind: TimeKind | None = None
        self.done: Antichain | None = None  # P: the outer frontier of the previous epoch
        self.round_frontier: Antichain | None = None
        self.outer_complete: Antichain | None = None  # {(f, 0)}: outer times not complete
        self.rounds = 0  # rounds run in the last epoch (statistics)
        if parent is not None:
            if parent.order is not None:
                raise RuntimeError(
                    "the dataflow is already running: build every operator before the first step"
                )
            parent.nodes.append(self)

    @property
    def kind(self) -> TimeKind:
        if self.parent is None:
            return self.worker.time_kind
        if self._kind is None:
            self._kind = TimeKind((self.parent.kind.shape, None))
        return self._kind

    def __repr__(self) -> str:
        return f"Scope({self.name!r}, depth={self.depth})"

    def contains(self, other: Scope) -> bool:
        """Whether ``other`` is this scope or nested inside it."""
        s: Scope | None = other
        while s is not None:
            if s is self:
                return True
            s = s.parent
        return False

    # -- schedule ----------------------------------------------------------------------------
    def _node_of(self, op: Operator) -> Operator | Scope | None:
        """The node of this scope that contains ``op`` (``None`` if ``op`` is outside)."""
        s: Scope | None = op.scope
        if s is self:
            return op
        while s is not None and s.parent is not self:
            s = s.parent
        return s

    def _ops(self) -> list[Operator]:
        out: list[Operator] = []
        for n in self.nodes:
            if isinstance(n, Scope):
                out.extend(n._ops())
            else:
                out.append(n)
        return out

    def check(self) -> None:
        """Errors a loop can only show once it is complete (before the first step)."""
        for fb in self.feedbacks:
            if fb.source is None:
                raise ScopeError(
                    f"Variable '{fb.name}' was never set: call variable.set(collection) with "
                    "the loop's result before running the dataflow"
                )
        for n in self.nodes:
            if isinstance(n, Scope):
                n.check()

    def schedule(self) -> None:
        """Topological order of the nodes (creation order among independent ones)."""
        index = {id(n): k for k, n in enumerate(self.nodes)}
        deps: dict[int, set[int]] = {id(n): set() for n in self.nodes}
        users: dict[int, list[Any]] = {id(n): [] for n in self.nodes}
        for n in self.nodes:
            ops = n._ops() if isinstance(n, Scope) else [n]
            for op in ops:
                for s in op.inputs:
                    src = self._node_of(s.producer)
                    if src is None or src is n or id(src) not in deps:
                        continue
                    if id(src) not in deps[id(n)]:
                        deps[id(n)].add(id(src))
                        users[id(src)].append(n)
        ready = [(index[id(n)], n) for n in self.nodes if not deps[id(n)]]
        heapq.heapify(ready)
        order: list[Any] = []
        while ready:
            _, n = heapq.heappop(ready)
            order.append(n)
            for u in users[id(n)]:
                deps[id(u)].discard(id(n))
                if not deps[id(u)]:
                    heapq.heappush(ready, (index[id(u)], u))
        if len(order) != len(self.nodes):
            raise ScopeError("the dataflow has a cycle outside a Variable's feedback")
        self.order = order
        for n in self.nodes:
            if isinstance(n, Scope):
                n.schedule()

    # -- running -----------------------------------------------------------------------------
    def run_nodes(self, multi: bool) -> bool:
        """Run every node once, in order; whether anything changed."""
        assert self.order is not None
        run_op = self.worker._run_op
        changed = False
        for n in self.order:
            if isinstance(n, Scope):
                changed = n.run_epoch(multi) or changed
            else:
                changed = run_op(n, multi) or changed
        return changed

    def _outer_frontier(self) -> Antichain:
        assert self.parent is not None
        pdim = self.parent.kind.dim
        f: Antichain | None = None
        for e in self.enters:
            g = e.inputs[0].producer.frontier
            f = g if f is None else f.meet(g)
        return f if f is not None else Antichain.empty(pdim)

    def run_epoch(self, multi: bool) -> bool:
        """Run rounds until nothing remains to do at complete outer times."""
        assert self.parent is not None
        comm = self.worker.comm
        pdim = self.parent.kind.dim
        F = self._outer_frontier()
        if self.done is None:
            self.done = Antichain.of([self.parent.kind.minimum()], pdim)
        P = self.done
        busy = any(e.inbox[0] for e in self.enters)
        need = busy or F != P
        if multi:
            need = any(comm.all_gather(need))
        if not need:
            return False
        dim = pdim + 1
        f0 = [tuple(f) + (0,) for f in F.elements]
        self.outer_complete = Antichain.of(f0, dim)
        changed = busy or F != P
        i = 0
        while True:
            self.round_frontier = Antichain.of(
                f0 + [tuple(g) + (i + 1,) for g in P.elements], dim)
            changed = self.run_nodes(multi) or changed
            more = self._has_work()
            if multi:
                more = any(comm.all_gather(more))
            if not more:
                break
            i += 1
            if self.limit is not None and i >= self.limit:
                raise IterationLimitError(
                    f"loop '{self.name}' did not converge within its limit of {self.limit} "
                    f"iterations (outer frontier {F}): updates remained at iteration {i}. "
                    "Raise the limit, or check that the loop's body reaches a fixed point"
                )
        self.rounds = i + 1
        self.done = F
        for lv in self.leaves:
            lv.finish(F)
        return changed

    def held_times(self) -> np.ndarray:
        """Times (this scope's parent dims) of updates or work held anywhere inside."""
        assert self.parent is not None
        parts = []
        for n in self.nodes:
            t = n.held_times()
            if t is not None and len(t):
                parts.append(t)
        dim = self.kind.dim
        if not parts:
            return np.zeros((0, dim - 1), dtype=np.int64)
        return np.concatenate(parts)[:, : dim - 1]

    def _has_work(self) -> bool:
        oc = self.outer_complete
        assert oc is not None
        for n in self.nodes:
            if isinstance(n, Scope):
                if any(e.inbox[0] for e in n.enters):
                    return True
            elif any(n.inbox):
                return True
            t = n.held_times()
            if t is not None and len(t) and not oc.beyond_mask(t[:, : oc.dim]).all():
                return True
        return False
