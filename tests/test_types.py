from __future__ import annotations

import pickle

import numpy as np
import pytest

import memtype as mt
from memtype.frameworks import FRAMEWORKS, get_framework


def test_values_are_lowercase_names() -> None:
    assert [m.value for m in mt.MemoryType] == [
        "numpy", "cupy", "torch", "tensorflow", "jax", "pyclesperanto"]
    assert mt.MemoryType.TORCH.value == "torch"


def test_enum_and_table_agree() -> None:
    assert [m.value for m in mt.MemoryType] == list(FRAMEWORKS)[:6]


@pytest.mark.parametrize("text", ["torch", "TORCH", "Torch"])
def test_lookup_by_string_any_case(text: str) -> None:
    assert mt.MemoryType(text) is mt.MemoryType.TORCH


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(mt.UnknownMemoryTypeError) as info:
        get_framework("pytorch")
    assert isinstance(info.value, ValueError)
    assert str(info.value) == ("Unknown memory type 'pytorch'. Expected one of: numpy, cupy, "
                               "torch, tensorflow, jax, pyclesperanto.")


def test_unknown_enum_value_is_value_error() -> None:
    with pytest.raises(ValueError):
        mt.MemoryType("pytorch")


def test_memory_type_pickles_to_itself() -> None:
    assert pickle.loads(pickle.dumps(mt.MemoryType.JAX)) is mt.MemoryType.JAX


@pytest.mark.parametrize("member", list(mt.DtypeConversion), ids=lambda m: m.name)
def test_dtype_conversion_numpy_dtype(member: mt.DtypeConversion) -> None:
    if member.name in ("PRESERVE_INPUT", "NATIVE_OUTPUT"):
        assert member.numpy_dtype is None
    else:
        assert member.numpy_dtype == np.dtype(member.name.lower())


def test_conversion_error_carries_types_and_pickles() -> None:
    err = mt.MemoryConversionError("blocked path", "cupy", "jax")
    again = pickle.loads(pickle.dumps(err))
    assert (again.reason, again.source_type, again.target_type) == ("blocked path", "cupy", "jax")
    assert "cupy -> jax" in str(again)
