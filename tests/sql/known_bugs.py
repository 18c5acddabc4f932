"""The open bugs of ``ddflow.sql``, one line each, as the reasons of strict xfail markers.

Each has a minimal repro in FAILURES.md at the worktree's root. A test marked with one of
these fails (strictly) once the bug is fixed: then remove the marker, and the entry here
when nothing uses it. (Bugs already fixed are listed at the end of FAILURES.md.)
"""

from __future__ import annotations

DECIMAL_WRAP = "a DECIMAL sum whose unscaled value passes 2**63 wraps silently"
MAX_BIGINT = "max(BIGINT) is -2**63 when the column holds both -2**63 and 2**63-1"
TWO_LEVELS = "UnsupportedSQL for a correlated reference two subquery levels down"
