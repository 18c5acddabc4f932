"""Trace batches: immutable sets of updates indexed by key, then value, then time.

A ``TraceBatch`` holds every update of an arrangement whose time lies in its description::

    { (key, val, time, diff) : lower <= time, not upper <= time }

(``lower <= time`` means some element of the frontier ``lower`` is ``<= time``), with times
possibly advanced by ``since``: such times are only meaningful when compared with times
beyond ``since``.

Rows are sorted by ``(key, val, time)`` and consolidated. ``keys`` is a searchable 1-d array
of the distinct keys (the key column itself for one numeric column, a structured array for
several numeric columns, an object array of tuples otherwise) and ``bounds[i]:bounds[i+1]``
are the rows of key ``i`` (``int32`` while rows fit, else ``int64``). Lookups search sorted
probe keys in ``keys`` in one vectorized call.

Compact batches (specialized storage): once compaction has advanced every time of a
batch to one time, a per-update time column carries no information, and neither does a diff
column whose diffs are all equal (typically all 1: a static collection). Such a column is
stored as a zero-stride, read-only view (``np.broadcast_to``) of its one row (for tuple
diffs, each constant component); a batch with both is ``is_compact``, so an arrangement of a
static graph costs its key and value columns plus the key index. Readers see ordinary arrays
of the usual shapes: slicing keeps the view, fancy indexing and arithmetic give real arrays,
and writing into one raises (no reader may write into a batch's columns in any case).
Columns of fewer than ``COMPACT_MIN_ROWS`` rows are not checked. ``nbytes()`` counts
the memory a batch really holds.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ddflow.core.columns import Columns, const_view, run_starts
from ddflow.core.diff import DiffType, magnitude
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, consolidate, take_times

__all__ = [
    "COMPACT_MIN_ROWS",
    "Description",
    "TraceBatch",
    "buffer_nbytes",
    "compact_column",
    "comparable",
    "is_zero_stride",
    "key_index",
    "merged_bound",
    "ranges_to_indices",
]


@dataclass(frozen=True)
class Description:
    """The interval of times ``[lower, upper)`` a batch covers, and the frontier its times
    were advanced by (``since``)."""

    lower: Antichain
    upper: Antichain
    since: Antichain


def key_index(cols: Sequence[np.ndarray]) -> np.ndarray:
    """One searchable 1-d array ordering like the key columns ``cols`` lexicographically."""
    if len(cols) == 1:
        return cols[0]
    n = cols[0].shape[0] if cols else 0
    if not cols:
        return np.zeros(n, dtype=np.int8)
    if all(c.dtype.kind in "biuf" for c in cols):
        dt = np.dtype([(f"f{i}", c.dtype) for i, c in enumerate(cols)])
        out = np.empty(n, dtype=dt)
        for i, c in enumerate(cols):
            out[f"f{i}"] = c
        return out
    out = np.empty(n, dtype=object)
    out[:] = list(zip(*[c.tolist() for c in cols], strict=True))
    return out


def comparable(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Key indexes ``a`` and ``b`` in forms numpy compares exactly with each other: as they
    are when their dtypes agree, else both as Python values (tuples for several columns),
    which keep the order of sorted numeric indexes and compare ints and floats exactly."""
    if a.dtype == b.dtype:
        return a, b
    return _as_objects(a), _as_objects(b)


def _as_objects(a: np.ndarray) -> np.ndarray:
    if a.dtype == object:
        return a
    out = np.empty(len(a), dtype=object)
    out[:] = a.tolist()  # a structured index gives tuples of Python numbers
    return out


def merged_bound(parts: Sequence[TraceBatch]) -> int | None:
    """The ``diff_bound`` of a merge of ``parts``: the sum of theirs (None if one has none)."""
    total = 0
    for p in parts:
        b = p.diff_bound()
        if b is None:
            return None
        total += b
    return total


def _column_magnitude(d: Any) -> int | None:
    """The largest ``|value|`` of an int64 column; 0 for float64; None for other columns."""
    if not isinstance(d, np.ndarray) or d.dtype.kind not in "if":
        return None
    if d.dtype.kind == "f" or not len(d):
        return 0
    return magnitude(d)


def ranges_to_indices(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated ``arange(s, e)`` for each range, and the range number of each index."""
    lens = ends - starts
    total = int(lens.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    if total == len(starts) and bool((lens == 1).all()):
        # (one index per range, as when each key has one row)
        return starts.astype(np.int64), np.arange(total)
    owner = (np.arange(len(starts))).repeat(lens)
    offsets = np.arange(total) - (lens.cumsum() - lens).repeat(lens)
    return starts.repeat(lens) + offsets, owner


#: at most this many rows are listed in Python when a few keys' rows are expanded; beyond,
#: one vectorized expansion (a key of a million rows would be a list of a million ints)
_EXPAND_IN_PYTHON = 256


def _expand_runs(runs: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """``(row indices, probe position)`` of runs ``(probe position, first row, end row)``."""
    if not runs:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    if sum(hi - lo for _, lo, hi in runs) > _EXPAND_IN_PYTHON:
        arr = np.array(runs, dtype=np.int64).reshape(len(runs), 3)
        at, run = ranges_to_indices(arr[:, 1], arr[:, 2])
        return at, arr[run, 0]
    rows: list[int] = []
    owner: list[int] = []
    for j, lo, hi in runs:
        rows.extend(range(lo, hi))
        owner.extend([j] * (hi - lo))
    return np.array(rows, dtype=np.int64), np.array(owner, dtype=np.int64)


#: batches with fewer rows keep plain columns (checking them costs more than it saves)
COMPACT_MIN_ROWS = 64


def compact_column(a: Any) -> Any:
    """``a`` (an update column: times ``(n, d)``, an int diff column, or a tuple of diff
    columns) with every constant integer array replaced by a zero-stride, read-only view of
    its first row; other columns are returned as they are."""
    if isinstance(a, tuple):
        if not a or a[0].shape[0] < COMPACT_MIN_ROWS:
            return a  # (a ``Rows`` column stays one)
        out = tuple(compact_column(c) for c in a)
        return a if all(x is y for x, y in zip(out, a, strict=True)) else out
    if (
        not isinstance(a, np.ndarray)
        or a.ndim == 0
        or a.shape[0] < COMPACT_MIN_ROWS
        or a.dtype.kind not in "biu"
        or a.strides[0] == 0
    ):
        return a
    first = a[0]
    if (a[-1] != first if a.ndim == 1 else (a[-1] != first).any()) or not bool((a == first).all()):
        return a
    return const_view(a[:1].copy(), a.shape)


def is_zero_stride(a: Any) -> bool:
    """Whether column ``a`` (or every component of a tuple column) is a zero-stride view."""
    if isinstance(a, tuple):
        return all(is_zero_stride(c) for c in a)
    return isinstance(a, np.ndarray) and a.ndim > 0 and a.shape[0] > 1 and a.strides[0] == 0


def buffer_nbytes(a: Any, seen: set[int]) -> int:
    """Bytes of the buffers behind array ``a`` not yet in ``seen`` (ids), adding them.

    A view counts the array that owns its memory, once: a zero-stride view its one-row
    base, a slice the whole array it slices (which it keeps alive). An object array counts
    its pointers, not the Python objects they point to."""
    if isinstance(a, (tuple, list)):
        return sum(buffer_nbytes(c, seen) for c in a)
    if not isinstance(a, np.ndarray):
        return 0
    while isinstance(a.base, np.ndarray):
        a = a.base
    owner = a if a.base is None else a.base
    if id(owner) in seen:
        return 0
    seen.add(id(owner))
    if owner is a:
        return int(a.nbytes)
    try:
        return int(memoryview(owner).nbytes)
    except TypeError:
        return int(a.nbytes)


class _Const:
    """A zero-stride column in a pickle: its one row and its shape."""

    __slots__ = ("row", "shape")

    def __init__(self, row: np.ndarray, shape: tuple[int, ...]) -> None:
        self.row, self.shape = row, shape

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Const, (self.row, self.shape))


def _pack(a: Any) -> Any:
    """A column for pickling: zero-stride views as ``_Const`` (pickle would expand them)."""
    if isinstance(a, tuple):
        return tuple(_pack(c) for c in a)
    if is_zero_stride(a):
        return _Const(np.ascontiguousarray(a[:1]), a.shape)
    return a


def _unpack(a: Any) -> Any:
    if isinstance(a, tuple):
        return tuple(_unpack(c) for c in a)
    if isinstance(a, _Const):
        return const_view(np.ascontiguousarray(a.row), a.shape)
    return a


def _packable(dt: np.dtype) -> bool:
    """Whether every value of the integer dtype ``dt`` is an int64 (what packing reads)."""
    return dt.kind in "ib" or (dt.kind == "u" and dt.itemsize < 8)


class _Packed:
    """A structured integer key index packed into one sorted int64 column (see
    ``TraceBatch._packed_keys``), and how to pack probe keys the same way."""

    __slots__ = ("bits", "keys", "lows", "names", "shifts")

    def __init__(
        self,
        keys: np.ndarray,
        names: tuple[str, ...],
        lows: list[int],
        bits: list[int],
        shifts: list[int],
    ) -> None:
        self.keys, self.names, self.lows, self.bits, self.shifts = keys, names, lows, bits, shifts

    def pack(self, probe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(inside, packed)``: which probe keys lie within every field's range (only those
        can be keys of the batch) and their packed values (meaningless outside)."""
        inside: np.ndarray | None = None
        packed: np.ndarray | None = None
        for f, lo, b, sh in zip(self.names, self.lows, self.bits, self.shifts, strict=True):
            c = probe[f].astype(np.int64)
            ok = (c >= lo) & (c < lo + (1 << b))
            inside = ok if inside is None else inside & ok
            off = c - lo  # (wraps for values far outside: those are not inside)
            term = off << sh if sh else off
            packed = term if packed is None else packed | term
        assert inside is not None and packed is not None
        return inside, packed


def _same_rows(a: np.ndarray, ia: np.ndarray, b: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """Whether row ``ia[j]`` of structured array ``a`` equals row ``ib[j]`` of ``b`` (of the
    same dtype), for each ``j``: as rows of int64 words when the fields are int64 words
    without gaps (numpy compares structured rows field by field, slowly), else as numpy
    compares them."""
    dt = a.dtype
    names = dt.names or ()
    w = len(names)
    if (
        w
        and dt.itemsize == 8 * w
        and all(dt[f] == np.int64 for f in names)
        and a.flags.c_contiguous
        and b.flags.c_contiguous
    ):
        wa = a.view(np.int64).reshape(-1, w)
        wb = b.view(np.int64).reshape(-1, w)
        return np.asarray((wa[ia] == wb[ib]).all(axis=1), dtype=bool)
    return np.asarray(a[ia] == b[ib], dtype=bool)


def _distinct_sorted_rows(cols: Columns) -> bool:
    """Whether rows sorted lexicographically by ``cols`` (integer columns) are all
    different: no row equals the one before it. False for columns of other kinds (not
    looked at)."""
    if not cols or not all(c.dtype.kind in "iub" for c in cols):
        return False
    same = cols[0][1:] == cols[0][:-1]
    for c in cols[1:]:
        if not same.any():
            break
        same &= c[1:] == c[:-1]
    return not bool(same.any())


#: batches of at least this many data columns have them stacked into one matrix when
#: their rows are read again (one fancy index per read instead of one per column)
_STACK_COLUMNS = 4


class TraceBatch:
    """An immutable, consolidated batch of ``(key, val, time, diff)`` rows with a description."""

    __slots__ = (
        "key_width",
        "data",
        "times",
        "diffs",
        "diff_type",
        "desc",
        "keys",
        "bounds",
        "_table",
        "_index",
        "_packed",
        "_lead",
        "_bound",
        "_unique",
        "_stacked",
        "__weakref__",
    )

    def __init__(
        self,
        key_width: int,
        u: Updates,
        desc: Description,
        *,
        distinct_keys: bool = False,
        index: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """``distinct_keys``: the caller knows every row has a key of its own (a merge of
        runs of one row per key), so the key runs need not be looked for. ``index``: the
        caller has the ``(keys, bounds)`` of these rows already (a merge that concatenates
        two batches whose key ranges do not overlap)."""
        self.key_width = key_width
        self.data: Columns = u.data
        self.times = compact_column(u.times)
        self.diffs = compact_column(u.diffs)
        self.diff_type: DiffType = u.diff_type
        self.desc = desc
        n = len(u)
        kcols = u.data[:key_width]
        self.keys: np.ndarray
        self.bounds: np.ndarray
        if index is not None:
            self.keys, self.bounds = index
        elif distinct_keys and n:
            self.keys = key_index(kcols)
            self.bounds = np.arange(n + 1, dtype=np.int32 if n < 2**31 else np.int64)
        elif n <= 16 and len(kcols) == 1 and kcols[0].dtype.kind in "iu":
            # a few rows of one int key: the runs found in Python (numpy's per-call cost
            # dominates there)
            kl = kcols[0].tolist()
            first = [i for i in range(n) if i == 0 or kl[i] != kl[i - 1]]
            self.keys = np.array([kl[i] for i in first], dtype=kcols[0].dtype)
            self.bounds = np.array([*first, n], dtype=np.int32)
        else:
            starts = run_starts(kcols, n)
            # (every key on one row: the key columns are the index as they are)
            self.keys = key_index(kcols if len(starts) == n else [c[starts] for c in kcols])
            bounds = np.empty(starts.shape[0] + 1, dtype=np.int32 if n < 2**31 else np.int64)
            bounds[:-1] = starts
            bounds[-1] = n
            self.bounds = bounds
        self._table: tuple[int, np.ndarray] | None | bool = None
        self._index: dict[int, int] | None = None
        self._packed: _Packed | None | bool = None
        self._lead: np.ndarray | None | bool = None
        self._bound: int | None = None
        self._unique: bool | None = None  # (unique_rows: None until known)
        #: the data columns as the rows of one matrix once rows were taken often enough
        #: (wide batches: ``take_rows``); an int: how many times rows were taken before;
        #: False: the columns do not stack
        self._stacked: np.ndarray | int | bool = 0

    def _dense_table(self) -> tuple[int, np.ndarray] | None:
        """For integer keys spanning a range not much larger than their number: a table from
        ``key - min`` to key position (-1 if absent), built once (the total-order count's
        ``count_total_u`` idea: dense unsigned keys index an array instead of being
        searched)."""
        if self._table is None:
            self._table = False
            keys = self.keys
            nk = keys.shape[0]
            if keys.dtype.kind in "iu" and nk >= 64:
                lo, hi = int(keys[0]), int(keys[-1])
                span = hi - lo + 1
                if span <= 8 * nk + 4096:
                    table = np.full(span, -1, dtype=np.int32 if nk < 2**31 else np.int64)
                    table[keys - lo] = np.arange(nk, dtype=table.dtype)
                    self._table = (lo, table)
        return self._table if isinstance(self._table, tuple) else None

    def _lead_keys(self) -> np.ndarray | None:
        """For a key index of several columns whose first is an integer: that column on its
        own (contiguous, sorted as the keys are), built once; else None."""
        if self._lead is None:
            self._lead = False
            names = self.keys.dtype.names
            if names and self.keys.dtype[names[0]].kind in "iu":
                self._lead = np.ascontiguousarray(self.keys[names[0]])
        return self._lead if isinstance(self._lead, np.ndarray) else None

    def _packed_keys(self) -> _Packed | None:
        """For a key index of several integer columns (a structured array, which numpy
        searches with a slow generic comparison): the keys packed into one sorted int64
        column, each field offset by its minimum and given the bits of its range, first
        field highest; built once. None when the fields are not all integers or their
        ranges do not fit 62 bits together."""
        if self._packed is None:
            self._packed = False
            keys = self.keys
            names = keys.dtype.names
            if names and keys.shape[0] and all(_packable(keys.dtype[f]) for f in names):
                cols = [keys[f].astype(np.int64) for f in names]
                lows = [int(c.min()) for c in cols]
                bits = [(int(c.max()) - lo).bit_length() for c, lo in zip(cols, lows, strict=True)]
                if sum(bits) <= 62:
                    shifts = [sum(bits[j + 1 :]) for j in range(len(bits))]
                    packed = np.zeros(keys.shape[0], dtype=np.int64)
                    for c, lo, sh in zip(cols, lows, shifts, strict=True):
                        packed |= (c - lo) << sh
                    self._packed = _Packed(packed, names, lows, bits, shifts)
        return self._packed if isinstance(self._packed, _Packed) else None

    @staticmethod
    def build(
        key_width: int, u: Updates, desc: Description, *, sorted_: bool = False
    ) -> TraceBatch:
        """A batch from any updates (consolidated here unless ``sorted_``)."""
        if not sorted_:
            u = consolidate(u, compact=len(u) >= COMPACT_MIN_ROWS)
        return TraceBatch(key_width, u, desc)

    def __len__(self) -> int:
        return int(self.times.shape[0])

    @property
    def num_keys(self) -> int:
        return int(self.keys.shape[0])

    @property
    def is_compact(self) -> bool:
        """Whether times and diffs are stored without a per-update column (all updates have
        one time and one diff)."""
        return is_zero_stride(self.times) and is_zero_stride(self.diffs)

    def nbytes(self, seen: set[int] | None = None) -> int:
        """Bytes of the distinct buffers this batch holds (columns, key index, lookup
        caches), leaving out those whose ids are in ``seen`` and adding the rest to it (pass
        one set over several batches to count shared buffers once). See ``buffer_nbytes``."""
        seen = set() if seen is None else seen
        total = buffer_nbytes([*self.data, self.times, self.diffs, self.keys, self.bounds], seen)
        if isinstance(self._table, tuple):
            total += buffer_nbytes(self._table[1], seen)
        if isinstance(self._packed, _Packed):
            total += buffer_nbytes(self._packed.keys, seen)
        if self._index is not None and id(self._index) not in seen:
            seen.add(id(self._index))
            total += sys.getsizeof(self._index)
        return total

    def updates(self) -> Updates:
        return Updates(self.data, self.times, self.diffs, self.diff_type)

    def diff_bound(self) -> int | None:
        """An upper bound on the sum of ``|diff|`` over the rows of any one key: so also on
        any row's ``|diff|`` and on any sum of one key's diffs. It covers int64 diff columns
        and the int components of tuple diffs (float components do not wrap, and count as
        0); None when some column is neither int64 nor float64 (Python ints beyond int64,
        user objects). Readers use it to prove that sums and products cannot leave int64.

        Computed once, as rows per key times the largest ``|diff|``, unless a merge handed
        it down: the merge of batches holds, per key, sums of their rows, so the sum of
        their bounds bounds it too, without a pass over the merged diffs."""
        if self._bound is None:
            m = getattr(self.diffs, "matrix", None)
            if m is not None and m.dtype == np.int64 and m.size:
                mags: list[int | None] = [max(int(m.max()), -int(m.min()))]
            else:
                mags = [
                    _column_magnitude(c)
                    for c in (self.diffs if isinstance(self.diffs, tuple) else (self.diffs,))
                ]
            if any(m is None for m in mags):
                return None
            mag = max([0, *(m for m in mags if m is not None)])
            n, nk = len(self), len(self.bounds) - 1
            run = (
                0
                if not mag or not nk
                else 1
                if nk == n  # (one row per key: common)
                else int(np.diff(self.bounds).max())
            )
            self._bound = run * mag
        return self._bound

    def unique_rows(self) -> bool:
        """Whether each ``(key, val)`` is on one row of this batch: known when all its
        rows have one time (the batch is consolidated), recorded by ``set_unique_rows``,
        or, for rows of integer columns at several times, seen once: no two neighbouring
        rows (sorted by ``(key, val)``) hold the same data, as when a batch of several
        rounds' inserts and deletes touches each record once. False means not known."""
        if self._unique is None:
            t = self.times
            self._unique = (
                len(t) <= 1
                or is_zero_stride(t)
                or bool((t[-1] == t[0]).all() and (t == t[0]).all())
                or _distinct_sorted_rows(self.data)
            )
        return self._unique

    def set_unique_rows(self) -> None:
        """Record that each ``(key, val)`` is on one row (a concatenation of two batches of
        which that holds, with no ``(key, val)`` in both). It is an error to record it of
        a batch where it does not hold: merges then keep rows that should add up."""
        self._unique = True

    def set_diff_bound(self, bound: int) -> None:
        """Record a ``diff_bound`` known from how the batch was made (a merge hands down the
        sum of its sources' bounds). It is an error to give a bound smaller than the true
        one: readers trust it to prove that sums cannot leave int64."""
        self._bound = bound

    def rows_for(
        self, probe: np.ndarray, probe_list: list[Any] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows holding the (sorted, distinct) probe keys: ``(row indices, probe position)``.

        ``probe_list``: the probe keys as Python values (``probe.tolist()``), when a caller
        searching many batches has them already (a few keys in small batches are looked up
        in a dict by them)."""
        nk = self.keys.shape[0]
        if nk == 0 or probe.shape[0] == 0:
            e = np.empty(0, dtype=np.int64)
            return e, e
        if (
            probe_list is not None
            and nk <= 64
            and probe.shape[0] <= 64
            and probe.dtype == self.keys.dtype
            and self.keys.dtype.kind in "iu"
        ):
            return _expand_runs(self.key_runs_small(probe_list))
        if probe.dtype != self.keys.dtype:
            # Keys of another representation (an int64 column beside floats or Python ints,
            # a structured key beside tuples, two keys of different shapes): numpy would
            # compare them after a lossy cast, or not at all. Equal means equal in Python.
            return self._rows_small(probe)
        if self.keys.dtype.kind in "iu" and (probe[-1] < self.keys[0] or probe[0] > self.keys[-1]):
            # all probe keys outside this batch's range (both are sorted): a stream whose keys
            # grow, such as orders arriving by key, asks its older batches about new keys
            e = np.empty(0, dtype=np.int64)
            return e, e
        names = self.keys.dtype.names
        if names and self.keys.dtype[names[0]].kind in "iu":
            # the same for keys of several columns, by their first (sorted as the keys are):
            # pairs such as (order, supplier) grow with the order key
            kfirst, pfirst = self.keys[names[0]], probe[names[0]]
            if pfirst[-1] < kfirst[0] or pfirst[0] > kfirst[-1]:
                e = np.empty(0, dtype=np.int64)
                return e, e
        if nk <= 64 and probe.shape[0] <= 64 and self.keys.dtype.kind in "iu":
            return self._rows_small(probe)
        if probe.shape[0] <= 16 and self.keys.dtype.kind in "iu":
            return self._rows_few(probe)
        table = self._dense_table() if probe.dtype.kind in "iu" and probe.shape[0] > 16 else None
        packed = (
            self._packed_keys()
            if table is None and probe.dtype.names and probe.shape[0] >= 8
            else None
        )
        lead = (
            self._lead_keys()
            if table is None and packed is None and probe.dtype.names and probe.shape[0] >= 8
            else None
        )
        if lead is not None:
            # keys too wide to pack: searched by their first column, when that column alone
            # leaves each probe key one candidate (a customer key beside the customer's
            # name and address), the candidates then compared whole
            first = probe[self.keys.dtype.names[0]]  # type: ignore[index]
            at = lead.searchsorted(first, "left")
            span = lead.searchsorted(first, "right") - at
            if span.max() > 1:
                lead = None
            else:
                cand = span.nonzero()[0]
                kp = at[cand]
                ok = _same_rows(self.keys, kp, probe, cand)
                hit = cand[ok]
                kpos = kp[ok]
        if lead is not None:
            pass
        elif packed is not None:
            pk = packed.keys
            inside, pp = packed.pack(probe)
            pos = pk.searchsorted(pp)
            found = inside & (pk[np.minimum(pos, nk - 1)] == pp)
            hit = found.nonzero()[0]
            kpos = pos[hit]
        elif table is not None:
            lo, tab = table
            rel = probe - lo
            inside = ((rel >= 0) & (rel < tab.shape[0])).nonzero()[0]
            kp = tab[rel[inside]]
            ok = kp >= 0
            hit = inside[ok]
            kpos = kp[ok].astype(np.int64)
        else:
            try:
                pos = self.keys.searchsorted(probe)
            except TypeError:
                # object keys of types that do not compare (str and bytes, ...): none of them
                # are equal either, as a dict lookup tells
                return self._rows_small(probe)
            clipped = np.minimum(pos, nk - 1)
            found = (pos < nk) & np.asarray(self.keys[clipped] == probe, dtype=bool)
            hit = found.nonzero()[0]
            kpos = pos[hit]
        if self.bounds.shape[0] - 1 == self.times.shape[0]:  # one row per key
            return kpos, hit
        rows, owner = ranges_to_indices(self.bounds[kpos], self.bounds[kpos + 1])
        return rows, hit[owner]

    def _rows_few(self, probe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``rows_for`` for a few int probe keys in a large batch of int keys (same dtype):
        one ``searchsorted``, then each key's rows in Python (the vectorized expansion's
        dozen numpy calls cost more than that on a few keys)."""
        keys = self.keys
        nk = keys.shape[0]
        pos = keys.searchsorted(probe)
        found = keys[np.minimum(pos, nk - 1)].tolist()
        wanted = probe.tolist()
        hits = [j for j, k in enumerate(wanted) if found[j] == k]
        if not hits:
            e = np.empty(0, dtype=np.int64)
            return e, e
        bounds = self.bounds
        if len(hits) == 1:  # (one key: its rows are one range)
            j = hits[0]
            p = int(pos[j])
            lo, hi = int(bounds[p]), int(bounds[p + 1])
            return np.arange(lo, hi), np.full(hi - lo, j)
        plist = pos.tolist()
        return _expand_runs([(j, int(bounds[plist[j]]), int(bounds[plist[j] + 1])) for j in hits])

    def _rows_small(self, probe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``rows_for`` with a dict: for a batch and a probe of a few keys each (numpy's
        per-call cost dominates there: one-update rounds leave many such batches), and for
        probe keys numpy cannot compare exactly with this batch's (a dict matches keys that
        are equal in Python: ``1 == 1.0``, never ``"a" == b"a"``)."""
        index = self._index
        if index is None:
            index = self._index = {k: i for i, k in enumerate(self.keys.tolist())}
        bounds = self.bounds
        runs = []
        for j, k in enumerate(probe.tolist()):
            i = index.get(k)
            if i is not None:
                runs.append((j, int(bounds[i]), int(bounds[i + 1])))
        return _expand_runs(runs)

    def key_spans(self, probe: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where the (sorted, distinct) probe keys' runs lie: ``(probe positions found,
        first row, end row)``, without listing the rows (a key's least values are read
        from the start of its run)."""
        nk = self.keys.shape[0]
        if nk and probe.shape[0] and probe.dtype == self.keys.dtype and probe.dtype != object:
            pos = self.keys.searchsorted(probe)
            found = pos < nk
            found[found] = self.keys[pos[found]] == probe[found]
            hit = found.nonzero()[0]
            kp = pos[hit]
            return hit, self.bounds[kp].astype(np.int64), self.bounds[kp + 1].astype(np.int64)
        rows, owner = self.rows_for(probe)  # (each key's rows one ascending range)
        if not len(rows):
            return rows, rows, rows
        at = run_starts((owner,), len(owner))
        last = np.append(at[1:], len(rows)) - 1
        return owner[at], rows[at], rows[last] + 1

    def key_runs_small(self, keys: list[Any]) -> list[tuple[int, int, int]]:
        """For a few probe keys given as Python values: ``(probe position, first row, end
        row)`` of each key present, matched like ``_rows_small`` (a dict of the batch's keys,
        built once: meant for batches of a few keys)."""
        index = self._index
        if index is None:
            index = self._index = {k: i for i, k in enumerate(self.keys.tolist())}
        bounds = self.bounds
        out = []
        for j, k in enumerate(keys):
            i = index.get(k)
            if i is not None:
                out.append((j, int(bounds[i]), int(bounds[i + 1])))
        return out

    def take_rows(self, rows: np.ndarray) -> Updates:
        data = self.data
        if len(data) >= _STACK_COLUMNS and self._stacked is not False:
            st = self._stacked
            got = st if isinstance(st, np.ndarray) else self._stack(int(st))
            if got is not None:
                return Updates(
                    tuple(got[:, rows]),
                    take_times(self.times, rows),
                    self.diff_type.take(self.diffs, rows),
                    self.diff_type,
                )
        return Updates(
            tuple(c[rows] for c in data),
            take_times(self.times, rows),
            self.diff_type.take(self.diffs, rows),
            self.diff_type,
        )

    def _stack(self, reads: int) -> np.ndarray | None:
        """The data columns as one matrix (when they are 1-d columns of one numeric dtype),
        made once the batch's rows have been read often enough to pay for copying it: at
        the second read, or one read per 1024 rows of the batch if that is more (a read
        saves about a microsecond per column, the copy costs about a nanosecond a value).
        The batch's columns become the matrix's rows (no second copy is kept)."""
        if reads + 1 < max(2, len(self) >> 10):
            self._stacked = reads + 1
            return None
        data = self.data
        dt = data[0].dtype
        if dt.kind not in "iufb" or not all(c.dtype == dt and c.ndim == 1 for c in data):
            self._stacked = False
            return None
        st = np.stack(data)
        self.data = tuple(st)
        self._stacked = st
        return st

    def __getstate__(self) -> dict[str, Any]:
        skip = ("_table", "_index", "_packed", "_lead", "_bound", "_unique", "_stacked")
        state = {k: getattr(self, k) for k in self.__slots__ if k not in (*skip, "__weakref__")}
        for k in ("data", "times", "diffs"):
            state[k] = _pack(state[k])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            setattr(self, k, _unpack(v) if k in ("data", "times", "diffs") else v)
        self._table = None
        self._index = None
        self._packed = None
        self._lead = None
        self._bound = None
        self._unique = None
        self._stacked = 0

    def __repr__(self) -> str:
        d = self.desc
        return f"TraceBatch(len={len(self)}, keys={self.num_keys}, [{d.lower}, {d.upper}))"
