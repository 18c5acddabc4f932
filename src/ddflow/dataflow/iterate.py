"""Loops in the user API: ``Variable`` (DD's loop variable) and the ``iterate`` helper.

A loop lives in a scope (``worker.iterative()``, or made by ``iterate``); inside it times are
``Product(outer, iteration)``. Outer collections come in with
``collection.enter(scope)`` and results go out with ``collection.leave()``.

``Variable(scope, initial)`` is the collection ``initial`` at iteration 0 and, at iteration
``i + 1``, whatever was ``set`` as its value at iteration ``i`` (DD's ``Variable::new_from``:
the feedback carries ``result - initial``, so ``initial`` needs diffs with subtraction).
``Variable(scope)`` without ``initial`` starts empty and needs no subtraction (DD's
``SemigroupVariable``): it is what the form ``x = logic(x) + initial`` uses, with
``initial`` folded into the body.
"""

from __future__ import annotations

from collections.abc import Callable

from ddflow.core.errors import DiffTypeError, ScopeError
from ddflow.dataflow.collection import Collection
from ddflow.engine.loop import Feedback
from ddflow.engine.scope import Scope
from ddflow.operators.linear import Concat

__all__ = ["Variable", "iterate"]


class Variable(Collection):
    """A loop variable of ``scope``: a collection defined by what it is ``set`` to."""

    def __init__(
        self, scope: Scope, initial: Collection | None = None, *, name: str | None = None
    ) -> None:
        if not isinstance(scope, Scope) or scope.parent is None:
            raise ScopeError("Variable needs a loop scope: worker.iterative() or a loop's scope")
        worker = scope.worker
        self.initial = initial
        self._feedback = Feedback(worker, scope, name)
        stream = self._feedback.output
        dt = None
        if initial is not None:
            if initial.scope is not scope:
                raise ScopeError(
                    f"a Variable's initial collection must be in the loop's scope ({scope!r}); "
                    "use initial.enter(scope)"
                )
            dt = initial.diff_type
            if dt is not None and not dt.abelian:
                raise DiffTypeError(
                    f"a Variable with an initial collection subtracts it again at the next "
                    f"iteration, and {dt.name} diffs have no subtraction: start the Variable "
                    "empty and fold the initial collection into the body (iterate(..., "
                    "fold_initial=True))"
                )
            stream = Concat(worker, [initial.stream, stream], name or "variable").output
        super().__init__(worker, stream, dt)
        self._set = False

    def set(self, result: Collection) -> Collection:
        """Make ``result`` the variable's value at the next iteration; returns ``result``."""
        if self._set:
            raise ScopeError("this Variable was already set")
        if result.scope is not self._feedback.scope:
            raise ScopeError(
                f"a Variable must be set to a collection of its own scope "
                f"({self._feedback.scope!r}), not of {result.scope!r}"
            )
        source = result
        if self.initial is not None:
            source = result.concat(self.initial.negate())
        elif self.diff_type is None:
            self.diff_type = result.diff_type
        self._feedback.connect(source.stream)
        self._set = True
        return result


def iterate(
    initial: Collection,
    body: Callable[[Collection], Collection],
    *,
    limit: int | None = None,
    fold_initial: bool = False,
    name: str | None = None,
) -> Collection:
    """The fixed point of ``body`` starting from ``initial`` (see ``Collection.iterate``)."""
    worker = initial.worker
    scope = worker.iterative(limit=limit, name=name, parent=initial.scope)
    entered = initial.enter(scope)
    if fold_initial:
        var = Variable(scope, name=name)
        var.diff_type = initial.diff_type
        result = body(var)
        if not isinstance(result, Collection):
            raise TypeError(f"iterate's body must return a Collection, got {type(result).__name__}")
        result = result.concat(entered)
    else:
        var = Variable(scope, entered, name=name)
        result = body(var)
        if not isinstance(result, Collection):
            raise TypeError(f"iterate's body must return a Collection, got {type(result).__name__}")
    var.set(result)
    return result.leave()
