"""Inputs and outputs of a dataflow: input sessions and their operator, probes and captures.

Builds on the engine (``ddflow.engine``); the dataflow API (``ddflow.dataflow``) hands these
to users."""
