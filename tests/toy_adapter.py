"""Adapter of the toy framework: the one module a seventh framework needs."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from types import ModuleType
from typing import Any

import numpy as np

from memtype.frameworks import CPU, Device
from tests.toyarrays import ToyArray

HOST_NATIVE = False


def version() -> str:
    return "0.0-toy"


def device_of(x: Any) -> Device:
    return CPU


def gpu_count() -> int:
    return 0


def devices() -> list[str]:
    return ["cpu"]


def dlpack_version() -> str:
    return ""


def dtype_of(x: Any) -> np.dtype:
    return x.dtype


def shape_of(x: Any) -> tuple[int, ...]:
    return x.shape


def to_numpy(x: Any) -> np.ndarray:
    return x.values()


def from_numpy(a: np.ndarray, device: Device) -> Any:
    return ToyArray(a)


def from_dlpack(x: Any, device: Device) -> Any:
    return ToyArray(np.from_dlpack(x))


def dlpack_dtype_ok(dtype: np.dtype) -> bool:
    return False


def dlpack_export(x: Any, contiguous: bool, align: int) -> Any | None:
    return None


def data_ptr(x: Any) -> int | None:
    return None


def to_device(x: Any, device: Device) -> Any:
    return x


def copy(x: Any) -> Any:
    return ToyArray(x.values())


def stack(arrays: Sequence[Any]) -> Any:
    return ToyArray(np.stack([a.values() for a in arrays]))


def namespace() -> ModuleType | None:
    return None


def synchronize(device: Device) -> None:
    return None


def stream(device: Device) -> AbstractContextManager[Any]:
    return nullcontext()


def empty_cache() -> None:
    return None


def memory_info(gpu_id: int) -> dict[str, int]:
    return {}


def oom_errors() -> tuple[type[BaseException], ...]:
    return (MemoryError,)


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError)
