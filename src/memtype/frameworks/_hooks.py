"""The ONE place that supplies the defaults of the adapter contract's optional members.

Callers ask here instead of probing adapters with ``getattr``/``hasattr``; each function
says what an adapter without the member gets (see :mod:`memtype.frameworks._protocol`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from memtype.frameworks._protocol import (
    Adapter,
    Configurable,
    DeviceContext,
    DeviceProperties,
    Diagnostics,
    DtypeOps,
    DtypeParsing,
    GPUHooks,
    HoldsDtype,
    HostCheck,
    ReadOnlyView,
    Runtime,
    Streams,
)

__all__ = [
    "Rules", "rules", "dtype_ops", "holds_dtype", "readonly_view", "on_host", "host_check",
    "streams",
    "current_device", "unsupported", "no_device_reason", "runtime_info", "device_properties",
    "set_memory_cap", "reset_peak", "timing_events", "pinned_host_copy", "parse_dtype",
    "has_holds_dtype", "runtime_started", "is_oom", "apply_setting",
]


@dataclass(frozen=True)
class Rules:
    """An adapter's module constants, with their defaults (see :class:`Adapter`)."""

    host_native: bool = False
    dlpack_on_host: bool = True
    dlpack_contiguous: bool = True
    dlpack_align: int = 1
    dlpack_any_dtype: bool = False
    peak_key: str | None = None


def _get(adapter: object, name: str) -> Any:
    """The adapter's member ``name``, or None (the only ``getattr`` on adapters)."""
    return getattr(adapter, name, None)


def rules(adapter: Adapter) -> Rules:
    """The adapter's constants, defaults filled in."""
    d = Rules()
    def pick(name: str, default: Any) -> Any:
        value = _get(adapter, name)
        return default if value is None else value
    return Rules(bool(pick("HOST_NATIVE", d.host_native)),
                 bool(pick("DLPACK_ON_HOST", d.dlpack_on_host)),
                 bool(pick("DLPACK_CONTIGUOUS", d.dlpack_contiguous)),
                 int(pick("DLPACK_ALIGN", d.dlpack_align)),
                 bool(pick("DLPACK_ANY_DTYPE", d.dlpack_any_dtype)),
                 pick("PEAK_KEY", d.peak_key))


def runtime_started(adapter: Adapter) -> bool:
    """The adapter's ``runtime_started()``; default True (nothing to start)."""
    return _get(adapter, "runtime_started") is None or bool(
        cast(Runtime, adapter).runtime_started())


def is_oom(adapter: Adapter, exc: BaseException) -> bool:
    """The adapter's ``is_oom(exc)``; default: ``exc`` is one of its ``oom_errors()``."""
    if _get(adapter, "is_oom") is None:
        return isinstance(exc, adapter.oom_errors())
    return bool(cast(Runtime, adapter).is_oom(exc))


def dtype_ops(adapter: Adapter) -> DtypeOps | None:
    """``astype``/``rint`` on the device, or None (cast through NumPy)."""
    return cast(DtypeOps, adapter) if _get(adapter, "astype") is not None else None


def _holds_all(dtype: np.dtype[Any]) -> bool:
    return True


def holds_dtype(adapter: Adapter) -> Callable[[np.dtype[Any]], bool]:
    """The adapter's ``holds_dtype``; default: every dtype."""
    fn = _get(adapter, "holds_dtype")
    return _holds_all if fn is None else cast(HoldsDtype, adapter).holds_dtype


def has_holds_dtype(adapter: Adapter) -> bool:
    """Whether the adapter restricts dtypes (defines ``holds_dtype``)."""
    return _get(adapter, "holds_dtype") is not None


def readonly_view(adapter: Adapter) -> Callable[[Any], Any] | None:
    """The adapter's ``readonly_view``, or None (read-only data is copied)."""
    return None if _get(adapter, "readonly_view") is None else cast(
        ReadOnlyView, adapter).readonly_view


def host_check(adapter: Adapter) -> Callable[[Any], bool] | None:
    """The adapter's own fast ``on_host``, or None (callers then ask ``device_of``)."""
    return None if _get(adapter, "on_host") is None else cast(HostCheck, adapter).on_host


def on_host(adapter: Adapter) -> Callable[[Any], bool]:
    """The adapter's fast ``on_host``; default: ``not device_of(x).is_gpu``."""
    own = host_check(adapter)
    if own is not None:
        return own
    device_of = adapter.device_of
    return lambda x: not device_of(x).is_gpu


def streams(adapter: Adapter) -> Streams | None:
    """The adapter's CUDA-style stream functions, or None (no stream hand-off)."""
    return cast(Streams, adapter) if _get(adapter, "current_stream") is not None else None


def current_device(adapter: Adapter) -> Callable[[], int] | None:
    """The adapter's ``current_device``, or None (GPU 0)."""
    return None if _get(adapter, "current_device") is None else cast(
        DeviceContext, adapter).current_device


def _convertible(x: Any) -> str | None:
    return None


def unsupported(adapter: Adapter) -> Callable[[Any], str | None]:
    """The adapter's ``unsupported``; default: every array may leave."""
    fn = _get(adapter, "unsupported")
    return _convertible if fn is None else cast(Diagnostics, adapter).unsupported


def no_device_reason(adapter: Adapter) -> Callable[[], str] | None:
    """The adapter's ``no_device_reason``, or None (nothing to explain)."""
    return None if _get(adapter, "no_device_reason") is None else cast(
        Diagnostics, adapter).no_device_reason


def runtime_info(adapter: Adapter) -> Callable[[], str] | None:
    """The adapter's ``runtime_info``, or None (no runtime line)."""
    return None if _get(adapter, "runtime_info") is None else cast(
        Diagnostics, adapter).runtime_info


def device_properties(adapter: Adapter) -> Callable[[int], DeviceProperties] | None:
    """The adapter's ``device_properties``, or None (it cannot describe a GPU)."""
    return None if _get(adapter, "device_properties") is None else cast(
        GPUHooks, adapter).device_properties


def set_memory_cap(adapter: Adapter) -> Callable[[int, int | None, int], None] | None:
    """The adapter's ``set_memory_cap``, or None (its memory cannot be capped once started)."""
    return None if _get(adapter, "set_memory_cap") is None else cast(
        GPUHooks, adapter).set_memory_cap


def reset_peak(adapter: Adapter) -> Callable[[int], None] | None:
    """The adapter's ``reset_peak``, or None (its peak cannot be reset)."""
    return None if _get(adapter, "reset_peak") is None else cast(GPUHooks, adapter).reset_peak


def timing_events(adapter: Adapter) -> Callable[[], tuple[Any, Any] | None] | None:
    """The adapter's ``timing_events``, or None (no device timing)."""
    return None if _get(adapter, "timing_events") is None else cast(
        GPUHooks, adapter).timing_events


def pinned_host_copy(adapter: Adapter) -> Callable[[Any], Any | None] | None:
    """The adapter's ``pinned_host_copy``, or None (device arrays spill to NumPy)."""
    return None if _get(adapter, "pinned_host_copy") is None else cast(
        GPUHooks, adapter).pinned_host_copy


def parse_dtype(adapter: Adapter) -> Callable[[object], np.dtype[Any] | None] | None:
    """The adapter's ``parse_dtype``, or None (only NumPy dtype-likes)."""
    return None if _get(adapter, "parse_dtype") is None else cast(
        DtypeParsing, adapter).parse_dtype


def apply_setting(adapter: Adapter) -> Callable[[str, str], str] | None:
    """The adapter's ``apply_setting``, or None (settings are environment variables only)."""
    return None if _get(adapter, "apply_setting") is None else cast(
        Configurable, adapter).apply_setting
