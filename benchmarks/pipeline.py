"""Pipeline benchmark: the demo pipeline vs the same work written by hand, and inline vs dask.

1. **Overhead.** The demo pipeline (torch percentile normalisation, jax background
   subtraction, NumPy projection, pyclesperanto or scipy median, scipy blob counting; OME-Zarr
   plate and CSV out) run inline by ``Pipeline.run``, against a hand-written script doing the
   same operations with the frameworks directly (tifffile in, zarr and csv out, no memtype).
   Target: at most 1.10x the script's time.
2. **Scaling.** A CPU-heavy pipeline (scipy median and Gaussian filters, projection: single-
   threaded kernels) inline against dask.distributed with 2 worker processes on an already
   started LocalCluster (its start-up is reported apart). Target: at least 1.6x faster.

Both on the demo plate (4 wells x 4 sites x 2 channels x 8 planes of 512 x 512 uint16),
generated once. Medians over ``--repeats`` alternating runs. Writes
``benchmarks/results/pipeline.md``. Run: ``python benchmarks/pipeline.py [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import functools
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch  # import order: torch and pyclesperanto before anything that loads tensorflow

try:
    import pyclesperanto as cle
except ImportError:
    cle = None
import jax
import jax.numpy as jnp
import numpy as np
from scipy import ndimage

from memtype.pipeline import ExecutionOptions, Pipeline, SyntheticPlate, write_synthetic_plate
from memtype.pipeline.demo import demo_pipeline, opencl_available

OUT = Path(__file__).resolve().parent / "results"


# -- the demo's operations, written by hand ------------------------------------------------
def _normalize(x: torch.Tensor) -> torch.Tensor:
    x = x.to(torch.float32)
    flat = x.reshape(-1)
    n = flat.numel()
    lo = torch.kthvalue(flat, int(np.floor(0.01 * (n - 1))) + 1).values
    hi = torch.kthvalue(flat, int(np.floor(0.998 * (n - 1))) + 1).values
    return ((x - lo) / torch.clamp(hi - lo, min=1e-6)).clamp_(0.0, 1.0)


@functools.lru_cache
def _interp(n: int, block: int) -> np.ndarray:
    blocks = -(-n // block)
    centres = (np.arange(blocks) + 0.5) * block
    pos = np.arange(n) + 0.5
    left = np.clip(np.searchsorted(centres, pos) - 1, 0, blocks - 2)
    frac = np.clip((pos - centres[left]) / block, 0.0, 1.0)
    m = np.zeros((n, blocks), np.float32)
    m[np.arange(n), left] = 1.0 - frac
    m[np.arange(n), left + 1] = frac
    return m


_K = np.exp(-np.arange(-3, 4) ** 2 / 2.0)
_K = (_K / _K.sum()).astype(np.float32)


@functools.partial(jax.jit, static_argnames=("block",))
def _background(x: Any, ry: Any, rx: Any, k: Any, block: int) -> Any:
    z, h, w = x.shape
    coarse = x.reshape(z, h // block, block, w // block, block).min(axis=(2, 4))
    y = jnp.maximum(x - jnp.einsum("yi,zij,xj->zyx", ry, coarse, rx), 0.0)
    for axis in (2, 1):
        pad = [(0, 0)] * 3
        pad[axis] = (3, 3)
        p = jnp.pad(y, pad)
        y = sum(k[i] * jax.lax.slice_in_dim(p, i, i + y.shape[axis], axis=axis) for i in range(7))
    return y


def _median(p: np.ndarray) -> np.ndarray:
    if cle is not None and opencl_available():
        out = cle.median(cle.push(p), radius_x=1, radius_y=1, radius_z=0, connectivity="box")
        return np.asarray(cle.pull(out))
    return ndimage.median_filter(p, size=(1, 3, 3), mode="nearest")


def _write_field(root: str, well: str, site: int, image: np.ndarray) -> None:
    import zarr
    from zarr.codecs import BloscCodec

    group = zarr.open_group(root, mode="a")
    arr = group.create_array(f"{well[0]}/{int(well[1:])}/{site}/0", shape=image.shape,
                             dtype=image.dtype, chunks=(1, 1, *image.shape[-2:]),
                             compressors=(BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),),
                             overwrite=True)
    arr[...] = image


def hand_written(images: Path, out: Path, plate: SyntheticPlate) -> None:
    """The demo pipeline without memtype: tifffile in, frameworks by hand, zarr and csv out."""
    import tifffile

    rows = []
    out.mkdir()
    for well in plate.well_names:
        for site in range(1, plate.sites + 1):
            channels = []
            for channel in range(1, plate.channels + 1):
                files = [images / f"{well}_s{site}_w{channel}_z{z:03d}.tif"
                         for z in range(1, plate.z_planes + 1)]
                stack = np.stack([tifffile.imread(f) for f in files])
                x = _normalize(torch.from_numpy(stack))
                n = x.shape[1]
                y = _background(jnp.asarray(x.numpy()), _interp(n, 32), _interp(n, 32), _K,
                                block=32)
                p = _median(np.asarray(y).max(axis=0, keepdims=True))
                labels, _ = ndimage.label(p[0] > 0.2)
                areas = np.bincount(labels.ravel())[1:]
                kept = areas[areas >= 9]
                rows.append([well, site, channel, int(kept.size),
                             round(float(kept.mean()) if kept.size else 0.0, 3)])
                channels.append(p)
            _write_field(str(out / "plate.zarr"), well, site, np.stack(channels))
    with open(out / "counts.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["well", "site", "channel", "count", "mean_area"])
        writer.writerows(rows)


# -- a CPU-heavy pipeline for the scaling comparison ---------------------------------------
def heavy_pipeline() -> Pipeline:
    """benchmarks/pipeline_heavy.py, imported so that dask workers can import it too."""
    from memtype.pipeline.model.modules import import_pipeline_file

    module = import_pipeline_file(Path(__file__).with_name("pipeline_heavy.py"))
    pipeline: Pipeline = module.pipeline
    return pipeline


# -- timing --------------------------------------------------------------------------------
def _timed(fn: Callable[[Path], Any], scratch: Path) -> float:
    out = scratch / f"run-{time.perf_counter_ns()}"
    start = time.perf_counter()
    fn(out)
    elapsed = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    _LOAD.append(os.getloadavg()[0])
    return elapsed


_LOAD: list[float] = []  # 1-minute load average after each run (the machine is shared)


def _alternate(fns: dict[str, Callable[[Path], Any]], repeats: int, scratch: Path
               ) -> dict[str, list[float]]:
    """Warm each up once, then alternate timed runs."""
    for fn in fns.values():
        _timed(fn, scratch)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(_timed(fn, scratch))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    plate = SyntheticPlate()
    scratch = Path(tempfile.mkdtemp(prefix="memtype-bench-"))
    try:
        images = scratch / "images"
        write_synthetic_plate(images, plate)
        demo = demo_pipeline()
        overhead = _alternate({
            "hand-written script": lambda out: hand_written(images, out, plate),
            "Pipeline.run (inline)": lambda out: demo.run(
                images, out, execution=ExecutionOptions(progress=False)),
        }, args.repeats, scratch)
        scaling = _scaling(images, args.repeats, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report = _report(overhead, scaling, args.repeats)
    OUT.mkdir(exist_ok=True)
    (OUT / "pipeline.md").write_text(report)
    print(report)


def _scaling(images: Path, repeats: int, scratch: Path) -> dict[str, list[float]]:
    """Inline vs a warm 2-process LocalCluster, alternating with the machine's raw 2-process
    capacity (the same kernels in a plain process pool); the cluster's start-up apart."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from distributed import Client, LocalCluster

    heavy = heavy_pipeline()
    start = time.perf_counter()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    startup = time.perf_counter() - start
    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))
    try:
        times = _alternate({
            "inline": lambda out: heavy.run(images, out,
                                            execution=ExecutionOptions(progress=False)),
            "dask, 2 workers": lambda out: heavy.run(
                images, out, execution=ExecutionOptions(client=client, progress=False)),
            "raw serial": lambda out: [_kernel(i) for i in range(2)],
            "raw 2 processes": lambda out: list(pool.map(_kernel, range(2))),
        }, repeats, scratch)
    finally:
        pool.shutdown()
        client.close()
        cluster.close()
    times["cluster start-up"] = [startup]
    return times


def _kernel(_: int) -> float:
    """The heavy pipeline's kernels on one synthetic stack, 4 times: seconds taken."""
    x = SyntheticPlate().stack(0, 1, 1)
    start = time.perf_counter()
    for _ in range(4):
        y = ndimage.median_filter(x, size=(1, 3, 3), mode="nearest").astype(np.float32)
        np.maximum(y - ndimage.gaussian_filter(y, sigma=(0, 8, 8)), 0.0).max(axis=0)
    return time.perf_counter() - start


def _rounds(scaling: dict[str, list[float]]) -> tuple[list[float], list[float]]:
    """Per alternation round: dask's speed-up over inline, and two plain processes' over one."""
    speedups = [i / d for i, d in zip(scaling["inline"], scaling["dask, 2 workers"],
                                       strict=True)]
    capacity = [s / p for s, p in zip(scaling["raw serial"], scaling["raw 2 processes"],
                                      strict=True)]
    return speedups, capacity


def _report(overhead: dict[str, list[float]], scaling: dict[str, list[float]],
            repeats: int) -> str:
    med = {k: statistics.median(v) for k, v in {**overhead, **scaling}.items()}
    ratio = med["Pipeline.run (inline)"] / med["hand-written script"]
    speedups, capacity = _rounds(scaling)
    free = [s for s, c in zip(speedups, capacity, strict=True) if c >= 1.6]
    relative = statistics.median(s / c for s, c in zip(speedups, capacity, strict=True))
    cle_note = "pyclesperanto (pocl, CPU)" if opencl_available() else "scipy"
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, no GPU; "
        f"{datetime.date.today().isoformat()}. Demo plate: 4 wells x 4 sites x 2 channels x "
        f"8 planes of 512 x 512 uint16 (256 TIFF files, 128 MiB); median of {repeats} "
        "alternating runs after one warm-up each. The machine is shared with other jobs: "
        f"1-minute load average {min(_LOAD):.1f} to {max(_LOAD):.1f} during the runs.",
        "",
        "| comparison | memtype | reference | ratio | target |",
        "|---|---:|---:|---:|---|",
        f"| demo pipeline (torch, jax, numpy, {cle_note}), OME-Zarr + CSV out: "
        f"`Pipeline.run` inline vs the same operations hand-written | "
        f"{med['Pipeline.run (inline)']:.2f} s | {med['hand-written script']:.2f} s | "
        f"{ratio:.2f}x time | <= 1.10x |",
        f"| CPU-heavy pipeline (scipy median 3x3, Gaussian background, projection; "
        f"16 tasks): dask 2 workers vs inline, all rounds | {med['dask, 2 workers']:.2f} s | "
        f"{med['inline']:.2f} s | {statistics.median(speedups):.2f}x faster | >= 1.6x |",
        f"| the same, rounds in which the machine offered two free cores "
        f"({len(free)} of {len(speedups)}) | | | "
        + (f"{statistics.median(free):.2f}x faster" if free else "n/a") + " | >= 1.6x |",
        f"| the machine's own capacity: the same kernels in 2 plain processes vs 1 (no "
        f"memtype, no dask) | {med['raw 2 processes']:.2f} s | {med['raw serial']:.2f} s "
        f"| {statistics.median(capacity):.2f}x faster | (reference) |",
        "",
        f"Per round, dask's speed-up is {relative:.0%} (median) of what two plain processes "
        "gain in the same round. Rounds (dask speed-up / plain 2-process speed-up): "
        + ", ".join(f"{s:.2f}/{c:.2f}" for s, c in zip(speedups, capacity, strict=True)) + ".",
        "",
        f"LocalCluster start-up (2 worker processes, once per run when no client is given): "
        f"{med['cluster start-up']:.2f} s. All runs: "
        + "; ".join(f"{k}: " + ", ".join(f"{t:.2f}" for t in v)
                    for k, v in {**overhead, **scaling}.items()) + " (seconds).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
