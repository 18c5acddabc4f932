"""Every table source form ``maintain`` takes gives the views Spark SQL gives: change rows,
a DataFrame in the shape of Delta's change data feed, ``Snapshot(df)`` and a Delta table
path, each refreshed three times under one checkpoint on 2 workers."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from spark_oracle import Stream, arrow_rows, check_views, spark_answer
from typed_data import SCHEMAS, VIEWS, refreshes, t_row, u_row

from ddflow.core.errors import DDError
from ddflow.sql.spark import Snapshot, maintain

deltalake = pytest.importorskip("deltalake")

#: A few views over both tables: grouped aggregates, a join, a top-k and every column.
FORM_VIEWS = {
    "agg": "SELECT g, count(*) AS n, sum(d) AS sd, avg(d) AS ad, max(ts) AS mts, "
    "min(dt) AS mdt, sum(y) AS sy FROM t GROUP BY g",
    "joined": VIEWS["joined"],
    "top": VIEWS["top"],
    "star": VIEWS["star"],
}


@pytest.mark.parametrize("form", ["rows", "cdf", "snapshot"])
def test_each_dataframe_form_equals_spark_sql(spark: Any, tmp_path: Path, form: str) -> None:
    """Three refreshes given as change rows, as a Delta-shaped change feed (updates as
    update_preimage/update_postimage, _commit_version the time) or as whole snapshots:
    after each, every view equals Spark SQL and its changes are the difference."""
    stream = Stream(
        spark,
        SCHEMAS,
        FORM_VIEWS,
        workers=2,
        checkpoint=str(tmp_path / "ck"),
        form=form,
        ordered=("top",),
    )
    for changes in refreshes(seed=11, n=3, load=30):
        stream.refresh(changes)


def test_snapshot_without_checkpoint_is_the_whole_table(spark: Any) -> None:
    """Without a checkpoint a snapshot is the table's whole contents: the views equal Spark
    SQL and their changes insert every row."""
    rng = random.Random(3)
    rows = [t_row(rng, k) for k in range(25)]
    tables = {
        "t": arrow_rows(SCHEMAS["t"], rows),
        "u": arrow_rows(SCHEMAS["u"], [u_row(rng, k) for k in (0, 1, 2, None)]),
    }
    res = maintain(
        spark,
        FORM_VIEWS,
        {n: Snapshot(spark.createDataFrame(t)) for n, t in tables.items()},
        workers=2,
    )
    check_views(spark, res, FORM_VIEWS, tables, ordered=("top",))


def test_unknown_change_type_is_refused(spark: Any) -> None:
    """A change feed row whose _change_type is none of Delta's four is refused, naming the
    table."""
    df = spark.createDataFrame(
        pa.table(
            {
                "k": pa.array([1, 2], pa.int64()),
                "_change_type": ["insert", "upsert"],
                "_commit_version": pa.array([0, 0], pa.int64()),
            }
        )
    )
    with pytest.raises(DDError, match="'t'.*_change_type"):
        maintain(spark, {"v": "SELECT count(*) AS n FROM t"}, {"t": df}, workers=1)


# -- a Delta table path ------------------------------------------------------------------


def _delta_now(path: str, schema: pa.Schema) -> pa.Table:
    """The Delta table's current contents, as the schema types them."""
    t = pa.table(deltalake.DeltaTable(path).to_pyarrow_table())
    return pa.Table.from_arrays(
        [t.column(n).cast(f.type) for n, f in zip(schema.names, schema, strict=True)],
        names=schema.names,
    )


def _delta_refresh(paths: dict[str, str], rng: random.Random, live: list[int], step: int) -> None:
    """One refresh of the Delta tables: ``t`` gets an append, a delete and an update (three
    versions), ``u`` one update (so its versions lag behind ``t``'s)."""
    from deltalake import DeltaTable, write_deltalake

    new = [t_row(rng, 1000 * (step + 1) + j) for j in range(3)]
    write_deltalake(paths["t"], arrow_rows(SCHEMAS["t"], new), mode="append")
    live += [r[0] for r in new]
    gone = rng.sample(live, 2)
    for k in gone:
        live.remove(k)
    DeltaTable(paths["t"]).delete(f"k IN ({gone[0]}, {gone[1]})")
    changed = rng.sample(live, 3)
    DeltaTable(paths["t"]).update(
        predicate=f"k IN ({', '.join(map(str, changed))})",
        updates={
            "g": f"'w{step}'",
            "d": f"CAST('{step}123.45' AS DECIMAL(12,2))",
            "ts": f"CAST('2024-01-0{step + 1} 10:00:00.123456' AS TIMESTAMP)",
            "i": "CAST(NULL AS INT)" if step % 2 else "CAST(3 AS INT)",
            "y": "CAST(127 AS TINYINT)",
        },
    )
    DeltaTable(paths["u"]).update(
        predicate=f"k2 = {step % 3}", updates={"name": f"'renamed{step}'"}
    )


def test_delta_table_path_version_after_version(spark: Any, tmp_path: Path) -> None:
    """Two Delta tables (change data feed on) as paths, three refreshes under a
    checkpoint, each after an append, a delete and an update of ``t`` and an update of
    ``u`` (whose versions lag behind ``t``'s): the views equal Spark SQL over the tables'
    current contents, and a call with no new version changes nothing."""
    from deltalake import write_deltalake

    rng = random.Random(5)
    load = [c.new for c in refreshes(seed=5, n=1, load=30)[0]["t"]]
    paths = {"t": str(tmp_path / "t"), "u": str(tmp_path / "u")}
    cdf = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(paths["t"], arrow_rows(SCHEMAS["t"], load), configuration=cdf)
    write_deltalake(
        paths["u"],
        arrow_rows(SCHEMAS["u"], [u_row(rng, k) for k in (0, 1, 2, 3, 5, None)]),
        configuration=cdf,
    )
    live = [r[0] for r in load if r is not None]
    ck = str(tmp_path / "ck")
    before: dict[str, Any] = {}
    for step in range(3):
        if step:
            _delta_refresh(paths, rng, live, step)
        res = maintain(spark, FORM_VIEWS, paths, workers=2, checkpoint=ck)
        now = {n: _delta_now(p, SCHEMAS[n]) for n, p in paths.items()}
        before = check_views(
            spark,
            res,
            FORM_VIEWS,
            now,
            ordered=("top",),
            before=before,
            label=f"delta refresh {step}: ",
        )
    again = maintain(spark, FORM_VIEWS, paths, workers=2, checkpoint=ck)
    check_views(
        spark, again, FORM_VIEWS, now, ordered=("top",), before=before, label="no new version: "
    )
    assert all(again[v].changes.count() == 0 for v in FORM_VIEWS)


def test_delta_change_feed_read_by_deltalake_is_a_cdf_dataframe(spark: Any, tmp_path: Path) -> None:
    """The change feed deltalake reads from a Delta table, handed over as a Spark DataFrame
    (``_commit_timestamp`` included), is a valid source: the view equals Spark SQL."""
    from deltalake import DeltaTable, write_deltalake

    path = str(tmp_path / "t")
    rows = [(k, f"g{k % 3}", Decimal(k) / 4, dt.date(2024, 1, 1 + k % 5)) for k in range(12)]
    schema = pa.schema(
        [("k", pa.int64()), ("g", pa.string()), ("d", pa.decimal128(10, 2)), ("day", pa.date32())]
    )
    write_deltalake(
        path, arrow_rows(schema, rows), configuration={"delta.enableChangeDataFeed": "true"}
    )
    DeltaTable(path).delete("k < 3")
    DeltaTable(path).update(predicate="k = 5", updates={"g": "'g9'"})
    feed = pa.table(DeltaTable(path).load_cdf(starting_version=0).read_all())
    feed = pa.Table.from_arrays(
        [
            c.cast(pa.string())
            if pa.types.is_string_view(c.type)
            else c.cast(pa.int64())
            if pa.types.is_uint64(c.type)
            else c
            for c in feed.columns
        ],
        names=feed.column_names,
    )
    views = {"v": "SELECT g, count(*) AS n, sum(d) AS s, max(day) AS m FROM t GROUP BY g"}
    res = maintain(spark, views, {"t": spark.createDataFrame(feed)}, workers=2)
    check_views(spark, res, views, {"t": _delta_now(path, schema)})


def test_change_rows_may_omit_time_and_diff(spark: Any) -> None:
    """A DataFrame of plain rows (no time, no diff) is a load at time 0: the view is Spark
    SQL's answer over those rows."""
    rng = random.Random(2)
    t = arrow_rows(SCHEMAS["t"], [t_row(rng, k) for k in range(20)])
    views = {"v": FORM_VIEWS["agg"]}
    res = maintain(spark, views, {"t": spark.createDataFrame(t)}, workers=1)
    want, _ = spark_answer(spark, views["v"], {"t": t})
    check_views(spark, res, views, {"t": t})
    assert len(want) == len(res["v"].rows())
