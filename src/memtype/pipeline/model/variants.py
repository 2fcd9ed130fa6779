"""Variants: one operation offered in several frameworks, for the planner to choose from.

Declared as such (``mt.variants(torch=f, numpy=g)``, :class:`Variants`), never guessed from a
dict's keys: a dict given to a :class:`~memtype.pipeline.FunctionStep` is a routing by
``group_by``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from memtype import ArrayAPIFunction, MemoryType, memory_types
from memtype.errors import ArgumentTypeError, InvalidArgumentError
from memtype.frameworks import get_framework

__all__ = ["Variants", "variants", "offered"]


def _implementation(key: str, func: Callable[..., Any]) -> Any:
    """``func`` as a memtype function taking ``key``'s memory type."""
    if not callable(func):
        raise ArgumentTypeError(f"variants: the implementation for {key!r} must be a function; "
                                f"received {type(func).__name__}.")
    declared = getattr(func, "input_memory_type", None)
    if declared is None:  # a plain function: the key says its memory type
        return memory_types(key, key)(func)
    name = get_framework(declared).name
    if name != key:
        label = getattr(func, "__qualname__", repr(func))
        raise InvalidArgumentError(
            f"variants: the implementation for {key!r} ({label}) takes {name}; expected a "
            f"function taking {key} (or a plain function, typed by its key).")
    return func


class Variants:
    """One operation with an implementation per memory type.

    Usable anywhere a decorated function is: calling it runs the first implementation, and
    its ``input_memory_type`` / ``output_memory_type`` are the first implementation's. A
    :class:`~memtype.pipeline.Pipeline` plans which implementation each step runs (see
    :meth:`~memtype.pipeline.Pipeline.plan`).

    Parameters
    ----------
    implementations : mapping of str or MemoryType to function
        Memory type -> function, in order of preference (ties go to the earlier one). A
        function decorated with a memtype decorator must take that memory type; a plain
        function is decorated for it (``@mt.memory_types(key, key)``).

    Raises
    ------
    ValueError
        No implementation, an unknown memory type, or a function taking another type.
    TypeError
        An implementation that is not a function.
    """

    def __init__(self, implementations: Mapping[str | MemoryType, Callable[..., Any]]) -> None:
        if not implementations:
            raise InvalidArgumentError("variants: expected at least one implementation; "
                                       "received none.")
        self.implementations: dict[str, Any] = {}
        for key, func in implementations.items():
            name = get_framework(key).name
            self.implementations[name] = _implementation(name, func)
        first = next(iter(self.implementations.values()))
        self.input_memory_type: MemoryType = first.input_memory_type
        self.output_memory_type: MemoryType = first.output_memory_type
        self.__name__ = str(getattr(first, "__name__", "variants"))
        self.__qualname__ = str(getattr(first, "__qualname__", self.__name__))

    def __iter__(self) -> Iterator[str]:
        return iter(self.implementations)

    def __getitem__(self, memory_type: str) -> Any:
        return self.implementations[get_framework(memory_type).name]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return next(iter(self.implementations.values()))(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<memtype variants {self.__qualname__} ({', '.join(self.implementations)})>"


def variants(**implementations: Callable[..., Any]) -> Variants:
    """One operation in several frameworks: ``mt.variants(torch=blur_t, numpy=blur_np)``.

    See :class:`Variants`.

    Examples
    --------
    >>> import memtype as mt
    >>> double = mt.variants(numpy=lambda x: x * 2, torch=lambda x: x * 2)
    >>> list(double)
    ['numpy', 'torch']
    """
    return Variants(implementations)


def offered(func: Any) -> Variants | None:
    """The implementations a step's function offers: a :class:`Variants` itself, or an
    ``@mt.array_api`` function's, one per framework it runs in here
    (:meth:`memtype.ArrayAPIFunction.frameworks`); None for any other."""
    if isinstance(func, Variants):
        return func
    if isinstance(func, ArrayAPIFunction) and func.runs_in is None:
        return Variants({name: func.implementation(name) for name in func.frameworks()})
    return None
