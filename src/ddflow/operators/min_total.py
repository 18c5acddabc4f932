"""``min_total`` / ``max_total``: the least (greatest) value per key for totally ordered times,
with work per batch that grows with the batch, not with the key's history.

Records are ``(key, val)`` with int diffs; the output is ``(key, least val)`` among the
values whose accumulated count is non-zero (DD's meaning, as ``min``; negative counts
included), one record per key with diff 1, replaced by ``-1`` old / ``+1`` new at each time
the answer changes. ``max_total`` runs the same on values mapped to the reverse order:
``~x`` for ints and bools (``-x`` would overflow at -2**63), ``-x`` for floats.

Why a plain ``reduce`` degrades on skewed keys: it re-reads every value of a touched key, so a
hot key's cost grows with everything it ever received. Here, per touched key with previous
answer ``old`` (the least value with a non-zero count before the batch):

* the batch does not touch ``old``: only touched values below it can become the answer, and
  their counts before the batch are zero (``old`` is the least present value), so the key
  reads no history at all. A key whose touched values all lie above ``old`` is skipped;
* the batch touches ``old`` (the key *moves*): a forward scan from ``old`` finds the least
  present value the batch does not touch (``untouched``), reading a small window of each
  history batch's rows from ``old`` on (a history batch's rows are sorted by key, then
  value), widened until no unread row can hold a smaller value. Retracted values sit below
  ``old``, so the scan reads about as many rows as the batch removed, not the history. Only
  touched values in ``[old, untouched)`` need their counts before the batch: one
  ``searchsorted`` per history batch on a ``(key, val)`` index of it (two int columns are
  packed into one int64 code), summed through prefix sums of its diffs;
* a key without a previous answer has no value with a non-zero count: counts are zero.

Then the batch's times are walked in order, one vectorized step per distinct time over
the rows at that time: a key's answer is the least relevant touched value with a non-zero
running count, else ``untouched``. It is kept as a position among the key's relevant
values, so a time costs its own rows plus, when the answer's count drops to zero, a scan
forward to the next live value; never a pass over all of the key's values (a batch holding
many times stays about linear).

State: the previous answers. They live in an output trace (a spine compacted to the
current frontier, so about one row per key: O(keys) memory) read with the same vectorized
key lookups as any arrangement; a dict would cost a Python operation per key. The
``(key, val)`` indexes of history batches are cached per batch (built once, dropped with
the batch when the spine merges it).

The vectorized path needs columns it can compare exactly and counts that stay in int64: a
field held with one dtype throughout (not int64 in one batch and Python ints or floats in
another), values ``max`` can reverse (int64, bool, float64) and batches whose diffs cannot
add up beyond int64 for any key (``sums_fit``, from the batches' bounds). Anything
else takes the reference path, ``_reference``: each touched key's counts recomputed from its
whole history in Python, then the batch's times walked in order. Slower, exact.

Instrumentation: ``rows_read`` counts history rows read by the scans and count lookups
(tests use it to show the work does not grow with history).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ddflow.core.columns import Tup, lex_order, run_starts
from ddflow.core.diff import INT_DIFF, IntDiff
from ddflow.core.errors import DataError, DiffTypeError
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, concat_updates, consolidate
from ddflow.engine.operator import Operator, State
from ddflow.engine.worker import Worker
from ddflow.operators.arrange import Arrange
from ddflow.trace.batch import Description, TraceBatch, key_index, ranges_to_indices
from ddflow.trace.spine import Spine, sums_fit

__all__ = ["MinMaxTotal"]


class MinMaxTotal(Operator):
    """``mode`` is ``"min"`` or ``"max"``; see the module docstring."""

    wakes_on_frontier = False

    state_version = 1

    def __init__(
        self, worker: Worker, arrangement: Arrange, mode: str, name: str | None = None
    ) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        arrangement.kind.require_total(f"{mode}_total", f"{mode}()")
        super().__init__(worker, [arrangement.output], name or f"{mode}_total")
        self.arrangement = arrangement
        self.mode = mode
        self.handle = arrangement.spine.handle()
        self.out_spine = Spine(0, 1)
        self.out_h = self.out_spine.handle()
        self.spine = self.out_spine  # statistics
        self.lower = Antichain.of([(0,)], 1)
        self.rows_read = 0
        self._index: dict[int, tuple[TraceBatch, tuple[Any, ...]]] = {}
        kl, vl = arrangement.key_layout, arrangement.val_layout
        if kl is not None and vl is not None:
            self.output.layout = Tup((kl, vl))

    def state(self) -> State:
        # (the per-batch indexes are a cache, rebuilt when needed)
        return {
            "handle": self.handle.state(),
            "out_spine": self.out_spine.state(),
            "out_h": self.out_h.state(),
            "lower": self.lower,
            "rows_read": self.rows_read,
        }

    def load_state(self, state: State) -> None:
        self.handle.load_state(state["handle"])
        self.out_spine.load_state(state["out_spine"])
        self.out_h.load_state(state["out_h"])
        self.lower, self.rows_read = state["lower"], state["rows_read"]

    # -- per-batch indexes ----------------------------------------------------------------------
    def _kv(self, b: TraceBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
        """A history batch's ``(key, val)`` search index (values in sort order), the prefix
        sums of its diffs and its values in that order (cached per batch)."""
        hit = self._index.get(id(b))
        if hit is not None and hit[0] is b:
            return hit[1]
        kw = self.arrangement.key_width
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
                idx = (
                    (cols[0][order] if self.mode == "max" else cols[0]).astype(np.int64) - kmin
                ) << vbits | (vals.astype(np.int64) - vmin)
        self._index[id(b)] = (b, (idx, cs, vals, packer))
        return idx, cs, vals, packer

    @staticmethod
    def _query(
        kv: tuple[Any, ...], kcols: list[np.ndarray], v: np.ndarray, exact: bool
    ) -> np.ndarray:
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
        """Values in the order the path works in: as they are for ``min``, reversed for
        ``max`` (``~x`` for ints and bools, exact at -2**63; ``-x`` for floats). Mapping
        twice gives the values back."""
        if self.mode == "min":
            return col
        if col.dtype.kind in "ib":
            return ~col
        if col.dtype.kind == "f":
            return -col
        raise DataError(f"max_total needs numeric values (got {col.dtype}); use max()")

    # -- driver ----------------------------------------------------------------------------------
    def run(self, frontier: Antichain) -> None:
        batches = self.take()
        if batches:
            kl, vl = self.arrangement.key_layout, self.arrangement.val_layout
            if kl is None or vl is None or vl.width != 1:
                raise DataError(f"'{self.name}' needs (key, value) records with a single value")
            if not isinstance(batches[0].diff_type, IntDiff):
                raise DiffTypeError(
                    f"'{self.name}' needs int diffs, got {batches[0].diff_type.name}"
                )
            out = self._run(batches, self.lower)
        else:
            out = None
        upper = frontier
        if out is not None and len(out):
            self.out_spine.insert(
                TraceBatch.build(
                    self.arrangement.key_width,
                    out,
                    Description(self.lower, upper, self.out_spine.logical),
                )
            )
        else:
            self.out_spine.advance_upper(upper)
        self.lower = upper
        self.out_h.set_compaction(upper, upper)
        self.handle.set_compaction(upper, upper)
        live = {id(b) for b in self.arrangement.spine.batches()}
        self._index = {k: v for k, v in self._index.items() if k in live}
        if out is not None and len(out):
            kl, vl = self.arrangement.key_layout, self.arrangement.val_layout
            assert kl is not None and vl is not None
            self.output.push(out, Tup((kl, vl)))

    def _run(self, batches: list[TraceBatch], lower: Antichain) -> Updates | None:
        kw = self.arrangement.key_width
        nb = (
            batches[0]
            if len(batches) == 1
            else TraceBatch.build(
                kw, concat_updates([b.updates() for b in batches]), batches[0].desc
            )
        )
        if not len(nb):
            return None
        history = self.arrangement.spine.batches_through(lower)
        if not self._vectorizable(nb, history):
            return self._reference(nb, history)
        vals = self._vals(nb.data[kw])  # in sort order (reversed for max)
        # touched pairs (key, val), sorted: rows of nb are sorted by (key, val, time)
        # (for max the negated values sort the other way, so sort the pairs again)
        pcols = list(nb.data[:kw]) + [vals]
        order = lex_order(pcols) if self.mode == "max" else np.arange(len(nb))
        pcols = [c[order] for c in pcols]
        pstarts = run_starts(pcols, len(nb))
        pairs = [c[pstarts] for c in pcols]
        npairs = len(pstarts)
        pvals = pairs[kw]
        kstarts = run_starts(pairs[:kw], npairs)
        keys = [c[kstarts] for c in pairs[:kw]]
        kidx = key_index(keys)
        nk = len(kstarts)
        pair_key = np.repeat(np.arange(nk), np.diff(np.append(kstarts, npairs)))
        row_pair = np.empty(len(nb), dtype=np.int64)
        row_pair[order] = np.repeat(np.arange(npairs), np.diff(np.append(pstarts, len(nb))))
        # the previous extreme of each touched key; a key "moves" when the batch touches it
        old, has_old = self._old_min(kidx, nk, vals.dtype)
        at_old = np.zeros(npairs, dtype=bool)
        ho = np.flatnonzero(has_old[pair_key])
        if len(ho):
            at_old[ho] = np.asarray(pvals[ho] == old[pair_key[ho]], dtype=bool)
        moved = np.zeros(nk, dtype=bool)
        moved[pair_key[at_old]] = True
        # the least present value the batch does not touch: the old extreme if untouched,
        # else found by scanning forward from it
        unt, has_unt = old.copy(), has_old & ~moved
        mk = np.flatnonzero(moved)
        if len(mk):
            unt[mk], has_unt[mk] = self._scan(history, keys, kidx, key_index(pairs), old, mk)
        # only touched values below it can be the answer during the batch
        rel = ~has_unt[pair_key]
        hu = np.flatnonzero(~rel)
        if len(hu):
            rel[hu] = np.asarray(pvals[hu] < unt[pair_key[hu]], dtype=bool)
        rp = np.flatnonzero(rel)
        if not len(rp):
            return None  # every touched value lies above an untouched present one
        # their counts before the batch: zero below the old extreme (the least present value)
        # and for keys with none; looked up only for moved keys' values in [old, untouched)
        hist = np.zeros(len(rp), dtype=np.int64)
        rk = pair_key[rp]
        need = np.flatnonzero(moved[rk])
        if len(need):
            need = need[np.asarray(pvals[rp[need]] >= old[rk[need]], dtype=bool)]
        if len(need):
            q = rp[need]
            hist[need] = self._counts(history, [c[q] for c in pairs[:kw]], pvals[q])
        return self._walk(nb, rp, hist, row_pair, pair_key, pvals, keys, unt, has_unt)

    def _vectorizable(self, nb: TraceBatch, history: list[TraceBatch]) -> bool:
        """Whether the vectorized path is exact here (see the module docstring): one dtype
        per key and value column in the batch, the history and the output, values ``max``
        can reverse, and int64 diffs whose sums cannot leave int64."""
        kw = self.arrangement.key_width
        dtypes = [c.dtype for c in nb.data[: kw + 1]]
        if self.mode == "max" and dtypes[kw].kind not in "ibf":
            numbers = dtypes[kw].kind == "O" and all(
                issubclass(t, (int, float, np.number)) for t in set(map(type, nb.data[kw]))
            )
            if not numbers:
                raise DataError(f"'{self.name}' needs numeric values (got {dtypes[kw]}); use max()")
            return False  # Python ints beyond int64 (or beside floats): the reference path
        if not sums_fit([*history, nb]):  # (counts are sums of one key's diffs)
            return False
        for b in history:
            if [c.dtype for c in b.data[: kw + 1]] != dtypes:
                return False
        return all([c.dtype for c in b.data[: kw + 1]] == dtypes for b in self.out_spine.batches())

    def _reference(self, nb: TraceBatch, history: list[TraceBatch]) -> Updates | None:
        """The output changes for batch ``nb``, in Python: each touched key's counts per
        value from its whole history (exact ints, values compared as Python compares them),
        its answer before the batch, then the batch's rows in time order, the answer
        recomputed for each key touched at each time."""
        kw = self.arrangement.key_width
        kl, vl = self.arrangement.key_layout, self.arrangement.val_layout
        assert kl is not None and vl is not None
        nk = nb.num_keys
        counts: list[dict[Any, int]] = [{} for _ in range(nk)]
        hist_u, owner = self.arrangement.spine.gather(nb.keys, history)
        if hist_u is not None:
            self.rows_read += len(hist_u)
            for o, v, d in zip(
                owner.tolist(),
                vl.to_records(hist_u.data[kw:], len(hist_u)),
                hist_u.diff_type.to_values(hist_u.diffs),
                strict=True,
            ):
                counts[o][v] = counts[o].get(v, 0) + d
        pick = min if self.mode == "min" else max

        def answer(c: dict[Any, int]) -> list[Any]:
            live = [v for v, n in c.items() if n != 0]
            if not live:
                return []
            try:
                return [pick(live)]
            except TypeError as e:
                raise DataError(f"'{self.name}': values of one key cannot be ordered ({e})") from e

        current = [answer(c) for c in counts]
        keys = kl.to_records(tuple(c[nb.bounds[:-1]] for c in nb.data[:kw]), nk)
        row_key = np.repeat(np.arange(nk), np.diff(nb.bounds)).tolist()
        vals = vl.to_records(nb.data[kw:], len(nb))
        diffs = nb.diff_type.to_values(nb.diffs)
        times = nb.times[:, 0].tolist()
        recs: list[tuple[Any, Any]] = []
        out_t: list[int] = []
        out_d: list[int] = []
        rows = sorted(range(len(nb)), key=times.__getitem__)
        for i, row in enumerate(rows):
            k = row_key[row]
            counts[k][vals[row]] = counts[k].get(vals[row], 0) + diffs[row]
            t = times[row]
            if i + 1 < len(rows) and times[rows[i + 1]] == t:
                continue
            # the end of time t: every key touched at t gets its new answer
            j = i
            touched = set()
            while j >= 0 and times[rows[j]] == t:
                touched.add(row_key[rows[j]])
                j -= 1
            for k in sorted(touched):
                new = answer(counts[k])
                if new == current[k]:
                    continue
                for v in current[k]:
                    recs.append((keys[k], v))
                    out_t.append(t)
                    out_d.append(-1)
                for v in new:
                    recs.append((keys[k], v))
                    out_t.append(t)
                    out_d.append(1)
                current[k] = new
        if not recs:
            return None
        cols = Tup((kl, vl)).to_columns(recs)
        return consolidate(
            Updates(
                cols,
                np.array(out_t, dtype=np.int64).reshape(-1, 1),
                np.array(out_d, dtype=np.int64),
                INT_DIFF,
            )
        )

    def _walk(
        self,
        nb: TraceBatch,
        rp: np.ndarray,
        cnt: np.ndarray,
        row_pair: np.ndarray,
        pair_key: np.ndarray,
        pvals: np.ndarray,
        keys: list[np.ndarray],
        unt: np.ndarray,
        has_unt: np.ndarray,
    ) -> Updates | None:
        """Walks the batch's times in order over the relevant pairs ``rp`` (``cnt``: their
        counts before the batch), keeping per key the position of its answer: the least
        relevant pair with a non-zero count, else (``NONE``) the untouched value.

        At a time, only the keys with rows then can change: the answer becomes the least
        of (a) the pairs updated then that are now live and (b) the previous answer if still
        live, or else the first live pair after it (pairs before it not updated then stay
        dead), found by a forward scan in doubling windows. So a time costs its rows plus
        the scans, never the key's other pairs. A change emits ``-1`` for the old answer and
        ``+1`` for the new one.
        """
        npairs = len(pair_key)
        local = np.full(npairs, -1, dtype=np.int64)
        local[rp] = np.arange(len(rp))
        rk = pair_key[rp]  # sorted: pairs are in (key, val) order
        rvals = pvals[rp]
        span_hi = np.searchsorted(rk, rk, "right")  # end of each pair's key span
        none = len(rp)  # position meaning "no live relevant pair"
        # the answer before the batch: the first pair with a non-zero count (or none)
        ans = np.full(len(keys[0]), none, dtype=np.int64)
        live0 = np.flatnonzero(cnt != 0)
        if len(live0):
            lk = rk[live0]
            first = np.append(True, lk[1:] != lk[:-1])
            ans[lk[first]] = live0[first]
        rows = np.flatnonzero(local[row_pair] >= 0)
        times = nb.times[rows, 0]
        by_time = lex_order([times, local[row_pair[rows]]])  # by time, then pair
        rows, times = rows[by_time], times[by_time]
        tstarts = np.flatnonzero(np.append(True, times[1:] != times[:-1]))
        tends = np.append(tstarts[1:], len(rows))
        parts: list[Updates] = []
        for a, b in zip(tstarts.tolist(), tends.tolist(), strict=True):
            r = rows[a:b]
            lp = local[row_pair[r]]  # distinct (the batch is consolidated), ascending
            cnt[lp] += nb.diffs[r]
            kr = rk[lp]
            kstart = np.append(True, kr[1:] != kr[:-1])
            k = kr[kstart]  # keys with rows at this time
            # (a) the least updated pair now live, per key
            best = np.full(len(k), none, dtype=np.int64)
            lv = np.flatnonzero(cnt[lp] != 0)
            if len(lv):
                owner = np.cumsum(kstart)[lv] - 1
                fo = np.append(True, owner[1:] != owner[:-1])
                best[owner[fo]] = lp[lv[fo]]
            # (b) the previous answer, or the first live pair after it if it died
            prev = ans[k]
            has = prev != none
            died = np.flatnonzero(has & (cnt[np.minimum(prev, none - 1)] == 0))
            keep = np.flatnonzero(has)
            keep = keep[np.asarray(cnt[prev[keep]] != 0, dtype=bool)]
            best[keep] = np.minimum(best[keep], prev[keep])
            if len(died):
                best[died] = np.minimum(
                    best[died], self._next_live(cnt, prev[died] + 1, span_hi[prev[died]], none)
                )
            ch = np.flatnonzero(best != prev)
            if not len(ch):
                continue
            kk, old_p, new_p = k[ch], prev[ch], best[ch]
            ans[kk] = new_p
            t = int(times[a])
            for sign, pos in ((-1, old_p), (1, new_p)):
                pv = pos != none
                ku = kk[~pv][has_unt[kk[~pv]]]
                if len(ku):  # the untouched value was (becomes) the answer
                    parts.append(self._rows(keys, ku, unt[ku], t, sign))
                if pv.any():
                    parts.append(self._rows(keys, kk[pv], rvals[pos[pv]], t, sign))
        if not parts:
            return None
        return consolidate(concat_updates(parts))

    @staticmethod
    def _next_live(cnt: np.ndarray, start: np.ndarray, end: np.ndarray, none: int) -> np.ndarray:
        """Per range ``[start, end)`` of pairs, the first with a non-zero count (``none`` if
        none), reading windows that double until found or the range ends."""
        out = np.full(len(start), none, dtype=np.int64)
        todo = np.arange(len(start))
        window = 8
        while len(todo):
            en = np.minimum(start[todo] + window, end[todo])
            idx, owner = ranges_to_indices(start[todo], en)
            lv = np.flatnonzero(cnt[idx] != 0)
            found = np.zeros(len(todo), dtype=bool)
            if len(lv):
                o = owner[lv]
                fo = np.append(True, o[1:] != o[:-1])
                out[todo[o[fo]]] = idx[lv[fo]]
                found[o[fo]] = True
            more = ~found & (en < end[todo])
            start = start.copy()
            start[todo[more]] = en[more]
            todo = todo[more]
            window *= 2
        return out

    def _counts(
        self, history: list[TraceBatch], kcols: list[np.ndarray], v: np.ndarray
    ) -> np.ndarray:
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

    def _rows(
        self, keys: list[np.ndarray], k: np.ndarray, v: np.ndarray, t: int, sign: int
    ) -> Updates:
        n = len(k)
        vcol = self._vals(v)  # (reversing twice gives the values back)
        return Updates(
            tuple(c[k] for c in keys) + (vcol,),
            np.full((n, 1), t, np.int64),
            np.full(n, sign, np.int64),
            INT_DIFF,
        )

    def _old_min(self, kidx: np.ndarray, nk: int, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
        """The current output value (in sort order) of each touched key, and whether it has one."""
        vals = np.empty(nk, dtype=dtype)
        has = np.zeros(nk, dtype=bool)
        u, owner = self.out_spine.gather(kidx, self.out_spine.batches())
        if u is not None and len(u):
            kw = self.arrangement.key_width
            # an output key accumulates to exactly one value with count 1
            c = consolidate(
                Updates(
                    (owner, self._vals(u.data[kw])),
                    np.zeros((len(u), 1), np.int64),
                    u.diffs,
                    u.diff_type,
                )
            )
            live = np.flatnonzero(c.diffs != 0)
            o = c.data[0][live]
            vals[o] = c.data[1][live]
            has[o] = True
        return vals, has

    def _scan(
        self,
        history: list[TraceBatch],
        keys: list[np.ndarray],
        kidx: np.ndarray,
        pidx: np.ndarray,
        old: np.ndarray,
        todo: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """For the keys ``todo`` (whose old extreme the batch touches), the least value present
        before the batch and not touched by it, and whether there is one.

        Reads, in each history batch, a window of the key's rows from the old extreme on
        (values below it have a zero count), widening the window (x4) for keys whose answer
        is not yet certain: an unread row could hold a smaller value only when some batch
        was cut off at a value below the best found.
        """
        out = np.empty(len(todo), dtype=old.dtype)
        has = np.zeros(len(todo), dtype=bool)
        pos = np.arange(len(todo))  # position in ``todo`` of the keys still open
        window = 8
        if not history:  # no key has an old extreme without one
            return out, has
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
            has[pos[done_found]] = True
            out[pos[done_found]] = best[done_found]
            done = done_found | (~found & ~bounded)
            todo, pos = todo[~done], pos[~done]
            window *= 4
        return out, has


def _member(sorted_idx: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Whether each of ``q`` is in the sorted array ``sorted_idx``."""
    if not len(sorted_idx) or not len(q):
        return np.zeros(len(q), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_idx, q), len(sorted_idx) - 1)
    return np.asarray(sorted_idx[pos] == q, dtype=bool)
