"""BFS under edge changes (differential dataflow's BFS dataflow), in-process.

A random directed graph (``--nodes``, ``--edges``, uniform endpoints) and root node 0:
``ddflow.algorithms.bfs`` loads it at time 0, then each round changes edges and the round
time is measured until the output frontier passes the round:

* ``one``: rounds of one edge change (one random edge added, one existing edge removed);
* ``batch``: rounds of ``--batch`` changes (half added, half removed).

The answer is checked against a from-scratch BFS (``scipy``-free, numpy frontier expansion)
at the end of each phase (``--check``, on by default).

Baseline (``--dict-rounds``, default 5): what a Python user without an incremental engine
writes: the graph as a dict of adjacency lists, and after each one-edge change a BFS from
scratch with a deque, per record. Its rounds are timed the same way (change + answer), and
its last answer is checked against the reference.

    python benchmarks/bfs.py --json benchmarks/results/bfs.json --png benchmarks/results/bfs.png
    python benchmarks/bfs.py --nodes 10000 --edges 100000 --rounds 20   # quick

Targets (the JSON's ``bars``): load <= 15 s, one-change round median <= 1 ms, 1000-change
round median <= 15 ms (100 k nodes, 1 M edges).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import deque
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddflow as dd  # noqa: E402
from _common import (  # noqa: E402
    emit_json,
    log,
    machine_info,
    now,
    peak_rss_mb,
    save_png,
    timing_stats_ms,
)
from ddflow.algorithms import bfs  # noqa: E402
from ddflow.runtimes.memory import tune_malloc  # noqa: E402


def reference_bfs(nodes: int, src: np.ndarray, dst: np.ndarray, root: int) -> dict[int, int]:
    """Hop distances from ``root`` by frontier expansion over a CSR adjacency."""
    order = np.argsort(src, kind="stable")
    s, d = src[order], dst[order]
    starts = np.searchsorted(s, np.arange(nodes + 1))
    dist = np.full(nodes, -1, dtype=np.int64)
    dist[root] = 0
    frontier = np.array([root])
    level = 0
    while len(frontier):
        level += 1
        lo, hi = starts[frontier], starts[frontier + 1]
        lens = hi - lo
        offsets = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
        idx = np.repeat(lo, lens) + offsets
        nxt = np.unique(d[idx])
        nxt = nxt[dist[nxt] < 0]
        dist[nxt] = level
        frontier = nxt
    reached = np.flatnonzero(dist >= 0)
    return dict(zip(reached.tolist(), dist[reached].tolist(), strict=True))


class Graph:
    """The multiset of edges as parallel arrays, with O(1) random removal."""

    def __init__(self, src: np.ndarray, dst: np.ndarray) -> None:
        self.src = list(src.tolist())
        self.dst = list(dst.tolist())

    def remove_random(self, rng: np.random.Generator) -> tuple[int, int]:
        i = int(rng.integers(len(self.src)))
        e = (self.src[i], self.dst[i])
        self.src[i], self.dst[i] = self.src[-1], self.dst[-1]
        self.src.pop()
        self.dst.pop()
        return e

    def add(self, a: int, b: int) -> None:
        self.src.append(a)
        self.dst.append(b)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array(self.src, dtype=np.int64), np.array(self.dst, dtype=np.int64)


def _dict_bfs(adj: dict[int, list[int]], root: int) -> dict[int, int]:
    dist = {root: 0}
    queue = deque([root])
    while queue:
        u = queue.popleft()
        du = dist[u] + 1
        for v in adj.get(u, ()):
            if v not in dist:
                dist[v] = du
                queue.append(v)
    return dist


def dict_baseline(
    graph: Graph, nodes: int, rounds: int, rng: np.random.Generator, *, check: bool
) -> dict[str, Any] | None:
    """Rounds of one edge change on a dict of adjacency lists, each answered by a BFS from
    scratch in plain Python (building the dict is not timed)."""
    if rounds <= 0:
        return None
    adj: dict[int, list[int]] = {}
    for x, y in zip(graph.src, graph.dst, strict=True):
        adj.setdefault(x, []).append(y)
    times: list[float] = []
    dist: dict[int, int] = {}
    for _ in range(rounds):
        x, y = int(rng.integers(nodes)), int(rng.integers(nodes))
        old = graph.remove_random(rng)
        graph.add(x, y)
        t0 = now()
        adj[old[0]].remove(old[1])
        adj.setdefault(x, []).append(y)
        dist = _dict_bfs(adj, 0)
        times.append(now() - t0)
    ok = None
    if check:
        s, d = graph.arrays()
        ok = dist == reference_bfs(nodes, s, d, 0)
        if not ok:
            raise SystemExit("the dict baseline's BFS differs from the reference")
    return {
        "impl": "dict of adjacency lists, BFS from scratch per round (Python)",
        "one_change_ms": timing_stats_ms(times),
        "checked": ok,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=100, help="rounds of one change")
    ap.add_argument("--batch", type=int, default=1000, help="changes per batch round")
    ap.add_argument("--batch-rounds", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--dict-rounds",
        type=int,
        default=5,
        help="rounds of the dict-per-record recompute baseline (0: skip)",
    )
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--json", help="also write the JSON here")
    ap.add_argument("--png", help="draw round-time distributions here")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    tune_malloc()
    rng = np.random.default_rng(a.seed)
    src = rng.integers(0, a.nodes, a.edges)
    dst = rng.integers(0, a.nodes, a.edges)
    graph = Graph(src, dst)
    worker = dd.Worker()
    e_in, edges = worker.new_collection()
    r_in, roots = worker.new_collection()
    dist = bfs(edges, roots)
    out = dist.capture()
    probe = dist.probe()
    t = 0

    def advance() -> None:
        nonlocal t
        t += 1
        e_in.advance_to(t)
        r_in.advance_to(t)
        worker.step_while(lambda: probe.less_than(t), at_least_once=True)

    log(f"bfs: {a.nodes} nodes, {a.edges} edges", quiet=a.quiet)
    t0 = now()
    e_in.insert_columns((src, dst))
    r_in.insert(0)
    advance()
    load = now() - t0
    log(f"  loaded in {load:.2f} s", quiet=a.quiet)
    checks: dict[str, bool] = {}

    def check(label: str) -> None:
        if a.no_check:
            return
        s, d = graph.arrays()
        want = reference_bfs(a.nodes, s, d, 0)
        got = {k: v for (k, v), c in out.at(t - 1).items() if c == 1}
        ok = got == want and len(out.at(t - 1)) == len(want)
        checks[label] = ok
        log(f"  check {label}: {'ok' if ok else 'MISMATCH'} ({len(want)} reached)", quiet=a.quiet)

    check("load")
    one: list[float] = []
    for _ in range(a.rounds):
        x, y = int(rng.integers(a.nodes)), int(rng.integers(a.nodes))
        old = graph.remove_random(rng)
        graph.add(x, y)
        t0 = now()
        e_in.insert((x, y))
        e_in.remove(old)
        advance()
        one.append(now() - t0)
    log(f"  one change: median {np.median(one) * 1e3:.2f} ms", quiet=a.quiet)
    check("one")
    many: list[float] = []
    half = a.batch // 2
    for _ in range(a.batch_rounds):
        xs = rng.integers(0, a.nodes, half)
        ys = rng.integers(0, a.nodes, half)
        olds = [graph.remove_random(rng) for _ in range(half)]
        for x, y in zip(xs.tolist(), ys.tolist(), strict=True):
            graph.add(x, y)
        od = np.array(olds, dtype=np.int64).reshape(-1, 2)
        t0 = now()
        e_in.insert_columns(
            (np.concatenate([xs, od[:, 0]]), np.concatenate([ys, od[:, 1]])),
            diffs=np.concatenate([np.ones(half, np.int64), -np.ones(len(od), np.int64)]),
        )
        advance()
        many.append(now() - t0)
    log(f"  {a.batch} changes: median {np.median(many) * 1e3:.1f} ms", quiet=a.quiet)
    check("batch")
    base = dict_baseline(graph, a.nodes, a.dict_rounds, rng, check=not a.no_check)
    if base is not None:
        log(
            f"  dict recompute baseline: median {base['one_change_ms']['median_ms']:.0f} ms "
            "per one-change round",
            quiet=a.quiet,
        )
    doc = {
        "benchmark": "bfs",
        "machine": machine_info(),
        "params": vars(a),
        "load_s": load,
        "one_change_ms": timing_stats_ms(one),
        "batch_ms": timing_stats_ms(many),
        "checks": checks,
        "dict_baseline": base,
        "speedup_vs_dict_one_change": None
        if base is None
        else round(base["one_change_ms"]["median_ms"] / (float(np.median(one)) * 1e3), 1),
        "peak_rss_mb": peak_rss_mb(),
        "bars": {
            "load_s<=15": load <= 15,
            "one_change_median_ms<=1": float(np.median(one)) * 1e3 <= 1,
            "batch_median_ms<=15": float(np.median(many)) * 1e3 <= 15,
        },
        "loop_rounds_last_epoch": [
            s.progress.iterations for s in worker.root.nodes if isinstance(s, dd.Scope)
        ],
    }
    emit_json(doc, path=a.json)
    if a.png:

        def draw(plt: Any) -> None:
            fig, axes = plt.subplots(1, 2, figsize=(10, 4))
            for ax, xs_, title in (
                (axes[0], one, "one edge change"),
                (axes[1], many, f"{a.batch} edge changes"),
            ):
                v = np.sort(np.array(xs_) * 1e3)
                ax.plot(v, np.arange(1, len(v) + 1) / len(v))
                ax.set_xlabel("round time (ms)")
                ax.set_ylabel("fraction of rounds")
                ax.set_title(f"BFS {a.nodes // 1000}k/{a.edges // 1000}k: {title}")
                ax.grid(alpha=0.3)
            if base is not None:
                axes[0].axvline(
                    base["one_change_ms"]["median_ms"],
                    color="tab:red",
                    ls="--",
                    label="dict + BFS from scratch (median)",
                )
                axes[0].set_xscale("log")
                axes[0].legend(fontsize=8)
            fig.tight_layout()
            fig.savefig(a.png, dpi=110)

        save_png(a.png, draw, quiet=a.quiet)
    return doc


if __name__ == "__main__":
    main()
