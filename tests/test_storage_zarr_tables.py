"""Tables inside the plate (issue 24, section 2): each field's side-output rows are written to
``<field>/tables/<name>`` following the Fractal table specification (AnnData backend), read
back here with anndata itself, in OME-Zarr 0.4 and 0.5."""

from __future__ import annotations

import csv
import importlib
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.omezarr.metadata import SPACE_UNITS
from memtype.pipeline import FunctionStep, Pipeline
from memtype.pipeline.synthetic import SyntheticPlate
from tests.pipeline_support import write_plate

pytestmark = pytest.mark.requires("zarr", "anndata")


@mt.numpy(dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)
def _objects(stack: np.ndarray) -> tuple[np.ndarray, list[dict[str, float]]]:
    ids = np.zeros(stack.shape, np.uint16)
    ids[:1, 2:6, 4:12], ids[:, 16:, 20:] = 1, 2  # not square, not in every plane: axes differ
    return ids, [{"label": i, "area": int((ids == i).sum()), "mean": float(stack[ids == i].mean())}
                 for i in (1, 2)]


@mt.numpy
def _count(stack: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    return stack, {"count": 2, "brightest": int(stack.max())}


VOXEL = (2.0, 0.5, 0.25)
"""The voxel size (z, y, x, micrometres) of the runs below."""


def _run(tmp_path: Path, version: str, pixel_size: tuple[float, ...] = VOXEL,
         pixel_unit: str = "micrometer") -> Path:
    plate = SyntheticPlate(wells=2, sites=2, channels=1, z_planes=2, size=32, cells=(1, 1))
    src = write_plate(tmp_path / "in", plate)
    steps = [FunctionStep(_objects, labels="cells", passes_input=True, outputs=("cells",)),
             FunctionStep(_count, outputs=("counts",))]
    report = Pipeline(steps, ome_version=version, pixel_size=pixel_size,
                      pixel_unit=pixel_unit).run(src, tmp_path / "out")
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
    assert dict(field["tables"].attrs) == {"tables": [
        "FOV_ROI_table", "well_ROI_table", "cells_ROI_table", "cells", "counts"]}
    attrs = dict(field["tables/cells"].attrs)
    assert {k: attrs[k] for k in ("fractal_table_version", "type", "region", "instance_key")} \
        == {"fractal_table_version": "1", "type": "feature_table",
            "region": {"path": "../labels/cells"}, "instance_key": "label"}
    assert {k: attrs[k] for k in ("table_version", "backend", "index_key", "index_type")} \
        == {"table_version": "1", "backend": "anndata", "index_key": "label",
            "index_type": "int"}  # ngio's backend metadata
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

    from memtype.omezarr.tables import table_names, write_table

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


# -- ROI tables ------------------------------------------------------------------------------

ROI = ["x_micrometer", "y_micrometer", "z_micrometer",
       "len_x_micrometer", "len_y_micrometer", "len_z_micrometer"]


def _boxes(labels: np.ndarray, voxel: tuple[float, float, float]) -> list[list[float]]:
    """Each object's bounding box as a ROI row, from np.nonzero."""
    rows = []
    for i in sorted(set(np.unique(labels)) - {0}):
        z, y, x = np.nonzero(labels == i)
        start = [a.min() * v for a, v in zip((x, y, z), voxel[::-1])]
        size = [(a.max() + 1 - a.min()) * v for a, v in zip((x, y, z), voxel[::-1])]
        rows.append(start + size)
    return rows


@pytest.mark.parametrize("name,index", [("FOV_ROI_table", "FOV_2"), ("well_ROI_table", "well_1")])
@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_every_field_has_a_roi_table_of_its_image(tmp_path: Path, version: str, name: str,
                                                  index: str) -> None:
    import anndata
    import zarr

    plate = _run(tmp_path, version)
    attrs = dict(zarr.open_group(str(plate / f"A/1/2/tables/{name}"), mode="r").attrs)
    assert {k: attrs[k] for k in ("type", "fractal_table_version", "index_key", "index_type")} \
        == {"type": "roi_table", "fractal_table_version": "1", "index_key": "FieldIndex",
            "index_type": "str"}
    table = anndata.read_zarr(str(plate / f"A/1/2/tables/{name}"))
    assert list(table.obs_names) == [index] and table.obs_names.name == "FieldIndex"
    assert list(table.var_names) == ROI
    assert table.X.tolist() == [[0.0, 0.0, 0.0, 32 * 0.25, 32 * 0.5, 2 * 2.0]]


def test_a_materialized_step_plate_has_roi_tables_too(tmp_path: Path) -> None:
    import anndata

    plate = SyntheticPlate(wells=1, sites=1, channels=1, z_planes=2, size=32, cells=(1, 1))
    src = write_plate(tmp_path / "in", plate)
    steps = [FunctionStep(_count, name="kept", materialize=True, outputs=("counts",)),
             FunctionStep(_count, outputs=("again",))]
    report = Pipeline(steps, pixel_size=VOXEL).run(src, tmp_path / "out")
    assert report.ok, report.summary()
    table = anndata.read_zarr(str(tmp_path / "out/kept.zarr/A/1/1/tables/FOV_ROI_table"))
    assert table.X.tolist() == [[0.0, 0.0, 0.0, 32 * 0.25, 32 * 0.5, 2 * 2.0]]


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_labels_have_a_masking_roi_table_of_their_objects(tmp_path: Path, version: str) -> None:
    import anndata
    import zarr

    plate = _run(tmp_path, version)
    path = plate / "A/2/1/tables/cells_ROI_table"
    attrs = dict(zarr.open_group(str(path), mode="r").attrs)
    assert {k: attrs[k] for k in ("type", "region", "instance_key", "index_key")} \
        == {"type": "masking_roi_table", "region": {"path": "../labels/cells"},
            "instance_key": "label", "index_key": "label"}
    labels = np.asarray(zarr.open_array(str(path.parents[1] / "labels/cells/0"), mode="r"))
    table = anndata.read_zarr(str(path))
    assert list(table.obs["label"]) == [1, 2] and list(table.obs_names) == ["1", "2"]
    assert list(table.var_names) == ROI
    np.testing.assert_allclose(table.X, _boxes(labels, VOXEL), rtol=1e-6)


def test_roi_tables_are_in_micrometres_whatever_the_unit(tmp_path: Path) -> None:
    import anndata

    plate = _run(tmp_path, "0.5", pixel_size=(500.0, 100.0, 50.0), pixel_unit="nanometer")
    table = anndata.read_zarr(str(plate / "A/1/1/tables/FOV_ROI_table"))
    np.testing.assert_allclose(table.X, [[0, 0, 0, 32 * 0.05, 32 * 0.1, 2 * 0.5]], rtol=1e-6)
    objects = anndata.read_zarr(str(plate / "A/1/1/tables/cells_ROI_table"))
    np.testing.assert_allclose(objects.X[1], [20 * 0.05, 16 * 0.1, 0, 12 * 0.05, 16 * 0.1, 1.0],
                               rtol=1e-6)


@pytest.mark.parametrize("unit", SPACE_UNITS)
def test_every_ome_space_unit_has_a_size_in_micrometres(unit: str) -> None:
    from memtype.omezarr.metadata import MICROMETRES as _MICROMETRES

    assert isinstance(_MICROMETRES[unit], float) and _MICROMETRES[unit] > 0


@pytest.mark.parametrize("unit,micrometres", [
    ("angstrom", 1e-4), ("nanometer", 1e-3), ("micrometer", 1.0), ("millimeter", 1e3),
    ("centimeter", 1e4), ("meter", 1e6), ("kilometer", 1e9), ("inch", 25_400.0)])
def test_a_unit_is_converted_to_micrometres(unit: str, micrometres: float) -> None:
    from memtype.omezarr.metadata import MICROMETRES as _MICROMETRES

    assert _MICROMETRES[unit] == pytest.approx(micrometres, rel=1e-12)


LABEL_CASES = {
    "empty": np.zeros((4, 5), np.uint16),
    "2d": np.array([[0, 1, 1], [2, 0, 1], [2, 2, 0]], np.uint16),
    "3d, ids with gaps": np.pad(np.arange(24, dtype=np.int32).reshape(2, 3, 4) % 7 * 3, 1),
    "one id in two places": np.array([[5, 0, 0, 0], [0, 0, 0, 5]], np.uint8),
    "4d (t z y x)": np.arange(2 * 2 * 3 * 3).reshape(2, 2, 3, 3) % 4,
}


@pytest.mark.parametrize("case", list(LABEL_CASES))
def test_label_boxes_are_each_ids_bounding_box(case: str) -> None:
    from memtype.omezarr.tables import label_boxes

    labels = LABEL_CASES[case]
    ids, start, stop = label_boxes(labels)
    expected = sorted(set(np.unique(labels).tolist()) - {0})
    assert ids.tolist() == expected and start.shape == stop.shape == (len(expected), labels.ndim)
    for i, value in enumerate(expected):
        where = np.nonzero(labels == value)
        assert start[i].tolist() == [int(a.min()) for a in where]
        assert stop[i].tolist() == [int(a.max()) + 1 for a in where]


@pytest.mark.parametrize("version", [2, 3])
def test_a_label_image_without_objects_has_an_empty_masking_table(tmp_path: Path,
                                                                  version: int) -> None:
    import anndata
    import zarr

    from memtype.omezarr.assemble import write_object_rois as _write_object_rois

    image = str(tmp_path / "image.zarr")
    zarr.open_group(image, mode="w", zarr_format=version)
    _write_object_rois(image, "cells", np.zeros((1, 8, 8), np.uint16), (1.0, 1.0, 1.0))
    table = anndata.read_zarr(f"{image}/tables/cells_ROI_table")
    assert table.shape == (0, 6) and list(table.var_names) == ROI


# -- read back with ngio, the Fractal table library -------------------------------------------

@pytest.fixture(scope="module", params=["0.4", "0.5"])
def ngio_plate(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A run's plate (OME-Zarr 0.4 and 0.5) and ngio's container of its field A/2/1."""
    import ngio  # each test's requires marker skips it first where ngio is absent

    plate = _run(tmp_path_factory.mktemp(f"ngio{request.param}"), request.param)
    opened = ngio.open_ome_zarr_plate(str(plate))
    return plate, opened.get_images(max_workers=1)["A/2/1"]


@pytest.mark.requires("ngio")
def test_ngio_opens_the_plate_and_lists_the_tables(ngio_plate: tuple[Path, Any]) -> None:
    import ngio

    plate, field = ngio_plate
    opened = ngio.open_ome_zarr_plate(str(plate))
    assert sorted(opened.get_images(max_workers=1)) == ["A/1/1", "A/1/2", "A/2/1", "A/2/2"]
    assert field.list_tables() == ["FOV_ROI_table", "well_ROI_table", "cells_ROI_table",
                                   "cells", "counts"]
    assert field.list_labels() == ["cells"]


@pytest.mark.requires("ngio")
def test_ngio_reads_the_feature_table(ngio_plate: tuple[Path, Any]) -> None:
    plate, field = ngio_plate
    table = field.get_table("cells")
    assert table.table_type() == "feature_table"
    frame = table.dataframe
    rows = _csv(plate.parent / "cells.csv", "A02", "1")
    assert list(frame.index) == [1, 2] and frame.index.name == "label"
    np.testing.assert_allclose(frame[["area", "mean"]].to_numpy(),
                               [[float(r["area"]), float(r["mean"])] for r in rows], rtol=1e-6)


@pytest.mark.requires("ngio")
def test_ngio_reads_the_generic_table(ngio_plate: tuple[Path, Any]) -> None:
    plate, field = ngio_plate
    table = field.get_table("counts")
    [row] = _csv(plate.parent / "counts.csv", "A02", "1")
    assert table.table_type() == "generic_table"
    assert table.dataframe["brightest"].tolist() == [float(row["brightest"])]


@pytest.mark.requires("ngio")
@pytest.mark.parametrize("name,index", [("FOV_ROI_table", "FOV_1"), ("well_ROI_table", "well_1")])
def test_ngio_cuts_the_whole_image_by_a_field_roi(ngio_plate: tuple[Path, Any], name: str,
                                                  index: str) -> None:
    _, field = ngio_plate
    table = field.get_table(name)
    assert table.table_type() == "roi_table"
    image = field.get_image()
    assert image.get_roi(table.get(index)).shape == image.shape == (1, 2, 32, 32)


@pytest.mark.requires("ngio")
def test_ngio_masks_an_object_by_its_label(ngio_plate: tuple[Path, Any]) -> None:
    plate, field = ngio_plate
    assert field.get_table("cells_ROI_table").table_type() == "masking_roi_table"
    masked = field.get_masked_image("cells")
    labels = np.asarray(field.get_label("cells").get_as_numpy())
    for label in (1, 2):
        z, y, x = np.nonzero(labels == label)
        box = (slice(z.min(), z.max() + 1), slice(y.min(), y.max() + 1),
               slice(x.min(), x.max() + 1))
        values = np.asarray(masked.get_roi_masked(label=label))
        pixels = np.asarray(field.get_image().get_as_numpy())[(slice(None), *box)]
        np.testing.assert_array_equal(values, np.where(labels[box] == label, pixels, 0))
