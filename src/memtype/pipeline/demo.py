"""The demo: a synthetic plate through a mixed-framework pipeline, to OME-Zarr, CSV and PNG.

Steps (one memory type each; data moves between them zero-copy where the frameworks allow):

1. ``normalize`` (torch): percentile normalisation of each z-stack to [0, 1];
2. ``subtract_background`` (jax): block-minimum background, bilinearly interpolated and
   subtracted, then a small Gaussian smoothing;
3. ``max_project`` (numpy): maximum projection over z;
4. ``denoise`` (pyclesperanto when an OpenCL device is present, else scipy on NumPy): a 3x3
   median filter (both give identical values);
5. ``segment_nuclei`` (numpy): the nuclei (channel 1) thresholded into a label image,
   written as the OME-Zarr labels ``nuclei`` of each field, with one row per nucleus
   (``label``, ``area``, ``centroid_y``, ``centroid_x``, ``mean_intensity``) in
   ``nuclei.csv``; the step passes its input on (``passes_input=True``);
6. ``count_blobs`` (numpy): threshold and connected components; the counts are a side
   output, written as ``counts.csv``.

Everything here is deterministic, so tests and benchmarks recompute it independently.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtype import DtypeConversion, memory_types, require
from memtype.errors import StoreExistsError, StorePathError
from memtype.frameworks import DeviceAdapter, diagnostics, get_framework, load_adapter
from memtype.pipeline.execution.report import RunReport
from memtype.pipeline.io.patterns import split_well
from memtype.pipeline.io.tables import parse_table
from memtype.pipeline.model.options import ExecutionOptions, WriteOptions
from memtype.pipeline.model.pipeline import Pipeline
from memtype.pipeline.model.steps import FunctionStep
from memtype.pipeline.model.variants import Variants
from memtype.pipeline.synthetic import SyntheticPlate, write_synthetic_plate
from memtype.storage import DiskStore

__all__ = [
    "normalize",
    "subtract_background",
    "max_project",
    "max_project_jax",
    "max_project_cle",
    "denoise_cle",
    "denoise_numpy",
    "count_blobs",
    "segment_nuclei",
    "opencl_available",
    "opencl_missing",
    "demo_pipeline",
    "run_demo",
    "DemoResult",
    "interpolation_matrix",
    "gaussian_kernel",
    "write_montage",
    "DEMO_MARKER",
    "check_demo_output",
]


DEMO_MARKER = ".memtype-demo.json"
"""Marks a directory written by the demo (which the demo may replace)."""


def _lower_rank(q: float, n: int) -> int:
    """The 1-based rank of the q-th percentile of n values (NumPy's ``method="lower"``)."""
    return int(np.floor(q / 100.0 * (n - 1))) + 1


@memory_types("torch", "torch", copy_inputs=False)  # it never writes its input
def normalize(stack: Any, low: float = 1.0, high: float = 99.8) -> Any:
    """Map the ``low``..``high`` percentiles of a stack to 0..1, clipped (float32)."""
    import torch

    x = stack.to(torch.float32)
    flat = x.reshape(-1)
    lo = torch.kthvalue(flat, _lower_rank(low, flat.numel())).values
    hi = torch.kthvalue(flat, _lower_rank(high, flat.numel())).values
    return ((x - lo) / torch.clamp(hi - lo, min=1e-6)).clamp_(0.0, 1.0)


@functools.lru_cache(maxsize=32)
def interpolation_matrix(n: int, block: int) -> np.ndarray[Any, Any]:
    """Bilinear weights ``[n, blocks]`` from block centres to pixel centres, clamped at edges."""
    blocks = -(-n // block)
    if blocks == 1:
        return np.ones((n, 1), np.float32)
    centres = (np.arange(blocks) + 0.5) * block
    pos = np.arange(n) + 0.5
    left = np.clip(np.searchsorted(centres, pos) - 1, 0, blocks - 2)
    frac = np.clip((pos - centres[left]) / block, 0.0, 1.0)
    m = np.zeros((n, blocks), np.float32)
    m[np.arange(n), left] = 1.0 - frac
    m[np.arange(n), left + 1] = frac
    return m


@functools.lru_cache(maxsize=8)
def gaussian_kernel(sigma: float) -> np.ndarray[Any, Any]:
    """A normalised 1D Gaussian of radius ``ceil(3 sigma)`` (float32)."""
    radius = max(1, int(np.ceil(3 * sigma)))
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    k = np.exp(-(x ** 2) / (2 * sigma ** 2))
    out: np.ndarray[Any, Any] = (k / k.sum()).astype(np.float32)
    return out


@functools.lru_cache(maxsize=1)
def _background_kernel() -> Callable[..., Any]:
    """The jitted jax core of :func:`subtract_background` (built on first use)."""
    import jax
    import jax.numpy as jnp

    def smooth(y: Any, k: Any, axis: int) -> Any:
        r = k.shape[0] // 2
        pad = [(0, 0)] * 3
        pad[axis] = (r, r)
        p = jnp.pad(y, pad)
        n = y.shape[axis]
        return sum(k[i] * jax.lax.slice_in_dim(p, i, i + n, axis=axis) for i in range(k.shape[0]))

    @functools.partial(jax.jit, static_argnames=("block",))
    def core(x: Any, ry: Any, rx: Any, k: Any, block: int) -> Any:
        z, h, w = x.shape
        ph, pw = -h % block, -w % block
        padded = jnp.pad(x, ((0, 0), (0, ph), (0, pw)), mode="edge")
        coarse = padded.reshape(z, (h + ph) // block, block, (w + pw) // block, block)
        coarse = coarse.min(axis=(2, 4))
        background = jnp.einsum("yi,zij,xj->zyx", ry, coarse, rx)
        y = jnp.maximum(x - background, 0.0)
        return smooth(smooth(y, k, 2), k, 1)

    return core


@memory_types("jax", "jax")
def subtract_background(stack: Any, block: int = 32, sigma: float = 1.0) -> Any:
    """Subtract a smooth background (block minima, bilinear) from each plane; then smooth."""
    _, h, w = stack.shape
    core = _background_kernel()
    return core(stack, interpolation_matrix(h, block), interpolation_matrix(w, block),
                gaussian_kernel(sigma), block=block)


@memory_types("numpy", "numpy")
def max_project(stack: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The maximum over z, as a one-plane stack."""
    out: np.ndarray[Any, Any] = np.max(stack, axis=0, keepdims=True)
    return out


@memory_types("jax", "jax")
def max_project_jax(stack: Any) -> Any:
    """The maximum over z, as a one-plane stack, in JAX."""
    return stack.max(axis=0, keepdims=True)


@memory_types("pyclesperanto", "pyclesperanto", copy_inputs=False)
def max_project_cle(stack: Any) -> Any:
    """The maximum over z, as a one-plane stack, on the OpenCL device."""
    import pyclesperanto as cle

    _, h, w = stack.shape
    plane = cle.create((1, h, w), dtype=stack.dtype)  # its own result is 2D: keep [Z, Y, X]
    return cle.maximum_z_projection(stack, plane)


@memory_types("pyclesperanto", "pyclesperanto", copy_inputs=False)
def denoise_cle(stack: Any) -> Any:
    """A 3x3 median filter in each plane, on the OpenCL device."""
    import pyclesperanto as cle

    return cle.median(stack, radius_x=1, radius_y=1, radius_z=0, connectivity="box")


@memory_types("numpy", "numpy")
def denoise_numpy(stack: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A 3x3 median filter in each plane (edges repeated), with scipy."""
    ndimage = require("scipy.ndimage", "The demo pipeline")

    return np.asarray(ndimage.median_filter(stack, size=(1, 3, 3), mode="nearest"))


@memory_types("numpy", "numpy")
def count_blobs(stack: np.ndarray[Any, Any], threshold: float = 0.2,
                min_area: int = 9) -> tuple[np.ndarray[Any, Any], dict[str, float]]:
    """Count connected regions above ``threshold`` of at least ``min_area`` pixels."""
    ndimage = require("scipy.ndimage", "The demo pipeline")

    labels, _ = ndimage.label(stack[0] > threshold)
    areas = np.bincount(labels.ravel())[1:]
    kept = areas[areas >= min_area]
    mean_area = float(kept.mean()) if kept.size else 0.0
    return stack, {"count": int(kept.size), "mean_area": round(mean_area, 3)}


@memory_types("numpy", "numpy")
def segment_nuclei(stack: np.ndarray[Any, Any], threshold: float = 0.2, min_area: int = 9,
                   ) -> tuple[np.ndarray[Any, Any], list[dict[str, float]]]:
    """Label the nuclei of a ``[C, Y, X]`` stack's first channel (as :func:`count_blobs`
    counts them: regions above ``threshold`` of at least ``min_area`` pixels, ids 1..n);
    returns the ``[1, Y, X]`` uint16 label image and one row per nucleus."""
    ndimage = require("scipy.ndimage", "The demo pipeline")

    plane = stack[0]
    labels, n = ndimage.label(plane > threshold)
    areas = np.bincount(labels.ravel(), minlength=n + 1)
    kept = np.flatnonzero(areas[1:] >= min_area) + 1
    ids = np.zeros(n + 1, np.uint16)
    ids[kept] = np.arange(1, kept.size + 1)
    out = ids[labels]
    index = np.arange(1, kept.size + 1)
    centres = ndimage.center_of_mass(np.ones_like(plane), out, index)
    means = ndimage.mean(plane, out, index)
    rows = [{"label": int(i), "area": int(areas[k]), "centroid_y": round(float(c[0]), 2),
             "centroid_x": round(float(c[1]), 2), "mean_intensity": round(float(m), 4)}
            for i, k, c, m in zip(index, kept, centres, np.atleast_1d(means), strict=True)]
    return out[None], rows


def opencl_missing() -> str:
    """Why the demo cannot use pyclesperanto here ("" when it can)."""
    if importlib.util.find_spec("pyclesperanto") is None:
        return f"pyclesperanto is not installed ({get_framework('pyclesperanto').install_hint})"
    adapter = load_adapter("pyclesperanto")
    if isinstance(adapter, DeviceAdapter) and adapter.gpu_count() > 0:
        return ""
    return diagnostics(adapter).no_device_reason() or "pyclesperanto sees no OpenCL device"


def opencl_available() -> bool:
    """Whether pyclesperanto is installed and sees an OpenCL device."""
    return not opencl_missing()


def demo_pipeline(use_opencl: bool | None = None) -> Pipeline:
    """The demo pipeline (``use_opencl``: the pyclesperanto median; default when available)."""
    cle = opencl_available() if use_opencl is None else use_opencl
    return Pipeline([
        FunctionStep(normalize, dtype_conversion=DtypeConversion.NATIVE_OUTPUT),
        FunctionStep(subtract_background, block=32, sigma=1.0),
        # three implementations: the planner projects where the data already is (JAX), so
        # only one plane, not the whole stack, crosses to the OpenCL device for the median
        FunctionStep(Variants({"jax": max_project_jax, "numpy": max_project,
                               **({"pyclesperanto": max_project_cle} if cle else {})}),
                     name="max_project"),
        FunctionStep(denoise_cle if cle else denoise_numpy, name="denoise"),
        # the nuclei as OME-Zarr labels beside the images, one row per nucleus; the
        # denoised channels, not the labels, go on to the count
        FunctionStep(segment_nuclei, variable_components=("channel",), labels="nuclei",
                     passes_input=True, outputs=("nuclei",), threshold=0.2, min_area=9,
                     dtype_conversion=DtypeConversion.NATIVE_OUTPUT),
        FunctionStep(count_blobs, outputs=("counts",), threshold=0.2, min_area=9),
    ], name="demo")


@dataclass
class DemoResult:
    """What the demo wrote, and how well it counted."""

    report: RunReport
    images: str
    plate: str
    counts: str
    montage: str
    counted: int
    true_cells: int


def _tile(field: np.ndarray[Any, Any], step: int) -> np.ndarray[Any, Any]:
    """An RGB uint8 tile of a ``[C, Z, Y, X]`` field: channel 1 magenta, channel 2 green."""
    planes = np.clip(field[:, 0, ::step, ::step], 0.0, 1.0)
    nuclei, bodies = planes[0], planes[-1]
    rgb = np.stack([nuclei, 0.6 * bodies, nuclei], axis=-1)
    return (rgb * 255).round().astype(np.uint8)


def write_montage(plate_path: str, wells: list[str], sites: int, png_path: str,
                  tile: int = 256) -> None:
    """A PNG of every field of a plate: one row per well, one column per site."""
    from memtype.storage import ZarrStore  # imports zarr (optional), for the montage only

    plate = ZarrStore(plate_path, read_only=True)
    rows = []
    for well in wells:
        row, column = split_well(well)
        fields = [plate.load(plate.field_path(row, column, s)) for s in range(1, sites + 1)]
        step = max(1, fields[0].shape[-1] // tile)
        rows.append(np.concatenate([_tile(f, step) for f in fields], axis=1))
    directory, name = os.path.split(os.path.abspath(png_path))
    DiskStore(directory).save(np.concatenate(rows, axis=0), name, overwrite=True)


def check_demo_output(out: str | os.PathLike[str], *, overwrite: bool = False) -> None:
    """Refuse a demo output that is a file, or a non-empty directory without an earlier demo.

    Raises
    ------
    StorePathError
        ``out`` is a file (a ``ValueError``).
    StoreExistsError
        ``out`` holds something other than an earlier demo and ``overwrite`` is false
        (a ``FileExistsError``).
    """
    path = os.path.abspath(os.fspath(out))
    if os.path.exists(path) and not os.path.isdir(path):
        raise StorePathError(f"Demo output {os.fspath(out)!r} is a file; expected a directory.")
    if (os.path.isdir(path) and os.listdir(path) and not overwrite
            and not os.path.exists(os.path.join(path, DEMO_MARKER))):
        raise StoreExistsError(f"Demo output {os.fspath(out)!r} exists and does not hold an "
                               "earlier demo; choose another directory or pass --overwrite "
                               "(overwrite=True), which deletes everything in it.")


def run_demo(out: str | os.PathLike[str], plate: SyntheticPlate | None = None, *,
             execution: ExecutionOptions | None = None, use_opencl: bool | None = None,
             overwrite: bool = False) -> DemoResult:
    """Generate the synthetic plate under ``out/images``, run the demo pipeline into
    ``out/results`` (``plate.zarr`` with the ``nuclei`` labels, ``counts.csv``,
    ``nuclei.csv``) and write ``out/results/montage.png``; ``execution`` says where and how
    (:class:`~memtype.pipeline.model.options.ExecutionOptions`, inline by default).

    ``out`` is replaced if it holds an earlier demo; a directory holding anything else is
    refused (:func:`check_demo_output`) unless ``overwrite`` is true.
    """
    check_demo_output(out, overwrite=overwrite)
    plate = plate or SyntheticPlate()
    root = DiskStore(os.fspath(out))
    root.delete_all("")
    root.save({"memtype": "demo", "plate": repr(plate)}, DEMO_MARKER)
    images = root.path_of("images")
    write_synthetic_plate(images, plate)
    results = root.path_of("results")
    report = demo_pipeline(use_opencl).run(images, results, execution=execution,
                                           write=WriteOptions(plate=plate.layout.size))
    plate_path = report.outputs.get("images", os.path.join(results, "plate.zarr"))
    montage = os.path.join(results, "montage.png")
    if report.ok:
        write_montage(plate_path, plate.well_names, plate.sites, montage)
    counts = report.outputs.get("counts", os.path.join(results, "counts.csv"))
    rows = parse_table(DiskStore(results).load("counts.csv")) if report.ok else []
    counted = sum(int(r["count"]) for r in rows if r.get("channel") == "1")
    return DemoResult(report, images, plate_path, counts, montage, counted,
                      sum(plate.cell_counts.values()))
