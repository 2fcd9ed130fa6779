"""``mt.chain(f, g, h)``: decorated functions called in turn, converting only where needed.

Called one by one, ``h(g(f(x)))`` converts ``f``'s result to ``f``'s declared output type,
then ``g`` converts it to its input type: two conversions where one would do. In a chain,
every function but the last keeps its result in the framework it was computed in (its
input type, or the type of what its body returned); the next function's own input
conversion takes it from there, once, producer to consumer. Only the last function's
result is converted to its declared output type.

Each function still runs through its decorator: input conversion, call-time options, the
contract, out-of-memory recovery and the dtype policy (applied in the framework the result
is kept in). Only the final conversion of an intermediate result is left out: every
function but the last is called as its :meth:`MemoryTypeFunction.computing` variant.

An ``@mt.array_api`` function is a link too: it runs in whatever framework the previous link
left its result in (converted only where the standard does not cover it), and keeps its own
result there. As the last link without a declared ``output_type`` it returns what the calls
one by one would: the declared output type of the nearest link before it that has one, else
the type of the chain's input.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

from memtype.array_api_functions import ArrayAPIFunction
from memtype.decorators import MemoryTypeFunction
from memtype.detect import framework_of
from memtype.errors import ArgumentTypeError, InvalidArgumentError
from memtype.types import MemoryType

__all__ = ["Chain", "chain"]

_Link = tuple[Callable[..., Any], Mapping[str, Any]]


def _link(spec: Any, index: int) -> _Link:
    """One function of the chain (with its own keyword arguments) from ``f`` or ``(f, kw)``."""
    kwargs: Mapping[str, Any] = {}
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], Mapping):
        spec, kwargs = spec
    first = getattr(spec, "implementations", None)  # mt.variants: its first implementation
    if isinstance(first, Mapping) and first:
        spec = next(iter(first.values()))
    target = spec.__func__ if isinstance(spec, types.MethodType) else spec
    if not isinstance(target, (MemoryTypeFunction, ArrayAPIFunction)):
        raise ArgumentTypeError(
            f"mt.chain: function {index} ({getattr(spec, '__qualname__', repr(spec))}) has no "
            "memory type; expected a function decorated with a memtype decorator (@mt.numpy, "
            "@mt.torch, @mt.memory_types(...), @mt.array_api), optionally as "
            "(function, kwargs).")
    return spec, dict(kwargs)


def _kept(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` keeping its result where it was computed (a bound method stays bound)."""
    kept = _declared(func).computing()
    return types.MethodType(kept, func.__self__) if isinstance(func, types.MethodType) else kept


class Chain:
    """Decorated functions called in turn, each result converted once, to its consumer.

    Usable anywhere a decorated function is (a pipeline step included): its
    ``input_memory_type`` is the first function's, its ``output_memory_type`` the last's
    (for a last ``@mt.array_api`` function without ``output_type``: the nearest declared
    output type before it, else the first function's input type).

    Parameters
    ----------
    *funcs : decorated function or (function, kwargs)
        In calling order; a pair gives that function its own keyword arguments. A nested
        chain is flattened; ``mt.variants`` runs its first implementation; an
        ``@mt.array_api`` function runs where the previous function's result is.

    Notes
    -----
    Calling the chain with ``x`` and keyword arguments passes ``x`` to the first function
    and the keyword arguments (call-time options such as ``gpu_id=`` or
    ``dtype_conversion=`` included) to every function; a pair's own take precedence. A
    function returning a tuple passes its first element on; the other elements are
    collected, and the chain then returns ``(image, *others)`` in order.
    """

    def __init__(self, *funcs: Callable[..., Any] | _Link) -> None:
        links: list[_Link] = []
        for i, spec in enumerate(funcs):
            if isinstance(spec, Chain):
                links.extend(spec.links)
            else:
                links.append(_link(spec, i))
        if not links:
            raise InvalidArgumentError("mt.chain: expected at least one decorated function; "
                                       "received none.")
        self.links: tuple[_Link, ...] = tuple(links)
        self._calls: list[Callable[..., Any]] | None = None
        first = _declared(links[0][0])
        self._returns = _declared_output([f for f, _ in links])
        self.input_memory_type: MemoryType = first.input_memory_type
        self.output_memory_type: MemoryType = (MemoryType(self._returns) if self._returns
                                               else first.input_memory_type)
        names = [str(getattr(f, "__name__", "f")) for f, _ in links]
        self.__name__ = self.__qualname__ = f"chain({', '.join(names)})"

    def _prepared(self) -> list[Callable[..., Any]]:
        """The functions as called (made once): every one but the last keeps its result; a
        last ``@mt.array_api`` function without ``output_type`` returns the nearest declared
        output type before it, where there is one."""
        if self._calls is None:
            funcs = [f for f, _ in self.links]
            last = funcs[-1]
            if (self._returns is not None and isinstance(last, ArrayAPIFunction)
                    and last.output_type is None):
                last = last.returning(self._returns)
            self._calls = [*(_kept(f) for f in funcs[:-1]), last]
        return self._calls

    def __call__(self, x: Any, **kwargs: Any) -> Any:
        side: list[Any] = []
        data = x
        calls = self._prepared()
        last = calls[-1]
        if isinstance(last, ArrayAPIFunction) and last.output_type is None:
            fw = framework_of(x)  # no declared output type: the input's, as one by one
            if fw is not None:
                calls = [*calls[:-1], last.returning(fw.name)]
        for call, (_, own) in zip(calls, self.links, strict=True):
            result = call(data, **{**kwargs, **own})
            if type(result) is tuple:
                data = result[0]
                side.extend(result[1:])
            else:
                data = result
        return (data, *side) if side else data

    def __repr__(self) -> str:
        return (f"<memtype {self.__qualname__} ({self.input_memory_type.value} -> "
                f"{self.output_memory_type.value})>")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Chain, tuple(f if not kw else (f, kw) for f, kw in self.links))


def _declared(func: Callable[..., Any]) -> MemoryTypeFunction | ArrayAPIFunction:
    """The decorated function behind ``func`` (a bound method's function)."""
    target = func.__func__ if isinstance(func, types.MethodType) else func
    assert isinstance(target, (MemoryTypeFunction, ArrayAPIFunction))
    return target


def _declared_output(funcs: list[Callable[..., Any]]) -> str | None:
    """The type the calls one by one would return: the last function's declared output
    type, or, past ``@mt.array_api`` functions without one, the nearest earlier one's;
    None: the type of the chain's input."""
    for func in reversed(funcs):
        target = _declared(func)
        if isinstance(target, MemoryTypeFunction):
            return str(target.output_memory_type.value)
        if target.output_type is not None:
            return target.output_type
    return None


def chain(*funcs: Callable[..., Any] | _Link) -> Chain:
    """Call decorated functions in turn; convert each result once, to its consumer.

    ``mt.chain(f, g, h)(x)`` computes ``h(g(f(x)))`` with every intermediate result left
    in the framework it was computed in, not converted to its function's declared output
    type: one conversion from producer to consumer. Only the last function's result is
    converted to its declared output type. See :class:`Chain`.

    Raises
    ------
    TypeError
        A function without a memtype decorator or ``@mt.array_api`` (``ArgumentTypeError``).
    ValueError
        No function (``InvalidArgumentError``).

    Examples
    --------
    >>> import numpy as np, memtype as mt
    >>> @mt.torch(output_type="numpy")
    ... def double(x):
    ...     return x * 2
    >>> @mt.torch
    ... def inc(x):
    ...     return x + 1
    >>> with mt.capture_conversions() as events:
    ...     y = mt.chain(double, inc)(np.ones((1, 2, 2), np.float32))
    >>> [(e.source_type, e.target_type) for e in events]  # double's result stays in torch
    [('numpy', 'torch')]
    >>> float(y.sum())
    12.0
    """
    return Chain(*funcs)
