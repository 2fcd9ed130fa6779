"""The memtype package as a whole: no import cycles, one home per public name, no import-time
side effects. Walks whatever modules exist, so modules added later are checked too."""

from __future__ import annotations

import ast
import builtins
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype
import memtype.storage
from memtype.frameworks import iter_frameworks
from tests.structure_support import cycles, modules, named, package_of, resolve

ROOT = Path(memtype.__file__).parent
# every framework but the one memtype depends on (NumPy), from the table: a new row is checked
FRAMEWORK_MODULES = sorted(fw.module for fw in iter_frameworks() if fw.module != "numpy")

MODULES: dict[str, Path] = modules(ROOT)
TREES: dict[str, ast.Module] = {
    name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, path in MODULES.items()
}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_time_nodes(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run when the module is imported (function bodies do not)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            if not _is_type_checking(node):
                yield from _import_time_nodes(node.body)
            yield from _import_time_nodes(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _import_time_nodes(block)
            for handler in node.handlers:
                yield from _import_time_nodes(handler.body)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            yield from _import_time_nodes(node.body)


def _all_import_nodes(tree: ast.Module) -> Iterator[ast.stmt]:
    """Every import statement, inside functions too (``if TYPE_CHECKING:`` blocks aside)."""
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
               and _is_type_checking(node) for n in ast.walk(node)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skipped:
            yield node


def _imports(module: str, *, function_level: bool = False) -> set[str]:
    """memtype modules that ``module`` imports at import time (or anywhere)."""
    tree = TREES[module]
    nodes = _all_import_nodes(tree) if function_level else _import_time_nodes(tree.body)
    found = named(nodes, package_of(module, MODULES[module]))
    return {name for name in found if name in MODULES and name != module}


def test_the_walk_finds_the_package() -> None:
    assert {"memtype", "memtype.conversion", "memtype.gpu", "memtype.gpu.devices"} <= set(MODULES)


def test_no_import_cycles() -> None:
    graph = {module: _imports(module) for module in MODULES}
    assert cycles(graph) == []


def test_no_import_cycles_counting_imports_inside_functions() -> None:
    """A function-level import hides a cycle from the import-time check, not from the design:
    every import points one way (docs/architecture.md, the layers)."""
    graph = {module: _imports(module, function_level=True) for module in MODULES}
    assert cycles(graph) == []


def _unit(module: str) -> str:
    """The layer unit of a module: ``memtype.gpu.pool`` -> ``gpu``, ``memtype`` -> ``memtype``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "memtype"


def _documented_layers() -> dict[str, int]:
    """Unit -> layer number, from the table of docs/architecture.md."""
    doc = ROOT.parents[1] / "docs" / "architecture.md"
    if not doc.is_file():
        pytest.skip("not a source checkout (docs/ absent)")
    layers: dict[str, int] = {}
    for line in doc.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].isdigit():
            for unit in cells[1].replace("`", "").split(","):
                layers[unit.strip()] = int(cells[0])
    return layers


def test_imports_follow_the_documented_layers() -> None:
    layers = _documented_layers()
    units = {_unit(m) for m in MODULES}
    assert sorted(units - set(layers)) == [], "add the module to docs/architecture.md"
    upward = sorted(f"{m} ({layers[_unit(m)]}) imports {t} ({layers[_unit(t)]})"
                    for m in MODULES for t in _imports(m, function_level=True)
                    if t.startswith("memtype") and layers[_unit(t)] > layers[_unit(m)])
    assert upward == []


def test_function_level_imports_are_seen() -> None:
    tree = ast.parse("import a\ndef f():\n    from memtype import b\n"
                     "if TYPE_CHECKING:\n    import c\n")
    names = {getattr(n, "module", None) or n.names[0].name for n in _all_import_nodes(tree)}
    assert names == {"a", "memtype"}


def test_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def _dunder_all(tree: ast.Module) -> set[str] | None:
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                return {elt.value for elt in getattr(node.value, "elts", [])
                        if isinstance(elt, ast.Constant) and isinstance(elt.value, str)}
    return None


def _defined(tree: ast.Module, with_assignments: bool) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif with_assignments and isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif (with_assignments and isinstance(node, ast.AnnAssign)
              and isinstance(node.target, ast.Name)):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def public_definitions(module: str) -> set[str]:
    """Names ``module`` defines for others: in ``__all__``, else its public defs and classes."""
    tree = TREES[module]
    exported = _dunder_all(tree)
    if exported is None:
        return _defined(tree, with_assignments=False)
    return _defined(tree, with_assignments=True) & exported


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def _shadowing(package: str, tree: ast.Module) -> list[str]:
    """Names a package binds at module level over one of its own submodules (a function
    ``convert`` beside the module ``convert``: ``import pkg.convert`` and ``pkg.convert``
    would name different things). Binding the submodule itself is fine."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = resolve(package, node)
            bound = [(alias.asname or alias.name, f"{base}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Import):
            bound = [(alias.asname, alias.name) for alias in node.names if alias.asname]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound = [(node.name, "")]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = [(t.id, "") for t in targets if isinstance(t, ast.Name)]
        else:
            continue
        found += [f"{package}.{name}" for name, what in bound
                  if f"{package}.{name}" in MODULES and what != f"{package}.{name}"]
    return found


# Known leftover (shrink, never grow): the function ``operations`` over its module.
_SHADOWED = {"memtype.pipeline.catalog.operations"}


def test_no_package_name_shadows_its_own_module() -> None:
    """Issue 22: ``memtype.convert`` was the function and ``import memtype.convert`` the
    module; a package's names and its modules' names never collide."""
    found = {name for package in MODULES if MODULES[package].name == "__init__.py"
             for name in _shadowing(package, TREES[package])}
    assert found - _SHADOWED == set()
    assert _SHADOWED - found == set(), "fixed: remove it from _SHADOWED"


@pytest.mark.parametrize("source,found", [
    ("from memtype.pkg.convert import convert\n", ["memtype.pkg.convert"]),
    ("from .convert import convert\n", ["memtype.pkg.convert"]),
    ("def convert(x):\n    return x\n", ["memtype.pkg.convert"]),
    ("convert = 1\n", ["memtype.pkg.convert"]),
    ("from memtype.pkg import convert\nfrom . import convert as convert\n", []),
    ("import memtype.pkg.convert as convert\nfrom memtype.pkg.api import conversion\n", []),
], ids=["absolute", "relative", "def", "assignment", "the-module-itself", "import-as"])
def test_the_shadowing_check(source: str, found: list[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(MODULES, "memtype.pkg", ROOT / "pkg" / "__init__.py")
    monkeypatch.setitem(MODULES, "memtype.pkg.convert", ROOT / "pkg" / "convert.py")
    assert _shadowing("memtype.pkg", ast.parse(source)) == found


def test_memtype_convert_is_the_function_and_no_module() -> None:
    import memtype.conversion

    assert importlib.util.find_spec("memtype.convert") is None
    assert memtype.convert is memtype.conversion.convert
    assert callable(memtype.convert)


def test_no_public_name_is_defined_twice() -> None:
    adapters = {fw.adapter for fw in iter_frameworks()}  # the protocol repeats names on purpose
    homes: dict[str, list[str]] = {}
    for module in MODULES:
        if module not in adapters and not _is_private(module):
            for name in public_definitions(module):
                homes.setdefault(name, []).append(module)
    assert {name: mods for name, mods in homes.items() if len(mods) > 1} == {}


def test_gpu_exports_point_at_their_defining_module() -> None:
    import memtype.gpu

    present = {name: module for name, module in memtype.gpu._EXPORTS.items()
               if f"memtype.gpu.{module}" in MODULES}
    assert {"get_gpu_manager", "memory_pressure", "GPUTensorCache", "profile"} <= set(present)
    for name, module in present.items():
        assert name in public_definitions(f"memtype.gpu.{module}"), (name, module)
        assert getattr(memtype.gpu, name) is getattr(
            importlib.import_module(f"memtype.gpu.{module}"), name)


GPU_MODULES = sorted(m for m in MODULES if m.startswith("memtype.gpu."))


@pytest.mark.parametrize("target", ["memtype", "memtype.gpu", *GPU_MODULES])
def test_import_loads_no_framework_and_sets_no_environment(target: str) -> None:
    code = (
        "import json, os, sys\n"
        "before = dict(os.environ)\n"
        f"import {target}\n"
        f"loaded = [m for m in {FRAMEWORK_MODULES!r} if m in sys.modules]\n"
        "print(json.dumps([loaded, dict(os.environ) == before]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ), check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [[], True]


@pytest.mark.requires("torch")
def test_subprocess_check_can_see_a_framework_import() -> None:
    code = "import sys, memtype as mt, numpy as np; mt.convert(np.zeros(2), 'torch'); " \
           "print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip().splitlines()[-1] == "True"


def test_public_definitions_reads_all_and_ignores_imports() -> None:
    assert public_definitions("memtype.gpu.cache") == {"GPUTensorCache", "measure_nbytes"}
    assert "get_gpu_manager" not in public_definitions("memtype.gpu.memory")  # imported there


_BUILTIN_ERRORS = {n for n in dir(builtins) if n.endswith(("Error", "Exception"))}


def _builtin_raises(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """``raise ValueError(...)`` and the like (a builtin instead of a memtype error class)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) \
                and isinstance(node.exc.func, ast.Name) and node.exc.func.id in _BUILTIN_ERRORS:
            yield node.lineno, node.exc.func.id


def test_every_error_memtype_raises_is_a_memtype_error() -> None:
    # callers catch MemtypeError for anything memtype raises on purpose (or the builtin);
    # AttributeError is what a module's __getattr__ must raise
    found = [f"{name}:{line} raises {exc}" for name, tree in TREES.items()
             for line, exc in _builtin_raises(tree) if exc != "AttributeError"]
    assert found == []


def test_the_builtin_raise_finder_finds_one() -> None:
    tree = ast.parse("def f():\n    raise ValueError('x')\n")
    assert list(_builtin_raises(tree)) == [(2, "ValueError")]


def test_docs_list_every_error_class() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "errors.md").read_text(encoding="utf-8")
    missing = [name for name in memtype.errors.__all__ if f"| `{name}` |" not in text]
    assert missing == []



@pytest.mark.parametrize("module,act", [
    ("tifffile", lambda d: memtype.storage.DiskStore(d).save(np.zeros((4, 4), np.uint8), "a.tif")),
    ("PIL", lambda d: memtype.storage.DiskStore(d).save(np.zeros((4, 4), np.uint8), "a.png")),
    ("zarr", lambda d: memtype.storage.ZarrStore(os.path.join(d, "p.zarr"))),
], ids=["tifffile", "pillow", "zarr"])
def test_an_absent_optional_package_is_a_missing_package_error(
        module: str, act: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.setitem(sys.modules, name, None)  # `import name` now fails as if absent
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(memtype.errors.MissingPackageError, match=r"pip install 'memtype\[zarr\]'") \
            as info:
        act(str(tmp_path))
    assert isinstance(info.value, ImportError)


# Framework names still spelled outside frameworks/ (issue 14 leftovers; shrink, never grow):
# "numpy" as the host hub, the demo's fixed recipe, the default of thread_stream and the
# optional-package table.
_NAMED_OUTSIDE = {
    "_optional.py": {"torch"}, "dtypes.py": {"numpy"}, "conversion/casting.py": {"numpy"},
    "gpu/streams.py": {"torch"}, "pipeline/demo.py": {"torch", "jax", "numpy", "pyclesperanto"},
    "pipeline/execution/runner.py": {"numpy"}, "pipeline/io/tables.py": {"numpy"},
    "pipeline/planning/model.py": {"numpy"},  # HOST_STACK (was an array allocated to detect it)
    "storage/_formats.py": {"numpy"}, "storage/memory.py": {"numpy"},
    # the function catalog's table names the memory types of the libraries it covers
    "pipeline/catalog/declarations.py": {"numpy", "pyclesperanto", "cupy"},
}


def _literals(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """String constants of a module, docstrings left out."""
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


def _outside_frameworks() -> Iterator[tuple[str, ast.Module]]:
    for name, tree in TREES.items():
        if not name.startswith("memtype.frameworks"):
            yield str(MODULES[name].relative_to(ROOT)), tree


def test_no_device_kind_literal_outside_frameworks() -> None:
    kinds = {k for fw in iter_frameworks() for k in fw.device_kinds} - {"cpu"}  # cpu: the host
    found = [f"{path}:{line} {value!r}" for path, tree in _outside_frameworks()
             for line, value in _literals(tree) if value in kinds]
    assert found == [], "ask Device.is_managed_gpu / Framework.managed_gpu instead: " + str(found)


def test_no_framework_name_outside_frameworks_beyond_the_known_leftovers() -> None:
    names = {fw.name for fw in iter_frameworks()} | {fw.module for fw in iter_frameworks()}
    found = [f"{path}:{line} {value!r}" for path, tree in _outside_frameworks()
             for line, value in _literals(tree)
             if value in names and value not in _NAMED_OUTSIDE.get(path, set())]
    assert found == [], "ask the adapters (their methods and flags) instead: " + str(found)


def test_the_literal_scan_sees_a_device_kind() -> None:
    tree = ast.parse('"""doc "cuda"."""\nx = "cuda"\n')
    assert [v for _, v in _literals(tree)] == ["cuda"]


def _framework_list() -> re.Pattern[str]:
    """Four or more framework names of the table in a row, joined by commas, slashes, "and",
    "or" ("NumPy, CuPy, PyTorch and JAX", "numpy/torch/jax/cupy"; "PyTorch" is torch's usual
    spelling)."""
    spellings = {fw.name for fw in iter_frameworks()} | {fw.module for fw in iter_frameworks()}
    name = r"(?:py)?(?:" + "|".join(map(re.escape, sorted(spellings, key=len, reverse=True))) \
        + r")\b"
    sep = r"(?:\s*,\s*(?:and\s+|or\s+)?|\s*/\s*|\s+(?:and|or)\s+)"
    return re.compile(rf"\b{name}(?:{sep}{name}){{3,}}", re.IGNORECASE)


def _hand_written_lists(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Lists of frameworks in a module's strings, docstrings and f-string parts included."""
    pattern = _framework_list()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield from ((node.lineno, m.group()) for m in pattern.finditer(node.value))


def test_no_message_or_docstring_lists_frameworks_by_hand() -> None:
    """A list of frameworks written by hand goes stale when a row is added (six of them
    once omitted MLX): build it from the table (``iter_frameworks()``) or name a few."""
    found = [f"{name}:{line} {text!r}" for name, tree in TREES.items()
             if name != "memtype.frameworks"  # the table itself
             for line, text in _hand_written_lists(tree)]
    assert found == []


@pytest.mark.parametrize("source,found", [
    ('"""Move arrays between NumPy, CuPy, PyTorch, TensorFlow, JAX and pyclesperanto."""\n', 1),
    ('def f(x):\n    raise E(f"{x}: expected (numpy, torch,\\n jax, tensorflow).")\n', 1),
    ('"""NumPy, torch and JAX; see the table."""\n', 0),
    ('"""NumPy copies; torch shares. JAX and TensorFlow are immutable."""\n', 0),
    ('x = "one of numpy/torch/jax/cupy"\n', 1),
    ('"""See numpy/numpy#22507 and dmlc/dlpack#103."""\n', 0),
], ids=["docstring", "f-string", "three", "sentences", "slashes", "issue-links"])
def test_the_list_finder(source: str, found: int) -> None:
    assert len(list(_hand_written_lists(ast.parse(source)))) == found
