"""Plan rewrites that keep the answer and cut the work: column pruning.

``prune(plan)`` rewrites a plan so that every node produces only the fields something
above it reads (down to the scans, which then read only the columns a view uses). Joins
then arrange narrower rows, and the dataflow's inputs carry only used columns.

Fields that decide the answer are always kept: every field under ``Distinct``, a set
operation or a recursive relation (they compare whole rows), and an aggregate's group keys.
"""

from __future__ import annotations

import contextvars
import dataclasses

from ddflow.sql.expr import Call, Col, Expr, conjuncts
from ddflow.sql.plan import (
    Aggregate,
    Distinct,
    Filter,
    Join,
    Plan,
    Project,
    RecRef,
    Recursive,
    Scan,
    SemiJoin,
    SetOp,
    TopK,
    UnionAll,
    Values,
    Window,
)
from ddflow.sql.rows import Field
from ddflow.sql.types import SqlType

__all__ = ["prune", "uses"]


def uses(e: Expr) -> set[int]:
    """The input fields an expression reads."""
    out: set[int] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Col):
            out.add(x.index)
        stack.extend(x.children())
    return out


def remap(e: Expr, m: dict[int, int]) -> Expr:
    if isinstance(e, Col):
        return Col(m[e.index], e.type, e.nullable, e.name)
    if isinstance(e, Call):
        return Call(e.op, tuple(remap(a, m) for a in e.args), e.type, e.nullable, e.extra)
    return e


#: while ``prune`` runs on a plan with repeated subtrees: for each node heading one (by
#: id), its group of equal subtrees, and for each group the fields any of them is asked for
_POOLED: contextvars.ContextVar[
    tuple[dict[int, int], dict[int, set[int]], dict[int, list[Expr]]] | None
] = contextvars.ContextVar("_POOLED", default=None)


def prune(plan: Plan) -> Plan:
    """``plan`` with unused fields dropped below its output (its own fields unchanged).

    Equal subtrees (a scalar subquery repeating the joins of the query around it, as
    TPC-H Q11's total does) are pruned to the same fields, the union of what each of
    their places reads, so they stay equal and the dataflow builds them once."""
    groups = _repeated(plan)
    everything = set(range(len(plan.fields)))
    if not groups:
        out, m = _prune(plan, everything)
        return _exact(out, m, sorted(m))
    pooled: dict[int, set[int]] = {g: set() for g in set(groups.values())}
    pooled_e: dict[int, list[Expr]] = {g: [] for g in pooled}
    token = _POOLED.set((groups, pooled, pooled_e))
    try:
        for _ in range(4):  # until no place asks a group for something it was not given
            before = [(len(pooled[g]), len(pooled_e[g])) for g in pooled]
            out, m = _prune(plan, everything)
            if before == [(len(pooled[g]), len(pooled_e[g])) for g in pooled]:
                break
    finally:
        _POOLED.reset(token)
    return _exact(out, m, sorted(m))


def _repeated(plan: Plan) -> dict[int, int]:
    """For each node (by id) heading a subtree that occurs more than once in ``plan``
    (scans aside: they are inputs, shared anyway), the number of its group of equal
    subtrees; empty when there is none."""
    nodes: list[Plan] = []
    count: dict[Plan, int] = {}
    stack = [plan]
    while stack:
        p = stack.pop()
        nodes.append(p)
        count[p] = count.get(p, 0) + 1
        stack.extend(p.inputs())
    keys: dict[Plan, int] = {}
    return {
        id(p): keys.setdefault(p, len(keys))
        for p in nodes
        if count[p] > 1 and not isinstance(p, Scan)
    }


def _exact(p: Plan, m: dict[int, int], need: list[int]) -> Plan:
    """``p`` projected to exactly the fields ``need`` (old positions), in order."""
    if [m[i] for i in need] == list(range(len(p.fields))):
        return p
    exprs = tuple(Col(m[i], p.fields[m[i]].type, p.fields[m[i]].nullable) for i in need)
    return Project(p, exprs, tuple(p.fields[m[i]] for i in need))


def _prune(p: Plan, need: set[int]) -> tuple[Plan, dict[int, int]]:
    """A plan producing (at least) fields ``need`` of ``p``, and where each one went."""
    new: Plan
    shared = _POOLED.get()
    if shared is not None:
        g = shared[0].get(id(p))
        if g is not None:  # one of several equal subtrees: all give the fields any needs
            shared[1][g] |= need
            need = set(shared[1][g])
    if isinstance(p, Scan):
        cols = p.columns if p.columns is not None else tuple(range(len(p.fields)))
        keep = sorted(need) if need else [0]
        at = {old: j for j, old in enumerate(keep)}
        new = Scan(
            p.table,
            tuple(p.fields[i] for i in keep),
            tuple(cols[i] for i in keep),
            p.prefilter,
            tuple((at[i], lits) for i, lits in p.classes if i in at),
        )
        return new, at
    if isinstance(p, Filter):
        inner, m = _prune(p.input, need | uses(p.predicate))
        return Filter(inner, remap(p.predicate, m)), m
    if isinstance(p, Project):
        keep = sorted(need) if need else [0]
        inner, outs = _prune_e(p.input, [p.exprs[i] for i in keep])
        new = Project(inner, tuple(outs), tuple(p.fields[i] for i in keep))
        return new, {old: j for j, old in enumerate(keep)}
    if isinstance(p, Join):
        nl = len(p.left.fields)
        lneed = {i for i in need if i < nl}
        rneed = {i - nl for i in need if i >= nl}
        for k in p.left_keys:
            lneed |= uses(k)
        for k in p.right_keys:
            rneed |= uses(k)
        if p.residual is not None:
            for i in uses(p.residual):
                (lneed if i < nl else rneed).add(i if i < nl else i - nl)
        left, lm = _prune(p.left, lneed)
        right, rm = _prune(p.right, rneed)
        lmap = dict(lm)
        nl2 = len(left.fields)
        both = {**lmap, **{nl + i: nl2 + j for i, j in rm.items()}}
        # field types / nullability as the join made them (outer joins pad with NULL)
        lfields = list(left.fields)
        for old, pos in lm.items():
            lfields[pos] = p.fields[old]
        rfields = list(right.fields)
        for old, pos in rm.items():
            rfields[pos] = p.fields[nl + old]
        # fields the children kept beyond ``need`` keep the join's nullability too
        if p.kind in ("right", "full"):
            lfields = [f if f.nullable else _nullable(f) for f in lfields]
        if p.kind in ("left", "full"):
            rfields = [f if f.nullable else _nullable(f) for f in rfields]
        new = Join(
            left,
            right,
            p.kind,
            tuple(remap(k, lm) for k in p.left_keys),
            tuple(remap(k, rm) for k in p.right_keys),
            remap(p.residual, both) if p.residual is not None else None,
            tuple(lfields) + tuple(rfields),
            p.null_safe,
        )
        return new, both
    if isinstance(p, SemiJoin):
        lneed = set(need)
        for k in p.left_keys:
            lneed |= uses(k)
        rneed = set()
        for k in p.right_keys:
            rneed |= uses(k)
        left, lm = _prune(p.left, lneed)
        right, rm = _prune(p.right, rneed)
        return SemiJoin(
            left,
            right,
            tuple(remap(k, lm) for k in p.left_keys),
            tuple(remap(k, rm) for k in p.right_keys),
            p.anti,
            p.null_safe,
        ), lm
    if isinstance(p, Aggregate):
        nk = len(p.keys)
        keep_aggs = sorted(i - nk for i in need if i >= nk)
        aggs = [p.aggs[i] for i in keep_aggs]
        args = [a.arg for a in aggs if a.arg is not None]
        # group keys and arguments are computed straight from the input's input
        inner, outs = _prune_e(p.input, [*p.keys, *args])
        from ddflow.sql.plan import Agg

        it = iter(outs[nk:])
        new_aggs = tuple(
            dataclasses.replace(a, arg=next(it) if a.arg is not None else None) for a in aggs
        )
        fields = p.fields[:nk] + tuple(p.fields[nk + i] for i in keep_aggs)
        if not fields:
            # nothing of a global aggregate is read, but its one row is: a count keeps it
            # (a row of no columns has nothing to carry it)
            new_aggs = (Agg("count_star", None),)
            fields = (Field("_rows", SqlType("int", 64), False),)
        new = Aggregate(inner, tuple(outs[:nk]), new_aggs, p.scalar, fields)
        mapping = {i: i for i in range(nk)}
        mapping.update({nk + old: nk + j for j, old in enumerate(keep_aggs)})
        return new, mapping
    if isinstance(p, Distinct):
        inner = _all(p.input)
        return Distinct(inner), _ident(p)
    if isinstance(p, UnionAll):
        keep = sorted(need) if need else [0]
        parts = []
        for part in p.parts:
            q, m = _prune(part, set(keep))
            parts.append(_exact(q, m, keep))
        fields = tuple(p.fields[i] for i in keep)
        return UnionAll(tuple(parts), fields), {old: j for j, old in enumerate(keep)}
    if isinstance(p, SetOp):
        return SetOp(p.kind, p.all, _all(p.left), _all(p.right), p.fields), _ident(p)
    if isinstance(p, TopK):
        want = set(need) | {k.index for k in p.keys}
        inner, m = _prune(p.input, want)
        from ddflow.sql.plan import SortKey

        keys = tuple(SortKey(m[k.index], k.desc, k.nulls_first) for k in p.keys)
        return TopK(inner, keys, p.limit, p.offset), m
    if isinstance(p, Window):
        # the input carries only what is read above and what the windows read
        nin = len(p.input.fields)
        want = {i for i in need if i < nin} | set(p.partition)
        want |= {k.index for k in p.order} | {a for f in p.funcs for a in f.args}
        inner, m = _prune(p.input, want)
        from ddflow.sql.plan import SortKey, WinFunc

        funcs = tuple(
            WinFunc(f.func, tuple(m[a] for a in f.args), f.param, f.frame, f.ignore_nulls)
            for f in p.funcs
        )
        keys = tuple(SortKey(m[k.index], k.desc, k.nulls_first) for k in p.order)
        nw = len(inner.fields)
        new_w = Window(
            inner,
            tuple(m[i] for i in p.partition),
            keys,
            funcs,
            inner.fields + p.fields[nin:],
        )
        mapping = {i: m[i] for i in want}
        mapping.update({nin + j: nw + j for j in range(len(p.funcs))})
        return new_w, mapping
    if isinstance(p, Recursive):
        return Recursive(p.name, _all(p.base), _all(p.step), p.distinct, p.fields, p.limit), _ident(
            p
        )
    if isinstance(p, (RecRef, Values)):
        return p, _ident(p)
    return p, _ident(p)


_STRICT = {
    "add",
    "sub",
    "mul",
    "div",
    "idiv",
    "mod",
    "pow",
    "neg",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "cast",
    "try_cast",
    "extract",
    "date_add_days",
    "add_months",
    "ts_add_micros",
    "ts_add_months",
    "date_diff",
    "upper",
    "lower",
    "length",
    "trim",
    "ltrim",
    "rtrim",
    "substr",
    "abs",
    "floor",
    "ceil",
    "round",
    "sign",
    "like",
    "concat",
}


def _strict(e: Expr) -> bool:
    """Whether ``e`` is NULL when any field it reads is NULL (so computing it before an
    outer join pads a row with NULL gives what computing it after would)."""
    if isinstance(e, Col):
        return True
    if isinstance(e, Call):
        return e.op in _STRICT and all(_strict(a) or not uses(a) for a in e.args)
    return False


def subst(e: Expr, exprs: tuple[Expr, ...] | list[Expr]) -> Expr:
    """``e`` with field ``i`` replaced by ``exprs[i]``."""
    if isinstance(e, Col):
        return exprs[e.index]
    if isinstance(e, Call):
        return Call(e.op, tuple(subst(a, exprs) for a in e.args), e.type, e.nullable, e.extra)
    return e


def _prune_e(p: Plan, exprs: list[Expr]) -> tuple[Plan, list[Expr]]:
    """A plan and, for each expression over ``p``'s fields, an equal expression over the
    new plan's fields. Expressions of one join input are computed on that input, before
    the join (narrower rows to arrange), and chains of projections compose."""
    shared = _POOLED.get()
    if shared is not None:
        g = shared[0].get(id(p))
        if g is not None:  # one of several equal subtrees: all compute what any asks for
            pool = shared[2][g]
            for e in exprs:
                if e not in pool:
                    pool.append(e)
            every = list(pool)
            q, outs = _prune_e_node(p, every)
            return q, [outs[every.index(e)] for e in exprs]
    return _prune_e_node(p, exprs)


def _prune_e_node(p: Plan, exprs: list[Expr]) -> tuple[Plan, list[Expr]]:
    if isinstance(p, Project):
        return _prune_e(p.input, [subst(e, p.exprs) for e in exprs])
    if isinstance(p, Filter):
        inner, outs = _prune_e(p.input, [*exprs, p.predicate])
        return Filter(inner, outs[-1]), outs[:-1]
    if isinstance(p, Join):
        return _prune_join(p, exprs)
    need: set[int] = set()
    for e in exprs:
        need |= uses(e)
    q, m = _prune(p, need)
    return q, [remap(e, m) for e in exprs]


def _prune_join(p: Join, exprs: list[Expr]) -> tuple[Plan, list[Expr]]:
    nl = len(p.left.fields)
    # expressions of one side, computed on that side (only strict ones on a padded side)
    push_left = p.kind in ("inner", "left") or p.kind in ("right", "full")
    lpush: list[Expr] = []
    rpush: list[Expr] = []
    where: list[tuple[str, int] | None] = []
    for e in exprs:
        u = uses(e)
        side = None
        if u and not isinstance(e, Col):
            if max(u) < nl and (p.kind in ("inner", "left") or _strict(e)):
                side = "l"
            elif min(u) >= nl and (p.kind in ("inner", "right") or _strict(e)):
                side = "r"
        if side == "l":
            where.append(("l", _slot(lpush, e)))
        elif side == "r":
            where.append(("r", _slot(rpush, _shift(e, -nl))))
        else:
            where.append(None)
    del push_left
    # an expression over both sides: its parts over one side are computed on that side
    # (``CASE WHEN n_name = 'X' THEN price * (1 - disc) ...`` above a join carries one
    # computed column up, not the two it reads)
    exprs = list(exprs)
    for i, (e, w) in enumerate(zip(exprs, where, strict=True)):
        if w is None and isinstance(e, Call):
            exprs[i] = _push_parts(e, nl, p.kind, lpush, rpush)
    # the fields still read at or above the join
    lneed: set[int] = set()
    rneed: set[int] = set()
    for e, w in zip(exprs, where, strict=True):
        if w is None:
            for i in uses(e):
                (lneed if i < nl else rneed).add(i if i < nl else i - nl)
    for k in p.left_keys:
        lneed |= uses(k)
    for k in p.right_keys:
        rneed |= uses(k)
    if p.residual is not None:
        for i in uses(p.residual):
            (lneed if i < nl else rneed).add(i if i < nl else i - nl)
    left, lmap, lext = _side(p.left, sorted(lneed), lpush)
    right, rmap, rext = _side(p.right, sorted(rneed), rpush)
    nl2 = len(left.fields)
    both = {**lmap, **{nl + i: nl2 + j for i, j in rmap.items()}}
    lfields = list(left.fields)
    for old, pos in lmap.items():
        lfields[pos] = p.fields[old]
    rfields = list(right.fields)
    for old, pos in rmap.items():
        rfields[pos] = p.fields[nl + old]
    if p.kind in ("right", "full"):
        lfields = [f if f.nullable else _nullable(f) for f in lfields]
    if p.kind in ("left", "full"):
        rfields = [f if f.nullable else _nullable(f) for f in rfields]
    new = Join(
        left,
        right,
        p.kind,
        tuple(remap(k, lmap) for k in p.left_keys),
        tuple(remap(k, rmap) for k in p.right_keys),
        remap(p.residual, both) if p.residual is not None else None,
        tuple(lfields) + tuple(rfields),
        p.null_safe,
    )
    outs: list[Expr] = []
    for e, w in zip(exprs, where, strict=True):
        if w is None:
            outs.append(_fill_pushed(remap(e, both), new, lext, nl2 + 0, rext))
        elif w[0] == "l":
            j = lext[w[1]]
            outs.append(Col(j, new.fields[j].type, new.fields[j].nullable))
        else:
            j = nl2 + rext[w[1]]
            outs.append(Col(j, new.fields[j].type, new.fields[j].nullable))
    return new, outs


def _slot(pushed: list[Expr], e: Expr) -> int:
    """Where ``e`` is in ``pushed`` (appended if it is not there: computed once)."""
    for k, x in enumerate(pushed):
        if x == e:
            return k
    pushed.append(e)
    return len(pushed) - 1


def _push_parts(e: Call, nl: int, kind: str, lpush: list[Expr], rpush: list[Expr]) -> Expr:
    """``e`` with each largest computed part over one join side that reads two or more of
    its fields replaced by a reference to that part, appended to (or found in) ``lpush`` /
    ``rpush``. (A part of one field saves no column and would be computed for every row of
    its side, not only the rows the join keeps: ``CAST(l_quantity AS DECIMAL(21,7))`` for
    all line items instead of those of a few parts.)"""
    if e.op == "and":
        e = _conjuncts_by_side(e, nl)
    args: list[Expr] = []
    for a in e.args:
        u = uses(a)
        if len(u) < 2:
            args.append(_push_parts(a, nl, kind, lpush, rpush) if isinstance(a, Call) else a)
            continue
        if isinstance(a, Call) and max(u) < nl and (kind in ("inner", "left") or _strict(a)):
            args.append(Call("_pushed", (), a.type, a.nullable, ("l", _slot(lpush, a))))
        elif isinstance(a, Call) and min(u) >= nl and (kind in ("inner", "right") or _strict(a)):
            args.append(
                Call("_pushed", (), a.type, a.nullable, ("r", _slot(rpush, _shift(a, -nl))))
            )
        elif isinstance(a, Call):
            args.append(_push_parts(a, nl, kind, lpush, rpush))
        else:
            args.append(a)
    return Call(e.op, tuple(args), e.type, e.nullable, e.extra)


def _conjuncts_by_side(e: Call, nl: int) -> Call:
    """An AND with the conjuncts over one join side gathered into one conjunct per side,
    so that ``p_brand = 'X' AND l_quantity >= 1 AND p_size <= 5`` can become one boolean
    computed on the part side (AND is associative and commutative, NULLs included)."""
    terms = conjuncts(e)
    left = [a for a in terms if uses(a) and max(uses(a)) < nl]
    right = [a for a in terms if uses(a) and min(uses(a)) >= nl]
    if (len(left) < 2 and len(right) < 2) or len(left) == len(terms) or len(right) == len(terms):
        return e  # nothing to gather, or all of it over one side already
    rest = [a for a in terms if not any(a is x for x in left + right)]

    def one(group: list[Expr]) -> list[Expr]:
        if len(group) < 2:
            return group
        return [Call("and", tuple(group), e.type, any(a.nullable for a in group))]

    return Call("and", (*one(left), *one(right), *rest), e.type, e.nullable, e.extra)


def _fill_pushed(e: Expr, join: Join, lext: list[int], nl2: int, rext: list[int]) -> Expr:
    """``e`` with the references made by ``_push_parts`` pointing at the join's columns."""
    if not isinstance(e, Call):
        return e
    if e.op == "_pushed":
        side, k = e.extra
        j = lext[k] if side == "l" else nl2 + rext[k]
        return Col(j, join.fields[j].type, join.fields[j].nullable)
    return Call(
        e.op,
        tuple(_fill_pushed(a, join, lext, nl2, rext) for a in e.args),
        e.type,
        e.nullable,
        e.extra,
    )


def _side(p: Plan, need: list[int], extra: list[Expr]) -> tuple[Plan, dict[int, int], list[int]]:
    """``p`` producing its fields ``need`` and then the expressions ``extra``: the plan,
    where each needed field went, and where each expression went."""
    if not extra:
        q, m = _prune(p, set(need))
        return q, m, []
    cols = [Col(i, p.fields[i].type, p.fields[i].nullable) for i in need]
    inner, outs = _prune_e(p, [*cols, *extra])
    fields = tuple(p.fields[i] for i in need) + tuple(
        Field(f"_e{j}", e.type, e.nullable) for j, e in enumerate(extra)
    )
    q = Project(inner, tuple(outs), fields)
    return q, {old: j for j, old in enumerate(need)}, [len(need) + j for j in range(len(extra))]


def _shift(e: Expr, by: int) -> Expr:
    if isinstance(e, Col):
        return Col(e.index + by, e.type, e.nullable, e.name)
    if isinstance(e, Call):
        return Call(e.op, tuple(_shift(a, by) for a in e.args), e.type, e.nullable, e.extra)
    return e


def _nullable(f: Field) -> Field:
    return Field(f.name, f.type, True, f.source)


def _ident(p: Plan) -> dict[int, int]:
    return {i: i for i in range(len(p.fields))}


def _all(p: Plan) -> Plan:
    """``p`` pruned below but producing all its fields, in order."""
    q, m = _prune(p, set(range(len(p.fields))))
    return _exact(q, m, list(range(len(p.fields))))
