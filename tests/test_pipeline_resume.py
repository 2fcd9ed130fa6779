"""``resume`` never mixes two pipelines' results: the output records what produced its
finished groups, and a different pipeline is refused, naming what changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.errors import StoreExistsError
from memtype.pipeline import FunctionStep, Pipeline, ReadOptions, WriteOptions
from memtype.pipeline.synthetic import SyntheticPlate
from tests.pipeline_support import ROOT, write_plate

PLATE = SyntheticPlate(wells=2, sites=1, channels=1, z_planes=2, size=32, cells=(1, 2))


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("plate"), PLATE)


@mt.numpy
def np_project(stack: np.ndarray) -> np.ndarray:
    return stack.max(axis=0, keepdims=True)


@mt.numpy
def np_scale(stack: np.ndarray, factor: float = 1.0) -> np.ndarray:
    return (stack * factor).astype(np.float32)


@mt.numpy
def np_mean(stack: np.ndarray) -> np.ndarray:
    return stack.mean(axis=0, keepdims=True).astype(np.float32)


def _base() -> list[FunctionStep]:
    return [FunctionStep(np_scale, factor=2.0), FunctionStep(np_project, name="project")]


@pytest.fixture
def done_output(plate_dir: Path, tmp_path: Path) -> Path:
    """An output whose two groups the base pipeline finished."""
    out = tmp_path / "out"
    assert Pipeline(_base()).run(plate_dir, out).ok
    return out


@pytest.mark.requires("tifffile")
def test_the_same_pipeline_resumes(plate_dir: Path, done_output: Path) -> None:
    again = Pipeline(_base()).run(plate_dir, done_output, write=WriteOptions(resume=True))
    assert again.ok and len(again.skipped) == 2 and not again.done


@pytest.mark.parametrize(("change", "needles"), [
    ("an option", ("steps > 1 'np_scale' > options > factor: 2.0 -> 3.0",)),
    ("a function", ("tests.test_pipeline_resume:np_project", "tests.test_pipeline_resume:np_mean")),
    ("a step more", ("steps > 3 'np_project': added",)),
    ("a step less", ("steps > 2 'project': removed",)),
    ("the pattern", ("settings > pattern:",)),
    ("the pyramid", ("settings > pyramid levels: 1 -> 2",)),
    ("the plate", ("settings > plate rows:",)),
    ("the pixel size", ("settings > pixel size: null -> [2.0, 0.5, 0.5]",)),
])
@pytest.mark.requires("tifffile")
def test_a_changed_pipeline_is_refused_naming_what_changed(
        plate_dir: Path, done_output: Path, change: str, needles: tuple[str, ...]) -> None:
    steps: list[Any] = _base()
    pattern: str | None = None
    plate: int | None = None
    settings: dict[str, Any] = {}
    if change == "an option":
        steps[0] = FunctionStep(np_scale, factor=3.0)
    elif change == "a function":
        steps[1] = FunctionStep(np_mean, name="project")
    elif change == "a step more":
        steps.append(FunctionStep(np_project))
    elif change == "a step less":
        steps = steps[:1]
    elif change == "the pattern":
        pattern = "{well}_s{site}_w{channel}_z{z}.tif"
    elif change == "the pyramid":
        settings["pyramid_levels"] = 2
    elif change == "the pixel size":
        settings["pixel_size"] = (2.0, 0.5, 0.5)
    else:
        plate = 384
    before = sorted(os.listdir(done_output / ".memtype" / "done"))
    with pytest.raises(StoreExistsError, match="produced by a different pipeline") as info:
        Pipeline(steps, **settings).run(plate_dir, done_output,
                                        read=ReadOptions(pattern=pattern),
                                        write=WriteOptions(resume=True, plate=plate))
    message = str(info.value)
    assert isinstance(info.value, FileExistsError)
    assert "WriteOptions(overwrite=True) (--overwrite)" in message and "new output" in message
    for needle in needles:
        assert needle in message, message
    assert sorted(os.listdir(done_output / ".memtype" / "done")) == before  # untouched
    replaced = Pipeline(steps, **settings).run(plate_dir, done_output,
                                               read=ReadOptions(pattern=pattern),
                                               write=WriteOptions(overwrite=True, plate=plate))
    assert replaced.ok and len(replaced.done) == 2  # starting over works


@pytest.mark.requires("tifffile")
def test_another_memtype_version_is_refused(plate_dir: Path, done_output: Path) -> None:
    record_path = done_output / ".memtype" / "run.json"
    record = json.loads(record_path.read_text())
    record["memtype"] = "0.0.1"  # what an output of an earlier release holds
    record_path.write_text(json.dumps(record))
    with pytest.raises(StoreExistsError, match=f'memtype: "0.0.1" -> "{mt.__version__}"'):
        Pipeline(_base()).run(plate_dir, done_output, write=WriteOptions(resume=True))


@pytest.mark.requires("tifffile")
def test_an_output_without_a_record_is_refused(plate_dir: Path, done_output: Path) -> None:
    (done_output / ".memtype" / "run.json").unlink()
    with pytest.raises(StoreExistsError, match="no record of the pipeline that wrote them"):
        Pipeline(_base()).run(plate_dir, done_output, write=WriteOptions(resume=True))


@pytest.mark.requires("tifffile")
def test_without_finished_groups_a_changed_pipeline_resumes(plate_dir: Path,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / ".memtype" / "done").mkdir(parents=True)  # an earlier run that finished nothing
    first = Pipeline([FunctionStep(np_scale, factor=5.0)]).run(plate_dir, out,
                                                               write=WriteOptions(resume=True))
    assert first.ok
    for name in os.listdir(out / ".memtype" / "done"):
        (out / ".memtype" / "done" / name).unlink()
    again = Pipeline(_base()).run(plate_dir, out, write=WriteOptions(resume=True))
    assert again.ok and len(again.done) == 2
    record = json.loads((out / ".memtype" / "run.json").read_text())
    assert list(record["steps"]) == ["1 'np_scale'", "2 'project'"]  # the new pipeline's


# -- the command line: the pipeline file's content ------------------------------------------
PIPELINE_FILE = """\
import memtype as mt
from memtype.pipeline import FunctionStep, Pipeline

@mt.numpy
def project(stack):
    return stack.max(axis=0, keepdims=True){tail}

pipeline = Pipeline([FunctionStep(project)])
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "memtype", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300)


@pytest.mark.requires("tifffile")
def test_memtype_run_refuses_to_resume_after_the_pipeline_file_changed(
        plate_dir: Path, tmp_path: Path) -> None:
    pipeline = tmp_path / "my_pipeline.py"
    pipeline.write_text(PIPELINE_FILE.format(tail=""))
    args = ("run", str(pipeline), "--input", str(plate_dir), "--output", str(tmp_path / "out"))
    assert _cli(*args).returncode == 0
    same = _cli(*args, "--resume")
    assert same.returncode == 0 and "0 done, 2 skipped" in same.stdout
    pipeline.write_text(PIPELINE_FILE.format(tail=" - 1  # a fix"))
    changed = _cli(*args, "--resume")
    assert changed.returncode == 2 and "Traceback" not in changed.stderr
    [line] = [x for x in changed.stderr.splitlines() if "Cannot resume" in x]
    assert line.startswith("memtype run: error: Cannot resume")
    assert "sources (sha256) > my_pipeline.py" in line and "--overwrite" in line
    assert _cli(*args, "--overwrite").returncode == 0
