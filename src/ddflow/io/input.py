"""Input sessions: how updates enter a dataflow from outside, and the operator they feed.

An ``InputSession`` buffers updates (records, or columns with ``insert_columns``) at or after
its time and hands them to its ``InputOp`` on ``flush``; the operator sends them downstream
at the next step. The session's time is the frontier it promises: no update at an earlier
time will follow (``advance_to`` moves it on, ``close`` empties it).

Every call checks its arguments before it changes anything (a call that raises changes
nothing): times only move forward, diffs have the collection's diff type, and records keep
one shape and one type per field, learnt from the first accepted record or batch (or given
when the collection was made), so the data can be ordered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ddflow.core.columns import (
    Layout,
    Leaf,
    Tup,
    infer_layout,
    layout_of_view,
    unordered_set_message,
)
from ddflow.core.diff import INT_DIFF, DiffType
from ddflow.core.errors import DataError, DiffTypeError, SessionClosedError, TimeError
from ddflow.core.frontier import Antichain
from ddflow.core.time import TimeKind
from ddflow.core.updates import Updates, concat_updates
from ddflow.engine.operator import Operator, State

if TYPE_CHECKING:
    from ddflow.engine.worker import Worker

__all__ = ["InputOp", "InputSession"]


class InputOp(Operator):
    """The operator behind an input session: what the session flushed goes downstream at the
    next step, and its input frontier is the one the session promises."""

    name = "input"
    wakes_on_frontier = False
    is_input = True
    state_version = 1

    def __init__(self, worker: Worker, frontier: Antichain) -> None:
        super().__init__(worker, [])
        self.inbox = [[]]
        self.session_frontier = frontier
        self.frontier = frontier
        self.session: InputSession | None = None

    def source_frontier(self) -> Antichain:
        return self.session_frontier

    def identity(self) -> tuple[Any, ...]:
        s = self.session
        return () if s is None else ("input", s.diff_type.name, s.kind.describe())

    def run(self, frontier: Antichain) -> None:
        items = self.take()
        if len(items) > 1:
            # Everything fed since the last step (input that ran ahead over many times)
            # goes on as one batch: operators then pay their per-batch costs once.
            items = [(concat_updates([u for u, _ in items]), items[-1][1])]
        for u, layout in items:
            self.output.push(u, layout)

    def state(self) -> State:
        assert self.session is not None
        return {"frontier": self.session_frontier, "session": self.session.state()}

    def load_state(self, state: State) -> None:
        assert self.session is not None
        self.session_frontier = state["frontier"]
        self.session.load_state(state["session"])


class InputSession:
    """Feeds updates into one input collection.

    Rules: times only move forward (``advance_to`` or ``update_at`` with a time before the
    session's time raises ``TimeError``); every diff has the collection's diff type
    (``DiffTypeError``); records keep one shape (``DataError``); a closed session raises
    ``SessionClosedError``. A call that raises changes nothing.
    """

    def __init__(
        self, worker: Worker, kind: TimeKind, t0: Any, dt: DiffType, shape: Layout | None = None
    ) -> None:
        self.worker = worker
        self.op = InputOp(worker, Antichain.of([kind.flatten(t0)], kind.dim))
        self.op.session = self
        self.op.output.layout = shape
        self.kind = kind
        self._time = kind.flatten(t0)
        self._user_time = t0
        self.diff_type = dt
        self.closed = False
        self._records: list[Any] = []
        self._times: list[tuple[int, ...]] = []
        self._diffs: list[Any] = []
        self._chunks: list[Updates] = []
        self._layout: Layout | None = shape
        self._leaf_kinds: list[str] | None = None
        #: ``_int64_columns``' note of whether (layout, kinds) are flat numeric fields
        self._flat: tuple[Layout, list[str], bool] | None = None
        self._int = isinstance(dt, type(INT_DIFF)) and dt == INT_DIFF

    # -- state ---------------------------------------------------------------------------------
    def state(self) -> State:
        """The session's progress and buffer (its operator's checkpoint carries it)."""
        return {
            "time": self._time,
            "user_time": self._user_time,
            "closed": self.closed,
            "records": list(self._records),
            "times": list(self._times),
            "diffs": list(self._diffs),
            "chunks": list(self._chunks),
            "layout": self._layout,
            "leaf_kinds": self._leaf_kinds,
        }

    def load_state(self, state: State) -> None:
        self._time, self._user_time = state["time"], state["user_time"]
        self.closed = state["closed"]
        self._records, self._times = list(state["records"]), list(state["times"])
        self._diffs, self._chunks = list(state["diffs"]), list(state["chunks"])
        self._layout, self._leaf_kinds = state["layout"], state["leaf_kinds"]

    def buffered(self) -> int:
        """How many updates the session holds that were not flushed yet."""
        return len(self._records) + sum(len(u) for u in self._chunks)

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
        if self._leaf_kinds is None:  # the shape was given, the field types not yet
            self._leaf_kinds = kinds
        elif kinds != self._leaf_kinds:
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
        flat = self._int64_columns(data)
        if flat is not None:
            # (the common case, checked in one pass: see ``_int64_columns``)
            cols, n = flat
            d = self.diff_type.one(n) if diffs is None else self._diff_column(diffs, n)
            tarr = self._time_column(times, n)
            if n:
                self._chunks.append(Updates(cols, tarr, d, self.diff_type))
            return
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
            self._layout = layout
        if self._leaf_kinds is None:
            self._leaf_kinds = kinds
        self._chunks.append(Updates(cols, tarr, d, self.diff_type))

    def _int64_columns(self, data: Any) -> tuple[tuple[np.ndarray, ...], int] | None:
        """``data`` as the batch's columns and rows when it is what the collection already
        holds in the simplest form: its shape is a flat tuple of numeric fields (or one
        field) and ``data`` gives one 1-d int64 array per field, of one length. Such columns
        pass every check of ``insert_columns`` as they are (an int64 array is a numeric
        field of one type with no NaN), so they are taken without the general walk over
        the view. None otherwise (the general path decides)."""
        layout, kinds = self._layout, self._leaf_kinds
        if layout is None or kinds is None:
            return None
        flat = self._flat
        if flat is None or flat[0] is not layout or flat[1] is not kinds:
            # (whether the shape is flat numeric fields: found once per shape)
            plain = all(k == "num" for k in kinds) and (
                type(layout) is Leaf
                or (type(layout) is Tup and all(type(c) is Leaf for c in layout.children))
            )
            flat = self._flat = (layout, kinds, plain)
        if not flat[2]:
            return None
        if type(layout) is Leaf:
            parts: Any = (data,)
        elif type(data) is tuple and len(data) == layout.width:
            parts = data
        else:
            return None
        n = -1
        for c in parts:
            if type(c) is not np.ndarray or c.dtype != np.int64 or c.ndim != 1:
                return None
            if n < 0:
                n = c.shape[0]
            elif c.shape[0] != n:
                return None
        return tuple(parts), n

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
        if dim == 1:
            early = bool(n and int(tarr.min()) < self._time[0])
        else:
            early = not np.all(tarr >= np.array(self._time, dtype=np.int64))
        if early:
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
            raise DataError(
                f"{x!r} is not equal to itself (NaN cannot be ordered); records must not hold NaN"
            )
    out.append(type(x).__name__)
