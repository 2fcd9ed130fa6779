"""Awkward inputs: views, strides, read-only, 0-d, 0-size, byte order, alignment, every dtype."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import numpy as np
import pytest

import memtype as mt
from tests.expectations import expected_dtype
from tests.frameworks import available_types, builtin_names, type_params
from tests.helpers import dtype_of, host, shape_of


def _unaligned(offset: int) -> np.ndarray:
    raw = np.zeros(6 * 4 + 64 + offset, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    a = raw[start:start + 24].view(np.float32).reshape(2, 3)
    a[...] = np.arange(6).reshape(2, 3) + 0.25
    return a


def _read_only() -> np.ndarray:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    a.flags.writeable = False
    return a


LAYOUTS: dict[str, Callable[[], np.ndarray]] = {
    "transposed": lambda: np.arange(12, dtype=np.float32).reshape(3, 4).T,
    "sliced": lambda: np.arange(40, dtype=np.float32).reshape(5, 8)[1:4, ::2],
    "negative_strides": lambda: np.arange(12, dtype=np.float32).reshape(3, 4)[::-1, ::-1],
    "read_only": _read_only,
    "broadcast": lambda: np.broadcast_to(np.arange(4, dtype=np.float32), (3, 4)),
    "zero_d": lambda: np.array(3.5, dtype=np.float32),
    "zero_size": lambda: np.zeros((0, 4), dtype=np.float32),
    "big_endian": lambda: np.arange(6, dtype=">f4").reshape(2, 3),
    "unaligned_by_1_byte": lambda: _unaligned(1),
    "aligned_16_not_64": lambda: _unaligned(16),
    "four_d": lambda: np.arange(16, dtype=np.float32).reshape(2, 2, 2, 2),
    "fortran_order": lambda: np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)),
}

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128", "bfloat16"]


@pytest.mark.requires("ml_dtypes")
def _dtype_values(name: str) -> np.ndarray:
    if name == "bfloat16":
        ml_dtypes = importlib.import_module("ml_dtypes")
        return np.array([[0.5, -2.0, 3.0], [1.5, 0.0, 8.0]], dtype=ml_dtypes.bfloat16)
    if name == "bool":
        return np.array([[True, False, True], [False, False, True]])
    dt = np.dtype(name)
    values = np.array([[0, 1, 2], [3, 100, 7]]).astype(dt)
    if dt.kind in "fc":
        values[0, 0] = -1.5
    if dt.kind == "c":
        values = values + 2j
    if dt.kind == "i":
        values[0, 0] = np.iinfo(dt).min
    if dt.kind in "iu":
        values[1, 1] = np.iinfo(dt).max if dt.itemsize <= 4 else 2**31 - 1
    return values


def _check(a: np.ndarray, target: str) -> None:
    original = np.array(a, copy=True)
    expected = expected_dtype(a, target)
    if isinstance(expected, type):
        with pytest.raises(expected):
            mt.convert(a, target)
        return
    y = mt.convert(a, target)
    assert mt.detect_memory_type(y) is mt.MemoryType(target)
    assert shape_of(y) == a.shape
    assert dtype_of(y) == expected
    np.testing.assert_array_equal(host(y), original.astype(expected))
    back = mt.convert(y, "numpy")
    np.testing.assert_array_equal(back.astype(original.dtype.newbyteorder("=")), original)
    np.testing.assert_array_equal(a, original)  # the caller's data is untouched


@pytest.mark.parametrize("target", type_params())
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_layouts(layout: str, target: str) -> None:
    _check(LAYOUTS[layout](), target)


@pytest.mark.parametrize("target", type_params())
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.requires("ml_dtypes")
def test_dtypes(dtype: str, target: str) -> None:
    _check(_dtype_values(dtype), target)


# every integer type code NumPy has: numpy.ulonglong ("Q") is uint64 under another code (MLX
# and the buffer protocol make such arrays), which torch.from_numpy refused by name
TYPE_CODES = ["Q", "q", "L", "l", "I", "i", "H", "h", "B", "b"]


@pytest.mark.parametrize("target", type_params())
@pytest.mark.parametrize("code", TYPE_CODES)
def test_every_integer_type_code(code: str, target: str) -> None:
    a = _dtype_values(np.dtype(code).name).astype(np.dtype(code))
    assert a.dtype.char == code
    _check(a, target)


@pytest.mark.parametrize("target", type_params(["jax", "pyclesperanto"]))
def test_lossy_narrowing_is_refused_with_a_hint(target: str) -> None:
    with pytest.raises(mt.MemoryConversionError) as info:
        mt.convert(np.array([0.1, 0.2]), target)
    assert "float64" in str(info.value) and "float32" in str(info.value)


def test_large_int64_is_refused_by_32_bit_targets() -> None:
    big = np.array([2**40, 1], dtype=np.int64)
    for target in ("jax", "pyclesperanto"):
        if target in available_types():
            with pytest.raises(mt.MemoryConversionError):
                mt.convert(big, target)


@pytest.mark.parametrize("target", type_params())
@pytest.mark.requires("torch")
def test_torch_requires_grad(target: str) -> None:
    import torch

    t = torch.arange(6, dtype=torch.float32).reshape(2, 3).requires_grad_(True)
    np.testing.assert_array_equal(host(mt.convert(t, target)), np.arange(6).reshape(2, 3))


@pytest.mark.parametrize("target", type_params(n for n in builtin_names() if n != "pyclesperanto"))
@pytest.mark.requires("torch")
def test_torch_conjugate_view(target: str) -> None:
    import torch

    t = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64).conj()
    np.testing.assert_array_equal(host(mt.convert(t, target)), np.array([1 - 2j, 3 + 1j]))


@pytest.mark.parametrize("target", type_params())
@pytest.mark.requires("torch")
def test_torch_non_contiguous(target: str) -> None:
    import torch

    t = torch.arange(24, dtype=torch.float32).reshape(4, 6)[::2, 1::2].t()
    np.testing.assert_array_equal(host(mt.convert(t, target)), t.numpy())


@pytest.mark.parametrize("target", type_params())
@pytest.mark.requires("tensorflow")
def test_tensorflow_variable(target: str) -> None:
    import tensorflow as tf

    v = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(host(mt.convert(v, target)), np.arange(6).reshape(2, 3))


@pytest.mark.parametrize("target",
                         type_params(["numpy", "torch", "cupy"]))
@pytest.mark.requires("tensorflow")
def test_writes_to_a_converted_tf_variable_never_reach_the_variable(target: str) -> None:
    # every way to read a Variable shares its buffer, and TensorFlow only copies on its own
    # writes: a zero-copy export would let the target write into the variable
    tf = importlib.import_module("tensorflow")
    v = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    out = mt.convert(v, target)
    out[0, 0] = 100
    np.testing.assert_array_equal(v.numpy(), np.arange(6).reshape(2, 3))


@pytest.mark.requires("torch")
def test_numpy_to_torch_copy_protects_read_only_source() -> None:
    a = _read_only()
    t = mt.convert(a, "torch")
    t += 1  # torch may write its result; the read-only source must not change
    np.testing.assert_array_equal(a, np.arange(12).reshape(3, 4))


@pytest.mark.parametrize("target", type_params())
@pytest.mark.parametrize("shape", [(1,), (1, 4), (3, 1)])
def test_negative_strides_on_length_one_axes(shape: tuple[int, ...], target: str) -> None:
    # numpy calls these C-contiguous although a stride is negative
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)[::-1]
    _check(a, target)
