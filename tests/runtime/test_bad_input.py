"""Bad input: each raises a clear error, changes nothing, and the dataflow stays usable."""

from __future__ import annotations

import pytest

import ddflow as dd


def _counting():
    w = dd.Worker()
    inp, c = w.new_collection()
    out = c.count().capture()
    return w, inp, out


def _finish(w, inp, out, expect):
    inp.advance_to(inp.time() + 1)
    w.run()
    assert out.at(inp.time()) == expect


def test_advance_backwards():
    """advance_to a time before the session's time raises TimeError and keeps the session."""
    w, inp, out = _counting()
    inp.insert("a")
    inp.advance_to(3)
    with pytest.raises(dd.TimeError, match="before this session's time"):
        inp.advance_to(2)
    _finish(w, inp, out, {("a", 1): 1})


def test_update_at_past_time():
    """update_at a past time raises TimeError and records nothing."""
    w, inp, out = _counting()
    inp.advance_to(5)
    with pytest.raises(dd.TimeError):
        inp.update_at("x", 4, 1)
    inp.update_at("y", 7, 1)
    inp.advance_to(8)
    w.run()
    assert out.at(8) == {("y", 1): 1}


def test_closed_session():
    """Use of a closed session raises SessionClosedError."""
    w, inp, out = _counting()
    inp.insert("a")
    inp.close()
    w.run()
    with pytest.raises(dd.SessionClosedError):
        inp.insert("b")
    with pytest.raises(dd.SessionClosedError):
        inp.advance_to(9)
    assert out.at(0) == {("a", 1): 1}


def test_wrong_diff_type():
    """A diff of the wrong type raises DiffTypeError before anything is buffered."""
    w, inp, out = _counting()
    with pytest.raises(dd.DiffTypeError):
        inp.update("a", "lots")
    with pytest.raises(dd.DiffTypeError):
        inp.update("a", dd.Sum(1, 1))
    inp.update("a", 2)
    _finish(w, inp, out, {("a", 2): 1})
    s_w = dd.Worker()
    s_in, s = s_w.new_collection(diff=dd.Sum)
    with pytest.raises(dd.DiffTypeError):
        s_in.update("a", 1)


def test_unorderable_and_unhashable_data():
    """Records mixing types, holding NaN, or unhashable raise DataError at insert."""
    w, inp, out = _counting()
    inp.insert(1)
    with pytest.raises(dd.DataError, match="field types"):
        inp.insert("one")
    with pytest.raises(dd.DataError, match="NaN"):
        inp.insert(float("nan"))
    with pytest.raises(dd.DataError, match="hashed"):
        inp.insert([1, 2])
    _finish(w, inp, out, {(1, 1): 1})


def test_record_shape_change():
    """Records of another tuple shape raise DataError."""
    w = dd.Worker()
    inp, c = w.new_collection()
    out = c.capture()
    inp.insert((1, 2))
    with pytest.raises(dd.DataError, match="shape"):
        inp.insert((1, 2, 3))
    inp.advance_to(1)
    w.run()
    assert out.at(0) == {(1, 2): 1}


def test_user_function_raises():
    """A raising user function surfaces as OperatorError naming the operator; nothing lost."""
    w = dd.Worker()
    inp, c = w.new_collection()
    calls = {"fail": True}

    def f(x):
        if calls["fail"] and x == 3:
            raise ValueError("bad record")
        return x * 10

    out = c.map(f, name="times_ten").capture()
    inp.insert(1)
    inp.insert(3)
    inp.advance_to(1)
    with pytest.raises(dd.OperatorError, match="times_ten") as info:
        w.run()
    assert isinstance(info.value.__cause__, ValueError)
    calls["fail"] = False
    w.run()
    assert out.at(0) == {10: 1, 30: 1}


def test_mixing_time_types():
    """Inputs with int and Product times in one worker raise TimeError."""
    w = dd.Worker()
    w.new_collection()
    with pytest.raises(dd.TimeError, match="one time type"):
        w.new_collection(time=dd.Product(0, 0))
    pw = dd.Worker()
    p_in, p = pw.new_collection(time=dd.Product(0, 0))
    with pytest.raises(dd.TimeError):
        p_in.update_at("x", 3, 1)
    with pytest.raises(dd.TimeError, match="count"):
        p.count_total()


def test_vectorized_ingestion_checks():
    """insert_columns rejects NaN, past times and bad diff arrays."""
    import numpy as np

    w, inp, out = _counting()
    inp.advance_to(2)
    with pytest.raises(dd.DataError):
        inp.insert_columns(np.array([1.0, np.nan]))
    with pytest.raises(dd.TimeError):
        inp.insert_columns(np.array([1, 2]), times=np.array([1, 2]))
    with pytest.raises(dd.DiffTypeError):
        inp.insert_columns(np.array([1, 2]), diffs=np.array([0.5, 1.0]))
    inp.insert_columns(np.array([4, 4]))
    _finish(w, inp, out, {(4, 2): 1})


def test_known_int64_columns_are_checked_like_any_batch():
    """Once a collection's shape is known, batches of int64 columns (taken without the general
    walk over the view) give the records' updates, and bad ones still raise and change
    nothing: columns of unequal length, times before the session's, a wrong shape."""
    import numpy as np

    w = dd.Worker()
    inp, c = w.new_collection()
    out = c.count().capture()
    inp.insert((1, 2))
    a, b = np.array([1, 3, 1], dtype=np.int64), np.array([2, 4, 2], dtype=np.int64)
    inp.insert_columns((a, b), diffs=np.array([1, 1, -1]))
    inp.insert_columns((a[:0], b[:0]))  # (no rows: nothing)
    inp.advance_to(3)
    with pytest.raises(dd.DataError):
        inp.insert_columns((a, b[:2]))
    with pytest.raises(dd.TimeError):
        inp.insert_columns((a, b), times=np.array([3, 2, 5]))
    with pytest.raises(dd.DataError):
        inp.insert_columns((a, b, a))
    with pytest.raises(dd.DataError):
        inp.insert_columns(a)
    inp.insert_columns((a, b), times=np.array([3, 4, 4]))
    inp.advance_to(5)
    w.run()
    assert out.at(0) == {((1, 2), 1): 1, ((3, 4), 1): 1}
    assert out.at(4) == {((1, 2), 3): 1, ((3, 4), 2): 1}
