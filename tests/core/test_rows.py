"""``Rows`` tuple diff columns (all int parts as one matrix) against plain tuples of the
same parts: every fast path of ``TupleDiff`` gives the columns the per-part operations
give, on random columns with zeros, cancelling sums and values near the int64 limits
(where the exact per-part path takes over)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.core.diff import I64_MAX, INT_DIFF, Rows, TupleDiff
from ddflow.core.updates import Updates, consolidate
from ddflow.trace.batch import compact_column

T3 = TupleDiff((INT_DIFF, INT_DIFF, INT_DIFF))


def _cols(rng: np.random.Generator, n: int, big: bool) -> tuple[np.ndarray, ...]:
    hi = I64_MAX if big else 5
    out = []
    for _ in range(3):
        c = rng.integers(-hi, hi, n, endpoint=True, dtype=np.int64)
        c[rng.random(n) < 0.4] = 0
        out.append(c)
    return tuple(out)


def _plain(d: object) -> list[list[int]]:
    assert isinstance(d, tuple)
    return [np.asarray(c).tolist() for c in d]


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80), big=st.booleans())
def test_rows_operations_equal_per_part_ones(seed: int, n: int, big: bool) -> None:
    """take, concat, zero_mask, sum_groups, scale and sum_segments agree with plain tuples."""
    rng = np.random.default_rng(seed)
    cols = _cols(rng, n, big)
    rows = T3.from_columns(cols, n)
    assert isinstance(rows, Rows)
    plain = tuple(c.copy() for c in cols)
    idx = rng.integers(0, n, int(rng.integers(0, 2 * n)))
    for sel in (idx, slice(1, n - 1), rng.random(n) < 0.5):
        assert _plain(T3.take(rows, sel)) == _plain(T3.take(plain, sel))
    assert _plain(T3.concat([rows, T3.take(rows, idx)])) == _plain(
        T3.concat([plain, T3.take(plain, idx)])
    )
    assert T3.zero_mask(rows).tolist() == T3.zero_mask(plain).tolist()
    groups = int(rng.integers(1, 6))
    group = rng.integers(0, groups, n)
    got, want = T3.sum_groups(rows, group, groups), T3.sum_groups(plain, group, groups)
    assert (got is None) == (want is None)
    if got is not None:
        assert _plain(got) == _plain(want)
    k = rng.choice(np.array([-1, 1, 2, -3], dtype=np.int64), n)
    assert _plain(T3.scale(rows, k)) == _plain(T3.scale(plain, k))  # (exact beyond int64)
    starts = np.flatnonzero(np.r_[True, rng.random(n - 1) < 0.4])
    assert _plain(T3.sum_segments(rows, starts)) == _plain(T3.sum_segments(plain, starts))


def test_rows_pickle_as_plain_tuples_and_stay_rows_through_compaction() -> None:
    """A pickled ``Rows`` is the plain tuple of its parts; a small batch's compaction keeps
    a ``Rows`` column as it is, a large constant one becomes zero-stride parts."""
    cols = tuple(np.arange(5, dtype=np.int64) * (i + 1) for i in range(3))
    rows = T3.from_columns(cols, 5)
    back = pickle.loads(pickle.dumps(rows))
    assert type(back) is tuple and _plain(back) == _plain(rows)
    assert compact_column(rows) is rows
    const = T3.from_columns(tuple(np.full(100, 7, np.int64) for _ in range(3)), 100)
    packed = compact_column(const)
    assert all(c.strides[0] == 0 for c in packed) and _plain(packed) == _plain(const)


@pytest.mark.parametrize("n", [40, 300, 3000])
def test_consolidate_of_rows_equals_consolidate_of_plain_tuples(n: int) -> None:
    """Both consolidation paths (grouped counts, sorting) give the same updates for
    ``Rows`` diffs as for plain tuples, cancelling rows dropped."""
    rng = np.random.default_rng(n)
    for keys in (4, n):
        k = rng.integers(0, keys, n)
        cols = _cols(rng, n, False)
        cols[0][: n // 2] = 1  # (some rows cancel others below)
        times = np.zeros((n, 1), np.int64)
        ku = np.concatenate([k, k[:10]])
        tu = np.concatenate([times, times[:10]])
        full = tuple(np.concatenate([c, -c[:10]]) for c in cols)
        a = consolidate(Updates((ku,), tu, T3.from_columns(full, n + 10), T3))
        b = consolidate(Updates((ku,), tu, tuple(c.copy() for c in full), T3))
        assert a.data[0].tolist() == b.data[0].tolist()
        assert _plain(a.diffs) == _plain(b.diffs)


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("parts", [2, 3, 6])
def test_consolidate_of_a_few_tuple_rows_matches_the_general_path(
    seed: int, parts: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Python path for a few rows of int tuple diffs (``Rows`` or plain) gives the
    columns of the numpy path: rows sorted by (data, time), sums, zero sums dropped."""
    import ddflow.core.updates as updates_mod

    rng = np.random.default_rng(seed)
    dt = TupleDiff((INT_DIFF,) * parts)
    n = int(rng.integers(1, updates_mod.SMALL_ROWS + 1))
    keys = (rng.integers(0, 4, n), rng.integers(-2, 2, n).astype(np.int32))
    times = rng.integers(0, 2, (n, 1)).astype(np.int64) if seed % 2 else np.zeros((n, 1), np.int64)
    vals = tuple(rng.choice(np.array([-1, 0, 1, 2], np.int64), n) for _ in range(parts))
    if seed % 5 == 0 and parts > 1:
        vals[1][:] = I64_MAX  # (sums leave int64: the general path is exact)
    for diffs in (dt.from_columns(vals, n), tuple(v.copy() for v in vals)):
        u = Updates(keys, times, diffs, dt)
        small = consolidate(u)
        with monkeypatch.context() as m:
            m.setattr(updates_mod, "SMALL_ROWS", 0)
            general = consolidate(u)
        assert [c.tolist() for c in small.data] == [c.tolist() for c in general.data]
        assert small.times.tolist() == general.times.tolist()
        assert _plain(small.diffs) == _plain(general.diffs)


def test_large_rows_group_sums_and_columns_stay_plain() -> None:
    """Above ``ROWS_MAX_N`` rows a grouped sum of a ``Rows`` column (made by a merge or a
    concatenation) adds part by part, with the same sums; ``from_columns`` makes plain
    tuples there."""
    from ddflow.core.diff import ROWS_MAX_N

    rng = np.random.default_rng(3)
    n = ROWS_MAX_N + 5
    cols = _cols(rng, n, False)
    group = rng.integers(0, 7, n)
    rows = Rows(np.stack(cols))
    assert _plain(T3.sum_groups(rows, group, 7)) == _plain(T3.sum_groups(cols, group, 7))
    assert type(T3.from_columns(cols, n)) is tuple


def test_a_vectorized_functions_int64_parts_become_rows_once() -> None:
    """``diff_column_from_view`` gives int64 tuple parts as the ``Rows`` column
    ``from_columns`` makes, Python-int parts beyond int64 as exact columns, and other
    part kinds as plain tuples."""
    from ddflow.core.diff import FloatDiff, diff_column_from_view

    rng = np.random.default_rng(1)
    cols = _cols(rng, 7, big=True)
    dt, got = diff_column_from_view(T3, cols, 7)
    assert dt is T3 and isinstance(got, Rows)
    assert _plain(got) == _plain(T3.from_columns(cols, 7)) == [c.tolist() for c in cols]
    wide = np.array([2**70, -1, 0, 1, 2, 3, 4], dtype=object)
    _, mixed = diff_column_from_view(T3, (wide, cols[1], cols[2]), 7)
    assert not isinstance(mixed, Rows) and mixed[0].tolist() == wide.tolist()
    tf = TupleDiff((INT_DIFF, FloatDiff(), INT_DIFF))
    _, floats = diff_column_from_view(tf, (cols[0], cols[1] * 0.5, cols[2]), 7)
    assert not isinstance(floats, Rows) and floats[1].dtype == np.float64


def test_flat_layouts_view_and_refuse_like_nested_ones() -> None:
    """A tuple of leaves views its columns as they are and refuses a tuple where a leaf is,
    as the general walk does."""
    from ddflow.core.columns import Leaf, Tup
    from ddflow.core.errors import DataError

    flat, nested = Tup((Leaf(), Leaf())), Tup((Leaf(), Tup((Leaf(),))))
    a, b = np.arange(3), np.arange(3) * 2
    assert flat.flat and not nested.flat
    assert flat.view((a, b)) == (a, b) and nested.view((a, b))[1] == (b,)
    assert [c.tolist() for c in flat.from_view((a, b.astype(np.int32)), 3)] == [
        [0, 1, 2],
        [0, 2, 4],
    ]
    with pytest.raises(DataError):
        flat.from_view((a, (b,)), 3)
