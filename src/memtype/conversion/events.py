"""Conversion events: what a conversion reports, to hooks (the profiler) or to a capture.

The fast path of :func:`memtype.convert` reads one flag, :data:`watched`, and reports
nothing while no hook is registered and no capture is open.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["ConversionEvent", "add_conversion_hook", "remove_conversion_hook",
           "capture_conversions", "report", "watched"]


@dataclass(frozen=True)
class ConversionEvent:
    """One conversion, as reported to conversion hooks (the profiler)."""

    source_type: str
    target_type: str
    nbytes: int
    zero_copy: bool
    seconds: float


_hooks: list[Callable[[ConversionEvent], None]] = []
_captured: ContextVar[list[ConversionEvent] | None] = ContextVar("memtype_captured", default=None)
_lock = threading.Lock()
_captures = 0  # captures open in any thread
watched = False  # hooks or captures: the fast path's one check (a ContextVar read is slower)


def _watch(hooks_delta: Callable[[], None] | None = None, captures: int = 0) -> None:
    """Change the hooks or the count of open captures, and the fast path's flag with them."""
    global _captures, watched
    with _lock:
        if hooks_delta is not None:
            hooks_delta()
        _captures += captures
        watched = bool(_hooks) or _captures > 0


def add_conversion_hook(hook: Callable[[ConversionEvent], None]) -> None:
    """Call ``hook`` after every conversion between two different types or devices."""
    _watch(lambda: _hooks.append(hook))


def remove_conversion_hook(hook: Callable[[ConversionEvent], None]) -> None:
    """Stop calling ``hook``; a hook that is not registered is ignored."""
    _watch(lambda: _hooks.remove(hook) if hook in _hooks else None)


@contextmanager
def capture_conversions() -> Iterator[list[ConversionEvent]]:
    """Collect the conversions made in this context, hidden from the registered hooks.

    Inside the ``with`` block, every conversion this thread (or asyncio task) makes is
    appended to the yielded list and is *not* reported to the hooks of
    :func:`add_conversion_hook`; other threads are unaffected. memtype's pipeline planner
    uses it so that its trial conversions do not show up in a user's profiler.

    Examples
    --------
    >>> import numpy as np, memtype as mt
    >>> with mt.capture_conversions() as events:
    ...     _ = mt.convert(np.zeros(4), "torch")
    >>> [(e.source_type, e.target_type, e.zero_copy) for e in events]
    [('numpy', 'torch', True)]
    """
    events: list[ConversionEvent] = []
    token = _captured.set(events)
    _watch(captures=1)
    try:
        yield events
    finally:
        _watch(captures=-1)
        _captured.reset(token)


def report(event: ConversionEvent) -> None:
    """Hand ``event`` to this context's capture if one is open, else to every hook."""
    captured = _captured.get()
    if captured is not None:
        captured.append(event)
        return
    for hook in tuple(_hooks):
        hook(event)
