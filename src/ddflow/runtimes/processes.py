"""Local processes: ``workers=N`` on one machine, one forked process per worker.

``execute(fn, N)`` forks N processes; each opens a ``Listener`` on 127.0.0.1, the parent
gathers the addresses (its only role in the mesh: it is the trusted launcher, like Spark's
``allGather``) and hands them back, the workers build the authenticated ``Mesh`` and each
calls ``fn(worker)`` with a ``Worker`` over it. Results come back to the parent through
pipes. Forking means ``fn`` need not be picklable (its result must be).

A worker that raises tells its peers (they stop with ``PeerAborted``) and the parent raises
``WorkerError`` carrying that worker's traceback; a worker that dies without a word is
reported with its exit code and the others are stopped. Nothing hangs: the mesh has a
timeout, and the parent stops every worker once one has failed.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

from ddflow.dataflow.worker import Worker
from ddflow.engine.comm import PeerAborted, WorkerError, error_kind, worker_error
from ddflow.engine.mesh import Listener, Mesh, new_secret
from ddflow.runtimes.memory import tune_malloc

__all__ = ["execute"]


def _child(
    index: int,
    peers: int,
    secret: bytes,
    conn: Connection,
    fn: Callable[[Worker], Any],
    timeout: float,
) -> None:
    code = 0
    mesh = None
    try:
        tune_malloc()
        listener = Listener("127.0.0.1")
        conn.send(listener.address)
        addresses = conn.recv()
        mesh = Mesh.connect(index, addresses, listener, secret, timeout=timeout)
        worker = Worker(comm=mesh)
        result = fn(worker)
        conn.send(("ok", result))
    except PeerAborted as e:
        conn.send(("aborted", str(e)))
    except BaseException as e:  # noqa: BLE001 - everything a worker raises goes to the parent
        text = traceback.format_exc()
        if mesh is not None:
            mesh.abort(f"{type(e).__name__}: {e}")
        try:
            conn.send(("error", (error_kind(e), text)))
        except Exception:  # noqa: BLE001 - the parent may be gone; exit anyway
            code = 1
    finally:
        if mesh is not None:
            mesh.close()
        conn.close()
        os._exit(code)  # skip the parent's atexit handlers (pytest, Spark, ...)


def execute(fn: Callable[[Worker], Any], workers: int, *, timeout: float = 600.0) -> list[Any]:
    """Run ``fn(worker)`` on ``workers`` local worker processes; their results, by index.

    ``timeout`` bounds how long a worker waits for its peers at any step.
    """
    return Launcher().execute(fn, workers, timeout=timeout)


class Launcher:
    """Forks the worker processes and hands them each other's addresses (the trusted
    launcher of the module docstring). ``addresses`` is called with the gathered addresses
    before they go out: a subclass may look at them (tests attack the mesh there)."""

    def addresses(self, addresses: list[tuple[str, int]]) -> None:
        return None

    def execute(
        self, fn: Callable[[Worker], Any], workers: int, *, timeout: float = 600.0
    ) -> list[Any]:
        """Run ``fn(worker)`` on ``workers`` local worker processes (see ``execute``)."""
        return _launch(self, fn, workers, timeout)


def _launch(
    launcher: Launcher, fn: Callable[[Worker], Any], workers: int, timeout: float
) -> list[Any]:
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    ctx = mp.get_context("fork")
    secret = new_secret()
    procs = []
    conns: list[Connection] = []
    for i in range(workers):
        parent_end, child_end = ctx.Pipe()
        p = ctx.Process(
            target=_child,
            args=(i, workers, secret, child_end, fn, timeout),
            daemon=True,
            name=f"ddflow-worker-{i}",
        )
        p.start()
        child_end.close()
        procs.append(p)
        conns.append(parent_end)
    try:
        addresses = []
        for i, c in enumerate(conns):
            if not c.poll(60):
                raise WorkerError(i, "the worker process did not start within 60 s")
            addresses.append(c.recv())
        launcher.addresses(addresses)
        for c in conns:
            c.send(addresses)
        results: list[Any] = [None] * workers
        errors: dict[int, tuple[str, str]] = {}
        aborted: dict[int, str] = {}
        pending = {c: i for i, c in enumerate(conns)}
        sentinels = {p.sentinel: i for i, p in enumerate(procs)}
        while pending:
            ready = wait(list(pending) + list(sentinels), timeout=timeout + 30)
            if not ready:
                raise WorkerError(-1, f"no worker finished within {timeout + 30:.0f} s")
            for r in ready:
                if r in pending:
                    i = pending.pop(r)
                    try:
                        status, value = r.recv()
                    except EOFError:
                        procs[i].join(5)
                        errors[i] = ("", f"worker process exited with code {procs[i].exitcode}")
                        continue
                    if status == "ok":
                        results[i] = value
                    elif status == "error":
                        errors[i] = value
                    else:
                        aborted[i] = value
                elif r in sentinels:
                    i = sentinels.pop(r)
                    procs[i].join(5)
                    c = conns[i]
                    if c in pending and not c.poll(0):
                        pending.pop(c)
                        errors[i] = ("", f"worker process exited with code {procs[i].exitcode}")
            if errors:
                break
        if errors:
            # A worker that dies shows up in its peers as a broken connection, which may
            # arrive first: give the processes a moment and report the death, the cause.
            deadline = time.monotonic() + 2.0
            deaths = {}
            for i, p in enumerate(procs):
                p.join(max(0.0, deadline - time.monotonic()))
                if p.exitcode not in (None, 0) and results[i] is None:
                    deaths[i] = f"worker process exited with code {p.exitcode}"
            if deaths:
                i = min(deaths)
                raise WorkerError(i, deaths[i])
            i = min(errors)
            kind, text = errors[i]
            raise worker_error(i, text, kind)
        if aborted:
            i = min(aborted)
            raise WorkerError(i, aborted[i])
        return results
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
        for c in conns:
            c.close()
