"""Command-line tools that ddflow runs, found beside the running interpreter before PATH.

Why it exists: ``scripts/setup`` installs tools such as ``tpchgen-cli`` into the virtualenv
(``.venv/bin``), and the README runs ``.venv/bin/python`` without activating the venv, so
that folder is not on PATH. ``shutil.which`` alone searches PATH only: it would miss the
venv's copy, or worse, find an unrelated copy installed elsewhere on the machine. So a tool
is looked up in this order:

1. the folder of ``sys.executable`` (as invoked, symlinks not resolved: ``.venv/bin``);
2. ``sysconfig.get_path("scripts")`` (where pip puts this interpreter's console scripts);
3. PATH.

Invariant: a tool that cannot be found raises ``ToolNotFoundError`` whose message names the
command that installs it into this interpreter's environment.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import sysconfig

__all__ = ["ToolNotFoundError", "find_tool", "tool_dirs"]


class ToolNotFoundError(RuntimeError):
    """A command-line tool ddflow needs is installed neither beside this interpreter nor on
    PATH; the message says what to run."""


def tool_dirs() -> list[str]:
    """The folders searched before PATH, in order, without duplicates or empty entries."""
    dirs: list[str] = []
    for d in (os.path.dirname(sys.executable), sysconfig.get_path("scripts")):
        if d and d not in dirs:
            dirs.append(d)
    return dirs


def find_tool(name: str, *, extra: str, package: str | None = None) -> str:
    """The path of the executable ``name``: beside the running interpreter first, then PATH.

    ``extra`` is the ddflow extra that installs it (``"tpch"`` for ``tpchgen-cli``) and
    ``package`` the PyPI package (default ``name``); both go into the error message. It is
    an error for the tool to be missing from every folder searched; raises
    ``ToolNotFoundError`` saying what to run.
    """
    for d in tool_dirs():
        exe = shutil.which(name, path=d)
        if exe is not None:
            return exe
    exe = shutil.which(name)
    if exe is not None:
        return exe
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    raise ToolNotFoundError(
        f"{name} is needed and was found neither beside {sys.executable} "
        f"(searched {os.pathsep.join(tool_dirs())}) nor on PATH. Install it into this "
        f"environment: from a ddflow clone run `{pip} -e '.[{extra}]'` "
        f"(or `scripts/setup`), otherwise `{pip} '{package or name}'`."
    )
