"""The string dictionary: every distinct string of a database gets one integer code.

Why: joins, grouping and equality then run on ``int64`` columns. Codes are assigned in
arrival order, so they do not sort like the strings; everything that needs the strings'
order or content (``<``, ``LIKE``, ``upper``, ``ORDER BY``, ``min``) works on the strings
themselves, looked up per distinct code (``memo``), never per row.

Invariant: a code, once given, names its string forever (codes are never reused), so
physical values stored in traces stay meaningful.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["StringDict"]


class StringDict:
    """A growing bijection between strings and ``int64`` codes ``0, 1, 2, ...``."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}
        self._strings: list[str] = []
        self._array: np.ndarray = np.empty(0, dtype=object)

    def __len__(self) -> int:
        return len(self._strings)

    def code(self, s: str) -> int:
        """The code of ``s`` (assigned now if new)."""
        c = self._codes.get(s)
        if c is None:
            c = len(self._strings)
            self._codes[s] = c
            self._strings.append(s)
        return c

    def encode_list(self, values: Sequence[str]) -> np.ndarray:
        """Codes of ``values`` (assigning new ones), as an ``int64`` column."""
        get = self._codes.get
        out = np.empty(len(values), dtype=np.int64)
        for i, s in enumerate(values):
            c = get(s)
            if c is None:
                c = self.code(s)
            out[i] = c
        return out

    def encode_unique(self, uniques: Sequence[str], inverse: np.ndarray) -> np.ndarray:
        """Codes of rows given as distinct strings and each row's index into them."""
        codes = self.encode_list(list(uniques))
        return codes[inverse] if len(inverse) else np.zeros(0, dtype=np.int64)

    def array(self) -> np.ndarray:
        """All strings as an ``object`` array indexed by code."""
        if len(self._array) != len(self._strings):
            arr = np.empty(len(self._strings), dtype=object)
            arr[:] = self._strings
            self._array = arr
        return self._array

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """The strings of ``codes`` as an ``object`` array."""
        codes = np.asarray(codes)
        if codes.dtype == object:
            codes = codes.astype(np.int64)
        return self.array()[codes]

    def decode_list(self, codes: np.ndarray) -> list[str]:
        strings = self._strings
        return [strings[c] for c in np.asarray(codes).tolist()]

    def map_codes(self, codes: np.ndarray, f: Callable[[np.ndarray], np.ndarray],
                  memo: dict[str, Any] | None = None) -> np.ndarray:
        """``f`` (over an ``object`` array of distinct strings) applied to each row's string,
        evaluated once per distinct code of the batch (and once ever per code with ``memo``,
        a dict this call keeps its table in)."""
        codes = np.asarray(codes, dtype=np.int64)
        if memo is None:
            uniq, inv = np.unique(codes, return_inverse=True)
            res = np.asarray(f(self.decode(uniq)))
            return res[inv]
        table: np.ndarray | None = memo.get("table")
        known: np.ndarray = memo.get("known", np.zeros(0, dtype=bool))
        size = len(self._strings)
        if len(known) < size:
            grow = max(size, 2 * len(known))
            k2 = np.zeros(grow, dtype=bool)
            k2[: len(known)] = known
            known = k2
            if table is not None:
                t2 = np.empty(grow, dtype=table.dtype)
                t2[: len(table)] = table
                table = t2
        missing = codes[~known[codes]] if len(codes) else codes
        if len(missing):
            need = np.unique(missing)
            res = np.asarray(f(self.decode(need)))
            if table is None:
                table = np.empty(len(known), dtype=res.dtype)
            elif table.dtype != res.dtype and res.dtype == object:
                table = table.astype(object)
            table[need] = res
            known[need] = True
        memo["table"], memo["known"] = table, known
        if table is None:
            return np.zeros(0, dtype=np.int64)
        return table[codes]
