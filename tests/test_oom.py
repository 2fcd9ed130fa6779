"""Out-of-memory recognition and recovery, with a real host OOM in a memory-limited process."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import warnings
import weakref
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.errors import MemoryBudgetError
from memtype.gpu.oom import OOMRecoveryWarning, is_oom_error
from tests.helpers import host

IMAGE = np.arange(3 * 4 * 4, dtype=np.float32).reshape(3, 4, 4)

# A decorated NumPy function whose whole-stack temporary (512 MB) does not fit under the
# address-space limit, but whose per-slice temporary (32 MB) does: declared slice-separable,
# recovery completes it slice by slice; by default it retries the same call and fails.
RLIMIT_SCRIPT = textwrap.dedent('''
    import json, resource, warnings
    import numpy as np
    import memtype as mt

    weights = np.arange(1, 17, dtype=np.float64)

    def weighted(image):
        temp = image.astype(np.float64)[..., None] * weights
        return temp.sum(axis=-1)

    def vm_bytes():
        with open("/proc/self/status") as status:
            line = next(l for l in status if l.startswith("VmSize:"))
        return int(line.split()[1]) * 1024

    image = np.random.default_rng(0).random((16, 512, 512), dtype=np.float32)
    expected = (image.astype(np.float64) * weights.sum()).astype(np.float32)
    limit = vm_bytes() + (256 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    report = {}
    try:
        mt.numpy(oom_recovery=False)(weighted)(image)
        report["without_recovery"] = "succeeded"
    except MemoryError as exc:
        report["without_recovery"] = type(exc).__name__
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            mt.numpy(weighted)(image)
            report["default"] = "succeeded"
        except MemoryError as exc:
            report["default"] = type(exc).__name__
            report["note"] = " ".join(getattr(exc, "__notes__", []))
        report["default_warnings"] = len(caught)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = mt.numpy(slice_separable=True)(weighted)(image)
    report["dtype"] = str(out.dtype)
    report["equal"] = bool(np.array_equal(out, expected))
    report["warnings"] = [str(w.message) for w in caught]
    print(json.dumps(report))
''')


def test_real_host_oom_recovers_slice_by_slice_only_when_declared_separable() -> None:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-c", RLIMIT_SCRIPT], capture_output=True, text=True,
                         env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["without_recovery"].endswith("MemoryError")  # the whole stack does not fit
    assert report["default"].endswith("MemoryError") and report["default_warnings"] == 0
    assert "slice_separable=True" in report["note"]
    assert report["dtype"] == "float32" and report["equal"]
    assert len(report["warnings"]) == 1
    assert "weighted ran out of memory" in report["warnings"][0]
    assert "slice by slice" in report["warnings"][0]


# -- recognition by exact types ----------------------------------------------------------


@pytest.mark.parametrize("exc", [
    ValueError("index out of memory range"), RuntimeError("CUDA out of memory"),
    KeyError("out of memory"), OSError("Cannot allocate memory"),
], ids=repr)
def test_lookalikes_are_not_oom(exc: BaseException) -> None:
    assert not is_oom_error(exc)


def _framework_oom_errors() -> list[Any]:
    errors: list[Any] = [pytest.param(MemoryError(), id="MemoryError")]
    if importlib.util.find_spec("torch") is not None:  # the GPU machines have no tensorflow
        import torch

        errors.append(pytest.param(torch.OutOfMemoryError("CUDA out of memory"), id="torch"))
    if importlib.util.find_spec("tensorflow") is not None:
        import tensorflow as tf

        errors.append(pytest.param(tf.errors.ResourceExhaustedError(None, None, "OOM"), id="tf"))
    return errors


@pytest.mark.parametrize("exc", _framework_oom_errors())
def test_framework_oom_types_are_oom(exc: BaseException) -> None:
    assert is_oom_error(exc)


@pytest.mark.requires("jax")
def test_jax_resource_exhausted_is_oom_and_other_jax_errors_are_not() -> None:
    import jax.numpy as jnp

    # a real XLA out-of-memory (1 PiB, beyond any address space): the class and the text the
    # installed JAX raises (JaxRuntimeError in newer JAX, jaxlib's XlaRuntimeError in 0.4.30)
    with pytest.raises(RuntimeError, match="^RESOURCE_EXHAUSTED") as info:
        jnp.zeros((2**50,), jnp.uint8).block_until_ready()
    oom = info.value
    assert is_oom_error(oom)
    assert not is_oom_error(type(oom)("INVALID_ARGUMENT: memory layout"))


# -- the recovery loop -------------------------------------------------------------------


def test_unrelated_error_is_raised_at_once() -> None:
    calls = []

    @mt.numpy
    def f(image: np.ndarray) -> np.ndarray:
        calls.append(1)
        raise ValueError("index out of memory range")

    with pytest.raises(ValueError, match="index out of memory range"):
        f(IMAGE)
    assert len(calls) == 1


def test_oom_once_is_retried_after_freeing_the_failed_frame() -> None:
    calls: list[Any] = []

    class Big:
        pass

    @mt.numpy
    def f(image: np.ndarray) -> np.ndarray:
        if not calls:
            held = Big()  # a local of the failed frame: freed before the retry
            calls.append(weakref.ref(held))
            raise MemoryError("first attempt")
        calls.append(calls[0]() is None)
        return image + 1

    np.testing.assert_array_equal(f(IMAGE), IMAGE + 1)
    assert calls[1] is True


def test_oom_on_the_whole_stack_of_a_separable_function_runs_slice_by_slice(
        memory_type: str) -> None:
    @getattr(mt, memory_type)(slice_separable=True)
    def f(image: Any) -> Any:
        if len(mt.frameworks.load_adapter(memory_type).shape_of(image)) == 3:
            raise MemoryError("whole stack does not fit")
        return image * 3

    with pytest.warns(OOMRecoveryWarning, match="slice by slice"):
        out = f(IMAGE)
    assert mt.detect_memory_type(out) is mt.MemoryType(memory_type)
    np.testing.assert_array_equal(host(out), IMAGE * 3)


def test_oom_recovery_off_raises() -> None:
    @mt.numpy(oom_recovery=False)
    def f(image: np.ndarray) -> np.ndarray:
        raise MemoryError("no")

    with pytest.raises(MemoryError, match="no"):
        f(IMAGE)


def test_every_stage_out_of_memory_raises_the_last_error() -> None:
    calls = []

    @mt.numpy(slice_separable=True)
    def f(image: np.ndarray) -> np.ndarray:
        calls.append(image.ndim)
        raise MemoryError(f"attempt {len(calls)}")

    with pytest.warns(OOMRecoveryWarning), pytest.raises(MemoryError, match="attempt 3"):
        f(IMAGE)
    assert calls == [3, 3, 2]  # first try, retry, then the first slice


# -- defaults never change a result (issue 22 section 3) --------------------------------


def test_default_recovery_retries_the_same_computation_and_never_slices() -> None:
    calls = []

    @mt.numpy
    def f(image: np.ndarray) -> np.ndarray:
        calls.append(image.ndim)
        raise MemoryError(f"attempt {len(calls)}")

    with warnings.catch_warnings():
        warnings.simplefilter("error", OOMRecoveryWarning)  # no stage that warns
        with pytest.raises(MemoryError, match="attempt 2") as info:
            f(IMAGE)
    assert calls == [3, 3]  # first try, then the same call once more
    assert "slice_separable=True" in " ".join(info.value.__notes__)


@pytest.mark.requires("torch")
def test_oom_note_on_the_host_names_no_cpu_fallback() -> None:
    import torch

    @mt.torch
    def f(image: Any) -> Any:
        raise torch.OutOfMemoryError("host tensors (simulated)")

    with pytest.raises(torch.OutOfMemoryError) as info:
        f(torch.ones(2, 3, 4))  # on the CPU already: oom_fallback="cpu" would change nothing
    note = " ".join(info.value.__notes__)
    assert "slice_separable=True" in note and "oom_fallback" not in note


def test_default_recovery_never_returns_a_per_slice_result() -> None:
    @mt.numpy
    def normalised(image: np.ndarray) -> np.ndarray:  # needs the whole volume
        if image.ndim == 3 and image.shape[0] > 1:
            raise MemoryError("whole stack does not fit")
        return image / image.sum()  # per slice: a different result

    with pytest.raises(MemoryError, match="whole stack"):
        normalised(IMAGE)


@pytest.mark.requires("torch")
def test_computing_variant_keeps_slice_separable() -> None:
    @mt.torch(output_type="numpy", slice_separable=True)
    def f(image: Any) -> Any:
        if image.ndim == 3:
            raise MemoryError("whole stack does not fit")
        return image * 3

    with pytest.warns(OOMRecoveryWarning, match="slice by slice"):
        out = f.computing()(IMAGE)
    np.testing.assert_array_equal(host(out), IMAGE * 3)


def test_slice_separable_must_be_a_bool() -> None:
    with pytest.raises(mt.errors.CallOptionError, match="slice_separable must be a bool"):
        mt.numpy(slice_separable="yes")


@pytest.mark.parametrize("oom_recovery", [True, False], ids=["recovery-on", "recovery-off"])
def test_budget_refusal_is_raised_at_once_not_retried(oom_recovery: bool) -> None:
    calls = []

    @mt.numpy(slice_separable=True, oom_recovery=oom_recovery)
    def f(image: np.ndarray) -> np.ndarray:
        calls.append(image.ndim)
        raise MemoryBudgetError("would exceed the budget of cpu:0")

    with pytest.raises(MemoryBudgetError, match="would exceed the budget"):
        f(IMAGE)
    assert calls == [3]


def test_budget_refusal_is_not_an_oom_error() -> None:
    assert not is_oom_error(MemoryBudgetError("would exceed the budget"))
    assert is_oom_error(MemoryError("host out of memory"))


def test_slice_by_slice_call_is_not_sliced_again() -> None:
    calls = []

    @mt.numpy
    def f(image: np.ndarray) -> np.ndarray:
        calls.append(image.ndim)
        raise MemoryError("slice too big")

    with pytest.raises(MemoryError):
        f(IMAGE, slice_by_slice=True)
    assert calls == [2, 2]  # first slice, then its retry


@pytest.mark.requires("torch")
def test_cleanup_runs_between_attempts() -> None:
    import torch

    calls = []

    @mt.torch
    def f(image: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated on the host)")
        return image

    np.testing.assert_array_equal(host(f(IMAGE)), IMAGE)
    assert len(calls) == 2


# -- GPU out-of-memory (needs a CUDA GPU) -------------------------------------------------


@pytest.mark.gpu
@pytest.mark.requires("torch")
def test_gpu_oom_on_the_whole_stack_of_a_separable_function_runs_slice_by_slice() -> None:
    torch = importlib.import_module("torch")
    total = torch.cuda.get_device_properties(0).total_memory
    per_element = int(total * 2 / 16 / 4)  # whole stack: 2x the GPU; one slice: 1/8

    @mt.torch(slice_separable=True)
    def f(image: Any) -> Any:
        temp = torch.ones(image.shape[0] if image.ndim == 3 else 1, per_element,
                          device=image.device)
        return image + temp.mean()

    image = np.zeros((16, 1, 1), np.float32)
    with pytest.warns(OOMRecoveryWarning, match="slice by slice"):
        out = f(image, gpu_id=0)
    assert out.device.type == "cuda"
    np.testing.assert_array_equal(host(out), image + 1)


@pytest.mark.gpu
@pytest.mark.requires("torch")
def test_gpu_oom_falls_back_to_cpu_only_when_asked() -> None:
    torch = importlib.import_module("torch")
    total = torch.cuda.get_device_properties(0).total_memory

    @mt.torch(contract=2)
    def f(image: Any) -> Any:
        if image.device.type == "cuda":
            torch.empty(total, dtype=torch.uint8, device=image.device)  # never fits
        return image + 1

    image = np.zeros((4, 4), np.float32)
    with pytest.raises(torch.OutOfMemoryError):
        f(image, gpu_id=0)
    with pytest.warns(OOMRecoveryWarning, match="on the CPU"):
        out = f(image, gpu_id=0, oom_fallback="cpu")
    assert isinstance(out, torch.Tensor) and out.device.type == "cpu"
    np.testing.assert_array_equal(host(out), image + 1)


# -- every retry stage sees the caller's original values (issue 12 item 2) ----------------


def _doubles_then_oom_once() -> tuple[list[int], Any]:
    """A torch function that writes its input in place, then runs out of memory once."""
    import torch

    calls: list[int] = []

    def f(image: Any) -> Any:
        image.mul_(2)
        calls.append(1)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("first attempt")
        return image

    return calls, f


@pytest.mark.requires("torch")
def test_retry_after_a_write_to_the_callers_tensor_is_refused() -> None:
    import torch

    calls, f = _doubles_then_oom_once()
    caller = torch.ones(2, 3, 4)
    with pytest.raises(mt.errors.InputWriteError, match="copy_inputs=True") as info:
        mt.torch(f)(caller)
    assert isinstance(info.value.__cause__, torch.OutOfMemoryError)
    assert calls == [1]  # never retried on the modified values


@pytest.mark.requires("torch")
def test_retry_with_copy_inputs_sees_the_original_values() -> None:
    import torch

    calls, f = _doubles_then_oom_once()
    caller = torch.ones(2, 3, 4)
    out = mt.torch(copy_inputs=True)(f)(caller)
    assert calls == [1, 1]
    np.testing.assert_array_equal(host(out), np.full((2, 3, 4), 2.0, np.float32))
    np.testing.assert_array_equal(host(caller), np.ones((2, 3, 4), np.float32))


@pytest.mark.requires("torch")
def test_retry_converts_the_callers_arguments_again() -> None:
    calls, f = _doubles_then_oom_once()
    caller = np.ones((2, 3, 4), np.float32)
    caller.setflags(write=False)  # torch gets a fresh copy: written, then made again
    out = mt.torch(output_type="numpy")(f)(caller)
    assert calls == [1, 1]
    np.testing.assert_array_equal(out, np.full((2, 3, 4), 2.0, np.float32))


@pytest.mark.requires("torch")
def test_retry_without_a_write_reuses_the_callers_tensor() -> None:
    import torch

    seen: list[Any] = []

    @mt.torch
    def f(image: Any) -> Any:
        seen.append(image)
        if len(seen) == 1:
            raise torch.OutOfMemoryError("first attempt")
        return image * 2

    caller = torch.ones(2, 3, 4)
    np.testing.assert_array_equal(host(f(caller)), np.full((2, 3, 4), 2.0, np.float32))
    assert seen[0] is caller and seen[1] is caller  # no copy on any path


@pytest.mark.requires("torch")
def test_write_in_a_later_stage_is_refused_too() -> None:
    import torch

    calls: list[int] = []

    @mt.torch
    def f(image: Any) -> Any:
        calls.append(image.ndim)
        if len(calls) == 2:
            image.add_(1)  # the plain retry writes, then fails: no slice-by-slice stage
        raise torch.OutOfMemoryError(f"attempt {len(calls)}")

    with pytest.raises(mt.errors.InputWriteError, match="ran out of memory"):
        f(torch.ones(2, 3, 4))
    assert calls == [3, 3]


def test_oom_recovery_as_a_call_time_option() -> None:
    @mt.numpy
    def f(image: np.ndarray) -> np.ndarray:
        raise MemoryError("no")

    with pytest.raises(MemoryError, match="no"):
        f(IMAGE, oom_recovery=False)
    assert mt.numpy(oom_recovery=False)(lambda x: x)(IMAGE).shape == IMAGE.shape
