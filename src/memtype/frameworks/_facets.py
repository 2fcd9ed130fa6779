"""The optional facets of an adapter: what only some frameworks have, each a class with its
defaults that such a framework's adapter also derives from.

- :class:`DeviceAdapter` (device memory and streams): an :class:`Adapter` whose arrays may live
  on accelerator devices, or whose runtime holds memory: devices, moves between them, streams,
  memory statistics, caps and peaks, out-of-memory errors, run-time settings.
- :class:`DeviceTiming`: device-side timing events (the profiler).
- :class:`PinnedSpills`: copies of device arrays in pinned host memory (storage spills).
- :class:`Diagnostics`: what ``memtype info`` prints about the framework (its devices, why it
  sees none, its DLPack version and runtime).

Code outside :mod:`memtype.frameworks` asks ``isinstance(adapter, DeviceAdapter)`` (or the
capability flags, which are False without the facet), never ``getattr``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any, ClassVar

from memtype.frameworks._adapter import Adapter
from memtype.frameworks._device import Device, DeviceProperties

__all__ = ["DeviceAdapter", "DeviceTiming", "PinnedSpills", "Diagnostics", "HOST_OOM_ERRORS",
           "ran_out_of_memory", "diagnostics"]

HOST_OOM_ERRORS: tuple[type[BaseException], ...] = (MemoryError,)
"""What running out of memory raises in a framework without the device facet."""


class DeviceAdapter(Adapter):
    """An adapter with device memory and streams; every method a default."""

    _defaults: ClassVar[bool] = True

    # -- devices ---------------------------------------------------------------------------

    def on_host(self, x: Any) -> bool:
        """Whether ``x`` lives in host memory (a fast check). Default: asks ``device_of``."""
        return not self.device_of(x).is_gpu

    def gpu_count(self) -> int:
        """How many accelerator devices of its kind the framework sees. Default: 0."""
        return 0

    def to_device(self, x: Any, device: Device) -> Any:
        """``x`` moved (or copied) to ``device`` within the framework. Default: ``x``."""
        return x

    def current_device(self) -> int:
        """The ordinal of the framework's current device context (``has_device_context``).
        Default: 0 (a GPU-only call without a ``gpu_id`` runs on GPU 0)."""
        return 0

    def device_properties(self, index: int) -> DeviceProperties:
        """Describe managed GPU ``index`` (``describes_devices``; may start the runtime).
        Default: nothing known (an empty name, 0 bytes)."""
        return DeviceProperties(name="", total_bytes=0, free_bytes=0)

    # -- running work ----------------------------------------------------------------------

    def synchronize(self, device: Device) -> None:
        """Wait for all work queued on ``device``. Default: nothing queues."""
        return None

    def stream(self, device: Device) -> AbstractContextManager[Any]:
        """A context running the framework's work on this thread's stream on ``device``."""
        return nullcontext()

    def current_stream(self, device: Device) -> Any:
        """The stream current on ``device`` in this thread (``has_streams``). Default: None."""
        return None

    def wait_stream(self, waiter: Any, producer: Any) -> None:
        """Make ``waiter`` wait for the work queued so far on ``producer``. Default: nothing
        to wait for."""
        return None

    def record_stream(self, x: Any, stream: Any) -> None:
        """Tell the allocator that ``stream`` uses ``x``'s memory. Default: nothing to tell."""
        return None

    # -- memory ----------------------------------------------------------------------------

    def runtime_started(self) -> bool:
        """Whether the device runtime is initialised (asking starts nothing). Default: True
        (nothing to start)."""
        return True

    def empty_cache(self) -> None:
        """Free the framework's cached-but-unused device memory. Default: nothing cached."""
        return None

    def memory_info(self, gpu_id: int) -> dict[str, int]:
        """What the framework holds on GPU ``gpu_id`` in bytes (framework-specific keys)."""
        return {}

    def oom_errors(self) -> tuple[type[BaseException], ...]:
        """Exception types that may mean the framework ran out of memory."""
        return HOST_OOM_ERRORS

    def is_oom(self, exc: BaseException) -> bool:
        """Whether ``exc`` really is an out-of-memory error. Default: one of
        :meth:`oom_errors`."""
        return isinstance(exc, self.oom_errors())

    def set_memory_cap(self, gpu_id: int, limit_bytes: int | None, total_bytes: int) -> None:
        """Cap (None: uncap) what the allocator may hold on GPU ``gpu_id`` (``caps_memory``).
        Default: the framework's memory cannot be capped; nothing is done."""
        return None

    def reset_peak(self, gpu_id: int) -> None:
        """Reset the peak-memory counter on GPU ``gpu_id`` (``resets_peak``). Default: no
        peak to reset."""
        return None

    # -- settings --------------------------------------------------------------------------

    def apply_setting(self, name: str, value: str) -> str:
        """Apply the row's non-start-up setting ``name`` (spelled ``value``) to the loaded
        framework; what was applied, or ``"already in effect"``. Default: ``value`` (its
        environment variable, set by the caller, is all there is). Raises
        :class:`~memtype.errors.ConfigurationError` where it can no longer be applied."""
        return value


class DeviceTiming:
    """An adapter that times work on its devices (the profiler)."""

    _defaults: ClassVar[bool] = True

    def timing_events(self) -> tuple[Any, Any] | None:
        """A recorded start event and an unrecorded end event (``record``, ``synchronize``,
        ``elapsed_time`` in ms), or None (the runtime has not started)."""
        return None


class PinnedSpills:
    """An adapter that copies device arrays to pinned host memory (storage spills)."""

    _defaults: ClassVar[bool] = True

    def pinned_host_copy(self, x: Any) -> Any | None:
        """A copy of device array ``x`` in pinned host memory (the framework's own array,
        readable by ``to_numpy`` and ``to_device``), or None (spill to NumPy)."""
        return None


class Diagnostics:
    """What ``memtype info`` says about a framework (:func:`diagnostics`: an adapter's, or
    these defaults)."""

    _defaults: ClassVar[bool] = True

    def devices(self) -> list[str]:
        """Human-readable names of the framework's devices (may start its runtime)."""
        return ["cpu"]

    def no_device_reason(self) -> str:
        """Why the framework sees no device (``""`` when it does, or has nothing to say)."""
        return ""

    def dlpack_version(self) -> str:
        """The highest DLPack version the framework speaks, or ``""``."""
        return ""

    def runtime_info(self) -> str:
        """One line describing the framework's runtime (``""``: none)."""
        return ""


def ran_out_of_memory(adapter: Adapter, exc: BaseException) -> bool:
    """Whether ``exc`` is an out-of-memory error of ``adapter``'s framework (one of its
    ``oom_errors`` that ``is_oom`` confirms; :data:`HOST_OOM_ERRORS` without the facet)."""
    if isinstance(adapter, DeviceAdapter):
        return isinstance(exc, adapter.oom_errors()) and adapter.is_oom(exc)
    return isinstance(exc, HOST_OOM_ERRORS)


def diagnostics(adapter: Adapter) -> Diagnostics:
    """``adapter``'s :class:`Diagnostics`, or the defaults where it has nothing to say."""
    return adapter if isinstance(adapter, Diagnostics) else _NO_DIAGNOSTICS


_NO_DIAGNOSTICS = Diagnostics()
