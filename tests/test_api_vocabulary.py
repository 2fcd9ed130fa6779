"""Issue 22 section 2, "One vocabulary": error classes live in memtype.errors; the top level
keeps the base class and the few the README and the OpenHCS surface name, and the others
still work from there with a DeprecationWarning."""

from __future__ import annotations

import warnings

import pytest

import memtype as mt
from memtype import errors

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
