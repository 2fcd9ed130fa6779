"""detect_memory_type: which framework owns an array, without importing any framework."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memtype.errors import UnsupportedArrayError
from memtype.frameworks import (
    Framework,
    array_types,
    iter_frameworks,
    load_adapter,
    loaded_frameworks,
    on_table_change,
)
from memtype.types import MemoryType

__all__ = ["detect_memory_type", "detect_framework", "framework_of", "shares_memory", "KNOWN_TYPES",
           "array_nbytes"]

# type(x) -> framework row, the one cache of "which framework owns x"; cleared when the table
# changes. Misses are not cached, because a framework imported later may own the type after
# all. Hot paths may read it directly (``KNOWN_TYPES.get(type(x))``).
_cache: dict[type, Framework] = {}
KNOWN_TYPES: Mapping[type, Framework] = _cache
on_table_change(_cache.clear)
_NOT_ARRAYS = frozenset({int, float, complex, str, bytes, bool, type(None), slice,
                         type(Ellipsis), dict, set, frozenset, range, list, tuple})


def _lookup(cls: type) -> Framework | None:
    for fw in loaded_frameworks():
        classes = array_types(fw)
        if classes and issubclass(cls, classes):
            return fw
    return None


def framework_of(x: Any) -> Framework | None:
    """The table row of the framework that owns ``x``, or ``None`` for anything else."""
    cls = type(x)
    fw = _cache.get(cls)
    if fw is not None or cls in _NOT_ARRAYS:
        return fw
    fw = _lookup(cls)
    if fw is not None:
        _cache[cls] = fw
    return fw


def detect_framework(x: Any) -> Framework:
    """The table row of the framework that owns ``x``.

    Raises
    ------
    UnsupportedArrayError
        If ``x`` is not an array of a loaded framework.
    """
    fw = framework_of(x)
    if fw is None:
        cls = type(x)
        names = ", ".join(f.name for f in iter_frameworks())
        raise UnsupportedArrayError(
            f"Expected an array of one of: {names}; received an object of type "
            f"{cls.__module__}.{cls.__qualname__}, which is not an array of any loaded framework."
        )
    return fw


def detect_memory_type(x: Any) -> MemoryType:
    """The memory type of an array.

    Only frameworks already imported are considered (a framework that is not loaded
    cannot own ``x``), so detection never imports anything. Results are cached per type.

    Parameters
    ----------
    x : array
        An array of a framework of the table (:data:`memtype.frameworks.FRAMEWORKS`),
        built in or registered.

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


def array_nbytes(x: Any) -> int | None:
    """Bytes of data an array of any loaded framework holds (dtype size x element count,
    from its adapter; nothing is copied or synchronised), or ``None`` for a non-array."""
    fw = framework_of(x)
    return None if fw is None else load_adapter(fw.name).nbytes(x)


def _pointer(x: Any) -> int | None:
    return load_adapter(detect_framework(x).name).data_ptr(x)


def shares_memory(a: Any, b: Any) -> bool:
    """Whether two arrays (of any frameworks) start at the same device address.

    Useful to check that a conversion was zero-copy. Arrays whose framework does not expose
    an address (pyclesperanto) never share.
    """
    pa, pb = _pointer(a), _pointer(b)
    if pa is None or pb is None:
        return False
    da = load_adapter(detect_framework(a).name).device_of(a)
    db = load_adapter(detect_framework(b).name).device_of(b)
    return pa == pb and da == db
