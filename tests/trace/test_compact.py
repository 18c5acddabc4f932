"""Compact batches: updates that all share one time and one diff are stored without per-update
time and diff columns (zero-stride views), and every read path answers as with plain columns."""

from __future__ import annotations

import pickle
from collections import Counter

import numpy as np
import pytest

import ddflow as dd
from ddflow.core.columns import const_view
from ddflow.core.diff import INT_DIFF, diff_type_of
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates
from ddflow.trace.batch import COMPACT_MIN_ROWS, Description, TraceBatch, compact_column
from ddflow.trace.merge import MIN_CHUNK_ROWS, Merge, merge_all
from ddflow.trace.spine import Spine, key_sums


def _desc(lo: int, hi: int, since: int = 0) -> Description:
    return Description(
        Antichain.of([(lo,)], 1), Antichain.of([(hi,)], 1), Antichain.of([(since,)], 1)
    )


def _batch(k, v, t, d, lo: int, hi: int) -> TraceBatch:
    n = len(k)
    u = Updates(
        (np.asarray(k, np.int64), np.asarray(v, np.int64)),
        np.asarray(t, np.int64).reshape(n, 1),
        np.asarray(d, np.int64),
        INT_DIFF,
    )
    return TraceBatch.build(1, u, _desc(lo, hi))


def _plain(b: TraceBatch) -> TraceBatch:
    """The same batch with real (materialized) time and diff columns."""
    p = TraceBatch(b.key_width, Updates(b.data, b.times, b.diffs, b.diff_type), b.desc)
    p.times = np.array(b.times)
    p.diffs = np.array(b.diffs)
    assert not p.is_compact
    return p


def _static(n: int, seed: int = 0, keys: int = 300, time: int = 0) -> TraceBatch:
    rng = np.random.default_rng(seed)
    codes = rng.permutation(np.unique(rng.integers(0, keys * 1000, 2 * n)))[:n]
    b = _batch(codes // 1000, codes % 1000, np.full(n, time), np.ones(n), time, time + 1)
    assert len(b) == n
    return b


def _rows(b: TraceBatch) -> list[tuple[int, int, int, int]]:
    return list(
        zip(
            b.data[0].tolist(),
            b.data[1].tolist(),
            b.times[:, 0].tolist(),
            b.diffs.tolist(),
            strict=True,
        )
    )


def _same_updates(x: Updates, y: Updates) -> None:
    assert len(x) == len(y)
    for cx, cy in zip(x.data, y.data, strict=True):
        np.testing.assert_array_equal(cx, cy)
    assert x.times.shape == y.times.shape and x.times.dtype == y.times.dtype
    np.testing.assert_array_equal(x.times, y.times)
    assert np.asarray(x.diffs).dtype == np.asarray(y.diffs).dtype
    np.testing.assert_array_equal(x.diffs, y.diffs)


def test_static_batch_is_compact_and_small():
    """One time and diff 1 everywhere: times and diffs are zero-stride and cost no memory
    per update; the batch's bytes are its two columns plus the key index."""
    b = _static(5000)
    assert b.is_compact
    assert b.times.strides[0] == 0 and b.diffs.strides == (0,)
    assert b.times.shape == (5000, 1) and b.diffs.shape == (5000,)
    assert not b.times.flags.writeable and not b.diffs.flags.writeable
    n, nk = len(b), b.num_keys
    assert b.bounds.dtype == np.int32
    assert b.nbytes() == 16 * n + 8 * nk + 4 * (nk + 1) + 8 + 8
    assert _plain(b).nbytes() == b.nbytes() + 16 * n - 16


def test_compaction_needs_one_time_and_one_diff():
    """A batch is compact only with one time and one diff; each column compacts on its own."""
    n = 200
    k, v = np.arange(n) % 7, np.arange(n)
    b = _batch(k, v, np.zeros(n), np.where(np.arange(n) == 5, 2, 1), 0, 1)
    assert b.times.strides[0] == 0 and b.diffs.strides[0] != 0 and not b.is_compact
    b = _batch(k, v, np.arange(n) % 2, np.ones(n), 0, 2)
    assert b.times.strides[0] != 0 and b.diffs.strides[0] == 0 and not b.is_compact
    b = _batch(k, v, np.full(n, 3), np.full(n, -1), 3, 4)  # all -1: compact too
    assert b.is_compact and int(b.diffs[0]) == -1 and int(b.times[0, 0]) == 3
    small = _batch(
        k[: COMPACT_MIN_ROWS - 1],
        v[: COMPACT_MIN_ROWS - 1],
        np.zeros(COMPACT_MIN_ROWS - 1),
        np.ones(COMPACT_MIN_ROWS - 1),
        0,
        1,
    )
    assert not small.is_compact  # not worth the check
    pair = diff_type_of((int, int))
    d = (np.ones(n, np.int64), np.arange(n, dtype=np.int64))
    u = Updates((k.astype(np.int64), v.astype(np.int64)), np.zeros((n, 1), np.int64), d, pair)
    b = TraceBatch.build(1, u, _desc(0, 1))
    assert b.diffs[0].strides == (0,) and b.diffs[1].strides != (0,)  # per component


def test_compact_columns_refuse_writes():
    """Nobody can write into a batch's shared time or diff row by accident."""
    b = _static(500)
    with pytest.raises(ValueError):
        b.times[3, 0] = 7
    with pytest.raises(ValueError):
        b.diffs[3] = 7
    assert compact_column(np.zeros(10)) is not None  # floats are left as they are
    f = np.zeros(100)
    assert compact_column(f) is f


@pytest.mark.parametrize("nprobe", [3, 40, 2000])
def test_read_paths_match_plain_batch(nprobe):
    """rows_for (dict, dense table and search paths), take_rows, updates and key_sums give
    the same answers on a compact batch and its plain twin."""
    b = _static(3000, seed=nprobe)
    p = _plain(b)
    rng = np.random.default_rng(nprobe)
    probe = np.unique(rng.integers(-5, 320, nprobe))
    for probe_ in (probe, b.keys[:nprobe], np.unique(rng.integers(0, 10**9, nprobe))):
        rb, ob = b.rows_for(probe_)
        rp, op = p.rows_for(probe_)
        np.testing.assert_array_equal(rb, rp)
        np.testing.assert_array_equal(ob, op)
        _same_updates(b.take_rows(rb), p.take_rows(rp))
        np.testing.assert_array_equal(
            key_sums([b], probe_, INT_DIFF), key_sums([p], probe_, INT_DIFF)
        )
    _same_updates(b.updates(), p.updates())
    assert sorted(_rows(b)) == sorted(_rows(p))
    # a dense key table built by lookups is counted (one int32 per key in the keys' span)
    fresh = _static(3000, seed=nprobe)
    before = fresh.nbytes()
    fresh.rows_for(np.arange(0, 300))
    span = int(fresh.keys[-1]) - int(fresh.keys[0]) + 1
    assert fresh.nbytes() == before + 4 * span


def _changes(base: TraceBatch, seed: int, rounds: int) -> list[TraceBatch]:
    """Later batches: removals (-1) of some of ``base``'s edges, new edges, re-additions."""
    rng = np.random.default_rng(seed)
    k, v = base.data[0], base.data[1]
    out = []
    for r in range(1, rounds + 1):
        gone = rng.choice(len(base), 40, replace=False)
        nk, nv = rng.integers(0, 300, 30), rng.integers(1000, 1100, 30)
        again = rng.choice(len(base), 5, replace=False)
        out.append(
            _batch(
                np.concatenate([k[gone], nk, k[again]]),
                np.concatenate([v[gone], nv, v[again]]),
                np.full(75, r),
                np.concatenate([-np.ones(40), np.ones(35)]),
                r,
                r + 1,
            )
        )
    return out


def _accumulate(batches, t: int) -> Counter:
    acc: Counter = Counter()
    for b in batches:
        for k, v, tt, d in _rows(b):
            if tt <= t:
                acc[(k, v)] += d
    return Counter({kv: x for kv, x in acc.items() if x})


@pytest.mark.parametrize("since", [0, 2, 5])
def test_merges_with_later_noncompact_batches(since):
    """Merging a compact batch with later batches holding -1 diffs (at once, and in small
    fuelled steps) gives the same batch as merging its plain twin, and accumulates right."""
    base = _static(4000, seed=since)
    later = _changes(base, since, 4)
    expect = {t: _accumulate([base, *later], t) for t in range(6)}
    s = Antichain.of([(since,)], 1)
    merged = merge_all([base, *later], s)
    merged_plain = merge_all([_plain(base), *later], s)
    assert _rows(merged) == _rows(merged_plain)
    for t in range(since, 6):
        assert _accumulate([merged], t) == expect[t]
    m = Merge(base, merge_all(later, s), s)
    while not m.work(500):
        pass
    assert m.result is not None and _rows(m.result) == _rows(merged)
    # everything advanced to one time and the removals merged away: compact again
    final = merge_all([base, *later], Antichain.of([(9,)], 1))
    assert final.is_compact == all(d == 1 for *_, d in _rows(final))


def test_spine_merges_collapse_times_into_compact_batches():
    """Edges arriving over several rounds at different times: with compaction following the
    trace's upper (no reader holds it back), merged batches hold one time and are compact."""
    spine = Spine(1, 1, eager_rows=1 << 20)
    rng = np.random.default_rng(1)
    codes = rng.permutation(np.unique(rng.integers(0, 10**6, 12_000)))[:10_000]
    for r in range(10):
        c = codes[r * 1000 : (r + 1) * 1000]
        spine.insert(_batch(c // 1000, c % 1000, np.full(1000, r), np.ones(1000), r, r + 1))
    bs = spine.batches()
    assert sum(len(b) for b in bs) == 10_000 and len(bs) < 10
    assert all(b.is_compact for b in bs)
    keys = sum(b.num_keys for b in bs)
    assert spine.stats()["bytes"] <= 16 * 10_000 + 12 * keys + 16 * len(bs) + 8 * len(bs)


def _edges_dataflow(reader: str):
    """Edges inserted at time 0, then rounds of removals and additions; the arrangement is
    read by a join with itself and by count_total."""
    rng = np.random.default_rng(7)
    codes = rng.permutation(np.unique(rng.integers(0, 400 * 50, 3000)))[:2000]
    src, dst = codes // 50, codes % 50
    live = set(zip(src.tolist(), dst.tolist(), strict=True))
    log = [(e, 0, 1) for e in live]
    with dd.Worker() as worker:
        edges_in, edges = worker.new_collection()
        arranged = edges.arrange_by_key()
        if reader == "join":
            # two-hop paths x -> y -> z, as (y, (x, z)) records; rev is keyed by dst
            rev = edges.map(lambda e: (e[1], e[0])).arrange_by_key()
            out = rev.join(arranged).capture()
        else:
            out = edges.map(lambda e: e[0]).count_total().capture()
        edges_in.insert_columns((src, dst))
        edges_in.advance_to(1)
        worker.run()
        compact_seen = any(b.is_compact for b in arranged.op.spine.batches())
        for t in range(1, 5):
            gone = rng.choice(sorted(live), 30, replace=False).tolist()
            new = [
                (int(a), int(b))
                for a, b in zip(rng.integers(0, 400, 20), rng.integers(50, 60, 20), strict=True)
            ]
            for e in gone:
                live.discard(tuple(e))
                edges_in.remove(tuple(e))
                log.append((tuple(e), t, -1))
            for e in new:
                if e not in live:
                    live.add(e)
                    edges_in.insert(e)
                    log.append((e, t, 1))
            edges_in.advance_to(t + 1)
            worker.run()
        return out, log, compact_seen


def _at(log, t):
    acc: Counter = Counter()
    for e, tt, d in log:
        if tt <= t:
            acc[e] += d
    return {e for e, c in acc.items() if c}


@pytest.mark.parametrize("reader", ["join", "count_total"])
def test_dataflow_over_compact_arrangement(reader):
    """join and count_total over an arrangement whose first batch is compact answer as
    plain Python does, at every time."""
    out, log, compact_seen = _edges_dataflow(reader)
    assert compact_seen
    for t in range(5):
        edges = _at(log, t)
        if reader == "join":
            expect = Counter((y, (x, z)) for (x, y) in edges for (y2, z) in edges if y2 == y)
        else:
            expect = Counter(Counter(x for x, _ in edges).items())
        assert out.at(t) == dict(expect)


def test_static_arrangement_compacts_in_dataflow():
    """arrange_by_key of a static graph, one round or several: after merges every batch is
    compact and the trace holds its two columns and key index only."""
    rng = np.random.default_rng(3)
    codes = rng.permutation(np.unique(rng.integers(0, 10**6, 25_000)))[:20_000]
    src, dst = codes // 1000, codes % 1000
    for rounds in (1, 10):
        with dd.Worker() as worker:
            edges_in, edges = worker.new_collection()
            spine = edges.arrange_by_key().op.spine
            for r in range(rounds):
                lo, hi = r * len(src) // rounds, (r + 1) * len(src) // rounds
                edges_in.insert_columns((src[lo:hi], dst[lo:hi]))
                edges_in.advance_to(r + 1)
                worker.run()
            bs = spine.batches()
            assert all(b.is_compact for b in bs) and sum(len(b) for b in bs) == 20_000
            stats = worker.stats()[0]
            assert stats["bytes"] == spine.stats()["bytes"]
            assert stats["bytes"] <= 16 * 20_000 + sum(12 * b.num_keys + 24 for b in bs)


def test_pickle_round_trip_keeps_compact_columns():
    """A batch pickles with equal contents, stays compact, and its pickle has no per-update
    time or diff bytes, nor the lookup caches a reader built."""
    b = _static(5000)
    plain_size = len(pickle.dumps(b))
    b.rows_for(np.arange(300))  # caches are dropped, not pickled
    b.rows_for(b.keys[:3])
    raw = pickle.dumps(b)
    assert len(raw) == plain_size
    assert len(raw) < 16 * len(b) + 12 * b.num_keys + 2000
    c = pickle.loads(raw)
    assert c.is_compact and c.nbytes() < b.nbytes()
    assert _rows(c) == _rows(b) and c.desc == b.desc and c.diff_type == b.diff_type
    np.testing.assert_array_equal(c.keys, b.keys)
    np.testing.assert_array_equal(c.bounds, b.bounds)
    p = pickle.loads(pickle.dumps(_plain(b)))
    assert _rows(p) == _rows(b) and not p.is_compact


def test_nbytes_counts_shared_buffers_once():
    """Buffers shared between batches (or seen before) are counted once."""
    b = _static(1000)
    seen: set[int] = set()
    first = b.nbytes(seen)
    assert first > 0 and b.nbytes(seen) == 0
    twin = TraceBatch(1, b.updates(), b.desc)  # shares b's data columns
    assert twin.nbytes(seen) == twin.keys.nbytes + twin.bounds.nbytes


@pytest.mark.parametrize("n", [100, 5000])
@pytest.mark.parametrize("diff", [1, -1, 3])
def test_consolidate_compact_equals_plain(n, diff):
    """consolidate(compact=True) gives the same updates as consolidate() for constant times
    and diffs, duplicates included (their diffs add up), with the time column zero-stride."""
    from ddflow.core.updates import consolidate

    rng = np.random.default_rng(n + diff)
    k, v = rng.integers(0, 20, n), rng.integers(0, 30, n)  # many duplicate records
    for d in (np.full(n, diff, np.int64), np.broadcast_to(np.array([diff]), (n,))):
        u = Updates((k, v), np.full((n, 1), 4, np.int64), d, INT_DIFF)
        for runs in (False, True):
            plain, comp = consolidate(u, runs=runs), consolidate(u, runs=runs, compact=True)
            _same_updates(plain, comp)
            assert comp.times.strides[0] == 0 and comp.times.base.shape == (1, 1)
    u = Updates((k, v), rng.integers(0, 3, (n, 1)), np.full(n, diff, np.int64), INT_DIFF)
    _same_updates(consolidate(u), consolidate(u, compact=True))


def test_fuel_in_small_amounts_makes_chunks_worth_their_cost():
    """A merge fed a few rows of fuel at a time banks it and works in chunks of at least
    ``MIN_CHUNK_ROWS`` rows (the last excepted), never in chunks of a few rows; the result
    is the merge done at once."""
    a = _static(20_000, seed=1, keys=3000)
    b = _static(12_000, seed=2, keys=3000, time=1)
    s = Antichain.of([(0,)], 1)
    at_once = merge_all([a, b], s)
    m = Merge(a, b, s)
    sizes = []
    calls = 0
    while not m.work(300):
        calls += 1
        sizes = [len(c) for c in m.chunks]
    assert calls > 10
    # a chunk takes about half its fuel from one batch, up to a key's boundary
    assert sizes and all(n >= MIN_CHUNK_ROWS // 4 for n in sizes), sizes
    assert m.result is not None and _rows(m.result) == _rows(at_once)


def test_const_view_is_a_read_only_broadcast() -> None:
    """``const_view`` repeats one row like ``np.broadcast_to``: same values and shape, zero
    strides, read-only, and it survives a pickle of a compact batch."""
    for row, shape in ((np.array([5], np.int64), (7,)), (np.array([[1, 2]], np.int64), (4, 2))):
        v = const_view(row, shape)
        want = np.broadcast_to(row, shape)
        assert v.shape == want.shape and v.tolist() == want.tolist()
        assert v.strides[0] == 0 and not v.flags.writeable
        with pytest.raises(ValueError):
            v[0] = 3
    n = 200
    u = Updates((np.arange(n),), np.zeros((n, 1), np.int64), np.ones(n, np.int64), INT_DIFF)
    b = TraceBatch.build(1, u, _desc(0, 1))
    assert b.is_compact
    back = pickle.loads(pickle.dumps(b))
    assert back.is_compact and back.diffs.tolist() == [1] * n and back.times.tolist() == [[0]] * n
