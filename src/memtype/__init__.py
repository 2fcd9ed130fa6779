"""memtype: move arrays between NumPy, PyTorch, JAX and the other frameworks of its table.

Importing memtype loads no framework and sets no environment variable; each framework is
imported the first time a conversion needs it.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from memtype import errors
from memtype._lazy import lazy_loader
from memtype.conversion import capture_conversions, convert, convert_memory, shares_memory
from memtype.detect import detect_memory_type
from memtype.errors import (
    DeviceError,
    MemoryConversionError,
    MemtypeError,
    UnknownMemoryTypeError,
    UnsupportedArrayError,
)
from memtype.frameworks import builtin_frameworks, is_registered
from memtype.stack import stack_slices, unstack_slices
from memtype.types import DtypeConversion, MemoryType

if TYPE_CHECKING:  # the lazy names below, for type checkers
    from memtype._optional import require as require
    from memtype.array_api_functions import ArrayAPIFunction as ArrayAPIFunction
    from memtype.array_api_functions import array_api as array_api
    from memtype.decorators import memory_types as memory_types

__version__ = "0.1.0"

# names defined in later layers, imported on first use
_LAZY: dict[str, str] = {
    "memory_types": "memtype.decorators",
    **{fw.name: "memtype.decorators" for fw in builtin_frameworks()},  # one per table row
    "gpu": "memtype.gpu",
    "storage": "memtype.storage",
    "pipeline": "memtype.pipeline",
    "variants": "memtype.pipeline.model.variants",
    "array_api": "memtype.array_api_functions",
    "ArrayAPIFunction": "memtype.array_api_functions",  # what array_api returns
    "chain": "memtype.chaining",
    "frameworks": "memtype.frameworks",
    "conversion": "memtype.conversion",
    "dtypes": "memtype.dtypes",
    "require": "memtype._optional",
}

# the errors the top level keeps: the base class, the OpenHCS surface's
# MemoryConversionError, and those the README names; every class is in memtype.errors
_TOP_ERRORS = ("MemtypeError", "MemoryConversionError", "UnsupportedArrayError",
               "UnknownMemoryTypeError", "DeviceError")

__all__ = [
    "MemoryType",
    "DtypeConversion",
    "detect_memory_type",
    "convert",
    "convert_memory",
    "shares_memory",
    "capture_conversions",
    "stack_slices",
    "unstack_slices",
    "errors",
    "MemtypeError",
    "MemoryConversionError",
    "UnsupportedArrayError",
    "UnknownMemoryTypeError",
    "DeviceError",
    *_LAZY,
]


_load = lazy_loader(globals(), _LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return _load(name)
    if name in errors.__all__:
        return _moved_error(name)
    if name.startswith("_") or not is_registered(name):
        raise AttributeError(f"module 'memtype' has no attribute {name!r}")
    # the decorator of a framework registered at run time (``register_framework``); not
    # cached here, so that unregistering the framework removes it again
    return getattr(importlib.import_module("memtype.decorators"), name)


def _moved_error(name: str) -> Any:
    """An error class that left the top level: still importable, with a DeprecationWarning."""
    warnings.warn(
        f"memtype.{name} is deprecated: error classes live in memtype.errors "
        f"(from memtype.errors import {name}); the top level keeps only "
        f"{', '.join(_TOP_ERRORS)}.", DeprecationWarning, stacklevel=3)
    return getattr(errors, name)


def __dir__() -> list[str]:
    return sorted({*__all__, "__version__"})
