"""Reducers: what a ``reduce`` computes per key, one small class each.

A reducer maps a key's accumulated input, a sorted list of ``(value, diff)`` with non-zero
diffs, to the key's output. The ``Reduce`` operator (``ddflow.operators.reduce``) decides
*when* to evaluate it (at the interesting times of each key); a reducer says *what* it is:

* ``needs_abelian``: the input diffs must subtract (an abelian group);
* ``keys_only``: output records are the keys themselves (``distinct``, ``threshold``);
  otherwise ``(key, value)``; ``output_values(in_dt, val_layout)`` is the layout of the
  output values and ``output_diffs(in_dt)`` their diff type, when known from the input;
* ``adds_only``: the output only ever receives additions (DD's ``group_solve``, for monoid
  diffs that cannot be subtracted): the reducer proposes updates to add given the input
  and the current output, instead of the desired output;
* ``closure``: evaluate at the closure of new times under join with the key's history
  (interesting times); ``False`` when the new times alone suffice (``SolveMin``);
* ``desired(...)``: the vectorized kernel, over columns for all queried keys at once
  (``vectorized = False`` for reducers that only run per key, such as user logic);
* ``reference(key, input, current)``: the slow, obviously correct form of the same
  reducer, in Python, per key. It runs the reducers that have no kernel, runs a few updates
  of a kernel's reducer (cheaper than the kernel's fixed cost) and, wrapped in
  ``Reference``, checks every kernel (tests). A reducer with a kernel alone (no
  ``reference``) always runs over columns.

Adding a reducer: write a class with these members (subclass ``Reducer``, or
``TotalsReducer`` when the output is a function of a key's total diff, which also gives the
fast path for totally ordered times), then use it with ``arranged.reduce_core(reducer)`` or
a ``Collection`` method that does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ddflow.core.columns import Layout, Leaf, Tup, concat_columns, lex_order
from ddflow.core.diff import INT_DIFF, MINSUM_ZERO, DiffType, MinSumDiff, diff_type_of, narrow
from ddflow.core.errors import DataError, DiffTypeError
from ddflow.operators.count_total import threshold_values

if TYPE_CHECKING:
    from ddflow.engine.operator import Operator

__all__ = [
    "BitFold",
    "Concat",
    "Count",
    "Distinct",
    "Logic",
    "Max",
    "Min",
    "Mode",
    "Quantile",
    "Reducer",
    "Reference",
    "SolveLogic",
    "SolveMin",
    "Threshold",
    "TopK",
    "TotalsReducer",
]

#: a key's accumulated input (or output): ``(value, diff)`` pairs, sorted by value
Group = list[tuple[Any, Any]]
#: the desired output rows of a kernel: ``(query index, value columns, diffs)``
Rows = tuple[np.ndarray, tuple[np.ndarray, ...], Any]


class Reducer:
    """The per-key computation of a ``reduce`` (see the module docstring)."""

    name = "reduce"
    needs_abelian = True
    keys_only = False
    adds_only = False
    closure = True
    vectorized = True
    has_total_path = False

    def check_input(self, in_dt: DiffType, op_name: str) -> None:
        """Raise ``DiffTypeError`` if this reducer cannot take diffs of type ``in_dt``."""
        if self.needs_abelian and not in_dt.abelian:
            raise DiffTypeError(
                f"'{op_name}' needs diffs with subtraction (an abelian group); "
                f"{in_dt.name} is a monoid: use reduce_solve or *_total operators"
            )

    def output_values(self, in_dt: DiffType | None, val_layout: Layout | None) -> Layout | None:
        """The layout of the output values (None: learnt from the first output)."""
        return Tup(()) if self.keys_only else None

    def output_diffs(self, in_dt: DiffType | None) -> DiffType | None:
        """The diff type of the output (None: learnt from the first output)."""
        return INT_DIFF

    def desired(
        self,
        op: Operator,
        nq: int,
        iq: np.ndarray,
        iv: tuple[np.ndarray, ...],
        isum: Any,
        in_dt: DiffType,
    ) -> Rows:
        """The vectorized kernel: from the accumulated input of ``nq`` queries (rows
        ``(query iq, value columns iv, diff sums isum)``, non-zero, sorted by query then
        value), the desired output rows ``(query, value columns, diffs)``."""
        raise NotImplementedError

    def corrections(self, nq: int, want: Rows, have: Rows, out_dt: DiffType) -> Rows:
        """What to emit at the queries' times: the desired output minus the current one,
        per ``(query, value)`` (``adds_only`` reducers override this)."""
        d_q, d_v, d_d = want
        oq, ov, osum = have
        if not len(d_q) and not len(oq):
            return d_q, (), out_dt.empty()
        all_q = np.concatenate([d_q, oq])
        nv = len(d_v) if len(d_q) else len(ov)
        all_v = tuple(
            concat_columns([d_v[k] if len(d_q) else ov[k][:0], ov[k] if len(oq) else d_v[k][:0]])
            for k in range(nv)
        )
        all_d = out_dt.concat([d_d, out_dt.negate(osum)])
        # (two runs, each sorted by query then value: merged by a sort that finds them)
        order = lex_order((all_q,) + all_v, runs=True)
        all_q = all_q[order]
        all_v = tuple(c[order] for c in all_v)
        all_d = out_dt.take(all_d, order)
        gs = (group_starts(all_q, all_v)).nonzero()[0]
        if not len(gs):
            return all_q[:0], (), out_dt.empty()
        sums = out_dt.sum_segments(all_d, gs)
        nz = (~out_dt.zero_mask(sums)).nonzero()[0]
        return all_q[gs[nz]], tuple(c[gs[nz]] for c in all_v), out_dt.take(sums, nz)

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        """The slow form, per key: the desired output for input ``inp`` (or, for
        ``adds_only`` reducers, the updates to add to output ``current``)."""
        raise NotImplementedError

    @property
    def has_reference(self) -> bool:
        """Whether this reducer has its per-key form (a kernel-only reducer does not, and
        then always runs over columns)."""
        return type(self).reference is not Reducer.reference


def group_starts(q: np.ndarray, vals: tuple[np.ndarray, ...]) -> np.ndarray:
    """Flags of the starts of runs of equal ``(q, vals)`` in rows sorted by them."""
    n = len(q)
    flags = np.empty(n, dtype=bool)
    if n == 0:
        return flags
    flags[0] = True
    np.not_equal(q[1:], q[:-1], out=flags[1:])
    for c in vals:
        flags[1:] |= c[1:] != c[:-1]
    return flags


def _firsts(iq: np.ndarray) -> np.ndarray:
    first = np.empty(len(iq), dtype=bool)
    first[0] = True
    np.not_equal(iq[1:], iq[:-1], out=first[1:])
    return first


def _copies(inp: Group, error: str) -> list[Any]:
    """A reference reducer's input as each value repeated its count times, in order
    (``DataError`` with ``error`` for a negative count)."""
    flat: list[Any] = []
    for v, c in inp:
        if c < 0:
            raise DataError(error)
        flat.extend([v] * int(c))
    return flat


def _counts(isum: Any, what: str) -> np.ndarray:
    """A key's accumulated counts as int64, which a multiset's reducer needs: every count
    non-negative and within 64 bits (``DataError`` naming ``what`` otherwise)."""
    counts = np.asarray(isum)
    if counts.dtype == object or (counts < 0).any():
        raise DataError(f"{what} needs non-negative counts that fit 64 bits")
    return counts


def _total(in_dt: DiffType, inp: Group) -> Any:
    total = None
    for _v, d in inp:
        total = in_dt.py_plus(total, d)
    return total


# -- the least / greatest values --------------------------------------------------------------


class Min(Reducer):
    """``(key, least value)`` among values with a non-zero count."""

    name = "min"

    def output_values(self, in_dt: DiffType | None, val_layout: Layout | None) -> Layout | None:
        return val_layout

    def desired(
        self,
        op: Operator,
        nq: int,
        iq: np.ndarray,
        iv: tuple[np.ndarray, ...],
        isum: Any,
        in_dt: DiffType,
    ) -> Rows:
        if not len(iq):
            return iq, (), INT_DIFF.empty()
        pick = (_firsts(iq)).nonzero()[0]
        return iq[pick], tuple(c[pick] for c in iv), np.ones(len(pick), dtype=np.int64)

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        return [(inp[0][0], 1)] if inp else []


class Max(Min):
    """``(key, greatest value)`` among values with a non-zero count."""

    name = "max"

    def desired(
        self,
        op: Operator,
        nq: int,
        iq: np.ndarray,
        iv: tuple[np.ndarray, ...],
        isum: Any,
        in_dt: DiffType,
    ) -> Rows:
        if not len(iq):
            return iq, (), INT_DIFF.empty()
        last = np.empty(len(iq), dtype=bool)
        last[-1] = True
        np.not_equal(iq[1:], iq[:-1], out=last[:-1])
        pick = last.nonzero()[0]
        return iq[pick], tuple(c[pick] for c in iv), np.ones(len(pick), dtype=np.int64)

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        return [(inp[-1][0], 1)] if inp else []


class TopK(Min):
    """The ``k`` least values of each key, each with its count capped to the places left
    (a value counted ``c`` times fills ``c`` places)."""

    name = "top_k"

    def __init__(self, k: int) -> None:
        if int(k) < 1:
            raise ValueError(f"top_k needs k >= 1, got {k!r}")
        self.k = int(k)

    def desired(
        self,
        op: Operator,
        nq: int,
        iq: np.ndarray,
        iv: tuple[np.ndarray, ...],
        isum: Any,
        in_dt: DiffType,
    ) -> Rows:
        if not len(iq):
            return iq, (), INT_DIFF.empty()
        # exclusive running counts within each key pick the k least values
        starts = (_firsts(iq)).nonzero()[0]
        counts = isum  # an int diff column: int64, or Python ints beyond it
        if (counts < 0).any():
            raise DataError("top_k needs non-negative accumulated counts")
        k = self.k
        if counts.dtype == object or int(counts.sum(dtype=np.float64)) >= 2**62:
            counts = counts.astype(object)  # running counts in Python ints: exact
        run = counts.cumsum()
        group_start = starts.repeat(np.diff(np.append(starts, len(iq))))
        before = run - counts - (run[group_start] - counts[group_start])
        keep = (before < k).nonzero()[0]
        take = narrow(np.minimum(counts[keep], k - before[keep]))
        return iq[keep], tuple(c[keep] for c in iv), take

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        out, left = [], self.k
        for v, c in inp:
            if c < 0:
                raise DataError("top_k needs non-negative accumulated counts")
            if left <= 0:
                break
            out.append((v, min(c, left)))
            left -= c
        return out


class Quantile(Min):
    """The values around a fraction of the way through each key's values, counted with
    their multiplicities: ``(value at rank lo, value at rank hi, count)`` per key (each
    value with the input's layout), where
    the key holds ``count`` values in all and ranks count from 0 in ascending order (in
    descending order with ``descending``).

    ``discrete=False`` (a continuous percentile): ``lo`` and ``hi`` are the floor and ceiling
    of ``(count - 1) * fraction``, computed in doubles, so a caller interpolates between the
    two values. ``discrete=True``: both are ``ceil(count * fraction) - 1`` (at least 0), the
    first value whose share of the values at or before it reaches ``fraction``."""

    name = "quantile"

    def __init__(self, fraction: float, *, discrete: bool = False, descending: bool = False):
        if not 0.0 <= float(fraction) <= 1.0:
            raise ValueError(f"a quantile needs a fraction in [0, 1], got {fraction!r}")
        self.fraction = float(fraction)
        self.discrete = discrete
        self.descending = descending

    def output_values(self, in_dt: DiffType | None, val_layout: Layout | None) -> Layout | None:
        if val_layout is None:
            return None  # (learnt from the first output)
        return Tup((val_layout, val_layout, Leaf()))

    def ranks(self, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ranks ``(lo, hi)`` (0-based, ascending) for keys of ``count`` values."""
        count = np.asarray(count, dtype=np.int64)
        if self.discrete:
            lo = np.maximum(np.ceil(count * self.fraction).astype(np.int64) - 1, 0)
            hi = lo
        else:
            pos = (count - 1) * self.fraction
            lo, hi = np.floor(pos).astype(np.int64), np.ceil(pos).astype(np.int64)
        if self.descending:
            lo, hi = count - 1 - lo, count - 1 - hi
        return lo, hi

    def desired(
        self,
        op: Operator,
        nq: int,
        iq: np.ndarray,
        iv: tuple[np.ndarray, ...],
        isum: Any,
        in_dt: DiffType,
    ) -> Rows:
        if not len(iq):
            return iq, (), INT_DIFF.empty()
        counts = _counts(isum, "a quantile")
        starts = (_firsts(iq)).nonzero()[0]
        run = counts.cumsum()  # (running counts over all keys: each key's start is known)
        before = run[starts] - counts[starts]
        total = np.append(before[1:], run[-1]) - before
        lo, hi = self.ranks(total)
        # the row holding rank r of a key is the first whose running count passes it
        at_lo = run.searchsorted(before + lo, side="right")
        at_hi = run.searchsorted(before + hi, side="right")
        vals = tuple(c[at_lo] for c in iv) + tuple(c[at_hi] for c in iv) + (total,)
        return iq[starts], vals, np.ones(len(starts), dtype=np.int64)

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        if not inp:
            return []
        flat = _copies(inp, "a quantile needs non-negative counts that fit 64 bits")
        lo, hi = self.ranks(np.array([len(flat)]))
        return [((flat[int(lo[0])], flat[int(hi[0])], len(flat)), 1)]


class Mode(Min):
    """``(key, most frequent value)``: the value with the greatest count, the least of those
    tied, or with ``greatest`` the greatest of them (so the answer depends on the values
    alone)."""

    name = "mode"

    def __init__(self, *, greatest: bool = False) -> None:
        self.greatest = greatest

    def desired(
        self,
        op: Operator,
        nq: int,
        iq: np.ndarray,
        iv: tuple[np.ndarray, ...],
        isum: Any,
        in_dt: DiffType,
    ) -> Rows:
        if not len(iq):
            return iq, (), INT_DIFF.empty()
        counts = _counts(isum, "a mode")
        starts = (_firsts(iq)).nonzero()[0]
        top = np.maximum.reduceat(counts, starts)
        group = (np.arange(len(starts))).repeat(np.diff(np.append(starts, len(iq))))
        hit = (counts == top[group]).nonzero()[0]
        # rows are sorted by value: the least tied value first, the greatest last
        tied = group[hit]
        pick = hit[_firsts(tied[::-1])[::-1]] if self.greatest else hit[_firsts(tied)]
        return iq[pick], tuple(c[pick] for c in iv), np.ones(len(pick), dtype=np.int64)

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        if not inp:
            return []
        if any(c < 0 for _, c in inp):
            raise DataError("a mode needs non-negative counts that fit 64 bits")
        top = max(c for _, c in inp)
        tied = [v for v, c in inp if c == top]
        return [(tied[-1] if self.greatest else tied[0], 1)]


class BitFold(Min):
    """``(key, the bitwise AND / OR / XOR of its values)`` (``op`` ``"and"``, ``"or"`` or
    ``"xor"``) of int values: a value counted twice counts once for AND and OR and cancels
    itself for XOR (so only values with an odd count are folded)."""

    def __init__(self, op: str) -> None:
        if op not in ("and", "or", "xor"):
            raise ValueError(f"a bitwise fold is 'and', 'or' or 'xor', got {op!r}")
        self.op = op
        self.name = f"bit_{op}"

    def desired(
        self,
        op: Operator,
        nq: int,
        iq: np.ndarray,
        iv: tuple[np.ndarray, ...],
        isum: Any,
        in_dt: DiffType,
    ) -> Rows:
        if not len(iq):
            return iq, (), INT_DIFF.empty()
        if len(iv) != 1 or iv[0].dtype != np.int64:
            raise DataError(f"{self.name} needs one int64 value per record")
        counts = _counts(isum, self.name)
        starts = (_firsts(iq)).nonzero()[0]
        v = iv[0]
        if self.op == "xor":
            out = np.bitwise_xor.reduceat(np.where(counts % 2 == 1, v, 0), starts)
        elif self.op == "and":
            out = np.bitwise_and.reduceat(v, starts)
        else:
            out = np.bitwise_or.reduceat(v, starts)
        return iq[starts], (out,), np.ones(len(starts), dtype=np.int64)

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        if not inp:
            return []
        acc = -1 if self.op == "and" else 0
        for v, c in inp:
            if c < 0:
                raise DataError(f"{self.name} needs non-negative counts that fit 64 bits")
            if self.op == "and":
                acc &= v
            elif self.op == "or":
                acc |= v
            elif c % 2:
                acc ^= v
        return [(acc, 1)]


class Concat(Reducer):
    """``(key, its values' texts joined by sep)``, in the values' order, each as many times
    as its count: values are tuples whose last field is the text (the fields before it
    order them), or texts."""

    name = "concat"
    vectorized = False

    def __init__(self, sep: str) -> None:
        self.sep = sep

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        if not inp:
            return []
        copies = _copies(inp, "a concatenation needs non-negative counts")
        parts = [v[-1] if isinstance(v, tuple) else v for v in copies]
        return [(self.sep.join(parts), 1)]


# -- functions of a key's total diff ----------------------------------------------------------


class TotalsReducer(Reducer):
    """A reducer whose output depends only on each key's total diff (its records' diffs
    summed): ``count``, ``distinct``, ``threshold``. ``of_totals`` gives the output rows of
    one total each; with totally ordered times the ``Reduce`` operator runs these over
    running sums of the input (no interesting times, no per-key history)."""

    needs_abelian = False
    has_total_path = True

    def of_totals(self, op: Operator, in_dt: DiffType, totals: Any) -> Rows:
        """Per total (one per query): the output rows ``(total index, value columns,
        diffs)``, none for zero totals."""
        raise NotImplementedError

    def desired(
        self,
        op: Operator,
        nq: int,
        iq: np.ndarray,
        iv: tuple[np.ndarray, ...],
        isum: Any,
        in_dt: DiffType,
    ) -> Rows:
        if not len(iq):
            return iq, (), INT_DIFF.empty()
        starts = (_firsts(iq)).nonzero()[0]
        totals = in_dt.sum_segments(isum, starts) if len(iv) else isum
        rows, vals, diffs = self.of_totals(op, in_dt, totals)
        return iq[starts][rows], vals, diffs


class Count(TotalsReducer):
    """``(key, count)`` for every key with a non-zero count (the count is the total diff,
    of the input's diff type)."""

    name = "count"

    def output_values(self, in_dt: DiffType | None, val_layout: Layout | None) -> Layout | None:
        return None if in_dt is None else in_dt.value_layout()

    def of_totals(self, op: Operator, in_dt: DiffType, totals: Any) -> Rows:
        ok = (~in_dt.zero_mask(totals)).nonzero()[0]
        return ok, in_dt.value_columns(in_dt.take(totals, ok)), np.ones(len(ok), dtype=np.int64)

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        total = _total(in_dt, inp)
        return [] if in_dt.py_is_zero(total) else [(total, 1)]


class Distinct(TotalsReducer):
    """Each key with a non-zero count, once."""

    name = "distinct"
    needs_abelian = True
    keys_only = True

    def of_totals(self, op: Operator, in_dt: DiffType, totals: Any) -> Rows:
        d = threshold_values(op, in_dt, totals, "distinct", None)
        ok = (d != 0).nonzero()[0]
        return ok, (), d[ok]

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        return [((), 1)] if inp else []


class Threshold(TotalsReducer):
    """Each key with diff ``f(count)`` (none where the count is zero)."""

    name = "threshold"
    keys_only = True

    def __init__(self, f: Callable[[Any], int]) -> None:
        self.f = f

    def of_totals(self, op: Operator, in_dt: DiffType, totals: Any) -> Rows:
        d = threshold_values(op, in_dt, totals, "threshold", self.f)
        ok = (d != 0).nonzero()[0]
        return ok, (), d[ok]

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        total = _total(in_dt, inp)
        if in_dt.py_is_zero(total):
            return []
        r = int(self.f(total))
        return [((), r)] if r else []


# -- monoid diffs: the output only grows --------------------------------------------------------


class SolveMin(Reducer):
    """DD's ``group_solve`` of the least value, for ``MinSum`` diffs: records are keys, and
    the output adds a key's input minimum whenever it is below the output's.

    Only the new times need evaluating, not their closure: every input update at ``s <= t``
    was evaluated at ``s``, so ``out(t) <= in(t)``, and every output is some ``in(s)`` with
    ``s <= t``, so ``out(t) >= in(t)``. Against the new updates and the output: O(batch).
    """

    name = "reduce_solve"
    needs_abelian = False
    keys_only = True
    adds_only = True
    closure = False

    def check_input(self, in_dt: DiffType, op_name: str) -> None:
        if not isinstance(in_dt, MinSumDiff):
            raise DiffTypeError(
                f"'{op_name}' (reduce_solve of the least value) needs MinSum diffs, "
                f"got {in_dt.name}"
            )

    def output_diffs(self, in_dt: DiffType | None) -> DiffType | None:
        return in_dt

    def desired(
        self,
        op: Operator,
        nq: int,
        iq: np.ndarray,
        iv: tuple[np.ndarray, ...],
        isum: Any,
        in_dt: DiffType,
    ) -> Rows:
        if not len(iq):
            return iq, (), np.empty(0, np.int64)
        starts = (_firsts(iq)).nonzero()[0]
        totals = in_dt.sum_segments(isum, starts) if len(iv) else isum
        return iq[starts], (), totals

    def corrections(self, nq: int, want: Rows, have: Rows, out_dt: DiffType) -> Rows:
        # add the input's minimum where it is below the output's (no subtraction)
        d_q, _, d_d = want
        oq, _, osum = have
        cur = np.full(nq, MINSUM_ZERO, dtype=np.int64)
        if len(oq):
            np.minimum.at(cur, oq, osum)
        best = np.full(nq, MINSUM_ZERO, dtype=np.int64)
        if len(d_q):
            np.minimum.at(best, d_q, d_d)
        go = (best < cur).nonzero()[0]
        return go, (), best[go]

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        if not inp:
            return []
        want = inp[0][1]
        have = current[0][1] if current else None
        return [((), want)] if have is None or want.value < have.value else []


# -- user logic: per key only ------------------------------------------------------------------


class Logic(Reducer):
    """User logic ``logic(key, [(value, diff)]) -> [(output value, diff)]`` (``reduce``,
    ``reduce_abelian``): run per key, with output diffs of type ``diff`` (None: learnt from
    the first output)."""

    vectorized = False

    def __init__(
        self,
        logic: Callable[..., Any],
        diff: Any = int,
        name: str = "reduce",
        values: Layout | None = None,
    ) -> None:
        self.logic = logic
        self.diff = diff_type_of(diff) if diff is not None else None
        self.name = name
        self.values = values

    def output_values(self, in_dt: DiffType | None, val_layout: Layout | None) -> Layout | None:
        return self.values  # declared by the caller, or learnt from the first output

    def output_diffs(self, in_dt: DiffType | None) -> DiffType | None:
        return self.diff

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        return list(self.logic(key, inp)) if inp else []


class SolveLogic(Logic):
    """User ``group_solve`` logic ``logic(key, input, output) -> [(value, diff)]``: updates
    that are only ever added (monoid diffs)."""

    needs_abelian = False
    adds_only = True

    def __init__(self, logic: Callable[..., Any], name: str = "reduce_solve") -> None:
        super().__init__(logic, None, name)

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        return list(self.logic(key, inp, current))


class Reference(Reducer):
    """Any reducer run by its slow ``reference`` alone, per key (what tests compare each
    vectorized kernel with)."""

    vectorized = False

    def __init__(self, inner: Reducer) -> None:
        self.inner = inner
        self.name = inner.name
        self.needs_abelian = inner.needs_abelian
        self.keys_only = inner.keys_only
        self.adds_only = inner.adds_only

    def check_input(self, in_dt: DiffType, op_name: str) -> None:
        self.inner.check_input(in_dt, op_name)

    def output_values(self, in_dt: DiffType | None, val_layout: Layout | None) -> Layout | None:
        return self.inner.output_values(in_dt, val_layout)

    def output_diffs(self, in_dt: DiffType | None) -> DiffType | None:
        return self.inner.output_diffs(in_dt)

    def reference(
        self, op: Operator, key: Any, inp: Group, current: Group, in_dt: DiffType
    ) -> Group:
        return self.inner.reference(op, key, inp, current, in_dt)
