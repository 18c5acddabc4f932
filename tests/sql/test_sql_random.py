"""Random queries from a seeded grammar (``querygen``), each checked against DuckDB after
every commit of a random change stream over three tables with NULLs and duplicates.

The default run checks ``FAST`` seeds (well under a minute); ``-m slow`` checks ``SLOW``
more. A seed that exposes a bug is listed in ``KNOWN`` with the bug's one-line reason, as
a strict expected failure: it fails once the bug is fixed, so the entry can go.
"""

from __future__ import annotations

import pytest
from oracle import Ins, Oracle
from querygen import AVOID, DDL, generate

FAST = 60
SLOW = 600

# seed -> what is wrong (each reduced to a minimal repro in FAILURES.md)
KNOWN: dict[int, str] = {}


def _param(seed: int, slow: bool = False) -> object:
    marks: list[pytest.MarkDecorator] = []
    if seed in KNOWN:
        marks.append(pytest.mark.xfail(strict=True, reason=KNOWN[seed]))
    if slow:
        marks.append(pytest.mark.slow)
    return pytest.param(seed, id=f"seed{seed}", marks=marks)


def run_seed(seed: int) -> None:
    """Checks the seed's query against DuckDB after every commit of its stream; even seeds
    make the view on empty tables, odd seeds after the first commit."""
    sc = generate(seed)
    o = Oracle(DDL)
    late = seed % 2
    for c in sc.commits[:late]:
        o.commit(c)
    o.view(sc.sql, sc.duck, sc.ordered)
    for c in sc.commits[late:]:
        o.commit(c)


@pytest.mark.parametrize("seed", [_param(s) for s in range(FAST)])
def test_random_query(seed: int) -> None:
    """A random query equals DuckDB's answer after every commit of a random stream."""
    run_seed(seed)


@pytest.mark.parametrize("seed", [_param(s, slow=True) for s in range(FAST, SLOW)])
def test_random_query_more(seed: int) -> None:
    """More random queries (-m slow)."""
    run_seed(seed)


def test_generator_is_deterministic() -> None:
    """The same seed gives the same query and stream (xfail lists stay meaningful)."""
    a, b = generate(7), generate(7)
    assert a.sql == b.sql and a.commits == b.commits


def test_duckdb_accepts_every_generated_query() -> None:
    """Every generated query is valid DuckDB SQL over the tables (the generator is sound)."""
    import duckdb

    con = duckdb.connect()
    for ddl in DDL:
        con.execute(ddl)
    for seed in range(SLOW):
        con.execute(generate(seed).duck).fetchall()


# one minimal repro per construct the generator avoids (querygen.AVOID): each fails while
# its bug is open; when one passes (strict xfail fails), drop the construct from AVOID
AVOIDED: dict[str, tuple[str, str, list[tuple[object, ...]]]] = {
    # "construct": ("CREATE TABLE t (...)", "SELECT ... FROM t ...", [rows of t]),
}


@pytest.mark.parametrize(
    "construct",
    sorted(AVOIDED)
    or [
        pytest.param("", marks=pytest.mark.skip(reason="querygen.AVOID is empty: nothing avoided"))
    ],
)
@pytest.mark.xfail(strict=True, reason="the avoided construct's bug is open (querygen.AVOID)")
def test_avoided_construct_still_fails(construct: str) -> None:
    """A construct the generator avoids still fails its repro (passing: put it back)."""
    assert construct in AVOID
    ddl, sql, rows = AVOIDED[construct]
    o = Oracle(ddl)
    o.commit([Ins("t", rows)])
    o.view(sql, ordered="ORDER BY" in sql)
    o.commit([])


def test_every_avoided_construct_has_a_repro() -> None:
    """Each construct in querygen.AVOID has a repro here (and no stale repros remain)."""
    assert set(AVOIDED) == set(AVOID)
