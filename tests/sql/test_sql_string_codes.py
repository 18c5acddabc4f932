"""Codes of Arrow string columns whose strings are all one byte long (flags such as
``l_returnflag``), read by a table lookup per byte: the codes must be the dictionary's
codes of those strings, whatever arrived before (bytes first seen in a later batch,
longer strings in between, sliced arrays, NULLs, hashed codes), and queries over such
columns must equal DuckDB's answers.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from oracle import Del, Ins
from test_sql_speedups import ArrowOracle

from ddflow.sql.strings import StringDict, single_bytes


def _expect(sd: StringDict, values: list[Any]) -> list[int | None]:
    return [None if v is None else sd.code(v) for v in values]


@pytest.mark.parametrize("hashed", [False, True], ids=["sequential", "hashed"])
def test_one_byte_strings_get_their_dictionary_codes(hashed: bool) -> None:
    sd = StringDict(hashed=hashed)
    rng = random.Random(3)
    batches: list[pa.Array] = [
        pa.array(["N", "O", "N", "N"]),
        pa.array(["A", "N", "R", "O", "A"]),  # new bytes after the first batch
        pa.array(["N", "NO", "R"]),  # a longer string: not the byte path
        pa.array(["F", "N", None, "O"]),  # a NULL: not the byte path
        pa.array(["x", "N", "", "A"]),  # an empty string
        pa.array(["Z", "A", "B", "C", "N"]).slice(1, 3),  # an offset into the buffers
        pa.array([rng.choice("ANORFZ~ ") for _ in range(5000)]),
        pa.array(["é", "N"]),  # two bytes in UTF-8
        pa.array(["R", "F", "Z", "~", " "]),  # all seen before, by several paths
    ]
    # strings first coded elsewhere (another column, a literal) before they arrive here
    sd.code("F")
    for arr in batches:
        got = sd.encode_arrow(arr).tolist()
        # every string of the batch has a code now: the dictionary's own (which
        # ``code`` looks up without adding any)
        want = _expect(sd, arr.to_pylist())
        for g, w in zip(got, want, strict=True):
            if w is not None:  # (a NULL's code is unspecified)
                assert g == w
        assert sd.decode_list([g for g, w in zip(got, want, strict=True) if w is not None]) == [
            v for v in arr.to_pylist() if v is not None
        ]
    # no string was given two codes: one code per distinct string met
    met = {"", "F"} | {v for a in batches for v in a.to_pylist() if v is not None}
    assert len(sd) == len(met)


def test_single_bytes_only_for_one_byte_strings() -> None:
    assert single_bytes(pa.array(["a", "b"])) is not None
    assert single_bytes(pa.array(["a", "bb"])) is None
    assert single_bytes(pa.array(["ab", ""])) is None  # two bytes in two strings
    assert single_bytes(pa.array(["a", None])) is None
    assert single_bytes(pa.array(["é"])) is None
    got = single_bytes(pa.array(["q", "a", "b", "c"]).slice(1, 2))
    assert got is not None and bytes(got.tolist()) == b"ab"


DDL = ["CREATE TABLE f (k BIGINT NOT NULL, a STRING NOT NULL, b STRING, v INT)"]

VIEWS = [
    "SELECT a, b, count(*) AS c, sum(v) AS s FROM f GROUP BY a, b",
    "SELECT a, count(*) AS c FROM f WHERE a < 'N' GROUP BY a",
    "SELECT k, a FROM f WHERE a IN ('A', 'RR') OR b = 'O'",
    "SELECT max(a) AS m, min(b) AS n, count(DISTINCT a) AS d FROM f",
    "SELECT x.k, y.k AS k2 FROM f x JOIN f y ON x.a = y.b WHERE x.v > 2 AND y.v < 1",
]


def _rows(rng: random.Random, n: int, k0: int, flags: str) -> list[tuple[Any, ...]]:
    return [
        (
            k,
            rng.choice(flags),
            None if rng.random() < 0.2 else rng.choice(flags),
            rng.randrange(-2, 6),
        )
        for k in range(k0, k0 + n)
    ]


@pytest.mark.parametrize("sql", VIEWS)
def test_one_byte_string_columns_equal_duckdb(sql: str) -> None:
    rng = random.Random(5)
    first = _rows(rng, 60, 0, "NO")
    second = _rows(rng, 50, 60, "AFNOR")  # bytes not seen before
    third = _rows(rng, 40, 110, "A") + [(200, "RR", "N", 1), (201, "", None, 3)]
    o = ArrowOracle(DDL)
    o.view(sql)
    for c in [
        [Ins("f", first)],
        [Ins("f", second), Del("f", first[:20])],
        [Ins("f", third), Del("f", second[5:30])],
        [Del("f", third[:10] + first[20:])],
    ]:
        o.commit(c)


@pytest.mark.parametrize("hashed", [False, True], ids=["sequential", "hashed"])
def test_distinct_strings_get_the_codes_one_by_one_would(hashed: bool) -> None:
    # columns of mostly new, mostly distinct strings (names, comments) are coded through
    # their Arrow dictionary, each distinct string looked up once; the codes must be what
    # coding the strings one at a time gives, whatever was coded before
    fast, slow = StringDict(hashed=hashed), StringDict(hashed=hashed)
    rng = random.Random(5)
    pool = [f"customer#{i:05d} {'x' * (i % 13)}" for i in range(400)] + ["", "é", "a"]
    for step in range(12):
        values = [rng.choice(pool) if rng.random() < 0.9 else None for _ in range(300)]
        if step % 4 == 3:
            values = [f"only now {step} {i}" for i in range(50)]  # all new
        if step % 5 == 4:
            values = [v for v in values if v is not None][:40]  # all known
        if step % 6 == 5:
            values = values[:20]  # a few, coded one by one, NULLs among them
            values[3] = None
        arr = pa.array(values, pa.large_string() if step % 2 else pa.string())
        got = fast.encode_arrow(arr).tolist()
        want = _expect(slow, values)
        assert [g for g, w in zip(got, want, strict=True) if w is not None] == [
            w for w in want if w is not None
        ]
    assert fast.encode_distinct([]).tolist() == []
