"""The memory type enum and the dtype-conversion policy enum."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

__all__ = ["MemoryType", "DtypeConversion", "MemoryTypeLike"]


class MemoryType(str, enum.Enum):
    """A framework's array type: where and how an array's memory lives.

    ``MemoryType.TORCH.value == "torch"``. Frameworks registered at run time with
    :func:`memtype.frameworks.register_framework` get a member too, made on first lookup
    (``MemoryType("toy")``); iterating the enum lists the six built-in types.
    """

    NUMPY = "numpy"
    CUPY = "cupy"
    TORCH = "torch"
    TENSORFLOW = "tensorflow"
    JAX = "jax"
    PYCLESPERANTO = "pyclesperanto"

    @classmethod
    def _missing_(cls, value: object) -> MemoryType | None:
        if not isinstance(value, str):
            return None
        lowered = value.lower()
        if lowered != value and lowered in cls._value2member_map_:
            return cls._value2member_map_[lowered]  # type: ignore[return-value]
        from memtype.frameworks import is_registered  # lazy: the table sits below the enum

        if not is_registered(lowered):
            return None
        member = str.__new__(cls, lowered)
        member._name_ = lowered.upper()
        member._value_ = lowered
        cls._value2member_map_[lowered] = member
        return member

    def __str__(self) -> str:
        return self.value

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, tuple[str]]:
        return (MemoryType, (self.value,))


MemoryTypeLike = MemoryType | str


class DtypeConversion(enum.Enum):
    """What dtype a decorated function's result is returned in.

    ``PRESERVE_INPUT`` (default) returns the input's dtype, ``NATIVE_OUTPUT`` leaves the
    result as the function made it, the others force that dtype.
    """

    PRESERVE_INPUT = "preserve"
    NATIVE_OUTPUT = "native"
    UINT8 = "uint8"
    UINT16 = "uint16"
    INT16 = "int16"
    INT32 = "int32"
    FLOAT32 = "float32"
    FLOAT64 = "float64"

    @property
    def numpy_dtype(self) -> np.dtype[Any] | None:
        """The forced NumPy dtype, or ``None`` for ``PRESERVE_INPUT`` / ``NATIVE_OUTPUT``."""
        if self in (DtypeConversion.PRESERVE_INPUT, DtypeConversion.NATIVE_OUTPUT):
            return None
        return np.dtype(str(self.value))
