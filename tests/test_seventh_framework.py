"""Adding a framework is one table row plus one module with its Adapter subclass: proven with
a toy framework."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import memtype as mt
from memtype.conversion.casting import ops_for
from memtype.frameworks import Framework, load_adapter, register_framework, unregister_framework
from tests.frameworks import builtin_names, type_params
from tests.helpers import host, registered


@pytest.mark.parametrize("other", type_params())
def test_round_trip_through_toy(toy: Framework, other: str) -> None:
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = mt.convert(values, other)
    t = mt.convert(x, "toy")
    assert mt.detect_memory_type(t) is mt.MemoryType("toy")
    back = mt.convert(t, other)
    assert mt.detect_memory_type(back) is mt.MemoryType(other)
    np.testing.assert_array_equal(host(back), values)


def test_toy_is_a_memory_type_member(toy: Framework) -> None:
    member = mt.MemoryType("toy")
    assert isinstance(member, mt.MemoryType) and member.value == "toy"
    assert mt.MemoryType("toy") is member


def test_stack_into_toy(toy: Framework) -> None:
    slices = [np.full((2, 2), i, np.float32) for i in range(3)]
    stacked = mt.stack_slices(slices, "toy")
    assert stacked.shape == (3, 2, 2)
    assert [float(host(s).max()) for s in mt.unstack_slices(stacked, "numpy")] == [0.0, 1.0, 2.0]


def test_unregistered_toy_is_unknown_again(toy: Framework) -> None:
    unregister_framework("toy")
    with pytest.raises(mt.UnknownMemoryTypeError):
        mt.convert(np.zeros(2), "toy")
    register_framework(toy)  # the fixture unregisters it


def test_duplicate_registration_refused(toy: Framework) -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_framework(toy)


def test_builtin_rows_cannot_be_removed() -> None:
    with pytest.raises(ValueError, match="Built-in"):
        unregister_framework("torch")


def test_toy_decorator_from_the_top_level_package(toy: Framework) -> None:
    from tests.toyarrays import ToyArray

    @mt.toy
    def double(image: ToyArray) -> ToyArray:
        assert isinstance(image, ToyArray)
        return ToyArray(image.values() * 2)

    out = double(np.ones((2, 3, 3), np.float32))
    assert isinstance(out, ToyArray)
    np.testing.assert_array_equal(host(out), np.full((2, 3, 3), 2.0))


def test_no_decorator_for_an_unregistered_name() -> None:
    with pytest.raises(AttributeError, match="no attribute 'toy'"):
        mt.toy  # noqa: B018
    assert "toy" not in dir(mt)


@pytest.mark.parametrize("name", builtin_names())
def test_dir_and_all_list_every_builtin_decorator(name: str) -> None:
    assert name in dir(mt) and name in mt.__all__
    assert getattr(mt, name) is getattr(mt.decorators, name)


def test_dir_lists_no_implementation_names() -> None:
    names = dir(mt)
    assert "memory_types" in names and "convert" in names and "MemtypeError" in names
    assert "importlib" not in names and "Any" not in names


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_row_is_a_member_of_the_enum(name: str) -> None:
    assert mt.MemoryType[name.upper()] is mt.MemoryType(name)
    assert mt.MemoryType(name) in list(mt.MemoryType)


def test_a_run_time_member_leaves_the_enum_with_its_row(toy: object) -> None:
    member = mt.MemoryType("toy")
    assert member.value == "toy" and member not in list(mt.MemoryType)
    unregister_framework("toy")
    with pytest.raises(ValueError):
        mt.MemoryType("toy")
    register_framework(toy)  # type: ignore[arg-type]  # the fixture unregisters it again


def test_an_adapter_path_without_its_class_is_refused(toy: Framework) -> None:
    from dataclasses import replace

    with pytest.raises(mt.errors.InvalidArgumentError, match="'module:Class'"):
        register_framework(replace(toy, name="toymodule", adapter="tests.toy_adapter"))


def test_an_adapter_that_is_not_an_adapter_subclass_is_refused(toy: Framework) -> None:
    from dataclasses import replace

    from memtype.frameworks import load_adapter

    with registered(replace(toy, name="toynotadapter", adapter="tests.toyarrays:ToyArray")):
        with pytest.raises(mt.errors.ArgumentTypeError, match="subclass of memtype.frameworks"):
            load_adapter("toynotadapter")


def test_the_toy_adapter_gets_the_base_class_defaults(toy: Framework) -> None:
    from memtype.frameworks import (
        CPU,
        Adapter,
        DeviceAdapter,
        diagnostics,
        load_adapter,
        ran_out_of_memory,
    )
    from tests.toyarrays import ToyArray

    adapter = load_adapter("toy")
    assert isinstance(adapter, Adapter) and not isinstance(adapter, DeviceAdapter)
    x = ToyArray(np.ones(2))
    assert adapter.device_of(x) == CPU and not adapter.has_streams and not adapter.caps_memory
    assert adapter.shape_of(x) == (2,) and adapter.holds_dtype(np.dtype("c16"))
    assert ran_out_of_memory(adapter, MemoryError()) and not ran_out_of_memory(adapter, OSError())
    assert diagnostics(adapter).devices() == ["cpu"] and diagnostics(adapter).runtime_info() == ""


def test_the_adapter_base_is_the_conversion_contract() -> None:
    """The facets' methods are not on the base class: a seventh framework writes only the
    contract, and a facet only where it has one."""
    from memtype.frameworks import Adapter, DeviceAdapter, DeviceTiming, Diagnostics, PinnedSpills

    for facet, method in [(DeviceAdapter, "memory_info"), (DeviceTiming, "timing_events"),
                          (PinnedSpills, "pinned_host_copy"), (Diagnostics, "runtime_info")]:
        assert hasattr(facet, method) and not hasattr(Adapter, method)


def test_capability_flags_follow_the_overridden_methods() -> None:
    from memtype.frameworks import Adapter
    from tests.toy_adapter import ToyAdapter

    class Casting(ToyAdapter):
        def astype(self, x: object, dtype: np.dtype) -> object:
            return x

    assert not ToyAdapter.casts_on_device and Casting.casts_on_device
    assert not Adapter.casts_on_device


def test_a_facets_flags_follow_its_overridden_methods() -> None:
    from memtype.frameworks import DeviceAdapter
    from tests.toydevice_adapter import ToyDeviceAdapter

    class Streams(DeviceAdapter):
        def current_stream(self, device: object) -> object:
            return None

    assert Streams.has_streams and not Streams.caps_memory and not DeviceAdapter.has_streams
    assert ToyDeviceAdapter.has_streams and ToyDeviceAdapter.resets_peak


@pytest.mark.parametrize("name", builtin_names())
def test_each_builtin_row_names_one_adapter_class_in_its_module(name: str) -> None:
    row = mt.frameworks.get_framework(name)
    module, _, cls = row.adapter.partition(":")
    assert module == f"memtype.frameworks.{name}_adapter"
    assert cls.endswith("Adapter") and cls.lower() == f"{name}adapter"


def test_nothing_outside_frameworks_probes_an_adapter() -> None:
    import re
    from pathlib import Path

    root = Path(mt.__file__).parent
    probe = re.compile(r"(getattr|hasattr)\([^)]*adapter|frameworks\._hooks|frameworks\._protocol")
    found = [f"{p.relative_to(root)}:{n}" for p in root.rglob("*.py")
             if p.parent.name != "frameworks"
             for n, line in enumerate(p.read_text().splitlines(), 1) if probe.search(line)]
    assert found == []


def _is_namespace(node: ast.expr, held: set[str]) -> bool:
    return ast.unparse(node) in held or (isinstance(node, ast.Call)
                                         and isinstance(node.func, ast.Attribute)
                                         and node.func.attr == "namespace")


def _namespace_probes(tree: ast.Module) -> list[int]:
    """Lines that probe a framework namespace with getattr/hasattr: an ``adapter.namespace()``
    call, a name (``xp``, ``self.xp``) one was assigned to, or a parameter of a function of
    the module that is passed one."""
    functions = {node.name: node for node in ast.walk(tree)
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    held: set[str] = set()
    for _ in range(3):  # a namespace passed on through a few helpers
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None \
                    and _is_namespace(node.value, held):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                held.update(ast.unparse(t) for t in targets)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in functions:
                params = functions[node.func.id].args.args
                held.update(params[k].arg for k, arg in enumerate(node.args)
                            if k < len(params) and _is_namespace(arg, held))
    return sorted({node.lineno for node in ast.walk(tree)
                   if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                   and node.func.id in ("getattr", "hasattr") and node.args
                   and _is_namespace(node.args[0], held)})


def test_nothing_outside_frameworks_probes_a_namespace() -> None:
    root = Path(mt.__file__).parent
    found = [f"{p.relative_to(root)}:{line}" for p in sorted(root.rglob("*.py"))
             if "frameworks" not in p.relative_to(root).parts
             for line in _namespace_probes(ast.parse(p.read_text(encoding="utf-8")))]
    assert found == [], "make it an Adapter method with a default (frameworks/_adapter.py)"


@pytest.mark.parametrize("source", [
    "def f(adapter):\n    xp = adapter.namespace()\n    return getattr(xp, 'aminmax', None)\n",
    "class O:\n    def __init__(self, a):\n        self.xp: object = a.namespace()\n"
    "        self.m = hasattr(self.xp, 'minimum')\n",
    "def f(adapter):\n    return getattr(adapter.namespace(), 'min')\n",
    "def g(ns):\n    return getattr(ns, 'aminmax', None)\n"
    "class O:\n    def __init__(self, a):\n        self.xp = a.namespace()\n"
    "        self.m = g(self.xp)\n",
], ids=["name", "attribute", "call", "passed-to-a-helper"])
def test_the_namespace_probe_check_sees_one(source: str) -> None:
    assert len(_namespace_probes(ast.parse(source))) == 1


@pytest.mark.parametrize("memory_type", type_params())
def test_an_adapter_gives_the_minimum_and_maximum(memory_type: str) -> None:
    adapter = load_adapter(memory_type)
    if adapter.namespace() is None:  # the dtype policy casts it through NumPy instead
        assert ops_for(memory_type, adapter) is None
        return
    x = mt.convert(np.array([[3.0, -2.5], [7.25, 0.0]], np.float32), memory_type)
    low, high = adapter.minmax(x)
    assert (float(low), float(high)) == (-2.5, 7.25)


@pytest.mark.parametrize("memory_type", type_params())
def test_an_adapter_minimum_and_maximum_keep_nan(memory_type: str) -> None:
    adapter = load_adapter(memory_type)
    if adapter.namespace() is None:  # the dtype policy casts it through NumPy instead
        assert ops_for(memory_type, adapter) is None
        return
    x = mt.convert(np.array([1.0, np.nan, 2.0], np.float32), memory_type)
    assert all(np.isnan(float(v)) for v in adapter.minmax(x))

