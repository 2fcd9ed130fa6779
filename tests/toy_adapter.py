"""Adapter of the toy framework: the one module a seventh framework needs. It overrides only
what the :class:`~memtype.frameworks.Adapter` base cannot know (a host-only framework without
DLPack); every other capability is the base class's default."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memtype.frameworks import Adapter, Device
from tests.toyarrays import ToyArray


class ToyAdapter(Adapter):
    """The toy framework's adapter: host arrays held by tests.toyarrays.ToyArray."""

    dlpack = False

    def version(self) -> str:
        return "0.0-toy"

    def dtype_of(self, x: Any) -> np.dtype[Any]:
        return np.dtype(x.dtype)

    def to_numpy(self, x: Any) -> np.ndarray[Any, Any]:
        return np.asarray(x.values())

    def from_numpy(self, a: np.ndarray[Any, Any], device: Device) -> Any:
        return ToyArray(a)

    def copy(self, x: Any) -> Any:
        return ToyArray(x.values())

    def stack(self, arrays: Sequence[Any]) -> Any:
        return ToyArray(np.stack([a.values() for a in arrays]))
