"""pyclesperanto's OpenCL runtime on a machine set up with pip alone (system OpenCL hidden).

Each case runs memtype in a fresh interpreter with its own verdict cache: the OpenCL loader
reads its environment once per process, so only a new process shows what a new user gets.
A runtime that lists a device but cannot compile is simulated on any CPU with
``POCL_EXTRA_BUILD_FLAGS=-mcpu=znver3``, which makes every build of pip's pocl fail (as
pocl 3.0 fails on a CPU newer than its LLVM, e.g. AMD Zen 5: "unknown target CPU").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memtype.frameworks import _opencl, _opencl_probe

pytestmark = pytest.mark.requires("pyclesperanto")

PIP_POCL = _opencl._pip_pocl()
PIP_INTEL = _opencl._package_library("intel-opencl-rt", "libintelocl.so")
needs_pip_pocl = pytest.mark.skipif(
    PIP_POCL is None, reason="pocl-binary-distribution is not installed (Linux x86-64 only)")
needs_pip_intel = pytest.mark.skipif(
    PIP_INTEL is None, reason="intel-opencl-rt is not installed (memtype[cle-intel], "
                              "Linux x86-64 only)")
# Every build of pip's pocl fails (an option its compiler refuses), as on a too-new CPU.
POCL_CANNOT_COMPILE = {"POCL_EXTRA_BUILD_FLAGS": "-mcpu=znver3"}

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
decision = _opencl.runtime()
out["source"] = decision.source
out["usable"] = decision.usable
out["tried"] = list(decision.tried)
out["env_after_load"] = os.environ.get("OCL_ICD_FILENAMES")
out["gpu_count"] = load_adapter("pyclesperanto").gpu_count()
print(json.dumps(out))
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    vendors = tmp_path / "vendors"
    vendors.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("OCL_ICD_FILENAMES", _opencl.FALLBACK_VARIABLE, _opencl.OFF_VARIABLE,
                        _opencl.RUNTIMES_VARIABLE, "POCL_EXTRA_BUILD_FLAGS")}
    env["OCL_ICD_VENDORS"] = str(vendors)
    env[_opencl.CACHE_VARIABLE] = str(tmp_path / "cache")
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


def _first_pip_runtime() -> Path | None:
    order = {"pocl": PIP_POCL, "intel": PIP_INTEL}
    return next((order[n] for n in _opencl._DEFAULT_ORDER.split(",") if order[n]), None)


@needs_pip_pocl
def test_pip_runtime_gives_a_device_when_no_platform_is_installed(tmp_path: Path) -> None:
    out = _probe(_env(tmp_path))
    assert out["env_after_import"] is None  # import memtype sets nothing
    assert out["source"] == "pip" and out["usable"] is True
    assert out["env_after_load"] == str(_first_pip_runtime())
    assert out["gpu_count"] >= 1
    assert out["round_trip"] is True


@pytest.mark.parametrize("name", [
    pytest.param("pocl", marks=needs_pip_pocl),
    pytest.param("intel", marks=needs_pip_intel),
])
def test_each_pip_runtime_runs_pyclesperanto_where_it_compiles(tmp_path: Path,
                                                               name: str) -> None:
    out = _probe(_env(tmp_path, **{_opencl.RUNTIMES_VARIABLE: name}))
    expected = PIP_POCL if name == "pocl" else PIP_INTEL
    assert out["source"] == "pip" and out["env_after_load"] == str(expected)
    assert out["round_trip"] is True


@needs_pip_pocl
@needs_pip_intel
def test_a_runtime_that_lists_a_device_but_cannot_compile_is_passed_over(
        tmp_path: Path) -> None:
    env = _env(tmp_path, **POCL_CANNOT_COMPILE, **{_opencl.RUNTIMES_VARIABLE: "pocl,intel"})
    out = _probe(env)
    assert out["source"] == "pip" and out["env_after_load"] == str(PIP_INTEL)
    assert out["round_trip"] is True
    pocl_line = str(out["tried"][0])  # type: ignore[index]
    assert "cannot build a kernel" in pocl_line and "-mcpu=znver3" in pocl_line


@needs_pip_pocl
def test_where_no_runtime_compiles_pyclesperanto_has_no_device_and_says_why(
        tmp_path: Path) -> None:
    out = _probe(_env(tmp_path, **POCL_CANNOT_COMPILE, **{_opencl.RUNTIMES_VARIABLE: "pocl"}))
    assert out["source"] == "none" and out["usable"] is False
    assert out["gpu_count"] == 0
    assert out["env_after_load"] is None  # the runtime that cannot compile is not selected
    error = str(out["error"])
    assert "no usable OpenCL runtime" in error
    assert "Invalid build option: -mcpu=znver3" in error  # the compiler's own words
    assert "--no-opencl" in error


@pytest.mark.requires("torch")
def test_no_runtime_at_all_is_a_normal_state(tmp_path: Path) -> None:
    out = _probe(_env(tmp_path, **{_opencl.FALLBACK_VARIABLE: "0"}))
    assert out["source"] == "none"
    assert out["env_after_load"] is None
    assert out["gpu_count"] == 0
    assert out["torch"] == 3.0 and out["detect"] == "numpy"  # the other frameworks work
    assert "no usable OpenCL runtime" in str(out["error"])
    way_out = ("unset MEMTYPE_OPENCL_FALLBACK" if PIP_POCL or PIP_INTEL
               else "pip install 'memtype[cle]'")
    assert way_out in str(out["error"])


def test_opencl_turned_off_is_said_so(tmp_path: Path) -> None:
    out = _probe(_env(tmp_path, **{_opencl.OFF_VARIABLE: "1"}))
    assert out["source"] == "none" and out["gpu_count"] == 0
    assert "turned off" in str(out["error"]) and "--no-opencl" in str(out["error"])


def test_a_value_the_user_set_is_never_replaced(tmp_path: Path) -> None:
    bogus = str(tmp_path / "libnothing.so")
    out = _probe(_env(tmp_path, OCL_ICD_FILENAMES=bogus))
    assert out["source"] == "user" and out["usable"] is False
    assert out["env_after_load"] == bogus
    assert out["gpu_count"] == 0 and "unset it to let memtype choose" in str(out["error"])


@needs_pip_pocl
def test_a_user_runtime_that_cannot_compile_is_kept_and_named(tmp_path: Path) -> None:
    out = _probe(_env(tmp_path, OCL_ICD_FILENAMES=str(PIP_POCL), **POCL_CANNOT_COMPILE))
    assert out["source"] == "user" and out["env_after_load"] == str(PIP_POCL)
    assert out["gpu_count"] == 0
    assert "-mcpu=znver3" in str(out["error"]) and "OCL_ICD_FILENAMES" in str(out["error"])


@needs_pip_pocl
@pytest.mark.parametrize("library,source", [("pip-pocl", "system"), ("libgone.so", "pip")],
                         ids=["platform-with-a-device-is-used", "broken-platform-gets-pip"])
def test_installed_platforms_are_used_only_when_they_compile(
        tmp_path: Path, library: str, source: str) -> None:
    env = _env(tmp_path)
    icd = PIP_POCL if library == "pip-pocl" else tmp_path / library
    (Path(env["OCL_ICD_VENDORS"]) / "vendor.icd").write_text(f"{icd}\n")
    out = _probe(env)
    assert out["source"] == source
    assert out["env_after_load"] == (None if source == "system" else str(_first_pip_runtime()))
    assert out["round_trip"] is True


@needs_pip_pocl
@needs_pip_intel
def test_an_installed_platform_that_cannot_compile_is_hidden_from_pyclesperanto(
        tmp_path: Path) -> None:
    env = _env(tmp_path, **POCL_CANNOT_COMPILE, **{_opencl.RUNTIMES_VARIABLE: "intel"})
    (Path(env["OCL_ICD_VENDORS"]) / "pocl.icd").write_text(f"{PIP_POCL}\n")
    code = PROBE + "print(json.dumps(os.environ.get('OCL_ICD_VENDORS')))\n"
    done = _run(env, sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-2])
    vendors = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["source"] == "pip" and out["round_trip"] is True
    assert out["gpu_count"] == 1  # Intel's device only: pocl's broken one is not listed
    assert vendors != env["OCL_ICD_VENDORS"] and not list(Path(vendors).glob("*.icd"))


@needs_pip_pocl
def test_pyclesperanto_imported_first_names_both_ways_out(tmp_path: Path) -> None:
    code = "import pyclesperanto\n" + PROBE
    done = _run(_env(tmp_path), sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["source"] == "preloaded"


# -- the verdict cache -------------------------------------------------------------------

@needs_pip_pocl
def test_a_verdict_is_probed_once_per_machine_then_read_from_the_cache(tmp_path: Path) -> None:
    env = _env(tmp_path, **{_opencl.RUNTIMES_VARIABLE: "pocl"})
    first, second = _probe(env), _probe(env)
    assert not str(first["tried"][0]).endswith("(cached)")  # type: ignore[index]
    assert str(second["tried"][0]).endswith("(cached)")  # type: ignore[index]
    assert second["round_trip"] is True


@needs_pip_pocl
def test_a_changed_runtime_setting_probes_again(tmp_path: Path) -> None:
    env = _env(tmp_path, **{_opencl.RUNTIMES_VARIABLE: "pocl"})
    assert _probe(env)["usable"] is True
    changed = _probe({**env, **POCL_CANNOT_COMPILE})
    assert changed["usable"] is False  # not the cached "works"
    assert not str(changed["tried"][0]).endswith("(cached)")  # type: ignore[index]


@needs_pip_pocl
@pytest.mark.parametrize("change", ["library-file", "cpu", "package-version"])
def test_the_cache_key_follows_what_a_verdict_depends_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    library = tmp_path / "libpocl-copy.so"
    library.write_bytes(b"\0" * 16)
    candidate = _opencl.Candidate("pip", "pocl", str(library), "pocl-binary-distribution")
    before = _opencl._cache_key(candidate, str(PIP_POCL))
    if change == "library-file":
        library.write_bytes(b"\0" * 32)
    elif change == "cpu":
        monkeypatch.setattr(_opencl, "_cpu_identity", lambda: "a CPU from next year")
    else:
        monkeypatch.setattr(_opencl, "_version", lambda package: "99.0")
    assert _opencl._cache_key(candidate, str(PIP_POCL)) != before


def test_a_damaged_cache_is_probed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_opencl.CACHE_VARIABLE, str(tmp_path))
    (tmp_path / "opencl-probes.json").write_text("{not json")
    assert _opencl._read_cache() == {}


@pytest.mark.requires("pyclesperanto")
@pytest.mark.parametrize("entry", [{"devices": 5, "working": []}, {"devices": []}, "works"],
                         ids=["devices-not-a-list", "no-working", "not-an-object"])
def test_a_damaged_cache_entry_is_probed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               entry: object) -> None:
    monkeypatch.setenv(_opencl.CACHE_VARIABLE, str(tmp_path))
    candidate = _opencl.Candidate("pip", "gone", str(tmp_path / "libgone.so"))
    loader = _opencl._loader()
    assert loader is not None
    key = _opencl._cache_key(candidate, loader)
    (tmp_path / "opencl-probes.json").write_text(json.dumps({key: entry}))
    found = _opencl.verdict(candidate)
    assert not found.cached and not found.ok


def test_an_unknown_runtime_name_is_a_configuration_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from memtype.errors import ConfigurationError

    monkeypatch.setenv(_opencl.RUNTIMES_VARIABLE, "pocl,beignet")
    with pytest.raises(ConfigurationError, match="received 'pocl,beignet'"):
        _opencl.pip_order()


@pytest.mark.parametrize("log,words", [
    ("warning: x\n<source>:1:2: error: unknown target CPU 'generic'\nnote: y",
     "<source>:1:2: error: unknown target CPU 'generic'"),
    ("Invalid build option: -mcpu=znver3\n", "Invalid build option: -mcpu=znver3"),
    ("", ""),
], ids=["clang-error-line", "no-error-word", "empty"])
def test_the_compiler_words_are_its_error_line(log: str, words: str) -> None:
    assert _opencl_probe.compiler_words(log) == words


_VERDICT = '{"devices": ["cpu-x"], "working": ["cpu-x"], "error": ""}'


@pytest.mark.parametrize("stdout,verdict", [
    (_VERDICT + "\n", _opencl.Verdict(("cpu-x",), ("cpu-x",), "")),
    (_VERDICT + "\ndriver: released 1 context\n",
     _opencl.Verdict(("cpu-x",), ("cpu-x",), "")),
    ("", _opencl.Verdict((), (), "the probe printed no verdict (nothing)")),
    ("[1, 2]\n", _opencl.Verdict((), (), "the probe printed no verdict ([1, 2])")),
], ids=["verdict", "driver-line-after-it", "nothing", "not-a-verdict"])
def test_the_probe_verdict_is_read_from_its_output(stdout: str,
                                                   verdict: _opencl.Verdict) -> None:
    assert _opencl._parse_probe(stdout) == verdict


# -- what the user sees ----------------------------------------------------------------

@needs_pip_pocl
def test_info_shows_the_runtime_that_cannot_compile_and_the_fix(tmp_path: Path) -> None:
    env = _env(tmp_path, **POCL_CANNOT_COMPILE, **{_opencl.RUNTIMES_VARIABLE: "pocl"})
    done = _run(env, sys.executable, "-m", "memtype", "info")
    assert done.returncode == 0, done.stderr
    assert "pyclesperanto: OpenCL runtime: none" in done.stdout
    assert "cannot build a kernel" in done.stdout and "-mcpu=znver3" in done.stdout
    assert "Fix: " in done.stdout


@needs_pip_pocl
def test_info_names_the_pip_runtime_and_its_library(tmp_path: Path) -> None:
    done = _run(_env(tmp_path), sys.executable, "-m", "memtype", "info")
    assert done.returncode == 0, done.stderr
    assert f"OpenCL runtime: pip ({_first_pip_runtime()})" in done.stdout
    assert "compiles and runs a kernel" in done.stdout


@pytest.mark.requires("torch", "jax", "scipy", "zarr", "tifffile", "PIL")
@pytest.mark.parametrize("how", ["cannot-compile", "no-runtime"])
def test_demo_without_a_working_runtime_counts_every_nucleus_and_says_so_once(
        tmp_path: Path, how: str) -> None:
    extra = ({**POCL_CANNOT_COMPILE, _opencl.RUNTIMES_VARIABLE: "pocl"}
             if how == "cannot-compile" else {_opencl.FALLBACK_VARIABLE: "0"})
    done = _run(_env(tmp_path, **extra), sys.executable, "-m", "memtype", "demo", "--out",
                str(tmp_path / "demo"), "--wells", "1", "--sites", "1", "--z-planes", "2",
                "--size", "64", "--no-progress")
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "pyclesperanto" in line]
    assert len(notes) == 1 and "runs on scipy" in notes[0], done.stderr
    counted = next(line for line in done.stdout.splitlines() if line.startswith("nuclei"))
    words = counted.split()
    assert words[1] == words[3], counted  # "nuclei N counted, N in the synthetic plate"


USER_STEP = """
import memtype as mt
from memtype.pipeline import FunctionStep, Pipeline

@mt.pyclesperanto
def blur(stack):
    import pyclesperanto as cle
    return cle.gaussian_blur(stack, sigma_x=1, sigma_y=1)

pipeline = Pipeline([FunctionStep(blur), "median"],
                    pattern="{well}_s{site}_w{channel}_z{z:03d}.tif")
"""


@pytest.mark.requires("scipy", "zarr", "tifffile")
@needs_pip_pocl
def test_a_step_fixed_to_pyclesperanto_fails_once_before_any_group(tmp_path: Path) -> None:
    from memtype.pipeline import SyntheticPlate, write_synthetic_plate

    write_synthetic_plate(tmp_path / "plate", SyntheticPlate(wells=3, sites=1, size=32,
                                                             z_planes=2))
    (tmp_path / "p.py").write_text(USER_STEP)
    env = _env(tmp_path, **POCL_CANNOT_COMPILE, **{_opencl.RUNTIMES_VARIABLE: "pocl"})
    done = _run(env, sys.executable, "-m", "memtype", "run", str(tmp_path / "p.py"),
                "--input", str(tmp_path / "plate"), "--output", str(tmp_path / "out"),
                "--no-progress")
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1, done.stderr
    assert "'blur' needs pyclesperanto" in errors[0] and "-mcpu=znver3" in errors[0]
    assert "--no-opencl" in errors[0]
    assert not (tmp_path / "out" / "plate.zarr").exists()  # no group ran


@pytest.mark.requires("scipy")
@needs_pip_pocl
def test_the_plan_routes_catalog_operations_around_an_unusable_runtime(tmp_path: Path) -> None:
    code = """
import numpy as np
from memtype.pipeline import Pipeline
print(Pipeline(["gaussian", "median"]).plan(np.zeros((4, 32, 32), np.float32)).table())
"""
    env = _env(tmp_path, **POCL_CANNOT_COMPILE, **{_opencl.RUNTIMES_VARIABLE: "pocl"})
    done = _run(env, sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("gaussian:")]
    assert lines and "pyclesperanto unavailable (DeviceError: no usable OpenCL runtime" \
        in lines[0], done.stdout


CATALOG_ONLY = """
from memtype.pipeline import Pipeline

pipeline = Pipeline(["gaussian", "median"], pattern="{well}_s{site}_w{channel}_z{z:03d}.tif")
"""


@pytest.mark.requires("scipy", "tifffile")
def test_run_no_opencl_plans_without_pyclesperanto_and_says_why(tmp_path: Path) -> None:
    from memtype.pipeline import SyntheticPlate, write_synthetic_plate

    write_synthetic_plate(tmp_path / "plate", SyntheticPlate(wells=1, sites=1, size=32,
                                                             z_planes=2))
    (tmp_path / "p.py").write_text(CATALOG_ONLY)
    done = _run(_env(tmp_path), sys.executable, "-m", "memtype", "run", str(tmp_path / "p.py"),
                "--input", str(tmp_path / "plate"), "--output", str(tmp_path / "out"),
                "--plan", "--no-opencl")
    assert done.returncode == 0, done.stderr
    first = next(line for line in done.stdout.splitlines() if line.startswith("gaussian:"))
    assert "pyclesperanto unavailable (DeviceError: no usable OpenCL runtime: OpenCL is " \
           "turned off" in first
    later = next(line for line in done.stdout.splitlines() if line.startswith("median:"))
    assert "pyclesperanto unavailable (as above)" in later  # the reason is given once


@pytest.mark.requires("scipy", "tifffile")
@needs_pip_pocl
def test_no_opencl_holds_for_one_command_run_in_process(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``main([... "--no-opencl"])`` in a process that goes on (a notebook, a test) leaves
    OpenCL as it was afterwards (it stayed off for the rest of the process)."""
    from memtype.cli import main
    from memtype.frameworks import NO_OPENCL_VARIABLE, get_framework, unusable_reason
    from memtype.pipeline import SyntheticPlate, write_synthetic_plate

    monkeypatch.delenv(NO_OPENCL_VARIABLE, raising=False)
    write_synthetic_plate(tmp_path / "plate", SyntheticPlate(wells=1, sites=1, size=32,
                                                             z_planes=2))
    (tmp_path / "p.py").write_text(CATALOG_ONLY)
    assert main(["run", str(tmp_path / "p.py"), "--input", str(tmp_path / "plate"),
                 "--output", str(tmp_path / "out"), "--plan", "--no-opencl"]) == 0
    assert NO_OPENCL_VARIABLE not in os.environ
    assert unusable_reason(get_framework("pyclesperanto")) == ""
