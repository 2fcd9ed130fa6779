"""Writing OME-Zarr images: a field's (or a label image's) arrays, level 0 first, then its
metadata, every file through the plate's :class:`~memtype.omezarr.beneath.BeneathStore`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memtype.omezarr.beneath import BeneathStore
from memtype.omezarr.paths import PlatePaths

__all__ = ["write_image"]


def write_image(paths: PlatePaths, key: str, levels: Sequence[Any], axes: str,
                doc: dict[str, Any], chunks: tuple[int, ...], codec: str,
                level: int | None) -> None:
    """Write a complete field group at the new ``key`` (its arrays, level 0 first, then its
    metadata), every file through the plate's :class:`~memtype.omezarr.beneath.
    BeneathStore`."""
    import zarr

    layout = paths.layout
    options = layout.array_options(axes, codec, level)
    paths.makedirs(key)
    store = BeneathStore(paths, key)
    for k, a in enumerate(levels):
        arr = zarr.create_array(
            store=store, name=str(k), shape=a.shape, dtype=a.dtype,
            chunks=tuple(min(c, max(s, 1)) for c, s in zip(chunks, a.shape)),
            fill_value=0, config={"write_empty_chunks": True}, **options)
        arr[...] = a
    layout.write_ome(paths, key, doc, fsync=False)  # zarr made the group: its metadata replaced
