"""File formats of the DiskStore, chosen by extension (case-insensitive).

=========  ==============================================================================
extension  what it holds
=========  ==============================================================================
.npy       any array with a built-in NumPy dtype (not object; bfloat16 not supported)
.tif/.tiff 2D [Y, X] to 5D [T, C, Z, Y, X] arrays (tifffile), with their axes (``axes``
           option, default YX, ZYX, CZYX, TCZYX): an ImageJ hyperstack for the core dtypes
           in ImageJ's T, Z, C order, else an OME-TIFF. Core dtypes: uint8, uint16,
           float32 (read by every viewer, ImageJ/Fiji included). Also written: int8, int16,
           int32, uint32, float64 (tifffile and most scientific readers take them; ImageJ
           does not). Refused: bool, float16, complex, 64-bit integers. ``compression``:
           None/"none", "zlib" (= "deflate"), "lzma"; others ("zstd", "lzw", ...) need the
           imagecodecs package.
.png       2D uint8 or uint16 [Y, X]; uint8 RGB/RGBA [Y, X, 3|4] (pillow). ``compress_level``
           0-9.
.json      JSON-serialisable Python data (``indent`` option); loads as Python data
.csv       text, a sequence of rows, a 1D/2D array, or an object with ``to_csv`` (pandas);
           loads as text (parse it with the csv module or pandas)
.txt       text; loads as text
=========  ==============================================================================

Arrays of any framework are accepted; GPU arrays are copied to the host first.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

import memtype
from memtype import require
from memtype.errors import ArgumentTypeError, StoreFormatError, UnsupportedArrayError
from memtype.storage._readers import (
    TIFF_SHAPE_TAG,
    read_json,
    read_npy,
    read_png,
    read_text,
    read_tiff,
)

__all__ = ["FileFormat", "format_for", "supported_extensions", "check_options", "as_numpy",
           "canonical"]

TIFF_CORE = ("uint8", "uint16", "float32")
TIFF_EXTRA = ("int8", "int16", "int32", "uint32", "float64")
TIFF_BUILTIN_CODECS = frozenset({"zlib", "deflate", "lzma"})


@dataclass(frozen=True)
class FileFormat:
    """One format: how to check and encode data, and how to read a file back."""

    name: str
    prepare: Callable[[Any, str, dict[str, Any]], Any]
    write: Callable[[Any, BinaryIO, dict[str, Any]], None]
    read: Callable[[BinaryIO, dict[str, Any]], Any]
    save_options: frozenset[str]
    load_options: frozenset[str]


def as_numpy(data: Any, path: str, what: str) -> np.ndarray[Any, Any]:
    """``data`` as a host NumPy array (framework arrays converted) with a canonical dtype
    (see :func:`canonical`), else StoreFormatError."""
    if isinstance(data, np.ndarray):
        return canonical(data)
    if isinstance(data, np.generic):
        return canonical(np.asarray(data))

    try:
        memtype.detect_memory_type(data)
    except UnsupportedArrayError:
        raise StoreFormatError(
            f"Cannot save {type(data).__name__} to {path!r}: {what} files hold arrays; "
            "expected an array of a supported framework."
        ) from None
    return canonical(np.asarray(memtype.convert(data, "numpy")))


def canonical(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``a`` with the canonical NumPy type of its dtype's type code: ``np.longlong`` and
    ``np.ulonglong`` (what MLX's int64/uint64 exports are) become ``int64``/``uint64``, the
    same bytes under the dtype writers know. A view (O(1), no copy); ``a`` itself when its
    dtype is canonical already or not a number."""
    dtype = a.dtype
    if dtype.kind not in "biufc":
        return a
    code = np.dtype(dtype.str)  # '<i8' for np.longlong: the type code's own dtype
    if type(code) is type(dtype):
        return a
    return a.view(code)


def _bad_dtype(path: str, fmt: str, dtype: np.dtype[Any], expected: str) -> StoreFormatError:
    """The error for an array dtype a format cannot hold."""
    return StoreFormatError(
        f"Cannot save a {dtype} array to {path!r}: {fmt} files hold {expected}; received {dtype}."
    )


def _bad_shape(path: str, fmt: str, shape: tuple[int, ...], expected: str) -> StoreFormatError:
    """The error for an array shape a format cannot hold."""
    return StoreFormatError(
        f"Cannot save an array of shape {shape} to {path!r}: {fmt} files hold {expected}."
    )


# -- .npy --------------------------------------------------------------------------------
def _prepare_npy(data: Any, path: str, options: dict[str, Any]) -> np.ndarray[Any, Any]:
    """Check that an array fits .npy; C-contiguous."""
    a = as_numpy(data, path, ".npy")
    if a.dtype.hasobject or a.dtype.kind in "VT" or type(a.dtype).__module__ != "numpy.dtypes":
        raise _bad_dtype(path, ".npy", a.dtype, "arrays of built-in NumPy dtypes")
    return np.ascontiguousarray(a) if a.ndim else a.reshape(())


def _write_npy(a: np.ndarray[Any, Any], fh: BinaryIO, options: dict[str, Any]) -> None:
    """Write a .npy header, then the data in one buffered write."""
    # header + one buffered write: numpy's own tofile() reports a full disk without errno
    fmt = np.lib.format
    header = fmt.header_data_from_array_1_0(a)
    try:
        fmt.write_array_header_1_0(fh, header)
    except ValueError:  # header longer than 64 KiB (very long shapes): format 2.0
        fmt.write_array_header_2_0(fh, header)
    if a.size:
        fh.write(a.reshape(-1).view(np.uint8).data)


# -- .tif / .tiff --------------------------------------------------------------------------
def _prepare_tiff(data: Any, path: str, options: dict[str, Any]) -> np.ndarray[Any, Any]:
    """Check shape, dtype and compression for a TIFF."""
    a = as_numpy(data, path, "TIFF")
    if a.ndim not in TIFF_AXES:
        raise _bad_shape(path, "TIFF", a.shape,
                         "2D [Y, X] to 5D [T, C, Z, Y, X] arrays (axes= names them)")
    if a.dtype.name not in TIFF_CORE + TIFF_EXTRA:
        expected = f"{', '.join(TIFF_CORE)} (also {', '.join(TIFF_EXTRA)})"
        raise _bad_dtype(path, "TIFF", a.dtype, expected)
    _check_tiff_compression(options.get("compression"), path)
    options["axes"] = _tiff_axes(options.get("axes"), a.ndim, path)
    _check_physical(options, path)
    return a


_SYMBOLS = {"angstrom": "Å", "attometer": "am", "centimeter": "cm", "decimeter": "dm",
            "exameter": "Em", "femtometer": "fm", "foot": "ft", "gigameter": "Gm",
            "hectometer": "hm", "inch": "in", "kilometer": "km", "megameter": "Mm",
            "meter": "m", "micrometer": "µm", "mile": "mi", "millimeter": "mm",
            "nanometer": "nm", "parsec": "pc", "petameter": "Pm", "picometer": "pm",
            "terameter": "Tm", "yard": "yd", "yoctometer": "ym", "yottameter": "Ym",
            "zeptometer": "zm", "zettameter": "Zm"}
TIFF_UNITS = {name: (symbol, "micron" if name == "micrometer" else symbol)
              for name, symbol in _SYMBOLS.items()}
"""Each OME-NGFF space unit -> (its OME-XML symbol, ImageJ's unit name) for a TIFF's pixel
size."""


def _check_physical(options: dict[str, Any], path: str) -> None:
    """Check ``pixel_size`` (``(y, x)`` or ``(z, y, x)``, finite and > 0) and ``unit`` (a
    name of :data:`TIFF_UNITS`, default ``"micrometer"``; only with a pixel size)."""
    size, unit = options.get("pixel_size"), options.get("unit")
    if size is None:
        if unit is not None:
            raise StoreFormatError(f"TIFF unit={unit!r} for {path!r} needs pixel_size= too.")
        return
    try:
        numbers = tuple(float(v) for v in size)
    except (TypeError, ValueError):
        numbers = ()
    if len(numbers) not in (2, 3) or not all(math.isfinite(v) and v > 0 for v in numbers):
        raise StoreFormatError(
            f"TIFF pixel_size for {path!r} must be (y, x) or (z, y, x), finite and > 0; "
            f"received {size!r}.")
    unit = "micrometer" if unit is None else unit
    if unit not in TIFF_UNITS:
        raise StoreFormatError(f"TIFF unit for {path!r} must be one of {list(TIFF_UNITS)}; "
                               f"received {unit!r}.")
    options["pixel_size"], options["unit"] = numbers, unit


TIFF_AXES = {2: "YX", 3: "ZYX", 4: "CZYX", 5: "TCZYX"}
_IMAGEJ_ORDER = "TZCYX"


def _tiff_axes(axes: Any, ndim: int, path: str) -> str:
    """The axes of a TIFF (default by dimensions), checked: distinct letters of T, C, Z
    (any order), ending with Y, X."""
    if axes is None:
        return TIFF_AXES[ndim]
    if not isinstance(axes, str) or len(axes) != ndim or not axes.upper().endswith("YX") \
            or len(set(axes.upper())) != ndim or not set(axes.upper()) <= set("TCZYX"):
        raise StoreFormatError(
            f"Invalid TIFF axes {axes!r} for a {ndim}D array at {path!r}: expected {ndim} "
            f"distinct letters from T, C, Z, Y, X ending with YX (e.g. {TIFF_AXES[ndim]!r}).")
    return axes.upper()


def _check_tiff_compression(compression: Any, path: str) -> None:
    """Raise StoreFormatError for a compression tifffile cannot write here."""
    if compression is None or compression == "none":
        return
    if not isinstance(compression, str):
        raise StoreFormatError(
            f"TIFF compression must be a codec name or None; received {compression!r}."
        )
    if compression.lower() in TIFF_BUILTIN_CODECS:
        return
    if importlib.util.find_spec("imagecodecs") is None:
        raise StoreFormatError(
            f"Cannot write {path!r} with TIFF compression {compression!r}: it needs the "
            "imagecodecs package (pip install imagecodecs). Available without it: none, zlib, "
            "lzma."
        )


def _write_tiff(a: np.ndarray[Any, Any], fh: BinaryIO, options: dict[str, Any]) -> None:
    """Write a single-series grey-scale TIFF that names its axes: an ImageJ hyperstack
    where ImageJ can hold it (uint8, uint16, float32; axes in ImageJ's T, Z, C order), else
    an OME-TIFF. Fiji opens either with Z, C and T as such; tifffile reads the axes. With
    ``pixel_size`` the file carries it and its unit: the TIFF resolution (pixels per unit)
    and ImageJ's ``unit`` and ``spacing``, or OME's ``PhysicalSizeX/Y/Z`` and their units."""
    tifffile = require("tifffile", "Writing TIFF files")

    compression = options.get("compression")
    if compression == "none":
        compression = None
    axes = options.get("axes") or TIFF_AXES[a.ndim]
    order = [_IMAGEJ_ORDER.index(x) for x in axes]
    # ImageJ and OME readers drop axes of length 1: the array's own shape rides in a private
    # tag, so memtype reads (1, Y, X) back as (1, Y, X) (read_tiff, array_header).
    shape_tag = [(TIFF_SHAPE_TAG, 2, 0, json.dumps({"shape": list(a.shape), "axes": axes}),
                  True)]
    size, unit = options.get("pixel_size"), options.get("unit") or "micrometer"
    resolution = None if size is None else (1.0 / size[-1], 1.0 / size[-2])
    if a.dtype.name in TIFF_CORE and order == sorted(order):
        tifffile.imwrite(fh, a, imagej=True, metadata={"axes": axes, **_imagej_size(size, unit)},
                         compression=compression, extratags=shape_tag, resolution=resolution)
        return
    tifffile.imwrite(fh, a, ome=True, photometric="minisblack",
                     metadata={"axes": axes, **_ome_size(size, unit)},
                     compression=compression, extratags=shape_tag, resolution=resolution)


def _imagej_size(size: tuple[float, ...] | None, unit: str) -> dict[str, Any]:
    """ImageJ's metadata for a pixel size: its unit, and the z spacing where given."""
    if size is None:
        return {}
    return {"unit": TIFF_UNITS[unit][1], **({"spacing": size[0]} if len(size) == 3 else {})}


def _ome_size(size: tuple[float, ...] | None, unit: str) -> dict[str, Any]:
    """OME-XML's PhysicalSizeX/Y (and Z) with their unit."""
    if size is None:
        return {}
    symbol = TIFF_UNITS[unit][0]
    out: dict[str, Any] = {}
    for axis, value in zip("ZYX"[3 - len(size):], size, strict=True):
        out[f"PhysicalSize{axis}"], out[f"PhysicalSize{axis}Unit"] = value, symbol
    return out


# -- .png --------------------------------------------------------------------------------
def _prepare_png(data: Any, path: str, options: dict[str, Any]) -> np.ndarray[Any, Any]:
    """Check shape and dtype for a PNG."""
    a = as_numpy(data, path, "PNG")
    color = a.ndim == 3 and a.shape[2] in (3, 4)
    if a.ndim != 2 and not color:
        raise _bad_shape(path, "PNG", a.shape, "2D [Y, X] or colour [Y, X, 3|4] arrays")
    allowed = ("uint8",) if color else ("uint8", "uint16")
    if a.dtype.name not in allowed:
        raise _bad_dtype(path, "PNG", a.dtype, " or ".join(allowed) + " images")
    return np.ascontiguousarray(a)


def _write_png(a: np.ndarray[Any, Any], fh: BinaryIO, options: dict[str, Any]) -> None:
    """Write a PNG with pillow."""
    Image = require("PIL.Image", "Writing PNG files")

    level = options.get("compress_level", 6)
    Image.fromarray(a).save(fh, format="PNG", compress_level=level)


# -- text formats ---------------------------------------------------------------------------
def _prepare_json(data: Any, path: str, options: dict[str, Any]) -> bytes:
    """Serialise JSON data to UTF-8 bytes."""
    try:
        text = json.dumps(data, indent=options.get("indent"), allow_nan=True)
    except (TypeError, ValueError, RecursionError) as exc:  # not serialisable, circular, deep
        raise StoreFormatError(
            f"Cannot save {type(data).__name__} to {path!r}: .json files hold JSON-serialisable "
            f"data (dict, list, str, numbers, bool, None); {exc}."
        ) from exc
    return text.encode("utf-8")


def _prepare_csv(data: Any, path: str, options: dict[str, Any]) -> bytes:
    """Render text, rows, an array or a DataFrame as CSV bytes."""
    if isinstance(data, str):
        return data.encode("utf-8")
    if hasattr(data, "to_csv"):
        return str(data.to_csv(index=False)).encode("utf-8")
    if isinstance(data, np.ndarray) and data.ndim in (1, 2):
        data = data.reshape(len(data), -1).tolist() if data.ndim == 2 else [[v] for v in data]
    if isinstance(data, Sequence) and all(_is_row(row) for row in data):
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(data)
        return buf.getvalue().encode("utf-8")
    raise StoreFormatError(
        f"Cannot save {type(data).__name__} to {path!r}: .csv files hold text, a sequence of "
        "rows, a 1D/2D array, or an object with to_csv (a pandas DataFrame)."
    )


def _is_row(row: Any) -> bool:
    """Whether ``row`` can be a CSV row (a non-string sequence)."""
    return isinstance(row, Sequence) and not isinstance(row, (str, bytes))


def _prepare_txt(data: Any, path: str, options: dict[str, Any]) -> bytes:
    """Encode text as UTF-8 bytes."""
    if not isinstance(data, str):
        raise StoreFormatError(
            f"Cannot save {type(data).__name__} to {path!r}: .txt files hold text (str)."
        )
    return data.encode("utf-8")


def _write_bytes(payload: bytes, fh: BinaryIO, options: dict[str, Any]) -> None:
    """Write prepared bytes."""
    fh.write(payload)


_NONE: frozenset[str] = frozenset()

def _table() -> dict[str, FileFormat]:
    """Extension -> format."""
    npy = FileFormat("npy", _prepare_npy, _write_npy, read_npy, _NONE, frozenset({"mmap"}))
    tiff = FileFormat("tiff", _prepare_tiff, _write_tiff, read_tiff,
                      frozenset({"compression", "axes", "pixel_size", "unit"}),
                      frozenset({"key"}))
    png = FileFormat("png", _prepare_png, _write_png, read_png,
                     frozenset({"compress_level"}), _NONE)
    jsn = FileFormat("json", _prepare_json, _write_bytes, read_json, frozenset({"indent"}), _NONE)
    csv_ = FileFormat("csv", _prepare_csv, _write_bytes, read_text, _NONE, _NONE)
    txt = FileFormat("txt", _prepare_txt, _write_bytes, read_text, _NONE, _NONE)
    return {".npy": npy, ".tif": tiff, ".tiff": tiff, ".png": png, ".json": jsn,
            ".csv": csv_, ".txt": txt}


_FORMATS = _table()


def supported_extensions() -> tuple[str, ...]:
    """Extensions the DiskStore reads and writes."""
    return tuple(_FORMATS)


def format_for(path: str) -> FileFormat:
    """The format of ``path`` by its extension; StoreFormatError for any other extension."""
    dot = path.rfind(".")
    ext = path[dot:].lower() if dot > path.rfind("/") else ""
    fmt = _FORMATS.get(ext)
    if fmt is None:
        got = f"extension {ext!r}" if ext else "no extension"
        raise StoreFormatError(
            f"Unsupported file type for {path!r} ({got}). Expected one of: "
            f"{', '.join(_FORMATS)}. Files are never renamed to fit a format."
        )
    return fmt


def check_options(fmt: FileFormat, options: dict[str, Any], allowed: frozenset[str],
                  action: str) -> None:
    """TypeError naming options the format does not take."""
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ArgumentTypeError(
            f"{action} of {fmt.name} files got unexpected option(s) {', '.join(unknown)}; "
            f"it accepts: {', '.join(sorted(allowed)) or 'none'}."
        )
