"""MemoryTypeFunction.computing(): the decorated function with its result left in the framework
it was computed in; everything else of the decorated call unchanged."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.decorators import MemoryTypeFunction
from tests.decorated_functions import Filters, add_one, scaled
from tests.helpers import import_if_installed

pytestmark = pytest.mark.requires("torch")

torch = import_if_installed("torch")


@mt.torch(output_type="numpy")
def t_half(x: Any) -> Any:
    return x / 2  # float: PRESERVE_INPUT brings it back to the input dtype


@mt.torch(output_type="numpy")
def t_returns_numpy(x: Any) -> Any:
    return x.numpy() + 1


@mt.numpy(output_type="torch", contract=2)
def n_flat(x: Any) -> Any:
    return x.sum(axis=0)


def test_result_stays_in_the_computing_framework() -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    kept = t_half.computing()
    with mt.capture_conversions() as events:
        out = kept(x)
    assert type(out) is torch.Tensor
    assert [(e.source_type, e.target_type) for e in events] == [("numpy", "torch")]
    np.testing.assert_array_equal(out.numpy(), t_half(x))


def test_declares_its_types_and_is_made_once() -> None:
    kept = t_half.computing()
    assert isinstance(kept, MemoryTypeFunction)
    assert kept is t_half.computing() and kept.computing() is kept
    assert kept.input_memory_type is mt.MemoryType.TORCH
    assert kept.output_memory_type is mt.MemoryType.TORCH
    assert kept.keeps_result and not t_half.keeps_result
    assert t_half.output_memory_type is mt.MemoryType.NUMPY  # the original is unchanged
    assert kept.__wrapped__ is t_half.__wrapped__ and kept.__name__ == "t_half"
    assert "result kept where computed" in repr(kept)


def test_dtype_policy_still_applies_in_the_kept_framework() -> None:
    x = np.full((1, 2, 2), 7, np.int32)
    out = t_half.computing()(x)
    assert out.dtype == torch.int32 and int(out[0, 0, 0]) == 4  # 3.5 rounded half to even
    native = t_half.computing()(x, dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)
    assert native.dtype == torch.float32 and float(native[0, 0, 0]) == 3.5
    as_u8 = t_half.computing()(x, dtype_conversion="uint8")
    assert type(as_u8) is torch.Tensor and as_u8.dtype == torch.uint8


def test_contract_is_still_checked() -> None:
    with pytest.raises(mt.errors.ContractError, match="t_half must return a 3D"):
        t_half.computing()(np.ones((2, 2), np.float32))
    out = n_flat.computing()(np.ones((3, 2, 2), np.uint8))
    assert type(out) is np.ndarray and out.dtype == np.uint8 and out.tolist() == [[3, 3]] * 2


def test_a_result_of_another_framework_stays_in_it_with_the_policy_applied() -> None:
    x = np.full((1, 1, 2), 3, np.int16)
    out = t_returns_numpy.computing()(x, dtype_conversion="float32")
    assert type(out) is np.ndarray and out.dtype == np.float32 and out.tolist() == [[[4, 4]]]


def test_slice_by_slice_results_stay_in_the_computing_framework() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 2, 2)

    @mt.torch(output_type="numpy")
    def per_slice(s: Any) -> Any:
        assert s.ndim == 2
        return s * 2

    out = per_slice.computing()(x, slice_by_slice=True)
    assert type(out) is torch.Tensor and tuple(out.shape) == (3, 2, 2)
    np.testing.assert_array_equal(out.numpy(), x * 2)


def test_out_of_memory_recovery_is_kept() -> None:
    calls: list[int] = []

    @mt.torch(output_type="numpy")
    def flaky(x: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("out of memory (simulated on the host)")
        return x + 1

    out = flaky.computing()(np.zeros((1, 1, 1), np.float32))
    assert type(out) is torch.Tensor and float(out[0, 0, 0]) == 1.0 and len(calls) == 2


def test_pickles_like_the_original() -> None:
    by_name = pickle.loads(pickle.dumps(scaled.computing()))
    assert by_name is scaled.computing()
    by_value = pickle.loads(pickle.dumps(add_one.computing()))
    assert by_value.keeps_result and by_value.input_memory_type is mt.MemoryType.NUMPY
    np.testing.assert_array_equal(by_value(np.zeros((1, 1, 1))), np.ones((1, 1, 1)))


class Scaler:
    def __init__(self, factor: float) -> None:
        self.factor = factor

    @mt.torch(output_type="numpy")
    def scale(self, x: Any) -> Any:
        return x * self.factor

    scale_kept = scale.computing()

    @mt.torch(output_type="numpy")
    @staticmethod
    def double(x: Any) -> Any:
        return x * 2

    @mt.torch(output_type="numpy")
    @classmethod
    def named(cls, x: Any) -> Any:
        assert cls is Scaler
        return x + 1


def test_methods_static_and_class_methods_bind_like_the_original() -> None:
    x = np.ones((1, 1, 2), np.float32)
    s = Scaler(3.0)
    assert type(s.scale(x)) is np.ndarray
    assert s.scale_kept(x).tolist() == [[[3.0, 3.0]]] and type(s.scale_kept(x)) is torch.Tensor
    assert type(Scaler.double.computing()(x)) is torch.Tensor
    assert type(s.double.computing()(x)) is torch.Tensor
    assert type(Scaler.__dict__["named"].computing().__get__(s)(x)) is torch.Tensor


def test_a_method_of_a_pickled_instance_keeps_its_instance() -> None:
    f = pickle.loads(pickle.dumps(Filters(2.0)))
    kept = Filters.shift.computing()
    assert kept(f, np.zeros((1, 1, 1))).tolist() == [[[2.0]]]
