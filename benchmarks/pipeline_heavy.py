"""The CPU-heavy pipeline of benchmarks/pipeline.py (also runs with ``memtype run``).

Single-threaded scipy kernels, one task per (well, site), so that the speed-up of dask
workers over an inline run is the speed-up of processes over one core.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

import memtype as mt
from memtype.pipeline import Pipeline


@mt.numpy
def heavy_denoise(stack: np.ndarray) -> np.ndarray:
    """3x3 median in each plane."""
    return ndimage.median_filter(stack, size=(1, 3, 3), mode="nearest")


@mt.numpy
def heavy_background(stack: np.ndarray) -> np.ndarray:
    """Subtract a wide Gaussian background from each plane."""
    x = stack.astype(np.float32)
    return np.maximum(x - ndimage.gaussian_filter(x, sigma=(0, 8, 8)), 0.0)


@mt.numpy
def heavy_project(stack: np.ndarray) -> np.ndarray:
    """Maximum over z."""
    return stack.max(axis=0, keepdims=True)


pipeline = Pipeline([heavy_denoise, heavy_background, heavy_project],
                    task_by=("well", "site"), name="cpu-heavy")
