"""The operations' NumPy implementations: scipy.ndimage and scikit-image, with the
definitions of :mod:`~memtype.pipeline.catalog.implementations`."""

from __future__ import annotations

from typing import Any

import numpy as np

from memtype import convert
from memtype.pipeline.catalog.declarations import HOST

__all__ = ["box_maximum", "box_minimum", "box_opening", "box_closing",
           "box_white_tophat", "box_black_tophat", "box_median", "otsu_mask", "li_mask",
           "triangle_mask", "sobel_magnitude", "rescale_intensity",
           "remove_small_objects", "label_statistics", "max_projection",
           "mean_projection", "sum_projection"]

Row = dict[str, Any]
_AXES = {2: ("y", "x"), 3: ("plane", "y", "x")}


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
    return labels, _regionprops_rows(table, np.ndim(labels), intensity is not None)


def _regionprops_rows(table: dict[str, Any], ndim: int, intensity: bool) -> list[Row]:
    """A ``regionprops_table`` of :func:`label_statistics`'s properties as its rows."""
    names = _centroid_names(ndim)
    columns: dict[str, Any] = {"label": table["label"], "area": table["area"]}
    columns.update({n: table[f"centroid-{i}"] for i, n in enumerate(names)})
    if intensity:
        columns.update({f"{s}_intensity": table[f"intensity_{s}"] for s in ("mean", "min", "max")})
    return _rows(columns)


def _rows(columns: dict[str, Any]) -> list[Row]:
    """Columns of equal length as rows (``label`` an int, the rest floats)."""
    arrays = {k: np.asarray(v, dtype=np.float64).ravel() for k, v in columns.items()}
    length = len(arrays["label"])
    return [{k: int(a[i]) if k == "label" else float(a[i]) for k, a in arrays.items()}
            for i in range(length)]


def _to_host(x: Any) -> Any:
    """``x`` as a NumPy array (from any framework)."""
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


