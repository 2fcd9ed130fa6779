"""Crash-safe file writes and cross-process locks shared by the disk and zarr stores.

A write goes to a temporary file in the destination's directory, is flushed (and, on
request, fsync'ed), then takes the destination's name in one step: ``os.replace`` when
overwriting, ``os.link`` (which fails if the name exists) otherwise. A crash at any point
leaves the old file or no file, never a torn one; the only leftover is a hidden temporary
file, which listings skip and :func:`purge_temporaries` removes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import BinaryIO

from memtype.errors import StoreExistsError, StoreNotFoundError

TEMP_SUFFIX = ".memtype-tmp"
"""Every temporary file or directory name ends with this (and starts with a dot)."""

_umask: list[int] = []


def file_mode() -> int:
    """Permissions a new file gets from the process umask (read without changing it)."""
    if not _umask:
        _umask.append(_read_umask())
    return 0o666 & ~_umask[0]


def _read_umask() -> int:
    """The process umask from /proc (Linux); 0o022 where that is not available."""
    status = "/proc/self/status"
    if not os.path.exists(status):
        return 0o022  # not Linux: assume the common default
    with open(status, encoding="ascii") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def temp_name(directory: str, name: str) -> str:
    """A fresh hidden temporary path next to ``directory/name``."""
    return os.path.join(directory, f".{name}.{uuid.uuid4().hex[:12]}{TEMP_SUFFIX}")


def is_temporary(name: str) -> bool:
    """Whether a directory entry is one of our temporary files."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def atomic_write(path: str, write: Callable[[BinaryIO], None], *, overwrite: bool,
                 fsync: bool = False) -> None:
    """Write ``path`` through ``write(file)`` so that readers see all of it or none of it.

    Parameters
    ----------
    path : str
        Absolute destination path; its directory must exist.
    write : callable
        Writes the content to the open binary file it is given.
    overwrite : bool
        Replace an existing file; otherwise an existing one raises ``StoreExistsError``.
    fsync : bool
        fsync the file (and its directory) before returning: durable across power loss.

    Raises
    ------
    StoreExistsError
        ``path`` exists and ``overwrite`` is false (nothing is changed).
    OSError
        From the file system (disk full keeps ``errno.ENOSPC``); the old file is kept.
    """
    directory, name = os.path.split(path)
    tmp = temp_name(directory, name)
    try:
        fh = open(tmp, "wb", opener=_exclusive)  # noqa: SIM115 (closed below)
    except FileNotFoundError as exc:
        raise StoreNotFoundError(
            f"Cannot write {path!r}: its directory {directory!r} does not exist."
        ) from exc
    try:
        with fh:
            write(fh)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        _commit(tmp, path, overwrite)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if fsync:
        fsync_directory(directory)


def _exclusive(path: str, flags: int) -> int:
    """``open`` opener: create a new file only, with the umask's permissions."""
    return os.open(path, flags | os.O_EXCL, file_mode())


def _commit(tmp: str, path: str, overwrite: bool) -> None:
    """Give the finished temporary file its final name."""
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise StoreExistsError(
            f"{path!r} already exists; pass overwrite=True to replace it."
        ) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        _commit_without_links(tmp, path)  # file systems without hard links (FAT, some NFS)
        return
    os.unlink(tmp)


def _commit_without_links(tmp: str, path: str) -> None:
    """Best effort no-overwrite rename where hard links are unsupported (check, then rename)."""
    if os.path.lexists(path):
        raise StoreExistsError(f"{path!r} already exists; pass overwrite=True to replace it.")
    os.replace(tmp, path)


def fsync_directory(directory: str) -> None:
    """fsync a directory so that a rename in it survives a power loss (POSIX only)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def purge_temporaries(directory: str, *, min_age_s: float = 60.0) -> int:
    """Remove temporary files left under ``directory`` by interrupted writes.

    Parameters
    ----------
    directory : str
        Absolute directory, searched recursively.
    min_age_s : float
        Only remove temporaries older than this, so writes still running are not disturbed.

    Returns
    -------
    int
        How many were removed.
    """
    removed = 0
    limit = time.time() - min_age_s
    for parent, dirs, files in os.walk(directory):
        for name in files + dirs:
            full = os.path.join(parent, name)
            if is_temporary(name) and os.lstat(full).st_mtime <= limit:
                remove_path(full)
                removed += 1
        dirs[:] = [d for d in dirs if not is_temporary(d)]
    return removed


def remove_path(path: str) -> None:
    """Remove a file, link or directory tree."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def copy_into(src: str, fh: BinaryIO) -> None:
    """Copy the bytes of file ``src`` into the open file ``fh``."""
    with open(src, "rb") as source:
        shutil.copyfileobj(source, fh, 1 << 20)


def ignore_temporaries(directory: str, names: list[str]) -> list[str]:
    """``shutil.copytree`` filter that skips temporaries."""
    return [n for n in names if is_temporary(n)]


_fallback_lock = threading.Lock()


@contextlib.contextmanager
def file_lock(path: str, *, shared: bool = False) -> Iterator[None]:
    """Hold a lock on ``path`` across threads and processes: exclusive (created if missing),
    or ``shared`` (many holders; skipped when the lock file does not exist yet).

    Uses ``fcntl.flock`` (each call opens its own descriptor, so threads exclude each other
    too). Without fcntl (Windows) only threads of this process are excluded.
    """
    try:
        import fcntl
    except ImportError:  # no fcntl on this platform: a process-local lock is all we have
        with _fallback_lock:
            yield
        return
    if shared:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # never locked by a writer: nothing to coordinate with
            yield
            return
    else:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, file_mode())
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
