from __future__ import annotations

import itertools

import numpy as np
import pytest

import memtype as mt
from tests.frameworks import available_types, builtin_names, pair_params, type_params
from tests.helpers import dtype_of, host, shape_of


@pytest.mark.parametrize("target", type_params())
def test_stack_mixed_types(target: str) -> None:
    types = available_types()
    slices = [mt.convert(np.full((3, 4), i, np.float32), types[i % len(types)]) for i in range(5)]
    stacked = mt.stack_slices(slices, target)
    assert mt.detect_memory_type(stacked) is mt.MemoryType(target)
    assert shape_of(stacked) == (5, 3, 4)
    np.testing.assert_array_equal(host(stacked), np.stack([np.full((3, 4), i) for i in range(5)]))


@pytest.mark.parametrize("source,target", pair_params(itertools.product(builtin_names(), repeat=2)))
def test_unstack(source: str, target: str) -> None:
    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = mt.unstack_slices(mt.convert(values, source), target)
    assert len(out) == 2
    for i, s in enumerate(out):
        assert mt.detect_memory_type(s) is mt.MemoryType(target)
        assert shape_of(s) == (3, 4) and dtype_of(s) == np.float32
        np.testing.assert_array_equal(host(s), values[i])


def test_stack_unstack_round_trip_uint16() -> None:
    slices = [np.random.default_rng(i).integers(0, 65535, (8, 8)).astype(np.uint16)
              for i in range(4)]
    for t in available_types():
        again = mt.unstack_slices(mt.stack_slices(slices, t), "numpy")
        for a, b in zip(slices, again):
            np.testing.assert_array_equal(a, b)


def test_empty_list() -> None:
    with pytest.raises(mt.errors.ShapeError, match="empty"):
        mt.stack_slices([], "numpy")


def test_slice_not_2d_names_index_and_shape() -> None:
    slices = [np.zeros((2, 2)), np.zeros((2, 2)), np.zeros((2, 2, 1))]
    with pytest.raises(ValueError, match=r"Slice 2 must be 2D; received shape \(2, 2, 1\)"):
        mt.stack_slices(slices, "numpy")


@pytest.mark.requires("torch")
def test_mixed_shapes_names_index_and_shapes() -> None:
    import torch

    slices = [np.zeros((2, 2)), torch.zeros(2, 3)]
    with pytest.raises(mt.errors.ShapeError, match=r"slice 1 has shape \(2, 3\)"):
        mt.stack_slices(slices, "torch")


def test_unstack_needs_3d() -> None:
    with pytest.raises(mt.errors.ShapeError, match=r"received shape \(4, 4\)"):
        mt.unstack_slices(np.zeros((4, 4)), "numpy")


def test_stack_rejects_non_arrays() -> None:
    with pytest.raises(mt.UnsupportedArrayError):
        mt.stack_slices([[1, 2], [3, 4]], "numpy")


def test_stack_generator_input() -> None:
    stacked = mt.stack_slices((np.ones((2, 2)) * i for i in range(3)), "numpy")
    assert stacked.shape == (3, 2, 2)


# --- one dtype rule for mixed dtypes (issue 12, item 4) ---

MIXED = [np.full((2, 3), 7, np.uint8), np.full((2, 3), -1.5, np.float32),
         np.full((2, 3), 300.7, np.float32)]


@pytest.mark.parametrize("source,target", pair_params(itertools.product(builtin_names(), repeat=2)))
def test_mixed_dtypes_stack_in_their_promotion(source: str, target: str) -> None:
    slices = [mt.convert(s, source) for s in MIXED]
    stacked = mt.stack_slices(slices, target)
    assert dtype_of(stacked) == np.float32
    np.testing.assert_array_equal(host(stacked)[:, 0, 0], np.array([7, -1.5, 300.7], np.float32))


@pytest.mark.parametrize("target", type_params())
def test_mixed_dtypes_that_would_change_values_raise(target: str) -> None:
    slices = [np.full((2, 2), 2**60 + 1, np.int64), np.full((2, 2), 3, np.uint64)]
    with pytest.raises(mt.errors.DtypePolicyError, match=r"int64.*uint64.*float64"):
        mt.stack_slices(slices, target)


def test_mixed_dtypes_whose_values_survive_stack() -> None:
    slices = [np.full((2, 2), 2**40 + 1, np.int64), np.full((2, 2), 3, np.uint64)]
    stacked = mt.stack_slices(slices, "numpy")
    assert stacked.dtype == np.float64 and stacked[0, 0, 0] == 2**40 + 1


@pytest.mark.parametrize("target", type_params())
def test_masked_slices_are_refused_not_unmasked(target: str) -> None:
    masked = np.ma.masked_array(np.zeros((2, 2)), mask=[[True, False], [False, False]])
    with pytest.raises(mt.UnsupportedArrayError, match="slice 1.*mask"):
        mt.stack_slices([np.zeros((2, 2)), masked], target)


@pytest.mark.requires("pyclesperanto")
@pytest.mark.opencl
def test_pyclesperanto_stacks_large_int32_exactly() -> None:
    big = np.arange(6, dtype=np.int32).reshape(2, 3) + (2**31 - 7)  # cle.paste rounds these
    slices = [mt.convert(big, "pyclesperanto"), mt.convert(big - 5, "pyclesperanto")]
    np.testing.assert_array_equal(host(mt.stack_slices(slices, "pyclesperanto")),
                                  np.stack([big, big - 5]))


@pytest.mark.parametrize("slices", [None, 3, "ab", b"ab", {1, 2}, {"a": np.zeros((2, 2))}],
                         ids=["none", "int", "str", "bytes", "set", "dict"])
def test_stack_of_a_non_sequence(slices: object) -> None:
    with pytest.raises(mt.errors.ArgumentTypeError, match="needs a sequence of 2D arrays"):
        mt.stack_slices(slices, "numpy")  # type: ignore[arg-type]


@pytest.mark.parametrize("array", [None, [[[1.0]]], "abc"], ids=["none", "list", "str"])
def test_unstack_of_a_non_array(array: object) -> None:
    with pytest.raises(mt.UnsupportedArrayError):
        mt.unstack_slices(array, "numpy")
