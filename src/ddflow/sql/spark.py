"""SQL views on Spark: refreshed from the changes of their tables, on Spark's executors.

``maintain(spark, views={name: sql}, tables={name: source}, workers=N, checkpoint=dir)``
runs the views as one barrier job of ``N`` workers (``ddflow.spark``) and returns, per
view, Spark DataFrames of its contents and of its changes, with the view's column names
and the Spark SQL types Spark gives them.

A table's source is one of:

- a DataFrame of change rows: data columns, ``time`` (int) and ``diff`` (+1 insert, -1
  delete; more for several copies);
- a DataFrame in the shape of Delta's change data feed: ``_change_type`` (insert, delete,
  update_preimage, update_postimage) and ``_commit_version`` as the time;
- ``Snapshot(df)``: the table's whole contents now, diffed against the last snapshot seen
  under the same checkpoint;
- a path to a Delta table (read with the ``deltalake`` package, no Spark jars): its change
  data feed from the version after the one the checkpoint covers.

With ``checkpoint=`` the workers keep their state there between calls: a call with only
the new changes restores it, applies them (changes at times the checkpoint already covers
are skipped, so feeding the same changes twice changes nothing; change rows without a
``time`` column are new changes, at the time after every time seen) and returns the new
contents and the changes of this call. ``LiveViews`` keeps the state in the workers'
memory instead, in a job that stays up between refreshes. The driver keeps, beside the
workers' state, each view's contents, the strings the views' codes stand for and, for
snapshot tables, the last snapshot.

On the workers: every table's rows are read in the tasks (typed: NULLs, exact decimals,
dates, timestamps, strings) and string values get codes from their content, so workers in
different processes agree on them; strings made by expressions travel between workers with
the updates (``ddflow.engine.exchange``) and to the driver with each worker's result.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ddflow.core.errors import DataError, DDError
from ddflow.sql.errors import SQLError, UnsupportedSQL
from ddflow.sql.expr import Ctx
from ddflow.sql.lower import Env, Lowering
from ddflow.sql.optimize import prune
from ddflow.sql.plan import Plan, SortKey, input_items, item_field
from ddflow.sql.planner import Planner
from ddflow.sql.rawfilter import classes_over_joins, classify, implied_classes, keep, split
from ddflow.sql.rows import Field, mask_words
from ddflow.sql.strings import StringDict
from ddflow.sql.types import SqlType, decimal_type, decode_values

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "LiveViews",
    "Maintained",
    "Snapshot",
    "ViewResult",
    "maintain",
    "spark_type",
    "sql_type_of",
]


@dataclass(frozen=True)
class Snapshot:
    """A table given as its whole contents now (diffed against the previous snapshot)."""

    df: Any


# -- types -------------------------------------------------------------------------------------


def sql_type_of(dt: Any, column: str) -> SqlType:
    """Our SQL type of a Spark type (``UnsupportedSQL`` naming the column for maps, arrays,
    structs, binary and intervals)."""
    from ddflow.sql import types as T

    name = type(dt).__name__
    simple = {
        "BooleanType": T.BOOLEAN,
        "ByteType": T.TINYINT,
        "ShortType": T.SMALLINT,
        "IntegerType": T.INT,
        "LongType": T.BIGINT,
        "FloatType": T.FLOAT,
        "DoubleType": T.DOUBLE,
        "StringType": T.STRING,
        "VarcharType": T.STRING,
        "CharType": T.STRING,
        "DateType": T.DATE,
        "TimestampType": T.TIMESTAMP,
        "TimestampNTZType": T.TIMESTAMP,
        "NullType": T.NULLTYPE,
    }
    if name in simple:
        return simple[name]
    if name == "DecimalType":
        return decimal_type(dt.precision, dt.scale)
    raise UnsupportedSQL(
        f"column '{column}' has Spark type {dt.simpleString()}, which ddflow "
        "does not ingest (maps, arrays, structs, binary and intervals are not "
        "SQL table columns here)"
    )


def spark_type(t: SqlType) -> Any:
    """The Spark type of one of our SQL types."""
    from pyspark.sql import types as st

    k = t.kind
    if k == "boolean":
        return st.BooleanType()
    if k == "int":
        return {8: st.ByteType(), 16: st.ShortType(), 32: st.IntegerType(), 64: st.LongType()}[
            t.bits
        ]
    if k == "decimal":
        return st.DecimalType(t.precision, t.scale)
    if k == "double":
        return st.FloatType() if t.bits == 32 else st.DoubleType()
    if k == "string":
        return st.StringType()
    if k == "date":
        return st.DateType()
    if k == "timestamp":
        return st.TimestampType()
    return st.NullType()


# -- the job -------------------------------------------------------------------------------------


class SqlJob:
    """SQL views as a ``ddflow.spark`` job: the tasks' ingestion of table rows and the
    dataflow each worker builds. Picklable; each task holds its own copy (and its own
    content-coded string dictionary)."""

    def __init__(
        self,
        tables: dict[str, tuple[Field, ...]],
        plans: dict[str, Plan],
        dialect: str,
        known: dict[int, str] | None = None,
    ) -> None:
        self.tables = tables
        self.plans = plans
        self.dialect = dialect
        self.known = known or {}
        self.inputs = input_items(list(plans.values()))
        self.input_names = {key: f"{key[0]}#{i}" for i, key in enumerate(self.inputs)}
        self._strings: StringDict | None = None
        self._max_time: int | None = None
        self._seconds: dict[str, float] = {}
        self._sent = 0  # how many of the dictionary's strings went to the driver

    @property
    def strings(self) -> StringDict:
        if self._strings is None:
            s = StringDict(hashed=True)
            if self.known:
                s.learn(self.known)
            self._strings = s
        return self._strings

    def __getstate__(self) -> dict[str, Any]:
        st = dict(self.__dict__)
        st["_strings"] = None
        st["_max_time"] = None
        st["_seconds"] = {}
        st["_sent"] = 0
        return st

    def ingest(self, rows: Mapping[str, Any], kind: Any) -> dict[str, Any]:
        """Per dataflow input, a ``Changes`` log from the task's rows of each table (an
        Arrow table of the data columns, ``__time`` and ``__diff``)."""
        import time as _time

        from ddflow.runtimes.job import Changes
        from ddflow.sql.ingest import to_batch

        started = _time.perf_counter()
        logs: dict[str, Any] = {}
        for key, cols in self.inputs.items():
            table, pre = key
            fields = self.tables[table]
            t = rows.get(table)
            name = self.input_names[key]
            width = len(cols) + mask_words([item_field(fields, c) for c in cols])
            if t is None or t.num_rows == 0:
                logs[name] = Changes(
                    tuple(np.zeros(0, np.int64) for _ in range(width)),
                    np.zeros((0, 1), np.int64),
                    np.zeros(0, np.int64),
                )
                continue
            data = t.select([f.name for f in fields])
            b = to_batch(data, fields, self.strings, table)
            times = np.asarray(t.column("__time").to_numpy(), dtype=np.int64)
            if len(times):
                top = int(times.max())
                self._max_time = top if self._max_time is None else max(self._max_time, top)
            diffs = np.asarray(t.column("__diff").to_numpy(), dtype=np.int64)
            if pre is not None:
                m = keep(pre, b, self.strings)
                if not m.all():
                    idx = np.flatnonzero(m)
                    b, times, diffs = b.take(idx), times[idx], diffs[idx]
            rec = b.record(fields, cols, self.strings)
            logs[name] = Changes(tuple(rec), times.reshape(-1, 1), diffs)
        self._seconds["ingest"] = _time.perf_counter() - started
        return logs

    def __call__(self, colls: dict[str, Any]) -> dict[str, Any]:
        """The build: every view's output collection, over the inputs ``colls``."""
        import time as _time

        started = _time.perf_counter()
        worker = next(iter(colls.values())).worker
        strings = self.strings
        worker.string_dict = strings  # the exchanges carry new strings to the peers
        tables = {
            key: (colls[self.input_names[key]], cols, self.tables[key[0]])
            for key, cols in self.inputs.items()
        }
        lowering = Lowering(worker, tables, Ctx(strings, self.dialect))
        env = Env(worker.root)
        outs = {name: lowering.lower(plan, env) for name, plan in self.plans.items()}
        lowering.feed_constants()
        self._seconds["build"] = _time.perf_counter() - started
        return outs

    def extras(self) -> dict[str, Any]:
        """What a worker sends back beside its outputs: the strings it got since it last
        sent them and the latest time of its input rows."""
        new, self._sent = self.strings.entries_since(self._sent)
        return {
            "strings": new,
            "max_time": self._max_time,
            "seconds": dict(self._seconds),
        }


# -- results ---------------------------------------------------------------------------------------


class ViewResult:
    """One view after a refresh: ``contents`` and ``changes`` (the same columns plus
    ``time`` and ``diff``) as Spark DataFrames (each made when first read), and ``rows()``
    as Python tuples."""

    def __init__(
        self,
        name: str,
        columns: list[str],
        types: list[SqlType],
        order: tuple[SortKey, ...],
        rows: list[tuple[Any, ...]],
        spark: Any,
        contents: tuple[Any, Any],
        changes: tuple[Any, Any],
    ) -> None:
        self.name, self.columns, self.types, self.order = name, columns, types, order
        self._rows = rows
        self._spark = spark
        self._tables = {"contents": contents, "changes": changes}
        self._frames: dict[str, Any] = {}

    def _frame(self, which: str) -> Any:
        df = self._frames.get(which)
        if df is None:
            table, schema = self._tables[which]
            df = self._frames[which] = self._spark.createDataFrame(table, schema=schema)
        return df

    @property
    def contents(self) -> Any:
        """The view's rows as a Spark DataFrame."""
        return self._frame("contents")

    @property
    def changes(self) -> Any:
        """This refresh's changes of the view: its columns, ``time`` and ``diff``."""
        return self._frame("changes")

    def to_arrow(self) -> Any:
        """The contents as an Arrow table (the DataFrame's names and types)."""
        return self._tables["contents"][0]

    def changes_arrow(self) -> Any:
        """This refresh's changes as an Arrow table."""
        return self._tables["changes"][0]

    def rows(self) -> list[tuple[Any, ...]]:
        """The contents as Python tuples (ORDER BY respected)."""
        return list(self._rows)


class Maintained(dict):
    """``{view name: ViewResult}`` of one refresh, plus ``seconds``, ``timings`` (seconds
    spent reading the table sources, planning, in the Spark job and making the results)
    and ``job`` (the ``ddflow.spark`` job result with timings and worker statistics)."""

    seconds: float
    timings: dict[str, float]
    job: Any


def _spark_schema(columns: list[str], types: list[SqlType], extra: bool) -> Any:
    from pyspark.sql import types as st

    fields = [st.StructField(c, spark_type(t), True) for c, t in zip(columns, types, strict=True)]
    if extra:
        fields += [
            st.StructField("time", st.LongType(), False),
            st.StructField("diff", st.LongType(), False),
        ]
    return st.StructType(fields)


def _arrow_table(
    columns: list[str],
    types: list[SqlType],
    rows: list[tuple[Any, ...]],
    extra: list[tuple[int, int]] | None = None,
) -> Any:
    import pyarrow as pa

    from ddflow.sql.database import arrow_type

    arrays = [pa.array([r[i] for r in rows], type=arrow_type(t)) for i, t in enumerate(types)]
    names = list(columns)
    if extra is not None:
        arrays.append(pa.array([e[0] for e in extra], type=pa.int64()))
        arrays.append(pa.array([e[1] for e in extra], type=pa.int64()))
        names += ["time", "diff"]
    return pa.Table.from_arrays(arrays, names=_unique(names))


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        k = seen.get(n, 0)
        seen[n] = k + 1
        out.append(n if k == 0 else f"{n}_{k}")
    return out


def _decode(
    u: Any, fields: tuple[Field, ...], visible: int, strings: StringDict
) -> list[tuple[Any, ...]]:
    from ddflow.sql.rows import Frame

    n = len(u)
    fr = Frame(u.data, len(fields), n)
    cols = [
        decode_values(np.asarray(u.data[i]), fr.null(i), f.type, strings)
        for i, f in enumerate(fields[:visible])
    ]
    return list(zip(*cols, strict=True)) if cols else [() for _ in range(n)]


# -- inputs ------------------------------------------------------------------------------------

#: Columns of a change feed or change rows that are not table columns.
_META = ("time", "diff", "_change_type", "_commit_version", "_commit_timestamp")


def _is_cdf(df: Any) -> bool:
    cols = set(df.columns)
    return "_change_type" in cols and "_commit_version" in cols


def _change_rows(
    name: str, src: Any, spark: Any, state: dict[str, Any], ckdir: str | None, now: int
) -> tuple[Any, list[str]]:
    """A table source as a DataFrame of data columns, ``time`` and ``diff`` (and the data
    column names). ``now``: the time after every time seen, given to snapshots, Delta
    tables' changes and change rows without a ``time`` column."""
    from pyspark.sql import DataFrame as SparkDF
    from pyspark.sql import functions as F

    if isinstance(src, (str, os.PathLike)):
        src = _delta_changes(name, os.fspath(src), spark, state, now)
    if isinstance(src, Snapshot):
        return _snapshot_changes(name, src.df, spark, state, ckdir, now)
    if not isinstance(src, SparkDF):
        raise SQLError(
            f"table {name!r}: give a DataFrame, Snapshot(DataFrame) or a Delta "
            f"table path, not {type(src).__name__}"
        )
    if _is_cdf(src):
        data = [
            c
            for c in src.columns
            if c not in ("_change_type", "_commit_version", "_commit_timestamp")
        ]
        ct = F.col("_change_type")
        diff = F.when(ct.isin("insert", "update_postimage"), F.lit(1)).when(
            ct.isin("delete", "update_preimage"), F.lit(-1)
        )
        out = src.select(
            *[F.col(c) for c in data],
            F.col("_commit_version").cast("bigint").alias("time"),
            diff.cast("bigint").alias("diff"),
        )
        bad = out.filter(F.col("diff").isNull()).limit(1).collect()
        if bad:
            raise DataError(f"table {name!r}: unknown _change_type in its change feed")
        return out, data
    cols = src.columns
    data = [c for c in cols if c not in ("time", "diff")]
    out = src
    if "time" not in cols:
        out = out.withColumn("time", F.lit(now).cast("bigint"))
        state["time"] = max(int(state.get("time", -1)), now)
    if "diff" not in cols:
        out = out.withColumn("diff", F.lit(1).cast("bigint"))
    return out.select(*data, F.col("time").cast("bigint"), F.col("diff").cast("bigint")), data


def _arrow_changes(
    name: str, src: Any, spark: Any, state: dict[str, Any], ckdir: str | None, now: int
) -> tuple[Any, tuple[Field, ...]]:
    """A table source as an Arrow table of its data columns (lower case), ``time`` and
    ``diff``, read on the driver (``frame_arrow``: no Spark job for a DataFrame made from
    the driver's data), and the table's fields. Change rows and change data feeds are
    turned into times and diffs in Arrow; snapshots and Delta paths go through Spark."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ddflow.runtimes.spark import frame_arrow
    from ddflow.sql.database import sql_type_of_arrow

    if isinstance(src, pa.Table):
        t = src
        fields = tuple(
            Field(f.name.lower(), sql_type_of_arrow(f.type, f.name), True)
            for f in t.schema
            if f.name not in _META
        )
    else:
        from pyspark.sql import DataFrame as SparkDF

        if not isinstance(src, SparkDF):
            df, data = _change_rows(name, src, spark, state, ckdir, now)
        else:
            df = src
        schema = df.schema
        fields = tuple(
            Field(f.name.lower(), sql_type_of(f.dataType, f.name), True)
            for f in schema.fields
            if f.name not in _META
        )
        t = frame_arrow(df)
    cols = t.column_names
    data = [c for c in cols if c not in _META]
    n = t.num_rows
    if "_change_type" in cols and "_commit_version" in cols:
        ct = t.column("_change_type")
        plus = pc.is_in(ct, value_set=pa.array(["insert", "update_postimage"]))
        minus = pc.is_in(ct, value_set=pa.array(["delete", "update_preimage"]))
        if not pc.all(pc.or_(plus, minus)).as_py() and n:
            raise DataError(f"table {name!r}: unknown _change_type in its change feed")
        diff = pc.subtract(pc.cast(plus, pa.int64()), pc.cast(minus, pa.int64()))
        time = pc.cast(t.column("_commit_version"), pa.int64())
    else:
        for c in ("time", "diff"):
            if c in cols and not pa.types.is_integer(t.column(c).type):
                raise DataError(
                    f"table {name!r}: column {c!r} has type {t.column(c).type}; it must be "
                    "an integral type"
                )
        if "time" in cols:
            time = pc.cast(t.column("time"), pa.int64())
        else:
            time = pa.array(np.full(n, now, np.int64))
            state["time"] = max(int(state.get("time", -1)), now)
        diff = (
            pc.cast(t.column("diff"), pa.int64())
            if "diff" in cols
            else pa.array(np.ones(n, np.int64))
        )
    out = pa.Table.from_arrays(
        [t.column(c) for c in data] + [time, diff],
        names=[c.lower() for c in data] + ["time", "diff"],
    )
    return out, fields


def _delta_changes(name: str, path: str, spark: Any, state: dict[str, Any], now: int) -> Any:
    """A Delta table's change data feed after the version the state covers, as a Spark
    DataFrame (read with ``deltalake``) in the change feed's shape. Every change gets the
    time after the latest the views have seen (the tables' versions count apart, so a
    version of one table may be below the time another table's changes reached)."""
    import pyarrow as pa

    try:
        from deltalake import DeltaTable
    except ImportError as e:
        raise SQLError(
            "reading a Delta table needs the deltalake package: pip install 'ddflow[spark]'"
        ) from e
    dt = DeltaTable(path)
    last = state.setdefault("delta", {}).get(name)
    start = 0 if last is None else int(last) + 1
    latest = dt.version()
    if start > latest:
        schema = pa.schema(dt.schema().to_arrow())
        t = schema.empty_table()
        t = t.append_column("_change_type", pa.array([], pa.string()))
        t = t.append_column("_commit_version", pa.array([], pa.int64()))
    else:
        t = pa.table(dt.load_cdf(starting_version=start).read_all())
        if "_commit_timestamp" in t.column_names:
            t = t.drop(["_commit_timestamp"])
        t = t.set_column(
            t.column_names.index("_commit_version"),
            "_commit_version",
            pa.array(np.full(t.num_rows, now, np.int64)),
        )
    state["delta"][name] = latest
    t = _plain_strings(t)
    return spark.createDataFrame(t)


def _plain_strings(t: Any) -> Any:
    import pyarrow as pa

    cols = []
    for c in t.columns:
        ty = c.type
        view = getattr(pa.types, "is_string_view", lambda _: False)(ty)
        if view or pa.types.is_large_string(ty):
            c = c.cast(pa.string())
        elif pa.types.is_uint64(ty):
            c = c.cast(pa.int64())
        cols.append(c)
    return pa.Table.from_arrays(cols, names=t.column_names)


def _next_time(state: dict[str, Any]) -> int:
    """The time after every time the views have seen (0 at first)."""
    return max(int(state.get("time", -1)), int(state.get("fed", -1))) + 1


def _snapshot_changes(
    name: str, df: Any, spark: Any, state: dict[str, Any], ckdir: str | None, t: int
) -> tuple[Any, list[str]]:
    from pyspark.sql import functions as F

    from ddflow.runtimes.spark import changes_between

    snaps = state.setdefault("snapshots", {})
    prev = snaps.get(name)
    data = list(df.columns)
    # a live job without a checkpoint directory keeps the last snapshots in Spark's memory
    frames = state.get("frames") if ckdir is None else None
    if prev is not None and ckdir is not None and os.path.exists(prev):
        old = spark.read.parquet(prev)
        out = changes_between(old.select(*data), df.select(*data), time=t)
    elif frames is not None and name in frames:
        out = changes_between(frames[name], df.select(*data), time=t)
    else:
        out = df.withColumn("diff", F.lit(1).cast("bigint")).withColumn(
            "time", F.lit(t).cast("bigint")
        )
    if ckdir is not None:
        path = os.path.join(ckdir, "snapshots", f"{name}-{t}.parquet")
        df.write.mode("overwrite").parquet(path)
        snaps[name] = path
    elif frames is not None:
        frames[name] = df.select(*data).localCheckpoint(eager=True)
    state["time"] = max(int(state.get("time", -1)), t)
    return out.select(*data, "time", "diff"), data


# -- maintain ----------------------------------------------------------------------------------


def maintain(
    spark: SparkSession,
    views: Mapping[str, str],
    tables: Mapping[str, Any],
    *,
    workers: int = 2,
    checkpoint: str | os.PathLike[str] | None = None,
    dialect: str = "spark",
    timeout: float = 600.0,
    progress: float | None = None,
    on_round: Callable[[Any], None] | None = None,
    keys: Mapping[str, Any] | None = None,
) -> Maintained:
    """Refreshes SQL ``views`` from the changes of ``tables`` on ``workers`` Spark barrier
    tasks (see the module docstring); returns ``{view: ViewResult}``. ``on_round``: a hook
    each worker calls after each round (``JobConfig.on_round``; tests inject faults with
    it). ``keys``: per table, the columns of a key (or a list of keys) no two of its rows
    share, as Spark's informational PRIMARY KEY: the join order puts lookups on keys
    before joins that can multiply rows (a wrong declaration costs time, never a wrong
    answer). For many refreshes in a row, ``LiveViews`` keeps the state in memory instead of
    restoring it from the checkpoint each time."""
    import time as _time

    from ddflow.runtimes.spark import spark_job

    started = _time.perf_counter()
    side = _Views(spark, views, tables, checkpoint, dialect, keys, live=False)
    mark = _time.perf_counter()
    res = spark_job(
        spark,
        side.build,
        side.inputs,
        workers=workers,
        timeout=timeout,
        progress=progress,
        checkpoint=side.ckdir,
        checkpoint_every=0,
        check=not side.seen,
        on_round=on_round,
    )
    job_s = _time.perf_counter() - mark
    mark = _time.perf_counter()
    out = side.conclude(res)
    out.timings = dict(side.timings, job=job_s, results=_time.perf_counter() - mark)
    out.seconds = _time.perf_counter() - started
    out.job = res
    return out


class _Views:
    """The driver's side of SQL views over Spark tables, for one call of ``maintain`` or a
    ``LiveViews``: the state kept beside the workers' (``sql-state.json`` under the
    checkpoint), the tables' first changes as DataFrames (``inputs``), the views' plans and
    the job building them (``build``), and each view's contents; ``conclude`` brings them
    up to date with a job's output changes."""

    def __init__(
        self,
        spark: Any,
        views: Mapping[str, str],
        tables: Mapping[str, Any],
        checkpoint: str | os.PathLike[str] | None,
        dialect: str,
        keys: Mapping[str, Any] | None,
        live: bool,
    ) -> None:
        import time as _time

        started = _time.perf_counter()
        if not views:
            raise SQLError(f"{'LiveViews' if live else 'maintain'} needs at least one view")
        self.spark = spark
        self.views = dict(views)
        ckdir = self.ckdir = (
            os.path.abspath(os.fspath(checkpoint)) if checkpoint is not None else None
        )
        state = self.state = _load_state(ckdir)
        if ckdir is None and live:
            state["frames"] = {}  # the last snapshot of each table given as a Snapshot
        self.inputs, self.fields, table_schemas = _read_sources(spark, tables, state, ckdir)
        _check_tables(state, self.fields, keys)
        self.timings = {"inputs": _time.perf_counter() - started}
        self.plans, self.meta = _plan_views(views, self.fields, dialect, keys)
        self.shapes = _spark_shapes(spark, views, table_schemas, state)
        known = {int(k): v for k, v in state.get("strings", {}).items()}
        self.strings = StringDict(hashed=True)
        self.strings.learn(known)
        contents_state = state.setdefault("contents", {})
        self.contents = {v: _load_contents(ckdir, v, contents_state) for v in self.meta}
        # a refresh of the views an earlier call ran over these tables needs no trial run
        self.seen = state.get("views") == self.views and "tables" in state
        self.build = SqlJob(self.fields, self.plans, dialect, known)
        self.timings["plan"] = _time.perf_counter() - started - self.timings["inputs"]

    def conclude(self, res: Any) -> Maintained:
        """The views after the job's output changes ``res``, saved under the checkpoint."""
        state = self.state
        out = _results(self.spark, res, self.meta, self.shapes, self.strings, self.contents, state)
        fed = [st["fed_through"] for st in res.worker_stats if st.get("fed_through") is not None]
        if fed:
            state["applied"] = max(int(x) for x in fed)
        contents_state = state.setdefault("contents", {})
        for vname in self.meta:
            _save_contents(self.ckdir, vname, self.contents[vname], contents_state)
        _remember(state, self.strings, self.fields, self.views)
        _save_state(self.ckdir, state)
        return out


#: per view: column names, SQL types, visible columns, ORDER BY, plan
_Meta = dict[str, tuple[list[str], list[SqlType], int, tuple[SortKey, ...], Plan]]


def _read_sources(
    spark: Any, tables: Mapping[str, Any], state: dict[str, Any], ckdir: str | None
) -> tuple[dict[str, Any], dict[str, tuple[Field, ...]], dict[str, Any]]:
    """Every table source as a DataFrame of change rows (lower-case data columns,
    ``time``, ``diff``), the tables' fields and their Spark schemas; every column's type is
    checked before any work."""
    inputs: dict[str, Any] = {}
    fields: dict[str, tuple[Field, ...]] = {}
    table_schemas: dict[str, Any] = {}
    for src in tables.values():
        df = src.df if isinstance(src, Snapshot) else src
        if hasattr(df, "schema"):
            for f in df.schema.fields:
                if f.name not in _META:
                    sql_type_of(f.dataType, f.name)
    now = _next_time(state)
    for name, src in tables.items():
        key = name.lower()
        df, data = _change_rows(key, src, spark, state, ckdir, now)
        schema = {f.name: f.dataType for f in df.schema.fields}
        fields[key] = tuple(Field(c.lower(), sql_type_of(schema[c], c), True) for c in data)
        table_schemas[key] = df.select(*data).schema
        inputs[key] = df.select(*data, "time", "diff").toDF(
            *[c.lower() for c in data], "time", "diff"
        )
    return inputs, fields, table_schemas


def _check_tables(
    state: dict[str, Any], fields: dict[str, tuple[Field, ...]], keys: Mapping[str, Any] | None
) -> None:
    if "tables" in state and state["tables"] != {
        k: [str(f.type) for f in v] for k, v in fields.items()
    }:
        raise SQLError(
            "the tables' columns differ from the ones this checkpoint was made "
            "with; use a new checkpoint directory"
        )
    declared = {t: sorted(sorted(k) for k in ks) for t, ks in _declared_keys(keys, fields).items()}
    if "tables" in state and state.get("keys", {}) != declared:
        raise SQLError(
            "the declared keys differ from the ones this checkpoint was made with (they "
            "decide the views' join order, so its state fits other dataflows); use a new "
            "checkpoint directory"
        )
    state["keys"] = declared


def _declared_keys(
    keys: Mapping[str, Any] | None, fields: dict[str, tuple[Field, ...]]
) -> dict[str, list[frozenset[int]]]:
    """``keys`` (per table, a key's column names, or a list of keys) as the planner's
    column index sets; unknown tables and columns are refused."""
    out: dict[str, list[frozenset[int]]] = {}
    for table, given in (keys or {}).items():
        t = table.lower()
        if t not in fields:
            raise SQLError(f"keys: unknown table {table!r}; the tables are {sorted(fields)}")
        names = [f.name for f in fields[t]]
        several = [given] if given and isinstance(next(iter(given)), str) else list(given)
        sets = []
        for key in several:
            cols = [str(c).lower() for c in key]
            missing = [c for c in cols if c not in names]
            if missing or not cols:
                raise SQLError(
                    f"keys: table {table!r} has no column(s) {missing or key!r}; it has {names}"
                )
            sets.append(frozenset(names.index(c) for c in cols))
        out[t] = sets
    return out


def _plan_views(
    views: Mapping[str, str],
    fields: dict[str, tuple[Field, ...]],
    dialect: str,
    keys: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Plan], _Meta]:
    planner = Planner(fields, dialect, keys=_declared_keys(keys, fields))
    plans: dict[str, Plan] = {}
    meta: _Meta = {}
    for vname, sql in views.items():
        planned = planner.plan_sql(sql)
        plan = classes_over_joins(implied_classes(classify(prune(split(prune(planned.plan))))))
        plans[vname] = plan
        visible = planned.visible
        meta[vname] = (
            [f.name for f in plan.fields[:visible]],
            [f.type for f in plan.fields[:visible]],
            visible,
            planned.order,
            plan,
        )
    return plans, meta


def _remember(
    state: dict[str, Any],
    strings: StringDict,
    fields: dict[str, tuple[Field, ...]],
    views: Mapping[str, str],
) -> None:
    state["strings"] = {str(k): v for k, v in strings.entries().items()}
    state["tables"] = {k: [str(f.type) for f in v] for k, v in fields.items()}
    state["views"] = dict(views)


def _results(
    spark: Any,
    res: Any,
    meta: _Meta,
    shapes: dict[str, Any],
    strings: StringDict,
    contents: dict[str, dict[tuple[Any, ...], int]],
    state: dict[str, Any],
) -> Maintained:
    """The views after the job's output changes ``res``: ``strings`` learns the workers'
    new strings, ``contents`` (per view, row -> count) and ``state["fed"]`` are brought up
    to date."""
    for st in res.worker_stats:
        got = (st.get("extras") or {}).get("strings")
        if got:
            strings.learn(got)
        top = (st.get("extras") or {}).get("max_time")
        if top is not None:
            state["fed"] = max(int(state.get("fed", -1)), int(top))
    out = Maintained()
    applied = state.get("applied")  # output at times up to this one is in ``contents``
    for vname, (cols, types, visible, order, plan) in meta.items():
        o = res.get(vname)
        u = o.columns() if o is not None else None
        if u is not None and applied is not None and len(u):
            u = u.take(np.flatnonzero(u.times[:, 0] > int(applied)))
        change_rows: list[tuple[Any, ...]] = []
        extra: list[tuple[int, int]] = []
        if u is not None and len(u):
            change_rows = _decode(u, plan.fields, visible, strings)
            extra = list(zip(u.times[:, 0].tolist(), np.asarray(u.diffs).tolist(), strict=True))
        floats = [j for j, t in enumerate(types) if t.kind == "double"]
        now, change_rows = _apply(contents[vname], change_rows, extra, floats)
        contents[vname] = now
        rows = [r for r, c in now.items() for _ in range(c)]
        if order:
            from ddflow.sql.database import _sort_rows

            rows = _sort_rows(
                rows,
                tuple(SortKey(k.index, k.desc, k.nulls_first) for k in order if k.index < visible),
            )
        ctab = _arrow_table(cols, types, rows)
        chtab = _arrow_table(cols, types, change_rows, extra)
        given = _as_spark(ctab, chtab, shapes.get(vname))
        names = cols
        if given is not None:
            ctab, chtab, cschema, chschema = given
            names = list(cschema.names)
        else:
            cschema = _spark_schema(cols, types, False)
            chschema = _spark_schema(cols, types, True)
        out[vname] = ViewResult(
            vname, names, types, order, rows, spark, (ctab, cschema), (chtab, chschema)
        )
    return out


class LiveViews(_Views):
    """SQL views kept up to date by a Spark job that stays up between refreshes.

    ``LiveViews(spark, views, tables, workers=N, checkpoint=dir, keys=...)`` loads the
    views like ``maintain`` (``result`` is that first ``{view: ViewResult}``), but its ``N`` barrier
    tasks keep the views' state in memory afterwards (``ddflow.runtimes.spark.LiveJob``):
    ``refresh(tables)`` reads only the new changes (the same kinds of table source as
    ``maintain``: change rows, change data feeds, snapshots, Delta paths) on the driver,
    sends them to the tasks and returns the views' new contents and changes, with no
    Spark stage started and no state restored. Change rows without a ``time`` column are
    taken at the time after every time seen; rows at times already taken are skipped.

    A refresh whose rows a worker cannot read changes nothing and raises; the views go on.
    With ``checkpoint=`` every refresh also writes a checkpoint of the state (and the
    driver's side): when a task is lost in a refresh, a new job restores the last
    checkpoint and takes the refresh over (``restarts`` counts these), and after the
    driver itself fails a new ``LiveViews`` (or ``maintain``) on the same directory goes
    on from the last refresh the workers completed. Without a checkpoint a lost task ends
    the views (the refresh raises). ``close()`` (or leaving a ``with`` block) ends the
    tasks. The cluster needs a task slot more than ``N`` (``local[N+1]`` in local mode):
    reading the changes is a small Spark job of its own.
    """

    def __init__(
        self,
        spark: SparkSession,
        views: Mapping[str, str],
        tables: Mapping[str, Any],
        *,
        workers: int = 2,
        checkpoint: str | os.PathLike[str] | None = None,
        dialect: str = "spark",
        timeout: float = 600.0,
        progress: float | None = None,
        on_round: Callable[[Any], None] | None = None,
        keys: Mapping[str, Any] | None = None,
    ) -> None:
        import time as _time

        from ddflow.runtimes.spark import LiveJob

        started = _time.perf_counter()
        super().__init__(spark, views, tables, checkpoint, dialect, keys, live=True)
        self.settings: dict[str, Any] = dict(
            workers=workers,
            timeout=timeout,
            progress=progress,
            checkpoint=self.ckdir,
            on_round=on_round,
            # a job restoring a checkpoint of the same job returns the output it captured
            job_id=self.state.setdefault("live_job", uuid.uuid4().hex),
        )
        self.schemas = {name: df.schema for name, df in self.inputs.items()}
        self.restarts = 0
        self.job = LiveJob(spark, self.build, self.inputs, check=not self.seen, **self.settings)
        self.result = self._finish(self.job.initial, started)

    def __enter__(self) -> LiveViews:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        """Whether the job is up (false after ``close`` or a failure)."""
        return bool(self.job.alive)

    def refresh(self, tables: Mapping[str, Any]) -> Maintained:
        """Applies the new changes of ``tables`` (any subset of the tables) and returns
        ``{view: ViewResult}`` after them; ``changes`` holds this refresh's changes."""
        import time as _time

        started = _time.perf_counter()
        unknown = sorted(set(n.lower() for n in tables) - set(self.fields))
        if unknown:
            raise SQLError(f"unknown table(s) {unknown}; the views read {sorted(self.fields)}")
        # reading the sources moves times, Delta versions and snapshots on (one level deep)
        before = {k: dict(v) if isinstance(v, dict) else v for k, v in self.state.items()}
        inputs: dict[str, Any] = {}
        try:
            self._read(tables, inputs)
            try:
                res = self.job.feed(inputs)
            except BaseException:
                if not (self.job.lost and self.ckdir is not None):
                    raise
                res = self._take_over(inputs)
        except BaseException:
            self.state = before  # a refresh that fails changes nothing here either
            raise
        return self._finish(res, started)

    def _take_over(self, inputs: dict[str, Any]) -> Any:
        """A new job after the last one was lost in a refresh: it restores the last
        checkpoint and takes the refresh's changes as its initial input (the checkpoint's
        captured output comes back too; ``_results`` keeps what the views lack)."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_type

        from ddflow.runtimes.spark import LiveJob

        frames = {}
        for name, schema in self.schemas.items():
            t = inputs.get(name)
            if t is None:
                t = pa.schema(
                    [pa.field(f.name, to_arrow_type(f.dataType)) for f in schema.fields]
                ).empty_table()
            frames[name] = self.spark.createDataFrame(t, schema=schema)
        self.restarts += 1
        self.job = LiveJob(self.spark, self.build, frames, check=False, **self.settings)
        return self.job.initial

    def _read(self, tables: Mapping[str, Any], inputs: dict[str, Any]) -> None:
        """Reads each table source's changes into ``inputs`` (Arrow tables)."""
        from concurrent.futures import ThreadPoolExecutor

        now = _next_time(self.state)

        def read(item: tuple[str, Any]) -> tuple[Any, tuple[Field, ...]]:
            return _arrow_changes(item[0].lower(), item[1], self.spark, self.state, self.ckdir, now)

        # each DataFrame read is a round trip to Spark (or a small job): all at once
        with ThreadPoolExecutor(max(1, min(8, len(tables)))) as pool:
            got = list(pool.map(read, tables.items()))
        for name, (t, fields) in zip(tables, got, strict=True):
            key = name.lower()
            started = self.fields[key]
            if [(f.name, str(f.type)) for f in fields] != [(f.name, str(f.type)) for f in started]:
                raise SQLError(
                    f"table {key!r} has columns {[(f.name, str(f.type)) for f in fields]}; the "
                    f"views were started with {[(f.name, str(f.type)) for f in started]}"
                )
            inputs[key] = t

    def close(self) -> None:
        """Ends the job (its last checkpoint is the last refresh's)."""
        self.job.close(checkpoint=False)

    def _finish(self, res: Any, started: float) -> Maintained:
        import time as _time

        mark = _time.perf_counter()
        out = self.conclude(res)
        now = _time.perf_counter()
        job_s = next(
            (st["job_seconds"] for st in res.worker_stats if "job_seconds" in st), mark - started
        )
        out.timings = {"job": job_s, "results": now - mark}
        out.seconds = now - started
        out.job = res
        return out


def _spark_shapes(
    spark: Any, views: Mapping[str, str], tables: Mapping[str, Any], state: dict[str, Any]
) -> dict[str, Any]:
    """Per view, the schema Spark SQL gives it (column names and types; kept in ``state``
    per SQL text and table columns): the tables as empty DataFrames of their Spark types
    in a new session of ``spark`` (its own temporary views; the SQL settings copied), the
    view analyzed there, nothing run. A view Spark does not analyze gets none."""
    from pyspark.sql import types as st

    key = json.dumps({k: v.json() for k, v in sorted(tables.items())})
    cache = state.setdefault("spark_schemas", {})
    if cache.get("tables") != key:
        cache.clear()
        cache["tables"] = key
        cache["views"] = {}
    known = cache["views"]
    out: dict[str, Any] = {}
    missing = [v for v, sql in views.items() if sql not in known]
    if missing:
        session = spark.newSession()
        confs: Any = {}
        with contextlib.suppress(Exception):  # no way to read the settings: defaults
            confs = spark.conf.getAll
        for k, v in confs.items() if isinstance(confs, dict) else ():
            if k.startswith("spark.sql.") and not k.startswith("spark.sql.catalog"):
                with contextlib.suppress(Exception):  # a static setting: leave it
                    session.conf.set(k, v)
        for name, schema in tables.items():
            session.createDataFrame([], schema).createOrReplaceTempView(name)
        for v in missing:
            try:
                known[views[v]] = session.sql(views[v]).schema.json()
            except Exception:  # noqa: BLE001 - Spark does not take it: our own names
                known[views[v]] = None
    for v, sql in views.items():
        j = known.get(sql)
        out[v] = None if j is None else st.StructType.fromJson(json.loads(j))
    return out


def _as_spark(contents: Any, changes: Any, schema: Any) -> Any:
    """``contents`` and ``changes`` (Arrow, our names and types) under ``schema``'s names
    and types, with the two Spark schemas; None when they do not convert (same number of
    columns, casts that keep every value)."""
    if schema is None or len(schema.fields) != contents.num_columns:
        return None
    import pyarrow as pa
    from pyspark.sql import types as st
    from pyspark.sql.pandas.types import to_arrow_type

    try:
        targets = [to_arrow_type(f.dataType) for f in schema.fields]
        names = list(schema.names)

        def conv(t: Any, extra: list[str]) -> Any:
            cols = [
                t.column(i).cast(targets[i]) if t.column(i).type != targets[i] else t.column(i)
                for i in range(len(names))
            ]
            cols += [t.column(c) for c in extra]
            return pa.Table.from_arrays(cols, names=names + extra)

        c = conv(contents, [])
        ch = conv(changes, ["time", "diff"])
    except Exception:  # noqa: BLE001 - a value that does not cast: our own types
        return None
    fields = [st.StructField(f.name, f.dataType, True) for f in schema.fields]
    cschema = st.StructType(fields)
    chschema = st.StructType(
        fields
        + [
            st.StructField("time", st.LongType(), False),
            st.StructField("diff", st.LongType(), False),
        ]
    )
    return c, ch, cschema, chschema


def _apply(
    prev: dict[tuple[Any, ...], int],
    rows: list[tuple[Any, ...]],
    extra: list[tuple[int, int]],
    floats: list[int],
) -> tuple[dict[tuple[Any, ...], int], list[tuple[Any, ...]]]:
    """The contents after ``rows`` (with ``extra``'s diffs) and the rows as applied.

    A floating-point sum is accumulated in the order the dataflow's batches happen to be
    merged in, so a later retraction of an aggregate row may differ from the row that was
    inserted in the last bits of its ``floats`` columns: such a retraction retracts the
    inserted row (the nearest one with the same other columns) and is reported as it."""
    now = dict(prev)
    applied = list(rows)
    order = sorted(range(len(rows)), key=lambda i: -extra[i][1])  # insertions first
    for i in order:
        r, d = rows[i], extra[i][1]
        if d < 0 and now.get(r, 0) + d < 0 and floats:
            near = _nearest(now, r, floats)
            if near is not None:
                r = applied[i] = near
        c = now.get(r, 0) + d
        if c:
            now[r] = c
        else:
            now.pop(r, None)
    bad = [r for r, c in now.items() if c < 0]
    if bad:
        raise DDError(f"a view holds a negative multiplicity for {bad[0]!r} (internal error)")
    return now, applied


def _nearest(
    now: dict[tuple[Any, ...], int], r: tuple[Any, ...], floats: list[int]
) -> tuple[Any, ...] | None:
    """The row of ``now`` equal to ``r`` but for float columns within a relative 1e-9
    (the nearest such), or None."""
    import math

    fs = set(floats)
    best: tuple[float, tuple[Any, ...]] | None = None
    for q, c in now.items():
        if c <= 0 or len(q) != len(r):
            continue
        if any(
            a != b
            for j, (a, b) in enumerate(zip(q, r, strict=True))
            if j not in fs and not (a is None and b is None)
        ):
            continue
        far = 0.0
        for j in floats:
            a, b = q[j], r[j]
            if a is None or b is None:
                if a is not b:
                    far = math.inf
                continue
            if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300) and not (a != a and b != b):
                far = math.inf
                break
            far = max(far, abs(a - b))
        if far != math.inf and (best is None or far < best[0]):
            best = (far, q)
    return None if best is None else best[1]


def _state_path(ckdir: str) -> str:
    return os.path.join(ckdir, "sql-state.json")


def _load_state(ckdir: str | None) -> dict[str, Any]:
    if ckdir is None or not os.path.exists(_state_path(ckdir)):
        return {}
    with open(_state_path(ckdir)) as f:
        return dict(json.load(f))


def _save_state(ckdir: str | None, state: dict[str, Any]) -> None:
    if ckdir is None:
        return
    os.makedirs(ckdir, exist_ok=True)
    tmp = _state_path(ckdir) + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, _state_path(ckdir))


def _load_contents(ckdir: str | None, view: str, st: dict[str, Any]) -> dict[tuple[Any, ...], int]:
    import pickle

    path = st.get(view)
    if ckdir is None or path is None or not os.path.exists(path):
        return {}
    with open(path, "rb") as f:
        return dict(pickle.load(f))


def _save_contents(
    ckdir: str | None, view: str, now: dict[tuple[Any, ...], int], st: dict[str, Any]
) -> None:
    import pickle

    if ckdir is None:
        return
    d = os.path.join(ckdir, "views")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"{view}.pickle")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(now, f, protocol=5)
    os.replace(tmp, path)
    st[view] = path
