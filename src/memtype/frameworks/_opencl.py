"""Which OpenCL runtime pyclesperanto gets, decided once before its first import.

pyclesperanto ships the Khronos OpenCL ICD loader, which reads ``OCL_ICD_FILENAMES`` and
the vendor directory (``OCL_ICD_VENDORS``, else ``/etc/OpenCL/vendors``) the first time
OpenCL is used. A machine set up with pip alone has no vendor file, so pyclesperanto
imports without a device. The ``cle`` extra installs ``pocl-binary-distribution``, a pocl
CPU runtime built for pip; when no installed OpenCL platform offers a device, memtype points
``OCL_ICD_FILENAMES`` at that pocl library before importing pyclesperanto.

Rules: nothing happens at ``import memtype``; a value the user set is never replaced;
``MEMTYPE_OPENCL_FALLBACK=0`` turns the fallback off; installed platforms are probed in a
child process (a broken vendor driver cannot take this interpreter down, and the loader of
this process is not initialised before the decision).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OpenCLRuntime", "prepare", "runtime", "fix", "FALLBACK_VARIABLE"]

FALLBACK_VARIABLE = "MEMTYPE_OPENCL_FALLBACK"
_INSTALL = ("pip install 'memtype[cle]' (installs pocl-binary-distribution, a CPU OpenCL "
            "runtime memtype uses automatically), or install your GPU vendor's OpenCL driver")
_DEFAULT_VENDORS = "/etc/OpenCL/vendors"
_PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class OpenCLRuntime:
    """The OpenCL runtime decision.

    ``source`` is ``"user"`` (``OCL_ICD_FILENAMES`` set by the user), ``"system"`` (an
    installed platform offers a device), ``"pip"`` (memtype pointed the loader at the pocl
    of ``pocl-binary-distribution``), ``"none"`` (no runtime found) or ``"preloaded"``
    (pyclesperanto was imported before memtype could decide). ``library`` is the runtime
    library memtype chose, if any; ``detail`` says why, in words.
    """

    source: str
    library: str | None
    detail: str


_decision: OpenCLRuntime | None = None


def _pip_pocl() -> Path | None:
    """The pocl library installed by ``pocl-binary-distribution`` (or bundled by pyopencl)."""
    try:
        files = importlib.metadata.distribution("pocl-binary-distribution").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for entry in files:
        if entry.name.startswith("libpocl") and ".so" in entry.name:
            path = Path(str(entry.locate()))
            if path.is_file():
                return path
    spec = importlib.util.find_spec("pyopencl")  # older pyopencl wheels bundled pocl
    if spec is not None and spec.origin is not None:
        found = sorted((Path(spec.origin).parent / ".libs").glob("libpocl*.so*"))
        if found:
            return found[0]
    return None


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
    import ctypes.util

    return ctypes.util.find_library("OpenCL")


def _installed_devices() -> int:
    """Devices the installed platforms offer, counted in a child process (0 on any failure)."""
    loader = _loader()
    if loader is None:
        return 0
    env = {k: v for k, v in os.environ.items() if k != "OCL_ICD_FILENAMES"}
    cmd = [sys.executable, "-m", "memtype.frameworks._opencl_probe", loader]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=_PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return 0  # a driver that hangs offers nothing usable
    text = done.stdout.strip()
    return int(text) if done.returncode == 0 and text.isdigit() else 0


def _decide() -> OpenCLRuntime:
    """What to do, without doing it (``prepare`` applies it)."""
    if "pyclesperanto" in sys.modules:
        return OpenCLRuntime("preloaded", None, "pyclesperanto was imported before memtype "
                             "loaded it; its OpenCL runtime is whatever it found then")
    user = os.environ.get("OCL_ICD_FILENAMES")
    if user:
        return OpenCLRuntime("user", user, "OCL_ICD_FILENAMES set by the user")
    vendors = _vendor_files()
    if vendors and _installed_devices() > 0:
        names = ", ".join(v.name for v in vendors)
        return OpenCLRuntime("system", None, f"installed platform ({names})")
    why = "installed platforms offer no device" if vendors else "no installed OpenCL platform"
    if os.environ.get(FALLBACK_VARIABLE, "1") == "0":
        return OpenCLRuntime("none", None, f"{why}; fallback off ({FALLBACK_VARIABLE}=0)")
    pocl = _pip_pocl()
    if pocl is None:
        return OpenCLRuntime("none", None, f"{why} and no pip OpenCL runtime")
    return OpenCLRuntime("pip", str(pocl), f"{why}: pocl from pocl-binary-distribution, "
                         "set through OCL_ICD_FILENAMES")


def prepare() -> OpenCLRuntime:
    """Choose pyclesperanto's OpenCL runtime before its first import (once per process)."""
    global _decision
    if _decision is None:
        decision = _decide()
        if decision.source == "pip" and decision.library is not None:
            os.environ["OCL_ICD_FILENAMES"] = decision.library
        _decision = decision
    return _decision


def fix() -> str:
    """The way out of "no OpenCL device", for the situation :func:`runtime` describes."""
    pocl = _pip_pocl()
    chosen = runtime()
    if chosen.source == "preloaded" and pocl is not None:
        return (f"let memtype import pyclesperanto (import memtype before pyclesperanto, or "
                f"call memtype.frameworks.load_adapter('pyclesperanto') first), or "
                f"export OCL_ICD_FILENAMES={pocl} before starting Python")
    if chosen.source == "user":
        return (f"OCL_ICD_FILENAMES={chosen.library} offers no device: point it at a working "
                f"OpenCL library, or unset it")
    if chosen.source == "none" and pocl is not None:
        return f"unset {FALLBACK_VARIABLE} to use the pip-installed pocl ({pocl})"
    return _INSTALL


def runtime() -> OpenCLRuntime:
    """The decision made by :func:`prepare`, or what it would be (nothing is changed)."""
    return _decision if _decision is not None else _decide()
