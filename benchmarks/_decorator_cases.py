"""What the decorator benchmarks (``decorators.py``, ``gpu.py``) measure: one row per case."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    """One benchmark row: the plain call, memtype's decorated call, arraybridge's (or None)."""

    label: str
    plain: Callable[[], Any]
    memtype: Callable[[], Any]
    arraybridge: Callable[[], Any] | None


def identity(image: Any) -> Any:
    """No work: the decorator's overhead alone."""
    return image


def batch_size(fn: Callable[[], Any], target_s: float, most: int) -> int:
    """How many calls of ``fn`` take about ``target_s`` (1 to ``most``)."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-9)
    return max(1, min(most, int(target_s / once)))


def alternating(fns: Sequence[Callable[[], Any]], number: int, repeats: int) -> list[float]:
    """Median seconds per call of each of ``fns``, timed in alternating rounds.

    Each round times one batch of ``number`` calls of every function in turn, so that
    noise from the machine (other processes, frequency changes) reaches all of them alike.
    """
    for fn in fns:  # warm-up
        fn()
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, times in zip(fns, samples, strict=True):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            times.append((time.perf_counter() - start) / number)
    return [statistics.median(times) for times in samples]
