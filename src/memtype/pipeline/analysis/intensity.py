"""Per-object intensity: CellProfiler 4.2's MeasureObjectIntensity, in O(pixels + objects).

Every statistic comes from the objects' pixels gathered once: sums, counts and moments by
``numpy.bincount``, order statistics (minimum, maximum, quartiles, median, MAD, the brightest
pixel) from one radix sort of the (object, value) pairs and binary searches run for all
objects at once; no Python loop runs per object. The label side (which pixels, their object,
the objects' inner boundaries) is found once per object set however many channels it measures
(:func:`measure_intensities`).
The names and definitions are CellProfiler's (``docs/measurements.md``); one difference:
non-finite pixels (NaN, inf) are left out of every statistic, which CellProfiler 4.2 meant
to do (its ``lmask`` comment) but does not (an operator-precedence slip keeps them); and
``Location_MaxIntensity_*`` is the first brightest pixel in raster order where CellProfiler
takes whichever of tied pixels an unstable sort puts last (``scipy.ndimage.maximum_position``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from memtype.pipeline.analysis._inputs import as_field, label_field, object_count, same_shape

__all__ = ["INTENSITY_FEATURES", "LOCATION_FEATURES", "measure_intensities", "measure_intensity"]

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


class _Objects:
    """The label side of a measurement, found once for every channel measured in one object
    set: the objects' pixels (object number, row, column, on the inner boundary or not)."""

    def __init__(self, labels: npt.NDArray[Any]) -> None:
        self.shape: tuple[int, ...] = labels.shape
        self.n = object_count(labels)
        self.index = np.flatnonzero(labels.ravel())
        self.label: Ints = labels.ravel()[self.index].astype(np.intp)
        self.y, self.x = np.divmod(self.index, labels.shape[1])
        self.edge = _inner_boundary(labels).ravel()[self.index]
        self.count = np.bincount(self.label, minlength=self.n + 1).astype(np.float64)
        self.label_digits = _label_digits(self.label, self.n)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.centre = (np.bincount(self.label, self.x, minlength=self.n + 1) / self.count,
                           np.bincount(self.label, self.y, minlength=self.n + 1) / self.count)

    def pixels(self, image: npt.NDArray[Any]) -> _Pixels:
        """The objects' finite pixels of ``image`` (a gather: the field is not copied)."""
        raw = image.ravel()[self.index]
        pixels = _Pixels(self.label, raw, self.y, self.x, self.edge, self.n,
                         count=self.count, label_digits=self.label_digits, centre=self.centre)
        if raw.dtype.kind == "f":
            finite = np.isfinite(raw)
            if not finite.all():
                return pixels.subset(finite)
        return pixels


class _Pixels:
    """Pixels of the objects: object number, value, row, column and whether on the object's
    inner boundary, in raster order.

    ``raw`` keeps the image's own dtype (the sort key is made from it); ``value`` is the same
    values in float64 (the sums).
    """

    def __init__(self, label: Ints, raw: npt.NDArray[Any], y: Ints, x: Ints,
                 edge: npt.NDArray[np.bool_], n: int, *, value: Floats | None = None,
                 count: Floats | None = None,
                 label_digits: list[npt.NDArray[Any]] | None = None,
                 centre: tuple[Floats, Floats] | None = None) -> None:
        self.label, self.raw, self.y, self.x, self.edge, self.n = label, raw, y, x, edge, n
        self.value: Floats = raw.astype(np.float64) if value is None else value
        self.count = np.bincount(label, minlength=n + 1).astype(np.float64) \
            if count is None else count
        self.label_digits, self.centre = label_digits, centre  # None: found when asked

    def subset(self, keep: npt.NDArray[np.bool_]) -> _Pixels:
        """The pixels where ``keep`` (one flag per pixel of this set)."""
        at = np.flatnonzero(keep)
        return _Pixels(self.label[at], self.raw[at], self.y[at], self.x[at], self.edge[at],
                       self.n, value=self.value[at])

    def total(self, weights: npt.NDArray[Any]) -> Floats:
        """Per object number 0..n: the sum of ``weights`` over its pixels."""
        return np.bincount(self.label, weights, minlength=self.n + 1).astype(np.float64,
                                                                             copy=False)

    def sums(self) -> tuple[Floats, Floats, Floats]:
        """Per object number: integrated (NaN without pixels), mean and standard deviation
        (population; two passes, as CellProfiler's)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            integrated = self.total(self.value)
            mean: Floats = integrated / self.count
            deviation = self.value - mean[self.label]
            std: Floats = np.sqrt(self.total(deviation * deviation) / self.count)
        integrated[self.count == 0] = np.nan
        return integrated, mean, std


def _order_key(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Unsigned integers in the order of ``values`` (bool, integer or finite float).

    A float64 field whose values float32 holds exactly (a camera's counts, most corrected
    images) is keyed by its float32 bits: two 16-bit digits instead of four.
    """
    if values.dtype == np.float64:
        narrow = values.astype(np.float32)
        if np.array_equal(narrow, values):
            values = narrow
    kind, size = values.dtype.kind, values.dtype.itemsize
    if kind == "f":
        values = values + values.dtype.type(0)  # -0.0 becomes 0.0: equal values, one key
    if kind == "b":
        return values.view(np.uint8)
    if kind == "u":
        return values
    unsigned = np.dtype(f"u{size}")
    bits = values.view(unsigned)
    sign = unsigned.type(1 << (8 * size - 1))
    key: npt.NDArray[Any] = bits ^ sign if kind == "i" else np.where(
        bits & sign, ~bits, bits | sign)  # IEEE floats: negatives reversed
    return key


def _digits(key: npt.NDArray[Any]) -> Iterator[npt.NDArray[Any]]:
    """The 16-bit digits of the unsigned ``key`` (an 8- or 16-bit key is one), least
    significant first, leaving out the digits all elements share (they order nothing)."""
    if key.dtype.itemsize <= 2:
        yield key
        return
    for shift in range(0, 8 * key.dtype.itemsize, 16):
        digit = (key >> key.dtype.type(shift)).astype(np.uint16)
        if digit.size and digit.min() != digit.max():
            yield digit


def _label_digits(label: Ints, n: int) -> list[npt.NDArray[Any]]:
    """The radix digits of the object numbers (see :func:`_sort_order`)."""
    return list(_digits(label.astype(np.uint16 if n < 2**16 else np.uint64)))


def _sort_order(pixels: _Pixels) -> Ints:
    """The permutation sorting the pixels by object, then by value (ties in raster order).

    A least-significant-digit radix sort: one stable sort per 16-bit digit of the value's
    order key, then of the object number. NumPy sorts 8- and 16-bit integers stably by
    radix, so each digit costs O(pixels): a 16-bit camera's field with fewer than 65536
    objects takes two passes, a float32 field three; NumPy's comparison sort of packed
    (object, value) keys took 2 to 5 times as long.
    """
    order: Ints | None = None
    label_digits = pixels.label_digits
    if label_digits is None:
        label_digits = _label_digits(pixels.label, pixels.n)
    for digit in itertools.chain(_digits(_order_key(pixels.raw)), label_digits):
        step = np.argsort(digit if order is None else digit[order], kind="stable")
        order = step if order is None else order[step]
    return np.arange(pixels.label.size) if order is None else order


def _lower_bound(ordered: Floats, starts: Ints, ends: Ints, target: Floats) -> Ints:
    """Per object: the first position in its sorted run ``[start, end)`` whose value is not
    below ``target`` (a binary search run for all objects at once)."""
    low, high = starts.copy(), ends.copy()
    last = max(ordered.size - 1, 0)
    while True:
        active = low < high
        if not active.any():
            return low
        middle = (low + high) // 2
        below = active & (ordered[np.minimum(middle, last)] < target)
        low = np.where(below, middle + 1, low)
        high = np.where(active & ~below, middle, high)


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
    """Minimum, maximum, quartiles, median, MAD and the brightest pixel per object number
    (one sort)."""
    order = _sort_order(pixels)
    ordered = pixels.value[order]
    count = pixels.count.astype(np.intp)
    starts = np.cumsum(count) - count
    present = count > 0
    ends = starts + count
    minimum, maximum = np.full(pixels.n + 1, np.nan), np.full(pixels.n + 1, np.nan)
    minimum[present], maximum[present] = ordered[starts[present]], ordered[ends[present] - 1]
    stats = {"MinIntensity": minimum, "MaxIntensity": maximum}
    for name, fraction in (("LowerQuartileIntensity", 0.25), ("MedianIntensity", 0.5),
                           ("UpperQuartileIntensity", 0.75)):
        stats[name] = _quantile(ordered, starts, pixels.count, fraction)
    median = np.nan_to_num(stats["MedianIntensity"])
    below = _lower_bound(ordered, starts, ends, median) - starts
    stats["MADIntensity"] = _median_deviation(ordered, starts, below, count, median)
    brightest = _lower_bound(ordered, starts, ends, np.nan_to_num(maximum))[present]
    where = order[brightest]  # the first of the brightest in raster order (stable sort)
    location_x, location_y = np.full_like(maximum, np.nan), np.full_like(maximum, np.nan)
    location_x[present], location_y[present] = pixels.x[where], pixels.y[where]
    stats["MaxIntensity_X"], stats["MaxIntensity_Y"] = location_x, location_y
    return stats


def _median_deviation(ordered: Floats, starts: Ints, below: Ints, count: Ints,
                      median: Floats) -> Floats:
    """CellProfiler's MAD: the quantile at 1/2 of |v - median|, without sorting again.

    Within an object the deviations below the median (read backwards) and above it (read
    forwards) are two sorted runs; their k-th smallest is found by a binary search per
    object, all objects at once.
    """
    if ordered.size == 0:
        return np.full(count.size, np.nan)
    runs = _Runs(ordered, starts, below, count, median)
    position = count * 0.5
    k = np.floor(position).astype(np.intp)
    weight = position - k
    out = np.full(count.size, np.nan)
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


def _inner_boundary(labels: Ints) -> npt.NDArray[np.bool_]:
    """Object pixels with a 4-neighbour of another number: scikit-image's
    ``find_boundaries(mode="inner")`` (the image edge is not a boundary)."""
    edge = np.zeros(labels.shape, bool)
    for here, there in ((np.s_[1:, :], np.s_[:-1, :]), (np.s_[:, 1:], np.s_[:, :-1])):
        differ = labels[here] != labels[there]
        edge[here] |= differ
        edge[there] |= differ
    return edge


def _edge_statistics(pixels: _Pixels) -> dict[str, Floats]:
    """Integrated, mean, std, min and max intensity over each object's inner boundary."""
    n = pixels.n
    integrated, mean, std = pixels.sums()
    minimum, maximum = np.full(n + 1, np.inf), np.full(n + 1, -np.inf)
    np.minimum.at(minimum, pixels.label, pixels.value)
    np.maximum.at(maximum, pixels.label, pixels.value)
    absent = pixels.count == 0
    minimum[absent], maximum[absent] = np.nan, np.nan
    return {"IntegratedIntensityEdge": integrated, "MeanIntensityEdge": mean,
            "StdIntensityEdge": std, "MinIntensityEdge": minimum,
            "MaxIntensityEdge": maximum}


def _mass(pixels: _Pixels, integrated: Floats) -> dict[str, Floats]:
    """The intensity-weighted centroid and its distance to the centroid."""
    y, x = pixels.y, pixels.x
    with np.errstate(invalid="ignore", divide="ignore"):
        center_x, center_y = pixels.centre or (pixels.total(x) / pixels.count,
                                               pixels.total(y) / pixels.count)
        mass_x = pixels.total(x * pixels.value) / integrated
        mass_y = pixels.total(y * pixels.value) / integrated
    return {"MassDisplacement": np.hypot(center_x - mass_x, center_y - mass_y),
            "CenterMassIntensity_X": mass_x, "CenterMassIntensity_Y": mass_y}


def _measure(objects: _Objects, image: npt.NDArray[Any], name: str) -> dict[str, np.ndarray]:
    """Every column of one channel in one object set."""
    pixels = objects.pixels(image)
    integrated, mean, std = pixels.sums()
    stats = {"IntegratedIntensity": integrated, "MeanIntensity": mean, "StdIntensity": std}
    stats.update(_order_statistics(pixels))
    stats.update(_edge_statistics(pixels.subset(pixels.edge)))
    stats.update(_mass(pixels, integrated))
    columns = {f"Intensity_{key}_{name}": stats[key][1:] for key in INTENSITY_FEATURES}
    columns.update({f"Location_{key}_{name}": stats[key][1:] for key in LOCATION_FEATURES})
    return columns


def measure_intensities(labels: Any, images: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The intensity of several channels in every object: :func:`measure_intensity` of each,
    the objects' pixels found once.

    Parameters
    ----------
    labels : array_like of int
        The objects (2D, or ``[1, Y, X]``); 0 is background.
    images : mapping of str to array_like
        Channel name -> channel (same shape as ``labels``).

    Returns
    -------
    dict of str to numpy.ndarray
        The columns of :func:`measure_intensity` for every channel, in the mapping's order.

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.array([[1, 1, 0], [0, 2, 2]])
    >>> dna = np.array([[1.0, 3.0, 9.0], [9.0, 5.0, 5.0]])
    >>> measured = measure_intensities(labels, {"DNA": dna, "Actin": 2 * dna})
    >>> measured["Intensity_MeanIntensity_Actin"]
    array([ 4., 10.])
    """
    lab = label_field(labels)
    objects = _Objects(lab)
    columns: dict[str, np.ndarray] = {}
    for name, image in images.items():
        field = as_field(image, name="image")
        same_shape(lab, field, "`labels` and `image`")
        columns.update(_measure(objects, field, name))
    return columns


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
    return measure_intensities(labels, {image_name: image})
