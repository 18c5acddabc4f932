"""``min_total`` / ``max_total``: work per batch bounded by the batch (seed 003), answers
equal to ``min`` / ``max`` (the conformance suite checks both against the oracle)."""

from __future__ import annotations

import numpy as np
import pytest

import ddflow as dd
from ddflow.operators.min_total import MinMaxTotal


def _hot_key_rows_read(rounds: int) -> list[int]:
    """History rows read per round when one key receives 500 new values a round and its
    current minimum is retracted each round."""
    rng = np.random.default_rng(3)
    w = dd.Worker()
    inp, c = w.new_collection()
    out = c.min_total()
    op = next(o for o in w.operators if isinstance(o, MinMaxTotal))
    probe = out.probe()
    present: list[int] = []
    reads = []
    for t in range(rounds):
        vals = rng.integers(0, 1 << 30, 500).tolist()
        if present:
            m = min(present)
            present.remove(m)
            inp.remove((0, m))
        for v in vals:
            inp.insert((0, v))
        present.extend(vals)
        before = op.rows_read
        inp.advance_to(t + 1)
        w.step_while(lambda: probe.less_than(t + 1))
        reads.append(op.rows_read - before)
    return reads


def test_min_total_reads_do_not_grow_with_history() -> None:
    reads = _hot_key_rows_read(60)
    history = 500 * 60
    # the last rounds read about what the first ones did, a tiny part of the key's history
    assert max(reads[-10:]) <= 4 * max(reads[1:11]) + 64
    assert max(reads[-10:]) < history // 20


def test_min_total_rejects_product_times() -> None:
    w = dd.Worker()
    _inp, c = w.new_collection(time=dd.Product(0, 0))
    with pytest.raises(dd.TimeError, match="use min"):
        c.min_total()


def test_max_total_needs_numbers() -> None:
    w = dd.Worker()
    inp, c = w.new_collection()
    c.max_total().capture()
    inp.insert((0, "a"))
    inp.advance_to(1)
    with pytest.raises(dd.DataError, match="numeric"):
        w.run()


def test_min_total_with_string_values_and_retractions() -> None:
    w = dd.Worker()
    inp, c = w.new_collection()
    out = c.min_total().capture()
    for v in ("pear", "apple", "fig"):
        inp.insert((1, v))
    inp.advance_to(1)
    inp.remove((1, "apple"))
    inp.advance_to(2)
    inp.remove((1, "fig"))
    inp.remove((1, "pear"))
    inp.advance_to(3)
    w.run()
    assert out.at(0) == {(1, "apple"): 1}
    assert out.at(1) == {(1, "fig"): 1}
    assert out.at(2) == {}


def test_reduce_hierarchical_rejects_unknown_reductions() -> None:
    w = dd.Worker()
    _inp, c = w.new_collection()
    with pytest.raises(ValueError, match="how must be one of"):
        c.reduce_hierarchical("median")
    with pytest.raises(ValueError, match="buckets"):
        c.reduce_hierarchical("min", buckets=0)
