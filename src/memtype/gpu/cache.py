"""GPUTensorCache: keep derived arrays (on any device) under string keys, LRU evicted."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from memtype.detect import array_nbytes
from memtype.errors import (
    ArgumentTypeError,
    CacheKeyError,
    InvalidArgumentError,
)

__all__ = ["GPUTensorCache", "measure_nbytes"]

T = TypeVar("T")
_MISSING: Any = object()


def measure_nbytes(value: Any) -> int:
    """Bytes an array (of any framework), or a list, tuple or dict of arrays, holds: the
    one measure of a value's size in bytes.

    Arrays are measured from their adapter's dtype and shape (``memtype.frameworks.data_nbytes``,
    nothing copied or synchronised); other objects by an integer ``nbytes`` attribute (a zarr
    or dask array: its data's size, nothing read); ``bytes`` and ``bytearray`` by length,
    ``str`` by its UTF-8 length.

    Raises
    ------
    TypeError
        If the size cannot be measured.
    """
    total = 0
    pending = [value]
    seen: set[int] = set()  # containers already counted: a cycle, or one list held twice
    while pending:  # iterative: nesting of any depth, never a RecursionError
        item = pending.pop()
        nbytes = array_nbytes(item)
        if nbytes is None:
            nbytes = _measure_other(item, pending, seen)
        total += nbytes
    return total


def _measure_other(value: Any, pending: list[Any], seen: set[int]) -> int:
    """Size of a non-array: ``nbytes`` or a byte string's length; a container's items are
    pushed onto ``pending`` (once per container) and count 0 here."""
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, (list, tuple, Mapping)):
        if id(value) not in seen:
            seen.add(id(value))
            pending.extend(value.values() if isinstance(value, Mapping) else value)
        return 0
    raise ArgumentTypeError(
        f"Cannot measure the size of a {type(value).__module__}.{type(value).__qualname__}; "
        "cache arrays (or lists, tuples, dicts of them), or pass sizeof= to GPUTensorCache."
    )


class GPUTensorCache:
    """A thread-safe LRU cache of arrays keyed by strings, bounded by bytes and/or items.

    Parameters
    ----------
    max_bytes : int, optional
        The most bytes the cached values may hold together (None: no byte bound).
    max_items : int, optional
        The most entries (None: no count bound).
    sizeof : callable, optional
        Measures a value in bytes; default :func:`measure_nbytes`.

    Notes
    -----
    Storing an entry evicts the least recently used ones until both bounds hold. A value
    larger than ``max_bytes`` is never cached: :meth:`put` returns False (counted in
    ``stats()["rejected"]``) and :meth:`get_or_compute` returns the value uncached.
    Evicted arrays are dropped, so their memory is freed once no one else holds them.
    Values are kept by reference, never copied (``get`` returns the object ``put`` was
    given): a cached array that its owner later writes in place changes in the cache too.
    Cache what the owner no longer writes, or a copy (``memtype.storage.MemoryStore``
    keeps private copies).

    Examples
    --------
    >>> import numpy as np
    >>> from memtype.gpu import GPUTensorCache
    >>> cache = GPUTensorCache(max_bytes=1 << 20, max_items=64)
    >>> a = cache.get_or_compute("ast:42", lambda: np.zeros(1000, dtype=np.float32))
    >>> cache.get("ast:42") is a, cache.stats()["hits"]
    (True, 1)
    """

    def __init__(self, max_bytes: int | None = None, max_items: int | None = None, *,
                 sizeof: Callable[[Any], int] | None = None) -> None:
        for label, bound in (("max_bytes", max_bytes), ("max_items", max_items)):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int)
                                      or bound < 1):
                raise InvalidArgumentError(
                    f"{label} must be a positive int or None; received {bound!r}.")
        if sizeof is not None and not callable(sizeof):
            raise ArgumentTypeError(
                f"sizeof must be a callable value -> bytes or None; received "
                f"{type(sizeof).__name__} {sizeof!r}.")
        self.max_bytes = max_bytes
        self.max_items = max_items
        self._sizeof = sizeof or measure_nbytes
        self._lock = threading.Lock()
        self._data: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._computing: dict[str, list[Any]] = {}  # key -> [lock, waiters]
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._rejected = 0

    def get(self, key: str, default: Any = None) -> Any:
        """The value under ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                self._misses += 1
                return default
            self._data.move_to_end(key)
            self._hits += 1
            return entry[0]

    def __getitem__(self, key: str) -> Any:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise CacheKeyError(f"No cached value under {key!r}.")
        return value

    def put(self, key: str, value: Any) -> bool:
        """Cache ``value`` under ``key`` (replacing any), evicting LRU entries to fit.

        Returns
        -------
        bool
            False when the value alone is larger than ``max_bytes`` (it is not cached, and an
            older value under ``key`` is removed); True otherwise.

        Raises
        ------
        TypeError
            If ``key`` is not a str, or the value's size cannot be measured.
        """
        if not isinstance(key, str):
            raise ArgumentTypeError(f"Cache keys are str; received {type(key).__name__} {key!r}.")
        size = int(self._sizeof(value))
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if self.max_bytes is not None and size > self.max_bytes:
                self._rejected += 1
                return False
            self._data[key] = (value, size)
            self._bytes += size
            self._evict()
            return True

    def _evict(self) -> None:
        """Drop least recently used entries until both bounds hold (lock held)."""
        data = self._data
        while (self.max_items is not None and len(data) > self.max_items) or (
            self.max_bytes is not None and self._bytes > self.max_bytes
        ):
            _, (_, size) = data.popitem(last=False)
            self._bytes -= size
            self._evictions += 1

    def get_or_compute(self, key: str, fn: Callable[[], T]) -> T:
        """The value under ``key``; on a miss, ``fn()`` cached under ``key`` and returned.

        Concurrent misses of one key run ``fn`` once: the other callers wait for its value.
        Each call counts one hit or one miss.
        """
        if not callable(fn):
            raise ArgumentTypeError(
                f"get_or_compute needs a callable fn() that computes the value; received "
                f"{type(fn).__name__} {fn!r}.")
        value = self.get(key, _MISSING)
        if value is not _MISSING:
            return value  # type: ignore[no-any-return]
        lock = self._claim(key)
        try:
            with lock:
                with self._lock:
                    entry = self._data.get(key)
                    if entry is not None:
                        self._data.move_to_end(key)
                        return entry[0]  # type: ignore[no-any-return]
                computed = fn()
                self.put(key, computed)
                return computed
        finally:
            self._unclaim(key)

    def _claim(self, key: str) -> Any:
        """The per-key lock that serialises computing ``key``."""
        with self._lock:
            slot = self._computing.get(key)
            if slot is None:
                slot = self._computing[key] = [threading.Lock(), 0]
            slot[1] += 1
            return slot[0]

    def _unclaim(self, key: str) -> None:
        """Forget the per-key lock once no caller waits on it."""
        with self._lock:
            slot = self._computing[key]
            slot[1] -= 1
            if not slot[1]:
                del self._computing[key]

    def pop(self, key: str, default: Any = _MISSING) -> Any:
        """Remove and return the value under ``key`` (``default``, or CacheKeyError, if absent)."""
        with self._lock:
            entry = self._data.pop(key, None)
            if entry is not None:
                self._bytes -= entry[1]
                return entry[0]
        if default is _MISSING:
            raise CacheKeyError(f"No cached value under {key!r}.")
        return default

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is cached (does not count as a use, hit or miss)."""
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    @property
    def nbytes(self) -> int:
        """Bytes the cached values hold."""
        return self._bytes

    def clear(self) -> None:
        """Drop every entry (statistics are kept)."""
        with self._lock:
            self._data.clear()
            self._bytes = 0

    def stats(self) -> dict[str, int]:
        """``hits``, ``misses``, ``evictions``, ``rejected``, ``items`` and ``bytes``."""
        with self._lock:
            return {
                "hits": self._hits,
                "misses": self._misses,
                "evictions": self._evictions,
                "rejected": self._rejected,
                "items": len(self._data),
                "bytes": self._bytes,
            }

    def __repr__(self) -> str:
        return (f"GPUTensorCache(items={len(self._data)}, bytes={self._bytes}, "
                f"max_bytes={self.max_bytes}, max_items={self.max_items})")
