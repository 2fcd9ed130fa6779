"""Thresholds from a stack's histogram, computed as scikit-image 0.26 computes them.

torch and JAX build the histogram where the stack is (the O(n) part, with
``skimage.exposure.histogram``'s bins: one per value of an integer stack, else 256 equal bins
from the minimum to the maximum); the threshold is then chosen here, on the host, from the
counts (at most one per integer value), with scikit-image's own arithmetic: the same dtypes
and the same NumPy operations, so the threshold is the same number.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["otsu_threshold", "triangle_threshold", "li_threshold"]

Array = np.ndarray[Any, Any]


def otsu_threshold(counts: Array, centers: Array) -> Any:
    """``skimage.filters.threshold_otsu`` of the stack with this histogram (float32 class
    weights, the first maximum of the between-class variance; one value: that value)."""
    if np.count_nonzero(counts) == 1:
        return centers[int(np.argmax(counts))]
    counts = counts.astype(np.float32)
    weight1 = np.cumsum(counts)
    weight2 = np.cumsum(counts[::-1])[::-1]
    mean1 = np.cumsum(counts * centers) / weight1
    mean2 = (np.cumsum((counts * centers)[::-1]) / weight2[::-1])[::-1]
    variance12 = weight1[:-1] * weight2[1:] * (mean1[:-1] - mean2[1:]) ** 2
    return centers[int(np.argmax(variance12))]


def triangle_threshold(counts: Array, centers: Array) -> Any:
    """``skimage.filters.threshold_triangle`` of the stack with this histogram (integer
    counts; the longest distance to the line from the peak to the far end of the longer
    tail)."""
    nbins = len(counts)
    arg_peak = int(np.argmax(counts))
    peak_height = counts[arg_peak]
    low, high = (int(i) for i in np.flatnonzero(counts)[[0, -1]])
    if low == high:  # one value
        return centers[low]
    flip = arg_peak - low < high - arg_peak
    if flip:
        counts = counts[::-1]
        low, arg_peak = nbins - high - 1, nbins - arg_peak - 1
    width = arg_peak - low
    x1 = np.arange(width)
    norm = np.sqrt(peak_height**2 + width**2)
    length = peak_height / norm * x1 - width / norm * counts[x1 + low]
    level = int(np.argmax(length)) + low
    return centers[nbins - level - 1 if flip else level]


def li_threshold(counts: Array, values: Array) -> float:
    """``skimage.filters.threshold_li`` of an integer stack from its histogram: ``values``
    are the stack's values minus its minimum (``0, 1, ...``), the result is in those units
    (add the minimum back). Li's iteration over the histogram until the threshold moves by
    at most 0.5 (scikit-image's float stacks iterate over the pixels instead)."""
    weights = counts.astype(np.float32)
    tolerance = 0.5
    t_next = float(np.average(values, weights=counts.astype(np.float64)))
    t_curr = -2 * tolerance
    while abs(t_next - t_curr) > tolerance:
        t_curr = t_next
        foreground = values > t_curr
        mean_fore = np.average(values[foreground], weights=weights[foreground])
        mean_back = np.average(values[~foreground], weights=weights[~foreground])
        if mean_back == 0:
            break
        t_next = float((mean_back - mean_fore) / (np.log(mean_back) - np.log(mean_fore)))
    return t_next
