"""What the structure tests share: memtype's modules by name, the modules an import statement
names (read with ``ast``), the cycles of an import graph, and the functions a call enters
(``sys.setprofile``)."""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import memtype

SRC = Path(memtype.__file__).resolve().parent
"""The memtype package's folder."""


def modules(root: Path = SRC, package: str = "memtype") -> dict[str, Path]:
    """Module name -> file, for every module of ``package`` (its folder ``root``)."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = (package, *path.relative_to(root).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def package_of(module: str, path: Path) -> str:
    """The package ``module`` (its file ``path``) resolves relative imports from."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def resolve(package: str, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` in ``package`` reads from."""
    if not node.level:
        return node.module or ""
    anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{anchor}.{node.module}" if node.module else anchor


def named(nodes: Iterable[ast.AST], package: str) -> set[str]:
    """Every module the import statements among ``nodes`` (in ``package``) may load:
    ``import a.b`` names ``a.b``; ``from a import b`` names ``a`` and ``a.b`` (``b`` may be
    a submodule). Other nodes are passed over."""
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = resolve(package, node)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The cycles of ``graph`` (module -> the modules it imports): each strongly connected
    component of more than one module, sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def calls(call: Callable[[], Any]) -> list[tuple[str, str]]:
    """(module, function) of each Python function ``call`` enters, in order."""
    seen: list[tuple[str, str]] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            seen.append((str(frame.f_globals.get("__name__", "")), frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def module_trace(call: Callable[[], Any]) -> list[str]:
    """The memtype modules whose Python functions ``call`` enters, in order (a module
    calling its own functions counts once)."""
    trace: list[str] = []
    for module, _ in calls(call):
        if module.startswith("memtype") and (not trace or trace[-1] != module):
            trace.append(module)
    return trace
