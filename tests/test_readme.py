"""Every ```python block of README.md runs as written and prints what the README says.

Each block is run on its own, as a reader would paste it: written to a file in an empty
folder and run by this interpreter in a new process (so a block must define everything it
uses). When a ```text block follows a python block (only the word "prints" or blank lines
between), it is the block's expected standard output, compared line by line with trailing
spaces dropped.

Marks come from the block: one that uses Spark (``ddflow.spark`` or ``pyspark``) is marked
``spark``; a ``<!-- readme: slow -->`` line (any of the registered markers, space-separated)
right before the fence adds those marks. New sections need no change here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"

_FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
_MARKS = re.compile(r"<!--\s*readme:\s*([\w\s]+?)\s*-->\s*$")
_SPARK = re.compile(r"\bddflow\.spark\b|\bpyspark\b")
_BETWEEN = re.compile(r"\s*(prints:?)?\s*", re.I)


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    code: str
    prints: str | None
    marks: tuple[str, ...]


def readme_blocks(text: str) -> list[Block]:
    """The python blocks of ``text`` with their expected output and marks."""
    fences = list(_FENCE.finditer(text))
    blocks = []
    for i, m in enumerate(fences):
        if m.group(1) != "python":
            continue
        prints = None
        if i + 1 < len(fences):
            nxt = fences[i + 1]
            if nxt.group(1) == "text" and _BETWEEN.fullmatch(text[m.end() : nxt.start()]):
                prints = nxt.group(2)
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marks = set(_MARKS.search(before).group(1).split()) if _MARKS.search(before) else set()
        if _SPARK.search(m.group(2)):
            marks.add("spark")
        blocks.append(
            Block(text.count("\n", 0, m.start()) + 1, m.group(2), prints, tuple(sorted(marks)))
        )
    return blocks


BLOCKS = readme_blocks(README.read_text())


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(b, id=f"line{b.line}", marks=[getattr(pytest.mark, m) for m in b.marks])
        for b in BLOCKS
    ],
)
def test_readme_block_runs_and_prints_what_it_says(block: Block, tmp_path: Path) -> None:
    """The README block runs in a fresh interpreter and prints its ```text block."""
    script = tmp_path / f"readme_line{block.line}.py"
    script.write_text(block.code)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (
        f"README.md line {block.line} failed:\n{block.code}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    )
    if block.prints is not None:
        assert _lines(proc.stdout) == _lines(block.prints), (
            f"README.md line {block.line} printed\n{proc.stdout}\nbut the README says\n"
            f"{block.prints}"
        )


def test_readme_has_python_blocks_and_says_what_each_prints() -> None:
    """The README has python blocks, and each is followed by the output it prints."""
    assert BLOCKS
    assert [b.line for b in BLOCKS if b.prints is None] == []


def test_readme_block_parser() -> None:
    """Blocks, their ```text output and their marks are read as documented."""
    text = (
        "intro\n```python\nprint(1)\n```\nprints\n\n```text\n1\n```\n"
        "<!-- readme: slow -->\n```python\nimport pyspark\n```\n"
        "```sh\nls\n```\n```python\nx = 2\n```\nsome prose\n```text\nnot output\n```\n"
    )
    got = readme_blocks(text)
    assert [(b.line, b.code, b.prints, b.marks) for b in got] == [
        (2, "print(1)\n", "1\n", ()),
        (11, "import pyspark\n", None, ("slow", "spark")),
        (17, "x = 2\n", None, ()),
    ]


def test_ci_runs_the_readme_commands_verbatim() -> None:
    """Each command of the README's "Two commands" section is a line of .ci/run as is."""
    section = README.read_text().split("## Two commands", 1)[1].split("\n## ", 1)[0]
    commands = [line.strip() for line in section.splitlines() if line.startswith("    ")]
    assert len(commands) == 2 and all(c.startswith("scripts/setup && ") for c in commands)
    ci = (README.parent / ".ci" / "run").read_text().splitlines()
    for command in commands:
        assert command in ci, command
