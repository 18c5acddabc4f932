"""Frontiers: antichains of times that bound from below all times still to come.

A frontier ``F`` is a set of mutually incomparable times. A time ``t`` is *beyond* ``F``
(not yet complete) when some ``f in F`` has ``f <= t``; every time not beyond ``F`` is
complete. The empty frontier means no time will ever come again (a closed input).

Frontiers are frozen values over flat times (see ``ddflow.core.time``); ``arr`` holds the
elements as an ``int64`` array of shape ``(m, d)`` for vectorized tests over time columns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Antichain"]


def _le(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    if len(a) == 2:
        return a[0] <= b[0] and a[1] <= b[1]
    return all(x <= y for x, y in zip(a, b, strict=True))


@dataclass(frozen=True)
class Antichain:
    """A frozen antichain of flat times (the minimal elements of what it was built from)."""

    elements: tuple[tuple[int, ...], ...]
    dim: int
    arr: np.ndarray = field(compare=False, repr=False, hash=False)

    @staticmethod
    def of(times: Iterable[tuple[int, ...]], dim: int) -> Antichain:
        """The antichain of the minimal elements of ``times``."""
        ts = times if isinstance(times, (list, tuple)) else list(times)
        if len(ts) <= 1:
            one = tuple(tuple(t) for t in ts)
            return Antichain(one, dim, np.array(one, dtype=np.int64).reshape(len(one), dim))
        minimal: list[tuple[int, ...]] = []
        for t in sorted(set(ts)):
            if not any(_le(m, t) for m in minimal):
                minimal.append(t)
        arr = np.array(minimal, dtype=np.int64).reshape(len(minimal), dim)
        return Antichain(tuple(minimal), dim, arr)

    @staticmethod
    def empty(dim: int) -> Antichain:
        return Antichain.of((), dim)

    def is_empty(self) -> bool:
        return not self.elements

    def less_equal(self, t: tuple[int, ...]) -> bool:
        """Whether ``t`` is beyond the frontier (some element ``<= t``)."""
        if self.dim == 1:
            return bool(self.elements) and self.elements[0][0] <= t[0]
        return any(_le(f, t) for f in self.elements)

    def less_than(self, t: tuple[int, ...]) -> bool:
        """Whether some element is strictly less than ``t``."""
        if self.dim == 1:  # (totally ordered: at most one element)
            return bool(self.elements) and self.elements[0][0] < t[0]
        return any(_le(f, t) and f != t for f in self.elements)

    def beyond_mask(self, times: np.ndarray) -> np.ndarray:
        """Mask of rows of ``times`` (``(n, d)``) that are beyond the frontier (not complete)."""
        n = times.shape[0]
        if not self.elements:
            return np.zeros(n, dtype=bool)
        if self.dim == 1:
            # Totally ordered: the antichain has one element.
            return times[:, 0] >= self.arr[0, 0]
        if n <= 2:
            # one or two rows: compared in Python (numpy's per-call cost dominates)
            es = self.elements
            return np.array(
                [any(_le(e, t) for e in es) for t in map(tuple, times.tolist())],
                dtype=bool,
            )
        # column by column: a comparison per element and column costs less than one
        # reduction over a 2-d (or 3-d) comparison, at every size
        cols = [times[:, k] for k in range(self.dim)]
        out: np.ndarray | None = None
        for e in self.elements:
            m = cols[0] >= e[0]
            for k in range(1, self.dim):
                m &= cols[k] >= e[k]
            out = m if out is None else out | m
        assert out is not None
        return out

    def dominates(self, other: Antichain) -> bool:
        """``other <= self``: every element of ``self`` is beyond ``other``."""
        if self.dim == 1:
            if not self.elements:
                return True
            return bool(other.elements) and other.elements[0][0] <= self.elements[0][0]
        return all(other.less_equal(t) for t in self.elements)

    def meet(self, other: Antichain) -> Antichain:
        """The frontier of the union of both (the lower envelope)."""
        if self is other or self.elements == other.elements:
            return self
        if not other.elements:
            return self
        if not self.elements:
            return other
        if all(any(_le(f, g) for f in self.elements) for g in other.elements):
            return self  # every element of other is beyond self
        if all(any(_le(g, f) for g in other.elements) for f in self.elements):
            return other
        return Antichain.of(self.elements + other.elements, self.dim)

    def __repr__(self) -> str:
        return "{" + ", ".join(str(e if self.dim > 1 else e[0]) for e in self.elements) + "}"
