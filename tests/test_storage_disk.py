"""DiskStore: formats, bad input (clear errors, nothing written), disk full, permissions."""

from __future__ import annotations

import errno
import importlib
import importlib.util
import os
import resource
import signal
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from memtype.errors import StoreFormatError, StorePathError
from memtype.storage import DiskStore
from memtype.storage._atomic import TEMP_SUFFIX


@pytest.fixture
def disk(tmp_path: Path) -> DiskStore:
    return DiskStore(tmp_path / "root")


def files_on_disk(store: DiskStore) -> list[str]:
    """Every entry under the root, temporaries included."""
    out = []
    for parent, dirs, files in os.walk(store.root):
        out += [os.path.relpath(os.path.join(parent, n), store.root) for n in dirs + files]
    return sorted(out)


# -- formats ---------------------------------------------------------------------------------
NPY_DTYPES = ["bool", "int8", "uint16", "int64", "float16", "float32", ">f8", "complex64", "<U3"]


@pytest.mark.parametrize("dtype", NPY_DTYPES)
def test_npy_round_trip(disk: DiskStore, dtype: str) -> None:
    a = np.arange(12).reshape(3, 4).astype(dtype)
    disk.save(a, "a.npy")
    out = disk.load("a.npy")
    assert out.dtype == a.dtype
    np.testing.assert_array_equal(out, a)


def test_npy_views_zero_d_and_empty(disk: DiskStore) -> None:
    base = np.arange(100, dtype=np.float32).reshape(10, 10)
    for name, a in {"view": base[::-2, 1::3], "scalar": np.array(3.5), "generic": np.float32(2),
                    "empty": np.empty((0, 5), np.int16)}.items():
        disk.save(a, f"{name}.npy")
        np.testing.assert_array_equal(disk.load(f"{name}.npy"), a)
        assert disk.load(f"{name}.npy").shape == np.shape(a)


def test_npy_mmap(disk: DiskStore) -> None:
    disk.save(np.arange(10), "m.npy")
    out = disk.load("m.npy", mmap=True)
    assert isinstance(out, np.memmap) and not out.flags.writeable
    assert int(out[9]) == 9


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "float32", "int16", "float64"])
@pytest.mark.parametrize("shape", [(16, 24), (3, 16, 24), (1, 8, 8), (16, 24, 3)])
@pytest.mark.requires("tifffile")
def test_tiff_round_trip(disk: DiskStore, dtype: str, shape: tuple[int, ...]) -> None:
    a = (np.random.default_rng(0).random(shape) * 200).astype(dtype)
    disk.save(a, "img.tif")
    out = disk.load("img.tif")
    assert out.dtype == a.dtype and out.shape == a.shape
    np.testing.assert_array_equal(out, a)
    info = disk.stat("img.tif")
    assert info.shape == shape and info.dtype == dtype


@pytest.mark.parametrize("compression", ["zlib", "lzma", "none", None])
@pytest.mark.requires("tifffile")
def test_tiff_compression(disk: DiskStore, compression: str | None) -> None:
    a = np.zeros((64, 64), np.uint16)
    a[10:20] = 7
    disk.save(a, "c.tiff", compression=compression)
    np.testing.assert_array_equal(disk.load("c.tiff"), a)
    if compression in ("zlib", "lzma"):
        assert disk.stat("c.tiff").size < a.nbytes // 4


@pytest.mark.requires("tifffile")
def test_tiff_page_key(disk: DiskStore) -> None:
    a = np.arange(3 * 4 * 5, dtype=np.uint8).reshape(3, 4, 5)
    disk.save(a, "stack.tif")
    np.testing.assert_array_equal(disk.load("stack.tif", key=1), a[1])


@pytest.mark.requires("tifffile")
def test_upper_case_extension(disk: DiskStore) -> None:
    disk.save(np.ones((4, 4), np.uint8), "UP.TIF")
    assert disk.list_files("", extensions=["tif"]) == ["UP.TIF"]
    assert disk.load("UP.TIF").sum() == 16


@pytest.mark.parametrize("shape,dtype", [((20, 30), "uint8"), ((20, 30), "uint16"),
                                         ((20, 30, 3), "uint8"), ((20, 30, 4), "uint8")])
@pytest.mark.requires("PIL")
def test_png_round_trip(disk: DiskStore, shape: tuple[int, ...], dtype: str) -> None:
    top = 255 if dtype == "uint8" else 65535
    a = np.random.default_rng(1).integers(0, top, shape).astype(dtype)
    disk.save(a, "p.png")
    out = disk.load("p.png")
    assert out.dtype == a.dtype
    np.testing.assert_array_equal(out, a)


def test_json_csv_txt(disk: DiskStore) -> None:
    disk.save({"a": [1, 2.5, None], "b": "é"}, "m.json", indent=2)
    assert disk.load("m.json") == {"a": [1, 2.5, None], "b": "é"}
    disk.save([["x", "y"], [1, 2]], "rows.csv")
    assert disk.load("rows.csv") == "x,y\n1,2\n"
    disk.save(np.array([[1, 2], [3, 4]]), "arr.csv")
    assert disk.load("arr.csv") == "1,2\n3,4\n"
    disk.save("a,b\n", "text.csv")
    assert disk.load("text.csv") == "a,b\n"
    disk.save("hello\nworld", "t.txt")
    assert disk.load("t.txt") == "hello\nworld"


@pytest.mark.requires("torch")
@pytest.mark.requires("tifffile")
def test_torch_tensor_is_saved_through_numpy(disk: DiskStore) -> None:
    torch = importlib.import_module("torch")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    disk.save(t, "t.tif")
    disk.save(t, "t.npy")
    np.testing.assert_array_equal(disk.load("t.tif"), t.numpy())
    np.testing.assert_array_equal(disk.load("t.npy"), t.numpy())


# -- bad input: a clear error, nothing written -------------------------------------------------
@pytest.mark.parametrize("name", ["x.npz", "x.jpg", "noext", "x.tif.bak", "dir.d/x"])
def test_unsupported_extension(disk: DiskStore, name: str) -> None:
    with pytest.raises(StoreFormatError, match="Expected one of") as info:
        disk.save(np.zeros(3), name, parents=True)
    assert isinstance(info.value, ValueError)
    assert [f for f in files_on_disk(disk) if not f.endswith(".d")] == []
    with pytest.raises(StoreFormatError):
        disk.load(name)


BAD_DATA = [
    ("img.tif", np.zeros((4, 4), bool), "bool"),
    ("img.tif", np.zeros((4, 4), np.float16), "float16"),
    ("img.tif", np.zeros((4, 4), np.complex64), "complex64"),
    ("img.tif", np.zeros((4, 4), np.int64), "int64"),
    ("img.tif", np.zeros((2, 2, 2, 2, 4, 4), np.uint8), "6D"),
    ("img.tif", np.zeros(4, np.uint8), "1D"),
    ("img.tif", "text", "str"),
    ("img.png", np.zeros((4, 4), np.float32), "float32 png"),
    ("img.png", np.zeros((4, 4, 3), np.uint16), "uint16 rgb png"),
    ("img.png", np.zeros((4, 4, 2), np.uint8), "2-channel png"),
    ("a.npy", {"a": 1}, "dict"),
    ("a.npy", np.array([object()], dtype=object), "object array"),
    ("m.json", {"a": np.zeros(2)}, "ndarray in json"),
    ("t.txt", b"bytes", "bytes txt"),
    ("t.txt", 5, "int txt"),
    ("r.csv", 5, "int csv"),
]


@pytest.mark.parametrize("name,data,what", BAD_DATA, ids=[b[2] for b in BAD_DATA])
@pytest.mark.requires("tifffile")
def test_data_the_format_cannot_hold(disk: DiskStore, name: str, data: object,
                                     what: str) -> None:
    with pytest.raises(StoreFormatError, match="Cannot save"):
        disk.save(data, name)
    assert files_on_disk(disk) == []


@pytest.mark.requires("tifffile")
def test_wrong_dtype_keeps_the_existing_file(disk: DiskStore) -> None:
    good = np.full((4, 4), 3, np.uint16)
    disk.save(good, "keep.tif")
    with pytest.raises(StoreFormatError):
        disk.save(np.zeros((4, 4), bool), "keep.tif", overwrite=True)
    np.testing.assert_array_equal(disk.load("keep.tif"), good)


def test_compression_needing_imagecodecs(disk: DiskStore) -> None:
    if importlib.util.find_spec("imagecodecs") is not None:
        pytest.skip("imagecodecs is installed: zstd TIFF compression is available")
    with pytest.raises(StoreFormatError, match="imagecodecs"):
        disk.save(np.zeros((4, 4), np.uint8), "z.tif", compression="zstd")
    assert files_on_disk(disk) == []


def test_option_of_another_format_is_type_error(disk: DiskStore) -> None:
    with pytest.raises(TypeError, match="compression"):
        disk.save(np.zeros(3), "a.npy", compression="zlib")
    with pytest.raises(TypeError, match="mmap"):
        disk.load("a.tif", mmap=True)


def test_root_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StorePathError, match="is a file"):
        DiskStore(tmp_path / "file")


def test_file_in_the_way_of_parents(disk: DiskStore) -> None:
    disk.save("x", "a.txt")
    with pytest.raises(StorePathError, match="a file is in the way"):
        disk.save(np.zeros(3), "a.txt/b/c.npy", parents=True)
    with pytest.raises(StorePathError):
        disk.ensure_directory("a.txt/b")
    assert disk.load("a.txt") == "x"


# -- atomic writes ---------------------------------------------------------------------------
def test_new_files_follow_the_umask(disk: DiskStore) -> None:
    disk.save(np.zeros(3), "perm.npy")
    umask = os.umask(0o022)
    os.umask(umask)
    mode = stat.S_IMODE(os.stat(disk.path_of("perm.npy")).st_mode)
    assert mode == 0o666 & ~umask


def test_temporaries_are_hidden_and_purged(disk: DiskStore) -> None:
    disk.save(np.zeros(3), "a.npy")
    leftover = Path(disk.root) / f".a.npy.{uuid.uuid4().hex[:12]}{TEMP_SUFFIX}"
    leftover.write_bytes(b"partial")
    assert disk.list_files("") == ["a.npy"] and disk.list_dir("") == ["a.npy"]
    assert disk.purge_temporaries(min_age_s=60) == 0  # too recent: maybe a running write
    old = time.time() - 120
    os.utime(leftover, (old, old))
    assert disk.purge_temporaries(min_age_s=60) == 1
    assert files_on_disk(disk) == ["a.npy"]


FILE_LIMIT = 1 << 20  # bytes a file may hold in run_size_limited's child (RLIMIT_FSIZE)


def _limit_file_size() -> None:
    """In the child: a write past FILE_LIMIT fails with EFBIG (SIGXFSZ ignored), as a write to a
    full disk fails with ENOSPC; the store handles both as a full device."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    limit = FILE_LIMIT if hard == resource.RLIM_INFINITY else min(FILE_LIMIT, hard)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))


def run_size_limited(script: str, *args: str) -> list[str]:
    """The output lines of ``python -c script *args`` run where no file may grow past
    FILE_LIMIT bytes: a disk that fills up, on any machine (a small tmpfs needs root)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          env=env, timeout=300, preexec_fn=_limit_file_size, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


DISK_FULL_SCRIPT = """
import os, sys
import numpy as np
from memtype.storage import DiskStore
store = DiskStore(sys.argv[1])
old = np.full(300_000 // 4, 7, np.float32)  # 300 kB
store.save(old, "data.npy")
for name in ("data.npy", "other.npy"):  # 2 MB each: past the limit
    try:
        store.save(np.ones(2_000_000 // 4, np.float32), name, overwrite=True)
    except OSError as exc:
        print(name, type(exc).__name__, exc.errno, name in str(exc), os.listdir(store.root))
print(bool((store.load("data.npy") == old).all()))
"""


def test_disk_full_keeps_the_old_file(tmp_path: Path) -> None:
    lines = run_size_limited(DISK_FULL_SCRIPT, str(tmp_path / "store"))
    assert lines == [f"data.npy StoreFullError {errno.EFBIG} True ['data.npy']",
                     f"other.npy StoreFullError {errno.EFBIG} True ['data.npy']",
                     "True"]  # the partial temporaries were removed, the old file kept
