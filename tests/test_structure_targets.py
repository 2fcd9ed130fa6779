"""Structural targets of the core, each checked with the standard library (``ast``,
``sys.setprofile``): a narrow Adapter base class, a decorated call that reads top-down, and no
import cycle in the core, ``TYPE_CHECKING`` imports counted."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import memtype as mt
from tests.structure_support import SRC, cycles, module_trace, modules, named, package_of

NOT_CORE = ("memtype.storage", "memtype.pipeline", "memtype.omezarr", "memtype.cli",
            "memtype.__main__", "memtype._info", "memtype._bench")
"""What sits above the core (docs/architecture.md: layers 12-15)."""

MODULES = modules()
CORE = sorted(m for m in MODULES if not m.startswith(NOT_CORE))


# -- a narrow Adapter ----------------------------------------------------------------------------

def methods_of(source: str, cls: str) -> list[str]:
    """The methods defined in class ``cls`` of ``source``."""
    tree = ast.parse(source)
    found = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return [n.name for n in found.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_the_adapter_base_class_has_at_most_24_methods() -> None:
    methods = methods_of((SRC / "frameworks" / "_adapter.py").read_text(), "Adapter")
    assert len(methods) <= 24, f"{len(methods)} methods: {methods}"


def test_the_method_count_sees_every_def() -> None:
    source = "class Adapter:\n    x = 1\n    def a(self): ...\n    async def b(self): ...\n"
    assert methods_of(source, "Adapter") == ["a", "b"]


# -- a decorated call read top-down --------------------------------------------------------------

def reentries(trace: list[str]) -> Counter[str]:
    """How many times each module is entered again after the call has left it."""
    return Counter(trace) - Counter(set(trace))


@pytest.mark.requires("torch")
def test_a_decorated_call_reenters_a_module_at_most_twice() -> None:
    f = mt.torch(lambda x: x)
    x = np.zeros((1, 4, 4), np.float32)
    f(x)  # the first call loads torch and fills the caches: the second one is measured
    trace = module_trace(lambda: f(x))
    assert "memtype.conversion.api" in trace  # it converts: the whole path is traced
    worst = reentries(trace).most_common(1)
    assert not worst or worst[0][1] <= 2, trace


def test_reentries_count_returns_to_a_module_left() -> None:
    assert reentries(["a", "b", "a", "c", "a", "b"]) == Counter({"a": 2, "b": 1})


# -- no import cycle in the core -----------------------------------------------------------------

def imported(module: str) -> set[str]:
    """The memtype modules ``module`` imports anywhere: at module level, inside functions and
    under ``if TYPE_CHECKING:``."""
    tree = ast.parse(MODULES[module].read_text())
    found = named(ast.walk(tree), package_of(module, MODULES[module]))
    return {name for name in found if name in MODULES and name != module}


def test_no_import_cycle_in_the_core_counting_type_checking_imports() -> None:
    graph = {m: {n for n in imported(m) if n in CORE} for m in CORE}
    assert cycles(graph) == []


def test_the_cycle_walk_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_type_checking_imports_count() -> None:
    """memtype's front door imports the decorators only for type checkers (the rest lazily):
    that edge is in the graph."""
    assert {"memtype.decorators", "memtype.array_api_functions"} <= imported("memtype")


def function_level_imports(module: str) -> list[str]:
    """``module:line`` of each import of a memtype module inside a function of ``module``."""
    tree = ast.parse(MODULES[module].read_text())
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if isinstance(node, ast.ImportFrom) and node.level:
                names = ["memtype"]  # a relative import is one of memtype's own
            if any(name == "memtype" or name.startswith("memtype.") for name in names):
                found.append(f"{module}:{node.lineno}")
    return found


def test_the_core_imports_memtype_modules_at_the_top() -> None:
    """Its dependencies show in its module headers (a heavy subpackage is reached through a
    package's lazy names, memtype._lazy, never by an import inside a function)."""
    assert [where for m in CORE for where in function_level_imports(m)] == []


def test_function_level_imports_are_found(tmp_path: Path) -> None:
    MODULES["memtype._probe_case"] = tmp_path / "case.py"
    (tmp_path / "case.py").write_text("import os\n\ndef f():\n    import os\n"
                                      "    from memtype.errors import MemtypeError\n"
                                      "    from . import x\n")
    try:
        assert function_level_imports("memtype._probe_case") == [
            "memtype._probe_case:5", "memtype._probe_case:6"]
    finally:
        del MODULES["memtype._probe_case"]


FUNCTION_LEVEL_IMPORTS_AT_MOST = 40
SAY_WHY = ("memtype.storage", "memtype.omezarr", "memtype._info", "memtype.pipeline.catalog",
           "memtype.pipeline.readers", "memtype.pipeline.io", "memtype.pipeline.planning",
           "memtype.pipeline.synthetic")
"""Packages whose every import inside a function says why on its line."""


def test_few_imports_of_memtype_modules_sit_inside_functions() -> None:
    """Above the core too, a module's dependencies show in its header (174 were inside
    functions before issue 34)."""
    found = [where for m in MODULES for where in function_level_imports(m)]
    assert len(found) <= FUNCTION_LEVEL_IMPORTS_AT_MOST, found


def test_an_import_left_inside_a_function_says_why() -> None:
    """Only an optional package's or a costly module's import stays in a function, with a
    comment on its line (zarr is optional; a module the package's import does not need)."""
    silent = [where for m in MODULES if m.startswith(SAY_WHY)
              for where in function_level_imports(m)
              if "#" not in MODULES[m].read_text().splitlines()[int(where.rpartition(":")[2]) - 1]]
    assert silent == []


# -- a pipeline layer whose folders show its design ------------------------------------------

PIPELINE_MODULES_AT_MOST = 8


def test_few_modules_sit_directly_in_pipeline() -> None:
    """What a pipeline is, how a run executes and what goes in and out are folders of their
    own (``model/``, ``execution/``, ``io/``; docs/architecture.md), not a flat list."""
    flat = sorted(p.name for p in (SRC / "pipeline").glob("*.py"))
    assert len(flat) <= PIPELINE_MODULES_AT_MOST, flat


@pytest.mark.parametrize("package", sorted(
    p.parent.relative_to(SRC).as_posix() for p in (SRC / "pipeline").rglob("__init__.py")))
def test_each_pipeline_folder_says_what_it_owns(package: str) -> None:
    doc = ast.get_docstring(ast.parse((SRC / package / "__init__.py").read_text()))
    assert doc and doc.splitlines()[0].strip(), f"{package}/__init__.py has no first line"


# -- Pipeline.run's options: a few objects, not a long flat signature ------------------------

RUN_PARAMETERS_AT_MOST = 8


def parameters_of(source: str, cls: str, method: str) -> list[str]:
    """The parameters of ``cls.method`` in ``source``: self, positional, keyword-only,
    ``*args`` and ``**kwargs`` all counted."""
    [node] = [n for c in ast.parse(source).body if isinstance(c, ast.ClassDef) and c.name == cls
              for n in c.body if isinstance(n, ast.FunctionDef) and n.name == method]
    a = node.args
    rest = [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)] + rest


def test_pipeline_run_takes_at_most_8_parameters() -> None:
    """Input, execution and output options are objects of their own
    (``memtype.pipeline.model.options``), so ``run`` stays short."""
    source = (SRC / "pipeline" / "model" / "pipeline.py").read_text()
    params = parameters_of(source, "Pipeline", "run")
    assert len(params) <= RUN_PARAMETERS_AT_MOST, params


def test_the_parameter_count_sees_every_kind() -> None:
    source = "class C:\n    def run(self, a, /, b, *args, c, d=1, **kw):\n        pass\n"
    assert parameters_of(source, "C", "run") == ["self", "a", "b", "c", "d", "args", "kw"]
