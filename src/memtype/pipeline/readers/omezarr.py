"""The OME-Zarr HCS plate reader: memtype's reader interface over :mod:`memtype.omezarr.read`.

Listing reads the plate's JSON documents only (:class:`~memtype.omezarr.read.PlateDocuments`:
the format, every value checked, every file resolved beneath the plate's root); a group's
planes are read from the full-resolution array, through the same beneath-the-root store,
when it runs.

A well or field the plate's metadata lists that is not there (a plate whose writing stopped)
is named in ``metadata.missing``, not a crash.

Fields: ``site`` is the field's position in its well's list, ``channel``, ``z`` and ``t`` the
plane's index on its axis, each from 1. Where a well's fields belong to several acquisitions
(``well.images[].acquisition``: a plate imaged several times, multiplexing cycles), ``site``
counts within the acquisition and the acquisitions follow one another in ``t`` (in the order
of ``plate.acquisitions``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from memtype import require
from memtype.errors import MemtypeError, StoreFormatError
from memtype.omezarr.read import (
    FieldImage,
    PlateDocuments,
    acquisition_starts,
    channel_names,
    grid_size,
    missing_unit,
    pixel_size,
)
from memtype.pipeline.io.patterns import ImageRecord
from memtype.pipeline.readers.base import PlateMetadata, Reader, record, walk_inside
from memtype.storage.remote import ObjectLocation, is_url, translated

__all__ = ["OmeZarrReader"]


class OmeZarrReader(Reader):
    """An OME-Zarr HCS plate (see the module's description).

    Parameters
    ----------
    root : str or os.PathLike
        The plate's zarr group (``plate.zarr``).
    """

    layout = "ome-zarr"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.location = ObjectLocation.parse(str(root)) if is_url(root) else None
        """Where the plate is when it was given by URL (``s3://``, ``https://``)."""
        if self.location is None:
            super().__init__(root)
            return
        self.root = self.location.url
        self.device = "object"  # not on this machine's disks
        self._reset()
        if remote_detect(self.location) is None:
            raise StoreFormatError(
                f"{self.root!r} is not an OME-Zarr plate (no 'plate' in its zarr.json or "
                ".zattrs); expected the URL of a plate's root group (.../plate.zarr): only "
                "OME-Zarr plates are read from a URL.")

    def _reset(self) -> None:
        super()._reset()
        self._absent: list[str] = []
        self._fields: list[FieldImage] | None = None
        self._arrays: dict[str, tuple[Any, tuple[str, ...]]] = {}
        self._remote: PlateDocuments | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_arrays"] = {}  # open arrays stay with their process
        state["_remote"] = None  # each process opens its own client
        return state

    @classmethod
    def detect(cls, root: str) -> str | None:
        if is_url(root):
            return remote_detect(ObjectLocation.parse(root))
        return PlateDocuments.local(root).detect()

    def _documents(self) -> PlateDocuments:
        """The plate's documents, read beneath its root (or from its URL, each once)."""
        if self.location is None:
            return PlateDocuments.local(self.root)
        if self._remote is None:
            self._remote = RemoteDocuments(self.location)
        return self._remote

    def _images(self) -> list[FieldImage]:
        """Every field the metadata lists (checked); absent ones named in ``self._absent``."""
        if self._fields is None:
            self._fields, self._absent = self._documents().fields()
        return self._fields

    def _list(self, exclude: str | None) -> list[ImageRecord]:
        self._fields = None  # listed afresh
        images = self._images()
        shapes = [dict(zip(f.axes, f.shape, strict=True)) for f in images]
        first_t = acquisition_starts(self._documents(),
                                     [(f.acquisition, s.get("t", 1))
                                      for f, s in zip(images, shapes, strict=True)])
        found: list[ImageRecord] = []
        for image, shape in zip(images, shapes, strict=True):
            start, well = first_t[image.acquisition], f"{image.row}{image.column}"
            for t in range(shape.get("t", 1)):
                for c in range(shape.get("c", 1)):
                    for z in range(shape.get("z", 1)):
                        found.append(record(f"{image.level}#{t}/{c}/{z}", well, image.site,
                                            c + 1, z + 1, start + t))
        return found

    def _nothing_found(self) -> str:
        return "its plate metadata lists no well with a field."

    def _metadata(self) -> PlateMetadata:
        documents = self._documents()
        plate = documents.plate()
        images = self._images()
        names: dict[int, str] = {}
        size: tuple[float, float] | None = None
        step: float | None = None
        notes: list[str] = []
        if images:
            first, where = images[0], documents.name(images[0].file)
            names = channel_names(first)
            size, step = pixel_size(first.attributes, where, first.axes)
            notes += filter(None, [missing_unit(first.attributes, where, first.axes)])
        rows, columns = grid_size(plate)
        return PlateMetadata(self.layout, documents.detect() or "", rows, columns, names, size,
                             step, missing=tuple(self._absent), notes=tuple(notes))

    def _array(self, level: str) -> tuple[Any, tuple[str, ...]]:
        """The full-resolution array ``level`` (opened once) and its axes."""
        if level not in self._arrays:
            require("zarr", "Reading OME-Zarr plates")
            image = next((f for f in self._images() if f.level == level), None)
            if image is None:
                raise StoreFormatError(f"{level!r} is not a level this plate's metadata "
                                       f"lists ({self.root!r}).")
            self._arrays[level] = (self._documents().open_level(level), image.axes)
        return self._arrays[level]

    def load_batch(self, paths: Sequence[str]) -> list[np.ndarray[Any, Any]]:
        out = []
        for path in paths:
            level, _, index = path.partition("#")
            array, axes = self._array(level)
            t, c, z = (int(i) for i in index.split("/"))
            where = {"t": t, "c": c, "z": z}
            out.append(_read(array, tuple(where.get(a, slice(None)) for a in axes), path,
                             self.root))
        return out

    def nbytes(self) -> int | None:
        if self.location is not None:
            return None  # a listing of every object: not made to read a plate by URL
        return sum(os.stat(os.path.join(self.root, p)).st_size for p in walk_inside(self.root))

    def header(self, path: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
        array, _ = self._array(path.partition("#")[0])
        return tuple(array.shape[-2:]), np.dtype(array.dtype)


def _read(array: Any, index: tuple[Any, ...], path: str, root: str) -> np.ndarray[Any, Any]:
    """One plane of a zarr array; a chunk its codecs cannot decode is a StoreFormatError.

    Raises
    ------
    StoreFormatError
        A corrupt or truncated chunk (a ``ValueError``).
    """
    try:
        return np.asarray(array[index])
    except MemtypeError:
        raise  # a chunk linked out of the plate, a read refused: already said
    except (ValueError, RuntimeError, TypeError, EOFError) as exc:  # codecs' complaints
        raise StoreFormatError(f"OME-Zarr plane {path!r} of {root!r} cannot be decoded "
                               f"({type(exc).__name__}: {exc}); the chunk is corrupt or "
                               "truncated.") from exc


class RemoteDocuments(PlateDocuments):
    """A plate's documents at a URL (zarr's ObjectStore over obstore), each fetched once;
    obstore's errors become memtype's (a missing bucket, refused credentials, no network)."""

    def __init__(self, location: ObjectLocation) -> None:
        with translated(location, "open"):
            super().__init__(location.zarr_store(read_only=True), location.url)
        self.location = location
        self._raw: dict[str, bytes | None] = {}

    def raw(self, key: str) -> bytes | None:
        if key not in self._raw:
            with translated(self.location, f"read {key!r} from"):
                self._raw[key] = super().raw(key)
        return self._raw[key]

    def open_level(self, level: str) -> Any:
        with translated(self.location, f"open {level!r} in"):
            return super().open_level(level)

    def stored_chunks(self, level: str) -> int:
        """The chunks stored for a level claiming more than CLAIM_CHECKED planes: one LIST
        of its prefix on S3 (a bound on a claim, never a search); a web server cannot list,
        so there the claim is taken as it is (a run then asks only for the chunks its
        groups need, and a missing one reads as the fill value)."""
        if not self.location.writable:
            return _TRUSTED
        with translated(self.location, f"count the chunks of {level!r} in"):
            return super().stored_chunks(level)


_TRUSTED = 2**62
"""The chunk count that passes any claim (a plate read over HTTP: no listing)."""


def remote_detect(location: ObjectLocation) -> str | None:
    """The document that makes a URL a plate (``zarr.json`` or ``.zattrs``), or None; a
    missing bucket, refused credentials or an unreachable server raise (see
    :func:`~memtype.storage.remote.translated`)."""
    for name in ("zarr.json", ".zattrs"):
        raw = location.get(name)  # raises for a missing bucket, unlike zarr's store
        if raw is not None:
            return RemoteDocuments(location).detect()
    return None
