"""Adapter of the toy accelerator "toydev" (tests.toydevice): the one module a non-CUDA
device framework needs, with the optional stream hand-off, device-context and runtime groups
of the contract (``memtype.frameworks._protocol``)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any

import numpy as np

from memtype.frameworks import Device, DeviceProperties
from tests import toydevice as tdv
from tests.toydevice import ToyDeviceArray, ToyOutOfMemory

KIND = "toyaccel"
PEAK_KEY = "peak"


def _index(device: Device) -> int:
    if device.kind != KIND:
        raise ValueError(f"toydev arrays live on {KIND} devices; received {device}.")
    return device.index


def version() -> str:
    return "0.0-toydev"


def device_of(x: Any) -> Device:
    return Device(KIND, x.device)


def gpu_count() -> int:
    return tdv.DEVICE_COUNT


def devices() -> list[str]:
    return [f"{KIND}:{i}" for i in range(tdv.DEVICE_COUNT)]


def dlpack_version() -> str:
    return ""


def dtype_of(x: Any) -> np.dtype[Any]:
    dtype: np.dtype[Any] = np.dtype(x.dtype)
    return dtype


def shape_of(x: Any) -> tuple[int, ...]:
    return tuple(x.shape)


def to_numpy(x: Any) -> np.ndarray[Any, Any]:
    host: np.ndarray[Any, Any] = x.host()  # a device: the host gets a copy
    return host


def from_numpy(a: np.ndarray[Any, Any], device: Device) -> Any:
    return ToyDeviceArray(a, _index(device))


def from_dlpack(x: Any, device: Device) -> Any:
    return ToyDeviceArray(np.from_dlpack(x), _index(device))


def dlpack_dtype_ok(dtype: np.dtype[Any]) -> bool:
    return False


def dlpack_export(x: Any, contiguous: bool, align: int) -> Any | None:
    return None


def data_ptr(x: Any) -> int | None:
    return int(x.buffer().ctypes.data)


def to_device(x: Any, device: Device) -> Any:
    index = _index(device)
    return x if index == x.device else ToyDeviceArray(x.buffer(), index)


def copy(x: Any) -> Any:
    return ToyDeviceArray(x.buffer(), x.device)


def stack(arrays: Sequence[Any]) -> Any:
    return ToyDeviceArray(np.stack([a.buffer() for a in arrays]), arrays[0].device)


def namespace() -> ModuleType | None:
    return None


def synchronize(device: Device) -> None:
    tdv.DEVICES[_index(device)].synchronize_calls += 1


def stream(device: Device) -> AbstractContextManager[Any]:
    return tdv.use_stream(_index(device))


def empty_cache() -> None:
    for state in tdv.DEVICES:
        state.empty_cache()


def memory_info(gpu_id: int) -> dict[str, int]:
    if not 0 <= gpu_id < tdv.DEVICE_COUNT:
        return {}
    state = tdv.DEVICES[gpu_id]
    return {"allocated": state.held, "reserved": state.held + state.cached, "peak": state.peak}


def oom_errors() -> tuple[type[BaseException], ...]:
    return (ToyOutOfMemory,)


# -- Runtime ---------------------------------------------------------------------------------

def runtime_started() -> bool:
    return True


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, ToyOutOfMemory)


# -- Streams (hand-off between a caller's stream and the call's) -----------------------------

def current_stream(device: Device) -> Any:
    return tdv.current_stream(_index(device))


def wait_stream(waiter: Any, producer: Any) -> None:
    tdv.record(waiter.device, f"wait {producer.name}")


def record_stream(x: Any, stream: Any) -> None:
    tdv.record(x.device, f"record {stream.name}")


# -- DeviceContext ---------------------------------------------------------------------------

def current_device() -> int:
    return tdv.current_device()


# -- GPUHooks (peak reset: the profiler's block-own peak) ------------------------------------

def reset_peak(gpu_id: int) -> None:
    state = tdv.DEVICES[gpu_id]
    state.peak = state.held


def device_properties(index: int) -> DeviceProperties:
    state = tdv.DEVICES[index]
    return DeviceProperties(f"toy accelerator {index}", state.capacity,
                            state.capacity - state.held - state.cached)
