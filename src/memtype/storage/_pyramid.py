"""Multiscale pyramids and channel names for OME-Zarr fields.

Level ``k`` halves Y and X ``k`` times (the other axes are kept), so a viewer can show a
whole plate without reading every full-resolution pixel. Two ways to halve:

* ``"mean"`` (intensity images): the mean of each 2 x 2 block, computed in float64 and
  rounded back to the image's dtype (an odd edge row or column is averaged with itself);
* ``"nearest"`` (label images, masks): every other pixel, so no new values appear.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memtype.errors import StoreFormatError

__all__ = ["DOWNSAMPLING", "check_levels", "pyramid", "datasets", "omero"]

DOWNSAMPLING = ("mean", "nearest")
_COLORS = ("FFFFFF", "00FF00", "FF00FF", "00FFFF", "FFFF00", "FF0000", "0000FF")


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


def omero(names: Sequence[str], a: np.ndarray[Any, Any], axes: str, key: str) -> dict[str, Any]:
    """The ``omero`` block naming the channels (napari and OMERO show these names)."""
    if "c" not in axes:
        raise StoreFormatError(
            f"channel_names given for axes {axes!r} at {key!r}: the image has no 'c' axis.")
    count = a.shape[axes.index("c")]
    if isinstance(names, str) or len(names) != count or not all(
            isinstance(n, str) for n in names):
        raise StoreFormatError(
            f"Invalid channel_names {names!r} at {key!r}: expected {count} strings, one per "
            "channel.")
    low, high = (float(a.min()), float(a.max())) if a.size and a.dtype.kind in "iuf" else (0, 1)
    window = {"min": low, "max": high, "start": low, "end": high}
    channels = [{"label": name, "color": _COLORS[i % len(_COLORS)], "active": True,
                 "window": window} for i, name in enumerate(names)]
    return {"channels": channels, "rdefs": {"model": "color"}}
