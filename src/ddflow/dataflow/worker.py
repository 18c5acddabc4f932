"""The worker users hold: the engine's worker with the dataflow API's entry point.

``Worker()`` is one in-process worker; use it as a context manager (on a clean exit every
input is closed and the dataflow run to completion) or directly. ``new_collection`` makes an
input: an ``InputSession`` to feed and the ``Collection`` it feeds, on which the dataflow is
built. Runtimes create workers with a communicator when a job runs on several
(``ddflow.run_job``, ``ddflow.execute``, ``ddflow.spark.run_on_spark``).

Stepping, statistics and checkpoints are the engine's (``ddflow.engine.worker``).
"""

from __future__ import annotations

from typing import Any

from ddflow.core.columns import Layout, infer_layout
from ddflow.core.diff import diff_type_of
from ddflow.core.time import time_kind_of
from ddflow.dataflow.collection import Collection
from ddflow.engine.worker import Worker as EngineWorker
from ddflow.io.input import InputSession

__all__ = ["Worker"]


class Worker(EngineWorker):
    """One worker hosting a dataflow; use as a context manager or directly.

    ``Worker()`` is a single in-process worker. Runtimes create workers with a communicator
    (``comm``) when a job runs on several (``ddflow.run_job``, ``ddflow.execute``,
    ``ddflow.spark.run_on_spark``); ``index`` and ``peers`` say which one this is.
    """

    def __init__(self, comm: Any = None) -> None:
        super().__init__(comm)
        self.sessions: list[InputSession] = []

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            for s in self.sessions:
                if not s.closed:
                    s.close()
            self.run()

    def new_collection(
        self, *, time: Any = 0, diff: Any = int, shape: Any = None
    ) -> tuple[InputSession, Collection]:
        """A new input: returns ``(InputSession, Collection)``.

        ``time`` is the initial time (an int, or a ``Product`` for partially ordered times);
        every input of a worker has the same time kind. ``diff`` is the diff type: ``int``,
        ``Sum``, ``MinSum``, a sample value (a tuple of numbers, a ``DiffPair``) or a class
        with ``plus``/``is_zero``. ``shape`` (optional) is the records' shape, a sample
        record (``(0, 0)`` for pairs) or a ``Layout``: records must then have it, and
        operators check their inputs' shapes as the dataflow is built (without it, the first
        record fed teaches the collection its shape).
        """
        kind = time_kind_of(time)
        self.set_time_kind(kind)
        dt = diff_type_of(diff)
        layout = (
            None if shape is None else shape if isinstance(shape, Layout) else infer_layout(shape)
        )
        session = InputSession(self, kind, time, dt, layout)
        self.sessions.append(session)
        return session, Collection(self, session.op.output, dt)
