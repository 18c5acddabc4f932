"""Shortest paths: the monoid version against the ordinary iterative one.

Insert-only shortest paths over the min-sum monoid, scaled to this machine: a random
directed graph with ``--nodes`` nodes, average out-degree ``--degree`` and integer weights
in ``[0, --max-weight]``, root node 0. Both ``ddflow.algorithms.shortest_paths``
(distances as data, ``min`` per node, retractions allowed) and
``ddflow.algorithms.shortest_paths_monoid`` (distances in ``MinSum`` diffs,
``reduce_solve``, insert-only) load the graph, then take ``--additions`` rounds of one
random edge addition each. Each implementation runs in its own worker, one after the
other, on the same data; their answers must be equal after the load and at the end (and
equal to a from-scratch Dijkstra with ``--check``).

    python benchmarks/sssp.py --json benchmarks/results/sssp.json --png benchmarks/results/sssp.png
    python benchmarks/sssp.py --nodes 10000 --additions 200          # quick

Target (the JSON's ``bars``): the monoid version's 1000 additions at least 3x faster than
the ordinary one's.
"""

from __future__ import annotations

import argparse
import heapq
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddflow as dd  # noqa: E402
from _common import emit_json, log, machine_info, now, save_png, timing_stats_ms  # noqa: E402
from ddflow.algorithms import shortest_paths, shortest_paths_monoid  # noqa: E402
from ddflow.runtimes.memory import tune_malloc  # noqa: E402


def dijkstra(
    nodes: int, src: np.ndarray, dst: np.ndarray, w: np.ndarray, root: int
) -> dict[int, int]:
    """From-scratch distances (binary heap over a CSR adjacency)."""
    order = np.argsort(src, kind="stable")
    s, d, ww = src[order], dst[order].tolist(), w[order].tolist()
    starts = np.searchsorted(s, np.arange(nodes + 1)).tolist()
    dist: dict[int, int] = {root: 0}
    heap = [(0, root)]
    while heap:
        du, u = heapq.heappop(heap)
        if du > dist.get(u, 1 << 62):
            continue
        for k in range(starts[u], starts[u + 1]):
            v, nd = d[k], du + ww[k]
            if nd < dist.get(v, 1 << 62):
                dist[v] = nd
                heapq.heappush(heap, (nd, v))
    return dist


def run(
    impl: str, src: np.ndarray, dst: np.ndarray, w: np.ndarray, adds: np.ndarray, quiet: bool
) -> dict[str, Any]:
    algo = shortest_paths if impl == "ordinary" else shortest_paths_monoid
    worker = dd.Worker()
    e_in, edges = worker.new_collection()
    r_in, roots = worker.new_collection()
    out_c = algo(edges, roots)
    cap = out_c.capture()
    probe = out_c.probe()
    t = 0

    def advance() -> None:
        nonlocal t
        t += 1
        e_in.advance_to(t)
        r_in.advance_to(t)
        worker.step_while(lambda: probe.less_than(t), at_least_once=True)

    t0 = now()
    e_in.insert_columns((src, dst, w))
    r_in.insert(0)
    advance()
    load = now() - t0
    after_load = {k: v for (k, v), c in cap.at(t - 1).items() if c == 1}
    log(f"  {impl}: loaded in {load:.2f} s", quiet=quiet)
    rounds: list[float] = []
    t0 = now()
    for a, b, c in adds.tolist():
        r0 = now()
        e_in.insert((a, b, c))
        advance()
        rounds.append(now() - r0)
    total = now() - t0
    log(f"  {impl}: {len(adds)} additions in {total:.2f} s", quiet=quiet)
    final = {k: v for (k, v), c in cap.at(t - 1).items() if c == 1}
    return {
        "load_s": load,
        "additions_s": total,
        "round_ms": timing_stats_ms(rounds),
        "rounds": rounds,
        "after_load": after_load,
        "final": final,
        "held_updates": sum(s["updates"] for s in worker.stats()),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--degree", type=int, default=20)
    ap.add_argument("--max-weight", type=int, default=1000)
    ap.add_argument("--additions", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check", action="store_true", help="also compare with Dijkstra")
    ap.add_argument("--impls", default="monoid,ordinary")
    ap.add_argument("--json")
    ap.add_argument("--png")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    tune_malloc()
    rng = np.random.default_rng(a.seed)
    m = a.nodes * a.degree
    src = rng.integers(0, a.nodes, m)
    dst = rng.integers(0, a.nodes, m)
    w = rng.integers(0, a.max_weight + 1, m)
    adds = np.stack(
        [
            rng.integers(0, a.nodes, a.additions),
            rng.integers(0, a.nodes, a.additions),
            rng.integers(0, a.max_weight + 1, a.additions),
        ],
        axis=1,
    )
    log(
        f"sssp: {a.nodes} nodes, {m} edges, weights 0-{a.max_weight}, {a.additions} additions",
        quiet=a.quiet,
    )
    res = {impl: run(impl, src, dst, w, adds, a.quiet) for impl in a.impls.split(",")}
    impls = list(res)
    agree = {
        "after_load": all(res[i]["after_load"] == res[impls[0]]["after_load"] for i in impls),
        "final": all(res[i]["final"] == res[impls[0]]["final"] for i in impls),
    }
    if a.check:
        want = dijkstra(
            a.nodes,
            np.concatenate([src, adds[:, 0]]),
            np.concatenate([dst, adds[:, 1]]),
            np.concatenate([w, adds[:, 2]]),
            0,
        )
        agree["dijkstra"] = all(res[i]["final"] == want for i in impls)
    speedup = None
    if "monoid" in res and "ordinary" in res:
        speedup = res["ordinary"]["additions_s"] / res["monoid"]["additions_s"]
    doc = {
        "benchmark": "sssp",
        "machine": machine_info(),
        "params": vars(a),
        "results": {
            i: {k: v for k, v in r.items() if k not in ("rounds", "after_load", "final")}
            for i, r in res.items()
        },
        "reached": len(res[impls[0]]["final"]),
        "answers_equal": agree,
        "additions_speedup_monoid_vs_ordinary": speedup,
        "bars": {"monoid>=3x_ordinary": speedup is not None and speedup >= 3},
    }
    emit_json(doc, path=a.json)
    if a.png:

        def draw(plt: Any) -> None:
            fig, ax = plt.subplots(figsize=(6, 4))
            for i, r in res.items():
                v = np.sort(np.array(r["rounds"]) * 1e3)
                ax.plot(
                    v,
                    np.arange(1, len(v) + 1) / len(v),
                    label=f"{i}: {r['additions_s']:.2f} s total",
                )
            ax.set_xscale("log")
            ax.set_xlabel("round time for one edge addition (ms)")
            ax.set_ylabel("fraction of rounds")
            ax.set_title(f"shortest paths, {a.nodes // 1000}k nodes, degree {a.degree}")
            ax.legend()
            ax.grid(alpha=0.3)

        save_png(a.png, draw, quiet=a.quiet)
    return doc


if __name__ == "__main__":
    main()
