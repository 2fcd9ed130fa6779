"""TieredStore internals: its entries, its statistics, and moving arrays between a device,
host memory and raw ``.npy`` bytes."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import weakref
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

import memtype
from memtype import detect_memory_type
from memtype.errors import StoreFormatError
from memtype.frameworks import Device, DeviceAdapter, PinnedSpills, data_nbytes, load_adapter
from memtype.storage._atomic import atomic_write
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
    spill_failures : int
        Spills that could not be written (a full disk) by calls that do not raise for it
        (``load``, ``release``, ``copy``); the entries stayed where they were.
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
    spill_failures: int = 0


class Entry:
    """One array: where it is now, and what it was when saved."""

    __slots__ = ("uid", "tier", "value", "memory_type", "device", "nbytes", "refs", "mtime",
                 "shape", "dtype", "spilled", "disk_ok")

    def __init__(self, uid: int, value: Any, memory_type: str, device: Device,
                 shape: tuple[int, ...], dtype: str) -> None:
        self.uid, self.value, self.memory_type, self.device = uid, value, memory_type, device
        self.shape, self.dtype = shape, dtype
        self.nbytes = nbytes_of(value)
        self.tier, self.refs, self.mtime = "device", 0, time.time()
        self.spilled: Spilled | None = None  # set while the entry is in the disk tier
        self.disk_ok = spillable(value)  # False: never written to disk (Python objects)


def to_host(value: Any, memory_type: str, device: Device, pin: bool) -> Any:
    """A host copy of a device array: the framework's own pinned host array where its adapter
    has ``pinned_host_copy`` (if ``pin``), else a NumPy array (a view for arrays that already
    live in host memory)."""
    adapter = load_adapter(memory_type)
    out = adapter.pinned_host_copy(value) if pin and device.is_gpu and isinstance(
        adapter, PinnedSpills) else None
    return adapter.to_numpy(value) if out is None else out


def reload(host: Any, memory_type: str, device: Device) -> Any:
    """A host copy brought back to ``device`` as a ``memory_type`` array."""
    if isinstance(host, np.ndarray) and not device.is_gpu and load_adapter(
            memory_type).host_native:
        return host  # already what was saved (a masked array keeps its mask)
    if not isinstance(host, np.ndarray):  # a pinned host array of the framework's own
        adapter = load_adapter(memory_type)  # made by its pinned_host_copy: a DeviceAdapter
        return adapter.to_device(host, device) if isinstance(adapter, DeviceAdapter) else host

    gpu_id = device.index if device.is_gpu else None
    return memtype.convert(host, memory_type, gpu_id=gpu_id)


@dataclass(frozen=True)
class Spilled:
    """Where a spilled array went and how to rebuild it: its file (and that file's identity
    when written: device, inode, size, modification time), dtype, shape and mask."""

    name: str
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    masked: bool
    fill_value: Any
    identity: tuple[int, int, int, int]


def _parts(host: np.ndarray[Any, Any]) -> list[np.ndarray[Any, Any]]:
    """The bytes to write for a host array: its data, then its mask if it has one."""
    data = np.ascontiguousarray(np.ma.getdata(host)).reshape(-1).view(np.uint8)
    if not isinstance(host, np.ma.MaskedArray):
        return [data]
    mask = np.ascontiguousarray(np.ma.getmaskarray(host)).reshape(-1).view(np.uint8)
    return [data, mask]


def spillable(value: Any) -> bool:
    """Whether a host array can be written as raw bytes (no Python objects inside)."""
    return not (isinstance(value, np.ndarray) and value.dtype.hasobject)


class SpillFiles:
    """One store's spill files: a private directory made with ``mkdtemp`` under
    ``spill_dir`` (unique across stores and processes), removed when the store is garbage
    collected or the process exits. A file is read back only if it is still the very file
    this store wrote (same inode, size and modification time)."""

    def __init__(self, parent: str) -> None:
        os.makedirs(parent, exist_ok=True)
        self.directory = tempfile.mkdtemp(prefix=".memtype-spill-", dir=parent)
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.directory, True)

    def write(self, uid: int, host: Any) -> Spilled:
        """Write a host array (NumPy, masked, or a framework's pinned host array) to a file."""
        if not isinstance(host, np.ndarray):  # a pinned host array (see to_host)
            host = load_adapter(detect_memory_type(host)).to_numpy(host)
        parts = _parts(host)
        name = f"{uid}.raw"
        path = os.path.join(self.directory, name)

        def write(fh: BinaryIO) -> None:
            """The array's bytes, then its mask's."""
            for part in parts:
                fh.write(part.data)

        atomic_write(path, write, overwrite=True)
        st = os.stat(path, follow_symlinks=False)
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        masked = isinstance(host, np.ma.MaskedArray)
        fill = host.fill_value if masked else None
        return Spilled(name, host.dtype, tuple(host.shape), masked, fill, identity)

    def read(self, spilled: Spilled) -> Any:
        """The array in a file this store wrote; StoreFormatError if it was replaced."""
        path = os.path.join(self.directory, spilled.name)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != spilled.identity:
                raise StoreFormatError(
                    f"Spill file {path!r} is not the file this TieredStore wrote (replaced or "
                    "changed by someone else); refusing to read it.")
            raw = np.empty(st.st_size, np.uint8)
            if fh.readinto(raw.data) != st.st_size:
                raise StoreFormatError(f"Spill file {path!r} was truncated while reading.")
        count = data_nbytes(spilled.shape, spilled.dtype)
        data = raw[:count].view(spilled.dtype).reshape(spilled.shape)
        if not spilled.masked:
            return data
        mask = raw[count:].view(np.bool_).reshape(spilled.shape)
        return np.ma.MaskedArray(data, mask=mask, fill_value=spilled.fill_value)

    def delete(self, spilled: Spilled) -> None:
        """Remove a spill file (already gone is fine: nothing to free)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self.directory, spilled.name))
