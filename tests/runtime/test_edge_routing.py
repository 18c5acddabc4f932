"""Routing by value: equal data has one owner whatever its type, so answers do not depend on
the number of workers; and the edge-value cases (diffs beyond int64, ints beyond int64 beside
floats) give the same exact answers on every runtime."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

import ddflow as dd
from ddflow import Changes
from ddflow.core.columns import make_column
from ddflow.engine.exchange import hash_columns, stable_hash
from ddflow.testing.strategies import edge_numbers

I64_MIN = -(2**63)

#: equal values of different types, in groups
EQUAL = [
    (2**64, 2.0**64, Fraction(2**64), Decimal(2**64)),
    (1, 1.0, True, np.int64(1), np.float32(1), Decimal(1), Fraction(1)),
    (0, 0.0, -0.0, False, Decimal(0)),
    (I64_MIN, -(2.0**63), np.int64(I64_MIN)),
    (2**63, 2.0**63),
    (2**53, 2.0**53),
    (0.5, Fraction(1, 2), Decimal("0.5")),
]


@pytest.mark.parametrize("group", EQUAL, ids=lambda g: repr(g[0]))
def test_equal_numbers_have_one_code(group: tuple[Any, ...]) -> None:
    """Equal numbers of any type get one routing code (so one owner)."""
    assert len({stable_hash(x) for x in group}) == 1


def test_column_codes_agree_across_dtypes() -> None:
    """int64, bool, float64 and object columns of equal values hash alike, row by row."""
    ints = np.array([1, 0, 2**53, I64_MIN], dtype=np.int64)
    floats = np.array([1.0, 0.0, 2.0**53, -(2.0**63)])
    objs = np.empty(4, dtype=object)
    objs[:] = [True, Fraction(0), 2**53, -(2.0**63)]
    h = [hash_columns([c], 4).tolist() for c in (ints, floats, objs)]
    assert h[0] == h[1] == h[2]
    big = np.empty(2, dtype=object)
    big[:] = [2**64, 2**70]
    assert (
        hash_columns([big], 2).tolist() == hash_columns([np.array([2.0**64, 2.0**70])], 2).tolist()
    )
    assert (
        hash_columns([np.array([True, False])], 2).tolist()
        == hash_columns([np.array([1, 0])], 2).tolist()
    )


@settings(max_examples=300, deadline=None)
@given(edge_numbers(), edge_numbers())
def test_equal_edge_numbers_route_together(x: Any, y: Any) -> None:
    """Any two equal edge numbers have one code, as typed columns and as Python values."""
    cx, cy = make_column([x]), make_column([y])
    if x == y:
        assert stable_hash(x) == stable_hash(y)
        assert hash_columns([cx], 1).tolist() == hash_columns([cy], 1).tolist()
    assert hash_columns([cx], 1).tolist() == hash_columns([make_column([x, 0.5])], 2)[:1].tolist()


# ---- the same answers on every runtime -------------------------------------------------------

#: input codes are mapped to these values: equal values of different types, and neighbours
VALUES = [
    2**64,
    2.0**64,
    1,
    1.0,
    True,
    0,
    0.0,
    False,
    2**53 + 1,
    2.0**53,
    2**53,
    I64_MIN,
    -(2.0**63),
    0.5,
    2**70 + 1,
    2**63 - 1,
]


def _value(i: int) -> Any:
    return VALUES[i]


def _codes(n: int, seed: int) -> Changes:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, len(VALUES), n).astype(np.int64)
    times = np.sort(rng.integers(0, 3, n)).astype(np.int64)
    return Changes(data, times, np.ones(n, dtype=np.int64))


def _expected(log: Changes, t: int) -> Counter[Any]:
    acc: Counter[Any] = Counter()
    for i, s in zip(log.data.tolist(), log.times.tolist(), strict=True):
        if s <= t:
            acc[VALUES[i]] += 1
    return acc


@pytest.mark.parametrize("seed", [0, 1])
def test_count_of_equal_values_of_different_types(runtime: Any, seed: int) -> None:
    """count over values equal across types (2**64 and 2.0**64, 1, 1.0 and True, ...) gives
    one record per value on every runtime: equal records meet on one worker."""
    log = _codes(40, seed)

    def build(c: dict[str, dd.Collection]) -> dd.Collection:
        return c["x"].map(_value).count()

    got = runtime.run(build, {"x": log})
    for t in range(3):
        assert got["output"].at(t) == {(v, n): 1 for v, n in _expected(log, t).items()}


def test_join_of_equal_values_of_different_types(runtime: Any) -> None:
    """join matches keys equal across types on every runtime (2**64 with 2.0**64, 1 with
    True), never neighbours (2**53 + 1 with 2.0**53)."""
    a = Changes(
        np.arange(len(VALUES), dtype=np.int64),
        np.zeros(len(VALUES), np.int64),
        np.ones(len(VALUES), np.int64),
    )
    b = Changes(
        np.arange(len(VALUES), dtype=np.int64)[::-1].copy(),
        np.zeros(len(VALUES), np.int64),
        np.ones(len(VALUES), np.int64),
    )

    def build(c: dict[str, dd.Collection]) -> dd.Collection:
        left = c["a"].map(lambda i: (VALUES[i], i))
        right = c["b"].map(lambda i: (VALUES[i], -i))
        return left.join(right).map(lambda kv: kv[1])

    got = runtime.run(build, {"a": a, "b": b})
    want: Counter[Any] = Counter()
    for i, x in enumerate(VALUES):
        for j, y in enumerate(VALUES):
            if x == y:
                want[(i, -j)] += 1
    assert got["output"].at(0) == dict(want)


def test_counts_beyond_int64_on_every_runtime(runtime: Any) -> None:
    """Diffs whose sums leave int64 give exact counts on every runtime (exchanges combine
    updates before sending, and their sums are exact too)."""
    n = 300
    data = np.arange(n, dtype=np.int64) % 3
    diffs = np.full(n, 2**62, dtype=np.int64)
    log = Changes(data, np.zeros(n, np.int64), diffs)

    def build(c: dict[str, dd.Collection]) -> dict[str, dd.Collection]:
        return {
            "count": c["x"].count(),
            "total": c["x"].count_total(),
            "distinct": c["x"].distinct(),
        }

    got = runtime.run(build, {"x": log})
    want = {(k, 100 * 2**62): 1 for k in range(3)}
    assert got["count"].at(0) == want
    assert got["total"].at(0) == want
    assert got["distinct"].at(0) == {0: 1, 1: 1, 2: 1}
