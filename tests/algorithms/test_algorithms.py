"""Graph algorithms against networkx after every round of random edge changes.

Each test builds one dataflow, then runs rounds that add and remove random edges (a
multiset: an edge inserted twice needs two removals) and compares the accumulated output
with networkx on the current graph, after every round. Also: the monoid and the ordinary
shortest paths agree on insert-only inputs, answers do not depend on how changes are split
into rounds, and BFS / components give the same output on every runtime.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import networkx as nx
import numpy as np
import pytest

import ddflow as dd
from ddflow import Changes
from ddflow.algorithms import (
    bfs,
    connected_components,
    reachability,
    shortest_paths,
    shortest_paths_monoid,
    strongly_connected_components,
)

ROOTS = (0, 3)


def _graph(edges: Counter, weighted: bool) -> nx.DiGraph:
    g = nx.DiGraph()
    for e, c in edges.items():
        if c <= 0:
            continue
        if weighted:
            a, b, w = e
            if g.has_edge(a, b):
                w = min(w, g[a][b]["weight"])
            g.add_edge(a, b, weight=w)
        else:
            g.add_edge(*e)
    return g


def _expected(name: str, g: nx.DiGraph) -> dict[Any, int]:
    if name in ("bfs", "sssp", "sssp_monoid"):
        best: dict[int, int] = {}
        for r in ROOTS:
            if r in g:
                d = (
                    nx.single_source_shortest_path_length(g, r)
                    if name == "bfs"
                    else nx.single_source_dijkstra_path_length(g, r)
                )
            else:
                d = {r: 0}
            for n, x in d.items():
                best[n] = min(best.get(n, 1 << 60), x)
        return {(n, x): 1 for n, x in best.items()}
    if name == "reach":
        out = {r: 1 for r in ROOTS}
        for r in ROOTS:
            if r in g:
                out.update({n: 1 for n in nx.descendants(g, r)})
        return out
    comps = (
        nx.connected_components(g.to_undirected())
        if name == "cc"
        else nx.strongly_connected_components(g)
    )
    return {(n, min(c)): 1 for c in comps for n in c}


ALGOS = {
    "bfs": (bfs, True, False),
    "sssp": (shortest_paths, True, True),
    "sssp_monoid": (shortest_paths_monoid, True, True),
    "reach": (reachability, True, False),
    "cc": (connected_components, False, False),
    "scc": (strongly_connected_components, False, False),
}


@pytest.mark.parametrize("name", list(ALGOS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_algorithm_matches_networkx_every_round(name: str, seed: int, reduce_path: str) -> None:
    """Each algorithm equals networkx's answer after every round of a few edge changes, and
    of a few dozen (a loop's ``reduce`` runs per key or over columns by the round's size)."""
    algo, with_roots, weighted = ALGOS[name]
    inserts_only = name == "sssp_monoid"
    rng = random.Random(seed)
    nodes = 25
    w = dd.Worker()
    e_in, edges = w.new_collection()
    if with_roots:
        r_in, roots = w.new_collection()
        out = algo(edges, roots)
    else:
        out = algo(edges)
    cap = out.capture()
    probe = out.probe()
    current: Counter = Counter()

    def edge() -> tuple[int, ...]:
        a, b = rng.randrange(nodes), rng.randrange(nodes)
        return (a, b, rng.randrange(0, 9)) if weighted else (a, b)

    for _ in range(40):
        e = edge()
        current[e] += 1
        e_in.insert(e)
    if with_roots:
        for r in ROOTS:
            r_in.insert(r)
    for t in range(1, 9):
        e_in.advance_to(t)
        if with_roots:
            r_in.advance_to(t)
        w.step_while(lambda: probe.less_than(t))
        assert cap.at(t - 1) == _expected(name, _graph(current, weighted)), f"round {t - 1}"
        for _ in range(rng.randrange(1, 6) if t % 3 else rng.randrange(20, 40)):
            if not inserts_only and current and rng.random() < 0.5:
                e = rng.choice(sorted(e for e, c in current.items() if c > 0))
                current[e] -= 1
                e_in.remove(e)
            else:
                e = edge()
                current[e] += 1
                e_in.insert(e)


def test_monoid_and_ordinary_shortest_paths_agree_on_insert_only_inputs() -> None:
    rng = np.random.default_rng(7)
    w = dd.Worker()
    e_in, edges = w.new_collection()
    r_in, roots = w.new_collection()
    a = shortest_paths(edges, roots).capture()
    b = shortest_paths_monoid(edges, roots).capture()
    r_in.insert(0)
    for t in range(12):
        n = 200 if t == 0 else 15
        e_in.insert_columns(
            (rng.integers(0, 150, n), rng.integers(0, 150, n), rng.integers(0, 1000, n))
        )
        e_in.advance_to(t + 1)
        r_in.advance_to(t + 1)
        w.run()
        assert a.at(t) == b.at(t)
        assert len(a.at(t)) > 1


@pytest.mark.parametrize("algo", [bfs, reachability])
def test_split_invariance(algo: Any) -> None:
    """Per-time answers are the same whether each time gets its own step, or every change
    (at its future time) is fed before the first step."""
    rng = random.Random(11)
    log: list[tuple[tuple[int, int], int, int]] = []
    present: list[tuple[int, int]] = []
    for t in range(10):
        for _ in range(6):
            if present and rng.random() < 0.4:
                e = present.pop(rng.randrange(len(present)))
                log.append((e, t, -1))
            else:
                e = (rng.randrange(15), rng.randrange(15))
                present.append(e)
                log.append((e, t, 1))
    answers = []
    for mode in ("stepwise", "all_at_once"):
        w = dd.Worker()
        e_in, edges = w.new_collection()
        r_in, roots = w.new_collection()
        cap = algo(edges, roots).capture()
        r_in.insert(0)
        if mode == "stepwise":
            for t in range(10):
                for e, s, d in log:
                    if s == t:
                        e_in.update(e, d)
                e_in.advance_to(t + 1)
                r_in.advance_to(t + 1)
                w.run()
        else:
            for e, s, d in log:
                e_in.update_at(e, s, d)
            e_in.close()
            r_in.close()
            w.run()
        answers.append([cap.at(t) for t in range(10)])
    assert answers[0] == answers[1]


def _graph_build(c: dict[str, Any]) -> dict[str, Any]:
    return {
        "bfs": bfs(c["edges"], c["roots"]),
        "cc": connected_components(c["edges"]),
        "scc": strongly_connected_components(c["edges"]),
    }


def test_loops_give_the_same_output_on_every_runtime(runtime: Any) -> None:
    rng = np.random.default_rng(5)
    n0, per, rounds = 80, 6, 5
    src = rng.integers(0, 40, n0 + per * rounds)
    dst = rng.integers(0, 40, n0 + per * rounds)
    times = np.concatenate([np.zeros(n0, np.int64), np.repeat(np.arange(1, rounds + 1), per)])
    rem = rng.choice(n0, 3 * rounds, replace=False)
    edges = Changes(
        (np.concatenate([src, src[rem]]), np.concatenate([dst, dst[rem]])),
        np.concatenate([times, np.repeat(np.arange(1, rounds + 1), 3)]),
        np.concatenate([np.ones(len(src), np.int64), -np.ones(len(rem), np.int64)]),
    )
    roots = Changes(np.array([0, 1]), np.array([0, 2]), np.array([1, 1]))
    inputs = {"edges": edges, "roots": roots}
    base = dd.run_job(_graph_build, inputs)
    got = runtime.run(_graph_build, inputs)
    for name in ("bfs", "cc", "scc"):
        assert got[name].updates() == base[name].updates(), name
        assert base[name].updates()
