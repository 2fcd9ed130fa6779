"""ZarrStore opens nothing outside its plate: locks, chunks, levels, copies, and races.

Every path the store (and zarr through it) opens is resolved below the plate's root with
descriptor-relative, no-follow operations, as the DiskStore's are (issue 21, items 4-6).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.errors import MemtypeError, StorePathError
from memtype.storage import ZarrStore

pytestmark = pytest.mark.requires("zarr")

IMAGE = np.arange(2 * 8 * 10, dtype=np.uint16).reshape(2, 8, 10)
SECRET = np.full((2, 8, 10), 7777, dtype=np.uint16)


@pytest.fixture
def plate(tmp_path: Path) -> ZarrStore:
    store = ZarrStore(tmp_path / "plate.zarr", codec="none")
    store.save(IMAGE, "A/1/0", parents=True)
    return store


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A plate outside ours holding SECRET at the same keys."""
    other = ZarrStore(tmp_path / "outside.zarr", codec="none")
    other.save(SECRET, "A/1/0", parents=True)
    other.save(SECRET, "A/1/1", parents=True)
    return Path(other.root)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and mtime (what a write outside changes)."""
    out = {}
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            st = os.lstat(os.path.join(here, name))
            out[os.path.relpath(os.path.join(here, name), root)] = (st.st_size, st.st_mtime_ns)
    return out


def swap_for_link(path: Path, target: Path) -> None:
    """Put a symbolic link to ``target`` where ``path`` was (the original is kept aside)."""
    os.rename(path, path.with_name(path.name + "-aside"))
    os.symlink(target, path)


# -- locks -----------------------------------------------------------------------------------
def test_a_linked_lock_directory_is_refused(plate: ZarrStore, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    swap_for_link(Path(plate.root, ".memtype-locks"), elsewhere)
    with pytest.raises(StorePathError, match="outside"):
        plate.save(IMAGE, "A/2/0", parents=True)
    with pytest.raises(StorePathError, match="outside"):
        plate.load("A/1/0")
    assert os.listdir(elsewhere) == []


@pytest.mark.parametrize("lock", ["well.A.1.lock", "plate.lock"])
def test_a_linked_lock_file_is_refused(plate: ZarrStore, tmp_path: Path, lock: str) -> None:
    plate.save(IMAGE, "B/1/0", parents=True)  # the plate lock exists too
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = Path(plate.root, ".memtype-locks", lock)
    path.unlink()
    os.symlink(elsewhere / "created.lock", path)
    field = "A/1/1" if lock.startswith("well") else "C/1/0"
    with pytest.raises(StorePathError, match="symbolic link"):
        plate.save(IMAGE, field, parents=True)
    assert os.listdir(elsewhere) == []


# -- links below a field -----------------------------------------------------------------------
def test_a_chunk_file_linked_outside_is_not_read(plate: ZarrStore, outside: Path) -> None:
    chunk = Path(plate.root, "A/1/0/0/c/1/0/0")
    chunk.unlink()
    os.symlink(outside / "A/1/0/0/c/1/0/0", chunk)
    with pytest.raises(StorePathError, match="outside"):
        plate.load("A/1/0")
    np.testing.assert_array_equal(plate.load("A/1/0", index=0), IMAGE[0])  # chunk 0 is real


def test_a_chunk_directory_linked_outside_is_not_read(plate: ZarrStore, outside: Path) -> None:
    swap_for_link(Path(plate.root, "A/1/0/0/c"), outside / "A/1/0/0/c")
    with pytest.raises(StorePathError, match="outside"):
        plate.load("A/1/0")


@pytest.mark.parametrize("how", ["load", "copy", "move"])
def test_a_level_directory_linked_outside_is_never_read(plate: ZarrStore, outside: Path,
                                                        how: str) -> None:
    swap_for_link(Path(plate.root, "A/1/0/0"), outside / "A/1/0/0")
    before = snapshot(outside)
    if how == "load":
        with pytest.raises(StorePathError, match="outside"):
            plate.load("A/1/0")
    else:
        getattr(plate, how)("A/1/0", "A/3/0", parents=True)  # the link is copied as a link
        with pytest.raises(StorePathError, match="outside"):
            plate.load("A/3/0")
    assert snapshot(outside) == before


def test_links_inside_the_plate_are_followed(plate: ZarrStore) -> None:
    plate.save(IMAGE + 1, "A/1/1")
    chunk = Path(plate.root, "A/1/1/0/c/0/0/0")
    chunk.unlink()
    os.symlink("../../../../../0/0/c/0/0/0", chunk)  # level 0 of field 0, inside the plate
    np.testing.assert_array_equal(plate.load("A/1/1", index=0), IMAGE[0])


def test_following_links_outside_when_asked(plate: ZarrStore, outside: Path) -> None:
    swap_for_link(Path(plate.root, "A/1/0/0"), outside / "A/1/0/0")
    allowed = ZarrStore(plate.root, follow_symlinks_outside=True)
    np.testing.assert_array_equal(allowed.load("A/1/0"), SECRET)


# -- a directory swapped for a link while the store works --------------------------------------
def _exchange() -> Callable[[Path, Path], None] | None:
    """Linux ``renameat2(RENAME_EXCHANGE)``: swap two names atomically (None where absent)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "renameat2"):
        return None

    def exchange(a: Path, b: Path) -> None:
        if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), str(a))

    return exchange


EXCHANGE = _exchange()


class Swapper(threading.Thread):
    """Swaps directory ``path`` for a link to ``target`` and back, atomically (the path is
    never missing, so the store cannot recreate it), in a loop until stopped."""

    def __init__(self, path: Path, target: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.stop = path, threading.Event()
        self.link = path.with_name(path.name + "-link")
        os.symlink(target, self.link)

    def run(self) -> None:
        assert EXCHANGE is not None
        while not self.stop.is_set():
            EXCHANGE(self.path, self.link)  # the path is the link
            time.sleep(0.0005)
            EXCHANGE(self.path, self.link)  # the directory is back
            time.sleep(0.002)


@contextlib.contextmanager
def swapping(path: Path, target: Path) -> Iterator[None]:
    swapper = Swapper(path, target)
    swapper.start()
    try:
        yield
    finally:
        swapper.stop.set()
        swapper.join()


def attempts(call: Callable[[], Any], seconds: float) -> list[Any]:
    """What ``call`` returned during ``seconds`` (memtype errors are refusals, not results)."""
    results = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            results.append(call())
        except MemtypeError:
            continue
    return results


@pytest.mark.skipif(EXCHANGE is None, reason="renameat2(RENAME_EXCHANGE) is absent "
                    "(Linux 3.15+ with glibc 2.28+)")
# zarr abandons the writes it had queued when one fails (a refused link): their coroutines
# are never awaited, and Python says so when it collects them.
@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
@pytest.mark.parametrize("swapped", ["A", "A/1", "A/1/0", "A/1/0/0", ".memtype-locks"])
def test_a_directory_swapped_for_a_link_during_saves_and_loads(
        plate: ZarrStore, outside: Path, swapped: str) -> None:
    plate.save(IMAGE, "A/1/1")
    for lock in (outside / ".memtype-locks").iterdir():
        lock.unlink()  # a lock taken outside would create its file there
    before = snapshot(outside)

    def save() -> None:
        plate.save(IMAGE, "A/1/1", overwrite=True)

    with swapping(Path(plate.root, swapped), outside / swapped):
        attempts(save, 0.5)
        loaded = attempts(lambda: plate.load("A/1/0"), 0.5)
    with warnings.catch_warnings():  # the abandoned writes' coroutines, collected here
        warnings.simplefilter("ignore", RuntimeWarning)
        gc.collect()
    assert snapshot(outside) == before  # nothing written or created outside
    assert loaded, "no load went through in half a second"
    for image in loaded:
        np.testing.assert_array_equal(image, IMAGE)  # nothing read from outside
    np.testing.assert_array_equal(plate.load("A/1/1"), IMAGE)
