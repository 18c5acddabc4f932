"""``interesting_times`` (the times a reduction must be evaluated at under a partial order)
against a from-scratch closure: per owner, the starting times closed under joins with the
history and with each other, for batches large enough to take the vectorized path, with
histories that already hold some of the joins, and with time ranges too wide to pack."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest

from ddflow.operators.lattice import interesting_times


def _closure(c_o, c_t, h_o, h_t) -> list[tuple[int, ...]]:
    hist: dict[int, set[tuple[int, ...]]] = {}
    for o, t in zip(h_o.tolist(), h_t.tolist(), strict=True):
        hist.setdefault(o, set()).add(tuple(t))
    start: dict[int, set[tuple[int, ...]]] = {}
    for o, t in zip(c_o.tolist(), c_t.tolist(), strict=True):
        start.setdefault(o, set()).add(tuple(t))
    rows = []
    for o, closed in start.items():
        while True:
            partners = closed | hist.get(o, set())
            joins = {
                tuple(max(x, y) for x, y in zip(a, b, strict=True))
                for a, b in product(closed, partners)
            }
            if joins <= closed:
                break
            closed |= joins
        rows.extend((o, *t) for t in closed)
    return sorted(rows)


def _rows(o: np.ndarray, t: np.ndarray) -> list[tuple[int, ...]]:
    return [(int(a), *map(int, b)) for a, b in zip(o, t, strict=True)]


@pytest.mark.parametrize("seed", range(12))
def test_closure_matches_a_from_scratch_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    dim = int(rng.integers(2, 4))
    owners = int(rng.integers(1, 12))
    nc, nh = int(rng.integers(30, 120)), int(rng.integers(0, 200))
    span = int(rng.integers(2, 9))
    c_o = rng.integers(0, owners, nc)
    c_t = rng.integers(0, span, (nc, dim))
    h_o = np.sort(rng.integers(0, owners, nh))
    h_t = rng.integers(0, span, (nh, dim))
    if nh and seed % 3 == 0:
        # the history already holds some starting times and joins of them
        k = min(nh, nc)
        h_o[:k] = np.sort(c_o[:k])
        h_t[:k] = np.maximum(c_t[:k], c_t[::-1][:k])
        order = np.argsort(h_o, kind="stable")
        h_o, h_t = h_o[order], h_t[order]
    got_o, got_t = interesting_times(c_o, c_t, h_o, h_t, owners)
    assert _rows(got_o, got_t) == _closure(c_o, c_t, h_o, h_t)


def test_closure_of_times_too_wide_to_pack() -> None:
    rng = np.random.default_rng(99)
    n = 60
    c_o = rng.integers(0, 4, n)
    c_t = rng.integers(0, 3, (n, 2)) * (2**40)
    h_o = np.sort(rng.integers(0, 4, 40))
    h_t = rng.integers(0, 3, (40, 2)) * (2**40)
    got_o, got_t = interesting_times(c_o, c_t, h_o, h_t, 4)
    assert _rows(got_o, got_t) == _closure(c_o, c_t, h_o, h_t)
