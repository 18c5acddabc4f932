"""``try_sum`` / ``try_avg``, ``mode() WITHIN GROUP (ORDER BY ...)`` and ``ORDER BY ALL`` in
``ddflow.sql`` equal Spark SQL's answers on the same rows, with Spark itself as the oracle:
after every commit of a change stream (inserts, deletes, duplicates, NULLs), Spark is
asked again over the rows then live.

The BIGINT and DECIMAL values summed in a group share a sign there: Spark adds them up in
the order rows come and gives NULL when a running sum leaves the type (a grouped decimal
sum too: its running sum is kept in a row of the result type; a global one only at the
end), so with mixed signs its answer depends on that order; with one sign it is NULL
exactly where the total overflows, as in ddflow (whose answer is decided on the exact
total, see ``tests/sql/test_sql_try_aggregates.py``).
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import ddflow.sql as dsql

_COLUMNS = "g int, b bigint, i int, d decimal(38,2), e decimal(10,2), s string, x double"
_UNIT = 2**59  # (16 of them are 2**63: a few rows of these leave BIGINT's range)


def _dec(unscaled: int, scale: int) -> Decimal:
    return Decimal(f"{unscaled}E-{scale}")  # (exact: no context rounding)


def _row(rng: random.Random) -> tuple[Any, ...]:
    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.15 else v

    g = rng.randint(0, 3)
    top = 10**38 - 1  # (DECIMAL(38,2)'s widest unscaled value)
    # groups 0 and 1 positive, 2 negative, 3 small of both signs (never near the edge)
    sign = 1 if g < 2 else -1
    return (
        g,
        maybe(rng.randint(-3, 3) if g == 3 else sign * rng.randint(1, 9) * _UNIT),
        maybe(rng.choice([rng.randint(-3, 3), rng.randint(-(2**31), 2**31 - 1)])),
        maybe(
            _dec(
                rng.randint(-99, 99)
                if g == 3
                else sign * rng.choice([rng.randint(top // 3, top), rng.randint(1, 99)]),
                2,
            )
        ),
        maybe(_dec(rng.randint(-(10**10) + 1, 10**10 - 1), 2)),
        maybe(rng.choice(["pear", "Apple", "fig", "", "fig2"])),
        maybe(rng.choice([-2.5, 0.5, 1.0, 3.25])),
    )


def _stream(seed: int, steps: int) -> list[tuple[list[Any], list[Any]]]:
    """Commits of (rows inserted, rows deleted): a duplicate, a group emptied."""
    rng = random.Random(seed)
    live: list[Any] = []
    out = []
    for step in range(steps):
        ins = [_row(rng) for _ in range(rng.randint(3, 12))]
        if step == 1 and live:
            ins.append(live[0])
        dels = rng.sample(live, k=min(len(live), rng.randint(0, 6)))
        if step == steps - 2:
            dels = [r for r in live if r[0] == 1]
        for r in dels:
            live.remove(r)
        live.extend(ins)
        out.append((ins, dels))
    return out


def _check_stream(
    spark: Any, name: str, queries: list[str], ordered: bool
) -> list[list[list[tuple[Any, ...]]]]:
    """Each query's view equals Spark's answer (and names) after every commit of the
    stream; the answers, per commit and query."""
    db = dsql.Database()
    db.execute(f"CREATE TABLE {name} ({_COLUMNS})")
    views = [db.view(q) for q in queries]
    live: list[Any] = []
    history = []
    for ins, dels in _stream(len(name), 6):
        db.insert(name, ins)
        db.delete(name, dels)
        db.commit()
        for r in dels:
            live.remove(r)
        live.extend(ins)
        spark.createDataFrame(live, _COLUMNS).createOrReplaceTempView(name)
        history.append([])
        for q, v in zip(queries, views, strict=True):
            df = spark.sql(q)
            want = [tuple(r) for r in df.collect()]
            got = v.rows()
            if not ordered:
                want, got = sorted(want, key=repr), sorted(got, key=repr)
            assert got == want, f"{q}\n  Spark  {want}\n  ddflow {got}"
            assert v.columns == df.columns
            history[-1].append(got)
    return history


def test_try_sum_and_try_avg_equal_spark_sql_after_every_commit(spark: Any) -> None:
    """Sums of BIGINTs that leave the range and come back as rows leave, wide decimals
    whose sums and averages do not fit their types, DISTINCT, a global aggregate."""
    queries = [
        "SELECT g, try_sum(b), try_avg(b), try_sum(DISTINCT b), try_sum(i), try_avg(i), "
        "try_sum(d), try_avg(d), try_avg(DISTINCT d), try_sum(e), try_avg(e), count(*), "
        "count(b), count(d) FROM ddflow_try GROUP BY g",
        "SELECT try_sum(d), try_avg(d), try_sum(i), try_avg(e) FROM ddflow_try WHERE g < 2",
        "SELECT g FROM ddflow_try GROUP BY g HAVING try_sum(b) IS NULL",
    ]
    history = _check_stream(spark, "ddflow_try", queries, ordered=False)
    # a group's BIGINT sum (column 1) and DECIMAL sum (column 6) overflowed at one commit
    # (NULL over values) and were back in range at a later one
    for col, count in ((1, 12), (6, 13)):
        seen = [{r[0]: (r[col], r[count]) for r in answers[0]} for answers in history]
        assert any(
            seen[t][g][0] is None and seen[t][g][1] and later.get(g, (None,))[0] is not None
            for t in range(len(seen))
            for later in seen[t + 1 :]
            for g in seen[t]
        ), f"column {col} never came back: {seen}"


def test_mode_within_group_equals_spark_sql_after_every_commit(spark: Any) -> None:
    """Ties go to the least value ascending and to the greatest with DESC (strings by
    their text); the result columns named as Spark names them (direction reversed)."""
    queries = [
        "SELECT g, mode() WITHIN GROUP (ORDER BY i % 3), "
        "mode() WITHIN GROUP (ORDER BY i % 3 DESC), mode() WITHIN GROUP (ORDER BY s), "
        "mode() WITHIN GROUP (ORDER BY s DESC), mode() WITHIN GROUP (ORDER BY x DESC), "
        "mode() WITHIN GROUP (ORDER BY x), mode() WITHIN GROUP (ORDER BY e DESC NULLS FIRST) "
        "FROM ddflow_mode GROUP BY g",
        "SELECT mode() WITHIN GROUP (ORDER BY s DESC), mode() WITHIN GROUP (ORDER BY x) "
        "FROM ddflow_mode",
    ]
    _check_stream(spark, "ddflow_mode", queries, ordered=False)


def test_order_by_all_equals_spark_sql_after_every_commit(spark: Any) -> None:
    """The rows in Spark's order (every column, left to right), each direction and NULLs
    order, with LIMIT / OFFSET, grouped and over a UNION."""
    queries = [
        "SELECT s, i, g FROM ddflow_order ORDER BY ALL",
        "SELECT x, s FROM ddflow_order ORDER BY ALL DESC",
        "SELECT s, g FROM ddflow_order ORDER BY ALL NULLS LAST",
        "SELECT g, s, x FROM ddflow_order ORDER BY ALL DESC NULLS FIRST LIMIT 5 OFFSET 2",
        "SELECT s, count(*) FROM ddflow_order GROUP BY s ORDER BY ALL DESC",
        "SELECT s FROM ddflow_order UNION SELECT CAST(g AS STRING) FROM ddflow_order ORDER BY ALL",
    ]
    _check_stream(spark, "ddflow_order", queries, ordered=True)


def test_order_by_a_column_named_all_equals_spark_sql(spark: Any) -> None:
    """Where ``all`` names a column (of the table, selected or not, or a result alias),
    ``ORDER BY ALL`` orders by it in Spark: the same rows in the same order here."""
    columns = "a int, `all` int, b int"
    rows = [(1, 30, 7), (2, 10, 9), (3, 20, 8), (4, None, 6), (5, 15, 5)]
    queries = [
        "SELECT a, `all` FROM ddflow_named ORDER BY ALL",
        "SELECT a, `all` AS z FROM ddflow_named ORDER BY ALL DESC",
        "SELECT a FROM ddflow_named ORDER BY ALL",
        "SELECT b AS `all`, a FROM ddflow_named ORDER BY ALL DESC",
        "SELECT a, b FROM ddflow_named ORDER BY `all` DESC NULLS FIRST",
    ]
    db = dsql.Database()
    db.execute(f"CREATE TABLE ddflow_named ({columns})")
    views = [db.view(q) for q in queries]
    db.insert("ddflow_named", rows[:4])
    db.commit()
    db.insert("ddflow_named", rows[4:])
    db.delete("ddflow_named", rows[1:2])
    db.commit()
    live = [r for r in rows if r != rows[1]]
    spark.createDataFrame(live, columns).createOrReplaceTempView("ddflow_named")
    for q, v in zip(queries, views, strict=True):
        assert v.rows() == [tuple(r) for r in spark.sql(q).collect()], q
