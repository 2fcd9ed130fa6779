"""Thin implementations of the operations, each computing the operation's one definition.

An operation (:mod:`~memtype.pipeline.catalog.operations`) runs a catalog entry where the
library already computes its definition (``skimage.filters.gaussian``,
``pyclesperanto.gaussian_blur``), and one of these functions where it does not: a box filter
of scipy.ndimage per plane, a threshold as a mask, the Sobel magnitude in the input's units,
per-label statistics as rows with one set of columns, and the plain torch versions. Each
imports its library when it runs; none is imported by listing the catalog.

Definitions (the tolerances are in ``TOLERANCES``; the differences in ``docs/functions.md``):

- box filters: over a ``(2r+1) x (2r+1)`` square in each plane, edges ``nearest``;
- ``sobel``: ``hypot(sobel_y, sobel_x)`` per plane with scipy.ndimage's unnormalised kernel
  (``[1, 2, 1]`` x ``[-1, 0, 1]``), edges ``nearest``, float32 in the input's units;
- thresholds: the pixels above the stack's threshold (one per stack);
- ``rescale_intensity``: the stack's minimum -> 0, its maximum -> 1, float32;
- ``remove_small_objects``: labels of fewer than ``min_size`` pixels (in the whole stack)
  become 0;
- ``label_statistics``: one row per label of the stack: ``label``, ``area``, ``centroid_*``
  and, given ``intensity=``, ``mean_intensity``, ``min_intensity``, ``max_intensity``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memtype.pipeline.catalog.declarations import CLE, HOST

__all__ = [
    "box_maximum", "box_minimum", "box_opening", "box_closing", "box_white_tophat",
    "box_black_tophat", "box_median", "otsu_mask", "li_mask", "triangle_mask", "sobel_magnitude",
    "rescale_intensity", "remove_small_objects", "label_statistics", "max_projection",
    "mean_projection", "sum_projection", "cle_sobel", "cle_rescale_intensity",
    "cle_label_statistics", "tensor_max_projection", "tensor_mean_projection",
    "tensor_sum_projection", "tensor_gaussian", "tensor_maximum", "tensor_minimum",
    "tensor_opening", "tensor_closing", "tensor_white_tophat", "tensor_black_tophat",
    "tensor_sobel", "tensor_otsu_mask", "tensor_rescale_intensity",
    "tensor_remove_small_objects", "jax_maximum", "jax_minimum", "jax_opening", "jax_closing",
    "jax_white_tophat", "jax_black_tophat", "jax_gaussian", "jax_rescale_intensity",
    "jax_max_projection", "jax_mean_projection", "jax_sum_projection",
]

Row = dict[str, Any]
_AXES = {2: ("y", "x"), 3: ("plane", "y", "x")}


# -- NumPy: scipy.ndimage and scikit-image ------------------------------------------------

def _box(stack: Any, radius: int, name: str) -> Any:
    """A per-plane (2r+1)^2 box filter of scipy.ndimage (edges: nearest)."""
    from scipy import ndimage

    size = (1, 2 * radius + 1, 2 * radius + 1)
    return getattr(ndimage, name)(stack, size=size, mode="nearest")


def box_maximum(stack: Any, radius: int = 1) -> Any:
    """Per-plane maximum over a (2r+1)^2 box."""
    return _box(stack, radius, "maximum_filter")


def box_minimum(stack: Any, radius: int = 1) -> Any:
    """Per-plane minimum over a (2r+1)^2 box."""
    return _box(stack, radius, "minimum_filter")


def box_opening(stack: Any, radius: int = 1) -> Any:
    """Per-plane box opening: the minimum, then the maximum."""
    return _box(_box(stack, radius, "minimum_filter"), radius, "maximum_filter")


def box_closing(stack: Any, radius: int = 1) -> Any:
    """Per-plane box closing: the maximum, then the minimum."""
    return _box(_box(stack, radius, "maximum_filter"), radius, "minimum_filter")


def box_white_tophat(stack: Any, radius: int = 1) -> Any:
    """The stack minus its per-plane box opening."""
    return stack - box_opening(stack, radius)


def box_black_tophat(stack: Any, radius: int = 1) -> Any:
    """The per-plane box closing minus the stack."""
    return box_closing(stack, radius) - stack


def box_median(stack: Any, radius: int = 1) -> Any:
    """Per-plane median over a (2r+1)^2 box."""
    return _box(stack, radius, "median_filter")


def _threshold_mask(stack: Any, name: str) -> Any:
    """The pixels above the stack's scikit-image threshold ``name`` (one per stack)."""
    from skimage import filters

    return stack > getattr(filters, name)(stack)


def otsu_mask(stack: Any) -> Any:
    """Pixels above the stack's Otsu threshold (scikit-image's)."""
    return _threshold_mask(stack, "threshold_otsu")


def li_mask(stack: Any) -> Any:
    """Pixels above the stack's Li (minimum cross-entropy) threshold (scikit-image's)."""
    return _threshold_mask(stack, "threshold_li")


def triangle_mask(stack: Any) -> Any:
    """Pixels above the stack's triangle threshold (scikit-image's, 256 bins)."""
    return _threshold_mask(stack, "threshold_triangle")


def sobel_magnitude(stack: Any) -> Any:
    """Per-plane ``hypot(sobel_y, sobel_x)``, scipy.ndimage's kernel, float32 (input units)."""
    from scipy import ndimage

    planes = np.asarray(stack, dtype=np.float32)  # sobel on a volume would smooth along z
    return np.stack([np.hypot(ndimage.sobel(p, axis=0, mode="nearest"),
                              ndimage.sobel(p, axis=1, mode="nearest")) for p in planes])


def rescale_intensity(stack: Any) -> Any:
    """The stack's [minimum, maximum] mapped linearly onto [0, 1], float32
    (``skimage.exposure.rescale_intensity``)."""
    from skimage.exposure import rescale_intensity as rescale

    return rescale(np.asarray(stack, dtype=np.float32),  # type: ignore[no-untyped-call]
                   out_range=(0.0, 1.0))


def remove_small_objects(labels: Any, min_size: int = 64) -> Any:
    """The labels with every object of fewer than ``min_size`` pixels set to 0
    (``skimage.morphology.remove_small_objects``; the ids are kept)."""
    import warnings

    from skimage.morphology import remove_small_objects as remove

    with warnings.catch_warnings():  # a field with one object is labels, not a mistaken mask
        warnings.filterwarnings("ignore", "Only one label was provided", UserWarning)
        return remove(np.asarray(labels), max_size=min_size - 1)


def _centroid_names(ndim: int) -> tuple[str, ...]:
    """``centroid_<axis>`` column names for an array of ``ndim`` axes."""
    return tuple(f"centroid_{n}" for n in _AXES.get(ndim, tuple(f"axis{i}" for i in range(ndim))))


def label_statistics(labels: Any, intensity: Any = None) -> tuple[Any, list[Row]]:
    """One row per label: id, area, centroid and (given ``intensity``) its mean, minimum and
    maximum; the labels pass on (``skimage.measure.regionprops_table``)."""
    from skimage.measure import regionprops_table

    props = ["label", "area", "centroid"]
    if intensity is not None:
        props += ["intensity_mean", "intensity_min", "intensity_max"]
        intensity = np.asarray(_to_host(intensity))
    table = regionprops_table(np.asarray(labels), intensity,  # type: ignore[no-untyped-call]
                              properties=props)
    names = _centroid_names(np.ndim(labels))
    columns: dict[str, Any] = {"label": table["label"], "area": table["area"]}
    columns.update({n: table[f"centroid-{i}"] for i, n in enumerate(names)})
    if intensity is not None:
        columns.update({f"{s}_intensity": table[f"intensity_{s}"] for s in ("mean", "min", "max")})
    return labels, _rows(columns)


def _rows(columns: dict[str, Any]) -> list[Row]:
    """Columns of equal length as rows (``label`` an int, the rest floats)."""
    arrays = {k: np.asarray(v, dtype=np.float64).ravel() for k, v in columns.items()}
    length = len(arrays["label"])
    return [{k: int(a[i]) if k == "label" else float(a[i]) for k, a in arrays.items()}
            for i in range(length)]


def _to_host(x: Any) -> Any:
    """``x`` as a NumPy array (from any framework)."""
    from memtype import convert

    return convert(x, HOST)


def max_projection(stack: Any) -> Any:
    """The maximum over z, as one plane."""
    return stack.max(0, keepdims=True)


def mean_projection(stack: Any) -> Any:
    """The mean over z (float32), as one plane."""
    return stack.mean(0, keepdims=True, dtype="float32")


def sum_projection(stack: Any) -> Any:
    """The sum over z (float32), as one plane."""
    return stack.sum(0, keepdims=True, dtype="float32")


# -- pyclesperanto ------------------------------------------------------------------------

def cle_sobel(stack: Any) -> Any:
    """Per-plane Sobel magnitude with ``pyclesperanto.sobel`` (float32, input units): a 3D
    stack's ``sobel`` would add the z gradient, so each plane runs as a 2D image."""
    import pyclesperanto as cle

    planes = [cle.sobel(stack[i]) for i in range(stack.shape[0])]
    out = cle.create((len(planes), *stack.shape[1:]), dtype=np.float32)
    for i, plane in enumerate(planes):
        cle.paste(plane, out, 0, 0, i)
    return out


def cle_rescale_intensity(stack: Any) -> Any:
    """The stack's [minimum, maximum] onto [0, 1], float32, with ``pyclesperanto.normalize``
    (its default percentiles are the minimum and maximum)."""
    import pyclesperanto as cle

    return cle.normalize(stack)


def cle_label_statistics(labels: Any, intensity: Any = None) -> tuple[Any, list[Row]]:
    """:func:`label_statistics` with ``pyclesperanto.statistics_of_labelled_pixels``."""
    import warnings

    import pyclesperanto as cle

    from memtype import convert

    given = intensity is not None
    source = convert(intensity, CLE) if given else labels
    with warnings.catch_warnings():  # deprecated for labels_statistics, absent in 0.25.1
        warnings.simplefilter("ignore", DeprecationWarning)
        stats = cle.statistics_of_labelled_pixels(source, labels)
    axes = ("z", "y", "x")[3 - len(labels.shape):]
    names = _centroid_names(len(labels.shape))
    columns: dict[str, Any] = {"label": stats["label"], "area": stats["area"]}
    columns.update({n: stats[f"centroid_{a}"] for n, a in zip(names, axes, strict=True)})
    if given:
        columns.update({f"{s}_intensity": stats[f"{s}_intensity"] for s in ("mean", "min", "max")})
    return labels, _rows(columns)


# -- torch ------------------------------------------------------------------------------

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


# -- JAX ------------------------------------------------------------------------------------

def _jax_work(stack: Any) -> Any:
    """The stack in the float dtype a JAX filter computes in (float32 unless it is float64)."""
    import jax.numpy as jnp

    return stack if stack.dtype == jnp.float64 else stack.astype(jnp.float32)


def _jax_box(stack: Any, radius: int, maximum: bool) -> Any:
    """A per-plane (2r+1)^2 box maximum (or minimum), edges ``nearest``, in the stack's dtype."""
    import jax.numpy as jnp
    from jax import lax

    pad = jnp.pad(stack, ((0, 0), (radius, radius), (radius, radius)), mode="edge")
    size = 2 * radius + 1
    init = (-jnp.inf if maximum else jnp.inf) if jnp.issubdtype(stack.dtype, jnp.floating) \
        else (np.iinfo(stack.dtype).min if maximum else np.iinfo(stack.dtype).max)
    return lax.reduce_window(pad, jnp.asarray(init, stack.dtype), lax.max if maximum else lax.min,
                             (1, size, size), (1, 1, 1), "VALID")


def jax_maximum(stack: Any, radius: int = 1) -> Any:
    """Per-plane maximum over a (2r+1)^2 box (``lax.reduce_window``)."""
    return _jax_box(stack, radius, True)


def jax_minimum(stack: Any, radius: int = 1) -> Any:
    """Per-plane minimum over a (2r+1)^2 box."""
    return _jax_box(stack, radius, False)


def jax_opening(stack: Any, radius: int = 1) -> Any:
    """Per-plane box opening: the minimum, then the maximum."""
    return _jax_box(_jax_box(stack, radius, False), radius, True)


def jax_closing(stack: Any, radius: int = 1) -> Any:
    """Per-plane box closing: the maximum, then the minimum."""
    return _jax_box(_jax_box(stack, radius, True), radius, False)


def jax_white_tophat(stack: Any, radius: int = 1) -> Any:
    """The stack minus its per-plane box opening."""
    return stack - jax_opening(stack, radius)


def jax_black_tophat(stack: Any, radius: int = 1) -> Any:
    """The per-plane box closing minus the stack."""
    return jax_closing(stack, radius) - stack


def jax_gaussian(stack: Any, sigma: float = 1.0) -> Any:
    """Per-plane Gaussian as scipy.ndimage computes it (4 sigma, edges ``nearest``), as a
    weighted sum of shifted planes along y, then x; float (input units)."""
    import jax.numpy as jnp

    radius = int(4.0 * float(sigma) + 0.5)
    grid = np.arange(-radius, radius + 1, dtype=np.float64)
    weights = np.exp(-0.5 * (grid / float(sigma)) ** 2)
    weights /= weights.sum()
    x = _jax_work(stack)
    height, width = x.shape[1:]
    pad = jnp.pad(x, ((0, 0), (radius, radius), (0, 0)), mode="edge")
    x = sum(float(w) * pad[:, k:k + height, :] for k, w in enumerate(weights))
    pad = jnp.pad(x, ((0, 0), (0, 0), (radius, radius)), mode="edge")
    return sum(float(w) * pad[:, :, k:k + width] for k, w in enumerate(weights))


def jax_rescale_intensity(stack: Any) -> Any:
    """The stack's [minimum, maximum] onto [0, 1], float32 (a constant stack: 0)."""
    x = stack.astype("float32")
    low, high = x.min(), x.max()
    span = float(high - low)
    return (x - low) / span if span > 0 else x - low


def jax_max_projection(stack: Any) -> Any:
    """The maximum over z of a JAX array, as one plane."""
    return stack.max(0, keepdims=True)


def jax_mean_projection(stack: Any) -> Any:
    """The mean over z (float32) of a JAX array, as one plane."""
    return stack.astype("float32").mean(0, keepdims=True)


def jax_sum_projection(stack: Any) -> Any:
    """The sum over z (float32) of a JAX array, as one plane."""
    return stack.astype("float32").sum(0, keepdims=True)
