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

    def __init__(self, label: Ints, value: Floats, index: Ints, width: int, n: int):
        self.label, self.value, self.index, self.width, self.n = label, value, index, width, n
        self.count = np.bincount(label, minlength=n + 1).astype(np.float64)

    @classmethod
    def of(cls, labels: Ints, image: Floats, n: int) -> _Pixels:
        """The finite pixels of every object (one pass over the field)."""
        index = np.flatnonzero((labels.ravel() > 0) & np.isfinite(image.ravel()))
        return cls(labels.ravel()[index], image.ravel()[index], index, labels.shape[1], n)

    def positions(self) -> tuple[Floats, Floats]:
        """The pixels' Y and X."""
        y, x = np.divmod(self.index, self.width)
        return y.astype(np.float64), x.astype(np.float64)

    def subset(self, keep: npt.NDArray[np.bool_]) -> _Pixels:
        """The pixels where ``keep`` (one flag per pixel of this set)."""
        return _Pixels(self.label[keep], self.value[keep], self.index[keep], self.width, self.n)

    def total(self, weights: Floats) -> Floats:
        """Per object number 0..n: the sum of ``weights`` over its pixels."""
        return np.bincount(self.label, weights, minlength=self.n + 1).astype(np.float64,
                                                                             copy=False)

    def mean(self, weights: Floats) -> Floats:
        """Per object number: the mean of ``weights`` (NaN without pixels)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            out: Floats = self.total(weights) / self.count
        return out

    def std(self, mean: Floats) -> Floats:
        """Per object number: the population standard deviation around ``mean``."""
        return np.sqrt(self.mean((self.value - mean[self.label]) ** 2))


def _sorted_by_object(pixels: _Pixels) -> tuple[Floats, Ints]:
    """The pixel values sorted by object then value, and where each object's run starts.

    Whole numbers 0..65535 (8- and 16-bit cameras) are sorted as one uint32 key per pixel,
    object number above value; values float32 holds exactly as one uint64 key, object number
    above an order-preserving map of the value's bits; both are read back from the keys.
    Other values are sorted by value, then stably by object.
    """
    starts = (np.cumsum(pixels.count) - pixels.count).astype(np.intp)
    values = pixels.value
    if pixels.n < 2**16 and values.size and values.min() >= 0 and values.max() < 2**16 \
            and np.array_equal(values, np.floor(values)):  # 8- or 16-bit counts: 32-bit keys
        small = (pixels.label.astype(np.uint32) << np.uint32(16)) | values.astype(np.uint32)
        small.sort()
        return (small & np.uint32(0xFFFF)).astype(np.float64), starts
    narrow = pixels.value.astype(np.float32)
    if pixels.n < 2**32 and np.array_equal(narrow, pixels.value):
        bits = narrow.view(np.uint32)
        order_bits = np.where(bits >> 31 == 1, ~bits, bits | np.uint32(0x80000000))
        key = (pixels.label.astype(np.uint64) << np.uint64(32)) | order_bits.astype(np.uint64)
        key.sort()
        low = (key & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        back = np.where(low >> 31 == 1, low ^ np.uint32(0x80000000), ~low)
        return back.view(np.float32).astype(np.float64), starts
    by_value = np.argsort(pixels.value)
    label_type = np.uint16 if pixels.n < 2**16 else np.intp  # uint16: a radix sort
    by_object = np.argsort(pixels.label[by_value].astype(label_type), kind="stable")
    return pixels.value[by_value[by_object]], starts


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
    """Minimum, maximum, quartiles, median and MAD per object number (one sort)."""
    ordered, starts = _sorted_by_object(pixels)
    present = pixels.count > 0
    ends = starts + pixels.count.astype(np.intp) - 1
    minimum, maximum = np.full(pixels.n + 1, np.nan), np.full(pixels.n + 1, np.nan)
    minimum[present], maximum[present] = ordered[starts[present]], ordered[ends[present]]
    stats = {"MinIntensity": minimum, "MaxIntensity": maximum}
    for name, fraction in (("LowerQuartileIntensity", 0.25), ("MedianIntensity", 0.5),
                           ("UpperQuartileIntensity", 0.75)):
        stats[name] = _quantile(ordered, starts, pixels.count, fraction)
    stats["MADIntensity"] = _median_deviation(pixels, ordered, starts, stats["MedianIntensity"])
    return stats


def _median_deviation(pixels: _Pixels, ordered: Floats, starts: Ints, median: Floats) -> Floats:
    """CellProfiler's MAD: the quantile at 1/2 of |v - median|, without sorting again.

    Within an object the deviations below the median (read backwards) and above it (read
    forwards) are two sorted runs; their k-th smallest is found by a binary search per
    object, all objects at once.
    """
    count = pixels.count.astype(np.intp)
    if ordered.size == 0:
        return np.full(pixels.n + 1, np.nan)
    below = np.bincount(pixels.label[pixels.value < median[pixels.label]],
                        minlength=pixels.n + 1).astype(np.intp)
    runs = _Runs(ordered, starts, below, count, np.nan_to_num(median))
    position = count * 0.5
    k = np.floor(position).astype(np.intp)
    weight = position - k
    out = np.full(pixels.n + 1, np.nan)
    present = count > 0
    kth = runs.kth(np.minimum(k, np.maximum(count - 1, 0)))
    inner = present & (k < count - 1)
    following = runs.kth(np.minimum(k + 1, np.maximum(count - 1, 0)))
    out[inner] = kth[inner] * (1 - weight[inner]) + following[inner] * weight[inner]
    last = present & ~inner
    out[last] = kth[last]
    return out


class _Runs:
    """Per object: deviations below the median (run A) and above it (run B), both ascending."""

    def __init__(self, ordered: Floats, starts: Ints, below: Ints, count: Ints,
                 median: Floats) -> None:
        self.ordered, self.starts, self.median = ordered, starts, median
        self.a, self.b = below, count - below
        self.last = max(ordered.size - 1, 0)

    def deviation_a(self, i: Ints) -> Floats:
        """A[i] = median - (i-th value below the median, counting down from it)."""
        where = np.clip(self.starts + self.a - 1 - i, 0, self.last)
        out: Floats = self.median - self.ordered[where]
        return out

    def deviation_b(self, j: Ints) -> Floats:
        """B[j] = (j-th value at or above the median) - median."""
        where = np.clip(self.starts + self.a + j, 0, self.last)
        out: Floats = self.ordered[where] - self.median
        return out

    def kth(self, k: Ints) -> Floats:
        """The k-th smallest (0-based) of A and B merged, per object."""
        low = np.maximum(0, k + 1 - self.b)
        high = np.minimum(self.a, k + 1)
        while True:
            active = low < high
            if not active.any():
                break
            i = (low + high) // 2
            j = k + 1 - i
            more = active & (i < self.a) & (j > 0) & (self.deviation_b(j - 1)
                                                      > self.deviation_a(i))
            low = np.where(more, i + 1, low)
            high = np.where(active & ~more, i, high)
        j = k + 1 - low
        from_a = np.where(low > 0, self.deviation_a(low - 1), -np.inf)
        from_b = np.where(j > 0, self.deviation_b(j - 1), -np.inf)
        return np.maximum(from_a, from_b)


def _max_location(pixels: _Pixels, maximum: Floats) -> tuple[Floats, Floats]:
    """Per object number: X and Y of its brightest pixel (the first in raster order)."""
    at_max = pixels.value == maximum[pixels.label]
    numbers, first = np.unique(pixels.label[at_max], return_index=True)
    where_y, where_x = np.divmod(pixels.index[at_max][first], pixels.width)
    x, y = np.full(pixels.n + 1, np.nan), np.full(pixels.n + 1, np.nan)
    x[numbers], y[numbers] = where_x, where_y
    return x, y


def _inner_boundary(labels: Ints) -> npt.NDArray[np.bool_]:
    """Object pixels with a 4-neighbour of another number: scikit-image's
    ``find_boundaries(mode="inner")`` (the image edge is not a boundary)."""
    edge = np.zeros(labels.shape, bool)
    for here, there in ((np.s_[1:, :], np.s_[:-1, :]), (np.s_[:, 1:], np.s_[:, :-1])):
        differ = labels[here] != labels[there]
        edge[here] |= differ
        edge[there] |= differ
    return edge


def _edge_statistics(labels: Ints, everything: _Pixels) -> dict[str, Floats]:
    """Integrated, mean, std, min and max intensity over each object's inner boundary."""
    n = everything.n
    pixels = everything.subset(_inner_boundary(labels).ravel()[everything.index])
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
    pixels = _Pixels.of(lab, img, n)
    integrated = pixels.total(pixels.value)
    integrated[pixels.count == 0] = np.nan
    mean = pixels.mean(pixels.value)
    stats = {"IntegratedIntensity": integrated, "MeanIntensity": mean,
             "StdIntensity": pixels.std(mean)}
    stats.update(_order_statistics(pixels))
    stats.update(_edge_statistics(lab, pixels))
    y, x = pixels.positions()
    with np.errstate(invalid="ignore", divide="ignore"):
        cmi_x = pixels.total(x * pixels.value) / integrated
        cmi_y = pixels.total(y * pixels.value) / integrated
    stats["MassDisplacement"] = np.hypot(pixels.mean(x) - cmi_x, pixels.mean(y) - cmi_y)
    max_x, max_y = _max_location(pixels, stats["MaxIntensity"])
    columns = {f"Intensity_{name}_{image_name}": stats[name][1:] for name in INTENSITY_FEATURES}
    for name, values in zip(LOCATION_FEATURES, (cmi_x, cmi_y, max_x, max_y), strict=True):
        columns[f"Location_{name}_{image_name}"] = values[1:]
    return columns
