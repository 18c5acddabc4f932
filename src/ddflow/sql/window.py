"""Window functions: each row with values computed over its partition in a given order.

A ``Window`` plan keys every row by its partition (``PARTITION BY`` fields, NULLs as one
partition) and carries, as the value, columns that sort like its ``ORDER BY`` followed by
the whole row. A reduction then recomputes a partition's output rows whenever its rows
change: the reducer (``WindowReducer``) gets each queried partition's rows already in
order, with their multiplicities, and computes every function with numpy over all queried
partitions at once (ranks from the starts of partitions and of runs of peers, frame sums
from prefix sums, frame minima from a sparse table). Its output is the row followed by the
functions' values, so a change to one partition re-emits only that partition's rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ddflow.core.columns import Layout, Leaf, Tup
from ddflow.core.diff import INT_DIFF, DiffType
from ddflow.core.errors import DataError
from ddflow.operators.reducers import Reducer, Rows
from ddflow.sql.aggregate import linear_value, spread_value, sum_component
from ddflow.sql.expr import Col, Ctx, add_months_days, add_months_micros
from ddflow.sql.plan import SPREAD_FUNCS, Months, Window, WinFunc
from ddflow.sql.rows import Field, Frame, mask_words, pack, select_columns
from ddflow.sql.types import I64_MAX, I64_MIN, float_from_keys, float_keys

__all__ = ["WindowReducer", "lower_window"]


def lower_window(plan: Window, lw: Any, env: Any) -> Any:
    from ddflow.sql.lower import sort_columns

    coll = lw.lower(plan.input, env)
    ctx: Ctx = lw.ctx
    in_fields = plan.input.fields
    win = len(in_fields)
    width = win + mask_words(in_fields)
    part = plan.partition
    nsort = 0
    for k in plan.order:
        nsort += 2 if in_fields[k.index].nullable else 1

    def keyed(view: tuple[np.ndarray, ...]) -> Any:
        fr = Frame(view, win)
        n = fr.n
        key = select_columns(view, in_fields, part) if part else (np.zeros(n, dtype=np.int64),)
        sc = sort_columns(fr, in_fields, plan.order, ctx) if plan.order else []
        return tuple(key), (*sc, *view)

    reducer = WindowReducer(plan, nsort, width, ctx)
    out = coll.map(keyed, vectorized=True, name="window_keys").reduce_core(reducer, name="window")
    return out.map(lambda r: r[1], vectorized=True, name="window_rows")


class WindowReducer(Reducer):
    """A partition's rows (in order, with their multiplicities) -> each row followed by
    the values of the window functions (see the module docstring)."""

    name = "window"

    def __init__(self, plan: Window, nsort: int, width: int, ctx: Ctx) -> None:
        self.plan = plan
        self.nsort = nsort
        self.width = width
        self.ctx = ctx
        self.out_fields: tuple[Field, ...] = plan.fields
        self.out_width = len(plan.fields) + mask_words(plan.fields)

    def output_values(self, in_dt: DiffType | None, val_layout: Layout | None) -> Layout | None:
        return Tup(tuple(Leaf() for _ in range(self.out_width)))

    def desired(
        self,
        op: Any,
        nq: int,
        iq: np.ndarray,
        iv: tuple[np.ndarray, ...],
        isum: Any,
        in_dt: DiffType,
    ) -> Rows:
        if not len(iq):
            return iq, (), INT_DIFF.empty()
        counts = np.asarray(isum)
        if counts.dtype == object:
            if any(c < 0 or c > I64_MAX for c in counts.tolist()):
                raise DataError("a window over rows with negative or huge multiplicities")
            counts = counts.astype(np.int64)
        if (counts < 0).any():
            raise DataError("a window over rows with negative multiplicities")
        if (counts != 1).any():
            rep = np.repeat(np.arange(len(iq)), counts)
            iq = iq[rep]
            iv = tuple(c[rep] for c in iv)
        cols = self._values(iq, iv)
        return iq, cols, np.ones(len(iq), dtype=np.int64)

    def _frame_bounds(self, frame: tuple[str, Any, Any], fr: Frame, g: _Group) -> tuple[Any, Any]:
        kind, start, end = frame
        if kind == "range" and any(isinstance(x, Months) for x in (start, end)):
            key = self.plan.order[0]
            stamp = self.plan.input.fields[key.index].type.kind == "timestamp"
            return _month_bounds(frame, fr.val(key.index), fr.null(key.index), key.desc, g, stamp)
        if kind == "range" and any(x not in (None, 0) for x in (start, end)):
            key = self.plan.order[0]
            v = fr.val(key.index)
            if self.plan.input.fields[key.index].type.kind == "double":
                v = float_from_keys(v)  # (offsets of a DOUBLE are floats)
            return _range_bounds(frame, v, fr.null(key.index), key.desc, g)
        return _frame_bounds(frame, g)

    # -- the functions -----------------------------------------------------------------------
    def _values(self, iq: np.ndarray, iv: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        n = len(iq)
        sort = iv[: self.nsort]
        row = iv[self.nsort : self.nsort + self.width]
        in_fields = self.plan.input.fields
        fr = Frame(row, len(in_fields), n)
        idx = np.arange(n, dtype=np.int64)
        # partitions: runs of equal queries
        new_part = np.ones(n, dtype=bool)
        new_part[1:] = iq[1:] != iq[:-1]
        p_start, p_end = _runs(new_part, idx)
        # peers: runs of equal sort columns within a partition
        new_peer = new_part.copy()
        for c in sort:
            if n > 1:
                new_peer[1:] |= c[1:] != c[:-1]
        peer_start, peer_end = _runs(new_peer, idx)
        g = _Group(n, idx, p_start, p_end, new_peer, peer_start, peer_end)
        vals = [fr.val(i) for i in range(len(in_fields))]
        nulls = [fr.null(i) for i in range(len(in_fields))]
        for f, field in zip(self.plan.funcs, self.out_fields[len(in_fields) :], strict=True):
            v, nl = self._one(f, field, fr, g)
            vals.append(v)
            nulls.append(nl)
        return pack(vals, nulls, mask_words(self.out_fields), n)

    def _one(self, f: WinFunc, field: Field, fr: Frame, g: _Group) -> tuple[Any, Any]:
        func = f.func
        pos = g.idx - g.p_start
        size = g.p_end - g.p_start
        if func == "row_number":
            return pos + 1, None
        if func == "rank":
            return g.peer_start - g.p_start + 1, None
        if func == "dense_rank":
            c = np.cumsum(g.new_peer)
            return c - c[g.p_start] + 1, None
        if func == "percent_rank":
            rank = (g.peer_start - g.p_start).astype(np.float64)
            den = np.maximum(size - 1, 1).astype(np.float64)
            return float_keys(np.where(size > 1, rank / den, 0.0)), None
        if func == "cume_dist":
            return float_keys((g.peer_end - g.p_start) / size.astype(np.float64)), None
        if func == "ntile":
            k = f.param
            q, r = size // k, size % k
            big = r * (q + 1)  # the first r buckets hold q + 1 rows
            first = pos // np.maximum(q + 1, 1) + 1
            rest = np.where(q > 0, (pos - big) // np.maximum(q, 1) + r + 1, 0)
            return np.where(pos < big, first, rest), None
        if func in ("lag", "lead"):
            v, nl = fr.val(f.args[0]), fr.null(f.args[0])
            if f.ignore_nulls and nl is not None and f.param:
                j, inside = _nth_value_around(func, f.param, nl, g)
            else:
                j = g.idx + (f.param if func == "lead" else -f.param)
                inside = (j >= g.p_start) & (j < g.p_end)
            jj = np.where(inside, j, g.idx)
            got_nl = nl[jj] if nl is not None else np.zeros(g.n, dtype=bool)
            if len(f.args) > 1:
                dv, dn = fr.val(f.args[1]), fr.null(f.args[1])
                out = np.where(inside, v[jj], dv)
                dnl = dn if dn is not None else np.zeros(g.n, dtype=bool)
                out_nl = np.where(inside, got_nl, dnl)
            else:
                out = v[jj]
                out_nl = got_nl | ~inside
            return out, (out_nl if out_nl.any() else None)
        lo, hi = self._frame_bounds(f.frame, fr, g)
        empty = lo > hi
        if func == "count_star":
            return np.where(empty, 0, hi - lo + 1), None
        a = f.args[0]
        v, nl = fr.val(a), fr.null(a)
        if func in ("first_value", "last_value", "nth_value"):
            if f.ignore_nulls and nl is not None:
                # the first / last / n-th of the frame's non-NULL rows
                where, before = _non_nulls(nl)
                a, b = before[np.minimum(lo, g.n)], before[np.where(empty, lo, hi + 1)]
                k = (
                    a
                    if func == "first_value"
                    else b - 1
                    if func == "last_value"
                    else a + f.param - 1
                )
                ok = ~empty & (k >= a) & (k < b)
                at = where[np.clip(k, 0, max(len(where) - 1, 0))] if len(where) else lo
            else:
                at = (
                    lo
                    if func == "first_value"
                    else hi
                    if func == "last_value"
                    else lo + f.param - 1
                )
                ok = ~empty & (at <= hi)
            jj = np.where(ok, at, 0)
            out_nl = ~ok if nl is None else (~ok | nl[jj])
            return v[jj], (out_nl if out_nl.any() else None)
        present = np.ones(g.n, dtype=np.int64) if nl is None else (~nl).astype(np.int64)
        cnt = _frame_sums(present, lo, hi, empty)
        if func == "count":
            return cnt, None
        if func in ("min", "max"):
            return self._extreme(func, field, v, nl, lo, hi, empty, cnt)
        t = self.plan.input.fields[a].type
        arg = Col(a, t, nl is not None)
        if func in SPREAD_FUNCS:
            # exact sums of the values and their squares over each frame
            kinds = ("xs", "xq", "bad") if t.kind == "double" else ("s", "q")
            sums = [
                _frame_sums(sum_component(kind, arg, v, nl, g.n), lo, hi, empty) for kind in kinds
            ]
            return spread_value(func, t, cnt, *sums)
        if t.kind == "double":
            total = _float_frame_sums(float_from_keys(v), nl, lo, hi, empty, g)
        else:
            x = v if nl is None else np.where(nl, 0, v)
            if x.dtype == bool:
                x = x.astype(np.int64)
            total = _frame_sums(x, lo, hi, empty)
        return linear_value(func, arg, field.type, cnt, total)

    def _extreme(
        self,
        func: str,
        field: Field,
        v: np.ndarray,
        nl: np.ndarray | None,
        lo: np.ndarray,
        hi: np.ndarray,
        empty: np.ndarray,
        cnt: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        none = empty | (cnt == 0)
        if field.type.kind == "string":
            # strings compare by their text: the least / greatest by their rank among
            # these rows' distinct texts
            texts = self.ctx.strings.decode(v)
            if nl is not None:
                texts = texts.copy()
                texts[nl] = ""
            uniq, rank = np.unique(texts, return_inverse=True)
            codes = np.asarray(v)
            first = np.zeros(len(uniq), dtype=np.int64)
            first[rank] = codes
            got = _range_extreme(func, rank.astype(np.int64), nl, lo, hi, none)
            out = first[np.clip(got, 0, max(len(uniq) - 1, 0))] if len(uniq) else got
        elif v.dtype == object:
            out = np.empty(len(v), dtype=object)
            xs = v.tolist()
            skip = nl.tolist() if nl is not None else [False] * len(xs)
            pick = min if func == "min" else max
            for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
                cand = [xs[j] for j in range(a, b + 1) if not skip[j]]
                out[i] = pick(cand) if cand else 0
        else:
            x = v.astype(np.int64) if v.dtype == bool else v
            out = _range_extreme(func, x, nl, lo, hi, none)
            if v.dtype == bool:
                out = out.astype(bool)
        return out, (none if none.any() else None)


class _Group:
    """Where each row (of all queried partitions, in order) stands: its index, its
    partition's first row and end, whether it starts a run of peers, and that run's
    first row and end."""

    __slots__ = ("idx", "n", "new_peer", "p_end", "p_start", "peer_end", "peer_start")

    def __init__(
        self,
        n: int,
        idx: np.ndarray,
        p_start: np.ndarray,
        p_end: np.ndarray,
        new_peer: np.ndarray,
        peer_start: np.ndarray,
        peer_end: np.ndarray,
    ) -> None:
        self.n, self.idx = n, idx
        self.p_start, self.p_end = p_start, p_end
        self.new_peer, self.peer_start, self.peer_end = new_peer, peer_start, peer_end


def _runs(new_run: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows in runs (``new_run`` marks each run's first row): each row's run start and
    run end (one past its last row)."""
    n = len(idx)
    start = np.maximum.accumulate(np.where(new_run, idx, 0))
    last = np.ones(n, dtype=bool)
    last[:-1] = new_run[1:]
    end = np.minimum.accumulate(np.where(last, idx, n - 1)[::-1])[::-1] + 1
    return start, end


def _non_nulls(nl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows that are not NULL, and how many non-NULL rows precede each row position
    (``before[i]``, for ``i`` in ``0..n``)."""
    before = np.zeros(len(nl) + 1, dtype=np.int64)
    np.cumsum(~nl, out=before[1:])
    return np.flatnonzero(~nl), before


def _nth_value_around(
    func: str, k: int, nl: np.ndarray, g: _Group
) -> tuple[np.ndarray, np.ndarray]:
    """``lag`` / ``lead`` skipping NULLs: the row of the ``k``-th non-NULL value before
    (``lag``) or after each row in its partition, and whether there is one."""
    where, before = _non_nulls(nl)
    if func == "lag":
        pos = before[g.idx] - k  # (the non-NULL rows strictly before the row)
        inside = pos >= before[g.p_start]
    else:
        pos = before[g.idx + 1] + k - 1
        inside = pos < before[g.p_end]
    rows = where[np.clip(pos, 0, max(len(where) - 1, 0))] if len(where) else g.idx
    return rows, inside


def _frame_bounds(frame: tuple[str, Any, Any], g: _Group) -> tuple[Any, Any]:
    """The first and last row (inclusive, clipped to the partition) of each row's frame;
    first > last where the frame is empty (RANGE offsets other than 0: ``_range_bounds``)."""
    kind, start, end = frame
    last = g.p_end - 1
    if start is None:
        lo = g.p_start
    elif kind == "range":
        lo = g.peer_start  # (RANGE offsets are only 0: the current row's peers)
    else:
        lo = np.maximum(g.idx + start, g.p_start)
    if end is None:
        hi = last
    elif kind == "range":
        hi = g.peer_end - 1
    else:
        hi = np.minimum(g.idx + end, last)
    lo = np.minimum(lo, g.p_end)  # (a start past the partition: an empty frame)
    return lo, hi


def _range_bounds(
    frame: tuple[str, Any, Any], v: np.ndarray, nl: np.ndarray | None, desc: bool, g: _Group
) -> tuple[np.ndarray, np.ndarray]:
    """Frames ``RANGE BETWEEN`` offsets of the one ORDER BY value ``v``: the rows whose
    value lies within ``[value + start, value + end]`` (in the direction of the order:
    for a descending order, preceding rows hold greater values). A NULL value's frame
    is its peers (the other NULLs), or the partition's edge where unbounded."""
    _, start, end = frame
    lo = np.empty(g.n, dtype=np.int64)
    hi = np.empty(g.n, dtype=np.int64)
    w = v
    if w.dtype.kind == "i":
        span = max(abs(int(w.max())), abs(int(w.min()))) if len(w) else 0
        if span + max(abs(start or 0), abs(end or 0)) >= 2**63:
            w = w.astype(object)  # (exact: the shifted or negated values leave int64)
    if desc:
        w = -w  # (elementwise on Python ints too)
    live = np.ones(g.n, dtype=bool) if nl is None else ~nl
    if w.dtype != object:
        return _range_bounds_sorted(start, end, w, live, g)
    starts = np.flatnonzero(g.idx == g.p_start)
    ends = np.append(starts[1:], g.n)
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        rows = np.arange(s, e)
        ok = live[s:e]
        vals = rows[ok]  # the partition's non-NULL rows: one run, in order
        keys = w[vals]
        if start is None:
            lo[s:e] = s
        else:
            lo[s:e] = g.peer_start[s:e]
            if len(vals):
                lo[vals] = vals[0] + np.searchsorted(keys, keys + start, side="left")
        if end is None:
            hi[s:e] = e - 1
        else:
            hi[s:e] = g.peer_end[s:e] - 1
            if len(vals):
                hi[vals] = vals[0] + np.searchsorted(keys, keys + end, side="right") - 1
    return lo, hi


def _month_bounds(
    frame: tuple[str, Any, Any],
    v: np.ndarray,
    nl: np.ndarray | None,
    desc: bool,
    g: _Group,
    stamp: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """``_range_bounds`` for offsets of calendar months (``Months``; the other edge a month
    offset too, the current row or unbounded) of a DATE (days) or TIMESTAMP (microseconds)
    order value: each row's edge is its own value moved by the months, so the targets are
    computed per row (a month has no fixed length) and searched as fixed offsets are."""
    _, start, end = frame
    v = v.astype(np.int64)
    w = -v if desc else v

    def target(x: Any) -> np.ndarray | None:
        if x is None:
            return None
        if not isinstance(x, Months):  # (the current row: its own value)
            return w
        k = -x.n if desc else x.n  # (a descending order's preceding rows are later)
        by = np.full(len(v), k, np.int64)
        moved = add_months_micros(v, by) if stamp else add_months_days(v, by)
        return -moved if desc else moved

    live = np.ones(g.n, dtype=bool) if nl is None else ~nl
    return _range_bounds_sorted(start, end, w, live, g, (target(start), target(end)))


def _range_bounds_sorted(
    start: Any,
    end: Any,
    w: np.ndarray,
    live: np.ndarray,
    g: _Group,
    targets: tuple[np.ndarray | None, np.ndarray | None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``_range_bounds`` for all partitions at once (numbers that stay in int64 or
    floats): each bound is where ``value + offset`` falls among its partition's non-NULL
    values, found by sorting the values and the targets together, by partition then
    value (a target before equal values for a start, after them for an end). ``targets``:
    each row's start and end value given instead of the offsets (``_month_bounds``)."""
    lo = (g.p_start if start is None else g.peer_start).copy()
    hi = (g.p_end - 1 if end is None else g.peer_end - 1).copy()
    vals = np.flatnonzero(live)  # each partition's non-NULL rows: one run, in order
    nk = len(vals)
    if not nk:
        return lo, hi
    pid = g.p_start[vals]
    kw = w[vals]
    first = np.searchsorted(pid, pid, side="left")  # the partition's first value's rank

    def ranks(target: np.ndarray, flag: int) -> np.ndarray:
        # the number of values before each target: all earlier partitions' and those of
        # its own partition below it (flag -1) or not above it (flag 1)
        order = np.lexsort(
            (
                np.concatenate([np.zeros(nk, np.int8), np.full(nk, flag, np.int8)]),
                np.concatenate([kw, target]),
                np.concatenate([pid, pid]),
            )
        )
        is_key = order < nk
        before: np.ndarray = np.cumsum(is_key) - is_key
        out = np.empty(nk, dtype=np.int64)
        out[order[~is_key] - nk] = before[~is_key]
        return out

    t_start, t_end = (None, None) if targets is None else targets
    if start is not None:
        lo[vals] = vals[first] + ranks(kw + start if t_start is None else t_start[vals], -1) - first
    if end is not None:
        hi[vals] = vals[first] + ranks(kw + end if t_end is None else t_end[vals], 1) - first - 1
    return lo, hi


def _frame_sums(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """The sum of ``x`` over each frame ``[lo, hi]`` (0 for an empty one), exact: in int64
    when no prefix sum can leave it, else in Python ints."""
    n = len(x)
    if x.dtype != object and n:
        big = max(abs(int(x.max())), abs(int(x.min())))
        if big * n >= 2**63:
            x = x.astype(object)
    c = np.zeros(n + 1, dtype=x.dtype if x.dtype == object else np.int64)
    if n:
        c[1:] = np.cumsum(x)
    hi1 = np.where(empty, lo, hi + 1)
    out = c[hi1] - c[np.minimum(lo, n)]
    if out.dtype == object:
        try:
            return np.array(out.tolist(), dtype=np.int64)
        except OverflowError:
            return out
    return out


#: partitions of at most this many rows have their DOUBLE prefix sums made together
_ROW_SPAN = 64


def _float_frame_sums(
    x: np.ndarray, nl: np.ndarray | None, lo: Any, hi: Any, empty: np.ndarray, g: _Group
) -> np.ndarray:
    """DOUBLE sums over frames: a running frame (from the partition's first row) adds its
    values in order; other frames subtract prefix sums within their partition. Infinities
    and NaN are counted apart, as SQL sums them."""
    n = len(x)
    live = ~nl if nl is not None else np.ones(n, dtype=bool)
    ok = np.isfinite(x) & live
    finite = np.where(ok, x, 0.0)
    pinf = (x == np.inf) & live
    ninf = (x == -np.inf) & live
    nan = np.isnan(x) & live
    out = np.zeros(n, dtype=np.float64)
    starts = np.flatnonzero(g.idx == g.p_start)
    ends = np.append(starts[1:], n)
    # each partition's prefix sums, added up in order within the partition (so a running
    # frame's sum is its values added one by one, whatever came before the partition):
    # the partitions of at most _ROW_SPAN rows all at once as the rows of a matrix, the
    # longer ones one by one
    a_all, b_all = lo - g.p_start, np.maximum(hi - g.p_start + 1, lo - g.p_start)
    sizes = ends - starts
    short = sizes <= _ROW_SPAN
    if short.any():
        part_of = np.searchsorted(starts, g.idx, side="right") - 1
        rows = np.flatnonzero(short[part_of])
        r = (np.cumsum(short) - 1)[part_of[rows]]  # (the matrix row of each partition)
        width = int(sizes[short].max())
        m = np.zeros((int(short.sum()), width + 1))
        m[r, rows - g.p_start[rows] + 1] = finite[rows]
        c = np.cumsum(m, axis=1)
        a, b = a_all[rows], b_all[rows]
        out[rows] = np.where(a == 0, c[r, b], c[r, b] - c[r, a])
    for s, e in zip(starts[~short].tolist(), ends[~short].tolist(), strict=True):
        c1 = np.zeros(e - s + 1)
        np.cumsum(finite[s:e], out=c1[1:])
        a, b = a_all[s:e], b_all[s:e]
        # (c[b] - c[0] is c[b] itself: a running frame's sum as added up)
        out[s:e] = np.where(a == 0, c1[b], c1[b] - c1[a])
    cnt = [_frame_sums(m.astype(np.int64), lo, hi, empty) for m in (pinf, ninf, nan)]
    res = np.where(cnt[0] > 0, np.inf, np.where(cnt[1] > 0, -np.inf, out))
    return np.where((cnt[2] > 0) | ((cnt[0] > 0) & (cnt[1] > 0)), np.nan, res)


def _range_extreme(
    func: str, x: np.ndarray, nl: np.ndarray | None, lo: Any, hi: Any, none: np.ndarray
) -> np.ndarray:
    """The least (``min``) or greatest value of int64 ``x`` over each frame ``[lo, hi]``
    skipping NULLs (``none``: frames without a value, given 0), from a sparse table:
    the extreme of every run of ``2**j`` rows, two overlapping runs per frame."""
    n = len(x)
    pick = np.minimum if func == "min" else np.maximum
    fill = I64_MAX if func == "min" else I64_MIN
    base = x if nl is None else np.where(nl, fill, x)
    levels = [base]
    span = 1
    while span * 2 <= n:
        prev = levels[-1]
        levels.append(pick(prev[: len(prev) - span], prev[span:]))
        span *= 2
    length = np.where(none, 1, hi - lo + 1)
    j = np.floor(np.log2(np.maximum(length, 1))).astype(np.int64)
    # (log2 of an exact power of two is exact; guard the float anyway)
    j = np.where((1 << (j + 1)) <= length, j + 1, j)
    j = np.where((1 << j) > length, j - 1, j)
    a = np.where(none, 0, lo)
    out = np.empty(n, dtype=np.int64)
    for level in np.unique(j).tolist():
        rows = np.flatnonzero(j == level)
        table = levels[level]
        left = table[a[rows]]
        right = table[np.where(none[rows], 0, hi[rows] - (1 << level) + 1)]
        out[rows] = pick(left, right)
    return np.where(none, 0, out)
