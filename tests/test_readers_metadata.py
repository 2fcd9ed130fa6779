"""Plate metadata beyond the listing: ImageXpress channel names and pixel sizes from the TIFFs'
MetaXpress descriptions (one header per channel), Opera Phenix field positions and the index
read once (``Index.ref.xml`` too), and what ``memtype inspect`` shows of them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memtype.errors import StoreFormatError
from memtype.pipeline.io.inspection import inspect_plate
from memtype.pipeline.readers import FieldPosition, ImageXpressReader, PhenixReader
from memtype.pipeline.readers.imagexpress import tiff_properties
from tests.readers_support import (
    CHANNEL_NAMES,
    FIELD_Y_UM,
    PIXEL_UM,
    SHAPE,
    WELLS,
    Z_STEP_UM,
    _tif,
    field_x_um,
    htd_text,
    metaxpress_description,
    phenix_name,
    phenix_xml,
    plane,
    planes,
    write_imagexpress,
    write_phenix,
)

pytestmark = pytest.mark.requires("tifffile")


# -- ImageXpress: the TIFFs' MetaXpress descriptions ----------------------------------------
def _ix_plate(root: Path, htd: str | None = None, **description: object) -> Path:
    """An ImageXpress plate whose TIFFs carry ``metaxpress_description(**description)``."""
    root.mkdir(parents=True)
    if htd is not None:
        (root / "plate.HTD").write_text(htd, newline="")
    for w, s, c, z in planes():
        _tif(root / f"TimePoint_1/ZStep_{z}/P_{w}_s{s}_w{c}.TIF", plane(w, s, c, z),
             metaxpress_description(w, s, c, z, **description))  # type: ignore[arg-type]
    return root


def test_imagexpress_without_htd_reads_names_and_sizes_from_the_tiffs(tmp_path: Path) -> None:
    meta = ImageXpressReader(_ix_plate(tmp_path / "plate")).metadata
    assert meta.channel_names == dict(enumerate(CHANNEL_NAMES, start=1))
    assert meta.pixel_size_um == pytest.approx((PIXEL_UM, PIXEL_UM))
    assert meta.z_step_um == pytest.approx(Z_STEP_UM)
    assert meta.rows is None and meta.missing == ()


def test_imagexpress_htd_names_take_precedence_over_the_tiffs(tmp_path: Path) -> None:
    htd = htd_text(names=("Hoechst", "Alexa 488"))
    meta = ImageXpressReader(_ix_plate(tmp_path / "plate", htd)).metadata
    assert meta.channel_names == {1: "Hoechst", 2: "Alexa 488"}
    assert meta.pixel_size_um == pytest.approx((PIXEL_UM, PIXEL_UM))


def test_imagexpress_tiff_names_fill_channels_the_htd_does_not_name(tmp_path: Path) -> None:
    htd = htd_text().replace('"WaveName2", "FITC"\r\n', "")
    root = _ix_plate(tmp_path / "plate", htd, name="4. GREEN penta")
    assert ImageXpressReader(root).metadata.channel_names == {1: "DAPI", 2: "4. GREEN penta"}


@pytest.mark.parametrize(("units", "value", "expected"), [
    ("um", 0.65, 0.65), ("microns", 1.3, 1.3), ("UM", 0.65, 0.65), ("nm", 325.0, 0.325),
    ("mm", 0.0008, 0.8), ("pixel", 1.0, None),
])
def test_imagexpress_pixel_size_in_the_description_units(units: str, value: float,
                                                         expected: float | None,
                                                         tmp_path: Path) -> None:
    root = _ix_plate(tmp_path / "plate", units=units, pixel_um=value)
    size = ImageXpressReader(root).metadata.pixel_size_um
    assert size == (None if expected is None else pytest.approx((expected, expected)))


def test_imagexpress_calibration_off_is_no_pixel_size(tmp_path: Path) -> None:
    root = _ix_plate(tmp_path / "plate", calibrated="off")
    assert ImageXpressReader(root).metadata.pixel_size_um is None


def test_imagexpress_tiffs_without_descriptions_give_htd_metadata_only(tmp_path: Path) -> None:
    root = tmp_path / "plate"
    root.mkdir()
    (root / "plate.HTD").write_text(htd_text(), newline="")
    for w, s, c, z in planes():
        _tif(root / f"TimePoint_1/ZStep_{z}/P_{w}_s{s}_w{c}.TIF", plane(w, s, c, z))
    meta = ImageXpressReader(root).metadata
    assert meta.channel_names == dict(enumerate(CHANNEL_NAMES, start=1))
    assert meta.pixel_size_um is None and meta.z_step_um is None


def test_imagexpress_a_first_image_that_is_not_a_tiff_is_named(tmp_path: Path) -> None:
    root = write_imagexpress(tmp_path / "plate")
    broken = root / "TimePoint_1/ZStep_1/MFGTMP_140206180002_A01_s1_w2.TIF"
    broken.write_bytes(b"not a tiff at all")
    reader = ImageXpressReader(root)
    assert len(reader.records()) == 16  # listing reads no file
    with pytest.warns(UserWarning, match="A01_s1_w2.TIF.*not a readable TIFF"):
        meta = reader.metadata  # the plate is still inspected: the HTD names its channels
    assert meta.channel_names == dict(enumerate(CHANNEL_NAMES, start=1))
    with pytest.raises(StoreFormatError, match="A01_s1_w2.TIF"):
        reader.load_batch(["TimePoint_1/ZStep_1/MFGTMP_140206180002_A01_s1_w2.TIF"])


def test_imagexpress_metadata_reads_one_header_per_channel(tmp_path: Path) -> None:
    """Every image but A01 site 1's (channels 1 and 2, plane 1; channel 1, plane 2) is a
    garbage file: the metadata is complete, so no other file was read."""
    root = _ix_plate(tmp_path / "plate", htd_text())
    keep = {"ZStep_1/P_A01_s1_w1.TIF", "ZStep_1/P_A01_s1_w2.TIF", "ZStep_2/P_A01_s1_w1.TIF"}
    for path in root.glob("TimePoint_1/ZStep_*/*.TIF"):
        if f"{path.parent.name}/{path.name}" not in keep:
            path.write_bytes(b"\x00garbage, not a TIFF" * 4)
    meta = ImageXpressReader(root).metadata
    assert meta.channel_names == dict(enumerate(CHANNEL_NAMES, start=1))
    assert meta.pixel_size_um == pytest.approx((PIXEL_UM, PIXEL_UM))
    assert meta.z_step_um == pytest.approx(Z_STEP_UM)


def test_tiff_properties_reads_plane_info_and_top_level_props(tmp_path: Path) -> None:
    path = tmp_path / "a.tif"
    _tif(path, np.zeros(SHAPE, np.uint16), metaxpress_description("B03", 2, 1, 1))
    props = tiff_properties(str(path))
    assert props["ApplicationName"] == "MetaXpress"
    assert props["stage-label"] == "B03 : Site 2"
    assert props["_IllumSetting_"] == "DAPI"
    assert props["ImageXpress Micro Y"] == "8000.25"  # a <custom-prop>


def test_tiff_properties_of_a_tiff_without_metamorph_xml_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "a.tif"
    _tif(path, np.zeros(SHAPE, np.uint16))
    assert tiff_properties(str(path)) == {}


def test_tiff_properties_of_broken_metamorph_xml_says_so(tmp_path: Path) -> None:
    path = tmp_path / "a.tif"
    _tif(path, np.zeros(SHAPE, np.uint16), '<MetaData><prop id="x" value="1"></MetaData>')
    with pytest.raises(StoreFormatError, match="not valid XML"):
        tiff_properties(str(path))


# -- Opera Phenix: field positions, the index read once -------------------------------------
def test_phenix_field_positions_per_field_in_micrometres(tmp_path: Path) -> None:
    positions = PhenixReader(write_phenix(tmp_path / "export")).metadata.field_positions
    assert sorted(positions) == [(w, s) for w in WELLS for s in (1, 2)]
    for (_, site), position in positions.items():
        assert isinstance(position, FieldPosition)
        assert position == pytest.approx((field_x_um(site), FIELD_Y_UM, 0.0))


def test_phenix_field_positions_follow_the_unit_attribute(tmp_path: Path) -> None:
    root = write_phenix(tmp_path / "export")
    index = root / "Images" / "Index.idx.xml"
    text = index.read_text(encoding="utf-8")
    x = f'<PositionX Unit="m">{field_x_um(2) * 1e-6!r}</PositionX>'
    index.write_text(text.replace(x, '<PositionX Unit="um">325.5</PositionX>'),
                     encoding="utf-8")
    positions = PhenixReader(root).metadata.field_positions
    assert positions[("A01", 2)].x_um == pytest.approx(325.5)
    assert positions[("A01", 1)].x_um == pytest.approx(field_x_um(1))


def test_phenix_without_positions_has_none(tmp_path: Path) -> None:
    root = write_phenix(tmp_path / "export", index=False)
    assert PhenixReader(root).metadata.field_positions == {}


def test_phenix_index_is_parsed_once(tmp_path: Path) -> None:
    """The listing's one pass gives the metadata too: an index broken after the listing is
    not read again."""
    root = write_phenix(tmp_path / "export")
    reader = PhenixReader(root)
    assert len(reader.records()) == 16
    (root / "Images" / "Index.idx.xml").write_text("<not xml", encoding="utf-8")
    meta = reader.metadata
    assert meta.channel_names == dict(enumerate(CHANNEL_NAMES, start=1))
    assert meta.z_step_um == pytest.approx(Z_STEP_UM)


def test_phenix_metadata_first_lists_once(tmp_path: Path) -> None:
    root = write_phenix(tmp_path / "export")
    reader = PhenixReader(root)
    meta = reader.metadata  # lists (the index's one pass) before the records are asked for
    (root / "Images" / "Index.idx.xml").write_text("<not xml", encoding="utf-8")
    assert len(reader.records()) == 16 and meta.pixel_size_um is not None


def test_phenix_index_ref_xml_is_read_like_the_index(tmp_path: Path) -> None:
    root = write_phenix(tmp_path / "export")
    (root / "Images" / "Index.idx.xml").rename(root / "Images" / "Index.ref.xml")
    reader = PhenixReader(root)
    assert reader.layout == "phenix"
    assert PhenixReader.detect(str(root)) == "Images/Index.ref.xml"
    assert len(reader.records()) == 16
    assert reader.metadata.channel_names == dict(enumerate(CHANNEL_NAMES, start=1))


def test_phenix_broken_index_is_a_store_format_error(tmp_path: Path) -> None:
    root = write_phenix(tmp_path / "export")
    (root / "Images" / "Index.idx.xml").write_text("<EvaluationInputData><Images>",
                                                   encoding="utf-8")
    with pytest.raises(StoreFormatError, match="Index.idx.xml.*not valid XML"):
        PhenixReader(root).records()


def test_phenix_urls_with_backslashes_or_dots_are_found(tmp_path: Path) -> None:
    root = tmp_path / "export"
    name = phenix_name("A01", 1, 1, 1)
    _tif(root / "Images" / "sub" / name, plane("A01", 1, 1, 1))
    xml = phenix_xml([("A01", 1, 1, 1, f"sub\\{name}"), ("A01", 1, 2, 1, f"./sub/../{name}")])
    (root / "Images" / "Index.idx.xml").write_text(xml, encoding="utf-8")
    reader = PhenixReader(root)
    assert [r.path for r in reader.records()] == [f"Images/sub/{name}"]
    assert len(reader.metadata.missing) == 1 and "channel=2" in reader.metadata.missing[0]


# -- memtype inspect ------------------------------------------------------------------------
def test_inspect_shows_phenix_field_positions(tmp_path: Path) -> None:
    rows = dict(inspect_plate(write_phenix(tmp_path / "export")).rows())
    assert rows["field positions"] == (
        "4 fields (2 wells x 2 sites); site 1 at x -325, y 120 µm; site 2 at x 325, y 120 µm")


def test_inspect_shows_imagexpress_pixel_size_from_the_tiffs(tmp_path: Path) -> None:
    rows = dict(inspect_plate(write_imagexpress(tmp_path / "plate")).rows())
    assert rows["pixel size"] == f"{PIXEL_UM:g} x {PIXEL_UM:g} µm, z step {Z_STEP_UM:g} µm"
    assert rows["channels"] == "2: 1 (DAPI), 2 (FITC)"


def test_a_columbus_export_is_not_read_as_phenix_and_says_what_is_expected(
        tmp_path: Path) -> None:
    from memtype.errors import NoImagesError
    from memtype.pipeline.readers import detect_layout, open_input

    root = tmp_path / "columbus"
    root.mkdir()
    (root / "ImageIndex.ColumbusIDX.xml").write_text(
        '<?xml version="1.0"?><EvaluationInputData xmlns="http://www.perkinelmer.com/Columbus">'
        "<Images/></EvaluationInputData>", encoding="utf-8")
    (root / "001001000.flex").write_bytes(b"II*\x00")
    assert detect_layout(root)[0] == "pattern"
    with pytest.raises(NoImagesError, match=r"read as layout 'phenix'.*Index\.ref\.xml"):
        open_input(root, layout="phenix").records()


def test_imagexpress_missing_counts_wavelengths_the_htd_does_not_name(tmp_path: Path) -> None:
    """``NWavelengths`` announces the channels even without ``WaveName<n>`` lines: an absent
    channel-2 image is missing (it was not looked for when only named channels counted)."""
    htd = "".join(line + "\r\n" for line in htd_text().splitlines()
                  if not line.startswith('"WaveName'))
    root = _ix_plate(tmp_path / "plate", htd)
    (root / "TimePoint_1/ZStep_2/P_B03_s1_w2.TIF").unlink()
    meta = ImageXpressReader(root).metadata
    assert meta.missing == ("well=B03 site=1 channel=2 z=2 t=1",)
    assert meta.channel_names == dict(enumerate(CHANNEL_NAMES, start=1))  # from the TIFFs
