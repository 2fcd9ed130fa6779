"""mt.chain (issue 15, item 3): intermediate results stay where they were computed; one
conversion from producer to consumer; only the chain's result takes the declared output type."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.pipeline import FunctionStep, Pipeline
from tests.pipeline_support import SMALL, load_field, stacks, write_plate


@mt.torch(output_type="numpy")
def t_double(x: Any) -> Any:
    return x * 2


@mt.torch
def t_inc(x: Any, step: float = 1.0) -> Any:
    return x + step


@mt.numpy
def n_neg(x: Any) -> Any:
    return -x


@mt.numpy(output_type="torch")
def n_sum_side(x: Any) -> Any:
    return x, float(x.sum())


@mt.torch(output_type="numpy")
def t_to_float(x: Any) -> Any:
    import torch

    return x.to(torch.float32) / 3  # PRESERVE_INPUT brings it back to the input dtype


def _pairs(events: Any) -> list[tuple[str, str]]:
    return [(e.source_type, e.target_type) for e in events]


@pytest.mark.requires("torch")
def test_intermediates_stay_in_the_computing_framework() -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    with mt.capture_conversions() as apart:
        expected = n_neg(t_inc(t_double(x)))
    with mt.capture_conversions() as chained:
        got = mt.chain(t_double, t_inc, n_neg)(x)
    # one by one: numpy->torch, torch->numpy (declared), numpy->torch, torch->numpy
    assert _pairs(apart) == [("numpy", "torch"), ("torch", "numpy"), ("numpy", "torch"),
                             ("torch", "numpy")]
    assert _pairs(chained) == [("numpy", "torch"), ("torch", "numpy")]
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, expected)


@pytest.mark.requires("torch")
def test_only_the_final_result_takes_its_declared_type() -> None:
    x = np.ones((1, 2, 2), np.float32)
    out = mt.chain(t_inc, t_double)(x)  # t_double declares numpy output
    assert type(out) is np.ndarray and float(out.sum()) == 16.0
    single = mt.chain(t_double)
    assert type(single(x)) is np.ndarray


def test_chain_declares_the_first_input_and_the_last_output() -> None:
    c = mt.chain(n_neg, t_double)
    assert c.input_memory_type is mt.MemoryType.NUMPY
    assert c.output_memory_type is mt.MemoryType.NUMPY
    assert "chain(n_neg, t_double)" in repr(c)


@pytest.mark.requires("torch")
def test_dtype_policy_of_an_intermediate_applies_where_it_is_kept() -> None:
    x = np.full((1, 2, 2), 7, np.int32)
    expected = t_inc(t_to_float(x))  # 7 / 3 -> 2 (int32, PRESERVE_INPUT), + 1
    with mt.capture_conversions() as events:
        kept = mt.chain(t_to_float, t_inc)(x)
    assert _pairs(events) == [("numpy", "torch")]
    assert str(kept.dtype) == "torch.int32" and int(kept[0, 0, 0]) == 3
    np.testing.assert_array_equal(kept.numpy(), expected.numpy())


@pytest.mark.requires("torch")
def test_keyword_arguments_reach_every_function_and_pairs_take_precedence() -> None:
    x = np.zeros((1, 1, 1), np.float32)
    out = mt.chain(t_inc, (t_inc, {"step": 10.0}))(x, step=2.0)
    assert float(out[0, 0, 0]) == 12.0


def test_side_outputs_of_intermediates_are_returned_after_the_image() -> None:
    x = np.ones((1, 2, 2), np.float32)
    image, total = mt.chain(n_sum_side, n_neg)(x)
    assert total == 4.0 and type(image) is np.ndarray and float(image.sum()) == -4.0


@pytest.mark.requires("torch")
def test_nested_chains_flatten_and_variants_run_their_first() -> None:
    inner = mt.chain(t_double, t_inc)
    outer = mt.chain(inner, mt.variants(numpy=n_neg, torch=t_inc))
    assert len(outer.links) == 3
    with mt.capture_conversions() as events:
        out = outer(np.ones((1, 1, 1), np.float32))
    assert float(out[0, 0, 0]) == -3.0 and len(events) == 2


def test_undecorated_function_is_refused() -> None:
    with pytest.raises(mt.errors.ArgumentTypeError, match="no memory type"):
        mt.chain(t_inc, lambda x: x)
    with pytest.raises(TypeError):
        mt.chain(np.sum)


def test_empty_chain_is_refused() -> None:
    with pytest.raises(mt.errors.InvalidArgumentError, match="at least one"):
        mt.chain()


@pytest.mark.requires("torch")
def test_chain_pickles_by_its_functions() -> None:
    c = pickle.loads(pickle.dumps(mt.chain(t_double, (t_inc, {"step": 3.0}))))
    assert float(c(np.ones((1, 1, 1), np.float32))[0, 0, 0]) == 5.0


class Scaler:
    def __init__(self, factor: float) -> None:
        self.factor = factor

    @mt.torch(output_type="numpy")
    def scale(self, x: Any) -> Any:
        return x * self.factor


@pytest.mark.requires("torch")
def test_bound_methods_keep_their_instance() -> None:
    with mt.capture_conversions() as events:
        out = mt.chain(Scaler(3.0).scale, t_inc)(np.ones((1, 1, 1), np.float32))
    assert float(out[0, 0, 0]) == 4.0 and _pairs(events) == [("numpy", "torch")]


@pytest.mark.requires("pyclesperanto")
def test_device_intermediates_are_not_pulled_to_the_host() -> None:
    @mt.pyclesperanto(output_type="numpy")
    def blur(x: Any) -> Any:
        import pyclesperanto as cle

        return cle.gaussian_blur(x, sigma_x=1.0, sigma_y=1.0, sigma_z=0.0)

    @mt.pyclesperanto(output_type="numpy")
    def add_one(x: Any) -> Any:
        import pyclesperanto as cle

        return cle.add_image_and_scalar(x, scalar=1.0)

    x = np.random.default_rng(0).random((2, 16, 16), dtype=np.float32)
    with mt.capture_conversions() as apart:
        expected = add_one(blur(x))
    with mt.capture_conversions() as chained:
        got = mt.chain(blur, add_one)(x)
    assert len(apart) == 4 and sum(not e.zero_copy for e in apart) == 4  # push, pull x2
    assert _pairs(chained) == [("numpy", "pyclesperanto"), ("pyclesperanto", "numpy")]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.requires("tifffile")
def test_chain_as_a_pipeline_step(tmp_path: Path) -> None:
    plate = write_plate(tmp_path / "plate")
    step = FunctionStep(mt.chain(t_double, t_inc), name="double_inc",
                        dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)
    report = Pipeline([step]).run(plate, tmp_path / "out")
    report.raise_for_failures()
    conv = {s.name: (s.conversions, s.stacks) for s in report.steps}
    # t_double's declared numpy output never happens: torch from the load to the write
    assert conv["double_inc"] == (0, 8) and conv["[write]"] == (8, 8)
    assert all((pe, pb) == (ae, ab) for _, pe, pb, ae, ab in report.plan_vs_actual())
    (well, site, channel), stack = next(iter(stacks(SMALL).items()))
    field = load_field(report.outputs["images"], well, site)
    np.testing.assert_array_equal(field[channel - 1], stack.astype(np.float32) * 2 + 1)
