"""Multiscale pyramids and channel names for OME-Zarr fields.

Level ``k`` halves Y and X ``k`` times (the other axes are kept), so a viewer can show a
whole plate without reading every full-resolution pixel. Two ways to halve:

* ``"mean"`` (intensity images): the mean of each 2 x 2 block, computed in float64 and
  rounded back to the image's dtype (an odd edge row or column is averaged with itself);
* ``"nearest"`` (label images, masks): every other pixel, so no new values appear.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from memtype.errors import StoreFormatError

__all__ = ["DOWNSAMPLING", "check_levels", "pyramid", "datasets", "omero"]

DOWNSAMPLING = ("mean", "nearest")
_COLORS = ("00FF00", "FF00FF", "00FFFF", "FFFF00", "FF0000", "0000FF", "FFFFFF")
_HEX = re.compile(r"[0-9A-Fa-f]{6}")
_DYES = ((frozenset({"dapi", "hoechst", "bfp"}), "0000FF"),
         (frozenset({"gfp", "egfp", "fitc", "af488", "alexa488", "488"}), "00FF00"),
         (frozenset({"rfp", "mcherry", "tritc", "cy3", "af568", "alexa568", "594"}), "FF0000"),
         (frozenset({"cy5", "af647", "alexa647", "647"}), "FF00FF"))
"""Stains named in a channel name, and the colour viewers conventionally give them."""
_SAMPLE = 256
_PERCENTILES = (0.1, 99.9)


def check_levels(levels: object, downsample: object, shape: tuple[int, ...], key: str) -> int:
    """``levels`` as an int, after checking it and ``downsample`` against ``shape``."""
    if downsample not in DOWNSAMPLING:
        raise StoreFormatError(
            f"Invalid downsample {downsample!r} at {key!r}: expected one of "
            f"{', '.join(DOWNSAMPLING)}.")
    smallest = min(shape[-2:])
    most = max(int(smallest).bit_length(), 1)  # halvings until a side reaches one pixel
    if isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= most:
        raise StoreFormatError(
            f"Invalid pyramid_levels {levels!r} for an image of shape {shape} at {key!r}: "
            f"expected an int from 1 to {most} (each level halves Y and X).")
    return levels


def _halve_mean(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """2 x 2 block means of ``a``'s last two axes, plane by plane (bounded memory)."""
    y, x = a.shape[-2:]
    out = np.empty(a.shape[:-2] + ((y + 1) // 2, (x + 1) // 2), dtype=a.dtype)
    work_dtype = np.complex128 if a.dtype.kind == "c" else np.float64
    for index in np.ndindex(*a.shape[:-2]):
        plane = np.pad(a[index].astype(work_dtype), [(0, y % 2), (0, x % 2)], mode="edge")
        mean = plane.reshape(plane.shape[0] // 2, 2, plane.shape[1] // 2, 2).mean(axis=(1, 3))
        out[index] = _back_to(mean, a.dtype)
    return out


def _back_to(mean: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """Block means in the image's dtype: rounded (integers), majority (bool)."""
    if dtype.kind == "b":
        majority: np.ndarray[Any, Any] = mean >= 0.5
        return majority
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        rounded: np.ndarray[Any, Any] = np.clip(np.rint(mean), info.min, info.max)
        return rounded.astype(dtype)
    return mean.astype(dtype)


def pyramid(a: np.ndarray[Any, Any], levels: int, downsample: str) -> list[np.ndarray[Any, Any]]:
    """``a`` and its ``levels - 1`` halvings."""
    out = [a]
    for _ in range(levels - 1):
        prev = out[-1]
        out.append(prev[..., ::2, ::2] if downsample == "nearest" else _halve_mean(prev))
    return out


def datasets(scale: Sequence[float], levels: int) -> list[dict[str, Any]]:
    """The ``datasets`` of a multiscale: level k at path ``k``, Y and X scale times 2**k."""
    out = []
    for k in range(levels):
        level_scale = list(scale[:-2]) + [s * 2**k for s in scale[-2:]]
        out.append({"path": str(k),
                    "coordinateTransformations": [{"type": "scale", "scale": level_scale}]})
    return out


def omero(names: Sequence[str] | None, colors: Sequence[str] | None,
          levels: Sequence[np.ndarray[Any, Any]], axes: str, key: str) -> dict[str, Any]:
    """The ``omero`` block: per channel a name, a colour and a display window.

    The window of each channel spans robust percentiles (0.1 and 99.9) of that channel in
    the lowest-resolution level, sampled at most ``_SAMPLE`` pixels a side (a bounded cost
    whatever the image size); ``min``/``max`` are the dtype's range (integers) or the
    sample's (floats). Viewers (napari, OMERO, Fiji) open each channel with its window, so a
    dim channel is not shown black beside a bright one.
    """
    count = levels[0].shape[axes.index("c")] if "c" in axes else 1
    labels = _channel_strings(names, count, "channel_names", axes, key)
    hexes = _channel_strings(colors, count, "channel_colors", axes, key)
    if hexes is not None and not all(_HEX.fullmatch(c) for c in hexes):
        raise StoreFormatError(
            f"Invalid channel_colors {colors!r} at {key!r}: expected {count} colours as 6 hex "
            "digits, RRGGBB (e.g. '00FF00').")
    palette = ("FFFFFF",) if count == 1 else _COLORS
    channels = [{"label": labels[i] if labels else f"channel {i}",
                 "color": hexes[i] if hexes else _dye_color(labels[i] if labels else "")
                 or palette[i % len(palette)],
                 "active": True, "coefficient": 1.0, "family": "linear", "inverted": False,
                 "window": _window(_channel(levels[-1], axes, i))} for i in range(count)]
    return {"channels": channels, "rdefs": {"model": "color", "defaultT": 0, "defaultZ": 0}}


def _dye_color(name: str) -> str | None:
    """The conventional colour of a stain a channel name mentions (``"DAPI"``: blue)."""
    words = set(re.split(r"[^a-z0-9]+", name.lower()))
    return next((color for dyes, color in _DYES if words & dyes), None)


def _channel_strings(values: Sequence[str] | None, count: int, name: str, axes: str,
                     key: str) -> list[str] | None:
    """``values`` checked to be ``count`` strings (one per channel), or None."""
    if values is None:
        return None
    if "c" not in axes and name == "channel_names":
        raise StoreFormatError(
            f"channel_names given for axes {axes!r} at {key!r}: the image has no 'c' axis.")
    if isinstance(values, str) or len(values) != count or not all(
            isinstance(v, str) for v in values):
        raise StoreFormatError(
            f"Invalid {name} {values!r} at {key!r}: expected {count} strings, one per "
            "channel.")
    return list(values)


def _channel(a: np.ndarray[Any, Any], axes: str, i: int) -> np.ndarray[Any, Any]:
    """Channel ``i`` of ``a`` (all of it without a ``c`` axis), a strided sample of at most
    ``_SAMPLE`` pixels a side (a view)."""
    plane = a[(slice(None),) * axes.index("c") + (i,)] if "c" in axes else a
    step_y = max(1, -(-plane.shape[-2] // _SAMPLE))
    step_x = max(1, -(-plane.shape[-1] // _SAMPLE))
    sample: np.ndarray[Any, Any] = plane[..., ::step_y, ::step_x]
    return sample


def _window(sample: np.ndarray[Any, Any]) -> dict[str, float]:
    """An omero display window: robust percentiles of the sample within the value range."""
    if sample.dtype.kind in "iu":
        info = np.iinfo(sample.dtype)
        low, high = float(info.min), float(info.max)
    elif sample.dtype.kind == "b":
        low, high = 0.0, 1.0
    else:
        finite = sample[np.isfinite(sample)] if sample.dtype.kind == "f" else sample.real
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if not sample.size or sample.dtype.kind not in "iuf":
        return {"min": low, "max": high, "start": low, "end": high}
    values = sample[np.isfinite(sample)] if sample.dtype.kind == "f" else sample
    if not values.size:
        return {"min": low, "max": high, "start": low, "end": high}
    start, end = (float(v) for v in np.percentile(values, _PERCENTILES))
    if end <= start:
        start, end = float(values.min()), float(values.max())
        end = end if end > start else start + 1.0
    return {"min": min(low, start), "max": max(high, end), "start": start, "end": end}
