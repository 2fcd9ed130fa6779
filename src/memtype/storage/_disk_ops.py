"""What the DiskStore does at a resolved location (:class:`~memtype.storage._beneath.Loc`):
stat it, remove it, move or copy onto it, with the store's errors.

Every call acts on a name in an open directory (no symbolic link followed in the last
component: ``delete`` and ``move`` act on a link itself); trees go through
:mod:`memtype.storage._fdops`, files are written through :func:`~memtype.storage._atomic.
atomic_write`.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from memtype.errors import StoreExistsError, StoreNotFoundError, StorePathError
from memtype.storage import _fdops
from memtype.storage._atomic import atomic_write, temp_name
from memtype.storage._beneath import NOFOLLOW, Loc, lstat_at

__all__ = ["as_fd", "lstat", "existing", "remove", "move", "copy_file", "copy_dir"]


def as_fd(handle: int | str) -> int:
    """A directory descriptor (the DiskStore needs ``dir_fd`` support from the OS)."""
    if isinstance(handle, str):
        raise StorePathError(
            f"Cannot use {handle!r}: this platform has no dir_fd support, which the DiskStore "
            "needs to keep paths inside its root.")
    return handle


def lstat(loc: Loc, follow: bool = False) -> os.stat_result | None:
    """lstat (stat with ``follow``) of a location, None when missing."""
    if not loc.name:  # the directory itself
        return os.fstat(as_fd(loc.dir_fd if loc.dir_fd is not None else loc.name))
    return lstat_at(loc.name, loc.dir_fd, follow)


def existing(loc: Loc, root: str) -> os.stat_result:
    """lstat of a location that must exist."""
    st = lstat(loc)
    if st is None:
        raise StoreNotFoundError(f"No file or directory at {loc.key!r} in {root!r}.")
    return st


def remove(loc: Loc) -> None:
    """Remove a file, a link (not its target) or a directory tree."""
    st = lstat(loc)
    if st is not None and stat.S_ISDIR(st.st_mode):
        _fdops.remove_tree(loc.dir_fd, loc.name)
    else:
        os.unlink(loc.name, dir_fd=loc.dir_fd)


def _clear_destination(d: Loc, overwrite: bool) -> bool:
    """Make room at ``d``: refuse without ``overwrite``, remove a directory in the way.
    Returns whether something was there."""
    st = lstat(d)
    if st is None:
        return False
    if not overwrite:
        raise StoreExistsError(f"{d.key!r} already exists; pass overwrite=True to replace it.")
    if stat.S_ISDIR(st.st_mode):
        _fdops.remove_tree(d.dir_fd, d.name)
    return True


def move(s: Loc, d: Loc, overwrite: bool, root: str) -> None:
    """Move the file, link or directory at ``s`` to ``d``."""
    is_dir = stat.S_ISDIR(existing(s, root).st_mode)
    existed = _clear_destination(d, overwrite)
    if is_dir:
        if existed and lstat(d) is not None:  # a file in the way of a directory
            os.unlink(d.name, dir_fd=d.dir_fd)
        os.rename(s.name, d.name, src_dir_fd=s.dir_fd, dst_dir_fd=d.dir_fd)
    elif existed:
        os.replace(s.name, d.name, src_dir_fd=s.dir_fd, dst_dir_fd=d.dir_fd)
    else:
        _move_no_clobber(s, d)


def _move_no_clobber(s: Loc, d: Loc) -> None:
    """Rename a file to a name that must not exist (atomic where hard links exist)."""
    try:
        os.link(s.name, d.name, src_dir_fd=s.dir_fd, dst_dir_fd=d.dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise StoreExistsError(f"{d.key!r} already exists; pass overwrite=True to replace it.") \
            from None
    os.unlink(s.name, dir_fd=s.dir_fd)


def copy_file(source: BinaryIO, d: Loc, overwrite: bool, fsync: bool) -> None:
    """Copy the open file ``source`` to ``d`` atomically (a directory there is replaced)."""
    st = lstat(d)
    if st is not None and not overwrite:
        raise StoreExistsError(f"{d.key!r} already exists; pass overwrite=True.")
    if st is not None and stat.S_ISDIR(st.st_mode):
        _fdops.remove_tree(d.dir_fd, d.name)

    def write(fh: BinaryIO) -> None:
        """The source's bytes from its start."""
        _fdops.copy_stream(source, fh)

    atomic_write(d.name, write, overwrite=overwrite, fsync=fsync, dir_fd=d.dir_fd)


def copy_dir(sfd: int | str, d: Loc, overwrite: bool) -> None:
    """Copy the open directory ``sfd`` (links copied as links) to ``d`` through a temporary."""
    if lstat(d) is not None and not overwrite:
        raise StoreExistsError(f"{d.key!r} already exists; pass overwrite=True.")
    tmp = temp_name("", d.name)
    os.mkdir(tmp, dir_fd=d.dir_fd)
    try:
        tfd = os.open(tmp, os.O_RDONLY | NOFOLLOW, dir_fd=d.dir_fd)
        try:
            _fdops.copy_tree(as_fd(sfd), tfd)
        finally:
            os.close(tfd)
        _clear_destination(d, overwrite)
        os.replace(tmp, d.name, src_dir_fd=d.dir_fd, dst_dir_fd=d.dir_fd)
    except BaseException:
        if lstat(Loc(d.dir_fd, tmp, tmp, tmp)) is not None:
            _fdops.remove_tree(d.dir_fd, tmp)
        raise

