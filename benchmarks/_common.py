"""Shared helpers for the ddflow benchmarks: timing statistics, peak RSS, machine info,
per-implementation subprocesses, JSON output and optional PNG charts.

Every benchmark in this folder is a script with an argparse CLI that prints one JSON
document on stdout (progress goes to stderr) and can draw a PNG with ``--png PATH`` when
matplotlib is installed. Each implementation under test runs in a fresh subprocess
(``run_impl_subprocess``) so that its peak RSS (``ru_maxrss``) is its own and not the
high-water mark of whatever ran before it in the same process.

What this module leaves out: it knows nothing about ddflow or any workload; the
benchmark scripts own their data generation, implementations and correctness checks.
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

# ---------------------------------------------------------------------------------------
# memory


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (MiB), from ``ru_maxrss``.

    Linux reports ``ru_maxrss`` in KiB, macOS in bytes.
    """
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if sys.platform == "darwin":
        return rss / (1024.0 * 1024.0)
    return rss / 1024.0


def current_rss_mb() -> float | None:
    """Current resident set size in MB (MiB) from /proc (Linux), or None where unavailable."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / (1024.0 * 1024.0)
    except (OSError, ValueError, IndexError):
        return None


# ---------------------------------------------------------------------------------------
# timing


def now() -> float:
    """A monotonic clock with the best available resolution, in seconds."""
    return time.perf_counter()


def percentile_nearest_rank(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100): the smallest value such that at
    least ``q`` percent of the values are <= it. With 10 values, p90 is the 9th smallest."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    """The median (mean of the two middle values for an even count)."""
    if not values:
        raise ValueError("median of an empty sequence")
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def timing_stats_ms(seconds: Sequence[float]) -> dict[str, Any]:
    """Summary of a list of wall times given in seconds, reported in milliseconds:
    count, median, p90 (nearest rank), max, min, mean and total."""
    if not seconds:
        return {"n": 0}
    ms = [s * 1000.0 for s in seconds]
    return {
        "n": len(ms),
        "median_ms": round(median(ms), 4),
        "p90_ms": round(percentile_nearest_rank(ms, 90), 4),
        "max_ms": round(max(ms), 4),
        "min_ms": round(min(ms), 4),
        "mean_ms": round(sum(ms) / len(ms), 4),
        "total_ms": round(sum(ms), 4),
    }


def rate(count: float, seconds: float) -> float | None:
    """``count / seconds`` rounded, or None when ``seconds`` is not positive."""
    if seconds <= 0:
        return None
    return round(count / seconds, 1)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator`` rounded to 3 decimals, None if either is missing or zero."""
    if not numerator or not denominator:
        return None
    return round(numerator / denominator, 3)


# ---------------------------------------------------------------------------------------
# machine information


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _version_of(module: str) -> str | None:
    try:
        mod = __import__(module)
    except Exception:  # noqa: BLE001 - any import failure just means "not available"
        return None
    return getattr(mod, "__version__", "unknown")


def _git_revision(path: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", path, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def ddflow_source() -> dict[str, Any] | None:
    """Where the ``ddflow`` that runs was imported from (``PYTHONPATH`` may point at another
    checkout than this folder's), its git commit and whether its ``src`` differs from that
    commit; None if ``ddflow`` is not importable."""
    try:
        import ddflow
    except ImportError:
        return None
    src = os.path.dirname(os.path.dirname(os.path.abspath(ddflow.__file__)))

    def git(*cmd: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", "-C", src, *cmd], capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    status = git("status", "--porcelain", "--", ".")
    return {
        "path": src,
        "commit": git("rev-parse", "--short", "HEAD"),
        "modified": None if status is None else bool(status),
    }


def machine_info(extra_modules: Iterable[str] = ("ddflow", "matplotlib")) -> dict[str, Any]:
    """What the numbers were measured on: CPU count and model, memory, Python, numpy, the
    versions of ``extra_modules`` (None if not importable), the git revision of this
    folder's checkout (the benchmark scripts) and ``ddflow_source`` (the engine that ran)."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    mem_total_mb = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_total_mb = round(int(line.split()[1]) / 1024.0)
                    break
    except OSError:
        pass
    try:
        load_avg = [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        load_avg = None
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "load_average_1_5_15m": load_avg,  # other work on the machine skews timings
        "cpu_affinity": affinity,
        "cpu_model": _cpu_model(),
        "mem_total_mb": mem_total_mb,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "numpy": _version_of("numpy"),
        "git_revision": _git_revision(os.path.dirname(os.path.abspath(__file__))),
        "ddflow_source": ddflow_source(),
    }
    for name in extra_modules:
        info[name] = _version_of(name)
    return info


# ---------------------------------------------------------------------------------------
# subprocesses


class BenchmarkError(RuntimeError):
    """A benchmark run failed: a subprocess crashed, printed no JSON, or results disagree."""


def run_impl_subprocess(
    script: str,
    args: Sequence[str],
    *,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run ``python script *args`` in a fresh interpreter and return the JSON object it
    prints as the last non-empty line of stdout. The child's stderr (progress) is passed
    through to ours. Raises ``BenchmarkError`` on a non-zero exit, a time-out, or output
    that is not JSON."""
    cmd = [sys.executable, script, *args]
    try:
        proc = subprocess.run(
            cmd,
            stdout=subprocess.PIPE,
            stderr=None,  # inherit: progress lines show up live
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchmarkError(f"timed out after {timeout}s: {' '.join(cmd)}") from exc
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0:
        tail = "\n".join(lines[-20:])
        raise BenchmarkError(f"subprocess exited with {proc.returncode}: {' '.join(cmd)}\n{tail}")
    if not lines:
        raise BenchmarkError(f"subprocess printed nothing on stdout: {' '.join(cmd)}")
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise BenchmarkError(
            f"subprocess did not end with a JSON line: {' '.join(cmd)}\n{lines[-1][:500]}"
        ) from exc


def log(message: str, *, quiet: bool = False) -> None:
    """Progress message on stderr (stdout is reserved for JSON)."""
    if not quiet:
        print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# output


def emit_json(doc: dict[str, Any], *, path: str | None = None, compact: bool = False) -> None:
    """Print ``doc`` as JSON on stdout (one line if ``compact``) and, if ``path`` is given,
    also write it there."""
    text = json.dumps(doc, separators=(",", ":")) if compact else json.dumps(doc, indent=2)
    print(text, flush=True)
    if path:
        with open(path, "w") as f:
            f.write(json.dumps(doc, indent=2) + "\n")


def load_pyplot() -> Any | None:
    """``matplotlib.pyplot`` with the non-interactive Agg backend, or None if matplotlib
    is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save_png(path: str, draw: Callable[[Any], None], *, quiet: bool = False) -> bool:
    """Call ``draw(plt)`` to build a figure and save it to ``path``. Returns False (with a
    note on stderr) if matplotlib is not installed; the benchmark carries on."""
    plt = load_pyplot()
    if plt is None:
        log(f"matplotlib is not installed; skipping the PNG {path}", quiet=quiet)
        return False
    draw(plt)
    plt.savefig(path, dpi=110, bbox_inches="tight")
    plt.close("all")
    log(f"wrote {path}", quiet=quiet)
    return True
