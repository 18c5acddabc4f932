"""Relational plans: what a SQL view computes, as a tree of frozen dataclasses.

Why plain values: a plan can be printed (``explain``), compared and hashed, so the lowering
to a dataflow (``ddflow.sql.lower``, one function per node type) builds each distinct
sub-plan once, and views that share a sub-plan (the same scan, the same join input keyed
the same way) share its operators and arrangements.

Every node has ``fields``: the relation it produces. Expressions (``ddflow.sql.expr``) in a
node refer to the fields of its input by position; a ``Join``'s refer to the left fields
followed by the right ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddflow.sql.expr import Col, Expr, show
from ddflow.sql.rows import Field
from ddflow.sql.types import BIGINT

__all__ = [
    "Agg",
    "Aggregate",
    "Distinct",
    "Filter",
    "InputItem",
    "Join",
    "Plan",
    "Project",
    "RecRef",
    "Recursive",
    "Scan",
    "SemiJoin",
    "SetOp",
    "SortKey",
    "TRY",
    "TopK",
    "UnionAll",
    "Values",
    "WinFunc",
    "input_items",
    "item_field",
    "scan_items",
    "Window",
    "explain",
    "grouped_by_join_key",
]


class Plan:
    """A relation-valued plan node."""

    fields: tuple[Field, ...]

    def inputs(self) -> tuple[Plan, ...]:
        return ()

    def names(self) -> list[str]:
        return [f.name for f in self.fields]


@dataclass(frozen=True)
class Scan(Plan):
    """The rows of a table; ``columns`` (table column positions, None: all) are the fields
    this scan reads, so a view carries only the columns it uses. ``prefilter`` (over the
    table's columns by position) keeps only rows it holds TRUE for, decided on the rows as
    they come (strings unencoded), before they enter the dataflow."""

    table: str
    fields: tuple[Field, ...]
    columns: tuple[int, ...] | None = None
    prefilter: Expr | None = None
    #: string fields read only to be compared with literals, each as ``(field, literals)``:
    #: the field holds the string's class, ``i + 1`` where it is ``literals[i]`` and 0 for
    #: any other string (a ``BIGINT``; NULL stays NULL), found on the raw strings as rows
    #: come, so the column needs no dictionary codes
    classes: tuple[tuple[int, tuple[str, ...]], ...] = ()


#: What a table's dataflow input carries for a scan's field: a table column (its position)
#: or a string column's class among literals (``(position, literals)``: ``Scan.classes``).
InputItem = int | tuple[int, tuple[str, ...]]


def scan_items(scan: Scan) -> tuple[InputItem, ...]:
    """What ``scan`` reads of its table's input, field by field."""
    cols = scan.columns if scan.columns is not None else tuple(range(len(scan.fields)))
    items: list[InputItem] = list(cols)
    for i, lits in scan.classes:
        items[i] = (cols[i], lits)
    return tuple(items)


def input_items(plans: list[Plan]) -> dict[tuple[str, Any], tuple[InputItem, ...]]:
    """The dataflow's inputs: for each table and prefilter some scan reads it with, what
    those scans read of it (table columns by position, then string classes), in one order
    for every caller."""
    used: dict[tuple[str, Any], set[InputItem]] = {}
    stack = list(plans)
    while stack:
        p = stack.pop()
        if isinstance(p, Scan):
            used.setdefault((p.table, p.prefilter), set()).update(scan_items(p))
        stack.extend(p.inputs())
    return {
        key: tuple(sorted(items, key=_item_order))
        for key, items in sorted(used.items(), key=lambda kv: (kv[0][0], repr(kv[0][1])))
    }


def _item_order(item: InputItem) -> tuple[int, int, tuple[str, ...]]:
    return (0, item, ()) if isinstance(item, int) else (1, item[0], item[1])


def item_field(table_fields: tuple[Field, ...], item: InputItem) -> Field:
    """The field an input item holds: the table's column, or its class (``BIGINT``)."""
    if isinstance(item, int):
        return table_fields[item]
    f = table_fields[item[0]]
    return Field(f.name, BIGINT, f.nullable, f.source)


@dataclass(frozen=True)
class Values(Plan):
    """Constant rows (Python values), e.g. a SELECT without FROM."""

    rows: tuple[tuple[Any, ...], ...]
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Filter(Plan):
    """Rows of ``input`` whose ``predicate`` is TRUE."""

    input: Plan
    predicate: Expr

    @property
    def fields(self) -> tuple[Field, ...]:  # type: ignore[override]
        return self.input.fields

    def inputs(self) -> tuple[Plan, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Project(Plan):
    """One output row per input row: ``exprs`` over the input's fields."""

    input: Plan
    exprs: tuple[Expr, ...]
    fields: tuple[Field, ...]

    def inputs(self) -> tuple[Plan, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Join(Plan):
    """``kind`` in inner, left, right, full: pairs whose keys are equal (NULL keys never
    match) and whose ``residual`` (over left + right fields) is TRUE; outer kinds add the
    unmatched rows of their side(s) padded with NULLs. No keys: every pair (a cross join
    when there is no residual either)."""

    left: Plan
    right: Plan
    kind: str
    left_keys: tuple[Expr, ...]
    right_keys: tuple[Expr, ...]
    residual: Expr | None
    fields: tuple[Field, ...]
    #: keys match NULL to NULL (joining a subquery's result back on the distinct outer
    #: values it was computed for)
    null_safe: bool = False

    def inputs(self) -> tuple[Plan, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class SemiJoin(Plan):
    """Rows of ``left`` with (``anti``: without) a row of ``right`` whose keys equal theirs.
    ``null_safe`` keys match NULL to NULL (correlation on whole values); otherwise a NULL key
    never matches (so an anti join keeps the row)."""

    left: Plan
    right: Plan
    left_keys: tuple[Expr, ...]
    right_keys: tuple[Expr, ...]
    anti: bool
    null_safe: bool = False

    @property
    def fields(self) -> tuple[Field, ...]:  # type: ignore[override]
        return self.left.fields

    def inputs(self) -> tuple[Plan, ...]:
        return (self.left, self.right)


#: the aggregates of a spread (DOUBLE results, computed from exact sums of the values and
#: of their squares)
SPREAD_FUNCS = ("var_samp", "var_pop", "stddev_samp", "stddev_pop")

#: the aggregates of the joint spread of two DOUBLE columns ``(y, x)`` over the rows where
#: both are non-NULL (``arg`` a ``row`` of the two), from exact sums of each, of their
#: squares and of their products
PAIR_FUNCS = (
    "corr",
    "covar_pop",
    "covar_samp",
    "regr_slope",
    "regr_intercept",
    "regr_r2",
    "regr_sxx",
    "regr_syy",
    "regr_sxy",
)

#: the shape of a DOUBLE column's values, from exact sums of their first four powers
MOMENT_FUNCS = ("skewness", "kurtosis")

#: the aggregates computed by a reduce over each group's values: exact percentiles (DOUBLE),
#: the value of a row with the greatest / least ordering value (``arg`` a ``row`` of the
#: ordering value and the value), the most frequent value, the bitwise AND / OR / XOR, the
#: values' texts joined (``arg`` a ``row`` of the text and the keys it is ordered by)
REDUCED_FUNCS = (
    "percentile",
    "percentile_disc",
    "percentile_approx",
    "max_by",
    "min_by",
    "mode",
    "bit_and",
    "bit_or",
    "bit_xor",
    "listagg",
)


#: the ``param`` of a ``sum`` / ``avg`` written ``try_sum`` / ``try_avg``: NULL where the
#: value does not fit its type (where the plain form raises an overflow error)
TRY = "try"


@dataclass(frozen=True)
class Agg:
    """An aggregate call: ``func`` in count, count_star, sum, avg, min, max, one of
    ``SPREAD_FUNCS``, ``PAIR_FUNCS``, ``MOMENT_FUNCS`` or ``REDUCED_FUNCS``; ``arg`` over the
    input's fields; ``param`` the constants of the call (a percentile's ``(fraction,
    discrete, descending)``, ``(TRY,)`` for ``try_sum`` / ``try_avg``, ``(True,)`` for a
    ``mode`` whose ties go to the greatest value)."""

    func: str
    arg: Expr | None
    distinct: bool = False
    param: tuple[Any, ...] = ()

    @property
    def name(self) -> str:
        """The function as SQL spells it (``try_sum`` for a ``sum`` with ``TRY``)."""
        return f"try_{self.func}" if self.param == (TRY,) else self.func


@dataclass(frozen=True)
class Aggregate(Plan):
    """Groups of ``input`` by ``keys`` (NULLs group together), one row each: the key values
    then the aggregates. ``scalar``: no GROUP BY, so exactly one row even on empty input."""

    input: Plan
    keys: tuple[Expr, ...]
    aggs: tuple[Agg, ...]
    scalar: bool
    fields: tuple[Field, ...]

    def inputs(self) -> tuple[Plan, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Distinct(Plan):
    """Each distinct row of ``input`` once."""

    input: Plan

    @property
    def fields(self) -> tuple[Field, ...]:  # type: ignore[override]
        return self.input.fields

    def inputs(self) -> tuple[Plan, ...]:
        return (self.input,)


@dataclass(frozen=True)
class UnionAll(Plan):
    """All rows of all inputs (multiplicities add)."""

    parts: tuple[Plan, ...]
    fields: tuple[Field, ...]

    def inputs(self) -> tuple[Plan, ...]:
        return self.parts


@dataclass(frozen=True)
class SetOp(Plan):
    """``kind`` intersect or except, with ``all`` (multiset) or without (set)."""

    kind: str
    all: bool
    left: Plan
    right: Plan
    fields: tuple[Field, ...]

    def inputs(self) -> tuple[Plan, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class SortKey:
    """Order by field ``index``: descending or not, NULLs first or last."""

    index: int
    desc: bool
    nulls_first: bool


@dataclass(frozen=True)
class TopK(Plan):
    """The first ``limit`` rows after ``offset`` in the order of ``keys`` (ties broken by
    the whole row, so the set is determined)."""

    input: Plan
    keys: tuple[SortKey, ...]
    limit: int | None
    offset: int

    @property
    def fields(self) -> tuple[Field, ...]:  # type: ignore[override]
        return self.input.fields

    def inputs(self) -> tuple[Plan, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Months:
    """A RANGE frame offset of ``n`` calendar months of a DATE or TIMESTAMP order value
    (negative: preceding). Not a fixed difference of its physical value: each row's
    frame edge is its value plus ``n`` months, a day past the month's end its last day."""

    n: int

    def __neg__(self) -> Months:
        return Months(-self.n)

    def __str__(self) -> str:
        return f"INTERVAL {abs(self.n)} MONTHS"


@dataclass(frozen=True)
class WinFunc:
    """A window function: ``func`` (``row_number``, ``rank``, ``dense_rank``,
    ``percent_rank``, ``cume_dist``, ``ntile``, ``lag``, ``lead``, ``first_value``,
    ``last_value``, ``nth_value``, or an aggregate: ``count_star``, ``count``, ``sum``,
    ``avg``, ``min``, ``max``) of the input fields ``args`` (the value, then a default for
    ``lag`` / ``lead``); ``param``: the offset of ``lag`` / ``lead``, the ``n`` of ``ntile``
    and ``nth_value``; ``ignore_nulls``: those five skip NULL values. ``frame`` is
    ``(kind, start, end)``: ``kind`` ``rows`` or ``range``, ``start`` / ``end`` None
    (unbounded) or an offset from the current row, negative for preceding: a number of
    rows, or for ``range`` a difference of the one ORDER BY value in its physical units
    (0: the current row's peers) or a number of calendar months (``Months``)."""

    func: str
    args: tuple[int, ...] = ()
    param: int = 0
    frame: tuple[str, Any, Any] = ("range", None, None)
    ignore_nulls: bool = False


@dataclass(frozen=True)
class Window(Plan):
    """``input``'s rows, each with the window functions ``funcs`` appended: computed over
    the rows of its partition (equal ``partition`` fields, NULLs together) in the order
    of ``order`` (ties broken by the whole row, so results are determined)."""

    input: Plan
    partition: tuple[int, ...]
    order: tuple[SortKey, ...]
    funcs: tuple[WinFunc, ...]
    fields: tuple[Field, ...]

    def inputs(self) -> tuple[Plan, ...]:
        return (self.input,)


@dataclass(frozen=True)
class RecRef(Plan):
    """The recursive relation ``name`` inside its own definition."""

    name: str
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Recursive(Plan):
    """``WITH RECURSIVE name AS (base UNION [ALL] step)``: the least fixed point of
    ``R = base + step(R)`` (with ``distinct``, of ``R = distinct(base + step(R))``)."""

    name: str
    base: Plan
    step: Plan
    distinct: bool
    fields: tuple[Field, ...]
    limit: int = field(default=100, compare=True)

    def inputs(self) -> tuple[Plan, ...]:
        return (self.base, self.step)


def _param_text(a: Agg) -> str:
    """An aggregate's constants as ``explain`` shows them after its argument."""
    if not a.param:
        return ""
    if a.func.startswith("percentile"):
        fraction, _, desc = a.param
        return f", {fraction}" + (", DESC" if desc else "")
    if a.func == "listagg":
        sep, descs, _ = a.param
        return f", {sep!r}" + "".join(", DESC" if d else ", ASC" for d in descs)
    if a.func == "mode":
        return ", DESC"  # (ties go to the greatest value)
    if a.param == (TRY,):
        return ""  # (in the name)
    return "".join(f", {x!r}" for x in a.param)


def grouped_by_join_key(plan: Aggregate) -> tuple[int, list[Expr]] | None:
    """For an aggregate grouped by exactly the join keys of one side of the equi-join
    under it, with only linear aggregates each reading one side: ``(that side, the other
    side's key expressions in group-key order)``; else None."""
    j = plan.input
    if (
        not isinstance(j, Join)
        or plan.scalar
        or not plan.keys
        or j.residual is not None
        or not j.left_keys
        or j.kind == "full"
    ):
        return None
    if any(a.distinct or a.func not in ("count", "count_star", "sum", "avg") for a in plan.aggs):
        return None
    nl = len(j.left.fields)
    for side in (0,) if j.kind == "left" else (1,) if j.kind == "right" else (0, 1):
        mine, theirs = (j.left_keys, j.right_keys) if side == 0 else (j.right_keys, j.left_keys)
        off = 0 if side == 0 else nl
        if not all(isinstance(k, Col) for k in mine):
            continue
        cols = [k.index + off for k in mine]  # type: ignore[attr-defined]
        if len(set(cols)) != len(cols):
            continue
        if not all(isinstance(g, Col) for g in plan.keys) or sorted(
            g.index  # type: ignore[attr-defined]
            for g in plan.keys
        ) != sorted(cols):
            continue
        if any(a.type != b.type for a, b in zip(mine, theirs, strict=True)):
            continue
        other = [theirs[cols.index(g.index)] for g in plan.keys]  # type: ignore[attr-defined]
        if all(
            a.arg is None
            or all(i < nl for i in _reads(a.arg))
            or all(i >= nl for i in _reads(a.arg))
            for a in plan.aggs
        ):
            return side, other
    return None


def _reads(e: Expr) -> set[int]:
    out: set[int] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Col):
            out.add(x.index)
        stack.extend(x.children())
    return out


#: the window functions that read a frame (the others read the partition's order)
FRAMED_FUNCS = frozenset(
    ("count_star", "count", "sum", "avg", "min", "max", "first_value", "last_value", "nth_value")
)


def _frame_text(frame: tuple[str, Any, Any]) -> str:
    kind, lo, hi = frame

    def end(x: Any, unbounded: str) -> str:
        if x is None:
            return f"UNBOUNDED {unbounded}"
        if isinstance(x, Months):
            return f"{x} {'PRECEDING' if x.n < 0 else 'FOLLOWING'}"
        if x == 0:
            return "CURRENT ROW"
        return f"{abs(x)} {'PRECEDING' if x < 0 else 'FOLLOWING'}"

    return f"{kind.upper()} BETWEEN {end(lo, 'PRECEDING')} AND {end(hi, 'FOLLOWING')}"


def _describe(p: Plan) -> str:
    names = [f.name for f in p.inputs()[0].fields] if p.inputs() else []
    if isinstance(p, Scan):
        pre = ""
        if p.prefilter is not None:
            pre = f" where {show(p.prefilter)}"
        names = [f.name for f in p.fields]
        for i, lits in p.classes:
            names[i] = f"class of {names[i]} in ({', '.join(map(repr, lits))})"
        return f"Scan {p.table} [{', '.join(names)}]{pre}"
    if isinstance(p, Values):
        return f"Values {len(p.rows)} row(s) [{', '.join(f.name for f in p.fields)}]"
    if isinstance(p, Filter):
        return f"Filter {show(p.predicate, names)}"
    if isinstance(p, Project):
        cols = ", ".join(
            f"{show(e, names)} AS {f.name}" if show(e, names) != f.name else f.name
            for e, f in zip(p.exprs, p.fields, strict=True)
        )
        return f"Project {cols}"
    if isinstance(p, Join):
        ln = [f.name for f in p.left.fields]
        rn = [f.name for f in p.right.fields]
        keys = ", ".join(
            f"{show(a, ln)} = {show(b, rn)}" for a, b in zip(p.left_keys, p.right_keys, strict=True)
        )
        res = f" residual {show(p.residual, ln + rn)}" if p.residual is not None else ""
        what = "cross" if not p.left_keys and p.residual is None else p.kind
        ns = " null-safe" if p.null_safe else ""
        return f"Join {what}{ns} on [{keys}]{res}"
    if isinstance(p, SemiJoin):
        ln = [f.name for f in p.left.fields]
        rn = [f.name for f in p.right.fields]
        keys = ", ".join(
            f"{show(a, ln)} = {show(b, rn)}" for a, b in zip(p.left_keys, p.right_keys, strict=True)
        )
        kind = "AntiJoin" if p.anti else "SemiJoin"
        return f"{kind}{' null-safe' if p.null_safe else ''} on [{keys}]"
    if isinstance(p, Aggregate):
        keys = ", ".join(show(k, names) for k in p.keys)
        aggs = ", ".join(
            f"{a.name}({'DISTINCT ' if a.distinct else ''}"
            f"{show(a.arg, names) if a.arg is not None else '*'}{_param_text(a)})"
            for a in p.aggs
        )
        kind = "scalar " if p.scalar else ""
        how = " per join key, without the join" if grouped_by_join_key(p) else ""
        return f"Aggregate {kind}keys [{keys}] aggs [{aggs}]{how}"
    if isinstance(p, Distinct):
        return "Distinct"
    if isinstance(p, UnionAll):
        return "UnionAll"
    if isinstance(p, SetOp):
        return f"{p.kind.capitalize()}{' all' if p.all else ''}"
    if isinstance(p, TopK):
        keys = ", ".join(
            f"{names[k.index]}{' DESC' if k.desc else ''}"
            f"{' NULLS FIRST' if k.nulls_first else ' NULLS LAST'}"
            for k in p.keys
        )
        return f"TopK limit {p.limit} offset {p.offset} by [{keys}]"
    if isinstance(p, Window):
        part = ", ".join(names[i] for i in p.partition)
        order = ", ".join(
            f"{names[k.index]}{' DESC' if k.desc else ''}"
            f"{' NULLS FIRST' if k.nulls_first else ' NULLS LAST'}"
            for k in p.order
        )
        funcs = ", ".join(
            f"{f.func}({', '.join(names[i] for i in f.args)}"
            f"{', ' + str(f.param) if f.param else ''})"
            f"{' IGNORE NULLS' if f.ignore_nulls else ''} AS {p.fields[len(names) + j].name}"
            + (f" {_frame_text(f.frame)}" if f.func in FRAMED_FUNCS else "")
            for j, f in enumerate(p.funcs)
        )
        return f"Window partition [{part}] order [{order}] [{funcs}]"
    if isinstance(p, RecRef):
        return f"RecRef {p.name}"
    if isinstance(p, Recursive):
        return f"Recursive {p.name} ({'UNION' if p.distinct else 'UNION ALL'})"
    return type(p).__name__


def explain(p: Plan, indent: int = 0) -> str:
    """The plan as an indented tree, one node per line."""
    lines = ["  " * indent + _describe(p)]
    for c in p.inputs():
        lines.append(explain(c, indent + 1))
    return "\n".join(lines)
