"""Keys of an OME-Zarr plate: ``row/column/field`` checked, and every file opened below the plate.

The ZarrStore's counterpart of the DiskStore's :mod:`memtype.storage._beneath`, and the only
way the ZarrStore (and zarr itself, through :mod:`memtype.omezarr.beneath`) reaches the
file system. A key has at most three alphanumeric parts (plate ``""``, row ``"B"``, well
``"B/3"``, field ``"B/3/0"``); a group exists where its ``zarr.json`` does. Metadata, chunks,
lock files, pyramid levels, copies and removals are all opened relative to directory
descriptors resolved by :class:`~memtype.storage._beneath.Resolver` (``openat2
(RESOLVE_BENEATH)`` or a no-follow walk): a symbolic link is followed while it stays inside
the plate, one leading out raises ``StorePathError`` (unless the store follows links
outside), and a directory swapped for a link between a check and its use cannot redirect a
read or a write. Trees are removed and copied with their links as links
(:mod:`memtype.storage._fdops`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import posixpath
import re
import stat
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, BinaryIO

from memtype.errors import (
    StoreExistsError,
    StoreFormatError,
    StoreIsADirectoryError,
    StoreNotADirectoryError,
    StoreNotFoundError,
    StorePathError,
)
from memtype.omezarr.layout import Layout
from memtype.storage import _fdops
from memtype.storage._atomic import atomic_write, file_lock
from memtype.storage._beneath import DIR_FLAGS, NOFOLLOW, UNKNOWN, Resolver, lstat_at
from memtype.storage._readers import decoding

__all__ = ["PlatePaths", "LEVELS", "LOCK_DIR"]

LEVELS = ("plate", "row", "well")
"""What a key of 0, 1 or 2 parts names (3 parts: a field)."""
LOCK_DIR = ".memtype-locks"
_NAME = re.compile(r"[A-Za-z0-9]+")
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


class PlatePaths:
    """Checks keys of the plate at ``root`` and does every file operation below it;
    ``layout`` is the plate's OME-Zarr version (which file makes a group)."""

    def __init__(self, root: str, follow_outside: bool, layout: Layout) -> None:
        self.root = root
        self.follow_outside = follow_outside
        self.resolver = Resolver(root, follow_outside)
        self.layout = layout

    # -- keys --------------------------------------------------------------------------------
    def parts(self, key: str) -> list[str]:
        """The components of a key, checked: at most row/column/field, alphanumeric names."""
        parts = key.split("/") if key else []
        if len(parts) > 3:
            raise StorePathError(
                f"Invalid plate path {key!r}: expected at most 'row/column/field' (3 parts); "
                f"received {len(parts)}."
            )
        for part, what in zip(parts, ("row", "column", "field")[:len(parts)], strict=True):
            check_name(part, what, key)
        return parts

    def field(self, key: str) -> str:
        """``key``, checked to name a field (not the plate, a row or a well)."""
        parts = self.parts(key)
        if len(parts) != 3:
            raise StoreIsADirectoryError(
                f"{key or '/'!r} is a {LEVELS[len(parts)]}, a directory; "
                "expected a field path 'row/column/field'."
            )
        return key

    def full(self, key: str) -> str:
        """The lexical path of a key (for messages; nothing is opened by it)."""
        return self.resolver.full(key)

    def metadata(self, key: str) -> AbstractContextManager[None]:
        """A block in which a tampered document's KeyError, TypeError... of the group at
        ``key`` is raised as StoreFormatError."""
        return decoding("OME-Zarr document", f"The metadata of {key or '/'!r} in the plate "
                                             f"{self.root!r}")

    # -- queries -----------------------------------------------------------------------------
    def mode(self, key: str) -> int | None:
        """``st_mode`` of ``key`` (links inside followed), None when missing; a link leading
        out of the plate raises StorePathError."""
        mode = self.resolver.quick_mode(key, True)
        if mode != UNKNOWN:
            return mode
        try:
            with self.resolver.locate(key, follow_last=True) as loc:
                st = _lstat(loc.name, loc.dir_fd, self.follow_outside)
        except StoreNotFoundError:
            return None
        return None if st is None else st.st_mode

    def is_file(self, key: str) -> bool:
        """Whether ``key`` is a regular file (see :meth:`mode`)."""
        mode = self.mode(key)
        return mode is not None and stat.S_ISREG(mode)

    def exists(self, key: str) -> bool:
        """Whether a group (plate, row, well or field) exists at ``key``."""
        marker = self.layout.marker
        return self.is_file(posixpath.join(key, marker) if key else marker)

    def children(self, key: str) -> list[str]:
        """Names of the groups directly under ``key`` (no temporaries, no lock directory;
        links leading out of the plate are left out, as the DiskStore's listings do)."""
        with self.resolver.directory(key) as fd:
            names = [e.name for e in _fdops.scan(fd) if not e.name.startswith(".")]
        out = []
        for name in names:
            try:
                if self.exists(posixpath.join(key, name) if key else name):
                    out.append(name)
            except StorePathError:
                continue  # a link leading out of the plate is not one of its groups
        return out

    def require_dir(self, key: str) -> list[str]:
        """The parts of an existing plate, row or well; raise for a field or a missing one."""
        parts = self.parts(key)
        if len(parts) == 3:
            raise StoreNotADirectoryError(f"{key!r} is a field (an image); expected a directory.")
        if not self.exists(key):
            raise StoreNotFoundError(f"No {LEVELS[len(parts)]} at {key or self.root!r}.")
        return parts

    # -- files -------------------------------------------------------------------------------
    def open_read(self, key: str) -> int | None:
        """A descriptor of the regular file ``key`` open for reading; None when missing."""
        fd = self.resolver.open(key, _READ_FLAGS)
        if fd is None:
            try:
                with self.resolver.locate(key, follow_last=True) as loc:
                    if not loc.name:
                        return None  # a directory
                    fd = os.open(loc.name, _READ_FLAGS | self.resolver.nofollow,
                                 dir_fd=loc.dir_fd)
            except (StoreNotFoundError, FileNotFoundError):
                return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        os.set_blocking(fd, True)
        return fd

    def read_bytes(self, key: str) -> bytes:
        """The content of file ``key``; StoreNotFoundError when missing."""
        fd = self.open_read(key)
        if fd is None:
            raise StoreNotFoundError(f"No file at {key!r} in the plate {self.root!r}.")
        with os.fdopen(fd, "rb") as fh:
            return fh.read()

    def stat(self, key: str) -> os.stat_result:
        """``os.stat`` of file ``key``; StoreNotFoundError when missing."""
        fd = self.open_read(key)
        if fd is None:
            raise StoreNotFoundError(f"No file at {key!r} in the plate {self.root!r}.")
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)

    def read_json(self, key: str) -> dict[str, Any]:
        """A JSON object; StoreFormatError if the file is not one (tampered, torn)."""
        raw = self.read_bytes(key)
        where = self.full(key)
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
            raise StoreFormatError(
                f"Metadata {where!r} is not valid JSON (corrupt or tampered): {exc}.") from exc
        if not isinstance(doc, dict):
            raise StoreFormatError(
                f"Metadata {where!r} holds a JSON {type(doc).__name__}; expected an object.")
        return doc

    def write_bytes(self, key: str, data: Any, *, overwrite: bool = True,
                    fsync: bool = False) -> None:
        """Write file ``key`` atomically (missing directories created); a link in its place
        is replaced, never written through. StoreExistsError without ``overwrite``."""

        def write(fh: BinaryIO) -> None:
            """Write the payload."""
            fh.write(data)

        with self.resolver.locate(key, follow_last=False, create=True) as loc:
            atomic_write(loc.name, write, overwrite=overwrite, fsync=fsync, dir_fd=loc.dir_fd)

    def write_json(self, key: str, doc: dict[str, Any], *, overwrite: bool, fsync: bool,
                   indent: int | None = 2) -> bool:
        """Write a JSON document atomically; False when it exists and ``overwrite`` is false.

        ``indent=None`` writes it compact, with the C encoder (the plate document, rewritten
        as each well gets its first image, grows with the plate: indented, it took 10 ms at
        384 wells)."""
        try:
            self.write_bytes(key, json.dumps(doc, indent=indent).encode("utf-8"),
                             overwrite=overwrite, fsync=fsync)
        except StoreExistsError:
            return False
        return True

    # -- directories -------------------------------------------------------------------------
    def directory(self, key: str, *, create: bool = False) -> AbstractContextManager[int | str]:
        """Directory ``key`` open (created with its parents with ``create``)."""
        return self.resolver.directory(key, create=create)

    def makedirs(self, key: str) -> None:
        """Create directory ``key`` and its missing parents, below the plate."""
        with self.resolver.directory(key, create=True):
            pass

    def rename(self, key: str, new_name: str) -> None:
        """Rename entry ``key`` (a link is renamed, not its target) within its directory."""
        parent, _, name = key.rpartition("/")
        with self.resolver.directory(parent) as fd:
            rename_at(fd, name, new_name)

    def remove(self, key: str) -> bool:
        """Remove a file, a link (never its target) or a directory tree; False if missing."""
        try:
            with self.resolver.locate(key, follow_last=False) as loc:
                if not loc.name:
                    raise StorePathError(f"Cannot remove {key!r}: it names a directory through "
                                         "a link or '..'; expected a plain key.")
                return remove_at(loc.dir_fd, loc.name)
        except StoreNotFoundError:
            return False

    def copy_tree(self, src: str, dst: str) -> None:
        """Copy directory ``src`` (links inside it copied as links) to the new ``dst``."""
        with self.resolver.directory(src) as sfd, self.resolver.directory(dst, create=True) as dfd:
            if isinstance(sfd, str) or isinstance(dfd, str):
                raise StorePathError(
                    f"Cannot copy {src!r}: this platform has no dir_fd support, which the "
                    "ZarrStore needs to keep paths inside its plate.")
            _fdops.copy_tree(sfd, dfd)

    # -- locks -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, name: str, *, shared: bool = False) -> Iterator[None]:
        """Hold lock ``name`` of the plate (a file in its lock directory, opened below the
        plate and never through a link): exclusive (created if missing), or ``shared``
        (skipped while no writer ever created the lock)."""
        with contextlib.ExitStack() as stack:
            try:
                fd = stack.enter_context(self.resolver.directory(LOCK_DIR, create=not shared))
            except StoreNotFoundError:
                if not shared:
                    raise
                yield  # no writer ever locked anything: nothing to coordinate with
                return
            stack.enter_context(file_lock(name + ".lock", shared=shared,
                                          dir_fd=None if isinstance(fd, str) else fd,
                                          where=posixpath.join(self.full(LOCK_DIR), name)))
            yield


def field_path(row: str, column: str | int, field: str | int = 0) -> str:
    """The plate path of a field: ``"B/3/0"`` (row, column, field, as OME-Zarr HCS lays
    them out)."""
    return f"{row}/{column}/{field}"


def check_name(name: str, what: str, key: str) -> None:
    """StorePathError unless ``name`` is alphanumeric (as OME-Zarr requires)."""
    if not _NAME.fullmatch(name):
        raise StorePathError(
            f"Invalid {what} name {name!r} in {key!r}: OME-Zarr plate paths are "
            "'row/column/field' with alphanumeric names (e.g. 'B/3/0')."
        )


def _lstat(name: str, dir_fd: int | None, follow: bool) -> os.stat_result | None:
    """lstat of ``name`` in ``dir_fd`` (the directory itself when ``name`` is "")."""
    if not name:
        return os.fstat(dir_fd) if dir_fd is not None else os.stat(name)
    return lstat_at(name, dir_fd, follow)


def rename_at(fd: int | str, old: str, new: str) -> None:
    """Rename ``old`` to ``new`` in the open directory ``fd`` (a path without dir_fd)."""
    if isinstance(fd, str):
        os.rename(os.path.join(fd, old), os.path.join(fd, new))
        return
    os.rename(old, new, src_dir_fd=fd, dst_dir_fd=fd)


def remove_at(dir_fd: int | None, name: str) -> bool:
    """Remove entry ``name`` of ``dir_fd`` (a tree, a file or a link); False if missing."""
    st = lstat_at(name, dir_fd)
    if st is None:
        return False
    if stat.S_ISDIR(st.st_mode):
        _fdops.remove_tree(dir_fd, name)
    else:
        os.unlink(name, dir_fd=dir_fd)
    return True


def group_at(dir_fd: int | str, name: str, marker: str) -> bool | None:
    """Whether entry ``name`` of an open directory is a group directory (None: missing;
    a link or a directory without the group ``marker`` file is False). Nothing is followed."""
    if isinstance(dir_fd, str):
        full = os.path.join(dir_fd, name)
        return os.path.isfile(os.path.join(full, marker)) if os.path.lexists(full) else None
    try:
        fd = os.open(name, DIR_FLAGS | NOFOLLOW, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return False  # a link or a file
        raise
    try:
        st = lstat_at(marker, fd)
    finally:
        os.close(fd)
    return st is not None and stat.S_ISREG(st.st_mode)
