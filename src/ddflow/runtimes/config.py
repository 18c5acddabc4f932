"""Runtimes and job configuration: one ``Runtime`` protocol, one ``JobConfig`` value.

A *job* is a ``build`` function (input collections to output collections) and a finite log
of changes per input (``ddflow.runtimes.job``). A ``Runtime`` runs a job and returns its
outputs merged (``JobResult``); every runtime gives the same result for the same job:

* ``InProcess`` (``ddflow.runtimes.inprocess``): one worker in this process;
* ``Processes`` (``ddflow.runtimes.processes``): ``workers`` local processes over a TCP
  mesh;
* ``SparkRuntime`` (``ddflow.runtimes.spark``): ``workers`` Spark barrier tasks.

``JobConfig`` is how the job runs, handed unchanged from the caller to every worker: the
number of workers, the time kind, per-input diff types, the mesh's timeout, checkpoints,
progress lines and a hook called after every round. Public entry points take a config and/or
its fields as keywords (``run_job(build, inputs, workers=2)``); ``JobConfig.resolve``
merges them, and refuses unknown names.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Build", "JobConfig", "RoundReport", "Runtime"]

#: a job's dataflow: ``{input name: Collection}`` -> a Collection or ``{name: Collection}``
Build = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class RoundReport:
    """What every worker reports after each round of a job (to ``JobConfig.on_round``)."""

    worker: int  # this worker's index
    round: int  # the round just finished (0-based)
    rounds: int  # how many rounds the job has
    seconds: float  # how long the round took on this worker


@dataclass(frozen=True)
class JobConfig:
    """How a job runs (see the module docstring).

    * ``workers``: how many workers (processes or Spark tasks) host the dataflow;
    * ``time``: a sample of the inputs' times (``0``, or a ``Product`` for partially ordered
      ones);
    * ``diffs``: per input name, its diff type (default ``int``);
    * ``timeout``: seconds a worker waits for its peers at any step;
    * ``checkpoint``/``checkpoint_every``: a directory every worker can reach where the job
      keeps checkpoints (int times only): it first restores the newest one there, skipping
      input at the times it covers, writes one every ``checkpoint_every`` rounds (0: only at
      the end) and one at the end, leaving the inputs open for a later job;
    * ``progress``: seconds between progress lines worker 0 prints to stderr (None: quiet);
    * ``on_round``: called by every worker with a ``RoundReport`` after each round (must be
      picklable to reach Spark tasks).

    It is an error to give a field a value of the wrong kind; raises ``ValueError`` or
    ``TypeError`` naming it.
    """

    workers: int = 1
    time: Any = 0
    diffs: Mapping[str, Any] | None = None
    timeout: float = 600.0
    checkpoint: str | None = None
    checkpoint_every: int = 0
    progress: float | None = None
    on_round: Callable[[RoundReport], None] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers!r}")
        if (
            isinstance(self.checkpoint_every, bool)
            or not isinstance(self.checkpoint_every, int)
            or self.checkpoint_every < 0
        ):
            raise ValueError(f"checkpoint_every must be >= 0, got {self.checkpoint_every!r}")
        if not isinstance(self.timeout, (int, float)) or self.timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout!r}")
        if self.on_round is not None and not callable(self.on_round):
            raise TypeError(f"on_round must be callable, got {self.on_round!r}")
        if self.checkpoint is not None:
            object.__setattr__(self, "checkpoint", os.path.abspath(os.fspath(self.checkpoint)))

    @classmethod
    def resolve(
        cls, config: JobConfig | None, settings: Mapping[str, Any], **defaults: Any
    ) -> JobConfig:
        """``config`` (or ``JobConfig(**defaults)``) with the fields in ``settings`` replaced;
        a name that is no field raises ``TypeError``."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(settings) - names)
        if unknown:
            raise TypeError(f"unknown job setting(s) {unknown}; a JobConfig has {sorted(names)}")
        base = config if config is not None else cls(**defaults)
        return dataclasses.replace(base, **settings) if settings else base

    def with_(self, **settings: Any) -> JobConfig:
        """This config with some fields replaced."""
        return JobConfig.resolve(self, settings)


class Runtime(Protocol):
    """Runs jobs: ``run(build, inputs, config)`` returns the job's outputs merged from every
    worker (a ``JobResult``: ``{output name: Output}``), the same on every runtime."""

    name: str

    def run(self, build: Build, inputs: Mapping[str, Any], config: JobConfig) -> Any: ...
