"""MLX adapter (host arrays; on Apple silicon MLX's memory is unified, here CPU only).

MLX arrays are mutable (item assignment, and NumPy's view of their buffer writes through).
Export is zero-copy: NumPy's buffer-protocol view of an evaluated array (bfloat16 through a
uint16 view). Import always copies: MLX cannot import a CPU buffer without a copy
(``mx.from_dlpack(a, copy=False)`` raises "Cannot import a CPU array without a copy", mlx
0.32.4), so the row declares no DLPack import and host arrays enter through ``mx.array``
with an explicit dtype (without one, ``mx.array`` narrows float64 to float32 silently).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import ml_dtypes
import mlx.core as mx
import numpy as np

from memtype.errors import MemoryConversionError
from memtype.frameworks._device import Device
from memtype.frameworks._facets import DeviceAdapter, Diagnostics
from memtype.frameworks._host import base_ndarray, narrow_lossless, native_copy, negative_strides

_BF16 = np.dtype(ml_dtypes.bfloat16)
_NARROW_HINT = "MLX has no complex128; cast to complex64 first."


@functools.cache
def _dtypes() -> dict[np.dtype[Any], Any]:
    """NumPy dtype -> MLX dtype, for every dtype MLX holds (float64 on its CPU device)."""
    names = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "float32", "float64", "complex64")
    table: dict[np.dtype[Any], Any] = {np.dtype(n): getattr(mx, n if n != "bool" else "bool_")
                                       for n in names}
    table[_BF16] = mx.bfloat16
    return table


@functools.cache
def _numpy_dtypes() -> dict[Any, np.dtype[Any]]:
    return {v: k for k, v in _dtypes().items()}


def _private(x: Any) -> Any:
    """``x`` evaluated: MLX computes lazily, so an unevaluated copy, cast or stack would read
    its source's buffer only when first used, after the caller's later writes (through
    NumPy's zero-copy view of an MLX array) had reached it."""
    mx.eval(x)
    return x


@functools.cache
def _namespace() -> ModuleType:
    xp = ModuleType("memtype.frameworks.mlx_adapter.xp", "mlx.core with amin and amax")
    xp.__dict__.update(amin=mx.min, amax=mx.max, __getattr__=lambda name: getattr(mx, name))
    return xp


def _refuse(dtype: np.dtype[Any]) -> Any:
    held = ", ".join(str(d) for d in _dtypes())
    raise MemoryConversionError(
        f"mlx cannot hold dtype {dtype}; it holds {held}.", "numpy", "mlx")


# --- dtype policy primitives (memtype.dtypes) ---


class MlxAdapter(DeviceAdapter, Diagnostics):
    """MLX arrays on the host (CPU only here).

    The base class's defaults hold: every array is on the host (MLX arrays carry no device;
    Metal's unified memory is not a device kind memtype moves arrays to), and running out of
    memory is ``std::bad_alloc``, which nanobind raises as ``MemoryError``.
    """

    dlpack = False  # no zero-copy import (see the module documentation): from_numpy copies

    def version(self) -> str:
        return str(vars(mx)["__version__"])  # not in mlx's stubs

    def dlpack_version(self) -> str:
        return "1.0"  # export only (see the module documentation)

    def dtype_of(self, x: Any) -> np.dtype[Any]:
        return _numpy_dtypes()[x.dtype]

    def to_numpy(self, x: Any) -> np.ndarray[Any, Any]:
        """NumPy's view of ``x``'s buffer (evaluates ``x``; zero-copy, writable like ``x``)."""
        if x.dtype == mx.bfloat16:  # PEP 3118 has no bfloat16 format
            return np.asarray(x.view(mx.uint16)).view(_BF16)
        return np.asarray(x)

    def from_numpy(self, a: np.ndarray[Any, Any], device: Device) -> Any:
        """A copy of ``a`` as an MLX array of the same dtype (complex128 narrowed exactly)."""
        a = base_ndarray(a)
        if a.dtype.kind == "c" and a.dtype.itemsize == 16:
            a = narrow_lossless(a, np.dtype("c8"), "mlx", _NARROW_HINT)
        if not a.dtype.isnative or negative_strides(a):  # MLX refuses both
            a = native_copy(a)
        if a.dtype == _BF16:  # mx.array raises std::bad_cast on ml_dtypes.bfloat16
            return _private(mx.array(a.view(np.uint16)).view(mx.bfloat16))
        target = _dtypes().get(a.dtype)
        if target is None:
            return _refuse(a.dtype)
        return _private(mx.array(a, dtype=target))

    def dlpack_dtype_ok(self, dtype: np.dtype[Any]) -> bool:
        """False for float64 (``mx.from_dlpack`` narrows it to float32) and unheld dtypes."""
        return dtype in _dtypes() and dtype != np.dtype("f8")

    def dlpack_export(self, x: Any, contiguous: bool, align: int) -> Any | None:
        if x.dtype == mx.bfloat16:
            return None
        view = np.asarray(x)
        if contiguous and not view.flags.c_contiguous:
            return None
        if align > 1 and view.size and view.__array_interface__["data"][0] % align:
            return None
        return x

    def data_ptr(self, x: Any) -> int | None:
        return int(self.to_numpy(x).__array_interface__["data"][0])

    def copy(self, x: Any) -> Any:
        return _private(mx.array(x))  # a new buffer, filled now (mx.array(x) alone is lazy)

    def stack(self, arrays: Sequence[Any]) -> Any:
        out = mx.stack(list(arrays))
        if len(arrays) == 1:  # MLX's stack of one array is a view of it; NumPy's is a copy
            out = mx.array(out)
        return _private(out)

    def namespace(self) -> ModuleType | None:
        """``mlx.core`` under the NumPy names memtype's dtype policy uses (``amin``/``amax``)."""
        return _namespace()

    def minmax(self, x: Any) -> tuple[Any, Any]:
        return mx.min(x), mx.max(x)

    def synchronize(self, device: Device) -> None:
        mx.synchronize()

    def empty_cache(self) -> None:
        mx.clear_cache()

    def runtime_started(self) -> bool:
        return False  # no device runtime

    def astype(self, x: Any, dtype: np.dtype[Any]) -> Any:
        target = _dtypes().get(np.dtype(dtype))
        return _private(x.astype(target)) if target is not None else _refuse(np.dtype(dtype))

    def rint(self, x: Any) -> Any:
        return _private(mx.round(x))  # half to even, as np.rint

    def holds_dtype(self, dtype: np.dtype[Any]) -> bool:
        """Whether MLX has ``dtype`` (no complex128, no float8 or other ml_dtypes but bfloat16)."""
        return np.dtype(dtype).newbyteorder("=") in _dtypes()

    def parse_dtype(self, dtype: object) -> np.dtype[Any] | None:
        """The NumPy dtype of an MLX dtype object (``mx.float32``), or None for anything else."""
        return _numpy_dtypes().get(dtype) if isinstance(dtype, mx.Dtype) else None
