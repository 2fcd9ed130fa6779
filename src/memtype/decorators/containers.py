"""The containers a decorated call looks into for arrays (arguments and results), rebuilt as
the same type without running any of the container's own code.

Walked: ``list``, ``tuple`` and ``dict`` (the values; keys are left alone), ``OrderedDict``
(order kept) and ``defaultdict`` (factory kept), each of exactly that type; namedtuples
(rebuilt as ``tuple.__new__`` does for ``_make``; one whose instance carries other state is
not opened); dataclass and attrs instances (their fields; rebuilt as a new instance holding
the same attributes, the fields replaced). A rebuild runs no code of the container's class:
no ``__init__``, ``__new__``, ``_make``, ``__setitem__``, ``__setattr__`` or ``__copy__``, so
what the function gets is the caller's container with its arrays converted, whatever those
methods do. Nothing else is opened: subclasses of ``list``, ``dict``, ``OrderedDict`` and
``defaultdict`` (their own methods decide what a copy holds), sets, other sequences and
mappings, arbitrary objects and object arrays reach the function as they are. A container
with no array in it is passed on as the same object; a container met again inside itself
is left as it is. The walk is iterative: any nesting depth is walked.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from typing import Any

__all__ = ["walk", "LEAVES"]

LEAVES = frozenset({int, float, complex, str, bytes, bool, type(None), slice,
                    type(Ellipsis), set, frozenset, range})
"""Types that are never a container to open (nor an array)."""

_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class written in Python


class _Kind:
    """How one container type is opened and rebuilt (per type, cached in :data:`_KINDS`)."""

    __slots__ = ("items", "rebuild")

    def __init__(self, items: Callable[[Any], list[Any] | None],
                 rebuild: Callable[[Any, list[Any]], Any]) -> None:
        self.items = items
        """The values inside an instance; ``None``: this instance is not opened."""
        self.rebuild = rebuild
        """The instance with these values instead (in the order of ``items``)."""


def walk(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """``value`` with ``leaf`` applied to everything in it that is not a walked container.

    Depth-first and iterative (an explicit stack, not recursion), so that any nesting depth
    works; items are visited in order, so ``leaf`` sees the arrays in the order they appear.
    """
    kind = type(value)
    if kind in LEAVES:
        return value
    opened = _open(value, kind)
    if opened is None:
        return leaf(value)
    # a frame: [container, its _Kind, its items, the walked items so far]
    stack: list[tuple[Any, _Kind, list[Any], list[Any]]] = [(value, *opened, [])]
    active = {id(value)}  # the containers on the current path (a loop is left as it is)
    while True:
        container, how, items, done = stack[-1]
        if len(done) < len(items):
            item = items[len(done)]
            item_kind = type(item)
            if item_kind in LEAVES or id(item) in active:
                done.append(item)
                continue
            inner = _open(item, item_kind)
            if inner is None:
                done.append(leaf(item))
                continue
            active.add(id(item))
            stack.append((item, *inner, []))
            continue
        stack.pop()
        active.discard(id(container))
        out = container if all(a is b for a, b in zip(items, done, strict=True)) else (
            how.rebuild(container, done))
        if not stack:
            return out
        stack[-1][3].append(out)


def _open(value: Any, kind: type) -> tuple[_Kind, list[Any]] | None:
    """The container's kind and values, or ``None`` where ``value`` is not opened."""
    how = _KINDS.get(kind) or _kind_of(kind)  # classes are not cached: they can be many
    if how is None:
        return None
    items = how.items(value)
    return None if items is None else (how, items)


def _kind_of(kind: type) -> _Kind | None:
    """How instances of ``kind`` are opened; ``None`` for types that are not."""
    if issubclass(kind, tuple) and _is_namedtuple(kind):
        return _Kind(_namedtuple_items, _namedtuple_rebuilt)
    if dataclasses.is_dataclass(kind):
        names = tuple(f.name for f in dataclasses.fields(kind))
    else:
        attrs = getattr(kind, "__attrs_attrs__", None)
        if not isinstance(attrs, tuple):
            return None
        names = tuple(a.name for a in attrs)
    if not _plain_object(kind):
        return None
    return _Kind(lambda v: _field_items(v, names), lambda v, new: _object_rebuilt(v, names, new))


def _is_namedtuple(kind: type) -> bool:
    """A tuple subclass with string ``_fields`` and no base with a C layout but ``tuple``."""
    fields = getattr(kind, "_fields", None)
    return (isinstance(fields, tuple) and all(isinstance(f, str) for f in fields)
            and all(b in (tuple, object) or b.__flags__ & _HEAP_TYPE for b in kind.__mro__))


def _plain_object(kind: type) -> bool:
    """Whether ``object.__new__(kind)`` makes an instance (no base with a C layout)."""
    return all(b is object or b.__flags__ & _HEAP_TYPE for b in kind.__mro__)


def _instance_dict(value: Any) -> dict[str, Any] | None:
    """The instance's ``__dict__``, read without its class's attribute hooks."""
    try:
        found = object.__getattribute__(value, "__dict__")
    except AttributeError:  # a slotted instance has none
        return None
    return found if isinstance(found, dict) else None


def _namedtuple_items(value: Any) -> list[Any] | None:
    """A namedtuple's values; ``None`` when the instance holds other state too."""
    return None if _instance_dict(value) else list(value)


def _namedtuple_rebuilt(value: Any, new: list[Any]) -> Any:
    """The namedtuple with ``new`` values, made as ``_make`` makes it (``tuple.__new__``)."""
    return tuple.__new__(type(value), new)


_MISSING = object()


def _field_items(value: Any, names: tuple[str, ...]) -> list[Any]:
    """A dataclass or attrs instance's field values (an unset field: :data:`_MISSING`)."""
    out = []
    for name in names:
        try:
            out.append(object.__getattribute__(value, name))
        except AttributeError:  # a field that was never set (init=False, no default)
            out.append(_MISSING)
    return out


def _slots(kind: type) -> list[str]:
    """The slot names of ``kind`` and its bases (``__dict__`` and ``__weakref__`` aside)."""
    names: list[str] = []
    for base in kind.__mro__:
        slots = base.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and name not in names:
                names.append(name)
    return names


def _object_rebuilt(value: Any, names: tuple[str, ...], new: list[Any]) -> Any:
    """A new instance of ``value``'s class holding its attributes, the fields ``new``.

    ``object.__new__`` and object's own attribute access: no ``__init__``, ``__new__``,
    ``__setattr__`` (frozen classes included) or ``__copy__`` of the class runs.
    """
    kind = type(value)
    out = object.__new__(kind)
    state = _instance_dict(value)
    if state is not None:
        object.__getattribute__(out, "__dict__").update(state)
    slots = _slots(kind)
    for slot in slots:
        try:
            object.__setattr__(out, slot, object.__getattribute__(value, slot))
        except AttributeError:  # an unset slot stays unset
            continue
    for name, item in zip(names, new, strict=True):
        if item is _MISSING:
            continue
        if name in slots:
            object.__setattr__(out, name, item)  # the slot itself (frozen classes included)
        else:
            object.__getattribute__(out, "__dict__")[name] = item
    return out


def _dict_items(value: Any) -> list[Any]:
    """A mapping's values, in order."""
    return list(value.values())


_KINDS: dict[type, _Kind] = {
    list: _Kind(list, lambda v, new: new),
    tuple: _Kind(list, lambda v, new: tuple(new)),
    dict: _Kind(_dict_items, lambda v, new: dict(zip(v, new, strict=True))),
    OrderedDict: _Kind(_dict_items, lambda v, new: OrderedDict(zip(v, new, strict=True))),
    defaultdict: _Kind(_dict_items,
                       lambda v, new: defaultdict(v.default_factory, zip(v, new, strict=True))),
}
"""The built-in container types opened (exactly these types, not their subclasses)."""
