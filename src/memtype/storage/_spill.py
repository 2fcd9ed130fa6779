"""Moving TieredStore entries between a device, host memory and raw ``.npy`` bytes."""

from __future__ import annotations

from typing import Any

import numpy as np

from memtype.frameworks._protocol import Device


def to_host(value: Any, memory_type: str, device: Device, pin: bool) -> Any:
    """A host copy of a device array: pinned torch memory for CUDA torch (if ``pin``), else
    a NumPy array (a view for arrays that already live in host memory)."""
    from memtype.frameworks import load_adapter

    if pin and memory_type == "torch" and device.kind == "cuda":
        import torch

        out = torch.empty(tuple(value.shape), dtype=value.dtype, pin_memory=True)
        out.copy_(value)
        return out
    return load_adapter(memory_type).to_numpy(value)


def reload(host: Any, memory_type: str, device: Device) -> Any:
    """A host copy brought back to ``device`` as a ``memory_type`` array."""
    if not isinstance(host, np.ndarray):  # a pinned torch tensor
        from memtype.frameworks import load_adapter

        return load_adapter("torch").to_device(host, device)
    import memtype

    gpu_id = device.index if device.is_gpu else None
    return memtype.convert(host, memory_type, gpu_id=gpu_id)


def to_raw(host: Any) -> np.ndarray[Any, Any]:
    """The bytes of a host array as a flat uint8 array (any dtype, bfloat16 included)."""
    if not isinstance(host, np.ndarray):  # a pinned torch tensor
        from memtype.frameworks import load_adapter

        host = load_adapter("torch").to_numpy(host)
    return np.ascontiguousarray(host).reshape(-1).view(np.uint8)


def from_raw(raw: np.ndarray[Any, Any], shape: tuple[int, ...], dtype: str) -> Any:
    """The host array that :func:`to_raw` flattened."""
    return raw.view(_dtype(dtype)).reshape(shape)


def _dtype(name: str) -> np.dtype[Any]:
    """A NumPy dtype from its name, ml_dtypes (bfloat16) included."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)
