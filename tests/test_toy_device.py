"""A toy DEVICE framework ("toydev", tests.toydevice): memtype's GPU plumbing (device moves,
gpu_id, streams, OOM recovery, memory statistics, cleanup, the tiered store's device tier, a
pipeline step) tested without a GPU, through the code paths CUDA uses (issue 14, item 4).

Nothing here is special-cased: every path acts on an accelerator kind through its adapter's
hooks, as it does on CUDA (issue 14, item 4).
"""

from __future__ import annotations

import gc
import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.errors import DeviceError
from memtype.frameworks import Device, Framework
from memtype.pipeline import FunctionStep, Pipeline
from memtype.storage import TieredStore
from tests import toydevice as tdv
from tests.pipeline_support import SMALL, load_field, stacks, write_plate
from tests.toydevice import ToyDeviceArray


def _held(index: int) -> int:
    gc.collect()
    return tdv.DEVICES[index].held


def _stream_names(index: int, what: str) -> list[str]:
    return [s for w, _t, s in tdv.DEVICES[index].events if w == what]


# -- conversions -------------------------------------------------------------------------

@pytest.mark.parametrize("gpu_id", [0, 1])
def test_numpy_to_toydev_lands_on_the_requested_device(toydev: Framework, gpu_id: int) -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = mt.convert(a, "toydev", gpu_id=gpu_id)
    assert isinstance(x, ToyDeviceArray) and x.device == gpu_id
    assert mt.detect_memory_type(x).value == "toydev"
    np.testing.assert_array_equal(x.host(), a)
    assert _held(gpu_id) == a.nbytes and _held(1 - gpu_id) == 0


def test_numpy_to_toydev_without_gpu_id_uses_device_0(toydev: Framework) -> None:
    x = mt.convert(np.ones(3), "toydev")
    assert x.device == 0


def test_toydev_gpu_id_that_does_not_exist_fails_loudly(toydev: Framework) -> None:
    with pytest.raises(DeviceError, match="toyaccel device 2 was requested"):
        mt.convert(np.ones(3), "toydev", gpu_id=2)


def test_toydev_device_0_to_device_1(toydev: Framework) -> None:
    x = mt.convert(np.arange(6, dtype=np.int16), "toydev", gpu_id=0)
    y = mt.convert(x, "toydev", gpu_id=1)
    assert y.device == 1 and x.device == 0
    np.testing.assert_array_equal(y.host(), np.arange(6, dtype=np.int16))
    assert mt.convert(y, "toydev", gpu_id=1) is y  # same type, same device: no copy


@pytest.mark.parametrize("target", ["numpy", "torch"])
@pytest.mark.requires("torch")
def test_toydev_to_host_frameworks(toydev: Framework, target: str) -> None:
    x = mt.convert(np.arange(6, dtype=np.float32).reshape(2, 3), "toydev", gpu_id=1)
    out = mt.convert(x, target)
    assert mt.detect_memory_type(out).value == target
    np.testing.assert_array_equal(np.asarray(out), x.host())


@pytest.mark.requires("torch")
def test_torch_to_toydev(toydev: Framework) -> None:
    torch = importlib.import_module("torch")
    x = mt.convert(torch.arange(4, dtype=torch.float32), "toydev", gpu_id=1)
    assert x.device == 1
    np.testing.assert_array_equal(x.host(), np.arange(4, dtype=np.float32))


def test_stack_and_unstack_on_a_toy_device(toydev: Framework) -> None:
    planes = [np.full((2, 2), i, np.uint8) for i in range(3)]
    stacked = mt.stack_slices(planes, "toydev", 1)
    assert isinstance(stacked, ToyDeviceArray) and stacked.device == 1
    assert stacked.shape == (3, 2, 2)
    out = mt.unstack_slices(stacked, "toydev", 1)
    assert [int(p.host().max()) for p in out] == [0, 1, 2]


# -- streams and decorators --------------------------------------------------------------

def test_thread_stream_enters_the_adapters_stream_on_that_device(toydev: Framework) -> None:
    with mt.gpu.thread_stream("toydev", 1):
        inside = tdv.current_stream(1).name
        tdv.record(1, "work")
    assert inside.startswith("thread-") and inside.endswith(":1")
    assert _stream_names(1, "work") == [inside]
    assert _stream_names(0, "enter") == []


def test_decorated_call_receives_its_input_on_gpu_id(toydev: Framework) -> None:
    seen: list[int] = []

    @mt.memory_types(input_type="toydev", output_type="toydev")
    def double(x: Any) -> Any:
        seen.append(x.device)
        return ToyDeviceArray(x.buffer() * 2, x.device)

    a = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    out = double(a, gpu_id=1)
    assert seen == [1] and isinstance(out, ToyDeviceArray) and out.device == 1
    np.testing.assert_array_equal(out.host(), a * 2)


def test_decorated_call_runs_in_the_adapters_stream_on_gpu_id(toydev: Framework) -> None:
    @mt.memory_types(input_type="toydev", output_type="toydev")
    def work(x: Any) -> Any:
        tdv.record(x.device, "work")
        return x

    work(np.ones((1, 2, 2), np.float32), gpu_id=1)
    names = _stream_names(1, "work")
    assert len(names) == 1 and names[0].startswith("thread-") and names[0].endswith(":1")


def test_decorated_call_hands_its_arrays_between_streams(toydev: Framework) -> None:
    caller = tdv.current_stream(0).name

    @mt.memory_types(input_type="toydev", output_type="toydev")
    def same(x: Any) -> Any:
        return x

    same(mt.convert(np.ones((1, 2, 2), np.float32), "toydev", gpu_id=0), gpu_id=0)
    events = [w for w, _t, _s in tdv.DEVICES[0].events]
    waits = [w for w in events if w.startswith("wait ")]
    assert waits and waits[0] == f"wait {caller}"  # our stream waits for the caller's first
    assert f"record {caller}" in events  # the result is released to the caller's stream


def test_decorated_slice_by_slice_call_runs_in_the_adapters_stream(toydev: Framework) -> None:
    @mt.memory_types(input_type="toydev", output_type="toydev", slice_by_slice=True)
    def work(x: Any) -> Any:
        tdv.record(x.device, "work")
        return x

    work(np.ones((3, 2, 2), np.float32), gpu_id=1)
    names = _stream_names(1, "work")
    assert len(names) == 3 and all(n.startswith("thread-") for n in names)


def test_oom_recovery_frees_the_cache_and_retries(toydev: Framework) -> None:
    tdv.reset(capacity=1 << 20)
    cached = tdv.zeros((900 << 10,), np.uint8, device=0)
    del cached
    assert _held(0) == 0 and tdv.DEVICES[0].cached == 900 << 10  # the allocator keeps it
    calls: list[int] = []

    @mt.memory_types(input_type="toydev", output_type="toydev")
    def big(x: Any) -> Any:
        calls.append(x.device)
        return tdv.zeros((1, 512, 1024), np.uint8, device=x.device)  # over capacity once

    out = big(np.ones((1, 2, 2), np.uint8), gpu_id=0)
    assert out.shape == (1, 512, 1024) and calls == [0, 0]
    assert tdv.DEVICES[0].empty_cache_calls >= 1


def test_oom_error_is_recognised_by_its_exact_type(toydev: Framework) -> None:
    assert mt.gpu.is_oom_error(tdv.ToyOutOfMemory("no room"))
    assert not mt.gpu.is_oom_error(RuntimeError("no room"))


# -- memory statistics and cleanup -------------------------------------------------------

def test_cleanup_reports_toydev_statistics_and_empties_its_cache(toydev: Framework) -> None:
    x = mt.convert(np.zeros(1024, np.uint8), "toydev", gpu_id=1)
    del x
    gc.collect()
    [report] = mt.gpu.cleanup("toydev", gpu_id=1)
    assert report.status == "freed"
    assert report.before["reserved"] == 1024 and report.after["reserved"] == 0
    assert report.freed_bytes == 1024
    assert tdv.DEVICES[1].empty_cache_calls == 1


def test_cleanup_all_and_the_registry_include_toydev(toydev: Framework) -> None:
    reports = {r.memory_type: r for r in mt.gpu.cleanup_all_gpu_frameworks()}
    assert reports["toydev"].status == "freed"
    assert mt.gpu.MEMORY_TYPE_CLEANUP_REGISTRY["toydev"]().status == "freed"
    assert tdv.DEVICES[0].empty_cache_calls == 2


def test_memory_usage_lists_toydev_statistics(toydev: Framework) -> None:
    x = mt.convert(np.zeros(2048, np.uint8), "toydev", gpu_id=1)
    usage = mt.gpu.memory_usage()
    assert usage["toyaccel:1"].frameworks["toydev"]["allocated"] == 2048
    assert usage["toyaccel:1"].source == "toydev" and list(usage)[-1] == "cpu"
    assert usage["toyaccel:0"].frameworks["toydev"]["allocated"] == 0
    del x


def test_memory_usage_of_one_gpu_id_stays_on_the_managed_gpus(toydev: Framework) -> None:
    mt.convert(np.zeros(16, np.uint8), "toydev", gpu_id=1)
    assert "toyaccel:1" not in mt.gpu.memory_usage(1)


def test_profile_reads_and_resets_the_toydev_peak(toydev: Framework) -> None:
    big = tdv.zeros((4096,), np.uint8, device=0)
    del big
    gc.collect()
    assert tdv.DEVICES[0].peak == 4096
    with mt.gpu.profile() as p:
        small = tdv.zeros((1024,), np.uint8, device=0)
    del small
    [record] = p.records
    assert record.peak_memory["toydev"] == 1024  # the block's own peak: reset on entry


def test_memory_manager_budgets_toydev_allocations_per_device(toydev: Framework) -> None:
    manager = mt.gpu.GPUMemoryManager(limit_bytes=1024)
    a = manager.allocate((256,), "float32", "toydev", source="tiles", gpu_id=1)
    assert isinstance(a, ToyDeviceArray) and a.device == 1
    assert manager.used_bytes("toyaccel:1") == 1024 and manager.used_bytes("toyaccel:0") == 0
    with pytest.raises(mt.errors.MemoryBudgetError, match="toyaccel:1"):
        manager.allocate((1,), "uint8", "toydev", gpu_id=1)
    manager.allocate((256,), "float32", "toydev", gpu_id=0)  # another device, its own budget


# -- storage and pipeline ------------------------------------------------------------------

def test_tiered_store_spills_a_toydev_array_and_reloads_it_on_its_device(
        toydev: Framework) -> None:
    store = TieredStore(budget_bytes=100)
    x = mt.convert(np.arange(16, dtype=np.float32), "toydev", gpu_id=1)  # 64 bytes
    store.save(x, "a")
    assert store.tier_of("a") == "device"
    store.save(mt.convert(np.ones(16, np.float32), "toydev", gpu_id=1), "b")  # over budget
    assert store.tier_of("a") == "host" and store.stats().spills_to_host == 1
    back = store.load("a")
    assert isinstance(back, ToyDeviceArray) and back.device == 1
    np.testing.assert_array_equal(back.host(), np.arange(16, dtype=np.float32))


def test_tiered_store_asks_its_pressure_gauge_about_the_toy_device(toydev: Framework) -> None:
    asked: list[int | None] = []

    def gauge(gpu: int | None) -> float:
        asked.append(gpu)
        return 0.99  # over the threshold: the entry goes to the host tier

    store = TieredStore(budget_bytes=1 << 20, pressure=gauge)
    store.save(mt.convert(np.ones(8, np.float32), "toydev", gpu_id=1), "a")
    store.save(mt.convert(np.zeros(8, np.float32), "toydev", gpu_id=1), "b")  # "a" is checked
    assert asked and set(asked) == {1}
    assert store.tier_of("a") == "host"


def test_tiered_store_spills_under_the_toy_devices_own_pressure(toydev: Framework) -> None:
    # no gauge passed: the default reads the adapter's device_properties (free / total)
    tdv.reset(capacity=1000)
    device = Device("toyaccel", 1)
    assert mt.gpu.device_pressure(device) == 0.0
    store = TieredStore(budget_bytes=1 << 20, pressure_threshold=0.75)
    for key in "ab":
        store.save(mt.convert(np.ones(75, np.float32), "toydev", gpu_id=1), key, copy=False)
    assert mt.gpu.device_pressure(device) == pytest.approx(0.6)
    assert store.tier_of("a") == store.tier_of("b") == "device"
    store.save(mt.convert(np.ones(75, np.float32), "toydev", gpu_id=1), "c", copy=False)
    # 90% full: "a" (least recently used) spills, and the memory the allocator cached is
    # handed back, so the device is at 60% again and "b" stays (else every entry would go)
    assert store.tier_of("a") == "host"
    assert store.tier_of("b") == store.tier_of("c") == "device"
    assert mt.gpu.device_pressure(device) == pytest.approx(0.6)
    assert tdv.DEVICES[1].empty_cache_calls == 1


@pytest.mark.requires("tifffile")
def test_pipeline_with_a_toydev_step(toydev: Framework, tmp_path: Path) -> None:
    devices: list[Device] = []

    @mt.memory_types(input_type="toydev", output_type="toydev")
    def toy_scale(stack: Any, factor: float = 2.0) -> Any:
        devices.append(Device("toyaccel", stack.device))
        return ToyDeviceArray(stack.buffer().astype(np.float32) * factor, stack.device)

    plate = write_plate(tmp_path / "plate")
    step = FunctionStep(toy_scale, factor=0.5, dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)
    report = Pipeline([step]).run(plate, tmp_path / "out")
    assert report.ok
    assert devices and set(devices) == {Device("toyaccel", 0)}
    for (well, site, channel), stack in stacks(SMALL).items():
        field = load_field(report.outputs["images"], well, site)
        np.testing.assert_array_equal(field[channel - 1], stack.astype(np.float32) * 0.5)
