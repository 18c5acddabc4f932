"""Graph algorithms as incremental dataflows: BFS, shortest paths (ordinary and over the
min-sum monoid), reachability and components.

Every function takes collections of one worker (any runtime) and returns a collection that
stays correct as edges and roots are added and removed. Nodes are ints (any orderable
values work through the per-record paths, the vectorized paths assume numbers); edges are
``(src, dst)`` records, weighted edges ``(src, dst, weight)`` with non-negative int weights.

* ``bfs``: hop distances from the roots, differential dataflow's BFS: ``iterate`` over
  ``join_map`` with the edges, the roots folded back in, and ``min`` per node.
* ``shortest_paths``: the same over weighted edges (the "ordinary" version: it
  keeps every node's least distance found in at most ``i`` hops).
* ``shortest_paths_monoid``: the min-sum monoid version: distances live in ``MinSum`` diffs
  (plus is min, times is +), ``join`` adds weights, ``reduce_solve`` keeps a node's
  least distance and only ever adds; the loop folds the roots in each round and needs no
  subtraction. Edges and roots may only be inserted (a retraction is an error).
* ``reachability``: the nodes reachable from the roots (``distinct`` in the loop).
* ``connected_components``: each node of an undirected graph labelled with the least node
  of its component, by label propagation.
* ``strongly_connected_components``: each node labelled with the least node of its
  strongly connected component (DD's ``scc``: edges whose ends get different labels from
  forward and backward propagation are trimmed until none remains; nested loops).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ddflow.core.diff import MinSum
from ddflow.dataflow.collection import Collection

__all__ = [
    "bfs",
    "connected_components",
    "reachability",
    "shortest_paths",
    "shortest_paths_monoid",
    "strongly_connected_components",
]


def _with_zero(x: Any) -> Any:
    return (x, np.zeros_like(x))


def _step(k: Any, dist: Any, dst: Any) -> Any:
    return (dst, dist + 1)


def _weighted(e: Any) -> Any:
    return (e[0], (e[1], e[2]))


def _relax(k: Any, dist: Any, dw: Any) -> Any:
    return (dw[0], dist + dw[1])


def bfs(edges: Collection, roots: Collection, *, limit: int | None = None) -> Collection:
    """``(node, hops)`` for every node reachable from a root: the least number of edges on a
    path from any root."""
    nodes = roots.map(_with_zero, vectorized=True, name="bfs_roots")

    def body(dists: Collection) -> Collection:
        e = edges.enter(dists.scope)
        n = nodes.enter(dists.scope)
        return (
            dists.join_map(e, _step, vectorized=True, name="bfs_step").concat(n).min(name="bfs_min")
        )

    return nodes.iterate(body, limit=limit, name="bfs")


def shortest_paths(edges: Collection, roots: Collection, *, limit: int | None = None) -> Collection:
    """``(node, distance)``: least total weight of a path from any root over ``(src, dst,
    weight)`` edges (iterating by hops; exact under any edge changes)."""
    nodes = roots.map(_with_zero, vectorized=True, name="sssp_roots")
    wedges = edges.map(_weighted, vectorized=True, name="sssp_edges")

    def body(dists: Collection) -> Collection:
        e = wedges.enter(dists.scope)
        n = nodes.enter(dists.scope)
        return (
            dists.join_map(e, _relax, vectorized=True, name="sssp_relax")
            .concat(n)
            .min(name="sssp_min")
        )

    return nodes.iterate(body, limit=limit, name="sssp")


def _edge_weight(e: Any) -> Any:
    return ((e[0], e[1]), e[2])


def _root_zero(r: Any) -> Any:
    return (r, np.zeros_like(r))


def _dst(e: Any) -> Any:
    return e[1]


def shortest_paths_monoid(
    edges: Collection, roots: Collection, *, limit: int | None = None
) -> Collection:
    """Like ``shortest_paths`` for insert-only inputs, with distances as ``MinSum`` diffs
    (the min-sum monoid). Returns ``(node, distance)`` records with diff 1 (the accumulated
    ``MinSum`` diffs turned back into data at the end)."""
    wedges = edges.explode(
        _edge_weight, vectorized=True, diff=MinSum, name="sssp_monoid_edges"
    )  # (src, dst) with MinSum(weight)
    start = roots.explode(
        _root_zero, vectorized=True, diff=MinSum, name="sssp_monoid_roots"
    )  # node with MinSum(0)

    def body(reached: Collection) -> Collection:
        e = wedges.enter(reached.scope).arrange_by_key()
        # (src, dst) edges of reached nodes: diff weight + distance (MinSum's times is +)
        return (
            e.semijoin(reached, name="sssp_monoid_relax")
            .map(_dst, vectorized=True)
            .reduce_solve("min", name="sssp_monoid_min")
        )

    dist = start.iterate(body, limit=limit, fold_initial=True, name="sssp_monoid")
    # each node's accumulated MinSum is its distance: turn it into (node, distance) data
    return dist.count(name="sssp_monoid_value").map(_minsum_value, name="sssp_monoid_out")


def _minsum_value(r: Any) -> Any:
    return (r[0], r[1].value)


def reachability(edges: Collection, roots: Collection, *, limit: int | None = None) -> Collection:
    """The nodes reachable from the roots (roots included)."""

    def body(reached: Collection) -> Collection:
        e = edges.enter(reached.scope)
        r = roots.enter(reached.scope)
        return (
            reached.map(_with_zero, vectorized=True)
            .join_map(e, lambda k, z, dst: dst, vectorized=True, name="reach_step")
            .concat(r)
            .distinct(name="reach_distinct")
        )

    return roots.distinct().iterate(body, limit=limit, name="reachability")


def _swap(e: Any) -> Any:
    return (e[1], e[0])


def _self_label(e: Any) -> Any:
    return (e[0], e[0])


def _propagate(
    edges: Collection, labels: Collection, *, limit: int | None = None, name: str = "propagate"
) -> Collection:
    """``(node, least label)`` where a node's label reaches along ``(src, dst)`` edges."""

    def body(cur: Collection) -> Collection:
        e = edges.enter(cur.scope)
        init = labels.enter(cur.scope)
        return (
            cur.join_map(e, lambda k, lab, dst: (dst, lab), vectorized=True, name=f"{name}_step")
            .concat(init)
            .min(name=f"{name}_min")
        )

    return labels.iterate(body, limit=limit, name=name)


def connected_components(edges: Collection, *, limit: int | None = None) -> Collection:
    """``(node, label)`` for every node of an edge, ``label`` the least node of its
    component when edges are taken as undirected."""
    both = edges.concat(edges.map(_swap, vectorized=True, name="cc_reverse"))
    labels = both.map(_self_label, vectorized=True, name="cc_self").distinct()
    return _propagate(both, labels, limit=limit, name="cc")


def _trim(cycle: Collection, edges: Collection, name: str) -> Collection:
    """The edges of ``edges`` whose ends get the same label when labels propagate along
    ``cycle`` from each node of an edge of ``edges``; returned reversed (DD's trim step)."""
    nodes = edges.map(lambda e: (e[1], e[1]), vectorized=True, name=f"{name}_nodes").distinct()
    labels = _propagate(cycle, nodes, name=f"{name}_labels")
    return (
        edges.join_map(labels, lambda src, dst, l1: (dst, (src, l1)), vectorized=True)
        .join_map(labels, lambda dst, sl, l2: ((sl[0], dst), (sl[1], l2)), vectorized=True)
        .filter(lambda r: r[1][0] == r[1][1], vectorized=True)
        .map(lambda r: (r[0][1], r[0][0]), vectorized=True, name=f"{name}_reverse")
    )


def strongly_connected_components(edges: Collection, *, limit: int | None = None) -> Collection:
    """``(node, label)`` for every node of an edge, ``label`` the least node of its strongly
    connected component (a node on no cycle is its own component)."""

    def body(inner: Collection) -> Collection:
        e = edges.enter(inner.scope)
        reversed_ = e.map(_swap, vectorized=True)
        return _trim(_trim(inner, e, "scc_fwd"), reversed_, "scc_bwd")

    cycles = edges.distinct().iterate(body, limit=limit, name="scc")
    nodes = edges.flat_map(lambda e: [e[0], e[1]], name="scc_nodes").distinct()
    labels = nodes.map(lambda n: (n, n), name="scc_self")
    # within the edges left on cycles, every node of a component reaches every other
    both = cycles.concat(cycles.map(_swap, vectorized=True))
    return _propagate(both, labels, limit=limit, name="scc_label")
