"""Stage 1 of a decorated call: its array arguments found, converted to the function's type,
isolated, and the checks made on them after the call.

Arrays are found at the top level and inside the containers
:mod:`memtype.decorators.containers` opens.
Isolation rule (O(1) everywhere but one case): an argument that reaches the function as
its caller's own memory (same type, or a zero-copy conversion)

* is passed as it is when the function's framework is immutable (JAX, TensorFlow; a
  ``tf.Variable`` becomes its value);
* else (a mutable framework: NumPy, torch...) is passed as it is, ordinary Python semantics,
  when the caller's data is mutable; with ``copy_inputs=True`` it is a private copy instead;
* is protected when the caller's data is immutable (a JAX array, a TensorFlow tensor, a
  read-only NumPy array): a read-only view where the function's framework has one (NumPy);
  else, where the framework counts writes (torch's version counter), the count is checked
  after the call and a write raises :class:`InputWriteError`; where it does not (CuPy),
  the function gets a private copy (the one O(n) case).

Writable aliases with a write count are also watched, so that out-of-memory recovery never
retries on an input the failed attempt modified (:func:`check_unwritten`). Whether a
converted input aliases its caller's memory is asked only where it changes what the function
gets (a read-only view, a private copy); for watched and guarded inputs it is asked after
the call, and only if the write count changed (addresses cost more than the call itself).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from memtype.conversion import convert, target_device
from memtype.decorators.containers import LEAVES, walk
from memtype.detect import KNOWN_TYPES, framework_of
from memtype.dtypes import entry_dtype
from memtype.errors import InputWriteError, MemoryConversionError
from memtype.frameworks import (
    CPU,
    Adapter,
    Device,
    DeviceAdapter,
    Framework,
    load_adapter,
    on_table_change,
)

__all__ = ["Inputs", "Policy", "Prepared", "prepare", "inputs_of", "arrays_in", "read_only",
           "check_guarded", "check_unwritten", "note_read_only"]

# type(x) -> framework, bound once: CPython 3.11 calls a method of an imported name (here
# KNOWN_TYPES.get) through a new bound-method object each time (about 0.35k instructions)
_known = KNOWN_TYPES.get

Aliased = Callable[[], bool] | None
"""Whether a converted input is its caller's memory, asked only once it has been written to
(``None``: it is the caller's own array)."""
Watched = tuple[Any, int, Aliased]
"""A caller's mutable array passed writable: ``(array, write count, aliased)``."""
Guarded = tuple[Any, int, str, Aliased]
"""An alias of immutable caller data: ``(array, write count, source type, aliased)``."""


def read_only(x: Any) -> bool:
    """Whether ``x`` is flagged read-only (a NumPy array with ``writeable=False``)."""
    flags = getattr(x, "flags", None)
    return flags is not None and getattr(flags, "writeable", True) is False


class Inputs(NamedTuple):
    """A call's arguments after conversion, and what the rest of the call needs to know.

    ``dtype`` is the caller's dtype of the first array (what ``PRESERVE_INPUT`` returns),
    ``first`` / ``first_at`` the converted first array and its position (an index or a
    keyword; ``None`` when it sits inside a container), ``arrays`` all converted arrays.
    ``watched``: :data:`Watched` (the caller's mutable arrays passed writable);
    ``guarded``: :data:`Guarded` (aliases of immutable caller data). Whether a converted
    array aliases its caller's is asked only after a write, when it matters. The common call
    makes none unless a check or recovery needs one (:data:`Prepared`).
    """

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    device: Device
    gpu_id: int | None
    dtype: np.dtype[Any] | None
    first: Any
    first_at: int | str | None
    arrays: Sequence[Any]
    watched: Sequence[Watched] = ()
    guarded: Sequence[Guarded] = ()


_NO_KWARGS: dict[str, Any] = {}  # shared by calls without keywords: never written to


def note_read_only(exc: BaseException, inputs: Inputs, name: str) -> None:
    """Add a note to a failed call's error when the function got read-only arrays (a
    function that writes its input, such as Cython code needing a writable buffer, fails
    on them): the way out is ``copy_inputs=True``. The error itself is not changed."""
    if any(read_only(a) for a in inputs.arrays):
        exc.add_note(
            f"memtype passed {name} read-only input(s): the caller's data is immutable (a JAX "
            "array, a TensorFlow tensor or a read-only NumPy array). If the function writes "
            "to its input, decorate it with copy_inputs=True to give it a writable copy.")


def check_guarded(inputs: Inputs, policy: Policy, name: str) -> None:
    """Raise :class:`InputWriteError` if the function wrote to immutable caller data."""
    write_count = policy.adapter.write_count  # guarded arrays are the function's type
    for array, count, source, aliased in inputs.guarded:
        if write_count(array) != count and (aliased is None or aliased()):
            raise InputWriteError(
                f"{name} wrote to an input that shares memory with its caller's {source} "
                f"array; {source} arrays are immutable, and that array's values have now "
                f"changed. Expected a function that does not write to its inputs; pass "
                f"copy_inputs=True to give {name} a private copy."
            )


def check_unwritten(inputs: Inputs, policy: Policy, error: BaseException, name: str) -> None:
    """Before an out-of-memory retry: raise :class:`InputWriteError` (from ``error``) if the
    failed attempt wrote to an input that is its caller's memory (the retry would see the
    modified values)."""
    check_guarded(inputs, policy, name)
    write_count = policy.adapter.write_count  # watched arrays are the function's type
    if any(write_count(array) != count and (aliased is None or aliased())
           for array, count, aliased in inputs.watched):
        raise InputWriteError(
            f"{name} ran out of memory ({type(error).__name__}) after writing to an input "
            "that is its caller's array, so a retry would not see the caller's original "
            f"values; memtype does not retry. Expected a function that leaves its inputs "
            f"unchanged, or pass copy_inputs=True (each retry then gets a fresh copy)."
        ) from error


def copied_before_release(adapter: Adapter, private: Any) -> None:
    """Wait for the copy of another framework's GPU memory, made on this framework's stream.

    The caller's framework knows nothing of that stream: once the caller drops its array,
    its allocator may hand the memory out again (on its own stream) before the copy has
    read it. Waiting here closes that window; it costs one synchronisation per call that
    receives another framework's GPU array (host arrays need none).
    """
    device = adapter.device_of(private)
    if device.is_gpu and isinstance(adapter, DeviceAdapter):
        adapter.synchronize(device)

_adapters: dict[str, Adapter] = {}
on_table_change(_adapters.clear)


def _adapter(fw: Framework) -> Adapter:
    """The framework's adapter (cached here: this is the per-call path)."""
    adapter = _adapters.get(fw.name)
    if adapter is None:
        adapter = _adapters[fw.name] = load_adapter(fw.name)
    return adapter


def arrays_in(value: Any) -> list[Any]:
    """The arrays in a result (itself, or inside the containers :func:`walk` opens)."""
    found: list[Any] = []

    def collect(v: Any) -> Any:
        if framework_of(v) is not None:
            found.append(v)
        return v

    walk(value, collect)
    return found


@dataclass(frozen=True, slots=True)
class Policy:
    """How a decorated function's inputs are converted (fixed at decoration)."""

    framework: Framework
    adapter: Adapter
    copy_inputs: bool = False
    allow_cpu_roundtrip: bool = False
    same_type: Callable[[Any], Any] = field(init=False)
    """An argument already of the function's type, isolated (see the module notes)."""
    isolates: bool = field(init=False)
    """Whether :attr:`same_type` is more than the argument itself."""
    readonly: Callable[[Any], Any] | None = field(init=False)
    """The framework's read-only view, if it has one."""
    passes_writable: bool = field(init=False)
    """Whether a caller's array of the function's type reaches it writable (watched)."""
    write_count: Callable[[Any], int | None] | None = field(init=False)
    """The adapter's ``write_count`` where the framework counts writes (torch), else None."""
    watch: Callable[[Any], int | None] | None = field(init=False)
    """:attr:`write_count` where a caller's array of the function's type is watched."""
    on_host: Callable[[Any], bool] | None = field(init=False)
    """The adapter's ``on_host``; None for a host-only framework (every array is)."""
    current_device: Callable[[], int] | None = field(init=False)
    """The framework's device context, if it has one (GPU-only types fed host data)."""
    gpu_only: bool = field(init=False)
    """Whether the framework has no host arrays."""
    restricts_dtypes: bool = field(init=False)
    """Whether the framework holds only some dtypes (``holds_dtype``)."""
    holds: Callable[[np.dtype[Any]], bool] = field(init=False)
    """The adapter's ``holds_dtype`` (every dtype where it has none)."""

    def __post_init__(self) -> None:
        adapter = self.adapter
        readonly = adapter.readonly_view if adapter.has_readonly_view else None
        isolate: Callable[[Any], Any] = _unchanged
        if self.copy_inputs and not adapter.immutable:
            isolate = adapter.copy
        elif adapter.immutable and readonly is not None:
            isolate = readonly  # a tf.Variable becomes its value
        object.__setattr__(self, "same_type", isolate)
        object.__setattr__(self, "isolates", isolate is not _unchanged)
        object.__setattr__(self, "readonly", readonly)
        object.__setattr__(self, "passes_writable", isolate is _unchanged
                           and not adapter.immutable)
        counter = adapter.write_count if adapter.counts_writes else None
        object.__setattr__(self, "write_count", counter)
        object.__setattr__(self, "watch", counter if isolate is _unchanged
                           and not adapter.immutable else None)
        device = adapter if isinstance(adapter, DeviceAdapter) else None  # host-only: None
        object.__setattr__(self, "on_host", None if device is None else device.on_host)
        object.__setattr__(self, "current_device", device.current_device
                           if device is not None and device.has_device_context else None)
        object.__setattr__(self, "gpu_only", self.framework.gpu_only)
        object.__setattr__(self, "restricts_dtypes", adapter.restricts_dtypes)
        object.__setattr__(self, "holds", adapter.holds_dtype)


def _unchanged(v: Any) -> Any:
    """``v`` itself."""
    return v


class _Converter:
    """Converts each array it is given; remembers the first one."""

    __slots__ = ("policy", "gpu_id", "host", "seen", "dtype", "first", "first_at", "device",
                 "arrays", "watched", "guarded")

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
        self.watched: list[Watched] = []
        self.guarded: list[Guarded] = []

    def value(self, v: Any, where: int | str | None) -> Any:
        """``v`` with every array in it converted (the containers of :mod:`.containers`)."""
        vfw = framework_of(v)
        if vfw is not None:
            return self.array(v, vfw, where)
        return walk(v, self.nested)

    def nested(self, v: Any) -> Any:
        """An item inside a container: converted if it is an array."""
        vfw = framework_of(v)
        return v if vfw is None else self.array(v, vfw, None)

    def array(self, v: Any, vfw: Framework, where: int | str | None) -> Any:
        """One array converted and isolated; the first one fixes the dtype and the device."""
        first = not self.seen
        dtype = None
        source = _adapter(vfw)
        if first:
            self.seen = True
            dtype = self.dtype = source.dtype_of(v)
        out = self.isolate(v, self.convert(v, vfw, source, dtype), vfw, source)
        if first:
            self.first, self.first_at = out, where
            on_host = self.policy.on_host  # None: a host-only framework
            self.device = CPU if on_host is None or on_host(out) \
                else self.policy.adapter.device_of(out)
            if self.gpu_id is None and self.device.is_gpu and not self.host:
                self.gpu_id = self.device.index  # every other array joins the first one
        self.arrays.append(out)
        return out

    def convert(self, v: Any, vfw: Framework, source: Adapter,
                dtype: np.dtype[Any] | None = None) -> Any:
        """``v`` (of ``vfw``, whose adapter is ``source``) as the function's type, on the call's
        device (``dtype``: ``v``'s, if known)."""
        policy = self.policy
        if vfw is policy.framework and self.gpu_id is None and not self.host:
            return v
        if policy.restricts_dtypes:
            v = _fit_float(v, vfw, source, policy.holds, dtype)
        gpu_id = None if self.host else self.gpu_id
        if gpu_id is None and policy.gpu_only and not source.device_of(v).is_gpu:
            current = policy.current_device  # the device context
            gpu_id = None if current is None else current()
        out = convert(v, policy.framework.name, gpu_id=gpu_id,
                      allow_cpu_roundtrip=policy.allow_cpu_roundtrip)
        target = policy.adapter
        if self.host and isinstance(target, DeviceAdapter) and target.device_of(out) != CPU:
            out = target.to_device(out, CPU)
        return out

    def isolate(self, v: Any, out: Any, vfw: Framework, source: Adapter) -> Any:
        """``out`` as the function may see it, when it is the caller's memory (module notes).

        Whether ``out`` aliases ``v`` is asked only where the answer changes what the
        function gets; where it only matters after a write (watched and guarded arrays), it
        is asked after the call, and only if the write count changed.
        """
        policy = self.policy
        if policy.adapter.immutable:  # a tf.Variable becomes its value
            return out if out is not v or policy.readonly is None else policy.readonly(out)
        locked = source.immutable or read_only(v)
        if policy.copy_inputs:
            return self.private(v, out, vfw)
        counter = policy.write_count
        if not locked:  # the caller's mutable data, passed as it is
            if counter is None:  # nothing counts writes: nothing to watch
                return out
            aliased = self.alias_check(v, out, vfw)  # before the adapter's count: read top-down
            count = counter(out)
            if count is not None:
                self.watched.append((out, count, aliased))
            return out
        if policy.readonly is not None:  # O(1): immutable data never becomes writable
            if out is v or (not read_only(out) and _aliases(v, vfw, out, policy)):
                return policy.readonly(out)
            return out
        if counter is not None:  # guarded where the framework counts writes
            aliased = self.alias_check(v, out, vfw)
            count = counter(out)
            if count is not None:
                self.guarded.append((out, count, vfw.name, aliased))
                return out
        return self.private(v, out, vfw)

    def alias_check(self, v: Any, out: Any, vfw: Framework) -> Callable[[], bool] | None:
        """Whether ``out`` is the caller's memory, asked later (``None``: it is ``v``)."""
        if out is v:
            return None
        policy = self.policy
        return lambda: _aliases(v, vfw, out, policy)

    def private(self, v: Any, out: Any, vfw: Framework) -> Any:
        """``out``, or a private copy of it where it is the caller's memory."""
        policy = self.policy
        if out is not v and not _aliases(v, vfw, out, policy):
            return out  # already a fresh array
        private = policy.adapter.copy(out)
        if vfw is not policy.framework and private is not out:
            copied_before_release(policy.adapter, private)
        return private


def _aliases(v: Any, vfw: Framework, out: Any, policy: Policy) -> bool:
    """:func:`memtype.shares_memory` for a converted argument (both frameworks known)."""
    source = _adapter(vfw)
    address = policy.adapter.data_ptr(out)
    return (address is not None and address == source.data_ptr(v)
            and source.device_of(v) == policy.adapter.device_of(out))


def _fit_float(v: Any, vfw: Framework, source: Adapter,
               holds: Callable[[np.dtype[Any]], bool], dtype: np.dtype[Any] | None = None) -> Any:
    """A float64 (complex128) array narrowed for a framework that cannot hold it (one whose
    adapter has ``holds_dtype``, given as ``holds``: asked per call, JAX's x64 can change).

    Rounding to float32 is the documented price of running in JAX without x64 or in
    pyclesperanto; a value that would overflow to infinity is an error instead.
    """
    if dtype is None:
        dtype = source.dtype_of(v)
    kin = entry_dtype(dtype, holds)  # the one rule, shared with the pipeline's planner
    if kin == dtype:
        return v
    xp = source.namespace()
    if not source.casts_on_device or xp is None:
        return v
    with np.errstate(over="ignore"):  # overflow is checked just below
        narrowed = source.astype(v, kin)
    if bool(xp.any(xp.isinf(narrowed) & xp.isfinite(v))):
        raise MemoryConversionError(
            f"the function runs in {kin} here and some {dtype} values exceed "
            f"its range (they would become infinite). Scale the data first, or enable "
            "64-bit JAX with memtype.gpu.configure(jax_enable_x64=True).",
            vfw.name, "",
        )
    return narrowed


def _passed(v: Any, policy: Policy, watched: list[Watched]) -> Any:
    """A caller's array of the function's type, as the function gets it (watched if writable)."""
    image = policy.same_type(v)
    if policy.passes_writable and policy.write_count is not None:
        count = policy.write_count(v)
        if count is not None:
            watched.append((v, count, None))
    return image


def _same_type(args: tuple[Any, ...], policy: Policy) -> Inputs | None:
    """The fast path: positional arguments only, every array already of the function's type."""
    fw = policy.framework
    new = list(args)
    first = -1
    watched: list[Watched] = []
    for i, v in enumerate(args):
        vfw = _known(type(v))
        if vfw is None:
            if type(v) in LEAVES:
                continue
            return None
        if vfw is not fw:
            return None
        new[i] = _passed(v, policy, watched)
        if first < 0:
            first = i
    if first < 0:
        return None
    image = new[first]
    adapter = policy.adapter
    arrays = [new[i] for i, v in enumerate(args) if _known(type(v)) is fw]
    on_host = policy.on_host  # None: a host-only framework
    device = CPU if on_host is None or on_host(image) else adapter.device_of(image)
    return Inputs(tuple(new), _NO_KWARGS, device, None,
                  adapter.dtype_of(args[first]), image, first, arrays, watched)


Prepared = tuple[tuple[Any, ...], dict[str, Any], Device, int | None, np.dtype[Any] | None,
                 "Inputs | int | None"]
"""A call after stage 1, as the call reads it: ``(args, kwargs, device, gpu_id, dtype, checks)``
(:class:`Inputs`' first five fields) and ``checks``: the call's :class:`Inputs`, or for the
common call (one array of the function's type: no object is made per call) the write count of
that array (None: none); :func:`inputs_of` makes the Inputs where a check or recovery needs
it."""


def prepare(args: tuple[Any, ...], kwargs: dict[str, Any], policy: Policy,
            gpu_id: int | None, host: bool = False) -> Prepared:
    """Convert a call's array arguments.

    ``host=True`` puts every array on the host (the CPU fallback after out-of-memory).
    """
    single = _known(type(args[0])) if len(args) == 1 and not kwargs else None
    if gpu_id is None and not host and not kwargs:
        if single is policy.framework:  # the common call: one array of the function's type
            v = args[0]
            counter, on_host, adapter = policy.watch, policy.on_host, policy.adapter
            return (args if not policy.isolates else (policy.same_type(v),), _NO_KWARGS,
                    CPU if on_host is None or on_host(v) else adapter.device_of(v), None,
                    adapter.dtype_of(v), None if counter is None else counter(v))
        fast = None if single is not None else _same_type(args, policy)
        if fast is not None:
            return fast.args, fast.kwargs, fast.device, fast.gpu_id, fast.dtype, fast
    inputs = _converted(args, kwargs, policy, gpu_id, host, single)
    return inputs.args, inputs.kwargs, inputs.device, inputs.gpu_id, inputs.dtype, inputs


def _converted(args: tuple[Any, ...], kwargs: dict[str, Any], policy: Policy,
               gpu_id: int | None, host: bool, single: Framework | None) -> Inputs:
    """The inputs of a call with arrays to convert (or to put on a device)."""
    conv = _Converter(policy, gpu_id, host)
    if single is not None:  # one array of another type (or on another device)
        image = conv.array(args[0], single, 0)
        assert conv.device is not None
        return Inputs((image,), kwargs, conv.device, None if host else gpu_id, conv.dtype,
                      image, 0, conv.arrays, conv.watched, conv.guarded)
    new_args = tuple([conv.value(v, i) for i, v in enumerate(args)])
    new_kwargs = {key: conv.value(v, key) for key, v in kwargs.items()} if kwargs else kwargs
    device = conv.device
    if device is None:
        device = CPU if host else target_device(policy.framework, CPU, gpu_id)
    return Inputs(new_args, new_kwargs, device, None if host else gpu_id, conv.dtype, conv.first,
                  conv.first_at, conv.arrays, conv.watched, conv.guarded)


def inputs_of(call: Prepared, args: tuple[Any, ...]) -> Inputs:
    """The :class:`Inputs` of a prepared call (``args``: the caller's arguments)."""
    checks = call[5]
    if isinstance(checks, Inputs):
        return checks
    image = call[0][0]  # the common call: one array, passed as ``image``
    watched: Sequence[Watched] = () if checks is None else ((args[0], checks, None),)
    return Inputs((image,), _NO_KWARGS, call[2], None, call[4], image, 0, (image,), watched)
