"""The checks every analysis algorithm makes on its inputs: one 2D field, one label image."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from memtype.errors import ArgumentTypeError, InvalidArgumentError, ShapeError

__all__ = ["as_field", "as_labels", "label_field", "object_count"]


def as_field(array: Any, *, name: str) -> npt.NDArray[Any]:
    """Return ``array`` as a 2D NumPy array; a ``[1, Y, X]`` stack is squeezed (a view)."""
    field = np.asarray(array)
    if field.ndim == 3 and field.shape[0] == 1:
        field = field[0]
    if field.ndim != 2:
        raise ShapeError(
            f"Invalid value for argument `{name}`. Expected a 2D field [Y, X] or a stack "
            f"[1, Y, X] with one plane (the analysis measures one plane: project a Z stack "
            f"first). Received: {name} with shape {field.shape}.")
    if field.dtype.kind not in "biuf":
        raise ArgumentTypeError(
            f"Invalid value for argument `{name}`. Expected a real-valued array (bool, "
            f"integer or float). Received: dtype {field.dtype}.")
    return field


def as_labels(array: Any, *, name: str = "labels") -> npt.NDArray[np.intp]:
    """Return a label image as a 2D ``intp`` array: 0 is background, 1..N are objects."""
    return label_field(array, name=name).astype(np.intp, copy=False)


def label_field(array: Any, *, name: str = "labels") -> npt.NDArray[Any]:
    """Return a label image as a 2D integer array of its own dtype (a view where it can)."""
    labels = as_field(array, name=name)
    if labels.dtype.kind not in "iu":
        raise ArgumentTypeError(
            f"Invalid value for argument `{name}`. Expected an integer label image (0 = "
            f"background, 1..N = objects). Received: dtype {labels.dtype}.")
    if labels.size and labels.min() < 0:
        raise InvalidArgumentError(
            f"Invalid value for argument `{name}`. Expected object numbers >= 0. "
            f"Received: a minimum of {labels.min()}.")
    return labels


def object_count(labels: npt.NDArray[Any]) -> int:
    """The number of rows of a per-object table: the largest object number (0 when empty).

    A number above the field's pixel count is refused: its table would be mostly absent rows
    (a 1024 x 1024 field numbered up to 2**31 would need gigabytes).
    """
    count = int(labels.max()) if labels.size else 0
    if count > labels.size:
        raise InvalidArgumentError(
            f"Invalid value for argument `labels`. Expected object numbers 1..N with N at "
            f"most the field's {labels.size} pixels (one table row per number). Received: "
            f"a largest number of {count}; renumber the objects first "
            f"(skimage.segmentation.relabel_sequential).")
    return count


def same_shape(first: npt.NDArray[Any], second: npt.NDArray[Any], names: str) -> None:
    """Refuse two fields of different shapes, naming them."""
    if first.shape != second.shape:
        raise ShapeError(
            f"Invalid value for arguments {names}. Expected fields of the same shape. "
            f"Received: {first.shape} and {second.shape}.")
