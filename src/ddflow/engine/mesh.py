"""A TCP mesh: one authenticated connection between every pair of a job's workers.

Why: Spark barrier tasks (and local worker processes) must exchange columnar batches every
step; ``BarrierTaskContext.allGather`` costs about a second per call, a socket round trip a
few microseconds. The mesh is set up once per job: every worker opens a ``Listener`` on its
own address, the addresses are swapped once (Spark's ``allGather`` or the parent process),
then worker ``j`` connects to every worker ``i < j`` and accepts from every ``i > j``.

Security, the rules:

* Every job has a random secret (32 bytes). A connection proves it in both directions with
  HMAC-SHA256 over fresh nonces before anything else is read: the acceptor sends a nonce,
  the connector answers with its index, its own nonce and ``HMAC(secret, "connect" | nonces
  | index)``, the acceptor answers ``HMAC(secret, "accept" | nonces | its index)``. The
  handshake reads fixed-size byte strings only and compares them with
  ``hmac.compare_digest``; a failed or silent (``handshake_timeout``) peer is disconnected
  and the worker goes on waiting for its real peers.
* Nothing is unpickled until its connection is authenticated; after that, frames carry
  pickled messages (protocol 5, numpy buffers out of band, so columns are not copied).
* The listener binds to the task's own address, never to all interfaces, and closes once
  the mesh is complete: later connections are refused by the operating system.

Frames: ``kind (1 byte) | number of buffers (4) | body length (8)``, then the body: the
lengths of the pickle and of each buffer (8 bytes each), the pickle, the buffers.
``exchange`` sends and receives at once through non-blocking sockets, so two workers sending
each other large messages cannot deadlock on full socket buffers.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import selectors
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from ddflow.engine.comm import MeshError, PeerAborted

__all__ = ["Listener", "Mesh", "new_secret"]

_MAGIC = b"DDF1"
_NONCE = 32
_MAC = 32
_HEADER = struct.Struct("<BIQ")
_DATA, _ABORT = 1, 2


def new_secret() -> bytes:
    """A fresh per-job secret."""
    return os.urandom(32)


def _mac(secret: bytes, *parts: bytes) -> bytes:
    return hmac.new(secret, b"".join(parts), hashlib.sha256).digest()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise MeshError("connection closed during the handshake")
        got += k
    return bytes(buf)


class Listener:
    """A listening socket on this worker's own address (port chosen by the system)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(64)
        self.refused = 0  # connections that failed the handshake

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return str(host), int(port)

    def close(self) -> None:
        self.sock.close()


class Mesh:
    """The connections of worker ``index`` to its peers; see the module docstring."""

    def __init__(
        self, index: int, socks: list[socket.socket | None], timeout: float | None
    ) -> None:
        self.index = index
        self.peers = len(socks)
        self.socks = socks
        self.timeout = timeout
        self.sel = selectors.DefaultSelector()
        for s in socks:
            if s is not None:
                s.setblocking(False)
        self.bytes_sent = 0
        self.bytes_received = 0

    # -- set-up ---------------------------------------------------------------------------------
    @staticmethod
    def connect(
        index: int,
        addresses: list[tuple[str, int]],
        listener: Listener,
        secret: bytes,
        *,
        timeout: float | None = 600.0,
        handshake_timeout: float = 10.0,
        setup_timeout: float = 120.0,
    ) -> Mesh:
        """Build worker ``index``'s connections; ``addresses[i]`` is worker ``i``'s listener."""
        peers = len(addresses)
        socks: list[socket.socket | None] = [None] * peers
        deadline = time.monotonic() + setup_timeout
        try:
            for j in range(index):
                socks[j] = _dial(index, j, addresses[j], secret, handshake_timeout, deadline)
            _accept_peers(
                index,
                listener,
                secret,
                set(range(index + 1, peers)),
                socks,
                handshake_timeout,
                deadline,
            )
        except BaseException:
            for s in socks:
                if s is not None:
                    s.close()
            raise
        finally:
            listener.close()
        return Mesh(index, socks, timeout)

    @staticmethod
    def hub(
        index: int,
        peers: int,
        listener: Listener,
        secret: bytes,
        *,
        timeout: float | None = 600.0,
        handshake_timeout: float = 10.0,
        setup_timeout: float = 120.0,
        waiting: Callable[[], None] | None = None,
    ) -> Mesh:
        """The centre of a star: member ``index`` accepts one connection from every other of
        the ``peers`` members (each made with ``Mesh.spoke``); members do not connect to
        each other. ``waiting`` is called about once a second while members are missing
        (it may raise to give up). The listener stays open."""
        socks: list[socket.socket | None] = [None] * peers
        deadline = time.monotonic() + setup_timeout
        try:
            _accept_peers(
                index,
                listener,
                secret,
                set(range(peers)) - {index},
                socks,
                handshake_timeout,
                deadline,
                waiting,
            )
        except BaseException:
            for s in socks:
                if s is not None:
                    s.close()
            raise
        return Mesh(index, socks, timeout)

    @staticmethod
    def spoke(
        index: int,
        peers: int,
        hub: int,
        address: tuple[str, int],
        secret: bytes,
        *,
        timeout: float | None = None,
        handshake_timeout: float = 10.0,
        setup_timeout: float = 120.0,
    ) -> Mesh:
        """Member ``index``'s one connection, to the centre ``hub`` of a star at
        ``address`` (see ``Mesh.hub``)."""
        socks: list[socket.socket | None] = [None] * peers
        deadline = time.monotonic() + setup_timeout
        socks[hub] = _dial(index, hub, address, secret, handshake_timeout, deadline)
        return Mesh(index, socks, timeout)

    # -- point to point -------------------------------------------------------------------------
    def send(self, messages: dict[int, Any]) -> None:
        """Sends ``messages[j]`` to each member ``j`` (returns once all are written)."""
        sending = {j: _encode(m) for j, m in messages.items()}
        for j in sending:
            if self.socks[j] is None:
                raise ValueError(f"member {self.index} has no connection to member {j}")
        self._pump(sending, {}, [None] * self.peers)

    def receive(self, members: list[int]) -> dict[int, Any]:
        """One message from each of ``members``."""
        out: list[Any] = [None] * self.peers
        self._pump({}, {j: _Incoming() for j in members}, out)
        return {j: out[j] for j in members}

    # -- collectives ----------------------------------------------------------------------------
    def exchange(self, parts: list[Any]) -> list[Any]:
        """All-to-all (see ``ddflow.engine.comm``)."""
        if len(parts) != self.peers:
            raise ValueError(f"exchange needs one message per worker ({self.peers})")
        out: list[Any] = [None] * self.peers
        out[self.index] = parts[self.index]
        sending: dict[int, list[memoryview]] = {}
        receiving: dict[int, _Incoming] = {}
        for j, s in enumerate(self.socks):
            if s is None:
                continue
            sending[j] = _encode(parts[j])
            receiving[j] = _Incoming()
        self._pump(sending, receiving, out)
        return out

    def all_gather(self, obj: Any) -> list[Any]:
        return self.exchange([obj] * self.peers)

    def abort(self, message: str) -> None:
        body = message.encode("utf-8", "replace")[:65536]
        frame = _HEADER.pack(_ABORT, 0, len(body)) + body
        for s in self.socks:
            if s is None:
                continue
            try:
                s.setblocking(True)
                s.settimeout(2.0)
                s.sendall(frame)
            except OSError:
                pass

    def close(self) -> None:
        self.sel.close()
        for s in self.socks:
            if s is not None:
                s.close()
        self.socks = [None] * self.peers

    # -- internals ------------------------------------------------------------------------------
    def _pump(
        self, sending: dict[int, list[memoryview]], receiving: dict[int, _Incoming], out: list[Any]
    ) -> None:
        sel = self.sel
        registered: dict[int, int] = {}

        def want(j: int) -> int:
            ev = 0
            if j in sending:
                ev |= selectors.EVENT_WRITE
            if j in receiving:
                ev |= selectors.EVENT_READ
            return ev

        try:
            for j in set(sending) | set(receiving):
                ev = want(j)
                sel.register(self.socks[j], ev, j)  # type: ignore[arg-type]
                registered[j] = ev
            # Try sending right away: small messages usually fit the socket buffer.
            for j in list(sending):
                self._send_some(j, sending)
            while sending or receiving:
                for j in list(registered):
                    ev = want(j)
                    if ev == 0:
                        sel.unregister(self.socks[j])  # type: ignore[arg-type]
                        del registered[j]
                    elif ev != registered[j]:
                        sel.modify(self.socks[j], ev, j)  # type: ignore[arg-type]
                        registered[j] = ev
                if not registered:
                    break
                events = sel.select(self.timeout)
                if not events:
                    raise MeshError(
                        f"worker {self.index}: no progress from workers "
                        f"{sorted(set(sending) | set(receiving))} for {self.timeout} s"
                    )
                for key, mask in events:
                    j = key.data
                    if mask & selectors.EVENT_WRITE and j in sending:
                        self._send_some(j, sending)
                    if mask & selectors.EVENT_READ and j in receiving:
                        inc = receiving[j]
                        if inc.feed(self.socks[j], j):
                            self.bytes_received += inc.size
                            out[j] = inc.message(j)
                            del receiving[j]
        finally:
            for j in registered:
                sel.unregister(self.socks[j])  # type: ignore[arg-type]

    def _send_some(self, j: int, sending: dict[int, list[memoryview]]) -> None:
        bufs = sending[j]
        s = self.socks[j]
        assert s is not None
        try:
            n = s.sendmsg(bufs[:64])
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            raise MeshError(f"worker {self.index}: sending to worker {j} failed: {e}") from e
        self.bytes_sent += n
        while n and bufs:
            if n >= len(bufs[0]):
                n -= len(bufs[0])
                bufs.pop(0)
            else:
                bufs[0] = bufs[0][n:]
                n = 0
        if not bufs:
            del sending[j]


def _encode(obj: Any) -> list[memoryview]:
    buffers: list[pickle.PickleBuffer] = []
    main = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    lengths = struct.pack(f"<{len(raws) + 1}Q", len(main), *(len(r) for r in raws))
    body_len = len(lengths) + len(main) + sum(len(r) for r in raws)
    head = _HEADER.pack(_DATA, len(raws), body_len) + lengths
    return [memoryview(head), memoryview(main)] + [r for r in raws if len(r)]


class _Incoming:
    """Receive state of one frame from one peer."""

    def __init__(self) -> None:
        self.head = bytearray(_HEADER.size)
        self.head_got = 0
        self.body: bytearray | None = None
        self.body_got = 0
        self.kind = 0
        self.nbuf = 0
        self.size = 0

    def feed(self, sock: socket.socket, peer: int) -> bool:
        """Read what is available; True once the frame is complete."""
        try:
            if self.body is None:
                k = sock.recv_into(memoryview(self.head)[self.head_got :])
                if k == 0:
                    raise MeshError(f"worker {peer} closed its connection (did it die?)")
                self.head_got += k
                if self.head_got < _HEADER.size:
                    return False
                self.kind, self.nbuf, size = _HEADER.unpack(self.head)
                if self.kind not in (_DATA, _ABORT):
                    raise MeshError(f"worker {peer} sent a malformed frame")
                self.size = size
                self.body = bytearray(size)
                if size == 0:
                    return True
            k = sock.recv_into(memoryview(self.body)[self.body_got :])
            if k == 0:
                raise MeshError(f"worker {peer} closed its connection mid-message (did it die?)")
            self.body_got += k
            return self.body_got == len(self.body)
        except (BlockingIOError, InterruptedError):
            return False
        except ConnectionError as e:
            raise MeshError(f"connection to worker {peer} failed: {e}") from e

    def message(self, peer: int) -> Any:
        assert self.body is not None
        if self.kind == _ABORT:
            raise PeerAborted(peer, self.body.decode("utf-8", "replace"))
        n = self.nbuf + 1
        lengths = struct.unpack_from(f"<{n}Q", self.body, 0)
        view = memoryview(self.body)
        pos = 8 * n
        main = view[pos : pos + lengths[0]]
        pos += lengths[0]
        bufs = []
        for ln in lengths[1:]:
            bufs.append(view[pos : pos + ln])
            pos += ln
        return pickle.loads(main, buffers=bufs)


def _accept_peers(
    me: int,
    listener: Listener,
    secret: bytes,
    missing: set[int],
    socks: list[socket.socket | None],
    hs_timeout: float,
    deadline: float,
    waiting: Callable[[], None] | None = None,
) -> None:
    """Accepts authenticated connections from every member of ``missing`` into ``socks``."""
    while missing:
        left = deadline - time.monotonic()
        if left <= 0:
            raise MeshError(
                f"worker {me}: workers {sorted(missing)} did not connect within the set-up time"
            )
        listener.sock.settimeout(min(left, 1.0) if waiting is not None else left)
        try:
            conn, _ = listener.sock.accept()
        except TimeoutError:
            if waiting is not None:
                waiting()
            continue
        peer = _accept(me, conn, secret, missing, hs_timeout)
        if peer is None:
            listener.refused += 1
            conn.close()
            continue
        missing.discard(peer)
        socks[peer] = conn


def _dial(
    me: int, peer: int, addr: tuple[str, int], secret: bytes, hs_timeout: float, deadline: float
) -> socket.socket:
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            s = socket.create_connection(addr, timeout=hs_timeout)
        except OSError as e:
            last = e
            time.sleep(0.05)
            continue
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hello = _recv_exact(s, len(_MAGIC) + _NONCE)
            if hello[: len(_MAGIC)] != _MAGIC:
                raise MeshError(f"worker {peer} at {addr} does not speak the ddflow mesh protocol")
            nonce_a = hello[len(_MAGIC) :]
            nonce_c = os.urandom(_NONCE)
            idx = struct.pack("<I", me)
            s.sendall(idx + nonce_c + _mac(secret, b"connect", nonce_a, nonce_c, idx))
            reply = _recv_exact(s, _MAC)
            want = _mac(secret, b"accept", nonce_a, nonce_c, struct.pack("<I", peer))
            if not hmac.compare_digest(reply, want):
                raise MeshError(f"worker {peer} at {addr} failed to prove the job's secret")
            s.settimeout(None)
            return s
        except BaseException:
            s.close()
            raise
    raise MeshError(f"worker {me} could not connect to worker {peer} at {addr}: {last}")


def _accept(
    me: int, conn: socket.socket, secret: bytes, expected: set[int], hs_timeout: float
) -> int | None:
    """The peer index of an authenticated connection, or None (the caller closes it)."""
    try:
        conn.settimeout(hs_timeout)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        nonce_a = os.urandom(_NONCE)
        conn.sendall(_MAGIC + nonce_a)
        msg = _recv_exact(conn, 4 + _NONCE + _MAC)
        idx, nonce_c, mac = msg[:4], msg[4 : 4 + _NONCE], msg[4 + _NONCE :]
        if not hmac.compare_digest(mac, _mac(secret, b"connect", nonce_a, nonce_c, idx)):
            return None
        peer = struct.unpack("<I", idx)[0]
        if peer not in expected:
            return None
        conn.sendall(_mac(secret, b"accept", nonce_a, nonce_c, struct.pack("<I", me)))
        conn.settimeout(None)
        return int(peer)
    except (OSError, MeshError):
        return None
