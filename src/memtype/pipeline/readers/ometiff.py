"""OME-TIFF: one file per well or field, or one multi-position file (tifffile series).

Each ``*.ome.tif``/``*.ome.tiff`` file's OME-XML (its first page's description) is read at
listing, never its pixels. A position (a tifffile series, an OME ``<Image>``) is placed on the
plate by the OME ``<Plate>``: ``<Well Row= Column=>`` (from 0) and its ``<WellSample>``s, in
order, as sites. Without a ``<Plate>`` the file name gives the well (``B03_s2.ome.tif``,
``plate_B03.ome.tif``; the site from ``_s<n>``, else each series of the file is a site).
In a multi-file dataset (each file carrying the whole plate's OME-XML) a file lists only the
images whose ``<TiffData>`` are in it.
Channel names come from ``<Channel Name=>``, pixel sizes from ``<Pixels PhysicalSizeX/Y/Z>``.
"""

from __future__ import annotations

import os
import re
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

import numpy as np

from memtype import require
from memtype.errors import StoreFormatError, StoreNotFoundError
from memtype.pipeline.patterns import ImageRecord
from memtype.pipeline.readers.base import FileReader, PlateMetadata, record, well_name

__all__ = ["OmeTiffReader"]

_OME = re.compile(r".*\.ome\.tiff?", re.IGNORECASE)
_WELL = re.compile(r"(?:^|.*[_-])([A-Za-z]{1,2}\d{1,3})(?:[_-]s(\d+))?\.ome\.tiff?",
                   re.IGNORECASE)
_UM = {"µm": 1.0, "um": 1.0, "nm": 1e-3, "mm": 1e3, "m": 1e6}


def _local(tag: str) -> str:
    """A tag without its namespace."""
    return tag.rsplit("}", 1)[-1]


def _plate_positions(ome: ET.Element) -> dict[int, tuple[str, int]]:
    """Image index -> (well, site) from an OME ``<Plate>``."""
    ids = [e.get("ID", "") for e in ome if _local(e.tag) == "Image"]
    out: dict[int, tuple[str, int]] = {}
    for well in (e for e in ome.iter() if _local(e.tag) == "Well"):
        name = well_name(int(well.get("Row", 0)) + 1, int(well.get("Column", 0)) + 1)
        samples = [s for s in well if _local(s.tag) == "WellSample"]
        for site, sample in enumerate(samples, start=1):
            ref = next((r.get("ID", "") for r in sample if _local(r.tag) == "ImageRef"), "")
            if ref in ids:
                out[ids.index(ref)] = (name, site)
    return out


def _refuse_companion(ome: ET.Element, path: str) -> None:
    """Refuse a file of a companion dataset (its OME-XML a ``<BinaryOnly MetadataFile=>``
    stub; Bio-Formats writes plates so with ``.companion.ome``).

    Raises
    ------
    StoreFormatError
        The file's metadata is in a companion file (a ``ValueError``).
    """
    stub = next((e for e in ome if _local(e.tag) == "BinaryOnly"), None)
    if stub is not None:
        raise StoreFormatError(
            f"OME-TIFF {path!r} keeps its OME-XML in the companion file "
            f"{stub.get('MetadataFile', '?')!r} (<BinaryOnly>); companion datasets are not "
            "read (tifffile, which reads OME-TIFF here, does not follow them). Expected OME-TIFF "
            "files carrying their own OME-XML: convert the dataset with Bio-Formats' bfconvert "
            "(or bioformats2raw, for an OME-Zarr plate).")


def _own_images(ome: ET.Element, name: str) -> set[int] | None:
    """The indexes of the ``<Image>``s whose planes are in the file ``name``: in a multi-file
    dataset every file carries the whole OME-XML (the OME-TIFF specification's multi-file
    datasets, as Bio-Formats writes a plate one file per well), and each ``<TiffData>`` names
    its file by ``<UUID FileName=>`` (or the file's own ``OME UUID=``); a ``<TiffData>``
    without a ``<UUID>``, or an image without any, is in this file. None (every series is)
    where the OME-XML has no ``<Image>`` (a ``<BinaryOnly>`` stub naming a companion file)."""
    uuid = ome.get("UUID")
    own: set[int] = set()
    images = [e for e in ome if _local(e.tag) == "Image"]
    if not images:
        return None
    for index, image in enumerate(images):
        data = [e for e in image.iter() if _local(e.tag) == "TiffData"]
        refs = [next((u for u in d if _local(u.tag) == "UUID"), None) for d in data]
        if not refs or any(u is None or os.path.basename(u.get("FileName", "")) == name
                           or (u.text or "").strip() == uuid for u in refs):
            own.add(index)
    return own


class OmeTiffReader(FileReader):
    """OME-TIFF files of a plate (see the module's description).

    Parameters
    ----------
    root : str or os.PathLike
        The folder of ``.ome.tif`` files.
    """

    layout = "ome-tiff"

    def _reset(self) -> None:
        super()._reset()
        self._unreadable: list[str] = []

    @classmethod
    def detect(cls, root: str) -> str | None:
        return next((n for n in sorted(os.listdir(root)) if _OME.fullmatch(n)), None)

    def _files(self, exclude: str | None) -> list[str]:
        """The OME-TIFF files under the root."""
        return [p for p in self._walk(exclude) if _OME.fullmatch(p.rsplit("/", 1)[-1])]

    def _ome(self, path: str) -> tuple[ET.Element, list[tuple[str, tuple[int, ...]]]]:
        """A file's OME-XML root and its series' (axes, shape).

        Raises
        ------
        StoreFormatError
            The file is not a TIFF, or no OME-XML can be read from it (a truncated file's
            description is lost with its end; a ``ValueError``).
        """
        tifffile = require("tifffile", "Reading OME-TIFF files")
        try:
            with tifffile.TiffFile(self.resolve(path)) as tif:
                series = [(s.axes.upper(), tuple(s.shape)) for s in tif.series]
                xml = tif.ome_metadata
            ome = ET.fromstring(xml) if xml else None
        except (ValueError, OSError, ET.ParseError, tifffile.TiffFileError) as exc:
            raise StoreFormatError(f"{path!r} in {self.root!r} is not a readable OME-TIFF "
                                   f"({exc}).") from exc
        if ome is None:
            raise StoreFormatError(f"{path!r} in {self.root!r} is not a readable OME-TIFF (no "
                                   "OME-XML in its first page's description: truncated or "
                                   "corrupt).")
        return ome, series

    def _list(self, exclude: str | None) -> list[ImageRecord]:
        """The images of every readable file; an unreadable one is left out with a warning
        and listed in ``metadata.missing`` (one corrupt file does not stop the listing)."""
        found: list[ImageRecord] = []
        self._unreadable = []
        for path in self._files(exclude):
            try:
                ome, series = self._ome(path)
            except StoreFormatError as exc:
                self._unreadable.append(f"{path}: {exc}")
                continue
            _refuse_companion(ome, path)
            places = _plate_positions(ome)
            own = _own_images(ome, path.rsplit("/", 1)[-1])
            for index, (axes, shape) in enumerate(series):
                if own is not None and index not in own:
                    continue  # its planes are in another file of a multi-file dataset
                well, site = places.get(index) or self._from_name(path, index)
                dims = dict(zip(axes, shape, strict=True))
                unknown = set(axes) - set("TCZYX")
                if unknown:
                    raise StoreFormatError(
                        f"{path!r} series {index} has axes {axes!r}; expected T, C, Z, Y, X "
                        f"only (received {sorted(unknown)}).")
                for t in range(dims.get("T", 1)):
                    for c in range(dims.get("C", 1)):
                        for z in range(dims.get("Z", 1)):
                            found.append(record(f"{path}#{index}/{t}/{c}/{z}", well, site,
                                                c + 1, z + 1, t + 1))
        if self._unreadable:
            warnings.warn(f"{len(self._unreadable)} OME-TIFF file(s) in {self.root!r} cannot "
                          f"be read and are left out (first: {self._unreadable[0]}); they are "
                          "listed in metadata.missing.", UserWarning, stacklevel=4)
        return found

    @staticmethod
    def _from_name(path: str, index: int) -> tuple[str, int]:
        """(well, site) from a file name without plate metadata.

        Raises
        ------
        StoreFormatError
            The name carries no well (a ``ValueError``).
        """
        m = _WELL.fullmatch(path.rsplit("/", 1)[-1])
        if m is None:
            raise StoreFormatError(
                f"OME-TIFF {path!r} has no <Plate> in its OME-XML and no well in its name; "
                "expected a plate's metadata or a name such as 'B03_s1.ome.tif'.")
        return m[1], int(m[2]) if m[2] else index + 1

    def _nothing_found(self) -> str:
        return "expected .ome.tif files."

    def _metadata(self) -> PlateMetadata:
        records = self.records(self._exclude)
        source = self.detect(self.root) or ""
        missing = tuple(self._unreadable)
        ome = self._ome(records[0].path.partition("#")[0])[0]
        pixels = next((e for e in ome.iter() if _local(e.tag) == "Pixels"), None)
        names = {i: str(c.get("Name")) for i, c in enumerate(
            (c for c in (pixels if pixels is not None else []) if _local(c.tag) == "Channel"),
            start=1) if c.get("Name")}
        plate = next((e for e in ome.iter() if _local(e.tag) == "Plate"), None)
        rows = int(plate.get("Rows", 0)) or None if plate is not None else None
        columns = int(plate.get("Columns", 0)) or None if plate is not None else None
        return PlateMetadata(self.layout, source, rows, columns, names, *_sizes(pixels),
                             missing=missing)

    def load_batch(self, paths: Sequence[str]) -> list[np.ndarray[Any, Any]]:
        tifffile = require("tifffile", "Reading OME-TIFF files")
        positions: dict[tuple[str, int], tuple[str, np.ndarray[Any, Any]]] = {}
        out = []
        for path in paths:
            file, _, where = path.partition("#")
            series, t, c, z = (int(i) for i in where.split("/"))
            if (file, series) not in positions:
                positions[(file, series)] = self._series(tifffile, file, series)
            axes, data = positions[(file, series)]
            index = {"T": t, "C": c, "Z": z}
            out.append(np.asarray(data[tuple(index.get(a, slice(None)) for a in axes)]))
        return out

    def _series(self, tifffile: Any, file: str, series: int) -> tuple[str, np.ndarray[Any, Any]]:
        """One series' axes and pixels.

        Raises
        ------
        StoreFormatError
            The file's pixel data cannot be read (truncated or corrupt since the listing; a
            ``ValueError``).
        """
        try:
            with tifffile.TiffFile(self.resolve(file)) as tif:
                s = tif.series[series]
                return s.axes.upper(), s.asarray()
        except (ValueError, OSError, IndexError, tifffile.TiffFileError) as exc:
            if isinstance(exc, FileNotFoundError):
                raise StoreNotFoundError(f"OME-TIFF {file!r} in {self.root!r} disappeared "
                                         "since the listing.") from exc
            raise StoreFormatError(f"OME-TIFF {file!r} in {self.root!r}: series {series} "
                                   f"cannot be read ({type(exc).__name__}: {exc}); the file "
                                   "is truncated or corrupt.") from exc

    def header(self, path: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
        tifffile = require("tifffile", "Reading OME-TIFF files")
        file, _, where = path.partition("#")
        with tifffile.TiffFile(self.resolve(file)) as tif:
            s = tif.series[int(where.split("/")[0])]
            return tuple(s.shape[-2:]), np.dtype(s.dtype)


def _sizes(pixels: ET.Element | None) -> tuple[tuple[float, float] | None, float | None]:
    """(y, x) pixel size and z step in micrometres from OME ``<Pixels>``."""
    if pixels is None:
        return None, None

    def um(axis: str) -> float | None:
        value = pixels.get(f"PhysicalSize{axis}")
        unit = pixels.get(f"PhysicalSize{axis}Unit", "µm")
        return None if value is None else float(value) * _UM.get(unit, 1.0)

    y, x = um("Y"), um("X")
    return ((y, x) if y is not None and x is not None else None), um("Z")
