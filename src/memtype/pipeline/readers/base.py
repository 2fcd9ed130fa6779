"""What every plate reader offers: a listing of images with their fields, plate metadata, and
reading a group's images when it runs.

A reader lists a plate without reading pixel data (file names, folder names and the vendor's
metadata file only) and reads images only in :meth:`Reader.load_batch`, one group at a time.
It pickles as its options alone, so a dask worker that receives it reads from the source
itself; its listing is made again where it is needed, never shipped.
"""

from __future__ import annotations

import functools
import itertools
import os
import stat
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, ClassVar, NamedTuple

import numpy as np

from memtype import (
    require,
    storage,  # DiskStore: loaded on first use (storage's lazy names)
)
from memtype.errors import (
    NoImagesError,
    StoreIsADirectoryError,
    StoreNotFoundError,
    StorePathError,
)
from memtype.pipeline.io.patterns import (
    FieldValue,
    FilenamePattern,
    ImageRecord,
    Key,
    canonical_well,
    check_unique,
    field_sort_key,
)
from memtype.storage._beneath import NOFOLLOW, Resolver
from memtype.storage._readers import decoding
from memtype.storage.remote import is_url

__all__ = ["Reader", "PlateMetadata", "FieldPosition", "FileReader", "READER_FIELDS", "walk_inside",
           "walk_folders", "well_name", "record", "natural_sort", "input_directory",
           "open_inside", "file_inside", "dir_inside"]

READER_FIELDS = ("well", "site", "channel", "z", "t")
"""The fields every vendor reader yields; site, channel, z and t count from 1."""


class FieldPosition(NamedTuple):
    """Where a field was imaged, in micrometres, as the microscope's metadata gives it (Opera
    Phenix: relative to the well's centre, y growing upwards; z relative to the focus
    reference)."""

    x_um: float
    y_um: float
    z_um: float | None = None


@dataclass(frozen=True)
class PlateMetadata:
    """What a reader knows about a plate besides its images.

    Attributes
    ----------
    layout : str
        The reader's layout name (``"imagexpress"``, ``"phenix"``...).
    detected_from : str
        What identified the layout (``"plate.HTD"``, ``"Images/Index.idx.xml"``...).
    rows, columns : int or None
        The plate's size from its metadata (16 x 24 for a 384-well plate), else None.
    channel_names : dict of int to str
        The name of each ``channel`` value (``{1: "DAPI"}``); empty where the layout has none.
    pixel_size_um : tuple of float or None
        ``(y, x)`` pixel size in micrometres, if the metadata has it.
    z_step_um : float or None
        Distance between z-planes in micrometres, if the metadata has it.
    missing : tuple of str
        Images the metadata announces that are not there (``"B03 site=2 channel=1 z=1 t=1"``):
        a plate with skipped fields is normal, and is listed here rather than refused.
    field_positions : mapping of (str, int) to FieldPosition
        Where each field (``(well, site)``) was imaged, in micrometres, where the metadata
        says (Opera Phenix: ``PositionX/Y/Z`` of its first plane; ImageXpress: the stage
        position of its first image, read from that TIFF's header when first used); empty
        otherwise.
    notes : tuple of str
        What the metadata and the files on disk disagree on (an ImageXpress ``.HTD`` whose
        plate size or well selection leaves out wells whose images are there): the images
        are read, and each note is also given as a warning when the metadata is read, so
        that ``memtype inspect`` and the start of a run say it.
    """

    layout: str
    detected_from: str = ""
    rows: int | None = None
    columns: int | None = None
    channel_names: dict[int, str] = field(default_factory=dict)
    pixel_size_um: tuple[float, float] | None = None
    z_step_um: float | None = None
    missing: tuple[str, ...] = ()
    field_positions: Mapping[tuple[str, int], FieldPosition] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def plate_size(self) -> int | None:
        """Wells on the plate (rows x columns), if known."""
        return None if self.rows is None or self.columns is None else self.rows * self.columns


class Reader(ABC):
    """A plate in one layout: its images (with their fields) and its metadata.

    Subclasses set :attr:`layout`, implement :meth:`detect`, :meth:`_list`,
    :meth:`_metadata` and :meth:`load_batch`.

    Parameters
    ----------
    root : str or os.PathLike
        The plate's directory.
    """

    layout: ClassVar[str] = ""
    """The layout's name, as ``--layout`` takes it."""
    device = "disk"
    """Inputs are read from local or mounted disks (the run checks its output against this)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = input_directory(root)
        self._reset()

    def _reset(self) -> None:
        """No listing or metadata yet."""
        self._records: list[ImageRecord] | None = None
        self._exclude: str | None = None
        self._meta: PlateMetadata | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_records"] = None  # listed again where needed, never shipped to workers
        return state

    @classmethod
    @abstractmethod
    def detect(cls, root: str) -> str | None:
        """What in ``root`` shows this layout (a file or folder name), or None."""

    @property
    def fields(self) -> tuple[str, ...]:
        """The field names of every record, in order."""
        return READER_FIELDS

    @property
    def pattern(self) -> FilenamePattern:
        """A pattern with the reader's fields: their order, and TIFF output file names."""
        return FilenamePattern("{well}_t{t}_s{site}_w{channel}_z{z:03d}.tif")

    def records(self, exclude: str | None = None) -> list[ImageRecord]:
        """Every image, in natural order (listed once, without reading pixel data).

        Parameters
        ----------
        exclude : str, optional
            A folder (relative to the root) whose files are left out: a run's output
            inside its input.

        Raises
        ------
        NoImagesError
            The plate holds no image (a ``FileNotFoundError``).
        InputCollisionError
            Two images with the same field values (a ``ValueError``).
        """
        if self._records is None or exclude != self._exclude:
            found = self._list(exclude)
            natural_sort(found)
            if any(a.key == b.key for a, b in itertools.pairwise(found)):  # equal: adjacent
                check_unique(found)  # raises, naming both files
            if not found:
                raise NoImagesError(f"No image found in {self.root!r} read as layout "
                                    f"{self.layout!r}; {self._nothing_found()} Another "
                                    "layout: --layout (layout=); names of your own: --pattern "
                                    "(pattern=).")
            self._records, self._exclude = found, exclude
        return self._records

    def _nothing_found(self) -> str:
        """What the layout expects to find."""
        return "check the directory."

    @property
    def metadata(self) -> PlateMetadata:
        """The plate's metadata (read once, without pixel data)."""
        if self._meta is None:
            self._meta = self._metadata()
            for note in self._meta.notes:
                warnings.warn(note, UserWarning, stacklevel=2)
        return self._meta

    @abstractmethod
    def _list(self, exclude: str | None) -> list[ImageRecord]:
        """The images of the plate (unsorted)."""

    @abstractmethod
    def _metadata(self) -> PlateMetadata:
        """The plate's metadata."""

    @abstractmethod
    def load_batch(self, paths: Sequence[str]) -> list[np.ndarray[Any, Any]]:
        """The 2D images of these records' paths (read now, from the source).

        Raises
        ------
        StoreFormatError
            A file that is not a readable image (a ``ValueError``).
        StoreNotFoundError
            A file that disappeared since the listing (a ``FileNotFoundError``).
        """

    def header(self, path: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
        """The shape and dtype of one image (read from its header where the format allows)."""
        image = self.load_batch([path])[0]
        return image.shape, image.dtype

    def nbytes(self) -> int | None:
        """Bytes of the plate's image files on disk, if the layout knows them cheaply."""
        return None


class FileReader(Reader):
    """A reader of one image file per plane, read through a read-only DiskStore on the root
    (race-safe; a symbolic link is followed only while it stays inside the root)."""

    def _reset(self) -> None:
        super()._reset()
        self._store: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_store"] = None
        return state

    def _disk(self) -> Any:
        """The read-only DiskStore on the root."""
        if self._store is None:
            self._store = storage.DiskStore(self.root, read_only=True)
        return self._store

    def load_batch(self, paths: Sequence[str]) -> list[np.ndarray[Any, Any]]:
        return list(self._disk().load_batch(list(paths)))

    def header(self, path: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
        tifffile = require("tifffile", "Reading TIFF headers")
        if path.lower().endswith((".tif", ".tiff")):
            with self.open_file(path) as fh, decoding("TIFF file", repr(fh.name)), \
                    tifffile.TiffFile(fh) as tif:
                page = tif.pages.first
                return tuple(page.shape), np.dtype(page.dtype)
        return super().header(path)

    def open_file(self, path: str) -> BinaryIO:
        """A file under the root (a listed image, a metadata file) open for reading, resolved
        beneath the root (see :func:`open_inside`).

        Raises
        ------
        StorePathError
            The path leads outside the root (a ``ValueError``).
        StoreNotFoundError
            The file is not there (a ``FileNotFoundError``).
        StoreIsADirectoryError
            It is a folder (an ``IsADirectoryError``).
        """
        return open_inside(self.root, path)

    def resolve(self, path: str) -> str:
        """The real file of a listed path.

        Raises
        ------
        StorePathError
            The path (through a link changed since the listing) leads outside the root
            (a ``ValueError``).
        """
        real = os.path.realpath(os.path.join(self.root, path))
        if not _inside(real, os.path.realpath(self.root)):
            raise StorePathError(f"Input file {path!r} leads outside {self.root!r} (to "
                                 f"{real!r}); inputs are read only inside the folder given.")
        return real

    def _walk(self, exclude: str | None) -> Iterator[str]:
        """Every file under the root, links inside followed."""
        return walk_inside(self.root, exclude)

    def nbytes(self) -> int | None:
        files = {r.path.partition("#")[0] for r in self.records(self._exclude)}
        return sum(os.stat(self.resolve(f)).st_size for f in files)


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


def open_inside(root: str, path: str) -> BinaryIO:
    """The regular file ``path`` (relative to ``root``) open for reading, resolved beneath
    ``root`` as the DiskStore resolves its keys (:class:`memtype.storage._beneath.Resolver`:
    ``openat2(RESOLVE_BENEATH)`` or a no-follow walk): a symbolic link is followed only while
    it stays inside ``root``, and a directory swapped for a link cannot redirect the open.
    Every file a reader opens (metadata, headers, pixels) is opened so. The handle's ``name``
    is the file's path (tifffile reads it).

    Raises
    ------
    StorePathError
        ``path`` (``..``, a link) leads outside ``root`` (a ``ValueError``).
    StoreNotFoundError
        Nothing is there, or a dangling link (a ``FileNotFoundError``).
    StoreIsADirectoryError
        It is a folder or another non-regular file (an ``IsADirectoryError``).
    """
    resolver = Resolver(root, follow_outside=False)
    fd = resolver.open(path, _READ_FLAGS)
    if fd is None:  # the walk decides, with its precise errors
        with resolver.locate(path, follow_last=True) as loc:
            try:
                fd = None if not loc.name else os.open(loc.name, _READ_FLAGS | NOFOLLOW,
                                                       dir_fd=loc.dir_fd)
            except FileNotFoundError:
                raise StoreNotFoundError(f"No file {path!r} in {root!r} (missing, or a link "
                                         "to nothing).") from None
    if fd is None or not stat.S_ISREG(os.fstat(fd).st_mode):
        if fd is not None:
            os.close(fd)
        raise StoreIsADirectoryError(f"{path!r} in {root!r} is a folder (or not a regular "
                                     "file); expected a file.")
    os.set_blocking(fd, True)
    fh = os.fdopen(fd, "rb")
    fh.raw.name = os.path.join(root, path)  # type: ignore[attr-defined]  # tifffile reads it
    return fh


def file_inside(root: str, path: str) -> bool:
    """Whether ``path`` (relative to ``root``) is a regular file inside ``root``, links
    resolved (a link leading outside, a dangling link or a folder is not)."""
    real = os.path.realpath(os.path.join(root, path))
    return _inside(real, os.path.realpath(root)) and os.path.isfile(real)


def dir_inside(root: str, path: str) -> bool:
    """Whether ``path`` (relative to ``root``) is a folder inside ``root``, links resolved."""
    real = os.path.realpath(os.path.join(root, path))
    return _inside(real, os.path.realpath(root)) and os.path.isdir(real)


def natural_sort(records: list[ImageRecord]) -> None:
    """Sort records in place in ``key_order`` of their keys, computing the sort key of each
    distinct ``(field, value)`` pair once and comparing records by the pairs' ranks."""
    pairs = set(itertools.chain.from_iterable(r.key for r in records))
    keys = {pair: field_sort_key(pair[1]) for pair in pairs}
    order = {key: i for i, key in enumerate(sorted(set(keys.values())))}
    rank = {pair: order[key] for pair, key in keys.items()}
    records.sort(key=lambda r: tuple(map(rank.__getitem__, r.key)))


def input_directory(root: str | os.PathLike[str]) -> str:
    """An existing input directory as an absolute path.

    Raises
    ------
    StoreNotFoundError
        It does not exist or is not a directory, or it is an ``s3://``/``https://`` address
        (a ``FileNotFoundError``).
    """
    if isinstance(root, str) and is_url(root):
        raise StoreNotFoundError(
            f"{root!r} is an address, not a folder: only OME-Zarr plates are read from "
            "s3:// and https:// addresses (layout 'ome-zarr'); ImageXpress, Opera Phenix, "
            "OME-TIFF and pattern plates are read from a local or mounted folder.")
    path = os.path.abspath(os.fspath(root))
    if not os.path.isdir(path):
        what = "is not a directory" if os.path.exists(path) else "does not exist"
        raise StoreNotFoundError(f"Input directory {os.fspath(root)!r} {what}; expected a "
                                 "directory of images.")
    return path


def _inside(real: str, top: str) -> bool:
    """Whether the resolved path ``real`` is ``top`` or below it."""
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def walk_inside(root: str, exclude: str | None = None) -> Iterator[str]:
    """The relative path of every file under ``root``, following symbolic links to files and
    folders that resolve inside ``root`` (see :func:`walk_folders`)."""
    for folder, names in walk_folders(root, exclude):
        if folder:
            for name in names:
                yield f"{folder}/{name}"
        else:
            yield from names


def walk_folders(root: str, exclude: str | None = None) -> Iterator[tuple[str, list[str]]]:
    """Each folder under ``root`` (relative, ``""`` for the root) with the names of its files
    (sorted), following symbolic links to files and folders that resolve inside ``root`` (one
    ``stat`` per link; none per plain file).

    A link that resolves outside ``root`` is skipped, and one warning (a ``UserWarning``)
    says how many were and names the first: reading never leaves the folder the user named.
    A folder reached by two paths (a link to a folder also walked directly) is listed under
    both; a link to a folder it is inside (a loop) is not entered; a dangling link is not a
    file; a link that cannot be resolved (a loop of links, ``ELOOP``) raises ``OSError``.
    Hidden files and folders (a leading ``.``) are left out, but a link to one is followed.
    Folders come in name order, depth first; ``exclude`` (a folder) and what it holds are left
    out.
    """
    top = os.path.realpath(root)
    outside: list[str] = []
    pending: list[tuple[str, str, frozenset[str]]] = [("", top, frozenset())]
    while pending:
        rel, real, above = pending.pop()
        if real in above:  # a loop: this folder is its own ancestor
            continue
        files, folders = _scan(rel, real, top, exclude, outside)
        files.sort()
        above = above | {real}
        pending.extend((path, target, above) for path, target in sorted(folders, reverse=True))
        yield rel, files
    if outside:
        warnings.warn(f"{len(outside)} symbolic link(s) in {root!r} lead outside it and were "
                      f"skipped (first: {outside[0]!r}); inputs are read only inside the "
                      "folder given. Point --input at a folder that holds the targets.",
                      UserWarning, stacklevel=3)


def _scan(rel: str, real: str, top: str, exclude: str | None,
          outside: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """The file names and the (relative path, real path) of the folders in one folder, but
    ``exclude``; links leading outside ``top`` are added to ``outside``."""
    files: list[str] = []
    folders: list[tuple[str, str]] = []
    prefix = f"{rel}/" if rel else ""
    with os.scandir(real) as entries:
        for entry in entries:
            name = entry.name
            if name[0] == "." or (exclude is not None and prefix + name == exclude):
                continue
            if entry.is_symlink():
                target = _link_target(entry.path)
                if target is None:  # a dangling link names nothing to read
                    continue
                if not _inside(target, top):
                    outside.append(prefix + name)
                elif os.path.isdir(target):
                    folders.append((prefix + name, target))
                elif os.path.isfile(target):
                    files.append(name)
            elif entry.is_dir(follow_symlinks=False):
                folders.append((prefix + name, entry.path))
            elif entry.is_file(follow_symlinks=False):
                files.append(name)
    return files, folders


def _link_target(path: str) -> str | None:
    """Where a symbolic link resolves to, or None when its target does not exist.

    Raises
    ------
    OSError
        A link loop (``ELOOP``) or another error resolving it: the user's tree is broken.
    """
    try:
        return os.path.realpath(path, strict=True)
    except FileNotFoundError:
        return None


def well_name(row: int, column: int) -> str:
    """The well at a 1-based row and column: ``(2, 3)`` -> ``B03``, ``(27, 1)`` -> ``AA01``."""
    letters = ""
    n = row
    while n > 0:
        n, rest = divmod(n - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return canonical_well(f"{letters}{column}")


def record(path: str, well: str, site: int, channel: int, z: int, t: int) -> ImageRecord:
    """An image record with the reader fields (its ``(field, value)`` pairs shared with other
    records: a listing holds one tuple per record, not six)."""
    key: Key = (field_pair("well", canonical_well(well)), field_pair("site", site),
                field_pair("channel", channel), field_pair("z", z), field_pair("t", t))
    return ImageRecord(path, key)


@functools.lru_cache(maxsize=8192, typed=True)
def field_pair(name: str, value: FieldValue) -> tuple[str, FieldValue]:
    """The one ``(name, value)`` tuple of a field's value, shared by the records that have it."""
    return name, value
