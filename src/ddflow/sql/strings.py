"""The string dictionary: every distinct string of a database gets one integer code.

Why: joins, grouping and equality then run on ``int64`` columns. Codes are assigned in
arrival order, so they do not sort like the strings; everything that needs the strings'
order or content (``<``, ``LIKE``, ``upper``, ``ORDER BY``, ``min``) works on the strings
themselves, looked up per distinct code (``memo``), never per row.

Invariant: a code, once given, names its string forever (codes are never reused), so
physical values stored in traces stay meaningful.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ddflow.core.errors import DataError

__all__ = ["StringDict", "content_code"]


def content_code(s: str) -> int:
    """A string's code from its content alone (a signed 64-bit BLAKE2b digest)."""
    return int.from_bytes(hashlib.blake2b(s.encode("utf-8", "surrogatepass"),
                                          digest_size=8).digest(), "little", signed=True)


class StringDict:
    """A growing bijection between strings and ``int64`` codes ``0, 1, 2, ...``.

    ``hashed=True`` gives every string the code of its content instead (64 bits of
    BLAKE2b of its UTF-8 bytes), so workers in other processes agree on codes without
    talking; two strings with one code raise ``DataError``. Codes index ``array()`` only
    in the sequential form.
    """

    def __init__(self, hashed: bool = False) -> None:
        self.hashed = hashed
        self._codes: dict[str, int] = {}
        self._strings: list[str] = []
        self._by_code: dict[int, str] = {}
        self._array: np.ndarray = np.empty(0, dtype=object)
        self._unsent: list[int] = []  # hashed: codes made here, not yet sent to peers
        # the empty string first: a NULL's physical value (0) then always decodes
        self.code("")
        if hashed:
            self._by_code.setdefault(0, "")

    def __len__(self) -> int:
        return len(self._strings)

    def code(self, s: str) -> int:
        """The code of ``s`` (assigned now if new)."""
        c = self._codes.get(s)
        if c is None:
            if self.hashed:
                c = content_code(s)
                other = self._by_code.get(c)
                if other is not None and other != s:
                    raise DataError(f"strings {other!r} and {s!r} have the same 64-bit "
                                    "hash; they cannot both be stored")
                self._by_code[c] = s
                self._unsent.append(c)
            else:
                c = len(self._strings)
            self._codes[s] = c
            self._strings.append(s)
        return c

    def take_new(self) -> dict[int, str] | None:
        """The strings this dictionary made since the last call (for its peers), or None."""
        if not self._unsent:
            return None
        by = self._by_code
        out = {c: by[c] for c in self._unsent}
        self._unsent = []
        return out

    def entries(self) -> dict[int, str]:
        """Code -> string of every string seen."""
        if self.hashed:
            return dict(self._by_code)
        return dict(enumerate(self._strings))

    def learn(self, entries: dict[int, str]) -> None:
        """Adopts code -> string pairs another dictionary of the same kind made."""
        if not self.hashed:
            raise DataError("only content-hashed dictionaries can merge")
        for c, s in entries.items():
            other = self._by_code.get(c)
            if other is None:
                self._by_code[c] = s
                self._codes[s] = c
                self._strings.append(s)
            elif other != s:
                raise DataError(f"strings {other!r} and {s!r} have the same 64-bit hash")

    def encode_list(self, values: Sequence[str]) -> np.ndarray:
        """Codes of ``values`` (assigning new ones), as an ``int64`` column."""
        codes = self._codes
        got = list(map(codes.get, values))
        if None in got:
            new = list(dict.fromkeys(v for v, g in zip(values, got, strict=True) if g is None))
            if self.hashed:
                for v in new:
                    self.code(v)
            else:
                start = len(self._strings)
                codes.update(zip(new, range(start, start + len(new)), strict=True))
                self._strings.extend(new)
            got = list(map(codes.__getitem__, values))
        return np.array(got, dtype=np.int64).reshape(len(got))

    def encode_unique(self, uniques: Sequence[str], inverse: np.ndarray) -> np.ndarray:
        """Codes of rows given as distinct strings and each row's index into them."""
        codes = self.encode_list(list(uniques))
        return codes[inverse] if len(inverse) else np.zeros(0, dtype=np.int64)

    def array(self) -> np.ndarray:
        """All strings as an ``object`` array indexed by code (sequential codes only)."""
        have, n = len(self._array), len(self._strings)
        if have != n:
            tail = np.empty(n - have, dtype=object)
            tail[:] = self._strings[have:]
            self._array = np.concatenate([self._array, tail]) if have else tail
        return self._array

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """The strings of ``codes`` as an ``object`` array."""
        codes = np.asarray(codes)
        if codes.dtype == object:
            codes = codes.astype(np.int64)
        if self.hashed:
            out = np.empty(len(codes), dtype=object)
            out[:] = self.decode_list(codes)
            return out
        return self.array()[codes]

    def decode_list(self, codes: np.ndarray) -> list[str]:
        if self.hashed:
            by = self._by_code
            try:
                return [by[c] for c in np.asarray(codes).tolist()]
            except KeyError as e:
                raise DataError(f"no string is known for code {e.args[0]}") from e
        strings = self._strings
        return [strings[c] for c in np.asarray(codes).tolist()]

    def map_codes(self, codes: np.ndarray, f: Callable[[np.ndarray], np.ndarray],
                  memo: dict[str, Any] | None = None) -> np.ndarray:
        """``f`` (over an ``object`` array of distinct strings) applied to each row's string,
        evaluated once per distinct code of the batch (and once ever per code with ``memo``,
        a dict this call keeps its table in)."""
        codes = np.asarray(codes, dtype=np.int64)
        if memo is None or self.hashed:
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
