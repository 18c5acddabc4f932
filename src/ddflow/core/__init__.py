"""Core: times and lattices, frontiers, diff algebra, columnar updates.

Imports nothing else of ddflow.
"""
