"""SQL views kept by a live Spark job (``LiveViews``, ``LiveJob``): the workers hold the
views' state in memory between refreshes, and each refresh is checked against Spark SQL
over the tables' contents, as ``maintain``'s refreshes are.

The test session is ``local[2]`` and a live job needs a task slot beyond its workers (to
read each refresh's changes), so these run one worker; ``test_two_workers_in_a_session_of_three``
runs two in a Spark session of its own, in a child process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from spark_oracle import Stream, check_views, ins
from typed_data import ORDERED, SCHEMAS, VIEWS, refreshes

from ddflow import Changes, run_job
from ddflow.core.errors import DataError
from ddflow.spark import LiveJob, LiveViews, SparkJobError
from ddflow.sql.errors import SQLError


@pytest.mark.parametrize("form", ["rows", "cdf", "snapshot"])
@pytest.mark.parametrize("checkpoint", [False, True], ids=["memory", "checkpoint"])
def test_live_views_equal_spark_sql_after_every_refresh(
    spark: Any, tmp_path: Path, form: str, checkpoint: bool
) -> None:
    """Typed tables (NULLs, decimals, timestamps, every width) under inserts, deletes and
    updates: after each refresh every view's contents, rows() and changes agree with
    Spark SQL, with the state kept by one live job."""
    stream = Stream(
        spark,
        SCHEMAS,
        VIEWS,
        workers=1,
        checkpoint=str(tmp_path / "ck") if checkpoint else None,
        form=form,
        ordered=ORDERED,
        live=True,
    )
    problems: dict[str, list[str]] = {}
    try:
        for changes in refreshes(seed=11, n=5):
            stream.refresh(changes, problems=problems)
        assert stream.job is not None and stream.job.alive
    finally:
        stream.close()
    assert stream.job is not None and not stream.job.alive
    found = [p for ps in problems.values() for p in ps]
    assert not found, "\n".join(found[:5])


def test_refresh_reads_arrow_tables_and_rows_without_time(spark: Any) -> None:
    """A refresh may give Arrow tables instead of DataFrames, and change rows without a
    ``time`` column: they are taken at the time after every time seen, so the same rows
    given twice are applied twice."""
    t = pa.table({"k": pa.array([1, 2], pa.int64()), "g": pa.array(["a", None])})
    views = {"v": "SELECT g, count(*) AS n, sum(k) AS s FROM t GROUP BY g"}
    with LiveViews(spark, views, {"t": spark.createDataFrame(t)}, workers=1) as live:
        assert sorted(live.result["v"].rows(), key=repr) == sorted(
            [("a", 1, 1), (None, 1, 2)], key=repr
        )
        more = pa.table({"k": pa.array([5], pa.int64()), "g": pa.array(["a"])})
        r1 = live.refresh({"t": more})
        r2 = live.refresh({"t": more})
        assert sorted(r2["v"].rows(), key=repr) == sorted([("a", 3, 11), (None, 1, 2)], key=repr)
        t1 = set(r1["v"].changes_arrow().column("time").to_pylist())
        t2 = set(r2["v"].changes_arrow().column("time").to_pylist())
        assert len(t1) == 1 and len(t2) == 1 and min(t2) > max(t1)
        gone = pa.table(
            {"k": pa.array([1, 5], pa.int64()), "g": pa.array(["a", "a"]), "diff": [-1, -1]}
        )
        r3 = live.refresh({"t": gone})
        assert sorted(r3["v"].rows(), key=repr) == sorted([("a", 1, 5), (None, 1, 2)], key=repr)
        assert r3["v"].contents.collect() and len(r3["v"].contents.collect()) == 2


def test_bad_refresh_changes_nothing_and_the_views_go_on(spark: Any) -> None:
    """Changes with other columns, an unknown table or an unknown change type are refused
    before any worker sees them; the views are unchanged and the next refresh applies."""
    stream = Stream(spark, SCHEMAS, VIEWS, workers=1, ordered=ORDERED, live=True)
    log = refreshes(seed=5, n=3, load=20)
    try:
        stream.refresh(log[0])
        job = stream.job
        assert job is not None
        narrow = spark.createDataFrame([(1, "x")], "k bigint, g string")
        with pytest.raises(SQLError, match="columns"):
            job.refresh({"t": narrow})
        with pytest.raises(SQLError, match="unknown table"):
            job.refresh({"nope": narrow})
        cdf = stream.sources({"t": ins(tuple(None for _ in SCHEMAS["t"]))}, 1)[
            "t"
        ].withColumnRenamed("time", "_commit_version")
        cdf = cdf.withColumn("_change_type", cdf["diff"].cast("string")).drop("diff")
        with pytest.raises(DataError, match="_change_type"):
            job.refresh({"t": cdf})
        assert job.alive
        stream.refresh(log[1])
        stream.refresh(log[2])
    finally:
        stream.close()


class KillOnCall:
    """An ``on_round`` hook killing worker ``worker``'s process at its ``call``-th round
    (counted in the task: rounds of the initial input first, then of each refresh), once:
    the marker file says it happened."""

    def __init__(self, worker: int, call: int, marker: str) -> None:
        self.worker, self.call, self.marker = worker, call, marker
        self.seen = 0

    def __call__(self, report: Any) -> None:
        if report.worker != self.worker:
            return
        self.seen += 1
        if self.seen == self.call and not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                f.write("killed\n")
            os._exit(17)


def test_worker_killed_mid_refresh_gives_the_same_answer(spark: Any, tmp_path: Path) -> None:
    """The worker dies in a refresh's round: a new job takes over from the last
    checkpoint, the refresh returns the views Spark SQL gives (its changes once), and
    later refreshes go on."""
    marker = tmp_path / "killed"
    stream = Stream(
        spark,
        SCHEMAS,
        VIEWS,
        workers=1,
        checkpoint=str(tmp_path / "ck"),
        ordered=ORDERED,
        live=True,
        on_round=KillOnCall(0, 3, str(marker)),
    )
    try:
        for changes in refreshes(seed=29, n=5, load=25):  # the third round is refresh 2's
            stream.refresh(changes)
        assert marker.exists(), "the fault hook did not fire"
        assert stream.job is not None and stream.job.restarts == 1 and stream.job.alive
    finally:
        stream.close()


def test_worker_killed_without_a_checkpoint_ends_the_views(spark: Any, tmp_path: Path) -> None:
    """Without a checkpoint there is nothing to take over from: the refresh raises and the
    views have ended."""
    marker = tmp_path / "killed"
    stream = Stream(
        spark, SCHEMAS, VIEWS, workers=1, live=True, on_round=KillOnCall(0, 2, str(marker))
    )
    log = refreshes(seed=31, n=2, load=10)
    stream.refresh(log[0])
    with pytest.raises(Exception):  # noqa: B017 - a lost worker is Spark's or the mesh's error
        stream.refresh(log[1], check=False)
    assert marker.exists()
    assert stream.job is not None and not stream.job.alive and stream.job.job.lost
    with pytest.raises(SparkJobError, match="ended"):
        stream.job.refresh({})


def test_new_views_on_the_checkpoint_go_on_where_the_last_stopped(
    spark: Any, tmp_path: Path
) -> None:
    """A second LiveViews on the same checkpoint, given the next changes, equals Spark
    SQL; so does one whose driver side is a refresh behind the workers' checkpoint (as
    when the driver dies between the two): the output that checkpoint captured comes back
    and is applied once."""
    ck = tmp_path / "ck"
    log = refreshes(seed=37, n=5, load=20)
    stream = Stream(spark, SCHEMAS, VIEWS, workers=1, checkpoint=str(ck), live=True)
    stream.refresh(log[0])
    stream.refresh(log[1])
    stream.close()
    stream.job = None
    stream.refresh(log[2])  # a new LiveViews on the checkpoint
    kept = [ck / "sql-state.json", *(ck / "views").glob("*.pickle")]
    driver = {p: p.read_bytes() for p in kept}
    before = dict(stream.last)
    stream.refresh(log[3])
    stream.close()
    for p, b in driver.items():  # the driver's side as it was before refresh 3
        p.write_bytes(b)
    with LiveViews(spark, VIEWS, stream.sources({}, 4), workers=1, checkpoint=str(ck)) as again:
        check_views(
            spark,
            again.result,
            VIEWS,
            stream.tables(),
            ordered=ORDERED,
            before=before,
            times={3},
        )


def _counts(c: dict[str, Any]) -> Any:
    return c["x"].map(lambda r: r[0] % 3).count()


def test_live_job_feeds_equal_one_in_process_run(spark: Any) -> None:
    """A generic dataflow fed three times: each feed's output changes are the in-process
    run's output at those times (retractions included)."""
    rng = np.random.default_rng(3)
    base = rng.integers(0, 50, 40)
    feeds = [(t, rng.integers(0, 50, 12), rng.choice([-1, 1], 12)) for t in (1, 2, 3)]
    init = spark.createDataFrame(
        [(int(v), int(v) * 7, 0, 1) for v in base], "a long, b long, time long, diff long"
    )
    all_a = np.concatenate([base] + [f[1] for f in feeds])
    all_t = np.concatenate([np.zeros(len(base), np.int64)] + [np.full(12, f[0]) for f in feeds])
    all_d = np.concatenate([np.ones(len(base), np.int64)] + [f[2] for f in feeds])
    ref = run_job(_counts, {"x": Changes((all_a, all_a * 7), all_t, all_d)})["output"].updates()
    with LiveJob(spark, _counts, {"x": init}, workers=1) as job:
        got = list(job.initial["output"].updates())
        for t, a, d in feeds:
            rows = pa.table(
                {
                    "a": pa.array(a, pa.int64()),
                    "b": pa.array(a * 7, pa.int64()),
                    "time": pa.array(np.full(len(a), t), pa.int64()),
                    "diff": pa.array(d, pa.int64()),
                }
            )
            out = job.feed({"x": rows})["output"].updates()
            assert {u[1] for u in out} <= {t}
            got.extend(out)
    assert sorted(got) == sorted(ref)


def test_live_job_refuses_bad_rows_and_goes_on(spark: Any) -> None:
    """A float NaN the worker's input session refuses: ``feed`` raises a ``DataError``,
    nothing is changed, and the next feed is applied."""
    init = spark.createDataFrame([(1.5, 0, 1)], "f double, time long, diff long")

    def build(c: dict[str, Any]) -> Any:
        return c["x"].count()

    with LiveJob(spark, build, {"x": init}, workers=1) as job:
        bad = pa.table({"f": pa.array([float("nan")]), "time": pa.array([1], pa.int64())})
        with pytest.raises(DataError, match="refused"):
            job.feed({"x": bad})
        assert job.alive
        good = pa.table({"f": pa.array([1.5]), "time": pa.array([2], pa.int64())})
        assert job.feed({"x": good})["output"].updates() == [
            ((1.5, 1), 2, -1),
            ((1.5, 2), 2, 1),
        ]
        with pytest.raises(SparkJobError, match="columns"):
            job.feed({"x": pa.table({"g": pa.array([1.0])})})


def test_live_job_needs_a_spare_task_slot(spark: Any) -> None:
    """Two workers on local[2] would leave no slot to read changes: refused before any
    work, naming the setting that fixes it."""
    df = spark.createDataFrame([(1,)], "a long")
    with pytest.raises(SparkJobError, match=r"local\[3\]"):
        LiveJob(spark, lambda c: c["x"].count(), {"x": df}, workers=2)


_TWO_WORKERS = """
import sys
sys.path[:0] = {paths!r}
from ddflow.spark import local_session
from spark_oracle import Stream
from typed_data import ORDERED, SCHEMAS, VIEWS, refreshes

spark = local_session(3, memory="1g")
stream = Stream(spark, SCHEMAS, VIEWS, workers=2, ordered=ORDERED, live=True)
problems = {{}}
for changes in refreshes(seed=13, n=4):
    stream.refresh(changes, problems=problems)
stream.close()
found = [p for ps in problems.values() for p in ps]
print("PROBLEMS" if found else "ALL EQUAL", len(stream.results))
print("\\n".join(found[:5]))
spark.stop()
"""


def test_two_workers_in_a_session_of_three(tmp_path: Path) -> None:
    """Two live workers (the views' state split between them) in a ``local[3]`` session of
    a child process: every view equals Spark SQL after each of four refreshes."""
    here = Path(__file__).resolve().parent
    paths = [str(here), str(here.parent / "sql"), str(Path(__file__).resolve().parents[2] / "src")]
    script = tmp_path / "two.py"
    script.write_text(textwrap.dedent(_TWO_WORKERS.format(paths=paths)))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ALL EQUAL 4" in done.stdout, done.stdout[-3000:]


#: Declared keys that are wrong: ``g`` and ``(name, day)`` repeat across rows. Keys only
#: order joins (``t``'s on ``g`` makes the self join of ``tri`` come before the join with
#: ``u``), so the answers must not change.
WRONG_KEYS = {"t": ["g"], "u": [["name", "day"]]}
KEYED_VIEWS = dict(
    VIEWS,
    tri="SELECT a.g, u.name, count(*) AS n, sum(b.i) AS sb FROM t a, u, t b "
    "WHERE a.i = u.k2 AND b.g = a.g GROUP BY a.g, u.name",
)


@pytest.mark.parametrize("live", [False, True], ids=["maintain", "live"])
def test_declared_keys_even_wrong_ones_never_change_an_answer(
    spark: Any, tmp_path: Path, live: bool
) -> None:
    """``keys=`` declares keys as Spark's informational PRIMARY KEY does: here false ones,
    and every view still equals Spark SQL after each refresh."""
    stream = Stream(
        spark,
        SCHEMAS,
        KEYED_VIEWS,
        workers=1,
        checkpoint=str(tmp_path / "ck"),
        ordered=ORDERED,
        live=live,
    )
    try:
        for changes in refreshes(seed=41, n=3, load=20):
            stream.refresh(changes, keys=WRONG_KEYS)  # (a live job takes them once)
    finally:
        stream.close()


def test_declared_keys_are_checked(spark: Any, tmp_path: Path) -> None:
    """Keys naming an unknown table or column are refused, and so is a checkpoint made
    under other keys (its state belongs to other join orders)."""
    from ddflow.spark import maintain

    df = spark.createDataFrame([(1, "a")], "k bigint, g string")
    views = {"v": "SELECT g, count(*) AS n FROM t GROUP BY g"}
    with pytest.raises(SQLError, match="unknown table"):
        maintain(spark, views, {"t": df}, workers=1, keys={"nope": ["k"]})
    with pytest.raises(SQLError, match="no column"):
        maintain(spark, views, {"t": df}, workers=1, keys={"t": ["x"]})
    ck = str(tmp_path / "ck")
    maintain(spark, views, {"t": df}, workers=1, checkpoint=ck, keys={"t": ["k"]})
    with pytest.raises(SQLError, match="declared keys differ"):
        maintain(spark, views, {"t": df}, workers=1, checkpoint=ck)
    res = maintain(spark, views, {"t": df}, workers=1, checkpoint=ck, keys={"T": [["K"]]})
    assert sorted(res["v"].rows()) == [("a", 2)]
