"""TensorFlow adapter (CPU and GPU tensors). TensorFlow tensors are immutable.

TensorFlow aborts the process when it imports a DLPack buffer that is not 64-byte aligned
or not row-major, so every import is checked first and copied when it would not be safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from types import ModuleType
from typing import Any

import numpy as np
import tensorflow as tf

from memtype.errors import ConfigurationError, MemoryConversionError
from memtype.frameworks._device import CPU, Device, DeviceProperties
from memtype.frameworks._facets import DeviceAdapter, Diagnostics
from memtype.frameworks._host import (
    ALIGN,
    base_ndarray,
    is_extension,
    native_copy,
    numpy_dlpack_dtype,
    shareable,
)

_DEVICES: dict[str, Device] = {}


def _parse_device(name: str) -> Device:
    spec = tf.DeviceSpec.from_string(name or "/device:CPU:0")
    if (spec.device_type or "CPU").upper() == "CPU":
        return CPU
    return Device("cuda", spec.device_index or 0)


_DTYPES: dict[int, tuple[Any, np.dtype[Any]]] = {}


def _tf_device(device: Device) -> str:
    return "/CPU:0" if device.kind == "cpu" else f"/GPU:{device.index}"


_NOT_NUMERIC = frozenset({tf.string, tf.resource, tf.variant})


def _knows(dtype: np.dtype[Any]) -> bool:
    try:
        tf.as_dtype(dtype)
    except TypeError:  # an extension dtype TensorFlow has no DType for
        return False
    return True


def _ml_held() -> list[str]:
    """The ml_dtypes names TensorFlow holds (for error messages)."""
    import ml_dtypes

    kinds = (getattr(ml_dtypes, n) for n in dir(ml_dtypes))
    found = {np.dtype(k) for k in kinds if isinstance(k, type) and issubclass(k, np.generic)}
    return sorted(d.name for d in found if is_extension(d) and _knows(d))


class TensorflowAdapter(DeviceAdapter, Diagnostics):
    """TensorFlow tensors and variables (immutable), on the host or a CUDA GPU."""

    immutable = True
    dlpack_align = ALIGN
    peak_key = "peak"

    def version(self) -> str:
        return str(tf.__version__)

    def device_of(self, x: Any) -> Device:
        name = x.device
        found = _DEVICES.get(name)
        if found is None:  # parsed once per device name
            found = _DEVICES[name] = _parse_device(name)
        return found

    def on_host(self, x: Any) -> bool:
        """Whether ``x`` lives in host memory (no device lookup while no GPU is visible)."""
        if self._gpus_visible is None:  # asked once: devices do not appear later
            self._gpus_visible = self.gpu_count() > 0
        return not self._gpus_visible or self.device_of(x).kind == "cpu"

    # an attribute, not a cached_property: that writes the instance's __dict__, which turns
    # every later attribute read of the adapter into a dictionary lookup (CPython 3.11)
    _gpus_visible: bool | None = None

    def gpu_count(self) -> int:
        return len(tf.config.list_physical_devices("GPU"))

    def devices(self) -> list[str]:
        gpus = tf.config.list_physical_devices("GPU")
        return ["cpu"] + [f"cuda:{i} {d.name}" for i, d in enumerate(gpus)]

    def dlpack_version(self) -> str:
        return "0.8"

    def dtype_of(self, x: Any) -> np.dtype[Any]:
        # keyed by identity: hashing a tf.DType costs more than the lookup (the entry holds the
        # DType, so its id is never reused)
        dt = x.dtype
        found = _DTYPES.get(id(dt))
        if found is None or found[0] is not dt:
            found = _DTYPES[id(dt)] = (dt, np.dtype(dt.as_numpy_dtype))
        return found[1]

    def shape_of(self, x: Any) -> tuple[int, ...]:
        return tuple(x.shape.as_list())

    def to_numpy(self, x: Any) -> np.ndarray[Any, Any]:
        if isinstance(x, tf.Variable):
            host: np.ndarray[Any, Any] = x.numpy()
            return host
        if not self.on_host(x):
            with tf.device("/CPU:0"):
                x = tf.identity(x)
        return np.asarray(x)

    def from_numpy(self, a: np.ndarray[Any, Any], device: Device) -> Any:
        a = base_ndarray(a)  # NumPy's own __dlpack__, never a subclass's override
        if device.kind == "cpu" and shareable(a, contiguous=True, align=ALIGN):
            if numpy_dlpack_dtype(a.dtype):
                return tf.experimental.dlpack.from_dlpack(a.__dlpack__())
            if a.dtype.name == "bfloat16":  # NumPy exports no bfloat16: its bits, bitcast (O(1))
                bits = tf.experimental.dlpack.from_dlpack(a.view(np.uint16).__dlpack__())
                return tf.bitcast(bits, tf.bfloat16)
        if is_extension(a.dtype) and not self.holds_dtype(a.dtype):
            raise MemoryConversionError(
                f"tensorflow cannot hold dtype {a.dtype}; it holds bool, integers, float16/32/64, "
                f"complex, strings and the ml_dtypes {', '.join(_ml_held())}. Cast it first.",
                "numpy", "tensorflow",
            )
        if not shareable(a, contiguous=True):
            a = native_copy(a)
        with tf.device(_tf_device(device)):
            return tf.identity(tf.convert_to_tensor(a))

    def from_dlpack(self, x: Any, device: Device) -> Any:
        return tf.experimental.dlpack.from_dlpack(x.__dlpack__())

    def dlpack_dtype_ok(self, dtype: np.dtype[Any]) -> bool:
        """NumPy's own numeric dtypes and bfloat16: TensorFlow's DLPack knows no float8 codes."""
        return numpy_dlpack_dtype(dtype) or dtype.name == "bfloat16"

    def dlpack_export(self, x: Any, contiguous: bool, align: int) -> Any | None:
        # a Variable's buffer must not be shared (see copy); string, resource and variant
        # tensors abort the process inside TensorFlow's DLPack export (a CHECK failure);
        # float8/int4... tensors it refuses to export (they go through NumPy's view instead)
        if isinstance(x, tf.Variable) or x.dtype in _NOT_NUMERIC or not self.dlpack_dtype_ok(
            self.dtype_of(x)
        ):
            return None
        return x

    def data_ptr(self, x: Any) -> int | None:
        if isinstance(x, tf.Variable) or self.device_of(x).kind != "cpu":
            return None
        return int(np.asarray(x).__array_interface__["data"][0])

    def to_device(self, x: Any, device: Device) -> Any:
        with tf.device(_tf_device(device)):
            return tf.identity(x)

    def copy(self, x: Any) -> Any:
        """A copy with its own buffer (``tf.identity`` shares it on the same device).

        Also the path for a ``tf.Variable`` out through DLPack: exporting its value directly
        would let the consumer write into the variable behind TensorFlow's back.
        """
        value = x.read_value() if isinstance(x, tf.Variable) else x
        return tf.raw_ops.DeepCopy(x=value)

    def readonly_view(self, x: Any) -> Any:
        """``x`` as a value that cannot be written: a ``tf.Variable``'s current value.

        Tensors are immutable already; a Variable could be ``assign``-ed through, so a decorated
        function gets its value at call time instead (later writes to either side stay apart).
        """
        return x.read_value() if isinstance(x, tf.Variable) else x

    def stack(self, arrays: Sequence[Any]) -> Any:
        return tf.stack(list(arrays))

    def namespace(self) -> ModuleType | None:
        import tensorflow.experimental.numpy as tnp

        xp: ModuleType = tnp
        return xp

    def synchronize(self, device: Device) -> None:
        return None  # eager tensors are materialised when read

    def stream(self, device: Device) -> AbstractContextManager[Any]:
        return tf.device(_tf_device(device)) if device.kind == "cuda" else nullcontext()

    def empty_cache(self) -> None:
        return None  # TensorFlow's BFC allocator cannot be asked to release memory

    def memory_info(self, gpu_id: int) -> dict[str, int]:
        if gpu_id >= self.gpu_count():
            return {}
        info = tf.config.experimental.get_memory_info(f"GPU:{gpu_id}")
        return {k: int(v) for k, v in info.items()}

    def oom_errors(self) -> tuple[type[BaseException], ...]:
        return (tf.errors.ResourceExhaustedError,)

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, tf.errors.ResourceExhaustedError)

    def astype(self, x: Any, dtype: np.dtype[Any]) -> Any:
        return tf.cast(x, tf.as_dtype(dtype))

    def rint(self, x: Any) -> Any:
        return tf.math.round(x)  # half to even, like numpy.rint

    def holds_dtype(self, dtype: np.dtype[Any]) -> bool:
        """Every NumPy dtype it held before ml_dtypes, and the extension dtypes it names."""
        return not is_extension(dtype) or _knows(dtype)

    def runtime_started(self) -> bool:
        """Whether TensorFlow initialised its eager context (physical devices are then fixed)."""
        from tensorflow.python.eager import context  # private: what set_memory_growth itself checks

        return context.context()._context_handle is not None

    def apply_setting(self, name: str, value: str) -> str:
        """``tensorflow_memory_growth`` on every TensorFlow GPU (checked once it started)."""
        enabled = value == "true"
        gpus = tf.config.list_physical_devices("GPU")
        if self.runtime_started():
            wrong = [g.name for g in gpus if tf.config.experimental.get_memory_growth(g) != enabled]
            if wrong:
                raise ConfigurationError(
                    f"{name}={enabled}: TensorFlow has already initialised {', '.join(wrong)} with "
                    f"memory growth {not enabled}; call memtype.gpu.configure(...) before the "
                    "first TensorFlow operation."
                )
            return "already in effect"
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, enabled)
        return value

    def unsupported(self, x: Any) -> str | None:
        """Why ``x`` cannot leave TensorFlow: resource and variant tensors are handles, not data."""
        if x.dtype in (tf.resource, tf.variant):
            return f"a TensorFlow tensor of dtype {x.dtype.name} is a handle, not array data."
        return None

    def device_properties(self, index: int) -> DeviceProperties:
        """No free/total figures: TensorFlow does not say."""
        gpu = tf.config.list_physical_devices("GPU")[index]
        details = tf.config.experimental.get_device_details(gpu)
        cc = details.get("compute_capability")
        return DeviceProperties(str(details.get("device_name", gpu.name)), 0, 0,
                                (int(cc[0]), int(cc[1])) if cc else None)

    def reset_peak(self, gpu_id: int) -> None:
        tf.config.experimental.reset_memory_stats(f"GPU:{gpu_id}")

    def parse_dtype(self, dtype: object) -> np.dtype[Any] | None:
        if not isinstance(dtype, tf.dtypes.DType):
            return None
        try:
            parsed: np.dtype[Any] = np.dtype(dtype.as_numpy_dtype)
            return parsed
        except TypeError:
            return None
