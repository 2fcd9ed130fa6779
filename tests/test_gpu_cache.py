"""memtype.gpu.cache: the LRU tensor cache."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.errors import CacheKeyError
from memtype.gpu.cache import GPUTensorCache, measure_nbytes


def _arr(nbytes: int) -> np.ndarray:
    return np.zeros(nbytes, dtype=np.uint8)


def test_get_put_count_hits_and_misses() -> None:
    cache = GPUTensorCache(max_items=4)
    value = _arr(10)
    assert cache.get("a") is None
    assert cache.get("a", "default") == "default"
    assert cache.put("a", value)
    assert cache.get("a") is value
    assert cache["a"] is value
    assert cache.stats() == {"hits": 2, "misses": 2, "evictions": 0, "rejected": 0,
                             "items": 1, "bytes": 10}


def test_least_recently_used_is_evicted_first() -> None:
    cache = GPUTensorCache(max_items=2)
    cache.put("a", _arr(1))
    cache.put("b", _arr(1))
    cache.get("a")  # b is now the least recently used
    cache.put("c", _arr(1))
    assert "a" in cache and "c" in cache and "b" not in cache
    assert cache.stats()["evictions"] == 1 and len(cache) == 2


def test_byte_budget_evicts_until_it_fits() -> None:
    cache = GPUTensorCache(max_bytes=100)
    for key in "abcd":
        cache.put(key, _arr(30))
    assert cache.nbytes == 90 and len(cache) == 3
    cache.put("e", _arr(70))
    assert [k for k in "abcde" if k in cache] == ["d", "e"]
    assert cache.nbytes == 100 and cache.stats()["evictions"] == 3


def test_replacing_a_key_updates_its_size() -> None:
    cache = GPUTensorCache(max_bytes=100)
    cache.put("a", _arr(60))
    cache.put("a", _arr(20))
    assert cache.nbytes == 20 and len(cache) == 1


def test_a_value_larger_than_the_budget_is_not_cached() -> None:
    cache = GPUTensorCache(max_bytes=100)
    cache.put("a", _arr(10))
    cache.put("keep", _arr(10))
    assert cache.put("a", _arr(101)) is False
    assert "a" not in cache  # the older value under that key is gone too
    assert "keep" in cache and cache.nbytes == 10
    assert cache.stats()["rejected"] == 1
    big = _arr(500)
    assert cache.get_or_compute("big", lambda: big) is big
    assert "big" not in cache and cache.stats()["rejected"] == 2


def test_contains_is_not_a_use() -> None:
    cache = GPUTensorCache(max_items=2)
    cache.put("a", _arr(1))
    cache.put("b", _arr(1))
    assert "a" in cache and 1 not in cache
    cache.put("c", _arr(1))  # "a" is still the least recently used
    assert "a" not in cache
    assert cache.stats()["hits"] == 0 and cache.stats()["misses"] == 0


def test_get_or_compute_computes_once() -> None:
    cache = GPUTensorCache(max_items=8)
    calls: list[int] = []

    def compute() -> np.ndarray:
        calls.append(1)
        return _arr(8)

    first = cache.get_or_compute("k", compute)
    assert cache.get_or_compute("k", compute) is first
    assert len(calls) == 1
    assert cache.stats()["hits"] == 1 and cache.stats()["misses"] == 1


def test_concurrent_misses_of_one_key_compute_once() -> None:
    cache = GPUTensorCache(max_items=8)
    calls: list[int] = []
    results: list[Any] = []
    start = threading.Barrier(8)

    def compute() -> np.ndarray:
        calls.append(1)
        time.sleep(0.05)
        return _arr(8)

    def worker() -> None:
        start.wait()
        results.append(cache.get_or_compute("k", compute))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert cache._computing == {}  # the per-key locks are forgotten


def test_a_failing_computation_caches_nothing() -> None:
    cache = GPUTensorCache(max_items=8)

    def fail() -> np.ndarray:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        cache.get_or_compute("k", fail)
    assert "k" not in cache
    assert cache.get_or_compute("k", lambda: _arr(1)).shape == (1,)


def test_pop_getitem_and_clear() -> None:
    cache = GPUTensorCache()
    value = _arr(5)
    cache.put("a", value)
    assert cache.pop("a") is value and cache.nbytes == 0
    assert cache.pop("a", None) is None
    with pytest.raises(CacheKeyError, match="No cached value under 'a'"):
        cache.pop("a")
    with pytest.raises(KeyError):
        cache["a"]
    cache.put("b", value)
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0 and cache.stats()["hits"] == 0


def test_keys_must_be_strings() -> None:
    with pytest.raises(TypeError, match="Cache keys are str"):
        GPUTensorCache().put(1, _arr(1))  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"max_bytes": 0}, {"max_items": -1}, {"max_items": 1.5},
                                    {"max_bytes": True}])
def test_bounds_are_validated(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        GPUTensorCache(**kwargs)


def test_sizes_come_from_each_frameworks_adapter(memory_type: str) -> None:
    x = mt.convert(np.zeros((4, 8), dtype=np.float32), memory_type)
    assert measure_nbytes(x) == 128
    cache = GPUTensorCache(max_bytes=1000)
    cache.put("x", x)
    assert cache.nbytes == 128


def test_containers_bytes_and_custom_sizes() -> None:
    assert measure_nbytes([_arr(3), (_arr(4),), {"k": _arr(5)}]) == 12
    assert measure_nbytes(b"abcd") == 4
    with pytest.raises(TypeError, match="Cannot measure the size"):
        measure_nbytes(object())
    cache = GPUTensorCache(max_bytes=10, sizeof=lambda v: 7)
    cache.put("a", object())
    assert cache.nbytes == 7


def test_concurrent_use_keeps_the_bounds() -> None:
    cache = GPUTensorCache(max_bytes=400, max_items=10)
    gets = [0] * 4

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(500):
            key = f"k{rng.randrange(30)}"
            if rng.random() < 0.5:
                cache.put(key, _arr(rng.randrange(1, 80)))
            else:
                gets[seed] += 1
                cache.get(key)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) <= 10 and cache.nbytes <= 400
    assert cache.nbytes == sum(size for _, size in cache._data.values())
    stats = cache.stats()
    assert stats["hits"] + stats["misses"] == sum(gets)


def test_a_missing_key_is_the_caches_own_error() -> None:
    """Issue 22 section 2: the tensor cache raises its own class (it raised StoreKeyError)."""
    from memtype.errors import StoreKeyError

    with pytest.raises(KeyError) as info:
        GPUTensorCache().pop("absent")
    assert type(info.value) is CacheKeyError
    assert not isinstance(info.value, StoreKeyError)


def test_measure_nbytes_of_deeply_nested_containers() -> None:
    """5,000 levels of nesting are measured, not a RecursionError (issue 21, item 9's sibling)."""
    value: Any = _arr(7)
    for level in range(5000):
        value = [value] if level % 2 else {"k": value}
    assert measure_nbytes(value) == 7


def test_measure_nbytes_of_a_cycle_counts_each_container_once() -> None:
    cycle: list[Any] = [_arr(3)]
    cycle.append(cycle)
    assert measure_nbytes(cycle) == 3


def _zarr_array() -> Any:
    import zarr

    return zarr.create_array(zarr.storage.MemoryStore(), shape=(4, 8), dtype="float32")


def _dask_array() -> Any:
    import dask.array as da

    return da.zeros((4, 8), dtype="float32", chunks=2)


def _torch_cpu() -> Any:
    import torch

    return torch.zeros((4, 8), dtype=torch.float32)


@pytest.mark.parametrize("make", [
    pytest.param(lambda: np.zeros((4, 8), np.float32), id="numpy"),
    pytest.param(lambda: np.zeros((8, 4), np.float32).T, id="numpy-view"),
    pytest.param(_torch_cpu, id="torch-cpu", marks=pytest.mark.requires("torch")),
    pytest.param(_zarr_array, id="zarr-array", marks=pytest.mark.requires("zarr")),
    pytest.param(_dask_array, id="dask-lazy-array", marks=pytest.mark.requires("dask")),
    pytest.param(lambda: "\u00e9" * 64, id="text-utf8"),
])
def test_measure_nbytes_is_the_one_size_of_a_value(make: Any) -> None:
    """128 bytes each: an array's data (never read: the zarr and dask arrays hold none yet),
    a text's UTF-8 bytes."""
    assert measure_nbytes(make()) == 128


def test_a_value_without_a_size_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="Cannot measure the size of a builtins.int"):
        measure_nbytes(3)


@pytest.mark.parametrize(("value", "expected"), [
    pytest.param(np.zeros(5, np.int16), 10, id="array"),
    pytest.param([np.zeros(3, np.uint8), b"ab"], 5, id="list-of-arrays"),
    pytest.param(object(), 0, id="unknown-size"),
])
def test_a_stored_value_is_sized_by_measure_nbytes(value: Any, expected: int) -> None:
    """MemoryStore's stat and TieredStore's accounting: measure_nbytes, 0 where it has none."""
    from memtype.storage import MemoryStore

    store = MemoryStore()
    store.save(value, "v", copy=False)
    assert store.stat("v").size == expected
