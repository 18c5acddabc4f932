"""From SQL text to a plan: parse and qualify with sqlglot, then bind names, types and
subqueries into ``ddflow.sql.plan`` nodes.

What sqlglot does: parsing in the dialect, and ``qualify`` (every column names its table,
``*`` expanded, ``USING`` turned into ``ON``, unnamed outputs named). What this module does
itself, because the semantics under NULLs must be exact:

- Name resolution with scopes; a column of an enclosing query is an outer reference.
- Types and implicit casts per dialect (Spark: ``/`` gives DOUBLE or DECIMAL, decimal
  precision and scale rules; SQLite: integer division, DECIMAL as REAL).
- Joins: inner and comma joins are reordered to follow equality conditions, and
  conditions on one table are applied before the join; outer joins keep their order.
- Subqueries are decorrelated into joins:

  * ``EXISTS`` / ``IN`` in a WHERE conjunct become semi joins, ``NOT EXISTS`` an anti join;
  * ``NOT IN`` keeps SQL's NULL rule (no row passes when the subquery holds a NULL, unless
    it is empty) using per-group counts;
  * scalar subqueries become a left join with the subquery grouped by its correlation
    keys; a group that is absent gives the aggregate of nothing (``count`` 0, else NULL);
  * anywhere else (``OR``, ``CASE``, the SELECT list) a subquery predicate becomes a
    column computed by a left join ("mark join").

  Correlation through equalities ``inner = outer`` joins on those keys; other correlated
  conditions are evaluated against the distinct outer values they use (and joined back on
  those values, NULL matching NULL).
- Aggregation, HAVING, DISTINCT, ORDER BY / LIMIT (a maintained top-k), set operations and
  ``WITH [RECURSIVE]``.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import inspect
import math
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import OptimizeError, ParseError, SqlglotError
from sqlglot.optimizer import qualify_columns as _qualify_columns
from sqlglot.optimizer.qualify import qualify
from sqlglot.transforms import eliminate_qualify

from ddflow.sql.errors import SQLError, UnsupportedSQL
from ddflow.sql.expr import (
    _FLIP,
    _MICROS,
    Call,
    Col,
    Expr,
    Lit,
    conjuncts,
    date_pattern,
    format_value,
    java_format_specs,
    java_regex,
    java_replacement,
    sqlite_number,
)
from ddflow.sql.plan import (
    SPREAD_FUNCS,
    TRY,
    Agg,
    Aggregate,
    Distinct,
    Filter,
    Join,
    Months,
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
    WinFunc,
)
from ddflow.sql.rewrite import unique_sets
from ddflow.sql.rows import Field
from ddflow.sql.types import (
    BIGINT,
    BOOLEAN,
    DATE,
    DOUBLE,
    EXACT,
    FLOAT,
    INT,
    NULLTYPE,
    SMALLINT,
    STRING,
    TIMESTAMP,
    TINYINT,
    SqlType,
    decimal_type,
    parse_date_text,
    parse_timestamp_text,
)

#: a sqlglot syntax node (sqlglot's own annotations are looser than its classes)
Node = Any

__all__ = ["Planned", "Planner", "parse_statements", "sql_type"]

DIALECTS = {"spark": "spark", "sqlite": "sqlite"}


def _raw_date_format(args: list[Node]) -> Node:
    return exp.Anonymous(this="date_format", expressions=args)


def _raw_function(name: str) -> Any:
    return lambda args: exp.Anonymous(this=name, expressions=args)


def _value_function(cls: Any) -> Any:
    """Spark's ``first_value(x, ignoreNulls)`` / ``last_value(x, ignoreNulls)``: a TRUE
    second argument is ``IGNORE NULLS``, FALSE the default."""

    def build(args: list[Node]) -> Node:
        if len(args) == 2 and isinstance(args[1], exp.Boolean):
            ignore = bool(args[1].this)
            node = cls(this=args[0])
            del args[1:]  # (sqlglot then checks the arguments left against the node)
            return exp.IgnoreNulls(this=node) if ignore else node
        if len(args) != 1:
            raise SQLError(f"{cls.__name__} takes a value and an optional ignoreNulls flag")
        return cls(this=args[0])

    return build


class _SparkRead(Spark):
    """Spark SQL as sqlglot reads it, but with ``''`` in a string literal a quote, as Spark
    reads it (sqlglot took ``'O''Brien'`` for two literals side by side, ``'OBrien'``), and
    ``date_format``'s pattern kept as written (sqlglot turns it into strftime codes, and
    back, not always into the same pattern)."""

    class Tokenizer(Spark.Tokenizer):
        STRING_ESCAPES = [*Spark.Tokenizer.STRING_ESCAPES, "'"]

    class Parser(Spark.Parser):  # type: ignore[valid-type,misc]
        FUNCTIONS = {
            **Spark.Parser.FUNCTIONS,
            "DATE_FORMAT": _raw_date_format,
            # (kept as written: sqlglot would turn their Java patterns into strftime ones)
            "FROM_UNIXTIME": _raw_function("from_unixtime"),
            "UNIX_TIMESTAMP": _raw_function("unix_timestamp"),
            "TO_UNIX_TIMESTAMP": _raw_function("to_unix_timestamp"),
            "FIRST_VALUE": _value_function(exp.FirstValue),
            "LAST_VALUE": _value_function(exp.LastValue),
        }


_READ: dict[str, Any] = {"spark": _SparkRead, "sqlite": "sqlite"}


def _later_same_named(scope: Any, resolver: Any, using: dict[str, Any]) -> dict[str, list[str]]:
    """The visible columns of each source of ``scope`` when one of them that is not in a
    USING / NATURAL pair shares a name with a USING column (else empty)."""
    cols = {
        t: list(resolver.get_source_columns(t, only_visible=True)) for t in scope.selected_sources
    }
    clash = any(n in using and t not in using[n] for t, names in cols.items() for n in names)
    return cols if clash else {}


def _star_over_using(
    cols: dict[str, list[str]], using: dict[str, Any], first: list[str]
) -> list[Node]:
    """``*`` over joins with USING columns: each USING column once (the COALESCE of its
    tables), the ones in ``first`` ahead in that order, every other column of every table
    in place, including a later table's column that shares a USING column's name."""
    ahead: dict[str, Node | None] = dict.fromkeys(first)
    rest: list[Node] = []
    done: set[str] = set()
    for table, names in cols.items():
        for n in names:
            group = using.get(n, {})
            if table not in group:
                rest.append(exp.column(n, table=table))
                continue
            if n in done:
                continue
            done.add(n)
            item = exp.alias_(exp.func("coalesce", *(exp.column(n, table=g) for g in group)), n)
            if n in ahead and ahead[n] is None:
                ahead[n] = item
            else:
                rest.append(item)
    return [s for s in ahead.values() if s is not None] + rest


def _expand_stars_beside_using(
    scope: Any, resolver: Any, using: dict[str, Any], first: list[str], *rest: Any, **kw: Any
) -> None:
    """sqlglot's ``*`` expansion drops a column of a table joined by ON or CROSS JOIN after
    a USING / NATURAL join when it shares a USING column's name (``SELECT * FROM a JOIN b
    USING (k) JOIN c ON ...`` lost ``c.k``). A plain ``*`` in that case is expanded here,
    as Spark and SQLite expand it; everything else goes on to sqlglot."""
    sel = scope.expression
    if using and isinstance(sel, exp.Select):
        plain = [
            s
            for s in sel.selects
            if isinstance(s, exp.Star)
            and not any(s.args.get(a) for a in ("except", "except_", "replace", "rename", "ilike"))
        ]
        cols = _later_same_named(scope, resolver, using) if plain else {}
        if cols and all(names and "*" not in names for names in cols.values()):
            items: list[Node] = []
            for s in sel.selects:
                items.extend(_star_over_using(cols, using, first) if s in plain else [s])
            sel.set("expressions", items)
            scope.clear_cache()
    _sqlglot_expand_stars(scope, resolver, using, first, *rest, **kw)


_sqlglot_expand_stars = _qualify_columns._expand_stars
if list(inspect.signature(_sqlglot_expand_stars).parameters)[:4] == [
    "scope",
    "resolver",
    "using_column_tables",
    "using_columns",
]:
    _qualify_columns._expand_stars = _expand_stars_beside_using  # type: ignore[assignment]


def parse_statements(sql: str, dialect: str) -> list[Node]:
    """The statements of ``sql`` (``SQLError`` on a syntax error)."""
    try:
        stmts = sqlglot.parse(sql, read=_READ[dialect])
    except ParseError as e:
        raise SQLError(f"cannot parse SQL: {e}") from e
    out = [s.transform(_spelled_out_named) for s in stmts if s is not None]
    if dialect == "spark":
        out = [s.transform(_levenshtein_threshold) for s in out]
    return out


def _levenshtein_threshold(node: Node) -> Node:
    """Spark's ``levenshtein(a, b, threshold)``, which sqlglot reads as a cost of
    insertion (and writes back without it), as a plain call of three arguments."""
    if isinstance(node, exp.Levenshtein) and node.args.get("ins_cost") is not None:
        if any(node.args.get(k) is not None for k in ("del_cost", "sub_cost", "max_dist")):
            return node
        args = [node.this, node.expression, node.args["ins_cost"]]
        return exp.Anonymous(this="levenshtein", expressions=[a.copy() for a in args])
    return node


def _spelled_out_named(node: Node) -> Node:
    """``_spelled_out``, the new node remembering the one it replaces (Spark names a
    result column by the text as written: ``median(x)``, not its spelled-out form)."""
    new = _spelled_out(node)
    if new is not node:
        new.meta["written"] = node.copy()
    return new


#: an aggregate node's bases (sqlglot's node classes join ``Expression`` with a kind)
_AGG_BASES: tuple[type, ...] = (
    (exp.AggFunc,) if issubclass(exp.AggFunc, exp.Expression) else (exp.Expression, exp.AggFunc)
)


class _Percentile(*_AGG_BASES):  # type: ignore[misc]
    """An exact percentile of ``this`` at fraction ``quantile``: ``percentile(x, p)``,
    ``median(x)`` and ``percentile_cont`` / ``percentile_disc(p) WITHIN GROUP (ORDER BY
    x [DESC])`` spelled as one node (``discrete``, ``desc``: literal TRUE when given)."""

    arg_types = {
        "this": True,
        "quantile": True,
        "discrete": False,
        "desc": False,
        "approx": False,
        "accuracy": False,
    }


class _TrySum(*_AGG_BASES):  # type: ignore[misc]
    """``try_sum(x)``: ``sum(x)``, but NULL where the sum does not fit its type (where
    ``sum`` raises an overflow error)."""

    arg_types = {"this": True}


class _TryAvg(*_AGG_BASES):  # type: ignore[misc]
    """``try_avg(x)``: ``avg(x)``, but NULL where the average does not fit its type."""

    arg_types = {"this": True}


class _OrderedMode(*_AGG_BASES):  # type: ignore[misc]
    """``mode() WITHIN GROUP (ORDER BY x [DESC])``: the most frequent value of ``this``,
    of those tied the least (``desc``: literal TRUE when given, the greatest)."""

    arg_types = {"this": True, "desc": False}


def _try_spelled(node: Node) -> Node | None:
    """``try_sum(x)`` / ``try_avg(x)`` (one argument, maybe DISTINCT) as their own node,
    else None."""
    if not isinstance(node, exp.Anonymous) or len(node.expressions) != 1:
        return None
    kind = {"try_sum": _TrySum, "try_avg": _TryAvg}.get(node.name.lower())
    return None if kind is None else kind(this=node.expressions[0])


def _mode_spelled(node: Node) -> Node | None:
    """``mode() WITHIN GROUP (ORDER BY x [DESC])`` as an ``_OrderedMode``, else None.
    Its NULLS FIRST / LAST changes nothing (NULLs are not counted)."""
    if not isinstance(node, exp.WithinGroup) or not isinstance(node.this, exp.Mode):
        return None
    order = node.expression
    items = list(order.expressions) if isinstance(order, exp.Order) else []
    if node.this.this is not None or len(items) != 1:
        raise SQLError(
            "mode() WITHIN GROUP takes no argument and one ORDER BY expression, "
            f"got {node.sql(dialect='spark')}"
        )
    item = items[0]
    desc = isinstance(item, exp.Ordered) and bool(item.args.get("desc"))
    value = item.this if isinstance(item, exp.Ordered) else item
    return _OrderedMode(this=value, desc=exp.true() if desc else None)


def _percentile_spelled(node: Node) -> Node | None:
    """``node`` as a ``_Percentile`` when it is one of the percentile forms, else None."""
    if isinstance(node, exp.Median):
        return _Percentile(this=node.this, quantile=exp.Literal.number("0.5"))
    if isinstance(node, exp.ApproxQuantile):
        # an exact answer is within any accuracy asked for
        return _Percentile(
            this=node.this,
            quantile=node.args.get("quantile"),
            discrete=exp.true(),
            approx=exp.true(),
            accuracy=node.args.get("accuracy"),
        )
    if isinstance(node, exp.Quantile):
        return _Percentile(this=node.this, quantile=node.args.get("quantile"))
    if not isinstance(node, exp.WithinGroup) or not isinstance(
        node.this, (exp.PercentileCont, exp.PercentileDisc)
    ):
        return None
    order = node.expression
    items = list(order.expressions) if isinstance(order, exp.Order) else []
    if len(items) != 1:
        raise UnsupportedSQL("a percentile WITHIN GROUP of more than one ORDER BY expression")
    item = items[0]
    desc = isinstance(item, exp.Ordered) and bool(item.args.get("desc"))
    value = item.this if isinstance(item, exp.Ordered) else item
    return _Percentile(
        this=value,
        quantile=node.this.this,
        discrete=exp.true() if isinstance(node.this, exp.PercentileDisc) else None,
        desc=exp.true() if desc else None,
    )


def _as_boolean(node: Node) -> Node:
    """The argument of a BOOLEAN aggregate, cast as Spark casts it (text 'true' is TRUE)."""
    return exp.Cast(this=node, to=exp.DataType.build("BOOLEAN"))


def _spelled_out(node: Node) -> Node:
    """Aggregates that are other aggregates in other words: ``count_if(x)`` counts the
    rows where ``x`` is TRUE, ``bool_and(x)`` is ``min(x)`` and ``bool_or(x)`` is
    ``max(x)`` of a BOOLEAN (FALSE before TRUE; NULL over no values), as are ``every``
    and ``some`` / ``any``; ``std`` is ``stddev_samp``; ``nvl2(a, b, c)`` is a CASE on
    ``a IS NOT NULL``, ``pmod`` a CASE on the remainder's sign, ``try_divide`` a ``/``;
    ``first``, ``last`` and ``any_value`` are ``min`` (over a window, ``first`` and ``last``
    are ``first_value`` and ``last_value``); ``approx_count_distinct`` is the exact
    ``count(DISTINCT ...)``; the percentile forms are one ``_Percentile``, ``mode() WITHIN
    GROUP`` an ``_OrderedMode``, ``try_sum`` / ``try_avg`` a ``_TrySum`` / ``_TryAvg``."""
    if (
        isinstance(node, exp.Count)
        and node.expressions
        and node.this is not None
        and not isinstance(node.this, (exp.Distinct, exp.Star))
    ):
        # count(a, b, ...): the rows where none of them is NULL
        args = [node.this, *node.expressions]
        if any(isinstance(a, exp.Star) or a.find(exp.Star) for a in args):
            return node
        present = exp.and_(
            *[exp.Not(this=exp.Is(this=a.copy(), expression=exp.Null())) for a in args]
        )
        return exp.Count(this=exp.Case(ifs=[exp.If(this=present, true=exp.Literal.number(1))]))
    pct = _percentile_spelled(node) or _mode_spelled(node) or _try_spelled(node)
    if pct is not None:
        return pct
    if isinstance(node, (exp.RegrCount, exp.RegrAvgx, exp.RegrAvgy)) and node.expression:
        # over the rows where both arguments are non-NULL: a count, or the average of one
        y, x = node.this, node.expression
        both = exp.and_(
            exp.Not(this=exp.Is(this=y.copy(), expression=exp.Null())),
            exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null())),
        )
        if isinstance(node, exp.RegrCount):
            return exp.Count(this=exp.Case(ifs=[exp.If(this=both, true=exp.Literal.number(1))]))
        pick = x if isinstance(node, exp.RegrAvgx) else y
        return exp.Avg(this=exp.Case(ifs=[exp.If(this=both, true=pick.copy())]))
    if (
        isinstance(node, exp.Anonymous)
        and node.name.lower() in ("tinyint", "smallint", "bigint", "decimal")
        and len(node.expressions) == 1
    ):
        # Spark's casts spelled as functions (int(x), double(x) ... sqlglot reads itself)
        return exp.Cast(this=node.expressions[0], to=exp.DataType.build(node.name.upper()))
    if isinstance(node, exp.ApproxDistinct) and node.this is not None:
        # the exact count is within any error asked for
        return exp.Count(this=exp.Distinct(expressions=[node.this.copy()]))
    if isinstance(node, exp.Column) and not node.table and node.name.lower() == "grouping__id":
        return exp.GroupingId()  # (Spark's older name for grouping_id())
    over = node.this if isinstance(node, exp.IgnoreNulls) else node
    if isinstance(over, (exp.First, exp.Last)) and isinstance(node.parent, exp.Window):
        # over a window: the frame's first / last value (in the window's order)
        cls = exp.FirstValue if isinstance(over, exp.First) else exp.LastValue
        value = cls(this=over.this.copy())
        return exp.IgnoreNulls(this=value) if node is not over else value
    if isinstance(node, exp.IgnoreNulls) and isinstance(node.this, (exp.First, exp.Last)):
        node = node.this
    if isinstance(node, (exp.First, exp.Last, exp.AnyValue)) and node.this is not None:
        # some value of the group: Spark leaves which one open (it depends on the order
        # rows arrive in), so the least, the same whatever the order
        return exp.Min(this=node.this)
    if isinstance(node, exp.CountIf):
        one = exp.Case(ifs=[exp.If(this=node.this, true=exp.Literal.number(1))])
        return exp.Count(this=one)
    if isinstance(node, exp.LogicalAnd):
        return exp.Min(this=_as_boolean(node.this))
    if isinstance(node, exp.LogicalOr):
        return exp.Max(this=_as_boolean(node.this))
    if isinstance(node, exp.Anonymous) and len(node.expressions) == 1:
        name = node.name.lower()
        if name == "std":
            return exp.StddevSamp(this=node.expressions[0])
        if name == "every":
            return exp.Min(this=_as_boolean(node.expressions[0]))
        if name in ("some", "any"):
            return exp.Max(this=_as_boolean(node.expressions[0]))
    if isinstance(node, exp.Nvl2):
        test = exp.Not(this=exp.Is(this=node.this.copy(), expression=exp.Null()))
        other = node.args.get("false")
        return exp.Case(
            ifs=[exp.If(this=test, true=node.args["true"].copy())],
            default=other.copy() if other is not None else exp.Null(),
        )
    if (
        isinstance(node, exp.Anonymous)
        and node.name.lower() == "pmod"
        and len(node.expressions) == 2
    ):
        # the remainder's sign made that of the divisor where it is negative (Spark's pmod)
        a, b = node.expressions
        rem = exp.Paren(this=exp.Mod(this=a.copy(), expression=b.copy()))
        back = exp.Mod(
            this=exp.Paren(this=exp.Add(this=rem.copy(), expression=b.copy())),
            expression=b.copy(),
        )
        return exp.Case(
            ifs=[exp.If(this=exp.LT(this=rem.copy(), expression=exp.Literal.number(0)), true=back)],
            default=rem,
        )
    if (
        isinstance(node, exp.Any)
        and not isinstance(node.this, (exp.Subquery, exp.Query))
        and not isinstance(
            node.parent, (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Like, exp.ILike)
        )
    ):
        return exp.Max(this=_as_boolean(node.this))  # the aggregate any(b): bool_or
    if (
        isinstance(node, exp.Anonymous)
        and node.name.lower() == "regexp"
        and len(node.expressions) == 2
    ):
        return exp.RegexpLike(this=node.expressions[0], expression=node.expressions[1])
    if isinstance(node, exp.SafeDivide):  # try_divide: ``/`` already gives NULL for x / 0
        return exp.Div(this=node.this, expression=node.expression)
    return _null_helpers(node)


def _null_helpers(node: Node) -> Node:
    """Spark's NULL helpers in the words of SQL's own: ``equal_null(a, b)`` is ``a <=> b``,
    ``nullifzero(x)`` is ``nullif(x, 0)``, ``zeroifnull(x)`` is ``coalesce(x, 0)`` (so
    their types are those of NULLIF and COALESCE, as in Spark), ``decode(x, s1, r1, ...,
    default)`` a CASE of ``x <=> s1`` ... (NULL finds NULL), ``btrim(s[, chars])`` is
    ``trim(BOTH chars FROM s)``."""
    if isinstance(node, exp.EqualNull):
        return exp.NullSafeEQ(this=node.this, expression=node.expression)
    if isinstance(node, exp.DecodeCase) and len(node.expressions) >= 3:
        subject, *pairs = node.expressions
        default = pairs.pop() if len(pairs) % 2 else exp.Null()
        ifs = [
            exp.If(
                this=exp.NullSafeEQ(this=subject.copy(), expression=pairs[i]),
                true=pairs[i + 1],
            )
            for i in range(0, len(pairs), 2)
        ]
        return exp.Case(ifs=ifs, default=default)
    if not isinstance(node, exp.Anonymous):
        return node
    name = node.name.lower()
    args = node.expressions
    if name == "nullifzero" and len(args) == 1:
        return exp.Nullif(this=args[0], expression=exp.Literal.number(0))
    if name == "zeroifnull" and len(args) == 1:
        return exp.Coalesce(this=args[0], expressions=[exp.Literal.number(0)])
    if name == "btrim" and len(args) in (1, 2):
        if len(args) == 1:
            return exp.Trim(this=args[0])
        return exp.Trim(this=args[0], expression=args[1], position="BOTH")
    return node


# -- types ---------------------------------------------------------------------------------


def sql_type(dt: exp.DataType, dialect: str = "spark") -> SqlType:
    """Our type for a sqlglot data type (``UnsupportedSQL`` for arrays, maps, structs...)."""
    T = exp.DataType.Type
    t = dt.this
    params = (
        [int(p.this.this) if isinstance(p.this, exp.Literal) else None for p in dt.expressions]
        if dt.expressions
        else []
    )
    if t == T.BOOLEAN:
        return BOOLEAN
    if t == T.TINYINT:
        return TINYINT
    if t == T.SMALLINT:
        return SMALLINT
    if t in (T.INT, T.MEDIUMINT):
        return INT if dialect == "spark" else BIGINT
    if t == T.BIGINT:
        return BIGINT
    if t in (T.DECIMAL, T.BIGDECIMAL):
        if dialect == "sqlite":
            return DOUBLE
        p = params[0] if params else 10
        s = params[1] if len(params) > 1 else 0
        return decimal_type(p or 10, s or 0)
    if t == T.FLOAT:
        return FLOAT if dialect == "spark" else DOUBLE
    if t == T.DOUBLE:
        return DOUBLE
    if t in (T.TEXT, T.VARCHAR, T.CHAR, T.NCHAR, T.NVARCHAR, T.NAME):
        return STRING
    if t == T.DATE:
        return DATE
    if t in (T.TIMESTAMP, T.TIMESTAMPTZ, T.TIMESTAMPLTZ, T.TIMESTAMPNTZ, T.DATETIME):
        return TIMESTAMP
    if t == T.INTERVAL:
        raise UnsupportedSQL(
            "INTERVAL columns are not supported (use intervals in date arithmetic)"
        )
    if t in (T.UNKNOWN, T.NULL):
        return NULLTYPE
    if dialect == "sqlite" and t in (T.USERDEFINED,):
        return DOUBLE
    raise UnsupportedSQL(f"column type {dt.sql()} is not supported")


def _int_literal_type(v: int, dialect: str) -> SqlType:
    if dialect == "spark" and -(2**31) <= v < 2**31:
        return INT
    if -(2**63) <= v < 2**63:
        return BIGINT
    return decimal_type(min(38, max(1, len(str(abs(v))))), 0)


def adjust_decimal(p: int, s: int) -> SqlType:
    """Spark's precision loss rule for results wider than 38 digits."""
    if p <= 38:
        return decimal_type(max(p, 1), s)
    int_digits = p - s
    min_scale = min(s, 6)
    s2 = max(38 - int_digits, min_scale)
    return decimal_type(38, s2)


def _as_decimal(t: SqlType) -> SqlType:
    if t.kind == "decimal":
        return t
    if t.kind == "boolean":
        return decimal_type(1, 0)
    return decimal_type({8: 3, 16: 5, 32: 10, 64: 20}[t.bits], 0)


def _attach(
    tree: Plan,
    right: Plan,
    lkeys: list[Expr],
    rkeys: list[Expr],
    lookup: bool,
    lookups: set[int],
    nestable: bool = True,
) -> Plan:
    """``tree`` inner-joined with ``right`` on ``lkeys`` (over ``tree``'s fields) equal to
    ``rkeys``; ``lookups`` holds (by id) the joins made so far whose right side was looked
    up by a key of its own. A ``lookup`` (each row finds at most one ``right`` row) whose
    keys read only the right side of such a join at the top of ``tree`` joins that side
    instead: ``(A join D1) join D2`` becomes ``A join (D1 join D2)``, the same rows and
    fields in the same order. A dimension reached through another (a customer's nation)
    is then joined to it once, and the rows of ``A``, a stream of facts, go through one
    join where they went through two."""
    if lookup and isinstance(tree, Join) and id(tree) in lookups and lkeys:
        nl = len(tree.left.fields)
        used = set().union(*(_uses(k) for k in lkeys))
        if min(used, default=-1) >= nl:
            shifted = [_shift(k, -nl) for k in lkeys]
            inner = _attach(tree.right, right, shifted, rkeys, True, lookups)
            out = Join(
                tree.left,
                inner,
                "inner",
                tree.left_keys,
                tree.right_keys,
                None,
                tree.left.fields + inner.fields,
            )
            lookups.discard(id(tree))  # (``tree`` is dropped: its id may be reused)
            lookups.add(id(out))
            return out
    fields = tree.fields + right.fields
    out = Join(tree, right, "inner", tuple(lkeys), tuple(rkeys), None, fields)
    if lookup and nestable:
        lookups.add(id(out))
    return out


def _semi_joins_as_exists(sel: Node) -> None:
    """``a LEFT SEMI JOIN b ON c`` keeps the rows of ``a`` for which ``EXISTS (SELECT 1 FROM
    b WHERE c)``; ``LEFT ANTI JOIN`` those for which ``NOT EXISTS``. Written so when the
    joins after it keep the left side's rows (inner, left, cross)."""
    joins = list(sel.args.get("joins") or [])
    kinds = [str(j.args.get("kind") or "").upper() for j in joins]
    if not any(k in ("SEMI", "ANTI") for k in kinds):
        return
    last = max(i for i, k in enumerate(kinds) if k in ("SEMI", "ANTI"))
    for j in joins[last + 1 :]:
        side = str(j.args.get("side") or "").upper()
        if side in ("RIGHT", "FULL") or str(j.args.get("kind") or "").upper() == "OUTER":
            return
    conds: list[Node] = []
    keep = []
    for j, k in zip(joins, kinds, strict=True):
        if k not in ("SEMI", "ANTI"):
            keep.append(j)
            continue
        on = j.args.get("on")
        using = [_name(u) for u in j.args.get("using") or []]
        if using:
            # the right side's USING columns renamed, so that each unqualified name in
            # the condition is the left side's (the query around the subquery)
            tag = f"_semi{len(conds)}"
            inner = exp.select(*(exp.alias_(exp.column(u), f"_u{i}") for i, u in enumerate(using)))
            right = exp.Subquery(
                this=inner.from_(j.this.copy()), alias=exp.TableAlias(this=exp.to_identifier(tag))
            )
            sub = exp.select("1").from_(right)
            eqs = [exp.column(u).eq(exp.column(f"_u{i}", table=tag)) for i, u in enumerate(using)]
            on = exp.and_(*eqs) if on is None else exp.and_(on.copy(), *eqs)
        else:
            sub = exp.select("1").from_(j.this.copy())
        if on is not None:
            sub = sub.where(on.copy())
        test: Node = exp.Exists(this=sub)
        conds.append(exp.Not(this=test) if k == "ANTI" else test)
    sel.set("joins", keep or None)
    where = sel.args.get("where")
    parts = ([where.this] if where is not None else []) + conds
    sel.set("where", exp.Where(this=exp.and_(*parts)))


def _tuple_in_as_exists(sel: Node) -> None:
    """``(a, b) IN (SELECT c, d ...)`` in WHERE, reached through AND / OR only (where FALSE
    and NULL alike leave the row out in the end, so either may stand for the other), is
    ``EXISTS`` of the subquery's rows equal to ``(a, b)``; ``(a, b) NOT IN`` is ``NOT
    EXISTS`` of its rows where ``a = c AND b = d`` is TRUE or NULL."""
    where = sel.args.get("where")
    if where is None:
        return

    def test(node: Node, negated: bool) -> Node | None:
        q = node.args.get("query") if isinstance(node, exp.In) else None
        if not isinstance(node.this, exp.Tuple) or q is None or node.args.get("negate"):
            return None
        items = node.this.expressions
        names = [f"_in{i}" for i in range(len(items))]
        body = (q.this if isinstance(q, exp.Subquery) else q).copy()
        if body.args.get("order") and not (body.args.get("limit") or body.args.get("offset")):
            body.set("order", None)  # (the order of the rows tested does not matter)
        derived = exp.Subquery(
            this=body,
            alias=exp.TableAlias(
                this=exp.to_identifier("_in"), columns=[exp.to_identifier(n) for n in names]
            ),
        )
        eqs = [
            exp.EQ(this=exp.column(n, table="_in"), expression=x.copy())
            for n, x in zip(names, items, strict=True)
        ]
        if negated:
            # NOT IN keeps a row when no subquery row's equality is TRUE or NULL
            cond = exp.Coalesce(this=exp.and_(*eqs), expressions=[exp.true()])
            return exp.Not(this=exp.Exists(this=exp.select("1").from_(derived).where(cond)))
        return exp.Exists(this=exp.select("1").from_(derived).where(exp.and_(*eqs)))

    def walk(node: Node) -> Node:
        inner = node
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, (exp.And, exp.Or)):
            cls = type(inner)
            return exp.Paren(this=cls(this=walk(inner.this), expression=walk(inner.expression)))
        negated = isinstance(inner, exp.Not)
        if negated:
            inner = inner.this
            while isinstance(inner, exp.Paren):
                inner = inner.this
        got = test(inner, negated)
        return node if got is None else got

    if not any(
        isinstance(n, exp.In) and isinstance(n.this, exp.Tuple) and n.args.get("query")
        for n in where.this.walk()
    ):
        return
    sel.set("where", exp.Where(this=walk(where.this)))


def _one_group_per_outer_row(sel: Node) -> bool:
    """Whether every GROUP BY key of subquery ``sel`` is fixed for each row of the query
    around it: a constant, a column of that query, or an expression of the subquery's
    columns that WHERE equates to such a value (so the subquery has at most one group)."""
    group = sel.args.get("group")
    if group is None or any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets")):
        return False
    own = _sources(sel)

    def fixed(e: Node) -> bool:
        cols = list(e.find_all(exp.Column))
        return not any(isinstance(n, exp.Query) for n in e.walk()) and all(
            c.table and c.table not in own for c in cols
        )

    pinned: list[Node] = []
    for c in _conjuncts(sel.args.get("where")):
        while isinstance(c, exp.Paren):
            c = c.this
        if isinstance(c, exp.EQ):
            for a, b in ((c.this, c.expression), (c.expression, c.this)):
                if (
                    fixed(b)
                    and not fixed(a)
                    and not any(isinstance(n, exp.Query) for n in a.walk())
                ):
                    pinned.append(a)  # (a column or an expression of the subquery's rows)
    return all(fixed(k) or any(k == p for p in pinned) for k in group.expressions)


def _is_subquery_expression(sel: Node) -> bool:
    """Whether ``sel`` is the query of a subquery used as a value (scalar, IN, EXISTS)."""
    up = sel.parent
    return (
        isinstance(up, exp.Subquery)
        and not isinstance(up.parent, (exp.From, exp.Join))
        or (isinstance(up, (exp.Exists, exp.In)))
    )


def _has_outer_join(sel: Node) -> bool:
    """Whether a join of ``sel`` is an outer, semi or anti join."""
    return any(
        str(j.args.get("side") or "").upper() in ("LEFT", "RIGHT", "FULL")
        or str(j.args.get("kind") or "").upper() in ("OUTER", "SEMI", "ANTI")
        for j in sel.args.get("joins") or []
    )


def _derived_tables(sel: Node) -> list[Node]:
    """The derived tables of ``sel``'s FROM when it has no outer join (a condition moved
    from one of them up into ``sel``'s WHERE then filters the same rows)."""
    if _has_outer_join(sel):
        return []
    return [x for x in _from_items(sel) if isinstance(x, exp.Subquery) and x.alias]


def _output_names(q: Node) -> list[str] | None:
    """The column names of query ``q`` (a set operation's are its first SELECT's), or None
    when one has no name or two share one."""
    left = q
    while isinstance(left, (exp.Union, exp.Intersect, exp.Except, exp.Subquery)):
        left = left.this if isinstance(left, exp.Subquery) else left.left
    if not isinstance(left, exp.Select):
        return None
    out = [e.alias_or_name for e in left.expressions]
    if any(not o or o == "*" for o in out) or len(set(out)) != len(out):
        return None
    return out


def _from_items(sel: Node) -> list[Node]:
    """The tables and derived tables ``sel`` reads: its FROM item, then each join's."""
    from_ = sel.args.get("from_") or sel.args.get("from")
    items = [from_.this] if from_ is not None else []
    return items + [j.this for j in sel.args.get("joins") or []]


def _sources(sel: Node) -> set[str]:
    return {x.alias_or_name for x in _from_items(sel)}


def _plain_branches(q: Node) -> list[Node] | None:
    """The SELECTs of ``q`` if it is one plain SELECT (no aggregates, DISTINCT, LIMIT,
    ORDER BY) or a UNION ALL of them; None otherwise."""
    if isinstance(q, exp.Union) and q.args.get("distinct") is False:
        a, b = _plain_branches(q.left), _plain_branches(q.right)
        return None if a is None or b is None else a + b
    if not isinstance(q, exp.Select):
        return None
    if any(
        q.args.get(k) for k in ("group", "having", "distinct", "limit", "offset", "order", "with_")
    ) or any(isinstance(n, (exp.AggFunc, exp.Window)) for x in q.expressions for n in x.walk()):
        return None
    return [q]


#: the most rows ``range(...)`` in FROM is written out as
#: microseconds in an interval's unit, weeks down to microseconds (a fixed length each)
_UNIT_MICROS = {"week": 7 * _MICROS["day"], **_MICROS}

#: conversions between times and numbers since the epoch: (argument kind, result type)
_EPOCH_FUNCS: dict[str, tuple[str, SqlType]] = {
    "str_to_unix": ("timestamp", BIGINT),
    "unix_timestamp": ("timestamp", BIGINT),
    "to_unix_timestamp": ("timestamp", BIGINT),
    "unix_seconds": ("timestamp", BIGINT),
    "unix_millis": ("timestamp", BIGINT),
    "unix_micros": ("timestamp", BIGINT),
    "unix_date": ("date", INT),
    "date_from_unix_date": ("int", DATE),
    "timestamp_seconds": ("int", TIMESTAMP),
    "timestamp_millis": ("int", TIMESTAMP),
    "timestamp_micros": ("int", TIMESTAMP),
    "unix_to_str": ("int", STRING),
    "from_unixtime": ("int", STRING),
}

#: text functions of a string and constants: (arguments, result type)
#: functions of DOUBLEs to a DOUBLE, and how many arguments each takes
_DOUBLE_FUNCS: dict[str, int] = {
    "degrees": 1,
    "radians": 1,
    "sinh": 1,
    "cosh": 1,
    "tanh": 1,
    "cot": 1,
    "sec": 1,
    "csc": 1,
    "rint": 1,
    "atan2": 2,
    "hypot": 2,
    "nanvl": 2,
}

#: the units of ``timestampadd`` and ``timestampdiff`` (DAYOFYEAR is DAY, and only adds)
_TIMESTAMPDIFF_UNITS = frozenset(
    ("YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND")
    + ("MICROSECOND",)
)
_TIMESTAMPADD_UNITS = _TIMESTAMPDIFF_UNITS | {"DAYOFYEAR"}

_DATE_PARTS_FUNCS = frozenset(("make_date", "timestamp_from_parts", "make_timestamp"))

#: the names ``_more_function`` plans (sqlglot's where it has a class: ``safe_add`` is
#: ``try_add``, ``bitwise_count`` is ``bit_count``)
_MORE_FUNCS = frozenset(
    (
        "months_between",
        "next_day",
        "dayname",
        "monthname",
        "bround",
        "positive",
        "negative",
        "factorial",
        "width_bucket",
        "shiftleft",
        "shiftright",
        "shiftrightunsigned",
        "bitwise_count",
        "bit_count",
        "safe_add",
        "safe_subtract",
        "safe_multiply",
        "chr",
        "hex",
        "space",
        "find_in_set",
        "elt",
        "conv",
        "printf",
        "format_string",
        "format_number",
        "levenshtein",
        "bin",
        "luhn_check",
    )
)

_TEXT_FUNCS: dict[str, tuple[int, SqlType]] = {
    "split_part": (3, STRING),
    "substring_index": (3, STRING),
    "translate": (3, STRING),
    "ascii": (1, INT),
    "octet_length": (1, INT),
    "bit_length": (1, INT),
    "md5": (1, STRING),
    "sha": (1, STRING),
    "sha1": (1, STRING),
    "sha2": (2, STRING),
    "crc32": (1, BIGINT),
}

_RANGE_ROWS = 100_000

#: the most passes that carry outer references into subqueries' derived tables (one level
#: of nesting each; a reference deeper down is then refused by the planner)
_MOST_PASSES = 16


def _ranges_as_values(tree: Node) -> None:
    """Spark's ``range(end)`` / ``range(start, end[, step])`` in FROM, a table of one BIGINT
    column ``id``, written out as VALUES (constant rows; at most ``_RANGE_ROWS`` of them)."""
    for t in list(tree.find_all(exp.Table)):
        f = t.this
        if not (isinstance(f, exp.Anonymous) and str(f.this).lower() == "range"):
            continue
        args = f.expressions
        nums: list[int] = []
        for a in args:
            neg = isinstance(a, exp.Neg)
            lit = a.this if neg else a
            if not (isinstance(lit, exp.Literal) and lit.is_int):
                raise UnsupportedSQL(f"range() of other than integer constants: {f.sql()}")
            nums.append(-int(lit.this) if neg else int(lit.this))
        if len(nums) == 1:
            nums = [0, nums[0], 1]
        elif len(nums) == 2:
            nums.append(1)
        if len(nums) != 3 or nums[2] == 0:
            raise UnsupportedSQL(f"range() with these arguments: {f.sql()}")
        ids = range(*nums)
        if len(ids) > _RANGE_ROWS:
            raise UnsupportedSQL(f"range() of more than {_RANGE_ROWS} rows")
        alias = t.args.get("alias")
        name = alias.name if alias is not None and alias.name else "range"
        cols = alias.columns if alias is not None and alias.columns else [exp.to_identifier("id")]
        rows = [
            exp.Tuple(
                expressions=[exp.Cast(this=exp.Literal.number(i), to=exp.DataType.build("BIGINT"))]
            )
            for i in ids
        ]
        if not rows:
            # no rows: a VALUES row filtered out, to keep the column and its type
            body = exp.select(
                exp.alias_(
                    exp.Cast(this=exp.Literal.number(0), to=exp.DataType.build("BIGINT")),
                    cols[0].name,
                )
            ).where(exp.false())
            t.replace(exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(name))))
            continue
        t.replace(
            exp.Values(
                expressions=rows,
                alias=exp.TableAlias(
                    this=exp.to_identifier(name), columns=[c.copy() for c in cols]
                ),
            )
        )


def _query_of(node: Node) -> Node:
    while isinstance(node, exp.Subquery):
        node = node.this
    return node


def _outside(node: Node, own: set[str]) -> bool:
    """Whether ``node`` (not looking into its subqueries) reads a column of a table that
    is not among ``own``: the query around."""
    return any(
        isinstance(c, exp.Column) and c.table and c.table not in own
        for c in _walk_no_subqueries(node)
    )


def _union_tests_split(tree: Node) -> None:
    """``x IN (a UNION b)`` is ``x IN (a) OR x IN (b)`` and ``EXISTS (a UNION b)`` is
    ``EXISTS (a) OR EXISTS (b)`` (with SQL's NULLs too: the IN over the union is TRUE when
    one side's is, else NULL when one side's is), so a correlated branch is decorrelated
    on its own. ``ALL`` or not makes no difference to either test."""
    for node in list(tree.find_all(exp.In, exp.Exists)):
        q = _query_of(node.args.get("query") if isinstance(node, exp.In) else node.this)
        if not isinstance(q, exp.Union) or q.args.get("order") or q.args.get("limit"):
            continue
        branches: list[Node] = []
        todo: list[Node] = [q]
        while todo:
            u = todo.pop(0)
            u = _query_of(u)
            if isinstance(u, exp.Union) and not u.args.get("order") and not u.args.get("limit"):
                todo[:0] = [u.left, u.right]
            else:
                branches.append(u)
        tests: list[Node]
        if isinstance(node, exp.In):
            tests = [
                exp.In(this=node.this.copy(), query=exp.Subquery(this=b.copy())) for b in branches
            ]
        else:
            tests = [exp.Exists(this=b.copy()) for b in branches]
        node.replace(exp.Paren(this=exp.or_(*tests)))


def _limit_value(node: Node) -> int | None:
    e = node.expression if isinstance(node, exp.Limit) else None
    return int(e.this) if isinstance(e, exp.Literal) and e.is_int else None


def _tested_subquery(q: Node, exists: bool, tag: str) -> Node:
    """Subquery ``q`` of EXISTS (``exists``) or IN, simplified as far as the test allows:
    its ORDER BY and DISTINCT dropped (they change neither test), for EXISTS a LIMIT of at
    least one row dropped and a LIMIT 0 made a FALSE condition; and when it is grouped
    and correlated only by equalities ``inner = outer`` in WHERE, those columns added to
    its groups and the test made over it as a derived table (``_lift_group_keys``)."""
    if not isinstance(q, exp.Select):
        return q
    limit, offset = q.args.get("limit"), q.args.get("offset")
    if exists and limit is not None and offset is None and _limit_value(limit) is not None:
        n = _limit_value(limit)
        q = q.copy()
        q.set("limit", None)
        q.set("order", None)
        if n == 0:
            q = q.where(exp.false())
    if q.args.get("order") and q.args.get("limit") is None and q.args.get("offset") is None:
        q = q.copy()
        q.set("order", None)
    d = q.args.get("distinct")
    if d is not None and not d.args.get("on"):
        q = q.copy()
        q.set("distinct", None)
    if q.args.get("group") is not None and not q.args.get("limit") and not q.args.get("offset"):
        lifted = _lift_group_keys(q, exists, tag)
        if lifted is not None:
            return lifted
    return q


def _lift_group_keys(q: Node, exists: bool, tag: str) -> Node | None:
    """A grouped subquery correlated by equalities ``inner = outer`` in its WHERE, as an
    uncorrelated derived table that also groups by (and returns) each ``inner``, and the
    test over it with ``inner = outer`` on its rows: for one row of the query around,
    the subquery's rows all have ``inner = outer``, so grouping by ``inner`` too splits no
    group. None when the outer query is read anywhere else (the SELECT list, GROUP BY,
    HAVING, another kind of condition)."""
    own = _sources(q)
    if not own or q.args.get("with_") or q.args.get("with"):
        return None
    where = q.args.get("where")
    keep: list[Node] = []
    keys: list[tuple[Node, Node]] = []
    for c in _conjuncts(where.this if where is not None else None):
        if not _outside(c, own):
            keep.append(c)
            continue
        node = c
        while isinstance(node, exp.Paren):
            node = node.this
        if not isinstance(node, exp.EQ) or any(isinstance(n, exp.Query) for n in node.walk()):
            return None
        a, b = node.this, node.expression
        a_out, b_out = _outside(a, own), _outside(b, own)
        a_in = any(isinstance(n, exp.Column) for n in a.walk()) and not a_out
        b_in = any(isinstance(n, exp.Column) for n in b.walk()) and not b_out
        if a_in and b_out and not _inner_cols(b, own):
            keys.append((a, b))
        elif b_in and a_out and not _inner_cols(a, own):
            keys.append((b, a))
        else:
            return None
    if not keys:
        return None
    group = q.args["group"]
    rest = [*q.expressions, *group.expressions]
    for k in ("having", "order", "qualify"):
        if q.args.get(k) is not None:
            rest.append(q.args[k])
    names = {x.alias_or_name for x in q.expressions}
    if any(_outside(n, own) for n in rest) or any(
        isinstance(c, exp.Column) and not c.table and c.name not in names
        for n in rest
        for c in _walk_no_subqueries(n)
    ):
        return None  # (a column left unqualified may be the outer query's)
    d = q.copy()
    d.set("where", exp.Where(this=exp.and_(*(c.copy() for c in keep))) if keep else None)
    items = list(d.expressions)
    if not exists:
        items.append(exp.alias_(_unalias(q.expressions[0]).copy(), "_lv"))
    items += [exp.alias_(inner.copy(), f"_lk{i}") for i, (inner, _) in enumerate(keys)]
    d.set("expressions", items)
    d.set(
        "group",
        exp.Group(
            expressions=[
                *(g.copy() for g in group.expressions),
                *(inner.copy() for inner, _ in keys),
            ]
        ),
    )
    derived = exp.Subquery(this=d, alias=exp.TableAlias(this=exp.to_identifier(tag)))
    conds = [exp.column(f"_lk{i}", table=tag).eq(outer.copy()) for i, (_, outer) in enumerate(keys)]
    value: Node = exp.Literal.number(1) if exists else exp.column("_lv", table=tag)
    return exp.select(value).from_(derived).where(exp.and_(*conds))


def _inner_cols(node: Node, own: set[str]) -> bool:
    return any(isinstance(c, exp.Column) and c.table in own for c in _walk_no_subqueries(node))


def _tests_of(node: Node) -> list[Node]:
    """The outermost subquery expressions of ``node`` (EXISTS, IN over a subquery, scalar
    subqueries)."""
    out: list[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (exp.Exists, exp.Subquery)) or (
            isinstance(n, exp.In) and n.args.get("query") is not None
        ):
            out.append(n)
            continue
        stack.extend(n.iter_expressions())
    return out


def _outer_join_tests_as_marks(sel: Node) -> None:
    """A subquery in the ON condition of an outer join that reads one side only (or
    nothing of either) is computed as a column of that side before the join: the table
    becomes ``(SELECT t.*, <subquery> AS _m0 FROM t) AS t`` and the condition reads
    ``t._m0``. Exact for the joined table (its rows meet ON as they are) and for the
    first table of FROM while no earlier join pads it (RIGHT / FULL)."""
    joins = list(sel.args.get("joins") or [])
    first = sel.args.get("from_") or sel.args.get("from")
    if not joins or first is None:
        return
    head = first.this
    head_ok = True
    visible = _sources(sel)
    n = 0
    for j in joins:
        side = str(j.args.get("side") or "").upper()
        on = j.args.get("on")
        if side in ("LEFT", "RIGHT", "FULL") and on is not None and _tests_of(on):
            wraps: dict[int, tuple[Node, list[tuple[Node, str]]]] = {}
            for t in _tests_of(on):
                refs = {c.table for c in t.find_all(exp.Column) if c.table in visible}
                right = j.this.alias_or_name
                target = None
                if refs <= {right} and refs:
                    target = j.this
                elif head_ok and refs <= {head.alias_or_name}:
                    target = head
                if target is None or not isinstance(target, (exp.Table, exp.Subquery)):
                    continue
                if not target.alias_or_name:
                    continue
                name = f"_m{n}"
                n += 1
                wraps.setdefault(id(target), (target, []))[1].append((t, name))
            for target, tests in wraps.values():
                alias = target.alias_or_name
                inner = target.copy()
                items: list[Node] = [exp.Column(this=exp.Star(), table=exp.to_identifier(alias))]
                items += [exp.alias_(t.copy(), name) for t, name in tests]
                body = exp.select(*items).from_(inner)
                for t, name in tests:
                    t.replace(exp.column(name, table=alias))
                wrapped = exp.Subquery(
                    this=body, alias=exp.TableAlias(this=exp.to_identifier(alias))
                )
                target.replace(wrapped)
                if target is head:
                    head = wrapped
        if side in ("RIGHT", "FULL"):
            head_ok = False


def _grouping_sets(group: Node) -> list[list[Node]] | None:
    """The grouping sets a GROUP BY with ROLLUP, CUBE or GROUPING SETS stands for (each a
    list of expressions), or None for a plain GROUP BY."""
    items = list(group.expressions)
    if group.args.get("rollup"):
        items = [exp.Rollup(expressions=items)]
    elif group.args.get("cube"):
        items = [exp.Cube(expressions=items)]
    if group.args.get("grouping_sets") or group.args.get("totals"):
        raise UnsupportedSQL(f"GROUP BY {group.sql()}")
    if not any(isinstance(g, (exp.Rollup, exp.Cube, exp.GroupingSets)) for g in items):
        return None
    sets: list[list[Node]] = [[]]
    for g in items:
        if isinstance(g, exp.Rollup):
            xs = list(g.expressions)
            choices = [xs[:i] for i in range(len(xs), -1, -1)]
        elif isinstance(g, exp.Cube):
            xs = list(g.expressions)
            n = len(xs)
            choices = [
                [x for j, x in enumerate(xs) if m >> (n - 1 - j) & 1]
                for m in range(2**n - 1, -1, -1)
            ]
        elif isinstance(g, exp.GroupingSets):
            choices = []
            for el in g.expressions:
                if isinstance(el, exp.Tuple):
                    choices.append(list(el.expressions))
                elif isinstance(el, exp.Paren):
                    choices.append([el.this])
                else:
                    choices.append([el])
        else:
            choices = [[g]]
        sets = [a + b for a in sets for b in choices]
    return sets


def _distinct_one(node: Node, func: str) -> tuple[Node, bool]:
    """An aggregate's one argument and whether it was written ``DISTINCT``."""
    if not isinstance(node, exp.Distinct):
        return node, False
    if len(node.expressions) != 1:
        raise SQLError(f"{func}(DISTINCT ...) takes one argument")
    return node.expressions[0], True


def _ordinal_item(x: Node, sel: Node) -> Node:
    """A grouping set's item: an integer literal ``k`` is the SELECT's ``k``-th item (as in
    GROUP BY), anything else itself."""
    if not (isinstance(x, exp.Literal) and x.is_int):
        return x
    k = int(x.this)
    items = sel.expressions
    if not 1 <= k <= len(items):
        raise SQLError(f"GROUP BY position {k} is not in the select list (1 to {len(items)})")
    item = _unalias(items[k - 1])
    if item.find(exp.AggFunc) is not None:
        raise SQLError(f"GROUP BY position {k} refers to an aggregate")
    return item.copy()


def _map_children(node: Node, f: Any) -> Node:
    """``node`` with each child expression (alone or in a list) replaced by ``f`` of it."""
    for k, v in list(node.args.items()):
        if isinstance(v, exp.Expression):
            node.set(k, f(v))
        elif isinstance(v, list):
            node.set(k, [f(x) if isinstance(x, exp.Expression) else x for x in v])
    return node


def _windows_over_groups(sel: Node, spark: bool) -> Node:
    """A SELECT grouped by grouping sets with window functions as a SELECT of the windows
    over the grouped rows of all sets: ``SELECT <windows> FROM (SELECT <what they read>
    FROM ... GROUP BY ROLLUP ...) _gs``. Each part of an item that reads columns or
    aggregates outside a window (a window's arguments, PARTITION BY and ORDER BY
    expressions, the items without windows) is a column of the grouped query; ORDER BY
    and LIMIT move to the outer query."""
    exports: list[Node] = []

    def reads(node: Node) -> bool:
        return any(
            isinstance(n, (exp.Column, exp.AggFunc, exp.Grouping, exp.GroupingId))
            for n in node.walk()
        )

    def value(node: Node) -> Node:
        if not reads(node):
            return node
        name = f"_gw{len(exports)}"
        exports.append(exp.alias_(node, name))
        return exp.column(name, table="_gs")

    def conv(node: Node) -> Node:
        if isinstance(node, exp.Window):
            f = node.this
            target = f.this if isinstance(f, (exp.IgnoreNulls, exp.RespectNulls)) else f
            _map_children(target, value)
            node.set("partition_by", [value(x) for x in node.args.get("partition_by") or []])
            order = node.args.get("order")
            if order is not None:
                for o in order.expressions:
                    o.set("this", value(o.this))
            return node
        if not any(isinstance(n, exp.Window) for n in node.walk()):
            return value(node)
        return _map_children(node, conv)

    items = []
    for x in sel.expressions:
        body = _unalias(x).copy()
        items.append(exp.alias_(conv(body), x.alias_or_name))
    names = {x.alias_or_name.lower() for x in sel.expressions}
    order = sel.args.get("order")
    if order is not None:
        order = order.copy()
        for o in order.expressions:
            key = o.this
            if (isinstance(key, exp.Column) and not key.table and key.name.lower() in names) or (
                isinstance(key, exp.Literal) and key.is_int
            ):
                continue
            o.set("this", conv(key))
    inner = sel.copy()
    for k in ("order", "limit", "offset"):
        inner.set(k, None)
    inner.set("expressions", exports or [exp.alias_(exp.Literal.number(0), "_gw")])
    grouped = _expand_grouping_sets(inner, spark)
    outer = exp.select(*items).from_(
        exp.Subquery(this=grouped, alias=exp.TableAlias(this=exp.to_identifier("_gs")))
    )
    if order is not None:
        outer.set("order", order)
    for k in ("limit", "offset"):
        if sel.args.get(k) is not None:
            outer.set(k, sel.args[k].copy())
    return outer


def _expand_grouping_sets(tree: Node, spark: bool) -> Node:
    """A SELECT grouped by ROLLUP, CUBE or GROUPING SETS as the UNION ALL of one grouped
    SELECT per grouping set: a grouping column outside the set is NULL there (outside
    aggregates), ``grouping(x)`` is 1 where ``x`` is outside the set, ``grouping_id(...)``
    the bits of those (the first column the highest). As in Spark, a set without columns
    gives its row only when the table has rows, unless it is the only set."""
    for sel in list(tree.find_all(exp.Select)):
        group = sel.args.get("group")
        if group is None:
            continue
        sets = _grouping_sets(group)
        if sets is None:
            continue
        if sel.args.get("distinct"):
            raise UnsupportedSQL("SELECT DISTINCT with ROLLUP, CUBE or GROUPING SETS")
        if any(isinstance(n, exp.Window) for x in sel.expressions for n in _walk_no_subqueries(x)):
            # a window runs over the rows of every grouping set together, not set by set
            outer = _windows_over_groups(sel, spark)
            if sel is tree:
                tree = outer
            else:
                sel.replace(outer)
            continue
        sets = [[_ordinal_item(x, sel) for x in st] for st in sets]
        universe: dict[str, Node] = {}
        for st in sets:
            for x in st:
                universe.setdefault(x.sql(), x)
        branches = []
        for st in sets:
            inside = {x.sql() for x in st}

            def strip(node: Node, inside: set[str] = inside) -> Node:
                if isinstance(node, exp.Grouping):
                    bit = 0 if node.expressions[0].sql() in inside else 1
                    return exp.Cast(this=exp.Literal.number(bit), to=exp.DataType.build("TINYINT"))
                if isinstance(node, exp.GroupingId):
                    cols = list(node.expressions) or list(universe.values())
                    v = 0
                    for c in cols:
                        v = 2 * v + (0 if c.sql() in inside else 1)
                    return exp.Cast(this=exp.Literal.number(v), to=exp.DataType.build("BIGINT"))
                if isinstance(node, (exp.AggFunc, exp.Query, exp.Subquery)):
                    return node
                key = node.sql()
                if key in universe:
                    # a grouping expression of the set is its group's value, whole (its
                    # columns may be grouped by alone in other sets, and NULL there)
                    return node if key in inside else exp.Null()
                return _map_children(node, strip)

            b = sel.copy()
            for k in ("order", "limit", "offset"):
                b.set(k, None)
            b.set("expressions", [strip(x.copy()) for x in sel.expressions])
            having = sel.args.get("having")
            conds = [strip(having.this.copy())] if having is not None else []
            if not st and spark and len(sets) > 1:
                conds.append(
                    exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(0))
                )
            b.set("having", exp.Having(this=exp.and_(*conds)) if conds else None)
            b.set("group", exp.Group(expressions=[x.copy() for x in st]) if st else None)
            branches.append(b)
        union: Node = branches[0]
        for b in branches[1:]:
            union = exp.Union(this=union, expression=b, distinct=False)
        for k in ("order", "limit", "offset"):
            if sel.args.get(k) is not None:
                union.set(k, sel.args[k].copy())
        if sel is tree:
            tree = union
        else:
            sel.replace(union)
    return tree


def _inline_named_windows(tree: Node) -> None:
    """``OVER w`` / ``OVER (w)`` with ``WINDOW w AS (...)`` as the window written out (a
    window may name another and add an ORDER BY or frame, as SQL allows); the WINDOW
    clause is then dropped."""
    for sel in list(tree.find_all(exp.Select)):
        defs = sel.args.get("windows")
        if not defs:
            continue
        named: dict[str, Node] = {}
        for d in defs:
            name = _name(d.this)
            if name in named:
                raise SQLError(f"window '{name}' is defined twice")
            named[name] = _with_base_window(d, named)
        users = [*sel.expressions]
        order = sel.args.get("order")
        if order is not None:
            users.extend(order.expressions)
        for item in users:
            for w in _walk_no_subqueries(item):
                if isinstance(w, exp.Window) and w.args.get("alias") is not None:
                    _with_base_window(w, named, alias_key="alias")
        sel.set("windows", None)


def _with_base_window(w: Node, named: dict[str, Node], alias_key: str = "this") -> Node:
    """``w`` with the parts of the window it names (in ``named``) it does not give
    itself."""
    ref = w.args.get(alias_key) if alias_key == "alias" else None
    if alias_key == "this":
        # a definition ``w2 AS (w1 ORDER BY ...)`` names its base in ``alias``
        ref = w.args.get("alias")
    if ref is None:
        return w
    base = named.get(_name(ref))
    if base is None:
        raise SQLError(f"unknown window '{_name(ref)}'")
    for part in ("partition_by", "order", "spec"):
        if not w.args.get(part) and base.args.get(part):
            got = base.args[part]
            w.set(part, [x.copy() for x in got] if isinstance(got, list) else got.copy())
    w.set("alias", None)
    return w


def _inline_fromless_scalars(tree: Node) -> None:
    """A scalar subquery without FROM, ``(SELECT e [WHERE c])``, is ``e`` (``CASE WHEN c
    THEN e END``): one row, or none and so NULL. Its expression may read the outer row,
    and an aggregate of outer columns in it aggregates the outer query's rows."""
    for sub in list(tree.find_all(exp.Subquery)):
        sel = sub.this
        if not isinstance(sel, exp.Select) or sub.alias or sub.parent is None:
            continue
        if isinstance(sub.parent, (exp.From, exp.Join, exp.In, exp.Exists)) or any(
            sel.args.get(k)
            for k in ("from_", "from", "joins", "group", "having", "order", "limit", "offset")
        ):
            continue
        if sel.args.get("distinct") or len(sel.expressions) != 1:
            continue
        item = sel.expressions[0]
        value = item.this if isinstance(item, exp.Alias) else item
        if isinstance(value, exp.Star) or any(
            isinstance(n, (exp.Window, exp.Query, exp.Star)) for n in value.walk()
        ):
            continue
        if any(
            isinstance(n, exp.AggFunc) and (n.find(exp.Column) is None or sel.args.get("where"))
            for n in value.walk()
        ):
            # (an aggregate of outer columns is the outer query's; ``count(*)`` counts the
            # subquery's own one row)
            continue
        where = sel.args.get("where")
        if where is not None and any(isinstance(n, exp.Query) for n in where.walk()):
            continue
        new = value.copy()
        if where is not None:
            new = exp.Case(ifs=[exp.If(this=where.this.copy(), true=new)])
        sub.replace(exp.Paren(this=new))


def _inline_inner_ctes(tree: Node) -> None:
    """A WITH inside a subquery or derived table (not the statement's own) written into
    its query: each reference to one of its (non-recursive) common table expressions
    becomes that query as a derived table. Innermost first, so an inner WITH's name hides
    an outer one of the same name."""
    for q in reversed(list(tree.find_all(exp.Query))):
        if q is tree:
            continue
        key = "with_" if "with_" in q.args else "with"
        w = q.args.get(key)
        if w is None or w.args.get("recursive"):
            continue
        ctes = list(w.expressions)
        q.set(key, None)
        for i, cte in enumerate(ctes):
            name = cte.alias.lower()  # (names are not case-sensitive, in Spark and SQLite)
            for target in [q, *(c.this for c in ctes[i + 1 :])]:
                for table in list(target.find_all(exp.Table)):
                    if (
                        table.name.lower() != name
                        or table.args.get("db")
                        or table.args.get("catalog")
                    ):
                        continue
                    alias = cte.args["alias"].copy()
                    alias.set("this", exp.to_identifier(table.alias_or_name))
                    table.replace(exp.Subquery(this=cte.this.copy(), alias=alias))


def _row_comparisons(tree: Node, structs: bool) -> None:
    """Comparisons of rows of values written out on their fields: ``(a, b) = (x, y)`` is
    ``a = x AND b = y`` (and ``<>``, ``<=>`` alike), ``(a, b) IN ((x, y), ...)`` the OR of
    such equalities. SQL's rows compare in three-valued logic (``(2, NULL) = (2, 3)`` is
    NULL), as SQLite's do; Spark's are structs, whose fields compare NULL-safely
    (``structs``: FALSE there)."""

    def fields(t: Node, width: int, what: str) -> list[Node]:
        if not isinstance(t, exp.Tuple) or len(t.expressions) != width:
            raise SQLError(f"{what}: every row must have {width} values")
        return list(t.expressions)

    def equal(left: list[Node], right: list[Node], cls: Any = exp.EQ) -> Node:
        eqs = [cls(this=a.copy(), expression=b.copy()) for a, b in zip(left, right, strict=True)]
        return exp.Paren(this=exp.and_(*eqs)) if len(eqs) > 1 else eqs[0]

    for node in list(tree.find_all(exp.In, exp.EQ, exp.NEQ, exp.NullSafeEQ)):
        this = node.this
        if not isinstance(this, exp.Tuple):
            continue
        width = len(this.expressions)
        if isinstance(node, exp.In):
            if node.args.get("query") is not None or not node.expressions:
                continue
            if not all(isinstance(e, exp.Tuple) for e in node.expressions):
                continue
            rows = [fields(e, width, "IN") for e in node.expressions]
            eq = exp.NullSafeEQ if structs else exp.EQ
            new: Node = exp.or_(*(equal(this.expressions, r, eq) for r in rows))
            node.replace(exp.Paren(this=new) if len(rows) > 1 else new)
            continue
        other = node.expression
        if not isinstance(other, exp.Tuple):
            continue
        right = fields(other, width, "row comparison")
        safe = structs or isinstance(node, exp.NullSafeEQ)
        same = equal(this.expressions, right, exp.NullSafeEQ if safe else exp.EQ)
        node.replace(exp.Not(this=same) if isinstance(node, exp.NEQ) else same)


def _filters_as_cases(tree: Node) -> None:
    """``agg(x) FILTER (WHERE c)`` as ``agg(CASE WHEN c THEN x END)`` (the aggregates skip
    NULLs), ``count(*) FILTER (WHERE c)`` as ``count(CASE WHEN c THEN 1 END)``."""
    for f in list(tree.find_all(exp.Filter)):
        agg, where = f.this, f.expression
        if not isinstance(agg, exp.AggFunc) or not isinstance(where, exp.Where):
            continue
        arg = agg.this
        distinct = isinstance(arg, exp.Distinct)
        if distinct:
            if len(arg.expressions) != 1:
                continue
            arg = arg.expressions[0]
        if arg is None or isinstance(arg, exp.Star):
            if not isinstance(agg, exp.Count):
                continue
            arg = exp.Literal.number(1)
        case = exp.Case(ifs=[exp.If(this=where.this.copy(), true=arg.copy())])
        new = agg.copy()
        new.set("this", exp.Distinct(expressions=[case]) if distinct else case)
        f.replace(new)


def _partition_aggregates_as_joins(tree: Node) -> None:
    """An aggregate over a whole partition, ``sum(x) OVER (PARTITION BY k)`` (no ORDER BY,
    no frame), is the aggregate of the rows of ``k``'s partition: the SELECT's FROM and
    WHERE again, grouped by ``k``, joined back on ``k`` (NULL keys being one partition,
    as in a window). Only in a SELECT without GROUP BY or aggregates of its own; other
    window functions stay refused."""
    n = 0
    for sel in list(tree.find_all(exp.Select)):
        wins = [
            w
            for item in sel.expressions
            for w in _walk_no_subqueries(item)
            if isinstance(w, exp.Window)
        ]
        if not wins or sel.args.get("group") or sel.args.get("having"):
            continue
        if any(
            isinstance(x, exp.AggFunc) and not isinstance(x.parent, exp.Window)
            for item in sel.expressions
            for x in _walk_no_subqueries(item)
        ):
            continue
        if any(
            w.args.get("order")
            or w.args.get("spec")
            or not isinstance(w.this, _AGGS)
            or w.this.find(exp.Window)
            for w in wins
        ):
            continue
        first = sel.args.get("from_") or sel.args.get("from")
        if first is None:
            continue
        for w in wins:
            tag = f"_win{n}"
            n += 1
            keys = list(w.args.get("partition_by") or [])
            body = exp.select(
                *(exp.alias_(k.copy(), f"_k{i}") for i, k in enumerate(keys)),
                exp.alias_(w.this.copy(), "_v"),
            )
            body.set("from_", first.copy())
            if sel.args.get("joins"):
                body.set("joins", [j.copy() for j in sel.args["joins"]])
            if sel.args.get("where") is not None:
                body.set("where", sel.args["where"].copy())
            if keys:
                body.set("group", exp.Group(expressions=[k.copy() for k in keys]))
            derived = exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(tag)))
            on = (
                exp.and_(
                    *(
                        exp.NullSafeEQ(this=k.copy(), expression=exp.column(f"_k{i}", table=tag))
                        for i, k in enumerate(keys)
                    )
                )
                if keys
                else None
            )
            join = (
                exp.Join(this=derived, on=on)
                if on is not None
                else exp.Join(this=derived, kind="CROSS")
            )
            sel.set("joins", [*(sel.args.get("joins") or []), join])
            w.replace(exp.column("_v", table=tag))


def _simplify_tests(tree: Node) -> None:
    """Every EXISTS / IN subquery of ``tree`` as ``_tested_subquery`` makes it; and ``x IN
    (q)`` where ``q`` is an aggregate without GROUP BY or HAVING (exactly one row) as
    ``x = (q)``, a scalar subquery (its count over no rows is 0, not no row)."""
    _union_tests_split(tree)
    for n, node in enumerate(list(tree.find_all(exp.In, exp.Exists))):
        if isinstance(node, exp.In):
            sub = node.args.get("query")
            if sub is None:
                continue
            q = _query_of(sub)
            if (
                isinstance(q, exp.Select)
                and len(q.expressions) == 1
                and _is_scalar_agg(q)
                and not q.args.get("limit")
                and not q.args.get("offset")
            ):
                one = q.copy()
                one.set("order", None)  # (of its one row)
                node.replace(exp.EQ(this=node.this.copy(), expression=exp.Subquery(this=one)))
                continue
            new = _tested_subquery(q, False, f"_tested{n}")
            if new is not q:
                node.set("query", exp.Subquery(this=new))
        else:
            q = _query_of(node.this)
            new = _tested_subquery(q, True, f"_tested{n}")
            if new is not q:
                node.set("this", new)


def _lift_correlation(sub: Node, derived: Node) -> bool:
    """A derived table of subquery ``sub`` whose WHERE reads the query around ``sub``
    (``(SELECT sum(c) FROM (SELECT t1c AS c FROM t1 WHERE t1a = t0a))``): those conditions
    are moved up into ``sub``'s WHERE, over columns the derived table now also returns, so
    the subquery's correlation is decorrelated as any other. A UNION ALL has each SELECT
    tag its rows, and the conditions moved up are taken per tag. Left alone when a
    reference to the outer query is anywhere else in the derived table, or when it is not
    plain SELECTs (aggregates, DISTINCT, LIMIT, other set operations). Whether it moved
    any."""
    branches = _plain_branches(derived.this)
    if branches is None:
        return False
    lifted: list[tuple[list[Node], list[Node]]] = []  # per branch: conditions, inner columns
    for b in branches:
        own = _sources(b)
        outside = [c for c in b.find_all(exp.Column) if c.table and c.table not in own]
        where = b.args.get("where")
        conds = _conjuncts(where)
        moved = [
            c
            for c in conds
            if any(x.table and x.table not in own for x in c.find_all(exp.Column))
            and not any(isinstance(n, exp.Query) for n in c.walk())
        ]
        moved_refs = {id(x) for c in moved for x in c.find_all(exp.Column)}
        if any(id(c) not in moved_refs for c in outside):
            return False  # an outer reference the conditions do not hold
        inner_cols: list[Node] = []
        for c in moved:
            for x in c.find_all(exp.Column):
                if x.table in own and not any(x == y for y in inner_cols):
                    inner_cols.append(x)
        lifted.append((moved, inner_cols))
    if not any(m for m, _ in lifted):
        return False
    alias = derived.alias
    tagged = len(branches) > 1
    slots = [len(cols) for _, cols in lifted]
    preds: list[Node] = []
    for bi, (b, (moved, cols)) in enumerate(zip(branches, lifted, strict=True)):
        start = sum(slots[:bi])
        extra: list[Node] = []
        for si in range(sum(slots)):
            if start <= si < start + len(cols):
                value: Node = cols[si - start].copy()
            else:
                value = exp.Null()
            extra.append(exp.alias_(value, f"_lift{si}"))
        if tagged:
            extra.append(exp.alias_(exp.Literal.number(bi), "_branch"))
        b.set("expressions", [*b.expressions, *extra])
        keep = [c for c in _conjuncts(b.args.get("where")) if not any(c is m for m in moved)]
        b.set("where", exp.Where(this=exp.and_(*keep)) if keep else None)
        outer_preds = []
        for c in moved:
            c = c.copy()
            for x in list(c.find_all(exp.Column)):
                for si, col in enumerate(cols):
                    if x == col:
                        x.replace(exp.column(f"_lift{start + si}", table=alias))
                        break
            outer_preds.append(c)
        p = exp.and_(*outer_preds) if outer_preds else exp.true()
        if tagged:
            tag = exp.EQ(this=exp.column("_branch", table=alias), expression=exp.Literal.number(bi))
            p = exp.and_(tag, p)
        preds.append(exp.Paren(this=p))
    cond = preds[0] if len(preds) == 1 else exp.or_(*preds)
    where = sub.args.get("where")
    sub.set("where", exp.Where(this=exp.and_(where.this, cond) if where is not None else cond))
    return True


def _defined_names(q: Node) -> set[str]:
    """Every table alias and CTE name defined anywhere inside ``q``."""
    names: set[str] = set()
    for n in q.walk():
        if isinstance(n, exp.Select):
            names |= _sources(n)
        elif isinstance(n, exp.CTE):
            names.add(n.alias)
    return names


def _is_value_query(sel: Node) -> bool:
    """Whether SELECT ``sel`` is the query, or a branch of the set operation, of a subquery
    used as a value (scalar, IN, EXISTS, ANY / ALL)."""
    up = sel.parent
    while isinstance(up, (exp.Union, exp.Intersect, exp.Except)) or (
        isinstance(up, exp.Subquery) and isinstance(up.parent, exp.Subquery)
    ):
        up = up.parent
    return isinstance(up, (exp.Exists, exp.In, exp.Any, exp.All)) or (
        isinstance(up, exp.Subquery) and not isinstance(up.parent, (exp.From, exp.Join))
    )


def _in_subquery_of(node: Node, q: Node) -> bool:
    """Whether ``node``, inside query ``q``, is inside a subquery used as a value that is
    nested in ``q`` (maybe within derived tables on the way): a reference from there to
    the query around ``q`` is one from two or more levels of subqueries down."""
    up = node.parent
    while up is not None and up is not q:
        if isinstance(up, exp.Select) and _is_value_query(up):
            return True
        up = up.parent
    return False


def _in_outer_aggregate(c: Node, q: Node, inside: set[str]) -> bool:
    """Whether column ``c`` of SELECT ``q`` is in an aggregate that reads only tables
    other than ``inside`` (``q``'s own): one of the query around, which aggregates its
    rows there."""
    up = c.parent
    while up is not None and up is not q:
        if isinstance(up, _AGGS):
            return all(x.table and x.table not in inside for x in up.find_all(exp.Column))
        up = up.parent
    return False


def _enclosing_select(node: Node) -> Node | None:
    up = node.parent
    while up is not None and not isinstance(up, exp.Select):
        up = up.parent
    return up


def _domain_correlation(
    sub: Node, derived: Node, tag: str, why: dict[tuple[str, str], str] | None = None
) -> bool:
    """A derived table of subquery ``sub`` that reads columns of the query around ``sub``
    anywhere (a SELECT list, a set operation's branches, under GROUP BY or DISTINCT):
    ``(SELECT sum(c) FROM (SELECT t1c AS c FROM t1 WHERE t1a = t0a UNION SELECT t0b ...))``.

    The outer columns it reads are given as a domain, the distinct values of those columns
    in their table (``SELECT DISTINCT t0a, t0b FROM t0``, a superset of the values the
    outer rows hold; for columns of several tables, in the outer query's FROM under its
    conditions without subqueries). Each SELECT of the derived table that reads them joins
    the domain and reads its columns instead, and every SELECT on the way up (each branch
    of a set operation, each GROUP BY) carries the domain's columns as extra output. The
    derived table then holds, for every domain row, the rows it would hold with those
    values substituted, tagged with them; ``sub``'s WHERE matches the tags with the outer
    row's values NULL-safely (a NULL outer value substituted as NULL), and the subquery is
    decorrelated as any other. On the way, a LIMIT / OFFSET is taken per domain row
    (``_limit_per_domain``) and an aggregate without GROUP BY keeps its row for every
    domain row (``_seed_groups``). Left alone (the planner then refuses the reference)
    when the columns come from further out than the query around ``sub``, or when some
    SELECT on the way cannot carry the tags: a window function, DISTINCT with LIMIT,
    VALUES, an outer join with a derived table that carries them. Then ``why`` (if given)
    maps each outer column, ``(table, column)``, to what stood in the way. Whether it
    rewrote the derived table."""
    owner = _enclosing_select(sub)
    if owner is None:
        return False
    body = derived.this
    inside = _defined_names(body)
    refs = [c for c in body.find_all(exp.Column) if c.table and c.table not in inside]
    if not refs:
        return False
    aliases = {c.table for c in refs}
    owned = _sources(owner)
    names: list[tuple[str, str]] = []  # (table, column)
    for c in refs:
        if (c.table, c.name) not in names:
            names.append((c.table, c.name))

    def fail(reason: str) -> bool:
        if why is not None:
            for name in names:
                why.setdefault(name, reason)
        return False

    if aliases & _sources(sub):
        return fail("a derived table that reads a table beside it (LATERAL)")
    if not aliases <= owned:
        return False  # (one from further out: an earlier pass carries it here, or none can)
    # (named after the outer columns, so that a plan shows whose values it carries; a
    # domain column carried one level further keeps the name of the column it holds)
    dom_names: list[str] = []
    for i, (t, n) in enumerate(names):
        base = n.split("_", 2)[-1] if n.startswith("_dm") else f"{t}_{n}"
        dom = f"{tag}_{base}"
        dom_names.append(dom if dom not in dom_names else f"{tag}_{i}_{base}")
    picks = [
        exp.alias_(exp.column(n, table=t, quoted=True), d, quoted=True)
        for (t, n), d in zip(names, dom_names, strict=True)
    ]
    outer_joined = any(
        str(j.args.get("side") or "").upper() in ("LEFT", "RIGHT", "FULL")
        for j in owner.args.get("joins") or []
    )
    if len(aliases) == 1 and not outer_joined:
        # the column's values in its table
        (alias,) = aliases
        source = next((x for x in _from_items(owner) if x.alias_or_name == alias), None)
        if source is None or not isinstance(source, (exp.Table, exp.Subquery)):
            return fail(f"values of {alias} that are not a table's or a derived table's")
        domain = exp.select(*picks).from_(source.copy())
        # (the owner's conditions on that table alone keep the domain small)
        keep = [
            c.copy()
            for c in _conjuncts(owner.args.get("where"))
            if not any(isinstance(n, exp.Query) for n in c.walk())
            and all(x.table == alias for x in c.find_all(exp.Column))
            and any(True for _ in c.find_all(exp.Column))
        ]
        if keep:
            domain.set("where", exp.Where(this=exp.and_(*keep)))
    else:
        # columns of several tables, or of a table an outer join may pad with NULLs: their
        # values in the outer query's joined rows (its conditions without subqueries)
        from_ = owner.args.get("from_") or owner.args.get("from")
        if from_ is None:
            return fail("a query without FROM around the subquery")
        domain = exp.select(*picks).from_(from_.this.copy())
        domain.set("joins", [j.copy() for j in owner.args.get("joins") or []])
        # (not those that read a query further out: the owner's rows are a subset)
        keep = [
            c.copy()
            for c in _conjuncts(owner.args.get("where"))
            if not any(isinstance(n, exp.Query) for n in c.walk())
            and all(x.table in owned for x in c.find_all(exp.Column))
        ]
        if keep:
            domain.set("where", exp.Where(this=exp.and_(*keep)))
    domain.set("distinct", exp.Distinct())
    new_body = body.copy()
    inside_new = _defined_names(new_body)
    # (the nodes are held while their ids are used: a node made later, after one of them
    # was replaced and dropped, could otherwise get its id)
    ref_nodes = [
        c for c in new_body.find_all(exp.Column) if c.table in aliases and c.table not in inside_new
    ]
    ref_ids = {id(c) for c in ref_nodes}
    counter = iter(range(1_000_000))

    def dom_cols(src: str) -> list[Node]:
        return [exp.column(d, table=src, quoted=True) for d in dom_names]

    def reads(q: Node) -> bool:
        return any(id(c) in ref_ids for c in q.find_all(exp.Column))

    def beside(q: Node) -> bool | None:
        """``q``, which does not read the outer row, as its rows beside each domain row
        (a SELECT of its columns from it, cross joined with the domain)."""
        out = _output_names(q)
        if out is None or q.parent is None:
            fail("a set operation whose columns have no distinct names")
            return None
        b, src = f"{tag}_b{next(counter)}", f"{tag}_src{next(counter)}"
        new = (
            exp.select(
                *(exp.alias_(exp.column(o, table=b, quoted=True), o, quoted=True) for o in out),
                *(
                    exp.alias_(c, d, quoted=True)
                    for c, d in zip(dom_cols(src), dom_names, strict=True)
                ),
            )
            .from_(exp.Subquery(this=q.copy(), alias=exp.TableAlias(this=_quoted(b))))
            .join(
                exp.Subquery(this=domain.copy(), alias=exp.TableAlias(this=_quoted(src))),
                join_type="cross",
            )
        )
        q.replace(new)
        return True

    def inject(q: Node, force: bool) -> bool | None:
        """Whether ``q`` now carries the domain's columns last (None: it cannot)."""
        if isinstance(q, exp.Subquery):
            return inject(q.this, force)
        fromless = (
            isinstance(q, exp.Select)
            and q.args.get("from_") is None
            and q.args.get("from") is None
            and not any(q.args.get(k) for k in ("group", "having", "limit", "offset"))
            and not any(isinstance(n, exp.AggFunc) for x in q.expressions for n in x.walk())
        )
        if not reads(q) and not (force and fromless):
            # (a SELECT without FROM takes the domain as its FROM: its bare NULLs then
            # stay bare, typed by the other branches of a set operation)
            return beside(q) if force else False
        if isinstance(q, (exp.Union, exp.Intersect, exp.Except)):
            if any(q.args.get(k) for k in ("limit", "offset")):
                fail("a LIMIT / OFFSET on a set operation")
                return None
            ok_l, ok_r = inject(q.left, True), inject(q.right, True)
            return True if ok_l and ok_r else None
        if not isinstance(q, exp.Select):
            fail(f"{type(q).__name__.upper()}")
            return None
        if any(q.args.get(k) for k in ("with_", "with")):
            fail("a WITH inside")
            return None
        if any(isinstance(n, exp.Window) for x in q.expressions for n in x.walk()):
            fail("a window function on the way")
            return None
        limit = _literal_count(q.args.get("limit"))
        offset = _literal_count(q.args.get("offset"))
        if (q.args.get("limit") and limit is None) or (q.args.get("offset") and offset is None):
            fail("a LIMIT / OFFSET that is not a constant count")
            return None
        if (limit is not None or offset is not None) and q.args.get("distinct"):
            # (a row number would be taken before DISTINCT)
            fail("DISTINCT with LIMIT / OFFSET on the way")
            return None
        aggregated = q.args.get("having") is not None or any(
            isinstance(n, _AGGS) for x in q.expressions for n in _walk_no_subqueries(x)
        )
        # one row over no rows: each domain row gets a group of its own to have it
        seeded = aggregated and not q.args.get("group")
        if seeded and not _seed_groups(q, f"{tag}_x{next(counter)}"):
            fail(
                "an aggregate without GROUP BY whose aggregates count NULLs, or with a "
                "subquery beside its aggregates that reads its rows"
            )
            return None
        joins = q.args.get("joins") or []
        outer_join = _has_outer_join(q)
        carriers: list[Node] = []
        for item in _from_items(q):
            if isinstance(item, exp.Subquery) and item.alias:
                got = inject(item.this, False)
                if got is None:
                    return None
                if got:
                    carriers.append(item)
                    cols = item.args["alias"].columns if item.args.get("alias") else None
                    if cols:
                        item.args["alias"].set(
                            "columns", [*cols, *(exp.to_identifier(d) for d in dom_names)]
                        )
            elif any(id(c) in ref_ids for c in item.find_all(exp.Column)):
                fail(f"{type(item).__name__.upper()} in FROM that reads it")
                return None
        # (those inside the carriers were replaced there)
        own = [c for c in q.find_all(exp.Column) if id(c) in ref_ids]
        if carriers and outer_join:
            fail("an outer join with a derived table that reads it")
            return None
        if len(carriers) == 1 and not any(_under(c, j) for c in own for j in joins):
            # (the carrier's rows hold the domain row they were made for: the outer
            # values are read there, unless a join's ON, maybe before it, reads them)
            src = carriers[0].alias
        else:
            src = f"{tag}_src{next(counter)}"
            dom = exp.Subquery(this=domain.copy(), alias=exp.TableAlias(this=_quoted(src)))
            from_ = q.args.get("from_") or q.args.get("from")
            if from_ is None:
                q.set("from_", exp.From(this=dom))
            else:
                # the domain first: ON conditions of the joins after it may read it
                q.set("from_", exp.From(this=dom))
                q.set("joins", [exp.Join(this=from_.this), *joins])
            conds = [
                exp.NullSafeEQ(this=a, expression=b)
                for c in carriers
                for a, b in zip(dom_cols(c.alias), dom_cols(src), strict=True)
            ]
            if conds:
                where = q.args.get("where")
                cond = exp.and_(*([where.this] if where is not None else []), *conds)
                q.set("where", exp.Where(this=cond))
        for c in own:
            d = dom_names[names.index((c.table, c.name))]
            c.replace(exp.column(d, table=src, quoted=True))
        q.set(
            "expressions",
            [
                *q.expressions,
                *(
                    exp.alias_(c, d, quoted=True)
                    for c, d in zip(dom_cols(src), dom_names, strict=True)
                ),
            ],
        )
        group = q.args.get("group")
        if group is not None:
            group.set("expressions", [*group.expressions, *dom_cols(src)])
        elif seeded:
            q.set("group", exp.Group(expressions=dom_cols(src)))
        if limit is not None or offset is not None:
            lim = f"{tag}_lim{next(counter)}"
            if not _limit_per_domain(q, dom_cols(src), limit, offset, lim):
                fail("a LIMIT / OFFSET that cannot be taken per outer value")
                return None
        return True

    if not inject(new_body, True):
        return False
    cols = derived.args["alias"].columns if derived.args.get("alias") else None
    if cols:
        derived.args["alias"].set("columns", [*cols, *(exp.to_identifier(d) for d in dom_names)])
    derived.set("this", new_body)
    preds = [
        exp.NullSafeEQ(
            this=exp.column(d, table=derived.alias, quoted=True),
            expression=exp.column(n, table=t, quoted=True),
        )
        for (t, n), d in zip(names, dom_names, strict=True)
    ]
    where = sub.args.get("where")
    sub.set("where", exp.Where(this=exp.and_(*([where.this] if where is not None else []), *preds)))
    return True


def _seed_groups(q: Node, tag: str) -> bool:
    """Rewrites aggregate SELECT ``q`` without GROUP BY (one row, even over no rows) so
    that grouping it by the domain keeps that row for every domain row: its FROM and
    WHERE become a derived table ``tag`` of the columns its aggregates read and a marker
    column ``_m`` (TRUE), with one more row of NULLs beside it (the seed, which the domain
    multiplies to one per domain row); each aggregate then reads only rows with the marker
    (``count(*)`` counts markers). A subquery in an aggregate's argument reads the derived
    table's columns as it read ``q``'s rows; one elsewhere may read only the query around
    (the domain's columns, which become group keys). False, ``q`` unchanged, when an
    aggregate might count the seed's NULLs (one that does not skip NULLs) or a subquery
    outside the aggregates reads ``q``'s rows."""
    parts = [*q.expressions, *([q.args["having"]] if q.args.get("having") else [])]
    if q.args.get("from_") is None and q.args.get("from") is None:
        return False
    for x in parts:
        for n in _walk_no_subqueries(x):
            if isinstance(n, exp.AggFunc) and not isinstance(n, _AGGS):
                return False
        for n in x.walk():
            if isinstance(n, exp.Column) and not n.table:
                return False
            if (
                isinstance(n, exp.Column)
                and _binds_to(n, q)
                and _enclosing_select(n) is not q
                and not _under_aggregate_of(n, q)
            ):
                return False  # (a subquery outside the aggregates reads q's rows)
    own_cols = [c for x in parts for c in x.find_all(exp.Column) if _binds_to(c, q)]
    cols: list[Node] = []
    for c in own_cols:
        if not any(c == y for y in cols):
            cols.append(c.copy())
    names = [f"_c{i}" for i in range(len(cols))]
    inner = exp.Select()
    inner.set(
        "expressions",
        [
            *(exp.alias_(c, n, quoted=True) for c, n in zip(cols, names, strict=True)),
            exp.alias_(exp.true(), "_m", quoted=True),
        ],
    )
    for k in ("from_", "from", "joins", "where"):
        if q.args.get(k) is not None:
            inner.set(k, q.args[k])
    seed = exp.select(
        *(exp.alias_(exp.Null(), n, quoted=True) for n in names),
        exp.alias_(exp.Null(), "_m", quoted=True),
    )
    both = exp.Union(this=inner, expression=seed, distinct=False)
    mark = exp.column("_m", table=tag, quoted=True)
    for c in own_cols:
        c.replace(
            exp.column(names[next(i for i, y in enumerate(cols) if c == y)], table=tag, quoted=True)
        )
    for x in parts:
        for a in [n for n in _walk_no_subqueries(x) if isinstance(n, _AGGS)]:
            arg = a.this
            if isinstance(arg, exp.Star) or arg is None:
                a.set("this", mark.copy())
                continue
            guarded = arg.expressions if isinstance(arg, exp.Distinct) else [arg]
            for g in list(guarded):
                # (``g`` itself moves under the CASE: the caller holds its outer references)
                guard = exp.If(this=mark.copy(), true=exp.Null())
                g.replace(exp.Case(ifs=[guard]))
                guard.set("true", g)
    for k in ("from", "joins", "where"):
        q.set(k, None)
    q.set("from_", exp.From(this=exp.Subquery(this=both, alias=exp.TableAlias(this=_quoted(tag)))))
    return True


def _binds_to(c: Node, q: Node) -> bool:
    """Whether column ``c``, inside SELECT ``q``, reads a table of ``q``'s FROM (no query
    on the way defines its table's name)."""
    if not c.table or c.table not in _sources(q):
        return False
    up = c.parent
    while up is not None and up is not q:
        if isinstance(up, exp.Select) and c.table in _sources(up):
            return False
        up = up.parent
    return up is q


def _under_aggregate_of(node: Node, q: Node) -> bool:
    """Whether ``node`` is inside the argument of an aggregate that SELECT ``q`` computes."""
    up = node.parent
    while up is not None and up is not q:
        if isinstance(up, _AGGS) and _enclosing_select(up) is q:
            return True
        up = up.parent
    return False


def _literal_count(node: Node | None) -> int | None:
    """The row count of a LIMIT / OFFSET clause written as a non-negative integer."""
    if node is None:
        return None
    v = node.args.get("expression") or node.this
    if isinstance(v, exp.Literal) and not v.is_string and v.this.isdigit():
        return int(v.this)
    return None


def _limit_per_domain(
    q: Node, parts: list[Node], limit: int | None, offset: int | None, tag: str
) -> bool:
    """SELECT ``q``'s LIMIT / OFFSET taken within each partition of ``parts`` (the domain
    columns it carries) instead of over all its rows: its rows numbered by its ORDER BY
    within their partition, and the numbers kept filtered (``q`` is rewritten in place).
    False (``q`` left as it was) when its columns or ORDER BY cannot be named so."""
    out = _output_names(q)
    if out is None:
        return False
    by_alias = {e.alias: e.this for e in q.expressions if isinstance(e, exp.Alias)}
    order = q.args.get("order")
    keys: list[Node] = []
    for o in order.expressions if order is not None else []:
        o = o.copy()
        x = o.this
        if isinstance(x, exp.Column) and not x.table and x.name in by_alias:
            o.set("this", by_alias[x.name].copy())
        elif isinstance(x, exp.Literal) and not x.is_string:
            if not x.this.isdigit() or not 1 <= int(x.this) <= len(q.expressions):
                return False
            e = q.expressions[int(x.this) - 1]
            o.set("this", (e.this if isinstance(e, exp.Alias) else e).copy())
        keys.append(o)
    rn = exp.Window(
        this=exp.RowNumber(),
        partition_by=[p.copy() for p in parts],
        order=exp.Order(expressions=keys) if keys else None,
    )
    inner = q.copy()
    for k in ("limit", "offset", "order"):
        inner.set(k, None)
    inner.set("expressions", [*inner.expressions, exp.alias_(rn, "_rn", quoted=True)])
    lo = offset or 0
    rn_col = exp.column("_rn", table=tag, quoted=True)
    cond: Node = exp.GT(this=rn_col, expression=exp.Literal.number(lo))
    if limit is not None:
        cond = exp.and_(
            cond, exp.LTE(this=rn_col.copy(), expression=exp.Literal.number(lo + limit))
        )
    for k in list(q.args):
        if k not in ("expressions",):
            q.set(k, None)
    q.set(
        "expressions",
        [exp.alias_(exp.column(o, table=tag, quoted=True), o, quoted=True) for o in out],
    )
    q.set("from_", exp.From(this=exp.Subquery(this=inner, alias=exp.TableAlias(this=_quoted(tag)))))
    q.set("where", exp.Where(this=cond))
    return True


def _mark_using_chains(tree: Node) -> None:
    """Before qualification: a join ``USING (u)`` after an earlier RIGHT or FULL join
    ``USING (u)`` is marked with the sources whose ``u`` the merged column is (the
    COALESCE of them, in order): its condition must compare that, not the first source's
    ``u`` (which qualification writes, NULL on the rows the outer join padded)."""
    for sel in tree.find_all(exp.Select):
        joins = sel.args.get("joins") or []
        first = sel.args.get("from_") or sel.args.get("from")
        if not joins or first is None:
            continue
        chains: dict[str, list[str]] = {}  # column -> sources joined by USING on it
        outer: set[str] = set()  # columns an earlier RIGHT / FULL join USING merged
        for j in joins:
            names = [_name(u).lower() for u in j.args.get("using") or []]
            if not names:
                continue
            fix = {u: list(chains[u]) for u in names if u in outer and u in chains}
            if fix:
                j.meta["using_chain"] = fix
            for u in names:
                chains.setdefault(u, [first.this.alias_or_name]).append(j.this.alias_or_name)
                if str(j.args.get("side") or "").upper() in ("RIGHT", "FULL"):
                    outer.add(u)


def _coalesce_using_chains(tree: Node) -> None:
    """After qualification: in the condition of a join ``_mark_using_chains`` marked, the
    earlier side of ``x.u = t.u`` becomes ``COALESCE(a.u, b.u, ...)``."""
    for j in tree.find_all(exp.Join):
        fix = j.meta.get("using_chain")
        on = j.args.get("on")
        if not fix or on is None:
            continue
        right = j.this.alias_or_name
        for eq in list(on.find_all(exp.EQ)):
            sides = [eq.this, eq.expression]
            if not all(isinstance(x, exp.Column) for x in sides):
                continue
            u = sides[0].name.lower()
            if u not in fix or sides[1].name.lower() != u:
                continue
            mine = [x for x in sides if x.table == right]
            other = [x for x in sides if x.table != right]
            if len(mine) != 1 or len(other) != 1:
                continue
            merged = exp.Coalesce(
                this=exp.column(other[0].name, table=fix[u][0]),
                expressions=[exp.column(other[0].name, table=a) for a in fix[u][1:]],
            )
            other[0].replace(merged)


def _order_by_all(tree: Node, rels: dict[str, tuple[Field, ...]], spark: bool) -> None:
    """Spark's ``ORDER BY ALL`` (alone) made ``ORDER BY 1, 2, ...``: every column of the
    query's result in turn, left to right, each in its direction and NULLs order. As in
    Spark, ``all`` that names a column (of the result, or of a source of a SELECT) is that
    column; so is ``ALL`` beside other keys (an unknown column without one). Run on the
    qualified tree (stars expanded), before rewrites that add columns to a SELECT."""
    from sqlglot.optimizer.scope import Scope as _GlotScope
    from sqlglot.optimizer.scope import traverse_scope

    for sc in traverse_scope(tree):
        q = sc.expression
        order = q.args.get("order")
        if order is None or not isinstance(q, exp.Query):
            continue
        items = order.expressions
        alls = [o for o in items if isinstance(o.this, exp.Var) and o.this.name.lower() == "all"]
        if not alls:
            continue
        names = [n.lower() for n in q.named_selects]
        table = None
        if isinstance(q, exp.Select) and "all" not in names:
            for alias, src in sc.sources.items():
                if isinstance(src, exp.Table):
                    cols = [f.name.lower() for f in rels.get(_name(src.this), ())]
                elif isinstance(src, _GlotScope) and isinstance(src.expression, exp.Query):
                    cols = [n.lower() for n in src.expression.named_selects]
                else:
                    cols = []
                if "all" in cols:
                    table = alias
        if len(items) == 1 and spark and "all" not in names and table is None:
            o = items[0]
            order.set(
                "expressions",
                [
                    exp.Ordered(
                        this=exp.Literal.number(i + 1),
                        desc=o.args.get("desc"),
                        nulls_first=o.args.get("nulls_first"),
                    )
                    for i in range(len(q.named_selects))
                ],
            )
            continue
        for o in alls:
            o.set("this", exp.column("all", table=table))


def _quoted(name: str) -> Node:
    return exp.to_identifier(name, quoted=True)


def _under(node: Node, top: Node) -> bool:
    up = node.parent
    while up is not None:
        if up is top:
            return True
        up = up.parent
    return False


def _qualify_outer_in_having(tree: Node, rels: dict[str, tuple[Field, ...]]) -> None:
    """An unqualified column in the HAVING of a subquery expression that none of its
    tables has but one table of the query around it has (``HAVING count(*) > t0a``),
    qualified with that table: qualification leaves it unqualified, and it would then be
    an unknown column. Only where the tables on both sides are known tables."""

    def columns(sel: Node) -> dict[str, set[str]] | None:
        out: dict[str, set[str]] = {}
        for item in _from_items(sel):
            fields = rels.get(item.name) if isinstance(item, exp.Table) else None
            if fields is None:
                return None
            out[item.alias_or_name] = {f.name.lower() for f in fields}
        return out

    for sel in list(tree.find_all(exp.Select)):
        having = sel.args.get("having")
        owner = _enclosing_select(sel)
        if having is None or owner is None or not _is_subquery_expression(sel):
            continue
        local, around = columns(sel), columns(owner)
        if local is None or around is None:
            continue
        names = set().union(*local.values()) | {e.alias_or_name.lower() for e in sel.expressions}
        for c in list(_walk_no_subqueries(having)):
            if isinstance(c, exp.Column) and not c.table and c.name.lower() not in names:
                hits = [a for a, cs in around.items() if c.name.lower() in cs]
                if len(hits) == 1:
                    c.set("table", exp.to_identifier(hits[0]))


def _hoist_outer_tests(tree: Node) -> None:
    """``EXISTS (SELECT ... WHERE c AND p)`` where condition ``p`` holds a subquery and
    reads no table of that SELECT (only the query around it), as ``p AND EXISTS (SELECT
    ... WHERE c)``: ``p`` is then a subquery of the query whose columns it reads, not one
    two levels down (``x LEFT SEMI JOIN y ON x1 = y1 AND EXISTS (SELECT * FROM z WHERE z2
    = x2)``). A ``p`` that may be NULL is taken as FALSE there (so is it in the WHERE)."""
    for e in list(tree.find_all(exp.Exists)):
        sel = e.this
        while isinstance(sel, exp.Subquery):
            sel = sel.this
        if not isinstance(sel, exp.Select) or any(
            sel.args.get(k) for k in ("group", "having", "limit", "offset", "with_", "with")
        ):
            continue
        if any(isinstance(n, (exp.AggFunc, exp.Window)) for x in sel.expressions for n in x.walk()):
            continue
        own = _sources(sel)
        moved, kept = [], []
        for c in _conjuncts(sel.args.get("where")):
            inside = _defined_names(c)
            outside = [x for x in c.find_all(exp.Column) if x.table not in inside]
            if any(isinstance(n, exp.Query) for n in c.walk()) and all(
                x.table and x.table not in own for x in outside
            ):
                moved.append(c)
            else:
                kept.append(c)
        if not moved:
            continue
        sel.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
        tests: list[Node] = []
        for c in moved:
            bare = c
            while isinstance(bare, exp.Paren):
                bare = bare.this
            two_valued = isinstance(bare, exp.Exists) or (
                isinstance(bare, exp.Not) and isinstance(bare.this, exp.Exists)
            )
            tests.append(c if two_valued else exp.Coalesce(this=c, expressions=[exp.false()]))
        e.replace(exp.Paren(this=exp.and_(*tests, e.copy())))


def _wrap_for_domain(tree: Node) -> None:
    """Subquery expressions that ``_domain_correlation`` decorrelates as derived tables,
    written as a SELECT of their columns from them: a set operation that reads the query
    around it (``x IN (SELECT ... UNION SELECT ...)``, ``EXISTS (...)``; as a scalar
    subquery whether it reads it or not), a SELECT with LIMIT / OFFSET that reads it, a
    scalar subquery whose GROUP BY may leave several groups for an outer row (its value
    is then the one group's, NULL with none, an error with several), and a scalar
    subquery with its own ORDER BY, LIMIT or DISTINCT."""
    found = list(tree.find_all(exp.Union, exp.Intersect, exp.Except, exp.Select))
    # innermost first: a wrapped query's copy holds the wrapped queries inside it
    for n, q in reversed(list(enumerate(found))):
        up = q.parent
        if not (
            isinstance(up, exp.Subquery)
            and not isinstance(up.parent, (exp.From, exp.Join))
            and not up.alias
            or isinstance(up, (exp.Exists, exp.In))
        ):
            continue
        scalar = isinstance(up, exp.Subquery) and not isinstance(
            up.parent, (exp.In, exp.Exists, exp.Any, exp.All)
        )
        inside = _defined_names(q)
        reads = any(c.table and c.table not in inside for c in q.find_all(exp.Column))

        def reads_here(node: Node, inside: set[str] = inside) -> bool:
            """Whether ``node`` reads the outer row itself (not in a subquery of it)."""
            return any(
                isinstance(x, exp.Column) and x.table and x.table not in inside
                for x in _walk_no_subqueries(node)
            )

        if isinstance(q, exp.Select):
            limited = bool(q.args.get("limit") or q.args.get("offset"))
            if isinstance(up, exp.Exists) and not q.args.get("offset") and not q.args.get("group"):
                limited = False  # (EXISTS with a LIMIT is planned as EXISTS without it)
            grouped = (
                scalar
                and q.args.get("group") is not None
                and not _one_group_per_outer_row(q)
                and not any(
                    q.args["group"].args.get(k) for k in ("rollup", "cube", "grouping_sets")
                )
            )
            # (an IN / EXISTS subquery aggregated without GROUP BY: one row, whose
            # count-bug handling is the domain's)
            single = (
                isinstance(up, exp.Exists)
                and not (_is_scalar_agg(q) and not q.args.get("limit") and not q.args.get("offset"))
                or isinstance(up, exp.Subquery)
                and isinstance(up.parent, exp.In)
            ) and (
                q.args.get("group") is None
                and (
                    q.args.get("having") is not None
                    or any(isinstance(n, _AGGS) for x in q.expressions for n in x.walk())
                )
            )
            # (a scalar subquery's own ORDER BY, LIMIT or DISTINCT: as a derived table)
            shaped = scalar and any(q.args.get(k) for k in ("order", "limit", "offset", "distinct"))
            # (a value of a scalar or IN subquery that reads the outer row, beside its
            # aggregates or in them: the derived table computes it per outer value)
            valued = (
                (scalar or isinstance(up, exp.Subquery) and isinstance(up.parent, exp.In))
                and q.args.get("group") is None
                and any(
                    isinstance(c, exp.Column)
                    and c.table
                    and c.table not in inside
                    and not _in_outer_aggregate(c, q, inside)
                    for x in q.expressions
                    for c in _walk_no_subqueries(x)
                )
            )
            # (a condition with a subquery of its own that reads the outer row beside it:
            # in a derived table the outer values are its own columns)
            mixed = any(
                any(isinstance(n, exp.Query) for n in c.walk()) and reads_here(c)
                for c in _conjuncts(q.args.get("where"))
            )
            # (a HAVING that reads the outer row, or a grouped EXISTS / IN subquery that
            # reads it otherwise than by equalities of its WHERE: its groups are made per
            # outer value)
            having = q.args.get("having")
            judged = having is not None and reads_here(having)
            tested = q.args.get("group") is not None and (
                isinstance(up, exp.Exists)
                or isinstance(up, exp.Subquery)
                and isinstance(up.parent, exp.In)
            )
            # (a subquery of its own reads the query around ``q``, or one further out:
            # ``q`` carries the values it reads as columns of a domain)
            deep = any(
                c.table
                and c.table not in inside
                and _in_subquery_of(c, q)
                and not _in_outer_aggregate(c, q, inside)
                for c in q.find_all(exp.Column)
            )
            if not (
                reads
                and (limited or single or valued or mixed or judged or tested or deep)
                or grouped
                or shaped
            ):
                continue
        elif not (scalar or reads):
            continue
        out = _output_names(q)
        if (
            out is None
            and isinstance(up, exp.Exists)
            and isinstance(q, exp.Select)
            and not any(isinstance(a, exp.AggFunc) for x in q.expressions for a in x.walk())
        ):
            # (EXISTS tests whether there are rows, whatever their columns and order)
            q.set("expressions", [exp.alias_(exp.Literal.number(1), "_one", quoted=True)])
            q.set("order", None)
            out = ["_one"]
        if out is None:
            continue
        tag = f"_wrapq{n}"
        wrapped = exp.select(*(exp.column(o, table=tag, quoted=True) for o in out)).from_(
            exp.Subquery(this=q.copy(), alias=exp.TableAlias(this=_quoted(tag)))
        )
        q.replace(wrapped)


def _null_columns(p: Plan) -> frozenset[int]:
    """The columns of ``p`` that are a NULL constant in every row (a projection of NULL, or
    VALUES with NULL throughout)."""
    if isinstance(p, Project):
        return frozenset(i for i, e in enumerate(p.exprs) if isinstance(e, Lit) and e.value is None)
    if isinstance(p, Values) and p.rows:
        return frozenset(i for i in range(len(p.fields)) if all(r[i] is None for r in p.rows))
    return frozenset()


def _unnest_from_join(sel: Node) -> None:
    """``FROM (a JOIN b ON ...) JOIN c ...``: a join in parentheses, without an alias, at the
    start of FROM is the same as its joins written out first (joins are taken left to right),
    so its tables stay visible by their names."""
    from_ = sel.args.get("from_") or sel.args.get("from")
    while from_ is not None:
        inner = from_.this
        if not (
            isinstance(inner, exp.Subquery)
            and not inner.alias
            and isinstance(inner.this, exp.Table)
            and inner.this.args.get("joins")
        ):
            return
        table = inner.this
        joins = list(table.args["joins"])
        table.set("joins", None)
        from_.set("this", table)
        sel.set("joins", joins + list(sel.args.get("joins") or []))


def common_type(a: SqlType, b: SqlType, what: str) -> SqlType:
    """The type both sides of a comparison / branch / set operation are cast to."""
    if a == b:
        return a
    if a.kind == "null":
        return b
    if b.kind == "null":
        return a
    if a.numeric and b.numeric:
        if "double" in (a.kind, b.kind):
            return DOUBLE
        if "decimal" in (a.kind, b.kind):
            da, db = _as_decimal(a), _as_decimal(b)
            s = max(da.scale, db.scale)
            ip = max(da.precision - da.scale, db.precision - db.scale)
            if ip + s <= 38:
                return decimal_type(max(ip + s, 1), s)
            # past 38 digits the integer digits are kept and the scale gives way, down to 0
            # (Spark's least common decimal; arithmetic's rule keeps 6 places instead)
            return decimal_type(38, max(0, 38 - ip))
        return a if a.bits >= b.bits else b
    if {a.kind, b.kind} == {"date", "timestamp"}:
        return TIMESTAMP
    if a.kind == "boolean" and b.numeric:
        return b
    if b.kind == "boolean" and a.numeric:
        return a
    raise SQLError(f"type mismatch in {what}: {a} and {b}")


def spark_text_type(a: SqlType, b: SqlType) -> SqlType | None:
    """The type Spark (4, ANSI mode) casts text to beside a value of type ``b`` where
    both must have one type (arithmetic, CASE branches, COALESCE, UNION): BIGINT beside
    an integer, DOUBLE beside a DOUBLE, FLOAT or DECIMAL, ``b`` itself beside a BOOLEAN,
    DATE or TIMESTAMP; None unless ``a`` is text and ``b`` is not."""
    if a.kind != "string" or b.kind in ("string", "null"):
        return None
    if b.kind == "int":
        return BIGINT
    if b.kind in ("double", "decimal"):
        return DOUBLE
    if b.kind in ("boolean", "date", "timestamp"):
        return b
    return None


# -- plan output ---------------------------------------------------------------------------


@dataclass
class Planned:
    """A planned query: its plan, how many leading fields are its columns (the rest are
    hidden sort keys), and the order ``rows()`` returns."""

    plan: Plan
    visible: int
    order: tuple[SortKey, ...] = ()


# -- scopes --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outer(Expr):
    """A reference to field ``index`` of the enclosing query's relation (correlation)."""

    index: int
    type: SqlType
    nullable: bool = True
    name: str = ""


@dataclass
class AggContext:
    keys: dict[str, int]  # group expression SQL -> output field
    aggs: dict[tuple[Any, ...], int]
    #: aggregate SQL -> output field, for aggregates with a subquery in their argument
    #: (bound once: binding a subquery again would join it to the input again)
    by_sql: dict[str, int] = field(default_factory=dict)


@dataclass
class Scope:
    """Names visible in one query level over its current relation ``plan``."""

    outer: Scope | None
    plan: Plan | None = None
    sources: list[tuple[str, int, tuple[Field, ...]]] = field(default_factory=list)
    agg: AggContext | None = None
    used_outer: bool = False
    in_loop: bool = False
    #: the group key expressions over the relation before aggregation
    pre_keys: list[Expr] = field(default_factory=list)
    #: window function (its SQL) -> the field holding its value
    windows: dict[str, int] = field(default_factory=dict)
    #: of a subquery's correlations ``(inner, outer)``: the positions of those that match
    #: NULL with NULL (``inner <=> outer``)
    safe_pairs: set[int] = field(default_factory=set)

    @property
    def fields(self) -> tuple[Field, ...]:
        return self.plan.fields if self.plan is not None else ()

    def find(self, table: str, name: str) -> tuple[int, Field] | None:
        hits = []
        for alias, offset, fields in self.sources:
            if table and alias != table:
                continue
            for i, f in enumerate(fields):
                if f.name.lower() == name:
                    hits.append((offset + i, f))
        if len(hits) > 1:
            raise SQLError(f"column '{name}' is ambiguous")
        return hits[0] if hits else None


def _name(node: Node | str | None) -> str:
    if node is None:
        return ""
    if isinstance(node, str):
        return node.lower()
    return node.name.lower()


def _outer_aggregates(q: Node, nodes: list[Node]) -> list[Node]:
    """The aggregates inside subqueries of ``nodes`` (parts of SELECT ``q``) that aggregate
    ``q``'s rows: every column they read is one of ``q``'s sources' (none of the
    subquery's own), and the subquery is directly inside ``q``."""
    own = _sources(q)
    out: list[Node] = []
    for node in nodes:
        for a in node.walk():
            if not isinstance(a, _AGGS) or _window_head(a):
                continue
            sub = a.find_ancestor(exp.Select)
            if sub is None or sub is q or sub.parent is None:
                continue
            if sub.parent.find_ancestor(exp.Select) is not q:
                continue
            cols = list(a.find_all(exp.Column))
            inner = _sources(sub)
            if cols and all(c.table in own and c.table not in inner for c in cols):
                out.append(a)
    return out


def _window_head(n: Node) -> bool:
    """Whether ``n`` is the function a window computes (``sum`` in ``sum(x) OVER (...)``)."""
    p = n.parent
    if isinstance(p, (exp.IgnoreNulls, exp.RespectNulls)):
        n, p = p, p.parent
    return isinstance(p, exp.Window) and p.this is n


def _walk_no_subqueries(node: Node) -> Any:
    """Nodes of ``node`` without descending into subqueries."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for child in n.iter_expressions():
            if (
                isinstance(child, (exp.Select, exp.Subquery, exp.Union, exp.Intersect, exp.Except))
                and child is not node
            ):
                continue
            stack.append(child)


#: aggregates of the values of a group in order or of their powers, not kept over an
#: ordered window or a frame
_WHOLE_GROUP_AGGS = (
    _Percentile,
    _TrySum,
    _TryAvg,
    _OrderedMode,
    exp.ArgMax,
    exp.ArgMin,
    exp.Mode,
    exp.Skewness,
    exp.Kurtosis,
)

_AGGS = (
    exp.Count,
    exp.Sum,
    exp.Avg,
    exp.Min,
    exp.Max,
    exp.Stddev,
    exp.StddevSamp,
    exp.StddevPop,
    exp.Variance,
    exp.VariancePop,
    *_WHOLE_GROUP_AGGS,
    exp.BitwiseAndAgg,
    exp.BitwiseOrAgg,
    exp.BitwiseXorAgg,
    exp.GroupConcat,
    exp.Corr,
    exp.CovarPop,
    exp.CovarSamp,
    exp.RegrSlope,
    exp.RegrIntercept,
    exp.RegrR2,
    exp.RegrSxx,
    exp.RegrSyy,
    exp.RegrSxy,
)

#: the bitwise folds of an integer column by sqlglot's class
_BIT_FOLD_NODES: dict[type, str] = {
    exp.BitwiseAndAgg: "bit_and",
    exp.BitwiseOrAgg: "bit_or",
    exp.BitwiseXorAgg: "bit_xor",
}

#: the aggregates of two columns' joint spread by sqlglot's class (``PAIR_FUNCS``)
_PAIR_NODES = {
    exp.Corr: "corr",
    exp.CovarPop: "covar_pop",
    exp.CovarSamp: "covar_samp",
    exp.RegrSlope: "regr_slope",
    exp.RegrIntercept: "regr_intercept",
    exp.RegrR2: "regr_r2",
    exp.RegrSxx: "regr_sxx",
    exp.RegrSyy: "regr_syy",
    exp.RegrSxy: "regr_sxy",
}

#: the spread aggregates by sqlglot's class name: ``stddev`` and ``variance`` are the sample
#: forms, as in Spark
_SPREAD = {
    "stddev": "stddev_samp",
    "stddevsamp": "stddev_samp",
    "stddevpop": "stddev_pop",
    "variance": "var_samp",
    "variancepop": "var_pop",
}


def _conjuncts(node: Node | None) -> list[Node]:
    if node is None:
        return []
    if isinstance(node, (exp.Where, exp.Having)):
        node = node.this
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    if isinstance(node, exp.Or):
        return _factor_or(node)
    return [node]


def _disjuncts(node: Node) -> list[Node]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Or):
        return _disjuncts(node.left) + _disjuncts(node.right)
    return [node]


def _factor_or(node: Node) -> list[Node]:
    """``(A AND B) OR (A AND C)`` as ``[A, B OR C]``: a condition common to every branch
    of an OR holds on its own (so a join key inside each branch becomes a join key)."""
    branches = [_conjuncts(d) for d in _disjuncts(node)]
    keys = [{c.sql(): c for c in b} for b in branches]
    common = [k for k in keys[0] if all(k in other for other in keys[1:])]
    if not common:
        return [node]
    rest = []
    for b in branches:
        left = [c for c in b if c.sql() not in common]
        if not left:
            return [keys[0][k] for k in common]  # one branch is just the common part
        rest.append(left[0] if len(left) == 1 else exp.and_(*left))
    return [keys[0][k] for k in common] + [exp.or_(*rest)]


def _uses(e: Expr) -> set[int]:
    """Fields of the input an expression reads."""
    out: set[int] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Col):
            out.add(x.index)
        stack.extend(x.children())
    return out


def _has_outer(e: Expr) -> bool:
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Outer):
            return True
        stack.extend(x.children())
    return False


def _remap(
    e: Expr,
    mapping: dict[int, int],
    outer_map: dict[int, int] | None = None,
    fields: tuple[Field, ...] | None = None,
) -> Expr:
    """``e`` with field ``i`` read from ``mapping[i]`` (and outer refs from ``outer_map``)."""
    if isinstance(e, Col):
        j = mapping[e.index]
        return Col(j, e.type, e.nullable, e.name)
    if isinstance(e, Outer):
        if outer_map is None:
            raise UnsupportedSQL("a correlated reference in this position")
        return Col(outer_map[e.index], e.type, e.nullable, e.name)
    if isinstance(e, Call):
        return Call(
            e.op, tuple(_remap(a, mapping, outer_map) for a in e.args), e.type, e.nullable, e.extra
        )
    return e


def _shift(e: Expr, by: int) -> Expr:
    if by == 0:
        return e
    if isinstance(e, Col):
        return Col(e.index + by, e.type, e.nullable, e.name)
    if isinstance(e, Call):
        return Call(e.op, tuple(_shift(a, by) for a in e.args), e.type, e.nullable, e.extra)
    return e


def _split_outer(e: Expr) -> tuple[Expr, Expr] | None:
    """``inner = outer`` or ``inner <=> outer`` (either way round) as ``(inner, outer)``,
    else None."""
    if isinstance(e, Call) and e.op in ("eq", "nseq"):
        a, b = e.args
        ao, bo = _has_outer(a), _has_outer(b)
        au, bu = bool(_uses(a)), bool(_uses(b))
        if ao and not au and bu and not bo:
            return b, a
        if bo and not bu and au and not ao:
            return a, b
    return None


def _and_all(preds: list[Expr]) -> Expr | None:
    if not preds:
        return None
    if len(preds) == 1:
        return preds[0]
    return Call("and", tuple(preds), BOOLEAN, any(p.nullable for p in preds))


def _not_null(es: list[Expr]) -> Expr | None:
    preds: list[Expr] = [Call("is_not_null", (e,), BOOLEAN, False) for e in es if e.nullable]
    return _and_all(preds)


def _col(i: int, f: Field) -> Col:
    return Col(i, f.type, f.nullable, f.name)


def _scan_rows(
    p: Plan, cols: list[int], narrowed: bool
) -> tuple[Scan, list[Expr], list[int]] | None:
    """The table scan that ``p``'s fields ``cols`` come from: the scan, conditions every
    row of ``p`` meets (over the scan's fields) and the scan's fields giving ``cols``.

    ``narrowed=False``: ``p`` is exactly the scan's rows meeting those conditions (filters
    over the scan). ``narrowed=True``: each row of ``p`` carries at ``cols`` the values of
    one such row, and ``p`` may hold fewer (semi and anti joins, or the columns of one side
    of an inner join, on the way down; conditions above a join or projection are left out,
    which only weakens what is claimed). None when neither shape is seen."""
    conds: list[Expr] = []
    while True:
        if isinstance(p, Filter):
            conds.extend(conjuncts(p.predicate))
            p = p.input
        elif isinstance(p, Scan):
            return p, conds, cols
        elif not narrowed:
            return None
        elif isinstance(p, SemiJoin):
            p = p.left
        elif isinstance(p, Join) and p.kind == "inner":
            nl = len(p.left.fields)
            if all(c < nl for c in cols):
                p = p.left
            elif all(c >= nl for c in cols):
                p, cols = p.right, [c - nl for c in cols]
            else:
                return None
            conds = []
        elif isinstance(p, Project) and all(isinstance(p.exprs[c], Col) for c in cols):
            cols = [p.exprs[c].index for c in cols]  # type: ignore[attr-defined]
            p, conds = p.input, []
        else:
            return None


def _rows_among(outer: Plan, outer_cols: list[int], inner: Plan, inner_cols: list[int]) -> bool:
    """Whether every row of ``outer`` holds at ``outer_cols`` the values some row of
    ``inner`` holds at ``inner_cols``, as the plans show: both read one table, ``inner``
    keeps its rows meeting some conditions and ``outer`` rows meeting those and more (TPC-H
    Q21's late line items ``l1`` among all line items ``l2``)."""
    o = _scan_rows(outer, outer_cols, narrowed=True)
    i = _scan_rows(inner, inner_cols, narrowed=False)
    if o is None or i is None:
        return False
    (oscan, oconds, ocols), (iscan, iconds, icols) = o, i
    return (
        (oscan.table, oscan.columns, oscan.prefilter)
        == (iscan.table, iscan.columns, iscan.prefilter)
        and ocols == icols
        and all(c in oconds for c in iconds)
    )


def _project_all(p: Plan) -> list[Expr]:
    return [_col(i, f) for i, f in enumerate(p.fields)]


TRUE = Lit(True, BOOLEAN)


def _qualify_as_where(node: Node) -> Node:
    """``SELECT .. QUALIFY c``: the window functions ``c`` reads computed in a derived table
    and ``c`` a WHERE over it (sqlglot's rewrite); a ``*`` leaves out the columns added."""
    if not (isinstance(node, exp.Select) and node.args.get("qualify")):
        return node
    star = node.is_star
    before = set(node.named_selects)
    # DISTINCT, ORDER BY and LIMIT come after QUALIFY: they move to the outer query
    after = {k: node.args.get(k) for k in ("distinct", "order", "limit", "offset")}
    for k in after:
        node.set(k, None)
    out = eliminate_qualify(node)
    if not isinstance(out, exp.Select):
        return out
    if star:
        inner = out.args["from_"].this.this
        added = [n for n in inner.named_selects if n not in before]
        if added:
            out.set("expressions", [exp.Star(except_=[exp.column(a) for a in added])])
    order = after["order"]
    if order is not None:
        for col in order.find_all(exp.Column):
            if not star and col.name not in before:
                raise UnsupportedSQL("ORDER BY a column that is not selected, with QUALIFY")
            col.set("table", None)
    for k, v in after.items():
        if v is not None:
            out.set(k, v)
    return out


class Planner:
    """Plans queries over a catalog of tables (name -> fields) in one dialect."""

    def __init__(
        self,
        catalog: dict[str, tuple[Field, ...]],
        dialect: str = "spark",
        views: dict[str, Plan] | None = None,
        keys: dict[str, list[frozenset[int]]] | None = None,
    ) -> None:
        if dialect not in DIALECTS:
            raise SQLError(f"unknown dialect {dialect!r}: use 'spark' or 'sqlite'")
        self.catalog = catalog
        self.dialect = dialect
        #: views defined earlier, usable as relations (their plans are inlined)
        self.views = views or {}
        #: declared unique column sets of tables (join order only, never answers)
        self.keys = keys or {}
        self.ctes: list[dict[str, Plan]] = [{}]
        self._recursive: dict[str, RecRef] = {}
        #: outer columns ``(table, column)`` that could not be carried into a subquery's
        #: derived table, and what stood in the way (for the error naming it)
        self._why: dict[tuple[str, str], str] = {}

    # -- entry points ----------------------------------------------------------------------
    def qualify(self, tree: Node) -> Node:
        rels = {**{n: p.fields for n, p in self.views.items()}, **self.catalog}
        schema: dict[str, object] = {
            name: {f.name: str(f.type) if f.type.kind != "null" else "INT" for f in fields}
            for name, fields in rels.items()
        }
        try:
            return qualify(
                tree,
                schema=schema,
                dialect=DIALECTS[self.dialect],
                quote_identifiers=False,
                validate_qualify_columns=True,
            )
        except OptimizeError as e:
            msg = str(e)
            raise SQLError(f"{msg.split('. Line')[0]} (unknown or ambiguous column)") from e
        except SqlglotError as e:
            raise SQLError(str(e)) from e

    def plan_sql(self, sql: str | Node) -> Planned:
        tree = parse_statements(sql, self.dialect)[0] if isinstance(sql, str) else sql
        if not isinstance(tree, exp.Query):
            raise UnsupportedSQL(f"expected a query, got {type(tree).__name__.upper()}")
        if tree.find(exp.Qualify) is not None:
            tree = tree.transform(_qualify_as_where)
        pivot = tree.find(exp.Pivot)
        if pivot is not None:
            # (named before qualification, which would misread its columns)
            raise UnsupportedSQL(f"{'UNPIVOT' if pivot.args.get('unpivot') else 'PIVOT'}")
        if self.dialect == "spark":
            _ranges_as_values(tree)
        self._check_tables(tree)
        for vals in list(tree.find_all(exp.Values)):
            # VALUES in FROM without names: Spark names its columns col1, col2, ...
            if (
                isinstance(vals.parent, (exp.From, exp.Join))
                and not vals.args.get("alias")
                and vals.expressions
                and isinstance(vals.expressions[0], exp.Tuple)
            ):
                width = len(vals.expressions[0].expressions)
                stem = "column" if self.dialect == "sqlite" else "col"
                vals.set(
                    "alias",
                    exp.TableAlias(
                        this=exp.to_identifier("_values"),
                        columns=[exp.to_identifier(f"{stem}{i + 1}") for i in range(width)],
                    ),
                )
        for sel in list(tree.find_all(exp.Select)):
            _semi_joins_as_exists(sel)
            _tuple_in_as_exists(sel)
        for sel in tree.find_all(exp.Select):
            _unnest_from_join(sel)
            items = list(sel.expressions)
            for i, item in enumerate(items):
                if isinstance(item, exp.Subquery) and not item.alias:
                    items[i] = exp.Alias(this=item, alias=exp.to_identifier(f"_col_{i}"))
            sel.set("expressions", items)
        if self.dialect == "sqlite":
            # SQLite's total(x) is sum(x) as a REAL that is 0.0, not NULL, over no values
            for node in list(tree.find_all(exp.Anonymous)):
                if node.name.lower() == "total" and len(node.expressions) == 1:
                    inner = node.expressions[0].copy()
                    distinct = isinstance(inner, exp.Distinct)
                    if distinct:
                        inner = inner.expressions[0]
                    arg: Node = exp.Cast(this=inner, to=exp.DataType.build("DOUBLE"))
                    if distinct:
                        arg = exp.Distinct(expressions=[arg])
                    node.replace(
                        exp.Coalesce(
                            this=exp.Sum(this=arg), expressions=[exp.Literal.number("0.0")]
                        )
                    )
            # ``x IN t`` (a table of one column) is ``x IN (SELECT * FROM t)``
            for in_node in list(tree.find_all(exp.In)):
                f = in_node.args.get("field")
                if isinstance(f, exp.Column) and not f.table:
                    in_node.set("field", None)
                    in_node.set("query", exp.Subquery(this=exp.select("*").from_(f.name)))
        names = _display_names(tree, self.dialect)
        _inline_named_windows(tree)
        _filters_as_cases(tree)
        _row_comparisons(tree, self.dialect == "spark")
        _inline_inner_ctes(tree)
        _mark_using_chains(tree)
        tree = self.qualify(tree)
        _coalesce_using_chains(tree)
        _order_by_all(
            tree,
            {**{n: p.fields for n, p in self.views.items()}, **self.catalog},
            self.dialect == "spark",
        )
        _qualify_outer_in_having(
            tree, {**{n: p.fields for n, p in self.views.items()}, **self.catalog}
        )
        tree = _expand_grouping_sets(tree, self.dialect == "spark")
        _partition_aggregates_as_joins(tree)
        _inline_fromless_scalars(tree)
        for sel in list(tree.find_all(exp.Select)):
            _outer_join_tests_as_marks(sel)
        _simplify_tests(tree)
        _hoist_outer_tests(tree)
        _wrap_for_domain(tree)
        tags = iter(range(1_000_000))
        # until nothing changes: each pass reaches the subqueries inside the ones it
        # rewrote (a reference n levels down is carried up one level a pass)
        self._why = {}
        for _ in range(_MOST_PASSES):
            changed = False
            for sub in list(tree.find_all(exp.Select)):
                if _is_subquery_expression(sub) and sub.root() is tree:
                    for d in _derived_tables(sub):
                        changed |= _lift_correlation(sub, d)
                        changed |= _domain_correlation(sub, d, f"_dm{next(tags)}", self._why)
            if not changed:
                break
        planned = self.plan_query(tree, None, top=True)
        if names is not None and len(names) == planned.visible:
            p = planned.plan
            fields = (
                tuple(
                    Field(n, f.type, f.nullable, f.source)
                    for n, f in zip(names, p.fields, strict=False)
                )
                + p.fields[len(names) :]
            )
            planned.plan = _with_fields(p, fields)
        return planned

    def _check_tables(self, tree: Node) -> None:
        ctes = {_name(c.args.get("alias")) for c in tree.find_all(exp.CTE)}
        for t in tree.find_all(exp.Table):
            if isinstance(t.this, exp.Func):
                raise UnsupportedSQL(f"table-valued function {t.this.sql(self.dialect)}")
            name = _name(t.this)
            if t.args.get("db") is not None:
                name = _name(t.this)
            if name not in self.catalog and name not in ctes and name not in self.views:
                raise SQLError(f"unknown table '{t.name}'")

    # -- queries ---------------------------------------------------------------------------
    def plan_query(
        self, q: Node, outer: Scope | None, top: bool = False, in_loop: bool = False
    ) -> Planned:
        """Plans a SELECT, a set operation or a parenthesized query."""
        if isinstance(q, exp.Subquery):
            return self.plan_query(q.this, outer, top, in_loop)
        with_ = q.args.get("with_") or q.args.get("with")
        pushed = False
        if with_ is not None:
            self.ctes.append({})
            pushed = True
            for cte in with_.expressions:
                self._plan_cte(cte, with_.args.get("recursive", False), outer, in_loop)
        try:
            if isinstance(q, exp.Select):
                return self._plan_select(q, outer, top, in_loop)
            if isinstance(q, (exp.Union, exp.Intersect, exp.Except)):
                return self._plan_setop(q, outer, top, in_loop)
            if isinstance(q, exp.Values):
                return Planned(self._plan_values(q), len(self._plan_values(q).fields))
            raise UnsupportedSQL(f"{type(q).__name__.upper()} as a query")
        finally:
            if pushed:
                self.ctes.pop()

    def _lookup_cte(self, name: str) -> Plan | None:
        if name in self._recursive:
            return self._recursive[name]
        for level in reversed(self.ctes):
            if name in level:
                return level[name]
        return None

    def _plan_cte(self, cte: Node, recursive: bool, outer: Scope | None, in_loop: bool) -> None:
        name = _name(cte.args.get("alias"))
        alias_cols = [_name(c) for c in (cte.args["alias"].columns or [])]
        body = cte.this
        refers = recursive and any(_name(t.this) == name for t in body.find_all(exp.Table))
        if not refers:
            planned = self.plan_query(body, None, in_loop=in_loop)
            plan = self._visible(planned)
            if alias_cols:
                plan = self._rename(plan, alias_cols)
            self.ctes[-1][name] = plan
            return
        if not isinstance(body, exp.Union):
            raise UnsupportedSQL(f"recursive CTE '{name}' must be 'base UNION [ALL] step'")
        base_q, step_q = body.left, body.right
        base = self._visible(self.plan_query(base_q, None, in_loop=in_loop))
        if alias_cols:
            base = self._rename(base, alias_cols)
        # the recursive relation's fields: nullable, as the base's
        fields = tuple(Field(f.name, f.type, True) for f in base.fields)
        ref = RecRef(name, fields)
        self._recursive[name] = ref
        try:
            step = self._visible(self.plan_query(step_q, None, in_loop=True))
        finally:
            del self._recursive[name]
        if len(step.fields) != len(fields):
            raise SQLError(
                f"recursive CTE '{name}': the recursive part has "
                f"{len(step.fields)} columns, the base {len(fields)}"
            )
        exprs = []
        for i, (fs, fb) in enumerate(zip(step.fields, fields, strict=True)):
            exprs.append(self._cast(_col(i, fs), fb.type))
        step = Project(step, tuple(exprs), fields)
        base = Project(base, tuple(_col(i, f) for i, f in enumerate(base.fields)), fields)
        distinct = bool(body.args.get("distinct"))
        self.ctes[-1][name] = Recursive(name, base, step, distinct, fields)

    def _visible(self, planned: Planned) -> Plan:
        p = planned.plan
        if planned.visible == len(p.fields):
            return p
        return Project(
            p,
            tuple(_col(i, f) for i, f in enumerate(p.fields[: planned.visible])),
            p.fields[: planned.visible],
        )

    def _rename(self, plan: Plan, names: list[str]) -> Plan:
        if len(names) != len(plan.fields):
            raise SQLError(f"{len(names)} column names given for {len(plan.fields)} columns")
        fields = tuple(
            Field(n, f.type, f.nullable) for n, f in zip(names, plan.fields, strict=True)
        )
        return Project(plan, tuple(_project_all(plan)), fields)

    def _plan_values(self, v: Node) -> Plan:
        rows = []
        types: list[SqlType] | None = None
        for tup in v.expressions:
            vals = []
            ts = []
            for e in tup.expressions:
                lit = self._const(e)
                vals.append(lit.value)
                ts.append(lit.type)
            if types is None:
                types = ts
            else:
                if len(ts) != len(types):
                    raise SQLError("VALUES rows of different widths")
                types = [common_type(a, b, "VALUES") for a, b in zip(types, ts, strict=True)]
            rows.append(tuple(vals))
        assert types is not None
        alias = v.args.get("alias")
        names = (
            [_name(c) for c in alias.columns]
            if alias is not None and alias.columns
            else [f"col{i + 1}" for i in range(len(types))]
        )
        fields = tuple(
            Field(n, t if t.kind != "null" else INT, True)
            for n, t in zip(names, types, strict=True)
        )
        out_rows = tuple(
            tuple(_convert_const(x, t) for x, t in zip(r, fields, strict=True)) for r in rows
        )
        return Values(out_rows, fields)

    def _const(self, e: Node) -> Lit:
        bound = self.bind(e, Scope(None))
        if not isinstance(bound, Lit):
            folded = _fold(bound, self)
            if folded is None:
                raise UnsupportedSQL(f"VALUES entries must be constants: {e.sql()}")
            return folded
        return bound

    # -- set operations --------------------------------------------------------------------
    def _plan_setop(self, q: Node, outer: Scope | None, top: bool, in_loop: bool) -> Planned:
        left = self._visible(self.plan_query(q.left, outer, in_loop=in_loop))
        right = self._visible(self.plan_query(q.right, outer, in_loop=in_loop))
        if len(left.fields) != len(right.fields):
            raise SQLError(
                f"{type(q).__name__.upper()} of {len(left.fields)} and {len(right.fields)} columns"
            )
        # a column that is a bare NULL has no type of its own: the other side's is taken
        ln, rn = _null_columns(left), _null_columns(right)
        types = [
            self._one_type(
                NULLTYPE if i in ln else a.type,
                NULLTYPE if i in rn else b.type,
                type(q).__name__.upper(),
            )
            for i, (a, b) in enumerate(zip(left.fields, right.fields, strict=True))
        ]
        fields = tuple(
            Field(a.name, t if t.kind != "null" else INT, a.nullable or b.nullable)
            for a, b, t in zip(left.fields, right.fields, types, strict=True)
        )
        left = self._coerce(left, fields, ln)
        right = self._coerce(right, fields, rn)
        distinct = bool(q.args.get("distinct", True))
        plan: Plan
        if isinstance(q, exp.Union):
            plan = UnionAll((left, right), fields)
            if distinct:
                plan = Distinct(plan)
        else:
            kind = "intersect" if isinstance(q, exp.Intersect) else "except"
            plan = SetOp(kind, not distinct, left, right, fields)
        return self._order_limit(q, plan, len(fields), None, outer)

    def _coerce(
        self, p: Plan, fields: tuple[Field, ...], nulls: frozenset[int] = frozenset()
    ) -> Plan:
        """``p`` with the types and nullability of ``fields`` (so the parts of a set
        operation hold records of one shape); its columns ``nulls`` are bare NULLs."""
        if all(
            a.type == b.type and a.nullable == b.nullable
            for a, b in zip(p.fields, fields, strict=True)
        ):
            return p
        exprs = tuple(
            Lit(None, g.type) if i in nulls else self._cast(_col(i, f), g.type)
            for i, (f, g) in enumerate(zip(p.fields, fields, strict=True))
        )
        return Project(
            p,
            exprs,
            tuple(Field(f.name, g.type, g.nullable) for f, g in zip(p.fields, fields, strict=True)),
        )

    # -- SELECT ----------------------------------------------------------------------------
    def _plan_select(self, q: Node, outer: Scope | None, top: bool, in_loop: bool) -> Planned:
        for bad, what in (
            (q.args.get("windows"), "WINDOW"),
            (q.args.get("qualify"), "QUALIFY"),
            (q.args.get("laterals"), "LATERAL VIEW"),
            (q.args.get("pivots"), "PIVOT"),
        ):
            if bad:
                raise UnsupportedSQL(f"{what} is not supported")
        scope = Scope(outer, in_loop=in_loop)
        conds = _conjuncts(q.args.get("where"))
        self._plan_from(q, scope, conds)
        # remaining WHERE conjuncts (those not used while joining)
        for c in list(conds):
            self._apply_predicate(c, scope)
        group = q.args.get("group")
        having = q.args.get("having")
        selects = q.expressions
        order = q.args.get("order")
        if self.dialect == "sqlite":
            self._bare_columns(q, scope)
        agg_nodes = []
        for node in [
            *selects,
            *([having.this] if having is not None else []),
            *(order.expressions if order is not None else []),
        ]:
            for n in _walk_no_subqueries(node):
                if _window_head(n):
                    continue  # (the function of a window, not a group's aggregate)
                if isinstance(n, _AGGS):
                    agg_nodes.append(n)
                elif isinstance(n, exp.AggFunc):
                    raise UnsupportedSQL(f"aggregate function {n.sql(self.dialect)}")
        outer_aggs = _outer_aggregates(
            q, [*selects, *([having.this] if having is not None else [])]
        )
        agg_nodes += outer_aggs
        if group is not None or agg_nodes or having is not None:
            self._plan_aggregate(q, scope, agg_nodes, {id(n) for n in outer_aggs})
            if having is not None:
                self._apply_predicate(having, scope)
        windows = [
            n
            for node in [*selects, *(order.expressions if order is not None else [])]
            for n in _walk_no_subqueries(node)
            if isinstance(n, exp.Window)
        ]
        if windows:
            self._plan_windows(windows, scope)
        # SELECT list
        exprs: list[Expr] = []
        fields: list[Field] = []
        for s in selects:
            if isinstance(s, exp.Star) or (
                isinstance(s, exp.Column) and isinstance(s.this, exp.Star)
            ):
                # left to us only over a source with two columns of one name (a derived
                # table ``SELECT * FROM a JOIN b ON ...``); its columns, in order
                for e, f in self._star_columns(s, scope):
                    exprs.append(e)
                    fields.append(f)
                continue
            name = s.alias_or_name if isinstance(s, exp.Alias) else s.alias_or_name
            node = s.this if isinstance(s, exp.Alias) else s
            e = self.bind(node, scope)
            exprs.append(e)
            fields.append(
                Field(
                    _name(name) or f"_col{len(fields)}",
                    e.type if e.type.kind != "null" else INT,
                    e.nullable,
                )
            )
        assert scope.plan is not None
        plan: Plan = Project(scope.plan, tuple(exprs), tuple(fields))
        visible = len(fields)
        distinct = q.args.get("distinct")
        if distinct is not None:
            if distinct.args.get("on"):
                raise UnsupportedSQL("DISTINCT ON is not supported")
            plan = Distinct(plan)
        return self._order_limit(
            q, plan, visible, scope if distinct is None else None, outer, pre_project=(scope, exprs)
        )

    def _star_columns(self, star: Node, scope: Scope) -> list[tuple[Expr, Field]]:
        table = _name(star.args.get("table")) if isinstance(star, exp.Column) else ""
        plain = not any(
            star.args.get(a) for a in ("except", "except_", "replace", "rename", "ilike")
        )
        if scope.agg is not None or not plain or not scope.sources:
            raise SQLError("'*' could not be expanded")
        out: list[tuple[Expr, Field]] = []
        for alias, offset, fs in scope.sources:
            if not table or alias == table:
                out.extend((_col(offset + i, f), f) for i, f in enumerate(fs))
        if not out:
            raise SQLError(f"unknown table '{table}' in '{table}.*'")
        return out

    def _order_limit(
        self,
        q: Node,
        plan: Plan,
        visible: int,
        scope: Scope | None,
        outer: Scope | None,
        pre_project: tuple[Scope, list[Expr]] | None = None,
    ) -> Planned:
        order = q.args.get("order")
        limit = q.args.get("limit")
        offset = q.args.get("offset")
        keys: list[SortKey] = []
        if order is not None:
            extra: list[Expr] = []
            names = [f.name for f in plan.fields]
            for o in order.expressions:
                node = o.this
                idx = None
                if isinstance(node, exp.Column) and not node.table and _name(node) in names:
                    idx = names.index(_name(node))
                elif isinstance(node, exp.Literal) and not node.is_string:
                    k = int(node.this)
                    if not 1 <= k <= visible:
                        raise SQLError(f"ORDER BY position {k} is not in the select list")
                    idx = k - 1
                else:
                    if pre_project is None or not isinstance(plan, Project):
                        raise UnsupportedSQL(
                            f"ORDER BY {node.sql()} must name a column of the result here"
                        )
                    sc, _ = pre_project
                    e = self.bind(node, sc)
                    for j, ex in enumerate(plan.exprs):
                        if ex == e:
                            idx = j
                            break
                    else:
                        idx = len(plan.fields) + len(extra)
                        extra.append(e)
                desc = bool(o.args.get("desc"))
                nf = o.args.get("nulls_first")
                nulls_first = bool(nf) if nf is not None else (not desc)
                keys.append(SortKey(idx, desc, nulls_first))
            if extra:
                assert isinstance(plan, Project)
                plan = Project(
                    plan.input,
                    plan.exprs + tuple(extra),
                    plan.fields
                    + tuple(
                        Field(f"_sort{i}", e.type if e.type.kind != "null" else INT, e.nullable)
                        for i, e in enumerate(extra)
                    ),
                )
        lim = self._int_const(limit.expression if limit is not None else None, "LIMIT")
        off = self._int_const(offset.expression if offset is not None else None, "OFFSET")
        if lim is not None or off:
            plan = TopK(plan, tuple(keys), lim, off or 0)
        return Planned(plan, visible, tuple(keys))

    def _int_const(self, node: Node | None, what: str) -> int | None:
        if node is None:
            return None
        lit = _fold(self.bind(node, Scope(None)), self)
        if lit is None or lit.value is None or not isinstance(lit.value, int) or lit.value < 0:
            raise UnsupportedSQL(f"{what} must be a non-negative integer constant")
        return int(lit.value)

    # -- FROM ------------------------------------------------------------------------------
    def _source(self, node: Node, scope: Scope) -> tuple[str, Plan]:
        alias = _name(node.args.get("alias")) if node.args.get("alias") else ""
        if isinstance(node, exp.Table):
            if node.args.get("sample") is not None:
                raise UnsupportedSQL("TABLESAMPLE: a sampled view cannot be kept exact")
            name = _name(node.this)
            cte = self._lookup_cte(name)
            if cte is not None:
                plan: Plan = cte
            elif name in self.views and name not in self.catalog:
                plan = self.views[name]
            elif name in self.catalog:
                plan = Scan(name, self.catalog[name])
            else:
                raise SQLError(f"unknown table '{node.name}'")
            cols = node.args["alias"].columns if node.args.get("alias") else None
            if cols:
                plan = self._rename(plan, [_name(c) for c in cols])
            return alias or name, plan
        if isinstance(node, exp.Subquery):
            planned = self.plan_query(node.this, None, in_loop=scope.in_loop)
            plan = self._visible(planned)
            cols = node.args["alias"].columns if node.args.get("alias") else None
            if cols:
                plan = self._rename(plan, [_name(c) for c in cols])
            return alias, plan
        if isinstance(node, exp.Values):
            return alias, self._plan_values(node)
        if isinstance(node, (exp.Unnest, exp.Lateral)):
            raise UnsupportedSQL(f"{type(node).__name__.upper()} in FROM is not supported")
        raise UnsupportedSQL(f"{type(node).__name__} in FROM is not supported")

    def _plan_from(self, q: Node, scope: Scope, conds: list[Node]) -> None:
        from_ = q.args.get("from_") or q.args.get("from")
        joins = q.args.get("joins") or []
        if from_ is None:
            scope.plan = Values(((0,),), (Field("_dummy", INT, False),))
            return
        items: list[tuple[str, Plan, str, exp.Expression | None]] = []
        alias, plan = self._source(from_.this, scope)
        items.append((alias, plan, "inner", None))
        for j in joins:
            side = (j.args.get("side") or "").lower()
            kind = (j.args.get("kind") or "").lower()
            if kind in ("semi", "anti"):
                raise UnsupportedSQL(f"{kind.upper()} JOIN is not supported")
            if j.args.get("using"):
                raise UnsupportedSQL("JOIN USING could not be resolved")
            a, p = self._source(j.this, scope)
            how = side if side in ("left", "right", "full") else "inner"
            if kind == "outer" and not side:
                how = "full"
            on = j.args.get("on")
            if (
                on is None
                and how != "inner"
                and str(j.args.get("method") or "").upper() == "NATURAL"
            ):
                on = exp.true()  # a natural join of tables with no column in common
            items.append((a, p, how, on))
        seen = set()
        for a, _, _, _ in items:
            if a in seen:
                raise SQLError(f"table alias '{a}' is used twice in one FROM")
            seen.add(a)
        if all(how == "inner" for _, _, how, _ in items):
            self._plan_inner_joins(items, scope, conds)
        else:
            self._plan_ordered_joins(items, scope)

    def _add_source(self, scope: Scope, alias: str, plan: Plan) -> None:
        scope.sources.append((alias, len(scope.fields), plan.fields))

    def _bind_local(self, node: Node, scope: Scope) -> Expr | None:
        """Binds ``node`` if it has no subquery; None otherwise."""
        if any(isinstance(n, (exp.Subquery, exp.Exists, exp.Select)) for n in node.walk()) or (
            isinstance(node, exp.In) and node.args.get("query")
        ):
            return None
        return self.bind(node, scope)

    def _plan_inner_joins(
        self,
        items: list[tuple[str, Plan, str, exp.Expression | None]],
        scope: Scope,
        conds: list[Node],
    ) -> None:
        for _, _, _, on in items:
            conds.extend(_conjuncts(on))
        # Bind every subquery-free condition against a scope holding all sources
        probe = Scope(scope.outer, in_loop=scope.in_loop)
        offsets = []
        total = 0
        for alias, plan, _, _ in items:
            probe.sources.append((alias, total, plan.fields))
            offsets.append(total)
            total += len(plan.fields)
        all_fields = tuple(f for _, p, _, _ in items for f in p.fields)
        probe.plan = Values((), all_fields)
        owner = []
        for i, (_, plan, _, _) in enumerate(items):
            owner.extend([i] * len(plan.fields))
        bound: list[tuple[Node, Expr, set[int]]] = []
        for c in list(conds):
            e = self._bind_local(c, probe)
            if e is None:
                continue
            e = self._cast_bool(e, "WHERE")
            if _has_outer(e):
                continue  # correlated conditions stay in WHERE (handled by the caller)
            # (a condition that binds to an AND, as SQLite's exact equality of an INTEGER
            # with a REAL does, is its parts: an equality among them can join)
            for part in conjuncts(e):
                bound.append((c, part, {owner[i] for i in _uses(part)}))
            conds.remove(c)
        # an OR over several sources implies, for a source every branch restricts, the OR
        # of those restrictions: a filter on that source before the join
        for _, e, srcs in list(bound):
            if len(srcs) > 1 and isinstance(e, Call) and e.op == "or":
                for src in sorted(srcs):
                    imp = _implied(e, lambda u, src=src: owner[u] == src)
                    if imp is not None:
                        bound.append((None, imp, {src}))
        # equalities of columns closed under transitivity: ``p_partkey = l_partkey`` and
        # ``l_partkey = ps_partkey`` also join partsupp to part directly
        classes = _implied_equalities(bound, all_fields, owner)
        # conditions on one source filter it before joining
        plans = [p for _, p, _, _ in items]
        rank = [2] * len(items)
        for c, e, srcs in list(bound):
            if len(srcs) == 1:
                (i,) = srcs
                local = _shift(e, -offsets[i])
                plans[i] = Filter(plans[i], local)
                rank[i] = min(rank[i], 0 if _pins(local) else 1)
                bound.remove((c, e, srcs))
            elif not srcs:
                # constant condition: filter the first source
                plans[0] = Filter(plans[0], e)
                bound.remove((c, e, srcs))
        # a subquery condition (EXISTS, IN, ...) that reads one source applies to it alone
        aliases = [a for a, _, _, _ in items]
        for c in list(conds):
            one_src = _only_source(c, aliases)
            if one_src is None:
                continue
            one = Scope(scope.outer, in_loop=scope.in_loop)
            one.sources = [(aliases[one_src], 0, plans[one_src].fields)]
            one.plan = plans[one_src]
            width0 = len(plans[one_src].fields)
            self._apply_predicate(c, one)
            assert one.plan is not None
            plans[one_src] = one.plan
            if len(one.plan.fields) != width0:  # columns a mark join added: drop them
                plans[one_src] = Project(
                    one.plan, tuple(_project_all(one.plan)[:width0]), one.plan.fields[:width0]
                )
            conds.remove(c)
        # Join order: start from the most restricted source (an equality or IN list on a
        # constant, then any filter, then none; the written order breaks ties) and join the
        # most restricted source connected to what is joined by an equality; a source with
        # no such connection comes last, as a cross join.
        # With declared keys, a join whose new side is matched on a key of its own (each
        # row joined finds at most one) comes before one matched on a key of what is
        # joined (each new row finds at most one), and both before a join on no key (which
        # can multiply rows: suppliers and customers of one nation).
        uniq = [unique_sets(p, self.keys) for p in plans]

        def join_kind(i: int, have: set[int]) -> int:
            mine: set[int] = set()
            theirs: dict[int, set[int]] = {}
            for _, e, srcs in bound:
                if i in srcs and (srcs - {i}) <= have:
                    parts = _equi_parts(e, offsets, owner, i, have)
                    if parts is None:
                        continue
                    lk, rk = parts
                    if isinstance(rk, Col):
                        mine.add(rk.index - offsets[i])
                    if isinstance(lk, Col):
                        j = owner[lk.index]
                        theirs.setdefault(j, set()).add(lk.index - offsets[j])
            if any(u <= mine for u in uniq[i]):
                return 0
            if any(u <= cols for j, cols in theirs.items() for u in uniq[j]):
                return 1
            return 2

        first = min(range(len(items)), key=lambda i: (rank[i], i))
        # With declared keys, a source whose own key holds the whole key of a filtered
        # source (a line item's order key, inside its (order key, line number)) starts the
        # joins, matched with that source first: it is a child of that parent, its rows
        # come grouped by the parent's key (a table's rows are written key by key), so
        # arranging them by that key costs little, and the parent's filter leaves few of
        # them for the joins on random keys that follow.
        forced: list[int] = []
        parents = []
        bare: set[int] = set()  # parents without a filter of their own
        for i in range(len(items)):
            for j in range(len(items)):
                if i == j or not uniq[i] or join_kind(j, {i}) != 0:
                    continue
                mine: set[int] = set()
                for _, e, srcs in bound:
                    if srcs == {i, j}:
                        parts = _equi_parts(e, offsets, owner, j, {i})
                        if parts is not None and isinstance(parts[0], Col):
                            mine.add(parts[0].index - offsets[i])
                if mine and any(mine < u for u in uniq[i]):
                    if rank[j] > 1:
                        bare.add(j)
                    else:
                        parents.append((rank[j], i, j))
        # the parent and the tables looked up from it (by their own keys, reading the
        # parent's side only): these join one another before the child's other joins, so
        # the parent side the child meets is as restricted as it gets (an order's customer
        # in the region asked for), as ``_attach`` nests them
        family: set[int] | None = None
        if parents:
            _, first, child_parent = min(parents)
            forced.append(child_parent)
            family = {child_parent}

        def other_sides(i: int, have: set[int]) -> set[int]:
            out: set[int] = set()
            for _, e, srcs in bound:
                if i in srcs and (srcs - {i}) <= have and _equi_parts(e, offsets, owner, i, have):
                    out |= srcs - {i}
            return out

        order = [first]
        remaining = [i for i in range(len(items)) if i != first]
        current: Plan = plans[first]
        pos = {first: 0}  # source -> offset in current
        lookups: set[int] = set()  # (the joins ``_attach`` may join below)
        width = len(plans[first].fields)
        while remaining:
            connected = [
                i
                for i in remaining
                if any(
                    i in srcs
                    and len(srcs - {i}) >= 1
                    and (srcs - {i}) <= set(order)
                    and _equi_parts(e, offsets, owner, i, set(order))
                    for _, e, srcs in bound
                )
            ]
            have = set(order)
            nested = []
            if family is not None and not forced:
                nested = [
                    i
                    for i in connected
                    if join_kind(i, have) == 0 and other_sides(i, have) <= family
                ]
            if forced:
                pick = forced.pop()
            elif nested:
                pick = min(nested, key=lambda i: (rank[i], i))
                assert family is not None
                family.add(pick)
            else:
                pick = min(connected or remaining, key=lambda i: (join_kind(i, have), rank[i], i))
            pick_kind = join_kind(pick, have) if pick in connected else 2
            remaining.remove(pick)
            lkeys: list[Expr] = []
            rkeys: list[Expr] = []
            used = []
            matched: dict[Expr, int] = {}  # a column of pick -> the class it was matched in
            for c, e, srcs in bound:
                if pick in srcs and (srcs - {pick}) <= set(order):
                    parts = _equi_parts(e, offsets, owner, pick, set(order))
                    if parts:
                        lk, rk = parts
                        used.append((c, e, srcs))
                        # a column matched again with a column equal to the one it was
                        # matched with (every equality among the joined sources of a class
                        # of equal columns has been applied) adds no key column
                        cls = classes.get(lk.index) if isinstance(lk, Col) else None
                        if cls is not None and matched.get(rk) == cls:
                            continue
                        if cls is not None:
                            matched[rk] = cls
                        lkeys.append(_remap_cols(lk, offsets, owner, pos))
                        rkeys.append(_shift(rk, -offsets[pick]))
            for u in used:
                bound.remove(u)
            right = plans[pick]
            lkeys, rkeys = self._coerce_keys(lkeys, rkeys)
            # (nothing is joined into an unfiltered parent's side: all its rows would be
            # arranged by the next table's key, where the child's rows that meet it are
            # fewer; TPC-H Q7's orders of all customers, 1.5 M at SF 1)
            current = _attach(
                current, right, lkeys, rkeys, pick_kind == 0, lookups, pick not in bare
            )
            pos[pick] = width
            width += len(right.fields)
            order.append(pick)
            # conditions now fully available become filters (non-equi, multi-source)
            for c, e, srcs in list(bound):
                if srcs <= set(order):
                    current = Filter(current, _remap_cols(e, offsets, owner, pos))
                    bound.remove((c, e, srcs))
        for _, e, _ in bound:
            current = Filter(current, _remap_cols(e, offsets, owner, pos))
        scope.plan = current
        for i in range(len(items)):
            alias = items[i][0]
            scope.sources.append((alias, pos[i], plans[i].fields))

    def _coerce_keys(self, lkeys: list[Expr], rkeys: list[Expr]) -> tuple[list[Expr], list[Expr]]:
        lo, ro = [], []
        for a, b in zip(lkeys, rkeys, strict=True):
            t = common_type(a.type, b.type, "join condition")
            lo.append(self._cast(a, t))
            ro.append(self._cast(b, t))
        return lo, ro

    def _plan_ordered_joins(
        self, items: list[tuple[str, Plan, str, exp.Expression | None]], scope: Scope
    ) -> None:
        alias, plan, _, _ = items[0]
        scope.sources.append((alias, 0, plan.fields))
        scope.plan = plan
        for alias, right, how, on in items[1:]:
            left = scope.plan
            assert left is not None
            nl = len(left.fields)
            probe = Scope(scope.outer, in_loop=scope.in_loop)
            probe.sources = list(scope.sources) + [(alias, nl, right.fields)]
            rfields = right.fields
            lfields = left.fields
            probe.plan = Values((), lfields + rfields)
            lkeys: list[Expr] = []
            rkeys: list[Expr] = []
            residual: list[Expr] = []
            parts: list[Expr] = []
            for c in _conjuncts(on):
                got = self._bind_local(c, probe)
                if got is None:
                    raise UnsupportedSQL("subqueries in JOIN ... ON conditions")
                parts.extend(conjuncts(self._cast_bool(got, "ON")))
            for e in parts:
                uses = _uses(e)
                if uses and all(i >= nl for i in uses) and how in ("left", "inner"):
                    right = Filter(right, _shift(e, -nl))
                    continue
                if uses and all(i < nl for i in uses) and how in ("right", "inner"):
                    left = Filter(left, e)
                    continue
                if isinstance(e, Call) and e.op == "eq":
                    a, b = e.args
                    ua, ub = _uses(a), _uses(b)
                    if ua and ub and all(i < nl for i in ua) and all(i >= nl for i in ub):
                        lkeys.append(a)
                        rkeys.append(_shift(b, -nl))
                        continue
                    if ua and ub and all(i >= nl for i in ua) and all(i < nl for i in ub):
                        lkeys.append(b)
                        rkeys.append(_shift(a, -nl))
                        continue
                residual.append(e)
            lkeys, rkeys = self._coerce_keys(lkeys, rkeys)
            if how in ("left", "full"):
                rfields = tuple(Field(f.name, f.type, True, f.source) for f in rfields)
            if how in ("right", "full"):
                lfields = tuple(Field(f.name, f.type, True, f.source) for f in lfields)
            if on is None and how != "inner":
                raise SQLError(f"{how.upper()} JOIN needs an ON condition")
            scope.plan = Join(
                left, right, how, tuple(lkeys), tuple(rkeys), _and_all(residual), lfields + rfields
            )
            # the sources' fields are now nullable per the join kind
            scope.sources = [
                (a, o, tuple(scope.plan.fields[o : o + len(fs)])) for a, o, fs in scope.sources
            ]
            scope.sources.append((alias, nl, rfields))

    # -- predicates with subqueries --------------------------------------------------------
    def _apply_predicate(self, c: Node, scope: Scope) -> None:
        """Restricts ``scope``'s relation to rows where ``c`` is TRUE."""
        for part in _conjuncts(c):
            node = part
            neg = False
            while isinstance(node, exp.Paren):
                node = node.this
            if isinstance(node, exp.Not):
                inner = node.this
                while isinstance(inner, exp.Paren):
                    inner = inner.this
                if isinstance(inner, (exp.Exists, exp.In)):
                    node, neg = inner, True
            if isinstance(node, exp.Exists) and scope.agg is None:
                self._semi_exists(node.this, scope, anti=neg)
                continue
            if (
                isinstance(node, exp.In)
                and node.args.get("query") is not None
                and scope.agg is None
            ):
                if self._semi_in(node, scope, anti=neg):
                    continue
                e = self.bind(exp.Not(this=node), scope)
            else:
                e = self.bind(part, scope)
            assert scope.plan is not None
            e = self._cast_bool(e, "WHERE")
            scope.plan = Filter(scope.plan, e)

    def _cast_bool(self, e: Expr, what: str) -> Expr:
        if e.type.kind == "boolean":
            return e
        if e.type.kind == "null":
            return Lit(None, BOOLEAN)
        if e.type.numeric and self.dialect == "sqlite":
            return Call("ne", (e, Lit(0, e.type)), BOOLEAN, e.nullable)
        raise SQLError(f"{what} needs a boolean condition, got {e.type}")

    def _sub_select(self, q: Node) -> Node:
        while isinstance(q, exp.Subquery):
            q = q.this
        if not isinstance(q, exp.Select):
            raise UnsupportedSQL("set operations inside EXISTS / IN / scalar subqueries")
        return q

    def _correlate(
        self, q: Node, scope: Scope
    ) -> tuple[Scope, list[tuple[Expr, Expr]], list[Expr]]:
        """Plans the FROM and the uncorrelated WHERE of subquery ``q`` (inside ``scope``);
        returns its scope, the equality correlations ``(inner, outer)`` and the other
        correlated conditions."""
        for bad, what in ((q.args.get("windows"), "WINDOW"),):
            if bad:
                raise UnsupportedSQL(f"{what} is not supported")
        if q.args.get("with_") or q.args.get("with"):
            raise UnsupportedSQL("WITH inside a subquery expression")
        sub = Scope(scope, in_loop=scope.in_loop)
        conds = _conjuncts(q.args.get("where"))
        self._plan_from(q, sub, conds)
        pairs: list[tuple[Expr, Expr]] = []
        residual: list[Expr] = []
        own = _sources(q)
        for c in conds:
            e = self._bind_local(c, sub)
            if e is None and any(
                isinstance(x, exp.Column) and x.table and x.table not in own
                for x in _walk_no_subqueries(c)
            ):
                # (one that ``_wrap_for_domain`` did not make a derived table's)
                raise UnsupportedSQL(
                    f"a condition with a subquery that also reads the outer row ({c.sql()})"
                )
            if e is not None:
                e = self._cast_bool(e, "WHERE")
            if e is not None and _has_outer(e):
                split = _split_outer(e)
                if split is not None:
                    inner, outer_e = split
                    t = common_type(inner.type, outer_e.type, "correlation")
                    assert isinstance(e, Call)
                    if e.op == "nseq":
                        sub.safe_pairs.add(len(pairs))
                    pairs.append((self._cast(inner, t), self._cast(outer_e, t)))
                else:
                    residual.append(self._cast_bool(e, "WHERE"))
                continue
            self._apply_predicate(c, sub)
        return sub, pairs, residual

    def _decorrelated(
        self, sub: Scope, pairs: list[tuple[Expr, Expr]], residual: list[Expr], scope: Scope
    ) -> tuple[Plan, list[Expr], int, bool]:
        """A relation whose first ``k`` fields are correlation values followed by the
        subquery's fields, the outer expressions those values match, ``k``, and whether
        the match is null-safe (NULL matches NULL)."""
        assert sub.plan is not None and scope.plan is not None
        inner = sub.plan
        safe = sub.safe_pairs
        if not residual:
            keys = [i for i, _ in pairs]
            exprs = [*keys, *_project_all(inner)]
            fields = (
                tuple(Field(f"_k{i}", k.type, i in safe and k.nullable) for i, k in enumerate(keys))
                + inner.fields
            )
            # (a key matched with ``=`` is never NULL where it matches: such rows go, and
            # the match can then be NULL-safe for all keys when some must be)
            nn = _not_null([k for i, k in enumerate(keys) if i not in safe])
            if nn is not None:
                inner = Filter(inner, nn)
            rel = Project(inner, tuple(exprs), fields)
            return rel, [self._outer_to_col(o) for _, o in pairs], len(keys), bool(safe)
        if safe:
            # NULL-safe correlations join the domain as conditions (the join's keys match
            # NULL with nothing)
            residual = residual + [
                Call("nseq", (i, o), BOOLEAN, False) for j, (i, o) in enumerate(pairs) if j in safe
            ]
            pairs = [p for j, p in enumerate(pairs) if j not in safe]
        # general correlation: evaluate against the distinct outer values used
        outer_refs: list[Outer] = []
        for e in [o for _, o in pairs] + residual:
            stack = [e]
            while stack:
                x = stack.pop()
                if isinstance(x, Outer) and x not in outer_refs:
                    outer_refs.append(x)
                stack.extend(x.children())
        dom_exprs = [Col(o.index, o.type, o.nullable, o.name) for o in outer_refs]
        dom_fields = tuple(Field(f"_d{i}", o.type, o.nullable) for i, o in enumerate(outer_refs))
        domain = Distinct(Project(scope.plan, tuple(dom_exprs), dom_fields))
        k = len(outer_refs)
        omap = {o.index: i for i, o in enumerate(outer_refs)}
        lkeys = [_remap(o, {}, omap) for _, o in pairs]
        rkeys = [i for i, _ in pairs]
        nin = len(inner.fields)
        res = [_remap(r, {j: k + j for j in range(nin)}, omap) for r in residual]
        fields = dom_fields + inner.fields
        joined = Join(domain, inner, "inner", tuple(lkeys), tuple(rkeys), _and_all(res), fields)
        return joined, list(dom_exprs), k, True

    def _outer_to_col(self, e: Expr) -> Expr:
        if isinstance(e, Outer):
            return Col(e.index, e.type, e.nullable, e.name)
        if isinstance(e, Call):
            return Call(
                e.op, tuple(self._outer_to_col(a) for a in e.args), e.type, e.nullable, e.extra
            )
        return e

    def _check_plain(self, q: Node, what: str) -> None:
        if (
            q.args.get("group")
            or q.args.get("having")
            or any(isinstance(n, _AGGS) for s in q.expressions for n in _walk_no_subqueries(s))
        ):
            raise UnsupportedSQL(f"{what} over a subquery with aggregates")
        if q.args.get("limit") or q.args.get("offset"):
            raise UnsupportedSQL(f"LIMIT inside {what}")

    def _is_plain(self, q: Node) -> bool:
        return isinstance(q, exp.Select) and not (
            q.args.get("group")
            or q.args.get("having")
            or q.args.get("limit")
            or q.args.get("offset")
            or q.args.get("distinct")
            or q.args.get("with_")
            or q.args.get("with")
            or any(isinstance(n, _AGGS) for s in q.expressions for n in _walk_no_subqueries(s))
        )

    def _subquery_rows(
        self, q: Node, scope: Scope, what: str, value: bool
    ) -> tuple[Scope, list[tuple[Expr, Expr]], list[Expr], Expr | None]:
        """The rows of subquery ``q`` for EXISTS / IN: its scope (relation), correlations,
        correlated conditions, and (``value``) its one output column."""
        while isinstance(q, exp.Subquery):
            q = q.this
        if self._is_plain(q):
            assert isinstance(q, exp.Select)
            if value and len(q.expressions) != 1:
                raise SQLError(f"{what} (subquery) needs a subquery of one column")
            sub, pairs, residual = self._correlate(q, scope)
            y = None
            if value:
                y = self.bind(_unalias(q.expressions[0]), sub)
                if _has_outer(y):
                    raise UnsupportedSQL("a correlated reference in the SELECT list of a subquery")
            return sub, pairs, residual, y
        # aggregates, LIMIT, DISTINCT or set operations: plan it as a relation of its own
        try:
            planned = self.plan_query(q, None, in_loop=scope.in_loop)
        except SQLError as e:
            raise UnsupportedSQL(
                f"{what} over a correlated subquery with aggregates, DISTINCT, "
                f"LIMIT or set operations ({e})"
            ) from e
        rel = self._visible(planned)
        if value and len(rel.fields) != 1:
            raise SQLError(f"{what} (subquery) needs a subquery of one column")
        sub = Scope(scope, plan=rel, in_loop=scope.in_loop)
        y = _col(0, rel.fields[0]) if value else None
        return sub, [], [], y

    def _semi_exists(self, q: Node, scope: Scope, anti: bool) -> None:
        sel = q
        while isinstance(sel, exp.Subquery):
            sel = sel.this
        if isinstance(sel, exp.Select) and _is_scalar_agg(sel):
            # an aggregate without GROUP BY has exactly one row: EXISTS is TRUE
            if anti:
                assert scope.plan is not None
                scope.plan = Filter(scope.plan, Lit(False, BOOLEAN))
            return
        sub, pairs, residual, _ = self._subquery_rows(sel, scope, "EXISTS", False)
        if (
            pairs
            and len(residual) == 1
            and self._exists_other(sub, pairs, residual[0], scope, anti)
        ):
            return
        rel, outer_keys, k, null_safe = self._decorrelated(sub, pairs, residual, scope)
        self._semi(scope, rel, outer_keys, k, null_safe, anti)

    def _exists_other(
        self, sub: Scope, pairs: list[tuple[Expr, Expr]], cond: Expr, scope: Scope, anti: bool
    ) -> bool:
        """``EXISTS (... WHERE inner.k = outer.k AND inner.x <> outer.x)``: some row of the
        group ``k`` has another ``x`` than the outer row's. With ``G`` the group's distinct
        non-NULL ``x``: that holds when ``|G| >= 2``, or ``|G| = 1`` and ``x`` is not its
        value (and never for a NULL ``x``). So the rows are found by semi joins on the keys
        and on ``(k, x)``, not by a join on ``<>``. False if ``cond`` is not of that form.

        When the outer rows' ``(k, x)`` are among the inner rows' (``_rows_among``: the
        outer relation is the inner one's table under the same conditions and more), an
        outer row with non-NULL ``k`` and ``x`` has its ``x`` in ``G``: EXISTS is
        ``|G| >= 2`` and NOT EXISTS ``|G| < 2``, decided on ``k`` alone (one semi or anti
        join with the keys of two or more values; no lookup of ``(k, x)``)."""
        if not (isinstance(cond, Call) and cond.op == "ne") or sub.safe_pairs:
            return False
        a, b = cond.args
        if _has_outer(a) and not _uses(a) and _uses(b) and not _has_outer(b):
            a, b = b, a
        if not (_uses(a) and not _has_outer(a) and _has_outer(b) and not _uses(b)):
            return False
        inner_x, outer_x = a, self._outer_to_col(b)
        assert sub.plan is not None and scope.plan is not None
        outer = scope.plan
        keys = [i for i, _ in pairs]
        okeys = tuple(self._outer_to_col(o) for _, o in pairs)
        nk = len(keys)
        kfields = tuple(Field(f"_k{i}", k_.type, False) for i, k_ in enumerate(keys))
        nn = _not_null([*keys, inner_x])
        rows = Filter(sub.plan, nn) if nn is not None else sub.plan
        xf = Field("_x", inner_x.type, False)
        vals = Distinct(Project(rows, (*keys, inner_x), (*kfields, xf)))
        kcols = tuple(_col(i, kfields[i]) for i in range(nk))
        counts = Aggregate(
            vals, kcols, (Agg("count_star", None),), False, (*kfields, Field("_n", BIGINT, False))
        )
        n = Col(nk, BIGINT, False)

        def keyset(pred: Expr | None) -> Plan:
            src: Plan = Filter(counts, pred) if pred is not None else counts
            return Project(src, kcols, kfields)

        k_many = keyset(Call("ge", (n, Lit(2, BIGINT)), BOOLEAN, False))
        k_one = keyset(Call("eq", (n, Lit(1, BIGINT)), BOOLEAN, False))
        k_any = keyset(None)
        one_val = SemiJoin(vals, k_one, kcols, kcols, False)
        xcol = _col(nk, xf)
        x_null = Call("is_null", (outer_x,), BOOLEAN, False)
        with_x = (
            Filter(outer, Call("not", (x_null,), BOOLEAN, False)) if outer_x.nullable else outer
        )
        inner_cols = [k_.index if isinstance(k_, Col) else -1 for k_ in [*keys, inner_x]]
        outer_cols = [o.index if isinstance(o, Col) else -1 for o in (*okeys, outer_x)]
        if -1 not in inner_cols + outer_cols and _rows_among(
            outer, outer_cols, sub.plan, inner_cols
        ):
            if not anti:
                scope.plan = SemiJoin(with_x, k_many, okeys, kcols, False)
            elif outer_x.nullable:
                scope.plan = UnionAll(
                    (SemiJoin(with_x, k_many, okeys, kcols, True), Filter(outer, x_null)),
                    outer.fields,
                )
            else:
                scope.plan = SemiJoin(outer, k_many, okeys, kcols, True)
            return True
        in_one = SemiJoin(with_x, k_one, okeys, kcols, False)
        if not anti:
            parts: list[Plan] = [
                SemiJoin(with_x, k_many, okeys, kcols, False),
                SemiJoin(in_one, one_val, (*okeys, outer_x), (*kcols, xcol), True),
            ]
        else:
            parts = [
                SemiJoin(with_x, k_any, okeys, kcols, True),
                SemiJoin(in_one, one_val, (*okeys, outer_x), (*kcols, xcol), False),
            ]
            if outer_x.nullable:
                parts.append(Filter(outer, x_null))
        scope.plan = UnionAll(tuple(parts), outer.fields)
        return True

    def _semi(
        self, scope: Scope, rel: Plan, outer_keys: list[Expr], k: int, null_safe: bool, anti: bool
    ) -> None:
        assert scope.plan is not None
        if k == 0:
            keyset: Plan = Distinct(Project(rel, (Lit(0, INT),), (Field("_one", INT, False),)))
            scope.plan = SemiJoin(scope.plan, keyset, (Lit(0, INT),), (Col(0, INT, False),), anti)
            return
        keyset = Distinct(
            Project(rel, tuple(_col(i, rel.fields[i]) for i in range(k)), rel.fields[:k])
        )
        scope.plan = SemiJoin(
            scope.plan,
            keyset,
            tuple(outer_keys),
            tuple(_col(i, rel.fields[i]) for i in range(k)),
            anti,
            null_safe,
        )

    def _semi_in(self, node: Node, scope: Scope, anti: bool = False) -> bool:
        """``x IN (q)`` as a semi join; ``x NOT IN (q)`` as an anti join when neither ``x``
        nor ``q``'s column can be NULL (then it is ``NOT EXISTS (q WHERE y = x)``; with
        NULLs SQL's rule needs the counts, and the caller binds it as an expression).
        Whether it was applied."""
        x = self.bind(node.this, scope)
        if anti and x.nullable:
            return False
        sub, pairs, residual, y = self._subquery_rows(node.args["query"], scope, "IN", True)
        assert y is not None
        if anti and y.nullable:
            return False
        x, y, _ = self._in_sides(x, y)
        pairs = pairs + [(y, self._to_outer(x))]
        rel, outer_keys, k, null_safe = self._decorrelated(sub, pairs, residual, scope)
        self._semi(scope, rel, outer_keys, k, null_safe, anti=anti)
        return True

    def _in_sides(self, x: Expr, y: Expr) -> tuple[Expr, Expr, SqlType]:
        """``x IN (q)``'s two sides (``y``: ``q``'s column) made one type, equal where SQL
        holds them equal. SQLite compares a number with text as ``x = y`` does
        (``_number_with_text``): each side then becomes a text key (``sqlite_key``) that
        is the same exactly where the two are equal under those rules."""
        if self.dialect == "sqlite" and _number_and_text(x.type, y.type):
            n, s = (x, y) if x.type.kind != "string" else (y, x)
            if _has_affinity(n):
                modes = {id(n): "keep", id(s): "num"}
            elif _has_affinity(s):
                modes = {id(n): "text", id(s): "keep"}
            else:
                modes = {id(n): "keep", id(s): "keep"}

            def key(e: Expr) -> Expr:
                return Call("sqlite_key", (e,), STRING, e.nullable, modes[id(e)])

            return key(x), key(y), STRING
        t = common_type(x.type, y.type, "IN")
        return self._cast(x, t), self._cast(y, t), t

    def _to_outer(self, e: Expr) -> Expr:
        """An expression of the enclosing scope written as outer references."""
        if isinstance(e, Col):
            return Outer(e.index, e.type, e.nullable, e.name)
        if isinstance(e, Call):
            return Call(e.op, tuple(self._to_outer(a) for a in e.args), e.type, e.nullable, e.extra)
        return e

    def _attach_left(
        self, scope: Scope, rel: Plan, outer_keys: list[Expr], k: int, null_safe: bool
    ) -> int:
        """Left-joins ``rel`` (first ``k`` fields: keys; at most one row per key) to the
        scope's relation; returns the offset of ``rel``'s fields in the result."""
        assert scope.plan is not None
        left = scope.plan
        nl = len(left.fields)
        rkeys = tuple(_col(i, rel.fields[i]) for i in range(k))
        rfields = tuple(Field(f.name, f.type, True) for f in rel.fields)
        if k == 0:
            lk: tuple[Expr, ...] = (Lit(0, INT),)
            rel = Project(
                rel, (Lit(0, INT), *_project_all(rel)), (Field("_one", INT, False), *rel.fields)
            )
            rkeys = (Col(0, INT, False),)
            rfields = (Field("_one", INT, True), *rfields)
            scope.plan = Join(left, rel, "left", lk, rkeys, None, left.fields + rfields)
            return nl + 1
        scope.plan = Join(
            left, rel, "left", tuple(outer_keys), rkeys, None, left.fields + rfields, null_safe
        )
        return nl

    def _mark_exists(self, q: Node, scope: Scope) -> Expr:
        """``EXISTS (q)`` as a boolean column of the scope's relation."""
        sel = q
        while isinstance(sel, exp.Subquery):
            sel = sel.this
        if isinstance(sel, exp.Select) and _is_scalar_agg(sel):
            return Lit(True, BOOLEAN)
        sub, pairs, residual, _ = self._subquery_rows(sel, scope, "EXISTS", False)
        rel, outer_keys, k, null_safe = self._decorrelated(sub, pairs, residual, scope)
        keys = tuple(_col(i, rel.fields[i]) for i in range(k))
        marked = Distinct(
            Project(rel, (*keys, TRUE), (*rel.fields[:k], Field("_mark", BOOLEAN, False)))
        )
        at = self._attach_left(scope, marked, outer_keys, k, null_safe)
        return Call("is_not_null", (Col(at + k, BOOLEAN, True),), BOOLEAN, False)

    def _mark_in(self, node: Node, scope: Scope) -> Expr:
        """``x IN (q)`` with SQL's NULL rule, as an expression over attached columns."""
        x = self.bind(node.this, scope)
        sub, pairs, residual, y = self._subquery_rows(node.args["query"], scope, "IN", True)
        assert y is not None
        x, y, t = self._in_sides(x, y)
        # per correlation group: how many rows, how many non-NULL values
        assert sub.plan is not None
        nin_pre = len(sub.plan.fields)
        sub_y = Project(
            sub.plan, (*_project_all(sub.plan), y), (*sub.plan.fields, Field("_y", t, y.nullable))
        )
        sub.plan = sub_y
        rel, outer_keys, k, null_safe = self._decorrelated(sub, pairs, residual, scope)
        ycol = _col(k + nin_pre, rel.fields[k + nin_pre])
        keys = [_col(i, rel.fields[i]) for i in range(k)]
        stats = Aggregate(
            rel,
            tuple(keys),
            (Agg("count_star", None), Agg("count", ycol)),
            False,
            (*rel.fields[:k], Field("_n", BIGINT, False), Field("_nn", BIGINT, False)),
        )
        at_stats = self._attach_left(scope, stats, outer_keys, k, null_safe)
        n_col = Col(at_stats + k, BIGINT, True)
        nn_col = Col(at_stats + k + 1, BIGINT, True)
        # matches: the distinct (keys, y) pairs
        nn = _not_null([ycol])
        matches_in = Filter(rel, nn) if nn is not None else rel
        matches = Distinct(
            Project(
                matches_in,
                (*keys, ycol, TRUE),
                (*rel.fields[:k], Field("_y", t, False), Field("_mark", BOOLEAN, False)),
            )
        )
        xo = x
        at_m = self._attach_left(scope, matches, [*outer_keys, xo], k + 1, null_safe)
        matched = Call("is_not_null", (Col(at_m + k + 1, BOOLEAN, True),), BOOLEAN, False)
        empty = Call(
            "coalesce",
            (Call("eq", (n_col, Lit(0, BIGINT)), BOOLEAN, True), Lit(True, BOOLEAN)),
            BOOLEAN,
            False,
        )
        has_null = Call("lt", (nn_col, n_col), BOOLEAN, True)
        unknown = Call("or", (Call("is_null", (x,), BOOLEAN, False), has_null), BOOLEAN, True)
        # CASE WHEN matched THEN TRUE WHEN empty THEN FALSE WHEN unknown THEN NULL ELSE FALSE
        return Call(
            "case",
            (
                matched,
                Lit(True, BOOLEAN),
                empty,
                Lit(False, BOOLEAN),
                unknown,
                Lit(None, BOOLEAN),
                Lit(False, BOOLEAN),
            ),
            BOOLEAN,
            True,
        )

    def _scalar(self, q: Node, scope: Scope) -> Expr:
        """A scalar subquery as an expression over attached columns."""
        sel = self._sub_select(q)
        if len(sel.expressions) != 1:
            raise SQLError("a scalar subquery must return one column")
        one_group = False
        if sel.args.get("group"):
            if not _one_group_per_outer_row(sel):
                raise UnsupportedSQL("a scalar subquery with GROUP BY")
            # a GROUP BY that the correlation pins to one value is one group (or none: so
            # NULL where no row matches, not a count of 0)
            sel = sel.copy()
            sel.set("group", None)
            one_group = True
        if sel.args.get("limit") or sel.args.get("offset") or sel.args.get("order"):
            raise UnsupportedSQL("ORDER BY / LIMIT in a scalar subquery")
        if sel.args.get("distinct"):
            raise UnsupportedSQL("DISTINCT in a scalar subquery")
        sub, pairs, residual = self._correlate(sel, scope)
        rel, outer_keys, k, null_safe = self._decorrelated(sub, pairs, residual, scope)
        # the subquery's SELECT over ``rel``, grouped by the k correlation fields
        nk = k
        inner_scope = Scope(scope, plan=rel, in_loop=scope.in_loop)
        inner_scope.sources = [(a, o + nk, fs) for a, o, fs in sub.sources]
        node = _unalias(sel.expressions[0])
        aggs = [n for n in _walk_no_subqueries(node) if isinstance(n, _AGGS)]
        having = sel.args.get("having")
        if aggs or having is not None:
            if having is not None:
                aggs += [n for n in _walk_no_subqueries(having) if isinstance(n, _AGGS)]
            key_exprs: list[Expr] = [_col(i, rel.fields[i]) for i in range(k)]
            self._build_aggregate(inner_scope, key_exprs, [], aggs, scalar=(k == 0))
            keep: Expr | None = None
            if having is not None:
                if any(isinstance(n, exp.Query) for n in having.walk()):
                    self._apply_predicate(having, inner_scope)
                    keep = Lit(False, BOOLEAN)  # (no row over no rows decided here)
                else:
                    # a group HAVING drops gives NULL, as a missing group does
                    keep = self._cast_bool(self.bind(having.this, inner_scope), "HAVING")
            value = self.bind(node, inner_scope)
            assert inner_scope.plan is not None
            # the value of this subquery over no rows: count -> 0, everything else NULL,
            # and NULL where HAVING drops the empty group
            empty = (
                Lit(None, value.type)
                if one_group
                else self._empty_value(node, inner_scope, value, keep)
            )
            if keep is not None and not isinstance(keep, Lit):
                value = Call("case", (keep, value, Lit(None, value.type)), value.type, True)
            grouped = Project(
                inner_scope.plan,
                (*[_col(i, inner_scope.plan.fields[i]) for i in range(k)], value, TRUE),
                (
                    *inner_scope.plan.fields[:k],
                    Field("_v", value.type, True),
                    Field("_mark", BOOLEAN, False),
                ),
            )
            if k == 0 and having is None:
                at = self._attach_inner_one(scope, grouped)
                return Col(at, value.type, value.nullable or True)
            at = self._attach_left(scope, grouped, outer_keys, k, null_safe)
            v = Col(at + k, value.type, True)
            if empty.value is None:
                return v
            mark = Col(at + k + 1, BOOLEAN, True)
            return Call(
                "case",
                (Call("is_not_null", (mark,), BOOLEAN, False), v, self._cast(empty, value.type)),
                value.type,
                True,
            )
        # not an aggregate: at most one row per group, else an error at evaluation
        value = self.bind(node, inner_scope)
        if _has_outer(value):
            raise UnsupportedSQL("a correlated reference in the SELECT list of a subquery")
        # (binding the value may have joined a subquery of its own onto the relation)
        base = inner_scope.plan
        assert base is not None
        key_exprs = [_col(i, base.fields[i]) for i in range(k)]
        pre = Project(
            base, (*key_exprs, value), (*base.fields[:k], Field("_v", value.type, value.nullable))
        )
        vcol = _col(k, pre.fields[k])
        stats = Aggregate(
            pre,
            tuple(_col(i, pre.fields[i]) for i in range(k)),
            (Agg("count_star", None), Agg("max", vcol)),
            k == 0,
            (*pre.fields[:k], Field("_n", BIGINT, False), Field("_v", value.type, True)),
        )
        if k == 0:
            at = self._attach_inner_one(scope, stats)
        else:
            at = self._attach_left(scope, stats, outer_keys, k, null_safe)
        n_col = Col(at + k, BIGINT, True)
        v_col = Col(at + k + 1, value.type, True)
        return Call("one_row", (n_col, v_col), value.type, True)

    def _attach_inner_one(self, scope: Scope, one_row: Plan) -> int:
        """Cross-joins a relation of exactly one row; returns its fields' offset."""
        assert scope.plan is not None
        left = scope.plan
        nl = len(left.fields)
        scope.plan = Join(
            left,
            one_row,
            "inner",
            (Lit(0, INT),),
            (Lit(0, INT),),
            None,
            left.fields + one_row.fields,
        )
        return nl

    def _empty_value(
        self, node: Node, agg_scope: Scope, value: Expr, keep: Expr | None = None
    ) -> Lit:
        """The scalar subquery's value over an empty group (aggregates of nothing): NULL
        unless ``keep`` (its HAVING) is TRUE there."""
        assert agg_scope.agg is not None and agg_scope.plan is not None
        consts: dict[int, Lit] = {}
        for key, idx in agg_scope.agg.aggs.items():
            func = key[0]
            t = agg_scope.plan.fields[idx].type
            consts[idx] = Lit(0, t) if func in ("count", "count_star") else Lit(None, t)
        if keep is not None:
            kept = _fold(keep, self, consts) if not isinstance(keep, Lit) else keep
            if kept is None or kept.value is not True:
                return Lit(None, value.type)
        folded = _fold(value, self, consts)
        if folded is None:
            return Lit(None, value.type)
        return folded

    def _bare_columns(self, q: Node, scope: Scope) -> None:
        """SQLite's bare columns: in a query that aggregates, a column of its own rows that
        is neither grouped by nor inside an aggregate takes its value from one of the
        group's rows: from the row holding the extreme when ``min(x)`` / ``max(x)`` is the
        query's one aggregate (``min_by`` / ``max_by``), else from any row (here the least
        non-NULL value; one row's value whenever the column is the same throughout the
        group). ``q`` is rewritten so; nothing changes where a group key does not bind."""
        group = q.args.get("group")
        having = q.args.get("having")
        order = q.args.get("order")
        parts = [*q.expressions, *([having.this] if having is not None else [])]
        aggs = [n for x in parts for n in _walk_no_subqueries(x) if isinstance(n, _AGGS)]
        parts += list(order.expressions) if order is not None else []
        if group is None and not aggs:
            return
        try:
            keys = [self.bind(k, scope) for k in (group.expressions if group else [])]
        except (SQLError, UnsupportedSQL):
            return
        extremes = {a.sql() for a in aggs}
        only = aggs[0] if len(extremes) == 1 and isinstance(aggs[0], (exp.Min, exp.Max)) else None
        bare = []
        for x in parts:
            for n in _walk_no_subqueries(x):
                if not isinstance(n, exp.Column) or n.find_ancestor(*_AGGS, exp.Window):
                    continue
                try:
                    e = self._b_Column(n, scope)
                except (SQLError, UnsupportedSQL):
                    continue  # (an output alias, or no column of these rows)
                if isinstance(e, Col) and e not in keys:
                    bare.append(n)
        for n in bare:
            if only is None:
                n.replace(exp.Min(this=n.copy()))
            else:
                kind = exp.ArgMin if isinstance(only, exp.Min) else exp.ArgMax
                n.replace(kind(this=n.copy(), expression=only.this.copy()))

    # -- aggregation -----------------------------------------------------------------------
    def _plan_aggregate(
        self, q: Node, scope: Scope, agg_nodes: list[Node], outer_ids: set[int] | None = None
    ) -> None:
        group = q.args.get("group")
        key_nodes = list(group.expressions) if group is not None else []
        if group is not None and (
            group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets")
        ):
            raise UnsupportedSQL("ROLLUP / CUBE / GROUPING SETS are not supported")
        scalar = group is None
        named_all = [
            (alias, f.name)
            for alias, _, fields in scope.sources
            for f in fields
            if f.name.lower() == "all"
        ]
        if group is not None and group.args.get("all") and named_all and not key_nodes:
            # (a column named ``all`` is that column, as in Spark)
            alias, name = named_all[0]
            key_nodes = [exp.column(name, table=alias if len(named_all) == 1 else None)]
        elif group is not None and group.args.get("all"):
            # GROUP BY ALL: by every item of the SELECT list without an aggregate in it
            # (none: one group of all rows, as without GROUP BY)
            if key_nodes:
                raise UnsupportedSQL("GROUP BY ALL beside other grouping expressions")
            key_nodes = [
                x.unalias()
                for x in q.expressions
                if not any(
                    isinstance(n, (*_AGGS, exp.AggFunc, exp.Window)) for n in _walk_no_subqueries(x)
                )
                and not isinstance(x.unalias(), exp.Literal)
            ]
            scalar = not key_nodes
        keys = [self.bind(k, scope) for k in key_nodes]
        self._build_aggregate(scope, keys, key_nodes, agg_nodes, scalar=scalar, outer_ids=outer_ids)

    def _build_aggregate(
        self,
        scope: Scope,
        keys: list[Expr],
        key_nodes: list[Node],
        agg_nodes: list[Node],
        scalar: bool,
        outer_ids: set[int] | None = None,
    ) -> None:
        """``outer_ids``: aggregates written inside this query's subqueries that aggregate
        this query's rows (found again there by their text)."""
        assert scope.plan is not None
        aggs: list[Agg] = []
        agg_index: dict[tuple[Any, ...], int] = {}
        agg_types: list[SqlType] = []
        by_sql: dict[str, int] = {}
        for n in agg_nodes:
            nested = any(isinstance(x, exp.Query) for x in n.walk())
            if nested and n.sql() in by_sql:
                continue
            key, agg, t = self._bind_agg(n, scope)
            if key not in agg_index:
                agg_index[key] = len(aggs)
                aggs.append(agg)
                agg_types.append(t)
            if nested or (outer_ids and id(n) in outer_ids):
                by_sql[n.sql()] = len(keys) + agg_index[key]
        key_fields = tuple(
            Field(f"_g{i}", k.type if k.type.kind != "null" else INT, k.nullable)
            for i, k in enumerate(keys)
        )
        agg_fields: list[Field] = []
        for a, t in zip(aggs, agg_types, strict=True):
            # a group has a row, so an aggregate of a never-NULL argument is never NULL
            # (without GROUP BY, the one row of empty input is NULL)
            nullable = a.func not in ("count", "count_star") and (
                scalar or a.arg is None or a.arg.nullable
            )
            agg_fields.append(Field(f"_a{len(agg_fields)}", t, nullable))
        plan = Aggregate(
            scope.plan, tuple(keys), tuple(aggs), scalar, key_fields + tuple(agg_fields)
        )
        key_sql = {kn.sql(): i for i, kn in enumerate(key_nodes)}
        scope.agg = AggContext(key_sql, {k: len(keys) + v for k, v in agg_index.items()}, by_sql)
        scope.plan = plan
        # after aggregation the sources' columns are only reachable as group keys
        scope.pre_keys = keys

    def _bind_agg(self, n: Node, scope: Scope) -> tuple[tuple[Any, ...], Agg, SqlType]:
        saved = scope.agg
        scope.agg = None
        try:
            if isinstance(n, _Percentile):
                return self._bind_percentile(n, scope)
            if isinstance(n, (exp.ArgMax, exp.ArgMin)):
                return self._bind_value_at_extreme(n, scope)
            if isinstance(n, (exp.Mode, _OrderedMode)):
                return self._bind_mode(n, scope)
            if type(n) in _PAIR_NODES:
                return self._bind_pair(n, _PAIR_NODES[type(n)], scope)
            if isinstance(n, (exp.Skewness, exp.Kurtosis)):
                return self._bind_moment(n, scope)
            if type(n) in _BIT_FOLD_NODES:
                return self._bind_bit_fold(n, scope)
            if isinstance(n, exp.GroupConcat):
                return self._bind_listagg(n, scope)
            func = type(n).__name__.lower()
            func = _SPREAD.get(func, func)
            # try_sum / try_avg: sum / avg with NULL for an overflow (``Agg.param``)
            param: tuple[Any, ...] = ()
            if isinstance(n, (_TrySum, _TryAvg)):
                if self.dialect != "spark":
                    raise UnsupportedSQL(f"{_spark_text(n)} outside the Spark dialect")
                func = "sum" if isinstance(n, _TrySum) else "avg"
                param = (TRY,)
            arg_node = n.this
            distinct = False
            if isinstance(n, exp.Count):
                arg_node = self._count_argument(n, scope)
            if isinstance(arg_node, exp.Distinct):
                distinct = True
                if len(arg_node.expressions) > 1:
                    return self._bind_count_distinct_rows(n, func, arg_node, scope)
                arg_node = arg_node.expressions[0]
            if isinstance(n, exp.Count) and (arg_node is None or isinstance(arg_node, exp.Star)):
                return ("count_star", None, False), Agg("count_star", None), BIGINT
            if arg_node is None:
                raise SQLError(f"{func}() needs an argument")
            for inner in _walk_no_subqueries(arg_node):
                if isinstance(inner, _AGGS):
                    raise SQLError("aggregate functions cannot be nested")
            arg = self.bind(arg_node, scope)
            if _has_outer(arg):
                raise UnsupportedSQL("an aggregate over a correlated reference")
            t = self._agg_type(func, arg.type)
            if func in ("sum", "avg", *SPREAD_FUNCS) and arg.type.kind == "string":
                arg = self._cast(arg, DOUBLE)  # text read as a number (SQLite, Spark)
                t = self._agg_type(func, arg.type)
            if func in ("sum", "avg") and arg.type.kind != "null" and not arg.type.numeric:
                raise SQLError(f"{func} needs a number, got {arg.type}")
            if func in ("sum", "avg") and arg.type.kind == "null":
                arg = Lit(None, DOUBLE)
            if func in SPREAD_FUNCS:
                if distinct:
                    raise UnsupportedSQL(f"{func}(DISTINCT ...)")
                if arg.type.kind == "null":
                    arg = Lit(None, DOUBLE)
                elif arg.type.kind == "boolean" or not arg.type.numeric:
                    raise SQLError(f"{func} needs a number, got {arg.type}")
                if arg.type.kind == "double" and arg.type.bits == 32:
                    arg = self._cast(arg, DOUBLE)  # (FLOAT values as the doubles they are)
            if param:
                return (func, arg, distinct, param), Agg(func, arg, distinct, param), t
            return (func, arg, distinct), Agg(func, arg, distinct), t
        finally:
            scope.agg = saved

    def _agg_argument(self, node: Node, scope: Scope, func: str) -> Expr:
        """An aggregate's argument bound in the rows' scope (not another aggregate, not a
        correlated reference)."""
        for inner in _walk_no_subqueries(node):
            if isinstance(inner, _AGGS):
                raise SQLError("aggregate functions cannot be nested")
        arg = self.bind(node, scope)
        if _has_outer(arg):
            raise UnsupportedSQL(f"{func} over a correlated reference")
        return arg

    def _bind_percentile(self, n: Node, scope: Scope) -> tuple[tuple[Any, ...], Agg, SqlType]:
        """An exact percentile (DOUBLE): the values at the two ranks around ``(count - 1)
        * p`` interpolated (``percentile``, ``median``, ``percentile_cont``), or the first
        value whose share of the values up to it reaches ``p`` (``percentile_disc``; also
        ``percentile_approx``, as a value of the argument's type: exact is within any
        accuracy), NULLs skipped; ``param`` is ``(p, discrete, descending)``."""
        discrete = n.args.get("discrete") is not None
        desc = n.args.get("desc") is not None
        approx = n.args.get("approx") is not None
        func = "percentile_approx" if approx else "percentile_disc" if discrete else "percentile"
        acc = n.args.get("accuracy")
        if acc is not None:
            av = _fold(self.bind(acc, scope), self)
            if not isinstance(av, Lit) or av.type.kind != "int" or not 0 < int(av.value) < 2**31:
                raise SQLError(f"the accuracy of {func} must be a positive constant integer")
        arg_node, distinct = _distinct_one(n.this, func)
        arg = self._agg_argument(arg_node, scope, func)
        q = n.args.get("quantile")
        if q is None:
            raise SQLError(f"{func} needs a percentage")
        if isinstance(q, exp.Array) or (isinstance(q, exp.Func) and q.key == "array"):
            raise UnsupportedSQL(f"{func} of an array of percentages")
        pv = _fold(self.bind(q, scope), self)
        if not isinstance(pv, Lit) or not (pv.type.numeric and pv.type.kind != "boolean"):
            raise SQLError(f"the percentage of {func} must be a constant number")
        if pv.value is None:
            raise SQLError(f"the percentage of {func} must not be NULL")
        p = float(pv.value)
        if not 0.0 <= p <= 1.0:
            raise SQLError(f"the percentage of {func} must be between 0 and 1, got {p}")
        if arg.type.kind == "null":
            arg = Lit(None, DOUBLE)
        elif approx and arg.type.kind in ("date", "timestamp"):
            pass  # (a value of the column's own type)
        elif arg.type.kind == "boolean" or not arg.type.numeric:
            raise SQLError(f"{func} needs a number, got {arg.type}")
        param = (p, discrete, desc)
        t = arg.type if approx else DOUBLE
        return (func, arg, distinct, param), Agg(func, arg, distinct, param), t

    def _bind_value_at_extreme(self, n: Node, scope: Scope) -> tuple[tuple[Any, ...], Agg, SqlType]:
        """``max_by(x, y)`` / ``min_by(x, y)``: ``x`` of a row with the greatest (least)
        ``y``, rows with a NULL ``y`` skipped. The argument is a ``row`` of ``(y, x)``."""
        func = "max_by" if isinstance(n, exp.ArgMax) else "min_by"
        if n.this is None or n.expression is None:
            raise SQLError(f"{func} takes two arguments")
        if n.args.get("count") is not None:
            raise UnsupportedSQL(f"{func} with a count (an array of values)")
        x = self._agg_argument(n.this, scope, func)
        y = self._agg_argument(n.expression, scope, func)
        if y.type.kind == "null":
            y = Lit(None, INT)
        t = x.type if x.type.kind != "null" else INT
        row = Call("row", (y, x), t, True)
        return (func, row, False, ()), Agg(func, row), t

    def _double_argument(self, node: Node, scope: Scope, func: str) -> Expr:
        """A number's argument as the DOUBLE Spark computes a spread over."""
        if isinstance(node, exp.Distinct):
            raise UnsupportedSQL(f"{func}(DISTINCT ...)")
        arg = self._agg_argument(node, scope, func)
        if arg.type.kind == "null":
            return Lit(None, DOUBLE)
        if arg.type.kind == "boolean" or not arg.type.numeric:
            raise SQLError(f"{func} needs a number, got {arg.type}")
        return self._cast(arg, DOUBLE)

    def _bind_moment(self, n: Node, scope: Scope) -> tuple[tuple[Any, ...], Agg, SqlType]:
        """``skewness(x)`` / ``kurtosis(x)`` (DOUBLE): from exact sums of the values'
        first four powers."""
        func = "skewness" if isinstance(n, exp.Skewness) else "kurtosis"
        arg = self._double_argument(n.this, scope, func)
        return (func, arg, False, ()), Agg(func, arg), DOUBLE

    def _bind_pair(self, n: Node, func: str, scope: Scope) -> tuple[tuple[Any, ...], Agg, SqlType]:
        """A joint spread of ``(y, x)`` (``corr``, ``covar_*``, ``regr_*``; DOUBLE) over the
        rows where both are non-NULL: the argument is a ``row`` of the two as DOUBLEs, each
        NULL where either is."""
        y_node, x_node = n.this, n.expression
        if y_node is None or x_node is None:
            raise SQLError(f"{func} takes two arguments")
        self._double_argument(y_node, scope, func)  # (type checks)
        self._double_argument(x_node, scope, func)
        both = exp.and_(
            exp.Not(this=exp.Is(this=y_node.copy(), expression=exp.Null())),
            exp.Not(this=exp.Is(this=x_node.copy(), expression=exp.Null())),
        )
        y, x = (
            self._double_argument(
                exp.Case(ifs=[exp.If(this=both.copy(), true=v.copy())]), scope, func
            )
            for v in (y_node, x_node)
        )
        row = Call("row", (y, x), DOUBLE, True)
        return (func, row, False, ()), Agg(func, row), DOUBLE

    def _bind_listagg(self, n: Node, scope: Scope) -> tuple[tuple[Any, ...], Agg, SqlType]:
        """``listagg`` / ``string_agg`` (``group_concat(x ORDER BY ...)`` in SQLite): the
        non-NULL values' texts joined by the separator (Spark's default none, SQLite's a
        comma), in the order of ``WITHIN GROUP (ORDER BY ...)`` and then of the texts.
        Spark leaves the order of rows that order does not decide to their arrival; here
        the texts decide it, so the answer does not depend on how the rows came. SQLite's
        unordered ``group_concat`` follows its scan order, which is refused. ``param``:
        ``(separator, descending per key, NULLs first per key)``."""
        func = "listagg"
        body = n.this
        items: list[Node] = []
        if isinstance(body, exp.Order):
            items = list(body.expressions)
            body = body.this
        if self.dialect == "sqlite" and not items:
            # SQLite joins in the order its plan reads rows (a table's in rowid order),
            # which a view cannot follow; its answer is not the texts in order
            raise UnsupportedSQL("group_concat without ORDER BY (SQLite's scan order)")
        body, distinct = _distinct_one(body, func)
        raw = self._agg_argument(body, scope, func)
        value = Lit(None, STRING) if raw.type.kind == "null" else self._cast(raw, STRING)
        sep = "," if self.dialect == "sqlite" else ""
        sep_node = n.args.get("separator")
        if sep_node is not None:
            sv = _fold(self.bind(sep_node, scope), self)
            if not isinstance(sv, Lit) or sv.type.kind not in ("string", "null"):
                raise SQLError(f"the separator of {func} must be a constant string")
            sep = "" if sv.value is None else str(sv.value)
        keys: list[Expr] = []
        descs: list[bool] = []
        firsts: list[bool] = []
        for it in items:
            ordered = isinstance(it, exp.Ordered)
            k = self._agg_argument(it.this if ordered else it, scope, func)
            desc = ordered and bool(it.args.get("desc"))
            nf = it.args.get("nulls_first") if ordered else None
            keys.append(k)
            descs.append(desc)
            firsts.append(bool(nf) if nf is not None else not desc)
        if distinct and any(k != raw for k in keys):
            raise SQLError(f"{func}(DISTINCT x) may be ordered by x only")
        row = Call("row", (value, *keys), STRING, True)
        param = (sep, tuple(descs), tuple(firsts))
        return (func, row, distinct, param), Agg(func, row, distinct, param), STRING

    def _bind_bit_fold(self, n: Node, scope: Scope) -> tuple[tuple[Any, ...], Agg, SqlType]:
        """``bit_and`` / ``bit_or`` / ``bit_xor`` of an integer column's non-NULL values,
        of its own type (NULL over none)."""
        func = _BIT_FOLD_NODES[type(n)]
        distinct = isinstance(n.this, exp.Distinct)
        arg_node = n.this.expressions[0] if distinct else n.this
        arg = self._agg_argument(arg_node, scope, func)
        if arg.type.kind == "null":
            arg = Lit(None, INT)
        if arg.type.kind != "int":
            raise SQLError(f"{func} needs an integer, got {arg.type}")
        return (func, arg, distinct, ()), Agg(func, arg, distinct), arg.type

    def _bind_mode(self, n: Node, scope: Scope) -> tuple[tuple[Any, ...], Agg, SqlType]:
        """``mode(x[, deterministic])``: the most frequent non-NULL value, the least of
        those tied (Spark's deterministic choice; without it Spark picks any). ``mode()
        WITHIN GROUP (ORDER BY x)`` is the same; with ``DESC`` the greatest of those tied
        (``param`` ``(True,)``), as Spark 4 chooses."""
        if n.this is None:
            raise SQLError("mode() needs an argument or WITHIN GROUP (ORDER BY ...)")
        if isinstance(n.this, exp.Distinct):
            raise SQLError("mode(DISTINCT ...) is not defined")
        det = n.args.get("deterministic")
        if det is not None and not isinstance(det, exp.Boolean):
            raise SQLError("the second argument of mode must be TRUE or FALSE")
        arg = self._agg_argument(n.this, scope, "mode")
        t = arg.type if arg.type.kind != "null" else INT
        param = (True,) if n.args.get("desc") is not None else ()
        return ("mode", arg, False, param), Agg("mode", arg, param=param), t

    def _count_argument(self, n: Node, scope: Scope) -> Node | None:
        """The argument of ``count(...)`` as one expression: ``count(a, b)`` counts the rows
        where every argument is non-NULL (Spark's rule), so it is ``count(CASE WHEN a IS
        NOT NULL AND b IS NOT NULL THEN 1 END)``; ``t.*`` (and ``*`` among several or after
        DISTINCT) stands for the columns of ``t`` (of every source)."""
        arg = n.this
        distinct = isinstance(arg, exp.Distinct)
        items = list(arg.expressions) if distinct else ([arg] if arg is not None else [])
        items += list(n.expressions)
        items = [x.unnest() if isinstance(x, exp.Paren) else x for x in items]  # count((*))
        if not items:
            return arg
        starred = [
            isinstance(x, exp.Star) or (isinstance(x, exp.Column) and isinstance(x.this, exp.Star))
            for x in items
        ]
        if not any(starred) and (distinct or len(items) == 1):
            return arg
        if len(items) == 1 and isinstance(items[0], exp.Star) and not distinct:
            return arg  # count(*)
        cols: list[Node] = []
        for x, star in zip(items, starred, strict=True):
            if not star:
                cols.append(x)
                continue
            table = _name(x.args.get("table")) if isinstance(x, exp.Column) else ""
            hits = [
                exp.column(f.name, table=alias)
                for alias, _, fs in scope.sources
                if not table or alias == table
                for f in fs
            ]
            if not hits:
                raise SQLError(f"'{x.sql()}' names no columns here")
            cols.extend(hits)
        if distinct:
            return exp.Distinct(expressions=cols)
        if len(cols) == 1:
            return cols[0]
        present = exp.and_(
            *(exp.Not(this=exp.Is(this=c.copy(), expression=exp.Null())) for c in cols)
        )
        return exp.Case(ifs=[exp.If(this=present, true=exp.Literal.number(1))])

    def _bind_count_distinct_rows(
        self, n: Node, func: str, arg_node: Node, scope: Scope
    ) -> tuple[tuple[Any, ...], Agg, SqlType]:
        """``count(DISTINCT a, b, ...)``: how many distinct tuples of values with no NULL
        among them. The argument is a ``row`` of the columns (read only by the distinct
        count)."""
        if func != "count":
            raise SQLError(f"{func}(DISTINCT ...) takes one argument")
        for inner in _walk_no_subqueries(arg_node):
            if isinstance(inner, _AGGS) and inner is not n:
                raise SQLError("aggregate functions cannot be nested")
        args = tuple(self.bind(x, scope) for x in arg_node.expressions)
        if any(_has_outer(a) for a in args):
            raise UnsupportedSQL("an aggregate over a correlated reference")
        row = Call("row", args, BIGINT, any(a.nullable for a in args))
        return ("count", row, True), Agg("count", row, True), BIGINT

    # -- window functions --------------------------------------------------------------------
    def _plan_windows(self, windows: list[Node], scope: Scope) -> None:
        """Window nodes for the window functions of a SELECT, over its relation after
        WHERE, GROUP BY and HAVING: the expressions they read appended as columns, then one
        ``Window`` per partitioning and order, each appending its functions' values."""
        assert scope.plan is not None
        base = scope.plan
        nb = len(base.fields)
        extra: list[Expr] = []

        def column(e: Expr) -> int:
            if isinstance(e, Col) and e.index < nb:
                return e.index
            for i, x in enumerate(extra):
                if x == e:
                    return nb + i
            extra.append(e)
            return nb + len(extra) - 1

        specs: dict[tuple[Any, ...], list[tuple[str, WinFunc, Field]]] = {}
        for w in windows:
            text = w.sql()
            if any(text in (k for k, _, _ in v) for v in specs.values()):
                continue
            if any(x is not w for x in w.find_all(exp.Window)):
                raise UnsupportedSQL("a window function inside a window function")
            if w.args.get("alias") is not None and not w.args.get("order"):
                raise UnsupportedSQL("named windows (OVER w) are not supported")
            part = tuple(
                column(self._window_operand(p, scope)) for p in w.args.get("partition_by") or []
            )
            keys: list[SortKey] = []
            order_types: list[SqlType] = []
            order = w.args.get("order")
            for o in order.expressions if order is not None else []:
                desc = bool(o.args.get("desc"))
                nf = o.args.get("nulls_first")
                nulls_first = bool(nf) if nf is not None else (not desc)
                e = self._window_operand(o.this, scope)  # (bound once: a subquery joins once)
                keys.append(SortKey(column(e), desc, nulls_first))
                order_types.append(e.type)
            func, fld = self._window_func(w, scope, column, order_types)
            specs.setdefault((part, tuple(keys)), []).append((text, func, fld))
        plan: Plan = base
        if extra:
            plan = Project(
                base,
                tuple(_col(i, f) for i, f in enumerate(base.fields)) + tuple(extra),
                base.fields
                + tuple(
                    Field(f"_wx{i}", e.type if e.type.kind != "null" else INT, e.nullable)
                    for i, e in enumerate(extra)
                ),
            )
        for (part, okeys), items in specs.items():
            at = len(plan.fields)
            for j, (text, _, _) in enumerate(items):
                scope.windows[text] = at + j
            plan = Window(
                plan,
                part,
                okeys,
                tuple(f for _, f, _ in items),
                plan.fields
                + tuple(
                    Field(f"_w{at + j}", fld.type, fld.nullable)
                    for j, (_, _, fld) in enumerate(items)
                ),
            )
        scope.plan = plan

    def _window_operand(self, node: Node, scope: Scope) -> Expr:
        e = self.bind(node, scope)
        if _has_outer(e):
            raise UnsupportedSQL("a window over a correlated reference")
        return e

    def _window_func(
        self, w: Node, scope: Scope, column: Any, order_types: list[SqlType]
    ) -> tuple[WinFunc, Field]:
        """The function of window ``w`` and the field of its value."""
        node = w.this
        ignore = False
        if isinstance(node, exp.RespectNulls):
            node = node.this
        if isinstance(node, exp.IgnoreNulls):
            node = node.this
            ignore = True
            if not isinstance(
                node, (exp.Lag, exp.Lead, exp.FirstValue, exp.LastValue, exp.NthValue)
            ):
                raise UnsupportedSQL(f"IGNORE NULLS in {node.sql(self.dialect)[:40]}")
        frame = self._window_frame(w.args.get("spec"), order_types)
        name = type(node).__name__
        ranks = {
            "RowNumber": ("row_number", INT),
            "Rank": ("rank", INT),
            "DenseRank": ("dense_rank", INT),
            "PercentRank": ("percent_rank", DOUBLE),
            "CumeDist": ("cume_dist", DOUBLE),
        }
        if name in ranks:
            if node.expressions or node.this is not None:
                raise SQLError(f"{ranks[name][0]}() takes no arguments")
            func, t = ranks[name]
            return WinFunc(func), Field("", t, False)
        if isinstance(node, exp.Ntile):
            k = self._window_int(node.this, "ntile", 1)
            if k is None:
                raise SQLError("ntile needs a number of buckets")
            return WinFunc("ntile", (), k), Field("", INT, False)
        if isinstance(node, (exp.Lag, exp.Lead)):
            func = "lag" if isinstance(node, exp.Lag) else "lead"
            x = self._window_operand(node.this, scope)
            off = node.args.get("offset")
            k = 1 if off is None else self._window_int(off, func, 0)
            default = node.args.get("default")
            t = x.type if x.type.kind != "null" else INT
            args = [x]
            if default is not None:
                d = self._window_operand(default, scope)
                t = common_type(t, d.type, func)
                args = [self._cast(x, t), self._cast(d, t)]
            else:
                args = [self._cast(x, t)]
            return (
                WinFunc(func, tuple(column(a) for a in args), int(k or 0), ignore_nulls=ignore),
                Field("", t, True),
            )
        if isinstance(node, (exp.FirstValue, exp.LastValue, exp.NthValue)):
            func = {"FirstValue": "first_value", "LastValue": "last_value"}.get(name, "nth_value")
            x = self._window_operand(node.this, scope)
            k = 0
            if func == "nth_value":
                k = self._window_int(node.args.get("offset"), func, 1) or 0
            t = x.type if x.type.kind != "null" else INT
            return (
                WinFunc(func, (column(self._cast(x, t)),), k, frame, ignore),
                Field("", t, True),
            )
        if isinstance(node, _AGGS):
            if (
                isinstance(node, _WHOLE_GROUP_AGGS)
                or type(node) in _PAIR_NODES
                or type(node) in _BIT_FOLD_NODES
                or isinstance(node, exp.GroupConcat)
            ):
                what = "a percentile" if isinstance(node, _Percentile) else _spark_text(node)
                raise UnsupportedSQL(f"{what} over an ordered window or a frame")
            fname = type(node).__name__.lower()
            fname = _SPREAD.get(fname, fname)
            arg_node = node.this
            if isinstance(arg_node, exp.Distinct):
                raise UnsupportedSQL(f"{fname}(DISTINCT ...) over a window")
            if isinstance(node, exp.Count) and (arg_node is None or isinstance(arg_node, exp.Star)):
                return WinFunc("count_star", (), 0, frame), Field("", BIGINT, False)
            if arg_node is None:
                raise SQLError(f"{fname}() needs an argument")
            saved = scope.windows
            arg = self._window_operand(arg_node, scope)
            scope.windows = saved
            if fname in ("sum", "avg") and arg.type.kind == "string" and self.dialect == "sqlite":
                arg = self._cast(arg, DOUBLE)
            if fname in ("sum", "avg") and arg.type.kind == "null":
                arg = Lit(None, DOUBLE)
            if fname in ("sum", "avg") and not arg.type.numeric:
                raise SQLError(f"{fname} needs a number, got {arg.type}")
            if (
                fname in SPREAD_FUNCS
                and arg.type.kind != "null"
                and (arg.type.kind == "boolean" or not arg.type.numeric)
            ):
                raise SQLError(f"{fname} needs a number, got {arg.type}")
            if arg.type.kind == "null" and fname in SPREAD_FUNCS:
                arg = Lit(None, DOUBLE)
            if arg.type.kind == "double" and arg.type.bits == 32 and fname != "count":
                arg = self._cast(arg, DOUBLE)
            t = self._agg_type(fname, arg.type)
            return (
                WinFunc(fname, (column(arg),), 0, frame),
                Field("", t, fname != "count"),
            )
        raise UnsupportedSQL(f"window function {node.sql(self.dialect)[:60]}")

    def _window_int(self, node: Node | None, what: str, least: int) -> int | None:
        if node is None:
            return None
        if isinstance(node, exp.Neg):
            raise SQLError(f"{what} needs an integer of at least {least}")
        if not (isinstance(node, exp.Literal) and not node.is_string):
            raise UnsupportedSQL(f"{what} with a non-constant argument")
        try:
            k = int(node.this)
        except ValueError:
            raise SQLError(f"{what} needs an integer, got {node.this}") from None
        if k < least:
            raise SQLError(f"{what} needs an integer of at least {least}, got {k}")
        return k

    def _window_frame(self, spec: Node | None, order_types: list[SqlType]) -> tuple[str, Any, Any]:
        """``(kind, start, end)`` of a frame clause (see ``WinFunc``); without one, the
        rows up to the current row's last peer when ordered, else the whole partition."""
        ordered = bool(order_types)
        if spec is None:
            return ("range", None, 0) if ordered else ("range", None, None)
        kind = str(spec.args.get("kind") or "ROWS").lower()
        if kind not in ("rows", "range"):
            raise UnsupportedSQL(f"{kind.upper()} frames")

        def bound(value: Any, side: Any, is_start: bool) -> Any:
            side = str(side or "").upper()
            text = value.upper() if isinstance(value, str) else None
            if text == "UNBOUNDED":
                if (side == "FOLLOWING") == is_start:
                    edge = "start" if is_start else "end"
                    raise SQLError(f"a frame cannot {edge} at UNBOUNDED {side}")
                return None
            if text == "CURRENT ROW":
                return 0
            if isinstance(value, exp.Literal) and not value.is_string:
                k = self._range_offset(value.this, order_types) if kind == "range" else None
                if kind == "rows":
                    try:
                        k = int(value.this)
                    except ValueError:
                        raise SQLError(
                            f"a ROWS frame offset must be an integer, got {value.this}"
                        ) from None
                assert k is not None
                if k < 0:
                    raise SQLError("a frame offset must not be negative")
                return -k if side == "PRECEDING" else k
            if isinstance(value, exp.Interval):
                if kind == "rows":
                    raise SQLError(f"a ROWS frame offset must be an integer, got {value.sql()}")
                k = self._range_interval(value, order_types)
                if (k.n if isinstance(k, Months) else k) < 0:
                    raise SQLError("a frame offset must not be negative")
                return -k if side == "PRECEDING" else k
            raise UnsupportedSQL(f"frame bound {value}")

        start = bound(spec.args.get("start"), spec.args.get("start_side"), True)
        end_node = spec.args.get("end")
        end = 0 if end_node is None else bound(end_node, spec.args.get("end_side"), False)
        if start is not None and end is not None:
            months = [isinstance(x, Months) for x in (start, end)]
            if any(months) and not all(months) and (end if months[0] else start) != 0:
                # (a month has no fixed length: the two edges are not comparable)
                raise UnsupportedSQL("a RANGE frame with a month offset and a fixed one")
            lo_, hi_ = (x.n if isinstance(x, Months) else x for x in (start, end))
            if lo_ > hi_:
                raise SQLError("a window frame must not start after it ends")
        return (kind, start, end)

    def _range_offset(self, text: str, order_types: list[SqlType]) -> Any:
        """A RANGE frame's offset in the physical units of its one ORDER BY value (days
        for a DATE, unscaled for a DECIMAL)."""
        if len(order_types) != 1:
            raise SQLError("a RANGE frame with an offset needs exactly one ORDER BY value")
        t = order_types[0]
        try:
            d = decimal.Decimal(text)
        except decimal.InvalidOperation:
            raise SQLError(f"a frame offset must be a number, got {text}") from None
        if t.kind == "double":
            return float(d)
        if t.kind in ("int", "date"):
            if d != d.to_integral_value():
                raise UnsupportedSQL(f"a fractional RANGE offset over {t}")
            return int(d)
        if t.kind == "decimal":
            scaled = d.scaleb(t.scale)
            if scaled != scaled.to_integral_value():
                raise UnsupportedSQL(f"a RANGE offset with more places than {t}")
            return int(scaled)
        raise SQLError(
            f"a RANGE frame with an offset needs a number or a date to order by, not {t}"
        )

    def _range_interval(self, iv: Node, order_types: list[SqlType]) -> int | Months:
        """A RANGE frame's ``INTERVAL n unit`` offset in the physical units of its one
        ORDER BY value: days over a DATE (days, weeks), microseconds over a TIMESTAMP (weeks
        down to microseconds); months, quarters and years as ``Months`` (no fixed length)."""
        if len(order_types) != 1:
            raise SQLError("a RANGE frame with an offset needs exactly one ORDER BY value")
        t = order_types[0]
        unit_node = iv.args.get("unit")
        if unit_node is None or not isinstance(unit_node, exp.Var):
            raise UnsupportedSQL(f"a RANGE offset of {iv.sql()}")
        unit = unit_node.name.lower()
        unit = unit[:-1] if unit.endswith("s") else unit
        try:
            n = decimal.Decimal(str(iv.this.this if isinstance(iv.this, exp.Literal) else "x"))
        except decimal.InvalidOperation:
            raise UnsupportedSQL(f"a RANGE offset of {iv.sql()}") from None
        if unit in ("month", "year", "quarter"):
            if t.kind not in ("date", "timestamp"):
                raise SQLError(
                    f"a RANGE offset of {iv.sql()} needs a DATE or TIMESTAMP to order by"
                )
            if n != n.to_integral_value():
                raise UnsupportedSQL(f"a RANGE offset of {iv.sql()}: not a whole number")
            return Months(int(n) * {"month": 1, "quarter": 3, "year": 12}[unit])
        if unit not in _UNIT_MICROS:
            raise UnsupportedSQL(f"a RANGE offset of {iv.sql()}")
        if t.kind == "date":
            if unit not in ("week", "day"):
                raise UnsupportedSQL(f"a RANGE offset of {iv.sql()} over a DATE")
            k = n * (7 if unit == "week" else 1)
        elif t.kind == "timestamp":
            k = n * _UNIT_MICROS[unit]
        else:
            raise SQLError(f"a RANGE offset of {iv.sql()} needs a DATE or TIMESTAMP to order by")
        if k != k.to_integral_value():
            whole = "days" if t.kind == "date" else "microseconds"
            raise UnsupportedSQL(f"a RANGE offset of {iv.sql()}: not a whole number of {whole}")
        return int(k)

    def _agg_type(self, func: str, t: SqlType) -> SqlType:
        if func == "count":
            return BIGINT
        if func in ("min", "max"):
            return t if t.kind != "null" else INT
        if t.kind == "null" or func in SPREAD_FUNCS:
            return DOUBLE
        if func == "sum":
            if t.kind in ("int", "boolean"):
                return BIGINT
            if t.kind == "decimal":
                return decimal_type(min(38, t.precision + 10), t.scale)
            return DOUBLE
        if func == "avg":
            if self.dialect == "spark" and t.kind == "decimal":
                # four more digits and places, capped at 38 each (no scale is given up
                # for integer digits, unlike arithmetic's result types)
                return decimal_type(min(38, t.precision + 4), min(38, t.scale + 4))
            return DOUBLE
        raise UnsupportedSQL(f"aggregate {func}")

    # -- expressions -----------------------------------------------------------------------
    def _cast(self, e: Expr, t: SqlType) -> Expr:
        if e.type == t:
            return e
        if isinstance(e, Lit):
            if e.value is None:
                return Lit(None, t)
            # (text read as a FLOAT is rounded to single precision by the cast itself,
            # which ``bind`` folds)
            if isinstance(e.value, float) and not math.isfinite(e.value) and t.kind == "decimal":
                return Lit(None, t)  # (NaN and the infinities are no DECIMAL: NULL, as Spark)
            text_to_float = isinstance(e.value, str) and t.kind == "double" and t.bits == 32
            conv = _NO if text_to_float else _convert_const(e.value, Field("", t))
            if conv is not _NO:
                return Lit(conv, t)
        return Call("cast", (e,), t, e.nullable)

    def bind(self, node: Node, scope: Scope) -> Expr:
        """Our expression for a sqlglot expression in ``scope``."""
        if (
            isinstance(node, _AGGS)
            and scope.outer is not None
            and scope.outer.agg is not None
            and scope.outer.plan is not None
        ):
            # an aggregate of the enclosing query's rows, written in this subquery
            got = scope.outer.agg.by_sql.get(node.sql())
            if got is not None and any(isinstance(n, exp.Column) for n in node.walk()):
                f = scope.outer.plan.fields[got]
                return Outer(got, f.type, f.nullable, f.name)
        if isinstance(node, exp.Window):
            at = scope.windows.get(node.sql())
            if at is None:
                raise UnsupportedSQL(f"a window function here ({node.sql(self.dialect)[:60]})")
            assert scope.plan is not None
            return _col(at, scope.plan.fields[at])
        if scope.agg is not None:
            hit = self._agg_lookup(node, scope)
            if hit is not None:
                return hit
        fn = getattr(self, f"_b_{type(node).__name__}", None)
        if fn is None:
            if isinstance(node, exp.Func):
                return self._function(node, scope)
            raise UnsupportedSQL(f"{type(node).__name__} ({node.sql(self.dialect)[:60]})")
        out = fn(node, scope)
        if node.args.get("negate") is True:
            # ``x NOT LIKE p`` and friends carry their NOT as a flag
            out = Call("not", (self._bool(out, "NOT"),), BOOLEAN, out.nullable)
        if isinstance(out, Call) and not _reads_fields(out):
            folded = _fold(out, self)  # a constant: computed once, here
            if folded is not None:
                return folded
        return out

    def _agg_lookup(self, node: Node, scope: Scope) -> Expr | None:
        ctx = scope.agg
        assert ctx is not None and scope.plan is not None
        fields = scope.plan.fields
        if isinstance(node, _AGGS):
            at = ctx.by_sql.get(node.sql())
            if at is not None:
                return _col(at, fields[at])
            pre = Scope(scope.outer, in_loop=scope.in_loop)
            pre.plan = scope.plan.input if isinstance(scope.plan, Aggregate) else None
            pre.sources = scope.sources
            if pre.plan is None:
                pre.plan = _agg_input(scope.plan)
            key, _, _ = self._bind_agg(node, pre)
            idx = ctx.aggs.get(key)
            if idx is None:
                raise SQLError(f"aggregate {node.sql()} was not planned")
            return _col(idx, fields[idx])
        idx = ctx.keys.get(node.sql())
        if idx is not None:
            return _col(idx, fields[idx])
        if (
            scope.pre_keys
            and not isinstance(node, exp.Column)
            and not any(
                isinstance(n, (*_AGGS, exp.Subquery, exp.Select, exp.Exists, exp.AggFunc))
                for n in node.walk()
            )
        ):
            # an expression equal to a group key once bound, e.g. written with parentheses
            pre = Scope(scope.outer, in_loop=scope.in_loop)
            pre.sources = scope.sources
            pre.plan = _agg_input(scope.plan)
            try:
                e = self.bind(node, pre)
            except (SQLError, UnsupportedSQL):
                e = None
            if e is not None:
                for i, k in enumerate(scope.pre_keys):
                    if k == e:
                        return _col(i, fields[i])
        if isinstance(node, exp.Paren):
            return None
        if isinstance(node, exp.Column):
            # a column equal to a group key expression
            pre = Scope(scope.outer, in_loop=scope.in_loop)
            pre.sources = scope.sources
            pre.plan = _agg_input(scope.plan)
            try:
                e = self._b_Column(node, pre)
            except SQLError:
                e = None
            if e is not None and not isinstance(e, Outer):
                for i, k in enumerate(scope.pre_keys):
                    if k == e:
                        return _col(i, fields[i])
                raise SQLError(
                    f"column '{node.sql()}' must appear in GROUP BY or be used in "
                    "an aggregate function"
                )
            return e
        return None

    def _b_Column(self, node: Node, scope: Scope) -> Expr:
        table = _name(node.args.get("table"))
        name = _name(node.this)
        if isinstance(node.this, exp.Star):
            raise SQLError("'*' is not valid here")
        s: Scope | None = scope
        depth = 0
        while s is not None:
            hit = s.find(table, name) if s.sources else None
            if hit is not None:
                idx, f = hit
                if depth == 0:
                    return Col(idx, f.type, f.nullable, f.name)
                if depth > 1:
                    why = self._why.get((table, name))
                    raise UnsupportedSQL(
                        f"a correlated reference to '{node.sql()}' from {depth} levels of "
                        f"subqueries down{f' through {why}' if why else ''}"
                    )
                if s.agg is not None:
                    # the enclosing query is grouped: the column must be one of its keys
                    for i, k in enumerate(s.pre_keys):
                        if isinstance(k, Col) and k.index == idx:
                            assert s.plan is not None
                            g = s.plan.fields[i]
                            return Outer(i, g.type, g.nullable, g.name)
                    raise SQLError(
                        f"column '{node.sql()}' must appear in GROUP BY to be used "
                        "in a subquery of a grouped query"
                    )
                return Outer(idx, f.type, f.nullable, f.name)
            s = s.outer
            depth += 1
        if table:
            # qualification found its table around this query, so the reference crosses
            # a derived table or set operation whose plan is made on its own
            why = self._why.get((table, name))
            if why is not None:
                raise UnsupportedSQL(
                    f"a correlated reference to '{node.sql()}' where it cannot be "
                    f"decorrelated: {why}"
                )
            raise UnsupportedSQL(
                f"a correlated reference to '{node.sql()}' where it cannot be "
                "decorrelated (in a subquery planned on its own: with aggregates, LIMIT or "
                "set operations, a derived table or a join)"
            )
        raise SQLError(f"unknown column '{node.sql()}'")

    def _depth_of(self, node: Node, scope: Scope) -> int | None:
        """How many queries out from ``scope`` column ``node`` is found (0: its own)."""
        table, name = _name(node.args.get("table")), _name(node.this)
        s: Scope | None = scope
        depth = 0
        while s is not None:
            if s.sources and s.find(table, name) is not None:
                return depth
            s = s.outer
            depth += 1
        return None

    def _b_Paren(self, node: Node, scope: Scope) -> Expr:
        return self.bind(node.this, scope)

    def _b_Alias(self, node: Node, scope: Scope) -> Expr:
        return self.bind(node.this, scope)

    def _b_Literal(self, node: Node, scope: Scope) -> Expr:
        if node.is_string:
            return Lit(node.this, STRING)
        text = node.this
        if any(c in text for c in "eE"):
            return Lit(float(text), DOUBLE)
        if "." in text:
            if self.dialect == "sqlite":
                return Lit(float(text), DOUBLE)
            d = decimal.Decimal(text)
            sign, digits, expo = d.as_tuple()
            scale = max(0, -int(expo))
            prec = max(len(digits), scale, 1)
            return Lit(d, decimal_type(min(prec, 38), min(scale, 38)))
        v = int(text)
        return Lit(v, _int_literal_type(v, self.dialect))

    def _b_Null(self, node: Node, scope: Scope) -> Expr:
        return Lit(None, NULLTYPE)

    def _b_Boolean(self, node: Node, scope: Scope) -> Expr:
        return Lit(bool(node.this), BOOLEAN)

    def _b_Neg(self, node: Node, scope: Scope) -> Expr:
        a = self.bind(node.this, scope)
        if isinstance(a, Lit) and a.value is not None and a.type.numeric:
            v = -a.value
            t = a.type
            if t.kind == "int" and t == _int_literal_type(a.value, self.dialect):
                # a literal typed by its digits is typed by its negative's (-2147483648 is
                # an INT); a typed one (1L, CAST(1 AS BIGINT)) keeps its type
                t = _int_literal_type(v, self.dialect)
            return Lit(v, t)
        if a.type.kind == "string" and self.dialect == "spark":
            a = self._cast(a, DOUBLE)  # (Spark negates text as a DOUBLE)
        if not a.type.numeric and a.type.kind != "null":
            raise SQLError(f"cannot negate {a.type}")
        return self._negate(a)

    def _negate(self, a: Expr) -> Expr:
        parts = self._mixed_branches(a)
        if parts is not None:  # (an INTEGER branch stays one: SQLite, see _arith_by_branch)
            conds, vals, d = parts
            return self._case(conds, [self._negate(v) for v in vals], self._negate(d))
        return Call("neg", (a,), a.type, a.nullable)

    def _arith(self, op: str, a: Expr, b: Expr, what: str) -> Expr:
        if self.dialect == "sqlite" and op in ("add", "sub", "mul", "div", "mod"):
            got = self._arith_by_branch(op, a, b, what)
            if got is not None:
                return got
        ta, tb = a.type, b.type
        if ta.kind == "null" and tb.kind == "null":
            return Lit(None, INT)
        if ta.kind == "null":
            a = Lit(None, tb)
            ta = tb
        if tb.kind == "null":
            b = Lit(None, ta)
            tb = ta
        nullable = a.nullable or b.nullable or op in ("div", "idiv", "mod")
        if ta.kind == "string" or tb.kind == "string":
            if self.dialect == "sqlite":
                a = self._cast(a, DOUBLE) if ta.kind == "string" else a
                b = self._cast(b, DOUBLE) if tb.kind == "string" else b
                return self._arith(op, a, b, what)
            if self.dialect == "spark":
                # text beside a number is cast to BIGINT (beside an integer) or DOUBLE
                ca, cb = spark_text_type(ta, tb), spark_text_type(tb, ta)
                if ca in (BIGINT, DOUBLE) or cb in (BIGINT, DOUBLE):
                    a = self._cast(a, ca) if ca is not None else a
                    b = self._cast(b, cb) if cb is not None else b
                    return self._arith(op, a, b, what)
            raise SQLError(f"type mismatch: {ta} {what} {tb}")
        if ta.kind == "boolean" or tb.kind == "boolean":
            raise SQLError(f"type mismatch: {ta} {what} {tb}")
        if ta.kind in ("date", "timestamp") or tb.kind in ("date", "timestamp"):
            return self._date_arith(op, a, b, what)
        if op == "div" and self.dialect == "sqlite" and ta.kind == "int" and tb.kind == "int":
            op = "idiv"
        if op == "pow":
            return Call(op, (self._cast(a, DOUBLE), self._cast(b, DOUBLE)), DOUBLE, nullable)
        if op == "idiv":
            # integers and decimals are divided as they are (the quotient truncated);
            # anything else as BIGINT
            if ta.kind not in ("int", "decimal") or tb.kind not in ("int", "decimal"):
                a, b = self._cast(a, BIGINT), self._cast(b, BIGINT)
            return Call(
                "idiv",
                (a, b),
                BIGINT if self.dialect == "spark" else (ta if ta.bits >= tb.bits else tb),
                True,
            )
        if op == "mod" and self.dialect == "sqlite" and (ta.kind != "int" or tb.kind != "int"):
            # SQLite's % takes the integer parts of REAL operands; the remainder is a REAL
            # when either was one
            ints = (self._cast(a, BIGINT), self._cast(b, BIGINT))
            return self._cast(Call(op, ints, BIGINT, nullable), DOUBLE)
        if "double" in (ta.kind, tb.kind):
            # FLOAT with FLOAT or an integer stays FLOAT (32-bit); anything else is DOUBLE
            narrow32 = (
                all(t.kind != "double" or t.bits == 32 for t in (ta, tb))
                and "decimal" not in (ta.kind, tb.kind)
                and self.dialect == "spark"
            )
            return Call(op, (a, b), FLOAT if narrow32 else DOUBLE, nullable)
        if "decimal" in (ta.kind, tb.kind) or (op == "div" and self.dialect == "spark"):
            if op == "div" and ta.kind == "int" and tb.kind == "int":
                return Call(op, (self._cast(a, DOUBLE), self._cast(b, DOUBLE)), DOUBLE, nullable)
            da = _lit_decimal(a) or _as_decimal(ta)
            db = _lit_decimal(b) or _as_decimal(tb)
            p1, s1, p2, s2 = da.precision, da.scale, db.precision, db.scale
            if op in ("add", "sub"):
                s = max(s1, s2)
                t = adjust_decimal(max(p1 - s1, p2 - s2) + s + 1, s)
            elif op == "mul":
                t = adjust_decimal(p1 + p2 + 1, s1 + s2)
            elif op == "div":
                s = max(6, s1 + p2 + 1)
                t = adjust_decimal(p1 - s1 + s2 + s, s)
            elif op == "mod":
                s = max(s1, s2)
                t = adjust_decimal(min(p1 - s1, p2 - s2) + s, s)
            else:
                raise UnsupportedSQL(f"{op} on decimals")
            return Call(op, (a, b), t, nullable)
        t = ta if ta.bits >= tb.bits else tb
        if self.dialect == "sqlite":
            t = BIGINT
        return Call(op, (a, b), t, nullable)

    def _date_arith(self, op: str, a: Expr, b: Expr, what: str) -> Expr:
        ta, tb = a.type, b.type
        if op == "sub" and ta.kind in ("date", "timestamp") and tb.kind in ("date", "timestamp"):
            if "timestamp" in (ta.kind, tb.kind):
                # an INTERVAL DAY TO SECOND in Spark (its days alone would be wrong)
                raise UnsupportedSQL("subtracting timestamps (an interval); use datediff")
            return Call("date_diff", (a, b), INT, a.nullable or b.nullable)
        if op in ("add", "sub") and ta.kind in ("date", "timestamp") and tb.kind == "int":
            n = b if op == "add" else Call("neg", (b,), tb, b.nullable)
            if ta.kind == "date":
                return Call("date_add_days", (a, n), DATE, a.nullable or b.nullable)
        if op == "add" and tb.kind == "date" and ta.kind == "int":
            return Call("date_add_days", (b, a), DATE, a.nullable or b.nullable)
        raise SQLError(f"type mismatch: {ta} {what} {tb}")

    def _binary(self, node: Node, scope: Scope, op: str, what: str) -> Expr:
        if isinstance(node.expression, exp.Interval):
            return self._interval(node, scope, op)
        a = self.bind(node.this, scope)
        b = self.bind(node.expression, scope)
        return self._arith(op, a, b, what)

    def _interval(self, node: Node, scope: Scope, op: str) -> Expr:
        a = self.bind(node.this, scope)
        iv = node.expression
        unit = (iv.args.get("unit").name if iv.args.get("unit") is not None else "DAY").lower()
        unit = unit.rstrip("s") if unit.endswith("s") else unit
        n_expr = self.bind(iv.this, Scope(None)) if not isinstance(iv.this, exp.Literal) else None
        if n_expr is None:
            try:
                n = int(str(iv.this.this).strip())
            except ValueError as e:
                raise UnsupportedSQL(f"interval {iv.sql()}") from e
        else:
            folded = _fold(n_expr, self)
            if folded is None or not isinstance(folded.value, int):
                raise UnsupportedSQL(f"interval {iv.sql()}")
            n = folded.value
        if op == "sub":
            n = -n
        if a.type.kind == "string" and self.dialect == "spark":
            # Spark reads the text as a TIMESTAMP and writes the sum back as text; months
            # and years are not added to text there
            if unit in ("month", "year"):
                raise SQLError(
                    f"type mismatch: STRING {'+' if op == 'add' else '-'} INTERVAL {unit}"
                )
            moved = self._interval_of(self._cast(a, TIMESTAMP), unit, n, op)
            return self._cast(moved, STRING)
        if a.type.kind == "string":
            a = self._cast(a, DATE)
        return self._interval_of(a, unit, n, op)

    def _interval_of(self, a: Expr, unit: str, n: int, op: str) -> Expr:
        """``a`` (a DATE or TIMESTAMP) moved by ``n`` of ``unit``."""
        if a.type.kind == "date":
            if unit == "day":
                return Call("date_add_days", (a, Lit(n, BIGINT)), DATE, a.nullable)
            if unit == "week":
                return Call("date_add_days", (a, Lit(7 * n, BIGINT)), DATE, a.nullable)
            if unit == "month":
                return Call("add_months", (a, Lit(n, BIGINT)), DATE, a.nullable)
            if unit == "year":
                return Call("add_months", (a, Lit(12 * n, BIGINT)), DATE, a.nullable)
            if unit in ("hour", "minute", "second"):
                a = self._cast(a, TIMESTAMP)
        if a.type.kind == "timestamp":
            micros = _UNIT_MICROS
            if unit in micros:
                return Call(
                    "ts_add_micros", (a, Lit(n * micros[unit], BIGINT)), TIMESTAMP, a.nullable
                )
            if unit in ("month", "year"):
                return Call(
                    "ts_add_months",
                    (a, Lit(n * (12 if unit == "year" else 1), BIGINT)),
                    TIMESTAMP,
                    a.nullable,
                )
        raise UnsupportedSQL(f"{a.type} {'+' if op == 'add' else '-'} INTERVAL {unit}")

    def _arith_by_branch(self, op: str, a: Expr, b: Expr, what: str) -> Expr | None:
        """SQLite: ``a op b`` where ``a`` or ``b`` is a CASE / COALESCE mixing INTEGER and
        REAL branches (``_mixed_branches``), as a CASE of ``op`` applied to each branch as
        it is (``COALESCE(i, r) / 2`` divides an integer ``i`` as integers, as SQLite does);
        None otherwise. ``UnsupportedSQL`` when copying the other operand into each branch
        would make the expression too large (several such values combined, deeply)."""
        for side in (0, 1):
            parts = self._mixed_branches(a if side == 0 else b)
            if parts is None:
                continue
            conds, vals, d = parts
            other = b if side == 0 else a
            if (len(vals) + 1) * _tree_size(other) > _BRANCH_COPIES:
                raise UnsupportedSQL(
                    "arithmetic over CASE / COALESCE values that mix INTEGER and REAL, "
                    "nested too deeply to keep each value's own type"
                )

            def one(v: Expr, side: int = side, other: Expr = other) -> Expr:
                return (
                    self._arith(op, v, other, what)
                    if side == 0
                    else self._arith(op, other, v, what)
                )

            return self._case(conds, [one(v) for v in vals], one(d))
        return None

    def _b_Add(self, node: Node, scope: Scope) -> Expr:
        return self._binary(node, scope, "add", "+")

    def _b_Sub(self, node: Node, scope: Scope) -> Expr:
        return self._binary(node, scope, "sub", "-")

    def _b_Mul(self, node: Node, scope: Scope) -> Expr:
        return self._binary(node, scope, "mul", "*")

    def _b_Div(self, node: Node, scope: Scope) -> Expr:
        return self._binary(node, scope, "div", "/")

    def _b_IntDiv(self, node: Node, scope: Scope) -> Expr:
        return self._binary(node, scope, "idiv", "DIV")

    def _b_Mod(self, node: Node, scope: Scope) -> Expr:
        return self._binary(node, scope, "mod", "%")

    def _b_Pow(self, node: Node, scope: Scope) -> Expr:
        return self._binary(node, scope, "pow", "POWER")

    def _quantified(self, op: str, node: Node, scope: Scope) -> Expr:
        """``x op ALL (q)`` / ``x op ANY (q)`` through the subquery's count, non-NULL count,
        min and max (SQL's rule: ALL over no rows is TRUE, ANY FALSE; a NULL that could
        decide the answer makes it NULL)."""
        quant = node.expression
        is_all = isinstance(quant, exp.All)
        q = quant.this
        while isinstance(q, exp.Subquery):
            q = q.this
        if not isinstance(q, exp.Select) or len(q.expressions) != 1:
            raise UnsupportedSQL(f"{'ALL' if is_all else 'ANY'} over this subquery")
        if op == "eq" and not is_all:
            return self.bind(
                exp.In(this=node.this.copy(), query=exp.Subquery(this=q.copy())), scope
            )
        if op == "ne" and is_all:
            return self.bind(
                exp.Not(this=exp.In(this=node.this.copy(), query=exp.Subquery(this=q.copy()))),
                scope,
            )
        val = _unalias(q.expressions[0])

        def agg(f: Node) -> Node:
            sub = q.copy()
            sub.set("expressions", [f])
            return exp.Subquery(this=sub)

        n = agg(exp.Count(this=exp.Star()))
        nn = agg(exp.Count(this=val.copy()))
        mx = agg(exp.Max(this=val.copy()))
        mn = agg(exp.Min(this=val.copy()))
        x = node.this
        cmp = {"gt": Node, "ge": Node, "lt": Node, "le": Node, "eq": Node, "ne": Node}
        T, F, N = exp.true(), exp.false(), exp.null()
        empty = exp.EQ(this=n, expression=exp.Literal.number(0))
        has_null = exp.LT(this=nn, expression=n.copy())
        xnull = exp.Is(this=x.copy(), expression=exp.Null())
        if is_all:
            # the answer is FALSE when some value fails the comparison
            fails = {
                "gt": exp.GTE(this=mx, expression=x.copy()),
                "ge": exp.GT(this=mx, expression=x.copy()),
                "lt": exp.LTE(this=mn, expression=x.copy()),
                "le": exp.LT(this=mn, expression=x.copy()),
                "eq": exp.or_(
                    exp.NEQ(this=mn, expression=x.copy()), exp.NEQ(this=mx, expression=x.copy())
                ),
            }[op]
            case = exp.Case(
                ifs=[
                    exp.If(this=empty, true=T),
                    exp.If(this=xnull, true=N),
                    exp.If(this=fails, true=F),
                    exp.If(this=has_null, true=N),
                ],
                default=T,
            )
        else:
            holds = {
                "gt": exp.LT(this=mn, expression=x.copy()),
                "ge": exp.LTE(this=mn, expression=x.copy()),
                "lt": exp.GT(this=mx, expression=x.copy()),
                "le": exp.GTE(this=mx, expression=x.copy()),
                "ne": exp.or_(
                    exp.NEQ(this=mn, expression=x.copy()), exp.NEQ(this=mx, expression=x.copy())
                ),
            }[op]
            case = exp.Case(
                ifs=[
                    exp.If(this=empty, true=F),
                    exp.If(this=xnull, true=N),
                    exp.If(this=holds, true=T),
                    exp.If(this=has_null, true=N),
                ],
                default=F,
            )
        del cmp
        return self.bind(case, scope)

    def _compare(self, op: str, a: Expr, b: Expr, what: str) -> Expr:
        if self.dialect == "sqlite":
            mixed = self._number_with_text(op, a, b, what)
            if mixed is not None:
                return mixed
        ta, tb = a.type, b.type
        if self.dialect == "spark" and {ta.kind, tb.kind} == {"string", "decimal"}:
            # Spark compares text with a DECIMAL as DOUBLEs ('1.51' is not 1.5)
            a, b = self._cast(a, DOUBLE), self._cast(b, DOUBLE)
        elif ta.kind == "string" and tb.kind not in ("string", "null"):
            a = self._cast(a, tb)
        elif tb.kind == "string" and ta.kind not in ("string", "null"):
            b = self._cast(b, ta)
        t = common_type(a.type, b.type, what)
        if self.dialect == "sqlite" and {a.type.kind, b.type.kind} == {"int", "double"}:
            # SQLite compares an INTEGER with a REAL by their exact values: 2**53 + 1 is
            # greater than 2.0**53, which equal as doubles. An equality keeps its form
            # over doubles too (the key a join matches on; the exact test is a filter)
            exact = Call("exact_compare", (a, b), BOOLEAN, a.nullable or b.nullable, op)
            if op != "eq":
                return exact
            ca, cb = self._cast(a, t), self._cast(b, t)
            both = Call("eq", (ca, cb), BOOLEAN, ca.nullable or cb.nullable)
            return Call("and", (both, exact), BOOLEAN, both.nullable)
        a, b = self._cast(a, t), self._cast(b, t)
        return Call(op, (a, b), BOOLEAN, a.nullable or b.nullable)

    def _number_with_text(self, op: str, a: Expr, b: Expr, what: str) -> Expr | None:
        """SQLite's comparison of a number with text, decided by affinity: a column (or a
        CAST) has its type's, any other expression none. Against a number with numeric
        affinity, text that reads as a number is that number and other text stays text;
        against text with affinity, a number without affinity is compared as its text;
        otherwise the two are compared as they are, and a number
        sorts below every text. None where neither side is a number and the other text."""
        ka, kb = a.type.kind, b.type.kind
        if ka in _NUMBER_KINDS and kb == "string":
            n, s, rel = a, b, op
        elif kb in _NUMBER_KINDS and ka == "string":
            n, s, rel = b, a, _FLIP[op]
        else:
            return None
        # (from here on the comparison reads ``n rel s``)
        if not _has_affinity(n):
            if _has_affinity(s):
                if isinstance(n, Lit):
                    if n.value is None:
                        return None
                    text: Expr = Lit(format_value(n.value, n.type, "sqlite"), STRING)
                else:
                    text = self._cast(n, STRING)
                return self._compare(rel, text, s, what)
            return _number_below_text(rel, n, s)
        if isinstance(s, Lit):
            if s.value is None:
                return None
            num = sqlite_number(s.value)
            if num is None:
                return _number_below_text(rel, n, s)
            lit = Lit(num, BIGINT if isinstance(num, int) else DOUBLE)
            return self._compare(rel, n, lit, what)
        whole = Call("numeric_text", (s, Lit("int", STRING)), BOOLEAN, s.nullable)
        real = Call("numeric_text", (s, Lit("real", STRING)), BOOLEAN, s.nullable)
        by_int = self._compare(rel, n, self._cast(s, BIGINT), what)
        by_real = self._compare(rel, self._cast(n, DOUBLE), self._cast(s, DOUBLE), what)
        args: tuple[Expr, ...] = (whole, by_int, real, by_real, _number_below_text(rel, n, s))
        if n.nullable or s.nullable:
            args = (_either_null(n, s), Lit(None, BOOLEAN), *args)
        return Call("case", args, BOOLEAN, True)

    def _b_EQ(self, node: Node, scope: Scope) -> Expr:
        if isinstance(node.expression, (exp.All, exp.Any)):
            return self._quantified("eq", node, scope)
        return self._compare(
            "eq", self.bind(node.this, scope), self.bind(node.expression, scope), "="
        )

    def _b_NEQ(self, node: Node, scope: Scope) -> Expr:
        if isinstance(node.expression, (exp.All, exp.Any)):
            return self._quantified("ne", node, scope)
        return self._compare(
            "ne", self.bind(node.this, scope), self.bind(node.expression, scope), "<>"
        )

    def _b_LT(self, node: Node, scope: Scope) -> Expr:
        if isinstance(node.expression, (exp.All, exp.Any)):
            return self._quantified("lt", node, scope)
        return self._compare(
            "lt", self.bind(node.this, scope), self.bind(node.expression, scope), "<"
        )

    def _b_LTE(self, node: Node, scope: Scope) -> Expr:
        if isinstance(node.expression, (exp.All, exp.Any)):
            return self._quantified("le", node, scope)
        return self._compare(
            "le", self.bind(node.this, scope), self.bind(node.expression, scope), "<="
        )

    def _b_GT(self, node: Node, scope: Scope) -> Expr:
        if isinstance(node.expression, (exp.All, exp.Any)):
            return self._quantified("gt", node, scope)
        return self._compare(
            "gt", self.bind(node.this, scope), self.bind(node.expression, scope), ">"
        )

    def _b_GTE(self, node: Node, scope: Scope) -> Expr:
        if isinstance(node.expression, (exp.All, exp.Any)):
            return self._quantified("ge", node, scope)
        return self._compare(
            "ge", self.bind(node.this, scope), self.bind(node.expression, scope), ">="
        )

    def _b_NullSafeEQ(self, node: Node, scope: Scope) -> Expr:
        e = self._compare(
            "eq", self.bind(node.this, scope), self.bind(node.expression, scope), "<=>"
        )
        assert isinstance(e, Call)
        return Call("nseq", e.args, BOOLEAN, False)

    def _b_NullSafeNEQ(self, node: Node, scope: Scope) -> Expr:
        e = self._compare(
            "eq", self.bind(node.this, scope), self.bind(node.expression, scope), "IS DISTINCT FROM"
        )
        assert isinstance(e, Call)
        return Call("not", (Call("nseq", e.args, BOOLEAN, False),), BOOLEAN, False)

    def _bool(self, e: Expr, what: str) -> Expr:
        return self._cast_bool(e, what)

    def _b_And(self, node: Node, scope: Scope) -> Expr:
        a = self._bool(self.bind(node.this, scope), "AND")
        b = self._bool(self.bind(node.expression, scope), "AND")
        return Call("and", (a, b), BOOLEAN, a.nullable or b.nullable)

    def _b_Or(self, node: Node, scope: Scope) -> Expr:
        a = self._bool(self.bind(node.this, scope), "OR")
        b = self._bool(self.bind(node.expression, scope), "OR")
        return Call("or", (a, b), BOOLEAN, a.nullable or b.nullable)

    def _b_Not(self, node: Node, scope: Scope) -> Expr:
        a = self._bool(self.bind(node.this, scope), "NOT")
        return Call("not", (a,), BOOLEAN, a.nullable)

    def _b_Is(self, node: Node, scope: Scope) -> Expr:
        a = self.bind(node.this, scope)
        target = node.expression
        if isinstance(target, exp.Null):
            return Call("is_null", (a,), BOOLEAN, False)
        if isinstance(target, exp.Boolean):
            return Call("truth", (self._bool(a, "IS"),), BOOLEAN, False, (bool(target.this), False))
        raise UnsupportedSQL(f"IS {target.sql()}")

    def _b_Between(self, node: Node, scope: Scope) -> Expr:
        x = self.bind(node.this, scope)
        lo = self.bind(node.args["low"], scope)
        hi = self.bind(node.args["high"], scope)
        a = self._compare("ge", x, lo, "BETWEEN")
        b = self._compare("le", x, hi, "BETWEEN")
        return Call("and", (a, b), BOOLEAN, a.nullable or b.nullable)

    def _b_In(self, node: Node, scope: Scope) -> Expr:
        if node.args.get("query") is not None:
            return self._mark_in(node, scope)
        if node.args.get("unnest") or node.args.get("field"):
            raise UnsupportedSQL("IN UNNEST")
        x = self.bind(node.this, scope)
        items = [self.bind(v, scope) for v in node.expressions]
        if not items:
            return Lit(False, BOOLEAN)  # x IN () is FALSE, whatever x is
        # (SQLite: a number against text is compared by affinity, and an INTEGER with a
        # REAL exactly, one item at a time)
        mixed = self.dialect == "sqlite" and any(
            _number_and_text(x.type, i.type) or {x.type.kind, i.type.kind} == {"int", "double"}
            for i in items
        )
        if all(isinstance(i, Lit) for i in items) and x.type.kind != "null" and not mixed:
            t = x.type
            for i in items:
                if i.type.kind != "null":
                    if t.kind == "string" and i.type.kind != "string":
                        t = common_type(i.type, i.type, "IN")
                        x = self._cast(x, t)
                    elif i.type.kind == "string" and t.kind != "string":
                        continue
                    else:
                        t = common_type(t, i.type, "IN")
            x = self._cast(x, t)
            vals = []
            for i in items:
                c = (
                    self._cast(i, t)
                    if i.type.kind != "string" or t.kind == "string"
                    else self._cast(i, t)
                )
                if isinstance(c, Lit):
                    vals.append(c.value)
                else:
                    folded = _fold(c, self)
                    vals.append(folded.value if folded is not None else None)
            has_null = any(v is None for v in vals)
            return Call("in", (x,), BOOLEAN, x.nullable or has_null, tuple(vals))
        # general: x = a OR x = b ...
        parts = [self._compare("eq", x, i, "IN") for i in items]
        out = parts[0]
        for p in parts[1:]:
            out = Call("or", (out, p), BOOLEAN, out.nullable or p.nullable)
        return out

    def _b_Exists(self, node: Node, scope: Scope) -> Expr:
        return self._mark_exists(node.this, scope)

    def _b_Subquery(self, node: Node, scope: Scope) -> Expr:
        return self._scalar(node, scope)

    def _b_Select(self, node: Node, scope: Scope) -> Expr:
        return self._scalar(node, scope)

    def _like(self, node: Node, scope: Scope, ci: bool) -> Expr:
        quant = node.expression
        if isinstance(quant, (exp.Any, exp.All)) and isinstance(quant.this, (exp.Tuple, exp.Paren)):
            # ``x LIKE ANY / ALL (p1, p2, ...)``: an OR / AND of one LIKE per pattern. NOT
            # (the node's flag, applied by ``bind`` to what this returns) negates each LIKE:
            # NOT LIKE ANY is NOT of the AND, NOT LIKE ALL NOT of the OR
            inner = quant.this
            pats = inner.expressions if isinstance(inner, exp.Tuple) else [inner.this]
            parts: list[Node] = []
            for pat in pats:
                one = node.copy()
                one.set("expression", pat.copy())
                one.set("negate", None)
                parts.append(one)
            anyof = isinstance(quant, exp.Any) != bool(node.args.get("negate"))
            both = exp.or_ if anyof else exp.and_
            return self.bind(exp.Paren(this=both(*parts)), scope)
        a = self.bind(node.this, scope)
        p = self.bind(node.expression, scope)
        esc = node.args.get("escape")
        # Spark escapes with a backslash unless told otherwise; SQLite has no escape
        escape = esc.this if esc is not None else ("\\" if self.dialect == "spark" else None)
        if a.type.kind not in ("string", "null"):
            a = self._cast(a, STRING)
        if p.type.kind not in ("string", "null"):
            p = self._cast(p, STRING)
        if (
            ci
            and self.dialect == "sqlite"
            and not (isinstance(p, Lit) and isinstance(p.value, str) and p.value.isascii())
        ):
            # SQLite folds the case of ASCII letters only: both sides lowered that way
            # (its lower()), compared as they are ('É' is not LIKE 'é%')
            def lowered(x: Expr) -> Expr:
                return Call("lower", (x,), STRING, x.nullable)

            return Call(
                "like", (lowered(a), lowered(p)), BOOLEAN, a.nullable or p.nullable, (escape, False)
            )
        return Call("like", (a, p), BOOLEAN, a.nullable or p.nullable, (escape, ci))

    def _b_Like(self, node: exp.Like, scope: Scope) -> Expr:
        return self._like(node, scope, self.dialect == "sqlite")

    def _b_ILike(self, node: exp.ILike, scope: Scope) -> Expr:
        return self._like(node, scope, True)

    def _b_Escape(self, node: Node, scope: Scope) -> Expr:
        inner = node.this
        inner.set("escape", node.expression)
        return self.bind(inner, scope)

    def _b_Case(self, node: Node, scope: Scope) -> Expr:
        subject = node.this
        conds: list[Expr] = []
        vals: list[Expr] = []
        subj = self.bind(subject, scope) if subject is not None else None
        for w in node.args.get("ifs") or []:
            c = self.bind(w.this, scope)
            if subj is not None:
                c = self._compare("eq", subj, c, "CASE")
            conds.append(self._bool(c, "CASE WHEN"))
            vals.append(self.bind(w.args["true"], scope))
        default = node.args.get("default")
        d = self.bind(default, scope) if default is not None else Lit(None, NULLTYPE)
        return self._case(conds, vals, d)

    def _one_type(self, a: SqlType, b: SqlType, what: str) -> SqlType:
        """``common_type``, and in Spark text beside a value of another type takes that
        value's type family (``spark_text_type``)."""
        if self.dialect == "spark":
            got = spark_text_type(a, b) or spark_text_type(b, a)
            if got is not None:
                return got
        return common_type(a, b, what)

    def _case(self, conds: list[Expr], vals: list[Expr], d: Expr) -> Expr:
        t = d.type
        for v in vals:
            t = self._one_type(t, v.type, "CASE")
        if t.kind == "null":
            t = INT
        args: list[Expr] = []
        for c, v in zip(conds, vals, strict=True):
            args += [c, self._branch_cast(v, t)]
        args.append(self._branch_cast(d, t))
        nullable = d.nullable or any(v.nullable for v in vals)
        return Call("case", tuple(args), t, nullable)

    def _branch_cast(self, v: Expr, t: SqlType) -> Expr:
        """A CASE / COALESCE branch ``v`` in the result type ``t``. In SQLite a value keeps
        its own type whichever branch it comes from, so an INTEGER branch of a REAL result
        is cast visibly (a constant too, not folded): arithmetic over the result is then
        done branch by branch (``_mixed_branches``), integer division where SQLite does it."""
        if (
            self.dialect == "sqlite"
            and t.kind == "double"
            and v.type.kind == "int"
            and not (isinstance(v, Lit) and v.value is None)
        ):
            return Call("cast", (v,), t, v.nullable)
        return self._cast(v, t)

    def _mixed_branches(self, e: Expr) -> tuple[list[Expr], list[Expr], Expr] | None:
        """For a SQLite CASE / COALESCE (IFNULL) whose REAL result has INTEGER branches
        (``_branch_cast``), or such a CASE among its branches: its conditions, its values as
        they were before the cast, and its default; None for anything else. (COALESCE's
        conditions: each value IS NOT NULL.)"""
        if not (
            self.dialect == "sqlite"
            and isinstance(e, Call)
            and e.type.kind == "double"
            and e.op in ("case", "coalesce")
        ):
            return None
        if e.op == "case":
            conds = list(e.args[0:-1:2])
            vals = list(e.args[1:-1:2])
        else:
            conds = []
            vals = list(e.args[:-1])
        d = e.args[-1]

        def raw(v: Expr) -> Expr:
            if (
                isinstance(v, Call)
                and v.op == "cast"
                and len(v.args) == 1
                and v.args[0].type.kind == "int"
            ):
                return v.args[0]
            return v

        rv, rd = [raw(v) for v in vals], raw(d)
        if all(r is v for r, v in zip([*rv, rd], [*vals, d], strict=True)) and not any(
            self._mixed_branches(v) is not None for v in [*vals, d]
        ):
            return None  # (no INTEGER branch, here or in a CASE among the branches)
        if e.op == "coalesce":
            conds = [Call("is_not_null", (r,), BOOLEAN, False) for r in rv]
        return conds, rv, rd

    def _b_If(self, node: Node, scope: Scope) -> Expr:
        c = self._bool(self.bind(node.this, scope), "IF")
        a = self.bind(node.args["true"], scope)
        f = node.args.get("false")
        b = self.bind(f, scope) if f is not None else Lit(None, NULLTYPE)
        return self._case([c], [a], b)

    def _b_Coalesce(self, node: Node, scope: Scope) -> Expr:
        args = []
        for e in [node.this, *node.expressions]:
            args.append(self.bind(e, scope))
            if (
                self.dialect == "sqlite"
                and isinstance(args[-1], Lit)
                and args[-1].value is not None
            ):
                # SQLite's value is the first non-NULL one as it is: the arguments after a
                # constant are never looked at (nor must they be grouped columns; an
                # aggregate among them still makes the query an aggregate one: it is
                # planned, and its unread value pruned)
                if len(args) == 1:
                    return args[0]
                break
        t = args[0].type
        for a in args[1:]:
            t = self._one_type(t, a.type, "COALESCE")
        if t.kind == "null":
            return Lit(None, INT)
        cast = tuple(self._branch_cast(a, t) for a in args)
        return Call("coalesce", cast, t, all(a.nullable for a in args))

    def _b_Nullif(self, node: Node, scope: Scope) -> Expr:
        a = self.bind(node.this, scope)
        b = self.bind(node.expression, scope)
        if self.dialect == "spark" and "string" in (a.type.kind, b.type.kind):
            eq = self._compare("eq", a, b, "NULLIF")
            assert isinstance(eq, Call)
            ca, cb = eq.args
            if ca.type != a.type:  # (the value stays the first argument as it is)
                return Call("nullif", (a, ca, cb), a.type, True)
            return Call("nullif", (a, cb), a.type, True)
        if self.dialect == "sqlite" and _number_and_text(a.type, b.type):
            return a  # (a function's arguments have no affinity: a number is never text)
        if self.dialect == "sqlite" and {a.type.kind, b.type.kind} == {"int", "double"}:
            eq = self._compare("eq", a, b, "NULLIF")  # (exactly: SQLite's comparison)
            return Call("case", (eq, Lit(None, a.type), a), a.type, True)
        t = common_type(a.type, b.type, "NULLIF")
        # the value is the first argument as it is (its type, as in Spark and SQLite); only
        # the comparison is made in the common type
        if t == a.type:
            return Call("nullif", (a, self._cast(b, t)), a.type, True)
        return Call("nullif", (a, self._cast(a, t), self._cast(b, t)), a.type, True)

    def _b_Cast(self, node: Node, scope: Scope) -> Expr:
        a = self.bind(node.this, scope)
        t = sql_type(node.args["to"], self.dialect)
        if t.kind == "null":
            raise UnsupportedSQL(f"CAST to {node.args['to'].sql()}")
        if (
            isinstance(a, Lit)
            and a.value is not None
            and a.type.kind == "string"
            and t.kind in ("date", "timestamp")
        ):
            conv = _convert_const(a.value, Field("", t))
            if conv is _NO:
                raise SQLError(f"'{a.value}' is not a valid {t}")
            return Lit(conv, t)
        return self._cast_expr(a, t)

    def _cast_expr(self, a: Expr, t: SqlType) -> Expr:
        if a.type == t:
            return a
        nullable = a.nullable or (a.type.kind == "string" and t.kind != "string")
        if isinstance(a, Lit):
            c = self._cast(a, t)
            if isinstance(c, Lit):
                return c
        return Call("cast", (a,), t, nullable)

    def _b_TryCast(self, node: Node, scope: Scope) -> Expr:
        """``try_cast``: ANSI mode's cast with NULL where that raises (text that is not a
        value of the type, a value past the type). sqlglot reads Spark's plain ``CAST`` as
        a ``TryCast`` too (its older mode's cast gives NULL for bad text): only one marked
        ``safe`` is a ``try_cast``."""
        if not node.args.get("safe"):
            return self._b_Cast(node, scope)
        a = self.bind(node.this, scope)
        t = sql_type(node.args["to"], self.dialect)
        if t.kind == "null":
            raise UnsupportedSQL(f"TRY_CAST to {node.args['to'].sql()}")
        if a.type == t:
            return a
        return Call("try_cast", (a,), t, True)

    def _b_DPipe(self, node: Node, scope: Scope) -> Expr:
        a = self.bind(node.this, scope)
        b = self.bind(node.expression, scope)
        return Call("concat", (a, b), STRING, a.nullable or b.nullable)

    def _b_Concat(self, node: Node, scope: Scope) -> Expr:
        args = [self.bind(e, scope) for e in node.expressions]
        return Call("concat", tuple(args), STRING, any(a.nullable for a in args))

    def _b_Interval(self, node: Node, scope: Scope) -> Expr:
        raise UnsupportedSQL("an INTERVAL outside date arithmetic")

    def _b_Extract(self, node: Node, scope: Scope) -> Expr:
        return self._extract_part(node.this.name.lower(), self.bind(node.expression, scope))

    def _extract_part(self, part: str, a: Expr) -> Expr:
        """``EXTRACT(part FROM a)`` / ``date_part('part', a)``."""
        out = self._extract(part, a)
        if self.dialect == "spark" and isinstance(out, Call) and out.extra == "second":
            # Spark's EXTRACT(SECOND ...) keeps the fraction: a DECIMAL(8,6) (second() not)
            return Call("extract", out.args, decimal_type(8, 6), out.nullable, "second_exact")
        return out

    def _extract(self, part: str, a: Expr) -> Expr:
        aliases = {
            "years": "year",
            "yyyy": "year",
            "months": "month",
            "mon": "month",
            "days": "day",
            "dayofmonth": "day",
            "dow": "dayofweek",
            "dow_iso": "dayofweek_iso",
            "doy": "dayofyear",
            "hours": "hour",
            "minutes": "minute",
            "seconds": "second",
            "qtr": "quarter",
        }
        part = aliases.get(part, part)
        if a.type.kind == "string" and part in ("hour", "minute", "second"):
            # (a time of day from text: a timestamp's, or a time written alone)
            a = Call("clock_text", (a,), TIMESTAMP, True)
        elif a.type.kind == "string":
            a = self._cast(a, DATE)
        if a.type.kind not in ("date", "timestamp", "null"):
            raise SQLError(f"EXTRACT({part}) needs a date or timestamp, got {a.type}")
        if part not in (
            "year",
            "month",
            "day",
            "quarter",
            "dayofweek",
            "dayofweek_iso",
            "dayofyear",
            "week",
            "hour",
            "minute",
            "second",
        ):
            raise UnsupportedSQL(f"EXTRACT({part.upper()})")
        return Call("extract", (a,), INT, a.nullable, part)

    def _b_Year(self, node: Node, scope: Scope) -> Expr:
        return self._extract("year", self._strip_date(node.this, scope))

    def _b_Month(self, node: Node, scope: Scope) -> Expr:
        return self._extract("month", self._strip_date(node.this, scope))

    def _b_Day(self, node: Node, scope: Scope) -> Expr:
        return self._extract("day", self._strip_date(node.this, scope))

    def _b_DayOfMonth(self, node: Node, scope: Scope) -> Expr:
        return self._extract("day", self._strip_date(node.this, scope))

    def _b_Quarter(self, node: Node, scope: Scope) -> Expr:
        return self._extract("quarter", self._strip_date(node.this, scope))

    def _b_DayOfWeek(self, node: Node, scope: Scope) -> Expr:
        return self._extract("dayofweek", self._strip_date(node.this, scope))

    def _b_DayOfYear(self, node: Node, scope: Scope) -> Expr:
        return self._extract("dayofyear", self._strip_date(node.this, scope))

    def _b_Hour(self, node: Node, scope: Scope) -> Expr:
        return self._extract("hour", self._strip_date(node.this, scope))

    def _b_Minute(self, node: Node, scope: Scope) -> Expr:
        return self._extract("minute", self._strip_date(node.this, scope))

    def _b_Second(self, node: Node, scope: Scope) -> Expr:
        return self._extract("second", self._strip_date(node.this, scope))

    def _strip_date(self, node: Node, scope: Scope) -> Expr:
        while isinstance(node, (exp.TsOrDsToDate,)) and not node.args.get("format"):
            node = node.this
        return self.bind(node, scope)

    def _b_TsOrDsToDate(self, node: Node, scope: Scope) -> Expr:
        if node.args.get("format"):
            raise UnsupportedSQL("to_date with a format")
        a = self.bind(node.this, scope)
        return self._cast_expr(a, DATE) if a.type.kind != "date" else a

    def _b_TsOrDsAdd(self, node: Node, scope: Scope) -> Expr:
        return self._date_add_fn(node, scope, 1)

    def _b_DateAdd(self, node: Node, scope: Scope) -> Expr:
        return self._date_add_fn(node, scope, 1)

    def _b_DateSub(self, node: Node, scope: Scope) -> Expr:
        return self._date_add_fn(node, scope, -1)

    def _b_TsOrDsSub(self, node: Node, scope: Scope) -> Expr:
        return self._date_add_fn(node, scope, -1)

    def _date_add_fn(self, node: Node, scope: Scope, sign: int) -> Expr:
        d = self._strip_date(node.this, scope)
        n = self.bind(node.expression, scope)
        unit = node.args.get("unit")
        u = unit.name.lower() if unit is not None else "day"
        if d.type.kind == "string":
            d = self._cast(d, DATE)
        if n.type.kind != "int":
            n = self._cast(n, BIGINT)
        if sign < 0:
            n = Call("neg", (n,), n.type, n.nullable)
        nullable = d.nullable or n.nullable
        if d.type.kind == "date" and u == "day":
            return Call("date_add_days", (d, n), DATE, nullable)
        if d.type.kind == "date" and u == "month":
            return Call("add_months", (d, n), DATE, nullable)
        if d.type.kind == "date" and u == "year":
            return Call(
                "add_months",
                (d, Call("mul", (n, Lit(12, BIGINT)), BIGINT, n.nullable)),
                DATE,
                nullable,
            )
        raise UnsupportedSQL(f"date arithmetic {node.sql(self.dialect)}")

    def _b_AddMonths(self, node: Node, scope: Scope) -> Expr:
        d = self._strip_date(node.this, scope)
        n = self.bind(node.expression, scope)
        if d.type.kind == "string":
            d = self._cast(d, DATE)
        return Call("add_months", (d, self._cast(n, BIGINT)), DATE, d.nullable or n.nullable)

    def _b_TimestampAdd(self, node: Node, scope: Scope) -> Expr:
        """``timestampadd(unit, n, ts)`` (``dateadd`` / ``date_add`` of three arguments): a
        TIMESTAMP (a DATE or text is one first) moved by ``n`` units (cast to BIGINT);
        months past the new month's end stop at its last day, as in ``add_months``."""
        unit = self._datetime_unit("timestampadd", node, _TIMESTAMPADD_UNITS)
        ts = self._date_arg("timestampadd", self.bind(node.this, scope), TIMESTAMP)
        n = self.bind(node.expression, scope)
        if not (n.type.numeric or n.type.kind in ("string", "null")):
            raise SQLError(f"timestampadd() adds a number of units, got {n.type}")
        n = self._cast(n, BIGINT)
        return Call("timestampadd", (ts, n), TIMESTAMP, ts.nullable or n.nullable, unit)

    def _b_TimestampDiff(self, node: Node, scope: Scope) -> Expr:
        """``timestampdiff(unit, start, end)`` (``datediff`` / ``date_diff`` of three
        arguments): the whole units from ``start`` to ``end``, counted as Java's
        ``ChronoUnit.between`` counts them (toward zero; a month is whole when the day and
        time of the month are reached)."""
        unit = self._datetime_unit("timestampdiff", node, _TIMESTAMPDIFF_UNITS)
        start = self._date_arg("timestampdiff", self.bind(node.expression, scope), TIMESTAMP)
        end = self._date_arg("timestampdiff", self.bind(node.this, scope), TIMESTAMP)
        return Call("timestampdiff", (start, end), BIGINT, start.nullable or end.nullable, unit)

    def _datetime_unit(self, name: str, node: Node, units: frozenset[str]) -> str:
        unit = node.args.get("unit")
        if not isinstance(unit, exp.Var):
            raise SQLError(f"{name}() takes a unit without quotes, one of {sorted(units)}")
        u = unit.name.upper()
        if u not in units:
            raise SQLError(f"{name}(): {unit.name} is not a unit (one of {sorted(units)})")
        return "day" if u == "DAYOFYEAR" else u.lower()

    def _b_DateDiff(self, node: Node, scope: Scope) -> Expr:
        if node.args.get("unit") is not None and self.dialect == "spark":
            # Spark's datediff(unit, start, end) is timestampdiff (sqlglot reads each side
            # as a date: that wrapping, not a to_date written in the query, is undone)
            def bare(x: Node) -> Node:
                if isinstance(x, exp.TsOrDsToDate) and not x.args.get("safe"):
                    return x.this
                return x

            return self._b_TimestampDiff(
                exp.TimestampDiff(
                    this=bare(node.this), expression=bare(node.expression), unit=node.args["unit"]
                ),
                scope,
            )
        a = self._strip_date(node.this, scope)
        b = self._strip_date(node.expression, scope)
        unit = node.args.get("unit")
        if unit is not None and unit.name.lower() not in ("day", "days"):
            raise UnsupportedSQL(f"DATEDIFF in {unit.name}")
        a = self._cast(a, DATE) if a.type.kind == "string" else a
        b = self._cast(b, DATE) if b.type.kind == "string" else b
        return Call("date_diff", (a, b), INT, a.nullable or b.nullable)

    def _b_CurrentDate(self, node: Node, scope: Scope) -> Expr:
        raise UnsupportedSQL("CURRENT_DATE: a view must not depend on the clock")

    def _b_CurrentTimestamp(self, node: Node, scope: Scope) -> Expr:
        raise UnsupportedSQL("CURRENT_TIMESTAMP: a view must not depend on the clock")

    def _b_Rand(self, node: Node, scope: Scope) -> Expr:
        raise UnsupportedSQL("RAND(): a view must be deterministic")

    def _b_Anonymous(self, node: Node, scope: Scope) -> Expr:
        return self._named_function(node.name.lower(), list(node.expressions), scope, node)

    def _function(self, node: Node, scope: Scope) -> Expr:
        name = node.sql_name().lower() if hasattr(node, "sql_name") else type(node).__name__
        if isinstance(node, exp.AggFunc):
            if isinstance(node, _AGGS):
                depths = [self._depth_of(c, scope) for c in node.find_all(exp.Column)]
                if depths and all(d is not None and d > 1 for d in depths):
                    raise UnsupportedSQL(
                        f"an aggregate of an outer query's rows ({node.sql(self.dialect)}) "
                        "from two or more levels of subqueries down"
                    )
                raise SQLError(f"aggregate {node.sql(self.dialect)} is not allowed here")
            raise UnsupportedSQL(f"aggregate function {node.sql(self.dialect)}")
        args = [a for a in node.args.values() if isinstance(a, exp.Expression)]
        lists = [a for a in node.args.values() if isinstance(a, list)]
        for lst in lists:
            args.extend(x for x in lst if isinstance(x, exp.Expression))
        return self._named_function(name, args, scope, node)

    _UNARY_STRING = {
        "upper": "upper",
        "ucase": "upper",
        "lower": "lower",
        "lcase": "lower",
        "reverse": "reverse",
    }

    def _named_function(self, name: str, arg_nodes: list[Node], scope: Scope, node: Node) -> Expr:
        args = [self.bind(a, scope) for a in arg_nodes]
        nullable = any(a.nullable for a in args)
        if name in self._UNARY_STRING and len(args) == 1:
            a = self._cast(args[0], STRING) if args[0].type.kind != "string" else args[0]
            return Call(self._UNARY_STRING[name], (a,), STRING, nullable)
        if name in ("length", "char_length", "character_length", "len") and len(args) == 1:
            a = self._cast(args[0], STRING) if args[0].type.kind != "string" else args[0]
            return Call("length", (a,), INT, nullable)
        if name == "weekday" and len(args) == 1:
            # Monday 0 to Sunday 6
            iso = self._extract("dayofweek_iso", args[0])
            return Call("sub", (iso, Lit(1, iso.type)), iso.type, iso.nullable)
        if name in ("abs",) and len(args) == 1:
            a = args[0]
            if a.type.kind == "string" and self.dialect == "spark":
                a = self._cast(a, DOUBLE)  # (Spark takes text as a DOUBLE)
            return Call("abs", (a,), a.type, nullable)
        if name in ("sign", "signum") and len(args) == 1:
            return Call("sign", (args[0],), DOUBLE if self.dialect == "spark" else BIGINT, nullable)
        if name in ("sqrt", "exp", "ln", "log10", "log2") and len(args) == 1:
            return Call(name, (args[0],), DOUBLE, True)
        if name in ("power", "pow") and len(args) == 2:
            return Call("pow", (args[0], args[1]), DOUBLE, nullable)
        if name in ("greatest", "least") and args:
            t = args[0].type
            for a in args[1:]:
                t = common_type(t, a.type, name)
            cast = tuple(self._cast(a, t) for a in args)
            if self.dialect == "sqlite":
                # SQLite's max(a, b, ...) / min(a, b, ...): NULL when any argument is
                return Call(name, cast, t, any(a.nullable for a in args), "nulls")
            return Call(name, cast, t, all(a.nullable for a in args))
        if name in ("ifnull", "nvl") and len(args) == 2:
            t = common_type(args[0].type, args[1].type, name)
            return Call(
                "coalesce",
                tuple(self._branch_cast(a, t) for a in args),
                t,
                args[0].nullable and args[1].nullable,
            )
        if name == "instr" and len(args) == 2 and isinstance(args[1], Lit):
            return Call("instr", (args[0], args[1]), INT, nullable)
        if (
            name in ("startswith", "starts_with", "endswith", "ends_with", "contains")
            and len(args) == 2
            and isinstance(args[1], Lit)
        ):
            op = {"startswith": "starts_with", "endswith": "ends_with"}.get(name, name)
            a, b = (x if x.type.kind in ("string", "null") else self._cast(x, STRING) for x in args)
            return Call(op, (a, b), BOOLEAN, nullable)
        if (
            name in ("lpad", "rpad")
            and len(args) in (2, 3)
            and all(isinstance(a, Lit) for a in args[1:])
        ):
            return Call(name, tuple(args), STRING, nullable)
        if name == "date_format":
            return self._date_format(args)
        if name == "mod" and len(args) == 2:
            return self._arith("mod", args[0], args[1], "MOD")
        if name in _TEXT_FUNCS:
            return self._text_function(name, args, nullable)
        if name in ("date_part", "datepart") and len(args) == 2:
            field = args[0]
            if not (isinstance(field, Lit) and isinstance(field.value, str)):
                raise UnsupportedSQL(f"{name}() with a field that is not a constant text")
            return self._extract_part(field.value.lower(), args[1])
        if name in ("unix_timestamp", "to_unix_timestamp") and not args:
            raise UnsupportedSQL(f"{name.upper()}(): a view must not depend on the clock")
        if name in _EPOCH_FUNCS and len(args) in (1, 2):
            return self._epoch_function(name, args)
        if name in ("pi", "e") and not args:
            return Lit(math.pi if name == "pi" else math.e, DOUBLE)
        if name in _DOUBLE_FUNCS:
            return self._double_function(name, args)
        if name in _DATE_PARTS_FUNCS:
            return self._date_parts_function(name, args)
        if name in _MORE_FUNCS:
            return self._more_function(name, args)
        raise UnsupportedSQL(f"function {name}()")

    def _arity(self, name: str, args: list[Expr], *counts: int) -> None:
        if len(args) not in counts:
            want = " or ".join(str(c) for c in counts)
            raise SQLError(f"{name}() takes {want} argument(s), got {len(args)}")

    def _numeric_arg(self, name: str, a: Expr, t: SqlType) -> Expr:
        """``a`` as ``t`` for a function of numbers (text is cast, as Spark casts it
        implicitly; a date, timestamp or BOOLEAN is refused)."""
        if not (a.type.numeric or a.type.kind in ("string", "null")):
            raise SQLError(f"{name}() needs a number, got {a.type}")
        return self._cast(a, t)

    def _double_function(self, name: str, args: list[Expr]) -> Expr:
        """Functions of DOUBLEs whose value is a DOUBLE (Java's ``Math``): trigonometry and
        its hyperbolic kin, ``degrees`` / ``radians``, ``rint`` (halves to even),
        ``atan2(y, x)``, ``hypot(x, y)``; ``nanvl(a, b)`` is ``b`` where ``a`` is NaN
        (FLOAT when both are FLOAT)."""
        width = _DOUBLE_FUNCS[name]
        self._arity(name, args, width)
        t = DOUBLE
        if name == "nanvl" and all(a.type == FLOAT for a in args):
            t = FLOAT
        xs = tuple(self._numeric_arg(name, a, t) for a in args)
        nullable = any(a.nullable for a in args)
        return Call(name, xs, t, nullable)

    def _date_parts_function(self, name: str, args: list[Expr]) -> Expr:
        """``make_date(y, m, d)`` and ``make_timestamp(y, mo, d, h, mi, s)`` (seconds a
        DECIMAL(16, 6): micro-seconds; 60 is the next minute): fields that name no date or
        time raise ``DataError`` when a row holds them, as Spark's ANSI mode does."""
        if name == "make_date":
            self._arity(name, args, 3)
            parts = tuple(self._numeric_arg(name, a, INT) for a in args)
            return Call("make_date", parts, DATE, any(a.nullable for a in args))
        if len(args) == 7:
            raise UnsupportedSQL("make_timestamp() with a time zone")
        self._arity("make_timestamp", args, 6)
        parts = tuple(self._numeric_arg("make_timestamp", a, INT) for a in args[:5])
        sec = self._numeric_arg("make_timestamp", args[5], decimal_type(16, 6))
        return Call("make_timestamp", (*parts, sec), TIMESTAMP, any(a.nullable for a in args))

    def _date_arg(self, name: str, a: Expr, t: SqlType = DATE) -> Expr:
        """A DATE (or TIMESTAMP) argument: text is cast, a TIMESTAMP is a DATE's day."""
        if a.type.kind not in ("date", "timestamp", "string", "null"):
            raise SQLError(f"{name}() needs a date, got {a.type}")
        return self._cast(a, t)

    def _more_function(self, name: str, args: list[Expr]) -> Expr:
        """Spark's other scalar functions of dates, numbers, bits and text (their rules in
        ``_MORE_FUNCS``' comments and in the evaluators)."""
        nullable = any(a.nullable for a in args)
        if name == "months_between":
            # the difference in months, by whole months when the days of the month are
            # the same or both are the last; else days and seconds over 31-day months
            self._arity(name, args, 2, 3)
            a, b = (self._date_arg(name, x, TIMESTAMP) for x in args[:2])
            rounded = True
            if len(args) == 3:
                r = args[2]
                if not (isinstance(r, Lit) and r.type.kind in ("boolean", "null")):
                    raise UnsupportedSQL("months_between() with a roundOff that is not a constant")
                if r.value is None:
                    return Lit(None, DOUBLE)
                rounded = bool(r.value)
            return Call("months_between", (a, b), DOUBLE, nullable, rounded)
        if name == "next_day":
            self._arity(name, args, 2)
            d = self._date_arg(name, args[0])
            w = args[1]
            if w.type.kind not in ("string", "null"):
                raise SQLError(f"next_day() takes the day of the week as text, got {w.type}")
            if w.type.kind == "null":
                return Lit(None, DATE)
            return Call("next_day", (d, w), DATE, nullable)
        if name in ("dayname", "monthname"):
            self._arity(name, args, 1)
            return Call(name, (self._date_arg(name, args[0]),), STRING, nullable)
        if name == "bround":
            self._arity(name, args, 1, 2)
            return self._round_with(args[0], args[1] if len(args) == 2 else None, "bround")
        if name == "positive":
            self._arity(name, args, 1)
            a = args[0]
            return self._numeric_arg(name, a, DOUBLE if a.type.kind == "string" else a.type)
        if name == "negative":
            self._arity(name, args, 1)
            a = args[0]
            a = self._numeric_arg(name, a, DOUBLE if a.type.kind == "string" else a.type)
            if a.type.kind == "null":
                return Lit(None, DOUBLE)
            return Call("neg", (a,), a.type, a.nullable)
        if name == "factorial":
            self._arity(name, args, 1)
            return Call("factorial", (self._numeric_arg(name, args[0], INT),), BIGINT, True)
        if name == "width_bucket":
            self._arity(name, args, 4)
            xs = [self._numeric_arg(name, a, DOUBLE) for a in args[:3]]
            n = self._numeric_arg(name, args[3], BIGINT)
            return Call("width_bucket", (*xs, n), BIGINT, True)
        if name in ("shiftleft", "shiftright", "shiftrightunsigned"):
            self._arity(name, args, 2)
            return self._shift(name, args[0], args[1])
        if name in ("bitwise_count", "bit_count"):
            self._arity(name, args, 1)
            a = args[0]
            if a.type.kind == "null":
                return Lit(None, INT)
            if a.type.kind == "boolean":
                a = self._cast(a, INT)
            if a.type.kind != "int":
                raise SQLError(f"bit_count() needs an integer or BOOLEAN, got {a.type}")
            return Call("bit_count", (a,), INT, a.nullable)
        if name in ("safe_add", "safe_subtract", "safe_multiply"):
            self._arity(name, args, 2)
            op = {"safe_add": "add", "safe_subtract": "sub", "safe_multiply": "mul"}[name]
            a, b = args
            if a.type.kind == "string" and b.type.kind != "string":
                a = self._cast(a, BIGINT if b.type.kind == "int" else DOUBLE)
            if b.type.kind == "string" and a.type.kind != "string":
                b = self._cast(b, BIGINT if a.type.kind == "int" else DOUBLE)
            e = self._arith(op, a, b, f"try_{name[5:]}")
            if isinstance(e, Call) and e.op == op and e.type.kind in ("int", "decimal"):
                # NULL where the exact result leaves the type (its range or its digits)
                return Call(f"try_{op}", e.args, e.type, True)
            return e
        if name == "chr":
            self._arity(name, args, 1)
            return Call("chr", (self._numeric_arg(name, args[0], BIGINT),), STRING, nullable)
        if name == "hex":
            self._arity(name, args, 1)
            a = args[0]
            if a.type.kind == "string":
                return Call("hex", (a,), STRING, nullable)
            return Call("hex", (self._numeric_arg(name, a, BIGINT),), STRING, nullable)
        if name == "space":
            self._arity(name, args, 1)
            return Call("space", (self._numeric_arg(name, args[0], INT),), STRING, nullable)
        if name == "find_in_set":
            self._arity(name, args, 2)
            a, b = (self._cast(x, STRING) for x in args)
            return Call("find_in_set", (a, b), INT, nullable)
        if name == "elt":
            if len(args) < 2:
                raise SQLError("elt() takes an index and at least one value")
            n = self._numeric_arg(name, args[0], INT)
            vals = tuple(self._cast(x, STRING) for x in args[1:])
            return Call("elt", (n, *vals), STRING, True)
        if name == "conv":
            # (NULL for a base outside 2 to 36, or text with no characters)
            self._arity(name, args, 3)
            num = self._cast(args[0], STRING)
            bases = tuple(self._numeric_arg(name, b, INT) for b in args[1:])
            return Call("conv", (num, *bases), STRING, True)
        if name in ("printf", "format_string"):
            if self.dialect != "spark":
                raise UnsupportedSQL(f"{name}() outside Spark's dialect")
            return self._format_string(name, args)
        if name == "format_number":
            self._arity(name, args, 2)
            x, d = args
            if x.type.kind == "null":
                return Lit(None, STRING)
            if not x.type.numeric:
                raise SQLError(f"format_number() needs a number, got {x.type}")
            if x.type.kind == "double":
                x = self._cast(x, DOUBLE)  # (a FLOAT as Java widens it)
            if d.type.kind == "string":
                raise UnsupportedSQL("format_number() with a pattern (only a count of places)")
            if not (d.type.kind == "null" or (d.type.kind == "int" and d.type.bits <= 32)):
                raise SQLError(f"format_number() takes an INT count of places, got {d.type}")
            if d.type.kind == "null":
                return Lit(None, STRING)
            return Call("format_number", (x, self._cast(d, INT)), STRING, True)
        if name == "levenshtein":
            self._arity(name, args, 2, 3)
            xs = [self._cast(a, STRING) for a in args[:2]]
            if len(args) == 3:
                xs.append(self._numeric_arg(name, args[2], INT))
            return Call("levenshtein", tuple(xs), INT, nullable)
        if name == "bin":
            self._arity(name, args, 1)
            return Call("bin", (self._numeric_arg(name, args[0], BIGINT),), STRING, nullable)
        if name == "luhn_check":
            self._arity(name, args, 1)
            return Call("luhn_check", (self._cast(args[0], STRING),), BOOLEAN, nullable)
        raise UnsupportedSQL(f"function {name}()")

    def _format_string(self, name: str, args: list[Expr]) -> Expr:
        """``format_string(fmt, ...)`` / ``printf``: Java's ``Formatter`` on a constant
        pattern, its conversions ``%s %d %x %X %o %f %e %E %%`` with a width, a precision
        and the flags ``-`` and ``0`` (others are refused). A pattern Java rejects, or one
        with more conversions than arguments, is an error; an argument a conversion cannot
        take (``%d`` of a DOUBLE) raises ``DataError`` where a row holds one, as Spark
        does. Arguments are what Spark hands Java: a DATE its days, a TIMESTAMP its
        microseconds, a DECIMAL as ``BigDecimal.toString``, NULL as ``null``."""
        if not args:
            raise SQLError(f"{name}() takes a pattern and values")
        fmt = args[0]
        if not (isinstance(fmt, Lit) and fmt.type.kind in ("string", "null")):
            raise UnsupportedSQL(f"{name}() with a pattern that is not a constant text")
        if fmt.value is None:
            return Lit(None, STRING)
        specs = java_format_specs(str(fmt.value))
        vals = list(args[1:])
        used = sum(1 for sp in specs if isinstance(sp, tuple) and sp[3] != "%")
        if used > len(vals):
            raise SQLError(f"{name}(): the pattern {fmt.value!r} needs {used} values")
        k = 0
        for sp in specs:
            if isinstance(sp, tuple) and sp[3] != "%":
                v = vals[k]
                if sp[3] in "feE" and v.type.kind == "double":
                    vals[k] = self._cast(v, DOUBLE)
                k += 1
        return Call("format_string", (fmt, *vals), STRING, False, specs)

    def _shift(self, name: str, a: Expr, n: Expr) -> Expr:
        """``shiftleft`` / ``shiftright`` / ``shiftrightunsigned`` (``<<``, ``>>``): Java's
        shifts of an INT (TINYINT and SMALLINT widened to it, other numbers cast to it) or
        a BIGINT, by the count modulo 32 or 64."""
        if a.type.kind == "null" or n.type.kind == "null":
            return Lit(None, BIGINT if a.type == BIGINT else INT)
        t = BIGINT if a.type == BIGINT else INT
        a = self._numeric_arg(name, a, t)
        n = self._numeric_arg(name, n, INT)
        return Call(name, (a, n), t, a.nullable or n.nullable)

    def _bitwise(self, op: str, node: Node, scope: Scope) -> Expr:
        """``&``, ``|``, ``^`` of integers of the wider type (text is a BIGINT, as Spark
        casts it)."""
        a = self.bind(node.this, scope)
        b = self.bind(node.expression, scope)
        a = self._cast(a, BIGINT) if a.type.kind == "string" else a
        b = self._cast(b, BIGINT) if b.type.kind == "string" else b
        for x in (a, b):
            if x.type.kind not in ("int", "null"):
                raise SQLError(f"{op}: the operands must be integers, got {x.type}")
        if a.type.kind == "null" and b.type.kind == "null":
            return Lit(None, INT)
        t = common_type(a.type, b.type, op)
        return Call(op, (self._cast(a, t), self._cast(b, t)), t, a.nullable or b.nullable)

    def _b_BitwiseAnd(self, node: Node, scope: Scope) -> Expr:
        return self._bitwise("bitand", node, scope)

    def _b_BitwiseOr(self, node: Node, scope: Scope) -> Expr:
        return self._bitwise("bitor", node, scope)

    def _b_BitwiseXor(self, node: Node, scope: Scope) -> Expr:
        return self._bitwise("bitxor", node, scope)

    def _b_BitwiseNot(self, node: Node, scope: Scope) -> Expr:
        a = self.bind(node.this, scope)
        a = self._cast(a, BIGINT) if a.type.kind == "string" else a
        if a.type.kind == "null":
            return Lit(None, INT)
        if a.type.kind != "int":
            raise SQLError(f"~: the operand must be an integer, got {a.type}")
        return Call("bitnot", (a,), a.type, a.nullable)

    def _b_BitwiseLeftShift(self, node: Node, scope: Scope) -> Expr:
        return self._shift(
            "shiftleft", self.bind(node.this, scope), self.bind(node.expression, scope)
        )

    def _b_BitwiseRightShift(self, node: Node, scope: Scope) -> Expr:
        return self._shift(
            "shiftright", self.bind(node.this, scope), self.bind(node.expression, scope)
        )

    def _epoch_function(self, name: str, args: list[Expr]) -> Expr:
        """Times as numbers since 1970-01-01 (UTC) and back: ``unix_seconds`` /
        ``unix_millis`` / ``unix_micros`` and ``unix_timestamp`` / ``to_unix_timestamp`` of a
        TIMESTAMP or DATE (rounded down), ``unix_date``, ``date_from_unix_date``,
        ``timestamp_seconds`` / ``_millis`` / ``_micros`` of an integer, ``from_unixtime(n[,
        pattern])`` (the timestamp as text, ``yyyy-MM-dd HH:mm:ss`` by default)."""
        a = args[0]
        k = a.type.kind
        if name in ("str_to_unix", "unix_timestamp", "to_unix_timestamp"):
            # (a pattern only matters for text, refused here); whole seconds toward zero
            if k == "date":
                a = self._cast(a, TIMESTAMP)
            elif k == "string":
                raise UnsupportedSQL(f"{name}() of text: CAST it AS TIMESTAMP first")
            elif k == "null":
                return Lit(None, BIGINT)
            if a.type.kind != "timestamp":
                raise SQLError(f"{name}() needs a TIMESTAMP or DATE, got {a.type}")
            micros = Call("relabel", (a,), BIGINT, a.nullable, name)
            return Call("trunc_div", (micros,), BIGINT, a.nullable, 1_000_000)
        elif len(args) != 1 and name not in ("unix_to_str", "from_unixtime"):
            raise SQLError(f"{name}() takes one argument, got {len(args)}")
        if k == "null":
            return Lit(None, _EPOCH_FUNCS[name][1])
        want, result = _EPOCH_FUNCS[name]
        if k != want:
            if want == "int" and k in ("decimal", "double"):
                raise UnsupportedSQL(f"{name}() of a {a.type} (only whole numbers)")
            what = "an INTEGER" if want == "int" else f"a {want.upper()}"
            raise SQLError(f"{name}() needs {what}, got {a.type}")
        if name.startswith("unix_") and name != "unix_date" and name != "unix_to_str":
            micros = Call("relabel", (a,), BIGINT, a.nullable, name)
            per = {"unix_seconds": 1_000_000, "unix_millis": 1_000, "unix_micros": 1}[name]
            if per == 1:
                return micros
            return Call("floor_div", (micros,), BIGINT, a.nullable, per)
        if name == "unix_date":
            return Call("relabel", (a,), INT, a.nullable, name)
        if name == "date_from_unix_date":
            return Call("relabel", (a,), DATE, a.nullable, name)
        per = {"timestamp_seconds": 1_000_000, "timestamp_millis": 1_000}.get(name, 1)
        if name in ("unix_to_str", "from_unixtime"):
            per = 1_000_000
        n = self._cast(a, BIGINT) if a.type != BIGINT else a
        scaled = self._arith("mul", n, Lit(per, BIGINT), "*") if per != 1 else n
        ts = Call("relabel", (scaled,), TIMESTAMP, a.nullable, name)
        if name in ("unix_to_str", "from_unixtime"):
            fmt = args[1] if len(args) == 2 else Lit("yyyy-MM-dd HH:mm:ss", STRING)
            return self._date_format([ts, fmt])
        return ts

    def _text_function(self, name: str, args: list[Expr], nullable: bool) -> Expr:
        """``split_part``, ``substring_index``, ``translate`` (their other arguments
        constants), ``ascii``, ``octet_length``, ``bit_length``, ``md5``, ``sha1``, ``sha2``,
        ``crc32``: computed once per distinct string, as Spark computes them."""
        width, result = _TEXT_FUNCS[name]
        if len(args) != width:
            raise SQLError(f"{name}() takes {width} argument(s), got {len(args)}")
        a = self._cast(args[0], STRING) if args[0].type.kind != "string" else args[0]
        rest = args[1:]
        if not all(isinstance(x, Lit) for x in rest):
            raise UnsupportedSQL(f"{name}() with an argument that is not a constant")
        consts = [x.value for x in rest]  # type: ignore[attr-defined]
        if any(c is None for c in consts):
            return Lit(None, result)
        op = {"sha": "sha1"}.get(name, name)
        if op == "split_part":
            if not isinstance(consts[1], int):
                raise SQLError(f"split_part() takes an integer index, got {consts[1]!r}")
            if consts[1] == 0:
                raise SQLError("split_part(): the index 0 is invalid (parts count from 1, or -1)")
        if op == "substring_index" and not isinstance(consts[1], int):
            raise SQLError(f"substring_index() takes an integer count, got {consts[1]!r}")
        if op == "sha2":
            if not isinstance(consts[0], int):
                raise SQLError(f"sha2() takes a bit length, got {consts[0]!r}")
            if consts[0] not in (0, 224, 256, 384, 512):
                return Lit(None, STRING)  # (Spark: NULL for a bit length it has no hash of)
        lits = tuple(Lit(c, STRING) if isinstance(c, str) else Lit(c, BIGINT) for c in consts)
        return Call(op, (a, *lits), result, nullable)

    def _b_Upper(self, node: Node, scope: Scope) -> Expr:
        return self._named_function("upper", [node.this], scope, node)

    def _b_Lower(self, node: Node, scope: Scope) -> Expr:
        return self._named_function("lower", [node.this], scope, node)

    def _b_Length(self, node: Node, scope: Scope) -> Expr:
        return self._named_function("length", [node.this], scope, node)

    def _b_Abs(self, node: Node, scope: Scope) -> Expr:
        return self._named_function("abs", [node.this], scope, node)

    def _b_Sqrt(self, node: Node, scope: Scope) -> Expr:
        return self._named_function("sqrt", [node.this], scope, node)

    def _b_Exp(self, node: Node, scope: Scope) -> Expr:
        return self._named_function("exp", [node.this], scope, node)

    def _b_Log(self, node: Node, scope: Scope) -> Expr:
        """``log10(x)``, ``log2(x)``, ``log(b, x)`` (``ln(x) / ln(b)``), ``log(x)`` (ln)."""
        if node.args.get("expression") is None:
            return self._named_function("ln", [node.this], scope, node)
        base = self.bind(node.this, scope)
        x = node.expression
        if isinstance(base, Lit) and base.value in (10, 2):
            return self._named_function(f"log{base.value}", [x], scope, node)
        lx = self._named_function("ln", [x], scope, node)
        lb = self._named_function("ln", [node.this], scope, node)
        return Call("div", (lx, lb), DOUBLE, True)

    def _b_Cbrt(self, node: Node, scope: Scope) -> Expr:
        a = self.bind(node.this, scope)
        return Call("cbrt", (self._cast(a, DOUBLE),), DOUBLE, a.nullable)

    def _b_Left(self, node: Node, scope: Scope) -> Expr:
        return self._string_with_count("left", node.this, node.expression, scope)

    def _b_Right(self, node: Node, scope: Scope) -> Expr:
        return self._string_with_count("right", node.this, node.expression, scope)

    def _b_Repeat(self, node: Node, scope: Scope) -> Expr:
        return self._string_with_count("repeat", node.this, node.args["times"], scope)

    def _string_with_count(self, op: str, s_node: Node, n_node: Node, scope: Scope) -> Expr:
        """``left`` / ``right`` / ``repeat`` of a string and a count (of characters or
        copies)."""
        a = self.bind(s_node, scope)
        n = self.bind(n_node, scope)
        a = self._cast(a, STRING) if a.type.kind != "string" else a
        if n.type.kind not in ("int", "null"):
            raise SQLError(f"{op}() takes a count, got {n.type}")
        return Call(op, (a, n), STRING, a.nullable or n.nullable)

    def _b_RegexpLike(self, node: Node, scope: Scope) -> Expr:
        """``s RLIKE p`` / ``regexp_like``: whether ``p`` (a Java regular expression, a
        constant) matches somewhere in ``s``."""
        return self._regexp("rlike", node.this, [node.expression], BOOLEAN, scope)

    def _b_RegexpReplace(self, node: Node, scope: Scope) -> Expr:
        if node.args.get("position") is not None:
            raise UnsupportedSQL("regexp_replace from a position")
        rep = node.args.get("replacement")
        return self._regexp(
            "regexp_replace",
            node.this,
            [node.expression, rep if rep is not None else exp.Literal.string("")],
            STRING,
            scope,
        )

    def _b_RegexpExtract(self, node: Node, scope: Scope) -> Expr:
        group = node.args.get("group")
        return self._regexp(
            "regexp_extract",
            node.this,
            [node.expression, group if group is not None else exp.Literal.number(1)],
            STRING,
            scope,
        )

    def _b_RegexpCount(self, node: Node, scope: Scope) -> Expr:
        """``regexp_count(s, p)``: how many times ``p`` matches in ``s``, each search from
        where the last match ended (an empty match moves on one character)."""
        return self._regexp("regexp_count", node.this, [node.expression], INT, scope)

    def _b_RegexpSubstr(self, node: Node, scope: Scope) -> Expr:
        """``regexp_substr(s, p)``: the first match of ``p`` in ``s``; NULL where there is
        none or it is empty (Spark's NULLIF of ``regexp_extract(s, p, 0)`` and '')."""
        for k in ("position", "occurrence", "parameters", "group"):
            if node.args.get(k) is not None:
                raise SQLError("regexp_substr() takes a string and a pattern")
        e = self._regexp("regexp_substr", node.this, [node.expression], STRING, scope)
        return Call(e.op, e.args, e.type, True, e.extra) if isinstance(e, Call) else e

    def _b_RegexpInstr(self, node: Node, scope: Scope) -> Expr:
        """``regexp_instr(s, p[, idx])``: where the first match of ``p`` in ``s`` starts
        (from 1; 0 for none). Spark reads ``idx`` (a group) but answers the match's start
        whatever it is, unless it is NULL."""
        for k in ("occurrence", "option", "parameters", "group"):
            if node.args.get(k) is not None:
                raise SQLError("regexp_instr() takes a string, a pattern and a group")
        idx = node.args.get("position")
        if idx is not None:
            g = self.bind(idx, scope)
            if g.type.kind not in ("int", "null"):
                raise SQLError(f"regexp_instr() takes a group number, got {g.type}")
            if not isinstance(g, Lit):
                raise UnsupportedSQL("regexp_instr() with a group that is not a constant")
            if g.value is None:
                return Lit(None, INT)
        return self._regexp("regexp_instr", node.this, [node.expression], INT, scope)

    def _regexp(self, op: str, s_node: Node, rest: list[Node], t: SqlType, scope: Scope) -> Expr:
        a = self.bind(s_node, scope)
        a = self._cast(a, STRING) if a.type.kind != "string" else a
        args = [self.bind(x, scope) for x in rest]
        if not all(isinstance(x, Lit) for x in args):
            raise UnsupportedSQL(f"{op} with a pattern that is not a constant")
        pat = args[0]
        assert isinstance(pat, Lit)
        if pat.value is None or any(x.value is None for x in args if isinstance(x, Lit)):
            return Lit(None, t)
        compiled = java_regex(str(pat.value))  # (raises for what Python's re reads otherwise)
        if op == "regexp_extract":
            g = args[1]
            assert isinstance(g, Lit)
            if not isinstance(g.value, int) or not 0 <= g.value <= compiled.groups:
                raise SQLError(
                    f"regexp_extract: group {g.value} of a pattern with {compiled.groups} groups"
                )
        if op == "regexp_replace":
            r = args[1]
            assert isinstance(r, Lit)
            java_replacement(str(r.value), compiled)  # (checked here, used per string)
        return Call(op, (a, *args), t, a.nullable)

    def _text_arg(self, node: Node, scope: Scope) -> Expr:
        a = self.bind(node, scope)
        return self._cast(a, STRING) if a.type.kind != "string" else a

    def _b_Levenshtein(self, node: Node, scope: Scope) -> Expr:
        """``levenshtein(a, b[, threshold])``: the fewest one-character insertions,
        deletions and substitutions from ``a`` to ``b``; -1 where that is more than the
        threshold (always, for a negative one)."""
        if any(node.args.get(k) is not None for k in ("ins_cost", "del_cost", "sub_cost")):
            raise UnsupportedSQL("levenshtein() with costs of edits")
        args = [node.this, node.expression]
        if node.expression is None:
            raise SQLError("levenshtein() takes two strings and, maybe, a threshold")
        if node.args.get("max_dist") is not None:
            args.append(node.args["max_dist"])
        return self._more_function("levenshtein", [self.bind(a, scope) for a in args])

    def _b_Soundex(self, node: Node, scope: Scope) -> Expr:
        a = self._text_arg(node.this, scope)
        return Call("soundex", (a,), STRING, a.nullable)

    def _b_ToBase64(self, node: Node, scope: Scope) -> Expr:
        """``base64(s)`` of a string: its UTF-8 bytes in base 64, in lines of 76
        characters joined by CR LF (Java's MIME encoder, as Spark 4 encodes)."""
        a = self.bind(node.this, scope)
        if a.type.kind not in ("string", "null"):
            raise UnsupportedSQL(f"base64() of a {a.type} (bytes of text only: no BINARY type)")
        return Call("base64", (self._cast(a, STRING),), STRING, a.nullable)

    def _b_Overlay(self, node: Node, scope: Scope) -> Expr:
        """``overlay(s PLACING r FROM pos [FOR len])``: ``s`` with ``len`` characters from
        ``pos`` (``r``'s length by default) replaced by ``r``; positions as ``substring``
        reads them."""
        s_ = self._text_arg(node.this, scope)
        r = self._text_arg(node.expression, scope)
        pos = self._numeric_arg("overlay", self.bind(node.args["from_"], scope), INT)
        ln_node = node.args.get("for_")
        ln = (
            self._numeric_arg("overlay", self.bind(ln_node, scope), INT)
            if ln_node is not None
            else Lit(-1, INT)
        )
        args = (s_, r, pos, ln)
        return Call("overlay", args, STRING, any(x.nullable for x in args))

    def _b_Format(self, node: Node, scope: Scope) -> Expr:
        args = [node.this, *node.expressions]
        return self._more_function("format_string", [self.bind(a, scope) for a in args])

    def _b_Typeof(self, node: Node, scope: Scope) -> Expr:
        """``typeof(x)``: the name of ``x``'s type as Spark spells it (``int``,
        ``decimal(10,2)``, ``void`` for an untyped NULL, ...)."""
        return Lit(str(self.bind(node.this, scope).type).lower(), STRING)

    def _b_Initcap(self, node: Node, scope: Scope) -> Expr:
        a = self.bind(node.this, scope)
        a = self._cast(a, STRING) if a.type.kind != "string" else a
        return Call("initcap", (a,), STRING, a.nullable)

    def _b_ConcatWs(self, node: Node, scope: Scope) -> Expr:
        """``concat_ws(sep, a, b, ...)``: the non-NULL arguments as text, joined by ``sep``
        (NULL only when ``sep`` is)."""
        args = [self.bind(x, scope) for x in node.expressions]
        if not args:
            raise SQLError("concat_ws needs a separator")
        out = tuple(self._cast(a, STRING) if a.type.kind != "string" else a for a in args)
        return Call("concat_ws", out, STRING, args[0].nullable)

    def _date_format(self, args: list[Expr]) -> Expr:
        """``date_format(ts, pattern)``: a date or timestamp as text, by a constant Java
        pattern (``DateTimeFormatter`` letters y M L d D H h m s S a E Q and quoted text)."""
        if len(args) != 2:
            raise SQLError("date_format takes a date or timestamp and a pattern")
        a, fmt = args
        if a.type.kind == "string":
            a = self._cast(a, TIMESTAMP)
        if a.type.kind not in ("date", "timestamp", "null"):
            raise SQLError(f"date_format needs a date or timestamp, got {a.type}")
        if not (isinstance(fmt, Lit) and fmt.type.kind in ("string", "null")):
            raise UnsupportedSQL("date_format with a pattern that is not a constant")
        if a.type.kind == "null" or fmt.value is None:
            return Lit(None, STRING)
        return Call("date_format", (a,), STRING, a.nullable, date_pattern(str(fmt.value)))

    def _b_LastDay(self, node: Node, scope: Scope) -> Expr:
        d = self._strip_date(node.this, scope)
        d = self._cast(d, DATE) if d.type.kind != "date" else d
        return Call("last_day", (d,), DATE, d.nullable)

    def _b_WeekOfYear(self, node: Node, scope: Scope) -> Expr:
        return self._extract("week", self._strip_date(node.this, scope))

    _TRUNC_UNITS = {
        "year": "year",
        "yyyy": "year",
        "yy": "year",
        "quarter": "quarter",
        "month": "month",
        "mm": "month",
        "mon": "month",
        "week": "week",
        "day": "day",
        "dd": "day",
        "hour": "hour",
        "minute": "minute",
        "second": "second",
        "millisecond": "millisecond",
        "microsecond": "microsecond",
    }

    def _trunc_unit(self, unit: Node | None) -> str | None:
        """The unit of ``date_trunc`` / ``trunc`` (None: one Spark does not know, so the
        result is NULL); a unit that is not a constant is not supported."""
        if unit is None:
            raise SQLError("date_trunc / trunc need a unit")
        if isinstance(unit, (exp.Var, exp.Identifier)) or (
            isinstance(unit, exp.Literal) and unit.is_string
        ):
            return self._TRUNC_UNITS.get(unit.name.lower())
        if isinstance(unit, exp.Null):
            return None
        raise UnsupportedSQL("date_trunc / trunc with a unit that is not a constant")

    def _b_TimestampTrunc(self, node: Node, scope: Scope) -> Expr:
        """``date_trunc(unit, ts)``: a TIMESTAMP with the parts below ``unit`` zero."""
        a = self.bind(node.this, scope)
        if a.type.kind in ("date", "string"):
            a = self._cast(a, TIMESTAMP)
        if a.type.kind not in ("timestamp", "null"):
            raise SQLError(f"date_trunc needs a timestamp, got {a.type}")
        unit = self._trunc_unit(node.args.get("unit"))
        if unit is None or a.type.kind == "null":
            return Lit(None, TIMESTAMP)
        return Call("date_trunc", (a,), TIMESTAMP, a.nullable, unit)

    def _b_DateTrunc(self, node: Node, scope: Scope) -> Expr:
        """``trunc(date, unit)``: the first day of its year, quarter, month or week."""
        d = self._strip_date(node.this, scope)
        if d.type.kind in ("timestamp", "string"):
            d = self._cast(d, DATE)
        if d.type.kind not in ("date", "null"):
            raise SQLError(f"trunc needs a date, got {d.type}")
        unit = self._trunc_unit(node.args.get("unit"))
        if unit not in ("year", "quarter", "month", "week") or d.type.kind == "null":
            return Lit(None, DATE)
        return Call("date_trunc", (d,), DATE, d.nullable, unit)

    def _b_Ln(self, node: Node, scope: Scope) -> Expr:
        return self._named_function("ln", [node.this], scope, node)

    def _b_Sign(self, node: Node, scope: Scope) -> Expr:
        return self._named_function("sign", [node.this], scope, node)

    def _b_Greatest(self, node: Node, scope: Scope) -> Expr:
        return self._named_function("greatest", [node.this, *node.expressions], scope, node)

    def _b_Least(self, node: Node, scope: Scope) -> Expr:
        return self._named_function("least", [node.this, *node.expressions], scope, node)

    def _rounding(self, node: Node, scope: Scope, op: str) -> Expr:
        a = self.bind(node.this, scope)
        d_node = node.args.get("decimals") or node.args.get("expression")
        return self._round_with(a, None if d_node is None else self.bind(d_node, Scope(None)), op)

    def _round_with(self, a: Expr, d_expr: Expr | None, op: str) -> Expr:
        """``round`` (halves away from zero), ``bround`` (halves to even), ``floor`` and
        ``ceil`` of ``a`` to ``d_expr`` places (a constant)."""
        d = 0
        if d_expr is not None:
            folded = _fold(d_expr, self) if not isinstance(d_expr, Lit) else d_expr
            if folded is None or not isinstance(folded.value, int):
                raise UnsupportedSQL(f"{op.upper()} with a non-constant scale")
            d = folded.value
        t = a.type
        if t.kind == "string" and op == "bround":
            a = self._cast(a, DOUBLE)
            t = DOUBLE
        if op in ("round", "bround"):
            if t.kind == "decimal":
                # one more integer digit for the carry; to tens or more (d < 0) at least
                # the digits of 10^-d
                s = max(min(d, t.scale), 0)
                p = (
                    t.precision - t.scale + s + 1
                    if d >= 0
                    else max(t.precision - t.scale + 1, 1 - d)
                )
                t = decimal_type(min(38, p), s)
            elif t.kind == "null":
                t = DOUBLE
            elif t.kind not in ("int", "double"):
                raise SQLError(f"ROUND needs a number, got {t}")
            if self.dialect == "sqlite" and t.kind != "double":
                t = DOUBLE  # (SQLite's round is always a REAL)
                a = self._cast(a, DOUBLE)
            return Call(op, (a,), t, a.nullable, d)
        # floor / ceil
        if d_expr is not None and self.dialect == "spark":
            # to ``d`` places (tens or more for d < 0): a DECIMAL, as Spark gives; an
            # integer is a DECIMAL of its digits, a DOUBLE a DECIMAL(30, 15) first
            if t.kind in ("int", "null"):
                a = self._cast(a, decimal_type({8: 3, 16: 5, 32: 10}.get(t.bits, 20), 0))
            elif t.kind in ("double", "string"):
                # (text is read as a DOUBLE)
                a = self._cast(
                    a if t.kind == "double" else self._cast(a, DOUBLE), decimal_type(30, 15)
                )
            elif t.kind != "decimal":
                raise SQLError(f"{op.upper()} needs a number, got {t}")
            t = a.type
            s = max(min(d, t.scale), 0)
            p = t.precision - t.scale + s + 1 if d >= 0 else max(t.precision - t.scale + 1, 1 - d)
            return Call(f"{op}_to", (a,), decimal_type(min(38, p), s), a.nullable, d)
        if d != 0:
            raise UnsupportedSQL(f"{op.upper()} with a scale")
        if t.kind == "decimal":
            t2 = decimal_type(min(38, max(1, t.precision - t.scale + 1)), 0)
            return Call(op, (a,), t2, a.nullable)
        if t.kind == "int":
            return Call(op, (a,), BIGINT, a.nullable)
        if self.dialect == "spark":
            return Call(op, (a,), BIGINT, a.nullable)
        return Call(op, (a,), DOUBLE, a.nullable)

    def _b_Round(self, node: Node, scope: Scope) -> Expr:
        return self._rounding(node, scope, "round")

    def _b_Floor(self, node: Node, scope: Scope) -> Expr:
        return self._rounding(node, scope, "floor")

    def _b_Ceil(self, node: Node, scope: Scope) -> Expr:
        return self._rounding(node, scope, "ceil")

    def _b_Substring(self, node: Node, scope: Scope) -> Expr:
        s = self.bind(node.this, scope)
        if s.type.kind != "string":
            s = self._cast(s, STRING)
        start = node.args.get("start")
        length = node.args.get("length")
        args: list[Expr] = [s, self.bind(start, scope) if start is not None else Lit(1, INT)]
        if length is not None:
            args.append(self.bind(length, scope))
        return Call("substr", tuple(args), STRING, any(a.nullable for a in args))

    def _b_Trim(self, node: Node, scope: Scope) -> Expr:
        s = self.bind(node.this, scope)
        pos = (node.args.get("position") or "").upper()
        chars = node.args.get("expression")
        op = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(pos, "trim")
        args: list[Expr] = [s]
        if chars is not None:
            args.append(self.bind(chars, scope))
        return Call(op, tuple(args), STRING, s.nullable)

    def _b_Replace(self, node: Node, scope: Scope) -> Expr:
        s = self.bind(node.this, scope)
        old = self.bind(node.expression, scope)
        new = node.args.get("replacement")
        args: list[Expr] = [s, old]
        if new is not None:
            args.append(self.bind(new, scope))
        return Call("replace", tuple(args), STRING, any(a.nullable for a in args))

    def _b_StrPosition(self, node: Node, scope: Scope) -> Expr:
        s = self.bind(node.this, scope)
        sub = self.bind(node.args["substr"], scope)
        found = Call("instr", (s, sub), INT, s.nullable or sub.nullable)
        if node.args.get("position") is None:
            return found
        # ``locate(sub, s, pos)``: the first place at or after character ``pos`` (1-based);
        # 0 for a ``pos`` below 1 or NULL, 1 for an empty ``sub`` (Spark's rules)
        pos = self.bind(node.args["position"], scope)
        if pos.type.kind != "int":
            pos = self._cast(pos, INT)
        rest = Call("substr", (s, pos), STRING, s.nullable or pos.nullable)
        at = Call("instr", (rest, sub), INT, True)
        zero = Lit(0, INT)

        def test(op: str, *args: Expr) -> Expr:
            return Call(op, args, BOOLEAN, True)

        return Call(
            "case",
            (
                test("is_null", pos),
                zero,
                test("lt", pos, Lit(1, INT)),
                zero,
                test("eq", at, zero),
                zero,
                test("eq", Call("length", (sub,), INT, sub.nullable), zero),
                Lit(1, INT),
                Call("sub", (Call("add", (at, pos), INT, True), Lit(1, INT)), INT, True),
            ),
            INT,
            True,
        )

    def _b_Pad(self, node: Node, scope: Scope) -> Expr:
        op = "lpad" if node.args.get("is_left") else "rpad"
        args = [node.this, node.expression]
        if node.args.get("fill_pattern") is not None:
            args.append(node.args["fill_pattern"])
        return self._named_function(op, args, scope, node)

    def _b_Distinct(self, node: Node, scope: Scope) -> Expr:
        raise SQLError("DISTINCT is only allowed inside an aggregate here")

    def _b_Star(self, node: Node, scope: Scope) -> Expr:
        raise SQLError("'*' is not valid here")


# -- constant folding ----------------------------------------------------------------------

_NO = object()


def _convert_const(v: Any, f: Field) -> Any:
    """A Python constant as the Python value of type ``f.type`` (``_NO`` if it cannot)."""
    t = f.type
    if v is None:
        return None
    k = t.kind
    try:
        if k == "int":
            if isinstance(v, bool):
                return int(v)
            if isinstance(v, int):
                return v
            if isinstance(v, (float, decimal.Decimal)):
                return int(v)
            if isinstance(v, str):
                return int(v.strip())
        if k == "decimal":
            if isinstance(v, (int, decimal.Decimal)) and not isinstance(v, bool):
                return decimal.Decimal(v).quantize(_unit(t.scale), context=EXACT)
            if isinstance(v, float):
                return decimal.Decimal(repr(v)).quantize(_unit(t.scale), context=EXACT)
            if isinstance(v, str):
                return decimal.Decimal(v.strip()).quantize(_unit(t.scale), context=EXACT)
        if k == "double":
            if isinstance(v, bool):
                return float(v)
            if isinstance(v, (int, float, decimal.Decimal)):
                return float(v)
            if isinstance(v, str):
                return float(v.strip())
        if k == "string":
            if isinstance(v, str):
                return v
            return _NO
        if k == "date":
            if isinstance(v, _dt.datetime):
                return v.date()
            if isinstance(v, _dt.date):
                return v
            if isinstance(v, str):
                day = parse_date_text(v)
                return _NO if day is None else day
        if k == "timestamp":
            if isinstance(v, _dt.datetime):
                return v
            if isinstance(v, _dt.date):
                return _dt.datetime(v.year, v.month, v.day)
            if isinstance(v, str):
                ts = parse_timestamp_text(v)
                return _NO if ts is None else ts
        if k == "boolean":
            if isinstance(v, bool):
                return v
            return _NO
    except (ValueError, ArithmeticError):
        return _NO
    return _NO


def _lit_decimal(e: Expr) -> SqlType | None:
    """The exact decimal type of an integer literal (Spark types literals by their digits)."""
    if isinstance(e, Lit) and e.type.kind == "int" and e.value is not None:
        return decimal_type(max(1, len(str(abs(int(e.value))))), 0)
    return None


#: at most this many expression nodes are copied into the branches of a SQLite CASE that
#: mixes INTEGER and REAL values (``Planner._arith_by_branch``)
_BRANCH_COPIES = 2000


def _tree_size(e: Expr) -> int:
    """The number of nodes of expression ``e``."""
    return 1 + sum(_tree_size(c) for c in e.children())


def _fold(e: Expr, planner: Planner, consts: dict[int, Lit] | None = None) -> Lit | None:
    """Evaluates an expression without input fields (``consts`` gives fields) to a literal."""
    import numpy as np

    from ddflow.sql.expr import Ctx, evaluate
    from ddflow.sql.rows import Frame
    from ddflow.sql.strings import StringDict
    from ddflow.sql.types import decode_values, encode_values

    consts = consts or {}
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Col) and x.index not in consts:
            return None
        if isinstance(x, Outer):
            return None
        if isinstance(x, Call) and x.op == "one_row":
            return None
        stack.extend(x.children())
    strings = StringDict()
    width = max(consts) + 1 if consts else 0
    cols = []
    nulls = []
    for i in range(width):
        lit = consts.get(i)
        if lit is None or lit.value is None:
            cols.append(np.zeros(1, np.int64))
            nulls.append(True)
        else:
            phys, _ = encode_values([lit.value], lit.type, "constant", strings)
            cols.append(phys)
            nulls.append(False)
    masks = []
    if width:
        m = 0
        for i, is_null in enumerate(nulls):
            if is_null:
                m |= 1 << i
        masks = [np.array([m], dtype=np.int64)] if width <= 62 else []
    frame = Frame(cols + masks, width, 1)
    try:
        v, nl = evaluate(_remap_consts(e), frame, Ctx(strings, planner.dialect))
    except Exception:  # noqa: BLE001 - a constant that fails folds to nothing
        return None
    if nl is not None and bool(nl[0]):
        return Lit(None, e.type)
    if e.type.kind == "boolean":
        return Lit(bool(v[0]), e.type)
    (val,) = decode_values(np.asarray(v), None, e.type, strings)
    return Lit(val, e.type)


def _remap_consts(e: Expr) -> Expr:
    return e


def _unalias(node: Node) -> Node:
    return node.this if isinstance(node, exp.Alias) else node


def _is_scalar_agg(q: Node) -> bool:
    return (
        not q.args.get("group")
        and not q.args.get("having")
        and any(isinstance(n, _AGGS) for s in q.expressions for n in _walk_no_subqueries(s))
    )


def _agg_input(p: Plan) -> Plan:
    """The relation an aggregation read (the input of the Aggregate under filters)."""
    while not isinstance(p, Aggregate):
        ins = p.inputs()
        if not ins:
            raise SQLError("internal: no aggregate under this scope")
        p = ins[0]
    return p.input


def _display_names(tree: Node, dialect: str) -> list[str] | None:
    """The result's column names as Spark names them (an alias, a column's name, else the
    expression's text: ``sum(c)``, ``(a + 1)``, ``count(1)``); None to keep the planner's."""
    if dialect != "spark":
        return None
    q = tree
    while isinstance(q, (exp.Union, exp.Intersect, exp.Except, exp.Subquery)):
        q = q.left if not isinstance(q, exp.Subquery) else q.this
    if not isinstance(q, exp.Select):
        return None
    out = []
    for item in q.expressions:
        if isinstance(item, exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        ):
            return None
        if isinstance(item, exp.Alias):
            out.append(item.alias)
        elif isinstance(item, exp.Column):
            out.append(item.name)
        elif isinstance(item, exp.Subquery):
            out.append("scalarsubquery()")
        else:
            out.append(_spark_text(item))
    return out


def _spark_text(node: Node) -> str:
    n = node.copy()
    if "written" in n.meta:
        n = n.meta["written"].copy()
    for x in list(n.find_all(exp.Expression)):
        if "written" in x.meta and x is not n:
            x.replace(x.meta["written"].copy())
    for c in list(n.find_all(exp.Column)):
        c.set("table", None)
    for cnt in list(n.find_all(exp.Count)):
        if isinstance(cnt.this, exp.Star) or cnt.this is None:
            cnt.set("this", exp.Literal.number(1))
    for b in list(n.find_all(exp.Binary)):
        if not isinstance(b.parent, exp.Paren) and not isinstance(b, (exp.Dot, exp.Func)):
            b.replace(exp.Paren(this=b.copy()))
    if isinstance(n, exp.Binary) and not isinstance(n, exp.Func):  # (corr(a, b) is one)
        n = exp.Paren(this=n)
    n = _spark_spelled(n)
    try:
        return str(n.sql(dialect="spark", normalize_functions="lower"))
    except Exception:  # noqa: BLE001 - a name is cosmetic; fall back to plain text
        return str(node.sql(dialect="spark"))


def _spark_spelled(n: Node) -> Node:
    """``n`` with what Spark names in words of its own written so: ``percentile(x, p, 1)``
    (with its frequency), ``percentile_cont(p) WITHIN GROUP (ORDER BY x DESC)``, ``mode()
    WITHIN GROUP (ORDER BY x)`` with its direction reversed,
    ``first(x)`` for ``first(x, true)``, ``true`` in lower case."""

    def text(x: Node) -> str:
        return str(x.sql(dialect="spark", normalize_functions="lower"))

    def fix(x: Node) -> Node:
        if isinstance(x, exp.ApproxQuantile):
            acc = x.args.get("accuracy")
            return exp.Var(
                this=f"percentile_approx({text(x.this)}, {text(x.args['quantile'])}, "
                f"{text(acc) if acc is not None else 10000})"
            )
        if isinstance(x, exp.Quantile):
            return exp.Var(this=f"percentile({text(x.this)}, {text(x.args['quantile'])}, 1)")
        if isinstance(x, exp.WithinGroup) and isinstance(
            x.this, (exp.PercentileCont, exp.PercentileDisc)
        ):
            items = x.expression.expressions if isinstance(x.expression, exp.Order) else []
            order = ", ".join(
                text(i.this) + (" DESC" if i.args.get("desc") else "")
                if isinstance(i, exp.Ordered)
                else text(i)
                for i in items
            )
            name = (
                "percentile_disc" if isinstance(x.this, exp.PercentileDisc) else "percentile_cont"
            )
            return exp.Var(this=f"{name}({text(x.this.this)}) WITHIN GROUP (ORDER BY {order})")
        if isinstance(x, exp.WithinGroup) and isinstance(x.this, exp.Mode):
            items = x.expression.expressions if isinstance(x.expression, exp.Order) else []
            if len(items) == 1:
                it = items[0]
                ordered = isinstance(it, exp.Ordered)
                desc = ordered and bool(it.args.get("desc"))
                value = text(it.this if ordered else it)
                # Spark 4 names it with the direction reversed (its Mode.sql): DESC when
                # ascending, none when descending
                return exp.Var(
                    this=f"mode() WITHIN GROUP (ORDER BY {value}{'' if desc else ' DESC'})"
                )
        if isinstance(x, exp.IgnoreNulls):
            return x.this
        if isinstance(x, exp.Boolean):
            return exp.Var(this="true" if x.this else "false")
        return x

    return n.transform(fix)


def _with_fields(p: Plan, fields: tuple[Field, ...]) -> Plan:
    """``p`` with its fields renamed (a projection when the node computes them)."""
    import dataclasses

    if isinstance(p, (Project, Aggregate, Join, UnionAll, SetOp, Values, Recursive)):
        return dataclasses.replace(p, fields=fields)
    if isinstance(p, (Filter, Distinct, TopK)):
        return Project(p, tuple(_project_all(p)), fields)
    return Project(p, tuple(_project_all(p)), fields)


def _only_source(c: Node, aliases: list[str]) -> int | None:
    """The one FROM source (by position) a condition with a subquery reads, or None (no
    subquery, or several sources)."""
    if not any(isinstance(n, (exp.Subquery, exp.Exists, exp.Select)) for n in c.walk()):
        return None
    used = _outer_tables(c, [])
    if None in used:
        return None
    hit = [i for i, a in enumerate(aliases) if a in used]
    if len(hit) != 1 or len(used) != 1:
        return None
    return hit[0]


def _outer_tables(node: Node, inner: list[set[str]]) -> set[str | None]:
    """The table aliases that columns of ``node`` name outside the subqueries they are in
    (``inner``: the aliases of the subqueries around ``node``); None for a column without
    a table."""
    if isinstance(node, exp.Select):
        own = {_name(t.alias_or_name) for t in _from_tables(node)}
        inner = [*inner, own]
    out: set[str | None] = set()
    if isinstance(node, exp.Column):
        t = _name(node.table) if node.table else None
        if t is None or not any(t in level for level in inner):
            out.add(t)
        return out
    for child in node.iter_expressions():
        out |= _outer_tables(child, inner)
    return out


def _from_tables(sel: Node) -> list[Node]:
    """The tables and derived tables a SELECT's own FROM and JOINs name."""
    out = []
    f = sel.args.get("from_") or sel.args.get("from")
    if f is not None:
        out.append(f.this)
    for j in sel.args.get("joins") or []:
        out.append(j.this)
    return out


def _reads_fields(e: Expr) -> bool:
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, (Col, Outer)):
            return True
        if isinstance(x, Call) and x.op == "one_row":
            return True
        stack.extend(x.children())
    return False


def _flatten(e: Expr, op: str) -> list[Expr]:
    if isinstance(e, Call) and e.op == op:
        out: list[Expr] = []
        for a in e.args:
            out.extend(_flatten(a, op))
        return out
    return [e]


def _implied(e: Expr, mine: Any) -> Expr | None:
    """For an OR ``e``: the OR, over its branches, of each branch's conditions on the fields
    ``mine`` accepts (None unless every branch has one): implied by ``e``."""
    parts: list[Expr] = []
    for d in _flatten(e, "or"):
        own = [
            c
            for c in _flatten(d, "and")
            if _uses(c) and all(mine(u) for u in _uses(c)) and not _has_outer(c)
        ]
        if not own:
            return None
        parts.append(_and_all(own))  # type: ignore[arg-type]
    out = parts[0]
    for q in parts[1:]:
        out = Call("or", (out, q), BOOLEAN, out.nullable or q.nullable)
    return out


def _pins(e: Expr) -> bool:
    """Whether a filter fixes a column to constants (``x = c``, ``x IN (...)``, an OR of
    those): a source so filtered is small."""
    for c in _flatten(e, "and"):
        if isinstance(c, Call) and c.op == "in":
            return True
        if isinstance(c, Call) and c.op == "eq" and any(isinstance(a, Lit) for a in c.args):
            return True
        if isinstance(c, Call) and c.op == "or" and all(_pins(d) for d in _flatten(c, "or")):
            return True
    return False


def _implied_equalities(
    bound: list[tuple[Any, Expr, set[int]]], fields: tuple[Field, ...], owner: list[int]
) -> dict[int, int]:
    """Adds to ``bound`` the equalities its equalities of columns of one type imply by
    transitivity, one per pair of sources of a class of equal columns that no equality
    joins yet (and one per further column of a source, which then filters it). Returns
    each such column's class (the least column index in it), for the joins to leave out
    key columns that repeat an equality already applied. An equality of two columns is
    NULL when either is NULL, so the implied ones keep exactly the rows the written ones
    keep."""
    parent: dict[int, int] = {}

    def find(i: int) -> int:
        while parent.get(i, i) != i:
            i = parent[i]
        return i

    written: list[tuple[int, int]] = []  # the columns of each written equality
    for _, e, srcs in bound:
        if not (isinstance(e, Call) and e.op == "eq" and e.extra is None and len(srcs) == 2):
            continue
        a, b = e.args
        if not (isinstance(a, Col) and isinstance(b, Col) and a.type == b.type):
            continue
        ra, rb = find(a.index), find(b.index)
        parent.setdefault(a.index, a.index)
        parent.setdefault(b.index, b.index)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
        written.append((a.index, b.index))
    # the pairs of sources a written equality of each class joins
    direct: set[tuple[int, int, int]] = set()
    for i, j in written:
        si, sj = sorted((owner[i], owner[j]))
        direct.add((find(i), si, sj))
    members: dict[int, list[int]] = {}
    for i in sorted(parent):
        members.setdefault(find(i), []).append(i)
    classes: dict[int, int] = {}
    for root, cols in members.items():
        if len(cols) < 3:
            continue
        for i in cols:
            classes[i] = root
        first: dict[int, int] = {}  # source -> its first column in the class
        for i in cols:
            src = owner[i]
            if src in first:
                # a second column of one source: equal to its first (a filter on it)
                j = first[src]
                bound.append((None, _col_eq(j, i, fields), {src}))
                continue
            first[src] = i
        held = sorted(first)
        for x, sa in enumerate(held):
            for sb in held[x + 1 :]:
                if (root, sa, sb) not in direct:
                    bound.append((None, _col_eq(first[sa], first[sb], fields), {sa, sb}))
    return classes


def _col_eq(i: int, j: int, fields: tuple[Field, ...]) -> Expr:
    fi, fj = fields[i], fields[j]
    return Call(
        "eq",
        (Col(i, fi.type, fi.nullable, fi.name), Col(j, fj.type, fj.nullable, fj.name)),
        BOOLEAN,
        fi.nullable or fj.nullable,
    )


def _equi_parts(
    e: Expr, offsets: list[int], owner: list[int], pick: int, have: set[int]
) -> tuple[Expr, Expr] | None:
    """``e`` as ``(expr over joined sources, expr over source pick)`` when it is such an
    equality."""
    if not (isinstance(e, Call) and e.op == "eq"):
        return None
    a, b = e.args
    sa = {owner[i] for i in _uses(a)}
    sb = {owner[i] for i in _uses(b)}
    if sa and sb and sa <= have and sb == {pick}:
        return a, b
    if sa and sb and sb <= have and sa == {pick}:
        return b, a
    return None


def _remap_cols(e: Expr, offsets: list[int], owner: list[int], pos: dict[int, int]) -> Expr:
    """An expression over all sources (at ``offsets``) as one over the joined relation
    (sources at ``pos``)."""
    mapping = {}
    for i in _uses(e):
        src = owner[i]
        mapping[i] = pos[src] + (i - offsets[src])
    return _remap(e, mapping)


def _unit(scale: int) -> decimal.Decimal:
    """One unit in the last place of a decimal of ``scale`` (``10**-scale``)."""
    return decimal.Decimal(1).scaleb(-scale, EXACT)


_NUMBER_KINDS = ("int", "double", "decimal")


def _number_and_text(a: SqlType, b: SqlType) -> bool:
    """Whether one of two types is a number and the other text (SQLite compares such a
    pair by affinity)."""
    kinds = {a.kind, b.kind}
    return "string" in kinds and bool(kinds & set(_NUMBER_KINDS))


def _has_affinity(e: Expr) -> bool:
    """SQLite: whether an operand has a type affinity (a column, or a CAST to a type)."""
    return isinstance(e, Col) or (isinstance(e, Call) and e.op == "cast")


def _either_null(a: Expr, b: Expr) -> Expr:
    return Call(
        "or",
        (Call("is_null", (a,), BOOLEAN, False), Call("is_null", (b,), BOOLEAN, False)),
        BOOLEAN,
        False,
    )


def _number_below_text(rel: str, n: Expr, s: Expr) -> Expr:
    """``n rel s`` where the number ``n`` is compared with the text ``s`` as they are (SQLite
    sorts every number below every text): constant, NULL where either is."""
    holds = Lit(rel in ("lt", "le", "ne"), BOOLEAN)
    if not (n.nullable or s.nullable):
        return holds
    return Call("case", (_either_null(n, s), Lit(None, BOOLEAN), holds), BOOLEAN, True)
