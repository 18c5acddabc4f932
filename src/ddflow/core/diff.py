"""Diff algebra: the types a ``diff`` can have, and their vectorized arithmetic.

An update ``(data, time, diff)`` changes the multiplicity of ``data`` by ``diff``. Diffs form
a *semigroup* (``plus``, ``is_zero``); a *monoid* adds a zero; an *abelian group* adds
``negate`` (needed by ``reduce``, ``negate`` and ``antijoin``; ``count`` and ``count_total``
retract with int output diffs and need nothing of the input diff). ``join`` multiplies the
diffs of matched updates, so diff types may also define a product.

A ``DiffType`` describes one diff type and implements its arithmetic over a *diff column*:
an ``int64`` array (``IntDiff``, ``MinSumDiff``), a tuple of component columns (``TupleDiff``:
tuples, ``DiffPair``, ``Sum``; zero iff every component is zero), or an ``object`` array of
user semigroup values (``ObjectDiff``: correct, per-element Python calls).

Int diffs are exact integers, never wrapped: an ``IntDiff`` column is ``int64`` while its
values fit, and an ``object`` column of Python ints when some sum, product or negation
leaves int64. Each int64 operation first bounds its result from its inputs' largest
magnitudes (a sum of ``n`` values of magnitude at most ``m`` stays within ``n * m``): two
numpy reductions per column, no per-row Python. Only when the bound exceeds int64 is the
operation redone over Python ints, and its result is narrowed back to ``int64`` when every
value fits, so one large diff does not slow the rest of the dataflow.

Values shipped here: ``Sum(value, count)`` (zero only when both are zero, so a sum of
0 over a non-empty group survives) and ``MinSum(value)`` (the min-sum monoid: plus is
``min``, times is ``+``, zero is +infinity; a monoid without subtraction).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ddflow.core.columns import Layout, Leaf, Struct, Tup
from ddflow.core.errors import DiffTypeError, RetractionError

__all__ = [
    "DiffPair",
    "Rows",
    "DiffType",
    "INT_DIFF",
    "IntDiff",
    "MinSum",
    "MinSumDiff",
    "ObjectDiff",
    "Sum",
    "TupleDiff",
    "diff_type_of",
    "int_column",
    "magnitude",
    "narrow",
]

MINSUM_ZERO = np.iinfo(np.int64).max
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def magnitude(d: np.ndarray) -> int:
    """The largest absolute value in a non-empty int64 column, as a Python int."""
    if d.strides[0] == 0:  # a constant column (compact trace batches): one value
        return abs(int(d[0]))
    if len(d) <= 64:  # (two numpy reductions cost more than this on a few values)
        v = d.tolist()
        return max(max(v), -min(v))
    return max(int(d.max()), -int(d.min()))


def narrow(d: np.ndarray) -> np.ndarray:
    """An ``object`` column of Python ints as ``int64`` when every value fits; any other
    column as it is."""
    if d.dtype != object:
        return d
    if not len(d):
        return np.empty(0, dtype=np.int64)
    if min(d) >= I64_MIN and max(d) <= I64_MAX:
        return d.astype(np.int64)
    return d


def int_column(values: Sequence[int]) -> np.ndarray:
    """A column of Python ints: ``int64``, or ``object`` if some value does not fit."""
    try:
        return np.asarray(values, dtype=np.int64).reshape(len(values))
    except OverflowError:
        out = np.empty(len(values), dtype=object)
        out[:] = [int(v) for v in values]
        return out


def _wide(d: np.ndarray) -> np.ndarray:
    """``d`` as Python ints (an ``object`` column)."""
    return d if d.dtype == object else d.astype(object)


@dataclass(frozen=True, order=True, slots=True)
class DiffPair:
    """A pair of diffs added, negated and zero-tested componentwise."""

    element1: Any
    element2: Any


@dataclass(frozen=True, order=True, slots=True)
class Sum:
    """A sum together with the number of summed records.

    Zero only when both ``value`` and ``count`` are zero, so a group whose values sum to 0
    still has an output.
    """

    value: Any
    count: int


@dataclass(frozen=True, order=True, slots=True)
class MinSum:
    """The min-sum monoid: ``plus`` is ``min``, ``times`` is ``+``, zero is +inf."""

    value: int

    def plus(self, other: MinSum) -> MinSum:
        return MinSum(min(self.value, other.value))

    def is_zero(self) -> bool:
        return self.value >= MINSUM_ZERO


class DiffType:
    """Arithmetic of one diff type over diff columns. Subclasses are frozen values."""

    abelian: bool = True
    #: the Python class of values, for error messages
    name: str = "diff"

    # -- conversion --------------------------------------------------------------------------
    def from_values(self, values: Sequence[Any]) -> Any:
        raise NotImplementedError

    def to_values(self, d: Any) -> list[Any]:
        raise NotImplementedError

    def from_columns(self, cols: Any, n: int) -> Any:
        """A diff column from user-supplied numpy columns (vectorized ingestion)."""
        raise DiffTypeError(f"diffs of type {self.name} cannot be given as columns")

    def one(self, n: int) -> Any:
        """``n`` copies of the multiplicative identity (the diff of ``insert``)."""
        raise DiffTypeError(
            f"collections with {self.name} diffs have no default diff; use update(x, diff)"
        )

    # -- columns -----------------------------------------------------------------------------
    def length(self, d: Any) -> int:
        return int(d.shape[0])

    def take(self, d: Any, idx: Any) -> Any:
        if isinstance(idx, np.ndarray) and idx.dtype.kind in "iu":
            if d.ndim and d.strides[0] == 0:
                # a zero-stride column (a compact trace batch's): ``np.take`` would first
                # copy all of it, fancy indexing reads only the rows taken
                return d[idx]
            return d.take(idx, axis=0)  # (the method: ``np.take``'s wrapper costs ~0.5 us)
        return d[idx]

    def concat(self, ds: Sequence[Any]) -> Any:
        return np.concatenate(ds)

    def empty(self) -> Any:
        return self.from_values([])

    def zeros(self, n: int) -> Any:
        """``n`` zero diffs (``None`` entries for user semigroups, which have no zero)."""
        raise NotImplementedError

    def add(self, a: Any, b: Any) -> Any:
        """Elementwise ``a + b`` of two diff columns of equal length."""
        raise NotImplementedError

    def put(self, target: Any, idx: np.ndarray, values: Any) -> Any:
        """``target[idx] = values`` for a diff column; returns the column (a new one when
        ``target`` cannot hold the values, e.g. Python ints beyond int64)."""
        target[idx] = values
        return target

    def previous(self, d: Any, starts: np.ndarray, first: Any) -> Any:
        """Each row's predecessor in runs ``d[starts[i]:starts[i+1]]`` (``starts`` sorted,
        the first 0): the row above's value, and ``first[i]`` at the start of run ``i``."""
        n = self.length(d)
        return self.put(self.take(d, np.maximum(np.arange(-1, n - 1), 0)), starts, first)

    # -- algebra -----------------------------------------------------------------------------
    def zero_mask(self, d: Any) -> np.ndarray:
        raise NotImplementedError

    def sum_segments(self, d: Any, starts: np.ndarray, *, bounded: bool = False) -> Any:
        """Sum each run ``d[starts[i]:starts[i+1]]`` (``starts`` sorted, first is 0).
        ``bounded``: the caller knows no int sum leaves int64 (its check is skipped)."""
        raise NotImplementedError

    def sum_groups(self, d: Any, group: np.ndarray, groups: int) -> Any:
        """Sum the diffs of each group (``group[i]`` in ``[0, groups)`` names row ``i``'s),
        without sorting; None when this type has no such path (callers then sort)."""
        return None

    def negate(self, d: Any) -> Any:
        raise DiffTypeError(f"diffs of type {self.name} cannot be negated (not an abelian group)")

    def scale(self, d: Any, k: np.ndarray) -> Any:
        """Multiply each diff by an int (the input multiplicity of ``explode``)."""
        raise DiffTypeError(f"diffs of type {self.name} cannot be multiplied by an integer")

    def multiply(self, d: Any, other: DiffType, e: Any) -> tuple[DiffType, Any]:
        """The product of two diff columns (used by ``join``)."""
        if isinstance(other, IntDiff):
            return self, self.scale(d, e)
        if isinstance(self, IntDiff):
            return other, other.scale(e, d)
        raise DiffTypeError(f"cannot multiply {self.name} diffs by {other.name} diffs")

    def running_sums(self, d: Any, starts: np.ndarray, base: Any, *, bounded: bool = False) -> Any:
        """Inclusive prefix sums of ``d`` restarting at each segment, plus ``base[segment]``.
        ``bounded``: the caller knows no int result leaves int64 (its check is skipped)."""
        raise NotImplementedError

    # -- single values (the per-key reference path) ------------------------------------------
    def py_plus(self, a: Any, b: Any) -> Any:
        """``a + b`` of two Python diff values (``None`` is "no value")."""
        if a is None:
            return b
        if b is None:
            return a
        col = self.from_values([a, b])
        return self.to_values(self.sum_segments(col, np.array([0])))[0]

    def py_is_zero(self, a: Any) -> bool:
        return a is None or bool(self.zero_mask(self.from_values([a]))[0])

    def py_negate(self, a: Any) -> Any:
        return self.to_values(self.negate(self.from_values([a])))[0]

    # -- diffs as data (count's output value) ------------------------------------------------
    def value_layout(self) -> Layout:
        return Leaf()

    def value_columns(self, d: Any) -> tuple[np.ndarray, ...]:
        return (d,)


def _segment_ids(starts: np.ndarray, n: int) -> np.ndarray:
    ids = np.zeros(n, dtype=np.int64)
    if len(starts) > 1:
        ids[starts[1:]] = 1
    return np.cumsum(ids)


@dataclass(frozen=True)
class IntDiff(DiffType):
    """Integer diffs (the default): ``int64`` columns, Python ints in ``object`` columns
    where values leave int64 (see the module docstring); arithmetic is exact."""

    name: str = "int"

    def from_values(self, values: Sequence[Any]) -> np.ndarray:
        for v in values:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise DiffTypeError(f"diff {v!r} is not an int; this collection has int diffs")
        return int_column(values)

    def from_columns(self, cols: Any, n: int) -> np.ndarray:
        arr = np.asarray(cols)
        if arr.dtype.kind not in "iu" or arr.shape != (n,):
            raise DiffTypeError(f"int diffs must be an integer array of {n} rows, got {arr.dtype}")
        return arr.astype(np.int64, copy=False)

    def to_values(self, d: np.ndarray) -> list[Any]:
        return d.tolist()

    def one(self, n: int) -> np.ndarray:
        return np.ones(n, dtype=np.int64)

    def zero_mask(self, d: np.ndarray) -> np.ndarray:
        return d == 0

    def zeros(self, n: int) -> np.ndarray:
        return np.zeros(n, dtype=self.one(0).dtype)

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype.kind == "i" and b.dtype.kind == "i":
            if not len(a) or magnitude(a) + magnitude(b) <= I64_MAX:
                return a + b
            return narrow(_wide(a) + _wide(b))
        if a.dtype == object or b.dtype == object:
            return narrow(a + b)
        return a + b

    def put(self, target: np.ndarray, idx: np.ndarray, values: Any) -> np.ndarray:
        if target.dtype.kind == "i" and isinstance(values, np.ndarray) and values.dtype.kind == "O":
            target = target.astype(object)
        target[idx] = values
        return target

    def previous(self, d: np.ndarray, starts: np.ndarray, first: Any) -> np.ndarray:
        out = np.empty_like(d)
        out[1:] = d[:-1]
        return self.put(out, starts, first)

    def py_plus(self, a: Any, b: Any) -> Any:
        return b if a is None else (a if b is None else a + b)

    def py_is_zero(self, a: Any) -> bool:
        return a is None or a == 0

    def py_negate(self, a: Any) -> Any:
        return -a

    def sum_segments(
        self, d: np.ndarray, starts: np.ndarray, *, bounded: bool = False
    ) -> np.ndarray:
        if len(starts) == len(d) or not len(d):
            return d
        if d.dtype.kind == "i":
            # every partial sum stays within len(d) * the largest magnitude
            if bounded or len(d) * magnitude(d) <= I64_MAX:
                return np.add.reduceat(d, starts)
            return narrow(np.add.reduceat(_wide(d), starts))
        if d.dtype == object:
            return narrow(np.add.reduceat(d, starts))
        return np.add.reduceat(d, starts)

    def sum_groups(self, d: np.ndarray, group: np.ndarray, groups: int) -> np.ndarray | None:
        if d.dtype.kind != "i" or (len(d) and len(d) * magnitude(d) > I64_MAX):
            # float sums would depend on the order, int sums could leave int64: the sorted
            # path (``sum_segments``) makes both exact
            return None
        out = np.zeros(groups, dtype=d.dtype)
        np.add.at(out, group, d)
        return out

    def negate(self, d: np.ndarray) -> np.ndarray:
        if d.dtype.kind == "i" and len(d) and int(d.min()) == I64_MIN:
            return narrow(-_wide(d))  # -(-2**63) is 2**63, beyond int64
        return -d

    def scale(self, d: np.ndarray, k: np.ndarray) -> np.ndarray:
        if d.dtype.kind == "i" and k.dtype.kind == "i":
            if not len(d) or magnitude(d) * magnitude(k) <= I64_MAX:
                return d * k
            return narrow(_wide(d) * _wide(k))
        if d.dtype == object or k.dtype == object:
            return narrow(_wide(d) * _wide(k))
        return d * k

    def running_sums(
        self, d: np.ndarray, starts: np.ndarray, base: np.ndarray, *, bounded: bool = False
    ) -> np.ndarray:
        if len(d) == 0:
            return np.cumsum(d)
        exact = (
            d.dtype.kind == "i"
            and base.dtype.kind == "i"
            and (
                bounded
                or (len(d) * magnitude(d) + (magnitude(base) if len(base) else 0) <= I64_MAX)
            )
        )
        if exact:
            # one cumulative sum over all runs, each run's first diff moved by its base
            # minus the value the run before ends on: exact in int64's wrapping arithmetic,
            # since every value it ends up holding is a running sum of one key, which fits
            d = d.astype(np.int64, copy=False)  # (narrower ints would wrap at their width)
            base = base.astype(np.int64, copy=False)
            if len(starts) == len(d):
                return base + d
            ends = base + np.add.reduceat(d, starts)
            moved = d.copy()
            moved[starts] += base
            moved[starts[1:]] -= ends[:-1]
            return np.cumsum(moved)
        if d.dtype.kind == "i" or d.dtype == object:
            d, base = _wide(d), _wide(base)
        c = np.cumsum(d)
        seg = _segment_ids(starts, len(d))
        before = np.concatenate((np.zeros(1, dtype=c.dtype), c))[starts]
        out = c - before[seg] + base[seg]
        return out if exact else narrow(out)


INT_DIFF = IntDiff()


@dataclass(frozen=True)
class FloatDiff(IntDiff):
    """Float diffs (only as components of tuple diffs, e.g. sums of prices)."""

    name: str = "float"

    def from_values(self, values: Sequence[Any]) -> np.ndarray:
        for v in values:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number)):
                raise DiffTypeError(f"diff component {v!r} is not a number")
        return np.asarray(values, dtype=np.float64).reshape(len(values))

    def from_columns(self, cols: Any, n: int) -> np.ndarray:
        arr = np.asarray(cols, dtype=np.float64)
        if arr.shape != (n,):
            raise DiffTypeError(f"float diffs must be an array of {n} rows")
        return arr

    def one(self, n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float64)

    def scale(self, d: np.ndarray, k: np.ndarray) -> np.ndarray:
        return d * np.asarray(k, dtype=np.float64)

    def running_sums(
        self, d: np.ndarray, starts: np.ndarray, base: np.ndarray, *, bounded: bool = False
    ) -> np.ndarray:
        """Each segment's own prefix sums: a scan that adds ``d[i - k]`` to ``d[i]`` for
        ``k = 1, 2, 4, ...`` while both lie in one segment (one running total over all
        segments, less each segment's start, would let a large value, an infinity or a NaN
        of one segment leak into the others: 1e20 + 5 - 1e20 is 0)."""
        n = len(d)
        out = np.asarray(d, dtype=np.float64)
        if n == 0:
            return out.copy()
        seg = _segment_ids(starts, n)
        longest = int(np.diff(np.append(starts, n)).max())
        k = 1
        while k < longest:
            out = np.concatenate(
                (out[:k], np.where(seg[k:] == seg[:-k], out[k:] + out[:-k], out[k:]))
            )
            k *= 2
        return out + base[seg]


#: tuple diffs of at least this many int parts are made ``Rows`` columns (for fewer, the
#: copy into one matrix costs about what the fused calls save)
ROWS_MIN_PARTS = 3
#: ... and of at most this many rows (on large columns numpy's per-call cost is small
#: beside the work, and the copy into the matrix is not)
ROWS_MAX_N = 8192


class Rows(tuple):
    """A tuple diff column whose parts are the rows of one 2-d ``int64`` array, ``matrix``
    (shape ``(parts, n)``): a ``TupleDiff`` of int parts then works on all parts in one
    numpy call (a take, a product, a grouped sum, a zero test) instead of one call per
    part, which on small batches is most of the cost. Everywhere else it is the plain tuple
    of its parts (the rows), and any operation that does not know it returns a plain tuple.

    Invariant: ``self[i]`` is ``matrix[i]`` (a view), so writing into a part writes into
    the matrix. Pickles as a plain tuple (the matrix would be its parts a second time)."""

    matrix: np.ndarray

    def __new__(cls, matrix: np.ndarray) -> Rows:
        out = super().__new__(cls, tuple(matrix))
        out.matrix = matrix
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (tuple(self),))


def _matrix(d: Any) -> np.ndarray | None:
    """The ``int64`` matrix of a ``Rows`` column (None for any other column)."""
    m = getattr(d, "matrix", None)
    return m if m is not None and m.dtype == np.int64 else None


def _matrix_magnitude(m: np.ndarray) -> int:
    """``magnitude`` of every value of a non-empty int64 matrix."""
    return max(int(m.max()), -int(m.min()))


@dataclass(frozen=True)
class TupleDiff(DiffType):
    """Componentwise diffs: plain tuples, ``DiffPair`` or ``Sum``; zero iff all parts are zero.

    When every part is an ``IntDiff`` (``ints``), columns that are ``Rows`` take fast paths
    that treat all parts as one ``int64`` matrix; the results are the same columns the
    per-part operations give."""

    parts: tuple[DiffType, ...]
    cls: type | None = None  # None: plain tuple; else DiffPair / Sum
    name: str = "tuple"

    @property
    def ints(self) -> bool:
        """Whether every part is an ``IntDiff`` (not a float or nested tuple)."""
        got = self.__dict__.get("_ints")
        if got is None:
            got = all(type(p) is IntDiff for p in self.parts)
            object.__setattr__(self, "_ints", got)
        return bool(got)

    @property
    def abelian(self) -> bool:  # type: ignore[override]
        return all(p.abelian for p in self.parts)

    def _split(self, v: Any) -> tuple[Any, ...]:  # v: Any, its class is checked below
        if self.cls is None:
            if type(v) is not tuple or len(v) != len(self.parts):
                raise DiffTypeError(f"diff {v!r} is not a tuple of {len(self.parts)} numbers")
            return v
        if not isinstance(v, self.cls):
            raise DiffTypeError(f"diff {v!r} is not a {self.cls.__name__}")
        w: Any = v
        if self.cls is Sum:
            return (w.value, w.count)
        return (w.element1, w.element2)

    def _build(self, parts: Sequence[Any]) -> Any:
        if self.cls is None:
            return tuple(parts)
        return self.cls(*parts)

    def from_values(self, values: Sequence[Any]) -> tuple[Any, ...]:
        split = [self._split(v) for v in values]
        cols = list(zip(*split, strict=True)) if split else [()] * len(self.parts)
        return tuple(p.from_values(list(c)) for p, c in zip(self.parts, cols, strict=True))

    def from_columns(self, cols: Any, n: int) -> tuple[Any, ...]:
        if not isinstance(cols, tuple) or len(cols) != len(self.parts):
            raise DiffTypeError(f"expected a tuple of {len(self.parts)} diff columns")
        rows = _rows_of(self, cols, n)
        if rows is not None:
            return rows
        return tuple(p.from_columns(c, n) for p, c in zip(self.parts, cols, strict=True))

    def to_values(self, d: tuple[Any, ...]) -> list[Any]:
        cols = [p.to_values(c) for p, c in zip(self.parts, d, strict=True)]
        return [self._build(parts) for parts in zip(*cols, strict=True)]

    def zeros(self, n: int) -> tuple[Any, ...]:
        return tuple(p.zeros(n) for p in self.parts)

    def add(self, a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(p.add(x, y) for p, x, y in zip(self.parts, a, b, strict=True))

    def put(
        self, target: tuple[Any, ...], idx: np.ndarray, values: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        return tuple(p.put(t, idx, v) for p, t, v in zip(self.parts, target, values, strict=True))

    def length(self, d: tuple[Any, ...]) -> int:
        return self.parts[0].length(d[0])

    def take(self, d: tuple[Any, ...], idx: Any) -> tuple[Any, ...]:
        m = _matrix(d)
        if m is not None and self.ints:
            if isinstance(idx, np.ndarray) and idx.dtype.kind in "iu":
                return Rows(m.take(idx, axis=1))  # (``m[:, idx]`` is ~2.5x slower)
            return Rows(m[:, idx])
        return tuple(p.take(c, idx) for p, c in zip(self.parts, d, strict=True))

    def previous(self, d: tuple[Any, ...], starts: np.ndarray, first: Any) -> tuple[Any, ...]:
        return tuple(p.previous(c, starts, f) for p, c, f in zip(self.parts, d, first, strict=True))

    def concat(self, ds: Sequence[Any]) -> tuple[Any, ...]:
        if self.ints and ds:
            ms = [_matrix(d) for d in ds]
            if all(m is not None for m in ms):
                return Rows(np.concatenate(ms, axis=1))  # type: ignore[arg-type]
        return tuple(p.concat([d[i] for d in ds]) for i, p in enumerate(self.parts))

    def zero_mask(self, d: tuple[Any, ...]) -> np.ndarray:
        m = _matrix(d)
        if m is not None and self.ints:
            return np.logical_not(m.any(axis=0))
        mask = self.parts[0].zero_mask(d[0])
        for p, c in zip(self.parts[1:], d[1:], strict=True):
            mask = mask & p.zero_mask(c)
        return mask

    def sum_segments(
        self, d: tuple[Any, ...], starts: np.ndarray, *, bounded: bool = False
    ) -> tuple[Any, ...]:
        m = _matrix(d)
        if m is not None and self.ints:
            n = m.shape[1]
            if len(starts) == n or not n:
                return d
            if bounded or n * _matrix_magnitude(m) <= I64_MAX:
                return Rows(np.add.reduceat(m, starts, axis=1))
        return tuple(
            p.sum_segments(c, starts, bounded=bounded) for p, c in zip(self.parts, d, strict=True)
        )

    def sum_groups(
        self, d: tuple[Any, ...], group: np.ndarray, groups: int
    ) -> tuple[Any, ...] | None:
        m = _matrix(d)
        if m is not None and self.ints:
            k, n = m.shape
            if n and n * _matrix_magnitude(m) > I64_MAX:
                return None  # (the sorted path's sums are exact beyond int64)
            sums = np.zeros(k * groups, dtype=np.int64)
            if n <= ROWS_MAX_N:
                # all parts in one grouped sum: part i's group g is cell i * groups + g
                cells = (np.arange(0, k * groups, groups)[:, None] + group).ravel()
                np.add.at(sums, cells, m.ravel())
            else:  # (the cell index would cost more than the calls it saves)
                for i in range(k):
                    np.add.at(sums[i * groups : (i + 1) * groups], group, m[i])
            return Rows(sums.reshape(k, groups))
        out = []
        for p, c in zip(self.parts, d, strict=True):
            r = p.sum_groups(c, group, groups)
            if r is None:
                return None
            out.append(r)
        return tuple(out)

    def negate(self, d: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(p.negate(c) for p, c in zip(self.parts, d, strict=True))

    def scale(self, d: tuple[Any, ...], k: np.ndarray) -> tuple[Any, ...]:
        m = _matrix(d)
        if (
            m is not None
            and self.ints
            and k.dtype.kind == "i"
            and (not m.size or _matrix_magnitude(m) * magnitude(k) <= I64_MAX)
        ):
            return Rows(m * k)
        return tuple(p.scale(c, k) for p, c in zip(self.parts, d, strict=True))

    def running_sums(
        self, d: tuple[Any, ...], starts: np.ndarray, base: Any, *, bounded: bool = False
    ) -> tuple[Any, ...]:
        return tuple(
            p.running_sums(c, starts, b, bounded=bounded)
            for p, c, b in zip(self.parts, d, base, strict=True)
        )

    def value_layout(self) -> Layout:
        children = tuple(p.value_layout() for p in self.parts)
        if self.cls is Sum:
            return Struct(Sum, ("value", "count"), children)
        if self.cls is DiffPair:
            return Struct(DiffPair, ("element1", "element2"), children)
        return Tup(children)

    def value_columns(self, d: tuple[Any, ...]) -> tuple[np.ndarray, ...]:
        out: list[np.ndarray] = []
        for p, c in zip(self.parts, d, strict=True):
            out.extend(p.value_columns(c))
        return tuple(out)


@dataclass(frozen=True)
class MinSumDiff(DiffType):
    """``MinSum`` diffs as an int64 column: plus is ``minimum``, zero is the int64 maximum."""

    name: str = "MinSum"
    abelian: bool = False

    def from_values(self, values: Sequence[Any]) -> np.ndarray:
        for v in values:
            if not isinstance(v, MinSum):
                raise DiffTypeError(f"diff {v!r} is not a MinSum; this collection has MinSum diffs")
        return np.fromiter((v.value for v in values), dtype=np.int64, count=len(values))

    def from_columns(self, cols: Any, n: int) -> np.ndarray:
        arr = np.asarray(cols)
        if arr.dtype.kind not in "iu" or arr.shape != (n,):
            raise DiffTypeError("MinSum diffs must be an integer array")
        return arr.astype(np.int64)

    def to_values(self, d: np.ndarray) -> list[Any]:
        return [MinSum(v) for v in d.tolist()]

    def one(self, n: int) -> np.ndarray:
        return np.zeros(n, dtype=np.int64)  # the multiplicative identity of (min, +)

    def zero_mask(self, d: np.ndarray) -> np.ndarray:
        return d >= MINSUM_ZERO

    def zeros(self, n: int) -> np.ndarray:
        return np.full(n, MINSUM_ZERO, dtype=np.int64)

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.minimum(a, b)

    def sum_segments(
        self, d: np.ndarray, starts: np.ndarray, *, bounded: bool = False
    ) -> np.ndarray:
        return np.minimum.reduceat(d, starts) if len(d) else d

    def multiply(self, d: Any, other: DiffType, e: Any) -> tuple[DiffType, Any]:
        if isinstance(other, MinSumDiff):
            total = d + e
            total[(d >= MINSUM_ZERO) | (e >= MINSUM_ZERO)] = MINSUM_ZERO
            return self, total
        if isinstance(other, IntDiff):
            # Repeating a min k > 0 times is the same min; k must be a positive multiplicity.
            if (e <= 0).any():
                raise RetractionError("MinSum collections cannot be retracted (non-positive count)")
            return self, d
        return super().multiply(d, other, e)

    def scale(self, d: np.ndarray, k: np.ndarray) -> np.ndarray:
        if (k <= 0).any():
            raise RetractionError(
                "MinSum is a monoid without subtraction: it cannot take a retraction "
                "(a non-positive multiplicity)"
            )
        return d

    def running_sums(
        self, d: np.ndarray, starts: np.ndarray, base: np.ndarray, *, bounded: bool = False
    ) -> np.ndarray:
        out = np.empty_like(d)
        ends = np.append(starts[1:], len(d))
        for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
            np.minimum.accumulate(d[s:e], out=out[s:e])
            np.minimum(out[s:e], base[i], out=out[s:e])
        return out

    def value_layout(self) -> Layout:
        return Struct(MinSum, ("value",), (Leaf(),))


@dataclass(frozen=True)
class ObjectDiff(DiffType):
    """User semigroup diffs: any class with ``plus(other)`` and ``is_zero()``.

    Optional methods: ``negate()`` (makes it abelian), ``multiply(other)`` or ``__mul__``
    (for ``join``). Values live in an ``object`` column; arithmetic calls Python per element.
    """

    cls: type = object
    name: str = "object"

    @property
    def abelian(self) -> bool:  # type: ignore[override]
        return hasattr(self.cls, "negate")

    def from_values(self, values: Sequence[Any]) -> np.ndarray:
        for v in values:
            if not isinstance(v, self.cls):
                raise DiffTypeError(
                    f"diff {v!r} is not a {self.cls.__name__}; this collection has "
                    f"{self.cls.__name__} diffs"
                )
        arr = np.empty(len(values), dtype=object)
        arr[:] = list(values)
        return arr

    def to_values(self, d: np.ndarray) -> list[Any]:
        return list(d)

    def zero_mask(self, d: np.ndarray) -> np.ndarray:
        """``None`` (no value, from ``zeros``) counts as zero."""
        return np.fromiter((v is None or bool(v.is_zero()) for v in d), dtype=bool, count=len(d))

    def zeros(self, n: int) -> np.ndarray:
        return np.full(n, None, dtype=object)

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = np.empty(len(a), dtype=object)
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out[i] = y if x is None else (x if y is None else x.plus(y))
        return out

    def sum_segments(
        self, d: np.ndarray, starts: np.ndarray, *, bounded: bool = False
    ) -> np.ndarray:
        out = np.empty(len(starts), dtype=object)
        ends = np.append(starts[1:], len(d))
        for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            acc = d[s]
            for j in range(s + 1, e):
                acc = acc.plus(d[j])
            out[i] = acc
        return out

    def negate(self, d: np.ndarray) -> np.ndarray:
        if not self.abelian:
            return super().negate(d)
        return self.from_values([v.negate() for v in d])

    def scale(self, d: np.ndarray, k: np.ndarray) -> np.ndarray:
        out = []
        for v, m in zip(d, k.tolist(), strict=True):
            if m == 0:
                raise DiffTypeError("cannot scale a semigroup diff by 0")
            base = v if m > 0 else self.negate(np.array([v], dtype=object))[0]
            acc = base
            for _ in range(abs(m) - 1):
                acc = acc.plus(base)
            out.append(acc)
        return self.from_values(out)

    def multiply(self, d: Any, other: DiffType, e: Any) -> tuple[DiffType, Any]:
        if isinstance(other, ObjectDiff):
            vals = []
            for a, b in zip(d, e, strict=True):
                if hasattr(a, "multiply"):
                    vals.append(a.multiply(b))
                else:
                    vals.append(a * b)
            arr = np.empty(len(vals), dtype=object)
            arr[:] = vals
            return diff_type_of(vals[0]) if vals else self, arr
        return super().multiply(d, other, e)

    def running_sums(
        self, d: np.ndarray, starts: np.ndarray, base: np.ndarray, *, bounded: bool = False
    ) -> np.ndarray:
        out = np.empty(len(d), dtype=object)
        ends = np.append(starts[1:], len(d))
        for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            acc = base[i]
            for j in range(s, e):
                acc = d[j] if acc is None else acc.plus(d[j])
                out[j] = acc
        return out


def diff_type_of(spec: Any) -> DiffType:
    """The ``DiffType`` for a sample diff value or a diff class.

    ``int`` -> int64; ``Sum``/``MinSum``/``DiffPair`` classes or values; tuples (and
    ``DiffPair`` values) of numbers -> componentwise; any class or value with ``plus`` and
    ``is_zero`` -> user semigroup. Raises ``DiffTypeError`` otherwise.
    """
    if spec is int or spec is None:
        return INT_DIFF
    if spec is float:
        return FloatDiff()
    if spec is Sum:
        return TupleDiff((INT_DIFF, INT_DIFF), Sum, "Sum")
    if spec is MinSum or isinstance(spec, MinSum):
        return MinSumDiff()
    if isinstance(spec, DiffType):
        return spec
    if isinstance(spec, (bool, np.bool_)):
        raise DiffTypeError("a bool is not a diff")
    if isinstance(spec, (int, np.integer)):
        return INT_DIFF
    if isinstance(spec, (float, np.floating)):
        return FloatDiff()
    if isinstance(spec, Sum):
        return TupleDiff((diff_type_of(spec.value), diff_type_of(spec.count)), Sum, "Sum")
    if isinstance(spec, DiffPair):
        return TupleDiff(
            (diff_type_of(spec.element1), diff_type_of(spec.element2)), DiffPair, "DiffPair"
        )
    if type(spec) is tuple and spec:
        return TupleDiff(tuple(diff_type_of(x) for x in spec))
    cls = spec if isinstance(spec, type) else type(spec)
    if hasattr(cls, "plus") and hasattr(cls, "is_zero"):
        return ObjectDiff(cls, cls.__name__)
    raise DiffTypeError(
        f"{spec!r} is not a diff type: use int, a tuple of numbers, DiffPair, Sum, MinSum, "
        "or a class with plus(other) and is_zero()"
    )


def _wide_ints(arr: np.ndarray, n: int) -> np.ndarray | None:
    """An ``object`` column of ``n`` Python ints as an int diff column (``int64`` when every
    value fits); None when it is not such a column."""
    if arr.dtype != object or arr.shape != (n,):
        return None
    vals = arr.tolist()
    if not all(type(v) is int or isinstance(v, np.integer) for v in vals):
        return None
    return int_column(vals)


def _from_output(dt: DiffType, view: Any, n: int) -> Any:
    """``dt.from_columns`` for an operator's output, where int components may also be
    ``object`` columns of Python ints of any size (sums computed exactly beyond int64)."""
    if isinstance(view, np.ndarray):
        if view.dtype == object and isinstance(dt, IntDiff):
            got = _wide_ints(view, n)
            if got is not None:
                return got
    elif isinstance(dt, TupleDiff) and isinstance(view, tuple) and len(view) == len(dt.parts):
        rows = _rows_of(dt, view, n)
        if rows is not None:
            return rows  # (int64 parts: ``from_columns``'s ``Rows``, checked once)
        if not all(isinstance(c, np.ndarray) and c.dtype != object for c in view):
            return tuple(_from_output(p, c, n) for p, c in zip(dt.parts, view, strict=True))
    return dt.from_columns(view, n)


def _rows_of(dt: TupleDiff, cols: tuple[Any, ...], n: int) -> Rows | None:
    """``cols`` as the ``Rows`` column ``dt.from_columns`` makes of int64 parts (enough
    parts, few enough rows); None when that is not the column it makes."""
    if (
        0 < n <= ROWS_MAX_N
        and len(cols) >= ROWS_MIN_PARTS
        and dt.ints
        and all(type(c) is np.ndarray and c.dtype == np.int64 and c.shape == (n,) for c in cols)
    ):
        # one copy of all parts (``np.stack`` costs twice this), then one call per operation
        return Rows(np.concatenate(cols).reshape(len(cols), n))
    return None


def diff_column_from_view(dt: DiffType | None, view: Any, n: int) -> tuple[DiffType, Any]:
    """A diff column from a vectorized function's output: an array or a tuple of arrays.
    Int diffs may be given beyond int64 here, as ``object`` columns of Python ints (an
    input session refuses them: there a diff must fit 64 bits)."""
    if dt is not None:
        return dt, _from_output(dt, view, n)
    if isinstance(view, tuple):
        parts = tuple(diff_column_from_view(None, v, n) for v in view)
        return TupleDiff(tuple(p[0] for p in parts)), tuple(p[1] for p in parts)
    arr = np.asarray(view)
    if arr.shape == () or arr.shape[0] != n:
        arr = np.broadcast_to(arr, (n,)).copy()
    wide = _wide_ints(arr, n)
    if wide is not None:
        return INT_DIFF, wide
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) > I64_MAX:
            return INT_DIFF, int_column(arr.tolist())
        return INT_DIFF, arr.astype(np.int64)
    if arr.dtype.kind == "f":
        return FloatDiff(), arr.astype(np.float64)
    raise DiffTypeError(f"vectorized diffs must be numeric arrays, got dtype {arr.dtype}")
