"""Planned pipelines under memory pressure (issue 15, item 1): a group that runs out of memory
re-runs with the next-best plan (the host last) and the report says so; a plan made for a
device without room picks another implementation and says why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.frameworks import Framework
from memtype.pipeline import ExecutionOptions, FunctionStep, Pipeline
from tests.pipeline_support import SMALL, load_field, stacks, write_plate

NATIVE = {"dtype_conversion": mt.DtypeConversion.NATIVE_OUTPUT}
LIMIT = {"max": float("inf")}  # stacks brighter than this run out of memory in torch/OpenCL


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("plate"))


@pytest.fixture
def limit() -> Iterator[dict[str, float]]:
    """Only the brightest stack of the plate (one of well A02's) runs out of memory."""
    maxima = {w: max(float(s.max()) for (w2, _, _), s in stacks(SMALL).items() if w2 == w)
              for w in SMALL.well_names}
    LIMIT["max"] = min(maxima.values())
    yield LIMIT
    LIMIT["max"] = float("inf")


def scale_np(stack: Any) -> Any:
    return stack.astype(np.float32) * np.float32(2.0)


def scale_torch(stack: Any) -> Any:
    import torch

    if float(stack.to(torch.float32).max()) > LIMIT["max"]:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    return stack * 2.0


def scale_cle(stack: Any) -> Any:
    import pyclesperanto as cle

    if float(cle.maximum_of_all_pixels(stack)) > LIMIT["max"]:
        raise MemoryError("std::bad_alloc")  # what pyclesperanto raises for a failed allocation
    return cle.multiply_image_and_scalar(stack, scalar=2.0)


def broken_torch(stack: Any) -> Any:
    raise ValueError("a bug, not memory")


@mt.torch
def torch_only(stack: Any) -> Any:
    return stack + 1.0


@mt.pyclesperanto
def cle_only(stack: Any) -> Any:
    import pyclesperanto as cle

    return cle.add_image_and_scalar(stack, scalar=1.0)


def _expected(stack: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return stack.astype(np.float32) * 2.0 + 1.0  # scale, then add one


def _check_outputs(report: Any) -> None:
    for (well, site, channel), stack in stacks(SMALL).items():
        field = load_field(report.outputs["images"], well, site)
        np.testing.assert_array_equal(field[channel - 1], _expected(stack))


def _check_prediction(report: Any) -> None:
    for name, pe, pb, ae, ab in report.plan_vs_actual():
        assert (pe, pb) == (ae, ab), name


# -- run-time fallback ---------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::memtype.gpu.OOMRecoveryWarning")
@pytest.mark.requires("tifffile")
def test_group_out_of_memory_in_torch_falls_back_to_numpy(plate_dir: Path, tmp_path: Path,
                                                          limit: dict[str, float]) -> None:
    scale = FunctionStep(mt.variants(torch=scale_torch, numpy=scale_np), name="scale", **NATIVE)
    report = Pipeline([scale, FunctionStep(torch_only, **NATIVE)]).run(plate_dir, tmp_path / "o")
    report.raise_for_failures()
    assert report.plan is not None and report.plan.choices == {"scale": "torch"}
    assert [(label, f.step, f.ran_in, f.choices) for label, f in report.fallbacks] == [
        ("well=A02", "scale", "torch (cpu)", {"scale": "numpy"})]
    assert report.fallbacks[0][1].error.startswith("OutOfMemoryError: CUDA out of memory")
    assert ("fallback well=A02: step 'scale' ran out of memory in torch (cpu) "
            "(OutOfMemoryError") in report.summary()
    _check_outputs(report)
    _check_prediction(report)  # A02 counted against its own plan (numpy -> torch after scale)
    by_name = {s.name: s for s in report.steps}
    assert by_name["torch_only"].conversions == 4  # A02's 4 stacks: numpy -> torch


@pytest.mark.filterwarnings("ignore::memtype.gpu.OOMRecoveryWarning")
@pytest.mark.requires("tifffile")
def test_fallback_is_deterministic(plate_dir: Path, tmp_path: Path,
                                   limit: dict[str, float]) -> None:
    scale = FunctionStep(mt.variants(torch=scale_torch, numpy=scale_np), name="scale", **NATIVE)
    pipeline = Pipeline([scale, FunctionStep(torch_only, **NATIVE)])
    runs = [pipeline.run(plate_dir, tmp_path / f"o{i}", executor=ex)
            for i, ex in enumerate(["inline", "threads"])]
    assert [[(lb, f.describe()) for lb, f in r.fallbacks] for r in runs] == \
        [[(lb, f.describe()) for lb, f in runs[0].fallbacks]] * 2


@pytest.mark.requires("tifffile")
def test_an_error_that_is_not_out_of_memory_does_not_fall_back(plate_dir: Path,
                                                               tmp_path: Path) -> None:
    scale = FunctionStep(mt.variants(torch=broken_torch, numpy=scale_np), name="scale", **NATIVE)
    report = Pipeline([scale, FunctionStep(torch_only, **NATIVE)]).run(plate_dir, tmp_path / "o")
    assert len(report.failed) == 2 and report.fallbacks == []
    assert "ValueError: a bug, not memory" in (report.failed[0].error or "")


@pytest.mark.requires("pyclesperanto")
@pytest.mark.filterwarnings("ignore::memtype.gpu.OOMRecoveryWarning")
def test_out_of_memory_on_the_opencl_device_moves_that_step_to_the_host(
        plate_dir: Path, tmp_path: Path, limit: dict[str, float]) -> None:
    scale = FunctionStep(mt.variants(pyclesperanto=scale_cle, numpy=scale_np), name="scale",
                         **NATIVE)
    report = Pipeline([scale, FunctionStep(cle_only, **NATIVE)]).run(plate_dir, tmp_path / "o")
    report.raise_for_failures()
    assert report.plan is not None and report.plan.choices == {"scale": "pyclesperanto"}
    [(label, fallback)] = report.fallbacks
    assert label == "well=A02" and fallback.ran_in.startswith("pyclesperanto (opencl:")
    assert fallback.choices == {"scale": "numpy"} and fallback.error.startswith("MemoryError")
    _check_outputs(report)
    _check_prediction(report)


@pytest.mark.requires("pyclesperanto")
@pytest.mark.filterwarnings("ignore::memtype.gpu.OOMRecoveryWarning")
def test_no_fallback_for_a_step_with_one_implementation(plate_dir: Path, tmp_path: Path,
                                                        limit: dict[str, float]) -> None:
    @mt.pyclesperanto
    def only_cle(stack: Any) -> Any:
        return scale_cle(stack)

    report = Pipeline([FunctionStep(only_cle, **NATIVE), FunctionStep(cle_only, **NATIVE)]
                      ).run(plate_dir, tmp_path / "o")
    assert [g.label for g in report.failed] == ["well=A02"]
    [(_, fallback)] = report.fallbacks
    assert "no fallback: No plan" in fallback.describe()
    assert "step 'only_cle' in pyclesperanto: ran out of memory" in fallback.reason
    assert "MemoryError: std::bad_alloc" in (report.failed[0].error or "")


# -- a real allocator running out: the toy device (the ``toydev`` fixture, conftest) -------
WORKSPACE = 200  # the toy implementation's temporary: 200 x its input, on the device


def toy_scale(stack: Any) -> Any:
    from tests.toydevice import ToyDeviceArray

    nbytes = stack.buffer().nbytes * WORKSPACE
    workspace = ToyDeviceArray(np.empty(nbytes, np.uint8), stack.device)  # the toy allocator
    del workspace
    return ToyDeviceArray(stack.buffer().astype(np.float32) * 2.0, stack.device)


def toy_add(stack: Any) -> Any:
    from tests.toydevice import ToyDeviceArray

    return ToyDeviceArray(stack.buffer().astype(np.float32) + np.float32(1.0), stack.device)


@pytest.mark.filterwarnings("ignore::memtype.gpu.OOMRecoveryWarning")
@pytest.mark.requires("tifffile")
def test_toy_device_allocator_out_of_memory_falls_back(toydev: Framework, plate_dir: Path,
                                                       tmp_path: Path) -> None:
    from tests import toydevice as tdv

    add = mt.memory_types("toydev", "toydev")(toy_add)
    scale = FunctionStep(mt.variants(toydev=toy_scale, numpy=scale_np), name="scale", **NATIVE)
    # the plan's trial runs on 3 x 32 x 32 (1.2 MB of workspace); the groups' 3 x 64 x 64
    # stacks need 4 x as much, more than the device has: ToyOutOfMemory from its allocator
    tdv.reset(capacity=3 << 20)
    report = Pipeline([FunctionStep(add, **NATIVE), scale]).run(plate_dir, tmp_path / "o")
    report.raise_for_failures()
    assert report.plan is not None and report.plan.choices == {"scale": "toydev"}
    assert [(lb, f.ran_in, f.choices) for lb, f in report.fallbacks] == [
        (w, "toydev (toyaccel:0)", {"scale": "numpy"}) for w in ("well=A01", "well=A02")]
    assert all(f.error.startswith("ToyOutOfMemory") for _, f in report.fallbacks)
    for (well, site, channel), stack in stacks(SMALL).items():
        field = load_field(report.outputs["images"], well, site)
        np.testing.assert_array_equal(field[channel - 1], (stack.astype(np.float32) + 1) * 2)
    _check_prediction(report)
    # the attempts that ran out (one per group) are reported apart from the finished ones
    retried = {s.name: s for s in report.retried}
    assert retried["[load]"].conversions == 8 and retried["[load]"].stacks == 8
    assert retried["scale"].seconds > 0 and retried["scale"].stacks == 0  # failed on stack 1
    assert [len(g.retried) > 0 for g in report.groups] == [True, True]
    summary = report.summary()
    assert "attempts that ran out of memory (not in the rows above" in summary
    assert "[load] 4 new, 12 reused" in summary  # 2 groups x 2 attempts x 4 stacks


def test_planning_hands_the_device_memory_of_its_trials_back(toydev: Framework) -> None:
    # the trial run of toy_scale frees a 1.2 MB workspace into the allocator's cache; left
    # there, the first group to fall back re-ran on a device under pressure and its tiered
    # store spilled (one reload more than predicted)
    from tests import toydevice as tdv

    scale = FunctionStep(mt.variants(toydev=toy_scale, numpy=scale_np), name="scale", **NATIVE)
    Pipeline([scale]).plan(np.zeros((3, 32, 32), np.uint16))
    assert tdv.DEVICES[0].peak >= 32 * 32 * 3 * WORKSPACE  # the trial ran on the device
    assert (tdv.DEVICES[0].held, tdv.DEVICES[0].cached) == (0, 0)


# -- planning for a device without room ----------------------------------------------------
@pytest.mark.requires("pyclesperanto")
def test_plan_with_a_budget_too_small_picks_the_host_and_says_why() -> None:
    scale = FunctionStep(mt.variants(pyclesperanto=scale_cle, numpy=scale_np), name="scale")
    pipeline = Pipeline([FunctionStep(cle_only), scale])
    images = np.zeros((4, 32, 32), np.float32)
    device = pipeline.plan(images).phases[1].device
    assert pipeline.plan(images).choices == {"scale": "pyclesperanto"}
    plan = pipeline.plan(images, budgets={device: 16 << 10})  # needs 2 x 16 KiB
    assert plan.choices == {"scale": "numpy"}
    assert (f"pyclesperanto unavailable ({device} has 0.0 MiB of room (budget); the step "
            "needs 0.0 MiB for its input and output)") in plan.table()
    assert pipeline.plan(images, budgets={device: 32 << 10}).choices == {
        "scale": "pyclesperanto"}


@pytest.mark.requires("pyclesperanto")
def test_run_with_budgets_follows_the_plan(plate_dir: Path, tmp_path: Path) -> None:
    scale = FunctionStep(mt.variants(pyclesperanto=scale_cle, numpy=scale_np), name="scale",
                         **NATIVE)
    pipeline = Pipeline([FunctionStep(cle_only, **NATIVE), scale])
    plan = pipeline.plan(plate_dir)
    assert plan.choices == {"scale": "pyclesperanto"}
    report = pipeline.run(plate_dir, tmp_path / "o",
                          execution=ExecutionOptions(budgets={plan.phases[1].device: 1}))
    report.raise_for_failures()
    assert report.plan is not None and report.plan.choices == {"scale": "numpy"}
    assert "room (budget)" in report.plan.table()
    for (well, site, channel), stack in stacks(SMALL).items():
        field = load_field(report.outputs["images"], well, site)
        np.testing.assert_array_equal(field[channel - 1], (stack.astype(np.float32) + 1) * 2)


@pytest.mark.requires("torch")
def test_a_single_implementation_step_runs_whatever_the_budget() -> None:
    plan = Pipeline([FunctionStep(torch_only)]).plan(np.zeros((2, 8, 8), np.float32),
                                                     budgets={"cpu": 1})
    assert plan.phases[1].memory_type == "torch"


# -- budgets are checked before anything runs (issue 21 item 11) ---------------------------
@mt.numpy
def add_one(stack: Any) -> Any:
    return stack + 1


BAD_BUDGETS = {
    "str-bytes": ({"opencl:0": "1GB"}, mt.errors.ArgumentTypeError, r"int number of bytes.*'1GB'"),
    "bool": ({"cpu": True}, mt.errors.ArgumentTypeError, r"int number of bytes.*True \(bool\)"),
    "float": ({"cpu": 1.5e9}, mt.errors.ArgumentTypeError, r"int number of bytes.*float"),
    "negative": ({"cpu": -5}, mt.errors.InvalidArgumentError, r"at least 0 bytes; received -5"),
    "misspelled-kind": ({"opnecl:0": 1 << 30}, mt.DeviceError, r"'opnecl:0' names no device"),
    "no-index": ({"cuda": 1 << 30}, mt.DeviceError, r"'cuda' names no device"),
    "one-device-twice": ({"cuda:0": 1, 0: 2}, mt.errors.InvalidArgumentError,
                         r"two keys name the device cuda:0"),
    "not-a-dict": ([("cpu", 1)], mt.errors.ArgumentTypeError, r"dict of device -> bytes.*list"),
}


@pytest.mark.parametrize(("budgets", "error", "message"), list(BAD_BUDGETS.values()),
                         ids=list(BAD_BUDGETS))
def test_plan_refuses_bad_budgets(budgets: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        Pipeline([add_one]).plan(np.zeros((2, 8, 8), np.float32), budgets=budgets)


@pytest.mark.parametrize(("budgets", "error", "message"), list(BAD_BUDGETS.values()),
                         ids=list(BAD_BUDGETS))
@pytest.mark.requires("tifffile")
def test_run_refuses_bad_budgets_before_anything_runs(plate_dir: Path, tmp_path: Path,
                                                     budgets: Any, error: type[Exception],
                                                     message: str) -> None:
    with pytest.raises(error, match=message):
        Pipeline([add_one]).run(plate_dir, tmp_path / "out",
                                execution=ExecutionOptions(budgets=budgets))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("budgets", [{"cpu": 1 << 30}, {0: 1 << 30}, {"opencl:1": 0},
                                     {"cpu": np.int64(1 << 30)}, {}, None],
                         ids=["name", "gpu-index", "zero", "numpy-int", "empty", "none"])
def test_plan_takes_budgets_keyed_by_any_device_spelling(budgets: Any) -> None:
    plan = Pipeline([add_one]).plan(np.zeros((2, 8, 8), np.float32), budgets=budgets)
    assert plan.cost == 0
