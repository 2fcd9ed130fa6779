"""Property: any chain of conversions preserves shape, dtype and values (documented rules aside)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import memtype as mt
from tests.expectations import expected_dtype
from tests.frameworks import available_types
from tests.helpers import dtype_of, host, shape_of

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64, np.complex64]


@st.composite
def arrays(draw: st.DrawFn) -> np.ndarray:
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    elements = {"allow_nan": False} if np.dtype(dtype).kind == "f" else None
    base = draw(hnp.arrays(dtype, shape, elements=elements))
    view = draw(st.sampled_from(["plain", "reversed", "transposed", "strided", "big_endian"]))
    if view == "reversed" and base.ndim:
        return base[::-1]
    if view == "transposed":
        return base.T
    if view == "strided" and base.ndim:
        return np.repeat(base, 2, axis=0)[::2]
    if view == "big_endian" and base.dtype.itemsize > 1:
        return base.astype(base.dtype.newbyteorder(">"))
    return base


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=arrays(), chain=st.lists(st.sampled_from(available_types()), min_size=1, max_size=4))
def test_chain_preserves_values(a: np.ndarray, chain: list[str]) -> None:
    original = np.array(a, copy=True)
    current = a
    expected = original
    for target in chain:
        want = expected_dtype(expected, target)
        if isinstance(want, type):
            try:
                mt.convert(current, target)
            except want:
                return  # documented refusal (e.g. complex into pyclesperanto)
            raise AssertionError(f"{target} accepted {expected.dtype} {expected.shape}")
        current = mt.convert(current, target)
        expected = expected.astype(want)
        assert shape_of(current) == original.shape
        assert dtype_of(current) == want
        np.testing.assert_array_equal(host(current), expected)
    np.testing.assert_array_equal(a, original)
