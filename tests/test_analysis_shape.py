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


def _awkward_fields() -> dict[str, np.ndarray]:
    """Objects the hull code must get right: scattered (not connected) pixels, smooth blobs,
    large elongated and tilted objects, one-row and one-column objects, a diagonal line."""
    import scipy.ndimage as ndi

    fields = {}
    for seed in range(2):
        rng = np.random.default_rng(seed)
        fields[f"scattered-{seed}"] = (rng.integers(0, 30, (60, 70))
                                       * (rng.random((60, 70)) < 0.5)).astype(np.int32)
        fields[f"blobs-{seed}"] = ndi.label(ndi.gaussian_filter(rng.random((150, 150)), 4)
                                            > 0.5)[0]
    y, x = np.mgrid[:120, :160]
    tilted = np.zeros((120, 160), np.int32)
    tilted[((x - 80) * 0.8 + (y - 60) * 0.6) ** 2 / 60**2
           + ((y - 60) * 0.8 - (x - 80) * 0.6) ** 2 / 12**2 <= 1] = 1
    tilted[5, 3:40] = 2
    tilted[10:70, 150] = 3
    tilted[np.arange(80, 110), np.arange(10, 40)] = 4
    tilted[100:118, 100:150] = 5
    tilted[100:110, 120:130] = 0  # a rectangle with a notch
    fields["large-and-thin"] = tilted
    return fields


def _hull_reference(mask: np.ndarray) -> tuple[int, float, float]:
    """ConvexArea (scikit-image's convex_hull_image) and the Feret diameters by definition:
    the widest and narrowest caliper over the Qhull hull of the pixel centres (the
    per-object computation measure_size_shape did before)."""
    import scipy.spatial
    import skimage.morphology

    convex = int(np.count_nonzero(skimage.morphology.convex_hull_image(mask)))
    points = np.argwhere(mask).astype(np.float64)
    offsets = points - points[0]
    along = points[-1] - points[0]
    if len(points) < 3 or not np.any(offsets[:, 0] * along[1] - offsets[:, 1] * along[0]):
        return convex, 0.0, float(np.hypot(*(points[-1] - points[0])))
    hull = points[scipy.spatial.ConvexHull(points).vertices]
    gaps = hull[None, :, :] - hull[:, None, :]
    edges = np.roll(hull, -1, axis=0) - hull
    heights = np.abs(edges[:, None, 0] * gaps[:, :, 1] - edges[:, None, 1] * gaps[:, :, 0])
    narrowest = (heights.max(axis=1) / np.hypot(edges[:, 0], edges[:, 1])).min()
    return convex, float(narrowest), float(np.sqrt((gaps**2).sum(-1)).max())


AWKWARD_FIELDS = ("blobs-0", "blobs-1", "large-and-thin", "scattered-0", "scattered-1")
"""_awkward_fields' names, written out: collecting must not need scipy (the wheel alone)."""


def test_the_awkward_fields_are_the_ones_named() -> None:
    assert sorted(_awkward_fields()) == list(AWKWARD_FIELDS)


@pytest.mark.parametrize("field", AWKWARD_FIELDS)
def test_hulls_of_all_objects_at_once_equal_one_object_at_a_time(field: str) -> None:
    labels = _awkward_fields()[field]
    values = measure_size_shape(labels)
    numbers = [k for k in range(1, labels.max() + 1) if (labels == k).any()]
    expected = np.array([_hull_reference(labels == k) for k in numbers])
    got = np.column_stack([values[f"AreaShape_{name}"][np.array(numbers) - 1] for name in
                           ("ConvexArea", "MinFeretDiameter", "MaxFeretDiameter")])
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
