"""The ``ddflow`` command line: runs the example jobs.

``ddflow degrees`` (the default) runs seed 000's degrees dataflow in-process: the out-degree
distribution of a random graph, printed as it changes while edges are replaced.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

__all__ = ["main"]


def degrees(nodes: int, edges: int, batch: int, rounds: int, seed: int) -> None:
    import ddflow as dd

    rng = np.random.default_rng(seed)
    src = rng.integers(0, nodes, edges + batch * rounds)
    dst = rng.integers(0, nodes, edges + batch * rounds)
    with dd.Worker() as worker:
        inp, graph = worker.new_collection()
        hist = (
            graph.map(lambda e: e[0], vectorized=True)
            .count_total()
            .map(lambda kc: kc[1], vectorized=True)
            .count_total()
        )
        out = hist.capture()
        probe = hist.probe()

        def settle() -> float:
            t0 = time.perf_counter()
            worker.step_while(lambda: probe.less_than(inp.time()))
            return time.perf_counter() - t0

        inp.insert_columns((src[:edges], dst[:edges]))
        inp.advance_to(1)
        secs = settle()
        print(f"loaded {edges} edges on {nodes} nodes in {secs * 1e3:.1f} ms")
        _show(out.at(0))
        for r in range(rounds):
            lo, hi = edges + r * batch, edges + (r + 1) * batch
            old = slice(r * batch, (r + 1) * batch)
            inp.insert_columns((src[lo:hi], dst[lo:hi]))
            inp.insert_columns((src[old], dst[old]), diffs=-np.ones(batch, dtype=np.int64))
            inp.advance_to(r + 2)
            secs = settle()
            changes = [(d, c, t, diff) for ((d, c), t, diff) in out.updates() if t == r + 1]
            print(f"round {r + 1}: {batch} edges replaced in {secs * 1e3:.1f} ms, "
                  f"{len(changes)} changes to the distribution")
        _show(out.at(rounds))


def _show(dist: dict) -> None:
    rows = sorted((deg, cnt) for (deg, cnt), d in dist.items() if d)
    print("  degree distribution (degree: nodes): "
          + ", ".join(f"{deg}: {cnt}" for deg, cnt in rows[:12])
          + (" ..." if len(rows) > 12 else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ddflow", description=__doc__)
    sub = parser.add_subparsers(dest="job")
    p = sub.add_parser("degrees", help="seed 000's degree distribution of a changing graph")
    for q in (parser, p):
        q.add_argument("--nodes", type=int, default=10_000)
        q.add_argument("--edges", type=int, default=50_000)
        q.add_argument("--batch", type=int, default=10_000)
        q.add_argument("--rounds", type=int, default=5)
        q.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    degrees(args.nodes, args.edges, args.batch, args.rounds, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
