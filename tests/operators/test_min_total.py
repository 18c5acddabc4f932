"""``min_total`` / ``max_total`` and ``reduce_hierarchical`` on hot-key streams.

Answers: random streams of ``(key, val)`` updates in which key 0 is hot and the current
minimum (maximum) of a key is retracted again and again, cut at random into batches that
hold several times each, must give the oracle's collection at every time (int times; and,
for ``reduce_hierarchical``, ``Product`` times too). Split invariance: one batch, one time
per batch and one update per batch give the same updates. Work: ``MinMaxTotal.rows_read``
counts the history rows a batch reads; it must follow the batch, not the key's history.
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
from ddflow import Changes, run_job
from ddflow.operators.min_total import MinMaxTotal
from ddflow.testing import oracle as O

Update = tuple[Any, Any, Any]
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
HOWS = ("min", "max", "sum", "count")
ACTIONS = (
    "insert",
    "insert",
    "insert",
    "insert_run",
    "retract_min",
    "retract_min",
    "retract_max",
    "retract_run",
    "retract_any",
    "retract_absent",
)


# ---- streams and how they are fed ------------------------------------------------------------


@st.composite
def hot_stream(
    draw: st.DrawFn,
    *,
    product: bool = False,
    negative: bool = True,
    max_steps: int = 60,
    max_val: int = 40,
) -> list[Update]:
    """``((key, val), time, ±1)`` updates, key 0 hot (two in three), built step by step:
    inserts (one value, or a run of up to 20), retractions of the key's current least /
    greatest present value, of its up to 20 least ones at once (the scan from the old minimum
    must look past them), of any present value and (with ``negative``) of absent ones, which
    leaves negative counts (DD semantics: such a value is there). Int times grow by 0 or 1 per
    step (several updates per time); ``Product`` times are drawn from a 3 x 3 grid."""
    present: defaultdict[int, Counter[int]] = defaultdict(Counter)
    actions = ACTIONS if negative else ACTIONS[:-1]
    t = 0
    out: list[Update] = []
    for _ in range(draw(st.integers(1, max_steps))):
        if product:
            time: Any = dd.Product(draw(st.integers(0, 2)), draw(st.integers(0, 2)))
        else:
            t += draw(st.integers(0, 1))
            time = t
        key = draw(st.sampled_from((0, 0, 0, 0, 1, 2)))
        act = draw(st.sampled_from(actions))
        live = sorted(v for v, r in present[key].items() if r > 0)
        if act in ("insert_run", "retract_run"):
            if act == "insert_run":
                start = draw(st.integers(0, max_val))
                run = range(start, start + draw(st.integers(1, 20)))
            else:
                run = live[: draw(st.integers(1, 20))]
            d = 1 if act == "insert_run" else -1
            for v in run:
                present[key][v] += d
                out.append(((key, v), time, d))
            continue
        if act == "insert" or (not live and act != "retract_absent"):
            v, d = draw(st.integers(0, max_val)), 1
        elif act == "retract_min":
            v, d = live[0], -1
        elif act == "retract_max":
            v, d = live[-1], -1
        elif act == "retract_any":
            v, d = draw(st.sampled_from(live)), -1
        else:
            v, d = draw(st.integers(0, max_val)), -1
        present[key][v] += d
        out.append(((key, v), time, d))
    return out


def _flat(t: Any) -> tuple[int, ...]:
    return O.flatten_time(t)


def _plain(x: Any) -> Any:
    if isinstance(x, tuple):
        return tuple(_plain(y) for y in x)
    return x.item() if isinstance(x, np.generic) else x


def _rounds(ups: list[Update], cuts: set[int] | str) -> list[list[Update]]:
    """The updates in time order, cut into rounds: at ``cuts`` (positions), or ``"one"``
    (one batch), ``"time"`` (one time per round), ``"update"`` (one update per round)."""
    ordered = sorted(ups, key=lambda u: _flat(u[1]))
    if not ordered:
        return []
    if cuts == "one":
        return [ordered]
    if cuts == "update":
        return [[u] for u in ordered]
    if cuts == "time":
        out: list[list[Update]] = []
        for u in ordered:
            if out and out[-1][0][1] == u[1]:
                out[-1].append(u)
            else:
                out.append([u])
        return out
    assert isinstance(cuts, set)
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(ordered)), len(ordered)]
    return [ordered[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def feed(
    build: Callable[[Any], Any], ups: list[Update], cuts: set[int] | str, product: bool = False
) -> tuple[list[Update], dict[Any, dict[Any, Any]]]:
    """Run ``build`` on ``ups`` fed in rounds; after each round the input advances to the
    meet of the times still to come (closes after the last) and the worker runs. Returns the
    consolidated output updates and the output at every interesting time."""
    with dd.Worker() as worker:
        if product:
            inp, coll = worker.new_collection(time=dd.Product(0, 0))
        else:
            inp, coll = worker.new_collection()
        cap = build(coll).capture()
        rounds = _rounds(ups, cuts)
        for i, rnd in enumerate(rounds):
            for d, t, r in rnd:
                inp.update_at(d, t, r)
            rest = [u[1] for later in rounds[i + 1 :] for u in later]
            if rest:
                target = rest[0]
                for t in rest[1:]:
                    target = O.meet(target, t)
                if _flat(target) != _flat(inp.time()):
                    inp.advance_to(target)
                inp.flush()
            else:
                inp.close()
            worker.run()
        if not rounds:
            inp.close()
            worker.run()
        out = [(_plain(d), t, _plain(r)) for d, t, r in cap.updates()]
        times = O.interesting_times(ups, out)
        at = {t: {_plain(k): _plain(v) for k, v in cap.at(t).items()} for t in times}
    return out, at


def check(
    build: Callable[[Any], Any],
    oracle: Callable[[dict[Any, Any]], dict[Any, Any]],
    ups: list[Update],
    cuts: set[int] | str,
    product: bool = False,
) -> list[Update]:
    """Output consolidated, and equal to ``oracle`` of the accumulated input at every
    interesting time."""
    out, at = feed(build, ups, cuts, product)
    seen = set()
    for d, t, _ in out:
        assert (d, _flat(t)) not in seen, f"two updates for {(d, t)} in {out}"
        seen.add((d, _flat(t)))
    for t, got in at.items():
        want = oracle(O.accumulate(ups, t))
        assert got == want, f"at {t}: expected {want}, got {got}\ninputs={ups}\noutput={out}"
    return out


def hier_sum_oracle(a: dict[Any, Any]) -> dict[Any, Any]:
    """The ``Sum{value, count}`` diff: a key is there while its (sum, count) is not (0, 0)."""
    out = {}
    for k, group in O.group_by_key(O.consolidate(a)).items():
        s, n = sum(v * r for v, r in group), sum(r for _, r in group)
        if (s, n) != (0, 0):
            out[(k, s)] = 1
    return out


def hier_count_oracle(a: dict[Any, Any]) -> dict[Any, Any]:
    """The number of records of a key (with multiplicity), while it is not 0."""
    return {(k, n): 1 for k, n in _key_counts(a).items() if n}


def _key_counts(a: dict[Any, Any]) -> dict[Any, int]:
    out: dict[Any, int] = defaultdict(int)
    for (k, _v), r in a.items():
        out[k] += r
    return out


def r_sum(_k: Any, vals: list[tuple[Any, Any]]) -> list[tuple[Any, int]]:
    return [(sum(v * r for v, r in vals), 1)]


def r_count(_k: Any, vals: list[tuple[Any, Any]]) -> list[tuple[Any, int]]:
    return [(sum(r for _, r in vals), 1)]


ORACLES: dict[str, Callable[[dict[Any, Any]], dict[Any, Any]]] = {
    "min": O.min_by_key,
    "max": O.max_by_key,
    "sum": hier_sum_oracle,
    "count": hier_count_oracle,
}


# ---- min_total / max_total against the oracle ---------------------------------------------------


@pytest.mark.parametrize("mode", ["min", "max"])
@SETTINGS
@given(data=st.data())
def test_min_max_total_match_oracle(mode: str, data: st.DataObject) -> None:
    """Hot-key streams retracting the current extreme, cut at random into batches of several
    times: the output at every time is the oracle's least (greatest) value per key."""
    ups = data.draw(hot_stream(), label="updates")
    cuts = data.draw(st.sets(st.integers(1, max(1, len(ups) - 1))), label="cuts")
    build = (lambda c: c.min_total()) if mode == "min" else (lambda c: c.max_total())
    out = check(build, O.min_by_key if mode == "min" else O.max_by_key, ups, cuts)
    assert all(r in (1, -1) for _, _, r in out)


@pytest.mark.parametrize("mode", ["min", "max"])
@SETTINGS
@given(data=st.data())
def test_min_max_total_split_invariance(mode: str, data: st.DataObject) -> None:
    """One batch, one time per batch, one update per batch and a random split give the same
    consolidated output updates (for int times they determine the output at every time)."""
    ups = data.draw(hot_stream(), label="updates")
    cuts = data.draw(st.sets(st.integers(1, max(1, len(ups) - 1))), label="cuts")
    build = (lambda c: c.min_total()) if mode == "min" else (lambda c: c.max_total())
    outs = {how: feed(build, ups, how)[0] for how in ("one", "time", "update")}
    outs["random"] = feed(build, ups, cuts)[0]
    for how, out in outs.items():
        assert out == outs["one"], f"{how!r} differs from one batch\ninputs={ups}"


@pytest.mark.parametrize("mode", ["min", "max"])
def test_retracting_the_extreme_every_time(mode: str) -> None:
    """100 values at time 0, then the current minimum (maximum) retracted at each time:
    each time retracts the old answer and adds the next one, both in one batch and in
    one batch per time."""
    ups: list[Update] = [((7, v), 0, 1) for v in range(100)]
    order = list(range(100)) if mode == "min" else list(range(99, -1, -1))
    ups += [((7, v), t + 1, -1) for t, v in enumerate(order)]
    want: list[Update] = [((7, order[0]), 0, 1)]
    for t in range(1, 100):
        want += [((7, order[t - 1]), t, -1), ((7, order[t]), t, 1)]
    want.append(((7, order[99]), 100, -1))
    build = (lambda c: c.min_total()) if mode == "min" else (lambda c: c.max_total())
    for cuts in ("one", "time"):
        out, _ = feed(build, ups, cuts)
        assert sorted(out, key=lambda u: (u[1], u[2])) == sorted(want, key=lambda u: (u[1], u[2]))


def test_scan_looks_past_cancelled_and_retracted_values() -> None:
    """The old minimum is retracted while the values just above it are cancelled (in a
    history batch not yet merged) or retracted in the same batch: the scan from the old
    minimum must widen past them to the next present value, though a larger one is found at
    once in another history batch."""
    ups: list[Update] = [((0, 5), 0, 1)] + [((0, v), 0, 1) for v in range(10, 60)]
    ups += [((0, 1000), 1, 1)]
    ups += [((0, v), 2, -1) for v in range(10, 40)]
    ups += [((0, 5), 3, -1)]
    ups += [((0, v), 4, -1) for v in range(40, 55)] + [((0, 7), 4, 1), ((0, 7), 5, -1)]
    for cuts in ("time", "one", "update"):
        check(lambda c: c.min_total(), O.min_by_key, ups, cuts)
    # the same for max, mirrored
    mirrored = [((k, 2000 - v), t, r) for (k, v), t, r in ups]
    for cuts in ("time", "one"):
        check(lambda c: c.max_total(), O.max_by_key, mirrored, cuts)


def test_many_times_in_one_columnar_batch() -> None:
    """20 000 random updates of 50 keys over 200 times, sent as columns in one batch, give
    the same output as one batch per time, and the oracle's minimum at sampled times."""
    rng = np.random.default_rng(5)
    n = 20_000
    keys = np.where(rng.random(n) < 0.5, 0, rng.integers(1, 50, n)).astype(np.int64)
    vals = rng.integers(0, 300, n).astype(np.int64)
    times = np.sort(rng.integers(0, 200, n)).astype(np.int64)
    diffs = np.where(rng.random(n) < 0.7, 1, -1).astype(np.int64)

    def run(per_time: bool) -> list[Update]:
        with dd.Worker() as w:
            inp, c = w.new_collection()
            cap = c.min_total().capture()
            if per_time:
                for t in range(200):
                    m = times == t
                    inp.insert_columns((keys[m], vals[m]), diffs=diffs[m], times=times[m])
                    inp.advance_to(t + 1)
                    w.run()
            else:
                inp.insert_columns((keys, vals), diffs=diffs, times=times)
                inp.advance_to(200)
                w.run()
            return [(_plain(d), t, r) for d, t, r in cap.updates()]

    one, per_time = run(False), run(True)
    assert one == per_time
    ups = [
        ((int(k), int(v)), int(t), int(r))
        for k, v, t, r in zip(keys, vals, times, diffs, strict=True)
    ]
    for t in (0, 57, 131, 199):
        assert O.accumulate(one, t) == O.min_by_key(O.accumulate(ups, t))


def test_min_total_on_two_workers() -> None:
    """With two local processes (arrange exchanges by key) the answer is the in-process
    one and the oracle's."""
    rng = np.random.default_rng(11)
    n = 3000
    keys = np.where(rng.random(n) < 0.6, 0, rng.integers(1, 20, n)).astype(np.int64)
    vals = rng.integers(0, 100, n).astype(np.int64)
    times = np.sort(rng.integers(0, 30, n)).astype(np.int64)
    diffs = np.where(rng.random(n) < 0.65, 1, -1).astype(np.int64)
    log = {"kv": Changes((keys, vals), times, diffs)}

    def build(c: dict[str, Any]) -> dict[str, Any]:
        kv = c["kv"]
        return {
            "min": kv.min_total(),
            "max": kv.max_total(),
            "hier": kv.reduce_hierarchical("min", buckets=8),
        }

    two, one = run_job(build, log, workers=2, timeout=120), run_job(build, log)
    ups = [
        ((int(k), int(v)), int(t), int(r))
        for k, v, t, r in zip(keys, vals, times, diffs, strict=True)
    ]
    for name, oracle in (("min", O.min_by_key), ("max", O.max_by_key), ("hier", O.min_by_key)):
        assert two[name].updates() == one[name].updates()
        for t in (0, 10, 29):
            got = {_plain(k): v for k, v in two[name].at(t).items()}
            assert got == oracle(O.accumulate(ups, t)), name


# ---- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["min_total", "max_total"])
def test_total_forms_reject_product_times(op: str) -> None:
    """In a Product-time worker, min_total / max_total raise dd.TimeError naming min / max."""
    w = dd.Worker()
    _inp, c = w.new_collection(time=dd.Product(0, 0))
    with pytest.raises(dd.TimeError, match=rf"totally ordered.*use {op[:3]}\(\)"):
        getattr(c, op)()


def test_max_total_needs_numbers() -> None:
    """max_total on string values raises dd.DataError (it orders by negated numbers)."""
    w = dd.Worker()
    inp, c = w.new_collection()
    c.max_total().capture()
    inp.insert((0, "a"))
    inp.advance_to(1)
    with pytest.raises(dd.DataError, match="numeric"):
        w.run()


def test_min_total_needs_int_diffs() -> None:
    """min_total on tuple diffs raises dd.DiffTypeError."""
    w = dd.Worker()
    inp, c = w.new_collection(diff=(0, 0))
    c.min_total().capture()
    inp.update((0, 1), (1, 1))
    inp.advance_to(1)
    with pytest.raises(dd.DiffTypeError, match="int diffs"):
        w.run()


def test_min_total_with_string_values_and_retractions() -> None:
    """Object (string) values: the least string, moving as values are retracted."""
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


def test_min_total_with_tuple_keys() -> None:
    """Composite keys (two columns) work like single ones."""
    w = dd.Worker()
    inp, c = w.new_collection()
    out = c.min_total().capture()
    for k in ((0, 1), (0, 2), (1, 1)):
        for v in (5, 3, 9):
            inp.insert((k, v))
    inp.advance_to(1)
    inp.remove(((0, 2), 3))
    inp.advance_to(2)
    w.run()
    assert out.at(0) == {((0, 1), 3): 1, ((0, 2), 3): 1, ((1, 1), 3): 1}
    assert out.at(1) == {((0, 1), 3): 1, ((0, 2), 5): 1, ((1, 1), 3): 1}


def test_reduce_hierarchical_rejects_unknown_reductions() -> None:
    """An unknown ``how`` or a bad bucket count raises ValueError naming the allowed ones."""
    w = dd.Worker()
    _inp, c = w.new_collection()
    with pytest.raises(ValueError, match="how must be one of.*'min', 'max', 'sum', 'count'"):
        c.reduce_hierarchical("median")
    with pytest.raises(ValueError, match="buckets"):
        c.reduce_hierarchical("min", buckets=0)


# ---- reduce_hierarchical against the oracle -----------------------------------------------------


@pytest.mark.parametrize("product", [False, True], ids=["int", "product"])
@pytest.mark.parametrize("how", HOWS)
@SETTINGS
@given(data=st.data())
def test_reduce_hierarchical_matches_oracle(how: str, product: bool, data: st.DataObject) -> None:
    """A hot key's values reduced by value-hash buckets, then per key: the oracle's answer at
    every interesting time, for int and Product times and 1, 3 or 256 buckets."""
    ups = data.draw(hot_stream(product=product, max_steps=40), label="updates")
    cuts = data.draw(st.sets(st.integers(1, max(1, len(ups) - 1))), label="cuts")
    buckets = data.draw(st.sampled_from([1, 3, 256]), label="buckets")
    check(lambda c: c.reduce_hierarchical(how, buckets=buckets), ORACLES[how], ups, cuts, product)


@pytest.mark.parametrize("how", ["sum", "count"])
@SETTINGS
@given(data=st.data())
def test_reduce_hierarchical_equals_plain_reduce_without_negative_counts(
    how: str, data: st.DataObject
) -> None:
    """When no count goes negative (retractions only of present values), ``sum`` and
    ``count`` equal a plain ``reduce`` summing values (records) at every time."""
    ups = data.draw(hot_stream(negative=False, max_steps=40), label="updates")
    logic = r_sum if how == "sum" else r_count
    check(
        lambda c: c.reduce_hierarchical(how, buckets=4), lambda a: O.reduce(a, logic), ups, "time"
    )


# ---- work bounded by the batch ------------------------------------------------------------------


def _hot_key_rounds(
    mode: str, rounds: int, retract_extreme: bool, per_round: int = 500
) -> tuple[list[int], MinMaxTotal]:
    """History rows read per round when key 0 receives ``per_round`` new values a round and,
    with ``retract_extreme``, loses its current minimum (maximum) each round."""
    rng = np.random.default_rng(3)
    w = dd.Worker()
    inp, c = w.new_collection()
    out = c.min_total() if mode == "min" else c.max_total()
    cap = out.capture()
    op = next(o for o in w.operators if isinstance(o, MinMaxTotal))
    probe = out.probe()
    present: list[int] = []
    reads = []
    for t in range(rounds):
        vals = rng.integers(0, 1 << 30, per_round).tolist()
        if present and retract_extreme:
            m = min(present) if mode == "min" else max(present)
            present.remove(m)
            inp.remove((0, m))
        for v in vals:
            inp.insert((0, v))
        present.extend(vals)
        before = op.rows_read
        inp.advance_to(t + 1)
        w.step_while(lambda: probe.less_than(t + 1))
        reads.append(op.rows_read - before)
    want = min(present) if mode == "min" else max(present)
    assert cap.at(rounds - 1) == {(0, want): 1}
    return reads, op


@pytest.mark.parametrize("mode", ["min", "max"])
def test_reads_do_not_grow_with_history(mode: str) -> None:
    """Retracting the hot key's extreme every round: the last rounds read about what the
    first ones did, a tiny part of the key's history."""
    rounds = 60
    reads, _ = _hot_key_rounds(mode, rounds, retract_extreme=True)
    assert max(reads[-10:]) <= 4 * max(reads[1:11]) + 64
    assert max(reads[-10:]) < 500 * rounds // 20


def test_inserts_read_no_history_and_keep_one_output_row_per_key() -> None:
    """Rounds that only insert values (so the minimum is never retracted) read no history
    rows at all, and the output trace stays at about one row per key."""
    reads, op = _hot_key_rounds("min", 40, retract_extreme=False)
    assert sum(reads) == 0
    assert op.out_spine.stats()["updates"] <= 16
