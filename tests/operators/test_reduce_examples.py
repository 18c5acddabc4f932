"""The exact outputs printed for reduce's output shape and the Sum{value,count} example.

``count`` over four rounds that insert 1, 2, 3 and 4 copies of ``"a"`` and
prints seven updates: each new count arrives with the retraction of the previous one at the
same time. It then shows that summing values through ``explode`` into int diffs loses a
group whose sum is 0, and that the ``Sum{value, count}`` diff keeps it. ``count_total`` must
print exactly the same updates as ``count`` for int times.
"""

from __future__ import annotations

from typing import Any

import pytest

import ddflow as dd

COUNT_ROUNDS_OUTPUT = [
    (("a", 1), 0, 1),
    (("a", 1), 1, -1),
    (("a", 3), 1, 1),
    (("a", 3), 2, -1),
    (("a", 6), 2, 1),
    (("a", 6), 3, -1),
    (("a", 10), 3, 1),
]

SUM_OUTPUT = [(("a", 0), 0, 1), (("b", -1), 1, 1)]

COUNTS = ["count", "count_total"]


def _plain(x: Any) -> Any:
    """Python scalars for numpy scalars, recursively through tuples."""
    if isinstance(x, tuple):
        return tuple(_plain(y) for y in x)
    return x.item() if hasattr(x, "item") and not isinstance(x, (str, bytes)) else x


def _updates(cap: Any) -> list[tuple[Any, Any, Any]]:
    return [(_plain(d), _plain(t), _plain(r)) for d, t, r in cap.updates()]


@pytest.mark.parametrize("op", COUNTS)
def test_count_over_rounds_prints_the_seed_updates(op: str) -> None:
    """Rounds inserting 1,2,3,4 copies of "a" give the seven updates DD prints, in time order."""
    with dd.Worker() as worker:
        inp, coll = worker.new_collection()
        cap = getattr(coll, op)().capture()
        for i in range(1, 5):
            for _ in range(i):
                inp.insert("a")
            inp.advance_to(i)
            inp.flush()
            worker.run()
        assert _updates(cap) == COUNT_ROUNDS_OUTPUT


@pytest.mark.parametrize("op", COUNTS)
def test_count_over_rounds_with_probe_sync(op: str) -> None:
    """DD's sync! loop (step while the probe is behind) gives the same seven updates."""
    with dd.Worker() as worker:
        inp, coll = worker.new_collection()
        counted = getattr(coll, op)()
        cap = counted.capture()
        probe = counted.probe()
        for i in range(1, 5):
            for _ in range(i):
                inp.insert("a")
            inp.advance_to(i)
            inp.flush()
            worker.step_while(lambda: probe.less_than(inp.time()))
        assert _updates(cap) == COUNT_ROUNDS_OUTPUT
        assert cap.at(3) == {("a", 10): 1}


@pytest.mark.parametrize("op", COUNTS)
def test_count_over_rounds_all_at_once(op: str) -> None:
    """Sending all four rounds before running changes nothing in the output updates."""
    with dd.Worker() as worker:
        inp, coll = worker.new_collection()
        cap = getattr(coll, op)().capture()
        for i in range(1, 5):
            for _ in range(i):
                inp.insert("a")
            inp.advance_to(i)
        inp.close()
        worker.run()
        assert _updates(cap) == COUNT_ROUNDS_OUTPUT


def _sum_example(op: str, explode_to: Any) -> list[tuple[Any, Any, Any]]:
    with dd.Worker() as worker:
        inp, coll = worker.new_collection()
        out = getattr(coll.explode(lambda kv: [(kv[0], explode_to(kv[1]))]), op)()
        cap = out.capture()
        inp.update(("a", 1), 1)
        inp.update(("a", -1), 1)
        inp.advance_to(1)
        inp.flush()
        worker.run()
        inp.update(("b", 1), 1)
        inp.update(("b", 2), -1)
        inp.advance_to(2)
        inp.flush()
        worker.run()
        return _updates(cap)


@pytest.mark.parametrize("op", COUNTS)
def test_sum_diff_keeps_zero_sum_groups(op: str) -> None:
    """explode to dd.Sum(v, 1), count, map to (k, sum) gives exactly the two updates DD prints."""
    with dd.Worker() as worker:
        inp, coll = worker.new_collection()
        out = getattr(coll.explode(lambda kv: [(kv[0], dd.Sum(kv[1], 1))]), op)().map(
            lambda kv: (kv[0], kv[1].value)
        )
        cap = out.capture()
        inp.update(("a", 1), 1)
        inp.update(("a", -1), 1)
        inp.advance_to(1)
        inp.flush()
        worker.run()
        inp.update(("b", 1), 1)
        inp.update(("b", 2), -1)
        inp.advance_to(2)
        inp.flush()
        worker.run()
        assert _updates(cap) == SUM_OUTPUT


@pytest.mark.parametrize("op", COUNTS)
def test_sum_diff_count_values(op: str) -> None:
    """Before the map, the counts are Sum(0, 2) for "a" at 0 and Sum(-1, 0) for "b" at 1."""
    got = _sum_example(op, lambda v: dd.Sum(v, 1))
    assert [(k, t, r) for (k, _), t, r in got] == [("a", 0, 1), ("b", 1, 1)]
    sums = [(k, s.value, s.count) for (k, s), _, _ in got]
    assert sums == [("a", 0, 2), ("b", -1, 0)]


@pytest.mark.parametrize("op", COUNTS)
def test_int_diff_loses_zero_sum_group(op: str) -> None:
    """explode to int diffs drops "a" (its sum 0 is a zero diff), as DD's output shows."""
    got = _sum_example(op, lambda v: v)
    assert got == [(("b", -1), 1, 1)]
