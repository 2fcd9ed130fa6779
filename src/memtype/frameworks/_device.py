"""Where arrays live: :class:`Device`, the host :data:`CPU`, managed GPUs and the one parser of a
``gpu_id`` argument; :class:`DeviceProperties`, one GPU as a framework describes it."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Literal, overload

from memtype.errors import DeviceError

__all__ = ["Device", "CPU", "GPU_KIND", "managed_gpu", "DeviceProperties", "gpu_index"]

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
    """One managed GPU as a framework describes it (:meth:`Adapter.device_properties`).

    ``total_bytes`` / ``free_bytes`` are 0 where the framework does not say;
    ``compute_capability`` None and ``uuid`` ``""`` likewise.
    """

    name: str
    total_bytes: int
    free_bytes: int
    compute_capability: tuple[int, int] | None = None
    uuid: str = ""
