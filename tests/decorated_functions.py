"""Module-level decorated functions for the pickling and process-pool tests.

Imports only NumPy and memtype, so a spawned worker starts quickly.
"""

from __future__ import annotations

import numpy as np

import memtype as mt


@mt.numpy
def scaled(image: np.ndarray, factor: float = 2.0) -> np.ndarray:
    """Multiply by ``factor`` (a decorated function reachable by its name)."""
    return image * factor


def plain_add_one(image: np.ndarray) -> np.ndarray:
    """Add one (decorated below under another name, so it pickles by value)."""
    return image + 1


add_one = mt.numpy(plain_add_one)


class Filters:
    """A class with a decorated method."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    @mt.numpy
    def shift(self, image: np.ndarray) -> np.ndarray:
        return image + self.offset
