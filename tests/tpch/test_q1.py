"""TPC-H Q1 as a dataflow, checked exactly against DuckDB at SF 0.01 under inserts and deletes."""

from __future__ import annotations

import os
import sys
import sysconfig
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import ddflow as dd
from ddflow.tpch import (
    Q1_COLUMNS,
    Q1_HEADER,
    format_q1,
    generate,
    lineitem_path,
    lineitem_q1_table,
    q1,
    q1_answer,
    q1_input_columns,
    q1_mismatches,
    q1_reference_duckdb,
)

pytest.importorskip("duckdb")

SF = 0.01
BATCH = 8192  # rows per inserted batch (one time each)
DELETE_BATCH = 5000
DELETED = 20_000  # rows [0, DELETED) are deleted, DELETE_BATCH per time


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return lineitem_q1_table(SF)


@pytest.fixture(scope="module")
def raw() -> Path:
    return lineitem_path(SF)


def _run(
    cols: tuple[np.ndarray, ...], times: np.ndarray, diffs: np.ndarray | None = None
) -> dd.Capture:
    """Feeds ``cols`` at ``times`` into q1 in one vectorized call; runs past the last time."""
    with dd.Worker() as worker:
        inp, coll = worker.new_collection()
        cap = q1(coll).capture()
        inp.insert_columns(cols, diffs=diffs, times=times)
        inp.advance_to(int(times.max()) + 1)
        inp.flush()
        worker.run()
    return cap


def test_lineitem_q1_columns_are_exact_ints_in_key_order(table: pa.Table, raw: Path) -> None:
    """lineitem_q1 holds int64 columns equal to the raw decimals, dates and flags, in key order."""
    assert table.column_names == list(Q1_COLUMNS)
    assert all(pa.types.is_int64(f.type) for f in table.schema)
    n = table.num_rows
    assert np.array_equal(table.column("row").to_numpy(), np.arange(n))
    src = pq.read_table(raw)
    order = np.lexsort((src.column("l_linenumber").to_numpy(), src.column("l_orderkey").to_numpy()))

    def scaled(name: str, k: int) -> np.ndarray:
        f = pc.cast(src.column(name), pa.float64()).to_numpy() * 10**k
        return np.rint(f).astype(np.int64)[order]  # floats are exact enough below 2**53

    assert np.array_equal(table.column("quantity").to_numpy(), scaled("l_quantity", 0))
    assert np.array_equal(table.column("extendedprice").to_numpy(), scaled("l_extendedprice", 2))
    assert np.array_equal(table.column("discount").to_numpy(), scaled("l_discount", 2))
    assert np.array_equal(table.column("tax").to_numpy(), scaled("l_tax", 2))
    days = pc.cast(src.column("l_shipdate"), pa.int32()).to_numpy()[order]
    assert np.array_equal(table.column("shipdate").to_numpy(), days)
    flags = np.array([ord(s) for s in src.column("l_returnflag").to_pylist()])[order]
    assert np.array_equal(table.column("returnflag").to_numpy(), flags)
    assert set(np.unique(table.column("linestatus").to_numpy())) == {ord("F"), ord("O")}


def test_inserts_then_deletes_match_duckdb_at_every_time(table: pa.Table, raw: Path) -> None:
    """Batched inserts, then batched deletes of the first rows: each time's answer is DuckDB's."""
    cols = q1_input_columns(table)
    n = table.num_rows
    ins_times = np.arange(n) // BATCH
    n_ins = int(ins_times[-1]) + 1
    del_times = n_ins + np.arange(DELETED) // DELETE_BATCH
    all_cols = tuple(np.concatenate([c, c[:DELETED]]) for c in cols)
    diffs = np.concatenate([np.ones(n, np.int64), -np.ones(DELETED, np.int64)])
    cap = _run(all_cols, np.concatenate([ins_times, del_times]), diffs)
    for t in range(n_ins):  # rows [0, (t+1)*BATCH) present
        got = q1_answer(cap.at(t))
        assert got == q1_reference_duckdb(raw, [(min((t + 1) * BATCH, n), n)]), t
    for t in range(n_ins, int(del_times[-1]) + 1):  # rows [0, d) deleted again
        d = (t - n_ins + 1) * DELETE_BATCH
        got = q1_answer(cap.at(t))
        assert got == q1_reference_duckdb(raw, min(d, DELETED)), t
    final = q1_answer(cap.at(int(del_times[-1])))
    assert final == q1_reference_duckdb(raw, DELETED)
    assert len(final) == 4 and sum(r[-1] for r in final) < n - DELETED


def test_one_batch_equals_single_time_per_row_batches(table: pa.Table) -> None:
    """All rows at one time give the same answer as the same rows spread over many times."""
    cols = q1_input_columns(table)
    n = table.num_rows
    one = _run(cols, np.zeros(n, np.int64))
    many = _run(cols, np.arange(n) // 1000)
    assert q1_answer(one.at(0)) == q1_answer(many.at(n // 1000))


def test_middle_ranges_match_duckdb(table: pa.Table, raw: Path) -> None:
    """Rows outside several middle ranges give DuckDB's answer with those ranges deleted."""
    ranges = [(100, 2100), (30_000, 30_001), (50_000, 50_000), (59_000, 10**9)]
    keep = np.ones(table.num_rows, bool)
    for lo, hi in ranges:
        keep[lo:hi] = False
    cols = tuple(c[keep] for c in q1_input_columns(table))
    cap = _run(cols, np.zeros(int(keep.sum()), np.int64))
    assert q1_answer(cap.at(0)) == q1_reference_duckdb(raw, ranges)


def test_deleting_everything_leaves_no_groups(table: pa.Table, raw: Path) -> None:
    """Deleting every inserted row empties the output, and DuckDB agrees (no groups)."""
    cols = q1_input_columns(table)
    n = table.num_rows
    twice = tuple(np.concatenate([c, c]) for c in cols)
    times = np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64)])
    diffs = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
    cap = _run(twice, times, diffs)
    assert len(q1_answer(cap.at(0))) == 4
    assert cap.at(1) == {}
    assert q1_answer({}) == [] == q1_reference_duckdb(raw, n)


def test_answer_format_and_known_sf001_row(table: pa.Table) -> None:
    """q1_answer gives Q1's columns with exact scales; the A/F group is TPC-H's SF 0.01 answer."""
    cap = _run(q1_input_columns(table), np.zeros(table.num_rows, np.int64))
    rows = q1_answer(cap.at(0))
    assert [r[:2] for r in rows] == [("A", "F"), ("N", "F"), ("N", "O"), ("R", "F")]
    a_f = rows[0]
    assert len(a_f) == len(Q1_HEADER)
    assert a_f[2] == Decimal("380456.00") and a_f[-1] == 14876
    assert [v.as_tuple().exponent for v in a_f[2:9]] == [-2, -2, -4, -6, -6, -6, -6]
    text = format_q1(rows)
    lines = text.splitlines()
    assert lines[0].split() == list(Q1_HEADER) and len(lines) == 2 + len(rows)
    assert len({len(line) for line in lines}) == 1


def test_answer_rejects_non_unit_diffs() -> None:
    """A record with diff other than 1 is not q1 output: q1_answer raises ValueError."""
    with pytest.raises(ValueError, match="diff"):
        q1_answer({((65, 70), (1, 1, 1, 1, 1, 1)): 2})


def test_mismatches_allow_avg_tolerance_only() -> None:
    """q1_mismatches tolerates one unit in an average's last place but no change in a sum."""
    row = (
        "A",
        "F",
        Decimal("1.00"),
        Decimal("2.00"),
        Decimal("3.0000"),
        Decimal("4.000000"),
        Decimal("1.000000"),
        Decimal("2.000000"),
        Decimal("0.050000"),
        1,
    )
    near = row[:6] + (Decimal("1.000001"),) + row[7:]
    off = row[:2] + (Decimal("1.01"),) + row[3:]
    assert q1_mismatches([row], [near]) == []
    assert q1_mismatches([row], [off]) == ["group ('A', 'F') sum_qty: got 1.00, want 1.01"]
    assert q1_mismatches([row], []) == ["group ('A', 'F'): only in got"]


def test_generate_is_cached(raw: Path) -> None:
    """A second generate() of an existing table does not rewrite it."""
    before = os.stat(raw).st_mtime_ns
    assert generate(SF) == raw.parent
    assert os.stat(raw).st_mtime_ns == before


def test_missing_tpchgen_cli_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With tpchgen-cli neither beside the interpreter nor on PATH, generate() raises
    (a RuntimeError) naming the pip command that installs the tpch extra, and writes nothing."""
    monkeypatch.setenv("DDFLOW_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setattr(sysconfig, "get_path", lambda *a, **k: str(tmp_path / "bin"))
    with pytest.raises(RuntimeError, match=r"-m pip install -e '\.\[tpch\]'"):
        generate(SF)
    assert not list((tmp_path / "tpch").glob("sf*/*.parquet"))
