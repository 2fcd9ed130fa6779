"""Illumination correction: the accumulator, the function and its application.

CellProfiler 4.2's CorrectIlluminationCalculate ("Regular", "All" images; smoothing
``smooth_plane``; rescaling ``apply_scaling`` with ROBUST_FACTOR 0.02) and
CorrectIlluminationApply (divide or subtract) define what is checked.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from memtype.errors import InvalidArgumentError, ShapeError
from memtype.pipeline.analysis.illumination import (
    IlluminationAccumulator,
    apply_illumination,
    illumination_function,
)

pytestmark = pytest.mark.requires("scipy")


def vignetted_fields(count: int = 12, dtype: type = np.uint16) -> tuple[list[np.ndarray],
                                                                          np.ndarray]:
    """Random texture times a smooth vignette, as a microscope's fields."""
    y, x = np.mgrid[:48, :64]
    vignette = 1.0 - 0.5 * (((y - 24) / 24.0) ** 2 + ((x - 32) / 32.0) ** 2) / 2
    rng = np.random.default_rng(0)
    fields = [(rng.uniform(500, 1500, vignette.shape) * vignette).astype(dtype)
              for _ in range(count)]
    return fields, vignette


def accumulate(fields: list[np.ndarray], **kwargs: object) -> IlluminationAccumulator:
    acc = IlluminationAccumulator(**kwargs)  # type: ignore[arg-type]
    for field in fields:
        acc.add(field)
    return acc


def test_mean_is_the_per_pixel_mean() -> None:
    fields, _ = vignetted_fields()
    function = accumulate(fields).function(smoothing="none", rescale=False)
    np.testing.assert_allclose(function, np.mean(np.stack(fields).astype(float), axis=0))


def test_merge_equals_one_accumulator() -> None:
    fields, _ = vignetted_fields()
    whole = accumulate(fields, median_bins=32)
    parts = accumulate(fields[:5], median_bins=32).merge(accumulate(fields[5:], median_bins=32))
    np.testing.assert_array_equal(parts.total, whole.total)
    assert parts.total is not None and parts.total.dtype == np.uint32  # exact, as added
    np.testing.assert_array_equal(parts.histogram, whole.histogram)
    assert parts.fields == whole.fields == 12


def test_merge_into_an_empty_accumulator() -> None:
    fields, _ = vignetted_fields(3)
    merged = IlluminationAccumulator().merge(accumulate(fields))
    np.testing.assert_array_equal(merged.average(), accumulate(fields).average())


def test_pickles_and_merges_after() -> None:
    fields, _ = vignetted_fields(4)
    copy = pickle.loads(pickle.dumps(accumulate(fields[:2], median_bins=8)))
    copy.merge(accumulate(fields[2:], median_bins=8))
    np.testing.assert_array_equal(copy.average(), accumulate(fields, median_bins=8).average())


def test_a_16_bit_mean_keeps_one_uint32_sum() -> None:
    fields, _ = vignetted_fields(12)
    acc = accumulate(fields)
    assert acc.total is not None and acc.total.dtype == np.uint32 and acc.count is None
    assert acc.total.nbytes == fields[0].size * 4


def test_a_float_mean_counts_per_pixel_once_a_pixel_is_not_finite() -> None:
    a, b = np.full((4, 4), 2.0), np.full((4, 4), 4.0)
    b[0, 0] = np.nan
    acc = accumulate([a])
    assert acc.count is None
    acc.add(b)
    assert acc.count is not None and acc.count[0, 0] == 1 and acc.count[1, 1] == 2


def test_a_16_bit_mean_is_exact() -> None:
    fields, _ = vignetted_fields(12)
    exact = np.sum(np.stack(fields).astype(np.int64), axis=0) / 12.0
    np.testing.assert_array_equal(accumulate(fields).average(), exact)


def test_the_uint32_sum_becomes_float64_before_it_could_overflow() -> None:
    acc = IlluminationAccumulator()
    for _ in range(65538):  # 65538 x 65535 > 2**32 - 1
        acc.add(np.full((1, 1), 65535, np.uint16))
    assert acc.total is not None and acc.total.dtype == np.float64
    assert acc.average()[0, 0] == 65535.0


def test_merge_keeps_the_per_pixel_count_of_either_side() -> None:
    a, b = np.full((4, 4), 2.0), np.full((4, 4), 4.0)
    b[0, 0] = np.nan
    merged = accumulate([a]).merge(accumulate([b, a]))
    np.testing.assert_array_equal(merged.average(), accumulate([a, b, a]).average())
    assert merged.count is not None and merged.count[0, 0] == 2


def _histogram_median(fields: list[np.ndarray], bins: int, low: float, high: float
                      ) -> np.ndarray:
    """The histogram median's definition, written out: each pixel's histogram of the fields
    over ``bins`` equal bins (values outside in the end bins), the first bin whose cumulative
    count reaches half the count, linear inside it."""
    data = np.stack(fields).astype(np.float64)
    valid = np.isfinite(data)
    index = np.clip(((np.where(valid, data, low) - low) / (high - low) * bins).astype(int),
                    0, bins - 1)
    histogram = np.stack([((index == b) & valid).sum(axis=0) for b in range(bins)])
    cumulative = np.cumsum(histogram, axis=0)
    count = valid.sum(axis=0)
    half = count / 2.0
    median_bin = np.argmax(cumulative >= half, axis=0)
    before = np.where(median_bin > 0, np.take_along_axis(
        cumulative, np.maximum(median_bin - 1, 0)[None], axis=0)[0], 0)
    inside = np.take_along_axis(histogram, median_bin[None], axis=0)[0].astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        fraction = np.clip((half - before) / inside, 0, 1)
    return np.where(count > 0, low + (median_bin + fraction) * (high - low) / bins, np.nan)


@pytest.mark.parametrize(("dtype", "bins", "value_range"), [
    (np.uint16, 256, None), (np.uint16, 7, (400.0, 1200.0)), (np.uint8, 16, None),
    (np.int16, 64, None), (np.float32, 32, (0.0, 2000.0)), (np.float64, 256, (0.0, 2000.0))])
def test_median_is_the_histogram_definition(dtype: type, bins: int,
                                            value_range: tuple[float, float] | None) -> None:
    fields, _ = vignetted_fields(9, np.float64)
    fields = [np.asarray(f if dtype in (np.float32, np.float64) else f % 200, dtype)
              for f in fields]
    if dtype is np.float64:
        fields[0][0, :5] = np.nan
        fields[1][0, :3] = np.inf
    acc = accumulate(fields, median_bins=bins, value_range=value_range)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    low, high = value_range or (float(info.min), float(info.max))  # type: ignore[union-attr]
    np.testing.assert_array_equal(acc.average("median"),
                                  _histogram_median(fields, bins, low, high))


@pytest.mark.parametrize("method", ["mean", "median"])
def test_bands_of_rows_give_the_rows_of_the_whole_average(method: str) -> None:
    fields, _ = vignetted_fields(7)
    whole = accumulate(fields, median_bins=64).average(method)
    bands = [accumulate([f[a:b] for f in fields], median_bins=64).average(method)
             for a, b in [(0, 5), (5, 30), (30, 48)]]
    np.testing.assert_array_equal(np.concatenate(bands), whole)


def test_illumination_function_of_an_average_is_the_accumulators_function() -> None:
    fields, _ = vignetted_fields(5)
    acc = accumulate(fields, median_bins=32)
    np.testing.assert_array_equal(illumination_function(acc.average("median"), sigma=2),
                                  acc.function(method="median", sigma=2))


@pytest.mark.parametrize("bins", [16, 64, 256])
def test_median_within_one_bin_width(bins: int) -> None:
    fields, _ = vignetted_fields(15)
    acc = accumulate(fields, median_bins=bins, value_range=(0.0, 2000.0))
    exact = np.median(np.stack(fields).astype(float), axis=0)
    error = np.abs(acc.average("median") - exact)
    assert error.max() <= 2000.0 / bins


def test_median_default_range_of_an_integer_dtype() -> None:
    fields, _ = vignetted_fields(5)
    acc = accumulate(fields, median_bins=64)
    assert acc.value_range == (0.0, 65535.0)


def test_nan_pixels_are_left_out_of_the_mean() -> None:
    a, b = np.full((4, 4), 2.0), np.full((4, 4), 4.0)
    b[0, 0] = np.nan
    mean = accumulate([a, b]).average()
    assert mean[0, 0] == 2.0 and mean[1, 1] == 3.0


# smooth_with_function_and_mask: gaussian(data * mask) / gaussian(mask), so a flat
# function stays flat up to the edges
def test_gaussian_smoothing_keeps_a_flat_function_flat() -> None:
    function = accumulate([np.full((30, 40), 5.0)]).function(rescale=False, sigma=4)
    np.testing.assert_allclose(function, 5.0)


# fit_polynomial: least squares of A x**2 + B y**2 + C xy + D x + E y + F
def test_fit_polynomial_recovers_a_quadratic() -> None:
    y, x = np.mgrid[:30, :40].astype(float)
    surface = 3 + 0.01 * x * x - 0.02 * y * y + 0.005 * x * y + 0.1 * x
    function = accumulate([surface]).function(smoothing="fit_polynomial", rescale=False)
    np.testing.assert_allclose(function, surface, rtol=1e-9)


def test_median_smoothing_removes_a_speck() -> None:
    flat = np.full((30, 30), 2.0)
    flat[15, 15] = 100.0
    function = accumulate([flat]).function(smoothing="median", sigma=2, rescale=False)
    assert function[15, 15] == 2.0


# apply_scaling "Yes": divide by the value 2 % of the way up the sorted positive pixels,
# raising lower pixels to it: the function's minimum is 1
def test_rescale_divides_by_the_robust_minimum() -> None:
    values = np.arange(1.0, 101.0).reshape(10, 10)
    function = accumulate([values]).function(smoothing="none")
    robust = np.sort(values.ravel())[int(100 * 0.02)]
    np.testing.assert_allclose(function, np.maximum(values, robust) / robust)
    assert function.min() == 1.0


def test_function_follows_the_vignette_and_removes_it() -> None:
    fields, vignette = vignetted_fields(40)
    function = accumulate(fields).function(sigma=3, rescale=False)
    inner = np.s_[8:-8, 8:-8]  # a Gaussian's edge bias aside
    np.testing.assert_allclose(function[inner] / function.mean(),
                               vignette[inner] / vignette.mean(), rtol=0.03)
    corrected = np.mean([apply_illumination(f, function) for f in fields], axis=0)
    import scipy.ndimage as ndi

    trend = ndi.gaussian_filter(corrected, 3, mode="nearest")
    assert trend.std() / trend.mean() < 0.03 < vignette.std() / vignette.mean()


@pytest.mark.parametrize(("how", "expected"), [("divide", 2.0), ("subtract", 4.0)])
def test_apply(how: str, expected: float) -> None:
    out = apply_illumination(np.full((3, 3), 8.0), np.full((3, 3), 4.0)[None], how=how)
    np.testing.assert_array_equal(out, np.full((3, 3), expected))


def test_apply_refuses_dividing_by_zero() -> None:
    function = np.ones((3, 3))
    function[1, 1] = 0
    with pytest.raises(InvalidArgumentError, match="1 pixels <= 0"):
        apply_illumination(np.ones((3, 3)), function)


def test_apply_refuses_shape_mismatch() -> None:
    with pytest.raises(ShapeError, match=r"\(3, 3\).*\(3, 4\)"):
        apply_illumination(np.ones((3, 3)), np.ones((3, 4)))


def test_add_refuses_another_shape() -> None:
    acc = accumulate([np.ones((3, 3))])
    with pytest.raises(ShapeError, match=r"\(3, 3\).*\(4, 4\)"):
        acc.add(np.ones((4, 4)))


def test_merge_refuses_different_settings() -> None:
    with pytest.raises(InvalidArgumentError, match="median_bins"):
        accumulate([np.ones((3, 3))]).merge(accumulate([np.ones((3, 3))], median_bins=8))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"method": "median"}, "median_bins"), ({"method": "mode"}, "method='mode'"),
    ({"smoothing": "splines"}, "smoothing='splines'")])
def test_function_refuses(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        accumulate([np.ones((3, 3))]).function(**kwargs)


def test_function_without_fields() -> None:
    with pytest.raises(InvalidArgumentError, match="no field was added"):
        IlluminationAccumulator().function()
