"""The convex hulls of every object of a label image at once: their pixel counts (scikit-image's
``convex_hull_image``) and their Feret diameters (centrosome's ``feret_diameter``).

The hull of an object's pixels is the hull of each row's leftmost and rightmost pixel: two
chains, monotone in the row, one bulging left and one right. A chain is made convex by
removing, all objects and all points at once, every point that is not strictly outside the
segment joining its neighbours, until none is left: a hull vertex is never removed, and a
chain whose every point is convex is its hull. Each round is a few NumPy operations over the
points still in; no loop runs per object. Coordinates stay integers (doubled for the
half-pixel points of ``convex_hull_image``), so which pixels the hull covers is exact.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["Chains", "convex_areas", "feret_diameters"]

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
_PAIRS_PER_CHUNK = 1 << 20
"""Vertex pairs (and so float64 values of each temporary) per chunk of the Feret diameters."""


def _starts(*columns: npt.NDArray[np.generic]) -> npt.NDArray[np.bool_]:
    """Per row of sorted ``columns``: whether it starts a run of equal rows."""
    first = np.ones(columns[0].size, bool)
    if first.size:
        first[1:] = np.logical_or.reduce([c[1:] != c[:-1] for c in columns])
    return first


def _ends(*columns: npt.NDArray[np.generic]) -> npt.NDArray[np.bool_]:
    """Per row of sorted ``columns``: whether it ends a run of equal rows."""
    last = np.ones(columns[0].size, bool)
    if last.size:
        last[:-1] = _starts(*columns)[1:]
    return last


class Chains:
    """Each object's leftmost and rightmost pixel per row: ``obj``, ``row``, ``left``,
    ``right``, sorted by object then row."""

    def __init__(self, labels: npt.NDArray[np.intp]) -> None:
        ys, xs = np.nonzero(labels)  # raster order: by row, then column
        own = labels[ys, xs].astype(np.int64)
        key = own * labels.shape[0] + ys
        order = np.argsort(key, kind="stable")  # by object and row; columns stay ascending
        key, xs = key[order], xs[order].astype(np.int64)
        first, last = _starts(key), _ends(key)
        self.obj, self.row = np.divmod(key[first], labels.shape[0])
        self.left, self.right = xs[first], xs[last]


def _convex(obj: Ints, y: Ints, x: Ints, side: int) -> npt.NDArray[np.intp]:
    """The positions of the hull vertices of chains sorted by object, then ``y`` (one point
    per ``y``): ``side`` -1 keeps the chain bulging to lower ``x``, +1 to higher."""
    alive = np.arange(obj.size)
    while alive.size > 2:
        o = obj[alive]
        inner = np.flatnonzero((o[1:-1] == o[:-2]) & (o[1:-1] == o[2:])) + 1
        a, b, c = alive[inner - 1], alive[inner], alive[inner + 1]
        turn = (x[b] - x[a]) * (y[c] - y[a]) - (x[c] - x[a]) * (y[b] - y[a])
        drop = inner[side * turn <= 0]
        if not drop.size:
            break
        alive = np.delete(alive, drop)
    return alive


def _extreme_per_row(obj: Ints, y: Ints, x: Ints, side: int) -> tuple[Ints, Ints, Ints]:
    """Per object and ``y``, the point of lowest (``side`` -1) or highest (+1) ``x``."""
    order = np.lexsort((side * x, y, obj))[::-1]  # per (object, y), the extreme x first
    obj, y, x = obj[order], y[order], x[order]
    first = _starts(obj, y)
    return obj[first][::-1], y[first][::-1], x[first][::-1]


def _boundary(obj: Ints, y: Ints, x: Ints, at_obj: Ints, at_y: Ints, side: int,
              span: int) -> Ints:
    """Per query (object, ``at_y``): the first (``side`` -1: ceiling) or last (+1: floor)
    whole column ``c`` with ``2c`` inside the convex chain (``y`` ascending per object,
    bracketing every query; coordinates doubled)."""
    keys = obj * span + y
    a = np.searchsorted(keys, at_obj * span + at_y, side="right") - 1
    c = np.minimum(a + 1, keys.size - 1)
    rise = np.where(y[a] == at_y, 1, y[c] - y[a])
    run = np.where(y[a] == at_y, 0, x[c] - x[a])
    numerator: Ints = x[a] * rise + run * (at_y - y[a])
    denominator: Ints = 2 * rise
    column: Ints = -((-numerator) // denominator) if side < 0 else numerator // denominator
    return column


def convex_areas(chains: Chains, n: int, height: int) -> Floats:
    """Per object number 0..n: the pixels of scikit-image's ``convex_hull_image`` (the hull
    of the pixels' edge midpoints; a pixel counts when its centre is inside or on it)."""
    sides = {}
    for side, column in ((-1, chains.left), (1, chains.right)):
        obj = np.repeat(chains.obj, 3)
        y = (2 * chains.row[:, None] + np.array([-1, 0, 1])).ravel()
        x = (2 * column[:, None] + np.array([0, side, 0])).ravel()
        obj, y, x = _extreme_per_row(obj, y, x, side)
        keep = _convex(obj, y, x, side)
        sides[side] = (obj[keep], y[keep] + 1, x[keep])  # y + 1 >= 0 for the search keys
    span = 2 * height + 4
    top, bottom = _row_ranges(chains, n)
    heights = np.maximum(bottom - top + 1, 0)
    at_obj = np.repeat(np.arange(n + 1), heights)
    at_row = np.arange(heights.sum()) - np.repeat(np.cumsum(heights) - heights, heights) \
        + np.repeat(top, heights)
    low = _boundary(*sides[-1], at_obj, 2 * at_row + 1, -1, span)
    high = _boundary(*sides[1], at_obj, 2 * at_row + 1, 1, span)
    return np.bincount(at_obj, np.maximum(high - low + 1, 0), minlength=n + 1).astype(
        np.float64, copy=False)


def _row_ranges(chains: Chains, n: int) -> tuple[Ints, Ints]:
    """Per object number 0..n: its first and last row (0 and -1 without pixels)."""
    top, bottom = np.zeros(n + 1, np.int64), np.full(n + 1, -1, np.int64)
    first, last = _starts(chains.obj), _ends(chains.obj)
    top[chains.obj[first]], bottom[chains.obj[last]] = chains.row[first], chains.row[last]
    return top, bottom


def _polygons(chains: Chains) -> tuple[Ints, Floats]:
    """Each object's hull of pixel centres as (object, vertex) rows, in order around it:
    the left chain down, the right chain up, repeated points left out."""
    parts = []
    for side, column in ((-1, chains.left), (1, chains.right)):
        keep = _convex(chains.obj, chains.row, column, side)
        sequence = chains.row[keep] if side < 0 else 2 * 10**9 - chains.row[keep]
        parts.append((chains.obj[keep], sequence, chains.row[keep], column[keep]))
    obj, sequence, row, col = (np.concatenate(p) for p in zip(*parts, strict=True))
    order = np.lexsort((sequence, obj))
    obj, points = obj[order], np.column_stack((row[order], col[order])).astype(np.float64)
    repeated = ~_starts(obj, points[:, 0], points[:, 1])
    obj, points = obj[~repeated], points[~repeated]
    first, last = np.flatnonzero(_starts(obj)), np.flatnonzero(_ends(obj))
    wraps = (last > first) & (points[last] == points[first]).all(axis=1)
    keep = np.ones(obj.size, bool)
    keep[last[wraps]] = False
    return obj[keep], points[keep]


def feret_diameters(chains: Chains, n: int) -> tuple[Floats, Floats]:
    """Per object number 0..n: the minimum and maximum caliper width of its pixel centres
    (centrosome's ``feret_diameter`` on the hull; NaN without pixels)."""
    obj, points = _polygons(chains)
    counts = np.bincount(obj, minlength=n + 1)
    low, high = np.full(n + 1, np.nan), np.full(n + 1, np.nan)
    starts = np.cumsum(counts) - counts
    numbers = np.flatnonzero(counts)
    numbers = numbers[np.argsort(counts[numbers], kind="stable")]  # chunks of similar size
    while numbers.size:
        sizes = counts[numbers]
        cost = np.arange(1, sizes.size + 1) * sizes * sizes  # a chunk's padded vertex pairs
        take = numbers[:max(1, int(np.searchsorted(cost, _PAIRS_PER_CHUNK, side="right")))]
        low[take], high[take] = _calipers(points, starts[take], counts[take],
                                          int(counts[take[-1]]))
        numbers = numbers[take.size:]
    return low, high


def _calipers(points: Floats, starts: Ints, counts: Ints, size: int) -> tuple[Floats, Floats]:
    """Minimum and maximum caliper of polygons of at most ``size`` vertices (padded)."""
    slot = np.arange(size)
    valid = slot[None, :] < counts[:, None]
    where = np.where(valid, starts[:, None] + slot[None, :], starts[:, None])
    hull = points[where]  # [objects, size, 2]; padding repeats the first vertex
    gaps = hull[:, None, :, :] - hull[:, :, None, :]  # gaps[k, i, j] = hull[j] - hull[i]
    widest = np.sqrt((gaps**2).sum(-1)).max(axis=(1, 2), initial=0.0)
    following = np.where(slot[None, :] + 1 < counts[:, None], where + 1, starts[:, None])
    edges = points[following] - hull
    heights = np.abs(edges[:, :, None, 0] * gaps[:, :, :, 1]
                     - edges[:, :, None, 1] * gaps[:, :, :, 0])
    with np.errstate(invalid="ignore", divide="ignore"):
        widths = heights.max(axis=2) / np.hypot(edges[:, :, 0], edges[:, :, 1])
    narrowest = np.where(valid, widths, np.inf).min(axis=1)
    return np.where(counts < 3, 0.0, narrowest), widest
