"""``count_total`` / ``distinct_total`` / ``threshold_total`` of a collection arranged for them
alone (``CountTotalPrivate``): no trace, each key's total kept as the operator's state.

The properties feed random change streams (updates that cancel, one or several times per
round, rounds left incomplete so a batch spans several, keys whose count drops to zero and
comes back) through the private path and check its output at every time against
``ddflow.testing.oracle``, and update for update against the same count through a shared
arrangement (``arrange_by_self().count_total()``, which reads a trace). Keys: dense ints,
spread ints, pairs and six-column rows of ints, strings, ``(str, int)`` tuples, floats.
Diffs: ints (also near int64's ends, with sums beyond it), pairs, six-part tuples, ``Sum``,
float parts, a user semigroup. The other tests cover a checkpoint written and restored
mid-stream, several worker processes, the form the totals take and their widening to the
general form, a run that raises, and that no trace (no arrangement, no spine) exists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.core.diff import Sum
from ddflow.core.errors import OperatorError
from ddflow.operators.arrange import Arrange
from ddflow.operators.count_total import (
    CountTotal,
    CountTotalPrivate,
    DenseTotals,
    DictTotals,
    KeyTotals,
    SortedTotals,
)
from ddflow.testing import oracle as O

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
T = 3  # times per round: round r holds times 3r, 3r + 1, 3r + 2
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True, order=True)
class Acc:
    """A user semigroup diff (with a negation): pairs of ints added componentwise."""

    a: int
    b: int

    def plus(self, other: Acc) -> Acc:
        return Acc(self.a + other.a, self.b + other.b)

    def is_zero(self) -> bool:
        return self.a == 0 and self.b == 0

    def negate(self) -> Acc:
        return Acc(-self.a, -self.b)


KEYS: dict[str, list[Any]] = {
    "dense": list(range(12)),
    "sparse": list(range(-4000, 4000, 331)),  # (dense totals, keys spread: grouped by scratch)
    "spread": [i * 10**15 - 7 for i in range(-4, 8)],
    "pairs": [(a, b) for a in range(3) for b in range(-1, 3)],
    "wide": [(a, b, 7, a * b, -a, b % 2) for a in range(3) for b in range(4)],
    "strings": ["", "a", "ab", "b", "ba", "z", "é", "zz"],
    "mixed": [("a", 1), ("a", 2), ("b", -1), ("", 0), ("é", 5)],
    "floats": [-1.5, 0.0, 0.25, 2.0, 3.5, 1e300, -(2.0**60)],
}

EDGE = (2**62, -(2**62), I64_MAX, I64_MIN + 1, 2**40, -3, 1)

#: diff kind -> the diff an input record ``(key_id, v)`` explodes to (None: no explode, the
#: record's own int diff is counted)
DIFFS: dict[str, Callable[[int], Any] | None] = {
    "one": None,
    "int": lambda v: v - 2,
    "edge": lambda v: EDGE[v % len(EDGE)],
    "pair": lambda v: (v - 1, 1),
    "six": lambda v: (1, v, -v, v * v, 3, v - 2),
    "sum": lambda v: Sum(v - 1, 1),
    "float": lambda v: ((v - 2) * 0.5, 1),
    "semigroup": lambda v: Acc(v - 1, 1),
}


def _num(c: Any) -> int:
    """An int read off a count of any diff kind (for threshold functions)."""
    if isinstance(c, Sum):  # (as the oracle's tuple for it)
        return int(2 * c.value)
    if isinstance(c, Acc):
        return c.a
    if isinstance(c, tuple):
        return int(2 * c[0])
    return int(c)


def thresh(c: Any) -> int:
    """A threshold function: -1, 0 or 1 by the count."""
    return _num(c) % 3 - 1


def _plain(x: Any) -> Any:
    """Sum values as tuples (the oracle adds tuples, not ``Sum``), recursively; numpy
    scalars as Python's."""
    if isinstance(x, Sum):
        return (x.value, x.count)
    if isinstance(x, tuple):
        return tuple(_plain(y) for y in x)
    if isinstance(x, np.generic):
        return x.item()
    return x


def oracle_diff(kind: str) -> Callable[[int], Any] | None:
    """The diff function in the oracle's terms (``Sum`` as a tuple)."""
    f = DIFFS[kind]
    if f is None or kind != "sum":
        return f
    return lambda v: _plain(f(v))  # type: ignore[misc]


def build(
    keys: list[Any], kind: str, mode: str, shared: bool
) -> Callable[[dd.Collection], dd.Collection]:
    """The dataflow under test: input records ``(key_id, v)`` -> keys with diffs of ``kind``
    -> the count in ``mode``, through a private or a shared arrangement."""
    f = DIFFS[kind]

    def make(c: dd.Collection) -> dd.Collection:
        if f is None:
            x = c.map(lambda r: keys[r[0]])
        else:
            x = c.explode(lambda r: [(keys[r[0]], f(r[1]))])
        src: Any = x.arrange_by_self() if shared else x
        if mode == "count":
            return src.count_total()
        if mode == "distinct":
            return src.distinct_total()
        return src.threshold_total(thresh)

    return make


def expected(
    keys: list[Any], kind: str, mode: str, inputs: list[tuple[Any, int, int]], t: int
) -> dict[Any, Any]:
    """The oracle's output at time ``t``."""
    acc = O.accumulate(inputs, t)
    f = oracle_diff(kind)
    x = (
        O.map(acc, lambda r: keys[r[0]])
        if f is None
        else O.explode(acc, lambda r: [(keys[r[0]], f(r[1]))])
    )
    if mode == "count":
        return O.count_total(x)
    if mode == "distinct":
        return O.distinct_total(x)
    return O.threshold_total(x, thresh)


Round = tuple[list[tuple[int, int, int, int]], bool]


@st.composite
def streams(draw: st.DrawFn, n_keys: int) -> list[Round]:
    """Rounds of ``(key_id, v, time offset, diff)`` changes and whether the worker completes
    the round's times after it (if not, the next round's changes join the same batch).
    Each round may hold pairs of changes that cancel and retract a key whole."""
    one_time = draw(st.booleans(), label="one time per round")
    change = st.tuples(
        st.integers(0, n_keys - 1),
        st.integers(0, 4),
        st.just(0) if one_time else st.integers(0, T - 1),
        st.sampled_from((1, 1, -1, 2)),
    )
    rounds = []
    for _ in range(draw(st.integers(1, 7), label="rounds")):
        changes = draw(st.lists(change, max_size=12))
        for k, v, off, d in draw(st.lists(change, max_size=3), label="cancelling"):
            later = off if one_time else draw(st.integers(off, T - 1))
            changes += [(k, v, off, d), (k, v, later, -d)]
        rounds.append((changes, draw(st.booleans()) or one_time))
    rounds[-1] = (rounds[-1][0], True)
    return rounds


def inputs_of(rounds: list[Round]) -> list[tuple[Any, int, int]]:
    """The input updates of a stream, ``((key_id, v), time, diff)``."""
    return [((k, v), T * r + off, d) for r, (ch, _) in enumerate(rounds) for k, v, off, d in ch]


def feed(make: Callable[[dd.Collection], dd.Collection], rounds: list[Round]) -> tuple[Any, Any]:
    """Feed a stream through a fresh worker: the output's capture and the count operator."""
    worker = dd.Worker()
    inp, coll = worker.new_collection()
    out = make(coll)
    cap, probe = out.capture(), out.probe()
    for r, (changes, complete) in enumerate(rounds):
        for k, v, off, d in changes:
            inp.update_at((k, v), T * r + off, d)
        if complete:
            inp.advance_to(T * r + T)
            worker.step_while(lambda r=r: probe.less_than(T * r + T), at_least_once=True)
    return cap, out.stream.producer


def _updates(cap: Any) -> list[Any]:
    return sorted(((_plain(d), t, _plain(r)) for d, t, r in cap.updates()), key=repr)


def check_stream(key_kind: str, kind: str, mode: str, rounds: list[Round]) -> Any:
    """The private count of a stream equals the oracle at every time and the shared count
    update for update; returns the private count operator."""
    keys = KEYS[key_kind]
    cap, op = feed(build(keys, kind, mode, shared=False), rounds)
    assert isinstance(op, CountTotalPrivate)
    inputs = inputs_of(rounds)
    for t in range(T * len(rounds)):
        got = {_plain(k): _plain(v) for k, v in cap.at(t).items()}
        want = expected(keys, kind, mode, inputs, t)
        assert got == want, f"{key_kind}/{kind}/{mode} at {t}: got {got}, want {want}"
        if kind != "float":  # (ints stay ints, exactly; a float part may be -0.0 or 0.0)
            assert sorted(map(repr, got.items())) == sorted(map(repr, want.items()))
    shared_cap, shared_op = feed(build(keys, kind, mode, shared=True), rounds)
    assert isinstance(shared_op, CountTotal)
    assert _updates(cap) == _updates(shared_cap)
    return op


# ---- the laws: equal to the oracle and to the shared path -----------------------------------


@pytest.mark.parametrize("kind", sorted(DIFFS))
@SETTINGS
@given(data=st.data())
def test_private_count_matches_oracle_and_shared_path(kind: str, data: st.DataObject) -> None:
    """For every diff kind, key kind and mode, the trace-free count equals the oracle at every
    time and the shared-arrangement count update for update."""
    key_kind = data.draw(st.sampled_from(sorted(KEYS)), label="keys")
    mode = data.draw(st.sampled_from(["count", "distinct", "threshold"]), label="mode")
    rounds = data.draw(streams(len(KEYS[key_kind])), label="rounds")
    check_stream(key_kind, kind, mode, rounds)


@pytest.mark.parametrize(
    ("key_kind", "kind", "form"),
    [
        ("dense", "one", DenseTotals),
        ("dense", "six", DenseTotals),
        ("sparse", "pair", DenseTotals),
        ("pairs", "pair", DictTotals),
        ("wide", "six", DictTotals),
        ("spread", "int", SortedTotals),
        ("strings", "one", SortedTotals),
        ("mixed", "six", SortedTotals),
        ("floats", "pair", SortedTotals),
        ("dense", "float", SortedTotals),
        ("pairs", "sum", DictTotals),
        ("dense", "semigroup", SortedTotals),
    ],
)
def test_each_form_on_a_long_stream(key_kind: str, kind: str, form: type) -> None:
    """A longer seeded stream per key layout ends in the form its keys and diffs suit, and
    equals the oracle and the shared path at every time."""
    rng = np.random.default_rng(len(key_kind) * 31 + len(kind))
    n = len(KEYS[key_kind])
    rounds: list[Round] = []
    for r in range(30):
        size = int(rng.choice([1, 2, 5, 40]))
        changes = [
            (int(rng.integers(0, n)), int(rng.integers(0, 5)), int(rng.integers(0, T)), d)
            for d in rng.choice([1, 1, -1, 2], size).tolist()
        ]
        changes += [(r % n, 3, 0, 1), (r % n, 3, T - 1, -1)]  # (cancels within the round)
        rounds.append((changes, r % 5 != 3))
    rounds[-1] = (rounds[-1][0], True)
    for mode in ("count", "distinct", "threshold"):
        op = check_stream(key_kind, kind, mode, rounds)
        assert type(op.totals) is form, (mode, type(op.totals))


def test_keys_vanish_and_come_back() -> None:
    """A key whose count returns to zero leaves the output, and returns with the right count
    in every form (one time per round, the one-time paths)."""
    for key_kind in ("dense", "pairs", "strings"):
        keys = KEYS[key_kind]
        rounds: list[Round] = [
            ([(0, 0, 0, 1), (1, 0, 0, 2)], True),
            ([(0, 0, 0, -1)], True),  # key 0 gone
            ([(1, 0, 0, -2), (0, 0, 0, 3)], True),  # key 1 gone, key 0 back at 3
            ([(1, 0, 0, 1), (1, 0, 0, -1)], True),  # cancels: nothing happens
            ([(1, 0, 0, 1)], True),
        ]
        cap, _ = feed(build(keys, "one", "count", shared=False), rounds)
        at = [dict(cap.at(T * r)) for r in range(len(rounds))]
        k0, k1 = keys[0], keys[1]
        assert at == [
            {(k0, 1): 1, (k1, 2): 1},
            {(k1, 2): 1},
            {(k0, 3): 1},
            {(k0, 3): 1},
            {(k0, 3): 1, (k1, 1): 1},
        ]


# ---- int diffs at int64's ends --------------------------------------------------------------


@pytest.mark.parametrize("mode", ["count", "distinct", "threshold"])
@pytest.mark.parametrize("key_kind", ["dense", "pairs", "strings"])
def test_sums_beyond_int64_are_exact(key_kind: str, mode: str) -> None:
    """Counts that leave int64 (and come back) are exact Python ints in every form: the
    compact totals give way to the general form, which widens as the trace path does."""
    keys = KEYS[key_kind]
    big = [(0, 0, 0, 1)] * 3
    rounds: list[Round] = [
        ([(0, 0, 0, 1), (1, 1, 0, 1)], True),
        (big, True),  # 2**62 * 4 for key 0: beyond int64
        ([(0, 0, 0, -1)] * 2, True),
        ([(0, 0, 0, -1), (1, 1, 0, 1)], True),
        ([(0, 0, 0, -1)], True),  # back to zero
        ([(0, 0, 0, 1)], True),
    ]
    op = check_stream(key_kind, "edge", mode, rounds)
    assert isinstance(op.totals, SortedTotals)
    if mode == "count":
        cap, _ = feed(build(keys, "edge", "count", shared=False), rounds)
        got = dict(cap.at(T))
        assert got[(keys[0], 4 * 2**62)] == 1
        assert type(next(iter(got))[1]) is int


def test_int64_edge_diffs_random() -> None:
    """Random streams of diffs at int64's ends through the private count equal the oracle."""
    rng = np.random.default_rng(5)
    for key_kind in ("dense", "pairs", "mixed"):
        n = len(KEYS[key_kind])
        rounds: list[Round] = []
        for _ in range(12):
            ch = [
                (int(rng.integers(0, n)), int(rng.integers(0, 7)), 0, int(rng.choice([1, -1])))
                for _ in range(int(rng.integers(1, 8)))
            ]
            rounds.append((ch, True))
        for mode in ("count", "distinct"):
            check_stream(key_kind, "edge", mode, rounds)


NEAR_53 = (2**53 + 1, 2**53 - 1, 3, -(2**53) - 3, 2**52 + 1)


@pytest.mark.parametrize("mode", ["count", "distinct", "threshold"])
@pytest.mark.parametrize("key_kind", ["dense", "sparse", "pairs", "wide"])
def test_one_time_rounds_with_sums_past_2_to_the_53(key_kind: str, mode: str) -> None:
    """Rounds of one time and many rows whose diffs are near 2**53 (sums a float64 would
    round, within int64) are counted exactly by the one-time paths, which sum in float64
    only where that is exact."""
    rng = np.random.default_rng(len(key_kind) + len(mode))
    rounds: list[Round] = []
    for _ in range(8):
        ch = [
            (int(rng.integers(0, 3)), int(rng.integers(0, 5)), 0, int(rng.choice([1, -1])))
            for _ in range(int(rng.choice([40, 90])))
        ]
        rounds.append((ch, True))

    def near(v: int) -> int:
        return NEAR_53[v]

    DIFFS["near53"] = near
    try:
        op = check_stream(key_kind, "near53", mode, rounds)
    finally:
        del DIFFS["near53"]
    assert type(op.totals) is (DenseTotals if key_kind in ("dense", "sparse") else DictTotals)


# ---- state: checkpoints, runs that raise ------------------------------------------------------


def _stream_rounds(seed: int, n_keys: int, count: int = 24, one_time: bool = False) -> list[Round]:
    """Seeded rounds of 1 to 200 changes (so both the few-row and the vectorized paths run)."""
    rng = np.random.default_rng(seed)
    rounds: list[Round] = []
    for _ in range(count):
        ch = [
            (
                int(rng.integers(0, n_keys)),
                int(rng.integers(0, 5)),
                0 if one_time else int(rng.integers(0, T)),
                int(rng.choice([1, 1, -1])),
            )
            for _ in range(int(rng.choice([1, 5, 30, 60, 200])))
        ]
        rounds.append((ch, True))
    return rounds


@pytest.mark.parametrize(
    ("key_kind", "kind", "form"),
    [
        ("dense", "six", DenseTotals),
        ("sparse", "pair", DenseTotals),
        ("pairs", "pair", DictTotals),
        ("strings", "int", SortedTotals),
        ("dense", "edge", SortedTotals),
    ],
)
def test_checkpoint_round_trip(tmp_path: Any, key_kind: str, kind: str, form: type) -> None:
    """A checkpoint written mid-stream and restored into a new worker gives the same output
    afterwards as the worker that went on (the totals are the whole state)."""
    keys = KEYS[key_kind]
    rounds = _stream_rounds(len(key_kind), len(keys))
    half = len(rounds) // 2
    make = build(keys, kind, "count", shared=False)

    def start() -> tuple[dd.Worker, Any, Any, Any]:
        w = dd.Worker()
        inp, coll = w.new_collection()
        out = make(coll)
        return w, inp, out.capture(), out.probe()

    def run(w: dd.Worker, inp: Any, probe: Any, part: range) -> None:
        for r in part:
            for k, v, off, d in rounds[r][0]:
                inp.update_at((k, v), T * r + off, d)
            inp.advance_to(T * r + T)
            w.step_while(lambda r=r: probe.less_than(T * r + T), at_least_once=True)

    w1, inp1, cap1, probe1 = start()
    run(w1, inp1, probe1, range(half))
    op1 = next(op for op in w1.operators if isinstance(op, CountTotalPrivate))
    assert type(op1.totals) is form or form is SortedTotals
    w1.checkpoint(tmp_path)
    w2, inp2, cap2, probe2 = start()
    w2.restore(tmp_path)
    op2 = next(op for op in w2.operators if isinstance(op, CountTotalPrivate))
    assert type(op2.totals) is type(op1.totals)
    run(w1, inp1, probe1, range(half, len(rounds)))
    run(w2, inp2, probe2, range(half, len(rounds)))
    assert type(op1.totals) is form
    after = range(T * half, T * len(rounds))
    assert [cap2.at(t) for t in after] == [cap1.at(t) for t in after]
    inputs = inputs_of(rounds)
    for t in after:
        want = expected(keys, kind, "count", inputs, t)
        assert {_plain(k): _plain(v) for k, v in cap2.at(t).items()} == want


@pytest.mark.parametrize("form", [DenseTotals, DictTotals, SortedTotals])
def test_totals_state_round_trip(form: type) -> None:
    """``KeyTotals.from_state(t.state())`` counts on exactly as ``t`` does."""
    key_kind = {DenseTotals: "dense", DictTotals: "pairs", SortedTotals: "strings"}[form]
    keys = KEYS[key_kind]
    rounds = _stream_rounds(7, len(keys), count=10)
    _, op = feed(build(keys, "pair", "count", shared=False), rounds)
    assert type(op.totals) is form
    again = KeyTotals.from_state(op.totals.state())
    assert type(again) is form
    assert again.state().keys() == op.totals.state().keys()
    if isinstance(again, SortedTotals):
        assert again.widen() is again
    widened = again.widen()
    keys_held: dict[Any, Any] = {}
    for lvk, lvt in widened.held():
        for k, *v in zip(lvk.tolist(), *lvt, strict=True):
            keys_held[k] = tuple(v)
    want = {}
    for k, c in expected(keys, "pair", "count", inputs_of(rounds), T * len(rounds)):
        key = tuple(k) if isinstance(k, tuple) else k
        want[key] = c
    got = {k: v for k, v in keys_held.items() if any(v)}
    assert got == want


@pytest.mark.parametrize("key_kind", ["dense", "pairs", "strings"])
def test_a_run_that_raises_leaves_the_totals_as_they_were(key_kind: str) -> None:
    """A threshold function that raises part-way leaves every total as it was: once it stops
    raising, the output is that of a run that never failed."""
    fail = [True]
    keys = KEYS[key_kind]

    def f(c: int) -> int:
        if c >= 5 and fail[0]:
            raise ValueError("not yet")
        return c * c

    worker = dd.Worker()
    inp, coll = worker.new_collection()
    out = coll.map(lambda r: keys[r]).threshold_total(f)
    op = out.stream.producer
    assert isinstance(op, CountTotalPrivate)
    cap, probe = out.capture(), out.probe()
    n = len(keys)
    for t in range(6):
        for k in range(n):
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
    assert dict(cap.at(5)) == {keys[k]: (6 * (1 + k % 3)) ** 2 for k in range(n)}


# ---- no trace; the shared path stays ---------------------------------------------------------


def test_the_private_count_keeps_no_trace() -> None:
    """``count_total`` / ``distinct_total`` / ``threshold_total`` on a collection build no
    arrangement: no ``Arrange`` operator, no spine anywhere, the totals the only state."""
    worker = dd.Worker()
    inp, coll = worker.new_collection()
    outs = [
        coll.count_total(),
        coll.distinct_total(),
        coll.threshold_total(lambda c: c),
        coll.map(lambda x: (x % 3, x)).count_total(),
    ]
    caps = [o.capture() for o in outs]
    for t in range(5):
        for x in range(50):
            inp.update(x * (t + 1), 1)
        inp.advance_to(t + 1)
        worker.run()
    assert not any(isinstance(op, Arrange) for op in worker.operators)
    assert all(op.spines() == [] for op in worker.operators)
    for o in outs:
        op = o.stream.producer
        assert isinstance(op, CountTotalPrivate) and op.totals is not None
        assert set(op.state()) == {"held", "totals", "upper"}
    assert all(c.at(4) for c in caps)


def test_a_shared_arrangement_keeps_the_trace_path() -> None:
    """An arrangement the user holds (read by a count and a join) keeps its trace: the count
    over it is the trace-reading ``CountTotal`` and both readers see the same batches."""
    worker = dd.Worker()
    inp, coll = worker.new_collection()
    arr = coll.arrange_by_self()
    counted = arr.count_total()
    joined = coll.map(lambda x: (x, 0)).arrange_by_key().semijoin(arr)
    assert isinstance(counted.stream.producer, CountTotal)
    cap_c, cap_j = counted.capture(), joined.capture()
    for t in range(3):
        inp.update(t, 1)
        inp.update(t + 1, 1)
        inp.advance_to(t + 1)
        worker.run()
    assert arr.op.spine is not None and arr.op.spine.batches()
    assert dict(cap_c.at(2)) == {(0, 1): 1, (1, 2): 1, (2, 2): 1, (3, 1): 1}
    assert dict(cap_j.at(2)) == {(0, 0): 1, (1, 0): 4, (2, 0): 4, (3, 0): 1}  # (diffs multiply)


# ---- forms: which the totals take, and widening to the general form ---------------------------


def _counting() -> tuple[dd.Worker, Any, Any, Any]:
    """A worker counting one collection with ``count_total``: the worker, its input, the
    count's operator (whose totals the tests look at) and a capture of its output."""
    worker = dd.Worker()
    inp, coll = worker.new_collection()
    out = coll.count_total()
    return worker, inp, out.stream.producer, out.capture()


def _count_round(
    worker: dd.Worker,
    inp: Any,
    ks: list[tuple[int, ...]],
    ds: list[int],
    ref: Counter[Any],
    t: int,
    dtypes: tuple[Any, ...] | None = None,
) -> None:
    """Round ``t``: keys ``ks`` (tuples of ints, one column per field, of ``dtypes`` or
    int64) with diffs ``ds`` into ``inp``, and into ``ref``, the expected count of each."""
    cols = tuple(
        np.array(c, dtype=np.int64 if dtypes is None else dtypes[i])
        for i, c in enumerate(zip(*ks, strict=True))
    )
    inp.insert_columns(cols, diffs=np.array(ds, dtype=np.int64))
    for k, d in zip(ks, ds, strict=True):
        ref[k] += d
    inp.advance_to(t + 1)
    worker.run()


def test_dense_totals_widen_when_keys_spread() -> None:
    """Dense totals given keys too far apart become the general form, with every total kept,
    and count on exactly."""
    worker, inp, op, cap = _counting()
    ref: Counter[int] = Counter()
    rng = np.random.default_rng(3)
    for t in range(8):
        keys = rng.integers(0, 50, 40).tolist()
        if t == 5:
            keys += [10**14, -(10**14)]
        if t == 6:
            keys = [k for k in ref if ref[k]][:5]  # (to zero: retracted below)
        for k in keys:
            d = -ref[k] if t == 6 else 1
            inp.update(k, d)
            ref[k] += d
        inp.advance_to(t + 1)
        worker.run()
        assert dict(cap.at(t)) == {(k, c): 1 for k, c in ref.items() if c}
        assert isinstance(op.totals, DenseTotals if t < 5 else SortedTotals)


def test_dense_totals_follow_a_moving_window_of_keys() -> None:
    """Keys that move on (each round counts new, higher keys and counts the oldest ones
    away) keep dense totals of about the window's size, not of every key ever seen, and
    the counts stay exact."""
    worker, inp, op, cap = _counting()
    window, step = 2000, 500
    live: Counter[int] = Counter()
    widths = []
    for t in range(200):
        new = np.arange(t * step, (t + 1) * step, dtype=np.int64)
        old = np.arange((t - window // step) * step, (t - window // step + 1) * step)
        keys = np.concatenate([new, old]) if t >= window // step else new
        diffs = np.concatenate([np.full(len(new), 2), -np.full(len(keys) - len(new), 2)])
        inp.insert_columns(keys, diffs=diffs)
        for k, d in zip(keys.tolist(), diffs.tolist(), strict=True):
            live[k] += d
        inp.advance_to(t + 1)
        worker.run()
        assert isinstance(op.totals, DenseTotals)
        widths.append(op.totals.m.shape[1])
        if t % 50 == 49:
            assert dict(cap.at(t)) == {(k, c): 1 for k, c in live.items() if c}
    assert max(widths) <= 8 * window  # (200 rounds saw 100,000 keys)


@pytest.mark.parametrize("spread", [False, True])
def test_stats_report_the_totals_kept(spread: bool) -> None:
    """``Worker.stats()`` lists a trace-free count with the keys it holds a non-zero total
    for (dense totals, or the general form for keys far apart) and their bytes."""
    worker = dd.Worker()
    inp, coll = worker.new_collection()
    out = coll.count_total(name="kept")
    probe = out.probe()
    keys = np.arange(0, 3000, 3, dtype=np.int64) * (10**12 if spread else 1)
    inp.insert_columns(keys)
    inp.insert_columns(keys[:100], diffs=-np.ones(100, np.int64))  # (back to zero)
    inp.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))
    (entry,) = [s for s in worker.stats() if s["operator"] == "kept"]
    assert entry["updates"] == len(keys) - 100
    assert entry["batches"] == 0 and entry["bytes"] >= 8 * (len(keys) - 100)


def test_general_totals_merge_levels_of_keys_that_arrive_in_order() -> None:
    """Pairs of ints arriving in order (each round's above the last, and a second run
    below the first: levels whose key ranges do not meet, merged without sorting) and
    some counted away again give the exact counts, every level sorted."""
    worker, inp, op, cap = _counting()
    ref: Counter[tuple[int, int]] = Counter()
    for t in range(40):
        up = [(t * 200 + i, i % 7) for i in range(200)]
        down = [(-(t * 200 + i), 3) for i in range(200)] if t % 3 == 0 else []
        gone = [k for k in list(ref)[: 20 if t % 4 == 1 else 0] if ref[k]]
        for k in up + down:
            inp.update(k, 1)
            ref[k] += 1
        for k in gone:
            inp.update(k, -ref[k])
            ref[k] = 0
        inp.advance_to(t + 1)
        worker.run()
        assert dict(cap.at(t)) == {(k, c): 1 for k, c in ref.items() if c}
    assert isinstance(op.totals, SortedTotals)
    for lvk, _ in op.totals.held():
        keys = lvk.tolist()
        assert keys == sorted(keys)


def test_dict_totals_widen_past_their_size() -> None:
    """Dict totals of integer pairs given more keys than a dict holds become the general
    form; the counts go on exactly (pairs as structured keys, searched in sorted levels)."""
    worker, inp, op, cap = _counting()
    ref: Counter[tuple[int, int]] = Counter()
    rng = np.random.default_rng(4)
    for t in range(10):
        n = 200 if t < 4 else 3000
        a = rng.integers(0, 60, n).tolist()
        b = rng.integers(-40, 40, n).tolist()
        ds = rng.choice([1, 1, -1], n).tolist()
        cols = (np.array(a, dtype=np.int64), np.array(b, dtype=np.int64))
        inp.insert_columns(cols, diffs=np.array(ds, dtype=np.int64))
        for x, y, d in zip(a, b, ds, strict=True):
            ref[(x, y)] += d
        inp.advance_to(t + 1)
        worker.run()
        assert dict(cap.at(t)) == {(k, c): 1 for k, c in ref.items() if c}
        assert isinstance(op.totals, DictTotals if t < 4 else SortedTotals)
    assert isinstance(op.totals, SortedTotals)
    assert len(op.totals.levels) <= 14


def test_sorted_levels_stay_few_and_drop_zeros() -> None:
    """The general form over many keys that come and go: a logarithmic number of levels,
    zero totals dropped at merges, and exact counts throughout."""
    worker = dd.Worker()
    inp, coll = worker.new_collection()
    out = coll.map(lambda x: f"k{x}").count_total()
    op = out.stream.producer
    cap = out.capture()
    ref: Counter[str] = Counter()
    rng = np.random.default_rng(6)
    for t in range(40):
        xs = rng.integers(0, 3000, 300).tolist()
        for x in xs:
            k = f"k{x}"
            d = -1 if ref[k] > 0 and x % 2 else 1
            inp.update(x, d)
            ref[k] += d
        inp.advance_to(t + 1)
        worker.run()
        if t % 8 == 7:
            assert dict(cap.at(t)) == {(k, c): 1 for k, c in ref.items() if c}
    totals = op.totals
    assert isinstance(totals, SortedTotals)
    live = sum(1 for c in ref.values() if c)
    assert len(totals) <= 2 * live + 600
    assert len(totals.levels) <= 12


# ---- several workers ---------------------------------------------------------------------------


def _job_build(kind: str, mode: str) -> Callable[[Any], Any]:
    keys = KEYS["pairs"] if kind == "six" else KEYS["dense"]

    def b(inputs: Any) -> Any:
        return build(keys, kind, mode, shared=False)(inputs["x"])

    return b


@pytest.mark.parametrize(
    ("kind", "mode"), [("one", "count"), ("six", "count"), ("pair", "distinct")]
)
def test_several_workers_give_the_same_output(kind: str, mode: str) -> None:
    """The private count on 2 and 3 local worker processes (keys exchanged by hash first)
    gives the in-process output update for update, which equals the oracle."""
    rounds = _stream_rounds(11, 12, count=15)
    inputs = inputs_of(rounds)
    b = _job_build(kind, mode)
    one = dd.run_job(b, {"x": inputs})["output"].updates()
    for workers in (2, 3):
        got = dd.run_job(b, {"x": inputs}, workers=workers)["output"].updates()
        assert got == one
    keys = KEYS["pairs"] if kind == "six" else KEYS["dense"]
    out = dd.run_job(b, {"x": inputs})["output"]
    for t in range(T * len(rounds)):
        got_t = {_plain(k): _plain(v) for k, v in out.at(t).items()}
        assert got_t == expected(keys, kind, mode, inputs, t)


# ---- the one-time paths against the general one ------------------------------------------------


@pytest.mark.parametrize("key_kind", ["dense", "sparse", "pairs", "wide"])
@pytest.mark.parametrize("kind", ["one", "pair", "six"])
def test_one_time_paths_match_the_general_path(
    key_kind: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rounds of one time counted by the one-time paths (rows grouped straight from the
    columns) give the same updates as the general path (consolidated into keyed runs)."""
    keys = KEYS[key_kind]
    rounds = _stream_rounds(2, len(keys), count=20, one_time=True)
    for mode in ("count", "distinct", "threshold"):
        make = build(keys, kind, mode, shared=False)
        fast, _ = feed(make, rounds)
        with monkeypatch.context() as m:
            m.setattr(CountTotalPrivate, "_dense_round", lambda *a: NotImplemented)
            m.setattr(CountTotalPrivate, "_dict_round", lambda *a: NotImplemented)
            slow, op = feed(make, rounds)
        assert type(op.totals) is (DenseTotals if key_kind in ("dense", "sparse") else DictTotals)
        assert _updates(fast) == _updates(slow)


@pytest.mark.parametrize("spread", [False, True])
def test_general_form_pairs_packed_or_not(spread: bool) -> None:
    """Pairs of int columns in the general form are searched as packed int64 keys when their
    ranges fit 62 bits (near int64's ends too) and as structured keys when not; both count
    exactly, keys leaving and coming back."""
    base = I64_MAX - 5000 if not spread else 0
    far = [(I64_MIN + 3, 1), (I64_MAX, -1)] if spread else [(I64_MAX, 7), (I64_MAX - 1, 7)]
    worker, inp, op, cap = _counting()
    ref: Counter[tuple[int, int]] = Counter()
    rng = np.random.default_rng(9)
    for t in range(12):
        ks = [(base + int(a), int(b)) for a, b in zip(*rng.integers(0, 400, (2, 300)), strict=True)]
        ks += far if t % 3 == 0 else []
        ds = [1 if t % 4 != 3 or ref[k] <= 0 else -ref[k] for k in ks]
        cols = tuple(np.array(c, dtype=np.int64) for c in zip(*ks, strict=True))
        inp.insert_columns(cols, diffs=np.array(ds, dtype=np.int64))
        for k, d in zip(ks, ds, strict=True):
            ref[k] += d
        inp.advance_to(t + 1)
        worker.run()
        assert dict(cap.at(t)) == {(k, c): 1 for k, c in ref.items() if c}
    assert isinstance(op.totals, SortedTotals)
    if spread:
        # (the store's packing given up; no level's keys pack on their own either)
        assert op.totals.packing is None and not op.totals.packable
        packed = [lv.packing for lv in op.totals.levels if lv.packing is not None]
        assert packed and all(p is False for p in packed)
    else:
        # (every level one int64 column under the store's packing)
        assert op.totals.packing is not None
        assert all(lv.keys.dtype == np.int64 for lv in op.totals.levels)


@pytest.mark.parametrize("key_kind", ["dense", "pairs", "strings"])
def test_vectorized_threshold_equals_per_count_threshold(key_kind: str) -> None:
    """``threshold_total(f, vectorized=True)`` (f over a column of counts) gives the updates
    of the per-count function, on every form, one time per round or several."""
    keys = KEYS[key_kind]
    rounds = _stream_rounds(4, len(keys), count=12)

    def per_count(c: int) -> int:
        return c * c - 1

    def over_columns(c: np.ndarray) -> np.ndarray:
        assert isinstance(c, np.ndarray)
        return c * c - 1

    def make(vec: bool) -> Callable[[dd.Collection], dd.Collection]:
        f = over_columns if vec else per_count
        return lambda c: c.map(lambda r: keys[r[0]]).threshold_total(f, vectorized=vec)

    got, _ = feed(make(True), rounds)
    want, _ = feed(make(False), rounds)
    assert _updates(got) == _updates(want)
    inputs = inputs_of(rounds)
    for t in range(0, T * len(rounds), 5):
        acc = O.map(O.accumulate(inputs, t), lambda r: keys[r[0]])
        assert dict(got.at(t)) == O.threshold_total(acc, per_count)


@pytest.mark.parametrize(
    "dtypes", [(np.int64, np.int64), (np.int32, np.int16), (np.int64, np.bool_)]
)
def test_packed_pairs_repack_as_their_ranges_grow(dtypes: tuple[Any, Any]) -> None:
    """The general form keeps pairs of int columns packed into one int64 under one packing
    for every level: keys that keep growing upwards and downwards (repacked as their
    ranges outgrow the room left) and keys that come back count exactly; a far key that
    no 62 bits can hold with the rest unpacks the levels for good, still exact; and the
    state of packed totals restores the same keys and totals."""
    worker, inp, op, cap = _counting()
    ref: Counter[tuple[int, int]] = Counter()
    rng = np.random.default_rng(17)
    hi_b = 2 if dtypes[1] is np.bool_ else 100
    info = np.iinfo(dtypes[0])
    states: list[tuple[dict[str, Any], dict[tuple[int, int], int]]] = []
    packings: list[tuple[list[int], list[int]]] = []
    for t in range(24):
        # (the first column spreads up and down by about 1.5x a round; int32 stays in range)
        span = min(int(1.5**t) * 50, info.max // 4)
        a = rng.integers(-span, span, 400)
        b = rng.integers(0, hi_b, 400)
        ks = [(int(x), int(y)) for x, y in zip(a, b, strict=True)]
        if t == 20:
            ks.append((int(info.min) + 1, 0))  # far below everything else
            ks.append((int(info.max), 1))
        ds = [1 if (t + i) % 5 else -1 for i in range(len(ks))]
        _count_round(worker, inp, ks, ds, ref, t, dtypes)
        assert dict(cap.at(t)) == {(k, c): 1 for k, c in ref.items() if c}, t
        totals = op.totals
        if isinstance(totals, SortedTotals) and totals.packing is not None and t < 20:
            pk = totals.packing
            packings.append((list(pk.lows), list(pk.bits)))
            states.append((totals.state(), dict(ref)))
    # (packed from the dict's widening on, and widened as the keys spread)
    assert len(packings) >= 8 and len(set(map(str, packings))) >= 3
    # int32/int16 keys fit 62 bits even at their ends: only 64-bit ones are unpacked
    assert isinstance(op.totals, SortedTotals)
    assert (op.totals.packing is None) == (dtypes[0] is np.int64)
    # restored totals hold what the packed ones did (key -> total, zero totals left out)
    state, want = states[len(states) // 2]
    again = KeyTotals.from_state(state)
    assert isinstance(again, SortedTotals) and again.packing is None
    held = {
        tuple(int(v) for v in k): int(c)
        for keys, tot in again.held()
        for k, c in zip(keys.tolist(), tot.tolist(), strict=True)
        if c
    }
    assert held == {k: c for k, c in want.items() if c}


@pytest.mark.parametrize("weak", [False, True])
def test_unpacked_keys_found_by_hash_count_exactly(
    weak: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys of three int columns too spread for 62 bits are found in the general form's
    levels by a hash of each key, confirmed on the key itself: exact with the real hash
    and with a weak one (the first column alone). Each round's new keys share their first
    columns with every other round's, so with the weak hash a probe's hash matches a key
    of another level that is not it, and merged levels hold equal hashes (searched as
    structured keys instead)."""
    import ddflow.operators.key_totals as kt

    if weak:
        monkeypatch.setattr(kt, "key_hashes", lambda k: k["f0"].astype(np.uint64))
    worker, inp, op, cap = _counting()
    ref: Counter[tuple[int, int, int]] = Counter()
    rng = np.random.default_rng(23)
    big = 2**40
    for t in range(16):
        # (new keys: first columns 0..199 once each, the second spread (no level's keys
        # pack); then keys of earlier rounds again, added to or counted away)
        f1 = rng.integers(-big, big, 200)
        ks = [(i * big, int(f1[i]), t % 3) for i in range(200)]
        if t:
            old = [k for k in ref if ref[k] > 0]
            ks += [old[j] for j in rng.choice(len(old), 150, replace=False)]
        ds = [1 if i < 200 or (t + i) % 3 else -1 for i in range(len(ks))]
        _count_round(worker, inp, ks, ds, ref, t)
        assert dict(cap.at(t)) == {(k, c): 1 for k, c in ref.items() if c}, t
    totals = op.totals
    assert isinstance(totals, SortedTotals) and totals.packing is None
    kinds = {type(lv.hashed).__name__ for lv in totals.levels if len(lv.keys) > 200}
    if weak:  # (a merged level holds first columns of two rounds: equal weak hashes)
        assert "bool" in kinds and "_Hashed" not in kinds
    else:
        assert "_Hashed" in kinds and "bool" not in kinds
