"""scikit-image as the reference client: 45 functions wrapped with ``mt.numpy``, called on
uint8, uint16, bool and float32 images given as NumPy, torch and JAX arrays, against the
direct scikit-image call under the documented default dtype policy."""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest

_ABSENT = [m for m in ("skimage", "torch") if importlib.util.find_spec(m) is None]
if _ABSENT:  # the reference table (benchmarks/skimage_table.py) imports both at module level
    pytest.skip(f"needs {', '.join(_ABSENT)}, not installed (an optional extra)",
                allow_module_level=True)

import memtype as mt  # noqa: E402
from benchmarks.skimage_table import (  # noqa: E402
    CASES,
    DOC,
    DTYPES,
    FRAMEWORKS,
    TABLE_END,
    TABLE_START,
    as_framework,
    direct,
    documented,
    image,
    names_copy_inputs,
    needs_writable,
    table,
    wrapped,
)
from memtype.dtypes import DtypePolicyWarning  # noqa: E402
from memtype.frameworks import load_adapter  # noqa: E402
from tests.frameworks import type_params

pytestmark = pytest.mark.requires("skimage", "torch")

NAMES = [case.name for case in CASES]


@pytest.mark.parametrize("framework", type_params(FRAMEWORKS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_default_policy_against_scikit_image(name: str, dtype: str, framework: str) -> None:
    ref = direct(name, dtype)
    got = wrapped(name, dtype, framework)
    if isinstance(ref, BaseException):  # scikit-image refuses this dtype: so does the wrapper
        assert type(got.error) is type(ref), got.error
        return
    if needs_writable(got.error):  # the function writes its input: only immutable input
        assert load_adapter(framework).immutable, got.error  # is handed read-only,
        assert names_copy_inputs(got.error), got.error  # and the error names the way out
        got = wrapped(name, dtype, framework, copy_inputs=True)
    assert got.error is None, got.error
    expected, rule = documented(ref, dtype)
    assert got.value.dtype == expected.dtype
    np.testing.assert_array_equal(got.value, expected)
    assert bool(got.policy_warnings) == (rule == "native"), got.policy_warnings
    assert all("NATIVE_OUTPUT" in text for text in got.policy_warnings)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_native_output_is_scikit_image_itself(name: str, dtype: str) -> None:
    ref = direct(name, dtype)
    got = wrapped(name, dtype, "numpy", dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)
    if isinstance(ref, BaseException):  # scikit-image refuses this dtype: so does the wrapper
        assert isinstance(got.error, type(ref)), (got.error, ref)
        return
    assert got.error is None and not got.policy_warnings
    assert got.value.dtype == ref.dtype
    np.testing.assert_array_equal(got.value, ref)


def test_gaussian_of_uint8_is_scaled_back_not_rounded() -> None:
    """Issue 13: gaussian returns floats in [0, 1]; the default gave a uint8 of 0s and 1s."""
    from skimage import filters, util

    u8 = image("uint8")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DtypePolicyWarning)
        out = mt.numpy(contract=2)(filters.gaussian)(u8.copy())
    assert out.dtype == np.uint8 and len(np.unique(out)) > 100
    np.testing.assert_array_equal(out, util.img_as_ubyte(filters.gaussian(u8.copy())))


def test_label_of_a_mask_keeps_its_labels_and_warns() -> None:
    """Issue 13: label on a bool mask returned bool, every label collapsed to True."""
    from skimage import measure

    mask = image("bool")
    with pytest.warns(DtypePolicyWarning, match="NATIVE_OUTPUT") as caught:
        out = mt.numpy(contract=2)(measure.label)(as_framework(mask, "numpy"))
    assert "label returned int32" in str(caught[0].message)
    np.testing.assert_array_equal(out, measure.label(mask.copy()))
    assert out.max() > 1


def test_published_table_is_current() -> None:
    """docs/scikit-image.md holds the table this scikit-image and memtype produce."""
    text = DOC.read_text()
    published = text[text.index(TABLE_START) + len(TABLE_START):text.index(TABLE_END)].strip()
    assert published == table(), "regenerate: python benchmarks/skimage_table.py"
