"""The command line (``python -m ddflow``): bad numbers are usage errors, a missing extra
says what to install, and the main job reports its progress truthfully."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _ddflow(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ddflow", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["q1", "--sf", "0"], "argument --sf: must be > 0, got 0"),
        (["q1", "--sf", "-1"], "argument --sf: must be > 0"),
        (["q1", "--sf", "nan"], "argument --sf: must be > 0"),
        (["q1", "--sf", "inf"], "argument --sf: must be > 0"),
        (["q1", "--sf", "one"], "argument --sf: expected a number, got 'one'"),
        (["q1", "--batch", "0"], "argument --batch: must be at least 1, got 0"),
        (["q1", "--batch", "2.5"], "argument --batch: expected a whole number"),
        (["q1", "--workers", "0"], "argument --workers: must be at least 1, got 0"),
        (["q1", "--delete-fraction", "-0.1"], "argument --delete-fraction: must be >= 0 and <= 1"),
        (["q1", "--delete-fraction", "1.5"], "argument --delete-fraction: must be >= 0 and <= 1"),
        (["degrees", "--nodes", "0"], "argument --nodes: must be at least 1, got 0"),
        (["degrees", "--edges", "0"], "argument --edges: must be at least 1, got 0"),
        (["degrees", "--batch", "0"], "argument --batch: must be at least 1, got 0"),
        (["degrees", "--rounds", "-1"], "argument --rounds: must be at least 0, got -1"),
        (["degrees", "--seed", "-3"], "argument --seed: must be at least 0, got -3"),
        (["degrees", "--edges", "10", "--batch", "11"], "at most --edges (10) edges"),
    ],
)
def test_bad_numbers_are_usage_errors(args: list[str], says: str) -> None:
    """A bad numeric argument exits 2 with a usage line and what was wrong, no traceback."""
    proc = _ddflow(*args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("usage: ddflow")
    assert says in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_without_pyspark_the_main_job_says_to_install_the_spark_extra() -> None:
    """Without pyspark, ``python -m ddflow`` exits 1 naming the ``spark`` extra to install."""
    code = (
        "import sys; sys.modules['pyspark'] = None; sys.argv = ['ddflow']; "
        "from ddflow.__main__ import main; sys.exit(main())"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "pyspark is not installed" in proc.stderr and "ddflow[spark,tpch]" in proc.stderr
    assert "scripts/setup" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.spark
def test_main_job_reports_generation_then_cache(tmp_path: Path) -> None:
    """The README's main job at a small scale factor: with an empty cache it says it
    generates the data (and never "cached"), prints the table and throughput, shows progress
    of the Spark SQL check and its answer equals Spark SQL's; run again, it says "cached"."""
    env = dict(os.environ, DDFLOW_CACHE=str(tmp_path / "cache"))
    first = _ddflow("q1", "--sf", "0.01", "--batch", "5000", env=env, timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr[-3000:]
    out = first.stdout
    assert "generating lineitem at scale factor 0.01 with tpchgen-cli" in out
    assert "converting lineitem" in out and "cached)" not in out
    assert "l_returnflag" in out and "changes/s" in out
    assert "checking against Spark SQL" in out
    assert "checked against Spark SQL on the same rows" in out and ": equal" in out
    again = _ddflow("q1", "--sf", "0.01", "--batch", "5000", "--no-check", env=env, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    assert "(cached)" in again.stdout and "generating" not in again.stdout
    assert "checking against Spark SQL" not in again.stdout
