"""DiskStore fast paths: one ``openat2(RESOLVE_BENEATH)`` lookup (or one lstat for a key in the
root) gives the same answers and errors as the descriptor walk, and the ``.npy`` header
parser that skips ``ast.literal_eval`` agrees with NumPy's on every header NumPy writes."""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from memtype.errors import MemtypeError, StoreFormatError, StorePathError
from memtype.storage import DiskStore, _openat2
from memtype.storage._readers import CorruptFile, _read_exactly, npy_header, read_npy

IMAGE = np.arange(12, dtype=np.uint16).reshape(3, 4)


def _has_openat2() -> bool:
    """Whether this kernel answers openat2."""
    root = os.open("/", os.O_RDONLY)
    try:
        fd = _openat2.open_beneath(root, ".", os.O_RDONLY)
    finally:
        os.close(root)
    if fd >= 0:
        os.close(fd)
    return fd >= 0


def _tree(tmp_path: Path) -> DiskStore:
    """A store with every kind of link the walk knows about, and a file outside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    np.save(outside / "secret.npy", IMAGE)
    disk = DiskStore(tmp_path / "root")
    disk.save(IMAGE, "a/b/c/x.npy", parents=True)
    disk.save(IMAGE, "top.npy")
    root = Path(disk.root)
    links = {"a/rel": "b", "a/b/up": "../b/c/x.npy", "abs": str(root / "a"),
             "out": str(outside), "outrel": "../outside", "a/dangling": "nowhere/y.npy",
             "loop1": "loop2", "loop2": "loop1", "a/b/c/link.npy": "x.npy",
             "a/b/c/outfile.npy": str(outside / "secret.npy"), "toplink.npy": "top.npy"}
    for name, target in links.items():
        os.symlink(target, root / name)
    return disk


KEYS = ["top.npy", "toplink.npy", "a", "a/b/c/x.npy", "a/rel/c/x.npy", "a/b/up", "abs/b/c/x.npy",
        "out/secret.npy", "outrel/secret.npy", "out", "a/dangling", "a/dangling/z.npy",
        "loop1", "loop1/x.npy", "a/b/c/link.npy", "a/b/c/outfile.npy", "top.npy/x.npy",
        "missing/x.npy", "a/missing.npy", "abs", "a/rel"]


def _outcome(call: Callable[[], object]) -> object:
    """What a call gives: its value (arrays as lists) or its error class and message."""
    try:
        value = call()
    except MemtypeError as exc:
        return type(exc).__name__, str(exc)
    return value.tolist() if isinstance(value, np.ndarray) else value


def _answers(disk: DiskStore, key: str) -> dict[str, object]:
    """Every query of one key."""
    return {"exists": _outcome(lambda: disk.exists(key)),
            "is_file": _outcome(lambda: disk.is_file(key)),
            "is_dir": _outcome(lambda: disk.is_dir(key)),
            "load": _outcome(lambda: disk.load(key)),
            "stat": _outcome(lambda: disk.stat(key)),
            "list": _outcome(lambda: disk.list_dir(key))}


@pytest.fixture
def walk_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run as where openat2 does not exist (another OS, an old kernel)."""
    monkeypatch.setitem(_openat2._state, "call", None)
    monkeypatch.setitem(_openat2._state, "how", {})
    yield


@pytest.mark.skipif(not _has_openat2(),
                    reason="this kernel has no openat2 (Linux < 5.6, or filtered)")
def test_openat2_is_used_and_refuses_to_leave(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        assert _openat2.open_beneath(fd, "..", os.O_RDONLY) == -errno.EXDEV
        assert _openat2.open_beneath(fd, "/etc", os.O_RDONLY) == -errno.EXDEV
        assert _openat2.open_beneath(fd, "nothing", os.O_RDONLY) == -errno.ENOENT
    finally:
        os.close(fd)


@pytest.mark.parametrize("key", KEYS)
def test_fast_paths_answer_as_the_walk(tmp_path: Path, key: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    disk = _tree(tmp_path)
    fast = _answers(disk, key)
    monkeypatch.setitem(_openat2._state, "call", None)
    monkeypatch.setattr("memtype.storage._beneath.Resolver._quick_parent",
                        lambda self, key, follow_last: None)
    monkeypatch.setattr("memtype.storage._beneath.Resolver.open",
                        lambda self, key, flags: None)
    monkeypatch.setattr("memtype.storage._beneath.Resolver.quick_mode",
                        lambda self, key, follow: -1)
    assert _answers(disk, key) == fast


@pytest.mark.parametrize("key", ["out/secret.npy", "outrel/secret.npy", "a/b/c/outfile.npy"])
def test_links_out_of_the_root_stay_refused_without_openat2(tmp_path: Path, key: str,
                                                           walk_only: None) -> None:
    disk = _tree(tmp_path)
    assert not disk.is_file(key)
    with pytest.raises(StorePathError, match="outside|above the store root"):
        disk.load(key)


def test_exists_of_a_store_whose_root_was_removed_is_false(tmp_path: Path) -> None:
    disk = DiskStore(tmp_path / "root")
    os.rmdir(disk.root)
    assert not disk.exists("x.npy") and not disk.exists("a/b/x.npy")


# -- .npy headers ---------------------------------------------------------------------------
ARRAYS = [np.arange(3.0), np.arange(6, dtype=">i2").reshape(2, 3), np.array(5.0),
          np.asfortranarray(np.arange(20.0).reshape(4, 5)), np.arange(2).astype("M8[ns]"),
          np.array(["a", "bcd"]), np.zeros(2, [("a", "<i4"), ("b", "f8")]), np.zeros((0, 3)),
          np.zeros((3, 0), order="F"), np.ones(5, bool), np.zeros((2, 3, 4), np.complex64),
          np.zeros(4, "S3"), np.zeros(3, "V4"), np.zeros((1,) * 20, np.uint8)]


@pytest.mark.parametrize("a", ARRAYS, ids=lambda a: f"{a.dtype}-{a.shape}")
def test_quick_header_agrees_with_numpy(tmp_path: Path, a: np.ndarray) -> None:
    np.save(tmp_path / "a.npy", a)
    with open(tmp_path / "a.npy", "rb") as fh:
        fmt = np.lib.format
        fmt.read_magic(fh)
        expected = fmt.read_array_header_1_0(fh)
        fh.seek(0)
        assert npy_header(fh)[:3] == expected
        fh.seek(0)
        back = read_npy(fh, {})
    np.testing.assert_array_equal(back, a)
    assert back.dtype == a.dtype and back.flags.writeable
    owner = back if back.base is None else back.base
    assert owner.flags.owndata  # the data was read into the new array itself


HEADERS = {
    "keys in another order": (b"{'shape': (3,), 'fortran_order': False, 'descr': '<f8', }", None),
    "leading zeros": (b"{'descr': '<f8', 'fortran_order': False, 'shape': (03,), }", "valid"),
    "not a tuple": (b"{'descr': '<f8', 'fortran_order': False, 'shape': (3), }", "valid"),
    "not a dtype": (b"{'descr': '<q9', 'fortran_order': False, 'shape': (3,), }", "valid"),
    "extra key": (b"{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'x': 1, }", "valid"),
}


@pytest.mark.parametrize("name", sorted(HEADERS))
def test_other_headers_go_to_numpy(tmp_path: Path, name: str) -> None:
    """A header the quick parser does not take is NumPy's to accept or refuse."""
    text, error = HEADERS[name]
    text += b" " * (-(len(text) + 11) % 64) + b"\n"
    data = b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + b"\x00" * 24
    disk = DiskStore(tmp_path)
    (tmp_path / "h.npy").write_bytes(data)
    if error is None:
        np.testing.assert_array_equal(disk.load("h.npy"), np.zeros(3))
    else:
        with pytest.raises(StoreFormatError, match=error):
            disk.load("h.npy")


def test_a_file_that_shrinks_after_its_header_is_a_format_error() -> None:
    with pytest.raises(CorruptFile, match="ended after 5 of 8"):
        _read_exactly(io.BufferedReader(io.BytesIO(b"12345")), np.empty(8, np.uint8))
