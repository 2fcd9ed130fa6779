"""Prediction = count (issue 15 follow-ups, items 2b and 5): a float64 stack entering a
framework without float64 is predicted at the bytes the decorator converts (one rule,
memtype.dtypes.entry_dtype), and a step's result stays in the framework it was computed in
until the next step needs another (one conversion producer -> consumer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.pipeline import FunctionStep, Pipeline
from tests.pipeline_support import SMALL, load_field, stacks, write_plate

NATIVE = {"dtype_conversion": mt.DtypeConversion.NATIVE_OUTPUT}
STACK_BYTES = SMALL.z_planes * SMALL.size * SMALL.size  # per byte of itemsize
STACKS = 8  # 2 wells x 2 sites x 2 channels


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("plate"))


def _exact(report: Any) -> dict[str, tuple[int, int]]:
    """Counted (events, bytes) per phase, after checking they equal the prediction."""
    report.raise_for_failures()
    rows = report.plan_vs_actual()
    assert rows
    for name, pe, pb, ae, ab in rows:
        assert (pe, pb) == (ae, ab), name
    return {name: (ae, ab) for name, _, _, ae, ab in rows}


def _check_images(report: Any, expected: Any) -> None:
    for (well, site, channel), stack in stacks(SMALL).items():
        field = load_field(report.outputs["images"], well, site)
        np.testing.assert_array_equal(field[channel - 1], expected(stack))


# -- item 2b: the dtype on the way in --------------------------------------------------------
@mt.numpy
def widen(stack: Any) -> Any:
    return stack.astype(np.float64)


@mt.pyclesperanto
def cle_add(stack: Any) -> Any:
    import pyclesperanto as cle

    return cle.add_image_and_scalar(stack, scalar=1.0)


@mt.jax
def jax_add(stack: Any) -> Any:
    return stack + 1.0


@pytest.mark.requires("torch")
def test_entry_dtype_is_the_rule_of_the_decorators() -> None:
    from memtype.dtypes import entry_dtype

    assert entry_dtype(np.dtype(np.float64), "numpy") == np.float64
    assert entry_dtype(np.dtype(np.uint16), "torch") == np.uint16


@pytest.mark.requires("pyclesperanto")
def test_float64_into_pyclesperanto_predicted_as_counted(plate_dir: Path,
                                                         tmp_path: Path) -> None:
    from memtype.dtypes import entry_dtype

    assert entry_dtype(np.dtype(np.float64), "pyclesperanto") == np.float32
    report = Pipeline([FunctionStep(widen, **NATIVE), FunctionStep(cle_add, **NATIVE)]
                      ).run(plate_dir, tmp_path / "o")
    counted = _exact(report)
    assert counted["cle_add"] == (STACKS, STACKS * STACK_BYTES * 4)  # float32, not float64
    _check_images(report, lambda s: s.astype(np.float32) + 1)


@pytest.mark.requires("jax")
def test_float64_into_jax_without_x64_predicted_as_counted(plate_dir: Path,
                                                           tmp_path: Path) -> None:
    import jax

    from memtype.dtypes import entry_dtype

    if jax.config.jax_enable_x64:
        pytest.skip("JAX runs with x64 here: float64 enters as it is")
    assert entry_dtype(np.dtype(np.float64), "jax") == np.float32
    report = Pipeline([FunctionStep(widen, **NATIVE), FunctionStep(jax_add, **NATIVE)]
                      ).run(plate_dir, tmp_path / "o")
    counted = _exact(report)
    assert counted["jax_add"] == (STACKS, STACKS * STACK_BYTES * 4)
    _check_images(report, lambda s: s.astype(np.float32) + 1)


# -- item 5: lazy conversion at a step's output ----------------------------------------------
@mt.memory_types("torch", "numpy")
def torch_to_numpy(stack: Any) -> Any:
    import torch

    return stack.to(torch.float32) * 2.0


@mt.torch
def torch_add(stack: Any) -> Any:
    return stack + 1.0


def _doubled_plus_one(stack: Any) -> Any:
    return stack.astype(np.float32) * 2 + 1


@pytest.mark.requires("torch")
@pytest.mark.requires("tifffile")
def test_a_step_declaring_numpy_hands_torch_to_a_torch_step(plate_dir: Path,
                                                            tmp_path: Path) -> None:
    pipeline = Pipeline([FunctionStep(torch_to_numpy, **NATIVE), FunctionStep(torch_add, **NATIVE)])
    plan = pipeline.plan(plate_dir)
    assert plan.phases[1].memory_type == "torch"
    report = pipeline.run(plate_dir, tmp_path / "o")
    counted = _exact(report)
    assert counted["torch_to_numpy"] == (0, 0)  # no torch -> numpy at its output
    assert counted["torch_add"] == (0, 0)  # and no numpy -> torch at the next input
    assert counted["[write]"][0] == STACKS  # the final result takes numpy once, to be written
    _check_images(report, _doubled_plus_one)


@pytest.mark.requires("torch")
@pytest.mark.requires("tifffile")
def test_a_materialized_step_keeps_its_declared_output(plate_dir: Path,
                                                       tmp_path: Path) -> None:
    pipeline = Pipeline([FunctionStep(torch_to_numpy, materialize=True, **NATIVE),
                         FunctionStep(torch_add, **NATIVE)])
    report = pipeline.run(plate_dir, tmp_path / "o")
    counted = _exact(report)
    assert counted["torch_to_numpy"][0] == STACKS  # torch -> numpy, written as declared
    assert counted["torch_add"][0] == STACKS  # numpy -> torch (zero-copy) for the next step
    _check_images(report, _doubled_plus_one)


@pytest.mark.requires("torch")
@pytest.mark.requires("tifffile")
def test_a_chain_inside_a_step_converts_once(plate_dir: Path, tmp_path: Path) -> None:
    pipeline = Pipeline([FunctionStep([torch_to_numpy, torch_add], name="both", **NATIVE),
                         FunctionStep(mt.numpy(lambda s: s), name="last")])
    report = pipeline.run(plate_dir, tmp_path / "o")
    counted = _exact(report)
    assert counted["both"] == (0, 0)  # torch_to_numpy's result reaches torch_add as torch
    assert counted["last"][0] == STACKS  # torch -> numpy, once, for the consumer
    _check_images(report, _doubled_plus_one)


@pytest.mark.requires("torch")
def test_the_last_step_returns_its_declared_type(tmp_path: Path) -> None:
    step = FunctionStep(torch_to_numpy, **NATIVE)
    image, _ = step.run(np.ones((1, 2, 2), np.float32), (), None)
    assert type(image) is np.ndarray
    lazy, _ = step.run(np.ones((1, 2, 2), np.float32), (), None, lazy=True)
    assert type(lazy).__module__.startswith("torch")
