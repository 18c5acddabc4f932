"""Running TPC-H queries over change streams, and checking them against DuckDB.

Why it exists: the tests and the benchmark suite both feed a query's stream through a
worker and (in the tests) compare the accumulated answer after every batch with DuckDB's
answer on the rows live at that point.

``run_query`` prepares each window's input columns before the clock starts (reading the
change log is not the dataflow's work), then times feeding and computing. A *window* is
how far input may run ahead of the computation: with ``window_rows=0`` every batch is fed,
then the worker steps until the output has caught up with it, before the next batch (each
batch's answer is complete before the next arrives); with ``window_rows=W`` batches are fed
about ``W`` rows at a time, each batch still at its own time, and the worker catches up
after each window. Either way the output holds the answer at every batch's time.

``duckdb_answer`` runs the query's SQL on the raw ``tpchgen-cli`` tables restricted to the
rows live after a batch; ``mismatches`` compares two answers as multisets of rows, numbers
within a relative ``1e-9`` (DuckDB divides in floating point for averages and ratios;
sums of decimals are exact on both sides) and everything else exactly.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

import ddflow as dd
from ddflow.tpch.queries import QUERIES, Query
from ddflow.tpch.stream import Stream, make_stream
from ddflow.tpch.tables import Tables

__all__ = ["QueryRun", "duckdb_answer", "mismatches", "run_query", "spark_build", "spark_inputs"]

Row = tuple[Any, ...]


@dataclass
class QueryRun:
    """What ``run_query`` measured: ``seconds`` (feeding and computing, the whole stream),
    ``window_seconds`` per window, the ``capture`` of the output and the stream."""

    query: Query
    stream: Stream
    seconds: float
    window_seconds: list[float]
    capture: Any
    events: int
    checked: list[int] = field(default_factory=list)

    def answer(self, data: Tables, t: int) -> list[Row]:
        """The query's rows after batch ``t``."""
        return self.query.rows(self.capture.at(t), data)


def run_query(
    query: Query | int,
    data: Tables,
    *,
    batch: int = 10_000,
    window_rows: int = 0,
    refresh: float = 0.001,
    stream: Stream | None = None,
    after_window: Callable[[int, int, Any], None] | None = None,
) -> QueryRun:
    """Feeds ``query``'s change stream through one in-process worker (see the module doc).

    ``after_window(lo, hi, capture)`` is called (outside the timed part) after the batches
    ``[lo, hi)`` are complete."""
    q = QUERIES[query] if isinstance(query, int) else query
    s = stream or make_stream(data, tuple(q.tables), batch=batch, refresh=refresh)
    cols = {t: tuple(data.columns[t][c] for c in names) for t, names in q.tables.items()}
    windows = list(s.windows(window_rows)) if window_rows else [(i, i + 1) for i in range(s.rounds)]
    # The change log, read before the clock starts: per window, per table, the columns,
    # diffs and times of its events.
    feed = []
    for lo, hi in windows:
        parts = {}
        for t in q.tables:
            rows, diffs, times = s.events(t, lo, hi)
            if len(rows):
                parts[t] = (tuple(c[rows] for c in cols[t]), diffs, times)
        feed.append((lo, hi, parts))
    per_window = []
    with dd.Worker() as worker:
        sessions, colls = {}, {}
        for t in q.tables:
            sessions[t], colls[t] = worker.new_collection()
        out = q.build(colls, data)
        capture, probe = out.capture(), out.probe()
        total = 0.0
        for lo, hi, parts in feed:
            t0 = time.perf_counter()
            for t, (c, diffs, times) in parts.items():
                sessions[t].insert_columns(c, diffs=diffs, times=times)
            for sess in sessions.values():
                sess.advance_to(hi)
            worker.step_while(lambda h=hi: bool(probe.less_than(h)))  # type: ignore[misc]
            dt = time.perf_counter() - t0
            total += dt
            per_window.append(dt)
            if after_window is not None:
                after_window(lo, hi, capture)
    return QueryRun(q, s, total, per_window, capture, len(s))


# --- DuckDB --------------------------------------------------------------------------------


def duckdb_answer(
    query: Query | int,
    data: Tables,
    stream: Stream | None = None,
    t: int | None = None,
    con: Any = None,
) -> list[Row]:
    """DuckDB's rows for ``query`` on the raw tables, restricted to the rows live after
    batch ``t`` of ``stream`` (all rows when ``stream`` is None)."""
    import duckdb
    import pyarrow.parquet as pq

    q = QUERIES[query] if isinstance(query, int) else query
    own = con is None
    con = con or duckdb.connect()
    try:
        for table in q.tables:
            raw = _raw(data, table, pq)
            if stream is not None and t is not None:
                mask = stream.present(table, t, raw.num_rows)
                raw = raw.filter(mask)
            con.register(table, raw)
        return [tuple(r) for r in con.execute(q.sql(data)).fetchall()]
    finally:
        for table in q.tables:
            with contextlib.suppress(Exception):  # best effort clean-up
                con.unregister(table)
        if own:
            con.close()


_RAW_CACHE: dict[tuple[str, str], Any] = {}


def _raw(data: Tables, table: str, pq: Any) -> Any:
    key = (str(data.raw[table]), table)
    if key not in _RAW_CACHE:
        import pyarrow as pa

        t = pq.read_table(data.raw[table])
        # string_view columns as plain strings (every DuckDB version reads those).
        fields = [
            pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else f
            for f in t.schema
        ]
        _RAW_CACHE[key] = t.cast(pa.schema(fields))
    return _RAW_CACHE[key]


def _norm(v: Any) -> Any:
    if isinstance(v, bool) or v is None or isinstance(v, (str, _dt.date)):
        return v
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (Decimal, Fraction, float, np.floating)):
        return float(v)
    return v


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def mismatches(got: list[Row], want: list[Row]) -> list[str]:
    """Differences between two answers (multisets of rows); empty when they agree."""
    g = sorted((tuple(_norm(v) for v in r) for r in got), key=_sort_key)
    w = sorted((tuple(_norm(v) for v in r) for r in want), key=_sort_key)
    out = []
    if len(g) != len(w):
        out.append(f"{len(g)} rows, want {len(w)}")
    for i, (a, b) in enumerate(zip(g, w, strict=False)):
        if len(a) != len(b) or not all(_same(x, y) for x, y in zip(a, b, strict=True)):
            out.append(f"row {i}: got {a!r}, want {b!r}")
        if len(out) > 5:
            break
    return out


def _sort_key(r: Row) -> tuple[Any, ...]:
    # Rows sorted with floats rounded, so a last-digit difference does not reorder them.
    return tuple(
        (0, "")
        if v is None
        else (1, round(v, 6))
        if isinstance(v, float)
        else (2, v)
        if isinstance(v, int)
        else (3, str(v))
        for v in r
    )


# --- Spark ---------------------------------------------------------------------------------


def spark_inputs(
    spark: Any, query: Query | int, data: Tables, stream: Stream, folder: str
) -> dict[str, Any]:
    """``query``'s change stream as Spark DataFrames (the table's columns, ``time``,
    ``diff``), written as Parquet under ``folder`` and read back with ``spark``: the inputs
    of ``ddflow.spark.run_on_spark`` / ``spark_job`` for ``spark_build(query, data)``."""
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    q = QUERIES[query] if isinstance(query, int) else query
    out = {}
    for table, names in q.tables.items():
        rows, diffs, times = stream.events(table)
        cols = {c: data.columns[table][c][rows] for c in names}
        cols.update(time=times, diff=diffs)
        path = Path(folder) / f"{q.name}_{table}.parquet"
        pq.write_table(pa.table(cols), path)
        out[table] = spark.read.parquet(str(path))
    return out


def spark_build(query: Query | int, data: Tables) -> Callable[[dict[str, Any]], Any]:
    """A ``build`` function for ``run_on_spark``: the query's dataflow over its inputs. It
    carries only the string dictionaries (not the columns) to the Spark tasks."""
    q = QUERIES[query] if isinstance(query, int) else query
    light = Tables(data.sf, {}, data.dicts, data.raw)

    def build(inputs: dict[str, Any]) -> Any:
        return q.build(inputs, light)

    return build
