"""Collections: the user API, a growing set of updates ``(data, time, diff)`` in a dataflow.

A ``Collection`` names the output of one operator; its methods add operators to the worker's
dataflow and return new collections (DD's API, ``name=`` keywords instead of ``_named``
variants). ``Arranged`` is a collection indexed by key in a shared trace: several operators
may read one arrangement (``arranged.join(...)``, ``arranged.reduce(...)``, ...).

Operators take per-record Python callables; ``vectorized=True`` hands them numpy columns in
the record's shape instead (``lambda e: e[0]`` works both ways).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ddflow.core.columns import Layout, Tup, infer_layout
from ddflow.core.diff import INT_DIFF, DiffType, ObjectDiff
from ddflow.core.errors import DiffTypeError, ScopeError
from ddflow.engine.exchange import Exchange
from ddflow.engine.loop import Enter, Leave
from ddflow.engine.operator import Stream
from ddflow.engine.scope import Scope
from ddflow.io.output import Capture, Probe
from ddflow.operators import reducers as R
from ddflow.operators.arrange import Arrange
from ddflow.operators.count_total import CountFew, CountTotal, CountTotalPrivate
from ddflow.operators.join import Join
from ddflow.operators.linear import (
    Concat,
    Consolidate,
    Explode,
    Filter,
    FlatMap,
    Inspect,
    Map,
    Negate,
)
from ddflow.operators.min_total import MinMaxTotal
from ddflow.operators.reduce import Reduce

if TYPE_CHECKING:
    from ddflow.engine.worker import Worker

__all__ = ["Arranged", "Collection"]


class Collection:
    """A collection of updates flowing out of one operator of a worker's dataflow."""

    def __init__(self, worker: Worker, stream: Stream, diff_type: DiffType | None = None) -> None:
        self.worker = worker
        self.stream = stream
        self.diff_type = diff_type

    def _wrap(self, op: Any, diff_type: DiffType | None = None) -> Collection:
        return Collection(self.worker, op.output, diff_type)

    def _routed(self, by_self: bool) -> Stream:
        """This collection's stream, routed by key to its owners when there are several workers."""
        if self.worker.peers == 1:
            return self.stream
        return Exchange(self.worker, self.stream, by_self).output

    # -- scopes and loops ----------------------------------------------------------------------
    @property
    def scope(self) -> Scope:
        """The scope this collection lives in (the worker's root, or a loop)."""
        return self.stream.producer_scope

    def enter(self, scope: Scope, *, name: str | None = None) -> Collection:
        """This collection inside the loop ``scope`` (a child of this collection's scope), at
        iteration 0 of every outer time."""
        if not isinstance(scope, Scope) or scope.parent is not self.scope:
            raise ScopeError(
                f"enter({scope!r}) needs a loop scope directly inside this collection's scope "
                f"({self.scope!r})"
            )
        return self._wrap(Enter(self.worker, self.stream, scope, name), self.diff_type)

    def leave(self, *, name: str | None = None) -> Collection:
        """This loop collection in the enclosing scope (iterations dropped)."""
        if self.scope.parent is None:
            raise ScopeError(
                "leave() needs a collection inside a loop; this one is in the root scope "
                "(it never entered one)"
            )
        return self._wrap(Leave(self.worker, self.stream, name), self.diff_type)

    def iterate(
        self,
        body: Callable[[Collection], Collection],
        *,
        limit: int | None = None,
        fold_initial: bool = False,
        name: str | None = None,
    ) -> Collection:
        """The fixed point of ``body`` from this collection: ``x_0 = self``,
        ``x_{i+1} = body(x_i)``, until nothing changes (DD's ``iterate``).

        ``body`` gets the loop variable (a collection of the loop's scope, ``x.scope``);
        outer collections it uses must be entered (``edges.enter(x.scope)``). With
        ``fold_initial=True`` the loop is ``x_{i+1} = body(x_i) + self`` from an empty
        ``x_0``, which needs no subtraction (monoid diffs such as the min-sum monoid).
        ``limit`` bounds the iterations (``IterationLimitError``)."""
        from ddflow.dataflow.iterate import iterate

        return iterate(self, body, limit=limit, fold_initial=fold_initial, name=name)

    # -- linear ----------------------------------------------------------------------------------
    def map(
        self,
        f: Callable[[Any], Any],
        *,
        vectorized: bool = False,
        shape: Any = None,
        name: str | None = None,
    ) -> Collection:
        """Each record ``x`` becomes ``f(x)``.

        ``shape`` (optional): the output records' shape, a sample record such as ``(0, 0)``
        or a ``Layout``; operators downstream check it as the dataflow is built (a join of
        records that are not pairs fails there, not at the first record), and records of
        another shape are refused when they come."""
        op = Map(self.worker, self.stream, f, vectorized, name)
        return self._wrap(_declare(op, shape), self.diff_type)

    def filter(
        self, p: Callable[[Any], Any], *, vectorized: bool = False, name: str | None = None
    ) -> Collection:
        """Keeps records with ``p(x)`` true."""
        return self._wrap(Filter(self.worker, self.stream, p, vectorized, name), self.diff_type)

    def flat_map(
        self,
        f: Callable[[Any], Any],
        *,
        vectorized: bool = False,
        shape: Any = None,
        name: str | None = None,
    ) -> Collection:
        """Each record becomes the records of the iterable ``f(x)`` (``shape``: the output
        records' shape, as for ``map``). Vectorized, ``f(cols)`` returns ``(rows,
        out_cols)``: the input row of each output record (an int array, or None for one
        output per input row) and the output columns."""
        op = FlatMap(self.worker, self.stream, f, vectorized, name)
        return self._wrap(_declare(op, shape), self.diff_type)

    def explode(
        self,
        f: Callable[[Any], Any],
        *,
        vectorized: bool = False,
        diff: Any = None,
        name: str | None = None,
    ) -> Collection:
        """Moves data into diffs: ``f(x)`` yields ``(data, diff)`` pairs (aggregates in diffs)."""
        op = Explode(self.worker, self.stream, f, vectorized, diff, name)
        return self._wrap(op, op.dt)

    def concat(self, *others: Collection, name: str | None = None) -> Collection:
        """The union (sum) of this collection and ``others``."""
        return self._wrap(
            Concat(self.worker, [self.stream] + [o.stream for o in others], name), self.diff_type
        )

    def negate(self, *, name: str | None = None) -> Collection:
        """Every diff negated (needs an abelian diff type)."""
        if self.diff_type is not None and not self.diff_type.abelian:
            raise DiffTypeError(
                f"negate needs diffs with subtraction; {self.diff_type.name} has none"
            )
        return self._wrap(Negate(self.worker, self.stream, name), self.diff_type)

    def consolidate(self, *, name: str | None = None) -> Collection:
        """The same collection with updates at equal ``(data, time)`` added up."""
        return self._wrap(Consolidate(self.worker, self._routed(True), name), self.diff_type)

    def inspect(
        self, f: Callable[[tuple[Any, Any, Any]], Any], *, name: str | None = None
    ) -> Collection:
        """Calls ``f((data, time, diff))`` on every update and passes it on."""
        return self._wrap(Inspect(self.worker, self.stream, f, name), self.diff_type)

    def probe(self, *, name: str | None = None) -> Probe:
        """A handle reporting the frontier reached at this point of the dataflow."""
        return Probe(self.worker, [self.stream], name)

    def capture(self, *, name: str | None = None) -> Capture:
        """A handle recording every output update (``updates()``, ``at(t)``)."""
        return Capture(self.worker, [self.stream], name)

    # -- arrangements -------------------------------------------------------------------------
    def arrange_by_key(
        self, *, name: str | None = None, effort: int | None = 4, fanin: int | str = 2
    ) -> Arranged:
        """Index ``(key, val)`` records by key in a shared trace.

        ``effort``: the trace merges its batches progressively, doing ``effort`` units of
        merge work per update it takes in (``2`` is the least that finishes each merge
        before it is needed again; more keeps fewer batches for readers to search, and
        lowers throughput); ``None`` completes every merge at once, so the update that
        starts a large merge waits for all of it (the latency spikes progressive merging
        exists to avoid).

        ``fanin``: how many batches one merge takes (``ddflow.trace.spine.Spine``). Above
        the default 2, each update is merged fewer times and readers search more batches,
        merges done at once: for a large trace that is written much more than it is read
        (a join's input whose other side seldom changes). ``"auto"``: the trace chooses
        between 2 and a tiered form as it runs, from how often it is read against how often
        it is written (for plans made without knowing how their inputs will change)."""
        op = Arrange(self.worker, self._routed(False), False, name, effort, fanin)
        return Arranged(self, op)

    def arrange_by_self(
        self, *, name: str | None = None, effort: int | None = 4, fanin: int | str = 2
    ) -> Arranged:
        """Index whole records (as keys) in a shared trace (``effort`` and ``fanin`` as
        for ``arrange_by_key``)."""
        op = Arrange(self.worker, self._routed(True), True, name, effort, fanin)
        return Arranged(self, op)

    # -- keyed operators (arrange first) ---------------------------------------------------------
    def join(self, other: Collection | Arranged, *, name: str | None = None) -> Collection:
        """``(k, a)`` and ``(k, b)`` give ``(k, (a, b))``; diffs multiply."""
        return self.arrange_by_key().join(other, name=name)

    def join_map(
        self,
        other: Collection | Arranged,
        f: Callable[..., Any],
        *,
        vectorized: bool = False,
        shape: Any = None,
        name: str | None = None,
    ) -> Collection:
        """``(k, a)`` and ``(k, b)`` give ``f(k, a, b)`` (``shape``: its records' shape, as
        for ``map``)."""
        return self.arrange_by_key().join_map(
            other, f, vectorized=vectorized, shape=shape, name=name
        )

    def semijoin(self, keys: Collection | Arranged, *, name: str | None = None) -> Collection:
        """``(k, v)`` records whose key is in ``keys`` (diffs multiply)."""
        return self.arrange_by_key().semijoin(keys, name=name)

    def antijoin(self, keys: Collection | Arranged, *, name: str | None = None) -> Collection:
        """``(k, v)`` records whose key is not in ``keys``: ``self - self.semijoin(keys)``."""
        return self.concat(self.semijoin(keys).negate(), name=name)

    def reduce_core(self, reducer: R.Reducer, *, name: str | None = None) -> Collection:
        """``(k, v)`` records -> what ``reducer`` computes per key (``ddflow.operators.
        reducers``; arrange by self first for reducers of whole records)."""
        return self.arrange_by_key().reduce_core(reducer, name=name)

    def reduce(
        self,
        logic: Callable[[Any, list[tuple[Any, Any]]], Any],
        *,
        shape: Any = None,
        name: str | None = None,
    ) -> Collection:
        """``(k, v)`` records -> ``(k, out)`` with ``logic(k, [(v, diff)...]) -> [(out, diff)]``
        (``shape``: the shape of ``out``, as for ``map``)."""
        return self.arrange_by_key().reduce(logic, shape=shape, name=name)

    def reduce_abelian(
        self,
        logic: Callable[[Any, list[tuple[Any, Any]]], Any],
        *,
        diff: Any = None,
        shape: Any = None,
        name: str | None = None,
    ) -> Collection:
        """Like ``reduce`` with output diffs of any abelian type (``diff``: type or sample)."""
        return self.arrange_by_key().reduce_abelian(logic, diff=diff, shape=shape, name=name)

    def min(self, *, name: str | None = None) -> Collection:
        """``(k, v)`` records -> ``(k, least v)`` among values with a non-zero count, for any
        lattice of times (vectorized; ``min_total`` is the totally ordered special case)."""
        return self.arrange_by_key().min(name=name)

    def max(self, *, name: str | None = None) -> Collection:
        """``(k, v)`` records -> ``(k, greatest v)`` (see ``min``)."""
        return self.arrange_by_key().max(name=name)

    def top_k(self, k: int, *, name: str | None = None) -> Collection:
        """``(key, v)`` records -> the ``k`` least values ``v`` of each key (values compare
        as tuples, column by column; a value with count ``c`` fills ``c`` places and keeps
        the count it gets, at most ``c``), for any lattice of times, vectorized. For "the
        greatest", put negated columns first."""
        return self.arrange_by_key().top_k(k, name=name)

    def reduce_solve(self, logic: Any = "min", *, name: str | None = None) -> Collection:
        """DD's ``group_solve``, for monoid diffs that cannot be subtracted: the output
        only ever receives additions.

        ``logic="min"`` (the default, vectorized): records are keys with ``MinSum`` diffs, and
        the output adds a key's input minimum whenever it is below the output's (shortest
        paths). A function ``logic(key, input, output) -> [(val, diff), ...]`` on ``(k, v)``
        records sees the accumulated input and current output (lists of ``(val, diff)``) and
        returns updates to add."""
        if logic == "min":
            return self.arrange_by_self().reduce_solve("min", name=name)
        return self.arrange_by_key().reduce_solve(logic, name=name)

    def count(self, *, name: str | None = None) -> Collection:
        """``(record, count)`` for every record with a non-zero count (any lattice of times)."""
        return self.arrange_by_self().count(name=name)

    def distinct(self, *, name: str | None = None) -> Collection:
        """Each record with a non-zero count, once (as in DD)."""
        return self.arrange_by_self().distinct(name=name)

    def threshold(self, f: Callable[[Any], int], *, name: str | None = None) -> Collection:
        """Each record with diff ``f(count)``."""
        return self.arrange_by_self().threshold(f, name=name)

    def count_total(self, *, few: bool = False, name: str | None = None) -> Collection:
        """``count`` for totally ordered times (the total-order count): no output trace,
        vectorized, and no trace of its input either: the collection is arranged for this
        count alone, so the count keeps each record's total so far instead (its declared
        state) and reads nothing else. ``arrange_by_self().count_total()`` counts through a
        shared arrangement instead (one other operators read too).

        ``few=True``: the collection has few distinct records (a global aggregate's single
        key, a handful of groups), so each record's total is kept in a dict: a step costs
        a few numpy calls, but every distinct record a step changes is visited in Python
        (int diffs or plain tuples of ints and floats only)."""
        if few:
            if self.diff_type is None:
                raise DiffTypeError(
                    "count_total(few=True) needs the collection's diff type known when the "
                    "dataflow is built (give explode a diff sample)"
                )
            few_op = CountFew(self.worker, self._routed(True), self.diff_type, name)
            return self._wrap(few_op, INT_DIFF)
        op = CountTotalPrivate(self.worker, self._routed(True), "count", name=name)
        key, dt = self.stream.layout, self.diff_type
        if key is not None and dt is not None:  # (key, count) records, the count as diffs hold it
            op.output.layout = Tup((key, dt.value_layout()))
        return self._wrap(op, INT_DIFF)

    def distinct_total(self, *, name: str | None = None) -> Collection:
        """``distinct`` for totally ordered times (kept totals, no trace: see
        ``count_total``)."""
        return self._wrap(
            CountTotalPrivate(self.worker, self._routed(True), "distinct", name=name), INT_DIFF
        )

    def threshold_total(
        self, f: Callable[[Any], int], *, vectorized: bool = False, name: str | None = None
    ) -> Collection:
        """``threshold`` for totally ordered times (kept totals, no trace: see
        ``count_total``)."""
        op = CountTotalPrivate(
            self.worker, self._routed(True), "threshold", f, vectorized, name=name
        )
        return self._wrap(op, INT_DIFF)

    def min_total(self, *, name: str | None = None) -> Collection:
        """``(k, v)`` records -> ``(k, least v)`` for totally ordered times: the work
        per batch grows with the batch, not with the key's history."""
        return self.arrange_by_key().min_total(name=name)

    def max_total(self, *, name: str | None = None) -> Collection:
        """``(k, v)`` records -> ``(k, greatest v)`` for totally ordered times."""
        return self.arrange_by_key().max_total(name=name)

    def reduce_hierarchical(
        self, how: str, *, buckets: int = 256, name: str | None = None
    ) -> Collection:
        """``reduce`` for skewed keys with an associative ``how`` (``"min"``,
        ``"max"``, ``"sum"``, ``"count"``): each key's values are split into ``buckets``
        sub-groups by a hash of the value, reduced, and the partial results reduced again."""
        from ddflow.dataflow.hierarchical import reduce_hierarchical

        return reduce_hierarchical(self, how, buckets=buckets, name=name)


def _layout(shape: Any) -> Layout | None:
    """The layout a user declared: a ``Layout``, a sample record, or None (not declared)."""
    if shape is None or isinstance(shape, Layout):
        return shape
    return infer_layout(shape)


def _declare(op: Any, shape: Any) -> Any:
    """``op`` with its output's records declared to have ``shape`` (see ``map``)."""
    layout = _layout(shape)
    if layout is not None:
        op.output.layout = layout
    return op


def _product_type(a: DiffType | None, b: DiffType | None) -> DiffType | None:
    """The diff type of a join's output (diffs multiply), when both inputs' are known and
    their product's type follows from them (None otherwise: learnt from the output)."""
    if a is None or b is None or isinstance(a, ObjectDiff) or isinstance(b, ObjectDiff):
        return None
    try:
        return a.multiply(a.empty(), b, b.empty())[0]
    except DiffTypeError:
        return None  # (the join raises when it meets such diffs)


class Arranged:
    """A collection indexed by key in a shared trace (the output of ``arrange_by_*``)."""

    def __init__(self, source: Collection, op: Arrange) -> None:
        self.worker = source.worker
        self.source = source
        self.op = op

    @property
    def diff_type(self) -> DiffType | None:
        """The diff type of the arranged collection (None until known)."""
        return self.source.diff_type

    def as_collection(self) -> Collection:
        """The arranged updates as a plain collection (the source collection)."""
        return self.source

    def _arranged(self, other: Collection | Arranged, by_self: bool) -> Arranged:
        if isinstance(other, Arranged):
            return other
        return other.arrange_by_self() if by_self else other.arrange_by_key()

    def _out(self, op: Any, diff_type: DiffType | None = None) -> Collection:
        return Collection(self.worker, op.output, diff_type)

    def join(self, other: Collection | Arranged, *, name: str | None = None) -> Collection:
        o = self._arranged(other, False)
        return self._out(
            Join(self.worker, self.op, o.op, name=name), _product_type(self.diff_type, o.diff_type)
        )

    def join_map(
        self,
        other: Collection | Arranged,
        f: Callable[..., Any],
        *,
        vectorized: bool = False,
        shape: Any = None,
        name: str | None = None,
    ) -> Collection:
        o = self._arranged(other, False)
        op = Join(self.worker, self.op, o.op, f, vectorized, name=name or "join_map")
        return self._out(_declare(op, shape), _product_type(self.diff_type, o.diff_type))

    def semijoin(self, keys: Collection | Arranged, *, name: str | None = None) -> Collection:
        o = self._arranged(keys, True)
        return self._out(
            Join(self.worker, self.op, o.op, semijoin=True, name=name or "semijoin"),
            _product_type(self.diff_type, o.diff_type),
        )

    def reduce_core(self, reducer: R.Reducer, *, name: str | None = None) -> Collection:
        """``(k, v)`` records -> what ``reducer`` computes per key (the reducers are in
        ``ddflow.operators.reducers``; every keyed reduction below is one)."""
        op = Reduce(self.worker, self.op, reducer, in_diff=self.diff_type, name=name)
        return self._out(op, reducer.output_diffs(self.diff_type))

    def reduce(
        self, logic: Callable[..., Any], *, shape: Any = None, name: str | None = None
    ) -> Collection:
        return self.reduce_core(R.Logic(logic, int, values=_layout(shape)), name=name)

    def reduce_abelian(
        self,
        logic: Callable[..., Any],
        *,
        diff: Any = None,
        shape: Any = None,
        name: str | None = None,
    ) -> Collection:
        reducer = R.Logic(logic, diff, "reduce_abelian", values=_layout(shape))
        return self.reduce_core(reducer, name=name)

    def min(self, *, name: str | None = None) -> Collection:
        return self.reduce_core(R.Min(), name=name)

    def max(self, *, name: str | None = None) -> Collection:
        return self.reduce_core(R.Max(), name=name)

    def top_k(self, k: int, *, name: str | None = None) -> Collection:
        return self.reduce_core(R.TopK(k), name=name)

    def reduce_solve(self, logic: Any = "min", *, name: str | None = None) -> Collection:
        if logic == "min":
            return self.reduce_core(R.SolveMin(), name=name)
        return self.reduce_core(R.SolveLogic(logic), name=name)

    def count(self, *, name: str | None = None) -> Collection:
        return self.reduce_core(R.Count(), name=name)

    def distinct(self, *, name: str | None = None) -> Collection:
        return self.reduce_core(R.Distinct(), name=name)

    def threshold(self, f: Callable[[Any], int], *, name: str | None = None) -> Collection:
        return self.reduce_core(R.Threshold(f), name=name)

    def count_total(self, *, name: str | None = None) -> Collection:
        op = CountTotal(self.worker, self.op, "count", name=name)
        key, dt = self.op.key_layout, self.diff_type
        if key is not None and dt is not None:  # (key, count) records, the count as diffs hold it
            op.output.layout = Tup((key, dt.value_layout()))
        return self._out(op, INT_DIFF)

    def distinct_total(self, *, name: str | None = None) -> Collection:
        return self._out(CountTotal(self.worker, self.op, "distinct", name=name), INT_DIFF)

    def threshold_total(
        self, f: Callable[[Any], int], *, vectorized: bool = False, name: str | None = None
    ) -> Collection:
        return self._out(
            CountTotal(self.worker, self.op, "threshold", f, vectorized, name=name), INT_DIFF
        )

    def min_total(self, *, name: str | None = None) -> Collection:
        return self._out(MinMaxTotal(self.worker, self.op, "min", name=name), INT_DIFF)

    def max_total(self, *, name: str | None = None) -> Collection:
        return self._out(MinMaxTotal(self.worker, self.op, "max", name=name), INT_DIFF)
