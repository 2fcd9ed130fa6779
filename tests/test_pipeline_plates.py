"""Standard plate layouts (96 and 384 wells) wherever memtype names wells; natural order."""

from __future__ import annotations

import importlib
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import memtype as mt
from memtype.pipeline import Pipeline
from memtype.pipeline.io.plates import PlateLayout, layout_of, plate_layout
from memtype.pipeline.synthetic import SyntheticPlate
from memtype.storage import ZarrStore, natural_sorted
from tests.pipeline_support import write_plate


# -- natural order ------------------------------------------------------------------------
@pytest.mark.parametrize(("items", "expected"), [
    (["run1b", "run1", "run2"], ["run1", "run1b", "run2"]),
    (["scan2", "scan", "scan10"], ["scan", "scan2", "scan10"]),
    (["f10", "f2", "f1"], ["f1", "f2", "f10"]),
    (["img_1_b", "img_1", "img_1_a"], ["img_1", "img_1_a", "img_1_b"]),
    (["B", "a10", "a9", "A9"], ["A9", "a9", "a10", "B"]),
])
def test_natural_sorted_puts_a_prefix_first_like_sort_v(items: list[str],
                                                       expected: list[str]) -> None:
    assert natural_sorted(items) == expected


# -- layouts ------------------------------------------------------------------------------
def test_96_and_384_well_layouts() -> None:
    p96, p384 = PlateLayout(96), PlateLayout(384)
    assert p96.rows == tuple("ABCDEFGH") and p96.columns == tuple(range(1, 13))
    assert p384.rows == tuple("ABCDEFGHIJKLMNOP") and p384.columns == tuple(range(1, 25))
    names = p96.well_names()
    assert len(set(names)) == 96 and names[:2] == ["A01", "A02"]
    assert names[11:13] == ["A12", "B01"] and names[-1] == "H12"
    names = p384.well_names()
    assert len(set(names)) == 384 and names[23:25] == ["A24", "B01"] and names[-1] == "P24"


@pytest.mark.parametrize(("wells", "plate", "size", "last"), [
    (1, None, 96, "A01"), (48, None, 96, "D12"), (96, None, 96, "H12"),
    (97, None, 384, "E01"), (384, None, 384, "P24"), (4, 384, 384, "A04"),
])
def test_synthetic_plate_lays_wells_out_as_a_real_plate(wells: int, plate: int | None,
                                                        size: int, last: str) -> None:
    synthetic = SyntheticPlate(wells=wells, plate=plate)
    assert synthetic.layout.size == size
    assert synthetic.well_names[-1] == last and len(set(synthetic.well_names)) == wells


@pytest.mark.parametrize(("wells", "plate", "match"), [
    (385, None, "1 to 384"), (100, 96, "use a 384-well plate"), (0, None, ">= 1"),
    (4, 48, "Unknown plate size 48"),
])
def test_more_wells_than_the_plate_holds_is_a_clear_error(wells: int, plate: int | None,
                                                          match: str) -> None:
    with pytest.raises(mt.errors.InvalidArgumentError, match=match) as info:
        SyntheticPlate(wells=wells, plate=plate)
    assert isinstance(info.value, ValueError)


def test_layout_of_well_names() -> None:
    assert layout_of(["A01", "H12"]) == PlateLayout(96)
    assert layout_of(["A01", "I01"]) == PlateLayout(384)
    assert layout_of(["A13"]) == PlateLayout(384)
    assert layout_of(["Q01"]) is None and layout_of(["A25"]) is None
    assert plate_layout(96) == PlateLayout(96) and plate_layout(97) == PlateLayout(384)


# -- OME-Zarr plates ----------------------------------------------------------------------
def _plate_meta(path: Path) -> dict:
    doc = json.loads((path / "zarr.json").read_text())
    meta: dict = doc["attributes"]["ome"]["plate"]
    return meta


@pytest.mark.requires("ome_zarr_models")
def test_plate_metadata_has_a_version_and_validates(tmp_path: Path) -> None:
    models = importlib.import_module("ome_zarr_models.v05.hcs")
    import zarr

    store = ZarrStore(tmp_path / "p.zarr", rows="ABCDEFGH", columns=range(1, 13))
    store.save(np.zeros((1, 1, 8, 8), np.uint16), "B/3/1", parents=True, axes="czyx")
    assert _plate_meta(tmp_path / "p.zarr")["version"] == "0.5"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ome-zarr-models warns when ome.plate lacks a version
        models.HCS.from_zarr(zarr.open_group(tmp_path / "p.zarr", mode="r"))


@pytest.mark.requires("zarr")
def test_plate_rows_added_later_keep_plate_order(tmp_path: Path) -> None:
    store = ZarrStore(tmp_path / "p.zarr")
    for key in ("AA/1/0", "Z/1/0", "B/1/0"):
        store.save(np.zeros((4, 4), np.uint8), key, parents=True)
    meta = _plate_meta(tmp_path / "p.zarr")
    assert [r["name"] for r in meta["rows"]] == ["B", "Z", "AA"]
    assert meta["version"] == "0.5"
    assert [(w["path"], w["rowIndex"]) for w in meta["wells"]] == [  # plate order
        ("B/1", 0), ("Z/1", 1), ("AA/1", 2)]


@mt.numpy
def _project(stack: np.ndarray) -> np.ndarray:
    return stack.max(axis=0, keepdims=True)


@pytest.mark.parametrize(("wells", "rows", "columns"), [(14, 8, 12), (97, 16, 24)])
@pytest.mark.requires("tifffile")
def test_pipeline_plate_declares_the_standard_plate(tmp_path: Path, wells: int, rows: int,
                                                    columns: int) -> None:
    plate = SyntheticPlate(wells=wells, sites=1, channels=1, z_planes=1, size=32, cells=(1, 1))
    src = write_plate(tmp_path / "in", plate)
    report = Pipeline([_project]).run(src, tmp_path / "out")
    assert report.ok, report.summary()
    meta = _plate_meta(Path(report.outputs["images"]))
    assert len(meta["rows"]) == rows and len(meta["columns"]) == columns
    assert meta["rows"][0]["name"] == "A" and meta["columns"][-1]["name"] == str(columns)
    entries = {w["path"]: (w["rowIndex"], w["columnIndex"]) for w in meta["wells"]}
    assert len(entries) == wells
    last = plate.well_names[-1]
    row, column = last[0], int(last[1:])
    assert entries[f"{row}/{column}"] == (ord(row) - ord("A"), column - 1)


@pytest.mark.requires("tifffile")
def test_wells_beyond_384_keep_the_rows_and_columns_in_use(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    from memtype.storage import DiskStore

    disk = DiskStore(src)
    for well in ("A30", "AB02"):
        disk.save(np.full((8, 8), 3, np.uint16), f"{well}_s1_w1_z001.tif")
    report = Pipeline([_project]).run(src, tmp_path / "out")
    assert report.ok, report.summary()
    meta = _plate_meta(Path(report.outputs["images"]))
    assert [r["name"] for r in meta["rows"]] == ["A", "AB"]
    assert [c["name"] for c in meta["columns"]] == ["2", "30"]
