"""An example pipeline file for ``memtype run``.

    memtype demo --out demo                # makes a synthetic plate in demo/images
    memtype run examples/pipeline_example.py --input demo/images --output results
    memtype run examples/pipeline_example.py --input demo/images --output results \\
        --executor dask --workers 2 --overwrite

Each well is one task. Per (well, site, channel) z-stack: scale to [0, 1] in torch, remove
each plane's offset in jax, project over z in NumPy, and measure the projection in NumPy.
The projections go to ``results/plate.zarr`` (OME-Zarr), the measurements to
``results/stats.csv``. The module-level name ``pipeline`` is what ``memtype run`` looks for.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import memtype as mt
from memtype.pipeline import FunctionStep, Pipeline


@mt.torch
def scale_to_unit(stack: Any, maximum: float = 65535.0) -> Any:
    """uint16 counts -> float32 in [0, 1]."""
    import torch

    return stack.to(torch.float32) / maximum


@mt.jax
def remove_offset(stack: Any) -> Any:
    """Subtract each plane's minimum (a crude dark-level correction)."""
    return stack - stack.min(axis=(1, 2), keepdims=True)


@mt.numpy
def max_project(stack: np.ndarray) -> np.ndarray:
    """Maximum over z, kept as a one-plane stack."""
    return stack.max(axis=0, keepdims=True)


@mt.numpy
def measure(stack: np.ndarray, threshold: float = 0.02) -> tuple[np.ndarray, dict[str, float]]:
    """The projection unchanged, plus its mean, maximum and area above ``threshold``."""
    plane = stack[0]
    stats = {"mean": float(plane.mean()), "max": float(plane.max()),
             "area_fraction": float((plane > threshold).mean())}
    return stack, stats


pipeline = Pipeline(
    [
        FunctionStep(scale_to_unit, dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT),
        FunctionStep(remove_offset),
        FunctionStep(max_project),
        FunctionStep(measure, outputs=("stats",), threshold=0.02),
    ],
    pattern="{well}_s{site}_w{channel}_z{z:03d}.tif",
    task_by=("well",),
    name="example",
)
