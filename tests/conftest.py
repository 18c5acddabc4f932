"""Shared fixtures: one runtime fixture over every way ddflow runs a dataflow, and one Spark
session per test session (local[2], UI off, few shuffle partitions, Spark's Python workers
on this interpreter).

Every test that starts Spark is marked ``spark``: those using the ``spark`` fixture or the
``runtime`` fixture's Spark case get the mark here, others (a subprocess that starts its
own session) carry it themselves. ``-m 'not spark'`` runs everything else.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

from ddflow.core.time import time_kind_of  # noqa: E402 - after the environment is set
from ddflow.runtime.job import Changes, JobResult, run_job  # noqa: E402

RUNTIMES = ["inprocess", "processes", "spark"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks ``spark`` every test that uses the Spark session or the Spark runtime."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "spark" in getattr(item, "fixturenames", ()) or params.get("runtime") == "spark":
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The test session's SparkSession (started on first use)."""
    from ddflow.spark import local_session

    session = local_session(2, memory="2g")
    yield session
    session.stop()


class Runtime:
    """Runs a job (``build`` over finite input logs) and returns its ``JobResult``."""

    name = "inprocess"
    workers = 1
    examples = 10

    def run(self, build: Any, inputs: Mapping[str, Changes], time: Any = 0) -> JobResult:
        return run_job(build, inputs, time=time)


class Processes(Runtime):
    name = "processes"
    workers = 2
    examples = 4

    def run(self, build: Any, inputs: Mapping[str, Changes], time: Any = 0) -> JobResult:
        return run_job(build, inputs, time=time, workers=2, timeout=120)


class OnSpark(Runtime):
    name = "spark"
    workers = 2
    examples = 2

    def __init__(self, session: Any) -> None:
        self.session = session

    def run(self, build: Any, inputs: Mapping[str, Changes], time: Any = 0) -> JobResult:
        from ddflow.spark import spark_job

        dfs = {n: self.session.createDataFrame(changes_table(c, time)) for n, c in inputs.items()}
        return spark_job(self.session, build, dfs, workers=2, time=time, timeout=120)


def changes_table(c: Changes, time: Any) -> Any:
    """A ``Changes`` log as an Arrow table: data columns ``_0..``, ``time``, ``diff``."""
    import pyarrow as pa

    cols = c.data if isinstance(c.data, tuple) else (c.data,)
    dim = time_kind_of(time).dim
    table: dict[str, Any] = {
        f"_{j}": pa.array(np.asarray(a), pa.int64()) for j, a in enumerate(cols)
    }
    t = np.asarray(c.times, dtype=np.int64).reshape(len(c), dim)
    if dim == 1:
        table["time"] = pa.array(t[:, 0], pa.int64())
    else:
        table["time"] = pa.array([list(r) for r in t.tolist()], pa.list_(pa.int64()))
    table["diff"] = pa.array(np.asarray(c.diffs, dtype=np.int64), pa.int64())
    return pa.table(table)


@pytest.fixture(scope="session", params=RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> Runtime:
    """Every runtime in turn: in-process, 2 local processes, Spark local[2] with 2 workers."""
    if request.param == "inprocess":
        return Runtime()
    if request.param == "processes":
        return Processes()
    return OnSpark(request.getfixturevalue("spark"))
