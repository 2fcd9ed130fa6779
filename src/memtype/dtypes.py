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

import functools
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtype.conversion.casting import (
    SCALINGS,
    Bounds,
    Ops,
    Scaling,
    cast,
    check_scaling,
    float_max,
    holds_dtype,
    host_ops,
    int_range,
    nearest_held_dtype,
    ops_for,
)
from memtype.detect import detect_framework
from memtype.frameworks import DTYPE_KIN, Adapter, load_adapter
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
    holds = load_adapter(into).holds_dtype if isinstance(into, str) else into
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
    A result that is not numeric (strings, objects, dates) has no range to keep: left as made.

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
    return preserve_input(result, fw.name, load_adapter(fw.name), target, name)[0]


def preserve_input(result: Any, fw: str, adapter: Adapter, target: np.dtype[Any], name: str
                   ) -> tuple[OutputDtype, Bounds | None]:
    """:func:`output_dtype` for ``PRESERVE_INPUT`` and ``"clip"``, for a result of ``fw``,
    with the bounds that the decision measured (``cast_in`` spares its passes with them)."""
    src = adapter.dtype_of(result)
    if src == target:
        return OutputDtype(target, "clip"), None
    if src.kind not in "biufc":  # strings, objects, dates: no numeric range to keep
        return OutputDtype(None, "clip"), None
    why, how, bounds = _preserved(result, fw, adapter, src, target)
    if not why:
        return OutputDtype(target, how), bounds
    warnings.warn(
        f"{name} returned {src} {why}; it is returned as {src}, not as the input's {target}. "
        "Pass dtype_conversion=DtypeConversion.NATIVE_OUTPUT to keep the native dtype without "
        "this warning, or a dtype (DtypeConversion.UINT8...) with scaling='rescale', 'unit' "
        "or 'clip' to convert it.", DtypePolicyWarning, stacklevel=_outside_memtype())
    return OutputDtype(None, "clip"), None


@functools.cache
def _question(src: np.dtype[Any], dst: np.dtype[Any]) -> str:
    """What decides whether ``dst`` holds a result of ``src``: "" (the dtypes: it does),
    "bool" (never), "finite" (the finite range), "bits" (the bits above ``dst``'s top),
    "extremes" (the minimum and maximum)."""
    if "c" in (src.kind, dst.kind) or src.kind == "b":  # cast refuses complex -> real itself
        return ""
    if dst.kind == "b":
        return "bool"
    if dst.kind == "f":  # float64 beyond float32's 3.4e38 saturates (documented)
        if src.kind != "f" or dst.itemsize >= 4 or float_max(src) <= float_max(dst):
            return ""
        return "finite"
    lo, hi = int_range(dst)
    if src.kind == "f":
        return "extremes"
    slo, shi = int_range(src)
    if slo >= lo and shi <= hi:
        return ""
    return "bits" if src.kind == "u" and src.itemsize > 1 else "extremes"  # torch: no min/max


Preserved = tuple[str, Scaling, Bounds | None]


def _preserved(x: Any, fw: str, adapter: Adapter, src: np.dtype[Any], dst: np.dtype[Any]
               ) -> Preserved:
    """``("", scaling, bounds)`` when ``dst`` holds the result, else ``(why not, ...)``."""
    question = _question(src, dst)
    if not question:
        return "", "clip", None
    if question == "bool":
        return "that a bool (a mask) cannot hold", "clip", None
    y, ops = _on_ops(x, fw, adapter)
    if question == "finite":
        low, high = ops.finite_range(y)
        if max(-low, high) <= float_max(dst):
            return "", "clip", (low, high)
        return f"with values beyond {dst}'s range", "clip", None
    lo, hi = int_range(dst)
    if question == "bits":
        over = y & ops.const(int_range(src)[1] & ~hi, src, y)
        return ("", "clip", None) if not bool(ops.xp.any(over != 0)) else _outside(dst)
    low, high = ops.extremes(y)
    if src.kind != "f":
        return ("", "clip", (low, high)) if low >= lo and high <= hi else _outside(dst)
    if low != low or high != high:
        return "with NaN", "clip", None
    if (low >= 0 if lo == 0 else low >= -1) and high <= 1:
        return "", "unit", (low, high)  # scikit-image's float scale of an integer image
    if max(-low, high) < 2:
        return "with values of magnitude below 2 that rounding would collapse", "clip", None
    if low >= lo - 0.5 and high < hi + 0.5:
        return "", "clip", (low, high)
    return _outside(dst)


def _outside(dst: np.dtype[Any]) -> Preserved:
    """The answer for values outside ``dst``'s range."""
    return f"with values outside {dst}'s range", "clip", None


def _on_ops(x: Any, fw: str, adapter: Adapter) -> tuple[Any, Ops]:
    """``x`` and the policy's arithmetic for it (pyclesperanto's arrays: on the host)."""
    ops = ops_for(fw, adapter)
    if ops is not None:
        return x, ops
    return np.asarray(adapter.to_numpy(x)), host_ops()


def _outside_memtype() -> int:
    """The warnings stack level of the first caller outside memtype."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("memtype"):
        frame, level = frame.f_back, level + 1
    return level
