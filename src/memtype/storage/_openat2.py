"""``openat2(RESOLVE_BENEATH)``: the kernel resolves a whole key below a directory in one call.

Linux 5.6+ resolves a path relative to a directory descriptor and refuses, with ``EXDEV``,
any step that would leave that directory: a ``..`` above it, an absolute symbolic link,
a link whose target climbs out (``RESOLVE_BENEATH``); ``RESOLVE_NO_MAGICLINKS`` refuses
``/proc`` magic links. The check is done on every component as it is looked up, so it is as
race-safe as the DiskStore's own walk (:mod:`memtype.storage._beneath`), for one system
call instead of three per directory. Python has no binding; this calls ``syscall(2)``
through ctypes. Where the call is missing (another OS, an older kernel, a seccomp filter
that answers ``ENOSYS`` or ``EPERM``) :func:`open_beneath` answers ``-ENOSYS`` and the walk
runs instead.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from typing import Any

__all__ = ["open_beneath"]

_SYS_OPENAT2 = 437  # one number on every Linux architecture (the unified table), not alpha
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_UNAVAILABLE = frozenset({errno.ENOSYS, errno.E2BIG, errno.EINVAL, errno.EPERM})
"""A kernel without openat2 (or without a flag used here), or a seccomp filter (EPERM: the
opens here are read-only, so no seal or O_NOATIME rule can answer it)."""


class _OpenHow(ctypes.Structure):
    """``struct open_how`` of ``<linux/openat2.h>``."""

    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


_HOW_SIZE = ctypes.sizeof(_OpenHow)
_state: dict[str, Any] = {}  # "call": the bound syscall (None: unavailable); "how": per flags


def _syscall() -> Any:
    """``syscall`` from the C library, bound once (None where openat2 cannot exist)."""
    if "call" not in _state:
        call = None
        if sys.platform.startswith("linux") and os.uname().machine != "alpha":
            try:
                call = ctypes.CDLL(None, use_errno=True).syscall
            except (OSError, AttributeError):  # no C library symbols to bind (static builds)
                call = None
        if call is not None:
            call.restype = ctypes.c_long
            call.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_char_p, ctypes.c_void_p,
                             ctypes.c_size_t]
        _state["call"] = call
        _state["how"] = {}
    return _state["call"]


def _how(flags: int) -> Any:
    """A pointer to the ``open_how`` for ``flags`` (built once per set of flags)."""
    hows: dict[int, Any] = _state["how"]
    how = hows.get(flags)
    if how is None:
        how = hows[flags] = ctypes.pointer(
            _OpenHow(flags | os.O_CLOEXEC, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS))
    return how


def open_beneath(dir_fd: int, path: str, flags: int) -> int:
    """Open ``path`` (relative, links followed) without leaving directory ``dir_fd``.

    Returns the new descriptor, or minus the kernel's errno (no exception: callers branch
    on it): ``-EXDEV`` when resolving would leave ``dir_fd``, ``-ELOOP`` for a magic link or
    too many links, ``-ENOENT``, ``-ENOTDIR``...; ``-ENOSYS`` where ``openat2`` is not
    available.
    """
    call = _syscall()
    if call is None:
        return -errno.ENOSYS
    fd: int = call(_SYS_OPENAT2, dir_fd, os.fsencode(path), _how(flags), _HOW_SIZE)
    if fd >= 0:
        return fd
    code = ctypes.get_errno()
    if code in _UNAVAILABLE:
        _state["call"] = None  # an old kernel or a filter: never ask again
        return -errno.ENOSYS
    return -code
