"""Per-object intensity: measure_intensity against CellProfiler 4.2's MeasureObjectIntensity.

The reference (tests/_cellprofiler_reference.py) is CellProfiler's own per-label arithmetic
transcribed from cellprofiler/modules/measureobjectintensity.py (4.2.8, ``run``); the
scikit-image checks ask ``regionprops`` for the same statistics.
"""

from __future__ import annotations

import numpy as np
import pytest

from memtype.errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from memtype.pipeline.analysis.intensity import (
    INTENSITY_FEATURES,
    LOCATION_FEATURES,
    measure_intensities,
    measure_intensity,
)
from tests._cellprofiler_reference import cellprofiler_intensity

pytestmark = pytest.mark.requires("scipy", "skimage")

FEATURES = [f"Intensity_{name}" for name in INTENSITY_FEATURES] + \
    [f"Location_{name}" for name in LOCATION_FEATURES]


def coins_objects() -> tuple[np.ndarray, np.ndarray]:
    """scikit-image's coins, thresholded and labelled (touching the edge, gaps in numbers)."""
    import scipy.ndimage as ndi
    import skimage.data

    image = skimage.data.coins().astype(np.float64) / 255
    labels, _ = ndi.label(ndi.gaussian_filter(image, 2) > 0.45)
    labels[labels == 3] = 0  # an absent number
    return labels, image


@pytest.fixture(scope="module", params=["float64", "uint8", "float32", "float32-signed"])
def coins(request: pytest.FixtureRequest) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Coins through each radix sort: in [0, 1] as float64 (values float32 cannot hold: four
    16-bit digits of the float's bits), as uint8 (one 8-bit digit), as float32 and float32
    around 0 (two digits of the float's bits, negative values included)."""
    labels, image = coins_objects()
    if request.param == "uint8":
        image = np.round(image * 255).astype(np.uint8)
    elif request.param == "float32":
        image = image.astype(np.float32)
    elif request.param == "float32-signed":
        image = (image - 0.5).astype(np.float32)
    return labels, image, measure_intensity(labels, image, image_name="Coins")


@pytest.mark.parametrize("feature", FEATURES)
def test_equals_cellprofiler_arithmetic(coins: tuple, feature: str) -> None:
    labels, image, measured = coins
    image = image.astype(np.float64)
    expected = cellprofiler_intensity(labels, image)[feature.split("_", 1)[1]]
    present = np.bincount(labels.ravel(), minlength=labels.max() + 1)[1:] > 0
    if feature.startswith("Location_MaxIntensity"):
        # among tied maxima CellProfiler's scipy.ndimage.maximum_position takes the last of
        # an unstable sort; memtype takes the first in raster order: compare unique maxima
        present &= _unique_maximum(labels, image)
    np.testing.assert_allclose(measured[f"{feature}_Coins"][present], expected[present],
                               rtol=1e-12, atol=1e-12)


def _unique_maximum(labels: np.ndarray, image: np.ndarray) -> np.ndarray:
    """Per object number: whether one pixel alone holds its maximum."""
    import scipy.ndimage as ndi

    numbers = np.arange(1, labels.max() + 1)
    top = np.nan_to_num(np.asarray(ndi.maximum(image, labels, numbers), float), nan=-1)
    at_top = (labels > 0) & (image == top[np.maximum(labels, 1) - 1])
    return np.bincount(labels[at_top], minlength=labels.max() + 1)[1:] == 1


@pytest.mark.parametrize(("feature", "prop"), [
    ("MeanIntensity", "intensity_mean"), ("MinIntensity", "intensity_min"),
    ("MaxIntensity", "intensity_max"), ("StdIntensity", "intensity_std")])
def test_equals_regionprops(coins: tuple, feature: str, prop: str) -> None:
    import skimage.measure

    labels, image, measured = coins
    # memtype measures in float64; regionprops sums a float32 image in float32
    table = skimage.measure.regionprops_table(labels, image.astype(np.float64),
                                              properties=("label", prop))
    np.testing.assert_allclose(measured[f"Intensity_{feature}_Coins"][table["label"] - 1],
                               table[prop], rtol=1e-12)


@pytest.mark.parametrize("axis", ["X", "Y"])
def test_center_of_mass_equals_regionprops_weighted_centroid(coins: tuple, axis: str) -> None:
    import skimage.measure

    labels, image, measured = coins
    table = skimage.measure.regionprops_table(labels, image.astype(np.float64),
                                              properties=("label", "centroid_weighted"))
    column = "centroid_weighted-1" if axis == "X" else "centroid_weighted-0"
    np.testing.assert_allclose(
        measured[f"Location_CenterMassIntensity_{axis}_Coins"][table["label"] - 1],
        table[column], rtol=1e-12)


def test_absent_number_is_nan(coins: tuple) -> None:
    _, _, measured = coins
    assert all(np.isnan(values[2]) for values in measured.values())


def test_one_row_per_number_and_every_name(coins: tuple) -> None:
    labels, _, measured = coins
    assert sorted(measured) == sorted(f"{name}_Coins" for name in FEATURES)
    assert {values.shape for values in measured.values()} == {(labels.max(),)}


# a constant disc: integrated = value * area, std = MAD = 0, no mass displacement
@pytest.mark.parametrize(("feature", "expected"), [
    ("IntegratedIntensity", 2.5 * 317), ("MeanIntensity", 2.5), ("StdIntensity", 0.0),
    ("MedianIntensity", 2.5), ("MADIntensity", 0.0), ("MassDisplacement", 0.0),
    ("MeanIntensityEdge", 2.5)])
def test_constant_disc(feature: str, expected: float) -> None:
    y, x = np.ogrid[:40, :40]
    labels = (((y - 20) ** 2 + (x - 20) ** 2) <= 100).astype(np.int32)
    assert labels.sum() == 317
    image = np.where(labels > 0, 2.5, 7.0)
    measured = measure_intensity(labels, image, image_name="C")
    np.testing.assert_allclose(measured[f"Intensity_{feature}_C"], [expected], atol=1e-12)


# CellProfiler's quartiles: sorted values v, position count * fraction, linear between
# v[floor] and v[floor + 1], v[floor] at the last element: [1, 2, 3, 4] -> 2, 3, 4;
# MAD = the same median of |v - median| = [2, 1, 0, 1] -> sorted [0, 1, 1, 2] -> 1
@pytest.mark.parametrize(("feature", "expected"), [
    ("LowerQuartileIntensity", 2.0), ("MedianIntensity", 3.0),
    ("UpperQuartileIntensity", 4.0), ("MADIntensity", 1.0)])
def test_quartile_definition(feature: str, expected: float) -> None:
    labels = np.array([[1, 1, 1, 1]])
    image = np.array([[4.0, 1.0, 3.0, 2.0]])
    measured = measure_intensity(labels, image, image_name="C")
    assert measured[f"Intensity_{feature}_C"][0] == expected


def test_max_location_is_first_in_raster_order() -> None:
    labels = np.ones((3, 3), np.int32)
    image = np.array([[0, 5, 0], [5, 0, 0], [0, 0, 5]], float)
    measured = measure_intensity(labels, image, image_name="C")
    assert (measured["Location_MaxIntensity_X_C"][0],
            measured["Location_MaxIntensity_Y_C"][0]) == (1.0, 0.0)


def test_empty_labels_give_empty_columns() -> None:
    measured = measure_intensity(np.zeros((5, 5), np.int32), np.ones((5, 5)), image_name="C")
    assert all(values.shape == (0,) for values in measured.values())


def test_one_object_covering_the_field() -> None:
    measured = measure_intensity(np.ones((4, 4), np.int32), np.arange(16.0).reshape(4, 4),
                                 image_name="C")
    assert measured["Intensity_MeanIntensity_C"][0] == 7.5
    assert np.isnan(measured["Intensity_MeanIntensityEdge_C"][0])  # no inner boundary


def test_nan_pixels_are_left_out() -> None:
    labels = np.array([[1, 1, 1]])
    image = np.array([[1.0, np.nan, 3.0]])
    measured = measure_intensity(labels, image, image_name="C")
    assert measured["Intensity_MeanIntensity_C"][0] == 2.0
    assert measured["Intensity_IntegratedIntensity_C"][0] == 4.0


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int32, np.float32])
def test_dtypes_measure_the_same_values(coins: tuple, dtype: type) -> None:
    labels, image, _ = coins
    scale = 255 if image.dtype.kind == "f" else 1  # whole numbers 0..255 from each fixture
    raw = (np.abs(image.astype(np.float64)) * scale).round()
    expected = measure_intensity(labels, raw, image_name="C")
    measured = measure_intensity(labels, raw.astype(dtype), image_name="C")
    np.testing.assert_allclose(measured["Intensity_UpperQuartileIntensity_C"],
                               expected["Intensity_UpperQuartileIntensity_C"])


def test_accepts_one_plane_stacks(coins: tuple) -> None:
    labels, image, measured = coins
    again = measure_intensity(labels[None], image[None], image_name="Coins")
    np.testing.assert_array_equal(again["Intensity_MADIntensity_Coins"],
                                  measured["Intensity_MADIntensity_Coins"])


def test_refuses_shape_mismatch() -> None:
    with pytest.raises(ShapeError, match=r"\(4, 4\) and \(4, 5\)"):
        measure_intensity(np.zeros((4, 4), np.int32), np.zeros((4, 5)), image_name="C")


def test_refuses_float_labels() -> None:
    with pytest.raises(ArgumentTypeError, match="integer label image"):
        measure_intensity(np.zeros((4, 4)), np.zeros((4, 4)), image_name="C")


@pytest.mark.parametrize("name", ["MinIntensity", "MaxIntensity", "LowerQuartileIntensity",
                                  "MedianIntensity", "UpperQuartileIntensity", "MADIntensity"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("scale", [1.0, 0.1])
def test_tiny_scattered_objects_with_ties_equal_cellprofiler(seed: int, scale: float,
                                                            name: str) -> None:
    """Objects of 1..30 scattered pixels, values with many ties: the order statistics."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 40, (30, 30)).astype(np.int32)
    image = rng.integers(0, 6, (30, 30)) * scale  # 0.1 steps: not float32-exact
    expected = cellprofiler_intensity(labels, image)[name]
    measured = measure_intensity(labels, image, image_name="C")[f"Intensity_{name}_C"]
    np.testing.assert_allclose(measured, expected, rtol=1e-12, atol=1e-12)


def test_refuses_object_numbers_beyond_the_pixel_count() -> None:
    labels = np.zeros((4, 4), np.int64)
    labels[0, 0] = 2**31
    with pytest.raises(InvalidArgumentError, match=r"largest number of 2147483648.*relabel"):
        measure_intensity(labels, np.zeros((4, 4)), image_name="C")


def test_several_channels_equal_one_at_a_time(coins: tuple) -> None:
    labels, image, measured = coins
    both = measure_intensities(labels, {"Coins": image, "Twice": image.astype(float) * 2})
    for key, values in measured.items():
        np.testing.assert_array_equal(both[key], values, err_msg=key)
    np.testing.assert_allclose(both["Intensity_MADIntensity_Twice"],
                               2 * measured["Intensity_MADIntensity_Coins"])


def test_more_objects_than_16_bits_sort_by_object() -> None:
    """70000 objects of two pixels (object numbers take two radix digits): CellProfiler's
    median of two values is the larger, its lower quartile their mean."""
    values = np.random.default_rng(0).integers(0, 1000, 140_000).astype(np.float32)
    labels = (np.arange(140_000) // 2 + 1).reshape(350, 400)
    measured = measure_intensity(labels, values.reshape(350, 400), image_name="C")
    pairs = values.reshape(-1, 2).astype(np.float64)
    np.testing.assert_array_equal(measured["Intensity_MedianIntensity_C"], pairs.max(axis=1))
    np.testing.assert_array_equal(measured["Intensity_LowerQuartileIntensity_C"],
                                  pairs.mean(axis=1))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int64, np.float16, np.float64, bool])
def test_signed_and_other_dtypes_order_like_cellprofiler(dtype: type) -> None:
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 12, (20, 20)).astype(np.int32)
    image = rng.integers(-50, 50, (20, 20)).astype(dtype)
    expected = cellprofiler_intensity(labels, image.astype(np.float64))
    measured = measure_intensity(labels, image, image_name="C")
    for name in ("MinIntensity", "MedianIntensity", "UpperQuartileIntensity", "MADIntensity"):
        np.testing.assert_allclose(measured[f"Intensity_{name}_C"], expected[name],
                                   err_msg=name)


def test_negative_zero_ties_with_zero_for_the_brightest_pixel() -> None:
    labels = np.ones((1, 3), np.int32)
    measured = measure_intensity(labels, np.array([[-1.0, 0.0, -0.0]]), image_name="C")
    assert measured["Location_MaxIntensity_X_C"][0] == 1.0  # 0.0 before -0.0 in raster order
