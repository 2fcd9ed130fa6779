"""What a pipeline run writes, as viewers and the OME tools read it (issue 24)."""

from __future__ import annotations

import importlib
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import memtype as mt
from memtype.errors import InvalidArgumentError
from memtype.pipeline import FunctionStep, Pipeline
from memtype.pipeline.synthetic import SyntheticPlate
from memtype.storage import ZarrStore
from tests.pipeline_support import write_plate

pytestmark = pytest.mark.requires("zarr")


@mt.numpy
def _project(stack: np.ndarray) -> np.ndarray:
    return stack.max(axis=0, keepdims=True)


@pytest.mark.requires("ome_zarr_models")
@pytest.mark.parametrize("version", ["0.5", "0.4"])
def test_a_run_writes_the_ome_zarr_version_asked(tmp_path: Path, version: str) -> None:
    import zarr

    plate = SyntheticPlate(wells=3, sites=1, channels=2, z_planes=2, size=32, cells=(1, 1))
    src = write_plate(tmp_path / "in", plate)
    report = Pipeline([_project], ome_version=version, pyramid_levels=2).run(
        src, tmp_path / "out")
    assert report.ok, report.summary()
    out = ZarrStore(report.outputs["images"], read_only=True)
    assert out.ome_version == version and len(out.list_files("", recursive=True)) == 3
    hcs = importlib.import_module(f"ome_zarr_models.v0{version[-1]}.hcs")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hcs.HCS.from_zarr(zarr.open_group(report.outputs["images"], mode="r"))


def test_an_unknown_ome_version_is_refused_before_the_run() -> None:
    with pytest.raises(InvalidArgumentError, match="ome_version must be '0.5' or '0.4'"):
        Pipeline([_project], ome_version="0.6")


def test_a_run_writes_physical_pixel_sizes(tmp_path: Path) -> None:
    plate = SyntheticPlate(wells=1, sites=1, channels=2, z_planes=2, size=32, cells=(1, 1))
    src = write_plate(tmp_path / "in", plate)
    report = Pipeline([_project], pixel_size=(0.325, 0.325), pyramid_levels=2).run(
        src, tmp_path / "out")
    assert report.ok, report.summary()
    field = Path(report.outputs["images"], "A/1/1")  # well A01, site 1
    doc = json.loads((field / "zarr.json").read_text())["attributes"]["ome"]["multiscales"][0]
    assert [a.get("unit") for a in doc["axes"]] == [None, "micrometer", "micrometer",
                                                    "micrometer"]
    assert [d["coordinateTransformations"][0]["scale"] for d in doc["datasets"]] == [
        [1.0, 1.0, 0.325, 0.325], [1.0, 1.0, 0.65, 0.65]]


@pytest.mark.parametrize("size", [(1.0,), (0, 1, 1), (1, -1), "1,1", (True, 1.0)], ids=str)
def test_an_invalid_pixel_size_is_refused_before_the_run(size: object) -> None:
    with pytest.raises(InvalidArgumentError, match="pixel_size must be 2 or 3 positive"):
        Pipeline([_project], pixel_size=size)  # type: ignore[arg-type]


@mt.numpy
def _threshold(stack: np.ndarray) -> np.ndarray:
    return (stack > stack.mean()).astype(np.uint16)


@mt.numpy
def _copy(stack: np.ndarray) -> np.ndarray:
    return stack.copy()


@pytest.mark.requires("ome_zarr_models")
@pytest.mark.parametrize("version", ["0.5", "0.4"])
def test_a_labels_step_writes_ome_zarr_labels_beside_the_final_images(
        tmp_path: Path, version: str) -> None:
    import zarr

    plate = SyntheticPlate(wells=2, sites=1, channels=1, z_planes=2, size=32, cells=(1, 1))
    src = write_plate(tmp_path / "in", plate)
    steps = [FunctionStep(_threshold, labels="mask"), FunctionStep(_copy)]
    report = Pipeline(steps, ome_version=version).run(src, tmp_path / "out")
    assert report.ok, report.summary()
    out = ZarrStore(report.outputs["images"], read_only=True)
    fields = out.list_files("", recursive=True)
    assert len(fields) == 2
    for field in fields:
        assert out.list_labels(field) == ["mask"]
        np.testing.assert_array_equal(out.load_labels(field, "mask"), out.load(field)[0])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".memtype", "plate.zarr",
                                                                 "plate_overview.png"]
    assert not list((tmp_path / "out/.memtype").glob("labels/*"))  # the staging is cleared
    labels = importlib.import_module(f"ome_zarr_models.v0{version[-1]}.labels")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        labels.Labels.from_zarr(zarr.open_group(Path(out.root, fields[0], "labels"), mode="r"))


def test_a_final_labels_step_labels_its_own_image(tmp_path: Path) -> None:
    plate = SyntheticPlate(wells=1, sites=1, channels=1, z_planes=2, size=32, cells=(1, 1))
    src = write_plate(tmp_path / "in", plate)
    report = Pipeline([_project, FunctionStep(_threshold, labels="nuclei")]).run(
        src, tmp_path / "out")
    assert report.ok, report.summary()
    out = ZarrStore(report.outputs["images"], read_only=True)
    [field] = out.list_files("", recursive=True)
    np.testing.assert_array_equal(out.load_labels(field, "nuclei"), out.load(field)[0])


@pytest.mark.parametrize("name", ["", "a/b", ".x", 5], ids=repr)
def test_an_invalid_labels_name_is_refused(name: object) -> None:
    with pytest.raises(InvalidArgumentError, match="labels must be a name"):
        FunctionStep(_threshold, labels=name)  # type: ignore[arg-type]


@mt.numpy(dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)
def _objects(stack: np.ndarray) -> tuple[np.ndarray, list[dict[str, int]]]:
    ids = np.zeros(stack.shape, np.uint16)
    ids[:, :8, :8], ids[:, 16:, 16:] = 1, 2
    return ids, [{"label": 1, "area": 64}, {"label": 2, "area": int((ids[0] == 2).sum())}]


@pytest.mark.parametrize("last", [False, True], ids=["then-another-step", "last-step"])
def test_a_labels_step_that_passes_its_input_on_keeps_the_images(tmp_path: Path,
                                                                 last: bool) -> None:
    plate = SyntheticPlate(wells=1, sites=1, channels=1, z_planes=2, size=32, cells=(1, 1))
    src = write_plate(tmp_path / "in", plate)
    segment = FunctionStep(_objects, labels="cells", passes_input=True, outputs=("cells",))
    steps = [_project, segment] + ([] if last else [FunctionStep(_copy)])
    report = Pipeline(steps).run(src, tmp_path / "out")
    assert report.ok, report.summary()
    out = ZarrStore(report.outputs["images"], read_only=True)
    [field] = out.list_files("", recursive=True)
    image, labels = out.load(field), out.load_labels(field, "cells")
    assert image.dtype == np.uint16 and image.max() > 2  # the projection, not the ids
    assert labels.shape == (1, 32, 32) and sorted(np.unique(labels)) == [0, 1, 2]
    rows = (tmp_path / "out/cells.csv").read_text().splitlines()
    assert rows[0].endswith("label,area") and [r.split(",")[-2] for r in rows[1:]] == ["1", "2"]
    assert not (tmp_path / "out/_objects.zarr").exists()  # not materialized: labels only
