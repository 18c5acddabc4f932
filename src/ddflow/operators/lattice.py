"""Reduce under partially ordered times, over columns: DD's interesting times, vectorized.

For the keys a batch touches (and keys with pending work that became due), the output must
be corrected at every time where the key's input or output accumulation can differ from
the ones already settled. Those are the *interesting times*: the key's new update times
(and due pending times), closed under ``join`` with each other and with the times of the
key's input and output history. History times are first advanced by the batch's ``lower``
frontier (``advance_by``): for times beyond ``lower`` they compare exactly like the
originals, and after compaction most of them coincide, which keeps the closure small.

Closure (semi-naive, all keys at once): rows ``(key, time)`` are joined with every history
or closure row of the same key (a per-key cross product built with ``searchsorted`` and
``repeat``), new rows kept, until none is new. Rows not beyond ``upper`` are evaluated now;
the rest are kept as pending work for a later frontier.

Evaluation: the times of one key are taken in a linear extension of the partial order
(lexicographic order of flat times), in *ranks*: rank ``r`` is every key's ``r``-th time,
evaluated for all keys together. At a time ``t`` the input accumulated at ``t`` is a
per-key cross product of the time with the key's input rows filtered by ``s <= t`` and
summed per value; the reducer gives the desired output; the current output is the same sum
over the output history plus the corrections made at earlier ranks; the difference is
emitted at ``t``. Every time of the closure that is ``<= t`` was handled at an earlier
rank, so after rank ``r`` the output accumulated at each of its times is the desired one.

Chains: history times are advanced by ``lower`` and by the meet of each owner's starting
times (every time evaluated for the owner is beyond it). Inside a loop this folds history
from earlier outer times onto the outer time at work, and often every owner's times then
differ in one column only: they form a chain. There the closure is the starting times and
the history times after the earliest of them, and no rank loop is needed: the correction at
``t_r`` is ``fix(t_r) - fix(t_{r-1})`` with ``fix(t)`` the desired output minus the output
trace at ``t``, for all queries at once (``adds_only`` reducers, which see the corrections of
earlier ranks, keep the rank loop).

What is desired at a time, and how the difference is emitted, is the reducer's
(``ddflow.operators.reducers``): ``desired`` gives the output rows from the accumulated
input, ``corrections`` what to emit given the current output (desired minus current, or for
``adds_only`` reducers only improvements).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ddflow.core.columns import concat_columns, lex_order
from ddflow.core.diff import DiffType
from ddflow.core.frontier import Antichain
from ddflow.core.time import columns_advance_by
from ddflow.core.updates import Updates, concat_updates, consolidate, take_times
from ddflow.operators.reducers import Reducer, Rows, group_starts
from ddflow.trace.batch import ranges_to_indices

if TYPE_CHECKING:
    from ddflow.engine.operator import Operator

__all__ = ["expand", "interesting_times", "lattice_reduce", "unique_rows"]


def expand(a_owner: np.ndarray, b_owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair ``(i, j)`` with ``a_owner[i] == b_owner[j]`` (``b_owner`` sorted), grouped
    by ``i`` and, within ``i``, in ``b``'s order."""
    lo = b_owner.searchsorted(a_owner, "left")
    hi = b_owner.searchsorted(a_owner, "right")
    j, i = ranges_to_indices(lo, hi)
    return i, j


def _pack(owner: np.ndarray, times: np.ndarray) -> np.ndarray | None:
    """One int64 per row ordering like ``(owner, *times)``, when the ranges fit in 63 bits."""
    cols = [owner] + [times[:, k] for k in range(times.shape[1])]
    shifts = []
    bits = 0
    mins = []
    for c in cols:
        lo = int(c.min()) if len(c) else 0
        hi = int(c.max()) if len(c) else 0
        w = max(1, (hi - lo).bit_length())
        mins.append(lo)
        shifts.append(w)
        bits += w
    if bits > 63:
        return None
    out = np.zeros(len(owner), dtype=np.int64)
    for c, lo, w in zip(cols, mins, shifts, strict=True):
        out <<= w
        out |= c.astype(np.int64) - lo
    return out


def unique_rows(owner: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ``(owner, time)`` rows, sorted by owner then time (lexicographically)."""
    if len(owner) == 0:
        return owner, times
    packed = _pack(owner, times)
    if packed is not None:
        _, idx = np.unique(packed, return_index=True)
    else:
        both = np.column_stack([owner, times])
        _, idx = np.unique(both, axis=0, return_index=True)
    return owner[idx], take_times(times, idx)


def _new_rows(
    have_o: np.ndarray, have_t: np.ndarray, cand_o: np.ndarray, cand_t: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``cand`` (distinct) not among ``have`` (distinct)."""
    if len(cand_o) == 0 or len(have_o) == 0:
        return cand_o, cand_t
    o = np.concatenate([have_o, cand_o])
    t = np.concatenate([have_t, cand_t])
    packed = _pack(o, t)
    if packed is not None:
        _, idx = np.unique(packed, return_index=True)
    else:
        _, idx = np.unique(np.column_stack([o, t]), axis=0, return_index=True)
    idx = idx[idx >= len(have_o)]
    return o[idx], t[idx]


class _Packer:
    """Rows ``(owner, time)`` as one int64 each, ordered like the rows (lexicographically),
    for fixed ranges: joins of times stay inside the componentwise range of their inputs,
    so one packer serves a whole closure."""

    def __init__(self, n_owner: int, times: np.ndarray) -> None:
        d = times.shape[1]
        self.lo = times.min(axis=0) if len(times) else np.zeros(d, dtype=np.int64)
        hi = times.max(axis=0) if len(times) else np.zeros(d, dtype=np.int64)
        self.widths = [max(1, int(h - lo).bit_length()) for h, lo in zip(hi, self.lo, strict=True)]
        self.tbits = sum(self.widths)
        self.ok = self.tbits + max(1, int(n_owner).bit_length()) <= 63

    def pack(self, owner: np.ndarray, times: np.ndarray) -> np.ndarray:
        out = owner.astype(np.int64)
        rel = times - self.lo
        for k, w in enumerate(self.widths):
            out = (out << w) | rel[:, k]
        return out

    def unpack(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d = len(self.widths)
        times = np.empty((len(codes), d), dtype=np.int64)
        c = codes
        for k in range(d - 1, -1, -1):
            w = self.widths[k]
            times[:, k] = (c & ((1 << w) - 1)) + self.lo[k]
            c = c >> w
        return c, times


def interesting_times(
    c_owner: np.ndarray,
    c_times: np.ndarray,
    h_owner: np.ndarray,
    h_times: np.ndarray,
    n_owner: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The closure of the rows ``c`` under join with history ``h`` and with itself, per owner.

    Returns distinct rows sorted by owner, then time."""
    if len(c_owner) == 0:
        return c_owner, c_times
    if len(c_owner) + len(h_owner) <= 48:
        return _interesting_small(c_owner, c_times, h_owner, h_times)
    both_t = np.concatenate([h_times, c_times]) if len(h_owner) else c_times
    if n_owner is None:
        n_owner = max(int(c_owner.max()), int(h_owner.max()) if len(h_owner) else 0) + 1
    nmax = int(n_owner)
    pk = _Packer(nmax, both_t)
    if not pk.ok:
        return _interesting_rows(c_owner, c_times, h_owner, h_times)
    closure = np.unique(pk.pack(c_owner, c_times))
    # Every join of starting times with history and starting times is reached by joining
    # one of them at a time (joins are associative and commutative), so new rows join
    # with this fixed base only, not with the growing closure.
    base = np.unique(pk.pack(h_owner, h_times)) if len(h_owner) else closure[:0]
    base_o, base_t = pk.unpack(_insert_new(base, closure))
    new = closure
    while len(new):
        new_o, new_t = pk.unpack(new)
        i, j = expand(new_o, base_o)
        if not len(i):
            break
        joined = np.unique(
            pk.pack(new_o[i], np.maximum(take_times(new_t, i), take_times(base_t, j)))
        )
        new = joined[~_members(joined, closure)]
        if len(new):
            closure = np.insert(closure, closure.searchsorted(new), new)
    return pk.unpack(closure)


def _members(x: np.ndarray, sorted_: np.ndarray) -> np.ndarray:
    """Which values of ``x`` are in the sorted array ``sorted_``."""
    if not len(sorted_):
        return np.zeros(len(x), dtype=bool)
    pos = sorted_.searchsorted(x)
    np.minimum(pos, len(sorted_) - 1, out=pos)
    return sorted_[pos] == x


def _insert_new(sorted_: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The sorted distinct union of ``sorted_`` and ``x`` (sorted, distinct): the values of
    ``x`` not yet present inserted at their positions, in linear time."""
    if not len(sorted_):
        return x
    x = x[~_members(x, sorted_)]
    return np.insert(sorted_, sorted_.searchsorted(x), x) if len(x) else sorted_


def _interesting_small(
    c_owner: np.ndarray, c_times: np.ndarray, h_owner: np.ndarray, h_times: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``interesting_times`` for a few rows, with Python sets (numpy's per-call cost
    dominates at this size)."""
    hist: dict[int, set[tuple[int, ...]]] = {}
    for o, t in zip(h_owner.tolist(), h_times.tolist(), strict=True):
        hist.setdefault(o, set()).add(tuple(t))
    closure: dict[int, set[tuple[int, ...]]] = {}
    for o, t in zip(c_owner.tolist(), c_times.tolist(), strict=True):
        closure.setdefault(o, set()).add(tuple(t))
    rows: list[tuple[int, ...]] = []
    for o, cs in closure.items():
        partners = hist.get(o, set()) | cs
        work = list(cs)
        while work:
            c = work.pop()
            for h in list(partners):
                j = tuple(max(x, y) for x, y in zip(c, h, strict=True))
                if j not in cs:
                    cs.add(j)
                    partners.add(j)
                    work.append(j)
        rows.extend((o, *t) for t in cs)
    rows.sort()
    arr = np.array(rows, dtype=np.int64).reshape(len(rows), 1 + c_times.shape[1])
    return arr[:, 0].copy(), arr[:, 1:].copy()


def _interesting_rows(
    c_owner: np.ndarray, c_times: np.ndarray, h_owner: np.ndarray, h_times: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``interesting_times`` for rows too wide to pack into an int64."""
    c_owner, c_times = unique_rows(c_owner, c_times)
    if len(h_owner):
        h_owner, h_times = unique_rows(h_owner, h_times)
    all_o = np.concatenate([h_owner, c_owner])
    all_t = np.concatenate([h_times, c_times]) if len(h_owner) else c_times
    all_o, all_t = unique_rows(all_o, all_t)
    new_o, new_t = c_owner, c_times
    while len(new_o):
        i, j = expand(new_o, all_o)
        if not len(i):
            break
        jo = new_o[i]
        jt = np.maximum(take_times(new_t, i), take_times(all_t, j))
        jo, jt = unique_rows(jo, jt)
        add_o, add_t = _new_rows(c_owner, c_times, jo, jt)
        if not len(add_o):
            break
        c_owner, c_times = unique_rows(
            np.concatenate([c_owner, add_o]), np.concatenate([c_times, add_t])
        )
        all_o, all_t = unique_rows(np.concatenate([all_o, add_o]), np.concatenate([all_t, add_t]))
        new_o, new_t = add_o, add_t
    return c_owner, c_times


def _sorted_rows(owner: np.ndarray, u: Updates, kw: int) -> tuple[np.ndarray, Updates]:
    """Rows sorted by owner, then value columns. The rows are a few sorted runs one after
    another (each trace batch's rows of the probe keys, gathered batch by batch, come
    sorted by key, so by owner, then value; the current output and a rank's corrections
    likewise), so they are merged by a sort that finds the runs (``runs=True``: several
    times faster than sorting them afresh; still right, only slower, were they not)."""
    order = lex_order((owner,) + tuple(u.data[kw:]), runs=True)
    return owner[order], u.take(order)


def _accumulate(
    q_owner: np.ndarray,
    q_times: np.ndarray,
    r_owner: np.ndarray,
    r: Updates,
    kw: int,
    col: int | None = None,
) -> tuple[np.ndarray, tuple[np.ndarray, ...], Any]:
    """For each query ``(owner, time)`` (sorted by owner), the rows' diffs at times
    ``<= time`` summed per value: ``(query index, value columns, sums)``, zero sums
    dropped, sorted by query then value. ``col``: each owner's times form a chain in that
    column (``_chain_column``), which alone then decides ``<=``."""
    dt = r.diff_type
    qi, rj = expand(q_owner, r_owner)
    if len(qi):
        if col is not None:
            ok = r.times[:, col][rj] <= q_times[:, col][qi]
        else:
            ok = (take_times(r.times, rj) <= take_times(q_times, qi)).all(axis=1)
        qi, rj = qi[ok], rj[ok]
    vals = tuple(c[rj] for c in r.data[kw:])
    flags = group_starts(qi, vals)
    starts = flags.nonzero()[0]
    if not len(starts):
        return qi[:0], tuple(v[:0] for v in vals), dt.take(r.diffs, rj[:0])
    sums = dt.sum_segments(dt.take(r.diffs, rj), starts)
    nz = (~dt.zero_mask(sums)).nonzero()[0]
    keep = starts[nz]
    return qi[keep], tuple(v[keep] for v in vals), dt.take(sums, nz)


def _owner_meets(owner: np.ndarray, times: np.ndarray, n_owner: int) -> np.ndarray:
    """``(n_owner, d)``: per owner the meet (componentwise least) of its ``times`` (the
    int64 maximum for owners without any)."""
    big = np.iinfo(np.int64).max
    d = times.shape[1]
    if len(owner) <= 16:
        out = np.full((n_owner, d), big, dtype=np.int64)
        np.minimum.at(out, owner, times)
        return out
    # (``ufunc.at`` over one contiguous column is an order of magnitude faster than over
    # rows of a 2-d array)
    out = np.empty((n_owner, d), dtype=np.int64)
    for k in range(d):
        c = np.full(n_owner, big, dtype=np.int64)
        np.minimum.at(c, owner, np.ascontiguousarray(times[:, k]))
        out[:, k] = c
    return out


def _chain_column(
    base: np.ndarray,
    c_owner: np.ndarray,
    c_times: np.ndarray,
    h_owner: np.ndarray,
    h_times: np.ndarray,
) -> int | None:
    """The one time column in which the starting times ``c`` and history times ``h``
    (advanced, so beyond their owner's ``base``) may differ from their owner's ``base``
    (the last if none does), or None if times differ from it in several columns. When it
    exists, each owner's times form a chain: the partial order is that column's order."""
    dim = c_times.shape[1]
    if not len(c_times):
        return None
    if dim == 1:
        return 0
    # column by column: a 1-d take, compare and ``any`` each (5x faster than the rows'
    # times taken as (n, d) and reduced along axis 0, which numpy does row by row)
    found = None
    for k in range(dim):
        bk = base[:, k]
        if (c_times[:, k] != bk.take(c_owner)).any() or (
            len(h_times) and (h_times[:, k] != bk.take(h_owner)).any()
        ):
            if found is not None:
                return None
            found = k
    return dim - 1 if found is None else found


def _chain_times(
    base: np.ndarray,
    c_owner: np.ndarray,
    c_times: np.ndarray,
    h_owner: np.ndarray,
    h_times: np.ndarray,
    col: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``interesting_times`` when each owner's times form a chain in column ``col``
    (``_chain_column``): the join of two times is the later one, so the closure of an
    owner's starting times is them and its history times after the earliest of them (whose
    ``col`` is the owner's ``base``).

    Returns distinct rows sorted by owner, then time."""
    cv = c_times[:, col]
    if len(h_owner):
        later = (h_times[:, col] > base[h_owner, col]).nonzero()[0]
        o = np.concatenate([c_owner, h_owner[later]])
        v = np.concatenate([cv, h_times[later, col]])
    else:
        o, v = c_owner, cv
    lo = int(v.min())
    span = int(v.max()) - lo + 1
    if span.bit_length() + max(1, len(base).bit_length()) <= 62:
        code = o.astype(np.int64) * span + (v - lo)
        cells = len(base) * span
        if cells <= 4 * len(code) + 4096:
            # distinct codes by marking a table (no sort: loops run few iterations, so
            # owners times iterations is a small table)
            seen = np.zeros(cells, dtype=bool)
            seen[code] = True
            code = seen.nonzero()[0]
        else:
            code = np.unique(code)
        o, v = code // span, code % span + lo
    else:
        order = np.lexsort((v, o))
        o, v = o[order], v[order]
        keep = np.ones(len(o), dtype=bool)
        keep[1:] = (o[1:] != o[:-1]) | (v[1:] != v[:-1])
        o, v = o[keep], v[keep]
    times = take_times(base, o)
    times[:, col] = v
    return o, times


def _first_query_at_or_after(
    q_o: np.ndarray, qv: np.ndarray, r_o: np.ndarray, rv: np.ndarray
) -> np.ndarray:
    """For each row ``(r_o, rv)`` the index of the first query ``(q_o, qv)`` (sorted by
    owner, then value) not below it, ``len(q_o)`` if none: by one sort of both, rows
    before queries on ties."""
    nq, nr = len(q_o), len(r_o)
    order = lex_order(
        (
            np.concatenate([q_o, r_o]),
            np.concatenate([qv, rv]),
            np.concatenate([np.ones(nq, dtype=np.int8), np.zeros(nr, dtype=np.int8)]),
        )
    )
    at = np.full(nq + nr, nq + nr, dtype=np.int64)
    is_q = order < nq
    at[is_q] = is_q.nonzero()[0]
    first_after = np.minimum.accumulate(at[::-1])[::-1]  # sorted position of the query
    pos = np.empty(nq + nr, dtype=np.int64)
    pos[order] = np.arange(nq + nr)
    return np.append(order, nq)[first_after[pos[nq:]]]


def _chain_reduce(
    reducer: Reducer,
    op: Operator,
    probe_cols: tuple[np.ndarray, ...],
    q_o: np.ndarray,
    q_t: np.ndarray,
    col: int,
    in_owner: np.ndarray,
    in_u: Updates | None,
    out_owner: np.ndarray,
    out_u: Updates | None,
    kw: int,
    in_dt: DiffType,
    out_dt: DiffType,
) -> Updates | None:
    """The output corrections at the query rows ``(q_o, q_t)`` (sorted by owner, then time)
    when each owner's times form a chain in column ``col``, all queries at once instead of
    rank by rank.

    Along an owner's chain ``t_1 < t_2 < ...`` the output accumulated at each ``t_r`` must
    become the desired one, ``want(t_r)``; it is ``out(t_r)`` (the output trace) plus the
    corrections emitted at ``t_1 .. t_r``. So the correction at ``t_r`` is
    ``want(t_r) - want(t_{r-1}) - (out(t_r) - out(t_{r-1}))`` (with ``want(t_0) =
    out(t_0) = 0``), and ``out(t_r) - out(t_{r-1})`` is the sum of the output rows at times
    in ``(t_{r-1}, t_r]``: each output row counts once, at the first query not before it."""
    nq = len(q_o)
    empty_q = np.empty(0, dtype=np.int64)
    if in_u is not None and len(in_u):
        iq, iv, isum = _accumulate(q_o, q_t, in_owner, in_u, kw, col)
    else:
        iq, iv, isum = empty_q, (), in_dt.empty()
    wq, wv, wd = reducer.desired(op, nq, iq, iv, isum, in_dt)
    # subtracted: want(t_{r-1}) moved to the next query of the same owner ...
    sub_q, sub_v, sub_d = [], [], []
    if len(wq):
        nxt = wq + 1
        s = (nxt < nq).nonzero()[0]
        s = s[q_o[nxt[s]] == q_o[wq[s]]]
        if len(s):
            sub_q.append(nxt[s])
            sub_v.append(tuple(c[s] for c in wv))
            sub_d.append(out_dt.take(wd, s))
    # ... and each output row, at the first query of its owner not before it
    if out_u is not None and len(out_u):
        qv, rv = q_t[:, col], out_u.times[:, col]
        lo = min(int(qv.min()), int(rv.min()))
        span = max(int(qv.max()), int(rv.max())) - lo + 1
        owners = max(int(q_o[-1]), int(out_owner.max())) + 1
        if span.bit_length() + owners.bit_length() <= 62:
            # queries as codes ordered like (owner, time): a row's query is the first
            # code not below the row's
            qcode = q_o * span + (qv - lo)
            qi = qcode.searchsorted(out_owner * span + (rv - lo))
        else:
            qi = _first_query_at_or_after(q_o, qv, out_owner, rv)
        ok = (qi < nq).nonzero()[0]
        ok = ok[q_o[np.minimum(qi[ok], nq - 1)] == out_owner[ok]]
        if len(ok):
            sub_q.append(qi[ok])
            sub_v.append(tuple(c[ok] for c in out_u.data[kw:]))
            sub_d.append(out_dt.take(out_u.diffs, ok))
    if sub_q:
        nv = len(sub_v[0])
        have: Rows = (
            np.concatenate(sub_q),
            tuple(concat_columns([v[k] for v in sub_v]) for k in range(nv)),
            out_dt.concat(sub_d),
        )
    else:
        have = (empty_q, (), out_dt.empty())
    fq, fv, fd = reducer.corrections(nq, (wq, wv, wd), have, out_dt)
    if not len(fq):
        return None
    keys = tuple(c[q_o[fq]] for c in probe_cols)
    return Updates(keys + tuple(fv), take_times(q_t, fq), fd, out_dt)


def _history(
    in_owner: np.ndarray,
    in_u: Updates | None,
    out_owner: np.ndarray,
    out_u: Updates | None,
    dim: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The owners and times of the input and output history rows, together."""
    parts = [(o, u.times) for o, u in ((in_owner, in_u), (out_owner, out_u)) if u is not None]
    if not parts:
        return np.empty(0, dtype=np.int64), np.empty((0, dim), dtype=np.int64)
    if len(parts) == 1:
        return parts[0]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def lattice_reduce(
    reducer: Reducer,
    op: Operator,
    probe_cols: tuple[np.ndarray, ...],
    n_probe: int,
    c_owner: np.ndarray,
    c_times: np.ndarray,
    in_owner: np.ndarray,
    in_u: Updates | None,
    out_owner: np.ndarray,
    out_u: Updates | None,
    kw: int,
    in_dt: DiffType,
    out_dt: DiffType,
    lower: Antichain,
    upper: Antichain,
    dim: int,
) -> tuple[Updates | None, np.ndarray, np.ndarray]:
    """Output corrections for the probe keys, and the pending ``(owner, time)`` rows beyond
    ``upper``.

    ``c`` are the starting times (new update times and pending times) per probe index;
    ``in_*``/``out_*`` the probe keys' input and output history rows (keys and values as
    columns, ``kw`` key columns). Output records are ``key columns + output value columns``
    with ``out_dt`` diffs. A reducer without ``closure`` is evaluated at the starting times
    only (see ``SolveMin``)."""
    # History times are advanced by the meet of each owner's starting times (``base``):
    # every time evaluated for an owner is beyond it, and there the advanced times compare
    # exactly like the originals (``advance_by``), while times that differ only before it
    # collapse (history from earlier outer times of a loop, for one). Unless the times then
    # form chains, they are advanced by ``lower`` too (all evaluated times are beyond it),
    # which keeps the closure small.
    base = _owner_meets(c_owner, c_times, n_probe)
    if in_u is not None and len(in_u):
        in_u = in_u.with_times(np.maximum(in_u.times, take_times(base, in_owner)))
        in_owner, in_u = _sorted_rows(in_owner, in_u, kw)
    else:
        in_u = None
    if out_u is not None and len(out_u):
        out_u = out_u.with_times(np.maximum(out_u.times, take_times(base, out_owner)))
    else:
        out_u = None
    h_o, h_t = _history(in_owner, in_u, out_owner, out_u, dim)
    col = (
        _chain_column(base, c_owner, c_times, h_o, h_t)
        if reducer.closure and not reducer.adds_only
        else None
    )
    if col is None and len(lower.arr):
        la = lower.arr
        if in_u is not None:
            in_u = in_u.with_times(columns_advance_by(in_u.times, la))
        if out_u is not None:
            out_u = out_u.with_times(columns_advance_by(out_u.times, la))
        h_o, h_t = _history(in_owner, in_u, out_owner, out_u, dim)
    if col is not None:
        t_owner, t_times = _chain_times(base, c_owner, c_times, h_o, h_t, col)
    elif reducer.closure:
        t_owner, t_times = interesting_times(c_owner, c_times, h_o, h_t, n_probe)
    else:
        t_owner, t_times = unique_rows(c_owner, c_times)
    later = upper.beyond_mask(t_times)
    pend_o, pend_t = t_owner[later], t_times.compress(later, axis=0)
    now_o, now_t = t_owner[~later], t_times.compress(~later, axis=0)
    if not len(now_o):
        return None, pend_o, pend_t
    if col is not None:
        return (
            _chain_reduce(
                reducer,
                op,
                probe_cols,
                now_o,
                now_t,
                col,
                in_owner,
                in_u,
                out_owner,
                out_u,
                kw,
                in_dt,
                out_dt,
            ),
            pend_o,
            pend_t,
        )
    # ranks: position of each time among its owner's times (rows sorted by owner, time)
    n = len(now_o)
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(now_o[1:], now_o[:-1], out=first[1:])
    starts = first.nonzero()[0]
    rank = np.arange(n) - starts.repeat(np.diff(np.append(starts, n)))
    # output rows, sorted by owner then value; corrections join them rank by rank
    if out_u is not None and len(out_u):
        cur_o, cur_u = _sorted_rows(out_owner, out_u, kw)
    else:
        cur_o, cur_u = None, None
    emitted: list[Updates] = []
    emitted_o: list[np.ndarray] = []
    empty_in = in_u is None or not len(in_u)
    for r in range(int(rank.max()) + 1):
        sel = (rank == r).nonzero()[0]
        q_o, q_t = now_o[sel], take_times(now_t, sel)
        nq = len(q_o)
        # the input at each query time
        if empty_in:
            iq = np.empty(0, dtype=np.int64)
            iv: tuple[np.ndarray, ...] = ()
            isum = in_dt.empty()
        else:
            assert in_u is not None
            iq, iv, isum = _accumulate(q_o, q_t, in_owner, in_u, kw)
        # the current output at each query time
        if cur_u is not None:
            assert cur_o is not None
            oq, ov, osum = _accumulate(q_o, q_t, cur_o, cur_u, kw)
        else:
            oq, ov, osum = np.empty(0, dtype=np.int64), (), out_dt.empty()
        want = reducer.desired(op, nq, iq, iv, isum, in_dt)
        fix_q, fix_v, fix_d = reducer.corrections(nq, want, (oq, ov, osum), out_dt)
        if not len(fix_q):
            continue
        owners = q_o[fix_q]
        keys = tuple(c[owners] for c in probe_cols)
        u = Updates(keys + tuple(fix_v), take_times(q_t, fix_q), fix_d, out_dt)
        emitted.append(u)
        emitted_o.append(owners)
        if r < rank.max():
            # later ranks see these corrections as part of the current output
            if cur_u is None:
                cur_o, cur_u = _sorted_rows(owners, u, kw)
            else:
                assert cur_o is not None
                cur_o, cur_u = _sorted_rows(
                    np.concatenate([cur_o, owners]), concat_updates([cur_u, u]), kw
                )
    if not emitted:
        return None, pend_o, pend_t
    return consolidate(concat_updates(emitted)), pend_o, pend_t
