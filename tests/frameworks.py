"""Which memory types this machine can run, read from the framework table."""

from __future__ import annotations

import functools
import importlib.util

from memtype.errors import FrameworkNotInstalledError
from memtype.frameworks import iter_frameworks, load_adapter


@functools.cache
def unusable_reason(name: str) -> str:
    """Why a memory type cannot run here ("" when it is installed, importable and has a
    device to put arrays on)."""
    fw = next(f for f in iter_frameworks() if f.name == name)
    if importlib.util.find_spec(fw.module) is None:
        return f"{name} is not installed ({fw.install_hint})"
    try:
        adapter = load_adapter(name)
    except FrameworkNotInstalledError as exc:
        return str(exc)
    if "cpu" in fw.device_kinds or adapter.gpu_count() > 0:
        return ""
    explain = getattr(adapter, "no_device_reason", None)
    return explain() if explain is not None else f"{name} sees no {fw.device_kinds[0]} device"


def usable(name: str) -> bool:
    """Installed, importable, and with a device to put arrays on."""
    return not unusable_reason(name)


@functools.cache
def has_gpu() -> bool:
    """A CUDA GPU is visible to torch or cupy."""
    for name in ("torch", "cupy"):
        if importlib.util.find_spec(name) is not None and load_adapter(name).gpu_count() > 0:
            return True
    return False


def builtin_names() -> list[str]:
    """The built-in rows (their adapters ship in memtype; rows registered by tests do not)."""
    return [fw.name for fw in iter_frameworks() if fw.adapter.startswith("memtype.")]


def available_types() -> list[str]:
    return [name for name in builtin_names() if usable(name)]
