"""Record shapes known when the dataflow is built: given input shapes and declared ones
(``map(..., shape=)``, ``reduce(..., shape=)``, ...), every operator's output shape is known
before any record flows, shape errors are raised while building, and the records that do
flow have the shape announced."""

from __future__ import annotations

from typing import Any

import pytest

import ddflow as dd
from ddflow.core.columns import Leaf, Tup, infer_layout


def _worker() -> tuple[dd.Worker, Any, dd.Collection, Any, dd.Collection]:
    w = dd.Worker()
    pin, pairs = w.new_collection(shape=(0, 0))  # (key, value)
    lin, leaves = w.new_collection(shape=0)  # single values
    return w, pin, pairs, lin, leaves


def test_keyed_operators_on_single_values_fail_while_building() -> None:
    """Joins, reduces and keyed totals of records that are not pairs fail as they are built."""
    _, _, pairs, _, leaves = _worker()
    for build in (
        lambda: leaves.join(pairs),
        lambda: pairs.join(leaves),
        lambda: leaves.semijoin(pairs),
        lambda: leaves.reduce(lambda k, vs: [(1, 1)]),
        lambda: leaves.min(),
        lambda: leaves.min_total(),
        lambda: leaves.top_k(2),
        lambda: pairs.count().join(leaves),
    ):
        with pytest.raises(dd.DataError, match="needs \\(key, value\\) records"):
            build()


def test_concat_of_different_shapes_fails_while_building() -> None:
    _, _, pairs, _, leaves = _worker()
    with pytest.raises(dd.DataError, match="concat"):
        pairs.concat(leaves)


def test_declared_map_shape_is_checked_downstream_while_building() -> None:
    """A map declaring single values cannot be joined; one declaring pairs can."""
    _, _, _, _, leaves = _worker()
    with pytest.raises(dd.DataError, match="needs \\(key, value\\) records"):
        leaves.map(lambda x: x + 1, shape=0).join(leaves.map(lambda x: (x, x), shape=(0, 0)))
    joined = leaves.map(lambda x: (x, x), shape=(0, 0)).join(
        leaves.map(lambda x: (x, -x), shape=(0, 0))
    )
    assert joined.stream.layout == Tup((Leaf(), Tup((Leaf(), Leaf()))))
    with pytest.raises(dd.DataError, match="needs \\(key, value\\) records"):
        leaves.flat_map(lambda x: [x], shape=0).reduce(lambda k, vs: [(1, 1)])
    with pytest.raises(dd.DataError, match="needs \\(key, value\\) records"):
        leaves.map(lambda x: (x, x), shape=(0, 0)).join_map(
            leaves.map(lambda x: (x, x), shape=(0, 0)), lambda k, a, b: k, shape=0
        ).min()


def test_records_of_another_shape_than_declared_are_refused() -> None:
    """A map whose records do not have the declared shape raises DataError at run."""
    for shape, f in (((0, 0), lambda x: x), (0, lambda x: (x, x)), ((0, (0, 0)), lambda x: (x, x))):
        w = dd.Worker()
        inp, c = w.new_collection(shape=0)
        c.map(f, shape=shape).capture()
        inp.insert(3)
        inp.advance_to(1)
        with pytest.raises(dd.DataError, match="shape"):
            w.run()


def test_a_tuple_where_a_single_value_belongs_is_refused() -> None:
    """Records whose field is a tuple after the shape fixed a single value there are
    refused (they used to land in an object column of tuples)."""
    w = dd.Worker()
    inp, c = w.new_collection(shape=0)
    c.map(lambda x: (x, (x, x)) if x else (x, x)).capture()
    inp.insert(0)
    inp.advance_to(1)
    w.run()
    inp.insert(1)
    inp.advance_to(2)
    with pytest.raises(dd.DataError, match="tuple"):
        w.run()


def _all_outputs(pairs: dd.Collection, leaves: dd.Collection) -> dict[str, dd.Collection]:
    keyed = leaves.map(lambda x: (x % 3, x), shape=(0, 0))
    return {
        "count": pairs.count(),
        "count_total": pairs.count_total(),
        "count_total of values": leaves.count_total(),
        "distinct": pairs.distinct(),
        "distinct_total": pairs.distinct_total(),
        "threshold_total": pairs.threshold_total(lambda n: 1),
        "join": pairs.join(keyed),
        "semijoin": pairs.semijoin(leaves),
        "antijoin": pairs.antijoin(leaves),
        "join_map": pairs.join_map(keyed, lambda k, a, b: (a, (b, k)), shape=(0, (0, 0))),
        "min": pairs.min(),
        "max_total": pairs.max_total(),
        "top_k": pairs.top_k(2),
        "reduce": pairs.reduce(lambda k, vs: [((len(vs), k), 1)], shape=(0, 0)),
        "map": leaves.map(lambda x: ((x, x), x), shape=((0, 0), 0)),
        "filter": pairs.filter(lambda r: r[0] > 0),
        "negate": pairs.negate(),
        "concat": pairs.concat(keyed),
        "consolidate": pairs.consolidate(),
    }


def test_every_output_shape_is_known_at_build_and_is_the_shape_that_flows() -> None:
    """Each operator's output shape is known before any record flows, and every record it
    then outputs has exactly that shape."""
    w, pin, pairs, lin, leaves = _worker()
    outs = _all_outputs(pairs, leaves)
    built = {name: c.stream.layout for name, c in outs.items()}
    for name, layout in built.items():
        assert layout is not None, name
    caps = {name: c.capture() for name, c in outs.items()}
    for x in range(1, 7):
        pin.insert((x % 4, x))
        lin.insert(x)
    pin.advance_to(1)
    lin.advance_to(1)
    w.run()
    for name, cap in caps.items():
        records = [d for d, _t, _r in cap.updates()]
        assert records, name
        for r in records:
            assert infer_layout(r) == built[name], (name, r, built[name])
        assert outs[name].stream.layout == built[name], name


def test_outputs_keep_their_diff_types() -> None:
    """Join outputs carry the product of their inputs' diff types; reductions the type
    their reducer declares; both known at build."""
    w = dd.Worker()
    _, ints = w.new_collection(shape=(0, 0))
    _, sums = w.new_collection(shape=(0, 0), diff=dd.Sum)
    assert ints.join(sums).diff_type == sums.diff_type
    assert sums.join(ints).diff_type == sums.diff_type
    assert ints.join(ints).diff_type == ints.diff_type
    assert sums.count().diff_type == ints.diff_type
    assert sums.count_total().diff_type == ints.diff_type
    assert sums.count_total().stream.layout == Tup(
        (Tup((Leaf(), Leaf())), sums.diff_type.value_layout())
    )
    assert ints.reduce_abelian(lambda k, vs: [(1, dd.Sum(1, 1))], diff=dd.Sum).diff_type == (
        sums.diff_type
    )
