"""Hostile and broken input, as a state machine: random sequences of valid and invalid calls
on one ``InputSession`` of a ``Worker``, stepped at random points.

After every rule:

* valid calls lead to the oracle's answer: the expected collections are kept here with plain
  Python dicts (no ddflow code), and every captured output (the input collection itself,
  ``count_total`` over a key, ``count`` over whole records) equals the oracle at every time
  the dataflow has completed;
* invalid calls raise the ddflow error for what was wrong (a ``DDError`` subclass; a bare
  ``TypeError`` / ``IndexError`` / numpy error from deep inside is a defect) and change
  nothing: the session's time, whether it is closed, how many updates it buffers, and (via
  the outputs, which later valid calls keep comparing) what it will deliver.

A collection learns its record shape (tuple shape and field types) from its first accepted
record or non-empty batch; the machine picks one of five schemas and only ever feeds records
of it, so a shape learned from a rejected call shows as a rejected valid call.

Two schemas hold edge values: numbers near int64's ends, around 2**53, beyond int64, floats
equal to ints and bools mixed in one field (``edge``), and the same nested in tuples
(``nested``, ``((number, small int), number)``); with them, diffs are drawn near int64's
ends so that sums and products leave int64. Equal numbers are one record (``1 == 1.0 ==
True``), as in the dicts of the oracle. Keyed schemas (``pair``, ``nested``) also capture
``distinct``, ``min_total``, ``max_total`` and the collection joined with itself (diffs
multiply).
"""

from __future__ import annotations

import decimal
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

import ddflow as dd
from ddflow.testing.strategies import edge_diffs, edge_numbers

SCHEMAS = ("int", "pair", "str", "edge", "nested")
EDGE_SCHEMAS = ("edge", "nested")
KEYED = ("pair", "nested")
STRS = ("a", "b", "c", "", "zé")
BIG = 2**63  # one past the largest int64
#: a few edge numbers for the huge batch (equal ones of different types among them)
EDGE_POOL = (2**64, 2.0**64, 2**53 + 1, 2.0**53, True, 1, -(2**63))

int_key = st.integers(-4, 4)
records_of = {
    "int": int_key,
    "pair": st.tuples(st.integers(-3, 3), st.integers(-2, 2)),
    "str": st.sampled_from(STRS),
    "edge": edge_numbers(),
    "nested": st.tuples(st.tuples(edge_numbers(), st.integers(0, 1)), edge_numbers()),
}
diffs = st.integers(-3, 3) | st.sampled_from([np.int64(2), np.int32(-1)])

# -- values that are never valid ---------------------------------------------------------------
BAD_DIFFS = [
    "1",
    1.0,
    1.5,
    float("nan"),
    True,
    False,
    None,
    [1],
    (1,),
    np.float64(1.0),
    np.bool_(True),
    BIG,
    -BIG - 1,
    np.uint64(2**64 - 1),
    dd.Sum(1, 1),
    decimal.Decimal(1),
    1j,
]
BAD_TIMES = ["1", 1.0, 2.5, True, None, [1], (1,), dd.Product(0, 0), BIG, 2**70, np.float64(3)]
# records that no collection accepts: NaN, unhashable values, frozensets (not totally
# ordered), or several of these
ALWAYS_BAD_RECORDS = [
    float("nan"),
    np.float64("nan"),
    np.float32("nan"),
    decimal.Decimal("NaN"),
    [1, 2],
    {"a": 1},
    {1, 2},
    np.array([1, 2]),
    (1, [2]),
    ([1], 2),
    (float("nan"), 1),
    (1, float("nan")),
    ((1, float("nan")),),
    frozenset({1}),
    (frozenset(), 1),
    ((1, frozenset({2})), 3),
]


def _number_column(values: list, typed: bool) -> np.ndarray:
    """Numbers as a column: typed (int64 or float64) when ``typed`` and numpy holds them
    exactly, else an object column of the Python values."""
    if typed and values:
        if all(type(v) is int and -BIG <= v < BIG for v in values):
            return np.array(values, dtype=np.int64)
        if all(type(v) is float for v in values):
            return np.array(values, dtype=np.float64)
    return _obj(values)


def _columns(schema: str, records: list, unicode: bool = False):
    """The columns of ``records`` (in the collection's shape); ``unicode`` picks '<U' string
    columns and typed number columns where they hold the values."""
    if schema == "int":
        return np.array(records, dtype=np.int64)
    if schema == "str":
        if unicode and records:
            return np.array(records)  # a '<U' array: stored as Python strings
        return np.array(records, dtype=object)
    if schema == "edge":
        return _number_column(records, unicode)
    if schema == "nested":
        return (
            (
                _number_column([r[0][0] for r in records], unicode),
                np.array([r[0][1] for r in records], dtype=np.int64),
            ),
            _number_column([r[1] for r in records], unicode),
        )
    keys = np.array([r[0] for r in records], dtype=np.int64)
    vals = np.array([r[1] for r in records], dtype=np.int64)
    return (keys, vals)


def _obj(values: list) -> np.ndarray:
    a = np.empty(len(values), dtype=object)
    a[:] = values
    return a


def _wrong_shape_batches(schema: str, n: int) -> list:
    """Batches of ``n`` rows whose tuple shape is not the schema's."""
    i = np.arange(n, dtype=np.int64)
    if schema == "pair":
        return [i, (i, i, i), ((i,), i), (i, (i, i)), ((i, i),)]
    if schema == "nested":
        return [i, (i, i), (i, (i, i)), ((i, i, i), i), ((i,), i), (i, i, i)]
    return [(i, i), (i,), ((i, i), i)]


def _wrong_kind_batches(schema: str, n: int) -> list:
    """Batches of ``n >= 1`` rows in the schema's shape whose field types differ."""
    s = _obj(["a"] * n)
    u = np.array(["a"] * n)
    i = np.arange(n, dtype=np.int64)
    f = np.arange(n, dtype=np.float64) + 0.5
    nones = _obj([None] * n)
    if schema in ("int", "edge"):
        return [s, u, nones, _obj([b"a"] * n)]
    if schema == "str":
        return [i, f, nones, _obj(list(range(n)))]
    if schema == "nested":
        return [
            ((s, i), i),
            ((i, u), i),
            ((i, i), nones),
            ((i, i), _obj([2**64] * (n - 1) + ["x"])),
        ]
    return [(s, i), (i, u), (nones, i), (i, nones)]


def _always_bad_batches(n: int) -> list:
    """Batches (``n >= 2`` rows) no collection accepts, whatever its shape."""
    i = np.arange(n, dtype=np.int64)
    f = np.arange(n, dtype=np.float64)
    f[-1] = np.nan
    return [
        f,  # NaN in a float column
        (f, i),  # NaN in a key column of a tuple
        (i, f),
        _obj([1.0] * (n - 1) + [float("nan")]),  # NaN as a Python float in an object column
        _obj(["a"] * (n - 1) + [None]),  # None mixed into strings
        _obj([None] * (n - 1) + [1]),  # None mixed with numbers
        _obj([[1]] * n),  # unhashable lists in an object column
        [[1, 2]] * n,  # a list of lists
        _obj([(1, 2)] * n),  # tuples hidden in one object column
        (i, i[:-1]),  # columns of different lengths
        np.zeros((n, 2), dtype=np.int64),  # a 2-d array
        5,
        None,
        "abc",
        np.int64(3),
        (),
        {"a": i},  # no column at all
    ]


def _same_shape(a, b) -> bool:
    """Whether two batches (columns, or tuples of them) have the same tuple shape."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same_shape(x, y) for x, y in zip(a, b, strict=True))
    return not isinstance(a, tuple) and not isinstance(b, tuple)


def _accumulate(by_time: dict[int, Counter], t: int) -> dict:
    acc: Counter = Counter()
    for s, c in by_time.items():
        if s <= t:
            acc.update(c)
    return {r: d for r, d in acc.items() if d != 0}


def _key(schema: str, r):
    return r[0] if schema in KEYED else r


def _extreme(acc: dict, pick) -> dict:
    """``(key, least / greatest value with a non-zero count)`` of ``(key, value)`` records."""
    per_key: dict = {}
    for (k, v), _d in acc.items():
        per_key.setdefault(k, []).append(v)
    return {(k, pick(vs)): 1 for k, vs in per_key.items()}


def _self_join(acc: dict) -> dict:
    """The ``(key, value)`` records joined with themselves: ``(k, (v, w))``, diffs multiply."""
    by_key: dict = {}
    for (k, v), d in acc.items():
        by_key.setdefault(k, []).append((v, d))
    out: Counter = Counter()
    for k, vs in by_key.items():
        for v, d in vs:
            for w, e in vs:
                out[(k, (v, w))] += d * e
    return {r: d for r, d in out.items() if d != 0}


class HostileInput(RuleBasedStateMachine):
    """One input session, its collection's captured outputs, and a dict oracle."""

    @initialize(schema=st.sampled_from(SCHEMAS))
    def build(self, schema: str) -> None:
        self.schema = schema
        self.worker = dd.Worker()
        self.inp, coll = self.worker.new_collection()
        keys = coll.map(lambda r: r[0], vectorized=True) if schema in KEYED else coll
        self.outs = {
            "input": coll.capture(),
            "count_total": keys.count_total().capture(),
            "count": coll.count().capture(),
            "distinct": coll.distinct().capture(),
        }
        if schema in KEYED:
            self.outs["min_total"] = coll.min_total().capture()
            self.outs["max_total"] = coll.max_total().capture()
            self.outs["join"] = coll.join(coll).capture()
        # the oracle
        self.time = 0
        self.closed = False
        self.learned = False  # has the collection learned its record shape?
        self.pending = 0  # updates buffered in the session (not yet flushed)
        self.by_time: dict[int, Counter] = {}
        self.checked = 0  # times below this were compared once they completed
        self.huge_done = False

    # -- oracle bookkeeping --------------------------------------------------------------------
    def _add(self, record, t: int, diff: int) -> None:
        self.by_time.setdefault(t, Counter())[record] += int(diff)

    def _add_rows(self, records: list, times: list[int], ds: list[int]) -> None:
        for r, t, d in zip(records, times, ds, strict=True):
            self._add(r, t, d)
        self.pending += len(records)
        if records:
            self.learned = True

    def _expected(self, name: str, t: int) -> dict:
        acc = _accumulate(self.by_time, t)
        if name == "input":
            return acc
        if name == "count":
            return {(r, d): 1 for r, d in acc.items()}
        if name == "distinct":
            return {r: 1 for r in acc}
        if name in ("min_total", "max_total"):
            return _extreme(acc, min if name == "min_total" else max)
        if name == "join":
            return _self_join(acc)
        per_key: Counter = Counter()
        for r, d in acc.items():
            per_key[_key(self.schema, r)] += d
        return {(k, d): 1 for k, d in per_key.items() if d != 0}

    def _rejected(self, error: type[dd.DDError], call, *args, **kw) -> None:
        """``call`` must raise ``error`` (a ddflow error); the invariants then check that it
        changed nothing."""
        with pytest.raises(error) as info:
            call(*args, **kw)
        assert isinstance(info.value, dd.DDError)
        assert len(str(info.value)) > 15, f"unclear error message: {info.value!r}"

    def _record(self, data):
        return data.draw(records_of[self.schema])

    def _diff(self, data, diff):
        """``diff``, or for the edge schemas a diff near int64's ends (sums leave int64)."""
        if self.schema in EDGE_SCHEMAS:
            return data.draw(edge_diffs())
        return diff

    # -- valid calls ---------------------------------------------------------------------------
    @precondition(lambda self: not self.closed)
    @rule(data=st.data(), diff=diffs)
    def update(self, data, diff) -> None:
        r = self._record(data)
        diff = self._diff(data, diff)
        self.inp.update(r, diff)
        self._add_rows([r], [self.time], [diff])

    @precondition(lambda self: not self.closed)
    @rule(data=st.data(), remove=st.booleans())
    def insert_or_remove(self, data, remove: bool) -> None:
        r = self._record(data)
        (self.inp.remove if remove else self.inp.insert)(r)
        self._add_rows([r], [self.time], [-1 if remove else 1])

    @precondition(lambda self: not self.closed)
    @rule(data=st.data(), copies=st.integers(1, 30), interleave=st.booleans())
    def cancelling(self, data, copies: int, interleave: bool) -> None:
        """The same record inserted many times and removed as often (+1/-1 pairs)."""
        r = self._record(data)
        if interleave:
            for _ in range(copies):
                self.inp.update(r, 1)
                self.inp.update(r, -1)
        else:
            for _ in range(copies):
                self.inp.insert(r)
            for _ in range(copies):
                self.inp.remove(r)
        self._add_rows([r] * (2 * copies), [self.time] * (2 * copies), [1, -1] * copies)

    @precondition(lambda self: not self.closed)
    @rule(data=st.data(), dt=st.integers(0, 3), diff=diffs, np_time=st.booleans())
    def update_at(self, data, dt: int, diff, np_time: bool) -> None:
        r = self._record(data)
        diff = self._diff(data, diff)
        t = self.time + dt
        self.inp.update_at(r, np.int64(t) if np_time else t, diff)
        self._add_rows([r], [t], [diff])

    @precondition(lambda self: not self.closed)
    @rule(
        data=st.data(),
        n=st.integers(0, 12),
        with_diffs=st.booleans(),
        with_times=st.booleans(),
        unicode=st.booleans(),
        as_lists=st.booleans(),
    )
    def insert_columns(
        self, data, n: int, with_diffs: bool, with_times: bool, unicode: bool, as_lists: bool
    ) -> None:
        records = [self._record(data) for _ in range(n)]
        each = edge_diffs() if self.schema in EDGE_SCHEMAS else st.integers(-3, 3)
        ds = data.draw(st.lists(each, min_size=n, max_size=n)) if with_diffs else [1] * n
        ts = (
            [
                self.time + dt
                for dt in data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
            ]
            if with_times
            else [self.time] * n
        )
        kw = {}
        if with_diffs:
            kw["diffs"] = ds if as_lists else np.array(ds, dtype=np.int64)
        if with_times:
            kw["times"] = ts if as_lists else np.array(ts, dtype=np.int64)
        self.inp.insert_columns(_columns(self.schema, records, unicode), **kw)
        self._add_rows(records, ts, ds)

    @precondition(lambda self: not self.closed)
    @rule(which=st.integers(0, 100), dtype=st.sampled_from([np.int64, np.float64, object]))
    def empty_batch(self, which: int, dtype) -> None:
        """A batch of zero rows changes nothing. Before the collection knows its shape any
        shape is fine (and teaches it nothing); after, only its own shape."""
        e = np.empty(0, dtype=dtype)
        shapes = [e, (e, e), (e, e, e), ((e,), e), (e, (e, e))]
        batch = shapes[which % len(shapes)]
        fits = {"int": e, "str": e, "edge": e, "pair": (e, e), "nested": ((e, e), e)}[self.schema]
        if self.learned and not _same_shape(batch, fits):
            self._rejected(dd.DataError, self.inp.insert_columns, batch)
            return
        self.inp.insert_columns(
            batch,
            diffs=[] if which % 2 else None,
            times=np.empty(0, dtype=np.int64) if which % 3 else None,
        )

    @precondition(lambda self: not self.closed and not self.huge_done)
    @rule(seed=st.integers(0, 2**32 - 1), same=st.booleans())
    def huge_batch(self, seed: int, same: bool) -> None:
        """10^5 rows through insert_columns (few distinct records, so much cancels)."""
        self.huge_done = True
        n = 100_000
        rng = np.random.default_rng(seed)
        idx = np.zeros(n, dtype=np.int64) if same else rng.integers(0, 5, n)
        ds = rng.choice(np.array([-1, 1, 2], dtype=np.int64), n)
        ts = self.time + rng.integers(0, 3, n)
        pool = _obj(list(EDGE_POOL))
        if self.schema == "int":
            cols = idx - 2
        elif self.schema == "str":
            cols = np.array(STRS, dtype=object)[idx]
        elif self.schema == "edge":
            cols = pool[idx]
        elif self.schema == "nested":
            cols = ((pool[idx], idx % 2), pool[(idx + 1) % 5])
        else:
            cols = (idx - 2, idx % 2)
        self.inp.insert_columns(cols, diffs=ds, times=ts)
        if self.schema == "pair":
            records = list(zip(cols[0].tolist(), cols[1].tolist(), strict=True))
        elif self.schema == "nested":
            records = list(
                zip(
                    zip(cols[0][0].tolist(), cols[0][1].tolist(), strict=True),
                    cols[1].tolist(),
                    strict=True,
                )
            )
        else:
            records = cols.tolist()
        self._add_rows(records, ts.tolist(), ds.tolist())

    @precondition(lambda self: not self.closed)
    @rule()
    def flush(self) -> None:
        self.inp.flush()
        self.pending = 0

    @precondition(lambda self: not self.closed)
    @rule(dt=st.integers(0, 3), np_time=st.booleans())
    def advance_to(self, dt: int, np_time: bool) -> None:
        t = self.time + dt
        self.inp.advance_to(np.int64(t) if np_time else t)
        self.time = t
        self.pending = 0

    @rule(roll=st.integers(0, 7))
    def close(self, roll: int) -> None:
        """Close the session (one time in eight; closing again is allowed)."""
        if roll == 0 or self.closed:
            self.inp.close()
            self.closed = True
            self.pending = 0

    @rule()
    def step(self) -> None:
        self.worker.step()

    @rule()
    def run(self) -> None:
        self.worker.run()

    # -- invalid calls -------------------------------------------------------------------------
    @precondition(lambda self: not self.closed)
    @rule(back=st.integers(1, 5))
    def advance_backwards(self, back: int) -> None:
        self._rejected(dd.TimeError, self.inp.advance_to, self.time - back)

    @precondition(lambda self: not self.closed)
    @rule(t=st.sampled_from(BAD_TIMES))
    def advance_to_bad_time(self, t) -> None:
        self._rejected(dd.TimeError, self.inp.advance_to, t)

    @precondition(lambda self: not self.closed)
    @rule(data=st.data(), back=st.integers(1, 5), diff=diffs)
    def update_at_past(self, data, back: int, diff) -> None:
        self._rejected(dd.TimeError, self.inp.update_at, self._record(data), self.time - back, diff)

    @precondition(lambda self: not self.closed)
    @rule(data=st.data(), t=st.sampled_from(BAD_TIMES))
    def update_at_bad_time(self, data, t) -> None:
        self._rejected(dd.TimeError, self.inp.update_at, self._record(data), t, 1)

    @precondition(lambda self: not self.closed)
    @rule(data=st.data(), diff=st.sampled_from(BAD_DIFFS), at=st.booleans())
    def bad_diff(self, data, diff, at: bool) -> None:
        r = self._record(data)
        if at:
            self._rejected(dd.DiffTypeError, self.inp.update_at, r, self.time + 1, diff)
        else:
            self._rejected(dd.DiffTypeError, self.inp.update, r, diff)

    @precondition(lambda self: not self.closed)
    @rule(
        record=st.sampled_from(ALWAYS_BAD_RECORDS),
        how=st.sampled_from(["update", "at", "insert", "remove"]),
    )
    def always_bad_record(self, record, how: str) -> None:
        """NaN, unhashable values: rejected even before the collection knows its shape."""
        if how == "update":
            self._rejected(dd.DataError, self.inp.update, record, 1)
        elif how == "at":
            self._rejected(dd.DataError, self.inp.update_at, record, self.time + 2, 1)
        elif how == "insert":
            self._rejected(dd.DataError, self.inp.insert, record)
        else:
            self._rejected(dd.DataError, self.inp.remove, record)

    @precondition(lambda self: not self.closed and self.learned)
    @rule(data=st.data(), how=st.sampled_from(["update", "at", "insert"]))
    def wrong_record(self, data, how: str) -> None:
        """Records of another schema, with None in a key, lists instead of tuples."""
        # (int and edge records are both numbers: one field kind, each valid for the other)
        other = data.draw(
            st.sampled_from(
                [s for s in SCHEMAS if s != self.schema and {s, self.schema} != {"int", "edge"}]
            )
        )
        bad = [data.draw(records_of[other]), None]
        if self.schema == "pair":
            k, v = data.draw(records_of["pair"])
            bad += [
                (None, v),
                (k, None),
                [k, v],
                (k, v, 0),
                ((k,), v),
                (k, (v,)),
                (str(k), v),
                (k, 1.5j),
                (k,),
            ]
        elif self.schema == "nested":
            (a, b), v = data.draw(records_of["nested"])
            bad += [
                (a, v),
                ((a, b, 0), v),
                ((a,), v),
                (a, (b, v)),
                ((a, b), (v,)),
                ((None, b), v),
                ((a, "x"), v),
                ((a, b), b"v"),
                ((a, b), frozenset()),
                [(a, b), v],
                ((a, b), 1j),
            ]
        elif self.schema in ("int", "edge"):
            bad += [(1,), "1", b"1", 1j, frozenset({1})]
        else:
            bad += [("a",), b"a", 1.5]
        r = data.draw(st.sampled_from(bad))
        if how == "update":
            self._rejected(dd.DataError, self.inp.update, r, 1)
        elif how == "at":
            self._rejected(dd.DataError, self.inp.update_at, r, self.time + 1, 1)
        else:
            self._rejected(dd.DataError, self.inp.insert, r)

    @precondition(lambda self: not self.closed)
    @rule(n=st.integers(2, 6), which=st.integers(0, 100))
    def always_bad_batch(self, n: int, which: int) -> None:
        batches = _always_bad_batches(n)
        self._rejected(dd.DataError, self.inp.insert_columns, batches[which % len(batches)])

    @precondition(lambda self: not self.closed and self.learned)
    @rule(n=st.integers(0, 6), which=st.integers(0, 100))
    def wrong_shape_batch(self, n: int, which: int) -> None:
        """Columns of another tuple shape (also with zero rows: the shape is known)."""
        batches = _wrong_shape_batches(self.schema, n)
        self._rejected(dd.DataError, self.inp.insert_columns, batches[which % len(batches)])

    @precondition(lambda self: not self.closed and self.learned)
    @rule(n=st.integers(1, 6), which=st.integers(0, 100))
    def wrong_kind_batch(self, n: int, which: int) -> None:
        """Columns in the right shape holding another field type (strings for ints, ...)."""
        batches = _wrong_kind_batches(self.schema, n)
        self._rejected(dd.DataError, self.inp.insert_columns, batches[which % len(batches)])

    @precondition(lambda self: not self.closed)
    @rule(data=st.data(), n=st.integers(1, 6), which=st.integers(0, 100))
    def bad_batch_diffs(self, data, n: int, which: int) -> None:
        records = [self._record(data) for _ in range(n)]
        bad = [
            np.ones(n, dtype=np.float64),
            np.ones(n, dtype=bool),
            np.array(["1"] * n),
            np.ones(n + 1, dtype=np.int64),
            np.ones(max(n - 1, 0), dtype=np.int64),
            np.ones((n, 2), dtype=np.int64),
            [1.5] * n,
            np.full(n, 2**64 - 1, dtype=np.uint64),
            _obj([None] * n),
            "1",
            1.5,
        ]
        self._rejected(
            dd.DiffTypeError,
            self.inp.insert_columns,
            _columns(self.schema, records),
            diffs=bad[which % len(bad)],
        )

    @precondition(lambda self: not self.closed)
    @rule(data=st.data(), n=st.integers(1, 6), which=st.integers(0, 100), back=st.integers(1, 3))
    def bad_batch_times(self, data, n: int, which: int, back: int) -> None:
        records = [self._record(data) for _ in range(n)]
        past = np.full(n, self.time, dtype=np.int64)
        past[-1] = self.time - back
        bad = [
            past,
            past.tolist(),
            np.full(n, self.time, dtype=np.float64),
            np.full(n, self.time + 0.5),
            np.ones(n, dtype=bool),
            np.array([str(self.time)] * n),
            np.full(n + 1, self.time, dtype=np.int64),
            np.full((n, 2), self.time, dtype=np.int64),
            np.full(n, 2**64 - 1, dtype=np.uint64),
            _obj([None] * n),
            [BIG] * n,
            "1",
            1.5,
            self.time,
        ]
        self._rejected(
            dd.TimeError,
            self.inp.insert_columns,
            _columns(self.schema, records),
            times=bad[which % len(bad)],
        )

    @precondition(lambda self: self.closed)
    @rule(data=st.data(), which=st.integers(0, 100))
    def use_closed(self, data, which: int) -> None:
        r = self._record(data)
        calls = [
            (self.inp.update, (r, 1)),
            (self.inp.insert, (r,)),
            (self.inp.remove, (r,)),
            (self.inp.update_at, (r, self.time + 1, 1)),
            (self.inp.insert_columns, (_columns(self.schema, [r]),)),
            (self.inp.insert_columns, (_columns(self.schema, []),)),
            (self.inp.flush, ()),
            (self.inp.advance_to, (self.time + 1,)),
            (self.inp.advance_to, (self.time,)),
            # invalid for a second reason too: the closed session is named first
            (self.inp.update, (float("nan"), "x")),
            (self.inp.advance_to, (-1,)),
        ]
        call, args = calls[which % len(calls)]
        self._rejected(dd.SessionClosedError, call, *args)

    # -- checks ------------------------------------------------------------------------------
    def _horizon(self) -> int:
        return max([self.time, *self.by_time]) + 1

    def _compare(self, upto: int, *, all_times: bool) -> None:
        """Compare every output with the oracle at the completed times below ``upto``."""
        for name, out in self.outs.items():
            f = out.frontier_reached()
            done = self._horizon() if f.is_empty() else f.elements[0][0]
            done = min(done, upto)
            start = 0 if all_times else min(self.checked, max(done - 1, 0))
            for t in range(start, done):
                got = out.at(t)
                want = self._expected(name, t)
                assert got == want, f"{name} at time {t}: got {got}, expected {want}"
        f = self.outs["input"].frontier_reached()
        self.checked = max(self.checked, self._horizon() if f.is_empty() else f.elements[0][0])

    @invariant()
    def session_state(self) -> None:
        if not hasattr(self, "inp"):
            return
        assert self.inp.time() == self.time
        assert self.inp.closed == self.closed
        assert self.inp.buffered() == self.pending, (
            "the session's buffer does not hold what was accepted"
        )

    @invariant()
    def outputs_match_oracle(self) -> None:
        if hasattr(self, "inp"):
            self._compare(self._horizon(), all_times=False)

    def teardown(self) -> None:
        if not hasattr(self, "inp"):
            return
        self.inp.close()
        self.closed = True
        self.worker.run()
        for out in self.outs.values():
            assert out.frontier_reached().is_empty()
        self._compare(self._horizon(), all_times=True)


HostileInput.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestHostileInput = HostileInput.TestCase
