"""pyclesperanto adapter (OpenCL device arrays, 1-3 dimensions).

pyclesperanto holds int8..int32, uint8..uint32 and float32 only. Documented rules:
bool and float16 widen (to uint8 / float32, lossless); int64, uint64 and float64 narrow to
their 32-bit kin only when every value survives exactly, else a MemoryConversionError;
complex, 0-d, 0-size and >3-d arrays are refused with a clear error. It has no DLPack
(torch.from_dlpack on its arrays crashes the interpreter), so data moves through host memory.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyclesperanto as cle

from memtype.errors import DeviceError, MemoryConversionError
from memtype.frameworks import _opencl
from memtype.frameworks._device import Device
from memtype.frameworks._facets import DeviceAdapter, Diagnostics
from memtype.frameworks._host import (
    NARROWER,
    WIDER,
    base_ndarray,
    is_extension,
    narrow_lossless,
    native_copy,
)

_HINT = "Cast it to a 32-bit dtype first (e.g. x.astype('float32'))."


def _probe() -> tuple[tuple[str, ...], str]:
    """OpenCL device names, and why there are none: none where the runtime cannot run
    kernels or OpenCL is turned off (asked at each call: ``--no-opencl`` holds for one
    command), else the devices pyclesperanto lists."""
    chosen = _opencl.runtime()
    if not chosen.usable:  # it may list devices, but no kernel builds on them
        return (), f"no usable OpenCL runtime: {chosen.reason}"
    return _listed()


@functools.cache
def _listed() -> tuple[tuple[str, ...], str]:
    """The devices pyclesperanto lists, and why there are none (asked once: the list does
    not change).

    pyclesperanto imports without a usable OpenCL platform but then lacks its device
    functions (0.25: no ``list_available_devices``); that is "installed, no device".
    """
    lister = getattr(cle, "list_available_devices", None)
    if lister is None:
        return (), "pyclesperanto found no OpenCL backend (no OpenCL runtime)"
    try:
        names = tuple(str(n) for n in lister())
    except RuntimeError as exc:  # the backend loaded but the runtime refuses to enumerate
        return (), f"the OpenCL runtime failed to list devices ({exc})"
    return names, "" if names else "the OpenCL runtime lists no device"


def _no_device_reason() -> str:
    names, why = _probe()
    if names:
        return ""
    return f"{why}. Fix: {_opencl.fix()}." if why.startswith("no usable") else (
        f"no OpenCL device ({why}). Fix: {_opencl.fix()}.")


def _holds(dtype: np.dtype[Any]) -> bool:
    if is_extension(dtype):
        return False
    return dtype.kind in "iuf" and dtype.itemsize <= 4 and dtype.kind + str(dtype.itemsize) != "f2"


def _device_names() -> tuple[str, ...]:
    return _probe()[0]


@functools.cache
def _index_of(name: str) -> int:
    names = _device_names()
    return names.index(name) if name in names else 0


def _fit(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    code = "" if is_extension(a.dtype) else a.dtype.str[1:]  # ml_dtypes: never widened
    if a.ndim == 0 or a.ndim > 3 or a.size == 0:
        raise MemoryConversionError(
            f"pyclesperanto holds 1-3 dimensional, non-empty arrays; received shape {a.shape}.",
            "numpy", "pyclesperanto",
        )
    if code in WIDER:
        return a.astype(WIDER[code])
    if code in NARROWER and a.dtype.kind != "c":  # complex: refused below
        return narrow_lossless(a, np.dtype(NARROWER[code]), "pyclesperanto", _HINT)
    if not _holds(a.dtype):  # also float8 (kind 'f' in ml_dtypes) and other extensions
        raise MemoryConversionError(
            f"pyclesperanto cannot hold dtype {a.dtype}; it holds int8..int32, uint8..uint32 "
            f"and float32. {_HINT}",
            "numpy", "pyclesperanto",
        )
    return a


def _select(device: Device) -> Any:
    names = _device_names()
    if not names:
        raise DeviceError(f"pyclesperanto cannot hold arrays here: {_no_device_reason()} "
                          f"OpenCL runtime: {_opencl.runtime().detail}.")
    if device.index >= len(names):
        raise DeviceError(
            f"OpenCL device {device.index} requested; available: {list(names)}."
        )
    current = cle.get_device()
    if _index_of(current.name) != device.index:
        current = cle.select_device(names[device.index])
    return current


# pyclesperanto (CLIc, through pybind11) raises a plain RuntimeError for every OpenCL failure,
# ending in the status: "Error: Failed to allocate buffer memory. OpenCL error:
# CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)". Its type says nothing, so an error is an
# out-of-memory error only when it was raised inside pyclesperanto's own code (its innermost
# traceback frame) and ends with one of these statuses; never a RuntimeError of another
# library or of the caller that mentions them. (pocl, the CPU runtime, segfaults on a failed
# host allocation instead of reporting it.)
_OOM_STATUSES = tuple(f"OpenCL error: {s}" for s in (
    "CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)", "CL_OUT_OF_RESOURCES (-5)",
    "CL_OUT_OF_HOST_MEMORY (-6)",
))
_PACKAGE = os.path.dirname(os.path.abspath(cle.__file__)) + os.sep


def _raised_in_pyclesperanto(exc: BaseException) -> bool:
    """Whether the innermost frame of ``exc``'s traceback is pyclesperanto's own code."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PACKAGE)


class PyclesperantoAdapter(DeviceAdapter, Diagnostics):
    """pyclesperanto arrays on OpenCL devices."""

    dlpack = False  # torch.from_dlpack on its arrays crashes: data moves through the host

    def version(self) -> str:
        return str(cle.__version__)

    def no_device_reason(self) -> str:
        """Why pyclesperanto has no device, with the way out ("" when it has one)."""
        return _no_device_reason()

    def runtime_info(self) -> str:
        """Which OpenCL runtime pyclesperanto uses, and from where (for ``memtype info``)."""
        chosen = _opencl.runtime()
        where = f" ({chosen.library})" if chosen.library else ""
        state = f"{len(_device_names())} device(s)" if _device_names() else "no device"
        lines = [f"OpenCL runtime: {chosen.source}{where} — {chosen.detail}; {state}"]
        lines += [f"  probed: {line}" for line in chosen.tried]
        return "\n".join(lines)

    def device_of(self, x: Any) -> Device:
        return Device("opencl", _index_of(x.device.name))

    def gpu_count(self) -> int:
        return len(_device_names())

    def devices(self) -> list[str]:
        return [f"opencl:{i} {n}" for i, n in enumerate(_device_names())]

    def dlpack_version(self) -> str:
        return ""

    def dtype_of(self, x: Any) -> np.dtype[Any]:
        dtype: np.dtype[Any] = np.dtype(x.dtype)
        return dtype

    def to_numpy(self, x: Any) -> np.ndarray[Any, Any]:
        return np.asarray(x.get())

    def from_numpy(self, a: np.ndarray[Any, Any], device: Device) -> Any:
        fitted = _fit(base_ndarray(a))
        if not fitted.flags.c_contiguous or not fitted.dtype.isnative:
            fitted = native_copy(fitted)
        return cle.push(fitted, device=_select(device))

    def from_dlpack(self, x: Any, device: Device) -> Any:
        raise MemoryConversionError("pyclesperanto does not import DLPack.", "", "pyclesperanto")

    def dlpack_dtype_ok(self, dtype: np.dtype[Any]) -> bool:
        return False

    def to_device(self, x: Any, device: Device) -> Any:
        return cle.push(self.to_numpy(x), device=_select(device))

    def copy(self, x: Any) -> Any:
        return x.copy()

    def stack(self, arrays: Sequence[Any]) -> Any:
        """Stack 2D arrays on their device, in their common (NumPy-promoted) dtype.

        A plane of that dtype is copied byte for byte (``out[z] = plane``); only a plane of
        another dtype goes through ``cle.paste``, whose kernel computes in float32 (exact for
        the int8/16, uint8/16 and float32 planes memtype.stack_slices lets through; an int32
        or uint32 value above 2**24 would be rounded by it).
        """
        first = arrays[0]
        dtype = np.result_type(*(np.dtype(a.dtype) for a in arrays))
        if len(first.shape) != 2:
            # not 2D: stacked on the host (pyclesperanto refuses the 4D result of 3D inputs)
            host = np.stack([self.to_numpy(a) for a in arrays]).astype(dtype, copy=False)
            return cle.push(host, device=first.device)
        out = cle.create((len(arrays), *first.shape), dtype=dtype, device=first.device)
        for z, plane in enumerate(arrays):
            if np.dtype(plane.dtype) == dtype:
                out[z] = plane
            else:
                cle.paste(plane, out, 0, 0, z)
        return out

    def synchronize(self, device: Device) -> None:
        if _device_names():  # without a device no kernel can be queued
            cle.wait_for_kernel_to_finish(True)

    def empty_cache(self) -> None:
        return None  # buffers are released with their arrays

    def oom_errors(self) -> tuple[type[BaseException], ...]:
        return (MemoryError, RuntimeError)

    def is_oom(self, exc: BaseException) -> bool:
        """``MemoryError`` (``std::bad_alloc``), or an OpenCL out-of-memory status raised by
        pyclesperanto itself (see ``_OOM_STATUSES``)."""
        if isinstance(exc, MemoryError):
            return True
        return (type(exc) is RuntimeError and str(exc).endswith(_OOM_STATUSES)
                and _raised_in_pyclesperanto(exc))

    def holds_dtype(self, dtype: np.dtype[Any]) -> bool:
        """int8..int32, uint8..uint32 and float32 only (NumPy's own: no ml_dtypes int4...)."""
        return _holds(dtype)

    def runtime_started(self) -> bool:
        return True  # importing pyclesperanto initialises its OpenCL context
