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
from memtype.pipeline.analysis.illumination import IlluminationAccumulator, apply_illumination

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


def test_accumulator_size_is_bounded_by_the_field() -> None:
    fields, _ = vignetted_fields(12)
    acc = accumulate(fields)
    assert acc.total is not None and acc.count is not None
    assert acc.total.nbytes + acc.count.nbytes == fields[0].size * 12


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
