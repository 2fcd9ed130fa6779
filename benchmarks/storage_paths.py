"""DiskStore hot paths: the current store next to the pre-hardening one and plain NumPy.

Times ``exists`` and ``load`` / ``save`` of 16 KB, 4 MB and 64 MB ``.npy`` files and ``load``
of a 1 MB ``.tif``, for three systems in alternating rounds in one process:

* ``memtype``: the DiskStore of this checkout;
* ``baseline``: the DiskStore of another commit, by default ``117fdca^`` (the store before
  descriptor walking, the OS-error translation and the checked readers; ``--baseline``
  picks another), extracted with ``git archive`` into a temporary directory and imported
  as the package ``memtype_old`` (its imports rewritten; nothing is committed or left
  behind);
* ``numpy``: ``np.save`` / ``np.load`` / ``tifffile.imread`` / ``os.path.lexists`` on the
  full path.

Usage::

    python benchmarks/storage_paths.py            # about a minute
    python benchmarks/storage_paths.py --rounds 5 --only exists
    python benchmarks/storage_paths.py --baseline HEAD     # working tree vs last commit

Each round times every (case, system) once, systems in rotating order; a timing is the
best of three batches (each a few milliseconds long). Reported: the median over rounds and the
ratios memtype / baseline and memtype / numpy (lower is faster).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import io
import os
import platform
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
OLD_COMMIT = "117fdca^"
OLD_NAME = "memtype_old"
DEEP = "p/A01/f1/z0/x.npy"  # four directories down
_IMPORT = re.compile(r"\bmemtype(?=\.[A-Za-z_])|(?<=import )memtype\b|(?<=from )memtype\b")


def import_old(commit: str, into: Path) -> Any:
    """The ``memtype`` package of ``commit``, imported as :data:`OLD_NAME`."""
    blob = subprocess.run(["git", "-C", str(REPO), "archive", commit, "src/memtype"],
                          check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    src = into / "src" / "memtype"
    for py in src.rglob("*.py"):
        py.write_text(_IMPORT.sub(OLD_NAME, py.read_text()))
    src.rename(into / OLD_NAME)
    sys.path.insert(0, str(into))
    return importlib.import_module(f"{OLD_NAME}.storage")


def per_call(fn: Callable[[], Any], target_s: float = 0.02) -> float:
    """Seconds per call of ``fn``: the best of three batches that together take about
    ``target_s`` (on a shared machine the best batch is the one least disturbed)."""
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    n = max(1, min(1000, int(target_s / 3 / max(once, 1e-7))))
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best


def build_cases(root: Path, stores: dict[str, Any]) -> dict[str, dict[str, Callable[[], Any]]]:
    """Case -> system -> a call to time. Each system reads and writes its own files."""
    import tifffile

    rng = np.random.default_rng(0)
    arrays = {"16 KB": rng.random(2048), "4 MB": rng.random((512, 1024)),
              "64 MB": rng.random((2048, 4096))}
    tif = rng.integers(0, 4096, (512, 1024), dtype=np.uint16)
    cases: dict[str, dict[str, Callable[[], Any]]] = {}
    for label in ("exists (depth 1)", "exists (depth 4)"):
        cases[label] = {}
    for label in arrays:
        cases[f"load .npy {label}"] = {}
        cases[f"save .npy {label}"] = {}
    cases["load .tif 1 MB"] = {}
    for system, store in stores.items():
        base = root / system
        base.mkdir()
        (base / DEEP).parent.mkdir(parents=True)
        np.save(base / DEEP, arrays["16 KB"])
        np.save(base / "x.npy", arrays["16 KB"])
        tifffile.imwrite(base / "img.tif", tif, photometric="minisblack")
        if store is None:
            cases["exists (depth 1)"][system] = lambda p=str(base / "x.npy"): os.path.lexists(p)
            cases["exists (depth 4)"][system] = lambda p=str(base / DEEP): os.path.lexists(p)
            cases["load .tif 1 MB"][system] = lambda p=base / "img.tif": tifffile.imread(p)
        else:
            s = store(base)
            cases["exists (depth 1)"][system] = lambda s=s: s.exists("x.npy")
            cases["exists (depth 4)"][system] = lambda s=s: s.exists(DEEP)
            cases["load .tif 1 MB"][system] = lambda s=s: s.load("img.tif")
        for label, a in arrays.items():
            name = f"{label.replace(' ', '')}.npy"
            np.save(base / name, a)
            if store is None:
                path = base / name
                cases[f"load .npy {label}"][system] = lambda p=path: np.load(p)
                cases[f"save .npy {label}"][system] = lambda p=path, a=a: np.save(p, a)
            else:
                cases[f"load .npy {label}"][system] = lambda s=s, n=name: s.load(n)
                cases[f"save .npy {label}"][system] = \
                    lambda s=s, n=name, a=a: s.save(a, n, overwrite=True)
    return cases


def run(cases: dict[str, dict[str, Callable[[], Any]]], rounds: int) -> dict[str, dict[str, float]]:
    """Median seconds per call of every (case, system), rounds alternating the systems."""
    times: dict[str, dict[str, list[float]]] = {
        c: {s: [] for s in systems} for c, systems in cases.items()}
    for r in range(rounds + 1):  # round 0 warms up
        for case, systems in cases.items():
            names = list(systems)
            names = names[r % len(names):] + names[:r % len(names)]
            for system in names:
                gc.collect()
                t = per_call(systems[system])
                if r:
                    times[case][system].append(t)
    return {c: {s: statistics.median(v) for s, v in per.items()} for c, per in times.items()}


def fmt(seconds: float) -> str:
    """A duration in µs or ms."""
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def report(result: dict[str, dict[str, float]], rounds: int, baseline: str) -> str:
    """A Markdown table of medians and ratios."""
    lines = [f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
             f"{platform.python_version()}, NumPy {np.__version__}; "
             f"{time.strftime('%Y-%m-%d')}; median of {rounds} alternating rounds; "
             f"baseline: the DiskStore of commit {baseline}.", "",
             "| case | memtype | baseline | numpy | memtype / baseline | "
             "memtype / numpy |", "|---|---|---|---|---|---|"]
    for case, t in result.items():
        new, old, plain = t["memtype"], t["baseline"], t["numpy"]
        lines.append(f"| {case} | {fmt(new)} | {fmt(old)} | {fmt(plain)} | "
                     f"{new / old:.2f}x | {new / plain:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    """Run the comparison and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", default="", help="run only cases containing this text")
    parser.add_argument("--baseline", default=OLD_COMMIT,
                        help=f"commit whose DiskStore to compare with (default {OLD_COMMIT}, "
                             "the store before the hardening)")
    args = parser.parse_args()
    from memtype.storage import DiskStore

    with tempfile.TemporaryDirectory() as tmp:
        old = import_old(args.baseline, Path(tmp) / "old")
        stores = {"memtype": DiskStore, "baseline": old.DiskStore, "numpy": None}
        data = Path(tmp) / "data"
        data.mkdir()
        cases = {c: s for c, s in build_cases(data, stores).items() if args.only in c}
        print(report(run(cases, args.rounds), args.rounds, args.baseline))


if __name__ == "__main__":
    main()
