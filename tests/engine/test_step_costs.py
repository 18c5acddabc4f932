"""The small-step paths: what a one-change round skips and where it leaves numpy.

Each path is checked two ways: against an answer computed here from scratch (dicts and
sorted lists, no engine code), and against the general path it stands in for (the size
thresholds patched so the general path runs), which must give the very same columns.

* Loops: operators whose inboxes are empty and whose outstanding times are not complete
  are not run when only their frontier moves, and a quiet loop jumps to the next iteration
  at which an outstanding time becomes complete. BFS over a long chain with one edge
  changing per round gives the reference distances at every round, the same updates as
  with every operator run at every iteration, and far fewer operator runs.
* ``consolidate`` of a few integer rows in Python; a trace batch of a few rows of one int
  key; ``rows_for`` with a few probe keys in a large batch; the count's history sums for a
  few keys; ``count_total`` / ``distinct_total`` over one-change rounds.
* A join step that matches a batch against a trace of several batches pushes one output
  batch, not one per trace batch.
* A capture of many small batches joins them like a binary counter (few parts, each
  update copied a logarithmic number of times), with the same updates as before.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from typing import Any

import numpy as np
import pytest

import ddflow as dd
import ddflow.core.updates as updates_mod
import ddflow.engine.progress as progress_mod
import ddflow.operators.count_total as count_total_mod
from ddflow.algorithms import bfs
from ddflow.core.diff import I64_MAX, INT_DIFF
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, consolidate
from ddflow.engine.operator import Operator
from ddflow.trace.batch import Description, TraceBatch
from ddflow.trace.spine import int_key_sums_small, key_sums

# ---- loops: idle operators are not run ---------------------------------------------------


def _reference_bfs(edges: Counter[tuple[int, int]], root: int) -> dict[int, int]:
    adj: dict[int, list[int]] = defaultdict(list)
    for (a, b), c in edges.items():
        if c > 0:
            adj[a].append(b)
    dist = {root: 0}
    todo = deque([root])
    while todo:
        x = todo.popleft()
        for y in adj[x]:
            if y not in dist:
                dist[y] = dist[x] + 1
                todo.append(y)
    return dist


def _bfs_rounds(
    rounds: list[list[tuple[tuple[int, int], int]]],
    first: list[tuple[int, int]],
    monkeypatch: pytest.MonkeyPatch,
):
    """Run BFS from node 0 over ``first``, then each round's edge changes; return the
    captured updates, the distances after each round, how many operator runs there were
    after the load, and how many times the engine looked at an operator (once per
    operator per loop iteration it went through)."""
    visits = [0]
    inner_visit = progress_mod.run_operator

    def visit(op: Operator, multi: bool) -> bool:
        visits[0] += 1
        return inner_visit(op, multi)

    monkeypatch.setattr(progress_mod, "run_operator", visit)
    worker = dd.Worker()
    e_in, edges = worker.new_collection()
    r_in, roots = worker.new_collection()
    dist = bfs(edges, roots)
    out = dist.capture()
    probe = dist.probe()
    runs = [0]

    def counted(op: Operator) -> None:
        inner = op.run

        def run(frontier: Antichain) -> None:
            runs[0] += 1
            inner(frontier)

        op.run = run  # type: ignore[method-assign]

    for op in worker.operators:
        counted(op)
    t = 0

    def advance() -> None:
        nonlocal t
        t += 1
        e_in.advance_to(t)
        r_in.advance_to(t)
        worker.step_while(lambda: probe.less_than(t), at_least_once=True)

    for e in first:
        e_in.insert(e)
    r_in.insert(0)
    advance()
    runs[0] = visits[0] = 0
    answers = []
    for changes in rounds:
        for e, d in changes:
            if d > 0:
                e_in.insert(e)
            else:
                e_in.remove(e)
        advance()
        answers.append({k: v for (k, v), c in out.at(t - 1).items() if c == 1})
    return sorted(out.updates(), key=repr), answers, runs[0], visits[0]


def test_bfs_one_change_rounds_skip_idle_operators(monkeypatch: pytest.MonkeyPatch) -> None:
    n = 120
    rng = np.random.default_rng(7)
    chain = [(i, i + 1) for i in range(n - 1)]
    extra = [(int(a), int(b)) for a, b in rng.integers(0, n, (30, 2))]
    current: Counter[tuple[int, int]] = Counter(chain + extra)
    rounds: list[list[tuple[tuple[int, int], int]]] = []
    wants = []
    for r in range(12):
        # cut the chain far down, then mend it: changes that matter at late iterations
        cut = (n - 10 - r, n - 9 - r)
        step = [(cut, -1)] if current[cut] > 0 else [(cut, +1)]
        a, b = (int(x) for x in rng.integers(0, n, 2))
        step.append(((a, b), +1))
        for e, d in step:
            current[e] += d
        rounds.append(step)
        wants.append(_reference_bfs(current, 0))

    first = chain + extra
    with monkeypatch.context() as m:
        fast_updates, fast_answers, fast_runs, fast_visits = _bfs_rounds(rounds, first, m)
    assert fast_answers == wants

    # one iteration at a time (idle operators still skipped)
    with monkeypatch.context() as m:
        m.setattr(progress_mod, "next_due_iteration", lambda scope, P, i: i + 1)
        step_updates, step_answers, step_runs, step_visits = _bfs_rounds(rounds, first, m)
    assert step_answers == wants
    assert step_updates == fast_updates

    # every operator run at every iteration
    with monkeypatch.context() as m:
        m.setattr(Operator, "wakes", lambda self, frontier: True)
        m.setattr(progress_mod, "next_due_iteration", lambda scope, P, i: i + 1)
        slow_updates, slow_answers, slow_runs, slow_visits = _bfs_rounds(rounds, first, m)
    assert slow_answers == wants
    assert slow_updates == fast_updates
    # the late changes leave most iterations with nothing to do: idle operators are not run
    # and the iterations where none would run are not gone through
    assert fast_runs * 4 < slow_runs, (fast_runs, slow_runs)
    assert fast_visits * 3 < step_visits, (fast_visits, step_visits)


# ---- consolidate of a few rows ------------------------------------------------------------


def _reference_consolidate(u: Updates) -> list[tuple[Any, ...]]:
    acc: dict[tuple[Any, ...], int] = defaultdict(int)
    for i in range(len(u)):
        key = tuple(c[i].item() for c in u.data) + tuple(u.times[i].tolist())
        acc[key] += int(u.diffs[i])
    return sorted((*k, v) for k, v in acc.items() if v)


def _rows_of(u: Updates) -> list[tuple[Any, ...]]:
    return [
        (*(c[i].item() for c in u.data), *u.times[i].tolist(), int(u.diffs[i]))
        for i in range(len(u))
    ]


def _same_columns(a: Updates, b: Updates) -> None:
    assert len(a) == len(b)
    assert [c.dtype for c in a.data] == [c.dtype for c in b.data]
    for x, y in zip(a.data, b.data, strict=True):
        assert np.array_equal(x, y)
    assert np.array_equal(np.asarray(a.times), np.asarray(b.times))
    assert np.array_equal(np.asarray(a.diffs), np.asarray(b.diffs))
    assert a.times.shape[1] == b.times.shape[1]


@pytest.mark.parametrize("seed", range(40))
def test_consolidate_of_a_few_rows_matches_reference_and_general_path(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, updates_mod.SMALL_ROWS + 1))
    dtypes = [np.int64, np.uint8, np.bool_, np.int32]
    cols = []
    for _ in range(int(rng.integers(1, 3))):
        dt = dtypes[int(rng.integers(len(dtypes)))]
        vals = rng.integers(-3 if np.dtype(dt).kind == "i" else 0, 3, n)
        cols.append(vals.astype(dt))
    dims = int(rng.integers(1, 3))
    times = (
        np.full((n, dims), 4, np.int64) if seed % 3 == 0 else rng.integers(0, 3, (n, dims))
    ).astype(np.int64)
    diffs = rng.choice(np.array([-2, -1, 1, 1, 2], np.int64), n)
    u = Updates(tuple(cols), times, diffs, INT_DIFF)
    for compact in (False, True):
        small = consolidate(u, compact=compact)
        assert _rows_of(small) == _reference_consolidate(u)
        with monkeypatch.context() as m:
            m.setattr(updates_mod, "SMALL_ROWS", 0)
            general = consolidate(u, compact=compact)
        _same_columns(small, general)


def test_consolidate_of_a_few_rows_leaving_int64_is_exact() -> None:
    u = Updates(
        (np.array([1, 1, 2], np.int64),),
        np.zeros((3, 1), np.int64),
        np.array([I64_MAX, 1, 5], np.int64),
        INT_DIFF,
    )
    got = consolidate(u)
    assert [(int(k), int(d)) for k, d in zip(got.data[0], got.diffs, strict=True)] == [
        (1, I64_MAX + 1),
        (2, 5),
    ]


def test_consolidate_of_a_few_float_rows_keeps_the_general_order() -> None:
    u = Updates(
        (np.array([2.5, -0.0, 0.0, 1.0], np.float64),),
        np.zeros((4, 1), np.int64),
        np.array([1, 1, 1, -1], np.int64),
        INT_DIFF,
    )
    got = consolidate(u)
    assert got.data[0].tolist() == [0.0, 1.0, 2.5]
    assert got.diffs.tolist() == [2, -1, 1]


# ---- trace batches: few rows, few probe keys, the count's history -------------------------


def _desc(lo: int, hi: int) -> Description:
    return Description(Antichain.of([(lo,)], 1), Antichain.of([(hi,)], 1), Antichain.of([(0,)], 1))


def _batch(keys: list[int], lo: int = 0, dtype: Any = np.int64, seed: int = 0) -> TraceBatch:
    rng = np.random.default_rng(seed)
    n = len(keys)
    u = Updates(
        (np.asarray(keys, dtype), rng.integers(0, 5, n).astype(np.int64)),
        np.full((n, 1), lo, np.int64),
        rng.choice(np.array([-1, 1, 2, 3], np.int64), n),
        INT_DIFF,
    )
    return TraceBatch.build(1, u, _desc(lo, lo + 1))


def _reference_runs(keys: np.ndarray) -> tuple[list[int], list[int]]:
    ks = keys.tolist()
    first = [i for i in range(len(ks)) if i == 0 or ks[i] != ks[i - 1]]
    return [ks[i] for i in first], [*first, len(ks)]


@pytest.mark.parametrize("dtype", [np.int64, np.uint16, np.int8])
def test_a_trace_batch_of_a_few_rows_finds_its_key_runs(dtype: Any) -> None:
    rng = np.random.default_rng(1)
    for n in range(1, 17):
        b = _batch(rng.integers(0, 6, n).tolist(), dtype=dtype, seed=n)
        keys, bounds = _reference_runs(b.data[0])
        assert b.keys.dtype == np.dtype(dtype)
        assert b.keys.tolist() == keys
        assert b.bounds.tolist() == bounds


def test_rows_for_a_few_probe_keys_in_a_large_batch() -> None:
    rng = np.random.default_rng(2)
    b = _batch(rng.integers(0, 400, 3000).tolist(), seed=3)
    assert len(b.keys) > 64
    column = b.data[0].tolist()
    for trial in range(60):
        size = int(rng.integers(1, 17))
        probe = np.unique(rng.integers(-5, 410, size)).astype(np.int64)
        if trial == 0:
            probe = np.array([int(b.keys[0]), int(b.keys[-1]), 10_000], np.int64)
        rows, owner = b.rows_for(probe)
        want = sorted(
            (r, j) for j, p in enumerate(probe.tolist()) for r, k in enumerate(column) if k == p
        )
        assert sorted(zip(rows.tolist(), owner.tolist(), strict=True)) == want


def test_rows_for_probes_beside_and_touching_the_key_range() -> None:
    """Probe keys all below or all above a batch's keys find nothing (the batch is not
    searched); a probe touching either end key still finds its rows, for small and large
    probes (every search path)."""
    rng = np.random.default_rng(9)
    b = _batch(rng.integers(100, 500, 3000).tolist(), seed=10)
    lo, hi = int(b.keys[0]), int(b.keys[-1])
    column = b.data[0].tolist()
    probes = [
        np.arange(lo - 40, lo),
        np.arange(hi + 1, hi + 300),
        np.array([lo - 3]),
        np.array([hi + 1]),
        np.arange(lo - 40, lo + 1),
        np.arange(hi, hi + 300),
        np.array([lo]),
        np.array([hi]),
    ]
    for probe in probes:
        probe = probe.astype(np.int64)
        rows, owner = b.rows_for(probe)
        want = sorted(
            (r, j) for j, p in enumerate(probe.tolist()) for r, k in enumerate(column) if k == p
        )
        assert sorted(zip(rows.tolist(), owner.tolist(), strict=True)) == want


def test_rows_for_a_few_keys_of_many_rows_each() -> None:
    """A few keys holding thousands of rows each (a whole group under one key): every
    search path gives the same rows, in order of probe then row."""
    rng = np.random.default_rng(11)

    def batch(keys: list[int], dtype: Any = np.int64) -> TraceBatch:
        n = len(keys)  # (distinct values: no two rows consolidate)
        u = Updates(
            (np.asarray(keys, dtype), np.arange(n, dtype=np.int64)),
            np.zeros((n, 1), np.int64),
            np.ones(n, np.int64),
            INT_DIFF,
        )
        return TraceBatch.build(1, u, _desc(0, 1))

    keys = [1] * 3000 + [2] * 5 + [3] * 700 + [7] * 40
    batches = [
        batch(keys),  # few keys: a dict
        batch(keys + rng.integers(10, 200, 200).tolist()),  # more keys: a search
        batch(keys, dtype=np.int32),  # keys of another dtype than the probe's
    ]
    for b in batches:
        assert b.bounds[-1] >= len(keys)
        column = b.data[0].tolist()
        for probe in ([1], [2], [3, 7], [1, 2, 3], [4], [2, 7, 9], [0, 1], [0, 3, 4, 7]):
            p = np.array(probe, dtype=np.int64)
            rows, owner = b.rows_for(p)
            want = [(j, r) for j, k in enumerate(probe) for r, c in enumerate(column) if c == k]
            assert list(zip(owner.tolist(), rows.tolist(), strict=True)) == want


def test_history_sums_for_a_few_keys() -> None:
    rng = np.random.default_rng(4)
    batches = [
        _batch(rng.integers(0, 300, 2000).tolist(), lo=0, seed=5),  # large: searchsorted
        _batch(rng.integers(0, 300, 40).tolist(), lo=1, seed=6),  # few keys: a dict
        _batch(rng.integers(0, 300, 500).tolist(), lo=2, dtype=np.int32, seed=7),  # other dtype
        _batch([], lo=3),
        _batch([5, 5, 9], lo=4, seed=8),
    ]
    for _ in range(50):
        probe = np.unique(rng.integers(0, 310, int(rng.integers(1, 12)))).astype(np.int64)
        want = [0] * len(probe)
        for b in batches:
            for k, d in zip(b.data[0].tolist(), np.asarray(b.diffs).tolist(), strict=True):
                for j, p in enumerate(probe.tolist()):
                    if k == p:
                        want[j] += d
        assert int_key_sums_small(batches, probe) == want
        assert np.asarray(key_sums(batches, probe, INT_DIFF)).tolist() == want


# ---- the total-order count over one-change rounds ----------------------------------------


def _count_rounds(mode: str, rounds: list[list[tuple[int, int]]]):
    worker = dd.Worker()
    inp, coll = worker.new_collection()
    out_c = coll.count_total() if mode == "count" else coll.distinct_total()
    cap = out_c.capture()
    probe = out_c.probe()
    at = []
    for t, changes in enumerate(rounds):
        for k, d in changes:
            inp.update(k, d)
        inp.advance_to(t + 1)
        worker.step_while(lambda: probe.less_than(t + 1), at_least_once=True)
        at.append(dict(cap.at(t)))
    return sorted(cap.updates(), key=repr), at


@pytest.mark.parametrize("mode", ["count", "distinct"])
def test_count_total_over_one_change_rounds(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(9)
    rounds: list[list[tuple[int, int]]] = []
    current: Counter[int] = Counter()
    wants = []
    for r in range(120):
        changes = []
        for _ in range(int(rng.integers(0, 4))):
            k = int(rng.integers(0, 12))
            d = int(rng.choice([-1, 1, 1, 2])) if current[k] > 0 or r % 7 else -1
            changes.append((k, d))
            current[k] += d
        if r % 10 == 9:  # a round whose changes cancel
            changes += [(3, 1), (3, -1)]
        rounds.append(changes)
        if mode == "count":
            wants.append({(k, c): 1 for k, c in current.items() if c})
        else:
            wants.append({k: 1 for k, c in current.items() if c})  # a non-zero count
    upd, at = _count_rounds(mode, rounds)
    assert at == wants
    with monkeypatch.context() as m:
        m.setattr(count_total_mod, "SMALL_ROWS", 0)
        m.setattr(updates_mod, "SMALL_ROWS", 0)
        general_upd, general_at = _count_rounds(mode, rounds)
    assert upd == general_upd
    assert at == general_at


def _cut_chain_rounds(
    n: int, seed: int, count: int, stride: int
) -> tuple[list[tuple[int, int]], list[list[tuple[tuple[int, int], int]]], list[dict[int, int]]]:
    """A chain of ``n`` nodes and ``count`` rounds, each cutting the chain ``stride``
    further up (changes that matter at late iterations) and adding a random edge; with
    the reference distances after each round."""
    rng = np.random.default_rng(seed)
    first = [(i, i + 1) for i in range(n - 1)]
    current: Counter[tuple[int, int]] = Counter(first)
    rounds = []
    wants = []
    for r in range(count):
        cut = (n - 3 - stride * r, n - 2 - stride * r)
        a, b = (int(x) for x in rng.integers(0, n, 2))
        step = [(cut, -1), ((a, b), +1)]
        for e, d in step:
            current[e] += d
        rounds.append(step)
        wants.append(_reference_bfs(current, 0))
    return first, rounds, wants


def _bfs_loaded(first: list[tuple[int, int]]) -> tuple[Any, Any, Any, Any, Any]:
    """A worker running BFS from node 0 and its edge and root inputs, ``first`` inserted
    at time 0 (not yet stepped); with its capture and probe."""
    worker = dd.Worker()
    e_in, edges = worker.new_collection()
    r_in, roots = worker.new_collection()
    dist = bfs(edges, roots)
    out = dist.capture()
    probe = dist.probe()
    for e in first:
        e_in.insert(e)
    r_in.insert(0)
    return worker, e_in, r_in, out, probe


def _advance(worker: Any, inputs: tuple[Any, ...], probe: Any, t: int) -> None:
    for i in inputs:
        i.advance_to(t)
    worker.step_while(lambda: probe.less_than(t), at_least_once=True)


def test_bfs_rounds_fed_several_times_per_step() -> None:
    """Changes at several times reach the loop in one step: the loop variable holds the
    later times' updates back while the earlier epoch runs, and releases them in theirs
    (the rounds' answers are those of one round per step)."""
    first, rounds, wants = _cut_chain_rounds(60, 11, 9, 2)
    worker, e_in, r_in, out, probe = _bfs_loaded(first)
    _advance(worker, (e_in, r_in), probe, 1)
    for lo in range(0, len(rounds), 3):
        for r in range(lo, min(lo + 3, len(rounds))):
            for e, d in rounds[r]:
                e_in.update_at(e, r + 1, d)
        _advance(worker, (e_in, r_in), probe, min(lo + 3, len(rounds)) + 1)
    for r, want in enumerate(wants):
        assert {k: v for (k, v), c in out.at(r + 1).items() if c == 1} == want


def test_loop_changes_fed_ahead_of_the_frontier() -> None:
    """Changes at future times enter a loop before those times are complete. The loop
    body has no reduction, so what they produce comes straight back to the loop variable,
    which holds it, and must release it in the later epoch when the frontier passes those
    times, though nothing new arrives then (a skipped loop variable loses it)."""
    worker = dd.Worker()
    inp, xs = worker.new_collection()
    res = xs.iterate(lambda x: x.map(lambda v: v + 1 if v < 10 else v), limit=50)
    out = res.capture()
    probe = res.probe()
    rng = np.random.default_rng(3)
    feed = [[(int(v), 1) for v in rng.integers(0, 15, 3)] for _ in range(6)]
    for r in range(1, 6):
        feed[r].append((feed[r - 1][0][0], -1))
    # every round's changes are in before any of their times completes
    for r, changes in enumerate(feed):
        for v, d in changes:
            inp.update_at(v, r, d)
    want: Counter[int] = Counter()
    for r in range(len(feed)):
        inp.advance_to(r + 1)
        worker.step_while(lambda: probe.less_than(r + 1), at_least_once=True)
        for v, d in feed[r]:
            want[max(v, 10)] += d
        assert dict(out.at(r)) == {v: c for v, c in want.items() if c}, r


def test_bfs_changes_fed_ahead_of_the_frontier() -> None:
    """Changes at future times enter the loop before those times are complete: the loop
    variable holds what comes back at them, and must release it in the later epoch when
    the frontier passes those times, though nothing new arrives then."""
    first, rounds, wants = _cut_chain_rounds(40, 5, 6, 3)
    worker, e_in, r_in, out, probe = _bfs_loaded(first)
    # every round's changes are in before any of their times completes
    for r, step in enumerate(rounds):
        for e, d in step:
            e_in.update_at(e, r + 1, d)
    for t in range(1, len(rounds) + 2):
        _advance(worker, (e_in, r_in), probe, t)
    for r, want in enumerate(wants):
        assert {k: v for (k, v), c in out.at(r + 1).items() if c == 1} == want, r


# ---- a join's step: one output batch however many trace batches it matched ----------------


def test_join_pushes_one_batch_per_step_over_a_trace_of_several_batches() -> None:
    """The right side is fed over many rounds, so its trace holds several batches; a left
    batch that matches keys in all of them then reaches the operator downstream as one
    batch (a vectorized map is called once per batch it receives), and the join's output
    equals the pairs computed here at every round."""
    worker = dd.Worker()
    a_in, a = worker.new_collection()
    b_in, b = worker.new_collection()
    calls: list[int] = []

    def count_calls(cols: Any) -> Any:
        calls.append(len(cols[0]))
        return cols

    joined = a.join(b).map(count_calls, vectorized=True)
    cap = joined.capture()
    probe = joined.probe()
    rights: Counter[tuple[int, int]] = Counter()
    lefts: Counter[tuple[int, int]] = Counter()
    t = 0
    for r in range(24):  # right rows only: the join finds no left rows
        for j in range(4):
            rights[(j, 100 * r + j)] += 1
            b_in.update((j, 100 * r + j), 1)
        t += 1
        a_in.advance_to(t)
        b_in.advance_to(t)
        worker.step_while(lambda: probe.less_than(t), at_least_once=True)
    assert calls == []
    batches_before = len(calls)
    for j in range(4):
        lefts[(j, -j)] += 1
        a_in.update((j, -j), 1)
    t += 1
    a_in.advance_to(t)
    b_in.advance_to(t)
    worker.step_while(lambda: probe.less_than(t), at_least_once=True)
    assert len(calls) == batches_before + 1, calls
    want: Counter[Any] = Counter()
    for (k, x), m in lefts.items():
        for (k2, y), n in rights.items():
            if k == k2:
                want[(k, (x, y))] += m * n
    got = Counter(dict(cap.at(t - 1)))
    assert got == want


# ---- the capture of many small batches ---------------------------------------------------------


def test_capture_joins_small_batches_like_a_binary_counter() -> None:
    """Thousands of one-time rounds leave a capture with a few parts of decreasing size, and
    the updates and collections it reads back are those of a from-scratch count."""
    import ddflow.io.output as output_mod

    worker = dd.Worker()
    inp, coll = worker.new_collection()
    cap = coll.capture()
    ref: Counter[int] = Counter()
    rng = np.random.default_rng(8)
    sizes = []
    for t in range(3000):
        for x in rng.integers(0, 50, 3).tolist():
            inp.update(x, 1)
            ref[x] += 1
        inp.advance_to(t + 1)
        worker.run()
        sizes.append(len(cap.parts))
        if t == 1500:  # (reading consolidates; capturing goes on after)
            assert cap.at(t) == {k: c for k, c in ref.items() if c}
    assert max(sizes) <= output_mod.CAPTURE_PARTS + 16
    chunks = [len(p) for p in cap.parts[: cap._chunks]]
    assert chunks == sorted(chunks, reverse=True) and len(chunks) <= 16
    assert cap.at(2999) == dict(ref)
    assert sum(d for _, t, d in cap.updates() if t <= 10) == 33
