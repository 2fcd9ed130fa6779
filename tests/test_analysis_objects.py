"""Object identification: memtype.pipeline.analysis.objects against CellProfiler 4.2's modules.

IdentifyPrimaryObjects, IdentifySecondaryObjects and IdentifyTertiaryObjects
(cellprofiler/modules/*.py, 4.2.8) define each step; the definition a test checks is cited
beside it. Propagation is also compared with centrosome's compiled ``propagate`` where
centrosome is installed (it pins pillow<12, so not beside memtype's pins).
"""

from __future__ import annotations

import numpy as np
import pytest

from memtype.errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from memtype.pipeline.analysis import objects

pytestmark = pytest.mark.requires("scipy", "skimage")


def disc(shape: tuple[int, int], center: tuple[float, float], radius: float) -> np.ndarray:
    y, x = np.ogrid[:shape[0], :shape[1]]
    return (y - center[0]) ** 2 + (x - center[1]) ** 2 <= radius**2


def two_cells() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Two nuclei (r=5) inside two cells (r=14) far apart: nuclei image, cell image, masks."""
    shape = (80, 120)
    nuclei = disc(shape, (40, 30), 5) | disc(shape, (40, 90), 5)
    cells = disc(shape, (40, 30), 14) | disc(shape, (40, 90), 14)
    return nuclei.astype(float), cells.astype(float) * 0.8, nuclei, cells


# IdentifyPrimaryObjects: threshold (Otsu) -> foreground -> 8-connected objects; with no
# smoothing a noise-free disc is found pixel for pixel.
def test_primary_finds_discs_exactly() -> None:
    image, _, nuclei, _ = two_cells()
    labels = objects.identify_primary(image, smoothing_sigma=0, declump="none")
    assert labels.dtype == np.int32
    assert labels.max() == 2
    np.testing.assert_array_equal(labels > 0, nuclei)
    assert labels[40, 30] != labels[40, 90]


def test_primary_numbers_are_consecutive_in_raster_order() -> None:
    image, _, _, _ = two_cells()
    labels = objects.identify_primary(image)
    assert sorted(np.unique(labels)) == [0, 1, 2]
    assert labels[40, 30] == 1 and labels[40, 90] == 2


# filter_on_border: an object with a pixel on the image edge is removed
@pytest.mark.parametrize(("exclude", "expected"), [(True, 1), (False, 2)])
def test_primary_border_objects(exclude: bool, expected: int) -> None:
    shape = (60, 60)
    image = (disc(shape, (30, 30), 6) | disc(shape, (0, 10), 6)).astype(float)
    labels = objects.identify_primary(image, exclude_border=exclude, declump="none")
    assert labels.max() == expected


# filter_on_size: areas below pi * min**2 / 4 or above pi * max**2 / 4 are removed
@pytest.mark.parametrize(("low", "high", "kept_radii"), [
    (None, None, [3, 6, 12]), (10, None, [6, 12]), (None, 20, [3, 6]), (10, 20, [6])])
def test_primary_size_filter(low: float | None, high: float | None,
                             kept_radii: list[int]) -> None:
    shape = (60, 120)
    radii = {3: (30, 15), 6: (30, 45), 12: (30, 90)}
    image = np.zeros(shape)
    for radius, center in radii.items():
        image[disc(shape, center, radius)] = 1.0
    labels = objects.identify_primary(image, smoothing_sigma=0, declump="none",
                                      min_diameter=low, max_diameter=high)
    found = sorted(radius for radius, center in radii.items() if labels[center] > 0)
    assert found == kept_radii
    assert labels.max() == len(kept_radii)


# fill_labeled_holes: background enclosed by one object becomes that object
@pytest.mark.parametrize("fill", [True, False])
def test_primary_fills_holes(fill: bool) -> None:
    shape = (60, 60)
    ring = disc(shape, (30, 30), 15) & ~disc(shape, (30, 30), 4)
    labels = objects.identify_primary(ring.astype(float), smoothing_sigma=0,
                                      declump="none", fill_holes=fill)
    assert (labels[30, 30] == 1) == fill


# Declumping: a watershed from the local maxima of the smoothed image (intensity) or of
# the distance transform (shape) splits two touching blobs; "none" keeps them as one.
@pytest.mark.parametrize(("declump", "expected"), [("intensity", 2), ("shape", 2), ("none", 1)])
def test_primary_declumps_touching_blobs(declump: str, expected: int) -> None:
    y, x = np.mgrid[:60, :80]
    image = (np.exp(-((y - 30) ** 2 + (x - 30) ** 2) / 80.0)
             + np.exp(-((y - 30) ** 2 + (x - 48) ** 2) / 80.0))
    labels = objects.identify_primary(image, declump=declump, min_diameter=10)
    assert labels.max() == expected


def test_primary_manual_threshold_and_correction() -> None:
    image = np.zeros((40, 40))
    image[10:20, 10:20] = 0.3
    image[25:35, 25:35] = 0.7
    high = objects.identify_primary(image, threshold=0.5, smoothing_sigma=0, declump="none")
    low = objects.identify_primary(image, threshold=0.5, threshold_correction=0.5,
                                   smoothing_sigma=0, declump="none")
    assert high.max() == 1 and low.max() == 2


@pytest.mark.parametrize("method", objects.THRESHOLD_METHODS)
def test_primary_every_threshold_method_finds_the_discs(method: str) -> None:
    image, _, nuclei, _ = two_cells()
    # the mean of a mostly dark image is low: its noise would be foreground
    spread = 0.0 if method == "mean" else 0.05
    noisy = image + np.random.default_rng(1).normal(0, spread, image.shape)
    labels = objects.identify_primary(noisy, threshold=method, declump="none")
    assert labels.max() == 2


def test_primary_constant_image_has_no_objects() -> None:
    labels = objects.identify_primary(np.zeros((30, 30)), exclude_border=False)
    assert labels.max() == 0 and labels.shape == (30, 30)


def test_primary_nan_pixels_are_background() -> None:
    image, _, nuclei, _ = two_cells()
    image[40, 30] = np.nan
    labels = objects.identify_primary(image, smoothing_sigma=0, declump="none",
                                      fill_holes=False)
    assert labels[40, 30] == 0 and labels.max() == 2


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_primary_dtypes_agree(dtype: type) -> None:
    image, _, _, _ = two_cells()
    scaled = (image * 200).astype(dtype)
    np.testing.assert_array_equal(objects.identify_primary(scaled),
                                  objects.identify_primary(image))


def test_primary_accepts_one_plane_stack() -> None:
    image, _, _, _ = two_cells()
    np.testing.assert_array_equal(objects.identify_primary(image[None]),
                                  objects.identify_primary(image))


def test_primary_refuses_z_stack() -> None:
    with pytest.raises(ShapeError, match=r"\[1, Y, X\].*\(2, 8, 8\)"):
        objects.identify_primary(np.zeros((2, 8, 8)))


@pytest.mark.parametrize(("argument", "value"), [("declump", "round"), ("threshold", "magic")])
def test_primary_refuses_unknown_choice(argument: str, value: str) -> None:
    with pytest.raises(InvalidArgumentError, match=argument):
        objects.identify_primary(np.zeros((8, 8)), **{argument: value})


def test_primary_coins_objects_within_the_size_range() -> None:
    import skimage.data

    image = skimage.data.coins().astype(float) / 255
    labels = objects.identify_primary(image, min_diameter=20, max_diameter=80)
    areas = np.bincount(labels.ravel())[1:]
    assert labels.max() > 10
    assert areas.min() >= np.pi * 20**2 / 4 and areas.max() <= np.pi * 80**2 / 4
    edge = np.concatenate((labels[0], labels[-1], labels[:, 0], labels[:, -1]))
    assert not edge.any()


# IdentifySecondaryObjects: cells grown from nuclei over the thresholded cell image, each
# keeping its nucleus's number (centrosome.propagate, skimage watershed, Distance - N).
@pytest.mark.parametrize("method", ["propagation", "watershed"])
def test_secondary_recovers_cells(method: str) -> None:
    _, image, nuclei, cells = two_cells()
    primary = np.zeros(nuclei.shape, np.int32)
    primary[disc(nuclei.shape, (40, 30), 5)] = 3
    primary[disc(nuclei.shape, (40, 90), 5)] = 7
    grown = objects.identify_secondary(primary, image, method=method)
    np.testing.assert_array_equal(grown > 0, cells)
    assert grown[40, 20] == 3 and grown[40, 100] == 7


def test_secondary_distance_grows_by_exact_distance() -> None:
    primary = np.zeros((50, 50), np.int32)
    primary[25, 25] = 1
    grown = objects.identify_secondary(primary, np.zeros((50, 50)), method="distance",
                                       distance=6)
    np.testing.assert_array_equal(grown > 0, disc((50, 50), (25, 25), 6))


# propagate's step cost: sqrt(d_I**2 + m * w**2); on a flat image a pixel goes to the
# seed with the shorter path of 8-connected steps (m = 1 per straight, 2 per diagonal)
def test_propagation_on_a_flat_image_splits_halfway() -> None:
    seeds = np.zeros((21, 41), np.int32)
    seeds[10, 5], seeds[10, 35] = 1, 2
    grown = objects.propagate(np.zeros((21, 41)), seeds, np.ones((21, 41), bool), 1.0)
    assert (grown[:, :20] == 1).all() and (grown[:, 21:] == 2).all()


def test_propagation_stops_at_a_bright_ridge() -> None:
    image = np.zeros((21, 41))
    image[:, 12] = 1.0  # a ridge between the seeds, nearer to seed 1
    seeds = np.zeros((21, 41), np.int32)
    seeds[10, 5], seeds[10, 35] = 1, 2
    grown = objects.propagate(image, seeds, np.ones((21, 41), bool), 0.01)
    assert (grown[:, 14:] == 2).all() and (grown[:, :11] == 1).all()


@pytest.mark.requires("centrosome")
@pytest.mark.parametrize("regularization", [0.0, 0.05, 1.0])
def test_propagation_equals_centrosome(regularization: float) -> None:
    from centrosome.propagate import propagate as reference

    rng = np.random.default_rng(0)
    image = rng.random((120, 140))
    mask = image > 0.3
    seeds = np.zeros(image.shape, np.int32)
    seeds[rng.integers(0, 120, 25), rng.integers(0, 140, 25)] = np.arange(1, 26)
    expected, _ = reference(image, seeds, mask, regularization)
    np.testing.assert_array_equal(objects.propagate(image, seeds, mask, regularization),
                                  expected)


def test_secondary_with_no_primary_objects_is_empty() -> None:
    _, image, _, _ = two_cells()
    grown = objects.identify_secondary(np.zeros(image.shape, np.int32), image)
    assert grown.max() == 0


def test_secondary_refuses_shape_mismatch() -> None:
    with pytest.raises(ShapeError, match=r"\(10, 10\) and \(10, 12\)"):
        objects.identify_secondary(np.zeros((10, 10), np.int32), np.zeros((10, 12)))


def test_secondary_refuses_float_labels() -> None:
    with pytest.raises(ArgumentTypeError, match="integer label image"):
        objects.identify_secondary(np.zeros((10, 10)), np.zeros((10, 10)))


# IdentifyTertiaryObjects: tertiary = larger where not (smaller and not its outline)
@pytest.mark.parametrize("shrink", [True, False])
def test_tertiary_is_cell_minus_nucleus(shrink: bool) -> None:
    shape = (60, 60)
    cell = disc(shape, (30, 30), 15).astype(np.int32) * 4
    nucleus_mask = disc(shape, (30, 30), 5)
    nucleus = nucleus_mask.astype(np.int32) * 4
    cytoplasm = objects.identify_tertiary(cell, nucleus, shrink_smaller=shrink)
    inner = nucleus_mask.copy()
    if shrink:  # the nucleus's outline: pixels with an 8-neighbour outside it
        padded = np.pad(nucleus_mask, 1)
        eroded = np.ones(shape, bool)
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                eroded &= padded[1 + dy:61 + dy, 1 + dx:61 + dx]
        inner = eroded
    np.testing.assert_array_equal(cytoplasm == 4, (cell > 0) & ~inner)


# relate_labels: a child's parent is the parent under most of its pixels
def test_relate_parents_and_counts() -> None:
    parents = np.zeros((10, 20), np.int32)
    parents[:, :10], parents[:, 10:] = 1, 2
    children = np.zeros((10, 20), np.int32)
    children[2:4, 2:4] = 1       # in parent 1
    children[6:8, 2:4] = 2       # in parent 1
    children[2:4, 8:15] = 3      # 2 columns in 1, 5 in 2: parent 2
    children[5, 9:11] = 5        # one pixel each: the lower number, 1
    parent_of, per_parent = objects.relate(children, parents)
    np.testing.assert_array_equal(parent_of, [1, 1, 2, 0, 1])
    np.testing.assert_array_equal(per_parent, [3, 1])


def test_relate_child_outside_every_parent() -> None:
    parents = np.zeros((5, 5), np.int32)
    children = np.zeros((5, 5), np.int32)
    children[1, 1] = 1
    parent_of, per_parent = objects.relate(children, parents)
    np.testing.assert_array_equal(parent_of, [0])
    assert per_parent.size == 0


def test_relate_refuses_object_numbers_beyond_the_pixel_count() -> None:
    children = np.zeros((4, 4), np.int64)
    children[1, 1] = 10**12
    with pytest.raises(InvalidArgumentError, match="renumber"):
        objects.relate(children, np.zeros((4, 4), np.int32))


@pytest.mark.parametrize("function", ["secondary", "tertiary"])
def test_numbers_beyond_int32_are_refused_not_wrapped(function: str) -> None:
    labels = np.zeros((4, 4), np.int64)
    labels[1, 1] = 2**33
    with pytest.raises(InvalidArgumentError, match="renumber"):
        if function == "secondary":
            objects.identify_secondary(labels, np.ones((4, 4)))
        else:
            objects.identify_tertiary(labels, np.zeros((4, 4), np.int32))
