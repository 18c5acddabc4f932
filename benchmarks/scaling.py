"""Scaling of the runtimes: in-process, local processes and Spark barrier tasks.

The degrees dataflow (out-degree histogram via two ``count_total``s) over a random
graph: time 0 loads the graph, then every round replaces edges (half the batch inserted,
half of the oldest edges removed). The same generated data runs on every runtime in this
process, one after the other, and every runtime's output must equal the in-process one.

Round times are measured inside the workers (``JobResult.round_seconds``: per round, the
slowest worker), so they exclude process start-up, Spark start-up and loading the input
into the tasks. A second part measures the fixed cost of a round with one change.

    python benchmarks/scaling.py --json benchmarks/results/scaling.json \
        --png benchmarks/results/scaling.png
    python benchmarks/scaling.py --quick          # a smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from typing import Any

import numpy as np

from ddflow.core.time import INT_TIME
from ddflow.runtimes.job import Changes, JobResult, drive, merge_results
from ddflow.runtimes.local import run_job
from ddflow.runtimes.memory import tune_malloc
from ddflow.runtimes.processes import execute

RUNTIMES = ("inprocess", "processes1", "processes2", "spark")


def build(c: dict[str, Any]) -> dict[str, Any]:
    degrees = c["edges"].map(lambda e: e[0], vectorized=True).count_total()
    return {"hist": degrees.map(lambda kc: kc[1], vectorized=True).count_total()}


def degrees_log(nodes: int, edges: int, batch: int, rounds: int, seed: int) -> Changes:
    """Time 0: ``edges`` random edges; round r: batch/2 new edges, batch/2 oldest removed."""
    rng = np.random.default_rng(seed)
    half = batch // 2
    total = edges + half * rounds
    src = rng.integers(0, nodes, total)
    dst = rng.integers(0, nodes, total)
    ins_t = np.concatenate(
        [np.zeros(edges, np.int64), np.repeat(np.arange(1, rounds + 1, dtype=np.int64), half)]
    )
    rem = np.arange(half * rounds)  # the oldest edges, removed in order
    rem_t = np.repeat(np.arange(1, rounds + 1, dtype=np.int64), half)
    data = (np.concatenate([src, src[rem]]), np.concatenate([dst, dst[rem]]))
    times = np.concatenate([ins_t, rem_t])
    diffs = np.concatenate([np.ones(total, np.int64), -np.ones(len(rem), np.int64)])
    return Changes(data, times, diffs)


def run(runtime: str, log: Changes, spark: Any) -> tuple[JobResult, float]:
    t0 = time.perf_counter()
    if runtime == "inprocess":
        res = run_job(build, {"edges": log})
    elif runtime == "processes1":
        res = merge_results(execute(lambda w: drive(w, build, {"edges": log}), 1), INT_TIME)
    elif runtime == "processes2":
        res = run_job(build, {"edges": log}, workers=2)
    elif runtime == "spark":
        import pyarrow as pa

        from ddflow.spark import spark_job

        src, dst = log.data
        df = spark.createDataFrame(
            pa.table({"src": src, "dst": dst, "time": log.times, "diff": log.diffs})
        )
        t0 = time.perf_counter()
        res = spark_job(spark, build, {"edges": df}, workers=2, check=False)
    else:
        raise ValueError(runtime)
    return res, time.perf_counter() - t0


def summary(rs: list[float], batch: int) -> dict[str, Any]:
    xs = np.array(rs[1:]) * 1e3
    med = float(np.median(xs))
    return {
        "load_s": round(rs[0], 4),
        "rounds": len(xs),
        "round_ms_median": round(med, 3),
        "round_ms_p90": round(float(np.percentile(xs, 90)), 3),
        "round_ms_max": round(float(xs.max()), 3),
        "changes_per_s": round(batch / (med / 1e3)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--edges", type=int, default=5_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--single-rounds", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runtimes", default=",".join(RUNTIMES))
    ap.add_argument("--skip-spark", action="store_true")
    ap.add_argument("--q1-sf", type=float, default=1.0, help="TPC-H Q1 job's scale factor")
    ap.add_argument("--q1-runs", type=int, default=3, help="Q1 job runs (0: skip)")
    ap.add_argument("--quick", action="store_true", help="10k nodes / 50k edges, 5 rounds")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--png", help="draw per-round times here")
    args = ap.parse_args(argv)
    if args.quick:
        args.nodes, args.edges, args.batch, args.rounds = 10_000, 50_000, 10_000, 5
        args.single_rounds = 50
        args.q1_sf, args.q1_runs = 0.01, 1
    runtimes = [r for r in args.runtimes.split(",") if r]
    if args.skip_spark and "spark" in runtimes:
        runtimes.remove("spark")
    tune_malloc()  # the in-process runtime gets the allocator set-up worker processes get

    # Spark starts after the other runtimes ran, so its JVM is not around while they run.
    runtimes.sort(key=lambda r: r == "spark")
    spark: Any = None

    out: dict[str, Any] = {
        "benchmark": "scaling",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "platform": platform.platform(),
        },
        "params": vars(args),
    }
    # 1. degrees, big rounds
    log = degrees_log(args.nodes, args.edges, args.batch, args.rounds, args.seed)
    results: dict[str, Any] = {}
    ref = None
    rounds_ms: dict[str, list[float]] = {}
    for rt in runtimes:
        if rt == "spark" and spark is None:
            from ddflow.spark import local_session

            spark = local_session(2)
            out["machine"]["pyspark"] = spark.version
        res, wall = run(rt, log, spark)
        hist = res["hist"].updates()
        if ref is None:
            ref = hist
        results[rt] = {
            **summary(res.round_seconds, args.batch),
            "job_wall_s": round(wall, 2),
            "outputs_equal": hist == ref,
        }
        rounds_ms[rt] = [x * 1e3 for x in res.round_seconds[1:]]
        print(f"{rt}: {json.dumps(results[rt])}", file=sys.stderr, flush=True)
    out["degrees"] = results
    bars: dict[str, Any] = {}
    if "inprocess" in results and "spark" in results:
        r = results["spark"]["round_ms_median"] / results["inprocess"]["round_ms_median"]
        bars["spark_round_vs_inprocess"] = {"value": round(r, 3), "bar": "<= 1.5", "pass": r <= 1.5}
    if "processes1" in results and "processes2" in results:
        r = results["processes2"]["changes_per_s"] / results["processes1"]["changes_per_s"]
        bars["processes2_throughput_vs_processes1"] = {
            "value": round(r, 3),
            "bar": ">= 1.3",
            "pass": r >= 1.3,
        }

    # 2. fixed cost of a round with one change
    small = degrees_log(10_000, 10_000, 2, args.single_rounds, args.seed + 1)
    # one change per round: keep only the insertions after time 0 (one edge per round)
    keep = (small.times == 0) | (np.arange(len(small)) < 10_000 + args.single_rounds)
    small = small.take(np.flatnonzero(keep))
    single: dict[str, Any] = {}
    for rt in [r for r in runtimes if r in ("inprocess", "processes2", "spark")]:
        res, _ = run(rt, small, spark)
        xs = np.array(res.round_seconds[1:]) * 1e3
        single[rt] = {
            "rounds": len(xs),
            "round_ms_median": round(float(np.median(xs)), 3),
            "round_ms_p90": round(float(np.percentile(xs, 90)), 3),
        }
        print(f"one change, {rt}: {json.dumps(single[rt])}", file=sys.stderr, flush=True)
    out["one_change_rounds"] = single
    if "spark" in single:
        m = single["spark"]["round_ms_median"]
        bars["spark_one_change_round_ms"] = {"value": m, "bar": "<= 5", "pass": m <= 5}
    # 3. the main job: TPC-H Q1 on Spark, 10k-row batches (the data generation and Spark
    # start-up are outside the figure: it is the sum of the rounds)
    if spark is not None and args.q1_runs > 0:
        from ddflow.__main__ import q1_job

        with contextlib.redirect_stdout(sys.stderr):  # the job's table and progress
            runs = [
                q1_job(args.q1_sf, 10_000, 0.01, 2, check=(i == 0), spark=spark)
                for i in range(args.q1_runs)
            ]
        inc = sorted(r["incremental_s"] for r in runs)
        out["q1_spark"] = {"runs": runs, "incremental_s_median": inc[len(inc) // 2]}
        bars["q1_spark_incremental_s"] = {
            "value": inc[len(inc) // 2],
            "bar": "<= 3",
            "pass": inc[len(inc) // 2] <= 3.0,
            "answer_checked": runs[0].get("ok", False),
        }
    out["bars"] = bars
    out["outputs_equal"] = all(v["outputs_equal"] for v in results.values())

    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        names = list(rounds_ms)
        ax.boxplot([rounds_ms[n] for n in names], tick_labels=names)
        ax.set_ylabel("round time (ms)")
        ax.set_title(
            f"degrees {args.nodes:,} nodes / {args.edges:,} edges, {args.batch:,}-change rounds"
        )
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
    if spark is not None:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
