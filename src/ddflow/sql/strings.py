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
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ddflow.core.errors import DataError

__all__ = ["StringDict", "content_code"]


def content_code(s: str) -> int:
    """A string's code from its content alone (a signed 64-bit BLAKE2b digest)."""
    return int.from_bytes(
        hashlib.blake2b(s.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
        "little",
        signed=True,
    )


_SHORT_CACHE = 1 << 21  # short strings remembered at most (beyond: hashed per batch)
_SHORT = 7  # bytes of a string packed into one int64 key (the eighth holds its length)


def _short_keys(arr: Any) -> np.ndarray | None:
    """Each string of an Arrow string array packed into an ``int64`` (its UTF-8 bytes, then
    its length in the top byte; distinct strings, distinct keys) when every string has the
    same length of at most 7 bytes (flags, codes, fixed-width CHAR columns; there the
    packing is a reshape of the data buffer), else None. NULL rows pack as any string."""
    import pyarrow as pa

    n = len(arr)
    bufs = arr.buffers()
    odt = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    off = np.frombuffer(bufs[1], dtype=odt, count=arr.offset + n + 1)[arr.offset :]
    start, end = int(off[0]), int(off[-1])
    width, rest = divmod(end - start, n)
    if rest or width > _SHORT or bufs[2] is None or width == 0:
        return None
    if n > 1 and not (np.diff(off) == width).all():
        return None
    mat = np.zeros((n, 8), np.uint8)
    mat[:, :width] = np.frombuffer(bufs[2], dtype=np.uint8)[start:end].reshape(n, width)
    mat[:, 7] = width
    return mat.view(np.int64).reshape(n)


def single_bytes(arr: Any) -> np.ndarray | None:
    """The byte of each string of an Arrow ``string`` array without NULLs when every
    string is one byte long (so one ASCII character: the byte is the string), else None."""
    import pyarrow as pa

    n = len(arr)
    if arr.null_count or not pa.types.is_string(arr.type):
        return None
    bufs = arr.buffers()
    if bufs[2] is None:
        return None
    off = np.frombuffer(bufs[1], dtype=np.int32, count=arr.offset + n + 1)[arr.offset :]
    start = int(off[0])
    if int(off[-1]) - start != n:
        return None
    if n > 1:
        # every string one byte long: the offsets are start, start + 1, ..., start + n
        # (compared with a slice of a kept arange, one pass; else by their differences)
        steps = _steps(start + n + 1)
        if steps is not None:
            if not np.array_equal(off, steps[start : start + n + 1]):
                return None
        elif not (off[1:] - off[:-1] == 1).all():
            return None
    return np.frombuffer(bufs[2], dtype=np.uint8, count=start + n)[start:]


#: at most this many strings are coded one by one (``StringDict.encode_arrow``)
_FEW_STRINGS = 64

_STEPS = np.arange(1 << 16, dtype=np.int32)
_STEPS_MAX = 1 << 24


def _steps(n: int) -> np.ndarray | None:
    """``0, 1, ..., n - 1`` and on (``int32``, kept and grown as needed), or None beyond
    ``_STEPS_MAX``."""
    global _STEPS
    if n > len(_STEPS):
        if n > _STEPS_MAX:
            return None
        _STEPS = np.arange(max(n, 2 * len(_STEPS)), dtype=np.int32)
    return _STEPS


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
        # strings of at most 7 UTF-8 bytes packed into one int64 (bytes, then the length in
        # the top byte), sorted, beside their codes: Arrow columns of short strings are
        # encoded by a binary search per row instead of a hash of each string
        self._short_keys = np.zeros(0, np.int64)
        self._short_codes = np.zeros(0, np.int64)
        # one-byte strings (flags such as 'A', 'N', 'R') by their byte: a table lookup per
        # row; -1 where a byte has no code yet (sequential codes are never negative; hashed
        # ones may be, so they also keep which bytes are known)
        self._byte_codes = np.full(256, -1, np.int64)
        self._byte_known = np.zeros(256, bool)
        # the same as a byte translation table for the codes below 255 (255: no such code
        # yet), so bytes whose codes are all small become codes by ``bytes.translate``
        self._byte_small = bytearray(b"\xff" * 256)
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
                    raise DataError(
                        f"strings {other!r} and {s!r} have the same 64-bit "
                        "hash; they cannot both be stored"
                    )
                self._by_code[c] = s
                self._unsent.append(c)
            else:
                c = len(self._strings)
            self._codes[s] = c
            self._strings.append(s)
        return c

    def find(self, s: str) -> int | None:
        """The code of ``s`` if it has one (no string gets a code here)."""
        return self._codes.get(s)

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

    def entries_since(self, mark: int) -> tuple[dict[int, str], int]:
        """Code -> string of the strings this dictionary got (made or learned) after it
        held ``mark`` of them, and the mark to give next time (``entries_since(0)`` is
        every string)."""
        new = self._strings[mark:]
        codes = self._codes
        return {codes[s]: s for s in new}, len(self._strings)

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

    def encode_distinct(self, values: Sequence[str]) -> np.ndarray:
        """Codes of ``values``, which are distinct (an Arrow dictionary's, ``np.unique``'s),
        assigning new ones: each string looked up once and, when new, stored once (no
        second pass to read back the codes just given)."""
        codes = self._codes
        n = len(values)
        got = np.fromiter(map(codes.get, values, itertools.repeat(-1)), np.int64, n)
        miss = np.flatnonzero(got < 0) if n else got
        if not len(miss):
            return got
        new = values if len(miss) == n else [values[i] for i in miss.tolist()]
        if self.hashed:
            got[miss] = [self.code(v) for v in new]
            return got
        start = len(self._strings)
        codes.update(zip(new, range(start, start + len(new)), strict=True))
        self._strings.extend(new)
        got[miss] = np.arange(start, start + len(new), dtype=np.int64)
        return got

    def encode_arrow(self, arr: Any) -> np.ndarray:
        """Codes of an Arrow string column (``string``, ``large_string``, or a dictionary of
        them; one chunk). A NULL row's code is unspecified: callers mask NULLs themselves."""
        import pyarrow as pa

        if pa.types.is_dictionary(arr.type):
            n = len(arr)
            codes = (
                self.encode_arrow(arr.dictionary) if len(arr.dictionary) else np.zeros(1, np.int64)
            )
            idx = arr.indices
            if idx.null_count:
                idx = idx.fill_null(0)
            return (
                codes[np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.intp)]
                if n
                else np.zeros(0, np.int64)
            )
        n = len(arr)
        if n == 0:
            return np.zeros(0, np.int64)
        if n <= _FEW_STRINGS:
            # a few strings (the rows a filter kept): looked up one by one, which costs less
            # than the numpy and Arrow calls of the column paths below
            vals = arr.to_pylist()
            if None not in vals:
                return self.encode_list(vals)
            at = [i for i, v in enumerate(vals) if v is not None]
            out = np.zeros(n, np.int64)
            if at:
                out[at] = self.encode_list([vals[i] for i in at])
            return out
        one = single_bytes(arr)
        if one is not None:
            small = self.byte_codes(one)
            if small is not None:
                return small
            one = one.astype(np.intp)  # (numpy indexes by intp; a uint8 index is slow)
            codes = self._byte_codes.take(one)
            if self._byte_known[one].all() if self.hashed else codes.min() >= 0:
                return codes
            codes = self._encode_short(arr)
            self._byte_codes[one] = codes
            self._byte_known[one] = True
            if not self.hashed:
                bc = self._byte_codes
                for b in np.flatnonzero((bc >= 0) & (bc < 255)).tolist():
                    self._byte_small[b] = int(bc[b])
            return codes
        return self._encode_short(arr)

    def byte_codes(self, one: np.ndarray) -> np.ndarray | None:
        """The codes of one-byte strings given as their bytes (``uint8``, ``single_bytes``)
        when every one of them has a code below 255 already (sequential codes only): the
        bytes translated to their codes (``bytes.translate``, no index array) and widened
        once; else None (``encode_arrow`` assigns codes)."""
        if self.hashed:
            return None
        small = np.frombuffer(one.tobytes().translate(self._byte_small), dtype=np.uint8)
        if len(small) and small.max() == 255:
            return None
        return small.astype(np.int64)

    def _encode_short(self, arr: Any) -> np.ndarray:
        import pyarrow as pa

        keys = _short_keys(arr)
        if keys is None:
            return self._encode_hashed(arr)
        sk = self._short_keys
        if len(sk):
            pos = np.searchsorted(sk, keys)
            pos[pos == len(sk)] = 0
            found = sk[pos] == keys
            if found.all():
                return self._short_codes[pos]
            miss = np.flatnonzero(~found)
        else:
            miss = np.arange(len(keys))
        new_keys, first = np.unique(keys[miss], return_index=True)
        if len(sk) + len(new_keys) > _SHORT_CACHE:
            return self._encode_hashed(arr)
        rows = miss[first]
        new_codes = self.encode_list(
            ["" if v is None else v for v in arr.take(pa.array(rows)).to_pylist()]
        )
        allk = np.concatenate([sk, new_keys])
        allc = np.concatenate([self._short_codes, new_codes])
        order = np.argsort(allk, kind="stable")
        self._short_keys, self._short_codes = allk[order], allc[order]
        return self._encode_short(arr)

    def _encode_hashed(self, arr: Any) -> np.ndarray:
        import pyarrow.compute as pc

        if len(arr) == 0:
            return np.zeros(0, np.int64)
        enc = pc.dictionary_encode(arr)
        uniq = enc.dictionary.to_pylist()
        idx = enc.indices
        if idx.null_count:
            idx = idx.fill_null(0)
        codes = self.encode_distinct(uniq) if uniq else np.zeros(1, np.int64)
        return codes[np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.intp)]

    def encode_unique(self, uniques: Sequence[str], inverse: np.ndarray) -> np.ndarray:
        """Codes of rows given as distinct strings and each row's index into them."""
        codes = self.encode_distinct(list(uniques))
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

    def map_codes(
        self,
        codes: np.ndarray,
        f: Callable[[np.ndarray], np.ndarray],
        memo: dict[str, Any] | None = None,
    ) -> np.ndarray:
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
