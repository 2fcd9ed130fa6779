"""An in-memory tree of directories and files keyed by store keys (not thread-safe by itself).

Each directory knows its children, so listing a directory costs O(entries in it), never
a scan of every key. :class:`~memtype.storage.MemoryStore` and
:class:`~memtype.storage.TieredStore` wrap it with a lock.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from memtype.errors import (
    StoreExistsError,
    StoreIsADirectoryError,
    StoreNotADirectoryError,
    StoreNotFoundError,
    StorePathError,
)

V = TypeVar("V")

_CREATE_HINT = "; create it with ensure_directory or pass parents=True"


def _split(key: str) -> tuple[str, str]:
    """(parent key, name) of a non-root key."""
    parent, _, name = key.rpartition("/")
    return parent, name


class KeyTree(Generic[V]):
    """Directories (key -> child names) and files (key -> value); ``""`` is the root."""

    def __init__(self) -> None:
        self.dirs: dict[str, set[str]] = {"": set()}
        self.files: dict[str, V] = {}

    # -- queries ---------------------------------------------------------------------
    def is_file(self, key: str) -> bool:
        """Whether ``key`` is a file."""
        return key in self.files

    def is_dir(self, key: str) -> bool:
        """Whether ``key`` is a directory."""
        return key in self.dirs

    def get(self, key: str) -> V:
        """The value at ``key``; StoreNotFoundError or StorePathError otherwise."""
        try:
            return self.files[key]
        except KeyError:
            if key in self.dirs:
                raise StoreIsADirectoryError(
                    f"{key!r} is a directory; expected a file."
                ) from None
            raise StoreNotFoundError(f"No file at {key!r} in the store.") from None

    def children(self, key: str) -> set[str]:
        """Child names of directory ``key``."""
        self.require_dir(key)
        return self.dirs[key]

    def require_dir(self, key: str, hint: str = "") -> None:
        """Raise unless ``key`` is a directory (``hint``: how a write can create it)."""
        if key in self.dirs:
            return
        if key in self.files:
            raise StoreNotADirectoryError(f"{key!r} is a file; expected a directory.")
        raise StoreNotFoundError(f"No directory at {key!r} in the store{hint}.")

    def require_exists(self, key: str) -> None:
        """Raise StoreNotFoundError unless ``key`` is a file or a directory."""
        if key not in self.files and key not in self.dirs:
            raise StoreNotFoundError(f"No file or directory at {key!r} in the store.")

    def walk_files(self, key: str, recursive: bool) -> Iterator[str]:
        """File keys under directory ``key`` (directly, or at any depth; no recursion)."""
        pending = [key]
        while pending:
            current = pending.pop()
            for name in tuple(self.children(current)):
                child = posixpath.join(current, name) if current else name
                if child in self.files:
                    yield child
                elif recursive:
                    pending.append(child)

    def keys_under(self, key: str) -> list[str]:
        """Every file and directory key strictly under directory ``key`` (no recursion)."""
        out: list[str] = []
        pending = [key]
        while pending:
            current = pending.pop()
            for name in tuple(self.children(current)):
                child = posixpath.join(current, name) if current else name
                out.append(child)
                if child in self.dirs:
                    pending.append(child)
        return out

    # -- updates ---------------------------------------------------------------------
    def make_dirs(self, key: str, parents: bool = True) -> None:
        """Create directory ``key`` (and, with ``parents``, its missing parents)."""
        missing: list[str] = []
        current = key
        while current not in self.dirs:
            if current in self.files:
                raise StoreNotADirectoryError(f"{current!r} is a file; expected a directory.")
            missing.append(current)
            current, _ = _split(current)
            if not parents and current not in self.dirs:
                self.require_dir(current, _CREATE_HINT)
        for child in reversed(missing):
            parent, name = _split(child)
            self.dirs[child] = set()
            self.dirs[parent].add(name)

    def check_put(self, key: str, overwrite: bool, parents: bool) -> None:
        """Raise what :meth:`put` would raise, without changing anything."""
        if key == "" or key in self.dirs:
            raise StoreIsADirectoryError(f"{key or '/'!r} is a directory; expected a file path.")
        if key in self.files and not overwrite:
            raise StoreExistsError(
                f"{key!r} already exists; pass overwrite=True to replace it."
            )
        self._check_parent(key, parents)

    def _check_parent(self, key: str, parents: bool) -> None:
        """Raise unless ``key``'s parent is a directory, or (``parents``) can be made one."""
        parent, _ = _split(key)
        if parents:
            self._check_ancestors(parent)
        else:
            self.require_dir(parent, _CREATE_HINT)

    def _check_ancestors(self, key: str) -> None:
        """Raise if any existing ancestor of ``key`` (or ``key``) is a file."""
        while key:
            if key in self.files:
                raise StoreNotADirectoryError(f"{key!r} is a file; expected a directory.")
            if key in self.dirs:
                return
            key, _ = _split(key)

    def put(self, key: str, value: V, overwrite: bool, parents: bool) -> V | None:
        """Store ``value`` at ``key``; returns the value it replaced, if any."""
        self.check_put(key, overwrite, parents)
        parent, name = _split(key)
        self.make_dirs(parent, True)
        old = self.files.get(key)
        self.files[key] = value
        self.dirs[parent].add(name)
        return old

    def remove(self, key: str) -> V | None:
        """Remove a file (returning its value) or an empty directory (returning None)."""
        if key in self.files:
            value = self.files.pop(key)
            self._unlink(key)
            return value
        self.require_exists(key)
        if key == "":
            raise StorePathError("The store root cannot be deleted; use delete_all('').")
        if self.dirs[key]:
            raise StoreIsADirectoryError(
                f"Directory {key!r} is not empty ({len(self.dirs[key])} entries); "
                "use delete_all to remove it with its contents."
            )
        del self.dirs[key]
        self._unlink(key)
        return None

    def remove_tree(self, key: str, on_file: Callable[[str, V], None]) -> None:
        """Remove a file, or a directory with everything under it (the root: its contents)."""
        if key in self.files:
            on_file(key, self.remove(key))  # type: ignore[arg-type]
            return
        for child in sorted(self.keys_under(key), key=len, reverse=True):
            if child in self.files:
                on_file(child, self.files.pop(child))
            else:
                del self.dirs[child]
        self.dirs[key] = set()
        if key:
            self.remove(key)

    def _unlink(self, key: str) -> None:
        """Drop ``key`` from its parent's children."""
        parent, name = _split(key)
        self.dirs[parent].discard(name)

    def transfer(self, src: str, dst: str, overwrite: bool, parents: bool,
                 copy_value: Callable[[V], V] | None,
                 on_replaced: Callable[[str, V], None]) -> None:
        """Move (``copy_value`` None) or copy a file or directory from ``src`` to ``dst``."""
        self.require_exists(src)
        if src == "" or dst == "" or dst == src or dst.startswith(src + "/"):
            raise StorePathError(
                f"Cannot move or copy {src or '/'!r} to {dst or '/'!r}: a directory cannot be "
                "placed inside itself, and the root cannot be moved or replaced."
            )
        self._check_destination(dst, overwrite, parents)
        if self.exists(dst):
            self.remove_tree(dst, on_replaced)
        parent, _ = _split(dst)
        self.make_dirs(parent, True)
        if src in self.files:
            self._relocate_file(src, dst, copy_value)
            return
        self.make_dirs(dst, False)
        for key in sorted(self.keys_under(src), key=len):
            target = dst + key[len(src):]
            if key in self.dirs:
                self.make_dirs(target, False)
            else:
                self._relocate_file(key, target, copy_value)
        if copy_value is None:
            self.remove_tree(src, on_replaced)

    def exists(self, key: str) -> bool:
        """Whether ``key`` is a file or a directory."""
        return key in self.files or key in self.dirs

    def _check_destination(self, dst: str, overwrite: bool, parents: bool) -> None:
        """Raise unless something may be moved or copied to ``dst``."""
        if self.exists(dst) and not overwrite:
            raise StoreExistsError(f"{dst!r} already exists; pass overwrite=True to replace it.")
        self._check_parent(dst, parents)

    def _relocate_file(self, src: str, dst: str, copy_value: Callable[[V], V] | None) -> None:
        """Place the file at ``src`` at ``dst`` (whose parent exists), moving or copying it."""
        value = self.files[src]
        if copy_value is None:
            del self.files[src]
            self._unlink(src)
        else:
            value = copy_value(value)
        parent, name = _split(dst)
        self.files[dst] = value
        self.dirs[parent].add(name)
