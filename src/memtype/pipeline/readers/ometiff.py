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

import contextlib
import itertools
import math
import os
import posixpath
import re
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from memtype import require
from memtype.errors import (
    MemtypeError,
    StoreFormatError,
    StoreIsADirectoryError,
    StoreNotFoundError,
    StorePathError,
)
from memtype.pipeline.io.patterns import ImageRecord
from memtype.pipeline.readers.base import FileReader, PlateMetadata, record, well_name
from memtype.pipeline.readers.checks import bounded, length, whole

__all__ = ["OmeTiffReader"]

_OME = re.compile(r".*\.ome\.tiff?", re.IGNORECASE)
_WELL = re.compile(r"(?:^|.*[_-])([A-Za-z]{1,2}\d{1,3})(?:[_-]s(\d+))?\.ome\.tiff?",
                   re.IGNORECASE)
_UM = {"Å": 1e-4, "pm": 1e-6, "nm": 1e-3, "µm": 1.0, "um": 1.0, "mm": 1e3, "cm": 1e4,
       "dm": 1e5, "m": 1e6}
_NOT_LENGTHS = ("pixel", "reference frame")
"""OME's UnitsLength that are no length in micrometres: the size is unknown."""
_ORDERS = frozenset("XY" + "".join(p) for p in itertools.permutations("ZCT"))
"""OME's DimensionOrder values (``XYZCT``...)."""
_Place = tuple[str, str]
"""Where a ``<TiffData>``'s planes are: ``("self", "")`` (the file being read), ``("file",
path)`` (another file inside the input), ``("uuid", uuid)`` (the file of that UUID), or
``("none", why)`` (a file outside the input, or absent)."""
_SELF: _Place = ("self", "")


def _local(tag: str) -> str:
    """A tag without its namespace."""
    return tag.rsplit("}", 1)[-1]


def _children(element: ET.Element, tag: str) -> list[ET.Element]:
    """The children of ``element`` with the local name ``tag``."""
    return [e for e in element if _local(e.tag) == tag]


def _plate_positions(ome: ET.Element, where: str) -> dict[int, tuple[str, int]]:
    """Image index -> (well, site) from an OME ``<Plate>`` (``Row``/``Column`` from 0).

    Raises
    ------
    StoreFormatError
        A ``Row`` or ``Column`` that is not a whole number from 0 (a ``ValueError``).
    """
    ids: dict[str, int] = {}  # an image's ID -> its index (the first, where IDs repeat)
    for index, image in enumerate(_children(ome, "Image")):
        ids.setdefault(image.get("ID", ""), index)
    out: dict[int, tuple[str, int]] = {}
    for well in (e for e in ome.iter() if _local(e.tag) == "Well"):
        name = well_name(whole(well.get("Row", 0), where, "<Well Row=>") + 1,
                         whole(well.get("Column", 0), where, "<Well Column=>") + 1)
        for site, sample in enumerate(_children(well, "WellSample"), start=1):
            ref = next((r.get("ID", "") for r in _children(sample, "ImageRef")), "")
            if ref in ids:
                out[ids[ref]] = (name, site)
    return out


def _refuse_companion(ome: ET.Element, path: str) -> None:
    """Refuse a file of a companion dataset (its OME-XML a ``<BinaryOnly MetadataFile=>``
    stub; Bio-Formats writes plates so with ``.companion.ome``).

    Raises
    ------
    StoreFormatError
        The file's metadata is in a companion file (a ``ValueError``).
    """
    stub = next(iter(_children(ome, "BinaryOnly")), None)
    if stub is not None:
        raise StoreFormatError(
            f"OME-TIFF {path!r} keeps its OME-XML in the companion file "
            f"{stub.get('MetadataFile', '?')!r} (<BinaryOnly>); companion datasets are not "
            "read (tifffile, which reads OME-TIFF here, does not follow them). Expected OME-TIFF "
            "files carrying their own OME-XML: convert the dataset with Bio-Formats' bfconvert "
            "(or bioformats2raw, for an OME-Zarr plate).")


def _name(image: ET.Element, index: int) -> str:
    """An ``<Image>``'s ID (``Image <index>`` without one)."""
    return image.get("ID") or f"Image {index}"


def _check_pixels(image: ET.Element, tif: Any, where: str) -> None:
    """Check what tifffile builds an image's series from, before it does: ``DimensionOrder``,
    the sizes (whole, from 1; the planes at most the file's pages; ``SizeX``/``SizeY`` those
    of the image's first page), and the ``<TiffData>`` numbers (whole, from 0, within the
    file's pages).

    Raises
    ------
    StoreFormatError
        A value not of its kind, or a size beyond what the file holds (a ``ValueError``),
        naming the file, the key and the value.
    """
    pixels = next(iter(_children(image, "Pixels")), None)
    if pixels is None:
        raise StoreFormatError(f"{where}: <Image ID={image.get('ID')!r}> has no <Pixels>.")
    order = pixels.get("DimensionOrder", "")
    if order not in _ORDERS:
        raise StoreFormatError(f"{where}: DimensionOrder is {order[:40]!r}; expected one of "
                               f"{sorted(_ORDERS)}.")
    size = {ax: whole(pixels.get(f"Size{ax}", ""), where, f"<Pixels Size{ax}=>", minimum=1)
            for ax in "XYCZT"}
    channel = next(iter(_children(pixels, "Channel")), None)
    spp = 1 if channel is None else whole(channel.get("SamplesPerPixel", 1), where,
                                          "<Channel SamplesPerPixel=>", minimum=1)
    pages = len(tif.pages)
    planes = math.ceil(size["C"] / spp) * size["Z"] * size["T"]
    bounded(planes, pages, where, f"<Pixels SizeC={size['C']} SizeZ={size['Z']} "
            f"SizeT={size['T']}> in a file of {pages} page(s)")
    data = _children(pixels, "TiffData")
    for entry in data:
        for key in ("IFD", "PlaneCount", "NumPlanes", "FirstC", "FirstZ", "FirstT"):
            if key in entry.attrib:
                whole(entry.get(key), where, f"<TiffData {key}=>", maximum=max(pages, planes))
    first = tif.pages[int(data[0].get("IFD", 0)) if data else 0]
    if (first.imagelength, first.imagewidth) != (size["Y"], size["X"]):
        raise StoreFormatError(
            f"{where}: <Pixels SizeY={size['Y']} SizeX={size['X']}> but its first page is "
            f"{first.imagelength} x {first.imagewidth}; expected the sizes of its pages.")


def _refuse_modulo(ome: ET.Element, where: str) -> None:
    """Refuse Modulo annotations (axes beyond T, C, Z, Y, X: lifetime, angle, phase...).

    Raises
    ------
    StoreFormatError
        The file has one (a ``ValueError``).
    """
    for annotation in ome.iter():
        if _local(annotation.tag) == "XMLAnnotation" and \
                annotation.get("Namespace", "").endswith("modulo"):
            raise StoreFormatError(f"{where}: a Modulo annotation adds axes beyond T, C, Z, Y, "
                                   "X; expected images of those axes only.")


class _Listed(NamedTuple):
    """What a file's OME-XML says, checked: the whole OME-XML, the indexes of the images
    whose planes are in the file, the OME-XML tifffile reads (those images alone, their
    ``<UUID>`` references removed: tifffile never opens another file), and where the planes
    of the other images are said to be (image ID -> a file inside the input, or why not)."""

    ome: ET.Element
    own: list[int]
    xml: str
    elsewhere: dict[str, set[_Place]]


def _reduced(ome: ET.Element, own: list[int]) -> str:
    """The OME-XML with only the images ``own``, their ``<TiffData>`` without ``<UUID>``."""
    reduced = ET.Element(ome.tag, ome.attrib)
    images = _children(ome, "Image")
    reduced.extend(e for e in ome if _local(e.tag) != "Image")
    for index in own:
        image = ET.fromstring(ET.tostring(images[index]))  # a copy to change
        for data in (e for e in image.iter() if _local(e.tag) == "TiffData"):
            for ref in _children(data, "UUID"):
                data.remove(ref)
        reduced.append(image)
    return ET.tostring(reduced, encoding="unicode")


class OmeTiffReader(FileReader):
    """OME-TIFF files of a plate (see the module's description).

    Every file is opened beneath the root, and tifffile is given the file's own images'
    OME-XML without their ``<UUID FileName=>`` references: a reference to another file is
    resolved here, beneath the root (a file inside the input lists its own images; one
    outside, or absent, is named in ``metadata.missing``), and tifffile never opens a file
    by a name the metadata gives.

    Parameters
    ----------
    root : str or os.PathLike
        The folder of ``.ome.tif`` files.
    """

    layout = "ome-tiff"

    def _reset(self) -> None:
        super()._reset()
        self._unreadable: list[str] = []
        self._identities: dict[str, tuple[int, int] | str] = {}
        self._xml: dict[str, str] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_identities"], state["_xml"] = {}, {}  # read again where needed
        return state

    @classmethod
    def detect(cls, root: str) -> str | None:
        return next((n for n in sorted(os.listdir(root)) if _OME.fullmatch(n)), None)

    def _files(self, exclude: str | None) -> list[str]:
        """The OME-TIFF files under the root."""
        return [p for p in self._walk(exclude) if _OME.fullmatch(p.rsplit("/", 1)[-1])]

    @contextlib.contextmanager
    def _opened(self, path: str) -> Iterator[tuple[ET.Element, Any]]:
        """A file's OME-XML root and the file open in tifffile (which opens no other file).

        Raises
        ------
        StoreFormatError
            The file is not a TIFF, or no OME-XML can be read from it (a truncated file's
            description is lost with its end), or a page it names cannot be read (a
            ``ValueError``).
        """
        tifffile = require("tifffile", "Reading OME-TIFF files")
        try:
            with self.open_file(path) as fh, tifffile.TiffFile(fh, _multifile=False) as tif:
                xml = tif.ome_metadata
                ome = ET.fromstring(xml) if xml else None
                if ome is None:
                    raise StoreFormatError(
                        f"{path!r} in {self.root!r} is not a readable OME-TIFF (no OME-XML in "
                        "its first page's description: truncated or corrupt).")
                yield ome, tif
        except MemtypeError:
            raise
        except (ValueError, OSError, LookupError, ET.ParseError, tifffile.TiffFileError) as exc:
            raise StoreFormatError(f"{path!r} in {self.root!r} is not a readable OME-TIFF "
                                   f"({exc}).") from exc

    def _read_xml(self, path: str) -> ET.Element:
        """A file's OME-XML root (see :meth:`_opened`)."""
        with self._opened(path) as (ome, _):
            return ome

    def _listed(self, path: str) -> _Listed:
        """A file's OME-XML, checked (see :class:`_Listed`).

        Raises
        ------
        StoreFormatError
            Unreadable, or metadata not of its kind: a bad ``DimensionOrder``, sizes beyond
            the file's pages, an image whose planes are split over files (a ``ValueError``).
        """
        where = f"OME-TIFF {path!r} in {self.root!r}"
        own: list[int] = []
        elsewhere: dict[str, set[_Place]] = {}
        with self._opened(path) as (ome, tif):
            _refuse_modulo(ome, where)
            for index, image in enumerate(_children(ome, "Image")):
                places = self._places(image, ome.get("UUID"), path)
                if places == {_SELF}:
                    own.append(index)
                    _check_pixels(image, tif, where)
                elif _SELF in places:
                    raise StoreFormatError(
                        f"{where}: <Image ID={_name(image, index)!r}> has planes in this file "
                        f"and in {_describe(places - {_SELF})}; an image split over files is "
                        "not read.")
                else:
                    elsewhere[_name(image, index)] = places
        try:
            xml = _reduced(ome, own)
        except RecursionError:  # the serializer recurses: a hostile nesting depth
            raise StoreFormatError(f"{where}: its OME-XML is nested too deeply to be an "
                                   "image's metadata.") from None
        self._xml[path] = xml
        return _Listed(ome, own, xml, elsewhere)

    def _places(self, image: ET.Element, uuid: str | None, path: str) -> set[_Place]:
        """Where an image's ``<TiffData>`` are: :data:`_SELF` (this file: no ``<UUID>``,
        the file's own UUID, or a ``FileName`` resolving to this very file), another file
        inside the input (its path), or why none can be read."""
        data = [e for e in image.iter() if _local(e.tag) == "TiffData"]
        out: set[_Place] = set() if data else {_SELF}
        for entry in data:
            ref = next(iter(_children(entry, "UUID")), None)
            if ref is None or (uuid and (ref.text or "").strip() == uuid):
                out.add(_SELF)
            elif ref.get("FileName"):
                out.add(self._file_of(path, str(ref.get("FileName"))))
            else:
                out.add(("uuid", (ref.text or "").strip()))
        return out

    def _file_of(self, path: str, name: str) -> _Place:
        """Where a ``<UUID FileName=>`` of ``path`` points, resolved beneath the root."""
        key = posixpath.normpath(posixpath.join(posixpath.dirname(path),
                                                name.replace("\\", "/")))
        if name.startswith(("/", "\\")) or key == ".." or key.startswith("../"):
            return ("none", f"{name[:200]!r} (outside the input)")
        found = self._identity(key)
        if isinstance(found, str):
            return ("none", f"{name[:200]!r} ({found})")
        return _SELF if found == self._identity(path) else ("file", key)

    def _identity(self, key: str) -> tuple[int, int] | str:
        """(device, inode) of the file ``key`` opened beneath the root, or why it cannot be
        (remembered per listing)."""
        if key not in self._identities:
            try:
                with self.open_file(key) as fh:
                    st = os.fstat(fh.fileno())
                self._identities[key] = (st.st_dev, st.st_ino)
            except StorePathError:
                self._identities[key] = "outside the input"
            except (StoreNotFoundError, StoreIsADirectoryError):
                self._identities[key] = "not a file in the input"
        return self._identities[key]

    def _list(self, exclude: str | None) -> list[ImageRecord]:
        """The images of every readable file; an unreadable one is left out with a warning
        and listed in ``metadata.missing`` (one corrupt file does not stop the listing), as
        is an image whose planes are in no file of the input."""
        found: list[ImageRecord] = []
        self._unreadable, self._identities, self._xml = [], {}, {}
        owned: set[tuple[str, str]] = set()  # (file, image ID)
        uuids: dict[str, str] = {}  # a file's OME UUID -> the file
        elsewhere: list[tuple[str, str, set[_Place]]] = []
        for path in self._files(exclude):
            try:
                listed = self._listed(path)
                series = self._series_shapes(path, listed)
            except StoreFormatError as exc:
                self._unreadable.append(f"{path}: {exc}")
                continue
            _refuse_companion(listed.ome, path)
            images = _children(listed.ome, "Image")
            owned.update((path, images[i].get("ID") or f"Image {i}") for i in listed.own)
            uuids.setdefault(listed.ome.get("UUID") or "", path)
            elsewhere += [(path, name, places) for name, places in listed.elsewhere.items()]
            found += self._file_records(path, listed, series)
        for path, name, places in elsewhere:  # images no file of the input holds
            unread = {p for p in places if p[0] == "none"
                      or (uuids.get(p[1], "") if p[0] == "uuid" else p[1], name) not in owned}
            if unread:
                self._unreadable.append(f"{path}: <Image ID={name!r}> has its planes in "
                                        f"{_describe(unread)}, which no file of the input "
                                        "holds; not read")
        if self._unreadable:
            warnings.warn(f"{len(self._unreadable)} OME-TIFF file(s) or image(s) in "
                          f"{self.root!r} cannot be read and are left out (first: "
                          f"{self._unreadable[0]}); they are listed in metadata.missing.",
                          UserWarning, stacklevel=4)
        return found

    def _series_shapes(self, path: str, listed: _Listed) -> list[tuple[str, tuple[int, ...]]]:
        """The (axes, shape) of each of the file's own images, as tifffile reads them.

        Raises
        ------
        StoreFormatError
            tifffile cannot read them, or reads another number of series (a ``ValueError``).
        """
        if not listed.own:
            return []
        tifffile = require("tifffile", "Reading OME-TIFF files")
        where = f"OME-TIFF {path!r} in {self.root!r}"
        try:
            with self.open_file(path) as fh, tifffile.TiffFile(
                    fh, omexml=listed.xml, _multifile=False) as tif:
                series = [(s.axes.upper(), tuple(s.shape)) for s in tif.series]
        except MemtypeError:
            raise
        except (ValueError, OSError, LookupError, tifffile.TiffFileError) as exc:
            raise StoreFormatError(f"{where} is not a readable OME-TIFF ({exc}).") from exc
        if len(series) != len(listed.own):
            raise StoreFormatError(f"{where}: its OME-XML has {len(listed.own)} image(s) in "
                                   f"the file; tifffile reads {len(series)} series.")
        return series

    def _file_records(self, path: str, listed: _Listed,
                 series: list[tuple[str, tuple[int, ...]]]) -> list[ImageRecord]:
        """The records of a file's own images (``#<series>/<t>/<c>/<z>``).

        Raises
        ------
        StoreFormatError
            A series with axes other than T, C, Z, Y, X (a ``ValueError``).
        """
        places = _plate_positions(listed.ome, f"OME-TIFF {path!r} in {self.root!r}")
        found = []
        for index, (axes, shape) in enumerate(series):
            image = listed.own[index]
            well, site = places.get(image) or self._from_name(path, image)
            dims = dict(zip(axes, shape, strict=True))
            unknown = set(axes) - set("TCZYX")
            if unknown:
                raise StoreFormatError(
                    f"{path!r} series {index} has axes {axes!r}; expected T, C, Z, Y, X "
                    f"only (received {sorted(unknown)}).")
            found += [record(f"{path}#{index}/{t}/{c}/{z}", well, site, c + 1, z + 1, t + 1)
                      for t in range(dims.get("T", 1)) for c in range(dims.get("C", 1))
                      for z in range(dims.get("Z", 1))]
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
        path = records[0].path.partition("#")[0]
        ome = self._read_xml(path)
        where = f"OME-TIFF {path!r} in {self.root!r}"
        pixels = next((e for e in ome.iter() if _local(e.tag) == "Pixels"), None)
        names = {i: str(c.get("Name")) for i, c in enumerate(
            _children(pixels, "Channel") if pixels is not None else [], start=1)
            if c.get("Name")}
        plate = next((e for e in ome.iter() if _local(e.tag) == "Plate"), None)
        rows = columns = None
        if plate is not None:
            rows = whole(plate.get("Rows", 0), where, "<Plate Rows=>") or None
            columns = whole(plate.get("Columns", 0), where, "<Plate Columns=>") or None
        return PlateMetadata(self.layout, source, rows, columns, names,
                             *_sizes(pixels, where), missing=missing)

    @contextlib.contextmanager
    def _tiff(self, tifffile: Any, file: str) -> Iterator[Any]:
        """A listed file open in tifffile with its own images' OME-XML (no other file)."""
        xml = self._xml.get(file)
        if xml is None:
            xml = self._listed(file).xml
        with self.open_file(file) as fh, tifffile.TiffFile(fh, omexml=xml,
                                                           _multifile=False) as tif:
            yield tif

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
        StoreNotFoundError
            The file disappeared since the listing (a ``FileNotFoundError``).
        """
        try:
            with self._tiff(tifffile, file) as tif:
                s = tif.series[series]
                return s.axes.upper(), s.asarray()
        except StoreNotFoundError as exc:
            raise StoreNotFoundError(f"OME-TIFF {file!r} in {self.root!r} disappeared "
                                     "since the listing.") from exc
        except MemtypeError:
            raise
        except (ValueError, OSError, IndexError, tifffile.TiffFileError) as exc:
            raise StoreFormatError(f"OME-TIFF {file!r} in {self.root!r}: series {series} "
                                   f"cannot be read ({type(exc).__name__}: {exc}); the file "
                                   "is truncated or corrupt.") from exc

    def header(self, path: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
        tifffile = require("tifffile", "Reading OME-TIFF files")
        file, _, where = path.partition("#")
        with self._tiff(tifffile, file) as tif:
            s = tif.series[int(where.split("/")[0])]
            return tuple(s.shape[-2:]), np.dtype(s.dtype)


def _describe(places: set[_Place]) -> str:
    """Places in words."""
    words = {"file": "{}", "uuid": "the file of UUID {!r}", "none": "{}", "self": "this file"}
    return ", ".join(sorted(words[kind].format(value[:200]) for kind, value in places))


def _sizes(pixels: ET.Element | None,
           where: str) -> tuple[tuple[float, float] | None, float | None]:
    """(y, x) pixel size and z step in micrometres from OME ``<Pixels>``.

    Raises
    ------
    StoreFormatError
        A size that is not a finite length greater than 0, or a unit that is not OME's (a
        ``ValueError``), naming the file, the key and the value.
    """
    if pixels is None:
        return None, None

    def um(axis: str) -> float | None:
        value = pixels.get(f"PhysicalSize{axis}")
        unit = pixels.get(f"PhysicalSize{axis}Unit", "µm")
        if value is None or unit in _NOT_LENGTHS:
            return None
        if unit not in _UM:
            raise StoreFormatError(f"{where}: PhysicalSize{axis}Unit is {unit[:40]!r}; "
                                   f"expected one of {sorted(_UM)} (or {_NOT_LENGTHS}).")
        return length(value, where, f"PhysicalSize{axis}", _UM[unit])

    y, x = um("Y"), um("X")
    return ((y, x) if y is not None and x is not None else None), um("Z")
