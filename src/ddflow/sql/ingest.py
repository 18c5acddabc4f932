"""Rows into physical columns: Python tuples, Arrow tables and pandas DataFrames.

Arrow input is converted column by column without Python loops over rows (decimals read
straight from their 128-bit buffers, strings dictionary-encoded per distinct value);
Python tuples go value by value with a type check per value. Either way a value that does
not fit its column raises ``DataError`` naming the column, before anything changes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ddflow.core.errors import DataError
from ddflow.sql.batch import ArrowCol, LazyStrings, Phys, RowBatch, low_words_fit, plain_arrow
from ddflow.sql.expr import narrow, rescale
from ddflow.sql.rows import Field
from ddflow.sql.strings import StringDict
from ddflow.sql.types import (
    EXACT,
    SqlType,
    decimal_unscaled,
    encode_values,
    float_keys,
    int_column,
)

__all__ = ["to_batch"]


def to_batch(rows: Any, fields: tuple[Field, ...], strings: StringDict, table: str) -> RowBatch:
    """``rows`` (tuples, an Arrow Table/RecordBatch or a pandas DataFrame) as a
    ``RowBatch`` of a table with ``fields``; ``DataError`` names a value that does not fit."""
    if _is_arrow(rows):
        return _from_arrow(rows, fields, strings, table)
    if _is_pandas(rows):
        import pyarrow as pa

        return _from_arrow(pa.Table.from_pandas(rows, preserve_index=False), fields, strings, table)
    if isinstance(rows, tuple) and rows and not isinstance(rows[0], (tuple, list)):
        raise DataError(f"give a list of rows (tuples) for table '{table}', not one tuple")
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise DataError(f"cannot read rows for table '{table}' from {type(rows).__name__}")
    rows = list(rows)
    width = len(fields)
    for r in rows:
        if not isinstance(r, (tuple, list)):
            raise DataError(f"row {r!r} for table '{table}' is not a tuple of {width} values")
        if len(r) != width:
            raise DataError(
                f"row {tuple(r)!r} has {len(r)} values; table '{table}' has "
                f"{width} columns ({', '.join(f.name for f in fields)})"
            )
    cols: list[Any] = []
    for i, f in enumerate(fields):
        vals = [r[i] for r in rows]
        col: Any
        if f.type.kind == "string":
            for v in vals:
                if v is not None and not isinstance(v, str):
                    raise DataError(
                        f"value {v!r} ({type(v).__name__}) does not fit column "
                        f"'{f.name}' of type {f.type}"
                    )
            col = LazyStrings(vals)
        else:
            v, nl = encode_values(vals, f.type, f.name, strings)
            col = Phys(v, nl)
        if col.nulls() is not None and not f.nullable:
            raise DataError(f"column '{f.name}' of table '{table}' is NOT NULL; got a NULL")
        cols.append(col)
    return RowBatch(cols, len(rows))


def _is_arrow(x: Any) -> bool:
    mod = type(x).__module__
    return mod.startswith("pyarrow") and type(x).__name__ in ("Table", "RecordBatch")


def _is_pandas(x: Any) -> bool:
    return type(x).__module__.startswith("pandas") and type(x).__name__ == "DataFrame"


#: per table (its ``fields``, by identity): the Arrow schema last seen and how to read each
#: column of a batch of it (see ``_arrow_plan``)
_PLANS: dict[int, tuple[tuple[Field, ...], StringDict, Any, list[Any] | None]] = {}


def _arrow_plan(schema: Any, fields: tuple[Field, ...], strings: StringDict) -> list[Any] | None:
    """How to read a batch of ``schema`` into a table of ``fields`` without looking at types
    again: per field ``(column, field, converter)``, the converter None for a string column
    held as given, False for one converted at once, else ``(convert, plain)`` for an
    ``ArrowCol``. None when a column needs more (a
    dictionary, a string view, a NULL type, a type that does not fit: ``_from_arrow``'s
    general path, which also words the errors)."""
    import pyarrow as pa

    names = [n.lower() for n in schema.names]
    want = [f.name.lower() for f in fields]
    if all(w in names for w in want):
        idx = [names.index(w) for w in want]
    elif len(names) == len(want):
        idx = list(range(len(want)))
    else:
        return None
    plan: list[Any] = []
    for f, i in zip(fields, idx, strict=True):
        at = schema.types[i]
        if (
            pa.types.is_dictionary(at)
            or pa.types.is_null(at)
            or getattr(pa.types, "is_string_view", lambda _: False)(at)
            or pa.types.is_large_string(at)
        ):
            return None
        if f.type.kind == "string":
            if not pa.types.is_string(at):
                return None
            plan.append((i, f, None))
        elif _safe(at, f.type):
            plan.append((i, f, (_converter(f, strings), plain_arrow(at, f.type))))
        else:
            plan.append((i, f, False))
    return plan


def _from_arrow(t: Any, fields: tuple[Field, ...], strings: StringDict, table: str) -> RowBatch:
    import pyarrow as pa

    schema = t.schema
    got = _PLANS.get(id(fields))
    if got is None or got[0] is not fields or got[1] is not strings or not got[2].equals(schema):
        if len(_PLANS) > 256:
            _PLANS.clear()
        got = _PLANS[id(fields)] = (fields, strings, schema, _arrow_plan(schema, fields, strings))
    plan = got[3]
    if plan is not None:
        # the usual case: a batch of a schema seen before, read column by column
        n = t.num_rows
        out: list[Any] = []
        whole = isinstance(t, pa.Table) and t.num_columns == len(plan)
        for i, f, conv in plan:
            c = t.column(i)
            if isinstance(c, pa.ChunkedArray):
                if c.num_chunks == 1:
                    c = c.chunk(0)
                else:
                    c = c.combine_chunks()
                    whole = False
            if c.null_count and not f.nullable:
                raise DataError(f"column '{f.name}' of table '{table}' is NOT NULL; got a NULL")
            if conv is None:
                out.append(LazyStrings(c))
            elif conv is False:
                v, nl = arrow_column(c, f.type, f.name, strings)
                out.append(Phys(v, nl))
            else:
                out.append(ArrowCol(c, conv[0], conv[1]))
        # (each column the one chunk of the table's: a store can keep the table itself)
        return RowBatch(out, n, (t, tuple(i for i, _, _ in plan)) if whole else None)
    return _from_arrow_general(t, fields, strings, table)


def _from_arrow_general(
    t: Any, fields: tuple[Field, ...], strings: StringDict, table: str
) -> RowBatch:
    import pyarrow as pa

    names = [n.lower() for n in t.schema.names]
    want = [f.name.lower() for f in fields]
    if all(w in names for w in want):
        cols = [t.column(names.index(w)) for w in want]
    elif len(names) == len(want):
        cols = [t.column(i) for i in range(len(want))]
    else:
        raise DataError(
            f"Arrow data with columns {t.schema.names} does not match table "
            f"'{table}' ({', '.join(f.name for f in fields)})"
        )
    n = t.num_rows
    out: list[Any] = []
    for f, c in zip(fields, cols, strict=True):
        if isinstance(c, pa.ChunkedArray):
            c = c.combine_chunks() if c.num_chunks != 1 else c.chunk(0)
        if pa.types.is_dictionary(c.type):
            c = c.dictionary_decode()
        if c.null_count and not f.nullable:
            raise DataError(f"column '{f.name}' of table '{table}' is NOT NULL; got a NULL")
        col: Any
        if f.type.kind == "string":
            if getattr(pa.types, "is_string_view", lambda _: False)(
                c.type
            ) or pa.types.is_large_string(c.type):
                c = c.cast(pa.string())
            if pa.types.is_null(c.type):
                c = pa.nulls(len(c), pa.string())
            if not pa.types.is_string(c.type):
                raise DataError(
                    f"column '{f.name}' of type {f.type} cannot take Arrow values of type {c.type}"
                )
            col = LazyStrings(c)
        elif _safe(c.type, f.type):
            # converting cannot fail: leave it for when something reads the column
            col = ArrowCol(c, _converter(f, strings), plain_arrow(c.type, f.type))
        else:
            v, nl = arrow_column(c, f.type, f.name, strings)
            col = Phys(v, nl)
        out.append(col)
    return RowBatch(out, n)


def _filled(arr: Any, value: Any) -> Any:
    """``arr`` with NULLs replaced by ``value`` (the array itself when it has none)."""
    return arr.fill_null(value) if arr.null_count else arr


def _converter(f: Field, strings: StringDict) -> Any:
    def convert(arr: Any) -> tuple[np.ndarray, np.ndarray | None]:
        return arrow_column(arr, f.type, f.name, strings)

    return convert


def _safe(at: Any, t: SqlType) -> bool:
    """Whether every value of Arrow type ``at`` converts to SQL type ``t`` (no range or
    parse check needed)."""
    import pyarrow as pa

    k = t.kind
    if pa.types.is_null(at):
        return True
    if k == "int":
        if pa.types.is_signed_integer(at):
            return bool(at.bit_width <= t.bits)
        if pa.types.is_unsigned_integer(at):
            return bool(at.bit_width < t.bits)
        return False
    if k == "decimal":
        return bool(
            pa.types.is_decimal128(at) and at.scale == t.scale and at.precision <= t.precision
        )
    if k == "double":
        return bool(pa.types.is_floating(at) or pa.types.is_integer(at))  # (rounded if FLOAT)
    if k == "boolean":
        return bool(pa.types.is_boolean(at))
    if k == "date":
        return bool(pa.types.is_date(at) or pa.types.is_timestamp(at))
    if k == "timestamp":
        return bool(pa.types.is_timestamp(at) or pa.types.is_date32(at))
    return False


def arrow_column(
    c: Any, t: SqlType, name: str, strings: StringDict
) -> tuple[np.ndarray, np.ndarray | None]:
    """One Arrow column (Array or ChunkedArray) as ``(physical, nulls)`` of type ``t``."""
    import pyarrow as pa

    if isinstance(c, pa.ChunkedArray):
        c = c.combine_chunks() if c.num_chunks != 1 else c.chunk(0)
    if pa.types.is_dictionary(c.type):
        if t.kind == "string" and (
            pa.types.is_string(c.type.value_type) or pa.types.is_large_string(c.type.value_type)
        ):
            nulls = None
            if c.null_count:
                nulls = np.asarray(c.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            codes = strings.encode_arrow(c)
            if nulls is not None:
                codes[nulls] = 0
            return codes, nulls
        c = c.dictionary_decode()
    if getattr(pa.types, "is_string_view", lambda _: False)(c.type):
        c = c.cast(pa.string())
    n = len(c)
    nulls = None
    if c.null_count:
        nulls = np.asarray(c.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    at = c.type
    k = t.kind

    def bad() -> DataError:
        return DataError(f"column '{name}' of type {t} cannot take Arrow values of type {at}")

    if pa.types.is_null(at):
        return np.zeros(n, np.int64), np.ones(n, bool)
    if k == "string":
        if not (pa.types.is_string(at) or pa.types.is_large_string(at)):
            raise bad()
        if n == 0:
            return np.zeros(0, np.int64), None
        codes = strings.encode_arrow(c)
        if nulls is not None:
            codes[nulls] = 0
        return codes, nulls
    if k == "boolean":
        if not pa.types.is_boolean(at):
            raise bad()
        v = np.asarray(_filled(c, False).to_numpy(zero_copy_only=False), dtype=np.int64)
        return v, nulls
    if k == "int":
        if pa.types.is_integer(at):
            v = np.asarray(_filled(c, 0).to_numpy(zero_copy_only=False))
            if v.dtype == np.uint64 and len(v) and v.max() > np.iinfo(np.int64).max:
                raise DataError(f"a value of column '{name}' is out of range for {t}")
            if _safe(at, t):  # every value of the Arrow type fits: no range check
                return v.astype(np.int64), nulls
            v = v.astype(np.int64)
            lo, hi = t.int_range()
            if len(v) and (v.min() < lo or v.max() > hi):
                raise DataError(f"a value of column '{name}' is out of range for {t}")
            return v, nulls
        raise bad()
    if k == "double":
        if pa.types.is_floating(at) or pa.types.is_integer(at):
            v = np.asarray(
                _filled(c.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False), dtype=np.float64
            )
            if t.bits == 32:
                v = v.astype(np.float32).astype(np.float64)
            return float_keys(v), nulls
        if pa.types.is_decimal(at):
            v = np.asarray(_filled(c.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False))
            return float_keys(v), nulls
        raise bad()
    if (
        k == "decimal"
        and pa.types.is_decimal128(at)
        and at.scale == t.scale
        and at.precision <= min(t.precision, 18)
        and n
    ):
        # the usual case, read from the buffer: a DECIMAL(p <= 18) value's 128-bit integer
        # is its low word (checked: the high word is the sign)
        words = np.frombuffer(c.buffers()[1], dtype=np.int64, count=2 * (c.offset + n))[
            2 * c.offset :
        ]
        out = words[0::2].copy()
        if nulls is not None:
            out[nulls] = 0
            high = words[1::2]
            if not (high[~nulls] == (out[~nulls] >> 63)).all():
                raise DataError(f"a value of column '{name}' does not fit {t}")
        elif not low_words_fit(words, out):
            raise DataError(f"a value of column '{name}' does not fit {t}")
        return out, nulls
    if k == "date" and pa.types.is_date32(at) and n:
        days = np.frombuffer(c.buffers()[1], dtype=np.int32, count=c.offset + n)[c.offset :]
        out = days.astype(np.int64)
        if nulls is not None:
            out[nulls] = 0
        return out, nulls
    if k == "decimal":
        if pa.types.is_integer(at):
            v = np.asarray(_filled(c, 0).to_numpy(zero_copy_only=False)).astype(np.int64)
            out = rescale(v, 0, t.scale)
        elif pa.types.is_decimal(at):
            out = rescale(_decimal_unscaled(c), at.scale, t.scale)
        elif pa.types.is_floating(at):
            vals = c.to_pylist()
            out = int_column(
                [0 if x is None else decimal_unscaled(x, t.scale, t, name) for x in vals]
            )
        else:
            raise bad()
        if t.precision > 18:
            obj = np.empty(len(out), dtype=object)
            obj[:] = out.tolist()
            out = obj
        else:
            out = narrow(out)
            if out.dtype == object:
                raise DataError(f"a value of column '{name}' does not fit {t}")
        limit = 10**t.precision
        if t.precision <= 18:
            big = bool(len(out)) and bool((np.abs(out) >= limit).any())
        else:
            big = any(abs(x) >= limit for x in out.tolist())
        if big:
            raise DataError(f"a value of column '{name}' does not fit {t}")
        if nulls is not None:
            out = out.copy()
            out[nulls] = 0
        return out, nulls
    if k == "date":
        if pa.types.is_date32(at):
            return np.asarray(
                _filled(c.cast(pa.int32()), 0).to_numpy(zero_copy_only=False), dtype=np.int64
            ), nulls
        if pa.types.is_date64(at):
            ms = np.asarray(_filled(c.cast(pa.int64()), 0).to_numpy(zero_copy_only=False))
            return np.floor_divide(ms, 86_400_000).astype(np.int64), nulls
        if pa.types.is_timestamp(at):
            us = _timestamp_micros(c)
            return np.floor_divide(us, 86_400_000_000), nulls
        if pa.types.is_string(at) or pa.types.is_large_string(at):
            v, _ = (
                encode_values([x for x in c.to_pylist()], t, name, strings)
                if nulls is None
                else encode_values(c.to_pylist(), t, name, strings)
            )
            return v, nulls
        raise bad()
    if k == "timestamp":
        if pa.types.is_timestamp(at):
            return _timestamp_micros(c), nulls
        if pa.types.is_date32(at):
            d = np.asarray(
                _filled(c.cast(pa.int32()), 0).to_numpy(zero_copy_only=False), dtype=np.int64
            )
            return d * 86_400_000_000, nulls
        if pa.types.is_string(at) or pa.types.is_large_string(at):
            v, _ = encode_values(c.to_pylist(), t, name, strings)
            return v, nulls
        raise bad()
    raise bad()


def _timestamp_micros(c: Any) -> np.ndarray:
    import pyarrow as pa

    unit = c.type.unit
    v = np.asarray(_filled(c.cast(pa.int64()), 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    if unit == "s":
        return v * 1_000_000
    if unit == "ms":
        return v * 1_000
    if unit == "ns":
        return np.floor_divide(v, 1_000)
    return v


def _decimal_unscaled(c: Any) -> np.ndarray:
    """The unscaled integers of a decimal128 array, read from its buffer (int64 where they
    fit, else Python ints)."""
    import pyarrow as pa

    if not pa.types.is_decimal128(c.type):
        vals = c.to_pylist()
        s = c.type.scale
        return int_column([0 if x is None else int(x.scaleb(s, EXACT)) for x in vals])
    n = len(c)
    if n == 0:
        return np.zeros(0, np.int64)
    buf = c.buffers()[1]
    raw = np.frombuffer(buf, dtype=np.int64, count=2 * (c.offset + n))[2 * c.offset :]
    lo, hi = raw[0::2], raw[1::2]
    valid = (
        np.ones(n, bool)
        if not c.null_count
        else ~np.asarray(c.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    )
    fits = (hi == (lo >> 63)) | ~valid
    if fits.all():
        out = lo.copy()
        out[~valid] = 0
        return out
    vals = [0 if x is None else int(x.scaleb(c.type.scale, EXACT)) for x in c.to_pylist()]
    return int_column(vals)


#: Room for every digit of a decimal128 (the default context rounds to 28 digits).
