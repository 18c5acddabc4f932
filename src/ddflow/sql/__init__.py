"""SQL views kept exact as tables change: the relational layer of ddflow.

Create tables, define views in SQL, feed changes, commit, read answers and change streams::

    import ddflow.sql as dsql
    db = dsql.Database()                       # Spark SQL's dialect ("sqlite" also)
    db.execute("CREATE TABLE t (a INT, b STRING, c DECIMAL(12,2))")
    v = db.view("SELECT b, sum(c) FROM t GROUP BY b")
    db.insert("t", [(1, "x", 2.5), (2, "x", None)])
    db.commit()
    v.rows()                                   # [('x', Decimal('2.50'))]

Queries are parsed with sqlglot, planned here (``explain`` prints the plan) and run as a
differential dataflow: each commit costs work proportional to what changed.
"""

from __future__ import annotations

from ddflow.core.errors import DataError, DDError, TotalOverflowError
from ddflow.sql.database import Database, View
from ddflow.sql.errors import SQLError, UnsupportedSQL

__all__ = [
    "DDError",
    "DataError",
    "Database",
    "SQLError",
    "TotalOverflowError",
    "UnsupportedSQL",
    "View",
]
