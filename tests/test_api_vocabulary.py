"""Issue 22 section 2, "One vocabulary": error classes live in memtype.errors; the top level
keeps the base class and the few the README and the OpenHCS surface name, and the others
still work from there with a DeprecationWarning."""

from __future__ import annotations

import importlib
import inspect
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype import errors
from memtype.frameworks import Framework
from memtype.types import MemoryType, MemoryTypeLike

KEPT = ("MemtypeError", "MemoryConversionError", "UnsupportedArrayError",
        "UnknownMemoryTypeError", "DeviceError")
MOVED = tuple(name for name in errors.__all__ if name not in KEPT)


@pytest.mark.parametrize("name", KEPT)
def test_the_top_level_keeps_the_surface_errors_without_a_warning(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert getattr(mt, name) is getattr(errors, name)
    assert name in mt.__all__


@pytest.mark.parametrize("name", MOVED)
def test_a_moved_error_still_works_from_the_top_level_with_a_warning(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"from memtype.errors import {name}"):
        cls = getattr(mt, name)
    assert cls is getattr(errors, name)
    assert name not in mt.__all__ and name not in dir(mt)


def test_every_error_class_in_memtype_errors_is_exported() -> None:
    defined = {name for name, value in vars(errors).items()
               if isinstance(value, type) and issubclass(value, errors.MemtypeError)
               and not name.startswith("_")}
    assert defined == set(errors.__all__)


def test_from_memtype_import_of_a_moved_error_warns() -> None:
    with pytest.warns(DeprecationWarning, match="memtype.ShapeError is deprecated"):
        from memtype import ShapeError
    assert ShapeError is errors.ShapeError


# -- a framework argument is spelled memory_type (docs/api.md) ------------------------------

def test_convert_takes_the_memory_type_by_position_and_by_keyword() -> None:
    x = np.arange(4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mt.convert(x, "numpy") is x
        assert mt.convert(x, memory_type="numpy") is x
        assert mt.convert(x, memory_type=mt.MemoryType.NUMPY, gpu_id=None) is x


def test_convert_to_still_works_and_warns_with_the_new_spelling() -> None:
    x = np.arange(4.0)
    with pytest.warns(DeprecationWarning, match=r"convert\(memory_type=\.\.\.\)") as seen:
        assert mt.convert(x, to="numpy") is x
    assert [w.filename for w in seen] == [__file__]  # the warning points at the caller


def test_convert_refuses_both_spellings() -> None:
    with pytest.raises(errors.ArgumentTypeError, match=r"memory_type='numpy'.*to='numpy'"):
        mt.convert(np.arange(4.0), "numpy", to="numpy")


def test_convert_without_a_memory_type_lists_the_memory_types() -> None:
    with pytest.raises(mt.UnknownMemoryTypeError, match=r"None\. Expected one of: numpy, "):
        mt.convert(np.arange(4.0))


def test_an_unknown_memory_type_is_still_named() -> None:
    with pytest.raises(mt.UnknownMemoryTypeError, match="pytorch"):
        mt.convert(np.arange(4.0), memory_type="pytorch")


def test_cap_framework_memory_frameworks_still_works_and_warns() -> None:
    # GPU 99 exists nowhere: the call stops at the device, after the argument was read
    with pytest.warns(DeprecationWarning, match=r"cap_framework_memory\(memory_types=\.\.\.\)"), \
            pytest.raises(mt.DeviceError):
        mt.gpu.cap_framework_memory(None, gpu_id=99, frameworks=["numpy"])


def test_cap_framework_memory_refuses_both_spellings() -> None:
    with pytest.raises(errors.ArgumentTypeError, match="memory_types="):
        mt.gpu.cap_framework_memory(None, 0, ["numpy"], frameworks=["numpy"])


def test_apply_caps_frameworks_still_works_and_warns() -> None:
    pool = mt.gpu.GPUMemoryPool(1 << 20, gpu_id=None)  # a host pool caps nothing
    with pytest.warns(DeprecationWarning, match=r"apply_caps\(memory_types=\.\.\.\)"):
        assert pool.apply_caps(frameworks=["numpy"]) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pool.apply_caps(["numpy"]) == []


def test_array_api_output_type_still_works_and_warns() -> None:
    with pytest.warns(DeprecationWarning, match=r"array_api\(memory_type=\.\.\.\)"):
        old = mt.array_api(_identity, output_type="numpy")
    assert old.output_type == mt.array_api(_identity, memory_type="numpy").output_type == "numpy"


def test_array_api_refuses_both_spellings() -> None:
    with pytest.raises(errors.ArgumentTypeError, match="memory_type="):
        mt.array_api(_identity, memory_type="numpy", output_type="numpy")


def _identity(x: Any) -> Any:
    return x


# the compatibility surface keeps its names; the old spellings that still work, warning
_SURFACE = {"source_type", "target_type", "input_type", "output_type"}
_DEPRECATED = {("convert", "to"), ("cap_framework_memory", "frameworks"),
               ("array_api", "output_type"),
               ("GPUMemoryPool.apply_caps", "frameworks")}
_OTHER_SPELLINGS = {"to", "target", "framework", "frameworks", "fw", "mt_type", "into",
                    "target_framework", "source_framework", "memtype", "mtype"}
# known leftover (shrink, never grow): entry_dtype's ``into`` also takes a holds_dtype callable
_LEFTOVERS = {"memtype.dtypes.entry_dtype(into)"}


# the packages whose ``__all__`` is the public API
_PUBLIC = ("memtype", "memtype.conversion", "memtype.gpu", "memtype.frameworks", "memtype.dtypes",
           "memtype.storage", "memtype.pipeline", "memtype.pipeline.catalog",
           "memtype.pipeline.readers")


def _callables(name: str, obj: object) -> Iterator[tuple[str, Any]]:
    """A public function, or a public class's ``__init__`` and public methods."""
    if inspect.isfunction(obj):
        yield name, obj
    elif inspect.isclass(obj):
        for attr, value in vars(obj).items():
            if inspect.isfunction(value) and (not attr.startswith("_") or attr == "__init__"):
                yield f"{name}.{attr}", value


def spelled_otherwise(name: str, obj: object) -> list[str]:
    """The arguments of a public function or class that name a framework, but not as
    ``memory_type(s)``: annotated with a memory type or named as frameworks are elsewhere
    (a mapping keyed by memory types and a ``Framework`` row are other concepts)."""
    found = []
    for qualified, func in _callables(name, obj):
        for arg, parameter in inspect.signature(func).parameters.items():
            note = str(parameter.annotation)
            names_one = ("MemoryType" in note or arg in _OTHER_SPELLINGS) \
                and "Mapping" not in note and "Framework" not in note
            if names_one and arg not in {"memory_type", "memory_types", *_SURFACE} \
                    and (func.__qualname__, arg) not in _DEPRECATED:
                found.append(f"{qualified}({arg})")
    return found


def _public_api() -> Iterator[tuple[str, object]]:
    for package in _PUBLIC:
        module = importlib.import_module(package)
        for name in module.__all__:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # moved errors
                yield f"{package}.{name}", getattr(module, name)


def test_every_public_framework_argument_is_spelled_memory_type() -> None:
    found = {entry for name, obj in _public_api() for entry in spelled_otherwise(name, obj)}
    assert found - _LEFTOVERS == set()
    assert _LEFTOVERS - found == set(), "fixed: remove it from _LEFTOVERS"


def _annotated(x: Any, to: MemoryTypeLike) -> None: ...


def _named(x: Any, *, framework: str = "torch") -> None: ...


def _right(x: Any, memory_type: MemoryTypeLike, target_type: MemoryTypeLike) -> None: ...


def _row(framework: Framework, implementations: Mapping[MemoryType, Any]) -> None: ...


class _Class:
    def method(self, target: MemoryType | str) -> None: ...


@pytest.mark.parametrize("obj,found", [
    (_annotated, ["f(to)"]), (_named, ["f(framework)"]), (_Class, ["f.method(target)"]),
    (_right, []), (_row, []), (mt.convert, []),
], ids=["annotated", "named", "method", "spelled-right", "other-concepts", "deprecated"])
def test_the_spelling_check(obj: object, found: list[str]) -> None:
    assert spelled_otherwise("f", obj) == found



ERROR_CLASSES = [name for name in errors.__all__
                 if issubclass(getattr(errors, name), errors.MemtypeError)]


@pytest.mark.parametrize("name", ERROR_CLASSES)
def test_every_error_keeps_a_long_message_readable_and_picklable(name: str) -> None:
    """A message of 50,000 characters (a huge value quoted as received) keeps its start and
    end within MESSAGE_LIMIT, and the error pickles as it is."""
    import pickle

    cls = getattr(errors, name)
    error = cls("start " + "x" * 50_000 + " end")
    text = str(error)
    assert len(text) <= errors.MESSAGE_LIMIT
    assert text.startswith("start xxx") and text.endswith("xxx end") and "left out" in text
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is cls and str(again) == text


@pytest.mark.requires("distributed")
@pytest.mark.parametrize("name", ERROR_CLASSES)
def test_every_error_comes_back_from_a_dask_worker(name: str) -> None:
    """distributed pickles errors with tblib (installed when distributed.utils is imported),
    which remakes an error through its class's ``__new__``: each class survives it
    (MemoryBudgetError did not: MemoryError's ``__new__`` refused it)."""
    import pickle

    import distributed.utils  # noqa: F401  (installs tblib's exception pickling)
    from tblib import pickling_support

    cls = getattr(errors, name)
    pickling_support.install(cls)
    error = cls("the budget is 1 MiB; expected at most that")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is cls and str(again) == str(error)
