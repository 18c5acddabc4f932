"""``min_total`` / ``max_total``: the least (greatest) value per key for totally ordered times,
with work per batch that grows with the batch, not with the key's history (seed 003).

Records are ``(key, val)`` with int diffs; the output is ``(key, least val)`` among the
values whose accumulated count is non-zero (DD's meaning, as ``min``), with diff 1.

Why a plain ``reduce`` degrades (seed 003): it re-reads every value of a touched key, so a
hot key's cost grows with everything it ever received. Here a batch needs, per touched key:

* the counts before the batch of the values the batch touches: one ``searchsorted`` per
  history batch on a ``(key, val)`` index of that batch (its rows are sorted by key, then
  value), summed through prefix sums of the batch's diffs;
* the least value present before the batch that the batch does *not* touch. That is the
  previous output (the old minimum) when the batch leaves it alone; otherwise a forward scan
  from the old minimum, reading a small window of each history batch's rows (doubled until
  the answer is certain: no unread row can hold a smaller value), so it reads as many rows
  as the batch retracted, not the key's history.

Then, time by time through the batch (one step per distinct time in it), the minimum is the
smaller of the least touched value whose running count is non-zero and the least untouched
one. The previous minimum of each key comes from an output trace compacted to one row per
key. ``max_total`` runs the same on negated (numeric) values.

Instrumentation: ``rows_read`` counts history rows read by the scans and lookups (tests use
it to show the work does not grow with history).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ddflow.core.columns import Tup, lex_order, run_starts
from ddflow.core.diff import INT_DIFF, IntDiff
from ddflow.core.errors import DataError, DiffTypeError, TimeError
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, concat_updates, consolidate
from ddflow.operators.arrange import Arrange
from ddflow.runtime.worker import Operator, Worker
from ddflow.trace.batch import Description, TraceBatch, key_index
from ddflow.trace.spine import Spine

__all__ = ["MinMaxTotal"]


class MinMaxTotal(Operator):
    """``mode`` is ``"min"`` or ``"max"``; see the module docstring."""

    def __init__(self, worker: Worker, arr: Arrange, mode: str, name: str | None = None) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        if not arr.kind.total:
            raise TimeError(
                f"{mode}_total needs totally ordered (int) times; this worker has "
                f"{arr.kind.describe()} times: use {mode}() instead"
            )
        super().__init__(worker, [arr.output], name or f"{mode}_total")
        self.arr = arr
        self.mode = mode
        self.handle = arr.spine.handle()
        self.out_spine = Spine(0, 1)
        self.out_h = self.out_spine.handle()
        self.spine = self.out_spine  # statistics
        self.lower = Antichain.of([(0,)], 1)
        self.rows_read = 0
        self._index: dict[int, tuple[TraceBatch, tuple[Any, ...]]] = {}

    # -- per-batch indexes ----------------------------------------------------------------------
    def _kv(self, b: TraceBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
        """A history batch's ``(key, val)`` search index (values in sort order), the prefix
        sums of its diffs and its values in that order (cached per batch)."""
        hit = self._index.get(id(b))
        if hit is not None and hit[0] is b:
            return hit[1]
        kw = self.arr.key_width
        cols = list(b.data[: kw + 1])
        vals = self._vals(cols[kw])
        if self.mode == "max":
            # the batch's rows sort by (key, val); negated values need their own order
            order = lex_order(cols[:kw] + [vals])
            vals = vals[order]
            idx = key_index([c[order] for c in cols[:kw]] + [vals])
            d = b.diffs[order]
        else:
            idx, d = key_index(cols), b.diffs
        cs = np.concatenate([np.zeros(1, np.int64), np.cumsum(d)])
        packer = None
        if kw == 1 and len(vals) and cols[0].dtype.kind in "iu" and vals.dtype.kind in "iu":
            kmin, kmax = int(b.keys[0]), int(b.keys[-1])
            vmin, vmax = int(vals.min()), int(vals.max())
            vbits = (vmax - vmin + 1).bit_length()
            if (kmax - kmin + 1).bit_length() + vbits <= 62:
                packer = (kmin, kmax, vmin, vmax, vbits)
                # one int64 per row ordering like (key, val): searches compare ints, not
                # structured records
                idx = ((cols[0][order] if self.mode == "max" else cols[0]).astype(np.int64)
                       - kmin) << vbits | (vals.astype(np.int64) - vmin)
        self._index[id(b)] = (b, (idx, cs, vals, packer))
        return idx, cs, vals, packer

    @staticmethod
    def _query(kv: tuple[Any, ...], kcols: list[np.ndarray], v: np.ndarray,
               exact: bool) -> np.ndarray:
        """Queries ``(key, val)`` in a batch's index space: exact lookups never match a
        value outside the batch's range; positions clamp it."""
        packer = kv[3]
        if packer is None:
            return key_index(list(kcols) + [v])
        kmin, kmax, vmin, vmax, vbits = packer
        k = kcols[0].astype(np.int64)
        vv = v.astype(np.int64)
        out = ((np.clip(k, kmin, kmax) - kmin) << vbits) | (np.clip(vv, vmin, vmax + 1) - vmin)
        bad = (k < kmin) | (k > kmax)
        if exact:
            bad |= (vv < vmin) | (vv > vmax)
        out[bad] = -1
        return out

    def _vals(self, col: np.ndarray) -> np.ndarray:
        if self.mode == "min":
            return col
        if col.dtype.kind not in "iuf":
            raise DataError(f"max_total needs numeric values (got {col.dtype}); use max()")
        return -col

    # -- driver ----------------------------------------------------------------------------------
    def run(self, frontier: Antichain) -> None:
        batches = self.take()
        if batches:
            kl, vl = self.arr.key_layout, self.arr.val_layout
            if kl is None or vl is None or vl.width != 1:
                raise DataError(f"'{self.name}' needs (key, value) records with a single value")
            if not isinstance(batches[0].diff_type, IntDiff):
                raise DiffTypeError(
                    f"'{self.name}' needs int diffs, got {batches[0].diff_type.name}")
            out = self._run(batches, self.lower)
        else:
            out = None
        upper = frontier
        if out is not None and len(out):
            self.out_spine.insert(TraceBatch.build(self.arr.key_width, out,
                                                   Description(self.lower, upper,
                                                               self.out_spine.logical)))
        else:
            self.out_spine.advance_upper(upper)
        self.lower = upper
        self.out_h.set_compaction(upper, upper)
        self.handle.set_compaction(upper, upper)
        live = {id(b) for b in self.arr.spine.batches()}
        self._index = {k: v for k, v in self._index.items() if k in live}
        if out is not None and len(out):
            assert self.arr.key_layout is not None and self.arr.val_layout is not None
            self.output.push(out, Tup((self.arr.key_layout, self.arr.val_layout)))

    def _run(self, batches: list[TraceBatch], lower: Antichain) -> Updates | None:
        kw = self.arr.key_width
        nb = batches[0] if len(batches) == 1 else TraceBatch.build(
            kw, concat_updates([b.updates() for b in batches]), batches[0].desc)
        if not len(nb):
            return None
        history = self.arr.spine.batches_through(lower)
        vals = self._vals(nb.data[kw])  # in sort order (negated for max)
        # touched pairs (key, val), sorted: rows of nb are sorted by (key, val, time)
        # (for max the negated values sort the other way, so sort the pairs again)
        pcols = list(nb.data[:kw]) + [vals]
        order = lex_order(pcols) if self.mode == "max" else np.arange(len(nb))
        pcols = [c[order] for c in pcols]
        pstarts = run_starts(pcols, len(nb))
        pairs = [c[pstarts] for c in pcols]
        pidx = key_index(pairs)
        npairs = len(pstarts)
        pvals = pairs[kw]
        kstarts = run_starts(pairs[:kw], npairs)
        keys = [c[kstarts] for c in pairs[:kw]]
        kidx = key_index(keys)
        nk = len(kstarts)
        pair_key = np.repeat(np.arange(nk), np.diff(np.append(kstarts, npairs)))
        row_pair = np.empty(len(nb), dtype=np.int64)
        row_pair[order] = np.repeat(np.arange(npairs), np.diff(np.append(pstarts, len(nb))))
        # counts before the batch of the touched pairs
        hist = self._counts(history, pairs[:kw], pvals)
        # the previous minimum of each touched key, and the least untouched present value
        old, has_old = self._old_min(kidx, nk, vals.dtype)
        unt, has_unt = self._untouched_min(history, keys, kidx, pidx, old, has_old, nk)
        cnt = hist.copy()
        cur, cur_has = old.copy(), has_old.copy()
        times = nb.times[:, 0]
        parts: list[Updates] = []
        for t in np.unique(times).tolist():
            rows = np.flatnonzero(times == t)
            np.add.at(cnt, row_pair[rows], nb.diffs[rows])
            k = np.unique(pair_key[row_pair[rows]])  # keys changed at t
            live = np.flatnonzero(cnt != 0)
            tm_has = np.zeros(nk, dtype=bool)
            tm = np.empty(nk, dtype=vals.dtype)
            if len(live):
                lk = pair_key[live]
                first = np.ones(len(live), dtype=bool)
                first[1:] = lk[1:] != lk[:-1]
                tm[lk[first]] = pvals[live[first]]
                tm_has[lk[first]] = True
            both = tm_has[k] & has_unt[k]
            use_t = tm_has[k] & ~has_unt[k]
            if both.any():
                bi = np.flatnonzero(both)
                use_t[bi] = np.asarray(tm[k[bi]] <= unt[k[bi]], dtype=bool)
            new_has = tm_has[k] | has_unt[k]
            new = np.where(use_t, tm[k], unt[k]) if len(k) else tm[k]
            same = new_has == cur_has[k]
            sb = np.flatnonzero(same & new_has)
            if len(sb):
                same[sb] = np.asarray(new[sb] == cur[k[sb]], dtype=bool)
            ch = np.flatnonzero(~same)
            if not len(ch):
                continue
            kk = k[ch]
            ret = kk[cur_has[kk]]
            add_mask = new_has[ch]
            if len(ret):
                parts.append(self._rows(keys, ret, cur[ret], t, -1))
            if add_mask.any():
                parts.append(self._rows(keys, kk[add_mask], new[ch][add_mask], t, 1))
            cur[kk] = new[ch]
            cur_has[kk] = new_has[ch]
        if not parts:
            return None
        return consolidate(concat_updates(parts))

    def _counts(self, history: list[TraceBatch], kcols: list[np.ndarray],
                v: np.ndarray) -> np.ndarray:
        """Accumulated count before the batch of each ``(key, val)`` (values in sort order)."""
        total = np.zeros(len(v), dtype=np.int64)
        for b in history:
            kv = self._kv(b)
            idx, cs = kv[0], kv[1]
            idx_q = self._query(kv, kcols, v, exact=True)
            lo = np.searchsorted(idx, idx_q, "left")
            hi = np.searchsorted(idx, idx_q, "right")
            total += cs[hi] - cs[lo]
            self.rows_read += int((hi - lo).sum())
        return total

    def _rows(self, keys: list[np.ndarray], k: np.ndarray, v: np.ndarray, t: int,
              sign: int) -> Updates:
        n = len(k)
        vcol = v if self.mode == "min" else -v
        return Updates(tuple(c[k] for c in keys) + (vcol,), np.full((n, 1), t, np.int64),
                       np.full(n, sign, np.int64), INT_DIFF)

    def _old_min(self, kidx: np.ndarray, nk: int, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
        """The current output value (in sort order) of each touched key, and whether it has one."""
        vals = np.empty(nk, dtype=dtype)
        has = np.zeros(nk, dtype=bool)
        u, owner = self.out_spine.gather(kidx, self.out_spine.batches())
        if u is not None and len(u):
            kw = self.arr.key_width
            # an output key accumulates to exactly one value with count 1
            c = consolidate(Updates((owner, self._vals(u.data[kw])),
                                    np.zeros((len(u), 1), np.int64), u.diffs, u.diff_type))
            live = np.flatnonzero(c.diffs != 0)
            o = c.data[0][live]
            vals[o] = c.data[1][live]
            has[o] = True
        return vals, has

    def _untouched_min(self, history: list[TraceBatch], keys: list[np.ndarray],
                       kidx: np.ndarray, pidx: np.ndarray, old: np.ndarray,
                       has_old: np.ndarray, nk: int) -> tuple[np.ndarray, np.ndarray]:
        """Per touched key, the least value present before the batch and not touched by it."""
        out = np.empty(nk, dtype=old.dtype)
        has = np.zeros(nk, dtype=bool)
        ko = np.flatnonzero(has_old)
        if not len(ko) or not history:
            return out, has
        # the old minimum is the least present value: if the batch leaves it alone, keep it
        op = key_index([c[ko] for c in keys] + [old[ko]])
        touched_old = _member(pidx, op)
        keep = ko[~touched_old]
        has[keep] = True
        out[keep] = old[keep]
        todo = ko[touched_old]
        window = 8
        while len(todo):
            tk = [c[todo] for c in keys]
            ck_parts, cv_parts = [], []
            bound = np.empty(len(todo), dtype=old.dtype)
            bounded = np.zeros(len(todo), dtype=bool)
            for b in history:
                kv = self._kv(b)
                idx, bvals = kv[0], kv[2]
                st = np.searchsorted(idx, self._query(kv, tk, old[todo], exact=False), "left")
                kpos = np.searchsorted(b.keys, kidx[todo])
                kposc = np.minimum(kpos, len(b.keys) - 1)
                present = b.keys[kposc] == kidx[todo]
                kend = np.where(present, b.bounds[kposc + 1], st)
                en = np.minimum(st + window, kend)
                trunc = np.flatnonzero(en < kend)
                if len(trunc):
                    # rows not read hold values >= the first unread one of that batch
                    v = bvals[en[trunc]]
                    nb_ = ~bounded[trunc]
                    upd = np.flatnonzero(nb_)
                    bound[trunc[upd]] = v[upd]
                    bounded[trunc[upd]] = True
                    old_b = np.flatnonzero(~nb_)
                    if len(old_b):
                        lower_v = np.asarray(v[old_b] < bound[trunc[old_b]], dtype=bool)
                        bound[trunc[old_b[lower_v]]] = v[old_b[lower_v]]
                lens = np.maximum(en - st, 0)
                tot = int(lens.sum())
                offsets = np.arange(tot) - np.repeat(np.cumsum(lens) - lens, lens)
                rows = np.repeat(st, lens) + offsets
                self.rows_read += tot
                ck_parts.append(np.repeat(np.arange(len(todo)), lens))
                cv_parts.append(bvals[rows])
            ck = np.concatenate(ck_parts)
            cv = np.concatenate(cv_parts)
            ckeys = [c[todo][ck] for c in keys]
            cidx = key_index(ckeys + [cv])
            total = self._counts(history, ckeys, cv)
            ok = np.flatnonzero((total != 0) & ~_member(pidx, cidx))
            found = np.zeros(len(todo), dtype=bool)
            best = np.empty(len(todo), dtype=old.dtype)
            if len(ok):
                o = ok[lex_order((ck[ok], cv[ok]))]
                first = np.ones(len(o), dtype=bool)
                first[1:] = ck[o][1:] != ck[o][:-1]
                f = o[first]
                found[ck[f]] = True
                best[ck[f]] = cv[f]
            certain = ~bounded.copy()
            fb = np.flatnonzero(found & bounded)
            if len(fb):
                certain[fb] = np.asarray(best[fb] <= bound[fb], dtype=bool)
            done_found = found & certain
            has[todo[done_found]] = True
            out[todo[done_found]] = best[done_found]
            done = done_found | (~found & ~bounded)
            todo = todo[~done]
            window *= 4
        return out, has


def _member(sorted_idx: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Whether each of ``q`` is in the sorted array ``sorted_idx``."""
    if not len(sorted_idx) or not len(q):
        return np.zeros(len(q), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_idx, q), len(sorted_idx) - 1)
    return np.asarray(sorted_idx[pos] == q, dtype=bool)
