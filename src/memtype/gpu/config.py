"""Framework memory settings, applied explicitly before the frameworks start.

Importing memtype sets nothing. :func:`configure` sets what it is asked to: environment
variables that a framework reads when its runtime starts (so they also reach frameworks
imported later), and, through the adapter's ``apply_setting``, the framework's own API where
it is loaded. Asked too late (the runtime already started with another value), it raises
:class:`ConfigurationError` instead of silently doing nothing. Which settings exist, and their
variables, is table data (:attr:`memtype.frameworks.Framework.settings`); whether a runtime
has started is the adapter's ``runtime_started``.
"""

from __future__ import annotations

import os

from memtype.errors import ArgumentTypeError, ConfigurationError
from memtype.frameworks import (
    DeviceAdapter,
    Framework,
    Setting,
    is_loaded,
    iter_frameworks,
    load_adapter,
)
from memtype.frameworks._settings import ALREADY

__all__ = ["configure"]


def _started(fw: Framework) -> bool:
    """Whether the framework is imported and its runtime has started (imports nothing)."""
    adapter = load_adapter(fw.name) if is_loaded(fw) else None
    return isinstance(adapter, DeviceAdapter) and adapter.runtime_started()


def _startup(fw: Framework, setting: Setting, value: str) -> str:
    """Set a variable read at start-up, or check it is already in effect."""
    if _started(fw):
        current = os.environ.get(setting.env, setting.unset)
        if current != value:
            raise ConfigurationError(
                f"{setting.name}: {fw.name} has already started, so {setting.env}={value!r} can "
                f"no longer take effect (it started with {current!r}). Call "
                "memtype.gpu.configure(...) before the first array of that framework is made."
            )
        return ALREADY
    os.environ[setting.env] = value
    return value


def _apply(fw: Framework, setting: Setting, value: str) -> str:
    """One setting: the environment (read when the framework starts), and the loaded
    framework's own API for settings that may change at any time."""
    if setting.startup:
        return _startup(fw, setting, value)
    adapter = load_adapter(fw.name) if is_loaded(fw) else None
    applied = adapter.apply_setting(setting.name, value) if isinstance(
        adapter, DeviceAdapter) else value
    if applied != ALREADY:
        os.environ[setting.env] = value  # also for devices or imports that come later
    return applied


def configure(**settings: bool | float | str | None) -> dict[str, str]:
    """Apply framework memory settings; call before the frameworks start.

    Each keyword is a setting of a framework row (``Framework.settings``); a keyword not
    given takes the setting's default, and ``None`` leaves a setting alone. Built in:

    * ``jax_preallocate`` (bool, default False): JAX grabs most of GPU memory at start
      (``XLA_PYTHON_CLIENT_PREALLOCATE``); False lets several frameworks share a GPU.
    * ``jax_memory_fraction`` (float in (0, 1]): the fraction of GPU memory JAX may use
      (``XLA_PYTHON_CLIENT_MEM_FRACTION``).
    * ``jax_enable_x64`` (bool): 64-bit JAX arrays; may be changed at any time.
    * ``tensorflow_memory_growth`` (bool, default True): TensorFlow allocates GPU memory as
      needed instead of all at start (``TF_FORCE_GPU_ALLOW_GROWTH``).
    * ``torch_allocator`` (str): PyTorch's CUDA caching allocator settings
      (``PYTORCH_CUDA_ALLOC_CONF``), e.g. ``"expandable_segments:True"``.

    Returns
    -------
    dict of str to str
        What was applied per setting (``"already in effect"`` where nothing had to change).

    Raises
    ------
    ConfigurationError
        A framework already started with a different value for a start-up setting, or a
        fraction outside (0, 1].
    ArgumentTypeError
        An unknown keyword, or a value of the wrong type.

    Examples
    --------
    >>> import memtype as mt
    >>> mt.gpu.configure(jax_preallocate=None, tensorflow_memory_growth=None)
    {}
    """
    rows = [(fw, s) for fw in iter_frameworks() for s in fw.settings]
    unknown = sorted(set(settings) - {s.name for _fw, s in rows})
    if unknown:
        raise ArgumentTypeError(
            f"configure() got unknown setting(s) {', '.join(unknown)}; expected any of "
            f"{', '.join(s.name for _fw, s in rows)}."
        )
    spelled = [(fw, s, s.spell(v)) for fw, s in rows
               if (v := settings.get(s.name, s.default)) is not None]  # all checked first
    return {s.name: _apply(fw, s, text) for fw, s, text in spelled}
