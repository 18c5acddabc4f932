"""The Spark runtime: run_on_spark's DataFrames, its checks on bad input, worker errors and
a worker killed mid-run. (Operator conformance on Spark is in the shared runtime suite.)"""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from ddflow import Changes, WorkerError, run_job
from ddflow.spark import (
    SparkJobError,
    changes_between,
    check_session,
    run_on_spark,
    spark_job,
    write_changes,
)


def degrees(c: dict[str, Any]) -> dict[str, Any]:
    deg = c["edges"].map(lambda e: e[0], vectorized=True).count_total()
    return {"hist": deg.map(lambda kc: kc[1], vectorized=True).count_total(), "deg": deg}


def _edges(n: int = 20000, rounds: int = 8, seed: int = 5) -> Changes:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, 300, n), rng.integers(0, 300, n)
    times = np.sort(rng.integers(0, rounds, n))
    diffs = np.where(rng.random(n) < 0.25, -1, 1).astype(np.int64)
    return Changes((src, dst), times, diffs)


def _df(spark: Any, c: Changes) -> Any:
    src, dst = c.data
    return spark.createDataFrame(
        pa.table({"src": src, "dst": dst, "time": c.times, "diff": c.diffs})
    )


def test_run_on_spark_returns_update_dataframes(spark: Any) -> None:
    """Output DataFrames hold data columns, time and diff, equal to the in-process updates."""
    edges = _edges()
    want = run_job(degrees, {"edges": edges})
    out = run_on_spark(
        spark,
        degrees,
        {"edges": _df(spark, edges)},
        workers=2,
        output_columns={"hist": ["degree", "nodes"]},
    )
    hist = out["hist"]
    assert hist.columns == ["degree", "nodes", "time", "diff"]
    rows = sorted((r.degree, r.nodes, r.time, r.diff) for r in hist.collect())
    assert rows == sorted((d, c, t, x) for (d, c), t, x in want["hist"].updates())
    deg = sorted(tuple(r) for r in out["deg"].collect())
    assert deg == sorted((k, c, t, x) for (k, c), t, x in want["deg"].updates())
    assert len(out.round_seconds) == 8


def test_time_and_diff_default_to_zero_and_one(spark: Any) -> None:
    """Without time and diff columns every row is an insertion at time 0."""
    df = spark.createDataFrame(pa.table({"src": [1, 1, 2], "dst": [5, 6, 7]}))
    out = spark_job(spark, degrees, {"edges": df}, workers=2)
    assert out["hist"].updates() == [((1, 1), 0, 1), ((2, 1), 0, 1)]


def test_too_many_workers_fail_fast_naming_the_slots(spark: Any) -> None:
    """Asking for more workers than local[2] has slots fails in seconds and says there are 2."""
    df = _df(spark, _edges(100))
    start = time.monotonic()
    with pytest.raises(SparkJobError, match="3 workers.*2 task slot"):
        run_on_spark(spark, degrees, {"edges": df}, workers=3)
    assert time.monotonic() - start < 5


def test_dynamic_allocation_is_refused() -> None:
    """A session with dynamic allocation on is refused before anything starts."""
    conf = {"spark.dynamicAllocation.enabled": "true"}
    fake = SimpleNamespace(conf=SimpleNamespace(get=lambda k, d=None: conf.get(k, d)))
    with pytest.raises(SparkJobError, match="dynamic allocation"):
        check_session(fake, 2)  # type: ignore[arg-type]


def test_missing_columns_are_named(spark: Any) -> None:
    """Columns asked for but absent are listed with the ones the DataFrame has."""
    df = _df(spark, _edges(100))
    with pytest.raises(SparkJobError, match=r"no column\(s\) \['weight'\].*'dst'"):
        run_on_spark(spark, degrees, {"edges": df}, columns={"edges": ["src", "weight"]})


@pytest.mark.parametrize("col,value", [("time", "1"), ("time", 1.5), ("diff", 0.5), ("diff", "x")])
def test_time_and_diff_must_be_integral(spark: Any, col: str, value: Any) -> None:
    """A time or diff column of the wrong type is refused, naming the column and its type."""
    data = {"src": [1, 2], "dst": [3, 4], col: [value, value]}
    df = spark.createDataFrame(pa.table(data))
    with pytest.raises(SparkJobError, match=f"column '{col}' has type"):
        run_on_spark(spark, degrees, {"edges": df})


def test_build_that_cannot_be_pickled_is_refused(spark: Any) -> None:
    """A build capturing a lock cannot ship to Spark's workers: a clear error, up front."""
    lock = threading.Lock()

    def build(c: dict[str, Any]) -> Any:
        with lock:
            return c["edges"].count_total()

    with pytest.raises(SparkJobError, match="cannot be pickled"):
        run_on_spark(spark, build, {"edges": _df(spark, _edges(100))})


def test_build_failing_on_a_sample_fails_before_the_job(spark: Any) -> None:
    """A build that breaks on the data's shape fails on the driver's sample run."""

    def build(c: dict[str, Any]) -> Any:
        return c["edges"].map(lambda e: e[5]).count_total()

    with pytest.raises(SparkJobError, match="sample of the inputs.*IndexError"):
        run_on_spark(spark, build, {"edges": _df(spark, _edges(100))})


def test_worker_exception_reaches_caller_with_its_traceback(spark: Any) -> None:
    """An error on data past the sample comes back as WorkerError with the worker's traceback,
    without Spark retrying the stage."""

    def build(c: dict[str, Any]) -> Any:
        def reject_late(e: Any) -> Any:
            if e[0] == 299 and e[1] >= 0:
                raise ValueError("edge from 299 rejected")
            return e[0]

        return c["edges"].map(reject_late).count_total()

    edges = _edges(5000)
    start = time.monotonic()
    with pytest.raises(WorkerError, match="edge from 299 rejected") as info:
        spark_job(spark, build, {"edges": _df(spark, edges)}, workers=2, check=False)
    assert "reject_late" in str(info.value)
    assert time.monotonic() - start < 30


def test_killed_worker_is_rerun_with_the_same_output(spark: Any, kill_worker: Any) -> None:
    """A worker process killed mid-run: Spark reruns the barrier stage and the output equals a
    run without the fault, with no update lost or duplicated."""
    edges = _edges(30000, rounds=12)
    df = _df(spark, edges)
    clean = spark_job(spark, degrees, {"edges": df}, workers=2)
    kill = kill_worker(1, 5)
    faulty = spark_job(spark, degrees, {"edges": df}, workers=2, on_round=kill)
    assert os.path.exists(kill.marker), "the fault hook did not fire"
    assert faulty["hist"].updates() == clean["hist"].updates()
    assert faulty["deg"].updates() == clean["deg"].updates()
    assert faulty["deg"].updates() == run_job(degrees, {"edges": edges})["deg"].updates()


def test_changes_between_snapshots_and_parquet(spark: Any, tmp_path: Any) -> None:
    """Two snapshots give +1 for new rows and -1 for vanished ones (as multisets); the
    changes written to Parquet read back the same."""
    old = spark.createDataFrame(pa.table({"k": [1, 2, 2, 3], "v": [10, 20, 20, 30]}))
    new = spark.createDataFrame(pa.table({"k": [2, 3, 4], "v": [20, 31, 40]}))
    ch = changes_between(old, new, time=7)
    rows = sorted(tuple(r) for r in ch.select("k", "v", "time", "diff").collect())
    assert rows == [(1, 10, 7, -1), (2, 20, 7, -1), (3, 30, 7, -1), (3, 31, 7, 1), (4, 40, 7, 1)]
    path = str(tmp_path / "changes")
    write_changes(ch, path)
    back = sorted(
        tuple(r) for r in spark.read.parquet(path).select("k", "v", "time", "diff").collect()
    )
    assert back == rows
