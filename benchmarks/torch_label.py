"""Why the catalog's ``label`` operation has no torch (or JAX) implementation: the plain one.

Connected components in tensors, as a GPU-minded implementation would write them: every
foreground voxel starts with its own id, each pass takes the largest id in the 3x3x3
neighbourhood (``max_pool3d``, full connectivity as ``skimage.measure.label``) and then
jumps pointers (each id replaced by the id its voxel now holds) until nothing changes. The
result is checked equal to ``scipy.ndimage.label`` up to renumbering; the time is compared
with scipy's on the same mask: scikit-image's coins resized to 1024 x 1024 and thresholded
(Otsu), one plane. Alternating rounds, medians, torch on one thread (scipy's is one).
Run: ``python benchmarks/torch_label.py [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from scipy import ndimage
from skimage import data, filters, transform


def propagate(mask: Any) -> tuple[Any, int]:
    """Connected components of a ``[Z, Y, X]`` bool tensor (ids up to 2^24: float32 pooling
    is exact) and the number of passes."""
    foreground = mask.reshape(-1)
    ids = torch.arange(1, mask.numel() + 1, dtype=torch.float32)
    labels = torch.where(foreground, ids, 0.0)
    passes = 0
    while True:
        passes += 1
        pooled = F.max_pool3d(labels.view(1, 1, *mask.shape), 3, 1, 1).reshape(-1)
        pooled = torch.where(foreground, pooled, 0.0)
        jumped = torch.where(foreground, pooled[(pooled - 1).clamp(min=0).long()], 0.0)
        if torch.equal(jumped, labels):
            return torch.unique(labels, return_inverse=True)[1].view(mask.shape), passes
        labels = jumped


def _same_labels(a: Any, b: Any) -> bool:
    """Equal up to renumbering."""
    if not np.array_equal(a > 0, b > 0):
        return False
    pairs = set(zip(a[a > 0].tolist(), b[b > 0].tolist(), strict=True))
    return len(pairs) == len({p for p, _ in pairs}) == len({q for _, q in pairs})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    torch.set_num_threads(1)
    image = transform.resize(data.coins(), (1024, 1024), order=1, preserve_range=True)
    mask = (image > filters.threshold_otsu(image))[None]
    structure = np.ones((3, 3, 3), bool)
    times: dict[str, list[float]] = {"scipy": [], "torch": []}
    tensor = torch.from_numpy(mask)
    for _ in range(rounds):
        start = time.perf_counter()
        reference, count = ndimage.label(mask, structure=structure)
        times["scipy"].append(time.perf_counter() - start)
        start = time.perf_counter()
        labels, passes = propagate(tensor)
        times["torch"].append(time.perf_counter() - start)
        assert _same_labels(reference, labels.numpy())
    scipy_s, torch_s = (statistics.median(times[k]) for k in ("scipy", "torch"))
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M")
    print(f"# torch label vs scipy.ndimage.label, {now} UTC, {platform.machine()} "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, {rounds} alternating "
          "rounds, medians")
    print(f"mask 1024 x 1024 (coins, Otsu), {count} objects, {passes} passes")
    print(f"scipy {scipy_s * 1e3:.1f} ms, torch {torch_s * 1e3:.0f} ms: "
          f"{torch_s / scipy_s:.0f}x")


if __name__ == "__main__":
    main()
