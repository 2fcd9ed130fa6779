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
        layers/ obsm/ obsp/ varm/ varp/ uns/   empty (AnnData requires them)

A table with a ``label`` column and a label image to refer to is a ``feature_table``
(``region: {path: "../labels/<name>"}``, ``instance_key: "label"``, one row per object);
any other is a generic table (no ``type``), e.g. one row per channel of the field. The
layout is written with zarr directly, so writing needs no anndata; ``anndata.read_zarr``
and ngio read it (tests/test_storage_zarr_tables.py reads it back with anndata).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["write_table", "table_names", "TABLE_VERSION"]

TABLE_VERSION = "1"
"""The Fractal table specification version written."""
_EMPTY = ("layers", "obsm", "obsp", "varm", "varp", "uns")


def _encoding(kind: str, version: str) -> dict[str, str]:
    """AnnData's encoding attributes."""
    return {"encoding-type": kind, "encoding-version": version}


def _number(value: Any) -> float | None:
    """``value`` as a float (CSV cells are text), or None."""
    if isinstance(value, bool):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _strings(group: Any, name: str, values: Sequence[str]) -> None:
    """A string array of AnnData's ``string-array`` encoding."""
    array = group.create_array(name, shape=(len(values),), dtype=str)
    if values:
        array[...] = np.array(values, dtype=object)
    array.attrs.update(_encoding("string-array", "0.2.0"))


def _dataframe(group: Any, name: str, index: Sequence[str],
               columns: Mapping[str, np.ndarray[Any, Any] | list[str]]) -> None:
    """An AnnData dataframe group: ``_index`` and the columns (ints or strings)."""
    frame = group.create_group(name)
    _strings(frame, "_index", index)
    for column, values in columns.items():
        if isinstance(values, np.ndarray):
            frame.create_array(column, data=values).attrs.update(_encoding("array", "0.2.0"))
        else:
            _strings(frame, column, values)
    frame.attrs.update({"_index": "_index", "column-order": list(columns),
                        **_encoding("dataframe", "0.2.0")})


def write_table(field: Any, name: str, rows: Sequence[Mapping[str, Any]], *,
                region: str | None = None, keys: Sequence[str] = ()) -> None:
    """Write ``rows`` as table ``name`` of the image group ``field`` (a zarr Group),
    replacing a table of that name.

    ``keys``: the columns that identify a row (the pattern's fields), kept as text in
    ``obs`` even where they look numeric; ``region``: the label image a table with a
    ``label`` column describes (a feature table), else None.
    """
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    feature = region is not None and "label" in columns
    measured = [c for c in columns if c not in keys and c != "label"
                and all(_number(r.get(c)) is not None for r in rows)]
    text = [c for c in columns if c not in measured and c != "label"]
    tables = field.require_group("tables")
    if name in tables:
        del tables[name]
    table = tables.create_group(name)
    x = np.array([[_number(r.get(c)) for c in measured] for r in rows], np.float32)
    table.create_array("X", data=x.reshape(len(rows), len(measured))).attrs.update(
        _encoding("array", "0.2.0"))
    obs: dict[str, np.ndarray[Any, Any] | list[str]] = {
        c: ["" if r.get(c) is None else str(r[c]) for r in rows] for c in text}
    if feature:
        obs["label"] = np.array([int(float(r["label"])) for r in rows], np.int64)
        index = [str(v) for v in obs["label"]]
    else:
        index = [str(i) for i in range(len(rows))]
    _dataframe(table, "obs", index, obs)
    _dataframe(table, "var", measured, {})
    for group in _EMPTY:
        table.create_group(group).attrs.update(_encoding("dict", "0.1.0"))
    kind = ({"type": "feature_table", "region": {"path": f"../labels/{region}"},
             "instance_key": "label"} if feature else {})
    table.attrs.update({**_encoding("anndata", "0.1.0"),
                        "fractal_table_version": TABLE_VERSION, **kind})
    listed = [str(n) for n in tables.attrs.get("tables", [])]
    tables.attrs["tables"] = listed + ([name] if name not in listed else [])


def table_names(field: Any) -> list[str]:
    """The tables an image group (a zarr Group) lists."""
    if "tables" not in field:
        return []
    return [str(n) for n in field["tables"].attrs.get("tables", [])]
