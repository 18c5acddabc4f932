"""Checkpointed jobs: incremental refresh between jobs, and a failed Spark stage resuming
from its last committed checkpoint instead of the start.

The reference is always the same input run in one uninterrupted job without checkpoints.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import numpy as np
import pytest

from ddflow import Changes, run_job
from ddflow.engine.checkpoint import CheckpointError, latest_checkpoint
from ddflow.spark import spark_job


def degrees(c: dict[str, Any]) -> dict[str, Any]:
    deg = c["edges"].map(lambda e: e[0], vectorized=True).count_total()
    return {"hist": deg.map(lambda kc: kc[1], vectorized=True).count_total(), "deg": deg}


def _edges(n: int = 20000, rounds: int = 12, seed: int = 5) -> Changes:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, 300, n), rng.integers(0, 300, n)
    times = np.sort(rng.integers(0, rounds, n))
    diffs = np.where(rng.random(n) < 0.25, -1, 1).astype(np.int64)
    return Changes((src, dst), times, diffs)


def _df(spark: Any, c: Changes) -> Any:
    import pyarrow as pa

    src, dst = c.data
    return spark.createDataFrame(
        pa.table({"src": src, "dst": dst, "time": c.times, "diff": c.diffs})
    )


def _between(c: Changes, lo: int, hi: int) -> Changes:
    return c.take(np.flatnonzero((c.times >= lo) & (c.times < hi)))


def _split(updates: list, cut: int) -> tuple[Counter, Counter]:
    before = Counter({(x, t): d for x, t, d in updates if t < cut})
    after = Counter({(x, t): d for x, t, d in updates if t >= cut})
    return before, after


def _as_counter(updates: list) -> Counter:
    return Counter({(x, t): d for x, t, d in updates})


@pytest.mark.parametrize("workers", [1, 2])
def test_jobs_resume_where_the_last_stopped(tmp_path: Any, workers: int) -> None:
    """Three jobs over consecutive slices of the input, sharing a checkpoint directory,
    return together exactly the updates of one uninterrupted job; each returns those of
    its own slice. Giving a job the whole log again skips what is already processed."""
    edges = _edges()
    ref = run_job(degrees, {"edges": edges})
    path = tmp_path / "ck"
    got: dict[str, Counter] = {"hist": Counter(), "deg": Counter()}
    for lo, hi in ((0, 4), (4, 9), (9, 12)):
        part = run_job(
            degrees, {"edges": _between(edges, lo, hi)}, workers=workers, checkpoint=path
        )
        for name in got:
            mine = _as_counter(part[name].updates())
            assert all(lo <= t < hi for _, t in mine), "a job returns its own slice only"
            got[name].update(mine)  # (Counter "+" would drop negative diffs)
    for name in got:
        assert got[name] == _as_counter(ref[name].updates())
    # the whole log again: nothing new, so no output changes
    again = run_job(degrees, {"edges": edges}, workers=workers, checkpoint=path)
    assert again["deg"].updates() == [] and again["hist"].updates() == []


def test_checkpoint_of_other_worker_count_is_refused(tmp_path: Any) -> None:
    edges = _edges(2000, rounds=3)
    run_job(degrees, {"edges": edges}, workers=1, checkpoint=tmp_path)
    with pytest.raises(Exception, match="worker"):
        run_job(degrees, {"edges": edges}, workers=2, checkpoint=tmp_path)


def test_checkpoint_of_other_build_is_refused(tmp_path: Any) -> None:
    edges = _edges(2000, rounds=3)
    run_job(degrees, {"edges": edges}, checkpoint=tmp_path)

    def other(c: dict[str, Any]) -> Any:
        return c["edges"].map(lambda e: e[1], vectorized=True).count_total()

    with pytest.raises(CheckpointError, match="another dataflow"):
        run_job(other, {"edges": edges}, checkpoint=tmp_path)


def test_spark_incremental_refresh_between_jobs(spark: Any, tmp_path: Any) -> None:
    edges = _edges()
    ref = run_job(degrees, {"edges": edges})
    path = tmp_path / "ck"
    first = spark_job(
        spark,
        degrees,
        {"edges": _df(spark, _between(edges, 0, 6))},
        workers=2,
        checkpoint=str(path),
    )
    second = spark_job(
        spark,
        degrees,
        {"edges": _df(spark, _between(edges, 6, 12))},
        workers=2,
        checkpoint=str(path),
    )
    assert second.worker_stats[0]["restored"]["fed_through"] == 5
    for name in ("hist", "deg"):
        before, after = _split(ref[name].updates(), 6)
        assert _as_counter(first[name].updates()) == before
        assert _as_counter(second[name].updates()) == after


def test_spark_killed_worker_resumes_from_the_last_checkpoint(
    spark: Any, tmp_path: Any, kill_worker: Any
) -> None:
    """Worker 1 dies at round 8, after the checkpoints of rounds 3 and 6 committed: Spark
    reruns the stage, which restores round 6's checkpoint (not the start), and the job's
    output equals an uninterrupted run's: no update lost or duplicated."""
    edges = _edges(30000, rounds=12)
    df = _df(spark, edges)
    clean = spark_job(spark, degrees, {"edges": df}, workers=2)
    kill = kill_worker(1, 7)
    path = tmp_path / "ck"
    faulty = spark_job(
        spark,
        degrees,
        {"edges": df},
        workers=2,
        checkpoint=str(path),
        checkpoint_every=3,
        on_round=kill,
    )
    assert os.path.exists(kill.marker), "the fault hook did not fire"
    for st in faulty.worker_stats[:2]:
        assert st["restored"] is not None and st["restored"]["fed_through"] == 5, st
    # the rerun ran only the rounds after the checkpoint
    assert len(faulty.round_seconds) == 12 - 6
    for name in ("hist", "deg"):
        assert faulty[name].updates() == clean[name].updates()
    assert faulty["deg"].updates() == run_job(degrees, {"edges": edges})["deg"].updates()
    assert latest_checkpoint(path) is not None
    assert os.path.isdir(path / "worker-0001")
