"""Progress and measurement: a rich progress bar on a terminal, quiet otherwise; per-step figures.

Per-step figures come from :func:`memtype.gpu.profile` (time, conversions made by the
measuring thread, zero-copy ones among them, GPU peak memory), plus the worker process's
resident set size sampled at the end of each block.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from memtype.pipeline.execution.report import GroupResult, StepStats

__all__ = ["measure", "Progress", "RichProgress", "LineProgress", "make_progress"]


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
    from memtype.gpu import profile  # the profiler loads psutil: on the first step only

    profiler = profile(stats.name)
    try:
        with profiler:
            yield stats
    finally:
        record = profiler.records[-1]
        stats.seconds += record.wall_seconds
        stats.conversions += record.conversions
        stats.bytes_converted += record.bytes_converted
        stats.zero_copy += record.zero_copy
        stats.copied += record.conversions - record.zero_copy
        stats.peak_device = max(stats.peak_device, sum(record.peak_memory.values()))
        stats.peak_rss = max(stats.peak_rss, _rss())


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


class LineProgress(Progress):
    """One line per finished group, for logs and terminals without rich.

    ``[ 12/96] B03 done in 1.4 s`` (failed groups add their error's first line).
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._total = 0
        self._done = 0

    def start(self, total: int, description: str) -> None:
        """Print what is starting."""
        self._total = total
        self._write(f"{description}: {total} group{'s' if total != 1 else ''}")

    def group_done(self, result: GroupResult) -> None:
        """Print the group's outcome."""
        with self._lock:
            self._done += 1
            width = len(str(self._total))
            line = (f"[{self._done:>{width}}/{self._total}] {result.label} {result.status}"
                    f" in {result.seconds:.1f} s")
            if result.error:
                line += f": {result.error.splitlines()[0]}"
            self._write(line)

    def _write(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()


def make_progress(enabled: bool | None = None, stream: TextIO | None = None) -> Progress:
    """How a run reports progress on ``stream`` (stderr by default).

    ``None`` (the default): a rich bar on a terminal where rich is installed, else quiet.
    ``True``: the rich bar on a terminal with rich, else a line per finished group
    (:class:`LineProgress`, for logs and batch jobs). ``False``: quiet.
    """
    stream = stream or sys.stderr
    terminal = bool(getattr(stream, "isatty", lambda: False)())
    if enabled is False or (enabled is None and not terminal):
        return Progress()
    import importlib.util

    if terminal and importlib.util.find_spec("rich") is not None:
        return RichProgress(stream)
    return LineProgress(stream) if enabled else Progress()
