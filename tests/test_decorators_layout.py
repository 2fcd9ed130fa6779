"""The decorated call reads top-down (issue 22 section 4): memtype/decorators/ holds one module
per stage, and each module imports only the modules below it in this order."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import memtype.decorators
from tests.structure_support import named, package_of

PACKAGE = Path(memtype.decorators.__file__).parent
ORDER = ["__init__", "function", "recovery", "outputs", "run", "inputs", "containers", "options"]
"""Top to bottom: the decorators, the call, then its stages (recover -> finish outputs -> run ->
prepare inputs) and what they share."""


def _imported_stages(name: str) -> set[str]:
    """The package's modules ``name`` imports: inside functions and TYPE_CHECKING blocks too,
    relative imports too."""
    path = PACKAGE / f"{name}.py"
    module = "memtype.decorators" + ("" if name == "__init__" else f".{name}")
    found = named(ast.walk(ast.parse(path.read_text(encoding="utf-8"))),
                  package_of(module, path))
    return {m.split(".")[2] for m in found if m.startswith("memtype.decorators.")} & set(ORDER)


def test_every_module_of_the_package_has_a_place_in_the_order() -> None:
    assert sorted(p.stem for p in PACKAGE.glob("*.py")) == sorted(ORDER)


@pytest.mark.parametrize("name", ORDER)
def test_a_stage_imports_only_the_stages_below_it(name: str) -> None:
    below = set(ORDER[ORDER.index(name) + 1:])
    assert _imported_stages(name) <= below


def test_public_names_of_memtype_decorators_are_kept() -> None:
    from memtype.decorators import Contract, MemoryTypeFunction, memory_types, numpy, torch

    assert callable(memory_types) and callable(numpy) and callable(torch)
    assert isinstance(numpy(lambda x: x), MemoryTypeFunction) and Contract is not None
