"""Directory-tree operations on open directory descriptors, for the DiskStore.

Every function walks with ``O_NOFOLLOW`` relative to descriptors (a symbolic link is never
followed out of the tree; links are removed, listed or copied as links) and without
recursion, so trees thousands of levels deep are handled (one descriptor per level is open
while a branch is walked). Where the OS lacks ``dir_fd`` the descriptor arguments are full
paths and the path-based equivalents run.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from typing import BinaryIO

from memtype.storage._atomic import is_temporary
from memtype.storage._beneath import DIR_FLAGS, NOFOLLOW

__all__ = ["scan", "remove_tree", "copy_tree", "walk_files", "purge", "copy_file_into",
           "copy_stream"]

_CHUNK = 1 << 20
FileFilter = Callable[[str, str], bool]


def scan(fd: int | str) -> list[os.DirEntry[str]]:
    """Entries of an open directory (or a path), temporaries left out."""
    with os.scandir(fd) as entries:
        return [e for e in entries if not is_temporary(e.name)]


def _open_dir(name: str, dir_fd: int) -> int:
    """Open subdirectory ``name`` of ``dir_fd`` without following a link."""
    return os.open(name, DIR_FLAGS | NOFOLLOW, dir_fd=dir_fd)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """A real directory (not a link to one)."""
    return entry.is_dir(follow_symlinks=False)


def remove_tree(dir_fd: int | None, name: str) -> None:
    """Remove directory ``name`` of ``dir_fd`` and everything in it (links, not targets)."""
    if dir_fd is None:
        shutil.rmtree(name)
        return
    top = _open_dir(name, dir_fd)
    frames: list[tuple[int, int, str, list[str]]] = []
    frames.append((top, dir_fd, name, _clear_files(top)))
    try:
        while frames:
            fd, parent, own, pending = frames[-1]
            if pending:
                sub = pending.pop()
                child = _open_dir(sub, fd)
                frames.append((child, fd, sub, _clear_files(child)))
                continue
            frames.pop()
            os.close(fd)
            os.rmdir(own, dir_fd=parent)
    finally:
        for fd, *_ in frames:
            os.close(fd)


def _clear_files(fd: int) -> list[str]:
    """Unlink every non-directory entry of ``fd`` (temporaries too); the subdirectory names."""
    subdirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if _is_dir(entry):
                subdirs.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    return subdirs


def copy_file_into(src_fd: int | None, name: str, fh: BinaryIO) -> None:
    """Copy the bytes of regular file ``name`` (not a link) into the open file ``fh``."""
    fd = os.open(name, os.O_RDONLY | NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=src_fd)
    with os.fdopen(fd, "rb") as source:
        copy_stream(source, fh)


def copy_stream(source: BinaryIO, fh: BinaryIO) -> None:
    """Copy the open file ``source``, from its start, into the open file ``fh``."""
    source.seek(0)
    shutil.copyfileobj(source, fh, _CHUNK)


def _copy_entry(entry: os.DirEntry[str], src: int, dst: int) -> str | None:
    """Copy one file or link from ``src`` to ``dst``; a subdirectory's name is returned."""
    if _is_dir(entry):
        os.mkdir(entry.name, dir_fd=dst)
        return entry.name
    if entry.is_symlink():
        os.symlink(os.readlink(entry.name, dir_fd=src), entry.name, dir_fd=dst)
        return None
    if entry.is_file(follow_symlinks=False):
        out = os.open(entry.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW,
                      stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode), dir_fd=dst)
        with os.fdopen(out, "wb") as fh:
            copy_file_into(src, entry.name, fh)
    return None  # sockets, fifos and devices are not copied


def copy_tree(src_fd: int, dst_fd: int) -> None:
    """Copy the contents of directory ``src_fd`` into the empty directory ``dst_fd``."""
    frames = [(os.dup(src_fd), os.dup(dst_fd), [e for e in scan(src_fd)])]
    try:
        while frames:
            src, dst, pending = frames[-1]
            if not pending:
                frames.pop()
                os.close(src)
                os.close(dst)
                continue
            sub = _copy_entry(pending.pop(), src, dst)
            if sub is not None:
                child_src, child_dst = _open_dir(sub, src), _open_dir(sub, dst)
                frames.append((child_src, child_dst, scan(child_src)))
    finally:
        for src, dst, _ in frames:
            os.close(src)
            os.close(dst)


def walk_files(top: int, key: str, recursive: bool,
               keep_link: Callable[[str], bool]) -> Iterator[tuple[str, str]]:
    """(key, name) of the files under an open directory; symbolic links are kept when
    ``keep_link(key)`` says they resolve to a file inside the store (never descended)."""
    frames = [(os.dup(top), key, scan(top))]
    try:
        while frames:
            fd, here, pending = frames[-1]
            if not pending:
                frames.pop()
                os.close(fd)
                continue
            entry = pending.pop()
            child = f"{here}/{entry.name}" if here else entry.name
            if entry.is_symlink():
                if keep_link(child):
                    yield child, entry.name
            elif _is_dir(entry):
                if recursive:
                    sub = _open_dir(entry.name, fd)
                    frames.append((sub, child, scan(sub)))
            elif entry.is_file(follow_symlinks=False):
                yield child, entry.name
    finally:
        for fd, _, _ in frames:
            os.close(fd)


def purge(top: int, min_age_s: float) -> int:
    """Remove temporaries older than ``min_age_s`` under an open directory; how many."""
    limit = time.time() - min_age_s
    removed = 0
    frames = [(os.dup(top), _entries(top))]
    try:
        while frames:
            fd, pending = frames[-1]
            if not pending:
                frames.pop()
                os.close(fd)
                continue
            entry = pending.pop()
            if is_temporary(entry.name):
                if entry.stat(follow_symlinks=False).st_mtime <= limit:
                    _remove_entry(entry, fd)
                    removed += 1
            elif _is_dir(entry):
                sub = _open_dir(entry.name, fd)
                frames.append((sub, _entries(sub)))
    finally:
        for fd, _ in frames:
            os.close(fd)
    return removed


def _entries(fd: int) -> list[os.DirEntry[str]]:
    """Every entry of an open directory, temporaries included."""
    with os.scandir(fd) as entries:
        return list(entries)


def _remove_entry(entry: os.DirEntry[str], fd: int) -> None:
    """Remove a file, link or directory tree found in ``fd``."""
    if _is_dir(entry):
        remove_tree(fd, entry.name)
    else:
        os.unlink(entry.name, dir_fd=fd)
