"""Pipeline, FunctionStep, executors (inline and threads), outputs, resume, progress."""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.errors import NoImagesError, PipelineError
from memtype.pipeline import ExecutionOptions, FunctionStep, Pipeline, WriteOptions, make_executor
from memtype.pipeline.execution.executors import (
    InlineExecutor,
    ThreadExecutor,
    current_worker_index,
)
from memtype.pipeline.execution.progress import LineProgress, Progress, RichProgress, make_progress
from memtype.pipeline.execution.report import GroupResult, RunReport, StepStats
from memtype.pipeline.io.tables import rows_to_table, side_output_rows
from tests.pipeline_support import SMALL, load_field, read_csv, stacks, write_plate

TIFF = "{well}_s{site}_w{channel}_z{z:03d}.tif"


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("plate"))


@pytest.fixture(scope="module")
def reference() -> dict[tuple[str, int, int], np.ndarray[Any, Any]]:
    return stacks(SMALL)


# -- functions used as steps (module level: threads and dask need them importable) -------
@mt.numpy
def np_project(stack: np.ndarray) -> np.ndarray:
    return stack.max(axis=0, keepdims=True)


@mt.torch
def torch_scale(stack: Any, factor: float = 2.0) -> Any:
    import torch

    return stack.to(torch.float32) * factor


@mt.jax
def jax_offset(stack: Any, offset: float = 1.0) -> Any:
    return stack + offset


@mt.numpy
def np_sum_count(stack: np.ndarray) -> tuple[np.ndarray, dict[str, float], int]:
    return stack, {"total": float(stack.sum())}, int(stack.shape[0])


@mt.numpy
def np_fail_if_bright(stack: np.ndarray, limit: float = 1e9) -> np.ndarray:
    if float(stack.max()) > limit:
        raise RuntimeError(f"too bright: {float(stack.max())}")
    return stack


@mt.numpy
def np_fail_if_bright_while(stack: np.ndarray, limit: float = 1e9, flag: str = "") -> np.ndarray:
    """np_fail_if_bright while the file ``flag`` exists: the same pipeline resumes once the
    cause is gone (a changed pipeline may not resume an output)."""
    if os.path.exists(flag) and float(stack.max()) > limit:
        raise RuntimeError(f"too bright: {float(stack.max())}")
    return stack


@mt.numpy
def np_channel_mean(stack: np.ndarray) -> np.ndarray:
    """A [C*Z, Y, X] stack -> its mean over everything but Y, X, as one plane."""
    return stack.astype(np.float32).mean(axis=0, keepdims=True)


@mt.numpy
def np_negate(stack: np.ndarray) -> np.ndarray:
    return -stack.astype(np.float32)


@mt.numpy
def np_2d(stack: np.ndarray) -> np.ndarray:
    return stack[0]


def plain_function(stack: np.ndarray) -> np.ndarray:
    return stack


NATIVE = {"dtype_conversion": mt.DtypeConversion.NATIVE_OUTPUT}


# -- FunctionStep ------------------------------------------------------------------------
def test_step_needs_a_decorated_function() -> None:
    with pytest.raises(TypeError, match="memtype decorator"):
        FunctionStep(plain_function)
    with pytest.raises(TypeError, match="tuple must be"):
        FunctionStep((np_project, 3))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        FunctionStep([])


def test_step_dict_needs_group_by() -> None:
    with pytest.raises(ValueError, match="group_by"):
        FunctionStep({1: np_project})
    with pytest.raises(ValueError, match="variable component"):
        FunctionStep({1: np_project}, group_by="z")


@pytest.mark.requires("torch")
@pytest.mark.requires("jax")
def test_step_names_types_and_chain() -> None:
    step = FunctionStep([(torch_scale, {"factor": 3.0}), jax_offset], **NATIVE)
    assert step.name == "torch_scale"
    assert [c.input_type for c in step.chain] == ["torch", "jax"]
    image, side = step.run(np.ones((2, 3, 3), np.uint16), (), None)
    assert side == []
    np.testing.assert_allclose(mt.convert(image, "numpy"), np.full((2, 3, 3), 4.0))


def test_step_pickles() -> None:
    step = FunctionStep(np_project, name="p", materialize=True)
    again = pickle.loads(pickle.dumps(step))
    assert again.name == "p" and again.materialize and again.chain[0].input_type == "numpy"


def test_pipeline_renames_repeated_steps() -> None:
    pipe = Pipeline([np_project, np_project, FunctionStep(np_project)])
    assert [s.name for s in pipe.steps] == ["np_project", "np_project_2", "np_project_3"]


def test_pipeline_leaves_the_callers_steps_as_they_are() -> None:
    step = FunctionStep(np_project)
    twice = Pipeline([step, step])
    assert [s.name for s in twice.steps] == ["np_project", "np_project_2"]
    assert step.name == "np_project"  # the caller's step: one object, never renamed
    assert [s.name for s in Pipeline([step]).steps] == ["np_project"]  # nothing leaks


def test_a_repeated_name_never_becomes_another_steps_name() -> None:
    pipe = Pipeline([np_project, np_project, FunctionStep(np_project, name="np_project_2")])
    assert [s.name for s in pipe.steps] == ["np_project", "np_project_3", "np_project_2"]


@pytest.mark.requires("torch")
@pytest.mark.requires("tifffile")
def test_plan_and_run_write_nothing_onto_the_callers_steps(plate_dir: Path,
                                                            tmp_path: Path) -> None:
    both = FunctionStep(mt.variants(numpy=lambda x: x * 2, torch=lambda x: x * 2), name="d",
                        dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)
    project = FunctionStep(np_project, materialize=True)
    before = [dict(vars(s)) for s in (both, project)]
    kwargs = dict(both.kwargs)
    pipeline = Pipeline([both, project, both, project])
    plan = pipeline.plan(plate_dir)
    assert set(plan.choices) == {"d", "d_2"}
    report = pipeline.run(plate_dir, tmp_path / "out")
    report.raise_for_failures()
    assert {"d", "np_project", "d_2", "np_project_2"} <= {s.name for s in report.steps}
    assert [dict(vars(s)) for s in (both, project)] == before
    assert both.kwargs == kwargs and both.name == "d" and project.name == "np_project"


# -- running -----------------------------------------------------------------------------
def _run(plate_dir: Path, out: Path, steps: list[Any], **kw: Any) -> RunReport:
    fmt = kw.pop("output_format", "zarr")
    task_by = kw.pop("task_by", ("well",))
    write = WriteOptions(**{k: kw.pop(k) for k in ("resume", "overwrite", "overwrite_foreign")
                            if k in kw})
    return Pipeline(steps, output_format=fmt, task_by=task_by).run(
        plate_dir, out, execution=ExecutionOptions(**kw), write=write)


@pytest.mark.parametrize("executor", ["inline", "threads"])
@pytest.mark.requires("tifffile")
def test_mixed_pipeline_matches_numpy(plate_dir: Path, tmp_path: Path, reference: Any,
                                      executor: str) -> None:
    steps = [FunctionStep(torch_scale, factor=0.5, **NATIVE), FunctionStep(jax_offset),
             FunctionStep(np_project)]
    report = _run(plate_dir, tmp_path / "out", steps, executor=executor, workers=2)
    assert report.ok and len(report.done) == 2
    for (well, site, channel), stack in reference.items():
        expected = (stack.astype(np.float32) * 0.5 + 1.0).max(axis=0)
        field = load_field(report.outputs["images"], well, site)
        assert field.shape == (2, 1, 64, 64) and field.dtype == np.float32
        np.testing.assert_array_equal(field[channel - 1, 0], expected)


@pytest.mark.requires("tifffile")
def test_plate_fields_get_pyramids_and_channel_names(plate_dir: Path, tmp_path: Path,
                                                     reference: Any) -> None:
    import json

    from memtype.storage import ZarrStore

    report = Pipeline([np_project], pyramid_levels=3).run(plate_dir, tmp_path / "out")
    assert report.ok
    well, site, _ = next(iter(reference))
    plate = ZarrStore(report.outputs["images"])
    path = plate.field_path(well[0], str(int(well[1:])), str(site))
    assert plate.load(path, resolution=2).shape == (2, 1, 16, 16)
    doc = json.loads((Path(plate.root) / path / "zarr.json").read_text())["attributes"]["ome"]
    assert [c["label"] for c in doc["omero"]["channels"]] == ["channel 1", "channel 2"]


def test_pyramid_levels_must_be_a_positive_int() -> None:
    with pytest.raises(mt.errors.InvalidArgumentError, match="pyramid_levels"):
        Pipeline([np_project], pyramid_levels=0)


@pytest.mark.requires("tifffile")
def test_tiff_output_keeps_the_pattern_names(plate_dir: Path, tmp_path: Path,
                                             reference: Any) -> None:
    report = _run(plate_dir, tmp_path / "out", [np_project], output_format="tiff")
    import tifffile

    images = Path(report.outputs["images"])
    names = sorted(p.name for p in images.iterdir())
    assert names[0] == "A01_s1_w1_z001.tif" and len(names) == 8  # z collapses to z=1
    got = tifffile.imread(images / "A02_s2_w2_z001.tif")
    np.testing.assert_array_equal(got, reference[("A02", 2, 2)].max(axis=0))


@pytest.mark.requires("tifffile")
def test_side_outputs_become_csv_tables(plate_dir: Path, tmp_path: Path, reference: Any) -> None:
    step = FunctionStep(np_sum_count, outputs=("totals", "planes"))
    report = _run(plate_dir, tmp_path / "out", [np_project, step])
    totals = read_csv(report.outputs["totals"])
    assert [list(r)[:3] for r in totals[:1]] == [["well", "site", "channel"]]
    assert len(totals) == 8
    for row in totals:
        stack = reference[(row["well"], int(row["site"]), int(row["channel"]))]
        assert float(row["total"]) == pytest.approx(float(stack.max(axis=0).sum()))
    planes = read_csv(report.outputs["planes"])
    assert {r["value"] for r in planes} == {"1"}


@pytest.mark.requires("tifffile")
def test_default_side_output_names(plate_dir: Path, tmp_path: Path) -> None:
    report = _run(plate_dir, tmp_path / "out", [FunctionStep(np_sum_count, name="m")])
    assert {"m_1", "m_2"} <= set(report.outputs)


@pytest.mark.requires("tifffile")
def test_group_by_routes_each_channel_to_its_function(plate_dir: Path, tmp_path: Path,
                                                      reference: Any) -> None:
    step = FunctionStep({1: np_project, 2: [np_project, np_negate]}, group_by="channel",
                        dtype_conversion=mt.DtypeConversion.FLOAT32)
    report = _run(plate_dir, tmp_path / "out", [step])
    field = load_field(report.outputs["images"], "A01", 1)
    stack1, stack2 = reference[("A01", 1, 1)], reference[("A01", 1, 2)]
    np.testing.assert_array_equal(field[0, 0], stack1.max(axis=0).astype(np.float32))
    np.testing.assert_array_equal(field[1, 0], -stack2.max(axis=0).astype(np.float32))


@pytest.mark.requires("tifffile")
def test_restacking_along_other_components(plate_dir: Path, tmp_path: Path,
                                           reference: Any) -> None:
    steps = [FunctionStep(torch_scale, factor=1.0, **NATIVE),
             FunctionStep(np_channel_mean, variable_components=("channel", "z"))]
    report = _run(plate_dir, tmp_path / "out", steps, output_format="tiff")
    import tifffile

    got = tifffile.imread(Path(report.outputs["images"]) / "A01_s2_w1_z001.tif")
    both = np.concatenate([reference[("A01", 2, 1)], reference[("A01", 2, 2)]])
    np.testing.assert_allclose(got, both.astype(np.float32).mean(axis=0), rtol=1e-6)


@pytest.mark.requires("tifffile")
def test_materialized_step_is_written_too(plate_dir: Path, tmp_path: Path, reference: Any) -> None:
    steps = [FunctionStep(torch_scale, factor=1.0, materialize=True, name="scaled", **NATIVE),
             FunctionStep(np_project)]
    report = _run(plate_dir, tmp_path / "out", steps)
    scaled = load_field(tmp_path / "out" / "scaled.zarr", "A02", 1)
    assert scaled.shape == (2, 3, 64, 64)
    np.testing.assert_array_equal(scaled[1], reference[("A02", 1, 2)].astype(np.float32))
    assert report.outputs["images"].endswith("plate.zarr")


@pytest.mark.requires("tifffile")
def test_conversions_between_host_steps_are_zero_copy(plate_dir: Path, tmp_path: Path) -> None:
    steps = [FunctionStep(torch_scale, factor=1.0, **NATIVE), FunctionStep(np_project)]
    report = _run(plate_dir, tmp_path / "out", steps)
    by_name = {s.name: s for s in report.steps}
    project = by_name["np_project"]
    assert project.stacks == 8 and project.conversions >= 8
    assert project.zero_copy == project.conversions and project.copied == 0
    assert project.bytes_converted == 8 * 3 * 64 * 64 * 4
    assert by_name["[load]"].stacks == 8 and by_name["[write]"].stacks == 8
    assert all(s.seconds > 0 and s.peak_rss > 0 for s in report.steps)
    text = report.summary()
    assert "torch_scale" in text and "2 done, 0 skipped, 0 failed" in text


@pytest.mark.requires("tifffile")
def test_tiny_intermediate_budget_spills_and_stays_correct(plate_dir: Path, tmp_path: Path,
                                                           reference: Any) -> None:
    steps = [FunctionStep(torch_scale, factor=1.0, **NATIVE), FunctionStep(jax_offset),
             FunctionStep(np_project)]
    report = _run(plate_dir, tmp_path / "out", steps, intermediate_budget=1)
    assert report.ok
    field = load_field(report.outputs["images"], "A01", 2)
    np.testing.assert_array_equal(
        field[0, 0], reference[("A01", 2, 1)].astype(np.float32).max(axis=0) + 1.0)


# -- failures, resume, existing output -----------------------------------------------------
def _split_wells(reference: Any) -> tuple[str, str, float]:
    """(dim well, bright well, a limit between their maxima): only the bright one fails."""
    peak = {w: max(float(v.max()) for k, v in reference.items() if k[0] == w)
            for w in ("A01", "A02")}
    dim, bright = sorted(peak, key=peak.__getitem__)
    assert peak[dim] < peak[bright]
    return dim, bright, (peak[dim] + peak[bright]) / 2


@pytest.mark.requires("tifffile")
def test_a_failing_group_keeps_the_others_and_resume_finishes(plate_dir: Path, tmp_path: Path,
                                                              reference: Any) -> None:
    dim, bright, limit = _split_wells(reference)
    out = tmp_path / "out"
    flag = tmp_path / "broken"
    flag.touch()
    failing = [np_project, FunctionStep(np_fail_if_bright_while, name="check", limit=limit,
                                        flag=str(flag))]
    report = _run(plate_dir, out, failing)
    assert [g.label for g in report.done] == [f"well={dim}"]
    [bad] = report.failed
    assert bad.label == f"well={bright}"
    assert f"group well={bright}" in bad.error and "'check'" in bad.error
    assert "np_fail_if_bright" in bad.error and "too bright" in bad.error
    assert "RuntimeError" in (bad.traceback or "")
    assert load_field(report.outputs["images"], dim, 1).shape == (2, 1, 64, 64)
    with pytest.raises(PipelineError, match=f"well={bright}"):
        report.raise_for_failures()

    with pytest.raises(FileExistsError, match="resume"):
        _run(plate_dir, out, [np_project])
    changed = [np_project, FunctionStep(np_fail_if_bright, name="check")]
    with pytest.raises(FileExistsError, match="produced by a different pipeline"):
        _run(plate_dir, out, changed, resume=True)  # would mix two pipelines' results
    flag.unlink()  # the cause is gone: the same pipeline finishes the run
    fixed = failing
    again = _run(plate_dir, out, fixed, resume=True)
    assert [g.label for g in again.skipped] == [f"well={dim}"]
    assert [g.label for g in again.done] == [f"well={bright}"] and again.ok
    np.testing.assert_array_equal(load_field(again.outputs["images"], bright, 2)[0, 0],
                                  reference[(bright, 2, 1)].max(axis=0))
    final = _run(plate_dir, out, fixed, resume=True)
    assert len(final.skipped) == 2 and not final.done


@pytest.mark.requires("tifffile")
def test_overwrite_replaces_an_earlier_output(plate_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _run(plate_dir, out, [np_project]).ok
    (out / "old.txt").write_text("old")
    report = _run(plate_dir, out, [np_project], overwrite=True)
    assert report.ok and not (out / "old.txt").exists()


@pytest.mark.requires("tifffile")
def test_overwrite_refuses_a_directory_memtype_did_not_write(plate_dir: Path,
                                                             tmp_path: Path) -> None:
    out = tmp_path / "thesis"
    out.mkdir()
    (out / "chapter1.tex").write_text("precious")
    for mode in ({"overwrite": True}, {"resume": True}):
        with pytest.raises(FileExistsError, match="memtype did not write") as info:
            _run(plate_dir, out, [np_project], **mode)
        assert isinstance(info.value, mt.errors.StoreExistsError)
        assert (out / "chapter1.tex").read_text() == "precious"
        assert sorted(os.listdir(out)) == ["chapter1.tex"]
    report = _run(plate_dir, out, [np_project], overwrite_foreign=True)
    assert report.ok and not (out / "chapter1.tex").exists()


@pytest.mark.requires("tifffile")
def test_side_tables_survive_resume(plate_dir: Path, tmp_path: Path, reference: Any) -> None:
    dim, bright, limit = _split_wells(reference)
    out = tmp_path / "out"
    flag = tmp_path / "broken"
    flag.touch()
    steps = [np_project, FunctionStep(np_sum_count, outputs=("totals", "n")),
             FunctionStep(np_fail_if_bright_while, limit=limit, flag=str(flag))]
    first = _run(plate_dir, out, steps)
    assert [r["well"] for r in read_csv(first.outputs["totals"])] == [dim] * 4
    flag.unlink()
    second = _run(plate_dir, out, steps, resume=True)
    rows = read_csv(second.outputs["totals"])
    assert [r["well"] for r in rows] == ["A01"] * 4 + ["A02"] * 4


@pytest.mark.requires("tifffile")
def test_wrong_output_shape_is_a_clear_group_error(plate_dir: Path, tmp_path: Path) -> None:
    step = FunctionStep(np_2d, name="flat")
    report = _run(plate_dir, tmp_path / "out", [step])
    assert len(report.failed) == 2
    assert "flat" in report.failed[0].error


@pytest.mark.requires("tifffile")
def test_missing_input_and_no_matching_file(tmp_path: Path, plate_dir: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        _run(tmp_path / "nope", tmp_path / "out", [np_project])
    with pytest.raises(NoImagesError, match="matches the pattern"):
        Pipeline([np_project], pattern="{well}_c{channel}.png").run(plate_dir, tmp_path / "o")
    assert isinstance(NoImagesError("x"), FileNotFoundError)


@pytest.mark.requires("tifffile")
def test_plate_output_refuses_groups_that_split_fields(plate_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="splits plate images"):
        _run(plate_dir, tmp_path / "out", [np_project], task_by=("well", "channel"))
    report = _run(plate_dir, tmp_path / "t", [np_project], task_by=("well", "channel"),
                  output_format="tiff")
    assert len(report.done) == 4


@pytest.mark.requires("tifffile")
def test_user_pattern(tmp_path: Path) -> None:
    import tifffile

    src = tmp_path / "in"
    src.mkdir()
    for site in (1, 2):
        for z in (1, 2):
            tifffile.imwrite(src / f"C07_s{site}_c1_z{z}.tif",
                             np.full((8, 8), site * 10 + z, np.uint16))
    pipe = Pipeline([np_project], pattern="{well}_s{site}_c{channel}_z{z}.tif")
    report = pipe.run(src, tmp_path / "out")
    field = load_field(report.outputs["images"], "C07", 2)
    assert field.shape == (1, 1, 8, 8) and int(field.max()) == 22


# -- executors and progress ----------------------------------------------------------------
def _square(offset: int, x: int) -> tuple[int, int]:
    return x * x + offset, current_worker_index()


def test_executors_map_with_shared_context() -> None:
    with make_executor("inline") as ex:
        assert isinstance(ex, InlineExecutor)
        assert sorted(ex.map_unordered(_square, 1, [1, 2, 3])) == [(2, 0), (5, 0), (10, 0)]
    with make_executor("threads", workers=2) as ex:
        assert isinstance(ex, ThreadExecutor) and ex.describe() == "threads (2 workers)"
        out = list(ex.map_unordered(_square, 0, list(range(20))))
        assert sorted(v for v, _ in out) == [x * x for x in range(20)]
        assert {w for _, w in out} <= {0, 1}
    with pytest.raises(ValueError, match="Unknown executor"):
        make_executor("processes")
    with pytest.raises(ValueError, match="workers"):
        make_executor("threads", workers=0)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.requires("rich")
def test_progress_is_quiet_off_a_terminal_and_a_bar_on_one() -> None:
    assert type(make_progress(None, io.StringIO())) is Progress
    assert type(make_progress(False, _Terminal())) is Progress
    bar = make_progress(None, _Terminal())
    assert isinstance(bar, RichProgress)
    bar.start(2, "demo")
    bar.step("well=A01", "normalize")
    bar.group_done(GroupResult((("well", "A01"),), "done"))
    bar.close()


def test_forced_progress_off_a_terminal_prints_a_line_per_group() -> None:
    stream = io.StringIO()
    lines = make_progress(True, stream)
    assert isinstance(lines, LineProgress)
    lines.start(12, "demo")
    lines.step("well=A01", "normalize")  # steps are not printed: one line per group
    lines.group_done(GroupResult((("well", "A01"),), "done", seconds=1.25))
    lines.group_done(GroupResult((("well", "B03"),), "failed", "step blur failed\ndetails",
                                 seconds=0.5))
    lines.close()
    assert stream.getvalue().splitlines() == [
        "demo: 12 groups",
        "[ 1/12] well=A01 done in 1.2 s",
        "[ 2/12] well=B03 failed in 0.5 s: step blur failed",
    ]


def test_report_merges_step_figures() -> None:
    a = GroupResult((("well", "A01"),), "done", steps=[StepStats("s", 1.0, 2, 3, 10, 3, 0, 5)])
    b = GroupResult((("well", "A02"),), "failed", "group well=A02 failed",
                    steps=[StepStats("s", 2.0, 1, 1, 5, 0, 1, 9)])
    report = RunReport.collect(["s"], [b, a], 3.5, "inline (1 worker)", {})
    [s] = report.steps
    assert (s.seconds, s.stacks, s.conversions, s.bytes_converted, s.peak_rss) == (3.0, 3, 4, 15, 9)
    assert [g.label for g in report.groups] == ["well=A01", "well=A02"]
    failed = [line for line in report.summary().splitlines() if line.startswith("FAILED")]
    assert not report.ok and len(failed) == 1 and "well=A02" in failed[0]


@pytest.mark.requires("torch")
def test_side_output_rows() -> None:
    fixed = (("well", "A01"), ("site", 2))
    assert side_output_rows(fixed, 3) == [{"well": "A01", "site": 2, "value": 3}]
    assert side_output_rows(fixed, {"n": np.int64(4)}) == [{"well": "A01", "site": 2, "n": 4}]
    rows = side_output_rows(fixed, mt.convert(np.array([1.5, 2.5]), "torch"))
    assert rows == [{"well": "A01", "site": 2, "index": 0, "value": 1.5},
                    {"well": "A01", "site": 2, "index": 1, "value": 2.5}]
    assert len(side_output_rows(fixed, [{"a": 1}, {"a": 2, "b": 3}])) == 2
    assert rows_to_table([{"a": 1}, {"b": 2}]) == [["a", "b"], [1, ""], ["", 2]]
    with pytest.raises(TypeError, match="side output"):
        side_output_rows(fixed, object())
    with pytest.raises(TypeError, match="1D/2D|0D, 1D or 2D"):
        side_output_rows(fixed, np.zeros((2, 2, 2)))


def test_importing_the_pipeline_package_loads_no_framework() -> None:
    import subprocess
    import sys

    code = ("import sys, memtype.pipeline, memtype.pipeline.commands; "
            "heavy = {'torch', 'jax', 'tensorflow', 'pyclesperanto', 'dask', 'distributed', "
            "'zarr', 'rich'}; print(sorted(heavy & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": "src"})
    assert out.stdout.strip() == "[]"


@pytest.mark.requires("tifffile")
def test_output_inside_the_input_is_not_read_back(tmp_path: Path) -> None:
    src = write_plate(tmp_path / "in")
    pipe = Pipeline([np_project], output_format="tiff")
    first = pipe.run(src, src / "results")
    assert first.ok
    # results/images/*.tif are not inputs
    again = pipe.run(src, src / "results", write=WriteOptions(overwrite=True))
    assert again.ok and len(again.done) == 2
    with pytest.raises(ValueError, match="contains, the input"):
        pipe.run(src, tmp_path, write=WriteOptions(overwrite=True))
    assert (src / "A01_s1_w1_z001.tif").exists()
