"""Image quality: measure_image_quality against CellProfiler 4.2's MeasureImageQuality.

FocusScore and LocalFocusScore are checked against CellProfiler's arithmetic transcribed
from cellprofiler/modules/measureimagequality.py (4.2.8); Correlation (Haralick's H3 at
offset (0, scale)) and PowerLogLogSlope (least squares of log power on log radius of
centrosome's ``rps``) against centrosome where it is installed.
"""

from __future__ import annotations

import numpy as np
import pytest

from memtype.errors import InvalidArgumentError, ShapeError
from memtype.pipeline.analysis.quality import flag_fields, measure_image_quality
from tests._cellprofiler_reference import cellprofiler_focus_scores

pytestmark = pytest.mark.requires("scipy", "skimage")


def fields() -> dict[str, np.ndarray]:
    import skimage.data

    rng = np.random.default_rng(0)
    return {"coins": skimage.data.coins().astype(float) / 255,
            "camera": skimage.data.camera()[:300, :210].astype(float) / 255,
            "noise": rng.random((64, 80)), "small": rng.random((17, 23))}


@pytest.mark.parametrize("name", ["coins", "camera", "noise", "small"])
@pytest.mark.parametrize("scale", [5, 20])
def test_focus_scores_equal_cellprofiler(name: str, scale: int) -> None:
    image = fields()[name]
    focus, local = cellprofiler_focus_scores(image, scale)
    quality = measure_image_quality(image, image_name="C", scale=scale)
    assert quality["ImageQuality_FocusScore_C"] == pytest.approx(focus, rel=1e-12)
    assert quality[f"ImageQuality_LocalFocusScore_C_{scale}"] == pytest.approx(local, rel=1e-9)


@pytest.mark.requires("centrosome")
@pytest.mark.parametrize("name", ["coins", "camera", "noise"])
def test_correlation_equals_centrosome_haralick(name: str) -> None:
    from centrosome.haralick import Haralick

    image = fields()[name]
    expected = Haralick(image, np.ones(image.shape, int), 0, 20).H3()[0]
    quality = measure_image_quality(image, image_name="C")
    assert quality["ImageQuality_Correlation_C_20"] == pytest.approx(expected, rel=1e-12)


class _WithPtp(np.ndarray):
    """centrosome 1.3.4's rps calls ndarray.ptp, which NumPy 2 removed."""

    def ptp(self) -> float:
        return float(np.ptp(np.asarray(self)))


@pytest.mark.requires("centrosome")
@pytest.mark.parametrize("name", ["coins", "camera", "noise"])
def test_power_log_log_slope_equals_cellprofiler(name: str) -> None:
    from centrosome.radial_power_spectrum import rps

    image = fields()[name]
    radii, magnitude, power = rps(image.view(_WithPtp))
    valid = magnitude > 0
    slope = np.polyfit(np.log(radii[valid]), np.log(power[valid]), 1)[0]
    quality = measure_image_quality(image, image_name="C")
    assert quality["ImageQuality_PowerLogLogSlope_C"] == pytest.approx(slope, rel=1e-9)


def test_power_spectrum_is_steeper_when_blurred() -> None:
    import scipy.ndimage as ndi

    image = fields()["camera"]
    sharp = measure_image_quality(image, image_name="C")["ImageQuality_PowerLogLogSlope_C"]
    blurred = measure_image_quality(ndi.gaussian_filter(image, 3), image_name="C")
    assert blurred["ImageQuality_PowerLogLogSlope_C"] < sharp


# PercentMaximal / PercentMinimal: 100 * pixels equal to the max (min) / pixels;
# the intensity measures: numpy's sum, mean, median, std, MAD, max, min of the pixels
# values 0 0 1 1 2 4 4 4: max 4 three times, min 0 twice, median (1 + 2) / 2, MAD = median
# of |v - 1.5| = .5 .5 .5 1.5 1.5 2.5 2.5 2.5 -> 1.5, std = sqrt(22 / 8)
@pytest.mark.parametrize(("feature", "expected"), [
    ("PercentMaximal", 37.5), ("PercentMinimal", 25.0), ("TotalArea", 8.0),
    ("TotalIntensity", 16.0), ("MeanIntensity", 2.0), ("MedianIntensity", 1.5),
    ("MaxIntensity", 4.0), ("MinIntensity", 0.0), ("MADIntensity", 1.5),
    ("StdIntensity", np.sqrt(22 / 8))])
def test_saturation_and_intensity(feature: str, expected: float) -> None:
    image = np.array([[0, 0, 1, 2], [4, 4, 4, 1]], float)
    quality = measure_image_quality(image, image_name="C")
    assert quality[f"ImageQuality_{feature}_C"] == pytest.approx(expected)


def test_percent_saturated_counts_at_or_above_the_level() -> None:
    image = np.array([[10, 4095, 4095, 100]], np.uint16)
    quality = measure_image_quality(image, image_name="C", saturation_value=4095)
    assert quality["ImageQuality_PercentSaturated_C"] == 50.0
    assert "ImageQuality_PercentSaturated_C" not in measure_image_quality(image, image_name="C")


def test_nan_pixels_are_left_out() -> None:
    image = np.array([[1.0, np.nan], [3.0, 1.0]])
    quality = measure_image_quality(image, image_name="C")
    assert quality["ImageQuality_TotalArea_C"] == 3.0
    assert quality["ImageQuality_MeanIntensity_C"] == pytest.approx(5 / 3)


def test_constant_and_empty_images_measure_zero_blur() -> None:
    quality = measure_image_quality(np.full((40, 40), 0.5), image_name="C")
    assert quality["ImageQuality_FocusScore_C"] == 0.0
    assert quality["ImageQuality_PowerLogLogSlope_C"] == 0.0
    assert quality["ImageQuality_Correlation_C_20"] == 0.0
    empty = measure_image_quality(np.full((8, 8), np.nan), image_name="C")
    assert empty["ImageQuality_TotalArea_C"] == 0.0


def test_uint16_and_float_agree_on_blur() -> None:
    image = (fields()["coins"] * 4095).round()
    as_int = measure_image_quality(image.astype(np.uint16), image_name="C")
    as_float = measure_image_quality(image, image_name="C")
    assert as_int == pytest.approx(as_float)


def test_refuses_z_stack_and_bad_scale() -> None:
    with pytest.raises(ShapeError):
        measure_image_quality(np.zeros((3, 8, 8)), image_name="C")
    with pytest.raises(InvalidArgumentError, match="scale=0"):
        measure_image_quality(np.zeros((8, 8)), image_name="C", scale=0)


# flag_fields: robust z = (value - median) / (1.4826 MAD) < -outlier_mads flags blur;
# PercentMaximal above max_percent_maximal flags saturation
def test_flag_fields_flags_the_blurred_and_the_saturated() -> None:
    rows = [{"ImageQuality_FocusScore_DNA": v, "ImageQuality_PercentMaximal_DNA": 0.01}
            for v in (0.20, 0.21, 0.19, 0.22, 0.20, 0.02)]
    rows[2]["ImageQuality_PercentMaximal_DNA"] = 5.0
    flags = flag_fields(rows)
    assert [bool(f) for f in flags] == [False, False, True, False, False, True]
    assert "FocusScore_DNA low" in flags[5][0]
    assert "PercentMaximal_DNA high" in flags[2][0]


def test_flag_fields_needs_three_rows_and_spread() -> None:
    rows = [{"ImageQuality_FocusScore_DNA": 0.2}, {"ImageQuality_FocusScore_DNA": 0.01}]
    assert flag_fields(rows) == [(), ()]
    same = [{"ImageQuality_FocusScore_DNA": 0.2}] * 5
    assert flag_fields(same) == [()] * 5
