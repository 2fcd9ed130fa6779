"""Tables inside an OME-Zarr image: the Fractal table specification (V1), AnnData backend.

Layout (``<field>`` is ``row/column/field``; the same in OME-Zarr 0.4 and 0.5)::

    <field>/tables/                 group; attributes {tables: [names]}
    <field>/tables/<name>/          an AnnData group (encoding-type "anndata" 0.1.0) with
                                    attributes {fractal_table_version: "1", type, region,
                                    instance_key}
        X                           float32 [rows, measurements]: the numeric columns
        obs/                        dataframe: the index (the label id, or the row number)
                                    and the text columns (well, site, channel...), the label
        var/                        dataframe: the index holds the measurements' names

AnnData's other members (``layers``, ``obsm``, ``uns``...) are left out: they would be empty,
and anndata reads a table without them (each group is two files more per table).

A table with a ``label`` column and a label image to refer to is a ``feature_table``
(``region: {path: "../labels/<name>"}``, ``instance_key: "label"``, one row per object);
any other is a generic table (no ``type``), e.g. one row per channel of the field.
:func:`write_roi_table` writes ROI tables (axis-aligned boxes in micrometres: columns
``x_micrometer, y_micrometer, z_micrometer, len_x_micrometer, len_y_micrometer,
len_z_micrometer`` in ``X``): a ``roi_table`` (rows named in ``obs`` index ``FieldIndex``,
as Fractal's ``FOV_ROI_table`` and ``well_ROI_table``) or, with a label image, a
``masking_roi_table`` (one row per object, its bounding box, as Fractal's
``<label>_ROI_table``). Every table also carries ngio's backend metadata (``backend:
"anndata"``, ``table_version``, ``index_key``, ``index_type``). The
layout is written as plain files (JSON metadata, uncompressed chunks: ``vlen-utf8`` for
text), so writing needs neither anndata nor zarr's per-node machinery (zarr-python took
about 0.25 s a table, a quarter of a small demo run; these files take milliseconds);
``anndata.read_zarr`` and ngio read it (tests/test_storage_zarr_tables.py reads it back
with anndata, in zarr v2 and v3).
"""

from __future__ import annotations

import json
import posixpath
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtype.errors import StoreNotFoundError
from memtype.omezarr.layout import layout_for
from memtype.omezarr.paths import PlatePaths

__all__ = ["write_table", "write_roi_table", "label_boxes", "table_names", "ImageGroup",
           "ROI_COLUMNS", "TABLE_VERSION"]

TABLE_VERSION = "1"
"""The Fractal table specification version written."""
_BACKEND = {"fractal_table_version": TABLE_VERSION, "table_version": TABLE_VERSION,
            "backend": "anndata"}
"""Every table's version, as fractal-tasks-core (``fractal_table_version``) and ngio
(``table_version``, ``backend``) read it."""
ROI_COLUMNS = ("x_micrometer", "y_micrometer", "z_micrometer",
               "len_x_micrometer", "len_y_micrometer", "len_z_micrometer")
"""The columns of a ROI table: a box's corner, then its size, in micrometres."""
_V3_TYPES = {"<f4": "float32", "<i8": "int64"}


@dataclass(frozen=True)
class ImageGroup:
    """An image group, every file of its tables written below a plate's root (links
    leading out refused, never written through): ``key`` in the plate of ``paths``."""

    paths: PlatePaths
    key: str

    @classmethod
    def at(cls, field: str | ImageGroup) -> ImageGroup:
        """``field`` itself, or the image group in the local folder ``field``."""
        if isinstance(field, ImageGroup):
            return field
        return cls(PlatePaths(field, False, layout_for("0.5")), "")

    def join(self, *names: str) -> str:
        """The plate key of a file of this group."""
        return posixpath.join(self.key, *names) if self.key else posixpath.join(*names)


def _encoding(kind: str, version: str) -> dict[str, str]:
    """AnnData's encoding attributes."""
    return {"encoding-type": kind, "encoding-version": version}


def _number(value: Any) -> float | None:
    """``value`` as a float (CSV cells are text), or None."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _zarr_format(image: ImageGroup) -> int:
    """3 for a zarr v3 image group (``zarr.json``), else 2."""
    return 3 if image.paths.is_file(image.join("zarr.json")) else 2


def _json(paths: PlatePaths, key: str, doc: Mapping[str, Any]) -> None:
    """Write one metadata document (encoded at once: ``json.dump`` to a file writes it
    piece by piece, and took a third of a table's time)."""
    paths.write_bytes(key, json.dumps(doc).encode("utf-8"))


def _group(paths: PlatePaths, key: str, fmt: int, attrs: Mapping[str, Any]) -> None:
    """A zarr group with attributes."""
    if fmt == 3:
        _json(paths, f"{key}/zarr.json",
              {"zarr_format": 3, "node_type": "group", "attributes": dict(attrs)})
    else:
        _json(paths, f"{key}/.zgroup", {"zarr_format": 2})
        _json(paths, f"{key}/.zattrs", dict(attrs))


def _vlen_utf8(values: Sequence[str]) -> bytes:
    """The ``vlen-utf8`` encoding: a count, then each string's length and bytes."""
    parts = [struct.pack("<I", len(values))]
    for value in values:
        data = value.encode("utf-8")
        parts += [struct.pack("<I", len(data)), data]
    return b"".join(parts)


def _array(paths: PlatePaths, path: str, fmt: int,
           values: np.ndarray[Any, Any] | Sequence[str], attrs: Mapping[str, Any]) -> None:
    """A one-chunk, uncompressed zarr array (numbers, or ``vlen-utf8`` strings)."""
    if isinstance(values, np.ndarray):
        text, shape, dtype = False, list(values.shape), values.dtype.str
        data = np.ascontiguousarray(values).tobytes()
    else:
        text, shape, dtype = True, [len(values)], "|O"
        data = _vlen_utf8(values)
    chunks = [max(n, 1) for n in shape]
    if fmt == 3:
        codecs = ([{"name": "vlen-utf8", "configuration": {}}] if text
                  else [{"name": "bytes", "configuration": {"endian": "little"}}])
        _json(paths, f"{path}/zarr.json", {
            "zarr_format": 3, "node_type": "array", "shape": shape,
            "data_type": "string" if text else _V3_TYPES[dtype],
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
            # "c.0.0" beside zarr.json: no chunk directories (each one a mkdir per array)
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "."}},
            "fill_value": "" if text else 0, "codecs": codecs, "attributes": dict(attrs)})
        key = ".".join(["c", *["0"] * len(shape)])
    else:
        _json(paths, f"{path}/.zarray", {
            "zarr_format": 2, "shape": shape, "chunks": chunks,
            "dtype": dtype,
            "fill_value": "" if text else 0, "order": "C",
            "filters": [{"id": "vlen-utf8"}] if text else None,
            "dimension_separator": ".", "compressor": None})
        _json(paths, f"{path}/.zattrs", dict(attrs))
        key = ".".join(["0"] * len(shape))
    if all(shape):
        paths.write_bytes(f"{path}/{key}", data)


def _dataframe(paths: PlatePaths, path: str, fmt: int, index: Sequence[str],
               columns: Mapping[str, np.ndarray[Any, Any] | list[str]],
               index_name: str = "_index") -> None:
    """An AnnData dataframe group: the index (array ``index_name``) and the columns
    (numbers or strings)."""
    _group(paths, path, fmt, {"_index": index_name, "column-order": list(columns),
                              **_encoding("dataframe", "0.2.0")})
    _array(paths, f"{path}/{index_name}", fmt, list(index),
           _encoding("string-array", "0.2.0"))
    for column, values in columns.items():
        kind = "array" if isinstance(values, np.ndarray) else "string-array"
        _array(paths, f"{path}/{column}", fmt, values, _encoding(kind, "0.2.0"))


def _read_attrs(paths: PlatePaths, key: str, fmt: int) -> dict[str, Any]:
    """A group's attributes ({} where it has none yet)."""
    try:
        doc = paths.read_json(f"{key}/{'zarr.json' if fmt == 3 else '.zattrs'}")
    except StoreNotFoundError:
        return {}
    attributes = doc.get("attributes", {}) if fmt == 3 else doc
    return dict(attributes) if isinstance(attributes, dict) else {}


def write_table(field: str | ImageGroup, name: str, rows: Sequence[Mapping[str, Any]], *,
                region: str | None = None, keys: Sequence[str] = ()) -> None:
    """Write ``rows`` as table ``name`` of the image group at path ``field`` (zarr v2 or
    v3, as the group is), replacing a table of that name.

    ``keys``: the columns that identify a row (the pattern's fields), kept as text in
    ``obs`` even where they look numeric; ``region``: the label image a table with a
    ``label`` column describes (a feature table), else None. The table is written beside
    its place and renamed into it, so a reader never meets half of one.
    """
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    feature = region is not None and "label" in columns
    numbers = {c: [_number(r.get(c)) for r in rows] for c in columns
               if c not in keys and c != "label"}  # each value read once
    measured = [c for c, values in numbers.items() if None not in values]
    text = [c for c in columns if c not in measured and c != "label"]
    obs: dict[str, np.ndarray[Any, Any] | list[str]] = {
        c: ["" if r.get(c) is None else str(r[c]) for r in rows] for c in text}
    x = np.array([numbers[c] for c in measured], "<f4").T if measured else np.zeros(
        (len(rows), 0), "<f4")
    if feature:
        labels = np.array([int(float(r["label"])) for r in rows], "<i8")
        _write_anndata(field, name, _labelled("feature_table", str(region)),
                       x.reshape(len(rows), len(measured)), measured, labels, obs)
    else:
        _write_anndata(field, name, {}, x.reshape(len(rows), len(measured)), measured,
                       [str(i) for i in range(len(rows))], obs)


def write_roi_table(field: str | ImageGroup, name: str, index: Sequence[str] | np.ndarray[Any, Any],
                    boxes: np.ndarray[Any, Any], *, region: str | None = None) -> None:
    """Write a ROI table ``name`` of the image group at path ``field``: one row per box,
    ``boxes[i]`` the :data:`ROI_COLUMNS` (corner x, y, z and size x, y, z, micrometres).

    Without ``region`` a ``roi_table`` whose rows are named ``index`` (``"FOV_1"``); with
    it a ``masking_roi_table`` of the label image ``region``, ``index`` the label ids.
    """
    boxes = np.asarray(boxes, "<f4").reshape(len(index), len(ROI_COLUMNS))
    if region is None:
        attrs = {"type": "roi_table", "index_key": "FieldIndex", "index_type": "str"}
        _write_anndata(field, name, attrs, boxes, ROI_COLUMNS, [str(i) for i in index], {},
                       index_name="FieldIndex")
    else:
        _write_anndata(field, name, _labelled("masking_roi_table", region), boxes,
                       ROI_COLUMNS, np.asarray(index, "<i8"), {})


def label_boxes(labels: np.ndarray[Any, Any],
                ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The ids of a label image (0 is background) and each one's bounding box: ``(ids,
    start, stop)``, ``start[i]`` the first and ``stop[i]`` one past the last index of id
    ``ids[i]`` along each axis (one pass over the image, then over its object pixels)."""
    flat = labels.reshape(-1)
    where = np.flatnonzero(flat)
    order = np.argsort(flat[where], kind="stable")
    where = where[order]
    ids, starts = np.unique(flat[where], return_index=True)
    if not len(ids):
        empty = np.zeros((0, labels.ndim), np.int64)
        return ids, empty, empty
    coords = np.unravel_index(where, labels.shape)
    start = np.stack([np.minimum.reduceat(c, starts) for c in coords], axis=1)
    stop = np.stack([np.maximum.reduceat(c, starts) for c in coords], axis=1) + 1
    return ids, start, stop


def _labelled(kind: str, region: str) -> dict[str, Any]:
    """The attributes of a table with one row per object of the label image ``region``."""
    return {"type": kind, "region": {"path": f"../labels/{region}"},
            "instance_key": "label", "index_key": "label", "index_type": "int"}


def _write_anndata(field: str | ImageGroup, name: str, attrs: Mapping[str, Any],
                   x: np.ndarray[Any, Any],
                   var: Sequence[str], index: Sequence[str] | np.ndarray[Any, Any],
                   obs: Mapping[str, np.ndarray[Any, Any] | list[str]], *,
                   index_name: str = "_index") -> None:
    """Write one AnnData table (``X``, ``var`` names, ``obs``; ``index`` an int array is
    the label ids: the row names and ``obs["label"]``) staged beside its place, then
    renamed in and listed in the field's ``tables`` group."""
    image = ImageGroup.at(field)
    paths, fmt = image.paths, _zarr_format(image)
    if isinstance(index, np.ndarray):
        obs = {**obs, "label": index}
        index = [str(v) for v in index]
    tables = image.join("tables")
    final, staging = f"{tables}/{name}", f"{tables}/.{name}.writing"
    paths.remove(staging)
    _group(paths, staging, fmt, {**_encoding("anndata", "0.1.0"), **_BACKEND, **attrs})
    _array(paths, f"{staging}/X", fmt, x, _encoding("array", "0.2.0"))
    _dataframe(paths, f"{staging}/obs", fmt, index, obs, index_name)
    _dataframe(paths, f"{staging}/var", fmt, list(var), {})
    paths.remove(final)
    paths.rename(staging, name)
    listed = [str(n) for n in _read_attrs(paths, tables, fmt).get("tables", [])]
    if name not in listed:
        _group(paths, tables, fmt, {"tables": [*listed, name]})


def table_names(field: str | ImageGroup) -> list[str]:
    """The tables the image group ``field`` (a path, or a group of a plate) lists."""
    image = ImageGroup.at(field)
    return [str(n) for n in
            _read_attrs(image.paths, image.join("tables"), _zarr_format(image)).get("tables", [])]
