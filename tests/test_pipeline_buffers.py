"""Buffer reuse across groups (issue 15, item 4): the stacks the pipeline allocates when it
loads a group are reused by the next group, never while a result still refers to them."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.pipeline import ExecutionOptions, FunctionStep, Pipeline
from memtype.pipeline.execution.buffers import BufferPool
from tests.pipeline_support import SMALL, load_field, stacks, write_plate

KEPT: list[Any] = []


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("plate"))


@pytest.fixture
def kept() -> Any:
    KEPT.clear()
    yield KEPT
    KEPT.clear()


@mt.numpy
def double(stack: Any) -> Any:
    return stack * 2


def _a_loaded_stack(stack: Any) -> bool:
    """Whether ``stack`` holds one of the plate's own stacks (a loaded buffer), not the
    sample the plan tries the step on (of the real shape since the plan runs a step once,
    on a group's shape)."""
    values = np.asarray(stack)
    return any(values.shape == s.shape and np.array_equal(values, s)
               for s in stacks(SMALL).values())


@mt.numpy
def keep_first_well(stack: Any) -> Any:
    # the first group's 4 stacks (inline: well A01 runs first), not the plan's sample
    if len(KEPT) < 4 and _a_loaded_stack(stack):
        KEPT.append(stack)  # the loaded stack itself, still referred to after its group
    return stack * 2


@mt.torch
def keep_torch_view(stack: Any) -> Any:
    if len(KEPT) < 4 and _a_loaded_stack(stack.numpy()):
        KEPT.append(stack[1:])  # a torch view sharing the loaded buffer
    return stack * 2


def _check(report: Any) -> None:
    report.raise_for_failures()
    for (well, site, channel), stack in stacks(SMALL).items():
        field = load_field(report.outputs["images"], well, site)
        np.testing.assert_array_equal(field[channel - 1], stack * 2)


def _load(report: Any) -> tuple[int, int]:
    load = next(s for s in report.steps if s.name == "[load]")
    return load.buffers_new, load.buffers_reused


@pytest.mark.requires("tifffile")
def test_second_group_reuses_the_first_groups_buffers(plate_dir: Path, tmp_path: Path) -> None:
    report = Pipeline([FunctionStep(double)]).run(plate_dir, tmp_path / "o")
    _check(report)
    assert _load(report) == (4, 4)  # 2 wells x 4 stacks of 3 x 64 x 64
    assert "buffers allocated by the pipeline: [load] 4 new, 4 reused" in report.summary()


@pytest.mark.requires("tifffile")
def test_restacked_stacks_reuse_buffers_too(plate_dir: Path, tmp_path: Path) -> None:
    # the second step stacks all channels of a site: the group's 4 z-stacks are restacked
    # into 2 stacks of 6 planes, into the pool's buffers (new in A01, reused in A02)
    per_site = FunctionStep(double, name="per_site", variable_components=("channel", "z"))
    report = Pipeline([FunctionStep(double), per_site]).run(plate_dir, tmp_path / "o")
    report.raise_for_failures()
    by_name = {s.name: s for s in report.steps}
    assert (by_name["per_site"].buffers_new, by_name["per_site"].buffers_reused) == (2, 2)
    assert _load(report) == (4, 4)
    assert "per_site 2 new, 2 reused" in report.summary()
    for (well, site, channel), stack in stacks(SMALL).items():
        field = load_field(report.outputs["images"], well, site)
        np.testing.assert_array_equal(field[channel - 1], stack * 4)


@pytest.mark.requires("tifffile")
def test_threads_share_the_pool(plate_dir: Path, tmp_path: Path) -> None:
    report = Pipeline([FunctionStep(double)]).run(plate_dir, tmp_path / "o", executor="threads",
                                                  execution=ExecutionOptions(workers=2))
    _check(report)
    assert sum(_load(report)) == 8 and _load(report)[0] >= 4


@pytest.mark.requires("tifffile")
def test_a_buffer_a_result_still_refers_to_is_not_reused(plate_dir: Path, tmp_path: Path,
                                                         kept: list[Any]) -> None:
    report = Pipeline([FunctionStep(keep_first_well)]).run(plate_dir, tmp_path / "o")
    _check(report)
    assert _load(report) == (8, 0)  # A01's 4 buffers are still held: A02 gets new ones
    first = [s for (w, _, _), s in stacks(SMALL).items() if w == "A01"]
    assert len(kept) == 4
    for held in kept:  # the held stacks still hold A01's images, not A02's
        assert any(np.array_equal(held, s) for s in first)


@pytest.mark.requires("tifffile")
def test_a_zero_copy_view_in_another_framework_also_holds_it(plate_dir: Path, tmp_path: Path,
                                                             kept: list[Any]) -> None:
    report = Pipeline([FunctionStep(keep_torch_view)]).run(plate_dir, tmp_path / "o")
    _check(report)
    assert _load(report) == (8, 0)
    first = [s[1:] for (w, _, _), s in stacks(SMALL).items() if w == "A01"]
    for held in kept:
        assert any(np.array_equal(held.numpy(), s) for s in first)


def test_pool_stacks_only_numpy_planes_of_one_shape_and_dtype() -> None:
    pool = BufferPool()
    planes = [np.full((2, 3), i, np.uint16) for i in range(3)]
    out = pool.stack(planes)
    assert out is not None and out[1] is False and out[0].shape == (3, 2, 3)
    np.testing.assert_array_equal(out[0][2], planes[2])
    assert pool.stack([planes[0], planes[1].astype(np.float32)]) is None
    assert pool.stack([np.zeros((2, 2)), np.zeros((2, 3))]) is None
    assert pool.stack([np.ma.zeros((2, 2))]) is None
    assert pool.stack([]) is None


def test_pool_reuses_only_an_unreferenced_buffer() -> None:
    pool = BufferPool()
    planes = [np.ones((4, 4), np.float32)] * 2
    buf, _ = pool.stack(planes) or (None, None)
    assert buf is not None
    pool.give_back([buf])
    again = pool.stack(planes)
    assert again is not None and again[1] is False  # `buf` still names it here
    pool.give_back([again[0]])
    del buf, again
    third = pool.stack(planes)
    assert third is not None and third[1] is True


def test_pool_does_not_travel_with_its_buffers() -> None:
    pool = BufferPool()
    out = pool.stack([np.ones((2, 2))])
    assert out is not None
    pool.give_back([out[0]])
    copy = pickle.loads(pickle.dumps(pool))
    fresh = copy.stack([np.ones((2, 2))])
    assert fresh is not None and fresh[1] is False
