"""The one place where operating-system errors become memtype errors, for every store.

:class:`~memtype.storage.Store` wraps each public method of every store class with
:func:`guard`: an ``OSError`` that escapes a store method (from the OS, or from zarr,
tifffile or pillow doing file I/O for the store) is raised as the memtype error that
matches its ``errno``, naming the call, the store path and the file; the original error is
chained. Errors memtype raised itself pass through untouched.

=================================  ==========================================================
errno                              raised as
=================================  ==========================================================
ENOSPC, EDQUOT, EFBIG              StoreFullError (an ``OSError``, errno kept)
ENOENT                             StoreNotFoundError (a ``FileNotFoundError``)
EEXIST                             StoreExistsError (a ``FileExistsError``)
EACCES, EPERM                      StoreAccessError (a ``PermissionError``, errno kept)
EROFS                              StoreReadOnlyError (a ``PermissionError``)
ENOTDIR                            StoreNotADirectoryError (a ``StorePathError``, errno kept)
EISDIR, ENOTEMPTY                  StoreIsADirectoryError (a ``StorePathError``, errno kept)
ELOOP, ENAMETOOLONG                StorePathError (a ``ValueError``): a symbolic link loop, a
                                   name too long
anything else (EIO, no errno...)   StoreIOError (an ``OSError``, errno kept)
=================================  ==========================================================
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

from memtype.errors import (
    MemtypeError,
    StoreAccessError,
    StoreExistsError,
    StoreFullError,
    StoreIOError,
    StoreIsADirectoryError,
    StoreNotADirectoryError,
    StoreNotFoundError,
    StorePathError,
    StoreReadOnlyError,
)

__all__ = ["guard", "translate", "FULL_ERRNOS"]

F = TypeVar("F", bound=Callable[..., Any])

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_OS_CLASSES: dict[int, type[OSError]] = {
    **dict.fromkeys(FULL_ERRNOS, StoreFullError),
    errno.ENOENT: StoreNotFoundError,
    errno.EEXIST: StoreExistsError,
    errno.EACCES: StoreAccessError,
    errno.EPERM: StoreAccessError,
    errno.EROFS: StoreReadOnlyError,
    errno.ENOTDIR: StoreNotADirectoryError,
    errno.EISDIR: StoreIsADirectoryError,
    errno.ENOTEMPTY: StoreIsADirectoryError,
}
_PATH_ERRNOS = frozenset({errno.ELOOP, errno.ENAMETOOLONG})
_HINTS = {
    errno.ENOSPC: "the device is full; nothing was replaced and partial writes were removed",
    errno.EDQUOT: "the disk quota is exhausted; nothing was replaced",
    errno.EFBIG: "the file would exceed the size limit; nothing was replaced",
    errno.ELOOP: "a symbolic link loop (or a link where none may be followed)",
    errno.ENAMETOOLONG: "a name (or the whole path) is longer than the file system allows, "
                        "usually 255 bytes per name",
}


def translate(exc: OSError, action: str) -> MemtypeError:
    """The memtype error for ``exc`` raised while doing ``action`` (a call and its path)."""
    code = exc.errno
    reason = _HINTS.get(code or -1) or exc.strerror or str(exc) or type(exc).__name__
    where = f" ({exc.filename!r})" if isinstance(exc.filename, str) else ""
    message = f"Cannot {action}: {reason}{where}"
    if code in _PATH_ERRNOS:
        return StorePathError(f"{message} [{errno.errorcode.get(code or 0, code)}]")
    cls = _OS_CLASSES.get(code or -1, StoreIOError)
    if code is None:
        return StoreIOError(message)
    error = cls(code, message)
    if isinstance(exc.filename, str) and os.path.isabs(exc.filename):
        error.filename = exc.filename
    return error  # type: ignore[return-value]  # every class in the table is a MemtypeError


def _describe(store: Any, name: str, args: tuple[Any, ...]) -> str:
    """``save 'a/b.npy' in DiskStore('/data')``: the call, for an error message."""
    candidates = args[1:2] if name == "save" else args[:1]
    shown = [a for a in candidates if isinstance(a, (str, os.PathLike))]
    path = f" {os.fspath(shown[0])!r}" if name != "__init__" and shown else ""
    where = f" in {type(store).__name__}({getattr(store, 'root', '?')!r})"
    return f"{'open the store' if name == '__init__' else name}{path}{where}"


def guard(fn: F, name: str) -> F:
    """``fn`` (a store method) with OS errors raised as memtype errors (see the module)."""

    @functools.wraps(fn)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except OSError as exc:
            if isinstance(exc, MemtypeError):
                raise
            raise translate(exc, _describe(self, name, args)) from exc

    guarded.__memtype_guarded__ = True  # type: ignore[attr-defined]
    return guarded  # type: ignore[return-value]
