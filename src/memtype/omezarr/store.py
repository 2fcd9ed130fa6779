"""ZarrStore: an OME-Zarr 0.5 (zarr v3) or 0.4 (zarr v2) plate behind the Store interface.

>>> from memtype.storage import ZarrStore
>>> plate = ZarrStore("/data/run1.zarr", rows="ABCDEFGH", columns=range(1, 13))  # doctest: +SKIP
>>> plate.save(stack_czyx, "B/3/0", parents=True)      # field 0 of well B3, axes "czyx"
>>> plate.load("B/3/0", index=(1, 5))                  # channel 1, plane 5: reads one chunk
>>> plate.list_files("B/3")                            # ['B/3/0']

Paths are ``row/column/field`` (alphanumeric names): the plate root, a row (``"B"``) and a
well (``"B/3"``) are directories; a field (``"B/3/0"``) is a file holding one image with
2 to 5 dimensions ([T][C][Z] Y X; axes default to ``yx``, ``zyx``, ``czyx``, ``tczyx``). Each
field is a multiscale image with level 0 at ``<field>/0`` and axes metadata, readable by
the ``ome-zarr`` reader and napari. ``ome_version="0.4"`` writes OME-Zarr 0.4 (zarr v2:
``.zgroup``/``.zattrs``/``.zarray``), which Fiji, MoBIE and OMERO read; an existing plate is
opened in the version it was written in.

Performance and safety
----------------------
* Chunks hold one 2D plane by default (``chunks="plane"``), so ``load(path, index=...)``
  reads only the planes it returns; ``chunks="image"`` or an explicit tuple change that.
* Codecs: ``"blosc-lz4"`` (default, fast), ``"blosc-zstd"``, ``"zstd"``, ``"none"``.
* Writing a field touches that field's files, its well's metadata, and the plate
  metadata only when the well receives its first image (no rescan of the plate), so
  writing a plate costs time linear in its wells.
* A field is written into a hidden temporary directory and renamed into place under its
  well's lock, which ``load`` holds shared while it reads: a reader (or a crash) never
  sees half an image or a mix of two. Well and plate metadata are replaced atomically
  under file locks, so writers in threads and processes, to different wells or to one
  well, lose nothing. Rows and columns may be declared up front (``rows``,
  ``columns``); wells are listed in the plate once they hold an image.
* Every file the store opens (metadata, chunks, pyramid levels, lock files, copies and
  removals), and every file zarr opens for it, is resolved below the plate's root with
  descriptor-relative, no-follow operations (``openat2(RESOLVE_BENEATH)`` where the kernel
  has it), as the DiskStore's paths are: a symbolic link is followed while it stays inside
  the plate; one leading out raises ``StorePathError`` unless
  ``follow_symlinks_outside=True``; a directory swapped for a link while a run writes
  cannot redirect a read or a write. Copies and moves copy links as links.
* Tampered or corrupt metadata and chunks raise ``StoreFormatError``; an ``index`` outside
  the image raises ``StoreIndexError``.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from memtype import require
from memtype.errors import (
    MemtypeError,
    StoreExistsError,
    StoreFormatError,
    StoreIndexError,
    StoreIsADirectoryError,
    StoreNotADirectoryError,
    StoreNotFoundError,
    StorePathError,
)
from memtype.frameworks import data_nbytes
from memtype.omezarr import labels as _labels
from memtype.omezarr import layout as _layout
from memtype.omezarr import metadata as _metadata
from memtype.omezarr import plate as _plate
from memtype.omezarr import pyramid as _pyramid
from memtype.omezarr import write as _write
from memtype.omezarr.paths import PlatePaths, check_name, field_path
from memtype.storage._atomic import temp_name
from memtype.storage._readers import decoding
from memtype.storage.base import PathLike, Store, StoreStat, natural_key

__all__ = ["ZarrStore"]


class ZarrStore(Store):
    """An OME-Zarr plate: ``row/column/field`` images in zarr v3 (OME-Zarr 0.5) or v2 (0.4).

    Parameters
    ----------
    root : str or os.PathLike
        The plate directory (``*.zarr`` by convention); created with its metadata unless
        ``read_only`` (an existing plate is opened as it is).
    rows, columns : sequence, optional
        Row and column names to declare when the plate is created (``"ABCDEFGH"``,
        ``range(1, 13)``); more are added as wells are written.
    name : str, optional
        Plate name (default: the root's base name).
    codec : {"blosc-lz4", "blosc-zstd", "zstd", "none"}
        Default compression of new fields.
    level : int, optional
        Compression level (codec default when None).
    chunks : "plane", "image" or tuple of int
        Default chunking of new fields.
    fsync : bool
        fsync metadata documents (chunk data is written by zarr without fsync).
    read_only : bool
        Refuse writes and deletes.
    follow_symlinks_outside : bool
        Follow symbolic links that lead out of the plate (default: ``StorePathError``).
    ome_version : {"0.5", "0.4"}, optional
        The OME-Zarr version of a new plate (default ``"0.5"``, zarr v3; ``"0.4"`` is zarr
        v2). An existing plate keeps its own; asking another raises ``StoreFormatError``.
    shards : None, "image" or tuple of int
        zarr v3 sharding of the arrays written (OME-Zarr 0.5 only): ``"image"`` stores each
        resolution level of a field (or label image) as one shard file holding all its
        chunks, so a plate is a few objects per field, not one per plane; a tuple gives the
        shard shape (multiples of the chunk shape). Readers of 0.4 cannot read shards.
    """

    registry_name = "zarr"
    device = "disk"

    def __init__(self, root: PathLike, *, rows: Iterable[Any] | None = None,
                 columns: Iterable[Any] | None = None, name: str | None = None,
                 codec: str = "blosc-lz4", level: int | None = None,
                 chunks: str | Sequence[int] = "plane", fsync: bool = False,
                 read_only: bool = False, follow_symlinks_outside: bool = False,
                 ome_version: str | None = None,
                 shards: str | Sequence[int] | None = None) -> None:
        require("zarr", "ZarrStore (OME-Zarr plates)")  # before anything is created
        super().__init__(root, read_only=read_only)
        self.follow_symlinks_outside = bool(follow_symlinks_outside)
        if os.path.exists(self.root) and not os.path.isdir(self.root):
            raise StoreNotADirectoryError(
                f"Plate root {self.root!r} is a file; expected a directory.")
        _layout.check_codec(codec)
        self._paths = PlatePaths(self.root, self.follow_symlinks_outside,
                                 _layout.layout_for(ome_version or "0.5"))
        self._open_layout(ome_version)
        self.rows = [str(r) for r in rows] if rows is not None else []
        self.columns = [str(c) for c in columns] if columns is not None else []
        for r in self.rows:
            check_name(r, "row", r)
        for c in self.columns:
            check_name(c, "column", c)
        self.name = name or os.path.basename(self.root)
        self.codec, self.level, self.chunks, self.fsync = codec, level, chunks, bool(fsync)
        _metadata.check_shards(shards, self.ome_version)
        self.shards = shards if shards is None or isinstance(shards, str) else tuple(shards)
        if not read_only:
            self._ensure_plate()

    def params(self) -> dict[str, Any]:
        """Constructor arguments that recreate this store."""
        return {"root": self.root, "rows": self.rows or None, "columns": self.columns or None,
                "name": self.name, "codec": self.codec, "level": self.level,
                "chunks": self.chunks, "fsync": self.fsync, "read_only": self.read_only,
                "follow_symlinks_outside": self.follow_symlinks_outside,
                "ome_version": self.ome_version, "shards": self.shards}

    @property
    def ome_version(self) -> str:
        """The plate's OME-Zarr version: ``"0.5"`` (zarr v3) or ``"0.4"`` (zarr v2)."""
        return self._paths.layout.version

    def _open_layout(self, asked: str | None) -> None:
        """Take the version of an existing plate (StoreFormatError if another was asked)."""
        found = _layout.detect(self._paths) if os.path.isdir(self.root) else None
        if found is None:
            return
        if asked is not None and asked != found.version:
            raise StoreFormatError(
                f"The plate {self.root!r} is OME-Zarr {found.version}; ome_version={asked!r} "
                "was asked. Open it without ome_version (or with its own), or write to a new "
                "plate.")
        self._paths.layout = found

    @staticmethod
    def field_path(row: str, column: str | int, field: str | int = 0) -> str:
        """The store path of a field: ``"B/3/0"``."""
        return field_path(row, column, field)

    # -- paths and groups (see memtype.omezarr.paths and .plate) -----------------------
    def _parts(self, path: PathLike) -> tuple[str, list[str]]:
        """(key, components) of a plate path, checked: at most row/column/field."""
        key = self.key(path)
        return key, self._paths.parts(key)

    def _field(self, path: PathLike) -> str:
        """The key of a path that must name a field."""
        return self._paths.field(self.key(path))

    def _ensure_plate(self) -> None:
        """Create the plate directory and metadata if missing (race-free)."""
        _plate.ensure_plate(self._paths, self.name, self.rows, self.columns, self.fsync)

    def _ensure_groups(self, parts: list[str], parents: bool) -> None:
        """Make sure the row and well groups along ``parts`` exist (the plate is created on
        demand); missing ones are created only with ``parents``."""
        self._ensure_plate()
        _plate.ensure_groups(self._paths, parts, parents, self.fsync)

    # -- save / load ----------------------------------------------------------------------
    def save(self, data: Any, path: PathLike, *, overwrite: bool = False,
             parents: bool = False, axes: str | None = None,
             scale: Sequence[float] | None = None, unit: str | None = None,
             codec: str | None = None, level: int | None = None,
             chunks: str | Sequence[int] | None = None, pyramid_levels: int = 1,
             downsample: str = "mean", channel_names: Sequence[str] | None = None,
             channel_colors: Sequence[str] | None = None) -> None:
        """Write one image to the field ``row/column/field``.

        Parameters
        ----------
        data : array
            2D to 5D array of any framework (GPU arrays are copied to the host).
        path : str or os.PathLike
            ``row/column/field``; the well must exist unless ``parents=True``.
        overwrite, parents : bool
            See :meth:`Store.save`.
        axes : str, optional
            Axis letters in NGFF order (``"czyx"``); default from the number of dimensions.
        scale : sequence of float, optional
            Physical size of one pixel per axis (default all 1).
        unit : str, optional
            Unit of the space axes (``"micrometer"``).
        codec, level, chunks : optional
            Override the store's defaults for this field (``level``: the codec's).
        pyramid_levels : int
            Resolution levels to write: level k halves Y and X k times (default 1: the image
            alone). Viewers such as napari show a whole plate from the coarse levels.
        downsample : {"mean", "nearest"}
            How a level is halved: 2 x 2 block means rounded to the dtype (intensities), or
            every other pixel (labels and masks: no new values).
        channel_names : sequence of str, optional
            One name per channel (needs a ``c`` axis; default ``"channel 0"``...).
        channel_colors : sequence of str, optional
            One colour per channel, ``"RRGGBB"`` (default: white for one channel, else
            green, magenta, cyan, yellow, red, blue).

        Notes
        -----
        Every image gets OME ``omero`` metadata: per channel its name, colour and a display
        window from robust percentiles (0.1, 99.9) of the lowest pyramid level, sampled at
        most 256 pixels a side, so viewers open each channel with its own contrast.
        """
        self._require_writable("save", path)
        key = self._field(path)
        a = _metadata.as_image(data, key)
        ax = _metadata.check_axes(axes, a.ndim, key)
        levels = _pyramid.check_levels(pyramid_levels, downsample, a.shape, key)
        pyramid = _pyramid.pyramid(a, levels, downsample)
        omero = _pyramid.omero(channel_names, channel_colors, pyramid, ax, key)
        doc = _metadata.image_doc(ax, scale, unit, key, levels, omero)
        shape = _metadata.chunk_shape(self.chunks if chunks is None else chunks, a.shape, key)
        _layout.check_codec(codec or self.codec)
        parts = key.split("/")
        self._ensure_groups(parts[:2], parents)
        if not overwrite and self._paths.exists(key):
            raise StoreExistsError(f"{key!r} already exists; pass overwrite=True to replace it.")
        tmp = f"{parts[0]}/{parts[1]}/{temp_name('', parts[2])}"
        try:
            _write.write_image(self._paths, tmp, pyramid, ax, doc, shape, codec or self.codec,
                               self.level if level is None else level, self.shards)
            with self._paths.metadata(key):
                _plate.commit_field(self._paths, tmp, key, overwrite, self.fsync)
        except BaseException as error:  # the half-written field goes; the error stays first
            _write.discard_temporary(self._paths, tmp, error)
            raise

    def load(self, path: PathLike, *, index: Any = None, resolution: int = 0) -> Any:
        """Read a field, or part of it.

        Parameters
        ----------
        path : str or os.PathLike
            ``row/column/field``.
        index : int, slice or tuple, optional
            NumPy-style index into the image (``(c, z)`` for one plane of a CZYX image);
            only the chunks it touches are read.
        resolution : int
            The pyramid level to read (0, the default: full resolution).

        Returns
        -------
        numpy.ndarray
        """
        key = self._field(path)
        return self._load_group(key, key, index, resolution,
                                f"No field at {key!r} in the plate {self.root!r}.")

    # -- labels (segmentations beside their image; see memtype.omezarr.labels) ---------------
    def save_labels(self, labels: Any, path: PathLike, name: str, *, overwrite: bool = False,
                    colors: Mapping[int, Sequence[int]] | None = None,
                    chunks: str | Sequence[int] | None = None) -> None:
        """Write a label image (integer object ids) beside the image of field ``path``.

        Written as ``<field>/labels/<name>/`` with OME ``image-label`` metadata, the
        image's pyramid levels (downsampled by nearest neighbour: an id stays an id) and
        scales; napari, ome-zarr-py and Fiji show it over the image.

        Parameters
        ----------
        labels : array
            Integer ids (0: background), the image's shape without its channel axis.
        path : str or os.PathLike
            The field, which must hold an image.
        name : str
            The label image's name (``"nuclei"``).
        overwrite : bool
            Replace labels of that name (otherwise ``StoreExistsError``).
        colors : mapping, optional
            ``{id: (r, g, b) or (r, g, b, a)}``; by default each id gets a distinct colour
            (up to 4096 ids; more are left to the viewer) and 0 is transparent.
        chunks : optional
            As for :meth:`save` (default ``"plane"``).

        Notes
        -----
        Saving the field's image again with ``overwrite=True`` replaces the field, its
        labels included.
        """
        self._require_writable("save labels", path)
        key = self._field(path)
        _labels.check_label_name(name, key)
        _labels.save(self._paths, key, name, labels, overwrite=overwrite, colors=colors,
                     chunks=chunks, codec=self.codec, level=self.level, fsync=self.fsync,
                     shards=self.shards)

    def load_labels(self, path: PathLike, name: str, *, index: Any = None,
                    resolution: int = 0) -> Any:
        """Read label image ``name`` of field ``path`` (``index`` and ``resolution`` as for
        :meth:`load`); :meth:`list_labels` names them."""
        key = self._field(path)
        _labels.check_label_name(name, key)
        group = f"{key}/labels/{name}"
        return self._load_group(key, group, index, resolution,
                                f"No labels {name!r} for {key!r} in the plate {self.root!r}",
                                lambda: f"; it has {self.list_labels(key)}.")

    def _load_group(self, key: str, group: str, index: Any, resolution: int, missing: str,
                    known: Callable[[], str] = lambda: "") -> Any:
        """Read ``index`` of level ``resolution`` of the image group ``group`` of field
        ``key`` under the well's shared lock (``missing`` + ``known()``: the error's text)."""
        import zarr  # an optional extra (ZarrStore's __init__ asked for it)

        from memtype.omezarr.beneath import BeneathStore  # a zarr Store: imports zarr

        with self._paths.lock(_metadata.well_lock_name(key.rsplit("/", 1)[0]), shared=True):
            if not self._paths.exists(group):
                raise StoreNotFoundError(missing + known())
            with self._paths.metadata(group):
                level = self._resolution(group, resolution)
                arr = zarr.open_array(store=BeneathStore(self._paths, group, read_only=True),
                                      path=level, mode="r",
                                      zarr_format=self._paths.layout.zarr_format)
            return self._read(arr, index, group)

    def plate_metadata(self) -> dict[str, Any]:
        """The plate's OME ``plate`` metadata: ``rows``, ``columns``, ``wells``, ``name``."""
        with self._paths.metadata(""):
            return _plate.plate_attributes(self._paths)

    def image_metadata(self, path: PathLike) -> dict[str, Any]:
        """The OME metadata of field ``path``: ``multiscales`` and ``omero``."""
        key = self._field(path)
        if not self._paths.exists(key):
            raise StoreNotFoundError(f"No field at {key!r} in the plate {self.root!r}.")
        return self._paths.layout.read_ome(self._paths, key)

    def list_labels(self, path: PathLike) -> list[str]:
        """The names of the label images of field ``path``."""
        return _labels.names(self._paths, self._field(path))

    def _read(self, arr: Any, index: Any, key: str) -> Any:
        """``arr[index]``: an index outside is StoreIndexError, a bad chunk StoreFormatError."""
        with decoding("zarr chunk", f"A chunk of {key!r} in the plate {self.root!r}"):
            try:
                return arr[...] if index is None else arr[index]
            except IndexError as exc:  # zarr's BoundsCheckError, too many indices...
                if isinstance(exc, MemtypeError):
                    raise
                raise StoreIndexError(
                    f"index={index!r} does not fit {key!r} (shape {arr.shape}): {exc}.") from exc

    def _resolution(self, key: str, resolution: object) -> str:
        """The path of pyramid level ``resolution`` of field ``key``; an error if absent."""
        return _plate.level_path(self._paths, key, resolution)

    # -- queries -----------------------------------------------------------------------
    def exists(self, path: PathLike) -> bool:
        key, _ = self._parts(path)
        return self._paths.exists(key)

    def is_file(self, path: PathLike) -> bool:
        key, parts = self._parts(path)
        return len(parts) == 3 and self._paths.exists(key)

    def is_dir(self, path: PathLike) -> bool:
        key, parts = self._parts(path)
        return len(parts) < 3 and self._paths.exists(key)

    def list_files(self, directory: PathLike = "", pattern: str | None = None,
                   extensions: Iterable[str] | str | None = None,
                   recursive: bool = False) -> list[str]:
        key = self.key(directory)
        parts = self._paths.require_dir(key)
        exts = self._extensions(extensions)
        found: list[str] = []
        self._collect(key, len(parts), recursive, found)
        return self._listing(directory, found, pattern, exts)

    def _collect(self, key: str, depth: int, recursive: bool, out: list[str]) -> None:
        """Append the field keys under ``key`` (a group at ``depth``) to ``out``."""
        for name in self._paths.children(key):
            child = posixpath.join(key, name) if key else name
            if depth == 2:
                out.append(child)
            elif recursive:
                self._collect(child, depth + 1, True, out)

    def list_dir(self, directory: PathLike = "") -> list[str]:
        key = self.key(directory)
        self._paths.require_dir(key)
        return sorted(self._paths.children(key), key=natural_key)

    def stat(self, path: PathLike) -> StoreStat:
        key, parts = self._parts(path)
        if not self._paths.exists(key):
            raise StoreNotFoundError(f"Nothing at {key or self.root!r} in the plate.")
        marker = self._paths.layout.marker
        mtime = self._paths.stat(f"{key}/{marker}" if key else marker).st_mtime
        if len(parts) < 3:
            return StoreStat(key, True, 0, mtime)
        import numpy as np

        with self._paths.metadata(key):
            shape, name = _plate.level_header(self._paths, key)
            dtype = np.dtype(name)
        return StoreStat(key, False, data_nbytes(shape, dtype), mtime, shape,
                         str(dtype))

    # -- directories, deletes, moves -----------------------------------------------------
    def ensure_directory(self, path: PathLike) -> str:
        key, parts = self._parts(path)
        if len(parts) == 3:
            raise StoreNotADirectoryError(
                f"{key!r} is a field path (an image); expected a plate, row or well directory."
            )
        if not self._paths.exists(key):
            self._require_writable("create directory", path)
            self._ensure_groups(parts, True)
        return key

    def delete(self, path: PathLike) -> None:
        self._require_writable("delete", path)
        key, parts = self._parts(path)
        if not parts:
            raise StorePathError("The plate root cannot be deleted; use delete_all('').")
        if not self._paths.exists(key):
            raise StoreNotFoundError(f"Nothing at {key!r} in the plate {self.root!r}.")
        if len(parts) < 3 and self._paths.children(key):
            raise StoreIsADirectoryError(
                f"{key!r} is not empty; use delete_all to remove it with its contents."
            )
        _plate.remove(self._paths, key, parts, self.fsync)

    def delete_all(self, path: PathLike) -> None:
        self._require_writable("delete", path)
        key, parts = self._parts(path)
        if not self._paths.exists(key):
            raise StoreNotFoundError(f"Nothing at {key or self.root!r} in the plate.")
        if parts:
            _plate.remove(self._paths, key, parts, self.fsync)
            return
        for row in self._paths.children(""):
            _plate.remove(self._paths, row, [row], self.fsync)

    def move(self, src: PathLike, dst: PathLike, *, overwrite: bool = False,
             parents: bool = False) -> None:
        self._require_writable("move", src)
        self._transfer(src, dst, overwrite, parents, move=True)

    def copy(self, src: PathLike, dst: PathLike, *, overwrite: bool = False,
             parents: bool = False) -> None:
        self._require_writable("copy to", dst)
        self._transfer(src, dst, overwrite, parents, move=False)

    def _transfer(self, src: PathLike, dst: PathLike, overwrite: bool, parents: bool,
                  move: bool) -> None:
        """Move or copy a field, well or row to the same level elsewhere."""
        skey, sparts = self._parts(src)
        dkey, dparts = self._parts(dst)
        if not sparts or len(sparts) != len(dparts) or skey == dkey:
            raise StorePathError(
                f"Cannot move or copy {skey or '/'!r} to {dkey or '/'!r}: expected two "
                "different paths of the same level (field to field, well to well, row to row)."
            )
        if not self._paths.exists(skey):
            raise StoreNotFoundError(f"Nothing at {skey!r} in the plate {self.root!r}.")
        self._ensure_groups(dparts[:-1], parents)
        if self._paths.exists(dkey):
            if not overwrite:
                raise StoreExistsError(f"{dkey!r} already exists; pass overwrite=True.")
            _plate.remove(self._paths, dkey, dparts, self.fsync)
        _plate.place_copy(self._paths, skey, sparts, dkey, dparts, move, self.fsync)
