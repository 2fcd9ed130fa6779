"""Per-thread streams: inactive on the host, a private CUDA stream with safe hand-off on GPUs."""

from __future__ import annotations

import importlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.conversion import target_device
from memtype.errors import DeviceError
from memtype.frameworks import CPU, Device, get_framework


@pytest.mark.parametrize("memory_type", ["numpy", "torch", "jax", "tensorflow"])
@pytest.mark.requires("jax", "tensorflow", "torch")
def test_host_calls_use_no_stream(memory_type: str) -> None:
    with mt.gpu.thread_stream(memory_type) as handoff:
        assert not handoff.active
        handoff.adopt([np.zeros(2)])  # nothing to record on the host
        handoff.release([np.zeros(2)])


@pytest.mark.requires("torch")
def test_stream_for_an_array_uses_its_device() -> None:
    with mt.gpu.thread_stream(mt.convert(np.zeros(2), "torch")) as handoff:
        assert not handoff.active


@pytest.mark.parametrize(("memory_type", "gpu_id", "device"), [
    ("numpy", None, CPU), ("numpy", 3, CPU), ("torch", None, CPU),
    pytest.param("torch", 0, Device("cuda", 0), marks=[pytest.mark.requires("torch"),
                                                       pytest.mark.gpu]),
    pytest.param("cupy", None, Device("cuda", 0), marks=[pytest.mark.requires("cupy"),
                                                         pytest.mark.gpu]),
    pytest.param("pyclesperanto", None, Device("opencl", 0),
                 marks=[pytest.mark.requires("pyclesperanto"), pytest.mark.opencl]),
])
def test_call_device(memory_type: str, gpu_id: int | None, device: Device) -> None:
    """A call without arrays runs where a conversion from the host would put its result."""
    assert target_device(get_framework(memory_type), CPU, gpu_id) == device


@pytest.mark.requires("torch")
def test_call_on_an_absent_gpu_is_a_device_error() -> None:
    """The device of a call is validated like a conversion's (it was not, before)."""
    with pytest.raises(DeviceError, match="torch on cuda device 99 was requested"):
        target_device(get_framework("torch"), CPU, 99)


def test_gpu_id_is_ignored_by_host_only_types_without_arrays() -> None:
    @mt.numpy
    def make() -> np.ndarray:
        return np.ones((1, 2, 2))

    assert make(gpu_id=2).shape == (1, 2, 2)


@pytest.mark.gpu
@pytest.mark.requires("torch")
def test_torch_thread_stream_waits_for_the_callers_stream() -> None:
    torch = importlib.import_module("torch")
    caller = torch.cuda.current_stream(0)
    x = torch.ones(4096, 4096, device="cuda:0")
    x.mul_(3)  # queued on the caller's stream
    with mt.gpu.thread_stream("torch", 0) as handoff:
        assert handoff.active and torch.cuda.current_stream(0) == handoff.stream != caller
        handoff.adopt([x])
        y = x * 2
        handoff.release([y])
    assert torch.cuda.current_stream(0) == caller
    assert float(y[0, 0]) == 6.0  # the caller's stream waited for ours


@pytest.mark.gpu
@pytest.mark.requires("torch")
def test_each_thread_gets_its_own_stream() -> None:
    torch = importlib.import_module("torch")

    barrier = threading.Barrier(8)  # eight tasks on eight distinct threads

    def stream_id(_: int) -> Any:
        barrier.wait()
        with mt.gpu.thread_stream("torch", 0) as handoff:
            return handoff.stream.cuda_stream

    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(stream_id, range(8)))
    assert len(ids) == 8 and torch.cuda.default_stream(0).cuda_stream not in ids
