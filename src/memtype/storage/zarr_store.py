"""ZarrStore: an OME-Zarr 0.5 plate (zarr v3) behind the Store interface.

>>> from memtype.storage import ZarrStore
>>> plate = ZarrStore("/data/run1.zarr", rows="ABCDEFGH", columns=range(1, 13))  # doctest: +SKIP
>>> plate.save(stack_czyx, "B/3/0", parents=True)      # field 0 of well B3, axes "czyx"
>>> plate.load("B/3/0", index=(1, 5))                  # channel 1, plane 5: reads one chunk
>>> plate.list_files("B/3")                            # ['B/3/0']

Paths are ``row/column/field`` (alphanumeric names): the plate root, a row (``"B"``) and a
well (``"B/3"``) are directories; a field (``"B/3/0"``) is a file holding one image with
2 to 5 dimensions ([T][C][Z] Y X; axes default to ``yx``, ``zyx``, ``czyx``, ``tczyx``). Each
field is a multiscale image with level 0 at ``<field>/0`` and axes metadata, readable by
the ``ome-zarr`` reader and napari.

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
* Every group a key names is checked on its resolved path: a symbolic link leading out of
  the plate raises ``StorePathError`` unless ``follow_symlinks_outside=True``. (zarr reads
  chunk files by path, so links inside a field are not checked one by one.)
* Tampered or corrupt metadata and chunks raise ``StoreFormatError``; an ``index`` outside
  the image raises ``StoreIndexError``.
"""

from __future__ import annotations

import os
import posixpath
import shutil
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memtype._optional import require
from memtype.errors import (
    MemtypeError,
    StoreExistsError,
    StoreFormatError,
    StoreIndexError,
    StoreNotFoundError,
    StorePathError,
)
from memtype.storage import _ome, _pyramid
from memtype.storage._atomic import ignore_temporaries, temp_name
from memtype.storage._readers import DECODE_ERRORS, CorruptFile, corrupt
from memtype.storage.base import PathLike, Store, StoreStat, match_name, natural_key

__all__ = ["ZarrStore"]


class ZarrStore(Store):
    """An OME-Zarr plate: ``row/column/field`` images in zarr v3.

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
    """

    registry_name = "zarr"
    device = "disk"

    def __init__(self, root: PathLike, *, rows: Iterable[Any] | None = None,
                 columns: Iterable[Any] | None = None, name: str | None = None,
                 codec: str = "blosc-lz4", level: int | None = None,
                 chunks: str | Sequence[int] = "plane", fsync: bool = False,
                 read_only: bool = False, follow_symlinks_outside: bool = False) -> None:
        require("zarr", "ZarrStore (OME-Zarr plates)")  # before anything is created
        super().__init__(root, read_only=read_only)
        self.follow_symlinks_outside = bool(follow_symlinks_outside)
        if os.path.exists(self.root) and not os.path.isdir(self.root):
            raise StorePathError(f"Plate root {self.root!r} is a file; expected a directory.")
        _ome.compressors(codec, level)
        self.rows = [str(r) for r in rows] if rows is not None else []
        self.columns = [str(c) for c in columns] if columns is not None else []
        for r in self.rows:
            _ome.check_name(r, "row", r)
        for c in self.columns:
            _ome.check_name(c, "column", c)
        self.name = name or os.path.basename(self.root)
        self.codec, self.level, self.chunks, self.fsync = codec, level, chunks, bool(fsync)
        if not read_only:
            self._ensure_plate()

    def params(self) -> dict[str, Any]:
        """Constructor arguments that recreate this store."""
        return {"root": self.root, "rows": self.rows or None, "columns": self.columns or None,
                "name": self.name, "codec": self.codec, "level": self.level,
                "chunks": self.chunks, "fsync": self.fsync, "read_only": self.read_only,
                "follow_symlinks_outside": self.follow_symlinks_outside}

    @staticmethod
    def field_path(row: str, column: str | int, field: str | int = 0) -> str:
        """The store path of a field: ``"B/3/0"``."""
        return f"{row}/{column}/{field}"

    # -- paths -------------------------------------------------------------------------
    def _parts(self, path: PathLike) -> tuple[str, list[str]]:
        """(key, components) of a plate path, checked: at most row/column/field."""
        key = self.key(path)
        parts = key.split("/") if key else []
        if len(parts) > 3:
            raise StorePathError(
                f"Invalid plate path {key!r}: expected at most 'row/column/field' (3 parts); "
                f"received {len(parts)}."
            )
        for part, what in zip(parts, ("row", "column", "field")[:len(parts)], strict=True):
            _ome.check_name(part, what, key)
        return key, parts

    def _field(self, path: PathLike) -> str:
        """The key of a path that must name a field."""
        key, parts = self._parts(path)
        if len(parts) != 3:
            raise StorePathError(
                f"{key or '/'!r} is a {('plate', 'row', 'well')[len(parts)]}, a directory; "
                "expected a field path 'row/column/field'."
            )
        return key

    def _full(self, key: str) -> str:
        """Absolute path of a key, checked on its resolved path (see the module notes)."""
        full = posixpath.join(self.root, key) if key else self.root
        if key and not self.follow_symlinks_outside:
            real_root = os.path.realpath(self.root)
            real = os.path.realpath(full)
            if real != real_root and not real.startswith(real_root.rstrip("/") + "/"):
                raise StorePathError(
                    f"Cannot use {key!r}: it resolves to {real!r}, outside the plate "
                    f"{real_root!r} (a symbolic link leads out). Expected links that stay "
                    "inside, or a store created with follow_symlinks_outside=True.")
        return full

    @contextmanager
    def _metadata(self, key: str) -> Iterator[None]:
        """Raise a tampered document's KeyError, TypeError... as StoreFormatError."""
        where = f"The metadata of {key or '/'!r} in the plate {self.root!r}"
        try:
            yield
        except CorruptFile as exc:
            raise corrupt("OME-Zarr document", where, str(exc)) from exc
        except MemtypeError:
            raise
        except DECODE_ERRORS as exc:
            raise corrupt("OME-Zarr document", where, exc) from exc

    def _node_exists(self, key: str) -> bool:
        """Whether a group (plate, row, well or field) exists at ``key``."""
        return os.path.isfile(posixpath.join(self._full(key), "zarr.json"))

    # -- metadata ----------------------------------------------------------------------
    def _ensure_plate(self) -> None:
        """Create the plate directory and metadata if missing (race-free)."""
        if self._node_exists(""):
            return
        os.makedirs(self.root, exist_ok=True)
        doc = _ome.plate_doc(self.name, self.rows, self.columns)
        _ome.write_json(posixpath.join(self.root, "zarr.json"), doc, overwrite=False,
                        fsync=self.fsync)

    def _ensure_groups(self, parts: list[str], parents: bool) -> None:
        """Make sure the row and well groups along ``parts`` exist (the plate is created on
        demand); missing ones are created only with ``parents``."""
        self._ensure_plate()
        for depth in range(1, len(parts) + 1):
            key = "/".join(parts[:depth])
            if self._node_exists(key):
                continue
            if not parents:
                raise StoreNotFoundError(
                    f"No {('row', 'well')[depth - 1]} at {key!r} in the plate {self.root!r}; "
                    "create it with ensure_directory or pass parents=True."
                )
            self._create_group(key, depth)

    def _create_group(self, key: str, depth: int) -> None:
        """Create the row (depth 1) or well (depth 2) group at ``key``."""
        os.makedirs(self._full(key), exist_ok=True)
        doc = _ome.group_doc() if depth == 1 else _ome.well_doc([])
        _ome.write_json(posixpath.join(self._full(key), "zarr.json"), doc, overwrite=False,
                        fsync=self.fsync)

    # -- save / load ----------------------------------------------------------------------
    def save(self, data: Any, path: PathLike, *, overwrite: bool = False,
             parents: bool = False, axes: str | None = None,
             scale: Sequence[float] | None = None, unit: str | None = None,
             codec: str | None = None, level: int | None = None,
             chunks: str | Sequence[int] | None = None, pyramid_levels: int = 1,
             downsample: str = "mean", channel_names: Sequence[str] | None = None) -> None:
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
            One name per channel (needs a ``c`` axis); written as OME ``omero`` metadata.
        """
        self._require_writable("save", path)
        key = self._field(path)
        a = _ome.as_image(data, key)
        ax = _ome.check_axes(axes, a.ndim, key)
        levels = _pyramid.check_levels(pyramid_levels, downsample, a.shape, key)
        names = None if channel_names is None else _pyramid.omero(channel_names, a, ax, key)
        doc = _ome.image_doc(ax, scale, unit, key, levels, names)
        shape = _ome.chunk_shape(self.chunks if chunks is None else chunks, a.shape, key)
        compressors = _ome.compressors(codec or self.codec, self.level if level is None else level)
        parts = key.split("/")
        self._ensure_groups(parts[:2], parents)
        if not overwrite and self._node_exists(key):
            raise StoreExistsError(f"{key!r} already exists; pass overwrite=True to replace it.")
        tmp = temp_name(self._full("/".join(parts[:2])), parts[2])
        try:
            _ome.write_image(tmp, _pyramid.pyramid(a, levels, downsample), ax, doc, shape,
                             compressors)
            with self._metadata(key):
                _ome.commit_field(self.root, tmp, key, overwrite, self.fsync)
        finally:
            if os.path.lexists(tmp):
                shutil.rmtree(tmp)

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
        import zarr
        from zarr.storage import LocalStore

        key = self._field(path)
        with _ome.well_read_lock(self.root, key.rsplit("/", 1)[0]):
            if not self._node_exists(key):
                raise StoreNotFoundError(f"No field at {key!r} in the plate {self.root!r}.")
            with self._metadata(key):
                level = self._resolution(key, resolution)
                self._full(f"{key}/{level}")
                arr = zarr.open_array(store=LocalStore(self._full(key), read_only=True),
                                      path=level, mode="r", zarr_format=3)
            return self._read(arr, index, key)

    def _read(self, arr: Any, index: Any, key: str) -> Any:
        """``arr[index]``: an index outside is StoreIndexError, a bad chunk StoreFormatError."""
        try:
            return arr[...] if index is None else arr[index]
        except MemtypeError:
            raise
        except IndexError as exc:  # zarr's BoundsCheckError, too many indices...
            raise StoreIndexError(
                f"index={index!r} does not fit {key!r} (shape {arr.shape}): {exc}.") from exc
        except DECODE_ERRORS as exc:
            where = f"A chunk of {key!r} in the plate {self.root!r}"
            raise corrupt("zarr chunk", where, exc) from exc

    def _resolution(self, key: str, resolution: object) -> str:
        """The path of pyramid level ``resolution`` of field ``key``; an error if absent."""
        doc = _ome.ome_attrs(_ome.read_json(posixpath.join(self._full(key), "zarr.json")))
        paths = [d["path"] for d in doc["multiscales"][0]["datasets"]]
        if isinstance(resolution, bool) or not isinstance(resolution, int) \
                or not 0 <= resolution < len(paths):
            raise StoreFormatError(
                f"Invalid resolution {resolution!r} for {key!r}: it has levels 0 to "
                f"{len(paths) - 1}.")
        return str(paths[resolution])

    # -- queries -----------------------------------------------------------------------
    def exists(self, path: PathLike) -> bool:
        key, _ = self._parts(path)
        return self._node_exists(key)

    def is_file(self, path: PathLike) -> bool:
        key, parts = self._parts(path)
        return len(parts) == 3 and self._node_exists(key)

    def is_dir(self, path: PathLike) -> bool:
        key, parts = self._parts(path)
        return len(parts) < 3 and self._node_exists(key)

    def _require_dir(self, path: PathLike) -> tuple[str, list[str]]:
        """(key, parts) of an existing plate, row or well; raise otherwise."""
        key, parts = self._parts(path)
        if len(parts) == 3:
            raise StorePathError(f"{key!r} is a field (an image); expected a directory.")
        if not self._node_exists(key):
            what = ("plate", "row", "well")[len(parts)]
            raise StoreNotFoundError(f"No {what} at {key or self.root!r}.")
        return key, parts

    def _children(self, key: str) -> list[str]:
        """Names of the groups directly under ``key`` (no temporaries, no lock dir)."""
        return _ome.child_groups(self._full(key))

    def list_files(self, directory: PathLike = "", pattern: str | None = None,
                   extensions: Iterable[str] | str | None = None,
                   recursive: bool = False) -> list[str]:
        key, parts = self._require_dir(directory)
        exts = self._extensions(extensions)
        found: list[str] = []
        self._collect(key, len(parts), recursive, found)
        found = [k for k in found if match_name(k.rpartition("/")[2], pattern, exts)]
        found.sort(key=natural_key)
        return [self._present(directory, k) for k in found]

    def _collect(self, key: str, depth: int, recursive: bool, out: list[str]) -> None:
        """Append the field keys under ``key`` (a group at ``depth``) to ``out``."""
        for name in self._children(key):
            child = posixpath.join(key, name) if key else name
            if depth == 2:
                out.append(child)
            elif recursive:
                self._collect(child, depth + 1, True, out)

    def list_dir(self, directory: PathLike = "") -> list[str]:
        key, _ = self._require_dir(directory)
        return sorted(self._children(key), key=natural_key)

    def stat(self, path: PathLike) -> StoreStat:
        key, parts = self._parts(path)
        full = self._full(key)
        if not self._node_exists(key):
            raise StoreNotFoundError(f"Nothing at {key or self.root!r} in the plate.")
        mtime = os.stat(posixpath.join(full, "zarr.json")).st_mtime
        if len(parts) < 3:
            return StoreStat(key, True, 0, mtime)
        import numpy as np

        with self._metadata(key):
            meta = _ome.read_json(posixpath.join(self._full(f"{key}/0"), "zarr.json"))
            shape = tuple(int(s) for s in meta["shape"])
            dtype = np.dtype(meta["data_type"])
        return StoreStat(key, False, int(np.prod(shape)) * dtype.itemsize, mtime, shape,
                         str(dtype))

    # -- directories, deletes, moves -----------------------------------------------------
    def ensure_directory(self, path: PathLike) -> str:
        key, parts = self._parts(path)
        if len(parts) == 3:
            raise StorePathError(
                f"{key!r} is a field path (an image); expected a plate, row or well directory."
            )
        if not self._node_exists(key):
            self._require_writable("create directory", path)
            self._ensure_groups(parts, True)
        return key

    def delete(self, path: PathLike) -> None:
        self._require_writable("delete", path)
        key, parts = self._parts(path)
        if not parts:
            raise StorePathError("The plate root cannot be deleted; use delete_all('').")
        if not self._node_exists(key):
            raise StoreNotFoundError(f"Nothing at {key!r} in the plate {self.root!r}.")
        if len(parts) < 3 and self._children(key):
            raise StorePathError(
                f"{key!r} is not empty; use delete_all to remove it with its contents."
            )
        self._remove(key, parts)

    def delete_all(self, path: PathLike) -> None:
        self._require_writable("delete", path)
        key, parts = self._parts(path)
        if not self._node_exists(key):
            raise StoreNotFoundError(f"Nothing at {key or self.root!r} in the plate.")
        if parts:
            self._remove(key, parts)
            return
        for row in self._children(""):
            self._remove(row, [row])

    def _remove(self, key: str, parts: list[str]) -> None:
        """Remove a field, well or row and update the metadata that listed it."""
        with self._metadata(key):
            self._remove_node(key, parts)

    def _remove_node(self, key: str, parts: list[str]) -> None:
        """:meth:`_remove` without the metadata check."""
        if len(parts) < 3:
            _ome.update_plate_wells(self.root, [], self._wells_under(key, len(parts)),
                                    self.fsync)
            shutil.rmtree(self._full(key))
            return
        well, field = key.rsplit("/", 1)
        with _ome.well_lock(self.root, well):
            _, now_empty = _ome.edit_well_images(self.root, well, None, field, self.fsync)
            if now_empty:
                _ome.update_plate_wells(self.root, [], [well], self.fsync)
            shutil.rmtree(self._full(key))

    def _wells_under(self, key: str, depth: int) -> list[str]:
        """Well keys under a row (depth 1), of a well (2), or holding a field (3)."""
        if depth == 3:
            return [key.rsplit("/", 1)[0]]
        if depth == 2:
            return [key]
        if depth == 1:
            return [f"{key}/{c}" for c in self._children(key)]
        return []

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
        if not self._node_exists(skey):
            raise StoreNotFoundError(f"Nothing at {skey!r} in the plate {self.root!r}.")
        self._ensure_groups(dparts[:-1], parents)
        if self._node_exists(dkey):
            if not overwrite:
                raise StoreExistsError(f"{dkey!r} already exists; pass overwrite=True.")
            self._remove(dkey, dparts)
        before = self._wells_under(skey, len(sparts))
        tmp = temp_name(posixpath.dirname(self._full(dkey)), dparts[-1])
        shutil.copytree(self._full(skey), tmp, ignore=ignore_temporaries)
        os.rename(tmp, self._full(dkey))
        if move:
            self._remove(skey, sparts)
        wells = (before if move else []) + self._wells_under(dkey, len(dparts))
        with self._metadata(dkey):
            _ome.resync_wells(self.root, wells, self.fsync)
