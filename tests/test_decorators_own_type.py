"""The common decorated call (one host array of the function's own type, no call-time options)
takes the one path every call takes (its inputs from one short branch of ``prepare``); it keeps
every rule: isolation, the write counts that guard out-of-memory retries, the read-only note,
the dtype policy and the contract. Adapter.write_count is the one place a framework's write
count is read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.errors import ContractError, InputWriteError
from memtype.frameworks import load_adapter
from tests.helpers import import_if_installed
from tests.structure_support import calls

torch = import_if_installed("torch")


def _called(call: Callable[[], Any]) -> set[str]:
    """The names of the Python functions ``call`` runs (module:function)."""
    return {f"{module}:{function}" for module, function in calls(call)}


def test_the_common_call_takes_the_one_path_and_converts_nothing() -> None:
    f = mt.numpy(lambda x: x + 1)
    x = np.zeros((1, 2, 2), np.float32)
    f(x)  # loads the frameworks
    called = {name for name in _called(lambda: f(x)) if name.startswith("memtype.")}
    assert "memtype.decorators.inputs:prepare" in called  # stage 1 as for every call
    assert not {name for name in called if name.startswith("memtype.conversion")}
    assert not {name for name in called if ":_same_type" in name or ":array" in name}


def test_a_call_time_option_takes_the_general_path() -> None:
    f = mt.numpy(lambda x: x * 2)
    x = np.ones((1, 2, 2), np.uint8)
    f(x)
    assert "memtype.decorators.inputs:prepare" in _called(
        lambda: f(x, dtype_conversion=mt.DtypeConversion.FLOAT32))


def test_decoration_defaults_apply_on_the_common_call() -> None:
    f = mt.numpy(lambda x: x * 2, dtype_conversion=mt.DtypeConversion.FLOAT32)
    out = f(np.ones((1, 2, 2), np.uint8))
    assert out.dtype == np.float32 and out.tolist() == [[[2.0, 2.0], [2.0, 2.0]]]


def test_the_dtype_policy_applies_on_the_common_call() -> None:
    f = mt.numpy(lambda x: x * 1.5)  # PRESERVE_INPUT: back to uint8
    out = f(np.full((1, 1, 2), 3, np.uint8))
    assert out.dtype == np.uint8 and out.tolist() == [[[4, 4]]]  # 4.5 rounds half to even


def test_the_contract_is_checked_on_the_common_call() -> None:
    f = mt.numpy(lambda x: x[0])
    with pytest.raises(ContractError, match="must return a 3D"):
        f(np.zeros((1, 2, 2)))


def test_a_tuple_result_on_the_common_call() -> None:
    f = mt.numpy(lambda x: (x * 1.5, "label"))
    image, label = f(np.full((1, 1, 1), 2, np.int16))
    assert image.dtype == np.int16 and image.tolist() == [[[3]]] and label == "label"


def test_a_read_only_input_gets_its_note_on_the_common_call() -> None:
    @mt.numpy
    def writes(x: Any) -> Any:
        x += 1
        return x

    x = np.zeros((1, 1, 2))
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only") as caught:
        writes(x)
    assert any("copy_inputs=True" in note for note in getattr(caught.value, "__notes__", []))


def test_copy_inputs_on_the_common_call() -> None:
    @mt.numpy(copy_inputs=True)
    def writes(x: Any) -> Any:
        x += 1
        return x

    x = np.zeros((1, 1, 2))
    assert writes(x).tolist() == [[[1.0, 1.0]]] and x.tolist() == [[[0.0, 0.0]]]


def test_a_caller_array_is_passed_as_it_is_on_the_common_call() -> None:
    seen: list[Any] = []
    f = mt.numpy(lambda x: seen.append(x) or x)
    x = np.zeros((1, 1, 2))
    assert f(x) is x and seen[0] is x


@pytest.mark.requires("torch")
def test_a_write_before_out_of_memory_is_not_retried_on_the_common_call() -> None:
    calls: list[int] = []

    @mt.torch
    def f(x: Any) -> Any:
        calls.append(1)
        x.add_(1)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("out of memory (simulated on the host)")
        return x

    t = torch.zeros(1, 1, 2)
    with pytest.raises(InputWriteError, match="caller's array"):
        f(t)
    assert len(calls) == 1 and t.tolist() == [[[1.0, 1.0]]]


@pytest.mark.requires("torch")
def test_out_of_memory_without_a_write_is_retried_on_the_common_call() -> None:
    calls: list[int] = []

    @mt.torch
    def f(x: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("out of memory (simulated on the host)")
        return x + 1

    assert f(torch.zeros(1, 1, 2)).tolist() == [[[1.0, 1.0]]] and len(calls) == 2


@pytest.mark.requires("torch")
def test_torch_counts_writes() -> None:
    adapter = load_adapter("torch")
    t = torch.zeros(2)
    before = adapter.write_count(t)
    assert adapter.counts_writes and isinstance(before, int)
    t[:1].add_(1)  # through a view: the count is shared
    assert adapter.write_count(t) == before + 1


@pytest.mark.requires("torch")
def test_an_inference_tensor_has_no_write_count() -> None:
    with torch.inference_mode():
        t = torch.zeros(2)
    assert load_adapter("torch").write_count(t) is None


@pytest.mark.requires("torch")
def test_an_inference_tensor_on_the_common_call() -> None:
    with torch.inference_mode():
        t = torch.ones(1, 1, 2)
    assert mt.torch(lambda x: x * 2)(t).tolist() == [[[2.0, 2.0]]]


def test_numpy_counts_no_writes() -> None:
    adapter = load_adapter("numpy")
    assert not adapter.counts_writes and adapter.write_count(np.zeros(2)) is None
