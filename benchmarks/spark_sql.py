"""SQL views on Spark: an incremental refresh with ``ddflow.sql.spark.maintain`` (or
``LiveViews``) versus Spark SQL recomputing the same views, on the same session.

    .venv/bin/python benchmarks/spark_sql.py --sf 1 --json benchmarks/results/spark_sql_sf1.json

The eight TPC-H tables (``tpchgen-cli``, typed as TPC-H types them) are read from Parquet
into Spark DataFrames and cached. The views are Q1, Q3, Q5, Q9, Q13, Q18 and a WITH
RECURSIVE view (``tpch_views``). Then:

1. ``maintain(spark, views, tables, workers=2, checkpoint=dir)`` loads them (timed:
   ``initial_s``);
2. a refresh changes about 0.1% of every table's rows (``refresh_changes``: deletes,
   updates and inserts of ``orders`` and ``lineitem``, updates of the others, at least one
   row per table), given to ``maintain`` as DataFrames of change rows (``time``,
   ``diff``) under the same checkpoint (timed end to end: ``refresh_s``, the Spark job,
   restoring the workers' state, computing, writing the checkpoint and the views' rows
   included; building the change DataFrames from the driver's Arrow rows is not, it
   stands for reading a change feed; the result DataFrames, made when first read, are
   timed apart: ``result_dataframes_s``);

With ``--live`` the views are loaded by ``LiveViews`` instead and each refresh is its
``refresh(frames)``: the workers keep the state in memory (no Spark stage, no restore;
each refresh still writes a checkpoint). The session then has one task slot more than
the workers (``local[3]`` for 2), which Spark SQL's recompute runs on too. The tables'
TPC-H primary keys are declared to ddflow (``keys=``, informational: they order the
views' joins) unless ``--no-keys``.
3. the Spark tables are brought to the same contents (an anti join on the keys and a
   union, cached; not timed) and ``spark.sql(view).collect()`` recomputes every view
   (timed per view: ``spark_s``; each view ran once before on the loaded tables, so the
   timings are warm).

Every view's refreshed rows are compared with Spark's (``equal``; numbers a side rounds
may differ in the last place). Printed: one JSON document with per-view Spark times, the
refresh's time and its breakdown (``maintain``'s ``timings`` and the workers' statistics:
the Spark job's wall time, state restore, rounds, checkpoint writes), and the ratio of
Spark's total to the refresh's.

The change generator (``refresh_changes``, ``apply_changes``, ``change_frame``) is shared
with ``tests/spark/test_sql_spark_tpch.py``, which checks every view against Spark SQL
after each of three such refreshes at SF 0.01.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import shutil
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tpch_sql import KEYS, SCHEMAS, differences, queries, raw_tables  # noqa: E402

__all__ = [
    "QUERIES",
    "RECURSIVE",
    "apply_changes",
    "change_frame",
    "main",
    "refresh_changes",
    "tpch_views",
]

QUERIES = (1, 3, 5, 9, 13, 18)

#: Paths of up to 4 hops from the suppliers of nation 7 to other suppliers through parts
#: both supply with fewer than 1000 units available (Spark takes only UNION ALL in a
#: recursive CTE), counted per supplier and fewest hops.
RECURSIVE = """
WITH RECURSIVE reach(s, hops) AS (
    SELECT s_suppkey, 0 FROM supplier WHERE s_nationkey = 7
    UNION ALL
    SELECT b.ps_suppkey, r.hops + 1
    FROM reach r
    JOIN partsupp a ON a.ps_suppkey = r.s
    JOIN partsupp b ON b.ps_partkey = a.ps_partkey
    WHERE r.hops < 4 AND a.ps_availqty < 1000 AND b.ps_availqty < 1000
      AND b.ps_suppkey <> r.s)
SELECT s, min(hops) AS hops, count(*) AS paths FROM reach GROUP BY s"""


def tpch_views(sf: float) -> dict[str, str]:
    """The six queries' SQL text (``q1`` ...) and the recursive view (``reach``)."""
    texts = queries(sf)
    views = {f"q{n}": texts[n] for n in QUERIES}
    views["reach"] = RECURSIVE.strip()
    return views


#: Per table, the columns an update changes and how: ("pick", values) takes one of the
#: values, ("shift", days) moves a date by up to that many days, ("other", None) takes
#: another row's value.
UPDATES: dict[str, dict[str, tuple[str, Any]]] = {
    "region": {"r_name": ("pick", ["ASIA", "EUROPE", "AMERICA", "ATLANTIS"])},
    "nation": {"n_regionkey": ("pick", [0, 1, 2, 3, 4])},
    "supplier": {"s_nationkey": ("pick", [2, 7, 8, 12, 20])},
    "customer": {
        "c_mktsegment": ("pick", ["BUILDING", "AUTOMOBILE", "MACHINERY"]),
        "c_nationkey": ("pick", [2, 7, 8, 12, 20]),
    },
    "part": {"p_name": ("pick", ["forest green lace", "navy olive plum", "green ivory"])},
    "partsupp": {
        "ps_availqty": ("pick", [1, 500, 999, 1000, 9999]),
        "ps_supplycost": ("other", None),
    },
    "orders": {
        "o_orderdate": ("shift", 200),
        "o_custkey": ("other", None),
        "o_comment": ("pick", ["carefully special deposits requests", "final"]),
    },
    "lineitem": {
        "l_quantity": ("other", None),
        "l_extendedprice": ("other", None),
        "l_discount": ("pick", [Decimal("0.00"), Decimal("0.05"), Decimal("0.10")]),
        "l_shipdate": ("shift", 200),
        "l_suppkey": ("other", None),
    },
}

#: Tables that also get deletes and inserts (new keys) beside updates.
GROWING = ("orders", "lineitem")


def _updated(t: pa.Table, idx: np.ndarray, rng: np.random.Generator, table: str) -> pa.Table:
    """Rows ``idx`` of ``t`` with one or two of ``UPDATES[table]``'s columns changed."""
    rows = t.take(pa.array(idx)).to_pylist()
    cols = list(UPDATES[table])
    for r in rows:
        for c in rng.permutation(cols)[: min(2, len(cols))]:
            how, arg = UPDATES[table][str(c)]
            if how == "pick":
                r[c] = arg[int(rng.integers(len(arg)))]
            elif how == "shift":
                r[c] = r[c] + dt.timedelta(days=int(rng.integers(-arg, arg + 1)))
            else:
                r[c] = t.column(str(c))[int(rng.integers(t.num_rows))].as_py()
    return pa.Table.from_pylist(rows, schema=t.schema)


def _new_keys(t: pa.Table, table: str, rows: pa.Table) -> pa.Table:
    """Copies of ``rows`` under keys ``t`` does not hold (new orders; new line numbers)."""
    out = rows.to_pylist()
    if table == "orders":
        top = pc.max(t.column("o_orderkey")).as_py()
        for i, r in enumerate(out):
            r["o_orderkey"] = top + 1 + i
    else:
        top = pc.max(t.column("l_linenumber")).as_py()
        for i, r in enumerate(out):
            r["l_linenumber"] = max(top, 7) + 1 + i
    return pa.Table.from_pylist(out, schema=t.schema)


def refresh_changes(
    cur: dict[str, pa.Table], rng: np.random.Generator, fraction: float = 0.001
) -> dict[str, tuple[pa.Table, pa.Table]]:
    """One refresh of the tables ``cur``: per table, the rows deleted and the rows inserted
    (``fraction`` of its rows changed, at least one; an update is its old row deleted and
    its new row inserted). A third of the changed ``orders`` and ``lineitem`` rows are
    deleted, a third updated, a third copied under new keys; other tables' rows are
    updated. Every line of one seven-line order is raised to 50 units (Q18's
    ``sum(l_quantity) > 300``)."""
    out: dict[str, tuple[pa.Table, pa.Table]] = {}
    for name, t in cur.items():
        n = t.num_rows
        k = max(1, math.ceil(n * fraction))
        picked = rng.choice(n, size=k, replace=False)
        if name in GROWING and k >= 3:
            gone, upd, copy = np.array_split(picked, 3)
        else:
            gone, upd, copy = picked[:0], picked, picked[:0]
        lines = np.zeros(0, np.int64)
        if name == "lineitem":
            keys = t.column("l_orderkey")
            counts = pc.value_counts(keys)
            seven = counts.field("values").filter(pc.equal(counts.field("counts"), 7))
            key = seven[int(rng.integers(len(seven)))].as_py()
            lines = np.flatnonzero(pc.equal(keys, key).to_numpy(zero_copy_only=False))
            upd = np.setdiff1d(upd, lines)
            gone = np.setdiff1d(gone, lines)
        dels = t.take(pa.array(np.concatenate([gone, upd]).astype(np.int64)))
        new = _updated(t, upd, rng, name) if len(upd) else t.slice(0, 0)
        if len(copy):
            new = pa.concat_tables([new, _new_keys(t, name, t.take(pa.array(copy)))])
        if len(lines):
            bumped = t.take(pa.array(lines)).to_pylist()
            for r in bumped:
                r["l_quantity"] = Decimal("50.00")
            dels = pa.concat_tables([dels, t.take(pa.array(lines))])
            new = pa.concat_tables([new, pa.Table.from_pylist(bumped, schema=t.schema)])
        out[name] = (dels, new)
    return out


def _key(t: pa.Table, name: str) -> Any:
    """One int64 key per row of table ``name`` (a pair packed as ``a * 2**24 + b``)."""
    cols = [t.column(k).cast(pa.int64()) for k in KEYS[name]]
    if len(cols) == 1:
        return cols[0]
    return pc.add(pc.multiply(cols[0], 1 << 24), cols[1])


def apply_changes(
    cur: dict[str, pa.Table], changes: dict[str, tuple[pa.Table, pa.Table]]
) -> dict[str, pa.Table]:
    """The tables after ``changes`` (deleted rows found by their key)."""
    after = {}
    for name, t in cur.items():
        dels, new = changes[name]
        keep = pc.invert(pc.is_in(_key(t, name), value_set=_key(dels, name).combine_chunks()))
        after[name] = pa.concat_tables([t.filter(keep), new]).combine_chunks()
    return after


def change_frame(spark: Any, dels: pa.Table, new: pa.Table, time: int) -> Any:
    """The rows deleted (diff -1) and inserted (+1) at ``time`` as a Spark DataFrame."""
    rows = pa.concat_tables([dels, new])
    n = rows.num_rows
    diff = np.concatenate([np.full(dels.num_rows, -1), np.full(new.num_rows, 1)])
    rows = rows.append_column("time", pa.array(np.full(n, time), pa.int64()))
    rows = rows.append_column("diff", pa.array(diff, pa.int64()))
    return spark.createDataFrame(rows)


# --- the benchmark ---------------------------------------------------------------------------


def _spark_tables(spark: Any, sf: float) -> dict[str, Any]:
    """The eight tables read from ``tpchgen-cli``'s Parquet, cast to ``SCHEMAS``, cached."""
    from pyspark.sql import functions as F

    from ddflow.tpch.data import generate

    folder = generate(sf, tuple(SCHEMAS))
    out = {}
    for name, schema in SCHEMAS.items():
        df = spark.read.parquet(str(folder / f"{name}.parquet"))
        df = df.select(*[F.col(f.name).cast(_spark_type(f.type)).alias(f.name) for f in schema])
        out[name] = df.cache()
        out[name].count()
    return out


def _spark_type(t: pa.DataType) -> str:
    if t == pa.int64():
        return "bigint"
    if t == pa.int32():
        return "int"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if t == pa.date32():
        return "date"
    return "string"


def _updated_frames(
    spark: Any, tables: dict[str, Any], changes: dict[str, tuple[pa.Table, pa.Table]]
) -> dict[str, Any]:
    """The Spark tables after ``changes``: an anti join with the deleted keys and a union
    with the inserted rows, cached (the old ones unpersisted)."""
    from pyspark.sql import functions as F

    out = {}
    for name, df in tables.items():
        dels, new = changes[name]
        keys = list(KEYS[name])
        gone = spark.createDataFrame(dels.select(keys))
        nxt = df.join(F.broadcast(gone), on=keys, how="left_anti")
        if new.num_rows:
            nxt = nxt.unionByName(spark.createDataFrame(new))
        nxt = nxt.cache()
        nxt.count()
        df.unpersist()
        out[name] = nxt
    return out


def _spark_recompute(
    spark: Any, views: dict[str, str], tables: dict[str, Any]
) -> tuple[dict[str, float], dict[str, list[tuple[Any, ...]]]]:
    for name, df in tables.items():
        df.createOrReplaceTempView(name)
    secs, rows = {}, {}
    for v, sql in views.items():
        t0 = time.perf_counter()
        got = spark.sql(sql).collect()
        secs[v] = time.perf_counter() - t0
        rows[v] = [tuple(r) for r in got]
    return secs, rows


def _job_profile(res: Any) -> dict[str, Any]:
    """Where a ``maintain`` call's time went: its phases and, per worker, the state restore,
    the rounds and the checkpoint writes (seconds)."""
    stats = res.job.worker_stats
    workers = []
    job_s = read_s = None
    for st in stats:
        if "job_seconds" in st:
            job_s = st["job_seconds"]
            read_s = st.get("read_seconds")
            continue
        restored = st.get("restored") or {}
        cks = st.get("checkpoints") or []
        own = (st.get("extras") or {}).get("seconds") or {}
        workers.append(
            {
                "ingest_s": _r(own.get("ingest")),
                "build_dataflow_s": _r(own.get("build")),
                "restore_s": _r(restored.get("seconds")),
                "checkpoint_write_s": _r(sum(c.get("seconds", 0.0) for c in cks)),
                "strings_sent_back": len((st.get("extras") or {}).get("strings") or {}),
            }
        )
    return {
        "phases_s": {k: _r(v) for k, v in res.timings.items()},
        "spark_job_wall_s": _r(job_s),
        "live_read_changes_s": _r(read_s),
        "rounds_s": [_r(x) for x in res.job.round_seconds],
        "workers": workers,
    }


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the benchmark (see the module docstring) and prints its JSON document."""
    from _common import emit_json, log, machine_info
    from ddflow.spark import local_session
    from ddflow.sql.spark import LiveViews, maintain

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--fraction",
        type=float,
        default=0.001,
        help="share of every table's rows a refresh changes (default 0.001)",
    )
    ap.add_argument("--refreshes", type=int, default=1, help="refreshes to time (default 1)")
    ap.add_argument("--memory", default="8g", help="Spark driver memory (default 8g)")
    ap.add_argument(
        "--checkpoint",
        default=None,
        help="checkpoint directory (default: a new temporary one, removed after)",
    )
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument(
        "--no-warmup",
        action="store_true",
        help="skip running the views on Spark before the refresh (saves time at "
        "large SF; Spark's timings then include its first compile)",
    )
    ap.add_argument(
        "--live",
        action="store_true",
        help="keep the views in a live job (LiveViews: the state stays in the workers' "
        "memory between refreshes) instead of a maintain call per refresh; the session "
        "gets one task slot more than --workers",
    )
    ap.add_argument(
        "--no-keys",
        action="store_true",
        help="do not declare the tables' TPC-H primary keys to ddflow (keys= of maintain "
        "and LiveViews: informational, they decide the join order)",
    )
    ap.add_argument("--json", default=None, help="also write the JSON document here")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    spark = local_session(max(2, args.workers + int(args.live)), memory=args.memory)
    log(f"Spark session in {time.perf_counter() - t0:.1f} s", quiet=args.quiet)
    views = tpch_views(args.sf)
    t0 = time.perf_counter()
    tables = _spark_tables(spark, args.sf)
    cur = raw_tables(args.sf)
    load_s = time.perf_counter() - t0
    log(f"SF {args.sf:g} loaded (Spark cache and Arrow) in {load_s:.1f} s", quiet=args.quiet)
    warm: dict[str, float] = {}
    if not args.no_warmup:
        warm, _ = _spark_recompute(spark, views, tables)
        log(f"Spark SQL on the loaded tables: {sum(warm.values()):.2f} s", quiet=args.quiet)
    ck = args.checkpoint or tempfile.mkdtemp(prefix="ddflow-spark-sql-")
    own = args.checkpoint is None
    rng = np.random.default_rng(args.seed)
    live = None
    keys = None if args.no_keys else {n: [k] for n, k in KEYS.items()}
    try:
        t0 = time.perf_counter()
        if args.live:
            live = LiveViews(spark, views, tables, workers=args.workers, checkpoint=ck, keys=keys)
            first = live.result
        else:
            first = maintain(spark, views, tables, workers=args.workers, checkpoint=ck, keys=keys)
        initial_s = time.perf_counter() - t0
        log(f"initial maintain: {initial_s:.2f} s", quiet=args.quiet)
        refreshes = []
        for step in range(1, args.refreshes + 1):
            changes = refresh_changes(cur, rng, args.fraction)
            changed = {n: d.num_rows + i.num_rows for n, (d, i) in changes.items()}
            frames = {n: change_frame(spark, *changes[n], step) for n in changes}
            t0 = time.perf_counter()
            if live is not None:
                res = live.refresh(frames)
            else:
                res = maintain(spark, views, frames, workers=args.workers, checkpoint=ck, keys=keys)
            refresh_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            # the result DataFrames, made when first read
            made = [(res[v].contents, res[v].changes) for v in views]
            frames_s = time.perf_counter() - t0
            cur = apply_changes(cur, changes)
            tables = _updated_frames(spark, tables, changes)
            spark_s, want = _spark_recompute(spark, views, tables)
            total = sum(spark_s.values())
            equal = {v: differences(res[v].rows(), want[v]) or "equal" for v in views}
            entry = {
                "refresh": step,
                "changed_rows": changed,
                "refresh_s": round(refresh_s, 4),
                "result_dataframes_s": round(frames_s, 4),
                "result_dataframes": 2 * len(made),
                "spark_s": {v: round(s, 4) for v, s in spark_s.items()},
                "spark_total_s": round(total, 4),
                "ratio": round(total / refresh_s, 2),
                "equal": equal,
                "profile": _job_profile(res),
            }
            refreshes.append(entry)
            log(
                f"refresh {step}: ddflow {refresh_s:.2f} s, Spark SQL {total:.2f} s, "
                f"ratio {entry['ratio']:.2f}, all equal "
                f"{all(e == 'equal' for e in equal.values())}",
                quiet=args.quiet,
            )
        doc = {
            "benchmark": "spark_sql",
            "machine": machine_info(("ddflow", "pyspark", "sqlglot")),
            "params": vars(args),
            "views": list(views),
            "rows": {n: t.num_rows for n, t in cur.items()},
            "load_s": round(load_s, 2),
            "spark_warmup_s": {v: round(s, 4) for v, s in warm.items()},
            "initial_s": round(initial_s, 4),
            "initial_profile": _job_profile(first),
            "refreshes": refreshes,
        }
    finally:
        if live is not None:
            live.close()
        if own:
            shutil.rmtree(ck, ignore_errors=True)
    emit_json(doc, path=args.json)
    spark.stop()
    return doc


if __name__ == "__main__":
    main()
