"""What the dtype policy knows of dtypes' ranges, and where bounded values land in them."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

__all__ = ["Bounds", "int_range", "exact_below", "float_max", "rounds_into", "unit_fits"]

Bounds = tuple[float, float]
"""An interval holding every finite value of an array; for an integer target also a
promise that the array has no NaN or infinity (the decision's minimum and maximum)."""


@functools.cache
def int_range(dtype: np.dtype[Any]) -> tuple[int, int]:
    """The smallest and largest value of an integer (or bool) dtype."""
    if dtype.kind == "b":
        return 0, 1
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


@functools.cache
def exact_below(dtype: np.dtype[Any]) -> int:
    """Integers below this are exact in float ``dtype`` (``2 ** (mantissa bits + 1)``)."""
    return int(2 ** (np.finfo(dtype).nmant + 1))


@functools.cache
def float_max(dtype: np.dtype[Any]) -> float:
    """The largest finite value of a float dtype (ml_dtypes for bfloat16)."""
    if dtype.kind == "f" and dtype.name != "bfloat16":
        return float(np.finfo(dtype).max)
    import ml_dtypes

    return float(ml_dtypes.finfo(dtype).max)  # type: ignore[no-untyped-call]


def rounds_into(bounds: Bounds | None, dst: np.dtype[Any]) -> bool:
    """Whether values in ``bounds`` (no NaN) round half to even into ``dst``'s range."""
    if bounds is None or not (math.isfinite(bounds[0]) and math.isfinite(bounds[1])):
        return False
    lo, hi = int_range(dst)
    return lo <= round(bounds[0]) and round(bounds[1]) <= hi


def unit_fits(bounds: Bounds | None, work: np.dtype[Any], lo: int, hi: int) -> bool:
    """Whether unit floats in ``bounds`` land in ``[lo, hi]`` once scaled in ``work``.

    The scaling is monotonic, so its values lie between those of the bounds, computed here
    as the framework computes them (NumPy scalars of ``work``); the margin of a quarter
    covers any last-bit difference, where ``work`` holds the range's integers exactly."""
    if bounds is None or not -1.0 <= bounds[0] <= bounds[1] <= 1.0 or hi >= exact_below(work):
        return False
    w = work.type
    if lo == 0:
        ends = (w(bounds[0]) * w(float(hi)), w(bounds[1]) * w(float(hi)))
    else:
        span = float(hi - lo)
        ends = tuple((w(b) - w(1.0 / span)) * w(span / 2.0) for b in bounds)
    return bool(lo - 0.25 <= ends[0] and ends[1] <= hi + 0.25)
