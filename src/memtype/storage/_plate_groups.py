"""The group tree of an OME-Zarr plate: creating rows and wells, removing and moving groups
with the well and plate metadata kept in step (see :mod:`memtype.storage._ome` for the
documents and their locks). Every file operation goes through
:class:`~memtype.storage._plate_paths.PlatePaths`, below the plate's root."""

from __future__ import annotations

import os
from collections.abc import Sequence

from memtype.errors import StoreNotFoundError
from memtype.storage import _ome
from memtype.storage._atomic import temp_name
from memtype.storage._plate_paths import PlatePaths

__all__ = ["ensure_plate", "ensure_groups", "remove", "wells_under", "place_copy"]


def ensure_plate(paths: PlatePaths, name: str, rows: Sequence[str], columns: Sequence[str],
                 fsync: bool) -> None:
    """Create the plate directory and metadata if missing (race-free)."""
    if paths.exists(""):
        return
    os.makedirs(paths.root, exist_ok=True)
    layout = paths.layout
    layout.create_group(paths, "", _ome.plate_doc(name, rows, columns, layout.version),
                        fsync=fsync)


def ensure_groups(paths: PlatePaths, parts: list[str], parents: bool, fsync: bool) -> None:
    """Make sure the row and well groups along ``parts`` exist (the plate does); missing
    ones are created only with ``parents``."""
    for depth in range(1, len(parts) + 1):
        key = "/".join(parts[:depth])
        if paths.exists(key):
            continue
        if not parents:
            raise StoreNotFoundError(
                f"No {('row', 'well')[depth - 1]} at {key!r} in the plate {paths.root!r}; "
                "create it with ensure_directory or pass parents=True."
            )
        paths.layout.create_group(paths, key, None if depth == 1 else _ome.well_doc([]),
                                  fsync=fsync)


def remove(paths: PlatePaths, key: str, parts: list[str], fsync: bool) -> None:
    """Remove a field, well or row and update the metadata that listed it."""
    with paths.metadata(key):
        _remove_node(paths, key, parts, fsync)


def _remove_node(paths: PlatePaths, key: str, parts: list[str], fsync: bool) -> None:
    """:func:`remove` without the metadata check."""
    if len(parts) < 3:
        _ome.update_plate_wells(paths, [], wells_under(paths, key, len(parts)), fsync)
        paths.remove(key)
        return
    well, field = key.rsplit("/", 1)
    with paths.lock(_ome.well_lock_name(well)):
        _, now_empty = _ome.edit_well_images(paths, well, None, field, fsync)
        if now_empty:
            _ome.update_plate_wells(paths, [], [well], fsync)
        paths.remove(key)


def wells_under(paths: PlatePaths, key: str, depth: int) -> list[str]:
    """Well keys under a row (depth 1), of a well (2), or holding a field (3)."""
    if depth == 3:
        return [key.rsplit("/", 1)[0]]
    if depth == 2:
        return [key]
    if depth == 1:
        return [f"{key}/{c}" for c in paths.children(key)]
    return []


def place_copy(paths: PlatePaths, skey: str, sparts: list[str], dkey: str, dparts: list[str],
               move: bool, fsync: bool) -> None:
    """Copy (then, with ``move``, remove) a field, well or row to a free key of its level
    whose parent groups exist, and resync the metadata of every well concerned. Links inside
    the copied group are copied as links (never followed)."""
    before = wells_under(paths, skey, len(sparts))
    parent = dkey.rpartition("/")[0]
    tmp_name = temp_name("", dparts[-1])
    tmp = f"{parent}/{tmp_name}" if parent else tmp_name
    try:
        paths.copy_tree(skey, tmp)
        paths.rename(tmp, dparts[-1])
    finally:
        paths.remove(tmp)  # left only when the copy failed
    if move:
        remove(paths, skey, sparts, fsync)
    wells = (before if move else []) + wells_under(paths, dkey, len(dparts))
    with paths.metadata(dkey):
        _ome.resync_wells(paths, wells, fsync)
