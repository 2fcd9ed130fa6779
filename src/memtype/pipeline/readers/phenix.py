"""Opera Phenix / Operetta CLS exports from Harmony: ``Images/Index.idx.xml`` (or ``Index.xml``)
beside ``r01c01f01p01-ch1sk1fk1fl1.tiff`` files.

The index is namespaced XML (``http://www.perkinelmer.com/PEHH/HarmonyV5`` or ``V6``; the
namespace is not checked) with one ``<Image>`` per plane under ``<Images>``: ``URL`` (the file,
relative to the index), ``Row``, ``Col``, ``FieldID``, ``PlaneID``, ``TimepointID`` (from 0),
``ChannelID``, ``ChannelName``, ``ImageResolutionX``/``Y`` (with a ``Unit``, metres in
practice) and ``PositionZ``. ``<Plates><Plate>`` has ``PlateRows`` and ``PlateColumns``;
``<Maps><Map><Entry ChannelID=..>`` repeats the channel names and resolutions. The index is
the source of truth: an ``<Image>`` whose file is absent is listed as missing. Without an
index the file names are read: ``r<row>c<col>f<field>p<plane>-ch<channel>sk<timepoint>fk..fl..``
(``sk`` counts time points from 1). Row 2, column 3 is well ``B03``.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator

from memtype.errors import StoreFormatError
from memtype.pipeline.patterns import ImageRecord
from memtype.pipeline.readers.base import FileReader, PlateMetadata, record, well_name

__all__ = ["PhenixReader"]

_INDEXES = ("Index.idx.xml", "Index.xml", "Images/Index.idx.xml", "Images/Index.xml")
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


def _find_all(root: ET.Element, tag: str) -> Iterator[ET.Element]:
    """Every element below ``root`` with this tag, whatever its namespace."""
    return (e for e in root.iter() if _local(e.tag) == tag)


def _um(element: ET.Element | None) -> float | None:
    """A length element's value in micrometres (by its ``Unit``; metres if none)."""
    if element is None or not (element.text or "").strip():
        return None
    scale = _TO_UM.get(element.get("Unit", "m").strip(), 1e6)
    return float(element.text or "") * scale


def _text(parts: dict[str, ET.Element], tag: str) -> str:
    """A child's text ('' if absent)."""
    element = parts.get(tag)
    return "" if element is None else (element.text or "").strip()


class PhenixReader(FileReader):
    """An Opera Phenix / Operetta Harmony export (see the module's description).

    Parameters
    ----------
    root : str or os.PathLike
        The export folder (holding ``Images/``) or its ``Images`` folder.
    """

    layout = "phenix"

    @classmethod
    def detect(cls, root: str) -> str | None:
        index = cls._index(root)
        if index is not None:
            return index
        for folder in ("", "Images"):
            here = os.path.join(root, folder)
            if os.path.isdir(here) and any(_NAME.fullmatch(n) for n in os.listdir(here)):
                return f"{folder + '/' if folder else ''}r..c..f..p..-ch..sk..fk..fl.. names"
        return None

    @staticmethod
    def _index(root: str) -> str | None:
        """The index file's path relative to ``root``, if there is one."""
        return next((p for p in _INDEXES if os.path.isfile(os.path.join(root, p))), None)

    def _parse(self) -> ET.Element | None:
        """The index's root element, or None without an index.

        Raises
        ------
        StoreFormatError
            The index is not well-formed XML (a ``ValueError``).
        """
        index = self._index(self.root)
        if index is None:
            return None
        try:
            return ET.parse(os.path.join(self.root, index)).getroot()
        except ET.ParseError as exc:
            raise StoreFormatError(f"Phenix index {index!r} in {self.root!r} is not valid "
                                   f"XML ({exc}); expected Harmony's Index.idx.xml.") from exc

    def _list(self, exclude: str | None) -> list[ImageRecord]:
        files = set(self._walk(exclude))
        tree = self._parse()
        if tree is None:
            return [record(path, well_name(int(m[1]), int(m[2])), int(m[3]), int(m[5]),
                           int(m[4]), int(m[6]))
                    for path in files if (m := _NAME.fullmatch(path.rsplit("/", 1)[-1]))]
        base = os.path.dirname(self._index(self.root) or "")
        found: list[ImageRecord] = []
        self._absent: list[str] = []
        for image in _find_all(tree, "Image"):
            parts = _children(image)
            if "Row" not in parts:  # an <Image id=".."/> reference under <Wells>
                continue
            url = _text(parts, "URL")
            path = f"{base}/{url}" if base and url else url
            rec = self._record(path, parts)
            if url and path in files:
                found.append(rec)
            else:
                self._absent.append(f"{rec.path or '(no file)'} ({_label(rec)})")
        return found

    @staticmethod
    def _record(path: str, parts: dict[str, ET.Element]) -> ImageRecord:
        """The record of one ``<Image>``.

        Raises
        ------
        StoreFormatError
            A position that is not a whole number (a ``ValueError``).
        """
        try:
            values = [int(_text(parts, tag)) for tag in
                      ("Row", "Col", "FieldID", "ChannelID", "PlaneID", "TimepointID")]
        except ValueError:
            raise StoreFormatError(
                f"Phenix <Image> for {path!r} has a Row, Col, FieldID, ChannelID, PlaneID or "
                "TimepointID that is not a whole number.") from None
        row, col, site, channel, plane, time = values
        return record(path, well_name(row, col), site, channel, plane, time + 1)

    def _nothing_found(self) -> str:
        return ("expected Images/Index.idx.xml (or Index.xml) and the files it names, or "
                "files named r01c01f01p01-ch1sk1fk1fl1.tiff.")

    def _metadata(self) -> PlateMetadata:
        tree = self._parse()
        source = self.detect(self.root) or ""
        if tree is None:
            return PlateMetadata(self.layout, source)
        self.records(self._exclude)
        plate = next(_find_all(tree, "Plate"), None)
        parts = _children(plate) if plate is not None else {}
        rows = int(_text(parts, "PlateRows") or 0) or None
        columns = int(_text(parts, "PlateColumns") or 0) or None
        names: dict[int, str] = {}
        size: tuple[float, float] | None = None
        planes: dict[int, float] = {}
        for element in (*_find_all(tree, "Entry"), *_find_all(tree, "Image")):
            p = _children(element)
            channel = element.get("ChannelID") or _text(p, "ChannelID")
            if channel and _text(p, "ChannelName"):
                names.setdefault(int(channel), _text(p, "ChannelName"))
            y, x = _um(p.get("ImageResolutionY")), _um(p.get("ImageResolutionX"))
            if size is None and y is not None and x is not None:
                size = (y, x)
            z = _um(p.get("PositionZ"))
            if z is not None and _text(p, "PlaneID"):
                planes.setdefault(int(_text(p, "PlaneID")), z)
        step = abs(planes[2] - planes[1]) if 1 in planes and 2 in planes else None
        return PlateMetadata(self.layout, source, rows, columns, dict(sorted(names.items())),
                             size, step, tuple(getattr(self, "_absent", [])))


def _label(rec: ImageRecord) -> str:
    """``B03 site=1 channel=2 z=1 t=1``."""
    values = rec.fields
    return (f"{values['well']} site={values['site']} channel={values['channel']} "
            f"z={values['z']} t={values['t']}")
