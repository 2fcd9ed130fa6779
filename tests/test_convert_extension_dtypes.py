"""ml_dtypes (bfloat16, float8, float4/6, int2/4...) across every pair, and lying NumPy subclasses.

Every pair either converts bit for bit with the dtype kept, or refuses with a
MemoryConversionError saying the target cannot hold the dtype; the dtypes the docs list
(bfloat16 and the float8 family) convert between NumPy, torch, JAX and TensorFlow.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import memtype as mt
from tests.expectations import jax_holds_extension
from tests.frameworks import available_types
from tests.helpers import aligned, dtype_of, host, import_if_installed

pytestmark = pytest.mark.requires("ml_dtypes")

ml_dtypes = import_if_installed("ml_dtypes")

NAMES = [n for n in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                     "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e4m3", "float8_e3m4",
                     "float8_e8m0fnu", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn",
                     "int2", "int4", "uint2", "uint4") if hasattr(ml_dtypes, n)]
DOCUMENTED = {"bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"}
HOLDERS = {"numpy", "torch", "jax", "tensorflow"}  # hold every DOCUMENTED dtype
SHARING = {"numpy", "torch", "jax"}  # share every DOCUMENTED dtype zero-copy on the host
TYPES = available_types()


def _values(name: str) -> np.ndarray:
    dt = np.dtype(getattr(ml_dtypes, name))
    raw = [[1, 0, 1], [1, 1, 0]] if "int" in name else [[1.0, 0.5, 2.0], [4.0, 1.0, 0.5]]
    return aligned(np.array(raw, np.float32).astype(dt))


def _source(name: str, source: str) -> Any | None:
    """The values as a ``source`` array; None when ``source`` refuses them (clearly)."""
    try:
        return mt.convert(_values(name), source)
    except mt.MemoryConversionError as exc:
        assert f"{source} cannot hold dtype {name}" in str(exc), exc
        assert not (name in DOCUMENTED and source in HOLDERS), exc
        return None


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("source,target",
                         [p for p in itertools.product(TYPES, repeat=2) if p[0] != p[1]])
def test_extension_dtype_pair(name: str, source: str, target: str) -> None:
    x = _source(name, source)
    if x is None:  # the refusal was checked; no such source array exists
        return
    expected = _values(name)
    try:
        y = mt.convert(x, target)
    except mt.MemoryConversionError as exc:
        assert f"{target} cannot hold dtype {name}" in str(exc), exc
        assert not (name in DOCUMENTED and {source, target} <= HOLDERS), exc
        return
    assert dtype_of(y) == expected.dtype
    np.testing.assert_array_equal(host(y).view(np.uint8), expected.view(np.uint8))
    if name in DOCUMENTED and {source, target} <= SHARING:
        assert mt.shares_memory(x, y)


@pytest.mark.requires("jax")
def test_float8_e5m2_numpy_to_jax() -> None:  # ml_dtypes gives float8_e5m2 kind 'f'
    a = np.array([1.5], ml_dtypes.float8_e5m2)
    j = mt.convert(a, "jax")
    assert j.dtype == a.dtype and float(j[0]) == 1.5


@pytest.mark.requires("jax")
@pytest.mark.parametrize("name", NAMES)
def test_jax_takes_exactly_the_dtypes_the_installed_jax_holds(name: str) -> None:
    """Old JAX (0.4.30) lacks float8_e4m3, float4, int2...: refused clearly, never a JAX error;
    every dtype the installed JAX holds converts bit for bit (none refused by a fixed list)."""
    a = _values(name)
    if not jax_holds_extension(a.dtype):
        with pytest.raises(mt.MemoryConversionError, match=f"jax cannot hold dtype {name}"):
            mt.convert(a, "jax")
        return
    j = mt.convert(a, "jax")
    assert dtype_of(j) == a.dtype
    np.testing.assert_array_equal(host(j).view(np.uint8), a.view(np.uint8))


@pytest.mark.requires("torch", "tensorflow")
def test_float8_e5m2_torch_to_tensorflow() -> None:
    import torch

    t = torch.tensor([1.5, -2.0]).to(torch.float8_e5m2)
    tf_tensor = mt.convert(t, "tensorflow")
    assert dtype_of(tf_tensor) == np.dtype(ml_dtypes.float8_e5m2)
    np.testing.assert_array_equal(host(tf_tensor).astype(np.float32), [1.5, -2.0])


@pytest.mark.requires("pyclesperanto")
@pytest.mark.opencl
def test_pyclesperanto_refuses_float8_clearly() -> None:
    with pytest.raises(mt.MemoryConversionError, match="pyclesperanto cannot hold dtype float8"):
        mt.convert(np.ones((2, 2), ml_dtypes.float8_e5m2), "pyclesperanto")


class _LyingDlpack(np.ndarray):
    """A NumPy subclass whose __dlpack__ (and __array_interface__) describe another buffer."""

    decoy = np.full(1024, 99.0, np.float32)

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self.decoy.__dlpack__(*args, **kwargs)

    @property
    def __array_interface__(self) -> dict[str, Any]:
        return self.decoy.__array_interface__


@pytest.mark.parametrize("target", [t for t in TYPES if t != "numpy"])
def test_numpy_subclass_lying_about_its_buffer(target: str) -> None:
    values = aligned(np.arange(12, dtype=np.float32).reshape(3, 4))
    liar = values.view(_LyingDlpack)
    y = mt.convert(liar, target)
    np.testing.assert_array_equal(host(y), values)
    assert host(y).shape == (3, 4)
