"""The function catalog (issue 25): entries, steps, side outputs, the CLI, every entry run once."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.dtypes import DtypePolicyWarning
from memtype.pipeline import Pipeline, catalog
from memtype.pipeline.catalog.entry import DATA_FILE
from tests.catalog_support import arguments_for, sample_stack
from tests.pipeline_support import read_csv, write_plate


def _marks(entry: catalog.Entry) -> list[pytest.MarkDecorator]:
    """What an entry needs here: its library (and an OpenCL device or a CUDA GPU), an
    optional module."""
    marks = [pytest.mark.requires(entry.library)]
    if entry.memory_type == "pyclesperanto":
        marks.append(pytest.mark.opencl)
    if entry.memory_type == "cupy":  # cucim.skimage: CuPy kernels need a CUDA GPU
        marks += [pytest.mark.requires("cupy"), pytest.mark.gpu]
    if entry.needs:
        marks.append(pytest.mark.requires(entry.needs))
    return marks


ENTRIES = [pytest.param(e, id=e.name, marks=_marks(e)) for e in catalog.entries()]


def _call(step: Any, stack: Any) -> Any:
    """What a step's (single) call does to one stack, with the step's keyword arguments."""
    call = step.chain[0]
    return call.func(stack, **call.kwargs)


def _memory_type(x: Any) -> str:
    import memtype as mt

    return str(mt.detect_memory_type(x).value)


def _host(x: Any) -> np.ndarray[Any, Any]:
    import memtype as mt

    return np.asarray(mt.convert(x, "numpy"))


@pytest.mark.parametrize("entry", ENTRIES)
def test_every_entry_runs_as_declared(entry: catalog.Entry) -> None:
    """Run once on two 24x24 crops of coins: per slice if 2D, as a volume if nD or 3D."""
    stack = sample_stack(entry)
    func = catalog.catalog_function(entry, volume=entry.dimensions != "2d",
                                    **arguments_for(entry))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = func(stack)
    policy_warned = any(issubclass(w.category, DtypePolicyWarning) for w in caught)
    if entry.side_output:
        image, rows = result
        assert image is stack
        assert isinstance(rows, list) and all(isinstance(r, dict) for r in rows)
        if entry.output == "scalar":
            assert rows and all(isinstance(r["value"], (int, float, bool)) for r in rows)
        if entry.output == "coordinates":
            assert all({"y", "x"} <= set(r) for r in rows)
        if entry.dimensions == "2d":
            assert all("slice" in r for r in rows)
        return
    assert _memory_type(result) == entry.memory_type
    assert len(result.shape) == 3
    if entry.dimensions == "2d":
        assert result.shape[0] == stack.shape[0]
    if entry.dimensions == "3d":
        assert result.shape[0] == 1
    values = _host(result)
    if entry.output == "labels":
        assert np.issubdtype(values.dtype, np.integer) or np.array_equal(values, np.rint(values))
    elif entry.output == "mask":
        assert set(np.unique(values).tolist()) <= {0, 1}
    else:  # images keep the input's dtype, unless the dtype policy said why not
        assert values.dtype == _host(stack).dtype or policy_warned


@pytest.mark.opencl
@pytest.mark.requires("skimage", "scipy", "pyclesperanto")
def test_data_file_matches_the_installed_libraries() -> None:
    """entries.json is what the generator makes from the installed versions."""
    from memtype.pipeline.catalog.generate import generate

    data = json.loads(Path(DATA_FILE).read_text())
    fresh = generate()
    if fresh["versions"] != data["versions"]:
        pytest.fail(f"entries.json was generated for {data['versions']}, installed: "
                    f"{fresh['versions']}; run python -m memtype.pipeline.catalog.generate")
    assert json.loads(json.dumps(fresh)) == data


def test_listing_imports_no_image_library() -> None:
    code = ("import sys; from memtype.pipeline import catalog; catalog.entries(); "
            "catalog.search('gaussian'); catalog.step('skimage.filters.gaussian', sigma=2); "
            "print(sorted(m for m in ('skimage', 'scipy.ndimage', 'pyclesperanto', 'torch', "
            "'cupy', 'jax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_every_covered_function_is_an_entry_or_left_out_with_a_reason() -> None:
    names = [e.name for e in catalog.entries()]
    left = catalog.excluded()
    assert len(names) == len(set(names))
    assert not set(names) & {x.name for x in left}
    assert all(x.reason for x in left)
    assert {e.output for e in catalog.entries()} == set(catalog.OUTPUT_KINDS)


@pytest.mark.parametrize(("name", "kind", "dims"), [
    ("skimage.filters.gaussian", "image", "nd"),
    ("skimage.filters.threshold_otsu", "scalar", "nd"),
    ("skimage.measure.label", "labels", "nd"),
    ("skimage.measure.regionprops", "table", "nd"),
    ("skimage.feature.blob_log", "coordinates", "nd"),
    ("skimage.feature.canny", "mask", "2d"),
    ("pyclesperanto.maximum_z_projection", "image", "3d"),
    ("scipy.ndimage.label", "labels", "nd"),
], ids=lambda v: str(v))
def test_declared_kinds(name: str, kind: str, dims: str) -> None:
    entry = catalog.get(name)
    assert (entry.output, entry.dimensions) == (kind, dims)


def test_a_missing_required_argument_fails_at_construction() -> None:
    with pytest.raises(ValueError, match=r"needs 'output_shape'.*output_shape=\.\.\."):
        catalog.step("skimage.transform.resize")


def test_scipy_filters_need_a_size() -> None:
    with pytest.raises(ValueError, match="needs 'size'"):
        catalog.step("scipy.ndimage.median_filter")


def test_an_unknown_argument_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="takes no argument 'sigmaa'.*expected some of"):
        catalog.step("skimage.filters.gaussian", sigmaa=2)


def test_an_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(ValueError, match="Closest: skimage.filters.gaussian"):
        catalog.get("skimage.filters.gausian")


def test_a_left_out_function_says_why() -> None:
    with pytest.raises(ValueError, match="left out of the catalog: draws a matplotlib"):
        catalog.step("skimage.filters.try_all_threshold")


def test_volume_on_a_2d_function_is_refused() -> None:
    with pytest.raises(ValueError, match="2D images only"):
        catalog.step("skimage.feature.canny", volume=True)


@pytest.mark.requires("skimage")
def test_channels_never_mix_by_default() -> None:
    """A Gaussian over a stack of channels runs per slice; over z-planes, as a volume."""
    stack = np.zeros((2, 16, 16), np.float32)
    stack[1] = 1.0
    per_channel = catalog.step("skimage.filters.gaussian", sigma=2,
                               variable_components=("channel",))
    assert float(np.abs(_call(per_channel, stack)[0]).max()) == 0.0
    per_z = catalog.step("skimage.filters.gaussian", sigma=2)
    assert float(_call(per_z, stack)[0].max()) > 0.0


@pytest.mark.requires("skimage")
def test_a_threshold_is_one_number_per_stack() -> None:
    from skimage.filters import threshold_otsu

    stack = sample_stack(catalog.get("skimage.filters.threshold_otsu"))
    image, rows = _call(catalog.step("skimage.filters.threshold_otsu"), stack)
    assert image is stack
    assert rows == [{"value": int(threshold_otsu(stack))}]


@pytest.mark.requires("skimage")
def test_regionprops_rows_carry_the_label_id() -> None:
    labels = np.zeros((1, 12, 12), np.int32)
    labels[0, 1:4, 1:4] = 3
    labels[0, 6:10, 6:8] = 7
    _, rows = _call(catalog.step("skimage.measure.regionprops", volume=False), labels)
    assert [(r["slice"], r["label"], r["area"]) for r in rows] == [(0, 3, 9.0), (0, 7, 8.0)]
    assert rows[0]["centroid_y"] == 2.0


@pytest.mark.requires("skimage", "tifffile")
def test_catalog_steps_run_in_a_pipeline(tmp_path: Path) -> None:
    plate = tmp_path / "plate"
    write_plate(plate)
    steps = [catalog.step("skimage.filters.gaussian", sigma=1),
             catalog.step("skimage.filters.threshold_otsu", outputs=("otsu",)),
             catalog.step("skimage.measure.label", materialize=True)]
    report = Pipeline(steps).run(plate, tmp_path / "out")
    assert report.ok
    rows = read_csv(report.outputs["otsu"])
    assert rows and {"well", "site", "channel", "value"} <= set(rows[0])


@pytest.mark.parametrize("make", [
    lambda sigma: catalog.step("skimage.filters.gaussian", sigma=sigma),
    lambda sigma: catalog.operation("gaussian", sigma=sigma),
], ids=["step", "operation"])
def test_a_runs_record_names_the_arguments(make: Any) -> None:
    """Resume compares run records: a changed argument must change the record."""
    from memtype.pipeline.execution.provenance import run_record

    assert run_record([make(1.0)], {}) != run_record([make(2.0)], {})
    assert run_record([make(1.0)], {}) == run_record([make(1.0)], {})


@pytest.mark.requires("skimage")
def test_a_steps_arguments_reach_the_function() -> None:
    stack = np.zeros((1, 32, 32), np.float32)
    stack[0, 16, 16] = 1.0
    narrow = _call(catalog.step("skimage.filters.gaussian", sigma=1), stack)
    wide = _call(catalog.step("skimage.filters.gaussian", sigma=3), stack)
    assert float(wide.max()) < float(narrow.max())


def test_cli_lists_functions_with_their_kinds() -> None:
    out = subprocess.run([sys.executable, "-m", "memtype", "functions", "threshold_otsu"],
                         capture_output=True, text=True, check=True, env=_wide_env())
    assert "skimage.filters.threshold_otsu" in out.stdout
    assert "scalar" in out.stdout


def test_cli_lists_what_is_left_out() -> None:
    out = subprocess.run([sys.executable, "-m", "memtype", "functions", "--excluded",
                          "try_all"], capture_output=True, text=True, check=True,
                         env=_wide_env())
    assert "matplotlib" in out.stdout


def test_cli_lists_operations_with_their_frameworks() -> None:
    out = subprocess.run([sys.executable, "-m", "memtype", "functions", "--operations",
                          "gaussian"], capture_output=True, text=True, check=True,
                         env=_wide_env())
    assert "gaussian" in out.stdout and "pyclesperanto" in out.stdout
    assert "sigma=1.0" in out.stdout


def test_cli_lists_what_an_operation_takes_and_gives() -> None:
    out = subprocess.run([sys.executable, "-m", "memtype", "functions", "--operations",
                          "remove_small"], capture_output=True, text=True, check=True,
                         env=_wide_env())
    row = next(line for line in out.stdout.splitlines() if "remove_small_objects" in line)
    assert "input" in out.stdout
    assert "labels" in row and "min_size=64" in row and "torch" in row


def _wide_env() -> dict[str, str]:
    import os

    return {**os.environ, "COLUMNS": "200"}


# -- steps named by a string (issue 25, section 4) ------------------------------------------

def test_a_step_naming_an_entry_is_the_entrys_step() -> None:
    from memtype.pipeline import FunctionStep

    named = FunctionStep("skimage.filters.gaussian", sigma=2)
    made = catalog.step("skimage.filters.gaussian", sigma=2)
    assert named.name == made.name == "gaussian"
    assert named.chain[0].kwargs == made.chain[0].kwargs == {"sigma": 2}
    assert named.chain[0].func.__name__ == made.chain[0].func.__name__


def test_a_step_naming_an_operation_is_its_variant_step() -> None:
    from memtype.pipeline import FunctionStep

    step = FunctionStep("gaussian", sigma=2)
    assert step.variants is not None
    assert list(step.variants) == list(catalog.OPERATIONS["gaussian"].implementations)
    assert (step.name, step.chain[0].kwargs) == ("gaussian", {"sigma": 2})


def test_a_pipeline_takes_names_and_name_argument_pairs() -> None:
    pipeline = Pipeline(["gaussian", ("skimage.filters.gaussian", {"sigma": 2}),
                         ("threshold_otsu", {})], name="named")
    assert [s.name for s in pipeline.steps] == ["gaussian", "gaussian_2", "threshold_otsu"]
    assert pipeline.steps[0].variants is not None
    assert pipeline.steps[1].variants is None
    assert pipeline.steps[1].chain[0].kwargs == {"sigma": 2}


def test_a_named_steps_call_options_stay_the_steps() -> None:
    import memtype as mt
    from memtype.pipeline import FunctionStep

    step = FunctionStep("skimage.filters.gaussian", sigma=1,
                        dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)
    assert step.chain[0].kwargs == {"sigma": 1}
    assert step.kwargs == {"dtype_conversion": mt.DtypeConversion.NATIVE_OUTPUT}


@pytest.mark.parametrize(("name", "closest"), [
    ("gausian", "Closest: gaussian"),
    ("skimage.filters.gausian", "Closest: skimage.filters.gaussian"),
    ("median_filter", "scipy.ndimage.median_filter"),
], ids=["operation", "entry", "short-name"])
def test_an_unknown_step_name_lists_close_matches(name: str, closest: str) -> None:
    from memtype.pipeline import FunctionStep

    with pytest.raises(ValueError, match=f"{name!r} is neither an operation nor a catalog "
                                         f"function.*{closest}"):
        FunctionStep(name)


@pytest.mark.parametrize(("spec", "kwargs", "message"), [
    ("skimage.transform.resize", {}, "needs 'output_shape'"),
    (("skimage.transform.resize", {"order": 1}), {}, "needs 'output_shape'"),
    ("skimage.filters.gaussian", {"sigmaa": 2}, "takes no argument 'sigmaa'"),
    ("gaussian", {"size": 3}, "takes no parameter 'size'"),
    ("gaussian", {"volume": True}, "takes no volume="),
    ("skimage.feature.canny", {"volume": True}, "2D images only"),
    ("skimage.filters.try_all_threshold", {}, "left out of the catalog: draws a matplotlib"),
], ids=["missing", "missing-in-pair", "unknown-argument", "unknown-parameter",
        "volume-on-operation", "volume-on-2d", "left-out"])
def test_a_named_step_is_checked_at_construction(spec: Any, kwargs: dict[str, Any],
                                                 message: str) -> None:
    from memtype.pipeline import FunctionStep

    with pytest.raises(ValueError, match=message):
        FunctionStep(spec, **kwargs)


def test_a_named_pair_needs_a_dict() -> None:
    from memtype.pipeline import FunctionStep

    with pytest.raises(TypeError, match=r"\(name, kwargs\) with kwargs a dict; received "
                                        r"\('gaussian', int\)"):
        FunctionStep(("gaussian", 3))


def test_a_pipeline_file_names_catalog_steps(tmp_path: Path) -> None:
    from memtype.pipeline.commands import load_pipeline_file

    file = tmp_path / "named.py"
    file.write_text("from memtype.pipeline import Pipeline\n"
                    "pipeline = Pipeline(['white_tophat', ('gaussian', {'sigma': 2}),\n"
                    "                     'skimage.filters.threshold_otsu'])\n")
    pipeline = load_pipeline_file(str(file))
    assert [s.name for s in pipeline.steps] == ["white_tophat", "gaussian", "threshold_otsu"]
    assert pipeline.steps[1].chain[0].kwargs == {"sigma": 2}
