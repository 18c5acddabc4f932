"""Three-valued logic and conditional expressions against DuckDB after every commit:
comparisons with NULL, AND/OR/NOT on NULL, CASE, COALESCE, NULLIF, IN lists, BETWEEN,
IS [NOT] NULL, IS [NOT] DISTINCT FROM."""

from __future__ import annotations

import pytest
from oracle import case, check_stream
from sqldata import WIDE_DDL, WIDE_STREAM

LOGIC = [
    case("SELECT id, i > 0, i = NULL, NULL = NULL, i <> i FROM w", id="comparison-values"),
    case("SELECT id FROM w WHERE i = NULL", id="where-eq-null-keeps-nothing"),
    case("SELECT id FROM w WHERE NULL = 1", id="where-constant-null"),
    case("SELECT id FROM w WHERE 3 IN (1, NULL)", id="where-constant-in-list-null"),
    case("SELECT id FROM w WHERE i > 0 OR 3 IN (1, NULL)", id="where-or-constant-null"),
    case("SELECT id FROM w WHERE 1 = 1", id="where-constant-true"),
    case("SELECT id FROM w WHERE NOT (i > 0)", id="not-comparison-drops-null"),
    case("SELECT id, bo AND i > 0, bo OR i > 0 FROM w", id="kleene-values"),
    case("SELECT id, NOT bo FROM w", id="not-bool-column-value"),
    case("SELECT id, NOT (i > 0), NOT (i > 0 AND s = 'apple') FROM w", id="not-comparison-values"),
    case("SELECT id FROM w WHERE bo OR i > 100", id="or-with-null"),
    case("SELECT id FROM w WHERE NOT (bo AND i > 100)", id="not-and-with-null"),
    case("SELECT id FROM w WHERE NOT (bo OR i < 0)", id="not-or-with-null"),
    case(
        "SELECT id, bo AND NULL, bo OR NULL, NULL AND FALSE, NULL OR TRUE FROM w",
        id="null-literal-kleene",
    ),
    case("SELECT id FROM w WHERE i IS NULL", id="is-null"),
    case("SELECT id FROM w WHERE s IS NOT NULL AND d IS NULL", id="is-not-null"),
    case(
        "SELECT id, i IS DISTINCT FROM ti, i IS NOT DISTINCT FROM ti FROM w", id="is-distinct-from"
    ),
    case("SELECT id FROM w WHERE bo IS TRUE", id="is-true"),
    case("SELECT id FROM w WHERE bo IS NOT FALSE", id="is-not-false"),
    case(
        "SELECT id, i <=> ti, s <=> vc FROM w",
        "SELECT id, i IS NOT DISTINCT FROM ti, s IS NOT DISTINCT FROM vc FROM w",
        id="null-safe-equal",
    ),
    case(
        "SELECT id, bo IS TRUE, bo IS FALSE, bo IS NOT TRUE, (i > 0) IS NOT FALSE FROM w",
        id="is-true-false-values",
    ),
]

CONDITIONALS = [
    case(
        "SELECT id, CASE WHEN i > 0 THEN 'pos' WHEN i < 0 THEN 'neg' ELSE 'other' END FROM w",
        id="searched-case",
    ),
    case(
        "SELECT id, CASE i WHEN 7 THEN 'seven' WHEN 1000 THEN 'k' END FROM w",
        id="simple-case-no-else-is-null",
    ),
    case(
        "SELECT id, CASE WHEN NULL THEN 1 ELSE 2 END, CASE WHEN i > 100 THEN 1 ELSE 0 END FROM w",
        id="case-when-null-takes-else",
    ),
    case("SELECT id, CASE WHEN bo THEN 1 ELSE 0 END FROM w", id="case-when-bool-column"),
    case(
        "SELECT id, CASE WHEN i > 0 THEN 2 END, CASE WHEN bo THEN 1.50 ELSE -2.25 END, "
        "CASE WHEN s = 'apple' THEN 9223372036854775807 END, "
        "CASE WHEN i < 5 THEN 1 ELSE 0 END FROM w",
        id="case-one-when-between-numbers",
    ),
    case(
        "SELECT count(CASE WHEN i > 0 THEN 1 END), sum(CASE WHEN bo THEN 3 ELSE -1 END), "
        "count(CASE WHEN de > 10 THEN 1 ELSE NULL END) FROM w",
        id="filtered-counts-and-sums",
    ),
    case(
        "SELECT id, CASE WHEN de > 10 THEN de ELSE i END FROM w", id="case-mixed-numeric-branches"
    ),
    case(
        "SELECT id, CASE s WHEN NULL THEN 'n' ELSE 'x' END FROM w",
        id="simple-case-null-never-matches",
    ),
    case(
        "SELECT id, COALESCE(i, ti, -1), COALESCE(s, vc, '?'), COALESCE(de, 0) FROM w",
        id="coalesce",
    ),
    case("SELECT id, NULLIF(i, 7), NULLIF(s, ''), NULLIF(bo, TRUE) FROM w", id="nullif"),
    case("SELECT id FROM w WHERE i IN (1, 7, 1000)", id="in-list"),
    case("SELECT id FROM w WHERE i IN (1, NULL)", id="in-list-with-null"),
    case("SELECT id FROM w WHERE i IN (0, NULL)", id="in-list-with-zero-and-null"),
    case(
        "SELECT id, i IN (0, NULL), s IN ('', NULL), d IN (DATE '1970-01-01', NULL) FROM w",
        id="in-list-with-zero-and-null-values",
    ),
    case("SELECT id FROM w WHERE i NOT IN (1, 7)", id="not-in-list"),
    case("SELECT id FROM w WHERE i NOT IN (1, NULL)", id="not-in-list-with-null-keeps-nothing"),
    case("SELECT id, i IN (1, NULL), i NOT IN (7, NULL) FROM w", id="in-list-values"),
    case("SELECT id FROM w WHERE s IN ('apple', '', 'cherry')", id="in-list-strings"),
    case("SELECT id FROM w WHERE d IN (DATE '2024-01-15', DATE '2000-01-01')", id="in-list-dates"),
    case("SELECT id FROM w WHERE i BETWEEN -10 AND 10", id="between"),
    case("SELECT id FROM w WHERE i NOT BETWEEN -10 AND 10", id="not-between"),
    case("SELECT id FROM w WHERE s BETWEEN 'B' AND 'b'", id="between-strings"),
    case("SELECT id FROM w WHERE de BETWEEN 0 AND 12.5", id="between-decimal"),
    case("SELECT id, i BETWEEN ti AND bi FROM w", id="between-columns-value"),
    case("SELECT id, greatest(i, ti, si), least(i, ti, si) FROM w", id="greatest-least-skip-null"),
    case("SELECT id, IF(i > 0, 'p', 'n'), IF(NULL, 1, 2) FROM w", id="if-function"),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), LOGIC)
def test_three_valued_logic(sql: str, duck: str | None, ordered: bool) -> None:
    """Comparisons with NULL are NULL, AND/OR/NOT follow Kleene, WHERE keeps only TRUE."""
    check_stream(WIDE_DDL, [(sql, duck, ordered)], WIDE_STREAM, create_after=1)


@pytest.mark.parametrize(("sql", "duck", "ordered"), CONDITIONALS)
def test_conditional_expression(sql: str, duck: str | None, ordered: bool) -> None:
    """CASE, COALESCE, NULLIF, IN lists and BETWEEN handle NULLs as DuckDB does."""
    check_stream(WIDE_DDL, [(sql, duck, ordered)], WIDE_STREAM, create_after=1)
