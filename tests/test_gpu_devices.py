"""memtype.gpu.devices: the GPU manager, device selection, worker assignment."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading

import pytest

import memtype as mt
from memtype.frameworks import load_adapter
from memtype.gpu.devices import GPUInfo, GPUManager, get_gpu_manager, visible_devices

no_gpu = pytest.mark.no_gpu


def _framework_gpu_count() -> int:
    """How many CUDA GPUs torch or cupy see (the reference count)."""
    names = [n for n in ("torch", "cupy") if importlib.util.find_spec(n) is not None]
    return max((load_adapter(n).gpu_count() for n in names), default=0)


def test_manager_is_one_per_process_across_threads() -> None:
    seen: list[GPUManager] = []
    threads = [threading.Thread(target=lambda: seen.append(get_gpu_manager())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(m) for m in seen}) == 1
    assert seen[0] is get_gpu_manager() is mt.gpu.get_gpu_manager()


def test_gpu_count_matches_the_frameworks() -> None:
    assert get_gpu_manager().count == _framework_gpu_count()
    assert len(get_gpu_manager().gpus()) == _framework_gpu_count()


def test_refresh_takes_the_list_again() -> None:
    manager = GPUManager()
    first = manager.gpus()
    again = manager.refresh()
    assert [g.index for g in again] == [g.index for g in first]
    assert again is not manager.gpus()  # callers get copies, never the manager's own list


@no_gpu
def test_without_gpu_the_list_is_empty_and_the_source_none() -> None:
    manager = GPUManager()
    assert manager.gpus() == []
    assert manager.source == "none"
    assert manager.count == 0


@no_gpu
def test_select_device_without_gpu_says_so() -> None:
    with pytest.raises(mt.DeviceError, match="no GPU is visible"):
        mt.gpu.select_device()


@no_gpu
@pytest.mark.parametrize("worker", [0, 1, 7])
def test_assign_without_gpu_runs_workers_on_the_host(worker: int) -> None:
    assert mt.gpu.assign(worker) is None


@no_gpu
def test_get_and_mem_get_info_without_gpu_raise_device_error() -> None:
    manager = get_gpu_manager()
    with pytest.raises(mt.DeviceError, match="GPU 0 was requested, but no GPU is visible"):
        manager.get(0)
    with pytest.raises(mt.DeviceError):
        manager.mem_get_info(0)


@pytest.mark.parametrize("bad", [-1, True, "0", 1.0])
def test_get_rejects_ids_that_are_not_gpu_indices(bad: object) -> None:
    with pytest.raises(mt.DeviceError, match="gpu_id must be a non-negative int"):
        get_gpu_manager().get(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, True, 1.5, "2"])
def test_assign_rejects_bad_worker_indices(bad: object) -> None:
    with pytest.raises(ValueError, match="worker_index"):
        mt.gpu.assign(bad)  # type: ignore[arg-type]


def test_gpu_info_used_bytes() -> None:
    info = GPUInfo(0, "test card", total_bytes=1000, free_bytes=250, compute_capability=(9, 0))
    assert info.used_bytes == 750
    assert info.source == "nvml"


UUIDS = ["GPU-aaa1", "GPU-bbb2", "GPU-aab3"]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, [0, 1, 2]),
        ("", []),
        ("-1", []),
        ("1,0", [1, 0]),
        (" 2 , 0 ", [2, 0]),
        ("0,7,1", [0]),  # CUDA stops at the first ordinal out of range
        ("2,2,1", [2]),  # ... and at a repeated one
        ("0,x,1", [0]),  # ... and at garbage
        ("GPU-bbb", [1]),  # unique UUID prefix
        ("GPU-BBB2", [1]),
        ("GPU-aa", []),  # ambiguous prefix
        ("0,GPU-aab3", [0, 2]),
        ("MIG-1234", None),  # NVML's device list cannot resolve MIG instances
    ],
)
def test_visible_devices_follows_cuda_rules(spec: str | None, expected: list[int] | None) -> None:
    assert visible_devices(spec, UUIDS) == expected


def test_listing_gpus_imports_no_framework_and_honours_an_empty_visible_list() -> None:
    code = (
        "import json, os, sys; import memtype.gpu as g; m = g.get_gpu_manager(); "
        "fw = ['torch', 'jax', 'tensorflow', 'cupy', 'pyclesperanto']; "
        "print(json.dumps([len(m.gpus()), m.assign(3), g.memory_pressure() <= 1.0, "
        "[n for n in fw if n in sys.modules]]))"
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [0, None, True, []]


@pytest.mark.gpu
def test_gpus_report_memory_and_compute_capability() -> None:
    for info in get_gpu_manager().refresh():
        assert info.total_bytes > 0
        assert 0 <= info.free_bytes <= info.total_bytes
        assert info.compute_capability is not None and info.compute_capability[0] >= 3
        assert info.name


@pytest.mark.gpu
def test_select_device_picks_a_visible_gpu() -> None:
    manager = get_gpu_manager()
    assert 0 <= manager.select_device() < manager.count
    with pytest.raises(mt.DeviceError, match="No GPU has"):
        manager.select_device(min_free_bytes=1 << 60)


@pytest.mark.gpu
def test_assign_is_round_robin_over_every_gpu() -> None:
    n = get_gpu_manager().count
    assert [mt.gpu.assign(i) for i in range(2 * n)] == list(range(n)) * 2


@pytest.mark.gpu
def test_cuda_visible_devices_limits_the_list() -> None:
    code = "import memtype.gpu as g; print(g.get_gpu_manager().count)"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "1"
