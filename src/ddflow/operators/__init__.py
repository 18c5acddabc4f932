"""Operators: the incremental kernels, one module per operator family."""
