"""Object sets: primary objects from a threshold, secondary objects grown from them, tertiary.

The algorithms of CellProfiler 4.2's IdentifyPrimaryObjects, IdentifySecondaryObjects and
IdentifyTertiaryObjects on NumPy arrays, written here from those modules' definitions
(``docs/measurements.md`` lists each step and where memtype differs). Every function takes a
2D field (a ``[1, Y, X]`` stack is squeezed) and returns an ``int32`` label image: 0 is
background, objects are numbered 1..N.

Propagation (CellProfiler's secondary-object method, ``centrosome.propagate``) is written
here: centrosome 1.3.4 pins ``pillow<12`` and cannot install beside memtype's pillow 13. It is
the same shortest-path flood: from every primary object's pixels, over the 8-connected
foreground, the step between two neighbouring pixels costing
``sqrt(d_I**2 + m * regularization**2)`` with ``d_I`` the summed absolute difference of the
two pixels' 3x3 neighbourhoods (edge pixels repeated) and ``m`` the Manhattan length of the
step (1 or 2); each pixel goes to the object with the shortest path (scipy's compiled
Dijkstra, all objects at once). Only exact ties of path length can be broken differently.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from memtype import require
from memtype.errors import InvalidArgumentError
from memtype.pipeline.analysis._inputs import as_field, as_labels, object_count, same_shape

__all__ = ["THRESHOLD_METHODS", "identify_primary", "identify_secondary",
           "identify_tertiary", "relate", "threshold_value"]

Labels = npt.NDArray[np.int32]
Floats = npt.NDArray[np.float64]

THRESHOLD_METHODS: tuple[str, ...] = ("otsu", "li", "triangle", "yen", "mean", "isodata",
                                      "minimum")
"""The automatic threshold methods (scikit-image's ``threshold_<method>``)."""

_EIGHT = np.ones((3, 3), bool)
_DEFAULT_MIN_DIAMETER = 10.0  # CellProfiler's default typical diameter range is 10..40 px


def _ndi() -> Any:
    return require("scipy.ndimage", "Identifying objects")


def _choice(value: str, allowed: tuple[str, ...], name: str) -> str:
    """Refuse a value that is not one of ``allowed``, naming them."""
    if value not in allowed:
        raise InvalidArgumentError(
            f"Invalid value for argument `{name}`. Expected one of {list(allowed)}. "
            f"Received: {name}={value!r}.")
    return value


def _float_field(image: Any, name: str) -> tuple[Floats, npt.NDArray[np.bool_]]:
    """The field as float64 with NaN/inf set to 0, and where it was finite."""
    data = as_field(image, name=name).astype(np.float64)
    valid = np.isfinite(data)
    return np.where(valid, data, 0.0), valid


def threshold_value(image: Any, method: str | float = "otsu", *,
                    mask: npt.NDArray[np.bool_] | None = None) -> float:
    """The global threshold of an image, as CellProfiler's Threshold module computes it.

    Parameters
    ----------
    image : array_like
        A 2D field.
    method : str or float
        One of :data:`THRESHOLD_METHODS`, or a number (a manual threshold, returned as is).
    mask : array of bool, optional
        Only these pixels count (also: only finite pixels count).

    Returns
    -------
    float
        The threshold; for an image without pixels 0.0, for a constant one its value.
    """
    if isinstance(method, (int, float)) and not isinstance(method, bool):
        return float(method)
    _choice(str(method), THRESHOLD_METHODS, "threshold")
    data = as_field(image, name="image").astype(np.float64)
    keep = np.isfinite(data) if mask is None else (np.isfinite(data) & mask)
    values = data[keep]
    if values.size == 0:
        return 0.0
    if np.all(values == values[0]):
        return float(values[0])
    filters = require("skimage.filters", "Thresholding an image")
    if method == "li":  # CellProfiler's tolerance: half the smallest step between values
        tolerance = max(float(np.min(np.diff(np.unique(values)))) / 2, 0.5 / 65536)
        return float(filters.threshold_li(values, tolerance=tolerance))
    try:
        return float(getattr(filters, f"threshold_{method}")(values))
    except RuntimeError as exc:  # threshold_minimum: a histogram without two peaks
        raise InvalidArgumentError(
            f"Invalid value for argument `threshold`. The {method!r} method found no "
            f"threshold for this image ({exc}). Received: threshold={method!r}.") from exc


def _smooth(data: Floats, valid: npt.NDArray[np.bool_], sigma: float) -> Floats:
    """Gaussian smoothing normalised by the smoothed mask (centrosome's masked smoothing)."""
    if sigma <= 0:
        return data
    ndi = _ndi()
    weights = ndi.gaussian_filter(valid.astype(np.float64), sigma, mode="constant", cval=0)
    smoothed = ndi.gaussian_filter(np.where(valid, data, 0.0), sigma, mode="constant", cval=0)
    out: Floats = np.divide(smoothed, weights, out=np.zeros_like(data), where=weights > 0)
    return out


def relabel(labels: npt.NDArray[np.integer[Any]]) -> Labels:
    """Renumber the objects present 1..N, keeping their order."""
    present = np.unique(labels)
    present = present[present > 0]
    lookup = np.zeros(int(labels.max(initial=0)) + 1, np.int32)
    lookup[present] = np.arange(1, present.size + 1, dtype=np.int32)
    out: Labels = lookup[labels]
    return out


def _background_components(labels: npt.NDArray[Any]) -> tuple[npt.NDArray[np.intp], int]:
    """The 4-connected background regions and their count."""
    components, count = _ndi().label(labels == 0)
    return components.astype(np.intp, copy=False), int(count)


def _touching_border(components: npt.NDArray[np.intp], count: int) -> npt.NDArray[np.bool_]:
    """Per component number: whether it reaches the image edge."""
    border = np.zeros(count + 1, bool)
    for edge in (components[0], components[-1], components[:, 0], components[:, -1]):
        border[edge] = True
    return border


def fill_labeled_holes(labels: npt.NDArray[Any], *,
                       max_area: float | None = None) -> npt.NDArray[Any]:
    """Fill each background region enclosed by one object with that object's number.

    A hole is a 4-connected background region that does not reach the image edge and whose
    every neighbouring pixel belongs to the same object (CellProfiler's
    ``fill_labeled_holes``); with ``max_area``, only holes smaller than it are filled.
    """
    components, count = _background_components(labels)
    if count == 0:
        return labels
    low = np.full(count + 1, np.iinfo(np.intp).max, np.intp)
    high = np.zeros(count + 1, np.intp)
    for hole, other in _four_neighbour_pairs(components, labels.astype(np.intp, copy=False)):
        keep = (hole > 0) & (other > 0)
        np.minimum.at(low, hole[keep], other[keep])
        np.maximum.at(high, hole[keep], other[keep])
    is_hole = (low == high) & ~_touching_border(components, count)
    if max_area is not None:
        is_hole &= np.bincount(components.ravel(), minlength=count + 1) < max_area
    is_hole[0] = False
    filled = labels.copy()
    where = is_hole[components]
    filled[where] = high[components[where]].astype(labels.dtype)
    return filled


def _four_neighbour_pairs(first: npt.NDArray[np.intp], second: npt.NDArray[np.intp]
                          ) -> list[tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]]:
    """(first at p, second at q) for every pair of 4-neighbours p, q, both directions."""
    return [(first[1:], second[:-1]), (first[:-1], second[1:]),
            (first[:, 1:], second[:, :-1]), (first[:, :-1], second[:, 1:])]


def _remove_border_objects(labels: Labels) -> Labels:
    """Objects with a pixel on the image edge removed."""
    edge = np.unique(np.concatenate((labels[0], labels[-1], labels[:, 0], labels[:, -1])))
    keep = np.ones(int(labels.max(initial=0)) + 1, bool)
    keep[edge] = False
    keep[0] = True
    return np.where(keep[labels], labels, 0).astype(np.int32)


def _filter_size(labels: Labels, min_diameter: float | None,
                 max_diameter: float | None) -> Labels:
    """Objects whose area is outside pi * d**2 / 4 for the diameter range removed."""
    areas = np.bincount(labels.ravel()).astype(np.float64)
    keep = np.ones(areas.size, bool)
    if min_diameter is not None:
        keep &= areas >= np.pi * min_diameter**2 / 4
    if max_diameter is not None:
        keep &= areas <= np.pi * max_diameter**2 / 4
    keep[0] = True
    return np.where(keep[labels], labels, 0).astype(np.int32)


def _disk(radius: float) -> npt.NDArray[np.bool_]:
    """CellProfiler's ``strel_disk``: offsets with x**2 + y**2 <= radius**2."""
    reach = int(radius)
    y, x = np.mgrid[-reach:reach + 1, -reach:reach + 1]
    disk: npt.NDArray[np.bool_] = (x * x + y * y) <= radius * radius
    return disk


def local_maxima(image: Floats, labels: npt.NDArray[Any],
                 footprint: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Pixels of an object no lower than any pixel of the same object in the footprint.

    centrosome's ``is_local_maximum``. A maximum filter over all objects decides every pixel
    whose footprint sees one object; the few that see two are checked offset by offset.
    """
    ndi = _ndi()
    inside = labels > 0
    highest = ndi.maximum_filter(np.where(inside, image, -np.inf), footprint=footprint,
                                 mode="constant", cval=-np.inf)
    is_max: npt.NDArray[np.bool_] = inside & (image >= highest)
    top = int(labels.max(initial=0)) + 1
    mixed = inside & ~is_max & (
        ndi.maximum_filter(labels, footprint=footprint, mode="constant", cval=0)
        != ndi.minimum_filter(np.where(inside, labels, top), footprint=footprint,
                              mode="constant", cval=top))
    ys, xs = np.nonzero(mixed)
    keep = _own_maxima(image, labels, footprint, ys, xs)
    is_max[ys[keep], xs[keep]] = True
    return is_max


def _own_maxima(image: Floats, labels: npt.NDArray[Any], footprint: npt.NDArray[np.bool_],
                ys: npt.NDArray[np.intp], xs: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
    """Of the pixels (ys, xs): those no lower than their own object's pixels in the footprint."""
    own, value = labels[ys, xs], image[ys, xs]
    keep = np.ones(ys.size, bool)
    reach_y, reach_x = (np.array(footprint.shape) - 1) // 2
    height, width = labels.shape
    for dy, dx in zip(*np.nonzero(footprint), strict=True):
        y2, x2 = ys + (int(dy) - int(reach_y)), xs + (int(dx) - int(reach_x))
        within = (y2 >= 0) & (y2 < height) & (x2 >= 0) & (x2 < width)
        y2, x2 = np.clip(y2, 0, height - 1), np.clip(x2, 0, width - 1)
        keep &= ~(within & (labels[y2, x2] == own) & (image[y2, x2] > value))
    return keep


def _declump(labeled: Labels, data: Floats, valid: npt.NDArray[np.bool_], method: str,
             min_diameter: float) -> Labels:
    """Split clumps by a watershed from local maxima (of intensity or of the shape)."""
    ndi = _ndi()
    footprint = _disk(max(1.0, min_diameter / 1.5 - 0.5))
    if method == "intensity":
        peaks = _smooth(data, valid, min_diameter / 3.5)
        flood = -data  # CellProfiler floods 1 - image: the same order
    else:
        distance = ndi.distance_transform_edt(labeled > 0)
        # CellProfiler's tie-breaker: uniform(0, 0.001) noise from seed 0
        peaks = distance + np.random.RandomState(0).uniform(0, 0.001, distance.shape)
        flood = -distance
    maxima = local_maxima(peaks, labeled, footprint) & (peaks > 0)
    markers, _ = ndi.label(maxima, _EIGHT)
    segmentation = require("skimage.segmentation", "Declumping objects")
    split = segmentation.watershed(flood, markers, connectivity=_EIGHT, mask=labeled > 0)
    return np.asarray(split, np.int32)


def identify_primary(
    image: Any, *, smoothing_sigma: float = 1.0, threshold: str | float = "otsu",
    threshold_correction: float = 1.0,
    declump: Literal["intensity", "shape", "none"] = "intensity",
    min_diameter: float | None = None, max_diameter: float | None = None,
    exclude_border: bool = True, fill_holes: bool = True,
) -> Labels:
    """Find objects (nuclei) in one channel: CellProfiler's IdentifyPrimaryObjects.

    Threshold (computed on the finite pixels, multiplied by ``threshold_correction``) →
    foreground where the Gaussian-smoothed image is at least the threshold → holes filled
    (those smaller than ``max_diameter**2``) → 8-connected objects → declumping (a watershed
    from local maxima of the image smoothed with ``sigma = d / 3.5`` ("intensity") or of the
    distance to the background ("shape"), maxima closer than ``d / 1.5`` merged, ``d`` =
    ``min_diameter`` or 10 px) → objects touching the edge removed → objects with an area
    outside ``pi * d**2 / 4`` of the diameter range removed → holes filled → renumbered.
    A constant field has no objects with an automatic threshold (CellProfiler's threshold
    is then the constant itself, and every pixel would be foreground).

    Parameters
    ----------
    image : array_like
        A 2D field (or ``[1, Y, X]``); NaN and inf pixels are background.
    smoothing_sigma : float
        The Gaussian's sigma in pixels before the threshold is applied (CellProfiler's
        default smoothing scale 1.3488 is sigma 1.0); 0 for none.
    threshold : str or float
        One of :data:`THRESHOLD_METHODS`, or a number in the image's units.
    threshold_correction : float
        Multiplies the threshold.
    declump : {"intensity", "shape", "none"}
        How touching objects are split.
    min_diameter, max_diameter : float, optional
        The range of object diameters kept, in pixels (None: no bound).
    exclude_border : bool
        Remove objects touching the image edge.
    fill_holes : bool
        Fill holes inside objects.

    Returns
    -------
    numpy.ndarray
        ``int32`` labels, objects numbered 1..N.
    """
    _choice(declump, ("intensity", "shape", "none"), "declump")
    if isinstance(threshold, str):
        _choice(threshold, THRESHOLD_METHODS, "threshold")
    data, valid = _float_field(image, "image")
    if isinstance(threshold, str) and np.unique(data[valid]).size < 2:
        return np.zeros(data.shape, np.int32)  # a constant field: nothing to tell apart
    level = threshold_value(data, threshold, mask=valid) * threshold_correction
    foreground = (_smooth(data, valid, smoothing_sigma) >= level) & valid
    if fill_holes:
        limit = None if max_diameter is None else max_diameter**2
        foreground = fill_labeled_holes(foreground.astype(np.int32), max_area=limit) > 0
    labeled, count = _ndi().label(foreground, _EIGHT)
    labeled = labeled.astype(np.int32)
    if declump != "none" and count:
        labeled = _declump(labeled, data, valid, declump, min_diameter or _DEFAULT_MIN_DIAMETER)
    if exclude_border:
        labeled = _remove_border_objects(labeled)
    labeled = _filter_size(labeled, min_diameter, max_diameter)
    if fill_holes:
        labeled = fill_labeled_holes(labeled)
    return relabel(labeled)


def _step_costs(image: Floats, regularization: float
                ) -> list[tuple[tuple[int, int], Floats]]:
    """Per step direction, the cost from each pixel to its neighbour (centrosome's distance)."""
    ndi = _ndi()
    padded = np.pad(image, 2, mode="edge")
    height, width = image.shape
    costs = []
    for dy, dx in ((0, 1), (1, 0), (1, 1), (1, -1)):
        shifted = np.roll(padded, (-dy, -dx), axis=(0, 1))
        window = ndi.uniform_filter(np.abs(padded - shifted), 3, mode="constant") * 9
        diff = window[2:2 + height, 2:2 + width]
        costs.append(((dy, dx), np.sqrt(diff * diff + (abs(dy) + abs(dx)) * regularization**2)))
    return costs


def propagate(image: Any, seeds: Any, mask: Any, regularization: float) -> Labels:
    """Grow the seed objects over ``mask`` by CellProfiler's propagation distance.

    Parameters
    ----------
    image : array_like
        The heights (2D); integer images are used in [0, 1] (divided by their dtype's maximum,
        as CellProfiler loads them), float images as given.
    seeds : array_like of int
        The objects to grow (0 = none).
    mask : array_like of bool
        Where objects may grow; a seed pixel outside it does not grow but keeps its number.
    regularization : float
        The weight of the distance in pixels against the intensity differences.

    Returns
    -------
    numpy.ndarray
        ``int32`` labels with the seeds' numbers.
    """
    field = as_field(image, name="image")
    heights = field.astype(np.float64)
    if field.dtype.kind in "iu":
        heights /= np.iinfo(field.dtype).max
    labels = as_labels(seeds, name="primary")
    allowed = as_field(mask, name="mask").astype(bool)
    same_shape(heights, labels, "`image` and `primary`")
    same_shape(heights, allowed, "`image` and `mask`")
    heights = np.where(np.isfinite(heights), heights, 0.0)
    grown = _shortest_paths(heights, labels, allowed, regularization)
    grown[labels > 0] = labels[labels > 0]
    return grown.astype(np.int32)


def _shortest_paths(heights: Floats, labels: npt.NDArray[np.intp],
                    allowed: npt.NDArray[np.bool_], regularization: float) -> Labels:
    """Each allowed pixel's nearest seed object along 8-connected paths (one Dijkstra)."""
    csgraph = require("scipy.sparse.csgraph", "Propagating objects")
    sparse = require("scipy.sparse", "Propagating objects")
    height, width = heights.shape
    index = np.arange(heights.size).reshape(heights.shape)
    rows, cols, weights = [], [], []
    for (dy, dx), cost in _step_costs(heights, regularization):
        ys = slice(0, height - dy)
        xs = slice(max(0, -dx), width - max(0, dx))
        ys2, xs2 = slice(dy, height), slice(max(0, dx), width + min(0, dx))
        both = allowed[ys, xs] & allowed[ys2, xs2]
        rows.append(index[ys, xs][both])
        cols.append(index[ys2, xs2][both])
        weights.append(cost[ys, xs][both])
    graph = sparse.csr_array(
        (np.concatenate(weights), (np.concatenate(rows), np.concatenate(cols))),
        shape=(heights.size, heights.size))
    starts = np.flatnonzero((labels > 0) & allowed)
    out = np.zeros(heights.size, np.int32)
    if starts.size == 0:
        return out.reshape(heights.shape)
    _, _, sources = csgraph.dijkstra(graph, directed=False, indices=starts,
                                     return_predecessors=True, min_only=True)
    reached = sources >= 0
    out[reached] = labels.ravel()[sources[reached]]
    return out.reshape(heights.shape)


def identify_secondary(
    primary: Any, image: Any, *,
    method: Literal["propagation", "watershed", "distance"] = "propagation",
    threshold: str | float = "otsu", threshold_correction: float = 1.0,
    regularization: float = 0.05, distance: float = 10, fill_holes: bool = True,
) -> Labels:
    """Grow each primary object into a secondary one (a cell from its nucleus).

    CellProfiler's IdentifySecondaryObjects: the foreground is where ``image`` is at least
    its threshold (times ``threshold_correction``); "propagation" grows the primary objects
    over it by CellProfiler's propagation distance (see :func:`propagate`), "watershed"
    floods the absolute Sobel gradient of the image along X (CellProfiler's
    ``scipy.ndimage.sobel(img)``) from them, "distance" gives each pixel within
    ``distance`` pixels of an object to the nearest one (no threshold, CellProfiler's
    "Distance - N"). Holes inside each secondary object are then filled.

    Parameters
    ----------
    primary : array_like of int
        The primary objects (labels).
    image : array_like
        The channel the secondary objects are found in (same shape).
    method : {"propagation", "watershed", "distance"}
        How they grow.
    threshold : str or float
        As for :func:`identify_primary`.
    threshold_correction : float
        Multiplies the threshold.
    regularization : float
        Propagation only: the weight of distance against intensity differences.
    distance : float
        "distance" only: how far objects grow, in pixels.
    fill_holes : bool
        Fill holes inside the secondary objects.

    Returns
    -------
    numpy.ndarray
        ``int32`` labels: each secondary object has its primary object's number.
    """
    _choice(method, ("propagation", "watershed", "distance"), "method")
    seeds = as_labels(primary, name="primary")
    object_count(seeds)  # numbers beyond the pixel count refused (the result is int32)
    data, valid = _float_field(image, "image")
    same_shape(seeds, data, "`primary` and `image`")
    if method == "distance":
        grown = _grow_by_distance(seeds, distance)
    else:
        level = threshold_value(data, threshold, mask=valid) * threshold_correction
        foreground = (data >= level) & valid
        if method == "propagation":
            grown = propagate(image, seeds, foreground, regularization)
        else:
            gradient = np.abs(_ndi().sobel(data))
            segmentation = require("skimage.segmentation", "Identifying secondary objects")
            grown = np.asarray(segmentation.watershed(
                gradient, seeds, connectivity=_EIGHT, mask=foreground), np.int32)
    if fill_holes:
        grown = fill_labeled_holes(grown)
    return grown.astype(np.int32)


def _grow_by_distance(seeds: npt.NDArray[np.intp], distance: float) -> Labels:
    """Each pixel within ``distance`` of an object given to the nearest one."""
    if not seeds.any():
        return np.zeros(seeds.shape, np.int32)
    gap, (ys, xs) = _ndi().distance_transform_edt(seeds == 0, return_indices=True)
    return np.where(gap <= distance, seeds[ys, xs], 0).astype(np.int32)


def identify_tertiary(larger: Any, smaller: Any, *, shrink_smaller: bool = True) -> Labels:
    """The region of each larger object outside its smaller one (cytoplasm = cell - nucleus).

    CellProfiler's IdentifyTertiaryObjects: with ``shrink_smaller`` the smaller objects lose
    their outline first (one pixel), so a tertiary object keeps a ring where they met; the
    result has the larger objects' numbers (an object wholly covered becomes absent).

    Parameters
    ----------
    larger, smaller : array_like of int
        Two label images of the same shape (cells, nuclei).
    shrink_smaller : bool
        Remove the smaller objects' outline pixels before subtracting them.

    Returns
    -------
    numpy.ndarray
        ``int32`` labels numbered as ``larger``.
    """
    big = as_labels(larger, name="larger")
    small = as_labels(smaller, name="smaller")
    same_shape(big, small, "`larger` and `smaller`")
    object_count(big)  # numbers beyond the pixel count refused (the result is int32)
    removed = small > 0
    if shrink_smaller:
        removed &= ~_outline(small)
    return np.where(removed, 0, big).astype(np.int32)


def _outline(labels: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
    """centrosome's ``outline``: object pixels with an 8-neighbour of another number, or on
    the image edge."""
    edge = np.zeros(labels.shape, bool)
    pairs = [(np.s_[1:, :], np.s_[:-1, :]), (np.s_[:, 1:], np.s_[:, :-1]),
             (np.s_[1:, 1:], np.s_[:-1, :-1]), (np.s_[1:, :-1], np.s_[:-1, 1:])]
    for here, there in pairs:
        differ = labels[here] != labels[there]
        edge[here] |= differ
        edge[there] |= differ
    edge[0, :] = edge[-1, :] = edge[:, 0] = edge[:, -1] = True
    return edge & (labels > 0)


def relate(children: Any, parents: Any) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Each child's parent and each parent's number of children (CellProfiler's relate_labels).

    A child's parent is the parent object covering most of its pixels (ties: the lower
    number); a child over no parent has parent 0.

    Parameters
    ----------
    children, parents : array_like of int
        Two label images of the same shape.

    Returns
    -------
    parent_of_child : numpy.ndarray
        Length ``children.max()``: row ``i`` is child ``i + 1``'s parent number (0: none).
    children_per_parent : numpy.ndarray
        Length ``parents.max()``: row ``j`` is how many children parent ``j + 1`` has.
    """
    child = as_labels(children, name="children")
    parent = as_labels(parents, name="parents")
    same_shape(child, parent, "`children` and `parents`")
    n_child, n_parent = object_count(child), object_count(parent)
    both = (child > 0) & (parent > 0)
    pair = child[both].astype(np.int64) * (n_parent + 1) + parent[both]
    keys, counts = np.unique(pair, return_counts=True)
    kid, dad = np.divmod(keys, n_parent + 1)
    order = np.lexsort((dad, -counts, kid))  # per child: most pixels first, then lower number
    kid, dad = kid[order], dad[order]
    first = np.ones(kid.size, bool)
    first[1:] = kid[1:] != kid[:-1]
    parent_of = np.zeros(n_child + 1, np.int64)
    parent_of[kid[first]] = dad[first]
    per_parent = np.bincount(parent_of[1:], minlength=n_parent + 1)[1:].astype(np.int64)
    return parent_of[1:], per_parent
