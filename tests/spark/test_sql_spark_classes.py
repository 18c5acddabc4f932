"""String classes on Spark workers: a string held to literals by a view's condition enters
as its class and is put back above the scan, and a join input's values of one class are
computed after the join. Rows come as Spark DataFrames in two refreshes with deletes and
NULLs; the views equal Spark SQL on the rows live after each."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
from spark_oracle import arrow_rows, same_rows, spark_answer

from ddflow.sql.spark import maintain

T = pa.schema([("k", pa.int32()), ("s", pa.string()), ("x", pa.int32())])
U = pa.schema([("k", pa.int32()), ("p", pa.string())])

VIEWS = {
    "held": "SELECT s, count(*) AS n, sum(x) AS sx FROM t WHERE s IN ('MAIL', 'SHIP', NULL) "
    "GROUP BY s",
    "joined": "SELECT t.s, sum(CASE WHEN p = '1-URGENT' OR p = '2-HIGH' THEN 1 ELSE 0 END) AS hi, "
    "sum(CASE WHEN p <> '1-URGENT' AND p <> '2-HIGH' THEN 1 ELSE 0 END) AS lo "
    "FROM t JOIN u ON t.k = u.k WHERE t.s IN ('MAIL', 'SHIP') GROUP BY t.s",
}


def _feed(spark: Any, schema: pa.Schema, parts: list[tuple[int, int, list[Any]]]) -> Any:
    rows = [r for _, _, rs in parts for r in rs]
    times = [t for t, _, rs in parts for _ in rs]
    diffs = [d for _, d, rs in parts for _ in rs]
    extra = {"time": pa.array(times, pa.int64()), "diff": pa.array(diffs, pa.int64())}
    return spark.createDataFrame(arrow_rows(schema, rows, extra))


def test_string_classes_on_spark_equal_spark_sql(spark: Any, tmp_path: Path) -> None:
    random.seed(5)
    modes = ["MAIL", "SHIP", "AIR", "MAI", "SHIPS", "", None]
    prios = ["1-URGENT", "2-HIGH", "3-MEDIUM", "2-HIGX", None]
    t_live: list[Any] = []
    u_live: list[Any] = []
    ck = str(tmp_path / "ck")
    for time in range(3):
        t_new = [
            (random.randrange(6), random.choice(modes), random.randrange(4)) for _ in range(60)
        ]
        u_new = [(random.randrange(6), random.choice(prios)) for _ in range(4)]
        t_gone = random.sample(t_live, min(len(t_live), 15))
        u_gone = random.sample(u_live, min(len(u_live), 2))
        for r in t_gone:
            t_live.remove(r)
        for r in u_gone:
            u_live.remove(r)
        t_live += t_new
        u_live += u_new
        sources = {
            "t": _feed(spark, T, [(time, 1, t_new), (time, -1, t_gone)]),
            "u": _feed(spark, U, [(time, 1, u_new), (time, -1, u_gone)]),
        }
        res = maintain(spark, VIEWS, sources, workers=2, checkpoint=ck)
        tables = {"t": arrow_rows(T, t_live), "u": arrow_rows(U, u_live)}
        for name, sql in VIEWS.items():
            want, _ = spark_answer(spark, sql, tables)
            got = [tuple(r) for r in res[name].contents.collect()]
            extra, missing = same_rows(got, want)
            assert (extra, missing) == ([], []), (time, name, extra, missing)
