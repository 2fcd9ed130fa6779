"""TieredStore: eviction order, reference counts, pressure, round trips for every framework."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype
from memtype.errors import StoreFormatError, StoreUsageError
from memtype.frameworks import load_adapter
from memtype.storage import TieredStore

KB = 4096  # bytes of one test entry: 32 x 32 float32


def entry(value: float, memory_type: str = "numpy", dtype: str = "float32") -> Any:
    return memtype.convert(np.full((32, 32), value, dtype=dtype), memory_type)


def as_numpy(x: Any) -> np.ndarray:
    return np.asarray(memtype.convert(x, "numpy"))


@pytest.fixture
def spill(tmp_path: Path) -> Path:
    return tmp_path / "spill"


def spilled_files(spill: Path) -> list[str]:
    """Spill files in every store's private directory under ``spill``."""
    if not spill.exists():
        return []
    return sorted(f.name for d in spill.iterdir() for f in d.iterdir())


# -- budget and LRU ---------------------------------------------------------------------------
def test_over_budget_spills_least_recently_used(spill: Path) -> None:
    store = TieredStore(budget_bytes=2 * KB, spill_dir=spill)
    for i in range(3):
        store.save(entry(i), f"k{i}")
    assert [store.tier_of(f"k{i}") for i in range(3)] == ["disk", "device", "device"]
    s = store.stats()
    assert (s.device_bytes, s.disk_bytes, s.spills_to_disk) == (2 * KB, KB, 1)
    assert spilled_files(spill) == ["0.raw"]


def test_load_brings_back_and_refreshes_recency(spill: Path) -> None:
    store = TieredStore(budget_bytes=2 * KB, spill_dir=spill)
    for i in range(3):
        store.save(entry(i), f"k{i}")
    out = store.load("k0")
    assert isinstance(out, np.ndarray) and float(out[0, 0]) == 0.0
    assert [store.tier_of(f"k{i}") for i in range(3)] == ["device", "disk", "device"]
    store.load("k2")
    store.save(entry(3), "k3")  # k0 is now the least recently used
    assert [store.tier_of(f"k{i}") for i in range(4)] == ["disk", "disk", "device", "device"]
    s = store.stats()
    assert s.reloads == 1 and s.spills_to_disk == 3 and s.device_entries == 2


def test_without_a_disk_tier_host_arrays_stay(spill: Path) -> None:
    store = TieredStore(budget_bytes=KB)
    for i in range(3):
        store.save(entry(i), f"k{i}")
    s = store.stats()
    assert s.device_entries == 3 and s.device_bytes == 3 * KB and s.spills_to_disk == 0


def test_delete_removes_the_spilled_copy(spill: Path) -> None:
    store = TieredStore(budget_bytes=0, spill_dir=spill)
    store.save(entry(1), "a")
    store.save(entry(2), "b")
    assert store.tier_of("a") == "disk" and spilled_files(spill) == ["0.raw"]
    store.delete("a")
    store.delete_all("")
    assert spilled_files(spill) == [] and store.stats().disk_bytes == 0


def test_overwrite_releases_the_old_entry(spill: Path) -> None:
    store = TieredStore(budget_bytes=0, spill_dir=spill)
    store.save(entry(1), "a")
    store.save(entry(2), "b")
    store.save(entry(3), "a", overwrite=True)
    assert float(as_numpy(store.load("a"))[0, 0]) == 3.0
    assert store.stats().device_entries + store.stats().disk_entries == 2


# -- reference counts -----------------------------------------------------------------------
def test_acquired_entries_stay_resident(spill: Path) -> None:
    store = TieredStore(budget_bytes=KB, spill_dir=spill)
    store.save(entry(0), "held")
    x = store.acquire("held")
    for i in range(3):
        store.save(entry(i + 1), f"k{i}")
    assert store.tier_of("held") == "device" and store.stats().in_use == 1
    assert float(x[0, 0]) == 0.0
    store.release("held")
    store.save(entry(9), "k9")
    assert store.tier_of("held") == "disk" and store.stats().in_use == 0


def test_borrowed_context_and_unbalanced_release(spill: Path) -> None:
    store = TieredStore(budget_bytes=0, spill_dir=spill)
    store.save(entry(5), "a")
    store.save(entry(6), "b")
    with store.borrowed("a") as x:
        assert float(x[0, 0]) == 5.0 and store.tier_of("a") == "device"
        store.save(entry(7), "c")
        assert store.tier_of("a") == "device"
    assert store.stats().in_use == 0
    with pytest.raises(StoreUsageError, match="without a matching acquire"):
        store.release("a")


# -- pressure ----------------------------------------------------------------------------------
class Pressure:
    """A pressure gauge the test sets by hand; records what it was asked."""

    def __init__(self) -> None:
        self.value = 0.0
        self.asked: list[int | None] = []

    def __call__(self, gpu_id: int | None) -> float:
        self.asked.append(gpu_id)
        return self.value


def test_pressure_spills_below_budget(spill: Path) -> None:
    gauge = Pressure()
    store = TieredStore(budget_bytes=1 << 30, spill_dir=spill, pressure=gauge,
                        pressure_threshold=0.8)
    for i in range(3):
        store.save(entry(i), f"k{i}")
    assert store.stats().disk_entries == 0 and gauge.asked and set(gauge.asked) == {None}
    gauge.value = 0.85
    store.trim()
    assert store.stats().disk_entries == 3 and store.stats().device_entries == 0
    gauge.value = 0.1
    store.load("k1")
    assert store.tier_of("k1") == "device" and store.stats().disk_entries == 2


def test_pressure_spares_acquired_entries(spill: Path) -> None:
    gauge = Pressure()
    store = TieredStore(budget_bytes=1 << 30, spill_dir=spill, pressure=gauge)
    store.save(entry(1), "a")
    store.save(entry(2), "b")
    store.acquire("a")
    gauge.value = 1.0
    store.trim()
    assert store.tier_of("a") == "device" and store.tier_of("b") == "disk"


# -- every framework on this machine ----------------------------------------------------------
def test_round_trip_through_disk_keeps_type_and_device(memory_type: str, spill: Path) -> None:
    store = TieredStore(budget_bytes=0, spill_dir=spill, host_budget_bytes=0)
    x = entry(3.5, memory_type)
    adapter = load_adapter(memory_type)
    store.save(x, "x")
    store.save(entry(1, memory_type), "other")
    assert store.tier_of("x") == "disk"
    out = store.load("x")
    assert memtype.detect_memory_type(out).value == memory_type
    assert adapter.device_of(out) == adapter.device_of(x)
    np.testing.assert_array_equal(as_numpy(out), as_numpy(x))


@pytest.mark.parametrize("dtype", ["bool", "uint16", "float16", "complex64", ">f8"])
def test_dtypes_survive_spilling(dtype: str, spill: Path) -> None:
    store = TieredStore(budget_bytes=0, spill_dir=spill)
    x = (np.arange(24).reshape(2, 3, 4) % 3).astype(dtype)
    store.save(x, "x")
    store.save(entry(0), "y")
    out = store.load("x")
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, x)


@pytest.mark.requires("torch")
def test_torch_bfloat16_survives_spilling(spill: Path) -> None:
    torch = importlib.import_module("torch")
    store = TieredStore(budget_bytes=0, spill_dir=spill)
    t = torch.linspace(-3, 3, 64).reshape(8, 8).to(torch.bfloat16)
    store.save(t, "t")
    store.save(entry(0), "y")
    out = store.load("t")
    assert out.dtype == torch.bfloat16 and torch.equal(out, t)


@pytest.mark.requires("pyclesperanto")
@pytest.mark.opencl
def test_opencl_arrays_spill_to_the_host_tier_then_disk(spill: Path) -> None:
    """pyclesperanto arrays live on an OpenCL device: the device -> host -> disk path."""
    gauge = Pressure()
    store = TieredStore(budget_bytes=KB, host_budget_bytes=KB, spill_dir=spill, pressure=gauge)
    for i in range(3):
        store.save(entry(i, "pyclesperanto"), f"k{i}")
    assert [store.tier_of(f"k{i}") for i in range(3)] == ["disk", "host", "device"]
    store.trim()  # within budget now: the gauge decides, asked about the entry's device
    assert gauge.asked == [0] and store.tier_of("k2") == "device"
    s = store.stats()
    assert (s.spills_to_host, s.spills_to_disk) == (2, 1)
    out = store.load("k0")
    assert memtype.detect_memory_type(out) is memtype.MemoryType.PYCLESPERANTO
    np.testing.assert_array_equal(as_numpy(out), np.zeros((32, 32), np.float32))
    np.testing.assert_array_equal(as_numpy(store.load("k1")), np.ones((32, 32), np.float32))


# -- copies and bad input ---------------------------------------------------------------------
def test_copy_false_keeps_a_reference() -> None:
    store = TieredStore(budget_bytes=1 << 20)
    a = np.zeros(4)
    store.save(a, "ref", copy=False)
    store.save(a, "own")
    a[0] = 7
    assert store.load("ref")[0] == 7 and store.load("own")[0] == 0
    assert not store.load("own").flags.writeable and store.load("own", copy=True).flags.writeable


@pytest.mark.parametrize("data", [{"a": 1}, [1, 2, 3], "text"])
def test_non_arrays_are_refused(data: Any) -> None:
    store = TieredStore(budget_bytes=1 << 20)
    with pytest.raises(StoreFormatError, match="holds arrays"):
        store.save(data, "x")
    assert not store.exists("x")


def test_negative_budget() -> None:
    with pytest.raises(StoreUsageError, match="budget") as info:
        TieredStore(budget_bytes=-1)
    assert isinstance(info.value, ValueError)


# -- VRAM (needs a CUDA GPU) ----------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.requires("torch")
def test_cuda_tensor_spills_to_pinned_host_and_back(spill: Path) -> None:
    torch = importlib.import_module("torch")
    store = TieredStore(budget_bytes=1 << 20, spill_dir=spill)
    big = [torch.full((512, 512), float(i), device="cuda:0") for i in range(3)]  # 1 MiB each
    for i, t in enumerate(big):
        store.save(t, f"t{i}")
    assert store.tier_of("t0") == "host" and store.tier_of("t2") == "device"
    host = store._tiers.host.load("0")  # the pinned copy
    assert host.is_pinned()
    out = store.load("t0")
    assert out.device == torch.device("cuda:0") and torch.equal(out, big[0])


@pytest.mark.gpu
@pytest.mark.requires("torch")
def test_default_pressure_is_consulted_for_gpu_entries(spill: Path) -> None:
    torch = importlib.import_module("torch")
    from memtype.gpu import memory_pressure

    store = TieredStore(budget_bytes=1 << 40, spill_dir=spill, pressure_threshold=0.0)
    store.save(torch.ones(16, device="cuda:0"), "a")
    store.save(torch.ones(16, device="cuda:0"), "b")
    assert 0.0 <= memory_pressure(0) <= 1.0
    assert store.tier_of("a") == "host"  # threshold 0: any pressure spills


@pytest.mark.parametrize("spilled", [False, True], ids=["device", "disk"])
def test_load_copy_of_a_masked_array_is_writable(spilled: bool, spill: Path) -> None:
    """load(copy=True) made its own copy (copy_value, then the data flag set writable) and
    returned a masked array whose mask was still read-only; it now shares MemoryStore's
    writable_copy."""
    store = TieredStore(budget_bytes=0 if spilled else 1 << 20, spill_dir=spill)
    store.save(np.ma.MaskedArray(np.arange(4.0), mask=[0, 1, 0, 0]), "m")
    store.save(np.zeros(4), "n")  # over a budget of 0: "m" goes to disk
    assert store.tier_of("m") == ("disk" if spilled else "device")
    out = store.load("m", copy=True)
    out[0] = 7.0
    out[2] = np.ma.masked
    assert out.tolist() == [7.0, None, None, 3.0]
    assert store.load("m").tolist() == [0.0, None, 2.0, 3.0]
