"""The plate overview picture: one PNG a scientist looks at first, for quality control.

Plate-shaped (rows x columns, empty wells drawn empty), one thumbnail per well (its first
field, from the lowest pyramid level: every channel in its own colour and display window, the
OME ``omero`` metadata the plate carries, Z projected by maximum), label outlines where the
run wrote labels, and beside it a heatmap of one number per well (the rows a side-output table
holds for the well: its object count), with its range. The size is bounded (about 1,200 x 500
pixels at 96 wells, 1,800 x 650 at 384) whatever the images' size: only the lowest level of
one field per well is read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["write_overview", "render_overview"]

_VIRIDIS = np.array([[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98],
                     [253, 231, 37]], dtype=np.float64)
_EMPTY = (40, 40, 40)
_BACKGROUND = (16, 16, 16)
_TEXT = (220, 220, 220)
_OUTLINE = np.array([255, 255, 0], dtype=np.float64)


def write_overview(plate_path: str, png_path: str,
                   values: Mapping[str, float] | None = None, value_name: str = "") -> str:
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

    Returns
    -------
    str
        ``png_path``.
    """
    from memtype.storage import DiskStore

    picture = render_overview(plate_path, values, value_name)
    directory, name = os.path.split(os.path.abspath(png_path))
    DiskStore(directory).save(picture, name, overwrite=True, parents=True)
    return png_path


def render_overview(plate_path: str, values: Mapping[str, float] | None = None,
                    value_name: str = "") -> np.ndarray[Any, Any]:
    """The overview as an RGB ``uint8`` array (see :func:`write_overview`)."""
    from memtype.storage import ZarrStore

    plate = ZarrStore(plate_path, read_only=True)
    rows, columns, wells = _grid(plate)
    tile = 96 if len(rows) * len(columns) <= 96 else 64 if len(rows) <= 16 else 40
    thumbnails = {well: _thumbnail(plate, well, tile) for well in wells}
    left = _plate_picture(rows, columns, tile, thumbnails, "images")
    if not values:
        return left
    right = _plate_picture(rows, columns, max(tile // 3, 12), _heat_tiles(values, tile // 3),
                           f"{value_name} ({_span(values)})")
    height = max(left.shape[0], right.shape[0])
    out = np.full((height, left.shape[1] + right.shape[1] + 16, 3), _BACKGROUND, np.uint8)
    out[:left.shape[0], :left.shape[1]] = left
    out[:right.shape[0], left.shape[1] + 16:] = right
    return out


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


def _span(values: Mapping[str, float]) -> str:
    """``min-max`` of the heatmap's values."""
    numbers = [float(v) for v in values.values()]
    return f"{min(numbers):g}-{max(numbers):g}"


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
