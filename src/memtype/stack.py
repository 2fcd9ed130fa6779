"""stack_slices / unstack_slices: 2D slices <-> one [Z, Y, X] array, strictly checked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memtype.convert import convert
from memtype.detect import detect_framework
from memtype.errors import ShapeError
from memtype.frameworks import get_framework, load_adapter
from memtype.types import MemoryTypeLike

__all__ = ["stack_slices", "unstack_slices"]


def _shape(x: Any) -> tuple[int, ...]:
    return load_adapter(detect_framework(x).name).shape_of(x)


def _on_host(x: Any) -> bool:
    """Whether ``x`` lives in host memory."""
    fw = detect_framework(x)
    return "cpu" in fw.device_kinds and load_adapter(fw.name).device_of(x).kind == "cpu"


def _host_view(x: Any) -> np.ndarray[Any, Any]:
    """A NumPy view (or, where the framework has none, a copy) of a host array."""
    return load_adapter(detect_framework(x).name).to_numpy(x)


def stack_slices(slices: Sequence[Any], memory_type: MemoryTypeLike,
                 gpu_id: int | None = None) -> Any:
    """Stack 2D slices into one ``[Z, Y, X]`` array of ``memory_type`` on ``gpu_id``.

    Parameters
    ----------
    slices : sequence of 2D arrays
        Any mix of memory types; all of one shape.
    memory_type : MemoryType or str
        The type of the result.
    gpu_id : int, optional
        The device of the result (see :func:`memtype.convert`).

    Raises
    ------
    ShapeError
        An empty sequence, a slice that is not 2D, or slices of different shapes
        (the message names the offending index and shape).
    """
    if isinstance(slices, (str, bytes)) or not isinstance(slices, Sequence):
        slices = list(slices)
    if len(slices) == 0:
        raise ShapeError("stack_slices needs at least one 2D slice; received an empty sequence.")
    first = _shape(slices[0])
    for i, s in enumerate(slices):
        shape = _shape(s)
        if len(shape) != 2:
            raise ShapeError(f"Slice {i} must be 2D; received shape {shape}.")
        if shape != first:
            raise ShapeError(
                f"All slices must share one shape; slice 0 has shape {first}, "
                f"slice {i} has shape {shape}."
            )
    fw = get_framework(memory_type)
    if all(_on_host(s) for s in slices):
        # one host copy with NumPy, then one zero-copy hand-over or one transfer to the device
        # (framework stacks of some dtypes, e.g. torch uint16, are much slower)
        host = np.stack([_host_view(s) for s in slices])
        return convert(host, fw.name, gpu_id=gpu_id)
    converted = [convert(s, fw.name, gpu_id=gpu_id) for s in slices]
    return load_adapter(fw.name).stack(converted)


def unstack_slices(array: Any, memory_type: MemoryTypeLike, gpu_id: int | None = None,
                   validate_slices: bool = True) -> list[Any]:
    """Split a ``[Z, Y, X]`` array into a list of 2D slices of ``memory_type``.

    Raises
    ------
    ShapeError
        ``array`` is not 3D (with ``validate_slices``, each slice is checked to be 2D).
    """
    shape = _shape(array)
    if len(shape) != 3:
        raise ShapeError(f"unstack_slices needs a 3D [Z, Y, X] array; received shape {shape}.")
    converted = convert(array, memory_type, gpu_id=gpu_id)
    out = [converted[i] for i in range(shape[0])]
    if validate_slices:
        for i, s in enumerate(out):
            if len(_shape(s)) != 2:
                raise ShapeError(f"Slice {i} is not 2D; it has shape {_shape(s)}.")
    return out
