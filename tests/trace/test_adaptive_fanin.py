"""A trace with ``fanin="auto"``: tiered while it is written and seldom read, geometric again
once reads catch up, and a join over it answers as over a fixed-fanin trace at every time."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import ddflow as dd
from ddflow.trace.spine import Spine

Round = tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


def _rounds(seed: int, n: int = 90, big_stops: bool = False) -> list[Round]:
    """Per round: changes to the big side ``(key, val)`` (every round, inserts and deletes
    of earlier rows; none from round 60 on if ``big_stops``) and to the small side (rounds
    0-2, a quiet stretch, then every round from 60 on)."""
    rng = np.random.default_rng(seed)
    live_big: list[tuple[int, int]] = []
    live_small: list[tuple[int, int]] = []
    out: list[Round] = []

    def changes(live: list[tuple[int, int]], m: int, keys: int) -> tuple[np.ndarray, ...]:
        k = np.full(m, -1, np.int64)
        v = np.zeros(m, np.int64)
        d = np.ones(m, np.int64)
        for i in range(m):
            if live and rng.random() < 0.3:
                k[i], v[i] = live.pop(int(rng.integers(0, len(live))))
                d[i] = -1
            else:
                k[i], v[i] = int(rng.integers(0, keys)), int(rng.integers(0, 5))
                live.append((int(k[i]), int(v[i])))
        return k, v, d

    for r in range(n):
        big = changes(live_big, 0 if big_stops and r >= 60 else int(rng.integers(20, 400)), 300)
        m = int(rng.integers(1, 20)) if r < 3 or r >= 60 else 0
        small = changes(live_small, m, 300)
        out.append((big, small))  # type: ignore[arg-type]
    return out


def _run(fanin: int | str, rounds: list[Round]) -> tuple[list[Counter], list[tuple[int, int]]]:
    """The join's contents after each round, and the big trace's (fanin, batches) then."""
    w = dd.Worker()
    big_in, big = w.new_collection()
    small_in, small = w.new_collection()
    arranged = big.map(lambda r: (r[0], r[1]), vectorized=True).arrange_by_key(fanin=fanin)
    joined = arranged.join(small.map(lambda r: (r[0], r[1]), vectorized=True))
    cap, probe = joined.capture(), joined.probe()
    seen, shape = [], []
    for t, ((bk, bv, bd), (sk, sv, sd)) in enumerate(rounds, start=1):
        if len(bk):
            big_in.insert_columns((bk, bv), diffs=bd)
        if len(sk):
            small_in.insert_columns((sk, sv), diffs=sd)
        big_in.advance_to(t)
        small_in.advance_to(t)
        w.step_while(lambda t=t: probe.less_than(t))
        seen.append(Counter({rec: d for rec, d in cap.at(t - 1).items() if d}))
        spine = arranged.op.spine
        shape.append((spine.fanin, len(spine.batches())))
    return seen, shape


def _reference(rounds: list[Round]) -> list[Counter]:
    big: Counter[tuple[int, int]] = Counter()
    small: Counter[tuple[int, int]] = Counter()
    out = []
    for (bk, bv, bd), (sk, sv, sd) in rounds:
        for k, v, d in zip(bk.tolist(), bv.tolist(), bd.tolist(), strict=True):
            big[(k, v)] += d
        for k, v, d in zip(sk.tolist(), sv.tolist(), sd.tolist(), strict=True):
            small[(k, v)] += d
        acc: Counter = Counter()
        for (k, v), c in big.items():
            for (k2, v2), c2 in small.items():
                if k == k2 and c and c2:
                    acc[(k, (v, v2))] += c * c2
        out.append(Counter({rec: d for rec, d in acc.items() if d}))
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_auto_fanin_joins_as_a_fixed_fanin_and_follows_its_reads(seed: int) -> None:
    """Through a stretch where only the big side changes its trace turns tiered (more
    batches kept), and once the small side changes every round it is geometric again with
    fewer batches; the join equals the from-scratch one after every round either way."""
    rounds = _rounds(seed)
    want = _reference(rounds)
    seen, shape = _run("auto", rounds)
    assert seen == want
    fixed, _ = _run(2, rounds)
    assert fixed == want
    quiet = [f for f, _ in shape[20:60]]
    assert quiet.count(Spine.AUTO_FANIN) >= 25  # tiered from the second window without reads
    busy = shape[75:]
    assert all(f == 2 for f, _ in busy)  # read every round: geometric
    most_tiered = max(n for f, n in shape[20:60] if f == Spine.AUTO_FANIN)
    assert max(n for _, n in busy) < most_tiered


def test_reads_alone_merge_a_tiered_trace_back() -> None:
    """A tiered trace that is no longer written but read again is merged back into
    geometric sizes by the reads themselves (no insert comes to do it)."""
    rounds = _rounds(3, big_stops=True)
    seen, shape = _run("auto", rounds)
    assert seen == _reference(rounds)
    assert shape[59][0] == Spine.AUTO_FANIN
    assert shape[-1][0] == 2
    assert shape[-1][1] < shape[59][1]
    assert shape[-1][1] <= 8  # (geometric sizes: about log2 of rows / batch)


@pytest.mark.parametrize("bad", ["tiered", "AUTO", None])
def test_bad_fanin_names_are_refused(bad: object) -> None:
    """A fanin that is neither an int >= 2 nor "auto" is refused when the arrangement is
    made."""
    w = dd.Worker()
    _, c = w.new_collection()
    with pytest.raises(ValueError, match="fanin"):
        c.arrange_by_self(fanin=bad)  # type: ignore[arg-type]
