"""Layouts: how a collection's records map to typed columns, and back.

A record is any Python value. A ``Layout`` is the tree shape of a record: a ``Leaf`` holds one
column; ``Tup`` is a tuple of sub-layouts; ``Struct`` is a frozen class rebuilt from its fields
(``Sum``, ``DiffPair``). The columns of a record are the leaves in depth-first order.

Columns are 1-d numpy arrays: ``int64``, ``float64`` and ``bool`` for numbers, ``object`` for
everything else (strings, None, arbitrary objects, ints beyond int64): correct, just slower.
A column holds every value exactly: ints share a ``float64`` column with floats only while
each of them is a float too (``|x| <= 2**53``), otherwise the column is ``object`` (Python
compares ints and floats exactly). ``make_column`` and ``concat_columns`` keep this, so two
equal-looking ints never merge and output already read never changes.

Vectorized user functions see a *view* in the record's shape: a leaf is an array, a tuple is a
tuple of views, so ``lambda e: e[0]`` means the same per record and per column.

This module also holds the ordering helpers every sorted structure uses: ``lex_order`` (the
permutation sorting rows of several columns lexicographically) and ``run_starts``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ddflow.core.errors import DataError

__all__ = [
    "Layout",
    "Leaf",
    "Struct",
    "Tup",
    "concat_columns",
    "const_view",
    "infer_layout",
    "layout_of_view",
    "int_ranges",
    "lex_order",
    "make_column",
    "run_starts",
    "take_columns",
    "unordered_set_message",
]

Columns = tuple[np.ndarray, ...]


class Layout:
    """The shape of a record; ``width`` columns hold it."""

    width: int

    def to_columns(self, records: Sequence[Any]) -> Columns:
        raise NotImplementedError

    def to_records(self, cols: Columns, n: int | None = None) -> list[Any]:
        """Python records of ``cols`` (``n`` rows; needed only for zero-width layouts)."""
        raise NotImplementedError

    def view(self, cols: Columns) -> Any:
        """The record-shaped view of ``cols`` handed to vectorized user functions."""
        raise NotImplementedError

    def from_view(self, view: Any, n: int) -> Columns:
        """Flatten a record-shaped view (arrays / tuples of arrays) back to columns."""
        raise NotImplementedError


@dataclass(frozen=True)
class Leaf(Layout):
    width: int = 1

    def to_columns(self, records: Sequence[Any]) -> Columns:
        col = make_column(records)
        if col.dtype == object and tuple in set(map(type, col.tolist())):
            bad = next(r for r in records if type(r) is tuple)
            raise DataError(
                f"record field {bad!r} is a tuple where the collection's shape has a single "
                "value; every record of a collection must have the same tuple shape"
            )
        return (col,)

    def to_records(self, cols: Columns, n: int | None = None) -> list[Any]:
        return cols[0].tolist()

    def view(self, cols: Columns) -> Any:
        return cols[0]

    def from_view(self, view: Any, n: int) -> Columns:
        if isinstance(view, tuple):
            raise DataError(f"expected one column, got a tuple of {len(view)}")
        return (_as_column(view, n),)


@dataclass(frozen=True)
class Tup(Layout):
    children: tuple[Layout, ...]

    @cached_property
    def width(self) -> int:  # type: ignore[override]
        # (cached: read on every batch; a frozen value's children never change)
        return sum(c.width for c in self.children)

    def to_columns(self, records: Sequence[Any]) -> Columns:
        k = len(self.children)
        for r in records:
            if not isinstance(r, tuple) or len(r) != k:
                raise DataError(
                    f"record {r!r} does not fit the collection's shape (tuples of {k}); "
                    "every record of a collection must have the same tuple shape"
                )
        if not records:
            return tuple(np.empty(0, dtype=np.int64) for _ in range(self.width))
        parts = list(zip(*records, strict=True))
        out: list[np.ndarray] = []
        for child, part in zip(self.children, parts, strict=True):
            out.extend(child.to_columns(part))
        return tuple(out)

    def to_records(self, cols: Columns, n: int | None = None) -> list[Any]:
        if not self.children:
            return [()] * (n if n is not None else 0)
        if n is None:
            n = next((len(c) for c in cols), None)
        subs = []
        i = 0
        for c in self.children:
            subs.append(c.to_records(cols[i : i + c.width], n))
            i += c.width
        return list(zip(*subs, strict=True))

    @cached_property
    def flat(self) -> bool:
        """Whether every child is a ``Leaf`` (the view is then the columns themselves)."""
        return all(type(c) is Leaf for c in self.children)

    def view(self, cols: Columns) -> Any:
        if self.flat:
            return tuple(cols)
        out = []
        i = 0
        for c in self.children:
            out.append(c.view(cols[i : i + c.width]))
            i += c.width
        return tuple(out)

    def from_view(self, view: Any, n: int) -> Columns:
        if not isinstance(view, tuple) or len(view) != len(self.children):
            raise DataError(f"expected a tuple of {len(self.children)} column groups")
        if self.flat and not any(isinstance(v, tuple) for v in view):
            return tuple([_as_column(v, n) for v in view])  # (a tuple is refused below)
        out: list[np.ndarray] = []
        for c, v in zip(self.children, view, strict=True):
            out.extend(c.from_view(v, n))
        return tuple(out)


@dataclass(frozen=True)
class Struct(Layout):
    """A frozen class whose fields (``names``) are stored as columns, rebuilt by ``cls``."""

    cls: type
    names: tuple[str, ...]
    children: tuple[Layout, ...]

    @cached_property
    def width(self) -> int:  # type: ignore[override]
        # (cached: read on every batch; a frozen value's children never change)
        return sum(c.width for c in self.children)

    def to_columns(self, records: Sequence[Any]) -> Columns:
        for r in records:
            if not isinstance(r, self.cls):
                raise DataError(f"record {r!r} is not a {self.cls.__name__}")
        out: list[np.ndarray] = []
        for name, c in zip(self.names, self.children, strict=True):
            out.extend(c.to_columns([getattr(r, name) for r in records]))
        return tuple(out)

    def to_records(self, cols: Columns, n: int | None = None) -> list[Any]:
        subs = []
        i = 0
        for c in self.children:
            subs.append(c.to_records(cols[i : i + c.width], n))
            i += c.width
        return [self.cls(*fields) for fields in zip(*subs, strict=True)]

    def view(self, cols: Columns) -> Any:
        return Tup(self.children).view(cols)

    def from_view(self, view: Any, n: int) -> Columns:
        return Tup(self.children).from_view(view, n)


def infer_layout(record: Any) -> Layout:
    """The layout of a sample record: tuples split into columns, anything else is a leaf."""
    if isinstance(record, tuple) and type(record) is tuple:
        return Tup(tuple(infer_layout(x) for x in record))
    return Leaf()


def layout_of_view(view: Any) -> Layout:
    """The layout of a record-shaped view returned by a vectorized user function."""
    if isinstance(view, tuple):
        return Tup(tuple(layout_of_view(v) for v in view))
    return Leaf()


def _obj(values: Sequence[Any]) -> np.ndarray:
    return np.fromiter(values, dtype=object, count=len(values))


def _normalize(arr: np.ndarray, values: Sequence[Any] | None) -> np.ndarray:
    kind = arr.dtype.kind
    if arr.ndim != 1:
        if values is None:
            raise DataError(f"expected a 1-d column, got shape {arr.shape}")
        return _obj(values)
    if kind == "i":
        return arr.astype(np.int64, copy=False)
    if kind == "u":
        if arr.size and arr.max() > np.iinfo(np.int64).max:
            return arr.astype(object)
        return arr.astype(np.int64)
    if kind == "f":
        return arr.astype(np.float64, copy=False)
    if kind == "b":
        return arr
    if kind == "O":
        return arr
    # strings, bytes, datetimes: keep the Python objects
    return _obj(values if values is not None else arr.tolist())


#: every int of at most this magnitude is exactly a float64 value (and 2**53 + 1 is not)
FLOAT_EXACT = 2**53


def make_column(values: Sequence[Any]) -> np.ndarray:
    """A typed column from Python values (numbers typed, everything else ``object``).

    Every value is kept exactly: numbers that numpy would only approximate in one typed
    column (an int above 2**53 beside a float, an int beyond int64) make an ``object``
    column."""
    if isinstance(values, np.ndarray):
        return _normalize(values, None)
    if not values:
        return np.empty(0, dtype=np.int64)
    first = values[0]
    if not isinstance(first, (int, float, bool, np.number, np.bool_)):
        return _obj(values)
    try:
        arr = np.array(values)
    except (ValueError, OverflowError, TypeError):
        return _obj(values)
    if arr.dtype.kind == "f" and not _floats_exact(values):
        return _obj(values)
    return _normalize(arr, values)


def _floats_exact(values: Sequence[Any]) -> bool:
    """Whether a float column keeps ``values`` (numbers of which numpy made one): they hold
    a float, and every int among them has ``|x| <= 2**53`` (``concat_columns``' rule)."""
    types = set(map(type, values))
    if all(issubclass(t, (float, np.floating)) for t in types):
        return True
    if not any(issubclass(t, (float, np.floating)) for t in types):
        return False  # ints only, some beyond int64: Python ints, not floats
    return all(
        isinstance(v, (float, np.floating)) or -FLOAT_EXACT <= v <= FLOAT_EXACT for v in values
    )


def concat_columns(parts: Sequence[np.ndarray]) -> np.ndarray:
    """The values of the columns ``parts``, one after another, in one column, each exactly.

    Parts of one dtype are concatenated as they are (the common case: no extra work). numpy
    would put ``int64`` beside ``float64`` into ``float64``, rounding ints above 2**53 onto
    their neighbours; here such a mix is ``float64`` only when every int is exactly a float,
    otherwise ``object``. Empty parts do not take part in choosing the dtype.
    """
    if len(parts) == 1:
        return parts[0]
    dtype = parts[0].dtype
    for p in parts:
        if p.dtype != dtype:
            break
    else:
        return np.concatenate(parts)
    parts = [p for p in parts if len(p)] or list(parts[:1])
    kinds = {p.dtype.kind for p in parts}
    if "f" in kinds and kinds & {"i", "u"}:
        ints = [p for p in parts if p.dtype.kind in "iu"]
        if not all(
            p.dtype.kind == "i" and int(p.min()) >= -FLOAT_EXACT and int(p.max()) <= FLOAT_EXACT
            for p in ints
        ):
            return np.concatenate([p.astype(object) for p in parts])
    return np.concatenate(parts)


def _as_column(v: Any, n: int) -> np.ndarray:
    if isinstance(v, np.ndarray):
        arr = _normalize(v, None)
    elif np.isscalar(v):
        arr = make_column([v]).repeat(n)
    else:
        arr = make_column(list(v))
    if arr.shape[0] != n:
        raise DataError(f"a vectorized function returned a column of {arr.shape[0]} rows, not {n}")
    return arr


def take_columns(cols: Columns, idx: np.ndarray | slice) -> Columns:
    return tuple(c[idx] for c in cols)


def _check_orderable(c: np.ndarray) -> None:
    if c.dtype.kind == "f" and np.isnan(c).any():
        raise DataError("NaN cannot be ordered; arranged data (keys and values) must not hold NaN")
    if c.dtype.kind == "O" and len(c) and isinstance(c[0], (set, frozenset)):
        # a column mixing sets with anything else fails to sort (TypeError) below
        raise DataError(unordered_set_message(c[0]))


def unordered_set_message(x: Any) -> str:
    """Why a set value cannot be data, and what to use instead."""
    return (
        f"{type(x).__name__} {x!r:.60} cannot be ordered: < on sets is the subset order, "
        "not a total order, so arranged data cannot hold frozensets; use a sorted tuple "
        "of the elements instead"
    )


Ranges = list[tuple[int, int]]


def int_ranges(cols: Sequence[np.ndarray]) -> Ranges | None:
    """``(min, max)`` of each column when every column is integral (or bool) and non-empty;
    None otherwise. Computed once and handed to the packing helpers, which all need it."""
    out = []
    for c in cols:
        if c.dtype.kind not in "ib" or not len(c):
            return None
        out.append((int(c.min()), int(c.max())))
    return out


def _pack(cols: list[np.ndarray], ranges: Ranges) -> np.ndarray | None:
    """One int64 column ordering like ``cols`` (integral, with their ``ranges``)
    lexicographically, if their ranges fit 62 bits."""
    span = 1
    packed = None
    for c, (lo, hi) in zip(reversed(cols), reversed(ranges), strict=True):
        width = hi - lo + 1
        if span * width >= (1 << 62):
            return None
        ci = c.astype(np.int64, copy=False)
        term = ci - lo if lo != 0 else ci
        if packed is not None:
            term = packed + term * span
        elif term is ci:
            term = ci.copy()
        packed = term
        span *= width
    return packed


def pack_small(
    cols: Sequence[np.ndarray], limit: int, ranges: Ranges | None = None
) -> tuple[np.ndarray, int] | None:
    """``(codes, span)``: one int64 code per row in ``[0, span)`` that orders like ``cols``
    lexicographically, when every column is integral and ``span <= limit``; else None.
    ``ranges``: the columns' ``int_ranges`` if known. Used to group rows with many
    duplicates by counting instead of sorting."""
    if ranges is None:
        ranges = int_ranges(cols)
    if ranges is None or not ranges:
        return None
    span = 1
    for lo, hi in ranges:
        span *= hi - lo + 1
        if span > limit:
            return None
    packed = None
    span = 1
    for c, (lo, hi) in zip(reversed(cols), reversed(ranges), strict=True):
        ci = c.astype(np.int64, copy=False)
        term = ci - lo if lo != 0 else ci
        packed = term if packed is None else packed + term * span
        span *= hi - lo + 1
    assert packed is not None
    return packed, span


def _offsets(cols: list[np.ndarray], ranges: Ranges) -> list[tuple[np.ndarray, int]]:
    """Each integer column as ``(offset, bits)``: its values minus its minimum, as uint64
    (exact over int64's whole range), and how many bits they need."""
    out = []
    for c, (lo, hi) in zip(cols, ranges, strict=True):
        ci = c.astype(np.int64, copy=False)
        off = ci.view(np.uint64) - np.uint64(lo & 0xFFFF_FFFF_FFFF_FFFF)
        out.append((off, (hi - lo).bit_length()))
    return out


def _bit_words(cols: list[np.ndarray], ranges: Ranges, word_bits: int) -> list[np.ndarray]:
    """int64 words of at most ``word_bits`` bits each, most significant first, whose
    lexicographic order is that of the rows of ``cols`` (integral, with their ``ranges``):
    each row's column offsets written one after another (first column highest) into one
    bit string, cut into words. A column may straddle two words."""
    offs = _offsets(cols, ranges)
    total = sum(b for _, b in offs)
    k = max(1, -(-total // word_bits))
    n = len(cols[0])
    words = [np.zeros(n, dtype=np.uint64) for _ in range(k)]
    pos = total  # bit position (from the least significant end) just above the column
    for off, bits in offs:
        lo_bit = pos - bits
        pos = lo_bit
        while bits > 0:
            w = lo_bit // word_bits  # the word holding the column's lowest remaining bit
            at = lo_bit - w * word_bits
            take = min(bits, word_bits - at)
            part = off & np.uint64((1 << take) - 1) if take < bits else off
            words[k - 1 - w] |= part << np.uint64(at) if at else part
            if take < bits:
                off = off >> np.uint64(take)
            bits -= take
            lo_bit += take
    return [w.view(np.int64) for w in words]


def _sort_words(words: list[np.ndarray], n: int, row_bits: int) -> np.ndarray:
    """The stable order of rows by ``words`` (each below ``2**(62 - row_bits)``): least
    significant word first, each pass a plain sort of the word with the row's current
    position in its low bits (much faster than a stable argsort)."""
    mask = (1 << row_bits) - 1
    rows = np.arange(n, dtype=np.int64)
    order: np.ndarray | None = None
    for w in reversed(words):
        key = w if order is None else w[order]
        step = np.sort((key << row_bits) | rows) & mask
        order = step if order is None else order[step]
    assert order is not None
    return order


def _runs_by_words(words: list[np.ndarray], n: int) -> np.ndarray:
    """The stable order of rows by ``words``, fast when they are a few concatenated sorted
    runs: the leading word is replaced by its dense rank (below ``n``) and the next word
    appended to it, until one word is left. Each step is a stable argsort, a merge sort
    that finds the runs already in order and merges them in about linear time."""
    key = words[0]
    word_bits = 62 - int(n - 1).bit_length()
    for nxt in words[1:]:
        order = key.argsort(kind="stable")
        s = key[order]
        dense = np.empty(n, dtype=np.int64)
        dense[0] = 0
        (s[1:] != s[:-1]).cumsum(out=dense[1:])
        rank = np.empty(n, dtype=np.int64)
        rank[order] = dense
        key = (rank << word_bits) | nxt
    return key.argsort(kind="stable")


#: at most this many integer rows are sorted by ``np.lexsort`` directly in ``lex_order``
_SMALL_SORT = 256


def lex_order(
    cols: Sequence[np.ndarray], *, runs: bool = False, ranges: Ranges | None = None
) -> np.ndarray:
    """The permutation that sorts rows of ``cols`` lexicographically (first column first).

    Integer columns whose ranges fit are packed into one int64 key; when the row number
    fits beside it, the packed keys are sorted by value (much faster than ``argsort``) and
    the permutation read from the low bits. Wider integer rows are cut into several words
    of that size (a column may straddle two), sorted word by word. ``runs=True`` says the
    rows are a few concatenated sorted runs (a merge): stable sorts then find the runs and
    merge them in about linear time. ``ranges``: the columns' ``int_ranges`` if known.

    Raises ``DataError`` when values cannot be ordered (NaN, mixed unorderable objects).
    """
    n = cols[0].shape[0] if cols else 0
    if n <= 1:
        for c in cols:
            _check_orderable(c)  # (the rows may meet others later, in a merge)
        return np.arange(n)
    if n <= _SMALL_SORT and all(c.dtype.kind in "biu" for c in cols):
        # a few integer rows: one stable lexsort (packing first costs a dozen numpy calls)
        return (
            np.lexsort(tuple(reversed(cols))) if len(cols) > 1 else cols[0].argsort(kind="stable")
        )
    if ranges is None:
        ranges = int_ranges(cols)
    if ranges is not None:
        return _int_order(
            [c for c, r in zip(cols, ranges, strict=True) if r[0] != r[1]],
            [r for r in ranges if r[0] != r[1]],
            n,
            runs,
        )
    live = []
    for c in cols:
        _check_orderable(c)
        if c.dtype.kind in "biuf" and c[0] == c[-1] and (c == c[0]).all():
            continue
        live.append(c)
    try:
        if not live:
            return np.arange(n)
        if len(live) == 1:
            return live[0].argsort(kind="stable" if runs else None)
        live_ranges = int_ranges(live)
        if live_ranges is not None:
            return _int_order(live, live_ranges, n, runs)
        return np.lexsort(tuple(reversed(live)))
    except TypeError as e:
        raise DataError(
            f"data cannot be ordered ({e}); arranged keys and values must be mutually "
            "comparable (no None mixed with numbers, no mixed types)"
        ) from e


#: from this many rows on, ``lex_order`` checks whether the rows come in order of their
#: first column already (a batch of line items by order key): a merging sort then finds
#: the order in about linear time
_PRESORTED_MIN = 512


def _presorted(first: np.ndarray, n: int, packed: bool) -> bool:
    """Whether rows whose first column is ``first`` are all but sorted already, so that a
    sort finding runs (``runs=True``) beats sorting afresh: the first column descends at
    most once per 256 rows, and (when the rows are packed into one word, whose plain sort
    is fast) its equal values come in groups of at most 64 rows on average (a stable sort
    of long groups in disorder is slower than the plain one)."""
    a, b = first[1:], first[:-1]
    if np.count_nonzero(a < b) * 256 >= n:
        return False
    return not packed or bool(np.count_nonzero(a != b) * 64 >= n)


def _int_order(cols: list[np.ndarray], ranges: Ranges, n: int, runs: bool) -> np.ndarray:
    """``lex_order`` of ``n > 1`` rows of non-constant integer columns with their ranges."""
    if not cols:
        return np.arange(n)
    row_bits = int(n - 1).bit_length()
    packed = _pack(cols, ranges)
    check = not runs and n >= _PRESORTED_MIN
    if packed is None:
        if len(cols) == 1 or row_bits > 54:
            return np.lexsort(tuple(reversed(cols)))
        words = _bit_words(cols, ranges, 62 - row_bits)
        if runs or (check and _presorted(cols[0], n, False)):
            return _runs_by_words(words, n)
        return _sort_words(words, n, row_bits)
    if runs or (check and _presorted(cols[0], n, True)):
        return packed.argsort(kind="stable")
    word_bits = 62 - row_bits
    if int(packed.max()) >= (1 << word_bits):
        # no room for the row number: two words, each sorted with it (an argsort of the
        # one word is several times slower than both sorts)
        low = packed & ((1 << word_bits) - 1)
        return _sort_words([packed >> word_bits, low], n, row_bits)
    keyed = np.sort((packed << row_bits) | np.arange(n, dtype=np.int64))
    return keyed & ((1 << row_bits) - 1)


def const_view(row: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A read-only, zero-stride view of shape ``shape`` repeating ``row`` (a C-contiguous
    array of one row: shape ``(1,)`` or ``(1, d)``): what ``np.broadcast_to(row, shape)``
    gives, at half its cost."""
    out = np.ndarray(shape, dtype=row.dtype, buffer=row, strides=(0, *row.strides[1:]))
    out.flags.writeable = False
    return out


def run_starts(cols: Sequence[np.ndarray], n: int) -> np.ndarray:
    """Indices where a run of equal rows starts, for rows already sorted by ``cols``."""
    if n == 0:
        return np.empty(0, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for c in cols:
        change[1:] |= np.asarray(c[1:] != c[:-1], dtype=bool)
    return change.nonzero()[0]
