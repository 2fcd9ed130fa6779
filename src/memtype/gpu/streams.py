"""Per-thread device streams with safe hand-off between the caller's stream and ours.

``with thread_stream("torch", 0) as handoff:`` runs the block on this thread's own stream
on GPU 0, after that stream has waited for the work already queued on the caller's stream
(so inputs produced there are complete). ``handoff.adopt(x)`` marks arrays made on another
stream and read here (torch ``record_stream``: the allocator will not reuse their memory
while this stream may still read it); ``handoff.release(y)`` marks results handed back.
On exit the caller's stream waits for ours, so the caller can use the results at once.

This holds on any accelerator kind whose adapter has the stream functions (CUDA, a plug-in
accelerator). Frameworks without them (the adapter's ``has_streams`` is False) and host
devices get a hand-off that does nothing. CuPy has no ``record_stream``; its pool only reuses a
freed block on the stream that freed it, and the exit wait orders the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from memtype.conversion import target_device
from memtype.detect import detect_framework
from memtype.frameworks import CPU, DeviceAdapter, get_framework, load_adapter
from memtype.gpu.devices import GpuId
from memtype.types import MemoryTypeLike

__all__ = ["thread_stream", "StreamHandoff"]


class StreamHandoff:
    """Marks arrays crossing between the caller's stream and this thread's stream."""

    def __init__(self, adapter: Any = None, ours: Any = None, caller: Any = None) -> None:
        self._adapter = adapter
        self.stream = ours
        self.caller_stream = caller

    @property
    def active(self) -> bool:
        """True when a device stream is in use."""
        return self.stream is not None

    def adopt(self, arrays: Iterable[Any]) -> None:
        """Arrays made on another stream that this stream will read."""
        if self.stream is not None:
            for x in arrays:
                self._adapter.record_stream(x, self.stream)

    def release(self, arrays: Iterable[Any]) -> None:
        """Arrays made on this stream that the caller's stream will use."""
        if self.stream is not None:
            for x in arrays:
                self._adapter.record_stream(x, self.caller_stream)


_NO_STREAM = StreamHandoff()


@contextmanager
def thread_stream(memory_type: MemoryTypeLike | Any,
                  gpu_id: GpuId | None = None) -> Iterator[StreamHandoff]:
    """Run a block on this thread's own stream of ``memory_type`` on GPU ``gpu_id``.

    Parameters
    ----------
    memory_type : MemoryType, str or array
        The framework whose stream is used (an array: its framework and device).
    gpu_id : int, str or Device, optional
        The GPU (``0``, ``"cuda:0"`` or ``Device("cuda", 0)``); ``None`` is the host for
        frameworks that have one (no stream), else GPU 0.

    Yields
    ------
    StreamHandoff
        ``adopt`` / ``release`` arrays crossing streams; inactive on the host.

    Examples
    --------
    >>> with thread_stream("numpy") as handoff:
    ...     handoff.active
    False
    """
    if isinstance(memory_type, str):
        fw = get_framework(memory_type)
        device = target_device(fw, CPU, gpu_id)
    else:
        fw = detect_framework(memory_type)
        device = load_adapter(fw.name).device_of(memory_type)
    adapter = load_adapter(fw.name)
    if not isinstance(adapter, DeviceAdapter):  # a host-only framework: no stream
        yield _NO_STREAM
        return
    if not device.is_gpu or not adapter.has_streams:  # CUDA-style adapters have streams
        with adapter.stream(device):
            yield _NO_STREAM
        return
    caller = adapter.current_stream(device)
    with adapter.stream(device):
        ours = adapter.current_stream(device)
        adapter.wait_stream(ours, caller)
        try:
            yield StreamHandoff(adapter, ours, caller)
        finally:
            adapter.wait_stream(caller, ours)
