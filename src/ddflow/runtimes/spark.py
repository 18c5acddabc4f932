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
from ddflow.core.errors import DataError, DDError, both_errors
from ddflow.core.time import TimeKind, time_kind_of
from ddflow.dataflow.worker import Worker
from ddflow.engine.comm import MeshError, PeerAborted, WorkerError, error_kind, worker_error
from ddflow.engine.mesh import Listener, Mesh, new_secret
from ddflow.runtimes.config import Build, JobConfig
from ddflow.runtimes.job import (
    Changes,
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
    "SparkJobError",
    "SparkResult",
    "SparkRuntime",
    "changes_between",
    "changes_frame",
    "check_session",
    "local_session",
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


def logs_from_arrow(
    table: pa.Table | None, names: list[str], kind: TimeKind, widths: Sequence[int]
) -> dict[str, Changes]:
    """A task's input rows (the union of ``_prepare``) as one ``Changes`` per input;
    ``widths[i]`` is the number of data columns of input ``i``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    logs: dict[str, Changes] = {}
    if table is None or table.num_rows == 0:
        for i, name in enumerate(names):
            cols = tuple(np.zeros(0, np.int64) for _ in range(widths[i]))
            logs[name] = Changes(
                cols[0] if len(cols) == 1 else cols,
                np.zeros((0, kind.dim), np.int64),
                np.zeros(0, np.int64),
            )
        return logs
    tag = table.column("__input").to_numpy()
    for i, name in enumerate(names):
        idx = np.flatnonzero(tag == i)
        sub = table.take(pa.array(idx)) if len(idx) != table.num_rows else table
        n = len(idx)
        if kind.dim == 1:
            times = (
                sub.column("__time").to_numpy().astype(np.int64).reshape(n, 1)
                if n
                else np.zeros((0, 1), np.int64)
            )
        else:
            col = sub.column("__time").combine_chunks() if n else None
            flat = pc.list_flatten(col).to_numpy() if n else np.zeros(0, np.int64)
            if n and len(flat) != n * kind.dim:
                raise DataError(f"input {name!r}: every time must have {kind.dim} components")
            times = np.asarray(flat, dtype=np.int64).reshape(n, kind.dim)
        diffs = sub.column("__diff").to_numpy().astype(np.int64) if n else np.zeros(0, np.int64)
        struct = sub.column(f"__d{i}").combine_chunks() if n else None
        if struct is not None:
            cols = tuple(_column_to_numpy(struct.field(j)) for j in range(struct.type.num_fields))
        else:
            cols = tuple(np.zeros(0, np.int64) for _ in range(widths[i]))
        data = cols[0] if len(cols) == 1 else cols
        logs[name] = Changes(data, times, diffs)
    return logs


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


def _own_host(ctx: Any) -> str:
    import socket

    info = ctx.getTaskInfos()[ctx.partitionId()]
    host = str(info.address).rsplit(":", 1)[0]
    try:
        addr = socket.gethostbyname(host)
        with socket.socket() as s:
            s.bind((addr, 0))
        return addr
    except OSError:
        return "127.0.0.1"


def _task(
    build: Callable[..., Any],
    names: list[str],
    widths: list[int],
    secret: bytes,
    config: JobConfig,
    job_id: str,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
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
        payload: bytes
        kind_out = _RESULT
        try:
            table = pa.Table.from_batches(got) if got else None
            if hasattr(build, "ingest"):
                logs = build.ingest(rows_by_input(table, names), kind)
            else:
                logs = logs_from_arrow(table, names, kind, widths)
            worker = Worker(comm=mesh)
            result = drive(worker, build, logs, config, job_id=job_id)
            result.stats["mesh_bytes_sent"] = mesh.bytes_sent
            if hasattr(build, "extras"):
                result.stats["extras"] = build.extras()
            payload = pickle.dumps(result, protocol=5)
        except (MeshError, ConnectionError):
            raise  # the mesh broke (a peer died): let Spark rerun the stage
        except PeerAborted:
            payload, kind_out = b"", _ABORTED
        except BaseException as e:  # noqa: BLE001 - reported to the caller, not retried
            mesh.abort(f"{type(e).__name__}: {e}")
            # the first line names ddflow's error class (or is empty), the rest is the trace
            text = f"{error_kind(e)}\n{traceback.format_exc()}"
            payload, kind_out = text.encode(), _ERROR
        finally:
            mesh.close()
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
    union, data_cols = _prepare(inputs, columns, kind)
    _check_build(build, cfg)
    names = sorted(inputs)
    widths = [len(data_cols[n]) for n in names]
    if check:
        _dry_run(build, union, names, kind, cfg.time, widths)
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
    if hasattr(build, "ingest"):
        logs = build.ingest(rows_by_input(table, names), kind)
    else:
        logs = logs_from_arrow(table, names, kind, widths)
    try:
        run_job(build, logs, time=time)
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
