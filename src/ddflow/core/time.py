"""Partially ordered times with a least upper bound (join) and greatest lower bound (meet).

Differential dataflow timestamps every update. Two kinds of time exist here:

* ``int``: totally ordered (rounds of input);
* ``Product(outer, inner)``: the product partial order, ``a <= b`` iff
  ``a.outer <= b.outer and a.inner <= b.inner``; nestable (``Product(Product(r, i), j)``).

Internally every time is *flattened* to a fixed-length tuple of ints (outer components first),
and a column of times is an ``int64`` array of shape ``(n, d)``. Because a nested product of
integers orders componentwise, the flat form keeps the order: ``le`` is "all components <=",
``join`` is the componentwise maximum and ``meet`` the componentwise minimum. Lexicographic
order of the flat tuples is a linear extension of the partial order, which is what sorting uses.

``TimeKind`` remembers the nesting so flat times can be turned back into user objects.

Invariant: all times in one worker have one ``TimeKind`` (``TimeError`` otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ddflow.core.errors import TimeError

__all__ = [
    "Product",
    "TimeKind",
    "INT_TIME",
    "advance_by",
    "columns_advance_by",
    "columns_le",
    "time_kind_of",
]


@dataclass(frozen=True, slots=True)
class Product:
    """A pair of times ordered componentwise (the time inside an iterative scope)."""

    outer: Any
    inner: Any

    def less_equal(self, other: Product) -> bool:
        """``self <= other`` in the product order."""
        return _le(self.outer, other.outer) and _le(self.inner, other.inner)

    def join(self, other: Product) -> Product:
        """The least time greater than or equal to both."""
        return Product(_join(self.outer, other.outer), _join(self.inner, other.inner))

    def meet(self, other: Product) -> Product:
        """The greatest time less than or equal to both."""
        return Product(_meet(self.outer, other.outer), _meet(self.inner, other.inner))

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Product):
            return NotImplemented
        return self.less_equal(other)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Product):
            return NotImplemented
        return self.less_equal(other) and self != other

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Product):
            return NotImplemented
        return other.less_equal(self)

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Product):
            return NotImplemented
        return other.less_equal(self) and self != other

    def __repr__(self) -> str:
        return f"({self.outer!r}, {self.inner!r})"


def _le(a: Any, b: Any) -> bool:
    return a.less_equal(b) if isinstance(a, Product) else a <= b


def _join(a: Any, b: Any) -> Any:
    return a.join(b) if isinstance(a, Product) else max(a, b)


def _meet(a: Any, b: Any) -> Any:
    return a.meet(b) if isinstance(a, Product) else min(a, b)


@dataclass(frozen=True, slots=True)
class TimeKind:
    """The nesting shape of a time type: ``None`` for int, else ``(outer_kind, inner_kind)``."""

    shape: Any = None

    @property
    def dim(self) -> int:
        """Number of integer components of a flattened time."""
        return _dim(self.shape)

    @property
    def total(self) -> bool:
        """Whether times of this kind are totally ordered."""
        return self.shape is None

    def flatten(self, t: Any) -> tuple[int, ...]:
        """The flat tuple of a user time; raises ``TimeError`` if ``t`` is of another kind."""
        if self.shape is None and type(t) is int:
            return (t,)  # (an int time: the common case, without the walk below)
        out: list[int] = []
        _flatten(t, self.shape, out)
        return tuple(out)

    def unflatten(self, flat: Any) -> Any:
        """The user time (int or ``Product``) of a flat tuple/row."""
        it = iter(int(x) for x in flat)
        return _unflatten(it, self.shape)

    def minimum(self) -> tuple[int, ...]:
        """The flat form of the least time of this kind (all zeros)."""
        return (0,) * self.dim

    def describe(self) -> str:
        return _describe(self.shape)

    def require_total(self, what: str, instead: str) -> None:
        """Raise ``TimeError`` unless these times are totally ordered: ``what`` (a
        total-order operator) needs them, ``instead`` is its form for any time."""
        if not self.total:
            raise TimeError(
                f"{what} needs totally ordered (int) times; this worker has "
                f"{self.describe()} times: use {instead} instead"
            )


def _dim(shape: Any) -> int:
    return 1 if shape is None else _dim(shape[0]) + _dim(shape[1])


def _flatten(t: Any, shape: Any, out: list[int]) -> None:
    if shape is None:
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
            raise TimeError(f"expected an int time, got {t!r} ({type(t).__name__})")
        out.append(int(t))
        return
    if not isinstance(t, Product):
        raise TimeError(f"expected a Product time of shape {_describe(shape)}, got {t!r}")
    _flatten(t.outer, shape[0], out)
    _flatten(t.inner, shape[1], out)


def _unflatten(it: Any, shape: Any) -> Any:
    if shape is None:
        return next(it)
    outer = _unflatten(it, shape[0])
    return Product(outer, _unflatten(it, shape[1]))


def _describe(shape: Any) -> str:
    return "int" if shape is None else f"Product({_describe(shape[0])}, {_describe(shape[1])})"


def _shape_of(t: Any) -> Any:
    if isinstance(t, Product):
        return (_shape_of(t.outer), _shape_of(t.inner))
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
        raise TimeError(f"a time must be an int or a Product of times, got {t!r}")
    return None


INT_TIME = TimeKind(None)


def time_kind_of(t: Any) -> TimeKind:
    """The ``TimeKind`` of a user time value."""
    return TimeKind(_shape_of(t))


def columns_le(times: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Mask of rows of ``times`` (shape ``(n, d)``) that are ``<= t`` (shape ``(d,)``)."""
    return np.all(times <= t, axis=1)


def columns_advance_by(times: np.ndarray, frontier: np.ndarray) -> np.ndarray:
    """``advance_by`` for a column of times: meet over ``f`` in ``frontier`` of ``join(t, f)``.

    ``frontier`` has shape ``(m, d)``. An empty frontier leaves times unchanged (no future
    time can observe them, so any representative works).
    """
    m = frontier.shape[0]
    if m == 0 or times.shape[0] == 0:
        return times
    if m == 1:
        return np.maximum(times, frontier[0])
    out = np.maximum(times, frontier[0])
    for f in frontier[1:]:
        np.minimum(out, np.maximum(times, f), out=out)
    return out


def advance_by(t: tuple[int, ...], frontier: Any) -> tuple[int, ...]:
    """``advance_by`` for one flat time; ``frontier`` is an iterable of flat times.

    The result compares with every time ``t'`` beyond the frontier exactly as ``t`` does:
    ``t <= t'  iff  advance_by(t, F) <= t'`` for all ``t'`` with some ``f in F``, ``f <= t'``.
    """
    result: tuple[int, ...] | None = None
    for f in frontier:
        j = tuple(max(a, b) for a, b in zip(t, f, strict=True))
        result = j if result is None else tuple(min(a, b) for a, b in zip(result, j, strict=True))
    return t if result is None else result
