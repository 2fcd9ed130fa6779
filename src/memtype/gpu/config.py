"""Framework memory settings, applied explicitly before the frameworks start.

Importing memtype sets nothing. :func:`configure` sets what it is asked to: environment
variables that a framework reads when its runtime starts (so they also reach frameworks
imported later), and the framework's own API where it is loaded. Asked too late (the
runtime already started with another value), it raises :class:`ConfigurationError`
instead of silently doing nothing. The signals are the ones the frameworks check
themselves: JAX's ``backends_are_initialized()``, TensorFlow's eager context handle,
``torch.cuda.is_initialized()``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from memtype.errors import ConfigurationError
from memtype.frameworks import load_adapter

__all__ = ["configure"]

_JAX_PREALLOCATE = "XLA_PYTHON_CLIENT_PREALLOCATE"
_JAX_FRACTION = "XLA_PYTHON_CLIENT_MEM_FRACTION"
_JAX_X64 = "JAX_ENABLE_X64"
_TF_GROWTH = "TF_FORCE_GPU_ALLOW_GROWTH"
_TORCH_ALLOC = "PYTORCH_CUDA_ALLOC_CONF"


def _started(name: str) -> bool:
    """Whether framework ``name`` is imported and its runtime has started."""
    if name not in sys.modules:
        return False
    adapter: Any = load_adapter(name)
    return bool(adapter.runtime_started())


def _flag(value: bool) -> str:
    """The frameworks' spelling of a boolean environment value."""
    return "true" if value else "false"


def _set_startup_env(framework: str, variable: str, value: str, default: str | None,
                     setting: str) -> str:
    """Set an environment variable read at start-up, or check it is already in effect."""
    if _started(framework):
        current = os.environ.get(variable, default)
        if current != value:
            raise ConfigurationError(
                f"{setting}: {framework} has already started, so {variable}={value!r} can no "
                f"longer take effect (it started with {current!r}). Call "
                "memtype.gpu.configure(...) before the first array of that framework is made."
            )
        return "already in effect"
    os.environ[variable] = value
    return value


def _tensorflow_growth(enabled: bool) -> str:
    """Memory growth on every TensorFlow GPU (and for GPUs it creates later)."""
    if "tensorflow" not in sys.modules:
        os.environ[_TF_GROWTH] = _flag(enabled)
        return _flag(enabled)
    tf: Any = sys.modules["tensorflow"]
    gpus = tf.config.list_physical_devices("GPU")
    if _started("tensorflow"):
        wrong = [g.name for g in gpus if tf.config.experimental.get_memory_growth(g) != enabled]
        if wrong:
            raise ConfigurationError(
                f"tensorflow_memory_growth={enabled}: TensorFlow has already initialised "
                f"{', '.join(wrong)} with memory growth {not enabled}; call "
                "memtype.gpu.configure(...) before the first TensorFlow operation."
            )
        return "already in effect"
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, enabled)
    os.environ[_TF_GROWTH] = _flag(enabled)
    return _flag(enabled)


def _jax_x64(enabled: bool) -> str:
    """64-bit JAX: a run-time flag when JAX is loaded, else read when it is imported."""
    if "jax" in sys.modules:
        sys.modules["jax"].config.update("jax_enable_x64", enabled)
    else:
        os.environ[_JAX_X64] = _flag(enabled)
    return _flag(enabled)


def configure(*, jax_preallocate: bool | None = False,
              jax_memory_fraction: float | None = None,
              jax_enable_x64: bool | None = None,
              tensorflow_memory_growth: bool | None = True,
              torch_allocator: str | None = None) -> dict[str, str]:
    """Apply framework memory settings; call before the frameworks start.

    Every argument left ``None`` is left alone.

    Parameters
    ----------
    jax_preallocate : bool, optional
        Whether JAX grabs most of GPU memory at start (``XLA_PYTHON_CLIENT_PREALLOCATE``).
        memtype's default ``False`` lets several frameworks share a GPU.
    jax_memory_fraction : float, optional
        The fraction of GPU memory JAX may use (``XLA_PYTHON_CLIENT_MEM_FRACTION``).
    jax_enable_x64 : bool, optional
        64-bit JAX arrays (``jax_enable_x64``); may be changed at any time.
    tensorflow_memory_growth : bool, optional
        TensorFlow allocates GPU memory as needed instead of all at start.
    torch_allocator : str, optional
        PyTorch's CUDA caching allocator settings (``PYTORCH_CUDA_ALLOC_CONF``), e.g.
        ``"expandable_segments:True"``.

    Returns
    -------
    dict of str to str
        What was applied per setting (``"already in effect"`` where nothing had to change).

    Raises
    ------
    ConfigurationError
        A framework already started with a different value for a start-up setting, or
        ``jax_memory_fraction`` outside (0, 1].

    Examples
    --------
    >>> import memtype as mt
    >>> mt.gpu.configure(jax_preallocate=None, tensorflow_memory_growth=None)
    {}
    """
    applied: dict[str, str] = {}
    if jax_preallocate is not None:
        applied["jax_preallocate"] = _set_startup_env(
            "jax", _JAX_PREALLOCATE, _flag(jax_preallocate), "true", "jax_preallocate")
    if jax_memory_fraction is not None:
        if not 0.0 < jax_memory_fraction <= 1.0:
            raise ConfigurationError(
                f"jax_memory_fraction must be in (0, 1]; received {jax_memory_fraction!r}.")
        applied["jax_memory_fraction"] = _set_startup_env(
            "jax", _JAX_FRACTION, f"{jax_memory_fraction:g}", "0.75", "jax_memory_fraction")
    if jax_enable_x64 is not None:
        applied["jax_enable_x64"] = _jax_x64(jax_enable_x64)
    if tensorflow_memory_growth is not None:
        applied["tensorflow_memory_growth"] = _tensorflow_growth(tensorflow_memory_growth)
    if torch_allocator is not None:
        applied["torch_allocator"] = _set_startup_env(
            "torch", _TORCH_ALLOC, torch_allocator, None, "torch_allocator")
    return applied
