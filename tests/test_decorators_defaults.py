"""Decoration-time defaults for every call-time option (issue 13 part 3), and unknown type
names that say which parameter was wrong."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.errors import ArgumentTypeError, CallOptionError, DeviceError, UnknownMemoryTypeError

IMAGE = np.full((2, 3, 4), 200, np.uint8)


def brighten(image: np.ndarray) -> np.ndarray:
    return image * 0.5 + 3  # a float result that uint8 holds (PRESERVE_INPUT rounds to it)


def test_dtype_conversion_at_decoration_and_overridden_at_call() -> None:
    f = mt.numpy(dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)(brighten)
    assert f(IMAGE).dtype == np.float64
    assert f(IMAGE, dtype_conversion="preserve_input").dtype == np.uint8
    assert mt.numpy(brighten)(IMAGE).dtype == np.uint8  # the plain default is unchanged


def test_slice_by_slice_at_decoration() -> None:
    shapes: list[tuple[int, ...]] = []

    @mt.numpy(slice_by_slice=True, dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)
    def f(image: np.ndarray) -> np.ndarray:
        shapes.append(image.shape)
        return image * 1.5

    out = f(IMAGE)
    assert shapes == [(3, 4), (3, 4)] and out.shape == (2, 3, 4) and out.dtype == np.float64
    shapes.clear()
    f(IMAGE, slice_by_slice=False)
    assert shapes == [(2, 3, 4)]


def test_scaling_at_decoration() -> None:
    f = mt.numpy(scaling="rescale", dtype_conversion="uint8")(lambda x: x.astype(np.float32))
    out = f(np.array([[[0, 5, 10]]], np.uint16))
    assert out.tolist() == [[[0, 128, 255]]]
    assert f(np.array([[[0, 5, 10]]], np.uint16), scaling="clip").tolist() == [[[0, 5, 10]]]


def test_oom_recovery_and_fallback_at_decoration() -> None:
    calls: list[int] = []

    @mt.numpy(oom_recovery=False)
    def f(image: np.ndarray) -> np.ndarray:
        calls.append(1)
        if len(calls) == 1:
            raise MemoryError("once")
        return image

    with pytest.raises(MemoryError):
        f(IMAGE)
    calls.clear()
    assert f(IMAGE, oom_recovery=True).shape == IMAGE.shape and calls == [1, 1]
    g = mt.numpy(oom_fallback="cpu")(lambda x: x)
    assert inspect.signature(g).parameters["oom_fallback"].default == "cpu"


def test_gpu_id_at_decoration_is_ignored_by_host_types() -> None:
    assert mt.numpy(gpu_id=0)(lambda x: x)(IMAGE).shape == IMAGE.shape


def test_signature_shows_the_decorations_defaults() -> None:
    f = mt.torch(slice_by_slice=True, dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT,
                 scaling="unit")(brighten)
    params = inspect.signature(f).parameters
    assert params["slice_by_slice"].default is True
    assert params["dtype_conversion"].default is mt.DtypeConversion.NATIVE_OUTPUT
    assert params["scaling"].default == "unit" and params["oom_recovery"].default is True
    decorator = inspect.signature(mt.torch).parameters
    assert {"slice_by_slice", "dtype_conversion", "oom_fallback", "gpu_id"} <= set(decorator)


@pytest.mark.parametrize("option, value, error", [
    ("slice_by_slice", "yes", CallOptionError),
    ("dtype_conversion", "uint9", CallOptionError),
    ("scaling", "stretch", ValueError),
    ("oom_fallback", "gpu", CallOptionError),
    ("oom_recovery", 1, CallOptionError),
    ("gpu_id", -1, DeviceError),
])
def test_invalid_default_fails_at_decoration(option: str, value: Any,
                                             error: type[Exception]) -> None:
    with pytest.raises(error, match=option if option != "scaling" else "stretch"):
        mt.numpy(**{option: value})


def test_unknown_decorator_option_is_a_memtype_error() -> None:
    with pytest.raises(ArgumentTypeError, match="slice_by_slce.*slice_by_slice"):
        mt.torch(slice_by_slce=True)


@pytest.mark.parametrize("parameter", ["input_type", "output_type"])
def test_unknown_type_in_decorator_names_the_parameter(parameter: str) -> None:
    kwargs = {"input_type": "numpy", "output_type": "numpy", parameter: "pytorch"}
    with pytest.raises(UnknownMemoryTypeError, match=f"^{parameter}: Unknown memory type"):
        mt.memory_types(**kwargs)


@pytest.mark.parametrize("parameter", ["source_type", "target_type"])
def test_unknown_type_in_convert_memory_names_the_parameter(parameter: str) -> None:
    kwargs = {"source_type": "numpy", "target_type": "numpy", parameter: "pytorch"}
    with pytest.raises(UnknownMemoryTypeError, match=f"^{parameter}: Unknown memory type "
                                                     "'pytorch'. Expected one of: numpy"):
        mt.convert_memory(IMAGE, **kwargs)
