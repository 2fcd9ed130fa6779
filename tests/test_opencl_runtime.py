"""pyclesperanto's OpenCL runtime on a machine set up with pip alone (system OpenCL hidden).

Each case runs memtype in a fresh interpreter: the OpenCL loader reads its environment once
per process, so only a new process shows what a new user gets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memtype.frameworks import _opencl

pytestmark = pytest.mark.requires("pyclesperanto")

PIP_POCL = _opencl._pip_pocl()
needs_pip_pocl = pytest.mark.skipif(
    PIP_POCL is None, reason="pocl-binary-distribution is not installed (Linux x86-64 only)")

# Converts to pyclesperanto and back, and reports what memtype decided, as one JSON line.
PROBE = """
import importlib.util, json, os, sys
import numpy as np
import memtype as mt
from memtype.frameworks import _opencl, load_adapter
out = {"env_after_import": os.environ.get("OCL_ICD_FILENAMES")}
if importlib.util.find_spec("torch") is not None:  # another framework, where installed
    out["torch"] = float(mt.convert(np.ones(3, np.float32), "torch").sum())
out["detect"] = mt.detect_memory_type(np.ones(2)).value
a = np.arange(12, dtype=np.float32).reshape(3, 4)
try:
    back = mt.convert(mt.convert(a, "pyclesperanto"), "numpy")
    out["round_trip"] = bool((back == a).all())
except mt.DeviceError as exc:
    out["error"] = str(exc)
out["source"] = _opencl.runtime().source
out["env_after_load"] = os.environ.get("OCL_ICD_FILENAMES")
out["gpu_count"] = load_adapter("pyclesperanto").gpu_count()
print(json.dumps(out))
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    vendors = tmp_path / "vendors"
    vendors.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("OCL_ICD_FILENAMES", _opencl.FALLBACK_VARIABLE)}
    env["OCL_ICD_VENDORS"] = str(vendors)
    env.update(extra)
    return env


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def _probe(env: dict[str, str]) -> dict[str, object]:
    done = _run(env, sys.executable, "-c", PROBE)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@needs_pip_pocl
def test_pip_runtime_gives_a_device_when_no_platform_is_installed(tmp_path: Path) -> None:
    out = _probe(_env(tmp_path))
    assert out["env_after_import"] is None  # import memtype sets nothing
    assert out["source"] == "pip"
    assert out["env_after_load"] == str(PIP_POCL)
    assert out["gpu_count"] >= 1
    assert out["round_trip"] is True


@pytest.mark.requires("torch")
def test_no_runtime_at_all_is_a_normal_state(tmp_path: Path) -> None:
    out = _probe(_env(tmp_path, **{_opencl.FALLBACK_VARIABLE: "0"}))
    assert out["source"] == "none"
    assert out["env_after_load"] is None
    assert out["gpu_count"] == 0
    assert out["torch"] == 3.0 and out["detect"] == "numpy"  # the other frameworks work
    assert "no OpenCL device" in str(out["error"])
    way_out = "unset MEMTYPE_OPENCL_FALLBACK" if PIP_POCL else "pip install 'memtype[cle]'"
    assert way_out in str(out["error"])


def test_info_shows_the_missing_device_and_the_fix(tmp_path: Path) -> None:
    env = _env(tmp_path, **{_opencl.FALLBACK_VARIABLE: "0"})
    done = _run(env, sys.executable, "-m", "memtype", "info")
    assert done.returncode == 0, done.stderr
    assert "pyclesperanto: OpenCL runtime: none" in done.stdout
    assert "no OpenCL device" in done.stdout and "Fix: " in done.stdout


@needs_pip_pocl
def test_info_names_the_pip_runtime_and_its_library(tmp_path: Path) -> None:
    done = _run(_env(tmp_path), sys.executable, "-m", "memtype", "info")
    assert done.returncode == 0, done.stderr
    assert f"OpenCL runtime: pip ({PIP_POCL})" in done.stdout


@pytest.mark.requires("torch", "jax", "scipy", "zarr", "tifffile", "PIL")
def test_demo_without_opencl_runs_and_says_so_in_one_line(tmp_path: Path) -> None:
    env = _env(tmp_path, **{_opencl.FALLBACK_VARIABLE: "0"})
    done = _run(env, sys.executable, "-m", "memtype", "demo", "--out", str(tmp_path / "demo"),
                "--wells", "1", "--sites", "1", "--z-planes", "2", "--size", "64",
                "--no-progress")
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "pyclesperanto" in line]
    assert len(notes) == 1 and "runs on scipy" in notes[0], done.stderr


def test_a_value_the_user_set_is_never_replaced(tmp_path: Path) -> None:
    bogus = str(tmp_path / "libnothing.so")
    out = _probe(_env(tmp_path, OCL_ICD_FILENAMES=bogus))
    assert out["source"] == "user"
    assert out["env_after_load"] == bogus
    assert out["gpu_count"] == 0 and "no OpenCL device" in str(out["error"])


@needs_pip_pocl
@pytest.mark.parametrize("library,source", [("pip-pocl", "system"), ("libgone.so", "pip")],
                         ids=["platform-with-a-device-is-used", "broken-platform-gets-pip"])
def test_installed_platforms_are_used_only_when_they_offer_a_device(
        tmp_path: Path, library: str, source: str) -> None:
    env = _env(tmp_path)
    icd = PIP_POCL if library == "pip-pocl" else tmp_path / library
    (Path(env["OCL_ICD_VENDORS"]) / "vendor.icd").write_text(f"{icd}\n")
    out = _probe(env)
    assert out["source"] == source
    assert out["env_after_load"] == (None if source == "system" else str(PIP_POCL))
    assert out["round_trip"] is True


@needs_pip_pocl
def test_pyclesperanto_imported_first_names_both_ways_out(tmp_path: Path) -> None:
    code = "import pyclesperanto\n" + PROBE
    done = _run(_env(tmp_path), sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["source"] == "preloaded"
    assert f"export OCL_ICD_FILENAMES={PIP_POCL}" in str(out["error"])
    assert "load_adapter('pyclesperanto')" in str(out["error"])
