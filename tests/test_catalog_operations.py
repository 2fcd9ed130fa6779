"""Operations (issue 25, section 2): every implementation agrees with the reference within
its stated tolerance, per dtype, on scikit-image's bundled coins and camera images."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.pipeline import Pipeline, catalog
from memtype.pipeline.catalog.operations import OPERATIONS, TOLERANCES, Tolerance, variants_of

pytestmark = pytest.mark.requires("skimage", "scipy")

DTYPES = ("uint8", "float32")
MARKS = {"pyclesperanto": [pytest.mark.opencl], "torch": [pytest.mark.requires("torch")]}
PAIRS = [pytest.param(name, mt_name, dtype, id=f"{name}-{mt_name}-{dtype}",
                      marks=MARKS.get(mt_name, []))
         for name, op in sorted(OPERATIONS.items()) for mt_name in op.implementations
         if mt_name != "numpy" for dtype in DTYPES]


def _stack(dtype: str, mask: bool) -> np.ndarray[Any, Any]:
    """coins and (every 4th pixel of) camera, 96x96, as a [2, Y, X] stack."""
    from skimage import data

    stack = np.stack([data.coins()[:96, :96], data.camera()[::4, ::4][:96, :96]])
    if mask:  # a labelling runs on a mask: the pixels above each plane's Otsu threshold
        from skimage.filters import threshold_otsu

        return np.stack([p > threshold_otsu(p) for p in stack]).astype(dtype)
    return stack if dtype == "uint8" else (stack / 255).astype(np.float32)


def _on(memory_type: str, func: Any, stack: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``func`` run on ``stack`` converted to ``memory_type``, back on the host."""
    return np.asarray(mt.convert(func(mt.convert(stack, memory_type)), "numpy"))


def _same_labels(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> bool:
    """Equal up to renumbering: the same pixels are background and the pairs map 1:1."""
    if a.shape != b.shape or not np.array_equal(a > 0, b > 0):
        return False
    pairs = set(zip(a[a > 0].tolist(), b[b > 0].tolist(), strict=True))
    return len(pairs) == len({p for p, _ in pairs}) == len({q for _, q in pairs})


@pytest.mark.parametrize(("name", "memory_type", "dtype"), PAIRS)
@pytest.mark.filterwarnings("ignore::memtype.dtypes.DtypePolicyWarning")
def test_implementations_agree_within_tolerance(name: str, memory_type: str, dtype: str) -> None:
    op = OPERATIONS[name]
    options = variants_of(name)
    stack = _stack(dtype, mask=op.output == "labels")
    reference = _on("numpy", options["numpy"], stack)
    result = _on(memory_type, options[memory_type], stack)
    if op.output == "labels":
        assert _same_labels(reference, result)
        return
    assert result.shape == reference.shape
    tol = TOLERANCES.get(name, {}).get(dtype, Tolerance())
    diff = np.abs(reference.astype(np.float64) - result.astype(np.float64))
    assert float(diff.max()) <= tol.atol
    assert float((diff > 0).mean()) <= tol.fraction


def test_an_operation_is_a_variant_step() -> None:
    step = catalog.operation("gaussian", sigma=2)
    assert step.variants is not None
    assert list(step.variants)[0] == "numpy"
    assert step.name == "gaussian"


def test_unknown_operation_and_parameter() -> None:
    with pytest.raises(ValueError, match="no operation 'gausian'"):
        catalog.operation("gausian")
    with pytest.raises(ValueError, match="takes no parameter 'size'.*expected some of"):
        catalog.operation("gaussian", size=3)


@pytest.mark.opencl
@pytest.mark.requires("pyclesperanto", "tifffile")
def test_the_plan_runs_an_operation_where_the_data_is(tmp_path: Any) -> None:
    """Between two pyclesperanto steps, the planner picks the pyclesperanto Gaussian."""
    from tests.pipeline_support import write_plate

    plate = write_plate(tmp_path / "plate")
    steps = [catalog.step("pyclesperanto.top_hat", radius_x=2, radius_y=2, radius_z=0),
             catalog.operation("gaussian", sigma=1),
             catalog.step("pyclesperanto.top_hat", name="top_hat_2", radius_x=2, radius_y=2,
                          radius_z=0)]
    assert Pipeline(steps).plan(plate).choices == {"gaussian": "pyclesperanto"}
