"""A table's current rows, kept beside the dataflow for DML, checks and rebuilds.

Why: ``DELETE`` must refuse a row that is not there, ``DELETE ... WHERE`` and ``UPDATE``
need the current rows, and a database rebuilds its dataflow from them (a new view, or a
commit that failed). The dataflow itself keeps only the columns its views use.

How: rows live in append-only chunks (``RowBatch``, strings kept as given), each row with
a count. Inserting appends a chunk: no sorting, no hashing, so an insert-only table costs
nothing more. Counting or deleting given rows uses an index of 64-bit hashes of the rows'
non-string columns, built on first use and then kept as a few sorted runs, a newer run
merged into the one before it when it grows to half its size (each row is merged
``O(log n)`` times). A hash match is confirmed on every column, strings included, so the
answer is exact.

A table's store lives as long as the database and gains a chunk per commit, so a kept
chunk is *frozen* (``TableStore(frozen=True)``): its Arrow columns go into one
``pyarrow.Table`` and its numpy columns into a tuple, neither of which Python's cyclic
garbage collector tracks, instead of some thirty column objects it does track. Otherwise
every commit would leave those objects behind, and the collector, which runs when tracked
objects pile up and then walks all of them (the whole process's, not only ours), would
cost the commits that follow more than the rest of their bookkeeping. A frozen chunk is
made a ``RowBatch`` again (``thaw``) when a delete or a rebuild reads it; the last few so
made are kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ddflow.core.errors import DataError
from ddflow.sql.batch import ArrowCol, LazyStrings, Phys, RowBatch, is_ones
from ddflow.sql.strings import StringDict

__all__ = ["TableStore", "distinct_rows", "freeze", "row_hashes", "thaw"]

#: a frozen chunk: ``(rows, Arrow table, spec, payload)`` (see ``freeze``)
Frozen = tuple[int, Any, tuple[Any, ...], tuple[Any, ...]]

_NAMES: list[str] = []


def freeze(b: RowBatch, specs: dict[Any, Any] | None = None) -> Frozen:
    """``b`` with few objects the garbage collector tracks: its Arrow columns in one
    ``pyarrow.Table`` (untracked), dictionary codes, NULL flags and numpy columns in a
    tuple of arrays, and how to rebuild each column in a ``spec`` shared by every chunk of
    the same shape (``specs`` interns it). Values converted from Arrow are not kept (they
    are converted again when a thawed chunk is read). ``thaw`` is the inverse."""
    arrays: list[Any] = []
    payload: list[Any] = []
    spec: list[tuple[Any, ...]] = []
    src = b.source  # (the Arrow table the rows came in as: kept as it is)
    for k, c in enumerate(b.cols):
        if isinstance(c, ArrowCol):
            spec.append(("arrow", src[1][k] if src else len(arrays), c.convert, c.plain))
            arrays.append(c.arr)
        elif isinstance(c, LazyStrings):
            if isinstance(c.raw, list):
                spec.append(("list", len(payload)))
                payload.append(c.raw)
            else:
                spec.append(("strings", src[1][k] if src else len(arrays), len(payload)))
                arrays.append(c.raw)
            payload.append(c.codes)
        else:
            spec.append(("phys", len(payload)))
            payload.extend((c.v, c.nl))
    key = tuple(spec)
    if specs is not None:
        key = specs.setdefault(key, key)
    table = None
    if src is not None and arrays:
        table = src[0]
    elif arrays:
        import pyarrow as pa

        while len(_NAMES) < len(arrays):
            _NAMES.append(str(len(_NAMES)))
        table = pa.Table.from_arrays(arrays, names=_NAMES[: len(arrays)])
    return (b.n, table, key, tuple(payload))


def thaw(fz: Frozen) -> RowBatch:
    """The ``RowBatch`` a frozen chunk holds (``freeze``)."""
    n, table, spec, payload = fz
    cols: list[Any] = []
    for s in spec:
        kind = s[0]
        if kind == "arrow":
            cols.append(ArrowCol(table.column(s[1]).chunk(0), s[2], s[3]))
        elif kind == "strings":
            lz = LazyStrings(table.column(s[1]).chunk(0))
            lz.codes = payload[s[2]]
            cols.append(lz)
        elif kind == "list":
            lz = LazyStrings(payload[s[1]])
            lz.codes = payload[s[1] + 1]
            cols.append(lz)
        else:
            cols.append(Phys(payload[s[1]], payload[s[1] + 1]))
    return RowBatch(cols, n)


#: thawed chunks a store keeps (a delete reads the same few chunks several times)
_THAWED = 16

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)


def row_hashes(cols: Sequence[np.ndarray], n: int) -> np.ndarray:
    """A 64-bit hash per row of ``cols`` (int64 columns, or object columns)."""
    h = np.full(n, 0x243F6A8885A308D3, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in cols:
            if c.dtype == object:
                x = (
                    np.array([hash(v) for v in c.tolist()], dtype=np.int64)
                    .reshape(n)
                    .view(np.uint64)
                )
            else:
                x = np.ascontiguousarray(c, dtype=np.int64).view(np.uint64)
            h = (h ^ x) * _M1
            h ^= h >> np.uint64(31)
        h = (h ^ (h >> np.uint64(30))) * _M2
        h ^= h >> np.uint64(27)
    return h.view(np.int64)


def _index_columns(b: RowBatch, strings: StringDict) -> list[int]:
    """The columns the index hashes: the first non-string column, with the next ones while
    a sample says the chosen ones repeat too often to tell rows apart (more than 16 rows
    per value); strings only if a table has nothing else."""
    numeric = [i for i, c in enumerate(b.cols) if not isinstance(c, LazyStrings)]
    if not numeric:
        return list(range(len(b.cols)))
    chosen: list[int] = []
    part = b.take(np.arange(min(b.n, 4096)))
    for i in numeric:
        chosen.append(i)
        if len(chosen) == 3:
            break
        h = _index_keys(part, chosen, strings)
        if 16 * len(np.unique(h)) >= part.n:
            break
    return chosen


def _index_keys(b: RowBatch, cols: list[int], strings: StringDict) -> np.ndarray:
    """The index's key per row: one column's values as they are (rows that come in key
    order stay sorted, which makes the index cheap to sort), else a hash of several."""
    if len(cols) == 1 and not isinstance(b.cols[cols[0]], LazyStrings):
        v = b.column(cols[0], strings)
        if v.dtype != object:
            return v.astype(np.int64, copy=False)
    return row_hashes(_hash_columns(b, cols, strings), b.n)


def _hash_columns(b: RowBatch, cols: list[int], strings: StringDict) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for i in cols:
        c = b.cols[i]
        if isinstance(c, LazyStrings):
            vals = c.strings()
            out.append(np.array([hash(v) for v in vals], dtype=np.int64).reshape(b.n))
        else:
            out.append(c.values(strings))
    return out


def _plain_ints(arr: Any) -> bool:
    """Whether an Arrow array holds signed integers and no NULL."""
    import pyarrow as pa

    return bool(pa.types.is_signed_integer(arr.type)) and not arr.null_count


def _expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ranges ``[lo[i], hi[i])``: the owner ``i`` and the position of every element."""
    counts = hi - lo
    owner = np.repeat(np.arange(len(lo)), counts)
    if not len(owner):
        return owner, owner
    starts = np.cumsum(counts) - counts
    pos = np.arange(len(owner)) - np.repeat(starts, counts) + np.repeat(lo, counts)
    return owner, pos


def _equal_rows(
    a: RowBatch, ia: np.ndarray, b: RowBatch, ib: np.ndarray, strings: StringDict
) -> np.ndarray:
    """Whether row ``ia[k]`` of ``a`` equals row ``ib[k]`` of ``b`` (NULL equals NULL).

    Columns are compared numbers first, strings last, each only on the pairs still equal
    (candidate pairs share their index key, so after a column or two few are left)."""
    alive = np.arange(len(ia))
    order = sorted(range(len(a.cols)), key=lambda i: isinstance(a.cols[i], LazyStrings))
    for i in order:
        if not len(alive):
            break
        x, y = a.cols[i], b.cols[i]
        ja, jb = ia[alive], ib[alive]
        nx, ny = x.nulls(), y.nulls()
        xn = nx[ja] if nx is not None else None
        yn = ny[jb] if ny is not None else None
        if isinstance(x, LazyStrings) and isinstance(y, LazyStrings):
            if x.codes is not None and y.codes is not None:
                same = x.codes[ja] == y.codes[jb]
            elif not isinstance(x.raw, list) or not isinstance(y.raw, list):
                # Arrow's kernel (a side held as a list, a few rows to delete, made Arrow)
                import pyarrow.compute as pc

                got = pc.equal(_arrow_strings(x, ja), _arrow_strings(y, jb)).fill_null(False)
                same = np.asarray(got.to_numpy(zero_copy_only=False), dtype=bool)
            else:
                xs, ys = x.strings(ja), y.strings(jb)
                same = np.fromiter(
                    (p == q for p, q in zip(xs, ys, strict=True)), dtype=bool, count=len(ja)
                )
        else:
            xv = _column_values(x, ja, strings)
            yv = _column_values(y, jb, strings)
            if xv.dtype == object or yv.dtype == object:
                same = np.fromiter(
                    (p == q for p, q in zip(xv.tolist(), yv.tolist(), strict=True)),
                    dtype=bool,
                    count=len(ja),
                )
            else:
                same = xv == yv
        if xn is not None or yn is not None:
            xn = xn if xn is not None else np.zeros(len(ja), bool)
            yn = yn if yn is not None else np.zeros(len(jb), bool)
            same = np.where(xn | yn, xn & yn, same)
        alive = alive[same]
    eq = np.zeros(len(ia), dtype=bool)
    eq[alive] = True
    return eq


def _arrow_strings(c: LazyStrings, rows: np.ndarray) -> Any:
    """Rows ``rows`` of a string column as an Arrow array."""
    if isinstance(c.raw, list):
        import pyarrow as pa

        return pa.array(c.strings(rows), type=pa.string())
    return c.arrow(rows)


def _column_values(c: Any, rows: np.ndarray, strings: StringDict) -> np.ndarray:
    """Rows ``rows`` of a non-string column's physical values. A stored chunk stays in its
    Arrow form: a few rows are taken and converted, many are read from a conversion of the
    whole column that is not kept."""
    if isinstance(c, ArrowCol) and c._v is None:
        if 16 * len(rows) < len(c):
            return c.take(rows).values(strings)
        return c.convert(c.arr)[0][rows]
    return c.values(strings)[rows]


def distinct_rows(
    b: RowBatch, k: np.ndarray, strings: StringDict
) -> tuple[RowBatch, np.ndarray] | None:
    """The distinct rows of ``b`` (each the first of its equal rows, in its given form)
    with the sums of ``k`` over their copies, zero sums left out. Rows are paired by a
    hash of their non-string columns and only the pairs sharing one are compared in full
    (NULL equals NULL), so no string is given a dictionary code. None when so many rows
    share a hash that comparing them pairwise would cost more than sorting full records
    (callers then consolidate those)."""
    n = b.n
    k = np.asarray(k, dtype=np.int64)
    if n > 1:
        numeric = [i for i, c in enumerate(b.cols) if not isinstance(c, LazyStrings)]
        h = row_hashes(_hash_columns(b, numeric or list(range(len(b.cols))), strings), n)
        order = np.argsort(h, kind="stable")
        hs = h[order]
        same = hs[1:] == hs[:-1]
        if same.any():
            starts = np.flatnonzero(np.concatenate(([True], ~same)))
            sizes = np.diff(np.append(starts, n))
            if int((sizes * sizes).sum()) > 8 * n + 1024:
                return None
            # each row against the rows before it in its run of equal hashes (the stable
            # sort keeps a run's rows in their given order)
            run_start = np.repeat(starts, sizes)
            later, earlier = _expand(run_start, np.arange(n))
            ia, ja = order[later], order[earlier]
            eq = _equal_rows(b, ia, b, ja, strings)
            first = np.arange(n)
            np.minimum.at(first, ia[eq], ja[eq])
            reps = np.flatnonzero(first == np.arange(n))
            if len(reps) < n:
                sums = np.zeros(len(reps), np.int64)
                np.add.at(sums, np.searchsorted(reps, first), k)
                nz = np.flatnonzero(sums != 0)
                return b.take(reps[nz]), sums[nz]
    keep = np.flatnonzero(k != 0)
    return (b if len(keep) == n else b.take(keep)), k[keep]


class TableStore:
    """The rows of one table with their counts."""

    def __init__(self, strings: StringDict, frozen: bool = False) -> None:
        self.strings = strings
        #: chunks are kept frozen (``freeze``): for a store that lives long
        self.frozen = frozen
        self.specs: dict[Any, Any] = {}
        self.thawed: dict[int, RowBatch] = {}
        self.key_cols: list[int] | None = None
        self.zones: list[tuple[int, int]] = []  # per chunk: least and greatest key
        #: the column ``zones`` are of (the first non-string one until ``key_cols`` is chosen)
        self.zone_col: int | None = None
        self.chunks: list[tuple[Any, np.ndarray]] = []  # (RowBatch or Frozen, counts)
        self.offsets: list[int] = [0]
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []  # (sorted hashes, entry ids)
        self.indexed = 0  # entries covered by the runs
        self.dead = 0

    def __len__(self) -> int:
        return self.offsets[-1]

    def append(self, b: RowBatch, counts: np.ndarray) -> None:
        if not b.n:
            return
        if len(self.zones) == len(self.chunks):
            self._zone_now(b)
        kept: Any = freeze(b, self.specs) if self.frozen else b
        # (``ones``' shared counts are kept as they are, copied when a removal changes them)
        c = counts if is_ones(counts) else np.asarray(counts, dtype=np.int64).copy()
        self.chunks.append((kept, c))
        self.offsets.append(self.offsets[-1] + b.n)

    def _zone_now(self, b: RowBatch) -> None:
        """A new chunk's zone, while its rows are at hand, when its zone column holds
        integers (converted already, or an Arrow column without NULLs read in place): the
        first delete then reads no chunk to find the zones of all, a pause proportional to
        the whole table."""
        if self.zone_col is None:
            numeric = [i for i, c in enumerate(b.cols) if not isinstance(c, LazyStrings)]
            if not numeric:
                return
            self.zone_col = numeric[0]
        c = b.cols[self.zone_col]
        v: Any = None
        if isinstance(c, Phys):
            v = c.v
        elif isinstance(c, ArrowCol):
            if c._v is not None:  # (converted already: the dataflow read it)
                v = c._v
            elif _plain_ints(c.arr):
                arr = c.arr
                n, off = len(arr), arr.offset
                dt = np.dtype(f"int{arr.type.bit_width}")
                v = np.frombuffer(arr.buffers()[1], dtype=dt, count=off + n)[off:]
        if v is not None and len(v) and v.dtype != object:
            # (a NULL's slot holds 0 in converted values, as in the keys a delete looks for)
            self.zones.append((int(v.min()), int(v.max())))

    def batch(self, ci: int) -> RowBatch:
        """Chunk ``ci``'s rows (thawed if frozen; the last few thawed are kept)."""
        kept = self.chunks[ci][0]
        if isinstance(kept, RowBatch):
            return kept
        got = self.thawed.pop(ci, None)
        if got is None:
            got = thaw(kept)
            if len(self.thawed) >= _THAWED:
                del self.thawed[next(iter(self.thawed))]
        self.thawed[ci] = got  # (most recent last)
        return got

    # -- the index -------------------------------------------------------------------------
    def _index(self) -> None:
        total = self.offsets[-1]
        if self.indexed == total:
            return
        hs, ids = [], []
        for ci in range(len(self.chunks)):
            if self.offsets[ci + 1] <= self.indexed:
                continue
            b = self.batch(ci)
            lo = max(self.indexed - self.offsets[ci], 0)
            part = b if lo == 0 else b.take(np.arange(lo, b.n))
            if self.key_cols is None:
                self.key_cols = _index_columns(part, self.strings)
            hs.append(_index_keys(part, self.key_cols, self.strings))
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

    def _locate(self, ids: np.ndarray) -> np.ndarray:
        return np.searchsorted(np.asarray(self.offsets), ids, side="right") - 1

    def _zones(self) -> np.ndarray:
        """Per chunk, the least and greatest key (the index's single key column)."""
        assert self.key_cols is not None
        kc = self.key_cols[0]
        if self.zone_col != kc:  # (zones of another column, found as chunks came)
            self.zones, self.zone_col = [], kc
        while len(self.zones) < len(self.chunks):
            ci = len(self.zones)
            kept = self.chunks[ci][0]
            arr = None
            if isinstance(kept, RowBatch):
                c = kept.cols[kc]
                if isinstance(c, ArrowCol) and c._v is None:
                    arr = c.arr
            elif kept[2][kc][0] == "arrow":
                arr = kept[1].column(kept[2][kc][1]).chunk(0)  # (frozen: not thawed)
            if arr is not None and len(arr) and _plain_ints(arr):
                # a column not converted yet: its least and greatest value are read from
                # its data buffer (they are its physical values: integers without NULLs)
                n, off = len(arr), arr.offset
                dt = np.dtype(f"int{arr.type.bit_width}")
                v = np.frombuffer(arr.buffers()[1], dtype=dt, count=off + n)[off:]
                self.zones.append((int(v.min()), int(v.max())))
                continue
            b = self.batch(ci)
            if not b.n:
                self.zones.append((1, 0))
                continue
            v = b.column(kc, self.strings)
            self.zones.append((int(v.min()), int(v.max())))
        return np.asarray(self.zones, dtype=np.int64).reshape(len(self.zones), 2)

    def _scan(self, q: RowBatch, qk: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Pairs from the chunks whose key range meets the query's, when they are few
        (rows often come and go in key order: a delete then touches a few chunks, and no
        index of the whole table is needed); None when the index is the cheaper way."""
        zones = self._zones()
        lo, hi = int(qk.min()), int(qk.max())
        hit = np.flatnonzero((zones[:, 1] >= lo) & (zones[:, 0] <= hi))
        sizes = np.diff(np.asarray(self.offsets))[hit]
        if int(sizes.sum()) > max(100_000, 64 * q.n):
            return None
        assert self.key_cols is not None
        kc = self.key_cols[0]
        order = np.argsort(qk, kind="stable")
        sk = qk[order]
        qs, es = [], []
        for ci in hit.tolist():
            b = self.batch(ci)
            v = b.column(kc, self.strings)
            l_ = np.searchsorted(sk, v, side="left")
            r_ = np.searchsorted(sk, v, side="right")
            owner, pos = _expand(l_, r_)
            if not len(owner):
                continue
            qi = order[pos]
            keep = _equal_rows(q, qi, b, owner, self.strings)
            qs.append(qi[keep])
            es.append(owner[keep] + self.offsets[ci])
        if not qs:
            z = np.zeros(0, np.int64)
            return z, z
        return np.concatenate(qs), np.concatenate(es)

    def _matches(self, q: RowBatch) -> tuple[np.ndarray, np.ndarray]:
        """Pairs ``(query row, entry id)`` whose rows are equal."""
        if self.key_cols is None:
            self.key_cols = _index_columns(self.batch(0), self.strings)
        hq = _index_keys(q, self.key_cols, self.strings)
        single = (
            len(self.key_cols) == 1
            and not isinstance(q.cols[self.key_cols[0]], LazyStrings)
            and hq.dtype == np.int64
        )
        if single and self.indexed < self.offsets[-1]:
            got = self._scan(q, hq)
            if got is not None:
                return got
        self._index()
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
        qa = np.concatenate(qs)
        ea = np.concatenate(es)
        keep = np.zeros(len(qa), bool)
        which = self._locate(ea)
        for ci in np.unique(which).tolist():
            sel = np.flatnonzero(which == ci)
            b = self.batch(ci)
            keep[sel] = _equal_rows(q, qa[sel], b, ea[sel] - self.offsets[ci], self.strings)
        return qa[keep], ea[keep]

    def _counts_of(self, e: np.ndarray) -> np.ndarray:
        out = np.empty(len(e), np.int64)
        which = self._locate(e)
        for ci in np.unique(which).tolist():
            sel = np.flatnonzero(which == ci)
            out[sel] = self.chunks[ci][1][e[sel] - self.offsets[ci]]
        return out

    def count_of(self, q: RowBatch) -> np.ndarray:
        """How many copies of each given row the table holds."""
        out = np.zeros(q.n, dtype=np.int64)
        if not self.chunks or q.n == 0 or self.offsets[-1] == 0:
            return out
        qa, ea = self._matches(q)
        if len(qa):
            np.add.at(out, qa, self._counts_of(ea))
        return out

    def remove(self, q: RowBatch, k: np.ndarray) -> None:
        """Takes ``k[i]`` copies of each distinct row ``i`` of ``q`` away; they must be
        there."""
        n = len(k)
        if n == 0:
            return
        qa, ea = self._matches(q)
        counts = self._counts_of(ea)
        order = np.lexsort((ea, qa))
        qa, ea, counts = qa[order], ea[order], counts[order]
        live = counts > 0
        qa, ea, counts = qa[live], ea[live], counts[live]
        have = np.zeros(n, np.int64)
        np.add.at(have, qa, counts)
        if (have < k).any():
            raise DataError("internal: removing rows that are not in the table")
        # within each query row, take from its entries in order until k is reached
        cum = np.cumsum(counts)
        first = np.searchsorted(qa, np.arange(n), side="left")
        before = np.concatenate([[0], cum])[first][qa]
        taken_before = cum - counts - before
        take = np.clip(k[qa] - taken_before, 0, counts)
        which = self._locate(ea)
        for ci in np.unique(which[take > 0]).tolist():
            sel = np.flatnonzero((which == ci) & (take > 0))
            local = ea[sel] - self.offsets[ci]
            c = self.chunks[ci][1]
            if not c.flags.writeable:  # (``ones``' shared counts)
                c = c.copy()
                self.chunks[ci] = (self.chunks[ci][0], c)
            c[local] -= take[sel]
            self.dead += int((c[local] == 0).sum())
        if self.dead > max(1024, len(self) // 2):
            self.compact()

    def compact(self) -> None:
        """Drops rows whose count reached zero (the index is rebuilt on next use)."""
        chunks = list(self.live_chunks())
        self.chunks, self.offsets, self.thawed = [], [0], {}
        self.runs, self.indexed, self.dead = [], 0, 0
        self.key_cols = None
        self.zones = []
        for b, c in chunks:
            self.append(b, c)

    def live_chunks(self) -> Iterator[tuple[RowBatch, np.ndarray]]:
        """The rows with a positive count, chunk by chunk."""
        for ci, (_, counts) in enumerate(self.chunks):
            live = counts > 0
            if not live.any():
                continue
            b = self.batch(ci)
            if live.all():
                yield b, counts
            else:
                idx = np.flatnonzero(live)
                yield b.take(idx), counts[idx]

    def rows(self) -> int:
        return int(sum(int(c[c > 0].sum()) for _, c in self.chunks))
