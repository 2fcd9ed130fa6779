"""JAX adapter (CPU and CUDA arrays). JAX arrays are immutable."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from types import ModuleType
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from memtype.frameworks._device import CPU, Device
from memtype.frameworks._facets import DeviceAdapter, Diagnostics
from memtype.frameworks._host import (
    NARROWER,
    base_ndarray,
    is_extension,
    narrow_lossless,
    native_copy,
    negative_strides,
)


def _runtime_error() -> type[Exception]:
    """The class of XLA's run-time errors (out of memory among them) in the loaded JAX.

    ``jax.errors.JaxRuntimeError`` in newer JAX; in older releases (0.4.30...) the same
    class exists only as jaxlib's ``XlaRuntimeError``. Looked up once, at import.
    """
    found = getattr(jax.errors, "JaxRuntimeError", None)
    if found is None:  # older jaxlib: a module newer jaxlib no longer has
        found = importlib.import_module("jaxlib.xla_extension").XlaRuntimeError
    return cast(type[Exception], found)


RUNTIME_ERROR = _runtime_error()

_X64_HINT = (
    "Enable 64-bit JAX with memtype.gpu.configure(jax_enable_x64=True) "
    "(jax.config.update('jax_enable_x64', True)), or cast to a 32-bit dtype first."
)


_jax: Any = jax  # effects_barrier, clear_caches, config.read/update lack annotations


def _x64() -> bool:
    """Whether 64-bit JAX arrays are enabled (may change at any time)."""
    return bool(_jax.config.read("jax_enable_x64"))


def _platform_kind(platform: str) -> str:
    return "cpu" if platform == "cpu" else "cuda"


def _gpu_devices() -> list[Any]:
    try:
        return list(jax.devices("gpu"))
    except RuntimeError:  # jax raises RuntimeError when no GPU backend is present
        return []


def _jax_device(device: Device) -> Any:
    if device.kind == "cpu":
        return jax.devices("cpu")[0]
    return _gpu_devices()[device.index]


def _is_wide(dtype: np.dtype[Any]) -> bool:
    """64-bit int/float or 128-bit complex: what JAX narrows without x64."""
    size = dtype.itemsize
    return (size == 8 and dtype.kind in "iuf") or (size == 16 and dtype.kind == "c")


def _fit_dtype(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """64-bit values narrowed exactly when JAX runs without x64; otherwise an error."""
    if not _is_wide(a.dtype) or _x64():
        return a
    return narrow_lossless(a, np.dtype(NARROWER[a.dtype.str[1:]]), "jax", _X64_HINT)


@functools.cache
def _holds_extension(dtype: np.dtype[Any]) -> bool:
    """Asked once per dtype: jnp names float6_* that XLA's CPU backend cannot hold."""
    known = getattr(jnp, dtype.name, None)
    if known is None or np.dtype(known) != dtype:
        return False
    try:
        jax.device_put(np.zeros(1, dtype))
    except (RUNTIME_ERROR, TypeError):  # "Invalid XLA PrimitiveType"; "not a valid JAX array"
        return False
    return True


class JaxAdapter(DeviceAdapter, Diagnostics):
    """JAX arrays (immutable), on the host or a CUDA GPU."""

    immutable = True
    dlpack_on_host = False  # host arrays of any type enter through from_numpy (see there)
    peak_key = "peak_bytes_in_use"

    def version(self) -> str:
        return str(jax.__version__)

    def device_of(self, x: Any) -> Device:
        dev = next(iter(x.devices()))
        kind = _platform_kind(dev.platform)
        return CPU if kind == "cpu" else Device(kind, dev.id)

    def on_host(self, x: Any) -> bool:
        """Whether ``x`` lives in host memory (no device lookup while no GPU is visible)."""
        if self._gpus_visible is None:  # asked once: devices do not appear later
            self._gpus_visible = self.gpu_count() > 0
        return not self._gpus_visible or self.device_of(x).kind == "cpu"

    # an attribute, not a cached_property: that writes the instance's __dict__, which turns
    # every later attribute read of the adapter into a dictionary lookup (CPython 3.11)
    _gpus_visible: bool | None = None

    def gpu_count(self) -> int:
        return len(_gpu_devices())

    def devices(self) -> list[str]:
        return ["cpu"] + [f"cuda:{d.id} {d.device_kind}" for d in _gpu_devices()]

    def dlpack_version(self) -> str:
        return "1.0"

    def dtype_of(self, x: Any) -> np.dtype[Any]:
        dt = x.dtype  # a NumPy dtype already for jax.Array; np.dtype() only for other spellings
        return dt if isinstance(dt, np.dtype) else np.dtype(dt)

    def to_numpy(self, x: Any) -> np.ndarray[Any, Any]:
        return np.asarray(x)

    def from_numpy(self, a: np.ndarray[Any, Any], device: Device) -> Any:
        """``a`` as a JAX array; on the CPU it shares ``a``'s buffer where XLA can (below).

        Host buffers enter JAX through ``jax.device_put``, never ``jax.dlpack.from_dlpack``.
        Workaround: XLA releases a donated DLPack import (``jit(..., donate_argnums=...)``) on
        one of its worker threads; NumPy's DLPack deleter then takes the GIL from that thread,
        which aborts the interpreter when it races with shutdown ("terminate called without an
        active exception", exit 134, about half the runs with jax 0.10.2; the deleter/GIL
        contract: dmlc/dlpack#103, numpy/numpy#22507). ``device_put`` shares a 64-byte
        aligned, C-contiguous buffer just the same (O(1)), and JAX drops its reference only
        under the GIL; it copies other buffers itself. Every host source (torch, TensorFlow...)
        comes here through NumPy's view of its buffer: a TensorFlow tensor sharing a NumPy
        buffer, imported into JAX through DLPack and donated, aborts the same way.
        """
        fitted = _fit_dtype(base_ndarray(a))
        if not fitted.dtype.isnative or negative_strides(fitted):
            fitted = native_copy(fitted)
        return jax.device_put(fitted, _jax_device(device))

    def from_dlpack(self, x: Any, device: Device) -> Any:
        return jax.dlpack.from_dlpack(x)

    def dlpack_dtype_ok(self, dtype: np.dtype[Any]) -> bool:
        """False for 64-bit dtypes while x64 is off (jax would narrow them silently)."""
        return not _is_wide(dtype) or bool(_x64())

    def dlpack_export(self, x: Any, contiguous: bool, align: int) -> Any | None:
        if align > 1 and x.size and self.on_host(x) and x.unsafe_buffer_pointer() % align:
            return None
        return x

    def data_ptr(self, x: Any) -> int | None:
        return int(x.unsafe_buffer_pointer())

    def to_device(self, x: Any, device: Device) -> Any:
        return jax.device_put(x, _jax_device(device))

    def copy(self, x: Any) -> Any:
        return jnp.array(x, copy=True)

    def stack(self, arrays: Sequence[Any]) -> Any:
        return jnp.stack(list(arrays))

    def namespace(self) -> ModuleType | None:
        return jnp

    def synchronize(self, device: Device) -> None:
        _jax.effects_barrier()

    def stream(self, device: Device) -> AbstractContextManager[Any]:
        return nullcontext()  # XLA schedules its own streams

    def empty_cache(self) -> None:
        _jax.clear_caches()

    def memory_info(self, gpu_id: int) -> dict[str, int]:
        devs = _gpu_devices()
        if gpu_id >= len(devs):
            return {}
        stats = devs[gpu_id].memory_stats() or {}
        return {k: int(v) for k, v in stats.items() if isinstance(v, int)}

    def oom_errors(self) -> tuple[type[BaseException], ...]:
        return (RUNTIME_ERROR,)

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, RUNTIME_ERROR) and str(exc).startswith("RESOURCE_EXHAUSTED")

    def astype(self, x: Any, dtype: np.dtype[Any]) -> Any:
        return x.astype(dtype)

    def rint(self, x: Any) -> Any:
        return jnp.rint(x)

    def holds_dtype(self, dtype: np.dtype[Any]) -> bool:
        """False for 64-bit dtypes while x64 is off (jax would narrow them), and for extension
        dtypes that ``jax.numpy`` does not name."""
        if is_extension(dtype):
            return _holds_extension(dtype)
        return not _is_wide(dtype) or bool(_x64())

    def runtime_started(self) -> bool:
        """Whether JAX has started its backends (after which XLA client settings are fixed)."""
        from jax._src import (
            xla_bridge,  # private: the flag jax itself checks before backend options
        )

        return bool(xla_bridge.backends_are_initialized())

    def unsupported(self, x: Any) -> str | None:
        """Why ``x`` cannot leave JAX: arrays of extended dtypes (PRNG keys) hold no numbers."""
        if jnp.issubdtype(x.dtype, jax.dtypes.extended):
            return (f"a JAX array of extended dtype {x.dtype} (a PRNG key array) holds no "
                    "numbers; use jax.random.key_data(x).")
        return None

    def apply_setting(self, name: str, value: str) -> str:
        """``jax_enable_x64``: a run-time flag of the loaded JAX."""
        _jax.config.update(name, value == "true")
        return value
