"""The runtimes of one machine: ``InProcess`` (one worker in this process) and ``Processes``
(``workers`` forked local processes over an authenticated TCP mesh), and ``run_job``, which
picks between them.

Both run the same driver (``ddflow.runtimes.job.drive``) with the same ``JobConfig``; the
result is the same for any number of workers. Each worker of ``Processes`` feeds every
``workers``-th update of each log (``share_of``): any split gives the same output.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from ddflow.core.errors import DataError
from ddflow.core.time import time_kind_of
from ddflow.dataflow.worker import Worker
from ddflow.runtimes.config import Build, JobConfig
from ddflow.runtimes.job import Changes, JobResult, WorkerResult, drive, merge_results, share_of
from ddflow.runtimes.processes import execute

__all__ = ["InProcess", "Processes", "run_job"]


def _check_inputs(inputs: Mapping[str, Any]) -> None:
    for name, log in inputs.items():
        if not isinstance(log, (Changes, list, tuple)):
            raise DataError(f"input {name!r} must be a list of (data, time, diff) or Changes")


class InProcess:
    """One worker in this process: the runtime of interactive use and tests."""

    name = "inprocess"

    def run(self, build: Build, inputs: Mapping[str, Any], config: JobConfig) -> JobResult:
        if config.workers != 1:
            raise ValueError(
                f"the in-process runtime runs one worker, not {config.workers}; "
                "use Processes for more"
            )
        _check_inputs(inputs)
        result = drive(Worker(), build, inputs, config, job_id=uuid.uuid4().hex)
        return merge_results([result], time_kind_of(config.time))


class Processes:
    """``config.workers`` local worker processes (forked; ``build`` need not pickle)."""

    name = "processes"

    def run(self, build: Build, inputs: Mapping[str, Any], config: JobConfig) -> JobResult:
        _check_inputs(inputs)
        job_id = uuid.uuid4().hex
        workers = config.workers

        def one(worker: Worker) -> WorkerResult:
            logs = {n: share_of(v, worker.index, workers) for n, v in inputs.items()}
            return drive(worker, build, logs, config, job_id=job_id)

        results = execute(one, workers, timeout=config.timeout)
        return merge_results(results, time_kind_of(config.time))


def run_job(
    build: Build, inputs: Mapping[str, Any], config: JobConfig | None = None, **settings: Any
) -> JobResult:
    """Run ``build`` over ``inputs`` on ``workers`` workers (local processes when more than
    one): ``config`` and/or its fields as keywords (``workers=2``, ``time=``, ``diffs=``,
    ``timeout=``, ``checkpoint=``, ``checkpoint_every=``, ...; see ``JobConfig``).

    Returns ``{output name: Output}`` (a single returned collection is named ``"output"``);
    the result is the same for any number of workers. With ``checkpoint`` a job resumes from
    the directory's checkpoint and leaves one there.
    """
    cfg = JobConfig.resolve(config, settings)
    runtime = InProcess() if cfg.workers == 1 else Processes()
    return runtime.run(build, inputs, cfg)
