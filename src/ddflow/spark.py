"""ddflow on Spark: a dataflow run by long-lived Spark barrier tasks, one worker per task.

The public names of the Spark runtime (``ddflow.runtimes.spark``, which explains how it
works): ``run_on_spark`` (DataFrames in, DataFrames out), ``spark_job`` (the merged
``JobResult`` on the driver), ``LiveJob`` (a job that stays up and takes new input while
it runs), ``SparkRuntime`` (the same as a ``Runtime``), ``local_session`` (a local-mode
session set up for ddflow), ``changes_between`` / ``write_changes`` (change DataFrames
from snapshots, and to Parquet) and their helpers; and from SQL (``ddflow.sql.spark``):
``maintain`` (SQL views kept up to date on Spark), ``LiveViews`` (the same views held in
memory by a live job between refreshes) and ``Snapshot``.

This module imports pyspark when its functions run; ``import ddflow`` never does. It is the
top layer (it may import any other): the SQL names are loaded on first use, since
``ddflow.sql`` needs sqlglot and imports the Spark runtime itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ddflow.runtimes.spark import (
    LiveJob,
    SparkJobError,
    SparkResult,
    SparkRuntime,
    changes_between,
    changes_frame,
    check_session,
    local_session,
    output_table,
    rows_by_input,
    run_on_spark,
    spark_job,
    task_slots,
    write_changes,
)

if TYPE_CHECKING:
    from ddflow.sql.spark import LiveViews, Snapshot, maintain

__all__ = [
    "LiveJob",
    "LiveViews",
    "Snapshot",
    "SparkJobError",
    "SparkResult",
    "SparkRuntime",
    "changes_between",
    "changes_frame",
    "check_session",
    "local_session",
    "maintain",
    "output_table",
    "rows_by_input",
    "run_on_spark",
    "spark_job",
    "task_slots",
    "write_changes",
]

#: names this module takes from ``ddflow.sql.spark`` when first read
_FROM_SQL = ("LiveViews", "Snapshot", "maintain")


def __getattr__(name: str) -> Any:
    if name in _FROM_SQL:
        from ddflow.sql import spark as sql_spark

        value = getattr(sql_spark, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
