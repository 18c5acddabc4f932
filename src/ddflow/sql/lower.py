"""Lowering: a plan becomes dataflow operators, one function per node type.

Every relation is a collection of records ``(values..., null masks...)``
(``ddflow.sql.rows``); every expression runs vectorized over a batch (``ddflow.sql.expr``).
How each node runs:

- ``Filter`` / ``Project``: ``filter`` / ``map`` over columns.
- ``Join``: both sides keyed by their key columns (rows with a NULL key dropped, unless the
  join is null-safe) and arranged; ``join_map`` pairs them. Outer joins add the unmatched
  rows, padded with NULLs: those of a side minus those that matched (a ``semijoin`` on the
  key, or on the whole row when the join has a residual condition).
- ``SemiJoin``: ``semijoin`` against the distinct keys of the right side (anti: minus it).
- ``Aggregate``: ``count``, ``sum`` and ``avg`` move into the diff (a tuple of row count,
  non-NULL counts and sums) with ``explode`` and are added up by the total-order count;
  ``min``/``max`` use ``min_total``/``max_total``; ``DISTINCT`` aggregates count distinct
  ``(group, value)`` pairs first. A scalar aggregate adds one constant row whose diff marks
  the group present, so it never disappears. Each extra part joins the linear part on the
  group key, and is padded with NULL where a group has no value.
- ``Distinct`` uses the total-order distinct, ``TopK`` the vectorized ``top_k`` over all
  rows under one key on one worker (with totally ordered times it reads only the least
  values of each trace batch), first per hash bucket across several workers;
  ``Recursive`` the ``iterate`` loop.

Inside a loop (``WITH RECURSIVE``) times are partially ordered, so the lattice forms
(``count``, ``distinct``, ``min``, ``max``) replace the total-order ones.

Equal sub-plans are lowered once (plans are values), and an input keyed the same way is
arranged once, so views share operators and arrangements.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ddflow.core.errors import DataError
from ddflow.engine.exchange import hash_columns
from ddflow.sql.expr import Call, Col, Ctx, Expr, Lit, evaluate, predicate_mask
from ddflow.sql.plan import (
    Agg,
    Aggregate,
    Distinct,
    Filter,
    InputItem,
    Join,
    Plan,
    Project,
    RecRef,
    Recursive,
    Scan,
    SemiJoin,
    SetOp,
    SortKey,
    TopK,
    UnionAll,
    Values,
    Window,
    item_field,
    scan_items,
)
from ddflow.sql.rows import Field, Frame, mask_words, pack, select_columns
from ddflow.sql.types import BOOLEAN, encode_values, float_from_keys

__all__ = ["Env", "Lowering", "sort_columns"]


@dataclass
class Env:
    """Where a plan is lowered: the dataflow scope (the root, or a loop), the recursive
    relations bound there, and whether times are totally ordered."""

    scope: Any
    rec: dict[str, Any] = field(default_factory=dict)
    total: bool = True


def _width(fields: tuple[Field, ...]) -> int:
    return len(fields)


def _phys(v: np.ndarray) -> np.ndarray:
    if v.dtype == bool:
        return v.astype(np.int64)
    return v


@functools.total_ordering
class DescStr:
    """A string that sorts in reverse (descending string keys of a top-k)."""

    __slots__ = ("s",)

    def __init__(self, s: str) -> None:
        self.s = s

    def __lt__(self, other: DescStr) -> bool:
        return self.s > other.s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DescStr) and self.s == other.s

    def __hash__(self) -> int:
        return hash(("DescStr", self.s))

    def __reduce__(self) -> tuple[Any, ...]:
        return (DescStr, (self.s,))


def sort_columns(
    fr: Frame, fields: tuple[Field, ...], keys: tuple[SortKey, ...], ctx: Ctx
) -> list[np.ndarray]:
    """Columns whose lexicographic order is the ORDER BY order of the rows of ``fr``."""
    out: list[np.ndarray] = []
    for k in keys:
        f = fields[k.index]
        v = fr.val(k.index)
        nl = fr.null(k.index)
        if f.nullable:
            if nl is None:
                rank = np.full(fr.n, 1 if k.nulls_first else 0, dtype=np.int64)
            else:
                rank = np.where(nl, 0 if k.nulls_first else 1, 1 if k.nulls_first else 0).astype(
                    np.int64
                )
            out.append(rank)
        if f.type.kind == "string":
            strs = ctx.strings.decode(v)
            if nl is not None:
                strs = strs.copy()
                strs[nl] = ""
            if k.desc:
                col = np.empty(fr.n, dtype=object)
                col[:] = [DescStr(s) for s in strs.tolist()]
                out.append(col)
            else:
                out.append(strs)
            continue
        out.append(_complement(v) if k.desc else v)
    return out


def _complement(v: np.ndarray) -> np.ndarray:
    """``-v - 1`` (``~v`` on int64; Python ints beyond it alike): reverses the order, and
    is its own inverse, so a descending sort column gives its values back."""
    return ~v if v.dtype != object else np.array([-x - 1 for x in v.tolist()], dtype=object)


class Lowering:
    """Builds the operators of plans on one worker, sharing equal sub-plans."""

    def __init__(
        self,
        worker: Any,
        tables: dict[Any, tuple[Any, tuple[InputItem, ...], tuple[Field, ...]]],
        ctx: Ctx,
    ) -> None:
        self.worker = worker
        #: (table, string prefilter) -> (input collection, the table columns its records
        #: hold, the table's fields)
        self.tables = tables
        self.ctx = ctx
        self.memo: dict[tuple[Any, ...], Any] = {}
        self.constants: list[tuple[Any, tuple[np.ndarray, ...]]] = []

    # -- entry -----------------------------------------------------------------------------
    def lower(self, plan: Plan, env: Env) -> Any:
        key = ("rel", plan, id(env.scope), tuple(sorted(env.rec)))
        got = self.memo.get(key)
        if got is None:
            got = _lower(plan, self, env)
            self.memo[key] = got
        return got

    # -- helpers ---------------------------------------------------------------------------
    def project(
        self,
        coll: Any,
        in_fields: tuple[Field, ...],
        exprs: tuple[Expr, ...],
        out_fields: tuple[Field, ...],
        name: str = "project",
    ) -> Any:
        ctx = self.ctx
        win = _width(in_fields)
        words = mask_words(out_fields)
        if (
            all(isinstance(e, Col) for e in exprs)
            and words == mask_words(in_fields)
            and [getattr(e, "index", -1) for e in exprs] == list(range(win))
            and len(exprs) == win
        ):
            return coll

        def f(view: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
            fr = Frame(view, win)
            vals, nulls = [], []
            for e in exprs:
                v, nl = evaluate(e, fr, ctx)
                vals.append(_phys(v))
                nulls.append(nl)
            return pack(vals, nulls, words, fr.n)

        return coll.map(f, vectorized=True, name=name)

    def filter(self, coll: Any, in_fields: tuple[Field, ...], pred: Expr) -> Any:
        ctx = self.ctx
        win = _width(in_fields)

        def p(view: tuple[np.ndarray, ...]) -> np.ndarray:
            return predicate_mask(pred, Frame(view, win), ctx)

        return coll.filter(p, vectorized=True, name="where")

    def keyed(
        self,
        coll: Any,
        fields: tuple[Field, ...],
        keys: tuple[Expr, ...],
        null_safe: bool,
        row: bool = True,
        drop: tuple[int, ...] = (),
        stages: list[tuple[Any, ...]] | None = None,
    ) -> Any:
        """``(key, row)`` records (rows with a NULL key dropped unless ``null_safe``);
        ``row=False`` gives ``(key, ())``-like ``(key, 0)`` records; the row's values at
        positions ``drop`` (which equal key columns) are left out of it. ``stages``
        (``chain``'s filters and projections) are applied first, in the same operator:
        ``fields`` are then their output's."""
        ctx = self.ctx
        win = _width(fields)
        kw = len(keys)
        nullable = null_safe and any(k.nullable for k in keys)
        dropped = set(drop)

        def f(view: tuple[np.ndarray, ...]) -> tuple[np.ndarray | None, Any]:
            if stages:
                taken, cols, n = run_stages(view, stages, ctx)
                view = tuple(cols)
                fr = Frame(view, win, n)
                if taken is not None:
                    rows, out = keyed_rows(fr, view)
                    return (taken if rows is None else taken[rows]), out
            else:
                fr = Frame(view, win)
            return keyed_rows(fr, view)

        def keyed_rows(fr: Frame, view: tuple[np.ndarray, ...]) -> tuple[np.ndarray | None, Any]:
            kv = []
            gone = None
            kn = []
            for k in keys:
                v, nl = evaluate(k, fr, ctx)
                kv.append(_phys(v))
                kn.append(nl)
                if nl is not None and not null_safe:
                    gone = nl if gone is None else (gone | nl)
            kcols = pack(kv, kn, (kw + 61) // 62, fr.n) if nullable else tuple(kv)
            if not row:
                rest: Any = (np.zeros(fr.n, np.int64),)
            elif dropped:
                rest = tuple(c for i, c in enumerate(view) if i not in dropped)
            else:
                rest = view
            if gone is None:
                return None, (kcols, tuple(rest))  # (every row: no times or diffs taken)
            rows = np.flatnonzero(~gone)
            return rows, (tuple(c[rows] for c in kcols), tuple(c[rows] for c in rest))

        return coll.flat_map(f, vectorized=True, name="key")

    def arranged(
        self, plan: Plan, env: Env, keys: tuple[Expr, ...], null_safe: bool
    ) -> tuple[Any, Any]:
        """``plan``'s rows arranged by ``keys``, and ``rows(key, value)`` that gives a
        batch's full records of ``plan`` back from the arrangement's keys and values.

        Key columns that are plain fields are not stored again in the values (narrower
        rows sort and merge faster), and a table scan is arranged as the table's input
        (all the columns its scans read), so scans of one table that read different
        columns share one arrangement per key."""
        key = ("arr", plan, keys, null_safe, id(env.scope), tuple(sorted(env.rec)))
        got = self.memo.get(key)
        if got is None:
            got = self._arrange(plan, env, keys, null_safe)
            self.memo[key] = got
        return got

    def _arrange(
        self, plan: Plan, env: Env, keys: tuple[Expr, ...], null_safe: bool
    ) -> tuple[Any, Any]:
        if isinstance(plan, Scan) and keys and all(isinstance(k, Col) for k in keys):
            in_fields, idxs = _scan_positions(plan, self)
            ikeys = tuple(
                Col(
                    idxs[k.index],  # type: ignore[attr-defined]
                    in_fields[idxs[k.index]].type,  # type: ignore[attr-defined]
                    in_fields[idxs[k.index]].nullable,  # type: ignore[attr-defined]
                    in_fields[idxs[k.index]].name,  # type: ignore[attr-defined]
                )
                for k in keys
            )
            shared = (
                "arr-in",
                plan.table,
                plan.prefilter,
                ikeys,
                null_safe,
                id(env.scope),
                tuple(sorted(env.rec)),
            )
            base = self.memo.get(shared)
            if base is None:
                entered, _ = _scan_input(plan, self, env)
                base = self._keyed_arrangement(entered, in_fields, ikeys, null_safe)
                self.memo[shared] = base
            arr, full = base
            if idxs == list(range(len(in_fields))):
                return arr, full

            def rows(k: Any, v: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
                return select_columns(full(k, v), in_fields, idxs)

            return arr, rows
        if (
            isinstance(plan, (Filter, Project))
            and ("rel", plan, id(env.scope), tuple(sorted(env.rec))) not in self.memo
        ):
            # filters and projections below the arrangement run in its keying operator
            base, stages = chain(plan, self, env)
            if stages:
                return self._keyed_arrangement(base, plan.fields, keys, null_safe, stages)
        return self._keyed_arrangement(self.lower(plan, env), plan.fields, keys, null_safe)

    def _keyed_arrangement(
        self,
        coll: Any,
        fields: tuple[Field, ...],
        keys: tuple[Expr, ...],
        null_safe: bool,
        stages: list[tuple[Any, ...]] | None = None,
    ) -> tuple[Any, Any]:
        nullable = null_safe and any(k.nullable for k in keys)
        src: dict[int, int] = {}  # row position -> the key column holding its value
        if not nullable:
            for j, k in enumerate(keys):
                if isinstance(k, Col) and k.index not in src:
                    src[k.index] = j
        drop = tuple(sorted(src))
        # (how often each side of a join changes is not known when the plan is made: the
        # trace picks its merging from how it is written and read)
        keyed = self.keyed(coll, fields, keys, null_safe, drop=drop, stages=stages)
        arr = keyed.arrange_by_key(fanin="auto")
        if not drop:
            return arr, lambda k, v: v
        width = len(fields) + mask_words(fields)
        plan_ix: list[tuple[bool, int]] = []
        m = 0
        for i in range(width):
            if i in src:
                plan_ix.append((True, src[i]))
            else:
                plan_ix.append((False, m))
                m += 1

        def rows(k: Any, v: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
            return tuple(k[j] if from_key else v[j] for from_key, j in plan_ix)

        return arr, rows

    def key_set(self, plan: Plan, env: Env, keys: tuple[Expr, ...], null_safe: bool) -> Any:
        """The distinct keys of ``plan`` (NULL keys dropped unless null-safe), arranged."""
        key = ("keyset", plan, keys, null_safe, id(env.scope), tuple(sorted(env.rec)))
        got = self.memo.get(key)
        if got is None:
            coll = self.lower(plan, env)
            k = self.keyed(coll, plan.fields, keys, null_safe, row=False)
            only = k.map(lambda kv: kv[0], vectorized=True, name="keys")
            if not _distinct_keys(plan, keys):
                only = only.distinct_total() if env.total else only.distinct()
            got = only.arrange_by_self(fanin="auto")
            self.memo[key] = got
        return got

    def constant(self, rows: tuple[tuple[Any, ...], ...], fields: tuple[Field, ...]) -> Any:
        """A collection holding ``rows`` from the first time on."""
        session, coll = self.worker.new_collection()
        cols = []
        nulls = []
        for i, f in enumerate(fields):
            v, nl = encode_values([r[i] for r in rows], f.type, f.name, self.ctx.strings)
            cols.append(v)
            nulls.append(nl)
        data = pack(cols, nulls, mask_words(fields), len(rows))
        self.constants.append((session, data))
        return coll

    def feed_constants(self) -> None:
        """Feeds the constant rows (on one worker only, when there are several) and closes
        their inputs."""
        first = getattr(self.worker, "index", 0) == 0
        for session, data in self.constants:
            if first and len(data) and len(data[0]):
                session.insert_columns(tuple(data))
            session.close()
        self.constants = []


def _distinct_keys(plan: Plan, keys: tuple[Expr, ...]) -> bool:
    """Whether ``keys`` (columns of ``plan``) take distinct values on distinct rows already
    (they hold a set of columns no two rows agree on; dropping NULL keys keeps that)."""
    from ddflow.sql.rewrite import unique_sets

    cols = {k.index for k in keys if isinstance(k, Col)}
    return any(u <= cols for u in unique_sets(plan))


def concat_masks(
    lview: tuple[np.ndarray, ...],
    lf: tuple[Field, ...],
    rview: tuple[np.ndarray, ...],
    rf: tuple[Field, ...],
    out: tuple[Field, ...],
    n: int,
) -> tuple[np.ndarray, ...]:
    """The record of a left row followed by a right row (masks merged)."""
    nl, nr = len(lf), len(rf)
    lvals, rvals = lview[:nl], rview[:nr]
    words = mask_words(out)
    if words == 0:
        return tuple(lvals) + tuple(rvals)
    lm, rm = lview[nl:], rview[nr:]
    if words == 1:
        m = lm[0] if lm else np.zeros(n, np.int64)
        if rm:
            m = m | (rm[0] << nl)
        return tuple(lvals) + tuple(rvals) + (m,)
    lfr, rfr = Frame(lview, nl, n), Frame(rview, nr, n)
    nulls = [lfr.null(i) for i in range(nl)] + [rfr.null(i) for i in range(nr)]
    return pack(list(lvals) + list(rvals), nulls, words, n)


def null_rows(fields: tuple[Field, ...], n: int) -> tuple[np.ndarray, ...]:
    """``n`` rows of NULLs for ``fields`` (all nullable)."""
    vals = [np.zeros(n, np.int64) for _ in fields]
    nulls = [np.ones(n, bool) for _ in fields]
    return pack(vals, nulls, mask_words(fields), n)


@functools.singledispatch
def _lower(plan: Plan, lw: Lowering, env: Env) -> Any:
    raise DataError(f"no lowering for {type(plan).__name__}")


@_lower.register
def _(plan: Scan, lw: Lowering, env: Env) -> Any:
    return _lower_chain(plan, lw, env)


def _scan_input(plan: Scan, lw: Lowering, env: Env) -> tuple[Any, list[tuple[Any, ...]]]:
    """The table's input collection (entered into ``env``'s scope) and the stage that
    picks this scan's columns from the input's."""
    coll = lw.tables[(plan.table, plan.prefilter)][0]
    key = ("scan", plan.table, plan.prefilter, id(env.scope))
    entered = lw.memo.get(key)
    if entered is None:
        entered = coll if env.scope is coll.scope else coll.enter(env.scope)
        lw.memo[key] = entered
    in_fields, idxs = _scan_positions(plan, lw)
    if idxs == list(range(len(in_fields))):
        return entered, []
    exprs = tuple(Col(i, in_fields[i].type, in_fields[i].nullable) for i in idxs)
    return entered, [("project", in_fields, exprs, plan.fields)]


def _scan_positions(plan: Scan, lw: Lowering) -> tuple[tuple[Field, ...], list[int]]:
    """The fields of the input ``plan`` reads (its table's, with the prefilter) and the
    position in them of each of the scan's fields."""
    _coll, items, table_fields = lw.tables[(plan.table, plan.prefilter)]
    pos = {item: i for i, item in enumerate(items)}
    return tuple(item_field(table_fields, it) for it in items), [pos[it] for it in scan_items(plan)]


class _Taken:
    """Columns ``cols`` restricted to rows ``idx``, each taken on first read (a filter's
    later stages read only the columns they use)."""

    __slots__ = ("_cache", "cols", "idx")

    def __init__(self, cols: Any, idx: np.ndarray) -> None:
        self.cols = cols
        self.idx = idx
        self._cache: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.cols)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self.cols)))]
        got = self._cache.get(i)
        if got is None:
            got = self.cols[i][self.idx]
            self._cache[i] = got
        return got

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self.cols)))


def chain(plan: Plan, lw: Lowering, env: Env) -> tuple[Any, list[tuple[Any, ...]]]:
    """The collection under a run of Filter / Project nodes (and a scan's column choice)
    and those stages, bottom first, for an operator to apply itself."""
    stages: list[tuple[Any, ...]] = []
    node = plan
    while isinstance(node, (Filter, Project)):
        if isinstance(node, Filter):
            stages.append(("filter", node.input.fields, node.predicate))
        else:
            stages.append(("project", node.input.fields, node.exprs, node.fields))
        node = node.input
        hit = lw.memo.get(("rel", node, id(env.scope), tuple(sorted(env.rec))))
        if hit is not None:
            break
    stages.reverse()
    stages = _merge_filters(stages)
    if (
        isinstance(node, Scan)
        and ("rel", node, id(env.scope), tuple(sorted(env.rec))) not in lw.memo
    ):
        base, pick = _scan_input(node, lw, env)
        stages = pick + stages
    else:
        base = lw.lower(node, env)
    return base, stages


_CHEAP = frozenset(
    ("eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "is_null", "is_not_null", "in")
)


def _cheap(e: Expr) -> bool:
    """Whether ``e`` is a comparison (or a combination of them) of columns and constants
    that cannot fail and costs one numpy pass over non-string values: evaluating it on
    every row of a batch costs less than taking the rows an earlier filter kept."""
    if isinstance(e, (Col, Lit)):
        return True
    if not isinstance(e, Call) or e.op not in _CHEAP:
        return False
    if e.op in ("lt", "le", "gt", "ge") and any(a.type.kind == "string" for a in e.args):
        return False  # string order is looked up per distinct string
    return all(_cheap(a) for a in e.args)


def _merge_filters(stages: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Consecutive filters of cheap conditions as one filter of their AND (one mask, one
    set of kept rows, instead of a take after each)."""
    out: list[tuple[Any, ...]] = []
    for st in stages:
        if (
            st[0] == "filter"
            and out
            and out[-1][0] == "filter"
            and _cheap(st[2])
            and _cheap(out[-1][2])
        ):
            prev = out[-1][2]
            both = Call("and", (prev, st[2]), BOOLEAN, prev.nullable or st[2].nullable)
            out[-1] = ("filter", out[-1][1], both)
        else:
            out.append(st)
    return out


def run_stages(
    view: Any, stages: list[tuple[Any, ...]], ctx: Ctx
) -> tuple[np.ndarray | None, Any, int]:
    """Applies filter / project stages to a batch: the input rows kept (None: all), the
    resulting columns (taken lazily after a filter) and their number of rows."""
    cols: Any = view
    n = len(cols[0]) if len(cols) else 0
    rows: np.ndarray | None = None
    for st in stages:
        if st[0] == "filter":
            _, fin, pred = st
            mask = predicate_mask(pred, Frame(cols, len(fin), n), ctx)
            if not mask.all():
                idx = np.flatnonzero(mask)
                # the kept rows of a column are taken when something reads it
                cols = _Taken(cols, idx)
                rows = idx if rows is None else rows[idx]
                n = len(idx)
        else:
            _, fin, exprs, fout = st
            fr = Frame(cols, len(fin), n)
            vals, nulls = [], []
            for e in exprs:
                v, nl = evaluate(e, fr, ctx)
                vals.append(_phys(v))
                nulls.append(nl)
            cols = pack(vals, nulls, mask_words(fout), n)
    return rows, cols, n


def _lower_chain(plan: Plan, lw: Lowering, env: Env) -> Any:
    """A run of Filter / Project nodes (over a scan's column choice) as one operator."""
    base, stages = chain(plan, lw, env)
    if not stages:
        return base
    ctx = lw.ctx
    has_filter = any(st[0] == "filter" for st in stages)
    if len(stages) == 1 and not has_filter:
        _, fin, exprs, fout = stages[0]
        return lw.project(base, fin, exprs, fout)
    if len(stages) == 1:
        _, fin, pred = stages[0]
        return lw.filter(base, fin, pred)

    def run(view: tuple[np.ndarray, ...]) -> Any:
        rows, cols, _ = run_stages(view, stages, ctx)
        cols = tuple(cols)
        if not has_filter:
            return cols
        return rows, cols  # (None: every row, no times or diffs taken)

    if has_filter:
        return base.flat_map(run, vectorized=True, name="select")
    return base.map(run, vectorized=True, name="select")


@_lower.register
def _(plan: Values, lw: Lowering, env: Env) -> Any:
    coll = lw.constant(plan.rows, plan.fields)
    if env.scope is not coll.scope:
        coll = coll.enter(env.scope)
    return coll


@_lower.register
def _(plan: RecRef, lw: Lowering, env: Env) -> Any:
    return env.rec[plan.name]


@_lower.register
def _(plan: Filter, lw: Lowering, env: Env) -> Any:
    return _lower_chain(plan, lw, env)


@_lower.register
def _(plan: Project, lw: Lowering, env: Env) -> Any:
    return _lower_chain(plan, lw, env)


@_lower.register
def _(plan: Join, lw: Lowering, env: Env) -> Any:
    lf, rf, out = plan.left.fields, plan.right.fields, plan.fields
    lkeys, rkeys = plan.left_keys, plan.right_keys
    if not lkeys:
        from ddflow.sql.expr import Lit
        from ddflow.sql.types import INT

        lkeys = rkeys = (Lit(0, INT),)
    la, lrows = lw.arranged(plan.left, env, lkeys, plan.null_safe)
    ra, rrows = lw.arranged(plan.right, env, rkeys, plan.null_safe)

    def pair(
        k: Any, a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]
    ) -> tuple[np.ndarray, ...]:
        a, b = lrows(k, a), rrows(k, b)
        n = len(a[0]) if a else len(b[0])
        return concat_masks(a, lf, b, rf, out, n)

    matched = la.join_map(ra, pair, vectorized=True, name="join")
    if plan.residual is not None:
        matched = lw.filter(matched, out, plan.residual)
    if plan.kind == "inner":
        return matched
    parts = [matched]
    if plan.kind in ("left", "full"):
        parts.append(_unmatched(plan, lw, env, side="left"))
    if plan.kind in ("right", "full"):
        parts.append(_unmatched(plan, lw, env, side="right"))
    return parts[0].concat(*parts[1:], name=f"{plan.kind}_join")


def _unmatched(plan: Join, lw: Lowering, env: Env, side: str) -> Any:
    """The rows of one side of an outer join with no match, padded with NULLs."""
    lf, _rf, out = plan.left.fields, plan.right.fields, plan.fields
    nl = len(lf)
    if side == "left":
        this, this_keys, other, other_keys = plan.left, plan.left_keys, plan.right, plan.right_keys
    else:
        this, this_keys, other, other_keys = plan.right, plan.right_keys, plan.left, plan.left_keys
    coll = lw.lower(this, env)
    tf = this.fields
    if plan.residual is None and this_keys:
        # rows whose key has a match on the other side
        keys = lw.key_set(other, env, other_keys, plan.null_safe)
        arranged, rows = lw.arranged(this, env, this_keys, plan.null_safe)  # the join's own
        hit = arranged.semijoin(keys, name="matched").map(
            lambda kv: rows(kv[0], kv[1]), vectorized=True, name="row"
        )
    else:
        # with a residual, "matched" is per row: the distinct rows that appear in a pair
        pairs = lw.lower(
            Join(
                plan.left,
                plan.right,
                "inner",
                plan.left_keys,
                plan.right_keys,
                plan.residual,
                plan.fields,
                plan.null_safe,
            ),
            env,
        )
        w_out = len(out)
        this_words = mask_words(tf)
        lo = 0 if side == "left" else nl
        width = len(tf)

        def own(view: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
            n = len(view[0])
            fr = Frame(view, w_out, n)
            vals = [fr.val(lo + i) for i in range(width)]
            nulls = [fr.null(lo + i) for i in range(width)]
            return pack(vals, nulls, this_words, n)

        mine = pairs.map(own, vectorized=True, name="matched_row")
        distinct = mine.distinct_total() if env.total else mine.distinct()
        as_key = coll.map(
            lambda r: (r, np.zeros(len(r[0]), np.int64)), vectorized=True, name="row_key"
        )
        hit = as_key.semijoin(distinct, name="matched").map(
            lambda kv: kv[0], vectorized=True, name="row"
        )
    missing = coll.concat(hit.negate(), name="unmatched")
    other_out = out[nl:] if side == "left" else out[:nl]

    def padded(view: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        n = len(view[0])
        nulls = null_rows(other_out, n)
        if side == "left":
            return concat_masks(view, tf, nulls, other_out, out, n)
        return concat_masks(nulls, other_out, view, tf, out, n)

    return missing.map(padded, vectorized=True, name="pad")


@_lower.register
def _(plan: SemiJoin, lw: Lowering, env: Env) -> Any:
    keys = lw.key_set(plan.right, env, plan.right_keys, plan.null_safe)
    # the left side arranged by its keys is the arrangement a join on them keeps too
    arranged, rows = lw.arranged(plan.left, env, plan.left_keys, plan.null_safe)
    hit = arranged.semijoin(keys, name="semijoin").map(
        lambda kv: rows(kv[0], kv[1]), vectorized=True, name="row"
    )
    if not plan.anti:
        return hit
    return lw.lower(plan.left, env).concat(hit.negate(), name="antijoin")


@_lower.register
def _(plan: Distinct, lw: Lowering, env: Env) -> Any:
    coll = lw.lower(plan.input, env)
    return coll.distinct_total() if env.total else coll.distinct()


@_lower.register
def _(plan: UnionAll, lw: Lowering, env: Env) -> Any:
    parts = [lw.lower(p, env) for p in plan.parts]
    return parts[0].concat(*parts[1:], name="union_all")


@_lower.register
def _(plan: SetOp, lw: Lowering, env: Env) -> Any:
    left = lw.lower(plan.left, env)
    right = lw.lower(plan.right, env)
    if not plan.all:
        ld = left.distinct_total() if env.total else left.distinct()
        rd = right.distinct_total() if env.total else right.distinct()
        as_key = ld.map(
            lambda r: (r, np.zeros(len(r[0]), np.int64)), vectorized=True, name="row_key"
        )
        hit = as_key.semijoin(rd, name=plan.kind).map(lambda kv: kv[0], vectorized=True, name="row")
        if plan.kind == "intersect":
            return hit
        return ld.concat(hit.negate(), name="except")
    # multiset: count each row on both sides, keep min(l, r) or max(l - r, 0) copies
    tag_l = left.explode(
        lambda r: (r, (np.ones(len(r[0]), np.int64), np.zeros(len(r[0]), np.int64))),
        vectorized=True,
        diff=(0, 0),
        name="count_left",
    )
    tag_r = right.explode(
        lambda r: (r, (np.zeros(len(r[0]), np.int64), np.ones(len(r[0]), np.int64))),
        vectorized=True,
        diff=(0, 0),
        name="count_right",
    )
    both = tag_l.concat(tag_r)
    counts = both.count_total() if env.total else both.count()
    kind = plan.kind

    def emit(rc: Any) -> Any:
        row, (cl, cr) = rc
        k = np.minimum(cl, cr) if kind == "intersect" else np.maximum(cl - cr, 0)
        return row, k, k != 0

    return counts.explode(emit, vectorized=True, name=f"{kind}_all")


@_lower.register
def _(plan: TopK, lw: Lowering, env: Env) -> Any:
    coll = lw.lower(plan.input, env)
    fields = plan.fields
    win = len(fields)
    ctx = lw.ctx
    keys = plan.keys
    total = None if plan.limit is None else plan.limit + plan.offset
    # On one worker every row is ranked under one key: with totally ordered times the
    # top-k reads only the least rows of each batch of that key's trace, however many rows
    # there are. Across workers the rows are first ranked in buckets spread over them (so
    # no worker holds them all), then the buckets' survivors under one key. A row of an
    # aggregate's groups is bucketed by its group keys alone: a group's old and new row
    # (its aggregates changed) fall in one bucket.
    buckets = 16 * lw.worker.peers if lw.worker.peers > 1 else 0
    stable = _group_key_fields(plan.input)

    # a field ordered by its own values (not strings, ordered by their text) is carried
    # once, in its sort column: the rows the top-k sorts and keeps are narrower
    from_sort: dict[int, tuple[int, bool]] = {}  # field -> (sort column, descending)
    at = 0
    for k in keys:
        f = fields[k.index]
        at += 1 if f.nullable else 0
        if f.type.kind != "string" and k.index not in from_sort:
            from_sort[k.index] = (at, k.desc)
        at += 1
    carried = [i for i in range(win + mask_words(fields)) if i not in from_sort]

    def ranked(view: tuple[np.ndarray, ...]) -> Any:
        fr = Frame(view, win)
        sc = sort_columns(fr, fields, keys, ctx)
        if buckets:
            by = tuple(view[i] for i in stable) if stable else view
            bucket = (hash_columns(by, fr.n) % np.uint64(buckets)).astype(np.int64)
        else:
            bucket = np.zeros(fr.n, np.int64)
        return bucket, (tuple(sc), tuple(view[i] for i in carried))

    def unrank(br: Any) -> tuple[np.ndarray, ...]:
        sc, rest = br[1]
        if not from_sort:
            return tuple(rest)
        out = []
        it = iter(rest)
        for i in range(win + mask_words(fields)):
            got = from_sort.get(i)
            if got is None:
                out.append(next(it))
                continue
            c = sc[got[0]]
            out.append(_complement(c) if got[1] else c)  # (descending: complemented)
        return tuple(out)

    def top(c: Any, k: int) -> Any:
        if not buckets:
            return c.top_k(k, name="top_k")
        first = c.top_k(k, name="top_k_bucket")
        again = first.map(
            lambda br: (np.zeros(len(br[0]), np.int64), br[1]), vectorized=True, name="top_k_all"
        )
        return again.top_k(k, name="top_k")

    # (one arrangement for the kept rows and, with an OFFSET, the skipped ones)
    keyed = coll.map(ranked, vectorized=True, name="order_keys").arrange_by_key()

    def rows_of(c: Any) -> Any:
        return c.map(unrank, vectorized=True, name="row")

    if total is not None and total == 0:
        return coll.filter(lambda r: np.zeros(len(r[0]), bool), vectorized=True, name="none")
    kept = coll if total is None else rows_of(top(keyed, total))
    if plan.offset:
        skipped = rows_of(top(keyed, plan.offset))
        return kept.concat(skipped.negate(), name="offset")
    return kept


def _group_key_fields(p: Plan) -> list[int]:
    """The fields of ``p`` that are group keys of an aggregate right under it (through a
    projection of columns), or [] when there are none."""
    from ddflow.sql.plan import Aggregate, Project

    if isinstance(p, Aggregate):
        return list(range(len(p.keys)))
    if isinstance(p, Project) and isinstance(p.input, Aggregate):
        nk = len(p.input.keys)
        return [i for i, e in enumerate(p.exprs) if isinstance(e, Col) and e.index < nk]
    return []


@_lower.register
def _(plan: Recursive, lw: Lowering, env: Env) -> Any:
    base = lw.lower(plan.base, env)

    def body(x: Any) -> Any:
        inner = Env(x.scope, {**env.rec, plan.name: x}, total=False)
        step = lw.lower(plan.step, inner)
        entered = base.enter(x.scope)
        out = entered.concat(step, name="recursive_union")
        return out.distinct() if plan.distinct else out

    return base.iterate(body, limit=plan.limit, name=f"recursive_{plan.name}")


# -- aggregation ---------------------------------------------------------------------------


def _linear(a: Agg) -> bool:
    return not a.distinct and a.func in ("count", "count_star", "sum", "avg")


@_lower.register
def _(plan: Aggregate, lw: Lowering, env: Env) -> Any:
    from ddflow.sql.aggregate import lower_aggregate

    return lower_aggregate(plan, lw, env)


@_lower.register
def _(plan: Window, lw: Lowering, env: Env) -> Any:
    from ddflow.sql.window import lower_window

    return lower_window(plan, lw, env)


def _float_sum(v: np.ndarray) -> np.ndarray:
    return float_from_keys(v)
