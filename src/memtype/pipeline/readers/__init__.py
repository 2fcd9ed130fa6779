"""Plate readers: one class per layout a microscope (or a converter) writes.

=============  =====================================================  ====================
layout         detected by                                            reader
=============  =====================================================  ====================
ome-zarr       ``zarr.json``/``.zattrs`` with ``plate`` at the root   :class:`OmeZarrReader`
phenix         ``[Images/]Index.idx.xml`` / ``Index.xml``, or names   :class:`PhenixReader`
               ``r01c01f01p01-ch1sk1fk1fl1.tiff``
imagexpress    a ``.HTD`` file, or MetaXpress names in ``TimePoint_<n>``:class:`ImageXpressReader`
ome-tiff       ``*.ome.tif`` files at the root                        :class:`OmeTiffReader`
pattern        anything else: names following the pipeline's pattern  :class:`PatternReader`
=============  =====================================================  ====================

Every vendor reader yields the fields ``well, site, channel, z, t`` (counted from 1); the
pattern reader yields its pattern's fields. See ``docs/inputs.md``.
"""

from __future__ import annotations

import os
from typing import Any

from memtype.errors import InvalidArgumentError
from memtype.pipeline.io.patterns import DEFAULT_PATTERN, FilenamePattern
from memtype.pipeline.readers.base import (
    READER_FIELDS,
    FieldPosition,
    PlateMetadata,
    Reader,
    input_directory,
)
from memtype.pipeline.readers.imagexpress import ImageXpressReader, parse_htd
from memtype.pipeline.readers.ometiff import OmeTiffReader
from memtype.pipeline.readers.omezarr import OmeZarrReader
from memtype.pipeline.readers.pattern import PatternReader
from memtype.pipeline.readers.phenix import PhenixReader
from memtype.storage import Store
from memtype.storage.remote import is_url, local_path

__all__ = ["Reader", "PlateMetadata", "FieldPosition", "PatternReader", "ImageXpressReader",
           "PhenixReader", "OmeZarrReader", "OmeTiffReader", "LAYOUTS", "READER_FIELDS",
           "open_input", "detect_layout", "parse_htd"]

LAYOUTS: dict[str, type[Reader]] = {
    "ome-zarr": OmeZarrReader,
    "phenix": PhenixReader,
    "imagexpress": ImageXpressReader,
    "ome-tiff": OmeTiffReader,
    "pattern": PatternReader,
}
"""Every layout by name, in the order detection tries them (``pattern`` always applies)."""


def detect_layout(root: str | os.PathLike[str]) -> tuple[str, str]:
    """The layout of a plate folder, and what showed it (``("imagexpress", "plate.HTD")``).

    Raises
    ------
    StoreNotFoundError
        ``root`` is not an existing directory (a ``FileNotFoundError``).
    """
    if isinstance(root, str) and is_url(root):
        return "ome-zarr", OmeZarrReader(root).detect(root) or ""
    path = input_directory(local_path(root))
    for name, cls in LAYOUTS.items():
        found = cls.detect(path)
        if found is not None:
            return name, found
    return "pattern", "file names (no vendor metadata found)"  # LAYOUTS without "pattern"


def open_input(source: Any, layout: str | None = None,
               pattern: str | FilenamePattern | None = None) -> Reader:
    """The reader of a pipeline's input.

    Parameters
    ----------
    source : path, Store or Reader
        A plate folder, a memtype Store (read by pattern), or a reader (used as it is).
    layout : str, optional
        One of :data:`LAYOUTS`; detected when not given (see :func:`detect_layout`).
    pattern : str or FilenamePattern, optional
        The file-name pattern: given without ``layout``, it means the ``pattern`` layout.

    Raises
    ------
    InvalidArgumentError
        An unknown layout, or a pattern with a vendor layout (a ``ValueError``).
    StoreNotFoundError
        ``source`` is not an existing directory (a ``FileNotFoundError``).

    Examples
    --------
    >>> reader = open_input("plate/")          # doctest: +SKIP
    >>> reader.layout, reader.metadata.channel_names  # doctest: +SKIP
    ('imagexpress', {1: 'DAPI', 2: 'FITC'})
    """
    if isinstance(source, Reader):
        return source
    if layout is not None and layout not in LAYOUTS:
        raise InvalidArgumentError(f"Unknown input layout {layout!r}; expected one of "
                                   f"{list(LAYOUTS)}.")
    if pattern is not None and layout not in (None, "pattern"):
        raise InvalidArgumentError(f"A file-name pattern applies to the 'pattern' layout only; "
                                   f"received pattern={_template(pattern)!r} with layout "
                                   f"{layout!r}.")
    if isinstance(source, str) and is_url(source):
        return _open_url(source, layout, pattern)
    if isinstance(source, str):
        source = local_path(source)  # a file:// URL
    if isinstance(source, Store) or pattern is not None or layout == "pattern":
        return PatternReader(source, pattern if pattern is not None else DEFAULT_PATTERN)
    name = layout if layout is not None else detect_layout(source)[0]
    cls = LAYOUTS[name]
    return PatternReader(source) if cls is PatternReader else cls(source)


def _open_url(url: str, layout: str | None,
              pattern: str | FilenamePattern | None) -> Reader:
    """The reader of a plate given by URL: OME-Zarr only (found by its metadata alone).

    Raises
    ------
    InvalidArgumentError
        A vendor or pattern layout asked for a URL (a ``ValueError``).
    """
    if pattern is not None or layout not in (None, "ome-zarr"):
        asked = f"layout {layout!r}" if pattern is None else \
            f"pattern {_template(pattern)!r}"
        raise InvalidArgumentError(
            f"Only OME-Zarr plates are read from a URL; received {asked} for {url!r}. "
            "ImageXpress, Opera Phenix, OME-TIFF and pattern folders are found by listing "
            "their files, which object storage answers 1000 names a request and HTTP not at "
            "all: copy the plate to a local disk first (aws s3 sync), or convert it to "
            "OME-Zarr.")
    return OmeZarrReader(url)


def _template(pattern: str | FilenamePattern) -> str:
    """A pattern's template text."""
    return pattern.template if isinstance(pattern, FilenamePattern) else pattern
