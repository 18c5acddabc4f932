"""TPC-H data on disk: tables generated once by ``tpchgen-cli`` and exact integer views of them.

Why it exists: the TPC-H workloads feed ``lineitem`` into a dataflow as numpy columns, and
their answers are checked against SQL engines reading the same Parquet files. Generating
SF 1 takes seconds and converting it more, so both are cached under
``cache_dir()/tpch/sf<SF>/``.

``tpchgen-cli`` 4.x writes Parquet with ``decimal128(15, 2)`` money and quantity columns,
``date32`` dates and ``string_view`` strings (one character for the flags). The derived
``lineitem_q1.parquet`` holds only int64 columns, converted exactly (no floats anywhere):

- ``row``: ``0..n-1`` in ``(l_orderkey, l_linenumber)`` order (the table's key, so a row
  index names one line item and a prefix of rows is a key range);
- ``returnflag``, ``linestatus``: the byte code of the one-character string (``ord('A')``);
- ``quantity``: whole units; ``extendedprice``: cents; ``discount``, ``tax``: hundredths
  (the decimal's unscaled integer);
- ``shipdate``: days since 1970-01-01 (``date32``'s own value).

Invariants: a file under the cache has its final name only once it is complete (writers
use a temporary name in the same directory and ``os.replace``), so an interrupted run
never leaves a half-written file that a later run would use.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ddflow.tools import find_tool

__all__ = [
    "Q1_COLUMNS",
    "cache_dir",
    "cached_path",
    "generate",
    "lineitem_path",
    "lineitem_q1",
    "lineitem_q1_table",
]

#: Columns of ``lineitem_q1.parquet``, in order (all int64).
Q1_COLUMNS = (
    "row",
    "returnflag",
    "linestatus",
    "quantity",
    "extendedprice",
    "discount",
    "tax",
    "shipdate",
)


def cache_dir() -> Path:
    """The cache root: ``$DDFLOW_CACHE`` if set, else ``~/.cache/ddflow``."""
    env = os.environ.get("DDFLOW_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ddflow"


def _sf_text(sf: float) -> str:
    """The scale factor as written in paths and on the command line (``1``, ``0.01``)."""
    if sf <= 0:
        raise ValueError(f"the scale factor must be positive, got {sf!r}")
    return f"{sf:g}"


def _sf_dir(sf: float) -> Path:
    return cache_dir() / "tpch" / f"sf{_sf_text(sf)}"


def cached_path(sf: float, name: str) -> Path:
    """Where file ``name`` of scale factor ``sf`` lives in the cache (``lineitem.parquet``,
    ``lineitem_q1.parquet``, ...), whether or not it is there yet; nothing is generated. A
    file at that path is complete (see the invariant above)."""
    return _sf_dir(sf) / name


def generate(sf: float, tables: Sequence[str] = ("lineitem",)) -> Path:
    """Generates TPC-H ``tables`` at scale factor ``sf`` as Parquet, once; returns their folder.

    The folder is ``cache_dir()/tpch/sf<SF>`` and holds ``<table>.parquet``. Tables already
    there are not generated again. Missing ones are written by ``tpchgen-cli parquet`` into
    a temporary folder beside it and moved in file by file. ``tpchgen-cli`` is found beside
    the running interpreter first, then on PATH (``ddflow.tools.find_tool``). Raises
    ``ToolNotFoundError`` (a ``RuntimeError``) if it is not installed, ``RuntimeError`` if
    it fails.
    """
    if isinstance(tables, str):
        tables = (tables,)
    out = _sf_dir(sf)
    missing = [t for t in tables if not (out / f"{t}.parquet").is_file()]
    if not missing:
        return out
    exe = find_tool("tpchgen-cli", extra="tpch")
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".sf{_sf_text(sf)}-", dir=out.parent))
    try:
        cmd = [
            exe,
            "parquet",
            "-s",
            _sf_text(sf),
            f"--tables={','.join(missing)}",
            f"--output-dir={tmp}",
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise RuntimeError(
                f"tpchgen-cli failed (exit {res.returncode}): {' '.join(cmd)}\n{res.stderr}"
            )
        for t in missing:
            made = tmp / f"{t}.parquet"
            if not made.is_file():
                raise RuntimeError(f"tpchgen-cli did not write {made.name} ({' '.join(cmd)})")
            os.replace(made, out / made.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def lineitem_path(sf: float) -> Path:
    """The raw ``lineitem.parquet`` written by ``tpchgen-cli`` (generated if missing)."""
    return generate(sf, ("lineitem",)) / "lineitem.parquet"


def _column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name).combine_chunks()
    if col.null_count:
        raise ValueError(f"column {name} has {col.null_count} nulls; TPC-H columns have none")
    return col


def _unscaled(arr: pa.Array, scale: int) -> np.ndarray:
    """A decimal column's values times ``10**scale`` as exact int64 (raises if inexact).

    Reads the unscaled 128-bit integers straight from the Arrow buffer (little-endian two's
    complement): the low word is the value when the high word is its sign extension.
    """
    if not pa.types.is_decimal(arr.type):
        raise TypeError(f"expected a decimal column, got {arr.type}")
    if not pa.types.is_decimal128(arr.type):
        arr = pc.cast(arr, pa.decimal128(38, arr.type.scale))  # widening is exact
    words = np.frombuffer(arr.buffers()[1], dtype="<i8").reshape(-1, 2)
    words = words[arr.offset : arr.offset + len(arr)]
    low, high = words[:, 0], words[:, 1]
    if not np.array_equal(high, low >> 63):
        raise ValueError(f"decimal values of {arr.type} do not fit in int64")
    shift = scale - arr.type.scale
    if shift >= 0:
        return low.astype(np.int64) * np.int64(10**shift)
    q, r = np.divmod(low, np.int64(10**-shift))
    if r.any():
        raise ValueError(f"decimal values of {arr.type} are not multiples of 10**{-scale}")
    return q.astype(np.int64)


def _char_codes(arr: pa.Array) -> np.ndarray:
    """Byte codes of a one-character string column, via its (tiny) dictionary."""
    enc = pc.dictionary_encode(pc.cast(arr, pa.string()))
    words = enc.dictionary.to_pylist()  # the distinct values only, e.g. ['N', 'R', 'A']
    bad = [w for w in words if len(w.encode()) != 1]
    if bad:
        raise ValueError(f"expected one-byte strings, got {bad!r}")
    codes = np.array([ord(w) for w in words], dtype=np.int64)
    return codes[enc.indices.to_numpy(zero_copy_only=False)]


def _days(arr: pa.Array) -> np.ndarray:
    """Days since 1970-01-01 of a date column."""
    if not pa.types.is_date32(arr.type):
        arr = pc.cast(arr, pa.date32())
    return arr.view(pa.int32()).to_numpy().astype(np.int64)


def _q1_table(raw: pa.Table) -> pa.Table:
    """The ``Q1_COLUMNS`` table of a raw ``lineitem`` table (sorted by its key)."""
    okey = _column(raw, "l_orderkey").to_numpy()
    line = _column(raw, "l_linenumber").to_numpy()
    order = np.lexsort((line, okey))
    cols = {
        "returnflag": _char_codes(_column(raw, "l_returnflag")),
        "linestatus": _char_codes(_column(raw, "l_linestatus")),
        "quantity": _unscaled(_column(raw, "l_quantity"), 0),
        "extendedprice": _unscaled(_column(raw, "l_extendedprice"), 2),
        "discount": _unscaled(_column(raw, "l_discount"), 2),
        "tax": _unscaled(_column(raw, "l_tax"), 2),
        "shipdate": _days(_column(raw, "l_shipdate")),
    }
    if not np.array_equal(order, np.arange(len(order))):
        cols = {k: v[order] for k, v in cols.items()}
    arrays = [pa.array(np.arange(len(order), dtype=np.int64))]
    arrays += [pa.array(cols[name]) for name in Q1_COLUMNS[1:]]
    return pa.Table.from_arrays(arrays, names=list(Q1_COLUMNS))


def lineitem_q1(sf: float) -> Path:
    """The cached ``lineitem_q1.parquet`` at scale factor ``sf`` (built once from lineitem)."""
    raw_path = lineitem_path(sf)
    path = raw_path.with_name("lineitem_q1.parquet")
    if path.is_file():
        return path
    raw = pq.read_table(
        raw_path,
        columns=[
            "l_orderkey",
            "l_linenumber",
            "l_quantity",
            "l_extendedprice",
            "l_discount",
            "l_tax",
            "l_returnflag",
            "l_linestatus",
            "l_shipdate",
        ],
    )
    table = _q1_table(raw)
    # A private name in the same folder (not mkstemp: its file mode would be 0600).
    tmp = path.with_name(f".{path.stem}-{os.getpid()}-{uuid.uuid4().hex}.parquet")
    try:
        # zstd and 1 M-row groups: measured ~3x faster to read back here than the defaults.
        pq.write_table(table, tmp, compression="zstd", row_group_size=1 << 20)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def lineitem_q1_table(sf: float) -> pa.Table:
    """``lineitem_q1(sf)`` read into memory: int64 columns ``Q1_COLUMNS``."""
    return pq.read_table(lineitem_q1(sf))
