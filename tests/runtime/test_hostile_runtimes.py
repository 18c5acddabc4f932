"""Hostile job input on every runtime: each bad log or build raises the ddflow error class the
in-process runtime raises (a worker's error reaches the caller as a ``WorkerError`` that is
also that class; the Spark runtime refuses bad logs in the driver, before any task starts),
never a bare numpy or Python error and never a silently coerced answer; and the runtime runs
the next job with the right answer.

The interactive state machine over one input session (``test_hostile_input.py``) has no
counterpart here: only the in-process runtime has a session to call.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ddflow as dd
from ddflow import Changes


def _z(n: int) -> np.ndarray:
    return np.zeros(n, np.int64)


def _ones(n: int) -> np.ndarray:
    return np.ones(n, np.int64)


def _count(c: dict[str, dd.Collection]) -> dd.Collection:
    return c["x"].count()


def _raises_at(bad: int) -> Callable[[dict[str, dd.Collection]], dd.Collection]:
    def build(c: dict[str, dd.Collection]) -> dd.Collection:
        def f(x: int) -> int:
            if x == bad:
                raise ValueError(f"bad record {x}")
            return x

        return c["x"].map(f, name="checker").count()

    return build


def _shape_changes(c: dict[str, dd.Collection]) -> dd.Collection:
    return c["x"].map(lambda x: (x,) if x < 2 else (x, x)).count()


def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


#: name -> (build, inputs, the error class every runtime must raise, text it must name)
CASES: dict[str, tuple[Any, dict[str, Changes], type[dd.DDError], str]] = {
    "nan in data": (
        _count,
        {"x": Changes(np.array([1.0, np.nan]), _z(2), _ones(2))},
        dd.DataError,
        "NaN",
    ),
    "float diffs": (
        _count,
        {"x": Changes(np.arange(2), _z(2), np.array([0.5, 1.0]))},
        dd.DiffTypeError,
        "integer",
    ),
    "bool diffs": (
        _count,
        {"x": Changes(np.arange(2), _z(2), np.array([True, False]))},
        dd.DiffTypeError,
        "integer",
    ),
    "diffs beyond int64 as objects": (
        _count,
        {"x": Changes(np.arange(2), _z(2), _objects([2**70, 1]))},
        dd.DiffTypeError,
        "integer",
    ),
    "unsigned diffs beyond int64": (
        _count,
        {"x": Changes(np.arange(2), _z(2), np.array([2**63, 1], dtype=np.uint64))},
        dd.DiffTypeError,
        "int64",
    ),
    "negative times": (
        _count,
        {"x": Changes(np.arange(2), np.array([0, -1]), _ones(2))},
        dd.TimeError,
        "before",
    ),
    "float times": (
        _count,
        {"x": Changes(np.arange(2), np.array([0.0, 1.5]), _ones(2))},
        dd.TimeError,
        "integer",
    ),
    "numbers and strings in one field": (
        _count,
        {"x": Changes(_objects([1, "a"]), _z(2), _ones(2))},
        dd.DataError,
        "mixes field types|mixed types",
    ),
    "unhashable values": (
        _count,
        {"x": Changes(_objects([[1], [2]]), _z(2), _ones(2))},
        dd.DataError,
        "hashed",
    ),
    "a user function raises": (
        _raises_at(3),
        {"x": Changes(np.arange(5), _z(5), _ones(5))},
        dd.OperatorError,
        "checker",
    ),
    "a user function raises past the first rows": (
        _raises_at(299),
        {"x": Changes(np.arange(300), _z(300), _ones(300))},
        dd.OperatorError,
        "checker",
    ),
    "records change shape": (
        _shape_changes,
        {"x": Changes(np.arange(4), _z(4), _ones(4))},
        dd.DataError,
        "shape",
    ),
    "an input the job lacks": (
        _count,
        {"y": Changes(np.arange(2), _z(2), _ones(2))},
        dd.UnknownInputError,
        "'x'",
    ),
    "build returns no collection": (
        lambda c: {"a": 3},
        {"x": Changes(np.arange(2), _z(2), _ones(2))},
        dd.DataError,
        "Collections",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_job_input(runtime: Any, case: str) -> None:
    """The bad job raises the in-process error class (naming the problem) on every runtime,
    and the runtime then runs a good job right."""
    build, inputs, error, text = CASES[case]
    with pytest.raises(error, match=text) as info:
        runtime.run(build, inputs)
    if runtime.name == "processes":  # a worker's error, with its traceback
        assert isinstance(info.value, dd.WorkerError)
        assert info.match(text) and "Traceback" in info.value.traceback_text
    good = runtime.run(_count, {"x": Changes(np.array([5, 5, 6]), _z(3), _ones(3))})
    assert good["output"].at(0) == {(5, 2): 1, (6, 1): 1}


@pytest.mark.parametrize(
    "data, times, diffs",
    [
        (np.arange(3), _z(2), _ones(2)),
        ((np.arange(2), np.arange(3)), _z(2), _ones(2)),
        (np.arange(2), _z(2), _ones(3)),
        (np.arange(2), np.zeros((2, 1, 1), np.int64), _ones(2)),
    ],
    ids=["data", "second field", "diffs", "3-d times"],
)
def test_changes_of_unequal_lengths_are_refused(data: Any, times: Any, diffs: Any) -> None:
    """A log whose columns disagree on its length is refused when it is made (it used to be
    cut to its times' length without a word)."""
    with pytest.raises(dd.DataError, match="Changes"):
        Changes(data, times, diffs)


def test_worker_error_is_also_the_workers_error_class() -> None:
    """An error a worker process raised is caught by its own class and as a WorkerError,
    carries the worker's index and traceback, and names the problem in its message."""
    log = Changes(np.array([1.0, 2.0, np.nan, 4.0]), _z(4), _ones(4))
    with pytest.raises(dd.DataError) as info:
        dd.run_job(_count, {"x": log}, workers=2, timeout=60)
    err = info.value
    assert isinstance(err, dd.WorkerError)
    assert err.worker in (0, 1)
    assert "NaN" in str(err) and "Traceback" in err.traceback_text
    again = pickle.loads(pickle.dumps(err))  # e.g. sent on by a driver
    assert type(again) is type(err) and str(again) == str(err) and again.worker == err.worker


def test_a_non_ddflow_error_stays_a_plain_worker_error() -> None:
    """A worker failing with anything but a ddflow error is reported as a WorkerError only
    (no class of the worker's error is made up)."""

    def build(c: dict[str, dd.Collection]) -> dd.Collection:
        raise LookupError("the build itself failed")

    with pytest.raises(dd.WorkerError) as info:
        dd.run_job(build, {"x": Changes(np.arange(4), _z(4), _ones(4))}, workers=2, timeout=60)
    assert type(info.value) is dd.WorkerError
    assert type(pickle.loads(pickle.dumps(info.value))) is dd.WorkerError
    assert "LookupError: the build itself failed" in info.value.traceback_text
