"""TPC-H queries maintained incrementally over their change streams, with baselines.

Usage::

    python benchmarks/tpch.py --queries 1,13 --sf 1 --batches 1000,10000,100000 \\
        --json benchmarks/results/tpch_sf1.json --png benchmarks/results/tpch_sf1.png

Each query's stream (``ddflow.tpch.stream``: its tables inserted, then RF1 and RF2) runs
through one in-process worker at every batch size; the figure is the time to feed and
compute the whole stream (data generation and reading the change log are excluded), the
median of ``--repeat`` runs. ``--window`` is how many rows of input may run ahead of the
computation (``0``: every batch is computed before the next is fed); every batch keeps its
own time either way, so the output holds the answer after every batch.

Baselines, in the same run:

- ``dict``: a dict-per-record Python implementation of the query over the same events in
  the same batches, holding the answer after every batch (Q1, Q6 and Q13, where a plain
  dict maintains the answer);
- ``duckdb``: recomputing the query from scratch with DuckDB after each batch of
  ``--duckdb-batch`` rows. Running it after all of them at SF 1 takes hours over the 22
  queries, so the total is *estimated*: DuckDB is timed after ``--duckdb-samples`` batches
  spread over the stream and the per-batch time interpolated over every batch (the JSON
  says so, with the sampled times);
- ``pathway``: Q1 in Pathway over the same stream when ``pathway`` is installed (the
  ``bench`` extra).

``--check`` compares each final answer with DuckDB's. Prints one JSON document.

``--sql`` runs each query from its SQL text through ``ddflow.sql`` instead (see
``tpch_sql.py``) beside its hand-written dataflow, at the first of ``--batches``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import emit_json, log, machine_info, median, save_png  # noqa: E402
from ddflow.tpch.queries import QUERIES  # noqa: E402
from ddflow.tpch.run import duckdb_answer, mismatches, run_query  # noqa: E402
from ddflow.tpch.stream import Stream, make_stream  # noqa: E402
from ddflow.tpch.tables import Tables, date_days, load_tables  # noqa: E402


class Progress:
    """A one-line progress bar on stderr: ``[#####.....] 12/40 label (eta 1m10s)``."""

    def __init__(self, total: int, quiet: bool = False) -> None:
        self.total, self.done, self.quiet = max(total, 1), 0, quiet
        self.t0 = time.perf_counter()

    def step(self, label: str, n: int = 1) -> None:
        self.done += n
        if self.quiet:
            return
        frac = min(self.done / self.total, 1.0)
        spent = time.perf_counter() - self.t0
        eta = spent / frac - spent if frac > 0 else 0.0
        bar = "#" * int(30 * frac) + "." * (30 - int(30 * frac))
        sys.stderr.write(
            f"\r[{bar}] {self.done}/{self.total} {label[:40]:40s} "
            f"eta {int(eta) // 60}m{int(eta) % 60:02d}s"
        )
        sys.stderr.flush()
        if self.done >= self.total:
            sys.stderr.write("\n")


# --- dict-per-record baselines ------------------------------------------------------------


def dict_q1(data: Tables, s: Stream) -> float:
    """Q1 with a dict of group sums updated record by record."""
    return _dict_q1(data, s)[0]


def _dict_q1(data: Tables, s: Stream) -> tuple[float, dict[tuple[int, int], list[int]]]:
    cols = data.columns["lineitem"]
    names = (
        "l_returnflag",
        "l_linestatus",
        "l_quantity",
        "l_extendedprice",
        "l_discount",
        "l_tax",
        "l_shipdate",
    )
    rows, diffs, times = s.events("lineitem")
    feed = _batches(rows, diffs, times, [cols[c] for c in names])
    cutoff = date_days("1998-09-02")
    groups: dict[tuple[int, int], list[int]] = {}
    t0 = time.perf_counter()
    for recs in feed:
        for flag, status, qty, price, disc, tax, ship, d in recs:
            if ship > cutoff:
                continue
            g = groups.get((flag, status))
            if g is None:
                g = groups[(flag, status)] = [0, 0, 0, 0, 0, 0]
            dp = price * (100 - disc)
            g[0] += d
            g[1] += d * qty
            g[2] += d * price
            g[3] += d * dp
            g[4] += d * dp * (100 + tax)
            g[5] += d * disc
        for k in [k for k, g in groups.items() if g[0] == 0]:
            del groups[k]
    return time.perf_counter() - t0, groups


def dict_q6(data: Tables, s: Stream) -> float:
    cols = data.columns["lineitem"]
    rows, diffs, times = s.events("lineitem")
    feed = _batches(
        rows,
        diffs,
        times,
        [cols[c] for c in ("l_quantity", "l_extendedprice", "l_discount", "l_shipdate")],
    )
    lo, hi = date_days("1994-01-01"), date_days("1995-01-01")
    total = 0
    t0 = time.perf_counter()
    for recs in feed:
        for qty, price, disc, ship, d in recs:
            if lo <= ship < hi and 5 <= disc <= 7 and qty < 2400:
                total += d * price * disc
    return time.perf_counter() - t0


def dict_q13(data: Tables, s: Stream) -> float:
    """Q13 with a dict of orders per customer and a histogram, both updated per record."""
    from ddflow.tpch.queries import _not_special_requests

    plain = data.lookup("o_comment", _not_special_requests)
    o_rows, o_diffs, o_times = s.events("orders")
    c_rows, c_diffs, c_times = s.events("customer")
    ocols = data.columns["orders"]
    events = sorted(
        [(int(t), 0, int(r), int(d)) for r, d, t in zip(c_rows, c_diffs, c_times, strict=False)]
        + [(int(t), 1, int(r), int(d)) for r, d, t in zip(o_rows, o_diffs, o_times, strict=False)]
    )
    cust = data.columns["customer"]["c_custkey"].tolist()
    okey_cust = ocols["o_custkey"].tolist()
    ok = plain[ocols["o_comment"]].tolist()
    orders_of: dict[int, int] = {}
    known: set[int] = set()
    hist: dict[int, int] = {}

    def bump(c: int, delta: int) -> None:
        hist[c] = hist.get(c, 0) + delta
        if hist[c] == 0:
            del hist[c]

    t0 = time.perf_counter()
    for _t, kind, r, d in events:
        if kind == 0:
            c = cust[r]
            n = orders_of.get(c, 0)
            bump(n, d)
            if d > 0:
                known.add(c)
            else:
                known.discard(c)
        elif ok[r]:
            c = okey_cust[r]
            n = orders_of.get(c, 0)
            if c in known:
                bump(n, -1)
                bump(n + d, 1)
            orders_of[c] = n + d
    return time.perf_counter() - t0


def _batches(
    rows: np.ndarray, diffs: np.ndarray, times: np.ndarray, cols: list[np.ndarray]
) -> list[list[tuple[int, ...]]]:
    """Per batch, the records as Python tuples (with the diff last), read before timing."""
    recs = list(zip(*[c[rows].tolist() for c in cols], diffs.tolist(), strict=True))
    bounds = np.flatnonzero(np.diff(times)) + 1
    out, lo = [], 0
    for hi in [*bounds.tolist(), len(recs)]:
        out.append(recs[lo:hi])
        lo = hi
    return out


DICT_BASELINES = {1: dict_q1, 6: dict_q6, 13: dict_q13}


# --- DuckDB recomputation ---------------------------------------------------------------------


def duckdb_recompute(
    n: int, data: Tables, batch: int, samples: int, refresh: float
) -> dict[str, Any]:
    """DuckDB recomputing ``q<n>`` after each batch of ``batch`` rows, estimated from
    ``samples`` timed batches (median of 3 runs each) spread over the stream."""
    import duckdb

    s = make_stream(data, tuple(QUERIES[n].tables), batch=batch, refresh=refresh)
    picks = sorted(set(np.linspace(0, s.rounds - 1, min(samples, s.rounds)).astype(int)))
    sql = QUERIES[n].sql(data)
    measured = []
    import pyarrow.parquet as pq

    from ddflow.tpch.run import _raw

    with duckdb.connect() as con:
        for t in picks:
            for table in QUERIES[n].tables:
                raw = _raw(data, table, pq)
                con.register(table, raw.filter(s.present(table, t, raw.num_rows)))
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                con.execute(sql).fetchall()
                runs.append(time.perf_counter() - t0)
            measured.append(median(runs))
            for table in QUERIES[n].tables:
                con.unregister(table)
    est = np.interp(np.arange(s.rounds), picks, measured)
    return {
        "batch": batch,
        "rounds": s.rounds,
        "estimated_total_s": round(float(est.sum()), 3),
        "sampled_batches": [int(p) for p in picks],
        "sampled_s": [round(x, 5) for x in measured],
        "estimated": True,
    }


# --- Pathway ------------------------------------------------------------------------------


def pathway_q1(data: Tables, s: Stream) -> float | None:
    """Q1 in Pathway over the same line-item events (None when pathway is missing)."""
    try:
        import pathway as pw
    except ImportError:
        return None
    import pandas as pd

    cols = data.columns["lineitem"]
    rows, diffs, times = s.events("lineitem")
    cutoff = date_days("1998-09-02")
    frame = pd.DataFrame(
        {
            "flag": cols["l_returnflag"][rows],
            "status": cols["l_linestatus"][rows],
            "qty": cols["l_quantity"][rows],
            "price": cols["l_extendedprice"][rows],
            "disc": cols["l_discount"][rows],
            "tax": cols["l_tax"][rows],
            "ship": cols["l_shipdate"][rows],
            "__time__": 2 * (times + 1),
            "__diff__": diffs,
        }
    )
    t = pw.debug.table_from_pandas(frame, id_from=None)
    f = t.filter(t.ship <= cutoff)
    t = f.select(
        f.flag,
        f.status,
        f.qty,
        f.price,
        f.disc,
        dp=f.price * (100 - f.disc),
        ch=f.price * (100 - f.disc) * (100 + f.tax),
    )
    res = t.groupby(t.flag, t.status).reduce(
        t.flag,
        t.status,
        n=pw.reducers.count(),
        q=pw.reducers.sum(t.qty),
        p=pw.reducers.sum(t.price),
        dp=pw.reducers.sum(t.dp),
        ch=pw.reducers.sum(t.ch),
        d=pw.reducers.sum(t.disc),
    )
    t0 = time.perf_counter()
    got = pw.debug.table_to_pandas(res)
    secs = time.perf_counter() - t0
    # Pathway's final answer must be Q1's (the dict baseline's exact sums).
    want = _dict_q1(data, s)[1]
    have = {
        (int(r.flag), int(r.status)): [int(r.n), int(r.q), int(r.p), int(r.dp), int(r.ch), int(r.d)]
        for r in got.itertuples()
    }
    if have != want:
        raise AssertionError(f"pathway's Q1 differs: {have} != {want}")
    return secs


# --- main --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--queries", default="all", help="comma-separated numbers or 'all'")
    p.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1)")
    p.add_argument("--batches", default="1000,10000,100000", help="batch sizes in rows")
    p.add_argument(
        "--window",
        type=int,
        default=100_000,
        help="rows of input allowed ahead of the computation (0: none)",
    )
    p.add_argument(
        "--refresh",
        type=float,
        default=0.001,
        help="fraction of orders inserted by RF1 and deleted by RF2",
    )
    p.add_argument("--repeat", type=int, default=1, help="runs per configuration (median)")
    p.add_argument(
        "--baselines",
        default="dict,duckdb,pathway",
        help="comma-separated: dict, duckdb, pathway (or 'none')",
    )
    p.add_argument("--duckdb-batch", type=int, default=10_000)
    p.add_argument("--duckdb-samples", type=int, default=8)
    p.add_argument("--check", action="store_true", help="compare final answers with DuckDB")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--png", metavar="PATH")
    p.add_argument("--replot", metavar="JSON", help="only redraw --png from an earlier run's JSON")
    p.add_argument("--quiet", action="store_true")
    p.add_argument(
        "--sql",
        action="store_true",
        help="time the queries from SQL text (ddflow.sql) against the hand-written "
        "dataflows (tpch_sql.py; use --window 0: a SQL commit is one batch)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.replot:
        if not args.png:
            raise SystemExit("--replot needs --png")
        replot(args.replot, args.png)
        return {}
    if args.sql:
        from tpch_sql import sql_benchmark

        return sql_benchmark(args)
    queries = (
        sorted(QUERIES) if args.queries == "all" else [int(x) for x in args.queries.split(",")]
    )
    batches = [int(x) for x in args.batches.split(",")]
    baselines = set() if args.baselines == "none" else set(args.baselines.split(","))
    t0 = time.perf_counter()
    data = load_tables(args.sf)
    log(f"tables at SF {args.sf:g} loaded in {time.perf_counter() - t0:.1f} s", quiet=args.quiet)
    steps = (
        len(queries) * (len(batches) * args.repeat + ("duckdb" in baselines) + args.check)
        + sum(1 for q in queries if q in DICT_BASELINES and "dict" in baselines)
        + ("pathway" in baselines and 1 in queries)
    )
    bar = Progress(steps, args.quiet)
    results = []
    for n in queries:
        entry: dict[str, Any] = {"query": n, "runs": []}
        last = None
        for b in batches:
            secs = []
            for _ in range(args.repeat):
                last = run_query(n, data, batch=b, window_rows=args.window, refresh=args.refresh)
                secs.append(last.seconds)
                bar.step(f"q{n} batch {b}")
            entry["runs"].append(
                {
                    "batch": b,
                    "rounds": last.stream.rounds,
                    "events": last.events,
                    "seconds": [round(x, 4) for x in secs],
                    "median_s": round(median(secs), 4),
                    "events_per_s": round(last.events / median(secs)),
                }
            )
        entry["events"] = last.events
        if args.check:
            t = last.stream.rounds - 1
            bad = mismatches(last.answer(data, t), duckdb_answer(n, data, last.stream, t))
            entry["check"] = bad if bad else "equal to DuckDB"
            bar.step(f"q{n} check")
        if "dict" in baselines and n in DICT_BASELINES:
            s = make_stream(data, tuple(QUERIES[n].tables), batch=batches[0], refresh=args.refresh)
            secs = DICT_BASELINES[n](data, s)
            entry["dict"] = {
                "batch": batches[0],
                "seconds": round(secs, 4),
                "events_per_s": round(len(s) / secs),
            }
            bar.step(f"q{n} dict baseline")
        if "pathway" in baselines and n == 1:
            s = make_stream(data, tuple(QUERIES[n].tables), batch=batches[0], refresh=args.refresh)
            secs = pathway_q1(data, s)
            entry["pathway"] = (
                None
                if secs is None
                else {
                    "batch": batches[0],
                    "seconds": round(secs, 3),
                    "events_per_s": round(len(s) / secs),
                }
            )
            bar.step("q1 pathway")
        if "duckdb" in baselines:
            entry["duckdb_recompute"] = duckdb_recompute(
                n, data, args.duckdb_batch, args.duckdb_samples, args.refresh
            )
            bar.step(f"q{n} duckdb")
        best = min(r["median_s"] for r in entry["runs"])
        worst = max(r["median_s"] for r in entry["runs"])
        if "dict" in entry:
            entry["speedup_vs_dict"] = round(entry["dict"]["seconds"] / worst, 2)
        if "duckdb_recompute" in entry:
            entry["speedup_vs_duckdb_recompute"] = round(
                entry["duckdb_recompute"]["estimated_total_s"] / worst, 2
            )
        entry["best_s"], entry["worst_s"] = best, worst
        results.append(entry)
    doc = {
        "benchmark": "tpch",
        "machine": machine_info(("ddflow", "duckdb", "pathway")),
        "params": vars(args),
        "results": results,
    }
    emit_json(doc, path=args.json)
    if args.png:
        save_png(args.png, lambda plt: draw(plt, doc), quiet=args.quiet)
    return doc


def draw(plt: Any, doc: dict[str, Any]) -> None:
    res = doc["results"]
    batches = [r["batch"] for r in res[0]["runs"]]
    series: list[tuple[str, list[float]]] = [
        (f"ddflow, batch {b}", [r["events"] / r["runs"][i]["median_s"] for r in res])
        for i, b in enumerate(batches)
    ]
    series.append(
        (
            f"DuckDB recompute per {doc['params']['duckdb_batch']} rows (est.)",
            [
                r["events"] / r["duckdb_recompute"]["estimated_total_s"]
                if r.get("duckdb_recompute")
                else 0
                for r in res
            ],
        )
    )
    series.append(
        ("dict per record", [r["dict"]["events_per_s"] if r.get("dict") else 0 for r in res])
    )
    if any(r.get("pathway") for r in res):
        series.append(
            ("Pathway", [r["pathway"]["events_per_s"] if r.get("pathway") else 0 for r in res])
        )
    fig, ax = plt.subplots(figsize=(min(16, max(8, 0.7 * len(res))), 5.5))
    width = 0.85 / len(series)
    xs = np.arange(len(res))
    for i, (label, ys) in enumerate(series):
        ax.bar(xs + i * width, ys, width, label=label)
    ax.set_xticks(xs + width * (len(series) - 1) / 2, [f"Q{r['query']}" for r in res])
    ax.set_yscale("log")
    ax.set_ylabel("changes per second (whole stream)")
    ax.set_title(f"TPC-H SF {doc['params']['sf']:g}: incremental maintenance, in-process")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()


def replot(json_path: str, png_path: str) -> None:
    """Redraw the chart of an earlier run's JSON (``--replot``)."""
    with open(json_path) as f:
        doc = json.load(f)
    save_png(png_path, lambda plt: draw(plt, doc), quiet=False)


if __name__ == "__main__":
    main()
