"""The conversion functions: :func:`convert` and the OpenHCS signature :func:`convert_memory`.

A call reads top-down: the cached route of ``(type(x), target)`` (:mod:`.routes`), the host
fast path or the route's paths, a report to the conversion hooks when any are watching
(:mod:`.events`), and a framework's refusal explained as a :class:`MemoryConversionError`.
"""

from __future__ import annotations

import time
from typing import Any

import memtype.conversion.events as _events
from memtype._failures import conversion_failure
from memtype._renamed import renamed_argument
from memtype.conversion.routes import ROUTES, Route, build_route, follow_route
from memtype.detect import detect_framework, shares_memory
from memtype.errors import MemoryConversionError, UnknownMemoryTypeError
from memtype.frameworks import Device, get_framework, load_adapter
from memtype.types import MemoryTypeLike

__all__ = ["convert", "convert_memory"]

# bound once: CPython 3.11 compiles a method call on an imported name (``ROUTES.get(...)``)
# to LOAD_ATTR, a new bound method per call (~50 ns on the fast path), not LOAD_METHOD
_route_of = ROUTES.get


def convert(x: Any, memory_type: MemoryTypeLike | None = None, *,
            gpu_id: int | str | Device | None = None, allow_cpu_roundtrip: bool = False,
            to: MemoryTypeLike | None = None) -> Any:
    """Convert an array to another memory type, sharing memory wherever that is safe.

    Parameters
    ----------
    x : array
        An array of any loaded framework; its type is detected.
    memory_type : MemoryType or str
        The target memory type (``"torch"``, ``MemoryType.JAX``...).
    gpu_id : int, str or Device, optional
        The GPU the result must live on (``0``, ``"cuda:0"`` or ``Device("cuda", 0)``; types
        with GPUs); ignored by host-only types. Without it the result stays on the source's
        device where the target can live there.
    allow_cpu_roundtrip : bool
        Allow a GPU -> GPU conversion to go through host memory.
    to : MemoryType or str, optional
        Deprecated spelling of ``memory_type`` (a DeprecationWarning names the new one).

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
        ``memory_type`` names no memory type (or none was given).
    ArgumentTypeError
        Both ``memory_type`` and its old spelling ``to`` were given.
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
    if to is not None:
        memory_type = renamed_argument("convert", "to", "memory_type", to, memory_type)
    try:
        route = _route_of((type(x), memory_type))
    except TypeError:  # an unhashable ``memory_type``: get_framework explains
        route = None
    if route is None:
        route = build_route(x, memory_type)
    try:
        watched = _events.watched
        if gpu_id is None and route.host is not None and not watched:
            if route.on_host is None or route.on_host(x):
                return route.host(x)
        if watched:
            return _observed(x, route, gpu_id, allow_cpu_roundtrip)
        return follow_route(x, route, gpu_id, allow_cpu_roundtrip)
    except Exception as exc:  # explained (and chained) when a framework refused the input
        error = conversion_failure(x, route.sfw, route.dfw, exc)
        if error is None:
            raise
        raise error from exc


def _observed(x: Any, route: Route, gpu_id: int | str | Device | None,
              allow_cpu_roundtrip: bool) -> Any:
    """:func:`follow_route`, timed and reported to the hooks (or this context's capture)."""
    start = time.perf_counter()
    out = follow_route(x, route, gpu_id, allow_cpu_roundtrip)
    seconds = time.perf_counter() - start
    if out is x:
        return out
    nbytes = load_adapter(route.sfw.name).nbytes(x)
    _events.report(_events.ConversionEvent(route.sfw.name, route.dfw.name, nbytes,
                                           shares_memory(x, out), seconds))
    return out


def convert_memory(data: Any, source_type: MemoryTypeLike, target_type: MemoryTypeLike,
                   gpu_id: int | str | Device | None = None,
                   allow_cpu_roundtrip: bool = False) -> Any:
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
