"""Scalar expressions: a small typed tree, evaluated over whole columns with numpy.

Why its own tree: sqlglot's is a syntax tree; ours is what runs. Every node is a frozen
dataclass that knows its SQL type and whether it can be NULL, and refers to input fields
by position. ``evaluate`` returns ``(values, nulls)``: physical values (``bool`` arrays for
predicates) and NULL flags (``None`` when no row is NULL), with SQL's three-valued logic:
``AND``/``OR``/``NOT`` follow Kleene's tables, comparisons with NULL are NULL, and a
``WHERE`` keeps rows whose predicate is TRUE.

Work per batch is a few numpy calls per node; string functions run once per distinct code
(and, with a literal pattern, once per code ever: ``Ctx.memo``). Integer arithmetic is
checked: an int64 overflow of a BIGINT raises ``DataError`` (as SQL engines do), a decimal
result that needs more than 64 bits moves to an ``object`` column of exact Python ints.
Division by zero is NULL.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import decimal as _decimal
import functools
import hashlib
import math
import re
import unicodedata
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ddflow.core.errors import DataError
from ddflow.sql.errors import SQLError, UnsupportedSQL
from ddflow.sql.rows import Field, Frame, mask_words, pack
from ddflow.sql.strings import StringDict
from ddflow.sql.types import (
    BIGINT,
    BOOLEAN,
    DOUBLE,
    EXACT,
    I64_MAX,
    I64_MIN,
    STRING,
    SqlType,
    decimal_unscaled,
    decode_nonnull,
    encode_values,
    float_from_keys,
    float_keys,
    int_column,
    parse_clock_text,
    parse_date_text,
    parse_timestamp_text,
    timestamp_micros,
)

__all__ = ["Call", "Col", "Ctx", "Expr", "Lit", "conjuncts", "evaluate", "show"]


class Expr:
    """A typed scalar expression over the fields of one input relation."""

    type: SqlType
    nullable: bool

    def children(self) -> tuple[Expr, ...]:
        return ()


@dataclass(frozen=True)
class Col(Expr):
    """Field ``index`` of the input."""

    index: int
    type: SqlType
    nullable: bool = True
    name: str = field(default="", compare=False)


@dataclass(frozen=True)
class Lit(Expr):
    """A constant: a Python value (``None`` is NULL) of ``type``."""

    value: Any
    type: SqlType

    @property
    def nullable(self) -> bool:  # type: ignore[override]
        return self.value is None


@dataclass(frozen=True)
class Call(Expr):
    """Operator or function ``op`` over ``args``; ``extra`` holds constant parameters."""

    op: str
    args: tuple[Expr, ...]
    type: SqlType
    nullable: bool = True
    extra: Any = None

    def children(self) -> tuple[Expr, ...]:
        return self.args


def _hash_kept(cls: type) -> None:
    """Gives a frozen expression class a hash computed once per node: the generated one
    walks the whole tree, and memo tables keyed by expressions look nodes up on every
    batch. The kept value is left out of a pickle (string hashes differ between
    processes, so a plan sent to another process computes its own)."""
    made: Any = cls.__hash__

    def __hash__(self: Any) -> int:
        d = self.__dict__
        h = d.get("_hash")
        if h is None:
            h = d["_hash"] = made(self)
        return int(h)

    def __getstate__(self: Any) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("_hash", None)
        return d

    setattr(cls, "__hash__", __hash__)  # noqa: B010 (a method replaced after the class)
    setattr(cls, "__getstate__", __getstate__)  # noqa: B010


for _cls in (Col, Lit, Call):
    _hash_kept(_cls)


def show(e: Expr, names: list[str] | None = None) -> str:
    """A readable form of ``e`` (for ``explain``)."""
    if isinstance(e, Col):
        if names is not None and e.index < len(names):
            return names[e.index]
        return e.name or f"#{e.index}"
    if isinstance(e, Lit):
        if e.value is None:
            return "NULL"
        if isinstance(e.value, str):
            return repr(e.value)
        return str(e.value)
    assert isinstance(e, Call)
    if e.op == "class_map":
        return show(e.extra[0])  # (read through the field's name)
    a = [show(x, names) for x in e.args]
    infix = {
        "add": "+",
        "sub": "-",
        "mul": "*",
        "div": "/",
        "idiv": "DIV",
        "mod": "%",
        "eq": "=",
        "ne": "<>",
        "lt": "<",
        "le": "<=",
        "gt": ">",
        "ge": ">=",
        "and": "AND",
        "or": "OR",
        "nseq": "<=>",
    }
    if e.op in infix and len(a) == 2:
        return f"({a[0]} {infix[e.op]} {a[1]})"
    if e.op == "cast":
        return f"CAST({a[0]} AS {e.type})"
    if e.extra is not None and e.op not in ("in",):
        return f"{e.op}({', '.join(a)}; {e.extra!r})"
    if e.op == "in":
        return f"({a[0]} IN {tuple(e.extra)!r})"
    return f"{e.op}({', '.join(a)})"


def conjuncts(e: Expr, op: str = "and") -> list[Expr]:
    """The operands of nested ``op`` calls (``and`` by default: the conjuncts of a
    predicate; ``or``: its disjuncts)."""
    if isinstance(e, Call) and e.op == op:
        return [c for a in e.args for c in conjuncts(a, op)]
    return [e]


def conjoin(parts: list[Expr], op: str = "and") -> Expr | None:
    """``parts`` joined by nested ``op`` calls (``and`` by default), None for no parts."""
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = Call(op, (out, p), BOOLEAN, out.nullable or p.nullable)
    return out


class Ctx:
    """What evaluation needs besides the batch: the string dictionary, the dialect, and
    per-expression memo tables that outlive a batch."""

    def __init__(self, strings: StringDict, dialect: str = "spark") -> None:
        self.strings = strings
        self.dialect = dialect
        self.memo: dict[Any, dict[Any, Any]] = {}

    def memo_for(self, key: Any) -> dict[Any, Any]:
        m = self.memo.get(key)
        if m is None:
            m = self.memo[key] = {}
        return m


Result = tuple[np.ndarray, np.ndarray | None]


def _or(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def evaluate(e: Expr, f: Frame, ctx: Ctx) -> Result:
    """``e`` over the rows of ``f``: ``(values, nulls)``."""
    if isinstance(e, Col):
        v = f.val(e.index)
        if e.type.kind == "boolean" and v.dtype != bool:
            v = v != 0  # stored as 0 / 1
        return v, f.null(e.index)
    if isinstance(e, Lit):
        return _lit(e, f.n, ctx)
    assert isinstance(e, Call)
    fn = _OPS.get(e.op)
    if fn is None:
        raise DataError(f"no evaluator for {e.op}")
    if e.op in _SHARED:
        # arithmetic met twice in one batch (``a * (1 - b)`` inside two sums, made one
        # object by ``intern_exprs``) is computed once: results are never written to (like
        # the batch's own columns)
        seen = f.seen
        got = seen.get(id(e))
        if got is None:  # (the entry holds ``e``, so its id is not reused meanwhile)
            got = seen[id(e)] = (e, fn(e, f, ctx))
        return got[1]
    return fn(e, f, ctx)


def intern_exprs(exprs: list[Expr]) -> list[Expr]:
    """``exprs`` rebuilt so that equal subexpressions are one object (hashing each once,
    when a plan is lowered, not per batch)."""
    table: dict[Expr, Expr] = {}

    def go(e: Expr) -> Expr:
        if isinstance(e, Call):
            args = tuple(go(a) for a in e.args)
            if any(a is not b for a, b in zip(args, e.args, strict=True)):
                e = dataclasses.replace(e, args=args)
        got = table.get(e)
        if got is None:
            table[e] = e
            return e
        return got

    return [go(e) for e in exprs]


_SHARED = frozenset(("add", "sub", "mul", "div", "cast"))


def _lit_value(e: Lit, ctx: Ctx) -> tuple[Any, dict[Any, Any]]:
    """A non-NULL literal's physical value (computed once) and its memo."""
    m = ctx.memo_for(("lit", e))
    v = m.get("v")
    if v is None:
        if e.type.kind == "boolean":
            v = bool(e.value)
        else:
            phys, _ = encode_values([e.value], e.type, "literal", ctx.strings)
            v = phys[0]
            v = int(v) if isinstance(v, (int, np.integer)) else v
        m["v"] = v
    return v, m


def scalar_of(e: Expr, ctx: Ctx) -> int | None:
    """The physical value of a non-NULL, non-boolean literal that fits 64 bits, else None
    (an operator with one such side works on the scalar, not a column of it)."""
    if not isinstance(e, Lit) or e.value is None or e.type.kind == "boolean":
        return None
    v, _ = _lit_value(e, ctx)
    if isinstance(v, int) and I64_MIN <= v <= I64_MAX:
        return v
    return None


def _lit(e: Lit, n: int, ctx: Ctx) -> Result:
    if e.value is None:
        return np.zeros(n, dtype=bool if e.type == BOOLEAN else np.int64), np.ones(n, bool)
    v, m = _lit_value(e, ctx)
    # the column of a literal is made once per batch length (read-only: shared)
    arr = m.get(n)
    if arr is None:
        if e.type.kind == "boolean":
            arr = np.full(n, v, dtype=bool)
        elif isinstance(v, int) and not (I64_MIN <= v <= I64_MAX):
            arr = np.empty(n, dtype=object)
            arr[:] = [v] * n
        else:
            arr = np.full(n, v, dtype=np.int64)
        arr.flags.writeable = False
        if len(m) > 8:
            for k in [k for k in m if k != "v"]:
                del m[k]
        m[n] = arr
    return arr, None


def _args(e: Call, f: Frame, ctx: Ctx) -> list[Result]:
    return [evaluate(a, f, ctx) for a in e.args]


# -- numbers -------------------------------------------------------------------------------


def _is_obj(*arrs: np.ndarray) -> bool:
    return any(a.dtype == object for a in arrs)


def _obj(a: np.ndarray) -> np.ndarray:
    if a.dtype == object:
        return a
    out = np.empty(len(a), dtype=object)
    out[:] = a.tolist()
    return out


def narrow(a: np.ndarray) -> np.ndarray:
    """An ``object`` column of ints as int64 when every value fits."""
    if a.dtype != object or not len(a):
        return a.astype(np.int64) if a.dtype == object else a
    try:
        return np.array(a.tolist(), dtype=np.int64)
    except OverflowError:
        return a


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _is_obj(a, b):
        return narrow(_obj(a) + _obj(b))
    with np.errstate(over="ignore"):
        r = a + b
    if (((a ^ r) & (b ^ r)) < 0).any():
        return narrow(_obj(a) + _obj(b))
    return r


def _sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _is_obj(a, b):
        return narrow(_obj(a) - _obj(b))
    with np.errstate(over="ignore"):
        r = a - b
    if (((a ^ b) & (a ^ r)) < 0).any():
        return narrow(_obj(a) - _obj(b))
    return r


_SAFE = float(2**62)


def _absmax(a: np.ndarray) -> int:
    return max(abs(int(a.max())), abs(int(a.min()))) if len(a) else 0


def _mul(a: np.ndarray, b: np.ndarray, bound: int | None = None) -> np.ndarray:
    """``a * b`` exactly (object ints where a product leaves 64 bits); ``bound``: a known
    bound on ``|a| * |b|`` (``value_range``), else one is computed."""
    if _is_obj(a, b):
        return narrow(_obj(a) * _obj(b))
    if bound is not None and bound < 2**63:
        return a * b
    if _absmax(a) * _absmax(b) < 2**63:  # no product can overflow
        return a * b
    fa = np.abs(a.astype(np.float64) * b.astype(np.float64))
    if len(fa) and fa.max() >= _SAFE:
        return narrow(_obj(a) * _obj(b))
    return a * b


def _scale_up(a: np.ndarray, k: int) -> np.ndarray:
    if k == 0:
        return a
    f = 10**k
    if a.dtype != object and k <= 18 and _absmax(a) * f < 2**63:
        return a * f
    return narrow(_obj(a) * f)


def _div_half_up(n: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``round(n / d)`` with halves away from zero, for int columns with ``d != 0``."""
    if _is_obj(n, d) or (len(n) and (n == I64_MIN).any()):
        out = [
            _py_div_half_up(x, y) for x, y in zip(_obj(n).tolist(), _obj(d).tolist(), strict=True)
        ]
        arr = np.empty(len(out), dtype=object)
        arr[:] = out
        return narrow(arr)
    an, ad = np.abs(n), np.abs(d)
    q, r = np.divmod(an, ad)
    q = q + (r >= ad - r)
    neg = (n < 0) != (d < 0)
    return np.where(neg, -q, q)


def _py_div_half_up(x: int, y: int) -> int:
    q, r = divmod(abs(x), abs(y))
    if 2 * r >= abs(y):
        q += 1
    return -q if (x < 0) != (y < 0) else q


def rescale(a: np.ndarray, s_from: int, s_to: int) -> np.ndarray:
    """Unscaled decimals from scale ``s_from`` to ``s_to`` (rounding half up when lower)."""
    if s_to >= s_from:
        return _scale_up(a, s_to - s_from)
    d = 10 ** (s_from - s_to)
    if d > I64_MAX:
        return narrow(np.array([_py_div_half_up(x, d) for x in _obj(a).tolist()], dtype=object))
    return _div_half_up(a, np.full(len(a), d, dtype=np.int64))


def as_float(v: np.ndarray, t: SqlType) -> np.ndarray:
    """A numeric column's values as float64."""
    k = t.kind
    if k == "double":
        return float_from_keys(v)
    if k == "decimal":
        if v.dtype == object:
            return np.array([x / 10**t.scale for x in v.tolist()], dtype=np.float64)
        return v.astype(np.float64) / (10.0**t.scale)
    return v.astype(np.float64)


def as_decimal(v: np.ndarray, t: SqlType, scale: int) -> np.ndarray:
    """A numeric column's values as unscaled decimals of ``scale``."""
    if t.kind == "decimal":
        return rescale(v, t.scale, scale)
    if t.kind in ("int", "boolean"):
        return _scale_up(v.astype(np.int64) if v.dtype == bool else v, scale)
    if t.kind == "double":
        x = float_from_keys(v) * (10.0**scale)
        bad = ~np.isfinite(x)
        r = np.sign(x) * np.floor(np.abs(x) + 0.5)
        r[bad] = 0
        if len(r) and np.abs(r).max() >= _SAFE:
            return narrow(np.array([int(y) for y in r.tolist()], dtype=object))
        return r.astype(np.int64)
    raise DataError(f"cannot use {t} as a number")


def _zero_at(v: np.ndarray, nulls: np.ndarray | None) -> np.ndarray:
    """``v`` with 0 in the slots of NULL rows (which hold whatever the arithmetic of their
    placeholders gave), or ``v`` itself when no row is NULL."""
    if nulls is None or not nulls.any():
        return v
    return np.where(nulls, 0, v)


def decimal_checked(
    v: np.ndarray,
    t: SqlType,
    what: str,
    error: type[DataError] = DataError,
    nulls: np.ndarray | None = None,
) -> np.ndarray:
    """Unscaled values ``v`` of the DECIMAL ``t``; ``error`` when one has more digits than
    ``t``'s precision (SQL raises a decimal overflow rather than wrap or widen). Rows
    ``nulls`` are NULL: their slots are not values, so they are not checked."""
    if not len(v) or (v.dtype != object and t.precision >= 19):
        return v  # (an int64 has at most 19 digits)

    def widest(v: np.ndarray) -> int:
        if v.dtype != object:
            return max(int(v.max()), -int(v.min()))
        return max(abs(int(x)) for x in v.tolist())

    if widest(v) >= 10**t.precision:
        v = _zero_at(v, nulls)
        if widest(v) >= 10**t.precision:
            raise error(f"decimal overflow in {what}: a value does not fit {t}")
    return v


def _int_result(
    r: np.ndarray, t: SqlType, what: str, nulls: np.ndarray | None = None
) -> np.ndarray:
    """Checks an integer result against its type's range (SQL raises on overflow), on the
    rows that are not ``nulls`` (a NULL row's slot holds its placeholders' arithmetic)."""
    lo, hi = t.int_range()
    if r.dtype == object or (t.bits < 64 and len(r) and (r.min() < lo or r.max() > hi)):
        r = narrow(_zero_at(r, nulls))
        if r.dtype == object or (len(r) and (r.min() < lo or r.max() > hi)):
            raise DataError(f"integer overflow in {what}: the result does not fit {t}")
    return r


def value_range(e: Expr, x: np.ndarray, f: Frame) -> tuple[int, int]:
    """The least and greatest of ``x``, the physical values of int / decimal expression
    ``e`` on the rows of ``f`` (NULL rows' values included): derived without looking at
    ``x`` when evaluating ``e`` recorded them (``_note_range``: exact interval arithmetic
    on its operands' ranges), else read from ``x`` once per batch and column. Overflow
    checks use them, so a column's range is read once however many operators use it."""
    key = ("range", "col", e.index) if isinstance(e, Col) else ("range", id(e))
    got = f.seen.get(key)
    if got is not None:
        return got[1]
    r = (int(x.min()), int(x.max())) if len(x) else (0, 0)
    f.seen[key] = (e, r)  # (the entry holds ``e``: its id is not reused meanwhile)
    return r


def _note_range(e: Expr, f: Frame, lo: int, hi: int) -> None:
    f.seen[("range", id(e))] = (e, (lo, hi))


def _rescaled_range(lo: int, hi: int, s_from: int, s_to: int) -> tuple[int, int]:
    """The range of ``rescale``'s results on values in ``[lo, hi]`` (it is monotone)."""
    if s_to >= s_from:
        f = 10 ** (s_to - s_from)
        return lo * f, hi * f
    d = 10 ** (s_from - s_to)
    return _py_div_half_up(lo, d), _py_div_half_up(hi, d)


def _scaled_range(e: Expr, x: np.ndarray, f: Frame, k: int) -> tuple[int, int]:
    """``value_range`` of ``e`` times ``10^k`` (``as_decimal`` to a scale ``k`` higher)."""
    lo, hi = value_range(e, x, f)
    m = 10**k
    return lo * m, hi * m


def _with_scalar(e: Call, f: Frame, ctx: Ctx) -> Result | None:
    """``+``, ``-``, ``*`` of an int / decimal column and a constant, on the scalar, when
    no result can overflow (the column's range decides); else None."""
    i = (
        1
        if scalar_of(e.args[1], ctx) is not None
        else 0
        if scalar_of(e.args[0], ctx) is not None
        else -1
    )
    if i < 0:
        return None
    v = scalar_of(e.args[i], ctx)
    assert v is not None
    ce = e.args[1 - i]
    tx, tv, t, op = ce.type, e.args[i].type, e.type, e.op
    if tx.kind not in ("int", "decimal") or tv.kind not in ("int", "decimal"):
        return None
    x, xn = evaluate(ce, f, ctx)
    if x.dtype == object or x.dtype == bool:
        return None
    sx, sv = _scale_of(tx), _scale_of(tv)
    x0 = x
    if t.kind == "decimal" and op in ("add", "sub"):
        hi = max(sx, sv)
        x = as_decimal(x, tx, hi)
        if x.dtype == object:
            return None
        v = v * 10 ** (hi - sv)
        scale = hi
        lo, top = _scaled_range(ce, x0, f, hi - sx)
    else:
        scale = sx + sv
        lo, top = value_range(ce, x, f)
    if not I64_MIN <= v <= I64_MAX:
        return None
    if op == "add":
        ends = (lo + v, top + v)
        r = x + v if max(ends) <= I64_MAX and min(ends) >= I64_MIN else None
    elif op == "sub":
        ends = (lo - v, top - v) if i == 1 else (v - top, v - lo)
        ok = max(ends) <= I64_MAX and min(ends) >= I64_MIN
        r = (x - v if i == 1 else v - x) if ok else None
    else:
        ends = (lo * v, top * v) if v >= 0 else (top * v, lo * v)
        r = x * v if max(abs(lo), abs(top)) * abs(v) < 2**63 else None
    if r is None:
        return None
    if t.kind == "decimal":
        out = rescale(r, scale, t.scale)
        if out.dtype != object:
            _note_range(e, f, *_rescaled_range(ends[0], ends[1], scale, t.scale))
        return out, xn
    out = _int_result(r, t, show(e), xn)
    if out.dtype != object:
        _note_range(e, f, ends[0], ends[1])
    return out, xn


def _numeric_binary(e: Call, f: Frame, ctx: Ctx) -> Result:
    """Arithmetic; a DECIMAL result beyond 64 bits is checked against its type's digits
    (the result types leave room for every result unless capped at 38 digits, and an
    int64 holds no more than 19)."""
    v, nl = _arith_values(e, f, ctx)
    if v.dtype == object and e.type.kind == "decimal":
        v = decimal_checked(v, e.type, show(e), nulls=nl)
    return v, nl


def _arith_values(e: Call, f: Frame, ctx: Ctx) -> Result:
    if e.op in ("add", "sub", "mul") and e.type.kind in ("int", "decimal"):
        got = _with_scalar(e, f, ctx)
        if got is not None:
            return got
    (a, an), (b, bn) = _args(e, f, ctx)
    ta, tb, t = e.args[0].type, e.args[1].type, e.type
    nulls = _or(an, bn)
    op = e.op
    if t.kind == "double":
        x, y = as_float(a, ta), as_float(b, tb)
        with np.errstate(all="ignore"):
            if op == "add":
                r = x + y
            elif op == "sub":
                r = x - y
            elif op == "mul":
                r = x * y
            elif op == "div":
                zero = y == 0
                r = x / np.where(zero, 1.0, y)
                if zero.any():
                    nulls = _or(nulls, zero)
            elif op == "mod":
                zero = y == 0
                r = np.fmod(x, np.where(zero, 1.0, y))
                if zero.any():
                    nulls = _or(nulls, zero)
            elif op == "pow":
                r = np.power(x, y)
                # Java's pow: NaN whenever the exponent is NaN (C's pow(1, NaN) is 1)
                r = np.where(np.isnan(y), np.nan, r) if ctx.dialect == "spark" else r
            else:
                raise DataError(f"{op} is not defined on {t}")
        if t.bits == 32:
            r = r.astype(np.float32).astype(np.float64)  # FLOAT arithmetic is 32-bit
        return float_keys(r), nulls
    if t.kind == "decimal":
        s = t.scale
        if op in ("add", "sub"):
            hi = max(_scale_of(ta), _scale_of(tb))
            x, y = as_decimal(a, ta, hi), as_decimal(b, tb, hi)
            r = _add(x, y) if op == "add" else _sub(x, y)
            return rescale(r, hi, s), nulls
        if op == "mul":
            sa, sb = _scale_of(ta), _scale_of(tb)
            x, y = as_decimal(a, ta, sa), as_decimal(b, tb, sb)
            ends = _product_range(e, x, y, f)
            r = _mul(x, y, None if ends is None else max(-ends[0], ends[1]))
            out = rescale(r, sa + sb, s)
            if ends is not None and out.dtype != object:
                _note_range(e, f, *_rescaled_range(ends[0], ends[1], sa + sb, s))
            return out, nulls
        if op == "div":
            sa, sb = _scale_of(ta), _scale_of(tb)
            x, y = as_decimal(a, ta, sa), as_decimal(b, tb, sb)
            zero = y == 0
            if zero.any():
                nulls = _or(nulls, np.asarray(zero, dtype=bool))
                y = np.where(zero, 1, y) if y.dtype != object else _obj(np.where(zero, 1, y))
            # x/10^sa / (y/10^sb) * 10^s = x * 10^(s - sa + sb) / y
            k = s - sa + sb
            if k >= 0:
                return _div_half_up(_scale_up(x, k), y), nulls
            return _div_half_up(x, _scale_up(y, -k)), nulls
        if op == "mod":
            hi = max(_scale_of(ta), _scale_of(tb))
            x, y = as_decimal(a, ta, hi), as_decimal(b, tb, hi)
            zero = y == 0
            if zero.any():
                nulls = _or(nulls, np.asarray(zero, dtype=bool))
                y = np.where(zero, 1, y)
            r = _fmod_int(x, y)
            return rescale(r, hi, s), nulls
        raise DataError(f"{op} is not defined on {t}")
    # integers
    if a.dtype == bool:
        a = a.astype(np.int64)
    if b.dtype == bool:
        b = b.astype(np.int64)
    if op == "add":
        r = _add(a, b)
    elif op == "sub":
        r = _sub(a, b)
    elif op == "mul":
        ends = _product_range(e, a, b, f)
        r = _mul(a, b, None if ends is None else max(-ends[0], ends[1]))
        if ends is not None and r.dtype != object:
            _note_range(e, f, ends[0], ends[1])
    elif op in ("idiv", "mod"):
        if op == "idiv" and "decimal" in (ta.kind, tb.kind):
            # x / 10^s DIV y / 10^s: the unscaled values at one scale, divided
            hi = max(_scale_of(ta), _scale_of(tb))
            a, b = as_decimal(a, ta, hi), as_decimal(b, tb, hi)
        zero = b == 0
        if zero.any():
            nulls = _or(nulls, zero)
            b = np.where(zero, 1, b)
        r = _trunc_div(a, b) if op == "idiv" else _fmod_int(a, b)
    else:
        raise DataError(f"{op} is not defined on {t}")
    return _int_result(r, t, show(e), nulls), nulls


def _product_range(e: Call, x: np.ndarray, y: np.ndarray, f: Frame) -> tuple[int, int] | None:
    """The range of ``x * y`` (operands of ``e`` at their own scales) from the operands'
    ranges, or None for object columns."""
    if x.dtype == object or y.dtype == object or x.dtype == bool or y.dtype == bool:
        return None
    xl, xh = value_range(e.args[0], x, f)
    yl, yh = value_range(e.args[1], y, f)
    corners = (xl * yl, xl * yh, xh * yl, xh * yh)
    return min(corners), max(corners)


def _scale_of(t: SqlType) -> int:
    return t.scale if t.kind == "decimal" else 0


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero (SQL's, C's)."""
    if _is_obj(a, b) or (len(a) and (a == I64_MIN).any()):
        out = [
            int(x / y) if abs(x) < 2**52 else _py_trunc(x, y)
            for x, y in zip(_obj(a).tolist(), _obj(b).tolist(), strict=True)
        ]
        arr = np.empty(len(out), dtype=object)
        arr[:] = out
        return narrow(arr)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def _py_trunc(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return -q if (x < 0) != (y < 0) else q


def _fmod_int(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Remainder with the dividend's sign (SQL's ``%``)."""
    if _is_obj(a, b):
        out = [
            x - _py_trunc(x, y) * y for x, y in zip(_obj(a).tolist(), _obj(b).tolist(), strict=True)
        ]
        arr = np.empty(len(out), dtype=object)
        arr[:] = out
        return narrow(arr)
    return np.fmod(a, b)


def _neg(e: Call, f: Frame, ctx: Ctx) -> Result:
    ((a, an),) = _args(e, f, ctx)
    t = e.type
    if t.kind == "double":
        return float_keys(-float_from_keys(a)), an
    if a.dtype != object and len(a) and (a == I64_MIN).any():
        a = _obj(a)
    r = narrow(-a) if a.dtype == object else -a
    if t.kind == "int":
        return _int_result(r, t, show(e), an), an
    return r, an


# -- comparisons and logic -----------------------------------------------------------------

_CMP = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


_FLIP = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _compare(e: Call, f: Frame, ctx: Ctx) -> Result:
    ta = e.args[0].type
    op = e.op
    if ta.kind != "string" or op in ("eq", "ne"):
        # a column against a constant: compared with the scalar itself
        for i, cmp in ((1, op), (0, _FLIP[op])):
            v = scalar_of(e.args[i], ctx)
            if v is not None:
                a, an = evaluate(e.args[1 - i], f, ctx)
                if a.dtype != object:
                    return _CMP[cmp](a, v), an
                break
    (a, an), (b, bn) = _args(e, f, ctx)
    nulls = _or(an, bn)
    if ta.kind == "string" and op not in ("eq", "ne"):
        a = _strings_of(a, ctx)
        b = _strings_of(b, ctx)
    elif ta.kind == "double" and op in ("eq", "ne") and ctx.dialect != "spark":
        pass  # NaN keys compare equal (Spark's semantics; SQLite has no NaN)
    if a.dtype == object or b.dtype == object:
        r = np.array(_CMP[op](_obj(a), _obj(b)), dtype=bool)
    else:
        r = _CMP[op](a, b)
    return r, nulls


def _exact_number_compare(e: Call, f: Frame, ctx: Ctx) -> Result:
    """An INTEGER compared with a REAL by their exact values (SQLite), not as two doubles
    (where 2**53 + 1 equals 2.0**53): the doubles decide unless they are equal, and where
    they are, the REAL is a whole number and is compared with the INTEGER as one.
    ``extra`` is the comparison (``eq``, ``lt``, ...)."""
    (a, an), (b, bn) = _args(e, f, ctx)
    ints_first = e.args[0].type.kind == "int"
    i, keys = (a, b) if ints_first else (b, a)
    op = e.extra if ints_first else _FLIP[e.extra]
    x = float_from_keys(keys)
    if i.dtype == object:  # (Python compares an int with a float exactly)
        d = np.array(
            [(v > w) - (v < w) for v, w in zip(i.tolist(), x.tolist(), strict=True)],
            dtype=np.int64,
        )
    else:
        fi = i.astype(np.float64)
        with np.errstate(invalid="ignore"):
            d = np.sign(np.nan_to_num(fi - x, nan=1.0)).astype(np.int64)
        tie = fi == x
        if tie.any():
            xt = x[tie]
            top = xt >= 2.0**63  # (the double nearest the greatest INTEGER is 2**63)
            dd = np.sign(i[tie] - np.where(top, 0.0, xt).astype(np.int64))
            dd[top] = -1
            d[tie] = dd
    out = _CMP[op](d, 0)  # (the comparison read off the sign of ``i - x``)
    nan = np.isnan(x)
    if nan.any():
        out[nan] = op == "ne"
    return out, _or(an, bn)


def _strings_of(codes: np.ndarray, ctx: Ctx) -> np.ndarray:
    return ctx.strings.decode(codes)


def _null_safe_eq(e: Call, f: Frame, ctx: Ctx) -> Result:
    (a, an), (b, bn) = _args(e, f, ctx)
    eq = np.asarray(a == b, dtype=bool)
    if an is None and bn is None:
        return eq, None
    an_ = an if an is not None else np.zeros(f.n, bool)
    bn_ = bn if bn is not None else np.zeros(f.n, bool)
    return np.where(an_ | bn_, an_ & bn_, eq), None


def _and(e: Call, f: Frame, ctx: Ctx) -> Result:
    vals, nulls = evaluate(e.args[0], f, ctx)
    for arg in e.args[1:]:
        b, bn = evaluate(arg, f, ctx)
        if nulls is None and bn is None:
            vals = vals & b
            continue
        an_ = nulls if nulls is not None else np.zeros(f.n, bool)
        bn_ = bn if bn is not None else np.zeros(f.n, bool)
        false_a = ~vals & ~an_
        false_b = ~b & ~bn_
        false = false_a | false_b
        vals = vals & b & ~an_ & ~bn_
        nl = ~false & (an_ | bn_)
        nulls = nl if nl.any() else None
    return vals, nulls


def _or_op(e: Call, f: Frame, ctx: Ctx) -> Result:
    vals, nulls = evaluate(e.args[0], f, ctx)
    for arg in e.args[1:]:
        b, bn = evaluate(arg, f, ctx)
        if nulls is None and bn is None:
            vals = vals | b
            continue
        an_ = nulls if nulls is not None else np.zeros(f.n, bool)
        bn_ = bn if bn is not None else np.zeros(f.n, bool)
        true = (vals & ~an_) | (b & ~bn_)
        nl = ~true & (an_ | bn_)
        vals = true
        nulls = nl if nl.any() else None
    return vals, nulls


def _not(e: Call, f: Frame, ctx: Ctx) -> Result:
    ((a, an),) = _args(e, f, ctx)
    return ~a, an


def _is_null(e: Call, f: Frame, ctx: Ctx) -> Result:
    _, an = evaluate(e.args[0], f, ctx)
    r = an if an is not None else np.zeros(f.n, bool)
    return (~r if e.op == "is_not_null" else r.copy()), None


def _truth(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``x IS TRUE`` / ``IS FALSE`` / ``IS NOT TRUE`` / ``IS NOT FALSE``: never NULL."""
    a, an = evaluate(e.args[0], f, ctx)
    known = ~an if an is not None else np.ones(f.n, bool)
    want = e.extra
    r = known & (a if want[0] else ~a)
    return (~r if want[1] else r), None


def _in_list(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``x IN (v1, v2, ...)`` with constant values: TRUE on a match, else NULL if ``x`` or a
    value is NULL, else FALSE."""
    a, an = evaluate(e.args[0], f, ctx)
    m = ctx.memo_for(("in", e))
    vals = m.get("vals")
    if vals is None:
        lits = [Lit(v, e.args[0].type) for v in e.extra if v is not None]
        vals = [_lit(x, 1, ctx)[0][0] for x in lits]
        m["vals"] = vals
        m["has_null"] = any(v is None for v in e.extra)
    if a.dtype == object:
        hit = np.fromiter((x in set(vals) for x in a.tolist()), dtype=bool, count=len(a))
    else:
        hit = np.isin(a, np.array(vals, dtype=a.dtype)) if vals else np.zeros(len(a), bool)
    if an is not None:
        hit = hit & ~an  # a NULL's physical 0 must not match a 0 in the list
    nulls = an
    if m["has_null"]:
        nulls = _or(nulls, ~hit)  # no match, and a NULL in the list: unknown
    return hit, nulls


def _between(e: Call, f: Frame, ctx: Ctx) -> Result:
    x, lo, hi = e.args
    t = e.type
    c = Call("and", (Call("ge", (x, lo), t), Call("le", (x, hi), t)), t)
    return _and(c, f, ctx)


# -- conditionals --------------------------------------------------------------------------


def _case(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``CASE WHEN c1 THEN v1 ... ELSE d END``: the first TRUE condition picks (NULL is not
    TRUE); args are ``c1, v1, c2, v2, ..., d``."""
    args = e.args
    n = f.n
    dv, dn = evaluate(args[-1], f, ctx)
    out = dv.copy() if dv.dtype != object else dv.copy()
    nulls = dn.copy() if dn is not None else np.zeros(n, bool)
    decided = np.zeros(n, bool)
    pairs = [(args[i], args[i + 1]) for i in range(0, len(args) - 1, 2)]
    for cond, val in pairs:
        c, cn = evaluate(cond, f, ctx)
        take = c & ~decided
        if cn is not None:
            take &= ~cn
        if not take.any():
            continue
        v, vn = evaluate(val, f, ctx)
        if v.dtype == object or out.dtype == object:
            out = _obj(out)
            out[take] = _obj(v)[take]
        else:
            out = out.astype(np.result_type(out, v), copy=False)
            out[take] = v[take]
        nulls[take] = vn[take] if vn is not None else False
        decided |= take
    if out.dtype == object and e.type.kind != "string":
        out = narrow(out)
    return out, (nulls if nulls.any() else None)


def _class_map(e: Call, f: Frame, ctx: Ctx) -> Result:
    """An expression over one string's class among ``k`` literals (``Scan.classes``) and
    constants, ``extra = (expression over field 0, k)``: its value for each class and for
    NULL, computed once, then looked up by each row's class."""
    inner, k = e.extra
    m = ctx.memo_for(("class_map", e))
    table = m.get("t")
    if table is None:
        classes = np.arange(k + 2, dtype=np.int64)
        classes[-1] = 0
        nulls = np.zeros(k + 2, bool)
        nulls[-1] = True  # the last entry: a NULL string
        one = [Field("class", BIGINT, True)]
        fr = Frame(pack([classes], [nulls], mask_words(one), k + 2), 1, k + 2)
        tv, tn = evaluate(inner, fr, ctx)
        table = m["t"] = (tv, tn if tn is not None and tn.any() else None)
    tv, tn = table
    a, an = evaluate(e.args[0], f, ctx)
    idx = a if an is None else np.where(an, k + 1, a)
    return tv[idx], (None if tn is None else tn[idx])


def _coalesce(e: Call, f: Frame, ctx: Ctx) -> Result:
    out, nulls = evaluate(e.args[0], f, ctx)
    if nulls is None:
        return out, None
    out = out.copy()
    nulls = nulls.copy()
    for arg in e.args[1:]:
        v, vn = evaluate(arg, f, ctx)
        take = nulls & (~vn if vn is not None else True)
        if v.dtype == object or out.dtype == object:
            out = _obj(out)
            out[take] = _obj(v)[take]
        else:
            out[take] = v[take]
        nulls &= ~take
        if not nulls.any():
            return narrow(out) if out.dtype == object else out, None
    return (narrow(out) if out.dtype == object else out), (nulls if nulls.any() else None)


def _nullif(e: Call, f: Frame, ctx: Ctx) -> Result:
    """NULL where the value (the first argument) equals the other; with three arguments the
    value is followed by both sides of the comparison in their common type."""
    a, an = evaluate(e.args[0], f, ctx)
    eq, eqn = _compare(Call("eq", e.args[-2:], BOOLEAN), f, ctx)
    same = eq & (~eqn if eqn is not None else True)
    return a, _or(an, same if same.any() else None)


def _greatest(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``greatest``/``least``: NULL arguments are skipped (Spark); NULL only if all are.
    With ``extra == "nulls"`` (SQLite's many-argument ``max``/``min``), NULL if any is."""
    best, bn = evaluate(e.args[0], f, ctx)
    any_null = bn  # (each argument evaluated once: its NULLs noted here as well)
    pick = np.maximum if e.op == "greatest" else np.minimum
    strings = e.type.kind == "string"
    for arg in e.args[1:]:
        v, vn = evaluate(arg, f, ctx)
        any_null = _or(any_null, vn)
        if strings:
            sb, sv = ctx.strings.decode(best), ctx.strings.decode(v)
            better = (sv > sb) if e.op == "greatest" else (sv < sb)
            cand = np.where(better, v, best)
        elif v.dtype == object or best.dtype == object:
            cand = np.array(
                [
                    max(x, y) if e.op == "greatest" else min(x, y)
                    for x, y in zip(_obj(best).tolist(), _obj(v).tolist(), strict=True)
                ],
                dtype=object,
            )
        else:
            cand = pick(best, v)
        if bn is None and vn is None:
            best = cand
            continue
        bn_ = bn if bn is not None else np.zeros(f.n, bool)
        vn_ = vn if vn is not None else np.zeros(f.n, bool)
        best = np.where(bn_, v, np.where(vn_, best, cand))
        both = bn_ & vn_
        bn = both if both.any() else None
    if e.extra == "nulls":
        return best, (any_null if any_null is not None and any_null.any() else None)
    return best, bn


# -- casts ---------------------------------------------------------------------------------


def _cast(e: Call, f: Frame, ctx: Ctx) -> Result:
    a, an = evaluate(e.args[0], f, ctx)
    return cast_values(a, an, e.args[0].type, e.type, ctx)


def _try_cast(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``try_cast``: ANSI mode's reading of text, and NULL for a value that a cast would
    raise on (past the type); the rows are cast one at a time only when some row raises."""
    a, an = evaluate(e.args[0], f, ctx)
    src, dst = e.args[0].type, e.type
    try:
        return cast_values(a, an, src, dst, ctx, strict=True)
    except DataError:
        pass
    vals: list[Any] = []
    bad = np.zeros(len(a), dtype=bool)
    for i in range(len(a)):
        try:
            v, nl = cast_values(a[i : i + 1], None, src, dst, ctx, strict=True)
            vals.append(v[0])
            bad[i] = nl is not None and bool(nl[0])
        except DataError:
            vals.append(False if dst.kind == "boolean" else 0)
            bad[i] = True
    if dst.kind == "boolean":
        out = np.array(vals, dtype=bool).reshape(len(vals))
    else:
        out = int_column([int(v) for v in vals])
    return out, _or(an, bad if bad.any() else None)


def cast_values(
    a: np.ndarray,
    an: np.ndarray | None,
    src: SqlType,
    dst: SqlType,
    ctx: Ctx,
    strict: bool = False,
) -> Result:
    """Physical values of ``src`` as ``dst`` (text that is not a value gives NULL;
    ``strict``: text is read by ANSI mode's rules)."""
    s, d = src.kind, dst.kind
    if src == dst or s == "null":
        return (a if s != "null" else np.zeros(len(a), np.int64)), an
    if d == "boolean":
        if s == "boolean":
            return a, an
        if s == "string":
            return _parse_strings(a, an, dst, ctx, strict)
        if s == "double":
            return float_from_keys(a) != 0, an
        return np.asarray(a != 0, dtype=bool), an
    if s == "boolean" and d == "string" and ctx.dialect == "spark":
        # Spark's text of a BOOLEAN is 'true' / 'false' (SQLite's is its integer)
        codes = np.array(ctx.strings.encode_list(["false", "true"]), dtype=np.int64)
        out = codes[np.asarray(a, dtype=bool).astype(np.intp)]
        return (out if an is None else np.where(an, 0, out)), an
    if s == "boolean":
        a = a.astype(np.int64)
        s = "int"
        src = BIGINT
    if d == "string":
        return _format_strings(a, an, src, ctx), an
    if s == "string":
        return _parse_strings(a, an, dst, ctx, strict)
    if d == "int":
        if s == "int":
            r = a
        elif s == "decimal":
            r = (
                _trunc_div(a, np.full(len(a), 10**src.scale, dtype=np.int64))
                if src.scale <= 18
                else narrow(
                    np.array([_py_trunc(x, 10**src.scale) for x in _obj(a).tolist()], dtype=object)
                )
            )
        elif s == "double":
            x = float_from_keys(a)
            bad = ~np.isfinite(x)
            x = np.where(bad, 0.0, np.trunc(x))
            if len(x) and np.abs(x).max() >= 2.0**63:
                raise DataError(f"value out of range in CAST to {dst}")
            r = x.astype(np.int64)
            if bad.any():
                an = _or(an, bad)
        elif s == "date":
            r = a
        elif s == "timestamp":
            r = np.floor_divide(a, 1_000_000)
        else:
            raise DataError(f"cannot cast {src} to {dst}")
        return _int_result(narrow(r) if r.dtype == object else r, dst, f"CAST to {dst}", an), an
    if d == "decimal":
        if s in ("int", "decimal", "double"):
            r = as_decimal(a, src, dst.scale)
            if s == "double":
                # NaN and the infinities are no DECIMAL: NULL (Spark)
                odd = ~np.isfinite(float_from_keys(a))
                if odd.any():
                    an = _or(an, odd)
                    r = np.where(odd, 0, r)
            if not _widens(src, dst):
                r = decimal_checked(r, dst, f"CAST to {dst}", nulls=an)
            return r, an
        raise DataError(f"cannot cast {src} to {dst}")
    if d == "double":
        if s in ("int", "decimal", "double"):
            x = as_float(a, src)
            if dst.bits == 32:
                x = x.astype(np.float32).astype(np.float64)
            return float_keys(x), an
        raise DataError(f"cannot cast {src} to {dst}")
    if d == "date":
        if s == "timestamp":
            return np.floor_divide(a, 86_400_000_000), an
        raise DataError(f"cannot cast {src} to {dst}")
    if d == "timestamp":
        if s == "date":
            return a * 86_400_000_000, an
        raise DataError(f"cannot cast {src} to {dst}")
    raise DataError(f"cannot cast {src} to {dst}")


_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}


def _widens(src: SqlType, dst: SqlType) -> bool:
    """Whether every value of ``src`` fits the DECIMAL ``dst`` (its integer digits, and a
    carry when rounding to fewer places)."""
    room = dst.precision - dst.scale
    if src.kind == "int":
        return _INT_DIGITS.get(src.bits, 39) <= room
    if src.kind == "decimal":
        return src.precision - src.scale + (dst.scale < src.scale) <= room
    return False


def format_value(v: Any, t: SqlType, dialect: str = "spark") -> str:
    """A value's text as SQL's CAST to a string writes it."""
    from ddflow.sql.types import decode_nonnull

    if t.kind == "boolean":
        return "true" if v else "false"
    if t.kind == "double":
        x = float(v)
        if dialect == "sqlite":
            return _sqlite_real_text(x)
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
        return _java_double_text(x, t.bits)
    if t.kind in ("date", "timestamp", "decimal"):
        (val,) = decode_nonnull(
            np.array(
                [v],
                dtype=object if isinstance(v, int) and not I64_MIN <= v <= I64_MAX else np.int64,
            ),
            t,
            None,
        )
        if t.kind == "timestamp":
            text = val.isoformat(sep=" ")
            # Spark writes the fraction of a second without its trailing zeros
            return text.rstrip("0") if "." in text else text
        return str(val)
    return str(v)


def _java_double_text(x: float, bits: int = 64) -> str:
    """``x`` as Java's ``Double.toString`` (``Float.toString`` for a FLOAT) writes it, as
    Spark's CAST to STRING does: the shortest digits that give ``x`` back, in plain
    notation for 1e-3 <= |x| < 1e7 with at least one digit after the point (``100.0``),
    else as ``d.dddE<n>`` (``1.0E10``, ``1.0E-4``)."""
    if x == 0:
        return "0.0"
    text = str(np.float32(x)) if bits == 32 else repr(x)
    sign, digits, exp = _decimal.Decimal(text).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exp = int(exp) + len(digits) - len(ds)  # the value is int(ds) * 10^exp
    lead = len(ds) + exp - 1  # the power of ten of the first digit
    neg = "-" if sign else ""
    if -3 <= lead < 7:
        if exp >= 0:
            return f"{neg}{ds}{'0' * exp}.0"
        point = len(ds) + exp
        if point > 0:
            return f"{neg}{ds[:point]}.{ds[point:]}"
        return f"{neg}0.{'0' * -point}{ds}"
    return f"{neg}{ds[0]}.{ds[1:] or '0'}E{lead}"


def _sqlite_real_text(x: float) -> str:
    """``x`` as SQLite writes a REAL as text: 15 significant digits, always with a point."""
    if math.isnan(x):
        return ""  # (SQLite has no NaN: it stores NULL)
    if math.isinf(x):
        return "Inf" if x > 0 else "-Inf"
    text = f"{x:.15g}"
    mant, e, expo = text.partition("e")
    if "." not in mant:
        mant += ".0"
    return mant + (e + expo if e else "")


def _format_strings(a: np.ndarray, an: np.ndarray | None, src: SqlType, ctx: Ctx) -> np.ndarray:
    vals = float_from_keys(a) if src.kind == "double" else a
    if len(vals) == 0:
        return np.zeros(0, dtype=np.int64)
    uniq, inv = np.unique(vals, return_inverse=True)
    texts = [format_value(v, src, ctx.dialect) for v in uniq.tolist()]
    codes = ctx.strings.encode_list(texts)
    return codes[inv.reshape(-1)]


_INT_RE = re.compile(r"[+-]?[0-9]+")


#: a number as Spark reads text (ASCII digits only; a trailing d or f marks a double)
_NUM_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_DOUBLE_SPECIAL = {
    "inf": math.inf,
    "+inf": math.inf,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-inf": -math.inf,
    "-infinity": -math.inf,
    "nan": math.nan,
}


#: the characters SQLite skips around a number written as text
_SQLITE_SPACE = " \t\n\v\f\r"


def sqlite_number(s: str) -> int | float | None:
    """The number SQLite's NUMERIC affinity reads text ``s`` as: an INTEGER where it is a
    whole number in 64 bits, a REAL where it is another number (spaces around it allowed),
    None where it is no number (the text then stays text)."""
    txt = s.strip(_SQLITE_SPACE)
    if _INT_RE.fullmatch(txt):
        v = int(txt)
        if I64_MIN <= v <= I64_MAX:
            return v
        return float(v)
    if _NUM_TEXT.fullmatch(txt):
        return float(txt)
    return None


def _number_key(v: Any) -> str:
    """A number's key for SQLite equality (``sqlite_key``): an INTEGER and a REAL of the
    same value have the same key."""
    if isinstance(v, float):
        if v.is_integer() and -(2.0**63) <= v < 2.0**63:
            return "n" + str(int(v))
        return "n" + repr(v)
    if isinstance(v, _decimal.Decimal):
        return "n" + str(int(v)) if v == v.to_integral_value() else _number_key(float(v))
    return "n" + str(int(v))


def _text_key(s: str, numeric: bool) -> str:
    """A text's key for SQLite equality: the key of the number it reads as when numeric
    affinity applies to it (``numeric``) and it is one, else the text itself."""
    if numeric:
        num = sqlite_number(s)
        if num is not None:
            return _number_key(num)
    return "t" + s


def _sqlite_key(e: Call, f: Frame, ctx: Ctx) -> Result:
    """SQLite's equality of a number with text as equality of keys (text): a number's
    key is its value's (or, where ``extra`` is "text", the key of its text: TEXT affinity
    applied to it); a text's is its own (or, where ``extra`` is "num", that of the number
    it reads as, when it reads as one)."""
    a, an = evaluate(e.args[0], f, ctx)
    t = e.args[0].type
    mode = e.extra
    if t.kind == "string":
        m = ctx.memo_for(("sqlite_key", mode))
        numeric = mode == "num"
        return ctx.strings.map_codes(
            a, lambda xs: _typed([_text_key(x, numeric) for x in xs], STRING, ctx), m
        ), an
    vals = decode_nonnull(a, t, None)
    if mode == "text":
        keys = ["t" + (_sqlite_real_text(v) if isinstance(v, float) else str(v)) for v in vals]
    else:
        keys = [_number_key(v) for v in vals]
    return _typed(keys, STRING, ctx), an


def _parse_one(s: str, dst: SqlType, dialect: str, strict: bool = False) -> Any:
    """The value of text ``s`` cast to ``dst``, or None where it is not one. Spark's rules
    (``strict``: ANSI mode's, as ``try_cast`` reads: an integer must be written as one);
    SQLite reads the longest numeric prefix, 0 without one, and an integer beyond 64 bits
    as the end of the range it passes."""
    txt = s.strip()
    d = dst.kind
    try:
        if dialect == "sqlite" and d in ("int", "double", "decimal"):
            # (the longest prefix that is a number of the kind)
            m = (_INT_RE if d == "int" else _NUM_TEXT).match(txt)
            if d == "int":
                # (a whole number beyond 64 bits is the nearest end of the range)
                return min(max(int(m.group(0)), I64_MIN), I64_MAX) if m else 0
            num = m.group(0) if m else "0"
            return (
                float(num) if d == "double" else decimal_unscaled(_decimal.Decimal(num), dst.scale)
            )
        if d == "int":
            if _INT_RE.fullmatch(txt):
                return int(txt)
            if strict or not _NUM_TEXT.fullmatch(txt) or "e" in txt.lower():
                return None
            return int(_decimal.Decimal(txt))  # (Spark's older mode drops a fraction)
        if d == "decimal":
            if not _NUM_TEXT.fullmatch(txt):
                return None
            return decimal_unscaled(_decimal.Decimal(txt), dst.scale)
        if d == "double":
            special = _DOUBLE_SPECIAL.get(txt.lower())
            if special is not None:
                return special
            if txt[-1:] in ("d", "D", "f", "F"):
                txt = txt[:-1]
            return float(txt) if _NUM_TEXT.fullmatch(txt) else None
        if d == "date":
            day = parse_date_text(txt)
            return None if day is None else (day - _dt.date(1970, 1, 1)).days
        if d == "timestamp":
            ts = parse_timestamp_text(txt)
            return None if ts is None else timestamp_micros(ts)
        if d == "boolean":
            low = txt.lower()
            if low in ("true", "t", "yes", "y", "1"):
                return True
            if low in ("false", "f", "no", "n", "0"):
                return False
            return None
    except (ValueError, ArithmeticError):
        return None
    return None


def _clock_one(s: str) -> int | None:
    ts = parse_clock_text(s)
    return None if ts is None else timestamp_micros(ts)


def _parse_strings(
    a: np.ndarray,
    an: np.ndarray | None,
    dst: SqlType,
    ctx: Ctx,
    strict: bool = False,
    clock: bool = False,
) -> Result:
    """Text cast to ``dst``, each distinct string read once (and kept); NULL where it is
    not a value. ``clock``: a TIMESTAMP read for its time of day (``parse_clock_text``)."""
    m = ctx.memo_for(("parse", dst, ctx.dialect, strict, clock))
    table: dict[int, Any] = m.setdefault("t", {})
    codes = np.asarray(a, dtype=np.int64)
    uniq, inv = np.unique(codes, return_inverse=True)
    strs = ctx.strings.decode(uniq)
    vals = []
    for c, s in zip(uniq.tolist(), strs.tolist(), strict=True):
        if c not in table:
            table[c] = _clock_one(s) if clock else _parse_one(s, dst, ctx.dialect, strict)
        vals.append(table[c])
    bad = np.array([v is None for v in vals], dtype=bool)
    good = [0 if v is None else v for v in vals]
    if dst.kind == "double":
        x = np.array(good, dtype=np.float64).reshape(len(good))
        if dst.bits == 32:
            with np.errstate(over="ignore"):
                x = x.astype(np.float32).astype(np.float64)  # a FLOAT holds single precision
        phys = float_keys(x)
    elif dst.kind == "boolean":
        phys = np.array(good, dtype=bool).reshape(len(good))
    else:
        phys = int_column([int(v) for v in good])
        what = f"CAST to {dst}"
        phys = decimal_checked(phys, dst, what) if dst.kind == "decimal" else phys
        phys = _int_result(phys, dst, what) if dst.kind == "int" else phys
    inv = inv.reshape(-1)
    out = phys[inv]
    nl = bad[inv]
    return out, _or(an, nl if nl.any() else None)


def _clock_text(e: Call, f: Frame, ctx: Ctx) -> Result:
    """Text read as a timestamp for its time of day (``parse_clock_text``: a time alone
    too); NULL where it is neither."""
    a, an = evaluate(e.args[0], f, ctx)
    return _parse_strings(a, an, e.type, ctx, clock=True)


# -- strings -------------------------------------------------------------------------------


def like_regex(pattern: str, escape: str | None, ci: bool) -> re.Pattern[str]:
    """The regular expression of a LIKE pattern (``%`` any run, ``_`` one character)."""
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL | (re.IGNORECASE if ci else 0))


def like_matcher(pattern: str, escape: str | None, ci: bool) -> Any:
    """A function from an ``object`` array of strings to whether each matches ``pattern``:
    Arrow's vectorized LIKE when the escape character is its own (or none), else a regular
    expression per string."""
    if escape == "\\" or (escape is None and "\\" not in pattern):
        try:
            import pyarrow as pa
            import pyarrow.compute as pc

            def arrow(strs: np.ndarray) -> np.ndarray:
                arr = pa.array(strs.tolist(), type=pa.string())
                out = pc.match_like(arr, pattern, ignore_case=ci)
                return np.asarray(out.to_numpy(zero_copy_only=False), dtype=bool)

            return arrow
        except ImportError:
            pass
    rx = like_regex(pattern, escape, ci)
    return lambda strs: np.fromiter(
        (rx.fullmatch(x) is not None for x in strs), dtype=bool, count=len(strs)
    )


def _like(e: Call, f: Frame, ctx: Ctx) -> Result:
    a, an = evaluate(e.args[0], f, ctx)
    pat = e.args[1]
    escape, ci = e.extra
    if isinstance(pat, Lit):
        if pat.value is None:
            return np.zeros(f.n, bool), np.ones(f.n, bool)
        m = ctx.memo_for(("like", e))
        r = ctx.strings.map_codes(a, like_matcher(pat.value, escape, ci), m)
        return r.astype(bool), an
    p, pn = evaluate(pat, f, ctx)
    ss, ps = ctx.strings.decode(a), ctx.strings.decode(p)
    r = np.fromiter(
        (
            like_regex(y, escape, ci).fullmatch(x) is not None
            for x, y in zip(ss.tolist(), ps.tolist(), strict=True)
        ),
        dtype=bool,
        count=f.n,
    )
    return r, _or(an, pn)


def _string_fn(e: Call, f: Frame, ctx: Ctx) -> Result:
    """One-argument string functions and those whose other arguments are constants: run
    once per distinct code (memoized per code when the other arguments are literals)."""
    a, an = evaluate(e.args[0], f, ctx)
    rest = e.args[1:]
    op = e.op
    if all(isinstance(x, Lit) for x in rest):
        consts = [x.value for x in rest]  # type: ignore[attr-defined]
        if any(c is None for c in consts):
            return np.zeros(f.n, np.int64), np.ones(f.n, bool)
        fn = _string_kernel(op, consts, e, ctx)
        m = ctx.memo_for(("sfn", e))
        return ctx.strings.map_codes(a, fn, m), an
    # per-row arguments: one call per distinct (string, args...) combination
    others = [evaluate(x, f, ctx) for x in rest]
    nulls = an
    for _, on in others:
        nulls = _or(nulls, on)
    strs = ctx.strings.decode(a).tolist()
    cols = [
        (ctx.strings.decode(o[0]) if x.type.kind == "string" else o[0]).tolist()
        for o, x in zip(others, rest, strict=True)
    ]
    res = []
    for i in range(f.n):
        consts = [c[i] for c in cols]
        res.append(
            _string_kernel(op, consts, e, ctx, raw=True)(np.array([strs[i]], dtype=object))[0]
        )
    return _typed(res, e.type, ctx), nulls


def _regexp_substr(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``regexp_substr``: the first match, NULL where it is empty or there is none."""
    v, vn = _string_fn(e, f, ctx)
    m = ctx.memo_for(("empty",))
    if "code" not in m:
        m["code"] = int(ctx.strings.encode_list([""])[0])
    return v, _or(vn, v == m["code"])


@functools.lru_cache(maxsize=256)
def java_regex(pattern: str) -> re.Pattern[str]:
    """A Java regular expression (Spark's ``RLIKE`` and ``regexp_*``) as Python's: named
    groups ``(?<name>...)`` are spelled ``(?P<name>...)``; Unicode classes (``\\p{...}``),
    which Python's ``re`` does not read, are refused (``UnsupportedSQL``), as is a pattern
    neither reads."""
    if re.search(r"\\[pP]\{", pattern):
        raise UnsupportedSQL(f"the regular expression {pattern!r} (a Unicode class \\p{{...}})")
    py = re.sub(r"\(\?<([A-Za-z][A-Za-z0-9]*)>", r"(?P<\1>", pattern)
    try:
        # (\d, \w, \s and case folding cover ASCII only in Java: re.ASCII)
        return re.compile(py, re.ASCII)
    except re.error as e:
        raise SQLError(f"invalid regular expression {pattern!r}: {e}") from None


def java_replacement(rep: str, rx: re.Pattern[str]) -> Any:
    """A Java replacement string (``$1``, ``${name}``, a backslash taking the next character
    as it is) as a function of a match, for ``re.sub``."""
    parts: list[tuple[bool, Any]] = []  # (is a group, literal text or the group's number / name)
    lit: list[str] = []
    i = 0

    def flush() -> None:
        if lit:
            parts.append((False, "".join(lit)))
            lit.clear()

    while i < len(rep):
        c = rep[i]
        if c == "\\":
            if i + 1 >= len(rep):
                raise SQLError(f"replacement {rep!r} ends in a backslash")
            lit.append(rep[i + 1])
            i += 2
            continue
        if c != "$":
            lit.append(c)
            i += 1
            continue
        m = re.match(r"\$(?:\{([A-Za-z][A-Za-z0-9]*)\}|(\d+))", rep[i:])
        if m is None:
            raise SQLError(f"replacement {rep!r}: a $ without a group")
        flush()
        if m.group(1) is not None:
            if m.group(1) not in rx.groupindex:
                raise SQLError(f"replacement {rep!r}: no group named {m.group(1)}")
            parts.append((True, m.group(1)))
        else:
            # Java takes as many digits as still name a group of the pattern
            digits = m.group(2)
            k = 1
            while k < len(digits) and int(digits[: k + 1]) <= rx.groups:
                k += 1
            if int(digits[:k]) > rx.groups:
                raise SQLError(f"replacement {rep!r}: no group {digits[:k]}")
            parts.append((True, int(digits[:k])))
            lit.append(digits[k:])
        i += len(m.group(0))
    flush()

    def sub(m: re.Match[str]) -> str:
        return "".join((m.group(v) or "") if grp else v for grp, v in parts)

    return sub


def _typed(vals: list[Any], t: SqlType, ctx: Ctx) -> np.ndarray:
    if t.kind == "string":
        return ctx.strings.encode_list(vals)
    return np.array(vals, dtype=np.int64).reshape(len(vals))


def _substr(s: str, pos: int, length: int | None, dialect: str = "spark") -> str:
    """SQL's 1-based substring; a negative position counts from the end. Position 0 is the
    first character in Spark and the place before it in SQLite."""
    n = len(s)
    if dialect == "sqlite":
        return _sqlite_substr(s, pos, length)
    if pos > 0:
        start = pos - 1
    elif pos < 0:
        start = n + pos
    else:
        start = 0 if dialect == "spark" else -1
    end = n if length is None else start + length
    start = max(start, 0)
    end = min(end, n)
    return s[start:end] if end > start else ""


_ASCII_LOWER = "abcdefghijklmnopqrstuvwxyz"
_ASCII_UPPER = _ASCII_LOWER.upper()


def _sqlite_substr(s: str, pos: int, length: int | None) -> str:
    """SQLite's ``substr``: position 0 is before the first character, a negative position
    counts from the end, and a negative length takes the characters before the position."""
    n = len(s)
    p1, p2 = pos, (1 << 31) if length is None else length
    back = p2 < 0
    if back:
        p2 = -p2
    if p1 < 0:
        p1 += n
        if p1 < 0:
            p2 = max(p2 + p1, 0)
            p1 = 0
    elif p1 > 0:
        p1 -= 1
    elif p2 > 0:
        p2 -= 1
    if back:
        p1 -= p2
        if p1 < 0:
            p2 += p1
            p1 = 0
    p2 = max(min(p2, n - p1), 0)
    return s[p1 : p1 + p2]


def _string_result(vals: np.ndarray, t: SqlType, ctx: Ctx) -> np.ndarray:
    """A per-string kernel's raw results (an ``object`` array) as the column ``t`` holds."""
    if t.kind == "boolean":
        return np.asarray(vals, dtype=bool)
    return _typed(vals.tolist(), t, ctx)


def _arrow_strings(s: np.ndarray) -> Any:
    """An ``object`` array of ``str`` as an Arrow string array (numpy's object path: the
    plain one costs over a microsecond a string)."""
    import pyarrow as pa

    return pa.array(s, type=pa.string(), from_pandas=True)


def leading_slice(op: str, consts: list[Any], dialect: str | None) -> tuple[int, int | None] | None:
    """``substr(s, pos[, len])`` / ``left(s, len)`` with constant arguments, when counted
    from the first character with no negative length, as the code points ``(start,
    stop)`` of Arrow's slice (``stop`` None: to the end); None for the others (a position
    from the end, a negative length). Position 0 is the first character in Spark's
    dialect (``dialect`` None: not known, so not taken)."""
    ln: int | None
    if op == "left":
        pos, ln = 1, max(int(consts[0]), 0)
    else:
        pos = int(consts[0])
        ln = int(consts[1]) if len(consts) > 1 else None
    if pos == 0 and dialect == "spark":
        pos = 1  # (Spark: position 0 is the first character)
    if pos < 1 or (ln is not None and ln < 0):
        return None
    return pos - 1, None if ln is None else pos - 1 + ln


def _arrow_string_kernel(op: str, consts: list[Any], e: Call, ctx: Ctx) -> Any:
    """``_string_kernel``'s function done by one Arrow kernel over all the distinct strings
    at once, for the functions and arguments where Arrow's result is the dialect's (slices
    count code points in both); None for the others."""
    import pyarrow.compute as pc

    strings = ctx.strings
    if op in ("substr", "left"):
        cut = leading_slice(op, consts, ctx.dialect)
        if cut is None:
            return None  # (counted from the end, or backwards: the per-string rules)
        start, stop = cut

        def sliced(s: np.ndarray) -> np.ndarray:
            got = pc.utf8_slice_codeunits(_arrow_strings(s), start=start, stop=stop)
            return strings.encode_arrow(got)

        return sliced
    if op == "length":
        return lambda s: np.asarray(pc.utf8_length(_arrow_strings(s)), dtype=np.int64)
    if op == "reverse":
        return lambda s: strings.encode_arrow(pc.utf8_reverse(_arrow_strings(s)))
    if op in ("starts_with", "ends_with", "contains"):
        fn = {
            "starts_with": pc.starts_with,
            "ends_with": pc.ends_with,
            "contains": pc.match_substring,
        }[op]
        pat = consts[0]
        if not isinstance(pat, str):
            return None
        return lambda s: np.asarray(fn(_arrow_strings(s), pattern=pat), dtype=bool)
    return None


def _string_kernel(op: str, consts: list[Any], e: Call, ctx: Ctx, raw: bool = False) -> Any:
    strings = ctx.strings
    if not raw:
        fast = _arrow_string_kernel(op, consts, e, ctx)
        if fast is not None:
            slow = _string_kernel(op, consts, e, ctx, raw=True)

            def kernel(s: np.ndarray) -> np.ndarray:
                try:
                    return fast(s)
                except UnicodeEncodeError:  # (a lone surrogate: not UTF-8, so not for Arrow)
                    return _string_result(slow(s), e.type, ctx)

            return kernel

    def out(vals: list[Any]) -> np.ndarray:
        if raw:
            arr = np.empty(len(vals), dtype=object)
            arr[:] = vals
            return arr
        return _typed(vals, e.type, ctx)

    if op in ("upper", "lower") and ctx.dialect == "sqlite":
        # SQLite maps the case of ASCII letters only
        table = str.maketrans(
            *((_ASCII_LOWER, _ASCII_UPPER) if op == "upper" else (_ASCII_UPPER, _ASCII_LOWER))
        )
        return lambda s: out([x.translate(table) for x in s])
    if op == "upper":
        return lambda s: out([x.upper() for x in s])
    if op == "lower":
        return lambda s: out([x.lower() for x in s])
    if op == "length":
        return lambda s: out([len(x) for x in s])
    if op == "trim":
        chars = consts[0] if consts else None
        return lambda s: out([x.strip(chars) if chars is not None else x.strip(" ") for x in s])
    if op == "ltrim":
        return lambda s: out([x.lstrip(consts[0] if consts else " ") for x in s])
    if op == "rtrim":
        return lambda s: out([x.rstrip(consts[0] if consts else " ") for x in s])
    if op == "substr":
        pos = int(consts[0])
        ln = int(consts[1]) if len(consts) > 1 else None
        return lambda s: out([_substr(x, pos, ln, ctx.dialect) for x in s])
    if op == "replace":
        old, new = consts[0], consts[1] if len(consts) > 1 else ""
        return lambda s: out([x.replace(old, new) if old else x for x in s])
    if op == "reverse":
        return lambda s: out([x[::-1] for x in s])
    if op == "left":
        k = max(int(consts[0]), 0)
        return lambda s: out([x[:k] for x in s])
    if op == "right":
        k = int(consts[0])
        return lambda s: out([x[max(len(x) - k, 0) :] if k > 0 else "" for x in s])
    if op == "repeat":
        k = max(int(consts[0]), 0)
        return lambda s: out([x * k for x in s])
    if op == "rlike":
        rx = java_regex(consts[0])
        return lambda s: np.array([rx.search(x) is not None for x in s], dtype=bool)
    if op == "numeric_text":
        kind = int if consts[0] == "int" else float
        return lambda s: np.array([isinstance(sqlite_number(x), kind) for x in s], dtype=bool)
    if op == "regexp_replace":
        rx = java_regex(consts[0])
        rep = java_replacement(consts[1], rx)
        return lambda s: out([rx.sub(rep, x) for x in s])
    if op == "regexp_extract":
        rx = java_regex(consts[0])
        g = int(consts[1])

        def first(x: str) -> str:
            m = rx.search(x)
            return "" if m is None else m.group(g) or ""

        return lambda s: out([first(x) for x in s])
    if op == "regexp_count":
        rx = java_regex(consts[0])

        def finds(x: str) -> int:
            # Java's find loop: after an empty match the next search starts one further on
            # (Python's finditer would try a longer match at the same place first)
            n, at = 0, 0
            while at <= len(x):
                m = rx.search(x, at)
                if m is None:
                    break
                n += 1
                at = m.end() + (m.end() == m.start())
            return n

        return lambda s: out([finds(x) for x in s])
    if op == "regexp_substr":
        rx = java_regex(consts[0])

        def whole(x: str) -> str:
            m = rx.search(x)
            return "" if m is None else m.group(0)

        return lambda s: out([whole(x) for x in s])
    if op == "regexp_instr":
        rx = java_regex(consts[0])

        def start(x: str) -> int:
            m = rx.search(x)
            return 0 if m is None else m.start() + 1

        return lambda s: out([start(x) for x in s])
    if op == "soundex":
        return lambda s: out([_soundex(x) for x in s])
    if op == "base64":
        return lambda s: out([_base64_mime(x) for x in s])
    if op == "luhn_check":
        return lambda s: np.array([_luhn(x) for x in s], dtype=bool)
    if op == "initcap":
        # Spark: lower case, then each letter after a space (or at the start) upper case
        return lambda s: out(
            [" ".join(w[:1].upper() + w[1:] for w in x.lower().split(" ")) for x in s]
        )
    if op == "instr":
        sub = consts[0]
        return lambda s: out([x.find(sub) + 1 for x in s])
    if op == "starts_with":
        p = consts[0]
        return lambda s: np.array([x.startswith(p) for x in s], dtype=bool)
    if op == "ends_with":
        p = consts[0]
        return lambda s: np.array([x.endswith(p) for x in s], dtype=bool)
    if op == "contains":
        p = consts[0]
        return lambda s: np.array([p in x for x in s], dtype=bool)
    if op == "lpad" or op == "rpad":
        width = int(consts[0])
        fill = consts[1] if len(consts) > 1 else " "

        def pad(x: str) -> str:
            if width <= len(x):
                return x[: max(width, 0)]
            if not fill:
                return x
            need = width - len(x)
            filler = (fill * (need // len(fill) + 1))[:need]
            return filler + x if op == "lpad" else x + filler

        return lambda s: out([pad(x) for x in s])
    if op == "split_part":
        delim, part = consts[0], int(consts[1])

        def split_part(x: str) -> str:
            pieces = x.split(delim) if delim else [x]
            k = part - 1 if part > 0 else len(pieces) + part
            return pieces[k] if 0 <= k < len(pieces) else ""

        return lambda s: out([split_part(x) for x in s])
    if op == "substring_index":
        delim, count = consts[0], int(consts[1])
        return lambda s: out([_substring_index(x, delim, count) for x in s])
    if op == "translate":
        mapping: dict[int, int | None] = {}
        for i, ch in enumerate(consts[0]):
            # (the first mapping of a character wins; one past the end of ``to`` deletes)
            mapping.setdefault(ord(ch), ord(consts[1][i]) if i < len(consts[1]) else None)
        return lambda s: out([x.translate(mapping) for x in s])
    if op == "ascii":
        return lambda s: out([ord(x[0]) if x else 0 for x in s])
    if op in ("octet_length", "bit_length"):
        k = 8 if op == "bit_length" else 1
        return lambda s: out([k * len(x.encode("utf-8", "surrogatepass")) for x in s])
    if op in ("md5", "sha1", "sha2"):
        name = op if op != "sha2" else f"sha{int(consts[0]) or 256}"
        return lambda s: out(
            [hashlib.new(name, x.encode("utf-8", "surrogatepass")).hexdigest() for x in s]
        )
    if op == "crc32":
        return lambda s: out([zlib.crc32(x.encode("utf-8", "surrogatepass")) for x in s])
    del strings
    raise DataError(f"unknown string function {op}")


#: the digit of each letter A to Z in American Soundex (0: a vowel, 7: H and W, skipped)
_SOUNDEX = "01230127022455012623017202"


def _soundex(x: str) -> str:
    """Spark's ``soundex``: over the UTF-8 bytes, a first byte that is no ASCII letter
    leaves the text as it is; any other byte that is no letter breaks a run of one digit."""
    b = x.encode("utf-8", "surrogatepass")
    if not b:
        return x
    c = b[0] - 32 if 97 <= b[0] <= 122 else b[0]
    if not 65 <= c <= 90:
        return x
    sx = [chr(c), "0", "0", "0"]
    i, last = 1, _SOUNDEX[c - 65]
    for c in b[1:]:
        c = c - 32 if 97 <= c <= 122 else c
        if not 65 <= c <= 90:
            last = "0"
            continue
        code = _SOUNDEX[c - 65]
        if code == "7":
            continue
        if code != "0" and code != last:
            sx[i] = code
            i += 1
            if i > 3:
                break
        last = code
    return "".join(sx)


def _base64_mime(x: str) -> str:
    t = base64.b64encode(x.encode("utf-8", "surrogatepass")).decode("ascii")
    return "\r\n".join(t[i : i + 76] for i in range(0, len(t), 76))


def _luhn(x: str) -> bool:
    """Whether ``x`` is a Luhn number: decimal digits of any script (Java's
    ``Character.isDigit``, by UTF-16 units: beyond U+FFFF none is a digit) whose
    alternately doubled sum from the right is a multiple of 10; empty text is not."""
    if not x:
        return False
    total = 0
    for i, ch in enumerate(reversed(x)):
        if ord(ch) > 0xFFFF or not ch.isdecimal():
            return False
        d = unicodedata.decimal(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _levenshtein(a: str, b: str, limit: int | None = None) -> int:
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    d = prev[-1]
    return -1 if limit is not None and d > limit else d


def _overlay(s: str, r: str, pos: int, ln: int) -> str:
    """Spark's ``overlay``: the text before ``pos``, ``r``, the text from ``pos + ln``
    (``ln`` is ``r``'s length when negative; the sums do not wrap at 32 bits)."""
    if ln < 0:
        ln = len(r)
    return _substr(s, 1, pos - 1) + r + _substr(s, pos + ln, None)


def _conv(num: str, src: int, dst: int) -> str | None:
    """Spark's ``conv``: the digits of ``num`` (spaces around it dropped, a leading ``-``
    negating, reading up to the first character that is no digit of base ``src``) as an
    unsigned 64-bit number, written in base ``|dst|`` (signed when ``dst`` is negative).
    A number past 64 bits raises ``DataError`` (ANSI mode); NULL for a base outside 2 to
    36 or text with no characters."""
    if not 2 <= src <= 36 or not 2 <= abs(dst) <= 36:
        return None
    b = num.strip(" ").encode("utf-8", "surrogatepass")
    if not b:
        return None
    negative = b[:1] == b"-"
    v = 0
    for c in b[1:] if negative else b:
        ch = chr(c)
        d = int(ch, 36) if ch.isascii() and ch.isalnum() else 99
        if d >= src:
            break
        v = v * src + d
        if v >= 2**64:
            raise DataError(f"conv(): {num!r} in base {src} overflows 64 bits")
    signed = v - 2**64 if v >= 2**63 else v
    if negative and dst > 0:
        v = (2**64 - 1) if signed < 0 else (-signed) % 2**64
    if dst < 0 and signed < 0 and not (negative and dst > 0):
        v = (-signed) % 2**64 if signed != -(2**63) else 2**63
        negative = True
    base = abs(dst)
    digits = []
    while True:
        v, d = divmod(v, base)
        digits.append("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[d])
        if not v:
            break
    text = "".join(reversed(digits))
    return "-" + text if negative and dst < 0 else text


_JAVA_SPEC = re.compile(r"%(\d+\$)?([-#+ 0,(<]*)(\d+)?(\.\d+)?([a-zA-Z%])?")

#: a Java format's pieces: text, or (flags, width, precision, conversion); -1: none given
FormatSpec = tuple[str, int, int, str]


@functools.lru_cache(maxsize=256)
def java_format_specs(fmt: str) -> tuple[str | FormatSpec, ...]:
    """The pieces of a ``java.util.Formatter`` pattern ddflow formats: ``%s %d %x %X %o
    %f %e %E %%`` with a width, a precision and the flags ``-`` and ``0``. What Java
    rejects is an ``SQLError``, what it reads otherwise (other conversions and flags,
    argument indexes) ``UnsupportedSQL``."""
    out: list[str | FormatSpec] = []
    at = 0
    while True:
        i = fmt.find("%", at)
        if i < 0:
            if at < len(fmt):
                out.append(fmt[at:])
            return tuple(out)
        if i > at:
            out.append(fmt[at:i])
        m = _JAVA_SPEC.match(fmt, i)
        assert m is not None
        index, flags, width, prec, conv = m.groups()
        if conv is None:
            raise SQLError(f"format {fmt!r}: a % without a conversion")
        if conv not in "sdxXofeE%" or index or set(flags) - set("-0"):
            raise UnsupportedSQL(f"format {fmt!r}: {m.group(0)} (only %s %d %x %X %o %f %e %E %%)")
        w = int(width) if width else -1
        p = int(prec[1:]) if prec else -1
        if ("-" in flags or "0" in flags) and w < 0:
            raise SQLError(f"format {fmt!r}: {m.group(0)} has a flag that needs a width")
        if "-" in flags and "0" in flags:
            raise SQLError(f"format {fmt!r}: {m.group(0)} pads both with zeros and spaces")
        if "0" in flags and conv in "s%":
            raise SQLError(f"format {fmt!r}: {m.group(0)} pads text with zeros")
        if p >= 0 and conv in "dxXo%":
            raise SQLError(f"format {fmt!r}: {m.group(0)} has a precision")
        out.append((flags, w, p, conv))
        at = m.end()


def _java_decimal_text(unscaled: int, scale: int) -> str:
    """Java's ``BigDecimal.toString``: plain unless the exponent is below -6 (``0E-8``,
    ``1.2E-7``)."""
    digits = str(abs(unscaled))
    sign = "-" if unscaled < 0 else ""
    adjusted = len(digits) - 1 - scale
    if scale >= 0 and adjusted >= -6:
        if scale == 0:
            return sign + digits
        digits = digits.rjust(scale + 1, "0")
        return f"{sign}{digits[:-scale]}.{digits[-scale:]}"
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mant}E{'+' if adjusted > 0 else ''}{adjusted}"


_WIDE = _decimal.Context(prec=2000, Emax=10**6, Emin=-(10**6))


def _java_float_text(x: float, conv: str, prec: int) -> str:
    """``%f`` / ``%e`` of a double as Java writes it: its shortest decimal digits rounded
    half up at the precision (6 by default)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    p = 6 if prec < 0 else prec
    d = _decimal.Decimal(repr(x))
    quantum = _decimal.Decimal(1).scaleb(-p)
    if conv == "f":
        return format(d.quantize(quantum, _decimal.ROUND_HALF_UP, _WIDE), "f")
    sign = "-" if d.is_signed() else ""
    d = abs(d)
    e = 0 if d == 0 else d.adjusted()
    m = d.scaleb(-e, _WIDE).quantize(quantum, _decimal.ROUND_HALF_UP, _WIDE)
    if m >= 10:
        e += 1
        m = d.scaleb(-e, _WIDE).quantize(quantum, _decimal.ROUND_HALF_UP, _WIDE)
    return f"{sign}{format(m, 'f')}e{'+' if e >= 0 else '-'}{abs(e):02d}"


def _java_format(specs: tuple[str | FormatSpec, ...], types: list[SqlType], vals: list[Any]) -> str:
    """``String.format`` of ``vals`` (Python values of ``types``; None for NULL)."""
    out: list[str] = []
    k = 0
    for sp in specs:
        if isinstance(sp, str):
            out.append(sp)
            continue
        flags, width, prec, conv = sp
        v = None
        if conv == "%":
            text = "%"
        else:
            v, t = vals[k], types[k]
            k += 1
            text = _format_one(v, t, conv, prec, flags)
        if conv in "XE":
            text = text.upper()
        if len(text) < width:
            pad = width - len(text)
            if "-" in flags:
                text += " " * pad
            elif (
                "0" in flags
                and v is not None
                and conv != "s"
                and (conv not in "feE" or math.isfinite(v))
            ):
                neg = text.startswith("-")
                text = ("-" if neg else "") + "0" * pad + text[neg:]
            else:
                text = " " * pad + text
        out.append(text)
    return "".join(out)


def _format_one(v: Any, t: SqlType, conv: str, prec: int, flags: str) -> str:
    if v is None:
        text = "null"  # (Java cuts it at the precision, whatever the conversion)
        return text[:prec] if prec >= 0 else text
    if conv == "s":
        if t.kind == "string":
            text = v
        elif t.kind == "boolean":
            text = "true" if v else "false"
        elif t.kind == "double":
            if math.isnan(v) or math.isinf(v):
                text = "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
            elif v == 0:
                text = "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
            else:
                text = _java_double_text(v, t.bits)
        elif t.kind == "decimal":
            text = _java_decimal_text(int(v), t.scale)
        else:
            text = str(int(v))  # (an integer; a DATE's days, a TIMESTAMP's microseconds)
    elif conv in "dxXo":
        if t.kind not in ("int", "date", "timestamp"):
            raise DataError(f"format_string(): %{conv} cannot format a {t}")
        n = int(v)
        if conv == "d":
            text = str(n)
        else:
            bits = {"date": 32, "timestamp": 64}.get(t.kind, t.bits)
            text = format(n % (1 << bits), "o" if conv == "o" else "x")
    else:
        if t.kind != "double":
            raise DataError(f"format_string(): %{conv} cannot format a {t}")
        text = _java_float_text(v, "f" if conv == "f" else "e", prec)
    if conv == "s" and prec >= 0:
        text = text[:prec]
    return text


def _format_number(x: Any, t: SqlType, d: int) -> str | None:
    """Spark's ``format_number(x, d)``: ``x`` rounded half to even at ``d`` places (of a
    DOUBLE: its exact binary value; its shortest digits when they fit the places), in
    groups of three digits; NULL for a negative ``d``."""
    if d < 0:
        return None
    q = _decimal.Decimal(1).scaleb(-d)
    if t.kind == "int":
        return format(int(x), ",") + ("." + "0" * d if d else "")
    if t.kind == "decimal":
        val = _decimal.Decimal(int(x)).scaleb(-t.scale, _WIDE)
    else:
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "\u221e" if x > 0 else "-\u221e"
        short = _decimal.Decimal(repr(x))
        exact = -short.as_tuple().exponent <= d  # type: ignore[operator]
        val = short if exact else _decimal.Decimal(x)
    return format(val.quantize(q, _decimal.ROUND_HALF_EVEN, _WIDE), ",f")


def _substring_index(x: str, delim: str, count: int) -> str:
    """Spark's ``substring_index``: the text before the ``count``-th occurrence of
    ``delim`` (after it, counting from the end, when ``count`` is negative); occurrences
    are sought one position past the last one found, so they may overlap."""
    if not delim or count == 0:
        return ""
    if count > 0:
        at = -1
        for _ in range(count):
            at = x.find(delim, at + 1)
            if at < 0:
                return x
        return x[:at]
    at = len(x) - len(delim) + 1
    for _ in range(-count):
        at = x.rfind(delim, 0, at - 1 + len(delim)) if at > 0 else -1
        if at < 0:
            return x
    return x[at + len(delim) :]


def _concat_ws(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``concat_ws(sep, ...)``: the non-NULL arguments joined by ``sep`` (NULL where
    ``sep`` is)."""
    (sep, sn), *rest = [evaluate(a, f, ctx) for a in e.args]
    if f.n == 0:
        return np.zeros(0, np.int64), None
    seps = ctx.strings.decode(sep).tolist()
    parts = [
        (ctx.strings.decode(v).tolist(), vn.tolist() if vn is not None else None) for v, vn in rest
    ]
    out = []
    for i in range(f.n):
        got = [p[i] for p, pn in parts if pn is None or not pn[i]]
        out.append(seps[i].join(got))
    return ctx.strings.encode_list(out), sn


def _concat(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``concat``/``||``: NULL if any argument is NULL (``concat_ws`` skips NULLs)."""
    parts = [evaluate(a, f, ctx) for a in e.args]
    nulls: np.ndarray | None = None
    texts = []
    for (v, vn), a in zip(parts, e.args, strict=True):
        nulls = _or(nulls, vn)
        if a.type.kind == "string":
            texts.append(ctx.strings.decode(v))
        else:
            texts.append(ctx.strings.decode(_format_strings(v, vn, a.type, ctx)))
    if f.n == 0:
        return np.zeros(0, np.int64), None
    joined = texts[0]
    for t in texts[1:]:
        joined = joined + t
    return ctx.strings.encode_list(joined.tolist()), nulls


# -- dates ---------------------------------------------------------------------------------


def _days(v: np.ndarray, t: SqlType) -> np.ndarray:
    if t.kind == "timestamp":
        return np.floor_divide(v, 86_400_000_000)
    return v


def _extract(e: Call, f: Frame, ctx: Ctx) -> Result:
    a, an = evaluate(e.args[0], f, ctx)
    t = e.args[0].type
    part = e.extra
    if part in ("hour", "minute", "second", "second_exact"):
        if t.kind != "timestamp":
            return np.zeros(f.n, np.int64), an
        micros = np.mod(a, 86_400_000_000)
        if part == "second_exact":  # (seconds and their fraction, unscaled at scale 6)
            return micros % 60_000_000, an
        if part == "hour":
            return micros // 3_600_000_000, an
        if part == "minute":
            return (micros // 60_000_000) % 60, an
        return (micros // 1_000_000) % 60, an
    days = _days(a, t)
    d64 = days.astype("datetime64[D]")
    if part == "year":
        return d64.astype("datetime64[Y]").astype(np.int64) + 1970, an
    months = d64.astype("datetime64[M]").astype(np.int64)
    if part == "month":
        return months % 12 + 1, an
    if part == "quarter":
        return (months % 12) // 3 + 1, an
    if part == "day":
        return days - _month_start(months) + 1, an
    if part == "dayofweek":  # Spark: 1 = Sunday
        return (days + 4) % 7 + 1, an
    if part == "dayofweek_iso":  # 1 = Monday (1970-01-01 was a Thursday)
        return (days + 3) % 7 + 1, an
    if part == "dayofyear":
        start = d64.astype("datetime64[Y]").astype("datetime64[D]").astype(np.int64)
        return days - start + 1, an
    if part == "week":
        iso = [
            (_dt.date(1970, 1, 1) + _dt.timedelta(days=int(x))).isocalendar()[1]
            for x in days.tolist()
        ]
        return np.array(iso, dtype=np.int64).reshape(len(iso)), an
    raise DataError(f"EXTRACT({part}) is not supported")


_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_ORDINAL = ("1st", "2nd", "3rd", "4th")


def date_pattern(pattern: str) -> tuple[tuple[str, int], ...]:
    """A Java date pattern (``DateTimeFormatter``'s letters, as Spark's ``date_format``
    takes them) cut into ``(letter, count)`` fields and ``("", text)`` literals;
    ``UnsupportedSQL`` for a letter outside y M L d D H h m s S a E Q."""
    out: list[tuple[str, Any]] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":  # quoted text, in which '' is a quote; '' outside is one too
            if pattern.startswith("''", i):
                out.append(("", "'"))
                i += 2
                continue
            text: list[str] = []
            j = i + 1
            while True:
                if j >= n:
                    raise SQLError(f"date pattern {pattern!r}: a quote is not closed")
                if pattern[j] == "'":
                    if pattern.startswith("''", j):
                        text.append("'")
                        j += 2
                        continue
                    break
                text.append(pattern[j])
                j += 1
            out.append(("", "".join(text)))
            i = j + 1
            continue
        if not c.isascii() or not c.isalpha():
            out.append(("", c))
            i += 1
            continue
        j = i
        while j < n and pattern[j] == c:
            j += 1
        k = j - i
        if c not in "yMLdDHhmsSaEQ" or (c in "MLEQ" and k > 4) or (c == "S" and k > 6):
            raise UnsupportedSQL(f"date_format pattern {pattern!r} (the letters {c * k!r})")
        out.append((c, k))
        i = j
    return tuple(out)


#: the pattern letters that are a number, padded to the letters' count
_DATE_NUMBERS: dict[str, Any] = {
    "d": lambda t: t.day,
    "D": lambda t: t.timetuple().tm_yday,
    "H": lambda t: t.hour,
    "h": lambda t: (t.hour + 11) % 12 + 1,
    "m": lambda t: t.minute,
    "s": lambda t: t.second,
}


def _format_date(t: _dt.datetime, tokens: tuple[tuple[str, Any], ...]) -> str:
    parts: list[str] = []
    for c, k in tokens:
        if c == "":
            parts.append(k)
        elif c == "y":  # (y and yyy: the year as it is; yy: its last two digits)
            parts.append(f"{t.year % 100:02d}" if k == 2 else f"{t.year:0{k if k > 3 else 1}d}")
        elif c in "ML":
            m = t.month
            parts.append(
                _MONTHS[m - 1] if k == 4 else _MONTHS[m - 1][:3] if k == 3 else f"{m:0{k}d}"
            )
        elif c in _DATE_NUMBERS:
            parts.append(f"{_DATE_NUMBERS[c](t):0{k}d}")
        elif c == "S":
            parts.append(f"{t.microsecond:06d}"[:k])
        elif c == "a":
            parts.append("AM" if t.hour < 12 else "PM")
        elif c == "E":
            day = _WEEKDAYS[t.weekday()]
            parts.append(day if k == 4 else day[:3])
        else:  # Q
            q = (t.month - 1) // 3 + 1
            parts.append(
                f"{_ORDINAL[q - 1]} quarter" if k == 4 else f"Q{q}" if k == 3 else f"{q:0{k}d}"
            )
    return "".join(parts)


def _date_format(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``date_format``: each distinct date or timestamp (UTC) formatted once."""
    a, an = evaluate(e.args[0], f, ctx)
    if not len(a):
        return np.zeros(0, np.int64), an
    micros = a * 86_400_000_000 if e.args[0].type.kind == "date" else a
    uniq, inv = np.unique(micros, return_inverse=True)
    epoch = _dt.datetime(1970, 1, 1)
    texts = []
    for x in uniq.tolist():
        try:
            texts.append(_format_date(epoch + _dt.timedelta(microseconds=x), e.extra))
        except OverflowError:  # (a NULL row's value, or one Python's datetime cannot hold)
            texts.append("")
    return ctx.strings.encode_list(texts)[inv.reshape(len(a))], an


def _months(days: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 as months since January 1970."""
    return days.astype("datetime64[D]").astype("datetime64[M]").astype(np.int64)


def _month_start(months: np.ndarray) -> np.ndarray:
    """Months since January 1970 as the day (since 1970-01-01) each begins on."""
    return months.astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)


def _last_day(e: Call, f: Frame, ctx: Ctx) -> Result:
    """The last day of each date's month."""
    a, an = evaluate(e.args[0], f, ctx)
    return _month_start(_months(a) + 1) - 1, an


_MICROS = {
    "day": 86_400_000_000,
    "hour": 3_600_000_000,
    "minute": 60_000_000,
    "second": 1_000_000,
    "millisecond": 1_000,
    "microsecond": 1,
}


def _trunc_days(days: np.ndarray, unit: str) -> np.ndarray:
    """Days since 1970-01-01 moved back to the first day of their year, quarter, month or
    week (weeks start on Monday; 1970-01-01 was a Thursday)."""
    if unit == "week":
        return days - (days + 3) % 7
    months = _months(days)
    if unit == "year":
        months = months - months % 12
    elif unit == "quarter":
        months = months - months % 3
    return _month_start(months)


def _date_trunc(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``trunc(date, unit)`` (a DATE) and ``date_trunc(unit, ts)`` (a TIMESTAMP, in UTC)."""
    a, an = evaluate(e.args[0], f, ctx)
    unit = str(e.extra)
    if e.type.kind == "date":
        return _trunc_days(a, unit), an
    step = _MICROS.get(unit)
    if step is not None:
        return a - np.mod(a, step), an
    days = np.floor_divide(a, 86_400_000_000)
    return _trunc_days(days, unit) * 86_400_000_000, an


def add_months_days(days: np.ndarray, months: np.ndarray) -> np.ndarray:
    """Dates plus whole months; a day past the new month's end becomes its last day."""
    d64 = days.astype("datetime64[D]")
    m = d64.astype("datetime64[M]")
    dom = days - m.astype("datetime64[D]").astype(np.int64)
    nm = m.astype(np.int64) + months
    start = _month_start(nm)
    return start + np.minimum(dom, _month_start(nm + 1) - start - 1)


def add_months_micros(ts: np.ndarray, months: np.ndarray) -> np.ndarray:
    """Timestamps (microseconds) plus whole months, the time of day kept
    (``add_months_days`` on their dates)."""
    days = np.floor_divide(ts, 86_400_000_000)
    return add_months_days(days, months) * 86_400_000_000 + (ts - days * 86_400_000_000)


def _date_arith(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``date_add_days(d, n)``, ``add_months(d, n)``, ``ts_add_micros(ts, n)``,
    ``ts_add_months(ts, n)``, ``date_diff(a, b)`` (days from b to a)."""
    (a, an), (b, bn) = _args(e, f, ctx)
    nulls = _or(an, bn)
    op = e.op
    if op == "date_add_days":
        return _int_result(_add(a, b), BIGINT, show(e), nulls), nulls
    if op == "ts_add_micros":
        return _int_result(_add(a, b), BIGINT, show(e), nulls), nulls
    if op == "add_months":
        return add_months_days(a, b), nulls
    if op == "ts_add_months":
        return add_months_micros(a, b), nulls
    if op == "date_diff":
        return _days(a, e.args[0].type) - _days(b, e.args[1].type), nulls
    raise DataError(f"unknown date function {op}")


_DAY = 86_400_000_000
_MONTHS_PER = {"month": 1, "quarter": 3, "year": 12}
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


def _timestampadd(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``timestampadd(unit, n, ts)`` (the unit in ``extra``): microseconds to seconds and
    hours as exact 64-bit sums, days and weeks as a count of days and months to years as
    one of months that each fit 32 bits (Java's ``toIntExact``), months stopping at the
    last day of the month. A result outside the years 1 to 9999, or a count past those
    bounds, raises ``DataError`` (Spark: DATETIME_OVERFLOW)."""
    (ts, tn), (n, nn) = _args(e, f, ctx)
    nulls = _or(tn, nn)
    unit = str(e.extra)
    if nulls is not None:
        n = np.where(nulls, 0, n)
        ts = np.where(nulls, 0, ts)
    step = _MICROS.get(unit, _DAY)
    per = _MONTHS_PER.get(unit, 7 if unit == "week" else 1)
    lo, hi = (
        (I64_MIN // step, I64_MAX // step)
        if unit in _MICROS and unit != "day"
        else (
            _I32_MIN // per,
            _I32_MAX // per,
        )
    )
    bad = (n < lo) | (n > hi)
    out = ts
    if not bad.any():
        if unit in _MONTHS_PER:
            out = add_months_micros(ts, n * per)
        else:
            with np.errstate(over="ignore"):
                delta = n * (step * per)
                out = ts + delta
            # (a sum past 64 bits wraps: its sign is then the other of both terms')
            bad = ((ts >= 0) == (delta >= 0)) & ((out >= 0) != (ts >= 0))
        lo_ts, hi_ts = _SPANS["timestamp"]
        bad = bad | (out < lo_ts) | (out > hi_ts)
    if nulls is not None:
        bad &= ~nulls
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(
            f"timestampadd(): adding {int(n[i])} {unit.upper()} to a TIMESTAMP overflows "
            "(years 1 to 9999)"
        )
    return out, nulls


def _timestampdiff(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``timestampdiff(unit, start, end)`` (the unit in ``extra``): whole units from
    ``start`` to ``end``, toward zero. A day and shorter units (and weeks of days) divide
    the microseconds between them; months, quarters and years count calendar months as
    Java's ``LocalDate.until`` does (``end``'s date moved a day toward ``start`` when its
    time of day is not yet reached, then months by (month * 32 + day) differences)."""
    (a, an), (b, bn) = _args(e, f, ctx)
    nulls = _or(an, bn)
    unit = str(e.extra)
    if unit not in _MONTHS_PER:
        step = _MICROS.get(unit, 7 * _DAY)
        return _trunc_div(b - a, np.full(len(a), step, dtype=np.int64)), nulls
    da, db = np.floor_divide(a, _DAY), np.floor_divide(b, _DAY)
    ta, tb = a - da * _DAY, b - db * _DAY
    db = db - ((db > da) & (tb < ta)) + ((db < da) & (tb > ta))
    ma, mb = _months(da), _months(db)
    pa = ma * 32 + (da - _month_start(ma))
    pb = mb * 32 + (db - _month_start(mb))
    months = _trunc_div(pb - pa, np.full(len(a), 32, dtype=np.int64))
    per = _MONTHS_PER[unit]
    if per != 1:
        months = _trunc_div(months, np.full(len(a), per, dtype=np.int64))
    return months, nulls


# -- math ----------------------------------------------------------------------------------


def _math1(e: Call, f: Frame, ctx: Ctx) -> Result:
    ((a, an),) = _args(e, f, ctx)
    t_in = e.args[0].type
    op = e.op
    if op == "abs":
        if t_in.kind == "double":
            return float_keys(np.abs(float_from_keys(a))), an
        if a.dtype == object or (len(a) and (a == I64_MIN).any()):
            r = narrow(np.abs(_obj(a)))
        else:
            r = np.abs(a)
        return (_int_result(r, e.type, show(e), an) if e.type.kind == "int" else r), an
    if op == "sign":
        x = as_float(a, t_in)
        return float_keys(np.sign(x)) if e.type.kind == "double" else np.sign(x).astype(
            np.int64
        ), an
    if op in ("floor", "ceil") and t_in.kind in ("int",):
        return a, an
    if op in ("floor", "ceil") and t_in.kind == "decimal":
        q = _divided(a, 10**t_in.scale, op == "ceil")
        return rescale(q, 0, e.type.scale) if e.type.kind == "decimal" else q, an
    x = as_float(a, t_in)
    with np.errstate(all="ignore"):
        if op == "floor":
            r = np.floor(x)
        elif op == "ceil":
            r = np.ceil(x)
        elif op == "sqrt":
            bad = x < 0  # NaN in Spark (Java's Math.sqrt), NULL in SQLite
            r = np.sqrt(np.where(bad, 0, x))
            if bad.any():
                if ctx.dialect == "spark":
                    r = np.where(bad, np.nan, r)
                else:
                    an = _or(an, bad)
        elif op == "exp":
            r = np.exp(x)
        elif op == "cbrt":
            r = np.cbrt(x)
            # one Newton step: numpy's root can be an ulp off where Java's is exact
            # (cbrt(-27) is -3.0000000000000004 here, -3 in Spark)
            ok = np.isfinite(r) & (r != 0)
            if ok.any():
                safe = np.where(ok, r, 1.0)
                better = safe - (safe * safe * safe - np.where(ok, x, 1.0)) / (3 * safe * safe)
                r = np.where(ok, better, r)
        elif op in ("ln", "log10", "log2"):
            bad = x <= 0
            fn = {"ln": np.log, "log10": np.log10, "log2": np.log2}[op]
            r = fn(np.where(bad, 1, x))
            if bad.any():
                an = _or(an, bad)
        else:
            raise DataError(f"unknown function {op}")
    if e.type.kind == "int":
        # a DOUBLE's floor / ceil as a BIGINT: NaN is 0 (Java's cast), a value past 64 bits
        # an overflow (ANSI mode)
        nan = np.isnan(r)
        if nan.any():
            r = np.where(nan, 0.0, r)
        past = ~((r >= -(2.0**63)) & (r < 2.0**63))
        if an is not None:
            past &= ~an
        if past.any():
            raise DataError(f"integer overflow in {show(e)}: the result does not fit BIGINT")
        return r.astype(np.int64), an
    if e.type.kind == "decimal":
        return as_decimal(float_keys(r), DOUBLE, e.type.scale), an
    return float_keys(r), an


def _py_div_half_even(x: int, d: int) -> int:
    q, r = divmod(abs(x), d)
    if 2 * r > d or (2 * r == d and q % 2 == 1):
        q += 1
    return -q if x < 0 else q


def rescale_half_even(a: np.ndarray, s_from: int, s_to: int) -> np.ndarray:
    """``rescale`` with halves rounded to the even neighbour (banker's rounding)."""
    if s_to >= s_from:
        return _scale_up(a, s_to - s_from)
    d = 10 ** (s_from - s_to)
    if a.dtype == object or d > I64_MAX or (len(a) and (a == I64_MIN).any()):
        out = np.empty(len(a), dtype=object)
        out[:] = [_py_div_half_even(x, d) for x in _obj(a).tolist()]
        return narrow(out)
    q, r = np.divmod(np.abs(a), d)
    q = q + ((2 * r > d) | ((2 * r == d) & (q % 2 == 1)))
    return np.where(a < 0, -q, q)


def _round(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``round(x, d)``: halves away from zero; ``bround(x, d)``: halves to even (a DOUBLE
    rounded as its shortest decimal form, as Spark rounds a ``BigDecimal`` of it)."""
    a, an = evaluate(e.args[0], f, ctx)
    d = int(e.extra or 0)
    if ctx.dialect == "sqlite":
        d = max(d, 0)  # (SQLite rounds to no fewer than 0 places)
    even = e.op == "bround"
    resc = rescale_half_even if even else rescale
    t_in = e.args[0].type
    if t_in.kind == "int":
        if d >= 0:
            return a, an
        # to a multiple of 10^-d; a result beyond the type raises
        r = _scale_up(resc(a, 0, d), -d)
        if an is not None and r.dtype != object:
            r = np.where(an, 0, r)  # (a NULL row's value is not the result's)
        return _int_result(r, e.type, show(e), an), an
    if t_in.kind == "decimal":
        s = t_in.scale
        if d >= s:
            return rescale(a, s, e.type.scale), an
        r = resc(a, s, d)  # to units of 10^-d
        out = rescale(r, d, e.type.scale) if d >= 0 else _scale_up(r, -d)
        return decimal_checked(out, e.type, show(e), nulls=an), an
    x = float_from_keys(a)
    k = 10.0**d
    with np.errstate(all="ignore"):
        ay = np.abs(x) * k
        y = np.sign(x) * np.floor(ay + 0.5) / k
        # a value whose decimal digits end in 5 just past the place rounds up (1.005 to 1.01,
        # as Spark and SQLite round the shortest decimal form), though its binary value
        # may lie a hair below: those near a half are rounded from their decimal form
        near = np.flatnonzero(np.abs(ay - np.floor(ay) - 0.5) <= 1e-6 * np.maximum(ay, 1.0))
    if len(near):
        mode = _decimal.ROUND_HALF_EVEN if even else _decimal.ROUND_HALF_UP
        y[near] = [_round_text(v, d, mode) for v in x[near].tolist()]
    y = np.where(np.isfinite(x), y, x)
    return float_keys(y), an


def _divided(a: np.ndarray, k: int, up: bool) -> np.ndarray:
    """Integers ``a`` divided by ``k``, rounded down (up with ``up``): in int64, or in
    Python integers for wide values or a ``k`` past int64."""
    if a.dtype == object or k > I64_MAX:
        vals = [(-((-x) // k) if up else x // k) for x in _obj(a).tolist()]
        return narrow(np.array(vals, dtype=object))
    return -np.floor_divide(-a, k) if up else np.floor_divide(a, k)


def _floor_ceil_to(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``floor(x, d)`` / ``ceil(x, d)`` of a DECIMAL: down / up to a multiple of
    ``10^-d`` (``d`` in ``extra``; tens or more for ``d < 0``)."""
    a, an = evaluate(e.args[0], f, ctx)
    s, d = e.args[0].type.scale, int(e.extra)
    if d >= s:
        return rescale(a, s, e.type.scale), an
    q = _divided(a, 10 ** (s - d), e.op == "ceil_to")
    out = rescale(q, d, e.type.scale) if d >= 0 else _scale_up(q, -d)
    return decimal_checked(out, e.type, show(e), nulls=an), an


def _round_text(v: float, d: int, mode: str = _decimal.ROUND_HALF_UP) -> float:
    """``v`` rounded (halves away from zero, or by ``mode``) at ``d`` places of its
    shortest decimal form."""
    if not math.isfinite(v):
        return v
    q = _decimal.Decimal(repr(v)).scaleb(d, EXACT)
    q = q.to_integral_value(mode, EXACT).scaleb(-d, EXACT)
    return float(q)


def _epoch(e: Call, f: Frame, ctx: Ctx) -> Result:
    """Epoch conversions on physical values: ``relabel(x)`` is ``x``'s values under
    another type (a TIMESTAMP's microseconds as BIGINT, a BIGINT's days as DATE);
    ``floor_div(x)`` divides by the constant ``extra`` rounding down (seconds of a
    negative timestamp round toward the past, as in Spark)."""
    v, nl = evaluate(e.args[0], f, ctx)
    if e.op == "relabel":
        span = _SPANS.get(e.type.kind)
        if span is not None and len(v) and (v.min() < span[0] or v.max() > span[1]):
            live = v if nl is None else v[~nl]
            if len(live) and (live.min() < span[0] or live.max() > span[1]):
                raise DataError(f"{e.extra}(): a {e.type} out of range (years 1 to 9999)")
        return v, nl
    if e.op == "trunc_div":  # (toward zero)
        return np.where(v < 0, -np.floor_divide(-v, e.extra), np.floor_divide(v, e.extra)), nl
    return np.floor_divide(v, e.extra), nl


#: the physical values of the years 1 to 9999: days of a DATE, microseconds of a TIMESTAMP
_SPANS = {
    "date": (-719_162, 2_932_896),
    "timestamp": (-62_135_596_800_000_000, 253_402_300_799_999_999),
}


def _one_row(e: Call, f: Frame, ctx: Ctx) -> Result:
    """A scalar subquery's value, given its group's row count: more than one row is an
    error (as in SQL); no row is NULL."""
    (n, nn), (v, vn) = _args(e, f, ctx)
    many = n > 1
    if nn is not None:
        many &= ~nn
    if many.any():
        raise DataError("a scalar subquery returned more than one row")
    return v, vn


def _if(e: Call, f: Frame, ctx: Ctx) -> Result:
    c, a, b = e.args
    return _case(Call("case", (c, a, b), e.type, e.nullable), f, ctx)


# -- more of Spark's scalar functions ------------------------------------------------------


def _all_nulls(parts: list[Result]) -> np.ndarray | None:
    nulls: np.ndarray | None = None
    for _, pn in parts:
        nulls = _or(nulls, pn)
    return nulls


def _live(bad: np.ndarray, nulls: np.ndarray | None) -> np.ndarray:
    """Rows of ``bad`` that are not NULL (a NULL row's values are not looked at)."""
    return bad if nulls is None else bad & ~nulls


def _civil_days(
    y: np.ndarray, m: np.ndarray, d: np.ndarray, nulls: np.ndarray | None, what: str
) -> np.ndarray:
    """Days since 1970-01-01 of the dates ``y-m-d``; ``DataError`` for a row (not NULL)
    whose fields name no date (Spark's ANSI mode), or whose year is outside 1 to 9999."""
    y_ok = (y >= 1) & (y <= 9999)
    m_ok = (m >= 1) & (m <= 12)
    months = np.where(y_ok & m_ok, (y - 1970) * 12 + (m - 1), 0)
    start = _month_start(months)
    length = _month_start(months + 1) - start
    d_ok = (d >= 1) & (d <= length)
    bad = _live(~(y_ok & m_ok & d_ok), nulls)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        yi, mi, di = int(y[i]), int(m[i]), int(d[i])
        if not 1 <= mi <= 12:
            why = f"the month {mi} is not 1 to 12"
        elif not 1 <= yi <= 9999:
            why = f"the year {yi} is outside 1 to 9999"
        else:
            why = f"{_MONTHS[mi - 1]} {di} is not a day of {yi}"
        raise DataError(f"{what}: invalid date ({why})")
    return start + np.where(d_ok, d - 1, 0)


def _make_date(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``make_date(y, m, d)``."""
    parts = _args(e, f, ctx)
    nulls = _all_nulls(parts)
    (y, _), (m, _), (d, _) = parts
    return _civil_days(y, m, d, nulls, "make_date()"), nulls


def _make_timestamp(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``make_timestamp(y, mo, d, h, mi, s)`` in UTC: ``s`` is a DECIMAL(16, 6) (so
    micro-seconds); 60 whole seconds are the next minute, 60 and a fraction an error."""
    parts = _args(e, f, ctx)
    nulls = _all_nulls(parts)
    (y, _), (mo, _), (d, _), (h, _), (mi, _), (sec, _) = parts
    days = _civil_days(y, mo, d, nulls, "make_timestamp()")
    whole = np.floor_divide(sec, 1_000_000)
    bad = _live((h < 0) | (h > 23) | (mi < 0) | (mi > 59) | (whole < 0) | (whole > 60), nulls)
    frac60 = _live((whole == 60) & (sec != 60_000_000), nulls)
    if bad.any() or frac60.any():
        i = int(np.flatnonzero(bad | frac60)[0])
        raise DataError(
            f"make_timestamp(): invalid time {int(h[i])}:{int(mi[i])}:"
            f"{_decimal.Decimal(int(sec[i])).scaleb(-6)} (seconds are 0 to 60)"
        )
    ok = nulls if nulls is None else ~nulls
    micros = days * 86_400_000_000 + h * 3_600_000_000 + mi * 60_000_000 + sec
    return (micros if ok is None else np.where(ok, micros, 0)), nulls


def _months_between(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``months_between(a, b)``: whole months when the days of the month are equal or
    both are the last; else the months plus the days and seconds (of the day, whole)
    between them over 31 days; rounded to 8 places unless ``extra`` is False (Spark's,
    from Hive)."""
    (a, an), (b, bn) = _args(e, f, ctx)
    day = 86_400_000_000
    d1, d2 = np.floor_divide(a, day), np.floor_divide(b, day)
    s1, s2 = (a - d1 * day) // 1_000_000, (b - d2 * day) // 1_000_000
    m1, m2 = _months(d1), _months(d2)
    start1, start2 = _month_start(m1), _month_start(m2)
    dom1, dom2 = d1 - start1, d2 - start2
    last = (d1 == _month_start(m1 + 1) - 1) & (d2 == _month_start(m2 + 1) - 1)
    whole = (m1 - m2).astype(np.float64)
    seconds = (dom1 - dom2) * 86_400 + s1 - s2
    diff = whole + seconds / float(31 * 86_400)
    if e.extra:
        diff = np.floor(diff * 1e8 + 0.5) / 1e8
    diff = np.where((dom1 == dom2) | last, whole, diff)
    return float_keys(diff), _or(an, bn)


#: Spark's names of the days of the week (upper case), Monday 0
_DAY_NAMES = {
    **{d[:2].upper(): i for i, d in enumerate(_WEEKDAYS)},
    **{d[:3].upper(): i for i, d in enumerate(_WEEKDAYS)},
    **{d.upper(): i for i, d in enumerate(_WEEKDAYS)},
}


def _next_day(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``next_day(d, day)``: the first date after ``d`` on that day of the week (named by
    two or three letters or in full, in any case); another name is an error, as in
    Spark's ANSI mode."""
    (d, dn), (w, wn) = _args(e, f, ctx)
    nulls = _or(dn, wn)
    m = ctx.memo_for(("next_day", e))
    dow = ctx.strings.map_codes(
        w, lambda s: np.array([_DAY_NAMES.get(x.upper(), -1) for x in s], np.int64), m
    )
    bad = _live(dow < 0, nulls)
    if bad.any():
        name = ctx.strings.decode(w[np.flatnonzero(bad)[:1]])[0]
        raise DataError(f"next_day(): {name!r} is not a day of the week")
    ahead = (dow - (d + 3) % 7 - 1) % 7 + 1
    out = d + ahead
    return (out if nulls is None else np.where(nulls, 0, out)), nulls


def _names_of(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``dayname(d)`` (Mon to Sun) and ``monthname(d)`` (Jan to Dec)."""
    (d, dn) = evaluate(e.args[0], f, ctx)
    if e.op == "dayname":
        names, at = [w[:3] for w in _WEEKDAYS], (d + 3) % 7
    else:
        names, at = [m[:3] for m in _MONTHS], _months(d) % 12
    table = ctx.strings.encode_list(names)
    return table[at], dn


_LN_MAX = 709.782712893384  # (log of the greatest double)
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10
_EXP_P = (
    1.66666666666666019037e-01,
    -2.77777777770155933842e-03,
    6.61375632143793436117e-05,
    -1.65339022054652515390e-06,
    4.13813679705723846039e-08,
)


def _fdlibm_exp(x: np.ndarray) -> np.ndarray:
    """``exp`` as fdlibm computes it (Java's ``StrictMath.exp``, inside its ``cosh`` and
    ``sinh``): ``x = k ln2 + r`` and a rational approximation on ``r``; it differs from
    numpy's in the last place at some points (``e`` itself)."""
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    neg = x < 0
    with np.errstate(all="ignore"):
        k1 = np.where(neg, -1.0, 1.0)
        kn = np.trunc(1.44269504088896338700e00 * x + np.where(neg, -0.5, 0.5))
        k = np.where(ax < 1.5 * math.log(2), k1, kn)
        k = np.where(ax > 0.5 * math.log(2), k, 0.0)
        k = np.where(np.isfinite(k), k, 0.0)
        hi = np.where(ax < 1.5 * math.log(2), x - k1 * _LN2_HI, x - k * _LN2_HI)
        lo = k * _LN2_LO
        hi = np.where(k == 0, x, hi)
        lo = np.where(k == 0, 0.0, lo)
        r = hi - lo
        t = r * r
        p1, p2, p3, p4, p5 = _EXP_P
        c = r - t * (p1 + t * (p2 + t * (p3 + t * (p4 + t * p5))))
        y0 = 1.0 - ((r * c) / (c - 2.0) - r)
        y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
        out = np.where(k == 0, y0, np.ldexp(y, k.astype(np.int64)))
        out = np.where(ax < 2.0**-28, 1.0 + x, out)
        out = np.where(x > 7.09782712893383973096e02, np.inf, out)
        out = np.where(x < -7.45133219101941108420e02, 0.0, out)
    return np.where(np.isnan(x), x, out)


def _sinh(x: np.ndarray) -> np.ndarray:
    """``sinh`` by fdlibm's steps (Java's ``StrictMath``), which round otherwise than
    numpy's in the last place: from ``expm1`` below 22, ``exp`` (halved, squared past
    the overflow of ``exp``) above."""
    ax = np.abs(x)
    h = np.where(x < 0, -0.5, 0.5)
    t = np.expm1(np.minimum(ax, 22.0))
    small = h * (2.0 * t - t * t / (t + 1.0))
    mid = h * (t + t / (t + 1.0))
    w = _fdlibm_exp(0.5 * ax)
    big = np.where(ax < _LN_MAX, h * _fdlibm_exp(ax), (h * w) * w)
    out = np.where(ax < 1.0, small, np.where(ax < 22.0, mid, big))
    return np.where(ax < 2.0**-28, x, out)


def _cosh(x: np.ndarray) -> np.ndarray:
    """``cosh`` by fdlibm's steps (see ``_sinh``)."""
    ax = np.abs(x)
    t = np.expm1(np.minimum(ax, 1.0))
    w = 1.0 + t
    tiny = 1.0 + (t * t) / (w + w)
    e = _fdlibm_exp(np.minimum(ax, 22.0))
    mid = 0.5 * e + 0.5 / e
    h = _fdlibm_exp(0.5 * ax)
    big = np.where(ax < _LN_MAX, 0.5 * _fdlibm_exp(ax), (0.5 * h) * h)
    out = np.where(ax < 0.5 * math.log(2), tiny, np.where(ax < 22.0, mid, big))
    return np.where(np.isnan(x), x, out)


def _tanh(x: np.ndarray) -> np.ndarray:
    """``tanh`` by fdlibm's steps (see ``_sinh``)."""
    ax = np.abs(x)
    m = np.minimum(ax, 22.0)
    t1 = np.expm1(2.0 * m)
    z1 = 1.0 - 2.0 / (t1 + 2.0)
    t2 = np.expm1(-2.0 * m)
    z2 = -t2 / (t2 + 2.0)
    z = np.where(ax >= 22.0, 1.0, np.where(ax >= 1.0, z1, z2))
    out = np.where(x < 0, -z, z)
    return np.where((ax < 2.0**-55) | np.isnan(x), x, out)


_DOUBLE_FNS: dict[str, Any] = {
    "degrees": lambda x: x * 57.29577951308232,  # (Java's Math.toDegrees / toRadians)
    "radians": lambda x: x * 0.017453292519943295,
    "sinh": _sinh,
    "cosh": _cosh,
    "tanh": _tanh,
    "cot": lambda x: 1.0 / np.tan(x),
    "sec": lambda x: 1.0 / np.cos(x),
    "csc": lambda x: 1.0 / np.sin(x),
    "rint": np.rint,
    # (Spark adds 0.0 to both: -0.0 is 0.0 there)
    "atan2": lambda y, x: np.arctan2(y + 0.0, x + 0.0),
    "hypot": np.hypot,
}


def _double_fn(e: Call, f: Frame, ctx: Ctx) -> Result:
    """Functions of DOUBLEs (``_DOUBLE_FNS``) and ``nanvl(a, b)``: ``b`` where ``a`` is
    NaN (NULL where ``a`` is NULL, whatever ``b``)."""
    parts = _args(e, f, ctx)
    xs = [float_from_keys(v) for v, _ in parts]
    if e.op == "nanvl":
        (_, an), (_, bn) = parts
        nan = np.isnan(xs[0])
        if an is not None:
            nan &= ~an
        nulls = an if bn is None else _or(an, nan & bn)
        return float_keys(np.where(nan, xs[1], xs[0])), nulls
    with np.errstate(all="ignore"):
        r = _DOUBLE_FNS[e.op](*xs)
    return float_keys(np.asarray(r, dtype=np.float64)), _all_nulls(parts)


_FACTORIALS = np.array([math.factorial(i) for i in range(21)], dtype=np.int64)


def _factorial(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``factorial(n)``: NULL outside 0 to 20 (21! leaves a BIGINT)."""
    a, an = evaluate(e.args[0], f, ctx)
    out = (a < 0) | (a > 20)
    return _FACTORIALS[np.where(out, 0, a)], _or(an, out)


_BELOW_2_63 = float(2**63 - 1024)  # (the greatest double below 2^63)


def _width_bucket(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``width_bucket(v, lo, hi, n)``: which of ``n`` equal buckets from ``lo`` to ``hi``
    holds ``v`` (0 before them, ``n + 1`` past them; ``lo > hi`` counts down); NULL for
    ``n <= 0``, a NaN value, equal or unbounded ends (Spark's rules)."""
    parts = _args(e, f, ctx)
    v, lo, hi = (float_from_keys(x) for x, _ in parts[:3])
    n = parts[3][0]
    nulls = _or(
        _all_nulls(parts),
        (n <= 0) | (n == I64_MAX) | np.isnan(v) | (lo == hi) | ~np.isfinite(lo) | ~np.isfinite(hi),
    )
    lower, upper = np.minimum(lo, hi), np.maximum(lo, hi)
    nf = n.astype(np.float64)
    with np.errstate(all="ignore"):
        up = nf * (v - lower) / (upper - lower)
        down = nf * (upper - v) / (upper - lower)
    inner = np.where(lo < hi, up, down)
    inner = np.where(np.isnan(inner), 0.0, np.trunc(np.clip(inner, -_BELOW_2_63, _BELOW_2_63)))
    k = inner.astype(np.int64) + 1
    past = np.where(n == I64_MAX, 0, n + 1)
    asc = np.where(v < lower, 0, np.where(v >= upper, past, k))
    desc = np.where(v > upper, 0, np.where(v <= lower, past, k))
    out = np.where(lo < hi, asc, desc)
    return (out if nulls is None else np.where(nulls, 0, out)), nulls


def _bitwise(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``&``, ``|``, ``^``, ``~`` on two's complement integers (values of a narrower type
    are held sign-extended, so their results stay in range)."""
    parts = _args(e, f, ctx)
    nulls = _all_nulls(parts)
    if e.op == "bitnot":
        return np.invert(parts[0][0]), nulls
    a, b = parts[0][0], parts[1][0]
    fn = {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}[e.op]
    return fn(a, b), nulls


def _shift(e: Call, f: Frame, ctx: Ctx) -> Result:
    """Java's shifts: of an INT in 32 bits, a BIGINT in 64, by the count modulo the
    width (``>>`` keeps the sign, ``shiftrightunsigned`` shifts in zeros)."""
    (a, an), (n, nn) = _args(e, f, ctx)
    nulls = _or(an, nn)
    if e.type.bits == 64:
        cnt = (n & 63).astype(np.uint64)
        x = a.astype(np.int64)
        if e.op == "shiftleft":
            r = (x.view(np.uint64) << cnt).view(np.int64)
        elif e.op == "shiftright":
            r = x >> cnt.astype(np.int64)
        else:
            r = (x.view(np.uint64) >> cnt).view(np.int64)
        return r, nulls
    cnt32 = (n & 31).astype(np.uint32)
    x32 = a.astype(np.int32)
    if e.op == "shiftleft":
        r32 = (x32.view(np.uint32) << cnt32).view(np.int32)
    elif e.op == "shiftright":
        r32 = x32 >> cnt32.astype(np.int32)
    else:
        r32 = (x32.view(np.uint32) >> cnt32).view(np.int32)
    return r32.astype(np.int64), nulls


def _bit_count(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``bit_count(x)``: the one bits of ``x`` as a 64-bit two's complement number (Spark
    counts those of any integer widened to a long: ``bit_count(-1)`` is 64 for an INT)."""
    a, an = evaluate(e.args[0], f, ctx)
    return np.bitwise_count(a.astype(np.int64).view(np.uint64)).astype(np.int64), an


def _try_arith(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``try_add`` / ``try_subtract`` / ``try_multiply`` of integers or decimals: NULL
    where the exact result leaves the type's range or digits (ANSI ``+`` raises there)."""
    op = e.op[4:]
    t = e.type
    if t.kind == "decimal":
        v, nulls = _arith_values(Call(op, e.args, t, e.nullable), f, ctx)
        limit = 10**t.precision
        if v.dtype == object:
            bad = np.array([abs(x) >= limit for x in v.tolist()], dtype=bool).reshape(len(v))
        elif t.precision < 19:
            bad = (v >= limit) | (v <= -limit)
        else:
            bad = np.zeros(len(v), dtype=bool)
    else:
        (a, an), (b, bn) = _args(e, f, ctx)
        nulls = _or(an, bn)
        a = a.astype(np.int64) if a.dtype == bool else a
        b = b.astype(np.int64) if b.dtype == bool else b
        v = _add(a, b) if op == "add" else _sub(a, b) if op == "sub" else _mul(a, b)
        lo, hi = t.int_range()
        if v.dtype == object:
            bad = np.array([not lo <= x <= hi for x in v.tolist()], dtype=bool).reshape(len(v))
        else:
            bad = (v < lo) | (v > hi)
    if not bad.any():
        return v, nulls
    if v.dtype == object:
        v = v.copy()
        v[bad] = 0
        v = narrow(v)
    else:
        v = np.where(bad, 0, v)
    return v, _or(nulls, bad)


def _chr(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``chr(n)`` / ``char(n)``: the character ``n mod 256`` (Latin-1); empty for a
    negative ``n``."""
    a, an = evaluate(e.args[0], f, ctx)
    m = ctx.memo_for(("chr",))
    table = m.get("table")
    if table is None:
        table = m["table"] = ctx.strings.encode_list([chr(i) for i in range(256)] + [""])
    return table[np.where(a < 0, 256, a & 255)], an


def _per_distinct(keys: np.ndarray, fn: Any, ctx: Ctx, t: SqlType) -> np.ndarray:
    """``fn`` of each distinct value of ``keys`` (rows of a 2-d array: each distinct row),
    spread back to the rows."""
    if not len(keys):
        return np.zeros(0, np.int64)
    if keys.ndim == 1:
        uniq, inv = np.unique(keys, return_inverse=True)
        vals = [fn(x) for x in uniq.tolist()]
    else:
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        vals = [fn(*x) for x in uniq.tolist()]
    return _typed(vals, t, ctx)[inv.reshape(len(keys))]


def _hex(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``hex(x)``: a BIGINT's 64 bits (two's complement) or a string's UTF-8 bytes as
    upper-case hexadecimal digits."""
    a, an = evaluate(e.args[0], f, ctx)
    if e.args[0].type.kind == "string":
        m = ctx.memo_for(("hex", e))
        return ctx.strings.map_codes(
            a,
            lambda s: ctx.strings.encode_list(
                [x.encode("utf-8", "surrogatepass").hex().upper() for x in s]
            ),
            m,
        ), an
    return _per_distinct(a, lambda x: f"{x & 0xFFFF_FFFF_FFFF_FFFF:X}", ctx, e.type), an


def _space(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``space(n)``: ``n`` spaces (none for ``n <= 0``)."""
    a, an = evaluate(e.args[0], f, ctx)
    if an is not None:
        a = np.where(an, 0, a)
    return _per_distinct(a, lambda n: " " * max(n, 0), ctx, e.type), an


def _find_in_set(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``find_in_set(s, list)``: the 1-based place of ``s`` among the comma-separated
    items of ``list`` (0 when absent, or when ``s`` holds a comma)."""
    (a, an), (b, bn) = _args(e, f, ctx)
    strings = ctx.strings

    def place(x: int, y: int) -> int:
        s, items = strings.decode(np.array([x, y]))
        if "," in s:
            return 0
        parts = items.split(",")
        return parts.index(s) + 1 if s in parts else 0

    return _per_distinct(np.stack([a, b], axis=1), place, ctx, e.type), _or(an, bn)


def _elt(e: Call, f: Frame, ctx: Ctx) -> Result:
    """``elt(n, v1, v2, ...)``: ``v_n``; an ``n`` outside 1 to the count of values is an
    error (Spark's ANSI mode), a NULL ``n`` NULL."""
    (n, nn), *vals = _args(e, f, ctx)
    k = len(vals)
    bad = _live((n < 1) | (n > k), nn)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"elt(): the index {int(n[i])} is out of bounds (1 to {k})")
    at = np.clip(n - 1, 0, k - 1)
    rows = np.arange(f.n)
    out = np.stack([v for v, _ in vals])[at, rows] if f.n else np.zeros(0, np.int64)
    nulls = nn
    if any(vn is not None for _, vn in vals):
        vnull = np.stack([vn if vn is not None else np.zeros(f.n, bool) for _, vn in vals])
        nulls = _or(nulls, vnull[at, rows])
    return out, nulls


def _strict_rows(e: Call, f: Frame, ctx: Ctx, fn: Any) -> Result:
    """``fn`` of the Python values of each distinct row of ``e``'s arguments (strings
    decoded, other arguments their physical integers), for rows where none is NULL;
    ``fn`` answers None for a NULL."""
    parts = _args(e, f, ctx)
    nulls = _all_nulls(parts)
    live = np.ones(f.n, bool) if nulls is None else ~nulls
    out = np.zeros(f.n, np.int64)
    out_null = np.zeros(f.n, bool)
    if live.any():
        keys = np.stack([narrow(v[live]) for v, _ in parts], axis=1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        cols: list[list[Any]] = []
        for j, a in enumerate(e.args):
            col = uniq[:, j]
            cols.append((ctx.strings.decode(col) if a.type.kind == "string" else col).tolist())
        got = [fn(*row) for row in zip(*cols, strict=True)]
        res_null = np.array([g is None for g in got], dtype=bool)
        blank = "" if e.type.kind == "string" else 0
        vals = _typed([blank if g is None else g for g in got], e.type, ctx)
        at = inv.reshape(-1)
        out[live] = vals[at]
        out_null[live] = res_null[at]
    if e.type.kind == "boolean":
        out = out.astype(bool)
    return out, _or(nulls, out_null) if out_null.any() else nulls


def _distinct_calls(e: Call, f: Frame, ctx: Ctx, args: list[Result], fn: Any) -> Result:
    """``fn`` of the Python values of each distinct row of ``args`` (``e``'s last ones:
    strings decoded, DOUBLEs as floats, others their physical integers; None for a NULL),
    once per distinct row; ``fn`` answers None for a NULL."""
    types = [a.type for a in e.args[len(e.args) - len(args) :]]
    n = f.n
    out = np.zeros(n, np.int64)
    out_null = np.zeros(n, bool)
    if n:
        cols, decoded = [], []
        for (v, vn), t in zip(args, types, strict=True):
            u, inv = np.unique(v, return_inverse=True)
            inv = inv.reshape(-1).astype(np.int64)
            if vn is not None:
                inv = np.where(vn, -1, inv)
            cols.append(inv)
            if t.kind == "string":
                decoded.append(ctx.strings.decode(u).tolist())
            elif t.kind == "double":
                decoded.append(float_from_keys(u).tolist())
            else:
                decoded.append(u.tolist())
        rows, at = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
        got = [
            fn(*[None if i < 0 else dec[i] for i, dec in zip(row, decoded, strict=True)])
            for row in rows.tolist()
        ]
        res_null = np.array([g is None for g in got], dtype=bool)
        blank = "" if e.type.kind == "string" else 0
        at = at.reshape(-1)
        out = _typed([blank if g is None else g for g in got], e.type, ctx)[at]
        out_null = res_null[at]
    return out, out_null if out_null.any() else None


def _format_string_fn(e: Call, f: Frame, ctx: Ctx) -> Result:
    specs = e.extra
    types = [a.type for a in e.args[1:]]
    args = _args(e, f, ctx)[1:]
    if not args:
        text = _java_format(specs, [], [])
        return ctx.strings.encode_list([text] * f.n), None
    return _distinct_calls(e, f, ctx, args, lambda *vs: _java_format(specs, types, list(vs)))


def _format_number_fn(e: Call, f: Frame, ctx: Ctx) -> Result:
    (x, xn), (d, dn) = _args(e, f, ctx)
    t = e.args[0].type
    nulls = _or(xn, dn)
    v, vn = _distinct_calls(
        e,
        f,
        ctx,
        [(x, nulls), (d, nulls)],
        lambda a, b: None if a is None else _format_number(a, t, b),
    )
    return v, _or(vn, nulls)


def _levenshtein_fn(e: Call, f: Frame, ctx: Ctx) -> Result:
    return _strict_rows(e, f, ctx, _levenshtein)


def _overlay_fn(e: Call, f: Frame, ctx: Ctx) -> Result:
    return _strict_rows(e, f, ctx, _overlay)


def _conv_fn(e: Call, f: Frame, ctx: Ctx) -> Result:
    return _strict_rows(e, f, ctx, _conv)


def _bin_fn(e: Call, f: Frame, ctx: Ctx) -> Result:
    return _strict_rows(e, f, ctx, lambda n: format(n & 0xFFFF_FFFF_FFFF_FFFF, "b"))


_OPS: dict[str, Any] = {
    "class_map": _class_map,
    "add": _numeric_binary,
    "sub": _numeric_binary,
    "mul": _numeric_binary,
    "div": _numeric_binary,
    "idiv": _numeric_binary,
    "mod": _numeric_binary,
    "pow": _numeric_binary,
    "neg": _neg,
    "eq": _compare,
    "ne": _compare,
    "lt": _compare,
    "le": _compare,
    "gt": _compare,
    "ge": _compare,
    "nseq": _null_safe_eq,
    "and": _and,
    "or": _or_op,
    "not": _not,
    "is_null": _is_null,
    "is_not_null": _is_null,
    "truth": _truth,
    "in": _in_list,
    "between": _between,
    "case": _case,
    "coalesce": _coalesce,
    "nullif": _nullif,
    "if": _if,
    "greatest": _greatest,
    "least": _greatest,
    "cast": _cast,
    "clock_text": _clock_text,
    "try_cast": _try_cast,
    "like": _like,
    "concat": _concat,
    "upper": _string_fn,
    "lower": _string_fn,
    "length": _string_fn,
    "trim": _string_fn,
    "ltrim": _string_fn,
    "rtrim": _string_fn,
    "substr": _string_fn,
    "replace": _string_fn,
    "reverse": _string_fn,
    "left": _string_fn,
    "right": _string_fn,
    "repeat": _string_fn,
    "initcap": _string_fn,
    "rlike": _string_fn,
    "numeric_text": _string_fn,
    "exact_compare": _exact_number_compare,
    "sqlite_key": _sqlite_key,
    "regexp_replace": _string_fn,
    "regexp_extract": _string_fn,
    "regexp_count": _string_fn,
    "regexp_substr": _regexp_substr,
    "regexp_instr": _string_fn,
    "soundex": _string_fn,
    "base64": _string_fn,
    "luhn_check": _string_fn,
    "levenshtein": _levenshtein_fn,
    "overlay": _overlay_fn,
    "conv": _conv_fn,
    "format_string": _format_string_fn,
    "format_number": _format_number_fn,
    "bin": _bin_fn,
    "concat_ws": _concat_ws,
    "last_day": _last_day,
    "date_format": _date_format,
    "date_trunc": _date_trunc,
    "cbrt": _math1,
    "instr": _string_fn,
    "split_part": _string_fn,
    "substring_index": _string_fn,
    "translate": _string_fn,
    "ascii": _string_fn,
    "octet_length": _string_fn,
    "bit_length": _string_fn,
    "md5": _string_fn,
    "sha1": _string_fn,
    "sha2": _string_fn,
    "crc32": _string_fn,
    "lpad": _string_fn,
    "rpad": _string_fn,
    "starts_with": _string_fn,
    "ends_with": _string_fn,
    "contains": _string_fn,
    "extract": _extract,
    "date_add_days": _date_arith,
    "add_months": _date_arith,
    "ts_add_micros": _date_arith,
    "ts_add_months": _date_arith,
    "date_diff": _date_arith,
    "timestampadd": _timestampadd,
    "timestampdiff": _timestampdiff,
    "one_row": _one_row,
    "relabel": _epoch,
    "floor_div": _epoch,
    "trunc_div": _epoch,
    "abs": _math1,
    "sign": _math1,
    "floor": _math1,
    "ceil": _math1,
    "floor_to": _floor_ceil_to,
    "ceil_to": _floor_ceil_to,
    "sqrt": _math1,
    "exp": _math1,
    "ln": _math1,
    "log10": _math1,
    "log2": _math1,
    "round": _round,
    "bround": _round,
    "make_date": _make_date,
    "make_timestamp": _make_timestamp,
    "months_between": _months_between,
    "next_day": _next_day,
    "dayname": _names_of,
    "monthname": _names_of,
    **{name: _double_fn for name in _DOUBLE_FNS},
    "nanvl": _double_fn,
    "factorial": _factorial,
    "width_bucket": _width_bucket,
    "bitand": _bitwise,
    "bitor": _bitwise,
    "bitxor": _bitwise,
    "bitnot": _bitwise,
    "shiftleft": _shift,
    "shiftright": _shift,
    "shiftrightunsigned": _shift,
    "bit_count": _bit_count,
    "try_add": _try_arith,
    "try_sub": _try_arith,
    "try_mul": _try_arith,
    "chr": _chr,
    "hex": _hex,
    "space": _space,
    "find_in_set": _find_in_set,
    "elt": _elt,
}


def predicate_mask(e: Expr, f: Frame, ctx: Ctx) -> np.ndarray:
    """Rows where the predicate ``e`` is TRUE (NULL and FALSE rows are dropped)."""
    v, nl = evaluate(e, f, ctx)
    v = np.asarray(v, dtype=bool)
    if nl is not None:
        v = v & ~nl
    return v
