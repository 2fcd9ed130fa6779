"""Which memory types this machine can run, read from the framework table."""

from __future__ import annotations

import functools
import importlib.util

from memtype.frameworks import iter_frameworks, load_adapter


@functools.cache
def usable(name: str) -> bool:
    """Installed, importable, and with a device to put arrays on."""
    fw = next(f for f in iter_frameworks() if f.name == name)
    if importlib.util.find_spec(fw.module) is None:
        return False
    adapter = load_adapter(name)
    return "cpu" in fw.device_kinds or adapter.gpu_count() > 0


@functools.cache
def has_gpu() -> bool:
    """A CUDA GPU is visible to torch or cupy."""
    for name in ("torch", "cupy"):
        if importlib.util.find_spec(name) is not None and load_adapter(name).gpu_count() > 0:
            return True
    return False


def builtin_names() -> list[str]:
    return [fw.name for fw in iter_frameworks()][:6]


def available_types() -> list[str]:
    return [name for name in builtin_names() if usable(name)]
