"""The cheap paths rows take into a database, each against the plain reading it replaces:

- a scan's string equalities with literals decided by length first, then its number
  conditions on the rows of the right lengths only, then the bytes;
- a DECIMAL column's 128-bit words read as 64-bit values only when every word fits
  (``low_words_fit``: one pass over all words for the usual non-negative case);
- a string column of one-byte strings read byte by byte only when every string has one
  byte (``single_bytes``: the offsets compared with a counting sequence);
- a delete's chunks found by their least and greatest key, read from the Arrow buffer
  of a key column no view converted;
- inserted rows counted by a shared, read-only array of ones (``ones`` / ``is_ones``),
  which a later delete must not change for other rows;
- flag columns (one-byte strings) made codes by translating their bytes when every byte
  has a small code already (``StringDict.byte_codes``);
- a string column of the rows a prefilter keeps made codes on those rows alone
  (``LazyStrings.kept_codes``), when the prefilter leaves out a quarter of the rows or more.
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
from ddflow.sql.batch import is_ones, low_words_fit, ones
from ddflow.sql.strings import single_bytes


def _fits_plainly(words: np.ndarray) -> bool:
    lo, hi = words[0::2], words[1::2]
    return bool(np.array_equal(hi, lo >> 63))


@pytest.mark.parametrize(
    "words",
    [
        [150, 0, 7, 0, 0, 0],
        [150, 0, -225, -1, 0, 0],  # a negative value: high word -1
        [150, 0, 7, 1],  # a high word of 1 over a small low word
        [150, 0, 0, 1],  # 2**64: low word 0
        [5, 0, -3, 0],  # a low word with its sign bit set, high word 0 (2**64 - 3)
        [5, -1, 3, 0],  # a sign word over a positive low word
        [-5, -1, 3, 2],
        [(1 << 63) - 1, 0, 1, 0],
        [-(1 << 63), -1],
        [0, 1 << 62],
    ],
)
def test_low_words_fit_is_the_plain_check(words: list[int]) -> None:
    w = np.array(words, dtype=np.int64)
    assert low_words_fit(w, w[0::2]) == _fits_plainly(w)


def test_low_words_fit_random_words() -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        lo = rng.integers(-(10**6), 10**6, n)
        if rng.random() < 0.5:
            lo = np.abs(lo)
        hi = lo >> 63
        k = int(rng.integers(0, 4))
        for _ in range(k):  # a few words spoilt: another high word, or a sign flipped
            i = int(rng.integers(0, n))
            if rng.random() < 0.5:
                hi[i] = int(rng.integers(-3, 4))
            else:
                lo[i] = lo[i] ^ np.int64(-(1 << 63))
        w = np.empty(2 * n, np.int64)
        w[0::2], w[1::2] = lo, hi
        assert low_words_fit(w, w[0::2]) == _fits_plainly(w), w


def _strings_from(offsets: list[int], data: bytes, offset: int = 0) -> pa.Array:
    n = len(offsets) - 1
    arr = pa.Array.from_buffers(
        pa.string(),
        n,
        [None, pa.py_buffer(np.array(offsets, np.int32).tobytes()), pa.py_buffer(data)],
    )
    return arr.slice(offset) if offset else arr


@pytest.mark.parametrize("offset", [0, 1, 5])
def test_single_bytes_only_when_every_string_has_one_byte(offset: int) -> None:
    data = b"ABCDEFGHIJKL"
    # one byte each
    arr = _strings_from(list(range(13)), data, offset)
    got = single_bytes(arr)
    assert got is not None and bytes(got) == data[offset:]
    # as many bytes as strings, but one empty and one of two bytes
    offs = list(range(13))
    offs[6] = 5  # string 5 empty, string 6 two bytes
    arr = _strings_from(offs, data, offset)
    assert [len(s) for s in arr.to_pylist()].count(1) < len(arr)
    assert single_bytes(arr) is None
    # the data of one-byte strings that do not start at byte 0 of the buffer
    arr = _strings_from(list(range(3, 13)), data, offset)
    got = single_bytes(arr)
    assert got is not None and bytes(got) == data[3 + offset : 12]
    # a longer one than the kept counting sequence
    big = 70_000
    arr = pa.array(["x", "y"] * (big // 2))
    got = single_bytes(arr.slice(offset))
    assert got is not None and len(got) == big - offset
    spoilt = ["x", "y"] * (big // 2)
    spoilt[40_000], spoilt[40_001] = "", "xy"
    assert single_bytes(pa.array(spoilt).slice(offset)) is None


def test_one_byte_codes_in_a_view() -> None:
    db = dsql.Database()
    db.execute("CREATE TABLE t (k BIGINT NOT NULL, f STRING NOT NULL)")
    view = db.view("SELECT f, count(*) AS c FROM t GROUP BY f")
    offs = list(range(9))
    offs[3] = 2  # 'AB' 'C' ... : 8 bytes, 8 strings, one empty
    bad = _strings_from(offs, b"ABCDEFGH")
    db.insert("t", pa.table({"k": pa.array(range(8), pa.int64()), "f": bad}))
    db.commit()
    want = Counter(bad.to_pylist())
    assert Counter(dict(view.rows())) == want


def test_shared_ones_are_never_written() -> None:
    a = ones(5)
    assert is_ones(a) and a.tolist() == [1] * 5 and not a.flags.writeable
    assert not is_ones(np.ones(5, np.int64)) and not is_ones(a.copy()) and not is_ones(None)
    big = ones(300_000)  # (grows the shared array)
    assert is_ones(big) and len(big) == 300_000
    assert is_ones(a)  # (a view made before the growth is still known)
    db = dsql.Database()
    db.execute("CREATE TABLE t (k BIGINT NOT NULL, v INT)")
    view = db.view("SELECT k, v FROM t")
    rows = [(k, k % 3) for k in range(20)]
    db.insert("t", rows)
    db.commit()
    db.delete("t", rows[:5])
    db.insert("t", rows[:2])  # inserted and deleted again in one commit
    db.delete("t", rows[:2])
    db.commit()
    db.insert("t", rows[5:8])  # a new batch of ones after a removal from an old one
    db.commit()
    want = Counter(rows[5:]) + Counter(rows[5:8])
    assert Counter(view.rows()) == want
    assert ones(20).tolist() == [1] * 20
    db.delete("t", rows[5:8])
    db.delete("t", rows[5:8])
    db.commit()
    assert Counter(view.rows()) == Counter(rows[8:])
    with pytest.raises(dsql.DataError):
        db.delete("t", rows[5:6])
    db.commit()
    assert Counter(view.rows()) == Counter(rows[8:])


def test_inserts_before_and_after_the_shared_ones_grow_in_one_commit() -> None:
    """A commit whose first insert was counted by the shared ones before a larger insert
    grew them: both are applied, and a delete of the first's rows finds them."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (k BIGINT NOT NULL, v INT)")
    view = db.view("SELECT count(*), sum(v) FROM t")
    db.insert("t", [(1, 5), (2, 7)])
    size = len(ones(1).base) + 1  # more rows than the shared ones hold now
    db.insert(
        "t",
        pa.table(
            {
                "k": pa.array(np.arange(10, 10 + size), pa.int64()),
                "v": pa.array(np.ones(size, np.int32)),
            }
        ),
    )
    db.delete("t", [(1, 5)])
    db.commit()
    assert view.rows() == [(size + 1, size + 7)]
    db.delete("t", [(2, 7)])
    db.commit()
    assert view.rows() == [(size, size)]


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


@pytest.mark.parametrize("key_type", [pa.int64(), pa.int32(), pa.int16()])
def test_delete_finds_the_least_and_greatest_key_of_a_chunk(key_type: pa.DataType) -> None:
    """Deletes find their chunks by each chunk's least and greatest key, read from the
    Arrow buffer of a key column no view converted (sliced arrays: an offset)."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (k BIGINT NOT NULL, s STRING)")
    view = db.view("SELECT s FROM t")
    live: Counter[tuple[Any, ...]] = Counter()
    for c in range(6):
        ks = [c * 100 + (i * 37) % 50 for i in range(50)]
        ss = [f"r{k}" for k in ks]
        arr = pa.array([-1, *ks], key_type).slice(1)
        db.insert("t", pa.table({"k": arr, "s": pa.array(ss)}))
        db.commit()
        live.update(zip(ks, ss, strict=True))
    for k in (0, 349, 300, 549, 500, 49):  # one at a time: the query's range is one key
        gone = [(k, f"r{k}")]
        db.delete("t", pa.table({"k": pa.array([k], pa.int64()), "s": [f"r{k}"]}))
        db.commit()
        live.subtract(gone)
        assert Counter(view.rows()) == Counter({(s,): n for (_, s), n in live.items() if n})
    with pytest.raises(dsql.DataError, match="cannot delete"):
        db.delete("t", pa.table({"k": pa.array([0], pa.int64()), "s": ["r0"]}))


@pytest.mark.parametrize("crowded", [False, True])
def test_one_byte_flags_made_codes_by_translation(crowded: bool) -> None:
    """Flag columns (one-byte strings) become dictionary codes by translating their bytes
    when every flag has a small code, on all rows or on the rows a prefilter keeps; flags
    seen for the first time, and flags whose codes are 255 or more (``crowded``: many
    strings got codes before), go the general way. Every view counts each flag exactly."""
    dbs = [dsql.Database(), dsql.Database()]  # (one view each: neither reads for the other)
    for db in dbs:
        db.execute("CREATE TABLE t (k BIGINT NOT NULL, f STRING NOT NULL, g STRING)")
    every = dbs[0].view("SELECT f, count(*) AS c FROM t GROUP BY f")
    most = dbs[1].view("SELECT f, g, count(*) AS c FROM t WHERE k >= 3 GROUP BY f, g")
    rng = random.Random(5)
    live: list[tuple[int, str, str | None]] = []
    if crowded:  # 300 strings take the codes below 255 first
        words = [(i, "w", f"word{i}") for i in range(300)]
        for db in dbs:
            db.insert("t", words)
            db.commit()
        live += words
    k = 1000
    for flags in ("AN", "NA", "ANR", "RF", "ANRFO", "O", "FAN"):
        rows = []
        for _ in range(200):
            rows.append((k % 50, rng.choice(flags), rng.choice(["x", "y", None])))
            k += 1
        tbl = pa.table(
            {
                "k": pa.array([r[0] for r in rows], pa.int64()),
                "f": pa.array([r[1] for r in rows], pa.string()),
                "g": pa.array([r[2] for r in rows], pa.string()),
            }
        )
        for db in dbs:
            db.insert("t", tbl)
            db.commit()
        live += rows
        assert Counter(dict(((f,), c) for f, c in every.rows())) == Counter((r[1],) for r in live)
        want = Counter((r[1], r[2]) for r in live if r[0] >= 3)
        assert Counter({(f, g): c for f, g, c in most.rows()}) == want


@pytest.mark.parametrize("keep_pct", [10, 50, 90])
def test_kept_rows_of_a_string_column_made_codes_alone(
    keep_pct: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Distinct texts (and NULLs) in the rows a prefilter keeps are encoded alone when it
    leaves out a quarter or more (50%), the whole column otherwise (90%), the taken rows
    when it keeps few (10%). A second view reads the same column of the same batches under
    another prefilter, and rows are deleted and put back: every view counts its rows
    exactly after every commit."""
    from ddflow.sql.strings import StringDict

    sizes: list[int] = []
    encode = StringDict.encode_arrow

    def counted(self: StringDict, arr: Any) -> np.ndarray:
        sizes.append(len(arr))
        return encode(self, arr)

    monkeypatch.setattr(StringDict, "encode_arrow", counted)
    db = dsql.Database()
    db.execute("CREATE TABLE t (k BIGINT NOT NULL, x BIGINT NOT NULL, s STRING)")
    a = db.view(f"SELECT s, count(*) AS c FROM t WHERE x < {keep_pct} GROUP BY s")
    b = db.view("SELECT s, count(*) AS c FROM t WHERE x >= 65 GROUP BY s")
    rng = random.Random(keep_pct)
    live: list[tuple[int, int, str | None]] = []
    n = 400
    for step in range(4):
        rows = []
        for i in range(n):
            k = step * n + i
            s = None if rng.random() < 0.1 else rng.choice([f"t{k}", f"t{k % 7}", "é"])
            rows.append((k, rng.randrange(100), s))
        tbl = pa.table(
            {
                "k": pa.array([r[0] for r in rows], pa.int64()),
                "x": pa.array([r[1] for r in rows], pa.int64()),
                "s": pa.array([r[2] for r in rows], pa.string()),
            }
        )
        db.insert("t", tbl)
        if live:
            gone = live[: len(live) // 5]
            db.delete(
                "t",
                pa.table(
                    {
                        "k": pa.array([r[0] for r in gone], pa.int64()),
                        "x": pa.array([r[1] for r in gone], pa.int64()),
                        "s": pa.array([r[2] for r in gone], pa.string()),
                    }
                ),
            )
            live = live[len(gone) :]
        db.commit()
        live += rows
        want_a = Counter(r[2] for r in live if r[1] < keep_pct)
        want_b = Counter(r[2] for r in live if r[1] >= 65)
        assert Counter({s: c for s, c in a.rows()}) == want_a
        assert Counter({s: c for s, c in b.rows()}) == want_b
    # how the first view's rows were encoded: its kept rows alone (50%: about 200 of a
    # batch's 400), the whole batch (90%), the few rows taken (10%)
    near = [m for m in sizes if abs(m - n * keep_pct // 100) <= n // 10]
    assert near, sizes
    if keep_pct == 90:
        assert all(m == n or m <= n // 2 for m in sizes)
