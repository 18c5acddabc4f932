"""Skew: one hot key summed with ``reduce`` versus ``explode`` +
``count_total``.

Usage::

    python benchmarks/skew.py --rounds 200 --updates 10000 \\
        --json benchmarks/results/skew.json --png benchmarks/results/skew.png

One key receives ``--updates`` new values every round (and, with ``--retract``, the values
of ``--retract`` rounds earlier leave again), for ``--rounds`` rounds. Two dataflows keep
the key's sum:

- ``reduce``: ``(key, value)`` records and ``reduce`` with a Python ``logic`` that adds the
  values up; every round it is handed the key's whole accumulated input, so its time grows
  with the key's history;
- ``explode``: the value moved into the diff (``explode`` to ``(key, (1, value))``) and
  ``count_total``; a round reads the key's accumulated diff, one row, so its time stays
  flat however long the history.

Both outputs are checked equal to the running sum after every round. The JSON holds every
round's time; the PNG plots both against the round number.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ddflow as dd  # noqa: E402
from _common import emit_json, log, machine_info, median, save_png  # noqa: E402


def _sum_logic(_key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    return [(sum(v * d for v, d in vals), 1)]


def run(
    kind: str, rounds: int, updates: int, retract: int, seed: int, quiet: bool
) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    # distinct values (as distinct records): the hot key's group grows by `updates` a round
    values = rng.integers(0, 1 << 40, size=(rounds, updates))
    times, sums = [], []
    with dd.Worker() as w:
        inp, coll = w.new_collection()
        if kind == "reduce":
            out = coll.reduce(_sum_logic)
        else:
            out = coll.explode(
                lambda r: (r[0], (np.ones(len(r[0]), np.int64), r[1])), vectorized=True
            ).count_total()
        cap = out.capture()
        probe = out.probe()
        key = np.zeros(updates, dtype=np.int64)
        want = 0
        for r in range(rounds):
            t0 = time.perf_counter()
            inp.insert_columns((key, values[r]))
            want += int(values[r].sum())
            if retract and r >= retract:
                inp.insert_columns(
                    (key, values[r - retract]), diffs=-np.ones(updates, dtype=np.int64)
                )
                want -= int(values[r - retract].sum())
            inp.advance_to(r + 1)
            w.step_while(lambda: probe.less_than(inp.time()))
            times.append(time.perf_counter() - t0)
            got = [rec for rec, t, d in cap.updates() if t == r and d > 0]
            total = got[0][1] if kind == "reduce" else got[0][1][1]
            if int(total) != want:
                raise AssertionError(f"{kind}: round {r} sum {total}, want {want}")
            sums.append(want)
            if not quiet and (r + 1) % max(1, rounds // 10) == 0:
                log(f"  {kind}: round {r + 1}/{rounds}, {1e3 * times[-1]:.1f} ms")
    tenth = max(1, rounds // 10)
    return {
        "kind": kind,
        "round_ms": [round(1e3 * t, 3) for t in times],
        "first_tenth_median_ms": round(1e3 * median(times[:tenth]), 3),
        "last_tenth_median_ms": round(1e3 * median(times[-tenth:]), 3),
        "growth": round(median(times[-tenth:]) / median(times[:tenth]), 2),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--updates", type=int, default=10_000, help="updates per round")
    p.add_argument(
        "--retract",
        type=int,
        default=0,
        help="retract each round's values this many rounds later (0: never)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--png", metavar="PATH")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    results = [
        run(k, args.rounds, args.updates, args.retract, args.seed, args.quiet)
        for k in ("explode", "reduce")
    ]
    doc = {"benchmark": "skew", "machine": machine_info(), "params": vars(args), "results": results}
    emit_json(doc, path=args.json)
    if args.png:

        def draw(plt: Any) -> None:
            fig, ax = plt.subplots(figsize=(8, 4.5))
            for r in results:
                label = (
                    "reduce (Python sum over the whole group)"
                    if r["kind"] == "reduce"
                    else "explode + count_total (sum in the diff)"
                )
                ax.plot(np.arange(1, len(r["round_ms"]) + 1), r["round_ms"], label=label)
            ax.set_xlabel("round")
            ax.set_ylabel("round time (ms)")
            ax.set_yscale("log")
            ax.set_title(f"One hot key, {args.updates} updates per round")
            ax.legend()
            fig.tight_layout()

        save_png(args.png, draw, quiet=args.quiet)
    return doc


if __name__ == "__main__":
    main()
