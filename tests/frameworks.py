"""Which memory types this machine can run, read from the framework table, and the test
parameters made from it: one case per built-in memory type, always listed, each carrying
the markers that name what it needs (``requires(module)``, ``gpu``, ``opencl``)."""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pytest

from memtype.frameworks import Framework, iter_frameworks, load_adapter


def _row(name: str) -> Framework:
    return next(f for f in iter_frameworks() if f.name == name)


@functools.cache
def unusable_reason(name: str) -> str:
    """Why a memory type cannot run here ("" when it is installed and has a device to put
    arrays on). An installed framework that fails to import raises: that is a failure of
    the install, never a reason to skip."""
    fw = _row(name)
    if importlib.util.find_spec(fw.module) is None:
        return f"{name} is not installed ({fw.install_hint})"
    adapter = load_adapter(name)
    if "cpu" in fw.device_kinds or adapter.gpu_count() > 0:
        return ""
    return adapter.no_device_reason() or f"{name} sees no {fw.device_kinds[0]} device"


def usable(name: str) -> bool:
    """Installed, and with a device to put arrays on (a broken install raises)."""
    return not unusable_reason(name)


@functools.cache
def has_gpu() -> bool:
    """A CUDA GPU is visible to torch or cupy."""
    for name in ("torch", "cupy"):
        if importlib.util.find_spec(name) is not None and load_adapter(name).gpu_count() > 0:
            return True
    return False


def builtin_names() -> list[str]:
    """The built-in rows (their adapters ship in memtype; rows registered by tests do not)."""
    return [fw.name for fw in iter_frameworks() if fw.adapter.startswith("memtype.")]


def available_types() -> list[str]:
    """The built-in memory types usable here. For a test's own logic only (e.g. which
    sources to compare against); never to choose a test's cases: use :func:`type_params`."""
    return [name for name in builtin_names() if usable(name)]


def needs(*names: str) -> list[pytest.MarkDecorator]:
    """The markers naming what the memory types ``names`` need: the module installed, and a
    CUDA GPU (``gpu``) or an OpenCL device (``opencl``) where they have no host arrays."""
    marks: list[pytest.MarkDecorator] = []
    for name in dict.fromkeys(names):
        fw = _row(name)
        marks.append(pytest.mark.requires(fw.module))
        if fw.gpu_only:
            marks.append(pytest.mark.opencl if fw.gpu_kind == "opencl" else pytest.mark.gpu)
    return marks


def type_params(names: Iterable[str] | None = None) -> list[object]:
    """One ``pytest.param`` per memory type (default: every built-in one), id'd by name and
    marked with what it needs: a case that cannot run here is listed as a skip that names
    what is absent, never dropped."""
    return [pytest.param(n, marks=needs(n), id=n) for n in (names or builtin_names())]


def pair_params(pairs: Iterable[tuple[str, str]], sep: str = "-") -> list[object]:
    """``type_params`` for (source, target) pairs, id'd ``source<sep>target``."""
    return [pytest.param(s, t, marks=needs(s, t), id=f"{s}{sep}{t}") for s, t in pairs]


def holds(name: str, *dtypes: str) -> bool:
    """Whether memory type ``name`` holds every one of ``dtypes`` here (JAX without x64 holds
    no 64-bit types; pyclesperanto no float64, bool...). A type that cannot run here counts as
    holding them: its cases stay listed, skipped by their markers."""
    from memtype.dtypes import holds_dtype

    if unusable_reason(name):
        return True
    adapter = load_adapter(name)
    return all(holds_dtype(adapter, np.dtype(d)) for d in dtypes)


def held_params(rows: Sequence[tuple[Any, ...]], dtypes: Sequence[int | str],
                names: Iterable[str] | None = None) -> list[object]:
    """(memory type, row) cases, id'd ``row[0]-type``, for each built-in memory type and each
    row whose dtypes (``row[i]`` for an int ``i`` of ``dtypes``, a str as it is) it holds: a
    dtype a framework cannot hold is no case of a test about the values it holds (refusals
    have tests of their own)."""
    return [pytest.param(name, row, marks=needs(name), id=f"{row[0]}-{name}")
            for name in (names or builtin_names()) for row in rows
            if holds(name, *(row[d] if isinstance(d, int) else d for d in dtypes))]
