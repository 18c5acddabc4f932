"""Every reducer's fast path equals its slow reference, at every time that matters.

Each built-in reducer (``ddflow.operators.reducers``) has a vectorized kernel (and, for
reducers of a key's total, a path for totally ordered times) and beside it ``reference``: the
same reducer per key in plain Python. Here both run on the same random inputs, with diffs
+1/-1 that cancel, int and ``Product`` times: their outputs accumulated at every input time,
output time and all their joins must be equal (the model is DD's ``reduce_reference``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.operators import reducers as R
from ddflow.testing import oracle as O
from ddflow.testing.strategies import key_vals, times_for, updates

EXAMPLES = int(os.environ.get("DDFLOW_ORACLE_EXAMPLES", "40"))
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _plus_one_squared(c: Any) -> int:
    return (c + 1) * (c + 1) - 1


def _by_key(c: dd.Collection, r: R.Reducer) -> dd.Collection:
    return c.reduce_core(r)


def _by_self(c: dd.Collection, r: R.Reducer) -> dd.Collection:
    return c.arrange_by_self().reduce_core(r)


def _counted_once(c: dd.Collection, r: R.Reducer) -> dd.Collection:
    return c.distinct().reduce_core(r)  # top_k needs non-negative counts


def _counted(c: dd.Collection, r: R.Reducer) -> dd.Collection:
    # quantiles need non-negative counts; threshold keeps counts above one
    return c.threshold(abs).reduce_core(r)


def _least_weight(c: dd.Collection, r: R.Reducer) -> dd.Collection:
    w = c.explode(lambda kv: [(kv[0], dd.MinSum(kv[1]))])
    return w.arrange_by_self().reduce_core(r).count()  # (MinSum diffs read back as data)


#: name -> (the reducer, how it is applied to the (key, value) input, insert-only input)
CASES: dict[str, tuple[Callable[[], R.Reducer], Callable[..., dd.Collection], bool]] = {
    "min": (R.Min, _by_key, False),
    "max": (R.Max, _by_key, False),
    "top_k": (lambda: R.TopK(2), _counted_once, False),
    "mode": (R.Mode, _counted, False),
    "mode_greatest": (lambda: R.Mode(greatest=True), _counted, False),
    "bit_and": (lambda: R.BitFold("and"), _counted, False),
    "bit_or": (lambda: R.BitFold("or"), _counted, False),
    "bit_xor": (lambda: R.BitFold("xor"), _counted, False),
    "quantile": (lambda: R.Quantile(0.3), _counted, False),
    "quantile_desc": (lambda: R.Quantile(0.75, descending=True), _counted, False),
    "quantile_discrete": (lambda: R.Quantile(0.4, discrete=True), _counted, False),
    "quantile_discrete_desc": (
        lambda: R.Quantile(0.25, discrete=True, descending=True),
        _counted,
        False,
    ),
    "count": (R.Count, _by_self, False),
    "count_of_keys": (R.Count, lambda c, r: _by_self(c.map(lambda kv: kv[0]), r), False),
    "distinct": (R.Distinct, _by_self, False),
    "threshold": (lambda: R.Threshold(_plus_one_squared), _by_self, False),
    "solve_min": (R.SolveMin, _least_weight, True),
}


@pytest.fixture(autouse=True)
def _each_reduce_path(reduce_path: str) -> str:
    """Every test here runs with each way ``reduce`` picks its path: the kernel checked
    alone (``columns``), and beside the per-key path it takes for a few updates."""
    return reduce_path


def _run(case: str, ups: list[tuple[Any, Any, int]], product: bool) -> tuple[list, list]:
    """The fast and the reference output of ``case`` over ``ups`` (fed one time at a time)."""
    make, apply, _ = CASES[case]
    w = dd.Worker()
    s, c = w.new_collection(time=dd.Product(0, 0) if product else 0)
    fast = apply(c, make()).capture()
    slow = apply(c, R.Reference(make())).capture()
    for x, t, d in sorted(ups, key=lambda u: O.flatten_time(u[1])):
        s.update_at(x, t, d)
    s.close()
    w.run()
    return fast.updates(), slow.updates()


@pytest.mark.parametrize("product", [False, True], ids=["int", "product"])
@pytest.mark.parametrize("case", sorted(CASES))
@SETTINGS
@given(data=st.data())
def test_kernel_equals_reference(case: str, product: bool, data: st.DataObject) -> None:
    """A reducer's fast path and its reference agree at every interesting time."""
    times = times_for(product)
    if CASES[case][2]:
        ups = [(x, t, 1) for x, t in data.draw(st.lists(st.tuples(key_vals(), times), max_size=10))]
    else:
        ups = data.draw(updates(key_vals(), times))
    fast, slow = _run(case, ups, product)
    for t in O.interesting_times(ups, fast, slow):
        assert O.accumulate(fast, t) == O.accumulate(slow, t), (
            f"{case} at {t}: kernel {O.accumulate(fast, t)}, reference "
            f"{O.accumulate(slow, t)}\ninputs={ups}"
        )


def _run_stepped(case: str, ups: list[tuple[Any, Any, int]]) -> tuple[list, list]:
    """``_run`` over ``Product`` times, fed and stepped one outer time at a time: each step
    brings one outer time's updates against a history at earlier outer times."""
    make, apply, _ = CASES[case]
    w = dd.Worker()
    s, c = w.new_collection(time=dd.Product(0, 0))
    fast = apply(c, make()).capture()
    slow = apply(c, R.Reference(make()))
    cap = slow.capture()
    probe = slow.probe()
    for a in sorted({t.outer for _x, t, _d in ups}):
        s.advance_to(dd.Product(a, 0))
        for x, t, d in ups:
            if t.outer == a:
                s.update_at(x, t, d)
        s.advance_to(dd.Product(a + 1, 0))
        w.step_while(lambda a=a: probe.less_than(dd.Product(a + 1, 0)))
    s.close()
    w.run()
    return fast.updates(), cap.updates()


@pytest.mark.parametrize("case", sorted(CASES))
@SETTINGS
@given(data=st.data())
def test_kernel_equals_reference_stepped(case: str, data: st.DataObject) -> None:
    """Stepped one outer time at a time (history at earlier outer times, new updates along
    the inner times: after advancing, each key's times form a chain), a reducer's fast path
    and its reference agree at every interesting time."""
    times = times_for(True)
    if CASES[case][2]:
        ups = [(x, t, 1) for x, t in data.draw(st.lists(st.tuples(key_vals(), times), max_size=10))]
    else:
        ups = data.draw(updates(key_vals(), times))
    fast, slow = _run_stepped(case, ups)
    for t in O.interesting_times(ups, fast, slow):
        assert O.accumulate(fast, t) == O.accumulate(slow, t), (
            f"{case} at {t}: kernel {O.accumulate(fast, t)}, reference "
            f"{O.accumulate(slow, t)}\ninputs={ups}"
        )


def _run_in_pairs(case: str, ups: list[tuple[Any, Any, int]]) -> tuple[list, list]:
    """``_run`` over int times, fed and stepped two distinct times at a time (each step
    meets the output of earlier ones)."""
    make, apply, _ = CASES[case]
    w = dd.Worker()
    s, c = w.new_collection()
    fast = apply(c, make()).capture()
    slow = apply(c, R.Reference(make()))
    cap = slow.capture()
    probe = slow.probe()
    ts = sorted({t for _x, t, _d in ups})
    for pair in (ts[i : i + 2] for i in range(0, len(ts), 2)):
        s.advance_to(pair[0])
        for x, tx, d in ups:
            if tx in pair:
                s.update_at(x, tx, d)
        end = pair[-1] + 1
        s.advance_to(end)
        w.step_while(lambda end=end: probe.less_than(end))
    s.close()
    w.run()
    return fast.updates(), cap.updates()


@pytest.mark.parametrize("case", ["min", "top_k", "count", "quantile"])
@SETTINGS
@given(data=st.data())
def test_kernel_equals_reference_far_apart_times(case: str, data: st.DataObject) -> None:
    """With int times up to 2**62 apart (too wide to pack beside a key index), a reducer's
    fast path and its reference agree at every interesting time."""
    times = st.sampled_from([0, 1, 2**40, 2**61, 2**62, 2**62 + 3])
    ups = data.draw(updates(key_vals(), times))
    fast, slow = _run_in_pairs(case, ups)
    for t in O.interesting_times(ups, fast, slow):
        assert O.accumulate(fast, t) == O.accumulate(slow, t), (
            f"{case} at {t}: kernel {O.accumulate(fast, t)}, reference "
            f"{O.accumulate(slow, t)}\ninputs={ups}"
        )


def test_a_new_reducer_is_one_small_class() -> None:
    """A reducer written outside ddflow (the key's distinct values, as a count) runs through
    reduce_core with its reference alone."""

    class DistinctValues(R.Reducer):
        name = "distinct_values"
        vectorized = False

        def reference(self, op: Any, key: Any, inp: Any, current: Any, in_dt: Any) -> Any:
            return [(len(inp), 1)] if inp else []

    w = dd.Worker()
    s, c = w.new_collection()
    cap = c.reduce_core(DistinctValues()).capture()
    for kv in [(1, "a"), (1, "b"), (1, "a"), (2, "c")]:
        s.insert(kv)
    s.close()
    w.run()
    assert cap.at(0) == {(1, 2): 1, (2, 1): 1}
