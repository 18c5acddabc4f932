"""Filters on strings decided as rows come in, before their strings are encoded.

A view's condition on a table's string column (``o_comment NOT LIKE '%special%'``,
``r_name = 'EUROPE'``, ``p_type IN (...)``) is evaluated on the rows as they arrive, with
Arrow's vectorized string kernels, and only the rows it keeps enter the dataflow. The
column itself then needs no dictionary codes at all when nothing else reads it, which
for long, mostly distinct strings (comments, names) is most of the cost of reading them.

``split`` moves such conditions from a ``Filter`` over a ``Scan`` into the scan's
``prefilter``; ``keep`` evaluates one on a ``RowBatch`` with SQL's three-valued logic (a
row is kept when the condition is TRUE).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ddflow.sql.batch import LazyStrings, RowBatch
from ddflow.sql.expr import Call, Col, Expr, Lit
from ddflow.sql.plan import Filter, Plan, Scan
from ddflow.sql.types import BOOLEAN

__all__ = ["keep", "split"]

_CMP = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater",
        "ge": "greater_equal"}


def _raw(e: Expr, scan: Scan) -> bool:
    """Whether ``e`` (over the scan's fields) reads only string fields and string
    literals, with operators the Arrow kernels evaluate."""
    if isinstance(e, Col):
        return scan.fields[e.index].type.kind == "string"
    if isinstance(e, Lit):
        return e.value is None or isinstance(e.value, str)
    if not isinstance(e, Call):
        return False
    if e.op in ("and", "or", "not"):
        return all(_raw(a, scan) for a in e.args)
    if e.op in ("is_null", "is_not_null"):
        return isinstance(e.args[0], Col) and _raw(e.args[0], scan)
    if e.op == "like":
        return isinstance(e.args[0], Col) and isinstance(e.args[1], Lit) and \
            _raw(e.args[0], scan) and isinstance(e.args[1].value, str) and \
            (e.extra[0] == "\\" or (e.extra[0] is None and "\\" not in e.args[1].value))
    if e.op in _CMP:
        a, b = e.args
        return (isinstance(a, Col) and isinstance(b, Lit) or isinstance(a, Lit)
                and isinstance(b, Col)) and _raw(a, scan) and _raw(b, scan)
    if e.op == "in":
        return isinstance(e.args[0], Col) and _raw(e.args[0], scan) and all(
            v is None or isinstance(v, str) for v in e.extra)
    if e.op in ("starts_with", "ends_with", "contains"):
        return isinstance(e.args[0], Col) and isinstance(e.args[1], Lit) and \
            _raw(e.args[0], scan) and isinstance(e.args[1].value, str)
    return False


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Call) and e.op == "and":
        out: list[Expr] = []
        for a in e.args:
            out.extend(_conjuncts(a))
        return out
    return [e]


def _to_table(e: Expr, scan: Scan) -> Expr:
    """``e`` over the scan's fields as an expression over the table's columns."""
    cols = scan.columns if scan.columns is not None else tuple(range(len(scan.fields)))
    if isinstance(e, Col):
        return Col(cols[e.index], e.type, e.nullable, e.name)
    if isinstance(e, Call):
        return Call(e.op, tuple(_to_table(a, scan) for a in e.args), e.type, e.nullable,
                    e.extra)
    return e


def _and(parts: list[Expr]) -> Expr | None:
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = Call("and", (out, p), BOOLEAN, out.nullable or p.nullable)
    return out


def split(plan: Plan) -> Plan:
    """``plan`` with string conditions on scans moved into the scans' prefilters."""
    import dataclasses

    if isinstance(plan, Filter):
        # the conditions of a run of filters directly over a scan
        conj: list[Expr] = []
        node: Plan = plan
        while isinstance(node, Filter):
            conj = _conjuncts(node.predicate) + conj
            node = node.input
        if isinstance(node, Scan):
            scan = node
            moved = [c for c in conj if _raw(c, scan)]
            if not moved:
                return plan
            rest = [c for c in conj if not _raw(c, scan)]
            pre = [scan.prefilter] if scan.prefilter is not None else []
            pre += [_to_table(c, scan) for c in moved]
            new_scan = Scan(scan.table, scan.fields, scan.columns, _and(pre))
            kept = _and(rest)
            return new_scan if kept is None else Filter(new_scan, kept)
    kids = plan.inputs()
    if not kids:
        return plan
    new = [split(k) for k in kids]
    if all(a is b for a, b in zip(new, kids, strict=True)):
        return plan
    # rebuild the node with its new inputs (the dataclass fields that hold plans)
    changes: dict[str, Any] = {}
    it = iter(new)
    for f in dataclasses.fields(plan):  # type: ignore[arg-type]
        v = getattr(plan, f.name)
        if isinstance(v, Plan):
            changes[f.name] = next(it)
        elif isinstance(v, tuple) and v and all(isinstance(x, Plan) for x in v):
            changes[f.name] = tuple(next(it) for _ in v)
    return dataclasses.replace(plan, **changes)  # type: ignore[type-var]


def keep(pred: Expr, b: RowBatch) -> np.ndarray:
    """The rows of ``b`` for which ``pred`` (over the table's columns) is TRUE."""

    import pyarrow as pa
    import pyarrow.compute as pc

    out = _eval(pred, b)
    if isinstance(out, pa.Scalar):  # a condition without columns
        return np.full(b.n, bool(out.as_py()), dtype=bool)
    mask = pc.fill_null(out, False) if out.null_count else out
    return np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool)


def _column(b: RowBatch, i: int) -> Any:
    import pyarrow as pa

    c = b.cols[i]
    assert isinstance(c, LazyStrings)
    raw = c.raw
    if isinstance(raw, list):
        raw = pa.array(raw, type=pa.string())
        c.raw = raw
    return raw


def _eval(e: Expr, b: RowBatch) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(e, Col):
        return _column(b, e.index)
    if isinstance(e, Lit):
        return pa.scalar(e.value, type=pa.bool_() if e.type == BOOLEAN else pa.string())
    assert isinstance(e, Call)
    op = e.op
    if op == "and":
        out = _eval(e.args[0], b)
        for a in e.args[1:]:
            out = pc.and_kleene(out, _eval(a, b))
        return out
    if op == "or":
        out = _eval(e.args[0], b)
        for a in e.args[1:]:
            out = pc.or_kleene(out, _eval(a, b))
        return out
    if op == "not":
        return pc.invert(_eval(e.args[0], b))
    if op == "is_null":
        return pc.is_null(_eval(e.args[0], b))
    if op == "is_not_null":
        return pc.is_valid(_eval(e.args[0], b))
    if op == "like":
        pat = e.args[1]
        assert isinstance(pat, Lit)
        return pc.match_like(_eval(e.args[0], b), pat.value, ignore_case=bool(e.extra[1]))
    if op in _CMP:
        x, y = e.args
        return getattr(pc, _CMP[op])(_eval(x, b), _eval(y, b))
    if op == "in":
        col = _eval(e.args[0], b)
        vals = [v for v in e.extra if v is not None]
        hit = pc.is_in(col, value_set=pa.array(vals, type=pa.string()))
        if col.null_count:
            hit = pc.if_else(pc.is_null(col), pa.scalar(None, pa.bool_()), hit)
        if any(v is None for v in e.extra):
            hit = pc.if_else(hit, True, pa.scalar(None, pa.bool_()))
        return hit
    if op in ("starts_with", "ends_with"):
        pat = e.args[1]
        assert isinstance(pat, Lit)
        fn = pc.starts_with if op == "starts_with" else pc.ends_with
        return fn(_eval(e.args[0], b), pattern=pat.value)
    if op == "contains":
        pat = e.args[1]
        assert isinstance(pat, Lit)
        return pc.match_substring(_eval(e.args[0], b), pattern=pat.value)
    raise ValueError(f"{op} is not a string filter")
