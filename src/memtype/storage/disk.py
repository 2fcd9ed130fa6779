"""DiskStore: files under a root directory, written atomically.

>>> from memtype.storage import DiskStore
>>> store = DiskStore("/data/run1")                                      # doctest: +SKIP
>>> store.save(image, "A01/s1.tif", parents=True, compression="zlib")   # doctest: +SKIP
>>> store.load("A01/s1.tif")                                             # doctest: +SKIP

The extension picks the format (see :mod:`memtype.storage._formats`): ``.npy``, ``.tif`` /
``.tiff``, ``.png``, ``.json``, ``.csv``, ``.txt``. Any other extension raises
``StoreFormatError``; a file is never renamed to fit a format. Data a format cannot hold
(a float64 PNG, a 4D TIFF, a dict in ``.npy``) raises ``StoreFormatError`` before anything
is written.

Atomicity: each file is written to a hidden temporary file in its directory, flushed
(``fsync=True`` also syncs it and the directory to the device), then renamed into place. A
crash or a full disk leaves the previous file, or no file, never a partial one; the leftover
temporary is hidden from listings and removed by :meth:`DiskStore.purge_temporaries`. Two
writers of one path with ``overwrite=False``: exactly one succeeds. Paths are checked
lexically against the root (``..`` may not leave it); symbolic links inside the root are
followed.
"""

from __future__ import annotations

import errno
import os
import posixpath
import shutil
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from memtype.errors import StoreExistsError, StoreFullError, StoreNotFoundError, StorePathError
from memtype.storage._atomic import (
    atomic_write,
    copy_into,
    ignore_temporaries,
    is_temporary,
    purge_temporaries,
    remove_path,
    temp_name,
)
from memtype.storage._formats import array_header, check_options, format_for
from memtype.storage.base import PathLike, Store, StoreStat, match_name, natural_key

__all__ = ["DiskStore"]


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
    """

    registry_name = "disk"
    device = "disk"

    def __init__(self, root: PathLike, *, fsync: bool = False, read_only: bool = False) -> None:
        super().__init__(root, read_only=read_only)
        self.fsync = bool(fsync)
        if os.path.exists(self.root) and not os.path.isdir(self.root):
            raise StorePathError(f"Store root {self.root!r} is a file; expected a directory.")
        if not read_only:
            os.makedirs(self.root, exist_ok=True)

    def params(self) -> dict[str, Any]:
        """Constructor arguments that recreate this store."""
        return {"root": self.root, "fsync": self.fsync, "read_only": self.read_only}

    def path_of(self, path: PathLike) -> str:
        """The absolute file-system path of a store path."""
        key = self.key(path)
        return posixpath.join(self.root, key) if key else self.root

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
        StoreExistsError, StoreNotFoundError, StorePathError, StoreReadOnlyError
            See :class:`Store`.
        OSError
            From the file system; a full disk keeps ``errno.ENOSPC`` and the old file.
        """
        self._require_writable("save", path)
        key = self._file_key(path)
        full = self.path_of(key)
        if os.path.isdir(full):
            raise StorePathError(f"{key!r} is a directory; expected a file path.")
        fmt = format_for(key)
        check_options(fmt, options, fmt.save_options, "Saving")
        payload = fmt.prepare(data, key, options)
        self._prepare_destination(key, overwrite, parents)
        sync = self.fsync if fsync is None else bool(fsync)
        self._write(full, lambda fh: fmt.write(payload, fh, options), overwrite, sync)

    def load(self, path: PathLike, **options: Any) -> Any:
        """Read ``path`` in the format its extension names.

        Parameters
        ----------
        path : str or os.PathLike
            The file.
        **options
            ``mmap=True`` (``.npy``: a read-only memory map), ``key`` (TIFF page index).
        """
        key = self._file_key(path)
        fmt = format_for(key)
        check_options(fmt, options, fmt.load_options, "Loading")
        full = self.path_of(key)
        self._require_file(key, full)
        try:
            return fmt.read(full, options)
        except FileNotFoundError as exc:  # removed between the check and the read
            raise StoreNotFoundError(f"No file at {key!r} in {self.root!r}.") from exc

    def _file_key(self, path: PathLike) -> str:
        """The key of a path that must name a file (not the root)."""
        key = self.key(path)
        if not key:
            raise StorePathError(f"{os.fspath(path)!r} is the store root; expected a file path.")
        return key

    def _prepare_destination(self, key: str, overwrite: bool, parents: bool) -> None:
        """Check (and with ``parents`` create) the destination's directory."""
        parent = posixpath.dirname(key)
        if parents:
            self._make_dirs(parent)
        else:
            self._require_dir(parent)
        if not overwrite and os.path.lexists(self.path_of(key)):
            raise StoreExistsError(f"{key!r} already exists; pass overwrite=True to replace it.")

    def _write(self, full: str, write: Callable[[Any], None], overwrite: bool,
               fsync: bool) -> None:
        """atomic_write with a clear message when the disk is full."""
        try:
            atomic_write(full, write, overwrite=overwrite, fsync=fsync)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            raise StoreFullError(
                errno.ENOSPC, f"No space left on the device while writing {full!r}; the "
                "previous file (if any) is unchanged and the partial write was removed", full,
            ) from exc

    def _require_file(self, key: str, full: str) -> None:
        """Raise unless ``full`` is a file."""
        if os.path.isfile(full):
            return
        if os.path.isdir(full):
            raise StorePathError(f"{key!r} is a directory; expected a file.")
        raise StoreNotFoundError(f"No file at {key!r} in {self.root!r}.")

    def _require_dir(self, key: str) -> str:
        """The full path of directory ``key``; raise unless it is one."""
        full = self.path_of(key)
        if os.path.isdir(full):
            return full
        if os.path.exists(full):
            raise StorePathError(f"{key!r} is a file; expected a directory.")
        raise StoreNotFoundError(
            f"No directory at {key or '/'!r} in {self.root!r}; create it with "
            "ensure_directory or pass parents=True."
        )

    def _make_dirs(self, key: str) -> str:
        """Create directory ``key`` with its parents; StorePathError if a file is in the way."""
        full = self.path_of(key)
        try:
            os.makedirs(full, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise StorePathError(
                f"Cannot create directory {key!r}: a file is in the way ({exc.filename!r}); "
                "expected directories along the path."
            ) from exc
        return full

    # -- queries -----------------------------------------------------------------------
    def exists(self, path: PathLike) -> bool:
        return os.path.lexists(self.path_of(path))

    def is_file(self, path: PathLike) -> bool:
        return os.path.isfile(self.path_of(path))

    def is_dir(self, path: PathLike) -> bool:
        return os.path.isdir(self.path_of(path))

    def list_files(self, directory: PathLike = "", pattern: str | None = None,
                   extensions: Iterable[str] | str | None = None,
                   recursive: bool = False) -> list[str]:
        key = self.key(directory)
        full = self._require_dir(key)
        exts = self._extensions(extensions)
        found = [k for k, name in self._walk(full, key, recursive)
                 if match_name(name, pattern, exts)]
        found.sort(key=natural_key)
        return [self._present(directory, k) for k in found]

    def _walk(self, full: str, key: str, recursive: bool) -> Iterator[tuple[str, str]]:
        """(key, name) of files under a directory, skipping temporaries."""
        with os.scandir(full) as entries:
            for entry in entries:
                if is_temporary(entry.name):
                    continue
                child = posixpath.join(key, entry.name) if key else entry.name
                if entry.is_dir():
                    if recursive:
                        yield from self._walk(entry.path, child, True)
                elif entry.is_file():
                    yield child, entry.name

    def list_dir(self, directory: PathLike = "") -> list[str]:
        full = self._require_dir(self.key(directory))
        names = [n for n in os.listdir(full) if not is_temporary(n)]
        return sorted(names, key=natural_key)

    def stat(self, path: PathLike) -> StoreStat:
        key = self.key(path)
        full = self.path_of(key)
        try:
            st = os.stat(full)
        except FileNotFoundError:
            raise StoreNotFoundError(f"No file or directory at {key!r} in {self.root!r}.") from None
        if os.path.isdir(full):
            return StoreStat(key, True, 0, st.st_mtime)
        shape, dtype = array_header(full)
        return StoreStat(key, False, st.st_size, st.st_mtime, shape, dtype)

    # -- directories and housekeeping -------------------------------------------------------
    def ensure_directory(self, path: PathLike) -> str:
        key = self.key(path)
        if not os.path.isdir(self.path_of(key)):
            self._require_writable("create directory", path)
            self._make_dirs(key)
        return key

    def delete(self, path: PathLike) -> None:
        self._require_writable("delete", path)
        key = self._file_key(path)
        full = self.path_of(key)
        if not os.path.isdir(full) or os.path.islink(full):
            self._unlink(key, full)
            return
        try:
            os.rmdir(full)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            raise StorePathError(
                f"Directory {key!r} is not empty; use delete_all to remove it with its contents."
            ) from exc

    def _unlink(self, key: str, full: str) -> None:
        """Remove one file."""
        try:
            os.unlink(full)
        except FileNotFoundError:
            raise StoreNotFoundError(f"No file or directory at {key!r} in {self.root!r}.") from None

    def delete_all(self, path: PathLike) -> None:
        self._require_writable("delete", path)
        key = self.key(path)
        full = self.path_of(key)
        if not os.path.isdir(full) or os.path.islink(full):
            self._unlink(key, full)
        elif key:
            shutil.rmtree(full)
        else:
            for name in os.listdir(full):
                remove_path(os.path.join(full, name))

    def move(self, src: PathLike, dst: PathLike, *, overwrite: bool = False,
             parents: bool = False) -> None:
        self._require_writable("move", src)
        s, d = self._transfer_paths(src, dst, overwrite, parents)
        if os.path.isdir(s):
            if os.path.lexists(d):
                remove_path(d)
            os.rename(s, d)
        elif overwrite:
            os.replace(s, d)
        else:
            self._move_file_no_clobber(s, d)

    @staticmethod
    def _move_file_no_clobber(s: str, d: str) -> None:
        """Rename a file to a name that must not exist (atomic where hard links exist)."""
        try:
            os.link(s, d)
        except FileExistsError:
            raise StoreExistsError(
                f"{d!r} already exists; pass overwrite=True to replace it."
            ) from None
        os.unlink(s)

    def copy(self, src: PathLike, dst: PathLike, *, overwrite: bool = False,
             parents: bool = False) -> None:
        self._require_writable("copy to", dst)
        s, d = self._transfer_paths(src, dst, overwrite, parents)
        if not os.path.isdir(s):
            self._write(d, lambda fh: copy_into(s, fh), overwrite, self.fsync)
            return
        tmp = temp_name(os.path.dirname(d), os.path.basename(d))
        shutil.copytree(s, tmp, ignore=ignore_temporaries)
        if os.path.lexists(d):
            remove_path(d)
        os.rename(tmp, d)

    def _transfer_paths(self, src: PathLike, dst: PathLike, overwrite: bool,
                        parents: bool) -> tuple[str, str]:
        """Checked full paths of a move or copy."""
        skey, dkey = self._file_key(src), self._file_key(dst)
        if dkey == skey or dkey.startswith(skey + "/"):
            raise StorePathError(
                f"Cannot move or copy {skey!r} to {dkey!r}: a path cannot be placed inside itself."
            )
        s = self.path_of(skey)
        if not os.path.lexists(s):
            raise StoreNotFoundError(f"No file or directory at {skey!r} in {self.root!r}.")
        d = self.path_of(dkey)
        parent = posixpath.dirname(dkey)
        if parents:
            self._make_dirs(parent)
        else:
            self._require_dir(parent)
        if os.path.lexists(d) and not overwrite:
            raise StoreExistsError(f"{dkey!r} already exists; pass overwrite=True to replace it.")
        return s, d

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
        return purge_temporaries(self._require_dir(self.key(directory)), min_age_s=min_age_s)
