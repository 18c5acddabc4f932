"""Jobs: a dataflow run over a finite log of input changes, on one worker or several.

A job is ``build`` (a function from input collections to output collections) plus, per
input, a log of updates ``(data, time, diff)``. Every worker builds the same dataflow and
feeds its share of each log (any split gives the same output: that is the point). The
workers agree on the distinct times of all logs and go through them in order, one *round*
per time: a round feeds the updates at that time, advances every input to the meet of the
times still to come (closing the inputs after the last round) and steps the dataflow until
the outputs have caught up. Output updates are captured per worker and merged by the caller.

The same driver (``drive``) runs in-process, in local processes and in Spark barrier tasks;
only the communicator differs, and every runtime hands it the same ``JobConfig``
(``ddflow.runtimes.config``). ``run_job`` runs a job in-process or in local processes;
``ddflow.spark.run_on_spark`` runs one on Spark.

A columnar log gives its collection's record shape when the dataflow is built (its columns
say it), so shape errors in ``build`` surface before any round runs.

An input log is either a list of ``(record, time, diff)`` triples or a ``Changes`` value:
columns in the record's shape (one array, or a tuple of arrays), an int time array
(``(n,)``, or ``(n, d)`` for flattened ``Product`` times) and a diff column.
"""

from __future__ import annotations

import sys
import time as _time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ddflow.core.columns import Layout, layout_of_view
from ddflow.core.errors import DataError, DDError, UnknownInputError
from ddflow.core.time import TimeKind, time_kind_of
from ddflow.core.updates import (
    Updates,
    accumulated_at,
    concat_updates,
    consolidate,
    update_records,
)
from ddflow.dataflow.collection import Collection
from ddflow.dataflow.worker import Worker
from ddflow.engine.checkpoint import latest_checkpoint
from ddflow.engine.exchange import Exchange
from ddflow.runtimes.config import Build, JobConfig, RoundReport

__all__ = [
    "Changes",
    "JobResult",
    "Output",
    "WorkerResult",
    "check_changes",
    "JobDriver",
    "drive",
    "merge_results",
    "share_of",
    "view_leaves",
]


@dataclass(frozen=True)
class Changes:
    """A columnar input log: ``data`` (a column or tuple of columns), ``times``, ``diffs``."""

    data: Any
    times: np.ndarray
    diffs: Any = None

    def __post_init__(self) -> None:
        times = np.asarray(self.times)
        if times.ndim not in (1, 2):
            raise DataError(
                f"Changes: times must be one time per row (1-d) or one row of components per "
                f"row (2-d), got shape {times.shape}"
            )
        n = times.shape[0]
        for what, view in (("data", self.data), ("diffs", self.diffs)):
            for leaf in view_leaves(view):
                if len(leaf) != n:
                    raise DataError(
                        f"Changes: {what} has a column of {len(leaf)} rows but there are "
                        f"{n} times; every column needs one entry per time"
                    )

    def __len__(self) -> int:
        return int(np.asarray(self.times).shape[0])

    def take(self, idx: Any) -> Changes:
        """The rows ``idx`` (an index array or a slice), as contiguous copies."""
        return Changes(
            _take_view(self.data, idx),
            _take_view(self.times, idx),
            None if self.diffs is None else _take_view(self.diffs, idx),
        )


def view_leaves(view: Any) -> list[Any]:
    """The columns of a record-shaped view (a column or nested tuples of them), in order."""
    if view is None:
        return []
    if isinstance(view, tuple):
        return [leaf for v in view for leaf in view_leaves(v)]
    return [view]


def _take_view(view: Any, idx: Any) -> Any:
    if isinstance(view, tuple):
        return tuple(_take_view(v, idx) for v in view)
    return np.ascontiguousarray(np.asarray(view)[idx])


def share_of(log: Any, index: int, peers: int) -> Any:
    """Worker ``index``'s share of an input log (every ``peers``-th update)."""
    if peers == 1:
        return log
    if isinstance(log, Changes):
        return log.take(slice(index, None, peers))
    return list(log)[index::peers]


@dataclass
class WorkerResult:
    """What one worker returns: its captured output updates and its timings."""

    outputs: dict[str, tuple[Updates | None, Layout | None]]
    round_seconds: list[float]
    round_times: list[tuple[int, ...]]
    stats: dict[str, Any] = field(default_factory=dict)


class Output:
    """One output collection of a job: its consolidated updates from every worker."""

    def __init__(self, updates: Updates | None, layout: Layout | None, kind: TimeKind) -> None:
        self._u = updates
        self.layout = layout
        self.kind = kind

    def __len__(self) -> int:
        return 0 if self._u is None else len(self._u)

    def columns(self) -> Updates | None:
        """The updates as columns (``data``, ``times``, ``diffs``)."""
        return self._u

    def updates(self) -> list[tuple[Any, Any, Any]]:
        """Every output update, consolidated, sorted by time then data."""
        return update_records(self._u, self.layout, self.kind)

    def at(self, t: Any) -> dict[Any, Any]:
        """The output collection accumulated at time ``t``."""
        return accumulated_at(self._u, self.layout, self.kind, t)


class JobResult(dict):
    """``{output name: Output}`` plus ``round_seconds`` (per round, the slowest worker's)."""

    round_seconds: list[float]
    worker_stats: list[dict[str, Any]]


def merge_results(results: list[WorkerResult], kind: TimeKind) -> JobResult:
    """One ``JobResult`` from every worker's ``WorkerResult``."""
    out = JobResult()
    names = list(results[0].outputs) if results else []
    for name in names:
        parts = [r.outputs[name][0] for r in results]
        layouts = [r.outputs[name][1] for r in results if r.outputs[name][1] is not None]
        nonempty = [p for p in parts if p is not None and len(p)]
        u = consolidate(concat_updates(nonempty)) if nonempty else None
        out[name] = Output(u, layouts[0] if layouts else None, kind)
    rounds = [r.round_seconds for r in results]
    out.round_seconds = [max(xs) for xs in zip(*rounds, strict=False)] if rounds else []
    out.worker_stats = [r.stats for r in results]
    return out


def _times_of(log: Any, kind: TimeKind) -> np.ndarray:
    if isinstance(log, Changes):
        t = np.asarray(log.times, dtype=np.int64)
        return t.reshape(len(t), kind.dim)
    return np.array([kind.flatten(t) for _, t, _ in log], dtype=np.int64).reshape(-1, kind.dim)


def _suffix_meets(times: list[tuple[int, ...]]) -> list[tuple[int, ...] | None]:
    """``meets[r]``: the meet of ``times[r:]`` (None past the end)."""
    meets: list[tuple[int, ...] | None] = [None] * (len(times) + 1)
    acc: tuple[int, ...] | None = None
    for r in range(len(times) - 1, -1, -1):
        t = times[r]
        acc = t if acc is None else tuple(min(a, b) for a, b in zip(acc, t, strict=True))
        meets[r] = acc
    return meets


def _progress_printer(every: float) -> Callable[[RoundReport], None]:
    """Worker 0's progress lines on stderr, at most every ``every`` seconds (in Spark's
    local mode they reach the console; on a cluster, the executor's log)."""
    state = {"last": _time.monotonic(), "busy": 0.0}

    def hook(r: RoundReport) -> None:
        state["busy"] += r.seconds
        now = _time.monotonic()
        if now - state["last"] >= every or r.round == r.rounds - 1:
            state["last"] = now
            print(
                f"[ddflow] round {r.round + 1}/{r.rounds}: {state['busy']:.2f} s of rounds so "
                f"far, last {r.seconds * 1e3:.1f} ms",
                file=sys.stderr,
                flush=True,
            )

    return hook


def check_changes(name: str, log: Changes, config: JobConfig) -> None:
    """Check ``log`` as a worker's input session would (shape, field types, NaN, hashable
    values, diff and time columns), raising that session's error naming input ``name``.

    For runtimes that convert the log before a worker sees it (the Spark runtime sends it
    as a DataFrame, whose columns would coerce floats to ints), so bad input is refused in
    the driver, before any work, with the error the in-process runtime gives."""
    kind = time_kind_of(config.time)
    session, _ = Worker().new_collection(
        time=kind.unflatten(kind.minimum()),
        diff=(config.diffs or {}).get(name, int),
        shape=layout_of_view(log.data),
    )
    try:
        session.insert_columns(log.data, log.diffs, log.times)
    except DDError as e:
        raise type(e)(f"input {name!r}: {e}") from e


class _Inputs(dict[str, Collection]):
    """The input collections handed to ``build``: asking for one the job was not given names
    the inputs it has."""

    def __missing__(self, name: str) -> Collection:
        raise UnknownInputError(
            f"the dataflow reads input {name!r}, but the job's inputs are {sorted(self)}"
        )


def drive(
    worker: Worker,
    build: Build,
    logs: Mapping[str, Any],
    config: JobConfig | None = None,
    *,
    job_id: str | None = None,
) -> WorkerResult:
    """Run ``build`` on ``worker`` over its share of ``logs`` (see the module docstring).

    Every worker of the job must call this with the same ``build``, input names and
    ``config``; ``config.on_round`` is called after each round.

    ``config.checkpoint``: a directory (seen by every worker) for checkpoints of this job's
    state (int times only). If it holds one, the dataflow is restored from it first and input
    at times it already covers is skipped (taken as processed). A checkpoint is written every
    ``checkpoint_every`` rounds (0: only at the end) and at the end, where the inputs stay
    open (advanced past the last time instead of closed) so a later job can go on with
    newer input. ``job_id`` names the job: restoring a checkpoint of the same job (a rerun
    after a failure) keeps the output it had captured so far; one of an earlier job does
    not, so each job returns the output changes of its own input.
    """
    return JobDriver(worker, build, logs, config, job_id=job_id).feed(logs, final=True)


class JobDriver:
    """A job's dataflow on one worker, fed one log after another: ``drive`` feeds one and
    finishes; a long-lived job (one that takes new input while it runs) feeds each new
    log with ``final=False`` and gets the output changes of that log alone.

    The dataflow is built (and restored from ``config.checkpoint`` if it holds one) when
    the driver is made; ``shapes`` gives each input's log (or any log of the same record
    shape), the inputs being its keys."""

    def __init__(
        self,
        worker: Worker,
        build: Build,
        shapes: Mapping[str, Any],
        config: JobConfig | None = None,
        *,
        job_id: str | None = None,
    ) -> None:
        config = config if config is not None else JobConfig()
        self.worker, self.config, self.job_id = worker, config, job_id
        kind = self.kind = time_kind_of(config.time)
        if config.checkpoint is not None and kind.dim != 1:
            raise DataError(
                "checkpointed jobs need int times (Product times have no 'next time' "
                "to leave the inputs at between jobs)"
            )
        self.hooks = [
            h
            for h in (
                config.on_round,
                _progress_printer(config.progress)
                if config.progress and worker.index == 0
                else None,
            )
            if h is not None
        ]
        t0 = kind.unflatten(kind.minimum())
        self.names = sorted(shapes)
        self.sessions: dict[str, Any] = {}
        colls = {}
        for name in self.names:
            log = shapes[name]
            shape = layout_of_view(log.data) if isinstance(log, Changes) else None
            s, c = worker.new_collection(
                time=t0, diff=(config.diffs or {}).get(name, int), shape=shape
            )
            self.sessions[name], colls[name] = s, c
        outs = build(_Inputs(colls))
        if not isinstance(outs, Mapping):
            outs = {"output": outs}
        for name, c in outs.items():
            if not isinstance(c, Collection):
                raise DataError(
                    f"build returned {type(c).__name__} for output {name!r}; "
                    "outputs must be Collections"
                )
        self.captures = {name: c.capture(name=f"capture {name}") for name, c in outs.items()}
        self.probes = [c.probe() for c in outs.values()]
        #: input at times <= fed is in the dataflow already (restored, or fed earlier)
        self.fed: int | None = None
        self.restored: dict[str, Any] | None = None
        checkpoint = config.checkpoint
        if checkpoint is not None and latest_checkpoint(checkpoint) is not None:
            self.restored = worker.restore(checkpoint)
            meta = self.restored.get("meta") or {}
            self.fed = meta.get("fed_through")
            if meta.get("job") != job_id:
                for cap in self.captures.values():
                    cap.clear()  # an earlier job's output: this job returns its own
        self.closed = False

    def checkpoint(self) -> dict[str, Any]:
        """Writes a checkpoint of the state now (``config.checkpoint`` must be set)."""
        assert self.config.checkpoint is not None
        self.worker.run()
        return self.worker.checkpoint(
            self.config.checkpoint, meta={"job": self.job_id, "fed_through": self.fed}
        )

    def feed(
        self, logs: Mapping[str, Any], *, final: bool, checkpoint: bool | None = None
    ) -> WorkerResult:
        """Runs the rounds of ``logs`` (this worker's share; input at times the dataflow
        has already taken is skipped) and returns the output changes since the last feed.

        ``final``: close the inputs after the last round (with a checkpoint directory they
        stay open and a checkpoint is written instead). Otherwise the inputs stay open past
        the last time for the next feed; ``checkpoint`` (default: whether the job has a
        checkpoint directory) writes a checkpoint after the last round."""
        if self.closed:
            raise DataError("this job's inputs are closed; it takes no more input")
        worker, config, kind, names = self.worker, self.config, self.kind, self.names
        ckdir = config.checkpoint
        unknown = sorted(set(logs) - set(names))
        if unknown:
            raise UnknownInputError(
                f"input(s) {unknown} are not inputs of this job; its inputs are {names}"
            )
        fed = self.fed
        # Agree on the rounds: the distinct times of every worker's logs.
        local_times = {
            name: _times_of(logs[name], kind) if name in logs else np.zeros((0, kind.dim), np.int64)
            for name in names
        }
        keep: dict[str, np.ndarray | None] = {name: None for name in names}
        if fed is not None:
            for name in names:
                k = np.flatnonzero(local_times[name][:, 0] > fed)
                keep[name] = k
                local_times[name] = local_times[name][k]
        mine: set[tuple[int, ...]] = set()
        for t in local_times.values():
            if len(t) and kind.dim == 1:
                mine.update((x,) for x in np.unique(t[:, 0]).tolist())
            elif len(t):
                mine.update(map(tuple, np.unique(t, axis=0).tolist()))
        union: set[tuple[int, ...]] = set()
        for ts in worker.comm.all_gather(sorted(mine)):
            union.update(tuple(x) for x in ts)
        rounds = sorted(union)
        meets = _suffix_meets(rounds)
        stay_open = ckdir is not None or not final

        # Per input: rows grouped by round.
        plan: dict[str, tuple[Any, np.ndarray, np.ndarray]] = {}
        for name in names:
            if name not in logs:
                continue
            t = local_times[name]
            if kind.dim == 1:
                arr = np.array([r[0] for r in rounds], dtype=np.int64)
                rix = np.searchsorted(arr, t[:, 0]) if len(t) else np.zeros(0, np.int64)
            else:
                index = {r: i for i, r in enumerate(rounds)}
                uniq, inv = (
                    np.unique(t, axis=0, return_inverse=True)
                    if len(t)
                    else (np.zeros((0, kind.dim), np.int64), np.zeros(0, np.int64))
                )
                rix = np.array([index[tuple(u)] for u in uniq.tolist()], dtype=np.int64)[
                    inv.ravel()
                ]
            order = np.argsort(rix, kind="stable")
            bounds = np.searchsorted(rix[order], np.arange(len(rounds) + 1))
            kept = keep[name]
            rows = order if kept is None else kept[order]
            plan[name] = (logs[name], rows, bounds)

        seconds: list[float] = []
        checkpoints: list[dict[str, Any]] = []
        probes = self.probes

        def behind(t: tuple[int, ...]) -> bool:
            return any(p.frontier.less_equal(t) for p in probes)

        for r, rt in enumerate(rounds):
            start = _time.perf_counter()
            for name, (log, order, bounds) in plan.items():
                lo, hi = int(bounds[r]), int(bounds[r + 1])
                if hi > lo:
                    _feed(self.sessions[name], log, order[lo:hi], kind)
            nxt = meets[r + 1]
            if nxt is None and stay_open:
                if kind.dim != 1:
                    raise DataError(
                        "a job that takes more input later needs int times (Product times "
                        "have no 'next time' to leave the inputs at)"
                    )
                nxt = (rt[0] + 1,)  # stay open for later input
            for s in self.sessions.values():
                if nxt is None:
                    s.close()
                else:
                    s.advance_to(kind.unflatten(nxt))
            if kind.dim == 1:
                self.fed = int(rt[0])
            if kind.dim == 1 and nxt is not None:
                worker.step_while(lambda: behind(rt), at_least_once=True)
            else:
                worker.run()
            if (
                ckdir is not None
                and config.checkpoint_every > 0
                and (r + 1) % config.checkpoint_every == 0
                and r + 1 < len(rounds)
            ):
                checkpoints.append(self.checkpoint())
            dt = _time.perf_counter() - start
            seconds.append(dt)
            for hook in self.hooks:
                hook(RoundReport(worker.index, r, len(rounds), dt))
        if not stay_open:
            for s in self.sessions.values():
                s.close()
            self.closed = True
        worker.run()
        if ckdir is not None and (final or checkpoint is None or checkpoint):
            checkpoints.append(self.checkpoint())
        outputs: dict[str, tuple[Updates | None, Layout | None]] = {}
        for name, cap in self.captures.items():
            outputs[name] = (cap.columns(), cap.inputs[0].layout)
            if not final:
                cap.clear()  # the next feed returns its own output
        stats: dict[str, Any] = {"arrangements": worker.stats(), "exchanged": _exchanged(worker)}
        if ckdir is not None:
            restored = self.restored
            stats["restored"] = (
                None
                if restored is None
                else {
                    "seq": restored["seq"],
                    "fed_through": restored.get("meta", {}).get("fed_through"),
                    "seconds": restored["seconds"],
                }
            )
            stats["checkpoints"] = checkpoints
            self.restored = None  # reported once
        return WorkerResult(outputs, seconds, rounds, stats)


def _exchanged(worker: Worker) -> dict[str, int]:
    ex = [op for op in worker.operators if isinstance(op, Exchange)]
    return {"sent": sum(op.sent for op in ex), "received": sum(op.received for op in ex)}


def _feed(session: Any, log: Any, rows: np.ndarray, kind: TimeKind) -> None:
    if isinstance(log, Changes):
        part = log.take(rows)
        session.insert_columns(part.data, part.diffs, np.asarray(part.times).reshape(len(rows), -1))
        return
    for i in rows.tolist():
        x, t, d = log[i]
        session.update_at(x, t, d)
