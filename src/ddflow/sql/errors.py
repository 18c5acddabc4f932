"""Errors of the SQL layer: every one a ``DDError`` that names the problem.

``UnsupportedSQL`` is SQL we understand but do not run (it names the construct);
``SQLError`` is SQL that is wrong for these tables (unknown table or column, a type that
does not fit, an ambiguous name). Data that does not fit a table raises ``DataError``.
A statement that raises changes no table and no view.
"""

from __future__ import annotations

from ddflow.core.errors import DataError, DDError

__all__ = ["SQLError", "UnsupportedSQL"]


class UnsupportedSQL(DDError, NotImplementedError):
    """SQL that ddflow does not run incrementally; the message names the construct."""


class SQLError(DataError):
    """SQL that does not fit the database: unknown table or column, type mismatch, a
    parse error."""
