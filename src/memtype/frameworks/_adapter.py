"""The adapter base class: the conversion contract every framework implements, each capability
a method or class attribute with its default.

Each framework module defines one subclass of :class:`Adapter` (as einops backends subclass
``AbstractBackend``) and overrides what differs from the defaults; memtype creates one
instance per framework when it first needs it (:func:`memtype.frameworks.load_adapter`).
What only some frameworks have (device memory and streams, timing, pinned spills,
diagnostics) is a facet class in :mod:`memtype.frameworks._facets` that such a subclass
also derives from. ``x`` is always the framework's own array.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from memtype.frameworks._device import CPU, Device

__all__ = ["Adapter", "data_nbytes"]


def data_nbytes(shape: Sequence[int], dtype: np.dtype[Any]) -> int:
    """Bytes of data an array of ``shape`` and ``dtype`` holds (the one size rule)."""
    return math.prod(shape) * int(dtype.itemsize)

# Capability flags, each derived from whether a subclass overrides the method that provides it
# (so a flag and its method cannot disagree): flag -> method (here or in a facet; a class
# without the facet has the flag False).
_CAPABILITIES: dict[str, str] = {
    "casts_on_device": "astype",
    "restricts_dtypes": "holds_dtype",
    "has_readonly_view": "readonly_view",
    "counts_writes": "write_count",
    "has_host_check": "on_host",
    "has_streams": "current_stream",
    "has_device_context": "current_device",
    "describes_devices": "device_properties",
    "caps_memory": "set_memory_cap",
    "resets_peak": "reset_peak",
}


class Adapter(ABC):
    """How memtype drives one framework; the base supplies every default.

    Class attributes (facts about the framework, read after import):

    - ``immutable``: the framework treats its arrays as immutable (JAX, TensorFlow). False.
    - ``dlpack``: it imports and exports DLPack (zero-copy device routes). True.
    - ``dlpack_on_host``: host arrays may enter it by DLPack. True.
    - ``dlpack_contiguous``: its DLPack import needs C-contiguous data. True.
    - ``dlpack_align``: the byte alignment its DLPack import needs. 1.
    - ``dlpack_any_dtype``: skip the dtype check of :meth:`dlpack_dtype_ok`. False.
    - ``host_native``: its host arrays are NumPy's own. False.
    - ``peak_key``: the :meth:`memory_info` key that is a peak; None: no peak.

    Capability flags, set from which methods a subclass overrides (never set by hand):
    ``casts_on_device`` (:meth:`astype`, :meth:`rint`), ``restricts_dtypes``
    (:meth:`holds_dtype`), ``has_readonly_view``, ``counts_writes`` (:meth:`write_count`);
    of a :class:`~memtype.frameworks.DeviceAdapter`: ``has_host_check`` (``on_host``),
    ``has_streams`` (``current_stream``, ``wait_stream``, ``record_stream``),
    ``has_device_context`` (``current_device``), ``describes_devices``
    (``device_properties``), ``caps_memory`` (``set_memory_cap``), ``resets_peak``.
    """

    immutable: ClassVar[bool] = False
    dlpack: ClassVar[bool] = True
    dlpack_on_host: ClassVar[bool] = True
    dlpack_contiguous: ClassVar[bool] = True
    dlpack_align: ClassVar[int] = 1
    dlpack_any_dtype: ClassVar[bool] = False
    host_native: ClassVar[bool] = False
    peak_key: ClassVar[str | None] = None

    casts_on_device: ClassVar[bool] = False
    restricts_dtypes: ClassVar[bool] = False
    has_readonly_view: ClassVar[bool] = False
    counts_writes: ClassVar[bool] = False
    has_host_check: ClassVar[bool] = False
    has_streams: ClassVar[bool] = False
    has_device_context: ClassVar[bool] = False
    describes_devices: ClassVar[bool] = False
    caps_memory: ClassVar[bool] = False
    resets_peak: ClassVar[bool] = False

    _defaults: ClassVar[bool] = True  # a class whose methods are defaults (this and the facets)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for flag, method in _CAPABILITIES.items():
            owner = next((c for c in cls.__mro__ if method in vars(c)), None)
            setattr(cls, flag, owner is not None and not vars(owner).get("_defaults", False))

    # -- what every framework defines ------------------------------------------------------

    @abstractmethod
    def version(self) -> str:
        """The framework's version string."""

    @abstractmethod
    def dtype_of(self, x: Any) -> np.dtype[Any]:
        """``x``'s dtype as a NumPy dtype (bfloat16 as ``ml_dtypes.bfloat16``)."""

    @abstractmethod
    def to_numpy(self, x: Any) -> np.ndarray[Any, Any]:
        """A host view of ``x`` when it lives on the host (zero-copy where possible); else a
        copy."""

    @abstractmethod
    def from_numpy(self, a: np.ndarray[Any, Any], device: Device) -> Any:
        """An array on ``device`` holding ``a``'s values; shares ``a``'s memory where safe."""

    @abstractmethod
    def copy(self, x: Any) -> Any:
        """A private copy of ``x`` on the same device, complete when returned."""

    @abstractmethod
    def stack(self, arrays: Sequence[Any]) -> Any:
        """A new array of same-shape arrays (all on one device) along a new first axis."""

    # -- devices (defaults: a host-only framework) -----------------------------------------

    def device_of(self, x: Any) -> Device:
        """The device ``x`` lives on. Default: the host."""
        return CPU

    def shape_of(self, x: Any) -> tuple[int, ...]:
        """``x``'s shape as a tuple of ints."""
        return tuple(x.shape)

    def nbytes(self, x: Any) -> int:
        """Bytes of data ``x`` holds: element count times item size (nothing copied or
        synchronised)."""
        return data_nbytes(self.shape_of(x), self.dtype_of(x))

    def data_ptr(self, x: Any) -> int | None:
        """The address of ``x``'s first element, or None where the framework hides it."""
        return None

    def namespace(self) -> ModuleType | None:
        """A NumPy-like namespace (``numpy``, ``cupy``, ``jax.numpy``...), or None."""
        return None

    def minmax(self, x: Any) -> tuple[Any, Any]:
        """The smallest and the largest value of a non-empty ``x`` (NaN where it holds one),
        as the framework's scalars or 0-d arrays, in as few passes as the framework allows.
        Used only where :meth:`namespace` is not None. Default: its ``min`` and ``max``."""
        xp: Any = self.namespace()
        return xp.min(x), xp.max(x)

    # -- DLPack (used only where ``dlpack`` is True) --------------------------------------

    def from_dlpack(self, x: Any, device: Device) -> Any:
        """Zero-copy import of a DLPack producer already on ``device`` (caller checked the
        layout). Default: through NumPy (host data only)."""
        return self.from_numpy(np.from_dlpack(x), device)

    def dlpack_dtype_ok(self, dtype: np.dtype[Any]) -> bool:
        """Whether :meth:`from_dlpack` keeps ``dtype`` exactly (else the host path is taken)."""
        return True

    def dlpack_export(self, x: Any, contiguous: bool, align: int) -> Any | None:
        """``x`` ready to hand to a consumer needing that layout, or None: it must be copied."""
        return None

    # -- dtypes ----------------------------------------------------------------------------

    def holds_dtype(self, dtype: np.dtype[Any]) -> bool:
        """Whether the framework holds ``dtype`` exactly. Default: every NumPy dtype."""
        return True

    def astype(self, x: Any, dtype: np.dtype[Any]) -> Any:
        """``x`` cast to ``dtype`` (C semantics) on its device (``casts_on_device``).
        Default: cast in NumPy and back (dtype policies then work in NumPy themselves)."""
        return self.from_numpy(self.to_numpy(x).astype(dtype), self.device_of(x))

    def rint(self, x: Any) -> Any:
        """``x`` rounded half to even, same dtype. Default: through NumPy, as :meth:`astype`."""
        return self.from_numpy(np.rint(self.to_numpy(x)), self.device_of(x))

    def rint_clip(self, x: Any, bounds: tuple[float, float] | None = None, *,
                  in_place: bool = False) -> Any:
        """``x`` (a float array) rounded half to even; with ``bounds``, NaN also becomes 0 and
        every value is clipped into ``[low, high]``; same dtype (the dtype policy's rounding).

        ``in_place``: ``x`` is a temporary the caller made and reads no more; a framework
        whose arrays are mutable may work in it and return it. Default: :meth:`rint`, then
        the namespace's ``where`` and ``clip`` (NumPy's without one; new arrays, ``in_place``
        is not used)."""
        r = self.rint(x)
        if bounds is None:
            return r
        xp: Any = self.namespace()
        if xp is None:
            host = np.asarray(self.to_numpy(r))
            clipped = np.clip(np.where(np.isnan(host), 0.0, host), bounds[0], bounds[1])
            return self.from_numpy(clipped.astype(host.dtype), self.device_of(x))
        return xp.clip(xp.where(xp.isnan(r), 0.0, r), bounds[0], bounds[1])

    def parse_dtype(self, dtype: object) -> np.dtype[Any] | None:
        """The NumPy dtype of one of the framework's dtype objects, or None if not one."""
        return None

    def readonly_view(self, x: Any) -> Any:
        """An O(1) view of ``x`` that refuses writes (``has_readonly_view``). Default: a
        private copy (not O(1); callers without the flag copy instead of asking)."""
        return self.copy(x)

    def write_count(self, x: Any) -> int | None:
        """How many in-place writes ``x``'s memory has had (``counts_writes``), or None for an
        array without a count. Default: None (the framework counts no writes)."""
        return None

    # -- explanations ----------------------------------------------------------------------

    def unsupported(self, x: Any) -> str | None:
        """Why ``x`` can never leave its framework, or None. Default: None."""
        return None
