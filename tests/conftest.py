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
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

from ddflow import (  # noqa: E402 - after the environment is set
    Changes,
    InProcess,
    JobConfig,
    JobResult,
    Processes,
    Runtime,
)
from ddflow.testing.faults import KillWorker  # noqa: E402

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


class OnRuntime:
    """One runtime under test: the ``Runtime`` and its config (2 workers, a short timeout
    except in-process), and how many hypothesis examples a test may spend on it."""

    def __init__(self, runtime: Runtime, config: JobConfig, examples: int) -> None:
        self.runtime = runtime
        self.config = config
        self.examples = examples
        self.name = runtime.name
        self.workers = config.workers

    def run(self, build: Any, inputs: Mapping[str, Changes], **settings: Any) -> JobResult:
        """Run a job here (``settings``: ``JobConfig`` fields, e.g. ``time=``)."""
        return self.runtime.run(build, inputs, self.config.with_(**settings))

    def __repr__(self) -> str:
        return self.name


@pytest.fixture(scope="session", params=RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> OnRuntime:
    """Every runtime in turn: in-process, 2 local processes, Spark local[2] with 2 workers."""
    if request.param == "inprocess":
        return OnRuntime(InProcess(), JobConfig(), 10)
    if request.param == "processes":
        return OnRuntime(Processes(), JobConfig(workers=2, timeout=120), 4)
    from ddflow.spark import SparkRuntime

    return OnRuntime(
        SparkRuntime(request.getfixturevalue("spark")), JobConfig(workers=2, timeout=120), 2
    )


@pytest.fixture
def kill_worker(tmp_path: Any) -> Callable[[int, int], KillWorker]:
    """Makes ``KillWorker`` hooks whose marker is in this test's temporary directory."""

    def make(worker: int, round: int) -> KillWorker:
        return KillWorker(worker, round, str(tmp_path / f"killed-{worker}-{round}"))

    return make


#: how ``reduce`` picks its path per run (``Reduce.FEW_UPDATES``, ``Reduce.FEW_HISTORY``):
#: ``columns``: always the column kernels; ``auto``: as shipped (a few int updates per key
#: path); ``mixed``: thresholds so low that one dataflow moves between both paths and falls
#: back from the per-key path on long histories, pending work changing form each time
REDUCE_PATHS = {"columns": (0, 0), "auto": None, "mixed": (4, 8)}


@pytest.fixture(params=list(REDUCE_PATHS))
def reduce_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs the test once per way ``reduce`` picks its path (``REDUCE_PATHS``)."""
    from ddflow.operators.reduce import Reduce

    limits = REDUCE_PATHS[request.param]
    if limits is not None:
        monkeypatch.setattr(Reduce, "FEW_UPDATES", limits[0])
        monkeypatch.setattr(Reduce, "FEW_HISTORY", limits[1])
    return str(request.param)
