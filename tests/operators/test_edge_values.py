"""Operators fed values at the edges of their columns: diffs whose sums leave int64, the
least int64, ints beyond int64 and above 2**53 sharing a field with floats, frozensets,
collections of different record shapes, keys of types that do not compare.

Each case gives the exact answer (what plain Python dicts and ints compute) or a ``DDError``
naming the operator, and then a later valid step still works: the worker is left usable.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddflow as dd

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Flow:
    """A worker with ``n`` int-time inputs, one output built by ``build`` and its capture."""

    def __init__(self, build: Callable[..., dd.Collection], n: int = 1) -> None:
        self.worker = dd.Worker()
        pairs = [self.worker.new_collection() for _ in range(n)]
        self.inputs = [p[0] for p in pairs]
        self.out = build(*[p[1] for p in pairs]).capture()
        self.time = 0

    def round(self, *updates: list[tuple[Any, int]]) -> dict[Any, Any]:
        """Feeds one list of ``(record, diff)`` per input at the current time, completes that
        time and returns the output collection at it."""
        for inp, ups in zip(self.inputs, updates, strict=False):
            for r, d in ups:
                inp.update(r, d)
        t = self.time
        self.time += 1
        for inp in self.inputs:
            inp.advance_to(self.time)
        self.worker.run()
        return self.out.at(t)


def _same(got: dict[Any, Any], want: dict[Any, Any]) -> None:
    """Equal collections, and equal values exactly (an int stays the int it was)."""
    assert got == want
    assert sorted(map(repr, got)) == sorted(map(repr, want)), (got, want)


# ---- diffs whose sums leave int64 -----------------------------------------------------------


@pytest.mark.parametrize("op", ["count", "count_total"])
def test_count_of_diffs_summing_beyond_int64(op: str) -> None:
    """count / count_total add diffs exactly: 2**62 + 2**62 is 2**63, not -2**63, in one
    batch and over two; retracting comes back into int64."""
    f = Flow(lambda c: getattr(c, op)())
    assert f.round([("a", 2**62), ("a", 2**62)]) == {("a", 2**63): 1}
    assert f.round([("a", 2**62)]) == {("a", 3 * 2**62): 1}
    assert f.round([("a", I64_MAX), ("b", 1)]) == {("a", 3 * 2**62 + I64_MAX): 1, ("b", 1): 1}
    assert f.round([("a", -I64_MAX), ("a", -(2**62)), ("a", -(2**62))]) == {
        ("a", 2**62): 1,
        ("b", 1): 1,
    }
    assert f.round([("a", -(2**62))]) == {("b", 1): 1}


@pytest.mark.parametrize("op", ["distinct", "distinct_total"])
def test_distinct_keeps_a_record_whose_diffs_sum_to_2_to_the_64(op: str) -> None:
    """A record whose diffs sum to 2**64 (zero modulo 2**64) is present."""
    f = Flow(lambda c: getattr(c, op)())
    assert f.round([("a", I64_MAX), ("a", I64_MAX), ("a", 2)]) == {"a": 1}
    assert f.round([("a", I64_MAX)]) == {"a": 1}
    assert f.round([("a", -I64_MAX), ("a", -I64_MAX), ("a", -I64_MAX), ("a", -2)]) == {}
    assert f.round([("a", 1)]) == {"a": 1}


@pytest.mark.parametrize("op", ["threshold", "threshold_total"])
def test_threshold_sees_the_exact_count(op: str) -> None:
    """threshold's function gets the exact count (2**63, not -2**63)."""
    seen: list[int] = []

    def f(n: int) -> int:
        seen.append(n)
        return 1 if n > 0 else 0

    flow = Flow(lambda c: getattr(c, op)(f))
    assert flow.round([("a", 2**62)]) == {"a": 1}
    assert flow.round([("a", 2**62)]) == {"a": 1}
    assert 2**63 in seen and all(n > 0 for n in seen)


def test_threshold_may_return_diffs_beyond_int64() -> None:
    """threshold_total's output diffs are exact ints, also beyond int64."""
    flow = Flow(lambda c: c.threshold_total(lambda n: n * 2**40))
    assert flow.round([("a", 2**30)]) == {"a": 2**70}
    assert flow.round([("a", -(2**30) + 1)]) == {"a": 2**40}


def test_reduce_sums_diffs_beyond_int64() -> None:
    """reduce's logic sees exact diffs and its output keeps an int value beyond int64."""

    def total(_k: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        return [(sum(d for _v, d in vals), 1)]

    f = Flow(lambda c: c.reduce(total))
    _same(f.round([((1, "a"), 2**62)]), {(1, 2**62): 1})
    _same(f.round([((1, "a"), 2**62)]), {(1, 2**63): 1})
    _same(f.round([((1, "b"), 2**62)]), {(1, 3 * 2**62): 1})


@pytest.mark.parametrize("op", ["join", "semijoin"])
def test_join_multiplies_diffs_exactly(op: str) -> None:
    """join's diff products leave int64 exactly: 2**32 * 2**32 is 2**64, not 0."""

    def build(a: dd.Collection, b: dd.Collection) -> dd.Collection:
        return a.join(b) if op == "join" else a.semijoin(b.map(lambda kv: kv[0]))

    f = Flow(build, 2)
    rec = (1, ("x", "y")) if op == "join" else (1, "x")
    assert f.round([((1, "x"), 2**32)], [((1, "y"), 2**32)]) == {rec: 2**64}
    assert f.round([((1, "x"), -(2**62))], [((1, "y"), 2**32)]) == {rec: (2**32 - 2**62) * 2**33}
    assert f.round([((1, "x"), I64_MIN)], []) == {rec: (2**32 - 2**62 + I64_MIN) * 2**33}


def test_a_diff_split_into_int64_parts_adds_up() -> None:
    """A diff beyond int64 is refused with advice to split it; the split parts add up."""
    f = Flow(lambda c: c.count())
    with pytest.raises(dd.DiffTypeError, match="split it"):
        f.inputs[0].update("a", 2**64)
    assert f.round([("a", I64_MAX), ("a", I64_MAX), ("a", 2)]) == {("a", 2**64): 1}


def test_negate_and_antijoin_of_the_least_int64_diff() -> None:
    """Negating the diff -2**63 gives 2**63 (negate, antijoin)."""
    f = Flow(lambda c: c.negate().count())
    assert f.round([("a", I64_MIN)]) == {("a", 2**63): 1}
    g = Flow(lambda a, b: a.antijoin(b).count(), 2)
    assert g.round([((1, "x"), I64_MIN)], [(2, 1)]) == {((1, "x"), I64_MIN): 1}
    assert g.round([], [(1, 1)]) == {}


def test_explode_scales_diffs_exactly() -> None:
    """explode multiplies exploded diffs by the multiplicity exactly."""
    f = Flow(lambda c: c.explode(lambda x: [(x, 2**40)]).count_total())
    assert f.round([("a", 2**40)]) == {("a", 2**80): 1}


@pytest.mark.parametrize("op", ["count_total", "count"])
def test_float_diff_totals_stay_within_their_key(op: str) -> None:
    """Float diff components of different keys added in one batch do not touch each other:
    a large value, an infinity or a NaN of one key leaves the others' totals as they are."""
    f = Flow(lambda c: getattr(c.explode(lambda x: [(x[0], (1, x[1]))]), op)())
    inf = float("inf")
    got = f.round([(("a", 1e20), 1), (("b", 5.0), 1), (("c", inf), 1), (("d", 2.5), 1)])
    assert got == {("a", (1, 1e20)): 1, ("b", (1, 5.0)): 1, ("c", (1, inf)): 1, ("d", (1, 2.5)): 1}
    got = f.round([(("b", 0.25), 1), (("a", 1e20), 1), (("d", 0.5), 1)])
    assert got[("b", (2, 5.25))] == 1 and got[("d", (2, 3.0))] == 1
    assert got[("a", (2, 2e20))] == 1


@pytest.mark.parametrize("op", ["count_total", "count"])
def test_vectorized_explode_may_give_diffs_beyond_int64(op: str) -> None:
    """A vectorized explode may give int diff components beyond int64 as ``object`` columns
    of Python ints (and ``int64`` ones beside them); they add up exactly, and an ``object``
    column of anything but ints is refused."""

    def big(x: np.ndarray) -> Any:
        wide = np.empty(len(x), dtype=object)
        wide[:] = [int(v) * 2**70 for v in x.tolist()]
        return x, (np.ones(len(x), np.int64), wide)

    f = Flow(lambda c: getattr(c.explode(big, vectorized=True, diff=(0, 0)), op)())
    assert f.round([(3, 1), (3, 2), (5, 1)]) == {(3, (3, 9 * 2**70)): 1, (5, (1, 5 * 2**70)): 1}
    got = f.round([(3, -3), (5, 1)])
    assert got == {(5, (2, 10 * 2**70)): 1}
    assert repr(next(iter(got))[1][1]) == repr(10 * 2**70)

    def floats(x: np.ndarray) -> Any:
        bad = np.empty(len(x), dtype=object)
        bad[:] = [0.5] * len(x)
        return x, (np.ones(len(x), np.int64), bad)

    g = Flow(lambda c: c.explode(floats, vectorized=True, diff=(0, 0)).count_total())
    with pytest.raises(dd.DDError):
        g.round([(1, 1)])


@pytest.mark.parametrize("op", ["count_total", "count"])
def test_tuple_diffs_sum_beyond_int64(op: str) -> None:
    """Tuple diffs (an int, a float and a Sum beside them) add their int parts exactly."""
    f = Flow(lambda c: getattr(c.explode(lambda x: [(x[0], (x[1], 0.5, dd.Sum(x[1], 1)))]), op)())
    big = 2**62
    want_1 = {("k", (2 * big, 1.0, dd.Sum(2 * big, 2))): 1}
    assert f.round([(("k", big), 1), (("k", big), 1)]) == want_1
    for i in range(8):  # several history batches (merged as they come)
        f.round([(("k", big), 1), (("j", i), 1)])
    got = f.round([(("k", -big), 1)])
    assert got[("k", (9 * big, 5.5, dd.Sum(9 * big, 11)))] == 1


def test_diffs_beyond_int64_through_many_merges() -> None:
    """Many rounds of 2**62 diffs: trace merges and consolidation stay exact."""
    f = Flow(lambda c: c.count())
    total = 0
    for i in range(40):
        total += 2**62
        got = f.round([("a", 2**62), (str(i % 3), 1)])
        assert got[("a", total)] == 1
    assert f.round([("a", -(2**62))] * 40) == {("0", 14): 1, ("1", 13): 1, ("2", 13): 1}


# ---- the least and the greatest int64 values ------------------------------------------------


@pytest.mark.parametrize("op", ["max_total", "max", "hier"])
def test_max_with_the_least_int64(op: str) -> None:
    """The greatest of {-2**63, 5} is 5 (negating -2**63 overflows; max must not need it)."""

    def build(c: dd.Collection) -> dd.Collection:
        return c.reduce_hierarchical("max") if op == "hier" else getattr(c, op)()

    f = Flow(build)
    assert f.round([((0, I64_MIN), 1), ((0, 5), 1)]) == {(0, 5): 1}
    assert f.round([((0, 5), -1)]) == {(0, I64_MIN): 1}
    assert f.round([((0, I64_MAX), 1), ((1, I64_MIN), 1)]) == {(0, I64_MAX): 1, (1, I64_MIN): 1}


@pytest.mark.parametrize("op", ["min_total", "min", "hier"])
def test_min_with_the_greatest_int64(op: str) -> None:
    """The least of {2**63 - 1, -5} is -5; of {2**63 - 1} alone, 2**63 - 1."""

    def build(c: dd.Collection) -> dd.Collection:
        return c.reduce_hierarchical("min") if op == "hier" else getattr(c, op)()

    f = Flow(build)
    assert f.round([((0, I64_MAX), 1), ((0, -5), 1)]) == {(0, -5): 1}
    assert f.round([((0, -5), -1), ((1, I64_MIN), 1)]) == {(0, I64_MAX): 1, (1, I64_MIN): 1}


# ---- ints above 2**53 sharing a field with floats -------------------------------------------


def test_count_keeps_ints_above_2_to_the_53_apart_from_floats() -> None:
    """2**53 and 2**53 + 1 stay two records when a float shares their field."""
    f = Flow(lambda c: c.count())
    _same(
        f.round([(2**53, 1), (2**53 + 1, 1), (0.5, 1)]),
        {(2**53, 1): 1, (2**53 + 1, 1): 1, (0.5, 1): 1},
    )
    # 2.0**53 == 2**53: one record (either may stand for it)
    assert f.round([(2.0**53, 1)]) == {(2**53, 2): 1, (2**53 + 1, 1): 1, (0.5, 1): 1}


def test_captured_output_never_changes_after_the_fact() -> None:
    """A float arriving later does not rewrite what a capture already returned."""
    f = Flow(lambda c: c)
    first = f.round([(2**53 + 1, 1), (I64_MAX, 1)])
    _same(first, {2**53 + 1: 1, I64_MAX: 1})
    f.round([(0.5, 1)])
    _same(f.out.at(0), first)
    _same(f.out.at(1), {2**53 + 1: 1, I64_MAX: 1, 0.5: 1})


def test_mixed_batch_of_ints_and_floats_is_exact() -> None:
    """One batch of ints above 2**53 and floats keeps every value (records and columns)."""
    f = Flow(lambda c: c.map(lambda x: (x, x)).count())
    _same(
        f.round([(2**53 + 1, 1), (1.5, 1), (2**60 + 1, 1)]),
        {((2**53 + 1, 2**53 + 1), 1): 1, ((1.5, 1.5), 1): 1, ((2**60 + 1, 2**60 + 1), 1): 1},
    )
    g = Flow(lambda c: c.count())
    g.inputs[0].insert_columns(np.array([2**53 + 1, 2**53], dtype=np.int64))
    g.inputs[0].insert_columns(np.array([0.5, 2.0**53]))
    _same(g.round([]), {(2**53 + 1, 1): 1, (2**53, 2): 1, (0.5, 1): 1})


def test_join_and_semijoin_match_equal_values_only() -> None:
    """int 2**53 + 1 does not match float 2.0**53; int 2**53 does (they are equal)."""
    f = Flow(lambda a, b: a.join(b), 2)
    _same(f.round([((2**53 + 1, "i"), 1)], [((2.0**53, "f"), 1), ((0.5, "h"), 1)]), {})
    got = f.round([((2**53, "j"), 1)], [])
    assert got == {(2**53, ("j", "f")): 1}
    g = Flow(lambda a, b: a.semijoin(b), 2)
    _same(g.round([((2**53 + 1, "i"), 1), ((3, "k"), 1)], [(2.0**53, 1), (3.0, 1)]), {(3, "k"): 1})


@pytest.mark.parametrize("op", ["min", "max", "min_total", "max_total", "top_k"])
def test_min_max_top_k_over_mixed_ints_and_floats(op: str) -> None:
    """The least / greatest / two least values of a field mixing ints above 2**53 with
    floats are exact values, also when the float arrives later."""

    def build(c: dd.Collection) -> dd.Collection:
        return c.top_k(2) if op == "top_k" else getattr(c, op)()

    f = Flow(build)
    f.round([((0, 2**53 + 1), 1), ((0, 2**53 + 3), 1)])
    got = f.round([((0, 2.0**53 + 2), 1), ((0, 0.5), 1), ((0, 0.5), -1)])
    want = {
        "min": {(0, 2**53 + 1): 1},
        "max": {(0, 2**53 + 3): 1},
        "top_k": {(0, 2**53 + 1): 1, (0, 2.0**53 + 2): 1},
    }[op.removesuffix("_total")]
    _same(got, want)


def test_reduce_over_mixed_ints_and_floats() -> None:
    """reduce's logic sees the exact values of a field mixing ints and floats."""
    f = Flow(lambda c: c.reduce(lambda _k, vs: [(max(v for v, _d in vs) - 2**53, 1)]))
    f.round([((0, 2**53 + 1), 1)])
    _same(f.round([((0, 0.5), 1)]), {(0, 1): 1})


# ---- least and greatest values beyond int64 -------------------------------------------------


def test_min_total_with_ints_beyond_int64() -> None:
    """min_total over values beyond int64 gives the exact least value."""
    f = Flow(lambda c: c.min_total())
    _same(f.round([((0, 2**70 + 1), 1)]), {(0, 2**70 + 1): 1})
    _same(f.round([((0, 5), 1), ((0, 2**63), 1)]), {(0, 5): 1})
    _same(f.round([((0, 5), -1)]), {(0, 2**63): 1})
    _same(f.round([((0, -(2**64)), 1), ((1, 7), 1)]), {(0, -(2**64)): 1, (1, 7): 1})


def test_max_total_with_ints_beyond_int64() -> None:
    """max_total over values beyond int64 gives the exact greatest value."""
    f = Flow(lambda c: c.max_total())
    _same(f.round([((0, 5), 1)]), {(0, 5): 1})
    _same(f.round([((0, 2**70 + 1), 1), ((0, 2**63), 1)]), {(0, 2**70 + 1): 1})
    _same(f.round([((0, 2**70 + 1), -1)]), {(0, 2**63): 1})


# ---- a field that outgrows int64 ------------------------------------------------------------


@pytest.mark.parametrize("op", ["count", "distinct", "count_total", "distinct_total"])
def test_a_field_that_outgrows_int64(op: str) -> None:
    """(1, 5) then (1, 2**64): the field's column becomes Python ints, counts are exact."""
    f = Flow(lambda c: getattr(c, op)())
    cnt = op.startswith("count")
    _same(f.round([((1, 5), 1)]), {((1, 5), 1): 1} if cnt else {(1, 5): 1})
    _same(
        f.round([((1, 2**64), 1), ((1, 5), 1)]),
        {((1, 5), 2): 1, ((1, 2**64), 1): 1} if cnt else {(1, 5): 1, (1, 2**64): 1},
    )
    _same(
        f.round([((1, 2**64), -1), ((1, -(2**70)), 1)]),
        {((1, 5), 2): 1, ((1, -(2**70)), 1): 1} if cnt else {(1, 5): 1, (1, -(2**70)): 1},
    )


def test_keys_that_outgrow_int64_join() -> None:
    """A key column that outgrows int64 on one side still matches the other side's keys."""
    f = Flow(lambda a, b: a.join(b), 2)
    _same(f.round([((1, "a"), 1)], [((1, "b"), 1)]), {(1, ("a", "b")): 1})
    _same(
        f.round([((2**64, "c"), 1)], [((2**64, "d"), 1), ((1, "e"), 1)]),
        {(1, ("a", "b")): 1, (1, ("a", "e")): 1, (2**64, ("c", "d")): 1},
    )
    _same(
        f.round([((1, "f"), 1)], []),
        {
            (1, ("a", "b")): 1,
            (1, ("a", "e")): 1,
            (1, ("f", "b")): 1,
            (1, ("f", "e")): 1,
            (2**64, ("c", "d")): 1,
        },
    )


# ---- a random walk over edge values, against dicts ------------------------------------------

EDGE = [
    I64_MIN,
    I64_MIN + 1,
    -(2**53) - 1,
    -1,
    0,
    1,
    2**53,
    2**53 + 1,
    I64_MAX - 1,
    I64_MAX,
    2**63,
    2**64,
    -(2**64),
    2**70 + 1,
    0.5,
    -0.5,
    2.0**53,
    2.0**64,
    1e300,
    True,
    False,
]


@st.composite
def edge_stream(draw: st.DrawFn) -> list[list[tuple[Any, int]]]:
    """Rounds of ``((key, value), ±1)`` updates, values from ``EDGE``, retractions of
    present values only (so every count stays positive)."""
    present: Counter[tuple[int, Any]] = Counter()
    rounds = []
    for _ in range(draw(st.integers(1, 6))):
        ups = []
        for _ in range(draw(st.integers(0, 5))):
            live = [r for r, c in present.items() if c > 0]
            if live and draw(st.booleans()):
                r = draw(st.sampled_from(live))
                present[r] -= 1
                ups.append((r, -1))
            else:
                r = (draw(st.integers(0, 1)), draw(st.sampled_from(EDGE)))
                present[r] += 1
                ups.append((r, 1))
        rounds.append(ups)
    return rounds


def _extreme(acc: Counter[tuple[int, Any]], pick: Callable[..., Any]) -> dict[Any, Any]:
    per_key: defaultdict[int, list[Any]] = defaultdict(list)
    for (k, v), c in acc.items():
        if c:
            per_key[k].append(v)
    return {(k, pick(vs)): 1 for k, vs in per_key.items()}


@SETTINGS
@given(
    rounds=edge_stream(),
    op=st.sampled_from(
        ["min", "max", "min_total", "max_total", "count", "count_total", "distinct"]
    ),
)
def test_edge_values_against_dicts(rounds: list[list[tuple[Any, int]]], op: str) -> None:
    """min / max (both forms), count and distinct over values at the int64 and float
    edges equal a recomputation with Python dicts at every time."""
    f = Flow(lambda c: getattr(c, op)())
    acc: Counter[tuple[int, Any]] = Counter()
    for ups in rounds:
        for r, d in ups:
            acc[r] += d
        got = f.round(ups)
        if op.startswith("min"):
            want = _extreme(acc, min)
        elif op.startswith("max"):
            want = _extreme(acc, max)
        elif op.startswith("count"):
            want = {(r, c): 1 for r, c in acc.items() if c}
        else:
            want = {r: 1 for r, c in acc.items() if c}
        assert got == want


@SETTINGS
@given(
    ups=st.lists(
        st.tuples(
            st.tuples(st.integers(0, 1), st.sampled_from(EDGE)),
            st.tuples(st.integers(0, 2), st.integers(0, 2)),
        ),
        max_size=12,
    ),
    op=st.sampled_from(["min", "max", "count", "distinct", "top_k"]),
)
def test_edge_values_under_partially_ordered_times(ups: list[Any], op: str) -> None:
    """The same at Product times (interesting times over history), a round per outer time."""
    w = dd.Worker()
    inp, c = w.new_collection(time=dd.Product(0, 0))
    out = (c.top_k(2) if op == "top_k" else getattr(c, op)()).capture()
    for outer in range(3):
        for r, (a, b) in ups:
            if a == outer:
                inp.update_at(r, dd.Product(a, b), 1)
        inp.advance_to(dd.Product(outer + 1, 0))
        w.run()
    for a in range(3):
        for b in range(3):
            acc: Counter[tuple[int, Any]] = Counter()
            for r, (x, y) in ups:
                if x <= a and y <= b:
                    acc[r] += 1
            if op in ("min", "max"):
                want = _extreme(acc, min if op == "min" else max)
            elif op == "count":
                want = {(r, n): 1 for r, n in acc.items()}
            elif op == "distinct":
                want = {r: 1 for r in acc}
            else:
                want = _top2(acc)
            assert out.at(dd.Product(a, b)) == want


def _top2(acc: Counter[tuple[int, Any]]) -> dict[Any, Any]:
    per_key: defaultdict[int, list[Any]] = defaultdict(list)
    for (k, v), n in acc.items():
        per_key[k].extend([v] * n)
    out: Counter[Any] = Counter()
    for k, vs in per_key.items():
        for v in sorted(vs)[:2]:
            out[(k, v)] += 1
    return dict(out)


# ---- records of different shapes ------------------------------------------------------------


@pytest.mark.parametrize(
    "first,second",
    [
        ([(1, 1)], [((1, 2), 1)]),
        ([((1, 2), 1)], [((1, 2, 3), 1)]),
        ([((1, 2), 1)], [(1, 1)]),
        ([(((1, 2), 3), 1)], [((1, (2, 3)), 1)]),
    ],
)
def test_concat_of_different_shapes(first: list[Any], second: list[Any]) -> None:
    """concat of collections whose records have different shapes raises DataError naming
    concat at the first mismatching batch, which it refuses; later batches of the right
    shape still flow."""
    f = Flow(lambda a, b: a.concat(b, name="both").count(), 2)
    with pytest.raises(dd.DataError, match="'both'.*shape.*refused"):
        f.round(first, second)
    f.worker.run()  # the batch of the right shape goes on
    rec = first[0][0]
    assert f.out.at(0) == {(rec, 1): 1}
    assert f.round(first, []) == {(rec, 2): 1}
    with pytest.raises(dd.DataError, match="'both'"):
        f.round([], second)
    assert f.round(first, []) == {(rec, 3): 1}


def test_concat_of_one_shape_still_works() -> None:
    """concat of collections of one shape (learnt at different times) is unchanged."""
    f = Flow(lambda a, b: a.concat(b).count(), 2)
    assert f.round([((1, 2), 1)], []) == {((1, 2), 1): 1}
    assert f.round([], [((1, 2), 1), ((3, 4), 1)]) == {((1, 2), 2): 1, ((3, 4), 1): 1}


# ---- frozensets -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "record", [frozenset({1}), (frozenset({1, 2}), "a"), ("a", (1, frozenset()))]
)
def test_frozensets_are_refused_at_input(record: Any) -> None:
    """frozensets (ordered by inclusion, not totally) are refused up front with DataError;
    the session goes on."""
    f = Flow(lambda c: c.count())
    with pytest.raises(dd.DataError, match="frozenset"):
        f.inputs[0].insert(record)
    with pytest.raises(dd.DataError, match="frozenset"):
        f.inputs[0].insert_columns(np.array([frozenset({1}), frozenset({2})], dtype=object))
    assert f.round([(("ok", 1), 1)]) == {(("ok", 1), 1): 1}


def test_frozensets_made_by_map_are_refused_by_the_arrangement() -> None:
    """frozensets a map makes are refused where they would be ordered (DataError)."""
    f = Flow(lambda c: c.map(lambda x: frozenset({x})).count())
    with pytest.raises(dd.DataError, match="frozenset"):
        f.round([(1, 1)])


# ---- keys that do not compare ---------------------------------------------------------------


@pytest.mark.parametrize(
    "a,b",
    [
        (("a", 1), (b"a", 2)),
        (((1, 2), 1), (1, 2)),
        ((1, 1), ((1, 2), 2)),
        ((1, 1), ("a", 2)),
        (("a", 1), (1.5, 2)),
        ((((1, 2), 3), 1), ((1, (2, 3)), 2)),
    ],
)
@pytest.mark.parametrize("op", ["join", "semijoin"])
def test_join_of_keys_that_do_not_compare(a: Any, b: Any, op: str) -> None:
    """join / semijoin of keys of types that do not compare (str and bytes, pairs and ints)
    match nothing, as a dict would; later matching keys still join."""

    def build(x: dd.Collection, y: dd.Collection) -> dd.Collection:
        return x.join(y) if op == "join" else x.semijoin(y.map(lambda kv: kv[0]))

    f = Flow(build, 2)
    assert f.round([(a, 1)], [(b, 1)]) == {}
    assert f.round([(a, 1)], [(b, 1)]) == {}
    g = Flow(build, 2)  # the same keys, each side its own type: they do match
    assert g.round([(a, 1)], [((a[0], b[1]), 1)]) == (
        {(a[0], (a[1], b[1])): 1} if op == "join" else {a: 1}
    )
