"""Dataflow: the user-facing Collection and Arranged API."""
