"""Small helpers shared by the core tests."""

from __future__ import annotations

from typing import Any

import numpy as np

import memtype as mt
from memtype.frameworks import load_adapter


def host(x: Any) -> np.ndarray:
    """A NumPy copy of any array, for comparing values."""
    return np.array(load_adapter(mt.detect_memory_type(x).value).to_numpy(x), copy=True)


def dtype_of(x: Any) -> np.dtype:
    return load_adapter(mt.detect_memory_type(x).value).dtype_of(x)


def shape_of(x: Any) -> tuple[int, ...]:
    return load_adapter(mt.detect_memory_type(x).value).shape_of(x)


def aligned(values: np.ndarray) -> np.ndarray:
    """A 64-byte aligned C-contiguous copy (the layout every host framework can share)."""
    from memtype.frameworks._host import aligned_copy

    return aligned_copy(values)
