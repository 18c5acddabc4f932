"""The benchmark suite behind one command.

Usage::

    python benchmarks/run.py                  # every workload at its full size
    python benchmarks/run.py --quick          # small sizes (a few minutes)
    python benchmarks/run.py tpch skew        # chosen workloads
    python benchmarks/run.py tpch --tpch-args "--queries 1,13 --sf 1"

Workloads (each a script in this folder with its own CLI, JSON and PNG):

- ``degrees``: the out-degree distribution (``degrees.py``), with its dict-per-record
  and Pathway baselines;
- ``tpch``: the 22 TPC-H queries over their change streams (``tpch.py``), with the
  dict-per-record, DuckDB-recompute and Pathway baselines;
- ``bfs``: BFS on 100k nodes / 1M edges under edge changes (``bfs.py``);
- ``skew``: one hot key, ``reduce`` versus ``explode`` + ``count_total`` (``skew.py``);
- ``soak``: bounded state, degrees and BFS over 10^6 changes: RSS, updates held
  and round latency per 10^5 changes (``soak.py``);
- ``checkpoint``: full, incremental and restore times of a 1 M-key dataflow
  (``checkpoint.py``);
- ``compact``: bytes per edge of an arrangement of 5 M edges after compaction
  (``compact.py``).

Each workload runs in its own process (a fresh interpreter, so one does not warm or
fragment the next), writes ``<out>/<workload>.json`` and ``.png``; the suite prints a
progress bar on stderr and a summary JSON (machine, versions, parameters, each workload's
document) on stdout and in ``<out>/suite.json``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import emit_json, machine_info  # noqa: E402

HERE = Path(__file__).resolve().parent

#: workload -> (script, full-size arguments, quick arguments)
WORKLOADS: dict[str, tuple[str, list[str], list[str]]] = {
    "degrees": (
        "degrees.py",
        ["--nodes", "1000000", "--edges", "5000000", "--single-change-rounds", "1000"],
        ["--nodes", "10000", "--edges", "50000", "--rounds", "5"],
    ),
    "tpch": (
        "tpch.py",
        ["--sf", "1"],
        ["--sf", "0.1", "--batches", "1000,10000", "--duckdb-samples", "4"],
    ),
    "bfs": (
        "bfs.py",
        ["--rounds", "200", "--batch-rounds", "30"],
        ["--nodes", "10000", "--edges", "100000", "--rounds", "30", "--batch-rounds", "5"],
    ),
    "skew": ("skew.py", [], ["--rounds", "60"]),
    "soak": ("soak.py", [], ["--changes", "100000", "--every", "10000"]),
    "checkpoint": (
        "checkpoint.py",
        ["--rounds", "100", "--repeat", "5"],
        ["--keys", "100000", "--rounds", "10", "--repeat", "2"],
    ),
    "compact": ("compact.py", [], ["--edges", "500000", "--nodes", "100000"]),
}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "workloads",
        nargs="*",
        default=[],
        help=f"workloads to run: {', '.join(WORKLOADS)} (default: all)",
    )
    p.add_argument("--quick", action="store_true", help="small sizes")
    p.add_argument("--out", default=str(HERE / "results"), help="folder for JSON and PNG")
    for w in WORKLOADS:
        p.add_argument(f"--{w}-args", default="", help=f"extra arguments for {w}")
    args = p.parse_args(argv)
    chosen = args.workloads or list(WORKLOADS)
    unknown = [w for w in chosen if w not in WORKLOADS]
    if unknown:
        p.error(f"unknown workload {unknown[0]!r}; choose from {', '.join(WORKLOADS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    docs: dict[str, Any] = {}
    t_start = time.perf_counter()
    for i, w in enumerate(chosen):
        script, full, quick = WORKLOADS[w]
        suffix = "_quick" if args.quick else ""
        cmd = [
            sys.executable,
            str(HERE / script),
            *(quick if args.quick else full),
            *shlex.split(getattr(args, f"{w}_args")),
            "--json",
            str(out / f"{w}{suffix}.json"),
            "--png",
            str(out / f"{w}{suffix}.png"),
        ]
        _bar(i, len(chosen), f"{w} ...", t_start)
        t0 = time.perf_counter()
        # stdout (the workload's JSON) is captured; its progress on stderr passes through.
        res = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
        if res.returncode != 0:
            sys.stderr.write(f"\n{w} failed (exit {res.returncode}): {' '.join(cmd)}\n")
            docs[w] = {"error": res.returncode, "command": cmd}
            continue
        docs[w] = {
            "command": " ".join(cmd[1:]),
            "seconds": round(time.perf_counter() - t0, 1),
            "result": json.loads((out / f"{w}{suffix}.json").read_text()),
        }
        _bar(i + 1, len(chosen), f"{w} done", t_start)
    sys.stderr.write("\n")
    doc = {
        "benchmark": "suite",
        "machine": machine_info(("ddflow", "duckdb", "pathway")),
        "params": {"workloads": chosen, "quick": args.quick},
        "workloads": docs,
    }
    emit_json(doc, path=str(out / f"suite{'_quick' if args.quick else ''}.json"))
    return doc


def _bar(done: int, total: int, label: str, t0: float) -> None:
    frac = done / max(total, 1)
    spent = time.perf_counter() - t0
    sys.stderr.write(
        f"\r[{'#' * int(30 * frac)}{'.' * (30 - int(30 * frac))}] "
        f"{done}/{total} {label:20s} {int(spent) // 60}m{int(spent) % 60:02d}s"
    )
    sys.stderr.flush()


if __name__ == "__main__":
    main()
