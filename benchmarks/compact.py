"""Compact state benchmark: the memory an arrangement of a static graph takes once its
times are compacted (a batch whose times, or diffs, are all one value stores that column
once).

The dataflow is one ``edges.arrange_by_key()`` of ``--edges`` random distinct ``(src, dst)``
int64 pairs over ``--nodes`` nodes (src is the key, dst the value). Two scenarios, each in a
fresh subprocess:

- ``static``: all edges inserted at time 0 with ``insert_columns``, then ``advance_to(1)``
  and stepping until idle.
- ``rounds``: the same edges arrive in ``--rounds`` rounds (round ``r`` at time ``r``),
  each followed by ``advance_to(r + 1)`` and stepping; the arrangement has no reader, so
  its logical compaction follows its upper and merges advance every time to it. After the
  last round, merges still in progress are completed (input that stops brings no more
  merge fuel) and the figures are taken again.

Figures per scenario:

- ``bytes_per_edge``: ``Spine.stats()["bytes"]`` / edges, the bytes of the distinct
  buffers the trace's batches hold (a zero-stride view counts only its one-row base);
- ``rss_bytes_per_edge``: the process's resident set after building, minus before the
  input was generated, with the input buffers freed (``gc.collect`` and glibc's
  ``malloc_trim`` first, so freed heap memory is not counted), per edge;
- ``bytes_per_edge_after_lookups``: the same accounting after probing the arrangement
  with ``--probes`` random keys (lookups may build a dense key table per batch);
- ``build_s``: wall time from the first ``insert_columns`` to the idle dataflow.

Edges are distinct (a graph is a set of edges): a duplicated edge would consolidate into a
diff of 2, and a batch with any diff other than 1 keeps a per-update diff column.

Output: JSON on stdout (``--json PATH`` also writes it). ``--worker SCENARIO`` runs one
scenario in this process and prints its JSON on one line (what the parent runs).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (  # noqa: E402 - the path insert above makes _common importable
    BenchmarkError,
    current_rss_mb,
    emit_json,
    log,
    machine_info,
    now,
    run_impl_subprocess,
)

SCENARIOS = ("static", "rounds")
#: the bar: bytes per edge of a compacted arrangement of int64 (src, dst) edges
BAR_BYTES_PER_EDGE = 20.0


def _trim() -> None:
    """Collect garbage and hand freed heap memory back to the OS (glibc), so the resident
    set counts live memory only."""
    gc.collect()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _rss_bytes() -> float:
    rss = current_rss_mb()
    if rss is None:
        raise BenchmarkError("no /proc/self/statm: RSS cannot be measured here")
    return rss * 1024.0 * 1024.0


def _edges(n: int, nodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` distinct random ``(src, dst)`` pairs over ``nodes`` nodes, in random order."""
    if n > nodes * nodes:
        raise BenchmarkError(f"{n} distinct edges do not fit on {nodes} nodes")
    rng = np.random.default_rng(seed)
    codes = np.unique(rng.integers(0, nodes * nodes, size=n + n // 8 + 16, dtype=np.int64))
    while codes.shape[0] < n:
        more = rng.integers(0, nodes * nodes, size=n, dtype=np.int64)
        codes = np.unique(np.concatenate([codes, more]))
    codes = rng.permutation(codes)[:n]
    return codes // nodes, codes % nodes


def _finish_merges(spine: Any) -> int:
    """Complete every merge in progress (a private spine call: input that has stopped brings
    no merge fuel, and the figures "after the merges complete" need them done)."""
    done = 0
    while any(not hasattr(e, "keys") for e in spine.stack):
        for i in range(len(spine.stack)):
            spine._complete(i)
            done += 1
        spine._tidy()
    return done


def _figures(spine: Any, edges: int) -> dict[str, Any]:
    st = spine.stats()
    batches = spine.batches()
    return {
        "bytes": st["bytes"],
        "bytes_per_edge": round(st["bytes"] / edges, 3),
        "batches": st["batches"],
        "updates": st["updates"],
        "merges_in_progress": st["merges_in_progress"],
        "batch_rows": [len(b) for b in batches],
        "batch_bytes": [b.nbytes() for b in batches],
        "batch_compact": [b.is_compact for b in batches],
    }


def _warm_up() -> None:
    """Run a tiny copy of the dataflow first, so modules imported and caches filled on first
    use are not counted as the arrangement's memory."""
    import ddflow as dd

    with dd.Worker() as worker:
        edges_in, edges = worker.new_collection()
        edges.arrange_by_key()
        for r in range(3):
            src, dst = _edges(1000, 100, r)
            edges_in.insert_columns((src, dst))
            edges_in.advance_to(r + 1)
            worker.run()


def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    import ddflow as dd

    quiet = args.quiet
    _warm_up()
    with dd.Worker() as worker:
        edges_in, edges = worker.new_collection()
        arranged = edges.arrange_by_key()
        spine = arranged.op.spine
        _trim()
        rss0 = _rss_bytes()
        src, dst = _edges(args.edges, args.nodes, args.seed)
        log(f"[{args.worker}] {args.edges:,} edges generated", quiet=quiet)
        t0 = now()
        if args.worker == "static":
            edges_in.insert_columns((src, dst))
            edges_in.advance_to(1)
            worker.run()
        else:
            bounds = np.linspace(0, args.edges, args.rounds + 1).astype(np.int64)
            for r in range(args.rounds):
                lo, hi = int(bounds[r]), int(bounds[r + 1])
                # copies: the session must not keep views of the whole input alive
                edges_in.insert_columns((src[lo:hi].copy(), dst[lo:hi].copy()))
                edges_in.advance_to(r + 1)
                worker.run()
        build_s = now() - t0
        del src, dst
        _trim()
        rss1 = _rss_bytes()
        result: dict[str, Any] = {
            "scenario": args.worker,
            "edges": args.edges,
            "nodes": args.nodes,
            "rounds": 1 if args.worker == "static" else args.rounds,
            "build_s": round(build_s, 3),
            "edges_per_s": round(args.edges / build_s, 1) if build_s > 0 else None,
            "rss_delta_mb": round((rss1 - rss0) / 2**20, 2),
            "rss_bytes_per_edge": round((rss1 - rss0) / args.edges, 3),
            **_figures(spine, args.edges),
        }
        if args.worker == "rounds":
            t1 = now()
            result["merges_completed_after_input"] = _finish_merges(spine)
            result["finish_merges_s"] = round(now() - t1, 3)
            _trim()
            rss2 = _rss_bytes()
            after = _figures(spine, args.edges)
            after["rss_delta_mb"] = round((rss2 - rss0) / 2**20, 2)
            after["rss_bytes_per_edge"] = round((rss2 - rss0) / args.edges, 3)
            result["after_merges"] = after
        # lookups (a join's read path): may build each batch's dense key table
        rng = np.random.default_rng(args.seed + 1)
        probe = np.unique(rng.integers(0, args.nodes, size=args.probes, dtype=np.int64))
        t2 = now()
        got, _owner = spine.gather(probe, spine.batches())
        result["lookup_s"] = round(now() - t2, 4)
        result["lookup_rows"] = 0 if got is None else len(got)
        del got, _owner
        _trim()
        st = spine.stats()
        result["bytes_per_edge_after_lookups"] = round(st["bytes"] / args.edges, 3)
        result["rss_bytes_per_edge_after_lookups"] = round((_rss_bytes() - rss0) / args.edges, 3)
        final = result.get("after_merges", result)
        result["within_bar"] = bool(
            final["bytes_per_edge"] <= BAR_BYTES_PER_EDGE
            and final["rss_bytes_per_edge"] <= BAR_BYTES_PER_EDGE
        )
    return result


def run_parent(args: argparse.Namespace) -> int:
    script = os.path.abspath(__file__)
    results: dict[str, Any] = {}
    for name in dict.fromkeys(args.scenario):
        log(f"== {name}", quiet=args.quiet)
        argv = [
            "--worker",
            name,
            "--edges",
            str(args.edges),
            "--nodes",
            str(args.nodes),
            "--rounds",
            str(args.rounds),
            "--probes",
            str(args.probes),
            "--seed",
            str(args.seed),
        ]
        if args.quiet:
            argv.append("--quiet")
        results[name] = run_impl_subprocess(script, argv, timeout=args.timeout)
    doc = {
        "benchmark": "compact",
        "machine": machine_info(),
        "parameters": {
            "edges": args.edges,
            "nodes": args.nodes,
            "rounds": args.rounds,
            "probes": args.probes,
            "seed": args.seed,
            "bar_bytes_per_edge": BAR_BYTES_PER_EDGE,
        },
        "results": results,
    }
    emit_json(doc, path=args.json)
    if args.png:
        from _common import save_png

        def draw(plt: Any) -> None:
            fig, ax = plt.subplots(figsize=(8, 4))
            labels, acc, rss = [], [], []
            for name, r in results.items():
                cases = [(name, r)]
                if "after_merges" in r:
                    cases = [(f"{name} (merging)", r), (f"{name} (merged)", r["after_merges"])]
                for label, c in cases:
                    labels.append(label)
                    acc.append(c["bytes_per_edge"])
                    rss.append(c["rss_bytes_per_edge"])
            xs = np.arange(len(labels))
            ax.bar(xs - 0.2, acc, 0.4, label="accounted bytes / edge")
            ax.bar(xs + 0.2, rss, 0.4, label="RSS bytes / edge")
            ax.axhline(20, color="tab:red", lw=0.8, label="bar: 20")
            ax.axhline(16, color="grey", ls=":", lw=0.8, label="two int64 columns: 16")
            ax.set_xticks(xs, labels)
            ax.set_ylabel("bytes per edge")
            ax.set_title(f"Arrangement of {args.edges:,} edges after compaction")
            ax.legend(fontsize=8)
            fig.tight_layout()

        save_png(args.png, draw, quiet=args.quiet)
    return 0 if all(r["within_bar"] for r in results.values()) else 1


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--edges", type=int, default=5_000_000, help="distinct edges (default 5M)")
    p.add_argument("--nodes", type=int, default=1_000_000, help="nodes (default 1M)")
    p.add_argument("--rounds", type=int, default=10, help="rounds of the rounds scenario")
    p.add_argument("--probes", type=int, default=100_000, help="random keys looked up")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--scenario", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    p.add_argument("--json", metavar="PATH", help="also write the JSON to PATH")
    p.add_argument("--png", metavar="PATH", help="draw bytes per edge (needs matplotlib)")
    p.add_argument("--timeout", type=float, default=3600.0, help="per-scenario time-out, s")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--worker", choices=SCENARIOS, help="run one scenario in this process")
    args = p.parse_args(argv)
    if args.edges < 1 or args.nodes < 1 or args.rounds < 1:
        p.error("--edges, --nodes and --rounds must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        emit_json(run_worker(args), compact=True)
        return 0
    return run_parent(args)


if __name__ == "__main__":
    sys.exit(main())
