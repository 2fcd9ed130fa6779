"""Memory type decorators: decoration, conversion of inputs, isolation, contract, pickling."""

from __future__ import annotations

import inspect
import pickle
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

import numpy as np
import pytest

import memtype as mt
import memtype.decorators as decorators
from memtype.errors import CallOptionError, ContractError
from memtype.frameworks import Framework, iter_frameworks
from tests import decorated_functions as df
from tests.frameworks import type_params
from tests.helpers import dtype_of, host

IMAGE = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
MUTABLE_IN_PLACE: dict[str, Callable[[Any], Any]] = {
    "numpy": lambda x: x.__iadd__(1),
    "cupy": lambda x: x.__iadd__(1),
    "torch": lambda x: x.add_(1),
    "pyclesperanto": lambda x: __import__("pyclesperanto").set(x, 99),
    "mlx": lambda x: x.__setitem__(0, 99),
}
"""How to write into an array of each mutable built-in type (test_tables_cover_every_row)."""


def decorator_for(memory_type: str) -> Callable[..., Any]:
    return getattr(mt, memory_type)  # type: ignore[no-any-return]


# -- decoration -----------------------------------------------------------------------


@pytest.mark.parametrize("row", list(iter_frameworks()), ids=lambda fw: fw.name)
def test_one_decorator_per_table_row(row: Framework) -> None:
    decorator = getattr(decorators, row.name)
    assert getattr(mt, row.name) is decorator
    assert decorator.__name__ == row.name and row.name in decorators.__all__
    f = decorator(lambda image: image)
    assert f.input_memory_type is mt.MemoryType(row.name)
    assert f.output_memory_type == row.name


def test_decorating_imports_no_framework() -> None:
    code = (
        "import sys, memtype as mt\n"
        "@mt.torch\n"
        "def f(x): return x\n"
        "@mt.jax(output_type='tensorflow')\n"
        "def g(x): return x\n"
        "@mt.memory_types('cupy', 'pyclesperanto')\n"
        "def h(x): return x\n"
        "loaded = [m for m in ('torch', 'jax', 'tensorflow', 'cupy', 'pyclesperanto', 'numpy')"
        " if m in sys.modules]\n"
        "print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['numpy']"


def test_typo_fails_at_decoration() -> None:
    with pytest.raises(mt.UnknownMemoryTypeError, match="Unknown memory type 'pytorch'. "
                       "Expected one of: numpy, cupy, torch"):
        mt.memory_types("pytorch", "numpy")
    with pytest.raises(ValueError, match="'nmpy'"):
        mt.torch(input_type="nmpy")
    with pytest.raises(ValueError, match="'jx'"):
        mt.numpy(output_type="jx")(lambda x: x)


def test_not_a_callable_refused() -> None:
    with pytest.raises(TypeError, match="needs a callable; received 3"):
        mt.numpy(3)


def test_bare_and_called_forms_are_equivalent() -> None:
    bare = mt.numpy(df.plain_add_one)
    called = mt.numpy()(df.plain_add_one)
    explicit = mt.numpy(input_type="numpy", output_type="numpy", oom_recovery=True,
                        contract=None)(df.plain_add_one)
    for f in (bare, called, explicit):
        np.testing.assert_array_equal(f(IMAGE), IMAGE + 1)


def test_wraps_metadata() -> None:
    def blur(image: np.ndarray, sigma: float = 1.0) -> np.ndarray:
        """Blur an image."""
        return image

    f = mt.torch(input_type="numpy", output_type="jax")(blur)
    assert f.__name__ == "blur" and f.__doc__ == "Blur an image."
    assert f.__wrapped__ is blur and f.__module__ == __name__
    assert f.input_memory_type is mt.MemoryType.NUMPY
    assert f.output_memory_type is mt.MemoryType.JAX
    assert "numpy -> jax" in repr(f)


def test_wraps_the_functions_own_attributes() -> None:
    def blur(image: np.ndarray) -> np.ndarray:
        return image

    blur.tag = "smoothing"  # type: ignore[attr-defined]
    blur.__wrapped__ = len  # type: ignore[attr-defined]  # replaced by the function itself
    f = mt.numpy(blur)
    assert f.tag == "smoothing" and f.__wrapped__ is blur
    assert f.__annotations__ == blur.__annotations__ and f.__qualname__ == blur.__qualname__


def test_signature_shows_call_time_options() -> None:
    def blur(image: np.ndarray, sigma: float = 1.0, **extra: Any) -> np.ndarray:
        return image

    params = inspect.signature(mt.numpy(blur)).parameters
    assert list(params) == ["image", "sigma", "dtype_conversion", "scaling", "slice_by_slice",
                            "gpu_id", "oom_fallback", "oom_recovery", "extra"]
    assert params["dtype_conversion"].default is mt.DtypeConversion.PRESERVE_INPUT
    assert params["scaling"].default == "clip" and params["slice_by_slice"].default is False
    assert params["gpu_id"].default is None and params["oom_fallback"].default is None
    assert all(params[n].kind is inspect.Parameter.KEYWORD_ONLY
               for n in ("dtype_conversion", "scaling", "slice_by_slice", "gpu_id",
                         "oom_fallback"))


def test_option_the_function_declares_is_passed_on() -> None:
    seen = {}

    @mt.numpy
    def f(image: np.ndarray, gpu_id: int | None = None) -> np.ndarray:
        seen["gpu_id"] = gpu_id
        return image

    f(IMAGE, gpu_id=0)
    assert seen == {"gpu_id": 0}
    assert list(inspect.signature(f).parameters).count("gpu_id") == 1


def test_pickle_by_name_and_by_value() -> None:
    assert pickle.loads(pickle.dumps(df.scaled)) is df.scaled
    copy = pickle.loads(pickle.dumps(df.add_one))  # its name holds the plain function
    assert copy is not df.add_one and copy.__wrapped__ is df.plain_add_one
    np.testing.assert_array_equal(copy(IMAGE), IMAGE + 1)
    assert pickle.loads(pickle.dumps(mt.torch)) is mt.torch


def test_runs_in_a_process_pool() -> None:
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        results = list(pool.map(df.scaled, [IMAGE, IMAGE + 1]))
        added = pool.submit(df.add_one, IMAGE).result()
    np.testing.assert_array_equal(results[1], (IMAGE + 1) * 2)
    np.testing.assert_array_equal(added, IMAGE + 1)


@pytest.mark.requires("cloudpickle")
def test_function_in_main_pickles_for_other_processes() -> None:
    script = (
        "import pickle, subprocess, sys, cloudpickle, numpy as np, memtype as mt\n"
        "@mt.numpy\n"
        "def f(image):\n"
        "    return image + 1\n"
        "assert pickle.loads(pickle.dumps(f))(np.zeros((1, 2, 2))).sum() == 4\n"
        "load = 'import pickle, sys, numpy; f = pickle.loads(sys.stdin.buffer.read()); "
        "print(f(numpy.zeros((1, 2, 2))).sum(), f.__name__)'\n"
        "run = subprocess.run([sys.executable, '-c', load], input=cloudpickle.dumps(f),"
        " capture_output=True, check=True)\n"
        "print(run.stdout.decode().strip())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "4.0 f"


def test_decorated_method() -> None:
    filters = df.Filters(0.5)
    np.testing.assert_array_equal(filters.shift(IMAGE), IMAGE + 0.5)
    assert df.Filters.shift.input_memory_type is mt.MemoryType.NUMPY


def test_a_registered_framework_gets_a_decorator(toy: Framework) -> None:
    from tests.toyarrays import ToyArray

    @decorators.toy
    def f(image: Any) -> Any:
        assert isinstance(image, ToyArray)
        return ToyArray(image.values() * 2)

    out = f(IMAGE)
    assert isinstance(out, ToyArray)
    np.testing.assert_array_equal(out.values(), IMAGE * 2)


# -- conversion of inputs -------------------------------------------------------------


def test_numpy_input_reaches_function_as_its_type(memory_type: str) -> None:
    seen = []

    @decorator_for(memory_type)
    def f(image: Any) -> Any:
        seen.append(mt.detect_memory_type(image))
        return image * 2

    out = f(IMAGE)
    assert seen == [mt.MemoryType(memory_type)]
    assert mt.detect_memory_type(out) is mt.MemoryType(memory_type)
    np.testing.assert_array_equal(host(out), IMAGE * 2)


def test_any_input_type_reaches_numpy_function(memory_type: str) -> None:
    seen = []

    @mt.numpy
    def f(image: np.ndarray) -> np.ndarray:
        seen.append(type(image))
        return image + 1

    out = f(mt.convert(IMAGE, memory_type))
    assert seen == [np.ndarray] and type(out) is np.ndarray
    np.testing.assert_array_equal(out, IMAGE + 1)


def test_declared_output_type(memory_type: str) -> None:
    f = mt.numpy(output_type=memory_type)(df.plain_add_one)
    out = f(IMAGE)
    assert mt.detect_memory_type(out) is mt.MemoryType(memory_type)
    np.testing.assert_array_equal(host(out), IMAGE + 1)


@pytest.mark.requires("torch")
@pytest.mark.requires("jax")
def test_arrays_in_lists_tuples_and_keywords_are_converted() -> None:
    import torch

    seen = []

    @mt.torch
    def f(images: list[Any], pair: tuple[Any, Any], *, mask: Any, scale: float) -> Any:
        seen.extend(type(x) for x in [*images, *pair, mask])
        return images[0] * scale + mask

    out = f([IMAGE, IMAGE], (IMAGE, 3), mask=mt.convert(IMAGE, "jax"), scale=2.0)
    assert seen == [torch.Tensor] * 3 + [int, torch.Tensor]
    np.testing.assert_array_equal(host(out), IMAGE * 3)


def test_call_without_arrays() -> None:
    @mt.numpy
    def make(shape: tuple[int, int, int]) -> np.ndarray:
        return np.zeros(shape, np.uint16)

    out = make((1, 2, 2))
    assert out.dtype == np.uint16 and out.shape == (1, 2, 2)


# -- isolation (docs/decorators.md, "What the function gets") ---------------------------


@pytest.mark.parametrize("memory_type", type_params(MUTABLE_IN_PLACE))
def test_copy_inputs_true_never_mutates_callers_array(memory_type: str) -> None:
    caller = mt.convert(IMAGE.copy(), memory_type)
    before = host(caller)
    mutate = MUTABLE_IN_PLACE[memory_type]

    @decorator_for(memory_type)(copy_inputs=True)
    def f(image: Any) -> Any:
        mutate(image)
        return image

    assert not np.array_equal(host(f(caller)), before)  # the function wrote its copy
    np.testing.assert_array_equal(host(caller), before)


@pytest.mark.parametrize("memory_type", type_params(t for t in MUTABLE_IN_PLACE if t != "numpy"))
def test_mutable_same_type_input_passes_through_by_default(memory_type: str) -> None:
    caller = mt.convert(IMAGE.copy(), memory_type)
    mutate = MUTABLE_IN_PLACE[memory_type]
    seen = []

    @decorator_for(memory_type)
    def f(image: Any) -> Any:
        seen.append(image)
        mutate(image)  # ordinary Python semantics: the caller's array changes
        return image

    assert f(caller) is caller and seen[0] is caller


def _seen_by_numpy_function(*callers: Any) -> list[np.ndarray]:
    """What an ``@mt.numpy`` function receives for each of ``callers``."""
    seen: list[np.ndarray] = []

    @mt.numpy
    def f(image: np.ndarray) -> np.ndarray:
        seen.append(image)
        return image + 0

    for caller in callers:
        f(caller)
    return seen


def test_numpy_same_type_input_passes_through_writable_as_the_caller_made_it() -> None:
    caller = IMAGE.copy()
    frozen = IMAGE.copy()
    frozen.flags.writeable = False
    seen = _seen_by_numpy_function(caller, frozen)
    assert seen[0] is caller and seen[0].flags.writeable  # ordinary Python semantics, O(1)
    assert seen[1] is frozen and not seen[1].flags.writeable  # read-only stays read-only


@pytest.mark.requires("jax")
def test_immutable_data_reaches_a_numpy_function_as_a_readonly_view() -> None:
    (seen,) = _seen_by_numpy_function(mt.convert(IMAGE.copy(), "jax"))
    assert not seen.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        seen[...] = 0


@pytest.mark.requires("torch")
def test_numpy_caller_into_torch_function_shares_unless_copy_inputs() -> None:
    caller = IMAGE.copy()

    @mt.torch(output_type="numpy")
    def f(image: Any) -> Any:
        assert mt.shares_memory(image, caller)  # the zero-copy alias, not copied again
        return image.add_(1)

    @mt.torch(output_type="numpy", copy_inputs=True)
    def g(image: Any) -> Any:
        assert not mt.shares_memory(image, caller)
        return image.add_(1)

    np.testing.assert_array_equal(g(caller), IMAGE + 1)
    np.testing.assert_array_equal(caller, IMAGE)
    np.testing.assert_array_equal(f(caller), IMAGE + 1)
    np.testing.assert_array_equal(caller, IMAGE + 1)


@pytest.mark.parametrize("source", ["jax", "tensorflow"])
@pytest.mark.requires("jax", "tensorflow")
def test_immutable_callers_data_never_reaches_function_writable(source: str) -> None:
    caller = mt.convert(IMAGE.copy(), source)

    @mt.torch(copy_inputs=True)
    def f(image: Any) -> Any:
        assert not mt.shares_memory(image, caller)
        return image.mul_(0)

    @mt.numpy
    def g(image: np.ndarray) -> np.ndarray:
        assert not image.flags.writeable
        return image * 1

    f(caller)
    g(caller)
    np.testing.assert_array_equal(host(caller), IMAGE)


@pytest.mark.parametrize("source", ["jax", "tensorflow"])
@pytest.mark.requires("jax", "tensorflow")
def test_write_to_immutable_callers_data_is_an_error(source: str) -> None:
    caller = mt.convert(IMAGE.copy(), source)

    @mt.torch
    def f(image: Any) -> Any:
        assert mt.shares_memory(image, caller)  # O(1): guarded, not copied
        return image * 2

    @mt.torch
    def writes(image: Any) -> Any:
        return image[0].mul_(0)[None]  # through a view: torch's count is shared

    np.testing.assert_array_equal(host(f(caller)), IMAGE * 2)
    with pytest.raises(mt.errors.InputWriteError, match=f"{source} array.*copy_inputs=True"):
        writes(caller)


@pytest.mark.requires("tensorflow")
def test_tf_variable_reaches_a_tensorflow_function_as_its_value() -> None:
    import tensorflow as tf

    variable = tf.Variable(IMAGE.copy())

    @mt.tensorflow
    def f(image: Any) -> Any:
        assert not isinstance(image, tf.Variable)  # no assign() on the caller's variable
        return image + 1

    np.testing.assert_array_equal(host(f(variable)), IMAGE + 1)
    result = f(variable)
    variable.assign_add(tf.ones_like(variable))  # the caller's later write
    np.testing.assert_array_equal(host(result), IMAGE + 1)
    np.testing.assert_array_equal(variable.numpy(), IMAGE + 1)


@pytest.mark.requires("tensorflow")
def test_tf_variable_into_numpy_and_torch_functions_is_isolated() -> None:
    import tensorflow as tf

    variable = tf.Variable(IMAGE.copy())

    @mt.torch(output_type="numpy")
    def f(image: Any) -> Any:
        return image.add_(1)

    np.testing.assert_array_equal(f(variable), IMAGE + 1)
    np.testing.assert_array_equal(variable.numpy(), IMAGE)


@pytest.mark.requires("torch")
def test_copy_inputs_false_passes_the_callers_tensor() -> None:
    tensor = mt.convert(IMAGE.copy(), "torch")
    seen = []

    @mt.torch(copy_inputs=False)
    def f(image: Any) -> Any:
        seen.append(image)
        return image

    f(tensor)
    assert seen[0] is tensor


@pytest.mark.requires("jax")
def test_immutable_input_type_is_passed_as_is() -> None:
    caller = mt.convert(IMAGE, "jax")
    seen = []

    @mt.jax
    def f(image: Any) -> Any:
        seen.append(image)
        return image

    assert f(caller) is caller and seen[0] is caller


# -- the contract ----------------------------------------------------------------------


def test_default_contract_names_function_and_shape() -> None:
    @mt.numpy
    def project(image: np.ndarray) -> np.ndarray:
        return image.max(axis=0)

    with pytest.raises(ContractError, match=r"project must return a 3D \[Z, Y, X\] array; "
                                            r"it returned shape \(3, 4\)") as info:
        project(IMAGE)
    assert isinstance(info.value, ValueError)


def test_non_array_result_breaks_default_contract() -> None:
    @mt.numpy
    def count(image: np.ndarray) -> int:
        return 3

    with pytest.raises(ContractError, match="count must return an array.*returned an object "
                                            "of type builtins.int"):
        count(IMAGE)


def test_tuple_result_first_element_is_the_image(memory_type: str) -> None:
    @mt.numpy(output_type=memory_type)
    def segment(image: np.ndarray) -> tuple[Any, ...]:
        return image > 10, {"count": 3}, [1, 2]

    mask, stats, extra = segment(IMAGE)
    assert mt.detect_memory_type(mask) is mt.MemoryType(memory_type)
    assert stats == {"count": 3} and extra == [1, 2]
    np.testing.assert_array_equal(host(mask) != 0, IMAGE > 10)


def test_empty_tuple_result_refused() -> None:
    with pytest.raises(ContractError, match="empty tuple"):
        mt.numpy(lambda image: ())(IMAGE)


@pytest.mark.parametrize(("contract", "shape", "ok"), [
    (2, (3, 4), True), (2, (2, 3, 4), False), ((2, 3), (3, 4), True), ((2, 3), (2,), False),
    ("any", (), True), (lambda image: image.shape[0] == 2, (2, 3, 4), True),
    (lambda image: image.shape[0] == 2, (3, 4), False),
])
def test_declared_contracts(contract: Any, shape: tuple[int, ...], ok: bool) -> None:
    f = mt.numpy(contract=contract)(lambda image: np.zeros(shape, np.float32))
    if ok:
        assert f(IMAGE).shape == shape
    else:
        with pytest.raises(ContractError, match="<lambda>"):
            f(IMAGE)


def test_contract_any_allows_other_objects() -> None:
    f = mt.numpy(contract="any")(lambda image: float(image.sum()))
    assert f(IMAGE) == float(IMAGE.sum())


@pytest.mark.parametrize("contract", [True, "3d", (), ("a",), 2.5])
def test_invalid_contract_fails_at_decoration(contract: Any) -> None:
    with pytest.raises(CallOptionError, match="contract must be"):
        mt.numpy(contract=contract)


def test_result_keeps_its_device_and_type_when_nothing_changes(memory_type: str) -> None:
    @decorator_for(memory_type)
    def f(image: Any) -> Any:
        return image

    x = mt.convert(IMAGE, memory_type)
    out = f(x)
    assert dtype_of(out) == np.float32
    np.testing.assert_array_equal(host(out), IMAGE)
