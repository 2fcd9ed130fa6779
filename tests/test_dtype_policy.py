"""The dtype policy against a table of exact expected outputs, in every framework."""

from __future__ import annotations

import importlib
import math
import warnings
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.dtypes import DtypePolicyWarning, OutputDtype, cast, holds_dtype, output_dtype
from memtype.errors import DtypePolicyError
from memtype.frameworks import load_adapter
from tests.frameworks import available_types, builtin_names, held_params, type_params
from tests.helpers import dtype_of, host

NAN, INF = math.nan, math.inf
F32MAX, F16MAX = float(np.finfo(np.float32).max), 65504.0
I64MAX, I64MIN, U64MAX = 2**63 - 1, -(2**63), 2**64 - 1
U8_255 = np.float32(1) / np.float32(255)

# (id, source dtype, values, target dtype, scaling, expected values)
TABLE: list[tuple[str, str, list[Any], str, str, list[Any]]] = [
    # clip: round half to even, saturate, NaN -> 0, exact at the top of the range
    ("clip-f32-u8", "float32", [-3.0, -0.5, 0.5, 1.5, 2.5, 254.5, 255.5, 300.0, NAN, INF, -INF],
     "uint8", "clip", [0, 0, 0, 2, 2, 254, 255, 255, 0, 255, 0]),
    ("clip-f32-i8", "float32", [-3.0, -0.5, 0.5, 1.5, 2.5, 254.5, 255.5, 300.0, NAN, INF, -INF],
     "int8", "clip", [-3, 0, 0, 2, 2, 127, 127, 127, 0, 127, -128]),
    ("clip-f32-u16", "float32", [65534.5, 65535.0, 65535.5, 65536.0, 1e10, -0.5, NAN],
     "uint16", "clip", [65534, 65535, 65535, 65535, 65535, 0, 0]),
    ("clip-f32-i16", "float32", [-32768.5, -32769.0, 32767.0, 32767.5, 1e6, -0.5, 2.5],
     "int16", "clip", [-32768, -32768, 32767, 32767, 32767, 0, 2]),
    ("clip-f32-u32-top", "float32", [0.0, 2**31, 4294967040.0, 2**32, 1e20, INF, NAN],
     "uint32", "clip", [0, 2**31, 4294967040, 2**32 - 1, 2**32 - 1, 2**32 - 1, 0]),
    ("clip-f32-i32-top", "float32",
     [2147483520.0, 2**31, -(2**31), -2147483904.0, 3e9, -INF, NAN],
     "int32", "clip", [2147483520, 2**31 - 1, -(2**31), -(2**31), 2**31 - 1, -(2**31), 0]),
    ("clip-f64-i64-top", "float64", [2.0**63, -(2.0**63), 2.0**62, 1e300, NAN],
     "int64", "clip", [I64MAX, I64MIN, 2**62, I64MAX, 0]),
    ("clip-f64-u64-top", "float64", [2.0**64, 2.0**63, -1.0, 1.5, NAN],
     "uint64", "clip", [U64MAX, 2**63, 0, 2, 0]),
    ("clip-f64-f32", "float64", [1e300, -1e300, 1.5, NAN, INF],
     "float32", "clip", [F32MAX, -F32MAX, 1.5, NAN, INF]),
    ("clip-f32-f16", "float32", [70000.0, -70000.0, 1.0, INF], "float16", "clip",
     [F16MAX, -F16MAX, 1.0, INF]),
    ("clip-i16-u8", "int16", [-32768, -1, 0, 255, 256, 32767], "uint8", "clip",
     [0, 0, 0, 255, 255, 255]),
    ("clip-i32-i8", "int32", [-(2**31), -129, -128, 127, 128, 2**31 - 1], "int8", "clip",
     [-128, -128, -128, 127, 127, 127]),
    ("clip-u16-i8", "uint16", [0, 127, 128, 65535], "int8", "clip", [0, 127, 127, 127]),
    ("clip-u32-i32", "uint32", [0, 2**31 - 1, 2**31, 2**32 - 1], "int32", "clip",
     [0, 2**31 - 1, 2**31 - 1, 2**31 - 1]),
    ("clip-i64-u32", "int64", [-1, 0, 2**32 - 1, 2**40], "uint32", "clip",
     [0, 0, 2**32 - 1, 2**32 - 1]),
    ("clip-u64-i64", "uint64", [0, I64MAX, 2**63, U64MAX], "int64", "clip",
     [0, I64MAX, I64MAX, I64MAX]),
    ("clip-u8-i16-fits", "uint8", [0, 255], "int16", "clip", [0, 255]),
    ("clip-i8-u64", "int8", [-128, -1, 0, 127], "uint64", "clip", [0, 0, 0, 127]),
    ("clip-f32-bool", "float32", [0.4, 0.5, 0.6, 1.5, -1.0, NAN], "bool", "clip",
     [False, False, True, True, False, False]),
    ("clip-i32-f16", "int32", [70000, -70000, 5], "float16", "clip", [F16MAX, -F16MAX, 5.0]),
    # rescale: finite min..max onto the full range; constant stays constant; NaN -> bottom
    ("rescale-f32-u8", "float32", [0.0, 0.25, 0.5, 1.0, NAN, 2.0, -1.0], "uint8", "rescale",
     [85, 106, 128, 170, 0, 255, 0]),
    ("rescale-f32-i16", "float32", [0.0, 0.25, 0.5, 1.0, NAN, 2.0, -1.0], "int16", "rescale",
     [-10923, -5462, 0, 10922, -32768, 32767, -32768]),
    ("rescale-constant", "float32", [7.0, 7.0, NAN], "uint8", "rescale", [7, 7, 0]),
    ("rescale-constant-out-of-range", "float32", [300.0, 300.0], "uint8", "rescale",
     [255, 255]),
    ("rescale-infinities", "float32", [0.0, 1.0, INF, -INF], "uint8", "rescale",
     [0, 255, 255, 0]),
    ("rescale-i16-u8", "int16", [-100, 0, 100], "uint8", "rescale", [0, 128, 255]),
    ("rescale-f64-f32", "float64", [10.0, 20.0, 30.0, NAN], "float32", "rescale",
     [0.0, 0.5, 1.0, 0.0]),
    ("rescale-u16-f32", "uint16", [100, 200, 300], "float32", "rescale", [0.0, 0.5, 1.0]),
    ("rescale-f32-u32-top", "float32", [0.0, 1.0], "uint32", "rescale", [0, 2**32 - 1]),
    ("rescale-f32-i32", "float32", [-1.0, 0.0, 1.0], "int32", "rescale",
     [-(2**31), 0, 2**31 - 1]),
    # unit: the scikit-image convention, rounded half to even, saturated
    ("unit-f32-u8", "float32", [0.0, 0.25, 0.5, 1.0, 1.5, -0.5, NAN], "uint8", "unit",
     [0, 64, 128, 255, 255, 0, 0]),
    ("unit-f32-u16", "float32", [0.0, 0.5, 1.0], "uint16", "unit", [0, 32768, 65535]),
    ("unit-f32-i16", "float32", [-1.0, -0.5, 0.0, 0.5, 1.0], "int16", "unit",
     [-32768, -16384, 0, 16383, 32767]),
    ("unit-f32-u32-top", "float32", [0.0, 1.0], "uint32", "unit", [0, 2**32 - 1]),
    ("unit-u8-f32", "uint8", [0, 51, 255], "float32", "unit",
     [0.0, float(np.float32(51) * U8_255), 1.0]),
    ("unit-i16-f32", "int16", [-32768, 0, 32767], "float32", "unit",
     [-1.0, float(np.float32(0.5) * np.float32(2 / 65535)), 1.0]),
    ("unit-u8-u16", "uint8", [0, 1, 128, 255], "uint16", "unit", [0, 257, 32896, 65535]),
    ("unit-u16-u8", "uint16", [0, 257, 128, 65535], "uint8", "unit", [0, 1, 0, 255]),
    ("unit-bool-u8", "bool", [False, True], "uint8", "unit", [0, 255]),
    ("unit-f32-bool", "float32", [0.2, 0.6], "bool", "unit", [False, True]),
]


def _holds(memory_type: str, *dtypes: str) -> bool:
    adapter = load_adapter(memory_type)
    return all(holds_dtype(adapter, np.dtype(d)) for d in dtypes)


NOT_CLE = type_params(n for n in builtin_names() if n != "pyclesperanto")
"""Every built-in type but pyclesperanto, which holds no empty arrays."""


def _expected(values: list[Any], dtype: str) -> np.ndarray:
    return np.array(values, dtype=np.dtype(dtype))


@pytest.mark.parametrize("memory_type,row", held_params(TABLE, (1, 3)))
def test_policy_table(memory_type: str, row: tuple[str, str, list[Any], str, str, list[Any]]
                      ) -> None:
    _, src, values, dst, scaling, expected = row
    x = mt.convert(np.array([values], dtype=src), memory_type)
    out = cast(x, dst, scaling=scaling)  # type: ignore[arg-type]
    assert mt.detect_memory_type(out) is mt.MemoryType(memory_type)
    assert dtype_of(out) == np.dtype(dst)
    np.testing.assert_array_equal(host(out)[0], _expected(expected, dst))


@pytest.mark.parametrize("scaling", ["clip", "rescale", "unit"])
@pytest.mark.parametrize("dst", ["uint8", "int8", "uint16", "int16", "float32"])
@pytest.mark.parametrize("src", ["float32", "uint8", "uint16", "int16"])
def test_same_numbers_in_every_framework(memory_type: str, src: str, dst: str,
                                         scaling: str) -> None:
    rng = np.random.default_rng(7)
    if src.startswith("float"):
        values = (rng.standard_normal((16, 16)) * 3).astype(src)
        values[0, :4] = [np.nan, np.inf, -np.inf, 0.5]
    else:
        info = np.iinfo(src)
        values = rng.integers(info.min, info.max, (16, 16), endpoint=True).astype(src)
    reference = cast(values, dst, scaling=scaling)  # type: ignore[arg-type]
    out = cast(mt.convert(values, memory_type), dst, scaling=scaling)  # type: ignore[arg-type]
    np.testing.assert_array_equal(host(out), reference)


@pytest.mark.requires("skimage")
def test_matches_scikit_image_unit_convention() -> None:
    skimage = importlib.import_module("skimage")
    values = np.linspace(-1, 1, 2001, dtype=np.float32)
    np.testing.assert_array_equal(cast(values, "int16", scaling="unit"),
                                  skimage.img_as_int(values))
    unit = np.linspace(0, 1, 1001, dtype=np.float32)
    np.testing.assert_array_equal(cast(unit, "uint8", scaling="unit"), skimage.img_as_ubyte(unit))
    np.testing.assert_array_equal(cast(unit, "uint16", scaling="unit"), skimage.img_as_uint(unit))
    ints = np.arange(256, dtype=np.uint8)
    np.testing.assert_array_equal(cast(ints, "float32", scaling="unit"),
                                  skimage.img_as_float32(ints))


def test_same_dtype_returns_input_itself(memory_type: str) -> None:
    x = mt.convert(np.ones((2, 2), np.float32), memory_type)
    assert cast(x, "float32") is x


def test_complex_to_real_refused() -> None:
    with pytest.raises(DtypePolicyError, match="imaginary part"):
        cast(np.array([1 + 2j]), "float32")


def test_complex_target_keeps_values() -> None:
    out = cast(np.array([1.5, -2.0], np.float32), "complex64")
    np.testing.assert_array_equal(out, np.array([1.5, -2.0], np.complex64))


def test_unknown_scaling_refused() -> None:
    with pytest.raises(DtypePolicyError, match="Unknown scaling 'stretch'. Expected one of"):
        cast(np.zeros(2), "uint8", scaling="stretch")  # type: ignore[arg-type]


@pytest.mark.parametrize("memory_type", [t for t in available_types()
                                         if not _holds(t, "float64")])
def test_dtype_a_framework_cannot_hold_is_refused(memory_type: str) -> None:
    x = mt.convert(np.ones((2, 2), np.float32), memory_type)
    with pytest.raises(DtypePolicyError, match="cannot hold dtype float64"):
        cast(x, "float64")


@pytest.mark.parametrize("memory_type", NOT_CLE)
def test_empty_arrays_cast(memory_type: str) -> None:
    x = mt.convert(np.zeros((0, 3), np.float32), memory_type)
    for scaling in ("clip", "rescale", "unit"):
        out = cast(x, "uint8", scaling=scaling)  # type: ignore[arg-type]
        assert host(out).shape == (0, 3) and dtype_of(out) == np.uint8


# -- the PRESERVE_INPUT decision (output_dtype) ---------------------------------------------

PRESERVE = mt.DtypeConversion.PRESERVE_INPUT

# (id, result dtype, result values, input dtype, expected dtype (None: kept native), scaling)
DECISIONS: list[tuple[str, str, list[Any], str, str | None, str]] = [
    ("unit-f64-u8", "float64", [0.0, 0.4, 1.0], "uint8", "uint8", "unit"),
    ("unit-f32-u16", "float32", [0.1, 0.9], "uint16", "uint16", "unit"),
    ("unit-signed-f32-i16", "float32", [-1.0, 0.5], "int16", "int16", "unit"),
    ("rounded-f32-u8", "float32", [0.5, 2.0, 254.4], "uint8", "uint8", "clip"),
    ("out-of-range-f32-u8", "float32", [0.0, 379.5], "uint8", None, "clip"),
    ("negative-f32-u8", "float32", [-0.2, 0.5], "uint8", None, "clip"),
    ("below-two-f32-u8", "float32", [0.0, 1.275], "uint8", None, "clip"),
    ("nan-f32-u8", "float32", [0.5, NAN], "uint8", None, "clip"),
    ("labels-fit-i32-u8", "int32", [0, 7, 255], "uint8", "uint8", "clip"),
    ("labels-overflow-i32-u8", "int32", [0, 256], "uint8", None, "clip"),
    ("labels-negative-i32-u16", "int32", [-1, 3], "uint16", None, "clip"),
    ("wide-unsigned-fits-u32-u8", "uint32", [0, 255], "uint8", "uint8", "clip"),
    ("wide-unsigned-over-u32-u8", "uint32", [0, 256], "uint8", None, "clip"),
    ("narrow-int-i16-i32", "int16", [-5, 5], "int32", "int32", "clip"),
    ("labels-i32-bool", "int32", [0, 1], "bool", None, "clip"),
    ("float-f32-bool", "float32", [0.0, 0.2], "bool", None, "clip"),
    ("mask-bool-u8", "bool", [True, False], "uint8", "uint8", "clip"),
    ("labels-i32-f32", "int32", [0, 9], "float32", "float32", "clip"),
    ("wider-float-f64-f32", "float64", [1e300, 0.5], "float32", "float32", "clip"),
    ("narrow-float-fits-f32-f16", "float32", [1.0, INF, NAN], "float16", "float16", "clip"),
    ("narrow-float-over-f32-f16", "float32", [7e4, 1.0], "float16", None, "clip"),
]


@pytest.mark.parametrize("memory_type,row", held_params(DECISIONS, (1, 3)))
def test_preserve_input_decision(memory_type: str,
                                 row: tuple[str, str, list[Any], str, str | None, str]) -> None:
    _, src, values, din, expected, scaling = row
    x = mt.convert(np.array(values, dtype=src), memory_type)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = output_dtype(x, PRESERVE, np.dtype(din), name="f")
    ours = [w for w in caught if issubclass(w.category, DtypePolicyWarning)]
    assert got == OutputDtype(None if expected is None else np.dtype(expected), scaling)
    assert len(ours) == (expected is None)
    if ours:
        assert "f returned" in str(ours[0].message) and "NATIVE_OUTPUT" in str(ours[0].message)
        assert ours[0].filename == __file__  # points at the caller, not at memtype


@pytest.mark.parametrize(("conversion", "scaling", "expected"), [
    (mt.DtypeConversion.NATIVE_OUTPUT, "clip", OutputDtype(None, "clip")),
    (mt.DtypeConversion.UINT8, "clip", OutputDtype(np.dtype("uint8"), "clip")),
    (PRESERVE, "rescale", OutputDtype(np.dtype("uint8"), "rescale")),
    (PRESERVE, "unit", OutputDtype(np.dtype("uint8"), "unit")),
], ids=["native", "explicit-dtype", "explicit-rescale", "explicit-unit"])
def test_explicit_options_are_done_as_asked(conversion: mt.DtypeConversion, scaling: str,
                                           expected: OutputDtype) -> None:
    result = np.array([-3.0, 379.5], np.float32)  # out of range: the default would warn
    with warnings.catch_warnings():
        warnings.simplefilter("error", DtypePolicyWarning)
        assert output_dtype(result, conversion, np.dtype("uint8"), scaling) == expected  # type: ignore[arg-type]


def test_no_array_input_leaves_the_result() -> None:
    assert output_dtype(np.ones(2), PRESERVE, None) == OutputDtype(None, "clip")


def test_same_dtype_needs_no_look_at_the_values() -> None:
    assert output_dtype(np.array([NAN]), PRESERVE, np.dtype("float64")) == OutputDtype(
        np.dtype("float64"), "clip")


def test_complex_result_is_left_to_the_cast_which_refuses_it() -> None:
    got = output_dtype(np.array([1j]), PRESERVE, np.dtype("float32"))
    assert got == OutputDtype(np.dtype("float32"), "clip")
    with pytest.raises(DtypePolicyError, match="NATIVE_OUTPUT"):
        cast(np.array([1j]), got.dtype)  # type: ignore[arg-type]


@pytest.mark.parametrize("memory_type", NOT_CLE)
def test_empty_result_is_held(memory_type: str) -> None:
    x = mt.convert(np.zeros((0, 3), np.float32), memory_type)
    assert output_dtype(x, PRESERVE, np.dtype("uint8")) == OutputDtype(np.dtype("uint8"), "unit")


@pytest.mark.parametrize("values", [[0.0, 0.25, 0.5, 1.0], [0.003, 0.997]], ids=["ends", "inner"])
@pytest.mark.requires("skimage")
def test_unit_decision_inverts_img_as_float(values: list[float]) -> None:
    skimage = importlib.import_module("skimage")
    u8 = skimage.img_as_ubyte(np.array(values))
    as_float = skimage.img_as_float(u8)
    got = output_dtype(as_float, PRESERVE, np.dtype("uint8"))
    assert got.scaling == "unit"
    np.testing.assert_array_equal(cast(as_float, "uint8", scaling=got.scaling), u8)
