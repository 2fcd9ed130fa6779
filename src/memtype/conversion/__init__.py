"""Conversion: an array reaches another memory type (:func:`convert`) or dtype (``casting``).

The modules, top-down (each imports only those below it):

``api``
    :func:`convert` and :func:`convert_memory` (the OpenHCS signature).
``routes``
    The route between two memory types, resolved once per (array type, target) and cached;
    the paths (same type, DLPack, the NumPy hub, one transfer, GPU -> GPU).
``devices``
    :func:`target_device`: the device a conversion puts its result on.
``events``
    :class:`ConversionEvent`, conversion hooks and :func:`capture_conversions`.
``casting``
    Casting under the dtype policy, in the array's own framework (public as
    :func:`memtype.dtypes.cast`; :mod:`memtype.dtypes` decides which dtype).
"""

from __future__ import annotations

from memtype.conversion.api import convert, convert_memory
from memtype.conversion.devices import target_device
from memtype.conversion.events import (
    ConversionEvent,
    add_conversion_hook,
    capture_conversions,
    remove_conversion_hook,
)
from memtype.detect import shares_memory

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
