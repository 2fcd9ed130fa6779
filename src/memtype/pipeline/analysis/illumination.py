"""Illumination correction: CellProfiler 4.2's CorrectIlluminationCalculate / Apply, the math.

An :class:`IlluminationAccumulator` takes the fields of a plate one at a time (``add``), merges
with the accumulators of other workers (``merge``: map → reduce) and gives the illumination
function (``function``): the per-pixel mean (or median) of every field, smoothed and rescaled
as CellProfiler's "Regular" intensity, "All" images, does (:func:`illumination_function`
smooths and rescales an average computed elsewhere, e.g. stitched from tiles).
:func:`apply_illumination` divides a field by it (or subtracts it). The accumulator is plain
NumPy arrays, so it pickles for dask.

Its size: a mean needs the per-pixel sum (uint32 for 8- and 16-bit unsigned fields, exact and
promoted to float64 before it could overflow; float64 otherwise) and, only once a field had
non-finite pixels, a per-pixel count (uint32). CellProfiler has no median of images (its
"Median" is a rescaling choice and a smoothing filter); memtype's ``median`` is estimated from
a per-pixel histogram of ``median_bins`` fixed bins over ``value_range`` (uint16 counts:
``median_bins`` x 2 bytes per pixel, 512 B for 256 bins, i.e. 2.8 GB for a 2160 x 2560 field,
whatever the number of fields), interpolated linearly inside the median's bin: it is within
one bin width, ``(high - low) / median_bins``, of the lower median (the ``ceil(n / 2)``-th
smallest of ``n`` values; for an even ``n`` numpy's median averages it with the next one,
which may lie far from it); values outside the range count in the end bins. The estimate is
per pixel, so an accumulator of a band of rows of every field gives the same values as one of
the whole fields (the plate-wide pass splits a median that way to bound its memory).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from memtype import require
from memtype.errors import InvalidArgumentError, ShapeError
from memtype.pipeline.analysis._inputs import as_field

__all__ = ["IlluminationAccumulator", "apply_illumination", "illumination_function"]

Floats = npt.NDArray[np.float64]

ROBUST_FRACTION = 0.02  # CellProfiler's ROBUST_FACTOR: the rescaling's robust minimum
_MAX_COUNT = np.iinfo(np.uint16).max
_MAX_SUM = float(np.iinfo(np.uint32).max)
_TABLE_DTYPES = frozenset("?bBhH")
"""Field dtypes (bool, 8- and 16-bit integers) binned through a table of every value."""


def _fits(fields: int) -> bool:
    """Whether a uint32 sum of this many 16-bit fields cannot overflow."""
    return fields * 65535.0 <= _MAX_SUM


def _sums_exactly(dtype: np.dtype[Any]) -> bool:
    """Whether fields of this dtype are summed in uint32 (bool and unsigned up to 16 bits)."""
    return dtype.kind == "b" or (dtype.kind == "u" and dtype.itemsize <= 2)


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
        self.total: npt.NDArray[Any] | None = None
        """The per-pixel sum: uint32 while exact (unsigned fields up to 16 bits), else float64."""
        self.count: npt.NDArray[np.uint32] | None = None
        """The per-pixel count of finite values; None while every pixel of every field was."""
        self.histogram: npt.NDArray[np.uint16] | None = None
        self.fields = 0

    def add(self, image: Any) -> None:
        """Count one field (2D, or ``[1, Y, X]``); its non-finite pixels are left out."""
        field = as_field(image, name="image")
        self._start(field)
        assert self.total is not None
        if field.shape != self.total.shape:
            raise ShapeError(
                f"Invalid value for argument `image`. Expected a field of the shape of those "
                f"added before, {self.total.shape}. Received: {field.shape}.")
        if self.histogram is not None and self.fields + 1 > _MAX_COUNT:
            raise InvalidArgumentError(
                f"A median illumination function over more than {_MAX_COUNT} fields is not "
                f"supported (the histogram counts are uint16). Received: {self.fields + 1} "
                "fields.")
        valid = np.isfinite(field) if field.dtype.kind == "f" else None
        if valid is not None and bool(valid.all()):
            valid = None
        self._add_total(field, valid)
        self._add_count(valid)
        if self.histogram is not None:
            self._count_bins(field, valid)
        self.fields += 1

    def _start(self, field: npt.NDArray[Any]) -> None:
        """Allocate the sum (and histogram) at the first field's shape."""
        if self.total is not None:
            return
        if self.value_range is None:
            kind = field.dtype.kind
            info = np.iinfo(field.dtype) if kind in "iu" else None
            self.value_range = (float(info.min), float(info.max)) if info else (0.0, 1.0)
        exact = _sums_exactly(field.dtype)
        self.total = np.zeros(field.shape, np.uint32 if exact else np.float64)
        if self.median_bins is not None:
            self.histogram = np.zeros((int(self.median_bins), *field.shape), np.uint16)

    def _add_total(self, field: npt.NDArray[Any], valid: npt.NDArray[np.bool_] | None) -> None:
        """Add a field's finite pixels to the sum (exact: uint32 while it cannot overflow)."""
        assert self.total is not None
        if self.total.dtype == np.uint32:
            if _sums_exactly(field.dtype) and _fits(self.fields + 1):
                np.add(self.total, field, out=self.total)
                return
            self.total = self.total.astype(np.float64)
        if valid is None:
            np.add(self.total, field, out=self.total)
        else:
            self.total += np.where(valid, field.astype(np.float64), 0.0)

    def _add_count(self, valid: npt.NDArray[np.bool_] | None) -> None:
        """Count a field's finite pixels (kept per pixel once a field had others)."""
        if valid is not None and self.count is None:
            assert self.total is not None
            self.count = np.full(self.total.shape, self.fields, np.uint32)
        if self.count is not None:
            self.count += np.uint32(1) if valid is None else valid

    def counts(self) -> npt.NDArray[np.uint32]:
        """The per-pixel number of finite values added."""
        if self.count is not None:
            return self.count
        assert self.total is not None
        return np.full(self.total.shape, self.fields, np.uint32)

    def _count_bins(self, field: npt.NDArray[Any],
                    valid: npt.NDArray[np.bool_] | None) -> None:
        """Add one field's finite pixels to the per-pixel histogram."""
        assert self.histogram is not None and self.value_range is not None
        bins = self.histogram.shape[0]
        pixels = field.size
        if valid is None:
            index = _bin_index(field.ravel(), self.value_range, bins)
            where = np.arange(pixels, dtype=np.intp)
        else:
            where = np.flatnonzero(valid)
            index = _bin_index(field.ravel()[where], self.value_range, bins)
        index *= pixels
        index += where
        flat = self.histogram.reshape(-1)
        flat[index] += np.uint16(1)  # one position per pixel: no repeated index

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
        if self.histogram is not None and self.fields + other.fields > _MAX_COUNT:
            raise InvalidArgumentError(
                f"A median illumination function over more than {_MAX_COUNT} fields is "
                f"not supported. Received: {self.fields + other.fields} fields.")
        self._merge_total(other.total, self.fields + other.fields)
        if self.count is not None or other.count is not None:
            self.count = self.counts() + other.counts()
        if self.histogram is not None and other.histogram is not None:
            self.histogram += other.histogram
        self.fields += other.fields
        return self

    def _merge_total(self, other: npt.NDArray[Any], fields: int) -> None:
        """Add another sum to this one, in float64 unless both are exact and cannot overflow."""
        assert self.total is not None
        if self.total.dtype == np.uint32 and (other.dtype != np.uint32 or not _fits(fields)):
            self.total = self.total.astype(np.float64)
        np.add(self.total, other, out=self.total)

    def average(self, method: Literal["mean", "median"] = "mean") -> Floats:
        """The per-pixel mean or (estimated) median of the fields; NaN where none was finite."""
        if self.total is None:
            raise InvalidArgumentError(
                "Invalid use of IlluminationAccumulator: no field was added. Expected at least "
                "one add() (or merge() of an accumulator with fields). Received: none.")
        if method == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                mean: Floats = np.true_divide(self.total, self.counts(), dtype=np.float64)
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
        """The median estimated from the histogram, linear inside the median's bin (the
        bins are walked in order: memory is a few images, not a cumulative histogram)."""
        assert self.histogram is not None and self.value_range is not None
        count = self.counts()
        half = count / 2.0
        running = np.zeros(count.shape, np.uint32)
        index = np.zeros(count.shape, np.intp)
        before = np.zeros(count.shape, np.uint32)
        inside = np.zeros(count.shape, np.uint32)
        pending = np.ones(count.shape, np.bool_)
        for b, counted in enumerate(self.histogram):
            np.add(running, counted, out=running)
            hit = pending & (running >= half)
            if hit.any():
                index[hit], inside[hit] = b, counted[hit]
                before[hit] = running[hit] - inside[hit]
                pending &= ~hit
                if not pending.any():
                    break
        with np.errstate(invalid="ignore", divide="ignore"):
            fraction = np.clip((half - before) / inside.astype(np.float64), 0, 1)
        low, high = self.value_range
        width = (high - low) / self.histogram.shape[0]
        return np.where(count > 0, low + (index + fraction) * width, np.nan)

    def function(self, *, method: Literal["mean", "median"] = "mean",
                 smoothing: Literal["gaussian", "median", "fit_polynomial", "none"] = "gaussian",
                 sigma: float | None = None, rescale: bool = True) -> Floats:
        """The illumination function: the fields' average, smoothed, rescaled.

        Parameters
        ----------
        method : {"mean", "median"}
            The per-pixel average of the fields (the median needs ``median_bins``).
        smoothing, sigma, rescale
            As :func:`illumination_function`.

        Returns
        -------
        numpy.ndarray
            float64, the fields' shape.
        """
        return illumination_function(self.average(method), smoothing=smoothing, sigma=sigma,
                                     rescale=rescale)


@lru_cache(maxsize=16)
def _bin_table(dtype: str, value_range: tuple[float, float], bins: int) -> npt.NDArray[np.intp]:
    """The bin of every value of a small integer dtype (its minimum at index 0)."""
    info = np.iinfo(dtype) if np.dtype(dtype).kind != "b" else None
    low = info.min if info else 0
    values = np.arange(low, (info.max if info else 1) + 1, dtype=np.float64)
    return _bin_formula(values, value_range, bins)


def _bin_formula(values: Floats, value_range: tuple[float, float], bins: int
                 ) -> npt.NDArray[np.intp]:
    """Each value's bin: ``bins`` equal bins over the range, the ends taking what is outside."""
    low, high = value_range
    if not high > low:
        return np.zeros(values.shape, np.intp)
    index = ((values - low) / (high - low) * bins).astype(np.intp, copy=False)
    return np.clip(index, 0, bins - 1, out=index)


def _bin_index(values: npt.NDArray[Any], value_range: tuple[float, float], bins: int
               ) -> npt.NDArray[np.intp]:
    """The bins of finite values (through a table for bool and 8- and 16-bit integers)."""
    if values.dtype.char in _TABLE_DTYPES:
        table = _bin_table(values.dtype.str, value_range, bins)
        if values.dtype.kind == "b":
            return table[values.view(np.uint8)]
        low = np.iinfo(values.dtype).min
        return table[values if low == 0 else values.astype(np.intp) - low]
    return _bin_formula(values.astype(np.float64), value_range, bins)


def illumination_function(average: Any, *,
                          smoothing: Literal["gaussian", "median", "fit_polynomial",
                                             "none"] = "gaussian",
                          sigma: float | None = None, rescale: bool = True) -> Floats:
    """An illumination function from the per-pixel average of the fields: smoothed, rescaled.

    Parameters
    ----------
    average : array_like
        The per-pixel mean (or median) of the fields (2D; NaN where no field was finite).
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
        float64, the average's shape.
    """
    average = np.asarray(as_field(average, name="average"), dtype=np.float64)
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
