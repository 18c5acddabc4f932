"""The merge effort of an arrangement: answers never depend on it, merging at once leaves no
merge in progress, and bad values are refused."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import ddflow as dd
from ddflow.trace.batch import TraceBatch


def _degree_run(
    effort: int | None, rounds: list[tuple[np.ndarray, np.ndarray]]
) -> tuple[list[dict[int, int]], list[list[object]]]:
    w = dd.Worker()
    inp, edges = w.new_collection()
    arranged = edges.map(lambda c: c[0], vectorized=True).arrange_by_self(effort=effort)
    degrees = arranged.count_total()
    cap = degrees.capture()
    probe = degrees.probe()
    stacks = []
    for t, (src, diffs) in enumerate(rounds, start=1):
        inp.insert_columns((src, src * 7), diffs=diffs)
        inp.advance_to(t)
        inp.flush()
        w.step_while(lambda t=t: probe.less_than(t))
        stacks.append(list(arranged.op.spine.stack))
    seen = [
        {int(k): int(c) for (k, c), d in cap.at(t - 1).items() if d}
        for t in range(1, len(rounds) + 1)
    ]
    return seen, stacks


def _rounds(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    live: list[int] = []
    out = []
    for r in range(60):
        n = int(rng.integers(1, 3000 if r % 7 else 40_000))
        add = rng.integers(0, 1_000_000, n)
        k = min(len(live), int(rng.integers(0, n + 1)))
        rem = np.array(
            [live.pop(int(rng.integers(0, len(live)))) for _ in range(k)], dtype=np.int64
        )
        live.extend(add.tolist())
        out.append(
            (
                np.concatenate([rem, add]),
                np.concatenate([-np.ones(k, np.int64), np.ones(n, np.int64)]),
            )
        )
    return out


def _reference(rounds: list[tuple[np.ndarray, np.ndarray]]) -> list[dict[int, int]]:
    acc: Counter[int] = Counter()
    out = []
    for src, diffs in rounds:
        for s, d in zip(src.tolist(), diffs.tolist(), strict=True):
            acc[s] += d
        out.append({k: v for k, v in acc.items() if v})
    return out


@pytest.mark.parametrize("effort", [None, 1, 2, 4, 16])
def test_degree_count_same_at_every_effort(effort: int | None) -> None:
    rounds = _rounds(5)
    seen, stacks = _degree_run(effort, rounds)
    assert seen == _reference(rounds)
    if effort is None:  # merged at once: no merge is ever left in progress
        assert all(isinstance(e, TraceBatch) for st in stacks for e in st)


def test_progressive_merging_leaves_merges_in_progress() -> None:
    """(So the at-once check above is not vacuous: at a low effort some merge is carried.)"""
    _, stacks = _degree_run(1, _rounds(5))
    assert any(not isinstance(e, TraceBatch) for st in stacks for e in st)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "4"])
def test_bad_effort_is_refused(bad: object) -> None:
    w = dd.Worker()
    _, c = w.new_collection()
    with pytest.raises(ValueError, match="merge effort"):
        c.arrange_by_self(effort=bad)  # type: ignore[arg-type]


def test_merge_effort_benchmark_runs_small() -> None:
    """The benchmark script at a tiny size: every setting runs, every round is timed."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "merge_effort.py"
    out = subprocess.run(
        [
            sys.executable,
            str(script),
            "--nodes",
            "500",
            "--edges",
            "3000",
            "--batch",
            "50",
            "--rounds",
            "20",
            "--settings",
            "at-once,2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    import json

    doc = json.loads(out.stdout[out.stdout.index("{") :])
    assert [s["setting"] for s in doc["summary"]] == ["at-once", "2"]
    assert all(s["rounds"] == 20 and s["max_ms"] > 0 for s in doc["summary"])


def _pair_rounds(seed: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Rounds of ``(source, value, diff)``: distinct records inserted (rounds of a few to
    40k), then a few rounds deleting some of them again, and inserting others."""
    rng = np.random.default_rng(seed)
    live: list[tuple[int, int]] = []
    out = []
    next_val = 0
    for r in range(60):
        n = int(rng.integers(1, 3000 if r % 7 else 40_000))
        src = rng.integers(0, 1_000_000, n)
        val = np.arange(next_val, next_val + n)
        next_val += n
        k = min(len(live), int(rng.integers(0, n + 1))) if r >= 45 else 0
        gone = [live.pop(int(rng.integers(0, len(live)))) for _ in range(k)]
        live.extend(zip(src.tolist(), val.tolist(), strict=True))
        out.append(
            (
                np.concatenate([np.array([g[0] for g in gone], np.int64), src]),
                np.concatenate([np.array([g[1] for g in gone], np.int64), val]),
                np.concatenate([-np.ones(k, np.int64), np.ones(n, np.int64)]),
            )
        )
    return out


def _pair_count_run(
    fanin: int, rounds: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> tuple[list[dict[tuple[int, int], int]], list[list[int]]]:
    """Counts of (source, wide value) records in a trace of the given ``fanin`` (rows of
    more than 62 bits: tiered merges go through ``merge_runs``, and through
    ``consolidate`` where a record is in two batches), and the sizes of its batches after
    each round."""
    w = dd.Worker()
    inp, edges = w.new_collection()
    wide = edges.map(lambda c: (c[0], c[0] * (1 << 42) + c[1]), vectorized=True)
    arranged = wide.arrange_by_self(fanin=fanin)
    counts = arranged.count_total()
    cap, probe = counts.capture(), counts.probe()
    sizes = []
    for t, (src, val, diffs) in enumerate(rounds, start=1):
        inp.insert_columns((src, val), diffs=diffs)
        inp.advance_to(t)
        inp.flush()
        w.step_while(lambda t=t: probe.less_than(t))
        sizes.append([len(b) for b in arranged.op.spine.batches()])
    seen = [
        {(int(k[0]), int(k[1])): int(c) for (k, c), d in cap.at(t - 1).items() if d}
        for t in range(1, len(rounds) + 1)
    ]
    return seen, sizes


@pytest.mark.parametrize("fanin", [2, 3, 4, 16])
def test_counts_same_at_every_fanin(fanin: int) -> None:
    """A tiered trace (``fanin`` batches of a size class merged at once) counts as the
    geometric one does, through inserts and deletes that cancel, and after every round
    no class has ``fanin`` batches in the trace's tail of batches of that class or
    smaller (those would have been merged)."""
    rounds = _pair_rounds(7)
    seen, sizes = _pair_count_run(fanin, rounds)
    acc: Counter[tuple[int, int]] = Counter()
    want = []
    for src, val, diffs in rounds:
        for s_, v, d in zip(src.tolist(), val.tolist(), diffs.tolist(), strict=True):
            acc[(s_, s_ * (1 << 42) + v)] += d
        want.append({k: c for k, c in acc.items() if c})
    assert seen == want
    if fanin > 2:

        def size_class(n: int) -> int:
            c = 0
            while n >= fanin ** (c + 1):
                c += 1
            return c

        for sz in sizes:
            classes = [size_class(n) for n in sz]
            for c in set(classes):
                j = len(classes)
                while j > 0 and classes[j - 1] <= c:
                    j -= 1
                assert classes[j:].count(c) < fanin
        assert max(len(sz) for sz in sizes) > 2  # (several batches kept, as tiers do)


@pytest.mark.parametrize("bad", [1, 0, 2.5])
def test_bad_fanin_is_refused(bad: object) -> None:
    """A fanin below 2 (or not an int) is refused when the arrangement is made."""
    w = dd.Worker()
    _, c = w.new_collection()
    with pytest.raises(ValueError, match="fanin"):
        c.arrange_by_self(fanin=bad)  # type: ignore[arg-type]
