"""Trace tests: merging is associative, compaction keeps every accumulation beyond since."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.core.diff import diff_type_of
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates
from ddflow.trace.batch import Description, TraceBatch
from ddflow.trace.merge import merge_all
from ddflow.trace.spine import Spine

INT = diff_type_of(int)
rows_st = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.integers(0, 3),
        st.integers(0, 2),
        st.integers(0, 2),
        st.sampled_from([1, -1, 2]),
    ),
    max_size=25,
)


def _batch(rows, lower, upper, dim=2):
    n = len(rows)
    k = np.array([r[0] for r in rows], dtype=np.int64)
    v = np.array([r[1] for r in rows], dtype=np.int64)
    t = np.array([r[2:4] for r in rows], dtype=np.int64).reshape(n, dim)
    d = np.array([r[4] for r in rows], dtype=np.int64)
    desc = Description(
        Antichain.of([lower], dim), Antichain.of([upper], dim), Antichain.of([(0, 0)], dim)
    )
    return TraceBatch.build(1, Updates((k, v), t, d, INT), desc)


def _accumulate(batches, t):
    acc = {}
    for b in batches:
        for k, v, tt, d in zip(
            b.data[0].tolist(), b.data[1].tolist(), b.times.tolist(), b.diffs.tolist(), strict=True
        ):
            if all(x <= y for x, y in zip(tt, t, strict=True)):
                acc[(k, v)] = acc.get((k, v), 0) + d
    return {key: x for key, x in acc.items() if x}


ALL_TIMES = [(a, b) for a in range(5) for b in range(5)]


@given(rows_st, rows_st, rows_st)
def test_merge_associative(r1, r2, r3):
    """(a + b) + c and a + (b + c) hold the same collection at every time."""
    z = Antichain.of([(0, 0)], 2)
    a, b, c = _batch(r1, (0, 0), (9, 9)), _batch(r2, (0, 0), (9, 9)), _batch(r3, (0, 0), (9, 9))
    left = merge_all([merge_all([a, b], z), c], z)
    right = merge_all([a, merge_all([b, c], z)], z)
    for t in ALL_TIMES:
        assert _accumulate([left], t) == _accumulate([right], t) == _accumulate([a, b, c], t)


@settings(max_examples=60)
@given(
    st.lists(rows_st, min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=3),
)
def test_compaction_preserves_accumulations(batches, since):
    """After merges with a since frontier, the trace accumulates as before at every time
    beyond since; the spine keeps few batches."""
    spine = Spine(1, 2, eager_rows=8, small_rows=2, max_small=1)
    h = spine.handle()
    raw = []
    for _i, rows in enumerate(batches):
        b = _batch(rows, (0, 0), (9, 9))
        raw.append(b)
        spine.insert(b)
    frontier = Antichain.of(since, 2)
    h.set_compaction(frontier, Antichain.of([(9, 9)], 2))
    for rows in batches[:4]:  # more inserts so merges happen after compaction is set
        b = _batch(rows, (0, 0), (9, 9))
        raw.append(b)
        spine.insert(b)
    for t in ALL_TIMES:
        if frontier.less_equal(t):
            assert _accumulate(spine.batches(), t) == _accumulate(raw, t)


def test_progressive_merge_bounded_work():
    """A large merge proceeds in fuel-sized steps; sources stay readable until it completes."""
    spine = Spine(1, 1, effort=1, eager_rows=0)
    h = spine.handle()
    rng = np.random.default_rng(0)

    def batch(n, lo, hi):
        k = rng.integers(0, 10_000, n)
        u = Updates((k,), np.full((n, 1), lo, dtype=np.int64), np.ones(n, dtype=np.int64), INT)
        d = Description(Antichain.of([(lo,)], 1), Antichain.of([(hi,)], 1), Antichain.of([(0,)], 1))
        return TraceBatch.build(1, u, d)

    spine.insert(batch(5000, 0, 1))
    spine.insert(batch(5000, 1, 2))
    h.set_compaction(Antichain.of([(2,)], 1), Antichain.of([(2,)], 1))
    assert spine.stats()["merges_in_progress"] == 1
    inserted = 10_000
    seen_in_progress_after_insert = False
    for t in range(2, 40):
        spine.insert(batch(1000, t, t + 1))
        inserted += 1000
        h.set_compaction(Antichain.of([(t + 1,)], 1), Antichain.of([(t + 1,)], 1))
        stats = spine.stats()
        if t == 2 and stats["merges_in_progress"] >= 1:
            seen_in_progress_after_insert = True
        # every update stays readable exactly once while merges are under way
        assert sum(int(b.diffs.sum()) for b in spine.batches()) == inserted
    assert seen_in_progress_after_insert  # one insert did not pay for the whole merge
    assert spine.stats()["merges_done"] >= 3
    assert len(spine.batches()) <= 8


def test_shared_readers_compaction_follows_meet_and_close_releases():
    """Compaction follows the meet of all open readers; closing one releases its hold."""
    spine = Spine(1, 1)
    fast, slow = spine.handle(), spine.handle()
    f = lambda t: Antichain.of([(t,)], 1)  # noqa: E731
    fast.set_compaction(f(5), f(5))
    assert spine.logical == f(0) and spine.physical == f(0)  # slow still holds time 0
    slow.set_compaction(f(3), f(2))
    assert spine.logical == f(3) and spine.physical == f(2)
    slow.close()
    assert spine.logical == f(5) and spine.physical == f(5)


def test_progressive_merge_of_composite_keys() -> None:
    """Chunked merges pick a boundary key by comparing keys of both batches; composite
    (structured) keys must work there too (regression: scalar ``<=`` on records)."""
    import numpy as np

    from ddflow.core.diff import INT_DIFF
    from ddflow.core.frontier import Antichain
    from ddflow.core.updates import Updates, consolidate
    from ddflow.trace.batch import Description, TraceBatch
    from ddflow.trace.merge import Merge

    rng = np.random.default_rng(0)

    def batch(n: int, lo: int) -> TraceBatch:
        cols = (rng.integers(0, 50, n), rng.integers(0, 50, n), rng.integers(0, 5, n))
        u = Updates(cols, np.full((n, 1), lo), np.ones(n, np.int64), INT_DIFF)
        return TraceBatch.build(
            2,
            u,
            Description(
                Antichain.of([(lo,)], 1), Antichain.of([(lo + 1,)], 1), Antichain.of([(0,)], 1)
            ),
        )

    a, b = batch(5000, 0), batch(3000, 1)
    m = Merge(a, b, Antichain.of([(0,)], 1))
    steps = 0
    while not m.work(500):
        steps += 1
    assert steps > 3  # it really merged in chunks
    want = consolidate(
        Updates(
            tuple(np.concatenate([x, y]) for x, y in zip(a.data, b.data, strict=True)),
            np.concatenate([a.times, b.times]),
            np.concatenate([a.diffs, b.diffs]),
            INT_DIFF,
        )
    )
    assert m.result is not None
    assert all((x == y).all() for x, y in zip(m.result.data, want.data, strict=False))
    assert (m.result.diffs == want.diffs).all()


def test_cascade_merge_is_left_to_fuel():
    """A merge a cascade starts is not completed by the insert that started it (that insert
    would pay for the whole cascade); it finishes on later inserts' fuel and the spine goes
    back to few batches, every update readable exactly once throughout."""
    spine = Spine(1, 1, effort=4, eager_rows=1000, small_rows=0)
    h = spine.handle()
    rng = np.random.default_rng(1)
    inserted = 0

    def insert(n: int, t: int) -> None:
        nonlocal inserted
        k = rng.integers(0, 1 << 40, n)
        u = Updates((k,), np.full((n, 1), t, dtype=np.int64), np.ones(n, dtype=np.int64), INT)
        d = Description(
            Antichain.of([(t,)], 1), Antichain.of([(t + 1,)], 1), Antichain.of([(0,)], 1)
        )
        spine.insert(TraceBatch.build(1, u, d))
        h.set_compaction(Antichain.of([(t + 1,)], 1), Antichain.of([(t + 1,)], 1))
        inserted += n
        assert sum(int(b.diffs.sum()) for b in spine.batches()) == inserted

    insert(4000, 0)
    insert(1500, 1)
    done = spine.merges_done
    insert(800, 2)  # 1500 + 800 merge (above eager_rows), as large as half of 4000: a cascade
    assert spine.merges_done == done and spine.stats()["merges_in_progress"] == 1
    assert [len(b) for b in spine.batches()] == [4000, 1500, 800]
    for t in range(3, 40):
        insert(500, t)
    assert spine.merges_done > done
    assert len(spine.batches()) <= 8
