"""NumPy adapter: the host hub every other adapter reads from and writes to."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from types import ModuleType
from typing import Any

import numpy as np

from memtype.frameworks._host import base_ndarray, numpy_dlpack_dtype, shareable
from memtype.frameworks._protocol import CPU, Device

HOST_NATIVE = True
DLPACK_CONTIGUOUS = False
DLPACK_ANY_DTYPE = True


def version() -> str:
    return np.__version__


def device_of(x: Any) -> Device:
    return CPU


def gpu_count() -> int:
    return 0


def devices() -> list[str]:
    return ["cpu"]


def dlpack_version() -> str:
    return "1.0"


def dtype_of(x: Any) -> np.dtype[Any]:
    return x.dtype


def shape_of(x: Any) -> tuple[int, ...]:
    return tuple(x.shape)


def to_numpy(x: Any) -> np.ndarray[Any, Any]:
    """``x``, or a plain view of a subclass's buffer (its overrides are never trusted)."""
    return base_ndarray(x)


def from_numpy(a: np.ndarray[Any, Any], device: Device) -> Any:
    return a


def from_dlpack(x: Any, device: Device) -> Any:
    return np.from_dlpack(x)


def dlpack_dtype_ok(dtype: np.dtype[Any]) -> bool:
    return True


def dlpack_export(x: Any, contiguous: bool, align: int) -> Any | None:
    x = base_ndarray(x)
    if not numpy_dlpack_dtype(x.dtype) or not shareable(x, contiguous=contiguous, align=align):
        return None
    return x


def data_ptr(x: Any) -> int | None:
    return int(base_ndarray(x).__array_interface__["data"][0])


def to_device(x: Any, device: Device) -> Any:
    return x


def copy(x: Any) -> Any:
    return np.array(x, copy=True)


def stack(arrays: Sequence[Any]) -> Any:
    return np.stack(arrays)


def namespace() -> ModuleType | None:
    return np


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


# --- dtype policy primitives (memtype.dtypes) ---


def astype(x: Any, dtype: np.dtype[Any]) -> Any:
    return x.astype(dtype)


def rint(x: Any) -> Any:
    return np.rint(x)


def readonly_view(x: Any) -> Any:
    """A view of ``x`` that cannot be written through (O(1); ``x`` itself is untouched)."""
    view = x.view()
    view.setflags(write=False)  # setflags is several times faster than view.flags.writeable
    return view


def runtime_started() -> bool:
    return False  # no device runtime


def unsupported(x: Any) -> str | None:
    """Why ``x`` cannot leave NumPy: a masked array's mask would be lost."""
    if isinstance(x, np.ma.MaskedArray):
        return ("a masked array's mask has no equivalent in other frameworks; pass "
                "x.filled(value) or x.data (and the mask, np.ma.getmaskarray(x), separately).")
    return None
