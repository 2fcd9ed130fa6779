"""Whole runs that fail well: a failure every group would repeat stops the run early, a
full disk stops it at once, and a failed group never leaves a well listed in a plate."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.errors import InvalidArgumentError
from memtype.pipeline import ExecutionOptions, FunctionStep, Pipeline, WriteOptions
from memtype.pipeline.synthetic import SyntheticPlate
from tests.pipeline_support import ROOT, write_plate

SIX = SyntheticPlate(wells=6, sites=1, channels=1, z_planes=2, size=32, cells=(1, 2))
"""Six wells of one small field each (A01..A06)."""
THREE_BY_TWO = SyntheticPlate(wells=3, sites=2, channels=1, z_planes=2, size=32, cells=(1, 2))
"""Three wells of two fields each."""


@pytest.fixture(scope="module")
def six_wells(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("six"), SIX)


@pytest.fixture(scope="module")
def two_sites(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("two-sites"), THREE_BY_TWO)


# -- steps (module level: threads and dask workers import them) -------------------------
@mt.numpy
def np_project(stack: np.ndarray) -> np.ndarray:
    return stack.max(axis=0, keepdims=True)


@mt.numpy
def np_wrong_shape(stack: np.ndarray) -> np.ndarray:
    return stack[0]  # 2D: every group fails alike


@mt.numpy
def np_fail_naming_the_data(stack: np.ndarray) -> np.ndarray:
    raise ValueError(f"no good: {int(stack.sum())}")  # a different message in every group


@mt.numpy
def np_fail_but_the_first(stack: np.ndarray, first_sum: int = -1) -> np.ndarray:
    if int(stack.sum()) != first_sum:
        raise ValueError("no good")
    return stack.max(axis=0, keepdims=True)


def _plate_wells(plate_zarr: Path) -> list[str]:
    """The wells an OME-Zarr plate's metadata lists."""
    doc = json.loads((plate_zarr / "zarr.json").read_text())
    return [w["path"] for w in doc["attributes"]["ome"]["plate"].get("wells", [])]


def _well_images(plate_zarr: Path, well: str) -> list[str]:
    """The fields a well's metadata lists ([] when the well group is gone)."""
    path = plate_zarr / well / "zarr.json"
    if not path.exists():
        return []
    return [i["path"] for i in json.loads(path.read_text())["attributes"]["ome"]["well"]["images"]]


# -- a failure at the start that every group repeats stops the run ----------------------
@pytest.mark.parametrize("executor", ["inline", "threads"])
@pytest.mark.requires("tifffile")
def test_the_first_groups_failing_alike_stop_the_run(six_wells: Path, tmp_path: Path,
                                                     executor: str) -> None:
    report = Pipeline([FunctionStep(np_wrong_shape, name="flat")]).run(six_wells, tmp_path / "out",
                                                                       executor=executor,
                                                                       execution=ExecutionOptions(workers=2))
    assert len(report.failed) == 3 and not report.done
    assert len(report.failed) + len(report.not_run) == 6
    assert report.stopped is not None and not report.ok
    assert "the first 3 groups failed with the same error" in report.stopped
    assert "ContractError" in report.stopped and "--resume" in report.stopped
    summary = report.summary()
    assert summary.count("STOPPED") == 1 and summary.count("ContractError") == 2  # stop + one
    [line] = [x for x in summary.splitlines() if x.startswith("FAILED")]
    assert line.startswith("FAILED 3 groups failed (well=A0") and "'flat'" in line
    assert ", 3 not run;" in summary or ", 2 not run;" in summary or executor == "inline"


@pytest.mark.requires("tifffile")
def test_inline_stop_leaves_the_other_groups_not_run(six_wells: Path, tmp_path: Path) -> None:
    report = Pipeline([FunctionStep(np_wrong_shape, name="flat")]).run(six_wells,
                                                                       tmp_path / "out")
    assert [g.label for g in report.failed] == ["well=A01", "well=A02", "well=A03"]
    assert [g.label for g in report.not_run] == ["well=A04", "well=A05", "well=A06"]
    assert "6 groups: 0 done, 0 skipped, 3 failed, 3 not run;" in report.summary()


@pytest.mark.parametrize(("max_failures", "failed"), [(1, 1), (2, 2), (5, 5), (0, 6)])
@pytest.mark.requires("tifffile")
def test_max_failures_sets_how_many(six_wells: Path, tmp_path: Path, max_failures: int,
                                    failed: int) -> None:
    report = Pipeline([np_wrong_shape]).run(six_wells, tmp_path / "out",
                                            execution=ExecutionOptions(max_failures=max_failures))
    assert len(report.failed) == failed and len(report.not_run) == 6 - failed
    assert (report.stopped is None) == (max_failures == 0)
    assert report.summary().count("FAILED") == 1  # one distinct error, printed once


@pytest.mark.requires("tifffile")
def test_different_errors_do_not_stop_the_run(six_wells: Path, tmp_path: Path) -> None:
    report = Pipeline([np_fail_naming_the_data]).run(six_wells, tmp_path / "out")
    assert len(report.failed) == 6 and report.stopped is None
    assert report.summary().count("FAILED 1 group failed") == 6


@pytest.mark.requires("tifffile")
def test_a_success_first_means_the_failures_are_not_systematic(six_wells: Path,
                                                               tmp_path: Path) -> None:
    first = int(SIX.stack(0, 1, 1).sum())
    step = FunctionStep(np_fail_but_the_first, first_sum=first)
    report = Pipeline([step]).run(six_wells, tmp_path / "out")
    assert [g.label for g in report.done] == ["well=A01"] and len(report.failed) == 5
    assert report.stopped is None and not report.not_run
    [line] = [x for x in report.summary().splitlines() if x.startswith("FAILED")]
    assert line.startswith("FAILED 5 groups failed (well=A02, well=A03, well=A04, well=A05, "
                           "well=A06): step 1 'np_fail_but_the_first'")


@pytest.mark.requires("tifffile")
def test_a_stopped_run_resumes_with_the_fixed_pipeline(six_wells: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    stopped = Pipeline([FunctionStep(np_wrong_shape, name="p")]).run(six_wells, out)
    assert stopped.stopped is not None
    again = Pipeline([FunctionStep(np_project, name="p")]).run(six_wells, out,
                                                               write=WriteOptions(resume=True))
    assert again.ok and len(again.done) == 6
    assert sorted(_plate_wells(out / "plate.zarr")) == [f"A/{c}" for c in range(1, 7)]


@pytest.mark.parametrize("value", [-1, True, 1.5, "3", None])
@pytest.mark.requires("tifffile")
def test_max_failures_must_be_a_count(six_wells: Path, tmp_path: Path, value: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="max_failures must be an int >= 0") as info:
        Pipeline([np_project]).run(six_wells, tmp_path / "out",
                                   execution=ExecutionOptions(max_failures=value))
    assert isinstance(info.value, ValueError) and repr(value) in str(info.value)
    assert not (tmp_path / "out").exists()


# -- a full disk stops the run at once; no half-written well stays listed -----------------
@pytest.fixture
def full_disk_at(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``full_disk_at(n)``: the n-th OME-Zarr image write (counting from 1) and every later
    one raise ``OSError(ENOSPC)`` from the file write, as a full device does (``error=``
    another exception to raise instead)."""
    from memtype.omezarr import write as _ome

    real = _ome.write_image
    calls: dict[str, Any] = {"n": 0, "fail_from": 0, "error": None}

    def write_image(path: str, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["fail_from"] and calls["n"] >= calls["fail_from"]:
            raise calls["error"] or OSError(errno.ENOSPC, "No space left on device",
                                            f"{path}/0/c/0/0/0")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(_ome, "write_image", write_image)

    def arm(n: int, error: BaseException | None = None) -> None:
        calls["fail_from"], calls["error"] = n, error

    return arm


@pytest.mark.parametrize(("fail_from", "done"), [(1, []), (2, []), (3, ["A/1"]), (4, ["A/1"])],
                         ids=["first field", "second field of the first well",
                              "first field of the second well", "second field of the second well"])
@pytest.mark.requires("tifffile")
def test_a_full_disk_stops_the_run_and_lists_no_half_written_well(
        two_sites: Path, tmp_path: Path, full_disk_at: Any, fail_from: int,
        done: list[str]) -> None:
    from memtype.errors import StoreFullError

    out = tmp_path / "out"
    full_disk_at(fail_from)
    report = Pipeline([np_project]).run(  # stops all the same
        two_sites, out, execution=ExecutionOptions(max_failures=0))
    assert len(report.failed) == 1 and len(report.done) == len(done)
    assert len(report.not_run) == 3 - 1 - len(done)
    assert report.stopped is not None and "the disk is full" in report.stopped
    assert "ENOSPC" in report.stopped and report.failed[0].disk_full
    assert StoreFullError.__name__ in (report.failed[0].error or "")
    plate = out / "plate.zarr"
    assert _plate_wells(plate) == done  # the failed well is not listed, nor any field of it
    failed_well = "A/" + report.failed[0].label[-1]
    assert _well_images(plate, failed_well) == []
    full_disk_at(0)  # space again: resume does the rest
    again = Pipeline([np_project]).run(two_sites, out, write=WriteOptions(resume=True))
    assert again.ok and len(again.done) + len(again.skipped) == 3
    assert sorted(_plate_wells(plate)) == ["A/1", "A/2", "A/3"]
    assert all(_well_images(plate, w) == ["1", "2"] for w in _plate_wells(plate))


@pytest.mark.parametrize("failure", ["error", "ctrl-c while writing"])
@pytest.mark.requires("tifffile")
def test_a_group_failing_after_a_materialized_step_unlists_its_wells(
        two_sites: Path, tmp_path: Path, full_disk_at: Any, failure: str) -> None:
    out = tmp_path / "out"
    last = np_wrong_shape if failure == "error" else np_project
    pipeline = Pipeline([FunctionStep(np_project, name="first", materialize=True),
                         FunctionStep(last, name="second")])
    if failure == "error":
        report = pipeline.run(two_sites, out, execution=ExecutionOptions(max_failures=0))
        assert len(report.failed) == 3
    else:  # the 3rd write is the final plate's first field of A01, after first.zarr's two
        full_disk_at(3, KeyboardInterrupt())
        with pytest.raises(KeyboardInterrupt):
            pipeline.run(two_sites, out)
        assert _plate_wells(out / "plate.zarr") == []
    assert _plate_wells(out / "first.zarr") == []
    assert _well_images(out / "first.zarr", "A/1") == []


# -- the command line -----------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "memtype", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300)


FLAT_PIPELINE = """\
import memtype as mt
from memtype.pipeline import FunctionStep, Pipeline

@mt.numpy
def flatten(stack):
    return stack[0]

pipeline = Pipeline([FunctionStep(flatten, name="flat")])
"""


@pytest.mark.parametrize(("option", "failed"), [((), 3), (("--max-failures", "2"), 2),
                                                (("--max-failures", "0"), 6)])
@pytest.mark.requires("tifffile")
def test_memtype_run_stops_and_prints_each_error_once(six_wells: Path, tmp_path: Path,
                                                      option: tuple[str, ...],
                                                      failed: int) -> None:
    pipeline = tmp_path / "flat_pipeline.py"
    pipeline.write_text(FLAT_PIPELINE)
    result = _cli("run", str(pipeline), "--input", str(six_wells), "--output",
                  str(tmp_path / "out"), *option)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = [x for x in result.stderr.splitlines() if "failed (" in x or "stopped:" in x]
    assert lines[0].startswith(f"memtype: {failed} groups failed (well=A01")
    assert "'flat' (function flatten)" in lines[0] and "ContractError" in lines[0]
    if failed == 6:
        assert len(lines) == 1
    else:
        assert len(lines) == 2 and lines[1].startswith("memtype: stopped: the first "
                                                       f"{failed} groups failed")
        assert f"{6 - failed} not run" in result.stdout


@pytest.mark.requires("tifffile")
def test_memtype_run_refuses_a_negative_max_failures(six_wells: Path, tmp_path: Path) -> None:
    pipeline = tmp_path / "flat_pipeline.py"
    pipeline.write_text(FLAT_PIPELINE)
    result = _cli("run", str(pipeline), "--input", str(six_wells), "--output",
                  str(tmp_path / "out"), "--max-failures", "-1")
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "--max-failures must be 0" in line and "-1" in line
