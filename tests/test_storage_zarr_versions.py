"""OME-Zarr 0.5 (zarr v3) and 0.4 (zarr v2) plates: both validate and read back.

Validation by ome-zarr-models (warnings as errors) and reading by ome-zarr-py's reader, the
tools the ecosystem uses (issue 24, section 3).
"""

from __future__ import annotations

import importlib
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.errors import StoreFormatError
from memtype.storage import ZarrStore

pytestmark = pytest.mark.requires("zarr")

VERSIONS = ["0.5", "0.4"]
IMAGE = (np.random.default_rng(0).random((2, 3, 16, 20)) * 1000).astype(np.uint16)


def write_plate(root: Path, version: str) -> ZarrStore:
    """Two wells of two fields each: every well alike, as a plate reader expects."""
    plate = ZarrStore(root, rows="AB", columns=range(1, 4), ome_version=version)
    for well in ("A/1", "B/3"):
        for field in ("0", "1"):
            plate.save(IMAGE + int(field), f"{well}/{field}", parents=True, pyramid_levels=2,
                       channel_names=["DAPI", "GFP"])
    return plate


@pytest.mark.requires("ome_zarr_models")
@pytest.mark.parametrize("version", VERSIONS)
def test_plate_validates_with_ome_zarr_models(tmp_path: Path, version: str) -> None:
    import zarr

    hcs = importlib.import_module(f"ome_zarr_models.v0{version[-1]}.hcs")
    image = importlib.import_module(f"ome_zarr_models.v0{version[-1]}.image")
    write_plate(tmp_path / "p.zarr", version)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = hcs.HCS.from_zarr(zarr.open_group(tmp_path / "p.zarr", mode="r"))
        assert len(list(model.well_groups)) == 2
        for field in ("A/1/0", "A/1/1", "B/3/0", "B/3/1"):
            image.Image.from_zarr(zarr.open_group(tmp_path / "p.zarr" / field, mode="r"))


@pytest.mark.requires("ome_zarr")
@pytest.mark.parametrize("version", VERSIONS)
def test_plate_reads_back_with_the_ome_zarr_reader(tmp_path: Path, version: str) -> None:
    from ome_zarr.io import parse_url
    from ome_zarr.reader import Reader

    write_plate(tmp_path / "p.zarr", version)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reader logs which format it detected
        image = list(Reader(parse_url(str(tmp_path / "p.zarr/B/3/1")))())[0]
        assert [np.asarray(level).shape for level in image.data] == [(2, 3, 16, 20),
                                                                      (2, 3, 8, 10)]
        np.testing.assert_array_equal(np.asarray(image.data[0]), IMAGE + 1)
        assert image.metadata["channel_names"] == ["DAPI", "GFP"]
        plate = list(Reader(parse_url(str(tmp_path / "p.zarr")))())[0]
        assert plate.metadata["metadata"]["plate"]["version"] == version


def test_version_0_4_is_zarr_v2_on_disk(tmp_path: Path) -> None:
    write_plate(tmp_path / "p.zarr", "0.4")
    root = tmp_path / "p.zarr"
    assert not list(root.rglob("zarr.json"))
    attrs = json.loads((root / ".zattrs").read_text())
    assert attrs["plate"]["version"] == "0.4"
    assert json.loads((root / "A/1/.zattrs").read_text())["well"]["version"] == "0.4"
    field: dict[str, Any] = json.loads((root / "A/1/0/.zattrs").read_text())
    assert field["multiscales"][0]["version"] == "0.4"
    assert json.loads((root / "A/1/0/0/.zarray").read_text())["dimension_separator"] == "/"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_reopened_plate_keeps_its_version(tmp_path: Path, version: str) -> None:
    write_plate(tmp_path / "p.zarr", version)
    again = ZarrStore(tmp_path / "p.zarr")
    assert again.ome_version == version
    again.save(IMAGE, "B/1/0", parents=True)
    np.testing.assert_array_equal(again.load("B/1/0", index=(1, 2)), IMAGE[1, 2])
    assert again.list_files("", recursive=True) == ["A/1/0", "A/1/1", "B/1/0", "B/3/0",
                                                    "B/3/1"]
    assert ZarrStore(**again.params()).ome_version == version


def test_asking_another_version_of_an_existing_plate(tmp_path: Path) -> None:
    write_plate(tmp_path / "p.zarr", "0.4")
    with pytest.raises(StoreFormatError, match="is OME-Zarr 0.4; ome_version='0.5'"):
        ZarrStore(tmp_path / "p.zarr", ome_version="0.5")


@pytest.mark.parametrize("version", ["0.3", 0.4, "v2"])
def test_an_unknown_version(tmp_path: Path, version: Any) -> None:
    with pytest.raises(StoreFormatError, match="Invalid ome_version"):
        ZarrStore(tmp_path / "p.zarr", ome_version=version)
    assert not (tmp_path / "p.zarr").exists()
