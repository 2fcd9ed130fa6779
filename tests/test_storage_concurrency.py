"""8 threads and 4 processes writing and reading distinct and overlapping keys: nothing lost."""

from __future__ import annotations

import json
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.errors import StoreExistsError
from memtype.storage import DiskStore, MemoryStore, Store, TieredStore, ZarrStore

THREADS = 8
PROCESSES = 4
PER_WORKER = 12


def image(worker: int, i: int) -> np.ndarray:
    """An image whose every value names who wrote it."""
    return np.full((2, 16, 16), worker * 1000 + i, np.uint16)


def uniform(a: Any) -> bool:
    a = np.asarray(a)
    return bool(a.min() == a.max())


# -- how each store names things ------------------------------------------------------------
def paths_for(store: Store) -> tuple[Callable[[int, int], str], str, str]:
    """(distinct path for worker w, item i), an overlapping path, a create-once path."""
    if isinstance(store, ZarrStore):
        rows = "ABCDEFGH"
        return (lambda w, i: f"{rows[w % 8]}/{w // 8 * PER_WORKER + i + 1}/0",
                "P/1/0", "Q/1/0")
    ext = ".npy" if isinstance(store, DiskStore) else ""
    return (lambda w, i: f"w{w}/item{i}{ext}", f"shared/item{ext}", f"once/item{ext}")


def shared_well_field(store: Store, w: int) -> str | None:
    """A per-worker field in one well that every worker writes to (zarr only)."""
    return f"S/1/{w}" if isinstance(store, ZarrStore) else None


def work(store: Store, w: int) -> dict[str, Any]:
    """One worker: distinct keys, the overlapping key, a create-once race, and reads."""
    distinct, overlap, once = paths_for(store)
    for i in range(PER_WORKER):
        store.save(image(w, i), distinct(w, i), parents=True)
        store.save(image(w, i), overlap, parents=True, overwrite=True)
        out = store.load(overlap)
        assert uniform(out), "a torn read of the overlapping key"
    field = shared_well_field(store, w)
    if field is not None:
        store.save(image(w, 99), field, parents=True)
    won = True
    try:
        store.save(image(w, 0), once, parents=True)
    except StoreExistsError:
        won = False
    for i in range(PER_WORKER):  # read back everything this worker wrote
        np.testing.assert_array_equal(np.asarray(store.load(distinct(w, i))), image(w, i))
    return {"won": won}


def check(store: Store, workers: int, results: list[dict[str, Any]]) -> None:
    distinct, overlap, once = paths_for(store)
    for w in range(workers):
        for i in range(PER_WORKER):
            np.testing.assert_array_equal(np.asarray(store.load(distinct(w, i))), image(w, i))
    last = np.asarray(store.load(overlap))
    assert uniform(last) and int(last.flat[0]) % 1000 < PER_WORKER
    assert sum(r["won"] for r in results) == 1, "exactly one create-once writer must win"
    assert store.is_file(once)
    if isinstance(store, ZarrStore):
        check_plate(store, workers)


def check_plate(store: ZarrStore, workers: int) -> None:
    """Every written well and every field of the shared well is in the metadata."""
    root = Path(store.root)
    images = json.loads((root / "S/1/zarr.json").read_text())["attributes"]["ome"]["well"]
    assert sorted(int(i["path"]) for i in images["images"]) == list(range(workers))
    wells = json.loads((root / "zarr.json").read_text())["attributes"]["ome"]["plate"]["wells"]
    listed = {w["path"] for w in wells}
    on_disk = {f.rsplit("/", 1)[0] for f in store.list_files("", recursive=True)}
    assert listed == on_disk and len(listed) == workers * PER_WORKER + 3


# -- threads ----------------------------------------------------------------------------------
def make(kind: str, tmp_path: Path) -> Store:
    if kind == "memory":
        return MemoryStore()
    if kind == "tiered":
        return TieredStore(budget_bytes=20 * 1024, spill_dir=tmp_path / "spill")
    if kind == "disk":
        return DiskStore(tmp_path / "disk")
    return ZarrStore(tmp_path / "plate.zarr", codec="none")


@pytest.mark.parametrize("kind", ["memory", "tiered", "disk", "zarr"])
@pytest.mark.requires("zarr")
def test_eight_threads(kind: str, tmp_path: Path) -> None:
    store = make(kind, tmp_path)
    start = threading.Barrier(THREADS)

    def run(w: int) -> dict[str, Any]:
        start.wait()
        return work(store, w)

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(run, range(THREADS)))
    check(store, THREADS, results)


def test_tiered_store_spilled_under_threads(tmp_path: Path) -> None:
    store = make("tiered", tmp_path)
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda w: work(store, w), range(THREADS)))
    s = store.stats()
    assert s.spills_to_disk > 0 and s.reloads > 0
    assert s.device_bytes + s.disk_bytes == s.device_entries * 1024 + s.disk_entries * 1024


# -- processes ----------------------------------------------------------------------------------
def _process_worker(store: Store, w: int) -> dict[str, Any]:
    return work(store, w)


@pytest.mark.parametrize("kind", ["disk", "zarr"])
@pytest.mark.requires("zarr")
def test_four_processes(kind: str, tmp_path: Path) -> None:
    store = make(kind, tmp_path)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(PROCESSES, mp_context=ctx) as pool:
        results = list(pool.map(_process_worker, [store] * PROCESSES, range(PROCESSES)))
    check(store, PROCESSES, results)
