"""Aggregates over decimals whose unscaled values leave 64 bits, against DuckDB.

A DECIMAL(38, s) value can need up to 127 bits, and so can the result of DECIMAL
arithmetic (``a / b`` of two DECIMAL(12,2) is a DECIMAL(27,15), so a quotient of 10,000
already leaves 64 bits). Sums and averages of such values, grouped or not, plain or
DISTINCT, over a join or under HAVING, stay exact as rows come and go, and so do min and
max.
"""

from __future__ import annotations

from decimal import Decimal as D

import pytest
from oracle import Del, Ins, case, check_stream, churn

import ddflow.sql as dsql

DDL = [
    "CREATE TABLE w (g INT, big DECIMAL(38,6), a DECIMAL(12,2), b DECIMAL(12,2))",
    "CREATE TABLE k (g INT, label VARCHAR)",
]

_FIRST = [
    (1, D("12345678901234567890123.456789"), D("100000.00"), D("3.00")),
    (1, D("-99999999999999999999999999.000001"), D("5.00"), D("7.00")),
    (2, D("9223372036854.775808"), D("9999999999.99"), D("0.01")),
    (2, D("9223372036854.775807"), D("1.00"), D("1.00")),
    (3, None, None, D("2.00")),
    (3, D("0.000001"), D("-9999999999.99"), D("0.03")),
    (1, D("12345678901234567890123.456789"), D("100000.00"), D("3.00")),
]
_SECOND = [
    (2, D("-12345678901234567890123.456789"), D("42.42"), D("0.07")),
    (4, D("99999999999999999999999999999999.999999"), D("0.01"), D("9999999999.99")),
    (4, D("-99999999999999999999999999999999.999999"), D("0.02"), D("0.01")),
    (1, D("1.5"), D("2.50"), D("0.50")),
]
_LABELS = [(1, "one"), (2, "two"), (3, "three"), (4, "four")]


def _stream() -> list[list[Ins | Del]]:
    commits = churn("w", _FIRST, _SECOND)
    commits[0] = [Ins("k", _LABELS), *commits[0]]
    return commits


# DuckDB's avg of a DECIMAL is a double; its quotient of two DECIMAL(12,2) is a double too,
# so a sum of quotients is compared at double precision (the oracle's relative 1e-9)
VIEWS = [
    case("SELECT g, sum(big) AS s, count(big) AS n FROM w GROUP BY g", id="grouped_sum"),
    case("SELECT sum(big), avg(big), count(*) FROM w", id="global_sum_avg"),
    case("SELECT g, avg(big) AS m FROM w GROUP BY g", id="grouped_avg"),
    case(
        "SELECT g, sum(DISTINCT big) AS s, avg(DISTINCT big) AS m FROM w GROUP BY g",
        id="distinct_sum_avg",
    ),
    case("SELECT g, min(big), max(big) FROM w GROUP BY g", id="min_max"),
    case(
        "SELECT g, sum(a / b) AS q FROM w GROUP BY g",
        "SELECT g, sum(CAST(a AS DOUBLE) / CAST(b AS DOUBLE)) AS q FROM w GROUP BY g",
        id="sum_of_quotients",
    ),
    case(
        "SELECT g, sum(a * a * a * b) AS p FROM w GROUP BY g",
        "SELECT g, sum(CAST(a AS DOUBLE) * CAST(a AS DOUBLE) * CAST(a AS DOUBLE) "
        "* CAST(b AS DOUBLE)) AS p FROM w GROUP BY g",
        id="sum_of_products",
    ),
    case(
        "SELECT label, sum(big) AS s FROM w JOIN k ON w.g = k.g GROUP BY label",
        id="sum_over_join",
    ),
    case(
        "SELECT g, sum(big) AS s FROM w GROUP BY g HAVING sum(big) > 1000000000000000000000",
        id="having_sum",
    ),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), VIEWS)
def test_wide_decimal_aggregates_equal_duckdb(sql: str, duck: str | None, ordered: bool) -> None:
    check_stream(DDL, [(sql, duck, ordered)], _stream())


def test_a_sum_beyond_38_digits_is_refused_not_wrapped() -> None:
    """A total whose digits leave DECIMAL(38) is an error naming the overflow; the
    database stays usable and the commit changes nothing."""
    db = dsql.Database()
    db.execute(DDL[0])
    v = db.view("SELECT sum(big) AS s FROM w")
    top = D("99999999999999999999999999999999.999999")
    db.insert("w", [(1, top, None, None)])
    db.commit()
    assert v.rows() == [(top,)]
    db.insert("w", [(2, top, None, None)])
    with pytest.raises(dsql.DataError, match="does not fit DECIMAL"):
        db.commit()
    assert v.rows() == [(top,)]
    neg = D("-99999999999999999999999999999999.999999")  # (-top would round to 28 digits)
    db.insert("w", [(2, neg, None, None), (3, D("0.000001"), None, None)])
    db.commit()
    assert v.rows() == [(D("0.000001"),)]


def test_avg_of_a_38_digit_decimal_has_ten_places_and_may_overflow() -> None:
    """Spark types avg(DECIMAL(38,6)) as DECIMAL(38,10) (four more places, capped at 38
    digits): exact to ten places, and an average with more than 28 integer digits is a
    ``TotalOverflowError``, as Spark's NUMERIC_VALUE_OUT_OF_RANGE is."""
    db = dsql.Database()
    db.execute(DDL[0])
    v = db.view("SELECT g, avg(big) AS m FROM w GROUP BY g")
    db.insert("w", [(1, D("1.000001"), None, None), (1, D("2"), None, None)])
    db.commit()
    ((g, m),) = v.rows()
    assert m == D("1.5000005") and m.as_tuple().exponent == -10
    db.insert("w", [(2, D("99999999999999999999999999999"), None, None)])  # 29 digits
    with pytest.raises(dsql.TotalOverflowError, match="does not fit DECIMAL"):
        db.commit()
    assert v.rows() == [(1, m)]
