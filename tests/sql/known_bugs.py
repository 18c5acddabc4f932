"""The open bugs of ``ddflow.sql``, one line each, as the reasons of strict xfail markers.

Each has a minimal repro in FAILURES.md at the worktree's root. A test marked with one of
these fails (strictly) once the bug is fixed: then remove the marker, and the entry here
when nothing uses it. (Bugs already fixed are listed at the end of FAILURES.md.)
"""

from __future__ import annotations
