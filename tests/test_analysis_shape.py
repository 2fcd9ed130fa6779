"""Size and shape: measure_size_shape against CellProfiler 4.2's MeasureObjectSizeShape.

CellProfiler (cellprofiler/modules/measureobjectsizeshape.py, 4.2.8, ``analyze_objects``)
takes these from ``skimage.measure.regionprops_table`` (orientation in degrees), computes
FormFactor = 4 pi area / perimeter**2 and Compactness = perimeter**2 / max(4 pi area, 1), and
the Feret diameters with centrosome's ``feret_diameter`` on ``convex_hull_ijv``.
"""

from __future__ import annotations

import numpy as np
import pytest

from memtype.errors import ArgumentTypeError
from memtype.pipeline.analysis.shape import SHAPE_FEATURES, measure_size_shape

pytestmark = pytest.mark.requires("scipy", "skimage")

REGIONPROPS = {
    "Area": "area", "Perimeter": "perimeter", "MajorAxisLength": "major_axis_length",
    "MinorAxisLength": "minor_axis_length", "Eccentricity": "eccentricity",
    "Orientation": "orientation", "Center_X": "centroid-1", "Center_Y": "centroid-0",
    "BoundingBoxArea": "bbox_area", "BoundingBoxMinimum_X": "bbox-1",
    "BoundingBoxMaximum_X": "bbox-3", "BoundingBoxMinimum_Y": "bbox-0",
    "BoundingBoxMaximum_Y": "bbox-2", "Extent": "extent", "Solidity": "solidity",
    "EulerNumber": "euler_number", "ConvexArea": "convex_area",
    "EquivalentDiameter": "equivalent_diameter"}
PROPERTIES = ("label", "area", "perimeter", "bbox", "bbox_area", "major_axis_length",
              "minor_axis_length", "orientation", "centroid", "equivalent_diameter", "extent",
              "eccentricity", "convex_area", "solidity", "euler_number")


def shapes() -> np.ndarray:
    """Coins' objects plus awkward ones: a pixel, a line, a square, a ring, gaps in numbers."""
    import scipy.ndimage as ndi
    import skimage.data

    image = skimage.data.coins().astype(float) / 255
    labels, count = ndi.label(ndi.gaussian_filter(image, 2) > 0.45)
    labels[labels == 2] = 0
    extra = iter(range(count + 5, count + 20))
    labels[5:9, 5:9] = next(extra)           # square (orientation's a == c case)
    labels[20, 3] = next(extra)              # one pixel
    labels[30, 0:6] = next(extra)            # a line on the edge
    labels[40:47, 2:9] = next(extra)         # a ring: Euler number 0
    labels[42:45, 4:7] = 0
    labels[40:50, 12] = next(extra)          # vertical line
    return labels


@pytest.fixture(scope="module")
def measured() -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    import skimage.measure

    labels = shapes()
    table = skimage.measure.regionprops_table(labels, properties=PROPERTIES)
    return labels, measure_size_shape(labels), table


@pytest.mark.parametrize("feature", sorted(REGIONPROPS))
def test_equals_regionprops(measured: tuple, feature: str) -> None:
    _, values, table = measured
    expected = table[REGIONPROPS[feature]]
    if feature == "Orientation":
        expected = expected * 180 / np.pi  # CellProfiler: degrees
    np.testing.assert_allclose(values[f"AreaShape_{feature}"][table["label"] - 1], expected,
                               rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("feature", ["FormFactor", "Compactness"])
def test_ratios_follow_cellprofiler(measured: tuple, feature: str) -> None:
    _, values, table = measured
    area, perimeter = table["area"], table["perimeter"]
    with np.errstate(divide="ignore"):
        expected = (4 * np.pi * area / perimeter**2 if feature == "FormFactor"
                    else perimeter**2 / np.maximum(4 * np.pi * area, 1))
    np.testing.assert_allclose(values[f"AreaShape_{feature}"][table["label"] - 1], expected)


@pytest.mark.requires("centrosome")
@pytest.mark.parametrize("feature", ["MinFeretDiameter", "MaxFeretDiameter"])
def test_feret_equals_centrosome(measured: tuple, feature: str) -> None:
    import centrosome.cpmorphology as cpm

    labels, values, table = measured
    numbers = table["label"].astype(np.int32)
    ii, jj = np.nonzero(labels)
    hulls, counts = cpm.convex_hull_ijv(np.column_stack((ii, jj, labels[ii, jj])), numbers)
    low, high = cpm.feret_diameter(hulls, counts, numbers)
    expected = low if feature == "MinFeretDiameter" else high
    np.testing.assert_allclose(values[f"AreaShape_{feature}"][numbers - 1], expected)


# Feret diameters of pixel centres: an a x b rectangle of pixels spans (a-1) x (b-1)
@pytest.mark.parametrize(("feature", "expected"), [
    ("MinFeretDiameter", 3.0), ("MaxFeretDiameter", np.hypot(3, 7))])
def test_feret_of_a_rectangle(feature: str, expected: float) -> None:
    labels = np.zeros((12, 12), np.int32)
    labels[2:6, 2:10] = 1
    assert measure_size_shape(labels)[f"AreaShape_{feature}"][0] == pytest.approx(expected)


def test_absent_numbers_are_nan(measured: tuple) -> None:
    _, values, _ = measured
    assert all(np.isnan(column[1]) for column in values.values())


def test_every_column_has_one_row_per_number(measured: tuple) -> None:
    labels, values, _ = measured
    assert sorted(values) == sorted(f"AreaShape_{name}" for name in SHAPE_FEATURES)
    assert {column.shape for column in values.values()} == {(labels.max(),)}


def test_disc_area_and_equivalent_diameter() -> None:
    y, x = np.ogrid[:41, :41]
    labels = (((y - 20) ** 2 + (x - 20) ** 2) <= 100).astype(np.int32)
    values = measure_size_shape(labels)
    assert values["AreaShape_Area"][0] == 317
    assert values["AreaShape_EquivalentDiameter"][0] == pytest.approx(np.sqrt(4 * 317 / np.pi))
    assert values["AreaShape_Eccentricity"][0] == pytest.approx(0, abs=1e-12)


def test_empty_labels() -> None:
    values = measure_size_shape(np.zeros((6, 6), np.int32))
    assert all(column.shape == (0,) for column in values.values())


def test_accepts_one_plane_stack(measured: tuple) -> None:
    labels, values, _ = measured
    again = measure_size_shape(labels[None])
    np.testing.assert_array_equal(again["AreaShape_Perimeter"], values["AreaShape_Perimeter"])


def test_refuses_float_labels() -> None:
    with pytest.raises(ArgumentTypeError, match="integer label image"):
        measure_size_shape(np.zeros((4, 4)))
