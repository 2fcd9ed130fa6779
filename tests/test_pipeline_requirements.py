"""A pipeline that needs a framework which is not installed fails before any group runs
(issue 15 follow-up, item 1); a step with several implementations just loses that one."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.frameworks import Framework
from memtype.pipeline import FunctionStep, Pipeline
from tests.helpers import registered
from tests.pipeline_support import ROOT, SMALL, load_field, stacks, write_plate

GHOST_MODULE = "memtype_tests_ghost_framework"  # a module that exists nowhere
GHOST = Framework(
    name="ghost", module=GHOST_MODULE, array_types=(f"{GHOST_MODULE}:Array",),
    adapter="tests.toy_adapter:ToyAdapter", device_kinds=("cpu",),
    install_hint="pip install ghost-arrays",
)


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("plate"))


@pytest.fixture
def ghost() -> Iterator[Framework]:
    with registered(GHOST) as row:
        yield row


def _double(stack: Any) -> Any:
    return stack * 2


def _check_refusal(exc: pytest.ExceptionInfo[mt.errors.FrameworkNotInstalledError],
                   step: str) -> None:
    message = str(exc.value)
    assert isinstance(exc.value, ImportError)
    assert f"step {step!r}" in message and "ghost" in message
    assert "pip install ghost-arrays" in message
    assert isinstance(exc.value.__cause__, ModuleNotFoundError)
    assert exc.value.__cause__.name == GHOST_MODULE


@pytest.mark.requires("tifffile")
def test_run_refuses_a_step_whose_framework_is_missing_before_any_group(
        ghost: Framework, plate_dir: Path, tmp_path: Path) -> None:
    step = FunctionStep(mt.memory_types("ghost", "ghost")(_double), name="haunt")
    pipeline = Pipeline([FunctionStep(mt.numpy(_double)), step])
    with pytest.raises(mt.errors.FrameworkNotInstalledError) as exc:
        pipeline.run(plate_dir, tmp_path / "out")
    _check_refusal(exc, "haunt")
    assert not (tmp_path / "out").exists()  # nothing ran, nothing was written


def test_plan_refuses_a_step_whose_framework_is_missing(ghost: Framework) -> None:
    pipeline = Pipeline([FunctionStep(mt.memory_types("ghost", "ghost")(_double), name="h")])
    with pytest.raises(mt.errors.FrameworkNotInstalledError) as exc:
        pipeline.plan(np.zeros((2, 8, 8), np.float32))
    _check_refusal(exc, "h")


def test_an_output_type_whose_framework_is_missing_is_refused(ghost: Framework) -> None:
    pipeline = Pipeline([FunctionStep(mt.memory_types("numpy", "ghost")(_double), name="o")])
    with pytest.raises(mt.errors.FrameworkNotInstalledError) as exc:
        pipeline.plan(np.zeros((2, 8, 8), np.float32))
    _check_refusal(exc, "o")


@pytest.mark.requires("tifffile")
def test_a_routed_step_with_a_missing_framework_is_refused(ghost: Framework,
                                                           plate_dir: Path,
                                                           tmp_path: Path) -> None:
    routes = {1: mt.numpy(_double), 2: mt.memory_types("ghost", "ghost")(_double)}
    pipeline = Pipeline([FunctionStep(routes, name="per_channel", group_by="channel")])
    with pytest.raises(mt.errors.FrameworkNotInstalledError) as exc:
        pipeline.run(plate_dir, tmp_path / "out")
    _check_refusal(exc, "per_channel")


@pytest.mark.requires("tifffile")
def test_a_variants_step_loses_the_missing_implementation(ghost: Framework, plate_dir: Path,
                                                          tmp_path: Path) -> None:
    step = FunctionStep(mt.variants(ghost=_double, numpy=_double), name="scale")
    pipeline = Pipeline([step])
    plan = pipeline.plan(plate_dir)
    assert plan.choices == {"scale": "numpy"}
    assert "ghost unavailable (FrameworkNotInstalledError: " in plan.table()
    assert not any("not tried on a sample" in n for n in plan.notes)  # tried in numpy
    report = pipeline.run(plate_dir, tmp_path / "out")
    report.raise_for_failures()
    for (well, site, channel), stack in stacks(SMALL).items():
        field = load_field(report.outputs["images"], well, site)
        np.testing.assert_array_equal(field[channel - 1], stack * 2)


def test_a_variants_step_with_every_implementation_missing_is_refused(ghost: Framework) -> None:
    pipeline = Pipeline([FunctionStep(mt.variants(ghost=_double), name="v")])
    with pytest.raises(mt.errors.FrameworkNotInstalledError, match="no implementation it can run") \
            as exc:
        pipeline.plan(np.zeros((2, 8, 8), np.float32))
    _check_refusal(exc, "v")


_BLOCKED_TORCH = """
import sys
sys.modules["torch"] = None  # `import torch` raises ModuleNotFoundError from here on
import numpy as np
import memtype as mt
from memtype.pipeline import FunctionStep, Pipeline

@mt.torch
def scale(stack):
    return stack * 2

pipeline = Pipeline([FunctionStep(scale)])
for attempt in (lambda: pipeline.plan(np.zeros((2, 8, 8), np.float32)),
                lambda: pipeline.run(sys.argv[1], sys.argv[2])):
    try:
        attempt()
    except mt.errors.FrameworkNotInstalledError as exc:
        print(type(exc.__cause__).__name__, exc.__cause__.name, "|", exc)
# a blocked module is not a loaded framework (detection and cleanup skip it)
from memtype.frameworks import loaded_frameworks
assert "torch" not in [f.name for f in loaded_frameworks()]
assert mt.detect_memory_type(np.zeros(2)) is mt.MemoryType.NUMPY
"""


@pytest.mark.requires("tifffile")
def test_a_blocked_torch_import_fails_fast_in_a_subprocess(plate_dir: Path,
                                                           tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", _BLOCKED_TORCH, str(plate_dir),
                          str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out.stdout
    for line in lines:
        assert line.startswith("ModuleNotFoundError torch | Pipeline step 'scale' needs torch")
        assert "pip install" in line
    assert not (tmp_path / "out").exists()
