"""A seeded random generator of SQL queries, tables and change streams for the DuckDB oracle.

``generate(seed)`` gives a ``Scenario``: three small tables' DDL, a change stream (inserts
with duplicates and NULLs in every column, deletes, updates as delete + insert of the same
key in one commit, a table emptied and refilled) and one query in two spellings, ddflow's
(Spark SQL) and DuckDB's. The grammar covers projections with expressions, filters with
AND/OR/NOT and NULL-producing comparisons, GROUP BY with aggregates and HAVING, inner and
left joins, IN/EXISTS and scalar subqueries, UNION/EXCEPT/INTERSECT, DISTINCT, and ORDER BY
over every output column with LIMIT.

The two spellings differ only where the dialects do: Spark's avg of a DECIMAL(p,2) is a
decimal with scale 6, DuckDB's a double (DuckDB's is rounded to 6 places). Numbers are small
and doubles are multiples of 1/4, so sums are exact and nothing overflows; there is no
division (Spark and DuckDB disagree on x/0).

``AVOID`` lists constructs with a known, recorded bug (each has a strict-xfail repro in
``test_sql_random.py``, which fails once the bug is fixed, so the entry can go); the
generator leaves them out so that random queries find new bugs instead of old ones.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from decimal import Decimal as D
from typing import Any

from oracle import Change, Del, Ins

__all__ = ["AVOID", "DDL", "Scenario", "generate"]

# constructs the generator leaves out while their bug is open; each then needs a strict-xfail
# repro in test_sql_random.py (AVOIDED), which fails once the bug is fixed. The switches
# (all four bugs were fixed in 3b1aa94, so none is on):
# - bare_bool: a BOOLEAN column used directly as a predicate (NOT b, CASE WHEN b) is
#   written ``b = TRUE`` instead (the same under three-valued logic)
# - paren_group_key: a GROUP BY key in parentheses, ``GROUP BY (k % 3)``
# - order_by_scalar_subquery: ORDER BY over a scalar-subquery output column
# - case_null_string: ``CASE WHEN .. THEN 'lit' ELSE NULL END`` (a string CASE that is NULL)
AVOID: frozenset[str] = frozenset()

DDL = [
    "CREATE TABLE r (k INT, a INT, s STRING, m DECIMAL(8,2), d DATE, b BOOLEAN)",
    "CREATE TABLE q (k INT, b2 INT, s2 STRING, f DOUBLE)",
    "CREATE TABLE p (k INT, c INT)",
]

COLUMNS: dict[str, list[tuple[str, str]]] = {
    "r": [("k", "int"), ("a", "int"), ("s", "str"), ("m", "dec"), ("d", "date"), ("b", "bool")],
    "q": [("k", "int"), ("b2", "int"), ("s2", "str"), ("f", "dbl")],
    "p": [("k", "int"), ("c", "int")],
    # the CTE ``c`` some queries define over r (see _Gen.from_clause)
    "c": [("k", "int"), ("a", "int"), ("s", "str")],
}
TABLES = ["r", "q", "p"]

_DATES = [dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2023, 12, 31), dt.date(2024, 2, 29)]
_VALUES: dict[str, list[Any]] = {
    "int": [-2, -1, 0, 1, 2, 3],
    "key": [0, 1, 2, 3, 4],
    "str": ["a", "b", "ab", "B", "", "ba"],
    "dec": [D("-1.50"), D("0.00"), D("0.25"), D("2.75"), D("10.00")],
    "dbl": [-1.5, 0.0, 0.25, 2.5, 4.0],
    "date": _DATES,
    "bool": [True, False],
}


@dataclass(frozen=True)
class Scenario:
    """One random case: a query in both spellings, whether its order is determined, and a
    change stream over ``DDL``'s tables."""

    seed: int
    sql: str
    duck: str
    ordered: bool
    commits: list[list[Change]]


def _split(text: str) -> tuple[str, str]:
    """ddflow's and DuckDB's spelling of a text with AVGDEC( ... )AVGEND markers."""
    sp = text.replace("AVGDEC(", "avg(").replace(")AVGEND", ")")
    dk = text.replace("AVGDEC(", "round(avg(").replace(")AVGEND", "), 6)")
    return sp, dk


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.seed = seed
        self.scalar_out = False  # the SELECT list holds a scalar subquery
        self.with_ = ""  # a WITH clause the FROM clause uses

    # -- data -------------------------------------------------------------------------------
    def value(self, kind: str, col: str) -> Any:
        if self.rnd.random() < 0.15:
            return None
        return self.rnd.choice(_VALUES["key" if col == "k" else kind])

    def row(self, table: str) -> tuple[Any, ...]:
        return tuple(self.value(kind, col) for col, kind in COLUMNS[table])

    def stream(self) -> list[list[Change]]:
        live: dict[str, list[tuple[Any, ...]]] = {t: [] for t in TABLES}
        commits: list[list[Change]] = []
        n_commits = self.rnd.randint(5, 8)
        emptied = self.rnd.choice(TABLES)
        empty_at = self.rnd.randint(2, n_commits - 2)
        for i in range(n_commits):
            c: list[Change] = []
            for t in TABLES:
                if i == 0:
                    rows = [self.row(t) for _ in range(self.rnd.randint(4, 10))]
                    rows += self.rnd.sample(rows, min(2, len(rows)))  # duplicates
                    c.append(Ins(t, rows))
                    live[t].extend(rows)
                    continue
                if t == emptied and i == empty_at:
                    if live[t]:
                        c.append(Del(t, list(live[t])))
                    live[t] = []
                    continue
                if t == emptied and i == empty_at + 1:
                    rows = [self.row(t) for _ in range(self.rnd.randint(3, 8))]
                    c.append(Ins(t, rows))
                    live[t].extend(rows)
                    continue
                action = self.rnd.random()
                if action < 0.35 and live[t]:  # update: same key, new values
                    old = self.rnd.choice(live[t])
                    new = (old[0], *self.row(t)[1:])
                    c += [Del(t, [old]), Ins(t, [new])]
                    live[t].remove(old)
                    live[t].append(new)
                elif action < 0.6 and live[t]:  # delete some
                    gone = self.rnd.sample(live[t], min(len(live[t]), self.rnd.randint(1, 3)))
                    c.append(Del(t, gone))
                    for r in gone:
                        live[t].remove(r)
                elif action < 0.85:  # insert, maybe copies of present rows
                    rows = [self.row(t) for _ in range(self.rnd.randint(1, 4))]
                    if live[t] and self.rnd.random() < 0.5:
                        rows.append(self.rnd.choice(live[t]))
                    c.append(Ins(t, rows))
                    live[t].extend(rows)
            commits.append(c)
        return commits

    # -- expressions --------------------------------------------------------------------------
    def cols(self, scope: list[tuple[str, str]], kind: str) -> list[str]:
        return [f"{a}.{c}" for a, t in scope for c, k in COLUMNS[t] if k == kind]

    def lit(self, kind: str) -> str:
        if kind == "int":
            return str(self.rnd.choice([-1, 0, 1, 2, 3]))
        if kind == "str":
            return "'" + self.rnd.choice(["a", "b", "ab", "", "B"]) + "'"
        if kind == "dec":
            return self.rnd.choice(["0", "1.5", "2.75", "-1.50"])
        if kind == "dbl":
            return self.rnd.choice(["0.25", "1", "-1.5"])
        if kind == "date":
            return f"DATE '{self.rnd.choice(_DATES).isoformat()}'"
        return self.rnd.choice(["TRUE", "FALSE"])

    def expr(self, scope: list[tuple[str, str]], kind: str, depth: int = 0) -> str:
        cols = self.cols(scope, kind)
        if depth >= 2 or self.rnd.random() < 0.45:
            if cols and self.rnd.random() < 0.85:
                return self.rnd.choice(cols)
            return self.lit(kind)
        x = lambda: self.expr(scope, kind, depth + 1)  # noqa: E731 - a local shorthand
        if kind == "int":
            opts = [
                lambda: f"{x()} + {x()}",
                lambda: f"{x()} - {x()}",
                lambda: f"{x()} * {self.rnd.choice([2, 3, -1])}",
                lambda: f"abs({x()})",
                lambda: f"COALESCE({x()}, {self.lit('int')})",
                lambda: f"NULLIF({x()}, {self.lit('int')})",
                lambda: f"({x()} % {self.rnd.choice([2, 3])})",
                lambda: f"CASE WHEN {self.pred(scope, depth + 1)} THEN {x()} ELSE {x()} END",
                lambda: f"length({self.expr(scope, 'str', depth + 1)})",
            ]
            if self.cols(scope, "date"):
                opts.append(lambda: f"EXTRACT(MONTH FROM {self.expr(scope, 'date', 2)})")
        elif kind == "str":
            opts = [
                lambda: f"upper({x()})",
                lambda: f"lower({x()})",
                lambda: f"({x()} || {self.lit('str')})",
                lambda: f"substring({x()}, 1, 1)",
                lambda: f"trim({x()})",
                lambda: f"COALESCE({x()}, 'z')",
                lambda: (
                    f"CASE WHEN {self.pred(scope, depth + 1)} THEN {x()} "
                    f"ELSE {x() if 'case_null_string' in AVOID else 'NULL'} END"
                ),
            ]
        elif kind == "dec":
            opts = [
                lambda: f"{x()} + {self.rnd.choice(['1', '0.25'])}",
                lambda: f"{x()} * 2",
                lambda: f"{x()} - {x()}",
                lambda: f"COALESCE({x()}, 0)",
            ]
        elif kind == "dbl":
            opts = [lambda: f"{x()} * 2", lambda: f"{x()} + {x()}", lambda: f"-({x()})"]
        else:
            return self.rnd.choice(cols) if cols else self.lit(kind)
        return self.rnd.choice(opts)()

    def pred(self, scope: list[tuple[str, str]], depth: int = 0) -> str:
        r = self.rnd.random()
        if depth < 2 and r < 0.3:
            op = self.rnd.choice(["AND", "OR"])
            return f"({self.pred(scope, depth + 1)} {op} {self.pred(scope, depth + 1)})"
        if depth < 2 and r < 0.4:
            return f"NOT ({self.pred(scope, depth + 1)})"
        kinds = [k for k in ("int", "str", "dec", "dbl", "date", "bool") if self.cols(scope, k)]
        kind = self.rnd.choice(kinds)
        col = self.rnd.choice(self.cols(scope, kind))
        form = self.rnd.random()
        if kind == "bool":
            bare = f"{col} = TRUE" if "bare_bool" in AVOID else col
            return self.rnd.choice(
                [bare, f"{col} = {self.lit('bool')}", f"{col} IS NULL", f"{col} IS NOT NULL"]
            )
        if form < 0.12:
            return f"{col} IS {'NOT ' if self.rnd.random() < 0.5 else ''}NULL"
        if kind == "str" and form < 0.3:
            pat = self.rnd.choice(["a%", "%b", "_", "%a%", "B%", ""])
            neg = "NOT " if self.rnd.random() < 0.3 else ""
            return f"{self.expr(scope, 'str', depth + 1)} {neg}LIKE '{pat}'"
        if kind == "int" and form < 0.3:
            lits = [self.lit("int") for _ in range(self.rnd.randint(1, 3))]
            if self.rnd.random() < 0.25:
                lits.append("NULL")
            neg = "NOT " if self.rnd.random() < 0.3 else ""
            return f"{self.expr(scope, 'int', depth + 1)} {neg}IN ({', '.join(lits)})"
        if kind == "int" and form < 0.35:
            neg = "NOT " if self.rnd.random() < 0.5 else ""
            return (
                f"{self.expr(scope, 'int', depth + 1)} IS {neg}DISTINCT FROM "
                f"{self.expr(scope, 'int', depth + 1)}"
            )
        if kind == "int" and form < 0.4:
            lo = self.rnd.randint(-2, 1)
            return f"{self.expr(scope, 'int', depth + 1)} BETWEEN {lo} AND {lo + 2}"
        op = self.rnd.choice(["=", "<>", "<", "<=", ">", ">="])
        other = (
            self.expr(scope, kind, depth + 1)
            if self.rnd.random() < 0.5 and kind != "date"
            else self.lit(kind)
        )
        return f"{self.expr(scope, kind, depth + 1)} {op} {other}"

    # -- aggregates ---------------------------------------------------------------------------
    def agg(self, scope: list[tuple[str, str]]) -> tuple[str, str]:
        """An aggregate call and the kind it returns."""
        kinds = [k for k in ("int", "str", "dec", "dbl", "date") if self.cols(scope, k)]
        kind = self.rnd.choice(kinds)
        e = self.expr(scope, kind, 1)
        fns = ["count", "min", "max", "count_star", "count_distinct"]
        if kind in ("int", "dec", "dbl"):
            fns += ["sum", "sum", "avg"]
        if kind == "int":
            fns += ["sum_distinct"]
        fn = self.rnd.choice(fns)
        if fn == "count_star":
            return "count(*)", "int"
        if fn == "count_distinct":
            return f"count(DISTINCT {e})", "int"
        if fn == "sum_distinct":
            return f"sum(DISTINCT {e})", "int"
        if fn == "count":
            return f"count({e})", "int"
        if fn == "avg":
            if kind == "dec":
                return f"AVGDEC({e})AVGEND", "dblish"
            return f"avg({e})", "dblish"
        return f"{fn}({e})", kind

    # -- queries ------------------------------------------------------------------------------
    def from_clause(self) -> tuple[str, list[tuple[str, str]]]:
        shape = self.rnd.random()
        if shape < 0.08:
            self.with_ = (
                f"WITH c AS (SELECT x.k, x.a, x.s FROM r AS x WHERE {self.pred([('x', 'r')], 1)}) "
            )
            if self.rnd.random() < 0.5:
                return "c AS t1", [("t1", "c")]
            kind = self.rnd.choice(["JOIN", "LEFT JOIN"])
            return f"c AS t1 {kind} q AS t2 ON t1.k = t2.k", [("t1", "c"), ("t2", "q")]
        if shape < 0.45:
            t = self.rnd.choice(["r", "q"])
            return f"{t} AS t1", [("t1", t)]
        kind = self.rnd.choice(
            ["JOIN", "JOIN", "LEFT JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"]
        )
        if shape < 0.85:
            on = "t1.k = t2.k"
            if self.rnd.random() < 0.3:
                on += f" AND {self.pred([('t1', 'r'), ('t2', 'q')], 1)}"
            return f"r AS t1 {kind} q AS t2 ON {on}", [("t1", "r"), ("t2", "q")]
        kind2 = self.rnd.choice(["JOIN", "LEFT JOIN"])
        return (
            f"r AS t1 {kind} q AS t2 ON t1.k = t2.k {kind2} p AS t3 ON t3.c = t1.a",
            [("t1", "r"), ("t2", "q"), ("t3", "p")],
        )

    def subquery_pred(self, scope: list[tuple[str, str]]) -> str:
        outer = scope[0][0]
        form = self.rnd.choice(["exists", "not_exists", "in", "not_in", "scalar"])
        inner = self.rnd.choice(["q", "p"])
        iscope = [("sq", inner)]
        cond = f"sq.k = {outer}.k"
        if self.rnd.random() < 0.4:
            cond += f" AND {self.pred(iscope, 1)}"
        if form in ("exists", "not_exists"):
            neg = "NOT " if form == "not_exists" else ""
            return f"{neg}EXISTS (SELECT 1 FROM {inner} AS sq WHERE {cond})"
        if form in ("in", "not_in"):
            neg = "NOT " if form == "not_in" else ""
            col = self.rnd.choice(self.cols(iscope, "int"))
            where = f" WHERE {self.pred(iscope, 1)}" if self.rnd.random() < 0.5 else ""
            probe = self.rnd.choice(self.cols(scope, "int"))
            return f"{probe} {neg}IN (SELECT {col} FROM {inner} AS sq{where})"
        col = self.rnd.choice(self.cols(iscope, "int"))
        fn = self.rnd.choice(["max", "min", "count", "sum"])
        corr = f" WHERE {cond}" if self.rnd.random() < 0.6 else ""
        op = self.rnd.choice(["<", ">=", "=", "<>"])
        probe = self.rnd.choice(self.cols(scope, "int"))
        return f"{probe} {op} (SELECT {fn}({col}) FROM {inner} AS sq{corr})"

    def select(self) -> tuple[str, bool]:
        """A query text (with AVGDEC markers) and whether it has a determined order."""
        shape = self.rnd.random()
        if shape < 0.12:
            return self.setop(), False
        if shape < 0.2:
            return self.derived(), False
        text, ordered = self.block(shape)
        return self.with_ + text, ordered

    def derived(self) -> str:
        """An aggregate over a derived table that is itself a query with named columns."""
        frm, scope = self.from_clause()
        with_, self.with_ = self.with_, ""
        key = self.rnd.choice(self.cols(scope, "int"))
        val = self.rnd.choice(self.cols(scope, "int") + self.cols(scope, "str"))
        inner = f"SELECT {key} AS c0, {val} AS c1, {self.expr(scope, 'int')} AS c2 FROM {frm}"
        if self.rnd.random() < 0.5:
            inner += f" WHERE {self.pred(scope)}"
        if self.rnd.random() < 0.5:
            inner = f"SELECT c0, max(c1) AS c1, count(*) AS c2 FROM ({inner}) AS y GROUP BY c0"
        outer = self.rnd.choice(
            [
                "SELECT x.c2, count(*), min(x.c1) FROM ({}) AS x GROUP BY x.c2",
                "SELECT x.c0, x.c1 FROM ({}) AS x WHERE x.c2 > 0",
                "SELECT DISTINCT x.c1 FROM ({}) AS x",
                "SELECT count(*), sum(x.c2), count(DISTINCT x.c0) FROM ({}) AS x",
            ]
        )
        return with_ + outer.format(inner)

    def block(self, shape: float) -> tuple[str, bool]:
        """A SELECT over a FROM clause: a projection or an aggregate."""
        frm, scope = self.from_clause()
        where = ""
        if self.rnd.random() < 0.7:
            conds = [self.pred(scope)]
            if self.rnd.random() < 0.3:
                conds.append(self.subquery_pred(scope))
            where = " WHERE " + " AND ".join(conds)
        if shape < 0.5:
            kinds = ["int", "str", "dec", "dbl", "date", "bool"]
            outs = []
            for _ in range(self.rnd.randint(1, 3)):
                kinds_here = [k for k in kinds if self.cols(scope, k)] + ["int"]
                k = self.rnd.choice(kinds_here)
                outs.append(self.expr(scope, k))
            if self.rnd.random() < 0.15:
                outs.append(self.pred(scope, 1))
            if self.rnd.random() < 0.15:
                outs.append(self.scalar_subquery(scope))
                self.scalar_out = True
            distinct = "DISTINCT " if self.rnd.random() < 0.25 else ""
            sql = f"SELECT {distinct}{', '.join(outs)} FROM {frm}{where}"
            return self.maybe_top_k(sql, len(outs))
        # an aggregate query
        keys = []
        if self.rnd.random() < 0.8:
            for _ in range(self.rnd.randint(1, 2)):
                kinds_here = [
                    k for k in ("int", "str", "bool", "date", "dec") if self.cols(scope, k)
                ]
                k = self.rnd.choice(kinds_here)
                key = self.expr(scope, k, 1)
                while not any(c in key for c in self.cols(scope, k)):  # no literal keys:
                    key = self.expr(scope, k, 1)  # those are ordinals
                if "paren_group_key" in AVOID:
                    key = _strip_parens(key)
                keys.append(key)
        aggs = [self.agg(scope)[0] for _ in range(self.rnd.randint(1, 3))]
        sql = f"SELECT {', '.join(keys + aggs)} FROM {frm}{where}"
        if keys:
            sql += f" GROUP BY {', '.join(keys)}"
        if self.rnd.random() < 0.35:
            a, kind = self.agg(scope)
            if kind in ("int", "dec", "dbl"):
                sql += f" HAVING {a} {self.rnd.choice(['>', '<=', '<>'])} {self.lit(kind)}"
            elif kind == "str":
                sql += f" HAVING {a} > 'a'"
            else:
                sql += f" HAVING {a} IS NOT NULL"
        return self.maybe_top_k(sql, len(keys) + len(aggs))

    def scalar_subquery(self, scope: list[tuple[str, str]]) -> str:
        outer = scope[0][0]
        inner = self.rnd.choice(["q", "p"])
        col = self.rnd.choice(self.cols([("sq", inner)], "int"))
        fn = self.rnd.choice(["max", "count", "sum"])
        return f"(SELECT {fn}({col}) FROM {inner} AS sq WHERE sq.k = {outer}.k)"

    def maybe_top_k(self, sql: str, width: int) -> tuple[str, bool]:
        if self.rnd.random() >= 0.2:
            return sql, False
        if "order_by_scalar_subquery" in AVOID and self.scalar_out:
            return sql, False
        keys = []
        for i in range(1, width + 1):
            desc = self.rnd.random() < 0.5
            nulls = self.rnd.choice(["FIRST", "LAST"])
            keys.append(f"{i}{' DESC' if desc else ''} NULLS {nulls}")
        sql += f" ORDER BY {', '.join(keys)}"
        if self.rnd.random() < 0.8:
            sql += f" LIMIT {self.rnd.randint(0, 6)}"
            if self.rnd.random() < 0.3:
                sql += f" OFFSET {self.rnd.randint(1, 3)}"
        return sql, True

    def setop(self) -> str:
        op = self.rnd.choice(
            ["UNION", "UNION ALL", "EXCEPT", "INTERSECT", "EXCEPT ALL", "INTERSECT ALL"]
        )
        pairs = [("k", "k"), ("a", "b2"), ("s", "s2")]
        n = self.rnd.randint(1, 2)
        chosen = self.rnd.sample(pairs, n)
        left = f"SELECT {', '.join('t1.' + c for c, _ in chosen)} FROM r AS t1"
        right = f"SELECT {', '.join('t2.' + c for _, c in chosen)} FROM q AS t2"
        if self.rnd.random() < 0.6:
            left += f" WHERE {self.pred([('t1', 'r')])}"
        if self.rnd.random() < 0.6:
            right += f" WHERE {self.pred([('t2', 'q')])}"
        return f"{left} {op} {right}"


def _strip_parens(text: str) -> str:
    """``text`` without parentheses around all of it."""
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(text) - 1:
                return text
        text = text[1:-1]
    return text


def generate(seed: int) -> Scenario:
    """The random scenario of ``seed`` (the same every run)."""
    g = _Gen(seed)
    text, ordered = g.select()
    sql, duck = _split(text)
    return Scenario(seed, sql, duck, ordered, g.stream())
