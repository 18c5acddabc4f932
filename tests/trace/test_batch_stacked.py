"""A trace batch of several data columns read again and again (a reduce gathering its keys'
history every round) takes the rows it is asked for from its columns stacked into one
matrix: the rows taken are those of the columns, the batch's own columns still read the
same, a batch read once (or a large one read a few times) is not stacked, columns of
different dtypes are not stacked, and a pickled batch reads the same."""

from __future__ import annotations

import pickle

import numpy as np

from ddflow.core.diff import INT_DIFF
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates
from ddflow.trace.batch import Description, TraceBatch

DESC = Description(Antichain.of([(0,)], 1), Antichain.of([(5,)], 1), Antichain.of([(0,)], 1))


def _batch(cols: tuple[np.ndarray, ...]) -> TraceBatch:
    n = len(cols[0])
    rng = np.random.default_rng(3)
    times = rng.integers(0, 5, (n, 1)).astype(np.int64)
    diffs = rng.integers(1, 4, n).astype(np.int64)
    return TraceBatch.build(2, Updates(cols, times, diffs, INT_DIFF), DESC)


def _rows(u: Updates) -> list[tuple[object, ...]]:
    return sorted(
        zip(
            *(c.tolist() for c in u.data),
            np.asarray(u.times)[:, 0].tolist(),
            np.asarray(u.diffs).tolist(),
            strict=True,
        )
    )


def test_wide_batch_rows_are_taken_from_the_stacked_columns() -> None:
    rng = np.random.default_rng(1)
    n = 500
    cols = tuple(rng.integers(-(2**62), 2**62, n) for _ in range(6))
    cols = (rng.integers(0, 40, n), rng.integers(0, 3, n), *cols[2:])
    b = _batch(cols)
    plain = tuple(c.copy() for c in b.data)
    picks = [rng.integers(0, len(b), k) for k in (0, 1, 7, 300)] + [np.arange(len(b))]
    for i, rows in enumerate(picks):
        got = b.take_rows(rows)
        assert all(np.array_equal(g, p[rows]) for g, p in zip(got.data, plain, strict=True))
        assert np.array_equal(np.asarray(got.times), np.asarray(b.times)[rows])
        assert np.array_equal(np.asarray(got.diffs), np.asarray(b.diffs)[rows])
        # (stacked from the second read on; the batch's columns read as before)
        assert isinstance(b._stacked, np.ndarray) == (i >= 1)
        assert all(np.array_equal(c, p) for c, p in zip(b.data, plain, strict=True))
    again = pickle.loads(pickle.dumps(b))
    rows = picks[3]
    assert _rows(again.take_rows(rows)) == _rows(b.take_rows(rows))
    assert _rows(again.take_rows(rows)) == _rows(b.take_rows(rows))


def test_batches_read_once_or_of_mixed_dtypes_are_not_stacked() -> None:
    rng = np.random.default_rng(2)
    n = 200
    ints = tuple(rng.integers(0, 50, n) for _ in range(5))
    once = _batch(ints)
    once.take_rows(np.arange(10))
    assert not isinstance(once._stacked, np.ndarray)
    mixed = _batch((*ints[:4], rng.random(n)))
    plain = tuple(c.copy() for c in mixed.data)
    for _ in range(3):
        rows = rng.integers(0, len(mixed), 50)
        got = mixed.take_rows(rows)
        assert all(np.array_equal(g, p[rows]) for g, p in zip(got.data, plain, strict=True))
        assert got.data[4].dtype == np.float64
    assert mixed._stacked is False
    narrow = _batch(ints[:3])  # (three columns: read column by column)
    for _ in range(3):
        narrow.take_rows(np.arange(5))
    assert not isinstance(narrow._stacked, np.ndarray)
    # a large batch is stacked only after a read per 1024 of its rows
    m = 8192
    big = _batch(tuple(rng.integers(0, 10**6, m) for _ in range(5)))
    plain = tuple(c.copy() for c in big.data)
    rows = rng.integers(0, len(big), 20)
    reads = len(big) >> 10
    for i in range(reads):
        got = big.take_rows(rows)
        assert all(np.array_equal(g, p[rows]) for g, p in zip(got.data, plain, strict=True))
        assert isinstance(big._stacked, np.ndarray) == (i == reads - 1)
