"""WITH RECURSIVE against DuckDB's WITH RECURSIVE after every commit of a graph stream that
adds and deletes edges (cycles, duplicates, NULL endpoints, a cut that disconnects, emptying
and refilling): transitive closure, reachability from roots, and shortest hop counts."""

from __future__ import annotations

import pytest
from oracle import Del, Ins, Oracle, case, check_stream
from sqldata import GRAPH_DDL, GRAPH_STREAM

CLOSURE = (
    "WITH RECURSIVE reach(src, dst) AS (SELECT src, dst FROM edges UNION "
    "SELECT r.src, e.dst FROM reach r JOIN edges e ON r.dst = e.src) "
    "SELECT src, dst FROM reach"
)

HOPS = (
    "WITH RECURSIVE h(src, dst, hops) AS (SELECT src, dst, 1 FROM edges UNION "
    "SELECT h.src, e.dst, h.hops + 1 FROM h JOIN edges e ON h.dst = e.src "
    "WHERE h.hops < 9) SELECT src, dst, min(hops) FROM h GROUP BY src, dst"
)

# DuckDB's USING KEY keeps one row per (src, dst): the least hop count seen so far
HOPS_USING_KEY = (
    "WITH RECURSIVE h(src, dst, hops) USING KEY (src, dst) AS ("
    "SELECT src, dst, min(1) FROM edges GROUP BY src, dst UNION "
    "SELECT h.src, e.dst, min(h.hops + 1) FROM h JOIN edges e ON h.dst = e.src "
    "LEFT JOIN recurring.h AS old ON old.src IS NOT DISTINCT FROM h.src "
    "AND old.dst IS NOT DISTINCT FROM e.dst "
    "WHERE old.hops IS NULL OR h.hops + 1 < old.hops GROUP BY h.src, e.dst) "
    "SELECT src, dst, hops FROM h"
)

RECURSIVE = [
    case(CLOSURE, id="transitive-closure"),
    case(
        "WITH RECURSIVE r(n) AS (SELECT n FROM roots UNION SELECT e.dst FROM r "
        "JOIN edges e ON e.src = r.n) SELECT n FROM r",
        id="reachable-from-roots",
    ),
    case(HOPS, id="shortest-hops-bounded"),
    case(HOPS, HOPS_USING_KEY, id="shortest-hops-vs-using-key"),
    case(
        "WITH RECURSIVE reach(src, dst) AS (SELECT src, dst FROM edges UNION "
        "SELECT r.src, e.dst FROM reach r JOIN edges e ON r.dst = e.src) "
        "SELECT src, count(*) FROM reach GROUP BY src",
        id="aggregate-over-closure",
    ),
    case(
        "WITH RECURSIVE reach(src, dst) AS (SELECT src, dst FROM edges UNION "
        "SELECT r.src, e.dst FROM reach r JOIN edges e ON r.dst = e.src) "
        "SELECT DISTINCT src FROM reach WHERE src = dst",
        id="nodes-on-cycles",
    ),
    case(
        "WITH RECURSIVE r(n, depth) AS (SELECT n, 0 FROM roots UNION ALL "
        "SELECT e.dst, r.depth + 1 FROM r JOIN edges e ON e.src = r.n WHERE r.depth < 5) "
        "SELECT n, depth FROM r",
        id="union-all-bounded-depth-bag",
    ),
]


@pytest.mark.parametrize(("sql", "duck", "ordered"), RECURSIVE)
def test_recursive(sql: str, duck: str | None, ordered: bool) -> None:
    """A recursive CTE stays equal to DuckDB's through edge inserts and deletions."""
    check_stream(GRAPH_DDL, [(sql, duck, ordered)], GRAPH_STREAM)


def test_closure_retracts_after_cycle_is_broken() -> None:
    """Facts derived only through a cycle disappear when the cycle is broken."""
    o = Oracle(GRAPH_DDL)
    o.view(CLOSURE)
    o.commit([Ins("edges", [(1, 2), (2, 1)])])
    o.commit([Ins("edges", [(2, 3)])])
    o.commit([Del("edges", [(2, 1)])])
    o.commit([Del("edges", [(1, 2)])])
    o.commit([Ins("edges", [(3, 3)])])
    o.commit([Del("edges", [(3, 3), (2, 3)])])
