"""Finding command-line tools: beside the running interpreter first, then PATH; a missing
one says what to run."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

from ddflow.tools import ToolNotFoundError, find_tool, tool_dirs


def test_tools_beside_the_interpreter_come_before_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool in the interpreter's folder is found although PATH lacks it, and wins over
    a copy on PATH."""
    venv_bin, elsewhere = tmp_path / "venv" / "bin", tmp_path / "elsewhere"
    for d in (venv_bin, elsewhere):
        d.mkdir(parents=True)
        tool = d / "some-tool"
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    monkeypatch.setattr(sysconfig, "get_path", lambda *a, **k: str(venv_bin))
    monkeypatch.setenv("PATH", str(elsewhere))
    assert tool_dirs()[0] == str(venv_bin)
    assert find_tool("some-tool", extra="x") == str(venv_bin / "some-tool")
    monkeypatch.setenv("PATH", "")
    assert find_tool("some-tool", extra="x") == str(venv_bin / "some-tool")
    (venv_bin / "some-tool").unlink()
    monkeypatch.setenv("PATH", str(elsewhere))
    assert find_tool("some-tool", extra="x") == str(elsewhere / "some-tool")


def test_missing_tool_says_what_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool found nowhere raises ToolNotFoundError naming the pip command and the extra."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(sysconfig, "get_path", lambda *a, **k: str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolNotFoundError) as e:
        find_tool("no-such-tool-ddflow", extra="tpch")
    msg = str(e.value)
    assert "no-such-tool-ddflow is needed" in msg
    assert f"{tmp_path / 'python'} -m pip install -e '.[tpch]'" in msg


def test_generator_is_found_in_the_venv_with_a_bare_path(tmp_path: Path) -> None:
    """With PATH=/usr/bin:/bin (the venv not activated), TPC-H generation still finds the
    ``tpchgen-cli`` installed beside this interpreter: the README's first command."""
    pytest.importorskip("pyarrow")
    try:
        metadata.distribution("tpchgen-cli")
    except metadata.PackageNotFoundError:
        pytest.skip("tpchgen-cli is not installed here (the tpch extra)")
    code = (
        "from ddflow.tpch.data import generate; "
        "print(sorted(p.name for p in generate(0.01, ('nation',)).iterdir()))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PATH", "VIRTUAL_ENV")}
    env.update(PATH="/usr/bin:/bin", DDFLOW_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['nation.parquet']"
