"""The function catalog (issue 25): a nuclei pipeline of catalog operations, planned over
NumPy + pyclesperanto + torch, vs the same pipeline fixed to scikit-image / NumPy.

Steps: background subtraction (white top-hat), Gaussian, Otsu mask, connected-component
labels, small-object removal, then per-label statistics (a table), all catalog operations.
``plan``: ``Pipeline.run`` plans each operation's implementation; ``fixed``: every operation
forced to its NumPy (scikit-image) implementation with
``FunctionStep.with_implementation("numpy")``; ``opencl``: all in pyclesperanto. All run
inline on the same synthetic plate; wall time (median over alternating rounds) and bytes
converted (the run report's step statistics) are printed with the machine and date. Object
counts must agree.
Also times listing the catalog in a fresh process.
Run: ``python benchmarks/catalog.py [--repeats 5] [--wells 4] [--size 512] [--z 8]``.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch  # noqa: F401  (import order: torch and pyclesperanto before anything else)

from memtype.frameworks import load_adapter
from memtype.pipeline import (
    FunctionStep,
    Pipeline,
    RunReport,
    SyntheticPlate,
    catalog,
    write_synthetic_plate,
)

load_adapter("pyclesperanto")


WAYS = {"plan": None, "fixed": "numpy", "opencl": "pyclesperanto"}


def steps(way: str) -> list[FunctionStep]:
    """The nuclei pipeline: planned, or every operation forced to one framework."""
    ops = [catalog.operation("white_tophat", radius=7), catalog.operation("gaussian", sigma=1),
           catalog.operation("threshold_otsu"), catalog.operation("label"),
           catalog.operation("remove_small_objects", min_size=9, materialize=True),
           catalog.operation("label_statistics", outputs=("objects",))]
    forced = WAYS[way]
    if forced is not None:
        ops = [op.with_implementation(forced) for op in ops]
    return ops


def run(plate: Path, out: Path, way: str) -> tuple[float, int, int, RunReport]:
    """(seconds, bytes copied, objects, report) of one run."""
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    report = Pipeline(steps(way)).run(plate, out)
    seconds = time.perf_counter() - start
    report.raise_for_failures()
    copied = sum(s.bytes_converted for s in report.steps)
    objects = sum(1 for _ in open(report.outputs["objects"], encoding="utf-8")) - 1
    return seconds, copied, objects, report


def listing_ms(repeats: int) -> tuple[float, float]:
    """Median ms of a fresh process listing the catalog, and of one importing memtype.pipeline."""
    def once(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return (time.perf_counter() - start) * 1e3

    both = [(once("import memtype.pipeline.catalog as c; c.entries()"),
             once("import memtype.pipeline")) for _ in range(repeats)]
    return statistics.median(b[0] for b in both), statistics.median(b[1] for b in both)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--wells", type=int, default=4)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--z", type=int, default=8)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="memtype-catalog-bench-"))
    try:
        plate = tmp / "plate"
        write_synthetic_plate(plate, SyntheticPlate(wells=args.wells, sites=1, channels=1,
                                                    z_planes=args.z, size=args.size))
        results: dict[str, list[tuple[float, int, int]]] = {way: [] for way in WAYS}
        for way in WAYS:  # warm-up: imports, OpenCL kernel compilation
            run(plate, tmp / way, way)
        for r in range(args.repeats):
            for way in (list(WAYS) if r % 2 == 0 else list(WAYS)[::-1]):
                seconds, copied, objects, _ = run(plate, tmp / way, way)
                results[way].append((seconds, copied, objects))
        _, _, _, report = run(plate, tmp / "plan", "plan")
        choices = report.plan.choices if report.plan is not None else {}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"# catalog benchmark, {datetime.date.today()}, {platform.machine()}, "
          f"{platform.processor() or platform.platform()}, Python {platform.python_version()}")
    print(f"plate: {args.wells} wells x {args.z} planes of {args.size}^2 uint16, inline, "
          f"{args.repeats} alternating rounds; plan chose {choices}")
    for way, rows in results.items():
        print(f"{way:6} median {statistics.median(r[0] for r in rows):.3f} s, converted "
              f"{statistics.median(r[1] for r in rows) / 2**20:.1f} MiB, objects "
              f"{sorted({r[2] for r in rows})}")
    plan_s = statistics.median(r[0] for r in results["plan"])
    fixed_s = statistics.median(r[0] for r in results["fixed"])
    print(f"fixed / plan time: {fixed_s / plan_s:.2f}x")
    listed, base = listing_ms(args.repeats)
    print(f"fresh process: list the catalog {listed:.0f} ms; import memtype.pipeline alone "
          f"{base:.0f} ms (the catalog's own share: {listed - base:.0f} ms)")


if __name__ == "__main__":
    main()
