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
are in :mod:`memtype.storage.base`. :class:`ZarrStore` is implemented with the OME-Zarr format
it writes, in :mod:`memtype.omezarr` (a layer below storage, which it builds on); storage
names it here and in :data:`BACKENDS` without importing it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memtype._lazy import lazy_loader
from memtype.storage._registry import BACKENDS, get_store_class
from memtype.storage.base import Store, StoreStat, natural_key, natural_sorted, normalize_path

if TYPE_CHECKING:
    from memtype.storage.disk import DiskStore
    from memtype.storage.file_manager import FileManager
    from memtype.storage.memory import MemoryStore
    from memtype.storage.tiered import TieredStats, TieredStore

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

_LAZY: dict[str, str] = {
    "MemoryStore": "memtype.storage.memory",
    "DiskStore": "memtype.storage.disk",
    "ZarrStore": "memtype.omezarr.store",  # the format's own package, a layer below
    "TieredStore": "memtype.storage.tiered",
    "TieredStats": "memtype.storage.tiered",
    "FileManager": "memtype.storage.file_manager",
}

__getattr__ = lazy_loader(globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
