"""GROUP BY as dataflow: linear aggregates in diffs, the others as keyed reductions.

For a group key ``g`` the *linear part* is one record ``(g, (rows, n_1, s_1, ...))`` whose
diff components are added up by the total-order count: ``rows`` counts the group's rows,
``n_i`` the non-NULL values of argument ``i`` and ``s_i`` their sum (exact ints for
integers and decimals, floats for floating point). ``count(*)`` is ``rows``, ``count(x)``
is ``n``, ``sum(x)`` is ``s`` (NULL when ``n`` is 0), ``avg(x)`` is ``s / n``. A group
disappears when its last row does, except for an aggregate without GROUP BY: there a
constant row adds a "present" component of 1, so the one output row stays (``count(*)`` 0,
``sum`` NULL) on empty input.

``min``/``max`` reduce ``(g, x)`` for non-NULL ``x`` with ``min_total``/``max_total``
(strings by their text, not their codes); ``agg(DISTINCT x)`` counts and sums the
distinct ``(g, x)``. Each such part has at most one row per group and is attached to the
linear part by a left join on ``g`` (a group whose values are all NULL gets NULL).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ddflow.core.errors import DataError, TotalOverflowError
from ddflow.operators.reducers import BitFold, Concat, Mode, Quantile
from ddflow.sql.expr import (
    Call,
    Col,
    Ctx,
    Expr,
    Result,
    _div_half_up,
    _mul,
    _scale_up,
    decimal_checked,
    evaluate,
    intern_exprs,
)
from ddflow.sql.expr import narrow as _narrow
from ddflow.sql.lower import DescStr, chain, run_stages
from ddflow.sql.optimize import remap, uses
from ddflow.sql.plan import (
    MOMENT_FUNCS,
    PAIR_FUNCS,
    REDUCED_FUNCS,
    SPREAD_FUNCS,
    TRY,
    Agg,
    Aggregate,
    Join,
    grouped_by_join_key,
)
from ddflow.sql.rows import Field, Frame, mask_words, pack
from ddflow.sql.types import (
    SqlType,
    float_from_keys,
    float_keys,
)

__all__ = ["lower_aggregate"]


def _int_sum_column(v: np.ndarray) -> np.ndarray:
    """Values to sum as a diff component: ``int64``, or Python ints where some value leaves
    64 bits (a DECIMAL(38) value; the total-order count adds them exactly)."""
    return _narrow(v) if v.dtype == object else v


#: beside a floating-point sum, the counts of its +inf, -inf and NaN values: kept apart from
#: the finite values' total, they come and go exactly (inf - inf would be NaN for good)
_SPECIAL = ("pinf", "ninf", "nan")


#: the binary scale of the exact sums of DOUBLE values (``xs``) for a spread: every finite
#: double is a multiple of ``2**-1126`` as ``frexp`` cuts it (its squares of ``2**-2252``)
_XS_BITS = 1126


#: the power of the values each exact sum of DOUBLE values holds
_POWERS = {"xs": 1, "xq": 2, "x3": 3, "x4": 4}


def _mantissas(x: np.ndarray, ok: np.ndarray) -> tuple[list[int], list[int]]:
    """Each finite DOUBLE of ``x`` (0 where not ``ok``) as ``m << sh``, its value at scale
    ``2**_XS_BITS`` exactly: ``(m, sh)`` as Python ints."""
    f, e = np.frexp(np.where(ok, x, 0.0))
    m = (f * 2.0**53).astype(np.int64).tolist()  # (exact: a double has 53 bits)
    return m, (e.astype(np.int64) + (_XS_BITS - 53)).tolist()


def _objects(vals: list[int]) -> np.ndarray:
    out = np.empty(len(vals), dtype=object)
    out[:] = vals
    return out


def _exact_doubles(x: np.ndarray, ok: np.ndarray, kind: str) -> np.ndarray:
    """The finite DOUBLE values ``x`` (0 where not ``ok``) as exact Python ints at scale
    ``2**_XS_BITS`` (``xs``), or their squares, cubes, fourth powers at that scale's power
    (``xq``, ``x3``, ``x4``)."""
    m, sh = _mantissas(x, ok)
    k = _POWERS[kind]
    if k == 1:
        return _objects([a << b for a, b in zip(m, sh, strict=True)])
    return _objects([(a**k) << (k * b) for a, b in zip(m, sh, strict=True)])


def _exact_products(y: Result, x: Result) -> np.ndarray:
    """The products of two DOUBLE columns' finite values (0 where either is NULL or not
    finite) as exact Python ints at scale ``2**(2 * _XS_BITS)``."""
    (yv, yn), (xv, xn) = y, x
    fy, fx = float_from_keys(yv), float_from_keys(xv)
    ok = np.isfinite(fy) & np.isfinite(fx)
    for nl in (yn, xn):
        if nl is not None:
            ok &= ~nl
    my, sy = _mantissas(fy, ok)
    mx, sx = _mantissas(fx, ok)
    return _objects([(a * b) << (c + d) for a, c, b, d in zip(my, sy, mx, sx, strict=True)])


def sum_component(kind: str, arg: Expr, v: np.ndarray, nl: np.ndarray | None, n: int) -> np.ndarray:
    """The diff component ``kind`` (``n``, ``s`` or one of ``_SPECIAL``; for a spread also
    ``q``, the exact squares of int / decimal values, and ``xs`` / ``xq`` / ``bad``, exact
    sums of DOUBLE values and squares and the count of non-finite ones) of argument values
    ``v`` (NULL where ``nl``)."""
    if kind == "n":
        return np.ones(n, np.int64) if nl is None else (~nl).astype(np.int64)
    if kind == "q":
        x = v.astype(np.int64) if v.dtype == bool else v
        x = x if nl is None else np.where(nl, 0, x)
        return _int_sum_column(_mul(x, x))
    if kind in ("xs", "xq", "x3", "x4", "bad"):
        x = float_from_keys(v)
        ok = np.isfinite(x)
        present = ~nl if nl is not None else None
        if kind == "bad":
            return (~ok if present is None else ~ok & present).astype(np.int64)
        return _exact_doubles(x, ok if present is None else ok & present, kind)
    if arg.type.kind != "double":
        x = _int_sum_column(v.astype(np.int64) if v.dtype == bool else v)
        return x if nl is None else np.where(nl, 0, x)
    x = float_from_keys(v)
    if kind == "s":
        ok = np.isfinite(x)
        if nl is not None:
            ok &= ~nl
        return x if ok.all() else np.where(ok, x, 0.0)
    hit = np.isnan(x) if kind == "nan" else x == (np.inf if kind == "pinf" else -np.inf)
    if nl is not None:
        hit &= ~nl
    return hit.astype(np.int64)


def with_specials(
    total: np.ndarray, pinf: np.ndarray, ninf: np.ndarray, nan: np.ndarray
) -> np.ndarray:
    """A floating-point sum from its finite part and the counts of its +inf, -inf and NaN
    values: NaN with a NaN or both infinities, else an infinity if any."""
    if not (pinf.any() or ninf.any() or nan.any()):
        return total
    out = np.where(pinf > 0, np.inf, np.where(ninf > 0, -np.inf, total))
    return np.where((nan > 0) | ((pinf > 0) & (ninf > 0)), np.nan, out)


#: the components of a moment (``skewness``, ``kurtosis``) of a DOUBLE argument
_MOMENT_KINDS = ("n", "xs", "xq", "x3", "x4", "bad")


def _pair_parts(row: Call) -> list[tuple[str, Expr]]:
    """The components of a joint spread of ``row``'s ``(y, x)``, in the order
    ``pair_value`` reads them: the count of rows with both, each one's exact sum and sum
    of squares, the exact sum of products, each one's count of infinities and NaNs."""
    y, x = row.args
    return [
        ("n", x),
        ("xs", y),
        ("xs", x),
        ("xq", y),
        ("xq", x),
        ("xp", row),
        ("bad", y),
        ("bad", x),
    ]


class _Linear:
    """The components of the linear part's diff and where each aggregate reads them."""

    def __init__(self, aggs: tuple[Agg, ...], scalar: bool) -> None:
        self.scalar = scalar
        # ("present" | "rows" | a kind of ``_component``, its argument)
        self.parts: list[tuple[str, Expr | None]] = []
        if scalar:
            self.parts.append(("present", None))
        self.parts.append(("rows", None))
        self.index: dict[tuple[str, Any], int] = {}
        for a in aggs:
            if a.func in SPREAD_FUNCS:
                assert a.arg is not None
                self._add("n", a.arg)
                kinds = ("xs", "xq", "bad") if a.arg.type.kind == "double" else ("s", "q")
                for kind in kinds:
                    self._add(kind, a.arg)
                continue
            if a.func in MOMENT_FUNCS:
                assert a.arg is not None
                for kind in _MOMENT_KINDS:
                    self._add(kind, a.arg)
                continue
            if a.func in PAIR_FUNCS:
                assert isinstance(a.arg, Call)
                for kind, e in _pair_parts(a.arg):
                    self._add(kind, e)
                continue
            if a.distinct or a.func not in ("count", "count_star", "sum", "avg"):
                continue
            if a.func == "count_star":
                continue
            self._add("n", a.arg)
            if a.func in ("sum", "avg"):
                self._add("s", a.arg)
                if a.arg is not None and a.arg.type.kind == "double":
                    for kind in _SPECIAL:
                        self._add(kind, a.arg)
        # equal subexpressions of the arguments made one object, so a batch computes each
        # once (evaluation remembers arithmetic results by object)
        shared = iter(intern_exprs([arg for _, arg in self.parts if arg is not None]))
        self.parts = [(kind, None if arg is None else next(shared)) for kind, arg in self.parts]

    def _add(self, kind: str, arg: Expr | None) -> None:
        if (kind, arg) in self.index:
            return
        if kind == "n" and arg is not None and not arg.nullable:
            self.index[(kind, arg)] = self.rows_at()  # never NULL: counts the rows
            return
        self.index[(kind, arg)] = len(self.parts)
        self.parts.append((kind, arg))

    def rows_at(self) -> int:
        return 1 if self.scalar else 0

    def sample(self) -> tuple[Any, ...]:
        out: list[Any] = []
        for kind, arg in self.parts:
            if kind == "s" and arg is not None and arg.type.kind == "double":
                out.append(0.0)
            else:
                out.append(0)
        return tuple(out)


def _key_columns(
    fr: Frame, keys: tuple[Expr, ...], key_fields: tuple[Field, ...], ctx: Ctx
) -> tuple[np.ndarray, ...]:
    if not keys:
        return (np.zeros(fr.n, np.int64),)
    vals, nulls = [], []
    for k in keys:
        v, nl = evaluate(k, fr, ctx)
        vals.append(v.astype(np.int64) if v.dtype == bool else v)
        nulls.append(nl)
    return pack(vals, nulls, mask_words(key_fields), fr.n)


def lower_aggregate(plan: Aggregate, lw: Any, env: Any) -> Any:
    ctx: Ctx = lw.ctx
    over_join = _over_join(plan, lw, env)
    if over_join is not None:
        return over_join
    # the Filter / Project stages under the aggregate run inside its explode
    src, stages = chain(plan.input, lw, env)
    in_fields = plan.input.fields
    win = len(in_fields)
    nk = len(plan.keys)
    key_fields = plan.fields[:nk]
    kwidth = (nk + mask_words(key_fields)) if nk else 1
    lin = _Linear(plan.aggs, plan.scalar)
    sample = lin.sample()
    keys = plan.keys
    args = {a.arg for a in plan.aggs}
    if (
        not plan.scalar
        and plan.aggs
        and len(args) == 1
        and all(a.distinct and a.func in ("count", "sum", "avg") for a in plan.aggs)
        and plan.aggs[0].arg is not None
        and not plan.aggs[0].arg.nullable
    ):
        # only DISTINCT aggregates of one never-NULL argument: a group is present exactly
        # when it has a distinct value, so the distinct part alone gives every column
        part = _part(plan.aggs[0], src, stages, in_fields, keys, key_fields, lw, env)

        def slots(r: Any) -> Any:
            k, (cnt, total) = r
            return k, ((cnt,), (np.ones(len(cnt), np.int64), cnt, total))

        combined = part.map(slots, vectorized=True, name="group")
        return _finish(plan, combined, lin, [(a, part) for a in plan.aggs], [part], kwidth, ctx)

    if (
        not plan.scalar
        and plan.aggs
        and len({(a.func, a.arg) for a in plan.aggs}) == 1
        and plan.aggs[0].func in ("min", "max")
        and plan.aggs[0].arg is not None
        and not plan.aggs[0].arg.nullable
    ):
        # one min / max of a never-NULL argument (and no other aggregate): a group is
        # present exactly when it has a value, so the reduction alone gives every column
        part = _part(plan.aggs[0], src, stages, in_fields, keys, key_fields, lw, env)

        def value_slots(r: Any) -> Any:
            k, (v,) = r
            ones = np.ones(len(v), np.int64)
            return k, ((ones,), (ones, v))

        combined = part.map(value_slots, vectorized=True, name="group")
        return _finish(plan, combined, lin, [(a, part) for a in plan.aggs], [part], kwidth, ctx)

    def _cached(e: Expr, fr: Frame, cache: dict[Any, Any]) -> Result:
        got = cache.get(id(e))
        if got is None:
            got = cache[id(e)] = evaluate(e, fr, ctx)
        return got

    def explode(view: tuple[np.ndarray, ...]) -> Any:
        rows, cols, m = run_stages(view, stages, ctx)
        fr = Frame(cols, win, m)
        kcols = _key_columns(fr, keys, key_fields, ctx)
        n = fr.n
        diffs: list[np.ndarray] = []
        cache: dict[Any, Any] = {}
        for kind, arg in lin.parts:
            if kind == "present":
                diffs.append(np.zeros(n, np.int64))
            elif kind == "rows":
                diffs.append(np.ones(n, np.int64))
            elif kind == "xp":
                assert isinstance(arg, Call)
                diffs.append(_exact_products(*(_cached(e, fr, cache) for e in arg.args)))
            else:
                assert arg is not None
                v, nl = _cached(arg, fr, cache)
                diffs.append(sum_component(kind, arg, v, nl, n))
        if rows is None:
            return tuple(kcols), tuple(diffs)
        return tuple(kcols), tuple(diffs), rows

    rows = src.explode(explode, vectorized=True, diff=sample, name="aggregate")
    if plan.scalar:
        seed = lw.constant(((0,),), (Field("_seed", _INT64, False),))
        if env.scope is not seed.scope:
            seed = seed.enter(env.scope)
        one = tuple(
            1 if i == 0 else (0.0 if isinstance(s, float) else 0) for i, s in enumerate(sample)
        )

        def seed_diff(view: tuple[np.ndarray, ...]) -> Any:
            n = len(view[0])
            return (
                (np.zeros(n, np.int64),),
                tuple(
                    np.full(n, v, dtype=np.float64 if isinstance(v, float) else np.int64)
                    for v in one
                ),
            )

        rows = rows.concat(seed.explode(seed_diff, vectorized=True, diff=sample, name="seed"))
    # a global aggregate has one record (its constant key): its total is kept without an
    # arrangement
    linear = (
        rows.count_total(few=plan.scalar, name="sums") if env.total else rows.count(name="sums")
    )
    # linear: records (key, (components...))
    extras: list[tuple[Agg, Any]] = []
    done: dict[tuple[Any, ...], Any] = {}
    for a in plan.aggs:
        if a.func in ("count_star", *SPREAD_FUNCS, *PAIR_FUNCS, *MOMENT_FUNCS) or (
            not a.distinct and a.func in ("count", "sum", "avg")
        ):
            continue
        k = (
            (a.func, a.arg, a.distinct, a.param)
            if a.func in REDUCED_FUNCS
            else (a.func if a.func in ("min", "max") else "distinct", a.arg)
        )
        if k in done:
            extras.append((a, done[k]))
            continue
        part = _part(a, src, stages, in_fields, keys, key_fields, lw, env)
        done[k] = part
        extras.append((a, part))
    # attach the extra parts: records (key, (linear components, part values...))
    parts_order: list[Any] = []
    for _, p in extras:
        if not any(p is q for q in parts_order):
            parts_order.append(p)
    # records (key, (linear components, part values...)); with no parts, (key, components)
    combined = (
        linear
        if not parts_order
        else linear.map(lambda r: (r[0], (r[1],)), vectorized=True, name="group")
    )
    for p in parts_order:
        aggs = [a for a, q in extras if q is p]
        if any(a.func in ("max_by", "min_by") for a in aggs):
            width = 2  # (the value, whether it is NULL)
        elif any(a.func in _ONE_VALUE for a in aggs):
            width = 1  # (the value)
        elif any(a.arg is not None and a.arg.type.kind == "double" for a in aggs):
            width = 2 + len(_SPECIAL)  # (count, finite total, its specials)
        else:
            width = 2  # (count, total)
        combined = _left_attach(combined, p, width, env)
    return _finish(plan, combined, lin, extras, parts_order, kwidth, ctx)


_INT64 = SqlType("int", 64)


def _over_join(plan: Aggregate, lw: Any, env: Any) -> Any:
    """An aggregate grouped by the join key of the join under it, without the join.

    Per key, the join holds ``cL * cR`` rows (``cL``, ``cR``: the two sides' rows with
    that key), so ``count(*)`` is ``cL * cR``, a sum over the left side's values is
    ``sL * cR`` and one over the right side's ``cL * sR``; a left join's unmatched key
    (``cR = 0``) holds ``cL`` rows padded with NULLs. Both sides' rows therefore go into
    one total-order count of ``(cL, cR, per-side counts and sums)`` by key, and the
    products are taken per key after it: no arrangement of either side and no join."""
    got = grouped_by_join_key(plan)
    if got is None:
        return None
    side, other_keys = got
    j = plan.input
    assert isinstance(j, Join)
    ctx: Ctx = lw.ctx
    nl = len(j.left.fields)
    nk = len(plan.keys)
    key_fields = plan.fields[:nk]
    kwidth = nk + mask_words(key_fields)
    lin = _Linear(plan.aggs, plan.scalar)
    # the per-side components: cL, cR, then each linear part's value from its own side
    parts = lin.parts[1:]  # after "rows" (never scalar here)

    def side_of(arg: Expr | None) -> int:
        # an argument without fields (count(1)) counts the grouped side's rows, which a
        # left join keeps when they have no match
        if arg is None or not uses(arg):
            return side
        return 1 if min(uses(arg)) >= nl else 0

    comp_side = [side_of(arg) for _, arg in parts]

    def side_rows(kind: str, arg: Expr | None, at: int) -> bool:
        # a count of a column its own side never holds NULL in is that side's row count
        # (cL or cR), which the count already carries: no component of its own
        if kind != "n" or not isinstance(arg, Col):
            return False
        i = arg.index - (nl if at == 1 else 0)
        fields = j.right.fields if at == 1 else j.left.fields
        return 0 <= i < len(fields) and not fields[i].nullable

    aliased = [side_rows(kind, arg, at) for (kind, arg), at in zip(parts, comp_side, strict=True)]
    sample = (0, 0) + tuple(
        0.0 if kind == "s" and arg is not None and arg.type.kind == "double" else 0
        for (kind, arg), alias in zip(parts, aliased, strict=True)
        if not alias
    )
    left_join = j.kind == "left" if side == 0 else j.kind == "right"

    def make(which: int) -> Any:
        sub = j.left if which == 0 else j.right
        src, stages = chain(sub, lw, env)
        win = len(sub.fields)
        if which == side:
            keys: list[Expr] = list(plan.keys)
            if which == 1:
                keys = [remap_by(k, -nl) for k in keys]
        else:
            keys = list(other_keys)
        drop_null = not j.null_safe and not (which == side and left_join)
        mine = [remap_by(arg, -nl) if which == 1 and arg is not None else arg for _, arg in parts]

        def explode(view: tuple[np.ndarray, ...]) -> Any:
            rows, cols, m = run_stages(view, stages, ctx)
            fr = Frame(cols, win, m)
            vals, nulls = [], []
            gone = None
            for k in keys:
                v, nl_ = evaluate(k, fr, ctx)
                vals.append(v.astype(np.int64) if v.dtype == bool else v)
                nulls.append(nl_)
                if nl_ is not None and drop_null:
                    gone = nl_ if gone is None else gone | nl_
            kcols = pack(vals, nulls, mask_words(key_fields), m)
            n = m
            diffs: list[np.ndarray] = [
                np.ones(n, np.int64) if which == 0 else np.zeros(n, np.int64),
                np.ones(n, np.int64) if which == 1 else np.zeros(n, np.int64),
            ]
            cache: dict[Any, Any] = {}
            for (kind, _), arg, at, alias in zip(parts, mine, comp_side, aliased, strict=True):
                if alias:
                    continue
                if at != which:
                    diffs.append(
                        np.zeros(
                            n,
                            np.float64
                            if kind == "s" and arg is not None and arg.type.kind == "double"
                            else np.int64,
                        )
                    )
                    continue
                assert arg is not None
                got = cache.get(id(arg))
                if got is None:
                    got = evaluate(arg, fr, ctx)
                    cache[id(arg)] = got
                v, nl_ = got
                diffs.append(sum_component(kind, arg, v, nl_, n))
            if gone is not None:
                keep = np.flatnonzero(~gone)
                base = keep if rows is None else rows[keep]
                return (tuple(c[keep] for c in kcols), tuple(d[keep] for d in diffs), base)
            if rows is None:
                return tuple(kcols), tuple(diffs)  # (every row: no times or diffs taken)
            return tuple(kcols), tuple(diffs), rows

        return src.explode(
            explode, vectorized=True, diff=sample, name="left_sums" if which == 0 else "right_sums"
        )

    both = make(0).concat(make(1), name="both_sides")
    totals = both.count_total(name="sums") if env.total else both.count(name="sums")
    mine_side = side

    def combine(r: Any) -> Any:
        k, c = r
        cm, co = (c[0], c[1]) if mine_side == 0 else (c[1], c[0])
        matched = co != 0
        out: list[np.ndarray] = []
        if left_join:
            out.append(np.where(matched, _mul(cm, co), cm))
        else:
            out.append(_mul(cm, co))
        stored = iter(c[2:])
        for at, alias in zip(comp_side, aliased, strict=True):
            x = c[at] if alias else next(stored)
            if at == mine_side:  # this side's values, once per row of the other side
                out.append(np.where(matched, _times(x, co), x) if left_join else _times(x, co))
            else:
                out.append(np.where(matched, _times(x, cm), 0 * x))
        # keys that only the other side holds (or, inner, only one side) have no rows
        keep = np.flatnonzero(out[0] != 0)
        if len(keep) == len(cm):
            return keep, (k, tuple(out))
        return keep, (tuple(c[keep] for c in k), tuple(c[keep] for c in out))

    linear = totals.flat_map(combine, vectorized=True, name="join_products")
    return _finish(plan, linear, lin, [], [], kwidth, ctx)


def remap_by(e: Expr, by: int) -> Expr:
    """``e`` reading field ``i + by`` where it read field ``i``."""
    return remap(e, {i: i + by for i in uses(e)})


def _times(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    if x.dtype == np.float64:
        return x * n
    return _mul(x, n)


def _part(
    a: Agg,
    src: Any,
    stages: list[Any],
    in_fields: tuple[Field, ...],
    keys: tuple[Expr, ...],
    key_fields: tuple[Field, ...],
    lw: Any,
    env: Any,
) -> Any:
    """``(key, value-tuple)`` records, one per group that has a non-NULL argument."""
    ctx: Ctx = lw.ctx
    win = len(in_fields)
    arg = a.arg
    assert arg is not None
    is_str = arg.type.kind == "string"
    several = isinstance(arg, Call) and arg.op == "row"  # count(DISTINCT a, b, ...)

    def values(view: tuple[np.ndarray, ...]) -> Any:
        rows, cols, m = run_stages(view, stages, ctx)
        fr = Frame(cols, win, m)
        kcols = _key_columns(fr, keys, key_fields, ctx)
        if several:
            assert isinstance(arg, Call)
            got = [evaluate(x, fr, ctx) for x in arg.args]
            vs = tuple(c.astype(np.int64) if c.dtype == bool else c for c, _ in got)
            nls = [x for _, x in got if x is not None]
            base = np.arange(len(view[0])) if rows is None else rows
            if not nls:
                return base, (tuple(kcols), vs)
            keep = np.flatnonzero(~np.logical_or.reduce(nls))
            return base[keep], (tuple(c[keep] for c in kcols), tuple(c[keep] for c in vs))
        v, nl = evaluate(arg, fr, ctx)
        if v.dtype == bool:
            v = v.astype(np.int64)
        if is_str and a.func in ("min", "mode"):
            v = ctx.strings.decode(v)  # (ties of a mode go to the least string)
        elif is_str and a.func == "max":
            # the greatest string is the least DescStr: min_total orders any objects
            v = np.array([DescStr(x) for x in ctx.strings.decode(v).tolist()], dtype=object)
        base_rows = np.arange(len(view[0])) if rows is None else rows
        if nl is None:
            return base_rows, (tuple(kcols), v)
        keep = np.flatnonzero(~nl)
        return base_rows[keep], (tuple(c[keep] for c in kcols), v[keep])

    if a.func in ("max_by", "min_by"):
        return _value_at_extreme(a, src, stages, win, keys, key_fields, ctx)
    if a.func == "listagg":
        return _listagg(a, src, stages, win, keys, key_fields, ctx, env)
    kv = src.flat_map(values, vectorized=True, name=f"{a.func}_values")
    if a.func in _PERCENTILES:
        return _percentile(a, kv, env)
    if a.func in _BIT_FOLDS:
        if a.distinct:  # (XOR of the distinct values; AND and OR are the same either way)
            kv = kv.distinct_total() if env.total else kv.distinct()
        red = kv.reduce_core(BitFold(a.func[4:]))
        return red.map(lambda r: (r[0], (r[1],)), vectorized=True, name=a.func)
    if a.func == "mode":
        red = kv.reduce_core(Mode(greatest=bool(a.param)))  # (DESC: ties to the greatest)
        if not is_str:
            return red.map(lambda r: (r[0], (r[1],)), vectorized=True, name="mode_value")
        strings = ctx.strings
        return red.map(
            lambda r: (r[0], (strings.encode_list(list(r[1])),)), vectorized=True, name="encode"
        )
    if a.func in ("min", "max"):
        if is_str:
            red = kv.min_total() if env.total else kv.min()
            strings = ctx.strings
            unwrap = (lambda x: x) if a.func == "min" else (lambda x: x.s)
            return red.map(
                lambda r: (r[0], (strings.encode_list([unwrap(x) for x in r[1]]),)),
                vectorized=True,
                name="encode",
            )
        if env.total:
            red = kv.min_total() if a.func == "min" else kv.max_total()
        else:
            red = kv.min() if a.func == "min" else kv.max()
        return red.map(lambda r: (r[0], (r[1],)), vectorized=True, name=f"{a.func}_value")
    # DISTINCT count / sum / avg over the distinct (key, value) pairs
    distinct = kv.distinct_total() if env.total else kv.distinct()
    dbl = arg.type.kind == "double"

    def explode(r: Any) -> Any:
        k, v = r
        if several:  # a count only
            n = len(v[0])
            return k, (np.ones(n, np.int64), np.zeros(n, np.int64))
        n = len(v)
        if dbl:
            comps = [sum_component(kind, arg, v, None, n) for kind in ("s", *_SPECIAL)]
            return k, (np.ones(n, np.int64), *comps)
        s = _int_sum_column(v) if arg.type.numeric else np.zeros(n, np.int64)
        return k, (np.ones(n, np.int64), s)

    sample = (0, 0.0, 0, 0, 0) if dbl else (0, 0)
    ex = distinct.explode(explode, vectorized=True, diff=sample, name="distinct_values")
    counted = ex.count_total() if env.total else ex.count()

    # (count, total) per group; a floating-point total as its finite part and the counts of
    # its infinities and NaNs (``with_specials`` makes it one float where it is read: an
    # arrangement may hold no NaN)
    return counted.map(lambda r: (r[0], tuple(r[1])), vectorized=True, name="distinct_agg")


_PERCENTILES = ("percentile", "percentile_disc", "percentile_approx")
_BIT_FOLDS = ("bit_and", "bit_or", "bit_xor")
#: the aggregates whose part is one value per group (NULL where the group has no part)
_ONE_VALUE = ("min", "max", "mode", "listagg", *_BIT_FOLDS, *_PERCENTILES)


def _percentile(a: Agg, kv: Any, env: Any) -> Any:
    """``(key, (value,))`` per group: the exact percentile ``a`` (a DOUBLE, as a float key)
    of the group's values ``kv`` (``(key, value)`` records, NULLs left out), from the values
    at the two ranks around it."""
    assert a.arg is not None
    fraction, discrete, desc = a.param
    if a.distinct:
        kv = kv.distinct_total() if env.total else kv.distinct()
    red = kv.reduce_core(Quantile(fraction, discrete=discrete, descending=desc))
    t = a.arg.type
    if a.func == "percentile_approx":  # the value itself, of the argument's type
        return red.map(lambda r: (r[0], (r[1][0],)), vectorized=True, name=a.func)

    def as_double(v: np.ndarray) -> np.ndarray:
        if t.kind == "double":
            return float_from_keys(v)
        scale = t.scale if t.kind == "decimal" else 0
        if v.dtype != object and (
            t.kind == "int" or t.precision <= 18 or not len(v) or int(np.abs(v).max()) <= 2**53
        ):
            # Spark's double of an int, and of a decimal of at most 18 digits: the unscaled
            # value as a double divided by the power of ten (exact operands below 2**53, so
            # then correctly rounded)
            return v.astype(np.float64) / 10.0**scale
        d = 10**scale  # a wider decimal's double is correctly rounded (Python ints divide so)
        return np.array([int(x) / d for x in v.tolist()], dtype=np.float64)

    def value(r: Any) -> Any:
        k, (lo, hi, count) = r
        a_lo = as_double(lo)
        if discrete:
            return k, (float_keys(a_lo),)
        a_hi = as_double(hi)
        pos = (count - 1) * fraction
        below, above = np.floor(pos), np.ceil(pos)
        with np.errstate(all="ignore"):
            mixed = a_lo + (pos - below) * (a_hi - a_lo)  # (as Spark rounds it)
        # interpolated only between two ranks holding different values
        out = np.where((below == above) | (lo == hi), a_lo, mixed)
        return k, (float_keys(out),)

    return red.map(value, vectorized=True, name=a.func)


def _values_by_group(
    src: Any,
    stages: list[Any],
    win: int,
    keys: tuple[Expr, ...],
    key_fields: tuple[Field, ...],
    ctx: Ctx,
    record: Any,
    name: str,
) -> Any:
    """``(group key, value tuple)`` records of the rows under an aggregate: ``record(frame)``
    gives the value columns and the rows to leave out (or None)."""

    def values(view: tuple[np.ndarray, ...]) -> Any:
        rows, cols, m = run_stages(view, stages, ctx)
        fr = Frame(cols, win, m)
        kcols = _key_columns(fr, keys, key_fields, ctx)
        vals, drop = record(fr)
        base = np.arange(len(view[0])) if rows is None else rows
        if drop is None:
            return base, (tuple(kcols), vals)
        keep = np.flatnonzero(~drop)
        return base[keep], (tuple(c[keep] for c in kcols), tuple(c[keep] for c in vals))

    return src.flat_map(values, vectorized=True, name=name)


def _value_at_extreme(
    a: Agg,
    src: Any,
    stages: list[Any],
    win: int,
    keys: tuple[Expr, ...],
    key_fields: tuple[Field, ...],
    ctx: Ctx,
) -> Any:
    """``(key, (value, NULL flag))`` per group: ``max_by`` / ``min_by``'s value, from the
    least (greatest) ``(ordering, NULL flag, value)`` of the group's rows with an ordering
    value: rows tied on the ordering are chosen between by their values, so the answer does
    not depend on the order rows arrive in."""
    assert isinstance(a.arg, Call)
    y_e, x_e = a.arg.args
    top = a.func == "max_by"
    by_str = y_e.type.kind == "string"

    def record(fr: Frame) -> tuple[tuple[np.ndarray, ...], np.ndarray | None]:
        y, yn = evaluate(y_e, fr, ctx)
        x, xn = evaluate(x_e, fr, ctx)
        y = y.astype(np.int64) if y.dtype == bool else y
        x = x.astype(np.int64) if x.dtype == bool else x
        if by_str:  # strings in their order, not their codes'
            strs = ctx.strings.decode(y).tolist()
            y = np.array([DescStr(v) for v in strs] if top else strs, dtype=object)
        xnull = np.zeros(len(x), np.int64) if xn is None else xn.astype(np.int64)
        if xn is not None:
            x = np.where(xn, 0, x) if x.dtype != object else x
        return (y, xnull, x), yn

    kv = _values_by_group(src, stages, win, keys, key_fields, ctx, record, f"{a.func}_values")
    # a reduce per touched group (``min_total`` takes single values only); a string
    # ordering is reversed by DescStr, so it still takes the least
    red = kv.min() if by_str or not top else kv.max()
    return red.map(lambda r: (r[0], (r[1][2], r[1][1])), vectorized=True, name=a.func)


def _listagg(
    a: Agg,
    src: Any,
    stages: list[Any],
    win: int,
    keys: tuple[Expr, ...],
    key_fields: tuple[Field, ...],
    ctx: Ctx,
    env: Any,
) -> Any:
    """``(key, (text,))`` per group with a non-NULL value: the texts joined in order. Each
    record's value is ``(NULL flag, key, ...)`` per ordering key, made to sort as the
    ordering asks (a descending number reversed, a descending text a ``DescStr``, a NULL
    flag first or last), then the text itself, so the reduce sees them in order."""
    assert isinstance(a.arg, Call)
    value_e, *order_es = a.arg.args
    sep, descs, firsts = a.param

    def record(fr: Frame) -> tuple[tuple[np.ndarray, ...], np.ndarray | None]:
        v, vn = evaluate(value_e, fr, ctx)
        out: list[np.ndarray] = []
        for e, desc, nf in zip(order_es, descs, firsts, strict=True):
            k, kn = evaluate(e, fr, ctx)
            if e.type.kind == "string":
                strs = ctx.strings.decode(k).tolist()
                k = np.array([DescStr(x) for x in strs] if desc else strs, dtype=object)
            else:
                k = k.astype(np.int64) if k.dtype == bool else k
                if desc:
                    k = -k if k.dtype == object else ~k  # (order reversed, no overflow)
            null = np.zeros(len(k), bool) if kn is None else kn
            out.append((null != nf).astype(np.int64))  # (0 sorts first)
            out.append(k)
        out.append(np.array(ctx.strings.decode(v).tolist(), dtype=object))
        return tuple(out), vn

    kv = _values_by_group(src, stages, win, keys, key_fields, ctx, record, "listagg_values")
    if a.distinct:
        kv = kv.distinct_total() if env.total else kv.distinct()
    red = kv.reduce_core(Concat(sep))
    strings = ctx.strings
    return red.map(
        lambda r: (r[0], (strings.encode_list(list(r[1])),)), vectorized=True, name="listagg"
    )


def _left_attach(combined: Any, part: Any, width: int, env: Any) -> Any:
    """``combined`` records ``(key, (slots...))`` with ``part``'s value tuple appended as the
    next slot, or a missing-marker (``None``-padded) slot for groups absent from ``part``."""
    arranged = combined.arrange_by_key()
    pa = part.arrange_by_key()

    def pair(k: Any, a: tuple[Any, ...], b: tuple[Any, ...]) -> Any:
        n = len(k[0])
        return k, (*a, (np.ones(n, np.int64), *b))

    joined = arranged.join_map(pa, pair, vectorized=True, name="attach")
    keys = part.map(lambda r: r[0], vectorized=True, name="part_keys")
    keys = keys.distinct_total() if env.total else keys.distinct()
    hit = arranged.semijoin(keys, name="has_part")
    missing = combined.concat(hit.negate(), name="no_part")

    def pad(r: Any) -> Any:
        k, slots = r
        n = len(k[0])
        return k, (*slots, tuple(np.zeros(n, np.int64) for _ in range(width + 1)))

    return joined.concat(missing.map(pad, vectorized=True, name="pad_part"))


def _finish(
    plan: Aggregate,
    combined: Any,
    lin: _Linear,
    extras: list[tuple[Agg, Any]],
    parts_order: list[Any],
    kwidth: int,
    ctx: Ctx,
) -> Any:
    nk = len(plan.keys)
    fields = plan.fields
    key_fields = fields[:nk]
    kwords = mask_words(key_fields)
    words = mask_words(fields)
    rows_at = lin.rows_at()
    scalar = plan.scalar
    slot_of = {id(p): i + 1 for i, p in enumerate(parts_order)}
    agg_specs = []
    for j, a in enumerate(plan.aggs):
        part_slot = None
        for aa, p in extras:
            if aa == a:
                part_slot = slot_of[id(p)]
                break
        n_at = s_at = None
        sp_at: tuple[int, ...] = ()
        if a.func in SPREAD_FUNCS:
            assert a.arg is not None
            kinds = ("n", "xs", "xq", "bad") if a.arg.type.kind == "double" else ("n", "s", "q")
            sp_at = tuple(lin.index[(kind, a.arg)] for kind in kinds)
        elif a.func in MOMENT_FUNCS:
            sp_at = tuple(lin.index[(kind, a.arg)] for kind in _MOMENT_KINDS)
        elif a.func in PAIR_FUNCS:
            assert isinstance(a.arg, Call)
            sp_at = tuple(lin.index[part] for part in _pair_parts(a.arg))
        elif part_slot is None and a.func != "count_star":
            n_at = lin.index[("n", a.arg)]
            if a.func in ("sum", "avg"):
                s_at = lin.index[("s", a.arg)]
                if a.arg is not None and a.arg.type.kind == "double":
                    sp_at = tuple(lin.index[(kind, a.arg)] for kind in _SPECIAL)
        agg_specs.append((a, fields[nk + j].type, part_slot, n_at, s_at, sp_at))

    flat = not parts_order
    counts_rows = not scalar  # (a scalar aggregate keeps its row on empty input)

    def out(r: Any) -> Any:
        k, slots = r
        if flat:
            slots = (slots,)
        comps = slots[0]
        n = len(comps[0])
        rows = comps[rows_at]
        # (every group present is the usual case: one test instead of finding the rows)
        keep = None if scalar or rows.all() else np.flatnonzero(rows)

        def sel(x: np.ndarray) -> np.ndarray:
            return x if keep is None else x[keep]

        m = n if keep is None else len(keep)
        vals: list[np.ndarray] = []
        nulls: list[np.ndarray | None] = []
        if nk:
            kf = Frame(tuple(sel(c) for c in k), nk, m) if kwords else None
            for i in range(nk):
                vals.append(sel(k[i]))
                nulls.append(kf.null(i) if kf is not None else None)
        for a, t, part_slot, n_at, s_at, sp_at in agg_specs:
            if part_slot is not None:
                s = slots[part_slot]
                present = sel(s[0]) != 0
                if a.func in ("max_by", "min_by"):
                    vals.append(sel(s[1]))
                    nl = ~present | (sel(s[2]) != 0)
                    nulls.append(nl if nl.any() else None)
                    continue
                if a.func in _ONE_VALUE:
                    v = sel(s[1])
                    vals.append(v)
                    nulls.append(~present if not present.all() else None)
                    continue
                cnt = np.where(present, sel(s[1]), 0)
                total = sel(s[2])
                if len(s) > 3:  # a floating-point total: its finite part, then its specials
                    total = with_specials(total, *(sel(x) for x in s[3:]))
                v, nl = linear_value(a.func, a.arg, t, cnt, total, overflow_null=a.param == (TRY,))
                vals.append(v)
                nulls.append(nl)
                continue
            if a.func == "count_star":
                vals.append(sel(rows))
                nulls.append(None)
                continue
            if a.func in SPREAD_FUNCS:
                assert a.arg is not None
                v, nl = spread_value(a.func, a.arg.type, *(sel(comps[i]) for i in sp_at))
                vals.append(v)
                nulls.append(nl)
                continue
            if a.func in MOMENT_FUNCS or a.func in PAIR_FUNCS:
                how = moment_value if a.func in MOMENT_FUNCS else pair_value
                v, nl = how(a.func, *(sel(comps[i]) for i in sp_at))
                vals.append(v)
                nulls.append(nl)
                continue
            cnt = sel(comps[n_at])
            tot = sel(comps[s_at]) if s_at is not None else None
            if sp_at:
                assert tot is not None
                tot = with_specials(tot, *(sel(comps[i]) for i in sp_at))
            # a group's row count is never 0 here (those rows were dropped): an argument
            # counted by it has a value in every group
            v, nl = linear_value(
                a.func,
                a.arg,
                t,
                cnt,
                tot,
                nonempty=counts_rows and n_at == rows_at,
                overflow_null=a.param == (TRY,),
            )
            vals.append(v)
            nulls.append(nl)
        return keep, pack(vals, nulls, words, m)

    # A group whose row count is 0 is no group: it can still be a record of the totals when
    # a floating-point sum did not return to exactly 0 as its rows left, and its output row
    # is dropped (a flat map, so the operator may put out fewer rows than it takes).
    return combined.flat_map(out, vectorized=True, name="aggregates")


def linear_value(
    func: str,
    arg: Expr | None,
    t: SqlType,
    cnt: np.ndarray,
    total: np.ndarray | None,
    *,
    nonempty: bool = False,
    overflow_null: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Aggregate ``func`` (count, sum, avg) of type ``t`` from each group's count ``cnt``
    of non-NULL values of ``arg`` and their sum ``total``: ``(values, nulls)``, NULL where
    the count is 0. ``nonempty``: the caller knows no count is 0 (the same answer without
    looking for empty groups). A sum or average that does not fit ``t`` raises
    ``TotalOverflowError``, or with ``overflow_null`` (``try_sum``, ``try_avg``) is NULL:
    decided from the exact total each time, so it comes back when rows leave."""
    if func == "count":
        return cnt.astype(np.int64), None
    assert total is not None and arg is not None
    at = arg.type
    if nonempty:
        if func == "sum" and t.kind == "decimal":
            # (same scale as the argument)
            return _fitted(total, t, None, overflow_null, "a sum")
        empty = None
        nl = None
    else:
        empty = cnt == 0
        nl = empty if empty.any() else None
        if nl is None:
            empty = None
    if func == "sum":
        if t.kind == "double":
            x = total.astype(np.float64) if at.kind != "double" else total
            return float_keys(x if empty is None else np.where(empty, 0.0, x)), nl
        if t.kind == "int":
            total = np.asarray(total)
            if total.dtype == object:
                total = _narrow(total)
                if total.dtype == object:
                    if not overflow_null:
                        raise TotalOverflowError(f"integer overflow: a sum does not fit {t}")
                    lo, hi = t.int_range()
                    over = np.array([not lo <= int(x) <= hi for x in total.tolist()], bool)
                    total = np.where(over, 0, total)
                    nl = over if nl is None else nl | over
            return (total if empty is None else np.where(empty, 0, total)).astype(np.int64), nl
        # decimal: same scale as the argument
        return _fitted(total if empty is None else np.where(empty, 0, total), t, nl, overflow_null)
    # avg
    safe = cnt if empty is None else np.where(empty, 1, cnt)
    if t.kind == "double":
        if at.kind == "double":
            x = total / safe
        elif at.kind == "decimal":
            x = total.astype(np.float64) / (10.0**at.scale) / safe
        else:
            x = total.astype(np.float64) / safe
        return float_keys(x if empty is None else np.where(empty, 0.0, x)), nl
    if t.kind == "decimal":
        # avg of DECIMAL(p, s) at scale t.scale: round(sum * 10^(t.s - s) / count)
        k = t.scale - (at.scale if at.kind == "decimal" else 0)
        if len(cnt) <= FEW_GROUPS:
            r = _avg_decimal_few(np.asarray(total), cnt, k)
            return _fitted(r, t, nl, overflow_null, "an average")
        num = _scale_up(np.asarray(total), k) if k >= 0 else np.asarray(total)
        r = _div_half_up(num, safe.astype(np.int64))
        if r.dtype != object and empty is not None:
            r = np.where(empty, 0, r)
        return _fitted(r, t, nl, overflow_null, "an average")
    raise DataError(f"avg of {at} as {t}")


def spread_value(
    func: str, at: SqlType, cnt: np.ndarray, total: np.ndarray, squares: np.ndarray, *bad: Any
) -> tuple[np.ndarray, np.ndarray | None]:
    """A variance or standard deviation (``SPREAD_FUNCS``) of each group from its count of
    values, their exact sum and the exact sum of their squares (scaled ints: a decimal's
    unscaled values, or a DOUBLE's at ``2**_XS_BITS``, with ``bad`` the count of its
    infinities and NaNs): ``(values, nulls)``. The quotient of exact ints is rounded once
    to a double; NULL over no values, and for the sample forms over one value (Spark);
    NaN where an infinity or NaN is among the values."""
    if at.kind == "double":
        scale = 1 << _XS_BITS
    else:
        scale = 10 ** (at.scale if at.kind == "decimal" else 0)
    sample = func in ("var_samp", "stddev_samp")
    root = func in ("stddev_samp", "stddev_pop")
    nonfinite = bad[0].tolist() if bad else [0] * len(cnt)
    out: list[float] = []
    nulls: list[bool] = []
    for n, s, q, b in zip(
        cnt.tolist(),
        np.asarray(total).tolist(),
        np.asarray(squares).tolist(),
        nonfinite,
        strict=True,
    ):
        if n == 0 or (sample and n == 1):
            out.append(0.0)
            nulls.append(True)
            continue
        nulls.append(False)
        if b:
            out.append(math.nan)
            continue
        num = n * int(q) - int(s) * int(s)  # n^2 times the variance of the unscaled values
        den = n * (n - 1 if sample else n) * scale * scale
        try:
            var = num / den  # (exact ints divided: rounded once)
        except OverflowError:
            var = math.inf
        out.append(math.sqrt(var) if root else var)
    nl = np.array(nulls, dtype=bool)
    return float_keys(np.array(out, dtype=np.float64)), (nl if nl.any() else None)


def _doubles(out: list[float | None]) -> tuple[np.ndarray, np.ndarray | None]:
    """Per-group DOUBLE results (None for NULL) as a float-key column and NULL mask."""
    nl = np.array([v is None for v in out], dtype=bool)
    vals = np.array([0.0 if v is None else v for v in out], dtype=np.float64)
    return float_keys(vals), (nl if nl.any() else None)


def _ratio(num: int, den: int) -> float:
    """``num / den`` of exact ints, rounded once (an infinity beyond a DOUBLE)."""
    try:
        return num / den
    except OverflowError:
        return math.inf if (num < 0) == (den < 0) else -math.inf


def _over_root(num: int, rad: int) -> float:
    """``num / sqrt(rad)`` of exact ints (``rad > 0``), to 50 digits before the DOUBLE."""
    import decimal

    with decimal.localcontext() as c:
        c.prec = 50
        c.Emax = decimal.MAX_EMAX
        c.Emin = decimal.MIN_EMIN
        return float(decimal.Decimal(num) / decimal.Decimal(rad).sqrt())


def moment_value(
    func: str,
    cnt: np.ndarray,
    s1: np.ndarray,
    s2: np.ndarray,
    s3: np.ndarray,
    s4: np.ndarray,
    bad: np.ndarray,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``skewness`` / ``kurtosis`` of each group from its count of values and the exact
    sums of their first four powers (ints at the powers of the scale ``2**_XS_BITS``):
    NULL over no values and where the values do not spread (Spark's rule), NaN with an
    infinity or NaN among them. With ``a_k = n**(k - 1)`` times the ``k``-th central sum,
    skewness is ``a3 / a2**1.5`` and kurtosis ``a4 / a2**2 - 3``."""
    out: list[float | None] = []
    for n, t1, t2, t3, t4, b in zip(
        cnt.tolist(),
        *(np.asarray(x).tolist() for x in (s1, s2, s3, s4)),
        bad.tolist(),
        strict=True,
    ):
        if n == 0:
            out.append(None)
            continue
        if b:
            out.append(math.nan)
            continue
        t1, t2, t3, t4 = int(t1), int(t2), int(t3), int(t4)
        a2 = n * t2 - t1 * t1
        if a2 == 0:
            out.append(None)
        elif func == "skewness":
            a3 = n * n * t3 - 3 * n * t1 * t2 + 2 * t1**3
            out.append(_over_root(a3, a2**3))
        else:
            a4 = n**3 * t4 - 4 * n * n * t1 * t3 + 6 * n * t1 * t1 * t2 - 3 * t1**4
            out.append(_ratio(a4 - 3 * a2 * a2, a2 * a2))
    return _doubles(out)


def pair_value(
    func: str,
    cnt: np.ndarray,
    sy: np.ndarray,
    sx: np.ndarray,
    syy: np.ndarray,
    sxx: np.ndarray,
    sxy: np.ndarray,
    bady: np.ndarray,
    badx: np.ndarray,
) -> tuple[np.ndarray, np.ndarray | None]:
    """A joint spread (``PAIR_FUNCS``) of each group's ``(y, x)`` pairs from their count
    and exact sums (ints at scale ``2**_XS_BITS``, squares and products at its square),
    each quotient of exact ints rounded once. NULL over no pairs, where Spark divides by a
    zero spread (``corr``, ``regr_slope``, ``regr_intercept``, ``regr_r2`` with ``x``
    constant; ``covar_samp`` of one pair), NaN with an infinity or NaN among them."""
    scale = 1 << _XS_BITS
    out: list[float | None] = []
    cols = (np.asarray(c).tolist() for c in (sy, sx, syy, sxx, sxy))
    for n, ty, tx, tyy, txx, txy, by, bx in zip(
        cnt.tolist(), *cols, bady.tolist(), badx.tolist(), strict=True
    ):
        if n == 0:
            out.append(None)
            continue
        if by or bx:
            out.append(math.nan)
            continue
        ty, tx, tyy, txx, txy = int(ty), int(tx), int(tyy), int(txx), int(txy)
        axy = n * txy - tx * ty  # n^2 times the covariance (times the scale squared)
        axx = n * txx - tx * tx
        ayy = n * tyy - ty * ty
        if func == "covar_pop":
            out.append(_ratio(axy, n * n * scale * scale))
        elif func == "covar_samp":
            out.append(None if n == 1 else _ratio(axy, n * (n - 1) * scale * scale))
        elif func == "regr_sxx":
            out.append(_ratio(axx, n * scale * scale))
        elif func == "regr_syy":
            out.append(_ratio(ayy, n * scale * scale))
        elif func == "regr_sxy":
            out.append(_ratio(axy, n * scale * scale))
        elif func == "corr":
            out.append(None if axx * ayy == 0 else _over_root(axy, axx * ayy))
        elif axx == 0:
            out.append(None)  # (regr_slope, regr_intercept, regr_r2: x does not spread)
        elif func == "regr_slope":
            out.append(_ratio(axy, axx))
        elif func == "regr_intercept":
            out.append(_ratio(ty * axx - axy * tx, n * axx * scale))
        else:  # regr_r2
            out.append(1.0 if ayy == 0 else _ratio(axy * axy, axx * ayy))
    return _doubles(out)


#: at most this many groups in a batch of aggregate results: decimal averages are
#: divided with Python ints (a dozen numpy calls per average cost more on a few rows)
FEW_GROUPS = 16


def _avg_decimal_few(total: np.ndarray, cnt: np.ndarray, k: int) -> np.ndarray:
    """``linear_value``'s decimal average on a few rows, value for value the same:
    ``round(total * 10^k / count)`` half away from zero (``total / count`` when ``k < 0``),
    0 where the count is 0 (unless a quotient does not fit 64 bits)."""
    f = 10**k if k >= 0 else 1
    vals: list[int] = []
    for x, c in zip(total.tolist(), cnt.tolist(), strict=True):
        if not c:
            vals.append(0)
            continue
        n = x * f  # (Python ints: ``tolist`` of int64 or of object columns)
        ac = abs(c)
        q, r = divmod(abs(n), ac)
        if 2 * r >= ac:
            q += 1
        vals.append(-q if (n < 0) != (c < 0) else q)
    try:
        return np.array(vals, dtype=np.int64)
    except OverflowError:
        out = np.empty(len(vals), dtype=object)
        out[:] = vals
        return out


def _fitted(
    v: np.ndarray, t: SqlType, nl: np.ndarray | None, overflow_null: bool, what: str = "a sum"
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(values, nulls)`` of the unscaled sums or averages ``v`` of a DECIMAL ``t`` (NULL
    where ``nl``): one with more digits than ``t`` holds raises ``TotalOverflowError``, or
    with ``overflow_null`` is NULL."""
    if not overflow_null:
        return _digits_checked(v, t, what), nl
    if not len(v) or (v.dtype != object and t.precision >= 19):
        return v, nl  # (an int64 has at most 19 digits)
    lim = 10**t.precision
    if v.dtype == object:
        over = np.array([abs(int(x)) >= lim for x in v.tolist()], dtype=bool)
    else:
        over = (v >= lim) | (v <= -lim)
    if not over.any():
        return v, nl
    v = np.where(over, 0, v)
    return _narrow(v) if v.dtype == object else v, over if nl is None else nl | over


def _digits_checked(v: np.ndarray, t: SqlType, what: str = "a sum") -> np.ndarray:
    """The unscaled sums or averages ``v`` of a DECIMAL ``t``, checked against its digits
    (an average of DECIMAL(38,6) values is a DECIMAL(38,10): 28 integer digits)."""
    return decimal_checked(v, t, what, TotalOverflowError)
