"""Traces: immutable sorted batches with descriptions, kept in a progressively merged spine."""
