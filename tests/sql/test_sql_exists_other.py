"""``[NOT] EXISTS (... WHERE inner.k = outer.k AND inner.x <> outer.x)`` against DuckDB after
every commit, where the outer rows are among the inner ones (the subquery reads the outer
row's own table under weaker conditions: decided by counting distinct ``x`` per ``k``) and
near misses where they are not (another table, a stronger inner condition, a second ``<>``).

The stream has NULLs in ``k`` and in ``x`` on both sides, duplicate rows, deletes that make
a group's values all equal and then different again, an update of ``x`` (delete and insert
in one commit), an emptied table and a refill."""

from __future__ import annotations

import pytest
from oracle import Del, Ins, case, check_stream, explain_over

DDL = [
    "CREATE TABLE t (k INT, x INT, f INT, tag STRING)",
    "CREATE TABLE u (k INT, x INT, name STRING)",
]

_T = [
    (1, 10, 1, "a"),
    (1, 10, 1, "a"),  # a duplicate row: group 1 has one distinct x
    (2, 20, 1, "b"),
    (2, 21, 0, "b"),  # group 2: two distinct x, one of them not f > 0
    (2, 23, 1, "z"),  # not among group 2's rows tagged 'b'
    (3, None, 1, "c"),  # NULL x: never differs, never in the group's values
    (3, 30, 1, "c"),
    (None, 40, 1, "d"),  # NULL k: matches nothing
    (None, 41, 1, "d"),
    (4, 40, 0, "e"),
    (4, 41, 1, "e"),
    (4, 42, 1, None),
]
_U = [(1, 10, "one"), (1, 11, "one'"), (2, 20, "two"), (None, 20, "none"), (5, None, "five")]

STREAM: list[list[Ins | Del]] = [
    [],  # empty tables
    [Ins("t", _T), Ins("u", _U)],
    # group 2 left with one value, then (another commit) a second value arrives
    [Del("t", [(2, 21, 0, "b")])],
    [Ins("t", [(2, 22, 1, "b"), (1, 11, 0, "a")])],
    # an update of x (delete + insert in one commit); one copy of a duplicate deleted
    [Del("t", [(3, 30, 1, "c"), (1, 10, 1, "a")]), Ins("t", [(3, 31, 1, "c")])],
    # a NULL x becomes a value equal to the other one; group 4 loses its f > 0 rows
    [Del("t", [(3, None, 1, "c"), (4, 41, 1, "e"), (4, 42, 1, None)]), Ins("t", [(3, 31, 0, "c")])],
    [Del("t", [r for r in _T if r[0] is None]), Del("u", [(1, 11, "one'")])],
    # everything gone, then back
    [
        Del(
            "t",
            [
                (1, 10, 1, "a"),
                (2, 20, 1, "b"),
                (2, 22, 1, "b"),
                (1, 11, 0, "a"),
                (3, 31, 1, "c"),
                (3, 31, 0, "c"),
                (4, 40, 0, "e"),
                (2, 23, 1, "z"),
            ],
        )
    ],
    [Ins("t", _T)],
]

OTHER = "EXISTS (SELECT * FROM t b WHERE b.k = a.k AND b.x <> a.x"
NOT_OTHER = "NOT " + OTHER

EXISTS_OTHER = [
    # the outer rows are among the inner ones: counted per k alone
    case(f"SELECT a.k, a.x, a.f FROM t a WHERE {OTHER})", id="exists-same-table"),
    case(f"SELECT a.k, a.x, a.f FROM t a WHERE {NOT_OTHER})", id="not-exists-same-table"),
    case(f"SELECT a.k, a.x FROM t a WHERE a.f > 0 AND {OTHER})", id="exists-outer-filtered"),
    case(
        f"SELECT a.k, a.x FROM t a WHERE a.f > 0 AND {NOT_OTHER} AND b.f > 0)",
        id="not-exists-same-condition",
    ),
    case(
        f"SELECT a.k, a.x, a.tag FROM t a WHERE a.f > 0 AND a.tag IS NOT NULL "
        f"AND {OTHER}) AND {NOT_OTHER} AND b.f > 0)",
        id="both-like-tpch-q21",
    ),
    case(
        f"SELECT a.tag, count(*) AS n FROM t a, u WHERE a.k = u.k AND a.f > 0 "
        f"AND {OTHER}) AND {NOT_OTHER} AND b.f > 0) GROUP BY a.tag",
        id="both-joined-and-grouped",
    ),
    # near misses: the outer rows are not known to be among the inner ones
    case(
        f"SELECT a.k, a.x FROM t a WHERE a.f > 0 AND {NOT_OTHER} AND b.tag = 'b')",
        id="not-exists-other-condition",
    ),
    case(f"SELECT a.k, a.x FROM t a WHERE {OTHER} AND b.f > 0)", id="exists-stronger-inner"),
    case(f"SELECT a.k, a.x, a.name FROM u a WHERE {OTHER})", id="exists-other-table"),
    case(f"SELECT a.k, a.x, a.name FROM u a WHERE {NOT_OTHER})", id="not-exists-other-table"),
    case(
        f"SELECT a.k, a.x FROM t a WHERE {OTHER} AND b.f <> a.f)",
        id="exists-second-not-equal",
    ),
    case(
        f"SELECT a.k, a.x FROM t a WHERE {NOT_OTHER} AND b.f <> a.f)",
        id="not-exists-second-not-equal",
    ),
    case(
        "SELECT a.k, a.x FROM t a WHERE EXISTS (SELECT * FROM t b WHERE b.k = a.k AND b.f <> a.x)",
        id="exists-other-column",
    ),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), EXISTS_OTHER)
def test_exists_other(sql: str, duck: str | None, ordered: bool) -> None:
    """The view equals DuckDB's answer after every commit of the stream."""
    check_stream(DDL, [(sql, duck, ordered)], STREAM)


def _plan(sql: str) -> str:
    return explain_over(DDL, sql)


def test_counted_per_key_only_where_rows_are_among() -> None:
    """Outer rows among the inner ones need no lookup of ``(k, x)``; others do."""
    among = _plan(f"SELECT a.k FROM t a WHERE a.f > 0 AND {OTHER}) AND {NOT_OTHER} AND b.f > 0)")
    assert "_x" not in among.split("Distinct")[0]  # no semi / anti join on (k, x)
    assert "AntiJoin on [k = _k0]" in among and "SemiJoin on [k = _k0]" in among
    for sql in (
        f"SELECT a.k FROM t a WHERE a.f > 0 AND {NOT_OTHER} AND b.tag = 'b')",
        f"SELECT a.k FROM t a WHERE {OTHER} AND b.f > 0)",
        f"SELECT a.k FROM u a WHERE {OTHER})",
    ):
        assert "_x = _x" in _plan(sql) or "x = _x" in _plan(sql), sql
