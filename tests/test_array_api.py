"""``@mt.array_api`` (issue 25 §3): Array API functions run where their data is, the measured
gaps of the standard handled, and pipeline steps planned in every covered framework."""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.array_api_functions import ArrayAPIFunction, _cheapest, covers
from memtype.errors import (
    ArgumentTypeError,
    ArrayAPIError,
    CallOptionError,
    ContractError,
    MemoryConversionError,
    MissingPackageError,
)
from memtype.frameworks import get_framework, iter_frameworks
from memtype.pipeline import FunctionStep, Pipeline
from tests.pipeline_support import write_plate

pytestmark = pytest.mark.requires("array_api_compat")
NATIVE = {"dtype_conversion": mt.DtypeConversion.NATIVE_OUTPUT}
SEEN: list[Any] = []


# -- functions (module level: importable by name, for pickling and pipeline files) --------
@mt.array_api
def centre(image: Any, xp: Any) -> Any:
    SEEN.append(xp)
    return image - xp.mean(image)


@mt.array_api
def plus_one_by_itself(image: Any) -> Any:
    import array_api_compat

    xp = array_api_compat.array_namespace(image)
    SEEN.append(xp)
    return image + xp.asarray(1, dtype=image.dtype)


@mt.array_api
def brighten(image: Any, xp: Any) -> Any:  # +, >, max: torch has none of them for uint16
    return xp.where(image > 2, image + 1, xp.max(image))


@mt.array_api
def masked(image: Any, mask: Any, xp: Any) -> Any:
    return xp.where(mask, image, xp.zeros_like(image))


@mt.array_api
def write_first(image: Any) -> Any:
    image[0] = 1
    return image


@mt.array_api(memory_type="numpy")
def centred_to_numpy(image: Any, xp: Any) -> Any:
    return image - xp.mean(image)


@mt.array_api
def half(image: Any) -> Any:
    return image * 0.5


@mt.array_api
def flatten(image: Any, xp: Any) -> Any:
    return xp.reshape(image, (-1,))


@mt.array_api(contract="any")
def same(image: Any) -> Any:
    return image


@mt.torch
def torch_only(stack: Any) -> Any:
    return stack + 1.0


def _array(framework: str, data: np.ndarray[Any, Any]) -> Any:
    return mt.convert(data, framework)


def _image(dtype: Any = np.float32) -> np.ndarray[Any, Any]:
    return np.arange(12, dtype=dtype).reshape(1, 3, 4)


def _native(x: Any) -> np.ndarray[Any, Any]:
    return np.asarray(mt.convert(x, "numpy"))


# -- 1. where it runs ------------------------------------------------------------------------
COVERED = [pytest.param("numpy", id="numpy"),
           pytest.param("torch", id="torch", marks=pytest.mark.requires("torch")),
           pytest.param("jax", id="jax", marks=pytest.mark.requires("jax"))]
UNCOVERED = [pytest.param("tensorflow", id="tensorflow", marks=pytest.mark.requires("tensorflow")),
             pytest.param("mlx", id="mlx", marks=pytest.mark.requires("mlx")),
             pytest.param("pyclesperanto", id="pyclesperanto",
                          marks=[pytest.mark.requires("pyclesperanto"), pytest.mark.opencl])]


@pytest.mark.parametrize("framework", COVERED)
def test_runs_in_the_inputs_framework_with_no_conversion(framework: str) -> None:
    import array_api_compat

    x = _array(framework, _image())
    with mt.capture_conversions() as events:
        out = centre(x)
    assert events == []
    assert type(out) is type(x)
    assert SEEN[-1] is array_api_compat.array_namespace(x)
    np.testing.assert_allclose(_native(out), _image() - 5.5)


@pytest.mark.parametrize("framework", COVERED)
def test_a_function_without_xp_finds_the_namespace_itself(framework: str) -> None:
    import array_api_compat

    x = _array(framework, _image())
    with mt.capture_conversions() as events:
        out = plus_one_by_itself(x)
    assert events == [] and type(out) is type(x)
    assert SEEN[-1] is array_api_compat.array_namespace(x)


@pytest.mark.parametrize("framework", UNCOVERED)
def test_an_uncovered_framework_computes_in_numpy_and_gets_its_type_back(framework: str) -> None:
    import array_api_compat

    x = _array(framework, _image())
    with mt.capture_conversions() as events:
        out = centre(x)
    assert [(e.source_type, e.target_type) for e in events] == [(framework, "numpy"),
                                                                ("numpy", framework)]
    assert SEEN[-1] is array_api_compat.numpy
    assert mt.detect_memory_type(out).value == framework
    np.testing.assert_allclose(_native(out), _image() - 5.5)


@pytest.mark.requires("tensorflow")
def test_the_host_conversion_of_an_uncovered_framework_shares_memory() -> None:
    x = _array("tensorflow", _image())
    with mt.capture_conversions() as events:
        centre(x)
    assert events[0].zero_copy  # tensorflow -> numpy: a view, the cheapest covered framework


@pytest.mark.requires("mlx")
def test_mlx_is_not_covered_its_namespace_declares_no_standard() -> None:
    # mlx.core has __array_namespace__ (array-api-compat accepts it) but no
    # __array_api_version__: it claims no version of the standard
    import array_api_compat
    import mlx.core as mx

    assert array_api_compat.array_namespace(mx.zeros(1)) is mx
    assert not covers("mlx")


def test_covered_frameworks_come_from_array_api_compat() -> None:
    offered = centre.frameworks()
    assert sorted(offered) == sorted(fw.name for fw in iter_frameworks() if covers(fw.name))
    assert offered[-1] == "numpy"  # the host last: a plan's tie runs where the data is


@pytest.mark.requires("torch", "tensorflow")
@pytest.mark.parametrize(("source", "kind", "expected"), [
    ("tensorflow", "cpu", "numpy"),  # the host, host-native: shares memory
    ("tensorflow", "cuda", "torch"),  # same device, DLPack at both ends (CuPy absent or no GPU)
    ("pyclesperanto", "opencl", "numpy"),  # no covered framework on OpenCL: the host
], ids=["tensorflow-cpu", "tensorflow-cuda", "pyclesperanto-opencl"])
def test_the_cheapest_covered_framework_comes_from_adapter_facts(
        source: str, kind: str, expected: str) -> None:
    if expected == "torch" and covers("cupy"):
        expected = "cupy"  # the first such row of the table, where CuPy has a GPU
    assert _cheapest(get_framework(source), kind) == expected


@pytest.mark.requires("torch")
def test_output_type_fixes_the_results_type() -> None:
    x = _array("torch", _image())
    with mt.capture_conversions() as events:
        out = centred_to_numpy(x)
    assert isinstance(out, np.ndarray)
    assert [(e.source_type, e.target_type, e.zero_copy) for e in events] == [
        ("torch", "numpy", True)]


@pytest.mark.requires("torch")
def test_other_arrays_go_to_the_first_arrays_framework() -> None:
    import torch

    mask, x = _image() > 4, _array("torch", _image())
    with mt.capture_conversions() as events:
        out = masked(x, mask)
    assert isinstance(out, torch.Tensor)
    assert [(e.source_type, e.target_type) for e in events] == [("numpy", "torch")]
    np.testing.assert_array_equal(_native(out), np.where(mask, _image(), 0))


def test_the_dtype_policy_applies_as_in_the_other_decorators() -> None:
    image = _image(np.uint8) + 10
    assert half(image).dtype == np.uint8  # PRESERVE_INPUT: floats on the integer scale
    assert half(image, **NATIVE).dtype == np.float64


def test_the_contract_applies_as_in_the_other_decorators() -> None:
    with pytest.raises(ContractError, match="flatten must return a 3D"):
        flatten(_image())


def test_the_decorated_function_is_the_public_class() -> None:
    """The pipeline recognises an @mt.array_api function through the top level's
    ``mt.ArrayAPIFunction`` (the core's public API), the class the decorator returns."""

    @mt.array_api
    def double(x: Any, xp: Any) -> Any:
        return x * 2

    assert mt.ArrayAPIFunction is ArrayAPIFunction
    assert isinstance(double, mt.ArrayAPIFunction) and "ArrayAPIFunction" in mt.__all__


def test_options_are_checked_at_decoration() -> None:
    with pytest.raises(CallOptionError, match="dtype_conversion"):
        mt.array_api(dtype_conversion="bogus")
    with pytest.raises(ArgumentTypeError, match="unknown option.*input_type"):
        mt.array_api(input_type="numpy")


def test_a_call_without_an_array_is_refused() -> None:
    with pytest.raises(ArgumentTypeError, match="needs an array argument"):
        centre([1, 2, 3])


def test_it_pickles_by_reference_and_its_variants_through_it() -> None:
    assert pickle.loads(pickle.dumps(centre)) is centre
    pinned = centre.implementation("numpy")
    assert pickle.loads(pickle.dumps(pinned)) is pinned
    kept = pinned.computing()
    assert pickle.loads(pickle.dumps(kept)) is kept


# -- 2. the standard's measured gaps ---------------------------------------------------------
@pytest.mark.requires("jax")
def test_a_write_into_a_jax_array_is_an_array_api_error() -> None:
    with pytest.raises(ArrayAPIError, match="immutable") as info:
        write_first(_array("jax", _image()))
    assert isinstance(info.value, TypeError)  # as JAX's own error is
    assert "JAX arrays are immutable" in str(info.value.__cause__)


def test_a_write_into_a_numpy_array_reaches_the_caller() -> None:
    image = _image()  # the documented semantics: ordinary Python, as @mt.numpy
    write_first(image)
    assert (image[0] == 1).all()


@pytest.mark.requires("torch")
def test_torch_uint16_is_widened_and_cast_back() -> None:
    import torch

    image = _image(np.uint16)
    x = torch.from_numpy(image.copy())
    with pytest.raises(NotImplementedError):  # the gap, measured on torch 2.13 (CPU)
        torch.where(x > 2, x + 1, torch.amax(x))
    out = brighten(x)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.uint16
    np.testing.assert_array_equal(out.numpy(), brighten(image))  # NumPy's own result


@pytest.mark.parametrize(("framework", "dtype"), [
    pytest.param("numpy", np.uint16, id="numpy-uint16"),
    pytest.param("torch", np.int16, id="torch-int16", marks=pytest.mark.requires("torch")),
    pytest.param("torch", np.float32, id="torch-float32", marks=pytest.mark.requires("torch")),
])
def test_a_dtype_with_kernels_is_passed_as_it_is(framework: str, dtype: Any) -> None:
    x = _array(framework, _image(dtype))
    assert same(x) is x  # the probe finds the kernels: no widening, no copy


@pytest.mark.requires("torch")
def test_torch_uint16_widened_result_is_native_int32() -> None:
    import torch

    out = brighten(torch.from_numpy(_image(np.uint16)), **NATIVE)
    assert out.dtype == torch.int32


@pytest.mark.requires("torch")
def test_torch_uint64_has_no_wider_integer_and_is_an_array_api_error() -> None:
    import torch

    with pytest.raises(ArrayAPIError, match="no arithmetic kernels for uint64"):
        brighten(torch.from_numpy(_image(np.uint64)))


@pytest.fixture
def jax_x64_off() -> Iterator[None]:
    import jax

    before = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", False)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)


@pytest.mark.requires("jax")
def test_float64_into_jax_without_x64_is_refused(jax_x64_off: None) -> None:
    mask = np.ones((1, 3, 4))  # float64
    with pytest.raises(MemoryConversionError, match="holds no float64"):
        masked(_array("jax", _image()), mask)


@pytest.mark.requires("jax")
def test_the_jax_implementation_refuses_float64_without_x64(jax_x64_off: None) -> None:
    with pytest.raises(MemoryConversionError, match="narrowed silently"):
        centre.implementation("jax")(_image(np.float64))


@pytest.mark.requires("jax")
def test_float64_into_jax_with_x64_runs() -> None:
    import jax

    before = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    try:
        out = centre.implementation("jax")(_image(np.float64))
        assert str(out.dtype) == "float64"
    finally:
        jax.config.update("jax_enable_x64", before)


# -- 3. the planner --------------------------------------------------------------------------
def test_a_step_offers_every_covered_framework() -> None:
    step = FunctionStep(centre)
    assert step.variants is not None
    assert list(step.variants) == list(centre.frameworks())
    assert [c.input_type for c in step.all_calls()] == list(centre.frameworks())


@pytest.mark.requires("torch")
def test_the_plan_runs_it_where_the_previous_step_left_the_data() -> None:
    pipeline = Pipeline([FunctionStep(torch_only, **NATIVE), FunctionStep(centre, **NATIVE)])
    plan = pipeline.plan(np.zeros((3, 16, 16), np.float32))
    assert plan.choices == {"centre": "torch"}
    assert plan.predicted()["centre"] == (0, 0)
    assert "centre: chain cost with torch 2 <- chosen" in plan.table()
    assert "centre runs in torch: the data is already there" in plan.table()


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("plate"))


@pytest.mark.requires("torch", "tifffile")
def test_a_run_makes_no_conversion_for_the_array_api_step(plate_dir: Path,
                                                          tmp_path: Path) -> None:
    steps = [FunctionStep(torch_only), FunctionStep(brighten)]  # uint16 stacks: widened
    report = Pipeline(steps).run(plate_dir, tmp_path / "out")
    report.raise_for_failures()
    assert report.plan is not None and report.plan.choices == {"brighten": "torch"}
    by_name = {s.name: s for s in report.steps}
    assert by_name["brighten"].stacks > 0 and by_name["brighten"].conversions == 0


@pytest.mark.requires("torch", "tifffile")
def test_memtype_run_plan_shows_the_choice(plate_dir: Path, tmp_path: Path) -> None:
    file = tmp_path / "pipe.py"
    file.write_text("from memtype.pipeline import FunctionStep, Pipeline\n"
                    "from tests.test_array_api import brighten, torch_only\n"
                    "pipeline = Pipeline([FunctionStep(torch_only), FunctionStep(brighten)])\n")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "memtype", "run", str(file), "--input",
                           str(plate_dir), "--output", str(out), "--plan"],
                          capture_output=True, text=True, cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    assert "brighten: chain cost with torch 8 <- chosen" in done.stdout


def test_an_unplanned_step_runs_where_the_data_is() -> None:
    step = FunctionStep(centre, **NATIVE)
    assert isinstance(step.chain[0].func, ArrayAPIFunction)
    out, side = step.run(_image(), (), None)
    assert isinstance(out, np.ndarray) and side == []


def test_without_array_api_compat_a_call_says_how_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import memtype.array_api_functions as module

    for name in [m for m in sys.modules if m.startswith("array_api_compat")]:
        monkeypatch.setitem(sys.modules, name, None)  # `import name` now fails as if absent
    monkeypatch.setitem(sys.modules, "array_api_compat", None)
    for cache in ("_covered", "_namespaces", "_run_in"):
        monkeypatch.setattr(module, cache, {})
    monkeypatch.setattr(module, "_aac", None)

    @mt.array_api
    def anything(image: Any) -> Any:
        return image

    with pytest.raises(MissingPackageError, match=r"pip install 'memtype\[array-api\]'"):
        anything(_image())
    with pytest.raises(MissingPackageError):  # never "offers no framework"
        _ = FunctionStep(anything).variants
