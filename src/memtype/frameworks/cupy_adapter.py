"""CuPy adapter (CUDA arrays only)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager, ExitStack
from types import ModuleType
from typing import Any

import cupy as cp
import numpy as np

from memtype.frameworks import ready_module
from memtype.frameworks._device import Device, DeviceProperties
from memtype.frameworks._facets import DeviceAdapter, Diagnostics
from memtype.frameworks._host import is_extension, numpy_dlpack_dtype

_streams = threading.local()


def _devices_in_use() -> list[int]:
    """GPUs whose memory cupy may hold: the current one and those memtype put arrays on.

    Entering any other device would create a CUDA context there (hundreds of MiB) just to
    find its pool empty.
    """
    return sorted({int(cp.cuda.runtime.getDevice()), *_used_devices})


_used_devices: set[int] = set()


def _enter(index: int) -> Any:
    _used_devices.add(index)
    return cp.cuda.Device(index)


class CupyAdapter(DeviceAdapter, Diagnostics):
    """CuPy arrays on CUDA GPUs."""

    dlpack_contiguous = False
    peak_key = "pool_total"  # the pool only grows: its size is the peak

    def version(self) -> str:
        return str(cp.__version__)

    def device_of(self, x: Any) -> Device:
        return Device("cuda", int(x.device.id))

    def gpu_count(self) -> int:
        try:
            return int(cp.cuda.runtime.getDeviceCount())
        except cp.cuda.runtime.CUDARuntimeError:  # no driver / no device
            return 0

    def devices(self) -> list[str]:
        names = []
        for i in range(self.gpu_count()):
            props = cp.cuda.runtime.getDeviceProperties(i)
            names.append(f"cuda:{i} {props['name'].decode()}")
        return names

    def dlpack_version(self) -> str:
        return "1.0"

    def dtype_of(self, x: Any) -> np.dtype[Any]:
        dtype: np.dtype[Any] = np.dtype(x.dtype)
        return dtype

    def to_numpy(self, x: Any) -> np.ndarray[Any, Any]:
        host: np.ndarray[Any, Any] = x.get()
        return host

    def from_numpy(self, a: np.ndarray[Any, Any], device: Device) -> Any:
        with _enter(device.index):
            return cp.asarray(a)

    def from_dlpack(self, x: Any, device: Device) -> Any:
        with _enter(device.index):
            return cp.from_dlpack(x)

    def dlpack_dtype_ok(self, dtype: np.dtype[Any]) -> bool:
        return numpy_dlpack_dtype(dtype)  # not ml_dtypes' float8 (kind 'f' too)

    def dlpack_export(self, x: Any, contiguous: bool, align: int) -> Any | None:
        if contiguous and not x.flags.c_contiguous:
            return None
        if any(s < 0 for s in x.strides):
            return None
        if align > 1 and x.size and x.data.ptr % align:
            return None
        return x

    def data_ptr(self, x: Any) -> int | None:
        return int(x.data.ptr)

    def to_device(self, x: Any, device: Device) -> Any:
        with _enter(device.index):
            return cp.asarray(x)  # peer-to-peer copy when the source lives elsewhere

    def copy(self, x: Any) -> Any:
        with x.device:
            return x.copy()

    def stack(self, arrays: Sequence[Any]) -> Any:
        return cp.stack(list(arrays))

    def namespace(self) -> ModuleType | None:
        xp: ModuleType = cp
        return xp

    def synchronize(self, device: Device) -> None:
        with cp.cuda.Device(device.index):
            cp.cuda.get_current_stream().synchronize()

    def stream(self, device: Device) -> AbstractContextManager[Any]:
        per_thread: dict[int, Any] = _streams.__dict__.setdefault("by_device", {})
        stack_ = ExitStack()
        stack_.enter_context(_enter(device.index))
        s = per_thread.get(device.index)
        if s is None:
            s = per_thread[device.index] = cp.cuda.Stream(non_blocking=True)
        stack_.enter_context(s)
        return stack_

    def empty_cache(self) -> None:
        """Free cupy's cached blocks and this thread's cuFFT plans on every GPU in use.

        A cached FFT plan keeps its work area allocated in the pool, so the plans go first.
        Plans cached by other threads stay (cupy keeps one plan cache per thread and device).
        """
        if not self.runtime_started():
            return  # nothing allocated; freeing would start (or, without a driver, fail on) CUDA
        fft = ready_module("cupy.fft")  # never imported: no plans to free
        pool = cp.get_default_memory_pool()
        for index in _devices_in_use():
            with cp.cuda.Device(index):  # the pool's methods act on the current device
                if fft is not None:
                    fft.config.clear_plan_cache()
                pool.free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()

    def memory_info(self, gpu_id: int) -> dict[str, int]:
        if self.gpu_count() == 0 or gpu_id not in _devices_in_use():
            return {}
        pool = cp.get_default_memory_pool()
        with cp.cuda.Device(gpu_id):
            return {"pool_used": int(pool.used_bytes()), "pool_total": int(pool.total_bytes())}

    def oom_errors(self) -> tuple[type[BaseException], ...]:
        return (cp.cuda.memory.OutOfMemoryError,)

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, cp.cuda.memory.OutOfMemoryError)

    def astype(self, x: Any, dtype: np.dtype[Any]) -> Any:
        with x.device:
            return x.astype(dtype)

    def rint(self, x: Any) -> Any:
        with x.device:
            return cp.rint(x)

    def rint_clip(self, x: Any, bounds: tuple[float, float] | None = None, *,
                  in_place: bool = False) -> Any:
        """In ``x`` when it is the caller's temporary, else in the one new array ``rint`` makes."""
        with x.device:
            r = cp.rint(x, out=x if in_place else None)
            if bounds is not None:
                cp.copyto(r, 0.0, where=cp.isnan(r))
                cp.clip(r, bounds[0], bounds[1], out=r)
            return r

    def current_stream(self, device: Device) -> Any:
        with cp.cuda.Device(device.index):
            return cp.cuda.get_current_stream()

    def wait_stream(self, waiter: Any, producer: Any) -> None:
        if waiter != producer:
            waiter.wait_event(producer.record())

    def record_stream(self, x: Any, stream: Any) -> None:
        return None  # CuPy has no record_stream: its pool reuses a freed block on that stream

    def holds_dtype(self, dtype: np.dtype[Any]) -> bool:
        """NumPy's own dtypes; no ml_dtypes extension (bfloat16, float8...)."""
        return not is_extension(dtype)

    def runtime_started(self) -> bool:
        """Whether cupy has CUDA memory (its pools only hold memory once CUDA is in use)."""
        return self.gpu_count() > 0 and cp.get_default_memory_pool().total_bytes() > 0

    def current_device(self) -> int:
        """The CUDA device current on this thread (``with cupy.cuda.Device(1):``)."""
        return int(cp.cuda.runtime.getDevice())

    def device_properties(self, index: int) -> DeviceProperties:
        props = cp.cuda.runtime.getDeviceProperties(index)
        with cp.cuda.Device(index):
            free, total = cp.cuda.runtime.memGetInfo()
        name = props["name"]
        return DeviceProperties(name.decode() if isinstance(name, bytes) else str(name), int(total),
                                int(free), (int(props["major"]), int(props["minor"])))

    def set_memory_cap(self, gpu_id: int, limit_bytes: int | None, total_bytes: int) -> None:
        with cp.cuda.Device(gpu_id):
            cp.get_default_memory_pool().set_limit(size=limit_bytes or 0)
