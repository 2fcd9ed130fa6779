"""measure_intensity's torch implementation: the NumPy implementation's table, computed in
torch (on the CPU here, on CUDA where there is one), and the plan's choice between them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.pipeline import FunctionStep, Pipeline
from memtype.pipeline.analysis.intensity import measure_intensity
from memtype.pipeline.analysis.operations import analysis_variants
from memtype.pipeline.synthetic import SyntheticPlate, write_synthetic_plate

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.requires("torch", "scipy", "skimage")

from memtype.pipeline.analysis.intensity_torch import measure_intensity_torch  # noqa: E402

ORDER_STATISTICS = ("MinIntensity", "MaxIntensity", "LowerQuartileIntensity",
                    "MedianIntensity", "UpperQuartileIntensity", "MADIntensity",
                    "MinIntensityEdge", "MaxIntensityEdge")


def _field(dtype: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Objects with gaps in their numbers (3 and 7 absent), touching each other and the
    edge, and a channel of ``dtype`` with ties."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.repeat(rng.integers(0, 12, (8, 8)), 5, axis=0), 5, axis=1)
    labels[(labels == 3) | (labels == 7)] = 0
    values = rng.integers(0, 200, labels.shape)
    image = (values - 100) / 7 if dtype in ("float32", "float64") else values
    return labels.astype(np.int32), image.astype(dtype)


def _in_torch(labels: np.ndarray, image: np.ndarray, device: str = "cpu") -> dict[str, Any]:
    """The torch code's table (on ``device``)."""
    return measure_intensity_torch(torch.from_numpy(labels).to(device),
                                   torch.from_numpy(image).to(device), image_name="C",
                                   cpu_in_torch=True)


def _assert_same_table(got: dict[str, Any], expected: dict[str, Any]) -> None:
    """Equal columns: order statistics and locations exactly, sums to float64 rounding."""
    assert list(got) == list(expected)
    for key, values in expected.items():
        exact = any(key == f"Intensity_{name}_C" for name in ORDER_STATISTICS) \
            or key.startswith("Location_MaxIntensity")
        np.testing.assert_allclose(got[key], values, rtol=0 if exact else 1e-12,
                                   atol=0 if exact else 1e-12, err_msg=key)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16", "int32", "float32", "float64"])
def test_torch_table_equals_numpys(dtype: str) -> None:
    labels, image = _field(dtype)
    _assert_same_table(_in_torch(labels, image), measure_intensity(labels, image,
                                                                   image_name="C"))


@pytest.mark.parametrize("case", ["empty", "one object", "one pixel", "numbers 5 and 9 only",
                                  "nan pixels"])
def test_torch_table_equals_numpys_on_awkward_fields(case: str) -> None:
    labels, image = _field("float64", seed=1)
    if case == "empty":
        labels[:] = 0
    elif case == "one object":
        labels[:] = 1
    elif case == "one pixel":
        labels[:] = 0
        labels[4, 6] = 1
    elif case == "numbers 5 and 9 only":
        labels[(labels != 5) & (labels != 9)] = 0
    else:
        image[::3, ::4] = np.nan
    _assert_same_table(_in_torch(labels, image), measure_intensity(labels, image,
                                                                   image_name="C"))


def test_a_cpu_tensor_is_measured_by_the_numpy_code_zero_copy() -> None:
    labels, image = _field("uint16")
    got = measure_intensity_torch(torch.from_numpy(labels), torch.from_numpy(image),
                                  image_name="C")
    expected = measure_intensity(labels, image, image_name="C")
    for key, values in expected.items():
        np.testing.assert_array_equal(got[key], values, err_msg=key)


def test_torch_refuses_what_numpy_refuses() -> None:
    from memtype.errors import ArgumentTypeError, ShapeError

    with pytest.raises(ShapeError, match=r"\(4, 4\) and \(4, 5\)"):
        measure_intensity_torch(torch.zeros(4, 4, dtype=torch.int32), torch.zeros(4, 5),
                                image_name="C")
    with pytest.raises(ArgumentTypeError, match="integer label image"):
        measure_intensity_torch(torch.zeros(4, 4), torch.zeros(4, 4), image_name="C")


def test_the_variant_offers_numpy_first_then_torch() -> None:
    assert list(analysis_variants("measure_intensity")) == ["numpy", "torch"]


def test_the_variant_takes_tensors_and_gives_a_host_table() -> None:
    labels, image = _field("float32")
    got = analysis_variants("measure_intensity")["torch"](
        torch.from_numpy(labels), image=torch.from_numpy(image), image_name="C")
    assert all(isinstance(values, np.ndarray) for values in got.values())


def test_the_plan_measures_numpy_data_in_numpy(tmp_path: Path) -> None:
    write_synthetic_plate(tmp_path / "plate", SyntheticPlate(
        wells=1, sites=1, channels=2, z_planes=1, size=32, cells=(2, 3)))
    steps = ["max_projection",
             FunctionStep("identify_primary", inputs={"image": "channel:1"}, labels="nuclei"),
             FunctionStep("measure_intensity", inputs={"labels": "nuclei",
                                                       "image": "channel:2"})]
    plan = Pipeline(steps).plan(tmp_path / "plate")
    assert plan.choices["measure_intensity"] == "numpy"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["uint16", "float32"])
def test_cuda_table_equals_numpys(dtype: str) -> None:
    labels, image = _field(dtype)
    _assert_same_table(_in_torch(labels, image, "cuda"),
                       measure_intensity(labels, image, image_name="C"))
