"""Where each OME-Zarr version keeps a group's metadata: 0.5 (zarr v3, the default), 0.4 (zarr v2).

A :class:`Layout` knows where a group's metadata lives and how the ``ome`` attributes are
wrapped; everything else (which documents, which locks) is the same for both:

=========  =====================================  ==============================================
version    group metadata                          OME attributes
=========  =====================================  ==============================================
0.5        ``zarr.json`` (``node_type: group``)    ``attributes.ome = {version: "0.5", ...}``
0.4        ``.zgroup`` + ``.zattrs``               ``.zattrs`` itself; ``version: "0.4"`` inside
                                                   ``plate``, ``well``, each multiscale and
                                                   ``image-label``
=========  =====================================  ==============================================

Arrays are zarr v3 (chunk keys ``c/0/0``) or zarr v2 (``.zarray``, chunk keys ``0/0`` with
``dimension_separator: "/"``). 0.4 is what Fiji (MoBIE, n5-zarr), OMERO and most tools read
today; 0.5 what the current specification and napari's reader prefer.
"""

from __future__ import annotations

import posixpath
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from memtype.errors import StoreExistsError, StoreFormatError
from memtype.storage._readers import CorruptFile

__all__ = ["Layout", "BY_VERSION", "OME_VERSIONS", "CODECS", "Files", "layout_for", "detect",
           "check_codec"]

OME_VERSIONS = ("0.5", "0.4")
_VERSIONED = ("plate", "well", "image-label")
"""Attributes that carry their own ``version`` in 0.4 (multiscales too, per multiscale)."""


class Files(Protocol):
    """The file operations a layout reads and writes a group's documents with (a plate's
    :class:`~memtype.omezarr.paths.PlatePaths`)."""

    def is_file(self, key: str) -> bool: ...  # noqa: D102

    def read_json(self, key: str) -> dict[str, Any]: ...  # noqa: D102

    def write_json(self, key: str, doc: dict[str, Any], *, overwrite: bool, fsync: bool,
                   indent: int | None = 2) -> bool: ...  # noqa: D102

    def lock(self, name: str, *, shared: bool = False) -> AbstractContextManager[None]: ...  # noqa: D102


def _join(key: str, name: str) -> str:
    """The key of file ``name`` in group ``key``."""
    return posixpath.join(key, name) if key else name


@dataclass(frozen=True)
class Layout:
    """Where one OME-Zarr version keeps a group's metadata (see the module docstring)."""

    version: str
    zarr_format: Literal[2, 3]
    marker: str
    """The file whose presence makes a directory a group (written last)."""

    # -- reading -----------------------------------------------------------------------------
    def read_ome(self, paths: Files, key: str) -> dict[str, Any]:
        """The OME attributes of the group at ``key`` ({} when it has none)."""
        if self.zarr_format == 3:
            doc = paths.read_json(_join(key, "zarr.json"))
            attributes = doc.get("attributes", {})
            ome = attributes.get("ome", {}) if isinstance(attributes, dict) else None
        else:
            ome = paths.read_json(_join(key, ".zattrs")) \
                if paths.is_file(_join(key, ".zattrs")) else {}
        if not isinstance(ome, dict):
            raise CorruptFile(
                "Metadata with 'attributes' or 'attributes.ome' that is not a JSON object "
                "(tampered); expected objects.")
        return ome

    def array_header(self, paths: Files, key: str) -> tuple[tuple[int, ...], str]:
        """(shape, NumPy dtype name or string) of the array at ``key``, checked."""
        if self.zarr_format == 3:
            doc = paths.read_json(_join(key, "zarr.json"))
            shape, dtype = doc["shape"], doc["data_type"]
        else:
            doc = paths.read_json(_join(key, ".zarray"))
            shape, dtype = doc["shape"], doc["dtype"]
        if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
            raise CorruptFile(f"array 'shape' {shape!r} is not a list of non-negative ints")
        if not isinstance(dtype, str):
            raise CorruptFile(f"array data type {dtype!r} is not a data type name")
        return tuple(shape), dtype

    # -- writing -----------------------------------------------------------------------------
    def versioned(self, ome: dict[str, Any]) -> dict[str, Any]:
        """``ome`` with this version's ``version`` fields (0.4: inside each object)."""
        if self.zarr_format == 3:
            return ome
        out = dict(ome)
        for name in _VERSIONED:
            if isinstance(out.get(name), dict):
                out[name] = {**out[name], "version": self.version}
        if isinstance(out.get("multiscales"), list):
            out["multiscales"] = [{**m, "version": self.version} if isinstance(m, dict) else m
                                  for m in out["multiscales"]]
        return out

    def write_ome(self, paths: Files, key: str, ome: dict[str, Any], *, fsync: bool,
                  indent: int | None = 2) -> None:
        """Replace the OME attributes of the existing group at ``key`` (atomically)."""
        if self.zarr_format == 3:
            paths.write_json(_join(key, "zarr.json"), self._v3(ome), overwrite=True,
                             fsync=fsync, indent=indent)
        else:
            paths.write_json(_join(key, ".zattrs"), self.versioned(ome), overwrite=True,
                             fsync=fsync, indent=indent)

    def create_group(self, paths: Files, key: str, ome: dict[str, Any] | None, *,
                     fsync: bool) -> bool:
        """Create the group at ``key`` with ``ome`` attributes unless it exists (False then).

        0.5: one document, created exclusively. 0.4: ``.zattrs`` then the ``.zgroup``
        marker, under the group's lock (``plate`` for the root, the well's for a well), so a
        group exists only once complete and a concurrent creator never resets its attributes.
        """
        if self.zarr_format == 3:
            return paths.write_json(_join(key, "zarr.json"), self._v3(ome), overwrite=False,
                                    fsync=fsync)
        lock = "plate" if not key else "group." + key.replace("/", ".")
        with paths.lock(lock):
            if paths.is_file(_join(key, ".zgroup")):
                return False
            paths.write_json(_join(key, ".zattrs"), self.versioned(ome or {}), overwrite=True,
                             fsync=fsync)
            try:
                paths.write_json(_join(key, ".zgroup"), {"zarr_format": 2}, overwrite=False,
                                 fsync=fsync)
            except StoreExistsError:  # pragma: no cover - the lock excludes it
                return False
        return True

    def _v3(self, ome: dict[str, Any] | None) -> dict[str, Any]:
        """A zarr v3 group document holding ``ome``."""
        attributes = {"ome": {"version": self.version, **ome}} if ome else {}
        return {"zarr_format": 3, "node_type": "group", "attributes": attributes}

    # -- arrays ------------------------------------------------------------------------------
    def array_options(self, axes: str, codec: str, level: int | None) -> dict[str, Any]:
        """Keyword arguments of ``zarr.create_array`` for this version's arrays."""
        if self.zarr_format == 3:
            return {"compressors": _v3_compressors(codec, level), "dimension_names": tuple(axes),
                    "chunk_key_encoding": {"name": "default", "separator": "/"},
                    "zarr_format": 3}
        return {"compressors": _v2_compressor(codec, level),
                "chunk_key_encoding": {"name": "v2", "separator": "/"}, "zarr_format": 2}


BY_VERSION = {"0.5": Layout("0.5", 3, "zarr.json"), "0.4": Layout("0.4", 2, ".zgroup")}


def layout_for(version: object) -> Layout:
    """The layout of an OME-Zarr version (``"0.5"`` or ``"0.4"``)."""
    if not isinstance(version, str) or version not in BY_VERSION:
        raise StoreFormatError(
            f"Invalid ome_version {version!r}: expected one of {', '.join(OME_VERSIONS)} "
            "(0.5: zarr v3, the default; 0.4: zarr v2, for Fiji, MoBIE and OMERO).")
    return BY_VERSION[version]


def detect(paths: Files) -> Layout | None:
    """The layout of the plate at ``paths`` (None when there is no plate yet)."""
    for layout in BY_VERSION.values():
        if paths.is_file(layout.marker):
            return layout
    return None


CODECS = ("blosc-lz4", "blosc-zstd", "zstd", "none")


def check_codec(codec: str) -> None:
    """StoreFormatError for an unknown codec name."""
    if codec not in CODECS:
        raise StoreFormatError(f"Unknown codec {codec!r}. Expected one of: {', '.join(CODECS)}.")


def _v3_compressors(codec: str, level: int | None) -> Any:
    """zarr v3 compressor codecs for a codec name."""
    from zarr.codecs import BloscCodec, ZstdCodec

    check_codec(codec)
    if codec == "none":
        return None
    if codec == "zstd":
        return (ZstdCodec(level=3 if level is None else level),)
    if codec == "blosc-lz4":
        return (BloscCodec(cname="lz4", clevel=5 if level is None else level, shuffle="shuffle"),)
    return (BloscCodec(cname="zstd", clevel=3 if level is None else level, shuffle="shuffle"),)


def _v2_compressor(codec: str, level: int | None) -> Any:
    """The numcodecs compressor of a zarr v2 array for a codec name."""
    from numcodecs import Blosc, Zstd

    check_codec(codec)
    if codec == "none":
        return None
    if codec == "zstd":
        return Zstd(level=3 if level is None else level)
    cname, default = ("lz4", 5) if codec == "blosc-lz4" else ("zstd", 3)
    return Blosc(cname=cname, clevel=default if level is None else level, shuffle=Blosc.SHUFFLE)
