"""Real vendor exports in the variants our first fixtures did not have: each fixture follows a
published plate's folder tree and names (the source is cited at each), and each test failed
before the reader handled it."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from memtype.errors import NoImagesError, StoreFormatError
from memtype.pipeline.io.inspection import inspect_plate
from memtype.pipeline.readers import (
    FieldPosition,
    ImageXpressReader,
    detect_layout,
    imagexpress,
    open_input,
)
from tests.readers_support import (
    OME_ZARR,
    PATTERN,
    PIXEL_UM,
    WRITERS,
    Z_STEP_UM,
    _tif,
    htd_text,
    layout_params,
    metaxpress_description,
    write_imagexpress,
    write_ometiff,
    write_omezarr,
)

pytestmark = pytest.mark.requires("tifffile")

GUIDS = iter(f"{i:08X}-0BB3-4B8A-9187-2805F4C90506" for i in range(10_000))
"""MetaXpress appends a GUID to every image name of an acquisition folder."""


def _image(path: Path, value: int, well: str = "E07", site: int = 1, channel: int = 1,
           z: int = 1) -> None:
    _tif(path, np.full((4, 4), value, np.uint16),
         metaxpress_description(well, site, channel, z, name=f"w{channel}"))


def _fields(reader: ImageXpressReader) -> list[tuple[object, ...]]:
    return [(r.get("well"), r.get("site"), r.get("channel"), r.get("z"), r.get("t"))
            for r in reader.records()]


# -- ImageXpress: an acquisition folder as MetaXpress writes it, without time points ---------
def write_projection_mix(root: Path) -> Path:
    """fmi-faim/faim-ipa, resources/ImageXpress/Projection-Mix/2023-02-21/1334 (its test:
    tests/hcs/imagexpress/test_ImageXpress.py::test_mixed_acquisition): no ``.HTD``, no
    ``TimePoint_<t>`` folder; ``w1`` and ``w2`` acquired as stacks (``ZStep_<z>/``, their
    projections beside the folders), ``w3`` kept only as its projection (beside the folders),
    ``w4`` one plane (``ZStep_1/`` only); every image with a GUID and a ``_thumb`` preview.
    Pixel value: 100 * channel + z (0 for a stack's projection, which is not read)."""
    for well in ("E07", "E08"):
        for site in (1, 2):
            for channel in (1, 2, 3):
                name = f"Projection-Mix_{well}_s{site}_w{channel}"
                _image(root / f"{name}{next(GUIDS)}.tif", 100 * channel if channel == 3 else 0,
                       well, site, channel)
                _image(root / f"{name}_thumb{next(GUIDS)}.tif", 0, well, site, channel)
            for z in (1, 2, 3):
                for channel in (1, 2):
                    _image(root / f"ZStep_{z}/Projection-Mix_{well}_s{site}_w{channel}"
                           f"{next(GUIDS)}.tif", 100 * channel + z, well, site, channel, z)
            _image(root / f"ZStep_1/Projection-Mix_{well}_s{site}_w4{next(GUIDS)}.tif", 401,
                   well, site, 4)
    return root


def test_an_acquisition_folder_without_time_points_is_imagexpress(tmp_path: Path) -> None:
    root = write_projection_mix(tmp_path / "1334")
    assert detect_layout(root) == ("imagexpress", "MetaXpress names")
    assert open_input(root).layout == "imagexpress"


def test_a_channel_kept_only_as_its_projection_is_read_beside_stacks(tmp_path: Path) -> None:
    """Before: every image beside the ``ZStep_`` folders was dropped as a projection, so
    ``w3`` was lost."""
    reader = ImageXpressReader(write_projection_mix(tmp_path / "1334"))
    by_channel: dict[object, list[object]] = {}
    for well, site, channel, z, _ in _fields(reader):
        if (well, site) == ("E07", 1):
            by_channel.setdefault(channel, []).append(z)
    assert by_channel == {1: [1, 2, 3], 2: [1, 2, 3], 3: [1], 4: [1]}
    assert len(reader.records()) == 2 * 2 * (3 + 3 + 1 + 1)


def test_the_stacks_projections_are_left_out_and_the_rest_read_as_plane_1(
        tmp_path: Path) -> None:
    reader = ImageXpressReader(write_projection_mix(tmp_path / "1334"))
    values = {(r.get("channel"), r.get("z")): int(img[0, 0]) for r, img in zip(
        reader.records()[:8], reader.load_batch([r.path for r in reader.records()[:8]]),
        strict=True)}
    assert values == {(1, 1): 101, (1, 2): 102, (1, 3): 103, (2, 1): 201, (2, 2): 202,
                      (2, 3): 203, (3, 1): 300, (4, 1): 401}


# -- ImageXpress: MetaXpress's plate export, the .HTD inside the time point -------------------
def write_exported_stack(root: Path) -> Path:
    """fmi-faim/faim-ipa, resources/ImageXpress_exported/9987_Plate_3434 (its test:
    tests/hcs/imagexpress/test_plate_acquisitions_exported.py): the ``.HTD`` in
    ``TimePoint_1/ZStep_1/``, the projections in ``TimePoint_1/ZStep_0/``, planes in
    ``ZStep_1..3``; names without a GUID (``9987_B02_s1_w1.TIF``). Pixel value: z (0 for the
    projections, which are not read)."""
    (root / "TimePoint_1/ZStep_1").mkdir(parents=True)
    (root / "TimePoint_1/ZStep_1/9987.HTD").write_text(
        htd_text(wells=("B02", "B03"), sites=2, names=("DAPI", "FITC"), zsteps=3), newline="")
    for well in ("B02", "B03"):
        for site in (1, 2):
            for channel in (1, 2):
                for z in (0, 1, 2, 3):
                    _image(root / f"TimePoint_1/ZStep_{z}/9987_{well}_s{site}_w{channel}.TIF",
                           z, well, site, channel, max(z, 1))
    return root


def test_an_htd_inside_the_z_step_folder_is_the_plates(tmp_path: Path) -> None:
    """Before: only the root was searched, so the export had no channel names from the .HTD
    and no missing list."""
    root = write_exported_stack(tmp_path / "9987_Plate_3434")
    assert detect_layout(root) == ("imagexpress", "TimePoint_1/ZStep_1/9987.HTD")
    (root / "TimePoint_1/ZStep_2/9987_B03_s2_w2.TIF").unlink()
    meta = ImageXpressReader(root).metadata
    assert (meta.rows, meta.columns, meta.detected_from) == (8, 12, "TimePoint_1/ZStep_1/9987.HTD")
    assert meta.missing == ("well=B03 site=2 channel=2 z=2 t=1",)


def test_an_exports_zstep_0_projections_are_left_out(tmp_path: Path) -> None:
    reader = ImageXpressReader(write_exported_stack(tmp_path / "9987_Plate_3434"))
    assert len(reader.records()) == 2 * 2 * 2 * 3
    assert not any("ZStep_0" in r.path for r in reader.records())
    [first] = reader.load_batch([reader.records()[0].path])
    assert (reader.records()[0].get("z"), int(first[0, 0])) == (1, 1)


def test_an_htd_inside_the_time_point_folder_is_the_plates(tmp_path: Path) -> None:
    """fmi-faim/faim-ipa, resources/ImageXpress_exported/9987_Plate_3435: a time lapse whose
    ``.HTD`` is in ``TimePoint_1/``, channel 2 imaged at the first time point only."""
    root = tmp_path / "9987_Plate_3435"
    (root / "TimePoint_1").mkdir(parents=True)
    (root / "TimePoint_1/9987.HTD").write_text(
        htd_text(wells=("B02",), sites=1, names=("DAPI", "FITC"), zsteps=1, timepoints=2),
        newline="")
    _image(root / "TimePoint_1/9987_B02_w1.TIF", 1, "B02", 1, 1)
    _image(root / "TimePoint_1/9987_B02_w2.TIF", 2, "B02", 1, 2)
    _image(root / "TimePoint_2/9987_B02_w1.TIF", 3, "B02", 1, 1)
    reader = ImageXpressReader(root)
    assert detect_layout(root) == ("imagexpress", "TimePoint_1/9987.HTD")
    assert reader.metadata.channel_names == {1: "DAPI", 2: "FITC"}
    assert reader.metadata.missing == ("well=B02 site=1 channel=2 z=1 t=2",)


# -- Opera Phenix / Operetta CLS ----------------------------------------------------------------
def operetta_cls_index(planes: list[tuple[int, int, int, str]], position_z: bool = True) -> str:
    """The Index.idx.xml an Operetta CLS ("Sonata", Harmony 4.9, namespace HarmonyV5) writes:
    leukemia-kispi/operetta-compose, tests/operetta_plate/Images/Index.idx.xml — ``<Entry>``
    with only a ``<FlatfieldProfile>`` (the channel's name in its text, not as an element),
    ``<Image id=..>`` references under ``<Wells>``, a plate type with a non-ASCII name,
    ``PositionZ`` and ``AbsPositionZ``, an ``OrientationMatrix``. ``planes``: (field, plane,
    channel, url) of well C03."""
    def image(field: int, plane: int, channel: int, url: str) -> str:
        z = "" if not position_z else f'<PositionZ Unit="m">{plane * 2e-6!r}</PositionZ>'
        return (f'<Image Version="1"><id>0303K1F{field}P{plane}R{channel}</id><State>Ok</State>'
                f"<URL>{url}</URL><Row>3</Row><Col>3</Col><FieldID>{field}</FieldID>"
                f"<PlaneID>{plane}</PlaneID><TimepointID>0</TimepointID>"
                f"<ChannelID>{channel}</ChannelID><FlimID>1</FlimID>"
                "<ChannelName>Fluorescein (FITC)</ChannelName><ImageType>Signal</ImageType>"
                '<ImageResolutionX Unit="m">1.1959521619135234E-06</ImageResolutionX>'
                '<ImageResolutionY Unit="m">1.1959521619135234E-06</ImageResolutionY>'
                "<ImageSizeX>4</ImageSizeX><ImageSizeY>4</ImageSizeY>"
                f'<PositionX Unit="m">{(-1) ** field * 0.000645814!r}</PositionX>'
                '<PositionY Unit="m">0.000645814</PositionY>' + z
                + f'<AbsPositionZ Unit="m">{0.1375 + plane * 2e-6!r}</AbsPositionZ>'
                '<MainExcitationWavelength Unit="nm">475</MainExcitationWavelength>'
                "<OrientationMatrix>[[1.006463,0.003011,0,-35.6],[0.002440,-1.006450,0,67.3],"
                "[0,0,1.33,-15.125]]</OrientationMatrix></Image>")

    return ('<?xml version="1.0" encoding="utf-8"?>\n<EvaluationInputData '
            'xmlns:xsd="http://www.w3.org/2001/XMLSchema" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" Version="1" '
            'xmlns="http://www.perkinelmer.com/PEHH/HarmonyV5"><User>DRPscreening</User>'
            "<InstrumentType>Sonata</InstrumentType><Plates><Plate><PlateID>Test</PlateID>"
            "<Name>Test</Name><PlateTypeName>384 Greiner µClear</PlateTypeName>"
            '<PlateRows>16</PlateRows><PlateColumns>24</PlateColumns><Well id="0303" />'
            "</Plate></Plates><Wells><Well><id>0303</id><Row>3</Row><Col>3</Col>"
            '<Image id="0303K1F1P1R1" /></Well></Wells><Maps><Map><Entry ChannelID="1">'
            "<FlatfieldProfile>{Channel: 1, ChannelName: Fluorescein (FITC), Version: "
            "Acapella:2013}</FlatfieldProfile></Entry></Map></Maps><Images>"
            + "".join(image(*p) for p in planes) + "</Images></EvaluationInputData>")


def _operetta(root: Path, position_z: bool = True) -> Path:
    planes = [(f, p, 1, f"r03c03f{f:02d}p{p:02d}-ch1sk1fk1fl1.tiff") for f in (1, 2)
              for p in (1, 2)]
    for f, p, _, url in planes:
        _tif(root / "Images" / url, np.full((4, 4), 10 * f + p, np.uint16))
    (root / "Images/Index.idx.xml").write_text(operetta_cls_index(planes, position_z),
                                              encoding="utf-8")
    return root


def test_an_operetta_cls_index_is_read(tmp_path: Path) -> None:
    reader = open_input(_operetta(tmp_path / "Test_Sample__2022-12-19T10_18_52-Measurement 1"))
    assert reader.layout == "phenix"
    assert [(r.get("well"), r.get("site"), r.get("z")) for r in reader.records()] == \
        [("C03", 1, 1), ("C03", 1, 2), ("C03", 2, 1), ("C03", 2, 2)]
    meta = reader.metadata
    assert (meta.rows, meta.columns, meta.channel_names) == (16, 24, {1: "Fluorescein (FITC)"})
    assert meta.pixel_size_um == pytest.approx((1.19595216, 1.19595216))
    assert meta.z_step_um == pytest.approx(2.0)
    assert meta.field_positions[("C03", 2)].x_um == pytest.approx(645.814)


def test_an_index_without_position_z_takes_the_step_from_abs_position_z(
        tmp_path: Path) -> None:
    """Bio-Formats' OperettaReader reads ``AbsPositionZ`` where the index is not Harmony's;
    before, such an index had no z step."""
    meta = open_input(_operetta(tmp_path / "plate", position_z=False)).metadata
    assert meta.z_step_um == pytest.approx(2.0)
    assert meta.field_positions[("C03", 1)].z_um == pytest.approx(137502.0)


# -- Edge cases: corrupt files, read-only plates -------------------------------------------------
def test_a_truncated_imagexpress_tiff_fails_at_read_naming_it(tmp_path: Path) -> None:
    root = write_imagexpress(tmp_path / "plate")
    name = "TimePoint_1/ZStep_2/MFGTMP_140206180002_B03_s2_w1.TIF"
    data = (root / name).read_bytes()
    (root / name).write_bytes(data[: len(data) // 2])
    reader = ImageXpressReader(root)
    assert len(reader.records()) == 16 and reader.metadata.channel_names
    with pytest.raises(StoreFormatError, match="B03_s2_w1.TIF.*truncated"):
        reader.load_batch([name])


def test_a_corrupt_ome_tiff_is_left_out_of_the_listing_and_listed_missing(
        tmp_path: Path) -> None:
    """Before: one truncated file stopped the listing (its OME-XML lost, tifffile's generic
    series read as axes 'IYX')."""
    root = write_ometiff(tmp_path / "plate")
    data = (root / "B03_s2.ome.tif").read_bytes()
    (root / "B03_s2.ome.tif").write_bytes(data[: len(data) - 200])
    reader = open_input(root)
    with pytest.warns(UserWarning, match="1 OME-TIFF file.*B03_s2.ome.tif"):
        assert len(reader.records()) == 12
    [missing] = reader.metadata.missing
    assert missing.startswith("B03_s2.ome.tif: 'B03_s2.ome.tif' in ")
    assert "not a readable OME-TIFF" in missing


def test_an_ome_tiff_truncated_after_listing_fails_at_read_naming_it(tmp_path: Path) -> None:
    """Before: tifffile's own error, not naming the plate's file."""
    root = write_ometiff(tmp_path / "plate")
    reader = open_input(root)
    paths = [r.path for r in reader.records() if r.path.startswith("B03_s2")]
    data = (root / "B03_s2.ome.tif").read_bytes()
    (root / "B03_s2.ome.tif").write_bytes(data[:300])
    with pytest.raises(StoreFormatError, match="'B03_s2.ome.tif'.*truncated or corrupt"):
        reader.load_batch(paths)


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in root.rglob("*")}


@pytest.mark.parametrize("name", layout_params(WRITERS))
def test_reading_a_plate_writes_nothing_into_it(name: str, tmp_path: Path) -> None:
    """A plate on a read-only file system: listing, metadata, headers and reads create, change
    and remove nothing under the plate's folder."""
    root = WRITERS[name](tmp_path / "plate")
    before = _snapshot(root)
    reader = open_input(root, pattern=PATTERN if name == "pattern" else None)
    paths = [r.path for r in reader.records()]
    assert reader.metadata.layout == reader.layout
    reader.header(paths[0])
    reader.load_batch(paths)
    assert _snapshot(root) == before


# -- OME-Zarr written by others -------------------------------------------------------------------
def _iohub_transforms(root: Path) -> None:
    """Rewrite every field's multiscales as iohub writes them: the datasets' transformation
    ``identity``, the voxel size in the multiscale's own ``coordinateTransformations``
    (czbiohub-sf/iohub, ``Position.set_transform("*", ...)``; its converter test
    ``_check_scale_transform`` reads ``multiscales[0].coordinate_transformations[0]``)."""
    for meta in [*root.glob("*/*/*/.zattrs"), *root.glob("*/*/*/zarr.json")]:
        data = json.loads(meta.read_text())
        attrs = data if meta.name == ".zattrs" else data["attributes"]["ome"]
        multiscale = attrs["multiscales"][0]
        multiscale["coordinateTransformations"] = [
            {"type": "scale", "scale": [1.0, Z_STEP_UM, PIXEL_UM, PIXEL_UM]}]
        for dataset in multiscale["datasets"]:
            dataset["coordinateTransformations"] = [{"type": "identity"}]
        meta.write_text(json.dumps(data))


@pytest.mark.parametrize("version", [pytest.param(v, marks=OME_ZARR) for v in ("0.4", "0.5")])
def test_a_multiscale_level_scale_gives_the_pixel_size(version: str, tmp_path: Path) -> None:
    """Before: only the datasets' scale was read, so an iohub plate had no pixel size."""
    root = write_omezarr(tmp_path / "plate.zarr", version)
    _iohub_transforms(root)
    meta = open_input(root).metadata
    assert meta.pixel_size_um == pytest.approx((PIXEL_UM, PIXEL_UM))
    assert meta.z_step_um == pytest.approx(Z_STEP_UM)


@pytest.mark.parametrize("version", [pytest.param(v, marks=OME_ZARR) for v in ("0.4", "0.5")])
def test_dataset_and_multiscale_scales_multiply(version: str, tmp_path: Path) -> None:
    root = write_omezarr(tmp_path / "plate.zarr", version)
    for meta in [*root.glob("*/*/*/.zattrs"), *root.glob("*/*/*/zarr.json")]:
        data = json.loads(meta.read_text())
        attrs = data if meta.name == ".zattrs" else data["attributes"]["ome"]
        attrs["multiscales"][0]["coordinateTransformations"] = [
            {"type": "scale", "scale": [1.0, 1.0, 2.0, 2.0]}]
        meta.write_text(json.dumps(data))
    assert open_input(root).metadata.pixel_size_um == pytest.approx((2 * PIXEL_UM, 2 * PIXEL_UM))


# -- OME-TIFF: a multi-file dataset ---------------------------------------------------------------
def write_multifile_ometiff(root: Path) -> Path:
    """A plate as one OME-TIFF per well, every file carrying the whole plate's OME-XML and each
    ``<TiffData>`` naming its file by ``<UUID FileName=>`` (the OME-TIFF specification's
    multi-file datasets, https://ome-model.readthedocs.io/en/stable/ome-tiff/specification.html;
    Bio-Formats' bfconvert writes a plate so with a per-well file name pattern). Pixel value:
    10 * (well index + 1) + channel."""
    import tifffile

    files = ["plate_A01.ome.tif", "plate_B03.ome.tif"]
    uuids = [f"urn:uuid:0000000{i}-1111-2222-3333-444444444444" for i in range(len(files))]
    root.mkdir(parents=True)
    for i, name in enumerate(files):
        data = np.stack([np.full((8, 10), 10 * (i + 1) + c, np.uint16) for c in (1, 2)])
        tifffile.imwrite(root / name, data, ome=True, metadata={"axes": "CYX"})

    def image(i: int) -> str:
        channels = "".join(f'<Channel ID="Channel:{i}:{c}" SamplesPerPixel="1"/>' for c in (0, 1))
        return (f'<Image ID="Image:{i}" Name="{files[i]}"><Pixels ID="Pixels:{i}" '
                'DimensionOrder="XYCZT" Type="uint16" SizeX="10" SizeY="8" SizeC="2" SizeZ="1" '
                f'SizeT="1">{channels}<TiffData FirstC="0" IFD="0" PlaneCount="2">'
                f'<UUID FileName="{files[i]}">{uuids[i]}</UUID></TiffData></Pixels></Image>')

    plate = ('<Plate ID="Plate:0" Rows="8" Columns="12">'
             '<Well ID="Well:0" Row="0" Column="0"><WellSample ID="WellSample:0" Index="0">'
             '<ImageRef ID="Image:0"/></WellSample></Well>'
             '<Well ID="Well:1" Row="1" Column="2"><WellSample ID="WellSample:1" Index="1">'
             '<ImageRef ID="Image:1"/></WellSample></Well></Plate>')
    for i, name in enumerate(files):
        xml = ('<?xml version="1.0" encoding="UTF-8"?><OME '
               f'xmlns="http://www.openmicroscopy.org/Schemas/OME/2016-06" UUID="{uuids[i]}">'
               + plate + image(0) + image(1) + "</OME>")
        tifffile.tiffcomment(root / name, xml.encode())
    return root


def test_a_multi_file_ome_tiff_lists_each_image_once(tmp_path: Path) -> None:
    """Before: every file listed every image of the dataset: an InputCollisionError."""
    reader = open_input(write_multifile_ometiff(tmp_path / "plate"))
    records = reader.records()
    assert [(r.get("well"), r.get("channel"), r.path.partition("#")[0]) for r in records] == [
        ("A01", 1, "plate_A01.ome.tif"), ("A01", 2, "plate_A01.ome.tif"),
        ("B03", 1, "plate_B03.ome.tif"), ("B03", 2, "plate_B03.ome.tif")]
    assert [int(a[0, 0]) for a in reader.load_batch([r.path for r in records])] == \
        [11, 12, 21, 22]


# -- ImageXpress: the .HTD's encoding -------------------------------------------------------------
@pytest.mark.parametrize(("encoding", "bom"), [("cp1252", b""), ("utf-8", b""),
                                               ("utf-8", b"\xef\xbb\xbf")],
                         ids=["windows-code-page", "utf-8", "utf-8-with-bom"])
def test_htd_wave_names_outside_ascii_are_read(encoding: str, bom: bytes,
                                               tmp_path: Path) -> None:
    """MetaXpress runs on Windows and writes the .HTD in its code page; before, a channel named
    'Hoechst µ' came back as 'Hoechst \\ufffd'. A non-ASCII plate folder name, too."""
    root = tmp_path / "Platte Zürich µ"
    root.mkdir()
    text = htd_text(wells=("A01",), sites=1, names=("Hoechst µ", "Alexa 488 Ø"), zsteps=1)
    (root / "plate.HTD").write_bytes(bom + text.encode(encoding))
    _image(root / "TimePoint_1/plate_A01_w1.TIF", 1, "A01")
    meta = ImageXpressReader(root).metadata
    assert meta.channel_names == {1: "Hoechst µ", 2: "Alexa 488 Ø"}


# -- ImageXpress stage positions ----------------------------------------------------------------
def test_imagexpress_field_positions_are_the_stage_positions_of_each_site(
        tmp_path: Path) -> None:
    """``stage-position-x/y`` and ``z-position`` of each field's first image (the fixture's
    descriptions: x 12000.5 + 650 * site, y 8000.25, z 5000 at plane 1)."""
    meta = ImageXpressReader(write_imagexpress(tmp_path / "plate")).metadata
    assert dict(meta.field_positions) == {
        (w, s): FieldPosition(12000.5 + 650 * s, 8000.25, 5000.0)
        for w in ("A01", "B03") for s in (1, 2)}


def test_imagexpress_stage_positions_are_read_when_first_used(tmp_path: Path) -> None:
    """The metadata reads one header per channel (and one for the z step); the positions one
    per field, only when asked for: a run that does not use them does not pay for them."""
    reader = ImageXpressReader(write_imagexpress(tmp_path / "plate"))
    reader.records()
    seen: list[str] = []
    real = imagexpress.tiff_properties
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(imagexpress, "tiff_properties",
                      lambda path: seen.append(os.path.basename(path.name)) or real(path))
        meta = reader.metadata
        assert len(seen) == 3 and "read when first used" in repr(meta.field_positions)
        assert meta.field_positions[("B03", 2)].x_um == 12000.5 + 1300
        assert len(seen) == 3 + 4


def test_imagexpress_stage_positions_survive_pickling(tmp_path: Path) -> None:
    reader = ImageXpressReader(write_imagexpress(tmp_path / "plate"))
    meta = pickle.loads(pickle.dumps(reader.metadata))
    assert meta.field_positions[("A01", 1)] == FieldPosition(12650.5, 8000.25, 5000.0)


def test_imagexpress_without_stage_positions_has_none(tmp_path: Path) -> None:
    root = tmp_path / "plate"
    _tif(root / "TimePoint_1/plate_A01_s1_w1.TIF", np.zeros((4, 4), np.uint16))
    assert dict(ImageXpressReader(root).metadata.field_positions) == {}


def test_inspect_shows_imagexpress_stage_positions(tmp_path: Path) -> None:
    summary = inspect_plate(write_imagexpress(tmp_path / "plate"))
    assert ("field positions", "4 fields (2 wells x 2 sites); site 1 at x 12650.5, "
            "y 8000.25 µm; site 2 at x 13300.5, y 8000.25 µm") in summary.rows()


def test_a_companion_ome_tiff_dataset_is_refused_saying_why(tmp_path: Path) -> None:
    """A file whose OME-XML is a ``<BinaryOnly>`` stub naming a ``.companion.ome`` (the
    OME-TIFF specification's companion datasets); before: "series 0 has axes 'IYX'"."""
    import tifffile

    tifffile.imwrite(tmp_path / "B03_s1.ome.tif", np.zeros((2, 8, 10), np.uint16), ome=True,
                     metadata={"axes": "CYX"})
    tifffile.tiffcomment(tmp_path / "B03_s1.ome.tif", (
        b'<?xml version="1.0" encoding="UTF-8"?><OME '
        b'xmlns="http://www.openmicroscopy.org/Schemas/OME/2016-06" '
        b'UUID="urn:uuid:00000000-1111-2222-3333-444444444444"><BinaryOnly '
        b'MetadataFile="plate.companion.ome" '
        b'UUID="urn:uuid:99999999-1111-2222-3333-444444444444"/></OME>'))
    with pytest.raises(StoreFormatError, match="companion file 'plate.companion.ome'"):
        open_input(tmp_path).records()


@pytest.mark.parametrize(("name", "fields"), [
    ("Projection-Mix_E07_s1E94C24BD-45E4-450A-9919-257C714278F7.tif", ("E07", 1, 1)),
    ("Projection-Mix_E07_s189A35A04-20E3-47AD-A1F9-8065B2840EFD.tif", ("E07", 1, 1)),
    ("Projection-Mix_E08_s2B38C01F5-0D36-4A29-9F5A-BE62B6F7F73F.tif", ("E08", 2, 1)),
    ("Plate_E0712345678-0D36-4A29-9F5A-BE62B6F7F73F.tif", ("E07", 1, 1)),
], ids=["guid-after-site", "guid-after-site-starting-with-digits", "guid-after-site-2",
        "guid-after-well"])
def test_a_single_channel_acquisitions_guid_follows_the_site(
        name: str, fields: tuple[str, int, int], tmp_path: Path) -> None:
    """fmi-faim/faim-ipa, resources/SingleChannel/2023-02-21/1334 (one channel: no ``_w``,
    the GUID right after the site); before, no such name was an image."""
    _tif(tmp_path / "ZStep_1" / name, np.zeros((4, 4), np.uint16))
    [rec] = ImageXpressReader(tmp_path).records()
    assert (rec.get("well"), rec.get("site"), rec.get("channel")) == fields


def write_omezarr_cycles(root: Path, version: str) -> Path:
    """An HCS plate imaged twice (two acquisitions, as Fractal's converters write multiplexing
    cycles): ``plate.acquisitions`` ids 7 and 3 (in that order), each well's fields
    ``{"path": "0", "acquisition": 7}``, ``{"path": "1", "acquisition": 3}``, written by
    ome-zarr-py. Pixel value: 100 * cycle + channel."""
    import zarr
    from ome_zarr.format import FormatV04, FormatV05
    from ome_zarr.writer import write_image, write_plate_metadata, write_well_metadata

    fmt = FormatV04() if version == "0.4" else FormatV05()
    group = zarr.open_group(str(root), mode="w", zarr_format=2 if version == "0.4" else 3)
    write_plate_metadata(group, ["A"], ["1"], ["A/1"], fmt=fmt,
                         acquisitions=[{"id": 7, "name": "cycle 1"}, {"id": 3, "name": "cycle 2"}])
    well = group.require_group("A").require_group("1")
    write_well_metadata(well, [{"path": "0", "acquisition": 7}, {"path": "1", "acquisition": 3}],
                        fmt=fmt)
    for cycle, path in ((1, "0"), (2, "1")):
        data = np.stack([np.full((4, 4), 100 * cycle + c, np.uint16) for c in (1, 2)])
        write_image(data, well.require_group(path), scale_factors=[], fmt=fmt, axes="cyx")
    return root


@pytest.mark.parametrize("version", [pytest.param(v, marks=OME_ZARR) for v in ("0.4", "0.5")])
def test_omezarr_acquisitions_are_time_points_of_the_same_sites(version: str,
                                                                tmp_path: Path) -> None:
    """Before: the second acquisition's field was site 2 of the same time point."""
    reader = open_input(write_omezarr_cycles(tmp_path / "plate.zarr", version))
    records = reader.records()
    assert [(r.get("site"), r.get("channel"), r.get("t")) for r in records] == [
        (1, 1, 1), (1, 1, 2), (1, 2, 1), (1, 2, 2)]
    assert [int(a[0, 0]) for a in reader.load_batch([r.path for r in records])] == \
        [101, 201, 102, 202]


def test_an_index_of_server_urls_says_the_images_are_on_the_server(tmp_path: Path) -> None:
    """Harmony can write an index whose ``<URL>`` is the image's address on its server
    (Bio-Formats' OperettaReader keeps a URL starting with ``http`` as it is); before, the URL
    was joined to the index's folder (``Images/http:/...``) and the error said only that no
    image was found."""
    url = "http://harmony-server:8080/Images/r03c03f01p01-ch1sk1fk1fl1.tiff"
    root = tmp_path / "export"
    (root / "Images").mkdir(parents=True)
    (root / "Images/Index.idx.xml").write_text(
        operetta_cls_index([(1, 1, 1, url)]), encoding="utf-8")
    with pytest.raises(NoImagesError, match="images on a server .*http://harmony-server:8080/"):
        open_input(root).records()


def test_an_imagexpress_well_without_its_leading_zero_is_that_well(tmp_path: Path) -> None:
    """``B3`` is well ``B03`` (openhcs's ImageXpress parser takes any number of column digits);
    before, the name was not an image."""
    _tif(tmp_path / "TimePoint_1/Plate1_B3_s2_w1.TIF", np.zeros((4, 4), np.uint16))
    [rec] = ImageXpressReader(tmp_path).records()
    assert (rec.get("well"), rec.get("site"), rec.get("channel")) == ("B03", 2, 1)


def test_an_empty_well_folder_is_no_images_not_an_error(tmp_path: Path) -> None:
    """Per-well folders (``{well}/{site}/...``) where one well's folder is empty (a well the
    microscope skipped): the others are read; the empty one has no images (a pattern names no
    wells it expects, so it is not listed as missing)."""
    for site in (1, 2):
        _tif(tmp_path / "A01" / str(site) / "1_z1.tif", np.zeros((4, 4), np.uint16))
    (tmp_path / "B02" / "1").mkdir(parents=True)
    reader = open_input(tmp_path, pattern="{well}/{site}/{channel}_z{z}.tif")
    assert [(r.get("well"), r.get("site")) for r in reader.records()] == [("A01", 1), ("A01", 2)]
    assert inspect_plate(reader).missing == []


def test_a_single_plane_channel_beside_stacks_is_not_missing_planes(tmp_path: Path) -> None:
    """fmi-faim/faim-ipa, resources/ImageXpress_exported/9987_Plate_3434's HTD: "ZSteps", 3 for
    the plate, one channel imaged as one plane ("Texas Red: 1z"). Before, its planes 2 and 3 were
    listed missing at every site; a plane missing from a stacked channel still is."""
    root = tmp_path / "plate"
    root.mkdir()
    (root / "plate.HTD").write_text(htd_text(wells=("A01",), sites=1, names=("DAPI", "TxRed"),
                                             zsteps=3), newline="")
    for z in (1, 2, 3):
        _image(root / f"TimePoint_1/ZStep_{z}/plate_A01_w1.TIF", z, "A01", 1, 1, z)
    _image(root / "TimePoint_1/ZStep_1/plate_A01_w2.TIF", 9, "A01", 1, 2, 1)
    assert ImageXpressReader(root).metadata.missing == ()
    (root / "TimePoint_1/ZStep_2/plate_A01_w1.TIF").unlink()
    assert ImageXpressReader(root).metadata.missing == ("well=A01 site=1 channel=1 z=2 t=1",)


def test_a_renamed_images_folder_is_found(tmp_path: Path) -> None:
    """Bio-Formats' OperettaReader: the images' folder "will usually be 'Images', but may have
    been renamed especially if there are no analysis results"; before, such an export was read
    by pattern (no file matched)."""
    root = _operetta(tmp_path / "export")
    (root / "Images").rename(root / "Images_plate7")
    (root / "Assaylayout").mkdir()
    reader = open_input(root)
    assert (reader.layout, reader.metadata.detected_from) == ("phenix",
                                                              "Images_plate7/Index.idx.xml")
    assert len(reader.records()) == 4
    assert reader.records()[0].path == "Images_plate7/r03c03f01p01-ch1sk1fk1fl1.tiff"


@pytest.mark.parametrize("version", [pytest.param(v, marks=OME_ZARR) for v in ("0.4", "0.5")])
def test_omezarr_fields_and_wells_listed_but_absent_are_missing(version: str,
                                                                 tmp_path: Path) -> None:
    """A plate whose writing stopped (its metadata, written first, lists wells and fields that
    are not there): before, an absent field was a KeyError ('datasets') and an absent well was
    dropped without a word."""
    import shutil

    root = write_omezarr(tmp_path / "plate.zarr", version)
    shutil.rmtree(root / "B/3/1")
    reader = open_input(root)
    assert len(reader.records()) == 12
    assert reader.metadata.missing == ("B/3/1 (no image with multiscales)",)
    shutil.rmtree(root / "B/3")
    reader = open_input(root)
    assert {r.get("well") for r in reader.records()} == {"A01"}
    assert reader.metadata.missing == ("B/3 (well group absent)",)
