"""detect_memory_type: which framework owns an array, without importing any framework."""

from __future__ import annotations

from typing import Any

from memtype.errors import UnsupportedArrayError
from memtype.frameworks import (
    Framework,
    array_types,
    iter_frameworks,
    loaded_frameworks,
    on_table_change,
)
from memtype.types import MemoryType

__all__ = ["detect_memory_type", "detect_framework"]

# type(x) -> framework row; cleared when the table changes. Misses are not cached, because a
# framework imported later may own the type after all.
_cache: dict[type, Framework] = {}
on_table_change(_cache.clear)


def _lookup(cls: type) -> Framework | None:
    for fw in loaded_frameworks():
        classes = array_types(fw)
        if classes and issubclass(cls, classes):
            return fw
    return None


def detect_framework(x: Any) -> Framework:
    """The table row of the framework that owns ``x``.

    Raises
    ------
    UnsupportedArrayError
        If ``x`` is not an array of a loaded framework.
    """
    cls = type(x)
    fw = _cache.get(cls)
    if fw is not None:
        return fw
    fw = _lookup(cls)
    if fw is None:
        names = ", ".join(f.name for f in iter_frameworks())
        raise UnsupportedArrayError(
            f"Expected an array of one of: {names}; received an object of type "
            f"{cls.__module__}.{cls.__qualname__}, which is not an array of any loaded framework."
        )
    _cache[cls] = fw
    return fw


def detect_memory_type(x: Any) -> MemoryType:
    """The memory type of an array.

    Only frameworks already imported are considered (a framework that is not loaded
    cannot own ``x``), so detection never imports anything. Results are cached per type.

    Parameters
    ----------
    x : array
        A NumPy, CuPy, PyTorch, TensorFlow, JAX or pyclesperanto array (or one of a
        registered framework).

    Returns
    -------
    MemoryType

    Raises
    ------
    UnsupportedArrayError
        For anything that is not an array: dtypes, devices, modules, lists, scalars.

    Examples
    --------
    >>> import numpy as np, memtype as mt
    >>> mt.detect_memory_type(np.zeros(3))
    <MemoryType.NUMPY: 'numpy'>
    """
    return MemoryType(detect_framework(x).name)
