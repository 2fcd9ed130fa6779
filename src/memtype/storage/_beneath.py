"""Resolve a store key to (directory descriptor, name) without leaving the store's root.

The one place where the DiskStore turns keys into file-system locations. Each component is
opened relative to the descriptor of the directory before it, with ``O_NOFOLLOW``, so a
directory swapped for a symbolic link between two calls cannot redirect the walk (the
``openat`` discipline of ``openat2(RESOLVE_BENEATH)``). Symbolic links are resolved here,
one component at a time: a link whose target stays inside the root is followed; one that
leads outside raises :class:`~memtype.errors.StorePathError` unless the store was created
with ``follow_symlinks_outside=True`` (then the kernel follows links wherever they go).
Nothing recurses, so paths thousands of levels deep resolve like any other; at most two
descriptors are open at a time.

Fast paths: on Linux 5.6+ the kernel does the same walk in one call
(``openat2(RESOLVE_BENEATH)``, see :mod:`memtype.storage._openat2`), refusing every step
out of the root; whenever it refuses or fails (an absolute link, a link leading outside, a
missing directory, ``create``...) the walk below runs and decides, so both give the same
answers and errors. A key without a directory needs no walk at all.

Where the OS has no ``dir_fd`` support (Windows) the resolved path is checked instead
(``os.path.realpath`` against the real root), which is not race-safe.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from memtype.errors import StoreNotADirectoryError, StoreNotFoundError, StorePathError
from memtype.storage._openat2 import open_beneath

__all__ = ["Loc", "Resolver", "DIR_FLAGS", "NOFOLLOW", "HAS_DIR_FD", "UNKNOWN", "lstat_at",
           "resolves_outside"]

DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
HAS_DIR_FD = os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd
MAX_LINKS = 40  # as the Linux kernel (ELOOP past 40 links in one lookup)
UNKNOWN = -1
"""What :meth:`Resolver.quick_mode` answers when only the walk can tell."""
_MISSING = frozenset({errno.ENOENT, errno.ENOTDIR})
_PATH_FLAGS = getattr(os, "O_PATH", os.O_RDONLY)  # look up, open nothing (Linux)
_LOOKUP_FLAGS = DIR_FLAGS | _PATH_FLAGS  # a root opened only to look names up in


@dataclass(frozen=True)
class Loc:
    """A location: ``name`` in the directory open as ``dir_fd`` (``name`` "" is that
    directory itself). ``dir_fd`` is None where the OS lacks ``dir_fd`` (then ``name`` is a
    full path). ``key`` is the store key, ``full`` the lexical path, for messages."""

    dir_fd: int | None
    name: str
    key: str
    full: str


def lstat_at(name: str, dir_fd: int | None, follow: bool = False) -> os.stat_result | None:
    """lstat (stat with ``follow``) of ``name`` in directory ``dir_fd``, None when missing."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=follow)
    except FileNotFoundError:
        return None


def resolves_outside(path: str, root: str) -> tuple[str, str] | None:
    """(resolved path, resolved root) when ``path``, links resolved, leaves ``root``; else None.

    A check of one moment (not race-safe): for stores that read by path (zarr) and for
    platforms without ``dir_fd``."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip("/") + "/"):
        return real, real_root
    return None


class Resolver:
    """Walks keys under ``root`` (see the module docstring)."""

    def __init__(self, root: str, follow_outside: bool) -> None:
        self.root = root
        self.follow_outside = follow_outside
        self.nofollow = 0 if follow_outside else NOFOLLOW

    def full(self, key: str) -> str:
        """The lexical file-system path of a key."""
        return posixpath.join(self.root, key) if key else self.root

    @contextlib.contextmanager
    def locate(self, key: str, *, follow_last: bool,
               create: bool = False) -> Iterator[Loc]:
        """The location of ``key``: its parent directory open, and its last name.

        ``follow_last`` resolves a symbolic link in the last component too (to read a file
        or list a directory); without it the link itself is the target (to replace or
        delete it). ``create`` makes missing directories along the way. A missing directory
        on the way raises StoreNotFoundError, a file on the way StorePathError.
        """
        if not HAS_DIR_FD:
            yield self._checked_path(key, follow_last)
            return
        fd, name = self._quick_parent(key, follow_last) or self._walk(key, follow_last, create)
        try:
            yield Loc(fd, name, key, self.full(key))
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def directory(self, key: str, *, create: bool = False) -> Iterator[int | str]:
        """An open descriptor of directory ``key`` (a checked path without ``dir_fd``)."""
        fd = self.open(key, DIR_FLAGS) if key and HAS_DIR_FD else None
        if fd is not None:
            try:
                yield fd
            finally:
                os.close(fd)
            return
        with self.locate(key, follow_last=True, create=create) as loc:
            if loc.dir_fd is None:
                if not os.path.isdir(loc.name):
                    raise self._not_dir(key)
                yield loc.name
                return
            if not loc.name:
                yield loc.dir_fd
                return
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(loc.name, dir_fd=loc.dir_fd)
            try:
                fd = os.open(loc.name, DIR_FLAGS | self.nofollow, dir_fd=loc.dir_fd)
            except FileNotFoundError:
                raise self._missing(key) from None
            except NotADirectoryError:
                raise self._not_dir(key) from None
            try:
                yield fd
            finally:
                os.close(fd)

    # -- one kernel lookup (None or UNKNOWN: let the walk decide) ----------------------------
    def open(self, key: str, flags: int) -> int | None:
        """``key`` (not "") opened with ``flags`` in one lookup, links followed where the
        store follows them; None where the walk must decide (refused, missing, no openat2)."""
        try:
            fd = self._open_below(key, flags)
        except OSError:
            return None
        return fd if fd >= 0 else None

    def _open_below(self, key: str, flags: int) -> int:
        """:meth:`open`'s descriptor, or minus the errno of the lookup (``-ENOSYS``: no
        openat2); OSError from opening the root, or from the lookup of a store that
        follows links outside."""
        if self.follow_outside:
            return os.open(self.full(key), flags)
        root = os.open(self.root, _LOOKUP_FLAGS)
        try:
            return open_beneath(root, key, flags)
        finally:
            os.close(root)

    def quick_mode(self, key: str, follow: bool) -> int | None:
        """``st_mode`` of ``key`` (a last link followed with ``follow``); None when it, or a
        directory on its way, is missing or a file is on its way (the walk would say so
        too: a lookup that follows every link finds no more than the walk); UNKNOWN when
        only the walk can tell (a link to look at, a refusal, no openat2)."""
        if not key or not HAS_DIR_FD:
            return UNKNOWN
        try:
            if self.follow_outside:
                return os.stat(self.full(key), follow_symlinks=follow).st_mode
            if "/" not in key:  # an entry of the root: the walk is this one lstat
                mode = os.lstat(self.full(key)).st_mode
                return UNKNOWN if follow and stat.S_ISLNK(mode) else mode
            fd = self._open_below(key, _PATH_FLAGS | (0 if follow else NOFOLLOW))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            return UNKNOWN
        if fd < 0:
            return None if -fd in _MISSING else UNKNOWN
        try:
            return os.fstat(fd).st_mode
        finally:
            os.close(fd)

    def _quick_parent(self, key: str, follow_last: bool) -> tuple[int, str] | None:
        """(open parent, last name) of ``key`` in one lookup, or None for the walk (the
        root itself, a last name that is a link to follow, a refused or missing parent)."""
        parent, _, name = key.rpartition("/")
        if not name:
            return None
        fd = self.open(parent, DIR_FLAGS) if parent else os.open(self.root, DIR_FLAGS)
        if fd is None:
            return None
        if follow_last and not self.follow_outside and self._is_link(name, fd):
            os.close(fd)
            return None
        return fd, name

    def _is_link(self, name: str, fd: int) -> bool:
        """Whether ``name`` in ``fd`` is a symbolic link."""
        st = lstat_at(name, fd)
        return st is not None and stat.S_ISLNK(st.st_mode)

    # -- the walk ------------------------------------------------------------------------
    def _walk(self, key: str, follow_last: bool, create: bool) -> tuple[int, str]:
        """(open parent descriptor, last name); name "" when the key is a directory reached
        through ``..`` or a link."""
        stack: list[str] = []  # names from the root to the current directory
        fd = os.open(self.root, DIR_FLAGS)
        todo = [p for p in reversed(key.split("/")) if p not in ("", ".")]
        links = 0
        try:
            while todo:
                name = todo.pop()
                if name == "..":
                    fd = self._up(fd, stack, key)
                    continue
                last = not todo  # "" and "." were never queued
                if last and not follow_last:
                    return fd, name
                st = lstat_at(name, fd)
                if st is None and not last and create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, dir_fd=fd)
                    st = lstat_at(name, fd)
                if st is not None and stat.S_ISLNK(st.st_mode) and not self.follow_outside:
                    links += 1
                    if links > MAX_LINKS:
                        raise StorePathError(
                            f"Cannot resolve {key!r} in {self.root!r}: a symbolic link loop "
                            f"(more than {MAX_LINKS} links followed).")
                    fd = self._follow(fd, name, stack, todo, key)
                    continue
                if last:
                    return fd, name
                fd = self._descend(fd, name, st, stack, key)
            return fd, ""
        except BaseException:
            os.close(fd)
            raise

    def _descend(self, fd: int, name: str, st: os.stat_result | None, stack: list[str],
                 key: str) -> int:
        """Open subdirectory ``name`` of ``fd`` (closing ``fd``)."""
        here = "/".join([*stack, name])
        if st is None:
            raise self._missing(here)
        if not stat.S_ISDIR(st.st_mode) and not stat.S_ISLNK(st.st_mode):
            raise self._not_dir(here)
        try:
            child = os.open(name, DIR_FLAGS | self.nofollow, dir_fd=fd)
        except FileNotFoundError:
            raise self._missing(here) from None
        except NotADirectoryError:
            raise self._not_dir(here) from None
        os.close(fd)
        stack.append(name)
        return child

    def _follow(self, fd: int, name: str, stack: list[str], todo: list[str], key: str) -> int:
        """Replace link ``name`` by its target's components; returns the directory to go on
        from (the root for an absolute target)."""
        target = os.readlink(name, dir_fd=fd)
        if target.startswith("/"):
            real_root = os.path.realpath(self.root)
            inside = posixpath.relpath(posixpath.normpath(target), real_root)
            if inside == ".." or inside.startswith("../"):
                raise self._escape(key, "/".join([*stack, name]), target)
            target = inside
            os.close(fd)
            stack.clear()
            fd = os.open(self.root, DIR_FLAGS)
        todo.extend(p for p in reversed(target.split("/")) if p not in ("", "."))
        return fd

    def _up(self, fd: int, stack: list[str], key: str) -> int:
        """Go to the parent of the current directory by walking the names again."""
        if not stack:
            raise StorePathError(
                f"Cannot resolve {key!r}: a symbolic link climbs above the store root "
                f"{self.root!r}; expected links that stay inside it.")
        stack.pop()
        os.close(fd)
        fd = os.open(self.root, DIR_FLAGS)
        for part in stack:
            child = os.open(part, DIR_FLAGS | self.nofollow, dir_fd=fd)
            os.close(fd)
            fd = child
        return fd

    # -- without dir_fd ----------------------------------------------------------------------
    def _checked_path(self, key: str, follow_last: bool) -> Loc:
        """A full path checked against the real root (platforms without ``dir_fd``)."""
        full = self.full(key)
        probe = full if follow_last else os.path.dirname(full)
        escaped = None if self.follow_outside else resolves_outside(probe, self.root)
        if escaped is not None:
            raise self._escape(key, key, escaped[0])
        return Loc(None, full, key, full)

    # -- errors -----------------------------------------------------------------------------
    def _escape(self, key: str, link: str, target: str) -> StorePathError:
        """The error for a link leading out of the root."""
        return StorePathError(
            f"Cannot resolve {key!r}: the symbolic link {link!r} leads to {target!r}, outside "
            f"the store root {self.root!r}. Expected links that stay inside the root, or a "
            "store created with follow_symlinks_outside=True.")

    def _missing(self, key: str) -> StoreNotFoundError:
        """The error for a missing directory on the way (a store's write adds how to make it)."""
        return StoreNotFoundError(f"No directory at {key or '/'!r} in {self.root!r}.")

    def _not_dir(self, key: str) -> StorePathError:
        """The error for a file where a directory is expected."""
        return StoreNotADirectoryError(
            f"{key!r} is a file; expected a directory (a file is in the way of the path).")
