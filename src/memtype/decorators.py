"""Memory type decorators: ``memory_types`` and one decorator per row of the framework table.

``@mt.torch`` declares that a function takes and returns torch arrays. On each call its
array arguments (also inside lists and tuples) are converted to the input type on the
call's device, the function runs (on this thread's device stream for device calls), the result
is checked against the contract (default: a 3D ``[Z, Y, X]`` image; for a tuple, its first
element), brought to the requested dtype by the dtype policy (:mod:`memtype.dtypes`) and
returned as the output type. Inputs already of the function's type, or reaching it
zero-copy, cost O(1): see :mod:`memtype._arguments` for what is passed, viewed read-only,
guarded or copied. Decorating imports no framework: that happens at the first call.

Call-time options, added to the function's signature as keyword-only parameters:
``dtype_conversion``, ``scaling``, ``slice_by_slice``, ``gpu_id``, ``oom_fallback``,
``oom_recovery``; each can also be given at decoration, as the function's default. An
option name the function declares itself is passed on to it as well.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

from memtype._arguments import (
    Inputs,
    Policy,
    arrays_in,
    check_guarded,
    check_unwritten,
    note_read_only,
    prepare,
)
from memtype._calls import (
    DEFAULT_OPTIONS,
    CallOptions,
    OomFallback,
    declared_names,
    decoration_defaults,
    read_options,
    rebound,
    signature_with_options,
    unbound,
)
from memtype._recovery import Recovery
from memtype._results import Contract, Results, contract_ndims
from memtype._slicing import run_by_slice
from memtype.dtypes import Scaling
from memtype.errors import (
    ArgumentTypeError,
    UnknownMemoryTypeError,
)
from memtype.frameworks import (
    CPU,
    Framework,
    get_framework,
    is_registered,
    iter_frameworks,
    load_adapter,
)
from memtype.gpu.oom import is_oom_error, recover
from memtype.gpu.streams import thread_stream
from memtype.types import DtypeConversion, MemoryType, MemoryTypeLike

__all__ = ["memory_types", "MemoryTypeFunction", "Contract"]

class MemoryTypeFunction(Results, Recovery):
    """A function wrapped by a memory type decorator (picklable, usable as a method).

    Attributes
    ----------
    input_memory_type, output_memory_type : MemoryType
        The declared types (for a :meth:`computing` variant, ``output_memory_type`` is
        the type its result has: the input type, where the function computes).
    keeps_result : bool
        Whether this is a :meth:`computing` variant (its result is not converted to the
        declared output type).
    __wrapped__ : callable
        The undecorated function.
    """

    def __init__(self, func: Callable[..., Any], input_type: Framework, output_type: Framework,
                 contract: Contract = None, copy_inputs: bool = False,
                 allow_cpu_roundtrip: bool = False,
                 defaults: CallOptions = DEFAULT_OPTIONS) -> None:
        func, self._binding = unbound(func)
        functools.update_wrapper(self, func)
        self.__qualname__ = str(getattr(func, "__qualname__", func)).removesuffix(_THROUGH)
        self.input_memory_type = MemoryType(input_type.name)
        self.output_memory_type = MemoryType(output_type.name)
        self.__signature__ = signature_with_options(func, defaults)
        self._func = func
        self._in, self._out = input_type, output_type
        self._settings = (contract, copy_inputs, allow_cpu_roundtrip, defaults, self._binding)
        self._allow_roundtrip = allow_cpu_roundtrip
        self._contract = contract
        self._ndims = contract_ndims(contract)
        self._defaults = defaults
        self._forward = declared_names(func)
        self._name = self.__qualname__
        self._policy: Policy | None = None  # frameworks load at the first call
        self._out_adapter: Any = None
        self.keeps_result = False
        self._declared = self  # the decorated function a computing() variant was made from
        self._computing: MemoryTypeFunction | None = None
        self._returns: dict[str, MemoryTypeFunction] = {}

    def computing(self) -> MemoryTypeFunction:
        """This function with its result left in the framework it was computed in.

        Everything else of the call is unchanged: input conversion, call-time options, the
        contract, out-of-memory recovery, streams and the dtype policy (applied in that
        framework); only the final conversion to the declared output type is left out.

        Returns
        -------
        MemoryTypeFunction
            The variant (made once, the same object on every call): same
            ``input_memory_type``, ``output_memory_type`` equal to it (a body that returns
            another framework's array returns that array), ``keeps_result`` true. It binds
            as a method like the original, and pickles as ``original.computing()``.

        Examples
        --------
        >>> import numpy as np, memtype as mt
        >>> @mt.torch(output_type="numpy")
        ... def double(x):
        ...     return x * 2
        >>> type(double.computing()(np.ones((1, 1, 1), np.float32))).__name__
        'Tensor'
        """
        if self.keeps_result:
            return self
        made = self._computing
        if made is None:
            made = self._variant(self._in)
            made.keeps_result, made._declared = True, self
            made.output_memory_type = made.input_memory_type
            self._computing = made
        return made

    def _variant(self, output_type: Framework) -> MemoryTypeFunction:
        """The same function and settings, declared to return ``output_type``."""
        contract, copy_inputs, roundtrip, defaults, binding = self._settings
        return MemoryTypeFunction(rebound(self._func, binding), self._in, output_type,
                                  contract, copy_inputs, roundtrip, defaults)

    def _returning(self, fw: Framework) -> MemoryTypeFunction:
        """A computing variant's result in ``fw`` (another framework than its input type):
        the same function declared to return ``fw`` (made once per framework)."""
        made = self._returns.get(fw.name)
        if made is None:
            made = self._variant(fw)
            made._load()
            self._returns[fw.name] = made
        return made

    # -- the call -----------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        opts = read_options(kwargs, self._forward, self._defaults) if kwargs else self._defaults
        policy = self._policy or self._load()
        inputs = prepare(args, kwargs, policy, opts.gpu_id)
        device = inputs.device
        try:
            if (device is CPU or not device.is_gpu) and not opts.slice_by_slice:
                result = self._func(*inputs.args, **inputs.kwargs)  # host: no stream to set
            else:
                result = self._invoke(inputs, opts.slice_by_slice)
        except Exception as exc:  # only out-of-memory errors go on, outside this block
            if not (opts.oom_recovery and is_oom_error(exc)):
                note_read_only(exc, inputs, self._name)
                raise
            error: BaseException = exc
        else:
            if inputs.guarded:
                check_guarded(inputs, self._name)
            if type(result) is tuple:
                return self._finish(result, inputs, opts)
            return self._output(result, inputs, opts)
        check_unwritten(inputs, error, self._name)
        stages = self._recovery_stages(args, kwargs, opts, inputs)
        del inputs  # each stage converts the caller's arguments again (see _stage)
        used, result = recover(error, stages, self._name)
        return self._finish(result, used, opts)

    def _load(self) -> Policy:
        """Load the frameworks (first call)."""
        copy_inputs, roundtrip = self._settings[1:3]
        self._out_adapter = load_adapter(self._out.name)
        self._policy = Policy(self._in, load_adapter(self._in.name), copy_inputs, roundtrip)
        return self._policy

    def _invoke(self, inputs: Inputs, by_slice: bool) -> Any:
        """Run the function (or its slices) on the call's device and stream (any accelerator
        kind: the adapter's ``stream``, with the hand-off where it has stream functions)."""
        if not inputs.device.is_gpu:
            if by_slice:
                return run_by_slice(self._func, inputs, self._name)
            return self._func(*inputs.args, **inputs.kwargs)
        with thread_stream(self._in.name, inputs.device.index) as handoff:
            handoff.adopt(inputs.arrays)
            if by_slice:
                result = run_by_slice(self._func, inputs, self._name)
            else:
                result = self._func(*inputs.args, **inputs.kwargs)
            handoff.release(arrays_in(result))
        return result

    # -- Python protocols ---------------------------------------------------------------

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if self._binding == "static":
            return self
        if self._binding == "class":
            return types.MethodType(self, objtype if objtype is not None else type(obj))
        return self if obj is None else types.MethodType(self, obj)

    def __repr__(self) -> str:
        kept = ", result kept where computed" if self.keeps_result else ""
        return (f"<memtype function {self._name} ({self.input_memory_type.value} -> "
                f"{self.output_memory_type.value}{kept})>")

    def __reduce__(self) -> str | tuple[Any, ...]:
        if self.keeps_result:
            return (_computing_of, (self._declared,))
        qualname = str(getattr(self, "__qualname__", ""))
        owner: Any = sys.modules.get(self.__module__)
        for part in qualname.split("."):
            owner = getattr(owner, part, None)
        if owner is self and self.__module__ != "__main__":
            return qualname  # pickled by reference, like a function
        if owner is self:  # __main__: by value for cloudpickle (dask), through us for pickle
            self._func.__qualname__ = f"{qualname}{_THROUGH}"
        return (_rebuild, (self._func, self._in.name, self._out.name, *self._settings))


_THROUGH = ".__wrapped__"


def _rebuild(func: Callable[..., Any], input_type: str, output_type: str, contract: Contract,
             copy_inputs: bool, allow_cpu_roundtrip: bool, defaults: CallOptions,
             binding: str) -> MemoryTypeFunction:
    """Unpickle a decorated function that is not reachable by its name."""
    return MemoryTypeFunction(rebound(func, binding), get_framework(input_type),
                              get_framework(output_type), contract, copy_inputs,
                              allow_cpu_roundtrip, defaults)


def _computing_of(declared: MemoryTypeFunction) -> MemoryTypeFunction:
    """Unpickle a :meth:`MemoryTypeFunction.computing` variant."""
    return declared.computing()


def _named_framework(parameter: str, value: MemoryTypeLike) -> Framework:
    """The table row for ``value``; an unknown name's error names the parameter."""
    try:
        return get_framework(value)
    except UnknownMemoryTypeError as exc:
        raise UnknownMemoryTypeError(f"{parameter}: {exc}") from None


def memory_types(input_type: MemoryTypeLike, output_type: MemoryTypeLike,
                 contract: Contract = None, *, oom_recovery: bool = True,
                 copy_inputs: bool = False, allow_cpu_roundtrip: bool = False,
                 dtype_conversion: DtypeConversion | str = DtypeConversion.PRESERVE_INPUT,
                 scaling: Scaling = "clip", slice_by_slice: bool = False,
                 gpu_id: int | None = None, oom_fallback: OomFallback = None,
                 ) -> Callable[[Callable[..., Any]], MemoryTypeFunction]:
    """Declare a function's input and output memory types.

    Parameters
    ----------
    input_type, output_type : MemoryType or str
        The types the function takes and returns. An unknown name fails here, at
        decoration.
    contract : None, int, tuple of int, "any" or callable
        What the result (a tuple's first element) must be: ``None`` a 3D ``[Z, Y, X]``
        array; ints the allowed dimensions; ``"any"`` anything; a callable a predicate.
    oom_recovery : bool
        On out-of-memory: free every loaded framework's cache and retry, then retry
        slice by slice (then on the CPU with ``oom_fallback="cpu"``).
    copy_inputs : bool
        ``False`` (the default): an input that is its caller's mutable array (NumPy, torch,
        CuPy, pyclesperanto; of the function's type or reaching it zero-copy) is passed as
        it is, ordinary Python semantics, O(1). ``True``: such inputs are private copies
        (one copy each). Immutable data (JAX, TensorFlow, a read-only NumPy array) is never
        writable in another framework by default: a read-only view for NumPy, guarded or
        copied elsewhere (see docs/decorators.md).
    allow_cpu_roundtrip : bool
        Allow GPU -> GPU conversions that go through host memory.
    dtype_conversion, scaling, slice_by_slice, gpu_id, oom_fallback
        The call-time options' defaults for this function (``oom_recovery`` too); a value
        passed at call time overrides them. Invalid values fail here, at decoration.

    Returns
    -------
    callable
        A decorator turning a function into a :class:`MemoryTypeFunction`.

    Raises
    ------
    UnknownMemoryTypeError
        A type name that is not in the framework table (the message names the parameter).
    CallOptionError
        An invalid option value.
    ArgumentTypeError
        (from the decorator) Not a callable, or a generator or async function.

    Examples
    --------
    >>> import numpy as np, memtype as mt
    >>> @mt.memory_types(input_type="numpy", output_type="numpy")
    ... def double(image):
    ...     return image * 2
    >>> double(np.ones((1, 2, 2), np.uint8)).tolist()
    [[[2, 2], [2, 2]]]
    """
    in_fw = _named_framework("input_type", input_type)
    out_fw = _named_framework("output_type", output_type)
    contract_ndims(contract)
    defaults = decoration_defaults(
        dtype_conversion=dtype_conversion, scaling=scaling, slice_by_slice=slice_by_slice,
        gpu_id=gpu_id, oom_fallback=oom_fallback, oom_recovery=oom_recovery)

    def decorate(func: Callable[..., Any]) -> MemoryTypeFunction:
        return MemoryTypeFunction(func, in_fw, out_fw, contract, copy_inputs,
                                  allow_cpu_roundtrip, defaults)

    return decorate


def _type_decorator(name: str) -> Callable[..., Any]:
    """The decorator named after one memory type (``numpy``, ``torch``...)."""

    def decorator(func: Callable[..., Any] | None = None, *, input_type: MemoryTypeLike = name,
                  output_type: MemoryTypeLike = name, contract: Contract = None,
                  **options: Any) -> Any:
        unknown = sorted(set(options) - {p.name for p in params})
        if unknown:
            raise ArgumentTypeError(
                f"mt.{name}() got unknown option(s) {', '.join(unknown)}; expected any of "
                f"input_type, output_type, contract, {', '.join(p.name for p in params)}."
            )
        make = memory_types(input_type, output_type, contract, **options)
        return make if func is None else make(func)

    params = [p for p in inspect.signature(memory_types).parameters.values()
              if p.name not in ("input_type", "output_type", "contract")]
    decorator.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
        inspect.Parameter("func", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None),
        inspect.Parameter("input_type", inspect.Parameter.KEYWORD_ONLY, default=name),
        inspect.Parameter("output_type", inspect.Parameter.KEYWORD_ONLY, default=name),
        inspect.Parameter("contract", inspect.Parameter.KEYWORD_ONLY, default=None),
        *params,
    ])
    decorator.__name__ = decorator.__qualname__ = name
    decorator.__module__ = __name__
    decorator.__doc__ = (
        f"Declare a {name} function: ``@{name}`` or ``@{name}(input_type=..., "
        f"output_type=..., contract=None, copy_inputs=False, slice_by_slice=..., ...)``.\n\n"
        f"Both types default to ``{name!r}``; see :func:`memory_types` for the parameters "
        "(the call-time options given here become the function's defaults)."
    )
    return decorator


for _fw in iter_frameworks():  # one decorator per table row: numpy, cupy, torch, ...
    globals()[_fw.name] = _type_decorator(_fw.name)
    __all__.append(_fw.name)
del _fw


def __getattr__(name: str) -> Callable[..., Any]:
    """Decorators for frameworks registered after import (``register_framework``)."""
    if is_registered(name):
        decorator = _type_decorator(name)
        globals()[name] = decorator
        return decorator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
