"""All intensity measurements of 2 channels in 3 object sets: memtype vs ``regionprops_table``.

A 1024 x 1024 field with about 300 cells: nuclei (``identify_primary``), cells grown from them
(``identify_secondary``, propagation) and cytoplasm (``identify_tertiary``); two channels.
memtype's ``measure_intensity`` (CellProfiler 4.2's MeasureObjectIntensity, vectorised) is
timed against ``skimage.measure.regionprops_table`` asked for the same values: its own
``intensity_mean/min/max/std``, ``centroid`` and ``centroid_weighted``, and
``extra_properties`` for the ones it lacks (integrated intensity, CellProfiler's quartiles,
median and MAD, the brightest pixel), plus a second table over the objects' inner boundaries
for the edge statistics. Every value is asserted equal (rtol 1e-9) before timing; then both
run in alternating rounds and the medians and their ratio are reported.

Run: ``python benchmarks/measurements.py [--rounds 7]`` (writes
benchmarks/results/measurements.md).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.ndimage as ndi
from skimage import measure, segmentation

from memtype.pipeline.analysis.intensity import measure_intensity
from memtype.pipeline.analysis.objects import (
    identify_primary,
    identify_secondary,
    identify_tertiary,
)

RESULT = Path(__file__).resolve().parent / "results" / "measurements.md"
SIZE = 1024


def synthetic_field(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A nuclei channel and a cell channel: ~300 cells on a jittered grid."""
    rng = np.random.default_rng(seed)
    centres = [(y + rng.uniform(-8, 8), x + rng.uniform(-8, 8))
               for y in np.arange(30, SIZE - 20, 57) for x in np.arange(30, SIZE - 20, 57)]
    y, x = np.mgrid[:SIZE, :SIZE]
    nuclei = np.zeros((SIZE, SIZE))
    cells = np.zeros((SIZE, SIZE))
    for cy, cx in centres:
        box = np.s_[max(int(cy) - 30, 0):int(cy) + 30, max(int(cx) - 30, 0):int(cx) + 30]
        d2 = (y[box] - cy) ** 2 + (x[box] - cx) ** 2
        nuclei[box] += rng.uniform(0.5, 1.0) * np.exp(-d2 / (2 * 6.0**2))
        cells[box] += rng.uniform(0.3, 0.6) * (d2 <= rng.uniform(18, 24) ** 2)
    nuclei += rng.normal(0, 0.02, nuclei.shape)
    cells = ndi.gaussian_filter(cells, 1.5) + rng.normal(0, 0.02, cells.shape)
    return nuclei, cells


def object_sets(nuclei: np.ndarray, cells: np.ndarray) -> dict[str, np.ndarray]:
    """Nuclei, cells (propagation) and cytoplasm (cells minus nuclei)."""
    primary = identify_primary(nuclei, min_diameter=8, max_diameter=40)
    secondary = identify_secondary(primary, cells)
    return {"Nuclei": primary, "Cells": secondary,
            "Cytoplasm": identify_tertiary(secondary, primary)}


def _cp_quantile(values: np.ndarray, fraction: float) -> float:
    """CellProfiler's quantile of one object's values (position count * fraction)."""
    ordered = np.sort(values)
    position = ordered.size * fraction
    low = int(position)
    if low < ordered.size - 1:
        weight = position - low
        return float(ordered[low] * (1 - weight) + ordered[low + 1] * weight)
    return float(ordered[low])


def _integrated(mask: np.ndarray, image: np.ndarray) -> float:
    return float(image[mask].sum())


def _lower(mask: np.ndarray, image: np.ndarray) -> float:
    return _cp_quantile(image[mask], 0.25)


def _median(mask: np.ndarray, image: np.ndarray) -> float:
    return _cp_quantile(image[mask], 0.5)


def _upper(mask: np.ndarray, image: np.ndarray) -> float:
    return _cp_quantile(image[mask], 0.75)


def _mad(mask: np.ndarray, image: np.ndarray) -> float:
    values = image[mask]
    return _cp_quantile(np.abs(values - _cp_quantile(values, 0.5)), 0.5)


def _argmax_y(mask: np.ndarray, image: np.ndarray) -> float:
    return float(np.argmax(np.where(mask, image, -np.inf)) // mask.shape[1])


def _argmax_x(mask: np.ndarray, image: np.ndarray) -> float:
    return float(np.argmax(np.where(mask, image, -np.inf)) % mask.shape[1])


def regionprops_measurements(labels: np.ndarray, image: np.ndarray,
                             name: str) -> dict[str, np.ndarray]:
    """The same columns from ``regionprops_table`` (two tables: objects and their edges)."""
    table = measure.regionprops_table(
        labels, image,
        properties=("label", "bbox", "centroid", "centroid_weighted", "intensity_mean",
                    "intensity_min", "intensity_max", "intensity_std"),
        extra_properties=(_integrated, _lower, _median, _upper, _mad, _argmax_y, _argmax_x))
    edges = np.where(segmentation.find_boundaries(labels, mode="inner"), labels, 0)
    edge = measure.regionprops_table(
        edges, image, properties=("label", "intensity_mean", "intensity_min",
                                  "intensity_max", "intensity_std"),
        extra_properties=(_integrated,))
    rows = table["label"] - 1
    columns = {
        "IntegratedIntensity": table["_integrated"], "MeanIntensity": table["intensity_mean"],
        "StdIntensity": table["intensity_std"], "MinIntensity": table["intensity_min"],
        "MaxIntensity": table["intensity_max"],
        "IntegratedIntensityEdge": edge["_integrated"], "MeanIntensityEdge":
        edge["intensity_mean"], "StdIntensityEdge": edge["intensity_std"],
        "MinIntensityEdge": edge["intensity_min"], "MaxIntensityEdge": edge["intensity_max"],
        "MassDisplacement": np.hypot(table["centroid-0"] - table["centroid_weighted-0"],
                                     table["centroid-1"] - table["centroid_weighted-1"]),
        "LowerQuartileIntensity": table["_lower"], "MedianIntensity": table["_median"],
        "MADIntensity": table["_mad"], "UpperQuartileIntensity": table["_upper"]}
    out = {f"Intensity_{key}_{name}": _rows(values, rows, labels.max())
           for key, values in columns.items()}
    out[f"Location_CenterMassIntensity_X_{name}"] = _rows(table["centroid_weighted-1"], rows,
                                                          labels.max())
    out[f"Location_CenterMassIntensity_Y_{name}"] = _rows(table["centroid_weighted-0"], rows,
                                                          labels.max())
    out[f"Location_MaxIntensity_X_{name}"] = _rows(table["_argmax_x"] + table["bbox-1"], rows,
                                                   labels.max())
    out[f"Location_MaxIntensity_Y_{name}"] = _rows(table["_argmax_y"] + table["bbox-0"], rows,
                                                   labels.max())
    return out


def _rows(values: np.ndarray, rows: np.ndarray, count: int) -> np.ndarray:
    """Values placed at their object's row, NaN for absent numbers."""
    out = np.full(int(count), np.nan)
    out[rows] = values
    return out


def all_measurements(measure_one: Callable[[np.ndarray, np.ndarray, str], dict[str, Any]],
                     sets: dict[str, np.ndarray], channels: dict[str, np.ndarray]
                     ) -> dict[str, dict[str, Any]]:
    """Every channel in every object set."""
    return {objects: {key: value for channel, image in channels.items()
                      for key, value in measure_one(labels, image, channel).items()}
            for objects, labels in sets.items()}


def memtype_measurements(labels: np.ndarray, image: np.ndarray, name: str) -> dict[str, Any]:
    return measure_intensity(labels, image, image_name=name)


def assert_equal(ours: dict[str, dict[str, Any]], theirs: dict[str, dict[str, Any]]) -> int:
    """Every column equal (rtol 1e-9); returns how many values were compared."""
    compared = 0
    for objects, columns in theirs.items():
        assert sorted(columns) == sorted(ours[objects]), objects
        for key, expected in columns.items():
            np.testing.assert_allclose(ours[objects][key], expected, rtol=1e-9, atol=1e-12,
                                       err_msg=f"{objects} {key}")
            compared += int(np.isfinite(expected).sum())
    return compared


def alternating(fns: list[Callable[[], Any]], rounds: int) -> list[list[float]]:
    """Seconds per call of each function, one call of each per round, in turn."""
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, times in zip(fns, samples, strict=True):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return samples


def run(dtype: str, sets: dict[str, np.ndarray], fields: dict[str, np.ndarray],
        rounds: int) -> tuple[list[float], list[float], int]:
    """Assert the values equal, then time both in alternating rounds."""
    channels = {name: (np.round(field * 4000).clip(0, 65535).astype(np.uint16)
                       if dtype == "uint16" else field.astype(dtype))
                for name, field in fields.items()}
    exact = {name: image.astype(np.float64) for name, image in channels.items()}
    # memtype measures in float64; regionprops sums a float32 image in float32: the values
    # are compared on the float64 copy, the times taken on the channels as they are
    compared = assert_equal(all_measurements(memtype_measurements, sets, channels),
                            all_measurements(regionprops_measurements, sets, exact))
    mine, theirs = alternating(
        [lambda: all_measurements(memtype_measurements, sets, channels),
         lambda: all_measurements(regionprops_measurements, sets, channels)], rounds)
    return mine, theirs, compared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    nuclei, cells = synthetic_field()
    sets = object_sets(nuclei, cells)
    fields = {"DNA": nuclei, "Actin": cells}
    counts = {name: int(labels.max()) for name, labels in sets.items()}
    lines = [
        "# Intensity measurements: memtype vs scikit-image regionprops_table", "",
        f"{datetime.date.today().isoformat()}, {platform.machine()} "
        f"(Python {platform.python_version()}); this project's shared 2-core x86-64 box, "
        f"other jobs running (load average {os.getloadavg()[0]:.1f} at the start). "
        f"`python benchmarks/measurements.py --rounds {args.rounds}`.", "",
        f"One {SIZE}x{SIZE} field, objects {counts}, channels DNA and Actin: all 19 "
        "MeasureObjectIntensity columns per channel and object set, every value asserted "
        "equal (rtol 1e-9) first. Alternating rounds; medians, (min, max) in brackets. "
        "memtype sorts each object's pixels by a least-significant-digit radix sort (NumPy's "
        "stable sort of 16-bit digits): uint16, a camera's values: 2 passes (value, object); "
        "float32 (as after illumination correction): 3; float64 values float32 cannot hold: "
        "5.", "",
        "| channels | values compared | memtype `measure_intensity` s | "
        "`regionprops_table` (+ extra_properties, + edge table) s | ratio of medians | "
        "ratio per round |",
        "|---|---|---|---|---|---|"]
    for dtype in ("uint16", "float32", "float64"):
        mine, theirs, compared = run(dtype, sets, fields, args.rounds)
        ratio = statistics.median(theirs) / statistics.median(mine)
        rounds = ", ".join(f"{t / m:.1f}" for m, t in zip(mine, theirs, strict=True))
        lines.append(
            f"| {dtype} | {compared} | {statistics.median(mine):.3f} ({min(mine):.3f}, "
            f"{max(mine):.3f}) | {statistics.median(theirs):.3f} ({min(theirs):.3f}, "
            f"{max(theirs):.3f}) | **{ratio:.1f}x** | {rounds} |")
    lines += ["", f"Load average at the end: {os.getloadavg()[0]:.1f}."]
    report = "\n".join([*lines, ""])
    RESULT.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
