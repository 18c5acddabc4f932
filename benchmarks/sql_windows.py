"""SQL window functions kept up to date against DuckDB recomputing the query.

A table ``t (g INT, a BIGINT, c BIGINT)`` of ``--rows`` random rows in ``--partitions``
partitions (``g``) is loaded in one commit into a view with a rank and a framed sum per
partition::

    SELECT g, a, rank() OVER (PARTITION BY g ORDER BY a) AS r,
           sum(c) OVER (PARTITION BY g ORDER BY a, c ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s
    FROM t

then ``--commits`` commits of ``--changes`` changes each (half inserts of new rows, half
deletes of live ones, in random partitions) are timed one by one, from ``insert`` /
``delete`` to the end of ``commit``. A change re-ranks its partition, so a commit costs about
the size of the partitions it touches. DuckDB runs the same query over the same rows, in
memory, after the last commit (one full recompute, what a refresh without incremental
maintenance costs), and its answer must equal the view's (the framed sum orders by
``a, c``, so rows tied in it are identical and any order of them gives the same rows).

Prints JSON: load seconds, the median and 90th percentile commit in ms, DuckDB's recompute
in ms, and whether the answers are equal.

    python benchmarks/sql_windows.py --rows 200000 --partitions 1000
    python benchmarks/sql_windows.py --rows 200000 --partitions 20
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit_json, log, machine_info, now  # noqa: E402

QUERY = (
    "SELECT g, a, rank() OVER (PARTITION BY g ORDER BY a) AS r, "
    "sum(c) OVER (PARTITION BY g ORDER BY a, c ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s "
    "FROM t"
)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--commits", type=int, default=30)
    ap.add_argument("--changes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="also write the JSON here")
    args = ap.parse_args(argv)

    import duckdb
    import pyarrow as pa

    import ddflow.sql as dsql

    rng = np.random.default_rng(args.seed)
    n, parts = args.rows, args.partitions
    g = rng.integers(0, parts, n)
    a = rng.integers(0, 10**9, n)
    c = rng.integers(0, 10**5, n)
    live = list(zip(g.tolist(), a.tolist(), c.tolist(), strict=True))
    table = pa.table(
        {"g": pa.array(g, pa.int32()), "a": pa.array(a, pa.int64()), "c": pa.array(c, pa.int64())}
    )
    db = dsql.Database()
    db.execute("CREATE TABLE t (g INT, a BIGINT, c BIGINT)")
    view = db.view(QUERY)
    t0 = now()
    db.insert("t", table)
    db.commit()
    load = now() - t0
    log(f"loaded {n} rows in {load:.3f} s")

    times = []
    for _ in range(args.commits):
        k = args.changes // 2
        new = [
            (int(rng.integers(0, parts)), int(rng.integers(0, 10**9)), int(rng.integers(0, 10**5)))
            for _ in range(args.changes - k)
        ]
        at = rng.choice(len(live), size=k, replace=False)
        gone = [live[i] for i in at.tolist()]
        for i in sorted(at.tolist(), reverse=True):
            live[i] = live[-1]
            live.pop()
        live.extend(new)
        t0 = now()
        db.insert("t", new)
        db.delete("t", gone)
        db.commit()
        times.append(now() - t0)

    con = duckdb.connect()
    final = pa.table(
        {
            "g": pa.array([r[0] for r in live], pa.int32()),
            "a": pa.array([r[1] for r in live], pa.int64()),
            "c": pa.array([r[2] for r in live], pa.int64()),
        }
    )
    con.register("t", final)
    t0 = now()
    want = con.execute(QUERY).fetchall()
    duck = now() - t0
    got = view.rows()
    equal = sorted(map(tuple, got)) == sorted(map(tuple, want))
    ms = np.array(times) * 1e3
    out = {
        "benchmark": "sql_windows",
        "machine": machine_info(),
        "rows": n,
        "partitions": parts,
        "commits": args.commits,
        "changes_per_commit": args.changes,
        "load_s": round(load, 3),
        "commit_ms_median": round(float(np.median(ms)), 2),
        "commit_ms_p90": round(float(np.percentile(ms, 90)), 2),
        "duckdb_recompute_ms": round(duck * 1e3, 1),
        "recompute_over_commit": round(duck * 1e3 / float(np.median(ms)), 1),
        "equal_to_duckdb": equal,
    }
    emit_json(out, path=args.json)
    if not equal:
        raise SystemExit("the view differs from DuckDB's answer")
    return out


if __name__ == "__main__":
    main()
