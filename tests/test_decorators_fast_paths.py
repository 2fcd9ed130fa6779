"""The cheaper cross-type decorated call keeps every guard: whether a converted input aliases
its caller's memory is asked after the call, only once it was written to; per-dtype and
per-device decisions are cached; TensorFlow's accessors answer as before."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.errors import InputWriteError
from memtype.frameworks import CPU, load_adapter
from tests.helpers import import_if_installed

pytestmark = pytest.mark.requires("torch")

torch = import_if_installed("torch")


def _writes_then_runs_out_once() -> Any:
    calls: list[int] = []

    @mt.torch
    def f(x: Any) -> Any:
        calls.append(1)
        x.add_(1)  # in place, on what the function received
        if len(calls) == 1:
            raise torch.OutOfMemoryError("out of memory (simulated on the host)")
        return x

    return f


def test_a_write_to_the_callers_memory_before_oom_is_not_retried() -> None:
    x = np.zeros((1, 1, 2), np.float32)  # writable: reaches torch as the zero-copy alias
    with pytest.raises(InputWriteError, match="caller's array"):
        _writes_then_runs_out_once()(x)
    assert x.tolist() == [[[1.0, 1.0]]]


def test_a_write_to_a_fresh_copy_before_oom_is_retried() -> None:
    x = np.zeros((1, 1, 2), np.float32)
    x.flags.writeable = False  # reaches torch as a copy: the write is not the caller's
    out = _writes_then_runs_out_once()(x)
    assert out.tolist() == [[[1.0, 1.0]]] and x.tolist() == [[[0.0, 0.0]]]


def test_a_write_to_a_copy_of_read_only_data_is_no_error() -> None:
    @mt.torch
    def writes(x: Any) -> Any:
        return x.mul_(2)

    x = np.ones((1, 1, 2), np.float32)
    x.flags.writeable = False
    assert writes(x).tolist() == [[[2.0, 2.0]]] and x.tolist() == [[[1.0, 1.0]]]


@pytest.mark.requires("jax")
def test_a_write_to_an_alias_of_jax_data_is_still_an_error() -> None:
    jnp = importlib.import_module("jax.numpy")

    @mt.torch
    def writes(x: Any) -> Any:
        return x.mul_(2)

    with pytest.raises(InputWriteError, match="jax"):
        writes(jnp.ones((1, 1, 4), jnp.float32))


@pytest.mark.requires("jax")
def test_jax_data_reaches_numpy_read_only_and_torch_data_writable() -> None:
    jnp = importlib.import_module("jax.numpy")

    @mt.numpy
    def flags(x: Any) -> Any:
        return np.full((1, 1, 1), x.flags.writeable)

    assert not flags(jnp.ones((1, 1, 2), jnp.float32))[0, 0, 0]
    t = torch.ones(1, 1, 2)
    assert flags(t)[0, 0, 0]


@pytest.mark.requires("jax")
def test_float64_into_a_float32_framework_is_narrowed_each_call() -> None:
    seen: list[str] = []

    @mt.jax(output_type="numpy", dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)
    def dtype(x: Any) -> Any:
        seen.append(str(x.dtype))
        return x

    holds64 = load_adapter("jax").holds_dtype(np.dtype(np.float64))
    for _ in range(2):  # the second call takes the cached decision
        out = dtype(np.full((1, 1, 2), 0.5))
        assert out.tolist() == [[[0.5, 0.5]]]
    assert seen == (["float64"] * 2 if holds64 else ["float32"] * 2)
    if not holds64:  # without x64, a value beyond float32 is an error, never an infinity
        with pytest.raises(mt.MemoryConversionError, match="exceed"):
            dtype(np.full((1, 1, 1), 1e300))


@pytest.mark.requires("tensorflow")
def test_tensorflow_accessors() -> None:
    import tensorflow as tf

    tfa = load_adapter("tensorflow")
    x = tf.reshape(tf.range(6, dtype=tf.int32), (1, 2, 3))
    v = tf.Variable(tf.zeros((2, 2), tf.float64))
    assert tfa.shape_of(x) == (1, 2, 3) and type(tfa.shape_of(x)) is tuple
    assert tfa.shape_of(v) == (2, 2) and tfa.shape_of(tf.constant(1.0)) == ()
    assert tfa.shape_of(tf.zeros((0, 4))) == (0, 4)
    for dt in (tf.bool, tf.uint8, tf.int16, tf.int64, tf.float16, tf.bfloat16, tf.float32,
               tf.float64, tf.complex64):
        t = tf.zeros((1,), dt)
        assert tfa.dtype_of(t) == np.dtype(dt.as_numpy_dtype)
        assert tfa.dtype_of(t) is tfa.dtype_of(t)
    assert tfa.dtype_of(v) == np.float64
    assert tfa.device_of(x) == CPU and tfa.device_of(v) == CPU
    with tf.device("/CPU:0"):
        assert tfa.device_of(tf.identity(x)) == CPU
