"""Semi and anti joins of the same rows on the same keys, merged into one semi join with
the right sides' keys met first, against DuckDB after every commit of the emp / dept stream
(NULL keys on every side, duplicate rows, updates that flip matches, tables emptied and
refilled); and shapes that must stay apart (two anti joins, other keys, NULL-safe keys)."""

from __future__ import annotations

import pytest
from oracle import case, check_stream, explain_over
from sqldata import EMP_DDL, EMP_STREAM

EU = "e.dept IN (SELECT dept FROM dept WHERE region = 'EU')"
RICH = "e.dept IN (SELECT dept FROM emp WHERE salary > 90)"
NOT_US = "NOT EXISTS (SELECT 1 FROM dept d WHERE d.dept = e.dept AND d.region = 'US')"
NO_REPORTS = "NOT EXISTS (SELECT 1 FROM emp r WHERE r.mgr = e.dept)"

MERGED = [
    case(f"SELECT e.id, e.name FROM emp e WHERE {EU} AND {RICH}", id="semi-semi"),
    case(f"SELECT e.id, e.name FROM emp e WHERE {EU} AND {NOT_US}", id="semi-anti"),
    case(f"SELECT e.id, e.name FROM emp e WHERE {NOT_US} AND {EU}", id="anti-semi"),
    case(
        f"SELECT e.id, e.name FROM emp e WHERE {EU} AND {RICH} AND {NOT_US}",
        id="semi-semi-anti",
    ),
    case(
        f"SELECT e.dept, count(*) AS n FROM emp e WHERE {RICH} AND {NOT_US} GROUP BY e.dept",
        id="under-an-aggregate",
    ),
    # must stay apart
    case(f"SELECT e.id FROM emp e WHERE {NOT_US} AND {NO_REPORTS}", id="anti-anti"),
    case(
        f"SELECT e.id FROM emp e WHERE {EU} AND e.mgr IN (SELECT dept FROM dept)",
        id="other-keys",
    ),
    case(
        f"SELECT e.id FROM emp e WHERE {EU} AND EXISTS (SELECT 1 FROM dept d "
        "WHERE d.dept = e.dept AND d.dname < e.name)",
        id="then-null-safe",
    ),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), MERGED)
def test_merged_semijoins(sql: str, duck: str | None, ordered: bool) -> None:
    """The view equals DuckDB's answer after every commit."""
    check_stream(EMP_DDL, [(sql, duck, ordered)], EMP_STREAM)


def _plan(sql: str) -> str:
    return explain_over(EMP_DDL, sql)


def test_one_semijoin_of_the_rows() -> None:
    """The employees are matched once, against the departments' keys met first."""
    for sql in (
        f"SELECT e.name FROM emp e WHERE {EU} AND {RICH} AND {NOT_US}",
        f"SELECT e.name FROM emp e WHERE {NOT_US} AND {EU}",
    ):
        lines = _plan(sql).splitlines()
        assert lines[1].strip() == "SemiJoin on [dept = _k0]", sql
        assert lines[2].strip() == "Scan emp [name, dept]", sql
    assert "AntiJoin on [dept = _k0]" in _plan(
        f"SELECT e.name FROM emp e WHERE {NOT_US} AND {NO_REPORTS}"
    )
