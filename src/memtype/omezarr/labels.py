"""OME-Zarr labels: segmentations (integer object ids) stored beside the image they label.

Layout, in both OME-Zarr versions (``<field>`` is ``row/column/field``)::

    <field>/labels/                 group; OME attributes {labels: [names]}
    <field>/labels/<name>/          a multiscale image: the image's axes without ``c``, the
                                    image's levels and scales, downsampled by nearest
                                    neighbour (an id stays an id); OME attributes
                                    {multiscales, image-label: {colors, source}}

``image-label.source.image`` is ``"../../"`` (the field), ``colors`` give each id a distinct
colour (id 0, the background, transparent). A label image is written into a hidden
temporary and renamed into place under its well's lock, like a field.
"""

from __future__ import annotations

import colorsys
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memtype.errors import StoreExistsError, StoreFormatError, StoreNotFoundError
from memtype.omezarr import metadata as _metadata
from memtype.omezarr import pyramid as _pyramid
from memtype.omezarr import write as _write
from memtype.omezarr.paths import PlatePaths, group_at, remove_at, rename_at
from memtype.storage._atomic import temp_name

__all__ = ["check_label_name", "save", "names", "MAX_COLORS"]

MAX_COLORS = 4096
"""Above this many ids no colours are written (viewers choose their own)."""
_LABEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_GOLDEN = 0.618033988749895


def check_label_name(name: object, key: str) -> str:
    """``name`` checked: letters, digits, ``_ . -``, not starting with a dot."""
    if not isinstance(name, str) or not _LABEL_NAME.fullmatch(name):
        raise StoreFormatError(
            f"Invalid label name {name!r} for {key!r}: expected letters, digits, '_', '.' or "
            "'-', starting with a letter or digit (e.g. 'nuclei').")
    return name


def names(paths: PlatePaths, key: str) -> list[str]:
    """The label names the field ``key`` lists ([] without a labels group)."""
    if not paths.exists(f"{key}/labels"):
        return []
    listed = paths.layout.read_ome(paths, f"{key}/labels").get("labels", [])
    return [str(n) for n in listed]


def save(paths: PlatePaths, key: str, name: str, data: Any, *, overwrite: bool,
         colors: Mapping[int, Sequence[int]] | None, chunks: str | Sequence[int] | None,
         codec: str, level: int | None, fsync: bool,
         shards: str | Sequence[int] | None = None) -> None:
    """Write label image ``name`` of the existing field ``key`` (see the module docstring)."""
    a = _metadata.as_image(data, key)
    if a.dtype.kind not in "iu":
        raise StoreFormatError(
            f"Cannot save a {a.dtype} array as labels {name!r} of {key!r}: labels are integer "
            f"object ids; received {a.dtype}.")
    multiscale, image_shape = _image(paths, key)
    axes = "".join(ax["name"] for ax in multiscale["axes"])
    keep = [i for i, ax in enumerate(axes) if ax != "c"]
    expected = tuple(image_shape[i] for i in keep)
    if a.shape != expected:
        raise StoreFormatError(
            f"Labels {name!r} of {key!r} have shape {a.shape}; expected {expected}: the image's "
            f"shape {image_shape} (axes {axes!r}) without its channel axis.")
    label_axes = "".join(axes[i] for i in keep)
    levels = _pyramid.pyramid(a, len(multiscale["datasets"]), "nearest")
    doc = _label_doc(name, multiscale, keep, colors, levels[0])
    shape = _metadata.chunk_shape("plane" if chunks is None else chunks, a.shape, key)
    well = key.rsplit("/", 1)[0]
    group = f"{key}/labels"
    paths.layout.create_group(paths, group, {"labels": []}, fsync=fsync)
    tmp = f"{group}/{temp_name('', name)}"
    try:
        _write.write_image(paths, tmp, levels, label_axes, doc, shape, codec, level, shards)
        with paths.lock(_metadata.well_lock_name(well)):
            _commit(paths, group, tmp, name, overwrite, fsync)
    except BaseException as error:  # the half-written labels go; the error stays first
        _write.discard_temporary(paths, tmp, error)
        raise


def _image(paths: PlatePaths, key: str) -> tuple[dict[str, Any], tuple[int, ...]]:
    """(multiscale metadata, level-0 shape) of the field ``key``."""
    if not paths.exists(key):
        raise StoreNotFoundError(f"No field at {key!r} in the plate {paths.root!r}; labels are "
                                 "saved beside an image: save the image first.")
    with paths.metadata(key):
        multiscale = paths.layout.read_ome(paths, key)["multiscales"][0]
        shape, _ = paths.layout.array_header(paths, f"{key}/{multiscale['datasets'][0]['path']}")
    return multiscale, shape


def _label_doc(name: str, multiscale: dict[str, Any], keep: list[int],
               colors: Mapping[int, Sequence[int]] | None,
               a: np.ndarray[Any, Any]) -> dict[str, Any]:
    """The OME attributes of a label image: the image's scales without ``c``, colours."""
    datasets = [{"path": d["path"], "coordinateTransformations": [
        {"type": "scale", "scale": [d["coordinateTransformations"][0]["scale"][i] for i in keep]}]}
        for d in multiscale["datasets"]]
    label_axes = [multiscale["axes"][i] for i in keep]
    label: dict[str, Any] = {"source": {"image": "../../"}}
    rgba = _colors(a) if colors is None else _given(colors)
    if rgba:
        label["colors"] = [{"label-value": int(i), "rgba": list(c)} for i, c in rgba.items()]
    return {"multiscales": [{"name": name, "axes": label_axes,
                             "datasets": datasets}], "image-label": label}


def _colors(a: np.ndarray[Any, Any]) -> dict[int, tuple[int, int, int, int]]:
    """A distinct colour per id present (golden-ratio hues; 0 transparent); {} past
    :data:`MAX_COLORS` ids."""
    ids = _ids(a)
    if len(ids) > MAX_COLORS:
        return {}
    out: dict[int, tuple[int, int, int, int]] = {}
    for i in ids:
        if i == 0:
            out[0] = (0, 0, 0, 0)
            continue
        r, g, b = colorsys.hsv_to_rgb((i * _GOLDEN) % 1.0, 0.75, 1.0)
        out[int(i)] = (round(r * 255), round(g * 255), round(b * 255), 255)
    return out


def _ids(a: np.ndarray[Any, Any]) -> list[int]:
    """The distinct ids in ``a``: a count of each value where ids are small and
    non-negative (linear time), else a sort."""
    if a.size and a.dtype.kind in "iu" and int(a.min()) >= 0 and int(a.max()) < (1 << 22):
        return [int(i) for i in np.flatnonzero(np.bincount(a.ravel()))]
    return [int(i) for i in np.unique(a)]


def _given(colors: Mapping[int, Sequence[int]]) -> dict[int, tuple[int, int, int, int]]:
    """Colours given as ``{id: (r, g, b[, a])}``, checked (0-255)."""
    out: dict[int, tuple[int, int, int, int]] = {}
    for i, c in colors.items():
        values = list(c) if not isinstance(c, str) else []
        if isinstance(i, bool) or not isinstance(i, int | np.integer) or len(values) not in (3, 4) \
                or not all(isinstance(v, int | np.integer) and 0 <= v <= 255 for v in values):
            raise StoreFormatError(
                f"Invalid label colour {i!r}: {c!r}; expected {{id: (r, g, b) or (r, g, b, a)}} "
                "with ints from 0 to 255.")
        r, g, b, alpha = [*[int(v) for v in values], 255][:4]
        out[int(i)] = (r, g, b, alpha)
    return out


def _commit(paths: PlatePaths, group: str, tmp: str, name: str, overwrite: bool,
            fsync: bool) -> None:
    """Rename a finished label image into place and list it (the caller holds the well
    lock)."""
    with paths.directory(group) as fd:
        present = group_at(fd, name, paths.layout.marker)
        if present and not overwrite:
            raise StoreExistsError(f"Labels {name!r} of {group.rsplit('/', 1)[0]!r} already "
                                   "exist; pass overwrite=True to replace them.")
        if present is not None:
            remove_at(None if isinstance(fd, str) else fd,
                      name if not isinstance(fd, str) else f"{fd}/{name}")
        rename_at(fd, tmp.rsplit("/", 1)[1], name)
    ome = paths.layout.read_ome(paths, group)
    listed = [str(n) for n in ome.get("labels", [])]
    if name not in listed:
        paths.layout.write_ome(paths, group, {**ome, "labels": [*listed, name]}, fsync=fsync)
