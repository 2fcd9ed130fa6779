"""The Markdown report of ``benchmarks/gpu.py``: its rows, its tables, and the machine."""

from __future__ import annotations

import datetime
import importlib.util
import math
import os
import platform
import sys
from dataclasses import dataclass

import memtype as mt

GPU_TYPES = ("cupy", "torch", "jax")


@dataclass(frozen=True)
class Row:
    """One pair at one size: median seconds per conversion in each column."""

    label: str
    nbytes: int
    source: str
    target: str
    ours: float
    direct: float
    peer: float
    zero_copy: bool


@dataclass(frozen=True)
class DecoratorRow:
    """One decorator case: seconds per call, plain, through memtype, through arraybridge."""

    label: str
    plain: float
    ours: float
    peer: float


def fmt(seconds: float) -> str:
    """Seconds as µs or ms."""
    if math.isnan(seconds):
        return "n/a"
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def ratio(a: float, b: float) -> str:
    """``a / b`` as ``0.87x``."""
    return "n/a" if math.isnan(a) or math.isnan(b) or b == 0 else f"{a / b:.2f}x"


def _spread(values: list[float], unit: str) -> str:
    """``median / max`` of finite values."""
    finite = sorted(v for v in values if not math.isnan(v))
    if not finite:
        return "n/a"
    return f"{finite[len(finite) // 2]:.2f}{unit} / {finite[-1]:.2f}{unit}"


def summary(rows: list[Row]) -> list[str]:
    """Per size: GPU <-> GPU overhead over the direct call, host <-> GPU ratio, vs arraybridge."""
    lines = ["| size | GPU<->GPU pairs zero-copy | GPU<->GPU memtype - direct (µs): median / max "
             "| host<->GPU memtype / direct: median / max | memtype / arraybridge: median / max |",
             "|---|---|---|---|---|"]
    for label in dict.fromkeys(r.label for r in rows):
        sized = [r for r in rows if r.label == label and r.source != r.target]
        gpu = [r for r in sized if r.source in GPU_TYPES and r.target in GPU_TYPES]
        host = [r for r in sized if "numpy" in (r.source, r.target)]
        lines.append(
            f"| {label} | {sum(r.zero_copy for r in gpu)} of {len(gpu)} "
            f"| {_spread([(r.ours - r.direct) * 1e6 for r in gpu], '')} "
            f"| {_spread([r.ours / r.direct for r in host], 'x')} "
            f"| {_spread([r.ours / r.peer for r in sized], 'x')} |")
    return lines


def constant_time(rows: list[Row]) -> list[str]:
    """GPU <-> GPU pairs: memtype's time at the largest size over its time at the smallest."""
    by_size = sorted({r.nbytes for r in rows})
    if len(by_size) < 2:
        return []
    small, large = by_size[0], by_size[-1]
    lookup = {(r.source, r.target, r.nbytes): r for r in rows}
    lines = [f"| pair | memtype at {small} B | memtype at {large} B | ratio |", "|---|---|---|---|"]
    for s in GPU_TYPES:
        for t in GPU_TYPES:
            a, b = lookup.get((s, t, small)), lookup.get((s, t, large))
            if s != t and a is not None and b is not None:
                lines.append(f"| {s} -> {t} | {fmt(a.ours)} | {fmt(b.ours)} | "
                             f"{ratio(b.ours, a.ours)} |")
    return lines


def table(rows: list[Row]) -> list[str]:
    """Every row."""
    lines = ["| size | from | to | memtype | best direct | arraybridge | memtype - direct | "
             "memtype / direct | memtype / arraybridge | memtype GB/s | zero-copy |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        over = "n/a" if math.isnan(r.ours - r.direct) else f"{(r.ours - r.direct) * 1e6:+.1f} µs"
        rate = "—" if r.zero_copy or r.source == r.target or math.isnan(r.ours) else \
            f"{r.nbytes / r.ours / 1e9:.1f}"
        lines.append(f"| {r.label} | {r.source} | {r.target} | {fmt(r.ours)} | {fmt(r.direct)} | "
                     f"{fmt(r.peer)} | {over} | {ratio(r.ours, r.direct)} | "
                     f"{ratio(r.ours, r.peer)} | {rate} | {'yes' if r.zero_copy else 'no'} |")
    return lines


def decorator_table(rows: list[DecoratorRow]) -> list[str]:
    """The decorator rows."""
    lines = ["| case | plain call | memtype | memtype overhead | arraybridge | "
             "arraybridge overhead |", "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.label} | {fmt(r.plain)} | {fmt(r.ours)} | {fmt(r.ours - r.plain)} | "
                     f"{fmt(r.peer)} | {fmt(r.peer - r.plain)} |")
    return lines


def _version(module: str) -> str:
    """A module's version, or "not installed"."""
    if importlib.util.find_spec(module) is None:
        return "not installed"
    return str(getattr(__import__(module), "__version__", "?"))


def _driver() -> str:
    """The NVIDIA driver's version from NVML, or why it is unknown."""
    try:
        import pynvml
    except ImportError:
        return "unknown (no nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
        return str(pynvml.nvmlSystemGetDriverVersion())
    except pynvml.NVMLError as exc:
        return f"unknown ({exc})"


def machine() -> str:
    """GPU, driver, CPU and versions, for the report's header."""
    gpus = mt.gpu.get_gpu_manager().gpus()
    gpu = "?" if not gpus else (
        f"{gpus[0].name}, {gpus[0].total_bytes / 2**30:.0f} GiB, compute capability "
        f"{'.'.join(map(str, gpus[0].compute_capability or ()))} ({len(gpus)} visible)")
    cuda = "?"
    if "torch" in sys.modules:
        cuda = f"{sys.modules['torch'].version.cuda} (torch)"
    versions = ", ".join(f"{m} {_version(m)}" for m in
                         ("numpy", "torch", "cupy", "jax", "jaxlib", "arraybridge"))
    return (f"GPU: {gpu}; driver {_driver()}; CUDA {cuda}. CPU: "
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores. Python "
            f"{platform.python_version()}; {versions}; memtype {mt.__version__}. "
            f"Date: {datetime.date.today().isoformat()}.")


def report(rows: list[Row], rewrap: dict[str, float], deco: list[DecoratorRow], options: str,
           skipped: list[str], budget_s: float | None) -> str:
    """The Markdown report; ``options`` describes the run, ``skipped`` what the budget cut."""
    lines = [
        "# GPU benchmark (benchmarks/gpu.py)", "", machine(), "",
        f"Options: {options}. Medians per call; every batch ends with a device "
        "synchronisation inside the timed region. Read ratios and medians.", "",
        "## Conversions", "", *summary(rows), "",
        "O(1) check (GPU <-> GPU, memtype):", "", *constant_time(rows), "",
        "JAX sources are re-wrapped before every call of every column (a DLPack alias, so "
        "that JAX's cached host copy is not reused); that re-wrap alone costs "
        + (", ".join(f"{fmt(v)} at {k}" for k, v in rewrap.items()) or "n/a") + ".", "",
        *table(rows), "",
        "## Decorators with GPU inputs", "", *decorator_table(deco), "",
    ]
    if skipped:
        lines += [f"Not measured (time budget of {budget_s or 0:.0f} s reached): "
                  + "; ".join(skipped) + ".", ""]
    return "\n".join(lines)
