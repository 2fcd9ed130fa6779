"""The pipeline package's import graph has no cycle: every import counted, at module level,
inside functions and under ``TYPE_CHECKING`` alike (issue 22 section 5: the planner's modules
hid runner -> fallback -> planner -> runner behind type-checking imports)."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

import memtype.pipeline

ROOT = Path(memtype.pipeline.__file__).parent
PACKAGE = "memtype.pipeline"


def _name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _targets(module: str, tree: ast.Module, modules: set[str]) -> set[str]:
    """The package's modules that ``module`` imports anywhere (``TYPE_CHECKING`` included)."""
    package = module if MODULES.get(module, Path()).name == "__init__.py" else \
        module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name in modules and name != module}


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Module -> the modules it imports, from each module's source."""
    names = set(sources)
    return {m: _targets(m, ast.parse(src), names) for m, src in sources.items()}


def _sources() -> dict[str, str]:
    return {name: path.read_text(encoding="utf-8") for name, path in MODULES.items()}


def test_the_pipeline_package_has_no_import_cycle() -> None:
    sorter = graphlib.TopologicalSorter(import_graph(_sources()))
    sorter.prepare()  # raises CycleError naming the cycle


def test_planning_is_one_package() -> None:
    planning = {m for m in MODULES if m.startswith(f"{PACKAGE}.plan")}
    assert planning == {f"{PACKAGE}.planning", *(f"{PACKAGE}.planning.{m}" for m in
                                                  ("model", "measurement", "search",
                                                   "replanning"))}


def test_the_cycle_check_sees_a_type_checking_import() -> None:
    sources = {
        f"{PACKAGE}.a": f"from {PACKAGE}.b import B\n",
        f"{PACKAGE}.b": "from typing import TYPE_CHECKING\n"
                        f"if TYPE_CHECKING:\n    from {PACKAGE}.c import C\n",
        f"{PACKAGE}.c": f"def f():\n    from {PACKAGE} import a\n",
    }
    sorter = graphlib.TopologicalSorter(import_graph(sources))
    with pytest.raises(graphlib.CycleError):
        sorter.prepare()
