from __future__ import annotations

import pickle

import numpy as np
import pytest

import memtype as mt
from memtype.frameworks import FRAMEWORKS, get_framework
from tests.frameworks import builtin_names


def test_values_are_lowercase_names() -> None:
    assert all(m.value == m.value.lower() == m.name.lower() for m in mt.MemoryType)
    assert mt.MemoryType.TORCH.value == "torch"


def test_enum_and_table_agree() -> None:
    """The enum's members are the table's first rows, in order (later rows: made on lookup)."""
    members = [m.value for m in mt.MemoryType]
    assert members == list(FRAMEWORKS)[:len(members)]


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_row_is_a_member(name: str) -> None:
    member = mt.MemoryType(name)
    assert isinstance(member, mt.MemoryType) and member.value == name
    assert mt.MemoryType(name.upper()) is member


@pytest.mark.parametrize("text", ["torch", "TORCH", "Torch"])
def test_lookup_by_string_any_case(text: str) -> None:
    assert mt.MemoryType(text) is mt.MemoryType.TORCH


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(mt.UnknownMemoryTypeError) as info:
        get_framework("pytorch")
    assert isinstance(info.value, ValueError)
    assert str(info.value) == ("Unknown memory type 'pytorch'. Expected one of: "
                               f"{', '.join(FRAMEWORKS)}.")


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
