"""All 22 TPC-H queries against DuckDB, after every batch of their change streams.

Each query's stream inserts its tables in batches, then RF1 inserts new orders with their
line items and RF2 deletes old ones (5% of the orders each, so retractions reach every
query that reads orders or line items). After every batch the dataflow's accumulated answer
must equal DuckDB's answer on the raw rows live at that point. The same answers must come
out whether the batches are fed one at a time or many ahead of the computation.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from ddflow.tpch.queries import QUERIES
from ddflow.tpch.run import duckdb_answer, mismatches, run_query
from ddflow.tpch.stream import Stream, make_stream
from ddflow.tpch.tables import load_tables


@pytest.fixture(scope="module")
def sf001():
    return load_tables(0.01)


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    yield c
    c.close()


def _check_every_batch(n, data, con, batch, refresh):
    stream = make_stream(data, tuple(QUERIES[n].tables), batch=batch, refresh=refresh)
    bad, checked = [], []

    def check(lo, hi, cap):
        for t in range(lo, hi):
            got = QUERIES[n].rows(cap.at(t), data)
            want = duckdb_answer(n, data, stream, t, con)
            checked.append((t, len(want)))
            m = mismatches(got, want)
            if m:
                bad.append((t, m))

    run_query(n, data, stream=stream, after_window=check)
    assert not bad, f"q{n}: answers differ from DuckDB at {len(bad)} times, first {bad[0]}"
    assert [t for t, _ in checked] == list(range(stream.rounds))
    return stream, checked


@pytest.mark.parametrize("n", sorted(QUERIES))
def test_query_matches_duckdb_after_every_batch(n, sf001, con):
    stream, checked = _check_every_batch(n, sf001, con, batch=2000, refresh=0.05)
    # The check is not vacuous: the final answer has rows, and queries over orders or line
    # items saw deletions.
    assert checked[-1][1] > 0
    if {"orders", "lineitem"} & set(QUERIES[n].tables):
        assert "rf2" in stream.phases and (stream.diff < 0).any()


@pytest.mark.parametrize("n", sorted(QUERIES))
def test_answers_do_not_depend_on_how_far_input_runs_ahead(n, sf001):
    one = run_query(n, sf001, batch=1500, refresh=0.05)
    ahead = run_query(n, sf001, batch=1500, refresh=0.05, window_rows=7000)
    everything = run_query(n, sf001, batch=1500, refresh=0.05, window_rows=10**9)
    assert one.capture.updates() == ahead.capture.updates() == everything.capture.updates()


def test_stream_inserts_then_refreshes(sf001):
    s = make_stream(sf001, ("orders", "lineitem", "customer"), batch=1000, refresh=0.01)
    assert list(s.phases) == ["load", "rf1", "rf2"]
    assert (np.diff(s.time) >= 0).all()
    for table in s.tables:
        rows, diffs, _ = s.events(table)
        n = sf001.rows(table)
        # Every row inserted exactly once; deletions only of orders and their line items.
        ins = np.bincount(rows[diffs > 0], minlength=n)
        assert (ins == 1).all()
        assert (diffs < 0).any() == (table in ("orders", "lineitem"))
    # A line item is never live without its order.
    okey = sf001.columns["orders"]["o_orderkey"]
    lkey = sf001.columns["lineitem"]["l_orderkey"]
    for t in (s.phases["load"][1] - 1, s.phases["rf1"][1] - 1, s.rounds - 1):
        live_orders = set(okey[s.present("orders", t, len(okey))].tolist())
        live_items = set(lkey[s.present("lineitem", t, len(lkey))].tolist())
        assert live_items <= live_orders
    # Batches never mix phases, and every batch but a phase's last is full.
    for lo, hi in s.phases.values():
        sizes = np.bincount(s.time[(s.time >= lo) & (s.time < hi)] - lo)
        assert (sizes[:-1] == 1000).all() and 0 < sizes[-1] <= 1000


def test_stream_rejects_bad_parameters(sf001):
    with pytest.raises(ValueError, match="batch"):
        make_stream(sf001, ("orders",), batch=0)
    with pytest.raises(ValueError, match="refresh"):
        make_stream(sf001, ("orders",), refresh=0.7)
    with pytest.raises(ValueError, match="table"):
        make_stream(sf001, ())


def test_unknown_table_and_missing_string_values(sf001):
    with pytest.raises(ValueError, match="unknown TPC-H table"):
        load_tables(0.01, ("lineitems",))
    assert sf001.code("n_name", "ATLANTIS") == -1
    assert sf001.decode("n_name", sf001.code("n_name", "FRANCE")) == "FRANCE"


@pytest.mark.slow
@pytest.mark.parametrize("n", sorted(QUERIES))
def test_query_matches_duckdb_at_sf_0_1(n, con):
    data = load_tables(0.1)
    _check_every_batch(n, data, con, batch=50_000, refresh=0.01)


def _churn_every_table(s, data, seed):
    """``s`` followed by two batches that change every table it reads: a fifth of each
    table's live rows deleted, then half of those inserted again (a changed row is a delete
    and an insert: dimension rows change their matches, as an update to a part, a supplier
    or a cost would)."""
    rng = np.random.default_rng(seed)
    last = s.rounds - 1
    tab, row, diff, time = [s.table], [s.row], [s.diff], [s.time]
    for i, t in enumerate(s.tables):
        live = np.flatnonzero(s.present(t, last, data.rows(t)))
        gone = rng.choice(live, size=max(1, len(live) // 5), replace=False)
        back = gone[: len(gone) // 2]
        for rows, d, at in ((gone, -1, last + 1), (back, 1, last + 2)):
            tab.append(np.full(len(rows), i, np.int64))
            row.append(rows.astype(np.int64))
            diff.append(np.full(len(rows), d, np.int64))
            time.append(np.full(len(rows), at, np.int64))
    order = np.argsort(np.concatenate(time), kind="stable")
    cat = [np.concatenate(x)[order] for x in (tab, row, diff, time)]
    phases = {**s.phases, "churn": (last + 1, last + 3)}
    return Stream(s.tables, *cat, s.batch, phases)


@pytest.mark.parametrize("n", sorted(QUERIES))
def test_query_matches_duckdb_when_every_table_changes(n, sf001, con):
    """Deleting and re-inserting rows of every table (dimensions too) after the stream
    keeps each answer equal to DuckDB's."""
    base = make_stream(sf001, tuple(QUERIES[n].tables), batch=4000, refresh=0.01)
    stream = _churn_every_table(base, sf001, seed=n)
    run = run_query(n, sf001, stream=stream)
    for t in range(base.rounds - 1, stream.rounds):
        got = QUERIES[n].rows(run.capture.at(t), sf001)
        m = mismatches(got, duckdb_answer(n, sf001, stream, t, con))
        assert not m, f"q{n} differs from DuckDB at time {t}: {m}"
