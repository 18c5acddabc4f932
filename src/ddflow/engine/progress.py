"""Progress: which times are complete at every point of a dataflow, and when operators run.

This module is the one place frontiers are computed; operators only act on the frontier
they are given and report the times of what they keep for later (``outstanding_times``).
It leaves out what operators compute, and how workers communicate.

A frontier ``F`` bounds from below every time that may still arrive (``ddflow.core.frontier``):
a time not beyond ``F`` is complete. Every operator has an *output frontier*
(``op.frontier``), updated only here, after each run:

* an input operator's input frontier is the one its session promises (``{its time}``,
  empty once closed); any other operator's is the meet of its inputs' producers' output
  frontiers (``input_frontier``);
* an operator's output frontier is its input frontier (``output_frontier``), except at the
  engine's own boundaries: ``Enter`` maps ``f`` to ``(f, 0)``; ``Leave`` reports the outer
  frontier of the last finished epoch; an ``Exchange`` reports the meet of every worker's
  input frontier, sent with the updates of the same step (``ddflow.engine.exchange``), so
  downstream a time is complete only once it is complete on every worker.

Steps. The graph is acyclic outside loops and each scope's nodes run in a topological order
(``ddflow.engine.scope``), so one pass runs every operator after its inputs' producers. An
operator runs when its inbox holds updates or its input frontier moved
(``run_operator``); a run is transactional: an operator that raises leaves its inbox as it
was (only batches it refuses, named by the error's ``refused``, are dropped).

Loops (why no pointstamp counting is needed). A loop scope runs in *epochs*: each time its
parent runs it, with ``F`` the meet of its ``Enter``s' input frontiers (parent times) and
``P`` the ``F`` of the previous epoch (``LoopProgress.done``). Iteration ``i`` of the epoch
runs every node once with the frontier::

    A_i = minimal({(f, 0) : f in F}  U  {(g, i + 1) : g in P})

that is: a time ``(o, j)`` is complete once ``o`` is complete outside and, for outer times
new in this epoch, ``j <= i``. This is sound because every operator emits only at times that
were not yet complete (reduce at newly complete times, join at joins with newly complete
times, linear operators at their input's times), so everything at iteration ``<= i`` has
reached ``Feedback`` by the end of iteration ``i - 1`` and re-enters at ``<= i``. Frontiers
only advance: within an epoch ``i`` grows; the next epoch starts at
``{(F', 0)} U {(F, 1)}``, beyond ``{(F, 0)} U {(P, i + 1)}``.

The epoch ends when no work remains at a time whose outer part is complete (``has_work``):
no inbox holds updates and no operator has outstanding times there, recursively through
nested loops. ``Feedback`` holds back updates whose outer time is not complete (they wait for
a later epoch). Then every ``Leave`` pushes its output and reports ``F``.

With several workers the decisions (run the epoch at all, run another iteration) are
collective, so every worker runs the same iterations and the exchanges inside stay in step.
An iteration limit turns a loop that does not converge into ``IterationLimitError``.
"""

from __future__ import annotations

import numpy as np

from ddflow.core.frontier import Antichain
from ddflow.engine.exchange import Exchange
from ddflow.engine.loop import Enter, Feedback, Leave
from ddflow.engine.operator import Operator
from ddflow.engine.scope import IterationLimitError, Scope

__all__ = [
    "has_work",
    "input_frontier",
    "next_due_iteration",
    "outer_frontier",
    "outstanding_times",
    "output_frontier",
    "run_epoch",
    "run_nodes",
    "run_operator",
]


# -- operators -------------------------------------------------------------------------------


def input_frontier(op: Operator) -> Antichain:
    """The frontier of ``op``'s input (see the module docstring)."""
    if op.is_input:
        promised = op.source_frontier()
        if promised is not None:
            return promised
    inputs = op.inputs
    if not inputs:
        if isinstance(op, Feedback):
            f = op.scope.progress.iteration_frontier
            return f if f is not None else op.frontier
        promised = op.source_frontier()
        return promised if promised is not None else op.frontier
    f = inputs[0].producer.frontier
    for s in inputs[1:]:
        g = s.producer.frontier
        if g is not f:
            f = f.meet(g)
    return f


def output_frontier(op: Operator, frontier: Antichain) -> Antichain:
    """The frontier of ``op``'s output once it has run with input frontier ``frontier``."""
    if isinstance(op, Enter):
        return Antichain.of([(*f, 0) for f in frontier.elements], frontier.dim + 1)
    if isinstance(op, Leave):
        return op.frontier  # the outer frontier of the last finished epoch
    if isinstance(op, Exchange):
        return Antichain.of([t for fr in op.peer_frontiers for t in fr], frontier.dim)
    return frontier


def run_operator(op: Operator, multi: bool) -> bool:
    """Run ``op`` if its inbox holds updates or its input frontier moved (always, for an
    exchange among several workers); whether anything changed.

    An operator that does not wake on the frontier (``Operator.wakes``: typically none of its
    outstanding times became complete) is not run when its inboxes are empty: only its output
    frontier moves, as a run would have moved it."""
    f = input_frontier(op)
    busy = any(op.inbox)
    if not busy and not (multi and op.always_run):
        if f is op.seen or f == op.seen:
            return False
        if not op.wakes(f):
            new = output_frontier(op, f)
            changed = new != op.frontier
            op.frontier = new
            op.seen = f
            return changed
    saved = [list(q) for q in op.inbox]
    try:
        op.run(f)
    except BaseException as e:
        refused = {id(u) for u in getattr(e, "refused", ())}
        op.inbox = [[u for u in q if id(u) not in refused] for q in saved] if refused else saved
        raise
    new = output_frontier(op, f)
    changed = busy or new != op.frontier
    op.frontier = new
    op.seen = f
    return changed


# -- scopes ----------------------------------------------------------------------------------


def run_nodes(scope: Scope, multi: bool) -> bool:
    """Run every node of ``scope`` once, in order (a loop scope as one epoch); whether
    anything changed."""
    assert scope.order is not None
    changed = False
    for n in scope.order:
        if isinstance(n, Scope):
            changed = run_epoch(n, multi) or changed
        else:
            changed = run_operator(n, multi) or changed
    return changed


def outer_frontier(scope: Scope) -> Antichain:
    """``F``: the meet of the input frontiers of the loop's ``Enter``s (parent times)."""
    assert scope.parent is not None
    f: Antichain | None = None
    for e in scope.enters:
        g = e.inputs[0].producer.frontier
        f = g if f is None else f.meet(g)
    return f if f is not None else Antichain.empty(scope.parent.kind.dim)


def run_epoch(scope: Scope, multi: bool) -> bool:
    """Run iterations of the loop ``scope`` until nothing remains to do at complete outer
    times (see the module docstring); whether anything changed."""
    parent = scope.parent
    assert parent is not None
    comm = scope.worker.comm
    lp = scope.progress
    pdim = parent.kind.dim
    F = outer_frontier(scope)
    if lp.done is None:
        lp.done = Antichain.of([parent.kind.minimum()], pdim)
    P = lp.done
    busy = any(e.inbox[0] for e in scope.enters)
    need = busy or F != P
    if multi:
        need = any(comm.all_gather(need))
    if not need:
        return False
    dim = pdim + 1
    f0 = [(*f, 0) for f in F.elements]
    lp.outer_complete = Antichain.of(f0, dim)
    changed = busy or F != P
    i = 0
    while True:
        lp.iteration_frontier = Antichain.of(f0 + [(*g, i + 1) for g in P.elements], dim)
        changed = run_nodes(scope, multi) or changed
        more = has_work(scope)
        if multi:
            more = any(comm.all_gather(more))
        if not more:
            break
        nxt = next_due_iteration(scope, P, i)
        if multi:
            nxt = min(comm.all_gather(nxt))
        i = max(i + 1, nxt)
        if scope.limit is not None and i >= scope.limit:
            raise IterationLimitError(
                f"loop '{scope.name}' did not converge within its limit of {scope.limit} "
                f"iterations (outer frontier {F}): updates remained at iteration {i}. "
                "Raise the limit, or check that the loop's body reaches a fixed point"
            )
    lp.iterations = i + 1
    lp.done = F
    for lv in scope.leaves:
        lv.finish()
        lv.frontier = F
    return changed


def _quiet(scope: Scope) -> bool:
    """Whether no inbox of the loop holds updates and every operator in it (nested loops
    included) runs only for updates or outstanding times (``Operator.wakes_on_frontier``)."""
    for n in scope.nodes:
        if isinstance(n, Scope):
            if any(e.inbox[0] for e in n.enters) or not _quiet(n):
                return False
        elif n.wakes_on_frontier or any(n.inbox):
            return False
    return True


def next_due_iteration(scope: Scope, P: Antichain, i: int) -> int:
    """The next iteration of the epoch under way (after ``i``) at which something can happen.

    ``i + 1`` unless the loop is quiet (``_quiet``): then iterations only move frontiers
    until one of the outstanding times with a complete outer part becomes complete, and
    those iterations would run no operator (``run_operator`` skips them all). A time
    ``(o, k)`` is complete at ``A_j`` once ``j >= k`` if ``o`` is beyond ``P`` (new in this
    epoch), at once otherwise; the iterations before the first such ``j`` are skipped. A
    loop that is quiet has some outstanding time with complete outer part (``has_work``
    held), so the answer is finite."""
    if not _quiet(scope):
        return i + 1
    oc = scope.progress.outer_complete
    assert oc is not None
    best: int | None = None
    for n in scope.nodes:
        t = outstanding_times(n)
        if t is None or not len(t):
            continue
        t = t[~oc.beyond_mask(t[:, : oc.dim])]
        if not len(t):
            continue
        new = P.beyond_mask(t[:, :-1])
        if not new.all():
            return i + 1  # complete already: run the next iteration as usual
        k = int(t[:, -1].min())
        best = k if best is None else min(best, k)
    return i + 1 if best is None else max(i + 1, best)


def outstanding_times(node: Operator | Scope) -> np.ndarray | None:
    """The outstanding times of an operator, or of everything inside a loop scope (in the
    loop's parent's dimensions)."""
    if isinstance(node, Operator):
        return node.outstanding_times()
    assert node.parent is not None
    parts = []
    for n in node.nodes:
        t = outstanding_times(n)
        if t is not None and len(t):
            parts.append(t)
    dim = node.kind.dim
    if not parts:
        return np.zeros((0, dim - 1), dtype=np.int64)
    return np.concatenate(parts)[:, : dim - 1]


def has_work(scope: Scope) -> bool:
    """Whether some inbox of the loop holds updates, or something inside it has outstanding
    times whose outer part is complete (the epoch must go on)."""
    oc = scope.progress.outer_complete
    assert oc is not None
    for n in scope.nodes:
        if isinstance(n, Scope):
            if any(e.inbox[0] for e in n.enters):
                return True
        elif any(n.inbox):
            return True
        t = outstanding_times(n)
        if t is not None and len(t) and not oc.beyond_mask(t[:, : oc.dim]).all():
            return True
    return False
