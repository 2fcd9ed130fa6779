"""Screen-analysis benchmark: the plate-wide illumination pass on dask, and the reference
analysis (examples/screen_analysis.yaml) end to end.

Phase ``pass``: ``correct_illumination``'s map -> reduce over a synthetic plate (24 wells x 2
sites x 2 channels x 4 planes of 512 x 512 uint16 by default), on 2 single-threaded dask
workers against 1 (one inline worker: the same task code in one worker process) and inline
in this process. Clusters start before the timing and each runs one warm-up pass; then the
executors alternate, their order reversed every other round. Reported: medians, the ratio
per round, and each worker's peak resident memory (over its life: the same passes) above
what it held after the warm-up (the map holds one image at a time plus one accumulator per
channel: the bound is one group's images plus the accumulators, both printed).

Phase ``e2e``: the reference analysis over a 24-well plate (1 site, 2 channels, 4 planes of
256 x 256 by default), each run in a fresh process (``--one``), inline and on 2 dask
workers, alternating; wall time and peak resident memory (the process's, and each worker's).

Run: ``.venv/bin/python benchmarks/analysis.py [--rounds 2] [--phase pass e2e]``; the
results go to ``benchmarks/results/analysis.md``.
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


def phase_pass(rounds: int, work: Path, method: str = "mean",
               size: int = 512) -> dict[str, Any]:
    """The plate-wide illumination pass: 2 dask workers, 1 dask worker, inline."""
    from memtype.pipeline import Pipeline
    from memtype.pipeline.execution.executors import DaskExecutor, InlineExecutor

    wells, sites, z = 24, 2, 4
    source = work / f"plate_pass_{size}"
    _plate(source, wells, sites, z, size)
    pipeline = Pipeline([("correct_illumination", {"smoothing": "gaussian", "method": method})])
    executors = {"dask-2": DaskExecutor(workers=2), "dask-1": DaskExecutor(workers=1),
                 "inline": InlineExecutor()}
    times: dict[str, list[float]] = {k: [] for k in executors}
    start = {k: _worker_now(e) for k, e in executors.items() if k != "inline"}
    try:
        for name, ex in executors.items():  # warm-up: imports, first reads
            _pass_run(pipeline, ex, str(source), str(work / f"out-{name}"))
        warm = {k: _worker_peaks(e) for k, e in executors.items() if k != "inline"}
        for r in range(rounds):
            order = list(executors) if r % 2 == 0 else list(reversed(executors))
            for name in order:
                times[name].append(_pass_run(pipeline, executors[name], str(source),
                                             str(work / f"out-{name}")))
        peaks = {k: _worker_peaks(e) for k, e in executors.items() if k != "inline"}
    finally:
        for ex in executors.values():
            ex.close()
    group = sites * 2 * z * size * size * 2
    accumulators = 2 * size * size * (8 + 4)
    return {"plate": f"{wells} wells x {sites} sites x 2 channels x {z} planes of "
                     f"{size} x {size} uint16 (method {method})", "times": times,
            "ratios": [a / b for a, b in zip(times["dask-1"], times["dask-2"], strict=True)],
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


def report(found: dict[str, Any], rounds: int) -> str:
    """The results as Markdown."""
    today = datetime.date.today().isoformat()
    lines = [f"# Screen analysis ({today}, {MACHINE}; {rounds} alternating rounds)", ""]
    if "pass" in found:
        p = found["pass"]
        t = {k: _median(v) for k, v in p["times"].items()}
        lines += [
            "## Plate-wide illumination correction (map -> reduce)", "",
            f"Plate: {p['plate']}. Median wall time of the pass: 2 dask workers "
            f"{t['dask-2']:.2f} s, one inline worker (1 dask worker) {t['dask-1']:.2f} s, "
            f"inline in the driver {t['inline']:.2f} s (load average at the end "
            f"{p['load']:.1f} on 2 cores).", "",
            f"- 2 workers vs one inline worker: {_median(p['ratios']):.2f}x (rounds "
            f"{', '.join(f'{r:.2f}' for r in p['ratios'])})",
            f"- 2 workers vs inline: {_median(p['ratios_inline']):.2f}x (rounds "
            f"{', '.join(f'{r:.2f}' for r in p['ratios_inline'])})",
            "- each worker's peak resident memory above its memory before the first pass "
            "(imports of tifffile and the pass, one image, the accumulators): "
            + "; ".join(f"{k}: {', '.join(f'{v:.1f}' for v in vs)} MiB"
                        for k, vs in p["worker_peak_above_start_mib"].items())
            + f" (one group's images {p['group_mib']:.1f} MiB, the accumulators "
              f"{p['accumulators_mib']:.1f} MiB); the timed passes raised no worker's peak "
              "above the warm-up's by more than "
            + f"{max(max(v) for v in p['worker_peak_growth_after_warmup_mib'].values()):.1f}"
            + " MiB", "",
            "Raw seconds: " + json.dumps({k: [round(x, 3) for x in v]
                                           for k, v in p["times"].items()}), ""]
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
    parser.add_argument("--pass-method", default="mean", choices=["mean", "median"],
                        help="the illumination function of the pass phase")
    parser.add_argument("--pass-size", type=int, default=512, help="image size of the pass")
    parser.add_argument("--one", nargs=3, metavar=("EXECUTOR", "SOURCE", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_e2e(*args.one)))
        return 0
    work = Path(args.work or tempfile.mkdtemp(prefix="memtype-analysis-"))
    found: dict[str, Any] = {}
    if "pass" in args.phase:
        found["pass"] = phase_pass(args.rounds, work, args.pass_method, args.pass_size)
    if "e2e" in args.phase:
        found["e2e"] = phase_e2e(args.rounds, work)
    text = report(found, args.rounds)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MEMTYPE_QUIET_STARTUP", "1")
    sys.exit(main())
