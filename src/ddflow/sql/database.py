"""``Database``: tables you change, SQL views kept exact, one commit at a time.

A database owns an in-process worker. Each table is an input collection of the dataflow
(plus its current rows, for DML and checks: ``ddflow.sql.store``); each view is a plan
lowered into operators that end in a sink. ``commit()`` is one time step: the changes made
since the last commit enter the dataflow together and every view is brought up to date.

Statements are atomic: one that raises changes no table and no view. A commit whose
dataflow raises (an integer overflow, a recursion that does not end) is undone: the
database rebuilds its dataflow from the tables as of the last commit, drops the changes
of the failed commit and re-raises. Views added once tables hold rows are built the same
way (a fresh dataflow fed the current rows), so every view starts from the tables as of
the last commit.
"""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlglot import exp

from ddflow.core.errors import DataError, DDError, OperatorError
from ddflow.core.updates import Updates, concat_updates, consolidate
from ddflow.dataflow.worker import Worker
from ddflow.engine.operator import Operator, Stream
from ddflow.sql.batch import LazyStrings, Phys, RowBatch, is_ones, ones
from ddflow.sql.errors import SQLError, UnsupportedSQL
from ddflow.sql.expr import Ctx, evaluate, predicate_mask
from ddflow.sql.ingest import to_batch
from ddflow.sql.lower import Env, Lowering
from ddflow.sql.optimize import prune
from ddflow.sql.plan import InputItem, Plan, SortKey, explain, input_items
from ddflow.sql.planner import (
    DIALECTS,
    Planned,
    Planner,
    Scope,
    parse_statements,
    sql_type,
)
from ddflow.sql.rawfilter import (
    classes_over_joins,
    classify,
    implied_classes,
    keep,
    split,
    string_classes,
)
from ddflow.sql.rewrite import fuse_counts, rewrite
from ddflow.sql.rows import Field, Frame, mask_words, pack
from ddflow.sql.store import TableStore, distinct_rows
from ddflow.sql.strings import StringDict
from ddflow.sql.types import SqlType, decode_values

#: a sqlglot syntax node (sqlglot's own annotations are looser than its classes)
Node = Any

__all__ = ["Database", "View"]


class _Sink(Operator):
    """Collects a view's output updates until the database reads them."""

    name = "view"

    def __init__(self, worker: Worker, stream: Stream) -> None:
        super().__init__(worker, [stream], "view")
        self.parts: list[Updates] = []

    def run(self, frontier: Any) -> None:
        self.parts.extend(self.take())

    def drain(self) -> Updates | None:
        parts, self.parts = self.parts, []
        if not parts:
            return None
        u = concat_updates(parts)
        return u if len(u) else None


class _Table:
    def __init__(self, name: str, fields: tuple[Field, ...], strings: StringDict) -> None:
        self.name = name
        self.fields = fields
        self.strings = strings
        self.width = len(fields) + mask_words(fields)
        self.store = TableStore(strings, frozen=True)
        self.pending: list[tuple[RowBatch, np.ndarray]] = []  # (rows, diffs)
        #: declared PRIMARY KEY / UNIQUE column sets (informational: not enforced; the
        #: planner orders joins by them, so a wrong declaration costs speed, not answers)
        self.keys: list[frozenset[int]] = []

    def records(
        self,
        b: RowBatch,
        idxs: Sequence[InputItem] | None = None,
        rows: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        """Dataflow records of the columns ``idxs`` (all by default) of ``b``, of the rows
        the boolean mask ``rows`` marks (all by default)."""
        return b.record(
            self.fields, range(len(self.fields)) if idxs is None else idxs, self.strings, rows
        )

    def from_records(self, cols: Sequence[np.ndarray], n: int) -> RowBatch:
        """A ``RowBatch`` of full records (all columns and their masks)."""
        fr = Frame(cols, len(self.fields), n)
        vals: list[Any] = []
        for i, f in enumerate(self.fields):
            v = np.asarray(cols[i])
            nl = fr.null(i)
            if f.type.kind == "string":
                raw: list[Any] = self.strings.decode_list(v)
                if nl is not None:
                    for j in np.flatnonzero(nl).tolist():
                        raw[j] = None
                lz = LazyStrings(raw)
                lz.codes = v
                vals.append(lz)
            else:
                vals.append(Phys(v, nl))
        return RowBatch(vals, n)

    def distinct(self, b: RowBatch, k: np.ndarray) -> tuple[RowBatch, np.ndarray]:
        """The distinct rows of ``b`` with the sums of ``k`` over their copies (zero sums
        left out), the rows kept in the form they came in (``distinct_rows``; full records
        consolidated when its pairing would cost too much)."""
        got = distinct_rows(b, k, self.strings)
        if got is not None:
            return got
        cols, sums = self.consolidated([(b, k)])
        return self.from_records(cols, len(sums)), sums

    def consolidated(
        self, parts: Sequence[tuple[RowBatch, np.ndarray]]
    ) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """Full records of ``parts`` with equal rows added up (zero counts dropped)."""
        from ddflow.core.diff import INT_DIFF

        ups = [
            Updates(
                self.records(b),
                np.zeros((b.n, 1), np.int64),
                np.array(k) if is_ones(k) else np.asarray(k),
                INT_DIFF,
            )
            for b, k in parts
            if b.n
        ]
        if not ups:
            e = _empty_updates(self.width)
            return e.data, np.zeros(0, np.int64)
        u = consolidate(concat_updates(ups))
        return u.data, np.asarray(u.diffs)


class View:
    """A SQL view kept up to date by its database.

    ``rows()`` is the view's contents as of the last commit (ORDER BY respected);
    ``changes()`` the rows that changed since the last call, each with the commit (``time``)
    and the change in multiplicity (``diff``); ``to_arrow()`` the contents as an Arrow table.
    """

    def __init__(self, db: Database, name: str, sql: str, planned: Planned) -> None:
        self.db = db
        self.name = name
        self.sql = sql
        self.planned = planned
        self.plan: Plan = optimized(planned.plan)
        self.fields = planned.plan.fields
        self.visible = planned.visible
        self.order: tuple[SortKey, ...] = planned.order
        #: the view's changes since its contents were last consolidated (at any times)
        self._contents: list[Updates] = []
        #: the changes since ``changes()`` was last called, each with its commit's number
        #: (None: a block whose rows carry their commits' numbers as times already)
        self._log: list[tuple[Updates, int | None]] = []
        self._sink: _Sink | None = None

    @property
    def columns(self) -> list[str]:
        """The view's column names."""
        return [f.name for f in self.fields[: self.visible]]

    @property
    def types(self) -> list[SqlType]:
        return [f.type for f in self.fields[: self.visible]]

    def __repr__(self) -> str:
        return f"View({self.name!r}, columns={self.columns})"

    # -- state ------------------------------------------------------------------------------
    def _accept(self, u: Updates | None, time: int | None) -> None:
        # (kept as the dataflow gave them: their times are rewritten once per block of
        # commits, when the parts are joined, rather than twice per commit)
        if u is None or not len(u):
            return
        self._contents.append(u)
        if len(self._contents) > 16:
            self._contents = [self._consolidated()]
        if time is not None:
            self._log.append((u, time))
            if len(self._log) > 64:
                # (held as one block until read: the changes themselves must stay)
                self._log = [(self._logged(), None)]

    def _consolidated(self) -> Updates:
        """The view's contents: its changes so far added up (all at time 0)."""
        if not self._contents:
            return _empty_updates(len(self.fields) + mask_words(self.fields))
        u = concat_updates(self._contents)
        u = consolidate(u.with_times(np.zeros((len(u), 1), np.int64)))
        self._contents = [u] if len(u) else []
        return u

    def _logged(self) -> Updates:
        """The logged changes as one batch, each at its commit's number."""
        log = self._log
        if len(log) == 1 and log[0][1] is None:
            return log[0][0]
        lens = [len(u) for u, _ in log]
        times = np.repeat(np.array([t or 0 for _, t in log], np.int64), lens).reshape(-1, 1)
        at = 0
        for (u, t), k in zip(log, lens, strict=True):
            if t is None:  # (a block joined before: its rows keep their times)
                times[at : at + k] = u.times
            at += k
        return concat_updates([u for u, _ in log]).with_times(times)

    def _decode(self, data: tuple[np.ndarray, ...], n: int) -> list[list[Any]]:
        width = len(self.fields)
        fr = Frame(data, width, n)
        out = []
        sqlite = self.db.dialect == "sqlite"
        for i, f in enumerate(self.fields):
            vals = decode_values(np.asarray(data[i]), fr.null(i), f.type, self.db.strings)
            if sqlite and f.type.kind == "boolean":
                vals = [None if v is None else int(v) for v in vals]  # SQLite's 0 / 1
            out.append(vals)
        return out

    # -- reading ----------------------------------------------------------------------------
    def rows(self) -> list[tuple[Any, ...]]:
        """The view's rows as of the last commit: Python values, ``None`` for NULL."""
        u = self._consolidated()
        n = len(u)
        if n == 0:
            return []
        diffs = np.asarray(u.diffs)
        if (diffs < 0).any():
            raise DDError(f"view {self.name} holds a negative multiplicity (internal error)")
        cols = self._decode(u.data, n)
        recs = list(zip(*cols, strict=True))
        counts = diffs.tolist()
        if any(c != 1 for c in counts):
            recs = [r for r, c in zip(recs, counts, strict=True) for _ in range(c)]
        if self.order:
            recs = _sort_rows(recs, self.order)
        v = self.visible
        if v != len(self.fields):
            recs = [r[:v] for r in recs]
        return recs

    def changes(self) -> list[tuple[Any, ...]]:
        """Rows that changed since the last call: ``(values..., time, diff)``, ordered by
        time; ``time`` is the commit's number, ``diff`` the change in multiplicity."""
        if not self._log:
            return []
        log = self._logged()
        self._log = []
        u = consolidate(log)
        n = len(u)
        if n == 0:
            return []
        cols = self._decode(u.data, n)
        times = u.times[:, 0].tolist()
        diffs = np.asarray(u.diffs).tolist()
        v = self.visible
        recs = [
            (*r[:v], t, d) for r, t, d in zip(zip(*cols, strict=True), times, diffs, strict=True)
        ]
        recs.sort(key=lambda r: r[-2])
        return recs

    def to_arrow(self) -> Any:
        """The view's rows as a ``pyarrow.Table`` with the view's column names and types."""
        import pyarrow as pa

        rows = self.rows()
        arrays = []
        sqlite = self.db.dialect == "sqlite"
        for i, f in enumerate(self.fields[: self.visible]):
            # (SQLite has no booleans: its truth values are the integers 0 and 1, as rows())
            t = pa.int64() if sqlite and f.type.kind == "boolean" else arrow_type(f.type)
            arrays.append(pa.array([r[i] for r in rows], type=t))
        return pa.Table.from_arrays(arrays, names=_unique_names(self.columns))


def optimized(plan: Plan) -> Plan:
    """The plan as it runs: unused columns pruned, outer joins made inner where a filter
    allows, aggregates restricted to the groups asked about, string conditions moved into
    the scans."""
    return classes_over_joins(
        implied_classes(classify(prune(split(prune(rewrite(prune(fuse_counts(plan))))))))
    )


def _unique_names(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        if n in seen:
            seen[n] += 1
            out.append(f"{n}_{seen[n]}")
        else:
            seen[n] = 0
            out.append(n)
    return out


def arrow_type(t: SqlType) -> Any:
    """The Arrow type of a SQL type."""
    import pyarrow as pa

    k = t.kind
    if k == "boolean":
        return pa.bool_()
    if k == "int":
        return {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[t.bits]
    if k == "decimal":
        return pa.decimal128(t.precision, t.scale)
    if k == "double":
        return pa.float32() if t.bits == 32 else pa.float64()
    if k == "string":
        return pa.string()
    if k == "date":
        return pa.date32()
    if k == "timestamp":
        return pa.timestamp("us")
    return pa.null()


def sql_type_of_arrow(at: Any, name: str) -> SqlType:
    """The SQL type of an Arrow type (``UnsupportedSQL`` for nested types)."""
    import pyarrow as pa

    from ddflow.sql import types as T

    if pa.types.is_boolean(at):
        return T.BOOLEAN
    if pa.types.is_int8(at):
        return T.TINYINT
    if pa.types.is_int16(at):
        return T.SMALLINT
    if pa.types.is_int32(at) or pa.types.is_uint8(at) or pa.types.is_uint16(at):
        return T.INT
    if pa.types.is_int64(at) or pa.types.is_uint32(at):
        return T.BIGINT
    if pa.types.is_uint64(at):
        return T.decimal_type(20, 0)
    if pa.types.is_float32(at):
        return T.FLOAT
    if pa.types.is_floating(at):
        return T.DOUBLE
    if pa.types.is_decimal(at):
        return T.decimal_type(at.precision, at.scale)
    if pa.types.is_string(at) or pa.types.is_large_string(at) or _is_view(at):
        return T.STRING
    if pa.types.is_date(at):
        return T.DATE
    if pa.types.is_timestamp(at):
        return T.TIMESTAMP
    if pa.types.is_dictionary(at):
        return sql_type_of_arrow(at.value_type, name)
    raise UnsupportedSQL(
        f"column '{name}' has Arrow type {at}, which is not supported "
        "(nested and binary types are not)"
    )


def _is_view(at: Any) -> bool:
    import pyarrow as pa

    fn = getattr(pa.types, "is_string_view", None)
    return bool(fn is not None and fn(at))


def _empty_updates(width: int) -> Updates:
    from ddflow.core.diff import INT_DIFF

    return Updates(
        tuple(np.zeros(0, np.int64) for _ in range(width)),
        np.zeros((0, 1), np.int64),
        np.zeros(0, np.int64),
        INT_DIFF,
    )


def _cmp_values(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


def _sort_rows(recs: list[tuple[Any, ...]], keys: tuple[SortKey, ...]) -> list[tuple[Any, ...]]:
    def cmp(x: tuple[Any, ...], y: tuple[Any, ...]) -> int:
        for k in keys:
            a, b = x[k.index], y[k.index]
            if a is None or b is None:
                if a is None and b is None:
                    continue
                first = -1 if k.nulls_first else 1
                return first if a is None else -first
            c = _cmp_values(a, b)
            if c:
                return -c if k.desc else c
        return 0

    return sorted(recs, key=functools.cmp_to_key(cmp))


class Database:
    """Tables and SQL views over them, kept exact incrementally.

    ``dialect`` decides how SQL is parsed and the semantics that differ between systems:
    ``"spark"`` (the default: Spark SQL) or ``"sqlite"``.
    """

    def __init__(self, dialect: str = "spark") -> None:
        if dialect not in DIALECTS:
            raise SQLError(f"unknown dialect {dialect!r}: use 'spark' or 'sqlite'")
        self.dialect = dialect
        self.strings = StringDict()
        self.ctx = Ctx(self.strings, dialect)
        self._tables: dict[str, _Table] = {}
        self._views: dict[str, View] = {}
        self._anon = itertools.count(1)
        self.time = 0  # commits done
        self._worker: Worker | None = None
        self._sessions: dict[Any, Any] = {}
        self._probes: list[Any] = []
        self._wtime = 0
        self._stale = True
        self._input_cols: dict[tuple[str, Any], tuple[InputItem, ...]] = {}
        self._inputs: list[tuple[tuple[str, Any], tuple[InputItem, ...], Any]] = []

    # -- catalog ----------------------------------------------------------------------------
    @property
    def tables(self) -> dict[str, list[str]]:
        """Table name -> column names."""
        return {n: [f.name for f in t.fields] for n, t in self._tables.items()}

    @property
    def views(self) -> dict[str, View]:
        return dict(self._views)

    def _catalog(self) -> dict[str, tuple[Field, ...]]:
        return {n: t.fields for n, t in self._tables.items()}

    def _planner(self) -> Planner:
        views = {n: _visible_plan(v.planned) for n, v in self._views.items()}
        keys = {n: t.keys for n, t in self._tables.items() if t.keys}
        return Planner(self._catalog(), self.dialect, views, keys)

    def create_table(self, name: str, schema: Any) -> None:
        """A new empty table from a ``pyarrow.Schema`` (or a list of ``(name, SQL type)``)."""
        fields: list[Field] = []
        if hasattr(schema, "names") and hasattr(schema, "types"):
            for f in schema:
                fields.append(
                    Field(f.name.lower(), sql_type_of_arrow(f.type, f.name), bool(f.nullable))
                )
        else:
            import sqlglot

            for col, typ in schema:
                dt = sqlglot.exp.DataType.build(typ, dialect=DIALECTS[self.dialect])
                fields.append(Field(col.lower(), sql_type(dt, self.dialect), True))
        self._add_table(name, tuple(fields))

    def _add_table(
        self,
        name: str,
        fields: tuple[Field, ...],
        if_not_exists: bool = False,
        keys: Sequence[Sequence[str]] = (),
    ) -> None:
        key = name.lower()
        if key in self._tables or key in self._views:
            if if_not_exists and key in self._tables:
                return
            raise SQLError(f"a table or view named '{name}' already exists")
        if not fields:
            raise SQLError(f"table '{name}' needs at least one column")
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise SQLError(f"table '{name}' has duplicate column names")
        table = _Table(key, fields, self.strings)
        for cols in keys:
            idx = []
            for c in cols:
                if c.lower() not in names:
                    raise SQLError(f"key column '{c}' is not a column of table '{name}'")
                idx.append(names.index(c.lower()))
            table.keys.append(frozenset(idx))
        self._tables[key] = table
        self._stale = True

    def _table(self, name: str) -> _Table:
        t = self._tables.get(name.lower())
        if t is None:
            raise SQLError(f"unknown table '{name}'")
        return t

    # -- views ------------------------------------------------------------------------------
    def view(self, sql: str, name: str | None = None) -> View:
        """A view of ``sql`` (a query), kept up to date at every commit."""
        stmts = parse_statements(sql, self.dialect)
        if len(stmts) != 1:
            raise SQLError("view() takes exactly one query")
        return self._create_view(stmts[0], name, sql)

    def _create_view(self, tree: Node, name: str | None, sql: str, replace: bool = False) -> View:
        if not isinstance(tree, exp.Query):
            raise UnsupportedSQL(f"a view must be a query, not {type(tree).__name__.upper()}")
        planned = self._planner().plan_sql(tree)
        key = (name or f"_view{next(self._anon)}").lower()
        if key in self._tables:
            raise SQLError(f"a table named '{name}' already exists")
        if key in self._views and not replace:
            raise SQLError(f"a view named '{name}' already exists")
        v = View(self, key, sql, planned)
        old = self._views.get(key)
        self._views[key] = v
        try:
            self._rebuild()
        except BaseException as e:
            if old is None:
                del self._views[key]
            else:
                self._views[key] = old
            self._rebuild()
            if isinstance(e, OperatorError) and isinstance(e.__cause__, DDError):
                raise e.__cause__ from None  # the data error itself, as a commit gives it
            raise
        return v

    def drop_view(self, name: str, if_exists: bool = False) -> None:
        key = name.lower()
        if key not in self._views:
            if if_exists:
                return
            raise SQLError(f"unknown view '{name}'")
        del self._views[key]
        self._stale = True

    def explain(self, sql: str) -> str:
        """The dataflow plan of a query, one node per line."""
        stmts = parse_statements(sql, self.dialect)
        tree = stmts[0]
        if isinstance(tree, exp.Create) and isinstance(tree.expression, exp.Query):
            tree = tree.expression
        planned = self._planner().plan_sql(tree)
        text = explain(optimized(planned.plan))  # the plan as it runs
        if planned.order:
            text += "\nOrder rows by " + ", ".join(
                f"{planned.plan.fields[k.index].name}{' DESC' if k.desc else ''}"
                for k in planned.order
            )
        return text

    # -- the dataflow -----------------------------------------------------------------------
    def _rebuild(self) -> None:
        """A fresh dataflow for all views, fed the tables as of the last commit."""
        w = Worker()
        sessions = {}
        colls = {}
        self._input_cols = input_items([v.plan for v in self._views.values()])
        for key, cols in self._input_cols.items():
            s, c = w.new_collection()
            sessions[key] = s
            colls[key] = (c, cols, self._tables[key[0]].fields)
        lowering = Lowering(w, colls, self.ctx)
        env = Env(w.root)
        probes = []
        for v in self._views.values():
            coll = lowering.lower(v.plan, env)
            v._sink = _Sink(w, coll.stream)
            probes.append(coll.probe())
        lowering.feed_constants()
        for key, pick in self._input_cols.items():
            t = self._tables[key[0]]
            for b, counts in t.store.live_chunks():
                _feed(sessions[key], t, b, counts, pick, key[1])
        for s in sessions.values():
            s.advance_to(1)
        w.step_while(lambda: any(p.less_than(1) for p in probes))
        for v in self._views.values():
            assert v._sink is not None
            v._contents = []
            v._accept(v._sink.drain(), None)
        self._worker, self._sessions, self._probes = w, sessions, probes
        # each input with its session, looked up once here: a key holds a prefilter, an
        # expression tree whose hash is recomputed on every lookup
        self._inputs = [(key, pick, sessions[key]) for key, pick in self._input_cols.items()]
        self._wtime = 1
        self._stale = False

    def commit(self) -> int:
        """Applies the changes since the last commit to every view; returns the commit's
        number (its ``time`` in ``changes()``)."""
        if self._stale or self._worker is None:
            self._rebuild()
        assert self._worker is not None
        t_next = self._wtime + 1
        try:
            for key, pick, session in self._inputs:
                t = self._tables[key[0]]
                for b, d in t.pending:
                    _feed(session, t, b, d, pick, key[1])
            for s in self._sessions.values():
                s.advance_to(t_next)
            probes = self._probes
            self._worker.step_while(lambda: any(p.less_than(t_next) for p in probes))
            drained = {
                name: v._sink.drain() for name, v in self._views.items() if v._sink is not None
            }
        except BaseException:
            for t in self._tables.values():
                t.pending = []
            self._worker = None
            self._stale = True
            self._rebuild()
            cause = sys.exc_info()[1]
            if isinstance(cause, OperatorError) and isinstance(cause.__cause__, DDError):
                raise cause.__cause__ from None  # the data error itself (it says where)
            raise
        # the commit took: apply it to the tables' rows and the views
        for t in self._tables.values():
            # (every pending part with a negative count holds distinct rows, deletes only:
            # ``delete`` and the DELETE / UPDATE statements make them so)
            removals = []
            for b, d in t.pending:
                if is_ones(d):  # (inserted rows)
                    t.store.append(b, d)
                    continue
                pos = d > 0
                if pos.all():
                    t.store.append(b, d)
                elif not pos.any():
                    removals.append((b, -d))
                else:
                    idx = np.flatnonzero(pos)
                    t.store.append(b.take(idx), d[idx])
                    idx = np.flatnonzero(~pos)
                    removals.append(t.distinct(b.take(idx), -d[idx]))
            for q, k in removals:
                t.store.remove(q, k)
        for t in self._tables.values():
            t.pending = []
        commit_no = self.time
        for name, v in self._views.items():
            v._accept(drained.get(name), commit_no)
        self._wtime = t_next
        self.time += 1
        return commit_no

    # -- changes ----------------------------------------------------------------------------
    def insert(self, table: str, rows: Any) -> int:
        """Adds ``rows`` (tuples in column order with ``None`` for NULL, a pyarrow
        Table/RecordBatch or a pandas DataFrame) to ``table``; returns how many."""
        t = self._table(table)
        b = to_batch(rows, t.fields, self.strings, t.name)
        if b.n:
            t.pending.append((b, ones(b.n)))  # (read-only, shared: no array made)
        return b.n

    def delete(self, table: str, rows: Any) -> int:
        """Removes one occurrence of each given row from ``table`` (``DataError``, and
        nothing removed, if a row is not there); returns how many."""
        t = self._table(table)
        b = to_batch(rows, t.fields, self.strings, t.name)
        if b.n == 0:
            return 0
        q, want = t.distinct(b, np.ones(b.n, np.int64))
        self._check_present(t, q, want)
        t.pending.append((q, -want))
        return b.n

    def _check_present(self, t: _Table, q: RowBatch, want: np.ndarray) -> None:
        """``DataError`` unless the table (with its pending changes) holds ``want[i]``
        copies of each distinct row ``q[i]``."""
        have = t.store.count_of(q)
        if t.pending:
            pend = TableStore(self.strings)
            for pb, pd in t.pending:
                pend.append(pb, pd)
            have = have + pend.count_of(q)
        short = np.flatnonzero(have < want)
        if len(short):
            i = int(short[0])
            row = tuple(_value_at(q, j, i, f.type, self.strings) for j, f in enumerate(t.fields))
            raise DataError(
                f"cannot delete {row!r} from table '{t.name}': the table holds "
                f"{int(have[i])} such row(s), {int(want[i])} to delete; "
                "nothing was deleted"
            )

    def _current(self, t: _Table) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """The table's rows now (last commit plus pending changes), consolidated."""
        return t.consolidated(list(t.store.live_chunks()) + list(t.pending))

    # -- SQL statements ---------------------------------------------------------------------
    def execute(self, sql: str) -> Any:
        """Runs SQL statements: CREATE TABLE / VIEW, DROP, INSERT, DELETE, UPDATE, or a
        query (its rows now, computed once). Returns the last statement's result: a
        ``View``, a row count, or rows."""
        result: Any = None
        for tree in parse_statements(sql, self.dialect):
            result = self._statement(tree, tree.sql(dialect=DIALECTS[self.dialect]))
        return result

    def _statement(self, tree: Node, sql: str) -> Any:
        if isinstance(tree, exp.Create):
            kind = (tree.args.get("kind") or "").upper()
            if kind == "VIEW":
                name = tree.this.name
                body = tree.expression
                return self._create_view(
                    body, name, body.sql(), replace=bool(tree.args.get("replace"))
                )
            if kind == "TABLE":
                return self._create_table_stmt(tree)
            raise UnsupportedSQL(f"CREATE {kind}")
        if isinstance(tree, exp.Drop):
            kind = (tree.args.get("kind") or "").upper()
            target = tree.this if tree.this is not None else (tree.args.get("tables") or [None])[0]
            if target is None:
                raise SQLError("DROP needs a name")
            name = target.name
            if kind == "VIEW":
                self.drop_view(name, bool(tree.args.get("exists")))
                return None
            if kind == "TABLE":
                return self._drop_table(name, bool(tree.args.get("exists")))
            raise UnsupportedSQL(f"DROP {kind}")
        if isinstance(tree, exp.Insert):
            return self._insert_stmt(tree)
        if isinstance(tree, exp.Delete):
            return self._delete_stmt(tree)
        if isinstance(tree, exp.Update):
            return self._update_stmt(tree)
        if isinstance(tree, exp.Query):
            return self.query(tree)
        if isinstance(tree, exp.Commit):
            return self.commit()
        raise UnsupportedSQL(f"statement {type(tree).__name__.upper()}")

    def _create_table_stmt(self, tree: Node) -> None:
        schema = tree.this
        if isinstance(tree.expression, exp.Query):
            raise UnsupportedSQL(
                "CREATE TABLE ... AS SELECT (create the table, then INSERT ... SELECT)"
            )
        if not isinstance(schema, exp.Schema):
            raise SQLError("CREATE TABLE needs column definitions")
        name = schema.this.name
        fields = []
        keys: list[list[str]] = []  # PRIMARY KEY / UNIQUE: informational, not enforced
        for col in schema.expressions:
            if not isinstance(col, exp.ColumnDef):
                for k in [col, *(col.expressions if isinstance(col, exp.Constraint) else [])]:
                    if isinstance(k, (exp.PrimaryKey, exp.UniqueColumnConstraint)):
                        names = (
                            [c.name for c in k.expressions]
                            if isinstance(k, exp.PrimaryKey)
                            else [c.name for c in k.this.expressions]
                            if isinstance(k.this, exp.Schema)
                            else []
                        )
                        if names:
                            keys.append(names)
                continue
            if any(
                isinstance(c.kind, (exp.PrimaryKeyColumnConstraint, exp.UniqueColumnConstraint))
                for c in col.args.get("constraints") or []
            ):
                keys.append([col.name])
            kind = col.args.get("kind")
            if kind is None:
                if self.dialect == "sqlite":
                    t = sql_type(exp.DataType.build("DOUBLE"), self.dialect)
                else:
                    raise SQLError(f"column '{col.name}' needs a type")
            else:
                t = sql_type(kind, self.dialect)
            not_null = any(
                isinstance(c.kind, exp.NotNullColumnConstraint)
                and not c.kind.args.get("allow_null")
                for c in col.args.get("constraints") or []
            )
            fields.append(Field(col.name.lower(), t, not not_null))
        self._add_table(name, tuple(fields), bool(tree.args.get("exists")), keys)

    def _drop_table(self, name: str, if_exists: bool) -> None:
        key = name.lower()
        if key not in self._tables:
            if if_exists:
                return
            raise SQLError(f"unknown table '{name}'")
        users = [v.name for v in self._views.values() if _reads(v.plan, key)]
        if users:
            raise SQLError(f"table '{name}' is used by view(s) {', '.join(users)}; drop them first")
        del self._tables[key]
        self._stale = True

    def query(self, sql: str | Node) -> list[tuple[Any, ...]]:
        """The rows of a query over the tables now (including uncommitted changes),
        computed once."""
        tree = parse_statements(sql, self.dialect)[0] if isinstance(sql, str) else sql
        planned = self._planner().plan_sql(tree)
        v = View(self, "_query", "", planned)
        w = Worker()
        colls = {}
        sessions = {}
        pick = input_items([v.plan])
        for key, cols_ in pick.items():
            s, c = w.new_collection()
            sessions[key], colls[key] = s, (c, cols_, self._tables[key[0]].fields)
        lowering = Lowering(w, colls, self.ctx)
        coll = lowering.lower(v.plan, Env(w.root))
        sink = _Sink(w, coll.stream)
        lowering.feed_constants()
        for key, s in sessions.items():
            t = self._tables[key[0]]
            cols, counts = self._current(t)
            if len(counts):
                _feed(s, t, t.from_records(cols, len(counts)), counts, pick[key], key[1])
            s.close()
        try:
            w.run()
        except OperatorError as e:
            if isinstance(e.__cause__, DDError):
                raise e.__cause__ from None  # the data error itself (it says where)
            raise
        v._accept(sink.drain(), None)
        return v.rows()

    def _insert_stmt(self, tree: Node) -> int:
        target = tree.this
        cols_given = None
        if isinstance(target, exp.Schema):
            cols_given = [c.name.lower() for c in target.expressions]
            target = target.this
        t = self._table(target.name)
        src = tree.expression
        if isinstance(src, exp.Values):
            planner = self._planner()
            rows = []
            for tup in src.expressions:
                vals = []
                for e in tup.expressions:
                    lit = planner._const(e)
                    vals.append(lit)
                rows.append(vals)
            width = len(cols_given) if cols_given else len(t.fields)
            for r in rows:
                if len(r) != width:
                    raise DataError(
                        f"INSERT row has {len(r)} values for {width} columns of table '{t.name}'"
                    )
            py_rows = [self._literal_row(r, t, cols_given) for r in rows]
            return self.insert(t.name, py_rows)
        if isinstance(src, exp.Query):
            got = self.query(src)
            if got and len(got[0]) != (len(cols_given) if cols_given else len(t.fields)):
                raise DataError(
                    f"INSERT ... SELECT gives {len(got[0])} columns for table '{t.name}'"
                )
            if cols_given:
                got = [self._place(r, t, cols_given) for r in got]
            got = [
                tuple(_coerce_py(v, f.type) for v, f in zip(r, t.fields, strict=True)) for r in got
            ]
            return self.insert(t.name, got)
        raise UnsupportedSQL("INSERT needs VALUES or a query")

    def _place(self, vals: Sequence[Any], t: _Table, cols: list[str]) -> tuple[Any, ...]:
        names = [f.name for f in t.fields]
        for c in cols:
            if c not in names:
                raise SQLError(f"table '{t.name}' has no column '{c}'")
        out: list[Any] = [None] * len(names)
        for c, v in zip(cols, vals, strict=True):
            out[names.index(c)] = v
        return tuple(out)

    def _literal_row(self, lits: list[Any], t: _Table, cols: list[str] | None) -> tuple[Any, ...]:
        from ddflow.sql.planner import _NO, _convert_const

        fields = (
            t.fields
            if cols is None
            else [
                t.fields[[f.name for f in t.fields].index(c)]
                if c in [f.name for f in t.fields]
                else None
                for c in cols
            ]
        )
        vals: list[Any] = []
        for lit, f in zip(lits, fields, strict=True):
            if f is None:
                raise SQLError(f"table '{t.name}' has no such column")
            if lit.value is None:
                vals.append(None)
                continue
            if lit.type.kind == "string" and f.type.kind not in ("string", "date", "timestamp"):
                raise DataError(
                    f"value {lit.value!r} does not fit column '{f.name}' of type {f.type}"
                )
            conv = _convert_const(lit.value, f)
            if conv is _NO:
                raise DataError(
                    f"value {lit.value!r} does not fit column '{f.name}' of type {f.type}"
                )
            vals.append(conv)
        if cols is not None:
            return self._place(vals, t, cols)
        return tuple(vals)

    def _where_mask(
        self, t: _Table, where: Node | None, cols: tuple[np.ndarray, ...], n: int
    ) -> np.ndarray:
        if where is None:
            return np.ones(n, bool)
        planner = self._planner()
        tree = (
            exp.select("*")
            .from_(t.name)
            .where(where.this if isinstance(where, exp.Where) else where)
        )
        tree = planner.qualify(tree)
        scope = Scope(None)
        scope.sources = [(t.name, 0, t.fields)]
        from ddflow.sql.plan import Scan

        scope.plan = Scan(t.name, t.fields)
        cond = tree.args["where"].this
        if any(isinstance(x, (exp.Select, exp.Subquery, exp.Exists)) for x in cond.walk()):
            return self._where_by_query(t, tree, cols, n)
        pred = planner._cast_bool(planner.bind(cond, scope), "WHERE")
        return predicate_mask(pred, Frame(cols, len(t.fields), n), self.ctx)

    def _where_by_query(
        self, t: _Table, tree: Node, cols: tuple[np.ndarray, ...], n: int
    ) -> np.ndarray:
        """Rows of ``cols`` that a query with subqueries selects (evaluated once)."""
        matches = self.query(tree)
        # map the selected rows back onto the physical rows (one per distinct row is enough)
        mask = np.zeros(n, bool)
        if not matches:
            return mask
        sel = to_batch(matches, t.fields, self.strings, t.name)
        store = TableStore(self.strings)
        store.append(sel, np.ones(sel.n, np.int64))
        return store.count_of(t.from_records(cols, n)) > 0

    def _delete_stmt(self, tree: Node) -> int:
        t = self._table(tree.this.name)
        cols, counts = self._current(t)
        n = len(counts)
        if n == 0:
            return 0
        mask = self._where_mask(t, tree.args.get("where"), cols, n)
        idx = np.flatnonzero(mask)
        if not len(idx):
            return 0
        t.pending.append((t.from_records(tuple(c[idx] for c in cols), len(idx)), -counts[idx]))
        return int(counts[idx].sum())

    def _update_stmt(self, tree: Node) -> int:
        t = self._table(tree.this.name)
        cols, counts = self._current(t)
        n = len(counts)
        if n == 0:
            return 0
        mask = self._where_mask(t, tree.args.get("where"), cols, n)
        idx = np.flatnonzero(mask)
        if not len(idx):
            return 0
        sub = tuple(c[idx] for c in cols)
        planner = self._planner()
        scope = Scope(None)
        scope.sources = [(t.name, 0, t.fields)]
        from ddflow.sql.plan import Scan

        scope.plan = Scan(t.name, t.fields)
        names = [f.name for f in t.fields]
        fr = Frame(sub, len(t.fields), len(idx))
        vals = [fr.val(i) for i in range(len(names))]
        nulls = [fr.null(i) for i in range(len(names))]
        for a in tree.expressions:
            col = a.this.name.lower()
            if col not in names:
                raise SQLError(f"table '{t.name}' has no column '{col}'")
            j = names.index(col)
            q = planner.qualify(exp.select(a.expression).from_(t.name))
            e = planner.bind(
                q.expressions[0].this
                if isinstance(q.expressions[0], exp.Alias)
                else q.expressions[0],
                scope,
            )
            e = planner._cast(e, t.fields[j].type)
            v, nl = evaluate(e, fr, self.ctx)
            if nl is not None and nl.any() and not t.fields[j].nullable:
                raise DataError(f"column '{col}' of table '{t.name}' is NOT NULL")
            vals[j] = v.astype(np.int64) if v.dtype == bool else v
            nulls[j] = nl
        new = pack(vals, nulls, mask_words(t.fields), len(idx))
        k = counts[idx]
        t.pending.append((t.from_records(sub, len(idx)), -k))
        t.pending.append((t.from_records(new, len(idx)), k.copy()))
        return int(k.sum())

    def close(self) -> None:
        """Releases the dataflow (the database can be used again; it rebuilds)."""
        self._worker = None
        self._stale = True

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _value_at(b: RowBatch, j: int, i: int, t: SqlType, strings: StringDict) -> Any:
    """The Python value of column ``j`` of row ``i`` of ``b``."""
    c = b.cols[j]
    if isinstance(c, LazyStrings):
        return c.strings(np.array([i]))[0]
    nl = c.nulls()
    if nl is not None and nl[i]:
        return None
    return decode_values(np.asarray(c.values(strings))[i : i + 1], None, t, strings)[0]


def _visible_plan(planned: Planned) -> Plan:
    """A view's plan producing just its columns (for views defined over views)."""
    from ddflow.sql.expr import Col
    from ddflow.sql.plan import Project

    p = planned.plan
    if planned.visible == len(p.fields):
        return p
    fs = p.fields[: planned.visible]
    return Project(p, tuple(Col(i, f.type, f.nullable, f.name) for i, f in enumerate(fs)), fs)


def _feed(
    session: Any,
    t: _Table,
    b: RowBatch,
    diffs: np.ndarray,
    pick: tuple[InputItem, ...],
    prefilter: Any,
) -> None:
    """Feeds rows ``b`` (with ``diffs``) into an input of the dataflow: the rows its string
    prefilter keeps, the columns ``pick``."""
    if not b.n:
        return
    # inserted rows (every count 1): the session makes its own ones (``None``)
    inserted = is_ones(diffs)
    if prefilter is not None:
        mask = keep(prefilter, b, t.strings)
        kept = int(np.count_nonzero(mask))
        if kept < b.n:
            if not kept:
                return
            if 4 * kept >= b.n:
                # most rows kept: the kept rows of each column read at once (cheaper than
                # taking Arrow arrays, strings among them, and converting)
                recs = t.records(b, pick, rows=mask)
                session.insert_columns(recs, diffs=None if inserted else np.asarray(diffs)[mask])
                return
            # only the columns the input reads are taken (a table's other columns, long
            # comments among them, are left alone); a string read as its class is not taken
            # at all: its classes are found on the kept rows of the batch as it came
            idx = np.flatnonzero(mask)
            plain = [p for p in pick if isinstance(p, int)]
            got = b.take(idx, only=plain)
            if len(plain) < len(pick):
                pick = tuple(_class_column(got, b, p, mask, t.strings) for p in pick)
            b = got
            if not inserted:
                diffs = np.asarray(diffs)[idx]
    session.insert_columns(t.records(b, pick), diffs=None if inserted else diffs)


def _class_column(
    got: RowBatch, b: RowBatch, item: InputItem, mask: np.ndarray, strings: StringDict
) -> InputItem:
    """``item`` of a feed's pick for ``got``, the rows of ``b`` that ``mask`` marks: a
    column position as it is; a string's class among literals found on ``b``'s column for
    those rows and put in ``got`` at the column's place (which ``take`` left empty), so
    the class is then read as a plain column."""
    if isinstance(item, int):
        return item
    col, lits = item
    v, nl = string_classes(b.cols[col], lits, strings, mask)
    got.cols[col] = Phys(v, nl)
    return col


def _reads(plan: Plan, table: str) -> bool:
    from ddflow.sql.plan import Scan

    if isinstance(plan, Scan):
        return plan.table == table
    return any(_reads(p, table) for p in plan.inputs())


def _coerce_py(v: Any, t: SqlType) -> Any:
    """A value read from a query as a value for a column of type ``t``."""
    import decimal

    if v is None:
        return None
    if t.kind == "decimal" and isinstance(v, float):
        return decimal.Decimal(repr(v))
    if t.kind == "int" and isinstance(v, decimal.Decimal) and v == v.to_integral_value():
        return int(v)
    if t.kind == "double" and isinstance(v, (int, decimal.Decimal)) and not isinstance(v, bool):
        return float(v)
    return v
