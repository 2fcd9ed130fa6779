"""Call-time options of decorated functions: dtype_conversion, scaling, slice_by_slice,
gpu_id, oom_fallback; and many threads calling at once."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.dtypes import DtypePolicyWarning, cast, holds_dtype
from memtype.errors import CallOptionError, ContractError, DeviceError, DtypePolicyError
from memtype.frameworks import load_adapter
from tests.helpers import dtype_of, host

DC = mt.DtypeConversion
U8 = np.array([[[0, 10, 200], [250, 255, 3]]], np.uint8)


def decorator_for(memory_type: str, **kwargs: Any) -> Callable[..., Any]:
    return getattr(mt, memory_type)(**kwargs)  # type: ignore[no-any-return]


def affine(image: Any) -> Any:
    """Float result from any input: works in every framework's own arithmetic."""
    return image * 1.7 - 20.0


def as_float(memory_type: str, values: np.ndarray) -> Any:
    return mt.convert(values.astype(np.float32), memory_type)


# -- dtype_conversion and scaling -----------------------------------------------------


def test_preserve_input_is_the_default(memory_type: str) -> None:
    @decorator_for(memory_type, input_type="numpy")
    def darken(image: np.ndarray) -> np.ndarray:
        return image.astype(np.float32) * 0.75 + 2.5  # fits uint8: rounded to it

    @decorator_for(memory_type, input_type="numpy")
    def brighten(image: np.ndarray) -> np.ndarray:
        return image.astype(np.float32) * 1.5 - 3.0  # 255 * 1.5 overflows uint8

    out = darken(U8)
    assert dtype_of(out) == np.uint8
    expected = np.rint(U8 * np.float32(0.75) + np.float32(2.5)).astype(np.uint8)
    np.testing.assert_array_equal(host(out), expected)
    with pytest.warns(DtypePolicyWarning, match="NATIVE_OUTPUT"):  # never collapsed
        out = brighten(U8)
    assert dtype_of(out) == np.float32
    np.testing.assert_array_equal(host(out), U8 * np.float32(1.5) - np.float32(3.0))


def test_native_output_leaves_the_result(memory_type: str) -> None:
    f = decorator_for(memory_type, input_type="numpy")(lambda image: image / 2)
    out = f(U8, dtype_conversion=DC.NATIVE_OUTPUT)
    assert dtype_of(out).kind == "f"
    np.testing.assert_array_equal(host(out), U8 / 2)


@pytest.mark.parametrize("conversion", [m for m in DC if m.numpy_dtype is not None],
                         ids=lambda m: m.name)
def test_forced_dtypes(memory_type: str, conversion: mt.DtypeConversion) -> None:
    f = decorator_for(memory_type, output_type="numpy")(affine)
    values = np.array([[[0.0, 10.0, 150.5]]], np.float32)
    out = f(values, dtype_conversion=conversion)
    assert out.dtype == conversion.numpy_dtype
    result = (values * np.float32(1.7) - np.float32(20.0))
    np.testing.assert_array_equal(out, cast(result, conversion.numpy_dtype))


@pytest.mark.requires("jax")
def test_forced_dtype_a_framework_cannot_hold_gives_its_nearest() -> None:
    if holds_dtype(load_adapter("jax"), np.dtype("float64")):
        pytest.skip("JAX runs with x64 here")
    out = mt.jax(affine)(np.ones((1, 2, 2), np.float32), dtype_conversion=DC.FLOAT64)
    assert dtype_of(out) == np.float32


def test_dtype_conversion_by_value() -> None:
    out = mt.numpy(affine)(U8.astype(np.float32), dtype_conversion="uint16")
    assert out.dtype == np.uint16


@pytest.mark.parametrize("scaling", ["clip", "rescale", "unit"])
def test_same_numbers_from_every_framework(memory_type: str, scaling: str) -> None:
    values = np.linspace(-40, 200, 24, dtype=np.float32).reshape(2, 3, 4)
    values[0, 0, :2] = [np.nan, np.inf]
    f = decorator_for(memory_type, output_type="numpy")(affine)
    reference = mt.numpy(affine)(values, dtype_conversion=DC.UINT8, scaling=scaling)
    out = f(values, dtype_conversion=DC.UINT8, scaling=scaling)
    np.testing.assert_array_equal(out, reference)


def test_rescale_and_unit_through_the_decorator() -> None:
    f = mt.numpy(lambda image: image / 100.0)
    values = np.array([[[0, 50, 100]]], np.uint8)
    np.testing.assert_array_equal(f(values, scaling="rescale"), [[[0, 128, 255]]])
    np.testing.assert_array_equal(f(values, scaling="unit"), [[[0, 128, 255]]])
    np.testing.assert_array_equal(f(values), [[[0, 128, 255]]])  # [0, 1]: scikit-image's


def test_complex_result_is_not_silently_made_real() -> None:
    f = mt.numpy(lambda image: np.fft.fftn(image))
    with pytest.raises(DtypePolicyError, match="imaginary part"):
        f(U8.astype(np.float32))
    assert f(U8, dtype_conversion=DC.NATIVE_OUTPUT).dtype == np.complex128


@pytest.mark.parametrize(("option", "value", "error"), [
    ("dtype_conversion", "uint12", CallOptionError), ("scaling", "stretch", DtypePolicyError),
    ("slice_by_slice", "yes", CallOptionError), ("oom_fallback", "gpu", CallOptionError),
    ("gpu_id", -1, DeviceError), ("gpu_id", "0", DeviceError), ("gpu_id", True, DeviceError),
])
def test_invalid_option_values(option: str, value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=re.escape(repr(value))):
        mt.numpy(affine)(U8, **{option: value})


# -- float64 into frameworks without float64 ------------------------------------------


@pytest.mark.parametrize("framework", ["jax", "pyclesperanto"])
@pytest.mark.requires("jax", "pyclesperanto")
def test_float64_input_computes_in_float32_and_returns_float64(framework: str) -> None:
    if holds_dtype(load_adapter(framework), np.dtype("float64")):
        pytest.skip(f"{framework} holds float64 here")
    values = np.linspace(0, 1, 8).reshape(2, 2, 2)
    out = decorator_for(framework, output_type="numpy")(lambda image: image + 1)(values)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, values + 1, rtol=1e-7)
    np.testing.assert_array_equal(out, (values.astype(np.float32) + 1).astype(np.float64))


@pytest.mark.parametrize("framework", ["jax", "pyclesperanto"])
@pytest.mark.requires("jax", "pyclesperanto")
def test_float64_beyond_float32_range_is_an_error(framework: str) -> None:
    if holds_dtype(load_adapter(framework), np.dtype("float64")):
        pytest.skip(f"{framework} holds float64 here")
    values = np.full((1, 2, 2), 1e300)
    with pytest.raises(mt.MemoryConversionError, match="exceed its range"):
        decorator_for(framework)(lambda image: image)(values)


@pytest.mark.requires("jax")
def test_int64_beyond_int32_into_jax_is_an_error() -> None:
    if holds_dtype(load_adapter("jax"), np.dtype("int64")):
        pytest.skip("JAX runs with x64 here")
    with pytest.raises(mt.MemoryConversionError, match="would change values"):
        mt.jax(lambda image: image)(np.full((1, 2, 2), 2**40, np.int64))


# -- slice_by_slice ---------------------------------------------------------------------


def test_slice_by_slice_sees_2d_slices_and_restacks(memory_type: str) -> None:
    shapes = []

    @decorator_for(memory_type)
    def f(image: Any) -> Any:
        shapes.append(tuple(load_adapter(memory_type).shape_of(image)))
        return image * 2

    image = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = f(image, slice_by_slice=True)
    assert shapes == [(3, 4), (3, 4)]
    assert mt.detect_memory_type(out) is mt.MemoryType(memory_type)
    np.testing.assert_array_equal(host(out), image * 2)


def test_slice_by_slice_tuple_results_are_collected_per_element() -> None:
    @mt.numpy
    def f(image: np.ndarray, *, offset: int) -> tuple[np.ndarray, float, str]:
        return image + offset, float(image.sum()), "ok"

    image = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    out, sums, labels = f(image, offset=1, slice_by_slice=True)
    np.testing.assert_array_equal(out, image + 1)
    assert sums == [6.0, 22.0] and labels == ["ok", "ok"]


def test_slice_by_slice_image_by_keyword() -> None:
    @mt.numpy
    def f(*, image: np.ndarray) -> np.ndarray:
        return image - 1

    image = np.ones((3, 2, 2), np.float32)
    np.testing.assert_array_equal(f(image=image, slice_by_slice=True), image - 1)


def test_slice_by_slice_needs_a_3d_image() -> None:
    with pytest.raises(mt.errors.ShapeError,
                       match=r"3D \[Z, Y, X\] image.*received shape \(2, 2\)"):
        mt.numpy(lambda image: image)(np.zeros((2, 2)), slice_by_slice=True)


def test_slice_results_must_be_2d() -> None:
    f = mt.numpy(lambda image: image.sum(axis=0))
    with pytest.raises(ContractError, match=r"2D array per slice; slice 0 returned shape"):
        f(np.ones((2, 3, 4)), slice_by_slice=True)


# -- gpu_id -----------------------------------------------------------------------------


def test_gpu_id_is_ignored_by_host_only_types() -> None:
    np.testing.assert_array_equal(mt.numpy(affine)(U8, gpu_id=0, dtype_conversion=DC.FLOAT32),
                                  affine(U8.astype(np.float32)))


@pytest.mark.no_gpu
@pytest.mark.requires("torch")
def test_gpu_id_without_a_gpu_fails_loudly() -> None:
    with pytest.raises(DeviceError, match="no cuda device is available"):
        mt.torch(affine)(U8, gpu_id=0)


@pytest.mark.no_gpu
@pytest.mark.requires("torch")
def test_oom_fallback_cpu_needs_no_gpu_on_the_host() -> None:
    out = mt.torch(affine)(U8.astype(np.float32), oom_fallback="cpu")
    np.testing.assert_array_equal(host(out), affine(U8.astype(np.float32)))


# -- threads ----------------------------------------------------------------------------


@pytest.mark.parametrize("framework", ["numpy", "torch", "jax"])
@pytest.mark.requires("jax", "torch")
def test_eight_threads_at_once_on_the_host(framework: str) -> None:
    f = decorator_for(framework, input_type="numpy")(lambda image: image * 2 + 1)
    images = [np.full((2, 8, 8), i, np.float32) for i in range(32)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda im: host(f(im, slice_by_slice=im[0, 0, 0] % 2 == 1)),
                                images))
    for i, out in enumerate(results):
        np.testing.assert_array_equal(out, np.full((2, 8, 8), 2 * i + 1, np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_eight_threads_on_gpu_streams(framework: str) -> None:
    pytest.importorskip(framework)

    @decorator_for(framework)
    def f(image: Any) -> Any:
        for _ in range(20):  # long enough for streams to overlap
            image = image * 1.0001
        return image * 0 + image.sum() / image.size

    images = [mt.convert(np.full((4, 256, 256), i, np.float32), framework, gpu_id=0)
              for i in range(32)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda im: host(f(im, gpu_id=0)), images))
    for i, out in enumerate(results):
        np.testing.assert_allclose(out, i * 1.0001**20, rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.requires("torch")
def test_gpu_call_runs_on_the_requested_device() -> None:
    torch = importlib.import_module("torch")
    devices = []

    @mt.torch
    def f(image: Any) -> Any:
        devices.append((image.device, torch.cuda.current_stream(image.device)))
        return image + 1

    out = f(np.ones((1, 4, 4), np.float32), gpu_id=0)
    assert out.device == torch.device("cuda", 0)
    assert devices[0][1] != torch.cuda.default_stream(0)  # this thread's own stream
