"""The TCP mesh and the local-processes runtime: exchange, authentication, failures."""

from __future__ import annotations

import os
import pickle
import socket
import struct
import threading
import time
from typing import Any

import numpy as np
import pytest

from ddflow import Changes, MeshError, WorkerError, run_job
from ddflow.engine.mesh import Listener, Mesh, new_secret
from ddflow.runtimes.processes import Launcher, execute


def _meshes(n: int, secret: bytes, before: Any = None) -> list[Mesh]:
    """``n`` meshes built in threads (``before(addresses)`` runs once the listeners exist)."""
    listeners = [Listener() for _ in range(n)]
    addresses = [lst.address for lst in listeners]
    if before is not None:
        before(addresses)
    out: list[Any] = [None] * n
    errors: list[BaseException] = []

    def connect(i: int) -> None:
        try:
            out[i] = Mesh.connect(i, addresses, listeners[i], secret, timeout=30, setup_timeout=30)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=connect, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    out[0].listener_refused = listeners[0].refused
    return out


def _all(meshes: list[Mesh], fn: Any) -> list[Any]:
    res: list[Any] = [None] * len(meshes)

    def go(i: int) -> None:
        res[i] = fn(meshes[i])

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(meshes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return res


def test_exchange_delivers_each_part_to_its_worker() -> None:
    """All-to-all: worker j receives exactly what every worker addressed to j."""
    meshes = _meshes(3, new_secret())
    try:
        got = _all(
            meshes, lambda m: m.exchange([(m.index, j, np.arange(m.index + j)) for j in range(3)])
        )
        for j in range(3):
            for i in range(3):
                src, dst, arr = got[j][i]
                assert (src, dst) == (i, j)
                assert np.array_equal(arr, np.arange(i + j))
    finally:
        for m in meshes:
            m.close()


def test_large_messages_both_ways_do_not_deadlock() -> None:
    """Two workers sending each other 40 MB at once both complete (non-blocking pump)."""
    meshes = _meshes(2, new_secret())
    try:
        big = np.arange(5_000_000, dtype=np.int64)
        got = _all(meshes, lambda m: m.exchange([big + m.index, big + m.index]))
        assert np.array_equal(got[0][1], big + 1)
        assert np.array_equal(got[1][0], big)
    finally:
        for m in meshes:
            m.close()


def test_connection_without_secret_is_refused_and_mesh_unaffected(tmp_path: Any) -> None:
    """An intruder that sends a pickle instead of the handshake is disconnected, its bytes are
    never unpickled, and the real workers still build their mesh."""
    marker = tmp_path / "pwned"
    evil = pickle.dumps(_Evil(str(marker)))
    seen: dict[str, Any] = {}
    connected = threading.Event()
    threads: list[threading.Thread] = []

    def intrude(addresses: list[tuple[str, int]]) -> None:
        try:
            s = socket.create_connection(addresses[0], timeout=5)
        finally:
            connected.set()
        try:
            seen["hello"] = s.recv(64)
            s.sendall(struct.pack("<I", 1) + evil[:64] + b"\0" * max(0, 64 - len(evil)) + evil)
            s.settimeout(5)
            seen["reply"] = s.recv(64)
        except OSError as e:  # (the listener may close while the bytes are still going out)
            seen["reply"] = e
        finally:
            s.close()

    def start(addresses: list[tuple[str, int]]) -> None:
        # the intruder's connection waits in the listener's backlog before the peer's, so
        # it is refused before the mesh is built (under load the thread could start late)
        threads.append(threading.Thread(target=intrude, args=(addresses,)))
        threads[0].start()
        assert connected.wait(10)

    meshes = _meshes(2, new_secret(), before=start)
    try:
        got = _all(meshes, lambda m: m.all_gather(m.index * 10))
        assert got == [[0, 10], [0, 10]]
        threads[0].join(10)
        assert not threads[0].is_alive()
        assert meshes[0].listener_refused >= 1
        assert not marker.exists()
        # closed without any answer (a reset when the intruder's extra bytes were unread)
        assert seen["reply"] == b"" or isinstance(
            seen["reply"], ConnectionResetError | BrokenPipeError
        ), seen
    finally:
        for m in meshes:
            m.close()


class _Evil:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (open, (self.path, "w"))


def test_wrong_secret_peer_cannot_join() -> None:
    """A peer holding another secret fails its handshake; the honest side keeps waiting."""
    secret = new_secret()
    listener = Listener()
    other = Listener()
    addresses = [listener.address, other.address]
    errors: list[BaseException] = []

    def honest() -> None:
        try:
            Mesh.connect(0, addresses, listener, secret, setup_timeout=2)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=honest)
    t.start()
    with pytest.raises(MeshError, match="secret|closed"):
        Mesh.connect(1, addresses, other, new_secret(), setup_timeout=5)
    t.join(10)
    assert errors and isinstance(errors[0], MeshError)
    assert "did not connect" in str(errors[0])


def test_listener_is_closed_once_the_mesh_is_built() -> None:
    """After set-up, new connections to a worker's address are refused by the system."""
    meshes = _meshes(2, new_secret())
    try:
        with pytest.raises(OSError):
            # The listener's port: the mesh sockets are accepted ones, the listener is gone.
            socket.create_connection(("127.0.0.1", _listener_port(meshes)), timeout=2)
    finally:
        for m in meshes:
            m.close()


def _listener_port(meshes: list[Mesh]) -> int:
    # Worker 1 dialled worker 0's listener: the peer address of its socket is that listener.
    return int(meshes[1].socks[0].getpeername()[1])  # type: ignore[union-attr]


def test_dead_peer_is_reported_not_waited_for() -> None:
    """A peer that closes its connection makes the other's exchange raise MeshError."""
    meshes = _meshes(2, new_secret())
    meshes[1].close()
    with pytest.raises(MeshError, match="closed"):
        meshes[0].exchange([1, 2])
    meshes[0].close()


# -- local processes ------------------------------------------------------------------------


def _degrees(c: dict[str, Any]) -> Any:
    deg = c["edges"].map(lambda e: e[0], vectorized=True).count_total()
    return {"hist": deg.map(lambda kc: kc[1], vectorized=True).count_total(), "deg": deg}


def _edges(n: int = 20000, seed: int = 3) -> Changes:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, 500, n), rng.integers(0, 500, n)
    times = np.sort(rng.integers(0, 30, n))
    diffs = np.where(rng.random(n) < 0.2, -1, 1).astype(np.int64)
    return Changes((src, dst), times, diffs)


@pytest.mark.parametrize("workers", [2, 3])
def test_processes_equal_in_process(workers: int) -> None:
    """The degrees job on 2 and 3 processes gives the in-process updates exactly."""
    edges = _edges()
    one = run_job(_degrees, {"edges": edges})
    many = run_job(_degrees, {"edges": edges}, workers=workers)
    assert many["hist"].updates() == one["hist"].updates()
    assert many["deg"].updates() == one["deg"].updates()
    assert len(one["deg"]) > 0


def test_intruder_on_a_process_mesh_leaves_the_job_unaffected() -> None:
    """A connection with a wrong secret during set-up is refused; the output is unchanged."""
    edges = _edges(5000)
    want = run_job(_degrees, {"edges": edges})["hist"].updates()
    refused: list[Any] = []

    threads: list[threading.Thread] = []

    def intrude(addr: tuple[str, int]) -> None:
        s = socket.create_connection(addr, timeout=30)
        s.settimeout(30)
        try:
            s.recv(64)  # the nonce, once worker 0 accepts
            s.sendall(b"\0" * 68)  # a wrong proof
            refused.append(s.recv(64))
        except ConnectionResetError:
            refused.append(b"")
        s.close()

    def attack(addresses: list[tuple[str, int]]) -> None:
        # Worker 0 accepts from worker 1; connect to it before worker 1 can.
        t = threading.Thread(target=intrude, args=(addresses[0],))
        t.start()
        threads.append(t)
        time.sleep(0.2)

    def one(worker: Any) -> Any:
        from ddflow.runtimes.job import drive, share_of

        return drive(worker, _degrees, {"edges": share_of(edges, worker.index, 2)})

    from ddflow.core.time import INT_TIME
    from ddflow.runtimes.job import merge_results

    class Attacked(Launcher):
        """A launcher that lets an intruder at worker 0 before worker 1 connects."""

        def addresses(self, addresses: list[tuple[str, int]]) -> None:
            attack(addresses)

    res = merge_results(Attacked().execute(one, 2), INT_TIME)
    for t in threads:
        t.join(30)
    assert res["hist"].updates() == want
    assert refused == [b""]


def test_worker_exception_reaches_caller_with_traceback() -> None:
    """A user function raising in one worker fails the job with that worker's traceback."""

    def build(c: dict[str, Any]) -> Any:
        def explode_on_big(x: Any) -> Any:
            if x[0] == 499:
                raise ValueError("bad edge 499")
            return x[0]

        return c["edges"].map(explode_on_big).count_total()

    start = time.monotonic()
    with pytest.raises(WorkerError, match="bad edge 499") as info:
        run_job(build, {"edges": _edges(3000)}, workers=2, timeout=60)
    assert "explode_on_big" in str(info.value)
    assert "OperatorError" in str(info.value)
    assert time.monotonic() - start < 30


def test_worker_process_death_is_reported() -> None:
    """A worker process that dies is reported with its exit code; the job does not hang."""

    def fn(worker: Any) -> Any:
        if worker.index == 1:
            os._exit(7)
        worker.comm.all_gather(1)
        return 0

    start = time.monotonic()
    with pytest.raises(WorkerError, match="code 7|closed"):
        execute(fn, 2, timeout=30)
    assert time.monotonic() - start < 30
