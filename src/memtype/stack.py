"""stack_slices / unstack_slices: 2D slices <-> one [Z, Y, X] array, strictly checked.

Slices of different dtypes stack in one dtype, chosen by one rule: NumPy's promotion
(``np.result_type``) of the slices' dtypes, provided every value survives it exactly;
otherwise a :class:`DtypePolicyError`. The result then converts to the target type under
the same rules as :func:`memtype.convert` (pyclesperanto and JAX without x64 narrow 64-bit
dtypes only when every value survives).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from memtype._failures import unsupported_reason
from memtype.conversion import convert
from memtype.detect import detect_framework
from memtype.errors import ArgumentTypeError, DtypePolicyError, ShapeError, UnsupportedArrayError
from memtype.frameworks import Device, get_framework, load_adapter
from memtype.frameworks._host import exact_cast, is_extension
from memtype.types import MemoryTypeLike

__all__ = ["stack_slices", "unstack_slices"]


def _shape(x: Any) -> tuple[int, ...]:
    return load_adapter(detect_framework(x).name).shape_of(x)


def _dtype(x: Any) -> np.dtype[Any]:
    return load_adapter(detect_framework(x).name).dtype_of(x)


def _on_host(x: Any) -> bool:
    """Whether ``x`` lives in host memory."""
    fw = detect_framework(x)
    return "cpu" in fw.device_kinds and load_adapter(fw.name).device_of(x).kind == "cpu"


def _host_view(x: Any) -> np.ndarray[Any, Any]:
    """A NumPy view (or, where the framework has none, a copy) of a host array."""
    return load_adapter(detect_framework(x).name).to_numpy(x)


def _as_list(slices: object) -> list[Any]:
    """The slices in order; a clear error for None, strings, unordered or non-iterables."""
    unordered = isinstance(slices, (set, frozenset, Mapping))
    if unordered or isinstance(slices, (str, bytes)) or not isinstance(slices, Iterable):
        why = " (its order is not defined)" if unordered else ""
        raise ArgumentTypeError(
            "stack_slices needs a sequence of 2D arrays (a list, tuple or generator); "
            f"received {type(slices).__name__}{why}."
        )
    return list(slices)


def _check_slices(slices: list[Any]) -> None:
    """One shape, 2D, and no array that cannot leave its framework (masked arrays...)."""
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
        reason = unsupported_reason(detect_framework(s), s)
        if reason is not None:
            raise UnsupportedArrayError(f"stack_slices cannot take slice {i}: {reason}")


def _exact_by_type(src: np.dtype[Any], dst: np.dtype[Any]) -> bool:
    """Whether every value of ``src`` is a value of ``dst`` (NumPy's "safe" is not that:
    it lets int64 become float64)."""
    if src == dst or src.kind == "b":
        return True
    if is_extension(src) or is_extension(dst) or src.kind not in "iufc" or dst.kind not in "iufc":
        return False  # decided by the values
    if dst.kind in "iu":
        return src.kind in "iu" and np.can_cast(src, dst, "safe")
    if src.kind in "iu":  # exact while the integer fits the float's significand
        return src.itemsize * 8 - (src.kind == "i") <= np.finfo(dst).nmant + 1
    return np.can_cast(src, dst, "safe")


def _common_dtype(slices: list[Any]) -> np.dtype[Any]:
    """The one dtype all slices stack in (see the module notes)."""
    dtypes = [_dtype(s) for s in slices]
    if all(d == dtypes[0] for d in dtypes):
        return dtypes[0]
    try:
        common = np.result_type(*dtypes)
    except TypeError as exc:  # no common dtype (strings and numbers...)
        raise DtypePolicyError(
            f"stack_slices: slices of dtypes {sorted({str(d) for d in dtypes})} have no common "
            f"dtype ({exc}). Cast them to one dtype first."
        ) from exc
    for i, (s, d) in enumerate(zip(slices, dtypes, strict=True)):
        if _exact_by_type(d, common):
            continue
        if not _on_host(s) or exact_cast(_host_view(s), common) is None:
            where = "some values" if _on_host(s) else "values (on a device: not checked)"
            raise DtypePolicyError(
                f"stack_slices: slices of dtypes {sorted({str(d) for d in dtypes})} stack in "
                f"{common}, and {where} of slice {i} ({d}) would change in {common}. "
                "Cast the slices to one dtype that holds them all first."
            )
    return common


def _same_dtype(arrays: list[Any], name: str) -> list[Any]:
    """Converted slices cast to their common dtype in the target framework (exactly)."""
    adapter = load_adapter(name)
    common = _common_dtype(arrays)
    if not adapter.holds_dtype(common):
        raise DtypePolicyError(
            f"stack_slices: the slices' common dtype is {common}, which {name} cannot hold. "
            "Cast the slices to one dtype it holds first."
        )
    if not adapter.casts_on_device:  # the adapter's stack promotes (pyclesperanto)
        return arrays
    return [a if adapter.dtype_of(a) == common else adapter.astype(a, common) for a in arrays]


def stack_slices(slices: Sequence[Any], memory_type: MemoryTypeLike,
                 gpu_id: int | str | Device | None = None) -> Any:
    """Stack 2D slices into one ``[Z, Y, X]`` array of ``memory_type`` on ``gpu_id``.

    Parameters
    ----------
    slices : sequence of 2D arrays
        Any mix of memory types and dtypes; all of one shape. Mixed dtypes stack in their
        NumPy promotion (``np.result_type``) when every value survives it exactly.
    memory_type : MemoryType or str
        The type of the result.
    gpu_id : int, str or Device, optional
        The GPU of the result (see :func:`memtype.convert`).

    Raises
    ------
    ArgumentTypeError
        ``slices`` is not an ordered iterable (None, a string, a set, a dict...).
    ShapeError
        An empty sequence, a slice that is not 2D, or slices of different shapes
        (the message names the offending index and shape).
    UnsupportedArrayError
        A slice that cannot leave its framework (a masked array: its mask would be lost).
    DtypePolicyError
        Mixed dtypes whose common dtype would change some values (int64 with uint64...).
    """
    items = _as_list(slices)
    _check_slices(items)
    fw = get_framework(memory_type)
    if all(_on_host(s) for s in items):
        # one host copy with NumPy, then one zero-copy hand-over or one transfer to the device
        # (framework stacks of some dtypes, e.g. torch uint16, are much slower)
        common = _common_dtype(items)
        host = np.stack([_host_view(s) for s in items], dtype=common, casting="unsafe")
        return convert(host, fw.name, gpu_id=gpu_id)
    _common_dtype(items)  # the rule on the slices as given, before any conversion
    converted = [convert(s, fw.name, gpu_id=gpu_id) for s in items]
    return load_adapter(fw.name).stack(_same_dtype(converted, fw.name))


def unstack_slices(array: Any, memory_type: MemoryTypeLike,
                   gpu_id: int | str | Device | None = None,
                   validate_slices: bool = True) -> list[Any]:
    """Split a ``[Z, Y, X]`` array into a list of 2D slices of ``memory_type``.

    Parameters
    ----------
    array : array
        A 3D array of any loaded framework.
    memory_type : MemoryType or str
        The type of the slices.
    gpu_id : int, str or Device, optional
        The GPU of the slices (see :func:`memtype.convert`).
    validate_slices : bool
        Check that each slice is 2D.

    Raises
    ------
    UnsupportedArrayError
        ``array`` is not an array (None, a list...).
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
