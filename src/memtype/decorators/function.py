"""A decorated function, and its call read top-down: prepare inputs -> run -> finish outputs
-> recover (one module per stage: :mod:`~memtype.decorators.inputs`,
:mod:`~memtype.decorators.run`, :mod:`~memtype.decorators.outputs`,
:mod:`~memtype.decorators.recovery`)."""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable
from typing import Any

from memtype.decorators.inputs import (
    Inputs,
    Policy,
    check_guarded,
    check_unwritten,
    inputs_of,
    note_read_only,
    prepare,
)
from memtype.decorators.options import (
    DEFAULT_OPTIONS,
    CallOptions,
    declared_names,
    read_options,
    rebound,
    signature_with_options,
    unbound,
)
from memtype.decorators.outputs import Contract, Outputs
from memtype.decorators.recovery import Recovery, Stage
from memtype.decorators.run import run
from memtype.frameworks import CPU, Framework, get_framework, load_adapter
from memtype.gpu.oom import is_oom_error, recover
from memtype.types import MemoryType

__all__ = ["MemoryTypeFunction", "copy_metadata", "THROUGH"]


class MemoryTypeFunction:
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

    __wrapped__: Callable[..., Any]
    __qualname__: str  # the function's (copy_metadata)

    def __init__(self, func: Callable[..., Any], input_type: Framework, output_type: Framework,
                 contract: Contract = None, copy_inputs: bool = False,
                 allow_cpu_roundtrip: bool = False,
                 defaults: CallOptions = DEFAULT_OPTIONS, slice_separable: bool = False) -> None:
        func, self._binding = unbound(func)
        copy_metadata(self, func)
        self.input_memory_type = MemoryType(input_type.name)
        self.output_memory_type = MemoryType(output_type.name)
        self.__signature__ = signature_with_options(func, defaults)
        self._func = func
        self._in, self._out = input_type, output_type
        self._settings = (contract, copy_inputs, allow_cpu_roundtrip, defaults, self._binding,
                          slice_separable)
        self._separable = slice_separable
        self._outputs = Outputs(self.__qualname__, output_type, contract, allow_cpu_roundtrip)
        self._defaults = defaults
        self._forward = declared_names(func)
        self._name = self.__qualname__
        self._policy: Policy | None = None  # frameworks load at the first call
        self.keeps_result = False
        self._declared = self  # the decorated function a computing() variant was made from
        self._computing: MemoryTypeFunction | None = None

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
            made._outputs.keeps_result = True
            made.output_memory_type = made.input_memory_type
            self._computing = made
        return made

    def _variant(self, output_type: Framework) -> MemoryTypeFunction:
        """The same function and settings, declared to return ``output_type``."""
        contract, copy_inputs, roundtrip, defaults, binding, separable = self._settings
        return MemoryTypeFunction(rebound(self._func, binding), self._in, output_type,
                                  contract, copy_inputs, roundtrip, defaults, separable)

    # -- the call -----------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        policy = self._policy or self._load()
        opts = read_options(kwargs, self._forward, self._defaults) if kwargs else self._defaults
        call = prepare(args, kwargs, policy, opts.gpu_id)  # 1. inputs
        call_args, call_kwargs, device, gpu_id, dtype, checks = call
        try:  # 2. run
            if (device is CPU or not device.is_gpu) and not opts.slice_by_slice:
                result = (self._func(*call_args, **call_kwargs) if call_kwargs
                          else self._func(*call_args))  # host: no stream to set
            else:
                result = run(self._func, inputs_of(call, args), self._in.name,
                             opts.slice_by_slice, self._name)
        except Exception as exc:  # only out-of-memory errors go on, outside this block
            inputs = inputs_of(call, args)
            if not self._recoverable(exc, inputs, opts):
                raise
            error: BaseException = exc
        else:
            if checks is not None and type(checks) is Inputs and checks.guarded:
                check_guarded(checks, policy, self._name)
            if type(result) is tuple:  # 3. outputs
                return self._outputs.finish(result, dtype, gpu_id, opts)
            return self._outputs.output(result, dtype, gpu_id, opts)
        recovery, stages = self._recovery(error, inputs, args, kwargs, opts)  # 4. recovery
        del inputs, call, call_args, call_kwargs, checks  # each stage converts them again
        return self._recover(error, recovery, stages, opts)

    def _recoverable(self, exc: Exception, inputs: Inputs, opts: CallOptions) -> bool:
        """Whether a failed call goes on to recovery (an out-of-memory error, with recovery
        on); any other error gets a note where the function received read-only arrays."""
        if opts.oom_recovery and is_oom_error(exc):
            return True
        note_read_only(exc, inputs, self._name)
        return False

    def _recovery(self, error: BaseException, inputs: Inputs, args: tuple[Any, ...],
                  kwargs: dict[str, Any], opts: CallOptions) -> tuple[Recovery, list[Stage]]:
        """Stage 4 set up (:mod:`~memtype.decorators.recovery`): no retry after a write to
        the caller's memory; the stages to try. The caller then drops the failed inputs."""
        policy = self._policy
        assert policy is not None  # loaded by the failed attempt
        check_unwritten(inputs, policy, error, self._name)
        recovery = Recovery(self._func, policy, self._name, args, kwargs, opts, self._separable)
        return recovery, recovery.stages(inputs)

    def _recover(self, error: BaseException, recovery: Recovery, stages: list[Stage],
                 opts: CallOptions) -> Any:
        """Stage 4: the recovery stages, the first that succeeds finished as the result."""
        try:
            used, result = recover(error, stages, self._name)
        except Exception as exc:  # re-raised, with a note on the way out
            recovery.explain(exc)
            raise
        return self._outputs.finish(result, used.dtype, used.gpu_id, opts)

    def _load(self) -> Policy:
        """Load the frameworks (first call)."""
        copy_inputs, roundtrip = self._settings[1:3]
        self._outputs.load()
        self._policy = Policy(self._in, load_adapter(self._in.name), copy_inputs, roundtrip)
        return self._policy

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
            self._func.__qualname__ = f"{qualname}{THROUGH}"
        return (_rebuild, (self._func, self._in.name, self._out.name, *self._settings))


THROUGH = ".__wrapped__"
"""What a ``__main__`` function pickled by value adds to its qualname (see ``__reduce__``)."""


def copy_metadata(wrapper: Any, func: Callable[..., Any]) -> None:
    """:func:`functools.update_wrapper`, one attribute at a time (its read of
    ``wrapper.__dict__`` turns every later attribute read of a call into a dictionary lookup:
    about 0.3k interpreter instructions each, CPython 3.11; a call reads five), and the
    qualname without the ``.__wrapped__`` a pickled ``__main__`` function carries. Used by
    every decorated callable (:class:`MemoryTypeFunction`, ``memtype.array_api``'s)."""
    for name in functools.WRAPPER_ASSIGNMENTS:
        if hasattr(func, name):
            setattr(wrapper, name, getattr(func, name))
    for name, value in getattr(func, "__dict__", {}).items():
        setattr(wrapper, name, value)
    wrapper.__wrapped__ = func
    wrapper.__qualname__ = str(getattr(func, "__qualname__", func)).removesuffix(THROUGH)


def _rebuild(func: Callable[..., Any], input_type: str, output_type: str, contract: Contract,
             copy_inputs: bool, allow_cpu_roundtrip: bool, defaults: CallOptions,
             binding: str, slice_separable: bool = False) -> MemoryTypeFunction:
    """Unpickle a decorated function that is not reachable by its name."""
    return MemoryTypeFunction(rebound(func, binding), get_framework(input_type),
                              get_framework(output_type), contract, copy_inputs,
                              allow_cpu_roundtrip, defaults, slice_separable)


def _computing_of(declared: MemoryTypeFunction) -> MemoryTypeFunction:
    """Unpickle a :meth:`MemoryTypeFunction.computing` variant."""
    return declared.computing()
