"""The spine: a trace kept as a few immutable batches of geometrically decreasing size.

New batches are appended; whenever the youngest batch is at least half the size of the one
before it, the two are merged, so at most a logarithmic number of batches exist and a lookup
searches each once. Merges are *progressive*: a large merge advances by a bounded amount of
work ("fuel", proportional to the updates inserted) each time a batch is inserted, and its
two source batches stay readable until it completes, so no single insert pays for a large
merge. Small merges (below ``eager_rows``) finish at once, where their fixed cost is lowest.

Compaction: each merge advances its times by the *logical* compaction frontier (the meet of
every reader's ``since``), so times no reader can tell apart collapse and cancelling updates
vanish. *Physical* compaction: a batch enters the merge structure only once every reader's
physical frontier has passed its upper; until then it waits in ``queued``, so each reader can
still see the trace "through" the batches it has processed (``batches_through``).

Readers hold ``TraceHandle``s; a closed handle releases its hold on both frontiers.

What a merge computes is in ``ddflow.trace.merge``; this module decides when to merge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ddflow.core.diff import I64_MAX, FloatDiff, IntDiff, TupleDiff
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, concat_updates
from ddflow.trace.batch import TraceBatch, buffer_nbytes, merged_bound
from ddflow.trace.merge import Merge, merge_all

__all__ = [
    "MergeListener",
    "Spine",
    "TraceHandle",
    "int_key_sums_small",
    "tuple_key_sums_small",
    "key_sums",
    "sums_fit",
]

#: told of every merge the spine completes: ``(sources oldest first, since, result)``
MergeListener = Callable[[Sequence[TraceBatch], Antichain, TraceBatch], None]


class Spine:
    """A trace: batches of geometrically decreasing size, merged progressively and compacted.

    ``effort`` scales merge fuel per inserted update (2 suffices to finish each merge before
    it is needed again; more work up front lowers the number of batches readers search).
    ``effort=None`` merges at once: every merge is completed when it starts (no merge work
    carried between inserts, and the fewest batches, at the price of an insert that starts a
    large merge waiting for all of it).

    ``fanin``: how many batches of one size class a merge takes. ``2`` (the default) is the
    geometric spine above, where each update is merged again about ``log2(n / batch)``
    times. With ``fanin = k > 2`` the spine is *tiered*: batches of one size class
    (``k**i <= rows < k**(i+1)``) wait until ``k`` of them end the trace, then are merged at
    once into one of a class above, so each update is merged about ``log_k(n / batch)``
    times, and readers search up to ``k - 1`` batches per class. For traces written much
    more than they are read, such as a join's large input whose other side rarely changes;
    merges are then complete when they start (``effort`` is not used).

    ``fanin="auto"``: the spine picks between the two from how it is used. Every
    ``AUTO_WINDOW`` inserted batches it looks at how many reads (``batches_through`` on a
    trace holding batches) came meanwhile: fewer than one in ``AUTO_READS`` inserts, and it
    is tiered with fanin ``AUTO_FANIN`` (written much more than read: fewer merges pay);
    once reads catch up again (as many reads as ``AUTO_READS`` and as inserts since the
    window began), it is geometric again at once, its tiered tail merged back into
    geometric sizes before the read that tipped it, so a trace that is mostly read keeps
    few batches to search; at the end of a window with more reads than that, it is
    geometric too. What a reader sees does not depend on the choice (every batch
    holds the same updates either way; only how they are grouped into batches differs).
    """

    #: ``fanin="auto"``: inserted batches between two looks at the reads
    AUTO_WINDOW = 16
    #: ``fanin="auto"``: tiered when reads are fewer than one per this many inserts
    AUTO_READS = 8
    #: ``fanin="auto"``: the fanin of the tiered form
    AUTO_FANIN = 16

    #: the format of ``state()``: raise it whenever what ``state()`` holds changes (its keys
    #: or a value's meaning); it enters every checkpoint's fingerprint
    state_version = 1

    def __init__(
        self,
        key_width: int,
        dim: int,
        *,
        effort: int | None = 4,
        eager_rows: int = 1 << 15,
        small_rows: int = 256,
        max_small: int = 6,
        fanin: int | str = 2,
    ):
        self.adaptive = fanin == "auto"
        if self.adaptive:
            fanin = 2
        elif not isinstance(fanin, int) or fanin < 2:
            raise ValueError(f"a spine's fanin must be an int >= 2 or 'auto', got {fanin!r}")
        assert isinstance(fanin, int)
        #: the fanin merges use now (with ``adaptive``, 2 or ``AUTO_FANIN`` by turns)
        self.fanin = fanin
        #: ``fanin="auto"``: reads and non-empty inserts since the current window began
        self._reads = 0
        self._writes = 0
        self.key_width = key_width
        self.dim = dim
        self.effort = effort
        self.eager_rows = eager_rows
        self.small_rows = small_rows
        self.max_small = max_small
        self.stack: list[TraceBatch | Merge] = []
        self.queued: list[TraceBatch] = []
        self.handles: list[TraceHandle] = []
        self.logical = Antichain.of([(0,) * dim], dim)
        self.physical = self.logical
        self.upper = self.logical
        self.merges_done = 0
        #: told of every completed merge (statistics, logging, checkpoints' lineage)
        self.merge_listeners: list[MergeListener] = []

    # -- state ---------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The trace as plain data: its batches (a merge in progress as its two sources and
        its ``since``: it restarts from them), frontiers and counters. Readers' handles are
        their owners' state."""
        stack: list[tuple[Any, ...]] = [
            ("merge", e.a, e.b, e.since) if isinstance(e, Merge) else ("batch", e)
            for e in self.stack
        ]
        return {
            "key_width": self.key_width,
            "stack": stack,
            "queued": list(self.queued),
            "logical": self.logical,
            "physical": self.physical,
            "upper": self.upper,
            "merges_done": self.merges_done,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Put back what ``state()`` returned, into a spine built afresh (its readers' handles
        are put back by their owners)."""
        self.key_width = state["key_width"]
        self.stack = [Merge(e[1], e[2], e[3]) if e[0] == "merge" else e[1] for e in state["stack"]]
        self.queued = list(state["queued"])
        self.logical, self.physical = state["logical"], state["physical"]
        self.upper = state["upper"]
        self.merges_done = state["merges_done"]

    def _merged(self, sources: Sequence[TraceBatch], since: Antichain, result: TraceBatch) -> None:
        self.merges_done += 1
        for listen in self.merge_listeners:
            listen(sources, since, result)

    # -- readers -------------------------------------------------------------------------------
    def handle(self) -> TraceHandle:
        """A new reader holding both compaction frontiers at the trace's current ones."""
        h = TraceHandle(self, self.logical, self.physical)
        self.handles.append(h)
        return h

    def _refresh_frontiers(self) -> None:
        live = [h for h in self.handles if not h.closed]
        self.handles = live
        if live:
            logical = live[0].logical
            physical = live[0].physical
            for h in live[1:]:
                logical = logical.meet(h.logical)
                physical = physical.meet(h.physical)
        else:
            logical = physical = self.upper
        self.logical = logical
        self.physical = physical
        self._introduce()

    # -- writing -------------------------------------------------------------------------------
    def insert(self, batch: TraceBatch) -> None:
        """Append a batch whose lower is the trace's upper (it waits in ``queued`` first)."""
        self.upper = batch.desc.upper
        if len(batch):
            self.queued.append(batch)
            if self.adaptive:
                self._count_write()
        self._introduce()

    def _count_write(self) -> None:
        self._writes += 1
        if self._writes >= self.AUTO_WINDOW:
            tiered = self._reads * self.AUTO_READS < self._writes
            self.fanin = self.AUTO_FANIN if tiered else 2
            self._reads = self._writes = 0

    def _count_read(self) -> None:
        self._reads += 1
        if self.fanin > 2 and self._reads >= max(self.AUTO_READS, self._writes):
            # read about as often as written: geometric again, the tiered tail merged back
            # into geometric sizes now (a trace no longer written would keep it otherwise)
            self.fanin = 2
            self._restore_geometric()

    def advance_upper(self, frontier: Antichain) -> None:
        """Record that no updates at times before ``frontier`` remain to be inserted."""
        self.upper = frontier
        self._introduce()

    def _introduce(self) -> None:
        if not self.handles:
            # No reader holds the trace back (closed handles are dropped when they close):
            # both compaction frontiers follow the upper, as ``_refresh_frontiers`` sets
            # them when the last handle closes, so batches are merged and their times
            # advanced (a trace nobody reads compacts like any other).
            self.logical = self.physical = self.upper
        while self.queued and self.physical.dominates(self.queued[0].desc.upper):
            batch = self.queued.pop(0)
            self._apply_fuel(len(batch))
            self.stack.append(batch)
            self._tidy()

    def _apply_fuel(self, n: int) -> None:
        if self.effort is None or self.fanin > 2:
            return  # merges complete when they start
        fuel = self.effort * max(n, 1)
        for i, entry in enumerate(self.stack):
            # (a merge banks small amounts of fuel itself, to work in large chunks)
            if isinstance(entry, Merge) and entry.work(fuel):
                assert entry.result is not None
                self.stack[i] = entry.result
                self._merged((entry.a, entry.b), entry.since, entry.result)

    @staticmethod
    def _size(entry: TraceBatch | Merge) -> int:
        return entry.size if isinstance(entry, Merge) else len(entry)

    def _complete(self, i: int) -> TraceBatch:
        entry = self.stack[i]
        if isinstance(entry, Merge):
            entry.work(1 << 62)
            assert entry.result is not None
            self.stack[i] = entry.result
            self._merged((entry.a, entry.b), entry.since, entry.result)
            return entry.result
        return entry

    def _size_class(self, n: int) -> int:
        """``i`` with ``fanin**i <= n < fanin**(i + 1)`` (0 for empty batches)."""
        i, bound = 0, self.fanin
        while n >= bound:
            i, bound = i + 1, bound * self.fanin
        return i

    def _tidy_tiered(self) -> None:
        # The smallest class c of which ``fanin`` batches are in the tail of batches of
        # class c or below has that whole tail merged (smaller batches arriving between
        # batches of one class are taken along, so none holds a class back).
        while True:
            classes = [self._size_class(self._size(b)) for b in self.stack]
            merge_from = None
            for c in sorted(set(classes)):
                j, count = len(classes), 0
                while j > 0 and classes[j - 1] <= c:
                    j -= 1
                    count += classes[j] == c
                if count >= self.fanin:
                    merge_from = j
                    break
            if merge_from is None:
                break
            tail = [self._complete(i) for i in range(merge_from, len(self.stack))]
            merged = merge_all(tail, self.logical)
            self.stack[merge_from:] = [merged]
            self._merged(tail, self.logical, merged)
        while self.stack and isinstance(self.stack[-1], TraceBatch) and len(self.stack[-1]) == 0:
            self.stack.pop()

    def _tidy(self) -> None:
        if self.fanin > 2:
            self._tidy_tiered()
            return
        # Tiny batches (one-update rounds) accumulate up to ``max_small`` before one merge of
        # them all: merging each on arrival costs more in fixed overhead than reading a few
        # more small batches costs readers.
        tail = 0
        for entry in reversed(self.stack):
            if isinstance(entry, TraceBatch) and len(entry) < self.small_rows:
                tail += 1
            else:
                break
        if 0 < tail <= self.max_small:
            return
        if tail > 1:
            small = [e for e in self.stack[-tail:] if isinstance(e, TraceBatch)]
            merged = merge_all(small, self.logical)
            self.stack[-tail:] = [merged]
            self._merged(small, self.logical, merged)
        self._restore_geometric()

    def _restore_geometric(self) -> None:
        # Restore the geometric sizes: any neighbours where the younger is at least half the
        # older are merged, checked from the youngest down (not only at the tail: a merge
        # that finished on fuel can leave its result too large for the batch before it).
        # One merge under way per pass may be left to finish on fuel instead of being
        # completed here: typically the one a cascade just started, its result as large as
        # the batch before it. Completing it at once would pay for the whole cascade in one
        # insert, the latency spike progressive merging exists to avoid; batches arriving
        # meanwhile bring ``effort`` times their size in fuel, so (with ``effort >= 2``) it is
        # done before the tail behind it grows to half its size. Only one, so merges that
        # fall behind (low effort) cannot pile up: the others are completed as before.
        i = len(self.stack) - 1
        deferred = False
        while i >= 1:
            if 2 * self._size(self.stack[i]) < self._size(self.stack[i - 1]):
                i -= 1
                continue
            if isinstance(self.stack[i], Merge) and not deferred and self.effort is not None:
                deferred = True
                i -= 1
                continue
            b = self._complete(i)
            a = self._complete(i - 1)
            merge = Merge(a, b, self.logical)
            self.stack[i - 1 : i + 1] = [merge]
            if merge.size <= self.eager_rows or self.effort is None:
                self._complete(i - 1)
            i = len(self.stack) - 1
            deferred = False
        # drop empty results so they do not anchor the geometric sequence
        while self.stack and isinstance(self.stack[-1], TraceBatch) and len(self.stack[-1]) == 0:
            self.stack.pop()

    # -- reading -------------------------------------------------------------------------------
    def batches(self) -> list[TraceBatch]:
        """Every readable batch, oldest first (sources of merges in progress included)."""
        out: list[TraceBatch] = []
        for entry in self.stack:
            if isinstance(entry, Merge):
                out.append(entry.a)
                out.append(entry.b)
            else:
                out.append(entry)
        out.extend(self.queued)
        return out

    def batches_through(self, frontier: Antichain) -> list[TraceBatch]:
        """The batches holding exactly the updates at times not beyond ``frontier``.

        It is an error to ask for a frontier the physical compaction has passed.
        """
        if self.adaptive and (self.stack or self.queued):
            self._count_read()
        bs = self.batches()
        if not bs or frontier.dominates(bs[-1].desc.upper):
            return bs  # (uppers grow along the spine: the youngest's is the largest)
        return [b for b in bs if frontier.dominates(b.desc.upper)]

    def gather(
        self, probe: np.ndarray, batches: list[TraceBatch]
    ) -> tuple[Updates | None, np.ndarray]:
        """All rows of the probe keys (sorted, distinct) in ``batches``, and each row's probe
        index."""
        parts: list[Updates] = []
        owners: list[np.ndarray] = []
        # (a few probe keys as Python values once, for the dict lookups of small batches)
        plist = probe.tolist() if probe.shape[0] <= 64 and len(batches) > 1 else None
        for b in batches:
            rows, owner = b.rows_for(probe, plist)
            if len(rows):
                parts.append(b.take_rows(rows))
                owners.append(owner)
        if not parts:
            return None, np.empty(0, dtype=np.int64)
        return concat_updates(parts), np.concatenate(owners)

    # -- statistics ----------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        bs = self.batches()
        return {
            "batches": len(bs),
            "updates": int(sum(len(b) for b in bs)),
            "merges_in_progress": sum(isinstance(e, Merge) for e in self.stack),
            "merge_work_outstanding": int(sum(e.size for e in self.stack if isinstance(e, Merge))),
            "queued": len(self.queued),
            "merges_done": self.merges_done,
            "bytes": self.nbytes(),
        }

    def nbytes(self) -> int:
        """Bytes of the distinct buffers held by the readable batches and by merges in
        progress (their finished chunks), each buffer counted once (``TraceBatch.nbytes``)."""
        seen: set[int] = set()
        total = sum(b.nbytes(seen) for b in self.batches())
        for e in self.stack:
            if isinstance(e, Merge):
                for u in e.chunks:
                    total += buffer_nbytes([*u.data, u.times, u.diffs], seen)
        return total


def key_sums(
    batches: list[TraceBatch], probe: np.ndarray, dt: Any, *, bounded: bool | None = None
) -> Any:
    """For each probe key (sorted, distinct), the sum of the diffs of its rows in ``batches``.

    Exact for every diff type. Numeric diff columns whose per-key sums provably stay in
    int64 (``bounded``, computed with ``sums_fit`` unless given) are added with plain numpy
    arithmetic, without the checks of ``IntDiff``'s operations."""
    if bounded is None:
        bounded = sums_fit(batches)
    if not (bounded and _numeric(dt)):
        acc = dt.zeros(probe.shape[0])
        for b in batches:
            found = _key_rows(b, probe)
            if found is not None:
                rows, starts, keys = found
                sums = dt.sum_segments(dt.take(b.diffs, rows), starts)
                acc = dt.put(acc, keys, dt.add(dt.take(acc, keys), sums))
        return acc
    tuple_diff = isinstance(dt, TupleDiff)
    zeros = dt.zeros(probe.shape[0])
    accs = list(zeros) if tuple_diff else [zeros]
    for b in batches:
        found = _key_rows(b, probe)
        if found is None:
            continue
        rows, starts, keys = found
        for acc, col in zip(accs, b.diffs if tuple_diff else (b.diffs,), strict=True):
            d = col[rows]
            acc[keys] += d if len(starts) == len(d) else np.add.reduceat(d, starts)
    return tuple(accs) if tuple_diff else accs[0]


#: batches with at most this many keys are searched with a dict in ``int_key_sums_small``
SMALL_KEYS = 64


def int_key_sums_small(batches: list[TraceBatch], probe: np.ndarray) -> list[int]:
    """``key_sums`` for int diffs and a few probe keys (sorted, distinct), as exact Python
    ints: numpy's per-call cost dominates there, so small batches are searched with a dict
    (``TraceBatch.key_runs_small``) and large ones with one ``rows_for`` each. It is an
    error to pass batches whose diffs are not ``IntDiff`` columns."""
    acc = [0] * probe.shape[0]
    keys: list[Any] | None = None
    for b in batches:
        if b.keys.shape[0] == 0:
            continue
        d = b.diffs
        if b.keys.shape[0] <= SMALL_KEYS:
            if keys is None:
                keys = probe.tolist()
            for j, lo, hi in b.key_runs_small(keys):
                for r in range(lo, hi):
                    acc[j] += int(d[r])
            continue
        bk = b.keys
        if probe.dtype == bk.dtype and bk.dtype.kind in "iu":
            # one search for all probe keys, then a few scalar reads
            if keys is None:
                keys = probe.tolist()
            nk = bk.shape[0]
            bounds = b.bounds
            for j, p in enumerate(bk.searchsorted(probe).tolist()):
                if p < nk and bk[p] == keys[j]:
                    for r in range(int(bounds[p]), int(bounds[p + 1])):
                        acc[j] += int(d[r])
            continue
        rows, owner = b.rows_for(probe)
        if len(rows):
            for j, v in zip(owner.tolist(), d[rows].tolist(), strict=True):
                acc[j] += v
    return acc


#: a small batch of at most this many rows has its diff columns listed whole
_LIST_ROWS = 256


def tuple_key_sums_small(
    batches: list[TraceBatch], probe: np.ndarray, width: int
) -> list[list[int]]:
    """``int_key_sums_small`` for tuple diffs of ``width`` int parts: for each probe key
    (sorted, distinct) its per-part sums as exact Python ints. It is an error to pass
    batches whose diffs are not tuples of ``width`` int columns."""
    acc = [[0] * width for _ in range(probe.shape[0])]
    keys: list[Any] | None = None
    for b in batches:
        if b.keys.shape[0] == 0:
            continue
        if b.keys.shape[0] <= SMALL_KEYS:
            if keys is None:
                keys = probe.tolist()
            runs = b.key_runs_small(keys)
            if not runs:
                continue
            if len(b) <= _LIST_ROWS:  # every part as a list once, then slices of it
                cols = [c.tolist() for c in b.diffs]
                for j, lo, hi in runs:
                    a = acc[j]
                    for p in range(width):
                        a[p] += sum(cols[p][lo:hi])
            else:  # (long runs: each key's rows listed alone)
                for j, lo, hi in runs:
                    a = acc[j]
                    for p, c in enumerate(b.diffs):
                        a[p] += sum(c[lo:hi].tolist())
            continue
        rows, owner = b.rows_for(probe)
        if len(rows):
            js = owner.tolist()
            for p, c in enumerate(b.diffs):
                for j, v in zip(js, c[rows].tolist(), strict=True):
                    acc[j][p] += v
    return acc


def _key_rows(b: TraceBatch, probe: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The rows of ``b`` holding probe keys, where each key's run of them starts, and the
    probe index of each run; None if none."""
    rows, owner = b.rows_for(probe)
    if not len(rows):
        return None
    flags = np.empty(len(owner), dtype=bool)
    flags[0] = True
    np.not_equal(owner[1:], owner[:-1], out=flags[1:])
    starts = flags.nonzero()[0]
    return rows, starts, owner[starts]


def _numeric(dt: Any) -> bool:
    """Whether ``dt``'s columns are plain int64 / float64 arrays (ints, floats, tuples of
    them): the diff types ``key_sums`` can add with numpy alone once sums are bounded."""
    if isinstance(dt, TupleDiff):
        return all(type(p) in (IntDiff, FloatDiff) for p in dt.parts)
    return type(dt) in (IntDiff, FloatDiff)


def sums_fit(batches: list[TraceBatch]) -> bool:
    """Whether the int diffs of any one key, summed over ``batches`` (or over any run of its
    rows in them), stay in int64: the batches' ``diff_bound``s add up to at most the int64
    maximum. False when some batch has no bound."""
    bound = merged_bound(batches)
    return bound is not None and bound <= I64_MAX


class TraceHandle:
    """A reader's hold on a spine: logical (``since``) and physical compaction frontiers.

    It is an error to move a frontier backwards; the trace compacts to the meet of all open
    handles' frontiers. ``close()`` releases the hold.
    """

    #: the format of ``state()`` (as ``Spine.state_version``)
    state_version = 1

    def __init__(self, spine: Spine, logical: Antichain, physical: Antichain) -> None:
        self.spine = spine
        self.logical = logical
        self.physical = physical
        self.closed = False

    def set_logical_compaction(self, frontier: Antichain) -> None:
        self.logical = frontier
        self.spine._refresh_frontiers()

    def set_physical_compaction(self, frontier: Antichain) -> None:
        self.physical = frontier
        self.spine._refresh_frontiers()

    def set_compaction(self, logical: Antichain, physical: Antichain) -> None:
        if logical == self.logical and physical == self.physical:
            return
        self.logical = logical
        self.physical = physical
        self.spine._refresh_frontiers()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.spine._refresh_frontiers()

    def state(self) -> dict[str, Any]:
        """This reader's frontiers, as plain data."""
        return {"logical": self.logical, "physical": self.physical, "closed": self.closed}

    def load_state(self, state: dict[str, Any]) -> None:
        """Put back what ``state()`` returned (the spine's own frontiers are its state)."""
        self.logical, self.physical = state["logical"], state["physical"]
        self.closed = state["closed"]
