"""Progress and measurement: a rich progress bar on a terminal, quiet otherwise; per-step figures.

Conversions are counted through :func:`memtype.convert.add_conversion_hook`; the hook is
installed once per process (on first use, never at import) and credits each conversion to
the step running on the calling thread.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from memtype.convert import ConversionEvent, add_conversion_hook
from memtype.pipeline.report import GroupResult, StepStats

__all__ = ["measure", "Progress", "make_progress"]

_current = threading.local()
_installed: list[bool] = [False]
_install_lock = threading.Lock()


def _on_conversion(event: ConversionEvent) -> None:
    """Credit a conversion to the step measured on this thread, if any."""
    stats: StepStats | None = getattr(_current, "stats", None)
    if stats is None:
        return
    stats.conversions += 1
    stats.bytes_converted += event.nbytes
    if event.zero_copy:
        stats.zero_copy += 1
    else:
        stats.copied += 1


def _install_hook() -> None:
    """Register the conversion hook once per process."""
    with _install_lock:
        if not _installed[0]:
            add_conversion_hook(_on_conversion)
            _installed[0] = True


def _rss() -> int:
    """This process's resident set size in bytes (0 where psutil cannot tell)."""
    import psutil

    try:
        return int(psutil.Process().memory_info().rss)
    except psutil.Error:  # an unreadable /proc (sandboxes): report no figure
        return 0


@contextmanager
def measure(stats: StepStats) -> Iterator[StepStats]:
    """Time a block, credit its conversions to ``stats``, and sample memory at its end."""
    _install_hook()
    previous = getattr(_current, "stats", None)
    _current.stats = stats
    start = time.perf_counter()
    try:
        yield stats
    finally:
        stats.seconds += time.perf_counter() - start
        stats.peak_rss = max(stats.peak_rss, _rss())
        _current.stats = previous


class Progress:
    """Reports progress over groups (and steps, for in-process executors). Quiet by default."""

    def start(self, total: int, description: str) -> None:
        """A run of ``total`` groups begins."""

    def step(self, group: str, step: str) -> None:
        """``group`` has started ``step`` (called from worker threads)."""

    def group_done(self, result: GroupResult) -> None:
        """A group finished (done, failed or skipped)."""

    def close(self) -> None:
        """The run is over."""


class RichProgress(Progress):
    """A rich progress bar over the groups, showing the step each running group is in."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichBar

        self._lock = threading.Lock()
        self._bar = RichBar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("{task.fields[status]}"),
                            console=Console(file=stream), transient=True)
        self._task: Any = None

    def start(self, total: int, description: str) -> None:
        """Show the bar."""
        self._bar.start()
        self._task = self._bar.add_task(description, total=total, status="")

    def step(self, group: str, step: str) -> None:
        """Show the latest group and step."""
        with self._lock:
            self._bar.update(self._task, status=f"{group}: {step}")

    def group_done(self, result: GroupResult) -> None:
        """Advance the bar by one group."""
        with self._lock:
            self._bar.update(self._task, advance=1, status=f"{result.label}: {result.status}")

    def close(self) -> None:
        """Remove the bar's live display."""
        self._bar.stop()


def make_progress(enabled: bool | None = None, stream: TextIO | None = None) -> Progress:
    """A rich bar when ``enabled`` (by default: when ``stream``, stderr, is a terminal and rich
    is installed), else the quiet :class:`Progress`."""
    stream = stream or sys.stderr
    if enabled is None:
        enabled = bool(getattr(stream, "isatty", lambda: False)())
    if not enabled:
        return Progress()
    import importlib.util

    if importlib.util.find_spec("rich") is None:
        return Progress()
    return RichProgress(stream)
