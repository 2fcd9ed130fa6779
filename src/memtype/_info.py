"""The report printed by ``memtype info``: frameworks, devices, DLPack, what is missing."""

from __future__ import annotations

import importlib.util
import platform
from collections.abc import Sequence

from memtype import __version__
from memtype.errors import FrameworkNotInstalledError
from memtype.frameworks import (
    Framework,
    diagnostics,
    iter_frameworks,
    load_adapter,
    loaded_frameworks,
)
from memtype.gpu import get_gpu_manager

__all__ = ["info_report", "framework_rows", "runtime_lines"]


def _row(fw: Framework) -> tuple[str, str, str, str]:
    """(name, version, dlpack, devices) for one installed framework."""
    adapter = load_adapter(fw.name)
    said = diagnostics(adapter)
    devices = said.devices()
    if not devices:
        why = "; why: below" if said.no_device_reason() else ""
        devices = [f"none (no {'/'.join(fw.device_kinds)} device{why})"]
    return fw.name, adapter.version(), said.dlpack_version() or "-", "; ".join(devices)


def runtime_lines() -> list[str]:
    """What loaded adapters say about their runtime (``runtime_info``) and missing devices."""
    lines: list[str] = []
    for fw in loaded_frameworks():
        said = diagnostics(load_adapter(fw.name))
        described = said.runtime_info()
        if described:
            lines.append(f"{fw.name}: {described}")
        reason = said.no_device_reason()
        if reason:
            lines.append(f"{fw.name}: {reason}")
    return lines


def framework_rows() -> tuple[list[tuple[str, str, str, str]], list[tuple[str, str]]]:
    """Installed frameworks as rows, and missing ones as (name, install hint)."""
    found: list[tuple[str, str, str, str]] = []
    missing: list[tuple[str, str]] = []
    for fw in iter_frameworks():
        if importlib.util.find_spec(fw.module) is None:
            missing.append((fw.name, fw.install_hint))
            continue
        try:
            found.append(_row(fw))
        except FrameworkNotInstalledError as exc:
            missing.append((fw.name, str(exc)))
    return found, missing


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*row) for row in rows]
    return "\n".join(lines)


def _gpu_lines() -> list[str]:
    """The report's lines on the CUDA GPUs the manager sees."""
    gpus = get_gpu_manager().gpus()
    if not gpus:
        return ["GPUs: none (no CUDA device visible)"]
    lines = ["GPUs:"]
    for g in gpus:
        lines.append(f"  {g.index}: {g.name}  {g.total_bytes / 2**30:.1f} GiB total, "
                     f"{g.free_bytes / 2**30:.1f} GiB free")
    return lines


def info_report() -> str:
    """The text of ``memtype info``."""
    found, missing = framework_rows()
    python = f"Python {platform.python_version()} ({platform.machine()})"
    lines = [f"memtype {__version__} on {python}", ""]
    lines.append(_table(("framework", "version", "dlpack", "devices"), found))
    lines.append("")
    lines += _gpu_lines()
    lines += runtime_lines()
    if missing:
        lines += ["", "Missing:"] + [f"  {name}: {hint}" for name, hint in missing]
    return "\n".join(lines)
