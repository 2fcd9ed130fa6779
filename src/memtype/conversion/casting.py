"""Casting under the dtype policy (:func:`cast`), in the array's own framework.

Public through :mod:`memtype.dtypes` (``memtype.dtypes.cast``), which documents the
scalings; the decision of which dtype a result is returned in lives there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import DTypeLike

from memtype._ranges import Bounds, exact_below, float_max, int_range, rounds_into, unit_fits
from memtype.detect import detect_framework
from memtype.errors import DtypePolicyError
from memtype.frameworks import DTYPE_KIN as KIN
from memtype.frameworks import Adapter, load_adapter

__all__ = ["Scaling", "SCALINGS", "check_scaling", "cast", "holds_dtype", "nearest_held_dtype",
           "Ops", "ops_for", "int_range", "float_max", "cast_in", "Bounds"]

Scaling = Literal["clip", "rescale", "unit"]
SCALINGS: tuple[str, ...] = get_args(Scaling)

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_OPS: dict[tuple[str, bool], tuple[Adapter, Ops | None]] = {}

_HOLDS: dict[Adapter, Callable[[np.dtype[Any]], bool]] = {}
_BLOCK = 1 << 16
"""Elements per block of a host float -> integer cast: a float64 block and the temporaries
its passes make stay in the CPU's cache (benchmarks/cast_back.py)."""



def check_scaling(scaling: object) -> Scaling:
    """``scaling`` itself when it is one of :data:`SCALINGS`, else a clear error."""
    if scaling not in SCALINGS:
        raise DtypePolicyError(
            f"Unknown scaling {scaling!r}. Expected one of: {', '.join(SCALINGS)}."
        )
    return scaling  # type: ignore[return-value]

def holds_dtype(adapter: Adapter, dtype: np.dtype[Any]) -> bool:
    """Whether the adapter's framework can hold ``dtype`` (JAX without x64, pyclesperanto)."""
    holds = _HOLDS.get(adapter)
    if holds is None:  # the function is kept, not its answers (JAX's x64 can change)
        holds = _HOLDS[adapter] = adapter.holds_dtype
    return bool(holds(dtype))


def nearest_held_dtype(adapter: Adapter, dtype: np.dtype[Any]) -> np.dtype[Any]:
    """``dtype``, or its nearest kin the framework holds (float64 -> float32, bool -> uint8)."""
    seen = dtype
    while not holds_dtype(adapter, seen):
        code = KIN.get(seen.str[1:])
        if code is None:
            raise DtypePolicyError(f"No dtype near {dtype} can be held here; received {dtype}.")
        seen = np.dtype(code)
    return seen


def cast(x: Any, dtype: DTypeLike, *, scaling: Scaling = "clip") -> Any:
    """``x`` in ``dtype`` under the dtype policy, computed in ``x``'s own framework.

    Parameters
    ----------
    x : array
        An array of any loaded framework.
    dtype : dtype-like
        The target dtype (a NumPy dtype or its name).
    scaling : {"clip", "rescale", "unit"}
        How values map (see the module documentation).

    Returns
    -------
    array
        ``x`` itself when it already has ``dtype``; else a new array of ``x``'s framework,
        on ``x``'s device.

    Raises
    ------
    DtypePolicyError
        Complex to real (the imaginary part would be lost), an unknown scaling, or a
        dtype the framework cannot hold (float64 in JAX without x64, in pyclesperanto).

    Examples
    --------
    >>> import numpy as np
    >>> from memtype.dtypes import cast
    >>> cast(np.array([-3.0, 0.5, 1.5, 300.0, np.nan]), "uint8")
    array([  0,   0,   2, 255,   0], dtype=uint8)
    """
    check_scaling(scaling)
    fw = detect_framework(x)
    return cast_in(x, fw.name, load_adapter(fw.name), np.dtype(dtype), scaling)


def cast_in(x: Any, name: str, adapter: Adapter, dst: np.dtype[Any], scaling: Scaling,
            bounds: Bounds | None = None) -> Any:
    """:func:`cast` for an array of framework ``name``; ``bounds``: see :data:`Bounds`."""
    src = adapter.dtype_of(x)
    if src == dst:
        return x
    if src.kind == "c" and dst.kind != "c":
        raise DtypePolicyError(
            f"Cannot cast a complex {src} array to {dst}: the imaginary part would be lost. "
            "Return a real array, or use DtypeConversion.NATIVE_OUTPUT."
        )
    ops = ops_for(name, adapter)
    if not (holds_dtype(adapter, dst) if ops is None else ops.holds(dst)):
        raise DtypePolicyError(
            f"{name} cannot hold dtype {dst}; the nearest it holds is "
            f"{nearest_held_dtype(adapter, dst)}."
        )
    if ops is None:
        return _via_host(x, adapter, dst, scaling, bounds)
    return ops.cast(x, src, dst, scaling, bounds)


def host_ops() -> Ops:
    """NumPy's ``Ops`` (the policy's arithmetic for frameworks without a namespace)."""
    ops = ops_for("numpy", load_adapter("numpy"))
    assert ops is not None, "NumPy has a namespace and astype/rint"
    return ops


def _via_host(x: Any, adapter: Adapter, dst: np.dtype[Any], scaling: Scaling,
              bounds: Bounds | None) -> Any:
    """The policy computed in NumPy for frameworks without a namespace (pyclesperanto)."""
    host = np.asarray(adapter.to_numpy(x))
    out = host_ops().cast(host, host.dtype, dst, scaling, bounds)
    return adapter.from_numpy(np.ascontiguousarray(out), adapter.device_of(x))


def _is_int(dtype: np.dtype[Any]) -> bool:
    """Integer or bool."""
    return dtype.kind in "iub"


def ops_for(name: str, adapter: Adapter) -> Ops | None:
    """The cached ``Ops`` of a framework (rebuilt when JAX's x64 setting changes); ``None``
    for a framework without a namespace or ``astype``/``rint`` (cast through NumPy)."""
    key = (name, holds_dtype(adapter, _F64))
    seen = _OPS.get(key)
    if seen is not None and seen[0] is adapter:
        return seen[1]
    usable = adapter.namespace() is not None and adapter.casts_on_device
    ops = Ops(adapter) if usable else None
    _OPS[key] = adapter, ops
    return ops


class Ops:
    """The policy's arithmetic, in one framework's namespace."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        assert adapter.casts_on_device, "callers build Ops only for adapters with astype/rint"
        self.ops = adapter
        self.xp: Any = adapter.namespace()
        self.has64 = holds_dtype(adapter, _F64)
        self._held: dict[np.dtype[Any], bool] = {}  # per x64 setting, as this Ops is
        self._minmax = adapter.minmax

    def holds(self, dtype: np.dtype[Any]) -> bool:
        """Whether the framework holds ``dtype`` (asked once per dtype)."""
        held = self._held.get(dtype)
        if held is None:
            held = self._held[dtype] = holds_dtype(self.adapter, dtype)
        return held

    def extremes(self, x: Any) -> tuple[float, float]:
        """The smallest and the largest value (NaN if there is one; ``(0, 0)`` when empty)."""
        if not self._size(x):
            return 0.0, 0.0
        low, high = self._minmax(x)
        return float(low), float(high)

    def astype(self, x: Any, dtype: np.dtype[Any]) -> Any:
        """``x`` cast plainly (callers have made every value fit)."""
        return self.ops.astype(x, dtype)

    def const(self, value: int, dtype: np.dtype[Any], like: Any) -> Any:
        """A 0-d array of ``dtype`` beside ``like`` (JAX parses Python ints as int32)."""
        return self.adapter.from_numpy(np.array(value, dtype=dtype), self.adapter.device_of(like))

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        """Elementwise ``a if cond else b``."""
        return self.xp.where(cond, a, b)

    def work_dtype(self, src: np.dtype[Any], dst: np.dtype[Any]) -> np.dtype[Any]:
        """float32 when source and target fit 16 bits, else float64 (if the framework has it)."""
        wide = any(d == _F64 or (d.kind in "iuc" and d.itemsize >= 4) for d in (src, dst))
        return _F64 if wide and self.has64 else _F32

    def to_float(self, x: Any, src: np.dtype[Any], work: np.dtype[Any]) -> Any:
        """``x`` as the working float dtype."""
        return x if src == work else self.astype(x, work)

    def cast(self, x: Any, src: np.dtype[Any], dst: np.dtype[Any], scaling: Scaling,
             bounds: Bounds | None = None) -> Any:
        """Dispatch on the scaling; known ``bounds`` spare the passes they make moot."""
        if dst.kind == "c":
            return self.astype(x, dst)
        if scaling == "rescale" and self._size(x):
            return self.rescale(x, src, dst)
        if src.kind == "f" and dst.kind in "iu" and self._in_blocks(x):
            return self._blockwise(x, src, dst, scaling, bounds)
        if scaling == "unit":
            return self.unit(x, src, dst, bounds)
        return self.clip(x, src, dst, bounds)

    def _in_blocks(self, x: Any) -> bool:
        """Whether ``x`` is a large C-contiguous NumPy array (cast block by block)."""
        return (self.adapter.host_native and type(x) is np.ndarray and x.size > 2 * _BLOCK
                and x.flags.c_contiguous)

    def _blockwise(self, x: Any, src: np.dtype[Any], dst: np.dtype[Any], scaling: Scaling,
                   bounds: Bounds | None) -> Any:
        """A clip or unit cast (element by element: the same values) one cache-sized block
        at a time into the result: every pass's temporary is a block, not the array."""
        flat = x.reshape(-1)
        out = np.empty(flat.shape, dst)
        for start in range(0, flat.size, _BLOCK):
            block = flat[start:start + _BLOCK]
            out[start:start + _BLOCK] = (self.unit(block, src, dst, bounds) if scaling == "unit"
                                         else self.clip(block, src, dst, bounds))
        return out.reshape(x.shape)

    def _size(self, x: Any) -> int:
        """Number of elements."""
        return math.prod(self.adapter.shape_of(x))

    # -- clip -------------------------------------------------------------------------

    def clip(self, x: Any, src: np.dtype[Any], dst: np.dtype[Any],
             bounds: Bounds | None = None) -> Any:
        """Round half to even, saturate, NaN -> 0."""
        if _is_int(src) and _is_int(dst):
            return self.int_to_int(x, src, dst, bounds)
        if _is_int(dst):
            widened = src.itemsize < 4  # then x is a new array: rounded in place
            if widened:
                x = self.astype(x, _F32)
            return self.float_to_int(x, dst, rounds_into(bounds, dst), owned=widened)
        if _is_int(src):
            if dst.itemsize >= 4:
                return self.astype(x, dst)
            x, src = self.astype(x, _F32), _F32
        return self.float_to_float(x, src, dst, bounds)

    def int_to_int(self, x: Any, src: np.dtype[Any], dst: np.dtype[Any],
                   bounds: Bounds | None = None) -> Any:
        """Saturate to the target's range; values that fit are untouched."""
        slo, shi = int_range(src)
        dlo, dhi = int_range(dst)
        if slo >= dlo and shi <= dhi or bounds is not None and (
                dlo <= bounds[0] and bounds[1] <= dhi):
            return self.astype(x, dst)
        if slo < dlo:
            x = self.where(x < dlo, self.const(dlo, src, x), x)
        if shi > dhi and src.kind == "u":  # bits above dhi (torch cannot compare uint16..64)
            over = (x & self.const(shi ^ dhi, src, x)) != 0
            x = self.where(over, self.const(dhi, src, x), x)
        elif shi > dhi:
            x = self.where(x > dhi, self.const(dhi, src, x), x)
        return self.astype(x, dst)

    def float_to_int(self, x: Any, dst: np.dtype[Any], fits: bool = False,
                     owned: bool = False) -> Any:
        """Rounded, NaN -> 0, saturated; exact at both ends (``hi + 1`` is a power of two).

        ``fits``: the caller knows every rounded value lies in the target's range (no
        NaN): rounded and cast, with no pass that could change nothing. ``owned``: ``x`` is
        a temporary this cast made (never the caller's array nor a function's result), so
        a mutable framework rounds and clips in it rather than in new arrays."""
        lo, hi = int_range(dst)
        if fits:
            return self.astype(self.ops.rint_clip(x, None, in_place=owned), dst)
        if hi < exact_below(self.adapter.dtype_of(x)):  # the bounds are exact as floats
            bounds = (float(lo), float(hi))
            return self.astype(self.ops.rint_clip(x, bounds, in_place=owned), dst)
        r = self.ops.rint_clip(x, None, in_place=owned)
        over = r >= float(hi + 1)
        under = r < float(lo)
        safe = self.where(over | under | self.xp.isnan(r), 0.0, r)
        out = self.astype(safe, dst)
        out = self.where(over, self.const(hi, dst, out), out)
        return out if lo == 0 else self.where(under, self.const(lo, dst, out), out)

    def float_to_float(self, x: Any, src: np.dtype[Any], dst: np.dtype[Any],
                       bounds: Bounds | None = None) -> Any:
        """Finite values saturate to the target's largest finite value; NaN and inf stay.

        The minimum and maximum (``bounds`` when known) say which side can need it: a
        result in range is cast in one pass (NaN tells nothing: both sides are done)."""
        fmax = float_max(dst)
        if float_max(src) > fmax:
            low, high = self.extremes(x) if bounds is None else bounds
            over, under = not high <= fmax, not low >= -fmax
            finite = self.xp.isfinite(x) if over or under else None
            if over:
                x = self.where(finite & (x > fmax), fmax, x)
            if under:
                x = self.where(finite & (x < -fmax), -fmax, x)
        return self.astype(x, dst)

    # -- rescale ----------------------------------------------------------------------

    def finite_range(self, xf: Any) -> tuple[float, float]:
        """Smallest and largest finite value (``inf, -inf`` when there is none)."""
        finite = self.xp.isfinite(xf)
        low = float(self.xp.amin(self.where(finite, xf, float("inf"))))
        high = float(self.xp.amax(self.where(finite, xf, float("-inf"))))
        return low, high

    def rescale(self, x: Any, src: np.dtype[Any], dst: np.dtype[Any]) -> Any:
        """Min-max stretch of the finite values onto the target's range."""
        work = self.work_dtype(src, dst)
        xf = self.to_float(x, src, work)
        low, high = self.finite_range(xf)
        if not high > low:  # constant, or no finite value: keep the value
            if src.kind == "f":  # NaN first, so that the framework's cast is the last step
                x = self._nan_to_bottom(x, dst)
            return self.clip(x, src, dst)
        span = float(int_range(dst)[1] - int_range(dst)[0]) if _is_int(dst) else 1.0
        u = (xf - low) * (span / (high - low))
        u = self.where(xf >= high, span, u)
        u = self.where(xf <= low, 0.0, u)
        u = self.where(self.xp.isnan(u), 0.0, u)
        if not _is_int(dst):
            return self.astype(u, dst)
        lo = int_range(dst)[0]
        u = self.ops.rint_clip(u, None, in_place=True)  # u is this cast's own array
        return self.float_to_int(u if lo == 0 else u + float(lo), dst, owned=True)

    def _nan_to_bottom(self, x: Any, dst: np.dtype[Any]) -> Any:
        """NaN pixels at the bottom of the target's range (rescale produces no NaN).

        Done before the cast, never after it: the cast (the adapter's ``astype``) is then the
        last step, and a framework that computes lazily (MLX) returns its result computed,
        not a formula that reads ``x`` when first used, after the caller's later writes."""
        bottom: Any = 0.0 if not _is_int(dst) else float(int_range(dst)[0])
        return self.where(self.xp.isnan(x), bottom, x)

    # -- unit -------------------------------------------------------------------------

    def unit(self, x: Any, src: np.dtype[Any], dst: np.dtype[Any],
             bounds: Bounds | None = None) -> Any:
        """The scikit-image convention: float [0, 1] / [-1, 1] <-> the integer range."""
        work = self.work_dtype(src, dst)
        if not _is_int(src) and not _is_int(dst):
            return self.clip(x, src, dst, bounds)
        uf = self.to_unit(x, src, work) if _is_int(src) else self.to_float(x, src, work)
        if not _is_int(dst):
            return self.float_to_float(uf, work, dst) if dst != work else uf
        return self.from_unit(uf, dst, None if _is_int(src) else bounds)

    def to_unit(self, x: Any, src: np.dtype[Any], work: np.dtype[Any]) -> Any:
        """Integers onto [0, 1] (unsigned, bool) or [-1, 1] (signed), exact at the ends."""
        lo, hi = int_range(src)
        xf = self.to_float(x, src, work)
        if src.kind == "b":
            return xf
        if lo == 0:
            return self.where(xf >= hi, 1.0, xf * (1.0 / hi))
        u = (xf + 0.5) * (2.0 / (hi - lo))
        u = self.where(xf >= hi, 1.0, u)
        return self.where(xf <= lo, -1.0, u)

    def from_unit(self, uf: Any, dst: np.dtype[Any], bounds: Bounds | None = None) -> Any:
        """Unit floats onto the integer range: ``x * hi`` or ``x * (hi - lo) / 2 - 1/2``."""
        lo, hi = int_range(dst)
        fits = unit_fits(bounds, self.adapter.dtype_of(uf), lo, hi)
        if lo == 0:  # the scaled array is this cast's own: rounded in place
            return self.float_to_int(uf * float(hi), dst, fits, owned=True)
        span = float(hi - lo)
        return self.float_to_int((uf - 1.0 / span) * (span / 2.0), dst, fits, owned=True)

