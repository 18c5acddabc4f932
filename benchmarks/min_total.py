"""Seed 003's skew experiment for the minimum: one hot key, 10 k updates a round.

Each round inserts ``--per-round`` random values for key 0 and retracts ``--retract`` of
the values present (the current minimum among them half of the time, so the answer keeps
moving). Per-round time, for the same stream, of:

* ``min_total``: reads the batch, the touched values' counts and a short scan from the old
  minimum: flat in the number of rounds;
* ``min``: the vectorized lattice reduce, which re-reads all of the key's values: grows
  with the history;
* ``hierarchical``: ``reduce_hierarchical("min", buckets=256)`` (two stages);
* ``reduce``: ``reduce`` with a Python ``min`` logic (``--reduce-rounds``, default 30: it
  grows fastest).

Outputs are checked equal to ``min_total``'s at every round.

    python benchmarks/min_total.py --json benchmarks/results/min_total.json \
        --png benchmarks/results/min_total.png
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddflow as dd  # noqa: E402
from _common import emit_json, log, machine_info, now, save_png  # noqa: E402
from ddflow.runtime.memory import tune_malloc  # noqa: E402


def first_value(_k: Any, vals: list[tuple[Any, Any]]) -> list[tuple[Any, int]]:
    return [(vals[0][0], 1)]


BUILDS = {
    "min_total": lambda c: c.min_total(),
    "min": lambda c: c.min(),
    "hierarchical": lambda c: c.reduce_hierarchical("min", buckets=256),
    "reduce": lambda c: c.reduce(first_value),
}


def stream(rounds: int, per: int, retract: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per round: (values, diffs) for key 0."""
    rng = np.random.default_rng(seed)
    present: list[int] = []
    out = []
    for _ in range(rounds):
        ins = rng.integers(0, 1 << 40, per)
        rem: list[int] = []
        if present:
            arr = np.array(present)
            k = min(retract, len(arr))
            pick = set(rng.choice(len(arr), k, replace=False).tolist())
            if rng.random() < 0.5:
                pick.add(int(np.argmin(arr)))
            rem = [present[i] for i in pick]
            present = [v for i, v in enumerate(present) if i not in pick]
        present.extend(ins.tolist())
        vals = np.concatenate([ins, np.array(rem, dtype=np.int64)])
        diffs = np.concatenate([np.ones(per, np.int64), -np.ones(len(rem), np.int64)])
        out.append((vals, diffs))
    return out


def run(impl: str, rounds: list[tuple[np.ndarray, np.ndarray]]) -> tuple[list[float], list[Any]]:
    w = dd.Worker()
    inp, c = w.new_collection()
    res = BUILDS[impl](c)
    cap = res.capture()
    probe = res.probe()
    times = []
    answers = []
    for t, (vals, diffs) in enumerate(rounds):
        t0 = now()
        inp.insert_columns((np.zeros(len(vals), np.int64), vals), diffs=diffs)
        inp.advance_to(t + 1)
        w.step_while(lambda: probe.less_than(t + 1), at_least_once=True)
        times.append(now() - t0)
        answers.append(cap.at(t))
    return times, answers


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--per-round", type=int, default=10_000)
    ap.add_argument("--retract", type=int, default=100)
    ap.add_argument("--reduce-rounds", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--png")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    tune_malloc()
    data = stream(a.rounds, a.per_round, a.retract, a.seed)
    results: dict[str, Any] = {}
    base = None
    for impl in ("min_total", "min", "hierarchical", "reduce"):
        n = a.reduce_rounds if impl == "reduce" else a.rounds
        times, answers = run(impl, data[:n])
        if base is None:
            base = answers
        equal = answers == base[:n]
        k = max(1, n // 10)
        first, last = float(np.median(times[:k])), float(np.median(times[-k:]))
        results[impl] = {"rounds": n, "first_10pct_median_ms": first * 1e3,
                         "last_10pct_median_ms": last * 1e3, "growth": last / first,
                         "total_s": float(sum(times)), "answers_equal_min_total": equal,
                         "times": times}
        log(f"  {impl}: first {first * 1e3:.1f} ms, last {last * 1e3:.1f} ms per round "
            f"({n} rounds), equal: {equal}", quiet=a.quiet)
    doc = {
        "benchmark": "min_total",
        "machine": machine_info(),
        "params": vars(a),
        "results": {k: {kk: vv for kk, vv in v.items() if kk != "times"}
                    for k, v in results.items()},
    }
    emit_json(doc, path=a.json)
    if a.png:
        def draw(plt: Any) -> None:
            fig, ax = plt.subplots(figsize=(6.5, 4.2))
            for impl, r in results.items():
                ax.plot(np.arange(1, r["rounds"] + 1), np.array(r["times"]) * 1e3, label=impl)
            ax.set_yscale("log")
            ax.set_xlabel("round (10 k updates to one key each)")
            ax.set_ylabel("round time (ms)")
            ax.set_title("minimum of a hot key: per-round time as history grows")
            ax.legend()
            ax.grid(alpha=0.3, which="both")
        save_png(a.png, draw, quiet=a.quiet)
    return doc


if __name__ == "__main__":
    main()
