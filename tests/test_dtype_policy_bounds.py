"""The default policy's short cuts: a cast told the decision's bounds gives exactly what the
general cast gives, in every framework, at the edges where rounding or saturation bites."""

from __future__ import annotations

import importlib
import math
import warnings
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype._ranges import rounds_into as _rounds_into
from memtype._ranges import unit_fits as _unit_fits
from memtype.conversion.casting import cast_in, ops_for
from memtype.dtypes import DtypePolicyWarning, preserve_input
from memtype.frameworks import load_adapter
from tests.frameworks import held_params
from tests.helpers import dtype_of, host

NAN, INF = math.nan, math.inf
F32MAX = float(np.finfo(np.float32).max)

# (id, result dtype, result values, input dtype): results the default policy keeps in the
# input's dtype, their extremes at the edges that rounding and saturation care about
EDGES: list[tuple[str, str, list[float], str]] = [
    ("u8-half-ends", "float32", [-0.5, 0.5, 1.5, 2.5, 254.5, 255.49], "uint8"),
    ("u8-f64-ends", "float64", [-0.5, 2.0, 255.4999999], "uint8"),
    ("i8-half-ends", "float32", [-128.5, -2.5, 126.5, 127.25], "int8"),
    ("u16-ends", "float32", [-0.5, 3.0, 65535.0, 65535.25], "uint16"),
    ("i16-ends", "float32", [-32768.5, 0.5, 32767.49], "int16"),
    ("i32-f32-top", "float32", [-2147483648.0, 2.0, 2147483520.0], "int32"),
    ("i32-f64-ends", "float64", [-2147483648.5, 2.5, 2147483647.25], "int32"),
    ("u8-unit", "float32", [0.0, 0.5, 1.0 / 255, 1.0], "uint8"),
    ("u8-unit-f64", "float64", [0.0, 0.00196, 0.99804, 1.0], "uint8"),
    ("i8-unit", "float32", [-1.0, -0.5, 0.0, 1.0], "int8"),
    ("u16-unit", "float32", [0.0, 0.5, 1.0], "uint16"),
    ("i16-unit", "float64", [-1.0, 0.25, 1.0], "int16"),
    ("u32-unit", "float32", [0.0, 0.5, 1.0], "uint32"),
    ("i32-unit", "float32", [-1.0, 0.5, 1.0], "int32"),
    ("u8-from-i64", "int64", [0, 7, 255], "uint8"),
    ("i8-from-i32", "int32", [-128, 0, 127], "int8"),
    ("f16-from-f32", "float32", [-65504.0, 1.5, 65504.0, INF, NAN], "float16"),
]


def _result(memory_type: str, values: list[float], dtype: str) -> Any:
    return mt.convert(np.array([values], dtype=dtype), memory_type)


@pytest.mark.parametrize("memory_type,row", held_params(EDGES, (1, 3)))
def test_cast_with_bounds_equals_the_general_cast(memory_type: str,
                                                  row: tuple[str, str, list[float], str]) -> None:
    _, src, values, dst = row
    x = _result(memory_type, values, src)
    adapter = load_adapter(memory_type)
    decided, bounds = preserve_input(x, memory_type, adapter, np.dtype(dst), "f")
    assert decided.dtype == np.dtype(dst) and bounds is not None
    fast = cast_in(x, memory_type, adapter, np.dtype(dst), decided.scaling, bounds)
    general = mt.dtypes.cast(x, dst, scaling=decided.scaling)
    assert dtype_of(fast) == np.dtype(dst)
    np.testing.assert_array_equal(host(fast), host(general))


def test_bounds_are_the_extremes_the_decision_measured() -> None:
    x = np.array([[3.0, 250.25, 17.5]])
    decided, bounds = preserve_input(x, "numpy", load_adapter("numpy"), np.dtype("uint8"), "f")
    assert decided.dtype == np.dtype("uint8") and bounds == (3.0, 250.25)


@pytest.mark.parametrize("dst,work,fits", [
    ("uint8", "float32", True), ("int16", "float32", True), ("uint16", "float32", True),
    ("int32", "float64", True), ("uint32", "float64", True),
    ("int32", "float32", False),  # JAX without x64: float32 cannot hold 2**31 - 1
    ("uint32", "float32", False),
])
def test_unit_short_cut_only_where_the_work_dtype_is_exact(dst: str, work: str,
                                                           fits: bool) -> None:
    info = np.iinfo(np.dtype(dst))
    got = _unit_fits((-1.0 if info.min else 0.0, 1.0), np.dtype(work), int(info.min),
                     int(info.max))
    assert got is fits


@pytest.mark.parametrize("bounds,dst,fits", [
    ((-0.5, 255.49), "uint8", True), ((-0.5, 255.5), "uint8", False),  # 255.5 -> 256
    ((-0.51, 3.0), "uint8", False), ((-128.5, 127.25), "int8", True),
    ((-2147483648.5, 2147483647.25), "int32", True), ((0.0, INF), "uint8", False),
    ((NAN, 3.0), "uint8", False),
])
def test_rounding_short_cut_only_when_every_rounded_value_fits(
        bounds: tuple[float, float], dst: str, fits: bool) -> None:
    assert _rounds_into(bounds, np.dtype(dst)) is fits


def test_unit_short_cut_refuses_values_beyond_the_unit_range() -> None:
    info = np.iinfo(np.uint8)
    assert not _unit_fits((0.0, 1.5), np.dtype("float32"), int(info.min), int(info.max))
    assert not _unit_fits((-0.5, 1.0), np.dtype("float32"), int(info.min), int(info.max))
    assert not _unit_fits(None, np.dtype("float32"), int(info.min), int(info.max))


# float64 -> float32 (a float32 input, a float64 result): the minimum and the maximum say
# which side needs saturating; NaN says nothing and both sides are done
NARROW: list[tuple[str, list[float], list[float]]] = [
    ("in-range", [1.5, -2.0, 3e38], [1.5, -2.0, 3e38]),
    ("over", [1e300, 1.0, INF], [F32MAX, 1.0, INF]),
    ("under", [-1e300, 1.0, -INF], [-F32MAX, 1.0, -INF]),
    ("both", [1e300, -1e300, 0.0], [F32MAX, -F32MAX, 0.0]),
    ("nan", [NAN, 1e300, -1e300, 2.0], [NAN, F32MAX, -F32MAX, 2.0]),
    ("only-nan", [NAN, NAN], [NAN, NAN]),
]


@pytest.mark.parametrize("memory_type,row", held_params(NARROW, ("float64",)))
def test_float64_to_float32_saturates_only_what_needs_it(
        memory_type: str, row: tuple[str, list[float], list[float]]) -> None:
    _, values, expected = row
    x = _result(memory_type, values, "float64")
    out = mt.dtypes.cast(x, "float32")
    np.testing.assert_array_equal(host(out)[0], np.array(expected, np.float32))


def test_float64_to_float32_of_an_empty_array() -> None:
    out = mt.dtypes.cast(np.zeros((0, 3)), "float32")
    assert out.dtype == np.float32 and out.shape == (0, 3)


@pytest.mark.parametrize("value,expected", [(169.5, 170), (168.5, 168), (254.5, 254),
                                            (255.49, 255), (2.5, 2)])
def test_decorated_call_rounds_half_to_even_at_the_edges(value: float, expected: int) -> None:
    @mt.numpy
    def offset(image: Any) -> Any:
        return image - 100.0 + value

    out = offset(np.full((1, 2, 2), 100, np.uint8))
    assert out.dtype == np.uint8 and (out == expected).all()


@pytest.mark.requires("torch")
def test_decorated_torch_call_scales_back_unit_results() -> None:
    torch = importlib.import_module("torch")

    @mt.torch
    def to_unit(image: Any) -> Any:
        return image / 255.0

    x = torch.arange(256, dtype=torch.uint8).reshape(1, 16, 16)
    out = to_unit(x)
    assert out.dtype == torch.uint8 and torch.equal(out, x)


def test_out_of_range_result_still_warns_and_is_returned_as_made() -> None:
    @mt.numpy
    def brighten(image: Any) -> Any:
        return image * 1.5

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = brighten(np.full((1, 2, 2), 200, np.uint8))
    assert out.dtype == np.float64 and (out == 300.0).all()
    assert [w.category for w in caught] == [DtypePolicyWarning]


def test_ops_are_shared_per_framework() -> None:
    adapter = load_adapter("numpy")
    assert ops_for("numpy", adapter) is ops_for("numpy", adapter) is not None


@pytest.mark.requires("pyclesperanto")
@pytest.mark.opencl
def test_ops_are_none_without_a_namespace() -> None:
    assert ops_for("pyclesperanto", load_adapter("pyclesperanto")) is None
