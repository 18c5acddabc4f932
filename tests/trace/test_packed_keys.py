"""Lookups in a trace batch keyed by several integer columns.

Such a batch's key index is a structured array, which numpy searches with a slow generic
comparison; the batch packs it once into one sorted int64 column (each field offset by its
minimum, first field in the highest bits) and packs the probe keys the same way. Probe
keys outside a field's range must not be found, whatever their packed bits wrap to.
Every answer is checked against a dict of Python tuples built here.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pytest

from ddflow.core.diff import I64_MAX, I64_MIN, INT_DIFF
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates
from ddflow.trace.batch import Description, TraceBatch, key_index


def _desc() -> Description:
    return Description(Antichain.of([(0,)], 1), Antichain.of([(1,)], 1), Antichain.of([(0,)], 1))


def _batch(cols: list[np.ndarray], seed: int) -> TraceBatch:
    rng = np.random.default_rng(seed)
    n = len(cols[0])
    vals = rng.integers(0, 4, n).astype(np.int64)
    u = Updates((*cols, vals), np.zeros((n, 1), np.int64), np.ones(n, np.int64), INT_DIFF)
    return TraceBatch.build(len(cols), u, _desc())


def _reference(b: TraceBatch, probe_cols: list[np.ndarray]) -> list[tuple[int, int]]:
    width = len(probe_cols)
    rows_of: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    keys = list(zip(*(c.tolist() for c in b.data[:width]), strict=True))
    for r, k in enumerate(keys):
        rows_of[k].append(r)
    probe = list(zip(*(c.tolist() for c in probe_cols), strict=True))
    return sorted((r, j) for j, k in enumerate(probe) for r in rows_of.get(k, []))


def _probe(cols: list[np.ndarray]) -> np.ndarray:
    order = np.lexsort(tuple(reversed(cols)))
    cols = [c[order] for c in cols]
    keep = np.ones(len(cols[0]), bool)
    keep[1:] = np.any([c[1:] != c[:-1] for c in cols], axis=0)
    return key_index([c[keep] for c in cols]), [c[keep] for c in cols]


def _check(b: TraceBatch, probe_cols: list[np.ndarray]) -> None:
    probe, cols = _probe(probe_cols)
    rows, owner = b.rows_for(probe)
    assert sorted(zip(rows.tolist(), owner.tolist(), strict=True)) == _reference(b, cols)


CASES = {
    # (dtypes, low, high): the key columns' value range
    "int64 pair": ((np.int64, np.int64), -50, 50),
    "int32 and uint16": ((np.int32, np.uint16), 0, 300),
    "three columns with bool": ((np.int64, np.bool_, np.int8), -3, 3),
    "near int64 max": ((np.int64, np.int64), I64_MAX - 40, I64_MAX),
    "near int64 min": ((np.int64, np.int64), I64_MIN, I64_MIN + 40),
}


@pytest.mark.parametrize("case", list(CASES))
def test_packed_lookup_matches_a_dict(case: str) -> None:
    dtypes, lo, hi = CASES[case]
    rng = np.random.default_rng(len(case))
    n = 3000

    def column(dt: Any, size: int, lo: int, hi: int) -> np.ndarray:
        if dt is np.bool_:
            return rng.integers(0, 2, size).astype(bool)
        info = np.iinfo(dt)
        a, z = max(lo, int(info.min)), min(hi, int(info.max))
        return np.array([a + int(x) for x in rng.integers(0, z - a + 1, size)], dtype=dt)

    cols = [column(dt, n, lo, hi) for dt in dtypes]
    b = _batch(cols, seed=1)
    assert b.keys.dtype.names is not None
    for _ in range(30):
        size = int(rng.integers(8, 400))
        # probe keys: some of the batch's, some near them, some far outside every range
        pick = rng.integers(0, n, size)
        probe = [c[pick].copy() for c in cols]
        for j, dt in enumerate(dtypes):
            if dt is np.bool_:
                continue
            info = np.iinfo(dt)
            far = rng.random(size) < 0.2
            probe[j][far] = np.where(rng.random(int(far.sum())) < 0.5, info.min, info.max)
            near = rng.random(size) < 0.2
            shifted = probe[j].astype(object) + rng.integers(-2, 3, size)
            ok = (shifted >= int(info.min)) & (shifted <= int(info.max)) & near
            probe[j][ok] = shifted[ok].astype(dt)
        _check(b, probe)
    assert b._packed_keys() is not None  # the packed path was the one tested


def test_keys_whose_ranges_do_not_fit_62_bits_are_searched_as_they_are() -> None:
    rng = np.random.default_rng(5)
    n = 500
    wide = rng.integers(I64_MIN, I64_MAX, n, dtype=np.int64, endpoint=True)
    other = rng.integers(0, 1 << 20, n).astype(np.int64)
    b = _batch([wide, other], seed=2)
    assert b._packed_keys() is None
    pick = rng.integers(0, n, 100)
    probe = [wide[pick].copy(), other[pick].copy()]
    probe[1][::3] += 1
    _check(b, probe)


def test_probe_keys_far_outside_wrap_to_nothing() -> None:
    # the second field near int64's maximum, probed with int64's minimum: its offset wraps
    # to a number past the field's bits, which packed beside the first field would read as
    # the next first-field value; such keys must not be found
    hi = I64_MAX
    first = np.array([10, 10, 10, 11, 11, 11], np.int64)
    second = np.array([hi - 4, hi - 2, hi, hi - 4, hi - 2, hi], np.int64)
    b = _batch([np.repeat(first, 2), np.repeat(second, 2)], seed=3)
    assert b._packed_keys() is not None
    # (lookups of fewer than 8 keys search the structured keys as they are)
    far = I64_MIN + np.arange(10, dtype=np.int64)
    probe_first = np.array([10] * 10 + [10, 11, 11], np.int64)
    probe_second = np.concatenate([far, np.array([hi - 2, hi - 3, hi], np.int64)])
    _check(b, [probe_first, probe_second])
    rows, _ = b.rows_for(key_index([probe_first[:10], probe_second[:10]]))
    assert not len(rows)


def test_a_restored_batch_packs_again() -> None:
    import pickle

    rng = np.random.default_rng(6)
    cols = [rng.integers(0, 50, 400).astype(np.int64), rng.integers(0, 9, 400).astype(np.int64)]
    b = _batch(cols, seed=4)
    _check(b, [c[:40] for c in cols])
    b2 = pickle.loads(pickle.dumps(b))
    assert b2._packed is None
    _check(b2, [c[10:90] for c in cols])


@pytest.mark.parametrize("lead_unique", [True, False])
@pytest.mark.parametrize("width", [2, 7])
def test_wide_keys_are_searched_by_their_first_column(lead_unique: bool, width: int) -> None:
    # keys too wide to pack (a customer key beside codes of its name, address, comment,
    # ...): found by the first column when it leaves one candidate per probe key, then
    # compared whole; a first column shared by several keys takes the general search
    rng = np.random.default_rng(7 + width + lead_unique)
    n = 2000
    first = (
        rng.permutation(n * 3)[:n].astype(np.int64)
        if lead_unique
        else (rng.permutation(n) // 2).astype(np.int64)  # (two keys per first value)
    )
    rest = [rng.integers(I64_MIN, I64_MAX, n, dtype=np.int64) for _ in range(width - 1)]
    cols = [first, *rest]
    b = _batch([np.repeat(c, 2) for c in cols], seed=8)  # (two rows per key)
    assert b._packed_keys() is None
    for _ in range(20):
        size = int(rng.integers(8, 300))
        pick = rng.integers(0, n, size)
        probe = [c[pick].copy() for c in cols]
        # some keys differ from the batch's in one later column only, or in the first
        later = rng.random(size) < 0.3
        probe[width - 1][later] += 1
        lead = rng.random(size) < 0.2
        probe[0][lead] += n * 3
        _check(b, probe)
    assert (b._lead_keys() is not None) is True
    # key fields that are not all int64 words: rows compared as numpy compares them
    spread = rng.permutation(n).astype(np.int64) * (1 << 52) + I64_MIN
    second = rng.integers(-(1 << 31), 1 << 31, n).astype(np.int32)
    b2 = _batch([spread, second], seed=9)
    assert b2._packed_keys() is None and b2._lead_keys() is not None
    probe2 = [spread[:300].copy(), second[:300].copy()]
    probe2[1][::4] += 1
    _check(b2, probe2)


def test_probe_keys_beyond_the_first_column_range_skip_the_batch() -> None:
    """Probe keys whose first column lies wholly below or above the batch's find nothing
    without packing the batch's keys; keys that reach its first or last key are found."""
    first = np.repeat(np.arange(100, 120, dtype=np.int64), 3)
    second = np.tile(np.array([5, 7, 9], np.int64), 20)
    b = _batch([first, second], seed=4)
    for lo, hi in ((0, 100), (120, 200)):
        probe = [np.arange(lo, hi, dtype=np.int64), np.full(hi - lo, 7, np.int64)]
        _check(b, probe)
    assert b._packed is None  # (not looked at: skipped by its range)
    edges = [np.array([90, 95, 100, 119, 119, 130], np.int64), np.array([7, 7, 5, 8, 9, 7])]
    _check(b, edges)
