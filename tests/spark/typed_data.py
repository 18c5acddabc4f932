"""Two small typed tables and a seeded stream of changes to them, for the Spark SQL oracle.

``t`` has a column of every type ``maintain`` takes (BIGINT key; STRING, INT, SMALLINT,
TINYINT, DECIMAL(12,2), DOUBLE, FLOAT, DATE, TIMESTAMP, BOOLEAN, each NULL in about one
row in six); ``u`` joins it on ``t.i = u.k2`` (a nullable INT, so some rows never match)
and carries a DECIMAL(20,5) and a DATE. ``refreshes(seed, n)`` gives ``n`` refreshes: a
load, then inserts, deletes and updates of both tables (updates change the join column,
the group column, decimals, timestamps, and NULL out or fill in values), the last one
deleting every row with ``y > 100`` so the filtered global aggregate sees no rows.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

import pyarrow as pa
from spark_oracle import Change, Row, dele, ins, upd

__all__ = ["ORDERED", "SCHEMAS", "VIEWS", "refreshes", "t_row", "u_row"]

SCHEMAS: dict[str, pa.Schema] = {
    "t": pa.schema(
        [
            ("k", pa.int64()),
            ("g", pa.string()),
            ("i", pa.int32()),
            ("s", pa.int16()),
            ("y", pa.int8()),
            ("d", pa.decimal128(12, 2)),
            ("f", pa.float64()),
            ("r", pa.float32()),
            ("dt", pa.date32()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("b", pa.bool_()),
        ]
    ),
    "u": pa.schema(
        [
            ("k2", pa.int32()),
            ("name", pa.string()),
            ("w", pa.decimal128(20, 5)),
            ("day", pa.date32()),
        ]
    ),
}

#: Views over ``t`` and ``u``; every output column is named (the names Spark gives
#: unnamed expressions are tested on their own).
VIEWS: dict[str, str] = {
    "by_g": "SELECT g, count(*) AS n, count(d) AS nd, sum(d) AS sd, avg(d) AS ad, "
    "min(d) AS lo, max(ts) AS last_ts, min(dt) AS first_dt, sum(i) AS si, "
    "sum(y) AS sy, avg(f) AS af, max(r) AS mr FROM t GROUP BY g",
    "total": "SELECT count(*) AS n, sum(d) AS sd, max(g) AS mg, min(ts) AS mts "
    "FROM t WHERE y > 100",
    "joined": "SELECT t.k, t.g, u.name, t.d * u.w AS dw, u.day FROM t JOIN u ON t.i = u.k2 "
    "WHERE t.ts >= TIMESTAMP '2024-01-01 00:00:00'",
    "left": "SELECT u.k2, u.name, count(t.k) AS n, sum(t.d) AS sd, max(t.dt) AS md "
    "FROM u LEFT JOIN t ON t.i = u.k2 GROUP BY u.k2, u.name",
    "proj": "SELECT k, upper(g) AS ug, dt, date_add(dt, 7) AS week_later, ts, d + 1 AS d1, "
    "s * 2 AS s2, CASE WHEN f > 0 THEN 'pos' WHEN f <= 0 THEN 'nonpos' END AS sign, "
    "coalesce(b, false) AS bb FROM t WHERE g < 'm' OR g IS NULL",
    "top": "SELECT k, g, d FROM t WHERE d IS NOT NULL ORDER BY d DESC, k LIMIT 5",
    "distinct_g": "SELECT dt, count(DISTINCT g) AS ng, count(*) AS n FROM t GROUP BY dt "
    "HAVING count(*) > 1",
    "star": "SELECT * FROM t",
}

#: Views whose ORDER BY determines the order of their rows.
ORDERED = ("top",)

_WORDS = ["alpha", "beta", "Zed", "zulu", "", "über", "mango", "Mango", "kiwi", "a b"]
_NAMES = ["north", "south", "east", "west", "Ünter", ""]
_UTC = dt.UTC


def _maybe(rng: random.Random, v: Any, p: float = 1 / 6) -> Any:
    return None if rng.random() < p else v


def t_row(rng: random.Random, k: int) -> Row:
    """A random row of ``t`` with key ``k``."""
    return (
        k,
        _maybe(rng, rng.choice(_WORDS)),
        _maybe(rng, rng.randrange(0, 8)),
        _maybe(
            rng, rng.randrange(-32768, 32768) if rng.random() < 0.2 else rng.randrange(-300, 300)
        ),
        _maybe(rng, rng.choice([-128, 127, 101, 0, -1, rng.randrange(-128, 128)])),
        _maybe(rng, Decimal(rng.randrange(-(10**10) + 1, 10**10)) / 100),
        _maybe(rng, rng.uniform(-1e6, 1e6) if rng.random() < 0.8 else rng.choice([0.0, -0.5])),
        _maybe(rng, rng.randrange(-4000, 4000) / 8),
        _maybe(rng, dt.date(2023, 12, 25) + dt.timedelta(days=rng.randrange(0, 14))),
        _maybe(
            rng,
            dt.datetime(2023, 12, 30, tzinfo=_UTC)
            + dt.timedelta(microseconds=rng.randrange(0, 5 * 86400 * 10**6)),
        ),
        _maybe(rng, rng.random() < 0.5),
    )


def u_row(rng: random.Random, k2: int | None) -> Row:
    """A random row of ``u`` joining ``t.i = k2``."""
    return (
        k2,
        _maybe(rng, rng.choice(_NAMES)),
        _maybe(rng, Decimal(rng.randrange(-(10**12), 10**12)) / 10**5),
        _maybe(rng, dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(-400, 400))),
    )


def refreshes(seed: int = 7, n: int = 5, load: int = 40) -> list[dict[str, list[Change]]]:
    """``n`` refreshes of ``t`` and ``u``: a load of ``load`` rows of ``t`` and 9 of ``u``,
    then inserts, deletes and updates; the last deletes every ``t`` row with ``y > 100``."""
    rng = random.Random(seed)
    live_t: dict[int, Row] = {}
    live_u: list[Row] = []
    out: list[dict[str, list[Change]]] = []
    next_k = 0
    for step in range(n):
        ct: list[Change] = []
        cu: list[Change] = []
        if step == 0:
            for _ in range(load):
                live_t[next_k] = t_row(rng, next_k)
                ct += ins(live_t[next_k])
                next_k += 1
            for k2 in [0, 1, 2, 3, 4, 5, 5, None, 9]:
                r = u_row(rng, k2)
                live_u.append(r)
                cu += ins(r)
        else:
            for _ in range(4):
                live_t[next_k] = t_row(rng, next_k)
                ct += ins(live_t[next_k])
                next_k += 1
            for k in rng.sample(sorted(live_t), 3):
                ct += dele(live_t.pop(k))
            for k in rng.sample(sorted(live_t), 5):
                old = live_t[k]
                new = list(t_row(rng, k))
                keep = rng.sample(range(1, len(new)), 5)  # change about half the columns
                for j in keep:
                    new[j] = old[j]
                live_t[k] = tuple(new)
                ct += upd(old, live_t[k])
            j = rng.randrange(len(live_u))
            old_u = live_u[j]
            live_u[j] = u_row(rng, rng.choice([0, 1, 2, 6, 7, None]))
            cu += upd(old_u, live_u[j])
            if step % 2:
                r = u_row(rng, rng.randrange(0, 8))
                live_u.append(r)
                cu += ins(r)
            else:
                cu += dele(live_u.pop(rng.randrange(len(live_u))))
            if step == n - 1:
                for k in [k for k, r in live_t.items() if r[4] is not None and r[4] > 100]:
                    ct += dele(live_t.pop(k))
        out.append({"t": ct, "u": cu})
    return out
