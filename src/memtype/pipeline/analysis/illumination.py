"""Illumination correction: CellProfiler 4.2's CorrectIlluminationCalculate / Apply, the math.

An :class:`IlluminationAccumulator` takes the fields of a plate one at a time (``add``), merges
with the accumulators of other workers (``merge``: map → reduce) and gives the illumination
function (``function``): the per-pixel mean (or median) of every field, smoothed and rescaled
as CellProfiler's "Regular" intensity, "All" images, does. :func:`apply_illumination` divides a
field by it (or subtracts it). The accumulator is plain NumPy arrays, so it pickles for dask.

Its size: a mean needs the per-pixel sum and count (two float64 images). A median over all
fields cannot be kept in one image's memory; here it is estimated from a per-pixel histogram
of ``median_bins`` fixed bins over ``value_range`` (uint16 counts: ``median_bins`` x 2 bytes
per pixel, 128 B for the default 64 bins, i.e. 16 float64 images, whatever the number of
fields), interpolated linearly inside the median's bin: the error is at most one bin width,
``(high - low) / median_bins``; values outside the range count in the end bins.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from memtype import require
from memtype.errors import InvalidArgumentError, ShapeError
from memtype.pipeline.analysis._inputs import as_field

__all__ = ["IlluminationAccumulator", "apply_illumination"]

Floats = npt.NDArray[np.float64]

ROBUST_FRACTION = 0.02  # CellProfiler's ROBUST_FACTOR: the rescaling's robust minimum
_MAX_COUNT = np.iinfo(np.uint16).max


class IlluminationAccumulator:
    """The running per-pixel statistics of many fields, mergeable across workers.

    Parameters
    ----------
    median_bins : int, optional
        Keep a per-pixel histogram of this many bins so that ``function(method="median")``
        can estimate the median; None (the default) keeps only what the mean needs.
    value_range : (float, float), optional
        The histogram's range; by default the first field's dtype range for integer
        fields, (0, 1) for float ones.

    Examples
    --------
    >>> import numpy as np
    >>> acc = IlluminationAccumulator()
    >>> acc.add(np.full((4, 4), 2.0)); acc.add(np.full((4, 4), 4.0))
    >>> acc.function(smoothing="none", rescale=False)[0, 0]
    np.float64(3.0)
    """

    def __init__(self, *, median_bins: int | None = None,
                 value_range: tuple[float, float] | None = None) -> None:
        if median_bins is not None and not 2 <= int(median_bins) <= 4096:
            raise InvalidArgumentError(
                f"Invalid value for argument `median_bins`. Expected 2..4096 bins. "
                f"Received: median_bins={median_bins!r}.")
        self.median_bins = median_bins
        self.value_range = value_range
        self.total: Floats | None = None
        self.count: npt.NDArray[np.uint32] | None = None
        self.histogram: npt.NDArray[np.uint16] | None = None
        self.fields = 0

    def add(self, image: Any) -> None:
        """Count one field (2D, or ``[1, Y, X]``); its non-finite pixels are left out."""
        field = as_field(image, name="image")
        data = field.astype(np.float64)
        valid = np.isfinite(data)
        self._start(field)
        assert self.total is not None and self.count is not None
        if data.shape != self.total.shape:
            raise ShapeError(
                f"Invalid value for argument `image`. Expected a field of the shape of those "
                f"added before, {self.total.shape}. Received: {data.shape}.")
        self.total += np.where(valid, data, 0.0)
        self.count += valid
        self.fields += 1
        if self.histogram is not None:
            self._count_bins(data, valid)

    def _start(self, field: npt.NDArray[Any]) -> None:
        """Allocate the sums (and histogram) at the first field's shape."""
        if self.total is not None:
            return
        if self.value_range is None:
            kind = field.dtype.kind
            info = np.iinfo(field.dtype) if kind in "iu" else None
            self.value_range = (float(info.min), float(info.max)) if info else (0.0, 1.0)
        self.total = np.zeros(field.shape, np.float64)
        self.count = np.zeros(field.shape, np.uint32)
        if self.median_bins is not None:
            self.histogram = np.zeros((int(self.median_bins), *field.shape), np.uint16)

    def _count_bins(self, data: Floats, valid: npt.NDArray[np.bool_]) -> None:
        """Add one field to the per-pixel histogram."""
        assert self.histogram is not None and self.value_range is not None
        if self.fields > _MAX_COUNT:
            raise InvalidArgumentError(
                f"A median illumination function over more than {_MAX_COUNT} fields is not "
                f"supported (the histogram counts are uint16). Received: {self.fields} fields.")
        low, high = self.value_range
        bins = self.histogram.shape[0]
        index = np.clip(((data - low) / (high - low) * bins).astype(np.int64, copy=False)
                        if high > low else np.zeros(data.shape, np.int64), 0, bins - 1)
        ys, xs = np.nonzero(valid)
        self.histogram[index[ys, xs], ys, xs] += np.uint16(1)

    def merge(self, other: IlluminationAccumulator) -> IlluminationAccumulator:
        """Add another accumulator's fields to this one (the reduce step); returns ``self``."""
        if other.total is None:
            return self
        if self.total is None:
            self.median_bins, self.value_range = other.median_bins, other.value_range
            self.total = other.total.copy()
            self.count = None if other.count is None else other.count.copy()
            self.histogram = None if other.histogram is None else other.histogram.copy()
            self.fields = other.fields
            return self
        if other.total.shape != self.total.shape or other.median_bins != self.median_bins \
                or other.value_range != self.value_range:
            raise InvalidArgumentError(
                f"Invalid value for argument `other`. Expected an accumulator of fields of "
                f"shape {self.total.shape} with median_bins={self.median_bins} and "
                f"value_range={self.value_range}. Received: shape {other.total.shape}, "
                f"median_bins={other.median_bins}, value_range={other.value_range}.")
        assert self.count is not None and other.count is not None
        self.total += other.total
        self.count += other.count
        if self.histogram is not None and other.histogram is not None:
            if self.fields + other.fields > _MAX_COUNT:
                raise InvalidArgumentError(
                    f"A median illumination function over more than {_MAX_COUNT} fields is "
                    f"not supported. Received: {self.fields + other.fields} fields.")
            self.histogram += other.histogram
        self.fields += other.fields
        return self

    def average(self, method: Literal["mean", "median"] = "mean") -> Floats:
        """The per-pixel mean or (estimated) median of the fields; NaN where none was finite."""
        if self.total is None or self.count is None:
            raise InvalidArgumentError(
                "Invalid use of IlluminationAccumulator: no field was added. Expected at least "
                "one add() (or merge() of an accumulator with fields). Received: none.")
        if method == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                mean: Floats = self.total / self.count
            return mean
        if method != "median":
            raise InvalidArgumentError(
                f"Invalid value for argument `method`. Expected 'mean' or 'median'. "
                f"Received: method={method!r}.")
        if self.histogram is None:
            raise InvalidArgumentError(
                "Invalid value for argument `method`. A median needs the per-pixel histogram: "
                "create the accumulator with median_bins=... (e.g. 64). Received: "
                "method='median' on an accumulator made without median_bins.")
        return self._median()

    def _median(self) -> Floats:
        """The median estimated from the histogram, linear inside the median's bin."""
        assert self.histogram is not None and self.count is not None
        assert self.value_range is not None
        low, high = self.value_range
        bins = self.histogram.shape[0]
        cumulative = np.cumsum(self.histogram, axis=0, dtype=np.uint32)
        half = self.count / 2.0
        index = np.argmax(cumulative >= half, axis=0)
        before = np.where(index > 0, np.take_along_axis(
            cumulative, np.maximum(index - 1, 0)[None], axis=0)[0], 0)
        inside = np.take_along_axis(self.histogram, index[None], axis=0)[0].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            fraction = np.clip((half - before) / inside, 0, 1)
        width = (high - low) / bins
        return np.where(self.count > 0, low + (index + fraction) * width, np.nan)

    def function(self, *, method: Literal["mean", "median"] = "mean",
                 smoothing: Literal["gaussian", "median", "fit_polynomial", "none"] = "gaussian",
                 sigma: float | None = None, rescale: bool = True) -> Floats:
        """The illumination function: the fields' average, smoothed, rescaled.

        Parameters
        ----------
        method : {"mean", "median"}
            The per-pixel average of the fields (the median needs ``median_bins``).
        smoothing : {"gaussian", "median", "fit_polynomial", "none"}
            CellProfiler's smoothing methods: a Gaussian of ``sigma``, a median filter over a
            disk of radius ``max(1, int(sigma + 0.5))``, the least-squares quadratic
            ``A x**2 + B y**2 + C xy + D x + E y + F`` over the positive pixels, or none.
        sigma : float, optional
            In pixels; by default CellProfiler's automatic size ``min(30, max(shape) / 40)``
            divided by 2.35.
        rescale : bool
            Divide by the robust minimum (the value 2 % of the way up the sorted positive
            pixels; lower pixels are raised to it), so the function is >= 1 and dividing by
            it keeps the fields' scale (CellProfiler's "Yes").

        Returns
        -------
        numpy.ndarray
            float64, the fields' shape.
        """
        average = self.average(method)
        valid = np.isfinite(average)
        size = sigma if sigma is not None else min(30.0, max(average.shape) / 40.0) / 2.35
        smoothed = _smooth(np.where(valid, average, 0.0), valid, smoothing, size)
        return _rescale(smoothed) if rescale else smoothed


def _smooth(data: Floats, valid: npt.NDArray[np.bool_], method: str, sigma: float) -> Floats:
    """One of CellProfiler's smoothing methods, over the valid pixels."""
    ndi = require("scipy.ndimage", "Computing an illumination function")
    if method == "none":
        return np.where(valid, data, np.nan)
    if method == "gaussian":
        weights = ndi.gaussian_filter(valid.astype(np.float64), sigma, mode="constant")
        blurred = ndi.gaussian_filter(data, sigma, mode="constant")
        out: Floats = np.divide(blurred, weights, out=np.full(data.shape, np.nan),
                                where=weights > 0)
        return out
    if method == "median":
        radius = max(1, int(sigma + 0.5))
        y, x = np.mgrid[-radius:radius + 1, -radius:radius + 1]
        return np.asarray(ndi.median_filter(data, footprint=x * x + y * y <= radius * radius),
                          np.float64)
    if method == "fit_polynomial":
        return _fit_polynomial(data, valid)
    raise InvalidArgumentError(
        f"Invalid value for argument `smoothing`. Expected one of ['gaussian', 'median', "
        f"'fit_polynomial', 'none']. Received: smoothing={method!r}.")


def _fit_polynomial(data: Floats, valid: npt.NDArray[np.bool_]) -> Floats:
    """centrosome's ``fit_polynomial`` without its clipping to [0, 1] (fields keep their units)."""
    use = valid & (data > 0)
    if not use.any():
        return data
    y, x = np.mgrid[0:data.shape[0], 0:data.shape[1]].astype(np.float64)
    terms = [y, x, y * y, x * x, y * x, np.ones(data.shape)]
    design = np.column_stack([term[use] for term in terms])
    coefficients = np.linalg.lstsq(design, data[use], rcond=None)[0]
    fitted: Floats = sum(c * term for c, term in zip(coefficients, terms, strict=True))
    return fitted


def _rescale(function: Floats) -> Floats:
    """Divide by the robust minimum of the positive pixels, raising lower pixels to it."""
    positive = np.sort(function[np.isfinite(function) & (function > 0)])
    if positive.size == 0:
        return function
    robust = positive[int(positive.size * ROBUST_FRACTION)]
    out: Floats = np.maximum(function, robust) / robust
    return out


def apply_illumination(image: Any, function: Any, *,
                       how: Literal["divide", "subtract"] = "divide") -> Floats:
    """Correct a field by an illumination function (CellProfiler's CorrectIlluminationApply).

    Parameters
    ----------
    image : array_like
        The field (2D, or ``[1, Y, X]``).
    function : array_like
        The illumination function, same shape (:meth:`IlluminationAccumulator.function`).
    how : {"divide", "subtract"}
        ``image / function`` (the function must be > 0 wherever the image is finite) or
        ``image - function``.

    Returns
    -------
    numpy.ndarray
        float64; nothing is clipped (CellProfiler clips to [0, 1] for its [0, 1] images).
    """
    data = as_field(image, name="image").astype(np.float64)
    correction = as_field(function, name="function").astype(np.float64)
    if data.shape != correction.shape:
        raise ShapeError(
            f"Invalid value for argument `function`. Expected the image's shape {data.shape}. "
            f"Received: {correction.shape}.")
    if how == "subtract":
        out: Floats = data - correction
        return out
    if how != "divide":
        raise InvalidArgumentError(
            f"Invalid value for argument `how`. Expected 'divide' or 'subtract'. "
            f"Received: how={how!r}.")
    bad = np.isfinite(data) & ~(correction > 0)
    if bad.any():
        raise InvalidArgumentError(
            f"Invalid value for argument `function`. Expected values > 0 to divide by. "
            f"Received: {int(bad.sum())} pixels <= 0 or not finite (make it with "
            f"rescale=True, or use how='subtract').")
    divided: Floats = data / correction
    return divided
