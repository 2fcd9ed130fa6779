"""Crash-safe file writes and cross-process locks shared by the disk and zarr stores.

A write goes to a temporary file in the destination's directory, is flushed (and, on
request, fsync'ed), then takes the destination's name in one step: ``os.replace`` when
overwriting, ``os.link`` (which fails if the name exists) otherwise. A crash at any point
leaves the old file or no file, never a torn one; the only leftover is a hidden temporary
file, which listings skip and :meth:`DiskStore.purge_temporaries
<memtype.storage.DiskStore.purge_temporaries>` removes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import BinaryIO

from memtype.errors import StoreExistsError, StoreNotFoundError, StorePathError
from memtype.storage._oserrors import translate

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
    """A fresh hidden temporary path next to ``directory/name`` (the name shortened, so a
    temporary fits wherever the final name does)."""
    return os.path.join(directory, f".{name[:100]}.{uuid.uuid4().hex[:12]}{TEMP_SUFFIX}")


def is_temporary(name: str) -> bool:
    """Whether a directory entry is one of our temporary files."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def atomic_write(path: str, write: Callable[[BinaryIO], None], *, overwrite: bool,
                 fsync: bool = False, dir_fd: int | None = None) -> None:
    """Write ``path`` through ``write(file)`` so that readers see all of it or none of it.

    Parameters
    ----------
    path : str
        Absolute destination path whose directory exists; with ``dir_fd``, a name in the
        directory open as ``dir_fd``.
    write : callable
        Writes the content to the open binary file it is given.
    overwrite : bool
        Replace an existing file; otherwise an existing one raises ``StoreExistsError``.
    fsync : bool
        fsync the file (and its directory) before returning: durable across power loss.
    dir_fd : int, optional
        An open directory that ``path`` is relative to (no symbolic link is followed).

    Raises
    ------
    StoreExistsError
        ``path`` exists and ``overwrite`` is false (nothing is changed).
    OSError
        From the file system, always with its ``errno`` (a full disk is ``errno.ENOSPC``,
        even where a library reports a short write without one); the old file is kept.
    """
    directory, name = os.path.split(path)
    tmp = temp_name(directory, name)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_NOFOLLOW", 0), file_mode(), dir_fd=dir_fd)
    except FileNotFoundError as exc:
        raise StoreNotFoundError(
            f"Cannot write {path!r}: its directory {directory or '.'!r} does not exist."
        ) from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.raw.name = tmp  # type: ignore[attr-defined]  # libraries read the name
            _write_all(fh, write, tmp, path, dir_fd)
            if fsync:
                os.fsync(fh.fileno())
        _commit(tmp, path, overwrite, dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    if fsync:
        fsync_directory(directory, dir_fd)


def _write_all(fh: BinaryIO, write: Callable[[BinaryIO], None], tmp: str, path: str,
               dir_fd: int | None) -> None:
    """Run ``write`` and flush; a short write reported without errno gets the real one."""
    try:
        write(fh)
        fh.flush()
    except OSError as exc:
        if exc.errno is not None:
            raise
        code = _short_write_errno(tmp, dir_fd)
        if code is None:
            raise
        raise translate(OSError(code, os.strerror(code)), f"write {path!r}") from exc


def _short_write_errno(tmp: str, dir_fd: int | None) -> int | None:
    """Why a write came up short (NumPy's ``tofile`` says "N requested and M written"
    without errno): append one byte to the doomed temporary and report its errno."""
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_APPEND, dir_fd=dir_fd)
    except OSError as exc:
        return exc.errno
    try:
        os.write(fd, b"\0" * 4096)
        os.fsync(fd)
    except OSError as exc:
        return exc.errno
    finally:
        os.close(fd)
    return None


def _commit(tmp: str, path: str, overwrite: bool, dir_fd: int | None) -> None:
    """Give the finished temporary file its final name."""
    if overwrite:
        os.replace(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return
    try:
        os.link(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise StoreExistsError(
            f"{path!r} already exists; pass overwrite=True to replace it."
        ) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        _commit_without_links(tmp, path, dir_fd)  # file systems without hard links (FAT, NFS)
        return
    os.unlink(tmp, dir_fd=dir_fd)


def _commit_without_links(tmp: str, path: str, dir_fd: int | None) -> None:
    """Best effort no-overwrite rename where hard links are unsupported (check, then rename)."""
    try:
        os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        os.replace(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return
    raise StoreExistsError(f"{path!r} already exists; pass overwrite=True to replace it.")


def fsync_directory(directory: str, dir_fd: int | None = None) -> None:
    """fsync a directory (``dir_fd`` if given) so that a rename in it survives a power loss."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    if dir_fd is not None:
        os.fsync(dir_fd)
        return
    fd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ignore_temporaries(directory: str, names: list[str]) -> list[str]:
    """``shutil.copytree`` filter that skips temporaries."""
    return [n for n in names if is_temporary(n)]


_fallback_lock = threading.Lock()


@contextlib.contextmanager
def file_lock(path: str, *, shared: bool = False, dir_fd: int | None = None,
              where: str | None = None) -> Iterator[None]:
    """Hold a lock on ``path`` across threads and processes: exclusive (created if missing),
    or ``shared`` (many holders; skipped when the lock file does not exist yet).

    ``path`` is relative to the open directory ``dir_fd`` when given; ``where`` names it in
    messages. The lock file is never opened through a symbolic link (one in its place is a
    ``StorePathError``: a lock is memtype's own regular file). Uses ``fcntl.flock`` (each
    call opens its own descriptor, so threads exclude each other too). Without fcntl
    (Windows) only threads of this process are excluded.
    """
    try:
        import fcntl
    except ImportError:  # no fcntl on this platform: a process-local lock is all we have
        with _fallback_lock:
            yield
        return
    flags = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        if shared:
            fd = os.open(path, os.O_RDONLY | flags, dir_fd=dir_fd)
        else:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | flags, file_mode(), dir_fd=dir_fd)
    except FileNotFoundError:
        if not shared:
            raise
        yield  # never locked by a writer: nothing to coordinate with
        return
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise StorePathError(
            f"The lock file {where or path!r} is a symbolic link; expected a regular file "
            "(memtype creates its lock files itself and never follows a link to one)."
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
