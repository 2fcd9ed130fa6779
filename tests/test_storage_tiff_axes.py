"""TIFF files name their axes, so Fiji and tifffile see Z, C and T (issue 24, section 4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memtype.errors import StoreFormatError
from memtype.storage import DiskStore

pytestmark = pytest.mark.requires("tifffile")


@pytest.fixture
def disk(tmp_path: Path) -> DiskStore:
    return DiskStore(tmp_path)


@pytest.mark.parametrize(("shape", "dtype", "axes", "expected", "imagej"), [
    ((4, 5), "uint16", None, "YX", True),
    ((3, 4, 5), "uint16", None, "ZYX", True),
    ((3, 4, 5), "float32", None, "ZYX", True),
    ((3, 4, 5), "float64", None, "ZYX", False),
    ((2, 3, 4, 5), "uint8", None, "CZYX", False),
    ((3, 2, 4, 5), "uint16", "ZCYX", "ZCYX", True),
    ((2, 2, 3, 4, 5), "int32", None, "TCZYX", False),
    ((2, 4, 5), "uint16", "tyx", "TYX", True),
], ids=["2d", "zyx", "zyx float32", "zyx float64 ome", "czyx ome", "zcyx imagej", "tczyx ome",
        "time series"])
def test_tiff_axes_are_written(disk: DiskStore, shape: tuple[int, ...], dtype: str,
                               axes: str | None, expected: str, imagej: bool) -> None:
    import tifffile

    a = np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)
    disk.save(a, "x.tif", **({} if axes is None else {"axes": axes}))
    with tifffile.TiffFile(disk.path_of("x.tif")) as tif:
        assert tif.series[0].axes == expected
        assert tif.is_imagej == imagej and tif.is_ome == (not imagej)
    np.testing.assert_array_equal(disk.load("x.tif"), a)


@pytest.mark.parametrize("axes", ["ZYX", "YXZ", "CCYX", "QZYX", 4], ids=str)
def test_invalid_tiff_axes(disk: DiskStore, axes: object) -> None:
    with pytest.raises(StoreFormatError, match="Invalid TIFF axes"):
        disk.save(np.zeros((2, 3, 4, 5), np.uint16), "x.tif", axes=axes)
    assert not disk.exists("x.tif")


@pytest.mark.requires("tifffile")
@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 1, 8, 8), (2, 1, 8, 8), (1, 2, 1, 8, 8)])
@pytest.mark.parametrize("dtype", ["uint8", "float64"])  # ImageJ hyperstack, OME-TIFF
def test_axes_of_length_one_survive_the_round_trip(tmp_path: Path, shape: tuple[int, ...],
                                                   dtype: str) -> None:
    """ImageJ and OME readers drop axes of length 1; memtype's own reads keep them."""
    store = DiskStore(str(tmp_path))
    a = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    store.save(a, "img.tif")
    np.testing.assert_array_equal(store.load("img.tif"), a)
    assert store.load("img.tif").shape == shape
    assert store.stat("img.tif").shape == shape
