"""Where a pipeline's images come from: the input store, its files, the output inside it."""

from __future__ import annotations

import os
from typing import Any

from memtype.errors import InvalidArgumentError, NoImagesError, StoreNotFoundError
from memtype.pipeline.patterns import FilenamePattern, ImageRecord, match_files

__all__ = ["input_store", "output_inside_input", "find_images", "is_store"]

PathOrStore = str | os.PathLike[str] | Any


def input_store(source: PathOrStore) -> Any:
    """A DiskStore on an input directory, or a given Store as it is."""
    from memtype.storage import DiskStore, Store

    if isinstance(source, Store):
        return source
    path = os.fspath(source)
    if not os.path.isdir(path):
        what = "is not a directory" if os.path.exists(path) else "does not exist"
        raise StoreNotFoundError(f"Input directory {path!r} {what}; expected a directory "
                                 "of images.")
    return DiskStore(path, read_only=True)


def _inside(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or lies under it (both absolute)."""
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def output_inside_input(store: Any, output: str) -> str | None:
    """The output's path relative to a disk input it lies in, or None.

    Raises
    ------
    ValueError
        The output is the input directory or contains it (``overwrite`` would delete it).
    """
    root = getattr(store, "root", None)
    if store.device != "disk" or not isinstance(root, str):
        return None
    out = os.path.abspath(output)
    if _inside(root, out):
        raise InvalidArgumentError(f"The output {output!r} is, or contains, the input directory "
                         f"{root!r}; write the results somewhere else.")
    return os.path.relpath(out, root).replace(os.sep, "/") if _inside(out, root) else None


def find_images(store: Any, pattern: FilenamePattern,
                 exclude: str | None = None) -> list[ImageRecord]:
    """Every image in the store whose file name matches the pattern (not under ``exclude``)."""
    files = store.list_files("", recursive=True)
    if exclude is not None:
        files = [f for f in files if not f.startswith(exclude + "/")]
    records = match_files(files, pattern)
    if not records:
        example = ", ".join(os.path.basename(f) for f in files[:3]) or "no files at all"
        raise NoImagesError(
            f"No file in {store.root!r} matches the pattern {pattern.template!r} "
            f"({len(files)} files found, e.g. {example}); pass the pattern the names follow, "
            "e.g. --pattern '{well}_s{site}_c{channel}_z{z}.tif'.")
    return records



def is_store(source: object) -> bool:
    """Whether ``source`` is a memtype Store."""
    from memtype.storage import Store

    return isinstance(source, Store)
