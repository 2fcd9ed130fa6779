"""Every ordered pair of usable memory types: type, shape, dtype, values, zero-copy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import memtype as mt
from tests.frameworks import available_types, builtin_names, pair_params, type_params
from tests.helpers import aligned, dtype_of, host, shape_of

PAIR_NAMES = list(itertools.product(builtin_names(), repeat=2))
PAIRS = pair_params(PAIR_NAMES, sep="->")
HOST_SHARING: dict[str, tuple[bool, bool, int, int]] = {
    "numpy": (True, True, 64, 1), "cupy": (False, False, 1, 1), "torch": (True, True, 64, 1),
    "tensorflow": (True, True, 64, 64), "jax": (True, True, 64, 64),
    "pyclesperanto": (False, False, 1, 1),
    "mlx": (True, False, 8, 1),  # exports its buffer (at 8 mod 64); copies every import
}
"""Per built-in type, for a 64-byte aligned source buffer: (a conversion from it shares its
host buffer, a conversion into it shares the source's buffer, the alignment its buffer has,
the alignment it needs to share one) (test_tables_cover_every_row)."""


@pytest.fixture
def values() -> np.ndarray:
    return aligned(np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5)


@pytest.mark.parametrize("source,target", PAIRS)
def test_pair_converts_values(source: str, target: str, values: np.ndarray) -> None:
    x = mt.convert(values, source)
    y = mt.convert(x, target)
    assert mt.detect_memory_type(y) is mt.MemoryType(target)
    assert shape_of(y) == (2, 3, 4)
    assert dtype_of(y) == np.float32
    np.testing.assert_array_equal(host(y), values)


@pytest.mark.parametrize("source,target", PAIRS)
def test_pair_zero_copy_where_frameworks_allow(source: str, target: str,
                                               values: np.ndarray) -> None:
    x = mt.convert(values, source)
    y = mt.convert(x, target)
    exports, _, has_align, _ = HOST_SHARING[source]
    _, imports, _, needs_align = HOST_SHARING[target]
    if source == target:  # the input itself
        expected = exports
    else:
        expected = exports and imports and has_align % needs_align == 0
    assert mt.shares_memory(x, y) is expected


@pytest.mark.parametrize("source,target", PAIRS)
def test_convert_memory_signature(source: str, target: str, values: np.ndarray) -> None:
    x = mt.convert(values, source)
    y = mt.convert_memory(x, mt.MemoryType(source), target, gpu_id=None, allow_cpu_roundtrip=False)
    np.testing.assert_array_equal(host(y), values)


@pytest.mark.parametrize("name", type_params())
def test_same_type_returns_input_itself(name: str, values: np.ndarray) -> None:
    x = mt.convert(values, name)
    assert mt.convert(x, name) is x
    assert mt.convert(x, mt.MemoryType(name)) is x


@pytest.mark.parametrize("source,target", pair_params([(s, t) for s, t in PAIR_NAMES if s != t]))
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
