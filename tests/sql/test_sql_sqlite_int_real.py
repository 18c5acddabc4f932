"""SQLite compares an INTEGER with a REAL by their exact values, not as two doubles:
2**53 + 1 is greater than 2.0**53 and 2**63 - 1 less than 2.0**63, though each pair is
equal as doubles. Checked against sqlite3 on the same rows after every commit, with
comparisons in select lists, WHERE, IN lists and joins (whose equality still matches on
doubles, then tests exactly)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from oracle import check_sqlite_commits

DDL = "CREATE TABLE t(a INTEGER, r REAL, b INTEGER)"

B = 2**53
INTS = [B - 1, B, B + 1, B + 2, 2**63 - 1, -(2**63), -(2**63) + 1, -B - 1, 0, 7, -3, None]
REALS = [float(B), float(B + 2), 2.0**63, -(2.0**63), 0.0, 7.0, 6.5, -3.0, 1e300, None]


def _commits(seed: int) -> list[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
    rng = random.Random(seed)
    live: list[tuple[Any, ...]] = []
    out = []
    for _ in range(4):
        ins = [(rng.choice(INTS), rng.choice(REALS), rng.choice(INTS)) for _ in range(8)]
        dels = rng.sample(live, min(len(live), rng.randint(0, 3)))
        for r in dels:
            live.remove(r)
        live.extend(ins)
        out.append((ins, dels))
    out.append(([], list(live)))
    return out


QUERIES = [
    "SELECT a, r, a < r, a <= r, a = r, a <> r, a > r, a >= r FROM t",
    "SELECT a, r, r < a, r = a, r >= a FROM t",
    "SELECT a, r FROM t WHERE a = r",
    "SELECT a, r FROM t WHERE a > r",
    "SELECT a, a < 9007199254740992.0, a = 9007199254740992.0, a >= 9.223372036854775807e18 FROM t",
    "SELECT r, r < 9007199254740993, r = 9223372036854775807, r > -9223372036854775808 FROM t",
    "SELECT a, a IN (9007199254740992.0, 7.0), a NOT IN (6.5, 0.0) FROM t",
    "SELECT t1.a, t2.r FROM t t1 JOIN t t2 ON t1.a = t2.r",
    "SELECT t1.a, t2.r FROM t t1, t t2 WHERE t1.a = t2.r AND t1.b IS NOT NULL",
    "SELECT t1.a, t2.r FROM t t1 LEFT JOIN t t2 ON t1.a = t2.r",
    "SELECT a, r, a BETWEEN r AND r + 1 FROM t",
    "SELECT a, r, NULLIF(a, r), NULLIF(r, a) FROM t",
]


def _same(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> bool:
    return sorted(got, key=repr) == sorted(want, key=repr)


@pytest.mark.parametrize("seed", range(3))
def test_integers_against_reals_exactly(seed: int) -> None:
    check_sqlite_commits(DDL, "t", QUERIES, _commits(seed), _same)
