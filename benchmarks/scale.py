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
Speed-up (issue 23, "scale out must pay"): on a plate of 24 wells x 4 sites x 2 channels x
5 planes of 1024 x 1024, the demo pipeline inline, as one inline worker, on 2 threads, on
memtype's dask cluster (``DaskExecutor(workers=2)``: what ``executor="dask"`` starts) and
on a stock ``distributed.LocalCluster`` of 2 single-threaded worker processes (dask's own
worker environment, for comparison), alternated (``--speedup-rounds``, order reversed
every other round; ``--speedup-executors`` picks which run beside inline). Two baselines:
the inline process (``inline``: a plain process, every framework free to use every core)
and one inline worker (``inline-worker``: the same inline run in a helper process started
with the environment of one of the cluster's dask workers, ``dask_worker_environ(1)``, so
that every framework's pools are sized as in a worker before any is imported). Reported:
wall time, user and system CPU seconds of the main process and the workers with their
children, cores busy (CPU / wall); per baseline each executor's speed-up and its parallel
efficiency, the baseline's CPU / (2 x the executor's wall) (per round and median), its CPU
over the baseline's; and the serial parts of a run: before the groups (planning, the
output's preparation), the tail (one worker idle while the other finishes) and after the
groups (the plate's metadata, tables, report), with the groups each worker ran. What a
user pays beyond that is reported apart and excluded from the ratios: the cluster's
start-up (``executor="dask"`` without a client pays it in every run; a client or an
Executor passed in pays it once) and each worker's first group (imports, JIT compilation;
every worker process pays it once, as the inline process does), run as a task on each
worker (the thread that runs its groups).

Run: ``python benchmarks/scale.py [--rounds 1] [--time-rounds 2] [--wells 1 24 96]
[--speedup-rounds 2] [--only-speedup] [--speedup-executors inline-worker dask]``;
writes ``benchmarks/results/scale.md`` and ``benchmarks/results/scale_speedup.md``.
"""

from __future__ import annotations

import argparse
import contextlib
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
from collections import Counter
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


def _speedup_pipeline(opencl: bool, config: dict[str, Any]) -> Any:
    """The demo pipeline with its tasks split by ``config["task_by"]`` (the demo's own, by
    well, unless ``--task-by`` names finer fields: the same steps and results, more tasks)."""
    from memtype.pipeline import Pipeline
    from memtype.pipeline.demo import demo_pipeline

    demo = demo_pipeline(opencl)
    task_by = tuple(config.get("task_by") or demo.task_by)
    return demo if task_by == demo.task_by else Pipeline(demo.steps, task_by=task_by,
                                                         name=demo.name)


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
        self.kwargs: dict[str, Any] = {"executor": "inline"}  # ExecutionOptions' fields
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
        from memtype.pipeline import ExecutionOptions
        from memtype.pipeline.execution.progress import Progress

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
                                   execution=ExecutionOptions(progress=sampler, **self.kwargs))
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


def _speedup(config: dict[str, Any]) -> dict[str, Any]:
    """Inline, threads and the dask clusters alternated over one plate in this process."""
    import psutil
    import torch  # noqa: F401  import order: torch before anything loading tensorflow

    from memtype.pipeline.demo import opencl_available
    from memtype.pipeline.execution.executors import DaskExecutor, ThreadExecutor

    distributed: Any = importlib.import_module("distributed")  # untyped
    opencl, tmp, source = opencl_available(), config["tmp"], config["input"]
    pipeline, setup = _speedup_pipeline(opencl, config), {}
    chosen = config["executors"]
    executors: dict[str, Any] = {"inline": "inline"}
    workers: dict[str, list[Any]] = {"inline": [], "threads": []}
    if "inline-worker" in chosen:  # started before any cluster writes into our environment
        t0 = time.perf_counter()
        executors["inline-worker"] = _InlineWorker(config, _worker_environ())
        setup["inline-worker: process start and first group"] = time.perf_counter() - t0
    if "threads" in chosen:
        executors["threads"] = ThreadExecutor(2)
    # the stock cluster first: a Nanny writes its environment into this process's (dask's
    # own doing), which the second cluster's workers would inherit unless they set it
    for name in [n for key, n in (("stock", "dask (stock LocalCluster)"), ("dask", "dask"))
                 if key in chosen]:
        t0 = time.perf_counter()
        if name == "dask":
            ex = DaskExecutor(workers=2)
        else:
            cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1,
                                               processes=True, dashboard_address=None)
            ex = DaskExecutor(distributed.Client(cluster))
            ex._owned.extend([ex.client, cluster])  # closed with the executor
        setup[f"{name}: cluster start-up"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        _warm_up_workers(ex.client, config["warmup"], tmp, opencl)
        setup[f"{name}: first group on each worker (in parallel)"] = time.perf_counter() - t0
        executors[name] = ex
        workers[name] = [psutil.Process(p) for p in ex.client.run(os.getpid).values()]
    t0 = time.perf_counter()
    _warm_up(config["warmup"], tmp, opencl)
    setup["inline: first group"] = time.perf_counter() - t0
    runs: list[dict[str, Any]] = []
    order = list(executors)
    try:
        for r in range(config["rounds"]):
            for name in order if r % 2 == 0 else order[::-1]:
                output = os.path.join(tmp, f"speedup-{r}-{len(runs)}")
                timed = (executors[name].run(output) if name == "inline-worker" else
                         _timed_run(pipeline, source, output, executors[name], workers[name]))
                runs.append({"executor": name, "round": r, "workers": _workers_of(name),
                             **timed})
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    finally:
        for ex in executors.values():
            if not isinstance(ex, str):
                ex.close()
    helper = executors.get("inline-worker")
    return {"runs": runs, "setup": setup, "opencl": opencl,
            "worker_environ": helper.environ if helper is not None else None}


def _workers_of(name: str) -> int:
    """Cores an executor of the speed-up phase may keep busy: 1 inline, else 2 workers."""
    return 1 if name in _BASELINES else 2


_BASELINES = {"inline": "inline process", "inline-worker": "one inline worker"}
"""The speed-up's baselines: a plain process (every framework free to use every core), and
a process with one dask worker's resources (:func:`_worker_environ` from its start)."""


class _InlineWorker:
    """The demo pipeline inline in a process of its own that runs with the environment of
    one dask worker of ``DaskExecutor`` from its start (pools sized before any framework is
    imported): warmed up, then one timed run per :meth:`run`, as ``--serve-inline``."""

    def __init__(self, config: dict[str, Any], environ: dict[str, str]) -> None:
        self.environ = environ
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve-inline", json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, **environ})
        self._answer()  # warmed up

    def _answer(self) -> dict[str, Any]:
        """The helper's next answer (a line of JSON after the marker; other lines pass)."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(_ANSWER):
                answer: dict[str, Any] = json.loads(line[len(_ANSWER):])
                return answer
            sys.stderr.write(line)
        raise RuntimeError(f"the inline worker ended ({self.proc.wait()})")

    def run(self, output: str) -> dict[str, Any]:
        """One timed run in the helper; ``others``: the CPU the rest of this process tree
        (the other executors' idle clusters, this process) spent meanwhile."""
        import psutil

        assert self.proc.stdin is not None
        every = _family([psutil.Process()])
        every0 = _cpu(every)
        self.proc.stdin.write(output + "\n")
        self.proc.stdin.flush()
        timed = self._answer()
        every1 = _cpu(every)
        return {**timed, "others": max(0.0, sum(every1) - sum(every0)
                                       - timed["user"] - timed["system"])}

    def close(self) -> None:
        """End the helper (end of input)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


_ANSWER = "@scale-answer "


def _serve_inline(config: dict[str, Any]) -> None:
    """The inline worker's process: warm up, then one timed inline run per line of input
    (the output folder), each answered on stdout."""
    import torch  # noqa: F401  import order: torch before anything loading tensorflow

    from memtype.pipeline.demo import opencl_available

    opencl = opencl_available()
    pipeline = _speedup_pipeline(opencl, config)
    _warm_up(config["warmup"], config["tmp"], opencl)
    print(_ANSWER + json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        timed = _timed_run(pipeline, config["input"], line.strip(), "inline", [])
        print(_ANSWER + json.dumps(timed), flush=True)


def _warm_up_workers(client: Any, warmup: str, tmp: str, opencl: bool) -> None:
    """The warm-up run on every worker at once, as a task pinned to it: in the thread
    that runs the worker's groups (``client.run`` would use its event-loop thread)."""
    futures = [client.submit(_warm_up, warmup, tmp, opencl, pure=False, workers=[address],
                             allow_other_workers=False)
               for address in client.scheduler_info()["workers"]]
    client.gather(futures)


def _family(procs: list[Any]) -> list[Any]:
    """These processes and all their descendants now."""
    import psutil

    found: dict[int, Any] = {}
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):  # gone: so is its CPU time
            for p in [proc, *proc.children(recursive=True)]:
                found[p.pid] = p
    return list(found.values())


def _cpu(procs: list[Any]) -> tuple[float, float]:
    """User and system CPU seconds of these processes so far (every thread)."""
    import psutil

    user = system = 0.0
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = p.cpu_times()
            user, system = user + times.user, system + times.system
    return user, system


def _timed_run(pipeline: Any, source: str, output: str, executor: Any,
               workers: list[Any]) -> dict[str, Any]:
    """One run: wall; user and system CPU of the executor's processes (this process with
    its own threads, the workers with their children); CPU of this process's main thread
    (inline: the groups; dask: the driver); CPU of the rest of this process's tree (the
    idle clusters of the other executors)."""
    import psutil

    from memtype.pipeline import ExecutionOptions

    main = psutil.Process()
    mine, every = [main, *_family(workers)], _family([main])  # LocalCluster: main's children
    before, every0 = _cpu(mine), _cpu(every)
    clock = _clock()
    own0 = time.thread_time()
    start = time.perf_counter()
    report = pipeline.run(source, output, executor=executor,
                          execution=ExecutionOptions(progress=clock))
    end = time.perf_counter()
    own = time.thread_time() - own0
    after, every1 = _cpu(mine), _cpu(every)
    assert report.ok, report.summary()
    user, system = after[0] - before[0], after[1] - before[1]
    last = {worker: t for t, worker in clock.finished}  # each worker's last group
    return {"wall": end - start, "user": user, "system": system, "main_thread": own,
            "others": max(0.0, sum(every1) - sum(every0) - user - system),
            "before_groups": clock.started - start, "after_groups": end - max(last.values()),
            "tail": max(last.values()) - min(last.values()),
            "groups_per_worker": sorted(Counter(w for _, w in clock.finished).values()),
            "load": os.getloadavg()[0]}


def _clock() -> Any:
    """A progress bar that notes when the groups start and when each finishes, where."""
    from memtype.pipeline.execution.progress import Progress

    class Clock(Progress):
        def __init__(self) -> None:
            self.started = 0.0
            self.finished: list[tuple[float, str]] = []

        def start(self, total: int, description: str) -> None:
            self.started = time.perf_counter()

        def group_done(self, result: Any) -> None:
            self.finished.append((time.perf_counter(), result.worker))

    return Clock()


def _child(config: dict[str, Any]) -> dict[str, Any]:
    """``memory``: one run in this fresh process, with its peaks. ``alternate``: runs over
    each input in turn, ``rounds`` times (order reversed every other round)."""
    if config["mode"] == "speedup":
        return _speedup(config)
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


def _speedup_plate(root: Path, args: argparse.Namespace) -> tuple[Path, Path]:
    """The speed-up plate, and its first well alone (hard links) for the warm-ups."""
    from memtype.pipeline import SyntheticPlate, write_synthetic_plate

    plate = SyntheticPlate(wells=args.speedup_wells, sites=4, z_planes=5,
                           size=args.speedup_size)
    full, first = root / "speedup", root / "speedup-warmup"
    write_synthetic_plate(full, plate)
    first.mkdir()
    for name in os.listdir(full):
        if name.split("_", 1)[0] == plate.well_names[0]:
            os.link(full / name, first / name)
    return full, first


def _speedup_table(out: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """Per executor: medians of wall and CPU; per baseline (inline process, one inline
    worker) each other executor's speed-up, parallel efficiency (the baseline's CPU /
    (workers x wall)) and CPU over the baseline's, per round; the serial parts."""
    runs = out["runs"]
    names = list(dict.fromkeys(r["executor"] for r in runs))
    lines = ["| executor | wall s | CPU s | user CPU s | system CPU s | cores busy | "
             "before the groups s | tail s | after the groups s | groups per worker |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name in names:
        mine = [r for r in runs if r["executor"] == name]
        lines.append(
            f"| {name} | {_median_of(mine, 'wall'):.1f} "
            f"| {statistics.median(_cpu_of(r) for r in mine):.1f} "
            f"| {_median_of(mine, 'user'):.1f} | {_median_of(mine, 'system'):.1f} "
            f"| {statistics.median(_cpu_of(r) / r['wall'] for r in mine):.2f} "
            f"| {_median_of(mine, 'before_groups'):.2f} | {_median_of(mine, 'tail'):.2f} "
            f"| {_median_of(mine, 'after_groups'):.2f} "
            f"| {'; '.join(', '.join(map(str, r['groups_per_worker'])) for r in mine)} |")
    lines += ["", "| executor | baseline | speed-up | per round | parallel efficiency | "
              "per round | CPU / baseline's CPU |", "|---|---|---:|---|---:|---|---:|"]
    for base in [b for b in _BASELINES if b in names]:
        by_round = {r["round"]: r for r in runs if r["executor"] == base}
        for name in [n for n in names if n not in _BASELINES]:
            mine = [r for r in runs if r["executor"] == name]
            ratios = [by_round[r["round"]]["wall"] / r["wall"] for r in mine]
            eff = [_cpu_of(by_round[r["round"]]) / (r["workers"] * r["wall"]) for r in mine]
            extra = [_cpu_of(r) / _cpu_of(by_round[r["round"]]) for r in mine]
            lines.append(
                f"| {name} | {_BASELINES[base]} ({base}) | {statistics.median(ratios):.2f}x "
                f"| {', '.join(f'{x:.2f}' for x in ratios)} | {statistics.median(eff):.2f} "
                f"| {', '.join(f'{x:.2f}' for x in eff)} | {statistics.median(extra):.2f} |")
    return lines + ["", _speedup_notes(out, args, names)]


def _speedup_notes(out: dict[str, Any], args: argparse.Namespace, names: list[str]) -> str:
    """What the speed-up tables' columns mean, the plate, the load, the excluded set-up."""
    runs = out["runs"]
    loads = [r["load"] for r in runs]
    threads = {b: statistics.median(r["main_thread"] for r in runs if r["executor"] == b)
               for b in _BASELINES if b in names}
    cpus = {b: statistics.median(_cpu_of(r) for r in runs if r["executor"] == b)
            for b in threads}
    others = "; ".join(f"{n} {_median_of([r for r in runs if r['executor'] == n], 'others'):.1f} s"
                       for n in names)
    return (
        f"Plate: {args.speedup_wells} wells x 4 sites x 2 channels x 5 planes of "
        f"{args.speedup_size} x {args.speedup_size} uint16; tasks by "
        f"{', '.join(args.task_by or ['well'])}; {args.speedup_rounds} alternating "
        f"rounds; 1-minute load average {min(loads):.1f} to {max(loads):.1f} during the runs. "
        "Baselines: inline process (`inline`: a plain process, every framework free to use "
        "every core) and one inline worker (`inline-worker`: the same inline run in a process "
        "started with the environment of one dask worker of memtype's cluster, "
        f"{out.get('worker_environ') or '(not run)'}: what each of the 2 workers has). "
        "CPU: user + system seconds of the main process and the executor's workers with "
        "their children. Cores busy: CPU / wall. Parallel efficiency: the baseline's CPU "
        "seconds of the same round / (2 workers x wall): 1.00 is 2 cores doing the baseline's "
        "work and nothing else for the whole run. It falls below 1 by the CPU an executor "
        "spends over the baseline's (CPU / baseline's CPU: on a loaded machine this ratio "
        "still holds) and by the share of 2 cores its workers did not get (cores busy below "
        "2: other jobs, a worker idle in the tail, serial work). A speed-up over a baseline "
        "that keeps more than one core busy is bounded by 2 / its cores busy. Before the "
        "groups: from the call to the first group handed to the executor (planning, the "
        "output's preparation; in the driver, serial). Tail: from the first worker's last "
        "group to the last group (a worker idle while the other works). After the groups: "
        "from the last group to the end of the run (the plate's metadata, the tables, the "
        "report; serial). Main thread's share of the CPU: "
        + "; ".join(f"{b} {threads[b]:.1f} of {cpus[b]:.1f} s" for b in threads)
        + " (the rest: kernel threads of torch, XLA and the OpenCL driver). CPU of the other "
        f"executors' idle clusters during each run (not in the table): {others}. Excluded "
        "from the times (paid once per process or cluster): "
        + "; ".join(f"{k} {v:.1f} s" for k, v in out["setup"].items()) + ".")


def _cpu_of(run: dict[str, Any]) -> float:
    """User + system CPU seconds of a run."""
    return float(run["user"] + run["system"])


def _run_child(config: dict[str, Any], timeout: float = 900,
               live: bool = False) -> dict[str, Any]:
    """Run a child; ``live``: its stderr (progress, one JSON line per run) goes to ours."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(config)],
                          stdout=subprocess.PIPE, stderr=None if live else subprocess.PIPE,
                          text=True, env=env, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}): "
                           f"{(proc.stderr or '(its stderr is above)')[-3000:]}")
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


def _scale_phases(root: Path, dirs: dict[int, Path], sizes: list[int],
                  args: argparse.Namespace
                  ) -> tuple[dict[tuple[str, int], list[dict[str, Any]]],
                             dict[str, list[dict[str, Any]]]]:
    """1. each size in a fresh process (peaks, held per group); 2. time, alternating."""
    results: dict[tuple[str, int], list[dict[str, Any]]] = {}
    alternated: dict[str, list[dict[str, Any]]] = {}
    order = [(e, n) for n in sizes for e in args.executors]
    for r in range(args.rounds):
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
    for executor in args.executors if args.time_rounds else []:
        run_tmp = root / f"time-{executor}"
        run_tmp.mkdir()
        t0 = time.perf_counter()
        out = _run_child({"mode": "alternate", "executor": executor,
                          "inputs": {small: str(dirs[small]), large: str(dirs[large])},
                          "rounds": args.time_rounds, "warmup": str(dirs[1]),
                          "tmp": str(run_tmp)})
        alternated[executor] = out["runs"]
        print(f"time {executor}: {time.perf_counter() - t0:.0f} s", flush=True)
    return results, alternated


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--serve-inline", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--wells", type=int, nargs="+", default=[1, 24, 96])
    parser.add_argument("--executors", nargs="+", default=["inline", "dask"])
    parser.add_argument("--rounds", type=int, default=1, help="memory rounds (fresh processes)")
    parser.add_argument("--time-rounds", type=int, default=3,
                        help="alternating rounds of the two largest plates in one process")
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--sites", type=int, default=1)
    parser.add_argument("--z-planes", type=int, default=8)
    parser.add_argument("--speedup-rounds", type=int, default=2,
                        help="alternating rounds of inline, threads and dask (0: skip)")
    parser.add_argument("--speedup-wells", type=int, default=24)
    parser.add_argument("--speedup-executors", nargs="+",
                        choices=["inline", "inline-worker", "threads", "stock", "dask"],
                        default=["inline-worker", "threads", "stock", "dask"],
                        help="besides inline, which always runs: inline-worker (inline in a "
                        "process with one dask worker's environment: the second baseline), "
                        "threads, stock (a stock LocalCluster), dask (memtype's cluster); "
                        "e.g. inline-worker dask")
    parser.add_argument("--speedup-size", type=int, default=1024)
    parser.add_argument("--task-by", nargs="+", default=None,
                        help="fields a speed-up task holds (default: the demo's, well; "
                             "e.g. well site: 4 tasks a well, the same results)")
    parser.add_argument("--results", type=Path, default=OUT,
                        help="folder of the result files (default: benchmarks/results)")
    parser.add_argument("--only-speedup", action="store_true",
                        help="skip the memory and time phases")
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_child(json.loads(args.child))))
        return
    if args.serve_inline is not None:
        _serve_inline(json.loads(args.serve_inline))
        return
    started = time.perf_counter()
    sizes = sorted(set(args.wells))
    results: dict[tuple[str, int], list[dict[str, Any]]] = {}
    alternated: dict[str, list[dict[str, Any]]] = {}
    speedup: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="memtype-scale-") as tmp:
        root = Path(tmp)
        if not args.only_speedup:
            dirs = _plates(root, sorted(set(sizes) | {1}), args)
            print(f"plates written in {time.perf_counter() - started:.1f} s", flush=True)
            results, alternated = _scale_phases(root, dirs, sizes, args)
        if args.speedup_rounds:  # 3. speed-up over inline on the 1024 x 1024 plate
            t0 = time.perf_counter()
            full, first = _speedup_plate(root, args)
            print(f"speed-up plate written in {time.perf_counter() - t0:.1f} s", flush=True)
            run_tmp = root / "speedup-runs"
            run_tmp.mkdir()
            speedup = _run_child({"mode": "speedup", "input": str(full), "warmup": str(first),
                                  "rounds": args.speedup_rounds, "tmp": str(run_tmp),
                                  "executors": args.speedup_executors,
                                  "task_by": args.task_by},
                                 timeout=4 * 3600, live=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    opencl = (speedup or next(iter(results.values()), [{}])[0]).get("opencl", False)
    head = (f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores (load average at the "
            f"end {load}), Python {platform.python_version()}; {datetime.date.today()}; "
            f"median step on {'pyclesperanto' if opencl else 'scipy'}. Whole run "
            f"{time.perf_counter() - started:.0f} s.")
    args.results.mkdir(exist_ok=True)
    if results:
        small, large = sizes[-2:] if len(sizes) > 1 else (sizes[0], sizes[0])
        results = {k: results[k]
                   for k in sorted(results, key=lambda k: (k[0] != "inline", k[1]))}
        _write("scale.md", [
            "# Scale (benchmarks/scale.py)", "", head, "",
            f"Plate: N wells x {args.sites} sites x 2 channels x {args.z_planes} planes "
            f"of {args.size} x {args.size} uint16.", "",
            f"Memory (each size in a fresh process, median of {args.rounds} round(s)):", "",
            *_memory_table(results), "",
            f"Time per group ({small} and {large} wells alternated in one process, "
            f"{args.time_rounds} rounds, medians):", "",
            *(_time_table(alternated, small, large) if alternated else ["(not run)"])],
            args.results)
    if speedup is not None:
        _write("scale_speedup.md", [
            "# Scale out: speed-up over an inline process and one inline worker "
            "(benchmarks/scale.py)", "",
            f"<!-- python benchmarks/scale.py {' '.join(sys.argv[1:])} -->", "", head, "",
            *_speedup_table(speedup, args)], args.results)


def _worker_environ() -> dict[str, str]:
    """The environment a dask worker of ``DaskExecutor`` runs groups in: one thread per
    kernel (dask's OpenMP/BLAS limits, pocl's pool, XLA single-threaded) and its malloc
    settings."""
    import dask

    from memtype.pipeline.execution.executors import dask_worker_environ

    pre_spawn, environ = dask_worker_environ(threads=1)
    return {**{k: str(v) for k, v in dask.config.get("distributed.nanny.pre-spawn-environ",
                                                     {}).items()},
            **pre_spawn, **environ}


def _write(name: str, lines: list[str], folder: Path) -> None:
    """Write a result file and print it."""
    text = "\n".join(lines)
    (folder / name).write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
