"""``lex_order`` against ``np.lexsort`` on rows too wide for one packed word: two words,
each sorted with the row number beside it, must give exactly the stable lexicographic
order, for random rows, for concatenated sorted runs (merges), with negative values,
booleans, constant columns and rows too wide even for two words."""

from __future__ import annotations

import numpy as np
import pytest

from ddflow.core.columns import lex_order


def _reference(cols: list[np.ndarray]) -> np.ndarray:
    return np.lexsort(tuple(reversed(cols)))


def _cases(rng: np.random.Generator) -> list[list[np.ndarray]]:
    n = 5000
    return [
        # ~73 bits: two words
        [
            rng.integers(0, 200_000, n),
            rng.integers(0, 200_000, n),
            rng.integers(0, 5000, n),
            rng.integers(0, 10**7, n),
        ],
        # negative values and a boolean column among wide ones
        [
            rng.integers(-(2**40), 2**40, n),
            rng.integers(0, 2, n).astype(bool),
            rng.integers(-(2**30), 2**30, n),
        ],
        # many duplicates (ties decided by later columns, stability by row number)
        [
            rng.integers(0, 3, n),
            rng.integers(-(2**45), -(2**45) + 4, n),
            rng.integers(0, 2**40, n) // 2**38,
        ],
        # one column of 62 bits and more beside it: no two-word split fits
        [rng.integers(-(2**61), 2**61, n), rng.integers(-(2**61), 2**61, n), rng.integers(0, 7, n)],
        # a constant column between wide ones
        [rng.integers(0, 2**40, n), np.full(n, 7), rng.integers(0, 2**40, n)],
    ]


@pytest.mark.parametrize("case", range(5))
def test_wide_rows_sort_like_lexsort(case: int) -> None:
    rng = np.random.default_rng(case)
    cols = _cases(rng)[case]
    assert np.array_equal(lex_order(cols), _reference(cols))


@pytest.mark.parametrize("case", range(5))
def test_wide_sorted_runs_merge_like_lexsort(case: int) -> None:
    rng = np.random.default_rng(10 + case)
    cols = _cases(rng)[case]
    n = len(cols[0])
    split = n // 3
    first = _reference([c[:split] for c in cols])
    second = _reference([c[split:] for c in cols]) + split
    runs = [np.concatenate([c[first], c[second]]) for c in cols]
    got = lex_order(runs, runs=True, split=split)
    assert np.array_equal(got, _reference(runs))
