"""Real vendor exports in the variants our first fixtures did not have: each fixture follows a
published plate's folder tree and names (the source is cited at each), and each test failed
before the reader handled it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memtype.pipeline.readers import ImageXpressReader, detect_layout, open_input
from tests.readers_support import _tif, htd_text, metaxpress_description

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
