"""The layers: every import in ddflow points down (or across) the layers, never up, and tests
use only public names.

Every module's imports are read from its source (``ast``), those inside functions and
``TYPE_CHECKING`` blocks included: a lazy import that points up is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ddflow

SRC = Path(ddflow.__file__).parent
TESTS = Path(__file__).parent

#: the layers, lowest first: a module may import modules of its own layer or below. A name
#: covers its submodules, except the package itself ("ddflow"), which means only its
#: ``__init__``.
LAYERS: list[tuple[str, ...]] = [
    # plain values and kernels: times, frontiers, diffs, columns, errors; finding tools
    ("ddflow.core", "ddflow.tools"),
    # batches, their merges and the spine that keeps a trace
    ("ddflow.trace",),
    # the machinery operators run on: operator base, stepping worker, progress, scopes and
    # loops, exchange, comm and mesh, checkpoints
    ("ddflow.engine",),
    # the dataflow's edges: input sessions, probes and captures
    ("ddflow.io",),
    # the operators: arrange, join, reduce and its reducers, linear ones, min/count_total
    ("ddflow.operators",),
    # the user's API: Collection, Arranged, iterate, composites (hierarchical reduce)
    ("ddflow.dataflow",),
    # built on the API: graph algorithms, the test oracle and strategies
    ("ddflow.algorithms", "ddflow.testing"),
    # who runs a dataflow: Runtime, JobConfig, the job driver, processes, Spark
    ("ddflow.runtimes",),
    # the package's curated API (``import ddflow as dd``; the __init__ only)
    ("ddflow",),
    # TPC-H data and queries written with the API
    ("ddflow.tpch",),
    # SQL on ddflow (its own package, with its own owner)
    ("ddflow.sql",),
    # the top-level facades: the Spark API (runtime and SQL names) and the command line
    ("ddflow.spark", "ddflow.__main__"),
]

#: imports that point up, each with why it is allowed for now: ``(importer, imported)``
KNOWN_UPWARD: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int:
    """The index of ``module``'s layer (the longest prefix that names one)."""
    best, best_len = -1, -1
    for i, names in enumerate(LAYERS):
        for name in names:
            covers = module == name or (name != "ddflow" and module.startswith(name + "."))
            if covers and len(name) > best_len:
                best, best_len = i, len(name)
    if best < 0:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")
    return best


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """Every ddflow module ``module`` imports, anywhere in it: ``(line, module)``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((node.lineno, target))
            # ``from ddflow.x import y`` may name a submodule ``ddflow.x.y``
            for a in node.names:
                sub = f"{target}.{a.name}"
                if (SRC.parent / (sub.replace(".", "/") + ".py")).exists():
                    out.append((node.lineno, sub))
    return [(line, m) for line, m in out if m == "ddflow" or m.startswith("ddflow.")]


MODULES = sorted(SRC.rglob("*.py"))


def test_every_module_has_a_layer() -> None:
    """Every module of the package belongs to a layer."""
    for path in MODULES:
        _layer(_module_name(path))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _module_name(p))
def test_imports_point_down_the_layers(path: Path) -> None:
    """No module imports from a layer above its own, at module level or inside a function."""
    module = _module_name(path)
    mine = _layer(module)
    upward = [
        f"line {line}: {target} ({LAYERS[_layer(target)][0]})"
        for line, target in _imports(path, module)
        if _layer(target) > mine and (module, target) not in KNOWN_UPWARD
    ]
    assert not upward, f"{module} ({LAYERS[mine][0]}) imports from layers above it:\n" + "\n".join(
        upward
    )


def test_layer_test_sees_function_level_imports() -> None:
    """The walk finds imports inside functions and TYPE_CHECKING blocks too."""
    probe = SRC / "engine" / "worker.py"
    found = {m for _, m in _imports(probe, "ddflow.engine.worker")}
    assert "ddflow.engine.checkpoint" in found  # imported inside Worker.checkpoint


def _private_uses(path: Path) -> list[str]:
    """Private names of ddflow a test module imports or reads off a ddflow module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    aliases: set[str] = set()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("ddflow"):
                    if any(p.startswith("_") for p in a.name.split(".")):
                        out.append(f"line {node.lineno}: import {a.name}")
                    aliases.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ddflow"):
            parts = (node.module or "").split(".")
            if any(p.startswith("_") and p != "__main__" for p in parts):
                out.append(f"line {node.lineno}: from {node.module}")
            for a in node.names:
                if a.name.startswith("_"):
                    out.append(f"line {node.lineno}: {a.name} from {node.module}")
                else:
                    aliases.add(a.asname or a.name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            out.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return out


TEST_MODULES = sorted(TESTS.rglob("*.py"))


@pytest.mark.parametrize("path", TEST_MODULES, ids=lambda p: str(p.relative_to(TESTS)))
def test_tests_use_public_names(path: Path) -> None:
    """Tests import no private name of ddflow and read none off its modules or classes."""
    assert not _private_uses(path), "\n".join(_private_uses(path))


def test_known_upward_imports_still_exist() -> None:
    """Each known upward import is still made (one that was fixed leaves the list)."""
    for (module, target), why in KNOWN_UPWARD.items():
        path = SRC.parent / (module.replace(".", "/") + ".py")
        if not path.exists():
            path = SRC.parent / module.replace(".", "/") / "__init__.py"
        assert target in {m for _, m in _imports(path, module)}, (module, target, why)
