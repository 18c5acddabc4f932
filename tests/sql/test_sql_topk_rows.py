"""Top-k rows against DuckDB after every commit, ordered by fields of every sortable type,
ascending and descending, NULLs first and last: the fields a top-k orders by by their own
values are carried once, in their sort columns, and must come back unchanged (NULLs, the
values under them, descending keys inverted back). The stream inserts, updates, deletes,
empties and refills the table (``WIDE_STREAM``)."""

from __future__ import annotations

import pytest
from oracle import case, check_stream
from sqldata import WIDE_DDL, WIDE_STREAM

COLS = "id, bo, ti, si, i, bi, de, db, s, d, ts"

TOPK_ROWS = [
    case(
        f"SELECT {COLS} FROM w ORDER BY bi DESC NULLS LAST, id NULLS FIRST LIMIT 3",
        ordered=True,
        id="bigint-desc",
    ),
    case(
        f"SELECT {COLS} FROM w ORDER BY db DESC NULLS FIRST, id NULLS LAST LIMIT 4",
        ordered=True,
        id="double-desc-nulls-first",
    ),
    case(
        f"SELECT {COLS} FROM w ORDER BY de NULLS LAST, d DESC NULLS LAST, id NULLS FIRST "
        "LIMIT 3 OFFSET 1",
        ordered=True,
        id="decimal-asc-date-desc-offset",
    ),
    case(
        f"SELECT {COLS} FROM w ORDER BY ts DESC NULLS LAST, bo NULLS FIRST, s NULLS FIRST, "
        "id NULLS FIRST LIMIT 5",
        ordered=True,
        id="timestamp-bool-string",
    ),
    case(
        "SELECT i, sum(de) AS t, count(*) AS n FROM w GROUP BY i "
        "ORDER BY t DESC NULLS LAST, i NULLS FIRST LIMIT 2",
        ordered=True,
        id="aggregate-desc",
    ),
    case(
        f"SELECT {COLS} FROM w ORDER BY si DESC NULLS LAST, si NULLS FIRST, id NULLS FIRST LIMIT 3",
        ordered=True,
        id="one-field-twice",
    ),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), TOPK_ROWS)
def test_top_k_rows(sql: str, duck: str | None, ordered: bool) -> None:
    """The top-k rows, in order, equal DuckDB's after every commit."""
    check_stream(WIDE_DDL, [(sql, duck, ordered)], WIDE_STREAM)
