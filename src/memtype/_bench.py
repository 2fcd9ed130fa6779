"""What `memtype bench` measures: the conversion matrix (also used by `benchmarks/`)."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtype.conversion import convert, shares_memory
from memtype.errors import InvalidArgumentError, MemtypeError
from memtype.frameworks import (
    DeviceAdapter,
    aligned_copy,
    is_installed,
    iter_frameworks,
    load_adapter,
)

__all__ = ["Cell", "parse_size", "median_seconds", "source_array", "usable_types", "measure",
           "run_matrix", "heatmap"]

_UNITS = {"": 1, "B": 1, "KIB": 2**10, "KB": 10**3, "MIB": 2**20, "MB": 10**6,
          "GIB": 2**30, "GB": 10**9}


@dataclass(frozen=True)
class Cell:
    """One timed conversion: median seconds and whether the result shared memory."""

    source: str
    target: str
    nbytes: int
    seconds: float
    zero_copy: bool
    error: str = ""


def parse_size(text: str) -> int:
    """``"64MiB"`` -> bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).upper() if match else "?"
    if match is None or unit not in _UNITS:
        raise InvalidArgumentError(
            f"Cannot read size {text!r}; expected e.g. 1KiB, 1MiB, 64MiB, 2GB.")
    return int(float(match.group(1)) * _UNITS[unit])


def median_seconds(fn: Callable[[], Any], repeats: int, number: int = 1) -> float:
    """Median over ``repeats`` of the mean time of ``number`` back-to-back calls."""
    for _ in range(number):  # warm-up
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def source_array(nbytes: int, memory_type: str) -> Any:
    """A 64-byte-aligned, C-contiguous float32 array of about ``nbytes`` in ``memory_type``."""
    n = max(nbytes // 4, 1)
    cols = 256 if n >= 256 else n
    host = aligned_copy(np.arange(n - n % cols, dtype=np.float32).reshape(-1, cols))
    return convert(host, memory_type)


def usable_types() -> list[str]:
    """Memory types installed here with a device to run on."""
    names = []
    for fw in iter_frameworks():
        if not is_installed(fw):
            continue
        adapter = load_adapter(fw.name)
        if "cpu" in fw.device_kinds or (isinstance(adapter, DeviceAdapter)
                                        and adapter.gpu_count() > 0):
            names.append(fw.name)
    return names


def _calls_for(nbytes: int) -> int:
    return 200 if nbytes <= 2**16 else 20 if nbytes <= 2**22 else 1


def measure(source: str, target: str, nbytes: int, repeats: int) -> Cell:
    """Time ``memtype.convert`` from ``source`` to ``target`` at ``nbytes``."""
    x = source_array(nbytes, source)
    try:
        out = convert(x, target)
        zero = shares_memory(x, out)
        seconds = median_seconds(lambda: convert(x, target), repeats, _calls_for(nbytes))
    except MemtypeError as exc:
        return Cell(source, target, nbytes, float("nan"), False, str(exc))
    return Cell(source, target, nbytes, seconds, zero)


def _fmt(seconds: float) -> str:
    if seconds != seconds:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e3:.2f} ms"


def table(cells: Sequence[Cell], types: Sequence[str], nbytes: int) -> str:
    """A Markdown table (rows: source, columns: target) of one size; ``*`` marks zero-copy."""
    lookup = {(c.source, c.target): c for c in cells if c.nbytes == nbytes}
    lines = ["| from \\ to | " + " | ".join(types) + " |", "|---" * (len(types) + 1) + "|"]
    for s in types:
        row = []
        for t in types:
            c = lookup[(s, t)]
            row.append(_fmt(c.seconds) + (" *" if c.zero_copy else ""))
        lines.append(f"| {s} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def heatmap(cells: Sequence[Cell], types: Sequence[str], sizes: Sequence[int], path: str) -> None:
    """Write a heatmap PNG (log10 µs per conversion, one panel per size)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 4), squeeze=False)
    lookup = {(c.source, c.target, c.nbytes): c for c in cells}
    for ax, nbytes in zip(axes[0], sizes):
        grid = np.array([[np.log10(lookup[(s, t, nbytes)].seconds * 1e6) for t in types]
                         for s in types])
        im = ax.imshow(grid, cmap="viridis")
        ax.set_xticks(range(len(types)), types, rotation=45, ha="right")
        ax.set_yticks(range(len(types)), types)
        ax.set_title(f"{nbytes / 2**20:g} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:g} KiB")
        for i, s in enumerate(types):
            for j, t in enumerate(types):
                if lookup[(s, t, nbytes)].zero_copy:
                    ax.text(j, i, "0", ha="center", va="center", color="white", fontsize=8)
        fig.colorbar(im, ax=ax, label="log10 µs")
    fig.suptitle("memtype.convert, median time (0 = zero-copy)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_matrix(sizes: Sequence[str], repeats: int = 11, png: str | None = None) -> str:
    """Measure every ordered pair at every size; the Markdown text (and a PNG if asked)."""
    types = usable_types()
    byte_sizes = [parse_size(s) for s in sizes]
    cells = [measure(s, t, n, repeats) for n in byte_sizes for s in types for t in types]
    parts = []
    for n, label in zip(byte_sizes, sizes):
        parts.append(f"### {label} (median per conversion; * = result shares memory)\n")
        parts.append(table(cells, types, n) + "\n")
    if png:
        heatmap(cells, types, byte_sizes, png)
        parts.append(f"Heatmap written to {png}")
    return "\n".join(parts)
