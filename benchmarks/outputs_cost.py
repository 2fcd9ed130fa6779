"""What the viewer-ready outputs cost a demo run (issue 24, section 6): labels, tables and
metadata in the plate, against the same run without them.

Variants (the same synthetic plate, the same pipeline, the same images, CSV tables,
plate_overview.png and montage):

* ``full``: :func:`memtype.pipeline.demo.run_demo` as shipped: the nuclei written as
  OME-Zarr labels beside every field (staged, then saved with their pyramid), every
  side-output table also written into the plate (``<field>/tables/<name>``), the ROI tables
  (``FOV_ROI_table``, ``well_ROI_table``, ``nuclei_ROI_table``) and each channel's display
  window computed from the data;
* ``bare``: the same run writing none of these: no labels, no table in the plate, no ROI
  table, a fixed display window (the ``segment_nuclei`` step still runs and
  ``nuclei.csv`` is still written: the segmentation is the science, not an output);
* ``noseg``: ``bare`` without the ``segment_nuclei`` step (the demo before issue 24).

Two measures: the A/B ratio of the run's CPU seconds (fresh processes, alternating), and,
within each ``full`` run, the CPU seconds the main thread spends in the functions that
write the outputs (``time.thread_time``; the run is inline, so they are all on that thread)
as a share of the run's CPU seconds: the direct measure, robust where the machine is loaded
(its other threads' work and spinning count in the run, not in the outputs).

Each measurement is a fresh process (imports and a small warm-up run outside the timed
part), the variants alternate, their order reversed every other round, so drift and load
fall on all alike. Measured: the CPU seconds of the process during the run (user + system,
all threads: what the outputs cost, much less sensitive to other processes' load than wall
time) and the wall seconds. Printed: per-variant medians, the median of the per-round
ratios, the load average before and after, the date and the machine.

Usage::

    python benchmarks/outputs_cost.py                          # 3 rounds, make-demo plate
    python benchmarks/outputs_cost.py --rounds 5 --wells 8 --variants bare,full,noseg
    python benchmarks/outputs_cost.py --rounds 1 --first-round 2   # round 2 alone: full, bare
    python benchmarks/outputs_cost.py --profile                # where the full run's outputs
                                                               # spend their time
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

VARIANTS = ("bare", "full", "noseg")
# the functions that write issue 24's outputs (for --profile): the first five hold the rest
OUTPUTS = ("_stage_labels", "_write_labels", "write_tables", "_write_field_rois",
           "_window")
PARTS = ("write_labels", "save_labels", "write_object_rois", "write_table",
         "write_roi_table", "write_overview")


def _plate(args: argparse.Namespace) -> Any:
    """The synthetic plate of the run (the make-demo plate unless sizes are given)."""
    from memtype.pipeline.synthetic import SyntheticPlate

    given = {k: v for k, v in (("wells", args.wells), ("sites", args.sites),
                               ("z_planes", args.z_planes), ("size", args.size)) if v}
    return SyntheticPlate(**given)


def _strip(variant: str) -> None:
    """Turn this process's demo into ``variant`` (a fresh process per measurement)."""
    if variant == "full":
        return
    from memtype.omezarr import assemble
    from memtype.omezarr import pyramid as _pyramid
    from memtype.pipeline import demo
    from memtype.pipeline.io import outputs

    def nothing(*_: Any, **__: Any) -> None:
        return None

    outputs.OutputSpec._stage_labels = nothing  # type: ignore[method-assign]
    outputs.OutputSpec._write_labels = nothing  # type: ignore[method-assign]
    assemble.write_tables = nothing
    assemble._write_field_rois = nothing
    assemble.write_object_rois = nothing
    _pyramid._window = lambda sample: {"min": 0.0, "max": 1.0,
                                       "start": 0.0, "end": 1.0}
    if variant == "noseg":
        shipped = demo.demo_pipeline

        def without_segmentation(use_opencl: bool | None = None) -> Any:
            pipeline = shipped(use_opencl)
            pipeline.steps = [s for s in pipeline.steps if s.labels is None]
            return pipeline

        demo.demo_pipeline = without_segmentation


def _timed(spent: dict[str, float]) -> None:
    """Wrap the functions that write the outputs (in ``full``), adding the CPU seconds of
    the calling thread in them to ``spent``: the run is inline, so every output is written
    by the main thread, and other threads' work (or spinning) is not counted."""
    from memtype.omezarr import assemble
    from memtype.omezarr import pyramid as _pyramid
    from memtype.pipeline.io import outputs

    def wrap(owner: Any, name: str) -> None:
        function = getattr(owner, name)

        def timed(*a: Any, **k: Any) -> Any:
            start = time.thread_time()
            try:
                return function(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.thread_time() - start

        setattr(owner, name, timed)

    for name in ("_stage_labels", "_write_labels"):
        wrap(outputs.OutputSpec, name)
    for name in ("write_tables", "_write_field_rois"):
        wrap(assemble, name)
    wrap(_pyramid, "_window")


def _child(args: argparse.Namespace) -> None:
    """One measurement: warm up, then time one demo run; prints a JSON line."""
    import pyclesperanto  # noqa: F401  (before tensorflow, as everywhere in memtype)

    from memtype.pipeline import ExecutionOptions, demo
    from memtype.pipeline.synthetic import SyntheticPlate

    _strip(args.child)
    with tempfile.TemporaryDirectory() as out:  # imports, jit: outside the timed run
        demo.run_demo(out, SyntheticPlate(wells=1, sites=1, z_planes=2, size=64),
                      use_opencl=False, execution=ExecutionOptions(progress=False),
                      overwrite=True)
    plate = _plate(args)
    spent: dict[str, float] = {}
    if args.child == "full" and not args.profile:
        _timed(spent)
    with tempfile.TemporaryDirectory() as out:
        profile = cProfile.Profile(time.process_time) if args.profile else None
        cpu, wall = time.process_time(), time.perf_counter()
        if profile:
            profile.enable()
        result = demo.run_demo(out, plate, use_opencl=False,
                               execution=ExecutionOptions(progress=False), overwrite=True)
        if profile:
            profile.disable()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        assert result.report.ok and (result.report.outputs.get("nuclei") is None) == (
            args.child == "noseg")
    print(json.dumps({"variant": args.child, "cpu_s": cpu, "wall_s": wall,
                      "outputs_cpu_s": sum(spent.values()), "outputs": spent}))
    if profile:
        _print_profile(profile, cpu)


def _print_profile(profile: cProfile.Profile, cpu: float) -> None:
    """The cumulative time of each output function, and their share of the run."""
    stats = pstats.Stats(profile)
    seconds: dict[str, tuple[float, int]] = {}
    for (_, _, name), row in stats.stats.items():  # type: ignore[attr-defined]
        if name in OUTPUTS + PARTS:
            old = seconds.get(name, (0.0, 0))
            seconds[name] = (old[0] + row[3], old[1] + row[1])
    for name in OUTPUTS + PARTS:
        cumulative, calls = seconds.get(name, (0.0, 0))
        print(f"  {name:20s} {cumulative:7.3f} s  {calls:5d} calls"
              + ("" if name in OUTPUTS else "  (part of the above, or in every variant)"))
    total = sum(seconds.get(name, (0.0, 0))[0] for name in OUTPUTS)
    print(f"  labels, tables, ROI tables and windows: {total:.2f} CPU s of the run's {cpu:.2f} "
          f"({100 * total / cpu:.1f}%) under the profiler")


def _measure(variant: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one fresh measurement process."""
    command = [sys.executable, __file__, "--child", variant]
    for name in ("wells", "sites", "z_planes", "size"):
        if getattr(args, name):
            command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="bare,full")
    parser.add_argument("--wells", type=int, default=0)
    parser.add_argument("--sites", type=int, default=0)
    parser.add_argument("--z-planes", type=int, default=0)
    parser.add_argument("--size", type=int, default=0)
    parser.add_argument("--first-round", type=int, default=1,
                        help="the number of the first round (rounds run in several "
                             "invocations keep alternating: even rounds reverse the order)")
    parser.add_argument("--profile", action="store_true",
                        help="run the full demo once under cProfile, print its output costs")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    if args.profile:
        args.child = "full"
        _child(args)
        return
    variants = args.variants.split(",")
    load = os.getloadavg()
    times: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for i in range(args.rounds):
        for variant in (variants if (args.first_round + i) % 2 else variants[::-1]):
            times[variant].append(_measure(variant, args))
            last = times[variant][-1]
            print(f"round {args.first_round + i} {variant}: cpu {last['cpu_s']:.2f} s, wall "
                  f"{last['wall_s']:.2f} s, outputs cpu {last['outputs_cpu_s']:.2f} s", flush=True)
    full = [m["outputs_cpu_s"] / m["cpu_s"] for m in times.get("full", [])]
    if full:
        print(f"full: the outputs' own CPU (main thread, in the functions that write them) "
              f"/ the run's CPU: median {100 * statistics.median(full):.1f}% "
              f"({', '.join(f'{100 * v:.1f}' for v in full)}); per function, last round: "
              + ", ".join(f"{k} {v:.2f} s" for k, v in times["full"][-1]["outputs"].items()))
    print(f"{datetime.date.today()}, {platform.node()} ({os.cpu_count()} cores, "
          f"{platform.processor() or platform.machine()}); load average before "
          f"{load[0]:.1f}, after {os.getloadavg()[0]:.1f}; plate {_plate(args)!r}; "
          f"{args.rounds} alternating rounds, a fresh process each")
    base = variants[0]
    for variant in variants:
        for what in ("cpu_s", "wall_s"):
            values = [m[what] for m in times[variant]]
            ratios = [m[what] / b[what] for m, b in zip(times[variant], times[base])]
            print(f"{variant:6s} {what[:-2]:4s} median {statistics.median(values):7.2f} s  "
                  f"({', '.join(f'{v:.2f}' for v in values)}); / {base}: median of the "
                  f"rounds' ratios {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
