"""Columns at the edges: every value kept exactly, whatever the column dtypes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.core.columns import concat_columns, lex_order, make_column
from ddflow.testing.strategies import edge_numbers

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
SETTINGS = settings(max_examples=200, deadline=None)


def _exact(got: list[Any], want: list[Any]) -> None:
    """Equal values, and an int that no float holds stays an int."""
    assert got == want
    for g, w in zip(got, want, strict=True):
        if type(w) is int and abs(w) > 2**53:
            assert type(g) is int, (g, w)


# ---- columns --------------------------------------------------------------------------------


@SETTINGS
@given(st.lists(st.lists(edge_numbers(), max_size=5), min_size=1, max_size=4))
def test_concat_columns_keeps_every_value(parts: list[list[Any]]) -> None:
    """Columns made of edge numbers, concatenated, hold the same values exactly."""
    cols = [make_column(p) for p in parts]
    for c, p in zip(cols, parts, strict=True):
        _exact(c.tolist(), [int(v) if isinstance(v, bool) and c.dtype != object else v
                            for v in p])
    out = concat_columns(cols)
    _exact(out.tolist(), [v for c in cols for v in c.tolist()])


def test_concat_columns_of_one_dtype_is_plain_concatenate() -> None:
    """Parts of one dtype give numpy's concatenation (the common path)."""
    a, b = np.arange(3), np.arange(4)
    out = concat_columns([a, b])
    assert out.dtype == np.int64 and out.tolist() == [0, 1, 2, 0, 1, 2, 3]
    assert concat_columns([a, np.array([0.5])]).dtype == np.float64  # small ints: exact floats
    assert concat_columns([np.array([2**53 + 1]), np.array([0.5])]).dtype == object
    assert concat_columns([np.empty(0), np.array([2**60 + 1])]).tolist() == [2**60 + 1]


def test_make_column_keeps_ints_as_ints() -> None:
    """Ints beyond int64 (without floats) are Python ints, not floats; floats stay floats."""
    assert make_column([2**62, 2**63]).tolist() == [2**62, 2**63]
    assert [type(v) for v in make_column([2**62, 2**63]).tolist()] == [int, int]
    assert make_column([2**53 + 1, 0.5]).tolist() == [2**53 + 1, 0.5]
    assert make_column([3, 0.5]).dtype == np.float64


@pytest.mark.parametrize("n", [1, 3])
def test_lex_order_refuses_frozensets(n: int) -> None:
    """frozensets, ordered by inclusion, cannot be sorted: DataError (one row too)."""
    col = np.empty(n, dtype=object)
    col[:] = [frozenset({i}) for i in range(n)]
    with pytest.raises(dd.DataError, match="frozenset"):
        lex_order([col])
