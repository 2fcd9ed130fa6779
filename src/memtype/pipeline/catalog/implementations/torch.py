"""The operations' torch implementations (plain tensor code, on the tensor's device)."""

from __future__ import annotations

from typing import Any

__all__ = ["tensor_maximum", "tensor_minimum", "tensor_opening", "tensor_closing",
           "tensor_white_tophat", "tensor_black_tophat", "tensor_gaussian",
           "tensor_sobel", "tensor_otsu_mask", "tensor_rescale_intensity",
           "tensor_remove_small_objects", "tensor_max_projection",
           "tensor_mean_projection", "tensor_sum_projection"]


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
    """Counts (float32) and bin centres as ``skimage.exposure.histogram(x, 256,
    source_range="image")`` makes them: one bin per value of an integer tensor, else 256
    equal bins from the minimum to the maximum (NumPy's edges: float64 ``linspace`` cast to
    the tensor's dtype, a value on an edge in the upper bin, the maximum in the last)."""
    import torch

    flat = x.reshape(-1)
    if not x.dtype.is_floating_point:  # torch has no min/max of uint16/uint32 (2.13)
        flat = flat.to(torch.int32 if x.element_size() <= 2 else torch.int64)
        low, high = int(flat.min()), int(flat.max())
        counts = torch.bincount(flat.long() - low, minlength=high - low + 1)
        return counts.float(), torch.arange(low, high + 1, dtype=torch.float64, device=x.device)
    edges = torch.linspace(float(flat.min()), float(flat.max()), 257, dtype=torch.float64,
                           device=x.device).to(x.dtype)
    index = (torch.bucketize(flat, edges, right=True) - 1).clamp(0, 255)
    counts = torch.bincount(index, minlength=256)
    return counts.float(), (edges[:-1] + edges[1:]) / 2


def tensor_otsu_mask(stack: Any) -> Any:
    """Pixels above the stack's Otsu threshold, computed as ``skimage.filters.threshold_otsu``
    does (its histogram, float32 class weights, the first maximum of the between-class
    variance; a constant stack: its value, so no pixel)."""
    import torch

    counts, centers = _tensor_histogram(stack)
    if counts.numel() == 1:
        return stack > centers[0].to(stack.dtype)
    weight1 = torch.cumsum(counts, 0)
    weight2 = torch.cumsum(counts.flip(0), 0).flip(0)
    weighted = counts * centers
    mean1 = torch.cumsum(weighted, 0) / weight1
    mean2 = (torch.cumsum(weighted.flip(0), 0) / weight2.flip(0)).flip(0)
    variance = weight1[:-1] * weight2[1:] * (mean1[:-1] - mean2[1:]) ** 2
    threshold = centers[int(torch.argmax(variance))]
    return stack.to(torch.float64) > float(threshold)


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
    """The maximum over z of a tensor, as one plane."""
    return stack.amax(0, keepdim=True)


def tensor_mean_projection(stack: Any) -> Any:
    """The mean over z (float32) of a tensor, as one plane."""
    return stack.float().mean(0, keepdim=True)


def tensor_sum_projection(stack: Any) -> Any:
    """The sum over z (float32) of a tensor, as one plane."""
    return stack.float().sum(0, keepdim=True)


