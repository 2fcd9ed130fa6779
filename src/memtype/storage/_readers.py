"""Reading the DiskStore's formats from an open file, and the one place where a decoder's
complaint about a file becomes :class:`~memtype.errors.StoreFormatError`.

Every reader checks what it read: a ``.npy`` header must describe the bytes that follow it
(a truncated file is an error before anything is allocated), a TIFF must hold at least one
non-empty image, a PNG is decoded in full. A file that is corrupt, truncated or not of its
extension's format raises ``StoreFormatError`` (a ``ValueError``) naming the file; an index
outside the file (a TIFF ``key``) raises ``StoreIndexError`` (an ``IndexError``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import struct
import sys
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np

from memtype import require
from memtype.errors import MemtypeError, StoreFormatError, StoreIndexError
from memtype.frameworks import data_nbytes

__all__ = ["CorruptFile", "decode", "decoding", "read_npy", "read_tiff", "read_png", "read_json",
           "read_text", "array_header", "DECODE_ERRORS"]

DECODE_ERRORS: tuple[type[BaseException], ...] = (
    ValueError, EOFError, LookupError, TypeError, AttributeError, SyntaxError,
    ArithmeticError, RuntimeError, struct.error, zlib.error)
"""What decoders (NumPy, tifffile, pillow, json, zarr, numcodecs) raise for bad input:
ValueError covers JSONDecodeError, UnicodeDecodeError and TiffFileError; SyntaxError is
pillow's "broken PNG"; RuntimeError is blosc's and a RecursionError from deep nesting."""


class CorruptFile(StoreFormatError):
    """A reader's own complaint about a file; :func:`decode` adds the file's name."""


def _decode_errors() -> tuple[type[BaseException], ...]:
    """DECODE_ERRORS plus the loaded decoders' own error classes: pillow's decompression
    bomb, and tifffile's TiffFileError (a ValueError in recent tifffile, a plain Exception in
    releases of 2024, which the zarr extra's lower bound allows)."""
    image = sys.modules.get("PIL.Image")
    own = (getattr(image, "DecompressionBombError", None),
           getattr(sys.modules.get("tifffile"), "TiffFileError", None))
    return DECODE_ERRORS + tuple(e for e in own if isinstance(e, type))


def decode(read: Any, fh: BinaryIO, what: str, where: str, options: dict[str, Any]) -> Any:
    """``read(fh, options)``, with a decoder's complaint raised as StoreFormatError."""
    with decoding(what, where):
        return read(fh, options)


@contextlib.contextmanager
def decoding(what: str, where: str) -> Iterator[None]:
    """Raise a decoder's complaint inside the block as StoreFormatError about ``where``.

    An ``OSError`` with an ``errno`` is a real I/O error and propagates (the store turns it
    into its memtype error); one without (pillow's "image file is truncated") is a decoder's.
    """
    try:
        yield
    except CorruptFile as exc:
        raise corrupt(what, where, str(exc)) from exc
    except MemtypeError:
        raise
    except OSError as exc:
        if exc.errno is not None:
            raise
        raise corrupt(what, where, exc) from exc
    except _decode_errors() as exc:
        raise corrupt(what, where, exc) from exc


def corrupt(what: str, where: str, exc: BaseException | str) -> StoreFormatError:
    """The error for a file that is not a valid ``what`` file."""
    detail = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return StoreFormatError(
        f"{where} is not a valid {what} (corrupt, truncated, or another format); "
        f"the decoder said: {detail}.")


# -- .npy --------------------------------------------------------------------------------
_NPY_V1 = b"\x93NUMPY\x01\x00"
_NPY_MAX_HEADER = 10000  # NumPy's own limit (max_header_size) for headers it parses
_INT = r"(?:0|[1-9][0-9]*)"
_NPY_HEADER = re.compile(
    r"\{'descr': '([<>|=]?[A-Za-z][A-Za-z0-9]*(?:\[[A-Za-z0-9]+\])?)', "
    r"'fortran_order': (True|False), "
    rf"'shape': \((|{_INT},|{_INT}(?:, {_INT})+,?)\), \}} *\n")
"""The header NumPy writes (keys sorted, a plain dtype string): parsed without
``ast.literal_eval``; anything else goes to NumPy's own parser."""


def npy_header(fh: BinaryIO) -> tuple[tuple[int, ...], bool, np.dtype[Any], int]:
    """(shape, fortran order, dtype, data offset) of a .npy file, checked against its size."""
    parsed = _quick_npy_header(fh)
    if parsed is None:
        fh.seek(0)
        parsed = _numpy_npy_header(fh)
    shape, fortran, dtype = parsed
    if dtype.hasobject:
        raise CorruptFile("it holds Python objects (pickled data), which are never loaded")
    offset = fh.tell()
    need = data_nbytes(shape, dtype)
    have = os.fstat(fh.fileno()).st_size - offset
    if have < need:
        raise CorruptFile(f"the header describes {need} data bytes; the file holds {have}")
    return shape, fortran, dtype, offset


def _quick_npy_header(fh: BinaryIO) -> tuple[tuple[int, ...], bool, np.dtype[Any]] | None:
    """The header of a version 1.0 file as NumPy writes it (None for anything else)."""
    head = fh.read(10)
    if len(head) < 10 or head[:8] != _NPY_V1:
        return None
    size = int.from_bytes(head[8:10], "little")
    text = fh.read(size) if size <= _NPY_MAX_HEADER else b""
    match = _NPY_HEADER.fullmatch(text.decode("latin1"))
    if match is None:
        return None
    descr, fortran, dims = match.groups()
    try:
        dtype = np.dtype(descr)
    except TypeError:  # not a dtype: NumPy's parser says so in its own words
        return None
    shape = tuple(int(d) for d in dims.split(",") if d)
    return shape, fortran == "True", dtype


def _numpy_npy_header(fh: BinaryIO) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    """The header parsed by NumPy (any writer's layout), versions 1.0 and 2.0."""
    fmt = np.lib.format
    version = fmt.read_magic(fh)
    readers = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
    if version not in readers:
        raise CorruptFile(f"unsupported .npy format version {version}; expected 1.0 or 2.0")
    shape, fortran, dtype = readers[version](fh)
    return tuple(int(s) for s in shape), bool(fortran), dtype


def read_npy(fh: BinaryIO, options: dict[str, Any]) -> Any:
    """A .npy array (a read-only memory map with ``mmap``); the header is checked first.

    The data is read once, straight into the new array (no intermediate bytes)."""
    shape, fortran, dtype, offset = npy_header(fh)
    if options.get("mmap") and math.prod(shape) > 0:
        return np.memmap(fh, dtype=dtype, mode="r", offset=offset, shape=shape,
                         order="F" if fortran else "C")
    out = np.empty(shape[::-1] if fortran else shape, dtype)
    if out.nbytes:
        _read_exactly(fh, out.reshape(-1).view(np.uint8))
    return out.transpose() if fortran else out


def _read_exactly(fh: BinaryIO, buf: np.ndarray[Any, Any]) -> None:
    """Fill ``buf`` from ``fh``; CorruptFile if the file ends first (it shrank)."""
    view = memoryview(buf)  # type: ignore[arg-type]  # a uint8 array is a buffer
    done = 0
    while done < len(view):
        n = fh.readinto(view[done:])  # type: ignore[attr-defined]  # BufferedReader
        if not n:
            raise CorruptFile(f"the file ended after {done} of {len(view)} data bytes")
        done += n


# -- .tif / .tiff --------------------------------------------------------------------------
def read_tiff(fh: BinaryIO, options: dict[str, Any]) -> Any:
    """A TIFF's first series (one page with ``key``); a file without an image is an error."""
    tifffile = require("tifffile", "Reading TIFF files")

    key = options.get("key")
    with tifffile.TiffFile(fh) as tif:
        pages = len(tif.pages)
        if pages == 0 or not tif.series:
            raise CorruptFile("no readable image (no valid page)")
        if key is not None:
            _check_page(key, pages)
        a = tif.asarray(key=key)
        if key is None:
            a = a.reshape(_written_shape(tif, a.shape))
    if a.size == 0:
        raise CorruptFile(f"the image decoded to an empty array of shape {a.shape}")
    return a


TIFF_SHAPE_TAG = 65432
"""A private TIFF tag where memtype writes an array's shape and axes (JSON): ImageJ and OME
readers drop axes of length 1."""


def _written_shape(tif: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape memtype wrote (its private tag), where it holds the same number of pixels
    as the first series' ``shape``; else ``shape``."""
    tag = tif.pages[0].tags.get(TIFF_SHAPE_TAG)
    value = None if tag is None else tag.value
    if isinstance(value, np.ndarray):  # tifffile reads an unknown ASCII tag as its bytes
        value = value.tobytes()
    if isinstance(value, bytes):
        value = value.rstrip(b"\0").decode("ascii", "replace")
    if not isinstance(value, str):
        return shape
    try:
        written = json.loads(value).get("shape")
    except (ValueError, AttributeError):
        return shape  # another writer's tag of the same number: not ours
    if not isinstance(written, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in written):
        return shape
    return tuple(written) if math.prod(written) == math.prod(shape) else shape


def _check_page(key: object, pages: int) -> None:
    """StoreIndexError unless ``key`` is a page index of a TIFF with ``pages`` pages."""
    if isinstance(key, bool) or not isinstance(key, (int, np.integer)) \
            or not -pages <= int(key) < pages:
        raise StoreIndexError(
            f"TIFF page key={key!r} is out of range: the file has {pages} page(s); expected "
            f"an int from {-pages} to {pages - 1}.")


# -- .png --------------------------------------------------------------------------------
def read_png(fh: BinaryIO, options: dict[str, Any]) -> Any:
    """A PNG decoded in full, as uint8 or uint16."""
    Image = require("PIL.Image", "Reading PNG files")

    with Image.open(fh, formats=["PNG"]) as image:
        image.load()
        a = np.asarray(image)
        if image.mode in ("I;16", "I;16B") or (image.mode == "I" and a.max(initial=0) < 65536):
            return a.astype(np.uint16)
        return a


# -- text ----------------------------------------------------------------------------------
def read_text(fh: BinaryIO, options: dict[str, Any]) -> str:
    """A UTF-8 text file as it is (newlines untouched)."""
    return fh.read().decode("utf-8")


def read_json(fh: BinaryIO, options: dict[str, Any]) -> Any:
    """A UTF-8 JSON document."""
    return json.loads(fh.read().decode("utf-8"))


def array_header(fh: BinaryIO, name: str) -> tuple[tuple[int, ...] | None, str | None]:
    """Shape and dtype of a .npy or TIFF file, from its header only (else None, None)."""
    lower = name.lower()
    if lower.endswith(".npy"):
        shape, _, dtype, _ = npy_header(fh)
        return shape, str(dtype)
    if lower.endswith((".tif", ".tiff")):
        tifffile = require("tifffile", "Reading TIFF headers")

        with tifffile.TiffFile(fh) as tif:
            if not tif.series:
                raise CorruptFile("no readable image (no valid page)")
            series = tif.series[0]
            return _written_shape(tif, tuple(series.shape)), str(series.dtype)
    return None, None
