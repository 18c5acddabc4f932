"""The in-process worker: it hosts a dataflow graph and steps its operators in order.

Progress ("when is a time complete") and compute ("what each operator does") meet only here.
The graph is acyclic and operators are created in topological order, so one ``step`` runs
each operator once, in creation order: an operator's input frontier is the meet of its
upstream operators' output frontiers, and an input session's frontier is ``{its time}``
(empty once closed). Operators act on all updates whose times the frontier has passed, in
one vectorized batch however many distinct times it holds.

A step is transactional per operator: an operator that raises leaves its inbox as it was and
has pushed nothing, so the error reaches the caller and the dataflow stays usable. Only
batches it refuses (a ``DataError`` naming them in ``refused``, e.g. records of another
shape reaching a ``concat``) are dropped, so a later step does not meet them again.

Several workers: a worker built with a communicator (``ddflow.runtime.comm``) is one of
``peers`` workers that each host the same dataflow for a share of the keys. Keyed operators
are preceded by an ``Exchange`` (``ddflow.runtime.exchange``) that routes updates by key and
takes the meet of all workers' frontiers, so a time is complete downstream only when it is
complete everywhere. All workers step in lockstep: exchanges run at every step, and ``step``,
``step_while`` and ``run`` decide together (any worker busy or wanting to continue keeps
everyone going). An error in one worker fails the whole job (the communicator tells the
peers); only a single worker can carry on after an operator raised.

Loops: operators live in scopes (``ddflow.runtime.scope``). The root scope's nodes run in
a topological order; an iterative scope runs as one node, in rounds until its loop has no
work left at complete outer times.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ddflow.core.columns import (
    Layout,
    Leaf,
    Tup,
    infer_layout,
    layout_of_view,
    unordered_set_message,
)
from ddflow.core.diff import INT_DIFF, DiffType, diff_type_of
from ddflow.core.errors import (
    DataError,
    DataflowClosedError,
    DiffTypeError,
    RetractionError,
    ScopeError,
    SessionClosedError,
    TimeError,
)
from ddflow.core.frontier import Antichain
from ddflow.core.time import INT_TIME, TimeKind, time_kind_of
from ddflow.core.updates import (
    Updates,
    accumulated_at,
    concat_updates,
    consolidate,
    update_records,
)
from ddflow.runtime.comm import Communicator, LocalComm
from ddflow.runtime.scope import IterationLimitError, Scope

__all__ = ["Capture", "InputSession", "Operator", "Probe", "Stream", "Worker"]


class Stream:
    """The output edge of an operator: its consumers and the layout of its records."""

    def __init__(self, worker: Worker, producer: Operator) -> None:
        self.worker = worker
        self.producer = producer
        self.layout: Layout | None = None
        self.consumers: list[tuple[Operator, int]] = []

    @property
    def producer_scope(self) -> Scope:
        """The scope whose times this stream carries (a ``leave`` produces the parent's)."""
        p = self.producer
        if getattr(p, "leaves_scope", False):
            parent = p.scope.parent
            assert parent is not None
            return parent
        return p.scope

    def set_layout(self, layout: Layout) -> None:
        if self.layout is None:
            self.layout = layout
        elif self.layout.width != layout.width:
            raise DataError(
                f"operator '{self.producer.name}' produced records of shape {layout} after "
                f"records of shape {self.layout}; a collection's records must keep one shape"
            )

    def push(self, u: Updates | Any, layout: Layout | None = None) -> None:
        if layout is not None:
            self.set_layout(layout)
        if isinstance(u, Updates) and len(u) == 0:
            return
        for op, port in self.consumers:
            op.inbox[port].append(u)


class Operator:
    """A dataflow node: reads its inboxes when its input frontier allows, pushes downstream."""

    name = "operator"
    always_run = False  # run at every step even without input (exchanges)

    def __init__(self, worker: Worker, inputs: Sequence[Stream], name: str | None = None, *,
                 scope: Scope | None = None) -> None:
        self.worker = worker
        if name is not None:
            self.name = name
        self.inputs = list(inputs)
        if scope is None:
            scope = _common_scope(worker, self.inputs, self.name)
        self.scope = scope
        self.kind = scope.kind
        self.inbox: list[list[Any]] = [[] for _ in inputs]
        self.output = Stream(worker, self)
        self.frontier = Antichain.of([self.kind.minimum()], self.kind.dim)
        self.seen: Antichain | None = None  # the input frontier of the last run
        worker._add(self)
        for port, s in enumerate(inputs):
            s.consumers.append((self, port))

    def input_frontier(self) -> Antichain:
        f = self.inputs[0].producer.frontier
        for s in self.inputs[1:]:
            f = f.meet(s.producer.frontier)
        return f

    def take(self, port: int = 0) -> list[Any]:
        items = self.inbox[port]
        self.inbox[port] = []
        return items

    def run(self, frontier: Antichain) -> None:
        raise NotImplementedError

    def output_frontier(self, frontier: Antichain) -> Antichain:
        """The frontier of this operator's output once ``run(frontier)`` returned."""
        return frontier

    def held_times(self) -> np.ndarray | None:
        """Times of updates or work this operator holds for later (loops ask, to know
        whether another round is needed)."""
        return None


def _common_scope(worker: Worker, inputs: Sequence[Stream], name: str) -> Scope:
    if not inputs:
        return worker.root
    scope = inputs[0].producer_scope
    for s in inputs[1:]:
        if s.producer_scope is not scope:
            raise ScopeError(
                f"'{name}' combines collections of different scopes ({scope!r} and "
                f"{s.producer_scope!r}); bring outer collections into a loop with "
                "collection.enter(scope) and results out with leave()"
            )
    return scope


class InputOp(Operator):
    name = "input"

    def __init__(self, worker: Worker) -> None:
        super().__init__(worker, [])
        self.inbox = [[]]
        self.session_frontier = self.frontier

    def input_frontier(self) -> Antichain:
        return self.session_frontier

    def run(self, frontier: Antichain) -> None:
        items = self.take()
        if len(items) > 1:
            # Everything fed since the last step (input that ran ahead over many times)
            # goes on as one batch: operators then pay their per-batch costs once.
            items = [(concat_updates([u for u, _ in items]), items[-1][1])]
        for u, layout in items:
            self.output.push(u, layout)


class InputSession:
    """Feeds updates into one input collection.

    Rules: times only move forward (``advance_to`` or ``update_at`` with a time before the
    session's time raises ``TimeError``); every diff has the collection's diff type
    (``DiffTypeError``); records keep one shape (``DataError``); a closed session raises
    ``SessionClosedError``. A call that raises changes nothing.
    """

    def __init__(self, worker: Worker, op: InputOp, kind: TimeKind, t0: Any, dt: DiffType) -> None:
        self.worker = worker
        self.op = op
        self.kind = kind
        self._time = kind.flatten(t0)
        self._user_time = t0
        self.diff_type = dt
        self.closed = False
        self._records: list[Any] = []
        self._times: list[tuple[int, ...]] = []
        self._diffs: list[Any] = []
        self._chunks: list[Updates] = []
        self._layout: Layout | None = None
        self._leaf_kinds: list[str] | None = None
        self._int = isinstance(dt, type(INT_DIFF)) and dt == INT_DIFF

    # -- validation ----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            raise SessionClosedError("this input session is closed; create a new collection")

    #: int diffs and flat time components are stored as int64
    _I64_MIN, _I64_MAX = -(2**63), 2**63 - 1

    def _check_diff(self, diff: Any) -> None:
        if self._int:
            if type(diff) is not int and (
                isinstance(diff, (bool, np.bool_)) or not isinstance(diff, (int, np.integer))
            ):
                raise DiffTypeError(f"diff {diff!r} is not an int; this collection has int diffs")
            if not self._I64_MIN <= diff <= self._I64_MAX:
                raise DiffTypeError(
                    f"diff {diff!r} does not fit in 64 bits; int diffs must lie in "
                    "[-2**63, 2**63 - 1] (split it into several updates)"
                )
        else:
            self.diff_type.from_values([diff])

    def _flat_time(self, t: Any) -> tuple[int, ...]:
        """The flat form of a user time, each component an int64 (``TimeError`` if not)."""
        ft = self.kind.flatten(t)
        if not all(self._I64_MIN <= a <= self._I64_MAX for a in ft):
            raise TimeError(f"time {t!r} does not fit in 64 bits; times are int64")
        return ft

    def _check_record(self, x: Any) -> None:
        if self._layout is None:
            layout = infer_layout(x)
            kinds: list[str] = []
            _leaf_kinds(x, layout, kinds)
            self._layout, self._leaf_kinds = layout, kinds
            return
        kinds = []
        if not _fits(x, self._layout):
            raise DataError(
                f"record {x!r} does not fit the collection's shape {self._layout}; records "
                "of one collection must have the same tuple shape"
            )
        _leaf_kinds(x, self._layout, kinds)
        if kinds != self._leaf_kinds:
            raise DataError(
                f"record {x!r} has field types {kinds} but the collection holds "
                f"{self._leaf_kinds}; fields must keep one type so the data can be ordered"
            )

    # -- updates -------------------------------------------------------------------------------
    def update(self, x: Any, diff: Any) -> None:
        """Change the multiplicity of ``x`` by ``diff`` at the session's current time."""
        self._check_open()
        self._check_diff(diff)
        self._check_record(x)
        self._records.append(x)
        self._times.append(self._time)
        self._diffs.append(diff)

    def insert(self, x: Any) -> None:
        """Add one copy of ``x`` (diff one) at the session's current time."""
        self.update(x, 1 if self._int else self.diff_type.to_values(self.diff_type.one(1))[0])

    def remove(self, x: Any) -> None:
        """Remove one copy of ``x`` (diff minus one) at the session's current time."""
        if not self._int:
            raise DiffTypeError(
                f"remove() needs int diffs; use update(x, diff) for {self.diff_type.name}"
            )
        self.update(x, -1)

    def update_at(self, x: Any, t: Any, diff: Any) -> None:
        """Change ``x`` by ``diff`` at time ``t``, which must not be before the session's time."""
        self._check_open()
        ft = self._flat_time(t)
        if not all(a <= b for a, b in zip(self._time, ft, strict=True)):
            raise TimeError(
                f"time {t!r} is before this session's time {self._user_time!r}; updates may only "
                "be at or after the session's time"
            )
        self._check_diff(diff)
        self._check_record(x)
        self._records.append(x)
        self._times.append(ft)
        self._diffs.append(diff)

    def insert_columns(self, data: Any, diffs: Any = None, times: Any = None) -> None:
        """Vectorized ingestion: ``data`` is a column (1-d array) or a tuple of columns in the
        record's shape, ``diffs`` a diff column (default: ones), ``times`` an int array
        (flat time per row, ``(n,)`` or ``(n, d)``; default: the session's time).

        The columns are checked like records (shape, one type per field, no NaN, hashable
        values): numeric columns by dtype alone, object columns by the set of their values'
        types. An empty batch (zero rows) changes nothing and teaches the collection no shape.
        """
        self._check_open()
        layout = layout_of_view(data)
        n = self._batch_rows(data)
        if self._layout is not None and layout != self._layout:
            raise DataError(
                f"columns of shape {layout} do not fit the collection's shape {self._layout}; "
                "give one column per field, grouped in tuples like the records"
            )
        cols = layout.from_view(data, n)
        kinds = [self._column_kind(c) for c in cols] if n else None
        if kinds is not None and self._leaf_kinds is not None and kinds != self._leaf_kinds:
            raise DataError(
                f"columns hold field types {kinds} but the collection holds {self._leaf_kinds}; "
                "fields must keep one type so the data can be ordered"
            )
        d = self.diff_type.one(n) if diffs is None else self._diff_column(diffs, n)
        tarr = self._time_column(times, n)
        if n == 0:
            return
        if self._layout is None:
            self._layout, self._leaf_kinds = layout, kinds
        self._chunks.append(Updates(cols, tarr, d, self.diff_type))

    @staticmethod
    def _batch_rows(data: Any) -> int:
        """The rows of a batch (its first column's length); every column must have them."""
        leaves: list[Any] = []
        todo = [data]
        while todo:
            v = todo.pop()
            if isinstance(v, tuple):
                todo.extend(reversed(v))
            else:
                leaves.append(v)
        if not leaves:
            raise DataError(
                f"insert_columns got {data!r}, which holds no column; give a column (a 1-d "
                "array) or a tuple of columns in the records' shape"
            )
        first = leaves[0]
        if isinstance(first, np.ndarray) and first.ndim != 1:
            raise DataError(f"columns must be 1-d arrays, got an array of shape {first.shape}")
        if isinstance(first, (str, bytes, dict, set, frozenset)) or not hasattr(first, "__len__"):
            raise DataError(
                f"insert_columns takes a column (a 1-d array) or a tuple of columns, got "
                f"{type(first).__name__} {first!r:.60}"
            )
        n = len(first)
        for v in leaves[1:]:
            if isinstance(v, np.ndarray):
                m = v.shape[0] if v.ndim else n  # a 0-d array: one value for every row
            else:
                m = n if np.isscalar(v) or not hasattr(v, "__len__") else len(v)
            if m != n:
                raise DataError(
                    f"columns of one batch must have equal lengths, got {n} and {m} rows"
                )
        return n

    #: Python types whose values are numbers (one field kind, "num", like ``_leaf_kinds``)
    _NUM_TYPES = (bool, int, float, np.number, np.bool_)

    def _column_kind(self, c: np.ndarray) -> str:
        """The field kind of a non-empty column, as ``_leaf_kinds`` names it for a record."""
        if c.dtype.kind in "biuf":
            if c.dtype.kind == "f" and np.isnan(c).any():
                raise DataError("NaN cannot be ordered; data columns must not hold NaN")
            return "num"
        # an object column: the set of its values' types, in one C-level pass (no Python
        # loop per row); the loop below runs once per distinct type
        types = set(map(type, c.tolist()))
        kinds = set()
        for t in types:
            if t is tuple:
                raise DataError(
                    "a column holds tuples; give a tuple of columns (one per field) instead"
                )
            if issubclass(t, (set, frozenset)):
                raise DataError(unordered_set_message(next(v for v in c if type(v) is t)))
            if t.__hash__ is None:
                raise DataError(
                    f"a column holds {t.__name__} values, which cannot be hashed; records must "
                    "be hashable (use tuples of columns, not lists)"
                )
            kinds.add("num" if issubclass(t, self._NUM_TYPES) else t.__name__)
        if len(kinds) > 1:
            raise DataError(
                f"a column mixes field types {sorted(kinds)}; a field must keep one type so the "
                "data can be ordered (no None among numbers or strings)"
            )
        if types - {str, bytes, int, bool, type(None)}:  # values that may be NaN
            try:
                nan = bool(np.any(c != c))
            except Exception:
                nan = False
            if nan:
                raise DataError("NaN cannot be ordered; data columns must not hold NaN")
        return kinds.pop()

    def _diff_column(self, diffs: Any, n: int) -> Any:
        if not self._int:
            return self.diff_type.from_columns(diffs, n)
        try:
            arr = np.asarray(diffs)
        except (TypeError, ValueError) as e:
            raise DiffTypeError(f"int diffs must be an integer array of {n} rows ({e})") from e
        if n == 0 and arr.shape == (0,):
            return self.diff_type.one(0)  # an empty list: float64 to numpy, but no diff
        if arr.dtype.kind == "u" and arr.size and arr.max() > self._I64_MAX:
            raise DiffTypeError(
                "int diffs must fit in int64; this unsigned column holds larger values"
            )
        return self.diff_type.from_columns(arr, n)

    def _time_column(self, times: Any, n: int) -> np.ndarray:
        """The ``(n, d)`` int64 times of a batch (``TimeError`` if not ints of that shape, or
        before the session's time)."""
        dim = self.kind.dim
        if times is None:
            tarr = np.empty((n, dim), dtype=np.int64)
            tarr[:] = self._time
            return tarr
        try:
            arr = np.asarray(times)
        except (TypeError, ValueError) as e:
            raise TimeError(f"times must be an integer array with one time per row ({e})") from e
        if n == 0 and arr.size == 0:
            return np.empty((0, dim), dtype=np.int64)
        shapes = [(n, dim), (n,)] if dim == 1 else [(n, dim)]
        if arr.dtype.kind not in "iu" or arr.shape not in shapes:
            want = " or ".join(str(s) for s in shapes)
            raise TimeError(
                f"times must be an integer array of shape {want} (one flat time per row), got "
                f"{arr.dtype} of shape {arr.shape}"
            )
        if arr.dtype.kind == "u" and arr.max() > self._I64_MAX:
            raise TimeError("times must fit in int64; this unsigned column holds larger values")
        tarr = arr.astype(np.int64, copy=False).reshape(n, dim)
        if not np.all(tarr >= np.array(self._time, dtype=np.int64)):
            raise TimeError(
                f"some times are before this session's time {self._user_time!r}; updates may "
                "only be at or after the session's time"
            )
        return tarr

    def flush(self) -> None:
        """Hand buffered updates to the dataflow (they take effect at the next step)."""
        self._check_open()
        self._flush()

    def _flush(self) -> None:
        parts = list(self._chunks)
        if self._records:
            assert self._layout is not None
            cols = self._layout.to_columns(self._records)
            times = np.array(self._times, dtype=np.int64).reshape(len(self._records), self.kind.dim)
            diffs = self.diff_type.from_values(self._diffs)
            parts.append(Updates(cols, times, diffs, self.diff_type))
        if parts:
            self.op.inbox[0].append((concat_updates(parts), self._layout))
        self._records, self._times, self._diffs, self._chunks = [], [], [], []

    def advance_to(self, t: Any) -> None:
        """Move the session's time to ``t`` (not before the current time), flushing first."""
        self._check_open()
        ft = self._flat_time(t)
        if not all(a <= b for a, b in zip(self._time, ft, strict=True)):
            raise TimeError(
                f"cannot advance to {t!r}: it is before this session's time {self._user_time!r}"
            )
        self._flush()
        self._time = ft
        self._user_time = t
        self.op.session_frontier = Antichain.of([ft], self.kind.dim)

    def time(self) -> Any:
        """The session's current time."""
        return self._user_time

    def close(self) -> None:
        """Flush and close: the input will never change again (its frontier becomes empty)."""
        if self.closed:
            return
        self._flush()
        self.closed = True
        self.op.session_frontier = Antichain.empty(self.kind.dim)


def _fits(x: Any, layout: Layout) -> bool:
    if isinstance(layout, Tup):
        return (
            type(x) is tuple
            and len(x) == len(layout.children)
            and all(_fits(v, c) for v, c in zip(x, layout.children, strict=True))
        )
    return type(x) is not tuple or isinstance(layout, Leaf)


def _leaf_kinds(x: Any, layout: Layout, out: list[str]) -> None:
    if isinstance(layout, Tup):
        for v, c in zip(x, layout.children, strict=True):
            _leaf_kinds(v, c, out)
        return
    if isinstance(x, (bool, int, float, np.number, np.bool_)):
        if isinstance(x, (float, np.floating)) and x != x:
            raise DataError("NaN cannot be ordered; records must not hold NaN")
        out.append("num")
        return
    if isinstance(x, (set, frozenset)):
        raise DataError(unordered_set_message(x))
    try:
        hash(x)
    except TypeError as e:
        raise DataError(
            f"{x!r} cannot be hashed; records must be hashable (use tuples, not lists)"
        ) from e
    if type(x) is not str:
        try:
            nan = bool(x != x)  # a NaN of another type (Decimal('NaN'), ...)
        except Exception:
            nan = False
        if nan:
            raise DataError(f"{x!r} is not equal to itself (NaN cannot be ordered); records "
                            "must not hold NaN")
    out.append(type(x).__name__)


class Probe(Operator):
    """Reports the frontier reached at a point of the dataflow."""

    name = "probe"

    def run(self, frontier: Antichain) -> None:
        self.take()

    def less_than(self, t: Any) -> bool:
        """Whether some time before ``t`` may still change at this point."""
        return self.frontier.less_than(self.kind.flatten(t))

    def less_equal(self, t: Any) -> bool:
        """Whether ``t`` or a time before it may still change at this point."""
        return self.frontier.less_equal(self.kind.flatten(t))

    def done(self) -> bool:
        return self.frontier.is_empty()


class Capture(Operator):
    """Records every output update; reads back updates and the collection at a time."""

    name = "capture"

    def __init__(self, worker: Worker, inputs: Sequence[Stream], name: str | None = None) -> None:
        super().__init__(worker, inputs, name)
        self.parts: list[Updates] = []

    def run(self, frontier: Antichain) -> None:
        self.parts.extend(self.take())
        if len(self.parts) > 64:
            self.parts = [concat_updates(self.parts)]

    def _consolidated(self) -> Updates | None:
        if not self.parts:
            return None
        u = consolidate(concat_updates(self.parts))
        self.parts = [u]
        return u

    def updates(self) -> list[tuple[Any, Any, Any]]:
        """Every output update so far, consolidated, sorted by time then data."""
        return update_records(self._consolidated(), self.inputs[0].layout, self.kind)

    def at(self, t: Any) -> dict[Any, Any]:
        """The output collection at time ``t``: data -> accumulated diff (zeros dropped)."""
        return accumulated_at(self._consolidated(), self.inputs[0].layout, self.kind, t)

    def frontier_reached(self) -> Antichain:
        return self.frontier


class Worker:
    """One worker hosting a dataflow; use as a context manager or directly.

    ``Worker()`` is a single in-process worker. Runtimes create workers with a communicator
    (``comm``) when a job runs on several (``ddflow.run_job``, ``ddflow.execute``,
    ``ddflow.spark.run_on_spark``); ``index`` and ``peers`` say which one this is.
    """

    def __init__(self, comm: Communicator | None = None) -> None:
        self.comm: Communicator = comm if comm is not None else LocalComm()
        self.operators: list[Operator] = []
        self.sessions: list[InputSession] = []
        self._kind: TimeKind | None = None
        self.started = False
        self.root = Scope(self, None)
        self.failed: BaseException | None = None

    @property
    def index(self) -> int:
        """This worker's index among its peers (0 for a single worker)."""
        return self.comm.index

    @property
    def peers(self) -> int:
        """How many workers host this dataflow."""
        return self.comm.peers

    @property
    def time_kind(self) -> TimeKind:
        return self._kind if self._kind is not None else INT_TIME

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            for s in self.sessions:
                if not s.closed:
                    s.close()
            self.run()

    def _add(self, op: Operator) -> None:
        if self.started and not isinstance(op, InputOp):
            raise RuntimeError(
                "the dataflow is already running: build every operator before the first step"
            )
        self.operators.append(op)
        op.scope.nodes.append(op)
        if self.started:
            self.root.order = None  # an input added while running: schedule again

    def iterative(self, *, limit: int | None = None, name: str | None = None,
                  parent: Scope | None = None) -> Scope:
        """A new loop scope (inside ``parent``, default the root) for ``Variable``s; bring
        collections in with ``enter(scope)`` and out with ``leave()``. ``limit`` bounds the
        iterations per round of input (``IterationLimitError`` beyond it)."""
        if self.started:
            raise RuntimeError(
                "the dataflow is already running: build every operator before the first step"
            )
        return Scope(self, parent if parent is not None else self.root, limit=limit, name=name)

    def new_collection(self, *, time: Any = 0, diff: Any = int) -> tuple[InputSession, Any]:
        """A new input: returns ``(InputSession, Collection)``.

        ``time`` is the initial time (an int, or a ``Product`` for partially ordered times);
        every input of a worker has the same time kind. ``diff`` is the diff type: ``int``,
        ``Sum``, ``MinSum``, a sample value (a tuple of numbers, a ``DiffPair``) or a class
        with ``plus``/``is_zero``.
        """
        from ddflow.dataflow.collection import Collection

        kind = time_kind_of(time)
        if self._kind is None:
            # operators built before the first input assumed int times
            if self.operators and kind != INT_TIME:
                raise TimeError("create inputs before operators when using Product times")
            self._kind = kind
        elif kind != self._kind:
            raise TimeError(
                f"this worker's times are {self._kind.describe()}; an input with "
                f"{kind.describe()} times cannot join it (one time type per scope)"
            )
        dt = diff_type_of(diff)
        op = InputOp(self)
        op.session_frontier = Antichain.of([kind.flatten(time)], kind.dim)
        op.frontier = op.session_frontier
        session = InputSession(self, op, kind, time, dt)
        self.sessions.append(session)
        return session, Collection(self, op.output, dt)

    def step(self) -> bool:
        """Run every operator once; return whether anything changed (on any worker)."""
        changed = self._step_local()
        if self.comm.peers > 1:
            changed = any(self.comm.all_gather(changed))
        return changed

    def _step_local(self) -> bool:
        """Run every operator once (loops until they settle); whether anything changed on
        this worker."""
        if self.failed is not None:
            raise DataflowClosedError(
                f"this dataflow stopped after an error ({self.failed}); build it again"
            ) from self.failed
        if self.root.order is None:
            self.root.check()
            self.root.schedule()
        self.started = True
        try:
            return self.root.run_nodes(self.comm.peers > 1)
        except (IterationLimitError, RetractionError) as e:
            # the dataflow cannot go on from here (a loop stopped mid-way, or a retraction
            # already inside a subtraction-free collection): close it with the cause
            self.failed = e
            raise

    def _run_op(self, op: Operator, multi: bool) -> bool:
        """Run one operator if it has input or its input frontier moved; whether it changed."""
        f = op.input_frontier()
        busy = any(op.inbox)
        if not busy and f == op.seen and not (multi and op.always_run):
            return False
        saved = [list(q) for q in op.inbox]
        try:
            op.run(f)
        except BaseException as e:
            refused = {id(u) for u in getattr(e, "refused", ())}
            op.inbox = [[u for u in q if id(u) not in refused] for q in saved] if refused \
                else saved
            raise
        new = op.output_frontier(f)
        changed = busy or new != op.frontier
        op.frontier = new
        op.seen = f
        return changed

    def _agree(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any worker (every worker gets the same answer)."""
        if self.comm.peers == 1:
            return flag
        return any(self.comm.all_gather(flag))

    def step_while(self, condition: Callable[[], bool], max_steps: int | None = None, *,
                   at_least_once: bool = False) -> None:
        """Step while ``condition()`` holds on some worker (at most ``max_steps`` steps);
        ``at_least_once`` steps once before the first check (saves a collective when the
        caller knows there is work, e.g. right after an input advanced).

        With several workers, every worker must call this with the same arguments.
        """
        steps = 0
        if self.comm.peers > 1:
            # One collective per step: (anything changed, still wanted) from every worker.
            if not at_least_once and not self._agree(condition()):
                return
            while True:
                flags = self.comm.all_gather((self._step_local(), condition()))
                steps += 1
                if not any(w for _, w in flags) or not any(c for c, _ in flags):
                    return  # done, or nothing can change until some input advances
                if max_steps is not None and steps >= max_steps:
                    return
        if at_least_once:
            self.step()
            steps += 1
            if max_steps is not None and steps >= max_steps:
                return
        while condition():
            if not self.step() and condition():
                # Nothing can change until some input advances: stop instead of spinning.
                return
            steps += 1
            if max_steps is not None and steps >= max_steps:
                return

    def run(self) -> None:
        """Step until no operator has work for the current input frontiers (on any worker)."""
        while self.step():
            pass

    def stats(self) -> list[dict[str, Any]]:
        """Per-arrangement statistics: batches, updates held, merge work outstanding.

        Each entry also has ``held``: the updates (or pending ``(key, time)`` work) its
        operator keeps outside the trace, waiting for the frontier. Operators without an
        arrangement that keep updates (a capture's output, updates a loop's feedback or
        ``consolidate`` hold back) get an entry too, with ``batches`` and ``updates`` 0.
        """
        out = []
        for op in self.operators:
            spine = getattr(op, "spine", None)
            ht = op.held_times()
            held = 0 if ht is None else len(ht)
            if isinstance(op, Capture):
                held += sum(len(u) for u in op.parts)
            if spine is not None:
                out.append({"operator": op.name, **spine.stats(), "held": held})
            elif held:
                out.append({"operator": op.name, "batches": 0, "updates": 0, "held": held})
        return out

    def checkpoint(self, path: Any, **kw: Any) -> dict[str, Any]:
        """Write this worker's state into directory ``path`` (incrementally: only trace
        batches new since the last checkpoint there); see ``ddflow.runtime.checkpoint``."""
        from ddflow.runtime.checkpoint import write_checkpoint

        return write_checkpoint(self, path, **kw)

    def restore(self, path: Any, **kw: Any) -> dict[str, Any]:
        """Load the newest committed checkpoint in ``path`` into this worker, which hosts the
        same dataflow, built and not yet stepped; see ``ddflow.runtime.checkpoint``."""
        from ddflow.runtime.checkpoint import restore_checkpoint

        return restore_checkpoint(self, path, **kw)
