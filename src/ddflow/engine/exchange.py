"""Exchange: routes each update to the worker that owns its key, and agrees on frontiers.

A keyed operator (arrange, and through it join, reduce, count, ...) must see every update of
a key on one worker; the owner of a key is ``stable_hash(key) % peers``. The hash must be the
same in every process (Python's ``hash`` of a string is salted per process), so it is
computed here from the values. Equal data must have one owner whatever its type (as
``hash(2**64) == hash(2.0**64)`` in Python), so a number's code depends on its value only:
an integral value within int64 is coded by that int (``1``, ``1.0``, ``True`` alike), any
other value a float holds exactly by the float's bits (``2**64`` and ``2.0**64`` alike), an
int beyond int64 that no float equals by its low 64 bits. Int64, bool and float columns are
coded vectorized; the same rule per value codes object columns (Python ints beyond int64,
ints mixed with floats, ``Decimal``, ``Fraction``). Strings are coded by BLAKE2b of their
UTF-8 bytes, tuples by combining their parts. Only objects of other types fall back to
``hash()``, which is stable across processes only with a fixed ``PYTHONHASHSEED``.

Combining: before sending, an exchange consolidates its updates when that pays (DD leaves
this to the operator; here it is adaptive): updates at equal ``(data, time)`` are added up,
so a keyed aggregate over few keys (TPC-H Q1's four groups, ``explode`` + ``count_total``)
sends a handful of updates instead of every row. An exchange keeps combining while it at
least halves the updates, and otherwise probes again every ``PROBE_EVERY`` batches.

Progress: every step, every worker's exchange sends each peer its share of the updates
together with its own input frontier (``peer_frontiers`` keeps what it received); the
exchange's output frontier is the meet of those (``ddflow.engine.progress``). Workers step
in lockstep, so after the exchange of a step every update sent at a time not beyond that
meet has arrived: downstream, a time is complete only once it is complete on every worker.

A content-coded string dictionary (the SQL layer's) travels with the updates: when the
worker has one (``worker.string_dict``), the strings it made since its last exchange go to
every peer before any code of theirs can.
"""

from __future__ import annotations

import hashlib
import numbers
import struct
from typing import TYPE_CHECKING, Any

import numpy as np

from ddflow.core.columns import Layout, Tup
from ddflow.core.frontier import Antichain
from ddflow.core.updates import Updates, concat_updates, consolidate
from ddflow.engine.operator import Operator, State, Stream

if TYPE_CHECKING:
    from ddflow.engine.worker import Worker

__all__ = ["Exchange", "hash_columns", "stable_hash"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_MASK = (1 << 64) - 1
_NONE_CODE = 0x6E6F6E65  # an arbitrary fixed code for None


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, vectorized over uint64 (wrapping arithmetic)."""
    z = z ^ (z >> np.uint64(30))
    z = z * _M1
    z = z ^ (z >> np.uint64(27))
    z = z * _M2
    return z ^ (z >> np.uint64(31))


def _mix1(z: int) -> int:
    z &= _MASK
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & _MASK
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _float_code(x: float) -> int:
    if x.is_integer() and -(2**63) <= x < 2**63:
        return int(x) & _MASK
    return int(struct.unpack("<Q", struct.pack("<d", x + 0.0))[0])


def _int_code(v: int) -> int:
    """An int's code: itself within int64; beyond, the code of the float equal to it if
    there is one (``2**64`` and ``2.0**64`` are equal data), else its low 64 bits."""
    if -(2**63) <= v < 2**63:
        return v & _MASK
    try:
        f = float(v)
    except OverflowError:
        return v & _MASK
    return _float_code(f) if f == v else v & _MASK


def _number_code(x: numbers.Number) -> int:
    """The code of a number of another type (``Decimal``, ``Fraction``) by its value: that
    of the int or float equal to it, else Python's hash (value-based and unsalted for
    numbers)."""
    try:
        i = int(x)  # type: ignore[call-overload]
        if i == x:
            return _int_code(i)
        f = float(x)  # type: ignore[arg-type]
        if f == x:
            return _float_code(f)
    except (TypeError, ValueError, OverflowError):
        pass
    return hash(x) & _MASK


def stable_hash(x: Any) -> int:
    """The value code of one field; equal to what ``hash_columns`` computes per element, and
    equal for equal numbers of any type."""
    if x is None:
        return _NONE_CODE
    if isinstance(x, (bool, np.bool_)):
        return int(x)
    if isinstance(x, (int, np.integer)):
        return _int_code(int(x))
    if isinstance(x, (float, np.floating)):
        return _float_code(float(x))
    if isinstance(x, str):
        return int.from_bytes(
            hashlib.blake2b(x.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"
        )
    if isinstance(x, (bytes, bytearray)):
        return int.from_bytes(
            hashlib.blake2b(bytes(x), digest_size=8, person=b"b").digest(), "little"
        )
    if isinstance(x, tuple):
        h = 0x7475706C65 + len(x)
        for v in x:
            h = _mix1(h ^ stable_hash(v)) + 0x9E3779B97F4A7C15
        return h & _MASK
    if isinstance(x, frozenset):
        return _mix1(sum(_mix1(stable_hash(v)) for v in x) + 0x736574)
    fields = getattr(x, "__dataclass_fields__", None)
    if fields is not None:  # e.g. Product: hash its fields in order
        return stable_hash(tuple(getattr(x, f) for f in fields))
    if isinstance(x, numbers.Number):
        return _number_code(x)
    return hash(x) & _MASK


def _column_codes(c: np.ndarray) -> np.ndarray:
    kind = c.dtype.kind
    if kind == "b":
        return c.astype(np.uint64)
    if kind in "iu":
        if kind == "i":
            return c.astype(np.int64, copy=False).view(np.uint64)
        return c.astype(np.uint64)
    if kind == "f":
        f = c.astype(np.float64) + 0.0  # -0.0 becomes 0.0
        integral = (np.floor(f) == f) & (f >= -(2.0**63)) & (f < 2.0**63)  # as _float_code
        codes = f.view(np.uint64).copy()
        if integral.any():
            codes[integral] = f[integral].astype(np.int64).view(np.uint64)
        return codes
    vals = c.tolist()  # strings, tuples, None, ...: one code per element
    return np.fromiter((stable_hash(v) for v in vals), dtype=np.uint64, count=len(vals))


def hash_columns(cols: list[np.ndarray] | tuple[np.ndarray, ...], n: int) -> np.ndarray:
    """A uint64 hash per row of the given key columns, the same in every process."""
    h = np.full(n, 0x6464666C6F77, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in cols:
            h = _mix((h ^ _column_codes(c)) + _GOLD)
    return h


class Exchange(Operator):
    """Routes updates to the owners of their keys (see the module docstring).

    ``by_self``: the whole record is the key; otherwise records are ``(key, value)``.
    """

    name = "exchange"
    always_run = True
    state_version = 1
    PROBE_EVERY = 32
    MIN_COMBINE = 256  # smaller batches are sent as they are

    def __init__(self, worker: Worker, s: Stream, by_self: bool, name: str | None = None) -> None:
        super().__init__(worker, [s], name)
        self.by_self = by_self
        self.peers = worker.peers
        self.output.layout = s.layout
        #: the input frontier every worker sent at the last step (their meet is the output's)
        self.peer_frontiers: list[tuple[tuple[int, ...], ...]] = []
        self.sent = 0
        self.received = 0
        self.combine = True
        self._since_probe = 0

    def _key_width(self, layout: Layout) -> int:
        if self.by_self or not isinstance(layout, Tup) or len(layout.children) != 2:
            # A record that is not (key, value) is left for the arrangement to reject.
            return layout.width
        return layout.children[0].width

    def run(self, frontier: Antichain) -> None:
        items = self.take()
        layout = self.inputs[0].layout
        peers = self.peers
        parts: list[Updates | None] = [None] * peers
        if items and layout is not None:
            u = concat_updates(items) if len(items) > 1 else items[0]
            u = self._combine(u)
            n = len(u)
            kw = self._key_width(layout)
            owner = (hash_columns(u.data[:kw], n) % np.uint64(peers)).astype(np.int64)
            order = np.argsort(owner, kind="stable")
            bounds = np.searchsorted(owner[order], np.arange(peers + 1))
            for j in range(peers):
                lo, hi = int(bounds[j]), int(bounds[j + 1])
                if hi > lo:
                    parts[j] = u.take(order[lo:hi]) if hi - lo < n else u
            self.sent += n - (len(parts[self.worker.index] or ()))
        # the content-coded string dictionary, if any (see the module docstring)
        strings = self.worker.string_dict
        side = strings.take_new() if strings is not None else None
        msgs = [(parts[j], layout, frontier.elements, side) for j in range(peers)]
        received = self.worker.comm.exchange(msgs)
        for j, (_, _, _, got) in enumerate(received):
            if got and j != self.worker.index and strings is not None:
                strings.learn(got)
        self.peer_frontiers = [fr for _, _, fr, _ in received]
        for j, (part, lay, _, _) in enumerate(received):
            if part is not None and len(part):
                if j != self.worker.index:
                    self.received += len(part)
                self.output.push(part, lay)
            elif lay is not None and self.output.layout is None:
                self.output.set_layout(lay)

    def _combine(self, u: Updates) -> Updates:
        n = len(u)
        if n < self.MIN_COMBINE:
            return u
        if not self.combine:
            self._since_probe += 1
            if self._since_probe < self.PROBE_EVERY:
                return u
            self._since_probe = 0
        c = consolidate(u)
        self.combine = 2 * len(c) <= n
        return c

    def state(self) -> State:
        # (how well combining paid, and the traffic so far: statistics and tuning only)
        return {
            "combine": self.combine,
            "since_probe": self._since_probe,
            "sent": self.sent,
            "received": self.received,
        }

    def load_state(self, state: State) -> None:
        self.combine = state["combine"]
        self._since_probe = state["since_probe"]
        self.sent, self.received = state["sent"], state["received"]
