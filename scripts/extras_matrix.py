"""Install the built wheel alone and with each extra in fresh virtual environments, and check
that each one works: import, `memtype info`, a numpy <-> framework round trip, and the part of
the test suite its frameworks allow (the rest skips, with the reason).

Usage: python scripts/extras_matrix.py [--extras none,torch,jax,...] [--keep DIR]

Versions come from constraints.txt (the tested set). ``lowest-<extra>`` (``lowest`` for no
extra) installs instead the lowest versions pyproject.toml declares, for the base
requirements and that extra's (a lower bound ``>=X`` becomes ``==X``), the rest of the
environment from constraints.txt. Exits 1 if any environment failed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("none", "torch", "jax", "tensorflow", "cle", "mlx", "zarr", "dask")
# torch is left out of the lowest-version runs: an old torch from PyPI is the multi-GB CUDA
# build (only the tested CPU build is at hand), which fresh machines here cannot afford.
LOWEST = ("lowest", "lowest-zarr", "lowest-dask", "lowest-jax")
# The memory type each extra brings (round trip with numpy); None: storage/pipeline extras.
FRAMEWORK = {"torch": "torch", "jax": "jax", "tensorflow": "tensorflow", "mlx": "mlx",
             "cle": "pyclesperanto"}
TEST_TOOLS = ("pytest", "hypothesis", "pytest-timeout")
ROUND_TRIP = """
import numpy as np, memtype as mt, sys
name = sys.argv[1]
a = np.arange(12, dtype=np.float32).reshape(3, 4)
b = mt.convert(mt.convert(a, name), "numpy")
assert (b == a).all() and b.dtype == a.dtype, (b, b.dtype)
assert mt.detect_memory_type(mt.convert(a, name)).value == name
print(f"numpy -> {name} -> numpy ok")
"""


@dataclass
class Outcome:
    extra: str
    ok: bool
    summary: str
    seconds: float


def _run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None,
         timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def build_wheel(out: Path) -> Path:
    """``python -m build`` (sdist and wheel) into ``out``; the wheel's path."""
    done = _run([sys.executable, "-m", "build", "--no-isolation", "-o", str(out), str(ROOT)])
    if done.returncode != 0:
        sys.exit(f"build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    wheels = sorted(out.glob("memtype-*.whl"))
    if not wheels or not sorted(out.glob("memtype-*.tar.gz")):
        sys.exit(f"build made no wheel and sdist in {out}")
    return wheels[-1]


def _summary(pytest_out: str) -> str:
    lines = [line for line in pytest_out.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    return lines[-1].strip("= ") if lines else "(no pytest summary)"


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def lowest_constraints(extra: str, out: Path) -> Path:
    """constraints.txt with the base requirements and ``extra``'s at their lower bounds."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    if extra:
        requirements += project["optional-dependencies"][extra]
    lowest: dict[str, str] = {}
    for requirement in requirements:
        spec = requirement.split(";")[0]
        bound = re.search(r">=\s*([\w.]+)", spec)
        if bound and "memtype" not in spec:
            lowest[_name(spec)] = f"{_name(spec)}=={bound.group(1)}"
    kept = [line for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#") and _name(line) not in lowest]
    out.write_text("\n".join([*kept, *lowest.values()]) + "\n")
    return out


def check_extra(extra: str, wheel: Path, work: Path, env: dict[str, str]) -> Outcome:
    """One fresh venv: install, import, info, round trip, tests."""
    start = time.perf_counter()
    venv = work / f"venv-{extra}"
    py = venv / "bin" / "python"
    constraints = ROOT / "constraints.txt"
    name = extra
    if extra.startswith("lowest"):
        name = extra.removeprefix("lowest").removeprefix("-") or "none"
        constraints = lowest_constraints("" if name == "none" else name,
                                         work / f"constraints-{extra}.txt")
    spec = f"{wheel}" if name == "none" else f"memtype[{name}] @ {wheel.as_uri()}"
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(py), "-m", "pip", "install", "-q", "-c", str(constraints), spec, *TEST_TOOLS],
        [str(py), "-c", "import memtype, importlib.metadata as m; "
                        "assert memtype.__version__ == m.version('memtype'); print('import ok')"],
        [str(venv / "bin" / "memtype"), "info"],
    ]
    if name in FRAMEWORK:
        steps.append([str(py), "-c", ROUND_TRIP, FRAMEWORK[name]])
    for cmd in steps:
        done = _run(cmd, env=env)
        if done.returncode != 0:
            return Outcome(extra, False, f"{Path(cmd[0]).name} failed: {done.stderr[-1500:]}",
                           time.perf_counter() - start)
    tests = _run([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
                  "not slow and not gpu", "tests"], cwd=ROOT, env=env)
    summary = _summary(tests.stdout)
    ok = tests.returncode == 0
    if not ok:
        failed = [line for line in tests.stdout.splitlines() if line.startswith(("FAILED",
                                                                              "ERROR"))]
        summary += "\n    " + "\n    ".join(failed[:20] or [tests.stdout[-1500:]])
    return Outcome(extra, ok, summary, time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", default=",".join(EXTRAS),
                        help=f"comma-separated, from: {', '.join(EXTRAS + LOWEST)}")
    parser.add_argument("--keep", type=Path, default=None,
                        help="work in this directory and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    extras = [e.strip() for e in args.extras.split(",") if e.strip()]
    unknown = [e for e in extras if e not in EXTRAS + LOWEST]
    if unknown:
        parser.error(f"unknown extra(s) {unknown}; expected some of "
                     f"{', '.join(EXTRAS + LOWEST)}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="memtype-extras-"))
    work.mkdir(parents=True, exist_ok=True)
    # The system's OpenCL platforms hidden, as on a fresh machine; the rest of the env kept.
    vendors = work / "no-opencl-vendors"
    vendors.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("OCL_ICD_FILENAMES", "VIRTUAL_ENV")}
    env["OCL_ICD_VENDORS"] = str(vendors)
    try:
        wheel = build_wheel(work / "dist")
        outcomes = [check_extra(extra, wheel, work, env) for extra in extras]
    finally:
        if args.keep is None:
            shutil.rmtree(work)
    print("\n| extra | result | tests | seconds |\n|---|---|---|---|")
    for o in outcomes:
        first, _, rest = o.summary.partition("\n")
        print(f"| {o.extra} | {'ok' if o.ok else 'FAILED'} | {first} | {o.seconds:.0f} |")
        if rest:
            print(rest)
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
