"""End to end against the peer (issue 25 §5): one nuclei pipeline on one ImageXpress plate,
run by openhcs 0.8.6 (its own venv) and by memtype (catalog operations, planned).

The plate: memtype's synthetic nuclei (``SyntheticPlate``: blobs in focus at their own plane,
uneven background, noise, a known number of cells per site) written in the ImageXpress layout
(``<plate>.HTD`` beside ``TimePoint_1/ZStep_<z>/BENCH_<well>_s<site>_w<channel>.TIF``), read by
both systems' ImageXpress readers.

The pipeline, on the z-stack of each (well, site, channel), the same computation in both:
white top-hat (a (2r+1)^2 box per plane, edges ``nearest``), Gaussian (per plane), Otsu
threshold of the stack, 3D connected components (full connectivity), small-object removal,
one row per object (label, area, centroid). memtype: ``catalog.operation`` steps, planned
(the plan keeps every step in NumPy on this CPU-only machine: the data is there). openhcs:
scikit-image's ``gaussian`` from its function registry (``slice_by_slice=True``) and two user
functions in its idiom calling the same scikit-image functions (benchmarks/openhcs_e2e_peer.py
says why).

Systems, each run in a fresh process (alternating order, after one warm-up round):
``openhcs`` (its orchestrator, ``num_workers`` processes), ``memtype-dask``
(``executor="dask", workers=N``: memtype starts its LocalCluster) and ``memtype-inline``.
Measured: wall time of the whole process (start-up included) and of the run alone (openhcs:
initialise + compile + execute; memtype: ``Pipeline.run``), peak memory as the sum over the
process tree of each process's VmHWM (sampled every 50 ms) and the peak of the tree's summed
RSS. Object counts per (well, site, channel) must be identical between systems.

Usage (openhcs's venv: benchmarks/openhcs_venv.sh)::

    python benchmarks/openhcs_e2e.py --rounds 3 --wells 24            # writes the table
    python benchmarks/openhcs_e2e.py --rounds 1 --wells 4 --no-write  # a quick look
    python benchmarks/openhcs_e2e.py --profile --wells 4              # cProfile, memtype inline
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PEER = Path(__file__).resolve().parent / "openhcs_e2e_peer.py"
RESULTS = REPO / "benchmarks" / "results" / "openhcs_e2e.md"
SYSTEMS = ("openhcs", "memtype-dask", "memtype-inline", "memtype-numpy")
"""``memtype-numpy``: inline, every operation fixed to its NumPy implementation (what the plan
chooses here anyway), so that no other framework is imported: the cost of the others."""


# -- the plate -------------------------------------------------------------------------------

def write_plate(root: Path, wells: int, sites: int, channels: int, z: int, size: int) -> int:
    """The synthetic plate in the ImageXpress layout; returns the number of files."""
    import tifffile

    from memtype.pipeline import SyntheticPlate

    plate = SyntheticPlate(wells=wells, sites=sites, channels=channels, z_planes=z, size=size,
                           plate=384)
    for plane in range(1, z + 1):
        (root / "TimePoint_1" / f"ZStep_{plane}").mkdir(parents=True, exist_ok=True)
    count = 0
    for wi, well in enumerate(plate.well_names):
        for site in range(1, sites + 1):
            for channel in range(1, channels + 1):
                for plane, image in enumerate(plate.stack(wi, site, channel), start=1):
                    name = f"BENCH_{well}_s{site}_w{channel}.TIF"
                    tifffile.imwrite(root / "TimePoint_1" / f"ZStep_{plane}" / name, image)
                    count += 1
    waves = "".join(f'"WaveName{c}", "{("DAPI", "FITC")[c - 1]}"\r\n'
                    for c in range(1, channels + 1))
    (root / "BENCH.HTD").write_text(
        '"HTSInfoFile", Version 1.0\r\n"XWells", 24\r\n"YWells", 16\r\n"Sites", TRUE\r\n'
        f'"XSites", {sites}\r\n"YSites", 1\r\n"SiteSelection1", '
        + ", ".join(["TRUE"] * sites) + f'\r\n"Waves", TRUE\r\n"NWavelengths", {channels}\r\n'
        + waves + f'"ZSeries", TRUE\r\n"ZSteps", {z}\r\n"PixelSizeUM", 0.65\r\n"EndFile"\r\n')
    return count


# -- memtype's side (run in a fresh process: --run-memtype) -----------------------------------

def memtype_pipeline(radius: int, sigma: float, min_size: int, fixed: bool = False) -> Any:
    """The nuclei pipeline of catalog operations (``fixed``: each in its NumPy one)."""
    from memtype.pipeline import Pipeline, catalog

    steps = [
        catalog.operation("white_tophat", radius=radius),
        catalog.operation("gaussian", sigma=sigma),
        catalog.operation("threshold_otsu"),
        catalog.operation("label"),
        catalog.operation("remove_small_objects", min_size=min_size),
        catalog.operation("label_statistics", outputs=("nuclei",)),
    ]
    return Pipeline([s.with_implementation("numpy") for s in steps] if fixed else steps)


def run_memtype(args: argparse.Namespace) -> None:
    """One memtype run in this process; writes times, counts and step seconds as JSON."""
    start = time.perf_counter()
    pipeline = memtype_pipeline(args.radius, args.sigma, args.min_size, args.fixed)
    from memtype.pipeline import ExecutionOptions, WriteOptions  # loaded by the line above

    mark = time.perf_counter()
    report = pipeline.run(args.plate, args.out,
                          execution=ExecutionOptions(args.executor, workers=args.workers,
                                                     progress=False),
                          write=WriteOptions(overwrite=True))
    run = time.perf_counter() - mark
    report.raise_for_failures()
    counts: Counter[str] = Counter()
    with open(report.outputs["nuclei"], newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            counts[f"{row['well']}/{row['site']}/{row['channel']}"] += 1
    plan = report.plan.choices if report.plan is not None else {}
    Path(args.json).write_text(json.dumps({
        "times": {"run": run, "total": time.perf_counter() - start},
        "counts": dict(counts), "plan": {k: str(v) for k, v in plan.items()},
        "steps": {s.name: s.seconds for s in report.steps}}))


# -- measuring a process tree -----------------------------------------------------------------

def _hwm(pid: int) -> int:
    """VmHWM of a process in bytes (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


class TreeSampler:
    """Polls a process and its descendants: each one's VmHWM and the tree's summed RSS."""

    def __init__(self, pid: int, every: float = 0.05) -> None:
        self.pid, self.every = pid, every
        self.hwm: dict[int, int] = {}
        self.peak_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        import psutil

        root = psutil.Process(self.pid)
        while not self._stop.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            rss = 0
            for proc in tree:
                try:
                    rss += proc.memory_info().rss
                except psutil.Error:
                    continue
                self.hwm[proc.pid] = max(self.hwm.get(proc.pid, 0), _hwm(proc.pid))
            self.peak_rss = max(self.peak_rss, rss)
            self._stop.wait(self.every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def measured(command: list[str], log: Path) -> dict[str, Any]:
    """Run ``command`` to its end: wall seconds, summed VmHWM and peak tree RSS (bytes)."""
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        sampler = TreeSampler(proc.pid)
        code = proc.wait()
    wall = time.perf_counter() - start
    sampler.stop()
    if code != 0:
        raise RuntimeError(f"{command[:3]} exited {code}; its log: {log}")
    return {"wall": wall, "hwm_sum": sum(sampler.hwm.values()), "peak_rss": sampler.peak_rss,
            "processes": len(sampler.hwm)}


def one_run(system: str, args: argparse.Namespace, plate: Path, tmp: Path) -> dict[str, Any]:
    """One fresh-process run of ``system``: measurements, its own times and counts."""
    result = tmp / f"{system}.json"
    common = ["--radius", str(args.radius), "--sigma", str(args.sigma),
              "--min-size", str(args.min_size), "--json", str(result)]
    if system == "openhcs":
        shutil.rmtree(str(plate) + "_openhcs", ignore_errors=True)
        command = [args.openhcs_python, str(PEER), str(plate), "--workers", str(args.workers),
                   *common]
    else:
        executor = "dask" if system == "memtype-dask" else "inline"
        fixed = ["--fixed"] if system == "memtype-numpy" else []
        command = [sys.executable, __file__, "--run-memtype", str(plate), "--out",
                   str(tmp / "memtype-out"), "--executor", executor,
                   "--workers", str(args.workers), *fixed, *common]
    load = os.getloadavg()[0]
    row = measured(command, tmp / f"{system}.log")
    data = json.loads(result.read_text())
    row.update(system=system, load=load, run=data["times"].get("run", sum(
        data["times"].get(k, 0.0) for k in ("initialize", "compile", "execute"))),
        counts=data["counts"], own=data["times"], steps=data.get("steps", {}),
        plan=data.get("plan", {}))
    if system == "openhcs":
        row["steps"] = openhcs_steps(tmp / f"{system}.log")
    return row


def openhcs_steps(log: Path) -> dict[str, float]:
    """Seconds per step summed over wells (execute + finalize), from openhcs's log lines
    ``FunctionStep 1 (gaussian) completed for axis A02 in 0.907s (execute=..., ...)``."""
    import re

    line = re.compile(r"FunctionStep \d+ \((\w+)\) completed for axis \S+ in ([\d.]+)s")
    steps: dict[str, float] = {}
    for match in line.finditer(log.read_text(encoding="utf-8", errors="replace")):
        steps[match[1]] = steps.get(match[1], 0.0) + float(match[2])
    return steps


# -- the report -------------------------------------------------------------------------------

def _median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def table(runs: list[dict[str, Any]], args: argparse.Namespace, files: int,
          systems: tuple[str, ...]) -> str:
    """The markdown report: medians, ratios to openhcs, identical counts, per-step seconds."""
    by = {s: [r for r in runs if r["system"] == s] for s in systems}
    counts = {s: by[s][0]["counts"] for s in systems}
    reference = counts[systems[0]]
    same = all(c == reference for c in counts.values())
    mib = 2 ** 20
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    cpu = platform.processor() or platform.machine()
    lines = [
        f"# memtype vs openhcs 0.8.6, end to end ({when})",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} cores, {cpu}, "
        f"Python {platform.python_version()}; load average (1 min) at the runs' starts: "
        f"{min(r['load'] for r in runs):.1f}-{max(r['load'] for r in runs):.1f}.",
        f"Plate: ImageXpress, {args.wells} wells x {args.sites} sites x {args.channels} "
        f"channel(s) x {args.z} planes of {args.size} x {args.size} uint16 ({files} TIFFs); "
        f"pipeline: white top-hat r={args.radius}, Gaussian sigma={args.sigma}, Otsu, label, "
        f"remove objects < {args.min_size} voxels, per-object table; {args.workers} workers; "
        f"{args.rounds} alternating rounds of fresh processes after a warm-up round; medians.",
        "",
        "| system | process wall s | run s | x openhcs (process) | x openhcs (run) | "
        "sum of VmHWM MiB | peak tree RSS MiB | memory / openhcs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = by[systems[0]]
    for s in systems:
        rows = by[s]
        lines.append(
            f"| {s} | {_median(rows, 'wall'):.1f} | {_median(rows, 'run'):.1f} | "
            f"{_median(base, 'wall') / _median(rows, 'wall'):.2f} | "
            f"{_median(base, 'run') / _median(rows, 'run'):.2f} | "
            f"{_median(rows, 'hwm_sum') / mib:.0f} | {_median(rows, 'peak_rss') / mib:.0f} | "
            f"{_median(rows, 'hwm_sum') / _median(base, 'hwm_sum'):.2f} |")
    total = sum(reference.values())
    lines += ["", f"Objects: {total} in {len(reference)} stacks; per (well, site, channel) "
              f"{'identical in every system' if same else 'DIFFERENT: ' + repr(counts)}.", ""]
    lines.append("Seconds per step, summed over groups (worker time; first timed round):")
    lines.append("")
    for s in systems:
        steps = by[s][0]["steps"]
        lines.append(f"- {s}: " + ", ".join(f"{k} {v:.1f}" for k, v in steps.items()))
    lines.append("")
    lines.append("Rounds (process wall s / sum of VmHWM MiB / load):")
    lines.append("")
    for s in systems:
        lines.append(f"- {s}: " + ", ".join(
            f"{r['wall']:.1f}/{r['hwm_sum'] / mib:.0f}/{r['load']:.1f}" for r in by[s]))
    openhcs_own = by[systems[0]][0]["own"] if systems[0] == "openhcs" else {}
    if openhcs_own:
        lines += ["", "openhcs's own phases (first timed round, s): " + ", ".join(
            f"{k} {v:.1f}" for k, v in openhcs_own.items())]
    return "\n".join(lines) + "\n"


def profile(args: argparse.Namespace, plate: Path, tmp: Path) -> None:
    """cProfile of memtype's inline run: the 25 functions with the most cumulative time."""
    import cProfile
    import pstats

    from memtype.pipeline import ExecutionOptions, WriteOptions

    pipeline = memtype_pipeline(args.radius, args.sigma, args.min_size)
    pipeline.run(plate, tmp / "warm", execution=ExecutionOptions(progress=False),
                 write=WriteOptions(overwrite=True))
    profiler = cProfile.Profile()
    profiler.enable()
    pipeline.run(plate, tmp / "prof", execution=ExecutionOptions(progress=False),
                 write=WriteOptions(overwrite=True))
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--wells", type=int, default=24)
    parser.add_argument("--sites", type=int, default=4)
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("--z", type=int, default=5)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--radius", type=int, default=7)
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--min-size", type=int, default=30)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--openhcs-python", default="/tmp/ohcs/bin/python")
    parser.add_argument("--no-write", action="store_true", help="print, do not write results")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--run-memtype", metavar="PLATE", dest="plate", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--executor", default="inline", help=argparse.SUPPRESS)
    parser.add_argument("--json", help=argparse.SUPPRESS)
    parser.add_argument("--fixed", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plate is not None:
        run_memtype(args)
        return
    systems = tuple(args.systems.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="memtype-openhcs-e2e-"))
    try:
        plate = tmp / "plate"
        files = write_plate(plate, args.wells, args.sites, args.channels, args.z, args.size)
        if args.profile:
            profile(args, plate, tmp)
            return
        for system in systems:  # warm-up: caches, openhcs's registry and plate metadata
            one_run(system, args, plate, tmp)
        runs = []
        for r in range(args.rounds):
            for system in (systems if r % 2 == 0 else systems[::-1]):
                runs.append(one_run(system, args, plate, tmp))
                print(f"round {r + 1} {system}: {runs[-1]['wall']:.1f} s, "
                      f"{runs[-1]['hwm_sum'] / 2**20:.0f} MiB", file=sys.stderr)
        text = table(runs, args, files, systems)
        print(text)
        if not args.no_write:
            RESULTS.write_text(text, encoding="utf-8")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(str(tmp / "plate") + "_openhcs", ignore_errors=True)


if __name__ == "__main__":
    main()
