"""The output directory of a run: images (OME-Zarr plate or TIFF), CSV tables, finished groups.

Layout::

    OUTPUT/
      plate.zarr/            the last step's images (output_format="zarr"), or
      images/                the last step's images as TIFF files named by the pattern
      <step>.zarr/ | <step>/ images of steps with materialize=True
      <table>.csv            one per side output, rows of every group
      plate_overview.png     the plate at a glance (zarr output; memtype.pipeline.io.overview)
      .memtype/done/<group>.json         written last for each finished group (resume)
      .memtype/tables/<table>/<group>.csv  each group's part of each table

Workers write their own group's files only, so groups run in parallel (threads, processes,
dask workers on other machines sharing the directory) without coordination.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtype import storage  # DiskStore: loaded on first use (storage's lazy names)
from memtype.errors import InvalidArgumentError, StoreExistsError, StorePathError
from memtype.omezarr import assemble
from memtype.omezarr.assemble import FIELD_ROI_TABLES, zarr_roles
from memtype.omezarr.store import ZarrStore
from memtype.pipeline.execution.failures import failed_wells
from memtype.pipeline.io.overview import well_values, write_overview
from memtype.pipeline.io.patterns import FilenamePattern, Key, field_sort_key, key_label, split_well
from memtype.pipeline.io.tables import parse_table, rows_to_table

__all__ = ["OutputSpec", "group_file_label", "FIELD_ROI_TABLES", "zarr_roles"]

_STATE = ".memtype"
Item = assemble.Item
"""One stack to write: the full key of each slice, and the ``[Z, Y, X]`` host array."""


def group_file_label(key: Key) -> str:
    """A file-name-safe label of a group: ``A01``, ``A01-s2``, ``all``; one path component.

    Raises
    ------
    InvalidArgumentError
        The label would be ``"."`` or ``".."`` (a well named ``..`` by a text pattern field):
        as a folder name it would leave the output.
    """
    if not key:
        return "all"
    parts = [str(v) if k == "well" else f"{k}{v}" for k, v in key]
    label = "-".join(p.replace("/", "_").replace("\\", "_").replace("\0", "_") for p in parts)
    if label in ("", ".", ".."):
        raise InvalidArgumentError(
            f"The group {dict(key)} cannot name a file in the output: its label would be "
            f"{label!r}; expected field values other than '.' and '..'.")
    return label



def empties_existing_output(root: str, resume: bool, overwrite: bool, overwrite_foreign: bool,
                            ours: Callable[[], bool], things: str = "files",
                            place: str = "directory",
                            record: str = f"{_STATE}/done") -> bool:
    """The rule for an output that exists and is not empty, on disk and in object storage:
    True to empty it first (``overwrite_foreign``; ``overwrite`` of an output memtype wrote),
    False to go on in it (``resume`` of such an output), else :class:`StoreExistsError`.

    ``ours`` says whether memtype wrote the output (asked only where it matters); ``things``,
    ``place`` and ``record`` name what it holds, what it is and what marks a run of ours.
    """
    if overwrite_foreign or (overwrite and ours()):
        return True
    if overwrite:
        raise StoreExistsError(
            f"Output {root!r} holds {things} memtype did not write (no {record} inside); "
            "WriteOptions(overwrite=True) (--overwrite) replaces only an earlier run's output. "
            f"Choose another {place}, or pass WriteOptions(overwrite_foreign=True) "
            "(--overwrite-foreign) to delete everything in it.")
    if not resume:
        raise StoreExistsError(
            f"Output {root!r} already exists; expected a new or empty {place}. Pass "
            "WriteOptions(resume=True) (--resume) to finish it, or "
            "WriteOptions(overwrite=True) (--overwrite) to replace it.")
    if not ours():
        raise StoreExistsError(
            f"Output {root!r} holds no earlier run to resume (no {record} inside) and "
            f"{things} memtype did not write; choose another {place}.")
    return False


@dataclass(frozen=True)
class OutputSpec:
    """Where and how a run writes (pickled to every worker)."""

    root: str
    image_format: str
    pattern: str
    rows: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    pyramid_levels: int = 1
    ome_version: str = "0.5"
    """OME-Zarr version of the plates: ``"0.5"`` (zarr v3) or ``"0.4"`` (zarr v2)."""
    pixel_size: tuple[float, float, float] | None = None
    """Physical size of a voxel (z, y, x) in ``pixel_unit``, written as each field's scale."""
    pixel_unit: str = "micrometer"
    channel_names: tuple[tuple[str, str], ...] = ()
    """(channel value, name) from the input's metadata: the ``omero`` channel names (else
    ``"channel 2"``)."""
    label_steps: tuple[tuple[str, str, bool], ...] = ()
    """(step name, label name, materialized) of the steps whose output is a label image:
    written as OME-Zarr labels of the final plate's fields (see :meth:`write_images`)."""
    overview_column: str | None = None
    """What the overview's heatmap shows (``"area"``, ``"nuclei:area"``; None: its default,
    see :func:`memtype.pipeline.io.overview.well_values`)."""
    shards: str | tuple[int, ...] | None = None
    """zarr v3 sharding of the plates' arrays (OME-Zarr 0.5 only; see ``ZarrStore``):
    ``"image"`` writes each field's level as one shard file."""

    def _disk(self) -> Any:
        """A DiskStore on the output directory."""
        return storage.DiskStore(self.root)

    def image_location(self, step: str, final: bool) -> str:
        """The store path (relative to the root) of a step's images."""
        base = ("plate" if self.image_format == "zarr" else "images") if final else step
        return base + ".zarr" if self.image_format == "zarr" else base

    def _plate_root(self, location: str) -> str:
        """The path of the plate (or of the run's state) at ``location`` in the output.

        Raises
        ------
        StorePathError
            That entry is a symbolic link: a plate's store is rooted at it, so a link planted
            there would be written through, outside the output (a ``ValueError``).
        """
        path = os.path.join(self.root, location)
        if os.path.islink(path):
            raise StorePathError(
                f"Output entry {path!r} is a symbolic link (to {os.readlink(path)!r}); memtype "
                "writes plates and its run state only inside the output, never through a "
                "link. Remove the link or choose another output.")
        return path

    # -- driver side -----------------------------------------------------------------
    def written_by_memtype(self) -> bool:
        """Whether the output directory is one a pipeline run wrote (it has ``.memtype/done``)."""
        return os.path.isdir(os.path.join(self.root, _STATE, "done"))

    def prepare(self, *, resume: bool, overwrite: bool, overwrite_foreign: bool = False) -> None:
        """Apply the existing-output rule: refuse, keep (resume) or empty it (overwrite).

        ``overwrite`` empties only an output memtype wrote; ``overwrite_foreign`` empties
        any directory.

        Raises
        ------
        StoreExistsError
            The output exists and is not empty, without ``resume`` or ``overwrite``; or
            it holds files memtype did not write, with ``resume`` or ``overwrite`` (a
            ``FileExistsError``).
        """
        if os.path.exists(self.root) and not os.path.isdir(self.root):
            raise StoreExistsError(f"Output {self.root!r} exists and is a file; expected a "
                                   "directory (or a path that does not exist yet).")
        if os.path.isdir(self.root) and not overwrite_foreign:
            for name in os.listdir(self.root):  # before .memtype/done is believed
                if name.endswith(".zarr") or name == _STATE:
                    self._plate_root(name)
        if os.path.isdir(self.root) and os.listdir(self.root) and empties_existing_output(
                self.root, resume, overwrite, overwrite_foreign, self.written_by_memtype):
            self._disk().delete_all("")
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
                outputs["images"] = self._plate_root(location) \
                    if self.image_format == "zarr" else disk.path_of(location)
        tables_dir = f"{_STATE}/tables"
        tables: dict[str, list[dict[str, Any]]] = {}
        if disk.is_dir(tables_dir):
            labels = {group_file_label(k) for k in keys}
            for name in disk.list_dir(tables_dir):
                rows = []
                for part in disk.list_files(f"{tables_dir}/{name}", extensions=".csv"):
                    if os.path.basename(part)[:-4] in labels:
                        rows.extend(parse_table(disk.load(part)))
                disk.save(rows_to_table(rows), f"{name}.csv", overwrite=True)
                outputs[name] = disk.path_of(f"{name}.csv")
                tables[name] = rows
                if self.image_format == "zarr" and "images" in outputs:
                    assemble.write_tables(outputs["images"], self._grid(), name, rows)
        if self.image_format == "zarr" and "images" in outputs:
            outputs["overview"] = self._overview(outputs["images"], tables)
        return outputs

    def _overview(self, plate: str, tables: dict[str, list[dict[str, Any]]]) -> str:
        """Write ``plate_overview.png`` (see :mod:`memtype.pipeline.io.overview`): the heatmap
        of ``overview_column``, the failed wells marked."""
        counts = well_values(tables, self.overview_column)
        name, values = counts if counts else ("", None)
        return write_overview(plate, os.path.join(self.root, "plate_overview.png"), values,
                              name, failed_wells(self.root))

    # -- worker side -----------------------------------------------------------------
    def write_images(self, step: str, final: bool, items: Sequence[Item], group: Key,
                     written: list[tuple[str, str]] | None = None) -> None:
        """Write one group's stacks of one step; each image written (or being written) is
        appended to ``written`` as ``(location, path)``, for :meth:`discard_images`.

        A labels step's stacks become OME-Zarr labels of the final plate's fields: staged
        under ``.memtype/labels/<group>/`` until the group's final images are written (a
        field is written whole, so labels go in after it), then saved beside them. A labels
        step that is not materialized writes nothing else."""
        label = next((entry for entry in self.label_steps if entry[0] == step), None)
        if label is not None and self.image_format == "zarr" and not final:
            self._stage_labels(label[1], items, group)
            if not label[2]:
                return
        location = self.image_location(step, final)
        done: list[str] = []
        try:
            if self.image_format == "zarr":
                assemble.write_fields(
                    self._plate_root(location), items, self._grid(), rows=self.rows,
                    columns=self.columns, pyramid_levels=self.pyramid_levels if final else 1,
                    written=done, ome_version=self.ome_version, pixel_size=self.pixel_size,
                    pixel_unit=self.pixel_unit, channel_names=dict(self.channel_names),
                    shards=self.shards)
            else:
                _write_tiff(self._disk(), location, FilenamePattern(self.pattern), items, done,
                            self._tiff_size())
        finally:
            if written is not None:
                written.extend((location, path) for path in done)
        if final and self.image_format == "zarr":
            self._write_labels(location, group, {label[1]: items} if label else {})

    def _stage_labels(self, name: str, items: Sequence[Item], group: Key) -> None:
        """Keep a labels step's stacks until the group's final images are written."""
        disk = self._disk()
        base = f"{_STATE}/labels/{group_file_label(group)}/{name}"
        for i, (keys, stack) in enumerate(items):
            disk.save(stack, f"{base}/{i}.npy", overwrite=True, parents=True)
            disk.save([[list(pair) for pair in key] for key in keys], f"{base}/{i}.json",
                      overwrite=True)

    def _staged_labels(self, group: Key) -> dict[str, list[Item]]:
        """The labels staged for a group, by label name (and their staging removed)."""
        disk = self._disk()
        base = f"{_STATE}/labels/{group_file_label(group)}"
        if not disk.is_dir(base):
            return {}
        out: dict[str, list[Item]] = {}
        for name in disk.list_dir(base):
            items: list[Item] = []
            for path in disk.list_files(f"{base}/{name}", extensions=".npy"):
                keys = [tuple((str(k), v) for k, v in key)
                        for key in disk.load(path[:-4] + ".json")]
                items.append((keys, disk.load(path)))
            out[name] = items
        disk.delete_all(base)
        return out

    def _write_labels(self, location: str, group: Key, final: dict[str, Sequence[Item]]) -> None:
        """Save the group's label images (staged, and the final step's if it is a labels
        step) beside the fields of the plate at ``location``; a name staged wins (the last
        step passed its input on, which is the final image, not its labels)."""
        labels = {**final, **self._staged_labels(group)}
        if labels:
            assemble.write_labels(self._plate_root(location), labels, self._grid(),
                                  self.ome_version,
                                  assemble.voxel_micrometres(self.pixel_size, self.pixel_unit),
                                  shards=self.shards)

    def _tiff_size(self) -> dict[str, Any]:
        """The TIFF options of a plane's pixel size (y, x) and unit (none where unknown)."""
        if self.pixel_size is None:
            return {}
        return {"pixel_size": self.pixel_size[1:], "unit": self.pixel_unit}

    def _grid(self) -> assemble.Grid:
        """How this run's plane names map onto a plate."""
        return assemble.Grid(tuple(FilenamePattern(self.pattern).fields), split_well,
                             field_sort_key)

    def discard_images(self, written: Sequence[tuple[str, str]]) -> None:
        """Remove images a group wrote before it failed: a plate lists only the wells of
        finished groups (a well left empty leaves the plate's metadata too)."""
        disk = self._disk()
        for location, path in reversed(written):
            if self.image_format == "zarr":
                plate = ZarrStore(self._plate_root(location),
                                  ome_version=self.ome_version)
                if plate.exists(path):
                    plate.delete(path)
            elif disk.exists(path):
                disk.delete(path)

    def write_tables(self, group: Key, tables: dict[str, list[dict[str, Any]]]) -> None:
        """Write one group's part of every side-output table."""
        disk = self._disk()
        for name, rows in tables.items():
            path = f"{_STATE}/tables/{name}/{group_file_label(group)}.csv"
            disk.save(rows_to_table(rows), path, overwrite=True, parents=True)

    def spill_dir(self, group: Key) -> str:
        """Where a group's intermediates spill to disk when over their budget."""
        return os.path.join(self.root, _STATE, "spill", group_file_label(group))

    def remove_spill(self, group: Key) -> None:
        """Remove a group's (emptied) spill directory."""
        disk = self._disk()
        path = f"{_STATE}/spill/{group_file_label(group)}"
        if disk.exists(path):
            disk.delete_all(path)

    def mark_done(self, group: Key, steps: Sequence[str]) -> None:
        """Record that a group is completely written (the last write of a group)."""
        record = {"group": key_label(group), "steps": list(steps)}
        self._disk().save(record, f"{_STATE}/done/{group_file_label(group)}.json",
                          overwrite=True, parents=True)


def _write_tiff(disk: Any, directory: str, pattern: FilenamePattern,
                items: Sequence[Item], written: list[str],
                size: dict[str, Any] | None = None) -> None:
    """One TIFF file per slice, named by the pattern (each appended to ``written`` first),
    with the pixel size and unit ``size`` holds (``pixel_size=``, ``unit=``)."""
    arrays: list[np.ndarray[Any, Any]] = []
    paths: list[str] = []
    for keys, stack in items:
        for key, plane in zip(keys, stack, strict=True):
            arrays.append(plane)
            paths.append(f"{directory}/{pattern.format(**dict(key))}")
    written.extend(paths)
    disk.save_batch(arrays, paths, overwrite=True, parents=True, **(size or {}))
