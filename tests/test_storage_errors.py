"""Issue 12 (storage, items 13, 14, 17): every failure of a store is a memtype error that is
also the right builtin, naming the file; corrupt data is an error at load; symbolic links
never lead out of a store's root unless asked."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memtype.errors import (
    ArgumentTypeError,
    MemtypeError,
    StoreAccessError,
    StoreFormatError,
    StoreFullError,
    StoreIndexError,
    StorePathError,
)
from memtype.storage import DiskStore, FileManager, MemoryStore, Store, TieredStore, ZarrStore
from tests.helpers import remove_tree
from tests.test_storage_disk import run_size_limited

IMAGE = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)


@pytest.fixture
def disk(tmp_path: Path) -> DiskStore:
    return DiskStore(tmp_path / "root")


@pytest.fixture
def plate(tmp_path: Path) -> ZarrStore:
    store = ZarrStore(tmp_path / "plate.zarr")
    store.save(IMAGE, "A/1/0", parents=True)
    return store


# -- item 14 and 13: corrupt files -------------------------------------------------------------
CORRUPT = {
    "garbage.tif": b"II*\x00" + b"\xff" * 100,
    "junk.tif": b"junk",
    "junk.npy": b"garbage",
    "objects.npy": b"\x93NUMPY\x01\x00v\x00{'descr': '|O', 'fortran_order': False, "
                   b"'shape': (2,), }" + b" " * 60 + b"\n" + b"\x00" * 16,
    "huge.npy": b"\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, "
                b"'shape': (1000000000000,), }" + b" " * 44 + b"\n",
    "junk.png": b"\x89PNG\r\n\x1a\nxx",
    "cut.json": b'{"a": [1, 2',
    "latin1.txt": b"\xff\xfe\xfa",
    "deep.json": b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("name", sorted(CORRUPT))
@pytest.mark.requires("PIL", "tifffile")
def test_corrupt_file_is_a_format_error_naming_it(disk: DiskStore, name: str) -> None:
    Path(disk.path_of(name)).write_bytes(CORRUPT[name])
    with pytest.raises(StoreFormatError, match=name.replace(".", r"\.")) as info:
        disk.load(name)
    assert isinstance(info.value, ValueError)
    if name.endswith((".npy", ".tif")):
        with pytest.raises(StoreFormatError):
            disk.stat(name)


@pytest.mark.parametrize("name", ["a.tif", "a.png", "a.npy"])
@pytest.mark.requires("PIL", "tifffile")
def test_truncated_image_is_a_format_error(disk: DiskStore, name: str) -> None:
    disk.save(IMAGE.astype(np.uint8) if name.endswith("png") else IMAGE, name)
    raw = Path(disk.path_of(name)).read_bytes()
    Path(disk.path_of(name)).write_bytes(raw[: len(raw) // 2])
    with pytest.raises(StoreFormatError):
        disk.load(name)


@pytest.mark.requires("tifffile")
def test_tiff_page_out_of_range_is_an_index_error(disk: DiskStore) -> None:
    disk.save(IMAGE, "a.tif")
    with pytest.raises(StoreIndexError, match="1 page") as info:
        disk.load("a.tif", key=3)
    assert isinstance(info.value, IndexError)


@pytest.mark.requires("zarr")
def test_zarr_index_out_of_range_is_an_index_error(plate: ZarrStore) -> None:
    for index in [(70,), (1, 2, 3)]:
        with pytest.raises(StoreIndexError, match="A/1/0") as info:
            plate.load("A/1/0", index=index)
        assert isinstance(info.value, IndexError)


@pytest.mark.parametrize("tamper", ["drop-shape", "drop-codecs", "bad-json", "not-object",
                                    "attrs-int", "chunk"])
@pytest.mark.requires("zarr")
def test_tampered_zarr_is_a_format_error(plate: ZarrStore, tamper: str) -> None:
    field = Path(plate.root, "A/1/0")
    meta = field / "0" / "zarr.json"
    doc = json.loads(meta.read_text())
    if tamper.startswith("drop-"):
        del doc[tamper[5:]]
        meta.write_text(json.dumps(doc))
    elif tamper == "bad-json":
        meta.write_text("{")
    elif tamper == "not-object":
        meta.write_text("[1]")
    elif tamper == "attrs-int":
        (field / "zarr.json").write_text('{"attributes": 5}')
    else:
        (field / "0" / "c" / "0" / "0").write_bytes(b"x" * 40)
    with pytest.raises(StoreFormatError, match="A/1/0"):
        plate.load("A/1/0")


# -- item 13: OS errors -----------------------------------------------------------------------
def test_symlink_loop_is_a_path_error(disk: DiskStore) -> None:
    os.symlink("loop2", disk.path_of("loop1"))
    os.symlink("loop1", disk.path_of("loop2"))
    for call in (lambda: disk.load("loop1/x.npy"), lambda: disk.save(IMAGE, "loop1/x.npy"),
                 lambda: disk.list_files("loop1")):
        with pytest.raises(StorePathError, match="loop"):
            call()
    assert disk.list_dir("") == ["loop1", "loop2"]
    assert disk.list_files("", recursive=True) == []


def test_name_too_long_is_a_path_error(disk: DiskStore) -> None:
    name = "a" * 300 + ".npy"
    for call in (lambda: disk.save(IMAGE, name), lambda: disk.load(name)):
        with pytest.raises(StorePathError, match="255 bytes"):
            call()
    disk.save(IMAGE, "b" * 250 + ".npy")  # long but legal: the temporary name fits too


@pytest.mark.parametrize("make", [
    lambda tmp: DiskStore(tmp / "d"), lambda tmp: MemoryStore(), lambda tmp: TieredStore(1 << 20),
], ids=["disk", "memory", "tiered"])
def test_paths_three_thousand_levels_deep(tmp_path: Path, make: object) -> None:
    store: Store = make(tmp_path)  # type: ignore[operator]
    deep = "/".join(["d"] * 3000) + "/x.npy"
    try:
        store.save(IMAGE, deep, parents=True)
        np.testing.assert_array_equal(np.asarray(store.load(deep)), IMAGE)
        assert store.list_files("", recursive=True) == [deep]
        store.delete_all("d")
        assert not store.exists("d")
    finally:  # a failure above must not leave a tree pytest's own cleanup dies on
        remove_tree(tmp_path / "d")


@pytest.mark.requires("zarr")
def test_store_root_of_the_wrong_type() -> None:
    for cls in (DiskStore, ZarrStore):
        with pytest.raises(ArgumentTypeError, match="NoneType") as info:
            cls(None)  # type: ignore[arg-type]
        assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("via_manager", [False, True])
def test_move_file_onto_existing_directory_with_overwrite(disk: DiskStore,
                                                          via_manager: bool) -> None:
    disk.save(IMAGE, "a.npy")
    disk.save(IMAGE, "dir/inner.npy", parents=True)
    if via_manager:
        FileManager({"disk": disk}).move("a.npy", "dir", "disk", overwrite=True)
    else:
        disk.move("a.npy", "dir", overwrite=True)
    assert disk.is_file("dir") and not disk.exists("a.npy")
    disk.save(IMAGE, "tree/x.npy", parents=True)
    disk.copy("dir", "tree", overwrite=True)
    assert disk.is_file("tree")


PERMISSION_SCRIPT = """
import os, sys
from memtype.errors import StoreAccessError
from memtype.storage import DiskStore
root = sys.argv[1]
if os.geteuid() == 0:
    os.setgid(65534); os.setuid(65534)  # root ignores permissions: drop them
store = DiskStore(root, read_only=True)
for call in (lambda: store.load("locked/a.npy"), lambda: store.list_dir("locked")):
    try:
        call()
    except StoreAccessError as exc:
        assert isinstance(exc, PermissionError) and exc.errno == 13, exc
        assert "locked" in str(exc), exc
    else:
        raise SystemExit("no StoreAccessError")
print("ok")
"""


def test_permission_denied_is_an_access_error(tmp_path: Path) -> None:
    store = DiskStore(tmp_path / "root")
    store.save(IMAGE, "locked/a.npy", parents=True)
    os.chmod(tmp_path, 0o755)
    os.chmod(store.root, 0o755)
    os.chmod(store.path_of("locked"), 0o000)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        done = subprocess.run([sys.executable, "-c", PERMISSION_SCRIPT, store.root],
                              capture_output=True, text=True, env=env, timeout=120)
    finally:
        os.chmod(store.path_of("locked"), 0o755)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


FULL_SCRIPT = """
import os, sys
import numpy as np
from memtype.storage import DiskStore, ZarrStore
root, name = sys.argv[1:]
big = np.random.default_rng(0).integers(0, 255, (1200, 1200), dtype=np.uint8)  # 1.4 MB
if name.endswith(".zarr"):
    store = ZarrStore(root, codec="none")
    save, key, written = lambda: store.save(big, "A/1/0", parents=True), "A/1/0", store.exists
else:
    store = DiskStore(root)
    options = {"compress_level": 0} if name.endswith("png") else {}
    save, key, written = lambda: store.save(big, name, **options), name, lambda key: False
try:
    save()
except OSError as exc:
    print(type(exc).__name__, exc.errno, key in str(exc), written(key))
print(os.listdir(root) if not name.endswith(".zarr") else "zarr")
"""


@pytest.mark.parametrize("name", ["a.tif", "a.npy", "a.png"])
@pytest.mark.requires("PIL", "tifffile")
def test_disk_full_is_always_store_full_error(tmp_path: Path, name: str) -> None:
    lines = run_size_limited(FULL_SCRIPT, str(tmp_path / "d"), name)
    assert lines == [f"StoreFullError {errno.EFBIG} True False", "[]"]


@pytest.mark.requires("zarr")
def test_zarr_disk_full_is_store_full_error(tmp_path: Path) -> None:
    lines = run_size_limited(FULL_SCRIPT, str(tmp_path / "p.zarr"), "p.zarr")
    assert lines == [f"StoreFullError {errno.EFBIG} True False", "zarr"]


# -- item 17: symbolic links out of the root ----------------------------------------------------
@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    np.save(out / "secret.npy", IMAGE)
    return out


def test_disk_refuses_links_out_of_the_root(disk: DiskStore, outside: Path) -> None:
    os.symlink(outside, disk.path_of("escape"))
    os.symlink(outside / "secret.npy", disk.path_of("file.npy"))
    calls = [lambda: disk.load("escape/secret.npy"), lambda: disk.load("file.npy"),
             lambda: disk.save(IMAGE, "escape/new.npy"),
             lambda: disk.save(IMAGE, "escape/secret.npy", overwrite=True),
             lambda: disk.delete("escape/secret.npy"), lambda: disk.delete_all("escape/secret.npy"),
             lambda: disk.list_files("escape"), lambda: disk.stat("escape/secret.npy")]
    for call in calls:
        with pytest.raises(StorePathError, match="outside"):
            call()
    assert sorted(os.listdir(outside)) == ["secret.npy"]
    assert not disk.is_file("file.npy") and disk.exists("file.npy")
    assert disk.list_files("", recursive=True) == []
    disk.delete("file.npy")  # removes the link, never its target
    disk.delete_all("escape")
    assert (outside / "secret.npy").exists()


def test_disk_follows_links_that_stay_inside(disk: DiskStore) -> None:
    disk.save(IMAGE, "real/a.npy", parents=True)
    disk.ensure_directory("other")
    os.symlink("real", disk.path_of("alias"))
    os.symlink("../real/a.npy", disk.path_of("other/b.npy"))
    os.symlink(disk.path_of("real"), disk.path_of("absolute"))
    np.testing.assert_array_equal(disk.load("alias/a.npy"), IMAGE)
    np.testing.assert_array_equal(disk.load("other/b.npy"), IMAGE)
    np.testing.assert_array_equal(disk.load("absolute/a.npy"), IMAGE)
    assert disk.list_files("", recursive=True) == ["other/b.npy", "real/a.npy"]


def test_disk_follows_links_outside_when_asked(tmp_path: Path, outside: Path) -> None:
    disk = DiskStore(tmp_path / "root", follow_symlinks_outside=True)
    os.symlink(outside, disk.path_of("escape"))
    np.testing.assert_array_equal(disk.load("escape/secret.npy"), IMAGE)
    disk.save(IMAGE, "escape/new.npy")
    assert (outside / "new.npy").exists()


def test_a_directory_swapped_for_a_link_is_not_followed(disk: DiskStore, outside: Path) -> None:
    """The walk opens each component with O_NOFOLLOW, so a swap after the check is refused."""
    disk.save(IMAGE, "sub/secret.npy", parents=True)
    os.rename(disk.path_of("sub"), disk.path_of("old"))
    os.symlink(outside, disk.path_of("sub"))
    with pytest.raises(StorePathError):
        disk.load("sub/secret.npy")


@pytest.mark.requires("zarr")
def test_zarr_refuses_links_out_of_the_plate(plate: ZarrStore, tmp_path: Path) -> None:
    other = ZarrStore(tmp_path / "other.zarr")
    other.save(IMAGE, "B/1/0", parents=True)
    os.symlink(Path(other.root, "B"), Path(plate.root, "B"))
    calls = [lambda: plate.load("B/1/0"), lambda: plate.save(IMAGE, "B/1/1"),
             lambda: plate.delete_all("B/1/0"), lambda: plate.stat("B/1/0")]
    for call in calls:
        with pytest.raises(StorePathError, match="outside"):
            call()
    assert other.list_files("B/1") == ["B/1/0"]
    allowed = ZarrStore(plate.root, follow_symlinks_outside=True)
    np.testing.assert_array_equal(allowed.load("B/1/0"), IMAGE)


def test_every_error_here_is_a_memtype_error() -> None:
    for cls in (StoreAccessError, StoreFullError, StoreIndexError, StorePathError,
                StoreFormatError):
        assert issubclass(cls, MemtypeError)
