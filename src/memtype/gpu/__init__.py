"""GPU devices, memory statistics, budgets and pools, cleanup, OOM recovery, streams, profiling.

Every name is imported on first use: ``import memtype.gpu`` starts no GPU runtime.
"""

from __future__ import annotations

import importlib
from typing import Any

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
    "OOMRecoveryWarning": "oom",
    # streams.py
    "thread_stream": "streams",
    "StreamHandoff": "streams",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memtype.gpu' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
