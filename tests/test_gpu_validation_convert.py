"""GPU validation, checks 1 and 2 of issue 7 (run with ``pytest -m gpu``; skipped without a GPU).

1. CuPy, PyTorch and JAX arrays on one GPU convert into each other zero-copy: the result
   starts at the source's device address (read with each framework's own API) and costs the
   same at 1 GiB as at 1 KiB; NumPy <-> GPU conversions copy exactly once.
2. ``gpu_id`` puts every result of every GPU type on that GPU; an id past the last GPU is a
   ``DeviceError``.

Precise timings are the benchmark's job (``benchmarks/gpu.py``); the bounds here are generous.
"""

from __future__ import annotations

import importlib
import statistics
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.conversion import ConversionEvent, add_conversion_hook, remove_conversion_hook
from memtype.frameworks import Device, load_adapter
from tests.gpu_validation_support import (
    GPU_IDS,
    GPU_PAIRS,
    GPU_TYPES,
    PAIR_IDS,
    native_device,
    on_gpu,
    pointer,
    release_gpu_memory,
    require,
    synchronize,
    to_host,
)
from tests.helpers import aligned

pytestmark = pytest.mark.gpu

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
COPY_SIZE = 64 * MIB
ALL_PAIRS = [(s, t) for s in GPU_TYPES for t in GPU_TYPES]


@pytest.fixture(autouse=True)
def _release() -> Iterator[None]:
    """Each test starts and ends with the frameworks' caches emptied."""
    release_gpu_memory()
    yield
    release_gpu_memory()


class _Events:
    """Collects memtype's conversion events while installed (``with _Events() as ev``)."""

    def __init__(self) -> None:
        self.events: list[ConversionEvent] = []

    def __call__(self, event: ConversionEvent) -> None:
        self.events.append(event)

    def __enter__(self) -> _Events:
        add_conversion_hook(self)
        return self

    def __exit__(self, *exc: object) -> None:
        remove_conversion_hook(self)


def _device_bytes(name: str) -> int:
    """Bytes the framework has allocated on GPU 0 for live arrays."""
    if name == "torch":
        import torch

        return int(torch.cuda.memory_allocated(0))
    if name == "cupy":
        import cupy as cp

        with cp.cuda.Device(0):
            return int(cp.get_default_memory_pool().used_bytes())
    import jax

    stats = jax.devices("gpu")[0].memory_stats() or {}
    return int(stats.get("bytes_in_use", 0))


def _median_seconds(fn: Any, repeats: int = 21) -> float:
    """Median wall time of ``fn()`` after three warm-up calls (results dropped at once)."""
    for _ in range(3):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        samples.append(time.perf_counter() - start)
        del out
    return statistics.median(samples)


# -- 1. zero-copy between GPU frameworks ------------------------------------------------------


@pytest.mark.parametrize(("source", "target"), GPU_PAIRS, ids=PAIR_IDS)
def test_gpu_pair_shares_the_source_address(source: str, target: str) -> None:
    require(source)
    require(target)
    values = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    x = on_gpu(source, values)
    y = mt.convert(x, target)
    assert pointer(y) == pointer(x), "the result does not start at the source's address"
    assert native_device(y) == native_device(x) == Device("cuda", 0)
    assert load_adapter(target).device_of(y) == Device("cuda", 0)
    assert mt.shares_memory(x, y)
    np.testing.assert_array_equal(to_host(y), values)


@pytest.mark.parametrize(("source", "target"), [("cupy", "torch"), ("torch", "cupy")],
                         ids=["cupy->torch", "torch->cupy"])
def test_a_write_through_the_result_is_seen_by_the_source(source: str, target: str) -> None:
    require(source)
    require(target)
    x = on_gpu(source, np.zeros(16, np.float32))
    y = mt.convert(x, target)
    y[3] = 7.0  # both frameworks write in place on the legacy default stream
    synchronize()
    assert to_host(x)[3] == 7.0


@pytest.mark.parametrize(("source", "target"), GPU_PAIRS, ids=PAIR_IDS)
def test_gpu_pair_costs_the_same_at_1gib_as_at_1kib(source: str, target: str) -> None:
    require(source)
    require(target)
    if mt.gpu.device_memory(0).free_bytes < 3 * GIB:
        pytest.skip("needs 3 GiB free on GPU 0")
    small = on_gpu(source, np.ones(KIB // 4, np.float32))
    big = on_gpu(source, np.ones(GIB // 4, np.float32))
    synchronize()
    assert mt.shares_memory(big, mt.convert(big, target))
    t_small = _median_seconds(lambda: mt.convert(small, target))
    t_big = _median_seconds(lambda: mt.convert(big, target))
    assert t_big < 50 * t_small + 1e-3, (
        f"{source}->{target}: 1 GiB took {t_big * 1e6:.0f} µs, 1 KiB {t_small * 1e6:.0f} µs")


# -- 1. NumPy <-> GPU: exactly one copy -------------------------------------------------------


def _host_peak(fn: Any) -> tuple[Any, int]:
    """``fn()`` and the most NumPy (tracemalloc-traced) host memory it held above the start."""
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return out, peak - start


@pytest.mark.parametrize("target", GPU_TYPES)
def test_host_to_gpu_is_one_transfer_and_no_host_copy(target: str) -> None:
    require(target)
    host = aligned(np.random.default_rng(1).random(COPY_SIZE // 4, dtype=np.float32))
    before = _device_bytes(target)
    with _Events() as seen:
        y, host_extra = _host_peak(lambda: mt.convert(host, target, gpu_id=0))
    synchronize()
    grown = _device_bytes(target) - before
    assert [(e.source_type, e.target_type, e.nbytes, e.zero_copy) for e in seen.events] == [
        ("numpy", target, COPY_SIZE, False)]
    assert host_extra < COPY_SIZE // 2, f"{host_extra} bytes of NumPy host memory were copied"
    assert COPY_SIZE <= grown < 2 * COPY_SIZE, f"the device grew by {grown} bytes"
    assert native_device(y) == Device("cuda", 0)
    np.testing.assert_array_equal(to_host(y), host)


@pytest.mark.parametrize("source", GPU_TYPES)
@pytest.mark.requires("torch")
def test_gpu_to_host_is_one_transfer(source: str) -> None:
    require(source)
    values = np.random.default_rng(2).random(COPY_SIZE // 4, dtype=np.float32)
    x = on_gpu(source, values)  # a fresh array: JAX has no cached host value for it yet
    synchronize()
    torch = importlib.import_module("torch") if source == "torch" else None
    if torch is not None:
        torch.cuda.reset_peak_memory_stats(0)
        allocated = torch.cuda.memory_allocated(0)
    with _Events() as seen:
        y, host_extra = _host_peak(lambda: mt.convert(x, "numpy"))
    assert [(e.source_type, e.target_type, e.nbytes, e.zero_copy) for e in seen.events] == [
        (source, "numpy", COPY_SIZE, False)]
    assert host_extra < COPY_SIZE * 3 // 2, f"{host_extra} bytes of NumPy host memory for one copy"
    if torch is not None:  # no temporary device copy on the way out
        assert torch.cuda.max_memory_allocated(0) == allocated
    assert isinstance(y, np.ndarray)
    np.testing.assert_array_equal(y, values)


# -- 2. gpu_id ---------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu_id", GPU_IDS, ids=lambda i: f"gpu{i}")
@pytest.mark.parametrize("target", GPU_TYPES)
def test_gpu_id_places_host_data(target: str, gpu_id: int) -> None:
    require(target)
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = mt.convert(values, target, gpu_id=gpu_id)
    assert load_adapter(target).device_of(y) == Device("cuda", gpu_id)
    assert native_device(y) == Device("cuda", gpu_id)
    np.testing.assert_array_equal(to_host(y), values)


@pytest.mark.parametrize("gpu_id", GPU_IDS, ids=lambda i: f"gpu{i}")
@pytest.mark.parametrize(("source", "target"), ALL_PAIRS,
                         ids=[f"{s}->{t}" for s, t in ALL_PAIRS])
def test_gpu_id_places_gpu_data(source: str, target: str, gpu_id: int) -> None:
    require(source)
    require(target)
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = on_gpu(source, values, 0)
    y = mt.convert(x, target, gpu_id=gpu_id)
    assert load_adapter(target).device_of(y) == Device("cuda", gpu_id)
    assert native_device(y) == Device("cuda", gpu_id)
    np.testing.assert_array_equal(to_host(y), values)


@pytest.mark.parametrize("gpu_id", GPU_IDS, ids=lambda i: f"gpu{i}")
@pytest.mark.parametrize("framework", GPU_TYPES)
def test_decorated_call_runs_and_returns_on_gpu_id(framework: str, gpu_id: int) -> None:
    require(framework)
    adapter = load_adapter(framework)
    seen: list[Device] = []

    @getattr(mt, framework)
    def double(image: Any) -> Any:
        seen.append(adapter.device_of(image))
        return image * 2

    out = double(np.ones((1, 4, 4), np.float32), gpu_id=gpu_id)
    assert seen == [Device("cuda", gpu_id)]
    assert adapter.device_of(out) == native_device(out) == Device("cuda", gpu_id)
    np.testing.assert_array_equal(to_host(out), np.full((1, 4, 4), 2, np.float32))


@pytest.mark.parametrize("framework", GPU_TYPES)
def test_gpu_id_past_the_last_gpu_is_a_device_error(framework: str) -> None:
    require(framework)
    count = load_adapter(framework).gpu_count()
    assert count == mt.gpu.get_gpu_manager().count, "the framework and NVML disagree"
    with pytest.raises(mt.DeviceError):
        mt.convert(np.zeros(4, np.float32), framework, gpu_id=count)
    x = on_gpu(framework, np.zeros(4, np.float32), 0)
    with pytest.raises(mt.DeviceError):
        mt.convert(x, framework, gpu_id=count)

    @getattr(mt, framework)
    def same(image: Any) -> Any:
        return image

    with pytest.raises(mt.DeviceError):
        same(np.zeros((1, 2, 2), np.float32), gpu_id=count)
