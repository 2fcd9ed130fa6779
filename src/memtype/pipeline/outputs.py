"""The output directory of a run: images (OME-Zarr plate or TIFF), CSV tables, finished groups.

Layout::

    OUTPUT/
      plate.zarr/            the last step's images (output_format="zarr"), or
      images/                the last step's images as TIFF files named by the pattern
      <step>.zarr/ | <step>/ images of steps with materialize=True
      <table>.csv            one per side output, rows of every group
      plate_overview.png     the plate at a glance (zarr output; memtype.pipeline.overview)
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

from memtype.errors import InvalidArgumentError, StoreExistsError
from memtype.pipeline.patterns import FilenamePattern, Key, field_sort_key, key_label, split_well
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

    def _disk(self) -> Any:
        """A DiskStore on the output directory."""
        from memtype.storage import DiskStore

        return DiskStore(self.root)

    def image_location(self, step: str, final: bool) -> str:
        """The store path (relative to the root) of a step's images."""
        base = ("plate" if self.image_format == "zarr" else "images") if final else step
        return base + ".zarr" if self.image_format == "zarr" else base

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
        if os.path.isdir(self.root) and os.listdir(self.root):
            if overwrite_foreign or (overwrite and self.written_by_memtype()):
                self._disk().delete_all("")
            elif overwrite:
                raise StoreExistsError(
                    f"Output {self.root!r} holds files memtype did not write (no "
                    f"{_STATE}/done inside); overwrite=True (--overwrite) replaces only an "
                    "earlier run's output. Choose another directory, or pass "
                    "overwrite_foreign=True (--overwrite-foreign) to delete everything in it.")
            elif not resume:
                raise StoreExistsError(
                    f"Output {self.root!r} already exists; pass resume=True (--resume) to "
                    "finish it, or overwrite=True (--overwrite) to replace it.")
            elif not self.written_by_memtype():
                raise StoreExistsError(
                    f"Output {self.root!r} holds no earlier run to resume (no {_STATE}/done "
                    "inside) and files memtype did not write; choose another directory.")
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
        counts: tuple[str, dict[str, float]] | None = None
        if disk.is_dir(tables_dir):
            labels = {group_file_label(k) for k in keys}
            for name in disk.list_dir(tables_dir):
                rows = []
                for part in disk.list_files(f"{tables_dir}/{name}", extensions=".csv"):
                    if os.path.basename(part)[:-4] in labels:
                        rows.extend(parse_table(disk.load(part)))
                disk.save(rows_to_table(rows), f"{name}.csv", overwrite=True)
                outputs[name] = disk.path_of(f"{name}.csv")
                counts = counts or _rows_per_well(name, rows)
                if self.image_format == "zarr" and "images" in outputs:
                    _write_zarr_tables(outputs["images"], self.pattern, name, rows)
        if self.image_format == "zarr" and "images" in outputs:
            outputs["overview"] = self._overview(outputs["images"], counts)
        return outputs

    def _overview(self, plate: str, counts: tuple[str, dict[str, float]] | None) -> str:
        """Write ``plate_overview.png`` (see :mod:`memtype.pipeline.overview`)."""
        from memtype.pipeline.overview import write_overview

        name, values = counts if counts else ("", None)
        return write_overview(plate, os.path.join(self.root, "plate_overview.png"), values,
                              name)

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
                _write_zarr(os.path.join(self.root, location), self.rows, self.columns,
                            FilenamePattern(self.pattern).fields, items,
                            self.pyramid_levels if final else 1, done, self.ome_version,
                            self.pixel_size, self.pixel_unit, dict(self.channel_names),
                            self._voxel_micrometres())
            else:
                _write_tiff(self._disk(), location, FilenamePattern(self.pattern), items, done)
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
            _write_zarr_labels(os.path.join(self.root, location),
                               FilenamePattern(self.pattern).fields, labels, self.ome_version,
                               self._voxel_micrometres())

    def _voxel_micrometres(self) -> tuple[float, float, float]:
        """The size of a voxel (z, y, x) in micrometres (1 a pixel where no size is set)."""
        if self.pixel_size is None:
            return (1.0, 1.0, 1.0)
        factor = _MICROMETRES[self.pixel_unit]
        z, y, x = self.pixel_size
        return (z * factor, y * factor, x * factor)

    def discard_images(self, written: Sequence[tuple[str, str]]) -> None:
        """Remove images a group wrote before it failed: a plate lists only the wells of
        finished groups (a well left empty leaves the plate's metadata too)."""
        from memtype.storage import ZarrStore

        disk = self._disk()
        for location, path in reversed(written):
            if self.image_format == "zarr":
                plate = ZarrStore(os.path.join(self.root, location),
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
                items: Sequence[Item], written: list[str]) -> None:
    """One TIFF file per slice, named by the pattern (each appended to ``written`` first)."""
    arrays: list[np.ndarray[Any, Any]] = []
    paths: list[str] = []
    for keys, stack in items:
        for key, plane in zip(keys, stack, strict=True):
            arrays.append(plane)
            paths.append(f"{directory}/{pattern.format(**dict(key))}")
    written.extend(paths)
    disk.save_batch(arrays, paths, overwrite=True, parents=True)


# pattern field -> OME-Zarr role; fields not named here cannot go into a plate
_SITE = ("site", "field", "s", "fov")
_AXES = {"t": ("t", "time", "timepoint"), "c": ("channel", "c", "w", "wavelength"),
         "z": ("z", "z_index", "plane")}


def zarr_roles(fields: Sequence[str]) -> dict[str, str]:
    """Which pattern field plays which plate role (``well``, ``site``, ``t``, ``c``, ``z``).

    Raises
    ------
    ValueError
        The pattern has no ``well`` field, or a field with no place in an OME-Zarr plate.
    """
    roles: dict[str, str] = {}
    for name in fields:
        if name == "well":
            roles[name] = "well"
        elif name in _SITE:
            roles[name] = "site"
        else:
            axis = next((a for a, names in _AXES.items() if name in names), None)
            if axis is None:
                raise InvalidArgumentError(
                    f"The pattern field {name!r} has no place in an OME-Zarr plate (fields "
                    "there: well, site, channel, z, t); use output_format='tiff'.")
            roles[name] = axis
    if "well" not in roles:
        raise InvalidArgumentError("An OME-Zarr plate output needs a {well} field in the pattern; "
                         "use output_format='tiff'.")
    return roles


def _rows_per_well(name: str,
                   rows: Sequence[dict[str, Any]]) -> tuple[str, dict[str, float]] | None:
    """(what, one number per plate well ``"B/3"``) of a table with a well column, or None:
    the sum of its ``count`` column over the well's sites (of the first channel where there
    is a channel column), else how many rows the well has (its objects)."""
    if not rows or any("well" not in row for row in rows):
        return None
    channel = rows[0].get("channel")
    use_count = all(_number(row.get("count")) is not None for row in rows)
    values: dict[str, float] = {}
    for row in rows:
        if use_count and row.get("channel") != channel:
            continue
        row_name, column = split_well(str(row["well"]))
        well = f"{row_name}/{column}"
        values[well] = values.get(well, 0.0) + (_number(row["count"]) or 0.0 if use_count
                                                else 1.0)
    if use_count:
        return f"{name}: count" + (f", channel {channel}" if channel is not None else ""), values
    return f"{name}: rows per well", values


def _number(value: Any) -> float | None:
    """``value`` as a float (CSV cells are text), or None."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _write_zarr_tables(plate_path: str, pattern: str, name: str,
                       rows: Sequence[dict[str, Any]]) -> None:
    """Write a side-output table into the plate, each field's rows in ``<field>/tables/
    <name>`` (the Fractal table specification, see :mod:`memtype.storage._tables`): a
    feature table of the field's label image named ``name`` (else its only one) when the
    rows have a ``label`` column; rows without a field in the plate stay in the CSV only."""
    from memtype.storage import ZarrStore
    from memtype.storage._tables import write_table

    fields = FilenamePattern(pattern).fields
    site_field = next((f for f, r in zarr_roles(fields).items() if r == "site"), None)
    by_field: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        if "well" in row:
            site = str(row.get(site_field, "")) if site_field else "0"
            by_field.setdefault((str(row["well"]), site), []).append(row)
    plate = ZarrStore(plate_path, read_only=True)
    for (well, site), part in by_field.items():
        path = plate.field_path(*split_well(well), site)
        if not plate.exists(path):
            continue
        labels = plate.list_labels(path)
        region = name if name in labels else (labels[0] if len(labels) == 1 else None)
        write_table(os.path.join(plate_path, path), name, part, region=region, keys=fields)


def _write_zarr_labels(path: str, fields: Sequence[str], labels: dict[str, Sequence[Item]],
                       ome_version: str,
                       voxel: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> None:
    """Save label stacks as OME-Zarr labels of the plate's fields (one channel each), each
    with its masking ROI table ``<name>_ROI_table`` (the objects' bounding boxes, ``voxel``
    the size of a voxel (z, y, x) in micrometres)."""
    from memtype.storage import ZarrStore

    roles = zarr_roles(fields)
    site_field = next((f for f, r in roles.items() if r == "site"), None)
    plate = ZarrStore(path, ome_version=ome_version)
    for name, items in labels.items():
        by_field: dict[tuple[str, str], list[tuple[dict[str, Any], np.ndarray[Any, Any]]]] = {}
        for keys, stack in items:
            for key, plane in zip(keys, stack, strict=True):
                values = dict(key)
                site = str(values[site_field]) if site_field else "0"
                by_field.setdefault((str(values["well"]), site), []).append((values, plane))
        for (well, site), planes in by_field.items():
            image, axes, _ = _field_image(planes, roles)
            if image.shape[axes.index("c")] != 1:
                raise InvalidArgumentError(
                    f"The labels {name!r} of well {well} hold {image.shape[axes.index('c')]} "
                    "channels; a label image has one (label one channel, or give the labels "
                    "step group_by='channel' with one channel's function).")
            row, column = split_well(well)
            field_path = plate.field_path(row, column, site)
            label_image = np.take(image, 0, axis=axes.index("c"))
            plate.save_labels(label_image, field_path, name, overwrite=True)
            _write_object_rois(os.path.join(path, field_path), name, label_image, voxel)


def _rank(values: Sequence[Any]) -> dict[Any, int]:
    """Each distinct value's position in natural order."""
    return {v: i for i, v in enumerate(sorted(set(values), key=field_sort_key))}


def _value(values: dict[str, Any], name: str | None) -> Any:
    """A field's value, or None for an axis the pattern does not have."""
    return None if name is None else values[name]


def _field_image(planes: list[tuple[dict[str, Any], np.ndarray[Any, Any]]],
                 roles: dict[str, str], known: dict[str, str] | None = None,
                 ) -> tuple[np.ndarray[Any, Any], str, list[str] | None]:
    """One field's planes as a ``[T] C Z Y X`` array (missing planes are zero), its axes,
    and its channel names if it has a channel field: the ``known`` name of the value, else
    ``"channel 2"`` (the pattern field and its value)."""
    by_axis = {axis: next((f for f, r in roles.items() if r == axis), None) for axis in "tcz"}
    axes = ("t" if by_axis["t"] else "") + "czyx"
    ranks = {a: _rank([p[f] for p, _ in planes]) if f else {None: 0} for a, f in by_axis.items()}
    shape = tuple(len(ranks[a]) for a in axes[:-2]) + planes[0][1].shape
    out = np.zeros(shape, planes[0][1].dtype)
    for values, plane in planes:
        index = tuple(ranks[a][_value(values, by_axis[a])] for a in axes[:-2])
        out[index] = plane
    channel = by_axis["c"]
    known = known or {}
    names = None if channel is None else [known.get(str(v), f"{channel} {v}") for v in ranks["c"]]
    return out, axes, names


def _write_zarr(path: str, rows: Sequence[str], columns: Sequence[str], fields: Sequence[str],
                items: Sequence[Item], pyramid_levels: int = 1,
                written: list[str] | None = None, ome_version: str = "0.5",
                pixel_size: tuple[float, float, float] | None = None,
                pixel_unit: str = "micrometer",
                channel_names: dict[str, str] | None = None,
                voxel: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> None:
    """Write a group's stacks into an OME-Zarr plate (of ``ome_version``), one complete
    image per field, with up to ``pyramid_levels`` resolution levels (fewer where the image
    is too small), the physical ``pixel_size`` (z, y, x) if given and the names of the
    channels ``channel_names`` has (by channel value), and its ROI tables (``voxel``: the
    size of a voxel in micrometres); each field saved is appended to ``written``."""
    from memtype.storage import ZarrStore

    roles = zarr_roles(fields)
    site_field = next((f for f, r in roles.items() if r == "site"), None)
    by_field: dict[tuple[str, str], list[tuple[dict[str, Any], np.ndarray[Any, Any]]]] = {}
    for keys, stack in items:
        for key, plane in zip(keys, stack, strict=True):
            values = dict(key)
            site = str(values[site_field]) if site_field else "0"
            by_field.setdefault((str(values["well"]), site), []).append((values, plane))
    plate = ZarrStore(path, rows=rows, columns=columns, ome_version=ome_version)
    for (well, site), planes in by_field.items():
        row, column = split_well(well)
        image, axes, names = _field_image(planes, roles, channel_names)
        levels = min(pyramid_levels, int(min(image.shape[-2:])).bit_length())
        field_path = plate.field_path(row, column, site)
        scale = None if pixel_size is None else [1.0] * (len(axes) - 3) + list(pixel_size)
        plate.save(image, field_path, axes=axes, overwrite=True, parents=True,
                   pyramid_levels=max(levels, 1), channel_names=names, scale=scale,
                   unit=None if pixel_size is None else pixel_unit)
        _write_field_rois(os.path.join(path, field_path), site, image.shape[-3:], voxel)
        if written is not None:
            written.append(field_path)


FIELD_ROI_TABLES = ("FOV_ROI_table", "well_ROI_table")
"""The ROI tables of every field: each holds one row, the whole image (memtype writes one
image per field of view), named ``FOV_<site>`` and ``well_1`` as Fractal names them."""
_PREFIXES = {"atto": 1e-18, "femto": 1e-15, "pico": 1e-12, "nano": 1e-9, "micro": 1e-6,
             "milli": 1e-3, "centi": 1e-2, "deci": 1e-1, "": 1.0, "hecto": 1e2, "kilo": 1e3,
             "mega": 1e6, "giga": 1e9, "tera": 1e12, "peta": 1e15, "exa": 1e18,
             "yocto": 1e-24, "zepto": 1e-21, "zetta": 1e21, "yotta": 1e24}
_MICROMETRES = {**{f"{p}meter": f / 1e-6 for p, f in _PREFIXES.items()},
                "angstrom": 1e-4, "inch": 25_400.0, "foot": 304_800.0, "yard": 914_400.0,
                "mile": 1_609_344_000.0, "parsec": 3.0856775814913673e22}
"""Micrometres in one of each OME-NGFF space unit."""


def _write_field_rois(field: str, site: str, zyx: tuple[int, ...],
                      voxel: tuple[float, float, float]) -> None:
    """A field's ``FOV_ROI_table`` and ``well_ROI_table``: one box, the whole image."""
    from memtype.storage._tables import write_roi_table

    (z, y, x), (dz, dy, dx) = zyx, voxel
    box = np.array([[0.0, 0.0, 0.0, x * dx, y * dy, z * dz]])
    for name, index in zip(FIELD_ROI_TABLES, (f"FOV_{site}", "well_1"), strict=True):
        write_roi_table(field, name, [index], box)


def _write_object_rois(field: str, name: str, labels: np.ndarray[Any, Any],
                       voxel: tuple[float, float, float]) -> None:
    """The masking ROI table ``<name>_ROI_table`` of a ``[T] Z Y X`` label image: one row
    per object, its bounding box (over all time points)."""
    from memtype.storage._tables import label_boxes, write_roi_table

    ids, start, stop = label_boxes(labels)
    scale = np.array(voxel[::-1])  # x, y, z
    corner = start[:, ::-1][:, :3] * scale
    size = (stop - start)[:, ::-1][:, :3] * scale
    write_roi_table(field, f"{name}_ROI_table", ids, np.hstack([corner, size]), region=name)
