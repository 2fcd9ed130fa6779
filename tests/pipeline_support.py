"""Shared by the pipeline tests: a small synthetic plate, and the example and demo pipelines
recomputed directly in NumPy (and scipy), without memtype."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

import numpy as np

from memtype.pipeline.synthetic import SyntheticPlate

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "pipeline_example.py"

SMALL = SyntheticPlate(wells=2, sites=2, channels=2, z_planes=3, size=64, cells=(3, 5))
"""2 wells x 2 sites x 2 channels x 3 planes of 64 x 64: 48 images, fast everywhere."""


def stacks(plate: SyntheticPlate) -> dict[tuple[str, int, int], np.ndarray[Any, Any]]:
    """Every (well, site, channel) z-stack of a plate, as generated."""
    return {(w, s, c): plate.stack(wi, s, c) for wi, w in enumerate(plate.well_names)
            for s in range(1, plate.sites + 1) for c in range(1, plate.channels + 1)}


def example_reference(stack: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], dict[str, float]]:
    """examples/pipeline_example.py in NumPy: scale, remove offset, project, measure."""
    x = stack.astype(np.float32) / np.float32(65535.0)
    x = x - x.min(axis=(1, 2), keepdims=True)
    p = x.max(axis=0)
    return p, {"mean": float(p.mean()), "max": float(p.max()),
               "area_fraction": float((p > 0.02).mean())}


def _interp(n: int, block: int) -> np.ndarray[Any, Any]:
    """Bilinear block-centre -> pixel-centre weights (written independently of memtype)."""
    blocks = -(-n // block)
    if blocks == 1:
        return np.ones((n, 1), np.float32)
    m = np.zeros((n, blocks), np.float32)
    for i in range(n):
        t = ((i + 0.5) / block - 0.5)
        left = int(np.clip(np.floor(t), 0, blocks - 2))
        frac = float(np.clip(t - left, 0.0, 1.0))
        m[i, left], m[i, left + 1] = 1.0 - frac, frac
    return m


def demo_reference(stack: np.ndarray[Any, Any],
                   block: int = 32) -> tuple[np.ndarray[Any, Any], int]:
    """The demo pipeline in NumPy/scipy: its projection after the median, and its blob count."""
    from scipy import ndimage

    x = stack.astype(np.float32)
    lo, hi = np.percentile(x, [1.0, 99.8], method="lower")
    x = np.clip((x - lo) / max(hi - lo, 1e-6), 0.0, 1.0).astype(np.float32)
    z, h, w = x.shape
    padded = np.pad(x, ((0, 0), (0, -h % block), (0, -w % block)), mode="edge")
    coarse = padded.reshape(z, padded.shape[1] // block, block, padded.shape[2] // block, block)
    coarse = coarse.min(axis=(2, 4))
    background = np.einsum("yi,zij,xj->zyx", _interp(h, block), coarse, _interp(w, block))
    y = np.maximum(x - background, 0.0)
    k = np.exp(-np.arange(-3, 4) ** 2 / 2.0)
    k = (k / k.sum()).astype(np.float32)
    y = ndimage.correlate1d(y, k, axis=2, mode="constant")
    y = ndimage.correlate1d(y, k, axis=1, mode="constant")
    p = ndimage.median_filter(y.max(axis=0), size=3, mode="nearest")
    labels, _ = ndimage.label(p > 0.2)
    areas = np.bincount(labels.ravel())[1:]
    return p, int((areas >= 9).sum())


def read_csv(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """Rows of a CSV file with a header."""
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(io.StringIO(fh.read())))


def write_plate(directory: Path, plate: SyntheticPlate = SMALL) -> Path:
    """Write a plate's TIFF files; returns the directory."""
    from memtype.pipeline.synthetic import write_synthetic_plate

    write_synthetic_plate(directory, plate)
    return directory


def load_field(plate_path: str | os.PathLike[str], well: str, site: int) -> np.ndarray[Any, Any]:
    """One field ``[C, Z, Y, X]`` of an OME-Zarr plate, read with zarr directly."""
    import zarr

    row, column = well[0], str(int(well[1:]))
    group = zarr.open_group(os.fspath(plate_path), mode="r")
    return np.asarray(group[f"{row}/{column}/{site}/0"][...])
