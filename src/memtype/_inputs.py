"""A decorated call's converted arguments (:class:`Inputs`) and the checks made on them after
the call: writes to immutable caller data, writes before an out-of-memory retry, read-only
notes (the isolation rule itself: :mod:`memtype._arguments`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from memtype.errors import InputWriteError
from memtype.frameworks import Adapter, Device

__all__ = ["Inputs", "Watched", "Guarded", "write_count", "read_only", "note_read_only",
           "check_guarded", "check_unwritten", "copied_before_release"]

Aliased = Callable[[], bool] | None
"""Whether a converted input is its caller's memory, asked only once it has been written to
(``None``: it is the caller's own array)."""
Watched = tuple[Any, int, Aliased]
"""A caller's mutable array passed writable: ``(array, write count, aliased)``."""
Guarded = tuple[Any, int, str, Aliased]
"""An alias of immutable caller data: ``(array, write count, source type, aliased)``."""


_counted: dict[type, bool] = {}


def write_count(x: Any) -> int | None:
    """How many in-place writes ``x``'s memory has had, where its framework counts them.

    torch keeps such a count (``Tensor._version``, shared by a tensor and its views, raised by
    every in-place operation); ``None`` for arrays without one (inference tensors included).
    Whether a type has the attribute is asked once per type (a miss costs more than a hit).
    """
    kind = type(x)
    counted = _counted.get(kind)
    if counted is None:
        counted = _counted[kind] = hasattr(kind, "_version")
    if not counted:
        return None
    try:
        count = getattr(x, "_version", None)
    except RuntimeError:  # torch inference tensors keep no count
        return None
    return count if type(count) is int else None


def read_only(x: Any) -> bool:
    """Whether ``x`` is flagged read-only (a NumPy array with ``writeable=False``)."""
    flags = getattr(x, "flags", None)
    return flags is not None and getattr(flags, "writeable", True) is False


class Inputs:
    """A call's arguments after conversion, and what the rest of the call needs to know.

    ``dtype`` is the caller's dtype of the first array (what ``PRESERVE_INPUT`` returns),
    ``first`` / ``first_at`` the converted first array and its position (an index or a
    keyword; ``None`` when it sits inside a container), ``arrays`` all converted arrays.
    ``watched``: :data:`Watched` (the caller's mutable arrays passed writable);
    ``guarded``: :data:`Guarded` (aliases of immutable caller data). Whether a converted
    array aliases its caller's is asked only after a write, when it matters.
    """

    __slots__ = ("args", "kwargs", "device", "gpu_id", "dtype", "first", "first_at", "arrays",
                 "watched", "guarded")

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any], device: Device,
                 gpu_id: int | None, dtype: np.dtype[Any] | None, first: Any,
                 first_at: int | str | None, arrays: Sequence[Any],
                 watched: Sequence[Watched] = (),
                 guarded: Sequence[Guarded] = ()) -> None:
        self.args = args
        self.kwargs = kwargs
        self.device = device
        self.gpu_id = gpu_id
        self.dtype = dtype
        self.first = first
        self.first_at = first_at
        self.arrays = arrays
        self.watched = watched
        self.guarded = guarded


def note_read_only(exc: BaseException, inputs: Inputs, name: str) -> None:
    """Add a note to a failed call's error when the function got read-only arrays (a
    function that writes its input, such as Cython code needing a writable buffer, fails
    on them): the way out is ``copy_inputs=True``. The error itself is not changed."""
    if any(read_only(a) for a in inputs.arrays):
        exc.add_note(
            f"memtype passed {name} read-only input(s): the caller's data is immutable (a JAX "
            "array, a TensorFlow tensor or a read-only NumPy array). If the function writes "
            "to its input, decorate it with copy_inputs=True to give it a writable copy.")


def check_guarded(inputs: Inputs, name: str) -> None:
    """Raise :class:`InputWriteError` if the function wrote to immutable caller data."""
    for array, count, source, aliased in inputs.guarded:
        if write_count(array) != count and (aliased is None or aliased()):
            raise InputWriteError(
                f"{name} wrote to an input that shares memory with its caller's {source} "
                f"array; {source} arrays are immutable, and that array's values have now "
                f"changed. Expected a function that does not write to its inputs; pass "
                f"copy_inputs=True to give {name} a private copy."
            )


def check_unwritten(inputs: Inputs, error: BaseException, name: str) -> None:
    """Before an out-of-memory retry: raise :class:`InputWriteError` (from ``error``) if the
    failed attempt wrote to an input that is its caller's memory (the retry would see the
    modified values)."""
    check_guarded(inputs, name)
    if any(write_count(array) != count and (aliased is None or aliased())
           for array, count, aliased in inputs.watched):
        raise InputWriteError(
            f"{name} ran out of memory ({type(error).__name__}) after writing to an input "
            "that is its caller's array, so a retry would not see the caller's original "
            f"values; memtype does not retry. Expected a function that leaves its inputs "
            f"unchanged, or pass copy_inputs=True (each retry then gets a fresh copy)."
        ) from error


def copied_before_release(adapter: Adapter, private: Any) -> None:
    """Wait for the copy of another framework's GPU memory, made on this framework's stream.

    The caller's framework knows nothing of that stream: once the caller drops its array,
    its allocator may hand the memory out again (on its own stream) before the copy has
    read it. Waiting here closes that window; it costs one synchronisation per call that
    receives another framework's GPU array (host arrays need none).
    """
    device = adapter.device_of(private)
    if device.is_gpu:
        adapter.synchronize(device)
