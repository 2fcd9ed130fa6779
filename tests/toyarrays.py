"""A toy array library (the 'seventh framework' of the table test): a wrapper over NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np


class ToyArray:
    """An array that keeps its values in a private NumPy buffer."""

    def __init__(self, values: Any) -> None:
        self._values = np.array(values, copy=True)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._values.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._values.dtype

    def __getitem__(self, index: Any) -> ToyArray:
        return ToyArray(self._values[index])

    def values(self) -> np.ndarray:
        return self._values
