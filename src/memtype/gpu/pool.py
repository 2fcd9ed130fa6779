"""Budgets and pools: allocate arrays of any memory type, tracked by source, within a budget.

:class:`GPUMemoryManager` allocates zero-filled arrays (NumPy zeros passed through
:func:`memtype.convert`: shared for host types, one host-to-device copy for GPU types),
reference counts them, reports what each source label holds, and refuses allocations beyond
its budget. :class:`GPUMemoryPool` is a manager bound to one device that can also cap what
cupy and torch cache there.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from memtype._renamed import renamed_argument
from memtype.conversion import convert, target_device
from memtype.errors import (
    AllocationKeyError,
    ArgumentTypeError,
    DeviceError,
    InvalidArgumentError,
    MemoryBudgetError,
)
from memtype.frameworks import (
    CPU,
    Device,
    data_nbytes,
    get_framework,
    gpu_index,
    managed_gpu,
)
from memtype.gpu._budget import (
    Allocation,
    as_dtype,
    as_shape,
    check_limit,
    device_total,
    empty_caches,
)
from memtype.gpu.cache import measure_nbytes
from memtype.gpu.devices import GpuId, as_device, get_gpu_manager
from memtype.gpu.memory import cap_framework_memory
from memtype.types import MemoryTypeLike

__all__ = ["GPUMemoryManager", "GPUMemoryPool", "get_gpu_memory_pool"]


class GPUMemoryManager:
    """Allocate arrays of any memory type, tracked by source label and reference counted.

    Parameters
    ----------
    limit_bytes : int, optional
        The most this manager may hold on any one device.
    max_memory_fraction : float, optional
        The most this manager may hold on a device, as a fraction (0, 1] of its total memory
        (host memory for host arrays; not applied to OpenCL devices, whose total is unknown).
    gpu_id : int, str or Device, optional
        The default ``gpu_id`` of :meth:`allocate` (``0``, ``"cuda:0"`` or
        ``Device("cuda", 0)``).

    Notes
    -----
    The manager keeps a reference to every array it allocated until :meth:`release` drops its
    count to zero; the memory is freed once the caller's references are gone too.

    Examples
    --------
    >>> manager = GPUMemoryManager(limit_bytes=1 << 20)
    >>> with manager.memory_context():
    ...     a = manager.allocate((256, 256), "float32", "numpy", source="tiles")
    >>> manager.stats()  # released on exit
    {}
    """

    def __init__(self, *, limit_bytes: int | None = None,
                 max_memory_fraction: float | None = None,
                 gpu_id: GpuId | None = None) -> None:
        if limit_bytes is not None:
            check_limit(limit_bytes)
        if max_memory_fraction is not None and (
                isinstance(max_memory_fraction, bool)
                or not isinstance(max_memory_fraction, (int, float))):
            raise ArgumentTypeError(
                f"max_memory_fraction must be a float in (0, 1] or None; received "
                f"{type(max_memory_fraction).__name__} {max_memory_fraction!r}.")
        if max_memory_fraction is not None and not 0.0 < max_memory_fraction <= 1.0:
            raise InvalidArgumentError(
                f"max_memory_fraction must be in (0, 1]; received {max_memory_fraction!r}."
            )
        self.limit_bytes = limit_bytes
        self.max_memory_fraction = max_memory_fraction
        self.gpu_id = gpu_index(gpu_id)
        self._lock = threading.RLock()
        self._live: dict[int, Allocation] = {}
        self._used: dict[str, int] = {}
        self._held: dict[str, int] = {}  # source -> bytes held now
        self._peak: dict[str, int] = {}
        self._totals: dict[Device, int | None] = {}
        self._scopes = threading.local()

    def budget(self, device: Device) -> int | None:
        """The most this manager may hold on ``device`` (None: unlimited)."""
        limits = [] if self.limit_bytes is None else [self.limit_bytes]
        if self.max_memory_fraction is not None:
            if device not in self._totals:
                self._totals[device] = device_total(device)
            total = self._totals[device]
            if total is not None:
                limits.append(int(total * self.max_memory_fraction))
        return min(limits) if limits else None

    def used_bytes(self, device: GpuId | None = None) -> int:
        """Bytes held on ``device`` (a ``Device``, ``"cuda:0"``, ``"cpu"``, a GPU index: see
        :func:`memtype.gpu.as_device`), or on every device."""
        key = None if device is None else str(as_device(device))
        with self._lock:
            if key is None:
                return sum(self._used.values())
            return self._used.get(key, 0)

    def _check_device(self, device: Device) -> None:
        """Hook for subclasses bound to one device."""

    def _reserve(self, device: Device, key: str, nbytes: int, source: str) -> None:
        """Count ``nbytes`` against ``device``'s budget, or raise MemoryBudgetError."""
        budget = self.budget(device)
        used = self._used.get(key, 0)
        if budget is not None and used + nbytes > budget:
            raise MemoryBudgetError(
                f"Allocating {nbytes} bytes for {source!r} on {key} would exceed the budget: "
                f"{used} of {budget} bytes are held already."
            )
        self._used[key] = used + nbytes

    def allocate(self, shape: int | Sequence[int], dtype: Any, memory_type: MemoryTypeLike,
                 source: str = "default", gpu_id: GpuId | None = None) -> Any:
        """A zero-filled array of ``memory_type``, tracked under ``source``.

        Parameters
        ----------
        shape : int or sequence of int
        dtype : dtype-like
            A NumPy dtype-like (``"float32"``, ``np.uint16``), or a framework's dtype.
        memory_type : MemoryType or str
        source : str
            The label :meth:`stats` groups this allocation under.
        gpu_id : int, str or Device, optional
            The GPU (types with GPUs): ``0``, ``"cuda:0"`` or ``Device("cuda", 0)``; None
            uses the manager's ``gpu_id``, and without one the type's default device (the
            host for a type that can live there, such as torch; GPU 0 for a GPU-only type,
            such as cupy: :func:`memtype.conversion.target_device`).

        Returns
        -------
        array
            Zeros of ``memory_type``; the manager holds one reference.

        Raises
        ------
        DeviceError
            A GPU type without a GPU, or a GPU that does not exist.
        MemoryBudgetError
            The allocation would exceed the budget on its device (also a ``MemoryError``).
        """
        fw = get_framework(memory_type)
        if not isinstance(source, str):
            raise ArgumentTypeError(
                f"source must be a str (the label stats() groups by); received "
                f"{type(source).__name__} {source!r}.")
        dims, dt = as_shape(shape), as_dtype(dtype)
        gid = self.gpu_id if gpu_id is None else gpu_index(gpu_id)
        try:
            device = target_device(fw, CPU, gid)
        except DeviceError as exc:
            raise DeviceError(f"Cannot allocate a {fw.name} array: {exc}") from exc
        self._check_device(device)
        requested, key = data_nbytes(dims, dt), str(device)
        with self._lock:
            self._reserve(device, key, requested, source)
        try:
            array = convert(np.zeros(dims, dtype=dt), fw.name, gpu_id=gid)
            nbytes = measure_nbytes(array)
        except BaseException:
            self._unreserve(key, requested)
            raise
        with self._lock:
            self._used[key] += nbytes - requested
            self._track(Allocation(array, source, nbytes, key))
        return array

    def _unreserve(self, key: str, nbytes: int) -> None:
        """Give back bytes counted by :meth:`_reserve`."""
        with self._lock:
            self._used[key] -= nbytes
            if not self._used[key]:
                del self._used[key]

    def _track(self, record: Allocation) -> None:
        """Register a new allocation (lock held)."""
        self._live[id(record.array)] = record
        held = self._held.get(record.source, 0) + record.nbytes
        self._held[record.source] = held
        self._peak[record.source] = max(self._peak.get(record.source, 0), held)
        scopes: list[list[Allocation]] = getattr(self._scopes, "stack", [])
        if scopes:
            scopes[-1].append(record)

    def _record(self, array: Any) -> Allocation:
        """The live record of ``array`` (lock held), or AllocationKeyError."""
        record = self._live.get(id(array))
        if record is None or record.array is not array:
            raise AllocationKeyError(
                f"This array ({type(array).__name__}) was not allocated by this manager, or "
                "has been released already."
            )
        return record

    def retain(self, array: Any) -> int:
        """Add a reference to an allocated array; returns its new count.

        Raises
        ------
        AllocationKeyError
            If the array is not (or no longer) tracked by this manager.
        """
        with self._lock:
            record = self._record(array)
            record.refs += 1
            return record.refs

    def release(self, array: Any) -> int:
        """Drop a reference; at zero the manager forgets the array. Returns the new count.

        Raises
        ------
        AllocationKeyError
            If the array is not (or no longer) tracked by this manager.
        """
        with self._lock:
            record = self._record(array)
            record.refs -= 1
            if record.refs == 0:
                self._drop(record)
            return record.refs

    def _drop(self, record: Allocation) -> None:
        """Forget an allocation and give back its bytes (lock held)."""
        if self._live.get(id(record.array)) is record:
            del self._live[id(record.array)]
            record.refs = 0
            self._held[record.source] -= record.nbytes
            self._unreserve(record.device, record.nbytes)

    def release_all(self, source: str | None = None) -> int:
        """Forget every allocation (of ``source``, when given), whatever its count; how many."""
        with self._lock:
            doomed = [r for r in self._live.values() if source is None or r.source == source]
            for record in doomed:
                self._drop(record)
            return len(doomed)

    def stats(self) -> dict[str, dict[str, int]]:
        """Per source label: ``arrays`` and ``bytes`` held now, and ``peak_bytes`` ever held."""
        with self._lock:
            out: dict[str, dict[str, int]] = {}
            for record in self._live.values():
                entry = out.setdefault(record.source, {"arrays": 0, "bytes": 0,
                                                       "peak_bytes": self._peak[record.source]})
                entry["arrays"] += 1
                entry["bytes"] += record.nbytes
            return out

    @contextmanager
    def memory_context(self, *, empty_cache: bool = False) -> Iterator[GPUMemoryManager]:
        """Release everything allocated in this thread inside the block on exit, even on error.

        Parameters
        ----------
        empty_cache : bool
            Also ask every loaded framework with a device to free its cached memory on exit.

        Yields
        ------
        GPUMemoryManager
            This manager.
        """
        if not isinstance(empty_cache, bool):
            raise ArgumentTypeError(
                f"empty_cache must be a bool; received {type(empty_cache).__name__} "
                f"{empty_cache!r}.")
        stack: list[list[Allocation]] = self._scopes.__dict__.setdefault("stack", [])
        stack.append([])
        try:
            yield self
        finally:
            scope = stack.pop()
            with self._lock:
                for record in scope:
                    self._drop(record)
            if empty_cache:
                empty_caches()


class GPUMemoryPool(GPUMemoryManager):
    """A byte budget on one GPU that allocates arrays and can cap cupy's and torch's caches.

    Parameters
    ----------
    limit_bytes : int
        The most the pool's allocations may hold together; also the cap :meth:`apply_caps`
        puts on cupy's memory pool and torch's caching allocator.
    gpu_id : int, str, Device or None
        The GPU (``0``, ``"cuda:0"`` or ``Device("cuda", 0)``). None budgets host memory
        instead (host arrays only; no caps), which lets
        the same code run on a machine without GPU.

    Raises
    ------
    DeviceError
        If ``gpu_id`` names no visible GPU.

    Notes
    -----
    Arrays may only be allocated on the pool's device. JAX and TensorFlow cannot be capped
    once started; configure them before first use (``memtype.gpu.configure``).
    """

    def __init__(self, limit_bytes: int, gpu_id: GpuId | None = 0) -> None:
        check_limit(limit_bytes)
        self.device = CPU if gpu_id is None else managed_gpu(get_gpu_manager().get(gpu_id).index)
        super().__init__(limit_bytes=limit_bytes, gpu_id=gpu_id)
        self._capped: list[str] = []

    @property
    def available_bytes(self) -> int:
        """Bytes the pool may still allocate."""
        return int(self.limit_bytes or 0) - self.used_bytes(self.device)

    def set_limit(self, limit_bytes: int) -> None:
        """Change the budget (and the caps, where applied). Held arrays are kept."""
        check_limit(limit_bytes)
        self.limit_bytes = limit_bytes
        if self._capped:
            self.apply_caps(self._capped)

    def _check_device(self, device: Device) -> None:
        if device != self.device:
            raise DeviceError(
                f"This pool allocates on {self.device}; an array of that type with that "
                f"gpu_id would live on {device}."
            )

    def apply_caps(self, memory_types: Sequence[MemoryTypeLike] | None = None, *,
                   frameworks: Sequence[MemoryTypeLike] | None = None) -> list[str]:
        """Cap what cupy and torch may hold on the pool's GPU at ``limit_bytes``.

        Parameters
        ----------
        memory_types : sequence of MemoryType or str, optional
            Which to cap (imported if needed); by default those already imported.
        frameworks : sequence of MemoryType or str, optional
            Deprecated spelling of ``memory_types`` (a DeprecationWarning names the new one).

        Returns
        -------
        list of str
            The frameworks capped (empty for a host pool).
        """
        if frameworks is not None:
            memory_types = renamed_argument("apply_caps", "frameworks", "memory_types",
                                            frameworks, memory_types)
        if not self.device.is_managed_gpu:
            return []
        capped = cap_framework_memory(self.limit_bytes, self.device.index, memory_types)
        self._capped = sorted(set(self._capped) | set(capped))
        return capped

    def remove_caps(self) -> None:
        """Lift the caps :meth:`apply_caps` set."""
        if self._capped:
            cap_framework_memory(None, self.device.index, self._capped)
        self._capped = []


_pools: dict[Device, GPUMemoryPool] = {}
_pools_lock = threading.Lock()


def get_gpu_memory_pool(gpu_id: GpuId | None = None,
                        limit_bytes: int | None = None) -> GPUMemoryPool:
    """The process-wide pool of one device (created on first use, thread-safe).

    Parameters
    ----------
    gpu_id : int, str or Device, optional
        The GPU (``0``, ``"cuda:0"`` or ``Device("cuda", 0)``); None means GPU 0, or the
        host when there is no GPU.
    limit_bytes : int, optional
        Set the pool's budget. A new pool defaults to the device's total memory.

    Raises
    ------
    DeviceError
        If ``gpu_id`` names no visible GPU.
    """
    manager = get_gpu_manager()
    if gpu_id is None and manager.count:
        gpu_id = 0
    key = CPU if gpu_id is None else managed_gpu(manager.get(gpu_id).index)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            default = device_total(key)
            pool = _pools[key] = GPUMemoryPool(limit_bytes or int(default or 1), gpu_id)
        elif limit_bytes is not None:
            pool.set_limit(limit_bytes)
    return pool
