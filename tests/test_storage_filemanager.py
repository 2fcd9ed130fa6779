"""FileManager: routing by name, errors passed through unchanged, pickling to worker processes."""

from __future__ import annotations

import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from memtype.errors import (
    StoreExistsError,
    StoreFormatError,
    StoreIsADirectoryError,
    StoreKeyError,
    StoreNotFoundError,
    StorePathError,
)
from memtype.storage import DiskStore, FileManager, MemoryStore, TieredStore, ZarrStore


@pytest.fixture
def fm(tmp_path: Path) -> FileManager:
    return FileManager({
        "disk": DiskStore(tmp_path / "out"),
        "memory": MemoryStore(),
        "zarr": ZarrStore(tmp_path / "out" / "plate.zarr", rows="AB", columns=[1, 2]),
    })


@pytest.mark.requires("zarr")
def test_routes_to_the_named_backend(fm: FileManager) -> None:
    a = np.arange(16, dtype=np.uint16).reshape(4, 4)
    fm.save(a, "x/a.tif", "disk", parents=True)
    fm.save(a, "x/a.tif", "memory", parents=True)
    assert fm.exists("x/a.tif", "disk") and fm.exists("x/a.tif", "memory")
    assert Path(fm.store("disk").root, "x/a.tif").is_file()
    assert fm.list_files("x", "memory") == ["x/a.tif"]
    fm.delete("x/a.tif", "memory")
    assert not fm.exists("x/a.tif", "memory") and fm.is_file("x/a.tif", "disk")
    np.testing.assert_array_equal(fm.load("x/a.tif", "disk"), a)


@pytest.mark.requires("zarr")
def test_every_call_is_routed(fm: FileManager) -> None:
    fm.ensure_directory("d", "memory")
    fm.save_batch([np.ones(2), np.zeros(2)], ["d/a", "d/b"], "memory", overwrite=True)
    assert [float(v[0]) for v in fm.load_batch(["d/a", "d/b"], "memory")] == [1.0, 0.0]
    fm.copy("d/a", "d/c", "memory")
    fm.move("d/c", "d/e", "memory")
    assert fm.list_dir("d", "memory") == ["a", "b", "e"]
    assert fm.is_dir("d", "memory") and fm.stat("d/a", "memory").size == 16
    fm.delete_all("d", "memory")
    assert not fm.exists("d", "memory")


@pytest.mark.requires("zarr")
def test_zarr_backend_and_transfer(fm: FileManager) -> None:
    a = np.random.default_rng(0).random((3, 8, 8)).astype(np.float32)
    fm.save(a, "B/2/0", "zarr", parents=True)
    fm.transfer("B/2/0", "zarr", "copies/b2.npy", "disk", parents=True)
    np.testing.assert_array_equal(fm.load("copies/b2.npy", "disk"), a)
    np.testing.assert_array_equal(fm.load("B/2/0", "zarr", index=1), a[1])


@pytest.mark.parametrize("backend", ["dsk", "Disk", "", None, 3])
@pytest.mark.requires("zarr")
def test_unknown_backend_never_guessed(fm: FileManager, backend: object) -> None:
    with pytest.raises(KeyError) as info:
        fm.load("x/a.tif", backend)  # type: ignore[arg-type]
    assert isinstance(info.value, StoreKeyError)
    assert "Expected one of: disk, memory, zarr" in str(info.value)


@pytest.mark.parametrize("call,error", [
    (lambda fm: fm.load("missing.npy", "disk"), StoreNotFoundError),
    (lambda fm: fm.load("missing", "memory"), StoreNotFoundError),
    (lambda fm: fm.save(np.zeros(2), "a.npz", "disk"), StoreFormatError),
    (lambda fm: fm.save(np.zeros(2), "../a.npy", "disk"), StorePathError),
    (lambda fm: fm.save(np.zeros((4, 4)), "A/1", "zarr"), StoreIsADirectoryError),  # a well
    (lambda fm: fm.list_files("nowhere", "disk"), StoreNotFoundError),
])
@pytest.mark.requires("zarr")
def test_errors_pass_through_with_their_own_type(fm: FileManager, call: object,
                                                 error: type) -> None:
    with pytest.raises(error) as info:
        call(fm)  # type: ignore[operator]
    assert type(info.value) is error


@pytest.mark.requires("zarr")
def test_exists_error_is_also_the_builtin(fm: FileManager) -> None:
    fm.save("a", "t.txt", "disk")
    with pytest.raises(FileExistsError) as info:
        fm.save("b", "t.txt", "disk")
    assert type(info.value) is StoreExistsError


def test_registry_must_hold_stores() -> None:
    with pytest.raises(TypeError, match="must be a memtype Store"):
        FileManager({"disk": "/data"})  # type: ignore[dict-item]


@pytest.mark.requires("zarr")
def test_backends_view_is_read_only(fm: FileManager) -> None:
    with pytest.raises(TypeError):
        fm.backends["other"] = MemoryStore()  # type: ignore[index]
    assert set(fm.backends) == {"disk", "memory", "zarr"}


@pytest.mark.requires("zarr")
def test_pickles_by_names_and_parameters(fm: FileManager) -> None:
    fm.save(np.zeros(1_000_000), "big", "memory")  # 8 MB that must not travel
    fm.save("hello", "note.txt", "disk")
    blob = pickle.dumps(fm)
    assert len(blob) < 4096
    clone = pickle.loads(blob)
    assert clone.spec() == fm.spec()
    assert clone.load("note.txt", "disk") == "hello"
    assert not clone.exists("big", "memory")  # memory contents are per process
    assert fm.spec()["disk"] == ("disk", {"root": fm.store("disk").root, "fsync": False,
                                          "read_only": False,
                                          "follow_symlinks_outside": False})


def test_from_spec(tmp_path: Path) -> None:
    fm = FileManager.from_spec({"d": ("disk", {"root": str(tmp_path)}),
                                "t": ("tiered", {"budget_bytes": 1024})})
    assert isinstance(fm.store("d"), DiskStore) and isinstance(fm.store("t"), TieredStore)
    with pytest.raises(StoreKeyError, match="Unknown store backend 'nfs'"):
        FileManager.from_spec({"x": ("nfs", {})})


def _worker_round_trip(fm: FileManager, i: int) -> float:
    """Runs in a spawned process: read the parent's file, write one of its own."""
    a = fm.load("shared.npy", "disk")
    fm.save(a + i, f"worker{i}.npy", "disk")
    return float(a.sum())


@pytest.mark.requires("zarr")
def test_workers_receive_a_working_file_manager(fm: FileManager) -> None:
    fm.save(np.arange(4.0), "shared.npy", "disk")
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
        sums = list(pool.map(_worker_round_trip, [fm, fm], [1, 2]))
    assert sums == [6.0, 6.0]
    np.testing.assert_array_equal(fm.load("worker2.npy", "disk"), np.arange(4.0) + 2)
