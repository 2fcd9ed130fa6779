"""Bad input, missing devices and refused paths: each a clear memtype error."""

from __future__ import annotations

import numpy as np
import pytest

import memtype as mt
from tests.frameworks import available_types

GPU_TYPES = ["cupy", "torch", "tensorflow", "jax"]


def test_non_array_input() -> None:
    with pytest.raises(mt.UnsupportedArrayError) as info:
        mt.convert([1, 2, 3], "torch")
    assert "list" in str(info.value)


@pytest.mark.parametrize("bad", ["pytorch", "", "np", 3, None])
def test_unknown_target(bad: object) -> None:
    with pytest.raises(mt.UnknownMemoryTypeError) as info:
        mt.convert(np.zeros(2), bad)  # type: ignore[arg-type]
    assert "Expected one of: numpy, cupy, torch" in str(info.value)


@pytest.mark.parametrize("gpu_id", [-1, 1.5, "0", True])
@pytest.mark.requires("torch")
def test_malformed_gpu_id(gpu_id: object) -> None:
    with pytest.raises(mt.DeviceError) as info:
        mt.convert(np.zeros(2, np.float32), "torch", gpu_id=gpu_id)  # type: ignore[arg-type]
    assert repr(gpu_id) in str(info.value) or str(gpu_id) in str(info.value)


def test_cpu_only_type_ignores_gpu_id() -> None:
    a = np.zeros(3)
    assert mt.convert(a, "numpy", gpu_id=3) is a


@pytest.mark.no_gpu
@pytest.mark.parametrize("target", [pytest.param(t, marks=pytest.mark.requires(t), id=t)
                                    for t in GPU_TYPES])
def test_gpu_request_without_gpu(target: str) -> None:
    with pytest.raises(mt.DeviceError) as info:
        mt.convert(np.zeros(3, np.float32), target, gpu_id=0)
    assert "no cuda device is available" in str(info.value)


@pytest.mark.no_gpu
@pytest.mark.requires("cupy")
def test_cupy_without_gpu_is_a_device_error() -> None:
    with pytest.raises(mt.DeviceError):
        mt.convert(np.zeros(3, np.float32), "cupy")


@pytest.mark.requires("pyclesperanto")
@pytest.mark.opencl
def test_opencl_device_that_does_not_exist() -> None:
    with pytest.raises(mt.DeviceError) as info:
        mt.convert(np.zeros(3, np.float32), "pyclesperanto", gpu_id=99)
    assert "99" in str(info.value)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.requires("pyclesperanto")
@pytest.mark.opencl
def test_pyclesperanto_refuses_complex(dtype: str) -> None:
    with pytest.raises(mt.MemoryConversionError) as info:
        mt.convert(np.ones(3, dtype), "pyclesperanto")
    assert dtype in str(info.value) and "float32" in str(info.value)


@pytest.mark.requires("pyclesperanto")
@pytest.mark.opencl
def test_pyclesperanto_refuses_empty_and_4d() -> None:
    for shape in [(0, 3), (), (2, 2, 2, 2)]:
        with pytest.raises(mt.MemoryConversionError) as info:
            mt.convert(np.ones(shape, np.float32), "pyclesperanto")
        assert str(shape) in str(info.value)


def test_errors_are_builtins() -> None:
    assert issubclass(mt.UnsupportedArrayError, TypeError)
    assert issubclass(mt.UnknownMemoryTypeError, ValueError)
    assert issubclass(mt.MemoryConversionError, ValueError)
    assert issubclass(mt.DeviceError, ValueError)
    assert issubclass(mt.errors.FrameworkNotInstalledError, ImportError)
    for cls in (mt.UnsupportedArrayError, mt.MemoryConversionError, mt.DeviceError):
        assert issubclass(cls, mt.MemtypeError)


def test_missing_framework_gives_install_hint() -> None:
    from memtype.frameworks import Framework, load_adapter, register_framework, unregister_framework

    register_framework(Framework(name="ghost", module="memtype_no_such_module",
                                 array_types=("memtype_no_such_module:A",),
                                 adapter="memtype_no_such_module.adapter:GhostAdapter",
                                 device_kinds=("cpu",), install_hint="pip install ghost-arrays"))
    try:
        with pytest.raises(mt.errors.FrameworkNotInstalledError) as info:
            load_adapter("ghost")
        assert "pip install ghost-arrays" in str(info.value)
        with pytest.raises(mt.errors.FrameworkNotInstalledError):
            mt.convert(np.zeros(2), "ghost")
    finally:
        unregister_framework("ghost")


@pytest.mark.requires("torch", "jax", "tensorflow")
def test_available_types_include_the_host_four() -> None:
    assert {"numpy", "torch", "jax", "tensorflow"} <= set(available_types())
