"""Incremental refresh with ``checkpoint=``: a later call with only the new changes returns
the new contents and only the new changes; changes the checkpoint already covers change
nothing; and the refreshed contents equal one call over all the changes."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from spark_oracle import Stream, arrow_rows, same_rows, spark_answer
from typed_data import SCHEMAS, refreshes, t_row

from ddflow.core.errors import DDError
from ddflow.sql.spark import Snapshot, maintain
from ddflow.testing.faults import KillWorker

VIEWS = {
    "agg": "SELECT g, count(*) AS n, sum(d) AS sd, max(ts) AS mts, min(dt) AS mdt "
    "FROM t GROUP BY g",
    "joined": "SELECT t.k, u.name, t.d * u.w AS dw FROM t JOIN u ON t.i = u.k2",
    "top": "SELECT k, d FROM t WHERE d IS NOT NULL ORDER BY d DESC, k LIMIT 3",
}

_SCHEMA = pa.schema([("g", pa.string()), ("d", pa.decimal128(10, 2))])
_V = {"v": "SELECT g, count(*) AS n, sum(d) AS s FROM t GROUP BY g"}


def _changes(spark: Any, rows: list[tuple[Any, ...]], time: int, diffs: list[int]) -> Any:
    return spark.createDataFrame(
        arrow_rows(
            _SCHEMA,
            rows,
            {"time": pa.array([time] * len(rows), pa.int64()), "diff": pa.array(diffs, pa.int64())},
        )
    )


def _rows(res: Any, view: str = "v") -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in res[view].contents.collect()), key=repr)


def _changed(res: Any, view: str = "v") -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in res[view].changes.collect()), key=repr)


def test_later_call_returns_new_contents_and_only_new_changes(spark: Any, tmp_path: Path) -> None:
    """Call 2 gets only time 1's changes: its contents are the whole view and its changes
    only what time 1 changed (a group updated, one gone, one new), all at time 1."""
    ck = str(tmp_path / "ck")
    a, b, c = ("a", Decimal("1.50")), ("b", Decimal("2.25")), ("c", Decimal("-3.00"))
    first = maintain(
        spark, _V, {"t": _changes(spark, [a, a, b], 0, [1, 1, 1])}, workers=2, checkpoint=ck
    )
    assert _rows(first) == [("a", 2, Decimal("3.00")), ("b", 1, Decimal("2.25"))]
    second = maintain(
        spark, _V, {"t": _changes(spark, [a, b, c], 1, [-1, -1, 1])}, workers=2, checkpoint=ck
    )
    assert _rows(second) == [("a", 1, Decimal("1.50")), ("c", 1, Decimal("-3.00"))]
    assert _changed(second) == [
        ("a", 1, Decimal("1.50"), 1, 1),
        ("a", 2, Decimal("3.00"), 1, -1),
        ("b", 1, Decimal("2.25"), 1, -1),
        ("c", 1, Decimal("-3.00"), 1, 1),
    ]


def test_same_changes_twice_change_nothing(spark: Any, tmp_path: Path) -> None:
    """Feeding a call's changes again (alone, or with all earlier ones) leaves the contents
    as they were and returns no changes."""
    ck = str(tmp_path / "ck")
    a, b = ("a", Decimal("1.00")), ("b", Decimal("2.00"))
    t0 = _changes(spark, [a, b], 0, [1, 1])
    t1 = _changes(spark, [a, b], 1, [1, -1])
    maintain(spark, _V, {"t": t0}, workers=2, checkpoint=ck)
    once = maintain(spark, _V, {"t": t1}, workers=2, checkpoint=ck)
    want = [("a", 2, Decimal("2.00"))]
    assert _rows(once) == want
    again = maintain(spark, _V, {"t": t1}, workers=2, checkpoint=ck)
    assert _rows(again) == want
    assert _changed(again) == []
    everything = maintain(spark, _V, {"t": t0.unionByName(t1)}, workers=2, checkpoint=ck)
    assert _rows(everything) == want
    assert _changed(everything) == []


def test_same_cdf_and_snapshot_twice_change_nothing(spark: Any, tmp_path: Path) -> None:
    """A change feed fed twice and a snapshot given twice leave the views unchanged."""
    a, b = ("a", Decimal("1.00")), ("b", Decimal("2.00"))
    feed = spark.createDataFrame(
        arrow_rows(
            _SCHEMA,
            [a, b, a],
            {
                "_change_type": pa.array(["insert", "insert", "delete"]),
                "_commit_version": pa.array([0, 0, 1], pa.int64()),
            },
        )
    )
    ck = str(tmp_path / "cdf")
    first = maintain(spark, _V, {"t": feed}, workers=2, checkpoint=ck)
    again = maintain(spark, _V, {"t": feed}, workers=2, checkpoint=ck)
    assert _rows(first) == _rows(again) == [("b", 1, Decimal("2.00"))]
    assert _changed(again) == []
    snap = spark.createDataFrame(arrow_rows(_SCHEMA, [a, b, b]))
    ck = str(tmp_path / "snap")
    first = maintain(spark, _V, {"t": Snapshot(snap)}, workers=2, checkpoint=ck)
    again = maintain(spark, _V, {"t": Snapshot(snap)}, workers=2, checkpoint=ck)
    assert _rows(first) == _rows(again) == [("a", 1, Decimal("1.00")), ("b", 2, Decimal("4.00"))]
    assert _changed(again) == []


def test_refreshed_contents_equal_one_call_over_all_changes(spark: Any, tmp_path: Path) -> None:
    """Four refreshes under a checkpoint (each checked against Spark SQL) end with the
    contents one call without a checkpoint gives over all four refreshes' changes, and that
    call's changes at each time are the changes the refresh of that time returned."""
    stream = Stream(
        spark, SCHEMAS, VIEWS, workers=2, checkpoint=str(tmp_path / "ck"), ordered=("top",)
    )
    log = refreshes(seed=21, n=4, load=25)
    for changes in log:
        stream.refresh(changes)
    whole = Stream(spark, SCHEMAS, VIEWS, workers=2)
    for changes in log[:-1]:
        whole._apply(changes)
        whole.log.append(changes)
    one = whole.refresh(log[-1])  # one call: every change so far, times 0..3
    for view in VIEWS:
        extra, missing = same_rows(_rows(one, view), _rows(stream.results[-1], view))
        assert not extra and not missing, f"{view}: one call {extra}, refreshed {missing}"
        for time, res in enumerate(stream.results):
            at = [r for r in _changed(one, view) if r[-2] == time]
            extra, missing = same_rows(at, _changed(res, view))
            assert not extra and not missing, f"{view} at time {time}: {extra} vs {missing}"


def test_no_checkpoint_each_call_is_all_changes_so_far(spark: Any) -> None:
    """Without a checkpoint every call gets all the changes so far and equals Spark SQL."""
    stream = Stream(spark, SCHEMAS, VIEWS, workers=1, ordered=("top",))
    for changes in refreshes(seed=22, n=3, load=20):
        stream.refresh(changes)


def test_checkpoint_of_other_columns_is_refused(spark: Any, tmp_path: Path) -> None:
    """A table whose columns changed since the checkpoint was made is refused with a
    message that says to use a new checkpoint directory."""
    ck = str(tmp_path / "ck")
    a = ("a", Decimal("1.00"))
    maintain(spark, _V, {"t": _changes(spark, [a], 0, [1])}, workers=1, checkpoint=ck)
    other = spark.createDataFrame(pa.table({"g": ["a"], "d": [1.5], "time": [1], "diff": [1]}))
    with pytest.raises(DDError, match="new checkpoint"):
        maintain(spark, _V, {"t": other}, workers=1, checkpoint=ck)


@pytest.mark.parametrize("change", ["views", "workers"])
def test_checkpoint_under_other_views_or_workers(spark: Any, tmp_path: Path, change: str) -> None:
    """A checkpoint reused with other views or another number of workers either refreshes
    them right (equal to Spark SQL) or is refused with a DDError: never a wrong answer."""
    rng = random.Random(4)
    ck = str(tmp_path / "ck")
    rows = [t_row(rng, k) for k in range(12)]
    t0 = arrow_rows(SCHEMAS["t"], rows)
    df0 = spark.createDataFrame(
        arrow_rows(
            SCHEMAS["t"],
            rows,
            {"time": pa.array([0] * 12, pa.int64()), "diff": pa.array([1] * 12, pa.int64())},
        )
    )
    first = {"a": "SELECT g, count(*) AS n FROM t GROUP BY g"}
    maintain(spark, first, {"t": df0}, workers=2, checkpoint=ck)
    new = [t_row(rng, 100)]
    df1 = spark.createDataFrame(
        arrow_rows(
            SCHEMAS["t"],
            new,
            {"time": pa.array([1], pa.int64()), "diff": pa.array([1], pa.int64())},
        )
    )
    views = dict(first)
    workers = 2
    if change == "views":
        views["b"] = "SELECT g, sum(d) AS s FROM t GROUP BY g"
    else:
        workers = 1
    try:
        res = maintain(spark, views, {"t": df1}, workers=workers, checkpoint=ck)
    except DDError:
        return
    now = {"t": pa.concat_tables([t0, arrow_rows(SCHEMAS["t"], new)])}
    for name, sql in views.items():
        want, _ = spark_answer(spark, sql, now)
        extra, missing = same_rows(_rows(res, name), want)
        assert not extra and not missing, f"{name}: extra {extra}, missing {missing}"


@pytest.mark.parametrize("worker", [0, 1])
def test_worker_killed_mid_refresh_gives_the_same_answer(
    spark: Any, tmp_path: Path, worker: int
) -> None:
    """A worker process killed in the middle of a refresh (after computing the refresh's
    round, before its checkpoint is written): Spark reruns the barrier stage from the last
    checkpoint and every view still equals Spark SQL, with the refresh's changes once."""
    stream = Stream(
        spark, SCHEMAS, VIEWS, workers=2, checkpoint=str(tmp_path / "ck"), ordered=("top",)
    )
    log = refreshes(seed=23, n=3, load=25)
    stream.refresh(log[0])
    marker = tmp_path / "killed"
    stream.on_round = KillWorker(worker, 0, str(marker))
    stream.refresh(log[1])
    assert marker.exists(), "the fault hook did not fire"
    stream.on_round = None
    stream.refresh(log[2])


def test_window_view_on_spark_equals_spark_sql(spark: Any) -> None:
    """A window view maintained by Spark workers (rows keyed by partition across two
    workers) equals Spark SQL on the rows live after the changes."""
    schema = pa.schema([("g", pa.string()), ("d", pa.decimal128(10, 2))])
    rows = [("a", Decimal("1.00")), ("a", Decimal("3.00")), ("b", Decimal("2.00")), (None, None)]
    rows += [("b", Decimal("5.50")), ("a", Decimal("2.00")), ("c", None)]
    gone = [rows[1], rows[4]]
    sql = (
        "SELECT g, d, rank() OVER (PARTITION BY g ORDER BY d) AS r, "
        "sum(d) OVER (PARTITION BY g ORDER BY d ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s, "
        "lag(d) OVER (ORDER BY g, d) AS p FROM t"
    )
    feed = spark.createDataFrame(
        arrow_rows(
            schema,
            rows + gone,
            {
                "time": pa.array([0] * len(rows) + [1] * len(gone), pa.int64()),
                "diff": pa.array([1] * len(rows) + [-1] * len(gone), pa.int64()),
            },
        )
    )
    res = maintain(spark, {"w": sql}, {"t": feed}, workers=2)
    live = [r for r in rows if r not in gone]
    want, _ = spark_answer(spark, sql, {"t": arrow_rows(schema, live)})
    extra, missing = same_rows(_rows(res, "w"), want)
    assert (extra, missing) == ([], []), (extra, missing)
