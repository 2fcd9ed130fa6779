"""GPU devices, memory statistics, budgets and pools, cleanup, OOM recovery, streams, profiling.

Every name is imported on first use: ``import memtype.gpu`` starts no GPU runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memtype._lazy import lazy_loader

if TYPE_CHECKING:  # the lazy names below, for type checkers
    from memtype.gpu.cache import GPUTensorCache as GPUTensorCache
    from memtype.gpu.cache import measure_nbytes as measure_nbytes
    from memtype.gpu.caches import MEMORY_TYPE_CLEANUP_REGISTRY as MEMORY_TYPE_CLEANUP_REGISTRY
    from memtype.gpu.caches import CleanupReport as CleanupReport
    from memtype.gpu.caches import cleanup as cleanup
    from memtype.gpu.caches import cleanup_all_gpu_frameworks as cleanup_all_gpu_frameworks
    from memtype.gpu.config import configure as configure
    from memtype.gpu.devices import GpuId as GpuId
    from memtype.gpu.devices import GPUInfo as GPUInfo
    from memtype.gpu.devices import GPUManager as GPUManager
    from memtype.gpu.devices import as_device as as_device
    from memtype.gpu.devices import assign as assign
    from memtype.gpu.devices import get_gpu_manager as get_gpu_manager
    from memtype.gpu.devices import select_device as select_device
    from memtype.gpu.devices import visible_devices as visible_devices
    from memtype.gpu.memory import GIB as GIB
    from memtype.gpu.memory import DeviceMemory as DeviceMemory
    from memtype.gpu.memory import cap_framework_memory as cap_framework_memory
    from memtype.gpu.memory import check_gpu_memory as check_gpu_memory
    from memtype.gpu.memory import check_gpu_memory_usage as check_gpu_memory_usage
    from memtype.gpu.memory import device_memory as device_memory
    from memtype.gpu.memory import device_pressure as device_pressure
    from memtype.gpu.memory import memory_pressure as memory_pressure
    from memtype.gpu.memory import memory_usage as memory_usage
    from memtype.gpu.oom import OOMRecoveryWarning as OOMRecoveryWarning
    from memtype.gpu.oom import is_oom_error as is_oom_error
    from memtype.gpu.oom import release_memory as release_memory
    from memtype.gpu.pool import GPUMemoryManager as GPUMemoryManager
    from memtype.gpu.pool import GPUMemoryPool as GPUMemoryPool
    from memtype.gpu.pool import get_gpu_memory_pool as get_gpu_memory_pool
    from memtype.gpu.profiler import Profiler as Profiler
    from memtype.gpu.profiler import ProfileRecord as ProfileRecord
    from memtype.gpu.profiler import profile as profile
    from memtype.gpu.streams import StreamHandoff as StreamHandoff
    from memtype.gpu.streams import thread_stream as thread_stream

# public name -> submodule defining it (one place per concern)
_EXPORTS: dict[str, str] = {
    # devices.py
    "GPUInfo": "devices",
    "GPUManager": "devices",
    "get_gpu_manager": "devices",
    "select_device": "devices",
    "assign": "devices",
    "visible_devices": "devices",
    "GpuId": "devices",
    "as_device": "devices",
    # memory.py
    "memory_usage": "memory",
    "check_gpu_memory": "memory",
    "check_gpu_memory_usage": "memory",
    "memory_pressure": "memory",
    "device_pressure": "memory",
    "DeviceMemory": "memory",
    "device_memory": "memory",
    "GIB": "memory",
    "cap_framework_memory": "memory",
    # pool.py
    "GPUMemoryPool": "pool",
    "get_gpu_memory_pool": "pool",
    "GPUMemoryManager": "pool",
    # cache.py
    "GPUTensorCache": "cache",
    "measure_nbytes": "cache",
    # profiler.py
    "profile": "profiler",
    "ProfileRecord": "profiler",
    "Profiler": "profiler",
    # cleanup.py
    "cleanup": "caches",
    "cleanup_all_gpu_frameworks": "caches",
    "MEMORY_TYPE_CLEANUP_REGISTRY": "caches",
    "CleanupReport": "caches",
    # config.py
    "configure": "config",
    # oom.py
    "is_oom_error": "oom",
    "release_memory": "oom",
    "OOMRecoveryWarning": "oom",
    # streams.py
    "thread_stream": "streams",
    "StreamHandoff": "streams",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_loader(globals(), {name: f"{__name__}.{module}"
                                      for name, module in _EXPORTS.items()})


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
