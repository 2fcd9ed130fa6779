"""What arraybridge 0.5.2's own test suite found missing in memtype's OpenHCS compatibility surface.

Each test is written in memtype's terms; the comment names the peer test that found the gap
(docs/api.md, "Against the peers' suites").
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import memtype as mt

NOT_ARRAYS = {"list": [1, 2, 3], "None": None, "str": "not an array"}

# The same mechanism (a value of no framework) reached through each compatibility function.
NON_ARRAY_CALLS: dict[str, Callable[[], Any]] = {
    "detect_memory_type": lambda: mt.detect_memory_type([1, 2]),
    "convert_memory": lambda: mt.convert_memory([1, 2], "numpy", "numpy"),
    "stack_slices": lambda: mt.stack_slices([[[1, 2]]], "numpy", 0),
    "unstack_slices": lambda: mt.unstack_slices([[[1, 2]]], "numpy", 0),
}


# arraybridge tests/test_converters.py::TestDetectMemoryType::test_value_of_no_library_is_rejected
@pytest.mark.parametrize("value", NOT_ARRAYS.values(), ids=NOT_ARRAYS.keys())
def test_detect_memory_type_of_a_non_array_is_a_value_error(value: object) -> None:
    with pytest.raises(ValueError, match="not an array of any loaded framework"):
        mt.detect_memory_type(value)


@pytest.mark.parametrize("call", NON_ARRAY_CALLS.values(), ids=NON_ARRAY_CALLS.keys())
def test_non_array_in_a_compatibility_call_is_a_value_error(call: Callable[[], Any]) -> None:
    with pytest.raises(ValueError) as info:
        call()
    assert isinstance(info.value, mt.UnsupportedArrayError)
    assert isinstance(info.value, TypeError)  # still what memtype documented before


def _openhcs_error() -> mt.MemoryConversionError:
    return mt.MemoryConversionError(source_type="numpy", target_type="cupy",
                                    method="array_interface", reason="CUDA not available")


# arraybridge tests/test_exceptions.py::TestMemoryConversionError::test_basic_exception_creation
def test_memory_conversion_error_takes_the_openhcs_keywords() -> None:
    error = _openhcs_error()
    assert (error.source_type, error.target_type, error.method, error.reason) == (
        "numpy", "cupy", "array_interface", "CUDA not available")


# arraybridge tests/test_exceptions.py::TestMemoryConversionError::test_exception_message_format
def test_memory_conversion_error_message_names_the_method() -> None:
    assert str(_openhcs_error()) == (
        "Cannot convert numpy -> cupy using array_interface: CUDA not available")


def test_memory_conversion_error_keeps_its_method_through_pickle() -> None:
    restored = pickle.loads(pickle.dumps(_openhcs_error()))
    assert (restored.method, str(restored)) == ("array_interface", str(_openhcs_error()))


def test_memory_conversion_error_without_a_method_reads_as_before() -> None:
    error = mt.MemoryConversionError("blocked path", "cupy", "jax")
    assert (error.method, str(error)) == ("", "Cannot convert cupy -> jax: blocked path")


def test_memory_conversion_error_raised_by_a_conversion_has_no_method() -> None:
    with pytest.raises(mt.MemoryConversionError) as info:
        mt.convert_memory(np.zeros(2), "torch", "numpy")
    assert (info.value.source_type, info.value.target_type, info.value.method) == (
        "torch", "numpy", "")
