"""``try_sum`` / ``try_avg`` stay equal to a from-scratch answer after every commit of a
change stream, through sums that leave their type's range and come back as rows leave.

The oracle shares no code with ``ddflow``: exact Python ints and fractions and Spark 4's
rules (checked against a live Spark in ``tests/spark/test_sql_spark_try_order_all.py``):
``try_sum`` of integers is a BIGINT, NULL where the sum does not fit 64 bits; of a
``DECIMAL(p, s)`` a ``DECIMAL(min(38, p + 10), s)``, NULL where the sum has more digits;
``try_avg`` of integers is the DOUBLE ``avg`` (never NULL for a group with values), of a
decimal a ``DECIMAL(min(38, p + 4), min(38, s + 4))`` rounded half away from zero, NULL where
it has more digits than that holds. Both are NULL over no values. Spark adds a group's
integers (and, grouped, its decimals) in the order rows come and gives NULL when a running
sum leaves the type, even one whose total fits; a view's answer must not depend on that
order, so it is decided on the exact total (Spark's answer whenever no running sum leaves
the range, as when the values share a sign).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from oracle import apply_commit

import ddflow.sql as dsql

_UNIT = 2**59  # (16 of them are 2**63: a few rows of these leave BIGINT's range)


def _try_sum_int(vals: Sequence[int]) -> int | None:
    if not vals:
        return None
    s = sum(vals)
    return s if -(2**63) <= s < 2**63 else None


def _avg_int(vals: Sequence[int]) -> float | None:
    return float(sum(vals)) / len(vals) if vals else None


def _dec(unscaled: int, scale: int) -> Decimal:
    """The DECIMAL value of ``unscaled`` at ``scale`` places (exact: no context rounding)."""
    return Decimal(f"{unscaled}E-{scale}")


def _unscaled(v: Decimal, scale: int) -> int:
    """``v`` (a value of a DECIMAL of ``scale`` places) as its unscaled int, exactly."""
    sign, digits, exp = v.as_tuple()
    assert isinstance(exp, int) and exp + scale >= 0
    n = int("".join(map(str, digits)) or "0") * 10 ** (exp + scale)
    return -n if sign else n


def _try_sum_dec(vals: Sequence[Decimal], p: int, s: int) -> Decimal | None:
    if not vals:
        return None
    total = sum(_unscaled(v, s) for v in vals)
    if abs(total) >= 10 ** min(38, p + 10):
        return None
    return _dec(total, s)


def _try_avg_dec(vals: Sequence[Decimal], p: int, s: int) -> Decimal | None:
    if not vals:
        return None
    rp, rs = min(38, p + 4), min(38, s + 4)
    exact = Fraction(sum(_unscaled(v, s) for v in vals) * 10 ** (rs - s), len(vals))
    q, r = divmod(abs(exact.numerator), exact.denominator)
    q += 2 * r >= exact.denominator  # (half away from zero)
    if abs(q) >= 10**rp:
        return None
    return _dec(q if exact >= 0 else -q, rs)


def _big(rng: random.Random) -> int | None:
    if rng.random() < 0.15:
        return None
    return rng.choice(
        [rng.randint(-16, 15) * _UNIT, rng.randint(8, 15) * _UNIT, rng.randint(-9, 9)]
    )


def _wide(rng: random.Random) -> Decimal | None:
    if rng.random() < 0.15:
        return None
    top = 10**38 - 1  # (DECIMAL(38,2)'s widest unscaled value)
    return _dec(
        rng.choice(
            [rng.randint(top // 3, top), -rng.randint(top // 3, top), rng.randint(-999, 999)]
        ),
        2,
    )


def _small(rng: random.Random) -> Decimal | None:
    return None if rng.random() < 0.15 else _dec(rng.randint(-(10**10) + 1, 10**10 - 1), 2)


def _row(rng: random.Random) -> tuple[Any, ...]:
    i = None if rng.random() < 0.15 else rng.randint(-(2**31), 2**31 - 1)
    return (rng.randint(0, 3), _big(rng), i, _wide(rng), _small(rng))


_GROUPED = (
    "SELECT g, try_sum(b), try_avg(b), try_sum(d), try_avg(d), try_sum(DISTINCT b), "
    "try_avg(DISTINCT d), try_sum(i), try_avg(e), try_sum(e), count(*) FROM t GROUP BY g"
)


def _grouped(live: list[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
    out = set()
    for g in {r[0] for r in live}:
        rows = [r for r in live if r[0] == g]
        b = [r[1] for r in rows if r[1] is not None]
        d = [r[3] for r in rows if r[3] is not None]
        i = [r[2] for r in rows if r[2] is not None]
        e = [r[4] for r in rows if r[4] is not None]
        out.add(
            (
                g,
                _try_sum_int(b),
                _avg_int(b),
                _try_sum_dec(d, 38, 2),
                _try_avg_dec(d, 38, 2),
                _try_sum_int(sorted(set(b))),
                _try_avg_dec(sorted(set(d)), 38, 2),
                _try_sum_int(i),
                _try_avg_dec(e, 10, 2),
                _try_sum_dec(e, 10, 2),
                len(rows),
            )
        )
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_try_sum_and_try_avg_equal_their_definition_after_every_commit(seed: int) -> None:
    """Grouped and global, plain and DISTINCT, BIGINT / INT / DECIMAL(38,2) / DECIMAL(10,2)
    arguments with NULLs, duplicates, deletes and a group emptied: every answer as defined,
    a NULL exactly where the exact total (or average) leaves the result type."""
    rng = random.Random(seed)
    db = dsql.Database()
    db.execute("CREATE TABLE t (g INT, b BIGINT, i INT, d DECIMAL(38,2), e DECIMAL(10,2))")
    grouped = db.view(_GROUPED)
    whole = db.view("SELECT try_sum(b), try_avg(d), try_sum(DISTINCT d), count(*) FROM t")
    nulls = db.view("SELECT g FROM t GROUP BY g HAVING try_sum(b) IS NULL")
    live: list[tuple[Any, ...]] = []
    overflowed = came_back = 0
    for step in range(10):
        ins = [_row(rng) for _ in range(rng.randint(0, 9))]
        if step == 2 and live:
            ins.append(live[0])  # a duplicate
        dels = rng.sample(live, k=min(len(live), rng.randint(0, 5)))
        if step == 6:
            dels = [r for r in live if r[0] == 1]  # a group emptied
        before = {r[0]: r[1] for r in _grouped(live)}
        apply_commit(db, live, ins, dels)
        want = _grouped(live)
        assert set(grouped.rows()) == want
        for r in want:
            overflowed += r[1] is None and bool([x for x in live if x[0] == r[0] and x[1]])
            came_back += r[1] is not None and r[0] in before and before[r[0]] is None
        b = [r[1] for r in live if r[1] is not None]
        d = [r[3] for r in live if r[3] is not None]
        assert whole.rows() == [
            (
                _try_sum_int(b),
                _try_avg_dec(d, 38, 2),
                _try_sum_dec(sorted(set(d)), 38, 2),
                len(live),
            )
        ]
        assert sorted(nulls.rows()) == sorted((r[0],) for r in want if r[1] is None)
    assert overflowed and came_back  # (the stream crossed the range both ways)


def test_a_sum_that_overflows_is_null_until_rows_leave() -> None:
    """One group's BIGINT and DECIMAL sums leave their range (``sum`` would raise) and come
    back after deletes; a never-NULL argument (whose count is the row count) the same."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (g INT, b BIGINT NOT NULL, d DECIMAL(38,2))")
    view = db.view("SELECT g, try_sum(b), try_sum(d), try_avg(d), count(*) FROM t GROUP BY g")
    top = 2**63 - 1
    big = Decimal(10**36 - 1)  # (36 integer digits: as wide as the sum holds)
    neg = Decimal(1 - 10**36)  # (-big, exactly: Decimal arithmetic keeps 28 digits)
    db.insert("t", [(1, top, big), (2, 5, Decimal(1))])
    db.commit()
    assert sorted(view.rows()) == [
        (1, top, big, None, 1),  # (an average of DECIMAL(38,6) has 32 integer digits)
        (2, 5, Decimal(1), Decimal(1), 1),
    ]
    db.insert("t", [(1, 1, Decimal(1))])
    db.commit()
    assert sorted(view.rows())[0] == (1, None, None, None, 2)
    db.insert("t", [(1, -(2**63), neg)])  # the total is back in range
    db.commit()
    assert sorted(view.rows())[0] == (1, 0, Decimal(1), Decimal("0.333333"), 3)
    db.delete("t", [(1, -(2**63), neg)])
    db.commit()
    assert sorted(view.rows())[0] == (1, None, None, None, 2)
    db.delete("t", [(1, 1, Decimal(1))])
    db.commit()
    assert sorted(view.rows())[0] == (1, top, big, None, 1)
    plain = db.view("SELECT g, sum(b) FROM t GROUP BY g")
    db.insert("t", [(1, 1, None)])
    with pytest.raises(dsql.TotalOverflowError):  # (sum raises where try_sum is NULL)
        db.commit()
    del plain


def test_the_order_rows_come_in_does_not_decide_an_overflow() -> None:
    """``(MAX, 1, -1)``: a running sum in that order overflows, in another it does not;
    the total fits, so the answer is the total however the rows come (one commit, or one
    row a commit)."""
    top = 2**63 - 1
    rows = [(top,), (1,), (-1,)]
    for commits in ([rows], [[r] for r in rows], [[r] for r in reversed(rows)]):
        db = dsql.Database()
        db.execute("CREATE TABLE t (b BIGINT)")
        view = db.view("SELECT try_sum(b), try_avg(b) FROM t")
        for part in commits:
            db.insert("t", part)
            db.commit()
        assert view.rows() == [(top, float(top) / 3)]


def test_try_sum_and_try_avg_over_no_values_and_of_doubles() -> None:
    """NULL over no rows and over NULLs only; of a DOUBLE the plain sum and average (an
    infinity, not NULL); types BIGINT / DOUBLE / DECIMAL as Spark's."""
    db = dsql.Database()
    db.execute("CREATE TABLE t (g INT, x DOUBLE, i INT, d DECIMAL(10,2))")
    whole = db.view("SELECT try_sum(x), try_avg(x), try_sum(i), try_avg(i), try_sum(d) FROM t")
    grouped = db.view("SELECT g, try_sum(i), try_avg(d) FROM t GROUP BY g")
    db.commit()
    assert whole.rows() == [(None, None, None, None, None)]
    assert [str(t) for t in whole.types] == [
        "DOUBLE",
        "DOUBLE",
        "BIGINT",
        "DOUBLE",
        "DECIMAL(20,2)",
    ]
    db.insert("t", [(1, None, None, None), (2, math.inf, 2**31 - 1, Decimal("1.25"))])
    db.insert("t", [(2, 1e308, 2**31 - 1, Decimal("2.50"))])
    db.commit()
    assert whole.rows() == [(math.inf, math.inf, 2**32 - 2, 2**31 - 1.0, Decimal("3.75"))]
    assert sorted(grouped.rows()) == [(1, None, None), (2, 2**32 - 2, Decimal("1.875000"))]


def test_try_sum_over_a_join_grouped_by_its_key() -> None:
    """Grouped by the join key, a sum over one side is that side's sum times the other
    side's count of rows per key (the join is not built): NULL when that product leaves
    BIGINT, back when rows of the other side leave."""
    db = dsql.Database()
    db.execute("CREATE TABLE a (k INT, v BIGINT)")
    db.execute("CREATE TABLE b (k INT, w INT)")
    view = db.view(
        "SELECT a.k, try_sum(a.v), try_sum(b.w), count(*) FROM a JOIN b ON a.k = b.k GROUP BY a.k"
    )
    db.insert("a", [(1, 2**62), (2, 3)])
    db.insert("b", [(1, 10), (2, 20)])
    db.commit()
    assert sorted(view.rows()) == [(1, 2**62, 10, 1), (2, 3, 20, 1)]
    db.insert("b", [(1, 11)])  # two rows of 2**62: 2**63
    db.commit()
    assert sorted(view.rows()) == [(1, None, 21, 2), (2, 3, 20, 1)]
    db.delete("b", [(1, 10)])
    db.commit()
    assert sorted(view.rows()) == [(1, 2**62, 11, 1), (2, 3, 20, 1)]


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("SELECT try_avg(i > 1) FROM t", dsql.SQLError),
        ("SELECT try_sum(i) OVER (ORDER BY i) FROM t", dsql.UnsupportedSQL),
        ("SELECT try_sum(i, 1) FROM t", dsql.UnsupportedSQL),
    ],
)
def test_bad_try_aggregates_are_refused_with_a_reason(sql: str, error: type) -> None:
    db = dsql.Database()
    db.execute("CREATE TABLE t (i INT, s STRING)")
    with pytest.raises(error):
        db.view(sql)
