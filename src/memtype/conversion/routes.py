"""Routes between two memory types: resolved once per (source array type, target), then
followed for each array.

Paths, in order of preference:

1. same type, same device: the input itself;
2. same type, other device: the framework's own move;
3. same device (host or one CUDA GPU), other type: DLPack (zero-copy), or on the host the
   NumPy hub (``to_numpy`` view, ``from_numpy`` share); a copy only where sharing is unsafe
   (alignment, strides, read-only, byte order, dtype);
4. host <-> device: one transfer;
5. GPU -> GPU that would cross host memory: refused unless ``allow_cpu_roundtrip=True``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memtype._failures import unsupported_reason
from memtype.conversion.devices import target_device
from memtype.detect import detect_framework
from memtype.errors import MemoryConversionError, UnsupportedArrayError
from memtype.frameworks import (
    CPU,
    Adapter,
    Device,
    DeviceAdapter,
    Framework,
    get_framework,
    load_adapter,
    on_table_change,
)

__all__ = ["Route", "ROUTES", "build_route", "follow_route"]


@dataclass(frozen=True)
class Route:
    """What a (source type, target type) pair needs, resolved once."""

    sfw: Framework
    dfw: Framework
    on_host: Callable[[Any], bool] | None  # None: the source type lives on the host only
    host: Callable[[Any], Any] | None  # the host -> host path; None when not applicable
    device_dlpack: Callable[[Any, Device], Any | None] | None  # device -> device by DLPack


# (type(x), target as the caller spelled it) -> its route; cleared when the table changes
ROUTES: dict[tuple[type, object], Route] = {}
on_table_change(ROUTES.clear)


def build_route(x: Any, memory_type: object) -> Route:
    """Resolve (and cache) the route from ``x``'s type to ``memory_type``."""
    sfw = detect_framework(x)
    dfw = get_framework(memory_type)
    src = load_adapter(sfw.name)
    if sfw is not dfw:
        reason = unsupported_reason(sfw, x)
        if reason is not None:  # e.g. a type whose instances can never leave (masked arrays)
            raise UnsupportedArrayError(f"cannot convert to {dfw.name}: {reason}")
    on_host = src.on_host if isinstance(src, DeviceAdapter) else None  # host-only: no check
    device_dlpack = None
    dst = load_adapter(dfw.name)
    if sfw is not dfw and src.dlpack and dst.dlpack and sfw.gpu_kind == dfw.gpu_kind:
        device_dlpack = _dlpack_importer(src, dst)
    route = Route(sfw, dfw, on_host, _host_route(sfw, dfw), device_dlpack)
    ROUTES[(type(x), memory_type)] = route
    return route


def follow_route(x: Any, route: Route, gpu_id: int | str | Device | None,
                 allow_cpu_roundtrip: bool) -> Any:
    """``x`` converted along ``route`` (the paths of the module notes)."""
    sfw, dfw = route.sfw, route.dfw
    if sfw is dfw and gpu_id is None:
        return x  # same type, no device asked for (also devices memtype does not move to)
    src = load_adapter(sfw.name)
    sdev = src.device_of(x)
    ddev = target_device(dfw, sdev, gpu_id)
    if sfw is dfw:
        return x if sdev == ddev or not isinstance(src, DeviceAdapter) else src.to_device(x, ddev)
    dst = load_adapter(dfw.name)
    if not sdev.is_gpu and not ddev.is_gpu:
        assert route.host is not None  # both types live on the host
        return route.host(x)
    if sdev.is_gpu and ddev.is_gpu:
        return _gpu_to_gpu(x, route, src, dst, sdev, ddev, allow_cpu_roundtrip)
    return dst.from_numpy(src.to_numpy(x), ddev)


def _gpu_to_gpu(x: Any, route: Route, src: Adapter, dst: Adapter,
                sdev: Device, ddev: Device, allow_cpu_roundtrip: bool) -> Any:
    sfw, dfw = route.sfw, route.dfw
    if sdev.kind == ddev.kind and route.device_dlpack is not None:  # one accelerator kind
        moved = x if sdev == ddev or not isinstance(src, DeviceAdapter) else src.to_device(x, ddev)
        out = route.device_dlpack(moved, ddev)
        if out is not None:
            return out
    if not allow_cpu_roundtrip:
        raise MemoryConversionError(
            f"the only path from {sdev} to {ddev} goes through host memory "
            f"({sfw.name} {sdev} -> numpy -> {dfw.name} {ddev}); pass allow_cpu_roundtrip=True "
            "to allow that copy.",
            sfw.name, dfw.name,
        )
    return dst.from_numpy(src.to_numpy(x), ddev)


def _host_route(sfw: Framework, dfw: Framework) -> Callable[[Any], Any] | None:
    """The host -> host conversion for a pair, with the adapters bound once."""
    if sfw.gpu_only or dfw.gpu_only:
        return None
    if sfw is dfw:
        return _identity
    src, dst = load_adapter(sfw.name), load_adapter(dfw.name)
    to_numpy, from_numpy = src.to_numpy, dst.from_numpy
    if dst.host_native:
        return to_numpy
    if src.dlpack and dst.dlpack and dst.dlpack_on_host and not src.host_native:
        return _dlpack_host_route(src, dst)
    # the hub's own buffer knowledge (a NumPy subclass's overrides are never asked)
    return lambda x: from_numpy(to_numpy(x), CPU)


def _dlpack_host_route(src: Adapter, dst: Adapter) -> Callable[[Any], Any]:
    """Host -> host through DLPack, falling back to a host copy where sharing is unsafe."""
    importer = _dlpack_importer(src, dst)

    def route(x: Any) -> Any:
        out = importer(x, CPU)
        return dst.from_numpy(src.to_numpy(x), CPU) if out is None else out

    return route


def _dlpack_importer(src: Adapter, dst: Adapter) -> Callable[[Any, Device], Any | None]:
    """Zero-copy DLPack import into ``dst`` (after an on-device copy where the layout needs
    one), or None where it is unsafe (dtype, layout): the caller then copies."""
    any_dtype, contiguous = dst.dlpack_any_dtype, dst.dlpack_contiguous  # once per route
    align = dst.dlpack_align
    export, from_dlpack = src.dlpack_export, dst.from_dlpack
    dtype_ok, dtype_of, exports = dst.dlpack_dtype_ok, src.dtype_of, src.dlpack_dtype_ok

    def importer(x: Any, device: Device) -> Any | None:
        dtype = dtype_of(x)
        if not (any_dtype or dtype_ok(dtype)) or not exports(dtype):  # both ends' DLPack
            return None
        producer = export(x, contiguous, align)
        if producer is None:
            producer = export(src.copy(x), contiguous, align)
            if producer is None:
                return None
        return from_dlpack(producer, device)

    return importer


def _identity(x: Any) -> Any:
    return x

