"""A pipeline group's planes as the fields, labels and tables of an OME-Zarr plate.

A run hands over stacks of 2D planes, each plane named by the values of its pattern's
fields (``well``, ``site``, ``channel``, ``z``, ``t``...). :class:`Grid` says which field plays
which role in the plate (:func:`zarr_roles`) and how the run names and orders wells and
values; :func:`by_field` gathers the planes of each field (the one loop both images and
labels go through) and :func:`field_image` stacks one field's planes into a ``[T] C Z Y X``
image. :func:`write_fields`, :func:`write_labels` and :func:`write_tables` then write them,
with the ROI tables Fractal tasks read (``FOV_ROI_table``, ``well_ROI_table``,
``<labels>_ROI_table``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtype.errors import InvalidArgumentError
from memtype.omezarr.layout import layout_for
from memtype.omezarr.metadata import MICROMETRES
from memtype.omezarr.paths import PlatePaths, field_path
from memtype.omezarr.store import ZarrStore
from memtype.omezarr.tables import ImageGroup, label_boxes, write_roi_table, write_table

__all__ = ["Grid", "zarr_roles", "by_field", "field_image", "write_fields", "write_labels",
           "write_tables", "voxel_micrometres", "FIELD_ROI_TABLES"]

Values = Sequence[tuple[str, Any]]
"""A plane's name: (pattern field, value) pairs."""
Item = tuple[Sequence[Values], np.ndarray[Any, Any]]
"""One stack: the name of each slice, and the ``[Z, Y, X]`` host array."""
Plane = tuple[dict[str, Any], np.ndarray[Any, Any]]
FIELD_ROI_TABLES = ("FOV_ROI_table", "well_ROI_table")
"""The ROI tables of every field: each holds one row, the whole image (memtype writes one
image per field of view), named ``FOV_<site>`` and ``well_1`` as Fractal names them."""

# pattern field -> OME-Zarr role; fields not named here cannot go into a plate
_SITE = ("site", "field", "s", "fov")
_AXES = {"t": ("t", "time", "timepoint"), "c": ("channel", "c", "w", "wavelength"),
         "z": ("z", "z_index", "plane")}


def zarr_roles(fields: Sequence[str]) -> dict[str, str]:
    """Which pattern field plays which plate role (``well``, ``site``, ``t``, ``c``, ``z``).

    Raises
    ------
    InvalidArgumentError
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
        raise InvalidArgumentError("An OME-Zarr plate output needs a {well} field in the "
                                   "pattern; use output_format='tiff'.")
    return roles


@dataclass(frozen=True)
class Grid:
    """How a run's plane names map onto a plate.

    Parameters
    ----------
    fields : sequence of str
        The pattern's fields, in order.
    well_position : callable
        A well name's (row, column): ``"B03"`` -> ``("B", 3)``.
    order : callable
        The sort key of a field's values (``A2`` before ``A10``).
    """

    fields: tuple[str, ...]
    well_position: Callable[[str], tuple[str, int]]
    order: Callable[[Any], Any]

    @property
    def roles(self) -> dict[str, str]:
        """Pattern field -> plate role (see :func:`zarr_roles`)."""
        return zarr_roles(self.fields)

    def field_path(self, well: str, site: str) -> str:
        """The plate path of a well's field: ``"B/3/1"``."""
        row, column = self.well_position(well)
        return field_path(row, column, site)


def by_field(items: Sequence[Item], grid: Grid) -> dict[tuple[str, str], list[Plane]]:
    """The planes of each field, ``(well, site)`` -> ``[(values, plane)]`` (site ``"0"``
    where the pattern has none)."""
    site_field = next((f for f, r in grid.roles.items() if r == "site"), None)
    out: dict[tuple[str, str], list[Plane]] = {}
    for keys, stack in items:
        for key, plane in zip(keys, stack, strict=True):
            values = dict(key)
            site = str(values[site_field]) if site_field else "0"
            out.setdefault((str(values["well"]), site), []).append((values, plane))
    return out


def field_image(planes: list[Plane], grid: Grid, known: Mapping[str, str] | None = None,
                ) -> tuple[np.ndarray[Any, Any], str, list[str] | None]:
    """One field's planes as a ``[T] C Z Y X`` array (missing planes are zero), its axes,
    and its channel names if it has a channel field: the ``known`` name of the value, else
    ``"channel 2"`` (the pattern field and its value)."""
    roles = grid.roles
    by_axis = {axis: next((f for f, r in roles.items() if r == axis), None) for axis in "tcz"}
    axes = ("t" if by_axis["t"] else "") + "czyx"
    ranks = {a: _rank([p[f] for p, _ in planes], grid.order) if f else {None: 0}
             for a, f in by_axis.items()}
    shape = tuple(len(ranks[a]) for a in axes[:-2]) + planes[0][1].shape
    out = np.zeros(shape, planes[0][1].dtype)
    for values, plane in planes:
        index = tuple(ranks[a][None if by_axis[a] is None else values[str(by_axis[a])]]
                      for a in axes[:-2])
        out[index] = plane
    channel = by_axis["c"]
    known = known or {}
    names = None if channel is None else [known.get(str(v), f"{channel} {v}") for v in ranks["c"]]
    return out, axes, names


def _rank(values: Sequence[Any], order: Callable[[Any], Any]) -> dict[Any, int]:
    """Each distinct value's position in ``order``."""
    return {v: i for i, v in enumerate(sorted(set(values), key=order))}


def voxel_micrometres(pixel_size: tuple[float, float, float] | None,
                      unit: str) -> tuple[float, float, float] | None:
    """The size of a voxel (z, y, x) in micrometres; None where no size is known."""
    if pixel_size is None:
        return None
    factor = MICROMETRES[unit]
    z, y, x = pixel_size
    return (z * factor, y * factor, x * factor)


def write_fields(path: str, items: Sequence[Item], grid: Grid, *, rows: Sequence[str] = (),
                 columns: Sequence[str] = (), pyramid_levels: int = 1,
                 written: list[str] | None = None, ome_version: str = "0.5",
                 pixel_size: tuple[float, float, float] | None = None,
                 pixel_unit: str = "micrometer",
                 channel_names: Mapping[str, str] | None = None,
                 shards: str | Sequence[int] | None = None) -> None:
    """Write a group's stacks into the OME-Zarr plate at ``path``, one complete image per
    field, with up to ``pyramid_levels`` resolution levels (fewer where the image is too
    small), the physical ``pixel_size`` (z, y, x) in ``pixel_unit`` if known (else no unit
    and unit scales), the names ``channel_names`` gives the channel values, and its ROI
    tables; each field saved is appended to ``written``; ``shards`` as ``ZarrStore``'s."""
    plate = ZarrStore(path, rows=rows, columns=columns, ome_version=ome_version, shards=shards)
    voxel = voxel_micrometres(pixel_size, pixel_unit)
    for (well, site), planes in by_field(items, grid).items():
        image, axes, names = field_image(planes, grid, channel_names)
        levels = min(pyramid_levels, int(min(image.shape[-2:])).bit_length())
        field_path = grid.field_path(well, site)
        scale = None if pixel_size is None else [1.0] * (len(axes) - 3) + list(pixel_size)
        plate.save(image, field_path, axes=axes, overwrite=True, parents=True,
                   pyramid_levels=max(levels, 1), channel_names=names, scale=scale,
                   unit=None if pixel_size is None else pixel_unit)
        _write_field_rois(_image(plate, field_path), site, image.shape[-3:], voxel)
        if written is not None:
            written.append(field_path)


def write_labels(path: str, labels: Mapping[str, Sequence[Item]], grid: Grid,
                 ome_version: str,
                 voxel: tuple[float, float, float] | None = None, *,
                 shards: str | Sequence[int] | None = None) -> None:
    """Save label stacks as OME-Zarr labels of the plate's fields (one channel each), each
    with its masking ROI table ``<name>_ROI_table`` (the objects' bounding boxes, ``voxel``
    the size of a voxel (z, y, x) in micrometres, None: in pixels)."""
    plate = ZarrStore(path, ome_version=ome_version, shards=shards)
    for name, items in labels.items():
        for (well, site), planes in by_field(items, grid).items():
            image, axes, _ = field_image(planes, grid)
            channels = image.shape[axes.index("c")]
            if channels != 1:
                raise InvalidArgumentError(
                    f"The labels {name!r} of well {well} hold {channels} channels; a label "
                    "image has one (label one channel, or give the labels step "
                    "group_by='channel' with one channel's function).")
            field_path = grid.field_path(well, site)
            label_image = np.take(image, 0, axis=axes.index("c"))
            plate.save_labels(label_image, field_path, name, overwrite=True)
            write_object_rois(_image(plate, field_path), name, label_image, voxel)


def write_tables(plate_path: str, grid: Grid, name: str,
                 rows: Sequence[Mapping[str, Any]]) -> None:
    """Write a side-output table into the plate, each field's rows in ``<field>/tables/
    <name>`` (the Fractal table specification, see :mod:`memtype.omezarr.tables`): a
    feature table of the field's label image named ``name`` (else its only one) when the
    rows have a ``label`` column; rows without a field in the plate stay in the CSV only."""
    site_field = next((f for f, r in grid.roles.items() if r == "site"), None)
    parts: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        if "well" in row:
            site = str(row.get(site_field, "")) if site_field else "0"
            parts.setdefault((str(row["well"]), site), []).append(row)
    plate = ZarrStore(plate_path, read_only=True)
    for (well, site), part in parts.items():
        path = grid.field_path(well, site)
        if not plate.exists(path):
            continue
        labels = plate.list_labels(path)
        region = name if name in labels else (labels[0] if len(labels) == 1 else None)
        write_table(_image(plate, path), name, part, region=region, keys=grid.fields)


def _image(plate: ZarrStore, key: str) -> ImageGroup:
    """The image group ``key`` of a plate, its tables' files written below the plate's root."""
    return ImageGroup(PlatePaths(plate.root, plate.follow_symlinks_outside,
                                 layout_for(plate.ome_version)), key)


def _write_field_rois(field: ImageGroup, site: str, zyx: tuple[int, ...],
                      voxel: tuple[float, float, float] | None) -> None:
    """A field's ``FOV_ROI_table`` and ``well_ROI_table``: one box, the whole image."""
    (z, y, x), (dz, dy, dx) = zyx, voxel or (1.0, 1.0, 1.0)
    box = np.array([[0.0, 0.0, 0.0, x * dx, y * dy, z * dz]])
    for name, index in zip(FIELD_ROI_TABLES, (f"FOV_{site}", "well_1"), strict=True):
        write_roi_table(field, name, [index], box)


def write_object_rois(field: str | ImageGroup, name: str, labels: np.ndarray[Any, Any],
                      voxel: tuple[float, float, float] | None) -> None:
    """The masking ROI table ``<name>_ROI_table`` of a ``[T] Z Y X`` label image: one row
    per object, its bounding box (over all time points)."""
    ids, start, stop = label_boxes(labels)
    scale = np.array((voxel or (1.0, 1.0, 1.0))[::-1])  # x, y, z
    corner = start[:, ::-1][:, :3] * scale
    size = (stop - start)[:, ::-1][:, :3] * scale
    write_roi_table(field, f"{name}_ROI_table", ids, np.hstack([corner, size]), region=name)
