"""Table rows as given: one physical column per SQL column, strings kept lazily.

``RowBatch`` is how a table holds rows outside the dataflow (pending changes and the
table's current rows). Numbers, dates and booleans are physical columns at once (a cheap
vectorized conversion); a string column stays as it came (an Arrow array or a list) in a
``LazyStrings`` until something needs its dictionary codes: a view that reads the column,
DML, a rebuild. A column no view reads (a comment, say) never builds dictionary entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ddflow.sql.rows import Field, mask_words, pack
from ddflow.sql.strings import StringDict

__all__ = ["LazyStrings", "RowBatch"]


class LazyStrings:
    """A string column as given (Arrow array or list of ``str``/``None``; NULLs allowed)."""

    __slots__ = ("codes", "raw")

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.codes: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.raw)

    def encode(self, strings: StringDict) -> np.ndarray:
        """The column's dictionary codes (NULL entries are 0), computed once."""
        if self.codes is None:
            raw = self.raw
            if isinstance(raw, list):
                vals = ["" if v is None else v for v in raw]
                self.codes = strings.encode_list(vals)
            else:
                import pyarrow.compute as pc

                if len(raw) == 0:
                    self.codes = np.zeros(0, np.int64)
                else:
                    enc = pc.dictionary_encode(raw)
                    uniq = enc.dictionary.to_pylist()
                    idx = np.asarray(enc.indices.fill_null(0).to_numpy(zero_copy_only=False),
                                     dtype=np.int64)
                    codes = strings.encode_list(uniq) if uniq else np.zeros(1, np.int64)
                    out = codes[idx]
                    if raw.null_count:
                        out[np.asarray(raw.is_null().to_numpy(zero_copy_only=False))] = 0
                    self.codes = out
        return self.codes

    def values(self, idx: np.ndarray | None = None) -> list[Any]:
        """Python strings (``None`` for NULL) of rows ``idx`` (all rows if None)."""
        raw = self.raw
        if isinstance(raw, list):
            return raw if idx is None else [raw[i] for i in idx.tolist()]
        if idx is None:
            return raw.to_pylist()
        import pyarrow as pa

        return raw.take(pa.array(idx, type=pa.int64())).to_pylist()

    def take(self, idx: np.ndarray) -> LazyStrings:
        out = LazyStrings(self._take_raw(idx))
        if self.codes is not None:
            out.codes = self.codes[idx]
        return out

    def _take_raw(self, idx: np.ndarray) -> Any:
        raw = self.raw
        if isinstance(raw, list):
            return [raw[i] for i in idx.tolist()]
        import pyarrow as pa

        return raw.take(pa.array(idx, type=pa.int64()))


def concat_lazy(parts: Sequence[LazyStrings]) -> LazyStrings:
    vals: list[Any] = []
    for p in parts:
        vals.extend(p.values())
    out = LazyStrings(vals)
    if all(p.codes is not None for p in parts):
        out.codes = np.concatenate([p.codes for p in parts])
    return out


class RowBatch:
    """``n`` rows of a table: per column its physical values (a ``LazyStrings`` for every
    string column) and NULL flags (``None``: no NULL)."""

    __slots__ = ("cols", "n", "nulls")

    def __init__(self, cols: list[Any], nulls: list[np.ndarray | None], n: int) -> None:
        self.cols = cols
        self.nulls = nulls
        self.n = n

    def take(self, idx: np.ndarray) -> RowBatch:
        cols = [c.take(idx) if isinstance(c, LazyStrings) else c[idx] for c in self.cols]
        nulls = [None if nl is None else (nl[idx] if nl[idx].any() else None)
                 for nl in self.nulls]
        return RowBatch(cols, nulls, len(idx))

    def column(self, i: int, strings: StringDict) -> np.ndarray:
        """Column ``i``'s physical values (string codes encoded now if needed)."""
        c = self.cols[i]
        return c.encode(strings) if isinstance(c, LazyStrings) else c

    def record(self, fields: Sequence[Field], idxs: Sequence[int], strings: StringDict
               ) -> tuple[np.ndarray, ...]:
        """Dataflow records of the columns ``idxs`` (values, then null masks)."""
        sub = [fields[i] for i in idxs]
        vals = [self.column(i, strings) for i in idxs]
        nulls = [self.nulls[i] for i in idxs]
        return pack(vals, nulls, mask_words(sub), self.n)

    @staticmethod
    def concat(parts: Sequence[RowBatch]) -> RowBatch:
        if len(parts) == 1:
            return parts[0]
        width = len(parts[0].cols)
        cols: list[Any] = []
        nulls: list[np.ndarray | None] = []
        for i in range(width):
            cs = [p.cols[i] for p in parts]
            if isinstance(cs[0], LazyStrings):
                cols.append(concat_lazy(cs))
            else:
                cols.append(np.concatenate(cs) if not any(c.dtype == object for c in cs)
                            else np.concatenate([c.astype(object) for c in cs]))
            ns = [p.nulls[i] for p in parts]
            if all(x is None for x in ns):
                nulls.append(None)
            else:
                nulls.append(np.concatenate([x if x is not None else np.zeros(p.n, bool)
                                             for x, p in zip(ns, parts, strict=True)]))
        return RowBatch(cols, nulls, sum(p.n for p in parts))
