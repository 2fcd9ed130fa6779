"""DiskStore: files under a root directory, written atomically.

>>> from memtype.storage import DiskStore
>>> store = DiskStore("/data/run1")                                      # doctest: +SKIP
>>> store.save(image, "A01/s1.tif", parents=True, compression="zlib")   # doctest: +SKIP
>>> store.load("A01/s1.tif")                                             # doctest: +SKIP

The extension picks the format (see :mod:`memtype.storage._formats`): ``.npy``, ``.tif`` /
``.tiff``, ``.png``, ``.json``, ``.csv``, ``.txt``. Any other extension raises
``StoreFormatError``; a file is never renamed to fit a format. Data a format cannot hold
(a float64 PNG, a 4D TIFF, a dict in ``.npy``) raises ``StoreFormatError`` before anything
is written; a stored file that is corrupt or truncated raises it at ``load``.

Atomicity: each file is written to a hidden temporary file in its directory, flushed
(``fsync=True`` also syncs it and the directory to the device), then renamed into place. A
crash or a full disk leaves the previous file, or no file, never a partial one; the leftover
temporary is hidden from listings and removed by :meth:`DiskStore.purge_temporaries`. Two
writers of one path with ``overwrite=False``: exactly one succeeds.

Paths: ``..`` may not leave the root (checked lexically), and every key is resolved from the
root one directory at a time through open directory descriptors (see
:mod:`memtype.storage._beneath`): a symbolic link inside the root is followed while its
target stays inside; one leading outside raises ``StorePathError`` unless the store was
created with ``follow_symlinks_outside=True``. ``delete`` and ``move`` act on a link itself.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Iterable, Iterator
from typing import Any

from memtype.errors import (
    StoreExistsError,
    StoreFormatError,
    StoreIsADirectoryError,
    StoreNotADirectoryError,
    StoreNotFoundError,
    StorePathError,
)
from memtype.storage import _disk_ops, _fdops
from memtype.storage._atomic import atomic_write
from memtype.storage._beneath import UNKNOWN, Loc, Resolver
from memtype.storage._disk_ops import as_fd
from memtype.storage._formats import FileFormat, check_options, format_for
from memtype.storage._readers import array_header, decode
from memtype.storage.base import PathLike, Store, StoreStat, check_type, natural_key

__all__ = ["DiskStore"]

_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


class DiskStore(Store):
    """Files in a directory tree on a local file system.

    Parameters
    ----------
    root : str or os.PathLike
        The directory holding the store; created (with parents) unless ``read_only``.
    fsync : bool
        Default for :meth:`save`'s ``fsync``: make each write durable across power loss
        (slower). Without it writes are still atomic with respect to crashes of the process.
    read_only : bool
        Refuse writes and deletes (``StoreReadOnlyError``).
    follow_symlinks_outside : bool
        Follow symbolic links that lead out of the root (default: refuse them with
        ``StorePathError``).
    """

    registry_name = "disk"
    device = "disk"

    def __init__(self, root: PathLike, *, fsync: bool = False, read_only: bool = False,
                 follow_symlinks_outside: bool = False) -> None:
        super().__init__(root, read_only=read_only)
        check_type("fsync", fsync, bool, "a bool")
        check_type("follow_symlinks_outside", follow_symlinks_outside, bool, "a bool")
        self.fsync = fsync
        self.follow_symlinks_outside = follow_symlinks_outside
        if os.path.exists(self.root) and not os.path.isdir(self.root):
            raise StoreNotADirectoryError(
                f"Store root {self.root!r} is a file; expected a directory.")
        if not read_only:
            os.makedirs(self.root, exist_ok=True)
        self._paths = Resolver(self.root, self.follow_symlinks_outside)

    def params(self) -> dict[str, Any]:
        """Constructor arguments that recreate this store."""
        return {"root": self.root, "fsync": self.fsync, "read_only": self.read_only,
                "follow_symlinks_outside": self.follow_symlinks_outside}

    def path_of(self, path: PathLike) -> str:
        """The absolute (lexical) file-system path of a store path."""
        return self._paths.full(self.key(path))

    # -- files -------------------------------------------------------------------------
    def save(self, data: Any, path: PathLike, *, overwrite: bool = False,
             parents: bool = False, fsync: bool | None = None, **options: Any) -> None:
        """Write ``data`` to ``path`` atomically, in the format its extension names.

        Parameters
        ----------
        data : object
            See the module docstring for what each format holds.
        path : str or os.PathLike
            Destination; its extension picks the format.
        overwrite, parents : bool
            See :meth:`Store.save`.
        fsync : bool, optional
            Override the store's ``fsync`` default for this write.
        **options
            Format options: ``compression`` (TIFF), ``compress_level`` (PNG), ``indent``
            (JSON).

        Raises
        ------
        StoreFormatError
            Unsupported extension, or data the format cannot hold.
        StoreFullError
            The device is full (``errno.ENOSPC``); the old file is kept.
        StoreExistsError, StoreNotFoundError, StorePathError, StoreReadOnlyError
            See :class:`Store`.
        """
        self._require_writable("save", path)
        key = self._file_key(path)
        fmt = self._format(key)
        check_options(fmt, options, fmt.save_options, "Saving")
        payload = fmt.prepare(data, key, options)
        sync = self.fsync if fsync is None else bool(fsync)
        with self._locate(key, follow_last=False, parents=parents) as loc:
            st = _disk_ops.lstat(loc)
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise StoreIsADirectoryError(f"{key!r} is a directory; expected a file path.")
            if st is not None and not overwrite:
                raise StoreExistsError(
                    f"{key!r} already exists; pass overwrite=True to replace it.")
            atomic_write(loc.name, lambda fh: fmt.write(payload, fh, options),
                         overwrite=overwrite, fsync=sync, dir_fd=loc.dir_fd)

    def load(self, path: PathLike, **options: Any) -> Any:
        """Read ``path`` in the format its extension names.

        Parameters
        ----------
        path : str or os.PathLike
            The file.
        **options
            ``mmap=True`` (``.npy``: a read-only memory map), ``key`` (TIFF page index).

        Raises
        ------
        StoreFormatError
            The file is corrupt, truncated, or not in its extension's format.
        StoreIndexError
            ``key`` is not a page of the TIFF.
        """
        key = self._file_key(path)
        fmt = self._format(key)
        check_options(fmt, options, fmt.load_options, "Loading")
        with self._open_file(key) as fh:
            return decode(fmt.read, fh, f"{fmt.name} file", repr(fh.name), options)

    def _open_file(self, key: str) -> Any:
        """The regular file at ``key``, open for reading (links resolved inside the root).
        ``O_NONBLOCK`` so that a FIFO in the store cannot block the call."""
        fd = self._paths.open(key, _READ_FLAGS)
        if fd is None:
            fd = self._open_walked(key)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise StoreIsADirectoryError(f"{key!r} is a directory (or not a regular file); "
                                 "expected a file.")
        os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb")
        fh.raw.name = self._paths.full(key)  # type: ignore[attr-defined]  # tifffile reads it
        return fh

    def _open_walked(self, key: str) -> int:
        """:meth:`_open_file`'s descriptor through the walk (and its precise errors)."""
        with self._locate(key, follow_last=True, missing="No file") as loc:
            if not loc.name:
                raise StoreIsADirectoryError(f"{key!r} is a directory; expected a file.")
            try:
                return os.open(loc.name, _READ_FLAGS | self._paths.nofollow, dir_fd=loc.dir_fd)
            except FileNotFoundError:
                raise StoreNotFoundError(f"No file at {key!r} in {self.root!r}.") from None

    @contextlib.contextmanager
    def _locate(self, key: str, *, follow_last: bool, parents: bool | None = None,
                missing: str | None = None) -> Iterator[Loc]:
        """The resolver's ``locate`` with the store's words for a directory missing on the
        way: a read names what it looked for (``missing`` + " at key"); a write without
        ``parents`` says how to create the directory."""
        with contextlib.ExitStack() as stack:
            try:
                loc = stack.enter_context(
                    self._paths.locate(key, follow_last=follow_last, create=bool(parents)))
            except StoreNotFoundError as exc:
                if missing is not None:
                    raise StoreNotFoundError(
                        f"{missing} at {key!r} in {self.root!r}.") from exc
                if parents is False:
                    raise StoreNotFoundError(
                        f"{str(exc).rstrip('.')}; create it with ensure_directory or pass "
                        "parents=True.") from exc
                raise
            yield loc

    def _format(self, key: str) -> FileFormat:
        """The format of ``key``'s extension; a directory (``"d"``: of no known format) is a
        StoreIsADirectoryError, not a StoreFormatError."""
        try:
            return format_for(key)
        except StoreFormatError:
            if self.is_dir(key):
                raise StoreIsADirectoryError(
                    f"{key!r} is a directory; expected a file path.") from None
            raise

    def _file_key(self, path: PathLike) -> str:
        """The key of a path that must name a file (not the root)."""
        key = self.key(path)
        if not key:
            raise StoreIsADirectoryError(
                f"{os.fspath(path)!r} is the store root; expected a file path.")
        return key

    # -- queries -----------------------------------------------------------------------
    def _kind(self, path: PathLike, follow: bool) -> int | None:
        """The ``st_mode`` of a key (None when it, or a directory on its way, is missing)."""
        key = self.key(path)
        mode = self._paths.quick_mode(key, follow)
        if mode != UNKNOWN:
            return mode
        try:
            with self._paths.locate(key, follow_last=follow) as loc:
                st = _disk_ops.lstat(loc, follow and self.follow_symlinks_outside)
        except (StoreNotFoundError, StorePathError):
            return None  # missing, a file on the way, or a link leading outside
        return None if st is None else st.st_mode

    def exists(self, path: PathLike) -> bool:
        return self._kind(path, follow=False) is not None

    def is_file(self, path: PathLike) -> bool:
        mode = self._kind(path, follow=True)
        return mode is not None and stat.S_ISREG(mode)

    def is_dir(self, path: PathLike) -> bool:
        mode = self._kind(path, follow=True)
        return mode is not None and stat.S_ISDIR(mode)

    def list_files(self, directory: PathLike = "", pattern: str | None = None,
                   extensions: Iterable[str] | str | None = None,
                   recursive: bool = False) -> list[str]:
        key = self.key(directory)
        exts = self._extensions(extensions)
        with self._paths.directory(key) as fd:
            found = [k for k, _ in _fdops.walk_files(as_fd(fd), key, recursive, self.is_file)]
        return self._listing(directory, found, pattern, exts)

    def list_dir(self, directory: PathLike = "") -> list[str]:
        with self._paths.directory(self.key(directory)) as fd:
            names = [e.name for e in _fdops.scan(fd)]
        return sorted(names, key=natural_key)

    def stat(self, path: PathLike) -> StoreStat:
        key = self.key(path)
        with self._locate(key, follow_last=True, missing="No file or directory") as loc:
            st = _disk_ops.lstat(loc, self.follow_symlinks_outside)
        if st is None:
            raise StoreNotFoundError(f"No file or directory at {key!r} in {self.root!r}.")
        if stat.S_ISDIR(st.st_mode):
            return StoreStat(key, True, 0, st.st_mtime)
        with self._open_file(key) as fh:
            where = repr(fh.name)
            shape, dtype = decode(lambda f, _: array_header(f, key), fh, "file", where, {})
        return StoreStat(key, False, st.st_size, st.st_mtime, shape, dtype)

    # -- directories and housekeeping -------------------------------------------------------
    def ensure_directory(self, path: PathLike) -> str:
        key = self.key(path)
        if not self.is_dir(key):
            self._require_writable("create directory", path)
            with self._paths.directory(key, create=True):
                pass
        return key

    def delete(self, path: PathLike) -> None:
        self._require_writable("delete", path)
        key = self._file_key(path)
        with self._locate(key, follow_last=False, missing="No file or directory") as loc:
            st = _disk_ops.existing(loc, self.root)
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(loc.name, dir_fd=loc.dir_fd)
                return
            try:
                os.rmdir(loc.name, dir_fd=loc.dir_fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                raise StoreIsADirectoryError(
                    f"Directory {key!r} is not empty; use delete_all to remove it with its "
                    "contents.") from exc

    def delete_all(self, path: PathLike) -> None:
        self._require_writable("delete", path)
        key = self.key(path)
        if not key:
            with self._paths.directory("") as fd:
                for entry in _fdops.scan(fd):
                    _disk_ops.remove(Loc(as_fd(fd), entry.name, entry.name, entry.path))
            return
        with self._locate(key, follow_last=False, missing="No file or directory") as loc:
            _disk_ops.existing(loc, self.root)
            _disk_ops.remove(loc)

    def move(self, src: PathLike, dst: PathLike, *, overwrite: bool = False,
             parents: bool = False) -> None:
        self._require_writable("move", src)
        skey, dkey = self._transfer_keys(src, dst)
        with self._locate(skey, follow_last=False, missing="No file or directory") as s, \
                self._locate(dkey, follow_last=False, parents=parents) as d:
            _disk_ops.move(s, d, overwrite, self.root)

    def copy(self, src: PathLike, dst: PathLike, *, overwrite: bool = False,
             parents: bool = False) -> None:
        self._require_writable("copy to", dst)
        skey, dkey = self._transfer_keys(src, dst)
        if self.is_dir(skey):
            self._copy_dir(skey, dkey, overwrite, parents)
            return
        with self._open_file(skey) as source, \
                self._locate(dkey, follow_last=False, parents=parents) as d:
            _disk_ops.copy_file(source, d, overwrite, self.fsync)

    def _copy_dir(self, skey: str, dkey: str, overwrite: bool, parents: bool) -> None:
        """Copy a directory tree (links copied as links) into place through a temporary."""
        with self._paths.directory(skey) as sfd, \
                self._locate(dkey, follow_last=False, parents=parents) as d:
            _disk_ops.copy_dir(sfd, d, overwrite)

    def _transfer_keys(self, src: PathLike, dst: PathLike) -> tuple[str, str]:
        """Checked keys of a move or copy."""
        skey, dkey = self._file_key(src), self._file_key(dst)
        if dkey == skey or dkey.startswith(skey + "/"):
            raise StorePathError(
                f"Cannot move or copy {skey!r} to {dkey!r}: a path cannot be placed inside itself."
            )
        if not self.exists(skey):
            raise StoreNotFoundError(f"No file or directory at {skey!r} in {self.root!r}.")
        parent = posixpath.dirname(dkey)
        if not self.is_dir(parent) and self.exists(parent):
            raise StoreNotADirectoryError(f"{parent!r} is a file; expected a directory.")
        return skey, dkey

    def purge_temporaries(self, directory: PathLike = "", *, min_age_s: float = 60.0) -> int:
        """Remove hidden temporary files left by interrupted writes (crashes).

        Parameters
        ----------
        directory : str or os.PathLike
            Where to look (recursively); the whole store by default.
        min_age_s : float
            Only remove those older than this, so writes still in progress are untouched.

        Returns
        -------
        int
            How many were removed.
        """
        self._require_writable("purge", directory)
        with self._paths.directory(self.key(directory)) as fd:
            return _fdops.purge(as_fd(fd), min_age_s)

