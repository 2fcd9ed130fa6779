"""The plate overview picture: one PNG a scientist looks at first, for quality control.

Plate-shaped (rows x columns, empty wells drawn empty), one thumbnail per well (its first
field, from the lowest pyramid level: every channel in its own colour and display window, the
OME ``omero`` metadata the plate carries, Z projected by maximum), label outlines where the
run wrote labels, and beside it a heatmap of one number per well with its colour bar: by default the
``count`` a side-output table sums for the well (else the rows it holds for the well: its
objects); ``overview_column`` (``--overview-column``) chooses another column, its mean per
well. Wells whose group failed are marked failed (a red cross), not drawn as never imaged.
The size is bounded (about 1,200 x 500 pixels at 96 wells, 1,800 x 650 at 384) whatever the
images' size: only the lowest level of one field per well is read.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memtype import storage  # DiskStore: loaded on first use (storage's lazy names)
from memtype.errors import InvalidArgumentError
from memtype.pipeline.io.patterns import split_well
from memtype.storage import ZarrStore

__all__ = ["write_overview", "render_overview", "well_values", "check_overview_column"]

Rows = Sequence[Mapping[str, Any]]

_VIRIDIS = np.array([[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98],
                     [253, 231, 37]], dtype=np.float64)
_EMPTY = (40, 40, 40)
_BACKGROUND = (16, 16, 16)
_TEXT = (220, 220, 220)
_OUTLINE = np.array([255, 255, 0], dtype=np.float64)
_FAILED = np.array([200, 30, 30], dtype=np.float64)


def check_overview_column(value: object) -> str | None:
    """``value`` as an overview column (``"area"`` or ``"nuclei:area"``: a table's column),
    or None for the default.

    Raises
    ------
    InvalidArgumentError
        Not a non-empty str of a column, optionally after one ``table:`` (a ``ValueError``).
    """
    if value is None:
        return None
    parts = value.split(":") if isinstance(value, str) else []
    if not 1 <= len(parts) <= 2 or not all(p.strip() for p in parts):
        raise InvalidArgumentError(
            "overview_column must name a column of a side-output table, as 'column' or "
            f"'table:column' (e.g. 'nuclei:area'); received {value!r}.")
    return str(value)


def well_values(tables: Mapping[str, Rows], column: str | None = None
                ) -> tuple[str, dict[str, float]] | None:
    """What the heatmap shows: (its title, one number per plate well ``"B/3"``), or None.

    By default the first table with a well column: the sum of its ``count`` column over the
    well's sites (of the first channel where there is a channel column), else how many rows
    the well has (its objects). ``column`` (``"area"``, ``"nuclei:area"``): that column's
    mean per well, from the (named, else first) table holding it; a column no table holds
    is said in a warning and the default is shown, its title saying so.
    """
    if column is not None:
        table, _, name = column.rpartition(":")
        for title, rows in tables.items():
            if (not table or title == table) and _has_column(rows, name):
                return f"{title}: {name}, mean per well", _means(rows, name)
        found = sorted({c for rows in tables.values() for row in rows[:1] for c in row})
        warnings.warn(f"overview_column {column!r}: no side-output table has it (columns: "
                      f"{found}); the overview shows its default", UserWarning, stacklevel=2)
    for title, rows in tables.items():
        values = _default_values(title, rows)
        if values is not None:
            shown, numbers = values
            return (f"{shown} (no column {column!r})" if column else shown), numbers
    return None


def _has_column(rows: Rows, name: str) -> bool:
    """Whether every row has a well and a number in ``name``."""
    return bool(rows) and all("well" in r and _number(r.get(name)) is not None for r in rows)


def _well(row: Mapping[str, Any]) -> str:
    """A row's plate well, ``"B/3"``."""
    name, column = split_well(str(row["well"]))
    return f"{name}/{column}"


def _means(rows: Rows, name: str) -> dict[str, float]:
    """The mean of column ``name`` per well."""
    sums: dict[str, list[float]] = {}
    for row in rows:
        sums.setdefault(_well(row), []).append(_number(row[name]) or 0.0)
    return {well: float(np.mean(v)) for well, v in sums.items()}


def _default_values(name: str, rows: Rows) -> tuple[str, dict[str, float]] | None:
    """(what, one number per well) of a table with a well column, or None: the sum of its
    ``count`` over the well's sites (first channel), else its rows per well."""
    if not rows or any("well" not in row for row in rows):
        return None
    channel = rows[0].get("channel")
    use_count = all(_number(row.get("count")) is not None for row in rows)
    values: dict[str, float] = {}
    for row in rows:
        if use_count and row.get("channel") != channel:
            continue
        well = _well(row)
        values[well] = values.get(well, 0.0) + (_number(row["count"]) or 0.0 if use_count
                                                else 1.0)
    if use_count:
        return f"{name}: count" + (f", channel {channel}" if channel is not None else ""), values
    return f"{name}: rows per well", values


def _number(value: Any) -> float | None:
    """``value`` as a float (CSV cells are text), or None."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def write_overview(plate_path: str, png_path: str,
                   values: Mapping[str, float] | None = None, value_name: str = "",
                   failed: Mapping[str, str] | None = None) -> str:
    """Render the overview of the OME-Zarr plate at ``plate_path`` into ``png_path``.

    Parameters
    ----------
    plate_path : str
        An OME-Zarr plate (0.5 or 0.4) written by memtype.
    png_path : str
        Where the PNG goes (written atomically).
    values : mapping of str to float, optional
        One number per well (``"B/3"``) for the heatmap; no heatmap without it.
    value_name : str
        What the numbers are, written over the heatmap.
    failed : mapping of str to str, optional
        The wells (``"B/3"``) whose groups failed, with the error: marked failed.

    Returns
    -------
    str
        ``png_path``.
    """
    picture = render_overview(plate_path, values, value_name, failed)
    directory, name = os.path.split(os.path.abspath(png_path))
    storage.DiskStore(directory).save(picture, name, overwrite=True, parents=True)
    return png_path


def render_overview(plate_path: str, values: Mapping[str, float] | None = None,
                    value_name: str = "", failed: Mapping[str, str] | None = None
                    ) -> np.ndarray[Any, Any]:
    """The overview as an RGB ``uint8`` array (see :func:`write_overview`)."""
    plate = ZarrStore(plate_path, read_only=True)
    rows, columns, wells = _grid(plate)
    failed = dict(failed or {})
    tile = 96 if len(rows) * len(columns) <= 96 else 64 if len(rows) <= 16 else 40
    thumbnails = {well: _thumbnail(plate, well, tile) for well in wells}
    thumbnails.update({w: _failed_tile(tile) for w in failed if w not in thumbnails})
    title = "images" + (f" ({len(failed)} failed: red cross)" if failed else "")
    left = _plate_picture(rows, columns, tile, thumbnails, title)
    if not values:
        return left
    small = max(tile // 3, 12)
    heat = {**_heat_tiles(values, small), **{w: _failed_tile(small) for w in failed}}
    right = _plate_picture(rows, columns, small, heat, value_name)
    right = np.vstack([right, _colour_bar(right.shape[1], values)])
    height = max(left.shape[0], right.shape[0])
    out = np.full((height, left.shape[1] + right.shape[1] + 16, 3), _BACKGROUND, np.uint8)
    out[:left.shape[0], :left.shape[1]] = left
    out[:right.shape[0], left.shape[1] + 16:] = right
    return out


def _failed_tile(tile: int) -> np.ndarray[Any, Any]:
    """A failed well: a dark red tile with a cross."""
    out = np.broadcast_to(_FAILED / 255 * 0.35, (tile, tile, 3)).copy()
    i = np.arange(tile)
    out[i, i] = out[i, tile - 1 - i] = _FAILED / 255
    return out


def _colour_bar(width: int, values: Mapping[str, float]) -> np.ndarray[Any, Any]:
    """The heatmap's colour scale, low to high, with its two ends written under it."""
    from PIL import Image, ImageDraw

    margin, height = 22, 34
    bar = np.full((height, width, 3), _BACKGROUND, np.uint8)
    span = max(width - 2 * margin, 2)
    t = np.linspace(0.0, 1.0, span) * (len(_VIRIDIS) - 1)
    i = np.minimum(t.astype(int), len(_VIRIDIS) - 2)
    colours = _VIRIDIS[i] + (_VIRIDIS[i + 1] - _VIRIDIS[i]) * (t - i)[:, None]
    bar[4:14, margin:margin + span] = np.round(colours).astype(np.uint8)[None]
    numbers = [float(v) for v in values.values()]
    image = Image.fromarray(bar)
    draw = ImageDraw.Draw(image)
    draw.text((margin, 18), f"{min(numbers):g}", fill=_TEXT)
    high = f"{max(numbers):g}"
    draw.text((margin + span - 6 * len(high), 18), high, fill=_TEXT)
    return np.asarray(image)


def _grid(plate: Any) -> tuple[list[str], list[str], list[str]]:
    """(row names, column names, wells "B/3") the plate's metadata declares."""
    meta = plate.plate_metadata()
    rows = [r["name"] for r in meta.get("rows", [])]
    columns = [c["name"] for c in meta.get("columns", [])]
    return rows, columns, [w["path"] for w in meta.get("wells", [])]


def _thumbnail(plate: Any, well: str, tile: int) -> np.ndarray[Any, Any] | None:
    """The well's first field as an RGB float image at most ``tile`` pixels a side."""
    fields = plate.list_files(well)
    if not fields:
        return None
    field = fields[0]
    ome = plate.image_metadata(field)
    levels = len(ome["multiscales"][0]["datasets"])
    axes = "".join(a["name"] for a in ome["multiscales"][0]["axes"])
    image = np.asarray(plate.load(field, resolution=levels - 1), dtype=np.float64)
    planes = _channels_yx(image, axes)
    step = max(1, -(-max(planes.shape[-2:]) // tile))
    planes = planes[:, ::step, ::step]
    rgb = np.zeros(planes.shape[1:] + (3,))
    channels = ome.get("omero", {}).get("channels", [])
    for c, plane in enumerate(planes):
        info = channels[c] if c < len(channels) else {}
        window = info.get("window", {})
        start = float(window.get("start", plane.min()))
        end = float(window.get("end", plane.max()))
        scaled = np.clip((plane - start) / (end - start if end > start else 1.0), 0, 1)
        rgb += scaled[..., None] * _color(str(info.get("color", "FFFFFF")))
    for name in plate.list_labels(field):
        labels = plate.load_labels(field, name, resolution=levels - 1)
        ids = _channels_yx(np.asarray(labels), axes.replace("c", ""))[0][::step, ::step]
        rgb[_edges(ids)] = _OUTLINE / 255
    grow = tile // max(rgb.shape[:2])
    if grow > 1:  # a small lowest level fills its tile (nearest: outlines stay sharp)
        rgb = rgb.repeat(grow, axis=0).repeat(grow, axis=1)
    return np.clip(rgb, 0, 1)


def _channels_yx(image: np.ndarray[Any, Any], axes: str) -> np.ndarray[Any, Any]:
    """``[C, Y, X]`` of an image: the first time point, Z projected by maximum."""
    if "t" in axes:
        image = np.take(image, 0, axis=axes.index("t"))
        axes = axes.replace("t", "")
    if "z" in axes:
        image = image.max(axis=axes.index("z"))
        axes = axes.replace("z", "")
    return image if "c" in axes else image[None]


def _edges(ids: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Pixels of an object whose right or lower neighbour has another id."""
    edge = np.zeros(ids.shape, bool)
    edge[:, :-1] |= ids[:, :-1] != ids[:, 1:]
    edge[:-1, :] |= ids[:-1, :] != ids[1:, :]
    inside: np.ndarray[Any, Any] = edge & (ids != 0)
    return inside


def _color(hex_color: str) -> np.ndarray[Any, Any]:
    """An ``RRGGBB`` colour as three floats in [0, 1]."""
    try:
        rgb: np.ndarray[Any, Any] = np.array([int(hex_color[i:i + 2], 16) for i in (0, 2, 4)])
    except ValueError:
        return np.ones(3)
    scaled: np.ndarray[Any, Any] = rgb / 255
    return scaled


def _heat_tiles(values: Mapping[str, float], tile: int) -> dict[str, np.ndarray[Any, Any]]:
    """One flat tile per well, coloured by its value (viridis, low to high)."""
    numbers = np.array(list(values.values()), dtype=np.float64)
    low, high = float(numbers.min()), float(numbers.max())
    out = {}
    for well, value in values.items():
        t = (float(value) - low) / (high - low) if high > low else 0.5
        position = t * (len(_VIRIDIS) - 1)
        i = min(int(position), len(_VIRIDIS) - 2)
        color = _VIRIDIS[i] + (_VIRIDIS[i + 1] - _VIRIDIS[i]) * (position - i)
        out[well] = np.broadcast_to(color / 255, (tile, tile, 3))
    return out


def _plate_picture(rows: Sequence[str], columns: Sequence[str], tile: int,
                   tiles: Mapping[str, np.ndarray[Any, Any] | None], title: str
                   ) -> np.ndarray[Any, Any]:
    """Tiles on a plate grid with row and column names and a title."""
    from PIL import Image, ImageDraw

    gap, margin, top = 2, 22, 34
    width = margin + len(columns) * (tile + gap)
    height = top + len(rows) * (tile + gap)
    canvas = np.full((height, width, 3), _BACKGROUND, np.uint8)
    for r, row in enumerate(rows):
        for c, column in enumerate(columns):
            y, x = top + r * (tile + gap), margin + c * (tile + gap)
            canvas[y:y + tile, x:x + tile] = _EMPTY
            picture = tiles.get(f"{row}/{column}")
            if picture is not None:
                h, w = picture.shape[:2]
                oy, ox = (tile - h) // 2, (tile - w) // 2
                canvas[y + oy:y + oy + h, x + ox:x + ox + w] = np.round(picture * 255)
    image = Image.fromarray(canvas)
    draw = ImageDraw.Draw(image)
    draw.text((margin, 4), title, fill=_TEXT)
    for r, row in enumerate(rows):
        draw.text((4, top + r * (tile + gap) + tile // 2 - 5), row, fill=_TEXT)
    for c, column in enumerate(columns):
        draw.text((margin + c * (tile + gap) + tile // 2 - 5, top - 12), column, fill=_TEXT)
    return np.asarray(image)
