"""Update latencies that stay flat as a computation runs (compacted, progressively merged
traces).

BFS (``ddflow.algorithms.bfs``) over a random graph of ``--nodes`` nodes and
``--edges`` edges, then ``--updates`` rounds of one edge change each (a random edge added,
a random existing edge removed, as DD's ``bfs`` example does). Each round's latency runs
from handing the change to the input until the output frontier passes the round.

The roots are nodes ``0 .. --roots - 1`` (default 10). With one root of average
out-degree 2, random edge removals cut the root off for hundreds of updates at a time
(a root that is not connected to the graph at all), and a
window measured then times an almost empty computation; with ten roots the reached set
stays the giant component, so the windows compare the same work and what changes between
them is the accumulated history.

Latencies degrade with the number of updates when state is an append-only log, and stay
flat once traces are compacted and merged progressively. This script
prints, as JSON, the percentiles of the 1,000 latencies after 10^3, 10^4, 10^5 (...)
updates and of the last 1,000, the state held by the arrangements at each of those points,
and draws their CDFs (``--png``).

    python benchmarks/latency.py --json benchmarks/results/latency.json \
        --png benchmarks/results/latency.png
    python benchmarks/latency.py --updates 20000          # quicker

Target (the JSON's ``bars``): median and p99 of the last 1,000 of 10^5 updates within 1.5x
of those of the 1,000 after the first 1,000.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddflow as dd  # noqa: E402
from _common import emit_json, log, machine_info, now, peak_rss_mb, save_png  # noqa: E402
from ddflow.algorithms import bfs  # noqa: E402
from ddflow.runtimes.memory import tune_malloc  # noqa: E402

WINDOW = 1000


def pct(xs: np.ndarray) -> dict[str, float]:
    ms = xs * 1e3
    return {f"p{q}": float(np.percentile(ms, q)) for q in (10, 25, 50, 75, 90, 99)} | {
        "max": float(ms.max())
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--edges", type=int, default=2000)
    ap.add_argument("--updates", type=int, default=100_000)
    ap.add_argument("--roots", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--png")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    if a.updates < 2 * WINDOW:
        ap.error(f"--updates must be at least {2 * WINDOW}")
    tune_malloc()
    rng = np.random.default_rng(a.seed)
    src = rng.integers(0, a.nodes, a.edges).tolist()
    dst = rng.integers(0, a.nodes, a.edges).tolist()
    worker = dd.Worker()
    e_in, edges = worker.new_collection()
    r_in, roots = worker.new_collection()
    out = bfs(edges, roots)
    probe = out.probe()
    for s, d in zip(src, dst, strict=True):
        e_in.insert((s, d))
    for r in range(a.roots):
        r_in.insert(r)
    r_in.advance_to(1)
    r_in.close()  # the roots never change: their frontier must not hold the loop back
    e_in.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))
    lat = np.empty(a.updates)
    marks = sorted(
        {10**k for k in range(3, 12) if 10**k + WINDOW <= a.updates} | {a.updates - WINDOW}
    )
    state: dict[str, Any] = {}
    adds_s = rng.integers(0, a.nodes, a.updates).tolist()
    adds_d = rng.integers(0, a.nodes, a.updates).tolist()
    picks = rng.random(a.updates)
    log(
        f"latency: BFS {a.nodes} nodes / {a.edges} edges, {a.updates} single-edge updates",
        quiet=a.quiet,
    )
    t_start = now()
    for i in range(a.updates):
        j = int(picks[i] * len(src))
        old = (src[j], dst[j])
        src[j], dst[j] = adds_s[i], adds_d[i]
        t = i + 2
        t0 = now()
        e_in.insert((adds_s[i], adds_d[i]))
        e_in.remove(old)
        e_in.advance_to(t)
        worker.step_while(lambda: probe.less_than(t), at_least_once=True)
        lat[i] = now() - t0
        if i + 1 in marks or i == 0:
            st = worker.stats()
            state[str(i + 1)] = {
                "updates_held": int(sum(s["updates"] for s in st)),
                "batches": int(sum(s["batches"] for s in st)),
            }
        if (i + 1) % 10_000 == 0:
            log(
                f"  {i + 1} updates, last 1000 median {np.median(lat[i - 999 : i + 1]) * 1e3:.2f}"
                f" ms ({now() - t_start:.0f} s)",
                quiet=a.quiet,
            )
    windows = {str(m): pct(lat[m : m + WINDOW]) for m in marks}
    first = windows[str(WINDOW)]
    last = windows[str(a.updates - WINDOW)]
    ratios = {"median": last["p50"] / first["p50"], "p99": last["p99"] / first["p99"]}
    doc = {
        "benchmark": "latency",
        "machine": machine_info(),
        "params": vars(a),
        "windows_after_updates_ms": windows,
        "last_vs_after_first_1000": ratios,
        "state": state,
        "total_s": float(lat.sum()),
        "peak_rss_mb": peak_rss_mb(),
        "bars": {
            "median_within_1.5x": ratios["median"] <= 1.5,
            "p99_within_1.5x": ratios["p99"] <= 1.5,
        },
    }
    emit_json(doc, path=a.json)
    if a.png:

        def draw(plt: Any) -> None:
            fig, ax = plt.subplots(figsize=(6.5, 4.2))
            for m in marks:
                v = np.sort(lat[m : m + WINDOW] * 1e3)
                label = f"last {WINDOW}" if m == a.updates - WINDOW else f"after {m:,} updates"
                ax.plot(v, np.arange(1, len(v) + 1) / len(v), label=label)
            ax.set_xscale("log")
            ax.set_xlabel("update latency (ms)")
            ax.set_ylabel(f"fraction of {WINDOW} updates")
            ax.set_title(f"BFS {a.nodes} nodes / {a.edges} edges: latency CDFs")
            ax.legend()
            ax.grid(alpha=0.3, which="both")

        save_png(a.png, draw, quiet=a.quiet)
    return doc


if __name__ == "__main__":
    main()
