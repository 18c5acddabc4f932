"""ddflow: differential dataflow for Python, vectorized with numpy.

Collections change over (possibly partially ordered) time; operators keep their outputs
exactly equal to recomputing from scratch, with work proportional to the change. See
``docs/api.md`` for the API and ``ddflow.core``/``trace``/``operators``/``runtime`` for the
layers. ``import ddflow`` never imports pyspark.
"""

from __future__ import annotations

from ddflow.core.diff import DiffPair, MinSum, Sum
from ddflow.core.errors import (
    DataError,
    DataflowClosedError,
    DDError,
    DiffTypeError,
    FrontierError,
    OperatorError,
    RetractionError,
    ScopeError,
    SessionClosedError,
    TimeError,
)
from ddflow.core.time import Product
from ddflow.dataflow.collection import Arranged, Collection
from ddflow.dataflow.iterate import Variable
from ddflow.runtime.comm import MeshError, PeerAborted, WorkerError
from ddflow.runtime.job import Changes, JobResult, Output, run_job
from ddflow.runtime.processes import execute
from ddflow.runtime.scope import IterationLimitError, Scope
from ddflow.runtime.worker import Capture, InputSession, Probe, Worker

__all__ = [
    "Arranged",
    "Capture",
    "Changes",
    "Collection",
    "DDError",
    "DataError",
    "DataflowClosedError",
    "DiffPair",
    "DiffTypeError",
    "FrontierError",
    "InputSession",
    "IterationLimitError",
    "JobResult",
    "MeshError",
    "MinSum",
    "OperatorError",
    "Output",
    "PeerAborted",
    "Probe",
    "Product",
    "RetractionError",
    "Scope",
    "ScopeError",
    "SessionClosedError",
    "Sum",
    "TimeError",
    "Variable",
    "Worker",
    "WorkerError",
    "execute",
    "run_job",
]

__version__ = "0.1.0"
