"""Screen-analysis benchmark: the plate-wide illumination pass on dask, and the reference
analysis (examples/screen_analysis.yaml) end to end.

Phase ``pass``: ``correct_illumination``'s map -> reduce over a synthetic plate (24 wells x 2
sites x 2 channels x 4 planes of 512 x 512 uint16 by default), on 2 single-threaded dask
workers against 1 (one inline worker: the same task code in one worker process) and inline
in this process, and the limit on this machine: the same reads and sums (tifffile and the
accumulator, no dask, no memtype map) in a plain multiprocessing pool of 2 and of 1
processes. Clusters and pools start before the timing and each runs one warm-up pass; then
the executors alternate, their order reversed every other round. Reported: medians, the
ratio per round, the load average before each round, each dask worker's CPU seconds per
second of the pass (1.0: busy all along on one thread), and each worker's peak resident
memory (over its life: the same passes) above what it held before the first pass (the map
holds one image at a time plus its accumulators: the bound is one group's images plus the
accumulators, both printed). ``--pass-method mean median --pass-size 512 1024`` runs each.

Phase ``e2e``: the reference analysis over a 24-well plate (1 site, 2 channels, 4 planes of
256 x 256 by default), each run in a fresh process (``--one``), inline and on 2 dask
workers, alternating; wall time and peak resident memory (the process's, and each worker's).

Run: ``.venv/bin/python benchmarks/analysis.py [--rounds 2] [--phase pass e2e]``; the
results go to ``benchmarks/results/analysis.md`` (or ``--results PATH``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "screen_analysis.yaml"
RESULTS = ROOT / "benchmarks" / "results" / "analysis.md"
MACHINE = "this project's shared 2-core x86-64 box, other jobs running"
_MIB = 1 << 20


def _maxrss() -> int:
    """This process's peak resident memory in bytes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rss() -> int:
    """This process's resident memory now, in bytes."""
    import psutil

    return int(psutil.Process().memory_info().rss)


def _plate(path: Path, wells: int, sites: int, z: int, size: int) -> None:
    """A synthetic plate, written once."""
    from memtype.pipeline.synthetic import SyntheticPlate, write_synthetic_plate

    if not path.is_dir():
        write_synthetic_plate(path, SyntheticPlate(wells=wells, sites=sites, channels=2,
                                                   z_planes=z, size=size))


def _pass_run(pipeline: Any, executor: Any, source: str, out: str) -> float:
    """One plate-wide pass (map -> reduce) on ``executor``: its wall time."""
    from memtype.pipeline.analysis.fields import channel_field
    from memtype.pipeline.analysis.passes import run_passes

    reader = pipeline.reader(source)
    tasks = pipeline.tasks(reader)
    start = time.perf_counter()
    run_passes(pipeline.steps, executor, reader, tasks, channel_field(reader.pattern.fields),
               out, False)
    return time.perf_counter() - start


def _worker_peaks(executor: Any) -> list[int]:
    """Each dask worker's peak resident memory (bytes)."""
    peaks = executor.client.run(_maxrss)
    return [int(v) for v in peaks.values()]


def _worker_now(executor: Any) -> list[int]:
    """Each dask worker's resident memory now (bytes)."""
    return [int(v) for v in executor.client.run(_rss).values()]


def _cpu() -> float:
    """This process's CPU seconds so far (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _worker_cpu(executor: Any) -> list[float]:
    """Each dask worker's CPU seconds so far."""
    return [float(v) for v in executor.client.run(_cpu).values()]


def plain_work(item: tuple[list[str], str, tuple[int, int] | None]) -> Any:
    """The limit's work, without memtype's map or dask: read each file (tifffile) and add it
    (or a band of its rows, for a median) to one accumulator per channel; the average."""
    import tifffile

    from memtype.pipeline.analysis.illumination import IlluminationAccumulator

    paths, method, rows = item
    accs: dict[str, Any] = {}
    for path in paths:
        image = tifffile.imread(path)
        channel = path.rsplit("_w", 1)[1][0]
        acc = accs.setdefault(channel, IlluminationAccumulator(
            median_bins=256 if method == "median" else None))
        acc.add(image if rows is None else image[rows[0]:rows[1]])
    return {c: a.average(method) if method == "median" else a.total for c, a in accs.items()}


class PlainPool:
    """The limit: the same reads and sums split over ``workers`` processes of a
    multiprocessing pool (started before the timing), no dask, no memtype map."""

    def __init__(self, workers: int) -> None:
        import multiprocessing

        self.workers = workers
        self.pool = multiprocessing.get_context("spawn").Pool(workers)

    def run(self, source: Path, method: str, size: int) -> None:
        """One pass: by files (mean: two shares per process) or by channel and band (median)."""
        paths = sorted(str(p) for p in source.glob("*.tif"))
        if method == "median":
            items = [([p for p in paths if p.rsplit("_w", 1)[1][0] == c], method, band)
                     for c in "12" for band in _plain_bands(size, self.workers)]
        else:
            shares = 2 * self.workers
            items = [(paths[i::shares], method, None) for i in range(shares)]
        self.pool.map(plain_work, items, chunksize=1)

    def close(self) -> None:
        self.pool.terminate()


def _plain_bands(size: int, workers: int) -> list[tuple[int, int]]:
    """A median's bands per channel in the limit: as many as run_passes makes."""
    from memtype.pipeline.analysis.passes import TILE_BYTES, _bands

    count = max(-(-size * size * (2 * 256 + 8) // TILE_BYTES), -(-workers // 2))
    return _bands(size, count)


def phase_pass(rounds: int, work: Path, method: str = "mean",
               size: int = 512) -> dict[str, Any]:
    """The plate-wide illumination pass: 2 dask workers, 1 dask worker, inline; and the
    limit, the same reads and sums in a plain pool of 2 and of 1 processes."""
    from memtype.pipeline import Pipeline
    from memtype.pipeline.execution.executors import DaskExecutor, InlineExecutor

    wells, sites, z = 24, 2, 4
    source = work / f"plate_pass_{size}"
    _plate(source, wells, sites, z, size)
    pipeline = Pipeline([("correct_illumination", {"smoothing": "gaussian", "method": method})])
    executors: dict[str, Any] = {
        "dask-2": DaskExecutor(workers=2), "dask-1": DaskExecutor(workers=1),
        "inline": InlineExecutor(), "plain-2": PlainPool(2), "plain-1": PlainPool(1)}
    dask = [k for k in executors if k.startswith("dask")]
    times: dict[str, list[float]] = {k: [] for k in executors}
    busy: dict[str, list[list[float]]] = {k: [] for k in dask}
    loads: list[float] = []

    def once(name: str) -> float:
        ex = executors[name]
        if name.startswith("plain"):
            begin = time.perf_counter()
            ex.run(source, method, size)
            return time.perf_counter() - begin
        return _pass_run(pipeline, ex, str(source), str(work / f"out-{name}"))

    start = {k: _worker_now(executors[k]) for k in dask}
    try:
        for name in executors:  # warm-up: imports, first reads
            once(name)
        warm = {k: _worker_peaks(executors[k]) for k in dask}
        for r in range(rounds):
            loads.append(os.getloadavg()[0])
            for name in (list(executors) if r % 2 == 0 else list(reversed(executors))):
                cpu = _worker_cpu(executors[name]) if name in dask else []
                times[name].append(once(name))
                if name in dask:
                    busy[name].append([(b - a) / times[name][-1] for a, b in
                                       zip(cpu, _worker_cpu(executors[name]), strict=True)])
        loads.append(os.getloadavg()[0])
        peaks = {k: _worker_peaks(executors[k]) for k in dask}
    finally:
        for ex in executors.values():
            ex.close()
    group = sites * 2 * z * size * size * 2
    accumulators = (2 * size * size * 4 if method == "mean" else
                    min(size * size * (2 * 256 + 8), 256 << 20))
    return {"plate": f"{wells} wells x {sites} sites x 2 channels x {z} planes of "
                     f"{size} x {size} uint16 (method {method})", "times": times,
            "method": method, "size": size, "loads": loads, "busy": busy,
            "ratios": [a / b for a, b in zip(times["dask-1"], times["dask-2"], strict=True)],
            "ratios_plain": [a / b for a, b in zip(times["plain-1"], times["plain-2"],
                                                   strict=True)],
            "load": os.getloadavg()[0],
            "ratios_inline": [a / b for a, b in zip(times["inline"], times["dask-2"],
                                                    strict=True)],
            "worker_peak_above_start_mib": {
                k: [(p - b) / _MIB for p, b in zip(peaks[k], start[k], strict=True)]
                for k in peaks},
            "worker_peak_growth_after_warmup_mib": {
                k: [(p - b) / _MIB for p, b in zip(peaks[k], warm[k], strict=True)]
                for k in peaks},
            "group_mib": group / _MIB, "accumulators_mib": accumulators / _MIB}


def one_e2e(executor: str, source: str, out: str) -> dict[str, Any]:
    """The reference analysis once, in this (fresh) process: wall time and peak memory."""
    from memtype.pipeline import WriteOptions
    from memtype.pipeline.execution.executors import DaskExecutor
    from memtype.pipeline.model.pipeline_file import load_pipeline_spec

    pipeline = load_pipeline_spec(EXAMPLE)
    ex: Any = DaskExecutor(workers=2) if executor == "dask" else "inline"
    start = time.perf_counter()
    try:
        report = pipeline.run(source, out, executor=ex, write=WriteOptions(overwrite=True))
        wall = time.perf_counter() - start
        workers = _worker_peaks(ex) if executor == "dask" else []
    finally:
        if executor == "dask":
            ex.close()
    report.raise_for_failures()
    return {"wall": wall, "peak_mib": _maxrss() / _MIB,
            "worker_peaks_mib": [w / _MIB for w in workers]}


def phase_e2e(rounds: int, work: Path) -> dict[str, Any]:
    """The reference analysis end to end, inline and on 2 dask workers, alternating."""
    wells, sites, z, size = 24, 1, 4, 256
    source = work / "plate_e2e"
    _plate(source, wells, sites, z, size)
    runs: dict[str, list[dict[str, Any]]] = {"inline": [], "dask": []}
    for r in range(rounds):
        for name in (["inline", "dask"] if r % 2 == 0 else ["dask", "inline"]):
            done = subprocess.run(
                [sys.executable, __file__, "--one", name, str(source), str(work / f"e2e-{name}")],
                capture_output=True, text=True, check=True, timeout=1800)
            runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {"plate": f"{wells} wells x {sites} site x 2 channels x {z} planes of "
                     f"{size} x {size} uint16", "runs": runs,
            "ratios": [i["wall"] / d["wall"] for i, d in zip(runs["inline"], runs["dask"],
                                                            strict=True)]}


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _rounds(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def _pass_report(runs: list[dict[str, Any]]) -> list[str]:
    """The pass phase as a table (a row per method and size) and each run's details."""
    lines = ["## Plate-wide illumination correction (map -> reduce)", "",
             "Median wall time of the pass; 2 workers vs 1 is 1 dask worker / 2 dask "
             "workers per round (median, rounds); the limit is the same reads and sums in a "
             "plain multiprocessing pool of 1 / of 2 processes, alternated with them.", "",
             "| plate (24 wells x 2 sites x 2 channels x 4 planes) | 2 dask workers | 1 dask "
             "worker | inline | plain 2 / 1 processes | 2 workers vs 1 | the limit: plain 2 "
             "vs 1 | load average (rounds) |", "|---|---|---|---|---|---|---|---|"]
    for p in runs:
        t = {k: _median(v) for k, v in p["times"].items()}
        lines.append(
            f"| {p['size']} x {p['size']}, {p['method']} | {t['dask-2']:.2f} s | "
            f"{t['dask-1']:.2f} s | {t['inline']:.2f} s | {t['plain-2']:.2f} / "
            f"{t['plain-1']:.2f} s | {_median(p['ratios']):.2f}x ({_rounds(p['ratios'])}) | "
            f"{_median(p['ratios_plain']):.2f}x ({_rounds(p['ratios_plain'])}) | "
            f"{_rounds(p['loads'])} |")
    lines.append("")
    for p in runs:
        busy = ", ".join(f"{k}: " + "; ".join("/".join(f"{v:.2f}" for v in r) for r in rs)
                         for k, rs in p["busy"].items())
        lines += [
            f"{p['plate']}: each dask worker's CPU seconds per second of the pass, per round "
            f"({busy}); each worker's peak resident memory above its memory before the "
            "first pass: " + "; ".join(f"{k}: {', '.join(f'{v:.1f}' for v in vs)} MiB"
                                       for k, vs in p["worker_peak_above_start_mib"].items())
            + f" (one group's images {p['group_mib']:.1f} MiB, a task's accumulators "
              f"{p['accumulators_mib']:.1f} MiB); raw seconds "
            + json.dumps({k: [round(x, 3) for x in v] for k, v in p["times"].items()}), ""]
    return lines


def report(found: dict[str, Any], rounds: int) -> str:
    """The results as Markdown."""
    today = datetime.date.today().isoformat()
    lines = [f"# Screen analysis ({today}, {MACHINE}; {rounds} alternating rounds)", ""]
    if "pass" in found:
        lines += _pass_report(found["pass"])
    if "e2e" in found:
        e = found["e2e"]
        wall = {k: _median([r["wall"] for r in v]) for k, v in e["runs"].items()}
        peak = {k: _median([r["peak_mib"] for r in v]) for k, v in e["runs"].items()}
        workers = [max(r["worker_peaks_mib"]) for r in e["runs"]["dask"]]
        lines += [
            "## The reference analysis end to end (examples/screen_analysis.yaml)", "",
            f"Plate: {e['plate']}; each run a fresh process (imports, the dask cluster's "
            "start and the plate-wide pass included).", "",
            f"- inline: {wall['inline']:.1f} s, peak resident memory {peak['inline']:.0f} MiB",
            f"- 2 dask workers: {wall['dask']:.1f} s; driver peak {peak['dask']:.0f} MiB, "
            f"largest worker peak {_median(workers):.0f} MiB",
            f"- inline / dask: {_median(e['ratios']):.2f}x (rounds "
            f"{', '.join(f'{r:.2f}' for r in e['ratios'])})", "",
            "Raw: " + json.dumps({k: [{kk: (round(vv, 2) if isinstance(vv, float) else
                                            [round(x, 1) for x in vv])
                                       for kk, vv in r.items()} for r in v]
                                  for k, v in e["runs"].items()}), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--phase", nargs="+", default=["pass", "e2e"],
                        choices=["pass", "e2e"])
    parser.add_argument("--work", default=None, help="where the plates go (a temp folder)")
    parser.add_argument("--pass-method", nargs="+", default=["mean"],
                        choices=["mean", "median"],
                        help="the illumination functions of the pass phase")
    parser.add_argument("--pass-size", nargs="+", type=int, default=[512],
                        help="image sizes of the pass phase")
    parser.add_argument("--results", default=str(RESULTS), help="the Markdown to write")
    parser.add_argument("--one", nargs=3, metavar=("EXECUTOR", "SOURCE", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_e2e(*args.one)))
        return 0
    work = Path(args.work or tempfile.mkdtemp(prefix="memtype-analysis-"))
    found: dict[str, Any] = {}
    if "pass" in args.phase:
        found["pass"] = [phase_pass(args.rounds, work, method, size)
                         for size in args.pass_size for method in args.pass_method]
    if "e2e" in args.phase:
        found["e2e"] = phase_e2e(args.rounds, work)
    text = report(found, args.rounds)
    Path(args.results).parent.mkdir(parents=True, exist_ok=True)
    Path(args.results).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MEMTYPE_QUIET_STARTUP", "1")
    sys.exit(main())
