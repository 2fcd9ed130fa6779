"""Opera Phenix / Operetta CLS exports from Harmony: ``Images/Index.idx.xml`` (or ``Index.xml``)
beside ``r01c01f01p01-ch1sk1fk1fl1.tiff`` files.

The index is namespaced XML (``http://www.perkinelmer.com/PEHH/HarmonyV5`` or ``V6``; the
namespace is not checked) with one ``<Image>`` per plane under ``<Images>``: ``URL`` (the file,
relative to the index), ``Row``, ``Col``, ``FieldID``, ``PlaneID``, ``TimepointID`` (from 0;
from 1 in some indexes: the base is read from the file names' ``sk<n>``, from 1),
``ChannelID``, ``ChannelName``, ``ImageResolutionX``/``Y`` (with a ``Unit``, metres in
practice) and ``PositionX``/``Y``/``Z`` (the field's place, with a ``Unit``; ``AbsPositionZ``
where an index has no ``PositionZ``, as older Operetta indexes do).
``<Plates><Plate>`` has ``PlateRows`` and ``PlateColumns``; ``<Maps><Map><Entry ChannelID=..>``
repeats the channel names and resolutions. The index is
the source of truth: an ``<Image>`` whose file is absent is listed as missing. Without an
index the file names are read: ``r<row>c<col>f<field>p<plane>-ch<channel>sk<timepoint>fk..fl..``
(``sk`` counts time points from 1). Row 2, column 3 is well ``B03``.

The index is looked for at the root, in ``Images/``, then in the other folders just below (a
renamed ``Images`` folder). ``Index.ref.xml`` (what Harmony writes beside an export with
flat-field references; Bio-Formats' HarmonyReader reads it with the same parser) has the same
schema and is read the same way, after ``Index.idx.xml`` and ``Index.xml``. The index is parsed
once, streamed (``iterparse``, each ``<Image>`` cleared once read): a 138,240-plane index is not
held as a tree.
"""

from __future__ import annotations

import os
import posixpath
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from memtype.errors import StoreFormatError
from memtype.pipeline.io.patterns import ImageRecord
from memtype.pipeline.readers.base import (
    FieldPosition,
    FileReader,
    PlateMetadata,
    dir_inside,
    file_inside,
    open_inside,
    record,
    well_name,
)
from memtype.pipeline.readers.checks import finite, length, whole

__all__ = ["PhenixReader"]

_INDEX_NAMES = ("Index.idx.xml", "Index.xml", "Index.ref.xml")
_INDEXES = (*_INDEX_NAMES, *(f"Images/{name}" for name in _INDEX_NAMES))
_NAME = re.compile(r"r(\d+)c(\d+)f(\d+)p(\d+)-ch(\d+)sk(\d+)fk\d+fl\d+\.tiff?", re.IGNORECASE)
_TO_UM = {"m": 1e6, "mm": 1e3, "um": 1.0, "µm": 1.0, "nm": 1e-3}


def _local(tag: str) -> str:
    """An element's tag without its namespace."""
    return tag.rsplit("}", 1)[-1]


def _children(element: ET.Element) -> dict[str, ET.Element]:
    """An element's children by tag (without namespace); the first of each tag."""
    out: dict[str, ET.Element] = {}
    for child in element:
        out.setdefault(_local(child.tag), child)
    return out


def _um(element: ET.Element | None, where: str, positive: bool = True) -> float | None:
    """A length element's value in micrometres (by its ``Unit``; metres if none): a finite
    length greater than 0 (a pixel size), or any finite number without ``positive`` (a
    position).

    Raises
    ------
    StoreFormatError
        Not a number, not finite (NaN, inf), not positive where it must be, or a ``Unit``
        that is not a length (a ``ValueError``), naming the file, the element and the value.
    """
    if element is None or not (element.text or "").strip():
        return None
    key = f"<{_local(element.tag)}>"
    unit = element.get("Unit", "m").strip()
    if unit not in _TO_UM:
        raise StoreFormatError(f"{where}: {key} has Unit {unit!r}; expected one of "
                               f"{sorted(_TO_UM)}.")
    text = (element.text or "").strip()
    check = length if positive else finite
    return check(text, where, key, _TO_UM[unit])


def _text(parts: dict[str, ET.Element], tag: str) -> str:
    """A child's text ('' if absent)."""
    element = parts.get(tag)
    return "" if element is None else (element.text or "").strip()


_IDS = ("Row", "Col", "FieldID", "ChannelID", "PlaneID")
"""The ``<Image>`` numbers that count from 1 (``TimepointID``'s base is read, see
:meth:`_Index.time`)."""


@dataclass
class _Index:
    """What one pass over a Harmony index (``where``, for messages) found: the images present,
    those absent, and the plate's metadata."""

    where: str
    found: list[ImageRecord] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    rows: int | None = None
    columns: int | None = None
    names: dict[int, str] = field(default_factory=dict)
    size: tuple[float, float] | None = None
    planes: dict[int, float] = field(default_factory=dict)
    positions: dict[tuple[str, int], tuple[tuple[int, int], FieldPosition]] = \
        field(default_factory=dict)
    base: int | None = None
    """What ``TimepointID`` the first time point has: 0 in Harmony's indexes (files ``sk1``),
    1 in some; read from the first file name that carries ``sk<n>``, else 0."""

    def add_image(self, parts: dict[str, ET.Element], base: str, files: set[str]) -> None:
        """One ``<Image>`` plane: its record (present or absent), name, size and place."""
        url = _text(parts, "URL").replace("\\", "/")
        remote = "://" in url  # a Harmony server's URL (Bio-Formats' OperettaReader keeps it)
        path = posixpath.normpath(f"{base}/{url}") if base and url and not remote else url
        rec = self.record(path, parts)
        if url and not remote and path in files:
            self.found.append(rec)
        else:
            self.absent.append(f"{rec.path or '(no file)'} ({_label(rec)})")
        self.add_channel(_text(parts, "ChannelID"), parts)
        z = _um(parts.get("PositionZ"), self.where, positive=False)
        if z is None:  # Operetta's own (not Harmony's) index: Bio-Formats' OperettaReader
            z = _um(parts.get("AbsPositionZ"), self.where, positive=False)
        fields = rec.fields
        if z is not None:
            self.planes.setdefault(int(fields["z"]), z)
        x = _um(parts.get("PositionX"), self.where, positive=False)
        y = _um(parts.get("PositionY"), self.where, positive=False)
        if x is not None and y is not None:
            place = (str(fields["well"]), int(fields["site"]))
            order = (int(fields["t"]), int(fields["z"]))
            known = self.positions.get(place)
            if known is None or order < known[0]:  # the first plane of the first time point
                self.positions[place] = (order, FieldPosition(x, y, z))

    def record(self, path: str, parts: dict[str, ET.Element]) -> ImageRecord:
        """The record of one ``<Image>``.

        Raises
        ------
        StoreFormatError
            A number that is not a whole number from 1 (from 0 for ``TimepointID``), naming
            the index, the element and the value (a ``ValueError``).
        """
        where = f"{self.where}, <Image> of {path or '(no URL)'!r}"
        row, col, site, channel, plane = (whole(_text(parts, tag), where, f"<{tag}>", minimum=1)
                                          for tag in _IDS)
        return record(path, well_name(row, col), site, channel, plane, self.time(path, parts))

    def time(self, path: str, parts: dict[str, ET.Element]) -> int:
        """The time point (from 1) of an ``<Image>``: its ``TimepointID`` from the index's
        base, which the file names' ``sk<n>`` (from 1) show.

        Raises
        ------
        StoreFormatError
            A ``TimepointID`` below the base, or one that disagrees with its file's ``sk``
            (a ``ValueError``).
        """
        where = f"{self.where}, <Image> of {path or '(no URL)'!r}"
        value = whole(_text(parts, "TimepointID"), where, "<TimepointID>")
        named = _NAME.fullmatch(path.rsplit("/", 1)[-1])
        if named is not None:
            sk = int(named[6])
            if self.base is None and sk - value in (0, 1):
                self.base = 1 - (sk - value)  # TimepointID 0 -> sk1: base 0
            if value - (self.base or 0) + 1 != sk:
                raise StoreFormatError(
                    f"{where}: <TimepointID> is {value} but the file is named for time point "
                    f"sk{sk} (the index's first time point is {self.base or 0}); the index and "
                    "the file names disagree.")
        if value < (self.base or 0):
            raise StoreFormatError(f"{where}: <TimepointID> is {value}; expected "
                                   f"{self.base or 0} or more (the index's first time point).")
        return value - (self.base or 0) + 1

    def add_channel(self, channel: str, parts: dict[str, ET.Element]) -> None:
        """A channel's name and the pixel size, from an ``<Image>`` or a ``<Map><Entry>``."""
        if channel and _text(parts, "ChannelName"):
            number = whole(channel, self.where, "ChannelID", minimum=1)
            self.names.setdefault(number, _text(parts, "ChannelName"))
        y = _um(parts.get("ImageResolutionY"), self.where)
        x = _um(parts.get("ImageResolutionX"), self.where)
        if self.size is None and y is not None and x is not None:
            self.size = (y, x)

    def add_plate(self, parts: dict[str, ET.Element]) -> None:
        """``<Plate>``: the plate's rows and columns."""
        self.rows = whole(_text(parts, "PlateRows") or 0, self.where, "<PlateRows>") or None
        self.columns = whole(_text(parts, "PlateColumns") or 0, self.where,
                             "<PlateColumns>") or None

    def metadata(self, layout: str, source: str) -> PlateMetadata:
        """The plate's metadata."""
        planes = self.planes
        step = abs(planes[2] - planes[1]) if 1 in planes and 2 in planes else None
        return PlateMetadata(layout, source, self.rows, self.columns,
                             dict(sorted(self.names.items())), self.size, step,
                             tuple(self.absent),
                             {k: v for k, (_, v) in sorted(self.positions.items())})


def _scan_index(root: str, index: str, files: set[str]) -> _Index:
    """One streamed pass over the Harmony index ``index`` (relative to ``root``, opened
    beneath it: an index linked from outside is never read).

    Raises
    ------
    StoreFormatError
        The index is not well-formed XML, or a number in it is not of its kind (a
        ``ValueError``).
    StorePathError
        The index leads outside ``root`` (a ``ValueError``).
    """
    out = _Index(repr(os.path.join(root, index)))
    base = posixpath.dirname(index)
    with open_inside(root, index) as fh:
        try:
            for _, element in ET.iterparse(fh):
                tag = _local(element.tag)
                if tag == "Image":
                    parts = _children(element)
                    if "Row" in parts:  # not an <Image id=".."/> reference under <Wells>
                        out.add_image(parts, base, files)
                    element.clear()
                elif tag == "Entry":
                    out.add_channel(element.get("ChannelID") or "", _children(element))
                elif tag == "Plate":
                    out.add_plate(_children(element))
        except ET.ParseError as exc:
            raise StoreFormatError(f"Phenix index {out.where} is not valid XML ({exc}); "
                                   "expected Harmony's Index.idx.xml.") from exc
    return out


def _named_record(path: str, m: re.Match[str]) -> ImageRecord:
    """The record of a file named ``r<row>c<col>f<field>p<plane>-ch<channel>sk<t>...``.

    Raises
    ------
    StoreFormatError
        A number of the name that is 0 (they count from 1; a ``ValueError``).
    """
    row, col, site, plane, channel, t = (
        whole(m[i], f"File {path!r}", f"{key!r} of its name", minimum=1)
        for i, key in enumerate(("r", "c", "f", "p", "ch", "sk"), start=1))
    return record(path, well_name(row, col), site, channel, plane, t)


class PhenixReader(FileReader):
    """An Opera Phenix / Operetta Harmony export (see the module's description).

    Parameters
    ----------
    root : str or os.PathLike
        The export folder (holding ``Images/``) or its ``Images`` folder.
    """

    layout = "phenix"

    def _reset(self) -> None:
        super()._reset()
        self._scanned: _Index | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_scanned"] = None  # listed again where needed, like the records
        return state

    @classmethod
    def detect(cls, root: str) -> str | None:
        index = cls._index(root)
        if index is not None:
            return index
        for folder in ("", "Images"):
            here = os.path.join(root, folder)
            if (not folder or dir_inside(root, folder)) and \
                    any(_NAME.fullmatch(n) for n in os.listdir(here)):
                return f"{folder + '/' if folder else ''}r..c..f..p..-ch..sk..fk..fl.. names"
        return None

    @staticmethod
    def _index(root: str) -> str | None:
        """The index file's path relative to ``root``, if there is one: at the root, in
        ``Images/``, else in another folder just below (the images' folder "will usually be
        'Images', but may have been renamed", Bio-Formats' OperettaReader says)."""
        found = next((p for p in _INDEXES if file_inside(root, p)), None)
        if found is not None:
            return found
        with os.scandir(root) as entries:
            folders = sorted(e.name for e in entries if e.name[0] != "." and e.is_dir())
        return next((f"{folder}/{name}" for folder in folders for name in _INDEX_NAMES
                     if file_inside(root, f"{folder}/{name}")), None)

    def _list(self, exclude: str | None) -> list[ImageRecord]:
        files = set(self._walk(exclude))
        index = self._index(self.root)
        if index is None:
            return [_named_record(path, m)
                    for path in files if (m := _NAME.fullmatch(path.rsplit("/", 1)[-1]))]
        self._scanned = _scan_index(self.root, index, files)
        return self._scanned.found

    def _nothing_found(self) -> str:
        absent = self._scanned.absent if self._scanned is not None else []
        remote = next((a for a in absent if "://" in a), None)
        hint = "" if remote is None else (
            f"its index names images on a server ({remote}), not files beside it: export the "
            "measurement with its images from Harmony; ")
        return hint + ("expected Images/Index.idx.xml (or Index.xml, Index.ref.xml) and the "
                       "files it names, or files named r01c01f01p01-ch1sk1fk1fl1.tiff.")

    def _metadata(self) -> PlateMetadata:
        source = self.detect(self.root) or ""
        index = self._index(self.root)
        if index is None:
            return PlateMetadata(self.layout, source)
        self.records(self._exclude)  # the index's one pass, unless listed already
        scanned = self._scanned or _scan_index(  # an index that appeared since the listing
            self.root, index, set(self._walk(self._exclude)))
        self._scanned = None
        return scanned.metadata(self.layout, source)


def _label(rec: ImageRecord) -> str:
    """``B03 site=1 channel=2 z=1 t=1``."""
    values = rec.fields
    return (f"{values['well']} site={values['site']} channel={values['channel']} "
            f"z={values['z']} t={values['t']}")
