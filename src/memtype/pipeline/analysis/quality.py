"""Per-image quality: CellProfiler 4.2's MeasureImageQuality, and flags for bad fields.

Blur (``FocusScore``, ``LocalFocusScore``, ``Correlation``, ``PowerLogLogSlope``), saturation
(``PercentMaximal``, ``PercentMinimal``) and intensity (``TotalArea``, ``TotalIntensity``,
``MeanIntensity``, ``MedianIntensity``, ``StdIntensity``, ``MADIntensity``, ``MaxIntensity``,
``MinIntensity``) as that module defines them (``docs/measurements.md``); non-finite pixels
are left out, as CellProfiler leaves out masked ones. :func:`flag_fields` flags the fields
of a plate whose blur or saturation stands out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memtype.errors import InvalidArgumentError
from memtype.pipeline.analysis._inputs import as_field

__all__ = ["flag_fields", "measure_image_quality"]

Floats = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]


def _focus_score(values: Floats) -> float:
    """Normalised variance: sum((p - mean)**2) / (count * mean); 0 when the mean is <= 0."""
    if values.size == 0:
        return 0.0
    mean = float(values.mean())
    return float(((values - mean) ** 2).sum() / (values.size * mean)) if mean > 0 else 0.0


def _local_focus_score(image: Floats, valid: Mask, scale: int) -> float:
    """var / median of the normalised variances of (scale x scale)-ish tiles (CellProfiler's
    grid: ceil(shape / scale) tiles per axis, each pixel's tile = floor(index * tiles / size))."""
    height, width = image.shape
    rows, cols = (height + scale - 1) // scale, (width + scale - 1) // scale
    tile_y = (np.arange(height) * rows // height)[:, None]
    tile_x = (np.arange(width) * cols // width)[None, :]
    grid = np.where(valid, tile_y * cols + tile_x + 1, 0).ravel()
    flat = np.where(valid, image, 0.0).ravel()
    count = np.bincount(grid, minlength=rows * cols + 1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.bincount(grid, flat, minlength=rows * cols + 1) / count
        squares = np.bincount(grid, (flat - means[grid]) ** 2, minlength=rows * cols + 1)
        keep = np.isfinite(means) & (means != 0)
        keep[0] = False
        variances = squares[keep] / (count[keep] * means[keep])
    if variances.size == 0:
        return 0.0
    median = float(np.median(variances))
    return float(np.var(variances) / median) if np.isfinite(median) and median > 0 else 0.0


def _correlation(image: Floats, valid: Mask, scale: int, levels: int = 8) -> float:
    """Haralick's correlation (centrosome's H3) of the valid pixels at offset (0, scale)."""
    if not valid.any() or scale >= image.shape[1]:
        return 0.0
    low, high = image[valid].min(), image[valid].max()
    normalised = (image - low) / (high - low if high > low else 1.0)
    quantised = np.clip(normalised // (1.0 / levels), 0, levels - 1).astype(np.int64)
    quantised[~valid] = 0
    count = int(quantised[valid].max()) + 1  # centrosome: the levels present
    first, second = quantised[:, :-scale], quantised[:, scale:]
    both = valid[:, :-scale] & valid[:, scale:]
    if not both.any():
        return 0.0
    pairs = np.bincount(first[both] * count + second[both], minlength=count * count)
    p = pairs.reshape(count, count) / both.sum()
    steps = np.arange(1, count + 1, dtype=np.float64)
    px, py = p.sum(1) / p.sum(), p.sum(0) / p.sum()
    mux, muy = (steps * px).sum(), (steps * py).sum()
    sx = np.sqrt(((steps - mux) ** 2 * px).sum())
    sy = np.sqrt(((steps - muy) ** 2 * py).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        value = ((np.outer(steps, steps) * p).sum() - mux * muy) / (sx * sy)
    return float(value) if np.isfinite(value) else 0.0


def _power_log_log_slope(image: Floats, valid: Mask) -> float:
    """The slope of log(power) on log(radius) of the radial power spectrum (centrosome rps).

    Invalid pixels take the valid pixels' mean; radii 2 .. min(shape) / 8 (exclusive);
    0 for a constant image or fewer than two radii with power.
    """
    data = np.where(valid, image, image[valid].mean() if valid.any() else 0.0)
    if np.unique(data).size < 2:
        return 0.0
    height, width = data.shape
    radii2 = np.arange(height)[:, None] ** 2 + np.arange(width)[None, :] ** 2
    radii2 = np.minimum(radii2, np.flipud(radii2))
    radii2 = np.minimum(radii2, np.fliplr(radii2))
    with np.errstate(invalid="ignore", divide="ignore"):
        data = data / np.median(np.abs(data - data.mean()))
        magnitude = np.abs(np.fft.fft2(data - data.mean()))
    radius = np.floor(np.sqrt(radii2)).astype(np.intp) + 1
    wanted = np.arange(2, int(np.floor(min(height, width) / 8.0)))
    if wanted.size == 0:
        return 0.0
    magsum = np.bincount(radius.ravel(), magnitude.ravel())[wanted]
    power = np.bincount(radius.ravel(), (magnitude**2).ravel())[wanted]
    have = magsum > 0
    if magsum.sum() <= 0 or have.sum() < 2:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        log_power = np.log(power[have])
    finite = np.isfinite(log_power)
    design = np.column_stack((np.log(wanted[have][finite]), np.ones(finite.sum())))
    slope = np.linalg.lstsq(design, log_power[finite], rcond=None)[0][0]
    return float(slope)


def _intensity(values: Floats) -> dict[str, float]:
    """Pixel count, sum, mean, median, std, MAD, max and min (0 each without pixels)."""
    if values.size == 0:
        return dict.fromkeys(("TotalArea", "TotalIntensity", "MeanIntensity",
                              "MedianIntensity", "StdIntensity", "MADIntensity",
                              "MaxIntensity", "MinIntensity"), 0.0)
    median = float(np.median(values))
    return {"TotalArea": float(values.size), "TotalIntensity": float(values.sum()),
            "MeanIntensity": float(values.sum() / values.size), "MedianIntensity": median,
            "StdIntensity": float(values.std()),
            "MADIntensity": float(np.median(np.abs(values - median))),
            "MaxIntensity": float(values.max()), "MinIntensity": float(values.min())}


def _saturation(values: Floats, saturation_value: float | None) -> dict[str, float]:
    """Percent of pixels at the image's maximum and minimum (and at or above a saturation)."""
    out = {"PercentMaximal": 0.0, "PercentMinimal": 0.0}
    if values.size:
        out["PercentMaximal"] = 100.0 * float(np.sum(values == values.max())) / values.size
        out["PercentMinimal"] = 100.0 * float(np.sum(values == values.min())) / values.size
    if saturation_value is not None:
        out["PercentSaturated"] = (100.0 * float(np.sum(values >= saturation_value))
                                   / values.size) if values.size else 0.0
    return out


def measure_image_quality(image: Any, *, image_name: str, scale: int = 20,
                          saturation_value: float | None = None) -> dict[str, float]:
    """The quality of one field's channel: CellProfiler's MeasureImageQuality.

    Parameters
    ----------
    image : array_like
        A 2D field (or ``[1, Y, X]``), in its own units (CellProfiler's are [0, 1]: the
        intensity measurements scale with the units, the blur and saturation ones do not).
    image_name : str
        The channel's name, the suffix of every key.
    scale : int
        The tile size of ``LocalFocusScore`` and the offset of ``Correlation`` in pixels
        (CellProfiler's default 20); those two keys end with ``_<scale>``.
    saturation_value : float, optional
        The detector's saturation level (4095 for a 12-bit camera): adds
        ``ImageQuality_PercentSaturated_<image_name>``, the percent of pixels at or above it
        (a memtype measurement; CellProfiler's ``PercentMaximal`` counts the pixels at the
        image's own maximum, saturated or not).

    Returns
    -------
    dict of str to float
        ``ImageQuality_<feature>_<image_name>`` (``..._<scale>`` for the two tiled ones).

    Examples
    --------
    >>> import numpy as np
    >>> quality = measure_image_quality(np.array([[1.0, 3.0], [1.0, 3.0]]), image_name="DNA")
    >>> quality["ImageQuality_FocusScore_DNA"], quality["ImageQuality_PercentMaximal_DNA"]
    (0.5, 50.0)
    """
    if int(scale) < 1:
        raise InvalidArgumentError(
            f"Invalid value for argument `scale`. Expected a tile size of at least 1 pixel. "
            f"Received: scale={scale!r}.")
    data = as_field(image, name="image").astype(np.float64)
    valid = np.isfinite(data)
    values = data[valid]
    out = {"FocusScore": _focus_score(values),
           "PowerLogLogSlope": _power_log_log_slope(data, valid)}
    out.update(_saturation(values, saturation_value))
    out.update(_intensity(values))
    named = {f"ImageQuality_{key}_{image_name}": value for key, value in out.items()}
    named[f"ImageQuality_LocalFocusScore_{image_name}_{scale}"] = \
        _local_focus_score(data, valid, scale)
    named[f"ImageQuality_Correlation_{image_name}_{scale}"] = _correlation(data, valid, scale)
    return named


def flag_fields(rows: Sequence[Mapping[str, float]], *, outlier_mads: float = 3.0,
                max_percent_maximal: float = 1.0) -> list[tuple[str, ...]]:
    """Flag the fields of a plate whose blur or saturation stands out.

    The rule, per row (one field's :func:`measure_image_quality` keys, every channel):

    * ``ImageQuality_FocusScore_*`` or ``ImageQuality_PowerLogLogSlope_*`` lower than the
      median of all rows by more than ``outlier_mads`` scaled MADs (1.4826 x the median
      absolute deviation: a robust z-score below ``-outlier_mads``): out of focus;
    * ``ImageQuality_PercentMaximal_*`` or ``ImageQuality_PercentSaturated_*`` above
      ``max_percent_maximal``: saturated.

    Parameters
    ----------
    rows : sequence of mapping
        One mapping per field; keys that are not these measurements are ignored.
    outlier_mads : float
        How many scaled MADs below the median flag a field.
    max_percent_maximal : float
        The percent of pixels at the maximum (or saturated) above which a field is flagged.

    Returns
    -------
    list of tuple of str
        Per row, the reasons it is flagged (empty: not flagged), e.g.
        ``"ImageQuality_FocusScore_DNA low: 0.01 (median 0.2, MAD 0.01)"``.
    """
    reasons: list[list[str]] = [[] for _ in rows]
    keys = sorted({key for row in rows for key in row})
    for key in keys:
        if key.startswith(("ImageQuality_FocusScore_", "ImageQuality_PowerLogLogSlope_")):
            _flag_low(rows, key, outlier_mads, reasons)
        elif key.startswith(("ImageQuality_PercentMaximal_", "ImageQuality_PercentSaturated_")):
            for row, found in zip(rows, reasons, strict=True):
                if key in row and row[key] > max_percent_maximal:
                    found.append(f"{key} high: {row[key]:.3g} % > {max_percent_maximal:g} %")
    return [tuple(found) for found in reasons]


def _flag_low(rows: Sequence[Mapping[str, float]], key: str, outlier_mads: float,
              reasons: list[list[str]]) -> None:
    """Add a reason to each row whose ``key`` is a low robust outlier among the rows."""
    values = np.array([row.get(key, np.nan) for row in rows], dtype=np.float64)
    finite = values[np.isfinite(values)]
    if finite.size < 3:
        return
    median = float(np.median(finite))
    mad = 1.4826 * float(np.median(np.abs(finite - median)))
    if mad == 0:
        return
    for value, found in zip(values, reasons, strict=True):
        if np.isfinite(value) and (value - median) / mad < -outlier_mads:
            found.append(f"{key} low: {value:.3g} (median {median:.3g}, MAD {mad:.3g})")
