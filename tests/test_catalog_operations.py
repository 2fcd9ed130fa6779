"""Operations (issue 25, section 2): every implementation agrees with the reference within
its stated tolerance, per dtype, on scikit-image's bundled coins and camera images (images,
their Otsu masks, and those masks' labels)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.pipeline import FunctionStep, Pipeline, catalog
from memtype.pipeline.catalog.operations import (
    OPERATIONS,
    TOLERANCES,
    Operation,
    Tolerance,
    variants_of,
)

pytestmark = pytest.mark.requires("skimage", "scipy")

DTYPES = ("uint8", "float32")
MARKS = {"pyclesperanto": [pytest.mark.opencl], "torch": [pytest.mark.requires("torch")],
         "jax": [pytest.mark.requires("jax")],
         "cupy": [pytest.mark.requires("cupy", "cucim"), pytest.mark.gpu]}


def _dtypes(op: Operation) -> tuple[str, ...]:
    """The dtypes an operation is compared in: its images' (labels: int32 only)."""
    return ("int32",) if op.input == "labels" and op.output != "table" else DTYPES


PAIRS = [pytest.param(name, mt_name, dtype, id=f"{name}-{mt_name}-{dtype}",
                      marks=MARKS.get(mt_name, []))
         for name, op in sorted(OPERATIONS.items()) for mt_name in op.implementations
         if mt_name != "numpy" for dtype in _dtypes(op)]
# each operation computing one number per stack (not per slice) runs on the whole stack
PER_STACK = ("threshold_otsu", "threshold_li", "threshold_triangle", "remove_small_objects",
             "rescale_intensity", "label_statistics", "max_projection", "mean_projection",
             "sum_projection")


def _images(dtype: str) -> np.ndarray[Any, Any]:
    """coins and (every 4th pixel of) camera, 96x96, as a [2, Y, X] stack."""
    from skimage import data

    stack = np.stack([data.coins()[:96, :96], data.camera()[::4, ::4][:96, :96]])
    return stack if dtype == "uint8" else (stack / 255).astype(np.float32)


def _mask(dtype: str) -> np.ndarray[Any, Any]:
    """The pixels above each plane's Otsu threshold, as ``dtype`` (what a labelling gets)."""
    from skimage.filters import threshold_otsu

    return np.stack([p > threshold_otsu(p) for p in _images("uint8")]).astype(dtype)


def _labels() -> np.ndarray[Any, Any]:
    """The mask's connected components (int32; objects from 1 pixel to thousands)."""
    from skimage.measure import label

    return label(_mask("uint8")).astype(np.int32)


def _stack(op: Operation, dtype: str) -> np.ndarray[Any, Any]:
    """What the operation works on: images, a mask or labels."""
    return {"image": _images, "mask": _mask}.get(op.input, lambda _: _labels())(dtype)


def _on(memory_type: str, func: Any, stack: np.ndarray[Any, Any], **kwargs: Any) -> Any:
    """``func`` run on ``stack`` converted to ``memory_type``, back on the host (a table:
    its rows)."""
    result = func(mt.convert(stack, memory_type), **kwargs)
    if isinstance(result, tuple):
        return result[1]
    return np.asarray(mt.convert(result, "numpy"))


def _same_labels(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> bool:
    """Equal up to renumbering: the same pixels are background and the pairs map 1:1."""
    if a.shape != b.shape or not np.array_equal(a > 0, b > 0):
        return False
    pairs = set(zip(a[a > 0].tolist(), b[b > 0].tolist(), strict=True))
    return len(pairs) == len({p for p, _ in pairs}) == len({q for _, q in pairs})


def _same_rows(a: list[dict[str, Any]], b: list[dict[str, Any]], tol: Tolerance) -> None:
    """The same labels with the same columns, every number within ``tol.atol`` relative."""
    assert [r["label"] for r in a] == [r["label"] for r in b]
    assert all(set(p) == set(q) for p, q in zip(a, b, strict=True))
    for p, q in zip(a, b, strict=True):
        assert {k: pytest.approx(v, rel=tol.atol, abs=tol.atol) for k, v in p.items()} == q


@pytest.mark.parametrize(("name", "memory_type", "dtype"), PAIRS)
@pytest.mark.filterwarnings("ignore::memtype.dtypes.DtypePolicyWarning")
def test_implementations_agree_within_tolerance(name: str, memory_type: str, dtype: str) -> None:
    op = OPERATIONS[name]
    options = variants_of(name)
    stack = _stack(op, dtype)
    tol = TOLERANCES.get(name, {}).get(dtype, Tolerance())
    kwargs = {"intensity": _images(dtype)} if name == "label_statistics" else {}
    reference = _on("numpy", options["numpy"], stack, **kwargs)
    result = _on(memory_type, options[memory_type], stack, **kwargs)
    if op.output == "table":
        assert reference and {"label", "area", "mean_intensity"} <= set(reference[0])
        _same_rows(reference, result, tol)
        return
    if op.output == "labels":
        assert _same_labels(reference, result)
        return
    assert result.shape == reference.shape
    if not op.keeps_dtype:
        assert reference.dtype == result.dtype == np.float32
    diff = np.abs(reference.astype(np.float64) - result.astype(np.float64))
    assert float(diff.max()) <= tol.atol
    assert float((diff > 0).mean()) <= tol.fraction


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_each_operation_is_checked_on_labels_masks_or_images(name: str) -> None:
    """Every operation has an implementation besides the reference (else nothing above
    compares it), and one of the three inputs the comparison knows."""
    op = OPERATIONS[name]
    assert list(op.implementations)[0] == "numpy" and len(op.implementations) >= 2
    assert op.input in ("image", "mask", "labels")


@pytest.mark.parametrize("name", PER_STACK)
def test_a_per_stack_operation_never_runs_slice_by_slice(name: str) -> None:
    """Out-of-memory recovery goes slice by slice only for separable functions: a
    threshold, a count or a projection per stack is not (its slices would each get their
    own threshold)."""
    for func in variants_of(name).implementations.values():
        assert func._separable is False


@pytest.mark.parametrize("make", [
    lambda: catalog.operation("needs_size"),
    lambda: FunctionStep("needs_size"),
    lambda: Pipeline([("needs_size", {"radius": 2})]),
], ids=["operation", "named-step", "pipeline-pair"])
def test_a_missing_required_parameter_fails_at_construction(
        make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from memtype.pipeline.catalog.operations import REQUIRED, Implementation

    impl = Implementation("memtype.pipeline.catalog.implementations.host:box_maximum",
                          {"radius": "$radius"})
    monkeypatch.setitem(OPERATIONS, "needs_size", Operation(
        "needs_size", {"radius": 1, "size": REQUIRED}, {"numpy": impl}))
    with pytest.raises(ValueError, match=r"needs 'size'; expected operation\('needs_size', "
                                         r"size=\.\.\.\)"):
        make()


def test_sobel_is_scikit_images_times_four_root_two() -> None:
    """The operation's Sobel is scikit-image's unnormalised: ``skimage.filters.sobel`` of a
    float image (kernel / 4, magnitude / sqrt(2)) times 4 sqrt(2), up to float32 rounding."""
    from skimage.filters import sobel

    stack = _images("float32")
    ours = np.asarray(variants_of("sobel")["numpy"](stack))
    theirs = np.stack([sobel(p, mode="nearest") for p in stack]) * 4 * np.sqrt(2)
    assert np.allclose(ours, theirs, atol=1e-5)


def test_sobel_of_uint8_is_float32_in_the_input_units() -> None:
    """A uint8 magnitude reaches above 255: it stays float32, not clipped into uint8."""
    result = np.asarray(variants_of("sobel")["numpy"](_images("uint8")))
    assert result.dtype == np.float32 and result.max() > 255


THRESHOLDS = ("threshold_otsu", "threshold_li", "threshold_triangle")
FRAMEWORK_MARKS = {"torch": pytest.mark.requires("torch"), "jax": pytest.mark.requires("jax")}


def _framework_cases(names: tuple[str, ...], frameworks: tuple[str, ...] = ("torch", "jax"),
                     ) -> list[Any]:
    return [pytest.param(name, fw, id=f"{name}-{fw}", marks=FRAMEWORK_MARKS.get(fw, []))
            for name in names for fw in frameworks]


# uint16 results may differ by one (rounding back) or by float32 steps relative to the
# largest value (Sobel magnitudes reach ~370,000); everything else is equal
UINT16_ATOL = {"gaussian": 1.0, "mean_projection": 1.0}
UINT16_RTOL = {"sobel": 1e-7, "rescale_intensity": 1e-6}
UINT16_CASES = [pytest.param(name, fw, id=f"{name}-{fw}", marks=FRAMEWORK_MARKS[fw])
                for name, op in sorted(OPERATIONS.items()) for fw in FRAMEWORK_MARKS
                if fw in op.implementations and op.input != "mask" and op.output != "table"]


@pytest.mark.parametrize(("name", "memory_type"), UINT16_CASES)
@pytest.mark.filterwarnings("ignore::memtype.dtypes.DtypePolicyWarning")
def test_jax_and_torch_implementations_take_uint16(name: str, memory_type: str) -> None:
    """uint16 stacks (torch 2.13 has no uint16 min, max or comparison kernels; JAX without
    x64 has no integer wider than int32) give the reference's result: thresholds, medians,
    box filters, maxima and labels equal, the rest within ``UINT16_ATOL`` or ``UINT16_RTOL``
    of the largest value."""
    op = OPERATIONS[name]
    stack = _labels() if op.input == "labels" else _images("uint8").astype(np.uint16) * 257 + 3
    options = variants_of(name)
    reference = _on("numpy", options["numpy"], stack).astype(np.float64)
    result = _on(memory_type, options[memory_type], stack.astype(np.uint16)).astype(np.float64)
    assert result.shape == reference.shape
    limit = max(UINT16_ATOL.get(name, 0.0), UINT16_RTOL.get(name, 0.0) * float(reference.max()))
    assert float(np.abs(reference - result).max()) <= limit


@pytest.mark.parametrize(("name", "memory_type"), _framework_cases(THRESHOLDS))
def test_thresholds_equal_scikit_images_on_a_noisy_float_stack(name: str,
                                                               memory_type: str) -> None:
    """Values off the 1/255 lattice: the float histogram's edges and Li's iteration over the
    pixels (not the histogram) still give scikit-image's threshold, so the same mask."""
    rng = np.random.default_rng(0)
    stack = (_images("float32") + rng.normal(0, 0.01, (2, 96, 96))).astype(np.float32)
    options = variants_of(name)
    reference = _on("numpy", options["numpy"], stack)
    assert 0 < reference.mean() < 1
    assert np.array_equal(_on(memory_type, options[memory_type], stack), reference)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "float32"])
@pytest.mark.parametrize(("name", "memory_type"),
                         _framework_cases(THRESHOLDS, ("numpy", "torch", "jax")))
def test_a_constant_stack_has_no_pixel_above_its_threshold(name: str, memory_type: str,
                                                           dtype: str) -> None:
    """scikit-image's threshold of one value is that value: no pixel is above it."""
    stack = np.full((2, 96, 96), 7, dtype)  # the shape of the other cases: compiled once
    mask = _on(memory_type, variants_of(name)[memory_type], stack)
    assert mask.shape == stack.shape and not mask.any()


@pytest.mark.requires("torch")
def test_a_torch_median_of_a_larger_box_is_the_middle_value() -> None:
    """A 5x5 box holds 25 values: torch's median is one of them, equal to scipy.ndimage's
    (of an even count it would take the lower middle). (JAX's takes the sorted middle.)"""
    stack = _images("uint8")
    options = variants_of("median")
    reference = _on("numpy", options["numpy"], stack, radius=2)
    assert np.array_equal(_on("torch", options["torch"], stack, radius=2), reference)


@pytest.mark.requires("torch")
def test_the_torch_median_gathers_windows_a_band_of_rows_at_a_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for 5 rows of windows at once, a 96-row plane runs in 20 bands (the last
    short) and gives the same median."""
    from memtype.pipeline.catalog.implementations import torch as implementations

    stack = _images("uint8")
    monkeypatch.setattr(implementations, "_WINDOW_BYTES", 96 * 9 * 4 * 5)
    reference = _on("numpy", variants_of("median")["numpy"], stack)
    assert np.array_equal(_on("torch", implementations.tensor_median, stack), reference)


def test_small_objects_are_removed_by_their_size_in_the_stack() -> None:
    labels = np.zeros((2, 8, 8), np.int32)
    labels[0, :2, :2] = 1            # 4 pixels
    labels[:, 4:6, 4:6] = 2          # 8 pixels over two planes
    out = np.asarray(variants_of("remove_small_objects")["numpy"](labels, min_size=5))
    assert set(np.unique(out)) == {0, 2}


@pytest.mark.filterwarnings("error")
def test_one_object_is_removed_or_kept_without_a_warning() -> None:
    """scikit-image warns "Only one label was provided" (did you mean a mask?): labels with
    one object are labels here."""
    labels = np.zeros((1, 8, 8), np.int32)
    labels[0, :3, :3] = 1
    out = np.asarray(variants_of("remove_small_objects")["numpy"](labels, min_size=5))
    assert np.array_equal(out, labels)


def test_label_statistics_without_intensity_has_no_intensity_columns() -> None:
    labels = np.zeros((1, 8, 8), np.int32)
    labels[0, 2:4, 2:6] = 1
    same, rows = variants_of("label_statistics")["numpy"](labels)
    assert same is labels
    assert rows == [{"label": 1, "area": 8.0, "centroid_plane": 0.0, "centroid_y": 2.5,
                     "centroid_x": 3.5}]


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


# -- the plan says why each operation runs where it does (issue 25, section 4) -------------

@pytest.fixture(scope="module")
def plate(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.pipeline_support import write_plate

    return write_plate(tmp_path_factory.mktemp("why") / "plate")


def _top_hat(name: str = "top_hat") -> Any:
    return catalog.step("pyclesperanto.top_hat", name=name, radius_x=2, radius_y=2, radius_z=0)


@pytest.mark.opencl
@pytest.mark.requires("pyclesperanto", "tifffile")
def test_the_plan_says_the_data_is_already_there(plate: Any) -> None:
    plan = Pipeline([_top_hat(), "gaussian", _top_hat("top_hat_2")]).plan(plate)
    assert plan.reasons == {"gaussian": "the data is already there (pyclesperanto)"}
    assert "gaussian runs in pyclesperanto: the data is already there" in plan.table()


@pytest.mark.opencl
@pytest.mark.requires("pyclesperanto", "tifffile")
def test_the_plan_says_when_equal_costs_go_to_the_declared_order(plate: Any) -> None:
    """The last step is written as NumPy: from pyclesperanto, either Gaussian copies once."""
    plan = Pipeline([_top_hat(), "gaussian"]).plan(plate)
    assert plan.choices == {"gaussian": "numpy"}
    assert plan.reasons["gaussian"].startswith("declared before pyclesperanto, at the same cost")


@pytest.mark.opencl
@pytest.mark.requires("pyclesperanto", "torch", "tifffile")
def test_the_plan_says_the_cost_it_measured(plate: Any) -> None:
    """From torch on the CPU, NumPy's labelling is a zero-copy away, pyclesperanto's a copy
    (torch has no labelling)."""
    @mt.torch
    def keep(stack: Any) -> Any:
        return stack

    plan = Pipeline([FunctionStep(keep), "label"]).plan(plate)
    assert plan.choices == {"label": "numpy"}
    assert plan.reasons["label"].startswith("cheaper measured cost (")
    assert "next pyclesperanto" in plan.reasons["label"]


@mt.torch
def _in_torch(stack: Any) -> Any:
    return stack


@pytest.mark.requires("torch", "tifffile")
@pytest.mark.parametrize("name", ["median", "sobel", "threshold_li", "threshold_triangle"])
def test_between_torch_steps_the_plan_runs_the_torch_implementation(plate: Any,
                                                                    name: str) -> None:
    """Data in torch and going on to torch: the operation's torch implementation runs it
    (NumPy's would convert out and back)."""
    steps = [FunctionStep(_in_torch), name, FunctionStep(_in_torch, "back")]
    plan = Pipeline(steps).plan(plate)
    assert plan.choices == {name: "torch"}
    assert plan.reasons == {name: "the data is already there (torch)"}


@pytest.mark.opencl
@pytest.mark.requires("pyclesperanto", "tifffile")
def test_the_plan_says_when_the_others_have_no_room(plate: Any) -> None:
    step = FunctionStep(mt.variants(pyclesperanto=lambda s: s, numpy=lambda s: s), "same")
    plan = Pipeline([step]).plan(plate, budgets={"opencl:0": 1})
    assert plan.reasons == {"same": "the only implementation that can run (pyclesperanto: "
                                    "no room in the memory budget)"}


@pytest.mark.no_gpu
@pytest.mark.requires("tifffile")
def test_the_plan_says_when_only_one_is_installed(plate: Any) -> None:
    """Without a GPU, CuPy is not installed (found without importing anything), or it is
    and the plan does not import it: NumPy holds the stacks."""
    step = FunctionStep(mt.variants(numpy=lambda s: s, cupy=lambda s: s), "same")
    reason = Pipeline([step]).plan(plate).reasons["same"]
    assert reason in ("the only implementation installed", "the data is already there (numpy)")


def test_planning_imports_no_framework_only_to_compare_it(plate: Any) -> None:
    """Planning a NumPy pipeline of operations imports neither torch nor JAX (nor
    pyclesperanto): a framework nothing imported holds no stacks, so converting into it
    would cost more than staying (measured: a fresh process planning one Gaussian took 11.9 s
    with both imported, 3.4 s without, load ~9 on 2 cores)."""
    import subprocess
    import sys

    code = ("import sys; from memtype.pipeline import Pipeline; "
            f"plan = Pipeline(['gaussian', 'white_tophat']).plan({str(plate)!r}); "
            "print(sorted(m for m in ('torch', 'jax', 'pyclesperanto') if m in sys.modules)); "
            "print(plan.reasons['gaussian']); print(plan.table())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    imported, reason, *table = done.stdout.splitlines()
    assert imported == "[]"
    assert reason == "the data is already there (numpy)"
    text = "\n".join(table)  # a plan gives each reason once, then "as above"
    assert "unavailable (not imported" in text
    assert "torch unavailable (not imported" in text or "torch unavailable (as above)" in text


@pytest.mark.requires("skimage", "tifffile")
def test_cli_plan_prints_why_for_a_file_of_named_steps(plate: Any, tmp_path: Any) -> None:
    import subprocess
    import sys

    file = tmp_path / "named.py"
    file.write_text("from memtype.pipeline import Pipeline\n"
                    "pipeline = Pipeline([('gaussian', {'sigma': 2}), 'threshold_otsu'])\n")
    done = subprocess.run([sys.executable, "-m", "memtype", "run", str(file), "--input",
                           str(plate), "--output", str(tmp_path / "out"), "--plan"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "gaussian runs in numpy: the data is already there (numpy)" in done.stdout
    assert "threshold_otsu runs in numpy: the data is already there (numpy)" in done.stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.requires("tifffile")
def test_a_pipeline_of_named_operations_writes_the_label_table(plate: Any,
                                                               tmp_path: Any) -> None:
    from tests.pipeline_support import read_csv

    pipeline = Pipeline(["gaussian", "threshold_otsu", "label",
                         ("remove_small_objects", {"min_size": 4}),
                         FunctionStep("label_statistics", outputs=("objects",))])
    report = pipeline.run(plate, tmp_path / "out")
    assert report.ok
    rows = read_csv(report.outputs["objects"])
    assert rows and {"well", "label", "area", "centroid_y", "centroid_x"} <= set(rows[0])
    assert min(float(r["area"]) for r in rows) >= 4


@pytest.mark.parametrize(("name", "memory_type"), _framework_cases(THRESHOLDS))
def test_thresholds_of_uint32_values_across_two_to_the_31_equal_scikit_images(
        name: str, memory_type: str) -> None:
    """32-bit values are counted from their minimum: values on both sides of 2**31 (JAX
    counts in int32: they wrapped and the histogram asked for 2**32 counts) threshold as
    scikit-image does."""
    rng = np.random.default_rng(1)
    stack = (rng.integers(0, 1000, (2, 96, 96)) + (2**31 - 500)).astype(np.uint32)
    options = variants_of(name)
    reference = _on("numpy", options["numpy"], stack)
    assert 0 < reference.mean() < 1
    assert np.array_equal(_on(memory_type, options[memory_type], stack), reference)


@pytest.mark.requires("jax")
def test_a_jax_histogram_of_more_values_than_int32_counts_is_refused() -> None:
    """A uint32 stack spanning more than 2**31 values has no int32 count index in JAX:
    a clear error naming the range, never a wrapped histogram."""
    import jax.numpy as jnp

    from memtype.errors import InvalidArgumentError
    from memtype.pipeline.catalog.implementations.jax import jax_otsu_mask

    stack = jnp.asarray(np.array([[[0, 2**32 - 1]]], np.uint32))
    with pytest.raises(InvalidArgumentError, match=r"0 to 4,294,967,295") as caught:
        jax_otsu_mask(stack)
    assert isinstance(caught.value, ValueError)
