"""memtype.gpu.configure: explicit, before the frameworks start; a clear error when too late.

Each test runs in a fresh interpreter, since a framework's start-up happens once per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import memtype as mt
from memtype.errors import ArgumentTypeError, ConfigurationError
from memtype.frameworks import Framework, Setting, register_framework, unregister_framework

_SETTINGS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "JAX_ENABLE_X64",
             "TF_FORCE_GPU_ALLOW_GROWTH", "PYTORCH_CUDA_ALLOC_CONF")


def run_fresh(body: str) -> dict[str, object]:
    """Run ``body`` in a new interpreter without memtype's settings in its environment."""
    env = {k: v for k, v in os.environ.items() if k not in _SETTINGS}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    prelude = "import json, os, sys\nimport memtype as mt\nout = {}\n"
    code = prelude + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_import_sets_nothing() -> None:
    out = run_fresh("""
        before = dict(os.environ)
        import memtype.gpu, memtype.decorators
        mt.gpu.configure  # resolving the name applies nothing
        out["changed"] = sorted(set(os.environ.items()) ^ set(before.items()))
    """)
    assert out["changed"] == []


def test_configure_before_any_framework_is_imported() -> None:
    out = run_fresh("""
        out["applied"] = mt.gpu.configure()
        out["env"] = [os.environ.get(k) for k in
                      ("XLA_PYTHON_CLIENT_PREALLOCATE", "TF_FORCE_GPU_ALLOW_GROWTH")]
        out["loaded"] = [m for m in ("jax", "tensorflow", "torch") if m in sys.modules]
    """)
    assert out["applied"] == {"jax_preallocate": "false", "tensorflow_memory_growth": "true"}
    assert out["env"] == ["false", "true"] and out["loaded"] == []


@pytest.mark.requires("jax")
def test_jax_preallocate_after_jax_started_is_an_error() -> None:
    out = run_fresh("""
        import jax.numpy as jnp
        jnp.ones(3).block_until_ready()
        try:
            mt.gpu.configure(jax_preallocate=False, tensorflow_memory_growth=None)
            out["error"] = None
        except mt.MemtypeError as exc:
            out["error"] = [type(exc).__name__, isinstance(exc, RuntimeError), str(exc)]
        out["same"] = mt.gpu.configure(jax_preallocate=True, tensorflow_memory_growth=None)
    """)
    name, is_runtime_error, message = out["error"]  # type: ignore[misc]
    assert name == "ConfigurationError" and is_runtime_error
    assert "jax has already started" in message and "XLA_PYTHON_CLIENT_PREALLOCATE" in message
    assert out["same"] == {"jax_preallocate": "already in effect"}


@pytest.mark.requires("jax")
def test_jax_imported_but_not_started_can_still_be_configured() -> None:
    out = run_fresh("""
        import jax, jax.numpy as jnp
        out["applied"] = mt.gpu.configure(jax_preallocate=False, jax_memory_fraction=0.5,
                                           tensorflow_memory_growth=None)
        jnp.ones(3).block_until_ready()
        out["env"] = [os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"],
                      os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"]]
    """)
    assert out["applied"] == {"jax_preallocate": "false", "jax_memory_fraction": "0.5"}
    assert out["env"] == ["false", "0.5"]


@pytest.mark.requires("jax")
def test_jax_enable_x64_before_and_after_import() -> None:
    out = run_fresh("""
        mt.gpu.configure(jax_enable_x64=True, jax_preallocate=None, tensorflow_memory_growth=None)
        import jax, jax.numpy as jnp
        out["before_import"] = str(jnp.ones(2, dtype="float64").dtype)
        mt.gpu.configure(jax_enable_x64=False, jax_preallocate=None,
                         tensorflow_memory_growth=None)
        out["after"] = bool(jax.config.jax_enable_x64)
    """)
    assert out == {"before_import": "float64", "after": False}


@pytest.mark.requires("torch", "pyclesperanto", "tensorflow")
def test_tensorflow_memory_growth_before_and_after_start() -> None:
    out = run_fresh("""
        import torch, pyclesperanto  # the import order tensorflow needs beside them
        import tensorflow as tf
        out["before"] = mt.gpu.configure(jax_preallocate=None)
        tf.constant(1.0) + 1.0
        out["env"] = os.environ["TF_FORCE_GPU_ALLOW_GROWTH"]
        out["after"] = mt.gpu.configure(jax_preallocate=None)
        out["gpus"] = len(tf.config.list_physical_devices("GPU"))
    """)
    assert out["before"] == {"tensorflow_memory_growth": "true"} and out["env"] == "true"
    assert out["after"] == {"tensorflow_memory_growth": "already in effect"}


@pytest.mark.requires("torch")
def test_torch_allocator_before_cuda_starts() -> None:
    out = run_fresh("""
        import torch
        out["applied"] = mt.gpu.configure(torch_allocator="expandable_segments:True",
                                           jax_preallocate=None, tensorflow_memory_growth=None)
        out["env"] = os.environ["PYTORCH_CUDA_ALLOC_CONF"]
    """)
    assert out == {"applied": {"torch_allocator": "expandable_segments:True"},
                   "env": "expandable_segments:True"}


def test_invalid_memory_fraction() -> None:
    with pytest.raises(ConfigurationError, match="received 1.5"):
        mt.gpu.configure(jax_memory_fraction=1.5, jax_preallocate=None,
                         tensorflow_memory_growth=None)


def test_nothing_asked_nothing_done() -> None:
    assert mt.gpu.configure(jax_preallocate=None, tensorflow_memory_growth=None) == {}


@pytest.mark.gpu
@pytest.mark.requires("tensorflow")
def test_tensorflow_growth_after_gpu_initialised_is_an_error() -> None:
    out = run_fresh("""
        import importlib.util
        import torch
        if importlib.util.find_spec("pyclesperanto"):
            import pyclesperanto  # before tensorflow (pocl)
        import tensorflow as tf
        gpus = tf.config.list_physical_devices("GPU")
        tf.config.experimental.set_memory_growth(gpus[0], False)
        tf.constant(1.0) + 1.0
        try:
            mt.gpu.configure(jax_preallocate=None, tensorflow_memory_growth=True)
            out["error"] = None
        except mt.MemtypeError as exc:
            out["error"] = str(exc)
    """)
    assert "TensorFlow has already initialised" in str(out["error"])


@pytest.mark.gpu
def test_torch_allocator_after_cuda_started_is_an_error() -> None:
    out = run_fresh("""
        import torch
        torch.ones(1, device="cuda")
        try:
            mt.gpu.configure(torch_allocator="expandable_segments:True", jax_preallocate=None,
                             tensorflow_memory_growth=None)
            out["error"] = None
        except mt.MemtypeError as exc:
            out["error"] = str(exc)
    """)
    assert "torch has already started" in str(out["error"])


def test_an_unknown_setting_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ArgumentTypeError, match="jax_prealocate.*expected any of.*jax_preallocate"):
        mt.gpu.configure(jax_prealocate=False)


def test_a_flag_that_is_not_a_bool_is_refused() -> None:
    with pytest.raises(ArgumentTypeError, match="tensorflow_memory_growth must be a bool"):
        mt.gpu.configure(jax_preallocate=None, tensorflow_memory_growth="yes")


def test_a_registered_rows_setting_is_applied_from_the_table(
        monkeypatch: pytest.MonkeyPatch) -> None:
    row = Framework(name="cfgtoy", module="memtype_cfgtoy_not_imported",
                    array_types=("memtype_cfgtoy_not_imported:A",),
                    adapter="memtype_cfgtoy_not_imported:Adapter", device_kinds=("cpu",),
                    install_hint="(none)",
                    settings=(Setting("cfgtoy_cache", "MEMTYPE_CFGTOY_CACHE", "text"),))
    monkeypatch.delenv("MEMTYPE_CFGTOY_CACHE", raising=False)
    register_framework(row)
    try:
        applied = mt.gpu.configure(cfgtoy_cache="small", jax_preallocate=None,
                                   tensorflow_memory_growth=None)
    finally:
        unregister_framework("cfgtoy")
    assert applied == {"cfgtoy_cache": "small"}
    assert os.environ["MEMTYPE_CFGTOY_CACHE"] == "small"
