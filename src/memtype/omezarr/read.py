"""Reading OME-Zarr HCS plates written by anyone (0.4 on zarr v2, 0.5 on zarr v3) by their
metadata alone, through any zarr ``Store``.

The plate group's attributes (``.zattrs`` in 0.4, ``zarr.json``'s ``attributes.ome`` in 0.5)
hold ``plate``: its ``rows``, ``columns`` and ``wells`` (each a ``path`` such as ``A/1``); each
well group's ``well.images`` lists its fields (``path``), each field an image group whose
``multiscales[0]`` names its ``axes`` and ``datasets`` (the first is the full resolution, with
a ``scale`` transformation) and whose ``omero.channels`` label the channels.

Every document is fetched by its key from the store (no listing finds a well, a field or a
level), so a plate reads the same from a local folder (:meth:`PlateDocuments.local`:
memtype's :class:`~memtype.omezarr.beneath.BeneathStore`, every key resolved beneath the
plate's root, a link leading out refused) as from any zarr store. Every value is checked
where it is read: a malformed document is a ``StoreFormatError`` naming the file, the key and
the value, and the sizes an array claims are bounded by the chunks stored for it.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from memtype.errors import StoreFormatError, StorePathError
from memtype.omezarr.layout import layout_for
from memtype.omezarr.metadata import DEFAULT_AXES, MICROMETRES
from memtype.omezarr.paths import PlatePaths

__all__ = ["PlateDocuments", "FieldImage", "CLAIM_SLACK", "CLAIM_CHECKED", "axes_of", "pixel_size",
           "acquisition_starts", "channel_names", "grid_size", "missing_unit"]

CLAIM_SLACK = 64
"""How many times more planes than its stored chunks can hold an array may claim (arrays may
leave all-fill-value chunks unwritten) before its shape is refused as not what is there."""
CLAIM_CHECKED = 4096
"""Arrays claiming more planes than this have their stored chunks counted (one listing of
the array); below it a claim costs at most this many listing records per metadata file, and
a listing would cost more than the records (about 50 us a chunk file against 2 us a record)."""
_PART = re.compile(r"[A-Za-z0-9_.-]+")
_MAX_DIMENSIONS = 32


@dataclass(frozen=True)
class FieldImage:
    """One field of a plate, as its metadata describes it (every value checked)."""

    well: str
    """The well's path in the plate, ``"A/1"``."""
    row: str
    column: str
    site: int
    """The field's position in its well's list (within its acquisition), from 1."""
    acquisition: Any
    key: str
    """The image group, ``"A/1/0"``."""
    level: str
    """The full-resolution array, ``"A/1/0/0"``."""
    axes: tuple[str, ...]
    shape: tuple[int, ...]
    attributes: dict[str, Any]
    """The image group's OME attributes (``multiscales``, ``omero``...)."""
    file: str
    """The key of the file that holds them (``"A/1/0/zarr.json"``)."""


class PlateDocuments:
    """The metadata documents of the plate held by a zarr ``store`` (read-only).

    Parameters
    ----------
    store : zarr.abc.store.Store
        The plate's root group.
    where : str
        The plate's name in messages (its path or address).
    """

    def __init__(self, store: Any, where: str) -> None:
        self.store, self.where = store, where

    @classmethod
    def local(cls, root: str) -> PlateDocuments:
        """The plate in the local folder ``root``, every key resolved beneath it."""
        from memtype.omezarr.beneath import BeneathStore  # a zarr Store: zarr is optional

        paths = PlatePaths(root, False, layout_for("0.5"))
        return cls(BeneathStore(paths, "", read_only=True), root)

    # -- documents ---------------------------------------------------------------------------
    def raw(self, key: str) -> bytes | None:
        """The bytes of ``key``, None when absent."""
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync

        buffer = sync(self.store.get(key, prototype=default_buffer_prototype()))
        return None if buffer is None else bytes(buffer.to_bytes())

    def name(self, key: str) -> str:
        """``key`` as messages name it: the plate's path joined with it."""
        return posixpath.join(self.where, key) if key else self.where

    def document(self, key: str) -> dict[str, Any] | None:
        """The JSON object at ``key``; None when absent.

        Raises
        ------
        StoreFormatError
            The file is not JSON, is nested too deep, or is not an object.
        """
        raw = self.raw(key)
        if raw is None:
            return None
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
            raise StoreFormatError(f"OME-Zarr metadata {self.name(key)!r} is not JSON "
                                   f"({type(exc).__name__}: {exc}).") from exc
        if not isinstance(doc, dict):
            raise StoreFormatError(f"OME-Zarr metadata {self.name(key)!r} holds a JSON "
                                   f"{type(doc).__name__}; expected an object.")
        return doc

    def attributes(self, group: str) -> tuple[dict[str, Any], str] | None:
        """(OME attributes, the file they came from) of a group, None when it has none:
        0.5's ``zarr.json`` ``attributes.ome`` (or ``attributes``), else 0.4's ``.zattrs``."""
        key = _join(group, "zarr.json")
        doc = self.document(key)
        if doc is not None:
            attributes = _object(doc.get("attributes", {}), self.name(key), "attributes")
            if "ome" in attributes:
                return _object(attributes["ome"], self.name(key), "attributes.ome"), key
            return attributes, key
        key = _join(group, ".zattrs")
        doc = self.document(key)
        return None if doc is None else (doc, key)

    def detect(self) -> str | None:
        """The file that makes the root a plate (``zarr.json`` or ``.zattrs``), or None."""
        found = self.attributes("")
        return found[1] if found is not None and "plate" in found[0] else None

    def plate(self) -> dict[str, Any]:
        """The ``plate`` attributes.

        Raises
        ------
        StoreFormatError
            The root is not an OME-Zarr plate.
        """
        found = self.attributes("")
        if found is None or "plate" not in found[0]:
            raise StoreFormatError(f"{self.where!r} is not an OME-Zarr plate (no 'plate' in "
                                   "its attributes); expected a plate written by ome-zarr-py, "
                                   "ngff-zarr, iohub or memtype.")
        return _object(found[0]["plate"], self.name(found[1]), "plate")

    # -- the plate's fields ------------------------------------------------------------------
    def fields(self) -> tuple[list[FieldImage], list[str]]:
        """Every field the metadata lists, and what it lists that is not there (a well or
        field group absent, an image without multiscales: a plate whose writing stopped)."""
        found = self.attributes("")
        plate = self.plate()
        where = self.name(found[1] if found else "")
        out: list[FieldImage] = []
        absent: list[str] = []
        for i, well in enumerate(_list(plate.get("wells", []), where, "plate.wells")):
            path = _string(_object(well, where, f"plate.wells[{i}]").get("path"), where,
                           f"plate.wells[{i}].path")
            parts = path.split("/")
            if len(parts) != 2 or not all(_PART.fullmatch(p) for p in parts):
                raise StoreFormatError(
                    f"OME-Zarr metadata {where!r}: plate.wells[{i}].path is {path!r}; expected "
                    "'row/column' (e.g. 'A/1').")
            out += self._well(path, absent)
        return out, absent

    def _well(self, path: str, absent: list[str]) -> Iterator[FieldImage]:
        """The fields of the well at ``path`` (absent ones named in ``absent``)."""
        found = self.attributes(path)
        if found is None:
            absent.append(f"{path} (well group absent)")
            return
        where = self.name(found[1])
        well = _object(found[0].get("well", {}), where, "well")
        sites: dict[Any, int] = {}
        for i, entry in enumerate(_list(well.get("images", []), where, "well.images")):
            image = _object(entry, where, f"well.images[{i}]")
            name = _string(image.get("path"), where, f"well.images[{i}].path")
            if not _PART.fullmatch(name):
                raise StoreFormatError(f"OME-Zarr metadata {where!r}: well.images[{i}].path "
                                       f"is {name!r}; expected one name (e.g. '0').")
            acquisition = image.get("acquisition")
            if not (acquisition is None or type(acquisition) in (int, str)):
                raise StoreFormatError(
                    f"OME-Zarr metadata {where!r}: well.images[{i}].acquisition is "
                    f"{_shown(acquisition)}; expected an acquisition id (an int).")
            sites[acquisition] = site = sites.get(acquisition, 0) + 1
            field = self._field(path, f"{path}/{name}", site, acquisition, absent)
            if field is not None:
                yield field

    def _field(self, well: str, key: str, site: int, acquisition: Any,
               absent: list[str]) -> FieldImage | None:
        """One field image, its full-resolution level's shape checked against its axes."""
        found = self.attributes(key)
        if found is None or "multiscales" not in found[0]:
            absent.append(f"{key} (no image with multiscales)")
            return None
        attributes, file = found
        where = self.name(file)
        multiscales = _list(attributes["multiscales"], where, "multiscales")
        if not multiscales:
            raise StoreFormatError(f"OME-Zarr metadata {where!r}: multiscales is empty; "
                                   "expected one multiscale image (its levels and axes).")
        multiscale = _object(multiscales[0], where, "multiscales[0]")
        datasets = _list(multiscale.get("datasets"), where, "multiscales[0].datasets")
        if not datasets:
            raise StoreFormatError(f"OME-Zarr metadata {where!r}: multiscales[0].datasets is "
                                   "empty; expected the resolution levels, the full one first.")
        level = _string(_object(datasets[0], where, "multiscales[0].datasets[0]").get("path"),
                        where, "multiscales[0].datasets[0].path")
        if not all(_PART.fullmatch(p) for p in level.split("/")):
            raise StorePathError(f"OME-Zarr metadata {where!r}: multiscales[0].datasets[0].path "
                                 f"is {level!r}; expected a path inside the image.")
        shape = self.shape(f"{key}/{level}")
        axes = axes_of(multiscale, where, len(shape))
        row, column = well.split("/")
        return FieldImage(well, row, column, site, acquisition, key, f"{key}/{level}", axes,
                          shape, attributes, file)

    # -- arrays ------------------------------------------------------------------------------
    def header(self, level: str) -> tuple[dict[str, Any], str]:
        """(array metadata, its file) of the array at ``level``.

        Raises
        ------
        StoreFormatError
            No zarr array there.
        """
        for name in ("zarr.json", ".zarray"):
            doc = self.document(_join(level, name))
            if doc is not None:
                return doc, _join(level, name)
        raise StoreFormatError(f"No zarr array at {self.name(level)!r}; expected the "
                               "full-resolution level named by the image's multiscales.")

    def shape(self, level: str) -> tuple[int, ...]:
        """The shape of the array at ``level``, checked and bounded by its stored chunks."""
        doc, file = self.header(level)
        where = self.name(file)
        shape = _list(doc.get("shape"), where, "shape")
        if not 2 <= len(shape) <= _MAX_DIMENSIONS or not all(
                type(s) is int and s >= 0 for s in shape):
            raise StoreFormatError(f"OME-Zarr array {where!r}: 'shape' is {shape!r}; expected "
                                   "2 or more non-negative ints.")
        self._bound(level, doc, where, tuple(shape))
        return tuple(shape)

    def _bound(self, level: str, doc: dict[str, Any], where: str,
               shape: tuple[int, ...]) -> None:
        """StoreFormatError when ``shape`` claims far more planes than the stored chunks
        hold (a few-kB plate claiming millions of planes)."""
        chunks = _chunk_shape(doc, where, len(shape))
        planes = math.prod(shape[:-2])
        if planes <= CLAIM_CHECKED:
            return
        per_chunk = math.prod(min(c, s) for c, s in zip(chunks[:-2], shape[:-2], strict=True))
        stored = self.stored_chunks(level)
        if planes > CLAIM_SLACK * max(stored * per_chunk, 1):
            raise StoreFormatError(
                f"OME-Zarr array {where!r}: 'shape' is {list(shape)} ({planes} planes), but "
                f"{stored} chunk file(s) are stored for it, holding at most "
                f"{stored * per_chunk} planes; the metadata claims more than is there.")

    def stored_chunks(self, level: str) -> int:
        """How many chunk (or shard) files are stored for the array at ``level`` (one
        listing of its prefix)."""
        from zarr.core.sync import sync

        async def count() -> int:
            n = 0
            async for key in self.store.list_prefix(level + "/"):
                name = key.rsplit("/", 1)[-1]
                n += name not in ("zarr.json", ".zarray", ".zattrs")
            return n

        return int(sync(count()))

    def open_level(self, level: str) -> Any:
        """The zarr array at ``level``, read through this plate's store."""
        import zarr

        _, file = self.header(level)
        return zarr.open_array(store=self.store, path=level, mode="r",
                               zarr_format=3 if file.endswith("zarr.json") else 2)


def acquisition_starts(documents: PlateDocuments,
                       sizes: list[tuple[Any, int]]) -> dict[Any, int]:
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
    found = documents.attributes("")
    where = documents.name(found[1] if found else "")
    acquisitions = _list(documents.plate().get("acquisitions", []), where, "plate.acquisitions")
    listed = [a.get("id") for a in acquisitions if isinstance(a, dict)]
    order = sorted(longest, key=lambda a: (a not in listed,
                                           listed.index(a) if a in listed else 0, str(a)))
    first, start = {}, 1
    for acquisition in order:
        first[acquisition], start = start, start + longest[acquisition]
    return first


def channel_names(image: FieldImage) -> dict[int, str]:
    """The channel names an image's ``omero`` block gives, by channel number from 1 (channels
    without a ``label`` left out; a malformed block gives none)."""
    omero = image.attributes.get("omero")
    channels = omero.get("channels") if isinstance(omero, dict) else None
    return {i: str(c["label"]) for i, c in enumerate(channels if isinstance(channels, list)
                                                    else [], 1)
            if isinstance(c, dict) and c.get("label")}


def grid_size(plate: dict[str, Any]) -> tuple[int | None, int | None]:
    """(rows, columns) the plate declares, None where it declares none."""
    rows, columns = plate.get("rows"), plate.get("columns")
    return (len(rows) if isinstance(rows, list) and rows else None,
            len(columns) if isinstance(columns, list) and columns else None)


def axes_of(multiscale: dict[str, Any], where: str, ndim: int) -> tuple[str, ...]:
    """The axis names of a multiscale (0.3's strings, or 0.4+'s objects), one per dimension
    of its arrays; without ``axes`` the last ``ndim`` of ``t c z y x``.

    Raises
    ------
    StoreFormatError
        More or fewer axes than the array has dimensions, or an axis without a name.
    """
    if "axes" not in multiscale:
        if ndim not in DEFAULT_AXES:
            raise StoreFormatError(f"OME-Zarr metadata {where!r}: multiscales[0] names no "
                                   f"axes for a {ndim}D array; expected 'axes'.")
        return tuple(DEFAULT_AXES[ndim])
    axes = _list(multiscale["axes"], where, "multiscales[0].axes")
    names = tuple(a if isinstance(a, str) else
                  _string(_object(a, where, f"multiscales[0].axes[{i}]").get("name"), where,
                          f"multiscales[0].axes[{i}].name") for i, a in enumerate(axes))
    if len(names) != ndim or len(set(names)) != ndim or names[-2:] != ("y", "x"):
        raise StoreFormatError(
            f"OME-Zarr metadata {where!r}: multiscales[0].axes are {list(names)} for an array "
            f"of {ndim} dimensions; expected {ndim} distinct names ending with 'y', 'x'.")
    return names


def pixel_size(attributes: dict[str, Any], where: str,
               axes: tuple[str, ...]) -> tuple[tuple[float, float] | None, float | None]:
    """The (y, x) pixel size and the z step in micrometres from the full level's scale: the
    dataset's ``scale`` times the multiscale's own (NGFF 0.4: applied after the datasets';
    iohub puts the voxel size there). (None, None) where the space axes name no unit (a
    size in an unknown unit is no size) or no scale is given.

    Raises
    ------
    StoreFormatError
        A scale that is not a list of positive finite numbers, one per axis.
    """
    multiscale = attributes["multiscales"][0]
    datasets = multiscale["datasets"]
    scales = [_scale_of(datasets[0], where, "multiscales[0].datasets[0]", len(axes)),
              _scale_of(multiscale, where, "multiscales[0]", len(axes))]
    units = _units(multiscale, where)
    if all(s is None for s in scales) or not units:
        return None, None
    by = {a: math.prod(s[i] for s in scales if s is not None) * units.get(a, 1.0)
          for i, a in enumerate(axes)}
    size = (by["y"], by["x"]) if "y" in units and "x" in units else None
    return size, by.get("z") if "z" in units else None


def missing_unit(attributes: dict[str, Any], where: str,
                 axes: tuple[str, ...]) -> str | None:
    """What to say of an image whose ``y``/``x`` axes name no unit (its scale then gives no
    pixel size, see :func:`pixel_size`); None where they name one."""
    units = _units(attributes["multiscales"][0], where)
    if "y" in units and "x" in units or not {"y", "x"} <= set(axes):
        return None
    return (f"{where}: the image's y and x axes name no unit, so it has no pixel size (a "
            "scale in an unknown unit is no size); the output is written without a unit. "
            "Give one with pixel_size= (--pixel-size) if you know it.")


def _units(multiscale: dict[str, Any], where: str) -> dict[str, float]:
    """Micrometres per unit of each axis that names a known space unit."""
    out: dict[str, float] = {}
    for i, axis in enumerate(multiscale.get("axes", [])):
        if isinstance(axis, dict) and "unit" in axis and axis.get("type", "space") == "space":
            unit = axis["unit"]
            if unit not in MICROMETRES:
                raise StoreFormatError(
                    f"OME-Zarr metadata {where!r}: multiscales[0].axes[{i}].unit is {unit!r}; "
                    "expected an OME-NGFF space unit such as 'micrometer'.")
            out[str(axis.get("name"))] = MICROMETRES[unit]
    return out


def _scale_of(node: dict[str, Any], where: str, what: str, ndim: int) -> list[float] | None:
    """The ``scale`` among a node's ``coordinateTransformations``, checked, if any."""
    transforms = _list(node.get("coordinateTransformations", []), where,
                       f"{what}.coordinateTransformations")
    for i, transform in enumerate(transforms):
        t = _object(transform, where, f"{what}.coordinateTransformations[{i}]")
        if t.get("type") == "scale" and "scale" in t:
            scale = t["scale"]
            ok = isinstance(scale, list) and len(scale) == ndim and all(
                type(s) in (int, float) and math.isfinite(s) and s > 0 for s in scale)
            if not ok:
                raise StoreFormatError(
                    f"OME-Zarr metadata {where!r}: {what}.coordinateTransformations[{i}].scale "
                    f"is {scale!r}; expected {ndim} positive numbers, one per axis.")
            return [float(s) for s in scale]
    return None


def _chunk_shape(doc: dict[str, Any], where: str, ndim: int) -> tuple[int, ...]:
    """The chunk (or shard) shape of an array's metadata (zarr v2 or v3), checked."""
    if doc.get("zarr_format") == 3:
        grid = _object(doc.get("chunk_grid"), where, "chunk_grid")
        chunks = _object(grid.get("configuration"), where, "chunk_grid.configuration") \
            .get("chunk_shape")
    else:
        chunks = doc.get("chunks")
    if not isinstance(chunks, list) or len(chunks) != ndim or not all(
            type(c) is int and c > 0 for c in chunks):
        raise StoreFormatError(f"OME-Zarr array {where!r}: the chunk shape is {chunks!r}; "
                               f"expected {ndim} positive ints.")
    return tuple(chunks)


def _object(value: Any, where: str, key: str) -> dict[str, Any]:
    """``value`` if it is a JSON object, else StoreFormatError naming the file and key."""
    if not isinstance(value, dict):
        raise StoreFormatError(f"OME-Zarr metadata {where!r}: {key} is {_shown(value)}; "
                               "expected an object.")
    return value


def _list(value: Any, where: str, key: str) -> list[Any]:
    """``value`` if it is a JSON array, else StoreFormatError naming the file and key."""
    if not isinstance(value, list):
        raise StoreFormatError(f"OME-Zarr metadata {where!r}: {key} is {_shown(value)}; "
                               "expected a list.")
    return value


def _string(value: Any, where: str, key: str) -> str:
    """``value`` if it is a non-empty string, else StoreFormatError naming the file and key."""
    if not isinstance(value, str) or not value:
        what = "missing" if value is None else _shown(value)
        raise StoreFormatError(f"OME-Zarr metadata {where!r}: {key} is {what}; expected a "
                               "non-empty string.")
    return value


def _shown(value: Any) -> str:
    """A value for a message, cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _join(key: str, name: str) -> str:
    """The key of file ``name`` in group ``key``."""
    return f"{key}/{name}" if key else name
