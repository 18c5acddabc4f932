"""Law tests for the core: lattices, advance_by, diff algebra, consolidation."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow import DiffPair, MinSum, Product, Sum
from ddflow.core.diff import diff_type_of
from ddflow.core.frontier import Antichain
from ddflow.core.time import advance_by, columns_advance_by, time_kind_of
from ddflow.core.updates import Updates, consolidate

small = st.integers(0, 6)
products = st.builds(Product, small, small)
nested = st.builds(Product, products, small)


def le(a, b):
    return a.less_equal(b) if isinstance(a, Product) else a <= b


def join(a, b):
    return a.join(b) if isinstance(a, Product) else max(a, b)


def meet(a, b):
    return a.meet(b) if isinstance(a, Product) else min(a, b)


@given(
    st.one_of(
        st.tuples(small, small, small),
        st.tuples(products, products, products),
        st.tuples(nested, nested, nested),
    )
)
def test_lattice_laws(abc):
    """join/meet are commutative, associative, idempotent, absorb, and bound in the order."""
    a, b, c = abc
    assert join(a, b) == join(b, a) and meet(a, b) == meet(b, a)
    assert join(join(a, b), c) == join(a, join(b, c))
    assert meet(meet(a, b), c) == meet(a, meet(b, c))
    assert join(a, a) == a and meet(a, a) == a
    assert join(a, meet(a, b)) == a and meet(a, join(a, b)) == a
    assert le(a, join(a, b)) and le(meet(a, b), a)
    assert le(a, b) == (join(a, b) == b)


@given(st.tuples(nested, nested))
def test_flatten_keeps_order(ab):
    """Flattened times compare componentwise exactly like the nested Product order."""
    a, b = ab
    kind = time_kind_of(a)
    fa, fb = kind.flatten(a), kind.flatten(b)
    assert le(a, b) == all(x <= y for x, y in zip(fa, fb, strict=True))
    assert kind.unflatten(fa) == a


@given(
    st.tuples(small, small),
    st.lists(st.tuples(small, small), min_size=1, max_size=4),
    st.lists(st.tuples(small, small), min_size=1, max_size=8),
)
def test_advance_by_sound(t, frontier, probes):
    """A time and its advanced form compare the same with every time beyond the frontier."""
    f = Antichain.of(frontier, 2)
    adv = advance_by(t, f.elements)
    col = columns_advance_by(np.array([t], dtype=np.int64), f.arr)[0]
    assert tuple(col.tolist()) == adv
    for p in probes:
        if f.less_equal(p):
            assert all(x <= y for x, y in zip(t, p, strict=True)) == all(
                x <= y for x, y in zip(adv, p, strict=True)
            )


@given(
    st.integers(1, 3).flatmap(
        lambda d: st.tuples(
            st.just(d),
            st.lists(st.tuples(*[small] * d), max_size=4),
            st.lists(st.tuples(*[small] * d), max_size=12),
        )
    )
)
def test_beyond_mask_is_less_equal_per_row(case):
    """``beyond_mask`` over a column of times marks exactly the times some element of the
    frontier is ``<=`` (none for the empty frontier), in every dimension."""
    dim, frontier, times = case
    f = Antichain.of(frontier, dim)
    arr = np.array(times, dtype=np.int64).reshape(len(times), dim)
    assert f.beyond_mask(arr).tolist() == [
        any(all(x <= y for x, y in zip(e, t, strict=True)) for e in f.elements) for t in times
    ]


diff_values = st.one_of(
    st.lists(st.integers(-5, 5), min_size=3, max_size=3),
    st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), min_size=3, max_size=3),
    st.lists(st.builds(Sum, st.integers(-3, 3), st.integers(-3, 3)), min_size=3, max_size=3),
    st.lists(st.builds(DiffPair, st.integers(-3, 3), st.integers(-3, 3)), min_size=3, max_size=3),
    st.lists(st.builds(MinSum, st.integers(0, 9)), min_size=3, max_size=3),
)


@given(diff_values)
def test_diff_laws(vals):
    """plus is commutative and associative; negate gives the inverse for abelian types."""
    dt = diff_type_of(vals[0])
    a, b, c = vals
    assert dt.py_plus(a, b) == dt.py_plus(b, a)
    assert dt.py_plus(dt.py_plus(a, b), c) == dt.py_plus(a, dt.py_plus(b, c))
    if dt.abelian:
        assert dt.py_is_zero(dt.py_plus(a, dt.py_negate(a)))
    col = dt.from_values(vals)
    assert dt.to_values(col) == vals
    total = dt.to_values(dt.sum_segments(col, np.array([0])))[0]
    assert total == dt.py_plus(dt.py_plus(a, b), c)


def test_sum_zero_only_when_both_zero():
    """Sum(0, 1) is not zero, Sum(0, 0) is."""
    dt = diff_type_of(Sum)
    assert not dt.py_is_zero(Sum(0, 1)) and dt.py_is_zero(Sum(0, 0))


def test_minsum_is_min_plus():
    """MinSum adds by min and multiplies by +."""
    dt = diff_type_of(MinSum)
    assert dt.py_plus(MinSum(3), MinSum(5)) == MinSum(3)
    out_t, prod = dt.multiply(np.array([3]), dt, np.array([4]))
    assert dt.to_values(prod) == [MinSum(7)]


updates = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.integers(-2, 2)), max_size=40)


def _updates(rows):
    data = np.array([r[0] for r in rows], dtype=np.int64)
    times = np.array([[r[1]] for r in rows], dtype=np.int64).reshape(len(rows), 1)
    diffs = np.array([r[2] for r in rows], dtype=np.int64)
    return Updates((data,), times, diffs, diff_type_of(int))


def _as_dict(u):
    return {
        (d, t): x
        for d, t, x in zip(
            u.data[0].tolist(), u.times[:, 0].tolist(), u.diffs.tolist(), strict=True
        )
    }


@given(updates)
def test_consolidation(rows):
    """Consolidation sums equal (data, time), drops zeros, and is idempotent."""
    c = consolidate(_updates(rows))
    expect = {}
    for d, t, x in rows:
        expect[(d, t)] = expect.get((d, t), 0) + x
    assert _as_dict(c) == {k: v for k, v in expect.items() if v}
    c2 = consolidate(c)
    assert _as_dict(c2) == _as_dict(c)
    keys = list(zip(c.data[0].tolist(), c.times[:, 0].tolist(), strict=True))
    assert keys == sorted(keys)


@settings(max_examples=50)
@given(
    st.lists(
        st.tuples(st.integers(-3, 3), st.floats(-5, 5, allow_nan=False), st.text(max_size=2)),
        max_size=30,
    )
)
def test_consolidation_mixed_columns(rows):
    """Consolidation over int, float and string columns agrees with a dict."""
    from ddflow.core.columns import infer_layout

    if not rows:
        return
    layout = infer_layout(rows[0])
    cols = layout.to_columns(rows)
    n = len(rows)
    u = Updates(
        cols, np.zeros((n, 1), dtype=np.int64), np.ones(n, dtype=np.int64), diff_type_of(int)
    )
    c = consolidate(u)
    got = dict(zip(layout.to_records(c.data), c.diffs.tolist(), strict=True))
    expect = {}
    for r in rows:
        expect[r] = expect.get(r, 0) + 1
    assert got == expect
