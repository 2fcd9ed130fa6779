"""Tables inside the plate (issue 24, section 2): each field's side-output rows are written to
``<field>/tables/<name>`` following the Fractal table specification (AnnData backend), read
back here with anndata itself, in OME-Zarr 0.4 and 0.5."""

from __future__ import annotations

import csv
import importlib
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

import memtype as mt
from memtype.pipeline import FunctionStep, Pipeline
from memtype.pipeline.synthetic import SyntheticPlate
from tests.pipeline_support import write_plate

pytestmark = pytest.mark.requires("zarr", "anndata")


@mt.numpy(dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)
def _objects(stack: np.ndarray) -> tuple[np.ndarray, list[dict[str, float]]]:
    ids = np.zeros(stack.shape, np.uint16)
    ids[:, :8, :8], ids[:, 16:, 16:] = 1, 2
    return ids, [{"label": i, "area": int((ids == i).sum()), "mean": float(stack[ids == i].mean())}
                 for i in (1, 2)]


@mt.numpy
def _count(stack: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    return stack, {"count": 2, "brightest": int(stack.max())}


def _run(tmp_path: Path, version: str) -> Path:
    plate = SyntheticPlate(wells=2, sites=2, channels=1, z_planes=2, size=32, cells=(1, 1))
    src = write_plate(tmp_path / "in", plate)
    steps = [FunctionStep(_objects, labels="cells", passes_input=True, outputs=("cells",)),
             FunctionStep(_count, outputs=("counts",))]
    report = Pipeline(steps, ome_version=version).run(src, tmp_path / "out")
    assert report.ok, report.summary()
    return Path(report.outputs["images"])


def _csv(path: Path, well: str, site: str) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh) if (r["well"], r["site"]) == (well, site)]


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_per_object_rows_are_a_feature_table_of_the_labels(tmp_path: Path,
                                                           version: str) -> None:
    import anndata
    import zarr

    plate = _run(tmp_path, version)
    field = zarr.open_group(str(plate / "A/2/2"), mode="r")  # well A02, site 2
    assert dict(field["tables"].attrs) == {"tables": ["cells", "counts"]}
    attrs = dict(field["tables/cells"].attrs)
    assert {k: attrs[k] for k in ("fractal_table_version", "type", "region", "instance_key")} \
        == {"fractal_table_version": "1", "type": "feature_table",
            "region": {"path": "../labels/cells"}, "instance_key": "label"}
    table = anndata.read_zarr(str(plate / "A/2/2/tables/cells"))
    rows = _csv(tmp_path / "out/cells.csv", "A02", "2")
    assert list(table.obs["label"]) == [1, 2] and list(table.obs_names) == ["1", "2"]
    assert list(table.var_names) == ["area", "mean"]
    np.testing.assert_allclose(table.X, [[float(r["area"]), float(r["mean"])] for r in rows],
                               rtol=1e-6)
    assert set(table.obs["well"]) == {"A02"} and set(table.obs["site"]) == {"2"}
    labels = np.asarray(zarr.open_array(str(plate / "A/2/2/labels/cells/0"), mode="r"))
    assert table.X[0, 0] == (labels == 1).sum()  # a row is found in the image by its id


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_per_field_rows_are_a_generic_table(tmp_path: Path, version: str) -> None:
    import anndata
    import zarr

    plate = _run(tmp_path, version)
    attrs = dict(zarr.open_group(str(plate / "A/1/1/tables/counts"), mode="r").attrs)
    assert attrs["fractal_table_version"] == "1" and "type" not in attrs
    table = anndata.read_zarr(str(plate / "A/1/1/tables/counts"))
    [row] = _csv(tmp_path / "out/counts.csv", "A01", "1")
    assert list(table.var_names) == ["count", "brightest"]
    assert table.X.tolist() == [[2.0, float(row["brightest"])]]
    assert list(table.obs["channel"]) == [row["channel"]]


@pytest.mark.requires("ome_zarr_models")
@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_a_plate_with_tables_still_validates(tmp_path: Path, version: str) -> None:
    import zarr

    plate = _run(tmp_path, version)
    hcs = importlib.import_module(f"ome_zarr_models.v0{version[-1]}.hcs")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hcs.HCS.from_zarr(zarr.open_group(str(plate), mode="r"))


@pytest.mark.parametrize("version", [2, 3])
def test_an_empty_table_reads_back(tmp_path: Path, version: int) -> None:
    import anndata
    import zarr

    from memtype.storage._tables import table_names, write_table

    image = str(tmp_path / "image.zarr")
    zarr.open_group(image, mode="w", zarr_format=version)
    write_table(image, "none", [], region="cells")
    write_table(image, "none", [{"label": 1, "area": 3}], region="cells")  # replaces it
    assert table_names(image) == ["none"]
    assert anndata.read_zarr(f"{image}/tables/none").shape == (1, 1)
    write_table(image, "empty", [])
    assert table_names(image) == ["none", "empty"]
    assert anndata.read_zarr(f"{image}/tables/empty").shape == (0, 0)
    assert sorted(os.listdir(f"{image}/tables")) == sorted(
        ["empty", "none", "zarr.json" if version == 3 else ".zgroup"]
        + ([] if version == 3 else [".zattrs"]))  # no staging left
