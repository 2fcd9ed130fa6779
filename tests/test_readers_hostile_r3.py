"""Plates from strangers (issue 31, round 3), the readers other than OME-Zarr: every file a
reader opens is opened beneath the input (a link out of it is never read), sizes its metadata
claims are bounded by the plate on disk, numbers are checked where they are read, malformed
metadata is a memtype error naming the file, the key and the value, and what the metadata and
the files disagree on is said."""

from __future__ import annotations

import json
import math
import os
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest

import memtype as mt
from memtype.errors import (
    NoImagesError,
    StoreFormatError,
    StoreIsADirectoryError,
    StoreNotFoundError,
    StorePathError,
)
from memtype.pipeline import Pipeline
from memtype.pipeline.io.inspection import inspect_plate
from memtype.pipeline.io.patterns import DEFAULT_PATTERN
from memtype.pipeline.readers import ImageXpressReader, open_input
from memtype.pipeline.readers.base import open_inside
from tests.readers_support import _tif, htd_text, metaxpress_description, write_phenix

pytestmark = pytest.mark.requires("tifffile")


def _tiff(path: Path, value: int = 1) -> None:
    """An 8 x 10 uint16 TIFF."""
    import tifffile

    path.parent.mkdir(parents=True, exist_ok=True)
    tifffile.imwrite(path, np.full((8, 10), value, np.uint16))


# -- opening beneath the input -------------------------------------------------------------------
def test_open_inside_reads_a_file_and_a_link_that_stays_inside(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"inside")
    (tmp_path / "b.txt").symlink_to("a.txt")
    with open_inside(str(tmp_path), "b.txt") as fh:
        assert fh.read() == b"inside"
        assert fh.name == os.path.join(str(tmp_path), "b.txt")


@pytest.mark.parametrize(("make", "error"), [
    (lambda root: (root / "x").symlink_to(root.parent / "secret.txt"), StorePathError),
    (lambda root: (root / "x").symlink_to("../secret.txt"), StorePathError),
    (lambda root: (root / "x").symlink_to(root / "nothing"), StoreNotFoundError),
    (lambda root: (root / "x").mkdir(), StoreIsADirectoryError),
], ids=["absolute-link-outside", "relative-link-outside", "dangling-link", "folder"])
def test_open_inside_refuses_what_is_not_a_file_inside(make: object, error: type[Exception],
                                                       tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_bytes(b"secret")
    root = tmp_path / "plate"
    root.mkdir()
    make(root)  # type: ignore[operator]
    with pytest.raises(error, match="'x'"):
        open_inside(str(root), "x")


def test_open_inside_refuses_dot_dot(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_bytes(b"secret")
    (tmp_path / "plate").mkdir()
    with pytest.raises(StorePathError):
        open_inside(str(tmp_path / "plate"), "../secret.txt")


# -- ImageXpress: the .HTD ------------------------------------------------------------------------
def _imagexpress(root: Path, htd: str | None = None, wells: tuple[str, ...] = ("A01",)) -> Path:
    """An ImageXpress plate of one site and one channel per well, with ``htd`` as its
    ``plate.HTD`` (none if None)."""
    root.mkdir(parents=True, exist_ok=True)
    if htd is not None:
        (root / "plate.HTD").write_text(htd, newline="")
    for i, well in enumerate(wells):
        _tiff(root / "TimePoint_1" / f"plate_{well}_s1_w1.TIF", i + 1)
    return root


def _one_image_htd(**keys: object) -> str:
    """The .HTD of a one-well, one-site, one-channel plate, with ``keys`` replaced."""
    text = htd_text(wells=("A01",), sites=1, names=("DAPI",), zsteps=1)
    for key, value in keys.items():
        lines = text.split("\r\n")
        lines = [f'"{key}", {value}' if line.startswith(f'"{key}",') else line for line in lines]
        if not any(line.startswith(f'"{key}",') for line in lines):
            lines.insert(1, f'"{key}", {value}')
        text = "\r\n".join(lines)
    return text


def test_an_htd_linked_from_outside_the_input_is_never_parsed(tmp_path: Path) -> None:
    """Before: the walk said it skipped the link, but the .HTD was parsed and its channel
    names reached the output."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "plate.HTD").write_text(
        htd_text(wells=("A01",), sites=1, names=("SECRET",), zsteps=1), newline="")
    root = _imagexpress(tmp_path / "plate")
    (root / "plate.HTD").symlink_to(outside / "plate.HTD")
    reader = ImageXpressReader(root)
    with pytest.warns(UserWarning, match="lead outside"):
        reader.records()
    with pytest.warns(UserWarning, match="plate.HTD is a link out of the input, not read"):
        meta = reader.metadata
    assert "SECRET" not in meta.channel_names.values()
    assert meta.detected_from != "plate.HTD"


@pytest.mark.parametrize("key", ["TimePoints", "NWavelengths", "XSites", "ZSteps"])
def test_htd_counts_beyond_the_plate_on_disk_are_refused(key: str, tmp_path: Path) -> None:
    """Before: counts of 10^12 looped for ever (memtype inspect hung on a one-image plate)."""
    extra = {"ZSeries": "TRUE"} if key == "ZSteps" else {}
    root = _imagexpress(tmp_path / "plate", _one_image_htd(**{key: 10**12}, **extra))
    if key == "XSites":  # the site count from the grid's size, not a SiteSelection line
        text = (root / "plate.HTD").read_bytes()
        (root / "plate.HTD").write_bytes(text.replace(b'"SiteSelection1", TRUE\r\n', b""))
    with pytest.raises(StoreFormatError, match=f"plate.HTD.*{key} .*1000000000000|"
                                               f"plate.HTD.*1,000,000,000,000"):
        inspect_plate(root)


def test_htd_rows_and_columns_of_10_to_the_12_are_not_counted_to(tmp_path: Path) -> None:
    """YWells/XWells of 10^12: the selection is read from the file's own lines."""
    root = _imagexpress(tmp_path / "plate", _one_image_htd(YWells=10**12, XWells=10**12))
    meta = ImageXpressReader(root).metadata
    assert meta.rows == 10**12 and meta.missing == ()


@pytest.mark.parametrize(("key", "value"), [("XWells", "-12"), ("YWells", "eight"),
                                            ("TimePoints", "-1"), ("ZSteps", "1.5")])
def test_htd_counts_that_are_not_whole_numbers_from_0_are_refused(key: str, value: str,
                                                                  tmp_path: Path) -> None:
    """Before: a negative plate size was kept."""
    extra = {"ZSeries": "TRUE"} if key == "ZSteps" else {}
    root = _imagexpress(tmp_path / "plate", _one_image_htd(**{key: value}, **extra))
    with pytest.raises(StoreFormatError, match=f"plate.HTD.*{key}.*{value!r}"):
        ImageXpressReader(root).metadata  # noqa: B018


@pytest.mark.parametrize("make", [
    lambda root: (root / "plate.HTD").mkdir(),
    lambda root: (root / "plate.HTD").symlink_to(root / "gone.HTD"),
], ids=["folder", "dangling-link"])
def test_an_htd_that_is_not_a_file_is_not_the_plates_metadata(make: object,
                                                             tmp_path: Path) -> None:
    """Before: IsADirectoryError / FileNotFoundError from open(); now the plate is read by
    its names, as the walk reads it (a folder or a dangling link holds no metadata)."""
    root = _imagexpress(tmp_path / "plate")
    make(root)  # type: ignore[operator]
    with pytest.warns(UserWarning, match="plate.HTD is .*not read"):
        summary = inspect_plate(root)
    assert summary.metadata.layout == "imagexpress" and summary.images == 1
    assert any(label == "note" and "plate.HTD is" in value for label, value in summary.rows())


def test_an_htd_line_over_the_csv_field_limit_names_the_file(tmp_path: Path) -> None:
    """Before: a bare _csv.Error (field larger than field limit (131072))."""
    root = _imagexpress(tmp_path / "plate", _one_image_htd(Description='"' + "x" * 200_000 + '"'))
    with pytest.raises(StoreFormatError, match=r"plate.HTD.*line 2"):
        ImageXpressReader(root).metadata  # noqa: B018


def test_a_tiff_whose_ifd_offset_lies_past_its_end_is_a_format_error(tmp_path: Path) -> None:
    """Before: a bare IndexError from tifffile (memtype inspect's header read)."""
    root = _imagexpress(tmp_path / "plate")
    image = root / "TimePoint_1" / "plate_A01_s1_w1.TIF"
    data = bytearray(image.read_bytes())
    data[4:8] = struct.pack("<I", 10**6)
    image.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(StoreFormatError, match="plate_A01_s1_w1.TIF"):
            inspect_plate(root)


@pytest.mark.parametrize(("htd", "said"), [
    (htd_text(rows=1, columns=1, wells=("A01",), sites=1, names=("DAPI",), zsteps=1),
     "beyond it are on disk (B03)"),
    (htd_text(rows=8, columns=12, wells=("A01",), sites=1, names=("DAPI",), zsteps=1),
     "does not select 1 well(s) whose images are on disk (B03"),
], ids=["plate-size", "well-selection"])
def test_an_htd_disagreeing_with_the_wells_on_disk_is_said(htd: str, said: str,
                                                          tmp_path: Path) -> None:
    """Before: listed without a word. Now a note in the metadata, a warning when it is read
    (the start of a run), and a row of memtype inspect."""
    root = _imagexpress(tmp_path / "plate", htd, wells=("A01", "B03"))
    with pytest.warns(UserWarning, match="plate.HTD") as caught:
        summary = inspect_plate(root)
    assert any(said in str(w.message) for w in caught)
    assert any(label == "note" and said in value for label, value in summary.rows())
    assert summary.values["well"] == ["A01", "B03"]


def test_an_htd_agreeing_with_the_wells_on_disk_has_no_note(tmp_path: Path) -> None:
    htd = htd_text(rows=8, columns=12, wells=("A01", "B03"), sites=1, names=("DAPI",), zsteps=1)
    root = _imagexpress(tmp_path / "plate", htd, wells=("A01", "B03"))
    assert ImageXpressReader(root).metadata.notes == ()


# -- Opera Phenix: the Harmony index -------------------------------------------------------------
def _phenix(root: Path, edit: tuple[str, str] | None = None) -> Path:
    """The shared Phenix plate, its index's text with ``edit`` (old, new) replaced."""
    write_phenix(root)
    if edit is not None:
        index = root / "Images" / "Index.idx.xml"
        text = index.read_text(encoding="utf-8")
        assert edit[0] in text
        index.write_text(text.replace(*edit), encoding="utf-8")
    return root


def test_a_harmony_index_linked_from_outside_the_input_is_never_parsed(tmp_path: Path) -> None:
    """Before: the index was parsed through the link, its channel names reached the output."""
    root = _phenix(tmp_path / "plate")
    index = root / "Images" / "Index.idx.xml"
    outside = tmp_path / "elsewhere.xml"
    outside.write_text(index.read_text(encoding="utf-8").replace(">DAPI<", ">SECRET<"),
                       encoding="utf-8")
    index.unlink()
    index.symlink_to(outside)
    reader = open_input(root)
    with pytest.warns(UserWarning, match="lead outside"):
        assert len(reader.records()) == 16  # read by the file names
    meta = reader.metadata
    assert "SECRET" not in meta.channel_names.values()
    assert "Index" not in meta.detected_from


@pytest.mark.parametrize(("edit", "said"), [
    (("<PlateRows>8<", "<PlateRows>eight<"), "<PlateRows> is 'eight'"),
    (("<PlateRows>8<", "<PlateRows>-8<"), "<PlateRows> is '-8'"),
    (("<Row>1</Row><Col>1</Col><FieldID>1", "<Row>0</Row><Col>1</Col><FieldID>1"),
     "<Row> is '0'"),
    (("<Row>1</Row><Col>1</Col><FieldID>1", "<Row>-1</Row><Col>1</Col><FieldID>1"),
     "<Row> is '-1'"),
    (("<FieldID>1</FieldID>", "<FieldID>0</FieldID>"), "<FieldID> is '0'"),
    (("<ChannelID>1</ChannelID>", "<ChannelID>0</ChannelID>"), "<ChannelID> is '0'"),
    (('<Entry ChannelID="1">', '<Entry ChannelID="DAPI">'), "ChannelID is 'DAPI'"),
    (("<TimepointID>0</TimepointID>", "<TimepointID>-1</TimepointID>"),
     "<TimepointID> is '-1'"),
    (("<TimepointID>0</TimepointID>", "<TimepointID>3</TimepointID>"),
     "<TimepointID> is 3 but the file is named for time point sk1"),
    (('<ImageResolutionX Unit="m">6.5e-07<', '<ImageResolutionX Unit="m">NaN<'),
     "<ImageResolutionX> is 'NaN'"),
    (('<ImageResolutionX Unit="m">6.5e-07<', '<ImageResolutionX Unit="m">inf<'),
     "<ImageResolutionX> is 'inf'"),
    (('<ImageResolutionX Unit="m">6.5e-07<', '<ImageResolutionX Unit="m">0<'),
     "<ImageResolutionX> is '0'"),
    (('<ImageResolutionX Unit="m">6.5e-07<', '<ImageResolutionX Unit="m">wide<'),
     "<ImageResolutionX> is 'wide'"),
    (('<ImageResolutionX Unit="m">', '<ImageResolutionX Unit="px">'), "Unit 'px'"),
    (('<PositionX Unit="m">', '<PositionX Unit="m">x'), "<PositionX> is 'x"),
], ids=["plate-rows-text", "plate-rows-negative", "row-0", "row-minus-1", "field-0",
        "channel-0", "entry-channel-text", "timepoint-minus-1", "timepoint-against-name",
        "resolution-nan", "resolution-inf", "resolution-0", "resolution-text",
        "resolution-unit", "position-text"])
def test_harmony_numbers_are_checked_where_they_are_read(edit: tuple[str, str], said: str,
                                                         tmp_path: Path) -> None:
    """Before: a bare ValueError, or well '1' for <Row>0, site 0, t 0, NaN pixel sizes."""
    root = _phenix(tmp_path / "plate", edit)
    with pytest.raises(StoreFormatError, match="Index.idx.xml") as caught:
        inspect_plate(root)
    assert said in str(caught.value)


def test_a_harmony_index_counting_time_points_from_1_is_read_from_1(tmp_path: Path) -> None:
    """Before: <TimepointID>1 of files named sk1 came out as t = 2 in every CSV and name."""
    root = _phenix(tmp_path / "plate", ("<TimepointID>0</TimepointID>",
                                        "<TimepointID>1</TimepointID>"))
    assert {r.get("t") for r in open_input(root).records()} == {1}


def test_a_harmony_index_counting_time_points_from_0_is_read_from_1(tmp_path: Path) -> None:
    assert {r.get("t") for r in open_input(_phenix(tmp_path / "plate")).records()} == {1}


def test_harmony_file_names_with_a_0_are_refused(tmp_path: Path) -> None:
    """Without an index the names are read: r00 is no row (it was well '1')."""
    _tiff(tmp_path / "plate" / "r00c01f01p01-ch1sk1fk1fl1.tiff")
    with pytest.raises(StoreFormatError, match="'r' of its name is '00'"):
        open_input(tmp_path / "plate").records()


# -- OME-TIFF ------------------------------------------------------------------------------------
def _ometiff(path: Path, edit: tuple[str, str] | None = None, plate: str = "",
             uuid_file: str | None = None, value: int = 1) -> Path:
    """A 2-channel OME-TIFF (CZYX, 2 planes) with its OME-XML's ``edit`` (old, new) replaced,
    ``plate`` added, and its ``<TiffData>`` naming ``uuid_file`` (if given)."""
    import tifffile

    path.parent.mkdir(parents=True, exist_ok=True)
    tifffile.imwrite(path, np.full((2, 1, 8, 10), value, np.uint16), ome=True,
                     metadata={"axes": "CZYX", "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.5})
    with tifffile.TiffFile(path) as tif:
        xml = tif.ome_metadata
    assert xml is not None
    if edit is not None:
        assert edit[0] in xml
        xml = xml.replace(*edit)
    if uuid_file is not None:
        xml = xml.replace('PlaneCount="2"/>', f'PlaneCount="2"><UUID FileName="{uuid_file}">'
                          'urn:uuid:00000000-0000-0000-0000-00000000beef</UUID></TiffData>')
    xml = xml.replace("</OME>", plate + "</OME>")
    tifffile.tiffcomment(path, xml.encode())
    return path


def _plate_xml(row: str = "1", column: str = "2", rows: str = "8") -> str:
    return (f'<Plate ID="Plate:0" Rows="{rows}" Columns="12"><Well ID="Well:0" Row="{row}" '
            f'Column="{column}"><WellSample ID="WellSample:0" Index="0"><ImageRef ID="Image:0"/>'
            "</WellSample></Well></Plate>")


@pytest.fixture
def opened() -> list[str]:
    """The paths the process opens while the test runs (an audit hook; ``open`` events of
    ``open()``, ``os.open`` and the like)."""
    import sys

    seen: list[str] = []
    active = [True]

    def hook(event: str, args: tuple[object, ...]) -> None:
        if active[0] and event == "open" and isinstance(args[0], (str, bytes)):
            seen.append(os.fsdecode(args[0]))

    sys.addaudithook(hook)  # audit hooks cannot be removed: this one stops when the test ends
    yield seen
    active[0] = False


@pytest.mark.parametrize("reference", ["../elsewhere/B03_s1.ome.tif", "B03_s1.ome.tif"],
                         ids=["dot-dot", "link-inside-to-outside"])
def test_an_ome_tiff_reference_to_a_file_outside_the_input_is_never_opened(
        reference: str, tmp_path: Path, opened: list[str]) -> None:
    """Before: tifffile followed <UUID FileName="../elsewhere/..."> (the check compared base
    names) and the outside file's pixels came back. Now the reference is resolved beneath
    the input: the image is named in metadata.missing and the outside file never opened."""
    outside = _ometiff(tmp_path / "elsewhere" / "B03_s1.ome.tif", value=99)
    root = tmp_path / "plate"
    _ometiff(root / "A01_s1.ome.tif")
    inner = "inner" if reference == "B03_s1.ome.tif" else ""
    _ometiff(root / inner / "B03_s1.ome.tif", uuid_file=reference)
    if inner:
        (root / inner / "B03_s1.ome.tif").rename(root / inner / "real.ome.tif")
        xml_file = root / inner / "real.ome.tif"
        (root / inner / "B03_s1.ome.tif").symlink_to(outside)
        assert xml_file.exists()
    opened.clear()  # what was opened to write the plate
    reader = open_input(root)
    with pytest.warns(UserWarning):
        records = reader.records()
    assert {r.get("well") for r in records} == {"A01"}
    assert any("outside the input" in m for m in reader.metadata.missing)
    assert not [p for p in opened if str(tmp_path / "elsewhere") in os.path.realpath(p)]


def test_an_ome_tiff_reference_to_itself_by_another_path_is_its_own(tmp_path: Path) -> None:
    """The file's own name, reached through a folder and '..', is the same file: the check
    resolves paths, it does not compare base names."""
    root = tmp_path / "plate"
    (root / "sub").mkdir(parents=True)
    _ometiff(root / "B03_s1.ome.tif", uuid_file="sub/../B03_s1.ome.tif", value=7)
    reader = open_input(root)
    records = reader.records()
    assert [r.get("channel") for r in records] == [1, 2]
    assert int(reader.load_batch([records[0].path])[0][0, 0]) == 7


def test_an_ome_tiff_reference_to_an_absent_file_is_named_missing(tmp_path: Path) -> None:
    """Before: tifffile zero-filled the planes of a missing file (with a log line)."""
    root = tmp_path / "plate"
    _ometiff(root / "A01_s1.ome.tif")
    _ometiff(root / "B03_s1.ome.tif", uuid_file="gone.ome.tif")
    reader = open_input(root)
    with pytest.warns(UserWarning, match="gone.ome.tif"):
        assert {r.get("well") for r in reader.records()} == {"A01"}
    assert any("'gone.ome.tif' (not a file in the input)" in m for m in reader.metadata.missing)


@pytest.mark.parametrize(("edit", "said"), [
    (('SizeZ="1" SizeC="2"', 'SizeZ="1000000" SizeC="1000000"'), "SizeC=1000000 SizeZ=1000000"),
    (('DimensionOrder="XYZCT"', 'DimensionOrder="XYQQT"'), "DimensionOrder is 'XYQQT'"),
    (('SizeX="10"', 'SizeX="ten"'), "SizeX=> is 'ten'"),
    (('PlaneCount="2"', f'PlaneCount="{10**12}"'), "PlaneCount=> is '1000000000000'"),
    (('SizeX="10" SizeY="8"', 'SizeX="1000000" SizeY="1000000"'),
     "<Pixels SizeY=1000000 SizeX=1000000> but its first page is 8 x 10"),
], ids=["sizes-beyond-the-pages", "dimension-order", "size-text", "plane-count",
        "plane-size-beyond-the-page"])
def test_ome_tiff_sizes_are_bounded_by_the_file_before_tifffile_builds_on_them(
        edit: tuple[str, str], said: str, tmp_path: Path) -> None:
    """Before: SizeC = SizeZ = 10^6 on 2 planes ended in MemoryError; a bad DimensionOrder
    in a bare KeyError. Now the file is left out, named in metadata.missing with the field
    and the value, and the plate's other files are read."""
    root = tmp_path / "plate"
    _ometiff(root / "A01_s1.ome.tif")
    _ometiff(root / "B03_s1.ome.tif", edit)
    reader = open_input(root)
    with pytest.warns(UserWarning, match="B03_s1.ome.tif"):
        assert {r.get("well") for r in reader.records()} == {"A01"}
    assert any(m.startswith("B03_s1.ome.tif:") and said in m for m in reader.metadata.missing)


@pytest.mark.parametrize(("edit", "plate", "said"), [
    (None, _plate_xml(row="-1"), "<Well Row=> is '-1'"),
    (None, _plate_xml(row="B"), "<Well Row=> is 'B'"),
    (None, _plate_xml(column="x"), "<Well Column=> is 'x'"),
    (None, _plate_xml(rows="eight"), "<Plate Rows=> is 'eight'"),
    (('PhysicalSizeX="0.5"', 'PhysicalSizeX="NaN"'), "", "PhysicalSizeX is 'NaN'"),
    (('PhysicalSizeX="0.5"', 'PhysicalSizeX="inf"'), "", "PhysicalSizeX is 'inf'"),
    (('PhysicalSizeX="0.5"', 'PhysicalSizeX="0"'), "", "PhysicalSizeX is '0'"),
    (('PhysicalSizeX="0.5"', 'PhysicalSizeX="-0.5"'), "", "PhysicalSizeX is '-0.5'"),
    (('PhysicalSizeX="0.5"', 'PhysicalSizeX="half"'), "", "PhysicalSizeX is 'half'"),
    (('PhysicalSizeX="0.5"', 'PhysicalSizeX="0.5" PhysicalSizeXUnit="furlong"'), "",
     "PhysicalSizeXUnit is 'furlong'"),
], ids=["row-negative", "row-letter", "column-text", "plate-rows-text", "size-nan",
        "size-inf", "size-0", "size-negative", "size-text", "size-unit"])
def test_ome_xml_numbers_are_checked_where_they_are_read(
        edit: tuple[str, str] | None, plate: str, said: str, tmp_path: Path) -> None:
    """Before: a bare ValueError, well 'A' for Row -1, NaN pixel sizes accepted."""
    root = tmp_path / "plate"
    _ometiff(root / "B03_s1.ome.tif", edit, plate)
    with pytest.raises(StoreFormatError, match="B03_s1.ome.tif") as caught:
        inspect_plate(root)
    assert said in str(caught.value)


def test_ome_xml_in_pixel_units_has_no_size_in_micrometres(tmp_path: Path) -> None:
    root = tmp_path / "plate"
    _ometiff(root / "B03_s1.ome.tif", ('PhysicalSizeX="0.5"',
                                       'PhysicalSizeX="0.5" PhysicalSizeXUnit="pixel"'))
    assert open_input(root).metadata.pixel_size_um is None


# -- the layout a pipeline reads, and what a folder holds -----------------------------------------
@mt.numpy
def _same(image: np.ndarray) -> np.ndarray:
    return image


def _htd_beside_named_files(root: Path) -> Path:
    """An .HTD beside files named by the default pattern (none by MetaXpress's names)."""
    root.mkdir(parents=True)
    (root / "plate.HTD").write_text(htd_text(wells=("A01",), sites=1, names=("DAPI",),
                                             zsteps=1), newline="")
    for well in ("A01", "B02"):
        _tiff(root / f"{well}_s1_w1_z001.tif")
    return root


def test_a_pipeline_declaring_its_pattern_reads_by_it_beside_an_htd(tmp_path: Path) -> None:
    """Before: a pipeline whose pattern= was the default's text was read as ImageXpress (the
    .HTD won) and the run failed asking for --pattern."""
    root = _htd_beside_named_files(tmp_path / "plate")
    reader = Pipeline([_same], pattern=DEFAULT_PATTERN).reader(root)
    assert reader.layout == "pattern"
    assert [r.get("well") for r in reader.records()] == ["A01", "B02"]


def test_a_pipeline_without_a_pattern_detects_the_layout(tmp_path: Path) -> None:
    root = _htd_beside_named_files(tmp_path / "plate")
    assert Pipeline([_same]).reader(root).layout == "imagexpress"


def test_a_folder_of_several_plates_says_so(tmp_path: Path) -> None:
    """Before: "No file matches the pattern ... pass --pattern"."""
    root = tmp_path / "experiment"
    _imagexpress(root / "plateA", _one_image_htd())
    _ometiff(root / "plateB" / "B03_s1.ome.tif")
    with pytest.raises(NoImagesError, match="holds 2 plate") as caught:
        open_input(root).records()
    assert "plateA: imagexpress, plateB: ome-tiff" in str(caught.value)
    assert repr(str(root / "plateA")) in str(caught.value)


def test_a_single_ome_zarr_image_says_it_is_not_a_plate(tmp_path: Path) -> None:
    """Before: "No file matches the pattern" for an OME-Zarr image (multiscales, no plate)."""
    root = tmp_path / "image.zarr"
    root.mkdir()
    (root / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    axes = [{"name": n, "type": "space"} for n in "yx"]
    (root / ".zattrs").write_text(json.dumps({"multiscales": [
        {"version": "0.4", "axes": axes, "datasets": [{"path": "0"}]}]}))
    with pytest.raises(NoImagesError, match="single OME-Zarr image.*not a plate"):
        open_input(root).records()


@pytest.mark.parametrize("url", ["s3://bucket/plate", "https://example.org/plate"])
def test_a_vendor_reader_given_an_address_says_only_ome_zarr_is_read_from_one(
        url: str) -> None:
    """Before: "Input directory 's3://bucket/plate' does not exist"."""
    with pytest.raises(StoreNotFoundError, match="only OME-Zarr plates are read from"):
        ImageXpressReader(url)


# -- siblings: the same causes in the other places each reader reads a number ---------------------
@pytest.mark.parametrize(("name", "said"), [
    ("TimePoint_1/plate_A01_s0_w1.TIF", "the site of its name is '0'"),
    ("TimePoint_1/plate_A01_s1_w0.TIF", "the channel of its name is '0'"),
    ("TimePoint_0/plate_A01_s1_w1.TIF", "its TimePoint_<t> is '0'"),
], ids=["site-0", "channel-0", "timepoint-0"])
def test_imagexpress_names_counting_from_0_are_refused(name: str, said: str,
                                                      tmp_path: Path) -> None:
    """Before: site 0, channel 0 or t 0 reached the output."""
    root = tmp_path / "plate"
    _tiff(root / name)
    with pytest.raises(StoreFormatError) as caught:
        ImageXpressReader(root).records()
    assert said in str(caught.value)


@pytest.mark.parametrize("value", [math.nan, math.inf, 0.0, -0.65],
                         ids=["nan", "inf", "zero", "negative"])
def test_imagexpress_calibrations_that_are_no_length_are_refused(value: float,
                                                                tmp_path: Path) -> None:
    """Before: NaN and inf were the pixel size (every group then failed at write time)."""
    root = tmp_path / "plate"
    _tif(root / "TimePoint_1" / "plate_A01_s1_w1.TIF", np.zeros((8, 10), np.uint16),
         metaxpress_description("A01", 1, 1, 1, pixel_um=value))
    with pytest.raises(StoreFormatError, match="plate_A01_s1_w1.TIF.*spatial-calibration-y"):
        ImageXpressReader(root).metadata  # noqa: B018


def test_an_ome_tiff_nested_too_deeply_is_left_out_naming_it(tmp_path: Path) -> None:
    """Before: a RecursionError from the XML serializer (now that the file's own images'
    OME-XML is handed to tifffile)."""
    root = tmp_path / "plate"
    _ometiff(root / "A01_s1.ome.tif")
    _ometiff(root / "B03_s1.ome.tif", ("<TiffData", "<A>" * 50_000 + "</A>" * 50_000
                                       + "<TiffData"))
    reader = open_input(root)
    with pytest.warns(UserWarning, match="nested too deeply"):
        assert {r.get("well") for r in reader.records()} == {"A01"}


def test_an_htd_over_16_mib_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    root = _imagexpress(tmp_path / "plate", _one_image_htd())
    with (root / "plate.HTD").open("ab") as fh:
        fh.write(b'"Padding", ' + b"x" * (17 << 20) + b"\r\n")
    with pytest.raises(StoreFormatError, match="plate.HTD.*over 16 MiB"):
        ImageXpressReader(root).metadata  # noqa: B018
