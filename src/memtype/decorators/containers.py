"""The containers a decorated call looks into for arrays (arguments and results), rebuilt as
the same type.

Walked, recursively: ``list`` and ``tuple``; namedtuples (rebuilt with ``_make``); ``dict``
and its subclasses (the values; keys are left alone; a subclass is rebuilt as a shallow
copy whose values are replaced, so ``OrderedDict`` order and a ``defaultdict``'s factory are
kept); dataclass and attrs instances (their fields; rebuilt as a shallow copy with the
fields replaced, ``__init__`` is not run again, frozen and slotted classes included).
Nothing else is opened: sets, other sequences and mappings, arbitrary objects and object
arrays reach the function as they are. A container with no array in it is passed on as
the same object; a container met again inside itself is left as it is.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["walk", "LEAVES"]

LEAVES = frozenset({int, float, complex, str, bytes, bool, type(None), slice,
                    type(Ellipsis), set, frozenset, range})
"""Types that are never a container to open (nor an array)."""


def walk(value: Any, leaf: Callable[[Any], Any], active: set[int] | None = None) -> Any:
    """``value`` with ``leaf`` applied to everything in it that is not a walked container."""
    kind = type(value)
    if kind in LEAVES:
        return value
    names = _fields(value, kind)
    if names is None:
        return leaf(value)
    active = set() if active is None else active
    if id(value) in active:
        return value
    active.add(id(value))
    try:
        return _rebuilt(value, kind, names, [walk(v, leaf, active) for v in _items(value, names)])
    finally:
        active.discard(id(value))


def _fields(value: Any, kind: type) -> tuple[Any, ...] | None:
    """The keys, indices or field names of a container to walk; ``None`` for anything else."""
    if kind is list or kind is tuple:
        return ()
    if isinstance(value, tuple):
        return () if hasattr(kind, "_fields") and hasattr(kind, "_make") else None
    if isinstance(value, dict):
        return tuple(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(f.name for f in dataclasses.fields(value) if hasattr(value, f.name))
    attrs = getattr(kind, "__attrs_attrs__", None)
    if attrs is not None and not isinstance(value, type):
        return tuple(a.name for a in attrs if hasattr(value, a.name))
    return None


def _items(value: Any, names: tuple[Any, ...]) -> list[Any]:
    """The values inside a container, in order."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, dict):
        return [value[k] for k in names]
    return [getattr(value, name) for name in names]


def _rebuilt(value: Any, kind: type, names: tuple[Any, ...], new: list[Any]) -> Any:
    """The same container with ``new`` items; ``value`` itself when no item changed."""
    old = _items(value, names)
    if all(a is b for a, b in zip(old, new, strict=True)):
        return value
    if kind is list or kind is tuple:
        return kind(new)
    if isinstance(value, tuple):
        return kind._make(new)  # type: ignore[attr-defined]
    if kind is dict:
        return dict(zip(names, new, strict=True))
    out = copy.copy(value)
    for name, item, before in zip(names, new, old, strict=True):
        if item is not before:
            if isinstance(out, dict):
                out[name] = item
            else:
                object.__setattr__(out, name, item)  # frozen dataclasses included
    return out
