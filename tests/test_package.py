"""The public surface: a curated, sorted __all__, and no Spark at import time."""

from __future__ import annotations

import subprocess
import sys

import ddflow


def test_all_sorted_and_complete():
    """__all__ is sorted and every name in it exists."""
    assert list(ddflow.__all__) == sorted(ddflow.__all__)
    for name in ddflow.__all__:
        assert hasattr(ddflow, name), name


def test_import_does_not_import_pyspark():
    """import ddflow works without Spark: pyspark is not imported."""
    code = "import sys, ddflow; sys.exit(1 if 'pyspark' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_degrees_job_runs():
    """The degrees job runs in-process and prints the distribution."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ddflow",
            "degrees",
            "--nodes",
            "200",
            "--edges",
            "800",
            "--batch",
            "50",
            "--rounds",
            "2",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "degree distribution" in out and "round 2" in out
