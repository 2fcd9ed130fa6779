"""CellProfiler 4.2's MeasureObjectIntensity arithmetic, transcribed for the tests.

The per-object computation of ``cellprofiler/modules/measureobjectintensity.py`` (4.2.8,
``run``) for a 2D image without a mask, with scipy.ndimage's per-label functions as
CellProfiler calls them, so memtype's vectorised ``measure_intensity`` is checked against
CellProfiler's own definition (CellProfiler itself pins scipy 1.9 and cannot install here).
One change, stated in memtype's docs: non-finite pixels are left out.
"""

from __future__ import annotations

import numpy as np
import pytest

# the modules that use this reference need scipy and scikit-image (their pytestmark says so);
# where they are absent (the wheel alone) importing it skips those modules, naming them
ndi = pytest.importorskip("scipy.ndimage")
skimage = pytest.importorskip("skimage")
pytest.importorskip("skimage.segmentation")


def _fix(values):
    return np.nan_to_num(np.asarray(values, dtype=float), nan=0.0)


def _quantiles(limg, llabels, lindexes, areas, fractions, n):
    """CellProfiler's quartile loop: sort by (label, value), interpolate at count*fraction."""
    order = np.lexsort((limg, llabels))
    indices = np.cumsum(areas) - areas
    out = []
    for fraction in fractions:
        dest = np.zeros(n)
        qindex = indices.astype(float) + areas * fraction
        qfraction = qindex - np.floor(qindex)
        qindex = qindex.astype(int)
        qmask = qindex < indices + areas - 1
        qi, qf = qindex[qmask], qfraction[qmask]
        dest[lindexes[qmask] - 1] = limg[order[qi]] * (1 - qf) + limg[order[qi + 1]] * qf
        qmask = (~qmask) & (areas > 0)
        dest[lindexes[qmask] - 1] = limg[order[qindex[qmask]]]
        out.append(dest)
    return out


@np.errstate(invalid="ignore", divide="ignore")
def cellprofiler_intensity(labels, img):
    """Each MeasureObjectIntensity feature, as CellProfiler 4.2 computes it (2D, no mask)."""
    n = int(labels.max())
    lindexes = np.arange(1, n + 1, dtype=np.int32)
    lmask = (labels > 0) & np.isfinite(img)
    limg, llabels = img[lmask], labels[lmask]
    mesh_y, mesh_x = np.mgrid[0:img.shape[0], 0:img.shape[1]]
    mesh_x, mesh_y = mesh_x[lmask], mesh_y[lmask]
    lcount = _fix(ndi.sum(np.ones(len(limg)), llabels, lindexes))
    integrated = _fix(ndi.sum(limg, llabels, lindexes))
    mean = integrated / lcount
    std = np.sqrt(_fix(ndi.mean((limg - mean[llabels - 1]) ** 2, llabels, lindexes)))
    minimum = _fix(ndi.minimum(limg, llabels, lindexes))
    maximum = _fix(ndi.maximum(limg, llabels, lindexes))
    max_position = np.array(ndi.maximum_position(limg, llabels, lindexes), dtype=int)
    max_position = max_position.reshape(max_position.shape[0])
    cm_x = _fix(ndi.mean(mesh_x, llabels, lindexes))
    cm_y = _fix(ndi.mean(mesh_y, llabels, lindexes))
    cmi_x = _fix(ndi.sum(mesh_x * limg, llabels, lindexes)) / integrated
    cmi_y = _fix(ndi.sum(mesh_y * limg, llabels, lindexes)) / integrated
    areas = lcount.astype(int)
    lower, median, upper = _quantiles(limg, llabels, lindexes, areas, (0.25, 0.5, 0.75), n)
    madimg = np.abs(limg - median[llabels - 1])
    (mad,) = _quantiles(madimg, llabels, lindexes, areas, (0.5,), n)
    outlines = skimage.segmentation.find_boundaries(labels.reshape(1, *labels.shape),
                                                    mode="inner")[0]
    emask = outlines & np.isfinite(img)
    eimg, elabels = img[emask], labels[emask]
    ecount = _fix(ndi.sum(np.ones(len(eimg)), elabels, lindexes))
    eintegrated = _fix(ndi.sum(eimg, elabels, lindexes))
    emean = eintegrated / ecount
    return {
        "IntegratedIntensity": integrated, "MeanIntensity": mean, "StdIntensity": std,
        "MinIntensity": minimum, "MaxIntensity": maximum,
        "IntegratedIntensityEdge": eintegrated, "MeanIntensityEdge": emean,
        "StdIntensityEdge": np.sqrt(_fix(ndi.mean((eimg - emean[elabels - 1]) ** 2, elabels,
                                                  lindexes))),
        "MinIntensityEdge": _fix(ndi.minimum(eimg, elabels, lindexes)),
        "MaxIntensityEdge": _fix(ndi.maximum(eimg, elabels, lindexes)),
        "MassDisplacement": np.hypot(cm_x - cmi_x, cm_y - cmi_y),
        "LowerQuartileIntensity": lower, "MedianIntensity": median,
        "MADIntensity": mad, "UpperQuartileIntensity": upper,
        "CenterMassIntensity_X": cmi_x, "CenterMassIntensity_Y": cmi_y,
        "MaxIntensity_X": mesh_x[max_position].astype(float),
        "MaxIntensity_Y": mesh_y[max_position].astype(float),
    }


def cellprofiler_focus_scores(pixel_data, scale):
    """MeasureImageQuality's FocusScore and LocalFocusScore (4.2.8,
    ``calculate_focus_scores``) for a 2D image without a mask."""
    shape = pixel_data.shape
    mean_image_value = np.mean(pixel_data)
    focus_score = 0
    if mean_image_value > 0:
        focus_score = np.sum((pixel_data - mean_image_value) ** 2) / (
            np.prod(pixel_data.shape) * mean_image_value)
    i, j = np.mgrid[0:shape[0], 0:shape[1]].astype(float)
    m, n = (np.array(shape) + scale - 1) // scale
    i = (i * float(m) / float(shape[0])).astype(int)
    j = (j * float(n) / float(shape[1])).astype(int)
    grid = i * n + j + 1
    grid_range = np.arange(0, m * n + 1, dtype=np.int32)
    with np.errstate(invalid="ignore", divide="ignore"):
        local_means = _fix(ndi.mean(pixel_data, grid, grid_range))
    local_squared_normalized_image = (pixel_data - local_means[grid]) ** 2
    grid_mask = (local_means != 0) & ~np.isnan(local_means)
    nz_grid_range = grid_range[grid_mask]
    if len(nz_grid_range) and nz_grid_range[0] == 0:
        nz_grid_range = nz_grid_range[1:]
        local_means = local_means[1:]
        grid_mask = grid_mask[1:]
    local_focus_score = 0
    if len(nz_grid_range):
        sums = _fix(ndi.sum(local_squared_normalized_image, grid, nz_grid_range))
        pixel_counts = _fix(ndi.sum(np.ones(shape), grid, nz_grid_range))
        local_norm_var = sums / (pixel_counts * local_means[grid_mask])
        local_norm_median = np.median(local_norm_var)
        if np.isfinite(local_norm_median) and local_norm_median > 0:
            local_focus_score = np.var(local_norm_var) / local_norm_median
    return focus_score, local_focus_score


def _strel_disk(radius):
    iradius = int(radius)
    x, y = np.mgrid[-iradius:iradius + 1, -iradius:iradius + 1]
    return (x * x + y * y <= radius * radius).astype(float)


def _outline(labels):
    """centrosome.outline.outline."""
    output = np.zeros(labels.shape, labels.dtype)
    lr_different = labels[1:, :] != labels[:-1, :]
    ud_different = labels[:, 1:] != labels[:, :-1]
    d1_different = labels[1:, 1:] != labels[:-1, :-1]
    d2_different = labels[1:, :-1] != labels[:-1, 1:]
    different = np.zeros(labels.shape, bool)
    different[1:, :][lr_different] = True
    different[:-1, :][lr_different] = True
    different[:, 1:][ud_different] = True
    different[:, :-1][ud_different] = True
    different[1:, 1:][d1_different] = True
    different[:-1, :-1][d1_different] = True
    different[1:, :-1][d2_different] = True
    different[:-1, 1:][d2_different] = True
    different[0, :] = True
    different[:, 0] = True
    different[-1, :] = True
    different[:, -1] = True
    output[different] = labels[different]
    return output


def cellprofiler_neighbors(labels, distance):
    """MeasureObjectNeighbors (4.2.8, ``run``) for objects against themselves, "Within a
    specified distance", consecutive numbers: the per-object dilation loop as written there."""
    nobjects = int(labels.max())
    neighbor_count = np.zeros(nobjects)
    pixel_count = np.zeros(nobjects)
    object_indexes = np.arange(nobjects, dtype=np.int32) + 1
    ocenters = np.array(ndi.center_of_mass(np.ones(labels.shape), labels, object_indexes))
    perimeter_outlines = _outline(labels)
    perimeters = _fix(ndi.sum(np.ones(labels.shape), perimeter_outlines, object_indexes))
    order = np.zeros((nobjects, min(nobjects, 3)), dtype=np.uint32)
    j = np.arange(nobjects)
    for i in range(nobjects):
        dr = np.hypot(ocenters[i, 0] - ocenters[j, 0], ocenters[i, 1] - ocenters[j, 1])
        order[i, :] = np.argpartition(dr, tuple(range(min(nobjects, 3))))[:3]
    first_x = ocenters[order[:, 1], 1] - ocenters[:, 1]
    first_y = ocenters[order[:, 1], 0] - ocenters[:, 0]
    second_x, second_y, angle = np.zeros(nobjects), np.zeros(nobjects), np.zeros(nobjects)
    if nobjects > 2:
        second_x = ocenters[order[:, 2], 1] - ocenters[:, 1]
        second_y = ocenters[order[:, 2], 0] - ocenters[:, 0]
        v1, v2 = np.array((first_x, first_y)), np.array((second_x, second_y))
        dot = np.sum(v1 * v2, 0) / np.sqrt(np.sum(v1**2, 0) * np.sum(v2**2, 0))
        angle = np.arccos(dot) * 180.0 / np.pi
    strel, strel_touching = _strel_disk(distance), _strel_disk(distance + 0.5)
    i, j = np.mgrid[0:labels.shape[0], 0:labels.shape[1]]
    min_i, max_i, _, _ = ndi.extrema(i, labels, object_indexes)
    min_j, max_j, _, _ = ndi.extrema(j, labels, object_indexes)
    min_i = np.maximum(_fix(min_i) - distance, 0).astype(int)
    max_i = np.minimum(_fix(max_i) + distance + 1, labels.shape[0]).astype(int)
    min_j = np.maximum(_fix(min_j) - distance, 0).astype(int)
    max_j = np.minimum(_fix(max_j) + distance + 1, labels.shape[1]).astype(int)
    for index in range(nobjects):
        patch = labels[min_i[index]:max_i[index], min_j[index]:max_j[index]]
        extended = ndi.binary_dilation(patch == index + 1, strel)
        neighbors = np.unique(patch[extended])
        neighbors = neighbors[(neighbors != 0) & (neighbors != index + 1)]
        neighbor_count[index] = len(neighbors)
        outline_patch = perimeter_outlines[min_i[index]:max_i[index],
                                           min_j[index]:max_j[index]] == index + 1
        extendme = (patch != 0) & (patch != index + 1)
        extended = ndi.binary_dilation(extendme, strel_touching)
        pixel_count[index] = np.sum(outline_patch & extended)
    return {"NumberOfNeighbors": neighbor_count,
            "PercentTouching": pixel_count * 100 / perimeters,
            "FirstClosestObjectNumber": order[:, 1].astype(float) + 1,
            "FirstClosestDistance": np.sqrt(first_x**2 + first_y**2),
            "SecondClosestObjectNumber": (order[:, 2].astype(float) + 1 if nobjects > 2
                                          else np.zeros(nobjects)),
            "SecondClosestDistance": np.sqrt(second_x**2 + second_y**2),
            "AngleBetweenNeighbors": angle}
