"""ddflow: differential dataflow for Python, vectorized with numpy.

Collections change over (possibly partially ordered) time; operators keep their outputs
exactly equal to recomputing from scratch, with work proportional to the change. The layers,
lowest first: ``core``, ``trace``, ``engine``, ``io``, ``operators``, ``dataflow``,
``runtimes`` (and ``spark``, ``sql`` above them); ``import ddflow`` never imports pyspark.
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
    TotalOverflowError,
    UnknownInputError,
)
from ddflow.core.time import Product
from ddflow.dataflow.collection import Arranged, Collection
from ddflow.dataflow.iterate import Variable
from ddflow.dataflow.worker import Worker
from ddflow.engine.checkpoint import CheckpointError
from ddflow.engine.comm import MeshError, PeerAborted, WorkerError
from ddflow.engine.scope import IterationLimitError, Scope
from ddflow.io.input import InputSession
from ddflow.io.output import Capture, Probe
from ddflow.runtimes.config import JobConfig, RoundReport, Runtime
from ddflow.runtimes.job import Changes, JobResult, Output
from ddflow.runtimes.local import InProcess, Processes, run_job
from ddflow.runtimes.processes import execute

__all__ = [
    "Arranged",
    "Capture",
    "Changes",
    "CheckpointError",
    "Collection",
    "DDError",
    "DataError",
    "DataflowClosedError",
    "DiffPair",
    "DiffTypeError",
    "FrontierError",
    "InProcess",
    "InputSession",
    "IterationLimitError",
    "JobConfig",
    "JobResult",
    "MeshError",
    "MinSum",
    "OperatorError",
    "Output",
    "PeerAborted",
    "Probe",
    "Processes",
    "Product",
    "RetractionError",
    "RoundReport",
    "Runtime",
    "Scope",
    "ScopeError",
    "SessionClosedError",
    "Sum",
    "TimeError",
    "TotalOverflowError",
    "UnknownInputError",
    "Variable",
    "Worker",
    "WorkerError",
    "execute",
    "run_job",
]

__version__ = "0.1.0"
