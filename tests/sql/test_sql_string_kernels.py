"""String functions done by one Arrow kernel over a batch's distinct strings give what the
per-string rules give, on any Unicode text, and views using them follow DuckDB."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow.sql as dsql
from ddflow.sql.expr import Call, Col, Ctx, Lit, _arrow_string_kernel, _string_kernel
from ddflow.sql.strings import StringDict
from ddflow.sql.types import BIGINT, BOOLEAN, STRING

texts = st.lists(st.text(max_size=12), min_size=1, max_size=40)

#: (op, constants, result type): every function ``_arrow_string_kernel`` takes on
CASES = [
    ("substr", [1, 2], STRING),
    ("substr", [3], STRING),
    ("substr", [2, 0], STRING),
    ("substr", [5, 100], STRING),
    ("substr", [0, 3], STRING),
    ("left", [3], STRING),
    ("left", [0], STRING),
    ("length", [], BIGINT),
    ("reverse", [], STRING),
    ("starts_with", ["a"], BOOLEAN),
    ("ends_with", ["é"], BOOLEAN),
    ("contains", ["ab"], BOOLEAN),
    ("contains", [""], BOOLEAN),
]


def _call(op: str, consts: list[object], t: object) -> Call:
    args = (
        Col(0, STRING, False),
        *(Lit(c, BIGINT if isinstance(c, int) else STRING) for c in consts),
    )
    return Call(op, args, t, False)  # type: ignore[arg-type]


@pytest.mark.parametrize("dialect", ["spark", "sqlite"])
@pytest.mark.parametrize(("op", "consts", "t"), CASES)
@settings(max_examples=40, deadline=None)
@given(vals=texts)
def test_arrow_kernel_equals_the_per_string_rule(
    dialect: str, op: str, consts: list[object], t: object, vals: list[str]
) -> None:
    """The Arrow kernel's result for each distinct string equals the per-string rule's
    (decoded from codes where the result is a string)."""
    ctx = Ctx(StringDict(), dialect)
    e = _call(op, consts, t)
    fast = _arrow_string_kernel(op, consts, e, ctx)
    if fast is None:
        assert op == "substr" and dialect == "sqlite" and consts[0] == 0
        return
    s = np.empty(len(vals), dtype=object)
    s[:] = vals
    want = _string_kernel(op, consts, e, ctx, raw=True)(s)
    got = fast(s)
    if t is STRING:
        got = ctx.strings.decode(got)
    assert got.tolist() == want.tolist()


def test_negative_positions_keep_the_per_string_rules() -> None:
    """Positions counted from the end, negative lengths and SQLite's position 0 are not
    given to Arrow (its slices read them otherwise)."""
    ctx = Ctx(StringDict(), "spark")
    assert _arrow_string_kernel("substr", [-2, 1], _call("substr", [-2, 1], STRING), ctx) is None
    assert _arrow_string_kernel("substr", [2, -1], _call("substr", [2, -1], STRING), ctx) is None
    sq = Ctx(StringDict(), "sqlite")
    assert _arrow_string_kernel("substr", [0, 2], _call("substr", [0, 2], STRING), sq) is None


def test_views_with_string_kernels_follow_duckdb() -> None:
    """substr, left, length and reverse of a column of mostly distinct, partly non-ASCII
    strings, grouped and filtered in a view, equal DuckDB's after commits with deletes."""
    duckdb = pytest.importorskip("duckdb")
    rng = np.random.default_rng(5)
    alphabet = list("abcé日x-0")
    db = dsql.Database()
    db.execute("CREATE TABLE t (id INT, s STRING)")
    sql = (
        "SELECT substr(s, 2, 3) AS a, left(s, 2) AS b, length(s) AS n, count(*) AS c "
        "FROM t WHERE reverse(s) <> s GROUP BY substr(s, 2, 3), left(s, 2), length(s)"
    )
    v = db.view(sql)
    live: list[tuple[int, str]] = []
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INT, s VARCHAR)")
    for step in range(6):
        new = [
            (step * 1000 + i, "".join(rng.choice(alphabet, int(rng.integers(0, 9)))))
            for i in range(300)
        ]
        gone = [live.pop(int(rng.integers(0, len(live)))) for _ in range(min(len(live), 80))]
        db.insert("t", new)
        if gone:
            db.delete("t", gone)
        db.commit()
        live.extend(new)
        con.execute("DELETE FROM t")
        if live:
            con.executemany("INSERT INTO t VALUES (?, ?)", live)
        want = sorted(con.execute(sql).fetchall())
        assert sorted(v.rows()) == want
