"""The output directory of a run: images (OME-Zarr plate or TIFF), CSV tables, finished groups.

Layout::

    OUTPUT/
      plate.zarr/            the last step's images (output_format="zarr"), or
      images/                the last step's images as TIFF files named by the pattern
      <step>.zarr/ | <step>/ images of steps with materialize=True
      <table>.csv            one per side output, rows of every group
      .memtype/done/<group>.json         written last for each finished group (resume)
      .memtype/tables/<table>/<group>.csv  each group's part of each table

Workers write their own group's files only, so groups run in parallel (threads, processes,
dask workers on other machines sharing the directory) without coordination.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtype.errors import StoreExistsError
from memtype.pipeline.patterns import FilenamePattern, Key, key_label
from memtype.pipeline.tables import parse_table, rows_to_table

__all__ = ["OutputSpec", "group_file_label"]

_STATE = ".memtype"
Item = tuple[list[Key], np.ndarray[Any, Any]]
"""One stack to write: the full key of each slice, and the ``[Z, Y, X]`` host array."""


def group_file_label(key: Key) -> str:
    """A file-name-safe label of a group: ``A01``, ``A01-s2``, ``all``."""
    if not key:
        return "all"
    parts = [str(v) if k == "well" else f"{k}{v}" for k, v in key]
    return "-".join(p.replace("/", "_") for p in parts)


@dataclass(frozen=True)
class OutputSpec:
    """Where and how a run writes (pickled to every worker)."""

    root: str
    image_format: str
    pattern: str

    def _disk(self) -> Any:
        """A DiskStore on the output directory."""
        from memtype.storage import DiskStore

        return DiskStore(self.root)

    def image_location(self, step: str, final: bool) -> str:
        """The store path (relative to the root) of a step's images."""
        base = ("plate" if self.image_format == "zarr" else "images") if final else step
        return base + ".zarr" if self.image_format == "zarr" else base

    # -- driver side -----------------------------------------------------------------
    def prepare(self, *, resume: bool, overwrite: bool) -> None:
        """Apply the existing-output rule: refuse, keep (resume) or empty it (overwrite).

        Raises
        ------
        StoreExistsError
            The output exists and is not empty, without ``resume`` or ``overwrite``
            (a ``FileExistsError``).
        """
        if os.path.exists(self.root) and not os.path.isdir(self.root):
            raise StoreExistsError(f"Output {self.root!r} exists and is a file; expected a "
                                   "directory (or a path that does not exist yet).")
        if os.path.isdir(self.root) and os.listdir(self.root):
            if overwrite:
                self._disk().delete_all("")
            elif not resume:
                raise StoreExistsError(
                    f"Output {self.root!r} already exists; pass resume=True (--resume) to "
                    "finish it, or overwrite=True (--overwrite) to replace it.")
        self._disk().ensure_directory(f"{_STATE}/done")

    def is_done(self, key: Key) -> bool:
        """Whether an earlier run finished this group."""
        return os.path.isfile(os.path.join(self.root, _STATE, "done",
                                           group_file_label(key) + ".json"))

    def finish(self, keys: Sequence[Key]) -> dict[str, str]:
        """Merge the groups' table parts into ``<table>.csv``; returns what the output holds."""
        disk = self._disk()
        outputs: dict[str, str] = {}
        for location in (self.image_location("", True),):
            if disk.exists(location):
                outputs["images"] = disk.path_of(location)
        tables_dir = f"{_STATE}/tables"
        if not disk.is_dir(tables_dir):
            return outputs
        labels = {group_file_label(k) for k in keys}
        for name in disk.list_dir(tables_dir):
            rows = []
            for part in disk.list_files(f"{tables_dir}/{name}", extensions=".csv"):
                if os.path.basename(part)[:-4] in labels:
                    rows.extend(parse_table(disk.load(part)))
            disk.save(rows_to_table(rows), f"{name}.csv", overwrite=True)
            outputs[name] = disk.path_of(f"{name}.csv")
        return outputs

    # -- worker side -----------------------------------------------------------------
    def write_images(self, step: str, final: bool, items: Sequence[Item], group: Key) -> None:
        """Write one group's stacks of one step."""
        location = self.image_location(step, final)
        if self.image_format == "zarr":
            _write_zarr(os.path.join(self.root, location), items)
        else:
            _write_tiff(self._disk(), location, FilenamePattern(self.pattern), items)

    def write_tables(self, group: Key, tables: dict[str, list[dict[str, Any]]]) -> None:
        """Write one group's part of every side-output table."""
        disk = self._disk()
        for name, rows in tables.items():
            path = f"{_STATE}/tables/{name}/{group_file_label(group)}.csv"
            disk.save(rows_to_table(rows), path, overwrite=True, parents=True)

    def mark_done(self, group: Key, steps: Sequence[str]) -> None:
        """Record that a group is completely written (the last write of a group)."""
        record = {"group": key_label(group), "steps": list(steps)}
        self._disk().save(record, f"{_STATE}/done/{group_file_label(group)}.json",
                          overwrite=True, parents=True)


def _write_tiff(disk: Any, directory: str, pattern: FilenamePattern,
                items: Sequence[Item]) -> None:
    """One TIFF file per slice, named by the pattern."""
    arrays: list[np.ndarray[Any, Any]] = []
    paths: list[str] = []
    for keys, stack in items:
        for key, plane in zip(keys, stack, strict=True):
            arrays.append(plane)
            paths.append(f"{directory}/{pattern.format(**dict(key))}")
    disk.save_batch(arrays, paths, overwrite=True, parents=True)


def _write_zarr(path: str, items: Sequence[Item]) -> None:
    """Write stacks into an OME-Zarr plate."""
    raise NotImplementedError("pending ZarrStore")
