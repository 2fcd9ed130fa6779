"""Per-object size and shape: CellProfiler 4.2's MeasureObjectSizeShape (2D).

CellProfiler asks ``skimage.measure.regionprops_table`` for its properties, which visits
the objects one by one; here area, centroid, bounding box, the second moments (axis
lengths, eccentricity, orientation), extent, equivalent diameter, perimeter (scikit-image's
4-neighbourhood estimator, label by label at once), Euler number (bit quads), the convex
hull's area (``ConvexArea``, ``Solidity``) and the Feret diameters (centrosome's definition,
from the hull of the pixel centres; :mod:`._hulls`) are computed for all objects at once: no
loop runs per object.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from memtype.pipeline.analysis._hulls import Chains, convex_areas, feret_diameters
from memtype.pipeline.analysis._inputs import as_labels, object_count

__all__ = ["SHAPE_FEATURES", "measure_size_shape"]

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.intp]

SHAPE_FEATURES: tuple[str, ...] = (
    "Area", "Perimeter", "Center_X", "Center_Y", "BoundingBoxMinimum_X",
    "BoundingBoxMinimum_Y", "BoundingBoxMaximum_X", "BoundingBoxMaximum_Y",
    "BoundingBoxArea", "Eccentricity", "Solidity", "Extent", "FormFactor",
    "MajorAxisLength", "MinorAxisLength", "Orientation", "Compactness", "EulerNumber",
    "MaxFeretDiameter", "MinFeretDiameter", "ConvexArea", "EquivalentDiameter")
"""The ``AreaShape_<feature>`` columns."""

# scikit-image's perimeter weights, indexed by 1 * centre + 2 * (4-neighbours on the border)
# + 10 * (diagonal neighbours on the border) (Benkrid & Crookes)
_PERIMETER_WEIGHTS = np.zeros(50)
_PERIMETER_WEIGHTS[[5, 7, 15, 17, 25, 27]] = 1
_PERIMETER_WEIGHTS[[21, 33]] = np.sqrt(2)
_PERIMETER_WEIGHTS[[13, 23]] = (1 + np.sqrt(2)) / 2

_STRAIGHT = ((-1, 0), (1, 0), (0, -1), (0, 1))
_DIAGONAL = ((-1, -1), (-1, 1), (1, -1), (1, 1))


def _shifted(labels: Ints, dy: int, dx: int) -> Ints:
    """``labels`` moved so that position p holds p + (dy, dx); 0 beyond the edge."""
    padded = np.pad(labels, 1)
    height, width = labels.shape
    out: Ints = padded[1 + dy:1 + dy + height, 1 + dx:1 + dx + width]
    return out


def _perimeters(labels: Ints, n: int) -> Floats:
    """scikit-image's ``perimeter(neighborhood=4)`` of every object at once."""
    interior = labels > 0
    for dy, dx in _STRAIGHT:
        interior &= _shifted(labels, dy, dx) == labels
    border = np.where((labels > 0) & ~interior, labels, 0)
    code = np.where(border > 0, 1, 0)
    for weight, offsets in ((2, _STRAIGHT), (10, _DIAGONAL)):
        for dy, dx in offsets:
            code += weight * ((_shifted(border, dy, dx) == border) & (border > 0))
    on = border > 0
    return np.bincount(border[on], _PERIMETER_WEIGHTS[code[on]], minlength=n + 1).astype(np.float64)


def _euler_numbers(labels: Ints, n: int) -> Floats:
    """Each object's Euler number (8-connected objects, 4-connected holes) by Gray's bit quads.

    E = (Q1 - Q3 - 2 QD) / 4 over every 2x2 window, counting for each object the window's
    pixels that belong to it (scikit-image's ``euler_number(connectivity=2)``).
    """
    padded = np.pad(labels, 1)
    corners = (padded[:-1, :-1], padded[:-1, 1:], padded[1:, :-1], padded[1:, 1:])
    total = np.zeros(n + 1)
    for k, candidate in enumerate(corners):
        first = candidate > 0
        for earlier in corners[:k]:
            first &= earlier != candidate
        hits = [corner == candidate for corner in corners]
        count = sum(hit.astype(np.int8) for hit in hits)
        diagonal = (count == 2) & ((hits[0] & hits[3]) | (hits[1] & hits[2]))
        score = (count == 1).astype(np.float64) - (count == 3) - 2.0 * diagonal
        total += np.bincount(candidate[first], score[first], minlength=n + 1)
    out: Floats = total / 4
    return out


def _moments(labels: Ints, n: int) -> dict[str, Floats]:
    """Area, centroid, bounding box and the inertia tensor's features per object number."""
    ys, xs = np.nonzero(labels)
    own = labels[ys, xs]
    area = np.bincount(own, minlength=n + 1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        cy = np.bincount(own, ys, minlength=n + 1) / area
        cx = np.bincount(own, xs, minlength=n + 1) / area
        dy, dx = ys - cy[own], xs - cx[own]
        rows = np.bincount(own, dy * dy, minlength=n + 1) / area   # mu20 / mu00
        cols = np.bincount(own, dx * dx, minlength=n + 1) / area   # mu02 / mu00
        cross = np.bincount(own, dy * dx, minlength=n + 1) / area  # mu11 / mu00
    box = [np.full(n + 1, np.nan) for _ in range(4)]
    for values, low, high in ((ys, box[0], box[2]), (xs, box[1], box[3])):
        low[:], high[:] = np.inf, -np.inf
        np.minimum.at(low, own, values.astype(np.float64))
        np.maximum.at(high, own, values.astype(np.float64) + 1)
    out = {"Area": area, "Center_Y": cy, "Center_X": cx, "BoundingBoxMinimum_Y": box[0],
           "BoundingBoxMinimum_X": box[1], "BoundingBoxMaximum_Y": box[2],
           "BoundingBoxMaximum_X": box[3]}
    out.update(_axes(a=cols, b=-cross, c=rows))
    return out


def _axes(*, a: Floats, b: Floats, c: Floats) -> dict[str, Floats]:
    """Axis lengths, eccentricity and orientation from the inertia tensor [[a, b], [b, c]].

    scikit-image's definitions: eigenvalues l1 >= l2 (clipped at 0), axis lengths 4 sqrt(l),
    eccentricity sqrt(1 - l2 / l1), orientation 0.5 atan2(-2b, c - a) (when a == c: pi/4 if
    b < 0, else -pi/4);
    CellProfiler reports the orientation in degrees.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        middle = (a + c) / 2
        spread = np.sqrt(((a - c) / 2) ** 2 + b * b)
        large, small = np.maximum(middle + spread, 0), np.maximum(middle - spread, 0)
        eccentricity = np.where(large == 0, 0.0, np.sqrt(1 - small / large))
        angle = np.where(a - c == 0, np.where(b < 0, np.pi / 4, -np.pi / 4),
                         0.5 * np.arctan2(-2 * b, c - a))
    return {"MajorAxisLength": 4 * np.sqrt(large), "MinorAxisLength": 4 * np.sqrt(small),
            "Eccentricity": eccentricity, "Orientation": np.degrees(angle)}


def _hull_features(labels: Ints, n: int) -> dict[str, Floats]:
    """ConvexArea and the Feret diameters of every object at once (:mod:`._hulls`)."""
    chains = Chains(labels)
    convex = convex_areas(chains, n, labels.shape[0])
    low, high = feret_diameters(chains, n)
    return {"ConvexArea": convex, "MinFeretDiameter": low, "MaxFeretDiameter": high}


def measure_size_shape(labels: Any) -> dict[str, np.ndarray]:
    """The size and shape of every object: CellProfiler's MeasureObjectSizeShape (2D).

    Parameters
    ----------
    labels : array_like of int
        The objects (2D, or ``[1, Y, X]``); 0 is background.

    Returns
    -------
    dict of str to numpy.ndarray
        ``AreaShape_<feature>`` for each of :data:`SHAPE_FEATURES`; row ``i`` is object
        ``i + 1`` (``labels.max()`` rows); an absent object number has NaN. Bounding-box
        maxima are exclusive (scikit-image's ``bbox``), ``Orientation`` is in degrees,
        ``FormFactor`` is ``4 pi Area / Perimeter**2``, ``Compactness`` is
        ``Perimeter**2 / max(4 pi Area, 1)``.

    Examples
    --------
    >>> import numpy as np
    >>> square = np.zeros((6, 6), int); square[1:4, 1:4] = 1
    >>> measure_size_shape(square)["AreaShape_Area"]
    array([9.])
    """
    lab = as_labels(labels)
    n = object_count(lab)
    stats = _moments(lab, n)
    area = stats["Area"]
    absent = area == 0
    stats["Perimeter"] = _perimeters(lab, n)
    stats["EulerNumber"] = _euler_numbers(lab, n)
    stats.update(_hull_features(lab, n))
    with np.errstate(invalid="ignore", divide="ignore"):
        box_area = ((stats["BoundingBoxMaximum_X"] - stats["BoundingBoxMinimum_X"])
                    * (stats["BoundingBoxMaximum_Y"] - stats["BoundingBoxMinimum_Y"]))
        stats["BoundingBoxArea"] = box_area
        stats["Extent"] = area / box_area
        stats["Solidity"] = area / stats["ConvexArea"]
        stats["FormFactor"] = 4 * np.pi * area / stats["Perimeter"] ** 2
        stats["Compactness"] = stats["Perimeter"] ** 2 / np.maximum(4 * np.pi * area, 1)
        stats["EquivalentDiameter"] = np.sqrt(4 * area / np.pi)
    for name in SHAPE_FEATURES:
        stats[name] = np.where(absent, np.nan, stats[name])
    return {f"AreaShape_{name}": stats[name][1:] for name in SHAPE_FEATURES}
