"""GPU validation, check 6 of issue 7 (run with ``pytest -m gpu``; skipped without a GPU).

* A ``TieredStore`` with a VRAM tier spills over-budget torch and CuPy arrays to host memory
  (or to disk) and gives them back bit-identical, of the same type, on the same GPU.
* A pipeline of three GPU steps — torch, then CuPy, then JAX — moves nothing through host
  memory between its steps (counted with memtype's conversion hooks: only the load and the
  final write touch the host), and writes what the same pipeline written in NumPy writes.
  The real ``Pipeline`` runs, on the inline executor, reading from a ``MemoryStore`` and
  writing ``.npy`` files (``output_format="tiff"`` names files by the pattern), so it needs
  neither zarr nor tifffile.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.conversion import ConversionEvent, add_conversion_hook, remove_conversion_hook
from memtype.frameworks import Device, load_adapter
from memtype.pipeline import ExecutionOptions, FunctionStep, Pipeline
from memtype.storage import MemoryStore, TieredStore
from tests.gpu_validation_support import (
    GPU_IDS,
    native_device,
    on_gpu,
    release_gpu_memory,
    require,
)

pytestmark = pytest.mark.gpu

MIB = 1 << 20
ENTRY = 16 * MIB


@pytest.fixture(autouse=True)
def _release() -> Iterator[None]:
    """Each test starts and ends with the frameworks' caches emptied."""
    release_gpu_memory()
    yield
    release_gpu_memory()


# -- TieredStore: spill and reload ------------------------------------------------------------


def _bits(x: Any) -> np.ndarray[Any, Any]:
    """The raw 32-bit patterns (uint32) of a float32 GPU array, read back by its framework."""
    if mt.detect_memory_type(x) is mt.MemoryType.TORCH:
        import torch

        return np.array(x.view(torch.int32).cpu().numpy()).view(np.uint32)
    return np.array(x.view("uint32").get())


@pytest.mark.parametrize("gpu_id", GPU_IDS, ids=lambda i: f"gpu{i}")
@pytest.mark.parametrize("tier", ["host", "disk"])
@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_spilled_arrays_come_back_bit_identical(framework: str, tier: str, gpu_id: int,
                                                tmp_path: Path) -> None:
    require(framework)
    store = TieredStore(
        budget_bytes=3 * ENTRY // 2, pressure=lambda gpu: 0.0,  # only the budget decides
        host_budget_bytes=0 if tier == "disk" else None,
        spill_dir=tmp_path / "spill" if tier == "disk" else None)
    rng = np.random.default_rng(gpu_id)
    patterns = [rng.integers(0, 2**32, ENTRY // 4, dtype=np.uint32) for _ in range(3)]
    for i, bits in enumerate(patterns):  # every bit pattern: NaN payloads, -0.0, subnormals
        store.save(on_gpu(framework, bits.view(np.float32), gpu_id), f"e{i}")
    assert [store.tier_of(f"e{i}") for i in range(3)] == [tier, tier, "device"]
    stats = store.stats()
    assert (stats.spills_to_host, stats.spills_to_disk) == ((2, 0) if tier == "host" else (0, 2))
    for i, bits in enumerate(patterns):
        out = store.load(f"e{i}")
        assert mt.detect_memory_type(out).value == framework
        assert native_device(out) == load_adapter(framework).device_of(out)
        assert native_device(out) == Device("cuda", gpu_id)
        np.testing.assert_array_equal(_bits(out), bits)
    assert store.stats().reloads >= 2


# -- a pipeline of three GPU steps ------------------------------------------------------------


@mt.torch
def scale_torch(stack: Any) -> Any:
    """Step 1 on the GPU: ``2 x + 1`` in float32 (exact for 12-bit integers in int16)."""
    return stack.float() * 2.0 + 1.0


@mt.cupy
def offset_cupy(stack: Any) -> Any:
    """Step 2 on the GPU: subtract each plane's minimum."""
    return stack - stack.min(axis=(1, 2), keepdims=True)


@mt.jax
def project_jax(stack: Any) -> Any:
    """Step 3 on the GPU: maximum projection."""
    return stack.max(axis=0, keepdims=True)


@mt.numpy
def scale_numpy(stack: Any) -> Any:
    """Step 1 on the CPU."""
    return stack.astype(np.float32) * np.float32(2.0) + np.float32(1.0)


@mt.numpy
def offset_numpy(stack: Any) -> Any:
    """Step 2 on the CPU."""
    return stack - stack.min(axis=(1, 2), keepdims=True)


@mt.numpy
def project_numpy(stack: Any) -> Any:
    """Step 3 on the CPU."""
    return stack.max(axis=0, keepdims=True)


PATTERN = "{well}_z{z}.npy"
WELLS, PLANES, SIDE = ("A01", "B02"), 4, 256
GPU_TYPES = {"cupy", "torch", "jax"}


def _plate() -> tuple[MemoryStore, dict[str, np.ndarray[Any, Any]]]:
    """Input images (12-bit values in int16) in a MemoryStore, and each well's stack."""
    rng = np.random.default_rng(7)
    store, stacks = MemoryStore(), {}
    for well in WELLS:
        stacks[well] = rng.integers(0, 4096, (PLANES, SIDE, SIDE), dtype=np.int16)
        for z in range(PLANES):
            store.save(stacks[well][z], f"{well}_z{z + 1}.npy")
    return store, stacks


def _run(steps: list[Any], source: MemoryStore, output: Path) -> list[ConversionEvent]:
    """Run a three-step pipeline inline; the conversions it made, in order."""
    events: list[ConversionEvent] = []
    pipeline = Pipeline(
        [FunctionStep(steps[0], dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT),
         FunctionStep(steps[1]), FunctionStep(steps[2])],
        pattern=PATTERN, output_format="tiff")
    add_conversion_hook(events.append)
    try:
        report = pipeline.run(source, output, executor="inline",
                              execution=ExecutionOptions(progress=False))
    finally:
        remove_conversion_hook(events.append)
    report.raise_for_failures()
    return events


def _written(output: Path) -> dict[str, np.ndarray[Any, Any]]:
    """The final images a run wrote, by file name."""
    return {p.name: np.load(p) for p in sorted((output / "images").glob("*.npy"))}


def test_three_gpu_steps_move_nothing_through_host_memory(tmp_path: Path) -> None:
    for name in ("torch", "cupy", "jax"):
        require(name)
    assert mt.gpu.memory_pressure(0) < 0.9, "GPU 0 is too full: the store would spill"
    source, stacks = _plate()
    events = _run([scale_torch, offset_cupy, project_jax], source, tmp_path / "gpu")

    pairs = Counter((e.source_type, e.target_type) for e in events)
    between = [e for e in events if {e.source_type, e.target_type} <= GPU_TYPES]
    assert pairs[("torch", "cupy")] >= len(WELLS) and pairs[("cupy", "jax")] >= len(WELLS), pairs
    assert all(e.zero_copy for e in between), [e for e in between if not e.zero_copy]
    through_host = [e for e in events if "numpy" in (e.source_type, e.target_type)]
    assert {(e.source_type, e.target_type) for e in through_host} == {
        ("numpy", "torch"), ("jax", "numpy")}, pairs
    loaded = sum(e.nbytes for e in through_host if e.source_type == "numpy")
    written = sum(e.nbytes for e in through_host if e.target_type == "numpy")
    assert loaded == sum(s.nbytes for s in stacks.values())  # each image loaded once
    assert written == len(WELLS) * SIDE * SIDE * 4  # each float32 projection written once

    gpu = _written(tmp_path / "gpu")
    _run([scale_numpy, offset_numpy, project_numpy], source, tmp_path / "cpu")
    cpu = _written(tmp_path / "cpu")
    assert sorted(gpu) == sorted(cpu) == [f"{w}_z1.npy" for w in WELLS]
    for name, image in cpu.items():
        assert image.dtype == gpu[name].dtype == np.float32
        np.testing.assert_array_equal(gpu[name], image)
    for well, stack in stacks.items():  # the CPU pipeline itself, recomputed by hand
        x = stack.astype(np.float32) * 2 + 1
        expected = (x - x.min(axis=(1, 2), keepdims=True)).max(axis=0)
        np.testing.assert_array_equal(cpu[f"{well}_z1.npy"], expected)
