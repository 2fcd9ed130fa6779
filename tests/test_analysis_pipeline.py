"""Named inputs, object sets and their tables, pipeline files written as data, plate-wide
passes and per-well summaries (issue 32), and names that become paths and label channels
checked when declared or planned (issue 31, items 8 and 14)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.errors import InvalidArgumentError, PipelineSpecError
from memtype.pipeline import FunctionStep, Pipeline, WriteOptions
from memtype.pipeline.model.pipeline_file import dump_pipeline_spec, read_pipeline_spec
from memtype.pipeline.synthetic import SyntheticPlate, write_synthetic_plate
from tests.pipeline_support import stacks

# every case runs a plate through the analysis operations (scipy, scikit-image) and writes it
# (tifffile, zarr); without scipy (the wheel alone) the module skips, naming it
ndimage = pytest.importorskip("scipy.ndimage")
pytestmark = pytest.mark.requires("scipy", "skimage", "tifffile", "zarr", "yaml")

PLATE = SyntheticPlate(wells=2, sites=2, channels=2, z_planes=2, size=48, cells=(2, 4))


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plate")
    write_synthetic_plate(path, PLATE)
    return path


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@mt.numpy(contract="any", dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)
def bright_objects(image: Any) -> Any:
    """Objects: the pixels above the plane's mean, labelled."""
    labels, _ = ndimage.label(image[0] > image[0].mean())
    return labels[None].astype(np.int32)


@mt.numpy(contract="any")
def mean_inside(labels: Any, image: Any = None) -> dict[str, Any]:
    """Per object, the mean of ``image``; per image, the total of ``image``."""
    index = np.arange(1, int(labels.max()) + 1)
    return {"Mean": np.asarray(ndimage.mean(image[0], labels[0], index)),
            "Total": float(image.sum())}


def _expected(well: str, site: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Objects on channel 1's projection and channel 2's mean inside each, in NumPy."""
    data = stacks(PLATE)
    one, two = data[(well, site, 1)].max(axis=0), data[(well, site, 2)].max(axis=0)
    labels, count = ndimage.label(one > one.mean())
    return labels, np.asarray(ndimage.mean(two, labels, np.arange(1, count + 1)))


def test_named_inputs_measure_one_channel_inside_objects_of_another(plate_dir: Path,
                                                                   tmp_path: Path) -> None:
    steps = ["max_projection",
             FunctionStep(bright_objects, inputs={"image": "channel:1"}, labels="nuclei"),
             FunctionStep(mean_inside, inputs={"labels": "nuclei", "image": "channel:2"})]
    report = Pipeline(steps).run(plate_dir, tmp_path / "out")
    report.raise_for_failures()
    rows = _rows(tmp_path / "out" / "nuclei.csv")
    labels, means = _expected("A01", 2)
    got = [r for r in rows if r["well"] == "A01" and r["site"] == "2"]
    assert [int(r["ObjectNumber"]) for r in got] == list(range(1, labels.max() + 1))
    np.testing.assert_allclose([float(r["Mean"]) for r in got], means)
    image = {(r["well"], r["site"]): r for r in _rows(tmp_path / "out" / "image.csv")}
    assert int(image[("A01", "2")]["Count_nuclei"]) == labels.max()


def test_the_object_set_is_written_as_labels_of_the_plate(plate_dir: Path,
                                                          tmp_path: Path) -> None:
    from memtype.storage import ZarrStore

    steps = ["max_projection",
             FunctionStep(bright_objects, inputs={"image": "channel:1"}, labels="nuclei")]
    Pipeline(steps).run(plate_dir, tmp_path / "out").raise_for_failures()
    plate = ZarrStore(str(tmp_path / "out" / "plate.zarr"), read_only=True)
    labels = np.asarray(plate.load_labels("A/1/1", "nuclei")).squeeze()
    np.testing.assert_array_equal(labels, _expected("A01", 1)[0])


def test_a_reference_to_nothing_made_earlier_is_refused_when_the_pipeline_is_built() -> None:
    with pytest.raises(InvalidArgumentError, match=r"'cells' names nothing made before"):
        Pipeline([FunctionStep(mean_inside, inputs={"labels": "cells", "image": "channel:2"})])


@pytest.mark.parametrize("call", ["plan", "run"])
def test_a_channel_the_plate_lacks_is_refused_before_any_group(plate_dir: Path, tmp_path: Path,
                                                              call: str) -> None:
    steps = [FunctionStep(bright_objects, inputs={"image": "channel:DAPI"}, labels="n")]
    pipeline = Pipeline(["max_projection", *steps])
    with pytest.raises(InvalidArgumentError, match="has no channel 'DAPI'; it has 1, 2"):
        pipeline.plan(plate_dir) if call == "plan" else pipeline.run(plate_dir, tmp_path / "o")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("name", ["../../x", "/tmp/x", "a/b", ".hidden"])
def test_a_step_name_that_would_leave_the_output_is_refused(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="becomes a file or folder name"):
        FunctionStep(bright_objects, name=name, materialize=True)


def test_a_labels_chain_on_a_two_channel_plate_is_refused_at_plan_time(plate_dir: Path) -> None:
    pipeline = Pipeline(["max_projection", "gaussian", "threshold_otsu",
                         FunctionStep("label", labels="nuclei"), "label_statistics"])
    with pytest.raises(InvalidArgumentError, match=r"each group holds 2 channels \(1, 2\)"):
        pipeline.plan(plate_dir)


def test_the_fix_the_message_names_runs(plate_dir: Path, tmp_path: Path) -> None:
    steps = ["max_projection",
             FunctionStep(["gaussian", "threshold_otsu", "label"], inputs={"image": "channel:1"},
                          labels="nuclei"),
             FunctionStep("label_statistics",
                          inputs={"labels": "nuclei", "intensity": "channel:2"})]
    report = Pipeline(steps).run(plate_dir, tmp_path / "out")
    report.raise_for_failures()
    rows = _rows(tmp_path / "out" / "label_statistics.csv")
    assert rows and {"mean_intensity", "well", "site"} <= set(rows[0])


def test_catalog_names_are_allowed_in_a_routing_dict() -> None:
    step = FunctionStep({1: ["threshold_otsu", "label"], 2: "gaussian"}, group_by="channel")
    assert [c.func.__name__ for c in step.calls_for((("channel", 1),))] == ["otsu_mask", "label"]


SPEC = """\
name: counted
steps:
  - max_projection
  - gaussian: {sigma: 2}
  - identify_primary: {inputs: {image: "channel:1"}, labels: nuclei}
  - measure_intensity:
      inputs: {labels: nuclei, image: ["channel:1", "channel:2"]}
"""


def test_a_pipeline_file_lists_operations_with_named_inputs() -> None:
    pipeline = read_pipeline_spec(SPEC, "a.yaml")
    assert [s.name for s in pipeline.steps] == ["max_projection", "gaussian", "identify_primary",
                                                "measure_intensity", "measure_intensity_2"]
    assert pipeline.steps[4].chain[0].kwargs["image_name"] == "2"


def test_a_pipeline_file_written_out_reads_back_the_same() -> None:
    pipeline = read_pipeline_spec(SPEC, "a.yaml")
    again = read_pipeline_spec(dump_pipeline_spec(pipeline), "b.yaml")
    assert [(s.name, s.spec, s.inputs, s.labels) for s in again.steps] == \
        [(s.name, s.spec, s.inputs, s.labels) for s in pipeline.steps]


def test_a_python_function_cannot_be_written_as_a_pipeline_file() -> None:
    with pytest.raises(PipelineSpecError, match="runs a Python function"):
        dump_pipeline_spec(Pipeline([bright_objects]))


@pytest.mark.parametrize(("text", "message"), [
    ("steps:\n  - max_projection\n  - gausian: {sigma: 2}\n", r"a\.yaml:3: .*Closest: gaussian"),
    ("steps:\n  - max_projection\nstpes: 1\n", r"a\.yaml:3: unknown key 'stpes'"),
    ("steps:\n  - gaussian: {sigma: 2\n", r"a\.yaml:3: not valid YAML"),
    ("name: x\n", r"a\.yaml:1: no 'steps:'"),
    ("steps:\n  - max_projection\n  - identify_primary: {inputs: {image: nuclei}}\n",
     r"a\.yaml:3: .*'nuclei' names nothing made before"),
    ("steps:\n  - gaussian: {sigma: 2, inputs: {image: 'channel:1'}, sigmaa: 1}\n",
     r"a\.yaml:2: .*sigmaa"),
    ("steps:\n  - !!python/object/apply:os.system ['echo unsafe']\n",
     r"a\.yaml:2: not valid YAML \(could not determine a constructor"),
    ("steps: &a\n  - max_projection\n  - *a\n", r"a\.yaml:1: not valid YAML .*recursive"),
    ("steps:\n  - gaussian: {sigma: 1, sigma: 2}\n",
     r"a\.yaml:2: key 'sigma' is given twice \(first on line 2\)"),
    ("steps:\n  - max_projection\nsteps:\n  - gaussian\n",
     r"a\.yaml:3: key 'steps' is given twice \(first on line 1\)"),
    ("steps: " + "[" * 5000 + "]" * 5000 + "\n", r"a\.yaml:1: values are nested too deeply"),
])
def test_a_pipeline_file_error_names_the_file_and_line(text: str, message: str) -> None:
    with pytest.raises(PipelineSpecError, match=message):
        read_pipeline_spec(text, "a.yaml")


def test_normalize_plate_uses_every_field_of_the_plate(plate_dir: Path, tmp_path: Path) -> None:
    report = Pipeline(["normalize_plate", "max_projection"]).run(plate_dir, tmp_path / "out")
    report.raise_for_failures()
    data = stacks(PLATE)
    ones = np.concatenate([v.ravel() for k, v in data.items() if k[2] == 1]).astype(np.float64)
    saved = np.load(tmp_path / "out" / "passes" / "normalize_plate" / "1.npy")
    np.testing.assert_allclose(saved, [ones.mean(), ones.std()], rtol=1e-9)


def test_resume_reads_the_plate_pass_back(plate_dir: Path, tmp_path: Path) -> None:
    pipeline = Pipeline(["normalize_plate", "max_projection"])
    out = tmp_path / "out"
    pipeline.run(plate_dir, out).raise_for_failures()
    saved = out / "passes" / "normalize_plate" / "2.npy"
    np.save(saved, np.array([0.0, 1.0]))  # what a resumed run must use, not recompute
    (out / ".memtype" / "done" / "A02.json").unlink()
    pipeline.run(plate_dir, out, write=WriteOptions(resume=True)).raise_for_failures()
    np.testing.assert_array_equal(np.load(saved), [0.0, 1.0])


def test_a_plate_pass_after_another_step_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="put it before every other step"):
        Pipeline(["max_projection", "normalize_plate"])


def test_the_well_summary_joins_the_plate_map(plate_dir: Path, tmp_path: Path) -> None:
    from memtype.pipeline.analysis.summaries import Summary

    plate_map = tmp_path / "map.csv"
    plate_map.write_text("well,compound\nA1,DMSO\nA02,taxol\n")
    steps = ["max_projection",
             FunctionStep(bright_objects, inputs={"image": "channel:1"}, labels="nuclei"),
             FunctionStep(mean_inside, inputs={"labels": "nuclei", "image": "channel:2"})]
    summary = Summary(plate_map=str(plate_map), plate_id="P7")
    Pipeline(steps, summary=summary).run(plate_dir, tmp_path / "out").raise_for_failures()
    wells = {r["well"]: r for r in _rows(tmp_path / "out" / "well_summary.csv")}
    objects = [r for r in _rows(tmp_path / "out" / "nuclei.csv") if r["well"] == "A02"]
    means = [float(r["Mean"]) for r in objects]
    assert wells["A02"]["Plate"] == "P7" and wells["A02"]["compound"] == "taxol"
    assert int(wells["A02"]["nuclei_Count"]) == len(objects)
    assert float(wells["A02"]["nuclei_Median_Mean"]) == pytest.approx(np.median(means))
    assert float(wells["A02"]["nuclei_Mean_Mean"]) == pytest.approx(np.mean(means))


@pytest.mark.requires("anndata")
def test_the_well_summary_is_a_table_of_the_ome_zarr_plate(plate_dir: Path,
                                                           tmp_path: Path) -> None:
    import anndata

    from memtype.pipeline.analysis.summaries import Summary

    plate_map = tmp_path / "map.csv"
    plate_map.write_text("well,compound\nA01,DMSO\nA02,taxol\n")
    steps = ["max_projection",
             FunctionStep(bright_objects, inputs={"image": "channel:1"}, labels="nuclei")]
    Pipeline(steps, summary=Summary(plate_map=str(plate_map))).run(
        plate_dir, tmp_path / "out").raise_for_failures()
    table = anndata.read_zarr(tmp_path / "out" / "plate.zarr" / "tables" / "well_summary")
    assert list(table.obs["compound"]) == ["DMSO", "taxol"]
    counts = {r["well"]: float(r["nuclei_Count"])
              for r in _rows(tmp_path / "out" / "well_summary.csv")}
    assert list(table[:, "nuclei_Count"].X.ravel()) == [counts["A01"], counts["A02"]]


@pytest.mark.parametrize(("text", "message"), [
    ("compound\nDMSO\n", "expected a 'well' column"),
    ("well,compound\nA01,x\nA1,y\n", "line 3: well A01 is named twice"),
    ("well,compound\nXYZ,x\n", "line 2: well 'XYZ' is not a well name"),
    ("well,well\nA01,x\n", r"the header names \['well'\] more than once"),
    ("well,compound\nA01,x,extra\n", r"line 2: 3 values; expected one per column"),
    ("well,compound\nA01\n", r"line 2: 1 values; expected one per column"),
    ('well,compound\nA01,"unclosed\n', r"is not valid CSV"),
    ("", r"received columns none \(the file is empty\)"),
])
def test_a_malformed_plate_map_is_refused(tmp_path: Path, text: str, message: str) -> None:
    from memtype.errors import StoreFormatError
    from memtype.pipeline.analysis.summaries import read_plate_map

    path = tmp_path / "map.csv"
    path.write_text(text)
    with pytest.raises(StoreFormatError, match=message):
        read_plate_map(str(path))


def test_a_plate_map_not_in_utf8_is_refused(tmp_path: Path) -> None:
    from memtype.errors import StoreFormatError
    from memtype.pipeline.analysis.summaries import read_plate_map

    path = tmp_path / "map.csv"
    path.write_bytes("well,compound\nA01,caf\u00e9ine\n".encode("latin-1"))
    with pytest.raises(StoreFormatError, match="is not UTF-8 text"):
        read_plate_map(str(path))


def test_a_plate_map_saved_by_excel_reads(tmp_path: Path) -> None:
    """A byte-order mark before the header, blank lines and spaces around names."""
    from memtype.pipeline.analysis.summaries import read_plate_map

    path = tmp_path / "map.csv"
    path.write_bytes(b"\xef\xbb\xbfwell , compound\r\nA1,DMSO\r\n\r\nB02,taxol\r\n\r\n")
    assert read_plate_map(str(path)) == {"A01": {"compound": "DMSO"},
                                         "B02": {"compound": "taxol"}}


def test_a_bad_plate_map_stops_the_run_before_any_group(plate_dir: Path,
                                                        tmp_path: Path) -> None:
    """Found when the run starts, not when the summary is written after the last well."""
    from memtype.errors import StoreFormatError
    from memtype.pipeline.analysis.summaries import Summary

    plate_map = tmp_path / "map.csv"
    plate_map.write_text("well,compound\nA01,DMSO\nA1,taxol\n")
    steps = ["max_projection",
             FunctionStep(bright_objects, inputs={"image": "channel:1"}, labels="nuclei")]
    with pytest.raises(StoreFormatError, match="well A01 is named twice"):
        Pipeline(steps, summary=Summary(plate_map=str(plate_map))).run(
            plate_dir, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_catalog_function_takes_its_second_image_by_name(plate_dir: Path,
                                                           tmp_path: Path) -> None:
    from skimage.exposure import match_histograms

    from memtype.storage import ZarrStore

    steps = ["max_projection",
             FunctionStep("skimage.exposure.match_histograms", materialize=True,
                          name="matched", inputs={"image": "channel:2",
                                                  "reference": "channel:1"})]
    Pipeline(steps).run(plate_dir, tmp_path / "out").raise_for_failures()
    data = stacks(PLATE)
    two, one = data[("A02", 1, 2)].max(axis=0), data[("A02", 1, 1)].max(axis=0)
    plate = ZarrStore(str(tmp_path / "out" / "matched.zarr"), read_only=True)
    written = np.asarray(plate.load("A/2/1")).squeeze()
    np.testing.assert_array_equal(written, np.rint(match_histograms(two, one)))


@pytest.mark.parametrize("name", ["skimage.restoration.richardson_lucy",
                                  "skimage.exposure.match_histograms",
                                  "skimage.segmentation.random_walker"])
def test_second_image_functions_are_catalog_entries(name: str) -> None:
    from memtype.pipeline import catalog

    assert catalog.get(name).images


def test_correct_illumination_divides_by_the_plates_mean_per_channel(plate_dir: Path,
                                                                     tmp_path: Path) -> None:
    from memtype.pipeline.analysis.illumination import IlluminationAccumulator
    from memtype.storage import ZarrStore

    step = ("correct_illumination", {"smoothing": "none"})
    Pipeline([step, "max_projection"]).run(plate_dir, tmp_path / "out").raise_for_failures()
    expected = IlluminationAccumulator()
    for (_, _, channel), stack in stacks(PLATE).items():
        for plane in stack if channel == 2 else ():
            expected.add(plane)
    function = expected.function(smoothing="none")
    saved = np.load(tmp_path / "out" / "passes" / "correct_illumination" / "2.npy")
    np.testing.assert_allclose(saved, function, rtol=1e-6)
    plate = ZarrStore(str(tmp_path / "out" / "plate.zarr"), read_only=True)
    written = np.asarray(plate.load("A/2/2"))[1, 0]  # well A02, site 2: channel 2, z 1
    corrected = stacks(PLATE)[("A02", 2, 2)] / saved
    np.testing.assert_allclose(written, corrected.max(axis=0), rtol=1e-5)


def test_resume_with_other_inputs_is_refused(plate_dir: Path, tmp_path: Path) -> None:
    from memtype.errors import StoreExistsError

    def steps(channel: str) -> list[Any]:
        return ["max_projection",
                FunctionStep(bright_objects, inputs={"image": channel}, labels="nuclei")]

    Pipeline(steps("channel:1")).run(plate_dir, tmp_path / "out").raise_for_failures()
    with pytest.raises(StoreExistsError, match="inputs"):
        Pipeline(steps("channel:2")).run(plate_dir, tmp_path / "out",
                                         write=WriteOptions(resume=True))


@pytest.mark.parametrize("name", ["image", "well_summary", "nuclei"])
def test_an_object_set_never_takes_a_tables_name(name: str) -> None:
    first = FunctionStep(bright_objects, inputs={"image": "channel:1"}, labels="nuclei")
    again = FunctionStep(bright_objects, inputs={"image": "channel:2"}, labels=name)
    with pytest.raises(InvalidArgumentError, match=f"labels={name!r} is"):
        Pipeline(["max_projection", first, again])


@pytest.mark.parametrize("method", ["propagation", "watershed", "distance"])
def test_every_object_and_measurement_operation_runs_by_name(plate_dir: Path, tmp_path: Path,
                                                             method: str) -> None:
    steps = ["max_projection",
             FunctionStep("identify_primary", inputs={"image": "channel:1"}, labels="nuclei"),
             FunctionStep("identify_secondary", inputs={"primary": "nuclei", "image": "channel:2"},
                          labels="cells", method=method),
             FunctionStep("measure_neighbors", inputs={"labels": "cells"}, distance=3),
             FunctionStep("measure_size_shape", inputs={"labels": "nuclei"}),
             FunctionStep("measure_image_quality", inputs={"image": "channel:2"})]
    Pipeline(steps).run(plate_dir, tmp_path / "out").raise_for_failures()
    cells = _rows(tmp_path / "out" / "cells.csv")
    nuclei = _rows(tmp_path / "out" / "nuclei.csv")
    image = _rows(tmp_path / "out" / "image.csv")
    assert cells and "Neighbors_NumberOfNeighbors_3" in cells[0]
    assert "AreaShape_Area" in nuclei[0] and "Children_cells_Count" in nuclei[0]
    assert any(c.startswith("ImageQuality_") and c.endswith("_2") for c in image[0])
    assert all(int(r["Children_cells_Count"]) <= 1 for r in nuclei)


def test_a_blurred_field_is_flagged_in_the_quality_table() -> None:
    from memtype.pipeline.analysis.summaries import quality_flags

    image = [{"well": "A01", "site": str(s), "ImageQuality_FocusScore_1": str(1.0 + s / 100)}
             for s in range(1, 10)]
    image.append({"well": "A02", "site": "1", "ImageQuality_FocusScore_1": "0.01"})
    flags = quality_flags(image)
    assert [f["Flagged"] for f in flags] == [0] * 9 + [1]
    assert flags[-1]["well"] == "A02" and "FocusScore_1" in flags[-1]["Reasons"]


def test_a_pipeline_file_written_as_python_imports_as_the_same_pipeline(tmp_path: Path) -> None:
    from memtype.pipeline.model.modules import import_pipeline_file
    from memtype.pipeline.model.pipeline_file import dump_pipeline_python

    pipeline = read_pipeline_spec(SPEC + "summary: {plate_id: P2}\n", "a.yaml")
    path = tmp_path / "as_python.py"
    path.write_text(dump_pipeline_python(pipeline))
    again = import_pipeline_file(path).pipeline
    assert [(s.name, s.spec, s.inputs, s.labels) for s in again.steps] == \
        [(s.name, s.spec, s.inputs, s.labels) for s in pipeline.steps]
    assert again.summary == pipeline.summary and again.name == "counted"


def test_a_routing_dict_without_every_channel_is_refused_at_plan_time(plate_dir: Path) -> None:
    pipeline = Pipeline(["max_projection",
                         FunctionStep({1: ["threshold_otsu", "label"]}, group_by="channel",
                                      labels="nuclei")])
    with pytest.raises(InvalidArgumentError, match="has no function for channel=2"):
        pipeline.plan(plate_dir)


@pytest.mark.parametrize(("name", "closest"), [("identify_primry", "identify_primary"),
                                               ("measure_intensities", "measure_intensity"),
                                               ("correct_ilumination", "correct_illumination")])
def test_a_misspelt_analysis_operation_names_the_closest(name: str, closest: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"Closest: {closest}"):
        FunctionStep(name)


def test_an_error_quoting_a_huge_value_stays_small() -> None:
    """Anchors make a small file say a huge value (9**8 strings here); an error quoting it
    keeps its start and end (memtype.errors.MESSAGE_LIMIT), never megabytes of text."""
    from memtype.errors import MESSAGE_LIMIT

    lines = ["steps:", "  - max_projection:", '      x0: &a ["x","x","x","x","x","x","x","x","x"]']
    for i, (name, prev) in enumerate(zip("bcdefgh", "abcdefg", strict=True)):
        lines.append(f"      x{i + 1}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    lines.append("      inputs: {image: *h}")
    with pytest.raises(PipelineSpecError, match=r"^a\.yaml:2: .*characters left out") as info:
        read_pipeline_spec("\n".join(lines) + "\n", "a.yaml")
    assert len(str(info.value)) <= MESSAGE_LIMIT
