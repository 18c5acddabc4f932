"""SQL types and their physical columns: every SQL value is stored in one ``int64`` column.

Why one integer column per SQL column: the engine sorts, packs, hashes and joins ``int64``
columns fastest, and exact integers keep every comparison and sum exact. So:

=============  ==================================================================
SQL type       physical value
=============  ==================================================================
BOOLEAN        0 / 1
TINYINT..BIGINT the integer
DECIMAL(p, s)  the unscaled integer ``value * 10**s`` (a Python int in an ``object``
               column where it does not fit 64 bits)
FLOAT, DOUBLE  the IEEE bits mapped so that integer order is float order
               (``-0.0`` is ``0.0``, every NaN is one NaN, greater than +inf)
STRING         a code in the database's string dictionary (equality only; order
               and functions go through the strings themselves)
DATE           days since 1970-01-01
TIMESTAMP      microseconds since 1970-01-01 00:00:00 (no time zone)
=============  ==================================================================

NULL is not a value: a relation's records carry null masks beside the values (see
``ddflow.sql.rows``), and a NULL's physical value is always 0, so equal rows are equal
records.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ddflow.core.errors import DataError

__all__ = [
    "BIGINT",
    "BOOLEAN",
    "DATE",
    "DOUBLE",
    "FLOAT",
    "INT",
    "NULLTYPE",
    "SMALLINT",
    "STRING",
    "TIMESTAMP",
    "TINYINT",
    "SqlType",
    "decimal_type",
    "float_from_keys",
    "float_keys",
]

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1
EPOCH = _dt.date(1970, 1, 1)
EPOCH_DT = _dt.datetime(1970, 1, 1)
_MAXMAG = np.int64(0x7FFF_FFFF_FFFF_FFFF)


@dataclass(frozen=True)
class SqlType:
    """A SQL type: ``kind`` is one of boolean, int, decimal, double, string, date,
    timestamp, null; ``bits`` is an integer's or float's width; decimals have
    ``precision`` and ``scale``."""

    kind: str
    bits: int = 64
    precision: int = 0
    scale: int = 0

    def __str__(self) -> str:
        if self.kind == "int":
            return {8: "TINYINT", 16: "SMALLINT", 32: "INT", 64: "BIGINT"}[self.bits]
        if self.kind == "decimal":
            return f"DECIMAL({self.precision},{self.scale})"
        if self.kind == "double":
            return "FLOAT" if self.bits == 32 else "DOUBLE"
        if self.kind == "null":
            return "VOID"
        return self.kind.upper()

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "decimal", "double")

    @property
    def orderable_as_int(self) -> bool:
        """Whether the physical integers order like the values (all but strings)."""
        return self.kind != "string"

    def int_range(self) -> tuple[int, int]:
        """The values an integer type holds."""
        half = 1 << (self.bits - 1)
        return -half, half - 1


BOOLEAN = SqlType("boolean")
TINYINT = SqlType("int", 8)
SMALLINT = SqlType("int", 16)
INT = SqlType("int", 32)
BIGINT = SqlType("int", 64)
FLOAT = SqlType("double", 32)
DOUBLE = SqlType("double", 64)
STRING = SqlType("string")
DATE = SqlType("date")
TIMESTAMP = SqlType("timestamp")
NULLTYPE = SqlType("null")


def decimal_type(precision: int, scale: int) -> SqlType:
    """DECIMAL(precision, scale); raises ``DataError`` outside 1 <= precision <= 38,
    0 <= scale <= precision."""
    if not 1 <= precision <= 38 or not 0 <= scale <= precision:
        raise DataError(
            f"DECIMAL({precision},{scale}) is not a valid decimal type "
            "(1 <= precision <= 38, 0 <= scale <= precision)"
        )
    return SqlType("decimal", 128, precision, scale)


# -- floats as ordered integers ------------------------------------------------------------


def float_keys(x: np.ndarray) -> np.ndarray:
    """``int64`` keys ordering like the floats ``x`` (``-0.0`` as ``0.0``, one NaN, last)."""
    x = np.asarray(x, dtype=np.float64) + 0.0  # -0.0 + 0.0 is +0.0
    nan = np.isnan(x)
    if nan.any():
        x = np.where(nan, np.nan, x)
    b = x.view(np.int64)
    return b ^ ((b >> 63) & _MAXMAG)


def float_from_keys(k: np.ndarray) -> np.ndarray:
    """The floats of ``float_keys`` (the map is its own inverse on the bits)."""
    k = np.asarray(k)
    if k.dtype != np.int64:
        k = k.astype(np.int64)
    b = k ^ ((k >> 63) & _MAXMAG)
    return b.view(np.float64)


# -- Python values -> physical -------------------------------------------------------------


def _bad(value: Any, t: SqlType, column: str) -> DataError:
    return DataError(
        f"value {value!r} ({type(value).__name__}) does not fit column '{column}' of type {t}"
    )


#: decimal arithmetic on values of up to 38 digits and beyond, without the default
#: context's rounding to 28 significant digits
EXACT = decimal.Context(prec=100, rounding=decimal.ROUND_HALF_UP, Emax=10**6, Emin=-(10**6))


def decimal_unscaled(value: Any, scale: int, t: SqlType | None = None, column: str = "?") -> int:
    """``value * 10**scale`` as an exact int, rounding half away from zero (as SQL casts do).
    Accepts int, Decimal, float (its shortest repr) and numeric strings."""
    if isinstance(value, bool):
        raise _bad(value, t or decimal_type(38, scale), column)
    if isinstance(value, (int, np.integer)):
        return int(value) * 10**scale
    if isinstance(value, float | np.floating):
        if not np.isfinite(value):
            raise _bad(value, t or decimal_type(38, scale), column)
        value = decimal.Decimal(repr(float(value)))
    if isinstance(value, str):
        try:
            value = decimal.Decimal(value.strip())
        except decimal.InvalidOperation as e:
            raise _bad(value, t or decimal_type(38, scale), column) from e
    if not isinstance(value, decimal.Decimal) or not value.is_finite():
        raise _bad(value, t or decimal_type(38, scale), column)
    q = value.scaleb(scale, EXACT).to_integral_value(decimal.ROUND_HALF_UP, EXACT)
    return int(q)


def encode_values(
    values: list[Any], t: SqlType, column: str, strings: Any
) -> tuple[np.ndarray, np.ndarray | None]:
    """Python values (``None`` = NULL) of column ``column`` as ``(physical, nulls)``.

    Raises ``DataError`` naming the column for a value of the wrong type or out of range.
    """
    n = len(values)
    nulls = np.fromiter((v is None for v in values), dtype=bool, count=n)
    any_null = bool(nulls.any())
    vals = [v for v in values if v is not None] if any_null else values
    phys = _encode_nonnull(vals, t, column, strings)
    if not any_null:
        return phys, None
    out = np.zeros(n, dtype=phys.dtype)
    out[~nulls] = phys
    return out, nulls


def _encode_nonnull(vals: list[Any], t: SqlType, column: str, strings: Any) -> np.ndarray:
    k = t.kind
    if k == "boolean":
        for v in vals:
            if not isinstance(v, (bool, np.bool_)):
                raise _bad(v, t, column)
        return np.fromiter((bool(v) for v in vals), dtype=np.int64, count=len(vals))
    if k == "int":
        lo, hi = t.int_range()
        out = []
        for v in vals:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                if isinstance(v, float | np.floating | decimal.Decimal) and float(v).is_integer():
                    v = int(v)
                else:
                    raise _bad(v, t, column)
            iv = int(v)
            if not lo <= iv <= hi:
                raise DataError(
                    f"value {iv} is out of range for column '{column}' of type {t} ([{lo}, {hi}])"
                )
            out.append(iv)
        return np.array(out, dtype=np.int64).reshape(len(out))
    if k == "decimal":
        limit = 10**t.precision
        out = []
        for v in vals:
            u = decimal_unscaled(v, t.scale, t, column)
            if not -limit < u < limit:
                raise DataError(f"value {v!r} does not fit column '{column}' of type {t}")
            out.append(u)
        return int_column(out)
    if k == "double":
        fl = []
        for v in vals:
            if isinstance(v, (bool, np.bool_)) or not isinstance(
                v, (int, float, np.integer, np.floating, decimal.Decimal)
            ):
                raise _bad(v, t, column)
            fl.append(float(v))
        arr = np.array(fl, dtype=np.float64).reshape(len(fl))
        if t.bits == 32:
            arr = arr.astype(np.float32).astype(np.float64)  # FLOAT holds 32-bit floats
        return float_keys(arr)
    if k == "string":
        for v in vals:
            if not isinstance(v, str):
                raise _bad(v, t, column)
        return strings.encode_list(vals)
    if k == "date":
        out = []
        for v in vals:
            if isinstance(v, _dt.datetime):
                raise _bad(v, t, column)
            if isinstance(v, str):
                try:
                    v = _dt.date.fromisoformat(v.strip())
                except ValueError as e:
                    raise _bad(v, t, column) from e
            if not isinstance(v, _dt.date):
                raise _bad(v, t, column)
            out.append((v - EPOCH).days)
        return np.array(out, dtype=np.int64).reshape(len(out))
    if k == "timestamp":
        out = []
        for v in vals:
            if isinstance(v, str):
                try:
                    v = _dt.datetime.fromisoformat(v.strip())
                except ValueError as e:
                    raise _bad(v, t, column) from e
            if isinstance(v, _dt.date) and not isinstance(v, _dt.datetime):
                v = _dt.datetime(v.year, v.month, v.day)
            if not isinstance(v, _dt.datetime):
                raise _bad(v, t, column)
            out.append(timestamp_micros(v))
        return np.array(out, dtype=np.int64).reshape(len(out))
    if k == "null":
        if vals:
            raise _bad(vals[0], t, column)
        return np.zeros(0, dtype=np.int64)
    raise DataError(f"column '{column}' has type {t}, which cannot hold values")


_DATE_TEXT = re.compile(r"([+-]?[0-9]{4,})(?:-([0-9]{1,2})(?:-([0-9]{1,2})(?:[ T](.*))?)?)?", re.S)
_TIME_TEXT = re.compile(
    r"([0-9]{1,2}):([0-9]{1,2})(?::([0-9]{1,2})(?:\.([0-9]{0,9}))?)?\s*(Z|[+-][0-9]{1,2}(?::?[0-9]{2})?)?",
    re.I,
)


def _date_parts(text: str) -> tuple[_dt.date, str | None] | None:
    m = _DATE_TEXT.fullmatch(text.strip())
    if m is None:
        return None
    try:
        day = _dt.date(int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1))
    except ValueError:
        return None
    return day, m.group(4)


def parse_date_text(text: str) -> _dt.date | None:
    """A date written as Spark reads one: ``yyyy``, ``yyyy-[m]m``, ``yyyy-[m]m-[d]d``,
    the last followed by anything after a space or a ``T``; None for anything else
    (``20200101``, ``2020-01-01x``) or a day that does not exist."""
    got = _date_parts(text)
    return None if got is None else got[0]


def parse_timestamp_text(text: str) -> _dt.datetime | None:
    """A timestamp written as Spark reads one: a date as ``parse_date_text`` reads it,
    then after a space or a ``T`` ``[h]h:[m]m[:[s]s[.fraction]]`` and a zone offset
    (``Z``, ``+hh``, ``+hh:mm``; the result in UTC); None for anything else."""
    got = _date_parts(text)
    if got is None:
        return None
    day, rest = got
    if rest is None or not rest.strip():
        return _dt.datetime(day.year, day.month, day.day)
    m = _TIME_TEXT.fullmatch(rest.strip())
    if m is None:
        return None
    h, mi, sec, frac, zone = m.groups()
    try:
        out = _dt.datetime(
            day.year,
            day.month,
            day.day,
            int(h),
            int(mi),
            int(sec or 0),
            int(((frac or "") + "000000")[:6]),
        )
    except ValueError:
        return None
    if zone and zone.upper() != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        hours, minutes = (digits[:-2], digits[-2:]) if len(digits) > 2 else (digits, "0")
        out -= sign * _dt.timedelta(hours=int(hours), minutes=int(minutes))
    return out


def parse_clock_text(text: str) -> _dt.datetime | None:
    """A timestamp as ``parse_timestamp_text`` reads one, or a time of day alone
    (``[h]h:[m]m[:[s]s[.fraction]]``, which Spark reads as that time today) on 1970-01-01:
    what ``hour``, ``minute`` and ``second`` read from text; None for anything else."""
    got = parse_timestamp_text(text)
    if got is not None:
        return got
    m = _TIME_TEXT.fullmatch(text.strip())
    if m is None or m.group(5):
        return None
    h, mi, sec, frac, _ = m.groups()
    try:
        return _dt.datetime(
            1970, 1, 1, int(h), int(mi), int(sec or 0), int(((frac or "") + "000000")[:6])
        )
    except ValueError:
        return None


def timestamp_micros(v: _dt.datetime) -> int:
    """Microseconds since the epoch of a naive (or aware, taken as UTC) datetime."""
    if v.tzinfo is not None:
        v = v.astimezone(_dt.UTC).replace(tzinfo=None)
    d = v - EPOCH_DT
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def int_column(values: list[int]) -> np.ndarray:
    """An int64 column, or an ``object`` column of Python ints when a value needs more bits."""
    try:
        return np.array(values, dtype=np.int64).reshape(len(values))
    except OverflowError:
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
        return arr


# -- physical -> Python values -------------------------------------------------------------


def decode_values(
    phys: np.ndarray, nulls: np.ndarray | None, t: SqlType, strings: Any
) -> list[Any]:
    """The Python values of a physical column (``None`` for NULL)."""
    if nulls is not None and nulls.any():
        if t.kind in ("string", "decimal", "date", "timestamp"):
            phys = np.where(nulls, 0, phys) if phys.dtype != object else phys
        vals = decode_nonnull(phys, t, strings)
        for i in np.flatnonzero(nulls).tolist():
            vals[i] = None
        return vals
    return decode_nonnull(phys, t, strings)


def decode_nonnull(phys: np.ndarray, t: SqlType, strings: Any) -> list[Any]:
    k = t.kind
    if k == "boolean":
        return [bool(v) for v in phys.tolist()]
    if k == "int":
        return [int(v) for v in phys.tolist()]
    if k == "decimal":
        s = t.scale
        return [decimal.Decimal(int(v)).scaleb(-s, EXACT) for v in phys.tolist()]
    if k == "double":
        return float_from_keys(phys).tolist()
    if k == "string":
        return strings.decode_list(phys)
    if k == "date":
        return [EPOCH + _dt.timedelta(days=int(v)) for v in phys.tolist()]
    if k == "timestamp":
        return [EPOCH_DT + _dt.timedelta(microseconds=int(v)) for v in phys.tolist()]
    if k == "null":
        return [None] * len(phys)
    raise DataError(f"cannot decode values of type {t}")
