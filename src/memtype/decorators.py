"""Memory type decorators: ``memory_types`` and one decorator per row of the framework table.

``@mt.torch`` declares that a function takes and returns torch arrays. On each call its
array arguments (also inside lists and tuples) are converted to the input type on the
call's device, the function runs (on this thread's CUDA stream for GPU calls), the result
is checked against the contract (default: a 3D ``[Z, Y, X]`` image; for a tuple, its first
element), brought to the requested dtype by the dtype policy (:mod:`memtype.dtypes`) and
returned as the output type. The function never gets a writable alias of its caller's
array (see :mod:`memtype._arguments`). Decorating imports no framework: that happens at
the first call.

Call-time options, added to the function's signature as keyword-only parameters:
``dtype_conversion``, ``scaling``, ``slice_by_slice``, ``gpu_id``, ``oom_fallback``.
An option name the function declares itself is passed on to it as well.
"""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable
from typing import Any, Literal

from memtype._arguments import Inputs, Policy, _known, arrays_in, framework_of, prepare
from memtype._calls import (
    DEFAULT_OPTIONS,
    CallOptions,
    declared_names,
    read_options,
    signature_with_options,
)
from memtype._slicing import can_slice, run_by_slice
from memtype.convert import convert
from memtype.dtypes import cast, holds_dtype, nearest_held_dtype, result_dtype
from memtype.errors import ArgumentTypeError, CallOptionError, ContractError
from memtype.frameworks import (
    Framework,
    get_framework,
    is_registered,
    iter_frameworks,
    load_adapter,
)
from memtype.gpu.oom import is_oom_error, recover
from memtype.gpu.streams import thread_stream
from memtype.types import MemoryType, MemoryTypeLike

__all__ = ["memory_types", "MemoryTypeFunction", "Contract"]

Contract = int | tuple[int, ...] | Literal["any"] | Callable[[Any], bool] | None
"""``None``: a 3D image; an int or ints: allowed dimensions; ``"any"``: unchecked;
a callable: ``contract(image) -> bool``."""


def _contract_ndims(contract: Contract) -> tuple[int, ...] | None:
    """The allowed dimensions, ``None`` when the contract is not about dimensions."""
    if contract is None:
        return (3,)
    if isinstance(contract, int) and not isinstance(contract, bool):
        return (contract,)
    if isinstance(contract, tuple) and contract and all(
            isinstance(n, int) and not isinstance(n, bool) for n in contract):
        return contract
    if contract == "any" or (callable(contract) and not isinstance(contract, bool)):
        return None
    raise CallOptionError(
        "contract must be None (a 3D [Z, Y, X] image), an int or tuple of ints (allowed "
        f"dimensions), 'any', or a callable returning a bool; received {contract!r}."
    )


class MemoryTypeFunction:
    """A function wrapped by a memory type decorator (picklable, usable as a method).

    Attributes
    ----------
    input_memory_type, output_memory_type : MemoryType
        The declared types.
    __wrapped__ : callable
        The undecorated function.
    """

    def __init__(self, func: Callable[..., Any], input_type: Framework, output_type: Framework,
                 contract: Contract = None, oom_recovery: bool = True,
                 copy_inputs: bool = True, allow_cpu_roundtrip: bool = False) -> None:
        if not callable(func):
            raise ArgumentTypeError(f"A memory type decorator needs a callable; received {func!r}.")
        functools.update_wrapper(self, func)
        self.__qualname__ = str(getattr(func, "__qualname__", func)).removesuffix(_THROUGH)
        self.input_memory_type = MemoryType(input_type.name)
        self.output_memory_type = MemoryType(output_type.name)
        self.__signature__ = signature_with_options(func)
        self._func = func
        self._in, self._out = input_type, output_type
        self._settings = (contract, oom_recovery, copy_inputs, allow_cpu_roundtrip)
        self._contract = contract
        self._ndims = _contract_ndims(contract)
        self._oom_recovery = oom_recovery
        self._forward = declared_names(func)
        self._name = self.__qualname__
        self._policy: Policy | None = None  # frameworks load at the first call
        self._out_adapter: Any = None

    # -- the call -----------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        opts = read_options(kwargs, self._forward) if kwargs else DEFAULT_OPTIONS
        policy = self._policy or self._load()
        inputs = prepare(args, kwargs, policy, opts.gpu_id)
        try:
            if inputs.device.kind != "cuda" and not opts.slice_by_slice:
                result = self._func(*inputs.args, **inputs.kwargs)  # host: no stream to set
            else:
                result = self._invoke(inputs, opts.slice_by_slice)
        except Exception as exc:  # only out-of-memory errors go on, outside this block
            if not (self._oom_recovery and is_oom_error(exc)):
                raise
            error: BaseException = exc
        else:
            if type(result) is tuple:
                return self._finish(result, inputs, opts)
            return self._output(result, inputs, opts)
        stages = self._recovery_stages(inputs, opts, args, kwargs)
        used, result = recover(error, stages, self._name)
        return self._finish(result, used, opts)

    def _load(self) -> Policy:
        """Load the frameworks (first call)."""
        copy_inputs, roundtrip = self._settings[2:]
        self._out_adapter = load_adapter(self._out.name)
        self._policy = Policy(self._in, load_adapter(self._in.name), copy_inputs, roundtrip)
        return self._policy

    def _invoke(self, inputs: Inputs, by_slice: bool) -> Any:
        """Run the function (or its slices) on the call's device and stream."""
        if inputs.device.kind != "cuda":
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

    def _recovery_stages(self, inputs: Inputs, opts: CallOptions, args: tuple[Any, ...],
                         kwargs: dict[str, Any]) -> list[tuple[str, Callable[[], Any]]]:
        """Retry, slice by slice, then (if asked for) on the CPU."""
        stages: list[tuple[str, Callable[[], Any]]] = [
            ("retry", lambda: (inputs, self._invoke(inputs, opts.slice_by_slice)))]
        if not opts.slice_by_slice and can_slice(inputs):
            stages.append(("slice by slice", lambda: (inputs, self._invoke(inputs, True))))
        if opts.oom_fallback == "cpu" and inputs.device.is_gpu:
            stages.append(("on the CPU", lambda: self._on_cpu(args, kwargs, opts)))
        return stages

    def _on_cpu(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                opts: CallOptions) -> tuple[Inputs, Any]:
        """The call again with every array on the host."""
        if "cpu" not in self._in.device_kinds:
            raise CallOptionError(
                f"oom_fallback='cpu': {self._name} runs in {self._in.name}, which has no host "
                "arrays; expected a framework with a CPU device (numpy, torch, jax, tensorflow)."
            )
        assert self._policy is not None
        host = prepare(args, kwargs, self._policy, None, host=True)
        return host, self._invoke(host, opts.slice_by_slice)

    # -- the result ---------------------------------------------------------------------

    def _finish(self, result: Any, inputs: Inputs, opts: CallOptions) -> Any:
        """Contract, dtype policy and output type; tuple results: the first element."""
        if type(result) is tuple:
            if not result:
                raise ContractError(
                    f"{self._name} returned an empty tuple; expected the image first.")
            return (self._output(result[0], inputs, opts), *result[1:])
        return self._output(result, inputs, opts)

    def _output(self, image: Any, inputs: Inputs, opts: CallOptions) -> Any:
        """One image through the contract, the dtype policy and the output conversion."""
        fw = _known.get(type(image)) or framework_of(image)
        if fw is self._out and self._ndims is not None:  # the common case, kept short
            if len(self._out_adapter.shape_of(image)) not in self._ndims:
                self._check(image, fw)
            if opts is DEFAULT_OPTIONS and self._out_adapter.dtype_of(image) == inputs.dtype:
                return image
        else:
            self._check(image, fw)
        if fw is None:
            return image
        target = result_dtype(opts.dtype_conversion, inputs.dtype)
        if fw is self._out and opts.gpu_id is None:
            if target is None or self._out_adapter.dtype_of(image) == target:
                return image
        return self._convert_out(image, fw, target, opts, inputs.gpu_id)

    def _convert_out(self, image: Any, fw: Framework, target: Any, opts: CallOptions,
                     gpu_id: int | None) -> Any:
        """The dtype policy in the result's framework where it can hold the dtype, else after."""
        adapter = load_adapter(fw.name)
        done = target is None or adapter.dtype_of(image) == target
        if not done and holds_dtype(adapter, target):
            image, done = cast(image, target, scaling=opts.scaling), True
        allow = self._settings[3]
        image = convert(image, self._out.name, gpu_id=gpu_id, allow_cpu_roundtrip=allow)
        if not done:
            held = nearest_held_dtype(self._out_adapter, target)
            image = cast(image, held, scaling=opts.scaling)
        return image

    def _check(self, image: Any, fw: Framework | None) -> None:
        """The output contract (a clear error naming the function and the shape)."""
        contract = self._contract
        if self._ndims is None:
            if contract != "any" and callable(contract) and not contract(image):
                raise ContractError(
                    f"{self._name} returned a result that its contract {contract!r} rejects: "
                    f"{_describe(image, fw)}."
                )
            return
        if fw is None:
            raise ContractError(
                f"{self._name} must return an array (its image) of {self._dims()}; it returned "
                f"{_describe(image, fw)}. Declare contract='any' to return other objects."
            )
        shape = (self._out_adapter if fw is self._out else load_adapter(fw.name)).shape_of(image)
        if len(shape) not in self._ndims:
            raise ContractError(
                f"{self._name} must return {self._dims()}; it returned shape {tuple(shape)}. "
                "Return image[None] for a single 2D slice, or declare contract=2 (or 'any')."
            )

    def _dims(self) -> str:
        """The contract's dimensions in words."""
        if self._ndims == (3,):
            return "a 3D [Z, Y, X] array"
        return f"an array with {' or '.join(map(str, self._ndims or ()))} dimensions"

    # -- Python protocols ---------------------------------------------------------------

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        return self if obj is None else types.MethodType(self, obj)

    def __repr__(self) -> str:
        return (f"<memtype function {self._name} ({self.input_memory_type.value} -> "
                f"{self.output_memory_type.value})>")

    def __reduce__(self) -> str | tuple[Any, ...]:
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


def _describe(value: Any, fw: Framework | None) -> str:
    """A short description of a result for error messages."""
    if fw is None:
        return f"an object of type {type(value).__module__}.{type(value).__qualname__}"
    return f"a {fw.name} array of shape {tuple(load_adapter(fw.name).shape_of(value))}"


def _rebuild(func: Callable[..., Any], input_type: str, output_type: str, contract: Contract,
             oom_recovery: bool, copy_inputs: bool, allow_cpu_roundtrip: bool
             ) -> MemoryTypeFunction:
    """Unpickle a decorated function that is not reachable by its name."""
    return MemoryTypeFunction(func, get_framework(input_type), get_framework(output_type),
                              contract, oom_recovery, copy_inputs, allow_cpu_roundtrip)


def memory_types(input_type: MemoryTypeLike, output_type: MemoryTypeLike,
                 contract: Contract = None, *, oom_recovery: bool = True,
                 copy_inputs: bool = True, allow_cpu_roundtrip: bool = False
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
        Give the function private copies of arrays it could otherwise write to in the
        caller's memory (torch, CuPy, pyclesperanto). ``False`` promises that the function
        does not write to its inputs and saves those copies; NumPy inputs are read-only
        views either way.
    allow_cpu_roundtrip : bool
        Allow GPU -> GPU conversions that go through host memory.

    Returns
    -------
    callable
        A decorator turning a function into a :class:`MemoryTypeFunction`.

    Raises
    ------
    UnknownMemoryTypeError
        A type name that is not in the framework table.

    Examples
    --------
    >>> import numpy as np, memtype as mt
    >>> @mt.memory_types(input_type="numpy", output_type="numpy")
    ... def double(image):
    ...     return image * 2
    >>> double(np.ones((1, 2, 2), np.uint8)).tolist()
    [[[2, 2], [2, 2]]]
    """
    in_fw, out_fw = get_framework(input_type), get_framework(output_type)
    _contract_ndims(contract)

    def decorate(func: Callable[..., Any]) -> MemoryTypeFunction:
        return MemoryTypeFunction(func, in_fw, out_fw, contract, oom_recovery, copy_inputs,
                                  allow_cpu_roundtrip)

    return decorate


def _type_decorator(name: str) -> Callable[..., Any]:
    """The decorator named after one memory type (``numpy``, ``torch``...)."""

    def decorator(func: Callable[..., Any] | None = None, *, input_type: MemoryTypeLike = name,
                  output_type: MemoryTypeLike = name, oom_recovery: bool = True,
                  contract: Contract = None, copy_inputs: bool = True,
                  allow_cpu_roundtrip: bool = False) -> Any:
        make = memory_types(input_type, output_type, contract, oom_recovery=oom_recovery,
                            copy_inputs=copy_inputs, allow_cpu_roundtrip=allow_cpu_roundtrip)
        return make if func is None else make(func)

    decorator.__name__ = decorator.__qualname__ = name
    decorator.__module__ = __name__
    decorator.__doc__ = (
        f"Declare a {name} function: ``@{name}`` or ``@{name}(input_type=..., "
        f"output_type=..., oom_recovery=True, contract=None)``.\n\n"
        f"Both types default to ``{name!r}``; see :func:`memory_types` for the parameters."
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
