"""Progressive merging against merging at once: update latencies of the degree count.

The dataflow is the degree count of ``degrees.py`` with the merge effort of its two
arrangements set explicitly::

    degrees   = edges.map(src).arrange_by_self(effort=E).count_total()
    histogram = degrees.map(count).arrange_by_self(effort=E).count_total()

A random graph of ``--edges`` edges over ``--nodes`` nodes is loaded in one round, then
``--rounds`` rounds of ``--batch`` changes each (one edge removed, one added, as in
``degrees.py``) are timed one by one, from handing the round to the input until the probe
passes it. Each setting runs in its own subprocess on the same stream:

- ``at-once``: ``effort=None``, every merge completed when it starts: the round that starts
  a merge of the large batches waits for all of it;
- ``1``, ``2``, ``4``: progressive merging with that many units of merge work per update
  taken in (2 is the least that finishes each merge before it is needed again).

Prints JSON: per setting the latency percentiles, the maximum, the total time of the rounds
(the throughput cost is that total against the least effort's), the number of merges, and
each setting's maximum latency against at-once's. ``--png PREFIX`` draws
``PREFIX.png`` (the distribution of all latencies) and ``PREFIX-tail.png`` (the largest
100).

    python benchmarks/merge_effort.py --json benchmarks/results/merge_effort.json \\
        --png benchmarks/results/merge_effort
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit_json, log, machine_info, save_png  # noqa: E402
from degrees import Workload  # noqa: E402

SETTINGS = ("at-once", "1", "2", "4")


def _effort(setting: str) -> int | None:
    return None if setting == "at-once" else int(setting)


def _src(cols: Any) -> Any:
    return cols[0]


def _count(kc: Any) -> Any:
    return kc[1]


def run_setting(
    setting: str, nodes: int, edges: int, batch: int, rounds: int, seed: int
) -> dict[str, Any]:
    """One setting in this process: the latency of every round, in seconds."""
    import ddflow as dd

    effort = _effort(setting)
    w = dd.Worker()
    inp, coll = w.new_collection()
    degrees = coll.map(_src, vectorized=True).arrange_by_self(effort=effort).count_total()
    histogram = degrees.map(_count, vectorized=True).arrange_by_self(effort=effort).count_total()
    probe = histogram.probe()
    work = Workload(nodes, edges, seed)
    src, dst = work.load()
    inp.insert_columns((src, dst), diffs=np.ones(len(src), np.int64))
    inp.advance_to(1)
    inp.flush()
    w.step_while(lambda: probe.less_than(1))
    prepared = []
    for _ in range(rounds):
        rem, add = work.round_changes(batch)
        cols = (np.concatenate([rem[0], add[0]]), np.concatenate([rem[1], add[1]]))
        diffs = np.concatenate([np.full(batch, -1, np.int64), np.ones(batch, np.int64)])
        prepared.append((cols, diffs))
    gc.collect()
    lat = []
    for r, (cols, diffs) in enumerate(prepared, start=2):
        t0 = time.perf_counter()
        inp.insert_columns(cols, diffs=diffs)
        inp.advance_to(r)
        inp.flush()
        w.step_while(lambda r=r: probe.less_than(r))
        lat.append(time.perf_counter() - t0)
    spines = [op.spine for op in w.operators if getattr(op, "spine", None) is not None]
    return {
        "setting": setting,
        "latencies_s": lat,
        "merges": int(sum(s.merges_done for s in spines)),
        "batches_at_end": int(sum(len(s.batches()) for s in spines)),
    }


def summarize(res: dict[str, Any]) -> dict[str, Any]:
    ms = np.asarray(res["latencies_s"]) * 1e3
    return {
        "setting": res["setting"],
        "rounds": len(ms),
        "median_ms": round(float(np.median(ms)), 3),
        "p99_ms": round(float(np.percentile(ms, 99)), 3),
        "max_ms": round(float(ms.max()), 3),
        "total_s": round(float(ms.sum()) / 1e3, 3),
        "merges": res["merges"],
        "batches_at_end": res["batches_at_end"],
    }


def draw(doc: dict[str, Any], prefix: str, quiet: bool) -> None:
    runs = doc["runs"]

    def full(plt: Any) -> None:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for r in runs:
            ms = np.sort(np.asarray(r["latencies_s"]) * 1e3)
            ax.plot(
                ms,
                np.arange(1, len(ms) + 1) / len(ms),
                linestyle=":" if r["setting"] == "at-once" else "-",
                label=_label(r["setting"]),
            )
        ax.set_xscale("log")
        ax.set_xlabel("update latency (ms, log scale)")
        ax.set_ylabel("fraction of updates")
        ax.set_title(
            f"degree count, {doc['params']['rounds']} rounds of {doc['params']['batch']} changes"
        )
        ax.legend()
        ax.grid(alpha=0.3)

    def tail(plt: Any) -> None:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for r in runs:
            ms = np.sort(np.asarray(r["latencies_s"]) * 1e3)[-100:]
            ax.plot(
                np.arange(len(ms)),
                ms,
                linestyle=":" if r["setting"] == "at-once" else "-",
                label=_label(r["setting"]),
            )
        ax.set_yscale("log")
        ax.set_xlabel("the largest 100 latencies, in order")
        ax.set_ylabel("update latency (ms, log scale)")
        ax.set_title("tail")
        ax.legend()
        ax.grid(alpha=0.3)

    save_png(prefix + ".png", full, quiet=quiet)
    save_png(prefix + "-tail.png", tail, quiet=quiet)


def _label(setting: str) -> str:
    return "merge at once" if setting == "at-once" else f"progressive, effort {setting}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--edges", type=int, default=5_000_000)
    ap.add_argument("--batch", type=int, default=2_000, help="changes per round")
    ap.add_argument("--rounds", type=int, default=1_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--settings",
        default=",".join(SETTINGS),
        help="comma-separated: at-once and/or efforts (ints >= 1)",
    )
    ap.add_argument("--json")
    ap.add_argument("--png", metavar="PREFIX")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--worker", metavar="SETTING", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    for name in ("nodes", "edges", "batch", "rounds"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1")
    settings = args.settings.split(",")
    for s in settings:
        if s != "at-once" and not (s.isdigit() and int(s) >= 1):
            ap.error(f"unknown setting {s!r}: use at-once or an int >= 1")
    if args.worker:
        res = run_setting(args.worker, args.nodes, args.edges, args.batch, args.rounds, args.seed)
        sys.stdout.write(json.dumps(res) + "\n")
        return res
    runs = []
    for s in settings:  # each in a fresh process: no setting inherits another's heap
        log(f"setting {s} ...", quiet=args.quiet)
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--worker",
            s,
            "--nodes",
            str(args.nodes),
            "--edges",
            str(args.edges),
            "--batch",
            str(args.batch),
            "--rounds",
            str(args.rounds),
            "--seed",
            str(args.seed),
        ]
        out = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if out.returncode:
            sys.stderr.write(out.stderr)
            raise SystemExit(f"setting {s} failed (exit {out.returncode})")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    summary = [summarize(r) for r in runs]
    by = {s["setting"]: s for s in summary}
    base = by.get("at-once")
    least = min(
        (s for s in summary if s["setting"] != "at-once"),
        key=lambda s: int(s["setting"]),
        default=None,
    )
    for s in summary:
        if base is not None:
            s["max_latency_vs_at_once"] = round(s["max_ms"] / base["max_ms"], 3)
            s["total_vs_at_once"] = round(s["total_s"] / base["total_s"], 3)
        if least is not None:
            s["max_latency_vs_least_effort"] = round(s["max_ms"] / least["max_ms"], 3)
            s["throughput_cost_vs_least_effort"] = round(s["total_s"] / least["total_s"] - 1, 3)
    doc = {
        "benchmark": "merge_effort",
        "machine": machine_info(("ddflow", "matplotlib")),
        "params": {k: v for k, v in vars(args).items() if k not in ("worker",)},
        "summary": summary,
        "runs": runs,
    }
    if args.png:
        draw(doc, args.png, args.quiet)
    # stdout: the summary; the file (--json): every latency too
    emit_json({k: v for k, v in doc.items() if k != "runs"})
    if args.json:
        with open(args.json, "w") as f:
            f.write(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    main()
