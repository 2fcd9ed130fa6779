"""GPU cleanup: free the cached device memory of frameworks that are already loaded.

Nothing here imports a framework or starts a GPU runtime: a framework whose module is not
in ``sys.modules`` is skipped, and one whose runtime has not started (``runtime_started``
in its adapter) has nothing cached and is reported as such.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from memtype.frameworks import (
    DeviceAdapter,
    get_framework,
    gpu_index,
    is_loaded,
    iter_frameworks,
    known_names,
    load_adapter,
)
from memtype.gpu.devices import GpuId
from memtype.types import MemoryTypeLike

__all__ = [
    "CleanupReport",
    "cleanup",
    "cleanup_all_gpu_frameworks",
    "cleanup_framework",
    "MEMORY_TYPE_CLEANUP_REGISTRY",
]

_log = logging.getLogger("memtype.gpu")


@dataclass(frozen=True)
class CleanupReport:
    """What one framework's cleanup did.

    Attributes
    ----------
    memory_type : str
        The memory type value.
    gpu_id : int or None
        The GPU whose figures are reported (``None``: GPU 0).
    status : str
        ``"freed"`` (caches emptied), ``"not loaded"`` (framework not imported, untouched),
        ``"not started"`` (runtime not started, untouched) or ``"host"`` (nothing to free).
    before, after : mapping of str to int
        The adapter's memory figures in bytes before and after (empty where the
        framework reports none).
    """

    memory_type: str
    gpu_id: int | None
    status: str
    before: Mapping[str, int] = field(default_factory=dict)
    after: Mapping[str, int] = field(default_factory=dict)

    @property
    def freed_bytes(self) -> int | None:
        """The largest drop of any reported figure, or ``None`` when nothing is reported."""
        common = set(self.before) & set(self.after)
        if not common:
            return None
        return max(0, max(self.before[k] - self.after[k] for k in common))


def cleanup_framework(memory_type: MemoryTypeLike,
                      gpu_id: GpuId | None = None) -> CleanupReport:
    """Free one framework's cached device memory, if it is loaded and started.

    Parameters
    ----------
    memory_type : MemoryType or str
        The framework.
    gpu_id : int, str or Device, optional
        The GPU whose figures go in the report (the framework's cache is emptied as a whole):
        ``0``, ``"cuda:0"`` or ``Device("cuda", 0)``.

    Returns
    -------
    CleanupReport

    Raises
    ------
    DeviceError
        ``gpu_id`` names no GPU (checked before anything is freed).
    """
    gpu_id = gpu_index(gpu_id)
    fw = get_framework(memory_type)
    if not is_loaded(fw):
        return CleanupReport(fw.name, gpu_id, "not loaded")
    if fw.gpu_kind is None:
        return CleanupReport(fw.name, gpu_id, "host")
    adapter = load_adapter(fw.name)
    if not isinstance(adapter, DeviceAdapter) or not adapter.runtime_started():
        return CleanupReport(fw.name, gpu_id, "not started")
    index = 0 if gpu_id is None else gpu_id
    before = dict(adapter.memory_info(index))
    adapter.empty_cache()
    after = dict(adapter.memory_info(index))
    report = CleanupReport(fw.name, gpu_id, "freed", before, after)
    _log.debug("cleanup %s gpu %s: freed %s bytes", fw.name, gpu_id, report.freed_bytes)
    return report


def cleanup_all_gpu_frameworks(gpu_id: GpuId | None = None) -> list[CleanupReport]:
    """Free cached device memory of every framework already imported.

    Two caching allocators (torch and CuPy, say) can hold each other's memory hostage;
    freeing all of them is what OOM recovery does before it retries.

    Returns
    -------
    list of CleanupReport
        One per loaded framework, in table order.
    """
    return [cleanup_framework(fw.name, gpu_id) for fw in iter_frameworks()
            if is_loaded(fw)]


class _CleanupRegistry(Mapping[str, Callable[..., CleanupReport]]):
    """Memory type value -> its cleanup function, read live from the framework table."""

    def __getitem__(self, name: str) -> Callable[..., CleanupReport]:
        fw = get_framework(name)
        fn = functools.partial(cleanup_framework, fw.name)
        functools.update_wrapper(fn, cleanup_framework)
        return fn

    def __iter__(self) -> Iterator[str]:
        return iter(known_names())

    def __len__(self) -> int:
        return len(known_names())

    def __repr__(self) -> str:
        return f"MEMORY_TYPE_CLEANUP_REGISTRY({', '.join(known_names())})"


MEMORY_TYPE_CLEANUP_REGISTRY: Mapping[str, Callable[..., CleanupReport]] = _CleanupRegistry()
"""``MEMORY_TYPE_CLEANUP_REGISTRY["torch"](gpu_id)`` frees torch's cache; numpy's is a no-op."""


def cleanup(memory_type: MemoryTypeLike | None = None,
            gpu_id: GpuId | None = None) -> list[CleanupReport]:
    """Free cached device memory of one framework, or of every loaded one.

    Parameters
    ----------
    memory_type : MemoryType or str, optional
        One framework; ``None`` cleans every loaded framework.
    gpu_id : int, optional
        The GPU whose figures are reported.

    Returns
    -------
    list of CleanupReport
        One report per framework looked at (a named framework that is not loaded is
        reported as ``"not loaded"``; cleaning all leaves unloaded ones out).

    Examples
    --------
    >>> import memtype as mt
    >>> [r.status for r in mt.gpu.cleanup("numpy")]
    ['host']
    """
    if memory_type is not None:
        return [cleanup_framework(memory_type, gpu_id)]
    return cleanup_all_gpu_frameworks(gpu_id)
