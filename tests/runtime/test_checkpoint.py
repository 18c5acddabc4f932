"""Checkpoints: a restored dataflow goes on exactly as an uninterrupted one would.

Each case builds a dataflow, feeds random rounds of +1/-1 updates, checkpoints after a
random round (sometimes several times, incrementally, into one directory), restores into a
freshly built dataflow and feeds both the remaining rounds: every output update of the
restored run must equal the uninterrupted run's, and both must equal a from-scratch answer
computed here with plain Python on the accumulated input at every round.

Damaged checkpoints: truncated or flipped bytes in any file, a missing commit marker, a
checkpoint of another dataflow or of another number of workers are refused with
``CheckpointError`` and leave the worker untouched (it then restores a good checkpoint or runs
from scratch correctly).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ddflow as dd
from ddflow.algorithms import bfs
from ddflow.engine.checkpoint import CheckpointError, latest_checkpoint

Build = Callable[[Any, Any], dict[str, Any]]


# ---- dataflows and their from-scratch answers ----------------------------------------------


def build_counts(edges: Any, nodes: Any) -> dict[str, Any]:
    deg = edges.map(lambda e: e[0]).count_total()
    return {"deg": deg, "hist": deg.map(lambda kc: kc[1]).count_total()}


def build_counts_few(edges: Any, nodes: Any) -> dict[str, Any]:
    # the total-order count kept per record in a dict: its totals go into the checkpoint
    deg = edges.map(lambda e: e[0]).count_total(few=True)
    return {"deg": deg, "hist": deg.map(lambda kc: kc[1]).count_total(few=True)}


def want_counts(edges: Counter, nodes: Counter) -> dict[str, Counter]:
    deg: Counter = Counter()
    for (s, _), m in edges.items():
        deg[s] += m
    deg = Counter({k: v for k, v in deg.items() if v})
    hist: Counter = Counter()
    for c in deg.values():
        hist[c] += 1
    return {
        "deg": Counter({(k, c): 1 for k, c in deg.items()}),
        "hist": Counter({(c, n): 1 for c, n in hist.items() if n}),
    }


def build_join_reduce(edges: Any, nodes: Any) -> dict[str, Any]:
    two = edges.join_map(edges.map(lambda e: (e[0], e[1] * 10)), lambda k, a, b: (k, a + b))
    return {
        "two": two,
        "min": edges.min(),
        "distinct": nodes.distinct(),
        "anti": nodes.map(lambda n: (n, n)).antijoin(edges.map(lambda e: e[0]).distinct()),
    }


def want_join_reduce(edges: Counter, nodes: Counter) -> dict[str, Counter]:
    two: Counter = Counter()
    for (s, a), m in edges.items():
        for (t, b), n in edges.items():
            if s == t:
                two[(s, a + b * 10)] += m * n
    mins: dict[int, int] = {}
    for (s, a), m in edges.items():
        if m > 0:
            mins[s] = min(mins.get(s, a), a)
    srcs = {s for (s, _), m in edges.items() if m > 0}
    anti = Counter()
    for n, m in nodes.items():
        if n not in srcs:
            anti[(n, n)] += m
    return {
        "two": Counter({k: v for k, v in two.items() if v}),
        "min": Counter({(k, v): 1 for k, v in mins.items()}),
        "distinct": Counter({n: 1 for n, m in nodes.items() if m > 0}),
        "anti": Counter({k: v for k, v in anti.items() if v}),
    }


def build_bfs(edges: Any, nodes: Any) -> dict[str, Any]:
    return {"bfs": bfs(edges, nodes.distinct())}


def want_bfs(edges: Counter, nodes: Counter) -> dict[str, Counter]:
    adj: dict[int, set[int]] = {}
    for (s, t), m in edges.items():
        if m > 0:
            adj.setdefault(s, set()).add(t)
    dist = {n: 0 for n, m in nodes.items() if m > 0}
    frontier = list(dist)
    while frontier:
        nxt = []
        for u in frontier:
            for v in sorted(adj.get(u, ())):
                if v not in dist:
                    dist[v] = dist[u] + 1
                    nxt.append(v)
        frontier = nxt
    return {"bfs": Counter({(n, d): 1 for n, d in dist.items()})}


CASES: dict[str, tuple[Build, Callable[[Counter, Counter], dict[str, Counter]]]] = {
    "counts": (build_counts, want_counts),
    "counts_few": (build_counts_few, want_counts),
    "join_reduce": (build_join_reduce, want_join_reduce),
    "bfs": (build_bfs, want_bfs),
}


# ---- driving -----------------------------------------------------------------------------


def rounds_of(seed: int, n_rounds: int, nodes: int = 8) -> list[tuple[list, list]]:
    """Random rounds of edge and node updates: inserts, later retractions, same-round
    cancellations, duplicates (edge multiplicities stay >= 0)."""
    rng = random.Random(seed)
    live: Counter = Counter()
    live_nodes: Counter = Counter()
    out = []
    for _ in range(n_rounds):
        eu, nu = [], []
        for _ in range(rng.randint(0, 12)):
            r = rng.random()
            if r < 0.55 or not live:
                e = (rng.randrange(nodes), rng.randrange(nodes))
                eu.append((e, 1))
                live[e] += 1
            elif r < 0.85:
                e = rng.choice(sorted(live))
                eu.append((e, -1))
                live[e] -= 1
                if not live[e]:
                    del live[e]
            else:  # cancels within the round
                e = (rng.randrange(nodes), rng.randrange(nodes))
                eu += [(e, 1), (e, -1)]
        for _ in range(rng.randint(0, 2)):
            if live_nodes and rng.random() < 0.3:
                n = rng.choice(sorted(live_nodes))
                nu.append((n, -1))
                live_nodes[n] -= 1
                if not live_nodes[n]:
                    del live_nodes[n]
            else:
                n = rng.randrange(nodes)
                nu.append((n, 1))
                live_nodes[n] += 1
        out.append((eu, nu))
    return out


class Run:
    def __init__(self, build: Build) -> None:
        self.w = dd.Worker()
        self.es, edges = self.w.new_collection()
        self.ns, nodes = self.w.new_collection()
        outs = build(edges, nodes)
        self.caps = {k: c.capture() for k, c in outs.items()}
        self.t = 0

    def feed(self, rnd: tuple[list, list]) -> None:
        eu, nu = rnd
        for e, d in eu:
            self.es.update(e, d)
        for n, d in nu:
            self.ns.update(n, d)
        self.t += 1
        self.es.advance_to(self.t)
        self.ns.advance_to(self.t)
        self.w.run()

    def updates(self) -> dict[str, list]:
        return {k: c.updates() for k, c in self.caps.items()}


def accumulate(rounds: list[tuple[list, list]]) -> tuple[Counter, Counter]:
    edges: Counter = Counter()
    nodes: Counter = Counter()
    for eu, nu in rounds:
        for e, d in eu:
            edges[e] += d
        for n, d in nu:
            nodes[n] += d
    return (
        Counter({k: v for k, v in edges.items() if v}),
        Counter({k: v for k, v in nodes.items() if v}),
    )


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("seed", range(6))
def test_restored_run_equals_uninterrupted(case: str, seed: int, tmp_path: Any) -> None:
    build, want = CASES[case]
    rounds = rounds_of(seed, 14)
    rng = random.Random(1000 + seed)
    stops = sorted(rng.sample(range(1, 13), 3))  # checkpoint after these rounds
    path = tmp_path / "ckpt"
    ref = Run(build)
    first = Run(build)
    for r, rnd in enumerate(rounds):
        ref.feed(rnd)
        if r < stops[-1]:
            first.feed(rnd)
        if r + 1 in stops:
            info = first.w.checkpoint(path)
            assert info["seq"] == stops.index(r + 1) + 1
        if r + 1 == stops[-1]:
            break
    for r in range(stops[-1], len(rounds)):
        ref.feed(rounds[r])
    # a new dataflow, restored from the last checkpoint, then the remaining rounds
    resumed = Run(build)
    info = resumed.w.restore(path)
    assert info["seq"] == len(stops)
    resumed.t = stops[-1]
    for r in range(stops[-1], len(rounds)):
        resumed.feed(rounds[r])
    assert resumed.updates() == ref.updates()
    # and both are right at every round
    for r in range(len(rounds)):
        expect = want(*accumulate(rounds[: r + 1]))
        for k, cap in resumed.caps.items():
            got = Counter(cap.at(r))
            assert got == expect[k], (case, seed, r, k)


def test_incremental_checkpoints_write_only_new_batches(tmp_path: Any) -> None:
    w = dd.Worker()
    s, c = w.new_collection()
    cap = c.map(lambda x: (x % 1000, -x)).min().capture()  # 200 k rows in, 1000 out
    s.insert_columns(np.arange(200_000, dtype=np.int64))
    s.advance_to(1)
    w.run()
    first = w.checkpoint(tmp_path)
    assert first["batches_written"] >= 1
    s.insert_columns(np.arange(200_000, 200_100, dtype=np.int64))
    s.advance_to(2)
    w.run()
    second = w.checkpoint(tmp_path)
    assert second["seq"] == first["seq"] + 1
    # the big batches are referred to, not written again
    assert second["bytes_written"] < first["bytes_written"] / 10
    w2 = dd.Worker()
    s2, c2 = w2.new_collection()
    cap2 = c2.map(lambda x: (x % 1000, -x)).min().capture()
    w2.restore(tmp_path)
    assert cap2.updates() == cap.updates()
    s.remove(5)
    s2.remove(5)
    for sess, wk in ((s, w), (s2, w2)):
        sess.advance_to(3)
        wk.run()
    assert cap2.updates() == cap.updates()
    assert cap2.at(0)[(5, -199005)] == 1 and cap2.at(1)[(5, -200005)] == 1
    assert cap2.at(3)[(5, -200005)] == 1 and cap2.at(3)[(99, -200099)] == 1
    assert cap2.at(3)[(999, -199999)] == 1


def test_product_times_restore(tmp_path: Any) -> None:
    def make() -> tuple[Any, Any, Any]:
        w = dd.Worker()
        s, c = w.new_collection(time=dd.Product(0, 0))
        return (
            w,
            s,
            c.map(lambda x: (x % 3, x))
            .reduce(lambda k, vals: [(sum(v * m for v, m in vals), 1)])
            .capture(),
        )

    w, s, cap = make()
    ref_w, ref_s, ref_cap = make()
    steps = [((0, 0), [1, 2]), ((0, 1), [4]), ((1, 0), [5, 7]), ((1, 1), [2]), ((2, 0), [9])]
    for i, (t, xs) in enumerate(steps):
        for sess in (s, ref_s) if i < 3 else (ref_s,):
            for x in xs:
                sess.update_at(x, dd.Product(*t), 1)
    for sess, wk in ((s, w), (ref_s, ref_w)):
        sess.advance_to(dd.Product(1, 0))
        wk.run()
    w.checkpoint(tmp_path)
    w2, s2, cap2 = make()
    w2.restore(tmp_path)
    for t, xs in steps[3:]:
        for x in xs:
            s2.update_at(x, dd.Product(*t), 1)
    for sess, wk in ((s2, w2), (ref_s, ref_w)):
        sess.close()
        wk.run()
    assert cap2.updates() == ref_cap.updates()


# ---- damaged and foreign checkpoints ------------------------------------------------------


def _counts_run(tmp_path: Any, rounds: int = 5) -> tuple[Run, Any]:
    run = Run(build_counts)
    for rnd in rounds_of(7, rounds):
        run.feed(rnd)
    path = tmp_path / "ckpt"
    run.w.checkpoint(path)
    return run, path


def _files(path: Any) -> list[str]:
    out = []
    for root, _, names in os.walk(path):
        out += [os.path.join(root, n) for n in names]
    return sorted(out)


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_damaged_files_are_refused_whole(tmp_path: Any, damage: str) -> None:
    run, path = _counts_run(tmp_path)
    expect = run.updates()
    for f in _files(path):
        with open(f, "rb") as fh:
            backup = fh.read()
        if damage == "truncate":
            data = backup[: len(backup) // 2]
        elif damage == "flip":
            b = bytearray(backup)
            b[len(b) // 2] ^= 0x40
            data = bytes(b)
        else:
            data = b""
        with open(f, "wb") as fh:
            fh.write(data)
        fresh = Run(build_counts)
        before = fresh.updates()
        with pytest.raises(CheckpointError):
            fresh.w.restore(path)
        # nothing was loaded: the fresh dataflow is still empty and runs from scratch
        assert fresh.updates() == before == {"deg": [], "hist": []}
        assert fresh.w.stats() == Run(build_counts).w.stats()
        with open(f, "wb") as fh:
            fh.write(backup)
    ok = Run(build_counts)
    ok.w.restore(path)
    assert ok.updates() == expect


def test_uncommitted_checkpoint_is_not_read(tmp_path: Any) -> None:
    run, path = _counts_run(tmp_path)
    assert latest_checkpoint(path) == 1
    run.feed(([((1, 2), 1)], []))
    run.w.checkpoint(path)
    os.unlink(os.path.join(path, "COMMIT-00000002"))  # as if the writer died before it
    assert latest_checkpoint(path) == 1
    fresh = Run(build_counts)
    assert fresh.w.restore(path)["seq"] == 1


def test_foreign_checkpoint_is_refused(tmp_path: Any) -> None:
    _, path = _counts_run(tmp_path)
    other = Run(build_join_reduce)
    with pytest.raises(CheckpointError, match="another dataflow"):
        other.w.restore(path)
    with pytest.raises(CheckpointError, match="another dataflow"):
        other.w.checkpoint(path)  # a directory holds one dataflow's checkpoints
    with pytest.raises(CheckpointError, match="no committed checkpoint"):
        Run(build_counts).w.restore(tmp_path / "nothing-here")


def test_restore_after_running_is_refused(tmp_path: Any) -> None:
    _, path = _counts_run(tmp_path)
    run = Run(build_counts)
    run.feed(([((0, 1), 1)], []))
    with pytest.raises(CheckpointError, match="not run yet"):
        run.w.restore(path)


def test_old_checkpoints_are_collected(tmp_path: Any) -> None:
    run = Run(build_counts)
    path = tmp_path / "ckpt"
    for rnd in rounds_of(3, 8):
        run.feed(rnd)
        run.w.checkpoint(path)
    commits = sorted(n for n in os.listdir(path) if n.startswith("COMMIT"))
    assert commits == ["COMMIT-00000007", "COMMIT-00000008"]
    wdir = os.path.join(path, "worker-0000")
    manifests = sorted(n for n in os.listdir(wdir) if n.startswith("manifest"))
    assert manifests == ["manifest-00000007.json", "manifest-00000008.json"]
    fresh = Run(build_counts)
    fresh.w.restore(path)
    assert fresh.updates() == run.updates()


def test_merged_batches_are_checkpointed_by_lineage(tmp_path: Any) -> None:
    """A merge completed since the last checkpoint is referred to by the batches it was
    merged from (written already) and written in the background; a checkpoint taken that
    way restores to the same state, and later checkpoints use the finished file."""

    def make() -> tuple[Any, Any, Any]:
        w = dd.Worker()
        s, c = w.new_collection()
        return w, s, c.map(lambda x: (x % 5000, -x), vectorized=False).min().capture()

    w, s, cap = make()
    rng = np.random.default_rng(3)
    s.insert_columns(np.arange(100_000, dtype=np.int64))
    s.advance_to(1)
    w.run()
    w.checkpoint(tmp_path)
    lineage = 0
    for t in range(1, 40):
        s.insert_columns(rng.integers(0, 10**9, 3000))
        s.advance_to(t + 1)
        w.run()
        info = w.checkpoint(tmp_path)
        lineage += info["batches_by_lineage"]
        if info["batches_by_lineage"]:
            w2, s2, cap2 = make()
            w2.restore(tmp_path)
            assert cap2.updates() == cap.updates()
            # and it goes on like the original: one more round on the restored copy equals
            # a from-scratch min over everything fed (key 7's least value)
            s2.insert(7 + 5000 * 10**6)
            s2.advance_to(t + 2)
            w2.run()
            assert cap2.at(t + 1).get((7, -(7 + 5000 * 10**6))) == 1
    assert lineage > 0, "no merge was checkpointed by lineage"
    w3, s3, cap3 = make()
    w3.restore(tmp_path)
    assert cap3.updates() == cap.updates()


# ---- the same checkpoint contract on every runtime ---------------------------------------


def _degrees(c: dict[str, Any]) -> dict[str, Any]:
    deg = c["edges"].map(lambda e: e[0], vectorized=True).count_total()
    return {"hist": deg.map(lambda kc: kc[1], vectorized=True).count_total(), "deg": deg}


def _edge_log(n: int, rounds: int, seed: int) -> dd.Changes:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, 40, n), rng.integers(0, 40, n)
    times = np.sort(rng.integers(0, rounds, n))
    diffs = np.where(rng.random(n) < 0.25, -1, 1).astype(np.int64)
    return dd.Changes((src, dst), times, diffs)


def _updates(res: Any, name: str) -> Counter:
    out: Counter = Counter()
    for x, t, d in res[name].updates():
        out[(x, t)] += d
    return out


def test_jobs_resume_where_the_last_stopped_on_every_runtime(runtime: Any, tmp_path: Any) -> None:
    """On every runtime, jobs over consecutive slices of the input sharing a checkpoint
    directory return together the updates of one uninterrupted job, each those of its slice;
    the whole log again returns nothing new."""
    edges = _edge_log(600, 6, seed=3)
    ref = dd.run_job(_degrees, {"edges": edges})
    path = str(tmp_path / "ck")
    got: dict[str, Counter] = {"hist": Counter(), "deg": Counter()}
    for lo, hi in ((0, 2), (2, 6)):
        part = runtime.run(
            _degrees,
            {"edges": edges.take(np.flatnonzero((edges.times >= lo) & (edges.times < hi)))},
            checkpoint=path,
        )
        for name in got:
            mine = _updates(part, name)
            assert all(lo <= t < hi for _, t in mine), "a job returns its own slice only"
            got[name].update(mine)
    for name in got:
        assert +got[name] == +_updates(ref, name) and -got[name] == -_updates(ref, name)
    again = runtime.run(_degrees, {"edges": edges}, checkpoint=path)
    assert again["deg"].updates() == [] and again["hist"].updates() == []


def _logs(rounds: list[tuple[list, list]], lo: int, hi: int) -> dict[str, dd.Changes]:
    """Rounds ``lo..hi-1`` as job input logs (a round's updates at its index as time)."""
    edges = [(e, r, d) for r in range(lo, hi) for e, d in rounds[r][0]]
    nodes = [(n, r, d) for r in range(lo, hi) for n, d in rounds[r][1]]

    def col(values: list[int]) -> np.ndarray:
        return np.array(values, dtype=np.int64)

    return {
        "edges": dd.Changes(
            (col([e[0] for e, _, _ in edges]), col([e[1] for e, _, _ in edges])),
            col([t for _, t, _ in edges]),
            col([d for _, _, d in edges]),
        ),
        "nodes": dd.Changes(
            col([n for n, _, _ in nodes]),
            col([t for _, t, _ in nodes]),
            col([d for _, _, d in nodes]),
        ),
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_dataflow_resumes_from_checkpoints_on_every_runtime(
    runtime: Any, case: str, tmp_path: Any
) -> None:
    """The joins, reductions and loop of the in-process restore test, as jobs over three
    consecutive slices of the rounds sharing a checkpoint directory, on every runtime: the
    updates of all jobs together are the from-scratch answer at every round."""
    build, want = CASES[case]
    rounds = rounds_of(7, 9)
    path = str(tmp_path / "ck")
    got: dict[str, Counter] = {}
    for lo, hi in ((0, 3), (3, 4), (4, 9)):
        part = runtime.run(
            lambda c: build(c["edges"], c["nodes"]), _logs(rounds, lo, hi), checkpoint=path
        )
        for name in part:
            for x, t, d in part[name].updates():
                assert lo <= t < hi, "a job returns its own slice only"
                got.setdefault(name, Counter())[(x, t)] += d
    for r in range(len(rounds)):
        expect = want(*accumulate(rounds[: r + 1]))
        for name, ups in got.items():
            acc: Counter = Counter()
            for (x, t), d in ups.items():
                if t <= r:
                    acc[x] += d
            assert Counter({x: d for x, d in acc.items() if d}) == expect[name], (case, r, name)


_RESTORE_AND_EXIT = """
import sys, tempfile
import ddflow as dd

def build(worker):
    edges_in, edges = worker.new_collection()
    return edges_in, edges.map(lambda e: e[0]).count_total().capture()

ckpt = tempfile.mkdtemp()
w = dd.Worker()
edges_in, out = build(w)
for e in [(0, 1), (0, 2), (1, 2)]:
    edges_in.insert(e)
edges_in.advance_to(1); w.run()
w.checkpoint(ckpt)
w2 = dd.Worker()
edges_in2, out2 = build(w2)
w2.restore(ckpt)
edges_in2.remove((0, 2)); edges_in2.advance_to(2); w2.run()
assert out2.at(1) == {(0, 1): 1, (1, 1): 1}, out2.at(1)
print("restored")
"""


def test_a_process_that_restored_a_checkpoint_exits_cleanly(tmp_path: Path) -> None:
    """Reading a checkpoint's Parquet files leaves no thread of Arrow's behind: a process
    that restored one and finished its work exits with status 0 (a reader pool torn down
    at interpreter exit while one of its threads was alive aborted about half of such
    processes)."""
    script = tmp_path / "restore_and_exit.py"
    script.write_text(_RESTORE_AND_EXIT)
    for _ in range(8):
        proc = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0 and proc.stdout.strip() == "restored", (
            proc.returncode,
            proc.stderr[-2000:],
        )
