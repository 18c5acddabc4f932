"""SQLite's sqllogictest sample (tests/sql/slt/) run as incremental views on ddflow.sql.

Every query of a vendored script becomes a view before the rows arrive; the rows come in
three commits with deletes, re-inserts and updates, and after every commit each view must
equal SQLite on the same rows (slt_runner.py says how). A query may be unsupported (it
raises ``UnsupportedSQL``), but a wrong answer or a crash must be listed in
``slt/known_failures.txt``, and an entry there that no longer fails must go. The pass count
of each file must not fall below ``slt/floors.json``.

By default each file runs its first ``FAST_QUERIES`` queries; the whole sample (several
minutes) runs with ``-m slow`` or ``DDFLOW_SLT_FULL=1``. After a change to ddflow.sql,
refresh the lists with::

    PYTHONPATH=src python tests/sql/slt_runner.py \
        --write-known-failures tests/sql/slt/known_failures.txt --write-floors all
    PYTHONPATH=src python tests/sql/slt_runner.py --write-floors fast
"""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path

import pytest
import slt_runner as slt

FAST_QUERIES = slt.FAST_QUERIES
FILES = slt.sample_files()
KNOWN = slt.read_known_failures(slt.SLT_DIR / "known_failures.txt")
FLOORS = json.loads((slt.SLT_DIR / "floors.json").read_text())

# Queries where SQLite 3.40 (the oracle here) does not print the file's recorded answer:
# group_concat's order follows the rows' physical order, which differs once rows are fed in
# commits, and SQLite now raises "integer overflow" where the file recorded no rows.
ORACLE_DIFFERS = {
    ("evidence/slt_lang_aggfunc.test", 125),
    ("evidence/slt_lang_aggfunc.test", 239),
    ("evidence/slt_lang_aggfunc.test", 244),
    ("evidence/slt_lang_aggfunc.test", 253),
    ("evidence/slt_lang_aggfunc.test", 480),
}


def _name(p: Path) -> str:
    return p.relative_to(slt.SLT_DIR).as_posix()


def _full_requested(config: pytest.Config) -> bool:
    expr = config.option.markexpr or ""
    return bool(os.environ.get("DDFLOW_SLT_FULL")) or ("slow" in expr and "not" not in expr)


def _check(result: slt.FileResult, floor: int) -> None:
    lines = {q.rec.line for q in result.plan.queries.values() if q.qid in result.outcomes}
    failing = result.failures()
    known_here = {k: v for k, v in KNOWN.items() if k[0] == result.name and k[1] in lines}
    new = {k: o for k, o in failing.items() if k not in known_here}
    fixed = sorted(k for k in known_here if k not in failing)
    report = []
    for (f, ln), o in sorted(new.items()):
        report.append(f"{f}:{ln} {o.status}: {o.detail.splitlines()[0][:300]}")
    for f, ln in fixed:
        report.append(
            f"{f}:{ln} now {result.outcomes_by_line()[ln].status}: remove it from "
            "known_failures.txt"
        )
    assert not report, "\n".join(report)
    passed = result.counts()["passed"]
    assert passed >= floor, f"{result.name}: {passed} queries pass, the floor is {floor}"


@pytest.mark.parametrize("path", FILES, ids=_name)
def test_slt_first_queries(path: Path) -> None:
    """The first queries of each vendored script: exact after every commit, or unsupported."""
    result = slt.run_file(path, max_queries=FAST_QUERIES)
    _check(result, FLOORS["fast"].get(result.name, 0))


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES, ids=_name)
def test_slt_whole_file(path: Path, request: pytest.FixtureRequest) -> None:
    """Every query of each vendored script: exact after every commit, or unsupported."""
    if not _full_requested(request.config):
        pytest.skip("the whole sample takes minutes: run with -m slow or DDFLOW_SLT_FULL=1")
    result = slt.run_file(path)
    _check(result, FLOORS["all"].get(result.name, 0))


@pytest.mark.parametrize("path", FILES, ids=_name)
def test_oracle_prints_recorded_answers(path: Path) -> None:
    """SQLite here, printed the way sqllogictest prints, gives each file's recorded answers."""
    name = _name(path)
    plan = slt.load_plan(path)
    differs = {(name, plan.queries[q].rec.line): d for q, d in plan.oracle_disagrees.items()}
    unexpected = {k: d for k, d in differs.items() if k not in ORACLE_DIFFERS}
    assert not unexpected, unexpected


def test_parse_script() -> None:
    """Records, conditions for the engine 'sqlite', listed and hashed results are parsed."""
    text = (
        "hash-threshold 8\n\nstatement ok\nCREATE TABLE t(a INTEGER)\n\n"
        "onlyif mysql # comment\nquery I nosort\nSELECT 1\n----\n1\n\n"
        "skipif postgresql\nquery IT rowsort label-1\nSELECT a,\n 'x' FROM t\n----\n"
        "3 values hashing to 0123456789abcdef0123456789abcdef\n\n"
        "statement error\nDROP TABLE nope\n\nhalt\n"
    )
    recs = slt.parse_script(text)
    assert [r.kind for r in recs] == [
        "hash-threshold",
        "statement",
        "query",
        "query",
        "statement",
        "halt",
    ]
    assert recs[0].threshold == 8
    assert recs[2].skip and not recs[3].skip
    assert recs[3].sql == "SELECT a,\n 'x' FROM t" and recs[3].label == "label-1"
    assert recs[3].expected_hash == (3, "0123456789abcdef0123456789abcdef")
    assert recs[2].expected == ("1",) and recs[4].expect_ok is False


def test_format_value() -> None:
    """Values print as sqllogictest's SQLite driver prints them."""
    f = slt.format_value
    assert [f(None, "I"), f(3, "I"), f(2**31, "I"), f(-7.9, "I"), f("12ab", "I")] == [
        "NULL",
        "3",
        "-2147483648",
        "-7",
        "12",
    ]
    assert [f(0.0625, "R"), f(-9223372036854775808.0, "R"), f(2, "R"), f("1.5x", "R")] == [
        "0.063",
        "-9223372036854776000.000",
        "2.000",
        "1.500",
    ]
    assert [f("", "T"), f("a\tb", "T"), f(1.0, "T"), f(1e20, "T"), f(7, "T")] == [
        "(empty)",
        "a@b",
        "1.0",
        "1.0e+20",
        "7",
    ]
    assert slt.result_values([("b", "1"), ("a", "2")], "rowsort") == ["a", "2", "b", "1"]
    assert slt.result_values([("b", "1"), ("a", "2")], "valuesort") == ["1", "2", "a", "b"]
    assert slt.values_hash(["1", "2"]) == "6ddb4095eb719e2a9f0a3f95677d24e0"


SCRIPT = """\
statement ok
CREATE TABLE t1(a INTEGER, b INTEGER, c TEXT)

statement ok
INSERT INTO t1 VALUES(1, 10, 'x')

statement ok
INSERT INTO t1 VALUES(2, 20, 'y')

statement ok
INSERT INTO t1 VALUES(3, NULL, 'z')

query II rowsort
SELECT a, b FROM t1 WHERE a > 1
----
2
20
3
NULL

query I nosort
SELECT a FROM t1 ORDER BY a DESC
----
3
2
1

query I nosort
SELECT count(b) FROM t1
----
2

statement ok
DELETE FROM t1 WHERE a = 2

query I nosort
SELECT sum(a) FROM t1
----
4
"""


class _Stale(slt._Run):
    """Views that never lose a row: retractions do not reach them."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.seen: dict[int, collections.Counter[slt.Row]] = {}

    def _rows(self, q, v):  # type: ignore[no-untyped-def]
        rows = super()._rows(q, v)
        if rows is None:
            return None
        seen = self.seen.setdefault(q, collections.Counter())
        seen |= collections.Counter(rows)
        return list(seen.elements())


class _Reversed(slt._Run):
    """Answers in reverse order (a multiset still right)."""

    def _rows(self, q, v):  # type: ignore[no-untyped-def]
        rows = super()._rows(q, v)
        return None if rows is None else rows[::-1]


def _outcomes(run_cls: type[slt._Run]) -> dict[int, slt.Outcome]:
    plan = slt.plan_file("inline.test", SCRIPT)
    slt.check_oracle(plan)
    outcomes, _ = slt.run_plan(plan, run_cls=run_cls)
    return {plan.queries[q].rec.line: o for q, o in outcomes.items()}


def test_runner_passes_a_correct_engine() -> None:
    """ddflow.sql as it is gets these simple queries right at every commit."""
    assert {ln: o.status for ln, o in _outcomes(slt._Run).items()} == {
        13: "passed",
        21: "passed",
        28: "passed",
        36: "passed",
    }


def test_runner_catches_a_view_that_misses_deletions() -> None:
    """A view stuck with rows it should have lost is reported wrong, at a commit."""
    out = _outcomes(_Stale)
    assert all(o.status == "wrong" for o in out.values()), out
    assert all(not o.final for o in out.values())


def test_runner_checks_order_only_where_the_file_fixes_it() -> None:
    """Reversed rows fail only the nosort query with ORDER BY, at its segment's end."""
    out = _outcomes(_Reversed)
    assert out[21].status == "wrong" and out[21].final
    assert {out[13].status, out[28].status, out[36].status} == {"passed"}
