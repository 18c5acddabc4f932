"""Merges of batches of distinct rows against ``merge_all`` (concatenate, advance,
``consolidate``): ``merge_ranges`` (ranges that overlap little: the rows around the overlap
copied, the overlap merged) and ``merge_interleaved`` (rows placed by a search, when no row
is in both), on random batches: disjoint ranges either way round, a key on
both sides of the boundary, overlaps that cancel, one or two key columns, values, times
at, behind and beyond ``since``, int, tuple and constant diffs; and a spine fed keys that
grow, checked against the updates it was given."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.core.diff import INT_DIFF, DiffType, TupleDiff
from ddflow.core.frontier import Antichain
from ddflow.core.time import columns_advance_by
from ddflow.core.updates import Updates, concat_updates, consolidate
from ddflow.trace.batch import Description, TraceBatch
from ddflow.trace.merge import Merge, merge_all, merge_interleaved, merge_ranges

PAIR = TupleDiff((INT_DIFF, INT_DIFF))


def _desc(lo: int, hi: int) -> Description:
    return Description(Antichain.of([(lo,)], 1), Antichain.of([(hi,)], 1), Antichain.of([(0,)], 1))


def _batch(
    rng: np.random.Generator,
    rows: np.ndarray,
    kw: int,
    dt: DiffType,
    times: list[int],
    constant: bool,
    lo: int,
) -> TraceBatch:
    """A batch of the distinct sorted ``rows`` (columns), each at one of ``times``."""
    n = rows.shape[0]
    t = rng.choice(np.array(times, np.int64), n).reshape(n, 1)
    if constant:
        one = np.broadcast_to(np.array([1], np.int64), (n,))
        d: object = one if dt is INT_DIFF else (one, one)
    else:
        a = rng.choice(np.array([-2, -1, 1, 3]), n)
        d = a if dt is INT_DIFF else (a, rng.choice(np.array([-1, 0, 1]), n))
    u = Updates(tuple(np.ascontiguousarray(rows[:, j]) for j in range(rows.shape[1])), t, d, dt)
    b = TraceBatch.build(kw, u, _desc(lo, max(times) + 1))
    if len(times) > 1:
        b.set_unique_rows()  # (distinct rows: each (key, val) once, whatever its time)
    return b


def _rows(rng: np.random.Generator, n: int, lo: int, hi: int, width: int) -> np.ndarray:
    r = rng.integers(lo, hi, (n, width))
    r = np.unique(r, axis=0)  # (sorted lexicographically, distinct)
    return r


def _same(x: TraceBatch, y: TraceBatch) -> None:
    assert [c.tolist() for c in x.data] == [c.tolist() for c in y.data]
    assert np.asarray(x.times).tolist() == np.asarray(y.times).tolist()
    dx = x.diffs if isinstance(x.diffs, tuple) else (x.diffs,)
    dy = y.diffs if isinstance(y.diffs, tuple) else (y.diffs,)
    assert [np.asarray(c).tolist() for c in dx] == [np.asarray(c).tolist() for c in dy]
    assert x.keys.tolist() == y.keys.tolist()
    assert x.bounds.tolist() == y.bounds.tolist()
    assert x.desc == y.desc
    bx = x.diff_bound()
    assert bx is not None
    for c in dx:  # (the bound covers every key's sum of |diff|, in each component)
        per_key = np.add.reduceat(np.abs(np.asarray(c)), x.bounds[:-1]) if len(x) else [0]
        assert bx >= int(np.max(per_key))


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    na=st.integers(1, 80),
    nb=st.integers(1, 80),
    kw=st.sampled_from([1, 2]),
    vals=st.sampled_from([0, 1]),
    shape=st.sampled_from(["disjoint", "swapped", "boundary", "overlap"]),
    tuple_diffs=st.booleans(),
    constant=st.booleans(),
    several_times=st.booleans(),
    since=st.sampled_from([0, 1, 2, 5]),
)
def test_merge_of_ranges_is_the_general_merge(
    seed: int,
    na: int,
    nb: int,
    kw: int,
    vals: int,
    shape: str,
    tuple_diffs: bool,
    constant: bool,
    several_times: bool,
    since: int,
) -> None:
    """Whenever ``merge_ranges`` merges, it gives the very batch ``merge_all`` gives."""
    rng = np.random.default_rng(seed)
    dt = PAIR if tuple_diffs else INT_DIFF
    width = kw + vals
    span = 6  # (small: rows of a key on both sides, and overlaps, are common)
    ra = _rows(rng, na, 0, span, width)
    if shape == "disjoint":
        rb = _rows(rng, nb, span, 2 * span, width)
    elif shape == "swapped":  # the younger batch holds the lower keys
        ra, rb = _rows(rng, na, span, 2 * span, width), ra
    elif shape == "boundary":  # a's last key is b's first, with greater values
        rb = _rows(rng, nb, span, 2 * span, width)
        rb[0, :kw] = ra[-1, :kw]
        if width > kw:
            rb[0, kw:] = ra[-1, kw:] + 1
        rb = np.unique(rb, axis=0)
    else:
        rb = _rows(rng, nb, span - 2, 2 * span, width)
    ta = [0, 1] if several_times else [1]
    tb = [2, 3] if several_times else [2]
    a = _batch(rng, ra, kw, dt, ta, constant, 0)
    b = _batch(rng, rb, kw, dt, tb, constant and shape != "overlap", max(ta) + 1)
    fr = Antichain.of([(since,)], 1)
    got = merge_ranges(a, b, fr)
    if shape in ("disjoint", "swapped"):
        assert got is not None  # (no overlap to speak of: always this path)
    if got is not None:
        _same(got, merge_all([a, b], fr))
        if got.unique_rows():
            keyset = {tuple(int(c[i]) for c in got.data) for i in range(len(got))}
            assert len(keyset) == len(got)


def test_batches_of_several_times_not_known_distinct_are_left_alone() -> None:
    """A batch holding a ``(key, val)`` at two times is not concatenated (its rows add up)."""
    rows = np.array([[1], [1], [2]])
    u = Updates((rows[:, 0],), np.array([[0], [1], [0]]), np.array([1, 1, 1]), INT_DIFF)
    a = TraceBatch.build(1, u, _desc(0, 2))
    assert not a.unique_rows()
    ub = Updates((np.array([5, 6]),), np.array([[2], [2]]), np.array([1, 1]), INT_DIFF)
    b = TraceBatch.build(1, ub, _desc(2, 3))
    assert merge_ranges(a, b, Antichain.of([(3,)], 1)) is None
    m = Merge(a, b, Antichain.of([(3,)], 1))
    assert m.work(1 << 62)
    assert m.result is not None
    assert m.result.data[0].tolist() == [1, 2, 5, 6]
    assert np.asarray(m.result.diffs).tolist() == [2, 1, 1, 1]


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 60),
    width=st.integers(1, 3),
    span=st.integers(2, 40),
)
def test_batches_of_several_times_are_seen_distinct_when_they_are(
    seed: int, n: int, width: int, span: int
) -> None:
    """A batch of rows at several times (not told it is distinct) says each ``(key, val)``
    is on one row exactly when no record repeats, and is then merged by concatenation
    into the batch ``merge_all`` gives."""
    rng = np.random.default_rng(seed)
    cols = tuple(rng.integers(0, span, n) for _ in range(width))
    t = rng.integers(0, 4, (n, 1))
    d = rng.choice(np.array([-1, 1, 2]), n)
    a = TraceBatch.build(1, Updates(cols, t, d, INT_DIFF), _desc(0, 4))
    records = {tuple(int(c[i]) for c in a.data) for i in range(len(a))}
    assert a.unique_rows() == (len(records) == len(a))
    later = tuple(c + span for c in cols[:1]) + cols[1:]
    b = TraceBatch.build(1, Updates(later, t + 4, d, INT_DIFF), _desc(4, 8))
    fr = Antichain.of([(8,)], 1)
    got = merge_ranges(a, b, fr)
    assert (got is not None) == (a.unique_rows() and b.unique_rows() and len(a) > 0)
    if got is not None:
        _same(got, merge_all([a, b], fr))


def test_a_count_over_growing_keys_matches_the_input() -> None:
    """Keys arriving in order (a key split across batches, and deletions of old keys at
    the end) give the counts a dict of the same updates gives, at every time."""
    rng = np.random.default_rng(3)
    with dd.Worker() as w:
        sess, coll = w.new_collection()
        out = coll.count_total()
        cap, probe = out.capture(), out.probe()
        expected: dict[tuple[int, int], int] = {}
        k = 0
        for t in range(80):
            n = int(rng.integers(1, 300))
            keys = k + np.sort(rng.integers(0, 8, n))
            k = int(keys[-1])  # (the next batch may start on this batch's last key)
            diffs = np.ones(n, np.int64)
            if t >= 65:  # deletions of old keys, some of them not there (negative counts)
                keys = np.sort(rng.integers(0, 400, n))
                diffs = -diffs
            vals = rng.integers(0, 3, n)
            sess.insert_columns((keys, vals), diffs=diffs, times=np.full(n, t))
            for kk, vv, d in zip(keys.tolist(), vals.tolist(), diffs.tolist(), strict=True):
                expected[(kk, vv)] = expected.get((kk, vv), 0) + d
            sess.advance_to(t + 1)
            w.step_while(lambda h=t + 1: bool(probe.less_than(h)))
            want = {(kv, c): 1 for kv, c in expected.items() if c}
            assert cap.at(t) == want


def _general(ua: Updates, ub: Updates, since: np.ndarray) -> Updates:
    u = concat_updates([ua, ub])
    u = u.with_times(columns_advance_by(u.times, since))
    return consolidate(u, runs=True)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    na=st.integers(0, 60),
    nb=st.integers(0, 60),
    width=st.sampled_from([1, 2, 3]),
    span=st.sampled_from([4, 50, 2**40, "near"]),
    tuple_diffs=st.booleans(),
    constant=st.booleans(),
    several_times=st.booleans(),
    since=st.sampled_from([0, 2, 5]),
)
def test_interleaved_merge_is_the_general_merge(
    seed: int,
    na: int,
    nb: int,
    width: int,
    span: int | str,
    tuple_diffs: bool,
    constant: bool,
    several_times: bool,
    since: int,
) -> None:
    """Whenever ``merge_interleaved`` merges two runs of distinct rows, it gives the very
    updates the general merge gives; rows in both runs (which add up) are left to it.
    ``near``: rows of small leading columns and a last column of a few values 2**58 apart
    plus a byte (too wide to pack: many rows tie on the packed high bits)."""
    rng = np.random.default_rng(seed)
    dt = PAIR if tuple_diffs else INT_DIFF
    fr = Antichain.of([(since,)], 1)
    runs = []
    for n, times in ((na, [0, 1]), (nb, [2, 3])):
        if span == "near":
            r = rng.integers(0, 4, (n, width + 1))
            r[:, -1] = r[:, -1] * 2**58 + rng.integers(0, 256, n)
            rows = np.unique(r, axis=0) if n else np.empty((0, width + 1), np.int64)
        elif n:
            rows = _rows(rng, n, 0, int(span), width)
        else:
            rows = np.empty((0, width), np.int64)
        b = _batch(rng, rows, 1, dt, times if several_times else times[:1], constant, times[0])
        runs.append(b.updates())
    ua, ub = runs
    got = merge_interleaved(ua, ub, fr.arr)
    want = _general(ua, ub, fr.arr)
    rows_a = {tuple(int(c[i]) for c in ua.data) for i in range(len(ua))}
    rows_b = {tuple(int(c[i]) for c in ub.data) for i in range(len(ub))}
    if rows_a & rows_b:
        assert got is None
    if span == 2**40 and width >= 2 and na and nb and not rows_a & rows_b:
        assert got is not None  # (rows too wide for one word, none in both runs)
    if got is not None:
        assert [c.tolist() for c in got.data] == [c.tolist() for c in want.data]
        assert np.asarray(got.times).tolist() == np.asarray(want.times).tolist()
        dg = got.diffs if isinstance(got.diffs, tuple) else (got.diffs,)
        dw = want.diffs if isinstance(want.diffs, tuple) else (want.diffs,)
        assert [np.asarray(c).tolist() for c in dg] == [np.asarray(c).tolist() for c in dw]


@pytest.mark.parametrize("fuel", [1, 5000, 1 << 62])
def test_merges_of_distinct_rows_in_chunks_are_merge_all(fuel: int) -> None:
    """A ``Merge`` of two batches of distinct rows (some in both, cancelling or adding up),
    done in chunks, gives the batch ``merge_all`` gives."""
    rng = np.random.default_rng(11)
    for dt in (INT_DIFF, PAIR):
        ra = _rows(rng, 9000, 0, 3000, 3)
        rb = np.concatenate([_rows(rng, 4000, 0, 3000, 3), ra[::50]])
        rb = np.unique(rb, axis=0)
        a = _batch(rng, ra, 1, dt, [0], False, 0)
        b = _batch(rng, rb, 1, dt, [1], False, 1)
        fr = Antichain.of([(2,)], 1)
        m = Merge(a, b, fr)
        while not m.work(fuel):
            pass
        assert m.result is not None
        _same(m.result, merge_all([a, b], fr))
