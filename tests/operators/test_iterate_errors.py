"""Bad input to loops and monoid reductions: each a clear error, never a hang; the dataflow
is left usable (errors raised before any state changed) or closed with a clear error."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import ddflow as dd
from ddflow import Changes


def _succ(x: Any) -> Any:
    return x + 1


def _divergent(c: dd.Collection, limit: int) -> dd.Collection:
    return c.iterate(lambda x: x.map(_succ).concat(c.enter(x.scope)).distinct(), limit=limit)


def test_iteration_limit_raises_then_the_worker_is_closed() -> None:
    w = dd.Worker()
    inp, c = w.new_collection()
    cap = _divergent(c, 50).capture()
    inp.insert(0)
    inp.advance_to(1)
    t0 = time.perf_counter()
    with pytest.raises(dd.IterationLimitError, match="did not converge within its limit of 50"):
        w.run()
    assert time.perf_counter() - t0 < 30
    with pytest.raises(dd.DataflowClosedError, match="did not converge"):
        w.step()
    assert cap.updates() == []


def test_a_convergent_loop_under_the_limit_is_fine() -> None:
    w = dd.Worker()
    inp, c = w.new_collection()
    out = c.iterate(
        lambda x: x.map(lambda v: min(v + 1, 5)).concat(x).distinct(), limit=20
    ).capture()
    inp.insert(0)
    inp.advance_to(1)
    w.run()
    assert out.at(0) == {0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1}


def test_iteration_limit_must_be_positive() -> None:
    w = dd.Worker()
    _inp, c = w.new_collection()
    with pytest.raises(ValueError, match="positive int"):
        c.iterate(lambda x: x, limit=0)


def _divergent_build(c: dict[str, Any]) -> dict[str, Any]:
    return {"out": _divergent(c["x"], 30)}


def test_iteration_limit_on_two_processes_comes_back_as_worker_error() -> None:
    x = Changes(np.array([0, 1, 2, 3]), np.zeros(4, np.int64), np.ones(4, np.int64))
    t0 = time.perf_counter()
    with pytest.raises(dd.WorkerError, match="IterationLimitError"):
        dd.run_job(_divergent_build, {"x": x}, workers=2)
    assert time.perf_counter() - t0 < 60


def test_minsum_collection_refuses_a_retraction() -> None:
    w = dd.Worker()
    inp, c = w.new_collection()
    d = c.explode(lambda n: [(n, dd.MinSum(n))]).capture()
    inp.insert(3)
    inp.advance_to(1)
    w.run()
    inp.remove(3)
    inp.advance_to(2)
    with pytest.raises(dd.RetractionError, match="cannot take a retraction"):
        w.run()
    # nothing partial was applied: the earlier output is intact; the retraction cannot be
    # taken back out of the dataflow, so the worker is closed with the cause
    assert d.at(0) == {3: dd.MinSum(3)}
    with pytest.raises(dd.DataflowClosedError, match="retraction"):
        w.step()


def test_minsum_input_session_refuses_a_negative_diff() -> None:
    w = dd.Worker()
    inp, c = w.new_collection(diff=dd.MinSum)
    with pytest.raises(dd.DiffTypeError, match="remove"):
        inp.remove(1)


def test_subtraction_free_diffs_cannot_be_subtracted() -> None:
    w = dd.Worker()
    inp, c = w.new_collection(diff=dd.MinSum)
    with pytest.raises(dd.DiffTypeError, match="needs diffs with subtraction"):
        c.negate()
    scope = w.iterative()
    with pytest.raises(dd.DiffTypeError, match="fold_initial"):
        dd.Variable(scope, c.enter(scope))
    w2 = dd.Worker()
    inp, c = w2.new_collection(diff=dd.MinSum)
    c.map(lambda x: (x, x)).reduce(lambda k, vs: [(vs[0][0], 1)]).capture()
    inp.update(1, dd.MinSum(4))
    inp.advance_to(1)
    with pytest.raises(dd.DiffTypeError, match="MinSum is a monoid: use reduce_solve"):
        w2.run()


def test_reduce_solve_min_needs_minsum_diffs() -> None:
    w = dd.Worker()
    inp, c = w.new_collection()
    c.reduce_solve("min").capture()
    inp.insert(1)
    inp.advance_to(1)
    with pytest.raises(dd.DiffTypeError, match="MinSum"):
        w.run()


def test_leave_outside_a_loop() -> None:
    w = dd.Worker()
    _inp, c = w.new_collection()
    with pytest.raises(dd.ScopeError, match="never entered"):
        c.leave()


def test_variable_never_set_then_set() -> None:
    w = dd.Worker()
    inp, c = w.new_collection()
    scope = w.iterative()
    v = dd.Variable(scope, c.enter(scope))
    result = v.map(lambda x: min(x + 1, 3)).concat(v).distinct()
    with pytest.raises(dd.ScopeError, match="never set"):
        w.step()
    v.set(result)  # still buildable: the failed step ran nothing
    out = result.leave().capture()
    inp.insert(0)
    inp.advance_to(1)
    w.run()
    assert out.at(0) == {0: 1, 1: 1, 2: 1, 3: 1}


def test_variable_set_twice() -> None:
    w = dd.Worker()
    _inp, c = w.new_collection()
    scope = w.iterative()
    v = dd.Variable(scope, c.enter(scope))
    v.set(v.distinct())
    with pytest.raises(dd.ScopeError, match="already set"):
        v.set(v.distinct())


def test_collections_of_different_scopes_need_enter() -> None:
    w = dd.Worker()
    _inp, c = w.new_collection()
    with pytest.raises(dd.ScopeError, match="enter"):
        c.iterate(lambda x: x.concat(c))
    scope = w.iterative()
    inner = w.iterative(parent=scope)
    with pytest.raises(dd.ScopeError, match="directly inside"):
        c.enter(inner)
    v = dd.Variable(scope)
    with pytest.raises(dd.ScopeError, match="own scope"):
        v.set(c)
    with pytest.raises(dd.ScopeError, match="loop scope"):
        dd.Variable(w.root)


def test_iterate_body_must_return_a_collection() -> None:
    w = dd.Worker()
    _inp, c = w.new_collection()
    with pytest.raises(TypeError, match="must return a Collection"):
        c.iterate(lambda x: None)  # type: ignore[arg-type,return-value]
