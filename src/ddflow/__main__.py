"""The ``ddflow`` command line: runs the example jobs.

``ddflow q1`` (the default) is the main job: TPC-H Q1 maintained incrementally on Spark in
local mode. ``lineitem`` is generated with ``tpchgen-cli`` (once, then cached), read with
Spark and streamed in batches of rows: every row inserted, batch by batch, then a slice of
the oldest rows deleted, as TPC-H's refresh functions do. Two Spark barrier tasks run the
dataflow (``ddflow.spark.run_on_spark``); the answer is checked against Spark SQL's on the
same data, then the result table and the throughput are printed. Needs the ``spark`` and
``tpch`` extras (``scripts/setup`` installs both).

``ddflow degrees`` runs the degrees dataflow in-process: the out-degree distribution of a
random graph (two total-order counts), printed as it changes while edges are replaced.

Numeric arguments are checked up front: a bad one is a usage error (exit status 2).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

__all__ = ["main"]


def degrees(nodes: int, edges: int, batch: int, rounds: int, seed: int) -> None:
    import ddflow as dd

    rng = np.random.default_rng(seed)
    src = rng.integers(0, nodes, edges + batch * rounds)
    dst = rng.integers(0, nodes, edges + batch * rounds)
    with dd.Worker() as worker:
        inp, graph = worker.new_collection()
        hist = (
            graph.map(lambda e: e[0], vectorized=True)
            .count_total()
            .map(lambda kc: kc[1], vectorized=True)
            .count_total()
        )
        out = hist.capture()
        probe = hist.probe()

        def settle() -> float:
            t0 = time.perf_counter()
            worker.step_while(lambda: probe.less_than(inp.time()))
            return time.perf_counter() - t0

        inp.insert_columns((src[:edges], dst[:edges]))
        inp.advance_to(1)
        secs = settle()
        print(f"loaded {edges} edges on {nodes} nodes in {secs * 1e3:.1f} ms")
        _show(out.at(0))
        for r in range(rounds):
            lo, hi = edges + r * batch, edges + (r + 1) * batch
            old = slice(r * batch, (r + 1) * batch)
            inp.insert_columns((src[lo:hi], dst[lo:hi]))
            inp.insert_columns((src[old], dst[old]), diffs=-np.ones(batch, dtype=np.int64))
            inp.advance_to(r + 2)
            secs = settle()
            changes = [(d, c, t, diff) for ((d, c), t, diff) in out.updates() if t == r + 1]
            print(
                f"round {r + 1}: {batch} edges replaced in {secs * 1e3:.1f} ms, "
                f"{len(changes)} changes to the distribution"
            )
        _show(out.at(rounds))


def _show(dist: dict) -> None:
    rows = sorted((deg, cnt) for (deg, cnt), d in dist.items() if d)
    print(
        "  degree distribution (degree: nodes): "
        + ", ".join(f"{deg}: {cnt}" for deg, cnt in rows[:12])
        + (" ..." if len(rows) > 12 else "")
    )


@contextlib.contextmanager
def working(what: str, every: float = 10.0, write: Callable[[str], Any] = print) -> Iterator[None]:
    """Says ``what`` is being done, then every ``every`` seconds that it still is, then how
    long it took: progress for steps that print nothing themselves (a generator, a SQL
    query). Lines go to stdout, flushed at once."""
    t0 = time.perf_counter()
    done = threading.Event()
    write(f"{what} ...")
    sys.stdout.flush()

    def beat() -> None:
        while not done.wait(every):
            write(f"  ... still {what.split(' (')[0]}: {time.perf_counter() - t0:.0f} s")
            sys.stdout.flush()

    ticker = threading.Thread(target=beat, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
    write(f"  done in {time.perf_counter() - t0:.1f} s")
    sys.stdout.flush()


def q1_job(
    sf: float, batch: int, delete_fraction: float, workers: int, check: bool, spark: Any = None
) -> dict[str, Any]:
    """Run the Q1 job; returns its figures (``ok`` is False if the check found differences).
    Uses ``spark`` if given (and leaves it running), else starts and stops a local one."""
    from pyspark.sql import functions as F

    from ddflow.spark import local_session, run_on_spark
    from ddflow.tpch.data import cached_path, generate, lineitem_path, lineitem_q1
    from ddflow.tpch.q1 import (
        Q1_COLUMNS,
        format_q1,
        q1,
        q1_answer,
        q1_mismatches,
        q1_reference_spark,
    )

    path = cached_path(sf, "lineitem_q1.parquet")
    if path.is_file():
        print(f"lineitem at scale factor {sf:g}: {path} (cached)", flush=True)
    else:
        if not cached_path(sf, "lineitem.parquet").is_file():
            with working(
                f"generating lineitem at scale factor {sf:g} with tpchgen-cli "
                f"(once: it is cached in {path.parent})"
            ):
                generate(sf)
        with working("converting lineitem to exact int64 columns (once)"):
            path = lineitem_q1(sf)
        print(f"lineitem at scale factor {sf:g}: {path}", flush=True)
    own = spark is None
    if own:
        with working("starting Spark in local mode"):
            spark = local_session(max(2, workers))
    print(f"Spark {spark.version} in local mode", flush=True)
    with working("reading lineitem with Spark"):
        rows_df = spark.read.parquet(str(path))
        n = rows_df.count()
    inserts = -(-n // batch)
    deleted = int(n * delete_fraction)
    cols = list(Q1_COLUMNS[1:])
    ins = rows_df.select(
        *cols,
        (F.col("row") / batch).cast("bigint").alias("time"),
        F.lit(1).cast("bigint").alias("diff"),
    )
    dels = rows_df.where(F.col("row") < deleted).select(
        *cols,
        (F.lit(inserts) + (F.col("row") / batch).cast("bigint")).alias("time"),
        F.lit(-1).cast("bigint").alias("diff"),
    )
    changes = ins.unionByName(dels)
    rounds = inserts + -(-deleted // batch)
    print(
        f"streaming {n} insertions then {deleted} deletions in batches of {batch} rows "
        f"({rounds} rounds) through ddflow on {workers} Spark workers",
        flush=True,
    )

    def build(inputs: dict) -> dict:
        return {"q1": q1(inputs["lineitem"])}

    t0 = time.perf_counter()
    with working(
        f"running the dataflow on {workers} Spark workers (each loads its share of "
        f"the changes, then the rounds run; worker 0 reports rounds on stderr)"
    ):
        result = run_on_spark(
            spark,
            build,
            {"lineitem": changes},
            workers=workers,
            columns={"lineitem": cols},
            progress=2.0,
        )
    wall = time.perf_counter() - t0
    out = result.job["q1"]
    incremental = sum(result.round_seconds)
    final = q1_answer(out.at(rounds - 1))
    print()
    print(format_q1(final))
    print()
    print(
        f"incremental part: {incremental:.2f} s for {n + deleted} changes in {rounds} rounds "
        f"({(n + deleted) / incremental:,.0f} changes/s; median round "
        f"{1e3 * sorted(result.round_seconds)[len(result.round_seconds) // 2]:.2f} ms); "
        f"whole Spark job {wall:.1f} s",
        flush=True,
    )
    figures: dict[str, Any] = {
        "sf": sf,
        "batch": batch,
        "rows": n,
        "deleted": deleted,
        "rounds": rounds,
        "workers": workers,
        "incremental_s": round(incremental, 3),
        "round_ms_median": round(1e3 * sorted(result.round_seconds)[rounds // 2], 3),
        "changes_per_s": round((n + deleted) / incremental),
        "spark_job_s": round(wall, 2),
        "ok": True,
    }
    if not check:
        if own:
            spark.stop()
        return figures
    t0 = time.perf_counter()
    with working(
        "checking against Spark SQL on the same rows (Q1 over the raw lineitem, "
        "without the deleted rows)"
    ):
        want = q1_reference_spark(spark, lineitem_path(sf), deleted_row_ranges=deleted)
    bad = q1_mismatches(final, want)
    print(
        f"checked against Spark SQL on the same rows ({time.perf_counter() - t0:.1f} s): "
        + ("equal" if not bad else "DIFFERENT"),
        flush=True,
    )
    for line in bad:
        print("  " + line)
    if own:
        spark.stop()
    figures["checked_against_spark_sql"] = not bad
    figures["ok"] = not bad
    return figures


def _int_at_least(lo: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo}, got {v}")
        return v

    parse.__name__ = f"int >= {lo}"
    return parse


def _float_in(lo: float, hi: float, *, lo_open: bool, hi_open: bool) -> Callable[[str], float]:
    lo_text = f"{'>' if lo_open else '>='} {lo:g}"
    hi_text = "" if math.isinf(hi) else f" and {'<' if hi_open else '<='} {hi:g}"

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        ok = (
            math.isfinite(v)
            and (v > lo if lo_open else v >= lo)
            and (v < hi if hi_open else v <= hi)
        )
        if not ok:
            raise argparse.ArgumentTypeError(f"must be {lo_text}{hi_text}, got {text}")
        return v

    parse.__name__ = f"number {lo_text}{hi_text}"
    return parse


def _missing_spark() -> str | None:
    """Why the Spark job cannot run here (and what to do), or None if it can."""
    try:
        import pyspark  # noqa: F401 - only checking that it is installed
    except ImportError:
        return (
            f"the q1 job runs on Spark and pyspark is not installed in this environment "
            f"({sys.executable}). Install ddflow's spark and tpch extras: from a ddflow "
            f"clone run `scripts/setup`, or `{sys.executable} -m pip install -e "
            f"'.[spark,tpch]'` (installed package: `pip install 'ddflow[spark,tpch]'`)."
        )
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ddflow", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="job")
    q = sub.add_parser("q1", help="TPC-H Q1 maintained incrementally on Spark (the default)")
    p = sub.add_parser("degrees", help="the degree distribution of a changing graph")
    q.add_argument(
        "--sf",
        type=_float_in(0, math.inf, lo_open=True, hi_open=True),
        default=1.0,
        help="TPC-H scale factor, > 0 (default 1)",
    )
    q.add_argument(
        "--batch",
        type=_int_at_least(1),
        default=10_000,
        help="rows per batch, >= 1 (default 10000)",
    )
    q.add_argument(
        "--delete-fraction",
        type=_float_in(0, 1, lo_open=False, hi_open=False),
        default=0.01,
        help="share of the oldest rows deleted after the inserts, 0 to 1 (default 0.01)",
    )
    q.add_argument(
        "--workers", type=_int_at_least(1), default=2, help="Spark workers, >= 1 (default 2)"
    )
    q.add_argument("--no-check", action="store_true", help="skip the Spark SQL check")
    p.add_argument(
        "--nodes", type=_int_at_least(1), default=10_000, help="nodes, >= 1 (default 10000)"
    )
    p.add_argument(
        "--edges", type=_int_at_least(1), default=50_000, help="edges, >= 1 (default 50000)"
    )
    p.add_argument(
        "--batch",
        type=_int_at_least(1),
        default=10_000,
        help="edges replaced per round, 1 to --edges (default 10000)",
    )
    p.add_argument(
        "--rounds",
        type=_int_at_least(0),
        default=5,
        help="rounds of replacements, >= 0 (default 5)",
    )
    p.add_argument("--seed", type=_int_at_least(0), default=0, help="random seed, >= 0 (default 0)")
    args = parser.parse_args(argv)
    if args.job == "degrees":
        if args.batch > args.edges:
            p.error(
                f"argument --batch: at most --edges ({args.edges}) edges can be replaced "
                f"per round, got {args.batch}"
            )
        degrees(args.nodes, args.edges, args.batch, args.rounds, args.seed)
        return 0
    if args.job is None:
        args = parser.parse_args(["q1"])
    why = _missing_spark()
    if why is not None:
        print(f"ddflow: {why}", file=sys.stderr)
        return 1
    from ddflow.tools import ToolNotFoundError

    try:
        figures = q1_job(args.sf, args.batch, args.delete_fraction, args.workers, not args.no_check)
    except ToolNotFoundError as e:
        print(f"ddflow: {e}", file=sys.stderr)
        return 1
    return 0 if figures["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
