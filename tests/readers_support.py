"""One small plate written in every layout the readers take, following each vendor's structure:
2 wells (A01, B03) x 2 sites x 2 channels x 2 z-planes x 1 time point of 8 x 10 uint16."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

WELLS = ("A01", "B03")
SITES, CHANNELS, PLANES = 2, 2, 2
SHAPE = (8, 10)
CHANNEL_NAMES = ("DAPI", "FITC")
PIXEL_UM = 0.65
Z_STEP_UM = 2.0
PATTERN = "TimePoint_{t}/{well}_s{site}_w{channel}_z{z}.tif"
"""How the pattern layout's copy is named (a folder level in the pattern)."""


def plane(well: str, site: int, channel: int, z: int) -> np.ndarray[Any, Any]:
    """The pixels of one plane (distinct for every field value)."""
    seed = WELLS.index(well) * 1000 + site * 100 + channel * 10 + z
    return ((np.arange(SHAPE[0] * SHAPE[1]).reshape(SHAPE) * 7 + seed * 13) % 4096).astype(
        np.uint16)


def planes() -> list[tuple[str, int, int, int]]:
    """Every (well, site, channel, z)."""
    return [(w, s, c, z) for w in WELLS for s in range(1, SITES + 1)
            for c in range(1, CHANNELS + 1) for z in range(1, PLANES + 1)]


def _tif(path: Path, data: np.ndarray[Any, Any], description: str | None = None) -> None:
    import tifffile

    path.parent.mkdir(parents=True, exist_ok=True)
    if description is None:
        tifffile.imwrite(path, data)
    else:  # as MetaXpress writes: its XML the only description, software "MetaSeries"
        tifffile.imwrite(path, data, description=description, software="MetaSeries",
                         metadata=None)


def metaxpress_description(well: str, site: int, channel: int, z: int,
                           name: str | None = None, pixel_um: float = PIXEL_UM,
                           units: str = "um", calibrated: str = "on") -> str:
    """The ImageDescription MetaXpress writes in each TIFF (MetaMorph ``<MetaData>`` XML)."""
    def prop(key: str, kind: str, value: object, tag: str = "prop") -> str:
        return f'<{tag} id="{key}" type="{kind}" value="{value}"/>'

    name = CHANNEL_NAMES[channel - 1] if name is None else name
    plane = [prop("camera-binning-x", "int", 1), prop("camera-binning-y", "int", 1),
             prop("pixel-size-x", "int", SHAPE[1]), prop("pixel-size-y", "int", SHAPE[0]),
             prop("bits-per-pixel", "int", 16),
             prop("spatial-calibration-state", "bool", calibrated),
             prop("spatial-calibration-x", "float", pixel_um),
             prop("spatial-calibration-y", "float", pixel_um),
             prop("spatial-calibration-units", "string", units),
             prop("image-name", "string", name),
             prop("acquisition-time-local", "time", "20140206 18:00:02.125"),
             prop("stage-position-x", "float", 12000.5 + site * 650),
             prop("stage-position-y", "float", 8000.25),
             prop("z-position", "float", 5000.0 + (z - 1) * Z_STEP_UM),
             prop("wavelength", "float", 452 + 70 * channel),
             prop("_IllumSetting_", "string", name), prop("_MagNA_", "float", 0.45),
             prop("_MagSetting_", "string", "10X Plan Fluor"),
             prop("stage-label", "string", f"{well} : Site {site}"),
             prop("ImageXpress Micro X", "float", 12000.5 + site * 650, "custom-prop"),
             prop("ImageXpress Micro Y", "float", 8000.25, "custom-prop"),
             prop("Exposure Time", "string", "50 ms", "custom-prop")]
    return ("<MetaData>\r\n" + prop("Description", "string", "Acquired by MetaXpress")
            + "\r\n" + prop("MetaDataVersion", "float", 1) + "\r\n"
            + prop("ApplicationName", "string", "MetaXpress") + "\r\n"
            + prop("ApplicationVersion", "string", "6.5.4.532") + "\r\n<PlaneInfo>\r\n"
            + "\r\n".join(plane) + "\r\n</PlaneInfo>\r\n<SetInfo>\r\n"
            + prop("number-of-planes", "int", 1) + "\r\n</SetInfo>\r\n</MetaData>\r\n")


def write_pattern(root: Path) -> Path:
    """``TimePoint_1/A01_s1_w1_z1.tif``: read with :data:`PATTERN`."""
    for w, s, c, z in planes():
        _tif(root / PATTERN.format(t=1, well=w, site=s, channel=c, z=z), plane(w, s, c, z))
    return root


def htd_text(rows: int = 8, columns: int = 12, wells: tuple[str, ...] = WELLS,
             sites: int = SITES, names: tuple[str, ...] = CHANNEL_NAMES, zsteps: int = PLANES,
             timepoints: int = 1) -> str:
    """A MetaXpress .HTD file."""
    def selected(r: int, c: int) -> bool:
        return f"{chr(64 + r)}{c:02d}" in wells

    lines = ['"HTSInfoFile", Version 1.0', '"Description", "memtype test plate"',
             f'"TimePoints", {timepoints}', f'"ZSeries", {"TRUE" if zsteps > 1 else "FALSE"}',
             f'"ZSteps", {zsteps}', '"ZProjection", FALSE', f'"XWells", {columns}',
             f'"YWells", {rows}']
    lines += [f'"WellsSelection{r}", ' + ", ".join("TRUE" if selected(r, c) else "FALSE"
                                                   for c in range(1, columns + 1))
              for r in range(1, rows + 1)]
    lines += ['"Sites", TRUE', f'"XSites", {sites}', '"YSites", 1',
              '"SiteSelection1", ' + ", ".join(["TRUE"] * sites), '"Waves", TRUE',
              f'"NWavelengths", {len(names)}']
    for i, name in enumerate(names, start=1):
        lines += [f'"WaveName{i}", "{name}"', f'"WaveCollect{i}", 1']
    lines += ['"UniqueIdentifier", "8A4B1C2D-0000-4000-8000-000000000000"', '"EndFile"']
    return "\r\n".join(lines) + "\r\n"


def write_imagexpress(root: Path) -> Path:
    """``plate.HTD`` + ``TimePoint_1/ZStep_<z>/MFGTMP_<well>_s<site>_w<c>.TIF``, with
    thumbnails and MetaXpress's projections (directly in ``TimePoint_1``) beside them."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "MFGTMP_140206180002.HTD").write_text(htd_text(), newline="")
    for w, s, c, z in planes():
        name = f"MFGTMP_140206180002_{w}_s{s}_w{c}"
        _tif(root / f"TimePoint_1/ZStep_{z}/{name}.TIF", plane(w, s, c, z),
             metaxpress_description(w, s, c, z))
        _tif(root / f"TimePoint_1/ZStep_{z}/{name}_thumbA1B2.TIF", np.zeros((2, 2), np.uint16))
        if z == 1:
            _tif(root / f"TimePoint_1/{name}.TIF", np.full(SHAPE, 9, np.uint16))
    return root


FIELD_Y_UM = 120.0
"""Every Phenix fixture field's PositionY (micrometres)."""


def field_x_um(site: int) -> float:
    """A Phenix fixture field's PositionX (micrometres): fields 650 µm apart, centred."""
    return (site - 1) * 650.0 - 325.0


def phenix_xml(images: list[tuple[str, int, int, int, str]], rows: int = 8,
               columns: int = 12) -> str:
    """Harmony's Index.idx.xml for (well, site, channel, z, url) planes."""
    def image(w: str, s: int, c: int, z: int, url: str) -> str:
        r, col = ord(w[0]) - 64, int(w[1:])
        return (f'<Image Version="1"><id>{r:02d}{col:02d}K1F{s}P{z}R{c}</id><State>Ok</State>'
                f"<URL>{url}</URL><Row>{r}</Row><Col>{col}</Col><FieldID>{s}</FieldID>"
                f"<PlaneID>{z}</PlaneID><TimepointID>0</TimepointID><FlimID>1</FlimID>"
                f"<ChannelID>{c}</ChannelID><ChannelName>{CHANNEL_NAMES[c - 1]}</ChannelName>"
                f'<ImageResolutionX Unit="m">{PIXEL_UM * 1e-6!r}</ImageResolutionX>'
                f'<ImageResolutionY Unit="m">{PIXEL_UM * 1e-6!r}</ImageResolutionY>'
                f"<ImageSizeX>{SHAPE[1]}</ImageSizeX><ImageSizeY>{SHAPE[0]}</ImageSizeY>"
                f'<PositionX Unit="m">{field_x_um(s) * 1e-6!r}</PositionX>'
                f'<PositionY Unit="m">{FIELD_Y_UM * 1e-6!r}</PositionY>'
                f'<PositionZ Unit="m">{(z - 1) * Z_STEP_UM * 1e-6!r}</PositionZ>'
                f'<AbsPositionZ Unit="m">{0.0135 + (z - 1) * Z_STEP_UM * 1e-6!r}</AbsPositionZ>'
                "</Image>")

    wells = sorted({w for w, *_ in images})
    entries = "".join(
        f'<Entry ChannelID="{c}"><ChannelName>{n}</ChannelName>'
        f'<ImageResolutionX Unit="m">{PIXEL_UM * 1e-6!r}</ImageResolutionX>'
        f'<ImageResolutionY Unit="m">{PIXEL_UM * 1e-6!r}</ImageResolutionY></Entry>'
        for c, n in enumerate(CHANNEL_NAMES, start=1))
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            '<EvaluationInputData xmlns:xsd="http://www.w3.org/2001/XMLSchema" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" Version="2" '
            'xmlns="http://www.perkinelmer.com/PEHH/HarmonyV6">'
            "<User>test</User><InstrumentType>Phenix</InstrumentType>"
            "<Plates><Plate><PlateID>p1</PlateID><MeasurementID>m1</MeasurementID>"
            f"<PlateTypeName>96well</PlateTypeName><PlateRows>{rows}</PlateRows>"
            f"<PlateColumns>{columns}</PlateColumns>"
            + "".join(f'<Well id="{ord(w[0]) - 64:02d}{int(w[1:]):02d}" />' for w in wells)
            + "</Plate></Plates><Wells>"
            + "".join(f"<Well><id>{ord(w[0]) - 64:02d}{int(w[1:]):02d}</id>"
                      f"<Row>{ord(w[0]) - 64}</Row><Col>{int(w[1:])}</Col></Well>"
                      for w in wells)
            + f"</Wells><Maps><Map>{entries}</Map></Maps><Images>"
            + "".join(image(*i) for i in images) + "</Images></EvaluationInputData>")


def phenix_name(well: str, site: int, channel: int, z: int) -> str:
    """``r02c03f01p01-ch1sk1fk1fl1.tiff``."""
    return (f"r{ord(well[0]) - 64:02d}c{int(well[1:]):02d}f{site:02d}p{z:02d}"
            f"-ch{channel}sk1fk1fl1.tiff")


def write_phenix(root: Path, index: bool = True) -> Path:
    """``Images/Index.idx.xml`` + ``Images/r01c01f01p01-ch1sk1fk1fl1.tiff`` files."""
    images = []
    for w, s, c, z in planes():
        name = phenix_name(w, s, c, z)
        _tif(root / "Images" / name, plane(w, s, c, z))
        images.append((w, s, c, z, name))
    if index:
        (root / "Images" / "Index.idx.xml").write_text(phenix_xml(images), encoding="utf-8")
    return root


def field_array(well: str, site: int) -> np.ndarray[Any, Any]:
    """One field as ``[C, Z, Y, X]``."""
    return np.stack([np.stack([plane(well, site, c, z) for z in range(1, PLANES + 1)])
                     for c in range(1, CHANNELS + 1)])


def write_omezarr(root: Path, version: str = "0.4") -> Path:
    """An HCS plate written by ome-zarr-py (0.4 on zarr v2, 0.5 on zarr v3)."""
    import zarr
    from ome_zarr.format import FormatV04, FormatV05
    from ome_zarr.writer import write_image, write_plate_metadata, write_well_metadata

    fmt = FormatV04() if version == "0.4" else FormatV05()
    group = zarr.open_group(str(root), mode="w", zarr_format=2 if version == "0.4" else 3)
    paths = [f"{w[0]}/{int(w[1:])}" for w in WELLS]
    write_plate_metadata(group, ["A", "B"], ["1", "3"], paths, fmt=fmt)
    for w, path in zip(WELLS, paths, strict=True):
        row, column = path.split("/")
        well = group.require_group(row).require_group(column)
        write_well_metadata(well, [{"path": str(s - 1)} for s in range(1, SITES + 1)], fmt=fmt)
        for s in range(1, SITES + 1):
            image = well.require_group(str(s - 1))
            write_image(field_array(w, s), image, scale_factors=[], fmt=fmt, axes="czyx",
                        scale={"c": 1.0, "z": Z_STEP_UM, "y": PIXEL_UM, "x": PIXEL_UM},
                        omero={"channels": [{"label": n, "color": "FFFFFF", "window": {
                            "start": 0, "end": 4095, "min": 0, "max": 65535}}
                                            for n in CHANNEL_NAMES]})
    _micrometres(root)
    return root


def _micrometres(root: Path) -> None:
    """Give the space axes of every image the unit ``micrometer`` (ome-zarr-py writes none;
    without a unit a scale is no size)."""
    import json

    for meta in [*root.glob("*/*/*/.zattrs"), *root.glob("*/*/*/zarr.json")]:
        data = json.loads(meta.read_text())
        attrs = data if meta.name == ".zattrs" else data["attributes"]["ome"]
        for axis in attrs["multiscales"][0]["axes"]:
            if axis["type"] == "space":
                axis["unit"] = "micrometer"
        meta.write_text(json.dumps(data))


def write_ometiff(root: Path) -> Path:
    """One OME-TIFF per well and site: ``A01_s1.ome.tif`` (C, Z, Y, X)."""
    import tifffile

    root.mkdir(parents=True, exist_ok=True)
    for w in WELLS:
        for s in range(1, SITES + 1):
            tifffile.imwrite(root / f"{w}_s{s}.ome.tif", field_array(w, s), ome=True,
                             metadata={"axes": "CZYX", "Channel": {"Name": list(CHANNEL_NAMES)},
                                       "PhysicalSizeX": PIXEL_UM, "PhysicalSizeY": PIXEL_UM,
                                       "PhysicalSizeZ": Z_STEP_UM})
    return root


WRITERS: dict[str, Callable[[Path], Path]] = {
    "pattern": write_pattern,
    "imagexpress": write_imagexpress,
    "phenix": write_phenix,
    "phenix-names-only": lambda root: write_phenix(root, index=False),
    "ome-zarr-0.4": lambda root: write_omezarr(root, "0.4"),
    "ome-zarr-0.5": lambda root: write_omezarr(root, "0.5"),
    "ome-tiff": write_ometiff,
}
"""Every layout's writer of the same plate, by a test id."""


def tree(root: Path) -> list[str]:
    """Every file under ``root`` (relative), for messages."""
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root)
                  for f in fs)


OME_ZARR = pytest.mark.requires("ome_zarr")
"""The OME-Zarr fixtures are written by ome-zarr-py (the test extra)."""


def layout_params(names: Iterable[str]) -> list[Any]:
    """pytest params of fixture names, the OME-Zarr ones marked with what they need."""
    return [pytest.param(n, marks=OME_ZARR) if n.startswith("ome-zarr") else pytest.param(n)
            for n in names]
