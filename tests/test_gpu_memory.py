"""memtype.gpu.memory: per-device statistics, allocation checks, pressure."""

from __future__ import annotations

import importlib
import logging
import math
from typing import Any

import numpy as np
import psutil
import pytest

import memtype as mt
from memtype.errors import ArgumentTypeError, InvalidArgumentError
from memtype.frameworks import Device
from memtype.gpu.memory import GIB, DeviceMemory
from tests.frameworks import has_gpu

no_gpu = pytest.mark.no_gpu
TOLERANCE = 0.05  # host memory moves while the test runs (shared machine)


def test_memory_usage_always_reports_the_host() -> None:
    usage = mt.gpu.memory_usage()
    host = usage["cpu"]
    assert host.device == "cpu"
    assert host.source == "psutil"
    assert host.total_bytes == psutil.virtual_memory().total
    assert 0 < host.free_bytes <= host.total_bytes
    assert host.used_bytes == host.total_bytes - host.free_bytes
    assert dict(host.frameworks) == {}


def test_host_free_memory_is_psutil_available() -> None:
    vm = psutil.virtual_memory()
    free = mt.gpu.memory_usage()["cpu"].free_bytes
    assert abs(free - vm.available) <= TOLERANCE * vm.total


@no_gpu
@pytest.mark.parametrize("gpu_id", [None, 0, 3])
def test_without_gpu_every_gpu_id_reports_the_host(gpu_id: int | None) -> None:
    assert list(mt.gpu.memory_usage(gpu_id)) == ["cpu"]
    assert mt.gpu.device_memory(gpu_id).device == "cpu"


@pytest.mark.parametrize("bad", [-1, True, "0", 1.5])
@pytest.mark.parametrize("fn", ["memory_usage", "device_memory", "memory_pressure"])
def test_gpu_id_must_be_a_non_negative_int(fn: str, bad: object) -> None:
    with pytest.raises(mt.DeviceError, match="gpu_id must be a non-negative int"):
        getattr(mt.gpu, fn)(bad)


def test_memory_pressure_is_host_pressure_without_gpu_and_in_range() -> None:
    pressure = mt.gpu.memory_pressure()
    assert 0.0 <= pressure <= 1.0
    if not has_gpu():
        vm = psutil.virtual_memory()
        assert abs(pressure - (vm.total - vm.available) / vm.total) <= TOLERANCE


@pytest.mark.parametrize(
    ("total", "free", "pressure", "used"),
    [(1000, 250, 0.75, 750), (1000, 1000, 0.0, 0), (0, 0, 0.0, 0), (100, 150, 0.0, 0)],
)
def test_device_memory_pressure_is_clamped(total: int, free: int, pressure: float,
                                           used: int) -> None:
    mem = DeviceMemory("cuda:0", total, free)
    assert mem.pressure == pytest.approx(pressure)
    assert mem.used_bytes == used


def test_check_gpu_memory_nbytes_counts_bytes() -> None:
    assert mt.gpu.check_gpu_memory(nbytes=1)
    assert mt.gpu.check_gpu_memory(nbytes=np.int64(10**6))
    assert not mt.gpu.check_gpu_memory(nbytes=mt.gpu.device_memory().total_bytes + 1)


@pytest.mark.parametrize("size", [10**6, 1e6, np.float32(1e6), np.int64(10**6)],
                         ids=["int", "float", "float32", "int64"])
def test_check_gpu_memory_size_gb_counts_gibibytes_whatever_its_type(size: object) -> None:
    """Issue 22 section 2: an int size_gb is GiB too (it counted bytes): 10**6 GiB fit on no
    machine."""
    assert not mt.gpu.check_gpu_memory(size)  # type: ignore[arg-type]


def test_check_gpu_memory_a_fraction_of_free_memory_fits() -> None:
    free_gib = mt.gpu.device_memory().free_bytes / GIB
    assert mt.gpu.check_gpu_memory(free_gib * 0.5)
    assert mt.gpu.check_gpu_memory(size_gb=0)
    assert GIB == 2**30


@pytest.mark.parametrize(("size", "error"), [
    (True, TypeError), ("2GB", TypeError), (None, TypeError), (-1, ValueError),
    (-0.5, ValueError), (math.nan, ValueError), (math.inf, ValueError),
])
def test_check_gpu_memory_rejects_unclear_sizes(size: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        mt.gpu.check_gpu_memory(size)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"size_gb": 1, "nbytes": 1}, {"nbytes": 1.5},
                                    {"nbytes": True}, {"nbytes": -1}],
                         ids=["both", "float-nbytes", "bool-nbytes", "negative-nbytes"])
def test_check_gpu_memory_refuses_two_sizes_or_unclear_bytes(kwargs: dict[str, Any]) -> None:
    with pytest.raises((ArgumentTypeError, InvalidArgumentError), match="nbytes"):
        mt.gpu.check_gpu_memory(**kwargs)


def test_check_gpu_memory_usage_returns_and_logs_a_summary(
        caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    with caplog.at_level(logging.INFO, logger="memtype.gpu"):
        summary = mt.gpu.check_gpu_memory_usage()
    assert summary.splitlines()[-1].startswith("cpu: ")  # the host comes last
    assert "MiB used" in summary
    assert summary in caplog.text
    assert capsys.readouterr().out == ""  # logged, never printed


@pytest.mark.gpu
def test_memory_usage_lists_every_gpu_then_the_host() -> None:
    count = mt.gpu.get_gpu_manager().count
    assert list(mt.gpu.memory_usage()) == [f"cuda:{i}" for i in range(count)] + ["cpu"]
    with pytest.raises(mt.DeviceError):
        mt.gpu.memory_usage(count)


@pytest.mark.gpu
@pytest.mark.requires("torch")
def test_memory_usage_shows_what_torch_holds() -> None:
    torch = importlib.import_module("torch")
    x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda:0")
    usage = mt.gpu.memory_usage(0)["cuda:0"]
    assert usage.frameworks["torch"]["allocated"] >= x.numel()
    assert usage.source in ("nvml", "torch", "cupy", "tensorflow")
    assert 0.0 < mt.gpu.memory_pressure(0) <= 1.0


@no_gpu
def test_capping_framework_memory_needs_a_gpu() -> None:
    with pytest.raises(mt.DeviceError, match="no GPU is visible"):
        mt.gpu.cap_framework_memory(1 << 20, 0, ["torch"])


@pytest.mark.gpu
@pytest.mark.requires("torch")
def test_cap_framework_memory_caps_and_lifts_torch() -> None:
    torch = importlib.import_module("torch")
    torch.zeros(1, device="cuda:0")
    assert mt.gpu.cap_framework_memory(64 << 20, 0, ["torch", "jax"]) == ["torch"]
    try:
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")
    finally:
        mt.gpu.cap_framework_memory(None, 0, ["torch"])
    torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")


# -- one way to name a device (issue 22 section 2) ---------------------------------------------
@pytest.mark.parametrize("gpu_id", [0, np.int64(0), "cuda:0", Device("cuda", 0)],
                         ids=["int", "numpy-int", "name", "Device"])
def test_every_gpu_id_spelling_names_the_same_device(gpu_id: object) -> None:
    assert mt.gpu.device_memory(gpu_id).device == mt.gpu.device_memory(0).device  # type: ignore[arg-type]
    assert mt.gpu.memory_pressure(gpu_id) >= 0.0  # type: ignore[arg-type]
    assert list(mt.gpu.memory_usage(gpu_id)) == list(mt.gpu.memory_usage(0))  # type: ignore[arg-type]
    assert mt.gpu.check_gpu_memory(0.0, gpu_id)  # type: ignore[arg-type]


@pytest.mark.parametrize("gpu_id", ["cuda", "cuda:-1", "gpu:0", "opencl:0", Device("opencl", 0),
                                    "cuda:٣", 1.0],
                         ids=["no-index", "negative", "other-word", "other-kind",
                              "other-kind-Device", "non-ascii-digit", "float"])
def test_a_gpu_id_naming_no_managed_gpu_is_a_device_error(gpu_id: object) -> None:
    with pytest.raises(mt.DeviceError, match="cuda:<index>"):
        mt.gpu.device_memory(gpu_id)  # type: ignore[arg-type]
