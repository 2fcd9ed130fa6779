"""One gpu_id rule everywhere (issue 14): None, a Python int or a NumPy integer >= 0."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.frameworks import gpu_index

BAD = [True, -1, 1.0, "0", np.float32(0), np.int64(-2)]


def _callers() -> dict[str, Any]:
    identity = mt.numpy(contract="any")(lambda x: x)
    return {
        "convert": lambda g: mt.convert(np.ones(2), "numpy", gpu_id=g),
        "decorator call": lambda g: identity(np.ones((2, 2)), gpu_id=g),
        "decorator default": lambda g: mt.numpy(gpu_id=g)(lambda x: x),
        "gpu.device_memory": lambda g: mt.gpu.device_memory(g),
        "gpu.cleanup": lambda g: mt.gpu.cleanup("numpy", gpu_id=g),
        "gpu.cleanup_all_gpu_frameworks": lambda g: mt.gpu.cleanup_all_gpu_frameworks(g),
        "gpu.thread_stream": lambda g: mt.gpu.thread_stream("numpy", g).__enter__(),
        "gpu.memory_pressure": lambda g: mt.gpu.memory_pressure(g),
    }


@pytest.mark.parametrize("value", BAD, ids=repr)
@pytest.mark.parametrize("caller", list(_callers()))
def test_every_entry_point_refuses_the_same_values(caller: str, value: object) -> None:
    with pytest.raises(mt.DeviceError, match="gpu_id must be"):
        _callers()[caller](value)


@pytest.mark.parametrize("caller", ["convert", "decorator call", "decorator default"])
def test_a_numpy_integer_is_accepted_where_an_int_is(caller: str) -> None:
    _callers()[caller](np.int64(0))  # host types ignore the id; it is valid all the same
    _callers()[caller](0)


def test_gpu_index_returns_a_python_int() -> None:
    assert type(gpu_index(np.uint8(3))) is int and gpu_index(None) is None
    with pytest.raises(mt.DeviceError, match=r"or Device\('cuda', <index>\); received None"):
        gpu_index(None, allow_none=False)


@pytest.mark.parametrize("spelling", ["cuda:0", "Device"])
@pytest.mark.parametrize("caller", list(_callers()))
def test_every_entry_point_takes_a_device_name_or_device(caller: str, spelling: str) -> None:
    """Issue 22 section 2: one parser for the int index, "cuda:0" and Device("cuda", 0)."""
    from memtype.frameworks import Device

    _callers()[caller]("cuda:0" if spelling == "cuda:0" else Device("cuda", 0))
