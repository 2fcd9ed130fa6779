"""The operations' CuPy implementations (an NVIDIA GPU): ``cupyx.scipy.ndimage`` where the
reference is scipy.ndimage, ``cucim.skimage`` where it is scikit-image, each computing the
definition of :mod:`~memtype.pipeline.catalog.implementations` in the precision of the
reference (cucim, like scikit-image, filters integer images in float64). The projections
need no module of their own: the host's (``stack.max(0)``, ...) run on CuPy arrays as they
are. Each function imports its library when it runs."""

from __future__ import annotations

from typing import Any

from memtype import convert
from memtype.pipeline.catalog.declarations import CUPY, HOST
from memtype.pipeline.catalog.implementations.host import Row, _regionprops_rows

__all__ = ["cupy_maximum", "cupy_minimum", "cupy_opening", "cupy_closing",
           "cupy_white_tophat", "cupy_black_tophat", "cupy_median", "cupy_sobel",
           "cupy_otsu_mask", "cupy_li_mask", "cupy_triangle_mask", "cupy_rescale_intensity",
           "cupy_remove_small_objects", "cupy_label_statistics"]


def _box(stack: Any, radius: int, name: str) -> Any:
    """A per-plane (2r+1)^2 box filter of cupyx.scipy.ndimage (edges: nearest)."""
    from cupyx.scipy import ndimage

    size = (1, 2 * radius + 1, 2 * radius + 1)
    return getattr(ndimage, name)(stack, size=size, mode="nearest")


def cupy_maximum(stack: Any, radius: int = 1) -> Any:
    """Per-plane maximum over a (2r+1)^2 box."""
    return _box(stack, radius, "maximum_filter")


def cupy_minimum(stack: Any, radius: int = 1) -> Any:
    """Per-plane minimum over a (2r+1)^2 box."""
    return _box(stack, radius, "minimum_filter")


def cupy_opening(stack: Any, radius: int = 1) -> Any:
    """Per-plane box opening: the minimum, then the maximum."""
    return _box(_box(stack, radius, "minimum_filter"), radius, "maximum_filter")


def cupy_closing(stack: Any, radius: int = 1) -> Any:
    """Per-plane box closing: the maximum, then the minimum."""
    return _box(_box(stack, radius, "maximum_filter"), radius, "minimum_filter")


def cupy_white_tophat(stack: Any, radius: int = 1) -> Any:
    """The stack minus its per-plane box opening."""
    return stack - cupy_opening(stack, radius)


def cupy_black_tophat(stack: Any, radius: int = 1) -> Any:
    """The per-plane box closing minus the stack."""
    return cupy_closing(stack, radius) - stack


def cupy_median(stack: Any, radius: int = 1) -> Any:
    """Per-plane median over a (2r+1)^2 box."""
    return _box(stack, radius, "median_filter")


def cupy_sobel(stack: Any) -> Any:
    """Per-plane ``hypot(sobel_y, sobel_x)``, scipy.ndimage's kernel, float32 (input units);
    a volume's ``sobel`` would smooth along z, so each plane runs as a 2D image."""
    import cupy
    from cupyx.scipy import ndimage

    planes = stack.astype(cupy.float32)
    out = cupy.empty_like(planes)
    for i in range(planes.shape[0]):
        out[i] = cupy.hypot(ndimage.sobel(planes[i], axis=0, mode="nearest"),
                            ndimage.sobel(planes[i], axis=1, mode="nearest"))
    return out


def _threshold_mask(stack: Any, name: str) -> Any:
    """The pixels above the stack's cucim threshold ``name`` (one per stack)."""
    from cucim.skimage import filters

    return stack > getattr(filters, name)(stack)


def cupy_otsu_mask(stack: Any) -> Any:
    """Pixels above the stack's Otsu threshold (cucim's)."""
    return _threshold_mask(stack, "threshold_otsu")


def cupy_li_mask(stack: Any) -> Any:
    """Pixels above the stack's Li (minimum cross-entropy) threshold (cucim's)."""
    return _threshold_mask(stack, "threshold_li")


def cupy_triangle_mask(stack: Any) -> Any:
    """Pixels above the stack's triangle threshold (cucim's, 256 bins)."""
    return _threshold_mask(stack, "threshold_triangle")


def cupy_rescale_intensity(stack: Any) -> Any:
    """The stack's [minimum, maximum] mapped linearly onto [0, 1], float32
    (``cucim.skimage.exposure.rescale_intensity``)."""
    import cupy
    from cucim.skimage.exposure import rescale_intensity

    return rescale_intensity(stack.astype(cupy.float32), out_range=(0.0, 1.0))


def cupy_remove_small_objects(labels: Any, min_size: int = 64) -> Any:
    """The labels with every object of fewer than ``min_size`` pixels set to 0
    (``cucim.skimage.morphology.remove_small_objects``; the ids are kept)."""
    import warnings

    from cucim.skimage.morphology import remove_small_objects

    with warnings.catch_warnings():  # a field with one object is labels, not a mistaken mask
        warnings.filterwarnings("ignore", "Only one label was provided", UserWarning)
        return remove_small_objects(labels, max_size=min_size - 1)


def cupy_label_statistics(labels: Any, intensity: Any = None) -> tuple[Any, list[Row]]:
    """One row per label: id, area, centroid and (given ``intensity``) its mean, minimum and
    maximum; the labels pass on (``cucim.skimage.measure.regionprops_table``)."""
    from cucim.skimage.measure import regionprops_table

    props = ["label", "area", "centroid"]
    if intensity is not None:
        props += ["intensity_mean", "intensity_min", "intensity_max"]
        intensity = convert(intensity, CUPY)
    table = regionprops_table(labels, intensity, properties=props)
    table = {k: convert(v, HOST) for k, v in table.items()}
    return labels, _regionprops_rows(table, len(labels.shape), intensity is not None)
