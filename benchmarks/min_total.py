"""Skew for the minimum: one hot key, 10 k updates a round.

Each round inserts ``--per-round`` random values for key 0 and retracts ``--retract`` of
the values present, plus the current minimum every other round on average (so the answer
keeps moving and ``min_total`` must scan past it). Per-round time, for the same stream, of:

* ``min_total``: reads the batch, and from the history only a short scan from the old
  minimum when the batch retracts it: flat in the number of rounds;
* ``hierarchical``: ``reduce_hierarchical("min", buckets=256)``: ``min_total`` per
  ``(key, value-hash bucket)``, then per key (the hierarchical remedy for skew);
* ``min``: the vectorized lattice ``min`` (any partial order), which re-reads all of the
  key's values: grows with the history;
* ``reduce``: ``reduce`` with a Python min logic (``--reduce-rounds``, default 30: it grows
  fastest; its values reach the logic as a Python list).

Outputs are checked equal to ``min_total``'s at every round. Reported per implementation:
the median round time over the first and the last 10% of its rounds, and, to compare all
of them over the same history, over the first and last 10% of the first
``--reduce-rounds`` rounds.

    python benchmarks/min_total.py --json benchmarks/results/min_total.json \
        --png benchmarks/results/min_total.png
    python benchmarks/min_total.py --rounds 50 --impls min_total,hierarchical   # quick
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
from ddflow.runtimes.memory import tune_malloc  # noqa: E402

IMPLS = ("min_total", "hierarchical", "min", "reduce")


def first_value(_k: Any, vals: list[tuple[Any, Any]]) -> list[tuple[Any, int]]:
    """The min logic of a plain ``reduce``: values arrive sorted, so the first one."""
    return [(vals[0][0], 1)]


BUILDS = {
    "min_total": lambda c: c.min_total(),
    "hierarchical": lambda c: c.reduce_hierarchical("min", buckets=256),
    "min": lambda c: c.min(),
    "reduce": lambda c: c.reduce(first_value),
}


def stream(rounds: int, per: int, retract: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per round: (values, diffs) for key 0. Values are distinct (drawn from 2^40, repeats
    dropped) so a retraction removes exactly one present value."""
    rng = np.random.default_rng(seed)
    values = np.empty(rounds * per, dtype=np.int64)
    alive = np.zeros(rounds * per, dtype=bool)
    n = 0
    out = []
    for _ in range(rounds):
        rem = np.empty(0, dtype=np.int64)
        if n:
            live = np.flatnonzero(alive[:n])
            pick = rng.choice(live, min(retract, len(live)), replace=False)
            if rng.random() < 0.5:  # the current minimum as well
                vals_live = values[live]
                pick = np.union1d(pick, live[np.argmin(vals_live)])
            alive[pick] = False
            rem = values[pick]
        ins = rng.integers(0, 1 << 40, per)
        values[n : n + per] = ins
        alive[n : n + per] = True
        n += per
        vals = np.concatenate([ins, rem])
        diffs = np.concatenate([np.ones(per, np.int64), -np.ones(len(rem), np.int64)])
        out.append((vals, diffs))
    return out


def run(impl: str, rounds: list[tuple[np.ndarray, np.ndarray]]) -> tuple[list[float], list[Any]]:
    """Per-round seconds (feed, advance, step until the output caught up) and the answer
    after each round."""
    with dd.Worker() as w:
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
            answers.append({k: int(v) for k, v in cap.at(t).items()})
    return times, answers


def window_medians_ms(times: list[float]) -> tuple[float, float]:
    """Median round time (ms) over the first and the last 10% of ``times``."""
    k = max(1, len(times) // 10)
    return float(np.median(times[:k])) * 1e3, float(np.median(times[-k:])) * 1e3


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--per-round", type=int, default=10_000, help="inserted values per round")
    ap.add_argument(
        "--retract",
        type=int,
        default=100,
        help="random present values retracted per round (plus the minimum)",
    )
    ap.add_argument(
        "--reduce-rounds",
        type=int,
        default=30,
        help="rounds for the Python reduce (and the common comparison window)",
    )
    ap.add_argument(
        "--impls", default=",".join(IMPLS), help=f"comma-separated subset of {','.join(IMPLS)}"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--png")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    impls = [i for i in a.impls.split(",") if i]
    bad = [i for i in impls if i not in IMPLS]
    if bad or not impls:
        ap.error(f"unknown --impls {bad}; choose from {', '.join(IMPLS)}")
    tune_malloc()
    t0 = now()
    data = stream(a.rounds, a.per_round, a.retract, a.seed)
    log(f"stream: {a.rounds} rounds of {a.per_round} inserts in {now() - t0:.1f} s", quiet=a.quiet)
    results: dict[str, Any] = {}
    base: list[Any] | None = None
    common = min(a.reduce_rounds, a.rounds)
    for impl in impls:
        n = common if impl == "reduce" else a.rounds
        times, answers = run(impl, data[:n])
        if base is None:
            base = answers
        equal = answers[: len(base)] == base[: len(answers)]
        first, last = window_medians_ms(times)
        cf, cl = window_medians_ms(times[:common])
        results[impl] = {
            "rounds": n,
            "first_10pct_median_ms": first,
            "last_10pct_median_ms": last,
            "growth": last / first,
            f"first_{common}_rounds": {
                "first_10pct_median_ms": cf,
                "last_10pct_median_ms": cl,
                "growth": cl / cf,
            },
            "total_s": float(sum(times)),
            "answers_equal": equal,
            "times": times,
        }
        log(
            f"  {impl}: first {first:.1f} ms, last {last:.1f} ms per round ({n} rounds, "
            f"x{last / first:.2f}), answers equal: {equal}",
            quiet=a.quiet,
        )
    doc = {
        "benchmark": "min_total",
        "machine": machine_info(),
        "params": vars(a),
        "history_at_end": a.rounds * a.per_round,
        "results": {
            k: {kk: vv for kk, vv in v.items() if kk != "times"} for k, v in results.items()
        },
    }
    if "min_total" in results:
        mt = results["min_total"]["last_10pct_median_ms"]
        doc["last_rounds_vs_min_total"] = {
            k: v["last_10pct_median_ms"] / mt for k, v in results.items() if k != "reduce"
        }
    emit_json(doc, path=a.json)
    if a.png:

        def draw(plt: Any) -> None:
            fig, ax = plt.subplots(figsize=(6.5, 4.2))
            for impl, r in results.items():
                ax.plot(np.arange(1, r["rounds"] + 1), np.array(r["times"]) * 1e3, label=impl)
            ax.set_yscale("log")
            ax.set_xlabel(f"round ({a.per_round:,} updates to one key each)")
            ax.set_ylabel("round time (ms)")
            ax.set_title("minimum of a hot key: per-round time as history grows")
            ax.legend()
            ax.grid(alpha=0.3, which="both")

        save_png(a.png, draw, quiet=a.quiet)
    if not all(r["answers_equal"] for r in results.values()):
        raise SystemExit("answers differ between implementations")
    return doc


if __name__ == "__main__":
    main()
