"""Layers you can see (issue 22 section 5): storage, omezarr and pipeline use only what the
core exports publicly, storage never imports omezarr or pipeline, omezarr never pipeline,
and the demo and the synthetic plate stay out of the library's import graph. Every import is
counted: at module level, inside
functions and under ``TYPE_CHECKING`` alike (read with ``ast``)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import memtype
from tests.structure_support import modules, package_of, resolve

ROOT = Path(memtype.__file__).parent
UPPER = ("memtype.storage", "memtype.omezarr", "memtype.pipeline")
"""The layers above the core, in order: each may use itself and those before it."""
APPLICATION = ("memtype.pipeline.demo", "memtype.pipeline.synthetic")


def _public_api() -> dict[str, set[str]]:
    """Core module -> the names it exports: ``memtype`` and the core modules it exports
    (``errors``, ``gpu``, ``frameworks``, ``dtypes``), each by its ``__all__``."""
    api = {"memtype": {*memtype.__all__, "__version__"}}
    for name in memtype.__all__:
        value = getattr(memtype, name)
        if isinstance(value, ModuleType) and not value.__name__.startswith(UPPER):
            api[value.__name__] = set(value.__all__)
    return api


PUBLIC = _public_api()


MODULES = modules(ROOT)
UPPER_MODULES = sorted(m for m in MODULES if m.startswith(UPPER))


def _imports(module: str, tree: ast.Module) -> Iterator[tuple[int, str, str | None]]:
    """(line, module, name or None) of every import, ``importlib.import_module`` included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = resolve(package_of(module, MODULES[module]), node)
            yield from ((node.lineno, base, alias.name) for alias in node.names)
        elif isinstance(node, ast.Call) and node.args \
                and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) \
                and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            yield node.lineno, node.args[0].value, None


def _allowed(module: str, target: str, name: str | None) -> bool:
    if not target.startswith("memtype") or target.split(".")[0] != "memtype":
        return True
    if target == "memtype._lazy":  # the one mechanism behind every package's lazy names
        return True
    layer = next(i for i, upper in enumerate(UPPER) if module.startswith(upper))
    own = UPPER[:layer + 1]  # storage may not use omezarr or pipeline; omezarr not pipeline
    if target.startswith(own) or (name is None and target in PUBLIC):
        return True
    if target in PUBLIC:
        return name in PUBLIC[target] or f"{target}.{name}" in PUBLIC
    return False


def violations(module: str, source: str) -> list[str]:
    """The imports of ``module`` that reach past the core's public API (or from storage
    into pipeline)."""
    return [f"{module}:{line} imports {target}{'' if name is None else '.' + name}"
            for line, target, name in _imports(module, ast.parse(source))
            if not _allowed(module, target, name)]


def test_the_public_api_holds_the_core_packages() -> None:
    assert {"memtype", "memtype.errors", "memtype.gpu", "memtype.frameworks"} <= set(PUBLIC)
    assert not any(m.startswith(UPPER) for m in PUBLIC)


@pytest.mark.parametrize("module", UPPER_MODULES)
def test_uses_only_the_public_api_of_the_core(module: str) -> None:
    assert violations(module, MODULES[module].read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("source,expected", [
    ("from memtype.detect import detect_framework\n",
     ["memtype.storage.x:1 imports memtype.detect.detect_framework"]),
    ("def f():\n    from memtype.frameworks._host import aligned_copy\n",
     ["memtype.storage.x:2 imports memtype.frameworks._host.aligned_copy"]),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from memtype.gpu.oom import x\n",
     ["memtype.storage.x:3 imports memtype.gpu.oom.x"]),
    ("from memtype.gpu import _EXPORTS\n", ["memtype.storage.x:1 imports memtype.gpu._EXPORTS"]),
    ("import memtype._optional\n", ["memtype.storage.x:1 imports memtype._optional"]),
    ("import importlib\nimportlib.import_module('memtype.conversion.routes')\n",
     ["memtype.storage.x:2 imports memtype.conversion.routes"]),
    ("from memtype.pipeline import Pipeline\n",
     ["memtype.storage.x:1 imports memtype.pipeline.Pipeline"]),
    ("from memtype.omezarr.store import ZarrStore\n",
     ["memtype.storage.x:1 imports memtype.omezarr.store.ZarrStore"]),
    ("import memtype\nfrom memtype import convert, gpu\nfrom memtype.gpu import cleanup\n"
     "from memtype.errors import StoreKeyError\nfrom memtype.storage.base import Store\n"
     "from . import base\nfrom memtype._lazy import lazy_loader\n", []),
], ids=["private-module", "inside-a-function", "type-checking", "private-name",
        "import-statement", "import-module-call", "storage-into-pipeline",
        "storage-into-omezarr", "public"])
def test_the_check_sees(source: str, expected: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(MODULES, "memtype.storage.x", ROOT / "storage" / "x.py")
    assert violations("memtype.storage.x", source) == expected


@pytest.mark.parametrize("source,expected", [
    ("from memtype.pipeline.io.patterns import split_well\n",
     ["memtype.omezarr.x:1 imports memtype.pipeline.io.patterns.split_well"]),
    ("from memtype.storage._beneath import Resolver\nfrom memtype.omezarr import read\n", []),
], ids=["omezarr-into-pipeline", "omezarr-onto-storage"])
def test_the_check_sees_omezarr(source: str, expected: list[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(MODULES, "memtype.omezarr.x", ROOT / "omezarr" / "x.py")
    assert violations("memtype.omezarr.x", source) == expected


# The library's import graph, application aside: these are what a user of memtype imports.
LIBRARY = sorted(m for m in MODULES if not m.startswith(APPLICATION)
                 and m not in ("memtype.cli", "memtype.__main__", "memtype._info",
                               "memtype._bench", "memtype.pipeline.commands"))


@pytest.mark.parametrize("module", LIBRARY)
def test_the_library_does_not_import_the_demo(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found = [f"{line} {target}" for line, target, name in _imports(module, tree)
             if target.startswith(APPLICATION)
             or (name is not None and f"{target}.{name}".startswith(APPLICATION))]
    assert found == []


def test_importing_the_library_loads_no_demo() -> None:
    code = ("import json, sys, memtype, memtype.storage, memtype.pipeline\n"
            "import memtype.pipeline.planning, memtype.pipeline.readers\n"
            f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({APPLICATION!r}))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
