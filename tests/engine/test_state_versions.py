"""Operator state is declared and versioned: what each stateful operator's ``state()`` holds
is recorded here with its ``state_version``, and a change of one without the other fails.

Why: a checkpoint is read back by a later ddflow. An operator whose state changed shape
(an attribute renamed, added or dropped) must raise its ``state_version``, which enters every
checkpoint's fingerprint, so an old checkpoint is refused with a clear error instead of being
half-restored. This file is where the change is acknowledged: update ``RECORDED`` together
with the version.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest

import ddflow as dd
from ddflow.engine.checkpoint import CheckpointError
from ddflow.engine.exchange import Exchange
from ddflow.engine.operator import Operator
from ddflow.operators.arrange import Arrange as PlainArrange
from ddflow.trace.spine import Spine, TraceHandle

#: class -> (state_version, the keys of its state(); "a.b" for key b of a nested state)
RECORDED: dict[str, tuple[int, list[str]]] = {
    "Arrange": (1, ["held", "key_layout", "spine", "upper", "val_layout"]),
    "Capture": (1, ["parts"]),
    "Consolidate": (1, ["held"]),
    "CountFew": (1, ["held", "totals", "upper"]),
    "CountTotal": (1, ["handle"]),
    "CountTotalPrivate": (1, ["held", "totals", "upper"]),
    "Exchange": (1, ["combine", "received", "sent", "since_probe"]),
    "Explode": (1, ["diff_type"]),
    "Feedback": (1, ["held"]),
    "InputOp": (
        1,
        [
            "frontier",
            "session",
            "session.chunks",
            "session.closed",
            "session.diffs",
            "session.layout",
            "session.leaf_kinds",
            "session.records",
            "session.time",
            "session.times",
            "session.user_time",
        ],
    ),
    "Join": (1, ["a_ack", "b_ack", "ha", "hb"]),
    "Leave": (1, ["held"]),
    "MinMaxTotal": (1, ["handle", "lower", "out_h", "out_spine", "rows_read"]),
    "Reduce": (
        1,
        [
            "in_dt",
            "in_h",
            "lower",
            "out_dt",
            "out_h",
            "out_spine",
            "out_val_layout",
            "pend_keys",
            "pend_times",
            "pending",
        ],
    ),
    # the trace's parts, embedded in the operators' states (their versions enter every
    # fingerprint too)
    "Spine": (1, ["key_width", "logical", "merges_done", "physical", "queued", "stack", "upper"]),
    "TraceHandle": (1, ["closed", "logical", "physical"]),
}

#: nested states recorded key by key (the other values are data)
NESTED = {"InputOp": ("session",)}


def schema(name: str, state: dict[str, Any]) -> list[str]:
    """The recorded form of a state's keys."""
    keys = list(state)
    for k in NESTED.get(name, ()):
        keys += [f"{k}.{sub}" for sub in state[k]]
    return sorted(keys)


def problem(name: str, version: int | None, keys: list[str]) -> str | None:
    """What is wrong with a class's state against the record (None: nothing)."""
    if name not in RECORDED:
        return f"{name} declares state (version {version}) not recorded here: record {keys}"
    want_version, want_keys = RECORDED[name]
    if version == want_version and keys != want_keys:
        return (
            f"{name}'s state changed from {want_keys} to {keys} but its state_version is "
            f"still {version}: raise it (old checkpoints must be refused, not half-read) "
            "and record the new keys here"
        )
    if version != want_version:
        return (
            f"{name}'s state_version is {version} but {want_version} is recorded: record "
            f"version {version} with its keys {keys} here"
        )
    return None


def every_operator() -> dd.Worker:
    """A dataflow holding every stateful operator (built, not run)."""
    w = dd.Worker()
    s, c = w.new_collection()
    kv = c.map(lambda x: (x % 3, x))
    kv.join(kv).capture()
    kv.min().capture()
    kv.min_total().capture()
    c.count_total().capture()
    c.arrange_by_self().count_total().capture()
    c.count_total(few=True).capture()
    c.consolidate().capture()
    c.explode(lambda x: [(x, 1)]).capture()
    Exchange(w, c.stream, by_self=True)
    c.iterate(lambda x: x.concat(x).distinct()).capture()
    return w


def _stateful_classes() -> set[type[Operator]]:
    for m in pkgutil.walk_packages(dd.__path__, "ddflow."):
        if not m.name.startswith(("ddflow.sql", "ddflow.tpch", "ddflow.__main__")):
            importlib.import_module(m.name)
    out, todo = set(), [Operator]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            todo.append(sub)
            if sub.state_version is not None and sub.__module__.startswith("ddflow."):
                out.add(sub)
    return out


def test_every_stateful_operator_is_recorded() -> None:
    """Every class of ddflow that declares state is in the record, and the dataflow used to
    check them holds one of each."""
    names = {cls.__name__ for cls in _stateful_classes()}
    assert names <= set(RECORDED), sorted(names - set(RECORDED))
    held = {type(op).__name__ for op in every_operator().operators if op.state_version}
    assert held == names, sorted(names ^ held)


def test_state_matches_its_recorded_version() -> None:
    """Each stateful operator's state has the keys recorded for its state_version (a rename
    without a new version fails here)."""
    problems = []
    for op in every_operator().operators:
        if op.state_version is not None:
            name = type(op).__name__
            problems.append(problem(name, op.state_version, schema(name, op.state())))
    spine = Spine(0, 1)
    problems.append(problem("Spine", Spine.state_version, schema("Spine", spine.state())))
    problems.append(
        problem(
            "TraceHandle", TraceHandle.state_version, schema("TraceHandle", spine.handle().state())
        )
    )
    assert not [p for p in problems if p], "\n".join(p for p in problems if p)


class Arrange(PlainArrange):
    """``Arrange`` as a developer left it after renaming its ``held`` updates ``waiting``,
    without raising the state version."""

    def state(self) -> dict[str, Any]:
        st = super().state()
        st["waiting"] = st.pop("held")
        return st

    def load_state(self, state: dict[str, Any]) -> None:
        st = dict(state)
        st["held"] = st.pop("waiting")
        super().load_state(st)


class BumpedArrange(Arrange):
    """The same rename, with the state version raised as it must be."""

    state_version = 2


BumpedArrange.__name__ = "Arrange"


def _counts(arrange: type[PlainArrange]) -> tuple[dd.Worker, Any, Any]:
    w = dd.Worker()
    s, c = w.new_collection()
    cap = dd.Arranged(c, arrange(w, c.stream, True)).count().capture()
    return w, s, cap


def test_a_rename_without_a_new_version_fails() -> None:
    """Renaming an attribute of a stateful operator's state without raising its version is
    caught by the record check."""
    w, _, _ = _counts(Arrange)
    op = next(op for op in w.operators if isinstance(op, Arrange))
    msg = problem("Arrange", op.state_version, schema("Arrange", op.state()))
    assert msg is not None and "raise it" in msg


@pytest.mark.parametrize("renamed", [Arrange, BumpedArrange], ids=["same version", "bumped"])
def test_an_old_checkpoint_after_a_state_change_is_refused(
    tmp_path: Any, renamed: type[PlainArrange]
) -> None:
    """A checkpoint written before the rename is refused whole with an error saying why,
    whether or not the version was raised; the worker is left as it was."""
    w, s, _ = _counts(PlainArrange)
    s.insert(1)
    s.advance_to(1)
    w.run()
    w.checkpoint(tmp_path)
    w2, s2, cap2 = _counts(renamed)
    why = "state version" if renamed is BumpedArrange else "state format differs"
    with pytest.raises(CheckpointError, match=why):
        w2.restore(tmp_path)
    s2.insert(5)
    s2.close()
    w2.run()
    assert cap2.updates() == [((5, 1), 0, 1)]  # nothing of the checkpoint was loaded
