"""profile(): wall time, device time, peak memory and conversions, per call or per block.

``with profile() as p:`` records one :class:`ProfileRecord` per block; ``@profile`` records one
per call of the decorated function (its profiler is ``f.profiler``). Conversions are counted
through :func:`memtype.conversion.add_conversion_hook`, only those made by the profiling thread.
Device time comes from CUDA events on torch's current stream when torch has started CUDA
(the block then waits for that stream to finish). Peak memory is read from every loaded
framework's adapter on every visible GPU; with ``reset_peaks=True`` (default) torch's and
TensorFlow's peak counters are reset on entry, so the figure is the block's own peak.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType, TracebackType
from typing import Any, Self, TypeVar, overload

from memtype.conversion import ConversionEvent, add_conversion_hook, remove_conversion_hook
from memtype.frameworks import DeviceTiming, gpu_adapters, load_adapter
from memtype.gpu.devices import get_gpu_manager
from memtype.gpu.memory import memory_usage

__all__ = ["ProfileRecord", "Profiler", "profile"]

F = TypeVar("F", bound=Callable[..., Any])



@dataclass(frozen=True)
class ProfileRecord:
    """One profiled call or block.

    Attributes
    ----------
    name : str
    wall_seconds : float
    device_seconds : float or None
        GPU time between entry and exit on torch's current CUDA stream; None without CUDA.
    peak_memory : mapping of str to int
        Per framework, its peak bytes on the GPUs (summed over GPUs); empty without GPU.
    conversions : int
        Conversions between two types or devices made by this thread inside the block.
    bytes_converted : int
    zero_copy : int
        How many of those conversions shared memory with their input.
    conversion_seconds : float
    error : str or None
        The exception type's name when the block raised.
    """

    name: str
    wall_seconds: float
    device_seconds: float | None = None
    peak_memory: Mapping[str, int] = field(default_factory=dict)
    conversions: int = 0
    bytes_converted: int = 0
    zero_copy: int = 0
    conversion_seconds: float = 0.0
    error: str | None = None


class _Frame:
    """A block being profiled: its counters while it runs."""

    def __init__(self, name: str, owner: Profiler) -> None:
        self.name = name
        self.owner = owner
        self.conversions = 0
        self.bytes = 0
        self.zero_copy = 0
        self.conversion_seconds = 0.0
        self.peaks: dict[str, int] = {}
        self.events: tuple[Any, Any] | None = None
        self.start = 0.0

    def add(self, event: ConversionEvent) -> None:
        """Count one conversion."""
        self.conversions += 1
        self.bytes += event.nbytes
        self.zero_copy += int(event.zero_copy)
        self.conversion_seconds += event.seconds

    def fold(self, peaks: Mapping[str, int]) -> None:
        """Keep the highest peak seen per framework."""
        for name, value in peaks.items():
            self.peaks[name] = max(self.peaks.get(name, 0), value)


_local = threading.local()
_hook_lock = threading.Lock()
_active = [0]  # frames open in all threads; the hook is registered while this is positive


def _frames() -> list[_Frame]:
    """This thread's open frames, outermost first."""
    frames: list[_Frame] = _local.__dict__.setdefault("frames", [])
    return frames


def _on_conversion(event: ConversionEvent) -> None:
    """The conversion hook: count the event in this thread's open frames."""
    for frame in getattr(_local, "frames", ()):
        frame.add(event)


def _hook(delta: int) -> None:
    """Register the hook when the first frame opens; remove it when the last closes."""
    with _hook_lock:
        _active[0] += delta
        if delta > 0 and _active[0] == 1:
            add_conversion_hook(_on_conversion)
        elif delta < 0 and _active[0] == 0:
            remove_conversion_hook(_on_conversion)


def _peak_key(name: str) -> str | None:
    """Which of a framework's ``memory_info`` figures is its peak (adapter ``peak_key``)."""
    return load_adapter(name).peak_key


def _read_peaks() -> dict[str, int]:
    """Per framework holding GPU memory, its peak bytes summed over the visible GPUs."""
    peaks: dict[str, int] = {}
    for mem in memory_usage().values():
        for name, info in mem.frameworks.items():
            key = _peak_key(name)
            if key is not None and key in info:
                peaks[name] = peaks.get(name, 0) + info[key]
    return peaks


def _has_devices() -> bool:
    """Whether there is a managed GPU, or a started framework sees a device of another
    accelerator kind (memory_usage lists both)."""
    return bool(get_gpu_manager().count) or any(
        a.gpu_count() for fw, a in gpu_adapters(every_kind=True) if not fw.managed_gpu)


def _reset_peaks() -> None:
    """Reset the peak counters of the started frameworks that have one, on every device
    (managed GPUs: those the GPU manager lists)."""
    count = get_gpu_manager().count
    for fw, adapter in gpu_adapters(every_kind=True):  # a runtime not started has no peak
        if adapter.resets_peak:
            seen = adapter.gpu_count()
            for gpu_id in range(min(count, seen) if fw.managed_gpu else seen):
                adapter.reset_peak(gpu_id)


def _start_events() -> tuple[Any, Any] | None:
    """A recorded start event and an end event from the first started framework that times
    device work (adapter ``timing_events``), or None."""
    for _fw, adapter in gpu_adapters(every_kind=True):
        events = adapter.timing_events() if isinstance(adapter, DeviceTiming) else None
        if events is not None:
            return events
    return None


def _device_seconds(events: tuple[Any, Any] | None) -> float | None:
    """Seconds between the events (waits for the end event)."""
    if events is None:
        return None
    start, end = events
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / 1000.0


class Profiler:
    """Collects :class:`ProfileRecord` s; a context manager and a decorator (see :func:`profile`).

    Parameters
    ----------
    name : str, optional
        The records' name (default: ``"block"``, or the decorated function's qualified name).
    reset_peaks : bool
        Reset torch's and TensorFlow's GPU peak counters on entry (see the module notes).
    """

    def __init__(self, name: str | None = None, *, reset_peaks: bool = True) -> None:
        self.name = name
        self.reset_peaks = reset_peaks
        self._records: list[ProfileRecord] = []
        self._lock = threading.Lock()

    @property
    def records(self) -> list[ProfileRecord]:
        """The records so far, oldest first (a copy)."""
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        """Forget the records."""
        with self._lock:
            self._records.clear()

    def _open(self, name: str) -> _Frame:
        """Start a frame on this thread."""
        frames = _frames()
        frame = _Frame(name, self)
        if _has_devices():
            peaks = _read_peaks()
            for outer in frames:
                outer.fold(peaks)
            if self.reset_peaks:
                _reset_peaks()
            frame.events = _start_events()
        _hook(+1)
        frames.append(frame)
        frame.start = time.perf_counter()
        return frame

    def _close(self, error: BaseException | None) -> ProfileRecord:
        """Finish this thread's innermost frame and store its record."""
        wall = time.perf_counter() - _frames()[-1].start
        frame = _frames().pop()
        _hook(-1)
        device = _device_seconds(frame.events)
        if _has_devices():
            peaks = _read_peaks()
            for seen in (*_frames(), frame):
                seen.fold(peaks)
        record = ProfileRecord(
            frame.name, wall, device, MappingProxyType(dict(frame.peaks)), frame.conversions,
            frame.bytes, frame.zero_copy, frame.conversion_seconds,
            None if error is None else type(error).__name__,
        )
        with self._lock:
            self._records.append(record)
        return record

    def __enter__(self) -> Self:
        self._open(self.name or "block")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._close(exc)

    def __call__(self, fn: F) -> F:
        """Profile every call of ``fn``; the wrapper's ``profiler`` attribute is this profiler."""
        name = self.name or str(getattr(fn, "__qualname__", repr(fn)))

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self._open(name)
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                self._close(exc)
                raise
            self._close(None)
            return result

        wrapper.profiler = self  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    def table(self) -> str:
        """The records as a fixed-width text table (printing is the caller's choice)."""
        header = ("name", "wall ms", "device ms", "conversions", "zero-copy", "MiB converted",
                  "peak MiB", "error")
        rows = [header] + [_row(r) for r in self.records]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                           for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()
                 for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _row(record: ProfileRecord) -> tuple[str, ...]:
    """One table row."""
    mib = float(1 << 20)
    device = "-" if record.device_seconds is None else f"{record.device_seconds * 1e3:.3f}"
    peaks = ", ".join(f"{k}={v / mib:.1f}" for k, v in record.peak_memory.items()) or "-"
    return (record.name, f"{record.wall_seconds * 1e3:.3f}", device, str(record.conversions),
            str(record.zero_copy), f"{record.bytes_converted / mib:.2f}", peaks,
            record.error or "")


@overload
def profile(func: F, /) -> F: ...


@overload
def profile(func: str | None = None, /, *, name: str | None = None,
            reset_peaks: bool = True) -> Profiler: ...


def profile(func: Any = None, /, *, name: str | None = None,
            reset_peaks: bool = True) -> Any:
    """Profile a block (context manager) or every call of a function (decorator).

    Parameters
    ----------
    func : callable or str, optional
        A function to decorate (``@profile``), or the records' name.
    name : str, optional
        The records' name.
    reset_peaks : bool
        Reset torch's and TensorFlow's GPU peak memory counters on entry.

    Returns
    -------
    Profiler or callable
        A :class:`Profiler` (``with profile() as p``, ``@profile(name=...)``), or, given a
        function, that function wrapped; its records are in ``wrapper.profiler.records``.

    Examples
    --------
    >>> import numpy as np, memtype as mt
    >>> with mt.gpu.profile("to torch") as p:
    ...     t = mt.convert(np.ones(1000), "torch")
    >>> rec = p.records[0]
    >>> rec.conversions, rec.zero_copy, rec.bytes_converted
    (1, 1, 8000)
    >>> print(p.table())  # doctest: +SKIP
    """
    if callable(func):
        return Profiler(name, reset_peaks=reset_peaks)(func)
    return Profiler(name if name is not None else func, reset_peaks=reset_peaks)
