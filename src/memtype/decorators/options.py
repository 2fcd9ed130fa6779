"""Call-time options of decorated functions: parsing, validation, and the signature.

Every option can also be given at decoration (``@mt.torch(slice_by_slice=True)``): those
values become the function's defaults (:func:`decoration_defaults`), shown in its
signature; a value passed at call time overrides them for that call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from memtype.dtypes import Scaling, check_scaling
from memtype.errors import ArgumentTypeError, CallOptionError
from memtype.frameworks import gpu_index
from memtype.types import DtypeConversion

__all__ = ["CallOptions", "DEFAULT_OPTIONS", "OPTION_NAMES", "read_options",
           "decoration_defaults", "signature_with_options", "declared_names", "unbound",
           "rebound", "flag"]

OomFallback = Literal["cpu"] | None


@dataclass(frozen=True, slots=True)
class CallOptions:
    """The call-time options of one call of a decorated function."""

    dtype_conversion: DtypeConversion = DtypeConversion.PRESERVE_INPUT
    scaling: Scaling = "clip"
    slice_by_slice: bool = False
    gpu_id: int | None = None
    oom_fallback: OomFallback = None
    oom_recovery: bool = True
    keeps_dtype: bool = field(init=False)
    """Whether a result of the input's dtype on the call's device is returned as it is."""

    def __post_init__(self) -> None:
        keeps = self.dtype_conversion is DtypeConversion.PRESERVE_INPUT and self.gpu_id is None
        object.__setattr__(self, "keeps_dtype", keeps)


DEFAULT_OPTIONS = CallOptions()
OPTION_NAMES: tuple[str, ...] = ("dtype_conversion", "scaling", "slice_by_slice", "gpu_id",
                                 "oom_fallback", "oom_recovery")
_ANNOTATIONS: dict[str, Any] = {
    "dtype_conversion": DtypeConversion,
    "scaling": Scaling,
    "slice_by_slice": bool,
    "gpu_id": int | None,
    "oom_fallback": OomFallback,
    "oom_recovery": bool,
}


def _dtype_conversion(value: object) -> DtypeConversion:
    """A ``DtypeConversion`` from a member, its value (``"uint8"``) or its name."""
    if isinstance(value, DtypeConversion):
        return value
    if isinstance(value, str):
        for member in DtypeConversion:
            if value in (member.value, member.name, member.name.lower()):
                return member
    names = ", ".join(m.name for m in DtypeConversion)
    raise CallOptionError(
        f"dtype_conversion must be a DtypeConversion ({names}) or its value; received "
        f"{value!r}."
    )


def _gpu_id(value: object) -> int | None:
    """``None`` or a non-negative int (the one check: :func:`memtype.frameworks.gpu_index`)."""
    return gpu_index(value)


def flag(name: str, value: object) -> bool:
    """A bool option (NumPy's bool accepted)."""
    if not isinstance(value, (bool, np.bool_)):
        raise CallOptionError(f"{name} must be a bool; received {value!r}.")
    return bool(value)


def _checked(found: dict[str, Any], base: CallOptions) -> CallOptions:
    """``base`` with the ``found`` values, validated (a clear error naming the bad value)."""
    fallback = found.get("oom_fallback", base.oom_fallback)
    if fallback not in (None, "cpu"):
        raise CallOptionError(f"oom_fallback must be None or 'cpu'; received {fallback!r}.")
    return CallOptions(
        _dtype_conversion(found.get("dtype_conversion", base.dtype_conversion)),
        check_scaling(found.get("scaling", base.scaling)),
        flag("slice_by_slice", found.get("slice_by_slice", base.slice_by_slice)),
        _gpu_id(found.get("gpu_id", base.gpu_id)),
        fallback,
        flag("oom_recovery", found.get("oom_recovery", base.oom_recovery)),
    )


def decoration_defaults(**values: Any) -> CallOptions:
    """The options given at decoration, validated there (unknown names are refused)."""
    unknown = sorted(set(values) - set(OPTION_NAMES))
    if unknown:
        raise CallOptionError(
            f"Unknown decorator option(s) {', '.join(unknown)}; expected any of "
            f"{', '.join(OPTION_NAMES)}."
        )
    return _checked(values, DEFAULT_OPTIONS)


def read_options(kwargs: dict[str, Any], forward: frozenset[str],
                 defaults: CallOptions = DEFAULT_OPTIONS) -> CallOptions:
    """Take the options out of ``kwargs`` (leaving those in ``forward`` for the function).

    Options not passed keep their ``defaults`` (the decoration's values).
    """
    found: dict[str, Any] = {}
    for name in OPTION_NAMES:
        if name in kwargs:
            found[name] = kwargs[name] if name in forward else kwargs.pop(name)
    return _checked(found, defaults) if found else defaults


def declared_names(func: Callable[..., Any]) -> frozenset[str]:
    """The option names that ``func`` declares as parameters itself."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return frozenset()
    return frozenset(OPTION_NAMES) & frozenset(params)


def signature_with_options(func: Callable[..., Any],
                           defaults: CallOptions = DEFAULT_OPTIONS) -> inspect.Signature:
    """``func``'s signature plus the keyword-only call-time options (before ``**kwargs``),
    each with its default (the decoration's value)."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):  # builtins without a signature
        sig = inspect.Signature([
            inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
            inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
        ])
    params = list(sig.parameters.values())
    at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                          default=getattr(defaults, name), annotation=_ANNOTATIONS[name])
        for name in OPTION_NAMES if name not in sig.parameters
    ]
    return sig.replace(parameters=params[:at] + added + params[at:])


def unbound(func: Any) -> tuple[Callable[..., Any], str]:
    """The function inside a ``staticmethod`` / ``classmethod``, and which one it was.

    Generator and async functions are refused: what they yield or await would escape the
    contract, the dtype policy, the output conversion and out-of-memory recovery.
    """
    binding = {staticmethod: "static", classmethod: "class"}.get(type(func), "")
    if binding:
        func = func.__func__
    if not callable(func):
        raise ArgumentTypeError(f"A memory type decorator needs a callable; received {func!r}.")
    kind = ("an async generator function" if inspect.isasyncgenfunction(func) else
            "a generator function" if inspect.isgeneratorfunction(func) else
            "an async function" if inspect.iscoroutinefunction(func) else "")
    if kind:
        raise ArgumentTypeError(
            f"A memory type decorator needs a function that returns its result; "
            f"{getattr(func, '__qualname__', func)} is {kind}, whose results would bypass the "
            "contract, the dtype policy, the output conversion and out-of-memory recovery. "
            "Decorate the function that computes one result and call it from the generator "
            "or coroutine."
        )
    return func, binding


def rebound(func: Callable[..., Any], binding: str) -> Any:
    """``func`` wrapped again as the ``staticmethod`` / ``classmethod`` it was (``binding``)."""
    wrapper = {"static": staticmethod, "class": classmethod}.get(binding)
    return func if wrapper is None else wrapper(func)
