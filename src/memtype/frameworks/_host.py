"""Host-buffer helpers shared by the adapters (layout checks, safe copies, lossless narrowing)."""

from __future__ import annotations

from typing import Any

import numpy as np

from memtype.errors import MemoryConversionError

ALIGN = 64  # TensorFlow and XLA share host buffers only at 64-byte alignment

# The one table of dtype kin (``dtype.str[1:]`` codes), used wherever a framework cannot hold
# a dtype: each 64-bit dtype's 32-bit kin (narrowed only when every value survives), and the
# lossless widenings for frameworks without bool or float16.
NARROWER: dict[str, str] = {"f8": "f4", "i8": "i4", "u8": "u4", "c16": "c8"}
WIDER: dict[str, str] = {"b1": "u1", "f2": "f4"}
KIN: dict[str, str] = {**NARROWER, **WIDER}


def numpy_dlpack_dtype(dtype: np.dtype[Any]) -> bool:
    """Whether NumPy itself exports ``dtype`` through DLPack.

    It does for its own bool, integer, float16/32/64 and complex64/128 dtypes only; not for
    extension dtypes (``ml_dtypes``: bfloat16, float8..., some of which have kind ``'f'``),
    nor for long double.
    """
    if dtype.isbuiltin != 1:  # 2: an extension (user-defined) dtype; 0: flexible/parametric
        return False
    kind, size = dtype.kind, dtype.itemsize
    return kind in "biu" or (kind == "f" and size <= 8) or (kind == "c" and size <= 16)


def is_extension(dtype: np.dtype[Any]) -> bool:
    """Whether ``dtype`` is an extension dtype registered with NumPy (``ml_dtypes``...)."""
    return dtype.isbuiltin == 2


def base_ndarray(x: Any) -> np.ndarray[Any, Any]:
    """``x`` itself, or for a NumPy subclass a plain ndarray view of its buffer (O(1)).

    memtype reads a subclass's buffer through NumPy's own methods, never through its
    overrides (a ``__dlpack__``, ``__array_interface__`` or ``view`` that lies).
    """
    if type(x) is np.ndarray:
        return x
    return np.ndarray.view(x, np.ndarray)


def is_aligned(a: np.ndarray[Any, Any], align: int = ALIGN) -> bool:
    """Whether ``a``'s first byte sits on an ``align``-byte boundary."""
    return bool(a.__array_interface__["data"][0] % align == 0)


def shareable(a: np.ndarray[Any, Any], *, contiguous: bool, align: int = 1) -> bool:
    """Whether a framework may share ``a``'s buffer.

    It may when ``a`` is writable, in native byte order, with non-negative strides.
    """
    flags = a.flags
    if not flags.writeable or not a.dtype.isnative:
        return False
    if contiguous and not flags.c_contiguous:
        return False
    if negative_strides(a):
        return False
    return align <= 1 or a.size == 0 or is_aligned(a, align)


def negative_strides(a: np.ndarray[Any, Any]) -> bool:
    """Whether any stride of ``a`` is negative (also "contiguous" arrays with length-1 axes)."""
    return bool(a.strides) and min(a.strides) < 0


def aligned_copy(a: np.ndarray[Any, Any], align: int = ALIGN,
                 past: int = 0) -> np.ndarray[Any, Any]:
    """A C-contiguous, native-byte-order, writable copy of ``a`` starting on an aligned
    boundary.

    Whether a host array enters a framework without a copy can depend on its address
    (XLA and TensorFlow share only 64-byte aligned buffers); this makes a host array laid
    out as a framework's own results are, or deliberately not.

    Parameters
    ----------
    a : numpy.ndarray
        The values to copy (any strides, byte order or alignment).
    align : int, optional
        The boundary in bytes (default 64).
    past : int, optional
        Start this many bytes after the boundary: a deliberately misaligned copy
        (``past=16`` is the usual address of NumPy's own allocations).

    Returns
    -------
    numpy.ndarray
        A new array equal to ``a``, owning its (over-allocated) buffer.

    Examples
    --------
    >>> import numpy as np
    >>> from memtype.frameworks import aligned_copy
    >>> b = aligned_copy(np.arange(3), past=16)
    >>> b.ctypes.data % 64
    16
    """
    dtype = a.dtype.newbyteorder("=") if not a.dtype.isnative else a.dtype
    raw = np.empty(max(a.nbytes, 1) + align + past, dtype=np.uint8)
    offset = (-raw.__array_interface__["data"][0]) % align + past
    out: np.ndarray[Any, Any] = raw[offset:offset + a.nbytes].view(dtype).reshape(
        a.shape)
    np.copyto(out, a, casting="unsafe" if dtype != a.dtype else "no")
    return out


def native_copy(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A C-contiguous, native-byte-order, writable copy of ``a``."""
    dtype = a.dtype.newbyteorder("=") if not a.dtype.isnative else a.dtype
    return np.array(a, dtype=dtype, order="C", copy=True)


def exact_cast(a: np.ndarray[Any, Any], target: np.dtype[Any]) -> np.ndarray[Any, Any] | None:
    """``a`` cast to ``target`` when every value survives the round trip exactly, else None
    (the one test of a lossless narrowing)."""
    with np.errstate(all="ignore"):  # out-of-range values show as differences below
        out = a.astype(target)
        back = out.astype(a.dtype)
    try:
        same = np.array_equal(back, a, equal_nan=a.dtype.kind in "fcV")
    except TypeError:  # a dtype without isnan (ml_dtypes int4...)
        same = np.array_equal(back, a)
    return out if same else None


def narrow_lossless(a: np.ndarray[Any, Any], target: np.dtype[Any], framework: str,
                    hint: str) -> np.ndarray[Any, Any]:
    """``a`` cast to ``target`` when every value survives exactly; else a clear error."""
    out = exact_cast(a, target)
    if out is None:
        raise MemoryConversionError(
            f"{framework} cannot hold {a.dtype} here and narrowing to {target} would change "
            f"values. {hint}",
            "numpy", framework,
        )
    return out
