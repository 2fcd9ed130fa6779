"""The operations' torch implementations (plain tensor code, on the tensor's device)."""

from __future__ import annotations

from typing import Any

import numpy as np

from memtype.pipeline.catalog.implementations.histogram import (
    li_threshold,
    otsu_threshold,
    triangle_threshold,
)
from memtype.pipeline.catalog.implementations.host import _to_host

__all__ = ["tensor_maximum", "tensor_minimum", "tensor_opening", "tensor_closing",
           "tensor_white_tophat", "tensor_black_tophat", "tensor_gaussian",
           "tensor_sobel", "tensor_otsu_mask", "tensor_triangle_mask", "tensor_li_mask",
           "tensor_median", "tensor_rescale_intensity", "tensor_remove_small_objects",
           "tensor_max_projection", "tensor_mean_projection", "tensor_sum_projection"]

_WINDOW_BYTES = 1 << 26  # the median's windows gathered at once (a band of rows)


def _work_dtype(stack: Any) -> Any:
    """The float dtype a torch filter computes in: float32, or float64 for wider inputs."""
    import torch

    if stack.dtype == torch.float64 or (not stack.dtype.is_floating_point
                                        and stack.element_size() > 2):
        return torch.float64
    return torch.float32


def _planes(stack: Any, pad: int) -> Any:
    """The stack as ``[Z, 1, Y, X]`` in its work dtype, edges replicated by ``pad``."""
    import torch.nn.functional as F  # noqa: N812

    x = stack.to(_work_dtype(stack)).unsqueeze(1)
    return F.pad(x, (pad, pad, pad, pad), mode="replicate") if pad else x


def _tensor_box(stack: Any, radius: int, maximum: bool) -> Any:
    """A per-plane (2r+1)^2 box maximum (or minimum) of a tensor, in its work dtype."""
    import torch.nn.functional as F  # noqa: N812

    x = _planes(stack, radius)
    size = 2 * radius + 1
    out = F.max_pool2d(x, size, stride=1) if maximum else -F.max_pool2d(-x, size, stride=1)
    return out.squeeze(1)


def tensor_maximum(stack: Any, radius: int = 1) -> Any:
    """Per-plane maximum over a (2r+1)^2 box (``max_pool2d``), in the stack's dtype."""
    return _tensor_box(stack, radius, True).to(stack.dtype)


def tensor_minimum(stack: Any, radius: int = 1) -> Any:
    """Per-plane minimum over a (2r+1)^2 box, in the stack's dtype."""
    return _tensor_box(stack, radius, False).to(stack.dtype)


def tensor_opening(stack: Any, radius: int = 1) -> Any:
    """Per-plane box opening of a tensor, in the stack's dtype."""
    return _tensor_box(_tensor_box(stack, radius, False), radius, True).to(stack.dtype)


def tensor_closing(stack: Any, radius: int = 1) -> Any:
    """Per-plane box closing of a tensor, in the stack's dtype."""
    return _tensor_box(_tensor_box(stack, radius, True), radius, False).to(stack.dtype)


def tensor_white_tophat(stack: Any, radius: int = 1) -> Any:
    """The stack minus its per-plane box opening, in the stack's dtype."""
    opened = _tensor_box(_tensor_box(stack, radius, False), radius, True)
    return (stack.to(opened.dtype) - opened).to(stack.dtype)


def tensor_black_tophat(stack: Any, radius: int = 1) -> Any:
    """The per-plane box closing minus the stack, in the stack's dtype."""
    closed = _tensor_box(_tensor_box(stack, radius, True), radius, False)
    return (closed - stack.to(closed.dtype)).to(stack.dtype)


def tensor_gaussian(stack: Any, sigma: float = 1.0) -> Any:
    """Per-plane Gaussian of a tensor as scipy.ndimage / scikit-image compute it: truncated
    at 4 sigma, edges ``nearest``; float (input units), rounded back by the dtype policy."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    radius = int(4.0 * float(sigma) + 0.5)
    x = _planes(stack, radius)
    grid = torch.arange(-radius, radius + 1, dtype=x.dtype, device=x.device)
    weights = torch.exp(-0.5 * (grid / float(sigma)) ** 2)
    weights = weights / weights.sum()
    x = F.conv2d(x, weights.view(1, 1, -1, 1))
    return F.conv2d(x, weights.view(1, 1, 1, -1)).squeeze(1)


def tensor_sobel(stack: Any) -> Any:
    """Per-plane Sobel magnitude of a tensor (scipy.ndimage's kernel, edges ``nearest``),
    float32 in the input's units."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    x = _planes(stack, 1).to(torch.float32)
    smooth = torch.tensor([1.0, 2.0, 1.0], device=x.device)
    diff = torch.tensor([-1.0, 0.0, 1.0], device=x.device)
    gy = F.conv2d(x, torch.outer(diff, smooth).view(1, 1, 3, 3))
    gx = F.conv2d(x, torch.outer(smooth, diff).view(1, 1, 3, 3))
    return torch.hypot(gy, gx).squeeze(1)


def _tensor_histogram(x: Any) -> tuple[Any, Any]:
    """Counts (int64) and bin centres as ``skimage.exposure.histogram(x, 256,
    source_range="image")`` makes them: one bin per value of an integer tensor, else 256
    equal bins from the minimum to the maximum (NumPy's edges: float64 ``linspace`` cast to
    the tensor's dtype, a value on an edge in the upper bin, the maximum in the last)."""
    import torch

    flat = x.reshape(-1)
    if not x.dtype.is_floating_point:  # torch has no min/max of uint16/uint32 (2.13)
        flat = flat.to(torch.int32 if x.element_size() <= 2 else torch.int64)
        low, high = int(flat.min()), int(flat.max())
        counts = torch.bincount(flat.long() - low, minlength=high - low + 1)
        return counts, torch.arange(low, high + 1, dtype=torch.float64, device=x.device)
    edges = torch.linspace(float(flat.min()), float(flat.max()), 257, dtype=torch.float64,
                           device=x.device).to(x.dtype)
    index = (torch.bucketize(flat, edges, right=True) - 1).clamp(0, 255)
    counts = torch.bincount(index, minlength=256)
    return counts, (edges[:-1] + edges[1:]) / 2


def tensor_otsu_mask(stack: Any) -> Any:
    """Pixels above the stack's Otsu threshold: ``skimage.filters.threshold_otsu``'s
    histogram built in torch, the threshold chosen from it on the host (the same number)."""
    counts, centers = _tensor_histogram(stack)
    return _above(stack, otsu_threshold(_to_host(counts), _to_host(centers)))


def _above(stack: Any, threshold: Any) -> Any:
    """The pixels above ``threshold``: an integer stack widened (torch 2.13 has no uint16
    comparison) against the threshold's floor, a float stack in its own dtype."""
    import math

    import torch

    if stack.dtype.is_floating_point:
        return stack > torch.as_tensor(threshold, dtype=stack.dtype, device=stack.device)
    wide = stack.to(torch.int32 if stack.element_size() <= 2 else torch.int64)
    return wide > math.floor(float(threshold))


def tensor_triangle_mask(stack: Any) -> Any:
    """Pixels above the stack's triangle threshold: ``skimage.filters.threshold_triangle``'s
    histogram built in torch, the threshold chosen from it on the host (the same number)."""
    counts, centers = _tensor_histogram(stack)
    return _above(stack, triangle_threshold(_to_host(counts), _to_host(centers)))


def tensor_li_mask(stack: Any) -> Any:
    """Pixels above the stack's Li (minimum cross-entropy) threshold, as
    ``skimage.filters.threshold_li`` computes it: an integer stack's iteration runs on its
    histogram (built in torch), a float stack's on its pixels in their own dtype."""
    import torch

    flat = stack.reshape(-1)
    if stack.dtype.is_floating_point:
        flat = flat[torch.isfinite(flat)]  # scikit-image drops NaN, then infinities
        if flat.numel() == 0 or bool((flat == flat[0]).all()):
            return torch.zeros_like(stack, dtype=torch.bool)
        low = flat.min()
        return stack > _tensor_li_float(flat - low) + low
    counts, centers = _tensor_histogram(stack)
    if counts.numel() == 1:
        return torch.zeros_like(stack, dtype=torch.bool)
    low = int(centers[0])
    values = np.arange(counts.numel(), dtype=np.int64)
    return _above(stack, li_threshold(_to_host(counts), values) + low)


def _tensor_li_float(flat: Any) -> Any:
    """Li's iteration over a float tensor of finite values from 0 (scikit-image's: the
    means of the two classes in the tensor's dtype until the threshold moves by at most
    half the smallest step between two values)."""
    import torch

    steps = torch.diff(torch.unique(flat))
    tolerance = steps.min() / 2
    t_next, t_curr = flat.mean(), -2 * tolerance
    while bool(abs(t_next - t_curr) > tolerance):
        t_curr = t_next
        foreground = flat > t_curr
        mean_fore, mean_back = flat[foreground].mean(), flat[~foreground].mean()
        if bool(mean_back == 0):
            break
        t_next = (mean_back - mean_fore) / (torch.log(mean_back) - torch.log(mean_fore))
    return t_next


def tensor_median(stack: Any, radius: int = 1) -> Any:
    """Per-plane median over a (2r+1)^2 box (edges ``nearest``), in the stack's dtype: an
    odd count, so torch's median (the lower of two middles) is the middle value. Windows are
    gathered for a band of rows at a time (at most ~64 MiB of windows)."""
    import torch

    size = 2 * radius + 1
    x = _planes(stack, radius).squeeze(1)
    height, width = stack.shape[1:]
    band = max(1, _WINDOW_BYTES // max(1, width * size * size * x.element_size()))
    out = torch.empty(stack.shape, dtype=x.dtype, device=x.device)
    for z in range(x.shape[0]):
        for top in range(0, height, band):
            rows = x[z, top:top + min(band, height - top) + 2 * radius]
            windows = rows.unfold(0, size, 1).unfold(1, size, 1)
            out[z, top:top + windows.shape[0]] = windows.reshape(
                *windows.shape[:2], -1).median(-1).values
    return out.to(stack.dtype)


def tensor_rescale_intensity(stack: Any) -> Any:
    """The stack's [minimum, maximum] onto [0, 1], float32 (a constant stack: 0)."""
    x = stack.float()
    low, high = x.min(), x.max()
    span = float(high - low)
    return (x - low) / span if span > 0 else x - low


def tensor_remove_small_objects(labels: Any, min_size: int = 64) -> Any:
    """The labels with every object of fewer than ``min_size`` pixels set to 0 (ids kept)."""
    import torch

    ids = labels.long()
    counts = torch.bincount(ids.ravel())
    keep = counts >= int(min_size)
    keep[0] = False
    return torch.where(keep[ids], labels, torch.zeros_like(labels))


def tensor_max_projection(stack: Any) -> Any:
    """The maximum over z of a tensor, as one plane (uint16 and uint32 widened: torch 2.13
    has no maximum of them)."""
    import torch

    wider = {torch.uint16: torch.int32, torch.uint32: torch.int64}.get(stack.dtype)
    if wider is None:
        return stack.amax(0, keepdim=True)
    return stack.to(wider).amax(0, keepdim=True).to(stack.dtype)


def tensor_mean_projection(stack: Any) -> Any:
    """The mean over z (float32) of a tensor, as one plane."""
    return stack.float().mean(0, keepdim=True)


def tensor_sum_projection(stack: Any) -> Any:
    """The sum over z (float32) of a tensor, as one plane."""
    return stack.float().sum(0, keepdim=True)


