"""MLX, the seventh built-in row: decorators, dtype policy, stack utils, stores, a pipeline
step (the conversion matrix covers it through the table)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.pipeline import FunctionStep, Pipeline
from memtype.storage import MemoryStore, TieredStore
from tests.helpers import host, import_if_installed
from tests.pipeline_support import SMALL, load_field, stacks, write_plate

pytestmark = pytest.mark.requires("mlx")

mx = import_if_installed("mlx.core")


@mt.mlx
def mlx_scale(stack: Any, factor: float = 2.0) -> Any:
    assert isinstance(stack, mx.array)
    return stack.astype(mx.float32) * factor


def test_mlx_decorator_runs_in_mlx_and_returns_mlx() -> None:
    out = mlx_scale(np.ones((2, 3, 3), np.float32), factor=3.0)
    assert isinstance(out, mx.array)
    np.testing.assert_array_equal(host(out), np.full((2, 3, 3), 3.0, np.float32))


def test_mlx_decorator_preserves_the_input_dtype_under_the_policy() -> None:
    image = np.arange(2 * 2 * 2, dtype=np.uint8).reshape(2, 2, 2) * 30
    out = mlx_scale(image, factor=0.5)
    assert out.dtype == mx.uint8  # PRESERVE_INPUT, rounded half to even in MLX itself
    np.testing.assert_array_equal(host(out), np.rint(image * 0.5).astype(np.uint8))


def test_memory_types_into_mlx_from_torch() -> None:
    import torch

    @mt.memory_types(input_type="torch", output_type="mlx")
    def to_mlx(t: Any) -> Any:
        assert isinstance(t, torch.Tensor)
        return mt.convert(t + 1, "mlx")

    out = to_mlx(np.zeros((1, 2, 2), np.float32))
    assert isinstance(out, mx.array)
    np.testing.assert_array_equal(host(out), np.ones((1, 2, 2), np.float32))


def test_dtype_cast_in_mlx_rounds_half_to_even() -> None:
    from memtype.dtypes import cast

    out = cast(mx.array([0.5, 1.5, 2.5, -3.0, 300.0]), "uint8")
    assert isinstance(out, mx.array)
    np.testing.assert_array_equal(host(out), np.array([0, 2, 2, 0, 255], np.uint8))


def test_float64_is_kept_and_complex128_narrows_exactly_or_fails() -> None:
    assert mt.convert(np.arange(3, dtype=np.float64), "mlx").dtype == mx.float64
    assert mt.convert(np.arange(3, dtype=np.complex128), "mlx").dtype == mx.complex64
    with pytest.raises(mt.MemoryConversionError, match="complex128"):
        mt.convert(np.array([1 + 1e-12j]), "mlx")


def test_export_shares_the_mlx_buffer() -> None:
    x = mt.convert(np.arange(6, dtype=np.float32), "mlx")
    view = mt.convert(x, "numpy")
    assert mt.shares_memory(x, view)
    view[0] = 42.0  # MLX arrays are mutable: the row says so
    assert float(x[0]) == 42.0


def test_stack_and_unstack_in_mlx() -> None:
    slices = [np.full((2, 2), i, np.float32) for i in range(3)]
    stacked = mt.stack_slices(slices, "mlx", 0)
    assert isinstance(stacked, mx.array) and stacked.shape == (3, 2, 2)
    planes = mt.unstack_slices(stacked, "mlx", 0)
    assert all(isinstance(p, mx.array) for p in planes)
    assert [float(host(p).max()) for p in planes] == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("store", [MemoryStore, lambda: TieredStore(1 << 20)],
                         ids=["memory", "tiered"])
def test_store_saves_and_loads_an_mlx_array(store: Any) -> None:
    s = store()
    x = mt.convert(np.arange(12, dtype=np.float32).reshape(3, 4), "mlx")
    s.save(x, "x")
    x[0, 0] = -1.0  # the caller's later write does not reach the stored value
    out = s.load("x")
    assert isinstance(out, mx.array)
    np.testing.assert_array_equal(host(out), np.arange(12, dtype=np.float32).reshape(3, 4))


def test_pipeline_with_an_mlx_step(tmp_path: Path) -> None:
    plate = write_plate(tmp_path / "plate")
    step = FunctionStep(mlx_scale, factor=0.5, dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)
    report = Pipeline([step]).run(plate, tmp_path / "out")
    assert report.ok
    for (well, site, channel), stack in stacks(SMALL).items():
        field = load_field(report.outputs["images"], well, site)
        np.testing.assert_array_equal(field[channel - 1], stack.astype(np.float32) * 0.5)


_PRIVATE = {  # adapter functions whose result must not follow later writes to their input
    "copy": lambda ad, x: ad.copy(x),
    "astype": lambda ad, x: ad.astype(x, np.dtype("float64")),
    "rint": lambda ad, x: ad.rint(x),
    "stack": lambda ad, x: ad.stack([x]),
}


@pytest.mark.parametrize("make", list(_PRIVATE.values()), ids=list(_PRIVATE))
@pytest.mark.parametrize("lazy", [False, True], ids=["evaluated", "lazy"])
def test_an_mlx_private_result_is_computed_before_the_caller_writes(make: Any,
                                                                    lazy: bool) -> None:
    adapter = mt.frameworks.load_adapter("mlx")
    x = mx.array(np.arange(6, dtype=np.float32))
    if lazy:
        x = x + 0  # an unevaluated MLX array
    out = make(adapter, x)
    mt.convert(x, "numpy")[...] = -1.0  # the caller writes through memtype's zero-copy view
    assert host(out).ravel().tolist() == list(range(6))


@pytest.mark.parametrize("store", [MemoryStore, lambda: TieredStore(1 << 20)],
                         ids=["memory", "tiered"])
def test_a_stored_mlx_array_ignores_writes_through_the_callers_numpy_view(store: Any) -> None:
    s = store()
    x = mx.array(np.arange(6, dtype=np.float32))
    s.save(x, "x")
    mt.convert(x, "numpy")[0] = -1.0
    assert host(s.load("x")).tolist() == list(range(6))


def test_mlx_copy_inputs_gives_the_function_a_copy_made_before_the_call_returns() -> None:
    seen: list[Any] = []

    @mt.mlx(copy_inputs=True, contract="any")
    def keep(x: Any) -> Any:
        seen.append(x)
        return x

    x = mx.array(np.arange(6, dtype=np.float32))
    keep(x)
    mt.convert(x, "numpy")[0] = -1.0
    assert host(seen[0]).tolist() == list(range(6))
