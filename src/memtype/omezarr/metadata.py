"""The OME-Zarr metadata documents: what a plate, a well and an image say, in 0.4 and 0.5.

Layout of a plate (``root`` is the plate)::

    root/zarr.json                  group; attributes.ome = {version, plate: {rows, columns, wells}}
    root/A/zarr.json                row group (plain)
    root/A/1/zarr.json              well group; attributes.ome = {version, well: {images}}
    root/A/1/0/zarr.json            field (image) group; attributes.ome = {version, multiscales}
    root/A/1/0/0/zarr.json          level-0 array, chunks under root/A/1/0/0/c/...
    root/.memtype-locks/            lock files (ignored by zarr and OME readers)

That is OME-Zarr 0.5 (zarr v3); in 0.4 (zarr v2) each ``zarr.json`` is a ``.zgroup`` and a
``.zattrs`` (see :mod:`memtype.omezarr.layout`, which reads and writes the attributes for both).
This module builds the documents memtype writes (pure functions, no file touched); the plate
keeps them in step under locks (:mod:`memtype.omezarr.plate`), and plates written by others
are read, every value checked, by :mod:`memtype.omezarr.read`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memtype.errors import StoreFormatError
from memtype.omezarr.pyramid import datasets
from memtype.storage._formats import as_numpy
from memtype.storage.base import natural_key, natural_sorted

AXIS_TYPES = {"t": "time", "c": "channel", "z": "space", "y": "space", "x": "space"}
DEFAULT_AXES = {2: "yx", 3: "zyx", 4: "czyx", 5: "tczyx"}
SPACE_UNITS = ("angstrom", "attometer", "centimeter", "decimeter", "exameter", "femtometer",
               "foot", "gigameter", "hectometer", "inch", "kilometer", "megameter", "meter",
               "micrometer", "mile", "millimeter", "nanometer", "parsec", "petameter",
               "picometer", "terameter", "yard", "yoctometer", "yottameter", "zeptometer",
               "zettameter")
"""The units of a space axis the OME-NGFF specification allows (UDUNITS-2 names)."""
_PREFIXES = {"atto": 1e-18, "femto": 1e-15, "pico": 1e-12, "nano": 1e-9, "micro": 1e-6,
             "milli": 1e-3, "centi": 1e-2, "deci": 1e-1, "": 1.0, "hecto": 1e2, "kilo": 1e3,
             "mega": 1e6, "giga": 1e9, "tera": 1e12, "peta": 1e15, "exa": 1e18,
             "yocto": 1e-24, "zepto": 1e-21, "zetta": 1e21, "yotta": 1e24}
MICROMETRES = {**{f"{p}meter": f / 1e-6 for p, f in _PREFIXES.items()},
               "angstrom": 1e-4, "inch": 25_400.0, "foot": 304_800.0, "yard": 914_400.0,
               "mile": 1_609_344_000.0, "parsec": 3.0856775814913673e22}
"""Micrometres in one of each OME-NGFF space unit (every name of :data:`SPACE_UNITS`)."""


def shard_shape(shards: str | Sequence[int] | None, shape: tuple[int, ...],
                chunks: tuple[int, ...], key: str) -> tuple[int, ...] | None:
    """The shard shape of an array of ``shape`` stored in ``chunks`` (zarr v3 sharding):
    None (no sharding), ``"image"`` (one shard holds the whole array) or an explicit tuple
    (each a multiple of the chunk's side, cut to the array's size)."""
    if shards is None:
        return None
    if shards == "image":
        given: Sequence[int] = shape
    elif (not isinstance(shards, str) and len(shards) == len(shape)
          and all(type(s) is int and s > 0 and s % c == 0 for s, c in zip(shards, chunks))):
        given = shards
    else:
        raise StoreFormatError(
            f"Invalid shards {shards!r} for an array of shape {shape} in chunks {chunks} at "
            f"{key!r}: expected None, 'image' or {len(shape)} positive ints, each a multiple "
            "of the chunk's side.")
    return tuple(-(-min(max(g, 1), max(s, 1)) // c) * c for g, s, c in zip(given, shape, chunks))


def check_shards(shards: object, version: str) -> None:
    """StoreFormatError for sharding asked of an OME-Zarr 0.4 (zarr v2) plate."""
    if shards is not None and version != "0.5":
        raise StoreFormatError(
            f"shards={shards!r} asked of an OME-Zarr {version} plate: sharding is a zarr v3 "
            "codec, OME-Zarr 0.5 only (0.4 readers such as Fiji's and OMERO's cannot read "
            "shards); write 0.5, or leave shards=None.")


def chunk_shape(chunks: str | Sequence[int], shape: tuple[int, ...], key: str) -> tuple[int, ...]:
    """Chunk shape from ``"plane"``, ``"image"`` or an explicit tuple."""
    if chunks == "plane":
        return (1,) * (len(shape) - 2) + tuple(max(s, 1) for s in shape[-2:])
    if chunks == "image":
        return tuple(max(s, 1) for s in shape)
    if (not isinstance(chunks, str) and len(chunks) == len(shape)
            and all(isinstance(c, int) and c > 0 for c in chunks)):
        return tuple(chunks)
    raise StoreFormatError(
        f"Invalid chunks {chunks!r} for an array of shape {shape} at {key!r}: expected "
        f"'plane', 'image' or {len(shape)} positive ints."
    )


ZARR_DTYPES = frozenset({("b", 1), ("i", 1), ("i", 2), ("i", 4), ("i", 8), ("u", 1), ("u", 2),
                         ("u", 4), ("u", 8), ("f", 2), ("f", 4), ("f", 8), ("c", 8), ("c", 16)})
"""(kind, itemsize) of the numeric dtypes zarr v3 holds (no extended precision)."""


def as_image(data: Any, key: str) -> Any:
    """``data`` as a host NumPy array of a dtype zarr stores, else StoreFormatError
    (``np.longlong`` and the like are stored as their canonical ``int64``...: a view)."""
    a = as_numpy(data, key, "OME-Zarr")
    if (a.dtype.kind, a.dtype.itemsize) not in ZARR_DTYPES \
            or type(a.dtype).__module__ != "numpy.dtypes":
        raise StoreFormatError(
            f"Cannot save a {a.dtype} array to {key!r}: OME-Zarr images hold bool, int8 to "
            "int64, uint8 to uint64, float16 to float64, complex64 or complex128 data; "
            f"received {a.dtype}{_hint(a.dtype)}."
        )
    return a


def _hint(dtype: Any) -> str:
    """How to store an extended-precision array (cast it), or nothing."""
    if dtype.kind in "fc" and dtype.itemsize > (8 if dtype.kind == "f" else 16):
        return f" (cast it to {'float64' if dtype.kind == 'f' else 'complex128'} first)"
    return ""


def plate_doc(name: str, rows: Sequence[str], columns: Sequence[str],
              version: str) -> dict[str, Any]:
    """OME attributes of an empty plate with declared rows and columns.

    ``plate`` carries its own ``version``: 0.4 keeps it there, and the 0.5 specification
    requires it there too (ome-zarr-models warns without it), besides ``ome.version``.
    """
    plate = {"version": version, "name": name, "rows": [{"name": r} for r in rows],
             "columns": [{"name": c} for c in columns], "wells": []}
    return {"plate": plate}


def well_doc(images: Iterable[str]) -> dict[str, Any]:
    """OME attributes of a well holding the given image (field) paths."""
    return {"well": {"images": [{"path": p} for p in images]}}


def check_axes(axes: str | None, ndim: int, key: str) -> str:
    """Validated axes string for an ``ndim`` array (NGFF order t, c, z, y, x)."""
    if ndim not in DEFAULT_AXES:
        raise StoreFormatError(
            f"Cannot save a {ndim}D array to {key!r}: OME-Zarr images have 2 to 5 dimensions "
            "([T][C][Z] Y X)."
        )
    if axes is None:
        return DEFAULT_AXES[ndim]
    order = "tczyx"
    ok = (isinstance(axes, str) and len(axes) == ndim and axes.endswith("yx")
          and len(set(axes)) == ndim and all(a in order for a in axes)
          and [order.index(a) for a in axes] == sorted(order.index(a) for a in axes))
    if not ok:
        raise StoreFormatError(
            f"Invalid axes {axes!r} for a {ndim}D array at {key!r}: expected {ndim} distinct "
            "letters from 't', 'c', 'z', 'y', 'x' in that order, ending with 'yx' "
            f"(e.g. {DEFAULT_AXES[ndim]!r})."
        )
    return axes


def image_doc(axes: str, scale: Sequence[float] | None, unit: str | None,
              key: str, levels: int = 1, omero: dict[str, Any] | None = None) -> dict[str, Any]:
    """OME attributes of a field group: one multiscale, level k at path ``k``; channels."""
    scale = [1.0] * len(axes) if scale is None else [float(s) for s in scale]
    if len(scale) != len(axes) or any(not s > 0 for s in scale):
        raise StoreFormatError(
            f"Invalid scale {scale!r} for axes {axes!r} at {key!r}: expected {len(axes)} "
            "positive numbers."
        )
    if unit is not None and unit not in SPACE_UNITS:
        raise StoreFormatError(
            f"Invalid unit {unit!r} at {key!r}: expected an OME-NGFF space unit such as "
            f"'micrometer' or 'nanometer' (one of {', '.join(SPACE_UNITS)}).")
    axis_list: list[dict[str, str]] = []
    for a in axes:
        axis = {"name": a, "type": AXIS_TYPES[a]}
        if unit is not None and AXIS_TYPES[a] == "space":
            axis["unit"] = unit
        axis_list.append(axis)
    multiscale = {"name": key, "axes": axis_list, "datasets": datasets(scale, levels)}
    return {"multiscales": [multiscale], **({"omero": omero} if omero else {})}


def well_lock_name(well: str) -> str:
    """The name of one well's lock (``"A/1"``: ``well.A.1``)."""
    return "well." + well.replace("/", ".")


def plate_with_wells(plate: dict[str, Any], wells: set[str], version: str) -> dict[str, Any]:
    """``plate`` listing exactly ``wells`` in plate order; rows and columns extended as
    needed (rows in plate order: ``Z`` before ``AA``), ``version`` set. Linear in the wells:
    it runs whenever a well gets its first image."""
    rows = [r["name"] for r in plate.get("rows", [])]
    columns = [c["name"] for c in plate.get("columns", [])]
    parts = {well: well.split("/") for well in wells}
    new_rows = {row for row, _ in parts.values()} - set(rows)
    if new_rows:
        rows = sorted([*rows, *new_rows], key=lambda r: (len(r), natural_key(r)))
    new_columns = {column for _, column in parts.values()} - set(columns)
    if new_columns:
        columns = natural_sorted([*columns, *new_columns])
    row_index = {r: i for i, r in enumerate(rows)}
    column_index = {c: i for i, c in enumerate(columns)}
    entries = sorted(({"path": well, "rowIndex": row_index[row],
                       "columnIndex": column_index[column]}
                      for well, (row, column) in parts.items()),
                     key=lambda e: (e["rowIndex"], e["columnIndex"]))  # plate order
    return {**plate, "version": version, "rows": [{"name": r} for r in rows],
            "columns": [{"name": c} for c in columns], "wells": entries}
