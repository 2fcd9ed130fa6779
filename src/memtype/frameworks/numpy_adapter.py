"""NumPy adapter: the host hub every other adapter reads from and writes to."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from memtype.frameworks._adapter import Adapter
from memtype.frameworks._device import Device
from memtype.frameworks._facets import Diagnostics
from memtype.frameworks._host import base_ndarray, numpy_dlpack_dtype, shareable

_MIN, _MAX = np.minimum.reduce, np.maximum.reduce


class NumpyAdapter(Adapter, Diagnostics):
    """NumPy, the host: every other adapter reads from and writes to its arrays."""

    host_native = True
    dlpack_contiguous = False
    dlpack_any_dtype = True

    def version(self) -> str:
        return np.__version__

    def dlpack_version(self) -> str:
        return "1.0"

    def dtype_of(self, x: Any) -> np.dtype[Any]:
        dtype: np.dtype[Any] = x.dtype
        return dtype

    def to_numpy(self, x: Any) -> np.ndarray[Any, Any]:
        """``x``, or a plain view of a subclass's buffer (its overrides are never trusted)."""
        return base_ndarray(x)

    def from_numpy(self, a: np.ndarray[Any, Any], device: Device) -> Any:
        return a

    def from_dlpack(self, x: Any, device: Device) -> Any:
        return np.from_dlpack(x)

    def dlpack_export(self, x: Any, contiguous: bool, align: int) -> Any | None:
        x = base_ndarray(x)
        if not numpy_dlpack_dtype(x.dtype) or not shareable(x, contiguous=contiguous, align=align):
            return None
        return x

    def data_ptr(self, x: Any) -> int | None:
        return int(base_ndarray(x).__array_interface__["data"][0])

    def copy(self, x: Any) -> Any:
        return np.array(x, copy=True)

    def stack(self, arrays: Sequence[Any]) -> Any:
        return np.stack(arrays)

    def namespace(self) -> ModuleType | None:
        return np

    def minmax(self, x: Any) -> tuple[Any, Any]:
        # the ufuncs' reduce without np.min's Python wrapper (a decorated call's hot path)
        return _MIN(x, axis=None), _MAX(x, axis=None)

    def astype(self, x: Any, dtype: np.dtype[Any]) -> Any:
        return x.astype(dtype)

    def rint(self, x: Any) -> Any:
        return np.rint(x)

    def rint_clip(self, x: Any, bounds: tuple[float, float] | None = None, *,
                  in_place: bool = False) -> Any:
        """In ``x`` when it is the caller's temporary, else in the one new array ``rint`` makes."""
        r = np.rint(x, out=x if in_place and type(x) is np.ndarray else None)
        if bounds is None or type(r) is not np.ndarray:  # a 0-d result is a NumPy scalar
            return r if bounds is None else np.clip(np.where(np.isnan(r), 0.0, r), *bounds)
        np.copyto(r, 0.0, where=np.isnan(r))
        return np.clip(r, bounds[0], bounds[1], out=r)

    def readonly_view(self, x: Any) -> Any:
        """A view of ``x`` that cannot be written through (O(1); ``x`` itself is untouched)."""
        view = x.view()
        view.setflags(write=False)  # setflags is several times faster than view.flags.writeable
        return view

    def unsupported(self, x: Any) -> str | None:
        """Why ``x`` cannot leave NumPy: a masked array's mask would be lost."""
        if isinstance(x, np.ma.MaskedArray):
            return ("a masked array's mask has no equivalent in other frameworks; pass "
                    "x.filled(value) or x.data (and the mask, np.ma.getmaskarray(x), separately).")
        return None
