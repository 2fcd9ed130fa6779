"""What the memory managers of :mod:`memtype.gpu.pool` check and measure: allocation
records, shape and dtype arguments, device totals, limits, and emptying framework caches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtype.errors import ArgumentTypeError, InvalidArgumentError
from memtype.frameworks import Device, DeviceAdapter, load_adapter, loaded_frameworks
from memtype.gpu.devices import get_gpu_manager

__all__ = ["Allocation", "as_dtype", "as_shape", "device_total", "empty_caches", "check_limit"]


@dataclass
class Allocation:
    """One tracked array and its reference count."""

    array: Any
    source: str
    nbytes: int
    device: str
    refs: int = 1


def as_dtype(dtype: Any) -> np.dtype[Any]:
    """A NumPy dtype from a NumPy dtype-like or a loaded framework's dtype (``parse_dtype``)."""
    if dtype is None:
        raise ArgumentTypeError("dtype must be given (e.g. 'float32'); received None.")
    try:
        result: np.dtype[Any] = np.dtype(dtype)
        return result
    except TypeError:
        pass  # not NumPy's: ask the loaded frameworks (a framework's dtype implies it is loaded)
    for fw in loaded_frameworks():
        parsed = load_adapter(fw.name).parse_dtype(dtype)
        if parsed is not None:
            return parsed
    raise ArgumentTypeError(f"dtype {dtype!r} is not a dtype memtype understands.")


def as_shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    """A shape tuple of non-negative ints."""
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in dims):
        raise InvalidArgumentError(f"shape must hold non-negative ints; received {shape!r}.")
    return dims


def device_total(device: Device) -> int | None:
    """Total memory of a device in bytes, or None where unknown (OpenCL)."""
    if not device.is_gpu:
        import psutil

        return int(psutil.virtual_memory().total)
    if device.is_managed_gpu:
        return get_gpu_manager().mem_get_info(device.index)[1]
    return None


def empty_caches() -> None:
    """Ask each loaded framework that has a device to free its cached memory."""
    for fw in loaded_frameworks():
        adapter = load_adapter(fw.name)
        if isinstance(adapter, DeviceAdapter) and fw.gpu_kind is not None and adapter.gpu_count():
            adapter.empty_cache()


def check_limit(limit_bytes: object) -> None:
    """Raise unless ``limit_bytes`` is a positive int."""
    if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int) or limit_bytes <= 0:
        raise InvalidArgumentError(f"limit_bytes must be a positive int; received {limit_bytes!r}.")
