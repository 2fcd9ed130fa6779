"""TieredStore: arrays kept on their own device up to a byte budget, spilled to host, then disk.

>>> from memtype.storage import TieredStore
>>> cache = TieredStore(budget_bytes=4 << 30, spill_dir="/scratch/spill")   # doctest: +SKIP
>>> cache.save(torch_cuda_tensor, "step3/A01", parents=True)                # stays in VRAM
>>> with cache.borrowed("step3/A01") as x:                                  # resident while used
...     y = model(x)

Tiers
-----
``device``
    The array as saved: same framework, same device (a CUDA tensor stays in VRAM, a NumPy
    array in host memory), no conversion. Saving copies it (``copy=False`` keeps a
    reference).
``host``
    Spilled GPU arrays: a pinned host copy for CUDA torch tensors (``pin_memory=True``),
    otherwise a NumPy copy held in a :class:`~memtype.storage.MemoryStore`.
``disk``
    Spilled arrays as raw files in a private directory that each store makes under
    ``spill_dir`` (unique across stores and processes, removed with the store). A store
    reads back only the very files it wrote. Arrays holding Python objects are never
    written to disk: they stay in host memory.

A ``save`` that cannot make room (the spill disk is full) raises ``StoreFullError`` and
leaves the store exactly as it was; a ``load`` that cannot make room still returns the
array, leaving the entry in its lower tier (counted in ``stats().spill_failures``).

When the device tier holds more than ``budget_bytes``, or ``pressure(gpu_id)`` reaches
``pressure_threshold``, the least recently used entries that are not in use move down: GPU
arrays to the host tier (if ``host_budget_bytes`` is not 0), host-resident arrays (which
already live in host memory) to disk; the host tier overflows to disk past
``host_budget_bytes``. Without a place to go, an entry stays where it is. ``load`` brings an
entry back to the device and framework it was saved with. Entries held with
:meth:`TieredStore.acquire` (or :meth:`TieredStore.borrowed`) are never spilled until
released. :meth:`TieredStore.stats` reports bytes and entries per tier, spills and reloads.

The default ``pressure`` is :func:`memtype.gpu.device_pressure`, consulted for entries on an
accelerator of any kind whose framework reports the device's sizes (a CUDA GPU, a plug-in
accelerator; not pyclesperanto's OpenCL devices, which report none: the budget alone applies
there); a callable passed in is consulted for every candidate (its argument is the
candidate's GPU index, or None for host-resident entries), which lets tests and callers
drive eviction directly.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from memtype import gpu  # its memory statistics (psutil) load when a device entry is checked
from memtype.errors import InvalidArgumentError, StoreFormatError, StoreUsageError
from memtype.frameworks import Device, known_names, load_adapter
from memtype.storage._spill import Entry as _Entry
from memtype.storage._spill import TieredStats, reload
from memtype.storage._tiers import Tiers
from memtype.storage.base import PathLike, StoreStat, check_type
from memtype.storage.memory import TreeStore, array_info, copy_value, writable_copy

__all__ = ["TieredStore", "TieredStats"]

PressureFn = Callable[[int | None], float]


def _device_of(value: Any, memory_type: str) -> Device:
    """The device an array lives on."""
    return load_adapter(memory_type).device_of(value)


def _framework_names() -> str:
    """The memory types in the framework table, for messages ("numpy, torch or mlx")."""
    *rest, last = known_names()
    return f"{', '.join(rest)} or {last}" if rest else last


def _check_arguments(budget_bytes: object, host_budget_bytes: object, spill_dir: object,
                     pressure: object, pressure_threshold: Any, pin_memory: object) -> None:
    """ArgumentTypeError or InvalidArgumentError for a constructor argument memtype cannot
    use (the budgets' signs are checked by the caller)."""
    check_type("budget_bytes", budget_bytes, int, "an int (bytes)")
    if host_budget_bytes is not None:
        check_type("host_budget_bytes", host_budget_bytes, int, "an int (bytes) or None")
    if spill_dir is not None:
        check_type("spill_dir", spill_dir, (str, os.PathLike), "a str, os.PathLike or None")
    if pressure is not None and not callable(pressure):
        check_type("pressure", pressure, type(None), "a callable pressure(gpu_id) or None")
    check_type("pressure_threshold", pressure_threshold, (int, float), "a float in [0, 1]")
    check_type("pin_memory", pin_memory, bool, "a bool")
    if not 0.0 <= pressure_threshold <= 1.0:
        raise InvalidArgumentError(
            f"pressure_threshold must be in [0, 1] (a fraction of the device's memory); "
            f"received {pressure_threshold!r}.")


def _freeze(value: Any) -> Any:
    """NumPy arrays owned by the store are read-only."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    return value


class TieredStore(TreeStore):
    """An array cache with a device tier, a host tier and an optional disk tier.

    Parameters
    ----------
    budget_bytes : int
        Most bytes the device tier holds before spilling (pinned entries may exceed it).
    host_budget_bytes : int, optional
        Most bytes of the host tier before it spills to disk; None for no limit, 0 for no
        host tier (GPU arrays then spill straight to disk).
    spill_dir : str or os.PathLike, optional
        Directory of the disk tier; without it nothing is spilled to disk.
    pressure : callable, optional
        ``pressure(gpu_id) -> float`` in [0, 1]; default :func:`memtype.gpu.device_pressure`.
    pressure_threshold : float
        Spill while ``pressure`` is at or above this.
    pin_memory : bool
        Use pinned host memory for spilled CUDA torch tensors.
    read_only : bool
        Refuse writes and deletes.
    """

    registry_name = "tiered"
    device = "device"

    def __init__(self, budget_bytes: int, *, host_budget_bytes: int | None = None,
                 spill_dir: PathLike | None = None, pressure: PressureFn | None = None,
                 pressure_threshold: float = 0.9, pin_memory: bool = True,
                 read_only: bool = False) -> None:
        super().__init__(read_only=read_only)
        _check_arguments(budget_bytes, host_budget_bytes, spill_dir, pressure,
                         pressure_threshold, pin_memory)
        if budget_bytes < 0 or (host_budget_bytes is not None and host_budget_bytes < 0):
            raise StoreUsageError(
                f"Budgets must be >= 0 bytes; received budget_bytes={budget_bytes}, "
                f"host_budget_bytes={host_budget_bytes}."
            )
        self.budget_bytes, self.host_budget_bytes = budget_bytes, host_budget_bytes
        self.spill_dir = os.fspath(spill_dir) if spill_dir is not None else None
        self.pressure, self.pressure_threshold = pressure, float(pressure_threshold)
        self.pin_memory = pin_memory
        self._tiers = Tiers(self.spill_dir)
        self._next_uid = 0

    def params(self) -> dict[str, Any]:
        """Constructor arguments (the contents are not part of them)."""
        return {"budget_bytes": self.budget_bytes, "host_budget_bytes": self.host_budget_bytes,
                "spill_dir": self.spill_dir, "pressure": self.pressure,
                "pressure_threshold": self.pressure_threshold, "pin_memory": self.pin_memory,
                "read_only": self.read_only}

    # -- save / load ----------------------------------------------------------------------
    def save(self, data: Any, path: PathLike, *, overwrite: bool = False,
             parents: bool = False, copy: bool = True) -> None:
        """Keep ``data`` (an array of any framework) on its device under ``path``.

        Parameters
        ----------
        data : array
            An array of any framework in the table (``memtype.frameworks.known_names()``).
        path : str or os.PathLike
            Destination key.
        overwrite, parents : bool
            See :meth:`Store.save`.
        copy : bool
            Store a private copy on the same device (default) rather than a reference.

        Raises
        ------
        StoreFormatError
            ``data`` is not an array of a supported framework.
        """
        self._require_writable("save", path)
        key = self.key(path)
        info = array_info(data)
        if info is None:
            raise StoreFormatError(
                f"Cannot save {type(data).__name__} to {key!r}: a TieredStore holds arrays; "
                f"expected an array of {_framework_names()}."
            )
        with self._lock:
            self._tree.check_put(key, overwrite, parents)
        value = copy_value(data) if copy else data
        with self._lock:
            entry = _Entry(self._next_uid, value, info[0], _device_of(value, info[0]),
                           info[1], info[2])
            self._next_uid += 1
            self._put_entry(key, entry, overwrite, parents)

    def _put_entry(self, key: str, entry: _Entry, overwrite: bool, parents: bool) -> None:
        """Store ``entry`` and make room for it; if room cannot be made, undo everything."""
        made = self._missing_dirs(key)
        old = self._tree.put(key, entry, overwrite, parents)
        tiers = self._tiers
        if old is not None:
            tiers.unplace(old)  # out of the tiers, its data kept until the save succeeds
        tiers.place(entry, "device")
        try:
            self._enforce(entry)
        except BaseException:
            tiers.unplace(entry)
            entry.value = None
            if old is None:
                self._tree.remove(key)
                for directory in made:
                    self._tree.remove(directory)
            else:
                self._tree.files[key] = old
                tiers.place(old, old.tier)
            raise
        if old is not None:
            tiers.drop_copy(old, old.tier)
            old.value = None

    def _missing_dirs(self, key: str) -> list[str]:
        """Ancestors of ``key`` that do not exist yet, deepest first."""
        missing = []
        parent = key.rpartition("/")[0]
        while parent and not self._tree.is_dir(parent):
            missing.append(parent)
            parent = parent.rpartition("/")[0]
        return missing

    def load(self, path: PathLike, *, copy: bool = False) -> Any:
        """The array at ``path`` on the device and in the framework it was saved with.

        Parameters
        ----------
        path : str or os.PathLike
            The key.
        copy : bool
            Return a private copy (writable where the framework allows).
        """
        with self._lock:
            entry = self._tree.get(self.key(path))
            value = self._resident(entry)
        return writable_copy(value) if copy else value

    def acquire(self, path: PathLike) -> Any:
        """Load ``path`` and keep it resident on its device until :meth:`release`."""
        with self._lock:
            entry = self._tree.get(self.key(path))
            value = self._resident(entry)
            entry.refs += 1
            return value

    def release(self, path: PathLike) -> None:
        """Undo one :meth:`acquire`; the entry may be spilled again once no longer in use.

        Raises
        ------
        StoreUsageError
            ``path`` is not acquired (also a ``ValueError``).
        """
        with self._lock:
            entry = self._tree.get(self.key(path))
            if entry.refs == 0:
                raise StoreUsageError(
                    f"release({self.key(path)!r}) without a matching acquire; expected an "
                    "entry in use (reference count 0 received)."
                )
            entry.refs -= 1
            if entry.refs == 0:
                self._try_enforce(None)

    @contextlib.contextmanager
    def borrowed(self, path: PathLike) -> Iterator[Any]:
        """``with store.borrowed(path) as x:`` -- :meth:`acquire` and :meth:`release`."""
        value = self.acquire(path)
        try:
            yield value
        finally:
            self.release(path)

    def stat(self, path: PathLike) -> StoreStat:
        key = self.key(path)
        with self._lock:
            self._tree.require_exists(key)
            if self._tree.is_dir(key):
                return StoreStat(key, True, 0)
            e = self._tree.get(key)
            return StoreStat(key, False, e.nbytes, e.mtime, e.shape, e.dtype)

    def tier_of(self, path: PathLike) -> str:
        """Which tier holds ``path`` now: ``"device"``, ``"host"`` or ``"disk"``."""
        with self._lock:
            return str(self._tree.get(self.key(path)).tier)

    def stats(self) -> TieredStats:
        """Bytes and entries per tier, spills and reloads."""
        with self._lock:
            in_use = sum(1 for e in self._tree.files.values() if e.refs)
            return self._tiers.stats(in_use, self.budget_bytes, self.host_budget_bytes)

    def trim(self) -> None:
        """Spill now, as a save would, until the budgets and the pressure are met.

        Raises
        ------
        StoreFullError
            The spill disk is full; entries that could not be spilled stay where they are.
        """
        with self._lock:
            self._enforce(None)

    # -- the policy: what moves, and when (under the lock; see _tiers) ---------------------
    def _resident(self, entry: _Entry) -> Any:
        """The entry's array on its device, reloading it if it was spilled. When no room can
        be made for it (a full spill disk), the entry stays in its tier and the reloaded
        array is returned all the same."""
        tiers = self._tiers
        if entry.tier == "device":
            tiers.lru["device"].move_to_end(entry.uid)
            return entry.value
        tier = entry.tier
        value = _freeze(reload(tiers.spilled_value(entry), entry.memory_type, entry.device))
        tiers.move(entry, "device", value)
        if not self._try_enforce(entry):
            tiers.move(entry, tier, None)
            return value
        tiers.drop_copy(entry, tier)
        tiers.counts["reloads"] += 1
        return value

    def _try_enforce(self, keep: _Entry | None) -> bool:
        """:meth:`_enforce`, counting (not raising) a spill that cannot be written."""
        try:
            self._enforce(keep)
        except OSError:  # a full or failing spill disk: every entry is still intact
            self._tiers.counts["spill_failures"] += 1
            return False
        return True

    def _enforce(self, keep: _Entry | None) -> None:
        """Spill least recently used entries until budgets and pressure are satisfied."""
        tiers = self._tiers
        for entry in list(tiers.lru["device"].values()):
            if entry is keep or entry.refs or not self._device_over(entry):
                continue
            pressure_only = tiers.bytes["device"] <= self.budget_bytes
            self._spill_device(entry)
            if pressure_only and entry.device.is_gpu and self.pressure is None:
                self._return_cached(entry)
        if self.host_budget_bytes is None or tiers.spiller() is None:
            return
        for entry in list(tiers.lru["host"].values()):
            if tiers.bytes["host"] <= self.host_budget_bytes:
                break
            if entry.disk_ok:
                tiers.to_disk(entry)

    def _device_over(self, candidate: _Entry) -> bool:
        """Whether the device tier must shed ``candidate`` (over budget or under pressure)."""
        if self._tiers.bytes["device"] > self.budget_bytes:
            return True
        if self.pressure is not None:
            gpu_id = candidate.device.index if candidate.device.is_gpu else None
            return float(self.pressure(gpu_id)) >= self.pressure_threshold
        if not candidate.device.is_gpu:
            return False
        used = gpu.device_pressure(candidate.device)  # None: its framework reports no sizes
        return used is not None and used >= self.pressure_threshold

    @staticmethod
    def _return_cached(entry: _Entry) -> None:
        """Hand the memory a pressure spill freed back to the device: a caching allocator
        (torch, CuPy) would keep it, the device would stay as full, and every other entry
        would follow. Only under pressure, where the device is short anyway."""
        gpu.cleanup(entry.memory_type, entry.device.index)

    def _spill_device(self, entry: _Entry) -> None:
        """Move one device entry to the host tier (GPU arrays) or to disk."""
        if entry.device.is_gpu and self.host_budget_bytes != 0:
            self._tiers.to_host(entry, self.pin_memory)
        elif self._tiers.spiller() is not None and entry.disk_ok:
            self._tiers.to_disk(entry)

    def copy(self, src: PathLike, dst: PathLike, *, overwrite: bool = False,
             parents: bool = False) -> None:
        with self._lock:
            super().copy(src, dst, overwrite=overwrite, parents=parents)
            self._try_enforce(None)

    # -- TreeStore hooks -----------------------------------------------------------------
    def _released(self, key: str, entry: Any) -> None:
        self._tiers.release(entry)

    def _duplicate(self, entry: Any) -> Any:
        value = copy_value(self._resident(entry))
        twin = _Entry(self._next_uid, value, entry.memory_type, entry.device, entry.shape,
                      entry.dtype)
        self._next_uid += 1
        self._tiers.place(twin, "device")
        return twin
