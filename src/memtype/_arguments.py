"""The array arguments of a decorated call: found, converted to the function's type, isolated.

Isolation rule: the function never gets a writable alias of its caller's array. An argument
that reaches the function as the caller's own memory (same type, or a zero-copy
conversion) is passed as a read-only view where the framework has one (NumPy: O(1);
TensorFlow: a ``tf.Variable``'s value), else as a private copy on the same device (torch,
CuPy, pyclesperanto). JAX arrays and TensorFlow tensors cannot be written, so they are
passed as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memtype.convert import convert, shares_memory
from memtype.dtypes import holds_dtype
from memtype.errors import MemoryConversionError
from memtype.frameworks import (
    Framework,
    array_types,
    load_adapter,
    loaded_frameworks,
    on_table_change,
)
from memtype.frameworks._protocol import CPU, Adapter, Device
from memtype.gpu.streams import call_device

__all__ = ["Inputs", "Policy", "framework_of", "prepare", "arrays_in"]

_NOT_ARRAYS = frozenset({int, float, complex, str, bytes, bool, type(None), slice,
                         type(Ellipsis), dict, set, frozenset, range})
_known: dict[type, Framework] = {}
on_table_change(_known.clear)
_NEAREST_FLOAT = {"f8": "f4", "c16": "c8", "f2": "f4"}


def framework_of(x: Any) -> Framework | None:
    """The framework that owns ``x``, or ``None`` for anything that is not an array."""
    cls = type(x)
    fw = _known.get(cls)
    if fw is not None or cls in _NOT_ARRAYS:
        return fw
    for candidate in loaded_frameworks():
        classes = array_types(candidate)
        if classes and issubclass(cls, classes):
            _known[cls] = candidate
            return candidate
    return None


_adapters: dict[str, Adapter] = {}
on_table_change(_adapters.clear)


def _adapter(fw: Framework) -> Adapter:
    """The framework's adapter (cached here: this is the per-call path)."""
    adapter = _adapters.get(fw.name)
    if adapter is None:
        adapter = _adapters[fw.name] = load_adapter(fw.name)
    return adapter


def arrays_in(value: Any) -> list[Any]:
    """The arrays in a result (itself, or the items of a tuple or list)."""
    if framework_of(value) is not None:
        return [value]
    if type(value) in (tuple, list):
        return [v for v in value if framework_of(v) is not None]
    return []


@dataclass(frozen=True, slots=True)
class Policy:
    """How a decorated function's inputs are converted (fixed at decoration)."""

    framework: Framework
    adapter: Adapter
    copy_inputs: bool = True
    allow_cpu_roundtrip: bool = False
    same_type: Callable[[Any], Any] = field(init=False)
    """An argument already of the function's type, isolated (see the module notes)."""

    def __post_init__(self) -> None:
        readonly = getattr(self.adapter, "readonly_view", None)
        if readonly is not None:
            isolate: Callable[[Any], Any] = readonly
        elif self.framework.immutable or not self.copy_inputs:
            isolate = _unchanged
        else:
            isolate = self.adapter.copy
        object.__setattr__(self, "same_type", isolate)


def _unchanged(v: Any) -> Any:
    """``v`` itself."""
    return v


class Inputs:
    """A call's arguments after conversion, and what the rest of the call needs to know.

    ``dtype`` is the caller's dtype of the first array (what ``PRESERVE_INPUT`` returns),
    ``first`` / ``first_at`` the converted first array and its position (an index or a
    keyword; ``None`` when it sits inside a list or tuple), ``arrays`` all converted arrays.
    """

    __slots__ = ("args", "kwargs", "device", "gpu_id", "dtype", "first", "first_at", "arrays")

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any], device: Device,
                 gpu_id: int | None, dtype: np.dtype[Any] | None, first: Any,
                 first_at: int | str | None, arrays: Sequence[Any]) -> None:
        self.args = args
        self.kwargs = kwargs
        self.device = device
        self.gpu_id = gpu_id
        self.dtype = dtype
        self.first = first
        self.first_at = first_at
        self.arrays = arrays


class _Converter:
    """Converts each array it is given; remembers the first one."""

    __slots__ = ("policy", "gpu_id", "host", "seen", "dtype", "first", "first_at", "device",
                 "arrays")

    def __init__(self, policy: Policy, gpu_id: int | None, host: bool) -> None:
        self.policy = policy
        self.gpu_id = gpu_id
        self.host = host
        self.seen = False
        self.dtype: np.dtype[Any] | None = None
        self.first: Any = None
        self.first_at: int | str | None = None
        self.device: Device | None = None
        self.arrays: list[Any] = []

    def value(self, v: Any, where: int | str | None) -> Any:
        """``v`` with every array in it converted (lists and tuples are walked)."""
        vfw = framework_of(v)
        if vfw is not None:
            return self.array(v, vfw, where)
        kind = type(v)
        if kind is list or kind is tuple:
            return kind(self.value(item, None) for item in v)
        return v

    def array(self, v: Any, vfw: Framework, where: int | str | None) -> Any:
        """One array converted and isolated; the first one fixes the dtype and the device."""
        first = not self.seen
        if first:
            self.seen = True
            self.dtype = _adapter(vfw).dtype_of(v)
        out = self.isolate(v, self.convert(v, vfw), vfw)
        if first:
            self.first, self.first_at = out, where
            self.device = self.policy.adapter.device_of(out)
            if self.gpu_id is None and self.device.is_gpu and not self.host:
                self.gpu_id = self.device.index  # every other array joins the first one
        self.arrays.append(out)
        return out

    def convert(self, v: Any, vfw: Framework) -> Any:
        """``v`` as the function's type, on the call's device."""
        policy = self.policy
        if vfw is policy.framework and self.gpu_id is None and not self.host:
            return v
        v = _fit_float(v, vfw, policy.adapter)
        gpu_id = None if self.host else self.gpu_id
        if gpu_id is None and policy.framework.gpu_only and not _adapter(vfw).device_of(v).is_gpu:
            current = getattr(policy.adapter, "current_device", None)  # the device context
            gpu_id = None if current is None else current()
        out = convert(v, policy.framework.name, gpu_id=gpu_id,
                      allow_cpu_roundtrip=policy.allow_cpu_roundtrip)
        if self.host and policy.adapter.device_of(out) != CPU:
            out = policy.adapter.to_device(out, CPU)
        return out

    def isolate(self, v: Any, out: Any, vfw: Framework) -> Any:
        """``out``, unless it is the caller's memory and the function could write to it."""
        policy = self.policy
        if policy.same_type is _unchanged or (
                out is not v and (policy.framework.immutable or not shares_memory(v, out))):
            return out
        private = policy.same_type(out)
        if vfw is not policy.framework and private is not out:
            _copied_before_release(policy.adapter, private)
        return private


def _copied_before_release(adapter: Adapter, private: Any) -> None:
    """Wait for the copy of another framework's GPU memory, made on this framework's stream.

    The caller's framework knows nothing of that stream: once the caller drops its array,
    its allocator may hand the memory out again (on its own stream) before the copy has
    read it. Waiting here closes that window; it costs one synchronisation per call that
    receives another framework's GPU array (host arrays need none).
    """
    device = adapter.device_of(private)
    if device.kind == "cuda":
        adapter.synchronize(device)


def _fit_float(v: Any, vfw: Framework, target: Adapter) -> Any:
    """A float64 (complex128) array narrowed for a framework that cannot hold it.

    Rounding to float32 is the documented price of running in JAX without x64 or in
    pyclesperanto; a value that would overflow to infinity is an error instead.
    """
    if not hasattr(target, "holds_dtype"):
        return v
    source: Any = _adapter(vfw)
    dtype = source.dtype_of(v)
    code = _NEAREST_FLOAT.get(dtype.str[1:])
    if code is None or holds_dtype(target, dtype) or not holds_dtype(target, np.dtype(code)):
        return v
    if not hasattr(source, "astype") or source.namespace() is None:
        return v
    xp = source.namespace()
    with np.errstate(over="ignore"):  # overflow is checked just below
        narrowed = source.astype(v, np.dtype(code))
    if bool(xp.any(xp.isinf(narrowed) & xp.isfinite(v))):
        raise MemoryConversionError(
            f"the function runs in {np.dtype(code)} here and some {dtype} values exceed "
            f"its range (they would become infinite). Scale the data first, or enable "
            "64-bit JAX with memtype.gpu.configure(jax_enable_x64=True).",
            vfw.name, "",
        )
    return narrowed


def _same_type(args: tuple[Any, ...], policy: Policy) -> Inputs | None:
    """The fast path: positional arguments only, every array already of the function's type."""
    fw = policy.framework
    new = list(args)
    first = -1
    for i, v in enumerate(args):
        vfw = _known.get(type(v))
        if vfw is None:
            if type(v) in _NOT_ARRAYS:
                continue
            return None
        if vfw is not fw:
            return None
        new[i] = policy.same_type(v)
        if first < 0:
            first = i
    if first < 0:
        return None
    image = new[first]
    adapter = policy.adapter
    arrays = [new[i] for i, v in enumerate(args) if _known.get(type(v)) is fw]
    return Inputs(tuple(new), {}, adapter.device_of(image), None, adapter.dtype_of(args[first]),
                  image, first, arrays)


def prepare(args: tuple[Any, ...], kwargs: dict[str, Any], policy: Policy,
            gpu_id: int | None, *, host: bool = False) -> Inputs:
    """Convert a call's array arguments.

    ``host=True`` puts every array on the host (the CPU fallback after out-of-memory).
    """
    if gpu_id is None and not host and not kwargs:
        if len(args) == 1 and _known.get(type(args[0])) is policy.framework:
            v = args[0]
            image = policy.same_type(v)
            adapter = policy.adapter
            return Inputs((image,), kwargs, adapter.device_of(image), None, adapter.dtype_of(v),
                          image, 0, (image,))
        fast = _same_type(args, policy)
        if fast is not None:
            return fast
    conv = _Converter(policy, gpu_id, host)
    new_args = tuple([conv.value(v, i) for i, v in enumerate(args)])
    new_kwargs = {key: conv.value(v, key) for key, v in kwargs.items()} if kwargs else kwargs
    device = conv.device
    if device is None:
        device = CPU if host else call_device(policy.framework, gpu_id)
    return Inputs(new_args, new_kwargs, device, None if host else gpu_id, conv.dtype, conv.first,
                  conv.first_at, conv.arrays)
