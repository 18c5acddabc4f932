"""Communicators: how the workers of one dataflow exchange data and agree on frontiers.

Every worker hosts the same dataflow for its share of the keys. The only collective a worker
needs is ``exchange``, an all-to-all: worker ``i`` hands one message per peer and receives
the message each peer addressed to ``i``; every worker calls it the same number of times, in
the same order (the dataflow is stepped in lockstep). ``all_gather`` is an exchange of the
same message to everyone.

Implementations:

* ``LocalComm``: one worker in this process (nothing to exchange);
* ``ddflow.engine.mesh.Mesh``: a TCP mesh between processes, used both by local processes
  (``workers=N``) and by Spark barrier tasks; only launching and address discovery differ.

``abort`` tells the peers that this worker failed, so they stop instead of waiting for
messages that will never come; they raise ``PeerAborted``.
"""

from __future__ import annotations

from typing import Any, Protocol

from ddflow.core.errors import DDError, both_errors

__all__ = [
    "Communicator",
    "LocalComm",
    "MeshError",
    "PeerAborted",
    "WorkerError",
    "error_kind",
    "worker_error",
]


class MeshError(DDError, ConnectionError):
    """The mesh between workers failed: a peer closed its connection or went silent."""


class PeerAborted(DDError, RuntimeError):
    """Another worker of the job failed and told this one to stop."""

    def __init__(self, peer: int, message: str) -> None:
        super().__init__(f"worker {peer} failed: {message}")
        self.peer = peer
        self.message = message


class WorkerError(DDError, RuntimeError):
    """A worker of a multi-worker job raised; the message holds the worker's traceback.

    When the worker raised one of ddflow's own errors, the error the caller gets is also an
    instance of that class (see ``worker_error``): ``except DataError`` catches a bad record
    found on a worker process or a Spark executor just as it does in-process.
    """

    def __init__(self, worker: int, traceback_text: str) -> None:
        super().__init__(f"worker {worker} raised:\n{traceback_text.rstrip()}")
        self.worker = worker
        self.traceback_text = traceback_text

    def __reduce__(self) -> tuple[Any, ...]:
        # the class made for a worker's ddflow error is made again when unpickled
        made = type(self) is not WorkerError and WorkerError in type(self).__bases__
        inner = [c for c in type(self).__bases__ if c is not WorkerError] if made else []
        kind = f"{inner[0].__module__}:{inner[0].__qualname__}" if inner else ""
        return (worker_error, (self.worker, self.traceback_text, kind))


def error_kind(error: BaseException) -> str:
    """The name a worker sends with its traceback so the caller can raise the same ddflow
    error class (``module:qualname``), or "" for an error that is not ddflow's own."""
    cls = type(error)
    if not isinstance(error, DDError) or isinstance(error, (WorkerError, PeerAborted)):
        return ""
    return f"{cls.__module__}:{cls.__qualname__}"


def worker_error(worker: int, traceback_text: str, kind: str = "") -> WorkerError:
    """The error for worker ``worker`` failing with ``traceback_text``: a ``WorkerError``
    that is also an instance of the ddflow error class ``kind`` names (``error_kind``), when
    that names one of ddflow's error classes."""
    cls = _resolve(kind)
    both = both_errors(WorkerError, cls) if cls is not None else None
    err: WorkerError = (both or WorkerError)(worker, traceback_text)
    return err


def _resolve(kind: str) -> type | None:
    import importlib

    module, _, name = kind.partition(":")
    if not module.startswith("ddflow.") or not name:
        return None
    try:
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    if not isinstance(obj, type) or not issubclass(obj, DDError):
        return None
    if issubclass(obj, (WorkerError, PeerAborted)):
        return None
    return obj


class Communicator(Protocol):
    """What a worker needs from its peers (see the module docstring)."""

    index: int
    peers: int

    def exchange(self, parts: list[Any]) -> list[Any]:
        """All-to-all: ``parts[j]`` goes to worker ``j``; returns what each worker sent here."""
        ...

    def all_gather(self, obj: Any) -> list[Any]:
        """Every worker's ``obj``, indexed by worker."""
        ...

    def abort(self, message: str) -> None:
        """Tell the peers this worker failed (best effort, never raises)."""
        ...

    def close(self) -> None: ...


class LocalComm:
    """The communicator of a single worker: exchanges are identities."""

    index = 0
    peers = 1

    def exchange(self, parts: list[Any]) -> list[Any]:
        return list(parts)

    def all_gather(self, obj: Any) -> list[Any]:
        return [obj]

    def abort(self, message: str) -> None:
        return None

    def close(self) -> None:
        return None
