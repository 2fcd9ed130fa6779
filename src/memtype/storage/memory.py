"""MemoryStore: a thread-safe, per-instance store in host memory.

>>> from memtype.storage import MemoryStore
>>> store = MemoryStore()
>>> store.save(np.zeros((4, 4)), "plate/A01", parents=True)     # doctest: +SKIP
>>> store.load("plate/A01")                                      # doctest: +SKIP

Saving copies the value (arrays of any framework stay in their framework and on their
device; a masked array keeps its mask; a ``tf.Variable`` is stored as its current value;
plain Python objects are deep-copied), so nothing the caller does later -- writing in place,
freeing a JAX array with ``x.delete()`` or donating it to ``jax.jit`` -- changes what was
stored; ``copy=False`` stores a reference instead. A stored NumPy copy is marked
read-only and ``load`` returns it as is (zero-copy); ``load(path, copy=True)`` returns a
private, writable copy. Arrays of frameworks without a read-only flag (torch, cupy...) must
not be written in place after loading; ask for ``copy=True`` when a function does.

Directories are explicit (``ensure_directory``, or ``parents=True``) and listing one costs
O(entries in it). The contents live in this process only: a pickled store (for instance
inside a :class:`~memtype.storage.FileManager` sent to a worker) arrives empty.
"""

from __future__ import annotations

import copy as _copy
import threading
import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from memtype import detect_memory_type
from memtype.errors import ArgumentTypeError, StoreFormatError, UnsupportedArrayError
from memtype.frameworks import load_adapter
from memtype.gpu import measure_nbytes
from memtype.storage._tree import KeyTree
from memtype.storage.base import PathLike, Store, StoreStat, natural_sorted

__all__ = ["MemoryStore", "TreeStore", "copy_value", "writable_copy", "nbytes_of", "array_info"]


def copy_value(value: Any) -> Any:
    """A private copy of ``value``: arrays stay in their framework and on their device.

    NumPy copies are returned read-only (the store owns them); a masked array keeps its
    mask (copied, read-only too). Arrays of every other framework are copied by their
    adapter's ``copy`` (an MLX copy is evaluated before it is kept), immutable ones too
    unless their adapter has a ``readonly_view`` nobody can change later (TensorFlow: a
    tensor as it is, a ``tf.Variable``'s current value): a JAX array is immutable but its
    owner can free it (``x.delete()``, a donated ``jax.jit`` argument).

    Raises
    ------
    StoreFormatError
        A Python object that cannot be copied (a lock, a generator...).
    """
    if isinstance(value, np.ma.MaskedArray):
        return _frozen_masked(value.copy())
    if isinstance(value, np.ndarray):
        out = np.array(value, copy=True, order="K")
        out.flags.writeable = False
        return out
    if isinstance(value, (str, bytes, int, float, complex, bool, type(None))):
        return value
    name = _framework_of(value)
    if name is None:
        return _deep_copy(value)
    adapter = load_adapter(name)
    if adapter.immutable and adapter.has_readonly_view:
        return adapter.readonly_view(value)
    return adapter.copy(value)


def _frozen_masked(out: np.ma.MaskedArray[Any, Any]) -> np.ma.MaskedArray[Any, Any]:
    """A masked array whose data and mask cannot be written."""
    np.ma.getdata(out).flags.writeable = False
    mask = np.ma.getmask(out)  # the array itself (``out.mask`` is a view)
    if mask is not np.ma.nomask:
        mask.flags.writeable = False
    return out


def _deep_copy(value: Any) -> Any:
    """``copy.deepcopy``; StoreFormatError for an object that cannot be copied."""
    try:
        return _copy.deepcopy(value)
    except (TypeError, _copy.Error, RecursionError) as exc:
        raise StoreFormatError(
            f"Cannot store a copy of {type(value).__name__}: it cannot be deep-copied "
            f"({exc}); pass copy=False to store a reference to it.") from exc


def _framework_of(value: Any) -> str | None:
    """The memory type name of an array of a loaded framework, or None for other objects."""
    try:
        return str(detect_memory_type(value))
    except UnsupportedArrayError:  # not an array: the caller copies or sizes it as an object
        return None


def nbytes_of(value: Any) -> int:
    """Bytes a stored value holds (:func:`memtype.gpu.measure_nbytes`), 0 for an object of
    unknown size (a store keeps any Python object; only its size goes unknown)."""
    try:
        return measure_nbytes(value)
    except ArgumentTypeError:  # measure_nbytes' one error: no size for this object
        return 0


def writable_copy(value: Any) -> Any:
    """A caller-owned copy of a stored value (NumPy copies are writable, a mask too): what
    ``load(copy=True)`` of the in-memory stores returns."""
    if isinstance(value, np.ma.MaskedArray):
        return value.copy()
    if isinstance(value, np.ndarray):
        return np.array(value, copy=True, order="K")
    return copy_value(value)


class _Item:
    """One stored value with its modification time."""

    __slots__ = ("value", "mtime")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.mtime = time.time()


class TreeStore(Store):
    """Shared base of the in-memory stores: a locked :class:`KeyTree` of entries.

    Subclasses implement ``save``, ``load`` and ``stat`` and may override the hooks
    :meth:`_released` (an entry left the store) and :meth:`_duplicate` (copy an entry).
    """

    def __init__(self, *, read_only: bool = False) -> None:
        super().__init__("/", read_only=read_only)
        self._tree: KeyTree[Any] = KeyTree()
        self._lock = threading.RLock()

    def params(self) -> dict[str, Any]:
        """Constructor arguments (the contents are not part of them)."""
        return {"read_only": self.read_only}

    def _released(self, key: str, entry: Any) -> None:
        """Called (under the lock) for every entry removed or replaced."""

    def _duplicate(self, entry: Any) -> Any:
        """A copy of an entry for :meth:`copy`."""
        raise NotImplementedError

    def exists(self, path: PathLike) -> bool:
        key = self.key(path)
        with self._lock:
            return self._tree.exists(key)

    def is_file(self, path: PathLike) -> bool:
        key = self.key(path)
        with self._lock:
            return self._tree.is_file(key)

    def is_dir(self, path: PathLike) -> bool:
        key = self.key(path)
        with self._lock:
            return self._tree.is_dir(key)

    def list_files(self, directory: PathLike = "", pattern: str | None = None,
                   extensions: Iterable[str] | str | None = None,
                   recursive: bool = False) -> list[str]:
        key = self.key(directory)
        exts = self._extensions(extensions)
        with self._lock:
            found = list(self._tree.walk_files(key, recursive))
        return self._listing(directory, found, pattern, exts)

    def list_dir(self, directory: PathLike = "") -> list[str]:
        key = self.key(directory)
        with self._lock:
            return natural_sorted(self._tree.children(key))

    def ensure_directory(self, path: PathLike) -> str:
        key = self.key(path)
        with self._lock:
            if not self._tree.is_dir(key):
                self._require_writable("create directory", path)
                self._tree.make_dirs(key, True)
        return key

    def delete(self, path: PathLike) -> None:
        self._require_writable("delete", path)
        key = self.key(path)
        with self._lock:
            entry = self._tree.remove(key)
            if entry is not None:
                self._released(key, entry)

    def delete_all(self, path: PathLike) -> None:
        self._require_writable("delete", path)
        key = self.key(path)
        with self._lock:
            self._tree.require_exists(key)
            self._tree.remove_tree(key, self._released)

    def move(self, src: PathLike, dst: PathLike, *, overwrite: bool = False,
             parents: bool = False) -> None:
        self._require_writable("move", src)
        with self._lock:
            self._tree.transfer(self.key(src), self.key(dst), overwrite, parents, None,
                                self._released)

    def copy(self, src: PathLike, dst: PathLike, *, overwrite: bool = False,
             parents: bool = False) -> None:
        self._require_writable("copy to", dst)
        with self._lock:
            self._tree.transfer(self.key(src), self.key(dst), overwrite, parents,
                                self._duplicate, self._released)

    def _put(self, key: str, entry: Any, overwrite: bool, parents: bool) -> None:
        """Store an entry (under the lock), releasing the one it replaces."""
        old = self._tree.put(key, entry, overwrite, parents)
        if old is not None:
            self._released(key, old)

    def __len__(self) -> int:
        with self._lock:
            return len(self._tree.files)

    def clear(self) -> None:
        """Remove every file and directory."""
        self.delete_all("")


class MemoryStore(TreeStore):
    """Files and directories held in this process's memory.

    Parameters
    ----------
    read_only : bool
        Refuse writes and deletes (``StoreReadOnlyError``).

    Notes
    -----
    The root is ``/``: ``"/a/b"`` and ``"a/b"`` name the same entry.
    """

    registry_name = "memory"
    device = "host"

    def save(self, data: Any, path: PathLike, *, overwrite: bool = False,
             parents: bool = False, copy: bool = True) -> None:
        """Store ``data`` (any object) at ``path``.

        Parameters
        ----------
        data : object
            Arrays of any framework, or any Python object.
        path : str or os.PathLike
            Destination key.
        overwrite, parents : bool
            See :meth:`Store.save`.
        copy : bool
            Store a private copy (default) rather than a reference to ``data``.
        """
        self._require_writable("save", path)
        key = self.key(path)
        with self._lock:
            self._tree.check_put(key, overwrite, parents)
        value = copy_value(data) if copy else data
        with self._lock:
            self._put(key, _Item(value), overwrite, parents)

    def load(self, path: PathLike, *, copy: bool = False) -> Any:
        """The value at ``path``; with ``copy=True`` a private, writable copy of it."""
        with self._lock:
            value = self._tree.get(self.key(path)).value
        return writable_copy(value) if copy else value

    def stat(self, path: PathLike) -> StoreStat:
        key = self.key(path)
        with self._lock:
            self._tree.require_exists(key)
            if self._tree.is_dir(key):
                return StoreStat(key, True, 0)
            item = self._tree.get(key)
        return _stat_value(key, item)

    def _duplicate(self, entry: Any) -> Any:
        return _Item(copy_value(entry.value))


def array_info(value: Any) -> tuple[str, tuple[int, ...], str] | None:
    """(memory type, shape, dtype name) of an array of any loaded framework, else None."""
    if isinstance(value, np.ndarray):
        return "numpy", tuple(value.shape), str(value.dtype)
    name = _framework_of(value)
    if name is None:
        return None
    adapter = load_adapter(name)
    return name, tuple(adapter.shape_of(value)), str(adapter.dtype_of(value))


def _stat_value(key: str, item: _Item) -> StoreStat:
    """StoreStat of one stored value."""
    info = array_info(item.value)
    shape, dtype = (info[1], info[2]) if info else (None, None)
    return StoreStat(key, False, nbytes_of(item.value), item.mtime, shape, dtype)
