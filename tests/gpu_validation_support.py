"""Shared by the GPU validation tests of issue 7 (``tests/test_gpu_validation_*.py``).

Arrays are made, inspected and read back with each framework's own API (never through
memtype), so that the tests check memtype against the frameworks rather than against itself.
Memory-hungry checks run in fresh interpreters (:func:`run_fresh`): a failure there cannot
leave the test session's GPU state poisoned, and start-up settings (JAX preallocation) are
those of a new process. Nothing here imports a GPU framework at import time.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.frameworks import Device, load_adapter
from tests.frameworks import has_gpu

GPU_TYPES: tuple[str, ...] = ("cupy", "torch", "jax")
"""The CUDA frameworks the validation covers (TensorFlow is not installed on the GPU machine)."""

GPU_PAIRS: list[tuple[str, str]] = [(s, t) for s in GPU_TYPES for t in GPU_TYPES if s != t]
PAIR_IDS: list[str] = [f"{s}->{t}" for s, t in GPU_PAIRS]

SRC = Path(mt.__file__).resolve().parents[1]
"""The directory holding the ``memtype`` package (``src`` in a checkout)."""

_MARKER = "GPU-VALIDATION-RESULT "
# start-up settings a fresh interpreter must not inherit (conftest sets the JAX one)
_STARTUP_SETTINGS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
                     "JAX_ENABLE_X64", "TF_FORCE_GPU_ALLOW_GROWTH", "PYTORCH_CUDA_ALLOC_CONF")


def gpu_count() -> int:
    """CUDA GPUs seen by torch (else cupy); 0 without a GPU. Safe at collection time."""
    if not has_gpu():
        return 0
    for name in ("torch", "cupy"):
        if importlib.util.find_spec(name) is not None:
            count = load_adapter(name).gpu_count()
            if count:
                return count
    return 0


GPU_IDS: list[int] = list(range(max(gpu_count(), 1)))
"""Every GPU id of this machine (``[0]`` where there is none: those tests are skipped)."""


def require(name: str) -> Any:
    """The framework's module; skips the test when it is missing or sees no CUDA GPU."""
    module = pytest.importorskip(name)
    if load_adapter(name).gpu_count() == 0:
        pytest.skip(f"{name} is installed but sees no CUDA GPU")
    return module


def _jax_gpu(gpu_id: int) -> Any:
    """JAX's device object for CUDA GPU ``gpu_id``."""
    import jax

    return jax.devices("gpu")[gpu_id]


def on_gpu(name: str, values: np.ndarray[Any, Any], gpu_id: int = 0) -> Any:
    """``values`` copied to GPU ``gpu_id`` as a ``name`` array, by the framework itself."""
    if name == "cupy":
        import cupy as cp

        with cp.cuda.Device(gpu_id):
            return cp.asarray(values)
    if name == "torch":
        import torch

        return torch.as_tensor(values, device=f"cuda:{gpu_id}")
    if name == "jax":
        import jax

        return jax.device_put(values, _jax_gpu(gpu_id))
    raise ValueError(f"not a CUDA framework of the validation: {name!r}")


def pointer(x: Any) -> int:
    """The device address of ``x``'s first element, from the framework's own API."""
    name = mt.detect_memory_type(x).value
    if name == "cupy":
        return int(x.data.ptr)
    if name == "torch":
        return int(x.data_ptr())
    if name == "jax":
        return int(x.unsafe_buffer_pointer())
    raise ValueError(f"not a CUDA framework of the validation: {name!r}")


def native_device(x: Any) -> Device:
    """Where ``x`` lives, from the framework's own API."""
    name = mt.detect_memory_type(x).value
    if name == "cupy":
        return Device("cuda", int(x.device.id))
    if name == "torch":
        return Device("cpu") if x.device.type == "cpu" else Device("cuda", int(x.device.index))
    if name == "jax":
        dev = next(iter(x.devices()))
        return Device("cpu") if dev.platform == "cpu" else Device("cuda", int(dev.id))
    raise ValueError(f"not a CUDA framework of the validation: {name!r}")


def to_host(x: Any) -> np.ndarray[Any, Any]:
    """A NumPy copy of a GPU array, made by the framework itself."""
    name = mt.detect_memory_type(x).value
    if name == "cupy":
        import cupy as cp

        return np.array(cp.asnumpy(x))
    if name == "torch":
        return np.array(x.detach().cpu().numpy())
    return np.array(x)


def synchronize() -> None:
    """Wait for all work queued on GPU 0 by torch and cupy (when they are loaded)."""
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():
        sys.modules["torch"].cuda.synchronize(0)
    if "cupy" in sys.modules and load_adapter("cupy").gpu_count():
        sys.modules["cupy"].cuda.runtime.deviceSynchronize()


def release_gpu_memory() -> None:
    """Drop garbage and empty the caches of every loaded framework (between tests)."""
    gc.collect()
    mt.gpu.cleanup_all_gpu_frameworks()


def run_fresh(body: str, timeout: float = 180.0) -> dict[str, Any]:
    """Run ``body`` in a new interpreter; returns the dict it left in ``out``.

    The interpreter starts without the frameworks' start-up settings in its environment and
    with memtype importable. A body that sets ``out["skip"]`` skips the test with that reason.
    """
    env = {k: v for k, v in os.environ.items() if k not in _STARTUP_SETTINGS}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    code = ("import json\nout = {}\n" + textwrap.dedent(body)
            + f"\nprint({_MARKER!r} + json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=timeout)
    assert done.returncode == 0, (
        f"the fresh interpreter failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(_MARKER)]
    assert lines, f"the fresh interpreter printed no result:\n{done.stdout[-2000:]}"
    out: dict[str, Any] = json.loads(lines[-1][len(_MARKER):])
    if "skip" in out:
        pytest.skip(str(out["skip"]))
    return out
