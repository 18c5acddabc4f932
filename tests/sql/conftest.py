"""The SQL suite's default run stays fast: tests marked ``slow`` here (the extra random
queries) run only when asked for with ``-m slow`` (or any ``-m`` expression naming it)."""

from __future__ import annotations

from typing import Any


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Deselects this folder's slow tests unless the ``-m`` expression mentions ``slow``."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    keep, drop = [], []
    for item in items:
        in_sql = "tests/sql/" in str(item.fspath).replace("\\", "/")
        (drop if in_sql and item.get_closest_marker("slow") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
