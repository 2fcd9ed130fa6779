"""Buffer reuse across groups: the host stacks the pipeline allocates, reused when free.

The pipeline allocates one buffer per stack when it loads a group: the images are stacked
into a NumPy array (then handed to the first step's memory type, zero-copy on the host, one
transfer to a device); and when a step restacks host stacks along other components (its
``variable_components`` differ from the previous step's), into one per new stack. Groups
of one plate have stacks of the same shape and dtype, so a
finished group's buffers are kept and the next group stacks its images into them instead
of allocating (and page-faulting) new ones.

A buffer is handed out again only when nothing else refers to it: every zero-copy consumer
of a NumPy array (a view, a torch tensor made from it, a DLPack capsule, a memoryview)
holds a reference to it, so a reference count above the pool's own means a result of an
earlier group may still read it; such a buffer is left to its holders and never reused.

Per framework (what reuse could mean beyond the host buffer): NumPy, torch and CuPy
arrays are writable in place; JAX and TensorFlow arrays are immutable, never reused;
pyclesperanto can write host data into an existing device buffer (``Array.set``), but
the pipeline's conversions go through :func:`memtype.convert` (counted by the conversion
hook, with the dtype policy), which allocates the device array, so only the host staging
buffer is reused. Buffers a step allocates inside its own function are the framework's.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["BufferPool"]

_Key = tuple[tuple[int, ...], str]
_FREE_REFS = 2  # the local name and getrefcount's argument: nobody else refers to it


class BufferPool:
    """Free host buffers by shape and dtype, shared by the groups a worker runs."""

    def __init__(self) -> None:
        self._free: dict[_Key, list[np.ndarray[Any, Any]]] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {}  # a worker's pool starts empty (buffers never travel)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def stack(self, images: Sequence[Any]) -> tuple[np.ndarray[Any, Any], bool] | None:
        """The images stacked into a reused or new buffer, and whether it was reused.

        None when the images are not NumPy 2D arrays of one shape and dtype (the caller
        stacks them with :func:`memtype.stack_slices`, which knows the dtype rules).
        """
        first = images[0] if images else None
        if not isinstance(first, np.ndarray) or first.ndim != 2 or not all(
                type(im) is np.ndarray and im.shape == first.shape and im.dtype == first.dtype
                for im in images):
            return None
        shape = (len(images), *first.shape)
        buf = self._take((shape, first.dtype.str))
        reused = buf is not None
        if buf is None:
            buf = np.empty(shape, first.dtype)
        np.stack(images, out=buf)
        return buf, reused

    def _take(self, key: _Key) -> np.ndarray[Any, Any] | None:
        """A free buffer that nothing else refers to, or None."""
        with self._lock:
            free = self._free.get(key, [])
            while free:
                buf = free.pop()
                if sys.getrefcount(buf) <= _FREE_REFS:
                    return buf
                # a result of an earlier group still refers to it: leave it to that result
        return None

    def give_back(self, buffers: Sequence[np.ndarray[Any, Any]]) -> None:
        """Buffers of a finished group (checked again when taken)."""
        with self._lock:
            for buf in buffers:
                self._free.setdefault((buf.shape, buf.dtype.str), []).append(buf)
