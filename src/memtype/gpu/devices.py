"""The process's GPUs: one manager that lists them, picks one, and spreads workers over them.

Where the list comes from, in order:

1. NVML (``pynvml`` from ``nvidia-ml-py``) when a driver is present; no framework is imported.
   NVML numbers GPUs in PCI bus order and ignores ``CUDA_VISIBLE_DEVICES``, so the manager
   applies that variable itself and reports CUDA's logical indices (they match CUDA's own when
   ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, or when the GPUs are identical).
2. A framework that is already imported, sees a managed GPU and whose adapter defines
   ``device_properties`` (the runtime applies ``CUDA_VISIBLE_DEVICES``). JAX's adapter has
   none on purpose: listing its devices starts its backend, which preallocates most of the
   GPU's memory.
3. Nothing: an empty list, and :class:`~memtype.errors.DeviceError` where a GPU is required.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memtype.errors import DeviceError, InvalidArgumentError
from memtype.frameworks import (
    CPU,
    GPU_KIND,
    Device,
    DeviceAdapter,
    Framework,
    get_framework,
    gpu_adapters,
    gpu_index,
    iter_frameworks,
    load_adapter,
    loaded_frameworks,
)

__all__ = ["GPUInfo", "GPUManager", "GpuId", "as_device", "assign", "get_gpu_manager",
           "select_device", "visible_devices"]

GpuId = int | str | Device
"""How a managed GPU is named wherever memtype takes a ``gpu_id``: its index (``0``), its name
(``"cuda:0"``) or its :class:`~memtype.frameworks.Device`; one parser
(:func:`memtype.frameworks.gpu_index`) reads all three."""


@dataclass(frozen=True)
class GPUInfo:
    """One GPU as this process sees it.

    Attributes
    ----------
    index : int
        The CUDA ordinal this process uses (after ``CUDA_VISIBLE_DEVICES``): the ``gpu_id``.
    name : str
        The product name, e.g. ``"NVIDIA H100 80GB HBM3"``.
    total_bytes, free_bytes : int
        Device memory, when the list was taken (:meth:`GPUManager.mem_get_info` is live).
    compute_capability : tuple of int or None
        ``(major, minor)``, or None where the source does not say.
    uuid : str
        The GPU's UUID (``"GPU-..."``), or ``""`` where the source does not say.
    source : str
        ``"nvml"`` or the framework that reported it.
    """

    index: int
    name: str
    total_bytes: int
    free_bytes: int
    compute_capability: tuple[int, int] | None = None
    uuid: str = ""
    source: str = "nvml"

    @property
    def used_bytes(self) -> int:
        """Bytes in use on the device (by any process)."""
        return self.total_bytes - self.free_bytes


def visible_devices(spec: str | None, uuids: Sequence[str]) -> list[int] | None:
    """Physical indices selected by a ``CUDA_VISIBLE_DEVICES`` value, in logical order.

    Parameters
    ----------
    spec : str or None
        The variable's value; None (unset) selects every device.
    uuids : sequence of str
        The physical devices' UUIDs, in physical order.

    Returns
    -------
    list of int or None
        Like CUDA, entries are ordinals or (prefixes of) UUIDs, and the list ends at the first
        entry that is invalid, repeated or out of range (so ``"-1"`` and ``""`` select none).
        None when the value names MIG instances, which NVML's device list cannot resolve.
    """
    if spec is None:
        return list(range(len(uuids)))
    chosen: list[int] = []
    for entry in (e.strip() for e in spec.split(",")):
        if entry.upper().startswith("MIG-"):
            return None
        index = _resolve_entry(entry, uuids)
        if index is None or index in chosen:
            break
        chosen.append(index)
    return chosen


def _resolve_entry(entry: str, uuids: Sequence[str]) -> int | None:
    """The physical index one ``CUDA_VISIBLE_DEVICES`` entry names, or None."""
    if entry.isdigit():
        index = int(entry)
        return index if index < len(uuids) else None
    if not entry.upper().startswith("GPU-"):
        return None
    matches = [i for i, u in enumerate(uuids) if u.lower().startswith(entry.lower())]
    return matches[0] if len(matches) == 1 else None


def _text(value: Any) -> str:
    """NVML strings are bytes in old bindings and str in new ones."""
    return value.decode() if isinstance(value, bytes) else str(value)


class _Nvml:
    """A lazily initialised NVML session, kept for the life of the process."""

    def __init__(self) -> None:
        self.module: Any = None
        self.failed = False

    def start(self) -> Any | None:
        """The ``pynvml`` module with NVML initialised, or None where there is no driver."""
        if self.module is not None or self.failed:
            return self.module
        try:
            import pynvml
        except ImportError:
            self.failed = True
            return None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError:  # no driver / library: fall back to the frameworks
            self.failed = True
            return None
        self.module = pynvml
        return pynvml

    def handle(self, physical: int) -> Any:
        """The NVML handle of a physical device."""
        return self.module.nvmlDeviceGetHandleByIndex(physical)

    def info(self, physical: int, index: int) -> GPUInfo:
        """Name, memory, compute capability and UUID of one physical device."""
        nv, handle = self.module, self.handle(physical)
        mem = nv.nvmlDeviceGetMemoryInfo(handle)
        major, minor = nv.nvmlDeviceGetCudaComputeCapability(handle)
        return GPUInfo(index, _text(nv.nvmlDeviceGetName(handle)), int(mem.total),
                       int(mem.free), (int(major), int(minor)),
                       _text(nv.nvmlDeviceGetUUID(handle)), "nvml")

    def uuids(self) -> list[str]:
        """UUIDs of every physical device."""
        count = int(self.module.nvmlDeviceGetCount())
        return [_text(self.module.nvmlDeviceGetUUID(self.handle(i))) for i in range(count)]

    def mem_get_info(self, physical: int) -> tuple[int, int]:
        """Live (free, total) bytes of a physical device."""
        mem = self.module.nvmlDeviceGetMemoryInfo(self.handle(physical))
        return int(mem.free), int(mem.total)


def _probe(fw: Framework, adapter: DeviceAdapter, index: int) -> GPUInfo:
    """One device as a framework's adapter describes it (may start its runtime there)."""
    p = adapter.device_properties(index)  # callers pick adapters that describe devices
    return GPUInfo(index, p.name, p.total_bytes, p.free_bytes, p.compute_capability, p.uuid,
                   fw.name)


def _describers() -> Iterator[tuple[Framework, DeviceAdapter]]:
    """Loaded managed-GPU frameworks whose adapter can describe a device.

    An adapter without ``device_properties`` is never probed (JAX's would start its backend,
    which preallocates most of the GPU's memory)."""
    return ((fw, a) for fw, a in gpu_adapters(started=False)
            if a.describes_devices)


def _framework_gpus() -> tuple[str, list[GPUInfo]]:
    """The first loaded framework that sees managed GPUs, and its devices."""
    for fw, adapter in _describers():
        count = adapter.gpu_count()
        if count:
            return fw.name, [_probe(fw, adapter, i) for i in range(count)]
    return "none", []


class GPUManager:
    """Lists the process's GPUs, picks the least-loaded one, and spreads workers over them.

    Use :func:`get_gpu_manager` for the process-wide instance. The device list is taken on
    first use and kept; :meth:`refresh` takes it again. While the list is empty and came from
    no source, it is taken again whenever the set of imported frameworks changes.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._nvml = _Nvml()
        self._gpus: list[GPUInfo] | None = None
        self._physical: list[int] = []  # logical index -> NVML index
        self._source = "none"
        self._loaded_key: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        """Where the list came from: ``"nvml"``, a framework name, or ``"none"``."""
        self.gpus()
        return self._source

    def gpus(self) -> list[GPUInfo]:
        """The visible GPUs, by CUDA index (empty when there are none)."""
        with self._lock:
            if self._gpus is None or self._stale():
                return self._take()
            return list(self._gpus)

    def refresh(self) -> list[GPUInfo]:
        """Take the device list again (memory figures included), retrying NVML."""
        with self._lock:
            self._nvml = _Nvml() if self._nvml.failed else self._nvml
            return self._take()

    def _stale(self) -> bool:
        """An empty, sourceless list taken before another framework was imported."""
        return self._source == "none" and self._loaded_key != _loaded_key()

    def _take(self) -> list[GPUInfo]:
        """Query NVML, else the loaded frameworks; store and return the list."""
        self._loaded_key = _loaded_key()
        found = self._from_nvml()
        if found is None:
            self._source, gpus = _framework_gpus()
            self._physical = [g.index for g in gpus]
        else:
            self._source, gpus = "nvml", found
        self._gpus = gpus
        return list(gpus)

    def _from_nvml(self) -> list[GPUInfo] | None:
        """The visible GPUs according to NVML, or None when NVML cannot say."""
        if self._nvml.start() is None:
            return None
        uuids = self._nvml.uuids()
        chosen = visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"), uuids)
        if chosen is None:
            return None
        self._physical = chosen
        return [self._nvml.info(physical, index) for index, physical in enumerate(chosen)]

    @property
    def count(self) -> int:
        """How many GPUs are visible."""
        return len(self.gpus())

    def get(self, gpu_id: GpuId) -> GPUInfo:
        """The GPU ``gpu_id`` (an index, ``"cuda:0"`` or a ``Device``), with live memory
        figures.

        Raises
        ------
        DeviceError
            If there is no such GPU.
        """
        gpus = self.gpus()
        index = _check_index(gpu_id, len(gpus))
        free, total = self.mem_get_info(index)
        return replace(gpus[index], free_bytes=free, total_bytes=total)

    def mem_get_info(self, gpu_id: GpuId) -> tuple[int, int]:
        """Live ``(free, total)`` bytes of GPU ``gpu_id`` (an index, ``"cuda:0"`` or a
        ``Device``).

        Raises
        ------
        DeviceError
            If there is no such GPU.
        """
        with self._lock:
            gpus = self.gpus()
            gpu_id = _check_index(gpu_id, len(gpus))
            if self._source == "nvml":
                return self._nvml.mem_get_info(self._physical[gpu_id])
            fw = get_framework(self._source)
            adapter = load_adapter(fw.name)
            assert isinstance(adapter, DeviceAdapter)  # the source was one of _describers()
            fresh = _probe(fw, adapter, gpu_id)
            return fresh.free_bytes, fresh.total_bytes

    def select_device(self, min_free_bytes: int | None = None) -> int:
        """The index of the GPU with the most free memory now.

        Parameters
        ----------
        min_free_bytes : int, optional
            Only consider GPUs with at least this much free memory.

        Raises
        ------
        DeviceError
            If there is no GPU, or none has ``min_free_bytes`` free.
        """
        count = self.count
        if count == 0:
            raise DeviceError("select_device() needs a GPU, but no GPU is visible to this process "
                              f"(source: {self.source}).")
        free = {i: self.mem_get_info(i)[0] for i in range(count)}
        best = max(free, key=lambda i: (free[i], -i))
        if min_free_bytes is not None and free[best] < min_free_bytes:
            raise DeviceError(
                f"No GPU has {min_free_bytes} bytes free; the most free is {free[best]} bytes "
                f"on GPU {best}."
            )
        return best

    def assign(self, worker_index: int) -> int | None:
        """The GPU for worker ``worker_index``: round-robin over the visible GPUs.

        Returns None when there is no GPU (the worker runs on the host; ``gpu_id=None``).

        Raises
        ------
        ValueError
            If ``worker_index`` is not a non-negative int.
        """
        if isinstance(worker_index, bool) or not isinstance(worker_index, int) or worker_index < 0:
            raise InvalidArgumentError(
                f"worker_index must be a non-negative int; received {worker_index!r}.")
        count = self.count
        return worker_index % count if count else None


def _loaded_key() -> tuple[str, ...]:
    """Names of the frameworks imported so far."""
    return tuple(fw.name for fw in loaded_frameworks())


def _check_index(gpu_id: object, count: int) -> int:
    """The index ``gpu_id`` names (see :data:`GpuId`); DeviceError unless it is one of
    ``count`` GPUs."""
    index = gpu_index(gpu_id, allow_none=False)
    if index >= count:
        have = f"only GPUs 0..{count - 1} are visible" if count else "no GPU is visible"
        raise DeviceError(f"GPU {gpu_id} was requested, but {have}.")
    return index


def as_device(value: GpuId) -> Device:
    """The device of any kind that ``value`` names: a :class:`~memtype.frameworks.Device`,
    its name (``"cpu"``, ``"cuda:0"``, ``"opencl:1"``: any kind of the framework table), or
    a managed GPU's index (``0`` is ``"cuda:0"``).

    Raises
    ------
    DeviceError
        Anything else (a kind no framework has, a negative index, a bool...), naming it.
    """
    if isinstance(value, Device):
        return value
    if isinstance(value, str):
        if value == "cpu":
            return CPU
        kind, _, digits = value.partition(":")
        kinds = {GPU_KIND} | {fw.gpu_kind for fw in iter_frameworks() if fw.gpu_kind}
        if kind in kinds and digits.isdigit() and digits.isascii():
            return Device(kind, int(digits))
        raise DeviceError(
            f"A device name is 'cpu' or '<kind>:<index>' with a kind in "
            f"{', '.join(sorted(kinds))}; received {value!r}.")
    try:
        return Device(GPU_KIND, gpu_index(value, allow_none=False))
    except DeviceError:
        raise DeviceError(
            f"A device is a Device, its name ('cpu', '{GPU_KIND}:0', 'opencl:1') or a managed "
            f"GPU's index; received {value!r}.") from None


_manager: list[GPUManager] = []
_manager_lock = threading.Lock()


def get_gpu_manager() -> GPUManager:
    """The process-wide :class:`GPUManager` (created on first use, thread-safe).

    Examples
    --------
    >>> from memtype.gpu import get_gpu_manager
    >>> manager = get_gpu_manager()
    >>> manager.gpus()  # doctest: +SKIP
    []
    """
    if not _manager:
        with _manager_lock:
            if not _manager:
                _manager.append(GPUManager())
    return _manager[0]


def select_device(min_free_bytes: int | None = None) -> int:
    """The visible GPU with the most free memory (see :meth:`GPUManager.select_device`)."""
    return get_gpu_manager().select_device(min_free_bytes)


def assign(worker_index: int) -> int | None:
    """The GPU for worker ``worker_index``: round-robin; None without GPU (see ``GPUManager``)."""
    return get_gpu_manager().assign(worker_index)
