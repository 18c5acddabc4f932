"""TPC-H queries on the Spark runtime: the change stream read as Spark DataFrames, the
dataflow on 2 barrier tasks, the answer after every batch equal to DuckDB's and to the
in-process run's."""

from __future__ import annotations

import duckdb
import pytest

from ddflow.tpch.queries import QUERIES
from ddflow.tpch.run import duckdb_answer, mismatches, run_query, spark_build, spark_inputs
from ddflow.tpch.stream import make_stream
from ddflow.tpch.tables import load_tables


@pytest.mark.parametrize("n", [3, 13, 21])
def test_query_on_spark_matches_duckdb_and_in_process(n, spark, tmp_path):
    from ddflow.spark import spark_job

    data = load_tables(0.01)
    stream = make_stream(data, tuple(QUERIES[n].tables), batch=4000, refresh=0.05)
    inputs = spark_inputs(spark, n, data, stream, str(tmp_path))
    job = spark_job(
        spark,
        spark_build(n, data),
        inputs,
        workers=2,
        columns={t: list(c) for t, c in QUERIES[n].tables.items()},
        timeout=300,
    )
    local = run_query(n, data, stream=stream)
    assert job["output"].updates() == local.capture.updates()
    with duckdb.connect() as con:
        for t in range(stream.rounds):
            got = QUERIES[n].rows(job["output"].at(t), data)
            assert not mismatches(got, duckdb_answer(n, data, stream, t, con)), t
