"""A group's failure stays that group's: sys.exit in a step, Ctrl-C, side-output columns."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.errors import SideOutputError
from memtype.pipeline import ExecutionOptions, FunctionStep, Pipeline, WriteOptions
from memtype.pipeline.io.tables import side_output_rows
from tests.pipeline_support import SMALL, load_field, read_csv, stacks, write_plate


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("plate"))


@pytest.fixture(scope="module")
def split() -> tuple[str, str, float]:
    """(dim well, bright well, a limit between their maxima): only the bright one fails."""
    from tests.test_pipeline import _split_wells

    return _split_wells(stacks(SMALL))


# -- steps (module level: threads and dask workers import them) -------------------------
@mt.numpy
def np_exit_if_bright(stack: np.ndarray, limit: float = 1e9) -> np.ndarray:
    if float(stack.max()) > limit:
        sys.exit(3)
    return stack.max(axis=0, keepdims=True)


class _Stop(BaseException):
    """A BaseException that is neither SystemExit nor KeyboardInterrupt."""


@mt.numpy
def np_base_exception_if_bright(stack: np.ndarray, limit: float = 1e9) -> np.ndarray:
    if float(stack.max()) > limit:
        raise _Stop("stopped")
    return stack.max(axis=0, keepdims=True)


@mt.numpy
def np_interrupt_if_bright(stack: np.ndarray, limit: float = 1e9, flag: str = "") -> np.ndarray:
    """Ctrl-C on a bright stack while the file ``flag`` exists (a resumed run uses the same
    pipeline: a changed one may not resume an output)."""
    if os.path.exists(flag) and float(stack.max()) > limit:
        raise KeyboardInterrupt
    return stack.max(axis=0, keepdims=True)


@mt.numpy
def np_project(stack: np.ndarray) -> np.ndarray:
    return stack.max(axis=0, keepdims=True)


@mt.numpy
def np_stats_named_like_a_field(stack: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    return stack, {"well": "ch2", "mean": float(stack.mean())}


# -- sys.exit and other BaseExceptions in a step: that group fails, the others go on -----
@pytest.mark.parametrize("executor", ["inline", "threads"])
@pytest.mark.parametrize("func", [np_exit_if_bright, np_base_exception_if_bright])
@pytest.mark.requires("tifffile")
def test_sys_exit_in_a_step_fails_only_its_group(plate_dir: Path, tmp_path: Path,
                                                 split: tuple[str, str, float], executor: str,
                                                 func: Any) -> None:
    dim, bright, limit = split
    out = tmp_path / "out"
    report = Pipeline([FunctionStep(func, name="check", limit=limit)]).run(plate_dir, out,
                                                                           executor=executor,
                                                                           execution=ExecutionOptions(workers=2))
    assert [g.label for g in report.done] == [f"well={dim}"]
    [bad] = report.failed
    expected = "SystemExit: 3" if func is np_exit_if_bright else "_Stop: stopped"
    assert bad.label == f"well={bright}" and expected in (bad.error or "")
    assert "'check'" in (bad.error or "")
    assert load_field(out / "plate.zarr", dim, 1).shape == (2, 1, 64, 64)


@pytest.mark.parametrize("executor", ["inline", "threads"])
@pytest.mark.requires("tifffile")
def test_ctrl_c_in_a_step_stops_the_run_and_resume_finishes_it(
        plate_dir: Path, tmp_path: Path, split: tuple[str, str, float], executor: str) -> None:
    dim, bright, limit = split
    out = tmp_path / "out"
    flag = tmp_path / "interrupt"
    flag.touch()
    stopping = Pipeline([FunctionStep(np_interrupt_if_bright, name="p", limit=limit,
                                      flag=str(flag))])
    with pytest.raises(KeyboardInterrupt):
        stopping.run(plate_dir, out, executor=executor, execution=ExecutionOptions(workers=2))
    assert not (out / ".memtype" / "done" / f"{bright}.json").exists()
    assert not (out / ".memtype" / "spill").exists() or not os.listdir(out / ".memtype" / "spill")
    flag.unlink()
    again = stopping.run(plate_dir, out, write=WriteOptions(resume=True))
    assert again.ok and f"well={bright}" in [g.label for g in again.done]
    assert len(again.done) + len(again.skipped) == 2
    for well in (dim, bright):
        np.testing.assert_array_equal(load_field(out / "plate.zarr", well, 1)[0, 0],
                                      stacks(SMALL)[(well, 1, 1)].max(axis=0))


@pytest.mark.requires("tifffile")
def test_inline_ctrl_c_keeps_the_groups_finished_before_it(plate_dir: Path, tmp_path: Path,
                                                            split: tuple[str, str, float]) -> None:
    dim, bright, limit = split
    if bright < dim:  # inline runs wells in order: the dim one must come first
        pytest.skip("the bright well comes first in this plate")
    out = tmp_path / "out"
    flag = tmp_path / "interrupt"
    flag.touch()
    stopping = Pipeline([FunctionStep(np_interrupt_if_bright, name="p", limit=limit,
                                      flag=str(flag))])
    with pytest.raises(KeyboardInterrupt):
        stopping.run(plate_dir, out)
    assert (out / ".memtype" / "done" / f"{dim}.json").is_file()
    flag.unlink()
    again = stopping.run(plate_dir, out, write=WriteOptions(resume=True))
    assert [g.label for g in again.skipped] == [f"well={dim}"]
    assert [g.label for g in again.done] == [f"well={bright}"]


# -- side outputs never overwrite the pattern's field columns -----------------------------
@pytest.mark.requires("tifffile")
def test_a_side_output_column_named_like_a_field_is_refused(plate_dir: Path,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "out"
    steps = [np_project, FunctionStep(np_stats_named_like_a_field, outputs=("stats",))]
    report = Pipeline(steps).run(plate_dir, out)
    assert len(report.failed) == 2 and not report.done
    error = report.failed[0].error or ""
    assert "SideOutputError" in error and "['well']" in error and "'stats'" in error
    assert "stats" not in report.outputs  # no table whose well column reads ch2


def test_side_output_rows_refuse_field_names_and_repeated_columns() -> None:
    fixed = (("well", "A01"), ("site", 2), ("channel", 1))
    fields = ("well", "site", "channel", "z")
    with pytest.raises(SideOutputError, match=r"\['well'\]") as info:
        side_output_rows(fixed, {"well": "ch2", "mean": 1.0}, fields, "stats")
    assert isinstance(info.value, ValueError) and "'stats'" in str(info.value)
    with pytest.raises(SideOutputError, match=r"\['z'\]"):  # a field that varies in the stack
        side_output_rows(fixed, [{"z": 3}], fields)
    with pytest.raises(SideOutputError, match="same column"):
        side_output_rows(fixed, {1: "a", "1": "b"}, fields)
    # the well column keeps the stack's value in every row of a real table
    rows = side_output_rows(fixed, {"well_label": "ch2"}, fields)
    assert rows == [{"well": "A01", "site": 2, "channel": 1, "well_label": "ch2"}]


@pytest.mark.requires("pandas")
def test_side_output_data_frames_refuse_repeated_columns() -> None:
    pd = importlib.import_module("pandas")
    fixed = (("well", "A01"), ("site", 2), ("channel", 1))
    fields = ("well", "site", "channel", "z")
    frame = pd.DataFrame([[1, 2]], columns=["n", "n"])
    with pytest.raises(SideOutputError, match="repeated columns"):
        side_output_rows(fixed, frame, fields)
    ok = pd.DataFrame({"n": [np.int64(1), np.int64(2)], "area": [0.5, 1.5]})
    assert side_output_rows(fixed, ok, fields) == [
        {"well": "A01", "site": 2, "channel": 1, "n": 1, "area": 0.5},
        {"well": "A01", "site": 2, "channel": 1, "n": 2, "area": 1.5}]
    with pytest.raises(SideOutputError, match=r"\['site'\]"):
        side_output_rows(fixed, pd.DataFrame({"site": [1]}), fields)


@pytest.mark.requires("tifffile")
def test_tables_of_a_good_run_keep_the_well_column(plate_dir: Path, tmp_path: Path) -> None:
    from tests.test_pipeline import np_sum_count

    report = Pipeline([np_project, FunctionStep(np_sum_count, outputs=("totals", "n"))]).run(
        plate_dir, tmp_path / "out")
    assert report.ok
    wells = {r["well"] for r in read_csv(report.outputs["totals"])}
    assert wells == {"A01", "A02"}


# -- the plate size given reaches every OME-Zarr output's metadata --------------------------
def _declared_grid(plate_zarr: Path) -> tuple[int, int]:
    import json

    plate = json.loads((plate_zarr / "zarr.json").read_text())["attributes"]["ome"]["plate"]
    return len(plate["rows"]), len(plate["columns"])


@pytest.mark.requires("zarr", "tifffile")
@pytest.mark.parametrize(("plate", "grid"), [(None, (8, 12)), (96, (8, 12)), (384, (16, 24))])
def test_the_plate_size_reaches_the_final_and_materialized_plates(
        plate_dir: Path, tmp_path: Path, plate: int | None, grid: tuple[int, int]) -> None:
    steps = [FunctionStep(np_project, name="first", materialize=True),
             FunctionStep(np_project, name="second")]
    report = Pipeline(steps).run(plate_dir, tmp_path / "out", write=WriteOptions(plate=plate))
    assert report.ok
    assert _declared_grid(tmp_path / "out" / "plate.zarr") == grid
    assert _declared_grid(tmp_path / "out" / "first.zarr") == grid


@pytest.mark.requires("zarr", "tifffile")
@pytest.mark.parametrize("plate", [48, 96])
def test_a_plate_size_without_the_wells_is_refused_before_anything_runs(
        tmp_path: Path, plate: int) -> None:
    from memtype.errors import InvalidArgumentError
    from memtype.pipeline.synthetic import SyntheticPlate

    src = write_plate(tmp_path / "in", SyntheticPlate(wells=97, sites=1, channels=1,
                                                      z_planes=1, size=32, cells=(1, 1)))
    with pytest.raises(InvalidArgumentError, match=str(plate)) as info:
        Pipeline([np_project]).run(src, tmp_path / "out", write=WriteOptions(plate=plate))
    assert isinstance(info.value, ValueError)
    if plate == 96:
        assert "A13" in str(info.value)  # a 384-well layout: A13..A24 are off a 96-well plate
    assert not (tmp_path / "out").exists()
