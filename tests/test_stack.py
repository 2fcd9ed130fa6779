from __future__ import annotations

import itertools

import numpy as np
import pytest

import memtype as mt
from tests.frameworks import available_types
from tests.helpers import dtype_of, host, shape_of


@pytest.mark.parametrize("target", available_types())
def test_stack_mixed_types(target: str) -> None:
    types = available_types()
    slices = [mt.convert(np.full((3, 4), i, np.float32), types[i % len(types)]) for i in range(5)]
    stacked = mt.stack_slices(slices, target)
    assert mt.detect_memory_type(stacked) is mt.MemoryType(target)
    assert shape_of(stacked) == (5, 3, 4)
    np.testing.assert_array_equal(host(stacked), np.stack([np.full((3, 4), i) for i in range(5)]))


@pytest.mark.parametrize("source,target", list(itertools.product(available_types(), repeat=2)))
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
    with pytest.raises(mt.ShapeError, match="empty"):
        mt.stack_slices([], "numpy")


def test_slice_not_2d_names_index_and_shape() -> None:
    slices = [np.zeros((2, 2)), np.zeros((2, 2)), np.zeros((2, 2, 1))]
    with pytest.raises(ValueError, match=r"Slice 2 must be 2D; received shape \(2, 2, 1\)"):
        mt.stack_slices(slices, "numpy")


def test_mixed_shapes_names_index_and_shapes() -> None:
    import torch

    slices = [np.zeros((2, 2)), torch.zeros(2, 3)]
    with pytest.raises(mt.ShapeError, match=r"slice 1 has shape \(2, 3\)"):
        mt.stack_slices(slices, "torch")


def test_unstack_needs_3d() -> None:
    with pytest.raises(mt.ShapeError, match=r"received shape \(4, 4\)"):
        mt.unstack_slices(np.zeros((4, 4)), "numpy")


def test_stack_rejects_non_arrays() -> None:
    with pytest.raises(mt.UnsupportedArrayError):
        mt.stack_slices([[1, 2], [3, 4]], "numpy")


def test_stack_generator_input() -> None:
    stacked = mt.stack_slices((np.ones((2, 2)) * i for i in range(3)), "numpy")
    assert stacked.shape == (3, 2, 2)
