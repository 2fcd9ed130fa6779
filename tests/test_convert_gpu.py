"""CUDA conversions (run with a GPU: `pytest -m gpu`); skipped on machines without one."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import memtype as mt
from tests.frameworks import has_gpu, usable
from tests.helpers import host

pytestmark = pytest.mark.gpu
CUDA_TYPES = [t for t in ("cupy", "torch", "jax", "tensorflow") if has_gpu() and usable(t)]
CUDA_PAIRS = list(itertools.product(CUDA_TYPES, repeat=2))


def _on_gpu(name: str, values: np.ndarray, gpu_id: int = 0) -> object:
    return mt.convert(values, name, gpu_id=gpu_id)


@pytest.mark.parametrize("source,target", CUDA_PAIRS, ids=[f"{s}->{t}" for s, t in CUDA_PAIRS])
def test_cuda_pair_stays_on_device_and_shares(source: str, target: str) -> None:
    values = np.arange(4096, dtype=np.float32).reshape(64, 64)
    x = _on_gpu(source, values)
    y = mt.convert(x, target)
    from memtype.frameworks import load_adapter

    assert load_adapter(target).device_of(y) == load_adapter(source).device_of(x)
    assert load_adapter(target).device_of(y).kind == "cuda"
    np.testing.assert_array_equal(host(y), values)
    if source != "tensorflow" and target != "tensorflow":
        assert mt.shares_memory(x, y)


@pytest.mark.parametrize("name", CUDA_TYPES)
def test_gpu_id_that_does_not_exist(name: str) -> None:
    with pytest.raises(mt.DeviceError):
        mt.convert(np.zeros(4, np.float32), name, gpu_id=1000)


@pytest.mark.parametrize("name", CUDA_TYPES)
def test_device_to_host(name: str) -> None:
    values = np.linspace(0, 1, 100, dtype=np.float32)
    np.testing.assert_array_equal(mt.convert(_on_gpu(name, values), "numpy"), values)


def test_negative_strides_cupy_to_torch_on_device() -> None:
    if not {"cupy", "torch"} <= set(CUDA_TYPES):
        pytest.skip("needs cupy and torch on CUDA")
    import cupy as cp

    c = cp.arange(12, dtype=cp.float32).reshape(3, 4)[::-1, ::-1]
    t = mt.convert(c, "torch")
    assert t.is_cuda
    np.testing.assert_array_equal(t.cpu().numpy(), cp.asnumpy(c))


def test_gpu_to_opencl_needs_roundtrip_permission() -> None:
    if not CUDA_TYPES or not usable("pyclesperanto"):
        pytest.skip("needs a CUDA type and an OpenCL device")
    x = _on_gpu(CUDA_TYPES[0], np.ones((4, 4), np.float32))
    with pytest.raises(mt.MemoryConversionError) as info:
        mt.convert(x, "pyclesperanto")
    assert "allow_cpu_roundtrip=True" in info.value.reason
    c = mt.convert(x, "pyclesperanto", allow_cpu_roundtrip=True)
    np.testing.assert_array_equal(host(c), np.ones((4, 4)))


def test_torch_requires_grad_on_cuda() -> None:
    if "torch" not in CUDA_TYPES or "cupy" not in CUDA_TYPES:
        pytest.skip("needs torch and cupy on CUDA")
    import torch

    t = torch.ones(8, device="cuda", requires_grad=True)
    np.testing.assert_array_equal(host(mt.convert(t, "cupy")), np.ones(8))
