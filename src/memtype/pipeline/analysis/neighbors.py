"""Object neighbours: CellProfiler 4.2's MeasureObjectNeighbors ("within a distance", objects
measured against themselves), without a loop per object.

CellProfiler dilates each object by a disk of radius ``distance`` and lists the other objects
under the dilation; here every outline pixel (centrosome's ``outline``) looks at the pixels at
every offset of that disk at once, which finds the same pairs (the point of an object nearest
another one lies on its outline). ``PercentTouching`` counts the outline pixels within a
disk of radius ``distance + 0.5`` of another object, per 100 outline pixels. The nearest
objects are by centroid (a k-d tree instead of CellProfiler's all-pairs matrix).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from memtype import require
from memtype.errors import InvalidArgumentError
from memtype.pipeline.analysis._inputs import as_labels, object_count

__all__ = ["NEIGHBOR_FEATURES", "measure_neighbors"]

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.intp]

NEIGHBOR_FEATURES: tuple[str, ...] = (
    "NumberOfNeighbors", "PercentTouching", "FirstClosestObjectNumber",
    "FirstClosestDistance", "SecondClosestObjectNumber", "SecondClosestDistance",
    "AngleBetweenNeighbors")
"""The ``Neighbors_<feature>_<distance>`` columns."""


def _outline(labels: Ints) -> npt.NDArray[np.bool_]:
    """centrosome's ``outline``: object pixels with an 8-neighbour of another number, or on
    the image edge."""
    edge = np.zeros(labels.shape, bool)
    for here, there in ((np.s_[1:, :], np.s_[:-1, :]), (np.s_[:, 1:], np.s_[:, :-1]),
                        (np.s_[1:, 1:], np.s_[:-1, :-1]), (np.s_[1:, :-1], np.s_[:-1, 1:])):
        differ = labels[here] != labels[there]
        edge[here] |= differ
        edge[there] |= differ
    edge[0, :] = edge[-1, :] = edge[:, 0] = edge[:, -1] = True
    return edge & (labels > 0)


def _disk_offsets(radius: float) -> Ints:
    """centrosome's ``strel_disk`` as (dy, dx) rows: x**2 + y**2 <= radius**2."""
    reach = int(radius)
    y, x = np.mgrid[-reach:reach + 1, -reach:reach + 1]
    inside = x * x + y * y <= radius * radius
    return np.column_stack((y[inside], x[inside])).astype(np.intp)


def _others_at(labels: Ints, ys: Ints, xs: Ints, offset: Ints) -> Ints:
    """The object number at each (y, x) + offset (0 beyond the edge)."""
    height, width = labels.shape
    y2, x2 = ys + offset[0], xs + offset[1]
    inside = (y2 >= 0) & (y2 < height) & (x2 >= 0) & (x2 < width)
    found: Ints = np.where(inside, labels[np.clip(y2, 0, height - 1), np.clip(x2, 0, width - 1)], 0)
    return found


def _contacts(labels: Ints, n: int, distance: int) -> tuple[Floats, Floats]:
    """Per object number 0..n: how many other objects lie within ``distance``, and the percent
    of its outline within ``distance + 0.5`` of another object."""
    outline = _outline(labels)
    ys, xs = np.nonzero(outline)
    own = labels[ys, xs]
    codes = []
    for offset in _disk_offsets(distance):
        other = _others_at(labels, ys, xs, offset)
        near = (other > 0) & (other != own)
        codes.append(own[near].astype(np.int64) * (n + 1) + other[near])
    pairs = np.unique(np.concatenate(codes)) if codes else np.zeros(0, np.int64)
    count = np.bincount(pairs // (n + 1), minlength=n + 1).astype(np.float64)
    touching = np.zeros(ys.size, bool)
    for offset in _disk_offsets(distance + 0.5):
        other = _others_at(labels, ys, xs, offset)
        touching |= (other > 0) & (other != own)
    perimeter = np.bincount(own, minlength=n + 1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        percent = 100.0 * np.bincount(own[touching], minlength=n + 1) / perimeter
    return count, percent


def _closest(labels: Ints, n: int) -> dict[str, Floats]:
    """Per object number 0..n: the first and second nearest objects by centroid, their
    distances and the angle between them (0 where there is no such object)."""
    ys, xs = np.nonzero(labels)
    own = labels[ys, xs]
    area = np.bincount(own, minlength=n + 1).astype(np.float64)
    numbers = np.flatnonzero(area)
    numbers = numbers[numbers > 0]
    centres = np.column_stack((np.bincount(own, ys, minlength=n + 1)[numbers],
                               np.bincount(own, xs, minlength=n + 1)[numbers])) \
        / area[numbers, None]
    out = {name: np.zeros(n + 1) for name in ("first", "second", "first_d", "second_d",
                                              "angle")}
    if numbers.size < 2:
        return out
    spatial = require("scipy.spatial", "Measuring object neighbours")
    k = min(3, numbers.size)
    _, index = spatial.cKDTree(centres).query(centres, k=k)
    rank = _without_self(np.asarray(index).reshape(numbers.size, k))
    vectors = [centres[rank[:, j]] - centres for j in range(rank.shape[1])]
    out["first"][numbers] = numbers[rank[:, 0]]
    out["first_d"][numbers] = np.hypot(*vectors[0].T)
    if rank.shape[1] > 1:
        out["second"][numbers] = numbers[rank[:, 1]]
        out["second_d"][numbers] = np.hypot(*vectors[1].T)
        with np.errstate(invalid="ignore", divide="ignore"):
            cosine = (vectors[0] * vectors[1]).sum(1) / (out["first_d"][numbers]
                                                          * out["second_d"][numbers])
        out["angle"][numbers] = np.degrees(np.arccos(np.clip(cosine, -1, 1)))
    return out


def _without_self(index: Ints) -> Ints:
    """Each row of a k-nearest query (the row's own point among them) without that point."""
    rows = np.arange(index.shape[0])[:, None]
    keep = index != rows
    # a point whose own index is not among its k (ties at distance 0): drop the last column
    keep[keep.all(axis=1), -1] = False
    kept: Ints = index[keep].reshape(index.shape[0], index.shape[1] - 1)
    return kept


def measure_neighbors(labels: Any, *, distance: int = 5) -> dict[str, np.ndarray]:
    """Each object's neighbours: CellProfiler's MeasureObjectNeighbors, "within a distance".

    Parameters
    ----------
    labels : array_like of int
        The objects (2D, or ``[1, Y, X]``); 0 is background.
    distance : int
        Objects closer than this many pixels (a disk) are neighbours.

    Returns
    -------
    dict of str to numpy.ndarray
        ``Neighbors_<feature>_<distance>`` for each of :data:`NEIGHBOR_FEATURES`; row ``i`` is
        object ``i + 1``. An absent number has NaN. As in CellProfiler, a missing first or
        second closest object (one or two objects in the field) gives 0 for its number,
        distance and the angle. Distances and the angle (degrees) are between centroids.

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.zeros((5, 12), int); labels[1:4, 1:4] = 1; labels[1:4, 6:9] = 2
    >>> measure_neighbors(labels, distance=2)["Neighbors_NumberOfNeighbors_2"]
    array([1., 1.])
    """
    if isinstance(distance, bool) or not isinstance(distance, (int, np.integer)) or distance < 0:
        raise InvalidArgumentError(
            f"Invalid value for argument `distance`. Expected a whole number of pixels >= 0. "
            f"Received: distance={distance!r}.")
    lab = as_labels(labels)
    n = object_count(lab)
    count, percent = _contacts(lab, n, int(distance))
    closest = _closest(lab, n)
    stats = {"NumberOfNeighbors": count, "PercentTouching": percent,
             "FirstClosestObjectNumber": closest["first"],
             "FirstClosestDistance": closest["first_d"],
             "SecondClosestObjectNumber": closest["second"],
             "SecondClosestDistance": closest["second_d"],
             "AngleBetweenNeighbors": closest["angle"]}
    absent = np.bincount(lab.ravel(), minlength=n + 1) == 0
    return {f"Neighbors_{name}_{distance}": np.where(absent, np.nan, stats[name])[1:]
            for name in NEIGHBOR_FEATURES}
