"""``count_total`` over a shared arrangement (``arrange_by_self().count_total()``) and its
kept key totals: the counts before a batch read from per-key totals the operator keeps
(``KeyTotals``, a cache of the trace) instead of summed from the trace.

Each case runs one random change stream three ways: against counts computed here from
scratch (a ``Counter`` per time), and with the totals not kept (the trace read, the path the
totals stand in for), which must give the very same output updates. The streams have
several times per batch (so several rows per key), cancelling updates, int and tuple
diffs, one int key column (``DenseTotals``), two (``DictTotals``), and keys too spread out
to be kept (the trace is read from the first batch on); a case checks which form ran.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

import ddflow as dd
from ddflow.core.errors import OperatorError
from ddflow.operators.count_total import CountTotal, DenseTotals, DictTotals, KeyTotals


def _stream(seed: int, keys: list[Any], rounds: int = 30) -> list[list[tuple[int, Any, int]]]:
    """Per round, ``(time offset, key, diff)`` changes at a few times; some rounds hold
    changes that cancel, some retract whole keys."""
    rng = np.random.default_rng(seed)
    current: Counter[Any] = Counter()
    out = []
    for r in range(rounds):
        changes = []
        size = int(rng.choice([1, 3, 40, 300]))
        for _ in range(size):
            k = keys[int(rng.integers(0, len(keys)))]
            d = int(rng.choice([-1, 1, 1, 2])) if current[k] > 0 else 1
            off = int(rng.integers(0, 3))
            changes.append((off, k, d))
            current[k] += d
        if r % 4 == 3:  # updates that cancel within the round
            k = keys[0]
            changes += [(1, k, 5), (1, k, -5), (0, k, 2), (2, k, -2)]
        if r % 9 == 8:  # a key retracted to zero
            k = keys[-1]
            if current[k] > 0:
                changes.append((2, k, -current[k]))
                current[k] = 0
        out.append(changes)
    return out


def _run(
    stream: list[list[tuple[int, Any, int]]], mode: str, tuple_diffs: bool
) -> tuple[list[Any], dict[int, dict[Any, Any]], Any]:
    """Feed ``stream`` (round ``r`` at times ``3r + offset``) through ``count_total`` /
    ``distinct_total`` / ``threshold_total``; the output updates, the accumulated output
    at every time, and the count operator's kept totals at the end."""
    worker = dd.Worker()
    inp, coll = worker.new_collection()
    if tuple_diffs:
        coll = coll.explode(lambda x: [(x, (1, 7 * _v(x) - 3))])
    if mode == "count":
        out = coll.arrange_by_self().count_total()
    elif mode == "distinct":
        out = coll.arrange_by_self().distinct_total()
    else:
        out = coll.arrange_by_self().threshold_total(
            lambda c: (c if isinstance(c, int) else c[0]) ** 2
        )
    op = out.stream.producer
    assert isinstance(op, CountTotal)
    cap = out.capture()
    probe = out.probe()
    at: dict[int, dict[Any, Any]] = {}
    for r, changes in enumerate(stream):
        for off, k, d in changes:
            inp.update_at(k, 3 * r + off, d)
        inp.advance_to(3 * r + 3)
        worker.step_while(lambda r=r: probe.less_than(3 * r + 3), at_least_once=True)
        for t in range(3 * r, 3 * r + 3):
            at[t] = dict(cap.at(t))
    return sorted(cap.updates(), key=repr), at, op.totals


def _v(x: Any) -> int:
    return x if isinstance(x, int) else x[0] + 2 * x[1]


def _reference(
    stream: list[list[tuple[int, Any, int]]], mode: str, tuple_diffs: bool
) -> dict[int, dict[Any, Any]]:
    counts: Counter[Any] = Counter()
    sums: Counter[Any] = Counter()
    out = {}
    for r, changes in enumerate(stream):
        for t in range(3):
            for off, k, d in changes:
                if off == t:
                    counts[k] += d
                    sums[k] += d * (7 * _v(k) - 3)
            live = {k: c for k, c in counts.items() if c or (tuple_diffs and sums[k])}
            if mode == "count":
                acc = {(k, (c, sums[k]) if tuple_diffs else c): 1 for k, c in live.items()}
            elif mode == "distinct":
                acc = {k: 1 for k in live}
            else:
                acc = {k: c * c for k, c in live.items() if c * c}
            out[3 * r + t] = acc
    return out


CASES = {
    "dense": (list(range(50, 90)), DenseTotals),
    "pairs": ([(a, b) for a in range(3) for b in range(-2, 4)], DictTotals),
    "spread": ([i * 10**12 for i in range(40)], bool),  # (not kept: ``totals`` is False)
}


@pytest.mark.parametrize("tuple_diffs", [False, True])
@pytest.mark.parametrize("mode", ["count", "distinct", "threshold"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_kept_totals_match_the_trace_and_a_reference(
    case: str, mode: str, tuple_diffs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts with kept totals equal a from-scratch count and the trace-reading path."""
    keys, form = CASES[case]
    stream = _stream(len(keys) + len(mode) + tuple_diffs, keys)
    updates, at, totals = _run(stream, mode, tuple_diffs)
    assert type(totals) is form
    assert at == _reference(stream, mode, tuple_diffs)
    with monkeypatch.context() as m:
        m.setattr(KeyTotals, "make", staticmethod(lambda *a: None))
        plain_updates, plain_at, plain_totals = _run(stream, mode, tuple_diffs)
    assert plain_totals is False
    assert updates == plain_updates
    assert at == plain_at


def test_totals_are_remade_from_the_trace_after_loading_state() -> None:
    """Totals dropped mid-stream (as after loading a checkpoint) are rebuilt from the
    trace, and the counts go on as before."""
    stream = _stream(3, list(range(20)))
    worker = dd.Worker()
    inp, coll = worker.new_collection()
    out = coll.explode(lambda x: [(x % 7, (1, x))]).arrange_by_self().count_total()
    op = out.stream.producer
    assert isinstance(op, CountTotal)
    cap, probe = out.capture(), out.probe()
    for r, changes in enumerate(stream):
        for off, k, d in changes:
            inp.update_at(k, 3 * r + off, d)
        inp.advance_to(3 * r + 3)
        worker.step_while(lambda r=r: probe.less_than(3 * r + 3), at_least_once=True)
        if r % 5 == 2:
            op.load_state(op.state())
            assert op.totals is None
        counts: Counter[int] = Counter()
        sums: Counter[int] = Counter()
        for rr in range(r + 1):
            for _off, k, d in stream[rr]:
                counts[k % 7] += d
                sums[k % 7] += d * k
        want = {(k, (c, sums[k])): 1 for k, c in counts.items() if c or sums[k]}
        assert dict(cap.at(3 * r + 2)) == want
    assert isinstance(op.totals, DenseTotals)


def test_totals_given_up_for_sums_beyond_int64() -> None:
    """A batch whose diffs could take a key's total beyond int64 stops the kept totals; the
    trace path then gives the exact count."""
    worker = dd.Worker()
    inp, coll = worker.new_collection()
    out = coll.explode(lambda x: [(x, 2**62)]).arrange_by_self().count_total()
    op = out.stream.producer
    assert isinstance(op, CountTotal)
    cap, probe = out.capture(), out.probe()
    for t in range(3):
        inp.update(1, 1)
        inp.advance_to(t + 1)
        worker.step_while(lambda t=t: probe.less_than(t + 1), at_least_once=True)
    assert op.totals is False
    assert dict(cap.at(2)) == {(1, 3 * 2**62): 1}


def test_totals_survive_a_run_that_raises() -> None:
    """A threshold function that raises part-way through a run leaves no trace in the
    kept totals: once it stops raising, the counts are those of a run that never failed."""
    fail = [True]

    def f(c: int) -> int:
        if c >= 5 and fail[0]:
            raise ValueError("not yet")
        return c * c

    worker = dd.Worker()
    inp, coll = worker.new_collection()
    out = coll.arrange_by_self().threshold_total(f)
    op = out.stream.producer
    assert isinstance(op, CountTotal)
    cap, probe = out.capture(), out.probe()
    for t in range(6):
        for k in range(40):  # (a batch of 40 keys: the vectorized path)
            inp.update(k, 1 + (k % 3))
        inp.advance_to(t + 1)
        if 1 <= t <= 3:  # (counts reach 5 at time 1)
            with pytest.raises(OperatorError, match="not yet"):
                worker.step_while(lambda t=t: probe.less_than(t + 1), at_least_once=True)
        else:
            worker.step_while(lambda t=t: probe.less_than(t + 1), at_least_once=True)
        if t == 3:
            fail[0] = False
    worker.step_while(lambda: probe.less_than(6), at_least_once=True)
    assert dict(cap.at(5)) == {k: (6 * (1 + k % 3)) ** 2 for k in range(40)}
    assert isinstance(op.totals, DenseTotals)


@pytest.mark.parametrize("tuple_diffs", [False, True])
def test_one_row_per_key_batches_with_dense_totals(
    tuple_diffs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of one time with many keys (the matrix path of dense totals) count like a
    from-scratch count and like the trace path, keys dropping to zero and coming back."""
    rng = np.random.default_rng(11)
    stream = []
    current: Counter[int] = Counter()
    for _ in range(25):
        changes = []
        for k in rng.choice(200, 60, replace=False).tolist():
            d = -current[k] if current[k] and rng.random() < 0.3 else int(rng.integers(1, 4))
            changes.append((0, k, d))
            current[k] += d
        changes += [(0, 5, 7), (0, 5, -7)]  # (cancels within the batch)
        stream.append(changes)
    ran = []  # (only the one-row-per-key path stores a whole matrix of totals)
    original = DenseTotals.store_matrix
    monkeypatch.setattr(
        DenseTotals, "store_matrix", lambda self, *a: ran.append(1) or original(self, *a)
    )
    updates, at, totals = _run(stream, "count", tuple_diffs)
    assert ran and isinstance(totals, DenseTotals)
    assert at == _reference(stream, "count", tuple_diffs)
    monkeypatch.setattr(KeyTotals, "make", staticmethod(lambda *a: None))
    assert _run(stream, "count", tuple_diffs)[:2] == (updates, at)


@pytest.mark.parametrize("mode", ["count", "distinct"])
def test_one_part_tuple_diffs_on_the_short_path(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counts of one-part tuple diffs (counted as ints on the short path) equal a
    from-scratch count, the trace path and the general path."""
    import ddflow.operators.count_total as count_total_mod

    stream = _stream(21, list(range(30)))

    def run() -> tuple[list[Any], dict[int, dict[Any, Any]]]:
        worker = dd.Worker()
        inp, coll = worker.new_collection()
        ex = coll.explode(lambda x: [(x % 9, (x - 10,))])
        arr = ex.arrange_by_self()
        out = arr.count_total() if mode == "count" else arr.distinct_total()
        cap, probe = out.capture(), out.probe()
        at = {}
        for r, changes in enumerate(stream):
            for off, k, d in changes:
                inp.update_at(k, 3 * r + off, d)
            inp.advance_to(3 * r + 3)
            worker.step_while(lambda r=r: probe.less_than(3 * r + 3), at_least_once=True)
            at[3 * r + 2] = dict(cap.at(3 * r + 2))
        return sorted(cap.updates(), key=repr), at

    got = run()
    for r, at in got[1].items():
        sums: Counter[int] = Counter()
        for rr in range(r // 3 + 1):
            for _off, k, d in stream[rr]:
                sums[k % 9] += d * (k - 10)
        live = {k: s for k, s in sums.items() if s}
        assert at == (
            {(k, (s,)): 1 for k, s in live.items()} if mode == "count" else dict.fromkeys(live, 1)
        )
    with monkeypatch.context() as m:
        m.setattr(KeyTotals, "make", staticmethod(lambda *a: None))
        assert run() == got
    with monkeypatch.context() as m:
        m.setattr(count_total_mod, "SMALL_ROWS", 0)
        assert run() == got
