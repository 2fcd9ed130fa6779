"""The :class:`Store` interface every backend implements, and the helpers they share.

Paths
-----
Every store has a root. Paths are POSIX-style and name a file or directory *inside* that root:

* relative paths (``"plate/A01.tif"``) are relative to the root;
* absolute paths are accepted when they lie inside the root (the root of a
  :class:`~memtype.storage.MemoryStore` is ``/``);
* ``.`` and ``..`` segments are resolved lexically; a path that would leave the root raises
  :class:`~memtype.errors.StorePathError` (also a ``ValueError``).

Listings return paths in the same form the directory was given (absolute in, absolute out;
relative in, relative out), in natural order (``f2`` before ``f10``).

One rule for all stores
-----------------------
* ``save(..., overwrite=False)`` on an existing path raises ``StoreExistsError``
  (a ``FileExistsError``) and leaves the stored value untouched;
* a missing path raises ``StoreNotFoundError`` (a ``FileNotFoundError``);
* a missing parent directory raises ``StoreNotFoundError`` unless ``parents=True``;
* a file where a directory is expected (or the reverse) raises ``StorePathError``;
* ``save_batch`` / ``load_batch`` take exactly the keyword arguments of ``save`` / ``load``;
* an argument of the wrong type (a path that is not a string, ``None`` for a budget or a
  registry) raises ``ArgumentTypeError`` (a ``TypeError``) naming the argument.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import FunctionType
from typing import Any, ClassVar, Literal

from memtype.errors import ArgumentTypeError, ShapeError, StorePathError, StoreReadOnlyError
from memtype.storage._oserrors import guard

__all__ = [
    "Store",
    "StoreStat",
    "PathLike",
    "normalize_path",
    "natural_key",
    "natural_sorted",
    "match_name",
    "check_type",
]

PathLike = str | os.PathLike[str]
StoreDevice = Literal["host", "disk", "device"]

_DIGITS = re.compile(r"(\d+)")


def check_type(name: str, value: Any, types: type | tuple[type, ...], expected: str) -> None:
    """Raise ArgumentTypeError unless ``value`` is one of ``types`` (a bool is no int).

    Parameters
    ----------
    name : str
        The argument as the caller wrote it (``"budget_bytes"``, ``"FileManager registry"``).
    value : object
        What the caller passed.
    types : type or tuple of type
        The accepted types.
    expected : str
        The accepted types in words, for the message.

    Raises
    ------
    ArgumentTypeError
        ``value`` is of another type (also a ``TypeError``).
    """
    if isinstance(value, types) and not (isinstance(value, bool) and bool not in _as_tuple(types)):
        return
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise ArgumentTypeError(
        f"{name} must be {expected}; received {type(value).__name__}: {shown}.")


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    """``types`` as a tuple."""
    return types if isinstance(types, tuple) else (types,)


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders embedded numbers by value: ``"f2"`` before ``"f10"``.

    Parameters
    ----------
    text : str
        The string to sort.

    Returns
    -------
    tuple
        Comparable parts; numbers compare as numbers, text case-insensitively, and
        strings with equal keys keep a deterministic order through the original text.
        A string whose parts begin another's sorts first, as with GNU ``sort -V``,
        ``ls -v`` and natsort: ``run1`` before ``run1b``, ``scan`` before ``scan2``.

    Raises
    ------
    ArgumentTypeError
        ``text`` is not a str.
    """
    if not isinstance(text, str):
        check_type("natural_key's text", text, str, "a str")
    parts: list[tuple[int, int | str]] = []
    for i, piece in enumerate(_DIGITS.split(text)):
        if i % 2:
            parts.append((0, int(piece)))
        elif piece:
            parts.append((1, piece.casefold()))
    parts.append((-1, text))  # the tie-breaker ranks below any real part: prefixes first
    return tuple(parts)


def natural_sorted(items: Iterable[str]) -> list[str]:
    """``items`` sorted with :func:`natural_key`.

    Raises
    ------
    ArgumentTypeError
        ``items`` is not an iterable of str (a str itself is refused: sort its characters
        with ``sorted``).
    """
    if isinstance(items, str) or not isinstance(items, Iterable):
        check_type("natural_sorted's items", items, (list, tuple), "an iterable of str")
    return sorted(items, key=natural_key)


def match_name(name: str, pattern: str | None, extensions: frozenset[str] | None) -> bool:
    """Whether a file name passes a glob ``pattern`` and an extension filter (lower case)."""
    if pattern is not None and not fnmatch.fnmatchcase(name, pattern):
        return False
    if extensions is not None:
        lower = name.lower()
        return any(lower.endswith(ext) for ext in extensions)
    return True


def _extension_set(extensions: Iterable[str] | str | None) -> frozenset[str] | None:
    """Extensions as a lower-case set with leading dots, or None for no filter."""
    if extensions is None:
        return None
    if isinstance(extensions, str):
        extensions = (extensions,)
    if not isinstance(extensions, Iterable) or not all(isinstance(e, str) for e in extensions):
        check_type("extensions", extensions, (str, tuple), "a str, an iterable of str or None")
    return frozenset(e.lower() if e.startswith(".") else "." + e.lower() for e in extensions)


def normalize_path(path: PathLike, root: str) -> str:
    """The store key of ``path``: a POSIX path relative to ``root``, ``""`` for the root.

    Parameters
    ----------
    path : str or os.PathLike
        Relative to ``root``, or absolute and inside ``root``.
    root : str
        The store's absolute, normalised root directory (``"/"`` for in-memory stores).

    Raises
    ------
    StorePathError
        The path leaves the root or contains NUL bytes.
    ArgumentTypeError
        The path is not a str or an os.PathLike of str.
    """
    text = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(text, str):
        check_type("A store path", path, str, "a str or os.PathLike of str")
    if "\x00" in text:
        raise StorePathError(f"A store path may not contain NUL bytes; received {text!r}.")
    if text.startswith("/"):
        rel = posixpath.relpath(posixpath.normpath(text), root)
    else:
        rel = posixpath.normpath(text) if text else "."
    if rel == "..":
        raise _escape_error(text, root)
    if rel.startswith("../") or rel.startswith("/"):
        raise _escape_error(text, root)
    return "" if rel == "." else rel


def _escape_error(text: str, root: str) -> StorePathError:
    """The error for a path outside the store root."""
    return StorePathError(
        f"Path {text!r} escapes the store root {root!r}; expected a path inside the root "
        "(relative, or absolute under the root, with '..' staying inside)."
    )


@dataclass(frozen=True)
class StoreStat:
    """What :meth:`Store.stat` reports about one path.

    Attributes
    ----------
    path : str
        The store key (relative to the root).
    is_dir : bool
        True for a directory.
    size : int
        Bytes: the file size on disk, or the in-memory size of a stored value
        (0 for directories).
    mtime : float or None
        Last modification time (seconds since the epoch) where the store tracks it.
    shape, dtype : optional
        Array shape and dtype name where the store knows them without reading data.
    """

    path: str
    is_dir: bool
    size: int
    mtime: float | None = None
    shape: tuple[int, ...] | None = None
    dtype: str | None = None


class Store(ABC):
    """Abstract storage backend: files and directories under one root.

    Subclasses implement the abstract methods; batch calls, path handling and the
    read-only check are shared here.

    Attributes
    ----------
    registry_name : str
        The name the store is registered under (``"disk"``, ``"memory"``...).
    supports_writes, supports_deletes : bool
        Capabilities of this instance (false for read-only instances).
    device : {"host", "disk", "device"}
        Where stored data lives: host memory, a file system, or the array's own device.
    root : str
        Absolute root directory of the store (``"/"`` for in-memory stores).
    """

    registry_name: ClassVar[str] = ""
    device: StoreDevice = "host"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every public method of every store raises memtype errors, never a raw OSError."""
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            public = not name.startswith("_") or name == "__init__"
            if public and isinstance(value, FunctionType) \
                    and not getattr(value, "__memtype_guarded__", False):
                setattr(cls, name, guard(value, name))

    def __init__(self, root: PathLike, *, read_only: bool = False) -> None:
        if not isinstance(root, (str, os.PathLike)):
            raise ArgumentTypeError(
                f"A store root must be a str or os.PathLike; received {type(root).__name__}."
            )
        text = os.fspath(root)
        if not isinstance(text, str) or not text:
            raise StorePathError(f"A store root must be a non-empty path; received {root!r}.")
        self.root: str = posixpath.normpath(os.path.abspath(text))
        check_type("read_only", read_only, bool, "a bool")
        self.read_only = read_only
        self.supports_writes = not self.read_only
        self.supports_deletes = not self.read_only

    # -- shared helpers --------------------------------------------------------------
    def key(self, path: PathLike) -> str:
        """The store key of ``path`` (see :func:`normalize_path`)."""
        return normalize_path(path, self.root)

    def _require_writable(self, action: str, path: PathLike) -> None:
        """Raise StoreReadOnlyError when this instance is read-only."""
        if self.read_only:
            raise StoreReadOnlyError(
                f"Cannot {action} {os.fspath(path)!r}: this {type(self).__name__} was opened "
                "read-only (read_only=True); expected a writable store."
            )

    def _present(self, directory: PathLike, key: str) -> str:
        """``key`` in the form the caller gave ``directory``: absolute or relative."""
        if os.fspath(directory).startswith("/"):
            return posixpath.join(self.root, key) if key else self.root
        return key

    @staticmethod
    def _extensions(extensions: Iterable[str] | str | None) -> frozenset[str] | None:
        """Normalise an ``extensions`` filter argument."""
        return _extension_set(extensions)

    def _listing(self, directory: PathLike, keys: Iterable[str], pattern: str | None,
                 extensions: frozenset[str] | None) -> list[str]:
        """What ``list_files`` returns: the keys whose names pass the filters, in natural
        order, in the form the caller gave ``directory``."""
        if pattern is not None:
            check_type("pattern", pattern, str, "a glob pattern (str) or None")
        found = [k for k in keys if match_name(k.rpartition("/")[2], pattern, extensions)]
        return [self._present(directory, k) for k in natural_sorted(found)]

    def params(self) -> dict[str, Any]:
        """Constructor arguments that recreate this store (used for pickling).

        Returns
        -------
        dict
            Keyword arguments for ``type(self)(**params)``.
        """
        return {"root": self.root, "read_only": self.read_only}

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.params()))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"

    # -- batch calls -------------------------------------------------------------------
    def save_batch(self, items: Sequence[Any], paths: Sequence[PathLike], **options: Any) -> None:
        """Save ``items[i]`` to ``paths[i]`` with the keyword arguments of :meth:`save`.

        Raises
        ------
        ShapeError
            ``items`` and ``paths`` have different lengths (nothing is written).
        """
        check_type("save_batch's items", items, Sequence, "a sequence")
        check_type("save_batch's paths", paths, Sequence, "a sequence of paths")
        _check_lengths(items, paths)
        for item, path in zip(items, paths, strict=True):
            self.save(item, path, **options)

    def load_batch(self, paths: Sequence[PathLike], **options: Any) -> list[Any]:
        """Load every path with the keyword arguments of :meth:`load`, in order."""
        check_type("load_batch's paths", paths, Sequence, "a sequence of paths")
        return [self.load(path, **options) for path in paths]

    # -- the interface ---------------------------------------------------------------
    @abstractmethod
    def save(self, data: Any, path: PathLike, *, overwrite: bool = False,
             parents: bool = False) -> None:
        """Store ``data`` at ``path``.

        Parameters
        ----------
        data : object
            What to store; each store documents what it accepts.
        path : str or os.PathLike
            Destination inside the store.
        overwrite : bool
            Replace an existing file; without it an existing path raises ``StoreExistsError``.
        parents : bool
            Create missing parent directories; without it they must exist.

        Notes
        -----
        Each store adds its own keyword-only options (documented there); unknown ones raise
        ``TypeError``.
        """

    @abstractmethod
    def load(self, path: PathLike) -> Any:
        """The value stored at ``path``; ``StoreNotFoundError`` if there is none.

        Each store may add keyword-only options (``index`` for a zarr field, ``mmap`` for
        ``.npy`` files, ``copy`` for in-memory stores).
        """

    @abstractmethod
    def exists(self, path: PathLike) -> bool:
        """Whether a file or directory exists at ``path``."""

    @abstractmethod
    def is_file(self, path: PathLike) -> bool:
        """Whether ``path`` is a file (a stored value)."""

    @abstractmethod
    def is_dir(self, path: PathLike) -> bool:
        """Whether ``path`` is a directory."""

    @abstractmethod
    def list_files(self, directory: PathLike = "", pattern: str | None = None,
                   extensions: Iterable[str] | str | None = None,
                   recursive: bool = False) -> list[str]:
        """Files in ``directory`` (natural order), filtered by glob ``pattern`` on the name
        and by ``extensions`` (case-insensitive, with or without the dot)."""

    @abstractmethod
    def list_dir(self, directory: PathLike = "") -> list[str]:
        """Names of the files and directories directly in ``directory`` (natural order)."""

    @abstractmethod
    def ensure_directory(self, path: PathLike) -> str:
        """Create ``path`` and its parents if missing; returns the store key."""

    @abstractmethod
    def delete(self, path: PathLike) -> None:
        """Remove a file or an empty directory (a non-empty one raises ``StorePathError``)."""

    @abstractmethod
    def delete_all(self, path: PathLike) -> None:
        """Remove a file, or a directory and everything under it."""

    @abstractmethod
    def move(self, src: PathLike, dst: PathLike, *, overwrite: bool = False,
             parents: bool = False) -> None:
        """Move a file or directory; an existing ``dst`` needs ``overwrite=True``."""

    @abstractmethod
    def copy(self, src: PathLike, dst: PathLike, *, overwrite: bool = False,
             parents: bool = False) -> None:
        """Copy a file or directory; an existing ``dst`` needs ``overwrite=True``."""

    @abstractmethod
    def stat(self, path: PathLike) -> StoreStat:
        """Size, kind and (where known) shape and dtype of ``path``."""


def _rebuild(cls: type[Store], params: dict[str, Any]) -> Store:
    """Recreate a store from its class and constructor arguments (unpickling)."""
    return cls(**params)


def _check_lengths(items: Sequence[Any], paths: Sequence[PathLike]) -> None:
    """Raise ShapeError when a batch has different numbers of items and paths."""
    if len(items) != len(paths):
        raise ShapeError(
            f"save_batch needs one path per item; received {len(items)} items and "
            f"{len(paths)} paths."
        )
