"""Every ordered pair of usable memory types: type, shape, dtype, values, zero-copy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import memtype as mt
from tests.frameworks import available_types
from tests.helpers import aligned, dtype_of, host, shape_of

PAIRS = list(itertools.product(available_types(), repeat=2))
HOST_SHARING = {"numpy", "torch", "jax", "tensorflow"}


@pytest.fixture
def values() -> np.ndarray:
    return aligned(np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5)


@pytest.mark.parametrize("source,target", PAIRS, ids=[f"{s}->{t}" for s, t in PAIRS])
def test_pair_converts_values(source: str, target: str, values: np.ndarray) -> None:
    x = mt.convert(values, source)
    y = mt.convert(x, target)
    assert mt.detect_memory_type(y) is mt.MemoryType(target)
    assert shape_of(y) == (2, 3, 4)
    assert dtype_of(y) == np.float32
    np.testing.assert_array_equal(host(y), values)


@pytest.mark.parametrize("source,target", PAIRS, ids=[f"{s}->{t}" for s, t in PAIRS])
def test_pair_zero_copy_where_frameworks_allow(source: str, target: str,
                                               values: np.ndarray) -> None:
    x = mt.convert(values, source)
    y = mt.convert(x, target)
    expected = source in HOST_SHARING and target in HOST_SHARING
    assert mt.shares_memory(x, y) is expected


@pytest.mark.parametrize("source,target", PAIRS, ids=[f"{s}->{t}" for s, t in PAIRS])
def test_convert_memory_signature(source: str, target: str, values: np.ndarray) -> None:
    x = mt.convert(values, source)
    y = mt.convert_memory(x, mt.MemoryType(source), target, gpu_id=None, allow_cpu_roundtrip=False)
    np.testing.assert_array_equal(host(y), values)


@pytest.mark.parametrize("name", available_types())
def test_same_type_returns_input_itself(name: str, values: np.ndarray) -> None:
    x = mt.convert(values, name)
    assert mt.convert(x, name) is x
    assert mt.convert(x, mt.MemoryType(name)) is x


@pytest.mark.parametrize("source,target", [(s, t) for s, t in PAIRS if s != t][:8])
def test_wrong_source_type_names_both(source: str, target: str, values: np.ndarray) -> None:
    x = mt.convert(values, target)
    with pytest.raises(mt.MemoryConversionError) as info:
        mt.convert_memory(x, source, target)
    assert f"given as {source!r}" in str(info.value)
    assert f"is a {target} array" in str(info.value)


def test_caller_data_never_mutated(values: np.ndarray) -> None:
    before = values.copy()
    for target in available_types():
        mt.convert(values, target)
    np.testing.assert_array_equal(values, before)
