"""``gpu_id`` in ``Pipeline.plan`` and ``FunctionStep.run``: every spelling of
``memtype.gpu.GpuId`` (an index, ``"cuda:0"``, a ``Device``) is taken, and a malformed one is
refused first, with what was received (not as "No plan: ..." after the planning)."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.errors import DeviceError
from memtype.frameworks import Device
from memtype.pipeline import FunctionStep, Pipeline
from memtype.pipeline.model.steps import FunctionStep as StepClass

SPELLINGS = [pytest.param(0, id="index"), pytest.param("cuda:0", id="name"),
             pytest.param(Device("cuda", 0), id="device")]
MALFORMED = [pytest.param("bogus", id="word"), pytest.param(-1, id="negative"),
             pytest.param(True, id="bool"), pytest.param(1.5, id="float"),
             pytest.param("opencl:0", id="opencl-name"),
             pytest.param(Device("opencl", 0), id="opencl-device")]


@mt.numpy
def _add_one(image: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return image + 1


def _stack() -> np.ndarray[Any, Any]:
    return np.zeros((2, 8, 8), dtype=np.float32)


@pytest.mark.parametrize("gpu_id", SPELLINGS)
def test_plan_takes_every_gpu_id_spelling(gpu_id: Any) -> None:
    pipeline = Pipeline([FunctionStep(_add_one)])
    assert pipeline.plan(_stack(), gpu_id=gpu_id).table() == \
        pipeline.plan(_stack(), gpu_id=0).table()


@pytest.mark.parametrize("gpu_id", MALFORMED)
def test_plan_refuses_a_malformed_gpu_id_first(gpu_id: Any, tmp_path: Any) -> None:
    pipeline = Pipeline([FunctionStep(_add_one)])
    missing = tmp_path / "no-such-plate"  # refused before the input is read
    with pytest.raises(DeviceError) as caught:
        pipeline.plan(missing, gpu_id=gpu_id)
    assert isinstance(caught.value, ValueError)
    message = str(caught.value)
    assert "gpu_id must be" in message and repr(gpu_id) in message
    assert "No plan" not in message


@pytest.mark.parametrize("gpu_id", SPELLINGS)
def test_function_step_run_takes_every_gpu_id_spelling(gpu_id: Any) -> None:
    image, side = FunctionStep(_add_one).run(_stack(), (), gpu_id)
    assert side == [] and float(image.sum()) == 2 * 8 * 8


@pytest.mark.parametrize("method", [pytest.param(Pipeline.plan, id="Pipeline.plan"),
                                    pytest.param(StepClass.run, id="FunctionStep.run")])
def test_gpu_id_is_annotated_as_every_spelling(method: Any) -> None:
    assert inspect.signature(method).parameters["gpu_id"].annotation == "GpuId | None"


@pytest.mark.parametrize("gpu_id", SPELLINGS)
def test_a_decorator_s_gpu_id_default_takes_every_spelling(gpu_id: Any) -> None:
    # the sibling of Pipeline.plan's annotation: memory_types(gpu_id=) was annotated int
    add = mt.memory_types("numpy", "numpy", gpu_id=gpu_id)(lambda image: image + 1)
    assert float(add(_stack()).sum()) == 2 * 8 * 8
    annotation = inspect.signature(mt.memory_types).parameters["gpu_id"].annotation
    assert annotation == "int | str | Device | None"
