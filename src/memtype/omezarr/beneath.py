"""A zarr v3 ``Store`` whose every read, write, delete and listing stays below the plate.

zarr-python opens chunk and metadata files itself; with its ``LocalStore`` it would open them
by path, following any symbolic link and racing any directory swap. :class:`BeneathStore`
hands zarr the same files through :class:`~memtype.omezarr.paths.PlatePaths`, which
opens each one relative to descriptors resolved below the plate's root (``openat2
(RESOLVE_BENEATH)`` or a no-follow walk): zarr can never open a path outside the plate, a
chunk linked outside raises ``StorePathError``, and a write never goes through a link.

Imported only where zarr is used (this module imports zarr).
"""

from __future__ import annotations

import asyncio
import builtins
import os
import posixpath
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from zarr.abc.store import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
)
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype

from memtype.errors import (
    ArgumentTypeError,
    StoreExistsError,
    StoreNotFoundError,
    StorePathError,
)
from memtype.storage import _fdops

if TYPE_CHECKING:
    from memtype.omezarr.paths import PlatePaths

__all__ = ["BeneathStore"]


class BeneathStore(Store):
    """The zarr hierarchy rooted at plate key ``prefix`` (a field, or its temporary)."""

    supports_writes: bool = True
    supports_deletes: bool = True
    supports_listing: bool = True

    def __init__(self, paths: PlatePaths, prefix: str, *, read_only: bool = False) -> None:
        super().__init__(read_only=read_only)
        self.paths, self.prefix = paths, prefix

    def _key(self, key: str) -> str:
        """The plate key of a zarr key; StorePathError for one that is not a plain key (an
        absolute path, ``.`` or ``..`` parts: zarr never writes them, and ``..`` would reach
        beside this hierarchy)."""
        parts = key.rstrip("/").split("/") if key else []
        if key.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise StorePathError(f"Invalid zarr key {key!r} in {self}: expected a relative "
                                 "key of names separated by '/', without '.' or '..' parts.")
        return posixpath.join(self.prefix, *parts) if parts else self.prefix

    def with_read_only(self, read_only: bool = False) -> BeneathStore:
        """The same hierarchy with another ``read_only``."""
        return BeneathStore(self.paths, self.prefix, read_only=read_only)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, BeneathStore) and other.paths.root == self.paths.root
                and other.prefix == self.prefix)

    def __hash__(self) -> int:
        return hash((self.paths.root, self.prefix))

    def __str__(self) -> str:
        return f"memtype-plate://{self.paths.full(self.prefix)}"

    # -- reads -------------------------------------------------------------------------------
    async def get(self, key: str, prototype: BufferPrototype | None = None,
                  byte_range: ByteRequest | None = None) -> Buffer | None:
        return await asyncio.to_thread(self.get_sync, key, prototype=prototype,
                                       byte_range=byte_range)

    def get_sync(self, key: str, *, prototype: BufferPrototype | None = None,
                 byte_range: ByteRequest | None = None) -> Buffer | None:
        """:meth:`get` without an event loop (zarr's ``SupportsGetSync``)."""
        if prototype is None:
            prototype = default_buffer_prototype()
        data = self._read(key, byte_range)
        return None if data is None else prototype.buffer.from_bytes(data)

    def _read(self, key: str, byte_range: ByteRequest | None) -> bytes | None:
        """The bytes of ``key`` (a range of them); None when missing."""
        fd = self.paths.open_read(self._key(key))
        if fd is None:
            return None
        with os.fdopen(fd, "rb") as fh:
            if byte_range is None:
                return fh.read()
            size = os.fstat(fd).st_size
            start, stop = _bounds(byte_range, size)
            fh.seek(start)
            return fh.read(max(stop - start, 0))

    async def get_partial_values(
            self, prototype: BufferPrototype,
            key_ranges: Iterable[tuple[str, ByteRequest | None]]) -> list[Buffer | None]:
        return list(await asyncio.gather(*(self.get(k, prototype, r) for k, r in key_ranges)))

    async def exists(self, key: str) -> bool:
        return await asyncio.to_thread(self.paths.is_file, self._key(key))

    # -- writes ------------------------------------------------------------------------------
    async def set(self, key: str, value: Buffer) -> None:
        await asyncio.to_thread(self.set_sync, key, value)

    def set_sync(self, key: str, value: Buffer) -> None:
        """:meth:`set` without an event loop (zarr's ``SupportsSetSync``)."""
        self._check_writable()
        self.paths.write_bytes(self._key(key), value.as_buffer_like())

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        self._check_writable()
        try:
            await asyncio.to_thread(self.paths.write_bytes, self._key(key),
                                    value.as_buffer_like(), overwrite=False)
        except StoreExistsError:
            return  # what set_if_not_exists means: the existing value stays

    async def delete(self, key: str) -> None:
        await asyncio.to_thread(self.delete_sync, key)

    def delete_sync(self, key: str) -> None:
        """:meth:`delete` without an event loop (zarr's ``SupportsDeleteSync``)."""
        self._check_writable()
        self.paths.remove(self._key(key))

    async def delete_dir(self, prefix: str) -> None:
        self._check_writable()
        await asyncio.to_thread(self._remove_dir, prefix.rstrip("/"))

    def _remove_dir(self, prefix: str) -> None:
        """Remove everything under ``prefix`` (the hierarchy's root is emptied, not removed)."""
        if prefix:
            self.paths.remove(self._key(prefix))
            return
        for name in self._names(""):
            self.paths.remove(self._key(name))

    # -- listings ----------------------------------------------------------------------------
    async def list(self) -> AsyncIterator[str]:
        for key in await asyncio.to_thread(self._files, ""):
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        prefix = prefix.rstrip("/")
        for key in await asyncio.to_thread(self._files, prefix):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        for name in await asyncio.to_thread(self._names, prefix.rstrip("/")):
            yield name

    def _files(self, prefix: str) -> builtins.list[str]:
        """Keys of the files under ``prefix`` (links kept when they resolve to a file
        inside the plate; never descended)."""
        try:
            with self.paths.directory(self._key(prefix)) as fd:
                if isinstance(fd, str):
                    return []
                walked = _fdops.walk_files(fd, prefix, True, self._is_inside_file)
                return [key for key, _ in walked]
        except StoreNotFoundError:
            return []

    def _is_inside_file(self, key: str) -> bool:
        """Whether the link at zarr key ``key`` leads to a file inside the plate."""
        return self.paths.is_file(self._key(key))

    def _names(self, prefix: str) -> builtins.list[str]:
        """Entry names of directory ``prefix`` (temporaries left out); [] when missing."""
        try:
            with self.paths.directory(self._key(prefix)) as fd:
                return [e.name for e in _fdops.scan(fd)]
        except StoreNotFoundError:
            return []


def _bounds(byte_range: Any, size: int) -> tuple[int, int]:
    """(start, stop) of a zarr byte request in a file of ``size`` bytes."""
    if isinstance(byte_range, RangeByteRequest):
        return byte_range.start, min(byte_range.end, size)
    if isinstance(byte_range, OffsetByteRequest):
        return byte_range.offset, size
    if isinstance(byte_range, SuffixByteRequest):
        return max(0, size - byte_range.suffix), size
    raise ArgumentTypeError(  # zarr's own stores' words, which its conformance suite checks
        f"Unexpected byte_range, got {byte_range!r} ({type(byte_range).__name__}); expected "
        "a zarr RangeByteRequest, OffsetByteRequest or SuffixByteRequest.")
