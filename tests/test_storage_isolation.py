"""Issue 12 (storage, items 1, 5, 7, 8): TieredStores never read each other's spill files,
saved values are private copies (tf.Variable, masked arrays), a failed save changes nothing,
and arrays that cannot be spilled stay in memory."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memtype.errors import MemtypeError, StoreFormatError
from memtype.storage import MemoryStore, TieredStore
from tests.test_storage_disk import run_size_limited


def spill_files(spill: Path) -> list[Path]:
    return sorted(f for d in spill.iterdir() for f in d.iterdir())


# -- item 1: spill files are private ----------------------------------------------------
def test_two_stores_sharing_a_spill_dir_keep_their_own_data(tmp_path: Path) -> None:
    a, b = (TieredStore(1, host_budget_bytes=0, spill_dir=tmp_path) for _ in range(2))
    a.save(np.full(100, 1.0), "x")
    a.save(np.zeros(1000), "p")
    b.save(np.full(100, 2.0), "x")
    b.save(np.zeros(1000), "p")
    assert a.tier_of("x") == b.tier_of("x") == "disk"
    assert a.load("x")[0] == 1.0 and b.load("x")[0] == 2.0


def test_stores_in_two_processes_share_a_spill_dir(tmp_path: Path) -> None:
    script = (
        "import sys, numpy as np\n"
        "from memtype.storage import TieredStore\n"
        "s = TieredStore(1, host_budget_bytes=0, spill_dir=sys.argv[1])\n"
        "s.save(np.full(100, float(sys.argv[2])), 'x'); s.save(np.zeros(10), 'p')\n"
        "sys.stdin.readline()\n"
        "print(s.load('x')[0])\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), str(v)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
             for v in (1, 2)]
    outs = [p.communicate("\n", timeout=120)[0].strip() for p in procs]
    assert outs == ["1.0", "2.0"]
    assert list(tmp_path.iterdir()) == []  # each process removed its private directory


def test_a_replaced_spill_file_is_never_read(tmp_path: Path) -> None:
    store = TieredStore(0, spill_dir=tmp_path)
    store.save(np.full(100, 1.0), "x")
    store.save(np.zeros(10), "p")
    (victim,) = [f for f in spill_files(tmp_path) if f.stat().st_size == 800]
    victim.unlink()
    victim.write_bytes(np.full(100, 9.0).tobytes())  # same size, another file
    with pytest.raises(StoreFormatError, match="not the file this TieredStore wrote"):
        store.load("x")


def test_spill_directory_goes_with_the_store(tmp_path: Path) -> None:
    store = TieredStore(0, spill_dir=tmp_path)
    store.save(np.ones(10), "a")
    store.save(np.ones(10), "b")
    assert len(list(tmp_path.iterdir())) == 1
    del store
    import gc

    gc.collect()
    assert list(tmp_path.iterdir()) == []


# -- item 5: private copies ---------------------------------------------------------------
@pytest.mark.parametrize("cls", [MemoryStore, lambda: TieredStore(1 << 20)],
                         ids=["memory", "tiered"])
@pytest.mark.requires("tensorflow")
def test_a_saved_tf_variable_is_a_private_copy(cls: object) -> None:
    tf = importlib.import_module("tensorflow")
    store = cls()  # type: ignore[operator]
    v = tf.Variable([1.0, 2.0])
    store.save(v, "v")
    v.assign([9.0, 9.0])
    loaded = store.load("v")
    assert not isinstance(loaded, tf.Variable)
    np.testing.assert_array_equal(loaded.numpy(), [1.0, 2.0])


def masked() -> np.ma.MaskedArray:
    return np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False], fill_value=-1.0)


def assert_same_masked(got: object, want: np.ma.MaskedArray) -> None:
    assert isinstance(got, np.ma.MaskedArray)
    np.testing.assert_array_equal(np.ma.getmaskarray(got), np.ma.getmaskarray(want))
    np.testing.assert_array_equal(got.data, want.data)
    assert got.fill_value == want.fill_value


def test_memory_store_keeps_the_mask_and_isolates_it() -> None:
    store, m = MemoryStore(), masked()
    store.save(m, "m")
    m.mask[0] = True
    m[2] = 7.0
    assert_same_masked(store.load("m"), masked())
    with pytest.raises(ValueError):
        store.load("m").mask[1] = False  # the stored mask is read-only
    writable = store.load("m", copy=True)
    writable.mask[1] = False
    assert_same_masked(store.load("m"), masked())


def test_tiered_store_keeps_the_mask_through_a_spill(tmp_path: Path) -> None:
    store = TieredStore(0, spill_dir=tmp_path)
    store.save(masked(), "m")
    store.save(np.zeros(4), "other")
    assert store.tier_of("m") == "disk"
    assert_same_masked(store.load("m"), masked())


# -- item 7: a failed save leaves the store as it was ---------------------------------------
FULL_SPILL_SCRIPT = """
import sys
import numpy as np
from memtype.errors import StoreFullError
from memtype.storage import TieredStore
store = TieredStore(1, host_budget_bytes=0, spill_dir=sys.argv[1])
store.save(np.full(1000, 1.0), "early")
store.save(np.full(10, 2.0), "x", parents=False)
print(store.tier_of("early"))
store.save(np.zeros(200_000), "big")  # 1.6 MB stays on the device tier (just saved)
try:
    store.save(np.zeros(10), "deep/q", parents=True)  # spilling "big" cannot fit
except StoreFullError as exc:
    print("full", isinstance(exc, OSError), exc.errno)
print(store.exists("deep/q"), store.exists("deep"), store.list_files("", recursive=True))
print(bool((store.load("early") == 1.0).all()), store.stats().spill_failures >= 1)
store.delete("big")
store.save(np.zeros(10), "deep/q", parents=True)  # the retry succeeds
print(store.exists("deep/q"))
"""


def test_full_spill_disk_leaves_the_store_unchanged(tmp_path: Path) -> None:
    lines = run_size_limited(FULL_SPILL_SCRIPT, str(tmp_path / "spill"))
    assert lines[0] == "disk"
    assert lines[1].split()[:2] == ["full", "True"]  # a StoreFullError is an OSError
    assert lines[2] == "False False ['big', 'early', 'x']"  # nothing of the failed save
    assert lines[3] == "True True"  # the others still load; the failure is counted
    assert lines[4] == "True"


OVERWRITE_SCRIPT = """
import sys
import numpy as np
from memtype.errors import StoreFullError
from memtype.storage import TieredStore
store = TieredStore(1, host_budget_bytes=0, spill_dir=sys.argv[1])
store.save(np.full(10, 1.0), "k")
store.save(np.zeros(200_000), "big")  # spills k; big stays (just saved)
try:
    store.save(np.full(10, 2.0), "k", overwrite=True)
except StoreFullError:
    print("full")
print(store.load("k").tolist() == [1.0] * 10)
"""


def test_failed_overwrite_keeps_the_old_value(tmp_path: Path) -> None:
    assert run_size_limited(OVERWRITE_SCRIPT, str(tmp_path / "spill")) == ["full", "True"]


# -- item 8: what cannot be spilled stays in memory ------------------------------------------
@pytest.mark.parametrize("value", [
    np.array(["ab", "c"]),
    np.array([b"x", b"yz"]),
    np.zeros(2, dtype=[("a", "i4"), ("b", "f8")]),
    np.array([1, None, "s"], dtype=object),
], ids=["unicode", "bytes", "structured", "object"])
def test_every_numpy_dtype_survives_spilling(tmp_path: Path, value: np.ndarray) -> None:
    store = TieredStore(0, spill_dir=tmp_path)
    store.save(value, "v")
    store.save(np.zeros(3), "w")
    store.save(np.zeros(3), "z")  # no error from an unrelated later save
    expected = "device" if value.dtype.hasobject else "disk"
    assert store.tier_of("v") == expected
    got = store.load("v")
    assert got.dtype == value.dtype
    assert got.tolist() == value.tolist()


def test_memory_store_refuses_what_it_cannot_copy() -> None:
    import threading

    with pytest.raises(StoreFormatError, match="copy=False") as info:
        MemoryStore().save(threading.Lock(), "lock")
    assert isinstance(info.value, MemtypeError) and isinstance(info.value, ValueError)
    store = MemoryStore()
    lock = threading.Lock()
    store.save(lock, "lock", copy=False)
    assert store.load("lock") is lock
