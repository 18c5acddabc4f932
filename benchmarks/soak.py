"""Soak benchmark: does a dataflow's memory and latency stay flat as it
sees many changes to a fixed amount of data?

With the input frontier advancing, what a dataflow holds must depend on the distinct data
it holds, not on how many updates it has seen. Two workloads, each in its own fresh
subprocess, run ``--changes`` changes (default 10^6) in rounds of ``--batch`` changes:

- ``degrees``: ``edges.map(src).count_total().map(count).count_total()`` on a
  random graph of ``--degrees-nodes`` nodes / ``--degrees-edges`` edges;
- ``bfs``: ``ddflow.algorithms.bfs`` from node 0 on a random graph of
  ``--bfs-nodes`` nodes / ``--bfs-edges`` edges (default 20k / 100k: one ``--every``
  window of changes replaces the whole graph, so the first checkpoint is already past the
  first full turnover; state stabilizes only once about as many changes as there is
  initial data have been processed. A larger graph, e.g. 50k / 250k, still climbs
  towards its steady state after 10^5 changes while its spine's largest batch goes
  through its first merges).

A change removes the oldest edge and adds a new random one (``degrees.Workload``: the
removals replay the edge stream, so the graph is a sliding window over it and its size
never changes). A round is: ``insert_columns`` of the round's removals (diff -1) and
additions (+1), ``advance_to(round + 1)``, ``step_while`` until the probe passes the
round; its wall time covers exactly that (input generation is not timed).

Every ``--every`` changes (and after the initial load, at 0 changes) the record gets a
checkpoint: RSS (psutil), the arrangements' sizes from ``Worker.stats()`` (batches,
updates held, merge work outstanding, bytes, updates operators hold outside traces: summed
over arrangements, and per operator) and the latency percentiles (p50, p90, p99, max:
nearest rank) of the rounds in that window. ``--compacted`` also records, per checkpoint
and after its RSS is read, how many updates the arrangements would hold fully merged and
compacted (the distinct ``(key, val, time)`` left after advancing times to each trace's
compaction frontier): the floor the held updates should stay within a small factor of.

No capture: a ``Capture`` keeps every output update forever, which is unbounded memory
by design. The rounds are driven by a probe, and the answer is kept by ``Collect`` below, a
sink that holds only the current collection (times dropped, consolidated), whose size is
bounded by the distinct output data. At the end the answer is checked against a
from-scratch computation over the final edge multiset (numpy bincount for degrees,
frontier-expansion BFS for bfs); ``--no-check`` drops the sink and the check.

The two targets (the JSON's ``bars``), per workload:

- memory: RSS after all changes <= 1.2 x RSS after the first ``--every`` changes;
- latency: p99 round latency of the last window <= 1.5 x p99 of the second window.

    python benchmarks/soak.py --json benchmarks/results/soak.json --png benchmarks/results/soak.png
    python benchmarks/soak.py --changes 200000 --every 20000          # quick

Output: JSON on stdout (machine info, parameters, per-workload checkpoints, bars);
``--png`` draws RSS, updates held and p99 per window for both workloads. ``--worker NAME``
runs one workload in this process and prints its JSON on one line (what the parent runs in
each subprocess; handy under a profiler).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (  # noqa: E402 - the path insert above makes _common importable
    BenchmarkError,
    emit_json,
    log,
    machine_info,
    now,
    peak_rss_mb,
    percentile_nearest_rank,
    ratio,
    run_impl_subprocess,
    save_png,
)
from degrees import EdgeStream, Workload, reference_histogram  # noqa: E402

WORKLOADS = ("degrees", "bfs")
RSS_BAR = 1.2
P99_BAR = 1.5

# ---------------------------------------------------------------------------------------
# a bounded sink


def _collect_class() -> Any:
    from ddflow.core.frontier import Antichain
    from ddflow.core.updates import Updates, concat_updates, consolidate
    from ddflow.engine.operator import Operator

    class Collect(Operator):
        """Keeps the collection accumulated so far (every update's time dropped, equal data
        consolidated), so it holds one row per distinct record, not one per update.
        Consolidates when the unconsolidated tail outgrows the state (amortized O(1) per
        update)."""

        name = "collect"

        def __init__(self, worker: Any, stream: Any) -> None:
            super().__init__(worker, [stream])
            self.acc: Updates | None = None
            self.tail: list[Updates] = []
            self.tail_rows = 0

        def run(self, frontier: Antichain) -> None:
            for u in self.take():
                self.tail.append(u.with_times(np.zeros_like(u.times)))
                self.tail_rows += len(u)
            if self.tail_rows > max(4096, len(self.acc) if self.acc is not None else 0):
                self._fold()

        def _fold(self) -> None:
            parts = ([self.acc] if self.acc is not None else []) + self.tail
            if parts:
                self.acc = consolidate(concat_updates(parts))
            self.tail, self.tail_rows = [], 0

        def rows(self) -> int:
            return (len(self.acc) if self.acc is not None else 0) + self.tail_rows

        def records(self) -> dict[Any, int]:
            """Record -> accumulated diff (zero diffs dropped)."""
            self._fold()
            if self.acc is None:
                return {}
            layout = self.inputs[0].layout
            assert layout is not None
            recs = layout.to_records(self.acc.data, len(self.acc))
            diffs = self.acc.diff_type.to_values(self.acc.diffs)
            return {r: int(d) for r, d in zip(recs, diffs, strict=True) if d}

    return Collect


# ---------------------------------------------------------------------------------------
# the workloads


def _src(cols: Any) -> Any:
    return cols[0]


def _count(kc: Any) -> Any:
    return kc[1]


def reference_bfs(nodes: int, src: np.ndarray, dst: np.ndarray, root: int) -> dict[int, int]:
    """Hop distances from ``root`` by frontier expansion over a CSR adjacency."""
    order = np.argsort(src, kind="stable")
    d = dst[order]
    starts = np.searchsorted(src[order], np.arange(nodes + 1))
    dist = np.full(nodes, -1, dtype=np.int64)
    dist[root] = 0
    frontier = np.array([root])
    level = 0
    while len(frontier):
        level += 1
        lo, hi = starts[frontier], starts[frontier + 1]
        lens = hi - lo
        offsets = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
        nxt = np.unique(d[np.repeat(lo, lens) + offsets])
        nxt = nxt[dist[nxt] < 0]
        dist[nxt] = level
        frontier = nxt
    reached = np.flatnonzero(dist >= 0)
    return dict(zip(reached.tolist(), dist[reached].tolist(), strict=True))


class Soak:
    """One workload's dataflow: ``edges`` input, a probe on the output and (unless
    ``check`` is off) a bounded ``Collect`` sink of the output."""

    def __init__(self, name: str, nodes: int, check: bool) -> None:
        import ddflow as dd

        self.name = name
        self.nodes = nodes
        self.worker = dd.Worker()
        self.e_in, edges = self.worker.new_collection()
        self.r_in = None
        if name == "degrees":
            degrees = edges.map(_src, vectorized=True).count_total()
            out = degrees.map(_count, vectorized=True).count_total()
        elif name == "bfs":
            from ddflow.algorithms import bfs

            self.r_in, roots = self.worker.new_collection()
            out = bfs(edges, roots)
        else:
            raise ValueError(f"unknown workload {name!r}")
        self.probe = out.probe()
        self.sink = _collect_class()(self.worker, out.stream) if check else None
        self.time = 0

    def round(self, cols: tuple[np.ndarray, np.ndarray], diffs: np.ndarray | None) -> None:
        """Feed one round of updates and step until the probe passes it."""
        self.e_in.insert_columns(cols, diffs=diffs)
        self.time += 1
        t = self.time
        self.e_in.advance_to(t)
        if self.r_in is not None:
            self.r_in.advance_to(t)
        probe = self.probe
        self.worker.step_while(lambda: probe.less_than(t), at_least_once=True)

    def answer(self) -> dict[int, int]:
        assert self.sink is not None
        recs = self.sink.records()
        out: dict[int, int] = {}
        for (k, v), d in recs.items():
            if d != 1:
                raise BenchmarkError(f"{self.name}: output record {(k, v)!r} has diff {d}")
            if int(k) in out:
                raise BenchmarkError(f"{self.name}: key {k} appears twice in the output")
            out[int(k)] = int(v)
        return out


def _rss_mb(proc: Any) -> float:
    return proc.memory_info().rss / (1024.0 * 1024.0)


def _arrangement_stats(worker: Any) -> dict[str, Any]:
    """``Worker.stats()`` summed over arrangements, with the per-operator detail."""
    per = worker.stats()
    total: dict[str, int] = {}
    for s in per:
        for k, v in s.items():
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
                total[k] = total.get(k, 0) + int(v)
    return {"total": total, "per_operator": per}


def _compacted_updates(worker: Any) -> dict[str, int]:
    """Per arrangement, the updates it would hold merged into one batch with times advanced
    to its logical compaction frontier and consolidated: the distinct data it must keep."""
    from ddflow.core.time import columns_advance_by
    from ddflow.core.updates import concat_updates, consolidate

    out: dict[str, int] = {}
    for i, op in enumerate(worker.operators):
        spine = getattr(op, "spine", None)
        if spine is None:
            continue
        bs = spine.batches()
        n = 0
        if bs:
            u = concat_updates([b.updates() for b in bs])
            n = len(consolidate(u.with_times(columns_advance_by(u.times, spine.logical.arr))))
        out[f"{i}:{op.name}"] = n
    return out


def _window_latency(seconds: list[float]) -> dict[str, Any]:
    if not seconds:
        return {"rounds": 0}
    ms = [s * 1000.0 for s in seconds]
    return {
        "rounds": len(ms),
        "p50_ms": round(percentile_nearest_rank(ms, 50), 4),
        "p90_ms": round(percentile_nearest_rank(ms, 90), 4),
        "p99_ms": round(percentile_nearest_rank(ms, 99), 4),
        "max_ms": round(max(ms), 4),
        "mean_ms": round(sum(ms) / len(ms), 4),
    }


def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    import gc

    import psutil

    from ddflow.runtimes.memory import tune_malloc

    name = args.worker
    quiet = args.quiet
    tuned = tune_malloc() if not args.no_tune_malloc else False
    proc = psutil.Process()
    if name == "degrees":
        nodes, edges = args.degrees_nodes, args.degrees_edges
    else:
        nodes, edges = args.bfs_nodes, args.bfs_edges
    rss_start = _rss_mb(proc)
    soak = Soak(name, nodes, check=not args.no_check)
    work = Workload(nodes, edges, args.seed)

    t0 = now()
    src, dst = work.load()
    soak.e_in.insert_columns((src, dst))
    if soak.r_in is not None:
        soak.r_in.insert(0)
    soak.round((src[:0], dst[:0]), None)
    load_s = now() - t0
    del src, dst

    checkpoints: list[dict[str, Any]] = []

    def checkpoint(changes: int, window: list[float], elapsed: float, cpu: float) -> None:
        cp: dict[str, Any] = {
            "changes": changes,
            "rss_mb": round(_rss_mb(proc), 2),
            "elapsed_s": round(elapsed, 3),
            "latency": _window_latency(window),
            # CPU time of this process over the window's rounds: wall time well above it
            # means the machine was busy (other processes took the cores)
            "cpu_s": round(cpu, 3),
            "wall_s": round(sum(window), 3),
            "arrangements": _arrangement_stats(soak.worker),
            "python_objects": len(gc.get_objects()) if args.count_objects else None,
        }
        if soak.sink is not None:
            cp["sink_rows"] = soak.sink.rows()
        if args.compacted:
            per = _compacted_updates(soak.worker)
            cp["compacted_updates"] = {"total": sum(per.values()), "per_arrangement": per}
        checkpoints.append(cp)
        lat = cp["latency"]
        tot = cp["arrangements"]["total"]
        log(
            f"[{name}] {changes:>9,} changes  rss {cp['rss_mb']:8.1f} MB  "
            f"held {tot.get('updates', 0):>9,} in {tot.get('batches', 0):>3} batches  "
            f"p50 {lat.get('p50_ms', 0):7.2f}  p99 {lat.get('p99_ms', 0):7.2f}  "
            f"max {lat.get('max_ms', 0):7.2f} ms  "
            f"cpu/wall {cp['cpu_s'] / max(cp['wall_s'], 1e-9):4.2f}  ({elapsed:6.1f} s)",
            quiet=quiet,
        )

    log(f"[{name}] {nodes:,} nodes, {edges:,} edges loaded in {load_s:.2f} s", quiet=quiet)
    checkpoint(0, [], 0.0, 0.0)
    changes = 0
    window: list[float] = []
    window_cpu = 0.0
    all_rounds_ms: list[float] = []
    start = now()
    next_cp = args.every
    while changes < args.changes:
        size = min(args.batch, args.changes - changes, next_cp - changes)
        rem, add = work.round_changes(size)
        cols = (np.concatenate([rem[0], add[0]]), np.concatenate([rem[1], add[1]]))
        diffs = np.concatenate([np.full(size, -1, np.int64), np.ones(size, np.int64)])
        t, c = now(), time.process_time()
        soak.round(cols, diffs)
        dt = now() - t
        window_cpu += time.process_time() - c
        window.append(dt)
        all_rounds_ms.append(round(dt * 1000.0, 4))
        changes += size
        if changes == next_cp or changes == args.changes:
            checkpoint(changes, window, now() - start, window_cpu)
            window, window_cpu = [], 0.0
            next_cp += args.every
    total_s = now() - start

    check: dict[str, Any] = {"checked": False}
    if soak.sink is not None:
        t = now()
        got = soak.answer()
        if name == "degrees":
            ref = reference_histogram(nodes, edges, args.seed, changes)
        else:
            stream = EdgeStream(nodes, args.seed)
            stream.take(changes)
            fs, fd = stream.take(edges)
            ref = reference_bfs(nodes, fs, fd, 0)
        check = {
            "checked": True,
            "matches_reference": got == ref,
            "output_records": len(got),
            "reference_records": len(ref),
            "check_s": round(now() - t, 3),
        }
        if got != ref:
            diff = sorted(k for k in set(got) | set(ref) if got.get(k) != ref.get(k))
            check["first_differences"] = {str(k): [got.get(k), ref.get(k)] for k in diff[:10]}
        log(
            f"[{name}] answer {'matches' if got == ref else 'DIFFERS FROM'} the reference "
            f"({len(ref):,} records)",
            quiet=quiet,
        )
    return {
        "workload": name,
        "nodes": nodes,
        "edges": edges,
        "malloc_tuned": tuned,
        "load_s": round(load_s, 3),
        "rss_mb_at_start": round(rss_start, 2),
        "changes": changes,
        "rounds": len(all_rounds_ms),
        "total_s": round(total_s, 3),
        "changes_per_s": round(changes / total_s, 1) if total_s > 0 else None,
        "peak_rss_mb": round(peak_rss_mb(), 2),
        "checkpoints": checkpoints,
        "round_ms": all_rounds_ms if args.keep_rounds else None,
        "check": check,
    }


# ---------------------------------------------------------------------------------------
# the parent


def bars(res: dict[str, Any], every: int) -> dict[str, Any]:
    """The two targets (memory, latency) for one workload's checkpoints."""
    cps = {cp["changes"]: cp for cp in res["checkpoints"]}
    last = res["checkpoints"][-1]
    first = cps.get(every)
    second = cps.get(2 * every)
    out: dict[str, Any] = {}
    if first is not None and last["changes"] > every:
        r = ratio(last["rss_mb"], first["rss_mb"])
        out["rss"] = {
            "rule": f"RSS after {last['changes']:,} changes <= {RSS_BAR} x RSS after {every:,}",
            "rss_mb_first_window": first["rss_mb"],
            "rss_mb_end": last["rss_mb"],
            "ratio": r,
            "holds": r is not None and r <= RSS_BAR,
            # informational: the same ratio without the interpreter and imports (RSS of
            # the fresh process before the dataflow was built)
            "ratio_above_process_start": ratio(
                last["rss_mb"] - res["rss_mb_at_start"], first["rss_mb"] - res["rss_mb_at_start"]
            ),
        }
    if second is not None and last["changes"] > 2 * every:
        p_second = second["latency"].get("p99_ms")
        p_last = last["latency"].get("p99_ms")
        r = ratio(p_last, p_second)
        out["p99"] = {
            "rule": f"p99 round latency of the last {every:,} changes <= {P99_BAR} x p99 of "
            f"changes {every:,}..{2 * every:,}",
            "p99_ms_second_window": p_second,
            "p99_ms_last_window": p_last,
            "ratio": r,
            "holds": r is not None and r <= P99_BAR,
            # CPU time / wall time over each window's rounds: well below 1 means other
            # processes took the cores during that window and its percentiles are inflated
            "cpu_over_wall_second_window": ratio(second["cpu_s"], second["wall_s"]),
            "cpu_over_wall_last_window": ratio(last["cpu_s"], last["wall_s"]),
        }
    return out


def draw_png(doc: dict[str, Any]) -> Any:
    results = doc["results"]
    names = [n for n in WORKLOADS if n in results]

    def draw(plt: Any) -> None:
        fig, axes = plt.subplots(3, len(names), figsize=(6.5 * len(names), 10), squeeze=False)
        for col, name in enumerate(names):
            res = results[name]
            cps = res["checkpoints"]
            xs = [cp["changes"] for cp in cps]
            rss = [cp["rss_mb"] for cp in cps]
            held = [cp["arrangements"]["total"].get("updates", 0) for cp in cps]
            lat = [cp for cp in cps if cp["latency"].get("rounds")]
            lx = [cp["changes"] for cp in lat]
            title = f"{name}: {res['nodes']:,} nodes / {res['edges']:,} edges"
            ax = axes[0][col]
            ax.plot(xs, rss, marker="o", label="RSS")
            trace_mb = [cp["arrangements"]["total"].get("bytes") for cp in cps]
            if all(b is not None for b in trace_mb):
                ax.plot(
                    xs,
                    [b / 2**20 for b in trace_mb],
                    marker=".",
                    color="tab:purple",
                    label="arrangements' bytes (Worker.stats)",
                )
            ax.set_ylim(bottom=0, top=max(rss) * 1.3)
            ax.set_ylabel("MB")
            ax.set_title(title)
            b = doc["bars"].get(name, {}).get("rss")
            if b:
                ax.axhline(
                    b["rss_mb_first_window"] * RSS_BAR,
                    color="tab:red",
                    ls="--",
                    label=f"bar: {RSS_BAR} x RSS after {doc['parameters']['every']:,}",
                )
            ax.legend(fontsize=8, loc="lower right")
            ax = axes[1][col]
            ax.plot(xs, held, marker="o", color="tab:green", label="held in arrangements")
            comp = [cp.get("compacted_updates", {}).get("total") for cp in cps]
            if all(c is not None for c in comp):
                ax.plot(
                    xs,
                    comp,
                    marker=".",
                    color="tab:olive",
                    label="after full compaction (distinct)",
                )
            outside = [cp["arrangements"]["total"].get("held", 0) for cp in cps]
            if any(outside):
                ax.plot(
                    xs,
                    outside,
                    marker=".",
                    color="tab:brown",
                    label="held by operators outside traces",
                )
            ax.set_ylim(bottom=0, top=max(held) * 1.3 if max(held) else 1)
            ax.set_ylabel("updates")
            ax.legend(fontsize=8, loc="lower right")
            ax = axes[2][col]
            for key, style in (("p50_ms", ":"), ("p90_ms", "--"), ("p99_ms", "-"), ("max_ms", "")):
                ys = [cp["latency"][key] for cp in lat]
                if style:
                    ax.plot(lx, ys, ls=style, marker="o", label=key[:-3])
                else:
                    ax.plot(lx, ys, ls="none", marker="x", color="grey", label="max")
            b = doc["bars"].get(name, {}).get("p99")
            if b:
                ax.axhline(
                    b["p99_ms_second_window"] * P99_BAR,
                    color="tab:red",
                    ls="--",
                    label=f"bar: {P99_BAR} x p99 of window 2",
                )
            ax.set_ylim(bottom=0)
            ax.set_ylabel(
                f"round latency per window (ms), {doc['parameters']['batch']:,} changes/round"
            )
            ax.set_xlabel("changes")
            ax.legend(fontsize=7, loc="lower left", ncol=5)
            for r in range(3):
                axes[r][col].grid(alpha=0.3)
        fig.tight_layout()

    return draw


def worker_argv(args: argparse.Namespace, name: str) -> list[str]:
    argv = [
        "--worker", name,
        "--changes", str(args.changes),
        "--batch", str(args.batch),
        "--every", str(args.every),
        "--seed", str(args.seed),
        "--degrees-nodes", str(args.degrees_nodes),
        "--degrees-edges", str(args.degrees_edges),
        "--bfs-nodes", str(args.bfs_nodes),
        "--bfs-edges", str(args.bfs_edges),
    ]  # fmt: skip
    for flag in (
        "quiet",
        "no_check",
        "no_tune_malloc",
        "keep_rounds",
        "count_objects",
        "compacted",
    ):
        if getattr(args, flag):
            argv.append("--" + flag.replace("_", "-"))
    return argv


def run_parent(args: argparse.Namespace) -> int:
    script = os.path.abspath(__file__)
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    loads = [machine_info()["load_average_1_5_15m"]]
    for name in args.workload:
        log(f"== {name}", quiet=args.quiet)
        try:
            results[name] = run_impl_subprocess(
                script, worker_argv(args, name), timeout=args.timeout
            )
        except BenchmarkError as exc:
            errors[name] = str(exc)
            log(f"!! {name} failed: {exc}", quiet=False)
        loads.append(machine_info()["load_average_1_5_15m"])
    all_bars = {name: bars(res, args.every) for name, res in results.items()}
    wrong = [
        n
        for n, r in results.items()
        if r["check"].get("checked") and not r["check"].get("matches_reference")
    ]
    held = [b["holds"] for wb in all_bars.values() for b in wb.values()]
    doc: dict[str, Any] = {
        "benchmark": "soak",
        "description": (
            "memory and round latency over many changes to a fixed-size graph: "
            "degrees (count_total twice) and bfs; a change removes the oldest "
            "edge and adds a random one"
        ),
        "machine": machine_info(),
        "load_average_before_and_after_each_workload": loads,
        "parameters": {
            "changes": args.changes,
            "batch": args.batch,
            "every": args.every,
            "seed": args.seed,
            "workloads": list(args.workload),
            "degrees": {"nodes": args.degrees_nodes, "edges": args.degrees_edges},
            "bfs": {"nodes": args.bfs_nodes, "edges": args.bfs_edges, "root": 0},
            "notes": [
                "a change = one edge removed (diff -1) + one edge added (diff +1); a round "
                "of B changes is 2B updates at one time",
                "round time: insert_columns + advance_to + step_while until the probe "
                "passes; no capture (a bounded Collect sink keeps the current answer)",
                "checkpoint 0 is right after the initial load; window k's latency covers "
                "the rounds between checkpoints k-1 and k",
                "RSS is the workload subprocess's current RSS (psutil); percentiles are "
                "nearest rank over the window's rounds",
            ],
        },
        "results": results,
        "bars": all_bars,
        "all_bars_hold": bool(held) and all(held) and not errors,
        "correctness": {"all_match": not wrong and not errors, "wrong": wrong},
        "errors": errors,
    }
    emit_json(doc, path=args.json)
    if args.png:
        save_png(args.png, draw_png(doc), quiet=args.quiet)
    for name, wb in all_bars.items():
        for k, b in wb.items():
            log(
                f"{name} {k}: ratio {b['ratio']} -> {'holds' if b['holds'] else 'FAILS'}",
                quiet=args.quiet,
            )
    if wrong:
        log(f"!! WRONG RESULT for {wrong}", quiet=False)
        return 2
    return 1 if errors else 0


# ---------------------------------------------------------------------------------------
# CLI


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="ddflow soak benchmark: memory and latency over many changes; prints JSON.",
    )
    p.add_argument("--changes", type=int, default=1_000_000, help="changes per workload")
    p.add_argument("--batch", type=int, default=1000, help="changes per round (default 1000)")
    p.add_argument(
        "--every",
        type=int,
        default=100_000,
        help="changes between checkpoints of the record (default 100000)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workload", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    p.add_argument("--degrees-nodes", type=int, default=100_000)
    p.add_argument("--degrees-edges", type=int, default=500_000)
    p.add_argument("--bfs-nodes", type=int, default=20_000)
    p.add_argument("--bfs-edges", type=int, default=100_000)
    p.add_argument(
        "--no-check",
        action="store_true",
        help="no output sink and no check against the from-scratch answer",
    )
    p.add_argument(
        "--no-tune-malloc",
        action="store_true",
        help="leave glibc malloc at its defaults (ddflow's worker processes tune it)",
    )
    p.add_argument("--keep-rounds", action="store_true", help="every round's time in the JSON")
    p.add_argument(
        "--count-objects",
        action="store_true",
        help="also record len(gc.get_objects()) at each checkpoint",
    )
    p.add_argument(
        "--compacted",
        action="store_true",
        help="also record the updates the arrangements hold once fully compacted "
        "(a sort of every held update per checkpoint: its temporaries raise "
        "the RSS of later checkpoints, so not for the record run)",
    )
    p.add_argument("--png", metavar="PATH", help="draw a PNG (needs matplotlib)")
    p.add_argument("--json", metavar="PATH", help="also write the JSON to PATH")
    p.add_argument("--timeout", type=float, default=4 * 3600.0, help="per-workload time-out, s")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument(
        "--worker",
        choices=WORKLOADS,
        help="run only this workload in this process and print its JSON on one line",
    )
    args = p.parse_args(argv)
    for opt in (
        "changes",
        "batch",
        "every",
        "degrees_nodes",
        "degrees_edges",
        "bfs_nodes",
        "bfs_edges",
    ):
        if getattr(args, opt) < 1:
            p.error(f"--{opt.replace('_', '-')} must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        emit_json(run_worker(args), compact=True)
        return 0
    return run_parent(args)


if __name__ == "__main__":
    sys.exit(main())
