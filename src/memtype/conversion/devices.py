"""The device a conversion puts its result on (:func:`target_device`)."""

from __future__ import annotations

from memtype.errors import DeviceError
from memtype.frameworks import (
    CPU,
    Adapter,
    Device,
    DeviceAdapter,
    Framework,
    diagnostics,
    gpu_index,
    load_adapter,
)

__all__ = ["target_device"]


def _require_device(fw: Framework, adapter: Adapter, kind: str, index: int) -> Device:
    device = adapter if isinstance(adapter, DeviceAdapter) else None
    count = 0 if device is None else device.gpu_count()
    if index >= count:
        have = f"only devices 0..{count - 1} exist" if count else f"no {kind} device is available"
        explain = "" if count else diagnostics(adapter).no_device_reason()
        why = f" {explain}" if explain else ""
        raise DeviceError(f"{fw.name} on {kind} device {index} was requested, but {have}.{why}")
    return Device(kind, index)


def target_device(fw: Framework, source: Device, gpu_id: int | str | Device | None) -> Device:
    """Where a conversion to ``fw`` puts its result, and where a call on ``fw`` runs
    (``source``: the first array's device; :data:`CPU` for a call without arrays).

    ``gpu_id`` picks that GPU for types that have GPUs (ignored by host-only types); without
    it the result stays on the source's device when the target type can live there, else
    on the host, else on GPU 0.
    """
    kind = fw.gpu_kind
    if gpu_id is not None:
        index = gpu_index(gpu_id, allow_none=False)
        if kind is None:
            return CPU
        if source.kind == kind and source.index == index:
            return source
        return _require_device(fw, load_adapter(fw.name), kind, index)
    if source.kind in fw.device_kinds:
        return source
    if not fw.gpu_only:
        return CPU
    assert kind is not None
    return _require_device(fw, load_adapter(fw.name), kind, 0)
