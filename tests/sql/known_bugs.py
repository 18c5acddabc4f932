"""The known bugs of ``ddflow.sql``, one line each, as the reasons of strict xfail markers.

Each has a minimal repro in FAILURES.md at the worktree's root. A test marked with one of
these fails (strictly) once the bug is fixed: then remove the marker, and the entry here
when nothing uses it.
"""

from __future__ import annotations

NOT_BOOL = "NOT of a BOOLEAN column is TRUE for both TRUE and FALSE (bitwise NOT of 0/1)"
CASE_BOOL = "CASE WHEN <BOOLEAN column> crashes the commit (UFuncTypeError in bitwise_or)"
EMPTY_DICT = "a NULL string in a view raises IndexError while the string dictionary is empty"
CASE_NULL_STRING = "a string CASE that is NULL on every row raises IndexError"
MULTI_DISTINCT = "sum/avg(DISTINCT) is 0 when another DISTINCT aggregate is in the query"
DECIMAL_WRAP = "a DECIMAL sum whose unscaled value passes 2**63 wraps silently"
MAX_BIGINT = "max(BIGINT) is -2**63 when the column holds both -2**63 and 2**63-1"
PAREN_GROUP_KEY = "GROUP BY (expr) in parentheses: 'column must appear in GROUP BY' SQLError"
ORDER_BY_SCALAR = "ORDER BY a scalar-subquery column crashes the planner (AssertionError)"
SETOP_CONSTANT = "a set operation with a FROM-less SELECT branch raises IndexError"
CORRELATED_HAVING = ("a correlated scalar subquery in HAVING raises UnsupportedSQL "
                     "('a correlated reference into an aggregated query')")
TWO_LEVELS = "UnsupportedSQL for a correlated reference two subquery levels down"
DROP_TABLE = "DROP TABLE crashes with AttributeError (sqlglot keeps the name in Drop.tables)"
TABLESAMPLE = "TABLESAMPLE is silently ignored (every row) instead of UnsupportedSQL"
FLOAT32 = "FLOAT columns keep double precision (0.1 reads back as 0.1, not float32)"
POWER_DECIMAL = "power() of a DECIMAL raises UnsupportedSQL('pow on decimals'); Spark: DOUBLE"
AND_TYPES = "INT AND DATE is accepted without a type error"
COMMIT_ERROR_TYPE = "a commit that overflows raises OperatorError, which is not a DataError"
SQLITE_TOTAL = "sqlite total() is refused with a misleading 'must appear in GROUP BY' SQLError"
