"""``lex_order`` against ``np.lexsort`` on rows too wide for one packed word: rows cut
into several words, each sorted with the row number beside it, must give exactly the
stable lexicographic order, for random rows, for concatenated sorted runs (merges, also
runs that are not in order and more than two runs), with negative values, booleans,
constant columns, columns spanning int64's whole range and rows of three or more words."""

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
        # int64's whole range in one column (its offsets need all 64 bits), duplicated rows
        [
            np.concatenate([[I64.min, I64.max], rng.integers(I64.min, I64.max, n - 2)])[
                rng.integers(0, n, n)
            ],
            rng.integers(0, 3, n),
        ],
        # four columns of ~40 bits: four or five words, columns straddling word boundaries
        [rng.integers(-(2**39), 2**39, n) // 2 ** int(rng.integers(0, 30)) for _ in range(4)],
        # few distinct values per column, many columns: wide only by their count
        [rng.integers(0, 2**13, n) for _ in range(8)],
    ]


I64 = np.iinfo(np.int64)
CASES = 8


@pytest.mark.parametrize("case", range(CASES))
def test_wide_rows_sort_like_lexsort(case: int) -> None:
    rng = np.random.default_rng(case)
    cols = _cases(rng)[case]
    assert np.array_equal(lex_order(cols), _reference(cols))


def _sorted_runs(cols: list[np.ndarray], cuts: list[int]) -> list[np.ndarray]:
    """``cols`` cut at ``cuts`` into runs, each sorted."""
    bounds = [0, *cuts, len(cols[0])]
    orders = [
        _reference([c[lo:hi] for c in cols]) + lo
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    order = np.concatenate(orders)
    return [c[order] for c in cols]


@pytest.mark.parametrize("case", range(CASES))
def test_wide_sorted_runs_merge_like_lexsort(case: int) -> None:
    rng = np.random.default_rng(10 + case)
    cols = _cases(rng)[case]
    n = len(cols[0])
    for cuts in ([n // 3], [n // 5, n // 2, n - 7], [1]):
        runs = _sorted_runs(cols, cuts)
        assert np.array_equal(lex_order(runs, runs=True), _reference(runs))


@pytest.mark.parametrize("case", range(CASES))
def test_runs_hint_on_unsorted_rows_still_sorts(case: int) -> None:
    """``runs=True`` is a hint: rows that are not sorted runs still come out in order."""
    rng = np.random.default_rng(20 + case)
    cols = _cases(rng)[case]
    assert np.array_equal(lex_order(cols, runs=True), _reference(cols))


@pytest.mark.parametrize("runs", [False, True])
def test_packed_rows_sort_like_lexsort(runs: bool) -> None:
    """Rows narrow enough for one word, with and without room for the row number."""
    rng = np.random.default_rng(30)
    n = 4000
    for cols in (
        [rng.integers(0, 50, n), rng.integers(-5, 5, n)],
        [rng.integers(0, 2**55, n), rng.integers(0, 4, n)],
    ):
        rows = _sorted_runs(cols, [n // 2]) if runs else cols
        assert np.array_equal(lex_order(rows, runs=runs), _reference(rows))


@pytest.mark.parametrize("shape", ["packed", "wide"])
@pytest.mark.parametrize("first", ["sorted", "few-descents", "few-values", "many-descents"])
@pytest.mark.parametrize("n", [511, 512, 4000])
def test_rows_already_in_order_of_their_first_column_sort_like_lexsort(
    shape: str, first: str, n: int
) -> None:
    """Rows that come (nearly) in order of their first column, with the later columns in
    disorder within it, as a batch of line items by order key does: found as runs or sorted
    afresh, the order is the stable lexicographic one, ties included."""
    rng = np.random.default_rng(n + len(first) + len(shape))
    if first == "sorted":
        lead = np.sort(rng.integers(0, n, n))
    elif first == "few-descents":  # two sorted runs one after the other
        lead = np.concatenate(
            [np.sort(rng.integers(0, n, n // 2)), np.sort(rng.integers(0, n, n - n // 2))]
        )
    elif first == "few-values":  # long groups of equal first values
        lead = np.sort(rng.integers(0, 3, n))
    else:
        lead = rng.integers(0, n, n)
    rest = [rng.integers(0, 4, n), rng.integers(-5, 5, n)]
    if shape == "wide":
        rest.append(rng.integers(-(2**40), 2**40, n))
    cols = [lead, *rest]
    assert (lex_order(cols) == _reference(cols)).all()
