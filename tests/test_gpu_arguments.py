"""Issue 21 item 16's siblings in memtype.gpu, and issue 22 section 2's one device parser:
None or a wrong type is a memtype error naming the argument (never a raw TypeError or
AttributeError, never accepted silently); a device of any kind has one spelling
(memtype.gpu.as_device)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.errors import ArgumentTypeError
from memtype.frameworks import CPU, Device
from memtype.gpu import GPUMemoryManager, GPUTensorCache, as_device

WRONG: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "GPUTensorCache(sizeof=5)": (lambda: GPUTensorCache(sizeof=5), ArgumentTypeError,  # type: ignore[arg-type]
                                 "sizeof"),
    "get_or_compute(fn=5)": (lambda: GPUTensorCache().get_or_compute("k", 5),  # type: ignore[arg-type]
                             ArgumentTypeError, "fn()"),
    "GPUMemoryManager(max_memory_fraction='x')": (
        lambda: GPUMemoryManager(max_memory_fraction="x"), ArgumentTypeError,  # type: ignore[arg-type]
        "max_memory_fraction"),
    "GPUMemoryManager(gpu_id='x')": (lambda: GPUMemoryManager(gpu_id="x"), mt.DeviceError,
                                     "gpu_id"),
    "allocate(source=5)": (lambda: GPUMemoryManager().allocate(3, "float32", "numpy", source=5),  # type: ignore[arg-type]
                           ArgumentTypeError, "source"),
    "memory_context(empty_cache='x')": (
        lambda: GPUMemoryManager().memory_context(empty_cache="x").__enter__(),  # type: ignore[arg-type]
        ArgumentTypeError, "empty_cache"),
    "device_pressure(None)": (lambda: mt.gpu.device_pressure(None), mt.DeviceError,  # type: ignore[arg-type]
                              "received None"),
    "used_bytes(True)": (lambda: GPUMemoryManager().used_bytes(True), mt.DeviceError,
                         "received True"),
}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_a_wrong_argument_is_a_memtype_error_naming_it(case: str) -> None:
    call, error, words = WRONG[case]
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")) as info:
        call()
    assert type(info.value) is error


@pytest.mark.parametrize(("spelling", "device"), [
    ("cpu", CPU), ("cuda:0", Device("cuda", 0)), ("opencl:1", Device("opencl", 1)),
    (0, Device("cuda", 0)), (np.int64(2), Device("cuda", 2)),
    (Device("opencl", 3), Device("opencl", 3)),
], ids=["cpu", "cuda-name", "opencl-name", "index", "numpy-index", "Device"])
def test_as_device_reads_every_spelling(spelling: object, device: Device) -> None:
    assert as_device(spelling) == device  # type: ignore[arg-type]


@pytest.mark.parametrize("spelling", ["gpu:0", "cuda", "cuda:x", "CPU", -1, True, 1.5, None],
                         ids=["unknown-kind", "no-index", "bad-index", "upper-case", "negative",
                              "bool", "float", "None"])
def test_as_device_refuses_what_names_no_device(spelling: object) -> None:
    with pytest.raises(mt.DeviceError, match="received"):
        as_device(spelling)  # type: ignore[arg-type]


@pytest.mark.parametrize("spelling", ["cpu", CPU], ids=["name", "Device"])
def test_device_pressure_and_used_bytes_take_any_spelling(spelling: object) -> None:
    manager = GPUMemoryManager()
    manager.allocate(4, "float32", "numpy")
    assert manager.used_bytes(spelling) == 16  # type: ignore[arg-type]
    pressure = mt.gpu.device_pressure(spelling)  # type: ignore[arg-type]
    assert pressure is not None and 0.0 <= pressure <= 1.0
