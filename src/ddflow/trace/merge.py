"""Merging trace batches: the one place two or more adjacent batches become one.

A merge of adjacent batches ``a`` (older) and ``b`` holds every update of both, with times
advanced by the merge's ``since`` frontier and consolidated::

    merge(a, b, since) = consolidate({ (k, v, advance_by(t, since), d) : (k, v, t, d) in a U b })

described by ``[a.lower, b.upper)`` with that ``since``. Advancing by ``since`` keeps every
comparison with times beyond ``since``, so readers whose frontiers are beyond it see the
same accumulations; updates whose times collapse onto one another add up, and cancelling
ones vanish (that is compaction).

Two forms, with the same result:

* ``Merge``: a merge in progress of two batches, done in key chunks as fuel arrives, so a
  large merge never stalls one insert (the spine drives it; see ``ddflow.trace.spine``);
* ``merge_all``: several adjacent batches merged at once (the spine's small tail batches,
  and rebuilding a merge from its sources).

Two batches whose ``(key, val)`` ranges overlap little (each holding each of its
``(key, val)`` once) merge as a concatenation (``merge_ranges``): only the overlap is sorted
and added up; the rows around it keep their order. Arrangements whose keys grow with time
(orders by key, ids handed out in order) merge that way while they load, at about the cost
of copying the columns once.

Invariant: a merged batch's ``diff_bound`` is the sum of its sources' bounds when they
have one (a merge sums rows of one key), handed down without a pass over the merged diffs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ddflow.core.columns import concat_columns, const_view, take_columns
from ddflow.core.diff import I64_MAX, IntDiff, TupleDiff
from ddflow.core.frontier import Antichain
from ddflow.core.time import columns_advance_by
from ddflow.core.updates import Updates, concat_updates, consolidate
from ddflow.trace.batch import Description, TraceBatch, is_zero_stride, merged_bound

__all__ = [
    "Merge",
    "merge_all",
    "merge_interleaved",
    "merge_ranges",
    "merge_runs",
    "merge_unique_runs",
]


#: fuel (rows) a merge in progress collects before it works at all, unless the whole
#: merge is smaller: Python's overhead is then paid per large chunk
MIN_WORK_ROWS = 4096

#: the fewest rows a merge in progress works through in one chunk (unless fewer remain):
#: each chunk costs tens of numpy calls, and without a floor the last of a call's fuel
#: went on chunks of a few rows each
MIN_CHUNK_ROWS = 2048

#: merges (``merge_ranges``) and chunks (``merge_interleaved``) of fewer rows go the general
#: way without trying the shortcuts first: on a few rows their checks cost more than they save
MIN_SHORTCUT_ROWS = 2048

#: the most rows a merge works through in one chunk, however much fuel it has (a large
#: merge completed at once, too): sorting a chunk that fits in the caches is several times
#: faster per row than sorting millions of rows at once
MAX_CHUNK_ROWS = 1 << 17


class Merge:
    """A merge in progress of two adjacent batches (``a`` older than ``b``), done in key chunks."""

    def __init__(self, a: TraceBatch, b: TraceBatch, since: Antichain) -> None:
        self.a, self.b, self.since = a, b, since
        self.ka = 0  # next key index of a
        self.kb = 0
        self.chunks: list[Updates] = []
        self.result: TraceBatch | None = None
        self.size = len(a) + len(b)
        self.credit = 0
        # every chunk so far merged by ``merge_unique_runs``: one row per key
        self.distinct = True
        # sums of a key's rows in the merge cannot leave int64 when the bounds say so
        self.bound = merged_bound([a, b])
        self.bounded = self.bound is not None and self.bound <= I64_MAX
        # each (key, val) on one row of either batch: chunks may be interleaved, not sorted
        self.unique = a.unique_rows() and b.unique_rows()
        self.misses = 0  # chunks ``merge_interleaved`` left to the general path
        # the merged data columns, written chunk after chunk from row ``pos`` on (so that
        # ``_finish`` need not concatenate them); ``spilled`` once a chunk's columns came in
        # other dtypes (then ``_finish`` concatenates the chunks after all)
        self.out: list[np.ndarray] | None = None
        self.pos = 0
        self.spilled = False

    def _slots(self, m: int) -> list[np.ndarray] | None:
        """Views of the merged columns for the next ``m`` rows: None for the first chunk
        (which may be the whole merge, then kept as it is) and once spilled."""
        if self.spilled or not self.chunks:
            return None
        if self.out is None:
            # (the second chunk: the first is copied in)
            first = self.chunks[0]
            if len(first.data) != len(self.a.data) or any(
                c.dtype != d.dtype for c, d in zip(first.data, self.a.data, strict=True)
            ):
                self.spilled = True
                return None
            self.out = [np.empty(self.size, dtype=c.dtype) for c in self.a.data]
            k = len(first)
            for o, c in zip(self.out, first.data, strict=True):
                o[:k] = c
            self.chunks[0] = Updates(
                tuple(o[:k] for o in self.out), first.times, first.diffs, first.diff_type
            )
            self.pos = k
        return [o[self.pos : self.pos + m] for o in self.out]

    def _keep(self, u: Updates, placed: bool = False) -> None:
        """Add the merged chunk ``u`` (its data written into ``_slots`` already if
        ``placed``)."""
        m = len(u)
        if not m:
            return
        if not placed and not self.spilled:
            slots = self._slots(m)
            if slots is None:  # (the first chunk)
                self.chunks.append(u)
                return
            if len(slots) == len(u.data) and all(
                s.dtype == c.dtype for s, c in zip(slots, u.data, strict=True)
            ):
                for s, c in zip(slots, u.data, strict=True):
                    s[...] = c
                u = Updates(tuple(slots), u.times, u.diffs, u.diff_type)
            else:
                self.spilled = True
        if not self.spilled:
            self.pos += m
        self.chunks.append(u)

    def _chunk(self, ka_end: int, kb_end: int) -> None:
        a, b = self.a, self.b
        ra = slice(int(a.bounds[self.ka]), int(a.bounds[ka_end]))
        rb = slice(int(b.bounds[self.kb]), int(b.bounds[kb_end]))
        ua, ub = _slice(a, ra), _slice(b, rb)
        one_row_per_key = (
            ra.stop - ra.start == ka_end - self.ka and rb.stop - rb.start == kb_end - self.kb
        )
        if one_row_per_key and self.bounded and len(ua) and len(ub):
            merged = merge_unique_runs(ua, ub, a.key_width, self.since.arr)
            if merged is not None:
                self._keep(merged)
                self.ka, self.kb = ka_end, kb_end
                return
        self.distinct = False  # (a chunk of the general path: keys may repeat)
        if self.unique and len(ua) + len(ub) >= MIN_SHORTCUT_ROWS:
            slots = self._slots(len(ua) + len(ub))
            merged = merge_interleaved(ua, ub, self.since.arr, out=slots)
            if merged is not None:
                self._keep(merged, placed=slots is not None)
                self.ka, self.kb = ka_end, kb_end
                return
            self.misses += 1
            if self.misses >= 1:
                self.unique = False  # (rows that pack small, or repeat: not worth trying)
        u = concat_updates([ua, ub])
        if len(u):
            u = u.with_times(columns_advance_by(u.times, self.since.arr))
            u = consolidate(u, runs=True, bounded=self.bounded)
            self._keep(u)
        self.ka, self.kb = ka_end, kb_end

    def work(self, fuel: int) -> bool:
        """Merge about ``fuel`` more rows; return whether the merge is complete. Fuel is
        banked in ``credit`` and spent by a later call while there is too little of it to
        start (under ``MIN_WORK_ROWS``) or for a chunk worth its fixed cost (under
        ``MIN_CHUNK_ROWS``), unless it would finish the merge."""
        a, b = self.a, self.b
        na, nb = a.num_keys, b.num_keys
        fuel += self.credit
        self.credit = 0
        if fuel < MIN_WORK_ROWS and fuel < self.size:
            self.credit = fuel
            return False
        if self.ka == 0 and self.kb == 0 and self.result is None and self.size >= MIN_SHORTCUT_ROWS:
            whole = merge_ranges(a, b, self.since)
            if whole is not None:
                self.result = whole
                return True
        while self.result is None:
            if fuel <= 0:
                return False
            if fuel < MIN_CHUNK_ROWS:
                left = int(a.bounds[na]) - int(a.bounds[self.ka])
                left += int(b.bounds[nb]) - int(b.bounds[self.kb])
                if fuel < left:
                    self.credit = fuel
                    return False
            if (
                self.ka >= na
                or self.kb >= nb
                or (fuel >= self.size and self.size <= MAX_CHUNK_ROWS)
                or a.keys.dtype != b.keys.dtype
            ):
                # (keys of two representations, e.g. int64 and Python ints, are not
                # compared to cut chunks: the whole merge is one chunk, made exact by
                # ``concat_columns``)
                self._chunk(na, nb)
                fuel = 0
                self._finish()
                break
            half = min(max(fuel // 2, 1), MAX_CHUNK_ROWS // 2)
            ia = int(np.searchsorted(a.bounds, a.bounds[self.ka] + half, side="right")) - 1
            ib = int(np.searchsorted(b.bounds, b.bounds[self.kb] + half, side="right")) - 1
            ia = min(max(ia, self.ka + 1), na)
            ib = min(max(ib, self.kb + 1), nb)
            if ia >= na and ib >= nb:
                self._chunk(na, nb)
                self._finish()
                break
            # the smaller of the two boundary keys bounds this chunk in both batches
            # (compared through a sort: composite keys are structured or object arrays,
            # whose scalars do not order with ``<=``)
            if ib >= nb:
                bound = a.keys[ia : ia + 1]
            elif ia >= na:
                bound = b.keys[ib : ib + 1]
            else:
                bound = np.sort(np.concatenate([a.keys[ia : ia + 1], b.keys[ib : ib + 1]]))[:1]
            ka_end = int(np.searchsorted(a.keys, bound, side="left")[0])
            kb_end = int(np.searchsorted(b.keys, bound, side="left")[0])
            before = (int(a.bounds[self.ka]), int(b.bounds[self.kb]))
            self._chunk(ka_end, kb_end)
            fuel -= int(a.bounds[self.ka]) - before[0] + int(b.bounds[self.kb]) - before[1]
        return True

    def _finish(self) -> None:
        a, b = self.a, self.b
        desc = Description(a.desc.lower, b.desc.upper, self.since)
        if len(self.chunks) > 1 and self.out is not None and not self.spilled:
            m = self.pos
            # (a result much shorter than both batches, as when updates cancel, is copied
            # out of the columns sized for both)
            data = tuple(o[:m] if 4 * m >= 3 * self.size else o[:m].copy() for o in self.out)
            u = _concat_chunks(self.chunks, data)
        elif self.chunks:
            u = _concat_chunks(self.chunks)
        else:
            u = Updates(
                take_columns(a.data, slice(0, 0)),
                a.times[:0],
                a.diff_type.take(a.diffs, slice(0, 0)),
                a.diff_type,
            )
        self.result = TraceBatch(a.key_width, u, desc, distinct_keys=self.distinct)
        if self.bounded and self.bound is not None:  # (else computed when asked: maybe smaller)
            self.result.set_diff_bound(self.bound)
        self.chunks = []
        self.out = None


def _concat_chunks(chunks: list[Updates], data: tuple[np.ndarray, ...] | None = None) -> Updates:
    """``concat_updates`` of a merge's chunks, keeping a time column (and an int diff
    column) that is one zero-stride row in every chunk as one such view: copied out, it
    would only be checked and made a view again by the batch. ``data``: the chunks' data
    columns one after another, when the merge wrote them so."""
    dt = chunks[0].diff_type
    if data is None:
        if len(chunks) == 1:
            return chunks[0]
        width = len(chunks[0].data)
        data = tuple(concat_columns([c.data[i] for c in chunks]) for i in range(width))
    elif len(chunks) == 1:
        return Updates(data, chunks[0].times, chunks[0].diffs, dt)
    n = sum(len(c) for c in chunks)
    t0 = chunks[0].times[:1]
    ds = [c.diffs for c in chunks]
    d0 = ds[0]
    if not all(is_zero_stride(c.times) and np.array_equal(c.times[:1], t0) for c in chunks):
        times = np.concatenate([c.times for c in chunks])
        return Updates(data, times, dt.concat(ds), dt)
    if isinstance(d0, np.ndarray) and all(
        isinstance(d, np.ndarray) and is_zero_stride(d) and d.dtype == d0.dtype and d[0] == d0[0]
        for d in ds
    ):
        diffs: Any = const_view(d0[:1].copy(), (n, *d0.shape[1:]))
    else:
        diffs = dt.concat(ds)
    times = const_view(np.ascontiguousarray(t0, dtype=np.int64), (n, t0.shape[1]))
    return Updates(data, times, diffs, dt)


def _one_time_row(t: np.ndarray) -> np.ndarray | None:
    """The one time of every row of the time column ``t`` (shape ``(1, d)``), or None if
    its rows hold several times."""
    if not (is_zero_stride(t) or len(t) == 1 or bool((t == t[0]).all())):
        return None
    return np.ascontiguousarray(t[:1], dtype=np.int64)


def _row(batch: TraceBatch, i: int) -> tuple[int, ...]:
    return tuple(int(c[i]) for c in batch.data)


def _advanced(t: np.ndarray, f: np.ndarray) -> np.ndarray:
    """The time column ``t`` advanced by the frontier ``f``: a zero-stride view when its
    rows hold one time (so the batch made of it stays compact)."""
    if not len(t):
        return t
    one = _one_time_row(t)
    if one is None:
        return columns_advance_by(t, f)
    one = columns_advance_by(one, f)
    return const_view(one, (len(t), one.shape[1]))


def merge_ranges(a: TraceBatch, b: TraceBatch, since: Antichain) -> TraceBatch | None:
    """The merge of ``a`` (older) and ``b`` advanced by ``since``, when their ``(key, val)``
    ranges overlap in at most a quarter of their rows: the rows before the overlap, the
    overlap merged as ``Merge`` merges a chunk, and the rows after it, concatenated. None
    when the overlap is larger (``Merge`` then works through it in chunks) or the batches
    are not of this form: data columns integers of the same dtypes in both, and each batch
    holding each ``(key, val)`` once (``TraceBatch.unique_rows``). Exact: outside the
    overlap no ``(key, val)`` is in both batches nor twice in one, so advancing times makes
    none equal and consolidating would keep those rows as they are, in this order."""
    kw = a.key_width
    if not len(a) or not len(b) or kw < 1 or b.key_width != kw or a.diff_type != b.diff_type:
        return None
    if len(a.data) != len(b.data) or a.keys.dtype != b.keys.dtype:
        return None
    for x, y in zip(a.data, b.data, strict=True):
        if x.dtype != y.dtype or x.dtype.kind not in "iub":
            return None
    lo, hi = (a, b) if _row(a, 0) <= _row(b, 0) else (b, a)
    n, n_lo, n_hi = len(a) + len(b), len(lo), len(hi)
    if _row(lo, -1)[:kw] < _row(hi, 0)[:kw]:
        ka, ra, kb, rb = lo.num_keys, n_lo, 0, 0  # (no key in both)
    else:
        # the keys from hi's first to lo's last are merged; around them, rows are copied
        ka = int(np.searchsorted(lo.keys, hi.keys[:1], side="left")[0])
        kb = int(np.searchsorted(hi.keys, lo.keys[-1:], side="right")[0])
        ra, rb = int(lo.bounds[ka]), int(hi.bounds[kb])
        if (n_lo - ra) + rb > n // 4:
            return None
    if not (a.unique_rows() and b.unique_rows()):
        return None
    f = since.arr
    dt = a.diff_type
    parts = [_slice(lo, slice(0, ra))]
    mid_keys: np.ndarray | None = None
    mid_bounds: np.ndarray | None = None
    if ra < n_lo or rb > 0:
        bound = merged_bound([a, b])
        u = concat_updates([_slice(lo, slice(ra, n_lo)), _slice(hi, slice(0, rb))])
        u = u.with_times(columns_advance_by(u.times, f))
        u = consolidate(u, runs=True, bounded=bound is not None and bound <= I64_MAX)
        mid = TraceBatch(kw, u, lo.desc)  # (for its key index only)
        mid_keys, mid_bounds = mid.keys, mid.bounds
        parts.append(u)
    parts.append(_slice(hi, slice(rb, n_hi)))
    parts = [p for p in parts if len(p)]
    data = tuple(np.concatenate([p.data[i] for p in parts]) for i in range(len(a.data)))
    tparts = [_advanced(p.times, f) for p in parts]
    t0 = _one_time_row(tparts[0]) if all(is_zero_stride(t) or len(t) == 1 for t in tparts) else None
    m = len(data[0])
    if t0 is not None and all(np.array_equal(t[:1], t0) for t in tparts):
        times = const_view(t0, (m, t0.shape[1]))
    else:
        times = np.concatenate(tparts)
    ds = [p.diffs for p in parts]
    if all(isinstance(d, np.ndarray) and is_zero_stride(d) for d in ds) and all(
        d.dtype == ds[0].dtype and d[0] == ds[0][0] for d in ds
    ):
        diffs: Any = const_view(ds[0][:1].copy(), (m, *ds[0].shape[1:]))  # (e.g. all 1)
    else:
        diffs = dt.concat(ds) if len(ds) > 1 else ds[0]
    nk = ka + (0 if mid_keys is None else len(mid_keys)) + hi.num_keys - kb
    bounds = np.empty(nk + 1, np.int32 if m < 2**31 else np.int64)
    keys: np.ndarray
    if nk == m:
        # one row per key: the bounds count rows, and a key of one column is its own index
        bounds[:] = np.arange(m + 1)
        kparts = [lo.keys[:ka], *([] if mid_keys is None else [mid_keys]), hi.keys[kb:]]
        keys = data[0] if kw == 1 else np.concatenate(kparts)
    else:
        bounds[:ka] = lo.bounds[:ka]
        at, j = ra, ka
        key_parts = [lo.keys[:ka]]
        if mid_keys is not None and mid_bounds is not None:
            key_parts.append(mid_keys)
            np.add(mid_bounds[:-1], at, out=bounds[j : j + len(mid_keys)], casting="unsafe")
            at, j = at + int(mid_bounds[-1]), j + len(mid_keys)
        np.add(hi.bounds[kb:], at - rb, out=bounds[j:], casting="unsafe")
        key_parts.append(hi.keys[kb:])
        keys = np.concatenate(key_parts)
    desc = Description(a.desc.lower, b.desc.upper, since)
    out = TraceBatch(kw, Updates(data, times, diffs, dt), desc, index=(keys, bounds))
    if mid_keys is None or _one_time_row(times) is not None:
        out.set_unique_rows()  # (the merged overlap: consolidated, so unique if one time)
    ba, bb = a.diff_bound(), b.diff_bound()
    if ba is not None and bb is not None:
        # (a key's rows come from one of the two, but in the overlap: from both)
        out.set_diff_bound(max(ba, bb) if mid_keys is None else ba + bb)
    return out


def merge_interleaved(
    ua: Updates, ub: Updates, since: np.ndarray, out: list[np.ndarray] | None = None
) -> Updates | None:
    """The merge of two consolidated runs ``ua`` and ``ub`` (rows sorted by ``(key, val)``,
    each ``(key, val)`` on one row of its run) advanced by the frontier ``since``, when no
    row of ``ub`` ties with a row of ``ua`` on the leading columns that pack into one int64
    (then no ``(key, val)`` is in both and nothing adds up): the rows of ``ub`` are placed
    among those of ``ua`` by one ``searchsorted`` of those packed columns, without sorting.
    None when some row ties, or a data column is not an integer of the same dtype in both
    (the caller then sorts and adds up). Rows of one run that tie keep their order, which
    is that of the run. ``out``: columns of ``len(ua) + len(ub)`` rows, of the data
    columns' dtypes, to write the merged data columns into (they are then the result's)."""
    na, nb = len(ua), len(ub)
    if not nb or not na:
        u = ua if na else ub
        if out is not None:
            for o, c in zip(out, u.data, strict=True):
                o[...] = c
            u = Updates(tuple(out), u.times, u.diffs, u.diff_type)
        return u.with_times(_advanced(u.times, since))
    if len(ua.data) != len(ub.data) or ua.diff_type != ub.diff_type:
        return None
    for x, y in zip(ua.data, ub.data, strict=True):
        if x.dtype != y.dtype or not (
            x.dtype.kind in "ib" or (x.dtype.kind == "u" and x.itemsize < 8)
        ):
            return None
    # The leading columns whose ranges fit beside the row number in 63 bits (the first is
    # sorted: its range is read off the ends), packed with the row number of ``ua`` then
    # ``ub`` in the low bits: one sort of that (much faster than a stable argsort or a
    # searchsorted) orders the rows by those columns, ties by run then row.
    n = na + nb
    row_bits = (n - 1).bit_length()
    budget = 63 - row_bits
    # (a column that does not fit whole gives its high bits, and is the last)
    spans = []
    for j, (x, y) in enumerate(zip(ua.data, ub.data, strict=True)):
        if j == 0:
            lo, hi = min(int(x[0]), int(y[0])), max(int(x[-1]), int(y[-1]))
        else:
            lo, hi = min(int(x.min()), int(y.min())), max(int(x.max()), int(y.max()))
        spans.append((x, y, lo, (hi - lo).bit_length()))
    if sum(b for *_, b in spans) <= 62:
        # Rows that pack into one word whole: ``consolidate`` merges those with one stable
        # sort about as fast, and adds up rows in both runs (common where rows repeat:
        # such a merge would find its ties here, only to be done again there)
        return None
    fields: list[tuple[np.ndarray, np.ndarray, int, int, int]] = []
    total = 0
    for x, y, lo, bits in spans:
        if total + bits > budget:
            if budget > total:
                fields.append((x, y, lo, budget - total, bits - (budget - total)))
                total = budget
            break
        fields.append((x, y, lo, bits, 0))
        total += bits
    if not fields:
        return None
    keyed = np.empty(n, dtype=np.int64)
    ka, kb = keyed[:na], keyed[na:]
    shift = total + row_bits
    for j, (x, y, lo, bits, drop) in enumerate(fields):
        shift -= bits
        for src, dst in ((x, ka), (y, kb)):
            t = src.astype(np.int64, copy=False)
            if j == 0:
                np.subtract(t, lo, out=dst)
                if drop:
                    dst >>= drop
                if shift:
                    dst <<= shift
            else:
                t = t - lo
                if drop:
                    t >>= drop
                if shift:
                    t <<= shift
                dst |= t
    ka |= np.arange(na, dtype=np.int64)
    kb |= np.arange(na, n, dtype=np.int64)
    # (two sorted runs: a merging sort finds them and merges in linear time, 10x faster
    # than a plain sort of 10k-200k rows; the row numbers make every value distinct)
    keyed.sort(kind="stable")
    mask = (1 << row_bits) - 1
    order = keyed & mask
    prefix = keyed >> row_bits
    tie = prefix[1:] == prefix[:-1]
    if bool(tie.any()):
        # Rows that tie on the packed columns are in run order: sorted again by all their
        # columns (they are few); two equal rows (to add up) leave the merge to the caller.
        t = np.flatnonzero(tie)
        sel = np.union1d(t, t + 1)  # (positions in runs of ties, in order)
        idx = order[sel]
        in_a = idx < na
        cols = []
        for x, y in zip(ua.data, ub.data, strict=True):
            v = np.empty(len(idx), dtype=x.dtype)
            v[in_a] = x[idx[in_a]]
            v[~in_a] = y[idx[~in_a] - na]
            cols.append(v)
        group = prefix[sel]
        perm = np.lexsort((*reversed(cols), group))
        same = group[perm][1:] == group[perm][:-1]
        for v in cols:
            sv = v[perm]
            same &= sv[1:] == sv[:-1]
        if bool(same.any()):
            return None  # (a row in both runs: its diffs add up)
        order[sel] = idx[perm]
    # each row written where it goes (two scatters per column: no concatenation first)
    # (each run's rows keep their order: the k-th row of ua goes to the k-th place that
    # takes a row of ua)
    from_b = order >= na
    at_a, at_b = np.flatnonzero(~from_b), np.flatnonzero(from_b)
    data = []
    for i, (x, y) in enumerate(zip(ua.data, ub.data, strict=True)):
        col = out[i] if out is not None else np.empty(n, dtype=x.dtype)
        col[at_a] = x
        col[at_b] = y
        data.append(col)
    dt = ua.diff_type
    da, db = ua.diffs, ub.diffs
    if (
        isinstance(da, np.ndarray)
        and isinstance(db, np.ndarray)
        and is_zero_stride(da)
        and is_zero_stride(db)
        and da.dtype == db.dtype
        and da[0] == db[0]
    ):
        diffs: Any = const_view(da[:1].copy(), (n, *da.shape[1:]))
    else:
        diffs = dt.take(dt.concat([da, db]), order)
    t1, t2 = _advanced(ua.times, since), _advanced(ub.times, since)
    if is_zero_stride(t1) and is_zero_stride(t2) and np.array_equal(t1[:1], t2[:1]):
        times = const_view(np.ascontiguousarray(t1[:1]), (n, t1.shape[1]))
    else:
        times = np.concatenate((t1, t2)).take(order, axis=0)
    return Updates(tuple(data), times, diffs, dt)


def merge_runs(runs: list[Updates], since: np.ndarray) -> Updates | None:
    """The merge of several consolidated runs (rows sorted by ``(key, val)``, each
    ``(key, val)`` on one row of its run) advanced by the frontier ``since``, when no row is
    in two runs (then nothing adds up): ``merge_interleaved`` for any number of runs. The
    leading columns that fit beside the row number (of the runs one after another) in 63
    bits are packed with it, one sort of that orders the rows, rows that tie on those
    columns are sorted again by all of theirs, and each column is gathered once. None when
    two runs hold one row, a data column is not an integer of one dtype in every run, or
    the rows pack into one word whole (``consolidate``'s one sort is then as fast, and adds
    up repeated rows)."""
    runs = [u for u in runs if len(u)]
    if len(runs) < 2:
        return runs[0].with_times(_advanced(runs[0].times, since)) if runs else None
    first = runs[0]
    width, dt = len(first.data), first.diff_type
    for u in runs[1:]:
        if len(u.data) != width or u.diff_type != dt:
            return None
        for x, y in zip(first.data, u.data, strict=True):
            if x.dtype != y.dtype:
                return None
    if not all(
        x.dtype.kind in "ib" or (x.dtype.kind == "u" and x.itemsize < 8) for x in first.data
    ):
        return None
    n = sum(len(u) for u in runs)
    row_bits = (n - 1).bit_length()
    budget = 63 - row_bits
    spans = []
    for j in range(width):
        if j == 0:  # (sorted: its range read off the ends)
            lo = min(int(u.data[0][0]) for u in runs)
            hi = max(int(u.data[0][-1]) for u in runs)
        else:
            lo = min(int(u.data[j].min()) for u in runs)
            hi = max(int(u.data[j].max()) for u in runs)
        spans.append((lo, (hi - lo).bit_length()))
    if sum(b for _, b in spans) <= 62:
        return None
    cols = [np.concatenate([u.data[j] for u in runs]) for j in range(width)]
    keyed: np.ndarray | None = None
    total = 0
    for c, (lo, bits) in zip(cols, spans, strict=True):
        take = min(bits, budget - total)
        if take <= 0:
            if total >= budget:
                break
            continue  # (a column of one value)
        t = c.astype(np.int64) - lo
        if bits > take:
            t >>= bits - take  # (the last field: its high bits)
        if keyed is None:
            keyed = t
        else:
            keyed <<= take
            keyed |= t
        total += take
    assert keyed is not None
    keyed <<= row_bits
    keyed |= np.arange(n, dtype=np.int64)
    keyed.sort(kind="stable")  # (sorted runs one after another: merged, as above)
    order = keyed & ((1 << row_bits) - 1)
    prefix = keyed >> row_bits
    tie = prefix[1:] == prefix[:-1]
    if bool(tie.any()):
        # rows that tie on the packed columns: sorted again by all their columns (few)
        t = np.flatnonzero(tie)
        sel = np.union1d(t, t + 1)
        idx = order[sel]
        group = prefix[sel]
        sub = [c[idx] for c in cols]
        perm = np.lexsort((*reversed(sub), group))
        same = group[perm][1:] == group[perm][:-1]
        for v in sub:
            sv = v[perm]
            same &= sv[1:] == sv[:-1]
        if bool(same.any()):
            return None  # (a row in two runs: its diffs add up)
        order[sel] = idx[perm]
    data = tuple(c[order] for c in cols)
    ds = [u.diffs for u in runs]
    d0 = ds[0]
    if all(
        isinstance(d, np.ndarray) and is_zero_stride(d) and d.dtype == d0.dtype and d[0] == d0[0]
        for d in ds
    ):
        diffs: Any = const_view(d0[:1].copy(), (n, *d0.shape[1:]))
    else:
        diffs = dt.take(dt.concat(ds), order)
    ts = [_advanced(u.times, since) for u in runs]
    t0 = ts[0][:1]
    if all(is_zero_stride(t) and np.array_equal(t[:1], t0) for t in ts):
        times = const_view(np.ascontiguousarray(t0), (n, t0.shape[1]))
    else:
        times = np.concatenate(ts).take(order, axis=0)
    return Updates(data, times, diffs, dt)


def _int64_diffs(u: Updates) -> tuple[np.ndarray, ...] | None:
    """The diff columns of ``u`` if its diffs are ints or tuples of ints in int64 columns."""
    dt = u.diff_type
    if type(dt) is IntDiff:
        cols: tuple[np.ndarray, ...] = (u.diffs,)
    elif type(dt) is TupleDiff and all(type(p) is IntDiff for p in dt.parts):
        cols = u.diffs
    else:
        return None
    return cols if all(c.dtype == np.int64 for c in cols) else None


def merge_unique_runs(
    ua: Updates, ub: Updates, key_width: int, since: np.ndarray
) -> Updates | None:
    """The merge of two consolidated runs of a batch by one integer key column, each
    holding one row per key, whose times all advance to one time (the common case once
    compaction follows the frontier): one stable sort of the keys (a merge of the two
    runs), the diffs of keys in both added to one row (rows whose sum is zero dropped),
    without ``consolidate``'s general machinery (packing, run starts, segmented sums, one
    take per diff column). The same updates as ``consolidate`` of both, advanced by ``since``;
    None when the runs are not of that form (or the diffs not int64 ints or tuples of
    them). The caller knows that sums of a key's diffs stay in int64."""
    if key_width != 1 or len(ua.data) != 1 or since.shape[0] != 1:
        return None
    ka, kb = ua.data[0], ub.data[0]
    if ka.dtype != kb.dtype or ka.dtype.kind not in "iub":
        return None
    da, db = _int64_diffs(ua), _int64_diffs(ub)
    if da is None or db is None or ua.diff_type != ub.diff_type:
        return None
    f = since[0]
    if not (bool((ua.times <= f).all()) and bool((ub.times <= f).all())):
        return None  # (times beyond ``since`` keep their own values)
    # A stable sort of the two runs one after the other: timsort finds the two runs and
    # merges them in linear time, and a key in both has a's row just before b's.
    both = np.concatenate((ka, kb))
    order = np.argsort(both, kind="stable")
    keys = both[order]
    sums = [np.concatenate((x, y))[order] for x, y in zip(da, db, strict=True)]
    pair = np.flatnonzero(keys[1:] == keys[:-1])  # (a's row of each key in both)
    if len(pair):
        for c in sums:
            c[pair] += c[pair + 1]
        keep = np.ones(len(keys), dtype=bool)
        keep[pair + 1] = False
        zero = sums[0][pair] == 0
        for c in sums[1:]:
            zero &= c[pair] == 0
        keep[pair[zero]] = False
        keys = keys[keep]
        sums = [c[keep] for c in sums]
    dt = ua.diff_type
    m = len(keys)
    times = np.broadcast_to(f, (m, f.shape[0])).astype(np.int64)
    diffs = sums[0] if type(dt) is IntDiff else tuple(sums)
    return Updates((keys,), times, diffs, dt)


def _slice(batch: TraceBatch, rows: slice) -> Updates:
    return Updates(
        take_columns(batch.data, rows),
        batch.times[rows],
        batch.diff_type.take(batch.diffs, rows),
        batch.diff_type,
    )


def merge_all(batches: list[TraceBatch], since: Antichain) -> TraceBatch:
    """One batch holding the (adjacent, oldest first) ``batches``, times advanced by ``since``.

    Batches that each hold every ``(key, val)`` once, of integer columns, are merged as
    ``merge_runs`` merges them when no row is in two of them; otherwise (and for a few
    rows) concatenated and consolidated."""
    bound = merged_bound(batches)
    merged = None
    if (
        len(batches) > 1
        and sum(len(b) for b in batches) >= MIN_SHORTCUT_ROWS
        and all(b.unique_rows() for b in batches)
    ):
        merged = merge_runs([b.updates() for b in batches], since.arr)
    if merged is not None:
        u = merged
    else:
        u = concat_updates([b.updates() for b in batches])
        u = u.with_times(columns_advance_by(u.times, since.arr))
        u = consolidate(u, runs=True, bounded=bound is not None and bound <= I64_MAX)
    desc = Description(batches[0].desc.lower, batches[-1].desc.upper, since)
    out = TraceBatch(batches[0].key_width, u, desc)
    if bound is not None and bound <= I64_MAX:
        out.set_diff_bound(bound)
    return out
