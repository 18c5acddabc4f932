"""Scopes: the root dataflow and loop scopes, whose times are ``Product(outer, iteration)``.

A scope holds operators and child scopes (its *nodes*). Inside a loop scope every time has
one more component than outside, the *iteration*: flat times append it as the last column.
``Enter`` brings a collection in at iteration 0, ``Leave`` takes one out (dropping the
iteration), and ``Feedback`` (the operator behind ``Variable``) carries the loop's result
around to the next iteration (``ddflow.engine.loop``).

Order. Nodes run in a topological order of the graph without feedback edges (computed when
the dataflow starts), so a loop scope runs as one node of its parent: after the operators
that feed its ``Enter``s, before the ones reading its ``Leave``s.

This module is the scopes' structure (nodes, order, the checks a complete loop must pass);
how a loop runs, in epochs of iterations, and why its frontiers are right is in
``ddflow.engine.progress``. What a loop remembers of its progress between epochs is its
``LoopProgress``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ddflow.core.errors import DDError, ScopeError
from ddflow.core.frontier import Antichain
from ddflow.core.time import TimeKind

if TYPE_CHECKING:
    from ddflow.engine.loop import Enter, Feedback, Leave
    from ddflow.engine.operator import Operator
    from ddflow.engine.worker import Worker

__all__ = ["IterationLimitError", "LoopProgress", "Scope"]


class IterationLimitError(DDError, RuntimeError):
    """A loop still had updates after its iteration limit."""


@dataclass
class LoopProgress:
    """What a loop scope knows of its progress (``ddflow.engine.progress`` computes it).

    ``done``: the outer frontier of the last finished epoch (``P``); ``outer_complete``:
    ``{(f, 0) : f in F}`` for the epoch under way, the loop times whose outer part is not
    complete; ``iteration_frontier``: the frontier ``A_i`` of the iteration under way;
    ``iterations``: how many the last epoch ran (statistics)."""

    done: Antichain | None = None
    outer_complete: Antichain | None = None
    iteration_frontier: Antichain | None = None
    iterations: int = 0


class Scope:
    """The root dataflow of a worker (``parent is None``) or a loop inside ``parent``."""

    def __init__(
        self,
        worker: Worker,
        parent: Scope | None,
        *,
        limit: int | None = None,
        name: str | None = None,
    ) -> None:
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise ValueError(f"an iteration limit must be a positive int, got {limit!r}")
        self.worker = worker
        self.parent = parent
        self.limit = limit
        self.name = name or ("root" if parent is None else "iterate")
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.nodes: list[Operator | Scope] = []
        self.enters: list[Enter] = []
        self.leaves: list[Leave] = []
        self.feedbacks: list[Feedback] = []
        self.order: list[Operator | Scope] | None = None
        self._kind: TimeKind | None = None
        self.progress = LoopProgress()
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

    def scopes(self) -> list[Scope]:
        """This scope and every scope nested in it, parents first."""
        out: list[Scope] = [self]
        for n in self.nodes:
            if isinstance(n, Scope):
                out.extend(n.scopes())
        return out

    def operators(self) -> list[Operator]:
        """Every operator of this scope and of the scopes nested in it."""
        out: list[Operator] = []
        for n in self.nodes:
            if isinstance(n, Scope):
                out.extend(n.operators())
            else:
                out.append(n)
        return out

    # -- schedule ----------------------------------------------------------------------------
    def _node_of(self, op: Operator) -> Operator | Scope | None:
        """The node of this scope that contains ``op`` (``None`` if ``op`` is outside)."""
        s: Scope | None = op.scope
        if s is self:
            return op
        while s is not None and s.parent is not self:
            s = s.parent
        return s

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
            ops = n.operators() if isinstance(n, Scope) else [n]
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
