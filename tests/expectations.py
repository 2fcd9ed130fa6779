"""What a conversion to each memory type must give for a NumPy input: the documented rules."""

from __future__ import annotations

import numpy as np

import memtype as mt

_CLE_WIDEN = {"b1": "u1", "f2": "f4"}
_MLX_HOLDS = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64", "complex64", "bfloat16"}
_NARROW = {"i8": "i4", "u8": "u4", "f8": "f4", "c16": "c8"}


def _jax_x64() -> bool:
    import jax

    return bool(jax.config.jax_enable_x64)


def jax_holds_extension(dtype: np.dtype) -> bool:
    """Whether the installed JAX itself holds an ml_dtypes ``dtype`` (asked of JAX, not memtype).

    Old JAX (0.4.30) names no float8_e4m3, float4, int2...: it raises TypeError; newer JAX
    names float6_* that XLA's CPU backend refuses with a run-time error.
    """
    import jax

    try:
        held = jax.device_put(np.zeros(2, dtype))
    except (TypeError, RuntimeError):  # "not a valid JAX array type"; "Invalid XLA PrimitiveType"
        return False
    return np.asarray(held).dtype == dtype


def _narrowed(a: np.ndarray) -> np.dtype | None:
    """The 32-bit dtype ``a`` narrows to when every value survives; None when it would not."""
    target = np.dtype(_NARROW[a.dtype.str[1:]])
    with np.errstate(over="ignore", invalid="ignore"):
        back = a.astype(target).astype(a.dtype)
    return target if np.array_equal(back, a, equal_nan=a.dtype.kind in "fc") else None


COVERED = frozenset({"numpy", "cupy", "torch", "tensorflow", "jax", "pyclesperanto", "mlx"})
"""The targets whose rules :func:`expected_dtype` knows (test_tables_cover_every_row)."""


def expected_dtype(a: np.ndarray, target: str) -> np.dtype | type[Exception]:
    """The dtype ``convert(a, target)`` must have, or the error class it must raise."""
    code = a.dtype.newbyteorder("=").str[1:]
    native = a.dtype.newbyteorder("=")
    if target == "numpy":
        return a.dtype  # numpy -> numpy is the input itself
    if target == "pyclesperanto":
        if a.ndim == 0 or a.ndim > 3 or a.size == 0 or a.dtype.kind in "cV":
            return mt.MemoryConversionError
        if code in _CLE_WIDEN:
            return np.dtype(_CLE_WIDEN[code])
        if code in _NARROW:
            return _narrowed(a) or mt.MemoryConversionError
        return native
    if target == "mlx":  # no complex128 (narrowed when exact), no float8 or other extensions
        if code == "c16":
            return _narrowed(a) or mt.MemoryConversionError
        return native if native.name in _MLX_HOLDS else mt.MemoryConversionError
    if target == "jax" and a.dtype.isbuiltin == 2 and not jax_holds_extension(native):
        return mt.MemoryConversionError  # an ml_dtypes dtype this JAX does not have
    if target == "jax" and code in _NARROW and not _jax_x64():
        return _narrowed(a) or mt.MemoryConversionError
    return native
