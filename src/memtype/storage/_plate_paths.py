"""Keys of an OME-Zarr plate: ``row/column/field`` checked, resolved inside the plate, tested.

The ZarrStore's counterpart of the DiskStore's :mod:`memtype.storage._beneath`. A key has
at most three alphanumeric parts (plate ``""``, row ``"B"``, well ``"B/3"``, field
``"B/3/0"``); a group exists where its ``zarr.json`` does. Every path is checked on its
resolved form: a symbolic link leading out of the plate raises ``StorePathError`` unless
the store follows links outside (zarr reads chunk files by path, so this is a check of one
moment, not the DiskStore's descriptor walk).
"""

from __future__ import annotations

import os
import posixpath
from contextlib import AbstractContextManager

from memtype.errors import StoreNotFoundError, StorePathError
from memtype.storage import _ome
from memtype.storage._beneath import resolves_outside
from memtype.storage._readers import decoding

__all__ = ["PlatePaths", "LEVELS"]

LEVELS = ("plate", "row", "well")
"""What a key of 0, 1 or 2 parts names (3 parts: a field)."""


class PlatePaths:
    """Checks and resolves keys of the plate at ``root`` (see the module docstring)."""

    def __init__(self, root: str, follow_outside: bool) -> None:
        self.root = root
        self.follow_outside = follow_outside

    def parts(self, key: str) -> list[str]:
        """The components of a key, checked: at most row/column/field, alphanumeric names."""
        parts = key.split("/") if key else []
        if len(parts) > 3:
            raise StorePathError(
                f"Invalid plate path {key!r}: expected at most 'row/column/field' (3 parts); "
                f"received {len(parts)}."
            )
        for part, what in zip(parts, ("row", "column", "field")[:len(parts)], strict=True):
            _ome.check_name(part, what, key)
        return parts

    def field(self, key: str) -> str:
        """``key``, checked to name a field (not the plate, a row or a well)."""
        parts = self.parts(key)
        if len(parts) != 3:
            raise StorePathError(
                f"{key or '/'!r} is a {LEVELS[len(parts)]}, a directory; "
                "expected a field path 'row/column/field'."
            )
        return key

    def full(self, key: str) -> str:
        """Absolute path of a key, checked on its resolved path (see the module notes)."""
        full = posixpath.join(self.root, key) if key else self.root
        escaped = resolves_outside(full, self.root) \
            if key and not self.follow_outside else None
        if escaped is not None:
            real, real_root = escaped
            raise StorePathError(
                f"Cannot use {key!r}: it resolves to {real!r}, outside the plate "
                f"{real_root!r} (a symbolic link leads out). Expected links that stay "
                "inside, or a store created with follow_symlinks_outside=True.")
        return full

    def exists(self, key: str) -> bool:
        """Whether a group (plate, row, well or field) exists at ``key``."""
        return os.path.isfile(posixpath.join(self.full(key), "zarr.json"))

    def children(self, key: str) -> list[str]:
        """Names of the groups directly under ``key`` (no temporaries, no lock dir)."""
        return _ome.child_groups(self.full(key))

    def require_dir(self, key: str) -> list[str]:
        """The parts of an existing plate, row or well; raise for a field or a missing one."""
        parts = self.parts(key)
        if len(parts) == 3:
            raise StorePathError(f"{key!r} is a field (an image); expected a directory.")
        if not self.exists(key):
            raise StoreNotFoundError(f"No {LEVELS[len(parts)]} at {key or self.root!r}.")
        return parts

    def metadata(self, key: str) -> AbstractContextManager[None]:
        """A block in which a tampered document's KeyError, TypeError... of the group at
        ``key`` is raised as StoreFormatError."""
        return decoding("OME-Zarr document", f"The metadata of {key or '/'!r} in the plate "
                                             f"{self.root!r}")
