"""What one conversion costs, learnt by making it once on a sample of the real shape and dtype.

The planner asks :func:`memtype.convert` itself (capturing its events as the run's hook
counts them), so a prediction is what the run's hook will count: the same routes, the same
zero-copy rules, the same events. The trial conversions are hidden from the user's
conversion hooks (:func:`memtype.capture_conversions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memtype.convert import capture_conversions, convert
from memtype.errors import MemtypeError
from memtype.frameworks import load_adapter

__all__ = ["Probe", "Prober", "Shape"]

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Probe:
    """One conversion of one stack: events the hook sees, bytes, zero-copy, host crossing."""

    events: int
    nbytes: int
    zero_copy: bool
    crosses_host: bool
    source_device: str
    target_device: str


class Prober:
    """Samples per (memory type, shape, dtype) and the conversions between them, cached."""

    def __init__(self, gpu_id: int | None) -> None:
        self.gpu_id = gpu_id
        self._samples: dict[tuple[str, Shape, str], Any] = {}
        self._probes: dict[tuple[str, str, Shape, str], Probe] = {}

    def sample(self, memory_type: str, shape: Shape, dtype: np.dtype[Any]) -> Any:
        """A zero array of this type, shape and dtype on the run's device.

        Raises
        ------
        MemtypeError
            The framework is not installed, or has no device (``DeviceError``).
        """
        key = (memory_type, shape, dtype.str)
        if key not in self._samples:
            self._samples[key] = convert(np.zeros(shape, dtype), memory_type, gpu_id=self.gpu_id)
        return self._samples[key]

    def device(self, memory_type: str, shape: Shape, dtype: np.dtype[Any]) -> Any:
        """The device a sample of this type lives on (a ``Device``)."""
        return load_adapter(memory_type).device_of(self.sample(memory_type, shape, dtype))

    def probe(self, source: str, target: str, shape: Shape, dtype: np.dtype[Any]) -> Probe:
        """Convert a sample once, counting what the conversion hook reports.

        Raises
        ------
        MemtypeError
            The conversion is not possible (a blocked GPU -> GPU path, a dtype the target
            cannot hold, a missing framework).
        """
        key = (source, target, shape, dtype.str)
        if key in self._probes:
            return self._probes[key]
        x = self.sample(source, shape, dtype)
        sdev = load_adapter(source).device_of(x)
        with capture_conversions() as events:
            out = convert(x, target, gpu_id=self.gpu_id)
        ddev = load_adapter(target).device_of(out)
        zero = all(e.zero_copy for e in events)
        result = Probe(len(events), sum(e.nbytes for e in events), zero,
                       bool(events) and not zero and (sdev.is_gpu or ddev.is_gpu),
                       str(sdev), str(ddev))
        self._probes[key] = result
        return result

    def available(self, memory_type: str, shape: Shape, dtype: np.dtype[Any]) -> str | None:
        """None when the type can hold a stack on a device with room, else the reason."""
        try:
            device = self.device(memory_type, shape, dtype)
        except MemtypeError as exc:  # not installed, no device: recorded as the reason
            return f"{type(exc).__name__}: {exc}"
        if device.is_managed_gpu:
            from memtype.gpu import memory_pressure

            pressure = memory_pressure(device.index)
            if pressure >= PRESSURE_LIMIT:
                return f"{device} is {pressure:.0%} full (limit {PRESSURE_LIMIT:.0%})"
        return None


PRESSURE_LIMIT = 0.9
"""A managed GPU at least this full (``memory_pressure``) takes no planned step."""
