"""The house's rules, read off the source tree (docs/architecture.md, "The map").

Imports point down: nothing in `share_store` imports `sharing_server`; no two folders import
each other, directly or round a loop (bench and testbed included); every source module stays
under 400 lines, and every package says in its docstring what it holds.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("share_store", "sharing_server", "pyspark_delta_sharing")
ROOTS = (*PACKAGES, "bench", "testbed")
LONGEST_MODULE = 400
#: Modules let be longer, and why.
LONGER = {
    # spark-submit ships the job alone to where the server is not installed: it cannot import a
    # sibling, so it stays one file (its documentation lives in docs/aistor-tables.md).
    "sharing_server.spark_jobs.maintenance": 430,
}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module(p): p for root in ROOTS for p in (ROOT / root).rglob("*.py")}


def _folder(module: str) -> str:
    path = _modules()[module]
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _imported(path: Path) -> Iterator[str]:
    """What a module imports as it loads: its top level, not under `if TYPE_CHECKING:`.

    (An import inside a function is a deliberate late one, taken when it runs.)
    """
    modules = _modules()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        yield from (name for name in names if name in modules)


def _nested(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _folder_imports() -> dict[str, set[str]]:
    """Folder → the folders its modules import (a folder and its sub-folders are one room)."""
    edges: dict[str, set[str]] = {}
    for module, path in _modules().items():
        source = _folder(module)
        for target in map(_folder, _imported(path)):
            if not _nested(source, target):
                edges.setdefault(source, set()).add(target)
    return edges


def _loops(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one folder (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while (member := stack.pop()) != node:
                group.append(member)
            group.append(node)
            if len(group) > 1:
                loops.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return loops


def test_no_two_folders_import_each_other() -> None:
    assert _loops(_folder_imports()) == []


def test_the_loop_finder_finds_a_loop() -> None:
    assert _loops({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_store_knows_nothing_of_http() -> None:
    reaching_up = [
        module
        for module, path in _modules().items()
        if module.startswith("share_store") and any(t.startswith("sharing_server") for t in _imported(path))
    ]
    assert reaching_up == []


def test_no_source_module_is_over_400_lines() -> None:
    long = {
        module: lines
        for module, path in _modules().items()
        if module.startswith(PACKAGES)
        and (lines := len(path.read_text().splitlines())) > LONGER.get(module, LONGEST_MODULE)
    }
    assert long == {}


def test_every_package_says_what_it_holds() -> None:
    silent = [
        module
        for module, path in _modules().items()
        if module.startswith(PACKAGES)
        and path.name == "__init__.py"
        and not ast.get_docstring(ast.parse(path.read_text()))
    ]
    assert silent == []
