"""Folders of images named by a pattern: ``{well}_s{site}_w{channel}_z{z:03d}.tif``, with
folder levels where the pattern has them
(``TimePoint_{t}/ZStep_{z}/{well}_s{site}_w{channel}.tif``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from memtype.errors import NoImagesError
from memtype.pipeline.io.patterns import (
    DEFAULT_PATTERN,
    FilenamePattern,
    ImageRecord,
    canonical_well,
)
from memtype.pipeline.readers.base import FileReader, PlateMetadata, field_pair
from memtype.pipeline.readers.survey import survey
from memtype.storage import Store

__all__ = ["PatternReader"]


class PatternReader(FileReader):
    """Images whose names (and folders) follow a :class:`FilenamePattern`.

    The pattern's fields are the records' fields, whatever they are called; well names are
    canonical (``A1`` -> ``A01``). Files are found in every folder under the root, symbolic
    links to files and folders inside the root followed (a link leading outside is skipped
    with a warning); the extension matches in any case.

    Parameters
    ----------
    root : str, os.PathLike or Store
        The input directory, or any memtype Store (listed with ``list_files``).
    pattern : str or FilenamePattern
        The names' pattern (default ``{well}_s{site}_w{channel}_z{z:03d}.tif``).

    Examples
    --------
    >>> reader = PatternReader("plate/", "{well}/{site}/{channel}_z{z}.tif")  # doctest: +SKIP
    >>> reader.records()[0].fields  # doctest: +SKIP
    {'well': 'A01', 'site': 1, 'channel': 1, 'z': 1}
    """

    layout = "pattern"

    def __init__(self, root: Any, pattern: str | FilenamePattern = DEFAULT_PATTERN) -> None:
        self._given: Any = root if isinstance(root, Store) else None
        if self._given is None:
            super().__init__(root)
        else:
            self.root = str(getattr(root, "root", ""))
            self.device = self._given.device
            self._reset()
        self._pattern = pattern if isinstance(pattern, FilenamePattern) \
            else FilenamePattern(pattern)
        self._seen: list[str] = []
        self._count = 0

    @classmethod
    def detect(cls, root: str) -> str | None:
        return "file names (no vendor metadata found)"

    @property
    def fields(self) -> tuple[str, ...]:
        return self._pattern.fields

    @property
    def pattern(self) -> FilenamePattern:
        return self._pattern

    def _list(self, exclude: str | None) -> list[ImageRecord]:
        if self._given is not None:
            files = self._given.list_files("", recursive=True)
            if exclude is not None:
                files = [f for f in files if not f.startswith(exclude + "/")]
        else:
            files = list(self._walk(exclude))
        self._seen = files[:3]
        self._count = len(files)
        return self._match(files)

    def _match(self, files: list[str]) -> list[ImageRecord]:
        """The records of the files the pattern matches, wells canonical, unsorted (the
        listing sorts and checks them once; ``match_files`` would do both a second time)."""
        records: list[ImageRecord] = []
        for path in files:
            values = self._pattern.match(path)
            if values is not None:
                if isinstance(values.get("well"), str):
                    values["well"] = canonical_well(str(values["well"]))
                records.append(ImageRecord(path, tuple(field_pair(k, v)
                                                       for k, v in values.items())))
        return records

    def records(self, exclude: str | None = None) -> list[ImageRecord]:
        try:
            return super().records(exclude)
        except NoImagesError:
            found = None if self._given is not None else survey(self.root)
            if found is not None:  # what is there instead, rather than "pattern"
                raise NoImagesError(f"No plate to read: {found}") from None
            example = ", ".join(os.path.basename(f) for f in self._seen) or "no files at all"
            raise NoImagesError(
                f"No file in {self.root!r} matches the pattern {self._pattern.template!r} "
                f"({self._count} files found, e.g. {example}); pass the pattern the names "
                "follow, e.g. --pattern '{well}_s{site}_c{channel}_z{z}.tif', or a layout "
                "with --layout.") from None

    def _metadata(self) -> PlateMetadata:
        return PlateMetadata(self.layout, f"the pattern {self._pattern.template!r}")

    def load_batch(self, paths: Sequence[str]) -> list[np.ndarray[Any, Any]]:
        if self._given is not None:
            return list(self._given.load_batch(list(paths)))
        return super().load_batch(paths)

    def header(self, path: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
        if self._given is not None:
            image = self.load_batch([path])[0]
            return image.shape, image.dtype
        return super().header(path)
