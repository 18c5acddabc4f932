"""The oracle itself: its comparison rules (numbers by value, float tolerance, booleans
apart, order only when asked) and its failure report (query, commit, differing rows)."""

from __future__ import annotations

from decimal import Decimal as D

import pytest
from oracle import Del, Ins, Oracle, OracleMismatch, churn, same_rows


def test_numbers_compare_by_value() -> None:
    """Decimal, int and float are equal when their values are (floats within 1e-9)."""
    assert same_rows([(D("2.50"), 3, 0.1 + 0.2)], [(2.5, D("3"), 0.3)]) == ([], [])
    assert same_rows([(D("1.333333"),)], [(1.3333333333,)]) != ([], [])


def test_booleans_are_not_integers() -> None:
    """True is not 1 and False is not 0 for the oracle."""
    extra, missing = same_rows([(1,), (0,)], [(True,), (False,)])
    assert extra and missing


def test_multisets_count_duplicates() -> None:
    """Multiset comparison: one copy is not two."""
    assert same_rows([("a",)], [("a",), ("a",)]) == ([], [("a",)])
    assert same_rows([("a",), (None,)], [(None,), ("a",)]) == ([], [])


def test_ordered_compares_positions() -> None:
    """With ordered=True the same rows in another order differ."""
    assert same_rows([(1,), (2,)], [(2,), (1,)], ordered=True) != ([], [])
    assert same_rows([(1,), (2,)], [(2,), (1,)]) == ([], [])


def test_mismatch_report_names_query_commit_and_rows() -> None:
    """A wrong answer raises OracleMismatch naming the query, the commit and the rows."""
    o = Oracle("CREATE TABLE t (a INT)")
    o.view("SELECT a FROM t", duck="SELECT a + 1 FROM t")
    with pytest.raises(OracleMismatch) as ei:
        o.commit([Ins("t", [(1,)])])
    msg = str(ei.value)
    assert "SELECT a FROM t" in msg and "commit 0" in msg and "(1,)" in msg and "(2,)" in msg


def test_deletes_remove_one_copy_in_both() -> None:
    """A Del removes one occurrence in ddflow and in DuckDB alike."""
    o = Oracle("CREATE TABLE t (a INT, s STRING)")
    o.view("SELECT a, s FROM t")
    o.commit([Ins("t", [(1, None), (1, None), (2, "x")])])
    o.commit([Del("t", [(1, None)])])
    assert o.duck_rows("SELECT count(*) FROM t") == [(2,)]


def test_churn_is_a_valid_stream() -> None:
    """churn() empties the table at one point and deletes only rows that are there."""
    o = Oracle("CREATE TABLE t (a INT)")
    o.view("SELECT count(*) FROM t")
    sizes = []
    for c in churn("t", [(1,), (2,), (3,), (4,)], [(5,), (6,)]):
        o.commit(c)
        sizes.append(len(o.tables["t"]))
    assert 0 in sizes and sizes[-1] > 0
