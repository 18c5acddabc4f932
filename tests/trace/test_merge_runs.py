"""The merge of two runs with one row per key (``merge_unique_runs``) against the general
merge (concatenate, advance, ``consolidate``) it stands in for, on random batches: keys in
one run, the other or both, sums that cancel, int and tuple diffs, constant (compact) diff
columns, times at or beyond ``since``, keys of other dtypes, and whole ``Merge``s done in
chunks with the fast path on and off."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow.trace.merge as merge_mod
from ddflow.core.diff import INT_DIFF, DiffType, FloatDiff, TupleDiff
from ddflow.core.frontier import Antichain
from ddflow.core.time import columns_advance_by
from ddflow.core.updates import Updates, concat_updates, consolidate
from ddflow.trace.batch import Description, TraceBatch
from ddflow.trace.merge import Merge, merge_unique_runs

PAIR = TupleDiff((INT_DIFF, INT_DIFF))


def _run(
    rng: np.random.Generator, keys: np.ndarray, dt: DiffType, t: int, constant: bool
) -> Updates:
    n = len(keys)
    if constant:  # a compact batch's diffs: one value, zero-stride
        one = np.broadcast_to(np.array([2], np.int64), (n,))
        d: object = one if dt is INT_DIFF else (one, one)
    else:
        a = rng.choice(np.array([-2, -1, 1, 2, 3]), n)
        d = a if dt is INT_DIFF else (a, rng.choice(np.array([-1, 0, 1]), n))
        if dt is not INT_DIFF:
            d[0][(d[0] == 0) & (d[1] == 0)] = 1  # (no zero rows in a consolidated run)
    return Updates((keys,), np.full((n, 1), t, np.int64), d, dt)


def _general(ua: Updates, ub: Updates, since: np.ndarray) -> Updates:
    u = concat_updates([ua, ub])
    u = u.with_times(columns_advance_by(u.times, since))
    return consolidate(u, runs=True, bounded=True)


def _same(x: Updates, y: Updates) -> None:
    assert [c.tolist() for c in x.data] == [c.tolist() for c in y.data]
    assert x.times.tolist() == y.times.tolist()
    dx = x.diffs if isinstance(x.diffs, tuple) else (x.diffs,)
    dy = y.diffs if isinstance(y.diffs, tuple) else (y.diffs,)
    assert [np.asarray(c).tolist() for c in dx] == [np.asarray(c).tolist() for c in dy]
    assert all(np.asarray(c).dtype == np.int64 for c in dx)


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    na=st.integers(1, 60),
    nb=st.integers(1, 60),
    span=st.sampled_from([5, 40, 1000]),
    tuple_diffs=st.booleans(),
    constant=st.booleans(),
)
def test_merge_of_unique_runs_is_the_general_merge(
    seed: int, na: int, nb: int, span: int, tuple_diffs: bool, constant: bool
) -> None:
    """The fast merge gives the very columns of the general one, cancelling sums included."""
    rng = np.random.default_rng(seed)
    dt = PAIR if tuple_diffs else INT_DIFF
    ka = np.unique(rng.integers(0, span, na))
    kb = np.unique(rng.integers(0, span, nb))
    ua = _run(rng, ka, dt, 0, constant)
    ub = _run(rng, kb, dt, 1, False)
    if rng.random() < 0.3:  # b cancels a on their common keys
        common = np.isin(kb, ka)
        neg = np.flatnonzero(common)
        da = ua.diffs if isinstance(ua.diffs, tuple) else (ua.diffs,)
        db = ub.diffs if isinstance(ub.diffs, tuple) else (ub.diffs,)
        where = np.searchsorted(ka, kb[neg])
        for x, y in zip(da, db, strict=True):
            y[neg] = -np.asarray(x)[where]
    since = np.array([[2]], np.int64)
    got = merge_unique_runs(ua, ub, 1, since)
    assert got is not None
    _same(got, _general(ua, ub, since))


def test_runs_not_of_that_form_are_left_to_the_general_merge() -> None:
    """Times beyond ``since``, keys of two dtypes, two key columns, float diffs: None."""
    rng = np.random.default_rng(1)
    ka, kb = np.array([1, 3, 5]), np.array([2, 3])
    ua, ub = _run(rng, ka, INT_DIFF, 0, False), _run(rng, kb, INT_DIFF, 4, False)
    assert merge_unique_runs(ua, ub, 1, np.array([[2]], np.int64)) is None  # b beyond since
    assert merge_unique_runs(ua, ub, 1, np.array([[4]], np.int64)) is not None
    ub32 = Updates((kb.astype(np.int32),), ub.times, ub.diffs, INT_DIFF)
    assert merge_unique_runs(ua, ub32, 1, np.array([[4]], np.int64)) is None
    two = Updates((ka, ka), ua.times, ua.diffs, INT_DIFF)
    assert merge_unique_runs(two, two, 2, np.array([[4]], np.int64)) is None
    fl = TupleDiff((INT_DIFF, FloatDiff()))
    fa = Updates((ka,), ua.times, (ua.diffs, ua.diffs.astype(float)), fl)
    fb = Updates((kb,), ub.times, (ub.diffs, ub.diffs.astype(float)), fl)
    assert merge_unique_runs(fa, fb, 1, np.array([[4]], np.int64)) is None


def _trace_batch(u: Updates, lo: int, hi: int) -> TraceBatch:
    desc = Description(Antichain.of([(lo,)], 1), Antichain.of([(hi,)], 1), Antichain.of([(0,)], 1))
    return TraceBatch.build(1, u, desc)


@pytest.mark.parametrize("fuel", [1, 3000, 1 << 62])
def test_merges_in_chunks_agree_with_the_fast_path_off(
    fuel: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``Merge`` done in chunks gives the same batch with the fast path as without it."""
    rng = np.random.default_rng(7)
    for dt in (INT_DIFF, PAIR):
        a = _trace_batch(_run(rng, np.unique(rng.integers(0, 9000, 6000)), dt, 0, False), 0, 1)
        b = _trace_batch(_run(rng, np.unique(rng.integers(0, 9000, 3000)), dt, 1, False), 1, 2)
        since = Antichain.of([(2,)], 1)

        def merged() -> Updates:
            m = Merge(a, b, since)
            while not m.work(fuel):
                pass
            r = m.result
            assert r is not None
            plain = TraceBatch(1, r.updates(), r.desc)  # (key runs looked for)
            assert r.keys.tolist() == plain.keys.tolist()
            assert r.bounds.tolist() == plain.bounds.tolist()
            return r.updates()

        calls = []
        with monkeypatch.context() as mp:
            mp.setattr(
                merge_mod,
                "merge_unique_runs",
                lambda *args: calls.append(1) or merge_unique_runs(*args),
            )
            fast = merged()
        assert calls  # (the fast path ran)
        with monkeypatch.context() as mp:
            mp.setattr(merge_mod, "merge_unique_runs", lambda *args: None)
            slow = merged()
        _same(fast, slow)


def _wide_run(
    rng: np.random.Generator, rows: np.ndarray, dt: DiffType, times: list[int], constant: bool
) -> Updates:
    """A consolidated run of the distinct ``rows`` (sorted), each at one of ``times``."""
    n = len(rows)
    t = rng.choice(np.array(times, np.int64), n).reshape(n, 1)
    if constant:
        one = np.broadcast_to(np.array([1], np.int64), (n,))
        d: object = one if dt is INT_DIFF else (one, one)
    else:
        a = rng.choice(np.array([-2, -1, 1, 3]), n)
        d = a if dt is INT_DIFF else (a, rng.choice(np.array([-1, 0, 1]), n))
    cols = tuple(np.ascontiguousarray(rows[:, j]) for j in range(rows.shape[1]))
    return consolidate(Updates(cols, t, d, dt), compact=True)


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(2, 6),
    n=st.integers(1, 80),
    width=st.integers(2, 5),
    narrow=st.integers(1, 4),
    shared=st.booleans(),
    tuple_diffs=st.booleans(),
    constant=st.booleans(),
    several_times=st.booleans(),
    since=st.sampled_from([0, 3, 9]),
)
def test_merge_of_several_runs_is_the_general_merge(
    seed: int,
    k: int,
    n: int,
    width: int,
    narrow: int,
    shared: bool,
    tuple_diffs: bool,
    constant: bool,
    several_times: bool,
    since: int,
) -> None:
    """``merge_runs`` of ``k`` runs of wide rows (beyond one word: the leading columns
    packed, ties sorted by all) gives the general merge's updates whenever it merges, and
    merges whenever no row is in two runs."""
    rng = np.random.default_rng(seed)
    dt = PAIR if tuple_diffs else INT_DIFF

    # (columns of a few values, then two of ~2**38 values whose high bits take a few
    # values: rows need more than one word, and often tie on the packed leading bits)
    def column(j: int) -> np.ndarray:
        if j < width - 2:
            return rng.integers(0, 1 + narrow, 4 * n)
        return (rng.integers(0, 3, 4 * n) << 37) + rng.integers(0, 8, 4 * n)

    pool = np.unique(np.stack([column(j) for j in range(width)], axis=1), axis=0)
    runs, seen = [], set()
    for i in range(k):
        pick = rng.choice(len(pool), min(n, len(pool)), replace=False)
        rows = pool[np.sort(pick)]
        if not shared:  # (rows of one run only)
            rows = np.array([r for r in rows if tuple(r) not in seen], dtype=np.int64)
            rows = rows.reshape(-1, width)
        seen.update(tuple(r) for r in rows.tolist())
        times = [2 * i, 2 * i + 1] if several_times else [2 * i]
        runs.append(_wide_run(rng, rows, dt, times, constant))
    f = np.array([[since]], np.int64)
    u = concat_updates(runs)
    want = consolidate(u.with_times(columns_advance_by(u.times, f)), runs=True, bounded=True)
    got = merge_mod.merge_runs(runs, f)
    rows_in = [tuple(r) for x in runs for r in zip(*(c.tolist() for c in x.data), strict=True)]
    bits = sum((int(c.max()) - int(c.min())).bit_length() for c in u.data) if len(u) else 0
    if len(set(rows_in)) == len(rows_in) and bits > 62 and sum(len(x) > 0 for x in runs) > 1:
        assert got is not None
    if got is not None:
        assert len(got) == len(u)  # (nothing added up)
        _same(got, want)
