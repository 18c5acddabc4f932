"""ddflow on Spark: a dataflow run by long-lived Spark barrier tasks, one worker per task.

``run_on_spark(spark, build, inputs={name: DataFrame}, workers=P)`` launches one barrier
stage of ``P`` tasks with ``mapInArrow(..., barrier=True)``. Each task is a ddflow worker:
it reads its partition of the inputs (rows of every input DataFrame, tagged with the input's
name), swaps its socket address with the others through one ``BarrierTaskContext.allGather``
and from then on talks to them over the authenticated TCP mesh (``ddflow.engine.mesh``),
running the job driver of ``ddflow.runtimes.job`` with the job's ``JobConfig``: one round
per distinct input time. What a task returns (its captured output updates) comes back as
rows; the driver merges them and returns one DataFrame per output with the data columns,
``time`` and ``diff``. ``SparkRuntime`` is the same as a ``Runtime``
(``ddflow.runtimes.config``), taking ``Changes`` logs or DataFrames.

A job object may read its typed rows itself: a ``build`` with ``ingest(rows, kind) ->
logs`` gets each task's rows per input (``rows_by_input``) instead of the default
conversion, and one with ``extras()`` sends what it returns back with the task's results
(``worker_stats[i]["extras"]``).

Failures: the barrier stage is followed by a shuffle (``repartition(1)``), so when a task
dies Spark reruns the whole stage, and since the dataflow is deterministic the result is the
same: nothing lost, nothing duplicated. An exception raised by the dataflow itself (a user
function, bad data) is not retried: the task reports it with its traceback, tells its peers
to stop, and ``run_on_spark`` raises ``WorkerError``.

Checks made before any work starts: the workers fit the free task slots (Spark would
otherwise wait ten minutes before failing), dynamic allocation is off (barrier mode cannot
run with it), every input has the columns asked for and integral ``time``/``diff`` columns,
``build`` can be pickled, and ``build`` runs in-process on a sample of each input.

This module imports pyspark; ``import ddflow`` does not.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import time as _time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ddflow.core.columns import Layout, Leaf, Tup
from ddflow.core.diff import IntDiff, TupleDiff
from ddflow.core.errors import DataError, DDError, TotalOverflowError, both_errors
from ddflow.core.time import TimeKind, time_kind_of
from ddflow.dataflow.worker import Worker
from ddflow.engine.comm import MeshError, PeerAborted, WorkerError, error_kind, worker_error
from ddflow.engine.mesh import Listener, Mesh, new_secret
from ddflow.runtimes.config import Build, JobConfig
from ddflow.runtimes.job import (
    Changes,
    JobDriver,
    JobResult,
    Output,
    check_changes,
    drive,
    merge_results,
    view_leaves,
)
from ddflow.runtimes.local import run_job

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "LiveJob",
    "SparkJobError",
    "SparkResult",
    "SparkRuntime",
    "changes_between",
    "changes_frame",
    "check_session",
    "frame_arrow",
    "local_session",
    "logs_from_tables",
    "output_table",
    "rows_by_input",
    "run_on_spark",
    "spark_job",
    "task_slots",
    "write_changes",
]

_OUT_SCHEMA = "worker int, kind int, seq int, payload binary"
_CHUNK = 32 << 20
_RESULT, _ERROR, _ABORTED = 0, 1, 2  # what a task's rows hold


class SparkJobError(DDError, ValueError):
    """A Spark job that cannot start: bad inputs, too few slots, a build that cannot ship."""


def local_session(
    cores: int = 2,
    *,
    app: str = "ddflow",
    memory: str = "4g",
    extra: Mapping[str, str] | None = None,
) -> SparkSession:
    """A local-mode SparkSession set up for ddflow (UI and console progress off, few shuffle
    partitions, Spark's Python workers on this interpreter, barrier checks that fail fast)."""
    import sys

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    b = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(max(1, cores)))
        .config("spark.default.parallelism", str(max(1, cores)))
        .config("spark.driver.memory", memory)
        # Parallel GC collects only while the JVM allocates: once a barrier task has read its
        # input, the JVM goes quiet instead of running G1's concurrent cycles on the cores the
        # workers need (measured: G1 took 1.2-1.7 cores for the first seconds of Q1's rounds).
        .config("spark.driver.extraJavaOptions", "-XX:+UseParallelGC")
        .config("spark.executor.extraJavaOptions", "-XX:+UseParallelGC")
        .config("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "1s")
        .config("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures", "2")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "65536")
    )
    for k, v in (extra or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("FATAL")
    return spark


# -- checks -------------------------------------------------------------------------------------


def task_slots(spark: SparkSession) -> int:
    """How many tasks the cluster can run at once (what a barrier stage needs one each of)."""
    sc = spark.sparkContext
    try:
        jsc = sc._jsc.sc()
        return int(jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))
    except Exception:  # noqa: BLE001 - internal API; fall back to the public estimate
        m = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", sc.master or "")
        if not m:
            return int(sc.defaultParallelism)
        n = m.group(1)  # "local" alone is one core
        cores = 1 if n is None else (os.cpu_count() or 1) if n == "*" else int(n)
        return cores // int(spark.conf.get("spark.task.cpus", "1") or 1)


def check_session(spark: SparkSession, workers: int) -> None:
    """Refuse a job this session cannot run: ``SparkJobError`` when dynamic allocation is on
    or the cluster has fewer free task slots than ``workers`` (Spark would wait ten minutes
    before failing)."""
    if workers < 1:
        raise SparkJobError(f"workers must be at least 1, got {workers}")
    if (spark.conf.get("spark.dynamicAllocation.enabled", "false") or "").lower() == "true":
        raise SparkJobError(
            "Spark dynamic allocation is on (spark.dynamicAllocation.enabled=true); ddflow's "
            "workers run as one barrier stage, which Spark cannot schedule with dynamic "
            "allocation. Start the session with spark.dynamicAllocation.enabled=false."
        )
    slots = task_slots(spark)
    if workers > slots:
        raise SparkJobError(
            f"asked for {workers} workers but this Spark cluster has {slots} task slot(s) "
            f"(master {spark.sparkContext.master!r}); a barrier stage needs a free slot per "
            f"worker: use workers<={slots} or give the cluster more cores"
        )


_DATA_TYPES = (
    "ByteType",
    "ShortType",
    "IntegerType",
    "LongType",
    "FloatType",
    "DoubleType",
    "BooleanType",
    "StringType",
    "VarcharType",
    "CharType",
    "DateType",
    "DecimalType",
    "TimestampType",
    "TimestampNTZType",
    "NullType",
)
_INT_TYPES = ("ByteType", "ShortType", "IntegerType", "LongType")


def _prepare(
    inputs: Mapping[str, DataFrame], columns: Mapping[str, Sequence[str]] | None, kind: TimeKind
) -> tuple[DataFrame, dict[str, list[str]]]:
    """Validate every input and union them into one DataFrame of tagged rows."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType

    if not inputs:
        raise SparkJobError("run_on_spark needs at least one input DataFrame")
    parts = []
    data_cols: dict[str, list[str]] = {}
    for i, name in enumerate(sorted(inputs)):
        df = inputs[name]
        fields = {f.name: f.dataType for f in df.schema.fields}
        wanted = (
            list(columns[name])
            if columns and name in columns
            else [c for c in fields if c not in ("time", "diff")]
        )
        missing = [c for c in wanted if c not in fields]
        if missing:
            raise SparkJobError(
                f"input {name!r} has no column(s) {missing}; it has {sorted(fields)}"
            )
        if not wanted:
            raise SparkJobError(f"input {name!r} has no data columns besides time and diff")
        for c in wanted:
            tname = type(fields[c]).__name__
            if tname not in _DATA_TYPES:
                raise SparkJobError(
                    f"input {name!r} column {c!r} has type {fields[c].simpleString()}, which "
                    f"ddflow does not ingest (maps, arrays, structs, binary and intervals are "
                    f"not); use columns of integers, floats, decimals, booleans, strings, "
                    f"dates or timestamps"
                )
        if "time" in fields:
            t = fields["time"]
            ok = (
                type(t).__name__ in _INT_TYPES
                if kind.dim == 1
                else isinstance(t, ArrayType) and type(t.elementType).__name__ in _INT_TYPES
            )
            if not ok:
                want = "an integral type" if kind.dim == 1 else f"array<bigint> of {kind.dim}"
                raise SparkJobError(
                    f"input {name!r} column 'time' has type {t.simpleString()}; it must be "
                    f"{want} (times are {kind.describe()})"
                )
            tcol = F.col("time").cast("bigint" if kind.dim == 1 else "array<bigint>")
        else:
            tcol = (
                F.lit(0).cast("bigint")
                if kind.dim == 1
                else F.array(*[F.lit(0).cast("bigint")] * kind.dim)
            )
        if "diff" in fields:
            if type(fields["diff"]).__name__ not in _INT_TYPES:
                raise SparkJobError(
                    f"input {name!r} column 'diff' has type {fields['diff'].simpleString()}; "
                    "it must be an integral type (+1 inserts, -1 deletes)"
                )
            dcol = F.col("diff").cast("bigint")
        else:
            dcol = F.lit(1).cast("bigint")
        data_cols[name] = wanted
        parts.append(
            df.select(
                F.lit(i).cast("int").alias("__input"),
                tcol.alias("__time"),
                dcol.alias("__diff"),
                F.struct(*[F.col(c) for c in wanted]).alias(f"__d{i}"),
            )
        )
    # One untagged row, so the union is never empty: Spark's adaptive execution would
    # otherwise drop the barrier stage of an empty input and no worker would run.
    spark = parts[0].sparkSession
    marker = spark.range(1).select(F.lit(-1).cast("int").alias("__input"))
    parts.append(marker)
    while len(parts) > 1:  # a balanced union: a left-deep one is analyzed in quadratic time
        parts = [
            parts[k].unionByName(parts[k + 1], allowMissingColumns=True)
            if k + 1 < len(parts)
            else parts[k]
            for k in range(0, len(parts), 2)
        ]
    return parts[0], data_cols


def _ship_module(fn: Any) -> None:
    """Pickle ``fn``'s module by value unless it is an installed package: Spark's Python
    workers can import installed packages, but not a script's or a test's own module."""
    import sys
    import sysconfig

    from pyspark import cloudpickle

    mod = sys.modules.get(getattr(fn, "__module__", None) or "")
    if mod is None or mod.__name__ == "__main__":
        return  # __main__ is pickled by value anyway
    top = sys.modules.get(mod.__name__.split(".")[0])
    f = getattr(top, "__file__", None)
    if top is None or f is None or top.__name__ in ("ddflow", "pyspark"):
        return
    lib = {os.path.abspath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib", "stdlib")}
    if any(os.path.abspath(f).startswith(p + os.sep) for p in lib):
        return
    cloudpickle.register_pickle_by_value(mod)


def _check_build(build: Callable[..., Any], config: JobConfig) -> None:
    from pyspark import cloudpickle

    _ship_module(build)
    if config.on_round is not None:
        _ship_module(config.on_round)
    for what, obj in (("build", build), ("on_round", config.on_round)):
        try:
            cloudpickle.dumps(obj)
        except Exception as e:  # noqa: BLE001 - any pickling failure means the same thing
            raise SparkJobError(
                f"{what} cannot be pickled to ship it to Spark's workers: {type(e).__name__}: "
                f"{e}. Do not capture open files, sockets, locks or the SparkSession in {what}"
            ) from e


# -- Arrow <-> ddflow ----------------------------------------------------------------------------


def _column_to_numpy(arr: Any) -> np.ndarray:
    """One input column as a record column: ints (all widths) int64, floats float64,
    booleans bool, dates days since 1970 (int64), strings ``str``; decimals ``Decimal``
    (exact) and timestamps ``datetime``; a column holding NULLs is an ``object`` column
    with ``None`` for them."""
    import pyarrow as pa

    t = arr.type
    if arr.null_count or pa.types.is_decimal(t) or pa.types.is_timestamp(t) or pa.types.is_null(t):
        if pa.types.is_date32(t):
            days = arr.cast(pa.int32()).to_pylist()
            out = np.empty(len(days), dtype=object)
            out[:] = days
            return out
        vals = arr.to_pylist()
        out = np.empty(len(vals), dtype=object)
        out[:] = vals
        return out
    if pa.types.is_date32(t):
        return arr.cast(pa.int32()).to_numpy().astype(np.int64)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object)
    if pa.types.is_boolean(t):
        return arr.to_numpy(zero_copy_only=False).astype(bool)
    out = arr.to_numpy(zero_copy_only=False)
    if out.dtype.kind in "iu":
        return out.astype(np.int64, copy=False)
    return out


def rows_by_input(table: pa.Table | None, names: list[str]) -> dict[str, pa.Table]:
    """A task's input rows (the union of ``_prepare``) per input: its data columns (as
    given) with ``__time`` and ``__diff``, for a job that reads typed rows itself (its
    ``build`` has ``ingest(rows, kind) -> logs``)."""
    import pyarrow as pa

    out: dict[str, pa.Table] = {}
    if table is None or table.num_rows == 0:
        return out
    tag = table.column("__input").to_numpy()
    for i, name in enumerate(names):
        idx = np.flatnonzero(tag == i)
        if not len(idx):
            continue
        sub = table.take(pa.array(idx)) if len(idx) != table.num_rows else table
        struct = sub.column(f"__d{i}").combine_chunks()
        cols = [struct.field(j) for j in range(struct.type.num_fields)]
        names_ = [struct.type.field(j).name for j in range(struct.type.num_fields)]
        cols += [sub.column("__time").combine_chunks(), sub.column("__diff").combine_chunks()]
        out[name] = pa.Table.from_arrays(cols, names=[*names_, "__time", "__diff"])
    return out


def frame_arrow(df: DataFrame) -> pa.Table:
    """A DataFrame's rows as an Arrow table (Spark's Arrow types). A DataFrame Spark can
    collect without executors (``isLocal``: made from the driver's data) and without
    timestamp columns is collected on the driver with no Spark job; any other through
    ``toArrow`` (a job)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    schema = df.schema
    stamps = any(type(f.dataType).__name__.startswith("Timestamp") for f in schema.fields)
    if not stamps and df.isLocal():
        rows = df.collect()
        cols = list(zip(*rows, strict=True)) if rows else [() for _ in schema.fields]
        return pa.Table.from_arrays(
            [
                pa.array(list(c), type=to_arrow_type(f.dataType))
                for c, f in zip(cols, schema.fields, strict=True)
            ],
            names=[f.name for f in schema.fields],
        )
    return df.toArrow()


def logs_from_tables(
    tables: Mapping[str, pa.Table], names: list[str], kind: TimeKind, widths: Sequence[int]
) -> dict[str, Changes]:
    """Per input, a ``Changes`` log from its rows (``rows_by_input``'s form: the data
    columns, ``__time`` and ``__diff``); an input without rows gets an empty log of
    ``widths[i]`` columns."""
    import pyarrow.compute as pc

    logs: dict[str, Changes] = {}
    for i, name in enumerate(names):
        t = tables.get(name)
        if t is None or t.num_rows == 0:
            cols: tuple[Any, ...] = tuple(np.zeros(0, np.int64) for _ in range(widths[i]))
            times = np.zeros((0, kind.dim), np.int64)
            diffs = np.zeros(0, np.int64)
        else:
            t = t.combine_chunks()
            n = t.num_rows
            cols = tuple(_column_to_numpy(t.column(j).chunk(0)) for j in range(widths[i]))
            tcol = t.column("__time").chunk(0)
            if kind.dim == 1:
                times = np.asarray(tcol.to_numpy(), np.int64).reshape(n, 1)
            else:
                flat = pc.list_flatten(tcol).to_numpy()
                if len(flat) != n * kind.dim:
                    raise DataError(f"input {name!r}: every time must have {kind.dim} components")
                times = np.asarray(flat, dtype=np.int64).reshape(n, kind.dim)
            diffs = np.asarray(t.column("__diff").to_numpy(), np.int64)
        logs[name] = Changes(cols[0] if len(cols) == 1 else cols, times, diffs)
    return logs


def logs_from_arrow(
    table: pa.Table | None, names: list[str], kind: TimeKind, widths: Sequence[int]
) -> dict[str, Changes]:
    """A task's input rows (the union of ``_prepare``) as one ``Changes`` per input;
    ``widths[i]`` is the number of data columns of input ``i``."""
    return logs_from_tables(rows_by_input(table, names), names, kind, widths)


def _column_names(layout: Layout | None, prefix: str = "") -> list[str]:
    if layout is None:
        return []
    if isinstance(layout, Leaf):
        return [prefix or "value"]
    if isinstance(layout, Tup):
        out: list[str] = []
        for j, c in enumerate(layout.children):
            out.extend(_column_names(c, f"{prefix}_{j}"))
        return out
    return [f"{prefix}_{j}" for j in range(layout.width)]  # a Struct's fields


def output_table(out: Output, names: Sequence[str] | None = None) -> pa.Table:
    """One output's updates as an Arrow table: data columns, ``time``, ``diff``.

    Data columns are named ``value`` for scalar records and by position for tuples
    (``_0``, ``_1``, ``_1_0`` for the first field of the second field, ...), unless ``names``
    gives them. Int diffs are a ``diff`` column; tuple diffs a struct ``diff`` of ``_0..``.
    """
    import pyarrow as pa

    u = out.columns()
    cols = _column_names(out.layout)
    if names is not None:
        if len(names) != len(cols):
            raise ValueError(f"{len(names)} column names given for {len(cols)} data columns")
        cols = list(names)
    arrays: dict[str, Any] = {}
    if u is None or len(u) == 0:
        for c in cols:
            arrays[c] = pa.array([], pa.int64())
        arrays["time"] = pa.array([], pa.int64() if out.kind.dim == 1 else pa.list_(pa.int64()))
        arrays["diff"] = pa.array([], pa.int64())
        return pa.table(arrays)
    for c, a in zip(cols, u.data, strict=True):
        arrays[c] = _arrow_column(a, f"data column {c!r}")
    if out.kind.dim == 1:
        arrays["time"] = pa.array(u.times[:, 0])
    else:
        arrays["time"] = pa.FixedSizeListArray.from_arrays(
            pa.array(u.times.ravel()), out.kind.dim
        ).cast(pa.list_(pa.int64()))
    if isinstance(u.diff_type, IntDiff):
        arrays["diff"] = _arrow_column(u.diffs, "the diff column")
    elif isinstance(u.diff_type, TupleDiff):
        parts = [_arrow_column(np.asarray(p), f"diff component {j}") for j, p in enumerate(u.diffs)]
        arrays["diff"] = pa.StructArray.from_arrays(parts, [f"_{j}" for j in range(len(parts))])
    else:
        arrays["diff"] = pa.array([repr(v) for v in u.diff_type.to_values(u.diffs)])
    return pa.table(arrays)


def _arrow_column(a: np.ndarray, what: str) -> Any:
    """An Arrow array of column ``a``; ``DataError`` for values no Arrow type holds exactly
    (ints beyond int64, a field mixing ints and floats)."""
    import pyarrow as pa

    if a.dtype != object:
        return pa.array(a)
    try:
        return pa.array(a.tolist())
    except (OverflowError, pa.ArrowException) as e:
        raise DataError(
            f"{what} of an output holds values no one Arrow column type holds exactly ({e}); "
            "ints beyond int64 and fields mixing ints with floats cannot be written to Spark: "
            "map them to strings (or to floats, if rounding is acceptable) first"
        ) from e


# -- the barrier task -------------------------------------------------------------------------


def _bindable(host: str) -> str:
    """``host``'s address if a socket can listen on it here, else the loopback address."""
    import socket

    try:
        addr = socket.gethostbyname(host)
        with socket.socket() as s:
            s.bind((addr, 0))
        return addr
    except OSError:
        return "127.0.0.1"


def _own_host(ctx: Any) -> str:
    info = ctx.getTaskInfos()[ctx.partitionId()]
    return _bindable(str(info.address).rsplit(":", 1)[0])


def _task(
    build: Callable[..., Any],
    names: list[str],
    widths: list[int],
    secret: bytes,
    config: JobConfig,
    job_id: str,
    hub: tuple[tuple[str, int], bytes] | None = None,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The barrier tasks' function. With ``hub`` (the driver's address and secret) the
    task is a live job's worker: it connects to the driver, sends its result of the
    initial input there and then serves the driver's requests (``_serve``) until told to
    stop."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import json

        import pyarrow as pa
        from pyspark import BarrierTaskContext

        from ddflow.runtimes.memory import tune_malloc

        tune_malloc()
        ctx = BarrierTaskContext.get()
        index = ctx.partitionId()
        kind = time_kind_of(config.time)
        got = list(batches)
        listener = Listener(_own_host(ctx))
        gathered = ctx.allGather(json.dumps(list(listener.address)))
        addresses = [tuple(json.loads(a)) for a in gathered]
        mesh = Mesh.connect(index, addresses, listener, secret, timeout=config.timeout)
        ctl: Mesh | None = None
        payload: bytes
        kind_out = _RESULT
        try:
            if hub is not None:
                ctl = Mesh.spoke(index, len(addresses) + 1, len(addresses), hub[0], hub[1])
            table = pa.Table.from_batches(got) if got else None
            del got
            logs = _task_logs(build, rows_by_input(table, names), names, kind, widths)
            del table
            worker = Worker(comm=mesh)
            if ctl is None:
                result = drive(worker, build, logs, config, job_id=job_id)
                _task_stats(result, build, mesh)
                payload = pickle.dumps(result, protocol=5)
            else:
                jd = JobDriver(worker, build, logs, config, job_id=job_id)
                result = jd.feed(logs, final=False)
                del logs
                _task_stats(result, build, mesh)
                result.stats["fed_through"] = jd.fed
                ctl.send({ctl.peers - 1: ("result", result)})
                del result
                _serve(ctl, jd, build, mesh, names, kind, widths)
                payload = b""
        except (MeshError, ConnectionError):
            raise  # the mesh broke (a peer died): let Spark rerun the stage
        except PeerAborted:
            payload, kind_out = b"", _ABORTED
            _tell_hub(ctl, ("aborted",))
        except BaseException as e:  # noqa: BLE001 - reported to the caller, not retried
            mesh.abort(f"{type(e).__name__}: {e}")
            # the first line names ddflow's error class (or is empty), the rest is the trace
            text = f"{error_kind(e)}\n{traceback.format_exc()}"
            payload, kind_out = text.encode(), _ERROR
            _tell_hub(ctl, ("error", text))
        finally:
            mesh.close()
            if ctl is not None:
                ctl.close()
        chunks = [payload[k : k + _CHUNK] for k in range(0, len(payload), _CHUNK)] or [b""]
        for seq, c in enumerate(chunks):
            yield pa.RecordBatch.from_pydict(
                {
                    "worker": pa.array([index], pa.int32()),
                    "kind": pa.array([kind_out], pa.int32()),
                    "seq": pa.array([seq], pa.int32()),
                    "payload": pa.array([c], pa.binary()),
                }
            )

    return run


def _task_logs(
    build: Any, rows: Mapping[str, pa.Table], names: list[str], kind: TimeKind, widths: list[int]
) -> dict[str, Any]:
    """A task's logs from its rows per input (``rows_by_input``'s form): the job's own
    ``ingest`` when it has one."""
    if hasattr(build, "ingest"):
        return dict(build.ingest(rows, kind))
    return dict(logs_from_tables(rows, names, kind, widths))


def _task_stats(result: Any, build: Any, mesh: Mesh) -> None:
    result.stats["mesh_bytes_sent"] = mesh.bytes_sent
    if hasattr(build, "extras"):
        result.stats["extras"] = build.extras()


def _tell_hub(ctl: Mesh | None, message: Any) -> None:
    if ctl is None:
        return
    with contextlib.suppress(OSError, MeshError):  # the driver is gone or gave up
        ctl.send({ctl.peers - 1: message})


def _serve(
    ctl: Mesh,
    jd: JobDriver,
    build: Any,
    mesh: Mesh,
    names: list[str],
    kind: TimeKind,
    widths: list[int],
) -> None:
    """A live job's worker serving the driver (the hub of ``ctl``) until it says stop.

    ``("feed", rows, checkpoint)``: this worker's share of new input rows (per input, an
    Arrow table of its data columns, ``__time`` and ``__diff``); every worker reads its
    rows first and the workers agree on whether all could, so input one worker refuses
    (bad data) changes no worker's state (answer ``("refused", text)``); otherwise the
    rows are fed as rounds and the output changes they made are the answer
    (``("result", WorkerResult)``).
    ``("stop", checkpoint)``: write a checkpoint if asked and end the task."""
    hub = ctl.peers - 1
    while True:
        msg = ctl.receive([hub])[hub]
        if msg[0] == "stop":
            if msg[1] and jd.config.checkpoint is not None:
                jd.checkpoint()
            ctl.send({hub: ("stopped",)})
            return
        if msg[0] != "feed":
            raise SparkJobError(f"a live job's worker got an unknown request {msg[0]!r}")
        logs: dict[str, Any] | None = None
        problem: str | None = None
        try:
            logs = _task_logs(build, msg[1], names, kind, widths)
            for name, log in logs.items():
                if isinstance(log, Changes):
                    check_changes(name, log, jd.config)
        except Exception as e:  # noqa: BLE001 - any reading failure refuses the feed
            problem = f"{error_kind(e)}\n{traceback.format_exc()}"
        problems = [p for p in mesh.all_gather(problem) if p is not None]
        if problems:
            ctl.send({hub: ("refused", problems[0])})
            continue
        assert logs is not None
        result = jd.feed(logs, final=False, checkpoint=msg[2])
        _task_stats(result, build, mesh)
        result.stats["fed_through"] = jd.fed
        ctl.send({hub: ("result", result)})


# -- driver side ------------------------------------------------------------------------------


def spark_job(
    spark: SparkSession,
    build: Build,
    inputs: Mapping[str, DataFrame],
    config: JobConfig | None = None,
    *,
    columns: Mapping[str, Sequence[str]] | None = None,
    check: bool = True,
    **settings: Any,
) -> JobResult:
    """Run the job on Spark and return its outputs merged on the driver (``JobResult``).

    ``config`` and/or its fields as keywords (``workers=`` (default 2), ``time=``,
    ``timeout=``, ``progress=``, ``checkpoint=``, ``checkpoint_every=``, ``on_round=``; see
    ``JobConfig``); ``columns`` and ``check``: see ``run_on_spark``."""
    cfg = JobConfig.resolve(config, settings, workers=2)
    kind = time_kind_of(cfg.time)
    if cfg.checkpoint is not None and kind.dim != 1:
        raise SparkJobError("checkpointed Spark jobs need int times")
    # one id per call: a rerun of the stage (after a failure) is the same job
    job_id = uuid.uuid4().hex
    check_session(spark, cfg.workers)
    union, data_cols, names, widths = _set_up(build, inputs, cfg, kind, columns, check)
    fn = _task(build, names, widths, new_secret(), cfg, job_id)
    workers = cfg.workers
    started = _time.perf_counter()
    rows = (
        union.repartition(workers)
        .mapInArrow(fn, _OUT_SCHEMA, barrier=True)
        .repartition(1)
        .toArrow()
    )
    elapsed = _time.perf_counter() - started
    chunks: dict[tuple[int, int], list[tuple[int, bytes]]] = {}
    for w, k, seq, p in zip(
        *(rows.column(c).to_pylist() for c in ("worker", "kind", "seq", "payload")), strict=True
    ):
        chunks.setdefault((k, w), []).append((seq, p))

    def blob(key: tuple[int, int]) -> bytes:
        return b"".join(p for _, p in sorted(chunks[key]))

    failed = sorted(w for k, w in chunks if k == _ERROR)
    if failed:
        err_kind, _, text = blob((_ERROR, failed[0])).decode("utf-8", "replace").partition("\n")
        raise worker_error(failed[0], text, err_kind)
    done = sorted(w for k, w in chunks if k == _RESULT)
    if done != list(range(workers)):
        raise WorkerError(-1, f"only workers {done} of {workers} returned results")
    results = [pickle.loads(blob((_RESULT, w))) for w in range(workers)]
    res = merge_results(results, kind)
    res.worker_stats.append({"job_seconds": elapsed})
    return res


def _set_up(
    build: Build,
    inputs: Mapping[str, DataFrame],
    cfg: JobConfig,
    kind: TimeKind,
    columns: Mapping[str, Sequence[str]] | None,
    check: bool,
) -> tuple[DataFrame, dict[str, list[str]], list[str], list[int]]:
    """A Spark job's checks before any work and its tagged input rows: the union, each
    input's data columns, the input names in tag order and their widths."""
    union, data_cols = _prepare(inputs, columns, kind)
    _check_build(build, cfg)
    names = sorted(inputs)
    widths = [len(data_cols[n]) for n in names]
    if check:
        _dry_run(build, union, names, kind, cfg.time, widths)
    return union, data_cols, names, widths


def _driver_host(spark: SparkSession) -> str:
    """An address of the driver the executors can reach (``spark.driver.host``), or the
    loopback address when it cannot be bound here."""
    host = spark.sparkContext.getConf().get("spark.driver.host", "127.0.0.1") or "127.0.0.1"
    return _bindable(host)


class LiveJob:
    """A job that stays up on Spark and takes new input while it runs.

    ``LiveJob(spark, build, inputs, workers=P, ...)`` starts the job like ``spark_job``
    (the same inputs, checks and settings) but its ``P`` barrier tasks do not end after
    the initial input: each keeps its part of the dataflow's state in memory and waits for
    more. ``initial`` is the ``JobResult`` of the initial input; ``feed(inputs)`` reads
    new change rows (DataFrames with the same columns, times after the ones fed before;
    input at times already fed is skipped) on the driver, sends each task a share and
    returns the output changes they made, with no new Spark stage and no state to
    restore; ``close()`` ends the tasks (writing a checkpoint first when the job has a
    checkpoint directory). Use it as a context manager to close it.

    The tasks hold ``P`` task slots for as long as the job lives, and reading the new
    input's DataFrames is a Spark job of its own, so the cluster needs at least one slot
    more than ``P`` (in local mode, ``local[P+1]`` or more; idle tasks use no CPU).

    The driver talks to the tasks over the same authenticated connections as the tasks
    use between themselves (``ddflow.engine.mesh``), the driver as the centre of a star.
    Input a worker cannot read (bad values) is refused by every worker before any state
    changes: ``feed`` raises the error and the job goes on. An error while the dataflow
    runs, or a task that dies, ends the job: ``feed`` raises and ``alive`` is false
    (``lost`` says a task or a connection was lost rather than the dataflow failing). With
    a checkpoint directory a new job restores the last checkpoint and goes on from there;
    given the same ``job_id``, it also returns the output the checkpoint captured (the
    output of the last input that was checkpointed, which the lost job may not have
    answered).
    """

    def __init__(
        self,
        spark: SparkSession,
        build: Build,
        inputs: Mapping[str, DataFrame],
        config: JobConfig | None = None,
        *,
        columns: Mapping[str, Sequence[str]] | None = None,
        check: bool = True,
        job_id: str | None = None,
        **settings: Any,
    ) -> None:
        import threading

        cfg = self.config = JobConfig.resolve(config, settings, workers=2)
        kind = self.kind = time_kind_of(cfg.time)
        if kind.dim != 1:
            raise SparkJobError("live Spark jobs need int times")
        self.spark = spark
        workers = cfg.workers
        check_session(spark, workers)
        slots = task_slots(spark)
        if slots <= workers:
            raise SparkJobError(
                f"a live job of {workers} workers holds {workers} task slot(s) while it lives "
                f"and reading its new input needs one more; this cluster has {slots} "
                f"(master {spark.sparkContext.master!r}): use local[{workers + 1}] or more, "
                "or give the cluster more cores"
            )
        union, self.data_cols, self.names, widths = _set_up(
            build, inputs, cfg, kind, columns, check
        )
        listener = self._listener = Listener(_driver_host(spark))
        hub_secret = new_secret()
        fn = _task(
            build,
            self.names,
            widths,
            new_secret(),
            cfg,
            job_id or uuid.uuid4().hex,
            hub=(listener.address, hub_secret),
        )
        self._group = f"ddflow-live-{uuid.uuid4().hex}"
        #: the job ended because a task or its connection was lost (not by an error the
        #: dataflow raised): a new job restoring the last checkpoint can take over
        self.lost = False
        self._failure: BaseException | None = None
        #: the latest time the dataflow has taken (input without a time column is fed at
        #: the time after it)
        self.last_time = -1
        self._ended = threading.Event()
        self.alive = False
        sc = spark.sparkContext

        def run_stage() -> None:
            try:
                sc.setJobGroup(self._group, "ddflow live job", interruptOnCancel=True)
                union.repartition(workers).mapInArrow(fn, _OUT_SCHEMA, barrier=True).repartition(
                    1
                ).toArrow()
            except BaseException as e:  # noqa: BLE001 - kept for the driver thread
                self._failure = e
            finally:
                self._ended.set()

        started = _time.perf_counter()
        self._thread = threading.Thread(target=run_stage, name="ddflow-live-job", daemon=True)
        self._thread.start()

        def waiting() -> None:
            if self._ended.is_set():
                raise SparkJobError(
                    f"the live job's Spark stage ended before its workers connected: "
                    f"{self._failure!r}"
                )

        try:
            self._ctl = Mesh.hub(
                workers,
                workers + 1,
                listener,
                hub_secret,
                timeout=cfg.timeout,
                setup_timeout=max(cfg.timeout, 120.0),
                waiting=waiting,
            )
        except BaseException:
            self._cancel()
            raise
        self.alive = True
        self.initial = self._answers("initial input")

        self.initial.worker_stats.append({"job_seconds": _time.perf_counter() - started})

    def __enter__(self) -> LiveJob:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def feed(
        self, inputs: Mapping[str, DataFrame | pa.Table], *, checkpoint: bool | None = None
    ) -> JobResult:
        """Feeds new change rows (see the class docstring): per input, a DataFrame or an
        Arrow table with the input's data columns and optional ``time`` (default: the time
        after the last one fed) and ``diff`` (default +1) columns. Returns the output
        changes they made. ``checkpoint``: write a checkpoint after them (default: when the
        job has a checkpoint directory)."""
        if not self.alive:
            raise SparkJobError("this live job has ended; start a new one")
        started = _time.perf_counter()
        from concurrent.futures import ThreadPoolExecutor

        # each DataFrame read is a round trip to Spark (or a small job): all at once
        with ThreadPoolExecutor(max(1, min(8, len(inputs)))) as pool:
            got = list(pool.map(lambda kv: self._rows(*kv), inputs.items()))
        tables = dict(zip(inputs, got, strict=True))
        read = _time.perf_counter() - started
        p = self.config.workers
        shares: dict[int, dict[str, Any]] = {i: {} for i in range(p)}
        for name, t in tables.items():
            n = t.num_rows
            for i in range(p):
                lo, hi = n * i // p, n * (i + 1) // p
                if hi > lo:
                    shares[i][name] = t.slice(lo, hi - lo)
        self._send({i: ("feed", shares[i], checkpoint) for i in range(p)})
        res = self._answers("input")
        res.worker_stats.append(
            {"job_seconds": _time.perf_counter() - started, "read_seconds": read}
        )
        return res

    def _rows(self, name: str, src: Any) -> pa.Table:
        """One input's new rows as an Arrow table of its data columns, ``__time`` and
        ``__diff`` (checked: the columns the job started with, integral times and diffs)."""
        import pyarrow as pa

        if name not in self.data_cols:
            raise SparkJobError(
                f"input {name!r} is not an input of this job; its inputs are {self.names}"
            )
        t = src if isinstance(src, pa.Table) else frame_arrow(src)
        want = self.data_cols[name]
        data = [c for c in t.column_names if c not in ("time", "diff")]
        if data != want:
            raise SparkJobError(
                f"input {name!r} has columns {data}; the job was started with {want}"
            )
        n = t.num_rows
        out = {c: t.column(c) for c in want}
        for col, default in (("time", self.last_time + 1), ("diff", 1)):
            if col in t.column_names:
                c = t.column(col)
                if not pa.types.is_integer(c.type):
                    raise SparkJobError(
                        f"input {name!r} column {col!r} has type {c.type}; it must be an "
                        "integral type"
                    )
                if c.null_count:
                    raise SparkJobError(f"input {name!r} column {col!r} holds NULLs")
                out[f"__{col}"] = c.cast(pa.int64())
            else:
                out[f"__{col}"] = pa.chunked_array([pa.array(np.full(n, default, np.int64))])
        return pa.table(out)

    def close(self, *, checkpoint: bool = True) -> None:
        """Ends the job (a checkpoint first when it has a checkpoint directory and
        ``checkpoint``); a job that has ended already is left as it is."""
        if self.alive:
            self.alive = False
            try:
                p = self.config.workers
                self._ctl.send({i: ("stop", checkpoint) for i in range(p)})
                got = self._ctl.receive(list(range(p)))
                bad = [w for w, m in got.items() if m[0] != "stopped"]
                if bad:
                    raise WorkerError(bad[0], f"worker {bad[0]} did not stop: {got[bad[0]]!r}")
                self._ended.wait(self.config.timeout)
            except BaseException:
                self._cancel()
                raise
        self._cancel()

    # -- internals --------------------------------------------------------------------------
    def _send(self, messages: dict[int, Any]) -> None:
        try:
            self._ctl.send(messages)
        except BaseException as e:
            self.lost = isinstance(e, (MeshError, OSError))
            self._cancel()
            raise

    def _answers(self, what: str) -> JobResult:
        """Every worker's answer to the last request, merged; raises (ending the job,
        except when the workers refused the input) when a worker failed."""
        p = self.config.workers
        try:
            got = self._ctl.receive(list(range(p)))
        except BaseException as e:
            self.lost = isinstance(e, (MeshError, OSError))
            self._cancel()
            if isinstance(e, MeshError) and self._failure is not None:
                raise WorkerError(-1, f"the live job failed: {self._failure!r}") from e
            raise
        errors = [(w, m[1]) for w, m in sorted(got.items()) if m[0] == "error"]
        if errors:
            self._cancel()
            w, text = errors[0]
            err_kind, _, trace = text.partition("\n")
            raise worker_error(w, trace, err_kind)
        refused = [(w, m[1]) for w, m in sorted(got.items()) if m[0] == "refused"]
        if refused:
            w, text = refused[0]
            err_kind, _, trace = text.partition("\n")
            raise worker_error(w, f"{what} refused, nothing changed:\n{trace}", err_kind)
        if any(m[0] != "result" for m in got.values()):
            self.lost = all(m[0] in ("result", "aborted") for m in got.values())
            self._cancel()
            raise WorkerError(-1, f"the live job's workers stopped: {sorted(got.items())!r}")
        results = [got[w][1] for w in range(p)]
        for r in results:
            fed = r.stats.get("fed_through")
            if fed is not None:
                self.last_time = max(self.last_time, int(fed))
        return merge_results(results, self.kind)

    def _cancel(self) -> None:
        """Ends the Spark stage and the connections (after a failure, or at the end)."""
        self.alive = False
        if not self._ended.is_set():
            with contextlib.suppress(Exception):  # the session may be stopped already
                self.spark.sparkContext.cancelJobGroup(self._group)
        ctl = getattr(self, "_ctl", None)
        if ctl is not None:
            ctl.close()
        self._listener.close()
        self._thread.join(timeout=30.0)


def _dry_run(
    build: Callable[..., Any],
    union: DataFrame,
    names: list[str],
    kind: TimeKind,
    time: Any,
    widths: list[int],
    rows: int = 64,
) -> None:
    """Run ``build`` in-process on the first rows of the inputs: errors surface before the
    job starts (one small Spark query; some inputs may get no rows). Only rows with a
    positive diff: a sample of deletions, or a resumed job's deltas, is no valid input."""
    table = union.filter("__diff > 0").limit(rows).toArrow()
    logs = _task_logs(build, rows_by_input(table, names), names, kind, widths)
    try:
        run_job(build, logs, time=time)
    except TotalOverflowError:
        return  # (the sample's totals are not the whole's: the job itself decides)
    except DDError as e:
        cls = both_errors(SparkJobError, type(e)) or SparkJobError
        raise cls(
            f"build failed on a sample of the inputs (nothing was started on Spark): {e}"
        ) from e
    except Exception as e:
        raise SparkJobError(
            "build failed on a sample of the inputs (nothing was started on Spark):\n"
            + traceback.format_exc()
        ) from e


class SparkResult(dict):
    """``{output name: DataFrame}`` plus ``round_seconds`` and ``worker_stats``."""

    round_seconds: list[float]
    worker_stats: list[dict[str, Any]]
    job: JobResult


def run_on_spark(
    spark: SparkSession,
    build: Build,
    inputs: Mapping[str, DataFrame],
    config: JobConfig | None = None,
    *,
    columns: Mapping[str, Sequence[str]] | None = None,
    output_columns: Mapping[str, Sequence[str]] | None = None,
    check: bool = True,
    **settings: Any,
) -> SparkResult:
    """Run ``build`` over ``inputs`` on ``workers`` Spark barrier tasks.

    ``inputs``: ``{name: DataFrame}`` with data columns (``columns[name]`` picks and orders
    them; default: all but ``time`` and ``diff``) and optional ``time`` (int, default 0) and
    ``diff`` (int, default +1) columns; a record is the tuple of its data columns (or the
    value, for one column). ``build({name: Collection})`` returns a Collection or
    ``{name: Collection}``. Returns ``{name: DataFrame}`` of output updates: data columns
    (see ``output_table``; ``output_columns[name]`` renames them), ``time`` and ``diff``.
    ``check`` runs ``build`` in-process on a sample of each input first.

    How the job runs is ``config`` and/or its fields as keywords (see ``JobConfig``):
    ``workers`` (default 2), ``time``, ``timeout``, ``progress``, ``on_round`` and
    ``checkpoint``/``checkpoint_every``: a directory every task can reach (local mode: any
    local path; a cluster: a shared file system) where the workers keep checkpoints of
    their state (int times only). The job first restores the newest committed checkpoint
    there, skipping input at the times it covers; writes one every ``checkpoint_every``
    rounds (0: only at the end) and one at the end, leaving the inputs open. So a later job
    with newer input goes on where this one stopped (incremental refresh: it returns the
    output changes of its own input), and when Spark reruns a failed stage the rerun resumes
    from the last committed checkpoint instead of the start. A checkpoint restores only with
    the same ``build`` and number of ``workers``.
    """
    job = spark_job(spark, build, inputs, config, columns=columns, check=check, **settings)
    out = SparkResult()
    for name, o in job.items():
        table = output_table(o, (output_columns or {}).get(name))
        out[name] = spark.createDataFrame(table)
    out.round_seconds = job.round_seconds
    out.worker_stats = job.worker_stats
    out.job = job
    return out


def changes_frame(spark: SparkSession, changes: Changes, time: Any = 0) -> DataFrame:
    """A ``Changes`` log as a DataFrame: data columns ``_0, _1, ...`` (flattened), ``time``
    (an array of ints for ``Product`` times, like ``time``) and ``diff``."""
    import pyarrow as pa

    cols = view_leaves(changes.data)
    n = len(changes)
    dim = time_kind_of(time).dim
    table: dict[str, Any] = {
        f"_{j}": _arrow_column(np.asarray(a), f"column {j}") for j, a in enumerate(cols)
    }
    t = np.asarray(changes.times, dtype=np.int64).reshape(n, dim)
    if dim == 1:
        table["time"] = pa.array(t[:, 0], pa.int64())
    else:
        table["time"] = pa.array([list(r) for r in t.tolist()], pa.list_(pa.int64()))
    diffs = np.ones(n, np.int64) if changes.diffs is None else np.asarray(changes.diffs)
    table["diff"] = pa.array(diffs.astype(np.int64), pa.int64())
    return spark.createDataFrame(pa.table(table))


class SparkRuntime:
    """The Spark runtime as a ``Runtime``: ``config.workers`` barrier tasks of ``session``.
    Inputs are DataFrames, or ``Changes`` logs (sent as DataFrames with ``changes_frame``;
    their data columns become the records' flat columns)."""

    name = "spark"

    def __init__(self, session: SparkSession) -> None:
        self.session = session

    def run(self, build: Build, inputs: Mapping[str, Any], config: JobConfig) -> JobResult:
        for n, c in inputs.items():
            if isinstance(c, Changes):
                check_changes(n, c, config)
        dfs = {
            n: changes_frame(self.session, c, config.time) if isinstance(c, Changes) else c
            for n, c in inputs.items()
        }
        return spark_job(self.session, build, dfs, config)


def changes_between(old: DataFrame, new: DataFrame, *, time: int = 0) -> DataFrame:
    """The updates that turn snapshot ``old`` into snapshot ``new`` (same columns): rows only
    in ``new`` with ``diff`` +1, rows only in ``old`` with ``diff`` -1 (as multisets), all at
    ``time``."""
    from pyspark.sql import functions as F

    if [f.name for f in old.schema.fields] != [f.name for f in new.schema.fields]:
        raise SparkJobError(f"snapshots have different columns: {old.columns} and {new.columns}")
    added = new.exceptAll(old).withColumn("diff", F.lit(1).cast("bigint"))
    removed = old.exceptAll(new).withColumn("diff", F.lit(-1).cast("bigint"))
    return added.unionByName(removed).withColumn("time", F.lit(time).cast("bigint"))


def write_changes(changes: DataFrame, path: str, *, mode: str = "append") -> None:
    """Write a change DataFrame (data columns, ``time``, ``diff``) to Parquet under ``path``,
    partitioned by ``time`` so each round's changes land in their own directory."""
    for c in ("time", "diff"):
        if c not in changes.columns:
            raise SparkJobError(
                f"a change DataFrame needs a {c!r} column; it has {changes.columns}"
            )
    changes.write.mode(mode).partitionBy("time").parquet(path)
