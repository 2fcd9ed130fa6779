"""The dtype policy rounds and clips in the temporaries its own cast made (``owned``), never
in the caller's array or a function's result, and gives bit for bit what the functional
rounding (rint, NaN -> 0, clip: the base adapter's ``rint_clip``, the code before) gives."""

from __future__ import annotations

import math
import tracemalloc
import warnings
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.conversion.casting import Ops, cast
from memtype.frameworks import Adapter, load_adapter
from tests.frameworks import type_params

NAN, INF = math.nan, math.inf
INTS = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64"]
FLOATS = ["float16", "float32", "float64"]
MUTABLE = type_params(["numpy", "torch", "cupy"])  # the adapters that round in place

# every edge the policy documents: NaN, infinities, .5 ties, negative zero, out of range
EDGES = [NAN, INF, -INF, -0.0, 0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997, 1.0, -1.0, 3.0,
         127.5, 128.5, -128.5, 254.5, 255.5, 32767.5, -32768.5, 65534.5, 65535.5, 2.0**31,
         2.0**32, 4294967040.0, 2.0**63, 2.0**64, 1e20, -1e20]


def _unit(dst: str) -> list[float]:
    """Unit floats whose scaled values land on .5 ties of ``dst`` (the fits path's inputs)."""
    info = np.iinfo(dst)
    hi = float(info.max)
    ties = [0.5 / hi, 1.5 / hi, 2.5 / hi, 0.5, 1.0, 0.0, -0.0]
    return ties + ([-1.0, -0.5, -1.5 / hi] if info.min < 0 else [])


def _scale(dst: str) -> list[float]:
    """Values on the integer scale, inside ``dst``'s range, at .5 ties (clip's fits path)."""
    info = np.iinfo(dst)
    top = min(float(info.max), 60000.0)
    return [2.5, 3.5, -0.0, top - 0.5, 100.5] + ([-2.5, -100.5] if info.min < 0 else [])


CASES = [("edges-clip", "clip", False), ("edges-unit", "unit", False),
         ("edges-rescale", "rescale", False), ("unit-bounded", "unit", True),
         ("scale-bounded", "clip", True)]


def _values(case: str, dst: str) -> list[float]:
    return EDGES if case.startswith("edges") else _unit(dst) if case == "unit-bounded" \
        else _scale(dst)


def _functional(adapter: Adapter) -> Adapter:
    """``adapter`` with the base class's rint_clip: new arrays at every step (as before)."""

    class Functional(type(adapter)):  # type: ignore[misc]
        def rint_clip(self, x: Any, bounds: tuple[float, float] | None = None, *,
                      in_place: bool = False) -> Any:
            return Adapter.rint_clip(self, x, bounds)

    made: Adapter = Functional()
    return made


def _array(memory_type: str, values: list[float], dtype: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 1e20 -> float16 is inf, on purpose
        host = np.array(values, dtype=np.float64).astype(dtype)
    return mt.convert(host, memory_type)


def _host(x: Any) -> np.ndarray[Any, Any]:
    return np.asarray(mt.convert(x, "numpy"))


@pytest.mark.parametrize("memory_type", MUTABLE)
@pytest.mark.parametrize("src", FLOATS)
@pytest.mark.parametrize("dst", INTS)
@pytest.mark.parametrize("case,scaling,bounded", CASES, ids=[c[0] for c in CASES])
def test_in_place_rounding_is_bit_identical_to_the_functional_one(
        memory_type: str, src: str, dst: str, case: str, scaling: str, bounded: bool) -> None:
    adapter = load_adapter(memory_type)
    values = _values(case, dst)
    x = _array(memory_type, values, src)
    before = _host(x).copy()
    finite = before.astype(np.float64)
    bounds = (float(finite.min()), float(finite.max())) if bounded else None
    s, d = np.dtype(src), np.dtype(dst)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = _host(Ops(_functional(adapter)).cast(_array(memory_type, values, src), s, d,
                                                       scaling, bounds))  # type: ignore[arg-type]
        got = _host(Ops(adapter).cast(x, s, d, scaling, bounds))  # type: ignore[arg-type]
    assert got.dtype == expected.dtype == d
    assert got.tobytes() == expected.tobytes(), (values, got, expected)
    assert _host(x).tobytes() == before.tobytes()  # the caller's array is untouched


@pytest.mark.parametrize("memory_type", MUTABLE)
def test_rint_clip_in_place_works_in_the_temporary_itself(memory_type: str) -> None:
    adapter = load_adapter(memory_type)
    x = _array(memory_type, [NAN, -3.5, 2.5, 300.7], "float32")
    r = adapter.rint_clip(x, (0.0, 255.0), in_place=True)
    assert adapter.data_ptr(r) == adapter.data_ptr(x)
    assert _host(r).tolist() == [0.0, 0.0, 2.0, 255.0]


@pytest.mark.parametrize("memory_type", type_params())
def test_rint_clip_without_in_place_leaves_its_input(memory_type: str) -> None:
    adapter = load_adapter(memory_type)
    x = _array(memory_type, [NAN, -3.5, 2.5, 300.7], "float32")
    r = adapter.rint_clip(x, (0.0, 255.0))
    assert _host(r).tolist() == [0.0, 0.0, 2.0, 255.0]
    assert np.array_equal(_host(x), np.array([NAN, -3.5, 2.5, 300.7], "float32"), equal_nan=True)


@pytest.mark.requires("torch")
def test_torch_never_rounds_a_tensor_autograd_records_in_place() -> None:
    import torch

    x = torch.tensor([0.4, 2.5, 300.0], requires_grad=True) * 1.0  # not a leaf, recorded
    r = load_adapter("torch").rint_clip(x, (0.0, 255.0), in_place=True)
    assert r.tolist() == [0.0, 2.0, 255.0] and x.tolist() == pytest.approx([0.4, 2.5, 300.0])


def test_numpy_scalar_results_round_without_in_place() -> None:
    # a 0-d array times a float is a NumPy scalar: the unit cast must not write into it
    assert cast(np.array(0.5), "uint8", scaling="unit") == 128
    assert cast(np.array(NAN), "uint8") == 0


def test_a_unit_cast_back_allocates_one_temporary_not_two() -> None:
    # float64 [0, 1] -> uint16 on the decision's bounds: scaled (a temporary), rounded in it,
    # cast; the rounding made a second float64 array before
    x = np.linspace(0.0, 1.0, 1 << 18)
    ops = Ops(load_adapter("numpy"))
    tracemalloc.start()
    try:
        out = ops.cast(x, x.dtype, np.dtype("uint16"), "unit", (0.0, 1.0))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.tolist() == np.rint(x * 65535.0).astype(np.uint16).tolist()
    assert peak < x.nbytes * 1.5, f"peak {peak} bytes for a {x.nbytes}-byte input"


_CACHED_UNIT = np.linspace(0.0, 1.0, 4 * 8 * 8).reshape(4, 8, 8)
_CACHED_SCALE = np.full((2, 4, 4), 300.5, dtype=np.float32)


@mt.numpy
def _returns_cached_unit(image: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return _CACHED_UNIT


@mt.numpy
def _returns_cached_scale(image: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return _CACHED_SCALE


@pytest.mark.parametrize("func,cached,dtype", [
    pytest.param(_returns_cached_unit, _CACHED_UNIT, "uint16", id="unit-float64-uint16"),
    pytest.param(_returns_cached_scale, _CACHED_SCALE, "uint16", id="clip-float32-uint16"),
])
def test_a_decorated_function_s_cached_result_is_never_written(
        func: Any, cached: np.ndarray[Any, Any], dtype: str) -> None:
    before = cached.copy()
    first = func(np.zeros((2, 4, 4), dtype=dtype))
    second = func(np.zeros((2, 4, 4), dtype=dtype))
    assert first.dtype == np.dtype(dtype) and np.array_equal(first, second)
    assert cached.tobytes() == before.tobytes()


@pytest.mark.requires("torch")
def test_a_torch_function_s_cached_result_is_never_written() -> None:
    import torch

    cached = torch.linspace(0.0, 1.0, 64, dtype=torch.float64).reshape(1, 8, 8)
    before = cached.clone()
    func = mt.torch(lambda image: cached)
    out = func(torch.zeros((1, 8, 8), dtype=torch.uint16))
    assert out.dtype == torch.uint16 and torch.equal(cached, before)
    assert out.to(torch.int32).tolist() == torch.round(before * 65535).to(torch.int32).tolist()


LARGE = 3 * (1 << 16) + 7  # more than two blocks of a host cast, and a partial last block


def _large(case: str, dst: str, src: str) -> np.ndarray[Any, Any]:
    values = np.array(_values(case, dst), dtype=np.float64)
    if case == "unit-bounded":  # the unit range filled in, ties kept
        values = np.concatenate([values, np.linspace(0.0, 1.0, 1001)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.resize(values, LARGE).astype(src).reshape(-1, 1)


@pytest.mark.parametrize("src", ["float32", "float64"])
@pytest.mark.parametrize("dst", INTS)
@pytest.mark.parametrize("case,scaling,bounded", [c for c in CASES if c[1] != "rescale"],
                         ids=[c[0] for c in CASES if c[1] != "rescale"])
def test_a_large_host_cast_in_blocks_equals_the_cast_of_the_whole(
        src: str, dst: str, case: str, scaling: str, bounded: bool) -> None:
    x = _large(case, dst, src)
    before = x.copy()
    bounds = (float(x.min()), float(x.max())) if bounded else None
    whole = np.concatenate([x, x], axis=1)[:, :1]  # not C-contiguous: cast in one piece
    assert not whole.flags.c_contiguous
    ops = Ops(load_adapter("numpy"))
    s, d = np.dtype(src), np.dtype(dst)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = ops.cast(whole, s, d, scaling, bounds)  # type: ignore[arg-type]
        got = ops.cast(x, s, d, scaling, bounds)  # type: ignore[arg-type]
    assert got.shape == x.shape and got.dtype == d and got.flags.c_contiguous
    assert got.tobytes() == np.ascontiguousarray(expected).tobytes()
    assert x.tobytes() == before.tobytes()
