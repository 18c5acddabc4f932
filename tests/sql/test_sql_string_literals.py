"""A scan's equalities of a string column with literals (``s = 'x'``, ``s IN ('x', 'y')``),
decided on the Arrow buffers as rows arrive: by each string's length first, then by its
bytes. Every view must keep exactly the rows a plain Python reading of the condition
keeps, after every commit, on Arrow arrays made to catch a byte comparison out:

- literals of 0 to 25 bytes, so a comparison by 8-byte words meets every remainder, and
  multi-byte UTF-8 text (a literal's length is its byte length);
- strings ending in the last bytes of the data buffer, and data buffers shorter than one
  word;
- arrays that are slices (offsets not starting at 0), ``large_string`` arrays;
- NULL slots whose bytes spell a literal (Arrow leaves a NULL's slot undefined);
- values that share a literal's prefix, its length but not its bytes, or differ in the
  last byte only.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import ddflow.sql as dsql

LITERALS = [
    "",
    "a",
    "AIR",
    "AIR REG",
    "ABCDEFGH",
    "ABCDEFGHI",
    "DELIVER IN PERS",
    "DELIVER IN PERSO",
    "DELIVER IN PERSON",
    "ABCDEFGHIJKLMNOPQRSTUVWX",
    "ABCDEFGHIJKLMNOPQRSTUVWXY",
    "é",
    "naïve café",
]


def _near(lit: str) -> list[str]:
    """Values a byte comparison could mistake for ``lit``."""
    out = [lit, lit + "x", lit[:-1], lit[::-1]]
    if lit:
        last = chr(ord(lit[-1]) + 1)
        out.append(lit[:-1] + last)  # same length, last byte differs
        out.append(chr(ord(lit[0]) + 1) + lit[1:])  # same length, first byte differs
        if len(lit) > 8:
            out.append(lit[:8] + "#" + lit[9:])  # a middle byte differs
    return out


VALUES = sorted({v for lit in LITERALS for v in _near(lit)})

Pred = Callable[[Any, Any, int], bool]


def _in(col: int, vals: tuple[Any, ...]) -> Pred:
    return lambda s, m, k: (s, m)[col] is not None and (s, m)[col] in vals


#: (condition, Python reading of it on (s, m, k)): TRUE rows only (NULL is not TRUE)
CONDITIONS: list[tuple[str, Pred]] = [
    *[(f"s = '{lit}'", _in(0, (lit,))) for lit in LITERALS],
    ("'AIR' = s", _in(0, ("AIR",))),
    ("s IN ('AIR', 'AIR REG')", _in(0, ("AIR", "AIR REG"))),
    ("s IN ('', 'a', 'ABCDEFGHI', 'é')", _in(0, ("", "a", "ABCDEFGHI", "é"))),
    ("s IN ('AIR', NULL)", _in(0, ("AIR",))),
    (
        "s IN ('DELIVER IN PERSON', 'DELIVER IN PERSO', 'ABCDEFGH')",
        _in(0, ("DELIVER IN PERSON", "DELIVER IN PERSO", "ABCDEFGH")),
    ),
    (
        "s = 'DELIVER IN PERSON' AND m IN ('AIR', 'AIR REG')",
        lambda s, m, k: s == "DELIVER IN PERSON" and m in ("AIR", "AIR REG"),
    ),
    (
        "s = 'AIR' AND m = 'a' AND k > 40",
        lambda s, m, k: s == "AIR" and m == "a" and k > 40,
    ),
    (
        "(k < 30 OR k > 70) AND s IN ('a', 'AIR REG') AND m LIKE 'A%'",
        lambda s, m, k: (
            (k < 30 or k > 70) and s in ("a", "AIR REG") and m is not None and m.startswith("A")
        ),
    ),
    (
        "(s = 'a' AND k < 50) OR (m = 'AIR' AND k >= 50)",
        lambda s, m, k: (s == "a" and k < 50) or (m == "AIR" and k >= 50),
    ),
]


def _strings(values: list[str | None], hidden: str, large: bool = False) -> pa.Array:
    """A string array of ``values`` whose NULL slots hold the bytes of ``hidden``."""
    data = bytearray()
    offs = [0]
    valid = []
    for v in values:
        data += (hidden if v is None else v).encode()
        offs.append(len(data))
        valid.append(v is not None)
    bits = np.packbits(np.array(valid, dtype=bool), bitorder="little").tobytes()
    odt = np.int64 if large else np.int32
    return pa.Array.from_buffers(
        pa.large_string() if large else pa.string(),
        len(values),
        [pa.py_buffer(bits), pa.py_buffer(np.array(offs, odt).tobytes()), pa.py_buffer(data)],
        null_count=valid.count(False),
    )


def _batch(rows: list[tuple[Any, ...]], shape: str, hidden: str) -> pa.Table:
    """``rows`` as an Arrow table whose string columns are built as ``shape`` says."""
    ks = pa.array([r[0] for r in rows], pa.int64())
    cols = []
    for j in (1, 2):
        vals = [r[j] for r in rows]
        if shape == "slice":  # the rows in the middle of a longer array
            pad = ["padding", None, "AIR"]
            arr = _strings(pad + vals + pad, hidden).slice(len(pad), len(vals))
        elif shape == "large":
            arr = _strings(vals, hidden, large=True)
        else:
            arr = _strings(vals, hidden)
        cols.append(arr)
    return pa.Table.from_arrays([ks, *cols], names=["k", "s", "m"])


def _row(rng: random.Random, k: int) -> tuple[Any, ...]:
    def pick() -> str | None:
        return None if rng.random() < 0.15 else rng.choice(VALUES)

    return (k, pick(), pick())


def _run(shape: str, hidden: str, seed: int) -> None:
    rng = random.Random(seed)
    db = dsql.Database()
    db.execute("CREATE TABLE t (k BIGINT NOT NULL, s STRING, m STRING)")
    views = [(db.view(f"SELECT k, s, m FROM t WHERE {c}"), p, c) for c, p in CONDITIONS]
    live: Counter[tuple[Any, ...]] = Counter()
    k = 0
    for step in range(5):
        new = []
        for _ in range(rng.randrange(40, 120)):
            new.append(_row(rng, k % 100))
            k += 1
        if step == 2:
            # a batch whose data buffer is shorter than one 8-byte word
            new = [(1, "a", None), (2, None, "a"), (3, "", "a")]
        pool = sorted(live.elements(), key=repr)
        gone = rng.sample(pool, min(len(pool), rng.randrange(0, 40)))
        if new:
            db.insert("t", _batch(new, shape, hidden))
        if gone:
            db.delete("t", _batch(gone, shape, hidden))
        db.commit()
        live.update(new)
        live.subtract(gone)
        live = +live
        for view, pred, cond in views:
            want = Counter({r: n for r, n in live.items() if pred(r[1], r[2], r[0])})
            assert Counter(view.rows()) == want, (cond, shape, hidden, step)


@pytest.mark.parametrize("shape", ["plain", "slice", "large"])
@pytest.mark.parametrize("hidden", ["AIR", "DELIVER IN PERSON", ""])
def test_string_equalities_with_literals_keep_exactly_their_rows(shape: str, hidden: str) -> None:
    _run(shape, hidden, seed=len(shape) * 31 + len(hidden))


def test_short_data_buffer_and_strings_at_its_end() -> None:
    """A batch whose every string is short, the last one ending the data buffer (so no
    8-byte word starts at it): each literal of 0 to 7 bytes finds exactly its rows."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (k BIGINT NOT NULL, s STRING)")
    lits = ["", "a", "ab", "AIR", "AIR R", "AIR REG"]
    views = {lit: db.view(f"SELECT k FROM t WHERE s = '{lit}'") for lit in lits}
    for vals in (["a"], ["ab", "a"], ["AIR REG", "AIR", "a"], ["", "AIR R", "ab"], ["AIR REG"]):
        rows = list(enumerate(vals))
        db.insert("t", pa.table({"k": pa.array([r[0] for r in rows], pa.int64()), "s": vals}))
        db.commit()
        for lit, v in views.items():
            assert sorted(v.rows()) == sorted((k,) for k, s in rows if s == lit), (vals, lit)
        db.delete("t", pa.table({"k": pa.array([r[0] for r in rows], pa.int64()), "s": vals}))
        db.commit()
        assert all(v.rows() == [] for v in views.values())
