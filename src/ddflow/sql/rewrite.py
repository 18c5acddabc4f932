"""Plan rewrites that keep the answer and cut the work: outer joins a filter makes inner,
and aggregates computed only for the groups something asks about.

``inner_outer``: a WHERE condition that cannot be TRUE when one side of an outer join is
NULL-padded (``l.x < r.y`` above ``l LEFT JOIN r``) drops every padded row, so the outer
join is an inner join and need not track which rows went unmatched.

``restrict_groups``: a grouped aggregate joined on its group keys (the usual shape of a
decorrelated subquery: ``WHERE x < (SELECT avg(..) FROM t WHERE t.k = outer.k)``) only
needs the groups whose key the other side can hold. When that side's key comes from a
filtered table (``part WHERE p_brand = ..``), the aggregate's input is first semi-joined
with that table's keys, so the aggregate follows a few groups instead of all of them. The
keys are taken from the filtered table itself, not from the join above it: any superset of
the keys that meet is correct, and a table's distinct keys are cheap to keep.

``share_partials``: an aggregate over a join whose arguments all come from one side, when
the same query already aggregates that side by the join key (``WHERE o IN (SELECT l_orderkey
.. GROUP BY l_orderkey HAVING sum(q) > 300)`` beside ``sum(q)`` of the joined line items),
joins that aggregate instead of the side's rows and adds up its partial results: the side
is aggregated once, for both uses, and the join meets one row per key.

``equi_filters``: an equality between the two sides of an inner join, written as a filter
above it (``WHERE total = (SELECT max(total) ..)`` attaches the one-row subquery with a join
on nothing), becomes a key of the join: the join meets only equal rows instead of pairing
every row with the other side and filtering.

``keyed_scalars``: an aggregate without GROUP BY keeps one row on empty input, its
``min`` / ``max`` / ``sum`` / ``avg`` NULL. Joined on such a column (``WHERE total = (SELECT
max(total) ..)``) by a join that drops that side's unmatched rows, the NULL row never
meets anything (NULL keys never match), so the aggregate may have no row on empty input
instead: it is computed as a grouped one (no constant row to keep, and one of ``min`` /
``max`` alone is just the reduction).

``merge_semijoins``: two semi joins (or one semi and one anti join) of the same rows on the
same keys, ``(L ⋉ A) ⋉ B`` / ``(L ⋉ A) ▷ B`` / ``(L ▷ A) ⋉ B``, become one semi join of ``L``
with the keys of one right side that the other does (does not) hold: ``L ⋉ (A ⋉ B)`` /
``L ⋉ (A ▷ B)`` / ``L ⋉ (B ▷ A)``. The large side is matched and arranged once, and the two
key sets (TPC-H Q21: orders with two suppliers, orders with two late ones) meet each other.

``fuse_counts``: two semi / anti joins of the same rows on the groups of two aggregates of
one input, one aggregate over rows a filter keeps, become one aggregate of the input whose
narrower aggregates look only at the flagged rows (a CASE of the filter inside them; under a
DISTINCT, the flagged copies of each row counted), and one join with the groups meeting
both conditions (Q21: each order's suppliers and its late suppliers counted in one pass).
It compares whole subtrees, so it runs before the plan is pruned.

``drop_distinct``: a DISTINCT over rows that are distinct already (the group keys of an
aggregate, kept through filters and projections) is dropped; ``unique_sets`` says which
column sets of a plan hold no two equal rows.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ddflow.sql.expr import Call, Col, Expr, Lit, conjoin, conjuncts
from ddflow.sql.optimize import _shift, remap, subst, uses
from ddflow.sql.optimize import _strict as strict
from ddflow.sql.plan import (
    MOMENT_FUNCS,
    PAIR_FUNCS,
    REDUCED_FUNCS,
    SPREAD_FUNCS,
    Agg,
    Aggregate,
    Distinct,
    Filter,
    Join,
    Plan,
    Project,
    Scan,
    SemiJoin,
)
from ddflow.sql.rows import Field
from ddflow.sql.types import BIGINT, BOOLEAN

__all__ = [
    "absorb_semijoins",
    "drop_distinct",
    "equi_filters",
    "fuse_counts",
    "inner_outer",
    "keyed_scalars",
    "merge_semijoins",
    "restrict_groups",
    "rewrite",
    "share_partials",
    "unique_sets",
]


def rewrite(plan: Plan) -> Plan:
    """Both rewrites, outer joins first (an inner join lets more aggregates be restricted)."""
    return merge_semijoins(
        absorb_semijoins(
            share_partials(
                drop_distinct(keyed_scalars(restrict_groups(equi_filters(inner_outer(plan)))))
            )
        )
    )


def with_inputs(plan: Plan, new: list[Plan]) -> Plan:
    """``plan`` with its input plans replaced by ``new`` (in ``inputs()`` order)."""
    kids = plan.inputs()
    if all(a is b for a, b in zip(new, kids, strict=True)):
        return plan
    changes: dict[str, Any] = {}
    it = iter(new)
    for f in dataclasses.fields(plan):  # type: ignore[arg-type]
        v = getattr(plan, f.name)
        if isinstance(v, Plan):
            changes[f.name] = next(it)
        elif isinstance(v, tuple) and v and all(isinstance(x, Plan) for x in v):
            changes[f.name] = tuple(next(it) for _ in v)
    return dataclasses.replace(plan, **changes)  # type: ignore[type-var]


def _bottom_up(plan: Plan, f: Any) -> Plan:
    return f(with_inputs(plan, [_bottom_up(k, f) for k in plan.inputs()]))


# -- outer joins that a filter makes inner ----------------------------------------------------


def _rejects_null(e: Expr, cols: set[int]) -> bool:
    """Whether ``e`` is never TRUE when every field in ``cols`` is NULL."""
    if isinstance(e, Call) and e.op == "and":
        return any(_rejects_null(a, cols) for a in e.args)
    if isinstance(e, Call) and e.op == "or":
        return all(_rejects_null(a, cols) for a in e.args)
    if isinstance(e, Call) and e.op == "is_not_null":
        return all(strict(a) for a in e.args) and bool(uses(e) & cols)
    if (
        isinstance(e, Call)
        and e.op == "not"
        and isinstance(e.args[0], Call)
        and e.args[0].op == "is_null"
    ):
        return all(strict(a) for a in e.args[0].args) and bool(uses(e) & cols)
    if isinstance(e, Call) and e.op in (
        "is_null",
        "not",
        "is_true",
        "is_false",
        "coalesce",
        "case",
        "if",
        "nullif",
    ):
        return False
    return strict(e) and bool(uses(e) & cols)


def _inner_outer(p: Plan) -> Plan:
    if not isinstance(p, Filter):
        return p
    conj: list[Expr] = []
    filters: list[Filter] = []
    node: Plan = p
    while isinstance(node, Filter):  # stacked filters all apply to the join's rows
        filters.append(node)
        conj.extend(conjuncts(node.predicate))
        node = node.input
    if not isinstance(node, Join) or node.kind == "inner":
        return p
    j = node
    nl = len(j.left.fields)
    left_cols, right_cols = set(range(nl)), set(range(nl, len(j.fields)))
    # a padded right side (left / full join) is dropped by a condition rejecting its NULLs
    no_right_pad = any(_rejects_null(c, right_cols) for c in conj)
    no_left_pad = any(_rejects_null(c, left_cols) for c in conj)
    kind = j.kind
    if kind == "left" and no_right_pad or kind == "right" and no_left_pad:
        kind = "inner"
    elif kind == "full":
        # rows padded on the right are the left side's unmatched ones (and vice versa)
        if no_right_pad and no_left_pad:
            kind = "inner"
        elif no_right_pad:
            kind = "right"
        elif no_left_pad:
            kind = "left"
    if kind == j.kind:
        return p
    out: Plan = dataclasses.replace(j, kind=kind)
    for f in reversed(filters):
        out = Filter(out, f.predicate)
    return out


def inner_outer(plan: Plan) -> Plan:
    """``plan`` with outer joins under NULL-rejecting filters made inner (or one-sided)."""
    return _bottom_up(plan, _inner_outer)


# -- aggregates computed only for the groups asked about ----------------------------------


def _leaf_chain(p: Plan) -> bool:
    """Whether ``p`` is filters / projections over one table scan, with a filter somewhere
    (so its distinct keys are cheap to keep and fewer than the table's)."""
    restricted = False
    while True:
        if isinstance(p, Filter):
            restricted = True
            p = p.input
        elif isinstance(p, Project):
            p = p.input
        elif isinstance(p, Scan):
            return restricted or p.prefilter is not None
        else:
            return False


def _domain(p: Plan, col: int, null_safe: bool) -> tuple[Plan, int] | None:
    """A restricted plan under ``p`` and one of its fields that holds every value field
    ``col`` of ``p`` can hold (NULL aside unless ``null_safe``), or None."""
    if _leaf_chain(p):
        return p, col
    if isinstance(p, (Filter, Distinct)):
        return _domain(p.inputs()[0], col, null_safe)
    if isinstance(p, Project):
        e = p.exprs[col]
        return _domain(p.input, e.index, null_safe) if isinstance(e, Col) else None
    if isinstance(p, Aggregate):
        if col < len(p.keys) and isinstance(p.keys[col], Col) and not p.scalar:
            return _domain(p.input, p.keys[col].index, null_safe)  # type: ignore[attr-defined]
        return None
    if isinstance(p, SemiJoin):
        if p.anti:
            return _domain(p.left, col, null_safe)
        # the rows kept have a key equal to one of the right side's
        for lk, rk in zip(p.left_keys, p.right_keys, strict=True):
            if isinstance(lk, Col) and lk.index == col and isinstance(rk, Col):
                got = _domain(p.right, rk.index, null_safe)
                if got is not None:
                    return got
        return _domain(p.left, col, null_safe)
    if isinstance(p, Join):
        nl = len(p.left.fields)
        on_left = col < nl
        padded = p.kind in (("right", "full") if on_left else ("left", "full"))
        if padded and null_safe:
            return None  # padding brings NULLs the side itself does not hold
        side, other = (p.left, p.right) if on_left else (p.right, p.left)
        c = col if on_left else col - nl
        got = _domain(side, c, null_safe)
        if got is not None or p.kind != "inner":
            return got
        # an inner join's key column only holds values the other side's key holds too
        mine, theirs = (p.left_keys, p.right_keys) if on_left else (p.right_keys, p.left_keys)
        for a, b in zip(mine, theirs, strict=True):
            if isinstance(a, Col) and a.index == c and isinstance(b, Col):
                got = _domain(other, b.index, null_safe)
                if got is not None:
                    return got
        return None
    return None


def _semi_below(p: Plan, col: int, dom: Plan, dcol: int, null_safe: bool) -> Plan:
    """``p`` keeping only rows whose field ``col`` is among ``dom``'s field ``dcol``, with
    the semi join placed below projections and joins (next to the input, where its
    arrangement can be one a join already keeps) but above filters: the semi join arranges
    the rows it is given, so a filter under it (on a scan, the scan's prefilter) shrinks
    that arrangement, where one over it would filter rows already arranged (``l_shipdate``
    in one year under a semi join of ``lineitem`` with a few parts: a seventh of the table
    arranged instead of all of it)."""
    if isinstance(p, Project) and isinstance(p.exprs[col], Col):
        inner = _semi_below(
            p.input,
            p.exprs[col].index,  # type: ignore[attr-defined]
            dom,
            dcol,
            null_safe,
        )
        return Project(inner, p.exprs, p.fields)
    if isinstance(p, Join) and p.kind == "inner":
        nl = len(p.left.fields)
        if col < nl:
            return dataclasses.replace(p, left=_semi_below(p.left, col, dom, dcol, null_safe))
        return dataclasses.replace(p, right=_semi_below(p.right, col - nl, dom, dcol, null_safe))
    if isinstance(p, SemiJoin):
        return dataclasses.replace(p, left=_semi_below(p.left, col, dom, dcol, null_safe))
    key = p.fields[col]
    dk = dom.fields[dcol]
    return SemiJoin(
        p,
        dom,
        (Col(col, key.type, key.nullable, key.name),),
        (Col(dcol, dk.type, dk.nullable, dk.name),),
        anti=False,
        null_safe=null_safe,
    )


def _restricted(side: Plan, col: int, dom: Plan, dcol: int, null_safe: bool) -> Plan | None:
    """``side`` (projections / filters over a grouped aggregate whose group key gives field
    ``col``) with the aggregate's input restricted to ``dom``'s keys, or None."""
    if isinstance(side, Filter):
        got = _restricted(side.input, col, dom, dcol, null_safe)
        return None if got is None else Filter(got, side.predicate)
    if isinstance(side, Project):
        e = side.exprs[col]
        if not isinstance(e, Col):
            return None
        got = _restricted(side.input, e.index, dom, dcol, null_safe)
        return None if got is None else Project(got, side.exprs, side.fields)
    if isinstance(side, Aggregate) and not side.scalar and col < len(side.keys):
        k = side.keys[col]
        if not isinstance(k, Col):
            return None
        return dataclasses.replace(
            side, input=_semi_below(side.input, k.index, dom, dcol, null_safe)
        )
    return None


def _restrict(p: Plan) -> Plan:
    if not isinstance(p, Join) or not p.left_keys:
        return p
    for agg_left in (False, True):
        # the aggregate's side may be restricted when the other side's rows are all
        # that can meet it: the right of an inner or left join, the left of an inner or
        # right join
        if p.kind not in (("inner", "right") if agg_left else ("inner", "left")):
            continue
        side, other = (p.left, p.right) if agg_left else (p.right, p.left)
        skeys, okeys = (p.left_keys, p.right_keys) if agg_left else (p.right_keys, p.left_keys)
        for sk, ok in zip(skeys, okeys, strict=True):
            if not (isinstance(sk, Col) and isinstance(ok, Col)):
                continue
            dom = _domain(other, ok.index, p.null_safe)
            if dom is None or not sk.type == ok.type == dom[0].fields[dom[1]].type:
                continue
            new = _restricted(side, sk.index, dom[0], dom[1], p.null_safe)
            if new is None:
                continue
            if agg_left:
                return dataclasses.replace(p, left=new)
            return dataclasses.replace(p, right=new)
    return p


def restrict_groups(plan: Plan) -> Plan:
    """``plan`` with aggregates joined on their group keys restricted to the keys the
    other side of the join can hold, where those come from a filtered table."""
    return _bottom_up(plan, _restrict)


# -- semi joins on the same keys, merged ---------------------------------------------------------


def _merge_semi(p: Plan) -> Plan:
    if not (isinstance(p, SemiJoin) and isinstance(p.left, SemiJoin)):
        return p
    first = p.left
    if (
        (first.anti and p.anti)
        or p.null_safe
        or first.null_safe
        or p.left_keys != first.left_keys
        or any(
            not (a.type == b.type == c.type)
            for a, b, c in zip(p.left_keys, first.right_keys, p.right_keys, strict=True)
        )
    ):
        return p
    # a row of L with key v: v is among A's keys and (not) among B's, so it meets a row of
    # A whose key B does (not) hold; a NULL v meets nothing either way (and the other way
    # round for an anti join first: v among B's keys and not A's)
    if first.anti:
        keys = SemiJoin(p.right, first.right, p.right_keys, first.right_keys, True)
        return SemiJoin(first.left, keys, p.left_keys, p.right_keys, False)
    keys = SemiJoin(first.right, p.right, first.right_keys, p.right_keys, p.anti)
    return SemiJoin(first.left, keys, first.left_keys, first.right_keys, False)


def merge_semijoins(plan: Plan) -> Plan:
    """``plan`` with two semi / anti joins on the same keys (not both anti) made one semi
    join, the two right sides' keys met first."""
    return _bottom_up(plan, _merge_semi)


# -- a semi join that a later join repeats ------------------------------------------------


def _lineage(p: Plan, col: int) -> list[tuple[Plan, int, int]] | None:
    """The nodes from ``p`` down to a semi join (not anti, not null-safe) through filters,
    inner joins, projections of columns and semi joins' left sides, following field
    ``col``: per node, the input taken (0 / 1) and the field there; the semi join last (with
    its left field). None when the field is computed or the path meets another node."""
    path: list[tuple[Plan, int, int]] = []
    while True:
        if isinstance(p, SemiJoin):
            if not p.anti and not p.null_safe:
                path.append((p, 0, col))
                return path
            path.append((p, 0, col))
            p = p.left
        elif isinstance(p, Filter):
            path.append((p, 0, col))
            p = p.input
        elif isinstance(p, Project):
            e = p.exprs[col]
            if not isinstance(e, Col):
                return None
            path.append((p, 0, col))
            col, p = e.index, p.input
        elif isinstance(p, Join) and p.kind == "inner" and not p.null_safe:
            nl = len(p.left.fields)
            if col < nl:
                path.append((p, 0, col))
                p = p.left
            else:
                path.append((p, 1, col - nl))
                col, p = col - nl, p.right
        else:
            return None


def _absorb(j: Plan) -> Plan:
    """``_absorb_right``, and the same with the relation on the join's left side."""
    got = _absorb_right(j)
    if got is not j or not isinstance(j, Join) or j.kind != "inner":
        return got
    nl, nr = len(j.left.fields), len(j.right.fields)
    swap = {i: (i + nr if i < nl else i - nl) for i in range(nl + nr)}
    mirrored = Join(
        j.right,
        j.left,
        "inner",
        j.right_keys,
        j.left_keys,
        None if j.residual is None else remap(j.residual, swap),
        (*j.right.fields, *j.left.fields),
        j.null_safe,
    )
    got = _absorb_right(mirrored)
    if got is mirrored:
        return j
    fs = got.fields
    order = [*range(nr, nr + nl), *range(nr)]
    return Project(
        got, tuple(Col(i, fs[i].type, fs[i].nullable, fs[i].name) for i in order), j.fields
    )


def _absorb_right(j: Plan) -> Plan:
    """``(.. L ⋉ keys(R) ..) ⋈ R`` on the same key, ``R`` distinct on it: the semi join
    becomes the join with ``R`` (each row of ``L`` meets at most one row of ``R``, the one
    the join above would meet: the key is the same value all the way up), the join above is
    dropped, and ``R`` is matched and arranged once, where the rows are fewest."""
    if not (
        isinstance(j, Join)
        and j.kind == "inner"
        and not j.null_safe
        and len(j.left_keys) == 1
        and isinstance(j.left_keys[0], Col)
        and isinstance(j.right_keys[0], Col)
    ):
        return j
    r = j.right
    rk = j.right_keys[0].index
    if frozenset({rk}) not in unique_sets(r) and frozenset() not in unique_sets(r):
        return j
    path = _lineage(j.left, j.left_keys[0].index)
    if path is None:
        return j
    semi, _, scol = path[-1]
    assert isinstance(semi, SemiJoin)
    keys = semi.right
    sk = semi.right_keys[0] if len(semi.right_keys) == 1 else None
    if not (
        len(semi.left_keys) == 1
        and isinstance(semi.left_keys[0], Col)
        and semi.left_keys[0].index == scol
        and isinstance(sk, Col)
        and isinstance(keys, Project)
        and keys.input == r
        and isinstance(keys.exprs[sk.index], Col)
        and keys.exprs[sk.index].index == rk  # type: ignore[attr-defined]
    ):
        return j
    m = len(r.fields)
    # the semi join made the join: its left rows with R's fields after them
    out: Plan = Join(
        semi.left,
        r,
        "inner",
        semi.left_keys,
        (Col(rk, j.right_keys[0].type),),
        None,
        (*semi.left.fields, *r.fields),
    )
    # each node above, R's fields kept after its own
    for node, side, _ in reversed(path[:-1]):
        width = len(node.fields)
        if isinstance(node, (Filter, SemiJoin)):  # (fields: their first input's)
            out = with_inputs(node, [out, *node.inputs()[1:]])
        elif isinstance(node, Project):
            inner_w = len(node.input.fields)
            extra = [Col(inner_w + i, f.type, f.nullable, f.name) for i, f in enumerate(r.fields)]
            out = Project(out, (*node.exprs, *extra), (*node.fields, *r.fields))
        else:
            assert isinstance(node, Join)
            nl = len(node.left.fields)
            if side == 1:
                out = Join(
                    node.left,
                    out,
                    node.kind,
                    node.left_keys,
                    node.right_keys,
                    node.residual,
                    (*node.fields, *r.fields),
                    node.null_safe,
                )
            else:
                # R's fields land between the sides: the residual's right fields move by m,
                # and a projection puts them last again
                shift = {i: (i if i < nl else i + m) for i in range(width)}
                residual = None if node.residual is None else remap(node.residual, shift)
                joined = Join(
                    out,
                    node.right,
                    node.kind,
                    node.left_keys,
                    node.right_keys,
                    residual,
                    (*node.left.fields, *r.fields, *node.right.fields),
                    node.null_safe,
                )
                order = [*range(nl), *range(nl + m, width + m), *range(nl, nl + m)]
                fs = joined.fields
                out = Project(
                    joined,
                    tuple(Col(i, fs[i].type, fs[i].nullable, fs[i].name) for i in order),
                    tuple(fs[i] for i in order),
                )
    # the join above: its rows are those of ``out`` (fields: L's, then R's)
    if j.residual is not None:
        out = Filter(out, j.residual)
    return Project(
        out,
        tuple(Col(i, f.type, f.nullable, f.name) for i, f in enumerate(j.fields)),
        j.fields,
    )


def absorb_semijoins(plan: Plan) -> Plan:
    """``plan`` with a semi join on the keys of a relation that a join above meets on the
    same key made that join (see ``_absorb``)."""
    return _bottom_up(plan, _absorb)


# -- two aggregates of one input, one of them over a filter of it ------------------------------

#: aggregates that skip NULL arguments, so restricting one to some rows is aggregating a CASE
#: that is NULL on the others (``count_star`` counts the rows where a constant is not NULL)
_SKIPPING = ("count_star", "count", "sum", "avg", "min", "max")

_FLAG = Field("_flag", BOOLEAN, False)


def _is_true(e: Expr) -> Expr:
    """TRUE where ``e`` is TRUE, FALSE where it is FALSE or NULL."""
    return Call("truth", (e,), BOOLEAN, False, (True, False)) if e.nullable else e


def _extra_filter(a: Plan, b: Plan) -> Expr | None:
    """The condition ``b`` adds to ``a`` when ``b`` is ``a``'s rows that meet it: ``b`` a
    filter over ``a``, or both filters of one input and ``b``'s conjuncts ``a``'s and more."""
    if not isinstance(b, Filter):
        return None
    if b.input == a:
        return b.predicate
    if isinstance(a, Filter) and a.input == b.input:
        mine = conjuncts(a.predicate)
        theirs = conjuncts(b.predicate)
        if all(c in theirs for c in mine):
            return conjoin([c for c in theirs if c not in mine]) or Lit(True, BOOLEAN)
    return None


def _flagged(a: Plan, b: Plan) -> Plan | None:
    """``a``'s rows with one more column, a flag TRUE exactly on the rows ``b`` holds, when
    ``b`` is ``a`` with one more filter somewhere below projections, filters and DISTINCTs
    that both share; None when the two are not of that shape. Under a DISTINCT a row is
    flagged when any of its copies is (the rows grouped, the flagged copies counted)."""
    cols = [Col(i, f.type, f.nullable, f.name) for i, f in enumerate(a.fields)]
    extra = _extra_filter(a, b)
    if extra is not None:
        return Project(a, (*cols, _is_true(extra)), (*a.fields, _FLAG))
    if type(a) is not type(b) or not isinstance(a, (Filter, Project, Distinct)):
        return None
    if (
        any(
            getattr(a, f.name) != getattr(b, f.name)
            for f in dataclasses.fields(a)
            if f.name not in ("input", "fields")
        )
        or a.fields != b.fields
    ):
        return None
    inner = _flagged(a.input, b.input)  # type: ignore[attr-defined]
    if inner is None:
        return None
    flag = Col(len(a.input.fields), BOOLEAN, False)
    if isinstance(a, Filter):
        return Filter(inner, a.predicate)
    if isinstance(a, Project):
        return Project(inner, (*a.exprs, flag), (*a.fields, _FLAG))
    counted = Aggregate(
        inner,
        tuple(cols),
        (Agg("count", _only(flag, Lit(1, BIGINT))),),
        False,
        (*a.fields, Field("_flagged", BIGINT, False)),
    )
    n = Col(len(cols), BIGINT, False)
    return Project(
        counted, (*cols, Call("gt", (n, Lit(0, BIGINT)), BOOLEAN, False)), (*a.fields, _FLAG)
    )


def _only(flag: Expr, value: Expr) -> Expr:
    """``value`` where ``flag`` is TRUE, NULL elsewhere."""
    return Call("case", (flag, value, Lit(None, value.type)), value.type, True)


def _keyset(p: Plan) -> tuple[Aggregate, Expr | None, list[int]] | None:
    """``p`` as the groups of an aggregate kept by conditions, one row per group: the
    aggregate, the conditions over its fields (None for every group) and its key column
    of each of ``p``'s columns; None for any other shape (DISTINCTs, projections and
    filters down to the aggregate). The columns must tell the groups apart: every key of
    the aggregate is one of them or equal to one of them."""
    cols: list[Expr] = [Col(i, f.type, f.nullable, f.name) for i, f in enumerate(p.fields)]
    conds: list[Expr] = []
    while not isinstance(p, Aggregate):
        if isinstance(p, Project):
            cols = [subst(c, p.exprs) for c in cols]
            conds = [subst(c, p.exprs) for c in conds]
        elif isinstance(p, Filter):
            conds.extend(conjuncts(p.predicate))
        elif not isinstance(p, Distinct):
            return None
        p = p.input
    if p.scalar:
        return None
    nk = len(p.keys)
    picked = [c.index for c in cols if isinstance(c, Col) and c.index < nk]
    if len(picked) != len(cols) or {p.keys[j] for j in picked} != set(p.keys):
        return None
    return p, conjoin(conds), picked


def _fuse_counts(p: Plan) -> Plan:
    """``(L ⋉ A) ⋉ B`` (either or both anti joins) on the same keys of ``L``, where ``A``
    and ``B`` are the groups of two aggregates with the same keys kept by conditions, one
    aggregate's input the other's with a filter more: one aggregate over the wider input,
    the narrower one's aggregates taken over its flagged rows, and one semi (or anti) join
    with the groups meeting both conditions."""
    if not (isinstance(p, SemiJoin) and isinstance(p.left, SemiJoin)):
        return p
    first = p.left
    ka, kb = _keyset(first.right), _keyset(p.right)
    if (
        ka is None
        or kb is None
        or first.left_keys != p.left_keys
        or first.null_safe != p.null_safe
        or any(not isinstance(k, Col) for k in (*first.right_keys, *p.right_keys))
    ):
        return p
    (agg_a, cond_a, pick_a), (agg_b, cond_b, pick_b) = ka, kb
    # the key column of each aggregate that each key of L meets
    meet_a = [pick_a[k.index] for k in first.right_keys]  # type: ignore[attr-defined]
    meet_b = [pick_b[k.index] for k in p.right_keys]  # type: ignore[attr-defined]
    nk = len(agg_a.keys)
    if (
        meet_a != meet_b
        or agg_a.keys != agg_b.keys
        or agg_a.fields[:nk] != agg_b.fields[:nk]
        or any(g.func not in _SKIPPING for g in (*agg_a.aggs, *agg_b.aggs))
    ):
        return p
    sides = [(agg_a, cond_a, first.anti), (agg_b, cond_b, p.anti)]
    base = _flagged(agg_a.input, agg_b.input)
    if base is None:
        sides.reverse()
        base = _flagged(agg_b.input, agg_a.input)
        if base is None:
            return p
    (wide, wide_cond, wide_anti), (narrow, narrow_cond, narrow_anti) = sides
    flag = Col(len(wide.input.fields), BOOLEAN, False)
    aggs: list[Agg] = []
    fields: list[Field] = list(wide.fields[:nk])

    def slot(g: Agg, f: Field) -> int:
        if g not in aggs:
            aggs.append(g)
            fields.append(f)
        return nk + aggs.index(g)

    wide_at = {nk + i: slot(g, wide.fields[nk + i]) for i, g in enumerate(wide.aggs)}
    narrow_at = {}
    for i, g in enumerate(narrow.aggs):
        arg = Lit(1, BIGINT) if g.func == "count_star" else g.arg
        assert arg is not None
        func = "count" if g.func == "count_star" else g.func
        f = narrow.fields[nk + i]
        name = f.name if f.name not in [w.name for w in wide.fields] else f"{f.name}_where"
        narrow_at[nk + i] = slot(
            dataclasses.replace(g, func=func, arg=_only(flag, arg)),
            Field(name, f.type, f.nullable or g.func not in ("count_star", "count")),
        )
    counted = slot(Agg("count", _only(flag, Lit(1, BIGINT))), Field("_rows_where", BIGINT, False))
    present = Col(counted, BIGINT, False)
    fused = Aggregate(base, wide.keys, tuple(aggs), False, tuple(fields))
    keys_at = {i: i for i in range(nk)}
    held_wide = _is_true(remap(wide_cond, {**keys_at, **wide_at})) if wide_cond else None
    held_narrow = conjoin(
        [
            Call("gt", (present, Lit(0, BIGINT)), BOOLEAN, False),
            *([_is_true(remap(narrow_cond, {**keys_at, **narrow_at}))] if narrow_cond else []),
        ]
    )
    assert held_narrow is not None
    if wide_anti and narrow_anti:
        # rows of L whose key is in neither set of groups
        anti, parts = True, [held_wide or Lit(True, BOOLEAN), held_narrow]
        keep = conjoin(parts, "or")
    else:
        # at least one semi join: the key is among the wide aggregate's groups
        anti, parts = False, []
        for held, is_anti in ((held_wide, wide_anti), (held_narrow, narrow_anti)):
            if held is None:
                held = Lit(True, BOOLEAN)
            parts.append(Call("not", (held,), BOOLEAN, False) if is_anti else held)
        keep = conjoin(parts)
    assert keep is not None
    groups = Project(
        Filter(fused, keep),
        tuple(Col(j, fields[j].type, fields[j].nullable, fields[j].name) for j in meet_a),
        tuple(fields[j] for j in meet_a),
    )
    right = tuple(Col(i, f.type, f.nullable, f.name) for i, f in enumerate(groups.fields))
    return SemiJoin(first.left, groups, p.left_keys, right, anti, p.null_safe)


def fuse_counts(plan: Plan) -> Plan:
    """``plan`` with two semi / anti joins on the groups of two aggregates of one input, one
    of them over a filter of it, made one join on the groups of one aggregate (TPC-H Q21:
    orders with two suppliers, and with two late ones: one count of each order's suppliers
    and of its late suppliers)."""
    return _bottom_up(plan, _fuse_counts)


# -- rows known to be distinct ----------------------------------------------------------------


def unique_sets(
    p: Plan, keys: dict[str, list[frozenset[int]]] | None = None
) -> list[frozenset[int]]:
    """Sets of ``p``'s columns on which no two of its rows agree (NULL agreeing with NULL),
    as far as the plan shows; [] when none is known. ``keys``: tables' declared keys
    (informational; pass them only where a wrong declaration cannot change an answer)."""
    if isinstance(p, Aggregate):
        return [frozenset()] if p.scalar else [frozenset(range(len(p.keys)))]
    if isinstance(p, Distinct):
        return [frozenset(range(len(p.fields))), *unique_sets(p.input, keys)]
    if isinstance(p, Filter):
        return unique_sets(p.input, keys)
    if isinstance(p, SemiJoin):
        return unique_sets(p.left, keys)
    if isinstance(p, Scan) and keys:
        declared = keys.get(p.table, [])
        if p.columns is None:
            return list(declared)
        # (a string's class among literals is no key: other strings share class 0)
        classed = {p.columns[i] for i, _ in p.classes}
        at = {c: j for j, c in enumerate(p.columns) if c not in classed}
        return [frozenset(at[c] for c in k) for k in declared if k <= at.keys()]
    if isinstance(p, Project):
        out = []
        for cols in unique_sets(p.input, keys):
            where: dict[int, int] = {}
            for j, e in enumerate(p.exprs):
                if isinstance(e, Col) and e.index in cols:
                    where.setdefault(e.index, j)
            if len(where) == len(cols):
                out.append(frozenset(where.values()))
        return out
    return []


def _drop(p: Plan) -> Plan:
    if isinstance(p, Distinct) and unique_sets(p.input):
        return p.input
    return p


def drop_distinct(plan: Plan) -> Plan:
    """``plan`` without DISTINCTs over rows that are distinct already."""
    return _bottom_up(plan, _drop)


# -- aggregates computed once for two uses ---------------------------------------------------

_PARTIAL = {"sum": "sum", "count": "sum", "count_star": "sum", "min": "min", "max": "max"}


def _aggregates(plan: Plan) -> list[Aggregate]:
    out = []
    stack = [plan]
    while stack:
        p = stack.pop()
        if isinstance(p, Aggregate) and not p.scalar:
            out.append(p)
        stack.extend(p.inputs())
    return out


def _share(p: Plan, found: list[Aggregate]) -> Plan:
    if not isinstance(p, Aggregate) or p.scalar or not isinstance(p.input, Join):
        return p
    j = p.input
    if j.kind != "inner" or j.residual is not None or j.null_safe or not j.left_keys:
        return p
    if any(a.distinct or a.func not in _PARTIAL or a.param for a in p.aggs):
        return p  # (a try_sum's partial sums could overflow where its total does not)
    nl = len(j.left.fields)
    for side in ("right", "left"):
        lo, hi = (nl, len(j.fields)) if side == "right" else (0, nl)
        mine, other = (j.right, j.left) if side == "right" else (j.left, j.right)
        my_keys = j.right_keys if side == "right" else j.left_keys
        if not all(isinstance(k, Col) for k in my_keys):
            continue
        # the aggregates' arguments over this side (in its own numbering)
        args: list[Expr | None] = []
        for a in p.aggs:
            if a.arg is None:
                args.append(None)
                continue
            u = uses(a.arg)
            if not u or min(u) < lo or max(u) >= hi:
                break
            args.append(_shift(a.arg, -lo))
        else:
            key_at = {k.index: i for i, k in enumerate(my_keys) if isinstance(k, Col)}
            if not all(
                isinstance(k, Col) and (not lo <= k.index < hi or k.index - lo in key_at)
                for k in p.keys
            ):
                continue
            got = _partials(found, mine, my_keys, p.aggs, args)
            if got is None:
                continue
            x, cols = got
            return _rebuild(p, j, side, x, other, key_at, cols, lo, hi, nl)
    return p


def _partials(
    found: list[Aggregate],
    mine: Plan,
    keys: tuple[Expr, ...],
    aggs: tuple[Agg, ...],
    args: list[Expr | None],
) -> tuple[Aggregate, list[int]] | None:
    """An aggregate of ``mine`` grouped by ``keys`` holding every partial result ``aggs``
    need, and the column of each."""
    for x in found:
        if x.input != mine or tuple(x.keys) != tuple(keys):
            continue
        have = {
            (a.func, a.arg): len(x.keys) + i
            for i, a in enumerate(x.aggs)
            if not a.distinct and not a.param
        }
        cols = []
        for a, arg in zip(aggs, args, strict=True):
            col = have.get((a.func, arg))
            if col is None:
                break
            cols.append(col)
        else:
            return x, cols
    return None


def _rebuild(
    p: Aggregate,
    j: Join,
    side: str,
    x: Aggregate,
    other: Plan,
    key_at: dict[int, int],
    cols: list[int],
    lo: int,
    hi: int,
    nl: int,
) -> Plan:
    no = len(other.fields)
    nk = len(x.keys)
    xkeys = tuple(Col(i, x.fields[i].type, x.fields[i].nullable) for i in range(nk))
    xp: Plan = x
    if nk == 1:
        # ``other`` may hold only keys that a filter of ``x`` keeps (it is semi-joined with
        # them, as ``o_orderkey IN (SELECT l_orderkey .. HAVING sum(q) > 300)``): then each
        # of its rows meets the one row of ``x`` with its key, which that filter keeps, so
        # joining the filtered ``x`` is the same and follows only the keys it keeps
        # (each side's keys are in its own numbering)
        ok = j.left_keys[0] if side == "right" else j.right_keys[0]
        if isinstance(ok, Col):
            for y, f, c in _restrictions(other, ok.index):
                if y == x and c == 0:
                    xp = f
                    break
    if side == "right":
        new = Join(other, xp, "inner", j.left_keys, xkeys, None, other.fields + x.fields)
        x_at, shift_other = no, 0
    else:
        new = Join(xp, other, "inner", xkeys, j.right_keys, None, x.fields + other.fields)
        x_at, shift_other = 0, len(x.fields)

    def col(i: int) -> Col:
        return Col(i, new.fields[i].type, new.fields[i].nullable)

    keys = []
    for k in p.keys:
        assert isinstance(k, Col)
        if lo <= k.index < hi:
            keys.append(col(x_at + key_at[k.index - lo]))
        else:
            keys.append(col(k.index - (nl if side == "left" else 0) + shift_other))
    aggs = tuple(Agg(_PARTIAL[a.func], col(x_at + c)) for a, c in zip(p.aggs, cols, strict=True))
    return Aggregate(new, tuple(keys), aggs, False, p.fields)


def _restrictions(p: Plan, col: int) -> list[tuple[Plan, Filter, int]]:
    """Filters of aggregates whose kept group keys include every value column ``col`` of
    ``p`` holds: ``(aggregate, filters over it, the key's column in it)`` for each semi
    join on ``col`` (through inner joins, filters and column projections) with a
    projection of a key column of a filtered aggregate."""
    out: list[tuple[Plan, Filter, int]] = []
    if isinstance(p, SemiJoin) and not p.anti:
        for lk, rk in zip(p.left_keys, p.right_keys, strict=True):
            if not (isinstance(lk, Col) and lk.index == col and isinstance(rk, Col)):
                continue
            r = p.right
            at = rk.index
            if isinstance(r, Project):
                e = r.exprs[at]
                if not isinstance(e, Col):
                    continue
                r, at = r.input, e.index
            top = r
            while isinstance(r, Filter):
                r = r.input
            if (
                isinstance(top, Filter)
                and isinstance(r, Aggregate)
                and not r.scalar
                and at < len(r.keys)
            ):
                out.append((r, top, at))
        return out + _restrictions(p.left, col)
    if isinstance(p, Join) and p.kind == "inner":
        nl = len(p.left.fields)
        return _restrictions(p.left, col) if col < nl else _restrictions(p.right, col - nl)
    if isinstance(p, Filter):
        return _restrictions(p.input, col)
    if isinstance(p, Project) and isinstance(p.exprs[col], Col):
        e = p.exprs[col]
        assert isinstance(e, Col)
        return _restrictions(p.input, e.index)
    return out


def share_partials(plan: Plan) -> Plan:
    """``plan`` with aggregates over a join reading the partial results of an aggregate
    the plan already computes, where there is one (see the module docstring)."""
    found = _aggregates(plan)
    if len(found) < 2:
        return plan
    return _bottom_up(plan, lambda p: _share(p, found))


# -- equalities across a join as its keys ----------------------------------------------------


def _equi(p: Plan) -> Plan:
    if not (isinstance(p, Filter) and isinstance(p.input, Join)):
        return p
    j = p.input
    if j.kind != "inner" or j.null_safe:
        return p
    nl = len(j.left.fields)
    lk, rk, rest = list(j.left_keys), list(j.right_keys), []
    for c in conjuncts(p.predicate):
        if isinstance(c, Call) and c.op == "eq":
            a, b = c.args
            ua, ub = uses(a), uses(b)
            if ub and ua and max(ub) < nl <= min(ua):
                a, b, ua, ub = b, a, ub, ua
            # (not doubles: a join matches stored values, and SQL's = on doubles has its
            # own cases, NaN and -0.0)
            if (
                ua
                and ub
                and max(ua) < nl <= min(ub)
                and a.type == b.type
                and a.type.kind != "double"
            ):
                lk.append(a)
                rk.append(_shift(b, -nl))
                continue
        rest.append(c)
    if len(lk) == len(j.left_keys):
        return p
    # key pairs of constants only (a one-row side attached on nothing) are dropped
    pairs = [(x, y) for x, y in zip(lk, rk, strict=True) if uses(x) or uses(y)]
    new = dataclasses.replace(
        j, left_keys=tuple(x for x, _ in pairs), right_keys=tuple(y for _, y in pairs)
    )
    if not rest:
        return new
    pred = (
        rest[0]
        if len(rest) == 1
        else Call("and", tuple(rest), p.predicate.type, p.predicate.nullable)
    )
    return Filter(new, pred)


def equi_filters(plan: Plan) -> Plan:
    """``plan`` with equalities between the sides of an inner join, filtered above it,
    made keys of the join."""
    return _bottom_up(plan, _equi)


# -- scalar aggregates met only on a key ------------------------------------------------------

#: aggregates whose value over no rows is NULL
_NULL_ON_EMPTY = (
    "min",
    "max",
    "sum",
    "avg",
    *SPREAD_FUNCS,
    *REDUCED_FUNCS,
    *PAIR_FUNCS,
    *MOMENT_FUNCS,
)


def _unscalar(p: Plan, col: int) -> Plan | None:
    """``p`` with the scalar aggregate that column ``col`` of ``p`` comes from (through
    projections of columns and filters, which keep or drop its one row) made grouped,
    when that column is an aggregate NULL over no rows; None when it is not so."""
    if isinstance(p, Project):
        e = p.exprs[col]
        if not isinstance(e, Col):
            return None
        got = _unscalar(p.input, e.index)
        return None if got is None else with_inputs(p, [got])
    if isinstance(p, Filter):
        got = _unscalar(p.input, col)
        return None if got is None else with_inputs(p, [got])
    if isinstance(p, Aggregate) and p.scalar and not p.keys:
        j = col - len(p.keys)
        if 0 <= j < len(p.aggs) and p.aggs[j].func in _NULL_ON_EMPTY:
            return dataclasses.replace(p, scalar=False)
    return None


def _keyed(p: Plan) -> Plan:
    if not isinstance(p, Join) or p.null_safe:
        return p
    # the sides whose unmatched rows the join drops
    sides = {"inner": (0, 1), "left": (1,), "right": (0,)}.get(p.kind, ())
    new = [p.left, p.right]
    for s in sides:
        for k in p.left_keys if s == 0 else p.right_keys:
            if isinstance(k, Col):
                got = _unscalar(new[s], k.index)
                if got is not None:
                    new[s] = got
                    break
    return with_inputs(p, new)


def keyed_scalars(plan: Plan) -> Plan:
    """``plan`` with scalar aggregates that a join meets only on a NULL-on-empty aggregate
    column made grouped (no row on empty input)."""
    return _bottom_up(plan, _keyed)
