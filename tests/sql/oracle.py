"""The DuckDB oracle: ddflow's SQL views checked against DuckDB after every commit.

An ``Oracle`` holds one ``ddflow.sql.Database`` and one in-memory DuckDB connection with the
same tables. Views are registered on both (``view``); each ``commit`` applies one list of
changes (``Ins`` / ``Del``: an update is a ``Del`` and an ``Ins`` in one commit) to both,
then compares every view's ``rows()`` with DuckDB's answer on the current table contents:

- as multisets, or as ordered lists for views marked ``ordered`` (ORDER BY over every
  output column, so the order is determined);
- numbers by value (``Decimal`` vs DuckDB's ``Decimal``/``int``/``float``), floats with a
  relative tolerance of 1e-9; booleans only equal booleans; NaN equals NaN;
- and each view's ``changes()`` since the previous commit must equal the difference of its
  contents, stamped with the commit's number.

DuckDB keeps the tables as Python multisets here and is reloaded from them after each
commit, so a delete removes exactly one occurrence of the row, as ``Database.delete`` does.

Dialect: views are written in ddflow's dialect; where DuckDB computes something else for the
same text (NULL ordering, ``avg`` of decimals, date + interval giving a timestamp) pass the
DuckDB text as ``duck=``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import random
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa

import ddflow.sql as dsql

__all__ = [
    "Del",
    "Ins",
    "Oracle",
    "OracleMismatch",
    "case",
    "check_sqlite_commits",
    "check_stream",
    "churn",
    "same_rows",
]

REL_TOL = 1e-9
ABS_TOL = 1e-9


@dataclass(frozen=True)
class Ins:
    """Insert ``rows`` (tuples in column order, ``None`` for NULL) into ``table``."""

    table: str
    rows: Sequence[tuple[Any, ...]]


@dataclass(frozen=True)
class Del:
    """Delete one occurrence of each of ``rows`` from ``table``."""

    table: str
    rows: Sequence[tuple[Any, ...]]


Change = Ins | Del


class OracleMismatch(AssertionError):
    """A view's rows differ from DuckDB's answer (the message shows where and how)."""


# -- comparing values ---------------------------------------------------------------------


def _norm(v: Any) -> Any:
    """A hashable key that is equal for equal SQL values (numbers by value, bools apart)."""
    if v is None:
        return ("null",)
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, float):
        if math.isnan(v):
            return ("nan",)
        if v == int(v) if math.isfinite(v) else False:
            return ("num", decimal.Decimal(int(v)))
        return ("num", decimal.Decimal(v)) if math.isfinite(v) else ("num", v)
    if isinstance(v, (int, decimal.Decimal)):
        return ("num", decimal.Decimal(v))
    if isinstance(v, dt.datetime):
        return ("ts", v)
    if isinstance(v, dt.date):
        return ("date", v)
    if isinstance(v, str):
        return ("str", v)
    return (type(v).__name__, v)


def _close(a: Any, b: Any) -> bool:
    """Whether two SQL values are the same (numbers by value, floats with tolerance)."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    num = (int, float, decimal.Decimal)
    if isinstance(a, num) and isinstance(b, num):
        if isinstance(a, float) or isinstance(b, float):
            fa, fb = float(a), float(b)
            if math.isnan(fa) or math.isnan(fb):
                return math.isnan(fa) and math.isnan(fb)
            return math.isclose(fa, fb, rel_tol=REL_TOL, abs_tol=ABS_TOL)
        return decimal.Decimal(a) == decimal.Decimal(b)
    if type(a) is not type(b) and not (isinstance(a, str) and isinstance(b, str)):
        return False
    return bool(a == b)


def _row_close(r: Sequence[Any], s: Sequence[Any]) -> bool:
    return len(r) == len(s) and all(_close(a, b) for a, b in zip(r, s, strict=True))


def _key(r: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(_norm(v) for v in r)


def same_rows(
    got: Sequence[Sequence[Any]], want: Sequence[Sequence[Any]], ordered: bool = False
) -> tuple[list[Any], list[Any]]:
    """``(extra, missing)``: rows of ``got`` not in ``want`` and rows of ``want`` not in
    ``got`` (as multisets, or position by position when ``ordered``); both empty when the
    two agree."""
    if ordered:
        extra, missing = [], []
        for i in range(max(len(got), len(want))):
            g = got[i] if i < len(got) else None
            w = want[i] if i < len(want) else None
            if g is None or w is None or not _row_close(g, w):
                if g is not None:
                    extra.append((i, tuple(g)))
                if w is not None:
                    missing.append((i, tuple(w)))
        return extra, missing
    cg = Counter(_key(r) for r in got)
    cw = Counter(_key(r) for r in want)
    if cg == cw:
        return [], []
    # exact keys differ: match what is left with the float tolerance
    left_g = [tuple(r) for r in got if cg[_key(r)] > cw.get(_key(r), 0)]
    left_w = [tuple(r) for r in want if cw[_key(r)] > cg.get(_key(r), 0)]
    # only the surplus of each key is unmatched
    surplus_g = cg - cw
    surplus_w = cw - cg
    rg = _take_surplus(left_g, surplus_g)
    rw = _take_surplus(left_w, surplus_w)
    unmatched_w = list(rw)
    extra = []
    for r in rg:
        for j, s in enumerate(unmatched_w):
            if _row_close(r, s):
                del unmatched_w[j]
                break
        else:
            extra.append(r)
    return extra, unmatched_w


def _take_surplus(rows: list[tuple[Any, ...]], surplus: Counter[Any]) -> list[tuple[Any, ...]]:
    need = Counter(surplus)
    out = []
    for r in rows:
        k = _key(r)
        if need[k] > 0:
            need[k] -= 1
            out.append(r)
    return out


# -- the oracle -----------------------------------------------------------------------------


@dataclass
class _View:
    sql: str
    duck: str
    ordered: bool
    view: Any
    last: list[tuple[Any, ...]] = field(default_factory=list)


def _statements(ddl: str | Iterable[str]) -> list[str]:
    if isinstance(ddl, str):
        return [s.strip() for s in ddl.split(";") if s.strip()]
    return [s.strip() for s in ddl if s.strip()]


class Oracle:
    """One ddflow database and one DuckDB connection over the same tables."""

    def __init__(
        self,
        ddl: str | Iterable[str],
        dialect: str = "spark",
        check_changes: bool = True,
        arrow: bool = False,
    ) -> None:
        #: feed ddflow Arrow tables (of DuckDB's types for the columns) instead of tuples
        self.arrow = arrow
        self.db = dsql.Database(dialect=dialect)
        self.duck = duckdb.connect()
        self.tables: dict[str, list[tuple[Any, ...]]] = {}
        self.schemas: dict[str, pa.Schema] = {}
        self.views: list[_View] = []
        self.commits = 0
        self.check_changes = check_changes
        for stmt in _statements(ddl):
            self.db.execute(stmt)
            self.duck.execute(stmt)
            name = stmt.split("(")[0].split()[-1].lower()
            self.tables[name] = []
            self.schemas[name] = (
                self.duck.sql(f"SELECT * FROM {name} LIMIT 0").to_arrow_table().schema
            )

    # -- views --------------------------------------------------------------------------
    def view(self, sql: str, duck: str | None = None, ordered: bool = False) -> Any:
        """Registers ``sql`` as a ddflow view and ``duck`` (default: the same text) as its
        DuckDB oracle; ``ordered`` compares row order too."""
        try:
            v = self.db.view(sql)
        except Exception as e:
            raise OracleMismatch(
                f"ddflow rejected the view\n  query: {sql}\n  error: {type(e).__name__}: {e}"
            ) from e
        entry = _View(sql, duck or sql, ordered, v)
        # the baseline for changes(): whatever the view holds now (a view made once tables
        # hold rows starts from them; test_sql_api checks that rows() is right here)
        entry.last = [tuple(r) for r in v.rows()]
        v.changes()
        self.views.append(entry)
        if self.commits:
            # made over tables that hold rows: it must answer at once, before a commit
            problems = self._check_view(entry, changes=False)
            if problems:
                raise OracleMismatch("\n".join(["(checked when the view was created)", *problems]))
        return v

    # -- changes ------------------------------------------------------------------------
    def arrow_table(self, table: str, rows: Sequence[tuple[Any, ...]]) -> pa.Table:
        """``rows`` of ``table`` as an Arrow table of DuckDB's types for its columns."""
        schema = self.schemas[table]
        return pa.Table.from_pylist(
            [dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema
        )

    def given(self, table: str, rows: list[tuple[Any, ...]]) -> Any:
        """What ddflow is fed for ``rows`` of ``table``: the tuples, or an Arrow table."""
        return self.arrow_table(table, rows) if self.arrow else rows

    def apply(self, changes: Iterable[Change]) -> None:
        """Applies changes to ddflow (uncommitted) and to the Python copy of the tables."""
        for c in changes:
            rows = [tuple(r) for r in c.rows]
            given = self.given(c.table, rows)
            if isinstance(c, Ins):
                self.db.insert(c.table, given)
                self.tables[c.table].extend(rows)
            else:
                self.db.delete(c.table, given)
                self.remove_rows(c.table, rows)

    def remove_rows(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Takes one copy of each of ``rows`` out of the Python copy of ``table``."""
        gone = Counter(_key(r) for r in rows)
        kept = []
        for s in self.tables[table]:
            k = _key(s)
            if gone[k]:
                gone[k] -= 1
            else:
                kept.append(s)
        missing = [k for k, n in gone.items() if n]
        if missing:  # pragma: no cover - the stream itself is wrong
            raise AssertionError(f"test stream deletes {missing[0]} absent from {table}")
        self.tables[table] = kept

    def commit(self, changes: Iterable[Change] = (), check: bool = True) -> None:
        """Applies ``changes``, commits, reloads DuckDB and (``check``) compares views."""
        self.apply(changes)
        try:
            self.db.commit()
        except Exception as e:
            raise OracleMismatch(
                f"commit {self.commits} raised {type(e).__name__}: {e}\n"
                + "\n".join(f"  view: {v.sql}" for v in self.views)
            ) from e
        self.commits += 1
        self._reload()
        if check:
            self.check()

    def _reload(self) -> None:
        for name, rows in self.tables.items():
            self.duck.execute(f"DELETE FROM {name}")
            if rows:
                sch = self.schemas[name]
                cols = list(zip(*rows, strict=True))
                arrays = [
                    pa.array(list(col), type=f.type) for col, f in zip(cols, sch, strict=True)
                ]
                self.duck.register("_load", pa.Table.from_arrays(arrays, schema=sch))
                self.duck.execute(f"INSERT INTO {name} SELECT * FROM _load")
                self.duck.unregister("_load")

    def duck_rows(self, sql: str) -> list[tuple[Any, ...]]:
        """DuckDB's answer to ``sql`` on the current tables."""
        return [tuple(r) for r in self.duck.execute(sql).fetchall()]

    # -- checking -----------------------------------------------------------------------
    def check(self) -> None:
        """Compares every view with DuckDB now; raises ``OracleMismatch`` with details."""
        problems = []
        for v in self.views:
            problems.extend(self._check_view(v))
        if problems:
            raise OracleMismatch("\n".join(problems))

    def _check_view(self, v: _View, changes: bool = True) -> list[str]:
        where = f"after commit {self.commits - 1}" if self.commits else "before any commit"
        head = f"view {v.sql!r} {where}"
        try:
            got = [tuple(r) for r in v.view.rows()]
        except Exception as e:
            return [f"{head}: rows() raised {type(e).__name__}: {e}"]
        want = self.duck_rows(v.duck)
        out = []
        extra, missing = same_rows(got, want, v.ordered)
        if extra or missing:
            out.append(_describe(head, v, got, want, extra, missing, self.tables))
        if self.check_changes and changes:
            try:
                ch = v.view.changes()
            except Exception as e:
                out.append(f"{head}: changes() raised {type(e).__name__}: {e}")
                ch = None
            if ch is not None and not out:
                out.extend(self._check_changes(head, v, ch, got))
        v.last = got
        return out

    def _check_changes(
        self, head: str, v: _View, ch: list[tuple[Any, ...]], got: list[tuple[Any, ...]]
    ) -> list[str]:
        delta: Counter[Any] = Counter()
        bad_time = [c for c in ch if c[-2] != self.commits - 1]
        for c in ch:
            delta[_key(c[:-2])] += c[-1]
        expect: Counter[Any] = Counter()
        for r in got:
            expect[_key(r)] += 1
        for r in v.last:
            expect[_key(r)] -= 1
        expect = Counter({k: n for k, n in expect.items() if n})
        delta = Counter({k: n for k, n in delta.items() if n})
        out = []
        if delta != expect:
            out.append(
                f"{head}: changes() {ch} do not match the change of rows() from {v.last} to {got}"
            )
        if bad_time:
            out.append(
                f"{head}: changes() carry times {sorted({c[-2] for c in bad_time})}, "
                f"expected commit {self.commits - 1}"
            )
        return out


def _describe(
    head: str,
    v: _View,
    got: list[Any],
    want: list[Any],
    extra: list[Any],
    missing: list[Any],
    tables: dict[str, list[Any]],
) -> str:
    lines = [f"{head}: ddflow differs from DuckDB"]
    if v.duck != v.sql:
        lines.append(f"  duckdb query: {v.duck}")
    lines.append(f"  rows ddflow has but DuckDB not: {_short(extra)}")
    lines.append(f"  rows DuckDB has but ddflow not: {_short(missing)}")
    lines.append(f"  ddflow ({len(got)} rows): {_short(got)}")
    lines.append(f"  duckdb ({len(want)} rows): {_short(want)}")
    for name, rows in tables.items():
        lines.append(f"  table {name} ({len(rows)} rows): {_short(rows)}")
    return "\n".join(lines)


def _short(rows: Sequence[Any], n: int = 12) -> str:
    s = ", ".join(repr(r) for r in rows[:n])
    return f"[{s}{', ...' if len(rows) > n else ''}]"


def check_stream(
    ddl: str | Iterable[str],
    views: Sequence[str | tuple[str, str | None, bool]],
    commits: Sequence[Sequence[Change]],
    dialect: str = "spark",
    create_after: int = 0,
) -> Oracle:
    """Runs ``commits`` through ddflow and DuckDB, comparing every view after every
    commit. A view is SQL text or ``(sql, duck_sql or None, ordered)``; views are created
    after the first ``create_after`` commits (and checked at once if that is not 0)."""
    o = Oracle(ddl, dialect)
    for c in commits[:create_after]:
        o.commit(c)
    for v in views:
        if isinstance(v, str):
            o.view(v)
        else:
            o.view(v[0], v[1], v[2])
    for c in commits[create_after:]:
        o.commit(c)
    return o


def churn(
    table: str, first: Sequence[tuple[Any, ...]], second: Sequence[tuple[Any, ...]]
) -> list[list[Change]]:
    """A change stream over one table that every view should survive: insert ``first``;
    update its first row into ``second[0]`` (delete + insert in one commit) and duplicate a
    row; delete some rows; empty the table; refill it with ``second``; add ``first`` back;
    delete one copy of each duplicated row."""
    first, second = [tuple(r) for r in first], [tuple(r) for r in second]
    commits: list[list[Change]] = [[Ins(table, first)]]
    live = list(first)
    c: list[Change] = [Del(table, [first[0]]), Ins(table, [second[0]])]
    live.remove(first[0])
    live.append(second[0])
    if len(first) > 1:
        c.append(Ins(table, [first[1]]))
        live.append(first[1])
    commits.append(c)
    gone = live[: max(1, len(live) // 3)]
    commits.append([Del(table, gone)])
    for r in gone:
        live.remove(r)
    commits.append([Del(table, list(live))])
    commits.append([Ins(table, second)])
    commits.append([Ins(table, first)])
    live = list(second) + list(first)
    seen: set[Any] = set()
    dups = []
    for r in live:
        k = _key(r)
        if k in seen:
            dups.append(r)
        seen.add(k)
    if dups:
        commits.append([Del(table, dups)])
    return commits


def random_changes(
    live: dict[str, list[tuple[Any, ...]]],
    new_rows: Callable[[str], list[tuple[Any, ...]]],
    most_deleted: int = 4,
) -> list[Change]:
    """One commit of random changes over the tables of ``live`` (each one's rows, kept up
    to date here): the rows ``new_rows(table)`` inserted and up to ``most_deleted - 1`` of
    its rows deleted."""
    changes: list[Change] = []
    for t, rows in live.items():
        ins = new_rows(t)
        dels = random.sample(rows, min(len(rows), random.randrange(0, most_deleted)))
        for r in dels:
            rows.remove(r)
        rows.extend(ins)
        if ins:
            changes.append(Ins(t, ins))
        if dels:
            changes.append(Del(t, dels))
    return changes


def case(
    sql: str,
    duck: str | None = None,
    ordered: bool = False,
    id: str | None = None,
    xfail: str | None = None,
) -> Any:
    """A ``pytest.param`` of one oracle view: ``(sql, duck, ordered)``; ``xfail`` marks a
    known bug (strict, so a fix makes the test fail until the marker goes)."""
    import pytest

    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    return pytest.param(sql, duck, ordered, id=id or sql[:80], marks=marks)


def explain_over(ddl: str | Iterable[str], sql: str) -> str:
    """``Database.explain(sql)`` on a fresh database with the tables ``ddl`` creates."""
    db = dsql.Database()
    for stmt in _statements(ddl):
        db.execute(stmt)
    return db.explain(sql)


def apply_commit(db: Any, live: list[tuple[Any, ...]], ins: list[Any], dels: list[Any]) -> None:
    """One commit of ``ins`` and ``dels`` on table ``t`` of ``db``, mirrored in ``live``."""
    db.insert("t", ins)
    db.delete("t", dels)
    db.commit()
    for r in dels:
        live.remove(r)
    live.extend(ins)


def check_sqlite_commits(
    ddl: str,
    table: str,
    queries: Sequence[str],
    commits: Iterable[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]],
    same: Callable[[list[tuple[Any, ...]], list[tuple[Any, ...]]], bool],
) -> None:
    """SQLite as the oracle: views of ``queries`` on a sqlite-dialect database and the same
    queries on sqlite3, both given ``commits`` of ``(inserts, deletes)`` to ``table`` (a
    delete removes one occurrence of its row); after every commit each view's rows must be
    ``same(got, want)`` as sqlite3's answer."""
    con = sqlite3.connect(":memory:")
    con.execute(ddl)
    db = dsql.Database(dialect="sqlite")
    db.execute(ddl)
    views = [db.view(q) for q in queries]
    cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
    one = f"SELECT rowid FROM {table} WHERE {' AND '.join(f'{c} IS ?' for c in cols)} LIMIT 1"
    for ins, dels in commits:
        con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(cols))})", ins)
        for r in dels:
            con.execute(f"DELETE FROM {table} WHERE rowid = ({one})", r)
        if ins:
            db.insert(table, ins)
        if dels:
            db.delete(table, dels)
        db.commit()
        for q, v in zip(queries, views, strict=True):
            got, want = v.rows(), con.execute(q).fetchall()
            assert same(got, want), (q, got, want)
