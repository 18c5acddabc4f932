"""The cheap paths rows take into a database, each against the plain reading it replaces:

- a scan's string equalities with literals decided by length first, then its number
  conditions on the rows of the right lengths only, then the bytes.
"""

from __future__ import annotations

import random
from collections import Counter
from decimal import Decimal as D
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import ddflow.sql as dsql


def _decimals(words: list[int], valid: list[bool] | None = None) -> pa.Array:
    buf = pa.py_buffer(np.array(words, dtype=np.int64).tobytes())
    n = len(words) // 2
    if valid is None:
        return pa.Array.from_buffers(pa.decimal128(15, 2), n, [None, buf])
    bits = pa.py_buffer(np.packbits(np.array(valid, bool), bitorder="little").tobytes())
    return pa.Array.from_buffers(pa.decimal128(15, 2), n, [bits, buf], valid.count(False))


SQL = (
    "SELECT k, q FROM t WHERE s = 'DELIVER IN PERSON' AND m IN ('AIR', 'AIR REG') "
    "AND (q BETWEEN 1.00 AND 11.00 OR q BETWEEN 10.00 AND 20.00)"
)


def _keeps(s: Any, m: Any, q: Any) -> bool:
    return s == "DELIVER IN PERSON" and m in ("AIR", "AIR REG") and q is not None and 1 <= q <= 20


@pytest.mark.parametrize("n", [40, 400])
def test_numbers_after_string_lengths_keep_exactly_their_rows(n: int) -> None:
    """Few rows of the right lengths (their decimals taken and checked alone) and many
    (the column read in place); NULL decimals with junk in their slots, negative ones."""
    rng = random.Random(n)
    db = dsql.Database()
    db.execute("CREATE TABLE t (k BIGINT NOT NULL, s STRING, m STRING, q DECIMAL(15,2))")
    view = db.view(SQL)
    live: Counter[tuple[Any, ...]] = Counter()
    modes = ["AIR", "AIR REG", "FOB", "MAIL", "RAI", "AIR RE", None]
    k = 0
    for _step in range(4):
        rows = []
        common = "DELIVER IN PERSON" if n == 400 else "NONE"
        for _ in range(n):
            s = rng.choice([common, common, "DELIVER IN PERSON", "DELIVER IN PERSOM", None])
            q = rng.choice([None, D(rng.randrange(-500, 2500)) / 100])
            rows.append((k, s, rng.choice(modes), q))
            k += 1
        words: list[int] = []
        for r in rows:
            if r[3] is None:
                words += [rng.choice([7, -7, 1500]), rng.choice([0, -1, 5])]  # junk
            else:
                u = int(r[3] * 100)
                words += [u, -1 if u < 0 else 0]
        tbl = pa.table(
            {
                "k": pa.array([r[0] for r in rows], pa.int64()),
                "s": pa.array([r[1] for r in rows], pa.string()),
                "m": pa.array([r[2] for r in rows], pa.string()),
                "q": _decimals(words, [r[3] is not None for r in rows]),
            }
        )
        db.insert("t", tbl)
        db.commit()
        live.update((r[0], r[3]) for r in rows if _keeps(r[1], r[2], r[3]))
        assert Counter(view.rows()) == live


def test_a_decimal_word_that_does_not_fit_in_a_row_of_the_right_lengths() -> None:
    """A word beyond 64 bits in a row the string lengths leave is refused; in a row they
    rule out (a string of another length) it is not read."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (k BIGINT NOT NULL, s STRING, m STRING, q DECIMAL(15,2))")
    view = db.view(SQL)
    n = 40

    def table(bad_s: str) -> pa.Table:
        words: list[int] = []
        for i in range(n):
            words += [7, 1] if i == 3 else [500, 0]
        ss = ["NONE"] * n
        ss[3] = bad_s
        ss[10] = "DELIVER IN PERSON"
        return pa.table(
            {
                "k": pa.array(range(n), pa.int64()),
                "s": pa.array(ss, pa.string()),
                "m": pa.array(["AIR"] * n, pa.string()),
                "q": _decimals(words),
            }
        )

    db.insert("t", table("NONE"))  # row 3 has another length: not read
    db.commit()
    assert view.rows() == [(10, D("5.00"))]
    db.insert("t", table("DELIVER IN PERSOM"))  # row 3 of the right length: refused
    with pytest.raises(dsql.DataError, match="does not fit"):
        db.commit()
    assert view.rows() == [(10, D("5.00"))]
