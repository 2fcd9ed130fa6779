"""GPU validation, checks 4 and 5 of issue 7 (run with ``pytest -m gpu``; skipped without a GPU).

4. Out-of-memory recovery with real out-of-memory errors: a decorated function whose
   whole-stack temporary does not fit completes slice by slice; memory that CuPy keeps cached
   (its pool, and the work areas of its cuFFT plan cache) is released by memtype's recovery so
   that torch can allocate, and ``memory_usage()`` is back at its baseline afterwards.
5. Importing memtype and detecting types start no GPU runtime (NVML sees no new context and no
   memory taken); ``mt.gpu.configure`` decides whether JAX preallocates.

Every check runs in a fresh interpreter (:func:`run_fresh`): memory is sized from what is
free on the card (80 GB and 141 GB alike), a failure cannot poison the session, and start-up
settings are those of a new process. Nothing allocates managed memory or more than is free.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.gpu_validation_support import release_gpu_memory, require, run_fresh

pytestmark = pytest.mark.gpu

MIB, GIB = 1 << 20, 1 << 30


@pytest.fixture(autouse=True)
def _quiet_parent() -> Iterator[None]:
    """The session's own caches are emptied, so the fresh interpreter finds the GPU free."""
    release_gpu_memory()
    yield


# -- 4. out-of-memory recovery ----------------------------------------------------------------

SLICE_BY_SLICE = """
import warnings
import numpy as np
import torch
import memtype as mt

cap = 4 << 30
free, total = torch.cuda.mem_get_info(0)
if free < 2 * cap:
    out["skip"] = f"needs {2 * cap} bytes free on GPU 0; {free} are free"
else:
    torch.cuda.set_per_process_memory_fraction(cap / total, 0)  # torch may hold 4 GiB
    depth, per_slice = 16, cap // 8  # whole stack: 8 GiB of temporary; one slice: 512 MiB

    @mt.torch(slice_separable=True)
    def smooth(image):
        planes = image.shape[0] if image.ndim == 3 else 1
        temp = torch.ones((planes, per_slice // 4), dtype=torch.float32, device=image.device)
        return image + temp.mean()

    image = np.arange(depth * 64, dtype=np.float32).reshape(depth, 8, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = smooth(image, gpu_id=0)
    out["warnings"] = [str(w.message) for w in caught
                       if issubclass(w.category, mt.gpu.OOMRecoveryWarning)]
    out["device"] = str(result.device)
    out["equal"] = bool(np.array_equal(result.cpu().numpy(), image + 1))
    out["peak"] = int(torch.cuda.max_memory_allocated(0))
    out["cap"] = cap
"""


def test_whole_stack_oom_completes_slice_by_slice() -> None:
    require("torch")
    out = run_fresh(SLICE_BY_SLICE)
    assert len(out["warnings"]) == 1 and "slice by slice" in out["warnings"][0], out["warnings"]
    assert out["device"] == "cuda:0"
    assert out["equal"], "the slice-by-slice result differs from image + 1"
    assert out["peak"] <= out["cap"]


POOL_RETRY = """
import warnings
import numpy as np
import torch, cupy as cp
import memtype as mt

torch.zeros(1, device="cuda:0")
cp.zeros(1)
torch.cuda.synchronize()
pool = cp.get_default_memory_pool()
need, chunk, margin = 4 << 30, 1 << 30, 1 << 30
free, total = torch.cuda.mem_get_info(0)
if free < need + 2 * margin:
    out["skip"] = f"needs {need + 2 * margin} bytes free on GPU 0; {free} are free"
else:
    hoard = []
    while torch.cuda.mem_get_info(0)[0] > margin + chunk:
        hoard.append(cp.empty(chunk, dtype=cp.uint8))
    del hoard  # freed into cupy's pool, which keeps the memory cached
    out["free_before"] = int(torch.cuda.mem_get_info(0)[0])
    out["pool_before"] = int(pool.total_bytes())
    out["need"] = need
    calls = []

    @mt.torch
    def allocate(image):
        calls.append(len(calls))
        temp = torch.ones(need // 4, dtype=torch.float32, device=image.device)
        return image + temp[0]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = allocate(np.zeros((1, 4, 4), np.float32), gpu_id=0)
    out["warnings"] = [str(w.message) for w in caught
                       if issubclass(w.category, mt.gpu.OOMRecoveryWarning)]
    out["calls"] = len(calls)
    out["equal"] = bool(np.array_equal(result.cpu().numpy(), np.ones((1, 4, 4), np.float32)))
    out["pool_after"] = int(pool.total_bytes())
"""


def test_oom_frees_cupys_pool_and_the_retry_succeeds() -> None:
    require("torch")
    require("cupy")
    out = run_fresh(POOL_RETRY)
    assert out["free_before"] < out["need"] <= out["pool_before"], (
        f"the set-up did not leave torch short of memory: {out}")
    assert out["calls"] == 2, f"expected one failed attempt and one retry: {out}"
    assert out["warnings"] == [], "the plain retry should have succeeded (no slice-by-slice)"
    assert out["equal"]
    assert out["pool_after"] < 64 * MIB, f"cupy's pool still holds {out['pool_after']} bytes"


FFT_PLANS = """
import warnings
import numpy as np
import torch, cupy as cp
import memtype as mt

def settle():
    cp.cuda.runtime.deviceSynchronize()
    torch.cuda.synchronize()

def figures():
    mem = mt.gpu.memory_usage(0)["cuda:0"]
    return {"free": int(mem.free_bytes),
            "torch_reserved": int(mem.frameworks.get("torch", {}).get("reserved", 0)),
            "cupy_pool": int(mem.frameworks.get("cupy", {}).get("pool_total", 0))}

pool = cp.get_default_memory_pool()
plans = cp.fft.config.get_plan_cache()
sizes = (1 << 26, 8388617)  # a power of two, and a prime (Bluestein): both need work areas
size = [2 << 20]  # what allocate() takes, in bytes

@mt.torch
def allocate(image):
    temp = torch.empty(size[0], dtype=torch.uint8, device=image.device)
    return image + float(temp.numel() > 0)

def transform():
    for n in sizes:
        x = cp.ones(n, dtype=cp.complex64)
        y = cp.fft.fft(x)
        del x, y
    settle()

# warm-up: cuFFT's and torch's kernels are loaded (never unloaded), memtype's streams made
transform()
allocate(np.zeros((1, 4, 4), np.float32), gpu_id=0)
plans.clear()
pool.free_all_blocks()
torch.cuda.empty_cache()
settle()
baseline = figures()

transform()  # the plans again: their work areas are held in cupy's pool by the plan cache
work = int(plans.get_curr_memsize())
out.update(work=work, plans_before=int(plans.get_curr_size()), held=int(pool.used_bytes()))
if work < (64 << 20):
    out["skip"] = f"cuFFT took only {work} bytes of work area for sizes {sizes}"
else:
    margin, chunk = 1 << 30, 256 << 20
    hoard = []
    while torch.cuda.mem_get_info(0)[0] > margin + chunk:
        hoard.append(cp.empty(chunk, dtype=cp.uint8))
    del hoard
    free_now = int(torch.cuda.mem_get_info(0)[0])
    cached = int(pool.free_bytes())  # what freeing cupy's pool alone gives back
    size[0] = (free_now + cached + work // 2) // (2 << 20) * (2 << 20)
    out.update(free_now=free_now, cached=cached, need=size[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = allocate(np.zeros((1, 4, 4), np.float32), gpu_id=0)
            out["error"] = None
            out["equal"] = bool(np.array_equal(result.cpu().numpy(),
                                               np.ones((1, 4, 4), np.float32)))
            del result
        except torch.OutOfMemoryError as exc:
            out["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    out["warnings"] = [str(w.message) for w in caught
                       if issubclass(w.category, mt.gpu.OOMRecoveryWarning)]
    out["plans_after_recovery"] = int(plans.get_curr_size())
    out["plan_bytes_after_recovery"] = int(plans.get_curr_memsize())
    mt.gpu.cleanup_all_gpu_frameworks()
    settle()
    out["baseline"] = baseline
    out["after"] = figures()
"""


def test_cleanup_releases_cupys_fft_plans_so_torch_can_allocate() -> None:
    require("torch")
    require("cupy")
    out = run_fresh(FFT_PLANS)
    assert out["free_now"] < out["need"], f"the set-up did not leave torch short: {out}"
    assert out["error"] is None, (
        f"torch could not allocate {out['need']} bytes after memtype's recovery: "
        f"{out['error']}; cupy's FFT plan cache still held {out['plans_after_recovery']} plans "
        f"with {out['plan_bytes_after_recovery']} bytes of work area (before: "
        f"{out['plans_before']} plans, {out['work']} bytes)")
    assert out["equal"]
    assert out["warnings"] == [], "freeing the caches should have been enough for the retry"
    base, after = out["baseline"], out["after"]
    assert after["free"] >= base["free"] - 128 * MIB, (
        f"memory_usage() did not return to its baseline: {after} vs {base}")
    assert after["cupy_pool"] <= base["cupy_pool"]
    assert after["torch_reserved"] <= base["torch_reserved"]


# -- 5. no GPU runtime at import; JAX's memory behaviour from configure -----------------------

NO_RUNTIME = """
import time
import pynvml

pynvml.nvmlInit()

def processes(handle):
    try:
        return len(pynvml.nvmlDeviceGetComputeRunningProcesses(handle))
    except pynvml.NVMLError:  # not supported here (some containers): -1, compared as is
        return -1

def snapshot():
    used = procs = 0
    for i in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(i)
        used += int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
        procs += processes(handle)
    return [used, procs]

before = snapshot()
import numpy as np
import torch
import jax
import memtype as mt
import memtype.decorators, memtype.gpu, memtype.pipeline, memtype.storage
from jax._src import xla_bridge

kinds = [mt.detect_memory_type(x).value for x in
         (np.zeros(3), np.ones((2, 2), np.uint8)[::2], torch.zeros(3))]
mt.convert(np.arange(4.0), "torch")
mt.gpu.get_gpu_manager().gpus()
mt.gpu.memory_usage()
reports = mt.gpu.cleanup_all_gpu_frameworks()
time.sleep(1.0)
out.update(kinds=kinds, before=before, after=snapshot(),
           torch_started=torch.cuda.is_initialized(),
           jax_started=xla_bridge.backends_are_initialized(),
           statuses={r.memory_type: r.status for r in reports})
torch.zeros(1, device="cuda:0")  # the control: a CUDA context does show
torch.cuda.synchronize()
time.sleep(1.0)
out["control"] = snapshot()
"""


@pytest.mark.requires("pynvml", "jax")
def test_import_and_detection_start_no_gpu_runtime() -> None:
    require("torch")
    out = run_fresh(NO_RUNTIME)
    (used0, procs0), (used1, procs1), (used2, _) = out["before"], out["after"], out["control"]
    assert out["kinds"] == ["numpy", "numpy", "torch"]
    assert not out["torch_started"] and not out["jax_started"]
    assert out["statuses"]["torch"] == out["statuses"]["jax"] == "not started", out["statuses"]
    assert abs(used1 - used0) <= 16 * MIB, f"GPU memory moved by {used1 - used0} bytes"
    assert procs1 == procs0, "a process appeared on the GPU"
    assert used2 - used1 >= 64 * MIB, "the control (a CUDA context) did not show in NVML"


JAX_MEMORY = """
import memtype as mt

applied = mt.gpu.configure(**settings)  # before jax is imported
import jax
import jax.numpy as jnp

start = mt.gpu.device_memory(0)
if start.free_bytes < 0.4 * start.total_bytes:
    out["skip"] = f"needs 40% of GPU 0 free; {start.free_bytes} of {start.total_bytes} are"
else:
    x = jnp.ones(1 << 20, dtype=jnp.float32).block_until_ready()
    out.update(applied=applied, platform=next(iter(x.devices())).platform,
               taken=start.free_bytes - mt.gpu.device_memory(0).free_bytes,
               free=start.free_bytes, total=start.total_bytes)
"""

JAX_CASES: list[tuple[dict[str, Any], dict[str, str]]] = [
    ({"jax_preallocate": False},
     {"jax_preallocate": "false", "tensorflow_memory_growth": "true"}),
    ({"jax_preallocate": True, "jax_memory_fraction": 0.3},
     {"jax_preallocate": "true", "jax_memory_fraction": "0.3",
      "tensorflow_memory_growth": "true"}),
]


@pytest.mark.parametrize(("settings", "applied"), JAX_CASES, ids=["no-prealloc", "prealloc-30%"])
@pytest.mark.requires("jax")
def test_configure_decides_jax_preallocation(settings: dict[str, Any],
                                             applied: dict[str, str]) -> None:
    out = run_fresh(f"settings = {settings!r}\n" + JAX_MEMORY)
    assert out["applied"] == applied
    assert out["platform"] == "gpu"
    taken, total, free = out["taken"], out["total"], out["free"]
    if settings["jax_preallocate"]:
        assert 0.2 * min(free, total) <= taken <= 0.3 * total + 2 * GIB, (taken, free, total)
    else:
        assert taken < 0.1 * total, f"JAX took {taken} of {total} bytes without preallocation"
