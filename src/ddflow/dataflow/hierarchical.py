"""``reduce_hierarchical``: a keyed reduction for skewed keys, in two stages.

A hot key makes one ``reduce`` re-read all of its values whenever any of them changes.
The remedy for a hot key: key the values by ``(key, bucket)`` with ``bucket`` a hash of the value
(modulo ``buckets``), reduce each sub-group, then reduce the partial results per key. A
change then re-reads one sub-group (about ``1 / buckets`` of the key's values) and the
key's ``buckets`` partial results. This needs an associative reduction:

* ``min`` / ``max``: per sub-group, then of the partial results (``min_total`` /
  ``max_total`` for totally ordered times, ``min`` / ``max`` otherwise);
* ``sum``: values moved into ``(sum, count)`` tuple diffs with ``explode`` and added with
  ``count`` (the ``Sum{value, count}`` diff: a key whose values sum to 0 still has a
  result, ``(key, 0)``), per sub-group, then the partial results exploded again per key;
* ``count``: the number of records (with multiplicity), the same way with int diffs.

Everything is vectorized (the bucket hash is ``ddflow.engine.exchange.hash_columns``, the
same in every process), and correct for any time kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ddflow.engine.exchange import hash_columns

if TYPE_CHECKING:
    from ddflow.dataflow.collection import Collection

__all__ = ["reduce_hierarchical"]

HOWS = ("min", "max", "sum", "count")


def _cols(view: Any) -> list[np.ndarray]:
    if isinstance(view, tuple):
        out: list[np.ndarray] = []
        for v in view:
            out.extend(_cols(v))
        return out
    return [np.asarray(view)]


def reduce_hierarchical(
    coll: Collection, how: str, *, buckets: int = 256, name: str | None = None
) -> Collection:
    """``(key, val)`` records -> ``(key, result)`` of ``how`` over each key's values."""
    if how not in HOWS:
        raise ValueError(f"reduce_hierarchical: how must be one of {HOWS}, got {how!r}")
    if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1:
        raise ValueError(f"reduce_hierarchical: buckets must be a positive int, got {buckets!r}")
    label = name or f"{how}_hierarchical"
    total = coll.scope.kind.total
    nb = np.uint64(buckets)

    def bucketed(kv: Any) -> Any:
        k, v = kv
        vc = _cols(v)
        b = (hash_columns(vc, len(vc[0])) % nb).astype(np.int64)
        return ((k, b), v)

    def stage(c: Collection, what: str, suffix: str) -> Collection:
        if what in ("min", "max"):
            if total:
                return (
                    c.min_total(name=f"{label}_{suffix}")
                    if what == "min"
                    else c.max_total(name=f"{label}_{suffix}")
                )
            return (
                c.min(name=f"{label}_{suffix}")
                if what == "min"
                else c.max(name=f"{label}_{suffix}")
            )
        if total:
            return c.count_total(name=f"{label}_{suffix}")
        return c.count(name=f"{label}_{suffix}")

    sub = coll.map(bucketed, vectorized=True, name=f"{label}_bucket")
    if how in ("min", "max"):
        part = stage(sub, how, "groups")
        keyed = part.map(lambda r: (r[0][0], r[1]), vectorized=True, name=f"{label}_partials")
        return stage(keyed, how, "keys")
    if how == "sum":

        def to_sum(r: Any) -> Any:
            v = np.asarray(r[1])
            return (r[0], (v, np.ones(len(v), dtype=np.int64)))

        part = stage(sub.explode(to_sum, vectorized=True, name=f"{label}_values"), "sum", "groups")
        # partial results ((key, bucket), (sum, count)) -> key with diff (sum, count)
        keyed = part.explode(lambda r: (r[0][0], r[1]), vectorized=True, name=f"{label}_partials")
        res = stage(keyed, "sum", "keys")
        return res.map(lambda r: (r[0], r[1][0]), vectorized=True, name=label)
    # count
    part = stage(
        sub.map(lambda r: r[0], vectorized=True, name=f"{label}_records"), "count", "groups"
    )
    keyed = part.explode(lambda r: (r[0][0], r[1]), vectorized=True, name=f"{label}_partials")
    return stage(keyed, "count", "keys")
