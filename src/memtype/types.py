"""The memory type enum and the dtype-conversion policy enum."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

import numpy as np

from memtype.frameworks import builtin_frameworks, is_registered, on_table_change

__all__ = ["MemoryType", "DtypeConversion", "MemoryTypeLike"]


class _MemoryTypeBase(str, enum.Enum):
    """A framework's array type: where and how an array's memory lives.

    One member per built-in row of the framework table (``MemoryType.TORCH.value ==
    "torch"``). Frameworks registered at run time with
    :func:`memtype.frameworks.register_framework` get a member too, made on first lookup
    (``MemoryType("toy")``) and dropped when they are unregistered; iterating the enum
    lists the built-in types.
    """

    @classmethod
    def _missing_(cls, value: object) -> _MemoryTypeBase | None:
        if not isinstance(value, str):
            return None
        lowered = value.lower()
        if lowered != value and lowered in cls._value2member_map_:
            return cls._value2member_map_[lowered]  # type: ignore[return-value]
        if not is_registered(lowered):
            return None
        member = str.__new__(cls, lowered)
        member._name_ = lowered.upper()
        member._value_ = lowered
        cls._value2member_map_[lowered] = member
        return member

    def __str__(self) -> str:
        return str(self.value)

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, tuple[str]]:
        return (MemoryType, (self.value,))


if TYPE_CHECKING:
    class MemoryType(_MemoryTypeBase):  # members come from the table (below)
        """A framework's array type (see ``_MemoryTypeBase``)."""
else:
    MemoryType = _MemoryTypeBase(
        "MemoryType", [(fw.name.upper(), fw.name) for fw in builtin_frameworks()],
        module=__name__, qualname="MemoryType")
    MemoryType.__doc__ = _MemoryTypeBase.__doc__


def _drop_unregistered_members() -> None:
    """Forget the members of run-time rows that left the table (built-ins stay)."""
    builtin = {fw.name for fw in builtin_frameworks()}
    for value in list(MemoryType._value2member_map_):
        if value not in builtin and not is_registered(str(value)):
            del MemoryType._value2member_map_[value]


on_table_change(_drop_unregistered_members)


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
