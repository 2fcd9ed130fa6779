"""The pipeline package's import graph has no cycle: every import counted, at module level,
inside functions and under ``TYPE_CHECKING`` alike (issue 22 section 5: the planner's modules
hid runner -> fallback -> planner -> runner behind type-checking imports)."""

from __future__ import annotations

import ast
from pathlib import Path

import memtype.pipeline
from tests.structure_support import cycles, modules, named, package_of

ROOT = Path(memtype.pipeline.__file__).parent
PACKAGE = "memtype.pipeline"
MODULES = modules(ROOT, PACKAGE)


def _targets(module: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``module`` imports anywhere (``TYPE_CHECKING`` included)."""
    found = named(ast.walk(tree), package_of(module, MODULES.get(module, Path())))
    return {name for name in found if name in known and name != module}


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Module -> the modules it imports, from each module's source."""
    names = set(sources)
    return {m: _targets(m, ast.parse(src), names) for m, src in sources.items()}


def _sources() -> dict[str, str]:
    return {name: path.read_text(encoding="utf-8") for name, path in MODULES.items()}


def test_the_pipeline_package_has_no_import_cycle() -> None:
    assert cycles(import_graph(_sources())) == []


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
    assert cycles(import_graph(sources)) == [[f"{PACKAGE}.{m}" for m in "abc"]]
