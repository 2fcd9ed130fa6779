"""The named values of one field while a group runs, and the tables they become.

A group (a well, by default) holds one or more fields (sites). A step with named inputs
(``FunctionStep(..., inputs={...})``) runs once per field: its inputs are resolved here (the
field's channels as the chain left them, earlier results, object sets), its result is kept
by name, an object set with its parents, and a dict of measurements becomes columns of the
object set's table (one row per object: ``ObjectNumber`` as CellProfiler names it, the same
number as ``label``, the column OME-Zarr feature tables index by, ``Parent_<set>``,
``Children_<set>_Count``) or of the per-image table ``image`` (one row per field, with
``Count_<set>``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memtype.errors import FieldError, InvalidArgumentError, ShapeError
from memtype.pipeline.analysis.objects import relate
from memtype.pipeline.analysis.references import Input
from memtype.pipeline.io.outputs import zarr_roles
from memtype.pipeline.io.patterns import Key

__all__ = ["FieldValues", "ObjectSet", "IMAGE_TABLE", "channel_field", "field_key",
           "resolve_input", "record_result", "field_rows"]

IMAGE_TABLE = "image"
"""The per-image table: one row per field (counts, image measurements)."""

Row = dict[str, Any]


@dataclass
class ObjectSet:
    """A label image with a name, and the object sets it was made from (its parents)."""

    labels: np.ndarray[Any, Any]
    parents: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        """Objects in the set (numbered 1..count)."""
        return int(self.labels.max()) if self.labels.size else 0


@dataclass
class FieldValues:
    """One field's named values, object sets and measurements."""

    values: dict[str, Any] = field(default_factory=dict)
    objects: dict[str, ObjectSet] = field(default_factory=dict)
    object_columns: dict[str, dict[str, np.ndarray[Any, Any]]] = field(default_factory=dict)
    image_columns: dict[str, Any] = field(default_factory=dict)


def channel_field(fields: Sequence[str]) -> str | None:
    """The pattern field that holds the channel (the OME-Zarr plate's ``c`` role), or None."""
    for name in fields:
        try:
            if zarr_roles(["well", name]).get(name) == "c":
                return name
        except InvalidArgumentError:  # a field with no place in a plate is no channel
            continue
    return None


def field_key(fixed: Key, channel: str | None) -> Key:
    """A stack's field: its fixed values without the channel."""
    return tuple(kv for kv in fixed if kv[0] != channel)


def _channel_matches(value: object, wanted: str, names: Mapping[str, str]) -> bool:
    """Whether a channel value is the one a reference names (its value or its name)."""
    return str(value) == wanted or names.get(str(value)) == wanted


def resolve_input(item: Input, step: str, stacks: Sequence[tuple[Key, Any]],
                  values: FieldValues, channel: str | None,
                  names: Mapping[str, str]) -> Any:
    """The value a named input refers to in this field.

    ``stacks`` are the field's current ``(fixed key, array)`` pairs, one per channel;
    ``names`` the plate's channel names by value.

    Raises
    ------
    FieldError
        The field has no such channel, or nothing by that name was made before this step.
    """
    wanted = item.channel
    if wanted is None:
        if item.reference in values.values:
            return values.values[item.reference]
        made = sorted(values.values)
        raise FieldError(f"step {step!r}: inputs[{item.parameter!r}] = {item.reference!r} "
                         f"names nothing made before it in this field; expected one of "
                         f"{made or 'no named values yet'} or 'channel:<name>'.")
    if channel is None:
        raise FieldError(f"step {step!r}: inputs[{item.parameter!r}] = {item.reference!r} "
                         "names a channel, but the plate's pattern has no channel field.")
    for fixed, data in stacks:
        if _channel_matches(dict(fixed).get(channel), wanted, names):
            return data
    found = [f"{dict(k).get(channel)}" + (f" ({names[str(dict(k).get(channel))]})"
                                         if str(dict(k).get(channel)) in names else "")
             for k, _ in stacks]
    raise FieldError(f"step {step!r}: inputs[{item.parameter!r}] = {item.reference!r}: the "
                     f"field has no channel {wanted!r}; it has {', '.join(found) or 'none'}.")


def _plane(labels: Any) -> np.ndarray[Any, Any]:
    """A label image as one 2D plane (a ``(1, Y, X)`` stack's plane)."""
    array: np.ndarray[Any, Any] = np.asarray(labels)
    if array.ndim == 3 and array.shape[0] == 1:
        plane: np.ndarray[Any, Any] = array[0]
        return plane
    if array.ndim != 2:
        raise ShapeError(f"an object set must be one 2D plane or a (1, Y, X) stack; received "
                         f"shape {array.shape} (project z first, e.g. max_projection).")
    return array


def record_result(step: str, labels: str | None, inputs: Sequence[Input], result: Any,
                  values: FieldValues) -> None:
    """Keep a named step's result: by the step's name; as an object set named ``labels``
    (its parents: the object sets among its inputs); a dict as measurements."""
    sets = [i.reference for i in inputs if i.reference in values.objects]
    if isinstance(result, Mapping):
        _measurements(step, result, sets[0] if sets else None, values)
        return
    values.values[step] = result
    if labels is not None:
        values.objects[labels] = ObjectSet(_plane(result), tuple(sets))
        values.values[labels] = result


def _measurements(step: str, result: Mapping[str, Any], objects: str | None,
                  values: FieldValues) -> None:
    """Per-object columns (arrays) of ``objects``' table, or per-image values (numbers)."""
    for name, value in result.items():
        array = np.asarray(value)
        if array.ndim == 0:
            values.image_columns[str(name)] = array.item()
            continue
        if objects is None:
            raise ShapeError(f"step {step!r} returned per-object column {name!r} but takes "
                             "no object set; give it one in inputs= (e.g. {'labels': "
                             "'nuclei', ...}).")
        count = values.objects[objects].count
        if array.shape != (count,):
            raise ShapeError(f"step {step!r}: column {name!r} has shape {array.shape}; "
                             f"expected one value per object of {objects!r} ({count},).")
        values.object_columns.setdefault(objects, {})[str(name)] = array


def _relations(values: FieldValues) -> dict[str, dict[str, np.ndarray[Any, Any]]]:
    """Per object set, its ``Parent_<set>`` and ``Children_<set>_Count`` columns."""
    columns: dict[str, dict[str, np.ndarray[Any, Any]]] = {n: {} for n in values.objects}
    for name, objects in values.objects.items():
        for parent in objects.parents:
            owner, counts = relate(objects.labels, values.objects[parent].labels)
            columns[name][f"Parent_{parent}"] = np.asarray(owner)
            columns[parent][f"Children_{name}_Count"] = np.asarray(counts)
    return columns


def field_rows(key: Key, values: FieldValues) -> dict[str, list[Row]]:
    """The field's table rows: one table per object set, and one ``image`` row."""
    tables: dict[str, list[Row]] = {}
    relations = _relations(values)
    image: Row = dict(key)
    for name, objects in values.objects.items():
        image[f"Count_{name}"] = objects.count
        columns = {**relations[name], **values.object_columns.get(name, {})}
        # tolist: each column's NumPy numbers as Python numbers (clean CSV text) in one C
        # call, not one .item() a value (half the time of a preview's tables)
        plain = {c: np.asarray(a).tolist() for c, a in columns.items()}
        tables[name] = [{**dict(key), "ObjectNumber": number + 1, "label": number + 1,
                         **{c: v[number] for c, v in plain.items()}}
                        for number in range(objects.count)]
    image.update(values.image_columns)
    tables[IMAGE_TABLE] = [image]
    return tables
