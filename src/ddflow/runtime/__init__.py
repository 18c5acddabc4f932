"""Runtime: workers, stepping and progress."""
