"""Per-object intensity: CellProfiler 4.2's MeasureObjectIntensity, in O(pixels + objects).

Every statistic comes from the objects' pixels gathered once: sums, counts and moments by
``numpy.bincount``, order statistics (minimum, maximum, quartiles, median, MAD) from one sort
of the (object, value) pairs (and one more for the MAD); no Python loop runs per object.
The names and definitions are CellProfiler's (``docs/measurements.md``); one difference:
non-finite pixels (NaN, inf) are left out of every statistic, which CellProfiler 4.2 meant
to do (its ``lmask`` comment) but does not (an operator-precedence slip keeps them); and
``Location_MaxIntensity_*`` is the first brightest pixel in raster order where CellProfiler
takes whichever of tied pixels an unstable sort puts last (``scipy.ndimage.maximum_position``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from memtype import require
from memtype.pipeline.analysis._inputs import as_field, as_labels, object_count, same_shape

__all__ = ["INTENSITY_FEATURES", "LOCATION_FEATURES", "measure_intensity"]

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.intp]

INTENSITY_FEATURES: tuple[str, ...] = (
    "IntegratedIntensity", "MeanIntensity", "StdIntensity", "MinIntensity", "MaxIntensity",
    "IntegratedIntensityEdge", "MeanIntensityEdge", "StdIntensityEdge", "MinIntensityEdge",
    "MaxIntensityEdge", "MassDisplacement", "LowerQuartileIntensity", "MedianIntensity",
    "MADIntensity", "UpperQuartileIntensity")
"""The ``Intensity_<feature>_<image>`` columns, in CellProfiler's order."""

LOCATION_FEATURES: tuple[str, ...] = (
    "CenterMassIntensity_X", "CenterMassIntensity_Y", "MaxIntensity_X", "MaxIntensity_Y")
"""The ``Location_<feature>_<image>`` columns."""


class _Pixels:
    """The finite pixels of the objects: object number, value and position, in raster order."""

    def __init__(self, labels: Ints, image: Floats, where: npt.NDArray[np.bool_], n: int):
        index = np.flatnonzero(where & (labels.ravel() > 0) & np.isfinite(image.ravel()))
        self.label = labels.ravel()[index]
        self.value = image.ravel()[index]
        self.y, self.x = np.divmod(index, labels.shape[1])
        self.n = n
        self.count = np.bincount(self.label, minlength=n + 1).astype(np.float64)

    def total(self, weights: Floats) -> Floats:
        """Per object number 0..n: the sum of ``weights`` over its pixels."""
        return np.bincount(self.label, weights, minlength=self.n + 1).astype(np.float64)

    def mean(self, weights: Floats) -> Floats:
        """Per object number: the mean of ``weights`` (NaN without pixels)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            out: Floats = self.total(weights) / self.count
        return out

    def std(self, mean: Floats) -> Floats:
        """Per object number: the population standard deviation around ``mean``."""
        return np.sqrt(self.mean((self.value - mean[self.label]) ** 2))


def _sorted_by_object(pixels: _Pixels, values: Floats) -> tuple[Floats, Ints]:
    """``values`` sorted by object then value, and where each object's run starts."""
    ordered = values[np.lexsort((values, pixels.label))]
    starts = (np.cumsum(pixels.count) - pixels.count).astype(np.intp)
    return ordered, starts


def _quantile(ordered: Floats, starts: Ints, count: Floats, fraction: float) -> Floats:
    """CellProfiler's quantile: position start + count * fraction, linear between neighbours.

    (NumPy's ``quantile`` methods place it at ``(count - 1) * fraction``: not the same.)
    """
    out = np.full(count.size, np.nan)
    areas = count.astype(np.intp)
    position = starts + areas * fraction
    low = np.floor(position).astype(np.intp)
    weight = position - low
    inner = low < starts + areas - 1
    upper = np.minimum(low + 1, max(ordered.size - 1, 0))
    out[inner] = ordered[low[inner]] * (1 - weight[inner]) + ordered[upper[inner]] * weight[inner]
    last = ~inner & (areas > 0)
    out[last] = ordered[low[last]]
    return out


def _order_statistics(pixels: _Pixels) -> dict[str, Floats]:
    """Minimum, maximum, quartiles, median and MAD per object number."""
    ordered, starts = _sorted_by_object(pixels, pixels.value)
    present = pixels.count > 0
    ends = starts + pixels.count.astype(np.intp) - 1
    minimum, maximum = np.full(pixels.n + 1, np.nan), np.full(pixels.n + 1, np.nan)
    minimum[present], maximum[present] = ordered[starts[present]], ordered[ends[present]]
    stats = {"MinIntensity": minimum, "MaxIntensity": maximum}
    for name, fraction in (("LowerQuartileIntensity", 0.25), ("MedianIntensity", 0.5),
                           ("UpperQuartileIntensity", 0.75)):
        stats[name] = _quantile(ordered, starts, pixels.count, fraction)
    deviation = np.abs(pixels.value - stats["MedianIntensity"][pixels.label])
    ordered_deviation, _ = _sorted_by_object(pixels, deviation)
    stats["MADIntensity"] = _quantile(ordered_deviation, starts, pixels.count, 0.5)
    return stats


def _max_location(pixels: _Pixels, maximum: Floats) -> tuple[Floats, Floats]:
    """Per object number: X and Y of its brightest pixel (the first in raster order)."""
    at_max = pixels.value == maximum[pixels.label]
    numbers, first = np.unique(pixels.label[at_max], return_index=True)
    x, y = np.full(pixels.n + 1, np.nan), np.full(pixels.n + 1, np.nan)
    x[numbers] = pixels.x[at_max][first]
    y[numbers] = pixels.y[at_max][first]
    return x, y


def _edge_statistics(labels: Ints, image: Floats, n: int) -> dict[str, Floats]:
    """Integrated, mean, std, min and max intensity over each object's inner boundary."""
    segmentation = require("skimage.segmentation", "Measuring object intensity")
    edge = segmentation.find_boundaries(labels, mode="inner")
    pixels = _Pixels(labels, image, edge.ravel(), n)
    mean = pixels.mean(pixels.value)
    minimum, maximum = np.full(n + 1, np.inf), np.full(n + 1, -np.inf)
    np.minimum.at(minimum, pixels.label, pixels.value)
    np.maximum.at(maximum, pixels.label, pixels.value)
    absent = pixels.count == 0
    minimum[absent], maximum[absent] = np.nan, np.nan
    integrated = pixels.total(pixels.value)
    integrated[absent] = np.nan
    return {"IntegratedIntensityEdge": integrated, "MeanIntensityEdge": mean,
            "StdIntensityEdge": pixels.std(mean), "MinIntensityEdge": minimum,
            "MaxIntensityEdge": maximum}


def measure_intensity(labels: Any, image: Any, *, image_name: str) -> dict[str, np.ndarray]:
    """The intensity of one channel in every object: CellProfiler's MeasureObjectIntensity.

    Parameters
    ----------
    labels : array_like of int
        The objects (2D, or ``[1, Y, X]``); 0 is background.
    image : array_like
        The channel, same shape; measured in its own units (CellProfiler divides integer
        images by their dtype's maximum when it loads them: do that first to compare).
    image_name : str
        The channel's name, the suffix of every column.

    Returns
    -------
    dict of str to numpy.ndarray
        ``Intensity_<feature>_<image_name>`` for each of :data:`INTENSITY_FEATURES` and
        ``Location_<feature>_<image_name>`` for each of :data:`LOCATION_FEATURES`; row
        ``i`` is object ``i + 1`` (``labels.max()`` rows); an object number without pixels
        (or without finite ones) has NaN.

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.array([[1, 1, 0], [0, 2, 2]])
    >>> image = np.array([[1.0, 3.0, 9.0], [9.0, 5.0, 5.0]])
    >>> measure_intensity(labels, image, image_name="DNA")["Intensity_MeanIntensity_DNA"]
    array([2., 5.])
    """
    lab = as_labels(labels)
    img = as_field(image, name="image").astype(np.float64)
    same_shape(lab, img, "`labels` and `image`")
    n = object_count(lab)
    pixels = _Pixels(lab, img, np.ones(lab.size, bool), n)
    integrated = pixels.total(pixels.value)
    integrated[pixels.count == 0] = np.nan
    mean = pixels.mean(pixels.value)
    stats = {"IntegratedIntensity": integrated, "MeanIntensity": mean,
             "StdIntensity": pixels.std(mean)}
    stats.update(_order_statistics(pixels))
    stats.update(_edge_statistics(lab, img, n))
    with np.errstate(invalid="ignore", divide="ignore"):
        cmi_x = pixels.total(pixels.x * pixels.value) / integrated
        cmi_y = pixels.total(pixels.y * pixels.value) / integrated
    stats["MassDisplacement"] = np.hypot(pixels.mean(pixels.x.astype(np.float64)) - cmi_x,
                                         pixels.mean(pixels.y.astype(np.float64)) - cmi_y)
    max_x, max_y = _max_location(pixels, stats["MaxIntensity"])
    columns = {f"Intensity_{name}_{image_name}": stats[name][1:] for name in INTENSITY_FEATURES}
    for name, values in zip(LOCATION_FEATURES, (cmi_x, cmi_y, max_x, max_y), strict=True):
        columns[f"Location_{name}_{image_name}"] = values[1:]
    return columns
