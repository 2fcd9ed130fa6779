"""Neighbours: measure_neighbors against CellProfiler 4.2's MeasureObjectNeighbors.

The reference is that module's per-object dilation loop ("Within a specified distance",
objects against themselves) transcribed in tests/_cellprofiler_reference.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from memtype.errors import InvalidArgumentError
from memtype.pipeline.analysis.neighbors import NEIGHBOR_FEATURES, measure_neighbors
from tests._cellprofiler_reference import cellprofiler_neighbors

pytestmark = pytest.mark.requires("scipy", "skimage")


def crowded() -> np.ndarray:
    """Touching and separate objects: the coins split by a watershed, numbered 1..N."""
    import scipy.ndimage as ndi
    import skimage.data
    import skimage.segmentation

    image = skimage.data.coins().astype(float) / 255
    foreground = ndi.gaussian_filter(image, 2) > 0.4
    markers, _ = ndi.label(ndi.distance_transform_edt(foreground) > 9)
    labels = np.asarray(skimage.segmentation.watershed(-image, markers, mask=foreground),
                        np.int32)
    top = labels.max()
    labels[250:280, 5:20], labels[250:280, 20:35] = top + 1, top + 2  # two touching halves
    labels[282:290, 10:30] = top + 3                                    # two pixels below
    return labels


@pytest.mark.parametrize("distance", [0, 1, 2, 5, 8])
@pytest.mark.parametrize("feature", NEIGHBOR_FEATURES)
def test_equals_cellprofiler(feature: str, distance: int) -> None:
    labels = crowded()
    expected = cellprofiler_neighbors(labels, distance)[feature]
    measured = measure_neighbors(labels, distance=distance)[f"Neighbors_{feature}_{distance}"]
    np.testing.assert_allclose(measured, expected, rtol=1e-9, atol=1e-9)


def test_some_objects_touch() -> None:
    touching = measure_neighbors(crowded(), distance=1)["Neighbors_PercentTouching_1"]
    assert (touching > 0).any() and (touching == 0).any()


def test_two_squares_three_background_pixels_apart() -> None:
    labels = np.zeros((10, 20), np.int32)
    labels[2:6, 2:6], labels[2:6, 9:13] = 1, 2  # columns 5 and 9: offset 4
    near = measure_neighbors(labels, distance=4)
    far = measure_neighbors(labels, distance=3)
    np.testing.assert_array_equal(near["Neighbors_NumberOfNeighbors_4"], [1, 1])
    np.testing.assert_array_equal(far["Neighbors_NumberOfNeighbors_3"], [0, 0])
    np.testing.assert_array_equal(near["Neighbors_FirstClosestObjectNumber_4"], [2, 1])
    np.testing.assert_allclose(near["Neighbors_FirstClosestDistance_4"], [7, 7])
    # two objects: no second neighbour, CellProfiler's 0
    np.testing.assert_array_equal(near["Neighbors_SecondClosestObjectNumber_4"], [0, 0])


def test_absent_numbers_are_nan() -> None:
    labels = np.zeros((10, 20), np.int32)
    labels[2:6, 2:6], labels[2:6, 9:13] = 1, 4
    measured = measure_neighbors(labels)
    assert all(np.isnan(column[1:3]).all() for column in measured.values())
    assert measured["Neighbors_FirstClosestObjectNumber_5"][0] == 4


def test_one_object_and_empty() -> None:
    one = np.zeros((8, 8), np.int32)
    one[2:5, 2:5] = 1
    measured = measure_neighbors(one)
    assert measured["Neighbors_NumberOfNeighbors_5"][0] == 0
    assert measured["Neighbors_FirstClosestObjectNumber_5"][0] == 0
    empty = measure_neighbors(np.zeros((8, 8), np.int32))
    assert all(column.shape == (0,) for column in empty.values())


@pytest.mark.parametrize("distance", [-1, 2.5, True])
def test_refuses_bad_distance(distance: object) -> None:
    with pytest.raises(InvalidArgumentError, match="distance"):
        measure_neighbors(np.zeros((4, 4), np.int32), distance=distance)  # type: ignore[arg-type]
