"""Where a pipeline's images come from: the input (read by :mod:`memtype.pipeline.readers`) and
the output inside it."""

from __future__ import annotations

import os
from typing import Any

from memtype.errors import InvalidArgumentError
from memtype.storage import Store

__all__ = ["output_inside_input", "is_store", "PathOrStore"]

PathOrStore = str | os.PathLike[str] | Any


def _inside(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or lies under it (both absolute)."""
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def output_inside_input(store: Any, output: str) -> str | None:
    """The output's path relative to a disk input (a reader or a DiskStore) it lies in, or None.

    Raises
    ------
    ValueError
        The output is the input directory or contains it (``overwrite`` would delete it).
    """
    from memtype.storage.remote import is_url  # urllib and ipaddress: 6 ms not every import needs

    root = getattr(store, "root", None)
    if store.device != "disk" or not isinstance(root, str) or is_url(output):
        return None
    out = os.path.abspath(output)
    if _inside(root, out):
        raise InvalidArgumentError(f"The output {output!r} is, or contains, the input directory "
                                   f"{root!r}; write the results somewhere else.")
    return os.path.relpath(out, root).replace(os.sep, "/") if _inside(out, root) else None


def is_store(source: object) -> bool:
    """Whether ``source`` is a memtype Store."""
    return isinstance(source, Store)
