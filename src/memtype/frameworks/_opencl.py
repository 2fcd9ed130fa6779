"""Which OpenCL runtime pyclesperanto gets, decided once before its first import.

pyclesperanto ships the Khronos OpenCL ICD loader, which reads ``OCL_ICD_FILENAMES`` and
the vendor directory (``OCL_ICD_VENDORS``, else ``/etc/OpenCL/vendors``) the first time
OpenCL is used. A machine set up with pip alone has no vendor file, so pyclesperanto
imports without a device. Two CPU runtimes install from pip: pocl
(``pocl-binary-distribution``, the ``cle`` extra) and Intel's (``intel-opencl-rt``, the
``cle-intel`` extra). A runtime counts as working only if it *compiles and runs* a kernel:
pocl 3.0's LLVM predates recent CPUs (AMD Zen 5) and there lists a device whose every
build fails.

The decision, right before pyclesperanto's first import: the user's ``OCL_ICD_FILENAMES``
(never replaced), else the installed platforms, else each pip runtime in turn; the first
that builds and runs one small kernel in a child process (:mod:`._opencl_probe`) is chosen.
Where none does, pyclesperanto counts as having no device and the reason is the compiler's
own words. Verdicts are cached on disk per runtime and machine (keyed by the library files,
the package versions, the CPU and the runtime's environment variables), so the probe costs
once per machine, not once per process.

Rules: nothing happens at ``import memtype``; a value the user set is never replaced;
``MEMTYPE_OPENCL_FALLBACK=0`` turns the pip runtimes off; ``MEMTYPE_OPENCL_RUNTIMES``
(``"intel,pocl"``) orders them or leaves one out; ``MEMTYPE_NO_OPENCL=1`` (what
``--no-opencl`` sets) turns OpenCL off; the probes run in child processes (a broken driver
cannot take this interpreter down, and this process's loader is not started before the
decision).
"""

from __future__ import annotations

import ctypes.util
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from memtype.errors import ConfigurationError
from memtype.frameworks import NO_OPENCL_VARIABLE

__all__ = ["OpenCLRuntime", "Candidate", "Verdict", "prepare", "runtime", "fix", "candidates",
           "pip_order", "unusable_reason", "FALLBACK_VARIABLE", "OFF_VARIABLE", "CACHE_VARIABLE",
           "RUNTIMES_VARIABLE"]

FALLBACK_VARIABLE = "MEMTYPE_OPENCL_FALLBACK"
OFF_VARIABLE = NO_OPENCL_VARIABLE
CACHE_VARIABLE = "MEMTYPE_CACHE_DIR"
_INSTALL = ("pip install 'memtype[cle]' (pocl, a CPU OpenCL runtime memtype uses "
            "automatically), or install your GPU vendor's OpenCL driver")
_INTEL_HINT = ("pip install 'memtype[cle-intel]' (Intel's CPU OpenCL runtime, which also "
               "runs on AMD CPUs; Intel's licence)")
_DEFAULT_VENDORS = "/etc/OpenCL/vendors"
_PROBE_TIMEOUT_S = 120.0
_PROBE_VERSION = 2  # bump when the probe's kernel or verdict format changes
_CACHE_FILE = "opencl-probes.json"
_CACHE_ENTRIES = 64
# Variables that change what a runtime compiles or which devices it offers.
_RUNTIME_ENV_PREFIXES = ("POCL_", "CL_CONFIG_", "OCL_ICD_", "CPU_", "TBB_")
_SHARED_LIBRARY = re.compile(r"[^/]*\.so(\.[0-9]+)*")
# name -> (package, library file name's start, words); tried in MEMTYPE_OPENCL_RUNTIMES order
_PIP_RUNTIMES = {"pocl": ("pocl-binary-distribution", "libpocl", "pocl"),
                 "intel": ("intel-opencl-rt", "libintelocl.so", "Intel CPU runtime")}
RUNTIMES_VARIABLE = "MEMTYPE_OPENCL_RUNTIMES"
_DEFAULT_ORDER = "intel,pocl"  # Intel where installed: 1.37x pocl (benchmarks/opencl_runtimes.py)


@dataclass(frozen=True)
class Candidate:
    """A runtime that may serve pyclesperanto: where it comes from and how to select it.

    ``source`` is ``"user"``, ``"system"`` or ``"pip"``; ``library`` the runtime library
    ``OCL_ICD_FILENAMES`` names (None: the installed platforms); ``name`` says it in words.
    """

    source: str
    name: str
    library: str | None
    package: str = ""


@dataclass(frozen=True)
class Verdict:
    """What a probe found: device names, those that built and ran the kernel, the first
    failure in the runtime's words, and whether the answer came from the cache."""

    devices: tuple[str, ...]
    working: tuple[str, ...]
    error: str
    cached: bool = False

    @property
    def ok(self) -> bool:
        """At least one device compiled and ran the kernel."""
        return bool(self.working)

    def summary(self) -> str:
        """One line: works, lists no device, or the failure."""
        if self.ok:
            return f"compiles and runs a kernel on {', '.join(self.working)}"
        if not self.devices:
            return self.error or "lists no device"
        return f"lists {', '.join(self.devices)} but cannot build a kernel: {self.error}"


@dataclass(frozen=True)
class OpenCLRuntime:
    """The OpenCL runtime decision.

    ``source`` is ``"user"`` (``OCL_ICD_FILENAMES`` set by the user), ``"system"`` (an
    installed platform that compiles), ``"pip"`` (memtype pointed the loader at a runtime
    installed from pip), ``"none"`` (no runtime compiles, or OpenCL is turned off) or
    ``"preloaded"`` (pyclesperanto was imported before memtype could decide). ``library`` is
    the runtime library chosen, if any; ``detail`` says why, in words; ``usable`` whether
    pyclesperanto can run kernels; ``reason`` (where it cannot) says why in one line, with
    the compiler's own words; ``tried`` has one line per runtime probed;
    ``hide_installed``: the installed platforms list devices that cannot compile, so the
    loader is kept from them.
    """

    source: str
    library: str | None
    detail: str
    usable: bool = True
    reason: str = ""
    tried: tuple[str, ...] = field(default=())
    hide_installed: bool = False


_decision: OpenCLRuntime | None = None


def _package_library(package: str, prefix: str) -> Path | None:
    """The runtime library a pip package installed (``prefix``: its file name's start)."""
    try:
        files = importlib.metadata.distribution(package).files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in files:
        if entry.name.startswith(prefix) and _SHARED_LIBRARY.fullmatch(entry.name):
            path = Path(str(entry.locate()))
            if path.is_file():
                return path.resolve()
    return None


def _pip_pocl() -> Path | None:
    """The pocl library installed by ``pocl-binary-distribution`` (or bundled by pyopencl)."""
    found = _package_library("pocl-binary-distribution", "libpocl")
    if found is not None:
        return found
    spec = importlib.util.find_spec("pyopencl")  # older pyopencl wheels bundled pocl
    if spec is not None and spec.origin is not None:
        bundled = sorted((Path(spec.origin).parent / ".libs").glob("libpocl*.so*"))
        if bundled:
            return bundled[0]
    return None


def _pip_library(key: str) -> Path | None:
    """The library of pip runtime ``key`` (``"pocl"``, ``"intel"``), if installed."""
    package, prefix, _ = _PIP_RUNTIMES[key]
    return _pip_pocl() if key == "pocl" else _package_library(package, prefix)


def _turned_off() -> bool:
    """Whether ``MEMTYPE_NO_OPENCL`` (``--no-opencl``) turns OpenCL off."""
    return os.environ.get(OFF_VARIABLE, "") not in ("", "0")


def _fallback_off() -> bool:
    """Whether ``MEMTYPE_OPENCL_FALLBACK=0`` turns the pip runtimes off."""
    return os.environ.get(FALLBACK_VARIABLE, "1") == "0"


def _version(package: str) -> str:
    """The installed version of ``package``, or "" when it is not installed."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _vendor_files() -> list[Path]:
    """The ICD files the loader would read (``OCL_ICD_VENDORS`` may name a dir or one file)."""
    where = Path(os.environ.get("OCL_ICD_VENDORS") or _DEFAULT_VENDORS)
    if where.is_file():
        return [where]
    if where.is_dir():
        return sorted(where.glob("*.icd"))
    return []


def _loader() -> str | None:
    """The OpenCL ICD loader pyclesperanto uses (its own bundled copy), else the system's."""
    spec = importlib.util.find_spec("pyclesperanto_opencl")
    if spec is not None and spec.origin is not None:
        libs = Path(spec.origin).parent.parent / "pyclesperanto_opencl.libs"
        found = sorted(libs.glob("libOpenCL*.so*"))
        if found:
            return str(found[0])
    return ctypes.util.find_library("OpenCL")


def candidates() -> list[Candidate]:
    """The runtimes to try, in order: the user's, the installed platforms, pip's."""
    user = os.environ.get("OCL_ICD_FILENAMES")
    if user:
        return [Candidate("user", f"OCL_ICD_FILENAMES={user}", user)]
    found: list[Candidate] = []
    vendors = _vendor_files()
    if vendors:
        names = ", ".join(v.name for v in vendors)
        found.append(Candidate("system", f"installed platform ({names})", None))
    if _fallback_off():
        return found
    for key in pip_order():
        package, _, name = _PIP_RUNTIMES[key]
        library = _pip_library(key)
        if library is not None:
            version = _version(package)
            label = f"{name} (pip: {package} {version})" if version else f"{name} (pip)"
            found.append(Candidate("pip", label, str(library), package))
    return found


def pip_order() -> list[str]:
    """The pip runtimes to try, in order: ``MEMTYPE_OPENCL_RUNTIMES`` (``"intel,pocl"``).

    Raises
    ------
    ConfigurationError
        The variable names a runtime memtype does not know.
    """
    names = [n.strip() for n in os.environ.get(RUNTIMES_VARIABLE, _DEFAULT_ORDER).split(",")]
    unknown = [n for n in names if n not in _PIP_RUNTIMES]
    if unknown:
        raise ConfigurationError(
            f"{RUNTIMES_VARIABLE} lists pip OpenCL runtimes by name, comma-separated, from "
            f"{', '.join(_PIP_RUNTIMES)}; received {os.environ.get(RUNTIMES_VARIABLE)!r}.")
    return [n for n in names if n]


def _cpu_identity() -> str:
    """The CPU, as /proc/cpuinfo names it (model and features: what a compiler targets)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:  # not Linux: the platform's own name is all there is
        return sys.platform
    first = text.split("\n\n", 1)[0]
    keys = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags")
    return "|".join(line for line in first.splitlines() if line.split(":")[0].strip() in keys)


def _file_identity(path: str | Path) -> str:
    """A file's path, size and modification time (a changed install probes again)."""
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}:absent"
    return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"


def _cache_key(candidate: Candidate, loader: str) -> str:
    """What a verdict depends on: runtime files and versions, the CPU, the environment."""
    parts = [str(_PROBE_VERSION), candidate.source, _file_identity(loader), _cpu_identity(),
             candidate.package, _version(candidate.package) if candidate.package else ""]
    if candidate.library:
        parts.append(_file_identity(candidate.library))
    else:
        for icd in _vendor_files():
            library = icd.read_text(errors="replace").strip()
            parts += [_file_identity(icd), library, _file_identity(library)]
    parts += sorted(f"{k}={v}" for k, v in os.environ.items()
                    if k.startswith(_RUNTIME_ENV_PREFIXES) and k != "OCL_ICD_FILENAMES")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _cache_path() -> Path:
    """Where verdicts are kept: ``$MEMTYPE_CACHE_DIR``, else the user's cache folder."""
    base = os.environ.get(CACHE_VARIABLE)
    if base:
        return Path(base) / _CACHE_FILE
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "memtype" / _CACHE_FILE


def _read_cache() -> dict[str, dict[str, object]]:
    """The cached verdicts by key ({} when the cache is absent or damaged)."""
    path = _cache_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):  # absent, unreadable or damaged: probe again
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(key: str, verdict: Verdict) -> None:
    """Keep a verdict (atomically; a cache that cannot be written only means probing again)."""
    path = _cache_path()
    entries = _read_cache()
    entries.pop(key, None)
    entries[key] = {"devices": list(verdict.devices), "working": list(verdict.working),
                    "error": verdict.error}
    kept = dict(list(entries.items())[-_CACHE_ENTRIES:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".opencl-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(kept, fh)
        os.replace(tmp, path)
    except OSError:  # a read-only home: the verdict holds for this process only
        return


def _probe_env(candidate: Candidate, empty_vendors: str) -> dict[str, str]:
    """The probe's environment: ``candidate`` selected, the user's selection left out."""
    env = {k: v for k, v in os.environ.items() if k != "OCL_ICD_FILENAMES"}
    if candidate.library is not None:
        env["OCL_ICD_FILENAMES"] = candidate.library
        if candidate.source == "pip":  # that runtime alone, not the installed platforms
            env["OCL_ICD_VENDORS"] = empty_vendors
    return env


def _run_probe(candidate: Candidate, loader: str) -> Verdict:
    """Build and run the kernel with ``candidate`` selected, in a child process."""
    cmd = [sys.executable, "-m", "memtype.frameworks._opencl_probe", loader]
    with tempfile.TemporaryDirectory(prefix="memtype-ocl-") as empty:
        try:
            done = subprocess.run(cmd, env=_probe_env(candidate, empty), capture_output=True,
                                  text=True, timeout=_PROBE_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return Verdict((), (), f"the probe did not finish in {_PROBE_TIMEOUT_S:.0f} s")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return Verdict((), (), f"the probe crashed ({last})")
    return _parse_probe(done.stdout)


def _parse_probe(stdout: str) -> Verdict:
    """The verdict in the probe's output: its last line that is the probe's JSON object (a
    driver may print after it, at exit), else a failure quoting what was printed."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            found = _verdict_of(json.loads(line))
        except ValueError:
            continue
        if found is not None:
            return found
    last = (stdout.strip().splitlines() or ["nothing"])[-1]
    return Verdict((), (), f"the probe printed no verdict ({last[:200]})")


def _verdict_of(found: object, *, cached: bool = False) -> Verdict | None:
    """The verdict a probe's JSON object or a cache entry holds (None: it holds none)."""
    if not isinstance(found, dict) or not isinstance(found.get("devices"), list) \
            or not isinstance(found.get("working"), list):
        return None
    return Verdict(tuple(map(str, found["devices"])), tuple(map(str, found["working"])),
                   str(found.get("error", "")), cached=cached)


def verdict(candidate: Candidate) -> Verdict:
    """Whether ``candidate`` compiles and runs a kernel here (cached per runtime and machine)."""
    loader = _loader()
    if loader is None:
        return Verdict((), (), "no OpenCL ICD loader (pyclesperanto's own is missing)")
    key = _cache_key(candidate, loader)
    hit = _verdict_of(_read_cache().get(key), cached=True)
    if hit is not None:
        return hit
    found = _run_probe(candidate, loader)
    _write_cache(key, found)
    return found


def _no_runtime(tried: list[str], failures: list[str], why: str) -> OpenCLRuntime:
    """The decision where no runtime works: the failures as the reason, else ``why``."""
    reason = "; ".join(failures) if failures else why
    return OpenCLRuntime("none", None, why, usable=False, reason=reason, tried=tuple(tried))


def _decide() -> OpenCLRuntime:
    """What to do, without doing it (``prepare`` applies it)."""
    if "pyclesperanto" in sys.modules:
        return OpenCLRuntime("preloaded", None, "pyclesperanto was imported before memtype "
                             "loaded it; its OpenCL runtime is whatever it found then")
    tried: list[str] = []
    failures: list[str] = []
    broken_installed = False
    for candidate in candidates():
        found = verdict(candidate)
        tried.append(f"{candidate.name}: {found.summary()}" + (" (cached)" if found.cached
                                                                else ""))
        if found.ok or candidate.source == "user":  # the user's choice is never replaced
            detail = candidate.name if candidate.source != "pip" else (
                f"{candidate.name}, set through OCL_ICD_FILENAMES")
            return OpenCLRuntime(candidate.source, candidate.library, detail, usable=found.ok,
                                 reason="" if found.ok else f"{candidate.name}: "
                                 f"{found.summary()}", tried=tuple(tried),
                                 hide_installed=broken_installed)
        if candidate.source == "system" and not found.devices:
            continue  # an installed platform without devices is no failure worth naming
        broken_installed = broken_installed or candidate.source == "system"
        failures.append(f"{candidate.name}: {found.summary()}")
    why = "no OpenCL runtime compiles a kernel here" if failures else "no OpenCL runtime"
    if _fallback_off():
        why += f" (pip runtimes off: {FALLBACK_VARIABLE}=0)"
    return _no_runtime(tried, failures, why)


def _empty_vendors() -> str:
    """A folder with no ICD file, so that the loader skips installed platforms that
    cannot compile (memtype's cache folder, else a fresh temporary one)."""
    where = _cache_path().parent / "no-opencl-vendors"
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home: a temporary folder does as well
        return tempfile.mkdtemp(prefix="memtype-no-vendors-")
    return str(where)


def prepare() -> OpenCLRuntime:
    """Choose pyclesperanto's OpenCL runtime before its first import (once per process)."""
    global _decision
    if _decision is None:
        decision = _decide()
        if decision.source == "pip" and decision.library is not None:
            os.environ["OCL_ICD_FILENAMES"] = decision.library
            if decision.hide_installed:
                os.environ["OCL_ICD_VENDORS"] = _empty_vendors()
        _decision = decision
    return _decision


def fix() -> str:
    """The way out where pyclesperanto cannot run, for the situation :func:`runtime` describes."""
    chosen = runtime()
    pocl = _pip_pocl()
    if chosen.source == "preloaded" and pocl is not None:
        return (f"let memtype import pyclesperanto (import memtype before pyclesperanto, or "
                f"call memtype.frameworks.load_adapter('pyclesperanto') first), or "
                f"export OCL_ICD_FILENAMES={pocl} before starting Python")
    if chosen.source == "user":
        return (f"OCL_ICD_FILENAMES={chosen.library} cannot run kernels: point it at a "
                f"working OpenCL library, or unset it to let memtype choose")
    if _turned_off():
        return f"unset {OFF_VARIABLE} (or drop --no-opencl) to use OpenCL"
    if _fallback_off() and candidates_from_pip():
        return f"unset {FALLBACK_VARIABLE} to use the pip-installed OpenCL runtimes"
    if chosen.tried:  # something is installed but does not compile
        without = "; or run without OpenCL (--no-opencl): the steps that have another " \
                  "implementation use it"
        if _pip_library("intel") is None:
            return _INTEL_HINT + without
        if "intel" not in pip_order():
            return (f"add intel to {RUNTIMES_VARIABLE} (Intel's CPU runtime is installed)"
                    + without)
        return "install your CPU or GPU vendor's OpenCL driver" + without
    return _INSTALL


def candidates_from_pip() -> bool:
    """Whether a pip OpenCL runtime is installed (whatever the fallback setting says)."""
    return any(_pip_library(key) is not None for key in _PIP_RUNTIMES)


def unusable_reason() -> str:
    """Why pyclesperanto cannot run kernels here, with the way out ("" when it can)."""
    chosen = runtime()
    if chosen.usable:
        return ""
    return f"no usable OpenCL runtime: {chosen.reason}. Fix: {fix()}"


_OFF = OpenCLRuntime("none", None, f"OpenCL turned off ({OFF_VARIABLE}=1, --no-opencl)",
                     usable=False, reason=f"OpenCL is turned off ({OFF_VARIABLE}, --no-opencl)")


def runtime() -> OpenCLRuntime:
    """The decision made by :func:`prepare`, or what it would be (nothing is changed); while
    ``MEMTYPE_NO_OPENCL`` is set, "turned off", whatever was decided (the switch is read at
    each call: a command's ``--no-opencl`` holds for that command, not the process)."""
    if _turned_off():
        return _OFF
    return _decision if _decision is not None else _decide()
