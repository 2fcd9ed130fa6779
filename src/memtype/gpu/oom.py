"""Out-of-memory recognition (exact exception types) and the recovery loop.

Recovery, in order: leave the ``except`` block and clear the failed frames (so the tensors
they held are freed), free the caches of every loaded framework, retry the same call; then
the further stages the caller gives (the decorators: slice by slice for a function declared
slice-separable, on the CPU when asked for). A failure that is not an out-of-memory error is
re-raised at once, untouched; so is a budget refusal (:class:`MemoryBudgetError`): memtype's
own limit said no, and freeing caches does not change its answer.
"""

from __future__ import annotations

import gc
import logging
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from memtype.errors import MemoryBudgetError
from memtype.frameworks import load_adapter, loaded_frameworks, ran_out_of_memory
from memtype.gpu.caches import cleanup_all_gpu_frameworks

__all__ = ["is_oom_error", "OOMRecoveryWarning", "recover", "release_memory"]

T = TypeVar("T")
_log = logging.getLogger("memtype.gpu")


class OOMRecoveryWarning(RuntimeWarning):
    """A call ran out of memory and was completed slice by slice (a function declared
    slice-separable) or on the CPU (``oom_fallback="cpu"``)."""


def is_oom_error(exc: BaseException) -> bool:
    """Whether ``exc`` means a framework (or the host) ran out of memory.

    Decided by the exact exception types the adapter of each loaded framework declares
    (``Adapter.oom_errors``, narrowed by ``Adapter.is_oom``: torch's and CuPy's
    ``OutOfMemoryError``, for instance) and ``MemoryError``; never by a substring of an
    arbitrary message. A budget refusal
    (:class:`~memtype.errors.MemoryBudgetError`, a ``MemoryError`` too) is not one: no
    memory ran out, memtype's own limit refused, and a retry would be refused again.

    Examples
    --------
    >>> is_oom_error(MemoryError())
    True
    >>> is_oom_error(ValueError("index out of memory range"))
    False
    >>> from memtype.errors import MemoryBudgetError
    >>> is_oom_error(MemoryBudgetError("would exceed the budget"))
    False
    """
    if isinstance(exc, MemoryError):
        return not isinstance(exc, MemoryBudgetError)  # before the adapters' types too
    for fw in loaded_frameworks():
        if ran_out_of_memory(load_adapter(fw.name), exc):
            return True
    return False


def release_memory() -> None:
    """Collect garbage, then free the cached device memory of every loaded framework.

    What out-of-memory recovery does before it retries: the arrays of a failed attempt are
    collected, then each caching allocator (torch, CuPy...) hands its free blocks back, so
    the next attempt, or another framework, finds the device as empty as the live arrays
    allow. Nothing that is still referenced is freed.

    Examples
    --------
    >>> import memtype as mt
    >>> mt.gpu.release_memory()
    """
    gc.collect()
    for report in cleanup_all_gpu_frameworks():
        _log.debug("OOM recovery: %s %s, freed %s", report.memory_type, report.status,
                   report.freed_bytes)


class _Done(Generic[T]):
    """A successful attempt's value."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value


def _attempt(fn: Callable[[], T]) -> _Done[T] | BaseException:
    """``fn()``'s value, or the out-of-memory error it raised with its frames cleared."""
    try:
        return _Done(fn())
    except Exception as exc:  # re-raised below unless it is an out-of-memory error
        if not is_oom_error(exc):
            raise
        error: BaseException = exc
    traceback.clear_frames(error.__traceback__)  # outside the except block: frees tensors
    return error


def recover(error: BaseException, stages: Sequence[tuple[str, Callable[[], T]]],
            name: str) -> T:
    """After an out-of-memory ``error``, free memory and try each ``(label, retry)`` in turn.

    Call it after leaving the ``except`` block that caught ``error``. The failed frames are
    cleared first, so the arrays they held can be freed.

    Parameters
    ----------
    error : BaseException
        The out-of-memory error of the first attempt.
    stages : sequence of (str, callable)
        The attempts in order, e.g. ``[("retry", call), ("slice by slice", by_slice)]``.
        Every stage but a plain ``"retry"`` warns with :class:`OOMRecoveryWarning`.
    name : str
        The function's name, for the warning.

    Raises
    ------
    BaseException
        The last out-of-memory error when every stage ran out of memory; any other error
        at once.
    """
    traceback.clear_frames(error.__traceback__)
    outcome: _Done[T] | BaseException = error
    for label, retry in stages:
        release_memory()
        if label != "retry":
            warnings.warn(
                f"{name} ran out of memory ({type(outcome).__name__}); running it {label}.",
                OOMRecoveryWarning, stacklevel=4,
            )
        outcome = _attempt(retry)
        if isinstance(outcome, _Done):
            return outcome.value
    assert isinstance(outcome, BaseException)
    raise outcome
