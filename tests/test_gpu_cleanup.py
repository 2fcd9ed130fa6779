"""GPU cleanup: a registry from the table, touching only loaded frameworks, reporting bytes."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import numpy as np
import pytest

import memtype as mt
from memtype.frameworks import iter_frameworks, known_names
from memtype.gpu.caches import CleanupReport, cleanup_framework


def test_registry_is_built_from_the_table() -> None:
    registry = mt.gpu.MEMORY_TYPE_CLEANUP_REGISTRY
    assert list(registry) == list(known_names()) and len(registry) == len(known_names())
    for fw in iter_frameworks():
        assert callable(registry[fw.name])


def test_registry_numpy_entry_is_a_no_op() -> None:
    report = mt.gpu.MEMORY_TYPE_CLEANUP_REGISTRY["numpy"](None)
    assert report == CleanupReport("numpy", None, "host")
    assert report.freed_bytes is None


def test_unknown_memory_type() -> None:
    with pytest.raises(mt.UnknownMemoryTypeError, match="'pytorch'"):
        mt.gpu.MEMORY_TYPE_CLEANUP_REGISTRY["pytorch"]
    with pytest.raises(mt.UnknownMemoryTypeError):
        mt.gpu.cleanup("pytorch")


def test_nothing_is_imported_or_started() -> None:
    code = (
        "import json, sys, memtype as mt\n"
        "reports = mt.gpu.cleanup_all_gpu_frameworks()\n"
        "named = mt.gpu.cleanup('torch') + mt.gpu.cleanup('jax')\n"
        "loaded = [m for m in ('torch', 'jax', 'tensorflow', 'cupy', 'pyclesperanto')"
        " if m in sys.modules]\n"
        "print(json.dumps([[r.memory_type for r in reports], [r.status for r in named], loaded]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    cleaned, named, loaded = json.loads(out.stdout)
    assert cleaned == ["numpy"] and named == ["not loaded", "not loaded"] and loaded == []


@pytest.mark.requires("torch")
def test_loaded_frameworks_are_cleaned_without_starting_cuda() -> None:
    import torch

    reports = mt.gpu.cleanup_all_gpu_frameworks()
    names = [r.memory_type for r in reports]
    assert names == [fw.name for fw in iter_frameworks() if fw.module in sys.modules]
    by_name = {r.memory_type: r for r in reports}
    assert by_name["numpy"].status == "host"
    if not torch.cuda.is_available():
        assert by_name["torch"].status == "not started"
        assert not torch.cuda.is_initialized()


@pytest.mark.requires("jax")
def test_started_runtime_reports_before_and_after() -> None:
    import jax.numpy as jnp

    jnp.ones(3).block_until_ready()  # the JAX runtime is started
    report = cleanup_framework("jax")
    assert report.status == "freed"
    assert isinstance(report.before, dict) and isinstance(report.after, dict)


def test_freed_bytes_is_the_largest_drop() -> None:
    report = CleanupReport("torch", 0, "freed", {"allocated": 10, "reserved": 100},
                           {"allocated": 10, "reserved": 40})
    assert report.freed_bytes == 60


@pytest.mark.gpu
@pytest.mark.requires("torch")
def test_torch_cache_is_freed_on_gpu() -> None:
    torch = importlib.import_module("torch")
    x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")
    del x
    report = mt.gpu.cleanup("torch", gpu_id=0)[0]
    assert report.status == "freed"
    assert report.freed_bytes is not None and report.freed_bytes >= 256 << 20
    assert torch.cuda.memory_reserved(0) == report.after["reserved"]


@pytest.mark.gpu
@pytest.mark.requires("cupy")
def test_cupy_pool_is_freed_on_gpu() -> None:
    cp = importlib.import_module("cupy")
    x = cp.asarray(np.zeros(64 << 20, np.uint8))
    del x
    report = mt.gpu.cleanup("cupy", gpu_id=0)[0]
    assert report.status == "freed" and report.freed_bytes >= 64 << 20


def test_cleanup_is_callable_whatever_was_imported_first() -> None:
    code = (
        "from memtype.gpu.caches import cleanup_framework\n"
        "import memtype as mt, memtype.gpu.caches as module\n"
        "assert mt.gpu.cleanup is module.cleanup\n"
        "print([r.status for r in mt.gpu.cleanup('numpy')])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['host']"


def test_a_blocked_framework_counts_as_not_loaded() -> None:
    # sys.modules[name] = None blocks an import: cleanup and configure must not load the
    # adapter of such a framework (which would raise a raw ModuleNotFoundError)
    code = (
        "import sys, json\n"
        "for name in ('torch', 'jax', 'tensorflow'):\n"
        "    sys.modules[name] = None\n"
        "import memtype as mt\n"
        "reports = {r.memory_type: r.status for r in mt.gpu.cleanup_all_gpu_frameworks()}\n"
        "applied = mt.gpu.configure(jax_enable_x64=True)\n"
        "print(json.dumps([reports, sorted(applied)]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    reports, applied = json.loads(done.stdout.strip().splitlines()[-1])
    assert not {"torch", "jax", "tensorflow"} & set(reports)
    assert "jax_enable_x64" in applied
