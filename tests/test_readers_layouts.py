"""Plate readers: one plate in every layout lists the same images, reads the same pixels and
the vendor's metadata, lazily; layout detection and each vendor's particular names."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.errors import InvalidArgumentError, NoImagesError
from memtype.pipeline.readers import (
    ImageXpressReader,
    OmeTiffReader,
    OmeZarrReader,
    PhenixReader,
    detect_layout,
    open_input,
    parse_htd,
)
from tests.readers_support import (
    CHANNEL_NAMES,
    OME_ZARR,
    PATTERN,
    PIXEL_UM,
    SHAPE,
    WRITERS,
    Z_STEP_UM,
    htd_text,
    layout_params,
    phenix_name,
    plane,
    planes,
    write_imagexpress,
    write_phenix,
)

pytestmark = pytest.mark.requires("tifffile", "zarr")

LAYOUT_OF = {"pattern": "pattern", "imagexpress": "imagexpress", "phenix": "phenix",
             "phenix-names-only": "phenix", "ome-zarr-0.4": "ome-zarr",
             "ome-zarr-0.5": "ome-zarr", "ome-tiff": "ome-tiff"}
"""The layout detected for each fixture (the pattern copy has a TimePoint folder, but no
MetaXpress names in it)."""
METADATA = ("imagexpress", "phenix", "ome-zarr-0.4", "ome-zarr-0.5", "ome-tiff")
"""The fixtures whose metadata names the channels."""


@pytest.fixture(params=layout_params(WRITERS))
def plate(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    return request.param, WRITERS[request.param](tmp_path / "plate")


def _reader(name: str, root: Path) -> Any:
    return open_input(root, pattern=PATTERN if name == "pattern" else None)


def test_the_layout_is_detected(plate: tuple[str, Path]) -> None:
    name, root = plate
    assert detect_layout(root)[0] == LAYOUT_OF[name]


def test_every_layout_lists_the_same_images(plate: tuple[str, Path]) -> None:
    name, root = plate
    fields = [r.fields for r in _reader(name, root).records()]
    expected = [{"well": w, "site": s, "channel": c, "z": z, "t": 1} for w, s, c, z in planes()]
    assert sorted(fields, key=lambda f: sorted(f.items())) == \
        sorted(expected, key=lambda f: sorted(f.items()))


def test_every_layout_reads_the_same_pixels(plate: tuple[str, Path]) -> None:
    name, root = plate
    reader = _reader(name, root)
    records = reader.records()
    for rec, image in zip(records, reader.load_batch([r.path for r in records]), strict=True):
        f = rec.fields
        np.testing.assert_array_equal(image, plane(f["well"], f["site"], f["channel"], f["z"]))


def test_the_first_image_header_gives_shape_and_dtype(plate: tuple[str, Path]) -> None:
    name, root = plate
    reader = _reader(name, root)
    assert reader.header(reader.records()[0].path) == (SHAPE, np.dtype(np.uint16))


def test_a_reader_pickles_without_its_listing_and_reads_after(plate: tuple[str, Path]) -> None:
    name, root = plate
    reader = _reader(name, root)
    paths = [r.path for r in reader.records()[:3]]
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._records is None
    for got, want in zip(copy.load_batch(paths), reader.load_batch(paths), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", layout_params(METADATA))
def test_channel_names_come_from_the_metadata(name: str, tmp_path: Path) -> None:
    reader = open_input(WRITERS[name](tmp_path / "plate"))
    assert reader.metadata.channel_names == dict(enumerate(CHANNEL_NAMES, start=1))


@pytest.mark.parametrize("name", layout_params(["imagexpress", "phenix", "ome-zarr-0.4",
                                                "ome-zarr-0.5", "ome-tiff"]))
def test_pixel_sizes_come_from_the_metadata(name: str, tmp_path: Path) -> None:
    meta = open_input(WRITERS[name](tmp_path / "plate")).metadata
    assert meta.pixel_size_um == pytest.approx((PIXEL_UM, PIXEL_UM))
    assert meta.z_step_um == pytest.approx(Z_STEP_UM)


# -- listing reads no pixel data ------------------------------------------------------------
@pytest.mark.parametrize(("name", "metadata"), [
    ("pattern", ()), ("phenix", (".xml",)),
    # the .HTD, and the TIFF headers of one image per channel (its planes 1 and 2: the z step)
    ("imagexpress", (".HTD", "_A01_s1_w1.TIF", "_A01_s1_w2.TIF")),
    ("phenix-names-only", ()),
    pytest.param("ome-zarr-0.4", (".zattrs", ".zarray", ".zgroup"), marks=OME_ZARR),
    pytest.param("ome-zarr-0.5", ("zarr.json",), marks=OME_ZARR),
])
def test_listing_reads_no_pixel_data(name: str, metadata: tuple[str, ...],
                                     tmp_path: Path) -> None:
    """Every pixel-bearing file is garbage: the listing and the metadata are complete, and
    only reading an image fails. (An OME-TIFF's listing reads each file's header by design;
    ImageXpress metadata reads one TIFF header per channel, which stay readable here.)"""
    from memtype.errors import StoreFormatError

    root = WRITERS[name](tmp_path / "plate")
    for directory, _, files in os.walk(root):
        for file in files:
            if not file.endswith(metadata):
                Path(directory, file).write_bytes(b"\x00garbage, not pixels" * 3)
    reader = _reader(name, root)
    records = reader.records()
    assert len(records) == 16 and reader.metadata.layout
    with pytest.raises(StoreFormatError):
        reader.load_batch([records[-1].path])


# -- detection and forcing ------------------------------------------------------------------
def test_an_unknown_layout_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="'imagexpress'"):
        open_input(tmp_path, layout="nikon")


def test_a_pattern_with_a_vendor_layout_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="'pattern' layout only"):
        open_input(tmp_path, layout="phenix", pattern="{well}.tif")


def test_a_forced_layout_is_read_as_that_layout(tmp_path: Path) -> None:
    root = write_phenix(tmp_path / "plate")
    reader = open_input(root, layout="pattern", pattern="Images/r{row}c{col}f{f}p{p}-ch{ch}"
                        "sk{sk}fk{fk}fl{fl}.tiff")
    assert reader.layout == "pattern" and len(reader.records()) == 16


def test_a_forced_layout_that_finds_nothing_says_so(tmp_path: Path) -> None:
    root = write_phenix(tmp_path / "plate")
    with pytest.raises(NoImagesError, match="'imagexpress'.*--layout"):
        open_input(root, layout="imagexpress").records()


# -- ImageXpress ----------------------------------------------------------------------------
def test_imagexpress_leaves_out_thumbnails_and_projections(tmp_path: Path) -> None:
    paths = [r.path for r in ImageXpressReader(write_imagexpress(tmp_path / "p")).records()]
    assert len(paths) == 16
    assert all("/ZStep_" in p and "_thumb" not in p for p in paths)


def _tif(path: Path, value: int = 1) -> None:
    import tifffile

    path.parent.mkdir(parents=True, exist_ok=True)
    tifffile.imwrite(path, np.full((4, 4), value, np.uint16))


@pytest.mark.parametrize(("name", "fields"), [
    ("Plate1_B03.TIF", ("B03", 1, 1)),
    ("Plate1_B03_w2.TIF", ("B03", 1, 2)),
    ("Plate1_B03_s4.tif", ("B03", 4, 1)),
    ("B03_s2_w3.tiff", ("B03", 2, 3)),
    ("MFGTMP_140206180002_P24_s9_w4.Tif", ("P24", 9, 4)),
    ("exp_A01_s1_w1F1A2B3C4-1234-5678-9ABC-DEF012345678.TIF", ("A01", 1, 1)),
    ("exp_A01_s1_w13F8A9B2C-1234-5678-9ABC-DEF012345678.tif", ("A01", 1, 1)),
    ("AB12_run_2_C05_s1_w2.TIF", ("C05", 1, 2)),
    ("A01_B02_s3.TIF", ("B02", 3, 1)),
], ids=["no-site-no-channel", "no-site", "no-channel", "no-prefix-tiff", "384-well",
        "guid-after-channel", "guid-starting-with-a-digit", "prefix-with-a-well-and-underscores",
        "prefix-is-a-well"])
def test_imagexpress_names(name: str, fields: tuple[str, int, int], tmp_path: Path) -> None:
    _tif(tmp_path / "TimePoint_1" / name)
    [rec] = ImageXpressReader(tmp_path).records()
    assert (rec.get("well"), rec.get("site"), rec.get("channel"), rec.get("t")) == (*fields, 1)


def test_imagexpress_time_points_and_z_steps_come_from_folders(tmp_path: Path) -> None:
    for t in (1, 2):
        for z in (1, 2, 3):
            _tif(tmp_path / f"TimePoint_{t}" / f"ZStep_{z}" / "p_A01_s1_w1.TIF")
    recs = ImageXpressReader(tmp_path).records()
    assert sorted((r.get("t"), r.get("z")) for r in recs) == \
        [(t, z) for t in (1, 2) for z in (1, 2, 3)]


def test_imagexpress_names_of_other_layouts_are_not_images(tmp_path: Path) -> None:
    _tif(tmp_path / "TimePoint_1" / "A01_s1_w1_z1.tif")  # memtype's own names: a pattern
    with pytest.raises(NoImagesError, match="--pattern"):
        ImageXpressReader(tmp_path).records()


def test_timepoint_folders_of_other_names_are_read_by_pattern(tmp_path: Path) -> None:
    _tif(tmp_path / "TimePoint_1" / "A01_s1_w1_z001.tif")  # memtype's own names
    assert detect_layout(tmp_path)[0] == "pattern"
    assert [r.get("z") for r in open_input(tmp_path).records()] == [1]


def test_a_zstep_folder_with_metaxpress_names_is_imagexpress(tmp_path: Path) -> None:
    _tif(tmp_path / "TimePoint_1" / "ZStep_1" / "p_A01_s1_w1.TIF")
    assert detect_layout(tmp_path) == ("imagexpress", "TimePoint_1/")


def test_imagexpress_missing_images_are_listed_not_refused(tmp_path: Path) -> None:
    root = write_imagexpress(tmp_path / "p")
    (root / "TimePoint_1/ZStep_2/MFGTMP_140206180002_B03_s2_w1.TIF").unlink()
    reader = ImageXpressReader(root)
    assert len(reader.records()) == 15
    assert reader.metadata.missing == ("well=B03 site=2 channel=1 z=2 t=1",)


def test_parse_htd(tmp_path: Path) -> None:
    path = tmp_path / "plate.HTD"
    path.write_text(htd_text(rows=16, columns=24, wells=("A01", "P24"), sites=3,
                             names=("DAPI", "GFP", "Cy5"), zsteps=5, timepoints=2), newline="")
    info = parse_htd(str(path))
    assert (info.rows, info.columns, info.wells, info.sites) == (16, 24, ("A01", "P24"), 3)
    assert info.channel_names == {1: "DAPI", 2: "GFP", 3: "Cy5"}
    assert (info.zsteps, info.timepoints, info.wavelengths) == (5, 2, 3)


# -- Opera Phenix / Operetta ----------------------------------------------------------------
def test_phenix_rows_and_columns_become_well_names(tmp_path: Path) -> None:
    _tif(tmp_path / "r02c03f01p01-ch1sk1fk1fl1.tiff")
    [rec] = PhenixReader(tmp_path).records()
    assert rec.fields == {"well": "B03", "site": 1, "channel": 1, "z": 1, "t": 1}


def test_phenix_index_is_the_truth_and_absent_files_are_missing(tmp_path: Path) -> None:
    root = write_phenix(tmp_path / "p")
    (root / "Images" / phenix_name("A01", 2, 1, 1)).unlink()
    (root / "Images" / "r05c05f01p01-ch1sk1fk1fl1.tiff").write_bytes(b"not in the index")
    reader = PhenixReader(root)
    assert len(reader.records()) == 15
    assert reader.metadata.missing == (
        f"Images/{phenix_name('A01', 2, 1, 1)} (A01 site=2 channel=1 z=1 t=1)",)


def test_phenix_index_xml_of_newer_harmony(tmp_path: Path) -> None:
    root = write_phenix(tmp_path / "p")
    (root / "Images" / "Index.idx.xml").rename(root / "Images" / "Index.xml")
    reader = open_input(root)
    assert reader.layout == "phenix" and reader.metadata.detected_from == "Images/Index.xml"
    assert len(reader.records()) == 16


def test_phenix_export_folder_or_its_images_folder(tmp_path: Path) -> None:
    root = write_phenix(tmp_path / "p")
    assert len(PhenixReader(root / "Images").records()) == 16


# -- OME-Zarr -------------------------------------------------------------------------------
def test_memtypes_own_plate_is_read_back(tmp_path: Path) -> None:
    from memtype.storage import ZarrStore

    plate = ZarrStore(str(tmp_path / "out.zarr"), rows=("A", "B"), columns=("1", "2", "3"))
    data = np.arange(2 * 3 * 16, dtype=np.uint16).reshape(2, 3, 4, 4)
    plate.save(data, plate.field_path("B", 3, "1"), axes="czyx", parents=True,
               channel_names=["DAPI", "GFP"])
    reader = OmeZarrReader(tmp_path / "out.zarr")
    records = reader.records()
    assert {(r.get("well"), r.get("channel"), r.get("z")) for r in records} == \
        {("B03", c, z) for c in (1, 2) for z in (1, 2, 3)}
    images = reader.load_batch([r.path for r in records])
    for rec, image in zip(records, images, strict=True):
        np.testing.assert_array_equal(image, data[rec.get("channel") - 1, rec.get("z") - 1])
    assert reader.metadata.channel_names == {1: "DAPI", 2: "GFP"}


# -- OME-TIFF -------------------------------------------------------------------------------
def test_ome_tiff_positions_of_one_file_are_sites(tmp_path: Path) -> None:
    import tifffile

    with tifffile.TiffWriter(tmp_path / "run_B03.ome.tif", ome=True) as tif:
        for site in (1, 2, 3):
            tif.write(np.full((2, 4, 4), site, np.uint16), photometric="minisblack",
                      metadata={"axes": "ZYX"})
    reader = OmeTiffReader(tmp_path)
    records = reader.records()
    assert sorted({(r.get("well"), r.get("site")) for r in records}) == \
        [("B03", 1), ("B03", 2), ("B03", 3)]
    for rec, image in zip(records, reader.load_batch([r.path for r in records]), strict=True):
        assert image.shape == (4, 4) and int(image[0, 0]) == rec.get("site")


def test_ome_tiff_without_plate_or_well_name_is_refused(tmp_path: Path) -> None:
    import tifffile

    from memtype.errors import StoreFormatError

    tifffile.imwrite(tmp_path / "scan.ome.tif", np.zeros((4, 4), np.uint16), ome=True)
    with pytest.raises(StoreFormatError, match="scan.ome.tif.*no well in its name"):
        OmeTiffReader(tmp_path).records()
