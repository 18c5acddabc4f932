"""SQLite compares a number with text by affinity: a column (or a CAST) has its type's
affinity, any other expression none. A number with numeric affinity reads text that is a
number as that number (spaces around it allowed; a whole number beyond 64 bits as a REAL)
and leaves other text as text; a TEXT column makes a number without affinity its text;
with no affinity on either side the two are compared as they are, and every number sorts
below every text. An IN list is one such comparison per item, and IN (subquery) holds
where the comparison with one of its rows does. Checked against sqlite3 on
the same rows after every commit."""

from __future__ import annotations

import random
from typing import Any

import pytest
from oracle import check_sqlite_commits

DDL = "CREATE TABLE t(a INTEGER, r REAL, c TEXT, d TEXT)"

TEXTS = [
    "x",
    "",
    "10",
    "2",
    " 2 ",
    "2.5",
    "-3",
    "+4",
    "1e1",
    "2.",
    ".5",
    "0x10",
    "2abc",
    "abc2",
    "9223372036854775807",
    "99999999999999999999",
    "-9223372036854775809",
    "\t7\n",
    "1 2",
    "- 1",
    "e5",
    "1e",
    "NaN",
    "inf",
    "0",
    "-0",
    "00012",
    None,
]
OPS = ["=", "<>", "<", "<=", ">", ">="]


def _rows(rng: random.Random, k: int) -> list[tuple[Any, ...]]:
    def num() -> Any:
        return rng.choice([None, 0, 1, 2, 3, 4, 7, 10, 12, -3, 2**62, -(2**62)])

    def real() -> Any:
        return rng.choice([None, 0.0, 2.5, 2.0, -3.0, 0.5, 10.0, 1e19])

    return [(num(), real(), rng.choice(TEXTS), rng.choice(TEXTS)) for _ in range(k)]


def _same(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> bool:
    return sorted(got, key=repr) == sorted(want, key=repr)


def _commits(seed: int) -> list[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
    rng = random.Random(seed)
    live: list[tuple[Any, ...]] = []
    out = []
    for _ in range(4):
        ins = _rows(rng, rng.randint(3, 12))
        dels = rng.sample(live, min(len(live), rng.randint(0, 4)))
        for r in dels:
            live.remove(r)
        live.extend(ins)
        out.append((ins, dels))
    out.append(([], list(live)))  # (every row gone: empty answers)
    out.append((_rows(rng, 6), []))
    return out


def _queries(seed: int) -> list[str]:
    rng = random.Random(seed)
    numbers = ["a", "r", "a + 0", "r * 1", "CAST(c AS INTEGER)", "3", "2.5", "-1", "a - 1"]
    texts = ["c", "d", "'x'", "'10'", "' 2 '", "'2.5'", "''", "'1e1'", "CAST(a AS TEXT)", "c || ''"]
    qs = []
    for _ in range(14):
        x, y = rng.choice(numbers), rng.choice(texts)
        op = rng.choice(OPS)
        if rng.random() < 0.5:
            x, y = y, x
        if rng.random() < 0.5:
            qs.append(f"SELECT a, c, {x} {op} {y} FROM t")
        else:
            qs.append(f"SELECT a, r, c FROM t WHERE {x} {op} {y}")
    return qs


HAND = [
    "SELECT a, c, a < c, a > c, a = c, a <> c, a <= c, a >= c FROM t",
    "SELECT a, c, c < a, c >= a, r < c, c = r FROM t",
    "SELECT a, a < 'x', a = '2', a > ' 2 ', a < '2.5', 'x' > a FROM t",
    "SELECT 1 < 'x', 5 = '5', 2 < '10', '10' < 2, 3 >= '' FROM t",
    "SELECT a, c, a + 0 < c, a + 0 = c, c > a * 1 FROM t",
    "SELECT c, c > 1, c < 5, c = 2, 10 > c FROM t",
    "SELECT a FROM t WHERE a < c",
    "SELECT a, c FROM t WHERE c = a AND a IS NOT NULL",
    "SELECT a, c, CAST(c AS INTEGER) < c, CAST(a AS TEXT) < a FROM t",
    "SELECT a, c, a BETWEEN c AND d FROM t",
    "SELECT a, c, a IN ('x', '10', 2), c IN (2, 10), a IN (c, 'q'), a NOT IN ('x', 3) FROM t",
    "SELECT a, c, a IN ('x'), a IN ('x', NULL), c IN (2.5, 1e1) FROM t",
    "SELECT a, c, NULLIF(a, c), NULLIF(c, a), NULLIF(a, '2'), NULLIF(c, 10), NULLIF(r, a) FROM t",
]


@pytest.mark.parametrize("seed", range(6))
def test_numbers_against_text_as_sqlite(seed: int) -> None:
    queries = HAND if seed == 0 else _queries(seed)
    check_sqlite_commits(DDL, "t", queries, _commits(seed), _same)


SUBQUERIES = [
    "SELECT a, c, a IN (SELECT c FROM t), c IN (SELECT a FROM t) FROM t",
    "SELECT a, c, c IN (SELECT r FROM t), r IN (SELECT d FROM t) FROM t",
    "SELECT a, c, a NOT IN (SELECT c FROM t), c NOT IN (SELECT a FROM t) FROM t",
    "SELECT a, c FROM t WHERE c IN (SELECT a FROM t)",
    "SELECT a, c FROM t WHERE a IN (SELECT d FROM t WHERE d IS NOT NULL)",
    "SELECT a, c FROM t WHERE c NOT IN (SELECT a FROM t WHERE a IS NOT NULL) AND c IS NOT NULL",
    "SELECT 'x' IN (SELECT a FROM t), '2' IN (SELECT a FROM t), 2 IN (SELECT c FROM t)",
    "SELECT a, c, a + 0 IN (SELECT c FROM t), c || '' IN (SELECT a FROM t) FROM t",
    "SELECT a, c, a IN (SELECT c || '' FROM t), c IN (SELECT a + 0 FROM t) FROM t",
    "SELECT a, (SELECT count(*) FROM t u WHERE u.c IN"
    " (SELECT v.a FROM t v WHERE v.d = t.d)) FROM t",
]


@pytest.mark.parametrize("seed", range(3))
def test_in_subqueries_mixing_numbers_and_text_as_sqlite(seed: int) -> None:
    check_sqlite_commits(DDL, "t", SUBQUERIES, _commits(100 + seed), _same)
