"""Checkpoint benchmark: write, incremental write and restore of a dataflow whose
arrangements hold 1 M keys.

The dataflow: ``pairs`` of ``(key, value)`` with ``--keys`` distinct keys, ``pairs.min()``
(a reduce: its input arrangement holds every pair, its output arrangement one row per key),
and the output arranged by key again (so the answer lives in a trace, not in a capture,
which would be pickled whole into every checkpoint).

Measured, each in the same process unless said:

- ``full_s``: the first checkpoint of the loaded dataflow into an empty directory (median of
  ``--repeat`` fresh directories);
- ``incremental_s``: after each of ``--rounds`` rounds of ``--changes`` changes (half
  removals of present pairs, half new pairs), a checkpoint into the same directory: only
  batches made since the previous checkpoint are written (median, p90, max);
- ``restore_s``: a fresh process builds the dataflow and restores the newest checkpoint
  (median of ``--repeat`` processes; the time of ``Worker.restore`` alone, and the process's
  wall time to a restored worker); it then runs one more round, and its output trace must
  equal the writing process's after the same round (a digest of the consolidated trace).

Checkpoints are durable (files fsynced before the commit marker) unless ``--no-durable``.

Usage::

    python benchmarks/checkpoint.py --json benchmarks/results/checkpoint.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ddflow as dd  # noqa: E402
from _common import emit_json, log, machine_info, median, save_png  # noqa: E402
from ddflow.core.updates import concat_updates, consolidate  # noqa: E402


def build(keys: int) -> tuple[Any, Any, Any, Any]:
    w = dd.Worker()
    s, pairs = w.new_collection()
    out = pairs.min().arrange_by_key()
    probe = out.as_collection().probe()
    return w, s, out, probe


def load(s: Any, w: Any, probe: Any, keys: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    k = np.arange(keys, dtype=np.int64)
    v = rng.integers(0, 1 << 40, keys)
    s.insert_columns((k, v))
    s.advance_to(1)
    w.step_while(lambda: probe.less_than(1))
    return k, v


def round_changes(
    rng: np.random.Generator, k: np.ndarray, v: np.ndarray, changes: int
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """Half removals of present pairs, half new pairs (same keys, new values); updates the
    live pairs in place."""
    half = changes // 2
    idx = rng.choice(len(k), size=half, replace=False)
    new_v = rng.integers(0, 1 << 40, half)
    data = (np.concatenate([k[idx], k[idx]]), np.concatenate([v[idx], new_v]))
    diffs = np.concatenate([np.full(half, -1, np.int64), np.ones(half, np.int64)])
    v[idx] = new_v
    return data, diffs


def step_round(s: Any, w: Any, probe: Any, data: Any, diffs: np.ndarray, t: int) -> None:
    s.insert_columns(data, diffs)
    s.advance_to(t + 1)
    w.step_while(lambda: probe.less_than(t + 1))


def digest(out: Any) -> str:
    """A digest of the output trace's consolidated contents (times forgotten)."""
    spine = out.op.spine if hasattr(out, "op") else out.arrange.spine
    parts = [b.updates() for b in spine.batches() if len(b)]
    if not parts:
        return "empty"
    u = concat_updates(parts)
    u = consolidate(u.with_times(np.zeros_like(u.times)))
    h = hashlib.sha256()
    for c in u.data:
        h.update(np.ascontiguousarray(c).tobytes())
    h.update(np.ascontiguousarray(u.diffs).tobytes())
    return h.hexdigest()


def restore_child(args: argparse.Namespace) -> None:
    """In a fresh process: build, restore, run the next round; print JSON."""
    t0 = time.perf_counter()
    w, s, out, probe = build(args.keys)
    t1 = time.perf_counter()
    info = w.restore(args.dir)
    t2 = time.perf_counter()
    data = tuple(np.load(os.path.join(args.dir, f"next_{j}.npy")) for j in range(2))
    diffs = np.load(os.path.join(args.dir, "next_d.npy"))
    step_round(s, w, probe, data, diffs, args.rounds + 1)
    print(
        json.dumps(
            {
                "restore_s": t2 - t1,
                "build_s": t1 - t0,
                "seq": info["seq"],
                "batches": info["batches"],
                "digest": digest(out),
            }
        )
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--changes", type=int, default=10_000, help="changes per round")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-durable", action="store_true", help="do not fsync")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--png", metavar="PATH", help="draw the checkpoint times")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--restore-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.restore_child:
        restore_child(args)
        return {}
    durable = not args.no_durable
    from ddflow.runtimes.memory import tune_malloc

    tune_malloc()
    w, s, out, probe = build(args.keys)
    t0 = time.perf_counter()
    k, v = load(s, w, probe, args.keys, args.seed)
    load_s = time.perf_counter() - t0
    log(f"loaded {args.keys} keys in {load_s:.2f} s", quiet=args.quiet)
    root = tempfile.mkdtemp(prefix="ddflow-ckpt-bench-")
    try:
        full = []
        for i in range(args.repeat):
            d = os.path.join(root, f"full{i}")
            info = w.checkpoint(d, durable=durable)
            full.append(info)
            w._checkpoint_written = None  # the next repeat writes everything again
        d = os.path.join(root, "main")
        first = w.checkpoint(d, durable=durable)
        log(
            f"full checkpoint: median {median([f['seconds'] for f in full]):.3f} s, "
            f"{first['bytes_written'] / 1e6:.1f} MB",
            quiet=args.quiet,
        )
        rng = np.random.default_rng(args.seed + 1)
        inc = []
        for r in range(args.rounds):
            data, diffs = round_changes(rng, k, v, args.changes)
            step_round(s, w, probe, data, diffs, r + 1)
            inc.append(w.checkpoint(d, durable=durable))
        secs = sorted(i["seconds"] for i in inc)
        log(
            f"incremental: median {median(secs) * 1e3:.1f} ms, max {secs[-1] * 1e3:.1f} ms",
            quiet=args.quiet,
        )
        # the round after the checkpoint, for both processes
        data, diffs = round_changes(rng, k, v, args.changes)
        for j, c in enumerate(data):
            np.save(os.path.join(d, f"next_{j}.npy"), c)
        np.save(os.path.join(d, "next_d.npy"), diffs)
        restores = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            res = subprocess.run(
                [
                    sys.executable,
                    os.path.abspath(__file__),
                    "--restore-child",
                    "--dir",
                    d,
                    "--keys",
                    str(args.keys),
                    "--rounds",
                    str(args.rounds),
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            wall = time.perf_counter() - t0
            doc = json.loads(res.stdout.strip().splitlines()[-1])
            doc["process_wall_s"] = wall
            restores.append(doc)
        step_round(s, w, probe, data, diffs, args.rounds + 1)
        want = digest(out)
        equal = all(r["digest"] == want for r in restores)
        if not equal:
            raise SystemExit("restored run differs from the uninterrupted one")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    full_s = median([f["seconds"] for f in full])
    inc_s = [i["seconds"] for i in inc]
    restore_s = median([r["restore_s"] for r in restores])
    res_doc = {
        "load_s": round(load_s, 3),
        "full_s": round(full_s, 4),
        "full_all_s": [round(f["seconds"], 4) for f in full],
        "full_bytes": first["bytes_written"],
        "full_batches": first["batches_written"],
        "incremental_s": {
            "median": round(median(inc_s), 4),
            "p90": round(float(np.percentile(inc_s, 90)), 4),
            "max": round(max(inc_s), 4),
        },
        "incremental_all_s": [round(x, 4) for x in inc_s],
        "incremental_bytes_median": int(median([i["bytes_written"] for i in inc])),
        "incremental_batches_written": [i["batches_written"] for i in inc],
        "restore_s": round(restore_s, 4),
        "restore_all_s": [round(r["restore_s"], 4) for r in restores],
        "restore_process_wall_s": [round(r["process_wall_s"], 3) for r in restores],
        "restored_equals_uninterrupted": equal,
        "bars": {
            "full_s<=0.5": full_s <= 0.5,
            "incremental_median_s<=0.05": median(inc_s) <= 0.05,
            "restore_s<=2": restore_s <= 2.0,
        },
    }
    doc = {
        "benchmark": "checkpoint",
        "machine": machine_info(("ddflow", "pyarrow")),
        "params": {k2: v2 for k2, v2 in vars(args).items() if k2 not in ("dir",)},
        "results": res_doc,
    }
    emit_json(doc, path=args.json)
    if args.png:
        save_png(args.png, lambda plt: draw(plt, doc), quiet=args.quiet)
    return doc


def draw(plt: Any, doc: dict[str, Any]) -> None:
    r = doc["results"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    inc = np.array(r["incremental_all_s"]) * 1e3
    ax.plot(np.arange(1, len(inc) + 1), inc, marker=".", label="incremental checkpoint")
    ax.axhline(
        r["full_s"] * 1e3,
        color="tab:orange",
        ls="--",
        label=f"full checkpoint ({r['full_bytes'] / 1e6:.0f} MB, median)",
    )
    ax.axhline(
        r["restore_s"] * 1e3, color="tab:green", ls=":", label="restore in a fresh process (median)"
    )
    ax.axhline(50, color="tab:red", lw=0.8, label="bar: incremental 50 ms")
    ax.set_yscale("log")
    ax.set_xlabel(f"round of {doc['params']['changes']} changes")
    ax.set_ylabel("ms")
    ax.set_title(f"Checkpoints of a {doc['params']['keys']:,}-key dataflow")
    ax.legend(fontsize=8)
    fig.tight_layout()


if __name__ == "__main__":
    main()
