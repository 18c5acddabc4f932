"""Key totals: each key's count so far, the sum of every diff the total-order count has taken.

Why it exists: with a total order the count of a key before a batch is the sum of every
batch before it, so ``count_total`` need not look anything up in a trace if it keeps that
sum per key. The same store serves two owners:

* ``CountTotal`` over a shared arrangement keeps one as a *cache* of its trace (made from
  the trace at the first batch, after a checkpoint is loaded or a run that raised, and
  given up for good when a batch falls outside what a compact form holds exactly);
* ``CountTotalPrivate`` (a count whose arrangement no one else would read) keeps one as its
  whole *state*: it has no trace, so when a compact form cannot take a batch it becomes the
  general form (``widen``), never the trace.

Forms, one small class each (``KeyTotals`` is the protocol):

* ``DenseTotals``: one integer key column; an int64 matrix (a row per diff part, a column
  per key) indexed by ``key - lo``;
* ``DictTotals``: a few keys of integer columns; a dict from the key to its non-zero total;
* ``SortedTotals``: any keys and any diff type; levels of sorted distinct keys beside
  their totals, searched with ``searchsorted`` and merged geometrically (a key lives in one
  level; its total is updated in place; zero totals are dropped when levels merge).

The compact forms hold int diffs and tuples of them in int64 and prove every sum fits:
``bound`` adds up the ``diff_bound`` of every batch taken (a bound on any one key's sum of
``|diff|``), and a batch that would take it past the int64 maximum is not admitted.
``SortedTotals`` holds any diff column and lets the diff type's arithmetic widen (Python
ints beyond int64, exactly as a trace's sums do).

Protocol: ``admit(batch)`` says whether this form can take ``batch`` (a batch of keyed
runs: ``keys`` sorted and distinct, ``bounds``, ``diffs``; a ``TraceBatch``) and makes it
the batch the next ``prior`` / ``store`` calls are about. ``prior`` gives each key's total
before it, ``store`` sets each key's total after it. ``state()`` is plain data and
``KeyTotals.from_state`` its inverse (checkpoints).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ddflow.core.columns import lex_order
from ddflow.core.diff import (
    I64_MAX,
    I64_MIN,
    DiffType,
    IntDiff,
    Rows,
    TupleDiff,
    int_column,
)
from ddflow.core.errors import DataError, DiffTypeError
from ddflow.engine.exchange import hash_columns
from ddflow.trace.batch import TraceBatch

__all__ = [
    "DenseTotals",
    "DictTotals",
    "KeyTotals",
    "SortedTotals",
    "int_tuple",
    "packable_int",
]


def packable_int(dt: np.dtype) -> bool:
    """Whether every value of dtype ``dt`` is an integer that fits int64."""
    return dt.kind in "ib" or (dt.kind == "u" and dt.itemsize < 8)


def int_tuple(dt: DiffType) -> bool:
    """Whether ``dt`` is a tuple diff (plain, ``Sum`` or ``DiffPair``) of int parts."""
    return type(dt) is TupleDiff and all(type(p) is IntDiff for p in dt.parts)


def diff_rows(d: Any) -> tuple[np.ndarray, ...]:
    """The parts of a diff column (an int column is its one part)."""
    return d if isinstance(d, tuple) else (d,)


def diff_matrix(d: Any) -> np.ndarray:
    """The parts of an int64 diff column as the rows of one matrix."""
    m = getattr(d, "matrix", None)
    if m is not None:
        return m
    rows = diff_rows(d)
    if len(rows) == 1:
        return rows[0].reshape(1, -1)
    return np.concatenate(rows).reshape(len(rows), len(rows[0]))


#: key totals are not made from a trace of more rows than this (it is read instead)
HISTORY_ROWS = 1 << 20
#: a dense table may hold this many cells (keys times diff parts: 4 MB) whatever the rows
#: seen (the first batch of keys spread over their whole range, as customer keys of orders
#: are, is counted densely), ...
DENSE_MIN_CELLS = 1 << 19
#: ... and otherwise at most this many times the rows counted so far
DENSE_ROWS_FACTOR = 4
#: at most this many non-zero keys are kept in a dict, and this many taken from one batch
DICT_KEYS = 4096
DICT_BATCH_KEYS = 256


class KeyTotals:
    """Each key's count so far (see the module docstring for the forms and the protocol)."""

    #: whether the totals prove that every sum of an admitted batch stays in int64 (the
    #: compact forms); False: the diff type's arithmetic checks (and widens) itself
    bounded: ClassVar[bool] = True
    #: the name of the form in ``state()``
    form: ClassVar[str] = ""

    def __init__(self, dt: DiffType) -> None:
        self.dt = dt
        self.width = len(dt.parts) if isinstance(dt, TupleDiff) else 1
        self.bound = 0  # the sum of the diff bounds of the batches taken so far

    @staticmethod
    def make(key_width: int, batch: TraceBatch, history: list[TraceBatch]) -> KeyTotals | None:
        """Compact totals holding the sums of ``history`` (the trace before ``batch``), in
        the form ``batch``'s keys suit; None when none suits or ``history`` does not fit."""
        totals = KeyTotals.compact(key_width, batch.diff_type, batch.keys.dtype)
        if totals is None or sum(len(b) for b in history) > HISTORY_ROWS:
            return None  # (a large trace: read as it is)
        for b in history:
            if len(b) and not totals.admit(b):
                return None
            if len(b):
                totals.add(b)
        return totals

    @staticmethod
    def compact(key_width: int, dt: DiffType, key_dtype: np.dtype) -> KeyTotals | None:
        """Empty compact totals for keys of ``key_dtype`` (a batch's key index) and diffs of
        type ``dt``; None when no compact form suits them."""
        if not (type(dt) is IntDiff or int_tuple(dt)) or key_width < 1:
            return None
        if key_width == 1 and packable_int(key_dtype):
            return DenseTotals(dt)
        names = key_dtype.names
        if names and all(packable_int(key_dtype[f]) for f in names):
            return DictTotals(dt)
        return None

    @staticmethod
    def from_state(state: dict[str, Any]) -> KeyTotals:
        """Totals from what ``state()`` returned."""
        cls = {c.form: c for c in (DenseTotals, DictTotals, SortedTotals)}[state["form"]]
        out = cls(state["dt"])
        out.load_state(state)
        return out

    def state(self) -> dict[str, Any]:
        """The totals as plain data (see ``from_state``)."""
        return {"form": self.form, "dt": self.dt, "bound": self.bound}

    def load_state(self, state: dict[str, Any]) -> None:
        self.bound = state["bound"]

    def widen(self) -> SortedTotals:
        """The same totals in the general form (which takes every batch)."""
        raise NotImplementedError

    def size(self) -> tuple[int, int]:
        """``(keys held, bytes)`` (statistics; the bytes of arrays, or an estimate for
        Python values)."""
        raise NotImplementedError

    def _admit_diffs(self, batch: TraceBatch) -> bool:
        """Whether ``batch``'s diffs are of this type, in int64 columns, and every key's
        total stays in int64 with them (then the bound grows by the batch's)."""
        if batch.diff_type is not self.dt and batch.diff_type != self.dt:
            return False
        cols = batch.diffs if isinstance(batch.diffs, tuple) else (batch.diffs,)
        if not all(c.dtype == np.int64 for c in cols):
            return False
        return self.admit_bound(batch.diff_bound())

    def admit_bound(self, b: int | None) -> bool:
        """Whether sums stay in int64 after a batch whose ``diff_bound`` is ``b`` (None: no
        bound); if so the bound grows by ``b``."""
        if b is None or self.bound + b > I64_MAX:
            return False
        self.bound += b
        return True

    def admit(self, batch: TraceBatch) -> bool:
        """Whether ``batch`` can be counted with these totals; it is then the batch the next
        ``prior`` / ``store`` calls are about."""
        raise NotImplementedError

    def add(self, batch: TraceBatch) -> None:
        """Add every row of the admitted ``batch`` (making the totals from a trace)."""
        raise NotImplementedError

    def prior(self, batch: TraceBatch) -> Any:
        """The admitted batch's keys' totals, as a diff column."""
        raise NotImplementedError

    def prior_list(self, batch: TraceBatch) -> Any:
        """The same as Python ints (lists of them for tuple diffs); int diffs only."""
        raise NotImplementedError

    def store(self, batch: TraceBatch, finals: Any) -> None:
        """Set the admitted batch's keys' totals to ``finals`` (a diff column)."""
        raise NotImplementedError

    def store_list(self, batch: TraceBatch, finals: list[Any]) -> None:
        """The same from Python ints (lists of them for tuple diffs)."""
        raise NotImplementedError

    def _parts_column(self, parts: list[np.ndarray]) -> Any:
        """A diff column of this type from its int64 parts."""
        return parts[0] if type(self.dt) is IntDiff else tuple(parts)


class DenseTotals(KeyTotals):
    """Totals of one integer key column in one int64 matrix (a row per diff part, a column
    per key) indexed by ``key - lo``. When a batch's keys fall outside it, it is made anew
    over the keys that still hold a non-zero total and the batch's (keys whose totals went
    back to zero hold nothing and are left out), with room for as many again, as long as
    those keys span at most ``DENSE_MIN_CELLS`` cells or ``DENSE_ROWS_FACTOR`` times the live
    keys and the batch's rows: memory follows the keys alive, so a window of keys that
    moves on (new keys counted, old ones counted away) keeps it bounded."""

    form = "dense"

    def __init__(self, dt: DiffType) -> None:
        super().__init__(dt)
        self.lo = 0
        self.m = np.zeros((self.width, 0), dtype=np.int64)
        self.idx = np.zeros(0, dtype=np.int64)  # the admitted batch's keys, as positions
        self._stamp = np.zeros(0, dtype=np.int64)  # scratch for ``group`` (any contents)

    def state(self) -> dict[str, Any]:
        return {**super().state(), "lo": self.lo, "m": self.m.copy()}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.lo, self.m = state["lo"], state["m"].copy()

    def size(self) -> tuple[int, int]:
        live = np.logical_or.reduce(self.m, axis=0) if self.m.shape[1] else self.idx[:0]
        return int(np.count_nonzero(live)), int(self.m.nbytes)

    def cover(self, klo: int, khi: int, rows: int) -> bool:
        """Make the matrix hold keys ``klo..khi`` (a batch of ``rows`` rows); False when
        that would make it too sparse (nothing is changed then)."""
        cap = self.m.shape[1]
        if cap and self.lo <= klo and khi < self.lo + cap:
            return True
        live = np.logical_or.reduce(self.m, axis=0).nonzero()[0] if cap else self.idx[:0]
        lo, end = klo, khi + 1
        if len(live):
            first, last = int(live[0]), int(live[-1])
            lo, end = min(lo, self.lo + first), max(end, self.lo + last + 1)
        if end - lo > max(DENSE_MIN_CELLS // self.width, DENSE_ROWS_FACTOR * (len(live) + rows)):
            return False
        new_cap = max(2 * (end - lo), 64)
        if klo < self.lo:
            lo = end - new_cap  # (room below: keys may keep growing downwards)
        if lo < I64_MIN or lo + new_cap > I64_MAX:
            return False
        grown = np.zeros((self.width, new_cap), dtype=np.int64)
        if len(live):
            at = self.lo + first - lo
            grown[:, at : at + last - first + 1] = self.m[:, first : last + 1]
        self.m, self.lo = grown, lo
        return True

    def group(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, int]:
        """Rows grouped by their key positions ``idx`` (covered), without sorting:
        ``(rep, grp, g)``, one row per distinct key (``rep``), each row's group in
        ``[0, g)`` (``grp``, the group of row ``rep[j]`` being ``j``), and the number of
        groups. ``grp`` is None when every row has a key of its own (``rep`` is then every
        row in order). Each row writes its number at its key's place of a scratch array;
        the rows that read back their own number stand for their keys (one per key,
        whichever write landed last)."""
        n = idx.shape[0]
        if n == 1:
            return np.zeros(1, dtype=np.int64), None, 1
        stamp = self._stamp
        if stamp.shape[0] < self.m.shape[1]:
            stamp = self._stamp = np.empty(self.m.shape[1], dtype=np.int64)
        rows = np.arange(n)
        stamp[idx] = rows
        rep = np.flatnonzero(stamp.take(idx) == rows)
        g = rep.shape[0]
        if g == n:
            return rows, None, n
        stamp[idx.take(rep)] = np.arange(g)
        return rep, stamp.take(idx), g

    def admit(self, batch: TraceBatch) -> bool:
        keys = batch.keys
        if not packable_int(keys.dtype) or keys.ndim != 1 or not self._admit_diffs(batch):
            return False
        if not self.cover(int(keys[0]), int(keys[-1]), len(batch)):
            return False
        self.idx = keys.astype(np.int64, copy=False) - self.lo
        return True

    def add(self, batch: TraceBatch) -> None:
        rows = np.repeat(self.idx, np.diff(batch.bounds))
        for c, d in zip(self.m, diff_rows(batch.diffs), strict=True):
            np.add.at(c, rows, d)

    def prior_matrix(self) -> np.ndarray:
        """The admitted batch's keys' totals, a column per key."""
        return self.m.take(self.idx, axis=1)

    def store_matrix(self, finals: np.ndarray) -> None:
        """Set the admitted batch's keys' totals to the columns of ``finals``."""
        self.set_columns(self.idx, finals)

    def set_columns(self, idx: np.ndarray, finals: np.ndarray) -> None:
        """Set the totals at key positions ``idx`` to the columns of ``finals`` (part by
        part: a 2-d fancy assignment costs about three times as much)."""
        for row, f in zip(self.m, finals, strict=True):
            row[idx] = f

    def prior(self, batch: TraceBatch) -> Any:
        p = self.prior_matrix()
        return p[0] if type(self.dt) is IntDiff else Rows(p)

    def prior_list(self, batch: TraceBatch) -> Any:
        p = self.prior_matrix()
        return p[0].tolist() if type(self.dt) is IntDiff else p.T.tolist()

    def store(self, batch: TraceBatch, finals: Any) -> None:
        self.set_columns(self.idx, diff_matrix(finals))

    def store_list(self, batch: TraceBatch, finals: list[Any]) -> None:
        if type(self.dt) is IntDiff:
            self.m[0, self.idx] = finals
        else:
            self.m[:, self.idx] = np.array(finals, dtype=np.int64).reshape(-1, self.width).T

    def widen(self) -> SortedTotals:
        live = np.flatnonzero(self.m.any(axis=0))
        out = SortedTotals(self.dt)
        out.add_level(live + self.lo, self._parts_column([r[live] for r in self.m]))
        return out


class DictTotals(KeyTotals):
    """Totals of a few keys (of integer columns) in a dict from the key, as Python values,
    to its non-zero total (an int, or a tuple of ints for tuple diffs)."""

    form = "dict"

    def __init__(self, dt: DiffType) -> None:
        super().__init__(dt)
        self.totals: dict[Any, Any] = {}
        self.keys: list[Any] = []  # the admitted batch's keys, as Python values
        self.zero: Any = 0 if type(dt) is IntDiff else (0,) * self.width
        self.key_dtype: np.dtype | None = None  # a key dtype known to be integer fields

    def state(self) -> dict[str, Any]:
        return {**super().state(), "totals": dict(self.totals), "key_dtype": self.key_dtype}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.totals, self.key_dtype = dict(state["totals"]), state["key_dtype"]

    def size(self) -> tuple[int, int]:
        import sys

        items = self.totals.items()
        return len(self.totals), sys.getsizeof(self.totals) + sum(
            sys.getsizeof(k) + sys.getsizeof(v) for k, v in items
        )

    def admit_keys(self, num_keys: int) -> bool:
        """Whether a batch of ``num_keys`` keys (of integer columns) fits the dict."""
        return num_keys <= DICT_BATCH_KEYS and len(self.totals) + num_keys <= DICT_KEYS

    def admit(self, batch: TraceBatch) -> bool:
        kd = batch.keys.dtype
        if kd != self.key_dtype:  # (checked once per key dtype)
            if not kd.names or not all(packable_int(kd[f]) for f in kd.names):
                return False
            self.key_dtype = kd
        if not self.admit_keys(batch.num_keys) or not self._admit_diffs(batch):
            return False
        self.keys = batch.keys.tolist()
        return True

    def add(self, batch: TraceBatch) -> None:
        bounds = batch.bounds.tolist()
        diffs = batch.diffs if isinstance(batch.diffs, tuple) else (batch.diffs,)
        cols = [d.tolist() for d in diffs]
        prior = self.prior_list(batch)
        finals: list[Any] = []
        for j, t in enumerate(prior):
            acc = [t] if type(self.dt) is IntDiff else t
            for r in range(bounds[j], bounds[j + 1]):
                acc = [a + c[r] for a, c in zip(acc, cols, strict=True)]
            finals.append(acc[0] if type(self.dt) is IntDiff else acc)
        self.store_list(batch, finals)

    def prior(self, batch: TraceBatch) -> Any:
        vals = self.prior_list(batch)
        if type(self.dt) is IntDiff:
            return np.array(vals, dtype=np.int64)
        arr = np.array(list(zip(*vals, strict=True)), dtype=np.int64)
        return tuple(arr.reshape(self.width, len(vals)))

    def prior_list(self, batch: TraceBatch) -> Any:
        get, zero = self.totals.get, self.zero
        if type(self.dt) is IntDiff:
            return [get(k, 0) for k in self.keys]
        return [list(get(k, zero)) for k in self.keys]

    def store(self, batch: TraceBatch, finals: Any) -> None:
        if type(self.dt) is IntDiff:
            self.store_list(batch, finals.tolist())
        else:
            self.store_list(
                batch, [list(r) for r in zip(*(f.tolist() for f in finals), strict=True)]
            )

    def store_list(self, batch: TraceBatch, finals: list[Any]) -> None:
        self.put(self.keys, finals)

    def put(self, keys: list[Any], finals: list[Any]) -> None:
        """Set the totals of ``keys`` (Python values) to ``finals`` (Python ints, or lists
        of them for tuple diffs); zero totals are dropped."""
        totals = self.totals
        for k, f in zip(keys, finals, strict=True):
            if type(self.dt) is IntDiff:
                if f:
                    totals[k] = f
                else:
                    totals.pop(k, None)
            elif any(f):
                totals[k] = tuple(f)
            else:
                totals.pop(k, None)

    def widen(self) -> SortedTotals:
        out = SortedTotals(self.dt)
        if not self.totals:
            return out
        items = sorted(self.totals.items())
        width = len(items[0][0])
        # (int64 fields, as a key index of int64 columns has: keys of narrower columns are
        # cast to them when searched)
        kd = np.dtype([(f"f{i}", np.int64) for i in range(width)])
        keys = np.array([k for k, _ in items], dtype=kd)
        cols: list[list[int]] = (
            [[v for _, v in items]]
            if type(self.dt) is IntDiff
            else [list(c) for c in zip(*(v for _, v in items), strict=True)]
        )
        out.add_level(keys, self._parts_column([int_column(c) for c in cols]))
        return out


class _Packing:
    """Structured integer keys packed into one sorted int64 column (numpy searches a
    structured array with a slow generic comparison): each field offset by the level's
    least value of it and given the bits of its range, the first field highest, so the
    packed keys sort as the keys do. Probe keys are packed the same way; only those within
    every field's range (``inside``) can be keys of the level."""

    __slots__ = ("his", "keys", "layout")

    def __init__(
        self, keys: np.ndarray, names: tuple[str, ...], lows: list[int], his: list[int]
    ) -> None:
        self.his = his
        bits = [(hi - lo).bit_length() for lo, hi in zip(lows, his, strict=True)]
        self.layout = _KeyPacking(names, lows, bits)
        self.keys = self.layout.pack(keys)

    @staticmethod
    def of(keys: np.ndarray) -> _Packing | None:
        """The packing of a level's structured keys; None when a field is not an integer
        or the fields' ranges do not fit 62 bits together."""
        kd = keys.dtype
        names = kd.names
        if not names or not keys.shape[0] or not all(packable_int(kd[f]) for f in names):
            return None
        lows = [int(keys[f].min()) for f in names]
        his = [int(keys[f].max()) for f in names]
        if sum((hi - lo).bit_length() for lo, hi in zip(lows, his, strict=True)) > 62:
            return None
        return _Packing(keys, names, lows, his)

    def pack(self, probe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(inside, packed)`` of probe keys of the level's dtype (``packed`` is
        meaningless where not ``inside``)."""
        inside: np.ndarray | None = None
        for f, lo, hi in zip(self.layout.names, self.layout.lows, self.his, strict=True):
            c = probe[f]
            ok = (c >= lo) & (c <= hi)  # (compared as values: an offset could wrap)
            inside = ok if inside is None else inside & ok
        assert inside is not None
        return inside, self.layout.pack(probe)


class _KeyPacking:
    """Structured integer keys packed into one int64, the same way for every level of a
    ``SortedTotals`` (so its levels are plain int64 columns, searched and merged as one
    integer key column is, instead of structured arrays, which numpy compares field by
    field through a generic function): each field offset by its ``low`` and given
    ``bits``, the first field highest, so packed keys sort as the keys do and a repacking
    keeps a level's order. Each field's bits leave room above and below the values seen,
    so keys that keep growing (an order key) are repacked ``O(log range)`` times."""

    __slots__ = ("bits", "lows", "names", "shifts")

    def __init__(self, names: tuple[str, ...], lows: list[int], bits: list[int]) -> None:
        self.names, self.lows, self.bits = names, lows, bits
        self.shifts = [sum(bits[j + 1 :]) for j in range(len(bits))]

    @staticmethod
    def covering(names: tuple[str, ...], lows: list[int], his: list[int]) -> _KeyPacking | None:
        """A packing of values ``lows[i] .. his[i]`` of each field: with room to grow when
        that fits 62 bits, else tight; None when not even that fits."""
        spans = [hi - lo for lo, hi in zip(lows, his, strict=True)]
        roomy = [(2 * s + 1).bit_length() for s in spans]
        if sum(roomy) <= 62:
            los = []
            for lo, s, b in zip(lows, spans, roomy, strict=True):
                room = ((1 << b) - 1 - s) // 2  # (half of the room below the values)
                los.append(max(lo - room, I64_MIN))
            return _KeyPacking(names, los, roomy)
        tight = [s.bit_length() for s in spans]
        if sum(tight) <= 62:
            return _KeyPacking(names, list(lows), tight)
        return None

    def holds(self, lows: list[int], his: list[int]) -> bool:
        """Whether every field's values ``lows[i] .. his[i]`` fit this packing."""
        return all(
            lo >= low and hi - low < (1 << b)
            for lo, hi, low, b in zip(lows, his, self.lows, self.bits, strict=True)
        )

    def pack(self, keys: np.ndarray) -> np.ndarray:
        """Structured keys (each field within the packing) as packed int64 keys."""
        out: np.ndarray | None = None
        for f, lo, sh in zip(keys.dtype.names or (), self.lows, self.shifts, strict=True):
            term = keys[f].astype(np.int64) - lo
            if sh:
                term <<= sh
            out = term if out is None else out | term
        assert out is not None
        return out

    def unpack(self, packed: np.ndarray) -> np.ndarray:
        """Packed keys as structured keys of int64 fields."""
        out = np.empty(len(packed), dtype=[(f, np.int64) for f in self.names])
        for f, lo, b, sh in zip(self.names, self.lows, self.bits, self.shifts, strict=True):
            out[f] = ((packed >> sh) & ((1 << b) - 1)) + lo
        return out


def _field_ranges(keys: np.ndarray) -> tuple[list[int], list[int]]:
    """Each field's least and greatest value (non-empty structured keys)."""
    names = keys.dtype.names or ()
    return [int(keys[f].min()) for f in names], [int(keys[f].max()) for f in names]


def key_hashes(keys: np.ndarray) -> np.ndarray:
    """A 64-bit hash (``uint64``) of each structured integer key: the exchange's hash of
    its fields as columns."""
    return hash_columns([keys[f] for f in keys.dtype.names or ()], keys.shape[0])


class _Hashed:
    """A level's structured keys that do not pack (their ranges need more than 62 bits)
    found by a 64-bit hash of each: the hashes sorted, and where each key is. A probe key
    is looked up by its hash and then compared with the key found, so a hash match alone
    never counts. Keys of a level whose hashes are not all distinct are not indexed this
    way (``of`` gives None; the level is searched as a structured array)."""

    __slots__ = ("hashes", "where")

    def __init__(self, hashes: np.ndarray, where: np.ndarray) -> None:
        self.hashes, self.where = hashes, where

    @staticmethod
    def of(keys: np.ndarray) -> _Hashed | None:
        h = key_hashes(keys)
        where = np.argsort(h, kind="stable")
        hs = h[where]
        if len(hs) > 1 and bool((hs[1:] == hs[:-1]).any()):
            return None
        return _Hashed(hs, where)

    def find(
        self, keys: np.ndarray, probe: np.ndarray, ph: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``_Level.find`` for probe keys ``probe`` with hashes ``ph``."""
        hs = self.hashes
        pos = np.minimum(hs.searchsorted(ph), len(hs) - 1)
        cand = np.flatnonzero(hs[pos] == ph)
        at = self.where[pos[cand]]
        kd = keys.dtype
        if kd.itemsize == sum(kd[f].itemsize for f in kd.names or ()):
            # (no padding between fields: the keys compared as bytes, equal integers of one
            # dtype being equal bytes)
            a = np.ascontiguousarray(keys[at]).view(np.uint8).reshape(len(at), kd.itemsize)
            b = np.ascontiguousarray(probe[cand]).view(np.uint8).reshape(len(cand), kd.itemsize)
            same = (a == b).all(axis=1)
        else:
            same = np.ones(len(cand), dtype=bool)
            for f in kd.names or ():
                same &= keys[f][at] == probe[f][cand]
        return cand[same], at[same]


class _Level:
    """One level of ``SortedTotals``: sorted distinct keys and their totals (a diff column
    aligned with them), and, once needed, the keys packed into one int64 column (structured
    integer keys), their hashes (structured integer keys that do not pack) or a dict from
    key to position (keys that do not compare)."""

    __slots__ = ("hashed", "index", "keys", "packing", "totals")

    def __init__(self, keys: np.ndarray, totals: Any) -> None:
        self.keys = keys
        self.totals = totals
        self.index: dict[Any, int] | None = None
        self.packing: _Packing | None | bool = None  # (False: the keys do not pack)
        self.hashed: _Hashed | None | bool = None  # (False: hashes are not distinct)

    def find(
        self, probe: np.ndarray, ph: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(probe positions, level positions)`` of the probe keys held here (``probe``
        sorted and distinct, of the level's key dtype; ``ph`` their ``key_hashes``, for
        structured keys)."""
        keys = self.keys
        n = keys.shape[0]
        if not n:
            e = np.zeros(0, dtype=np.int64)
            return e, e
        if keys.dtype.names:
            if self.packing is None:
                self.packing = _Packing.of(keys) or False
            if isinstance(self.packing, _Packing):
                pk = self.packing.keys
                inside, pp = self.packing.pack(probe)
                pos = pk.searchsorted(pp)
                hit = (inside & (pk[np.minimum(pos, n - 1)] == pp)).nonzero()[0]
                return hit, pos[hit]
            if ph is not None and _int_keys(keys) and probe.dtype == keys.dtype:
                if self.hashed is None:
                    self.hashed = _Hashed.of(keys) or False
                if isinstance(self.hashed, _Hashed):
                    return self.hashed.find(keys, probe, ph)
        try:
            pos = keys.searchsorted(probe)
            hit = np.flatnonzero(
                (pos < n) & np.asarray(keys[np.minimum(pos, n - 1)] == probe, dtype=bool)
            )
            return hit, pos[hit]
        except TypeError:
            # Python values of types that do not compare (str and bytes): none of them are
            # equal either, as a dict tells
            if self.index is None:
                self.index = {k: i for i, k in enumerate(keys.tolist())}
            got = [(j, self.index.get(k)) for j, k in enumerate(probe.tolist())]
            pairs = [(j, i) for j, i in got if i is not None]
            return (
                np.array([j for j, _ in pairs], dtype=np.int64),
                np.array([i for _, i in pairs], dtype=np.int64),
            )


class SortedTotals(KeyTotals):
    """Totals of any keys and any diff type: levels of sorted distinct keys (a 1-d key
    index, as a trace batch's: the column for one key column, a structured array for
    several numeric ones, Python tuples otherwise) beside their totals. A batch's keys are
    searched in every level (``searchsorted``); those found have their totals updated in
    place, the others become a new level, and the newest level is merged into the one
    before it while it holds at least half as many keys, dropping zero totals, so there are
    about ``log2(keys)`` levels and each key is copied ``O(log keys)`` times in all.

    Structured integer keys (several integer key columns) are kept packed into one int64
    column (``_KeyPacking``, the same for every level, widened as keys spread) while their
    ranges fit 62 bits together, and as structured arrays from then on.

    Keys of another representation than the levels' (an int column beside floats, int32
    fields beside int64) are compared as Python values from then on: every level's keys
    become an object array once (``comparable``'s rule: equal means equal in Python)."""

    bounded = False
    form = "sorted"

    def __init__(self, dt: DiffType) -> None:
        super().__init__(dt)
        self.levels: list[_Level] = []
        self.objects = False  # keys kept as Python values (object arrays)
        self.dead = 0  # zero totals held in the levels (dropped at merges)
        self._probe = np.zeros(0)
        self._found: list[tuple[_Level, np.ndarray, np.ndarray]] = []
        self._missing = np.zeros(0, dtype=np.int64)
        #: how the levels' structured integer keys are packed (None: they are not)
        self.packing: _KeyPacking | None = None
        #: False once keys did not pack (the levels keep structured keys from then on)
        self.packable = True

    def held(self) -> list[tuple[np.ndarray, Any]]:
        """Each level's keys (as a key index: structured keys unpacked) and totals."""
        pk = self.packing
        return [(lv.keys if pk is None else pk.unpack(lv.keys), lv.totals) for lv in self.levels]

    def state(self) -> dict[str, Any]:
        return {
            **super().state(),
            "levels": [(k, self.dt.take(t, np.arange(len(k)))) for k, t in self.held()],
            "objects": self.objects,
            "dead": self.dead,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.levels = [_Level(k, t) for k, t in state["levels"]]
        self.objects, self.dead = state["objects"], state["dead"]
        self.packing, self.packable = None, True  # (packed again by the next batch)

    def __len__(self) -> int:
        """How many keys the levels hold (zero totals not yet dropped included)."""
        return sum(len(lv.keys) for lv in self.levels)

    def size(self) -> tuple[int, int]:
        nbytes = 0
        for lv in self.levels:
            for a in (lv.keys, *(lv.totals if isinstance(lv.totals, tuple) else (lv.totals,))):
                nbytes += int(getattr(a, "nbytes", 0))
        return len(self), nbytes

    def add_level(self, keys: np.ndarray, totals: Any) -> None:
        """Take sorted distinct ``keys`` (none held yet) with their totals (a level of
        their own, merged as the levels are)."""
        if len(keys):
            packed = self._packed(keys)
            keys = self._as_key_dtype(keys) if packed is None else packed
            self.levels.append(_Level(keys, totals))
            self._merge()

    def _packed(self, keys: np.ndarray) -> np.ndarray | None:
        """``keys`` packed as the levels' keys are (``_KeyPacking``), packing or repacking
        the levels first when needed; None when keys are not packed (not structured
        integers, or their ranges do not fit 62 bits: the levels are then unpacked for
        good)."""
        if not self.packable or self.objects:
            return None
        kd = keys.dtype
        names = kd.names
        pk = self.packing
        if (
            not names
            or not all(packable_int(kd[f]) for f in names)
            or (pk is not None and len(names) != len(pk.names))
            or (pk is None and not self._structured_ints(len(names)))
        ):
            self._unpack()
            return None
        if not len(keys):
            return np.zeros(0, dtype=np.int64) if pk is not None else None
        lows, his = _field_ranges(keys)
        if pk is not None and pk.holds(lows, his):
            return pk.pack(keys)
        # a packing covering these keys and the levels' (read unpacked: a repacking copies
        # every level anyway, and happens a few times as ranges double)
        held = [k for k, _ in self.held()]
        for lk in held:
            if len(lk):
                lo2, hi2 = _field_ranges(lk)
                lows = [min(a, b) for a, b in zip(lows, lo2, strict=True)]
                his = [max(a, b) for a, b in zip(his, hi2, strict=True)]
        new = _KeyPacking.covering(tuple(pk.names if pk else names), lows, his)
        if new is None:
            self._unpack()
            return None
        for lv, lk in zip(self.levels, held, strict=True):
            lv.keys, lv.index, lv.packing = new.pack(lk), None, None
        self.packing = new
        return new.pack(keys)

    def _structured_ints(self, width: int) -> bool:
        """Whether every level holds structured integer keys of ``width`` fields (which
        the first packing packs)."""
        for lv in self.levels:
            names = lv.keys.dtype.names
            if not names or len(names) != width or not _int_keys(lv.keys):
                return False
        return True

    def _unpack(self) -> None:
        """Keep structured keys from now on (unpacking the levels if packed)."""
        pk = self.packing
        if pk is not None:
            for lv in self.levels:
                lv.keys, lv.index, lv.packing = pk.unpack(lv.keys), None, None
        self.packing, self.packable = None, False

    def _as_key_dtype(self, keys: np.ndarray) -> np.ndarray:
        """``keys`` in the levels' representation, switching every level to Python values
        when the two differ and no exact cast joins them."""
        if self.objects:
            return _as_objects(keys)
        if not self.levels:
            return keys
        kd = self.levels[0].keys.dtype
        if keys.dtype == kd:
            return keys
        if keys.dtype.kind in "biu" and kd.kind in "iu" and np.can_cast(keys.dtype, kd):
            return keys.astype(kd)
        got, want = keys.dtype, kd
        if (
            got.names
            and want.names
            and len(got.names) == len(want.names)
            and all(
                got[a].kind in "biu" and want[b].kind in "iu" and np.can_cast(got[a], want[b])
                for a, b in zip(got.names, want.names, strict=True)
            )
        ):
            out = np.empty(len(keys), dtype=want)  # (integer fields widened one by one)
            for a, b in zip(got.names, want.names, strict=True):
                out[b] = keys[a]
            return out
        self.objects = True
        for lv in self.levels:
            lv.keys, lv.index, lv.packing = _as_objects(lv.keys), None, None
        return _as_objects(keys)

    def admit(self, batch: TraceBatch) -> bool:
        if batch.diff_type is not self.dt and batch.diff_type != self.dt:
            raise DiffTypeError(
                f"count_total got {batch.diff_type.name} diffs after {self.dt.name} diffs; "
                "a collection's diffs must keep one type"
            )
        probe = self._packed(batch.keys)
        if probe is None:
            probe = self._as_key_dtype(batch.keys)
        missing = np.arange(len(probe))
        found = []
        # (structured keys not packed: their hashes, for levels that do not pack either)
        ph = key_hashes(probe) if probe.dtype.names and _int_keys(probe) else None
        for lv in reversed(self.levels):  # (the newest levels are the smallest)
            if not len(missing):
                break
            whole = len(missing) == len(probe)
            sub = probe if whole else probe[missing]
            hit, at = lv.find(sub, None if ph is None else ph if whole else ph[missing])
            if len(hit):
                found.append((lv, missing[hit], at))
                keep = np.ones(len(missing), dtype=bool)
                keep[hit] = False
                missing = missing[keep]
        self._probe, self._found, self._missing = probe, found, missing
        return True

    def prior(self, batch: TraceBatch) -> Any:
        dt = self.dt
        acc = dt.zeros(len(self._probe))
        for lv, at_probe, at_level in self._found:
            acc = dt.put(acc, at_probe, dt.take(lv.totals, at_level))
        return acc

    def prior_list(self, batch: TraceBatch) -> Any:
        p = self.prior(batch)
        if type(self.dt) is IntDiff:
            return p.tolist()
        return [list(r) for r in zip(*(c.tolist() for c in p), strict=True)]

    def store(self, batch: TraceBatch, finals: Any) -> None:
        dt = self.dt
        for lv, at_probe, at_level in self._found:
            got = dt.take(finals, at_probe)
            lv.totals = dt.put(lv.totals, at_level, got)
            self.dead += int(dt.zero_mask(got).sum())
        if len(self._missing):
            new = dt.take(finals, self._missing)
            live = np.flatnonzero(~dt.zero_mask(new))
            if len(live):
                self.levels.append(_Level(self._probe[self._missing[live]], dt.take(new, live)))
        self._merge()

    def store_list(self, batch: TraceBatch, finals: list[Any]) -> None:
        if type(self.dt) is IntDiff:
            self.store(batch, int_column(finals))
        else:
            cols = [int_column(list(c)) for c in zip(*finals, strict=True)]
            if not finals:
                cols = [np.zeros(0, dtype=np.int64)] * self.width
            self.store(batch, tuple(cols))

    def _merge(self) -> None:
        """Merge the newest level into the one before while it holds at least half as many
        keys (all levels into one when zero totals are more than half of what they hold)."""
        levels = self.levels
        if self.dead and 2 * self.dead > len(self):
            while len(levels) > 1 and self._merge_last(levels):
                pass
            if len(levels) == 1:
                self._merge_one(levels)
            self.dead = 0
            return
        while len(levels) > 1 and 2 * len(levels[-1].keys) >= len(levels[-2].keys):
            if not self._merge_last(levels):
                return

    def _merge_last(self, levels: list[_Level]) -> bool:
        """Merge the two newest levels (zero totals dropped); False when their keys do not
        compare (they then stay apart, searched by dict)."""
        a, b = levels[-2], levels[-1]
        dt = self.dt
        if _int_keys(a.keys) and a.keys.dtype == b.keys.dtype:
            # integer keys: the two runs are sorted and share no key, so only where their
            # ranges meet is sorted (keys that arrive in order, such as an order key's line
            # items, meet at most at a batch's first and last keys)
            if not a.keys[:1].searchsorted(b.keys[:1])[0]:  # (b starts below a: no key is shared)
                a, b = b, a
            i = int(a.keys.searchsorted(b.keys[:1])[0])  # a[:i] below all of b
            j = int(b.keys.searchsorted(a.keys[-1:], side="right")[0])  # b[j:] above all of a
            mid = np.concatenate([a.keys[i:], b.keys[:j]])
            mid_totals = dt.concat([dt.take(a.totals, slice(i, None)), dt.take(b.totals, slice(j))])
            order = _key_order(mid) if len(mid) else np.zeros(0, np.int64)
            keys = np.concatenate([a.keys[:i], mid[order], b.keys[j:]])
            totals = dt.concat(
                [
                    dt.take(a.totals, slice(i)),
                    dt.take(mid_totals, order),
                    dt.take(b.totals, slice(j, None)),
                ]
            )
            live = (~dt.zero_mask(totals)).nonzero()[0]
            if len(live) == len(keys):  # (no zero total to drop: the merged run as it is)
                levels[-2:] = [_Level(keys, totals)]
                return True
        else:
            keys = np.concatenate([a.keys, b.keys])
            totals = dt.concat([a.totals, b.totals])
            try:
                order = _key_order(keys)
            except (TypeError, DataError):
                return False
            live = order[~dt.zero_mask(dt.take(totals, order))]
        self.dead = max(0, self.dead - (len(keys) - len(live)))
        levels[-2:] = [_Level(keys[live], dt.take(totals, live))] if len(live) else []
        return True

    def _merge_one(self, levels: list[_Level]) -> None:
        """Drop the zero totals of a single level."""
        lv = levels[0]
        live = np.flatnonzero(~self.dt.zero_mask(lv.totals))
        if not len(live):
            levels.clear()
        elif len(live) < len(lv.keys):
            levels[0] = _Level(lv.keys[live], self.dt.take(lv.totals, live))

    def widen(self) -> SortedTotals:
        return self


def _as_objects(a: np.ndarray) -> np.ndarray:
    """A key index as Python values (tuples for several columns) in an object array."""
    if a.dtype == object:
        return a
    out = np.empty(len(a), dtype=object)
    out[:] = a.tolist()
    return out


def _int_keys(keys: np.ndarray) -> bool:
    """Whether a key index is of integer (or bool) values: one column, or fields of them."""
    names = keys.dtype.names
    if names:
        return all(keys.dtype[f].kind in "biu" for f in names)
    return keys.dtype.kind in "biu"


def _key_order(keys: np.ndarray) -> np.ndarray:
    """The order that sorts a key index (structured integer keys by their packed fields)."""
    names = keys.dtype.names
    if names:
        return lex_order([keys[f] for f in names])
    return lex_order([keys])
