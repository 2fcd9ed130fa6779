"""Arrays a framework holds but others cannot take: a memtype error, never a framework's own.

Each case is converted twice: with a fresh route, and after an ordinary array of the same
type has warmed the cached route (the fast path must explain its failures too).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import memtype as mt
from tests.frameworks import builtin_names, needs, type_params, usable


def _masked() -> Any:
    return np.ma.masked_array([1.0, 2.0], [False, True])


def _sparse_coo() -> Any:
    import torch

    return torch.eye(3).to_sparse()


def _sparse_csr() -> Any:
    import torch

    with warnings.catch_warnings():  # CSR support is in beta: torch warns
        warnings.simplefilter("ignore")
        return torch.eye(3).to_sparse_csr()


def _meta() -> Any:
    import torch

    return torch.empty(3, device="meta")


def _quantized() -> Any:
    import torch

    with warnings.catch_warnings():  # quantized tensors are deprecated: torch warns
        warnings.simplefilter("ignore")
        return torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.quint8)


def _nested() -> Any:
    import torch

    with warnings.catch_warnings():  # nested tensors are a prototype: torch warns
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])


def _prng_key() -> Any:
    import jax

    return jax.random.key(0)


def _tf_resource() -> Any:
    import tensorflow as tf

    return tf.Variable(1.0).handle


# name: (source type, the odd array, words the message must contain)
UNSUPPORTED: dict[str, tuple[str, Callable[[], Any], str]] = {
    "numpy-masked": ("numpy", _masked, "x.filled(value)"),
    "torch-sparse-coo": ("torch", _sparse_coo, ".to_dense()"),
    "torch-sparse-csr": ("torch", _sparse_csr, ".to_dense()"),
    "torch-meta": ("torch", _meta, "meta device has no data"),
    "torch-quantized": ("torch", _quantized, ".dequantize()"),
    "torch-nested": ("torch", _nested, "components one by one"),
    "jax-prng-key": ("jax", _prng_key, "jax.random.key_data"),
    "tensorflow-resource": ("tensorflow", _tf_resource, "handle, not array data"),
}
CASES = [pytest.param(name, target, marks=needs(source, target), id=f"{name}->{target}")
         for name, (source, _, _) in UNSUPPORTED.items()
         for target in builtin_names() if target != source]

# non-numeric NumPy dtypes: no other framework holds them
NON_NUMERIC = {
    "object": lambda: np.array([1, "a"], dtype=object),
    "unicode": lambda: np.array(["ab", "c"]),
    "bytes": lambda: np.array([b"ab"]),
    "datetime64": lambda: np.array([1, 2], dtype="datetime64[s]"),
    "timedelta64": lambda: np.array([1, 2], dtype="timedelta64[s]"),
    "record": lambda: np.zeros(2, dtype=[("a", "f4"), ("b", "i4")]),
    "void": lambda: np.zeros(2, dtype="V4"),
}
TARGETS = type_params(t for t in builtin_names() if t != "numpy")


def _ordinary(source: str) -> Any:
    return mt.convert(np.ones((2, 2), np.float32), source)


@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "warm-route"])
@pytest.mark.parametrize("name,target", CASES)
def test_unsupported_array_is_refused_with_the_way_out(name: str, target: str,
                                                       warm: bool) -> None:
    source, make, words = UNSUPPORTED[name]
    if warm:
        mt.convert(_ordinary(source), target)
    with pytest.raises(mt.UnsupportedArrayError) as info:
        mt.convert(make(), target)
    assert isinstance(info.value, TypeError)
    assert words in str(info.value) and target in str(info.value)


@pytest.mark.parametrize("name", [pytest.param(n, marks=needs(s), id=n)
                                  for n, (s, _, _) in UNSUPPORTED.items()])
def test_unsupported_array_stays_itself_in_its_own_framework(name: str) -> None:
    source, make, _ = UNSUPPORTED[name]
    x = make()
    assert mt.convert(x, source) is x


@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "warm-route"])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", list(NON_NUMERIC))
def test_non_numeric_dtype_is_a_conversion_error(dtype: str, target: str, warm: bool) -> None:
    if warm:
        mt.convert(np.ones((2, 2), np.float32), target)
    if target == "tensorflow" and dtype in ("unicode", "bytes"):  # TensorFlow holds strings
        import tensorflow as tf

        assert mt.convert(NON_NUMERIC[dtype](), target).dtype == tf.string
        return
    with pytest.raises(mt.MemoryConversionError) as info:
        mt.convert(NON_NUMERIC[dtype](), target)
    assert isinstance(info.value, ValueError)
    assert info.value.source_type == "numpy" and info.value.target_type == target


@pytest.mark.parametrize("target", type_params(["numpy", "jax"]))
@pytest.mark.requires("torch", "ml_dtypes")
def test_torch_float8_and_bfloat16_reach_numpy_and_jax_bit_for_bit(target: str) -> None:
    torch = importlib.import_module("torch")
    for dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        t = torch.tensor([0.5, -1.0, 2.0, 448.0 if dtype == torch.float8_e4m3fn else 3.0]).to(dtype)
        out = mt.convert(t, target)
        assert mt.shares_memory(t, out)
        back = mt.convert(out, "torch")
        assert back.dtype == dtype
        assert torch.equal(back.view(torch.uint8 if dtype.itemsize == 1 else torch.uint16),
                           t.view(torch.uint8 if dtype.itemsize == 1 else torch.uint16))


@pytest.mark.requires("torch", "tensorflow")
def test_framework_error_without_a_known_cause_is_chained() -> None:
    torch = importlib.import_module("torch")
    x = torch.zeros(8, dtype=torch.uint8).view(torch.bits8)  # a dtype only torch has
    with pytest.raises(mt.MemoryConversionError) as info:
        mt.convert(x, "tensorflow")
    assert info.value.__cause__ is not None
    assert type(info.value.__cause__).__name__ in str(info.value)


def test_out_of_memory_is_never_rewrapped() -> None:
    # the decorators' OOM recovery recognises exact exception types: conversion must not hide them
    from memtype._failures import conversion_failure
    from memtype.frameworks import get_framework

    numpy, torch_fw = get_framework("numpy"), get_framework("torch")
    assert conversion_failure(np.ones(2), numpy, torch_fw, MemoryError("out of memory")) is None
    if usable("torch"):
        import torch

        oom = torch.OutOfMemoryError("CUDA out of memory")
        assert conversion_failure(np.ones(2), numpy, torch_fw, oom) is None
