"""What every adapter module provides (a structural protocol; adapters are plain modules)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

import numpy as np

__all__ = ["Adapter", "Device", "CPU"]


@dataclass(frozen=True, order=True)
class Device:
    """Where an array lives.

    ``kind`` is ``"cpu"``, ``"cuda"`` or ``"opencl"``; ``index`` the device's ordinal.
    """

    kind: str
    index: int = 0

    @property
    def is_gpu(self) -> bool:
        """True for any accelerator (CUDA or OpenCL) device."""
        return self.kind != "cpu"

    def __str__(self) -> str:
        return "cpu" if self.kind == "cpu" else f"{self.kind}:{self.index}"


CPU = Device("cpu", 0)


class Adapter(Protocol):
    """The functions an adapter module defines. ``x`` is always the framework's own array.

    Module constants: ``HOST_NATIVE`` (its arrays are NumPy's), ``DLPACK_CONTIGUOUS`` and
    ``DLPACK_ALIGN`` (what its DLPack import needs), ``DLPACK_ANY_DTYPE`` (no dtype check).
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

    def on_host(self, x: Any) -> bool:
        """Whether ``x`` lives in host memory (a fast check)."""

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

    def runtime_started(self) -> bool:
        """Whether the framework's device runtime is already initialised (asking starts nothing)."""

    def is_oom(self, exc: BaseException) -> bool:
        """Whether ``exc`` (one of :func:`oom_errors`) really is an out-of-memory error."""
