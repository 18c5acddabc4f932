"""A from-scratch reference for differential dataflow: collections recomputed at each time.

Why it exists: the engine is incremental, columnar and clever; this module is none of those.
It states what every operator *means* as plain dict/loop code over whole collections, so the
conformance tests can compare the engine's output against a recomputation from scratch at
every time that matters (DD's ``tests/reduce_reference.rs`` habit). It shares no code with the
engine: from ``ddflow`` it imports only ``Product`` (to build and take apart times); its own
time order, time join, diff algebra and operators are written here again. Clarity beats speed.

Meaning of a collection (the formula every function below rests on)::

    accumulate(U, t) = { d : sum(r for (d, s, r) in U if s <= t) }   with zero sums dropped

Invariants and conventions:

* updates are ``(data, time, diff)``; an *accumulated collection* is a ``dict`` data -> diff
  with no zero diffs;
* times are ``int`` or ``Product(outer, inner)`` (nestable). They are compared through their
  flat tuples of ints (outer components first), componentwise: ``le`` is "every component
  <=", ``join`` the componentwise maximum, ``meet`` the componentwise minimum;
* diffs are ints (or floats), tuples of diffs (componentwise, zero iff every part is zero), or
  objects with ``plus(other)`` and ``is_zero()`` (optionally ``negate()``, ``multiply(o)``);
* every operator function takes accumulated collections and returns one. The engine's
  output at time ``t`` must equal ``op(accumulate(input, t), ...)`` for every ``t``; the
  ``*_total`` operators mean exactly what ``count`` / ``distinct`` / ``threshold`` mean.
* DD semantics throughout (not SQL's): ``distinct`` and ``threshold`` see every key whose
  count is *non-zero*, negative counts included; ``join`` / ``semijoin`` multiply diffs;
  ``antijoin(c, k) = c - semijoin(c, k)``.

Loops (the fixed point recomputed from scratch on accumulated collections, never
incrementally; there are no iteration counters here, only whole collections)::

    iterate(initial, body):       x_0 = initial,  x_{i+1} = body(x_i)            until equal
    iterate_fold(initial, body):  x_0 = {},       x_{i+1} = body(x_i) + initial  until equal

``iterate`` is DD's ``iterate`` (and ``Variable(scope, initial)``); ``iterate_fold`` is its
monoid form (``iterate(..., fold_initial=True)``, a ``Variable`` without an initial value):
``initial`` is added again every round and nothing is subtracted, so it works for diffs
without negation such as ``MinSum`` (``+`` is the diff's ``plus``). Both compare successive
collections with ``==`` after consolidation and raise ``RuntimeError`` when no fixed point
appears within ``limit`` rounds (the engine raises ``IterationLimitError`` instead). The
engine's loop output at an outer time ``t`` must equal this applied to the inputs
accumulated at ``t``; a body that reads several loop variables (mutual recursion) is one
``iterate`` over a tuple-keyed collection, or a plain loop in the test.

What it leaves out: progress, frontiers, compaction, physical batching, iteration counters.
Those are not observable in an accumulated collection, which is the point.

``join`` is both the lattice join of two times and the relational join of two key-value
collections: it dispatches on whether its arguments are dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ddflow.core.time import Product

__all__ = [
    "accumulate",
    "add_diffs",
    "antijoin",
    "concat",
    "consolidate",
    "count",
    "count_total",
    "distinct",
    "distinct_total",
    "explode",
    "filter",
    "flat_map",
    "flatten_time",
    "group_by_key",
    "interesting_times",
    "is_zero",
    "iterate",
    "iterate_fold",
    "join",
    "join_map",
    "le",
    "map",
    "max_by_key",
    "top_k_by_key",
    "meet",
    "min_by_key",
    "multiply_diffs",
    "negate",
    "negate_diff",
    "reduce",
    "reduce_abelian",
    "semijoin",
    "threshold",
    "threshold_total",
]

Update = tuple[Any, Any, Any]
Coll = dict[Any, Any]


# --------------------------------------------------------------------------------------------
# Times
# --------------------------------------------------------------------------------------------


def _is_int(x: Any) -> bool:
    # numpy integers are accepted through __index__; bools are not times.
    if isinstance(x, bool):
        return False
    try:
        x.__index__()
    except (AttributeError, TypeError):
        return False
    return True


def flatten_time(t: Any) -> tuple[int, ...]:
    """The flat tuple of ints of a time: ``(t,)`` for an int, outer parts then inner parts."""
    if _is_int(t):
        return (int(t),)
    if isinstance(t, Product):
        return flatten_time(t.outer) + flatten_time(t.inner)
    raise TypeError(f"not a time (int or Product): {t!r}")


def _rebuild(template: Any, flat: Iterable[int]) -> Any:
    """The time shaped like ``template`` whose flat tuple is ``flat``."""
    it = iter(flat)

    def build(shape: Any) -> Any:
        if _is_int(shape):
            return next(it)
        return Product(build(shape.outer), build(shape.inner))

    return build(template)


def le(a: Any, b: Any) -> bool:
    """``a <= b`` in the componentwise (product) order of the flat tuples."""
    fa, fb = flatten_time(a), flatten_time(b)
    if len(fa) != len(fb):
        raise TypeError(f"times of different shapes: {a!r} and {b!r}")
    return all(x <= y for x, y in zip(fa, fb, strict=True))


def _time_join(a: Any, b: Any) -> Any:
    fa, fb = flatten_time(a), flatten_time(b)
    if len(fa) != len(fb):
        raise TypeError(f"times of different shapes: {a!r} and {b!r}")
    return _rebuild(a, (max(x, y) for x, y in zip(fa, fb, strict=True)))


def meet(a: Any, b: Any) -> Any:
    """The greatest time ``<=`` both (componentwise minimum), shaped like ``a``."""
    fa, fb = flatten_time(a), flatten_time(b)
    if len(fa) != len(fb):
        raise TypeError(f"times of different shapes: {a!r} and {b!r}")
    return _rebuild(a, (min(x, y) for x, y in zip(fa, fb, strict=True)))


def interesting_times(*update_lists: Iterable[Update]) -> list[Any]:
    """Every time of the given updates plus all their joins, sorted by flat tuple.

    The set is closed under ``join`` (pairwise joins repeated to a fixed point), which for a
    partial order is where a collection recomputed from scratch can change.
    """
    times: dict[tuple[int, ...], Any] = {}
    for updates in update_lists:
        for _data, t, _diff in updates:
            times.setdefault(flatten_time(t), t)
    while True:
        current = list(times.values())
        new: dict[tuple[int, ...], Any] = {}
        for i, a in enumerate(current):
            for b in current[i + 1 :]:
                j = _time_join(a, b)
                fj = flatten_time(j)
                if fj not in times:
                    new.setdefault(fj, j)
        if not new:
            break
        times.update(new)
    return [times[k] for k in sorted(times)]


# --------------------------------------------------------------------------------------------
# Diffs
# --------------------------------------------------------------------------------------------


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) or _is_int(x) or hasattr(x, "__float__")


def is_zero(d: Any) -> bool:
    """Whether a diff is zero: ``== 0`` for numbers, all parts zero for tuples, ``is_zero()``."""
    if isinstance(d, tuple):
        return all(is_zero(x) for x in d)
    if hasattr(d, "is_zero"):
        return bool(d.is_zero())
    return bool(d == 0)


def add_diffs(a: Any, b: Any) -> Any:
    """``a + b`` for diffs: numbers add, tuples add componentwise, objects use ``plus``."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) != len(b):
            raise TypeError(f"tuple diffs of different lengths: {a!r} and {b!r}")
        return tuple(add_diffs(x, y) for x, y in zip(a, b, strict=True))
    if hasattr(a, "plus"):
        return a.plus(b)
    if _is_number(a) and _is_number(b):
        return a + b
    raise TypeError(f"cannot add diffs {a!r} and {b!r}")


def negate_diff(d: Any) -> Any:
    """``-d``: numbers negate, tuples componentwise, objects by ``negate()`` or ``multiply(-1)``."""
    if isinstance(d, tuple):
        return tuple(negate_diff(x) for x in d)
    if hasattr(d, "negate"):
        return d.negate()
    if hasattr(d, "multiply"):
        return d.multiply(-1)
    if _is_number(d):
        return -d
    raise TypeError(f"cannot negate diff {d!r}")


def multiply_diffs(a: Any, b: Any) -> Any:
    """``a * b``, ``a`` the left diff (DD's ``a.multiply(b)``).

    Numbers multiply; a tuple times a number (either side) scales each part; an object uses
    ``multiply`` if it has it, else an int ``b`` means ``a`` added ``|b|`` times (negated if
    ``b < 0``).
    """
    if _is_number(a) and _is_number(b) and not hasattr(a, "plus") and not hasattr(b, "plus"):
        return a * b
    if isinstance(a, tuple) and _is_number(b):
        return tuple(multiply_diffs(x, b) for x in a)
    if isinstance(b, tuple) and _is_number(a):
        return tuple(multiply_diffs(a, x) for x in b)
    if hasattr(a, "multiply"):
        return a.multiply(b)
    if _is_int(b) and hasattr(a, "plus"):
        n = int(b)
        if n == 0:
            raise TypeError(f"cannot multiply {a!r} by 0 without a zero of its type")
        base = a if n > 0 else negate_diff(a)
        out = base
        for _ in range(abs(n) - 1):
            out = add_diffs(out, base)
        return out
    if _is_int(a) and hasattr(b, "plus"):
        return multiply_diffs(b, a)
    raise TypeError(f"cannot multiply diffs {a!r} and {b!r}")


def _add_into(coll: Coll, data: Any, diff: Any) -> None:
    """``coll[data] += diff``, keeping zero diffs out (entries are removed when they cancel)."""
    if data in coll:
        total = add_diffs(coll[data], diff)
        if is_zero(total):
            del coll[data]
        else:
            coll[data] = total
    elif not is_zero(diff):
        coll[data] = diff


def accumulate(updates: Iterable[Update], t: Any) -> Coll:
    """The collection at time ``t``: per data, the sum of diffs of updates with time ``<= t``.

    Zero sums are dropped. Summation runs in input order (diffs are commutative anyway).
    """
    # Sum into a staging dict first: a partial sum may be zero and later become non-zero.
    sums: dict[Any, Any] = {}
    for data, time, diff in updates:
        if le(time, t):
            sums[data] = add_diffs(sums[data], diff) if data in sums else diff
    return {d: r for d, r in sums.items() if not is_zero(r)}


# --------------------------------------------------------------------------------------------
# Operators on accumulated collections
# --------------------------------------------------------------------------------------------


def _from_pairs(pairs: Iterable[tuple[Any, Any]]) -> Coll:
    sums: dict[Any, Any] = {}
    for data, diff in pairs:
        sums[data] = add_diffs(sums[data], diff) if data in sums else diff
    return {d: r for d, r in sums.items() if not is_zero(r)}


def consolidate(coll: Mapping[Any, Any]) -> Coll:
    """The same collection (consolidation is invisible once accumulated); zeros dropped."""
    return _from_pairs(coll.items())


def map(coll: Mapping[Any, Any], f: Callable[[Any], Any]) -> Coll:  # noqa: A001 - DD's name
    """``{f(d): r}``, diffs of records with equal images added."""
    return _from_pairs((f(d), r) for d, r in coll.items())


def filter(coll: Mapping[Any, Any], p: Callable[[Any], Any]) -> Coll:  # noqa: A001 - DD's name
    """The records for which ``p`` is true, diffs unchanged."""
    return _from_pairs((d, r) for d, r in coll.items() if p(d))


def flat_map(coll: Mapping[Any, Any], f: Callable[[Any], Iterable[Any]]) -> Coll:
    """Each record replaced by every element of ``f(record)``, each with the record's diff."""
    return _from_pairs((out, r) for d, r in coll.items() for out in f(d))


def explode(coll: Mapping[Any, Any], f: Callable[[Any], Iterable[tuple[Any, Any]]]) -> Coll:
    """Each record replaced by ``f(record)``'s ``(data, diff2)`` with diff ``diff2 * diff``."""
    return _from_pairs((out, multiply_diffs(r2, r)) for d, r in coll.items() for out, r2 in f(d))


def concat(*colls: Mapping[Any, Any]) -> Coll:
    """The sum of the collections."""
    return _from_pairs((d, r) for c in colls for d, r in c.items())


def negate(coll: Mapping[Any, Any]) -> Coll:
    """Every diff negated."""
    return _from_pairs((d, negate_diff(r)) for d, r in coll.items())


def group_by_key(coll: Mapping[Any, Any]) -> dict[Any, list[tuple[Any, Any]]]:
    """``{key: [(val, diff), ...]}`` of a collection of ``(key, val)`` records."""
    groups: dict[Any, list[tuple[Any, Any]]] = {}
    for (k, v), r in coll.items():
        groups.setdefault(k, []).append((v, r))
    return groups


def _relational_join(
    left: Mapping[Any, Any], right: Mapping[Any, Any], f: Callable[[Any, Any, Any], Any]
) -> Coll:
    rgroups = group_by_key(right)
    pairs: list[tuple[Any, Any]] = []
    for (k, v1), r1 in left.items():
        for v2, r2 in rgroups.get(k, ()):
            pairs.append((f(k, v1, v2), multiply_diffs(r1, r2)))
    return _from_pairs(pairs)


def join(a: Any, b: Any) -> Any:
    """Times: the least upper bound (componentwise maximum), shaped like ``a``.

    Key-value collections (dicts of ``(k, v) -> diff``): ``{(k, (v1, v2)): r1 * r2}``.
    """
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return _relational_join(a, b, lambda k, v1, v2: (k, (v1, v2)))
    return _time_join(a, b)


def join_map(
    left: Mapping[Any, Any], right: Mapping[Any, Any], f: Callable[[Any, Any, Any], Any]
) -> Coll:
    """``{f(k, v1, v2): r1 * r2}`` over matching keys."""
    return _relational_join(left, right, f)


def semijoin(coll: Mapping[Any, Any], keys: Mapping[Any, Any]) -> Coll:
    """``{(k, v): r * keys[k]}`` for keys present in ``keys`` (diffs multiply, as in DD)."""
    return _from_pairs(
        ((k, v), multiply_diffs(r, keys[k])) for (k, v), r in coll.items() if k in keys
    )


def antijoin(coll: Mapping[Any, Any], keys: Mapping[Any, Any]) -> Coll:
    """``coll - semijoin(coll, keys)`` (DD's definition)."""
    return concat(coll, negate(semijoin(coll, keys)))


def reduce(
    coll: Mapping[Any, Any],
    logic: Callable[[Any, list[tuple[Any, Any]]], Iterable[tuple[Any, Any]]],
) -> Coll:
    """``{(k, out): r2}`` for ``(out, r2)`` in ``logic(k, group)``, for each non-empty group.

    ``group`` is the key's ``[(val, diff)]`` sorted by value, diffs non-zero; ``logic`` is
    never called for a key with no values.
    """
    pairs: list[tuple[Any, Any]] = []
    for k, group in group_by_key(coll).items():
        vals = sorted(group, key=lambda vr: vr[0])
        if vals:
            pairs.extend(((k, out), r2) for out, r2 in logic(k, vals))
    return _from_pairs(pairs)


reduce_abelian = reduce


def count(coll: Mapping[Any, Any]) -> Coll:
    """``{(key, total): 1}`` for each key with a non-zero total diff (the total is the count)."""
    return {(k, r): 1 for k, r in consolidate(coll).items()}


def distinct(coll: Mapping[Any, Any]) -> Coll:
    """``{key: 1}`` for each key with a non-zero count (negative counts included, as in DD)."""
    return {k: 1 for k in consolidate(coll)}


def threshold(coll: Mapping[Any, Any], f: Callable[[Any], Any]) -> Coll:
    """``{key: f(count)}`` for each key with a non-zero count; zero results dropped."""
    return _from_pairs((k, f(r)) for k, r in consolidate(coll).items())


count_total = count
distinct_total = distinct
threshold_total = threshold


def min_by_key(coll: Mapping[Any, Any]) -> Coll:
    """``{(k, least v): 1}`` over the values of ``k`` with a non-zero count."""
    groups = group_by_key(consolidate(coll))
    return {(k, min(v for v, _ in group)): 1 for k, group in groups.items()}


def top_k_by_key(coll: Mapping[Any, Any], k: int) -> Coll:
    """The ``k`` least values of each key, ``{(key, v): places}``: values in order, a value
    of count ``c`` takes ``min(c, places left)``. Counts must be non-negative."""
    out: Coll = {}
    for key, group in group_by_key(consolidate(coll)).items():
        left = k
        for v, c in sorted(group):
            if c < 0:
                raise ValueError(f"top_k_by_key: negative count {c} for {(key, v)!r}")
            if left <= 0:
                break
            out[(key, v)] = min(c, left)
            left -= out[(key, v)]
    return out


def max_by_key(coll: Mapping[Any, Any]) -> Coll:
    """``{(k, greatest v): 1}`` over the values of ``k`` with a non-zero count."""
    groups = group_by_key(consolidate(coll))
    return {(k, max(v for v, _ in group)): 1 for k, group in groups.items()}


def iterate(
    initial: Mapping[Any, Any],
    body: Callable[[Coll], Mapping[Any, Any]],
    limit: int = 10_000,
    *,
    fold: bool = False,
) -> Coll:
    """The fixed point of ``body`` from ``initial``: ``x_0 = initial``, ``x_{i+1} =
    body(x_i)`` until two successive collections are equal; ``x`` is returned.

    ``body`` gets and returns accumulated collections (dicts data -> diff). With ``fold`` it
    is ``iterate_fold(initial, body, limit)``. Raises ``RuntimeError`` if no fixed point is
    reached within ``limit`` applications of ``body``.
    """
    if fold:
        return iterate_fold(initial, body, limit)
    x = consolidate(initial)
    for _ in range(limit):
        nxt = consolidate(body(x))
        if nxt == x:
            return x
        x = nxt
    raise RuntimeError(f"no fixed point within {limit} steps")


def iterate_fold(
    initial: Mapping[Any, Any], body: Callable[[Coll], Mapping[Any, Any]], limit: int = 10_000
) -> Coll:
    """The monoid fixed point: ``x_0 = {}``, ``x_{i+1} = concat(body(x_i), initial)`` until
    two successive collections are equal (nothing is ever subtracted: fine for ``MinSum``).

    Raises ``RuntimeError`` if no fixed point is reached within ``limit`` rounds.
    """
    start = consolidate(initial)
    x: Coll = {}
    for _ in range(limit):
        nxt = concat(body(x), start)
        if nxt == x:
            return x
        x = nxt
    raise RuntimeError(f"no fixed point within {limit} steps")
