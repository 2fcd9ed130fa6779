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
any other is a generic table (no ``type``), e.g. one row per channel of the field. The
layout is written as plain files (JSON metadata, uncompressed chunks: ``vlen-utf8`` for
text), so writing needs neither anndata nor zarr's per-node machinery (zarr-python took
about 0.25 s a table, a quarter of a small demo run; these files take milliseconds);
``anndata.read_zarr`` and ngio read it (tests/test_storage_zarr_tables.py reads it back
with anndata, in zarr v2 and v3).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["write_table", "table_names", "TABLE_VERSION"]

TABLE_VERSION = "1"
"""The Fractal table specification version written."""
_V3_TYPES = {"<f4": "float32", "<i8": "int64"}


def _encoding(kind: str, version: str) -> dict[str, str]:
    """AnnData's encoding attributes."""
    return {"encoding-type": kind, "encoding-version": version}


def _number(value: Any) -> float | None:
    """``value`` as a float (CSV cells are text), or None."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _zarr_format(path: str) -> int:
    """3 for a zarr v3 group at ``path`` (``zarr.json``), else 2."""
    return 3 if os.path.isfile(os.path.join(path, "zarr.json")) else 2


def _json(path: str, doc: Mapping[str, Any]) -> None:
    """Write one metadata document."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)


def _group(path: str, fmt: int, attrs: Mapping[str, Any]) -> None:
    """A zarr group with attributes."""
    os.makedirs(path, exist_ok=True)
    if fmt == 3:
        _json(os.path.join(path, "zarr.json"),
              {"zarr_format": 3, "node_type": "group", "attributes": dict(attrs)})
    else:
        _json(os.path.join(path, ".zgroup"), {"zarr_format": 2})
        _json(os.path.join(path, ".zattrs"), dict(attrs))


def _vlen_utf8(values: Sequence[str]) -> bytes:
    """The ``vlen-utf8`` encoding: a count, then each string's length and bytes."""
    parts = [struct.pack("<I", len(values))]
    for value in values:
        data = value.encode("utf-8")
        parts += [struct.pack("<I", len(data)), data]
    return b"".join(parts)


def _array(path: str, fmt: int, values: np.ndarray[Any, Any] | Sequence[str],
           attrs: Mapping[str, Any]) -> None:
    """A one-chunk, uncompressed zarr array (numbers, or ``vlen-utf8`` strings)."""
    if isinstance(values, np.ndarray):
        text, shape, dtype = False, list(values.shape), values.dtype.str
        data = np.ascontiguousarray(values).tobytes()
    else:
        text, shape, dtype = True, [len(values)], "|O"
        data = _vlen_utf8(values)
    chunks = [max(n, 1) for n in shape]
    os.makedirs(path, exist_ok=True)
    if fmt == 3:
        codecs = ([{"name": "vlen-utf8", "configuration": {}}] if text
                  else [{"name": "bytes", "configuration": {"endian": "little"}}])
        _json(os.path.join(path, "zarr.json"), {
            "zarr_format": 3, "node_type": "array", "shape": shape,
            "data_type": "string" if text else _V3_TYPES[dtype],
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": "" if text else 0, "codecs": codecs, "attributes": dict(attrs)})
        key = os.path.join("c", *["0"] * len(shape))
    else:
        _json(os.path.join(path, ".zarray"), {
            "zarr_format": 2, "shape": shape, "chunks": chunks,
            "dtype": dtype,
            "fill_value": "" if text else 0, "order": "C",
            "filters": [{"id": "vlen-utf8"}] if text else None,
            "dimension_separator": ".", "compressor": None})
        _json(os.path.join(path, ".zattrs"), dict(attrs))
        key = ".".join(["0"] * len(shape))
    if all(shape):
        os.makedirs(os.path.dirname(os.path.join(path, key)), exist_ok=True)
        with open(os.path.join(path, key), "wb") as fh:
            fh.write(data)


def _dataframe(path: str, fmt: int, index: Sequence[str],
               columns: Mapping[str, np.ndarray[Any, Any] | list[str]]) -> None:
    """An AnnData dataframe group: ``_index`` and the columns (numbers or strings)."""
    _group(path, fmt, {"_index": "_index", "column-order": list(columns),
                       **_encoding("dataframe", "0.2.0")})
    _array(os.path.join(path, "_index"), fmt, list(index), _encoding("string-array", "0.2.0"))
    for column, values in columns.items():
        kind = "array" if isinstance(values, np.ndarray) else "string-array"
        _array(os.path.join(path, column), fmt, values, _encoding(kind, "0.2.0"))


def _read_attrs(path: str, fmt: int) -> dict[str, Any]:
    """A group's attributes ({} where it has none yet)."""
    name = "zarr.json" if fmt == 3 else ".zattrs"
    try:
        with open(os.path.join(path, name), encoding="utf-8") as fh:
            doc: dict[str, Any] = json.load(fh)
    except FileNotFoundError:
        return {}
    return dict(doc.get("attributes", {})) if fmt == 3 else doc


def write_table(field: str, name: str, rows: Sequence[Mapping[str, Any]], *,
                region: str | None = None, keys: Sequence[str] = ()) -> None:
    """Write ``rows`` as table ``name`` of the image group at path ``field`` (zarr v2 or
    v3, as the group is), replacing a table of that name.

    ``keys``: the columns that identify a row (the pattern's fields), kept as text in
    ``obs`` even where they look numeric; ``region``: the label image a table with a
    ``label`` column describes (a feature table), else None. The table is written beside
    its place and renamed into it, so a reader never meets half of one.
    """
    fmt = _zarr_format(field)
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    feature = region is not None and "label" in columns
    measured = [c for c in columns if c not in keys and c != "label"
                and all(_number(r.get(c)) is not None for r in rows)]
    text = [c for c in columns if c not in measured and c != "label"]
    obs: dict[str, np.ndarray[Any, Any] | list[str]] = {
        c: ["" if r.get(c) is None else str(r[c]) for r in rows] for c in text}
    if feature:
        obs["label"] = np.array([int(float(r["label"])) for r in rows], "<i8")
        index = [str(v) for v in obs["label"]]
    else:
        index = [str(i) for i in range(len(rows))]
    tables = os.path.join(field, "tables")
    final, staging = os.path.join(tables, name), os.path.join(tables, f".{name}.writing")
    shutil.rmtree(staging, ignore_errors=True)
    kind = ({"type": "feature_table", "region": {"path": f"../labels/{region}"},
             "instance_key": "label"} if feature else {})
    _group(staging, fmt, {**_encoding("anndata", "0.1.0"),
                          "fractal_table_version": TABLE_VERSION, **kind})
    x = np.array([[_number(r.get(c)) for c in measured] for r in rows], "<f4")
    _array(os.path.join(staging, "X"), fmt, x.reshape(len(rows), len(measured)),
           _encoding("array", "0.2.0"))
    _dataframe(os.path.join(staging, "obs"), fmt, index, obs)
    _dataframe(os.path.join(staging, "var"), fmt, measured, {})
    shutil.rmtree(final, ignore_errors=True)
    os.rename(staging, final)
    listed = [str(n) for n in _read_attrs(tables, fmt).get("tables", [])]
    _group(tables, fmt, {"tables": listed + ([name] if name not in listed else [])})


def table_names(field: str) -> list[str]:
    """The tables the image group at path ``field`` lists."""
    tables = os.path.join(field, "tables")
    return [str(n) for n in _read_attrs(tables, _zarr_format(field)).get("tables", [])]
