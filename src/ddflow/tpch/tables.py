"""All eight TPC-H tables as exact int64 columns, cached as Parquet beside the raw files.

Why it exists: the 22 query dataflows (``ddflow.tpch.queries``) take numpy columns, and
their answers are checked against DuckDB running SQL on the raw ``tpchgen-cli`` Parquet.
Both must see the same rows, so every table keeps the raw file's row order: row ``i`` of a
converted table is row ``i`` of the raw one.

Conversion (exact, no floats):

- integers stay integers (int64);
- ``decimal(15, 2)`` (money, quantities, discounts, taxes) become their unscaled int64
  value: cents, hundredths (``l_quantity`` 17 is 1700, ``l_discount`` 0.05 is 5);
- dates become days since 1970-01-01;
- strings become codes: ranks in the column's sorted dictionary of distinct values, so a
  code orders like its string (byte order, which is DuckDB's default collation too) and
  string predicates are evaluated once per distinct value (``Tables.lookup``).

Only the columns some query reads are converted (``COLUMNS``); comments that no query
reads (``l_comment``, ``ps_comment``, ...) are left out. Files under the cache get their
final name only when complete (temporary name + ``os.replace``).
"""

from __future__ import annotations

import datetime as _dt
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ddflow.tpch.data import _column, _unscaled, generate

__all__ = ["COLUMNS", "EPOCH", "TABLES", "Tables", "date_days", "load_tables"]

#: The eight tables, dimension tables first (the order change streams insert them in).
TABLES = ("region", "nation", "supplier", "part", "partsupp", "customer", "orders", "lineitem")

#: The columns converted for each table, with their kind: ``int``, ``money`` (decimal
#: scale 2, unscaled), ``date`` (days) or ``str`` (dictionary code).
COLUMNS: dict[str, dict[str, str]] = {
    "region": {"r_regionkey": "int", "r_name": "str"},
    "nation": {"n_nationkey": "int", "n_name": "str", "n_regionkey": "int"},
    "supplier": {
        "s_suppkey": "int",
        "s_name": "str",
        "s_address": "str",
        "s_nationkey": "int",
        "s_phone": "str",
        "s_acctbal": "money",
        "s_comment": "str",
    },
    "part": {
        "p_partkey": "int",
        "p_name": "str",
        "p_mfgr": "str",
        "p_brand": "str",
        "p_type": "str",
        "p_size": "int",
        "p_container": "str",
        "p_retailprice": "money",
    },
    "partsupp": {
        "ps_partkey": "int",
        "ps_suppkey": "int",
        "ps_availqty": "int",
        "ps_supplycost": "money",
    },
    "customer": {
        "c_custkey": "int",
        "c_name": "str",
        "c_address": "str",
        "c_nationkey": "int",
        "c_phone": "str",
        "c_acctbal": "money",
        "c_mktsegment": "str",
        "c_comment": "str",
    },
    "orders": {
        "o_orderkey": "int",
        "o_custkey": "int",
        "o_orderstatus": "str",
        "o_totalprice": "money",
        "o_orderdate": "date",
        "o_orderpriority": "str",
        "o_shippriority": "int",
        "o_comment": "str",
    },
    "lineitem": {
        "l_orderkey": "int",
        "l_partkey": "int",
        "l_suppkey": "int",
        "l_linenumber": "int",
        "l_quantity": "money",
        "l_extendedprice": "money",
        "l_discount": "money",
        "l_tax": "money",
        "l_returnflag": "str",
        "l_linestatus": "str",
        "l_shipdate": "date",
        "l_commitdate": "date",
        "l_receiptdate": "date",
        "l_shipinstruct": "str",
        "l_shipmode": "str",
    },
}

EPOCH = _dt.date(1970, 1, 1)


def date_days(text: str) -> int:
    """``'1995-03-15'`` as days since 1970-01-01 (the stored form of dates)."""
    return (_dt.date.fromisoformat(text) - EPOCH).days


@dataclass
class Tables:
    """The converted tables of one scale factor.

    ``columns[table][column]`` is an int64 array (raw row order); ``dicts[column]`` the sorted
    distinct strings of a ``str`` column (a code indexes it); ``raw[table]`` the raw Parquet
    path (what DuckDB reads)."""

    sf: float
    columns: dict[str, dict[str, np.ndarray]]
    dicts: dict[str, np.ndarray]
    raw: dict[str, Path]
    _lookups: dict[Any, np.ndarray] = field(default_factory=dict, repr=False)

    def rows(self, table: str) -> int:
        return len(next(iter(self.columns[table].values())))

    def code(self, column: str, value: str) -> int:
        """The code of ``value`` in ``column``'s dictionary; -1 when no row holds it (a
        predicate ``col == value`` then matches nothing, as in SQL)."""
        d = self.dicts[column]
        i = int(np.searchsorted(d, value))
        return i if i < len(d) and d[i] == value else -1

    def lookup(self, column: str, fn: Callable[[str], Any], dtype: Any = bool) -> np.ndarray:
        """``fn`` applied to every distinct string of ``column``, as an array indexed by code:
        ``lookup('p_type', lambda s: s.endswith('BRASS'))[codes]`` is a row mask."""
        return np.array([fn(s) for s in self.dicts[column]], dtype=dtype)

    def decode(self, column: str, codes: Any) -> Any:
        """Strings of codes (an int or an array of them)."""
        return self.dicts[column][codes]


def _strings(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, dictionary)``: the sorted distinct values and each row's rank among them."""
    arr = pc.cast(arr, pa.string())
    uniq = pc.unique(arr)
    uniq = uniq.take(pc.array_sort_indices(uniq))
    codes = pc.index_in(arr, value_set=uniq).to_numpy(zero_copy_only=False)
    return codes.astype(np.int64), np.array(uniq.to_pylist(), dtype=object)


def _convert(raw: Path, table: str, out: Path) -> None:
    t = pq.read_table(raw, columns=list(COLUMNS[table]))
    arrays, names = [], []
    for name, kind in COLUMNS[table].items():
        col = _column(t, name)
        if kind == "int":
            arrays.append(pa.array(col.to_numpy().astype(np.int64)))
        elif kind == "money":
            arrays.append(pa.array(_unscaled(col, 2)))
        elif kind == "date":
            arrays.append(pa.array(col.cast(pa.int32()).to_numpy().astype(np.int64)))
        else:
            codes, uniq = _strings(col)
            arrays.append(pa.array(codes))
            _write(
                pa.table({"value": pa.array(list(uniq), pa.string())}),
                out / f"{table}.{name}.dict.parquet",
            )
        names.append(name)
    _write(pa.table(arrays, names=names), out / f"{table}.int.parquet")


def _write(t: pa.Table, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        pq.write_table(t, tmp, compression="zstd")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def load_tables(sf: float, tables: Sequence[str] = TABLES) -> Tables:
    """The converted ``tables`` at scale factor ``sf`` (generated and converted once, then
    read from the cache)."""
    unknown = [t for t in tables if t not in COLUMNS]
    if unknown:
        raise ValueError(f"unknown TPC-H table {unknown[0]!r}; tables are {', '.join(TABLES)}")
    folder = generate(sf, tuple(tables))
    columns: dict[str, dict[str, np.ndarray]] = {}
    dicts: dict[str, np.ndarray] = {}
    raw: dict[str, Path] = {}
    for table in tables:
        raw[table] = folder / f"{table}.parquet"
        path = folder / f"{table}.int.parquet"
        dict_paths = {
            n: folder / f"{table}.{n}.dict.parquet" for n, k in COLUMNS[table].items() if k == "str"
        }
        if not path.is_file() or not all(p.is_file() for p in dict_paths.values()):
            _convert(raw[table], table, folder)
        t = pq.read_table(path)
        columns[table] = {n: t.column(n).to_numpy() for n in COLUMNS[table]}
        for n, p in dict_paths.items():
            dicts[n] = np.array(pq.read_table(p).column("value").to_pylist(), dtype=object)
    return Tables(sf, columns, dicts, raw)
