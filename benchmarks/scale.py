"""Scale benchmark: the demo pipeline over plates of 1, 24 and 96 wells, inline and on dask.

For each plate size and executor (inline; dask.distributed with 2 single-threaded worker
processes on a LocalCluster started before the clock starts) the demo pipeline (torch
normalisation, jax background subtraction, NumPy projection, pyclesperanto or scipy median,
scipy blob counting; OME-Zarr plate and counts.csv out) runs in a fresh Python process, after
a one-well warm-up run in that process and in each dask worker (imports, jit compilation).
Reported per run:

* time per group: the run's wall time / groups (throughput); the CPU time (user + system,
  every thread) of the main process and the workers / groups; the median and the 10th
  percentile of the groups' own times on their workers (the 10th percentile: what a group
  costs while other jobs leave the machine alone);
* peak resident memory (the kernel's high-water mark, ``VmHWM``) of the main process and of
  each dask worker, read through psutil-found pids at the end of the run;
* memory held per finished group: the slope (least squares) of the resident set size of
  the main process and of each worker, sampled with psutil as each group finishes, over
  the second half of the groups (the first ones warm allocators and caches up, after
  which the resident set stays flat: a leak would keep growing).

Targets: time per group flat within 15% from 24 to 96 wells; peak memory independent of the
plate size (inline and per worker); nothing held per finished group.

The plate is smaller than the demo's default so that the whole benchmark fits about 6
minutes on a 2-core machine: ``--size 256 --sites 1 --z-planes 8`` (2 channels) by
default. The 96-well plate is generated once; the 1- and 24-well inputs are hard links to
its first wells (the synthetic plate derives each well from its index, so they are exactly
those plates).
Two phases. Memory: each (executor, size) runs in a fresh process, so that its peaks are its
own (``--rounds``, alternating order). Time: per executor, one process runs the 24- and the
96-well plate alternately (``--time-rounds``, order reversed every other round), so that the
two sizes see the same machine (it is shared: other jobs move wall times between processes
by more than the 15% under test).
Run: ``python benchmarks/scale.py [--rounds 1] [--time-rounds 2] [--wells 1 24 96]``;
writes ``benchmarks/results/scale.md``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "results"
_MIB = 1024 * 1024


# -- child: one run in a fresh process ------------------------------------------------------
def _hwm(pid: int) -> int:
    """A process's peak resident set size in bytes (``VmHWM`` of /proc/<pid>/status)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _slope(values: list[int]) -> float:
    """Least-squares slope of the second half of the values against their index (bytes
    per group): the first groups warm the allocators and caches up, then RSS plateaus."""
    values = values[len(values) // 2:]
    n = len(values)
    if n < 3:
        return 0.0
    mean_x, mean_y = (n - 1) / 2, statistics.fmean(values)
    num = sum((i - mean_x) * (v - mean_y) for i, v in enumerate(values))
    den = sum((i - mean_x) ** 2 for i in range(n))
    return num / den


def _cpu_seconds(procs: list[Any]) -> float:
    """User + system CPU seconds of these processes (all their threads) so far."""
    return float(sum(t.user + t.system for t in (p.cpu_times() for p in procs)))


def _warm_up(source: str, tmp: str, use_opencl: bool) -> None:
    """One inline run of the demo pipeline in this process (imports, jit compilation)."""
    from memtype.pipeline.demo import demo_pipeline

    demo_pipeline(use_opencl).run(source, os.path.join(tmp, f"warmup-{os.getpid()}"))


class _Session:
    """The demo pipeline, warmed up in this process and in each dask worker of a fresh
    LocalCluster (2 single-threaded worker processes) when ``executor`` is ``"dask"``."""

    def __init__(self, executor: str, warmup: str, tmp: str) -> None:
        import psutil
        import torch  # noqa: F401  import order: torch before anything loading tensorflow

        from memtype.pipeline.demo import demo_pipeline, opencl_available

        self.opencl = opencl_available()
        self.pipeline = demo_pipeline(self.opencl)
        self.tmp, self.runs = tmp, 0
        self.client: Any = None
        self.cluster: Any = None
        self.kwargs: dict[str, Any] = {"executor": "inline"}
        pids: list[int] = []
        if executor == "dask":
            distributed: Any = importlib.import_module("distributed")  # untyped
            self.cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1,
                                                    processes=True, dashboard_address=None)
            self.client = distributed.Client(self.cluster)
            pids = sorted(self.client.run(os.getpid).values())
            self.kwargs = {"executor": "dask", "client": self.client}
            # every worker warms up itself (one run may use one worker only)
            self.client.run(_warm_up, warmup, tmp, self.opencl)
        else:
            _warm_up(warmup, tmp, self.opencl)
        self.procs = [psutil.Process(), *(psutil.Process(p) for p in pids)]

    def measure(self, source: str) -> dict[str, Any]:
        """One run over ``source``: time per group, memory held per group."""
        from memtype.pipeline.progress import Progress

        procs = self.procs

        class Sampler(Progress):
            """Samples every process's RSS as each group finishes."""

            def __init__(self) -> None:
                self.samples: list[list[int]] = [[] for _ in procs]

            def group_done(self, result: Any) -> None:
                for i, proc in enumerate(procs):
                    self.samples[i].append(int(proc.memory_info().rss))

        sampler = Sampler()
        self.runs += 1
        cpu0 = _cpu_seconds(procs)
        start = time.perf_counter()
        report = self.pipeline.run(source, os.path.join(self.tmp, f"out{self.runs}"),
                                   progress=sampler, **self.kwargs)
        wall = time.perf_counter() - start
        cpu = _cpu_seconds(procs) - cpu0
        assert report.ok, report.summary()
        groups = len(report.groups)
        seconds = [g.seconds for g in report.groups]
        return {"groups": groups, "wall": wall, "per_group_wall": wall / groups,
                "per_group_cpu": cpu / groups,
                "median_group": statistics.median(seconds),
                "p10_group": statistics.quantiles(seconds, n=10)[0] if groups > 1 else wall,
                "slope_main": _slope(sampler.samples[0]),
                "slope_workers": [_slope(s) for s in sampler.samples[1:]],
                "opencl": self.opencl}

    def peaks(self) -> list[int]:
        """Peak RSS of the main process, then of each worker."""
        return [_hwm(p.pid) for p in self.procs]

    def close(self) -> None:
        """Close the cluster this session started."""
        if self.client is not None:
            self.client.close()
            self.cluster.close()


def _child(config: dict[str, Any]) -> dict[str, Any]:
    """``memory``: one run in this fresh process, with its peaks. ``alternate``: runs over
    each input in turn, ``rounds`` times (order reversed every other round)."""
    session = _Session(config["executor"], config["warmup"], config["tmp"])
    try:
        if config["mode"] == "memory":
            result = session.measure(config["input"])
            peaks = session.peaks()
            return {**result, "peak_main": peaks[0], "peak_workers": peaks[1:]}
        runs: list[dict[str, Any]] = []
        inputs = [(int(n), path) for n, path in config["inputs"].items()]  # JSON: str keys
        for r in range(config["rounds"]):
            for n, path in inputs if r % 2 == 0 else inputs[::-1]:
                runs.append({"wells": n, "round": r, **session.measure(path)})
        return {"runs": runs}
    finally:
        session.close()


# -- parent: plates, rounds, table -------------------------------------------------------
def _plates(root: Path, sizes: list[int], args: argparse.Namespace) -> dict[int, Path]:
    """The largest plate generated once; smaller ones as hard links to its first wells."""
    from memtype.pipeline import SyntheticPlate, write_synthetic_plate

    big = SyntheticPlate(wells=max(sizes), sites=args.sites, z_planes=args.z_planes,
                         size=args.size)
    full = root / f"wells{max(sizes)}"
    write_synthetic_plate(full, big)
    dirs = {max(sizes): full}
    for n in sorted(set(sizes) - {max(sizes)}):
        wells = set(big.well_names[:n])
        d = root / f"wells{n}"
        d.mkdir()
        for name in os.listdir(full):
            if name.split("_", 1)[0] in wells:
                os.link(full / name, d / name)
        dirs[n] = d
    return dirs


def _run_child(config: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(config)],
                          capture_output=True, text=True, env=env, timeout=900, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}): {proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _median_of(runs: list[dict[str, Any]], key: str) -> Any:
    values = [r[key] for r in runs]
    if isinstance(values[0], list):
        return [statistics.median(v) for v in zip(*values, strict=True)]
    return statistics.median(values)


def _memory_table(results: dict[tuple[str, int], list[dict[str, Any]]]) -> list[str]:
    lines = ["| executor | wells | wall s / group | CPU s / group | median group s | "
             "peak RSS main MiB | peak RSS per worker MiB | held per group main KiB | "
             "held per group per worker KiB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (executor, n), runs in results.items():
        workers = _median_of(runs, "peak_workers") if executor == "dask" else []
        slopes = _median_of(runs, "slope_workers") if executor == "dask" else []
        lines.append(
            f"| {executor} | {n} | {_median_of(runs, 'per_group_wall'):.3f} "
            f"| {_median_of(runs, 'per_group_cpu'):.3f} "
            f"| {_median_of(runs, 'median_group'):.3f} "
            f"| {_median_of(runs, 'peak_main') / _MIB:.0f} "
            f"| {', '.join(f'{w / _MIB:.0f}' for w in workers) or '-'} "
            f"| {_median_of(runs, 'slope_main') / 1024:+.0f} "
            f"| {', '.join(f'{s / 1024:+.0f}' for s in slopes) or '-'} |")
    return lines


def _time_table(alternated: dict[str, list[dict[str, Any]]], small: int,
                large: int) -> list[str]:
    lines = [f"| executor | wall s / group, {small} wells | {large} wells | ratio | "
             f"median group s, {small} wells | {large} wells | ratio | "
             f"10th percentile group s, {small} wells | {large} wells | ratio | "
             "rounds (wall ratio) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for executor, runs in alternated.items():
        by = {n: [r for r in runs if r["wells"] == n] for n in (small, large)}
        rounds = sorted({r["round"] for r in runs})
        per_round = [next(r for r in by[large] if r["round"] == k)["per_group_wall"]
                     / next(r for r in by[small] if r["round"] == k)["per_group_wall"]
                     for k in rounds]
        cells = []
        for key in ("per_group_wall", "median_group", "p10_group"):
            a, b = _median_of(by[small], key), _median_of(by[large], key)
            cells.append(f"{a:.3f} | {b:.3f} | {b / a:.2f}x")
        lines.append(f"| {executor} | {' | '.join(cells)} | "
                     f"{', '.join(f'{x:.2f}' for x in per_round)} |")
    return lines


def _report_memory(res: dict[str, Any], label: str, seconds: float) -> None:
    print(f"{label}: {res['per_group_wall']:.3f} s/group wall, {res['per_group_cpu']:.3f} CPU, "
          f"peak main {res['peak_main'] / _MIB:.0f} MiB, workers "
          f"{[round(w / _MIB) for w in res['peak_workers']]} MiB ({seconds:.0f} s)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--wells", type=int, nargs="+", default=[1, 24, 96])
    parser.add_argument("--executors", nargs="+", default=["inline", "dask"])
    parser.add_argument("--rounds", type=int, default=1, help="memory rounds (fresh processes)")
    parser.add_argument("--time-rounds", type=int, default=3,
                        help="alternating rounds of the two largest plates in one process")
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--sites", type=int, default=1)
    parser.add_argument("--z-planes", type=int, default=8)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_child(json.loads(args.child))))
        return
    started = time.perf_counter()
    sizes = sorted(set(args.wells))
    results: dict[tuple[str, int], list[dict[str, Any]]] = {}
    alternated: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="memtype-scale-") as tmp:
        root = Path(tmp)
        dirs = _plates(root, sorted(set(sizes) | {1}), args)
        print(f"plates written in {time.perf_counter() - started:.1f} s", flush=True)
        order = [(e, n) for n in sizes for e in args.executors]
        for r in range(args.rounds):  # 1. each size in a fresh process: peaks, held per group
            for executor, n in order if r % 2 == 0 else order[::-1]:
                run_tmp = root / f"run-{executor}-{n}-{r}"
                run_tmp.mkdir()
                t0 = time.perf_counter()
                res = _run_child({"mode": "memory", "executor": executor,
                                  "input": str(dirs[n]), "warmup": str(dirs[1]),
                                  "tmp": str(run_tmp)})
                _report_memory(res, f"round {r + 1} {executor:>6} {n:>3} wells",
                               time.perf_counter() - t0)
                results.setdefault((executor, n), []).append(res)
        small, large = sizes[-2:] if len(sizes) > 1 else (sizes[0], sizes[0])
        for executor in args.executors if args.time_rounds else []:  # 2. time, alternating
            run_tmp = root / f"time-{executor}"
            run_tmp.mkdir()
            t0 = time.perf_counter()
            out = _run_child({"mode": "alternate", "executor": executor,
                              "inputs": {small: str(dirs[small]), large: str(dirs[large])},
                              "rounds": args.time_rounds, "warmup": str(dirs[1]),
                              "tmp": str(run_tmp)})
            alternated[executor] = out["runs"]
            print(f"time {executor}: {time.perf_counter() - t0:.0f} s", flush=True)
    results = {k: results[k] for k in sorted(results, key=lambda k: (k[0] != "inline", k[1]))}
    opencl = next(iter(results.values()))[0]["opencl"]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    head = (f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores (load average at the "
            f"end {load}), Python {platform.python_version()}; {datetime.date.today()}. "
            f"Plate: N wells x {args.sites} sites x 2 channels x {args.z_planes} planes of "
            f"{args.size} x {args.size} uint16; median step on "
            f"{'pyclesperanto' if opencl else 'scipy'}. Whole run "
            f"{time.perf_counter() - started:.0f} s.")
    text = "\n".join([
        "# Scale (benchmarks/scale.py)", "", head, "",
        f"Memory (each size in a fresh process, median of {args.rounds} round(s)):", "",
        *_memory_table(results), "",
        f"Time per group ({small} and {large} wells alternated in one process, "
        f"{args.time_rounds} rounds, medians):", "",
        *(_time_table(alternated, small, large) if alternated else ["(not run)"])])
    OUT.mkdir(exist_ok=True)
    (OUT / "scale.md").write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
