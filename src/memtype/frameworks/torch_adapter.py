"""PyTorch adapter (CPU and CUDA tensors)."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from types import ModuleType
from typing import Any

import numpy as np
import torch
from torch.utils.dlpack import from_dlpack

from memtype.errors import MemoryConversionError
from memtype.frameworks._device import CPU, Device, DeviceProperties
from memtype.frameworks._facets import DeviceAdapter, DeviceTiming, Diagnostics, PinnedSpills
from memtype.frameworks._host import (
    base_ndarray,
    is_extension,
    native_copy,
    negative_strides,
    shareable,
)

_streams = threading.local()


# torch dtypes that NumPy knows through ml_dtypes (same names); bits are moved as uints
_ML_NAMES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
             "float8_e8m0fnu")
_UINT_OF_SIZE = {1: torch.uint8, 2: torch.uint16}
_cuda: Any = torch.cuda  # its is_initialized, Stream and Event lack annotations


def _ml_table() -> dict[Any, np.dtype[Any]]:
    """torch dtype -> NumPy (ml_dtypes) dtype; empty where ml_dtypes is not installed."""
    if importlib.util.find_spec("ml_dtypes") is None:
        return {}
    import ml_dtypes

    pairs = ((getattr(torch, name, None), getattr(ml_dtypes, name, None)) for name in _ML_NAMES)
    return {t: np.dtype(n) for t, n in pairs if t is not None and n is not None}


_ML_TORCH = _ml_table()
_ML_NUMPY = {n: t for t, n in _ML_TORCH.items()}


_DTYPES: dict[Any, np.dtype[Any]] = {}


def _plain(x: Any) -> Any:
    """Detached, with conjugate/negative bits resolved (views stay views where possible)."""
    if x.requires_grad:
        x = x.detach()
    if x.is_conj() or x.is_neg():
        x = x.resolve_conj().resolve_neg()
    return x


# NumPy type codes torch refuses by name although it holds their bits (numpy.ulonglong is
# uint64 under another code; MLX and the buffer protocol make such arrays)
_SAME_BITS = {"Q": np.dtype(np.uint64)}


class _OnItsDevice:
    """A CUDA tensor exported with its own device made current for the export.

    ``Tensor.__dlpack__`` refuses (``BufferError``) a tensor on a GPU other than torch's
    current one, and orders the consumer's stream after torch's current stream of *that*
    device; JAX and TensorFlow do not switch devices before asking.
    """

    __slots__ = ("tensor",)

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor

    def __dlpack_device__(self) -> tuple[int, int]:
        device: tuple[int, int] = self.tensor.__dlpack_device__()
        return device

    def __dlpack__(self, **kwargs: Any) -> Any:
        with torch.cuda.device(self.tensor.device):
            return self.tensor.__dlpack__(**kwargs)


def _torch_device(device: Device) -> Any:
    return torch.device("cpu") if device.kind == "cpu" else torch.device("cuda", device.index)


# --- dtype policy primitives (memtype.dtypes) ---


# --- cross-stream hand-off (memtype.gpu.streams) ---


class TorchAdapter(DeviceAdapter, DeviceTiming, PinnedSpills, Diagnostics):
    """PyTorch tensors, on the host or a CUDA GPU."""

    dlpack_contiguous = False  # any non-negative strides (negative ones abort the process)
    dlpack_any_dtype = True
    peak_key = "peak_allocated"

    def version(self) -> str:
        return str(torch.__version__)

    def device_of(self, x: Any) -> Device:
        dev = x.device
        if dev.type == "cpu":
            return CPU
        return Device(dev.type, dev.index or 0)

    def on_host(self, x: Any) -> bool:
        return bool(x.is_cpu)

    def gpu_count(self) -> int:
        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0

    def devices(self) -> list[str]:
        names = ["cpu"]
        for i in range(self.gpu_count()):
            names.append(f"cuda:{i} {torch.cuda.get_device_name(i)}")
        return names

    def dlpack_version(self) -> str:
        return "1.0"

    def dtype_of(self, x: Any) -> np.dtype[Any]:
        dt = _DTYPES.get(x.dtype)
        if dt is None:
            ml = _ML_TORCH.get(x.dtype)
            dt = ml if ml is not None else np.dtype(str(x.dtype).removeprefix("torch."))
            _DTYPES[x.dtype] = dt
        return dt

    def to_numpy(self, x: Any) -> np.ndarray[Any, Any]:
        x = _plain(x)
        if x.device.type != "cpu":
            x = x.cpu()
        ml = _ML_TORCH.get(x.dtype)
        if ml is not None:
            bits: np.ndarray[Any, Any] = x.view(_UINT_OF_SIZE[ml.itemsize]).numpy()
            return bits.view(ml)
        host: np.ndarray[Any, Any] = x.numpy()
        return host

    def from_numpy(self, a: np.ndarray[Any, Any], device: Device) -> Any:
        a = base_ndarray(a)  # a subclass's overrides are never asked
        same = _SAME_BITS.get(a.dtype.char)
        if same is not None and same.char != a.dtype.char:
            a = a.view(same.newbyteorder(a.dtype.byteorder))  # O(1): the same bits, a known code
        extension = is_extension(a.dtype)
        tdt = _ML_NUMPY.get(a.dtype) if extension else None
        if tdt is None and extension:
            raise MemoryConversionError(
                f"torch cannot hold dtype {a.dtype}; of the ml_dtypes it holds "
                f"{', '.join(n.name for n in _ML_NUMPY)} (ml_dtypes int4/uint4... are one value "
                "per byte, torch's are packed). Cast it first.",
                "numpy", "torch",
            )
        if device.kind == "cuda" and tdt is None and a.dtype.isnative and not negative_strides(a):
            # one host -> device transfer, read-only arrays included (torch.from_numpy would
            # want a writable host copy of those first)
            return torch.tensor(a, device=_torch_device(device))
        if not shareable(a, contiguous=False):
            a = native_copy(a)
        if tdt is not None:  # bfloat16, float8...: the bits as unsigned ints, viewed back
            t = torch.from_numpy(a.view(np.dtype(f"u{a.dtype.itemsize}"))).view(tdt)
        else:
            t = torch.from_numpy(a)
        if device.kind == "cuda":
            t = t.to(_torch_device(device), non_blocking=False)
        return t

    def from_dlpack(self, x: Any, device: Device) -> Any:
        return from_dlpack(x)

    def dlpack_export(self, x: Any, contiguous: bool, align: int) -> Any | None:
        x = _plain(x)
        if contiguous and not x.is_contiguous():
            return None
        if align > 1 and x.numel() and x.data_ptr() % align:
            return None
        if x.is_cuda and x.device.index != torch.cuda.current_device():
            return _OnItsDevice(x)
        return x

    def data_ptr(self, x: Any) -> int | None:
        return int(x.data_ptr())

    def to_device(self, x: Any, device: Device) -> Any:
        return x.to(_torch_device(device))

    def copy(self, x: Any) -> Any:
        return _plain(x).clone(memory_format=torch.contiguous_format)

    def stack(self, arrays: Sequence[Any]) -> Any:
        return torch.stack(list(arrays))

    def namespace(self) -> ModuleType | None:
        return torch

    def minmax(self, x: Any) -> tuple[Any, Any]:
        low, high = torch.aminmax(x)  # one pass
        return low, high

    def synchronize(self, device: Device) -> None:
        if device.kind == "cuda":
            torch.cuda.synchronize(device.index)

    def stream(self, device: Device) -> AbstractContextManager[Any]:
        if device.kind != "cuda":
            return nullcontext()
        per_thread: dict[int, Any] = _streams.__dict__.setdefault("by_device", {})
        s = per_thread.get(device.index)
        if s is None:
            s = per_thread[device.index] = _cuda.Stream(device=device.index)
        return torch.cuda.stream(s)

    def empty_cache(self) -> None:
        if _cuda.is_initialized():
            torch.cuda.empty_cache()

    def memory_info(self, gpu_id: int) -> dict[str, int]:
        if not _cuda.is_initialized():
            return {}
        return {
            "allocated": int(torch.cuda.memory_allocated(gpu_id)),
            "reserved": int(torch.cuda.memory_reserved(gpu_id)),
            "peak_allocated": int(torch.cuda.max_memory_allocated(gpu_id)),
        }

    def oom_errors(self) -> tuple[type[BaseException], ...]:
        return (torch.OutOfMemoryError,)

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, torch.OutOfMemoryError)

    def astype(self, x: Any, dtype: np.dtype[Any]) -> Any:
        return x.to(getattr(torch, np.dtype(dtype).name))

    def rint(self, x: Any) -> Any:
        return torch.round(x)  # half to even, like numpy.rint

    def rint_clip(self, x: Any, bounds: tuple[float, float] | None = None, *,
                  in_place: bool = False) -> Any:
        """In ``x`` when it is the caller's temporary, else in the one new tensor ``round``
        makes; a tensor that autograd records is never written in place."""
        r = x.round_() if in_place and not x.requires_grad else torch.round(x)
        if bounds is None:
            return r
        if r.requires_grad:
            return torch.clip(torch.where(torch.isnan(r), 0.0, r), bounds[0], bounds[1])
        return r.masked_fill_(torch.isnan(r), 0.0).clamp_(bounds[0], bounds[1])

    def holds_dtype(self, dtype: np.dtype[Any]) -> bool:
        """Every NumPy dtype it held before ml_dtypes, and bfloat16 and the float8 family."""
        return not is_extension(dtype) or dtype in _ML_NUMPY

    def write_count(self, x: Any) -> int | None:
        """``Tensor._version``: shared by a tensor and its views, raised by every in-place
        operation; None for inference tensors, which keep no count."""
        try:
            count: int = x._version
        except RuntimeError:  # "Inference tensors do not track version counter"
            return None
        return count

    def current_stream(self, device: Device) -> Any:
        return torch.cuda.current_stream(device.index)

    def wait_stream(self, waiter: Any, producer: Any) -> None:
        if waiter != producer:
            waiter.wait_stream(producer)

    def record_stream(self, x: Any, stream: Any) -> None:
        if isinstance(x, torch.Tensor) and x.device.type == "cuda":
            x.record_stream(stream)

    def runtime_started(self) -> bool:
        """Whether torch initialised CUDA (its caching allocator settings are then fixed)."""
        return bool(_cuda.is_initialized())

    def unsupported(self, x: Any) -> str | None:
        """Why ``x`` cannot leave torch (layouts and kinds of tensor with no dense buffer)."""
        if x.is_nested:
            return "a nested torch tensor has no single shape; convert its components one by one."
        if x.layout != torch.strided:
            return f"a torch tensor with layout {x.layout} is not dense; call .to_dense() first."
        if x.is_meta:
            return "a torch tensor on the meta device has no data."
        if x.is_quantized:
            return "a quantized torch tensor has no portable dtype; call .dequantize() first."
        return None

    def device_properties(self, index: int) -> DeviceProperties:
        """Starts torch's CUDA context on that device."""
        props = torch.cuda.get_device_properties(index)
        free, total = torch.cuda.mem_get_info(index)
        uuid = str(getattr(props, "uuid", ""))
        return DeviceProperties(str(props.name), int(total), int(free),
                                (int(props.major), int(props.minor)),
                                f"GPU-{uuid}" if uuid and not uuid.startswith("GPU-") else uuid)

    def set_memory_cap(self, gpu_id: int, limit_bytes: int | None, total_bytes: int) -> None:
        fraction = 1.0 if limit_bytes is None else min(limit_bytes / total_bytes, 1.0)
        torch.cuda.set_per_process_memory_fraction(fraction, gpu_id)

    def reset_peak(self, gpu_id: int) -> None:
        torch.cuda.reset_peak_memory_stats(gpu_id)

    def timing_events(self) -> tuple[Any, Any] | None:
        if not _cuda.is_initialized():
            return None
        start, end = _cuda.Event(enable_timing=True), _cuda.Event(enable_timing=True)
        start.record()
        return start, end

    def pinned_host_copy(self, x: Any) -> Any | None:
        if x.device.type != "cuda":
            return None
        out = torch.empty(tuple(x.shape), dtype=x.dtype, pin_memory=True)
        out.copy_(x)
        return out

    def parse_dtype(self, dtype: object) -> np.dtype[Any] | None:
        if not isinstance(dtype, torch.dtype):
            return None
        try:
            return np.dtype(str(dtype).rpartition(".")[2])
        except TypeError:
            return None
