"""The dtype policy: how an array reaches another dtype without corrupting its values.

One function, :func:`cast`, used by the decorators for ``dtype_conversion=`` and usable
on its own. It runs in the array's own framework (``adapter.namespace()`` plus the
adapter's ``astype`` / ``rint``), on the array's device; pyclesperanto has no NumPy-like
namespace, so its arrays go through host memory (the one unavoidable host round trip).

Scalings (``scaling=``):

``"clip"`` (default)
    Values that fit are never changed. Floats are rounded half to even, saturated to the
    target's range, NaN becomes 0; the top of the range is exact (float32 ``2**32`` ->
    uint32 ``4294967295``, never a wrap-around). Integers saturate. Float -> narrower float
    saturates finite values to the target's largest finite value (NaN and inf stay).
``"rescale"``
    The finite values' minimum and maximum are stretched onto the target's full integer
    range (``[0, 1]`` for float targets), rounded half to even; +inf -> top, -inf and NaN
    -> bottom. A constant image stays constant (its value is clipped instead).
``"unit"``
    The scikit-image convention: float ``[0, 1]`` <-> the unsigned range, float ``[-1, 1]``
    <-> the signed range, rounded half to even and saturated. Integer -> integer goes
    through the unit float.

Arithmetic (rescale, unit) runs in float32 when the source and target fit 16 bits, else in
float64, in every framework, so every framework returns the same numbers. JAX without
``jax_enable_x64`` has no float64 and computes in float32 (exact at both ends of the range,
within a few counts in between for 32-bit targets).

The decorators' default, ``PRESERVE_INPUT``, is decided by :func:`output_dtype`: the input's
dtype when it holds the result (rounded, or scaled back from scikit-image's float ``[0, 1]``),
else the result as the function made it, with a :class:`DtypePolicyWarning`.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtype._casting import (
    SCALINGS,
    Ops,
    Scaling,
    cast,
    check_scaling,
    float_max,
    holds_dtype,
    int_range,
    nearest_held_dtype,
    ops_for,
)
from memtype.detect import detect_framework
from memtype.frameworks import DTYPE_KIN, load_adapter
from memtype.frameworks import _hooks as hooks
from memtype.types import DtypeConversion

__all__ = ["Scaling", "SCALINGS", "cast", "check_scaling", "result_dtype", "output_dtype",
           "OutputDtype", "DtypePolicyWarning", "holds_dtype", "nearest_held_dtype", "entry_dtype"]



_kin: dict[np.dtype[Any], np.dtype[Any] | None] = {}


def entry_dtype(dtype: np.dtype[Any],
                into: str | Callable[[np.dtype[Any]], bool]) -> np.dtype[Any]:
    """The dtype an array of ``dtype`` takes on its way into a decorated function of ``into``.

    A float64 (complex128) array becomes its 32-bit kin where the framework cannot hold it
    but holds the kin (pyclesperanto; JAX without x64: asked each time, x64 can change);
    every other dtype enters as it is. The one rule for the decorators (which narrow before
    converting) and the pipeline planner (which predicts those conversions).

    Parameters
    ----------
    dtype : numpy.dtype
        The array's dtype.
    into : str or callable
        The framework's memory type, or its adapter's ``holds_dtype``.
    """
    holds = hooks.holds_dtype(load_adapter(into)) if isinstance(into, str) else into
    try:
        kin = _kin[dtype]
    except KeyError:
        code = DTYPE_KIN.get(dtype.str[1:]) if dtype.kind in "fc" else None
        kin = _kin[dtype] = None if code is None else np.dtype(code)
    if kin is None or holds(dtype) or not holds(kin):
        return dtype
    return kin


def result_dtype(conversion: DtypeConversion, input_dtype: np.dtype[Any] | None
                 ) -> np.dtype[Any] | None:
    """The dtype a result is returned in, or ``None`` to leave it as the function made it.

    ``PRESERVE_INPUT`` gives ``input_dtype`` (``None`` when there was no array input),
    ``NATIVE_OUTPUT`` gives ``None``, the others their ``numpy_dtype``.
    """
    if conversion is DtypeConversion.PRESERVE_INPUT:
        return input_dtype
    return conversion.numpy_dtype


class DtypePolicyWarning(UserWarning):
    """``PRESERVE_INPUT`` returned a result in its own dtype: the input's could not hold it."""


@dataclass(frozen=True, slots=True)
class OutputDtype:
    """Where a result goes: ``dtype`` (``None``: leave it as it is) reached with ``scaling``."""

    dtype: np.dtype[Any] | None
    scaling: Scaling


def output_dtype(result: Any, conversion: DtypeConversion, input_dtype: np.dtype[Any] | None,
                 scaling: Scaling = "clip", *, name: str = "the function") -> OutputDtype:
    """The dtype and scaling a decorated function's result is returned in.

    An explicit dtype, ``NATIVE_OUTPUT``, or ``scaling="rescale"``/``"unit"`` is done as
    asked. ``PRESERVE_INPUT`` with ``"clip"`` (the default) never collapses a result: the
    input's dtype when it holds the result (integers exactly, floats rounded); a float
    result in ``[0, 1]`` (``[-1, 1]`` for signed inputs) from an integer input is
    scikit-image's ``img_as_float`` scale, scaled back (``"unit"``: ``x * 255`` for uint8);
    anything else (a non-bool result from a bool input, values out of range or of magnitude
    below 2, NaN) is left as made, with a :class:`DtypePolicyWarning` naming the options.

    Parameters
    ----------
    result : array
        The function's result, in any loaded framework.
    conversion : DtypeConversion
        The requested conversion.
    input_dtype : numpy.dtype or None
        The caller's dtype of the first array argument (``None``: there was none).
    scaling : {"clip", "rescale", "unit"}
        The requested scaling.
    name : str
        The function's name, for the warning.

    Returns
    -------
    OutputDtype
        ``dtype=None``: return the result unchanged; else cast it with ``scaling``.

    Notes
    -----
    Free when the dtypes are equal or decide alone; else one minimum and one maximum of the
    result, in its framework (``benchmarks/skimage_table.py --cost`` measures it).

    Examples
    --------
    >>> import numpy as np
    >>> from memtype.dtypes import output_dtype
    >>> from memtype.types import DtypeConversion
    >>> output_dtype(np.array([0.2, 1.0]), DtypeConversion.PRESERVE_INPUT, np.dtype("uint8"))
    OutputDtype(dtype=dtype('uint8'), scaling='unit')
    """
    target = result_dtype(conversion, input_dtype)
    if conversion is not DtypeConversion.PRESERVE_INPUT or target is None or scaling != "clip":
        return OutputDtype(target, scaling)
    fw = detect_framework(result)
    src = load_adapter(fw.name).dtype_of(result)
    if src == target:
        return OutputDtype(target, scaling)
    why, how = _preserved(result, fw.name, src, target)
    if not why:
        return OutputDtype(target, how)
    warnings.warn(
        f"{name} returned {src} {why}; it is returned as {src}, not as the input's {target}. "
        "Pass dtype_conversion=DtypeConversion.NATIVE_OUTPUT to keep the native dtype without "
        "this warning, or a dtype (DtypeConversion.UINT8...) with scaling='rescale', 'unit' "
        "or 'clip' to convert it.", DtypePolicyWarning, stacklevel=_outside_memtype())
    return OutputDtype(None, scaling)


def _preserved(x: Any, fw: str, src: np.dtype[Any], dst: np.dtype[Any]) -> tuple[str, Scaling]:
    """``("", scaling)`` when ``dst`` holds the result, else ``(why not, "clip")``."""
    if "c" in (src.kind, dst.kind) or src.kind == "b":  # cast refuses complex -> real itself
        return "", "clip"
    if dst.kind == "b":
        return "that a bool (a mask) cannot hold", "clip"
    if dst.kind == "f":  # float64 beyond float32's 3.4e38 saturates (documented)
        if src.kind != "f" or dst.itemsize >= 4 or float_max(src) <= float_max(dst):
            return "", "clip"
        y, ops = _on_ops(x, fw)
        low, high = ops.finite_range(y)
        return ("", "clip") if max(-low, high) <= float_max(dst) else (
            f"with values beyond {dst}'s range", "clip")
    lo, hi = int_range(dst)
    out = f"with values outside {dst}'s range"
    if src.kind != "f":
        slo, shi = int_range(src)
        fits = slo >= lo and shi <= hi or _int_fits(x, fw, src, lo, hi)
        return ("", "clip") if fits else (out, "clip")
    low, high = _extremes(x, fw)
    if low != low or high != high:
        return "with NaN", "clip"
    if (low >= 0 if lo == 0 else low >= -1) and high <= 1:
        return "", "unit"  # scikit-image's float scale of an integer image
    if max(-low, high) < 2:
        return "with values of magnitude below 2 that rounding would collapse", "clip"
    return ("", "clip") if low >= lo - 0.5 and high < hi + 0.5 else (out, "clip")


def _on_ops(x: Any, fw: str) -> tuple[Any, Ops]:
    """``x`` and the policy's arithmetic for it (pyclesperanto's arrays: on the host)."""
    adapter = load_adapter(fw)
    if adapter.namespace() is not None:
        return x, ops_for(fw, adapter)
    return np.asarray(adapter.to_numpy(x)), ops_for("numpy", load_adapter("numpy"))


def _extremes(x: Any, fw: str) -> tuple[float, float]:
    """The smallest and the largest value (NaN if there is one; ``(0, 0)`` when empty)."""
    y, ops = _on_ops(x, fw)
    if not ops._size(y):
        return 0.0, 0.0
    return float(ops.xp.amin(y)), float(ops.xp.amax(y))


def _int_fits(x: Any, fw: str, src: np.dtype[Any], lo: int, hi: int) -> bool:
    """Whether integer ``x`` lies in ``[lo, hi]`` (``hi + 1`` a power of two)."""
    if src.kind == "u" and src.itemsize > 1:  # torch has no min/max for uint16..64
        y, ops = _on_ops(x, fw)
        over = y & ops.const(int_range(src)[1] & ~hi, src, y)
        return not bool(ops.xp.any(over != 0))
    low, high = _extremes(x, fw)
    return low >= lo and high <= hi


def _outside_memtype() -> int:
    """The warnings stack level of the first caller outside memtype."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("memtype"):
        frame, level = frame.f_back, level + 1
    return level
