"""MLX arrays a decorated call, a cast or a stack hands out are computed before they are
handed out (issue 21 item 3): MLX evaluates lazily, so a result that is still a formula over
the caller's array would read it when first used, after the caller's later writes (through
NumPy's zero-copy view of the MLX array). Each case writes the caller's array after the call
and reads the result afterwards."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.dtypes import cast
from tests.helpers import host, import_if_installed

pytestmark = pytest.mark.requires("mlx")

mx = import_if_installed("mlx.core")

IMAGE = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)


def _write_through_numpy(a: Any) -> None:
    np.asarray(a)[...] = np.nan  # NumPy's view of an MLX array shares its buffer


def _write_by_index(a: Any) -> None:
    a[0] = 5


WRITES = [pytest.param(_write_through_numpy, id="numpy-view-write"),
          pytest.param(_write_by_index, id="index-write")]


@pytest.mark.parametrize("write", WRITES)
def test_copy_inputs_copy_of_an_mlx_array_is_private(write: Callable[[Any], None]) -> None:
    caller = mx.array(IMAGE)
    kept: list[Any] = []
    mt.mlx(copy_inputs=True)(lambda x: kept.append(x) or x + 0)(caller)
    write(caller)
    np.testing.assert_array_equal(host(kept[0]), IMAGE)


def test_copy_inputs_into_numpy_from_mlx_is_private() -> None:
    caller = mx.array(IMAGE)
    kept: list[Any] = []
    mt.numpy(copy_inputs=True)(lambda x: kept.append(x) or x)(caller)
    _write_through_numpy(caller)
    np.testing.assert_array_equal(kept[0], IMAGE)


def test_numpy_input_to_mlx_is_a_computed_copy() -> None:
    caller = IMAGE.copy()
    kept: list[Any] = []
    mt.mlx(lambda x: kept.append(x) or x)(caller)
    caller[...] = -1
    np.testing.assert_array_equal(host(kept[0]), IMAGE)


@pytest.mark.parametrize("target", ["uint8", "int16", "float16"])
def test_rescale_of_a_constant_mlx_array_is_computed_before_it_is_returned(target: str) -> None:
    caller = mx.array(np.full((1, 2, 3), 5, np.float32))
    cast_out = cast(caller, target, scaling="rescale")
    _write_through_numpy(caller)
    np.testing.assert_array_equal(host(cast_out), np.full((1, 2, 3), 5, target))


def test_decorated_rescale_result_is_computed_before_it_is_returned() -> None:
    caller = mx.array(np.full((1, 2, 3), 5, np.float32))
    out = mt.mlx(lambda x: x)(caller, dtype_conversion=mt.DtypeConversion.UINT8,
                              scaling="rescale")
    _write_through_numpy(caller)
    np.testing.assert_array_equal(host(out), np.full((1, 2, 3), 5, np.uint8))


@pytest.mark.parametrize("scaling", ["clip", "rescale", "unit"])
def test_cast_of_an_mlx_array_is_computed_before_it_is_returned(scaling: str) -> None:
    values = np.array([[[0.0, 0.25, 0.5], [0.75, 1.0, 300.0]]], np.float32)
    caller = mx.array(values)
    out = cast(caller, "uint8", scaling=scaling)  # type: ignore[arg-type]
    expected = host(cast(values, "uint8", scaling=scaling))  # type: ignore[arg-type]
    _write_through_numpy(caller)
    np.testing.assert_array_equal(host(out), expected)


@pytest.mark.parametrize("count", [1, 3], ids=["one-slice", "three-slices"])
def test_stack_slices_of_mlx_slices_is_private(count: int) -> None:
    slices = [mx.array(np.full((2, 2), i, np.float32)) for i in range(count)]
    stacked = mt.stack_slices(slices, "mlx")
    for s in slices:
        _write_through_numpy(s)
    expected = np.stack([np.full((2, 2), i, np.float32) for i in range(count)])
    np.testing.assert_array_equal(host(stacked), expected)


def test_slice_by_slice_result_is_private() -> None:
    caller = mx.array(IMAGE)
    out = mt.mlx(lambda x: x)(caller, slice_by_slice=True)
    _write_through_numpy(caller)
    np.testing.assert_array_equal(host(out), IMAGE)


def test_result_converted_to_mlx_is_private() -> None:
    caller = IMAGE.copy()
    out = mt.numpy(output_type="mlx")(lambda x: x)(caller)
    caller[...] = -1
    np.testing.assert_array_equal(host(out), IMAGE)
