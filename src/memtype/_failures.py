"""Why a conversion failed, as a memtype error (the framework's own error chained to it).

Frameworks answer odd inputs with their own exceptions (torch's ``TypeError: can't convert
np.ndarray of type numpy.object_``, TensorFlow's ``InvalidArgumentError``...). A failed
conversion is explained here, after the fact, so that the working path pays nothing:

* an array its own framework marks as unusable (``unsupported``: sparse, meta, quantized,
  PRNG keys, masked...) -> :class:`UnsupportedArrayError`;
* a dtype that is not numeric (strings, objects, dates, records) -> :class:`MemoryConversionError`;
* anything else -> :class:`MemoryConversionError` quoting the framework's message.

Out-of-memory errors and memtype's own errors are left as they are (the OOM recovery of
the decorators recognises exact exception types).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memtype.errors import MemoryConversionError, MemtypeError, UnsupportedArrayError
from memtype.frameworks import Framework, load_adapter, ran_out_of_memory
from memtype.frameworks._host import is_extension

__all__ = ["conversion_failure", "unsupported_reason"]

# dtypes of the ml_dtypes family (kind 'V' to NumPy) that some frameworks hold
_NUMERIC_EXTRAS = ("bfloat16", "float8", "float4", "float6", "int4", "uint4", "int2", "uint2")


def unsupported_reason(fw: Framework, x: Any) -> str | None:
    """Why ``x`` cannot leave its framework ``fw`` (``None`` when nothing is known against it)."""
    return load_adapter(fw.name).unsupported(x)


def _is_oom(exc: BaseException, *frameworks: Framework) -> bool:
    for fw in frameworks:
        if ran_out_of_memory(load_adapter(fw.name), exc):
            return True
    return isinstance(exc, MemoryError)


def _dtype(fw: Framework, x: Any) -> np.dtype[Any] | None:
    try:
        return load_adapter(fw.name).dtype_of(x)
    except (TypeError, ValueError, KeyError):  # a dtype NumPy has no name for
        return None


def _numeric(dtype: np.dtype[Any]) -> bool:
    return dtype.kind in "biufc" or dtype.name.startswith(_NUMERIC_EXTRAS)


def conversion_failure(x: Any, sfw: Framework, dfw: Framework,
                       exc: Exception) -> MemtypeError | None:
    """The memtype error explaining ``exc``, or ``None`` where ``exc`` must propagate as is."""
    if _is_oom(exc, sfw, dfw):
        return None
    reason = unsupported_reason(sfw, x)
    if reason is not None:  # the root cause, whatever failed first
        return UnsupportedArrayError(f"cannot convert to {dfw.name}: {reason}")
    if isinstance(exc, MemoryConversionError) and exc.source_type not in ("", sfw.name):
        # raised on an inner step (e.g. numpy -> pyclesperanto): named for the whole conversion
        return MemoryConversionError(exc.reason, sfw.name, dfw.name)
    if isinstance(exc, MemtypeError):
        return None
    dtype = _dtype(sfw, x)
    what = f"a {sfw.name} array" + ("" if dtype is None else f" of dtype {dtype}")
    holds = load_adapter(dfw.name).holds_dtype
    if dtype is not None and is_extension(dtype) and not holds(dtype):
        return MemoryConversionError(
            f"{dfw.name} cannot hold dtype {dtype}; received {what}. Cast it to a dtype "
            f"{dfw.name} holds first (e.g. x.astype('float32')).",
            sfw.name, dfw.name,
        )
    if dtype is not None and not _numeric(dtype):
        return MemoryConversionError(
            f"{dfw.name} holds numeric arrays only (bool, integer, float, complex); received "
            f"{what}. Encode the values as numbers first.",
            sfw.name, dfw.name,
        )
    return MemoryConversionError(
        f"{dfw.name} could not take {what}: {type(exc).__name__}: {exc}",
        sfw.name, dfw.name,
    )
