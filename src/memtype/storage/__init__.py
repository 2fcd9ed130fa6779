"""Storage: one :class:`Store` interface over memory, disk, OME-Zarr and a tiered VRAM store.

==============  =========================================================================
name            store
==============  =========================================================================
``"memory"``    :class:`MemoryStore` -- thread-safe, per instance, copies on save
``"disk"``      :class:`DiskStore` -- .npy/.tif/.png/.json/.csv/.txt, atomic writes
``"zarr"``      :class:`ZarrStore` -- an OME-Zarr 0.5 plate (row/column/field), zarr v3
``"tiered"``    :class:`TieredStore` -- arrays on their device, spilled to host then disk
==============  =========================================================================

:class:`FileManager` routes calls to backends by name (``fm.save(x, path, "disk")``).

Backends are registered by name in the read-only table :data:`BACKENDS` (``name ->
"module:Class"``); each backend module is imported the first time it is used, so importing
``memtype.storage`` imports neither zarr, tifffile, pillow nor any array framework.

The rules every store follows (overwrite, missing paths, parents, paths escaping the root)
are in :mod:`memtype.storage.base`.
"""

from __future__ import annotations

import importlib
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from memtype.errors import StoreKeyError
from memtype.storage.base import Store, StoreStat, natural_key, natural_sorted, normalize_path

if TYPE_CHECKING:
    from memtype.storage.disk import DiskStore
    from memtype.storage.file_manager import FileManager
    from memtype.storage.memory import MemoryStore
    from memtype.storage.tiered import TieredStats, TieredStore
    from memtype.storage.zarr_store import ZarrStore

__all__ = [
    "BACKENDS",
    "get_store_class",
    "Store",
    "StoreStat",
    "MemoryStore",
    "DiskStore",
    "ZarrStore",
    "TieredStore",
    "TieredStats",
    "FileManager",
    "natural_key",
    "natural_sorted",
    "normalize_path",
]

BACKENDS: MappingProxyType[str, str] = MappingProxyType({
    "memory": "memtype.storage.memory:MemoryStore",
    "disk": "memtype.storage.disk:DiskStore",
    "zarr": "memtype.storage.zarr_store:ZarrStore",
    "tiered": "memtype.storage.tiered:TieredStore",
})
"""Registered store name -> ``"module:Class"`` (read-only)."""

_LAZY: dict[str, str] = {
    "MemoryStore": "memtype.storage.memory",
    "DiskStore": "memtype.storage.disk",
    "ZarrStore": "memtype.storage.zarr_store",
    "TieredStore": "memtype.storage.tiered",
    "TieredStats": "memtype.storage.tiered",
    "FileManager": "memtype.storage.file_manager",
}


def get_store_class(name: str) -> type[Store]:
    """The store class registered as ``name``, importing its module on first use.

    Parameters
    ----------
    name : str
        A key of :data:`BACKENDS` (``"memory"``, ``"disk"``, ``"zarr"``, ``"tiered"``).

    Raises
    ------
    StoreKeyError
        No store is registered under ``name``.
    """
    target = BACKENDS.get(name) if isinstance(name, str) else None
    if target is None:
        raise StoreKeyError(
            f"Unknown store backend {name!r}. Expected one of: {', '.join(BACKENDS)}."
        )
    module_name, _, attr = target.partition(":")
    cls: type[Store] = getattr(importlib.import_module(module_name), attr)
    return cls


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memtype.storage' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
