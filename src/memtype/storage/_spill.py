"""TieredStore internals: its entries, its statistics, and moving arrays between a device,
host memory and raw ``.npy`` bytes."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtype.frameworks._protocol import Device
from memtype.storage.memory import nbytes_of


@dataclass(frozen=True)
class TieredStats:
    """A snapshot of a :class:`TieredStore`.

    Attributes
    ----------
    device_bytes, host_bytes, disk_bytes : int
        Bytes held in each tier.
    device_entries, host_entries, disk_entries : int
        Entries in each tier.
    in_use : int
        Entries currently acquired (never spilled).
    spills_to_host, spills_to_disk, reloads : int
        Moves down (device to host, device or host to disk) and back up, since creation.
    budget_bytes : int
        The device tier budget.
    host_budget_bytes : int or None
        The host tier budget (None: unlimited).
    """

    device_bytes: int
    host_bytes: int
    disk_bytes: int
    device_entries: int
    host_entries: int
    disk_entries: int
    in_use: int
    spills_to_host: int
    spills_to_disk: int
    reloads: int
    budget_bytes: int
    host_budget_bytes: int | None


class Entry:
    """One array: where it is now, and what it was when saved."""

    __slots__ = ("uid", "tier", "value", "memory_type", "device", "nbytes", "refs", "mtime",
                 "shape", "dtype")

    def __init__(self, uid: int, value: Any, memory_type: str, device: Device,
                 shape: tuple[int, ...], dtype: str) -> None:
        self.uid, self.value, self.memory_type, self.device = uid, value, memory_type, device
        self.shape, self.dtype = shape, dtype
        self.nbytes = nbytes_of(value)
        self.tier, self.refs, self.mtime = "device", 0, time.time()


def to_host(value: Any, memory_type: str, device: Device, pin: bool) -> Any:
    """A host copy of a device array: pinned torch memory for CUDA torch (if ``pin``), else
    a NumPy array (a view for arrays that already live in host memory)."""
    from memtype.frameworks import load_adapter

    if pin and memory_type == "torch" and device.kind == "cuda":
        import torch

        out = torch.empty(tuple(value.shape), dtype=value.dtype, pin_memory=True)
        out.copy_(value)
        return out
    return load_adapter(memory_type).to_numpy(value)


def reload(host: Any, memory_type: str, device: Device) -> Any:
    """A host copy brought back to ``device`` as a ``memory_type`` array."""
    if not isinstance(host, np.ndarray):  # a pinned torch tensor
        from memtype.frameworks import load_adapter

        return load_adapter("torch").to_device(host, device)
    import memtype

    gpu_id = device.index if device.is_gpu else None
    return memtype.convert(host, memory_type, gpu_id=gpu_id)


def to_raw(host: Any) -> np.ndarray[Any, Any]:
    """The bytes of a host array as a flat uint8 array (any dtype, bfloat16 included)."""
    if not isinstance(host, np.ndarray):  # a pinned torch tensor
        from memtype.frameworks import load_adapter

        host = load_adapter("torch").to_numpy(host)
    return np.ascontiguousarray(host).reshape(-1).view(np.uint8)


def from_raw(raw: np.ndarray[Any, Any], shape: tuple[int, ...], dtype: str) -> Any:
    """The host array that :func:`to_raw` flattened."""
    return raw.view(_dtype(dtype)).reshape(shape)


def _dtype(name: str) -> np.dtype[Any]:
    """A NumPy dtype from its name, ml_dtypes (bfloat16) included."""
    if name == "bfloat16":
        import ml_dtypes

        bf16: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
        return bf16
    return np.dtype(name)
