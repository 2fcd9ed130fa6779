"""Memory statistics: what each framework holds, what is free, and how much pressure there is.

One rule for ``gpu_id`` throughout:

* an int names a visible GPU; an int that names no GPU while GPUs exist is a
  :class:`~memtype.errors.DeviceError`;
* ``None`` means the default device, GPU 0;
* on a machine with no GPU at all, every ``gpu_id`` reports the host (``psutil``), so the
  same code runs on a laptop. The result's ``device`` (``"cpu"``) says so.
"""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import cast

import psutil

from memtype._renamed import renamed_argument
from memtype.errors import ArgumentTypeError, InvalidArgumentError
from memtype.frameworks import (
    CPU,
    Adapter,
    Device,
    DeviceAdapter,
    DeviceProperties,
    get_framework,
    gpu_adapters,
    gpu_index,
    load_adapter,
    loaded_frameworks,
    managed_gpu,
)
from memtype.gpu.devices import GpuId, as_device, get_gpu_manager
from memtype.types import MemoryTypeLike

__all__ = [
    "GIB",
    "DeviceMemory",
    "check_gpu_memory",
    "check_gpu_memory_usage",
    "device_memory",
    "memory_pressure",
    "device_pressure",
    "memory_usage",
    "cap_framework_memory",
]

GIB = 1 << 30
"""Bytes in a gibibyte: a float size given to :func:`check_gpu_memory` counts these."""

_log = logging.getLogger("memtype.gpu")


@dataclass(frozen=True)
class DeviceMemory:
    """Memory of one device, and what each loaded framework holds on it.

    Attributes
    ----------
    device : str
        ``"cuda:0"``... or ``"cpu"`` for host memory.
    total_bytes, free_bytes : int
        The device's memory and what is free now (host: ``psutil`` total and available).
    frameworks : mapping of str to mapping of str to int
        Per loaded framework, its adapter's figures in bytes (torch ``allocated`` /
        ``reserved`` / ``peak_allocated``, cupy ``pool_used`` / ``pool_total``, JAX
        ``memory_stats``, TensorFlow ``current`` / ``peak``). Frameworks that report nothing
        are left out; the host has none.
    source : str
        Where ``total_bytes`` and ``free_bytes`` came from: ``"nvml"``, a framework, ``"psutil"``.
    """

    device: str
    total_bytes: int
    free_bytes: int
    frameworks: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    source: str = "psutil"

    @property
    def used_bytes(self) -> int:
        """Bytes in use (by any process)."""
        return max(self.total_bytes - self.free_bytes, 0)

    @property
    def pressure(self) -> float:
        """The used fraction of the device, in [0, 1] (0 when the total is unknown)."""
        if self.total_bytes <= 0:
            return 0.0
        return min(max(self.used_bytes / self.total_bytes, 0.0), 1.0)


def _host() -> DeviceMemory:
    """Host memory from psutil."""
    vm = psutil.virtual_memory()
    return DeviceMemory(str(CPU), int(vm.total), int(vm.available), MappingProxyType({}),
                        "psutil")


def _framework_usage(gpu_id: int) -> dict[str, Mapping[str, int]]:
    """What each loaded managed-GPU framework reports holding on GPU ``gpu_id``.

    A framework whose adapter says its runtime has not started holds nothing and is not asked
    (asking JAX would start its backend, which preallocates most of the GPU).
    """
    usage: dict[str, Mapping[str, int]] = {}
    for fw, adapter in gpu_adapters():
        info = adapter.memory_info(gpu_id)
        if info:
            usage[fw.name] = MappingProxyType(dict(info))
    return usage


def _gpu(gpu_id: int) -> DeviceMemory:
    """Live figures of one GPU."""
    manager = get_gpu_manager()
    free, total = manager.mem_get_info(gpu_id)
    return DeviceMemory(str(managed_gpu(gpu_id)), total, free,
                        MappingProxyType(_framework_usage(gpu_id)), manager.source)


def _other_devices() -> dict[str, DeviceMemory]:
    """Devices of accelerator kinds the GPU manager does not enumerate (OpenCL, a plug-in
    accelerator), each with what the started frameworks there report; devices no framework
    reports on are left out."""
    held: dict[Device, dict[str, Mapping[str, int]]] = {}
    first: dict[Device, tuple[str, Adapter]] = {}
    for fw, adapter in gpu_adapters(every_kind=True):
        if fw.managed_gpu or fw.gpu_kind is None:
            continue
        for index in range(adapter.gpu_count()):
            info = adapter.memory_info(index)
            if info:
                device = Device(fw.gpu_kind, index)
                held.setdefault(device, {})[fw.name] = MappingProxyType(dict(info))
                first.setdefault(device, (fw.name, adapter))
    return {str(d): _described(d, *first[d], held[d]) for d in held}


def _described(device: Device, name: str, adapter: Adapter,
               held: dict[str, Mapping[str, int]]) -> DeviceMemory:
    """A device the GPU manager does not list, as its framework describes it (sizes 0 when
    the adapter has no ``device_properties``)."""
    props = _properties(adapter, device.index)
    total, free = (0, 0) if props is None else (props.total_bytes, props.free_bytes)
    return DeviceMemory(str(device), total, free, MappingProxyType(held), name)


def _properties(adapter: Adapter, index: int) -> DeviceProperties | None:
    """The adapter's ``device_properties(index)``; None when it has none."""
    if isinstance(adapter, DeviceAdapter) and adapter.describes_devices:
        return adapter.device_properties(index)
    return None


def device_memory(gpu_id: GpuId | None = None) -> DeviceMemory:
    """Live memory figures of one device (the host when there is no GPU).

    Parameters
    ----------
    gpu_id : int, str or Device, optional
        The GPU (``0``, ``"cuda:0"`` or ``Device("cuda", 0)``); None means GPU 0. Ignored on
        a machine without GPU (the host is reported).

    Raises
    ------
    DeviceError
        If GPUs exist and ``gpu_id`` names none of them, or ``gpu_id`` names no GPU at all.
    """
    index = gpu_index(gpu_id)
    if get_gpu_manager().count == 0:
        return _host()
    return _gpu(0 if index is None else index)


def memory_usage(gpu_id: GpuId | None = None) -> dict[str, DeviceMemory]:
    """Memory figures per device, with what each loaded framework holds there.

    Parameters
    ----------
    gpu_id : int, str or Device, optional
        Report only this GPU (``0``, ``"cuda:0"`` or ``Device("cuda", 0)``). None reports
        every GPU and the host. Without any GPU, the host.

    Returns
    -------
    dict of str to DeviceMemory
        Keyed by device: the managed GPUs (``"cuda:0"``, ...), then (for ``gpu_id=None``)
        devices of other accelerator kinds on which a started framework reports memory
        (``"opencl:0"``, a plug-in kind; sizes from the adapter's ``device_properties``, else
        0), then ``"cpu"``.

    Raises
    ------
    DeviceError
        If GPUs exist and ``gpu_id`` names none of them.

    Examples
    --------
    >>> import memtype as mt
    >>> usage = mt.gpu.memory_usage()
    >>> "cpu" in usage
    True
    """
    index = gpu_index(gpu_id)
    count = get_gpu_manager().count
    if index is not None:
        gpu = _gpu(index) if count else _host()
        return {gpu.device: gpu}
    usage = {str(managed_gpu(i)): _gpu(i) for i in range(count)}
    usage.update(_other_devices())
    usage[str(CPU)] = _host()
    return usage


def _requested_bytes(size_gb: object, nbytes: object) -> int:
    """The bytes asked for by exactly one of ``size_gb`` (GiB, int or float) and ``nbytes``."""
    if (size_gb is None) == (nbytes is None):
        raise ArgumentTypeError(
            "check_gpu_memory takes exactly one size: size_gb (GiB) or nbytes= (bytes); "
            f"received size_gb={size_gb!r}, nbytes={nbytes!r}.")
    name, value = ("size_gb", size_gb) if nbytes is None else ("nbytes", nbytes)
    kind = numbers.Real if nbytes is None else numbers.Integral
    if isinstance(value, bool) or not isinstance(value, kind):
        expected = "a number of GiB (int or float)" if nbytes is None else "an int of bytes"
        raise ArgumentTypeError(
            f"{name} must be {expected}; received {type(value).__name__} {value!r}.")
    as_float = float(value)
    if not math.isfinite(as_float) or as_float < 0:
        raise InvalidArgumentError(
            f"{name} must be a finite size >= 0; received {value!r}.")
    return math.ceil(as_float * GIB) if nbytes is None else int(cast(numbers.Integral, value))


def check_gpu_memory(size_gb: float | None = None, gpu_id: GpuId | None = None, *,
                     nbytes: int | None = None) -> bool:
    """Whether ``size_gb`` gibibytes (or ``nbytes`` bytes) can be allocated on the device now.

    The OpenHCS signature, ``check_gpu_memory(size_gb)``: the size is always in GiB, an int
    as much as a float (``2`` and ``2.0`` are ``2 * 2**30`` bytes, ``0.5`` is 512 MiB).
    Bytes are passed by name: ``check_gpu_memory(nbytes=arr.nbytes)``.

    Parameters
    ----------
    size_gb : int or float, optional
        The size in gibibytes (``2**30`` bytes).
    gpu_id : int, str or Device, optional
        The GPU (``0``, ``"cuda:0"`` or ``Device("cuda", 0)``; None: GPU 0). Without any
        GPU the host's available memory is checked.
    nbytes : int, optional
        The size in bytes, instead of ``size_gb``.

    Returns
    -------
    bool
        True when the device's free memory is at least that size. Memory cached by a
        framework (torch reserved, cupy pool) counts as used: only that framework can reuse it.

    Raises
    ------
    ArgumentTypeError
        Both sizes or neither, or a size of the wrong type (a bool, a string such as
        ``"2GB"``, a float ``nbytes``); also a ``TypeError``.
    InvalidArgumentError
        A size that is negative or not finite (also a ``ValueError``).
    DeviceError
        If GPUs exist and ``gpu_id`` names none of them.
    """
    needed = _requested_bytes(size_gb, nbytes)
    return needed <= device_memory(gpu_id).free_bytes


def _format(mem: DeviceMemory) -> str:
    """One summary line for a device."""
    mib = 1 << 20
    parts = [(f"{mem.device}: {mem.used_bytes / mib:.0f} / {mem.total_bytes / mib:.0f} MiB used "
              f"({mem.pressure:.0%}, {mem.free_bytes / mib:.0f} MiB free, via {mem.source})")]
    for name, figures in mem.frameworks.items():
        held = ", ".join(f"{k}={v / mib:.1f} MiB" for k, v in figures.items())
        parts.append(f"  {name}: {held}")
    return "\n".join(parts)


def check_gpu_memory_usage() -> str:
    """Log (INFO, logger ``memtype.gpu``) and return a summary of every device's memory.

    Returns
    -------
    str
        One line per device, then one line per framework holding memory there. Without a GPU,
        the host's line.
    """
    summary = "\n".join(_format(mem) for mem in memory_usage().values())
    _log.info("Memory usage:\n%s", summary)
    return summary


def memory_pressure(gpu_id: GpuId | None = None) -> float:
    """How full the device is: the used fraction, in [0, 1].

    Parameters
    ----------
    gpu_id : int, str or Device, optional
        The GPU (None: GPU 0). Without any GPU, host memory pressure (``psutil``).

    Returns
    -------
    float
        ``1 - free / total``. Framework caches count as used.

    Raises
    ------
    DeviceError
        If GPUs exist and ``gpu_id`` names none of them.
    """
    return device_memory(gpu_id).pressure


def device_pressure(device: GpuId) -> float | None:
    """How full one device of any kind is, or None when nothing says.

    Parameters
    ----------
    device : Device, str or int
        A managed GPU (``memory_pressure``), another accelerator (``1 - free / total`` from
        the adapter's ``device_properties`` of a loaded framework on that kind), or the host;
        a ``Device``, its name (``"cuda:0"``, ``"opencl:1"``, ``"cpu"``) or a managed GPU's
        index (see :func:`memtype.gpu.as_device`).

    Returns
    -------
    float or None
        The used fraction in [0, 1]; None for an accelerator whose framework reports no sizes
        (pyclesperanto's OpenCL devices report none), so callers fall back to their budgets.

    Raises
    ------
    DeviceError
        ``device`` names no device.
    """
    device = as_device(device)
    if not device.is_gpu:
        return _host().pressure
    if device.is_managed_gpu:
        return memory_pressure(device.index)
    for fw, adapter in gpu_adapters(every_kind=True):
        if fw.gpu_kind != device.kind:
            continue
        props = _properties(adapter, device.index)
        if props is not None and props.total_bytes > 0:
            return 1.0 - props.free_bytes / props.total_bytes
    return None


def cap_framework_memory(limit_bytes: int | None, gpu_id: GpuId = 0,
                         memory_types: Sequence[MemoryTypeLike] | None = None, *,
                         frameworks: Sequence[MemoryTypeLike] | None = None) -> list[str]:
    """Cap what the frameworks' allocators may hold on one GPU (adapter ``set_memory_cap``).

    Parameters
    ----------
    limit_bytes : int or None
        The cap in bytes (torch's is set as the matching fraction of the GPU); None lifts it.
    gpu_id : int, str or Device
        The GPU (``0``, ``"cuda:0"`` or ``Device("cuda", 0)``).
    memory_types : sequence of MemoryType or str, optional
        Which to cap (imported if needed); by default the loaded ones. Types without a cap
        (host-only ones, or those that can only be limited before they start, such as JAX
        and TensorFlow: see ``memtype.gpu.configure``) are skipped.
    frameworks : sequence of MemoryType or str, optional
        Deprecated spelling of ``memory_types`` (a DeprecationWarning names the new one).

    Returns
    -------
    list of str
        The frameworks capped.

    Raises
    ------
    DeviceError
        If ``gpu_id`` names no visible GPU (a cap needs a GPU).
    """
    if frameworks is not None:
        memory_types = renamed_argument("cap_framework_memory", "frameworks", "memory_types",
                                        frameworks, memory_types)
    gpu_id = gpu_index(gpu_id, allow_none=False)
    total = get_gpu_manager().mem_get_info(gpu_id)[1]
    names = [fw.name for fw in loaded_frameworks()] if memory_types is None \
        else [get_framework(m).name for m in memory_types]
    capped: list[str] = []
    for name in names:
        if not get_framework(name).managed_gpu:
            continue
        adapter = load_adapter(name)
        if isinstance(adapter, DeviceAdapter) and adapter.caps_memory:
            adapter.set_memory_cap(gpu_id, limit_bytes, total)
            capped.append(name)
    return capped
