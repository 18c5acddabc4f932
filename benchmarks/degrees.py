"""Degrees benchmark (DD's examples/degrees.rs): the out-degree distribution of a changing
random graph, with the total-order count.

The dataflow::

    degrees   = edges.map(src).count_total()             # (src, out-degree)
    histogram = degrees.map(count).count_total()         # (out-degree, number of nodes)

runs on a random graph of ``--nodes`` nodes and ``--edges`` edges, loaded in one round,
then ``--rounds`` rounds of ``--batch`` changes each. A change removes one existing edge
and adds one new random edge, as in DD: the edge stream comes from a seeded RNG, and the
removals replay the same stream from a second RNG with the same seed, so they take the
edges in the order they were added and always remove an edge that is present. A round of
``B`` changes is therefore ``2B`` updates (``B`` with diff -1, ``B`` with diff +1), all at
one time.

Implementations (``--impl``, any subset, default all), each run in a fresh subprocess so
its peak RSS is its own:

- ``count_total``: ddflow, vectorized path (``insert_columns`` with numpy columns and
  diffs, ``map(..., vectorized=True)``), ``count_total`` twice.
- ``count``: the same with ``count`` (the operator for partially ordered times).
- ``dict``: plain Python, incremental: dict src -> degree and dict degree -> count,
  updated per record in a Python loop. It is the baseline ddflow must beat.

A ddflow round is: ``insert_columns`` of the round's removals (-1) and additions (+1),
``advance_to(round + 1)``, ``flush``, ``step_while(probe.less_than(time))``; its wall time
covers exactly that. Inputs are prepared before the clock starts, for every impl, in the
impl's natural form (numpy columns for ddflow, Python lists of sources for ``dict``).

Correctness: after the last round every impl reports its final degree distribution (for
ddflow, from a capture of the histogram); the parent checks they all equal one computed
from scratch with numpy over the final edge multiset, and exits non-zero if not.

Output: JSON on stdout (machine info, parameters, per-impl results, ratios); ``--png``
draws per-round times. ``--worker IMPL`` runs one impl in this process and prints its
JSON on one line (what the parent runs in each subprocess; handy under a profiler).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
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
    rate,
    ratio,
    run_impl_subprocess,
    save_png,
    timing_stats_ms,
)

IMPLS = ("count_total", "count", "dict")
Cols = tuple[np.ndarray, np.ndarray]  # (src, dst) columns of a set of edges
DDFLOW_IMPLS = ("count_total", "count")

# ---------------------------------------------------------------------------------------
# the edge stream


class EdgeStream:
    """A deterministic stream of random edges ``(src, dst)`` with ``0 <= src, dst < nodes``.

    Edges are drawn from ``numpy.random.default_rng(seed)`` in fixed blocks of ``BLOCK``
    edges, so the sequence does not depend on how ``take`` calls slice it: two streams
    with the same seed yield the same edges in the same order whatever the take sizes.
    """

    BLOCK = 1 << 16

    def __init__(self, nodes: int, seed: int) -> None:
        self.nodes = nodes
        self.rng = np.random.default_rng(seed)
        self.buf = np.empty((0, 2), dtype=np.int64)
        self.pos = 0
        self.taken = 0

    def take(self, k: int) -> Cols:
        """The next ``k`` edges as two contiguous int64 columns ``(src, dst)``."""
        parts = []
        while k > 0:
            if self.pos == len(self.buf):
                self.buf = self.rng.integers(0, self.nodes, size=(self.BLOCK, 2), dtype=np.int64)
                self.pos = 0
            n = min(k, len(self.buf) - self.pos)
            parts.append(self.buf[self.pos : self.pos + n])
            self.pos += n
            self.taken += n
            k -= n
        if not parts:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        block = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return np.ascontiguousarray(block[:, 0]), np.ascontiguousarray(block[:, 1])


class Workload:
    """The rounds of the benchmark: ``load()`` then ``round_changes(size)`` repeatedly.

    ``adds`` is the stream of added edges (the first ``edges`` of which are the initial
    graph); ``rems`` replays the same stream from the start, so round ``r`` removes edges
    that were added earlier (or in the same round, when a batch exceeds the graph)."""

    def __init__(self, nodes: int, edges: int, seed: int) -> None:
        self.nodes = nodes
        self.edges = edges
        self.adds = EdgeStream(nodes, seed)
        self.rems = EdgeStream(nodes, seed)

    def load(self) -> tuple[np.ndarray, np.ndarray]:
        return self.adds.take(self.edges)

    def round_changes(self, size: int) -> tuple[Cols, Cols]:
        """``size`` changes: (removed edges, added edges)."""
        return self.rems.take(size), self.adds.take(size)


def reference_histogram(nodes: int, edges: int, seed: int, removed: int) -> dict[int, int]:
    """The degree distribution, from scratch, of the edge multiset left after ``removed``
    removals: edges ``removed .. removed + edges - 1`` of the stream (numpy, not timed)."""
    stream = EdgeStream(nodes, seed)
    while removed > 0:  # skip the removed prefix without holding it all in memory
        step = min(removed, 1 << 22)
        stream.take(step)
        removed -= step
    src, _ = stream.take(edges)
    degree = np.bincount(src, minlength=nodes)
    degree = degree[degree > 0]
    values, counts = np.unique(degree, return_counts=True)
    return {int(v): int(c) for v, c in zip(values.tolist(), counts.tolist(), strict=True)}


# ---------------------------------------------------------------------------------------
# implementations: each has load(src, dst) / apply(rem_cols, add_cols) / histogram()


class DictDegrees:
    """Plain-Python incremental degrees: dict src -> out-degree and dict out-degree ->
    number of nodes with it, updated per record in a Python loop.

    Additions are applied before removals so degrees never go negative, even when a
    round removes an edge it also adds. Entries that fall to zero are left in place
    rather than deleted (cheaper per record; both dicts stay bounded by the number of
    nodes and the largest degree) and are skipped when the histogram is read."""

    name = "dict"

    def __init__(self) -> None:
        self.degree: dict[int, int] = {}
        self.hist: dict[int, int] = {}

    @staticmethod
    def prepare(rem: Cols | None, add: Cols) -> Any:
        # The dict baseline's natural input is Python ints; converting is not timed.
        return ([] if rem is None else rem[0].tolist()), add[0].tolist()

    def apply(self, prepared: Any) -> None:
        removed_src, added_src = prepared
        degree = self.degree
        hist = self.hist
        deg_get = degree.get
        hist_get = hist.get
        for s in added_src:
            d = deg_get(s, 0)
            hist[d] = hist_get(d, 0) - 1
            d += 1
            degree[s] = d
            hist[d] = hist_get(d, 0) + 1
        for s in removed_src:
            d = degree[s]
            hist[d] -= 1
            d -= 1
            degree[s] = d
            hist[d] = hist_get(d, 0) + 1

    def histogram(self) -> dict[int, int]:
        return {d: c for d, c in self.hist.items() if d and c}

    def close(self) -> None:
        pass


def _src(cols: Any) -> Any:
    return cols[0]


def _count(kc: Any) -> Any:
    return kc[1]


class DDflowDegrees:
    """ddflow on the vectorized path: one in-process worker, ``insert_columns`` with numpy
    columns and diffs, vectorized maps, ``count_total`` (or ``count``) twice, a probe and a
    capture of the (small) histogram output."""

    def __init__(self, operator: str) -> None:
        import ddflow as dd

        self.name = operator
        self.worker = dd.Worker()
        self.inp, edges = self.worker.new_collection()
        sources = edges.map(_src, vectorized=True)
        if operator == "count_total":
            degrees = sources.count_total()
            histogram = degrees.map(_count, vectorized=True).count_total()
        elif operator == "count":
            degrees = sources.count()
            histogram = degrees.map(_count, vectorized=True).count()
        else:
            raise ValueError(f"unknown ddflow operator {operator!r}")
        self.capture = histogram.capture()
        self.probe = histogram.probe()
        self.time = 0

    @staticmethod
    def prepare(rem: Cols | None, add: Cols) -> Any:
        if rem is None:
            return (add[0], add[1]), np.ones(len(add[0]), dtype=np.int64)
        src = np.concatenate([rem[0], add[0]])
        dst = np.concatenate([rem[1], add[1]])
        diffs = np.concatenate(
            [np.full(len(rem[0]), -1, dtype=np.int64), np.ones(len(add[0]), dtype=np.int64)]
        )
        return (src, dst), diffs

    def apply(self, prepared: Any) -> None:
        cols, diffs = prepared
        inp = self.inp
        inp.insert_columns(cols, diffs=diffs)
        self.time += 1
        inp.advance_to(self.time)
        inp.flush()
        probe = self.probe
        self.worker.step_while(lambda: probe.less_than(inp.time()))

    def histogram(self) -> dict[int, int]:
        """Degree -> count from the captured histogram updates accumulated to now. Each
        record is ``(degree, count)`` with diff 1; anything else is an engine error."""
        accumulated = self.capture.at(self.time)
        out: dict[int, int] = {}
        for record, diff in accumulated.items():
            degree, count = record
            if diff != 1:
                raise BenchmarkError(f"histogram record {record!r} has diff {diff} (expected 1)")
            degree, count = int(degree), int(count)
            if degree in out:
                raise BenchmarkError(f"degree {degree} appears twice in the histogram")
            out[degree] = count
        return out

    def close(self) -> None:
        close = getattr(self.worker, "close", None)
        if close is not None:
            close()


def make_impl(name: str) -> Any:
    if name == "dict":
        return DictDegrees()
    if name in DDFLOW_IMPLS:
        return DDflowDegrees(name)
    raise ValueError(f"unknown impl {name!r}")


# ---------------------------------------------------------------------------------------
# one impl, in this process


def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    """Run one impl: load, ``rounds`` rounds of ``batch`` changes, then ``single_change_rounds``
    rounds of one change; return timings, peak RSS and the final histogram."""
    name = args.worker
    quiet = args.quiet
    rss_start = peak_rss_mb()
    workload = Workload(args.nodes, args.edges, args.seed)
    impl = make_impl(name)
    rss_setup = peak_rss_mb()

    if args.no_gc:
        gc.disable()

    prepared = impl.prepare(None, workload.load())
    t0 = now()
    impl.apply(prepared)
    load_s = now() - t0
    del prepared
    log(f"[{name}] load of {args.edges} edges: {load_s * 1000:.1f} ms", quiet=quiet)
    rss_after_load = peak_rss_mb()

    round_s: list[float] = []
    for r in range(args.rounds):
        prepared = impl.prepare(*workload.round_changes(args.batch))
        t0 = now()
        impl.apply(prepared)
        dt = now() - t0
        round_s.append(dt)
        del prepared
        log(f"[{name}] round {r + 1}/{args.rounds}: {dt * 1000:.2f} ms", quiet=quiet)

    single_s: list[float] = []
    for _ in range(args.single_change_rounds):
        prepared = impl.prepare(*workload.round_changes(1))
        t0 = now()
        impl.apply(prepared)
        single_s.append(now() - t0)
    if single_s:
        med = timing_stats_ms(single_s)["median_ms"]
        log(f"[{name}] {len(single_s)} single-change rounds: median {med:.3f} ms", quiet=quiet)

    if args.no_gc:
        gc.enable()

    t0 = now()
    histogram = impl.histogram()
    histogram_s = now() - t0
    impl.close()

    rounds = timing_stats_ms(round_s)
    median_s = rounds["median_ms"] / 1000 if round_s else 0.0
    result: dict[str, Any] = {
        "impl": name,
        "load_ms": round(load_s * 1000, 3),
        "load_edges_per_s": rate(args.edges, load_s),
        "rounds": rounds,
        "round_ms": [round(s * 1000, 4) for s in round_s],
        "changes_per_s_median": rate(args.batch, median_s),
        "updates_per_s_median": rate(2 * args.batch, median_s),
        "changes_per_s_total": rate(args.batch * len(round_s), sum(round_s)) if round_s else None,
        "single_change_rounds": timing_stats_ms(single_s) if single_s else None,
        "single_change_round_ms": [round(s * 1000, 4) for s in single_s],
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "peak_rss_mb_at_start": round(rss_start, 1),
        "peak_rss_mb_after_setup": round(rss_setup, 1),
        "peak_rss_mb_after_load": round(rss_after_load, 1),
        "final_histogram_read_ms": round(histogram_s * 1000, 3),
        "final_histogram": sorted(histogram.items()),
    }
    return result


# ---------------------------------------------------------------------------------------
# the parent: one subprocess per impl, checks, ratios, JSON, PNG


def worker_argv(args: argparse.Namespace, impl: str) -> list[str]:
    argv = [
        "--worker", impl,
        "--nodes", str(args.nodes),
        "--edges", str(args.edges),
        "--batch", str(args.batch),
        "--rounds", str(args.rounds),
        "--seed", str(args.seed),
        "--single-change-rounds", str(args.single_change_rounds),
    ]  # fmt: skip
    if args.quiet:
        argv.append("--quiet")
    if args.no_gc:
        argv.append("--no-gc")
    return argv


def draw_png(doc: dict[str, Any]) -> Any:
    params = doc["parameters"]
    results = doc["results"]

    def draw(plt: Any) -> None:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
        for name, res in results.items():
            if "round_ms" in res:
                xs = list(range(1, len(res["round_ms"]) + 1))
                ax1.plot(xs, res["round_ms"], marker="o", label=name)
        ax1.xaxis.get_major_locator().set_params(integer=True)
        ax1.set_xlabel("round")
        ax1.set_ylabel("wall time per round (ms)")
        ax1.set_title(
            f"degrees {params['nodes']:,} nodes / {params['edges']:,} edges, "
            f"{params['batch']:,} changes per round"
        )
        ax1.set_ylim(bottom=0)
        ax1.legend()
        ax1.grid(alpha=0.3)
        names = [n for n in results if "rounds" in results[n]]
        medians = [results[n]["rounds"].get("median_ms", 0) for n in names]
        p90s = [results[n]["rounds"].get("p90_ms", 0) for n in names]
        xs = range(len(names))
        ax2.bar([x - 0.2 for x in xs], medians, width=0.4, label="median")
        ax2.bar([x + 0.2 for x in xs], p90s, width=0.4, label="p90")
        ax2.set_xticks(list(xs))
        ax2.set_xticklabels([f"{n}\n{results[n].get('peak_rss_mb', 0):.0f} MB peak" for n in names])
        ax2.set_ylabel("ms per round")
        ax2.set_title("round time (lower is better)")
        ax2.legend()
        ax2.grid(axis="y", alpha=0.3)
        fig.tight_layout()

    return draw


def run_parent(args: argparse.Namespace) -> int:
    impls = list(dict.fromkeys(args.impl))
    script = os.path.abspath(__file__)
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name in impls:
        log(f"== {name}", quiet=args.quiet)
        try:
            results[name] = run_impl_subprocess(
                script, worker_argv(args, name), timeout=args.timeout
            )
        except BenchmarkError as exc:
            errors[name] = str(exc)
            log(f"!! {name} failed: {exc}", quiet=False)

    # correctness: every impl's final histogram equals the from-scratch one
    removed = args.batch * args.rounds + args.single_change_rounds
    expected = reference_histogram(args.nodes, args.edges, args.seed, removed)
    mismatches: dict[str, Any] = {}
    for name, res in results.items():
        got = {int(d): int(c) for d, c in res.pop("final_histogram")}
        res["histogram_matches_reference"] = got == expected
        if got != expected:
            diff_keys = sorted(set(got) | set(expected))
            mismatches[name] = {
                str(k): {"got": got.get(k), "expected": expected.get(k)}
                for k in diff_keys
                if got.get(k) != expected.get(k)
            }

    # same-run throughput ratios against the dict baseline
    ratios: dict[str, Any] = {}
    if "dict" in results:
        base = results["dict"]
        for name in DDFLOW_IMPLS:
            if name in results:
                res = results[name]
                ratios[name] = {
                    "throughput_vs_dict_median": ratio(
                        base["rounds"].get("median_ms"), res["rounds"].get("median_ms")
                    ),
                    "throughput_vs_dict_total": ratio(
                        base["rounds"].get("total_ms"), res["rounds"].get("total_ms")
                    ),
                    "load_speedup_vs_dict": ratio(base["load_ms"], res["load_ms"]),
                }
                if base.get("single_change_rounds") and res.get("single_change_rounds"):
                    ratios[name]["single_change_speedup_vs_dict_median"] = ratio(
                        base["single_change_rounds"]["median_ms"],
                        res["single_change_rounds"]["median_ms"],
                    )

    doc: dict[str, Any] = {
        "benchmark": "degrees",
        "description": (
            "out-degree distribution of a changing random graph: "
            "edges.map(src).count_total().map(count).count_total(); "
            "a change removes the oldest edge and adds a new random one"
        ),
        "machine": machine_info(),
        "parameters": {
            "nodes": args.nodes,
            "edges": args.edges,
            "batch": args.batch,
            "rounds": args.rounds,
            "seed": args.seed,
            "single_change_rounds": args.single_change_rounds,
            "impls": impls,
            "updates_per_round": 2 * args.batch,
            "gc_disabled_while_timing": args.no_gc,
            "notes": [
                "a change = one edge removed (diff -1) + one edge added (diff +1)",
                "round times cover ingest + advance_to + flush + step_while until the probe "
                "passes (ddflow) or the per-record dict loop (dict); input preparation is "
                "not timed for any impl",
                "p90 is the nearest-rank percentile; peak RSS is ru_maxrss of the impl's "
                "own subprocess",
            ],
        },
        "results": results,
        "ratios": ratios,
        "correctness": {
            "reference": "numpy bincount over the final edge multiset",
            "reference_histogram_size": len(expected),
            "all_match": not mismatches and not errors,
            "mismatches": mismatches,
        },
        "errors": errors,
    }
    emit_json(doc, path=args.json)
    if args.png:
        save_png(args.png, draw_png(doc), quiet=args.quiet)
    if mismatches:
        wrong = sorted(mismatches)
        log(f"!! WRONG RESULT: final degree distribution differs for {wrong}", quiet=False)
        return 2
    if errors:
        return 1
    return 0


# ---------------------------------------------------------------------------------------
# CLI


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="ddflow degrees benchmark: out-degree distribution of a "
        "changing random graph; prints JSON.",
    )
    p.add_argument("--nodes", type=int, default=10_000, help="number of nodes (default 10000)")
    p.add_argument("--edges", type=int, default=50_000, help="number of edges (default 50000)")
    p.add_argument("--batch", type=int, default=100_000, help="changes per round (default 100000)")
    p.add_argument("--rounds", type=int, default=10, help="timed rounds (default 10)")
    p.add_argument("--seed", type=int, default=0, help="RNG seed of the edge stream (default 0)")
    p.add_argument(
        "--impl",
        nargs="+",
        choices=IMPLS,
        default=list(IMPLS),
        help="implementations to run (default: all)",
    )
    p.add_argument(
        "--single-change-rounds",
        type=int,
        default=0,
        metavar="K",
        help="after the rounds, also time K rounds of one change each (default 0)",
    )
    p.add_argument("--png", metavar="PATH", help="draw a PNG (needs matplotlib)")
    p.add_argument("--json", metavar="PATH", help="also write the JSON to PATH")
    p.add_argument("--timeout", type=float, default=3600.0, help="per-impl time-out, seconds")
    p.add_argument("--no-gc", action="store_true", help="disable Python's gc while timing")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument(
        "--worker",
        choices=IMPLS,
        help="run only this impl in this process and print its JSON on one line",
    )
    args = p.parse_args(argv)
    for opt in ("nodes", "edges", "batch"):
        if getattr(args, opt) < 1:
            p.error(f"--{opt} must be at least 1")
    if args.rounds < 0 or args.single_change_rounds < 0:
        p.error("--rounds and --single-change-rounds must be >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        result = run_worker(args)
        emit_json(result, compact=True)
        return 0
    return run_parent(args)


if __name__ == "__main__":
    sys.exit(main())
