"""A table's current rows, kept beside the dataflow for DML, checks and rebuilds.

Why: ``DELETE`` must refuse a row that is not there, ``DELETE ... WHERE`` and ``UPDATE``
need the current rows, and a database rebuilds its dataflow from them (a new view, or a
commit that failed). The dataflow itself keeps only what its views need.

How: rows live in append-only chunks of physical records, each row with a count.
Inserting appends a chunk (no sorting, no hashing: an insert-only table costs nothing
more). Counting or deleting given rows uses an index of 64-bit row hashes, built on first
use and then kept as a few sorted runs merged when a newer run grows to half the size of
the one before it (so each row is merged ``O(log n)`` times); a hash match is confirmed by
comparing the whole row, so the answer is exact.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ddflow.core.errors import DataError

__all__ = ["TableStore", "row_hashes"]

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)


def row_hashes(cols: Sequence[np.ndarray]) -> np.ndarray:
    """A 64-bit hash per row of ``cols`` (int64 columns, or object columns of ints)."""
    n = len(cols[0]) if cols else 0
    h = np.full(n, 0x243F6A8885A308D3, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in cols:
            if c.dtype == object:
                x = np.array([hash(v) for v in c.tolist()], dtype=np.int64).reshape(n)
                x = x.view(np.uint64)
            else:
                x = np.ascontiguousarray(c, dtype=np.int64).view(np.uint64)
            h = (h ^ x) * _M1
            h ^= h >> np.uint64(31)
        h = (h ^ (h >> np.uint64(30))) * _M2
        h ^= h >> np.uint64(27)
    return h.view(np.int64)


def _rows_equal(a: Sequence[np.ndarray], ia: np.ndarray, b: Sequence[np.ndarray],
                ib: np.ndarray) -> np.ndarray:
    eq = np.ones(len(ia), dtype=bool)
    for x, y in zip(a, b, strict=True):
        xa, yb = x[ia], y[ib]
        if xa.dtype == object or yb.dtype == object:
            eq &= np.array([p == q for p, q in zip(xa.tolist(), yb.tolist(), strict=True)],
                           dtype=bool).reshape(len(ia))
        else:
            eq &= xa == yb
    return eq


def _expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ranges ``[lo[i], hi[i])``: the owner ``i`` and the position of every element."""
    counts = hi - lo
    owner = np.repeat(np.arange(len(lo)), counts)
    if not len(owner):
        return owner, owner
    starts = np.cumsum(counts) - counts
    pos = np.arange(len(owner)) - np.repeat(starts, counts) + np.repeat(lo, counts)
    return owner, pos


class TableStore:
    """The rows of one table with their counts."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.chunks: list[tuple[tuple[np.ndarray, ...], np.ndarray]] = []
        self.offsets: list[int] = [0]
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []  # (sorted hashes, entry ids)
        self.indexed = 0  # entries covered by the runs
        self.dead = 0

    def __len__(self) -> int:
        return self.offsets[-1]

    def live_rows(self) -> int:
        return int(sum(int(c.sum()) for _, c in self.chunks))

    def append(self, cols: tuple[np.ndarray, ...], counts: np.ndarray) -> None:
        if not len(counts):
            return
        self.chunks.append((cols, counts.astype(np.int64, copy=True)))
        self.offsets.append(self.offsets[-1] + len(counts))

    # -- the index -------------------------------------------------------------------------
    def _entry_cols(self, ids: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """The rows and counts of entries ``ids``."""
        offs = np.array(self.offsets)
        which = np.searchsorted(offs, ids, side="right") - 1
        cols = [np.empty(len(ids), dtype=np.int64) for _ in range(self.width)]
        counts = np.empty(len(ids), dtype=np.int64)
        for ci in np.unique(which).tolist():
            sel = np.flatnonzero(which == ci)
            local = ids[sel] - self.offsets[ci]
            ccols, ccounts = self.chunks[ci]
            for j in range(self.width):
                src = ccols[j][local]
                if src.dtype == object and cols[j].dtype != object:
                    cols[j] = cols[j].astype(object)
                cols[j][sel] = src
            counts[sel] = ccounts[local]
        return cols, counts

    def _index(self) -> None:
        total = self.offsets[-1]
        if self.indexed == total:
            return
        first = int(np.searchsorted(np.array(self.offsets), self.indexed, side="right") - 1)
        hs, ids = [], []
        for ci in range(first, len(self.chunks)):
            cols, _ = self.chunks[ci]
            lo = max(self.indexed - self.offsets[ci], 0)
            part = tuple(c[lo:] for c in cols)
            hs.append(row_hashes(part))
            ids.append(np.arange(self.offsets[ci] + lo, self.offsets[ci + 1], dtype=np.int64))
        h = np.concatenate(hs)
        e = np.concatenate(ids)
        order = np.argsort(h, kind="stable")
        self.runs.append((h[order], e[order]))
        self.indexed = total
        while len(self.runs) > 1 and 2 * len(self.runs[-1][0]) >= len(self.runs[-2][0]):
            (h1, e1), (h2, e2) = self.runs[-2], self.runs[-1]
            h = np.concatenate([h1, h2])
            e = np.concatenate([e1, e2])
            order = np.argsort(h, kind="stable")
            self.runs[-2:] = [(h[order], e[order])]

    def _matches(self, cols: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Pairs ``(query row, entry id)`` whose rows are equal."""
        self._index()
        hq = row_hashes(cols)
        qs, es = [], []
        for hs, ids in self.runs:
            lo = np.searchsorted(hs, hq, side="left")
            hi = np.searchsorted(hs, hq, side="right")
            owner, pos = _expand(lo, hi)
            if len(owner):
                qs.append(owner)
                es.append(ids[pos])
        if not qs:
            z = np.zeros(0, np.int64)
            return z, z
        q = np.concatenate(qs)
        e = np.concatenate(es)
        ecols, _ = self._entry_cols(e)
        eq = _rows_equal(cols, q, ecols, np.arange(len(e)))
        return q[eq], e[eq]

    def count_of(self, cols: Sequence[np.ndarray]) -> np.ndarray:
        """How many copies of each given row the table holds."""
        n = len(cols[0]) if cols else 0
        out = np.zeros(n, dtype=np.int64)
        if not self.chunks or n == 0:
            return out
        q, e = self._matches(cols)
        if len(q):
            _, counts = self._entry_cols(e)
            np.add.at(out, q, counts)
        return out

    def remove(self, cols: Sequence[np.ndarray], k: np.ndarray) -> None:
        """Takes ``k[i]`` copies of each (distinct) row ``i`` away; they must be there."""
        n = len(k)
        if n == 0:
            return
        q, e = self._matches(cols)
        _, counts = self._entry_cols(e)
        order = np.lexsort((e, q))
        q, e, counts = q[order], e[order], counts[order]
        live = counts > 0
        q, e, counts = q[live], e[live], counts[live]
        have = np.zeros(n, np.int64)
        np.add.at(have, q, counts)
        if (have < k).any():
            raise DataError("internal: removing rows that are not in the table")
        # within each query row, take from its entries in order until k is reached
        cum = np.cumsum(counts)
        starts = np.searchsorted(q, np.arange(n), side="left")
        before = np.concatenate([[0], cum])[starts][q]
        taken_before = cum - counts - before
        take = np.clip(k[q] - taken_before, 0, counts)
        offs = np.array(self.offsets)
        which = np.searchsorted(offs, e, side="right") - 1
        for ci in np.unique(which[take > 0]).tolist():
            sel = np.flatnonzero((which == ci) & (take > 0))
            local = e[sel] - self.offsets[ci]
            self.chunks[ci][1][local] -= take[sel]
            self.dead += int((self.chunks[ci][1][local] == 0).sum())
        if self.dead > max(1024, len(self) // 2):
            self.compact()

    def compact(self) -> None:
        """Drops rows whose count reached zero (and the index, rebuilt on next use)."""
        chunks = [(cols, c) for cols, c in self.live_chunks()]
        self.chunks, self.offsets = [], [0]
        self.runs, self.indexed, self.dead = [], 0, 0
        for cols, c in chunks:
            self.append(cols, c)

    def live_chunks(self) -> Iterator[tuple[tuple[np.ndarray, ...], np.ndarray]]:
        """The rows with a positive count, chunk by chunk."""
        for cols, counts in self.chunks:
            live = counts > 0
            if live.all():
                yield cols, counts
            elif live.any():
                idx = np.flatnonzero(live)
                yield tuple(c[idx] for c in cols), counts[idx]
