"""Relations as records: a relation's row is one record of ``int64`` value columns followed
by null-mask words.

A relation with fields ``f_0 .. f_{n-1}`` stores a row as the record
``(v_0, ..., v_{n-1}, m_0, ..., m_{w-1})``: ``v_i`` is field ``i``'s physical value
(``ddflow.sql.types``; 0 when NULL) and bit ``i % 62`` of mask word ``i // 62`` is set when
field ``i`` is NULL. Relations without nullable fields have no mask words (``w = 0``).
Because a NULL's value is always 0, rows equal in SQL's "not distinct" sense (GROUP BY,
DISTINCT, UNION) are equal records, and a mask that is 0 in a whole batch costs the
engine's sorts nothing.

``Frame`` reads one batch of such records for expression evaluation; ``pack`` writes
values and null flags back into records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ddflow.sql.types import SqlType

__all__ = ["Field", "Frame", "mask_words", "pack"]

BITS = 62


@dataclass(frozen=True)
class Field:
    """A named, typed column of a relation."""

    name: str
    type: SqlType
    nullable: bool = True
    #: the table (or alias) the column came from, for error messages and ``explain``
    source: str = ""


def mask_words(fields: Sequence[Field]) -> int:
    """How many mask words a relation with ``fields`` carries."""
    if not any(f.nullable for f in fields):
        return 0
    return (len(fields) + BITS - 1) // BITS


class Frame:
    """One batch of a relation's records: values and null flags per field. Columns are
    read when asked for (``cols`` may take rows lazily)."""

    def __init__(self, cols: Sequence[np.ndarray], width: int, n: int | None = None) -> None:
        self.width = width
        self._cols = cols
        self._masks: list[np.ndarray] | None = None
        self.n = int(n if n is not None else (len(cols[0]) if len(cols) else 0))
        self._nulls: dict[int, np.ndarray | None] = {}
        self.seen: dict[Any, Any] = {}  # expression -> its result on this batch

    @property
    def vals(self) -> list[np.ndarray]:
        return [self._cols[i] for i in range(self.width)]

    @property
    def masks(self) -> list[np.ndarray]:
        """The mask words, or [] when no field of the batch is NULL."""
        if self._masks is None:
            ms = [self._cols[i] for i in range(self.width, len(self._cols))]
            self._masks = ms if any(m.any() for m in ms) else []
        return self._masks

    def val(self, i: int) -> np.ndarray:
        return self._cols[i]

    def null(self, i: int) -> np.ndarray | None:
        """Field ``i``'s null flags, or None when no row of the batch is NULL there."""
        masks = self.masks
        if not masks:
            return None
        got = self._nulls.get(i, False)
        if got is not False:
            return got  # type: ignore[return-value]
        m = masks[i // BITS]
        flags = ((m >> (i % BITS)) & 1).astype(bool)
        res = flags if flags.any() else None
        self._nulls[i] = res
        return res


def pack(
    vals: Sequence[np.ndarray], nulls: Sequence[np.ndarray | None], words: int, n: int
) -> tuple[np.ndarray, ...]:
    """Records from values and null flags (``None`` = no NULL in the batch): NULL values are
    zeroed and the mask words built."""
    out = list(vals)
    if words == 0:
        return tuple(out)
    masks = [np.zeros(n, dtype=np.int64) for _ in range(words)]
    for i, nl in enumerate(nulls):
        if nl is None:
            continue
        if out[i].dtype == object:
            v = out[i].copy()
            v[nl] = 0
        else:
            v = np.where(nl, 0, out[i])
        out[i] = v
        masks[i // BITS] |= nl.astype(np.int64) << (i % BITS)
    return tuple(out) + tuple(masks)


def select_columns(
    cols: Sequence[np.ndarray], fields: Sequence[Field], idxs: Sequence[int]
) -> tuple[np.ndarray, ...]:
    """Records of the fields ``idxs`` (in that order) of records ``cols`` of ``fields``."""
    n = len(cols[0]) if len(cols) else 0
    if list(idxs) == list(range(len(fields))):
        return tuple(cols)
    fr = Frame(cols, len(fields), n)
    sub = [fields[i] for i in idxs]
    return pack([cols[i] for i in idxs], [fr.null(i) for i in idxs], mask_words(sub), n)
