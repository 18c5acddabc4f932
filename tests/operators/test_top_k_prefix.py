"""``top_k`` with totally ordered times reads only the least values of each changed key.

Each trace batch holds a key's rows sorted by value, so the reduce reads the first rows of
the key's run in every batch, takes the values below the first unread row of every batch
it cut short as complete, and reads more only for keys whose complete values do not fill
``k`` places (values that cancel across batches, retractions of the least values). Here the
read is made as short as it can be (one row per run at first) so that every one of those
cases happens, and the output is checked against a from-scratch top-k of the accumulated
input after every time, beside the per-key reference reducer on the same input.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

import ddflow as dd
from ddflow.core.errors import DDError
from ddflow.operators import reduce as reduce_mod
from ddflow.operators import reducers as R
from ddflow.testing import oracle as O


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the runs of the prefix path and the reads that cut a run short."""
    seen: Counter[str] = Counter()
    path = reduce_mod.Reduce.top_k_prefix
    least = reduce_mod.least_rows

    def counted_path(self: Any, *a: Any) -> Any:
        seen["prefix"] += 1
        return path(self, *a)

    def counted_least(*a: Any) -> Any:
        got = least(*a)
        seen["cut"] += bool(len(got[3]))
        seen["reads"] += 1
        return got

    monkeypatch.setattr(reduce_mod.Reduce, "top_k_prefix", counted_path)
    monkeypatch.setattr(reduce_mod, "least_rows", counted_least)
    return seen


def _stream(
    seed: int, keys: int, values: Any, rounds: int, pairs: bool = False
) -> list[list[tuple[Any, int]]]:
    """Rounds of ``((key, value), diff)``: inserts (repeats among them), deletes of rows
    held (the least ones often, so places refill from further down), and rows inserted and
    deleted in one round. Counts never go negative."""
    rng = random.Random(seed)

    def key() -> Any:
        return (rng.randrange(keys), -7) if pairs else rng.randrange(keys)

    held: Counter[Any] = Counter()
    out = []
    for _ in range(rounds):
        ups: list[tuple[Any, int]] = []
        for _ in range(rng.randrange(1, 30)):
            r = (key(), values(rng))
            n = rng.choice([1, 1, 1, 2, 3])
            ups.append((r, n))
            held[r] += n
        live = [r for r, c in held.items() if c > 0]
        rng.shuffle(live)
        if rng.random() < 0.5:
            live.sort(key=lambda r: r[1])  # the least first: the top-k must refill
        for r in live[: rng.randrange(0, 20)]:
            n = rng.randrange(1, held[r] + 1)
            ups.append((r, -n))
            held[r] -= n
        for _ in range(rng.randrange(0, 3)):
            r = (key(), values(rng))
            ups += [(r, 2), (r, -2)]
        out.append(ups)
    return out


def _run(
    rounds: list[list[tuple[Any, int]]], k: int
) -> tuple[list[Any], list[Any], list[list[tuple[Any, int]]]]:
    w = dd.Worker()
    s, c = w.new_collection()
    fast = c.top_k(k)
    slow = c.reduce_core(R.Reference(R.TopK(k)))
    f_cap, s_cap = fast.capture(), slow.capture()
    probe = fast.probe()
    for t, ups in enumerate(rounds):
        s.advance_to(t)
        for r, d in ups:
            s.update_at(r, t, d)
        s.advance_to(t + 1)
        w.step_while(lambda t=t: probe.less_than(t + 1))
    s.close()
    w.run()
    return f_cap.updates(), s_cap.updates(), rounds


def _check(rounds: list[list[tuple[Any, int]]], fast: list[Any], slow: list[Any], k: int) -> None:
    inp: list[Any] = []
    for t, ups in enumerate(rounds):
        inp += [(r, t, d) for r, d in ups]
        want = O.top_k_by_key(O.accumulate(inp, t), k)
        assert O.accumulate(fast, t) == want, f"top_k({k}) at {t}"
        assert O.accumulate(slow, t) == want


@pytest.mark.parametrize("k", [1, 3, 8])
@pytest.mark.parametrize("seed", range(4))
def test_least_values_read_in_prefixes_equal_a_full_top_k(
    calls: Counter[str], monkeypatch: pytest.MonkeyPatch, seed: int, k: int
) -> None:
    """Keys of many values, read a row per run at first: cut runs, cancelling values,
    refills after the least rows leave, repeats that fill several places."""
    monkeypatch.setattr(reduce_mod.Reduce, "PREFIX_ROWS", 0)
    monkeypatch.setattr(reduce_mod.Reduce, "PREFIX_MIN", 1)
    rounds = _stream(seed, 3, lambda rng: rng.randrange(60), 40)
    fast, slow, rounds = _run(rounds, k)
    _check(rounds, fast, slow, k)
    assert calls["prefix"] >= 30 and calls["cut"] >= 10
    assert calls["reads"] > calls["prefix"]  # some keys were read again, further


def test_values_of_several_columns_and_floats(
    calls: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys of two columns, values of two columns (an int and a float: ties on the first
    broken by the second), with a small k."""
    monkeypatch.setattr(reduce_mod.Reduce, "PREFIX_MIN", 2)

    def value(rng: random.Random) -> tuple[int, float]:
        return (rng.randrange(6), rng.choice([-1.5, 0.25, 2.0, 1e300]))

    rounds = _stream(11, 2, value, 30, pairs=True)
    fast, slow, rounds = _run(rounds, 2)
    _check(rounds, fast, slow, 2)
    assert calls["prefix"] >= 20 and calls["cut"] >= 5


def test_the_default_prefix_on_a_large_key(calls: Counter[str]) -> None:
    """One key of thousands of values, a few changing at a time, with the prefix as it is:
    the changed key is decided from the first rows of each batch."""
    rng = random.Random(5)
    rounds = [[((0, rng.randrange(10**6)), 1) for _ in range(500)] for _ in range(6)]
    rounds += _stream(6, 1, lambda r: r.randrange(10**6), 20)
    fast, slow, rounds = _run(rounds, 5)
    _check(rounds, fast, slow, 5)
    assert calls["cut"] >= 10


def test_a_negative_count_among_the_least_values_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A retraction below the k-th value without its row is reported, as by the full read."""
    monkeypatch.setattr(reduce_mod.Reduce, "PREFIX_ROWS", 0)
    monkeypatch.setattr(reduce_mod.Reduce, "PREFIX_MIN", 1)
    w = dd.Worker()
    s, c = w.new_collection()
    c.top_k(2).capture()
    for v in range(10):
        s.update_at((0, v + 10), 0, 1)
    s.advance_to(1)
    w.step_while(lambda: False)
    w.step()
    s.update_at((0, 3), 1, -1)
    s.advance_to(2)
    with pytest.raises(DDError, match="non-negative"):
        w.run()
