"""OME-Zarr HCS plates written by others (and by memtype): NGFF 0.4 on zarr v2, 0.5 on zarr v3.

The plate group's attributes (``.zattrs`` in 0.4, ``zarr.json``'s ``attributes.ome`` in 0.5)
hold ``plate``: its ``rows``, ``columns`` and ``wells`` (each a ``path`` such as ``A/1``); each
well group's ``well.images`` lists its fields (``path``), each field an image group whose
``multiscales[0]`` names its ``axes`` and ``datasets`` (the first is the full resolution, with
a ``scale`` transformation) and whose ``omero.channels`` label the channels. Listing reads
these JSON files only; a group's planes are read from the full-resolution array when it runs.

A well or field the plate's metadata lists that is not there (a plate whose writing stopped)
is named in ``metadata.missing``, not a crash.

Fields: ``site`` is the field's position in its well's list, ``channel``, ``z`` and ``t`` the
plane's index on its axis, each from 1. Where a well's fields belong to several acquisitions
(``well.images[].acquisition``: a plate imaged several times, multiplexing cycles), ``site``
counts within the acquisition and the acquisitions follow one another in ``t`` (in the order
of ``plate.acquisitions``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from memtype import require
from memtype.errors import StoreFormatError, StorePathError
from memtype.pipeline.patterns import ImageRecord
from memtype.pipeline.readers.base import PlateMetadata, Reader, record, walk_inside

__all__ = ["OmeZarrReader"]

_UM = {"micrometer": 1.0, "nanometer": 1e-3, "millimeter": 1e3, "meter": 1e6}


def _attributes(directory: str) -> dict[str, Any] | None:
    """A zarr group's OME attributes (0.4's ``.zattrs``, 0.5's ``zarr.json``), or None.

    Raises
    ------
    StoreFormatError
        The metadata file is not JSON (a ``ValueError``).
    """
    for name in ("zarr.json", ".zattrs"):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as fh:
                    data = json.load(fh)
            except (ValueError, UnicodeDecodeError) as exc:
                raise StoreFormatError(f"OME-Zarr metadata {path!r} is not JSON ({exc}).") \
                    from exc
            if name == "zarr.json":
                attrs = data.get("attributes", {})
                return dict(attrs.get("ome", attrs))
            return dict(data)
    return None


def _axes(multiscale: dict[str, Any]) -> list[str]:
    """The axis names of a multiscale (0.3's strings, or 0.4+'s objects)."""
    axes = multiscale.get("axes", ["t", "c", "z", "y", "x"])
    return [a if isinstance(a, str) else str(a.get("name")) for a in axes]


def _shape(array_dir: str) -> tuple[int, ...]:
    """An array's shape from its metadata (``.zarray`` or ``zarr.json``).

    Raises
    ------
    StoreFormatError
        No array metadata there (a ``ValueError``).
    """
    for name in ("zarr.json", ".zarray"):
        path = os.path.join(array_dir, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                return tuple(int(n) for n in json.load(fh)["shape"])
    raise StoreFormatError(f"No zarr array at {array_dir!r}; expected the full-resolution "
                           "level named by the image's multiscales.")


class OmeZarrReader(Reader):
    """An OME-Zarr HCS plate (see the module's description).

    Parameters
    ----------
    root : str or os.PathLike
        The plate's zarr group (``plate.zarr``).
    """

    layout = "ome-zarr"

    def _reset(self) -> None:
        super()._reset()
        self._absent: list[str] = []

    @classmethod
    def detect(cls, root: str) -> str | None:
        attrs = _attributes(root)
        if attrs is not None and "plate" in attrs:
            return "zarr.json" if os.path.isfile(os.path.join(root, "zarr.json")) else ".zattrs"
        return None

    def _plate(self) -> dict[str, Any]:
        """The plate attributes.

        Raises
        ------
        StoreFormatError
            The root is not an OME-Zarr plate (a ``ValueError``).
        """
        attrs = _attributes(self.root) or {}
        if "plate" not in attrs:
            raise StoreFormatError(f"{self.root!r} is not an OME-Zarr plate (no 'plate' in its "
                                   "attributes); expected a plate written by ome-zarr-py, "
                                   "ngff-zarr, iohub or memtype.")
        return dict(attrs["plate"])

    def _inside(self, relative: str) -> str:
        """The real directory of a plate path, refused outside the root.

        Raises
        ------
        StorePathError
            The path leads outside the plate (``..`` or a link; a ``ValueError``).
        """
        real = os.path.realpath(os.path.join(self.root, relative))
        top = os.path.realpath(self.root)
        if real != top and not real.startswith(top + os.sep):
            raise StorePathError(f"OME-Zarr path {relative!r} leads outside {self.root!r}; "
                                 "inputs are read only inside the folder given.")
        return real

    def _images(self) -> list[tuple[str, int, str, list[str], dict[str, Any], Any]]:
        """(well, site, array path, axes, image attributes, acquisition) of every field; a
        field's site counts within its acquisition (``well.images[].acquisition``). A well or
        field the metadata lists that is not there (a plate whose writing stopped, a skipped
        field) is left out and named in ``self._absent``."""
        out = []
        self._absent = []
        for well in self._plate().get("wells", []):
            path = str(well["path"])
            row, column = path.split("/")[-2:]
            attrs = _attributes(self._inside(path))
            if attrs is None:
                self._absent.append(f"{path} (well group absent)")
                continue
            sites: dict[Any, int] = {}
            for image in attrs.get("well", {}).get("images", []):
                acquisition = image.get("acquisition")
                sites[acquisition] = site = sites.get(acquisition, 0) + 1
                field = f"{path}/{image['path']}"
                meta = _attributes(self._inside(field)) or {}
                multiscale = meta.get("multiscales", [{}])[0]
                datasets = multiscale.get("datasets")
                if not datasets:
                    self._absent.append(f"{field} (no image with multiscales)")
                    continue
                level = f"{field}/{datasets[0]['path']}"
                out.append((f"{row}{column}", site, level, _axes(multiscale), meta, acquisition))
        return out

    def _list(self, exclude: str | None) -> list[ImageRecord]:
        images = [(well, site, level, dict(zip(axes, _shape(self._inside(level)),
                                               strict=False)), acquisition)
                  for well, site, level, axes, _, acquisition in self._images()]
        first_t = _acquisition_times(self._plate(), [(a, s.get("t", 1))
                                                     for *_, s, a in images])
        found: list[ImageRecord] = []
        for well, site, level, shape, acquisition in images:
            start = first_t[acquisition]
            for t in range(shape.get("t", 1)):
                for c in range(shape.get("c", 1)):
                    for z in range(shape.get("z", 1)):
                        found.append(record(f"{level}#{t}/{c}/{z}", well, site, c + 1, z + 1,
                                            start + t))
        return found

    def _nothing_found(self) -> str:
        return "its plate metadata lists no well with a field."

    def _metadata(self) -> PlateMetadata:
        plate = self._plate()
        images = self._images()
        names: dict[int, str] = {}
        size: tuple[float, float] | None = None
        step: float | None = None
        if images:
            _, _, _, axes, meta, _ = images[0]
            for i, channel in enumerate(meta.get("omero", {}).get("channels", []), start=1):
                if channel.get("label"):
                    names[i] = str(channel["label"])
            size, step = _scale(meta, axes)
        return PlateMetadata(self.layout, self.detect(self.root) or "",
                             len(plate.get("rows", [])) or None,
                             len(plate.get("columns", [])) or None, names, size, step,
                             missing=tuple(self._absent))

    def load_batch(self, paths: Sequence[str]) -> list[np.ndarray[Any, Any]]:
        zarr = require("zarr", "Reading OME-Zarr plates")
        arrays: dict[str, tuple[Any, list[str]]] = {}
        out = []
        for path in paths:
            level, _, index = path.partition("#")
            if level not in arrays:
                arrays[level] = (zarr.open_array(self._inside(level), mode="r"),
                                 self._level_axes(level))
            array, axes = arrays[level]
            t, c, z = (int(i) for i in index.split("/"))
            where = {"t": t, "c": c, "z": z}
            out.append(_read(array, tuple(where.get(a, slice(None)) for a in axes), path,
                             self.root))
        return out

    def _level_axes(self, level: str) -> list[str]:
        """The axes of the image that holds a resolution level."""
        meta = _attributes(self._inside(level.rsplit("/", 1)[0])) or {}
        return _axes(meta.get("multiscales", [{}])[0])

    def nbytes(self) -> int | None:
        return sum(os.stat(os.path.join(self.root, p)).st_size for p in walk_inside(self.root))

    def header(self, path: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
        zarr = require("zarr", "Reading OME-Zarr plates")
        level = path.partition("#")[0]
        array = zarr.open_array(self._inside(level), mode="r")
        return tuple(array.shape[-2:]), np.dtype(array.dtype)


def _acquisition_times(plate: dict[str, Any], sizes: list[tuple[Any, int]]) -> dict[Any, int]:
    """The first time point of each acquisition: 1 for all where the plate's fields name at
    most one; else the acquisitions follow one another in time, in the order of
    ``plate.acquisitions`` (by ``id``; those it does not list after, by id), each taking as
    many time points as its longest field (NGFF 0.4's acquisitions: a plate imaged several
    times, as Fractal's converters write multiplexing cycles, each field of a cycle at the same
    place as in the others — the same site)."""
    longest: dict[Any, int] = {}
    for acquisition, size in sizes:
        longest[acquisition] = max(longest.get(acquisition, 1), size)
    if len(longest) <= 1:
        return dict.fromkeys(longest, 1)
    listed = [a.get("id") for a in plate.get("acquisitions", []) if isinstance(a, dict)]
    order = sorted(longest, key=lambda a: (a not in listed,
                                           listed.index(a) if a in listed else 0, str(a)))
    first, start = {}, 1
    for acquisition in order:
        first[acquisition], start = start, start + longest[acquisition]
    return first


def _read(array: Any, index: tuple[Any, ...], path: str, root: str) -> np.ndarray[Any, Any]:
    """One plane of a zarr array; a chunk its codecs cannot decode is a StoreFormatError.

    Raises
    ------
    StoreFormatError
        A corrupt or truncated chunk (a ``ValueError``).
    """
    try:
        return np.asarray(array[index])
    except (ValueError, RuntimeError, TypeError, EOFError) as exc:  # codecs' complaints
        raise StoreFormatError(f"OME-Zarr plane {path!r} of {root!r} cannot be decoded "
                               f"({type(exc).__name__}: {exc}); the chunk is corrupt or "
                               "truncated.") from exc


def _scale(meta: dict[str, Any], axes: list[str]) -> tuple[tuple[float, float] | None,
                                                           float | None]:
    """The (y, x) pixel size and the z step in micrometres from the full level's scale: the
    dataset's ``scale`` times the multiscale's own (NGFF 0.4: applied after the datasets';
    iohub's ``Position.set_transform("*", ...)`` and its converters put the voxel size there,
    the datasets' transformation being ``identity``)."""
    multiscale = meta.get("multiscales", [{}])[0]
    scales = [_scale_of(multiscale.get("datasets", [{}])[0]), _scale_of(multiscale)]
    if all(s is None for s in scales) or any(s is not None and len(s) != len(axes)
                                             for s in scales):
        return None, None
    scale = [float(a) * float(b) for a, b in zip(*(s or [1.0] * len(axes) for s in scales),
                                                 strict=True)]
    units = {a if isinstance(a, str) else a.get("name"):
             _UM.get(str(a.get("unit", "micrometer")), 1.0) if isinstance(a, dict) else 1.0
             for a in multiscale.get("axes", [])}
    by = {a: float(s) * units.get(a, 1.0) for a, s in zip(axes, scale, strict=True)}
    size = (by["y"], by["x"]) if "y" in by and "x" in by else None
    return size, by.get("z")


def _scale_of(node: dict[str, Any]) -> list[Any] | None:
    """The ``scale`` among a node's ``coordinateTransformations``, if any."""
    return next((list(t["scale"]) for t in node.get("coordinateTransformations", [])
                 if t.get("type") == "scale" and "scale" in t), None)
