"""Columns and int diff arithmetic at the edges: every value kept exactly, every sum,
product and negation of int diffs equal to Python's, whatever the column dtypes."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.core.columns import concat_columns, lex_order, make_column
from ddflow.core.diff import INT_DIFF, Sum, diff_type_of, int_column
from ddflow.core.updates import Updates, consolidate
from ddflow.testing.strategies import edge_diffs, edge_ints, edge_numbers

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
SETTINGS = settings(max_examples=200, deadline=None)


def _column(values: list[Any], how: str) -> np.ndarray:
    """``values`` as an int64 column (when they fit) or as Python ints."""
    if how == "object" or not all(I64_MIN <= v <= I64_MAX for v in values):
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out
    return np.array(values, dtype=np.int64)


def _exact(got: list[Any], want: list[Any]) -> None:
    """Equal values, and an int that no float holds stays an int."""
    assert got == want
    for g, w in zip(got, want, strict=True):
        if type(w) is int and abs(w) > 2**53:
            assert type(g) is int, (g, w)


# ---- columns --------------------------------------------------------------------------------


@SETTINGS
@given(st.lists(st.lists(edge_numbers(), max_size=5), min_size=1, max_size=4))
def test_concat_columns_keeps_every_value(parts: list[list[Any]]) -> None:
    """Columns made of edge numbers, concatenated, hold the same values exactly."""
    cols = [make_column(p) for p in parts]
    for c, p in zip(cols, parts, strict=True):
        _exact(c.tolist(), [int(v) if isinstance(v, bool) and c.dtype != object else v for v in p])
    out = concat_columns(cols)
    _exact(out.tolist(), [v for c in cols for v in c.tolist()])


def test_concat_columns_of_one_dtype_is_plain_concatenate() -> None:
    """Parts of one dtype give numpy's concatenation (the common path)."""
    a, b = np.arange(3), np.arange(4)
    out = concat_columns([a, b])
    assert out.dtype == np.int64 and out.tolist() == [0, 1, 2, 0, 1, 2, 3]
    assert concat_columns([a, np.array([0.5])]).dtype == np.float64  # small ints: exact floats
    assert concat_columns([np.array([2**53 + 1]), np.array([0.5])]).dtype == object
    assert concat_columns([np.empty(0), np.array([2**60 + 1])]).tolist() == [2**60 + 1]


def test_make_column_keeps_ints_as_ints() -> None:
    """Ints beyond int64 (without floats) are Python ints, not floats; floats stay floats."""
    assert make_column([2**62, 2**63]).tolist() == [2**62, 2**63]
    assert [type(v) for v in make_column([2**62, 2**63]).tolist()] == [int, int]
    assert make_column([2**53 + 1, 0.5]).tolist() == [2**53 + 1, 0.5]
    assert make_column([3, 0.5]).dtype == np.float64


@pytest.mark.parametrize("n", [1, 3])
def test_lex_order_refuses_frozensets(n: int) -> None:
    """frozensets, ordered by inclusion, cannot be sorted: DataError (one row too)."""
    col = np.empty(n, dtype=object)
    col[:] = [frozenset({i}) for i in range(n)]
    with pytest.raises(dd.DataError, match="frozenset"):
        lex_order([col])


# ---- int diffs ------------------------------------------------------------------------------

ints64 = edge_ints(beyond=False)
hows = st.sampled_from(["int64", "object"])


@SETTINGS
@given(st.lists(ints64, min_size=1, max_size=8), st.data(), hows)
def test_sum_segments_is_exact(d: list[int], data: st.DataObject, how: str) -> None:
    """Segment sums of int diffs equal Python's sums (never wrapped), narrowed to int64
    when they fit."""
    cuts = sorted(
        set(
            data.draw(
                st.lists(st.integers(1, len(d) - 1), max_size=3) if len(d) > 1 else st.just([])
            )
        )
    )
    starts = np.array([0, *cuts], dtype=np.int64)
    got = INT_DIFF.sum_segments(_column(d, how), starts).tolist()
    bounds = [*cuts, len(d)]
    want = [sum(d[a:b]) for a, b in zip([0, *cuts], bounds, strict=True)]
    assert got == want


@SETTINGS
@given(st.lists(st.tuples(ints64, ints64), min_size=1, max_size=8), hows)
def test_add_scale_negate_are_exact(pairs: list[tuple[int, int]], how: str) -> None:
    """Elementwise add, multiply and negate of int diffs equal Python's."""
    a = _column([p[0] for p in pairs], how)
    b = _column([p[1] for p in pairs], "int64")
    assert INT_DIFF.add(a, b).tolist() == [x + y for x, y in pairs]
    assert INT_DIFF.scale(a, b).tolist() == [x * y for x, y in pairs]
    assert INT_DIFF.negate(a).tolist() == [-x for x, _ in pairs]
    dt, prod = INT_DIFF.multiply(a, INT_DIFF, b)
    assert prod.tolist() == [x * y for x, y in pairs]


@SETTINGS
@given(
    st.lists(st.tuples(ints64, st.lists(ints64, min_size=1, max_size=4)), min_size=1, max_size=5)
)
def test_bounded_running_sums_are_exact_across_keys(segs: list[tuple[int, list[int]]]) -> None:
    """With ``bounded`` (each key's running sums fit int64, as a trace's diff bound proves),
    running sums equal Python's even where sums across keys leave int64: runs of huge
    values of both signs side by side. Segments whose own sums leave int64 are dropped
    (the caller would not pass ``bounded`` then)."""
    kept: list[tuple[int, list[int]]] = []
    for base, vals in segs:
        acc, ok = base, True
        for v in vals:
            acc += v
            ok = ok and I64_MIN <= acc <= I64_MAX
        if ok:
            kept.append((base, vals))
    if not kept:
        return
    d = [v for _, vals in kept for v in vals]
    starts = np.cumsum([0] + [len(vals) for _, vals in kept[:-1]]).astype(np.int64)
    base = np.array([b for b, _ in kept], dtype=np.int64)
    got = INT_DIFF.running_sums(np.array(d, dtype=np.int64), starts, base, bounded=True)
    want = []
    for b, vals in kept:
        for v in vals:
            b += v
            want.append(b)
    assert got.tolist() == want
    # each row's value before it: the row above's, the base at a key's first row
    before = INT_DIFF.previous(got, starts, base)
    firsts = set(starts.tolist())
    assert before.tolist() == [
        int(base[starts.tolist().index(i)]) if i in firsts else want[i - 1] for i in range(len(d))
    ]


@SETTINGS
@given(st.lists(ints64, min_size=1, max_size=8), st.lists(ints64, min_size=1, max_size=3), hows)
def test_running_sums_are_exact(d: list[int], base: list[int], how: str) -> None:
    """Running sums per segment from a base equal Python's."""
    k = min(len(base), len(d))
    starts = np.linspace(0, len(d), k, endpoint=False).astype(np.int64)
    starts = np.unique(starts)
    base = base[: len(starts)]
    got = INT_DIFF.running_sums(_column(d, how), starts, _column(base, "int64")).tolist()
    want = []
    bounds = [*starts.tolist()[1:], len(d)]
    for seg, (lo, hi) in enumerate(zip(starts.tolist(), bounds, strict=True)):
        acc = base[seg]
        for v in d[lo:hi]:
            acc += v
            want.append(acc)
    assert got == want


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 3), edge_diffs()), min_size=1, max_size=300), st.booleans()
)
def test_consolidate_adds_diffs_exactly(rows: list[tuple[int, int]], tuple_diffs: bool) -> None:
    """consolidate (sorted and counting paths, int and Sum diffs) equals a Counter."""
    data = np.array([r for r, _ in rows], dtype=np.int64)
    ds = [d for _, d in rows]
    if tuple_diffs:
        dt = diff_type_of(Sum)
        diffs: Any = (int_column(ds), int_column([1] * len(ds)))
    else:
        dt, diffs = INT_DIFF, int_column(ds)
    u = consolidate(Updates((data,), np.zeros((len(rows), 1), np.int64), diffs, dt))
    want: Counter[int] = Counter()
    for r, d in rows:
        want[r] += d
    got = dict(zip(u.data[0].tolist(), dt.to_values(u.diffs), strict=True))
    if tuple_diffs:
        counts = Counter(r for r, _ in rows)
        assert got == {r: Sum(want[r], counts[r]) for r in counts}
    else:
        assert got == {r: d for r, d in want.items() if d}


def test_diffs_beyond_int64_narrow_back() -> None:
    """A sum back inside int64 is an int64 column again (the fast path resumes)."""
    d = int_column([2**63, -(2**63), 5])
    assert d.dtype == object
    s = INT_DIFF.sum_segments(d, np.array([0]))
    assert s.dtype == np.int64 and s.tolist() == [5]
