"""Checkpoints: a worker's whole state written to a directory, restored by a new process.

What is saved: what the dataflow declares as its state, nothing scraped. Per operator, the
engine's progress (its output frontier, the input frontier it last ran with, its output's
record layout) and what ``op.state()`` returns (``ddflow.engine.operator``): traces,
updates held for incomplete times, pending work, captured output, an input session's
progress and buffer. Per loop scope, its ``LoopProgress``. Trace batches (immutable, and
nearly all of the bytes) go to one Parquet file each, named by an id the checkpoint gives a
batch the first time it writes it; a later checkpoint into the same directory writes only
the batches made since and refers to the others. The rest (small) is one pickle of plain
data in which batches appear by id; live dataflow objects are refused.

Lineage. A batch a spine merged since the last checkpoint need not be written at once: this
module listens to the spines' merges (``Spine.merge_listeners``) and remembers, beside the
batches and not on them, how each merged batch is rebuilt from batches already written; the
checkpoint refers to that and writes the merged batch in the background, so a large merge
never stalls a checkpoint. What a lineage keeps of unwritten batches is bounded
(``LINEAGE_KEEP_ROWS``).

A directory holds the checkpoints of one dataflow::

    COMMIT-00000007                       the commit marker of checkpoint 7 (written last)
    worker-0000/manifest-00000007.json    worker 0's files, each with size and sha256
    worker-0000/state-00000007.pkl        worker 0's state
    worker-0000/b-<id>.parquet            worker 0's batches (shared by its checkpoints)
    worker-0001/...                       the other workers of a multi-worker job

Commit protocol: every file is written under a temporary name, flushed to disk and renamed;
then (after every worker has done so) worker 0 writes the commit marker the same way. The
marker holds the sha256 of each worker's manifest, the manifest the size and sha256 of every
file it names. A checkpoint without its marker does not exist for ``restore``.

Restore checks everything before it changes anything: the marker, the manifest, every file's
size and sha256, the dataflow's fingerprint (the operator graph: kinds, names, wiring,
inputs' time and diff types, and every operator's ``state_version``), the names of each
operator's state and the number of workers. A truncated, corrupted or foreign checkpoint,
or one written by a ddflow whose state format differs, raises ``CheckpointError`` and the
worker is left exactly as it was. (The sums guard against damage, not against someone who
can write the directory: the state is a pickle, so only restore checkpoints you wrote.)

Usage::

    w.checkpoint(path)        # between steps, any time; returns what was written
    w2 = Worker(); build the same dataflow on w2 ...
    w2.restore(path)          # before w2's first step; then go on feeding input
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import pickle
import re
import secrets
import time as _time
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ddflow.core.errors import DataflowClosedError, DDError
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates
from ddflow.engine.scope import LoopProgress
from ddflow.trace.batch import TraceBatch
from ddflow.trace.merge import Merge, merge_all
from ddflow.trace.spine import Spine, TraceHandle

if TYPE_CHECKING:
    from ddflow.engine.worker import Worker

__all__ = [
    "CheckpointError",
    "CheckpointLog",
    "fingerprint",
    "latest_checkpoint",
    "restore_checkpoint",
    "write_checkpoint",
]

FORMAT = "ddflow-checkpoint"
VERSION = 2  # 2: state declared per operator (state()/state_version), lineage beside batches
_COMMIT = re.compile(r"^COMMIT-(\d{8})$")
_MANIFEST = re.compile(r"^manifest-(\d{8})\.json$")
_STATE = re.compile(r"^state-(\d{8})\.pkl$")

#: at most this many rows of unwritten batches are kept alive by a merged batch's lineage
#: (so a dataflow checkpointed once and then never again does not hold its history twice)
LINEAGE_KEEP_ROWS = 1 << 16


class CheckpointError(DDError, ValueError):
    """A checkpoint that cannot be written or restored (missing, damaged, foreign)."""


@dataclass(eq=False)
class CheckpointLog:
    """What a worker's checkpoints into one directory have written, and the lineage of the
    batches merged since (see the module docstring). A worker keeps one
    (``worker.checkpoint_log``); nothing of it lives on the trace batches themselves."""

    path: str
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # batch uid -> entry
    seq: int = 0
    inflight: dict[str, Future[dict[str, Any]]] = field(default_factory=dict)
    pool: ThreadPoolExecutor | None = None
    #: the id each batch was written under
    uids: weakref.WeakKeyDictionary[TraceBatch, str] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    #: how to rebuild a merged batch not yet written from batches that are (``lineage_of``)
    lineage: weakref.WeakKeyDictionary[TraceBatch, tuple[Any, ...]] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    #: the spines whose merges this log listens to (by id)
    spines: set[int] = field(default_factory=set)

    def uid(self, b: TraceBatch) -> str:
        """The id of batch ``b`` (a new one the first time)."""
        uid = self.uids.get(b)
        if uid is None:
            uid = secrets.token_hex(8)
            self.uids[b] = uid
        return uid

    def listen(self, spines: Sequence[Spine]) -> None:
        """Record the lineage of every merge these spines complete from now on."""
        for sp in spines:
            if id(sp) not in self.spines:
                self.spines.add(id(sp))
                sp.merge_listeners.append(self.merged)

    def merged(self, parts: Sequence[TraceBatch], since: Antichain, result: TraceBatch) -> None:
        """A spine merged ``parts`` (oldest first, times advanced by ``since``) into
        ``result``: remember how to rebuild it from written batches, so the next checkpoint
        need not write it at once (it refers to this and writes the batch in the background).

        Each part is ``("file", ref)`` once a checkpoint wrote it (only its metadata is
        kept), its own lineage if it has one, or ``("mem", batch)``; nothing when no part
        was ever written, or when the unwritten rows kept so would exceed
        ``LINEAGE_KEEP_ROWS`` (the merged batch is then written whole)."""
        if not any(p in self.uids or p in self.lineage for p in parts):
            return
        out: list[Any] = []
        kept = 0  # rows of unwritten batches the lineage keeps alive (bounded)
        for p in parts:
            lin = self.lineage.get(p)  # (read once: a background writer drops it when done)
            if lin is not None:  # not written yet (maybe being written)
                out.append(lin)
                kept += lin[3]
            elif p in self.uids:
                out.append(("file", (self.uids[p], len(p), p.key_width, p.desc, p.diff_type)))
            else:
                out.append(("mem", p))
                kept += len(p)
            if kept > LINEAGE_KEEP_ROWS:
                return
        self.lineage[result] = ("merge", tuple(out), since, kept)

    def background(self, uid: str, b: TraceBatch, wdir: str, durable: bool) -> None:
        """Write batch ``b`` (uid ``uid``) on a background thread (Parquet encoding and
        compression release the GIL); its entry joins ``files`` when done."""
        if self.pool is None:
            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ddflow-ckpt")

        def job() -> dict[str, Any]:
            entry = _write_batch(b, uid, wdir, durable)
            self.lineage.pop(b, None)  # written: what it was merged from may be freed
            return entry

        self.inflight[uid] = self.pool.submit(job)

    def settle(self, uid: str | None = None) -> None:
        """Move finished background writes into ``files`` (waiting for ``uid``'s, if given)."""
        if uid is not None and uid in self.inflight:
            self.inflight[uid].result()
        for u, fut in list(self.inflight.items()):
            if fut.done():
                del self.inflight[u]
                self.files[u] = fut.result()


def _need_pyarrow() -> None:
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError as e:
        raise CheckpointError(
            "checkpoints are Parquet files and need pyarrow: pip install 'ddflow[checkpoint]'"
        ) from e


# -- small file helpers ---------------------------------------------------------------------------


def _sha(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_file(path: str, data: bytes | memoryview, durable: bool) -> None:
    """Write ``data`` to ``path`` atomically (temporary name, flush, rename)."""
    tmp = f"{path}.tmp-{secrets.token_hex(4)}"
    with open(tmp, "wb") as f:
        f.write(data)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_checked(path: str, size: int, sha: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CheckpointError(f"checkpoint {what} {path!r} cannot be read: {e}") from e
    if len(data) != size:
        raise CheckpointError(
            f"checkpoint {what} {path!r} has {len(data)} bytes where the manifest says {size}: "
            "it is truncated or was replaced; the checkpoint is refused"
        )
    if _sha(data) != sha:
        raise CheckpointError(
            f"checkpoint {what} {path!r} does not match its checksum: it is corrupted; the "
            "checkpoint is refused"
        )
    return data


def _worker_dir(path: str, index: int) -> str:
    return os.path.join(path, f"worker-{index:04d}")


def _committed(path: str) -> list[int]:
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for n in names if (m := _COMMIT.match(n)))


def latest_checkpoint(path: str | os.PathLike[str]) -> int | None:
    """The number of the newest committed checkpoint in ``path`` (None if there is none)."""
    seqs = _committed(os.fspath(path))
    return seqs[-1] if seqs else None


# -- the dataflow's fingerprint -----------------------------------------------------------------


def fingerprint(worker: Worker) -> str:
    """A digest of the dataflow: what a checkpoint must match to be restored. It covers the
    operator graph (each operator's class, name, scope and inputs), what else an operator
    says a checkpoint must match (``identity``: an input's diff and time types) and the
    format of every operator's state (``state_version``)."""
    index = {id(op): i for i, op in enumerate(worker.operators)}
    scopes = {id(s): i for i, s in enumerate(worker.root.scopes())}
    # the trace's parts are embedded in operators' states: their formats count as well
    parts: list[Any] = [
        worker.time_kind.describe(),
        ("Spine", Spine.state_version, "TraceHandle", TraceHandle.state_version),
    ]
    for op in worker.operators:
        parts.append(
            (
                type(op).__name__,
                op.name,
                scopes[id(op.scope)],
                [index[id(s.producer)] for s in op.inputs],
                op.state_version,
                op.identity(),
            )
        )
    return _sha(repr(parts).encode())


def _spines(worker: Worker) -> list[Spine]:
    """The traces the worker's operators maintain."""
    return [s for op in worker.operators for s in op.spines()]


def _state_versions(worker: Worker) -> list[list[Any]]:
    """Each operator's class, name and state version (to say why a fingerprint differs)."""
    return [[type(op).__name__, op.name, op.state_version] for op in worker.operators]


def _fingerprint_mismatch(path: str, commit: dict[str, Any], worker: Worker) -> CheckpointError:
    """The error for a checkpoint of another dataflow, naming a state version that changed
    when that is the difference."""
    theirs, ours = commit.get("state_versions"), _state_versions(worker)
    if isinstance(theirs, list) and len(theirs) == len(ours):
        changed = [
            (o, t) for o, t in zip(ours, theirs, strict=True) if o[:2] == t[:2] and o[2] != t[2]
        ]
        if changed and all(o[:2] == t[:2] for o, t in zip(ours, theirs, strict=True)):
            (cls, name, v), (_, _, w) = changed[0]
            return CheckpointError(
                f"the checkpoint in {path!r} was written with state version {w} of operator "
                f"'{name}' ({cls}); this ddflow's is {v}: its state format changed, so the "
                "checkpoint is refused (run from the input again)"
            )
    return CheckpointError(
        f"the checkpoint in {path!r} is of another dataflow (its operators, their wiring, "
        "its inputs' types or its operators' state versions differ): build the same "
        "dataflow to restore it"
    )


# -- batches as Parquet ----------------------------------------------------------------------------


def _const(a: np.ndarray) -> bool:
    """Whether ``a`` repeats one row without storing it per row (a zero-stride view)."""
    return a.ndim >= 1 and a.shape[0] > 1 and a.strides[0] == 0


def _encode_column(a: Any, name: str, arrays: dict[str, Any]) -> Any:
    """Put column ``a`` into ``arrays`` (under ``name``...) and return how to decode it."""
    import pyarrow as pa

    if isinstance(a, tuple):  # a diff column made of component columns
        return ("tuple", [_encode_column(c, f"{name}_{j}", arrays) for j, c in enumerate(a)])
    a = np.asarray(a)
    if a.ndim == 2:  # times (n, d)
        if _const(a):
            return ("const2", a[0].tolist(), a.shape[1])
        return (
            "cols",
            [
                _encode_column(np.ascontiguousarray(a[:, j]), f"{name}_{j}", arrays)
                for j in range(a.shape[1])
            ],
        )
    if _const(a) and a.dtype != object:
        return ("const", a[:1].copy(), a.shape[0])
    if a.dtype != object:
        arrays[name] = pa.array(a)
        return ("num", name, a.dtype.str)
    values = a.tolist()
    if all(type(v) is str for v in values):
        arrays[name] = pa.array(values, pa.string())
        return ("str", name)
    arrays[name] = pa.array([pickle.dumps(v, protocol=5) for v in values], pa.binary())
    return ("pickle", name)


def _decode_column(meta: Any, table: Any, n: int) -> Any:
    kind = meta[0]
    if kind == "tuple":
        return tuple(_decode_column(m, table, n) for m in meta[1])
    if kind == "const2":
        row = np.array(meta[1], dtype=np.int64).reshape(1, meta[2])
        return np.broadcast_to(row, (n, meta[2]))
    if kind == "cols":
        cols = [_decode_column(m, table, n) for m in meta[1]]
        return np.stack(cols, axis=1) if cols else np.zeros((n, 0), np.int64)
    if kind == "const":
        return np.broadcast_to(meta[1], (n,))
    col = table.column(meta[1])
    if kind == "num":
        out = col.to_numpy()
        return out.astype(np.dtype(meta[2]), copy=False)
    values = col.to_pylist()
    out = np.empty(len(values), dtype=object)
    if kind == "str":
        out[:] = values
    else:
        out[:] = [pickle.loads(v) for v in values]
    return out


def _batch_bytes(b: TraceBatch) -> tuple[bytes, Any]:
    """A batch's columns as Parquet bytes, and how to decode them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays: dict[str, Any] = {}
    meta = {
        "data": [_encode_column(c, f"d{j}", arrays) for j, c in enumerate(b.data)],
        "times": _encode_column(b.times, "t", arrays),
        "diffs": _encode_column(b.diffs, "x", arrays),
    }
    table = pa.table(arrays) if arrays else pa.table({"_n": pa.array(np.zeros(len(b), np.int8))})
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="lz4", use_dictionary=False, write_statistics=False)
    return sink.getvalue(), meta


def _write_batch(b: TraceBatch, uid: str, wdir: str, durable: bool) -> dict[str, Any]:
    data, meta = _batch_bytes(b)
    name = f"b-{uid}.parquet"
    _write_file(os.path.join(wdir, name), data, durable)
    return {
        "file": name,
        "bytes": len(data),
        "sha256": _sha(data),
        "rows": len(b),
        "meta": meta,
        "finished": _time.time(),
    }


def _batch_from_bytes(
    data: bytes, n: int, key_width: int, desc: Any, dt: Any, meta: Any
) -> TraceBatch:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # (one thread: Arrow's reader pool, torn down at interpreter exit while a worker is
    # still alive, can abort the process after it has finished its work)
    table = pq.read_table(pa.BufferReader(data), use_threads=False)
    if table.num_rows != n:
        raise CheckpointError(f"a checkpoint batch has {table.num_rows} rows, expected {n}")
    cols = tuple(_decode_column(m, table, n) for m in meta["data"])
    times = _decode_column(meta["times"], table, n)
    diffs = _decode_column(meta["diffs"], table, n)
    return TraceBatch(key_width, Updates(cols, times, diffs, dt), desc)


# -- pickling the state ----------------------------------------------------------------------------


#: where the classes of the live dataflow are defined (their objects are never state)
_LIVE_MODULES = (
    "ddflow.engine.",
    "ddflow.io.",
    "ddflow.operators.",
    "ddflow.dataflow.",
    "ddflow.runtimes.",
)


def _is_data(obj: Any) -> bool:
    """Whether ``obj`` may appear in a checkpoint's state: anything but objects of the live
    dataflow (operators, streams, scopes, workers, sessions, spines, their handles and
    merges), which a state must not hold."""
    if isinstance(obj, (Spine, TraceHandle, Merge)):
        return False
    return not type(obj).__module__.startswith(_LIVE_MODULES)


class _StatePickler(pickle.Pickler):
    """Pickles declared state: plain data, trace batches by id (their columns go to Parquet
    files); any object of the live dataflow is refused."""

    def __init__(self, f: Any, on_batch: Any) -> None:
        super().__init__(f, protocol=5)
        self._on_batch = on_batch

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, TraceBatch):
            return self._on_batch(obj)
        if not _is_data(obj):
            raise pickle.PicklingError(
                f"an operator's state holds a {type(obj).__name__} ({type(obj).__module__}); "
                "state() must return data, not objects of the dataflow"
            )
        return None


class _StateUnpickler(pickle.Unpickler):
    def __init__(self, f: Any, load_batch: Any) -> None:
        super().__init__(f)
        self._load_batch = load_batch

    def persistent_load(self, pid: Any) -> Any:
        tag = pid[0]
        if tag == "batch":
            return self._load_batch(pid)
        if tag == "lineage":
            b = self._rebuild(pid[1])
            if b.desc != pid[2]:
                raise CheckpointError(
                    "a checkpoint batch rebuilt from its lineage does not cover the times it should"
                )
            return b
        raise CheckpointError(f"unknown reference {tag!r} in a checkpoint's state")

    def _rebuild(self, node: Any) -> TraceBatch:
        """A batch from a lineage tree: written batches merged as the spine merged them."""
        if node[0] == "batch":
            return self._load_batch(node)
        if node[0] != "merge":
            raise CheckpointError(f"unknown lineage node {node[0]!r} in a checkpoint's state")
        return merge_all([self._rebuild(p) for p in node[1]], node[2])


def _state_of(worker: Worker) -> dict[str, Any]:
    """Everything the worker's dataflow declares as its state (see the module docstring)."""
    ops = []
    for op in worker.operators:
        st = op.state() if op.state_version is not None else None
        ops.append(
            {
                "frontier": op.frontier,
                "seen": op.seen,
                "layout": op.output.layout,
                "keys": None if st is None else sorted(st),
                "state": st,
            }
        )
    scopes = [
        {f.name: getattr(s.progress, f.name) for f in dataclasses.fields(s.progress)}
        for s in worker.root.scopes()
    ]
    return {"ops": ops, "scopes": scopes}


def _check_directory(path: str, worker: Worker, fp: str) -> int:
    """The newest committed checkpoint in ``path`` (0 if none), after checking that it is a
    checkpoint of this dataflow (a directory holds the checkpoints of one dataflow)."""
    seqs = _committed(path)
    if not seqs:
        return 0
    commit = _read_commit(path, seqs[-1])
    if commit.get("fingerprint") != fp:
        raise CheckpointError(
            f"{path!r} holds checkpoints of another dataflow; write this one elsewhere"
        )
    if int(commit.get("peers", -1)) != worker.peers:
        raise CheckpointError(
            f"{path!r} holds checkpoints of {commit.get('peers')} worker(s); this job has "
            f"{worker.peers}"
        )
    return seqs[-1]


def write_checkpoint(
    worker: Worker,
    path: str | os.PathLike[str],
    *,
    meta: dict[str, Any] | None = None,
    durable: bool = True,
    keep: int = 2,
) -> dict[str, Any]:
    """Write a checkpoint of ``worker`` into ``path`` (see the module docstring).

    With several workers every worker calls this at the same point (between the same steps).
    Only batches not written by an earlier checkpoint of this worker into ``path`` are
    written. ``durable`` flushes files to disk before the commit; the ``keep`` newest
    checkpoints are kept, older ones (and batch files only they used) are deleted.
    ``meta`` (JSON values) is stored in the commit marker and returned by ``restore`` (job
    drivers keep their progress there). Returns statistics: ``seq``, ``seconds``,
    ``batches_written``, ``bytes_written``, ``batches_total``, ``state_bytes``,
    ``batches_by_lineage`` (merged batches referred to by what they were merged from, and
    written in the background, so a large merge never stalls a checkpoint).
    """
    t0 = _time.perf_counter()
    t_wall = _time.time()
    path = os.fspath(path)
    if worker.failed is not None:
        raise DataflowClosedError(
            f"this dataflow stopped after an error ({worker.failed}); it cannot be checkpointed"
        )
    _need_pyarrow()
    fp = fingerprint(worker)
    os.makedirs(path, exist_ok=True)
    last = _check_directory(path, worker, fp)
    wdir = _worker_dir(path, worker.index)
    os.makedirs(wdir, exist_ok=True)
    mine = [int(m.group(1)) for n in os.listdir(wdir) if (m := _MANIFEST.match(n))]
    seq = max([last, *mine]) + 1
    if worker.peers > 1:
        seq = max(worker.comm.all_gather(seq))

    written = worker.checkpoint_log
    if written is None or written.path != os.path.abspath(path):
        written = CheckpointLog(os.path.abspath(path))
    written.listen(_spines(worker))
    files: dict[str, dict[str, Any]] = {}
    new_bytes = 0
    new_batches = 0

    written.settle()
    by_lineage = 0

    def batch_pid(uid: str, b: TraceBatch, entry: dict[str, Any]) -> Any:
        files[uid] = entry
        return ("batch", uid, len(b), b.key_width, b.desc, b.diff_type, entry["meta"])

    def known(uid: str | None) -> dict[str, Any] | None:
        if uid is None:
            return None
        written.settle(uid)
        entry = files.get(uid) or written.files.get(uid)
        if entry is None or not os.path.exists(os.path.join(wdir, entry["file"])):
            return None
        return entry

    def lineage_pid(node: Any) -> Any:
        """The pid of a lineage tree; raises KeyError if a file it names is gone."""
        tag = node[0]
        if tag == "file":
            uid, n, key_width, desc, dt = node[1]
            entry = known(uid)
            if entry is None:
                raise KeyError(uid)
            files[uid] = entry
            return ("batch", uid, n, key_width, desc, dt, entry["meta"])
        if tag == "mem":
            return on_batch(node[1])
        return ("merge", tuple(lineage_pid(p) for p in node[1]), node[2])

    def on_batch(b: TraceBatch) -> Any:
        nonlocal new_bytes, new_batches, by_lineage
        lin = written.lineage.get(b)
        uid = written.uids.get(b)
        if (
            lin is not None
            and uid is not None
            and uid in written.inflight
            and not written.inflight[uid].done()
        ):
            # still being written: refer to its lineage again rather than wait
            try:
                tree = lineage_pid(lin)
                by_lineage += 1
                return ("lineage", tree, b.desc)
            except KeyError:
                pass
        entry = known(uid)
        if entry is not None:
            assert uid is not None
            return batch_pid(uid, b, entry)
        if lin is not None and uid is None:
            # Refer to what it was merged from (written already) and write it in the
            # background: a large merge does not stall this checkpoint.
            try:
                tree = lineage_pid(lin)
            except KeyError:
                tree = None
            if tree is not None:
                by_lineage += 1
                written.background(written.uid(b), b, wdir, durable)
                return ("lineage", tree, b.desc)
        uid = written.uid(b)
        entry = _write_batch(b, uid, wdir, durable)
        new_bytes += entry["bytes"]
        new_batches += 1
        return batch_pid(uid, b, entry)

    buf = io.BytesIO()
    try:
        _StatePickler(buf, on_batch).dump(_state_of(worker))
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise CheckpointError(
            f"the dataflow's state cannot be written: {type(e).__name__}: {e} (state must be "
            "data; user diff classes must be importable, i.e. defined at module level)"
        ) from e
    state = buf.getvalue()
    state_name = f"state-{seq:08d}.pkl"
    _write_file(os.path.join(wdir, state_name), state, durable)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "seq": seq,
        "fingerprint": fp,
        "worker": worker.index,
        "peers": worker.peers,
        "created": _time.time(),
        "state": {"file": state_name, "bytes": len(state), "sha256": _sha(state)},
        "batches": {
            uid: {k: v for k, v in e.items() if k not in ("meta", "finished")}
            for uid, e in files.items()
        },
    }
    mbytes = json.dumps(manifest, sort_keys=True).encode()
    _write_file(os.path.join(wdir, f"manifest-{seq:08d}.json"), mbytes, durable)
    if durable:
        _fsync_dir(wdir)
    msha = _sha(mbytes)
    shas = worker.comm.all_gather(msha) if worker.peers > 1 else [msha]
    if worker.index == 0:
        commit = {
            "format": FORMAT,
            "version": VERSION,
            "seq": seq,
            "fingerprint": fp,
            "state_versions": _state_versions(worker),
            "peers": worker.peers,
            "meta": meta,
            "manifests": shas,
        }
        _write_file(
            os.path.join(path, f"COMMIT-{seq:08d}"),
            json.dumps(commit, sort_keys=True).encode(),
            durable,
        )
        if durable:
            _fsync_dir(path)
    if worker.peers > 1:
        worker.comm.all_gather(True)  # nobody goes on before the commit exists
    written.settle()
    written.files = {
        **{u: e for u, e in written.files.items() if u not in files and _is_fresh(e, t_wall)},
        **files,
    }
    written.seq = seq
    worker.checkpoint_log = written
    busy = {f"b-{u}.parquet" for u in written.inflight} | {
        e["file"] for e in written.files.values()
    }
    _collect(path, wdir, worker.index, keep, busy)
    return {
        "seq": seq,
        "seconds": _time.perf_counter() - t0,
        "batches_written": new_batches,
        "bytes_written": new_bytes + len(state) + len(mbytes),
        "batches_total": len(files),
        "batches_by_lineage": by_lineage,
        "state_bytes": len(state),
    }


def _is_fresh(entry: dict[str, Any], since: float) -> bool:
    """Whether a batch file was finished (in the background) after ``since``: not yet
    named by a manifest, but about to be."""
    return float(entry.get("finished", 0.0)) >= since


def _collect(path: str, wdir: str, index: int, keep: int, busy: set[str]) -> None:
    """Delete checkpoints older than the ``keep`` newest committed ones, and batch files no
    kept manifest names."""
    seqs = _committed(path)
    kept = set(seqs[-max(keep, 1) :])
    if not kept:
        return
    oldest = min(kept)
    used: set[str] = set()
    for name in os.listdir(wdir):
        m = _MANIFEST.match(name) or _STATE.match(name)
        if m and int(m.group(1)) not in kept and int(m.group(1)) < max(kept):
            # older than the kept ones, or a checkpoint that was never committed
            _unlink(os.path.join(wdir, name))
    for seq in kept:
        try:
            with open(os.path.join(wdir, f"manifest-{seq:08d}.json"), "rb") as f:
                used.update(e["file"] for e in json.loads(f.read())["batches"].values())
        except (OSError, ValueError, KeyError):
            return  # cannot tell what is in use: delete nothing
    for name in os.listdir(wdir):
        if name.startswith("b-") and name not in used and name not in busy and ".tmp-" not in name:
            _unlink(os.path.join(wdir, name))
    if index == 0:
        for seq in seqs:
            if seq < oldest:
                _unlink(os.path.join(path, f"COMMIT-{seq:08d}"))


def _unlink(p: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(p)


# -- restoring -------------------------------------------------------------------------------------


def _read_commit(path: str, seq: int) -> dict[str, Any]:
    p = os.path.join(path, f"COMMIT-{seq:08d}")
    try:
        with open(p, "rb") as f:
            commit = json.loads(f.read())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"checkpoint commit marker {p!r} cannot be read: {e}") from e
    if not isinstance(commit, dict) or commit.get("format") != FORMAT:
        raise CheckpointError(f"{p!r} is not a ddflow checkpoint commit marker")
    if commit.get("version") != VERSION:
        raise CheckpointError(
            f"{p!r} is a checkpoint of format version {commit.get('version')}; this ddflow "
            f"reads version {VERSION}"
        )
    return commit


def restore_checkpoint(
    worker: Worker, path: str | os.PathLike[str], *, seq: int | None = None
) -> dict[str, Any]:
    """Load the newest committed checkpoint in ``path`` (or checkpoint ``seq``) into
    ``worker``, which must host the same dataflow, built and not yet stepped.

    Everything is read and checked before the worker changes; on any problem
    ``CheckpointError`` is raised and the worker is as it was. Returns ``seq``, ``meta`` (what
    the writer passed), ``seconds`` and ``batches``.
    """
    t0 = _time.perf_counter()
    path = os.fspath(path)
    _need_pyarrow()
    if worker.started:
        raise CheckpointError(
            "restore into a worker that has not run yet: build the dataflow, restore, then step"
        )
    seqs = _committed(path)
    if not seqs:
        raise CheckpointError(f"no committed checkpoint in {path!r}")
    if seq is None:
        seq = seqs[-1]
    elif seq not in seqs:
        raise CheckpointError(f"checkpoint {seq} is not committed in {path!r} (have {seqs})")
    commit = _read_commit(path, seq)
    fp = fingerprint(worker)
    if commit.get("fingerprint") != fp:
        raise _fingerprint_mismatch(path, commit, worker)
    if commit.get("state_versions") != _state_versions(worker):
        raise CheckpointError(
            f"checkpoint commit marker of {path!r} does not match its fingerprint: it is "
            "corrupted; the checkpoint is refused"
        )
    peers = int(commit.get("peers", -1))
    if peers != worker.peers:
        raise CheckpointError(
            f"the checkpoint in {path!r} was written by {peers} worker(s); restore it with "
            f"{peers}, not {worker.peers}"
        )
    wdir = _worker_dir(path, worker.index)
    mpath = os.path.join(wdir, f"manifest-{seq:08d}.json")
    try:
        with open(mpath, "rb") as f:
            mbytes = f.read()
    except OSError as e:
        raise CheckpointError(f"checkpoint manifest {mpath!r} cannot be read: {e}") from e
    shas = commit.get("manifests") or []
    if worker.index >= len(shas) or _sha(mbytes) != shas[worker.index]:
        raise CheckpointError(
            f"checkpoint manifest {mpath!r} does not match its commit marker: it is corrupted "
            "or from another checkpoint; the checkpoint is refused"
        )
    manifest = json.loads(mbytes)
    st = manifest["state"]
    state_bytes = _read_checked(
        os.path.join(wdir, st["file"]), st["bytes"], st["sha256"], "state file"
    )
    entries: dict[str, dict[str, Any]] = manifest["batches"]
    loaded: dict[str, TraceBatch] = {}

    def load_batch(pid: Any) -> TraceBatch:
        _, uid, n, key_width, desc, dt, meta = pid
        b = loaded.get(uid)
        if b is not None:
            return b
        e = entries.get(uid)
        if e is None:
            raise CheckpointError(f"checkpoint state names batch {uid}, absent from its manifest")
        data = _read_checked(os.path.join(wdir, e["file"]), e["bytes"], e["sha256"], "batch")
        try:
            b = _batch_from_bytes(data, n, key_width, desc, dt, meta)
        except CheckpointError:
            raise
        except Exception as ex:  # noqa: BLE001 - any decoding failure means a bad file
            raise CheckpointError(f"checkpoint batch {e['file']!r} cannot be decoded: {ex}") from ex
        loaded[uid] = b
        e["meta"] = meta
        return b

    try:
        state = _StateUnpickler(io.BytesIO(state_bytes), load_batch).load()
    except CheckpointError:
        raise
    except Exception as e:  # noqa: BLE001 - a state that does not load is refused whole
        raise CheckpointError(f"checkpoint state cannot be loaded: {type(e).__name__}: {e}") from e
    scopes = worker.root.scopes()
    if len(state["ops"]) != len(worker.operators) or len(state["scopes"]) != len(scopes):
        raise CheckpointError("the checkpoint's state does not fit this dataflow's operators")
    for op, rec in zip(worker.operators, state["ops"], strict=True):
        here = None if op.state_version is None else sorted(op.state())
        if rec["keys"] != here:
            raise CheckpointError(
                f"the checkpoint holds state {rec['keys']} for operator '{op.name}' "
                f"({type(op).__name__}), which now has {here} under the same state version "
                f"{op.state_version}: this ddflow's state format differs from the one that "
                "wrote the checkpoint; the checkpoint is refused (run from the input again)"
            )

    # Everything is read and checked: apply.
    for op, rec in zip(worker.operators, state["ops"], strict=True):
        op.frontier, op.seen, op.output.layout = rec["frontier"], rec["seen"], rec["layout"]
        if rec["state"] is not None:
            op.load_state(rec["state"])
    for sc, progress in zip(scopes, state["scopes"], strict=True):
        sc.progress = LoopProgress(**progress)
    log = CheckpointLog(
        os.path.abspath(path), {uid: e for uid, e in entries.items() if "meta" in e}, seq
    )
    for uid, b in loaded.items():
        log.uids[b] = uid
    log.listen(_spines(worker))
    worker.checkpoint_log = log
    return {
        "seq": seq,
        "meta": commit.get("meta"),
        "seconds": _time.perf_counter() - t0,
        "batches": len(loaded),
    }
