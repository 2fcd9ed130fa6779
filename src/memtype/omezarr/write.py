"""Writing OME-Zarr images: a field's (or a label image's) arrays, level 0 first, then its
metadata, every file through the plate's :class:`~memtype.omezarr.beneath.BeneathStore`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memtype.omezarr.metadata import shard_shape
from memtype.omezarr.paths import PlatePaths

__all__ = ["write_image", "discard_temporary"]


def write_image(paths: PlatePaths, key: str, levels: Sequence[Any], axes: str,
                doc: dict[str, Any], chunks: tuple[int, ...], codec: str,
                level: int | None, shards: str | Sequence[int] | None = None) -> None:
    """Write a complete field group at the new ``key`` (its arrays, level 0 first, then its
    metadata), every file through the plate's :class:`~memtype.omezarr.beneath.
    BeneathStore`."""
    import zarr  # an optional extra, as the store below (a zarr Store) is

    from memtype.omezarr.beneath import BeneathStore  # a zarr Store: imports zarr

    layout = paths.layout
    options = layout.array_options(axes, codec, level)
    paths.makedirs(key)
    store = BeneathStore(paths, key)
    for k, a in enumerate(levels):
        level_chunks = tuple(min(c, max(s, 1)) for c, s in zip(chunks, a.shape))
        arr = zarr.create_array(
            store=store, name=str(k), shape=a.shape, dtype=a.dtype, chunks=level_chunks,
            shards=shard_shape(shards, a.shape, level_chunks, key),
            fill_value=0, config={"write_empty_chunks": True}, **options)
        arr[...] = a
    layout.write_ome(paths, key, doc, fsync=False)  # zarr made the group: its metadata replaced


def discard_temporary(paths: PlatePaths, tmp: str, error: BaseException) -> None:
    """Remove a half-written field once no chunk write of it is still running; a failure to
    remove it becomes a note on ``error``, which stays the error raised (a full disk, not
    the clean-up's 'directory not empty')."""
    _wait_for_zarr_writes()
    try:
        paths.remove(tmp)
    except OSError as exc:  # kept as a note: the first error is what the caller must see
        error.add_note(f"the partly written {tmp!r} could not be removed ({exc})")


def _wait_for_zarr_writes(timeout_s: float = 60.0) -> None:
    """Wait until every other task on zarr's event loop has finished: when one chunk write
    fails, zarr's ``asyncio.gather`` raises at once and lets the others run on (each in a
    thread of its own), and they would write into a folder being removed, or recreate it."""
    from zarr.core.sync import sync

    sync(_others_finished(timeout_s))


async def _others_finished(timeout_s: float) -> None:
    """Wait (at most ``timeout_s``) for the loop's other tasks."""
    import asyncio

    current = asyncio.current_task()
    others = [t for t in asyncio.all_tasks() if t is not current]
    if others:
        await asyncio.wait(others, timeout=timeout_s)
