"""String functions done by one Arrow kernel over a batch's distinct strings give what the
per-string rules give, on any Unicode text, and views using them follow DuckDB."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow.sql as dsql
from ddflow.sql.expr import Call, Col, Ctx, Lit, evaluate
from ddflow.sql.rows import Frame
from ddflow.sql.strings import StringDict
from ddflow.sql.types import BIGINT, BOOLEAN, STRING

texts = st.lists(st.text(max_size=12), min_size=1, max_size=40)
#: (no NUL: SQLite's text functions stop at one; no lone surrogates: sqlite3 takes UTF-8)
sqlite_texts = st.lists(
    st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12),
    min_size=1,
    max_size=40,
)


def _spark_substr(s: str, pos: int, n: int | None) -> str:
    """Spark's substring, written out: 1-based, 0 as 1, a negative position from the end,
    the length clipped at both ends."""
    start = pos - 1 if pos > 0 else (len(s) + pos if pos < 0 else 0)
    end = len(s) if n is None else start + n
    start, end = max(start, 0), min(end, len(s))
    return s[start:end] if end > start else ""


#: (op, constants, result type, what Spark gives for one string)
CASES = [
    ("substr", [1, 2], STRING, lambda s: _spark_substr(s, 1, 2)),
    ("substr", [3], STRING, lambda s: _spark_substr(s, 3, None)),
    ("substr", [2, 0], STRING, lambda s: _spark_substr(s, 2, 0)),
    ("substr", [5, 100], STRING, lambda s: _spark_substr(s, 5, 100)),
    ("substr", [0, 3], STRING, lambda s: _spark_substr(s, 0, 3)),
    ("substr", [-2, 1], STRING, lambda s: _spark_substr(s, -2, 1)),
    ("substr", [-3], STRING, lambda s: _spark_substr(s, -3, None)),
    ("left", [3], STRING, lambda s: s[:3]),
    ("left", [0], STRING, lambda s: ""),
    ("length", [], BIGINT, len),
    ("reverse", [], STRING, lambda s: s[::-1]),
    ("starts_with", ["a"], BOOLEAN, lambda s: s.startswith("a")),
    ("ends_with", ["é"], BOOLEAN, lambda s: s.endswith("é")),
    ("contains", ["ab"], BOOLEAN, lambda s: "ab" in s),
    ("contains", [""], BOOLEAN, lambda s: True),
]


def _run(op: str, consts: list[object], t: object, dialect: str, vals: list[str]) -> list[object]:
    """``op`` evaluated over a batch holding ``vals`` (as codes), results as Python values."""
    ctx = Ctx(StringDict(), dialect)
    codes = ctx.strings.encode_list(vals)
    args = (
        Col(0, STRING, False),
        *(Lit(c, BIGINT if isinstance(c, int) else STRING) for c in consts),
    )
    got, nulls = evaluate(Call(op, args, t, False), Frame([codes], 1), ctx)  # type: ignore[arg-type]
    assert nulls is None or not nulls.any()
    return ctx.strings.decode(got).tolist() if t is STRING else got.tolist()


@pytest.mark.parametrize(("op", "consts", "t", "rule"), CASES)
@settings(max_examples=40, deadline=None)
@given(vals=texts)
def test_string_functions_give_sparks_answers(
    op: str, consts: list[object], t: object, rule: object, vals: list[str]
) -> None:
    """Each function over a batch of any Unicode strings (repeats among them) gives what
    Spark's rule gives for each string."""
    assert _run(op, consts, t, "spark", vals) == [rule(v) for v in vals]  # type: ignore[operator]


@pytest.mark.parametrize(
    ("pos", "n"), [(1, 2), (3, None), (2, 0), (5, 100), (0, 3), (0, None), (-2, 1), (2, -1)]
)
@settings(max_examples=25, deadline=None)
@given(vals=sqlite_texts)
def test_sqlite_substr_follows_sqlite(pos: int, n: int | None, vals: list[str]) -> None:
    """substr in the SQLite dialect gives sqlite3's answer for each string, positions 0
    and negative lengths included."""
    import sqlite3

    con = sqlite3.connect(":memory:")
    consts: list[object] = [pos] if n is None else [pos, n]
    q = "SELECT substr(?, ?)" if n is None else "SELECT substr(?, ?, ?)"
    want = [con.execute(q, (v, *consts)).fetchone()[0] for v in vals]
    assert _run("substr", consts, STRING, "sqlite", vals) == want


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


@pytest.mark.parametrize(("op", "consts", "t", "rule"), CASES)
def test_lone_surrogates_take_the_per_string_rule(
    op: str, consts: list[object], t: object, rule: object
) -> None:
    """A batch holding a string with a lone surrogate (not UTF-8, so not for Arrow) still
    gets each function's answer."""
    vals = ["\ud800ab", "abé", "", "\udfff"]
    assert _run(op, consts, t, "spark", vals) == [rule(v) for v in vals]  # type: ignore[operator]


def _arrow_rows(rows: list[tuple[int, str | None, int | None]]) -> object:
    import pyarrow as pa

    cols = list(zip(*rows, strict=True))
    return pa.table(
        [
            pa.array(cols[0], pa.int32()),
            pa.array(cols[1], pa.string()),
            pa.array(cols[2], pa.int32()),
        ],
        names=["id", "s", "k"],
    )


@pytest.mark.parametrize("dialect", ["spark", "sqlite"])
@pytest.mark.parametrize("arrow", [False, True])
def test_slices_in_where_are_decided_as_rows_come_in(dialect: str, arrow: bool) -> None:
    """A WHERE on a slice of a string from its start (``substr(s, 1, 2) IN (...)``,
    ``left(s, 1) = 'é'``, ``substr(s, 3) LIKE ...``) is decided on the rows as they come
    (the scan's prefilter: the explained plan shows it on the scan), on rows given as
    tuples or Arrow tables, with NULLs, empty and non-ASCII strings; a slice from the end
    stays in the dataflow. Every view equals the dialect's database after each commit
    with deletes (DuckDB for Spark's dialect, sqlite3 for SQLite's)."""
    import sqlite3

    duckdb = pytest.importorskip("duckdb")
    rng = np.random.default_rng(11)
    alphabet = ["a", "b", "é", "日", "-", "1"]
    db = dsql.Database(dialect=dialect)
    db.execute("CREATE TABLE t (id INT, s STRING, k INT)")
    queries = [
        "SELECT substr(s, 1, 2) AS p, count(*) AS c, sum(k) AS sk FROM t "
        "WHERE substr(s, 1, 2) IN ('ab', 'é日', 'b-', '1') GROUP BY substr(s, 1, 2)",
        "SELECT id, k FROM t WHERE substr(s, 1, 1) = 'é' AND k > 3",
        "SELECT id FROM t WHERE substr(s, 3) LIKE '%a%' OR substr(s, 2, 2) = '日-'",
        "SELECT count(*) AS c FROM t WHERE substr(s, 2, 0) <> '' OR substr(s, 4, 100) >= 'b'",
        "SELECT id FROM t WHERE substr(s, -2, 2) = 'ab'",
    ]
    if dialect == "spark":
        queries.append("SELECT id FROM t WHERE left(s, 2) NOT IN ('aa', 'é日')")
    views = [db.view(q) for q in queries]
    for q in queries[:4]:
        scan = [ln for ln in db.explain(q).splitlines() if "Scan t" in ln]
        assert scan and "where" in scan[0] and "substr" in scan[0], db.explain(q)
    if dialect == "spark":
        oracle = duckdb.connect()
        oracle.execute("CREATE TABLE t (id INT, s VARCHAR, k INT)")
    else:
        oracle = sqlite3.connect(":memory:")
        oracle.execute("CREATE TABLE t (id INT, s TEXT, k INT)")
    live: list[tuple[int, str | None, int | None]] = []
    for step in range(5):
        new = []
        for i in range(400):
            s = "".join(rng.choice(alphabet, int(rng.integers(0, 6))))
            new.append(
                (
                    step * 1000 + i,
                    None if i % 17 == 0 else s,
                    None if i % 13 == 0 else int(rng.integers(0, 9)),
                )
            )
        gone = [live.pop(int(rng.integers(0, len(live)))) for _ in range(min(len(live), 120))]
        if arrow:
            db.insert("t", _arrow_rows(new))
            if gone:
                db.delete("t", _arrow_rows(gone))
        else:
            db.insert("t", new)
            if gone:
                db.delete("t", gone)
        db.commit()
        live.extend(new)
        oracle.execute("DELETE FROM t")
        oracle.executemany("INSERT INTO t VALUES (?, ?, ?)", live)
        for q, v in zip(queries, views, strict=True):
            want = sorted(oracle.execute(q).fetchall(), key=repr)
            assert sorted(v.rows(), key=repr) == want, (q, step)
