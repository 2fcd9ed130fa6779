"""ImageXpress / MetaXpress exports: the plate's ``.HTD`` file beside
``TimePoint_<t>/[ZStep_<z>/]<prefix>_<well>_s<site>_w<channel>.TIF`` files.

The ``.HTD`` ("HTSInfoFile") is a text file of ``"Key", value, ...`` lines: ``XWells`` and
``YWells`` (the plate's columns and rows), ``WellsSelection<row>`` (one TRUE/FALSE per column),
``XSites``/``YSites`` and ``SiteSelection<row>`` (the site grid; selected sites are numbered
row by row from 1), ``NWavelengths`` and ``WaveName<n>`` (channel names), ``TimePoints``,
``ZSteps``. It gives the channel names and what was acquired, so that absent images are listed
as missing. Without it the plate is read from the names and folders alone.

Each TIFF's ImageDescription holds MetaXpress's MetaMorph ``<MetaData>`` XML (``<prop id=..
value=..>`` under ``<PlaneInfo>``): ``_IllumSetting_`` (the wavelength's name),
``spatial-calibration-x``/``-y`` with ``-units`` and ``-state``, ``z-position``,
``stage-label`` (``"A01 : Site 1"``). The metadata reads the first image of each channel's
description (one TIFF header, no pixel data) for channel names and the pixel size, and plane 2
of the first image for the z step; the ``.HTD``'s ``WaveName<n>`` take precedence over the
TIFFs' names. tifffile parses the TIFF; its MetaSeries reader wants the ``Software`` tag
``MetaSeries``, so the XML is read here from the description itself.

Names: ``<prefix>_<well>_s<site>_w<channel>`` where ``_s`` is absent on single-site plates and
``_w`` on single-channel ones, and MetaXpress may append a GUID to the last of them
(``..._w1F1A2B3C4-....TIF``, ``..._s1F1A2B3C4-....TIF``); any case of ``.tif``/``.tiff``.
Thumbnails (``_thumb``) are left out. When a time point has ``ZStep_<z>`` folders, the images
directly in the time point's folder (or in an export's ``ZStep_0``) are MetaXpress's projections
of those planes, and are left out too, but for channels with no plane in those folders (a
channel kept only as its projection, or acquired as one plane, beside stacks): those are read as
plane 1. The ``.HTD`` is at the root, or (MetaXpress's plate export) in the first
``TimePoint_<t>`` folder or its ``ZStep_1``; an acquisition folder without ``TimePoint_<t>``
folders (names at its root and in ``ZStep_<z>`` folders) is time point 1.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import os
import re
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import BinaryIO

from memtype import require
from memtype.errors import StoreFormatError
from memtype.pipeline.io.patterns import FieldValue, ImageRecord, Key, key_label
from memtype.pipeline.readers.base import (
    FieldPosition,
    FileReader,
    PlateMetadata,
    dir_inside,
    field_pair,
    file_inside,
    record,
    walk_folders,
    well_name,
)
from memtype.pipeline.readers.checks import bounded, length, whole
from memtype.storage._readers import DECODE_ERRORS

__all__ = ["ImageXpressReader", "parse_htd", "HtdInfo", "tiff_properties", "StagePositions"]

_NAME = re.compile(
    r"(?:.*_)?(?P<well>[A-Z]{1,2}\d{1,3})(?:_s(?P<site>\d+))?(?:_w(?P<channel>\d+))?"
    r"(?:[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})?"
    r"(?i:\.tiff?)")
"""MetaXpress names: the well in capitals with a column of one to three digits (``A1`` is well
``A01``, as openhcs's ImageXpress parser and names copied by hand have it); the
acquisition's GUID follows the last part present (``_w1<GUID>``, or ``_s1<GUID>`` on a
single-channel plate: fmi-faim/faim-ipa, resources/SingleChannel/2023-02-21/1334/
Projection-Mix_E07_s1E94C24BD-45E4-450A-9919-257C714278F7.tif); its fixed length tells a GUID
starting with a digit from the number before it. The
prefix is greedy (tried from the last ``_`` back): what follows the well has no ``_`` that a
well could follow (``_s``, ``_w`` are lower case), so it splits where a lazy prefix would, in
two thirds of the time."""
_TIMEPOINT = re.compile(r"TimePoint_(\d+)", re.IGNORECASE)
_ZSTEP = re.compile(r"ZStep_(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class HtdInfo:
    """What a ``.HTD`` file says about a plate."""

    rows: int | None = None
    columns: int | None = None
    wells: tuple[str, ...] = ()
    sites: int = 1
    channel_names: dict[int, str] = field(default_factory=dict)
    timepoints: int = 1
    zsteps: int = 1
    wavelengths: int = 1


def _values(raw: bytes, where: str) -> dict[str, list[str]]:
    """The ``"Key", value, ...`` lines of an HTD file: UTF-8, else the Windows code page
    MetaXpress writes (``WaveName1, "Hoechst µ"`` as the byte ``B5``).

    Raises
    ------
    StoreFormatError
        A line that is not CSV (a NUL byte, a field over 128 KiB; a ``ValueError``).
    """
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("cp1252", errors="replace")
    rows = csv.reader(io.StringIO(text, newline=""), skipinitialspace=True)
    try:
        return {row[0].strip(): [v.strip() for v in row[1:]] for row in rows if row}
    except csv.Error as exc:
        raise StoreFormatError(f"{where}: line {rows.line_num} is not a '\"Key\", value, ...' "
                               f"line ({exc}); expected MetaXpress's .HTD text.") from None


def _int(values: dict[str, list[str]], key: str, default: int, where: str) -> int:
    """A count of an HTD key: a whole number from 0 (``default`` where absent)."""
    raw = values.get(key)
    if raw is None:
        return default
    return whole(raw[0] if raw else "", where, f"HTD key {key!r}")


def _true(value: str) -> bool:
    """An HTD boolean."""
    return value.upper() == "TRUE"


def _numbered(values: dict[str, list[str]], prefix: str, last: int) -> list[int]:
    """The numbers ``n`` (1 to ``last``) of the keys ``<prefix><n>`` present, in order: read
    from the file's own keys, never by counting to a number the file claims."""
    found = (key[len(prefix):] for key in values if key.startswith(prefix))
    return sorted(n for n in (int(d) for d in found if d.isdigit() and len(d) < 7)
                  if 1 <= n <= last)


def parse_htd(path: str) -> HtdInfo:
    """Read a MetaXpress ``.HTD`` plate file.

    Raises
    ------
    StoreFormatError
        A key whose value is not of its kind, a negative count, or a line that is not CSV
        (a ``ValueError``), naming the file, the key and the value.
    """
    with open(path, "rb") as fh:
        return _parse_htd(fh.read(), repr(path))


def _parse_htd(raw: bytes, where: str) -> HtdInfo:
    """:func:`parse_htd` of a file's bytes (``where`` names the file in errors)."""
    v = _values(raw, where)
    rows, columns = _int(v, "YWells", 0, where) or None, _int(v, "XWells", 0, where) or None
    wells = tuple(well_name(r, c + 1) for r in _numbered(v, "WellsSelection", rows or 0)
                  for c, on in enumerate(v[f"WellsSelection{r}"][:columns]) if _true(on))
    sites = 1
    if _true(v.get("Sites", ["FALSE"])[0]):
        ysites = _int(v, "YSites", 1, where)
        grid = [on for r in _numbered(v, "SiteSelection", ysites)
                for on in v[f"SiteSelection{r}"]]
        sites = sum(_true(on) for on in grid) or _int(v, "XSites", 1, where) * ysites
    count = _int(v, "NWavelengths", 0, where)
    names = {n: v[f"WaveName{n}"][0] for n in _numbered(v, "WaveName", count)
             if v[f"WaveName{n}"]}
    zsteps = _int(v, "ZSteps", 1, where) if _true(v.get("ZSeries", ["FALSE"])[0]) else 1
    wavelengths = max(_int(v, "NWavelengths", 1, where), max(names, default=1))
    return HtdInfo(rows, columns, wells, max(sites, 1), names,
                   max(_int(v, "TimePoints", 1, where), 1), max(zsteps, 1), max(wavelengths, 1))


def _place(folder: str) -> tuple[int, int]:
    """The time point (1 without a ``TimePoint_`` folder) and z-step (0 without a ``ZStep_``
    folder) of a folder.

    Raises
    ------
    StoreFormatError
        A ``TimePoint_0`` folder (time points count from 1; a ``ValueError``).
    """
    parts = folder.split("/")
    t = next((whole(p[1], f"Folder {folder!r}", "its TimePoint_<t>", minimum=1)
              for f in parts if (p := _TIMEPOINT.fullmatch(f))), 1)
    z = next((int(p[1]) for f in parts if (p := _ZSTEP.fullmatch(f))), 0)
    return t, z


def _values_of(m: re.Match[str], path: str) -> tuple[str, int, int]:
    """The well, site and channel of a matched name (site and channel 1 where absent).

    Raises
    ------
    StoreFormatError
        A site or channel 0 (``_s0``, ``_w0``: they count from 1; a ``ValueError``).
    """
    site, channel = (whole(m[key] or 1, f"File {path!r}", f"the {key} of its name", minimum=1)
                     for key in ("site", "channel"))
    return m["well"], site, channel


def _has_images(root: str, folder: str, names: list[str] | None = None) -> bool:
    """Whether a time point's folder (relative to ``root``, or its first ``ZStep_`` folder)
    holds a MetaXpress name (``names``: the folder's sorted names, if already listed)."""
    names = sorted(os.listdir(os.path.join(root, folder))) if names is None else names
    if any(_NAME.fullmatch(n) for n in names):
        return True
    step = _first_folder(_ZSTEP, root, folder, names)
    return step is not None and any(_NAME.fullmatch(n)
                                    for n in os.listdir(os.path.join(root, folder, step)))


def _join(folder: str, name: str) -> str:
    """``folder/name`` (``name`` alone at the root)."""
    return f"{folder}/{name}" if folder else name


def _first_folder(pattern: re.Pattern[str], root: str, folder: str,
                  names: list[str]) -> str | None:
    """The first folder inside ``root`` among the sorted names of ``folder`` (relative to
    ``root``) that ``pattern`` matches (``TimePoint_<t>``, ``ZStep_<z>``), if any."""
    return next((n for n in names if pattern.fullmatch(n)
                 and dir_inside(root, _join(folder, n))), None)


def _htd_in(root: str, folder: str, names: Iterable[str]) -> str | None:
    """The path (relative to ``root``) of the first ``.HTD`` among the names of ``folder``
    that is a file inside ``root``: a folder, a dangling link or a link leading outside the
    input is not the plate's metadata (the walk skips such a link too, and says so)."""
    return next((_join(folder, n) for n in names if n.lower().endswith(".htd")
                 and file_inside(root, _join(folder, n))), None)


def _find_htd(root: str, names: list[str]) -> str | None:
    """The plate's ``.HTD`` (relative to ``root``): at the root, else in its first
    ``TimePoint_<t>`` folder or that folder's first two ``ZStep_<z>`` folders, where MetaXpress's
    plate export puts it (fmi-faim/faim-ipa, resources/ImageXpress_exported/9987_Plate_3420/
    TimePoint_1/9987.HTD and 9987_Plate_3434/TimePoint_1/ZStep_1/9987.HTD)."""
    found = _htd_in(root, "", names)
    if found is not None:
        return found
    point = _first_folder(_TIMEPOINT, root, "", names)
    if point is None:
        return None
    inside = sorted(os.listdir(os.path.join(root, point)))
    found = _htd_in(root, point, inside)
    if found is not None:
        return found
    steps = sorted((int(m[1]), n) for n in inside if (m := _ZSTEP.fullmatch(n))
                   and dir_inside(root, f"{point}/{n}"))
    for _, step in steps[:2]:  # ZStep_1, after an export's ZStep_0 of projections
        folder = f"{point}/{step}"
        found = _htd_in(root, folder, sorted(os.listdir(os.path.join(root, folder))))
        if found is not None:
            return found
    return None


class ImageXpressReader(FileReader):
    """An ImageXpress / MetaXpress plate folder (see the module's description).

    Parameters
    ----------
    root : str or os.PathLike
        The plate folder: the one holding the ``.HTD`` file and the ``TimePoint_<t>`` folders.
    """

    layout = "imagexpress"

    @classmethod
    def detect(cls, root: str) -> str | None:
        """The ``.HTD`` file (at the root, or in the first time point's folder or its first
        z-step's); else a ``TimePoint_<n>`` folder holding MetaXpress names; else MetaXpress
        names at the root or in its first ``ZStep_<z>`` folder (an acquisition folder without
        time points, as fmi-faim/faim-ipa's resources/ImageXpress/Projection-Mix/2023-02-21/
        1334/ holds it)."""
        names = sorted(os.listdir(root))
        htd = _find_htd(root, names)
        if htd is not None:
            return htd
        point = _first_folder(_TIMEPOINT, root, "", names)
        if point is not None:
            # TimePoint folders of other names: read by pattern
            return f"{point}/" if _has_images(root, point) else None
        if _has_images(root, "", names):
            return "MetaXpress names"
        return None

    def _htd(self) -> tuple[str, HtdInfo] | None:
        """The plate's HTD file (relative to the root) and what it says, if it has one (read
        beneath the root: a link swapped since the detection cannot lead outside)."""
        found = self.detect(self.root)
        if found is None or not found.lower().endswith(".htd"):
            return None
        where = repr(os.path.join(self.root, found))
        with self.open_file(found) as fh:
            raw = fh.read(_HTD_LIMIT + 1)
        if len(raw) > _HTD_LIMIT:
            raise StoreFormatError(f"{where} is over {_HTD_LIMIT >> 20} MiB; a MetaXpress .HTD "
                                   "is a few kB of '\"Key\", value' lines.")
        return found, _parse_htd(raw, where)

    def _list(self, exclude: str | None) -> list[ImageRecord]:
        found: list[ImageRecord] = []
        projections: dict[int, list[ImageRecord]] = {}  # images beside ZStep_ folders
        with_zsteps: set[int] = set()
        fields: dict[tuple[str | None, ...], Key] = {}  # (well, site, channel) as named
        for folder, names in walk_folders(self.root, exclude):
            t, z = _place(folder)
            if z:
                with_zsteps.add(t)
            into = found if z else projections.setdefault(t, [])
            prefix = f"{folder}/" if folder else ""
            place = (field_pair("z", z or 1), field_pair("t", t))
            for name in names:
                m = _NAME.fullmatch(name)
                if m is None or "_thumb" in name.lower():
                    continue
                named = m.groups()
                head = fields.get(named)
                if head is None:
                    head = fields[named] = record("", *_values_of(m, prefix + name),
                                                  1, 1).key[:3]
                into.append(ImageRecord(prefix + name, head + place))
        return found + _kept_projections(found, projections, with_zsteps)

    def _nothing_found(self) -> str:
        return ("expected files named <prefix>_<well>_s<site>_w<channel>.TIF in "
                "TimePoint_<t>[/ZStep_<z>] folders.")

    def _metadata(self) -> PlateMetadata:
        found = self._htd()
        source = self.detect(self.root) or ""
        records = self.records(self._exclude)
        tiff = _tiff_metadata(self, records)
        positions = StagePositions(self, records)
        if found is None:
            return PlateMetadata(self.layout, source, channel_names=tiff.channel_names,
                                 pixel_size_um=tiff.pixel_size_um, z_step_um=tiff.z_step_um,
                                 field_positions=positions, notes=_unusable_htds(self.root))
        path, htd = found
        _check_announced(htd, len(records), repr(os.path.join(self.root, path)))
        present = {r.key for r in records}
        stacked = {k[2][1] for k in present if k[3][1] != 1}  # channels with a plane beyond 1
        missing = tuple(key_label(k) for k in _expected(htd) if k not in present
                        and (k[3][1] == 1 or k[2][1] in stacked))
        names = {**tiff.channel_names, **htd.channel_names}  # the HTD's names first
        return PlateMetadata(self.layout, source, htd.rows, htd.columns,
                             dict(sorted(names.items())), tiff.pixel_size_um, tiff.z_step_um,
                             missing=missing, field_positions=positions,
                             notes=_disagreements(htd, {str(k[0][1]) for k in present}, path))


_HTD_LIMIT = 16 << 20
"""The largest ``.HTD`` read (a real one is a few kB): a larger file is refused unread."""
_ANNOUNCED_FLOOR = 1_000_000
_ANNOUNCED_PER_IMAGE = 100
"""A ``.HTD`` may announce at most max(10^6, 100 x the images on disk) images: a plate whose
acquisition stopped at 1 % is still read (its absent images listed as missing); counts of
10^12 are refused before anything is built from them."""


def _check_announced(htd: HtdInfo, images: int, where: str) -> None:
    """Refuse an HTD announcing more images than the plate on disk can hold.

    Raises
    ------
    StoreFormatError
        The announced count exceeds the bound (a ``ValueError``), naming every factor.
    """
    count = len(htd.wells) * htd.sites * htd.wavelengths * htd.zsteps * htd.timepoints
    what = (f"{len(htd.wells)} selected well(s) x {htd.sites} site(s) (XSites, YSites, "
            f"SiteSelection) x NWavelengths {htd.wavelengths} x ZSteps {htd.zsteps} x "
            f"TimePoints {htd.timepoints}")
    bounded(count, max(_ANNOUNCED_FLOOR, _ANNOUNCED_PER_IMAGE * images), where, what)


def _disagreements(htd: HtdInfo, wells: set[str], path: str) -> tuple[str, ...]:
    """What the ``.HTD`` and the wells on disk disagree on: wells beyond its plate size
    (``XWells``/``YWells``), wells it does not select (``WellsSelection<row>``)."""
    notes = []
    if htd.rows is not None and htd.columns is not None:
        beyond = sorted(w for w in wells if _outside_plate(w, htd.rows, htd.columns))
        if beyond:
            notes.append(f"{path} gives a plate of {htd.rows} x {htd.columns} wells (YWells, "
                         f"XWells), but images of {len(beyond)} well(s) beyond it are on disk "
                         f"({_few(beyond)}); they are read.")
    unselected = sorted(wells - set(htd.wells))
    if unselected:
        notes.append(f"{path} does not select {len(unselected)} well(s) whose images are on "
                     f"disk ({_few(unselected)}; WellsSelection<row>); they are read.")
    return tuple(notes)


def _unusable_htds(root: str) -> tuple[str, ...]:
    """A note for each ``.HTD`` at the root that is not read: a folder, a link to nothing, a
    link out of the input (the plate is then read from its names alone)."""
    notes = []
    for name in sorted(os.listdir(root)):
        if name.lower().endswith(".htd") and not file_inside(root, name):
            full = os.path.join(root, name)
            link, there = os.path.islink(full), os.path.exists(full)
            what = ("a link to nothing" if link and not there else "a link out of the input"
                    if link and not dir_inside(root, name) else "not a file")
            notes.append(f"{name} is {what}, not read: the plate is read from its file names "
                         "alone (no .HTD channel names or missing images).")
    return tuple(notes)


def _outside_plate(well: str, rows: int, columns: int) -> bool:
    """Whether a well name (``B03``, ``AA01``) lies beyond a plate of ``rows`` x ``columns``."""
    m = re.fullmatch(r"([A-Z]+)(\d+)", well)
    if m is None:
        return False
    row = 0
    for letter in m[1]:
        row = 26 * row + ord(letter) - ord("A") + 1
    return row > rows or int(m[2]) > columns


def _few(names: list[str]) -> str:
    """The first few names, and how many more."""
    more = f", and {len(names) - 4} more" if len(names) > 4 else ""
    return ", ".join(names[:4]) + more


class StagePositions(Mapping[tuple[str, int], FieldPosition]):
    """Where each field of an ImageXpress plate was imaged: ``stage-position-x``/``-y`` and
    ``z-position`` (micrometres, the stage's own coordinates) of the field's first image,
    read from its TIFF header the first time a position (or their number) is asked for: one
    header per field (0.3 ms each, 1.1 s on a 384-well plate of 9 sites, on a quiet machine),
    which a run that does not use them never pays. A field whose header has no stage position
    is left out.

    Parameters
    ----------
    reader : ImageXpressReader
        The plate's reader (its files are read through it, inside its root).
    records : list of ImageRecord
        The plate's listing, in natural order.
    """

    def __init__(self, reader: ImageXpressReader, records: list[ImageRecord]) -> None:
        self._reader = reader
        first: dict[tuple[str, int], str] = {}
        for rec in records:
            first.setdefault((str(rec.key[0][1]), int(rec.key[1][1])), rec.path)
        self._first = first
        self._read: dict[tuple[str, int], FieldPosition] | None = None

    def _positions(self) -> dict[tuple[str, int], FieldPosition]:
        """The positions, read once."""
        if self._read is None:
            read: dict[tuple[str, int], FieldPosition] = {}
            for place, path in self._first.items():
                props = _header_properties(self._reader, path)
                x, y = _float(props.get("stage-position-x")), _float(props.get("stage-position-y"))
                if x is not None and y is not None:
                    read[place] = FieldPosition(x, y, _float(props.get("z-position")))
            self._read = read
        return self._read

    def __getitem__(self, place: tuple[str, int]) -> FieldPosition:
        return self._positions()[place]

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self._positions())

    def __len__(self) -> int:
        return len(self._positions())

    def __repr__(self) -> str:
        if self._read is None:
            return f"StagePositions(<{len(self._first)} fields, read when first used>)"
        return f"StagePositions({self._read!r})"


def _kept_projections(planes: list[ImageRecord], projections: dict[int, list[ImageRecord]],
                      with_zsteps: set[int]) -> list[ImageRecord]:
    """The images directly in a time point's folder that are read: all of them where the time
    point has no ``ZStep_<z>`` folder; else those of channels with no plane in its ``ZStep_``
    folders (a channel acquired as one plane, or kept only as its projection, beside channels
    acquired as stacks: fmi-faim/faim-ipa, resources/ImageXpress/Projection-Mix, where ``w3``
    is only beside the ``ZStep_<z>`` folders and the ``w1``/``w2`` images there are the
    projections of their stacks). Those channels' images are plane ``z=1``."""
    kept = [rec for t, images in projections.items() if t not in with_zsteps for rec in images]
    beside = [t for t in with_zsteps.intersection(projections) if projections[t]]
    if not beside:  # the common case: no pass over the planes
        return kept
    stacked = {(rec.key[4][1], rec.key[2][1]) for rec in planes}  # (t, channel) of planes
    return kept + [rec for t in beside for rec in projections[t]
                   if (t, rec.key[2][1]) not in stacked]


def _expected(htd: HtdInfo) -> Iterator[Key]:
    """The key of every image the HTD announces: selected wells x sites x wavelengths x z x t
    (their pairs shared, made by ``itertools.product``). The metadata expects planes beyond
    the first only of channels that have one somewhere on the plate: a channel acquired as one
    plane (or kept only as its projection) beside stacks is not z-steps short (the HTD's
    ``ZSteps`` is the plate's, not the channel's: fmi-faim/faim-ipa, resources/
    ImageXpress_exported/9987_Plate_3434's HTD, "Texas Red: 1z" in a 3-step plate)."""
    def pairs(name: str, values: Iterable[FieldValue]) -> list[tuple[str, FieldValue]]:
        return [field_pair(name, v) for v in values]

    return itertools.product(pairs("well", htd.wells), pairs("site", range(1, htd.sites + 1)),
                             pairs("channel", range(1, htd.wavelengths + 1)),
                             pairs("z", range(1, htd.zsteps + 1)),
                             pairs("t", range(1, htd.timepoints + 1)))


@dataclass(frozen=True)
class _TiffInfo:
    """What the MetaXpress descriptions of one image per channel say."""

    channel_names: dict[int, str] = field(default_factory=dict)
    pixel_size_um: tuple[float, float] | None = None
    z_step_um: float | None = None


def _tiff_metadata(reader: ImageXpressReader, records: list[ImageRecord]) -> _TiffInfo:
    """Channel names (``_IllumSetting_``) and the pixel size (``spatial-calibration-x/y``) from
    the first image of each channel, and the z step (``z-position``) from the first image's
    plane 2: one TIFF header per channel, plus one, never pixel data."""
    first: dict[FieldValue, ImageRecord] = {}
    for rec in records:
        first.setdefault(rec.key[2][1], rec)
    names: dict[int, str] = {}
    size: tuple[float, float] | None = None
    z1: float | None = None
    for channel, rec in first.items():
        props = _header_properties(reader, rec.path)
        if props.get("_IllumSetting_") and isinstance(channel, int):
            names[channel] = props["_IllumSetting_"]
        if size is None:
            size = _calibration(props, f"ImageXpress image {rec.path!r} in {reader.root!r}")
        if z1 is None and channel == records[0].key[2][1]:
            z1 = _float(props.get("z-position"))
    return _TiffInfo(names, size, _z_step(reader, records, z1))


def _z_step(reader: ImageXpressReader, records: list[ImageRecord],
            z1: float | None) -> float | None:
    """The distance between planes 1 and 2 of the first image's stack, if both say where."""
    if z1 is None:
        return None
    want = records[0].key[:3] + (("z", 2),) + records[0].key[4:]
    second = next((r for r in records if r.key == want), None)
    if second is None:
        return None
    z2 = _float(_header_properties(reader, second.path).get("z-position"))
    return None if z2 is None or z2 == z1 else abs(z2 - z1)


def _header_properties(reader: ImageXpressReader, path: str) -> dict[str, str]:
    """:func:`tiff_properties` of a listed image; an unreadable one (corrupt, truncated, not a
    TIFF) gives none, with a warning naming it: the plate is still listed and inspected, and
    the image's own read raises when its group runs."""
    try:
        with reader.open_file(path) as fh:
            return tiff_properties(fh)
    except StoreFormatError as exc:
        warnings.warn(f"{exc} Its channel's name and the pixel size are not read from it; the "
                      "image itself fails when its group is read.", UserWarning, stacklevel=2)
        return {}


_TO_UM = {"um": 1.0, "micron": 1.0, "microns": 1.0, "nm": 1e-3, "mm": 1e3}


def _float(text: str | None) -> float | None:
    """A position of a description, or None if absent, not a number, or not finite (NaN,
    inf: no position, as an absent one)."""
    try:
        value = None if text is None else float(text)
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def _calibration(props: dict[str, str], where: str) -> tuple[float, float] | None:
    """``(y, x)`` micrometres from ``spatial-calibration-x/y`` and ``-units`` (None when the
    calibration is off, absent, or in units that are not lengths, such as pixels).

    Raises
    ------
    StoreFormatError
        A calibration that is on, in a length unit, but not a finite length greater than 0
        (a ``ValueError``), naming the image, the key and the value.
    """
    if props.get("spatial-calibration-state", "on").lower() not in ("on", "true", "1"):
        return None
    scale = _TO_UM.get(props.get("spatial-calibration-units", "um").strip().lower())
    x = props.get("spatial-calibration-x")
    y = props.get("spatial-calibration-y", x)
    if scale is None or x is None or y is None:
        return None
    return (length(y, where, "spatial-calibration-y", scale),
            length(x, where, "spatial-calibration-x", scale))


def tiff_properties(path: str | BinaryIO) -> dict[str, str]:
    """The ``<prop id= value=>`` (and ``<custom-prop>``) values of a MetaXpress / MetaMorph
    TIFF's ImageDescription (``<MetaData>`` XML), read from the first page's tags alone; empty
    when the description is not MetaMorph's.

    Parameters
    ----------
    path : str or binary file
        The TIFF, or the TIFF open for reading (a reader opens it beneath its root).

    Raises
    ------
    StoreFormatError
        The file is not a readable TIFF (truncated, an IFD offset past its end...), or its
        ``<MetaData>`` is not well-formed XML (a ``ValueError``).
    """
    tifffile = require("tifffile", "Reading ImageXpress TIFF metadata")
    name = path if isinstance(path, str) else getattr(path, "name", "?")
    try:
        with tifffile.TiffFile(path) as tif:
            description = tif.pages.first.description
    except (tifffile.TiffFileError, *DECODE_ERRORS) as exc:
        raise StoreFormatError(f"ImageXpress image {name!r} is not a readable TIFF "
                               f"({type(exc).__name__}: {exc}); its header gives the "
                               "channel's name and pixel size.") from exc
    if not description.lstrip().startswith("<MetaData>"):
        return {}
    try:
        root = ET.fromstring(description)
    except ET.ParseError as exc:
        raise StoreFormatError(f"The MetaXpress description of {name!r} is not valid XML "
                               f"({exc}); expected <MetaData><prop id=.. value=../>...")\
            from exc
    props: dict[str, str] = {}
    for element in root.iter():
        if element.tag in ("prop", "custom-prop") and element.get("id"):
            props.setdefault(str(element.get("id")), element.get("value", ""))
    return props
