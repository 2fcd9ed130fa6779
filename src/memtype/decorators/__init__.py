"""Memory type decorators: ``memory_types`` and one decorator per row of the framework table.

``@mt.torch`` declares that a function takes and returns torch arrays. On each call its
array arguments (also inside lists and tuples) are converted to the input type on the
call's device, the function runs (on this thread's device stream for device calls), the result
is checked against the contract (default: a 3D ``[Z, Y, X]`` image; for a tuple, its first
element), brought to the requested dtype by the dtype policy (:mod:`memtype.dtypes`) and
returned as the output type. Inputs already of the function's type, or reaching it
zero-copy, cost O(1): see :mod:`memtype.decorators.inputs` for what is passed, viewed
read-only, guarded or copied. Decorating imports no framework: that happens at the first call.

Call-time options, added to the function's signature as keyword-only parameters:
``dtype_conversion``, ``scaling``, ``slice_by_slice``, ``gpu_id``, ``oom_fallback``,
``oom_recovery``; each can also be given at decoration, as the function's default. An
option name the function declares itself is passed on to it as well.

The package is the call, top-down (each module calls only the ones below it)::

    __init__     memory_types and one decorator per row of the framework table
    function     MemoryTypeFunction: a call in four stages
    recovery     4. out-of-memory recovery (retries the stages below)
    outputs      3. contract, dtype policy, output type
    run          2. the function on its device and stream, whole or slice by slice
    inputs       1. arrays found, converted, isolated; checks after the call
    containers   the containers opened for arrays (arguments and results)
    options      the call-time options
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from memtype.decorators.function import MemoryTypeFunction
from memtype.decorators.function import _computing_of as _computing_of  # in older pickles
from memtype.decorators.function import _rebuild as _rebuild  # in older pickles
from memtype.decorators.options import OomFallback, decoration_defaults, flag
from memtype.decorators.outputs import Contract, contract_ndims
from memtype.dtypes import Scaling
from memtype.errors import ArgumentTypeError, UnknownMemoryTypeError
from memtype.frameworks import Device, Framework, get_framework, is_registered, iter_frameworks
from memtype.types import DtypeConversion, MemoryTypeLike

__all__ = ["memory_types", "MemoryTypeFunction", "Contract"]


def _named_framework(parameter: str, value: MemoryTypeLike) -> Framework:
    """The table row for ``value``; an unknown name's error names the parameter."""
    try:
        return get_framework(value)
    except UnknownMemoryTypeError as exc:
        raise UnknownMemoryTypeError(f"{parameter}: {exc}") from None


def memory_types(input_type: MemoryTypeLike, output_type: MemoryTypeLike,
                 contract: Contract = None, *, oom_recovery: bool = True,
                 slice_separable: bool = False,
                 copy_inputs: bool = False, allow_cpu_roundtrip: bool = False,
                 dtype_conversion: DtypeConversion | str = DtypeConversion.PRESERVE_INPUT,
                 scaling: Scaling = "clip", slice_by_slice: bool = False,
                 gpu_id: int | str | Device | None = None, oom_fallback: OomFallback = None,
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
        On out-of-memory: free every loaded framework's cache and retry the same call;
        then, for a ``slice_separable`` function, run it slice by slice; then, with
        ``oom_fallback="cpu"``, on the host. A budget refusal (``MemoryBudgetError``) is
        not out-of-memory and is raised at once.
    slice_separable : bool
        Declares that the function's result on a 3D ``[Z, Y, X]`` image equals its results
        on the 2D slices, stacked (a 2D filter, a per-slice threshold; not a 3D filter, a
        projection or a z-normalisation). Only then may out-of-memory recovery run it slice
        by slice; a different computation is never chosen for a function silently.
    copy_inputs : bool
        ``False`` (the default): an input that is its caller's mutable array (of a framework
        whose adapter is not ``immutable``, such as NumPy or torch; of the function's type
        or reaching it zero-copy) is passed as
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
    separable = flag("slice_separable", slice_separable)

    def decorate(func: Callable[..., Any]) -> MemoryTypeFunction:
        return MemoryTypeFunction(func, in_fw, out_fw, contract, copy_inputs,
                                  allow_cpu_roundtrip, defaults, separable)

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
        f"output_type=..., contract=None, copy_inputs=False, slice_separable=False, "
        "slice_by_slice=..., ...)``.\n\n"
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
