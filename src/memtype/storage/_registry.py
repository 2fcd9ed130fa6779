"""The registered stores: name -> ``"module:Class"``, imported on first use."""

from __future__ import annotations

import importlib
from types import MappingProxyType

from memtype.errors import StoreKeyError
from memtype.storage.base import Store

__all__ = ["BACKENDS", "get_store_class"]

BACKENDS: MappingProxyType[str, str] = MappingProxyType({
    "memory": "memtype.storage.memory:MemoryStore",
    "disk": "memtype.storage.disk:DiskStore",
    "zarr": "memtype.omezarr.store:ZarrStore",
    "tiered": "memtype.storage.tiered:TieredStore",
})
"""Registered store name -> ``"module:Class"`` (read-only)."""


def get_store_class(name: str) -> type[Store]:
    """The store class registered as ``name``, importing its module on first use.

    Parameters
    ----------
    name : str
        A key of :data:`BACKENDS` (``"memory"``, ``"disk"``, ``"zarr"``, ``"tiered"``).

    Raises
    ------
    StoreKeyError
        No store is registered under ``name`` (``None`` or a number included).
    """
    target = BACKENDS.get(name) if isinstance(name, str) else None
    if target is None:
        raise StoreKeyError(
            f"Unknown store backend {name!r}. Expected one of: {', '.join(BACKENDS)}."
        )
    module_name, _, attr = target.partition(":")
    cls: type[Store] = getattr(importlib.import_module(module_name), attr)
    return cls
