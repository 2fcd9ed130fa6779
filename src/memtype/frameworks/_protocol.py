"""The adapter contract: what every adapter module defines, and the optional groups.

Adapters are plain modules, checked structurally. :class:`Adapter` lists what every adapter
must define. The optional groups (:class:`DtypeOps`, :class:`Streams`, :class:`GPUHooks`...)
are sub-protocols; :mod:`memtype.frameworks._hooks` is the ONE place that asks whether an
adapter has one and supplies the default when it does not, so callers never ``getattr``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal, Protocol, overload

import numpy as np

from memtype.errors import DeviceError

__all__ = [
    "Adapter", "Device", "CPU", "GPU_KIND", "managed_gpu", "DeviceProperties",
    "DtypeOps", "ReadOnlyView", "HostCheck", "Streams", "DeviceContext", "Diagnostics",
    "GPUHooks", "DtypeParsing", "HoldsDtype", "Runtime", "Configurable", "gpu_index",
]

GPU_KIND = "cuda"
"""The accelerator kind memtype's GPU manager enumerates (NVML, ``CUDA_VISIBLE_DEVICES``).

Pools, memory caps, ``memory_pressure``, peak counters and stream hand-offs act on devices of
this kind ("managed GPUs"). Other accelerator kinds (OpenCL) are reached only through their
adapter. Outside ``memtype.frameworks`` code asks :attr:`Device.is_managed_gpu` or
:attr:`~memtype.frameworks.Framework.managed_gpu`, never the literal."""


@dataclass(frozen=True, order=True)
class Device:
    """Where an array lives.

    ``kind`` is ``"cpu"`` or an accelerator kind of the table (``"cuda"``, ``"opencl"``);
    ``index`` the device's ordinal.
    """

    kind: str
    index: int = 0

    @property
    def is_gpu(self) -> bool:
        """True for any accelerator (CUDA or OpenCL) device."""
        return self.kind != "cpu"

    @property
    def is_managed_gpu(self) -> bool:
        """True for a device the GPU manager lists (see :data:`GPU_KIND`)."""
        return self.kind == GPU_KIND

    def __str__(self) -> str:
        return "cpu" if self.kind == "cpu" else f"{self.kind}:{self.index}"


CPU = Device("cpu", 0)


@overload
def gpu_index(value: object, *, allow_none: Literal[False]) -> int: ...


@overload
def gpu_index(value: object, *, allow_none: bool = True) -> int | None: ...


def gpu_index(value: object, *, allow_none: bool = True) -> int | None:
    """The one parser of a ``gpu_id`` argument, returned as a Python int: ``None`` (where
    allowed), a non-negative integer (a Python int or a NumPy integer, never a bool), a
    managed GPU's name (``"cuda:0"``) or its :class:`Device` (``Device("cuda", 0)``).

    Raises
    ------
    DeviceError
        Anything else, naming what was received.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, Device) and value.kind == GPU_KIND:
        return value.index
    if isinstance(value, str):
        kind, _, digits = value.partition(":")
        if kind == GPU_KIND and digits.isdigit() and digits.isascii():
            return int(digits)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 0:
        expected = (f"a non-negative int, '{GPU_KIND}:<index>' or Device('{GPU_KIND}', <index>)"
                    + (" or None" if allow_none else ""))
        raise DeviceError(f"gpu_id must be {expected}; received {value!r}.")
    return int(value)


def managed_gpu(index: int) -> Device:
    """The managed GPU with ordinal ``index`` (see :data:`GPU_KIND`)."""
    return Device(GPU_KIND, index)


@dataclass(frozen=True)
class DeviceProperties:
    """One managed GPU as a framework describes it (:meth:`GPUHooks.device_properties`).

    ``total_bytes`` / ``free_bytes`` are 0 where the framework does not say;
    ``compute_capability`` None and ``uuid`` ``""`` likewise.
    """

    name: str
    total_bytes: int
    free_bytes: int
    compute_capability: tuple[int, int] | None = None
    uuid: str = ""


class Adapter(Protocol):
    """What every adapter module defines. ``x`` is always the framework's own array.

    Module constants are optional (defaults in :func:`memtype.frameworks._hooks.rules`):
    ``HOST_NATIVE`` (its host arrays are NumPy's; default False), ``DLPACK_ON_HOST`` (host
    arrays may enter by DLPack; True), ``DLPACK_CONTIGUOUS`` (its DLPack import needs
    C-contiguous data; True), ``DLPACK_ALIGN`` (byte alignment it needs; 1),
    ``DLPACK_ANY_DTYPE`` (skip the dtype check; False), ``PEAK_KEY`` (the :func:`memory_info`
    key that is a resettable-or-not peak; None: no peak).
    """

    def version(self) -> str:
        """The framework's version string."""

    def device_of(self, x: Any) -> Device:
        """The device ``x`` lives on."""

    def gpu_count(self) -> int:
        """How many CUDA (or OpenCL, for OpenCL frameworks) devices the framework sees."""

    def devices(self) -> list[str]:
        """Human-readable names of the framework's devices (may start its runtime)."""

    def dlpack_version(self) -> str:
        """The highest DLPack version the framework speaks, or ``""``."""

    def dtype_of(self, x: Any) -> np.dtype[Any]:
        """``x``'s dtype as a NumPy dtype (bfloat16 as ``ml_dtypes.bfloat16``)."""

    def shape_of(self, x: Any) -> tuple[int, ...]:
        """``x``'s shape as a tuple of ints."""

    def to_numpy(self, x: Any) -> np.ndarray[Any, Any]:
        """A host view of ``x`` when it lives on the host (zero-copy where possible);
        else a copy."""

    def from_numpy(self, a: np.ndarray[Any, Any], device: Device) -> Any:
        """An array on ``device`` holding ``a``'s values; shares ``a``'s memory where safe."""

    def from_dlpack(self, x: Any, device: Device) -> Any:
        """Zero-copy import of a DLPack producer already on ``device`` (caller checked layout)."""

    def dlpack_dtype_ok(self, dtype: np.dtype[Any]) -> bool:
        """Whether :func:`from_dlpack` keeps ``dtype`` exactly (else the host path is taken)."""

    def dlpack_export(self, x: Any, contiguous: bool, align: int) -> Any | None:
        """``x`` ready to hand to a consumer needing that layout, or None if it must be copied."""

    def data_ptr(self, x: Any) -> int | None:
        """The address of ``x``'s first element, or None where the framework hides it."""

    def to_device(self, x: Any, device: Device) -> Any:
        """``x`` moved (or copied) to ``device`` within the framework."""

    def copy(self, x: Any) -> Any:
        """A private copy of ``x`` on the same device."""

    def stack(self, arrays: Sequence[Any]) -> Any:
        """Stack same-shape arrays (all already on one device) along a new first axis."""

    def namespace(self) -> ModuleType | None:
        """A NumPy-like namespace (``numpy``, ``cupy``, ``jax.numpy``...), or None."""

    def synchronize(self, device: Device) -> None:
        """Wait for all work queued on ``device``."""

    def stream(self, device: Device) -> AbstractContextManager[Any]:
        """A context manager running the framework's work on this thread's stream on ``device``."""

    def empty_cache(self) -> None:
        """Free the framework's cached-but-unused device memory."""

    def memory_info(self, gpu_id: int) -> dict[str, int]:
        """What the framework holds on GPU ``gpu_id`` in bytes (keys are framework-specific)."""

    def oom_errors(self) -> tuple[type[BaseException], ...]:
        """Exception types that mean the framework ran out of device memory."""



# -- optional groups: an adapter defines all of a group's functions, or none -----------------

class Runtime(Protocol):
    """Defaults: the runtime counts as started (nothing to start); every ``oom_errors``
    instance is an out-of-memory error."""

    def runtime_started(self) -> bool:
        """Whether the framework's device runtime is already initialised (asking starts nothing)."""

    def is_oom(self, exc: BaseException) -> bool:
        """Whether ``exc`` (one of :func:`oom_errors`) really is an out-of-memory error."""


class DtypeOps(Protocol):
    """Casting on the device (frameworks with a :func:`Adapter.namespace`).

    Default: none; dtype policies then go through NumPy (``holds_dtype``: every dtype)."""

    def astype(self, x: Any, dtype: np.dtype[Any]) -> Any:
        """``x`` cast to ``dtype`` (C semantics) on its device."""

    def rint(self, x: Any) -> Any:
        """``x`` rounded half to even, same dtype."""


class HoldsDtype(Protocol):
    """Default: the framework holds every dtype NumPy has."""

    def holds_dtype(self, dtype: np.dtype[Any]) -> bool:
        """Whether the framework can hold ``dtype`` exactly."""


class ReadOnlyView(Protocol):
    """Default: none (read-only data is copied instead of viewed)."""

    def readonly_view(self, x: Any) -> Any:
        """An O(1) view of ``x`` that refuses writes."""


class HostCheck(Protocol):
    """Default: ``not device_of(x).is_gpu``."""

    def on_host(self, x: Any) -> bool:
        """Whether ``x`` lives in host memory (a fast check)."""


class Streams(Protocol):
    """CUDA-style per-thread streams (used on managed GPUs). Default: none (no hand-off)."""

    def current_stream(self, device: Device) -> Any:
        """The stream current on ``device`` in this thread."""

    def wait_stream(self, waiter: Any, producer: Any) -> None:
        """Make ``waiter`` wait for the work queued so far on ``producer``."""

    def record_stream(self, x: Any, stream: Any) -> None:
        """Tell the allocator that ``stream`` uses ``x``'s memory."""


class DeviceContext(Protocol):
    """Default: none (a GPU-only call without a ``gpu_id`` runs on GPU 0)."""

    def current_device(self) -> int:
        """The ordinal of the framework's current device context."""


class Diagnostics(Protocol):
    """Explanations. Defaults: every array convertible; no reason; no runtime line."""

    def unsupported(self, x: Any) -> str | None:
        """Why ``x`` can never leave its framework, or None."""

    def no_device_reason(self) -> str:
        """Why the framework sees no device (``""`` when it does)."""

    def runtime_info(self) -> str:
        """One line describing the framework's runtime, for ``memtype info``."""


class GPUHooks(Protocol):
    """Behaviour on managed GPUs, each function optional on its own. Defaults: not supported."""

    def device_properties(self, index: int) -> DeviceProperties:
        """Describe managed GPU ``index`` (may start the framework's runtime on it)."""

    def set_memory_cap(self, gpu_id: int, limit_bytes: int | None, total_bytes: int) -> None:
        """Cap (None: uncap) what the framework's allocator may hold on GPU ``gpu_id``."""

    def reset_peak(self, gpu_id: int) -> None:
        """Reset the framework's peak-memory counter on GPU ``gpu_id``."""

    def timing_events(self) -> tuple[Any, Any] | None:
        """A recorded start event and an unrecorded end event (``record``, ``synchronize``,
        ``elapsed_time`` in ms), or None while the runtime has not started."""

    def pinned_host_copy(self, x: Any) -> Any | None:
        """A copy of device array ``x`` in pinned host memory (the framework's own array,
        readable by :func:`Adapter.to_numpy` and :func:`Adapter.to_device`), or None."""


class Configurable(Protocol):
    """Default: none (a setting's environment variable is all there is)."""

    def apply_setting(self, name: str, value: str) -> str:
        """Apply the row's non-start-up setting ``name`` (spelled ``value``) to the loaded
        framework; what was applied, or ``"already in effect"``. Raises
        :class:`~memtype.errors.ConfigurationError` where it can no longer be applied."""


class DtypeParsing(Protocol):
    """Default: none (only NumPy dtype-likes are understood)."""

    def parse_dtype(self, dtype: object) -> np.dtype[Any] | None:
        """The NumPy dtype of one of the framework's dtype objects, or None if not one."""

