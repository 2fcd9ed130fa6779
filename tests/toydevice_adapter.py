"""Adapter of the toy accelerator "toydev" (tests.toydevice): the one module a non-CUDA
device framework needs: a :class:`~memtype.frameworks.DeviceAdapter` (the device facet's stream
hand-off, device-context, peak and device-description methods) with :class:`Diagnostics` (its
device names); no DLPack."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from memtype.frameworks import Device, DeviceAdapter, DeviceProperties, Diagnostics
from tests import toydevice as tdv
from tests.toydevice import ToyDeviceArray, ToyOutOfMemory

KIND = "toyaccel"


def _index(device: Device) -> int:
    if device.kind != KIND:
        raise ValueError(f"toydev arrays live on {KIND} devices; received {device}.")
    return device.index


class ToyDeviceAdapter(DeviceAdapter, Diagnostics):
    """The toy device framework's adapter: arrays on two 'toyaccel' devices."""

    dlpack = False
    peak_key = "peak"

    def version(self) -> str:
        return "0.0-toydev"

    def device_of(self, x: Any) -> Device:
        return Device(KIND, x.device)

    def gpu_count(self) -> int:
        return tdv.DEVICE_COUNT

    def devices(self) -> list[str]:
        return [f"{KIND}:{i}" for i in range(tdv.DEVICE_COUNT)]

    def dtype_of(self, x: Any) -> np.dtype[Any]:
        dtype: np.dtype[Any] = np.dtype(x.dtype)
        return dtype

    def to_numpy(self, x: Any) -> np.ndarray[Any, Any]:
        host: np.ndarray[Any, Any] = x.host()  # a device: the host gets a copy
        return host

    def from_numpy(self, a: np.ndarray[Any, Any], device: Device) -> Any:
        return ToyDeviceArray(a, _index(device))

    def data_ptr(self, x: Any) -> int | None:
        return int(x.buffer().ctypes.data)

    def to_device(self, x: Any, device: Device) -> Any:
        index = _index(device)
        return x if index == x.device else ToyDeviceArray(x.buffer(), index)

    def copy(self, x: Any) -> Any:
        return ToyDeviceArray(x.buffer(), x.device)

    def stack(self, arrays: Sequence[Any]) -> Any:
        return ToyDeviceArray(np.stack([a.buffer() for a in arrays]), arrays[0].device)

    def synchronize(self, device: Device) -> None:
        tdv.DEVICES[_index(device)].synchronize_calls += 1

    def stream(self, device: Device) -> AbstractContextManager[Any]:
        return tdv.use_stream(_index(device))

    def empty_cache(self) -> None:
        for state in tdv.DEVICES:
            state.empty_cache()

    def memory_info(self, gpu_id: int) -> dict[str, int]:
        if not 0 <= gpu_id < tdv.DEVICE_COUNT:
            return {}
        state = tdv.DEVICES[gpu_id]
        return {"allocated": state.held, "reserved": state.held + state.cached, "peak": state.peak}

    def oom_errors(self) -> tuple[type[BaseException], ...]:
        return (ToyOutOfMemory,)

    def current_stream(self, device: Device) -> Any:
        return tdv.current_stream(_index(device))

    def wait_stream(self, waiter: Any, producer: Any) -> None:
        tdv.record(waiter.device, f"wait {producer.name}")

    def record_stream(self, x: Any, stream: Any) -> None:
        tdv.record(x.device, f"record {stream.name}")

    def current_device(self) -> int:
        return tdv.current_device()

    def reset_peak(self, gpu_id: int) -> None:
        state = tdv.DEVICES[gpu_id]
        state.peak = state.held

    def device_properties(self, index: int) -> DeviceProperties:
        state = tdv.DEVICES[index]
        return DeviceProperties(f"toy accelerator {index}", state.capacity,
                                state.capacity - state.held - state.cached)
