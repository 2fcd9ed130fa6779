"""A toy accelerator library ("toydev"), built on NumPy, for testing memtype's GPU plumbing
without a GPU: two devices, each with a caching allocator (bytes held by live arrays, bytes
cached after they die, a capacity), per-thread streams that record where work ran, and an
out-of-memory error of its own. Its arrays are "on the device": reading them on the host is
a copy (:meth:`ToyDeviceArray.host`)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DEVICE_COUNT = 2
DEFAULT_CAPACITY = 64 << 20


class ToyOutOfMemory(RuntimeError):
    """A toy device has no room for an allocation (like ``torch.OutOfMemoryError``)."""


@dataclass
class DeviceState:
    """One toy device's allocator: live bytes, cached bytes, capacity, counters."""

    index: int
    capacity: int = DEFAULT_CAPACITY
    held: int = 0
    cached: int = 0
    peak: int = 0
    allocations: int = 0
    empty_cache_calls: int = 0
    synchronize_calls: int = 0
    blocks: list[int] = field(default_factory=list)  # sizes of the cached blocks
    events: list[tuple[str, int, str]] = field(default_factory=list)  # (what, thread, stream)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def allocate(self, nbytes: int) -> None:
        """Take ``nbytes``, reusing a cached block of that exact size if there is one;
        ToyOutOfMemory when a new block would exceed the capacity."""
        with self.lock:
            if nbytes in self.blocks:
                self.blocks.remove(nbytes)
                self.cached -= nbytes
            elif self.held + self.cached + nbytes > self.capacity:
                raise ToyOutOfMemory(
                    f"toyaccel:{self.index} out of memory: tried to allocate {nbytes} bytes; "
                    f"{self.held} held, {self.cached} cached, capacity {self.capacity}.")
            self.held += nbytes
            self.peak = max(self.peak, self.held)
            self.allocations += 1

    def free(self, nbytes: int) -> None:
        """A live array died: its block goes to the cache (until ``empty_cache``)."""
        with self.lock:
            self.held -= nbytes
            self.cached += nbytes
            self.blocks.append(nbytes)

    def empty_cache(self) -> None:
        """Release the cached blocks."""
        with self.lock:
            self.cached = 0
            self.blocks.clear()
            self.empty_cache_calls += 1


DEVICES: list[DeviceState] = [DeviceState(i) for i in range(DEVICE_COUNT)]


def reset(capacity: int = DEFAULT_CAPACITY) -> None:
    """Fresh allocators and stream logs (one test's state never reaches another)."""
    DEVICES[:] = [DeviceState(i, capacity) for i in range(DEVICE_COUNT)]
    _local.__dict__.clear()


def _check_index(device: int) -> int:
    if isinstance(device, bool) or not isinstance(device, int) or not 0 <= device < DEVICE_COUNT:
        raise ValueError(f"toyaccel device must be 0..{DEVICE_COUNT - 1}; received {device!r}.")
    return device


class ToyDeviceArray:
    """An array held in a toy device's memory (a private NumPy buffer plus a device index)."""

    __slots__ = ("_values", "_device", "__weakref__")

    def __init__(self, values: Any, device: int = 0) -> None:
        index = _check_index(device)
        data = np.array(values, copy=True)
        state = DEVICES[index]
        state.allocate(data.nbytes)
        weakref.finalize(self, state.free, data.nbytes)
        self._values, self._device = data, index

    @property
    def device(self) -> int:
        return self._device

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._values.shape)

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._values.dtype

    @property
    def ndim(self) -> int:
        return int(self._values.ndim)

    def __getitem__(self, index: Any) -> ToyDeviceArray:
        return ToyDeviceArray(self._values[index], self._device)

    def __setitem__(self, index: Any, value: Any) -> None:
        self._values[index] = value

    def host(self) -> np.ndarray[Any, Any]:
        """A host copy of the values (a device-to-host transfer)."""
        return self._values.copy()

    def buffer(self) -> np.ndarray[Any, Any]:
        """The device buffer itself (for kernels of this library, run on the device)."""
        return self._values

    def __repr__(self) -> str:
        return f"ToyDeviceArray(shape={self.shape}, dtype={self.dtype}, device={self._device})"


def zeros(shape: tuple[int, ...], dtype: Any = np.float32, device: int = 0) -> ToyDeviceArray:
    """A zero-filled array on ``device`` (an allocation that may raise ToyOutOfMemory)."""
    return ToyDeviceArray(np.zeros(shape, dtype), device)


# -- streams: one per (thread, device), current while its context is entered --------------

class ToyStream:
    """A named stream of one device."""

    def __init__(self, device: int, name: str) -> None:
        self.device, self.name = device, name

    def __repr__(self) -> str:
        return f"ToyStream({self.name!r})"


_local = threading.local()


def _streams() -> dict[int, list[ToyStream]]:
    """This thread's stack of current streams, per device (the default stream at the bottom)."""
    stacks: dict[int, list[ToyStream]] | None = getattr(_local, "stacks", None)
    if stacks is None:
        stacks = {i: [ToyStream(i, f"default:{i}")] for i in range(DEVICE_COUNT)}
        _local.stacks = stacks
    return stacks


def current_stream(device: int) -> ToyStream:
    """The stream current on ``device`` in this thread."""
    return _streams()[_check_index(device)][-1]


def current_device() -> int:
    """The device of this thread's innermost entered stream (0 outside any)."""
    return int(getattr(_local, "device", 0))


def record(device: int, what: str) -> None:
    """Log ``what`` ran on ``device`` in this thread's current stream."""
    DEVICES[device].events.append((what, threading.get_ident(), current_stream(device).name))


@contextmanager
def use_stream(device: int) -> Iterator[ToyStream]:
    """Make this thread's own stream on ``device`` current (and that device the current one)."""
    index = _check_index(device)
    stream = ToyStream(index, f"thread-{threading.get_ident()}:{index}")
    stack, previous = _streams()[index], current_device()
    stack.append(stream)
    _local.device = index
    record(index, "enter")
    try:
        yield stream
    finally:
        record(index, "exit")
        stack.pop()
        _local.device = previous
