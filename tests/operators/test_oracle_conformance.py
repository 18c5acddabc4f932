"""Every operator's output, accumulated at every time that matters, equals a recomputation.

The model is DD's ``tests/reduce_reference.rs``: random inputs with diffs +1/-1 (so updates
cancel), fed through ``InputSession``s in random rounds, with int times and with
``Product(outer, inner)`` times; the captured output accumulated at every input time, every
output time and all their joins must equal ``ddflow.testing.oracle`` applied to the inputs
accumulated at that time. A second test per operator checks split invariance: one batch, one
update per flush and a random split give the same output collection at every time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow import run_job
from ddflow.testing import oracle as O
from ddflow.testing.strategies import Schedule, schedules

S, KV = "scalar", "kv"
EXAMPLES = int(os.environ.get("DDFLOW_ORACLE_EXAMPLES", "40"))
SPLIT_EXAMPLES = int(os.environ.get("DDFLOW_SPLIT_EXAMPLES", "15"))
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
SPLIT_SETTINGS = settings(
    max_examples=SPLIT_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@dataclass(frozen=True)
class Case:
    """One operator (or chain) under test: its dataflow and its oracle."""

    name: str
    kinds: tuple[str, ...]  # data kind of each input
    build: Callable[..., Any]  # Collections -> Collection
    oracle: Callable[..., dict[Any, Any]]  # accumulated dicts -> accumulated dict
    total: bool = False  # uses a *_total operator: int times only

    def __repr__(self) -> str:
        return self.name


# ---- user functions, shared by the dataflow and the oracle ---------------------------------


def columns_only(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``f`` for ``vectorized=True``: fails unless called with numpy columns in record shape."""

    def g(cols: Any) -> Any:
        parts = cols if isinstance(cols, tuple) else (cols,)
        assert all(isinstance(c, np.ndarray) for c in parts), f"not numpy columns: {cols!r}"
        return f(cols)

    return g


def mod3(x: Any) -> Any:
    return x % 3


def affine(x: Any) -> Any:
    return (x * 3 + 1) % 5


def swap_mod(kv: Any) -> Any:
    return (kv[1], kv[0] % 2)


def is_even(x: Any) -> Any:
    return x % 2 == 0


def key_le_val(kv: Any) -> Any:
    return kv[0] <= kv[1]


def upto(x: int) -> list[int]:
    return list(range(x % 3))


def upto_columns(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``upto`` over columns: row ``i`` gives ``0 .. x[i] % 3 - 1``."""
    counts = x % 3
    rows = np.repeat(np.arange(len(x)), counts)
    starts = np.cumsum(counts) - counts
    return rows, np.arange(len(rows)) - np.repeat(starts, counts)


def affine_each(x: np.ndarray) -> tuple[None, np.ndarray]:
    """``affine`` as a flat map with one output per input row (rows None)."""
    return None, affine(x)


def explode_int(x: int) -> list[tuple[int, int]]:
    # Diff x - 1 is zero for x == 1: such an output must vanish.
    return [(x % 2, x - 1), (x, 1)]


def explode_one(x: int) -> list[tuple[int, int]]:
    """One output per record (``explode_one_columns`` per row), none for 3."""
    return [] if x == 3 else [(x % 2, x - 1)]


def explode_one_columns(keep: bool) -> Callable[[np.ndarray], Any]:
    """``explode_one`` over columns: ``(keys, diffs)``, with a keep mask if ``keep`` (and
    else 3 kept, with diff 2)."""

    def f(x: np.ndarray) -> Any:
        return (x % 2, x - 1, x != 3) if keep else (x % 2, x - 1)

    return f


def explode_pair(kv: tuple[int, int]) -> list[tuple[int, tuple[int, int]]]:
    return [(kv[0], (kv[1], 1))]


def explode_value(kv: tuple[int, int]) -> list[tuple[int, int]]:
    return [(kv[0], kv[1])]


def mod3_key(kv: tuple[int, int]) -> tuple[int, int]:
    return (kv[0] % 3, kv[1])


def explode_half(kv: tuple[int, int]) -> list[tuple[int, tuple[float, int]]]:
    return [(kv[0], (kv[1] / 2, 1))]


def r_min(k: Any, vals: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return [(vals[0][0], 1)]


def r_sum(k: Any, vals: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return [(sum(v * r for v, r in vals), 1)]


def r_top2(k: Any, vals: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return [(v, r) for v, r in vals[:2]]


def r_nvals(k: Any, vals: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return [(len(vals), 1)]


def r_cancelling(k: Any, vals: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    # Outputs that cancel inside one call, plus the largest value with its diff.
    return [(0, 1), (0, -1), (vals[-1][0], vals[-1][1])]


def ra_parity(k: Any, vals: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return [(v % 2, r) for v, r in vals]


def ra_pair(k: Any, vals: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return [(0, (sum(r for _, r in vals), sum(v * r for v, r in vals)))]


def sq_minus_one(c: Any) -> Any:
    return c * c - 1


def more_than_one(c: Any) -> Any:
    return 1 if c > 1 else 0


def jm(k: Any, v1: Any, v2: Any) -> Any:
    return (k, v1 + v2)


def edge_src(e: Any) -> Any:
    return e[0]


def second(kc: Any) -> Any:
    return kc[1]


def pair_sum(r: Any) -> Any:
    return (r[0], r[1][0] + r[1][1])


# ---- the cases --------------------------------------------------------------------------------

# ---- loops: small graphs whose edges are the KV records (k -> v) and roots the scalars --------


def node_zero(n: Any) -> Any:
    return (n, 0)


def hop(k: Any, d: Any, dst: Any) -> Any:
    return (dst, d + 1)


def to_dst(k: Any, z: Any, dst: Any) -> Any:
    return dst


def capped_succ(v: Any) -> Any:
    return min(v + 1, 6)


def first_of(kc: Any) -> Any:
    return kc[0]


def weighted_edge(kv: Any) -> list[tuple[Any, Any]]:
    return [((kv[0], kv[1]), dd.MinSum(kv[1] % 3 + 1))]


def root_at_zero(n: Any) -> list[tuple[Any, Any]]:
    return [(n, dd.MinSum(0))]


def edge_dst(e: Any) -> Any:
    return e[1]


def minsum_value(r: Any) -> Any:
    return (r[0], r[1].value)


def tagged(tag: int) -> Callable[[Any], Any]:
    def f(n: Any) -> Any:
        return (tag, n)

    return f


def reach_build(e: Any, r: Any) -> Any:
    edges, roots = e.distinct(), r.distinct()

    def body(x: Any) -> Any:
        return (
            x.map(node_zero)
            .join_map(edges.enter(x.scope), to_dst)
            .concat(roots.enter(x.scope))
            .distinct()
        )

    return roots.iterate(body)


def reach_oracle(e: Any, r: Any) -> Any:
    edges, roots = O.distinct(e), O.distinct(r)
    return O.iterate(
        roots, lambda x: O.distinct(O.concat(O.join_map(O.map(x, node_zero), edges, to_dst), roots))
    )


def bfs_build(e: Any, r: Any, python_reduce: bool = False) -> Any:
    edges, nodes = e.distinct(), r.distinct().map(node_zero)

    def body(x: Any) -> Any:
        y = x.join_map(edges.enter(x.scope), hop).concat(nodes.enter(x.scope))
        return y.reduce(r_min) if python_reduce else y.min()

    return nodes.iterate(body)


def bfs_oracle(e: Any, r: Any) -> Any:
    edges, nodes = O.distinct(e), O.map(O.distinct(r), node_zero)
    return O.iterate(nodes, lambda x: O.min_by_key(O.concat(O.join_map(x, edges, hop), nodes)))


def count_loop_build(a: Any) -> Any:
    return a.distinct().iterate(lambda x: x.concat(x.map(capped_succ)).count().map(first_of))


def count_loop_oracle(a: Any) -> Any:
    return O.iterate(
        O.distinct(a), lambda x: O.map(O.count(O.concat(x, O.map(x, capped_succ))), first_of)
    )


def parity_build(e: Any, r: Any) -> Any:
    """Mutual recursion: nodes at even and at odd distance (walks) from the roots."""
    scope = e.worker.iterative(parent=e.scope, limit=200)
    edges = e.distinct().enter(scope)
    roots = r.distinct().enter(scope)
    even = dd.Variable(scope, roots)
    odd = dd.Variable(scope)

    def step(x: Any) -> Any:
        return x.map(node_zero).join_map(edges, to_dst)

    odd_next = step(even).distinct()
    even_next = step(odd).concat(roots).distinct()
    even.set(even_next)
    odd.set(odd_next)
    return even_next.leave().map(tagged(0)).concat(odd_next.leave().map(tagged(1)))


def parity_oracle(e: Any, r: Any) -> Any:
    edges, roots = O.distinct(e), O.distinct(r)

    def step(x: Any) -> Any:
        return O.join_map(O.map(x, node_zero), edges, to_dst)

    even, odd = roots, {}
    while True:
        ne = O.distinct(O.concat(step(odd), roots))
        no = O.distinct(step(even))
        if ne == even and no == odd:
            break
        even, odd = ne, no
    return O.concat(O.map(even, tagged(0)), O.map(odd, tagged(1)))


def nested_build(e: Any, r: Any) -> Any:
    """Reachability as a loop whose body is itself a loop (nested Product times)."""
    edges = e.distinct()

    def outer(x: Any) -> Any:
        ex = edges.enter(x.scope)

        def inner(y: Any) -> Any:
            return y.map(node_zero).join_map(ex.enter(y.scope), to_dst).concat(y).distinct()

        return x.iterate(inner).concat(x).distinct()

    return r.distinct().iterate(outer)


def monoid_build(e: Any, r: Any) -> Any:
    start = r.distinct().explode(root_at_zero)

    def body(x: Any) -> Any:
        w = e.distinct().explode(weighted_edge).enter(x.scope)
        return w.semijoin(x).map(edge_dst).reduce_solve("min")

    return start.iterate(body, fold_initial=True).count().map(minsum_value)


def monoid_oracle(e: Any, r: Any) -> Any:
    edges = [(k, v, v % 3 + 1) for (k, v) in O.distinct(e)]
    dist = {n: 0 for n in O.distinct(r)}
    changed = True
    while changed:
        changed = False
        for k, v, w in edges:
            if k in dist and dist[k] + w < dist.get(v, 1 << 60):
                dist[v] = dist[k] + w
                changed = True
    return {(n, d): 1 for n, d in dist.items()}


def hier_sum_oracle(a: Any) -> Any:
    out = {}
    for k, group in O.group_by_key(O.consolidate(a)).items():
        s, n = sum(v * r for v, r in group), sum(r for _, r in group)
        if (s, n) != (0, 0):
            out[(k, s)] = 1
    return out


def hier_count_oracle(a: Any) -> Any:
    out = {}
    for k, group in O.group_by_key(O.consolidate(a)).items():
        n = sum(r for _, r in group)
        if n:
            out[(k, n)] = 1
    return out


CASES = [
    # linear operators
    Case("map", (S,), lambda a: a.map(mod3), lambda a: O.map(a, mod3)),
    Case("map_kv", (KV,), lambda a: a.map(swap_mod), lambda a: O.map(a, swap_mod)),
    Case(
        "map_vectorized",
        (S,),
        lambda a: a.map(columns_only(affine), vectorized=True),
        lambda a: O.map(a, affine),
    ),
    Case(
        "map_vectorized_kv",
        (KV,),
        lambda a: a.map(columns_only(swap_mod), vectorized=True),
        lambda a: O.map(a, swap_mod),
    ),
    Case("filter", (S,), lambda a: a.filter(is_even), lambda a: O.filter(a, is_even)),
    Case(
        "filter_vectorized",
        (S,),
        lambda a: a.filter(columns_only(is_even), vectorized=True),
        lambda a: O.filter(a, is_even),
    ),
    Case(
        "filter_vectorized_kv",
        (KV,),
        lambda a: a.filter(columns_only(key_le_val), vectorized=True),
        lambda a: O.filter(a, key_le_val),
    ),
    Case("flat_map", (S,), lambda a: a.flat_map(upto), lambda a: O.flat_map(a, upto)),
    Case(
        "flat_map_vectorized",
        (S,),
        lambda a: a.flat_map(columns_only(upto_columns), vectorized=True),
        lambda a: O.flat_map(a, upto),
    ),
    Case(
        "flat_map_vectorized_one_each",
        (S,),
        lambda a: a.flat_map(columns_only(affine_each), vectorized=True),
        lambda a: O.map(a, affine),
    ),
    Case("explode", (S,), lambda a: a.explode(explode_int), lambda a: O.explode(a, explode_int)),
    Case(
        "explode_vectorized",
        (S,),
        lambda a: a.explode(columns_only(explode_one_columns(False)), vectorized=True),
        lambda a: O.explode(a, lambda x: [(x % 2, x - 1)]),
    ),
    Case(
        "explode_vectorized_keep",
        (S,),
        lambda a: a.explode(columns_only(explode_one_columns(True)), vectorized=True),
        lambda a: O.explode(a, explode_one),
    ),
    Case(
        "explode_pair_diff",
        (KV,),
        lambda a: a.explode(explode_pair),
        lambda a: O.explode(a, explode_pair),
    ),
    Case(
        "explode_pair_count",
        (KV,),
        lambda a: a.explode(explode_pair).count(),
        lambda a: O.count(O.explode(a, explode_pair)),
    ),
    Case("concat", (S, S), lambda a, b: a.concat(b), lambda a, b: O.concat(a, b)),
    Case("concat_many", (S, S), lambda a, b: a.concat(b, a), lambda a, b: O.concat(a, b, a)),
    Case("negate", (S,), lambda a: a.negate(), lambda a: O.negate(a)),
    Case("concat_negate", (S,), lambda a: a.concat(a.negate()), lambda a: {}),
    Case(
        "consolidate",
        (S,),
        lambda a: a.map(mod3).consolidate(),
        lambda a: O.consolidate(O.map(a, mod3)),
    ),
    # arrangements followed by something
    Case(
        "arrange_by_key_join",
        (KV, KV),
        lambda a, b: a.arrange_by_key().join(b.arrange_by_key()),
        lambda a, b: O.join(a, b),
    ),
    Case(
        "arrange_by_key_reduce",
        (KV,),
        lambda a: a.arrange_by_key().reduce(r_min),
        lambda a: O.reduce(a, r_min),
    ),
    Case(
        "arrange_by_key_shared",
        (KV,),
        lambda a: _shared(a.arrange_by_key()),
        lambda a: O.concat(O.map(O.join(a, a), pair_sum), O.reduce(a, r_sum)),
    ),
    Case(
        "arrange_by_self_semijoin",
        (KV, S),
        lambda a, b: a.semijoin(b.arrange_by_self()),
        lambda a, b: O.semijoin(a, b),
    ),
    Case(
        "arrange_by_self_count",
        (S,),
        lambda a: a.arrange_by_self().count(),
        lambda a: O.count(a),
    ),
    # joins
    Case("join", (KV, KV), lambda a, b: a.join(b), lambda a, b: O.join(a, b)),
    Case("join_self", (KV,), lambda a: a.join(a), lambda a: O.join(a, a)),
    Case("join_map", (KV, KV), lambda a, b: a.join_map(b, jm), lambda a, b: O.join_map(a, b, jm)),
    Case("semijoin", (KV, S), lambda a, b: a.semijoin(b), lambda a, b: O.semijoin(a, b)),
    Case("antijoin", (KV, S), lambda a, b: a.antijoin(b), lambda a, b: O.antijoin(a, b)),
    # reductions
    Case("reduce_min", (KV,), lambda a: a.reduce(r_min), lambda a: O.reduce(a, r_min)),
    Case("reduce_sum", (KV,), lambda a: a.reduce(r_sum), lambda a: O.reduce(a, r_sum)),
    Case("reduce_top2", (KV,), lambda a: a.reduce(r_top2), lambda a: O.reduce(a, r_top2)),
    Case("reduce_nvals", (KV,), lambda a: a.reduce(r_nvals), lambda a: O.reduce(a, r_nvals)),
    Case(
        "reduce_cancelling",
        (KV,),
        lambda a: a.reduce(r_cancelling),
        lambda a: O.reduce(a, r_cancelling),
    ),
    Case(
        "reduce_abelian",
        (KV,),
        lambda a: a.reduce_abelian(ra_parity),
        lambda a: O.reduce_abelian(a, ra_parity),
    ),
    Case(
        "reduce_abelian_pair_diff",
        (KV,),
        lambda a: a.reduce_abelian(ra_pair),
        lambda a: O.reduce_abelian(a, ra_pair),
    ),
    Case("count", (S,), lambda a: a.count(), lambda a: O.count(a)),
    Case("count_kv_records", (KV,), lambda a: a.count(), lambda a: O.count(a)),
    Case("distinct", (S,), lambda a: a.distinct(), lambda a: O.distinct(a)),
    Case(
        "threshold",
        (S,),
        lambda a: a.threshold(sq_minus_one),
        lambda a: O.threshold(a, sq_minus_one),
    ),
    Case(
        "threshold_01",
        (S,),
        lambda a: a.threshold(more_than_one),
        lambda a: O.threshold(a, more_than_one),
    ),
    # total-order operators
    Case("count_total", (S,), lambda a: a.count_total(), lambda a: O.count_total(a), True),
    Case(
        "count_total_kv_records",
        (KV,),
        lambda a: a.count_total(),
        lambda a: O.count_total(a),
        True,
    ),
    Case("distinct_total", (S,), lambda a: a.distinct_total(), lambda a: O.distinct_total(a), True),
    Case(
        "threshold_total",
        (S,),
        lambda a: a.threshold_total(sq_minus_one),
        lambda a: O.threshold_total(a, sq_minus_one),
        True,
    ),
    Case(
        "explode_count_total",
        (KV,),
        lambda a: a.explode(explode_pair).count_total(),
        lambda a: O.count_total(O.explode(a, explode_pair)),
        True,
    ),
    Case(
        "explode_int_count_total",
        (KV,),
        lambda a: a.explode(explode_value).count_total(),
        lambda a: O.count_total(O.explode(a, explode_value)),
        True,
    ),
    # the total-order count kept per record in a dict (few distinct records)
    Case(
        "count_total_few",
        (S,),
        lambda a: a.count_total(few=True),
        lambda a: O.count_total(a),
        True,
    ),
    Case(
        "count_total_few_kv_records",
        (KV,),
        lambda a: a.count_total(few=True),
        lambda a: O.count_total(a),
        True,
    ),
    Case(
        "explode_count_total_few",
        (KV,),
        lambda a: a.explode(explode_pair, diff=(0, 0)).count_total(few=True),
        lambda a: O.count_total(O.explode(a, explode_pair)),
        True,
    ),
    Case(
        "explode_float_count_total_few",
        (KV,),
        lambda a: a.map(mod3_key).explode(explode_half, diff=(0.0, 0)).count_total(few=True),
        lambda a: O.count_total(O.explode(O.map(a, mod3_key), explode_half)),
        True,
    ),
    Case(
        "degrees_total_few",
        (KV,),
        lambda a: a.map(edge_src).count_total(few=True).map(second).count_total(few=True),
        lambda a: O.count_total(O.map(O.count_total(O.map(a, edge_src)), second)),
        True,
    ),
    # chains
    Case(
        "degrees_total",
        (KV,),
        lambda a: a.map(edge_src).count_total().map(second).count_total(),
        lambda a: O.count_total(O.map(O.count_total(O.map(a, edge_src)), second)),
        True,
    ),
    Case(
        "degrees",
        (KV,),
        lambda a: a.map(edge_src).count().map(second).count(),
        lambda a: O.count(O.map(O.count(O.map(a, edge_src)), second)),
    ),
    # min / max, any lattice and totally ordered; the two-stage reduce for skewed keys
    Case("min", (KV,), lambda a: a.min(), lambda a: O.min_by_key(a)),
    Case("max", (KV,), lambda a: a.max(), lambda a: O.max_by_key(a)),
    Case(
        "top_k", (KV,), lambda a: a.distinct().top_k(2), lambda a: O.top_k_by_key(O.distinct(a), 2)
    ),
    Case(
        "top_k_counts",
        (KV,),
        lambda a: a.distinct().concat(a.distinct().filter(lambda kv: kv[1] % 2 == 0)).top_k(3),
        lambda a: O.top_k_by_key(
            O.concat(O.distinct(a), O.filter(O.distinct(a), lambda kv: kv[1] % 2 == 0)), 3
        ),
    ),
    Case("min_total", (KV,), lambda a: a.min_total(), lambda a: O.min_by_key(a), True),
    Case("max_total", (KV,), lambda a: a.max_total(), lambda a: O.max_by_key(a), True),
    Case(
        "hierarchical_min",
        (KV,),
        lambda a: a.reduce_hierarchical("min", buckets=2),
        lambda a: O.min_by_key(a),
    ),
    Case(
        "hierarchical_max",
        (KV,),
        lambda a: a.reduce_hierarchical("max", buckets=2),
        lambda a: O.max_by_key(a),
    ),
    Case(
        "hierarchical_sum",
        (KV,),
        lambda a: a.reduce_hierarchical("sum", buckets=2),
        hier_sum_oracle,
    ),
    Case(
        "hierarchical_count",
        (KV,),
        lambda a: a.reduce_hierarchical("count", buckets=2),
        hier_count_oracle,
    ),
    # loops: fixed points checked against a from-scratch iteration
    Case("iterate_reach", (KV, S), reach_build, reach_oracle),
    Case("iterate_bfs", (KV, S), bfs_build, bfs_oracle),
    Case("iterate_bfs_python_reduce", (KV, S), lambda e, r: bfs_build(e, r, True), bfs_oracle),
    Case("iterate_count", (S,), count_loop_build, count_loop_oracle),
    Case("iterate_mutual_variables", (KV, S), parity_build, parity_oracle),
    Case("iterate_nested", (KV, S), nested_build, reach_oracle),
    Case(
        "count_join",
        (KV, KV),
        lambda a, b: a.map(edge_src).count().join(b),
        lambda a, b: O.join(O.count(O.map(a, edge_src)), b),
    ),
    Case(
        "join_reduce",
        (KV, KV),
        lambda a, b: a.join(b).map(pair_sum).reduce(r_min),
        lambda a, b: O.reduce(O.map(O.join(a, b), pair_sum), r_min),
    ),
    Case(
        "distinct_antijoin",
        (KV, KV),
        lambda a, b: a.antijoin(b.map(edge_src).distinct()),
        lambda a, b: O.antijoin(a, O.distinct(O.map(b, edge_src))),
    ),
]


def _shared(arr: Any) -> Any:
    """One arrangement read by a self-join and by a reduce."""
    return arr.join(arr).map(pair_sum).concat(arr.reduce(r_sum))


CASES_ANY_TIME = [c for c in CASES if not c.total]
CASES_TOTAL = [c for c in CASES if c.total]


# ---- running a dataflow on a schedule -----------------------------------------------------


@dataclass
class Run:
    """What a dataflow produced: its consolidated updates and its accumulation at each time."""

    updates: list[tuple[Any, Any, Any]]
    at: dict[Any, dict[Any, Any]]


def _plain(x: Any) -> Any:
    """Python scalars for numpy scalars, recursively through tuples (for readable diffs)."""
    if isinstance(x, tuple):
        return tuple(_plain(y) for y in x)
    if isinstance(x, np.generic):
        return x.item()
    return x


def _plain_coll(c: dict[Any, Any]) -> dict[Any, Any]:
    return {_plain(k): _plain(v) for k, v in c.items()}


def time_sample(product: bool | str) -> Any:
    """The ``time=`` sample for ``new_collection``: int, Product, or a nested Product."""
    if product == "nested":
        return dd.Product(dd.Product(0, 0), 0)
    return dd.Product(0, 0) if product else 0


def run_schedule(case: Case, schedule: Schedule, product: bool | str, midway: bool = False) -> Run:
    """Build ``case`` in a fresh worker, feed ``schedule``, close inputs, run to completion.

    With ``midway``, after every ``worker.run()`` between rounds the output must already equal
    the oracle at every interesting time that no session's frontier is at or before (a time
    no future input can change).
    """
    with dd.Worker() as worker:
        sessions, colls = [], []
        for _ in case.kinds:
            if product:
                inp, coll = worker.new_collection(time=time_sample(product))
            else:
                inp, coll = worker.new_collection()
            sessions.append(inp)
            colls.append(coll)
        cap = case.build(*colls).capture()
        closed = [False] * len(sessions)
        for j, rnd in enumerate(schedule.rounds):
            for n, (i, (data, time, diff)) in enumerate(rnd):
                s = sessions[i]
                if schedule.use_plain[j][n] and s.time() == time:
                    s.update(data, diff)
                else:
                    s.update_at(data, time, diff)
            for i, target in enumerate(schedule.advance_targets(j)):
                if closed[i]:
                    continue
                if target is None:
                    sessions[i].close()
                    closed[i] = True
                else:
                    if target != sessions[i].time():
                        sessions[i].advance_to(target)
                    sessions[i].flush()
            action = schedule.actions[j]
            if action == "step":
                worker.step()
            elif action == "run":
                worker.run()
                if midway:
                    frontier = [s.time() for i, s in enumerate(sessions) if not closed[i]]
                    _check_final_times(case, schedule, cap, frontier, j)
        for i, s in enumerate(sessions):
            if not closed[i]:
                s.close()
        worker.run()
        updates = [(_plain(d), t, _plain(r)) for d, t, r in cap.updates()]
        times = O.interesting_times(*schedule.inputs, updates)
        at = {t: _plain_coll(cap.at(t)) for t in times}
    return Run(updates, at)


def _check_final_times(
    case: Case, schedule: Schedule, cap: Any, frontier: list[Any], round_index: int
) -> None:
    """Output at times not in advance of ``frontier`` already equals the oracle's."""
    sent = [
        [u for r in schedule.rounds[: round_index + 1] for (i, u) in r if i == k]
        for k in range(len(schedule.inputs))
    ]
    updates = [(_plain(d), t, _plain(r)) for d, t, r in cap.updates()]
    for t in O.interesting_times(*sent, updates):
        if any(O.le(f, t) for f in frontier):
            continue
        got, want = _plain_coll(cap.at(t)), expected_at(case, schedule, t)
        assert got == want, (
            f"{case.name} after round {round_index} (frontier {frontier}) at final time {t}: "
            f"expected {want}, got {got}\ninputs={schedule.inputs}\noutput so far={updates}"
        )


def expected_at(case: Case, schedule: Schedule, t: Any) -> dict[Any, Any]:
    """The oracle's output collection at ``t``."""
    return case.oracle(*[O.accumulate(ups, t) for ups in schedule.inputs])


def assert_consolidated(updates: list[tuple[Any, Any, Any]]) -> None:
    """No zero diffs and at most one update per ``(data, time)``."""
    seen = set()
    for d, t, r in updates:
        assert not O.is_zero(r), f"zero diff in captured updates: {(d, t, r)}"
        key = (repr(d), O.flatten_time(t))
        assert key not in seen, f"two updates for {(d, t)} in {updates}"
        seen.add(key)


def check_against_oracle(case: Case, schedule: Schedule, product: bool | str) -> None:
    """The captured output equals the oracle at every interesting time (and midway, once final)."""
    run = run_schedule(case, schedule, product, midway=True)
    assert_consolidated(run.updates)
    for t, got in run.at.items():
        want = expected_at(case, schedule, t)
        assert got == want, (
            f"{case.name} at time {t}: expected {want}, got {got}\n"
            f"inputs={schedule.inputs}\noutput updates={run.updates}"
        )


# ---- the tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@SETTINGS
@given(data=st.data())
def test_matches_oracle_int_times(case: Case, data: st.DataObject) -> None:
    """With int times, output at every interesting time equals the oracle's recomputation."""
    schedule = data.draw(schedules(case.kinds, product=False))
    check_against_oracle(case, schedule, product=False)


@pytest.mark.parametrize("case", CASES_ANY_TIME, ids=lambda c: c.name)
@SETTINGS
@given(data=st.data())
def test_matches_oracle_product_times(case: Case, data: st.DataObject) -> None:
    """With Product times, output at every interesting time equals the oracle's recomputation."""
    schedule = data.draw(schedules(case.kinds, product=True))
    check_against_oracle(case, schedule, product=True)


NESTED = {
    "join",
    "reduce_min",
    "reduce_top2",
    "reduce_cancelling",
    "count",
    "distinct",
    "threshold",
    "degrees",
    "join_reduce",
    "antijoin",
}


@pytest.mark.parametrize("case", [c for c in CASES if c.name in NESTED], ids=lambda c: c.name)
@SETTINGS
@given(data=st.data())
def test_matches_oracle_nested_product_times(case: Case, data: st.DataObject) -> None:
    """With Product(Product(a, b), c) times, output equals the oracle at interesting times."""
    schedule = data.draw(schedules(case.kinds, product="nested"))
    check_against_oracle(case, schedule, product="nested")


@pytest.mark.parametrize("case", CASES_TOTAL, ids=lambda c: c.name)
def test_total_operators_reject_product_times(case: Case) -> None:
    """A *_total operator in a Product-time worker raises dd.TimeError."""
    with dd.Worker() as worker, pytest.raises(dd.TimeError):
        inputs = [worker.new_collection(time=dd.Product(0, 0)) for _ in case.kinds]
        cap = case.build(*[c for _, c in inputs]).capture()
        for (inp, _), kind in zip(inputs, case.kinds, strict=True):
            inp.insert(1 if kind == S else (1, 2))
            inp.close()
        worker.run()
        cap.updates()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@SPLIT_SETTINGS
@given(data=st.data())
def test_split_invariance(case: Case, data: st.DataObject) -> None:
    """One batch, one update per flush and a random split give the same output at every time."""
    product = False if case.total else data.draw(st.booleans(), label="product")
    schedule = data.draw(schedules(case.kinds, product=product))
    variants = {
        "random rounds": schedule,
        "one batch": Schedule.single_batch(schedule.inputs),
        "one update per flush": Schedule.one_per_round(schedule.inputs, action="step"),
        "one update per flush, run each": Schedule.one_per_round(schedule.inputs, action="run"),
    }
    runs = {name: run_schedule(case, s, product) for name, s in variants.items()}
    # Consolidated updates determine the accumulation everywhere; compare at the union of all
    # variants' interesting times (each run's own `at` is checked by the oracle tests).
    times = O.interesting_times(*schedule.inputs, *(r.updates for r in runs.values()))
    base_name, base = next(iter(runs.items()))
    for name, run in runs.items():
        assert_consolidated(run.updates)
        for t in times:
            want, got = O.accumulate(base.updates, t), O.accumulate(run.updates, t)
            assert got == want, (
                f"{case.name} at time {t}: {base_name!r} gives {want}, {name!r} gives {got}\n"
                f"inputs={schedule.inputs}\n{base_name}: {base.updates}\n{name}: {run.updates}"
            )


@SETTINGS
@given(data=st.data())
def test_inspect_sees_the_output_updates(data: st.DataObject) -> None:
    """inspect(f) is called with updates that accumulate to the captured output."""
    product = data.draw(st.booleans(), label="product")
    schedule = data.draw(schedules((KV,), product=product))
    seen: list[tuple[Any, Any, Any]] = []
    case = Case(
        "inspect",
        (KV,),
        lambda a: a.reduce(r_sum).inspect(lambda u: seen.append(u)),
        lambda a: O.reduce(a, r_sum),
    )
    run = run_schedule(case, schedule, product)
    seen_plain = [(_plain(d), t, _plain(r)) for d, t, r in seen]
    for t, got in run.at.items():
        assert O.accumulate(seen_plain, t) == got == expected_at(case, schedule, t)


def test_oracle_interesting_times_closed_under_join() -> None:
    """The oracle's interesting times include every pairwise (and repeated) join."""
    P = dd.Product
    ups = [(0, P(2, 0), 1), (0, P(0, 2), 1), (0, P(1, 1), -1)]
    times = O.interesting_times(ups)
    assert set(times) == {P(2, 0), P(0, 2), P(1, 1), P(2, 2), P(2, 1), P(1, 2)}
    assert O.accumulate(ups, P(2, 2)) == {0: 1}
    assert O.accumulate(ups, P(1, 1)) == {0: -1}


# ---- the same cases on every runtime ------------------------------------------------------


def _changes(kind: str, ups: list[tuple[Any, Any, Any]], product: bool | str) -> Any:
    """One input's update list as a columnar log."""
    from ddflow import Changes
    from ddflow.core.time import time_kind_of

    tk = time_kind_of(time_sample(product))
    n = len(ups)
    times = np.array([tk.flatten(t) for _, t, _ in ups], dtype=np.int64).reshape(n, tk.dim)
    diffs = np.array([d for _, _, d in ups], dtype=np.int64)
    if kind == KV:
        data: Any = (
            np.array([r[0] for r, _, _ in ups], dtype=np.int64),
            np.array([r[1] for r, _, _ in ups], dtype=np.int64),
        )
    else:
        data = np.array([r for r, _, _ in ups], dtype=np.int64)
    return Changes(data, times, diffs)


def _check_runtime(
    runtime: Any, cases: list[Case], data: st.DataObject, product: bool | str
) -> None:
    """One job runs every case; cases with the same input kinds share their inputs."""
    kinds = sorted({c.kinds for c in cases})
    drawn = {k: data.draw(schedules(k, product=product), label=str(k)) for k in kinds}
    inputs = {
        f"{'-'.join(k)}/{i}": _changes(kind, drawn[k].inputs[i], product)
        for k in kinds
        for i, kind in enumerate(k)
    }

    def build(colls: dict[str, Any]) -> dict[str, Any]:
        return {
            c.name: c.build(*[colls[f"{'-'.join(c.kinds)}/{i}"] for i in range(len(c.kinds))])
            for c in cases
        }

    got = runtime.run(build, inputs, time=time_sample(product))
    ref = run_job(build, inputs, time=time_sample(product)) if runtime.name != "inprocess" else got
    for c in cases:
        updates = [(_plain(d), t, _plain(r)) for d, t, r in got[c.name].updates()]
        if runtime.name != "inprocess":
            assert updates == [(_plain(d), t, _plain(r)) for d, t, r in ref[c.name].updates()], (
                f"{c.name} on {runtime.name}: output differs from the in-process run"
            )
        schedule = drawn[c.kinds]
        for t in O.interesting_times(*schedule.inputs, updates):
            want = expected_at(c, schedule, t)
            assert _plain_coll(got[c.name].at(t)) == want, (
                f"{c.name} on {runtime.name} at {t}: expected {want}, got "
                f"{_plain_coll(got[c.name].at(t))}\ninputs={schedule.inputs}"
            )


def _runtime_settings(runtime: Any) -> settings:
    return settings(
        max_examples=runtime.examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


@pytest.mark.parametrize("product", [False, True, "nested"], ids=["int", "product", "nested"])
def test_every_runtime_matches_oracle(runtime: Any, product: bool | str) -> None:
    """Every case, all in one job per example, on each runtime: equal to the in-process run
    and to the oracle at every interesting time (int, Product and nested Product times)."""
    cases = CASES if product is False else CASES_ANY_TIME
    if product == "nested":
        cases = [c for c in cases if c.name in NESTED]

    @_runtime_settings(runtime)
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        _check_runtime(runtime, cases, data, product)

    check()
