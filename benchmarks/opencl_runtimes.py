"""pyclesperanto on the two CPU OpenCL runtimes that install from pip (pocl and Intel's), and
the cost of memtype's runtime probe, in fresh alternating processes.

Each round starts one fresh process per runtime (the order alternates between rounds; the
runtime chosen with ``MEMTYPE_OPENCL_RUNTIMES``, the system's platforms hidden), which times
the demo's pyclesperanto work on a 2-channel, 5-plane 512x512 float32 stack (the demo's
``denoise`` median 3x3 per plane and its maximum projection): the first call (with the
kernel builds) and the median of 5 later calls, wall seconds. The probe is timed in the
parent: ``runtime()`` with an empty verdict cache (one child process per candidate) and
with the cache filled.

With ``--demo``, each round also runs ``memtype demo`` (4 wells x 4 sites x 2 channels x
8 planes of 512x512, inline) once per runtime, alternating, and reports its wall seconds and
the nuclei it counted.

Run: ``python benchmarks/opencl_runtimes.py [--rounds 3] [--demo]``; writes
``benchmarks/results/opencl_runtimes.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results" / "opencl_runtimes.md"

WORK = r"""
import json, statistics, time
import numpy as np
import memtype as mt
from memtype.frameworks import _opencl, load_adapter
load_adapter("pyclesperanto")
import pyclesperanto as cle
stack = np.random.default_rng(0).random((10, 512, 512), dtype=np.float32)

def work():
    g = cle.push(stack)
    med = cle.median(g, radius_x=1, radius_y=1, radius_z=0, connectivity="box")
    proj = cle.maximum_z_projection(med)
    return float(np.asarray(proj).sum())

t0 = time.perf_counter(); first_value = work(); first = time.perf_counter() - t0
later = []
for _ in range(5):
    t0 = time.perf_counter(); value = work(); later.append(time.perf_counter() - t0)
print(json.dumps({"runtime": _opencl.runtime().detail, "first": first,
                  "median": statistics.median(later), "value": value}))
"""

PROBE_COST = r"""
import json, time
from memtype.frameworks import _opencl
t0 = time.perf_counter(); _opencl.runtime(); cold = time.perf_counter() - t0
_opencl._decision = None
t0 = time.perf_counter(); d = _opencl.runtime(); warm = time.perf_counter() - t0
print(json.dumps({"cold": cold, "warm": warm, "tried": len(d.tried)}))
"""


def _env(runtime: str, cache: str, vendors: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OCL_ICD_FILENAMES"}
    env.update({"MEMTYPE_OPENCL_RUNTIMES": runtime, "MEMTYPE_CACHE_DIR": cache,
                "OCL_ICD_VENDORS": vendors})
    return env


def _run(code: str, env: dict[str, str]) -> dict[str, float | str]:
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True)
    result: dict[str, float | str] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _demo(env: dict[str, str], out: str) -> tuple[float, str]:
    """``memtype demo`` once: wall seconds and its "nuclei" line."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "memtype", "demo", "--out", out,
                           "--overwrite", "--no-progress"], env=env, capture_output=True,
                          text=True, check=True)
    wall = time.perf_counter() - t0
    nuclei = next(line for line in done.stdout.splitlines() if line.startswith("nuclei"))
    return wall, nuclei


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--demo", action="store_true", help="also time memtype demo")
    args = parser.parse_args()
    demos: dict[str, list[tuple[float, str]]] = {"pocl": [], "intel": []}
    runtimes = ["pocl", "intel"]
    seen: dict[str, list[dict[str, float | str]]] = {r: [] for r in runtimes}
    probes: list[dict[str, float | str]] = []
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as vendors:
        for k in range(args.rounds):
            for runtime in runtimes if k % 2 == 0 else runtimes[::-1]:
                seen[runtime].append(_run(WORK, _env(runtime, cache, vendors)))
                if args.demo:
                    with tempfile.TemporaryDirectory() as out:
                        demos[runtime].append(_demo(_env(runtime, cache, vendors),
                                                    os.path.join(out, "demo")))
            with tempfile.TemporaryDirectory() as fresh:
                probes.append(_run(PROBE_COST, _env("pocl,intel", fresh, vendors)))
    lines = [f"# pyclesperanto on pip's CPU OpenCL runtimes ({time.strftime('%Y-%m-%d')})", "",
             f"{args.rounds} alternating rounds of fresh processes; 10x512x512 float32: "
             "median 3x3 per plane + maximum projection; wall seconds.", "",
             "| runtime | first call (builds) | later calls (median) | value |",
             "|---|---|---|---|"]
    for runtime in runtimes:
        rows = seen[runtime]
        lines.append(f"| {rows[0]['runtime']} | "
                     f"{statistics.median(float(r['first']) for r in rows):.3f} | "
                     f"{statistics.median(float(r['median']) for r in rows):.4f} | "
                     f"{rows[0]['value']:.1f} |")
    ratio = statistics.median(float(p["median"]) / float(i["median"])
                              for p, i in zip(seen["pocl"], seen["intel"]))
    lines += ["", f"pocl / Intel, later calls: {ratio:.2f}x (median of per-round ratios)", "",
              "Probe (both runtimes, `runtime()` in a fresh process): empty cache "
              f"{statistics.median(float(p['cold']) for p in probes):.3f} s, filled cache "
              f"{1000 * statistics.median(float(p['warm']) for p in probes):.2f} ms."]
    if args.demo:
        lines += ["", "`memtype demo` end to end (wall seconds, median over rounds):", ""]
        for runtime in runtimes:
            walls = [w for w, _ in demos[runtime]]
            lines.append(f"- {runtime}: {statistics.median(walls):.1f} s "
                         f"({demos[runtime][0][1]})")
        demo_ratio = statistics.median(p[0] / i[0] for p, i in zip(demos["pocl"],
                                                                  demos["intel"]))
        lines.append(f"- pocl / Intel: {demo_ratio:.2f}x (median of per-round ratios)")
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
