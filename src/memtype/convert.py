"""convert / convert_memory: the path planner between any two memory types.

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

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from memtype._failures import conversion_failure, unsupported_reason
from memtype.detect import detect_framework, shares_memory
from memtype.errors import (
    DeviceError,
    MemoryConversionError,
    UnknownMemoryTypeError,
    UnsupportedArrayError,
)
from memtype.frameworks import (
    CPU,
    Adapter,
    Device,
    Framework,
    get_framework,
    gpu_index,
    load_adapter,
    on_table_change,
)
from memtype.types import MemoryTypeLike

__all__ = [
    "convert",
    "convert_memory",
    "shares_memory",
    "target_device",
    "ConversionEvent",
    "add_conversion_hook",
    "remove_conversion_hook",
    "capture_conversions",
]


@dataclass(frozen=True)
class ConversionEvent:
    """One conversion, as reported to conversion hooks (the profiler)."""

    source_type: str
    target_type: str
    nbytes: int
    zero_copy: bool
    seconds: float


_hooks: list[Callable[[ConversionEvent], None]] = []
_captured: ContextVar[list[ConversionEvent] | None] = ContextVar("memtype_captured", default=None)
_lock = threading.Lock()
_captures = 0  # captures open in any thread
_watched = False  # hooks or captures: the fast path's one check (a ContextVar read is slower)


def _watch(hooks_delta: Callable[[], None] | None = None, captures: int = 0) -> None:
    """Change the hooks or the count of open captures, and the fast path's flag with them."""
    global _captures, _watched
    with _lock:
        if hooks_delta is not None:
            hooks_delta()
        _captures += captures
        _watched = bool(_hooks) or _captures > 0


def add_conversion_hook(hook: Callable[[ConversionEvent], None]) -> None:
    """Call ``hook`` after every conversion between two different types or devices."""
    _watch(lambda: _hooks.append(hook))


def remove_conversion_hook(hook: Callable[[ConversionEvent], None]) -> None:
    """Stop calling ``hook``; a hook that is not registered is ignored."""
    _watch(lambda: _hooks.remove(hook) if hook in _hooks else None)


@contextmanager
def capture_conversions() -> Iterator[list[ConversionEvent]]:
    """Collect the conversions made in this context, hidden from the registered hooks.

    Inside the ``with`` block, every conversion this thread (or asyncio task) makes is
    appended to the yielded list and is *not* reported to the hooks of
    :func:`add_conversion_hook`; other threads are unaffected. memtype's pipeline planner
    uses it so that its trial conversions do not show up in a user's profiler.

    Examples
    --------
    >>> import numpy as np, memtype as mt
    >>> with mt.capture_conversions() as events:
    ...     _ = mt.convert(np.zeros(4), "torch")
    >>> [(e.source_type, e.target_type, e.zero_copy) for e in events]
    [('numpy', 'torch', True)]
    """
    events: list[ConversionEvent] = []
    token = _captured.set(events)
    _watch(captures=1)
    try:
        yield events
    finally:
        _watch(captures=-1)
        _captured.reset(token)


def _require_device(fw: Framework, adapter: Adapter, kind: str, index: int) -> Device:
    count = adapter.gpu_count()
    if index >= count:
        have = f"only devices 0..{count - 1} exist" if count else f"no {kind} device is available"
        explain = "" if count else adapter.no_device_reason()
        why = f" {explain}" if explain else ""
        raise DeviceError(f"{fw.name} on {kind} device {index} was requested, but {have}.{why}")
    return Device(kind, index)


def target_device(fw: Framework, source: Device, gpu_id: int | None) -> Device:
    """Where a conversion to ``fw`` puts its result.

    ``gpu_id`` picks that GPU for types that have GPUs (ignored by host-only types); without
    it the result stays on the source's device when the target type can live there, else
    on the host, else on GPU 0.
    """
    kind = fw.gpu_kind
    if gpu_id is not None:
        index = gpu_index(gpu_id, allow_none=False)
        if kind is None:
            return CPU
        if source.kind == kind and source.index == index:
            return source
        return _require_device(fw, load_adapter(fw.name), kind, index)
    if source.kind in fw.device_kinds:
        return source
    if not fw.gpu_only:
        return CPU
    assert kind is not None
    return _require_device(fw, load_adapter(fw.name), kind, 0)


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


def _gpu_to_gpu(x: Any, route: _Route, src: Adapter, dst: Adapter,
                sdev: Device, ddev: Device, allow_cpu_roundtrip: bool) -> Any:
    sfw, dfw = route.sfw, route.dfw
    if sdev.kind == ddev.kind and route.device_dlpack is not None:  # one accelerator kind
        moved = x if sdev == ddev else src.to_device(x, ddev)
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


def _plan(x: Any, route: _Route, gpu_id: int | None, allow_cpu_roundtrip: bool) -> Any:
    sfw, dfw = route.sfw, route.dfw
    if sfw is dfw and gpu_id is None:
        return x  # same type, no device asked for (also devices memtype does not move to)
    src = load_adapter(sfw.name)
    sdev = src.device_of(x)
    ddev = target_device(dfw, sdev, gpu_id)
    if sfw is dfw:
        return x if sdev == ddev else src.to_device(x, ddev)
    dst = load_adapter(dfw.name)
    if not sdev.is_gpu and not ddev.is_gpu:
        assert route.host is not None  # both types live on the host
        return route.host(x)
    if sdev.is_gpu and ddev.is_gpu:
        return _gpu_to_gpu(x, route, src, dst, sdev, ddev, allow_cpu_roundtrip)
    return dst.from_numpy(src.to_numpy(x), ddev)


@dataclass(frozen=True)
class _Route:
    """What a (source type, target type) pair needs, resolved once."""

    sfw: Framework
    dfw: Framework
    on_host: Callable[[Any], bool] | None  # None: the source type lives on the host only
    host: Callable[[Any], Any] | None  # the host -> host path; None when not applicable
    device_dlpack: Callable[[Any, Device], Any | None] | None  # device -> device by DLPack


_routes: dict[tuple[type, object], _Route] = {}
on_table_change(_routes.clear)


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


def _identity(x: Any) -> Any:
    return x


def _build_route(x: Any, to: object) -> _Route:
    sfw = detect_framework(x)
    dfw = get_framework(to)
    src = load_adapter(sfw.name)
    if sfw is not dfw:
        reason = unsupported_reason(sfw, x)
        if reason is not None:  # e.g. a type whose instances can never leave (masked arrays)
            raise UnsupportedArrayError(f"cannot convert to {dfw.name}: {reason}")
    on_host = None if sfw.gpu_kind is None else src.on_host  # host-only: no check
    device_dlpack = None
    dst = load_adapter(dfw.name)
    if sfw is not dfw and src.dlpack and dst.dlpack and sfw.gpu_kind == dfw.gpu_kind:
        device_dlpack = _dlpack_importer(src, dst)
    route = _Route(sfw, dfw, on_host, _host_route(sfw, dfw), device_dlpack)
    _routes[(type(x), to)] = route
    return route


def _observed(x: Any, route: _Route, gpu_id: int | None, allow_cpu_roundtrip: bool) -> Any:
    sfw, dfw = route.sfw, route.dfw
    start = time.perf_counter()
    out = _plan(x, route, gpu_id, allow_cpu_roundtrip)
    seconds = time.perf_counter() - start
    if out is x:
        return out
    src = load_adapter(sfw.name)
    nbytes = int(src.dtype_of(x).itemsize) * _size(src.shape_of(x))
    event = ConversionEvent(sfw.name, dfw.name, nbytes, shares_memory(x, out), seconds)
    captured = _captured.get()
    if captured is not None:
        captured.append(event)
        return out
    for hook in tuple(_hooks):
        hook(event)
    return out


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def convert(x: Any, to: MemoryTypeLike, *, gpu_id: int | None = None,
            allow_cpu_roundtrip: bool = False) -> Any:
    """Convert an array to another memory type, sharing memory wherever that is safe.

    Parameters
    ----------
    x : array
        An array of any loaded framework; its type is detected.
    to : MemoryType or str
        The target memory type (``"torch"``, ``MemoryType.JAX``...).
    gpu_id : int, optional
        The GPU the result must live on (types with GPUs); ignored by host-only types.
        Without it the result stays on the source's device where the target can live there.
    allow_cpu_roundtrip : bool
        Allow a GPU -> GPU conversion to go through host memory.

    Returns
    -------
    array
        ``x`` itself when nothing changes; otherwise an array of the target type, which
        shares ``x``'s memory whenever the frameworks allow (see :func:`shares_memory`).
        JAX and TensorFlow treat their arrays as immutable: a zero-copy result of another
        type can alias them, and writing to it changes them.

    Raises
    ------
    UnsupportedArrayError
        ``x`` is not an array, or an array that cannot leave its framework (a masked NumPy
        array, a sparse, meta or quantized torch tensor, a JAX PRNG key array...).
    UnknownMemoryTypeError
        ``to`` names no memory type.
    FrameworkNotInstalledError
        The target framework is not installed.
    DeviceError
        A GPU was requested that does not exist, or the target needs a GPU and there is none.
    MemoryConversionError
        The target cannot hold ``x`` (dtype, shape), or a GPU -> GPU path would cross host
        memory without ``allow_cpu_roundtrip``. Any other framework error is raised as a
        MemoryConversionError chained to it; out-of-memory errors propagate unchanged.

    Examples
    --------
    >>> import numpy as np, memtype as mt
    >>> t = mt.convert(np.arange(4.0), "torch")
    >>> type(t).__name__
    'Tensor'
    """
    try:
        route = _routes.get((type(x), to))
    except TypeError:  # an unhashable ``to``: get_framework explains
        route = None
    if route is None:
        route = _build_route(x, to)
    try:
        if gpu_id is None and route.host is not None and not _watched:
            if route.on_host is None or route.on_host(x):
                return route.host(x)
        if _watched:
            return _observed(x, route, gpu_id, allow_cpu_roundtrip)
        return _plan(x, route, gpu_id, allow_cpu_roundtrip)
    except Exception as exc:  # explained (and chained) when a framework refused the input
        error = conversion_failure(x, route.sfw, route.dfw, exc)
        if error is None:
            raise
        raise error from exc


def convert_memory(data: Any, source_type: MemoryTypeLike, target_type: MemoryTypeLike,
                   gpu_id: int | None = None, allow_cpu_roundtrip: bool = False) -> Any:
    """Convert ``data`` from ``source_type`` to ``target_type`` (the OpenHCS signature).

    Same as :func:`convert`, but the caller states the source type; a statement that does
    not match the data is a :class:`MemoryConversionError` naming both.
    """
    names = {}
    for parameter, value in (("source_type", source_type), ("target_type", target_type)):
        try:
            names[parameter] = get_framework(value)
        except UnknownMemoryTypeError as exc:  # say which of the two names is wrong
            raise UnknownMemoryTypeError(f"{parameter}: {exc}") from None
    declared, target = names["source_type"], names["target_type"].name
    actual = detect_framework(data)
    if declared is not actual:
        raise MemoryConversionError(
            f"source_type was given as {declared.name!r}, but the data is a {actual.name} "
            f"array ({type(data).__module__}.{type(data).__qualname__}).",
            declared.name, target,
        )
    return convert(data, target_type, gpu_id=gpu_id, allow_cpu_roundtrip=allow_cpu_roundtrip)

