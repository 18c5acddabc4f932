"""Table rows as given, converted to physical columns only when something reads them.

``RowBatch`` is how a table holds rows outside the dataflow (pending changes and the
table's current rows). Its columns are of three kinds:

- ``Phys``: physical values (``ddflow.sql.types``) and NULL flags, converted at once (rows
  given as Python tuples, or computed by DML);
- ``ArrowCol``: a number / date / boolean column as it came in an Arrow batch, converted on
  first read (the type was checked when the batch came in);
- ``LazyStrings``: a string column as it came (an Arrow array or a list), given dictionary
  codes on first read.

So a column no view reads (a comment, a tax rate) is never converted, and a string column
no view reads never adds entries to the string dictionary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ddflow.sql.rows import Field, mask_words, pack
from ddflow.sql.strings import StringDict, single_bytes

__all__ = [
    "ArrowCol",
    "LazyStrings",
    "Phys",
    "RowBatch",
    "arrow_bits",
    "arrow_true",
    "is_ones",
    "low_words_fit",
    "ones",
    "plain_arrow",
]


#: the counts of inserted rows: slices of one read-only array of ones (``ones``), so an
#: insert makes no array and its readers know, by ``is_ones``, that every count is 1
_ONES = np.ones(1 << 17, np.int64)
_ONES.flags.writeable = False


#: every array ``ones`` has handed out views of (it grows by doubling: a few)
_ONES_MADE = [_ONES]


def ones(n: int) -> np.ndarray:
    """``n`` ones (``int64``), read-only: a view of a shared array (``is_ones``)."""
    global _ONES
    if n > len(_ONES):
        grown = np.ones(max(n, 2 * len(_ONES)), np.int64)
        grown.flags.writeable = False
        _ONES = grown
        _ONES_MADE.append(grown)
    return _ONES[:n]


def is_ones(d: Any) -> bool:
    """Whether ``d`` is a view ``ones`` made (so every value is 1; False for other arrays
    of ones)."""
    if not isinstance(d, np.ndarray) or d.base is None:
        return False
    return d.base is _ONES or any(d.base is a for a in _ONES_MADE)


def _arrow_take(arr: Any, idx: np.ndarray) -> Any:
    import pyarrow as pa

    return arr.take(pa.array(idx, type=pa.int64()))


def arrow_bits(buf: Any, offset: int, n: int) -> np.ndarray:
    """Bits ``offset .. offset + n`` of an Arrow bitmap (validity or boolean values) as a
    numpy ``bool`` array (one unpacking pass; ``to_numpy`` of a boolean array costs
    several times more)."""
    raw = np.frombuffer(buf, dtype=np.uint8, count=(offset + n + 7) // 8)
    return np.unpackbits(raw, count=offset + n, bitorder="little")[offset:].view(bool)


def arrow_true(arr: Any) -> np.ndarray:
    """Where an Arrow boolean array (one chunk) is TRUE (NULL is not)."""
    bufs = arr.buffers()
    n, off = len(arr), arr.offset
    if bufs[1] is None:  # (all NULL, no values)
        return np.zeros(n, dtype=bool)
    out = arrow_bits(bufs[1], off, n)
    if arr.null_count and bufs[0] is not None:
        out = out & arrow_bits(bufs[0], off, n)
    return out


def arrow_nulls(arr: Any) -> np.ndarray | None:
    """Where an Arrow array is NULL (``None`` when nowhere), from its validity bitmap."""
    if not arr.null_count:
        return None
    bufs = arr.buffers() if hasattr(arr, "buffers") else None
    if bufs and bufs[0] is not None and arr.type.num_fields == 0:
        return ~arrow_bits(bufs[0], arr.offset, len(arr))
    return np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)


class Phys:
    """Physical values with NULL flags (``None``: no NULL)."""

    __slots__ = ("nl", "v")

    def __init__(self, v: np.ndarray, nl: np.ndarray | None) -> None:
        self.v = v
        self.nl = nl if nl is not None and nl.any() else None

    def __len__(self) -> int:
        return len(self.v)

    def values(self, strings: StringDict) -> np.ndarray:
        return self.v

    def nulls(self) -> np.ndarray | None:
        return self.nl

    def take(self, idx: np.ndarray) -> Phys:
        return Phys(self.v[idx], None if self.nl is None else self.nl[idx])


def plain_arrow(at: Any, t: Any) -> bool:
    """Whether Arrow type ``at``'s physical values are the SQL type ``t``'s (so a column of
    it can be read in place, ``ArrowCol.in_place``): a signed integer for an integer, a
    ``date32`` for a date, a ``decimal128`` of at most 18 digits and ``t``'s scale for a
    decimal."""
    import pyarrow as pa

    k = t.kind
    if k == "int":
        return bool(pa.types.is_signed_integer(at))
    if k == "date":
        return bool(pa.types.is_date32(at))
    if k == "decimal":
        return bool(pa.types.is_decimal128(at) and at.precision <= 18 and at.scale == t.scale)
    return False


def low_words_fit(words: np.ndarray, low: np.ndarray) -> bool:
    """Whether each 128-bit integer of ``words`` (low word, high word, ...) is its low word
    (``low``, the low words): every high word is 0 and every low word non-negative (the
    usual case, checked first: no word has its sign bit set, one pass over all of them,
    and the greatest high word is 0), or every high word is its low word's sign."""
    high = words[1::2]
    if not len(high):
        return True
    if np.bitwise_or.reduce(words) >= 0:  # (cheaper than high.any() and low.min())
        return bool(high.max() == 0)
    return bool(np.array_equal(high, low >> 63))


def _in_place(arr: Any) -> np.ndarray | None:
    """An Arrow column's values read from its data buffer without a copy: a signed
    integer's or a ``date32``'s, a ``decimal128``'s low words when every value's 128-bit
    integer is its low word (the high word is the low word's sign; the undefined slots of
    NULLs too, else None). None when the buffer cannot be read so."""
    import pyarrow as pa

    t = arr.type
    n, off = len(arr), arr.offset
    buf = arr.buffers()[1]
    if buf is None:
        return None
    if pa.types.is_decimal128(t):
        words = np.frombuffer(buf, dtype=np.int64, count=2 * (off + n))[2 * off :]
        low = words[0::2]
        if n and not low_words_fit(words, low):
            return None
        return low
    if pa.types.is_date32(t):
        return np.frombuffer(buf, dtype=np.int32, count=off + n)[off:]
    if pa.types.is_signed_integer(t):
        return np.frombuffer(buf, dtype=np.dtype(f"int{t.bit_width}"), count=off + n)[off:]
    return None


def _decimal_rows(arr: Any, idx: np.ndarray, nulls: np.ndarray | None) -> np.ndarray | None:
    """The values of rows ``idx`` of a ``decimal128`` column read from its words (a new
    int64 array) when each of those rows' 128-bit integers is its low word (the rows
    ``nulls`` marks, whose slots hold anything, aside), else None (None too for other
    types)."""
    import pyarrow as pa

    if not pa.types.is_decimal128(arr.type):
        return None
    buf = arr.buffers()[1]
    if buf is None:
        return None
    off, n = arr.offset, len(arr)
    words = np.frombuffer(buf, dtype=np.int64, count=2 * (off + n))[2 * off :]
    at = 2 * np.asarray(idx, dtype=np.intp)
    low = words[at]
    fits = words[at + 1] == (low >> 63)
    if nulls is not None:
        fits |= nulls
    if len(low) and not fits.all():
        return None
    return low


class ArrowCol:
    """A non-string Arrow column and how to convert it (``convert(arr) -> (values,
    nulls)``), converted once on first read. ``plain`` (``plain_arrow``): its physical
    values are the Arrow values themselves, so they can be read in place."""

    __slots__ = ("_nl", "_raw", "_v", "arr", "convert", "plain")

    def __init__(
        self, arr: Any, convert: Callable[[Any], tuple[np.ndarray, Any]], plain: bool = False
    ) -> None:
        self.arr = arr
        self.convert = convert
        self.plain = plain
        self._v: np.ndarray | None = None
        self._nl: Any = False
        self._raw: Any = False

    def __len__(self) -> int:
        return len(self.arr)

    def values(self, strings: StringDict) -> np.ndarray:
        if self._v is None:
            raw = self._raw
            if raw is not False and raw is not None:  # read in place already: no checks
                v = raw.astype(np.int64)
                nl = self.nulls()
                if nl is not None:
                    v[nl] = 0
                self._v = v
            else:
                self._v, nl = self.convert(self.arr)
                self._nl = nl if nl is not None and nl.any() else None
        return self._v

    def nulls(self) -> np.ndarray | None:
        if self._nl is False:
            self._nl = arrow_nulls(self.arr)
        return self._nl

    def in_place(self) -> np.ndarray | None:
        """A ``plain`` column's physical values read from the Arrow buffer without a copy
        (any integer width; the slots of NULLs hold anything), or None when that is not
        possible (not ``plain``, or a decimal word that does not fit 64 bits)."""
        if self._raw is False:
            self._raw = _in_place(self.arr) if self.plain else None
        return self._raw

    def take(self, idx: np.ndarray) -> Any:
        if self._v is None and self._raw is False and self.plain and 4 * len(idx) < len(self.arr):
            # a few rows of a column not read yet: only their words are read and checked
            # (a row left out is not looked at, as when the whole column does not fit)
            nl = self.nulls()
            sub = None if nl is None else nl[idx]
            v = _decimal_rows(self.arr, idx, sub)
            if v is not None:
                if sub is None:
                    return Phys(v, None)
                v[sub] = 0  # (a NULL's physical value is 0)
                return Phys(v, sub)
        if self._v is None:
            raw = self.in_place()
            if raw is None:
                return ArrowCol(_arrow_take(self.arr, idx), self.convert, self.plain)
            v = raw[idx].astype(np.int64)
        else:
            v = self._v[idx]
        nl = self.nulls()
        if nl is None:
            return Phys(v, None)
        nl = nl[idx]
        if self._v is None:
            v[nl] = 0  # (a NULL's physical value is 0)
        return Phys(v, nl)


def _kept_byte_codes(c: LazyStrings, at: np.ndarray, strings: StringDict) -> np.ndarray | None:
    """The codes of the rows ``at`` (positions or a boolean mask) of a string column of
    one-byte strings held as Arrow, when each of those bytes has a small code already;
    else None."""
    if isinstance(c.raw, list):
        return None
    one = single_bytes(c.raw)
    if one is None:
        return None
    return strings.byte_codes(one[at])


class LazyStrings:
    """A string column as given (Arrow array or list of ``str``/``None``)."""

    __slots__ = ("_nl", "codes", "raw")

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.codes: np.ndarray | None = None
        self._nl: Any = False

    def __len__(self) -> int:
        return len(self.raw)

    def values(self, strings: StringDict) -> np.ndarray:
        """The column's dictionary codes (NULL entries are 0), computed once."""
        if self.codes is None:
            raw = self.raw
            if isinstance(raw, list):
                self.codes = strings.encode_list(["" if v is None else v for v in raw])
            elif len(raw) == 0:
                self.codes = np.zeros(0, np.int64)
            else:
                out = strings.encode_arrow(raw)
                nl = self.nulls()
                if nl is not None:
                    out[nl] = 0
                self.codes = out
        return self.codes

    def kept_codes(self, at: np.ndarray, strings: StringDict) -> np.ndarray:
        """The codes of the rows ``at`` (ascending positions, or a boolean mask; NULL
        entries 0). When the column's codes are not known yet and positions leave out a
        quarter of the rows or more, only those rows are encoded (a column of distinct
        texts, such as phone numbers, costs a dictionary lookup and often a new entry per
        row encoded)."""
        raw = self.raw
        if (
            self.codes is not None
            or isinstance(raw, list)
            or at.dtype == bool
            or 4 * len(at) > 3 * len(raw)
        ):
            return self.values(strings)[at]
        if not len(at):
            return np.zeros(0, np.int64)
        out = strings.encode_arrow(_arrow_take(raw, at))
        nl = self.nulls()
        if nl is not None:
            out[nl[at]] = 0
        return out

    def nulls(self) -> np.ndarray | None:
        if self._nl is False:
            raw = self.raw
            if isinstance(raw, list):
                nl = np.fromiter((v is None for v in raw), dtype=bool, count=len(raw))
                self._nl = nl if nl.any() else None
            else:
                self._nl = arrow_nulls(raw)
        return self._nl

    def strings(self, idx: np.ndarray | None = None) -> list[Any]:
        """Python strings (``None`` for NULL) of rows ``idx`` (all rows if None)."""
        raw = self.raw
        if isinstance(raw, list):
            return raw if idx is None else [raw[i] for i in idx.tolist()]
        part = raw if idx is None else _arrow_take(raw, idx)
        return part.to_pylist()

    def arrow(self, idx: np.ndarray) -> Any:
        """Rows ``idx`` as an Arrow string array (the column must be held as Arrow)."""
        return _arrow_take(self.raw, idx)

    def take(self, idx: np.ndarray) -> LazyStrings:
        raw = self.raw
        out = LazyStrings(
            [raw[i] for i in idx.tolist()] if isinstance(raw, list) else _arrow_take(raw, idx)
        )
        if self.codes is not None:
            out.codes = self.codes[idx]
        return out


Column = Phys | ArrowCol | LazyStrings


class RowBatch:
    """``n`` rows of a table, one ``Column`` per SQL column. ``source``: the Arrow table the
    rows came in as, when column ``i``'s Arrow array (an ``ArrowCol``'s or a
    ``LazyStrings``') is the one chunk of its column ``source[1][i]`` (a table's store
    then keeps that table instead of building one)."""

    __slots__ = ("cols", "n", "source")

    def __init__(self, cols: list[Any], n: int, source: Any = None) -> None:
        self.cols = cols
        self.n = n
        self.source = source

    def take(self, idx: np.ndarray, only: Sequence[int] | None = None) -> RowBatch:
        """Rows ``idx``; with ``only``, of those columns alone (the others are None)."""
        if only is None:
            return RowBatch([c.take(idx) for c in self.cols], len(idx))
        keep = set(only)
        return RowBatch(
            [c.take(idx) if i in keep else None for i, c in enumerate(self.cols)], len(idx)
        )

    def column(self, i: int, strings: StringDict) -> np.ndarray:
        """Column ``i``'s physical values (converted now if needed)."""
        return self.cols[i].values(strings)

    def null(self, i: int) -> np.ndarray | None:
        return self.cols[i].nulls()

    def record(
        self,
        fields: Sequence[Field],
        idxs: Sequence[int | tuple[int, tuple[str, ...]]],
        strings: StringDict,
        rows: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        """Dataflow records of the columns ``idxs`` (values, then null masks); with
        ``rows`` (a boolean mask), of the rows it marks only (``pack`` zeroes the slots of
        NULLs, which hold anything in an Arrow buffer). An entry ``(i, literals)`` of
        ``idxs`` is string column ``i``'s class among ``literals`` (``Scan.classes``)."""
        sub = [fields[i if isinstance(i, int) else i[0]] for i in idxs]
        plain = [i for i in idxs if isinstance(i, int)]
        if rows is None and len(plain) == len(idxs):
            vals = [self.column(i, strings) for i in plain]
            nulls = [self.null(i) for i in plain]
            return pack(vals, nulls, mask_words(sub), self.n)
        vals, nulls = [], []
        # the kept rows, as positions found once when the mask leaves out a tenth of the
        # rows or more (gathering by positions then costs a third to a half of gathering
        # by the mask, column after column), else the mask itself (a dense mask is gathered
        # by as fast as positions are)
        n = self.n
        at = None
        if rows is not None:
            n = int(np.count_nonzero(rows))
            at = rows if 10 * n >= 9 * self.n else np.flatnonzero(rows)
        for i in idxs:
            if not isinstance(i, int):
                from ddflow.sql.rawfilter import string_classes

                cv, cn = string_classes(self.cols[i[0]], i[1], strings, rows)
                vals.append(cv)
                nulls.append(cn)
                continue
            c = self.cols[i]
            if rows is None:
                vals.append(self.column(i, strings))
                nulls.append(self.null(i))
                continue
            assert at is not None
            nl = c.nulls()
            if nl is not None:
                nl = nl[at]
            raw = c.in_place() if isinstance(c, ArrowCol) and c._v is None else None
            if raw is None and isinstance(c, LazyStrings) and c.codes is None and nl is None:
                # one-byte strings (flags): the kept rows' bytes made codes, when all are
                # known (``StringDict.byte_codes``), without codes for every row first
                v = _kept_byte_codes(c, at, strings)
                if v is not None:
                    vals.append(v)
                    nulls.append(None)
                    continue
            if raw is not None:
                # read in place and taken in one pass (no converted copy of every row)
                v = raw[at]
                if v.dtype != np.int64:
                    v = v.astype(np.int64)
            elif isinstance(c, LazyStrings):
                v = c.kept_codes(at, strings)
            else:
                v = c.values(strings)[at]
            vals.append(v)
            nulls.append(nl if nl is not None and nl.any() else None)
        return pack(vals, nulls, mask_words(sub), n)
