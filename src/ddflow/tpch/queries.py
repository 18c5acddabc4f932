"""The 22 TPC-H queries as ddflow dataflows, each with the SQL that checks it.

Why it exists: TPC-H is what our users know; maintaining its answers incrementally and
exactly is the demonstration that the model (joins, ``explode`` + ``count_total``, ``min`` /
``max``, ``distinct``, top-k) covers real queries.

How the queries are written (in the style of Q1 with tuple diffs, ``ddflow.tpch.q1``):

- Inputs are the tables' columns (``ddflow.tpch.tables``): ints, unscaled decimals (cents,
  hundredths), days, dictionary codes for strings. A query's input record for a table is
  the tuple of the columns it lists in ``Query.tables``, in that order.
- String predicates (``like``, ``in``, ``substring``) are evaluated once per distinct
  string at build time (``Tables.lookup``); the dataflow indexes the result by code.
- Aggregates are moved into tuple diffs with a vectorized ``explode`` and added up with
  ``count_total``: a group's record carries its exact integer sums (``revenue`` at scale 4,
  ``charge`` at scale 6, ...). ``reduce`` is used only where a query needs it: ``min`` (Q2),
  ``max`` (Q15), ``distinct`` (Q4, Q16, Q20, Q21, Q22) and top-k (Q2, Q3, Q10, Q18, Q21).
- Every query's output collection is its answer as a set of rows (``Query.rows`` turns the
  accumulated collection into SQL-shaped rows: strings decoded, decimals as ``Decimal``,
  dates as ``datetime.date``). Order is not part of a collection; top-k queries break
  ties by more columns than the TPC-H text so that "the first k" is one set, and their SQL
  here orders by the same columns.

Parameters are TPC-H's validation values (Q11's fraction is ``0.0001 / SF``).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from ddflow.tpch.q1 import q1 as _q1_dataflow
from ddflow.tpch.tables import EPOCH, Tables, date_days

__all__ = ["QUERIES", "Query", "top_k"]

Row = tuple[Any, ...]


@dataclass(frozen=True)
class Query:
    """One TPC-H query: the columns it reads, its dataflow, its result rows and its SQL."""

    number: int
    tables: dict[str, tuple[str, ...]]
    build: Callable[[dict[str, Any], Tables], Any]
    rows: Callable[[dict[Any, Any], Tables], list[Row]]
    sql: Callable[[Tables], str]

    @property
    def name(self) -> str:
        return f"q{self.number}"


QUERIES: dict[int, Query] = {}


def _query(
    number: int, tables: dict[str, tuple[str, ...]], sql: str | Callable[[Tables], str]
) -> Callable[[Callable[..., Any]], Any]:
    """Registers ``build``; the rows function is ``build.rows`` (set below each query)."""

    def deco(build: Any) -> Any:
        text: Callable[[Tables], str] = sql if callable(sql) else (lambda d: str(sql))
        QUERIES[number] = Query(number, tables, build, lambda acc, d: build.rows(acc, d), text)
        return build

    return deco


# --- helpers -------------------------------------------------------------------------------


def _ones(x: np.ndarray) -> np.ndarray:
    return np.ones(len(x), dtype=np.int64)


def _dec(v: int, scale: int) -> Decimal:
    return Decimal(int(v)).scaleb(-scale)


def _date(days: int) -> _dt.date:
    return EPOCH + _dt.timedelta(days=int(days))


def _year_of(days: np.ndarray) -> np.ndarray:
    return days.astype("datetime64[D]").astype("datetime64[Y]").astype(np.int64) + 1970


def _items(acc: dict[Any, Any]) -> list[Any]:
    """The records of an accumulated output, each once (their diffs must be 1)."""
    out = []
    for rec, diff in acc.items():
        if diff != 1:
            raise ValueError(f"output record {rec!r} has multiplicity {diff!r}, expected 1")
        out.append(rec)
    return out


def top_k(coll: Any, k: int, order: Callable[[Any], Any], *, buckets: int = 0) -> Any:
    """The ``k`` least rows of ``coll`` by ``order`` (vectorized: row columns -> a tuple of
    sort columns; include enough columns that no two rows tie), with the vectorized
    ``top_k`` reduce. With ``buckets``, rows are first cut to ``k`` per bucket of
    ``row[0] % buckets``: a change then re-ranks one bucket and ``buckets * k`` candidates,
    not every row."""
    zero = lambda r: np.zeros(len(r[0]), np.int64)
    key = (lambda r: r[0] % buckets) if buckets else zero
    ranked = coll.map(lambda r: (key(r), (order(r), r)), vectorized=True).top_k(k)
    if buckets:
        ranked = ranked.map(
            lambda br: (np.zeros(len(br[0]), np.int64), br[1]), vectorized=True
        ).top_k(k)
    return ranked.map(lambda br: br[1][1], vectorized=True)


def _sum_total(coll: Any, f: Callable[..., Any]) -> Any:
    """``explode`` with ``f(cols) -> (key, diffs[, keep])``, then ``count_total``."""
    return coll.explode(f, vectorized=True).count_total()


# --- Q1 ------------------------------------------------------------------------------------


@_query(
    1,
    {
        "lineitem": (
            "l_returnflag",
            "l_linestatus",
            "l_quantity",
            "l_extendedprice",
            "l_discount",
            "l_tax",
            "l_shipdate",
        )
    },
    """
select l_returnflag, l_linestatus, sum(l_quantity) as sum_qty,
    sum(l_extendedprice) as sum_base_price,
    sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
    sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,
    avg(l_quantity) as avg_qty, avg(l_extendedprice) as avg_price,
    avg(l_discount) as avg_disc, count(*) as count_order
from lineitem
where l_shipdate <= date '1998-12-01' - interval '90' day
group by l_returnflag, l_linestatus
order by l_returnflag, l_linestatus""",
)
def q1(inp: dict[str, Any], d: Tables) -> Any:
    # The same dataflow as the Spark main job's (``ddflow.tpch.q1``); quantities here are
    # in hundredths, which only changes the scale of ``sum_qty``.
    return _q1_dataflow(inp["lineitem"])


def _q1_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    rows = []
    for (flag, status), (n, qty, price, disc_price, charge, disc) in _items(acc):
        rows.append(
            (
                d.decode("l_returnflag", flag),
                d.decode("l_linestatus", status),
                _dec(qty, 2),
                _dec(price, 2),
                _dec(disc_price, 4),
                _dec(charge, 6),
                _dec(qty, 2) / n,
                _dec(price, 2) / n,
                _dec(disc, 2) / n,
                int(n),
            )
        )
    return rows


q1.rows = _q1_rows


# --- Q2 ------------------------------------------------------------------------------------


@_query(
    2,
    {
        "part": ("p_partkey", "p_mfgr", "p_size", "p_type"),
        "supplier": (
            "s_suppkey",
            "s_name",
            "s_address",
            "s_nationkey",
            "s_phone",
            "s_acctbal",
            "s_comment",
        ),
        "partsupp": ("ps_partkey", "ps_suppkey", "ps_supplycost"),
        "nation": ("n_nationkey", "n_name", "n_regionkey"),
        "region": ("r_regionkey", "r_name"),
    },
    """
select s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
from part, supplier, partsupp, nation, region
where p_partkey = ps_partkey and s_suppkey = ps_suppkey and p_size = 15
  and p_type like '%BRASS' and s_nationkey = n_nationkey and n_regionkey = r_regionkey
  and r_name = 'EUROPE'
  and ps_supplycost = (
    select min(ps_supplycost) from partsupp, supplier, nation, region
    where p_partkey = ps_partkey and s_suppkey = ps_suppkey and s_nationkey = n_nationkey
      and n_regionkey = r_regionkey and r_name = 'EUROPE')
order by s_acctbal desc, n_name, s_name, p_partkey
limit 100""",
)
def q2(inp: dict[str, Any], d: Tables) -> Any:
    europe = d.code("r_name", "EUROPE")
    brass = d.lookup("p_type", lambda s: s.endswith("BRASS"))
    regions = (
        inp["region"]
        .filter(lambda r: r[1] == europe, vectorized=True)
        .map(lambda r: r[0], vectorized=True)
    )
    nations = (
        inp["nation"]
        .map(lambda r: (r[2], (r[0], r[1])), vectorized=True)
        .semijoin(regions)
        .map(lambda r: r[1], vectorized=True)
    )  # (nationkey, n_name)
    supp = (
        inp["supplier"]
        .map(lambda r: (r[3], (r[0], r[5], r[1], r[2], r[4], r[6])), vectorized=True)
        .join_map(
            nations, lambda k, s, n: (s[0], (s[1], s[2], n, s[3], s[4], s[5])), vectorized=True
        )
    )  # suppkey -> details
    offers = (
        inp["partsupp"]
        .map(lambda r: (r[1], (r[0], r[2])), vectorized=True)
        .semijoin(supp.map(lambda r: r[0], vectorized=True))
        .map(lambda r: (r[1][0], r[1][1], r[0]), vectorized=True)
    )  # (part, cost, supp)
    cheapest = offers.map(lambda r: (r[0], r[1]), vectorized=True).min()
    best = (
        offers.map(lambda r: ((r[0], r[1]), r[2]), vectorized=True)
        .semijoin(cheapest)
        .map(lambda r: (r[0][0], r[1]), vectorized=True)
    )  # (part, supp)
    parts = (
        inp["part"]
        .filter(lambda r: (r[2] == 15) & brass[r[3]], vectorized=True)
        .map(lambda r: (r[0], r[1]), vectorized=True)
    )  # (part, mfgr)
    rows = best.join_map(parts, lambda p, s, mfgr: (s, (p, mfgr)), vectorized=True).join_map(
        supp, lambda s, pm, x: (x[0], x[1], x[2], pm[0], pm[1], x[3], x[4], x[5]), vectorized=True
    )
    return top_k(rows, 100, lambda r: (-r[0], r[2], r[1], r[3]))


def _q2_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [
        (
            _dec(bal, 2),
            d.decode("s_name", sn),
            d.decode("n_name", nn),
            int(p),
            d.decode("p_mfgr", m),
            d.decode("s_address", a),
            d.decode("s_phone", ph),
            d.decode("s_comment", c),
        )
        for bal, sn, nn, p, m, a, ph, c in _items(acc)
    ]


q2.rows = _q2_rows


# --- Q3 ------------------------------------------------------------------------------------


@_query(
    3,
    {
        "customer": ("c_custkey", "c_mktsegment"),
        "orders": ("o_orderkey", "o_custkey", "o_orderdate", "o_shippriority"),
        "lineitem": ("l_orderkey", "l_extendedprice", "l_discount", "l_shipdate"),
    },
    """
select l_orderkey, sum(l_extendedprice * (1 - l_discount)) as revenue, o_orderdate,
       o_shippriority
from customer, orders, lineitem
where c_mktsegment = 'BUILDING' and c_custkey = o_custkey and l_orderkey = o_orderkey
  and o_orderdate < date '1995-03-15' and l_shipdate > date '1995-03-15'
group by l_orderkey, o_orderdate, o_shippriority
order by revenue desc, o_orderdate, l_orderkey
limit 10""",
)
def q3(inp: dict[str, Any], d: Tables) -> Any:
    seg, day = d.code("c_mktsegment", "BUILDING"), date_days("1995-03-15")
    cust = (
        inp["customer"]
        .filter(lambda r: r[1] == seg, vectorized=True)
        .map(lambda r: r[0], vectorized=True)
    )
    orders = (
        inp["orders"]
        .filter(lambda r: r[2] < day, vectorized=True)
        .map(lambda r: (r[1], (r[0], r[2], r[3])), vectorized=True)
        .semijoin(cust)
        .map(lambda r: (r[1][0], (r[1][1], r[1][2])), vectorized=True)
    )  # okey -> (date, prio)
    items = (
        inp["lineitem"]
        .filter(lambda r: r[3] > day, vectorized=True)
        .map(lambda r: (r[0], r[1] * (100 - r[2])), vectorized=True)
    )  # okey -> revenue
    revenue = _sum_total(
        items.join_map(orders, lambda k, rev, o: (k, o[0], o[1], rev), vectorized=True),
        lambda r: ((r[0], r[1], r[2]), (r[3],)),
    )
    rows = revenue.map(lambda kc: (kc[0][0], kc[1][0], kc[0][1], kc[0][2]), vectorized=True)
    return top_k(rows, 10, lambda r: (-r[1], r[2], r[0]), buckets=64)


def _q3_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [(int(k), _dec(rev, 4), _date(day), int(p)) for k, rev, day, p in _items(acc)]


q3.rows = _q3_rows


# --- Q4 ------------------------------------------------------------------------------------


@_query(
    4,
    {
        "orders": ("o_orderkey", "o_orderdate", "o_orderpriority"),
        "lineitem": ("l_orderkey", "l_commitdate", "l_receiptdate"),
    },
    """
select o_orderpriority, count(*) as order_count
from orders
where o_orderdate >= date '1993-07-01' and o_orderdate < date '1993-10-01'
  and exists (select * from lineitem
              where l_orderkey = o_orderkey and l_commitdate < l_receiptdate)
group by o_orderpriority
order by o_orderpriority""",
)
def q4(inp: dict[str, Any], d: Tables) -> Any:
    lo, hi = date_days("1993-07-01"), date_days("1993-10-01")
    late = (
        inp["lineitem"]
        .filter(lambda r: r[1] < r[2], vectorized=True)
        .map(lambda r: r[0], vectorized=True)
        .distinct_total()
    )
    orders = (
        inp["orders"]
        .filter(lambda r: (r[1] >= lo) & (r[1] < hi), vectorized=True)
        .map(lambda r: (r[0], r[2]), vectorized=True)
        .semijoin(late)
    )
    return _sum_total(orders, lambda r: (r[1], (_ones(r[1]),)))


def _q4_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [(d.decode("o_orderpriority", p), int(n[0])) for p, n in _items(acc)]


q4.rows = _q4_rows


# --- Q5 ------------------------------------------------------------------------------------


@_query(
    5,
    {
        "customer": ("c_custkey", "c_nationkey"),
        "orders": ("o_orderkey", "o_custkey", "o_orderdate"),
        "lineitem": ("l_orderkey", "l_suppkey", "l_extendedprice", "l_discount"),
        "supplier": ("s_suppkey", "s_nationkey"),
        "nation": ("n_nationkey", "n_name", "n_regionkey"),
        "region": ("r_regionkey", "r_name"),
    },
    """
select n_name, sum(l_extendedprice * (1 - l_discount)) as revenue
from customer, orders, lineitem, supplier, nation, region
where c_custkey = o_custkey and l_orderkey = o_orderkey and l_suppkey = s_suppkey
  and c_nationkey = s_nationkey and s_nationkey = n_nationkey
  and n_regionkey = r_regionkey and r_name = 'ASIA'
  and o_orderdate >= date '1994-01-01' and o_orderdate < date '1995-01-01'
group by n_name
order by revenue desc""",
)
def q5(inp: dict[str, Any], d: Tables) -> Any:
    asia = d.code("r_name", "ASIA")
    lo, hi = date_days("1994-01-01"), date_days("1995-01-01")
    regions = (
        inp["region"]
        .filter(lambda r: r[1] == asia, vectorized=True)
        .map(lambda r: r[0], vectorized=True)
    )
    nations = (
        inp["nation"]
        .map(lambda r: (r[2], r[0]), vectorized=True)
        .semijoin(regions)
        .map(lambda r: r[1], vectorized=True)
    )  # nationkeys in Asia
    cust = (
        inp["customer"]
        .map(lambda r: (r[1], r[0]), vectorized=True)
        .semijoin(nations)
        .map(lambda r: (r[1], r[0]), vectorized=True)
    )  # custkey -> nation
    # Line items are matched with the year's Asian orders first, by order key: the line
    # items arrive in order-key order, so their arrangement merges by concatenation, and
    # the few that match (about 1 in 35) are then matched with their suppliers, by
    # (supplier, nation): the supplier must be of the customer's nation.
    orders = (
        inp["orders"]
        .filter(lambda r: (r[2] >= lo) & (r[2] < hi), vectorized=True)
        .map(lambda r: (r[1], r[0]), vectorized=True)
        .join_map(cust, lambda c, o, n: (o, n), vectorized=True)
    )  # okey -> nation
    supp = inp["supplier"].map(lambda r: (r[0], r[1]), vectorized=True)  # (suppkey, nation)
    local = (
        inp["lineitem"]
        .map(lambda r: (r[0], (r[1], r[2] * (100 - r[3]))), vectorized=True)
        .join_map(orders, lambda o, x, n: ((x[0], n), x[1]), vectorized=True)
        .semijoin(supp)
        .map(lambda r: (r[0][1], r[1]), vectorized=True)
    )  # (nation, rev)
    names = inp["nation"].map(lambda r: (r[0], r[1]), vectorized=True)
    return (
        _sum_total(local, lambda r: (r[0], (r[1],)))
        .map(lambda kc: (kc[0], kc[1][0]), vectorized=True)
        .join_map(names, lambda n, rev, name: (name, rev), vectorized=True)
    )


def _q5_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [(d.decode("n_name", n), _dec(rev, 4)) for n, rev in _items(acc)]


q5.rows = _q5_rows


# --- Q6 ------------------------------------------------------------------------------------


@_query(
    6,
    {"lineitem": ("l_quantity", "l_extendedprice", "l_discount", "l_shipdate")},
    """
select sum(l_extendedprice * l_discount) as revenue
from lineitem
where l_shipdate >= date '1994-01-01' and l_shipdate < date '1995-01-01'
  and l_discount between 0.06 - 0.01 and 0.06 + 0.01 and l_quantity < 24""",
)
def q6(inp: dict[str, Any], d: Tables) -> Any:
    lo, hi = date_days("1994-01-01"), date_days("1995-01-01")

    def f(r: tuple[np.ndarray, ...]) -> Any:
        qty, price, disc, ship = r
        keep = (ship >= lo) & (ship < hi) & (disc >= 5) & (disc <= 7) & (qty < 2400)
        return np.zeros(len(qty), np.int64), (_ones(qty), price * disc), keep

    return _sum_total(inp["lineitem"], f)


def _q6_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    items = _items(acc)
    return [(_dec(items[0][1][1], 4) if items else None,)]


q6.rows = _q6_rows


# --- Q7 ------------------------------------------------------------------------------------


@_query(
    7,
    {
        "supplier": ("s_suppkey", "s_nationkey"),
        "lineitem": ("l_orderkey", "l_suppkey", "l_extendedprice", "l_discount", "l_shipdate"),
        "orders": ("o_orderkey", "o_custkey"),
        "customer": ("c_custkey", "c_nationkey"),
        "nation": ("n_nationkey", "n_name"),
    },
    """
select supp_nation, cust_nation, l_year, sum(volume) as revenue
from (select n1.n_name as supp_nation, n2.n_name as cust_nation,
             extract(year from l_shipdate) as l_year,
             l_extendedprice * (1 - l_discount) as volume
      from supplier, lineitem, orders, customer, nation n1, nation n2
      where s_suppkey = l_suppkey and o_orderkey = l_orderkey and c_custkey = o_custkey
        and s_nationkey = n1.n_nationkey and c_nationkey = n2.n_nationkey
        and ((n1.n_name = 'FRANCE' and n2.n_name = 'GERMANY')
             or (n1.n_name = 'GERMANY' and n2.n_name = 'FRANCE'))
        and l_shipdate between date '1995-01-01' and date '1996-12-31') as shipping
group by supp_nation, cust_nation, l_year
order by supp_nation, cust_nation, l_year""",
)
def q7(inp: dict[str, Any], d: Tables) -> Any:
    pair = d.lookup("n_name", lambda s: s in ("FRANCE", "GERMANY"))
    lo, hi = date_days("1995-01-01"), date_days("1996-12-31")
    nations = inp["nation"].filter(lambda r: pair[r[1]], vectorized=True)  # (key, name)
    supp = (
        inp["supplier"]
        .map(lambda r: (r[1], r[0]), vectorized=True)
        .join_map(nations, lambda n, s, name: (s, name), vectorized=True)
    )  # suppkey -> name
    cust = (
        inp["customer"]
        .map(lambda r: (r[1], r[0]), vectorized=True)
        .join_map(nations, lambda n, c, name: (c, name), vectorized=True)
    )  # custkey -> name
    items = (
        inp["lineitem"]
        .filter(lambda r: (r[4] >= lo) & (r[4] <= hi), vectorized=True)
        .map(lambda r: (r[1], (r[0], _year_of(r[4]), r[2] * (100 - r[3]))), vectorized=True)
        .join_map(supp, lambda s, x, sn: (x[0], (sn, x[1], x[2])), vectorized=True)
    )
    with_cust = items.join_map(
        inp["orders"].map(lambda r: (r[0], r[1]), vectorized=True),
        lambda o, x, c: (c, x),
        vectorized=True,
    ).join_map(cust, lambda c, x, cn: (x[0], cn, x[1], x[2]), vectorized=True)
    return _sum_total(with_cust, lambda r: ((r[0], r[1], r[2]), (r[3],), r[0] != r[1]))


def _q7_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [
        (d.decode("n_name", sn), d.decode("n_name", cn), int(y), _dec(rev[0], 4))
        for (sn, cn, y), rev in _items(acc)
    ]


q7.rows = _q7_rows


# --- Q8 ------------------------------------------------------------------------------------


@_query(
    8,
    {
        "part": ("p_partkey", "p_type"),
        "supplier": ("s_suppkey", "s_nationkey"),
        "lineitem": ("l_orderkey", "l_partkey", "l_suppkey", "l_extendedprice", "l_discount"),
        "orders": ("o_orderkey", "o_custkey", "o_orderdate"),
        "customer": ("c_custkey", "c_nationkey"),
        "nation": ("n_nationkey", "n_name", "n_regionkey"),
        "region": ("r_regionkey", "r_name"),
    },
    """
select o_year,
       sum(case when nation = 'BRAZIL' then volume else 0 end) / sum(volume) as mkt_share
from (select extract(year from o_orderdate) as o_year,
             l_extendedprice * (1 - l_discount) as volume, n2.n_name as nation
      from part, supplier, lineitem, orders, customer, nation n1, nation n2, region
      where p_partkey = l_partkey and s_suppkey = l_suppkey and l_orderkey = o_orderkey
        and o_custkey = c_custkey and c_nationkey = n1.n_nationkey
        and n1.n_regionkey = r_regionkey and r_name = 'AMERICA'
        and s_nationkey = n2.n_nationkey
        and o_orderdate between date '1995-01-01' and date '1996-12-31'
        and p_type = 'ECONOMY ANODIZED STEEL') as all_nations
group by o_year
order by o_year""",
)
def q8(inp: dict[str, Any], d: Tables) -> Any:
    america, brazil = d.code("r_name", "AMERICA"), d.code("n_name", "BRAZIL")
    ptype = d.code("p_type", "ECONOMY ANODIZED STEEL")
    lo, hi = date_days("1995-01-01"), date_days("1996-12-31")
    parts = (
        inp["part"]
        .filter(lambda r: r[1] == ptype, vectorized=True)
        .map(lambda r: r[0], vectorized=True)
    )
    regions = (
        inp["region"]
        .filter(lambda r: r[1] == america, vectorized=True)
        .map(lambda r: r[0], vectorized=True)
    )
    nations = (
        inp["nation"]
        .map(lambda r: (r[2], r[0]), vectorized=True)
        .semijoin(regions)
        .map(lambda r: r[1], vectorized=True)
    )
    cust = (
        inp["customer"]
        .map(lambda r: (r[1], r[0]), vectorized=True)
        .semijoin(nations)
        .map(lambda r: r[1], vectorized=True)
    )  # custkeys in America
    orders = (
        inp["orders"]
        .filter(lambda r: (r[2] >= lo) & (r[2] <= hi), vectorized=True)
        .map(lambda r: (r[1], (r[0], _year_of(r[2]))), vectorized=True)
        .semijoin(cust)
        .map(lambda r: r[1], vectorized=True)
    )  # okey -> year
    is_brazil = inp["nation"].map(
        lambda r: (r[0], (r[1] == brazil).astype(np.int64)), vectorized=True
    )
    supp = (
        inp["supplier"]
        .map(lambda r: (r[1], r[0]), vectorized=True)
        .join_map(is_brazil, lambda n, s, b: (s, b), vectorized=True)
    )  # suppkey -> brazil?
    # Line items are matched with the orders first, by order key (they arrive in order-key
    # order, so their arrangement merges by concatenation), then the few that match
    # (about 1 in 16) with the parts of the type.
    items = (
        inp["lineitem"]
        .map(lambda r: (r[0], (r[1], r[2], r[3] * (100 - r[4]))), vectorized=True)
        .join_map(orders, lambda o, x, y: (x[0], (x[1], x[2], y)), vectorized=True)
        .semijoin(parts)
        .map(lambda r: (r[1][0], (r[1][1], r[1][2])), vectorized=True)
        .join_map(supp, lambda s, x, b: (x[1], x[0], b), vectorized=True)
    )  # (year, vol, brazil)
    return _sum_total(items, lambda r: (r[0], (r[1] * r[2], r[1])))


def _q8_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [(int(y), Fraction(int(b), int(t)) if t else None) for y, (b, t) in _items(acc)]


q8.rows = _q8_rows


# --- Q9 ------------------------------------------------------------------------------------


@_query(
    9,
    {
        "part": ("p_partkey", "p_name"),
        "supplier": ("s_suppkey", "s_nationkey"),
        "lineitem": (
            "l_orderkey",
            "l_partkey",
            "l_suppkey",
            "l_quantity",
            "l_extendedprice",
            "l_discount",
        ),
        "partsupp": ("ps_partkey", "ps_suppkey", "ps_supplycost"),
        "orders": ("o_orderkey", "o_orderdate"),
        "nation": ("n_nationkey", "n_name"),
    },
    """
select nation, o_year, sum(amount) as sum_profit
from (select n_name as nation, extract(year from o_orderdate) as o_year,
             l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity as amount
      from part, supplier, lineitem, partsupp, orders, nation
      where s_suppkey = l_suppkey and ps_suppkey = l_suppkey and ps_partkey = l_partkey
        and p_partkey = l_partkey and o_orderkey = l_orderkey
        and s_nationkey = n_nationkey and p_name like '%green%') as profit
group by nation, o_year
order by nation, o_year desc""",
)
def q9(inp: dict[str, Any], d: Tables) -> Any:
    green = d.lookup("p_name", lambda s: "green" in s)
    parts = (
        inp["part"]
        .filter(lambda r: green[r[1]], vectorized=True)
        .map(lambda r: r[0], vectorized=True)
    )
    # The green parts' suppliers (4 per part), with their cost and nation, are found first:
    # a small collection, keyed by part. Each line item then meets its part's suppliers by
    # part key alone and keeps the one it names, so the only large arrangement is the line
    # items by part; matched by (part, supplier) and then by supplier, the ~1/18 of them of
    # green parts were arranged twice more, by random keys. That arrangement is read only
    # when parts, suppliers or costs change, so its trace merges 16 batches at a time (each
    # line item merged ~3 times instead of ~10, readers searching more batches).
    offers = (
        inp["partsupp"]
        .map(lambda r: (r[0], (r[1], r[2])), vectorized=True)
        .semijoin(parts)
        .map(lambda r: (r[1][0], (r[0], r[1][1])), vectorized=True)
        .join_map(
            inp["supplier"].map(lambda r: (r[0], r[1]), vectorized=True),
            lambda s, pc, n: (pc[0], (s, pc[1], n)),
            vectorized=True,
        )
    )  # part -> (supp, cost, nation)

    def same_supplier(r: tuple[Any, ...]) -> tuple[np.ndarray, tuple[Any, ...]]:
        okey, supp, amt, offer_supp, nation = r
        keep = np.flatnonzero(supp == offer_supp)
        return keep, (okey[keep], (nation[keep], amt[keep]))

    items = (
        inp["lineitem"]
        .map(lambda r: (r[1], (r[0], r[2], r[3], r[4] * (100 - r[5]))), vectorized=True)
        .arrange_by_key(fanin=16)
        .join_map(
            offers,
            lambda p, x, o: (x[0], x[1], x[3] - o[1] * x[2], o[0], o[2]),
            vectorized=True,
        )
        .flat_map(same_supplier, vectorized=True)
    )  # okey -> (nation, amt)
    orders = inp["orders"].map(lambda r: (r[0], _year_of(r[1])), vectorized=True)
    rows = items.join_map(orders, lambda o, x, y: (x[0], y, x[1]), vectorized=True)
    names = inp["nation"].map(lambda r: (r[0], r[1]), vectorized=True)
    return (
        _sum_total(rows, lambda r: ((r[0], r[1]), (r[2],)))
        .map(lambda kc: (kc[0][0], (kc[0][1], kc[1][0])), vectorized=True)
        .join_map(names, lambda n, ya, name: (name, ya[0], ya[1]), vectorized=True)
    )


def _q9_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [(d.decode("n_name", n), int(y), _dec(a, 4)) for n, y, a in _items(acc)]


q9.rows = _q9_rows


# --- Q10 -----------------------------------------------------------------------------------


@_query(
    10,
    {
        "customer": (
            "c_custkey",
            "c_name",
            "c_acctbal",
            "c_nationkey",
            "c_address",
            "c_phone",
            "c_comment",
        ),
        "orders": ("o_orderkey", "o_custkey", "o_orderdate"),
        "lineitem": ("l_orderkey", "l_extendedprice", "l_discount", "l_returnflag"),
        "nation": ("n_nationkey", "n_name"),
    },
    """
select c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) as revenue, c_acctbal,
       n_name, c_address, c_phone, c_comment
from customer, orders, lineitem, nation
where c_custkey = o_custkey and l_orderkey = o_orderkey
  and o_orderdate >= date '1993-10-01' and o_orderdate < date '1994-01-01'
  and l_returnflag = 'R' and c_nationkey = n_nationkey
group by c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
order by revenue desc, c_custkey
limit 20""",
)
def q10(inp: dict[str, Any], d: Tables) -> Any:
    lo, hi = date_days("1993-10-01"), date_days("1994-01-01")
    returned = d.code("l_returnflag", "R")
    orders = (
        inp["orders"]
        .filter(lambda r: (r[2] >= lo) & (r[2] < hi), vectorized=True)
        .map(lambda r: (r[0], r[1]), vectorized=True)
    )
    items = (
        inp["lineitem"]
        .filter(lambda r: r[3] == returned, vectorized=True)
        .map(lambda r: (r[0], r[1] * (100 - r[2])), vectorized=True)
        .join_map(orders, lambda o, rev, c: (c, rev), vectorized=True)
    )
    revenue = _sum_total(items, lambda r: (r[0], (r[1],)))  # custkey -> (revenue,)
    nations = inp["nation"].map(lambda r: (r[0], r[1]), vectorized=True)
    cust = (
        inp["customer"]
        .map(lambda r: (r[3], (r[0], r[1], r[2], r[4], r[5], r[6])), vectorized=True)
        .join_map(
            nations,
            lambda n, c, name: (c[0], (c[1], c[2], name, c[3], c[4], c[5])),
            vectorized=True,
        )
    )
    # Only customers that are there (with their nation) are ranked: a customer deleted
    # while its orders stay is no longer in the join, so it must not hold a place.
    present = revenue.semijoin(cust.map(lambda r: r[0], vectorized=True).distinct_total())
    best = top_k(
        present.map(lambda kc: (kc[0], kc[1][0]), vectorized=True),
        20,
        lambda r: (-r[1], r[0]),
        buckets=64,
    )  # (custkey, revenue)
    return best.join_map(
        cust, lambda c, rev, x: (c, x[0], rev, x[1], x[2], x[3], x[4], x[5]), vectorized=True
    )


def _q10_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [
        (
            int(c),
            d.decode("c_name", nm),
            _dec(rev, 4),
            _dec(bal, 2),
            d.decode("n_name", n),
            d.decode("c_address", a),
            d.decode("c_phone", p),
            d.decode("c_comment", cm),
        )
        for c, nm, rev, bal, n, a, p, cm in _items(acc)
    ]


q10.rows = _q10_rows


# --- Q11 -----------------------------------------------------------------------------------


def _q11_fraction(d: Tables) -> Fraction:
    return Fraction(1, 10_000) / Fraction(str(d.sf))


@_query(
    11,
    {
        "partsupp": ("ps_partkey", "ps_suppkey", "ps_availqty", "ps_supplycost"),
        "supplier": ("s_suppkey", "s_nationkey"),
        "nation": ("n_nationkey", "n_name"),
    },
    lambda d: (
        f"""
select ps_partkey, sum(ps_supplycost * ps_availqty) as value
from partsupp, supplier, nation
where ps_suppkey = s_suppkey and s_nationkey = n_nationkey and n_name = 'GERMANY'
group by ps_partkey
having sum(ps_supplycost * ps_availqty) > (
    select sum(ps_supplycost * ps_availqty) * {float(_q11_fraction(d))!r}
    from partsupp, supplier, nation
    where ps_suppkey = s_suppkey and s_nationkey = n_nationkey and n_name = 'GERMANY')
order by value desc"""
    ),
)
def q11(inp: dict[str, Any], d: Tables) -> Any:
    germany = d.code("n_name", "GERMANY")
    frac = _q11_fraction(d)
    num, den = frac.numerator, frac.denominator
    nations = (
        inp["nation"]
        .filter(lambda r: r[1] == germany, vectorized=True)
        .map(lambda r: r[0], vectorized=True)
    )
    supp = (
        inp["supplier"]
        .map(lambda r: (r[1], r[0]), vectorized=True)
        .semijoin(nations)
        .map(lambda r: r[1], vectorized=True)
    )
    stock = (
        inp["partsupp"]
        .map(lambda r: (r[1], (r[0], r[2] * r[3])), vectorized=True)
        .semijoin(supp)
        .map(lambda r: r[1], vectorized=True)
    )
    value = _sum_total(stock, lambda r: (r[0], (r[1],))).map(
        lambda kc: (kc[0], kc[1][0]), vectorized=True
    )  # (part, value)
    total = _sum_total(stock, lambda r: (np.zeros(len(r[0]), np.int64), (r[1],))).map(
        lambda kc: (kc[0], kc[1][0]), vectorized=True
    )  # (0, total)
    both = value.map(lambda r: (np.zeros(len(r[0]), np.int64), r), vectorized=True).join_map(
        total, lambda z, pv, t: (pv[0], pv[1], t), vectorized=True
    )

    def above(r: tuple[np.ndarray, ...]) -> np.ndarray:
        # value > total * num / den in exact integers: int64 when no product can overflow,
        # else Python ints.
        v, t = r[1], r[2]
        big = max(int(np.abs(v).max(initial=0)) * den, int(np.abs(t).max(initial=0)) * num)
        if big < 2**62:
            return v * den > t * num
        return np.array(
            [a * den > b * num for a, b in zip(v.tolist(), t.tolist(), strict=True)], dtype=bool
        )

    return both.filter(above, vectorized=True).map(lambda r: (r[0], r[1]), vectorized=True)


def _q11_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [(int(p), _dec(v, 2)) for p, v in _items(acc)]


q11.rows = _q11_rows


# --- Q12 -----------------------------------------------------------------------------------


@_query(
    12,
    {
        "orders": ("o_orderkey", "o_orderpriority"),
        "lineitem": ("l_orderkey", "l_shipmode", "l_shipdate", "l_commitdate", "l_receiptdate"),
    },
    """
select l_shipmode,
       sum(case when o_orderpriority = '1-URGENT' or o_orderpriority = '2-HIGH'
                then 1 else 0 end) as high_line_count,
       sum(case when o_orderpriority <> '1-URGENT' and o_orderpriority <> '2-HIGH'
                then 1 else 0 end) as low_line_count
from orders, lineitem
where o_orderkey = l_orderkey and l_shipmode in ('MAIL', 'SHIP')
  and l_commitdate < l_receiptdate and l_shipdate < l_commitdate
  and l_receiptdate >= date '1994-01-01' and l_receiptdate < date '1995-01-01'
group by l_shipmode
order by l_shipmode""",
)
def q12(inp: dict[str, Any], d: Tables) -> Any:
    modes = d.lookup("l_shipmode", lambda s: s in ("MAIL", "SHIP"))
    high = d.lookup("o_orderpriority", lambda s: s in ("1-URGENT", "2-HIGH")).astype(np.int64)
    lo, hi = date_days("1994-01-01"), date_days("1995-01-01")
    items = (
        inp["lineitem"]
        .filter(
            lambda r: modes[r[1]] & (r[3] < r[4]) & (r[2] < r[3]) & (r[4] >= lo) & (r[4] < hi),
            vectorized=True,
        )
        .map(lambda r: (r[0], r[1]), vectorized=True)
    )
    rows = items.join_map(
        inp["orders"].map(lambda r: (r[0], r[1]), vectorized=True),
        lambda o, mode, prio: (mode, high[prio]),
        vectorized=True,
    )
    return _sum_total(rows, lambda r: (r[0], (r[1], 1 - r[1])))


def _q12_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [(d.decode("l_shipmode", m), int(h), int(lw)) for m, (h, lw) in _items(acc)]


q12.rows = _q12_rows


# --- Q13 -----------------------------------------------------------------------------------


@_query(
    13,
    {"customer": ("c_custkey", "c_nationkey"), "orders": ("o_orderkey", "o_custkey", "o_comment")},
    """
select c_count, count(*) as custdist
from (select c_custkey, count(o_orderkey)
      from customer left outer join orders
        on c_custkey = o_custkey and o_comment not like '%special%requests%'
      group by c_custkey) as c_orders (c_custkey, c_count)
group by c_count
order by custdist desc, c_count desc""",
)
def q13(inp: dict[str, Any], d: Tables) -> Any:
    # A left join that only counts: each customer's (orders, 1) added up per customer key by
    # ``count_total`` (the total-order count), then the histogram of order counts by
    # ``count_total`` again.
    plain = d.lookup("o_comment", lambda s: _not_special_requests(s))
    orders = inp["orders"].explode(
        lambda r: (r[1], (_ones(r[1]), np.zeros(len(r[1]), np.int64)), plain[r[2]]), vectorized=True
    )
    custs = inp["customer"].explode(
        lambda r: (r[0], (np.zeros(len(r[0]), np.int64), _ones(r[0]))), vectorized=True
    )
    per_customer = orders.concat(custs).count_total()  # (cust, (orders, 1))
    return per_customer.explode(
        lambda kc: (kc[1][0], (_ones(kc[0]),), kc[1][1] > 0), vectorized=True
    ).count_total()


def _not_special_requests(s: str) -> bool:
    """``s not like '%special%requests%'``."""
    i = s.find("special")
    return i < 0 or s.find("requests", i + len("special")) < 0


def _q13_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [(int(c), int(n[0])) for c, n in _items(acc)]


q13.rows = _q13_rows


# --- Q14 -----------------------------------------------------------------------------------


@_query(
    14,
    {
        "lineitem": ("l_partkey", "l_extendedprice", "l_discount", "l_shipdate"),
        "part": ("p_partkey", "p_type"),
    },
    """
select 100.00 * sum(case when p_type like 'PROMO%'
                         then l_extendedprice * (1 - l_discount) else 0 end)
       / sum(l_extendedprice * (1 - l_discount)) as promo_revenue
from lineitem, part
where l_partkey = p_partkey
  and l_shipdate >= date '1995-09-01' and l_shipdate < date '1995-10-01'""",
)
def q14(inp: dict[str, Any], d: Tables) -> Any:
    promo = d.lookup("p_type", lambda s: s.startswith("PROMO")).astype(np.int64)
    lo, hi = date_days("1995-09-01"), date_days("1995-10-01")
    items = (
        inp["lineitem"]
        .filter(lambda r: (r[3] >= lo) & (r[3] < hi), vectorized=True)
        .map(lambda r: (r[0], r[1] * (100 - r[2])), vectorized=True)
        .join_map(
            inp["part"].map(lambda r: (r[0], r[1]), vectorized=True),
            lambda p, rev, t: (rev, promo[t]),
            vectorized=True,
        )
    )
    return _sum_total(items, lambda r: (np.zeros(len(r[0]), np.int64), (r[0] * r[1], r[0])))


def _q14_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    items = _items(acc)
    if not items or not items[0][1][1]:
        return [(None,)]
    promo, total = items[0][1]
    return [(Fraction(100 * int(promo), int(total)),)]


q14.rows = _q14_rows


# --- Q15 -----------------------------------------------------------------------------------


@_query(
    15,
    {
        "lineitem": ("l_suppkey", "l_extendedprice", "l_discount", "l_shipdate"),
        "supplier": ("s_suppkey", "s_name", "s_address", "s_phone"),
    },
    """
with revenue0 as (
    select l_suppkey as supplier_no, sum(l_extendedprice * (1 - l_discount)) as total_revenue
    from lineitem
    where l_shipdate >= date '1996-01-01' and l_shipdate < date '1996-04-01'
    group by l_suppkey)
select s_suppkey, s_name, s_address, s_phone, total_revenue
from supplier, revenue0
where s_suppkey = supplier_no and total_revenue = (select max(total_revenue) from revenue0)
order by s_suppkey""",
)
def q15(inp: dict[str, Any], d: Tables) -> Any:
    lo, hi = date_days("1996-01-01"), date_days("1996-04-01")
    revenue = _sum_total(
        inp["lineitem"], lambda r: (r[0], (r[1] * (100 - r[2]),), (r[3] >= lo) & (r[3] < hi))
    ).map(lambda kc: (kc[1][0], kc[0]), vectorized=True)  # (revenue, supp)
    top = (
        revenue.map(lambda r: (np.zeros(len(r[0]), np.int64), r[0]), vectorized=True)
        .max_total()
        .map(lambda r: r[1], vectorized=True)
    )
    best = revenue.semijoin(top).map(lambda r: (r[1], r[0]), vectorized=True)
    return best.join_map(
        inp["supplier"].map(lambda r: (r[0], (r[1], r[2], r[3])), vectorized=True),
        lambda s, rev, x: (s, x[0], x[1], x[2], rev),
        vectorized=True,
    )


def _q15_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [
        (
            int(s),
            d.decode("s_name", n),
            d.decode("s_address", a),
            d.decode("s_phone", p),
            _dec(rev, 4),
        )
        for s, n, a, p, rev in _items(acc)
    ]


q15.rows = _q15_rows


# --- Q16 -----------------------------------------------------------------------------------

_Q16_SIZES = (49, 14, 23, 45, 19, 3, 36, 9)


@_query(
    16,
    {
        "partsupp": ("ps_partkey", "ps_suppkey"),
        "part": ("p_partkey", "p_brand", "p_type", "p_size"),
        "supplier": ("s_suppkey", "s_comment"),
    },
    """
select p_brand, p_type, p_size, count(distinct ps_suppkey) as supplier_cnt
from partsupp, part
where p_partkey = ps_partkey and p_brand <> 'Brand#45'
  and p_type not like 'MEDIUM POLISHED%' and p_size in (49, 14, 23, 45, 19, 3, 36, 9)
  and ps_suppkey not in (select s_suppkey from supplier
                         where s_comment like '%Customer%Complaints%')
group by p_brand, p_type, p_size
order by supplier_cnt desc, p_brand, p_type, p_size""",
)
def q16(inp: dict[str, Any], d: Tables) -> Any:
    brand45 = d.code("p_brand", "Brand#45")
    polished = d.lookup("p_type", lambda s: s.startswith("MEDIUM POLISHED"))
    complaint = d.lookup("s_comment", _customer_complaints)
    sizes = np.zeros(64, dtype=bool)
    sizes[list(_Q16_SIZES)] = True
    bad = (
        inp["supplier"]
        .filter(lambda r: complaint[r[1]], vectorized=True)
        .map(lambda r: r[0], vectorized=True)
    )
    parts = (
        inp["part"]
        .filter(
            lambda r: (
                (r[1] != brand45) & ~polished[r[2]] & sizes[np.clip(r[3], 0, 63)] & (r[3] < 64)
            ),
            vectorized=True,
        )
        .map(lambda r: (r[0], (r[1], r[2], r[3])), vectorized=True)
    )
    ps = inp["partsupp"].map(lambda r: (r[1], r[0]), vectorized=True).antijoin(bad)
    pairs = (
        ps.map(lambda r: (r[1], r[0]), vectorized=True)
        .join_map(parts, lambda p, s, x: (x[0], x[1], x[2], s), vectorized=True)
        .distinct_total()
    )
    return _sum_total(pairs, lambda r: ((r[0], r[1], r[2]), (_ones(r[0]),)))


def _customer_complaints(s: str) -> bool:
    """``s like '%Customer%Complaints%'``."""
    i = s.find("Customer")
    return i >= 0 and s.find("Complaints", i + len("Customer")) >= 0


def _q16_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [
        (d.decode("p_brand", b), d.decode("p_type", t), int(s), int(n[0]))
        for (b, t, s), n in _items(acc)
    ]


q16.rows = _q16_rows


# --- Q17 -----------------------------------------------------------------------------------


@_query(
    17,
    {
        "lineitem": ("l_partkey", "l_quantity", "l_extendedprice"),
        "part": ("p_partkey", "p_brand", "p_container"),
    },
    """
select sum(l_extendedprice) / 7.0 as avg_yearly
from lineitem, part
where p_partkey = l_partkey and p_brand = 'Brand#23' and p_container = 'MED BOX'
  and l_quantity < (select 0.2 * avg(l_quantity) from lineitem where l_partkey = p_partkey)""",
)
def q17(inp: dict[str, Any], d: Tables) -> Any:
    brand, box = d.code("p_brand", "Brand#23"), d.code("p_container", "MED BOX")
    parts = (
        inp["part"]
        .filter(lambda r: (r[1] == brand) & (r[2] == box), vectorized=True)
        .map(lambda r: r[0], vectorized=True)
    )
    items = (
        inp["lineitem"].map(lambda r: (r[0], (r[1], r[2])), vectorized=True).semijoin(parts)
    )  # part -> (qty, price)
    avg = _sum_total(items, lambda r: (r[0], (_ones(r[0]), r[1][0]))).map(
        lambda kc: (kc[0], kc[1]), vectorized=True
    )  # part -> (n, sum qty)
    # qty < 0.2 * sum / n  <=>  5 * qty * n < sum
    small = items.join_map(avg, lambda p, x, a: (x[1], 5 * x[0] * a[0] < a[1]), vectorized=True)
    return _sum_total(small, lambda r: (np.zeros(len(r[0]), np.int64), (r[0],), r[1]))


def _q17_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    items = _items(acc)
    return [(_dec(items[0][1][0], 2) / 7 if items else None,)]


q17.rows = _q17_rows


# --- Q18 -----------------------------------------------------------------------------------


@_query(
    18,
    {
        "customer": ("c_custkey", "c_name"),
        "orders": ("o_orderkey", "o_custkey", "o_orderdate", "o_totalprice"),
        "lineitem": ("l_orderkey", "l_quantity"),
    },
    """
select c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity)
from customer, orders, lineitem
where o_orderkey in (select l_orderkey from lineitem group by l_orderkey
                     having sum(l_quantity) > 300)
  and c_custkey = o_custkey and o_orderkey = l_orderkey
group by c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
order by o_totalprice desc, o_orderdate, o_orderkey
limit 100""",
)
def q18(inp: dict[str, Any], d: Tables) -> Any:
    big = (
        _sum_total(inp["lineitem"], lambda r: (r[0], (r[1],)))
        .filter(lambda kc: kc[1][0] > 30_000, vectorized=True)
        .map(lambda kc: (kc[0], kc[1][0]), vectorized=True)
    )  # (okey, qty)
    orders = big.join_map(
        inp["orders"].map(lambda r: (r[0], (r[1], r[2], r[3])), vectorized=True),
        lambda o, q, x: (x[0], (o, x[1], x[2], q)),
        vectorized=True,
    )
    rows = orders.join_map(
        inp["customer"].map(lambda r: (r[0], r[1]), vectorized=True),
        lambda c, x, name: (x[0], name, c, x[1], x[2], x[3]),
        vectorized=True,
    )  # okey first
    best = top_k(rows, 100, lambda r: (-r[4], r[3], r[0]))
    return best.map(lambda r: (r[1], r[2], r[0], r[3], r[4], r[5]), vectorized=True)


def _q18_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [
        (d.decode("c_name", n), int(c), int(o), _date(day), _dec(tp, 2), _dec(q, 2))
        for n, c, o, day, tp, q in _items(acc)
    ]


q18.rows = _q18_rows


# --- Q19 -----------------------------------------------------------------------------------


@_query(
    19,
    {
        "lineitem": (
            "l_partkey",
            "l_quantity",
            "l_extendedprice",
            "l_discount",
            "l_shipinstruct",
            "l_shipmode",
        ),
        "part": ("p_partkey", "p_brand", "p_size", "p_container"),
    },
    """
select sum(l_extendedprice * (1 - l_discount)) as revenue
from lineitem, part
where (p_partkey = l_partkey and p_brand = 'Brand#12'
       and p_container in ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG')
       and l_quantity >= 1 and l_quantity <= 1 + 10 and p_size between 1 and 5
       and l_shipmode in ('AIR', 'AIR REG') and l_shipinstruct = 'DELIVER IN PERSON')
   or (p_partkey = l_partkey and p_brand = 'Brand#23'
       and p_container in ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK')
       and l_quantity >= 10 and l_quantity <= 10 + 10 and p_size between 1 and 10
       and l_shipmode in ('AIR', 'AIR REG') and l_shipinstruct = 'DELIVER IN PERSON')
   or (p_partkey = l_partkey and p_brand = 'Brand#34'
       and p_container in ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')
       and l_quantity >= 20 and l_quantity <= 20 + 10 and p_size between 1 and 15
       and l_shipmode in ('AIR', 'AIR REG') and l_shipinstruct = 'DELIVER IN PERSON')""",
)
def q19(inp: dict[str, Any], d: Tables) -> Any:
    # Part class 1, 2, 3 (brand, containers, largest size) and its quantity range.
    classes = (
        (d.code("p_brand", "Brand#12"), "SM", 5, 100, 1100),
        (d.code("p_brand", "Brand#23"), "MED", 10, 1000, 2000),
        (d.code("p_brand", "Brand#34"), "LG", 15, 2000, 3000),
    )
    boxes = {
        "SM": ("SM CASE", "SM BOX", "SM PACK", "SM PKG"),
        "MED": ("MED BAG", "MED BOX", "MED PKG", "MED PACK"),
        "LG": ("LG CASE", "LG BOX", "LG PACK", "LG PKG"),
    }
    cont = [d.lookup("p_container", boxes[c].__contains__) for _, c, _, _, _ in classes]
    qlo = np.array([0] + [c[3] for c in classes], dtype=np.int64)
    qhi = np.array([-1] + [c[4] for c in classes], dtype=np.int64)
    air = d.lookup("l_shipmode", lambda s: s in ("AIR", "AIR REG"))
    person = d.code("l_shipinstruct", "DELIVER IN PERSON")

    def part_class(r: tuple[np.ndarray, ...]) -> Any:
        key, brand, size, container = r
        cls = np.zeros(len(key), dtype=np.int64)
        for i, (b, _, top, _, _) in enumerate(classes):
            cls[(brand == b) & cont[i][container] & (size >= 1) & (size <= top)] = i + 1
        return key, cls

    parts = inp["part"].map(part_class, vectorized=True).filter(lambda r: r[1] > 0, vectorized=True)
    items = (
        inp["lineitem"]
        .filter(
            lambda r: air[r[5]] & (r[4] == person) & (r[1] >= 100) & (r[1] <= 3000), vectorized=True
        )
        .map(lambda r: (r[0], (r[1], r[2] * (100 - r[3]))), vectorized=True)
    )
    rows = items.join_map(
        parts, lambda p, x, c: (x[1], (x[0] >= qlo[c]) & (x[0] <= qhi[c])), vectorized=True
    )
    return _sum_total(rows, lambda r: (np.zeros(len(r[0]), np.int64), (r[0],), r[1]))


def _q19_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    items = _items(acc)
    return [(_dec(items[0][1][0], 4) if items else None,)]


q19.rows = _q19_rows


# --- Q20 -----------------------------------------------------------------------------------


@_query(
    20,
    {
        "supplier": ("s_suppkey", "s_name", "s_address", "s_nationkey"),
        "nation": ("n_nationkey", "n_name"),
        "partsupp": ("ps_partkey", "ps_suppkey", "ps_availqty"),
        "part": ("p_partkey", "p_name"),
        "lineitem": ("l_partkey", "l_suppkey", "l_quantity", "l_shipdate"),
    },
    """
select s_name, s_address
from supplier, nation
where s_suppkey in (
        select ps_suppkey from partsupp
        where ps_partkey in (select p_partkey from part where p_name like 'forest%')
          and ps_availqty > (select 0.5 * sum(l_quantity) from lineitem
                             where l_partkey = ps_partkey and l_suppkey = ps_suppkey
                               and l_shipdate >= date '1994-01-01'
                               and l_shipdate < date '1995-01-01'))
  and s_nationkey = n_nationkey and n_name = 'CANADA'
order by s_name""",
)
def q20(inp: dict[str, Any], d: Tables) -> Any:
    forest = d.lookup("p_name", lambda s: s.startswith("forest"))
    canada = d.code("n_name", "CANADA")
    lo, hi = date_days("1994-01-01"), date_days("1995-01-01")
    parts = (
        inp["part"]
        .filter(lambda r: forest[r[1]], vectorized=True)
        .map(lambda r: r[0], vectorized=True)
    )
    shipped = _sum_total(
        inp["lineitem"], lambda r: ((r[0], r[1]), (r[2],), (r[3] >= lo) & (r[3] < hi))
    ).map(lambda kc: (kc[0], kc[1][0]), vectorized=True)  # ((part, supp), qty)
    # availqty > 0.5 * sum(qty): quantities are in hundredths, so 200 * avail > sum.
    supps = (
        inp["partsupp"]
        .map(lambda r: (r[0], (r[1], r[2])), vectorized=True)
        .semijoin(parts)
        .map(lambda r: ((r[0], r[1][0]), r[1][1]), vectorized=True)
        .join_map(shipped, lambda ps, avail, q: (ps[1], 200 * avail > q), vectorized=True)
        .filter(lambda r: r[1], vectorized=True)
        .map(lambda r: r[0], vectorized=True)
        .distinct_total()
    )
    nations = (
        inp["nation"]
        .filter(lambda r: r[1] == canada, vectorized=True)
        .map(lambda r: r[0], vectorized=True)
    )
    return (
        inp["supplier"]
        .map(lambda r: (r[3], (r[0], (r[1], r[2]))), vectorized=True)
        .semijoin(nations)
        .map(lambda r: r[1], vectorized=True)
        .semijoin(supps)
        .map(lambda r: r[1], vectorized=True)
    )  # (name, address)


def _q20_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [(d.decode("s_name", n), d.decode("s_address", a)) for n, a in _items(acc)]


q20.rows = _q20_rows


# --- Q21 -----------------------------------------------------------------------------------


@_query(
    21,
    {
        "supplier": ("s_suppkey", "s_name", "s_nationkey"),
        "lineitem": ("l_orderkey", "l_suppkey", "l_commitdate", "l_receiptdate"),
        "orders": ("o_orderkey", "o_orderstatus"),
        "nation": ("n_nationkey", "n_name"),
    },
    """
select s_name, count(*) as numwait
from supplier, lineitem l1, orders, nation
where s_suppkey = l1.l_suppkey and o_orderkey = l1.l_orderkey and o_orderstatus = 'F'
  and l1.l_receiptdate > l1.l_commitdate
  and exists (select * from lineitem l2
              where l2.l_orderkey = l1.l_orderkey and l2.l_suppkey <> l1.l_suppkey)
  and not exists (select * from lineitem l3
                  where l3.l_orderkey = l1.l_orderkey and l3.l_suppkey <> l1.l_suppkey
                    and l3.l_receiptdate > l3.l_commitdate)
  and s_nationkey = n_nationkey and n_name = 'SAUDI ARABIA'
group by s_name
order by numwait desc, s_name
limit 100""",
)
def q21(inp: dict[str, Any], d: Tables) -> Any:
    # For a late line item of supplier s in order o: "another supplier in o" is "o has at
    # least 2 distinct suppliers"; "no other supplier of o is late" is "o has exactly 1
    # distinct late supplier" (s itself). One count per (order, supplier) of its line items
    # and late ones, then one count per order of (distinct suppliers, distinct late
    # suppliers, status 'F', the late suppliers' keys added up, their late line items added
    # up): where exactly one supplier is late, the last two are that supplier and the line
    # items it is counted for, so the qualifying orders name them without meeting the line
    # items again.
    saudi, final = d.code("n_name", "SAUDI ARABIA"), d.code("o_orderstatus", "F")
    per_pair = _sum_total(
        inp["lineitem"],
        lambda r: ((r[0], r[1]), (_ones(r[0]), (r[3] > r[2]).astype(np.int64))),
    )  # ((okey, suppkey), (line items, late ones))
    zero = lambda x: np.zeros(len(x), np.int64)  # noqa: E731

    def per_order(kc: Any) -> Any:
        (okey, supp), (_, late) = kc
        is_late = (late > 0).astype(np.int64)
        return okey, (_ones(okey), is_late, zero(okey), supp * is_late, late)

    final_orders = inp["orders"].explode(
        lambda r: (
            r[0],
            (zero(r[0]), zero(r[0]), _ones(r[0]), zero(r[0]), zero(r[0])),
            r[1] == final,
        ),
        vectorized=True,
    )
    lonely = (
        per_pair.explode(per_order, vectorized=True)
        .concat(final_orders)
        .count_total()
        .filter(lambda kc: (kc[1][0] >= 2) & (kc[1][1] == 1) & (kc[1][2] == 1), vectorized=True)
        .map(lambda kc: (kc[1][3], kc[1][4]), vectorized=True)
    )  # (the late supplier, its late line items) of each qualifying order
    nations = (
        inp["nation"]
        .filter(lambda r: r[1] == saudi, vectorized=True)
        .map(lambda r: r[0], vectorized=True)
    )
    supp = (
        inp["supplier"]
        .map(lambda r: (r[2], (r[0], r[1])), vectorized=True)
        .semijoin(nations)
        .map(lambda r: r[1], vectorized=True)
    )  # suppkey -> name
    waits = lonely.join_map(supp, lambda s, n, name: (name, n), vectorized=True)
    counts = _sum_total(waits, lambda r: (r[0], (r[1],))).map(
        lambda kc: (kc[1][0], kc[0]), vectorized=True
    )  # (numwait, name)
    best = top_k(counts, 100, lambda r: (-r[0], r[1]))
    return best.map(lambda r: (r[1], r[0]), vectorized=True)


def _q21_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [(d.decode("s_name", n), int(c)) for n, c in _items(acc)]


q21.rows = _q21_rows


# --- Q22 -----------------------------------------------------------------------------------

_Q22_CODES = ("13", "31", "23", "29", "30", "18", "17")


@_query(
    22,
    {"customer": ("c_custkey", "c_phone", "c_acctbal"), "orders": ("o_orderkey", "o_custkey")},
    """
select cntrycode, count(*) as numcust, sum(c_acctbal) as totacctbal
from (select substring(c_phone from 1 for 2) as cntrycode, c_acctbal
      from customer
      where substring(c_phone from 1 for 2) in ('13', '31', '23', '29', '30', '18', '17')
        and c_acctbal > (select avg(c_acctbal) from customer
                         where c_acctbal > 0.00
                           and substring(c_phone from 1 for 2)
                               in ('13', '31', '23', '29', '30', '18', '17'))
        and not exists (select * from orders where o_custkey = c_custkey)) as custsale
group by cntrycode
order by cntrycode""",
)
def q22(inp: dict[str, Any], d: Tables) -> Any:
    cc = d.lookup("c_phone", lambda s: int(s[:2]) if s[:2] in _Q22_CODES else -1, dtype=np.int64)
    cust = (
        inp["customer"]
        .map(lambda r: (r[0], (cc[r[1]], r[2])), vectorized=True)
        .filter(lambda r: r[1][0] >= 0, vectorized=True)
    )  # cust -> (code, bal)
    avg = _sum_total(
        cust, lambda r: (np.zeros(len(r[0]), np.int64), (_ones(r[0]), r[1][1]), r[1][1] > 0)
    ).map(lambda kc: (kc[0], kc[1]), vectorized=True)  # (0, (n, sum))
    buyers = inp["orders"].map(lambda r: r[1], vectorized=True).distinct_total()
    idle = cust.antijoin(buyers).map(
        lambda r: (np.zeros(len(r[0]), np.int64), r[1]), vectorized=True
    )
    rich = idle.join_map(avg, lambda z, cb, a: (cb[0], cb[1], cb[1] * a[0] > a[1]), vectorized=True)
    return _sum_total(rich, lambda r: (r[0], (_ones(r[0]), r[1]), r[2]))


def _q22_rows(acc: dict[Any, Any], d: Tables) -> list[Row]:
    return [(f"{int(c):02d}", int(n), _dec(s, 2)) for c, (n, s) in _items(acc)]


q22.rows = _q22_rows
