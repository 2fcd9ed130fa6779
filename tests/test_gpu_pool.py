"""memtype.gpu.pool: tracked allocation by source, reference counts, budgets, pools."""

from __future__ import annotations

import importlib
import importlib.util
import threading
from typing import Any

import numpy as np
import psutil
import pytest

import memtype as mt
from memtype.errors import AllocationKeyError, MemoryBudgetError, MemtypeError
from memtype.frameworks import load_adapter
from memtype.gpu.pool import GPUMemoryManager, GPUMemoryPool, get_gpu_memory_pool
from tests.frameworks import has_gpu

no_gpu = pytest.mark.no_gpu


def _host(x: Any) -> np.ndarray:
    return np.asarray(load_adapter(mt.detect_memory_type(x).value).to_numpy(x))


def test_allocate_makes_zeros_of_each_memory_type(memory_type: str) -> None:
    manager = GPUMemoryManager()
    a = manager.allocate((4, 8), "float32", memory_type, source="tiles")
    assert mt.detect_memory_type(a).value == memory_type
    values = _host(a)
    assert values.shape == (4, 8) and values.dtype == np.float32
    assert not values.any()
    assert manager.stats() == {"tiles": {"arrays": 1, "bytes": 128, "peak_bytes": 128}}


@pytest.mark.parametrize("spelling", [
    "float32", np.float32, np.dtype("float32"),
    pytest.param("torch.float32", marks=pytest.mark.requires("torch")),
    pytest.param("tensorflow.float32", marks=pytest.mark.requires("tensorflow"))])
def test_dtype_spellings(spelling: Any) -> None:
    if spelling == "torch.float32":
        spelling = importlib.import_module("torch").float32
    elif spelling == "tensorflow.float32":
        spelling = importlib.import_module("tensorflow").float32
    manager = GPUMemoryManager()
    a = manager.allocate(10, spelling, "numpy")
    assert a.dtype == np.float32 and a.shape == (10,)
    assert manager.used_bytes() == 40


@pytest.mark.parametrize("dtype", [None, "float33", object()])
def test_bad_dtypes_are_type_errors(dtype: Any) -> None:
    with pytest.raises(TypeError):
        GPUMemoryManager().allocate((2,), dtype, "numpy")


@pytest.mark.parametrize("shape", [(-1, 2), (2.5,), (True,)])
def test_bad_shapes_are_value_errors(shape: Any) -> None:
    manager = GPUMemoryManager()
    with pytest.raises(ValueError, match="shape"):
        manager.allocate(shape, "uint8", "numpy")
    assert manager.used_bytes() == 0


@pytest.mark.requires("torch")
def test_stats_group_by_source_and_keep_peaks() -> None:
    manager = GPUMemoryManager()
    a = manager.allocate((100,), "uint8", "numpy", source="a")
    b = manager.allocate((50,), "uint8", "numpy", source="a")
    manager.allocate((10,), "uint16", "torch", source="b")
    assert manager.stats() == {"a": {"arrays": 2, "bytes": 150, "peak_bytes": 150},
                               "b": {"arrays": 1, "bytes": 20, "peak_bytes": 20}}
    manager.release(a)
    manager.release(b)
    assert manager.stats() == {"b": {"arrays": 1, "bytes": 20, "peak_bytes": 20}}
    assert manager.used_bytes("cpu") == manager.used_bytes() == 20
    assert manager.release_all("b") == 1 and manager.used_bytes() == 0


def test_reference_counting() -> None:
    manager = GPUMemoryManager()
    a = manager.allocate((8,), "float64", "numpy")
    assert manager.retain(a) == 2
    assert manager.release(a) == 1
    assert manager.used_bytes() == 64
    assert manager.release(a) == 0
    assert manager.used_bytes() == 0
    with pytest.raises(AllocationKeyError, match="released already"):
        manager.release(a)
    with pytest.raises(KeyError):
        manager.retain(np.zeros(8))


@pytest.mark.requires("torch")
def test_memory_context_releases_on_exit() -> None:
    manager = GPUMemoryManager()
    kept = manager.allocate((16,), "uint8", "numpy", source="kept")
    with manager.memory_context() as scope:
        assert scope is manager
        scope.allocate((32,), "uint8", "numpy", source="tmp")
        scope.retain(scope.allocate((32,), "uint8", "torch", source="tmp"))
        assert manager.stats()["tmp"]["arrays"] == 2
    assert manager.stats() == {"kept": {"arrays": 1, "bytes": 16, "peak_bytes": 16}}
    assert manager.release(kept) == 0


def test_memory_context_releases_on_error_and_nests() -> None:
    manager = GPUMemoryManager()
    with pytest.raises(RuntimeError, match="boom"), manager.memory_context():
        manager.allocate((8,), "uint8", "numpy", source="outer")
        with manager.memory_context():
            manager.allocate((8,), "uint8", "numpy", source="inner")
        assert list(manager.stats()) == ["outer"]
        raise RuntimeError("boom")
    assert manager.stats() == {} and manager.used_bytes() == 0


def test_memory_context_tolerates_manual_release_inside() -> None:
    manager = GPUMemoryManager()
    with manager.memory_context(empty_cache=True):
        a = manager.allocate((8,), "uint8", "numpy")
        manager.release(a)
        b = manager.allocate((8,), "uint8", "numpy")
    assert manager.stats() == {}
    with pytest.raises(AllocationKeyError):
        manager.release(b)


def test_memory_context_leaves_other_threads_allocations() -> None:
    manager = GPUMemoryManager()
    other: list[Any] = []
    with manager.memory_context():
        thread = threading.Thread(target=lambda: other.append(
            manager.allocate((8,), "uint8", "numpy", source="other")))
        thread.start()
        thread.join()
        manager.allocate((8,), "uint8", "numpy", source="mine")
    assert list(manager.stats()) == ["other"]


def test_limit_bytes_is_a_budget_per_device() -> None:
    manager = GPUMemoryManager(limit_bytes=4096)
    a = manager.allocate((4096,), "uint8", "numpy")
    with pytest.raises(MemoryBudgetError, match="would exceed the budget") as info:
        manager.allocate((1,), "uint8", "torch")
    assert isinstance(info.value, MemoryError) and isinstance(info.value, MemtypeError)
    assert manager.used_bytes() == 4096  # the refused allocation left nothing behind
    manager.release(a)
    manager.allocate((1024,), "float32", "numpy")


def test_max_memory_fraction_is_a_fraction_of_the_device_total() -> None:
    total = psutil.virtual_memory().total
    manager = GPUMemoryManager(max_memory_fraction=8192 / total)
    assert abs(manager.budget(mt.frameworks.CPU) - 8192) <= 1
    manager.allocate((4000,), "uint8", "numpy")
    with pytest.raises(MemoryBudgetError):
        manager.allocate((4200,), "uint8", "numpy")


@pytest.mark.parametrize("kwargs", [
    {"max_memory_fraction": 0.0}, {"max_memory_fraction": 1.5},
    {"limit_bytes": 0}, {"limit_bytes": True}, {"limit_bytes": 1.5},
])
def test_budget_arguments_are_validated(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        GPUMemoryManager(**kwargs)


@no_gpu
@pytest.mark.requires("cupy")
def test_gpu_only_type_without_gpu_is_a_device_error() -> None:
    manager = GPUMemoryManager()
    with pytest.raises(mt.DeviceError, match="Cannot allocate a cupy array: .*no cuda device"):
        manager.allocate((4,), "float32", "cupy")
    assert manager.used_bytes() == 0


@no_gpu
@pytest.mark.requires("torch")
def test_gpu_id_without_gpu_is_a_device_error() -> None:
    with pytest.raises(mt.DeviceError, match="Cannot allocate a torch array"):
        GPUMemoryManager(gpu_id=0).allocate((4,), "float32", "torch")


def test_concurrent_allocate_and_release_balance() -> None:
    manager = GPUMemoryManager()

    def work(label: str) -> None:
        for _ in range(200):
            manager.release(manager.allocate((64,), "uint8", "numpy", source=label))

    threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert manager.used_bytes() == 0 and manager.stats() == {}


@pytest.mark.requires("torch")
def test_host_pool_budgets_host_memory() -> None:
    pool = GPUMemoryPool(1000, gpu_id=None)
    assert pool.device == mt.frameworks.CPU
    a = pool.allocate((600,), "uint8", "numpy")
    assert pool.available_bytes == 400
    with pytest.raises(MemoryBudgetError):
        pool.allocate((600,), "uint8", "torch")
    pool.set_limit(2000)
    pool.allocate((600,), "uint8", "torch")
    assert pool.apply_caps() == []  # nothing to cap on the host
    pool.release(a)
    assert pool.available_bytes == 1400


@pytest.mark.requires("cupy")
def test_pool_refuses_arrays_of_another_device() -> None:
    pool = GPUMemoryPool(1 << 20, gpu_id=None)
    with pytest.raises(mt.DeviceError):
        pool.allocate((4,), "float32", "cupy")


@no_gpu
def test_gpu_pool_without_gpu_is_a_device_error() -> None:
    with pytest.raises(mt.DeviceError, match="GPU 0 was requested, but no GPU is visible"):
        GPUMemoryPool(1 << 20)
    with pytest.raises(mt.DeviceError):
        get_gpu_memory_pool(0)


def test_get_gpu_memory_pool_is_one_per_device() -> None:
    pool = get_gpu_memory_pool()
    assert get_gpu_memory_pool() is pool is mt.gpu.get_gpu_memory_pool()
    if not has_gpu():
        assert pool.device == mt.frameworks.CPU
        assert pool.limit_bytes == psutil.virtual_memory().total
    original = pool.limit_bytes
    try:
        assert get_gpu_memory_pool(limit_bytes=12345).limit_bytes == 12345
    finally:
        pool.set_limit(original)


@pytest.mark.gpu
@pytest.mark.requires("torch")
def test_gpu_pool_caps_torch() -> None:
    torch = importlib.import_module("torch")
    pool = GPUMemoryPool(256 << 20, gpu_id=0)
    a = pool.allocate((1 << 20,), "float32", "torch")
    assert a.device.type == "cuda" and pool.used_bytes("cuda:0") == 4 << 20
    assert pool.apply_caps(["torch"]) == ["torch"]
    try:
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(512 << 20, dtype=torch.uint8, device="cuda:0")
    finally:
        pool.remove_caps()
    torch.empty(512 << 20, dtype=torch.uint8, device="cuda:0")
    with pytest.raises(mt.DeviceError):
        pool.allocate((4,), "float32", "numpy")  # host arrays are not this pool's


def test_releasing_an_unknown_array_is_the_pools_own_error() -> None:
    """Issue 22 section 2: the pool raises its own class (it raised StoreKeyError)."""
    from memtype.errors import StoreKeyError

    with pytest.raises(KeyError) as info:
        GPUMemoryManager().release(np.zeros(2))
    assert type(info.value) is AllocationKeyError
    assert not isinstance(info.value, StoreKeyError)
