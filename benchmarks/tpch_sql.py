"""TPC-H in plain SQL: the schema, the raw tables and the 22 query texts, run by ``ddflow.sql``.

Why it exists: ``ddflow.tpch`` maintains TPC-H with hand-written dataflows over integer
encoded tables; ``ddflow.sql`` promises the same answers, nearly as fast, from the SQL text
a user would write over the real, typed tables. This module holds what both the SQL test
(``tests/sql/test_tpch_sql.py``) and ``benchmarks/tpch.py --sql`` need and nothing of
``ddflow.sql``'s internals: the TPC-H DDL, the ``tpchgen-cli`` tables as Arrow tables of
those types, the queries as TPC-H writes them (validation parameters, date arithmetic with
intervals, Q15's view as a CTE), a comparison of answers that knows which numbers are
exact, and the benchmark of the SQL views over ``ddflow.tpch.stream``'s change streams.

The query texts differ from the TPC-H specification in two ways only, both so that one
answer is right: a top-k query orders by enough columns that its ``LIMIT`` picks one set
(Q3 adds ``l_orderkey``, Q10 ``c_custkey``, Q18 ``o_orderkey``), and Q11's fraction is
``0.0001 / SF`` as the specification says, written out for the scale factor.

Answers are compared as multisets of rows. Integers, strings, dates and decimals that both
sides compute exactly must be equal; a number that either side rounds (DuckDB's ``avg`` and
decimal ``/`` are doubles, Spark's ``avg`` of a ``DECIMAL(p, s)`` is a decimal of scale
``s + 4``, its ``/`` rounds to the result type's scale) may differ by half a unit in the
last place of the decimal (Spark rounds half up), or by a relative ``1e-9`` between doubles.
"""

from __future__ import annotations

import datetime as _dt
import math
import sys
import time
from collections.abc import Iterable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ddflow.tpch.data import generate
from ddflow.tpch.tables import TABLES

__all__ = [
    "DDL",
    "QUERY_TABLES",
    "SCHEMAS",
    "TABLES",
    "differences",
    "duckdb_rows",
    "queries",
    "raw_tables",
    "sql_benchmark",
]

Row = tuple[Any, ...]

# --- schema --------------------------------------------------------------------------------

_I64, _I32, _DEC, _DATE, _STR = (
    pa.int64(),
    pa.int32(),
    pa.decimal128(15, 2),
    pa.date32(),
    pa.string(),
)

#: Column name and Arrow type of every table, as TPC-H (section 1.4) types them:
#: identifiers BIGINT, integers INT, decimals DECIMAL(15,2), dates DATE, text STRING.
SCHEMAS: dict[str, pa.Schema] = {
    "region": pa.schema([("r_regionkey", _I64), ("r_name", _STR), ("r_comment", _STR)]),
    "nation": pa.schema(
        [("n_nationkey", _I64), ("n_name", _STR), ("n_regionkey", _I64), ("n_comment", _STR)]
    ),
    "supplier": pa.schema(
        [
            ("s_suppkey", _I64),
            ("s_name", _STR),
            ("s_address", _STR),
            ("s_nationkey", _I64),
            ("s_phone", _STR),
            ("s_acctbal", _DEC),
            ("s_comment", _STR),
        ]
    ),
    "part": pa.schema(
        [
            ("p_partkey", _I64),
            ("p_name", _STR),
            ("p_mfgr", _STR),
            ("p_brand", _STR),
            ("p_type", _STR),
            ("p_size", _I32),
            ("p_container", _STR),
            ("p_retailprice", _DEC),
            ("p_comment", _STR),
        ]
    ),
    "partsupp": pa.schema(
        [
            ("ps_partkey", _I64),
            ("ps_suppkey", _I64),
            ("ps_availqty", _I32),
            ("ps_supplycost", _DEC),
            ("ps_comment", _STR),
        ]
    ),
    "customer": pa.schema(
        [
            ("c_custkey", _I64),
            ("c_name", _STR),
            ("c_address", _STR),
            ("c_nationkey", _I64),
            ("c_phone", _STR),
            ("c_acctbal", _DEC),
            ("c_mktsegment", _STR),
            ("c_comment", _STR),
        ]
    ),
    "orders": pa.schema(
        [
            ("o_orderkey", _I64),
            ("o_custkey", _I64),
            ("o_orderstatus", _STR),
            ("o_totalprice", _DEC),
            ("o_orderdate", _DATE),
            ("o_orderpriority", _STR),
            ("o_clerk", _STR),
            ("o_shippriority", _I32),
            ("o_comment", _STR),
        ]
    ),
    "lineitem": pa.schema(
        [
            ("l_orderkey", _I64),
            ("l_partkey", _I64),
            ("l_suppkey", _I64),
            ("l_linenumber", _I32),
            ("l_quantity", _DEC),
            ("l_extendedprice", _DEC),
            ("l_discount", _DEC),
            ("l_tax", _DEC),
            ("l_returnflag", _STR),
            ("l_linestatus", _STR),
            ("l_shipdate", _DATE),
            ("l_commitdate", _DATE),
            ("l_receiptdate", _DATE),
            ("l_shipinstruct", _STR),
            ("l_shipmode", _STR),
            ("l_comment", _STR),
        ]
    ),
}

#: The key columns of every table (TPC-H's primary keys): an update keeps them.
KEYS: dict[str, tuple[str, ...]] = {
    "region": ("r_regionkey",),
    "nation": ("n_nationkey",),
    "supplier": ("s_suppkey",),
    "part": ("p_partkey",),
    "partsupp": ("ps_partkey", "ps_suppkey"),
    "customer": ("c_custkey",),
    "orders": ("o_orderkey",),
    "lineitem": ("l_orderkey", "l_linenumber"),
}


def _sql_type(t: pa.DataType) -> str:
    if t == _I64:
        return "BIGINT"
    if t == _I32:
        return "INT"
    if t == _DEC:
        return "DECIMAL(15,2)"
    if t == _DATE:
        return "DATE"
    return "STRING"


#: The primary keys of the TPC-H specification (declared in the DDL: the planner orders
#: joins by them; they are not enforced).
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "part": ("p_partkey",),
    "supplier": ("s_suppkey",),
    "partsupp": ("ps_partkey", "ps_suppkey"),
    "customer": ("c_custkey",),
    "orders": ("o_orderkey",),
    "lineitem": ("l_orderkey", "l_linenumber"),
    "nation": ("n_nationkey",),
    "region": ("r_regionkey",),
}

#: ``CREATE TABLE`` statements (Spark SQL) of the eight tables; every column is NOT NULL,
#: as in the TPC-H specification's schema, with its primary key.
DDL: dict[str, str] = {
    name: f"CREATE TABLE {name} ("
    + ", ".join(f"{f.name} {_sql_type(f.type)} NOT NULL" for f in schema)
    + f", PRIMARY KEY ({', '.join(PRIMARY_KEYS[name])}))"
    for name, schema in SCHEMAS.items()
}


def raw_tables(sf: float, tables: Iterable[str] = TABLES) -> dict[str, pa.Table]:
    """The ``tpchgen-cli`` tables at scale factor ``sf`` (generated once into
    ``ddflow.tpch.data``'s cache), cast to ``SCHEMAS``; row ``i`` is row ``i`` of the
    Parquet file, as in ``ddflow.tpch.tables`` (so stream events index both)."""
    tables = tuple(tables)
    folder = generate(sf, tables)
    out = {}
    for t in tables:
        raw = pq.read_table(folder / f"{t}.parquet")
        out[t] = raw.select(SCHEMAS[t].names).cast(SCHEMAS[t]).combine_chunks()
    return out


# --- queries -------------------------------------------------------------------------------

_QUERIES: dict[int, str] = {
    1: """
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
    2: """
select s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
from part, supplier, partsupp, nation, region
where p_partkey = ps_partkey and s_suppkey = ps_suppkey and p_size = 15
  and p_type like '%BRASS' and s_nationkey = n_nationkey and n_regionkey = r_regionkey
  and r_name = 'EUROPE'
  and ps_supplycost = (
      select min(ps_supplycost)
      from partsupp, supplier, nation, region
      where p_partkey = ps_partkey and s_suppkey = ps_suppkey and s_nationkey = n_nationkey
        and n_regionkey = r_regionkey and r_name = 'EUROPE')
order by s_acctbal desc, n_name, s_name, p_partkey
limit 100""",
    3: """
select l_orderkey, sum(l_extendedprice * (1 - l_discount)) as revenue, o_orderdate,
       o_shippriority
from customer, orders, lineitem
where c_mktsegment = 'BUILDING' and c_custkey = o_custkey and l_orderkey = o_orderkey
  and o_orderdate < date '1995-03-15' and l_shipdate > date '1995-03-15'
group by l_orderkey, o_orderdate, o_shippriority
order by revenue desc, o_orderdate, l_orderkey
limit 10""",
    4: """
select o_orderpriority, count(*) as order_count
from orders
where o_orderdate >= date '1993-07-01'
  and o_orderdate < date '1993-07-01' + interval '3' month
  and exists (select * from lineitem
              where l_orderkey = o_orderkey and l_commitdate < l_receiptdate)
group by o_orderpriority
order by o_orderpriority""",
    5: """
select n_name, sum(l_extendedprice * (1 - l_discount)) as revenue
from customer, orders, lineitem, supplier, nation, region
where c_custkey = o_custkey and l_orderkey = o_orderkey and l_suppkey = s_suppkey
  and c_nationkey = s_nationkey and s_nationkey = n_nationkey
  and n_regionkey = r_regionkey and r_name = 'ASIA'
  and o_orderdate >= date '1994-01-01'
  and o_orderdate < date '1994-01-01' + interval '1' year
group by n_name
order by revenue desc""",
    6: """
select sum(l_extendedprice * l_discount) as revenue
from lineitem
where l_shipdate >= date '1994-01-01'
  and l_shipdate < date '1994-01-01' + interval '1' year
  and l_discount between 0.06 - 0.01 and 0.06 + 0.01
  and l_quantity < 24""",
    7: """
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
    8: """
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
    9: """
select nation, o_year, sum(amount) as sum_profit
from (select n_name as nation, extract(year from o_orderdate) as o_year,
             l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity as amount
      from part, supplier, lineitem, partsupp, orders, nation
      where s_suppkey = l_suppkey and ps_suppkey = l_suppkey and ps_partkey = l_partkey
        and p_partkey = l_partkey and o_orderkey = l_orderkey and s_nationkey = n_nationkey
        and p_name like '%green%') as profit
group by nation, o_year
order by nation, o_year desc""",
    10: """
select c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) as revenue, c_acctbal,
       n_name, c_address, c_phone, c_comment
from customer, orders, lineitem, nation
where c_custkey = o_custkey and l_orderkey = o_orderkey
  and o_orderdate >= date '1993-10-01'
  and o_orderdate < date '1993-10-01' + interval '3' month
  and l_returnflag = 'R' and c_nationkey = n_nationkey
group by c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
order by revenue desc, c_custkey
limit 20""",
    11: """
select ps_partkey, sum(ps_supplycost * ps_availqty) as value
from partsupp, supplier, nation
where ps_suppkey = s_suppkey and s_nationkey = n_nationkey and n_name = 'GERMANY'
group by ps_partkey
having sum(ps_supplycost * ps_availqty) > (
    select sum(ps_supplycost * ps_availqty) * {fraction}
    from partsupp, supplier, nation
    where ps_suppkey = s_suppkey and s_nationkey = n_nationkey and n_name = 'GERMANY')
order by value desc""",
    12: """
select l_shipmode,
       sum(case when o_orderpriority = '1-URGENT' or o_orderpriority = '2-HIGH'
                then 1 else 0 end) as high_line_count,
       sum(case when o_orderpriority <> '1-URGENT' and o_orderpriority <> '2-HIGH'
                then 1 else 0 end) as low_line_count
from orders, lineitem
where o_orderkey = l_orderkey and l_shipmode in ('MAIL', 'SHIP')
  and l_commitdate < l_receiptdate and l_shipdate < l_commitdate
  and l_receiptdate >= date '1994-01-01'
  and l_receiptdate < date '1994-01-01' + interval '1' year
group by l_shipmode
order by l_shipmode""",
    13: """
select c_count, count(*) as custdist
from (select c_custkey, count(o_orderkey)
      from customer left outer join orders
        on c_custkey = o_custkey and o_comment not like '%special%requests%'
      group by c_custkey) as c_orders (c_custkey, c_count)
group by c_count
order by custdist desc, c_count desc""",
    14: """
select 100.00 * sum(case when p_type like 'PROMO%'
                         then l_extendedprice * (1 - l_discount) else 0 end)
       / sum(l_extendedprice * (1 - l_discount)) as promo_revenue
from lineitem, part
where l_partkey = p_partkey
  and l_shipdate >= date '1995-09-01'
  and l_shipdate < date '1995-09-01' + interval '1' month""",
    15: """
with revenue0 (supplier_no, total_revenue) as (
    select l_suppkey, sum(l_extendedprice * (1 - l_discount))
    from lineitem
    where l_shipdate >= date '1996-01-01'
      and l_shipdate < date '1996-01-01' + interval '3' month
    group by l_suppkey)
select s_suppkey, s_name, s_address, s_phone, total_revenue
from supplier, revenue0
where s_suppkey = supplier_no
  and total_revenue = (select max(total_revenue) from revenue0)
order by s_suppkey""",
    16: """
select p_brand, p_type, p_size, count(distinct ps_suppkey) as supplier_cnt
from partsupp, part
where p_partkey = ps_partkey and p_brand <> 'Brand#45'
  and p_type not like 'MEDIUM POLISHED%' and p_size in (49, 14, 23, 45, 19, 3, 36, 9)
  and ps_suppkey not in (select s_suppkey from supplier
                         where s_comment like '%Customer%Complaints%')
group by p_brand, p_type, p_size
order by supplier_cnt desc, p_brand, p_type, p_size""",
    17: """
select sum(l_extendedprice) / 7.0 as avg_yearly
from lineitem, part
where p_partkey = l_partkey and p_brand = 'Brand#23' and p_container = 'MED BOX'
  and l_quantity < (select 0.2 * avg(l_quantity) from lineitem where l_partkey = p_partkey)""",
    18: """
select c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity)
from customer, orders, lineitem
where o_orderkey in (select l_orderkey from lineitem group by l_orderkey
                     having sum(l_quantity) > 300)
  and c_custkey = o_custkey and o_orderkey = l_orderkey
group by c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
order by o_totalprice desc, o_orderdate, o_orderkey
limit 100""",
    19: """
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
    20: """
select s_name, s_address
from supplier, nation
where s_suppkey in (
        select ps_suppkey from partsupp
        where ps_partkey in (select p_partkey from part where p_name like 'forest%')
          and ps_availqty > (select 0.5 * sum(l_quantity) from lineitem
                             where l_partkey = ps_partkey and l_suppkey = ps_suppkey
                               and l_shipdate >= date '1994-01-01'
                               and l_shipdate < date '1994-01-01' + interval '1' year))
  and s_nationkey = n_nationkey and n_name = 'CANADA'
order by s_name""",
    21: """
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
    22: """
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
}

#: The tables each query reads.
QUERY_TABLES: dict[int, tuple[str, ...]] = {
    1: ("lineitem",),
    2: ("region", "nation", "supplier", "part", "partsupp"),
    3: ("customer", "orders", "lineitem"),
    4: ("orders", "lineitem"),
    5: ("region", "nation", "supplier", "customer", "orders", "lineitem"),
    6: ("lineitem",),
    7: ("nation", "supplier", "customer", "orders", "lineitem"),
    8: ("region", "nation", "supplier", "part", "customer", "orders", "lineitem"),
    9: ("nation", "supplier", "part", "partsupp", "orders", "lineitem"),
    10: ("nation", "customer", "orders", "lineitem"),
    11: ("nation", "supplier", "partsupp"),
    12: ("orders", "lineitem"),
    13: ("customer", "orders"),
    14: ("part", "lineitem"),
    15: ("supplier", "lineitem"),
    16: ("supplier", "part", "partsupp"),
    17: ("part", "lineitem"),
    18: ("customer", "orders", "lineitem"),
    19: ("part", "lineitem"),
    20: ("nation", "supplier", "part", "partsupp", "lineitem"),
    21: ("nation", "supplier", "orders", "lineitem"),
    22: ("customer", "orders"),
}


def queries(sf: float) -> dict[int, str]:
    """The 22 queries' SQL text (Spark SQL, which DuckDB also runs) for scale factor ``sf``."""
    fraction = f"{Decimal('0.0001') / Decimal(str(sf)):f}"
    return {
        n: text.strip().format(fraction=fraction) if n == 11 else text.strip()
        for n, text in _QUERIES.items()
    }


# --- answers -------------------------------------------------------------------------------


def duckdb_rows(con: Any, sql: str, tables: dict[str, pa.Table]) -> list[Row]:
    """DuckDB's rows for ``sql`` over ``tables`` (registered under their names)."""
    for name, t in tables.items():
        con.register(name, t)
    try:
        return [tuple(r) for r in con.execute(sql).fetchall()]
    finally:
        for name in tables:
            con.unregister(name)


def _ulp(v: Any) -> float:
    """One unit in the last place of a decimal (0 for other values)."""
    if isinstance(v, Decimal) and v.is_finite():
        return 10.0 ** v.as_tuple().exponent  # type: ignore[operator]
    return 0.0


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if _is_number(a) and _is_number(b):
        exact = (isinstance(a, int) and isinstance(b, int)) or (
            isinstance(a, Decimal) and isinstance(b, Decimal) and _ulp(a) == _ulp(b)
        )
        if exact:
            return bool(a == b)
        x, y = float(a), float(b)
        # a decimal rounded to its scale is within half a unit of its last place
        slack = max(_ulp(a), _ulp(b)) / 2 * (1 + 1e-9)
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9) or abs(x - y) <= slack
    return bool(a == b)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, Decimal, Fraction)) and not isinstance(v, bool)


def _key(r: Row) -> tuple[Any, ...]:
    # A total order over mixed rows; numbers rounded so a last-digit difference (the rounding
    # ``_close`` allows) rarely reorders two rows. Ties are resolved by matching below.
    out: list[tuple[int, Any]] = []
    for v in r:
        if v is None:
            out.append((0, 0))
        elif _is_number(v):
            out.append((1, round(float(v), 4)))
        elif isinstance(v, (_dt.date, _dt.datetime)):
            out.append((2, v.isoformat()))
        else:
            out.append((3, str(v)))
    return tuple(out)


def differences(got: Sequence[Row], want: Sequence[Row], limit: int = 4) -> list[str]:
    """How two answers differ as multisets of rows (empty when they agree): a row count,
    then up to ``limit`` rows of either side that have no counterpart in the other."""
    g = sorted(got, key=_key)
    w = sorted(want, key=_key)
    out = []
    if len(g) != len(w):
        out.append(f"{len(g)} rows, want {len(w)}")
    unmatched_w = list(w)
    extra = []
    for r in g:
        for i, s in enumerate(unmatched_w):
            if len(r) == len(s) and all(_close(a, b) for a, b in zip(r, s, strict=True)):
                del unmatched_w[i]
                break
        else:
            extra.append(r)
    for r in extra[:limit]:
        out.append(f"got {_show(r)}")
    for r in unmatched_w[:limit]:
        out.append(f"want {_show(r)}")
    return out if (extra or unmatched_w or len(g) != len(w)) else []


def _show(r: Row) -> str:
    return "(" + ", ".join(str(v) if not isinstance(v, str) else repr(v) for v in r) + ")"


# --- benchmark -----------------------------------------------------------------------------


def _feed(
    stream: Any, raw: dict[str, pa.Table], tables: Sequence[str]
) -> list[list[tuple[str, pa.Table | None, pa.Table | None]]]:
    """Per batch of ``stream``, per table, the rows it inserts and deletes (Arrow)."""
    feed: list[list[tuple[str, pa.Table | None, pa.Table | None]]] = [
        [] for _ in range(stream.rounds)
    ]
    for t in tables:
        rows, diffs, times = stream.events(t)
        bounds = np.flatnonzero(np.diff(times)) + 1
        starts = np.concatenate([[0], bounds])
        ends = np.concatenate([bounds, [len(times)]])
        for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
            if hi <= lo:
                continue
            r, d = rows[lo:hi], diffs[lo:hi]
            ins, dels = r[d > 0], r[d < 0]
            feed[int(times[lo])].append(
                (
                    t,
                    raw[t].take(ins) if len(ins) else None,
                    raw[t].take(dels) if len(dels) else None,
                )
            )
    return feed


def run_sql(
    n: int, sql: str, stream: Any, raw: dict[str, pa.Table]
) -> tuple[float, list[Row], list[float], float]:
    """Feeds ``stream`` to a ``ddflow.sql`` database with one view of ``sql``: batch ``i``
    is commit ``i``. Returns the seconds spent feeding and committing, the final rows, the
    seconds of each commit and the CPU seconds of the whole (view creation and preparing
    Arrow batches are not timed)."""
    import ddflow.sql as dsql

    tables = QUERY_TABLES[n]
    feed = _feed(stream, raw, tables)
    db = dsql.Database(dialect="spark")
    for t in tables:
        db.execute(DDL[t])
    view = db.view(sql)
    db.commit()  # builds the dataflow on the empty tables
    per = []
    cpu = 0.0
    for parts in feed:
        t0, c0 = time.perf_counter(), time.process_time()
        for t, ins, dels in parts:
            if ins is not None:
                db.insert(t, ins)
            if dels is not None:
                db.delete(t, dels)
        db.commit()
        per.append(time.perf_counter() - t0)
        cpu += time.process_time() - c0
    return sum(per), view.rows(), per, cpu


class _Clocks:
    """Stands in for the ``time`` module of ``ddflow.tpch.run`` while ``run_query`` runs:
    ``perf_counter`` returns the wall clock as before and notes the CPU clock beside it.
    ``run_query`` reads the clock once before feeding a window and once after computing it,
    so the notes pair up into the CPU time of exactly what it times."""

    def __init__(self) -> None:
        self.cpu: list[float] = []

    def perf_counter(self) -> float:
        self.cpu.append(time.process_time())
        return time.perf_counter()

    def seconds(self) -> float:
        if len(self.cpu) % 2:
            raise RuntimeError("run_query read the clock an odd number of times")
        return sum(b - a for a, b in zip(self.cpu[0::2], self.cpu[1::2], strict=True))


def run_hand(n: int, data: Any, stream: Any, window: int) -> tuple[Any, float]:
    """``run_query`` for query ``n`` and the CPU seconds of what it times."""
    import ddflow.tpch.run as run_mod

    clocks = _Clocks()
    saved = run_mod.time
    run_mod.time = clocks  # type: ignore[assignment]
    try:
        run = run_mod.run_query(n, data, stream=stream, window_rows=window)
    finally:
        run_mod.time = saved
    return run, clocks.seconds()


def live_tables(
    stream: Any, raw: dict[str, pa.Table], tables: Sequence[str], t: int
) -> dict[str, pa.Table]:
    """The rows of ``tables`` live after batch ``t`` of ``stream``."""
    return {name: raw[name].filter(stream.present(name, t, raw[name].num_rows)) for name in tables}


def sql_benchmark(args: Any) -> dict[str, Any]:
    """``benchmarks/tpch.py --sql``: each query from SQL text through ``ddflow.sql`` and as
    its hand-written ``ddflow.tpch`` dataflow over the same stream (``--window`` applies to
    the hand-written one; a SQL commit is one batch, so ``--window 0`` is like for like),
    the first batch size of ``--batches``; the final answers compared with each other and
    with DuckDB. Both the wall and the CPU time of the timed part are kept (the CPU ratio
    is the steadier figure on a shared machine). Prints one JSON document (``--json``)
    and a table on stderr."""
    import duckdb

    from _common import ddflow_source, emit_json, log, machine_info, median
    from ddflow.tpch.queries import QUERIES
    from ddflow.tpch.stream import make_stream
    from ddflow.tpch.tables import load_tables

    nums = sorted(_QUERIES) if args.queries == "all" else [int(x) for x in args.queries.split(",")]
    batch = int(args.batches.split(",")[0])
    source = ddflow_source()  # what is imported now is what runs
    t0 = time.perf_counter()
    data = load_tables(args.sf)
    raw = raw_tables(args.sf)
    texts = queries(args.sf)
    log(f"tables at SF {args.sf:g} loaded in {time.perf_counter() - t0:.1f} s", quiet=args.quiet)
    con = duckdb.connect()
    results = []
    for n in nums:
        entry: dict[str, Any] = {"query": n, "batch": batch}
        stream = make_stream(data, tuple(QUERIES[n].tables), batch=batch, refresh=args.refresh)
        entry["rounds"], entry["events"] = stream.rounds, len(stream)
        hand_s: list[float] = []
        sql_s: list[float] = []
        hand_cpu: list[float] = []
        sql_cpu: list[float] = []
        hand_rows: list[Row] | None = None
        sql_rows: list[Row] | None = None
        for _ in range(args.repeat):  # alternating, so load on the machine hits both alike
            run, cpu = run_hand(n, data, stream, args.window)
            hand_s.append(run.seconds)
            hand_cpu.append(cpu)
            hand_rows = run.answer(data, stream.rounds - 1)
            if "sql_error" in entry:
                continue
            try:
                secs, sql_rows, per, cpu = run_sql(n, texts[n], stream, raw)
            except Exception as e:  # report the failure and go on with the next query
                entry["sql_error"] = f"{type(e).__name__}: {str(e)[:300]}"
                continue
            sql_s.append(secs)
            sql_cpu.append(cpu)
            entry["sql_commit_max_s"] = round(max(per), 4)
        entry["hand_s"] = round(median(hand_s), 4)
        entry["hand_runs_s"] = [round(x, 4) for x in hand_s]
        entry["hand_cpu_s"] = round(median(hand_cpu), 4)
        if sql_s and "sql_error" not in entry:
            entry["sql_s"] = round(median(sql_s), 4)
            entry["sql_runs_s"] = [round(x, 4) for x in sql_s]
            entry["ratio"] = round(entry["sql_s"] / entry["hand_s"], 2)
            entry["sql_cpu_s"] = round(median(sql_cpu), 4)
            entry["cpu_ratio"] = round(entry["sql_cpu_s"] / entry["hand_cpu_s"], 2)
        want = duckdb_rows(
            con, texts[n], live_tables(stream, raw, QUERY_TABLES[n], stream.rounds - 1)
        )
        assert hand_rows is not None
        bad_hand = differences(hand_rows, want)
        entry["hand_vs_duckdb"] = bad_hand or "equal"
        if sql_rows is not None and "sql_error" not in entry:
            entry["sql_vs_duckdb"] = differences(sql_rows, want) or "equal"
            entry["sql_vs_hand"] = differences(sql_rows, hand_rows) or "equal"
        entry["rows"] = len(want)
        results.append(entry)
        log(_line(entry), quiet=args.quiet)
    doc = {
        "benchmark": "tpch_sql",
        "machine": machine_info(("ddflow", "duckdb", "sqlglot")),
        "ddflow_source": source,
        "params": {k: v for k, v in vars(args).items() if k != "replot"},
        "results": results,
    }
    emit_json(doc, path=args.json)
    if not args.quiet:
        sys.stderr.write(table(doc) + "\n")
    return doc


def _line(e: dict[str, Any]) -> str:
    if "sql_error" in e:
        return f"q{e['query']}: hand {e['hand_s']:.3f} s, SQL failed: {e['sql_error']}"
    return (
        f"q{e['query']}: SQL {e['sql_s']:.3f} s, hand {e['hand_s']:.3f} s, "
        f"ratio {e['ratio']:.2f} (CPU {e['cpu_ratio']:.2f}), "
        f"SQL=DuckDB {e['sql_vs_duckdb'] == 'equal'}, "
        f"SQL=hand {e['sql_vs_hand'] == 'equal'}"
    )


def table(doc: dict[str, Any]) -> str:
    """The results as a Markdown table."""
    p = doc["params"]
    lines = [
        f"SF {p['sf']:g}, batch {doc['results'][0]['batch'] if doc['results'] else '-'}"
        f" rows, hand-written window {p['window']} rows",
        "",
        "| query | SQL s | hand-written s | ratio | CPU ratio | SQL = DuckDB | "
        "SQL = hand | hand = DuckDB |",
        "|---|---:|---:|---:|---:|---|---|---|",
    ]
    for e in doc["results"]:
        hand_ok = "yes" if e["hand_vs_duckdb"] == "equal" else "NO"
        if "sql_error" in e:
            lines.append(
                f"| Q{e['query']} | error: {e['sql_error'][:60]} | {e['hand_s']:.3f} "
                f"| - | - | - | - | {hand_ok} |"
            )
            continue
        lines.append(
            f"| Q{e['query']} | {e['sql_s']:.3f} | {e['hand_s']:.3f} | {e['ratio']:.2f} | "
            f"{e['cpu_ratio']:.2f} | "
            f"{'yes' if e['sql_vs_duckdb'] == 'equal' else 'NO'} | "
            f"{'yes' if e['sql_vs_hand'] == 'equal' else 'NO'} | {hand_ok} |"
        )
    return "\n".join(lines)


# --- profile -------------------------------------------------------------------------------

#: Where a profile sample's time goes: the first rule (in this order) that matches a frame
#: on its stack, by the frame's file and (if given) function; so a ``consolidate`` inside a
#: spine merge counts as the merge, an expression evaluated inside a filter as expression
#: evaluation, and a trace lookup as the lookup whichever operator makes it.
CATEGORIES: tuple[tuple[str, str, str], ...] = (
    ("delete: finding the rows (TableStore)", "ddflow/sql/store.py", ""),
    ("ingest: Arrow to columns", "ddflow/sql/ingest.py", ""),
    ("ingest: lazy batches, strings", "ddflow/sql/batch.py", ""),
    ("expressions (sql/expr.py)", "ddflow/sql/expr.py", ""),
    ("aggregates (sql/aggregate.py)", "ddflow/sql/aggregate.py", ""),
    ("trace lookups (TraceBatch.rows_for)", "ddflow/trace/batch.py", "rows_for"),
    ("spine merges", "ddflow/trace/spine.py", "work"),
    ("trace reads (spine: key_sums, gather)", "ddflow/trace/spine.py", ""),
    ("arrangement batches", "ddflow/trace/batch.py", ""),
    ("arrange operator", "ddflow/operators/arrange.py", ""),
    ("join", "ddflow/operators/join.py", ""),
    ("count_total", "ddflow/operators/count_total.py", ""),
    ("min/max_total", "ddflow/operators/min_total.py", ""),
    ("reduce", "ddflow/operators/reduce.py", ""),
    ("hierarchical reduce", "ddflow/dataflow/hierarchical.py", ""),
    ("map/filter/explode (operators/linear.py)", "ddflow/operators/linear.py", ""),
    ("lowered SQL glue (sql/lower.py)", "ddflow/sql/lower.py", ""),
    ("database commit bookkeeping", "ddflow/sql/database.py", ""),
    ("runtime (worker, scopes, progress)", "ddflow/engine/", ""),
    ("core (updates, columns)", "ddflow/core/", ""),
)


def _categorize(frame: Any, current: int, out: dict[str, float]) -> None:
    path = (frame.file_path or "").replace("\\", "/")
    for i, (_, pattern, function) in enumerate(CATEGORIES[:current]):
        if pattern in path and (not function or frame.function == function):
            current = i
            break
    name = CATEGORIES[current][0] if current < len(CATEGORIES) else "other"
    out[name] = out.get(name, 0.0) + frame.total_self_time
    for child in frame.children:
        _categorize(child, current, out)


def profile(n: int, sf: float, batch: int, refresh: float = 0.001) -> dict[str, Any]:
    """Where ``ddflow.sql`` spends the timed part of ``run_sql`` for query ``n`` (feeding and
    committing the stream), by ``CATEGORIES``, sampled with pyinstrument."""
    import pyinstrument

    import ddflow.sql as dsql
    from ddflow.tpch.queries import QUERIES
    from ddflow.tpch.stream import make_stream
    from ddflow.tpch.tables import load_tables

    data = load_tables(sf)
    raw = raw_tables(sf, QUERY_TABLES[n])
    stream = make_stream(data, tuple(QUERIES[n].tables), batch=batch, refresh=refresh)
    feed = _feed(stream, raw, QUERY_TABLES[n])
    db = dsql.Database(dialect="spark")
    for t in QUERY_TABLES[n]:
        db.execute(DDL[t])
    sql = queries(sf)[n]
    db.view(sql)
    db.commit()
    prof = pyinstrument.Profiler(interval=0.001)
    prof.start()
    t0 = time.perf_counter()
    for parts in feed:
        for t, ins, dels in parts:
            if ins is not None:
                db.insert(t, ins)
            if dels is not None:
                db.delete(t, dels)
        db.commit()
    seconds = time.perf_counter() - t0
    prof.stop()
    out: dict[str, float] = {}
    root = prof.last_session.root_frame() if prof.last_session else None
    if root is not None:
        _categorize(root, len(CATEGORIES), out)
    total = sum(out.values()) or 1.0
    shares = {k: round(100 * v / total, 1) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}
    return {
        "query": n,
        "sf": sf,
        "batch": batch,
        "seconds": round(seconds, 3),
        "percent": shares,
        "plan": db.explain(sql),
        "tree": prof.output_text(unicode=False, color=False),
    }


if __name__ == "__main__":
    # ``python benchmarks/tpch_sql.py sql 0.01``: the DDL and the queries' text;
    # ``python benchmarks/tpch_sql.py profile Q SF BATCH [--tree]``: where Q's time goes.
    if len(sys.argv) > 1 and sys.argv[1] == "profile":
        res = profile(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
        print(f"Q{res['query']} SF {res['sf']:g} batch {res['batch']}: {res['seconds']} s")
        for k, v in res["percent"].items():
            print(f"  {v:5.1f}%  {k}")
        print(res["plan"])
        if "--tree" in sys.argv:
            print(res["tree"])
        sys.exit(0)
    sf = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    for ddl in DDL.values():
        print(ddl + ";")
    for n, text in queries(sf).items():
        print(f"\n-- Q{n}\n{text};")
