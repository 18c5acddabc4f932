"""Exact percentiles kept up to date against DuckDB recomputing the query.

A table ``t (g INT, x DOUBLE)`` of ``--rows`` random rows in ``--groups`` groups (``g``) is
loaded in one commit into a view of each group's median and discrete median::

    SELECT g, median(x) AS m, percentile_disc(0.5) WITHIN GROUP (ORDER BY x) AS d
    FROM t GROUP BY g

(``--groups 0``: the same of all rows, without GROUP BY), then ``--commits`` commits of
``--changes`` changes each (half inserts of new rows, half
deletes of live ones) are timed one by one, from ``insert`` / ``delete`` to the end of
``commit``. An exact percentile re-reads the values of each group a commit touches, so a
commit costs about the size of those groups (``--groups 1`` is one group of every row).
DuckDB runs the same query (``median`` and ``quantile_disc``) over the same rows after the
last commit, one full recompute, and its answer must equal the view's.

Prints JSON: load seconds, the median and 90th percentile commit in ms, DuckDB's recompute
in ms, and whether the answers are equal.

    python benchmarks/sql_percentiles.py --rows 1000000 --groups 1000
    python benchmarks/sql_percentiles.py --rows 1000000 --groups 0
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit_json, log, machine_info, now  # noqa: E402

QUERY = (
    "SELECT g, median(x) AS m, percentile_disc(0.5) WITHIN GROUP (ORDER BY x) AS d "
    "FROM t GROUP BY g"
)
DUCK_QUERY = "SELECT g, median(x) AS m, quantile_disc(x, 0.5) AS d FROM t GROUP BY g"
#: ``--groups 0``: one global aggregate of every row (no GROUP BY)
GLOBAL = "SELECT 0 AS g, median(x) AS m, percentile_disc(0.5) WITHIN GROUP (ORDER BY x) AS d FROM t"
DUCK_GLOBAL = "SELECT 0 AS g, median(x) AS m, quantile_disc(x, 0.5) AS d FROM t"


def _same(got: list[Any], want: list[Any]) -> bool:
    """Equal rows, the interpolated medians to a rounding (DuckDB and Spark round the
    interpolation in different steps)."""
    if len(got) != len(want):
        return False
    for a, b in zip(sorted(map(tuple, got)), sorted(map(tuple, want)), strict=True):
        if a[0] != b[0] or a[2] != b[2] or not math.isclose(a[1], b[1], rel_tol=1e-12):
            return False
    return True


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--commits", type=int, default=20)
    ap.add_argument("--changes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="also write the JSON here")
    args = ap.parse_args(argv)

    import duckdb
    import pyarrow as pa

    import ddflow.sql as dsql

    rng = np.random.default_rng(args.seed)
    n, groups = args.rows, args.groups
    g = rng.integers(0, max(groups, 1), n)
    x = rng.normal(size=n)
    live = list(zip(g.tolist(), x.tolist(), strict=True))
    db = dsql.Database()
    db.execute("CREATE TABLE t (g INT, x DOUBLE)")
    view = db.view(QUERY if groups else GLOBAL)
    t0 = now()
    db.insert("t", pa.table({"g": pa.array(g, pa.int32()), "x": pa.array(x, pa.float64())}))
    db.commit()
    load = now() - t0
    log(f"loaded {n} rows in {load:.3f} s")

    times = []
    for _ in range(args.commits):
        k = args.changes // 2
        new = list(
            zip(
                rng.integers(0, max(groups, 1), args.changes - k).tolist(),
                rng.normal(size=args.changes - k).tolist(),
                strict=True,
            )
        )
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
            "x": pa.array([r[1] for r in live], pa.float64()),
        }
    )
    con.register("t", final)
    t0 = now()
    want = con.execute(DUCK_QUERY if groups else DUCK_GLOBAL).fetchall()
    duck = now() - t0
    equal = _same(view.rows(), want)
    ms = np.array(times) * 1e3
    out = {
        "benchmark": "sql_percentiles",
        "machine": machine_info(),
        "rows": n,
        "groups": groups,
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
