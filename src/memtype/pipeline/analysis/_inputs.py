"""The checks every analysis algorithm makes on its inputs: one 2D field, one label image.

The checks read only an array's shape, its dtype's kind, its minimum and maximum, so an
implementation in another framework (a torch tensor) makes the same checks, with the same
words, through :func:`check_field` and :func:`check_labels`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from memtype.errors import ArgumentTypeError, InvalidArgumentError, ShapeError

__all__ = ["as_field", "as_labels", "check_field", "check_labels", "label_field",
           "object_count", "same_shape"]


def check_field(field: Any, kind: str, *, name: str) -> Any:
    """Return ``field`` (an array of dtype kind ``kind``) with a ``[1, Y, X]`` stack squeezed
    (a view), refusing anything but a real-valued 2D field."""
    if field.ndim == 3 and field.shape[0] == 1:
        field = field[0]
    if field.ndim != 2:
        raise ShapeError(
            f"Invalid value for argument `{name}`. Expected a 2D field [Y, X] or a stack "
            f"[1, Y, X] with one plane (the analysis measures one plane: project a Z stack "
            f"first). Received: {name} with shape {tuple(field.shape)}.")
    if kind not in "biuf":
        raise ArgumentTypeError(
            f"Invalid value for argument `{name}`. Expected a real-valued array (bool, "
            f"integer or float). Received: dtype {field.dtype}.")
    return field


def check_labels(labels: Any, kind: str, *, name: str = "labels") -> Any:
    """Return the label image ``labels`` (dtype kind ``kind``) as :func:`check_field` does,
    refusing a non-integer dtype and negative numbers."""
    labels = check_field(labels, kind, name=name)
    if kind not in "iu":
        raise ArgumentTypeError(
            f"Invalid value for argument `{name}`. Expected an integer label image (0 = "
            f"background, 1..N = objects). Received: dtype {labels.dtype}.")
    if _size(labels) and kind == "i" and labels.min() < 0:
        raise InvalidArgumentError(
            f"Invalid value for argument `{name}`. Expected object numbers >= 0. "
            f"Received: a minimum of {int(labels.min())}.")
    return labels


def as_field(array: Any, *, name: str) -> npt.NDArray[Any]:
    """Return ``array`` as a 2D NumPy array; a ``[1, Y, X]`` stack is squeezed (a view)."""
    field = np.asarray(array)
    out: npt.NDArray[Any] = check_field(field, field.dtype.kind, name=name)
    return out


def as_labels(array: Any, *, name: str = "labels") -> npt.NDArray[np.intp]:
    """Return a label image as a 2D ``intp`` array: 0 is background, 1..N are objects."""
    return label_field(array, name=name).astype(np.intp, copy=False)


def label_field(array: Any, *, name: str = "labels") -> npt.NDArray[Any]:
    """Return a label image as a 2D integer array of its own dtype (a view where it can)."""
    labels = np.asarray(array)
    out: npt.NDArray[Any] = check_labels(labels, labels.dtype.kind, name=name)
    return out


def _size(array: Any) -> int:
    """The number of elements (NumPy's ``size`` is a method in torch)."""
    return math.prod(array.shape)


def object_count(labels: Any) -> int:
    """The number of rows of a per-object table: the largest object number (0 when empty).

    A number above the field's pixel count is refused: its table would be mostly absent rows
    (a 1024 x 1024 field numbered up to 2**31 would need gigabytes).
    """
    size = _size(labels)
    count = int(labels.max()) if size else 0
    if count > size:
        raise InvalidArgumentError(
            f"Invalid value for argument `labels`. Expected object numbers 1..N with N at "
            f"most the field's {size} pixels (one table row per number). Received: "
            f"a largest number of {count}; renumber the objects first "
            f"(skimage.segmentation.relabel_sequential).")
    return count


def same_shape(first: Any, second: Any, names: str) -> None:
    """Refuse two fields of different shapes, naming them."""
    if tuple(first.shape) != tuple(second.shape):
        raise ShapeError(
            f"Invalid value for arguments {names}. Expected fields of the same shape. "
            f"Received: {tuple(first.shape)} and {tuple(second.shape)}.")
