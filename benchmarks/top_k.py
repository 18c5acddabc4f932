"""A commit's latency under ``ORDER BY ... LIMIT``, as the ranked table grows.

A table of ``N`` rows (``--rows``, several sizes) is loaded in one commit behind the view
``SELECT id, v FROM t ORDER BY v DESC, id LIMIT k``; then ``--commits`` commits each
insert ``--changes`` new rows and delete as many held ones (the current leaders among them
every other commit, so the top-k must refill from further down). Reported per size: the
median and 90th percentile of the commit times, and whether the view's rows after the last
commit equal the top ``k`` of the table computed from scratch. With totally ordered times
the top-k reads only the first rows of each trace batch, so the commit time should barely
depend on ``N``.

    python benchmarks/top_k.py --rows 10000,1000000 --json benchmarks/results/top_k.json
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddflow.sql as dsql  # noqa: E402
from _common import emit_json, log, machine_info, now, timing_stats_ms  # noqa: E402


def run(n: int, k: int, commits: int, changes: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    db = dsql.Database()
    db.execute("CREATE TABLE t (id BIGINT NOT NULL, v BIGINT NOT NULL)")
    view = db.view(f"SELECT id, v FROM t ORDER BY v DESC, id LIMIT {k}")
    ids = np.arange(n, dtype=np.int64)
    vals = rng.integers(0, 1 << 40, n)
    held = dict(zip(ids.tolist(), vals.tolist(), strict=True))
    t0 = now()
    db.insert("t", pa.table({"id": ids, "v": vals}))
    db.commit()
    load_s = now() - t0
    next_id = n
    secs = []
    for c in range(commits):
        new_ids = np.arange(next_id, next_id + changes, dtype=np.int64)
        next_id += changes
        new_v = rng.integers(0, 1 << 40, changes)
        if c % 2:
            gone = [r[0] for r in view.rows()[:changes]]  # the leaders
        else:
            pool = list(held)
            gone = [pool[i] for i in rng.choice(len(pool), changes, replace=False)]
        dels = pa.table(
            {
                "id": np.array(gone, dtype=np.int64),
                "v": np.array([held[i] for i in gone], dtype=np.int64),
            }
        )
        t0 = now()
        db.insert("t", pa.table({"id": new_ids, "v": new_v}))
        db.delete("t", dels)
        db.commit()
        secs.append(now() - t0)
        for i in gone:
            del held[i]
        held.update(zip(new_ids.tolist(), new_v.tolist(), strict=True))
    want = sorted(held.items(), key=lambda iv: (-iv[1], iv[0]))[:k]
    return {
        "rows": n,
        "k": k,
        "load_s": round(load_s, 3),
        "commit_ms": timing_stats_ms(secs),
        "answer_equal": [tuple(r) for r in view.rows()] == want,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="10000,1000000", help="table sizes, comma separated")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--changes", type=int, default=5, help="rows inserted and deleted a commit")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default=None)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    results = []
    for n in (int(x) for x in args.rows.split(",")):
        r = run(n, args.k, args.commits, args.changes, args.seed)
        log(f"N={n}: commit median {r['commit_ms']['median_ms']} ms", quiet=args.quiet)
        results.append(r)
    doc = {
        "benchmark": "top_k",
        "machine": machine_info(("ddflow",)),
        "params": vars(args),
        "results": results,
    }
    emit_json(doc, path=args.json)
    return doc


if __name__ == "__main__":
    main()
