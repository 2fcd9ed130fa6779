"""GPU cache and memory manager benchmark: what a cache hit, a miss and a tracked allocation cost.

* ``GPUTensorCache``: ``get`` hit and miss, ``cache[key]``, ``get_or_compute`` hit, ``put``
  (replace, and with an LRU eviction), next to a plain ``dict.get`` and a
  ``functools.lru_cache`` hit (target: a hit under 2 µs).
* ``GPUMemoryManager``: ``allocate`` + ``release`` of NumPy and torch (CPU) arrays, next to the
  framework's own ``zeros`` (what the tracking, the budget check and the conversion add).

Each figure is the median, over ``--repeats`` batches, of the mean time of one call in a batch
of ``--number`` back-to-back calls (loop overhead included). Writes
``benchmarks/results/gpu_cache.md``. Run: ``python benchmarks/gpu_cache.py [--repeats 200]``.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import torch  # noqa: E402

from memtype._bench import median_seconds  # noqa: E402
from memtype.gpu import GPUMemoryManager, GPUTensorCache  # noqa: E402

OUT = Path(__file__).resolve().parent / "results"


def per_call(fn: Callable[[], Any], number: int, repeats: int) -> float:
    """Median over ``repeats`` batches of the mean seconds per call of ``fn``."""
    return median_seconds(fn, repeats, number)


def cache_rows(number: int, repeats: int) -> list[tuple[str, float, str, float | None]]:
    """(operation, seconds, baseline name, baseline seconds) for the cache."""
    value = np.zeros(1024, dtype=np.float32)
    cache = GPUTensorCache(max_bytes=1 << 30, max_items=10_000)
    for i in range(1000):
        cache.put(f"key{i}", value)
    plain = {f"key{i}": value for i in range(1000)}

    @functools.lru_cache(maxsize=10_000)
    def cached(key: str) -> np.ndarray:
        return value

    cached("key500")
    dict_hit = per_call(lambda: plain.get("key500"), number, repeats)
    lru_hit = per_call(lambda: cached("key500"), number, repeats)
    full = GPUTensorCache(max_items=1000)
    counter = iter(range(10**9))
    for i in range(1000):
        full.put(f"k{i}", value)
    rows: list[tuple[str, float, str, float | None]] = [
        ("get hit", per_call(lambda: cache.get("key500"), number, repeats), "dict.get", dict_hit),
        ("get hit", per_call(lambda: cache.get("key500"), number, repeats),
         "functools.lru_cache hit", lru_hit),
        ("cache[key] hit", per_call(lambda: cache["key500"], number, repeats), "dict.get",
         dict_hit),
        ("get_or_compute hit", per_call(lambda: cache.get_or_compute("key500", lambda: value),
                                        number, repeats), "dict.get", dict_hit),
        ("get miss", per_call(lambda: cache.get("absent"), number, repeats), "dict.get",
         per_call(lambda: plain.get("absent"), number, repeats)),
        ("put (replace a key)", per_call(lambda: cache.put("key500", value), number, repeats),
         "", None),
        ("put (new key, evicts the LRU entry)",
         per_call(lambda: full.put(f"n{next(counter)}", value), number, repeats), "", None),
    ]
    return rows


def manager_rows(number: int, repeats: int) -> list[tuple[str, float, str, float | None]]:
    """(operation, seconds, baseline name, baseline seconds) for the memory manager."""
    manager = GPUMemoryManager(limit_bytes=1 << 30)
    rows: list[tuple[str, float, str, float | None]] = []
    for shape in ((16,), (256, 256)):
        label = "x".join(map(str, shape))
        rows.append((
            f"allocate + release, numpy float32 {label}",
            per_call(lambda s=shape: manager.release(manager.allocate(s, "float32", "numpy")),
                     number, repeats),
            "numpy.zeros", per_call(lambda s=shape: np.zeros(s, dtype=np.float32), number, repeats),
        ))
        rows.append((
            f"allocate + release, torch (CPU) float32 {label}",
            per_call(lambda s=shape: manager.release(manager.allocate(s, "float32", "torch")),
                     number, repeats),
            "torch.zeros", per_call(lambda s=shape: torch.zeros(s, dtype=torch.float32),
                                    number, repeats),
        ))

    def scoped() -> None:
        with manager.memory_context():
            manager.allocate((16,), "float32", "numpy")

    rows.append(("memory_context + one allocate (numpy 16)", per_call(scoped, number, repeats),
                 "numpy.zeros", per_call(lambda: np.zeros(16, dtype=np.float32), number, repeats)))
    return rows


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3f} µs"


def report(rows: list[tuple[str, float, str, float | None]], number: int, repeats: int) -> str:
    """The Markdown table, with the machine and date."""
    lines = [
        "| operation | memtype (median) | baseline | baseline (median) | ratio |",
        "|---|---:|---|---:|---:|",
    ]
    for name, seconds, base_name, base in rows:
        ratio = f"{seconds / base:.1f}x" if base else ""
        lines.append(f"| {name} | {_us(seconds)} | {base_name} | "
                     f"{_us(base) if base else ''} | {ratio} |")
    hits = [s for n, s, _, _ in rows if n == "get hit"]
    verdict = "met" if max(hits) < 2e-6 else "NOT met"
    lines += [
        "",
        f"Cache hit target (< 2 µs): **{verdict}** ({_us(min(hits))}). Medians of {repeats} "
        f"batches of {number} calls, loop overhead included.",
        f"Machine: {platform.machine()} {os.cpu_count()}-core CPU, no GPU; Python "
        f"{platform.python_version()}, numpy {np.__version__}, torch {torch.__version__}. "
        f"Date: {datetime.date.today().isoformat()}.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--number", type=int, default=2000)
    args = parser.parse_args()
    rows = cache_rows(args.number, args.repeats) + manager_rows(args.number // 4, args.repeats)
    text = report(rows, args.number, args.repeats)
    print(text)
    OUT.mkdir(exist_ok=True)
    (OUT / "gpu_cache.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
