"""The group tree of an OME-Zarr plate and its well and plate documents, kept in step.

Creating rows and wells, listing a field in its well (and a well in the plate once it has
a field), renaming a finished field into place, removing, copying and moving groups. Each
read-modify-write of a document holds a file lock: the well's own lock for its image list,
the plate lock only when a well gains its first image or loses its last one; the documents
themselves are built by :mod:`memtype.omezarr.metadata`. Every file operation goes through
:class:`~memtype.omezarr.paths.PlatePaths`, below the plate's root.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from memtype.errors import StoreExistsError, StoreFormatError, StoreNotFoundError
from memtype.omezarr import metadata as _metadata
from memtype.omezarr.metadata import plate_with_wells, well_doc, well_lock_name
from memtype.omezarr.paths import PlatePaths, group_at, remove_at, rename_at
from memtype.storage._atomic import temp_name
from memtype.storage.base import natural_sorted

__all__ = ["ensure_plate", "ensure_groups", "remove", "wells_under", "place_copy", "commit_field",
           "edit_well_images", "update_plate_wells", "resync_wells", "well_images",
           "plate_attributes", "level_path", "level_header"]


def ensure_plate(paths: PlatePaths, name: str, rows: Sequence[str], columns: Sequence[str],
                 fsync: bool) -> None:
    """Create the plate directory and metadata if missing (race-free)."""
    if paths.exists(""):
        return
    os.makedirs(paths.root, exist_ok=True)
    layout = paths.layout
    layout.create_group(paths, "", _metadata.plate_doc(name, rows, columns, layout.version),
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
        paths.layout.create_group(paths, key, None if depth == 1 else well_doc([]),
                                  fsync=fsync)


def remove(paths: PlatePaths, key: str, parts: list[str], fsync: bool) -> None:
    """Remove a field, well or row and update the metadata that listed it."""
    with paths.metadata(key):
        _remove_node(paths, key, parts, fsync)


def _remove_node(paths: PlatePaths, key: str, parts: list[str], fsync: bool) -> None:
    """:func:`remove` without the metadata check."""
    if len(parts) < 3:
        update_plate_wells(paths, [], wells_under(paths, key, len(parts)), fsync)
        paths.remove(key)
        return
    well, field = key.rsplit("/", 1)
    with paths.lock(well_lock_name(well)):
        _, now_empty = edit_well_images(paths, well, None, field, fsync)
        if now_empty:
            update_plate_wells(paths, [], [well], fsync)
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
        resync_wells(paths, wells, fsync)


def well_images(paths: PlatePaths, well: str) -> list[str]:
    """The image paths a well's metadata lists."""
    ome = paths.layout.read_ome(paths, well)
    return [i["path"] for i in ome.get("well", {}).get("images", [])]


def edit_well_images(paths: PlatePaths, well: str, add: str | None, remove: str | None,
                     fsync: bool) -> tuple[bool, bool]:
    """Add and/or remove an image path in a well's list (the caller holds the well lock).

    Returns
    -------
    (was_empty, now_empty) : tuple of bool
        Whether the well listed no image before and after the update.
    """
    images = well_images(paths, well)
    before = list(images)
    if add is not None and add not in images:
        images.append(add)
    if remove is not None and remove in images:
        images.remove(remove)
    if images != before:
        set_well_images(paths, well, images, fsync)
    return not before, not images


def set_well_images(paths: PlatePaths, well: str, images: Iterable[str], fsync: bool) -> None:
    """Replace a well's image list (the caller holds the well lock)."""
    paths.layout.write_ome(paths, well, well_doc(natural_sorted(images)), fsync=fsync)


def update_plate_wells(paths: PlatePaths, add: Iterable[str], remove: Iterable[str],
                       fsync: bool) -> None:
    """Add and remove wells (``"A/1"``) in the plate metadata under the plate lock."""
    add, remove = set(add), set(remove)
    if not add and not remove:
        return
    with paths.lock("plate"):
        ome = paths.layout.read_ome(paths, "")
        plate = ome["plate"]
        wells = {w["path"] for w in plate.get("wells", [])}
        new = (wells | add) - remove
        if new == wells:
            return
        ome["plate"] = plate_with_wells(plate, new, paths.layout.version)
        paths.layout.write_ome(paths, "", ome, fsync=fsync, indent=None)


def commit_field(paths: PlatePaths, tmp: str, key: str, overwrite: bool, fsync: bool) -> None:
    """Rename a finished field directory (``tmp``, a key in the same well) into place; list
    it in its well (and the plate). Renames are relative to the well's open descriptor."""
    well, field = key.rsplit("/", 1)
    trash = None
    with paths.directory(well) as fd:
        with paths.lock(well_lock_name(well)):
            kind = group_at(fd, field, paths.layout.marker)
            if kind:
                if not overwrite:
                    raise StoreExistsError(
                        f"{key!r} already exists; pass overwrite=True to replace it.")
                trash = temp_name("", field + ".old")
                rename_at(fd, field, trash)
            elif kind is False:  # a field directory without metadata (an aborted write), a link
                _remove_in(fd, field)
            rename_at(fd, tmp.rsplit("/", 1)[1], field)
            was_empty, _ = edit_well_images(paths, well, field, None, fsync)
            if was_empty:
                update_plate_wells(paths, [well], [], fsync)
        if trash is not None:
            _remove_in(fd, trash)


def _remove_in(fd: int | str, name: str) -> None:
    """Remove entry ``name`` of an open directory (a path without dir_fd)."""
    if isinstance(fd, str):
        remove_at(None, os.path.join(fd, name))
        return
    remove_at(fd, name)


def resync_wells(paths: PlatePaths, wells: list[str], fsync: bool) -> None:
    """Rewrite these wells' image lists from disk, and their entries in the plate."""
    for well in dict.fromkeys(wells):
        if not paths.exists(well):
            update_plate_wells(paths, [], [well], fsync)
            continue
        with paths.lock(well_lock_name(well)):
            fields = paths.children(well)
            set_well_images(paths, well, fields, fsync)
            add, drop = ([well], []) if fields else ([], [well])
            update_plate_wells(paths, add, drop, fsync)


def plate_attributes(paths: PlatePaths) -> dict[str, Any]:
    """The plate's ``plate`` attributes: ``rows``, ``columns``, ``wells``, ``name``."""
    return dict(paths.layout.read_ome(paths, "")["plate"])


def level_path(paths: PlatePaths, key: str, resolution: object) -> str:
    """The path of pyramid level ``resolution`` of the image ``key``; an error if absent."""
    doc = paths.layout.read_ome(paths, key)
    levels = [d["path"] for d in doc["multiscales"][0]["datasets"]]
    if isinstance(resolution, bool) or not isinstance(resolution, int) \
            or not 0 <= resolution < len(levels):
        raise StoreFormatError(
            f"Invalid resolution {resolution!r} for {key!r}: it has levels 0 to "
            f"{len(levels) - 1}.")
    return str(levels[resolution])


def level_header(paths: PlatePaths, key: str) -> tuple[tuple[int, ...], str]:
    """(shape, dtype name) of the full-resolution level of the image ``key``."""
    return paths.layout.array_header(paths, f"{key}/{level_path(paths, key, 0)}")
