"""Hypothesis strategies for collections of updates and for the ways they are fed to a worker.

Why it exists: the conformance tests compare the engine against ``ddflow.testing.oracle`` on
random inputs; the inputs must be small and clashing enough that interesting things happen
(updates cancel, keys collide, groups empty and refill), and the *schedule* (how updates are
cut into rounds, when the worker steps) must vary without changing the meaning.

Invariants:

* data domains are tiny (a handful of ints, or ``(key, val)`` pairs over 3 x 4 values), and
  diffs are +1 / -1, so +1 and -1 on the same data meet often; ``updates`` also adds explicit
  cancellations ``(d, t', -r)`` with ``t' >= t``;
* times are ints ``0..max_time`` or ``Product(outer, inner)`` with small components;
* a ``Schedule`` assigns every update of every input to a round; within a round, each
  update's time is ``>=`` the meet of that input's updates not yet sent, so a session advanced
  to that meet between rounds never receives an update before its time.

Edge values (``edge_ints``, ``edge_numbers``, ``edge_diffs``) are the other end: numbers where
typed columns stop being exact (int64's ends, 2**53 where floats stop holding every int,
ints beyond int64, floats equal to ints, bools equal to 0 and 1), for tests that values are
kept exactly and diffs never wrap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from ddflow.core.time import Product

__all__ = [
    "Schedule",
    "data_for",
    "edge_diffs",
    "edge_ints",
    "edge_numbers",
    "int_times",
    "key_vals",
    "nested_product_times",
    "product_times",
    "rounds",
    "schedules",
    "scalars",
    "times_for",
    "updates",
]

Update = tuple[Any, Any, Any]

#: Data kinds understood by ``data_for``.
SCALAR = "scalar"
KEY_VAL = "kv"


def scalars(max_value: int = 4) -> st.SearchStrategy[int]:
    """Plain records: small ints ``0..max_value``."""
    return st.integers(0, max_value)


def key_vals(max_key: int = 2, max_val: int = 3) -> st.SearchStrategy[tuple[int, int]]:
    """Key-value records ``(k, v)`` over a small grid."""
    return st.tuples(st.integers(0, max_key), st.integers(0, max_val))


I64_MIN, I64_MAX = -(2**63), 2**63 - 1

#: ints at the edges of int64 and of the ints a float64 holds exactly, and beyond int64
EDGE_INTS = (
    I64_MIN,
    I64_MIN + 1,
    -(2**62),
    -(2**53) - 1,
    -(2**53),
    -1,
    0,
    1,
    2,
    2**53,
    2**53 + 1,
    2**62,
    I64_MAX - 1,
    I64_MAX,
    2**63,
    2**64,
    2**64 + 1,
    -(2**64),
    2**70 + 1,
    -(2**70),
)
#: floats equal to some edge ints, and others
EDGE_FLOATS = (0.5, -0.5, 0.0, 1.0, 2.0**53, 2.0**53 + 2, 2.0**63, -(2.0**63), 2.0**64, 1e300)


def edge_ints(*, beyond: bool = True) -> st.SearchStrategy[int]:
    """Ints near int64's ends and 2**53 (and, with ``beyond``, outside int64)."""
    vals = EDGE_INTS if beyond else tuple(v for v in EDGE_INTS if I64_MIN <= v <= I64_MAX)
    return st.sampled_from(vals) | st.integers(-3, 3)


def edge_numbers() -> st.SearchStrategy[Any]:
    """Edge ints, floats (some equal to those ints) and bools: one numeric field kind."""
    return edge_ints() | st.sampled_from(EDGE_FLOATS) | st.booleans()


def edge_diffs() -> st.SearchStrategy[int]:
    """Int diffs a session accepts (within int64) whose sums and products leave int64."""
    return st.sampled_from((I64_MIN, I64_MAX, 2**62, -(2**62), 2**32, -(2**32))) | st.integers(
        -3, 3
    )


def data_for(kind: str) -> st.SearchStrategy[Any]:
    """The record strategy for a data kind: ``"scalar"`` or ``"kv"``."""
    if kind == SCALAR:
        return scalars()
    if kind == KEY_VAL:
        return key_vals()
    raise ValueError(f"unknown data kind {kind!r}; use 'scalar' or 'kv'")


def int_times(max_time: int = 4) -> st.SearchStrategy[int]:
    """Totally ordered times ``0..max_time``."""
    return st.integers(0, max_time)


def product_times(max_outer: int = 2, max_inner: int = 2) -> st.SearchStrategy[Product]:
    """Partially ordered times ``Product(outer, inner)`` over a small grid."""
    return st.builds(Product, st.integers(0, max_outer), st.integers(0, max_inner))


def nested_product_times(max_component: int = 2) -> st.SearchStrategy[Product]:
    """Partially ordered times ``Product(Product(a, b), c)`` (three nested components)."""
    c = st.integers(0, max_component)
    return st.builds(Product, st.builds(Product, c, c), c)


def times_for(product: bool | str) -> st.SearchStrategy[Any]:
    """``int_times()``; ``product_times()`` if ``product``; ``nested_product_times()`` if
    ``product == "nested"``."""
    if product == "nested":
        return nested_product_times()
    return product_times() if product else int_times()


def _flat(t: Any) -> tuple[int, ...]:
    if isinstance(t, Product):
        return _flat(t.outer) + _flat(t.inner)
    return (int(t),)


def _join(a: Any, b: Any) -> Any:
    if isinstance(a, Product):
        return Product(_join(a.outer, b.outer), _join(a.inner, b.inner))
    return max(a, b)


def _meet(a: Any, b: Any) -> Any:
    if isinstance(a, Product):
        return Product(_meet(a.outer, b.outer), _meet(a.inner, b.inner))
    return min(a, b)


@st.composite
def updates(
    draw: st.DrawFn,
    data: st.SearchStrategy[Any],
    times: st.SearchStrategy[Any],
    max_size: int = 10,
) -> list[Update]:
    """A list of ``(data, time, diff)`` with diffs +1/-1, some of them cancelled later.

    Each base update may get a partner ``(data, join(time, t'), -diff)``, so the record
    appears and then disappears (or the reverse) at a later or equal time.
    """
    base = draw(st.lists(st.tuples(data, times, st.sampled_from([1, -1])), max_size=max_size))
    out = list(base)
    for d, t, r in base:
        if draw(st.booleans()):
            out.append((d, _join(t, draw(times)), -r))
    return out


def _sort_by_time(ups: list[Update]) -> list[Update]:
    # Lexicographic order of flat times is a linear extension of the product order.
    return sorted(ups, key=lambda u: _flat(u[1]))


@st.composite
def rounds(draw: st.DrawFn, ups: list[Update]) -> list[list[Update]]:
    """The updates, sorted by time, cut at random points into non-empty rounds."""
    ordered = _sort_by_time(ups)
    if not ordered:
        return []
    cuts = draw(st.sets(st.integers(1, max(1, len(ordered) - 1)), max_size=len(ordered)))
    bounds = [0, *sorted(c for c in cuts if c < len(ordered)), len(ordered)]
    return [ordered[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


@dataclass
class Schedule:
    """How the updates of several inputs are fed to a worker.

    ``inputs[i]`` is the full update list of input ``i``. ``rounds[j]`` is the list of
    ``(input_index, update)`` sent in round ``j``; after round ``j`` each session is advanced
    (see ``advance_targets``), flushed, and the worker does ``actions[j]``: ``"none"``,
    ``"step"`` or ``"run"``. ``use_plain[j][n]`` says whether the ``n``-th update of round
    ``j`` is sent with ``update(data, diff)`` when its time equals the session's time (rather
    than ``update_at``).
    """

    inputs: list[list[Update]]
    rounds: list[list[tuple[int, Update]]]
    actions: list[str] = field(default_factory=list)
    use_plain: list[list[bool]] = field(default_factory=list)

    def advance_targets(self, after_round: int) -> list[Any | None]:
        """Per input, the meet of its times sent after ``after_round`` (``None``: none left)."""
        out: list[Any | None] = []
        for i in range(len(self.inputs)):
            remaining = [u[1] for r in self.rounds[after_round + 1 :] for (j, u) in r if j == i]
            target = None
            for t in remaining:
                target = t if target is None else _meet(target, t)
            out.append(target)
        return out

    @staticmethod
    def single_batch(inputs: list[list[Update]]) -> Schedule:
        """Everything in one round."""
        merged = [(i, u) for i, ups in enumerate(inputs) for u in ups]
        merged.sort(key=lambda iu: _flat(iu[1][1]))
        rs = [merged] if merged else []
        return Schedule(inputs, rs, ["run"] * len(rs), [[False] * len(r) for r in rs])

    @staticmethod
    def one_per_round(inputs: list[list[Update]], action: str = "step") -> Schedule:
        """One update per round (each flushed on its own), in time order."""
        merged = [(i, u) for i, ups in enumerate(inputs) for u in ups]
        merged.sort(key=lambda iu: _flat(iu[1][1]))
        rs = [[iu] for iu in merged]
        return Schedule(inputs, rs, [action] * len(rs), [[True] for _ in rs])


@st.composite
def schedules(
    draw: st.DrawFn,
    kinds: tuple[str, ...],
    product: bool | str,
    max_size: int = 10,
) -> Schedule:
    """Random update lists, one per data kind in ``kinds``, and a random split into rounds."""
    times = times_for(product)
    inputs = [draw(updates(data_for(k), times, max_size=max_size)) for k in kinds]
    merged = [(i, u) for i, ups in enumerate(inputs) for u in ups]
    merged.sort(key=lambda iu: _flat(iu[1][1]))
    rs: list[list[tuple[int, Update]]] = []
    if merged:
        cuts = draw(st.sets(st.integers(1, max(1, len(merged) - 1)), max_size=len(merged)))
        bounds = [0, *sorted(c for c in cuts if c < len(merged)), len(merged)]
        rs = [merged[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
        # Order inside a round does not matter; shuffle it to say so.
        rs = [draw(st.permutations(r)) for r in rs]
    actions = [draw(st.sampled_from(["none", "step", "run"])) for _ in rs]
    use_plain = [[draw(st.booleans()) for _ in r] for r in rs]
    return Schedule(inputs, rs, actions, use_plain)
