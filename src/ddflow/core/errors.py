"""Errors a user of ddflow can cause, each naming what was wrong and what to do.

All subclass ``DDError`` so callers can catch ddflow's own errors in one clause. Every error
is raised before any state changes, so the dataflow stays usable after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "DDError",
    "DataError",
    "DiffTypeError",
    "FrontierError",
    "DataflowClosedError",
    "OperatorError",
    "RetractionError",
    "ScopeError",
    "SessionClosedError",
    "TimeError",
    "UnknownInputError",
    "both_errors",
]


class DDError(Exception):
    """Base class of every error ddflow raises on purpose."""


class TimeError(DDError, TypeError):
    """A time before the session's time, a time of the wrong kind, or times of mixed kinds."""


class FrontierError(DDError, ValueError):
    """A frontier that goes backwards."""


class SessionClosedError(DDError, RuntimeError):
    """An input session was used after ``close()``."""


class DiffTypeError(DDError, TypeError):
    """A diff of the wrong type for the collection, or an operation the diff type lacks."""


class DataError(DDError, TypeError):
    """Data an arrangement cannot order or hash, or that does not fit the collection's shape.

    ``refused`` holds the input batches an operator refused: the worker drops them from the
    operator's inbox (everything else is left as it was), so a later step goes on without
    them instead of meeting them again. Empty when nothing was refused.
    """

    def __init__(self, *args: object, refused: Sequence[object] = ()) -> None:
        super().__init__(*args)
        self.refused = tuple(refused)


class TotalOverflowError(DataError):
    """A total over many records (a sum) that leaves the type it must fit. It says
    something of the whole collection, not of any one record: a sample of the records may
    overflow where the whole does not."""


class UnknownInputError(DDError, KeyError):
    """A dataflow asked for an input the job was not given."""

    def __str__(self) -> str:  # KeyError would show the message's repr
        return str(self.args[0]) if self.args else ""


class OperatorError(DDError, RuntimeError):
    """A user function raised inside an operator; the original exception is ``__cause__``."""


class ScopeError(DDError, ValueError):
    """Collections of different scopes used together, ``leave`` outside a loop, a loop
    ``Variable`` that was never set, or set twice."""


class DataflowClosedError(DDError, RuntimeError):
    """The worker stopped after an error it cannot recover from (for example a loop that
    reached its iteration limit mid-way); build the dataflow again."""


class RetractionError(DiffTypeError):
    """A retraction (non-positive multiplicity) reached a collection whose diffs cannot be
    subtracted (a monoid such as ``MinSum``). The update is already inside the dataflow
    and cannot be taken back, so the worker closes (``DataflowClosedError`` afterwards)."""


_BOTH: dict[tuple[type, type], type | None] = {}


def both_errors(outer: type[DDError], inner: type[BaseException]) -> type[Any] | None:
    """A class that is both ``outer`` (how an error reached the caller: a failed worker, a
    Spark job that could not start) and ``inner`` (what went wrong: a ``DataError``...), so
    the caller can catch either; ``None`` when no class can be both (incompatible layouts)."""
    key = (outer, inner)
    if key not in _BOTH:
        try:
            _BOTH[key] = type(f"{outer.__name__}_{inner.__name__}", (outer, inner), {})
        except TypeError:
            _BOTH[key] = None
    return _BOTH[key]
