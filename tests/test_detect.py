from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.frameworks import iter_frameworks
from tests.frameworks import available_types, type_params
from tests.helpers import aligned


@pytest.mark.parametrize("name", type_params())
def test_detects_each_type(name: str) -> None:
    x = mt.convert(aligned(np.ones((2, 3), np.float32)), name)
    assert mt.detect_memory_type(x) is mt.MemoryType(name)


def _not_arrays() -> list[tuple[str, Any]]:
    plain: list[tuple[str, Any]] = [
        ("np.dtype", np.dtype("f4")),
        ("np.float32 type", np.float32),
        ("numpy scalar", np.float32(1.0)),
        ("numpy int scalar", np.int64(3)),
        ("python float", 1.5),
        ("python int", 3),
        ("list", [1, 2, 3]),
        ("tuple", (1, 2)),
        ("None", None),
        ("string", "array"),
        ("rng", np.random.default_rng(0)),
        ("numpy module", np),
    ]
    if importlib.util.find_spec("torch") is None:
        return plain
    import torch

    return plain + [
        ("torch.float32", torch.float32),
        ("torch.device", torch.device("cpu")),
        ("torch.nn.Linear", torch.nn.Linear(2, 2)),
        ("torch.Size", torch.Size([2, 3])),
        ("torch module", torch),
    ]


@pytest.mark.parametrize("label,obj", _not_arrays(), ids=[n for n, _ in _not_arrays()])
def test_rejects_non_arrays(label: str, obj: Any) -> None:
    with pytest.raises(mt.UnsupportedArrayError) as info:
        mt.detect_memory_type(obj)
    assert isinstance(info.value, TypeError)
    assert type(obj).__qualname__ in str(info.value)


@pytest.mark.requires("jax")
def test_rejects_framework_non_arrays() -> None:
    import jax
    import tensorflow as tf

    for obj in (jax.numpy.float32, jax.devices()[0], tf.float32, tf.TensorShape([2])):
        with pytest.raises(mt.UnsupportedArrayError):
            mt.detect_memory_type(obj)


@pytest.mark.requires("torch")
def test_subclasses_and_0d() -> None:
    import torch

    assert mt.detect_memory_type(np.ma.masked_array([1, 2])) is mt.MemoryType.NUMPY
    assert mt.detect_memory_type(np.array(3.0)) is mt.MemoryType.NUMPY
    assert mt.detect_memory_type(torch.nn.Parameter(torch.ones(2))) is mt.MemoryType.TORCH
    assert mt.detect_memory_type(torch.tensor(1.0)) is mt.MemoryType.TORCH


@pytest.mark.requires("tensorflow")
def test_tensorflow_variable_is_tensorflow() -> None:
    import tensorflow as tf

    assert mt.detect_memory_type(tf.Variable([1.0, 2.0])) is mt.MemoryType.TENSORFLOW


_PROBE = """
import json, os, sys
before = dict(os.environ)
import memtype, memtype.gpu, memtype.frameworks, memtype.conversion, memtype.stack
import numpy as np
memtype.detect_memory_type(np.zeros(2))
heavy = [m for m in ("torch", "jax", "tensorflow", "cupy", "pyclesperanto") if m in sys.modules]
changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))
print(json.dumps({"heavy": heavy, "env": changed}))
"""


def test_import_loads_no_framework_and_sets_no_environment() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         check=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"heavy": [], "env": []}


def test_every_row_resolves_its_array_types() -> None:
    from memtype.frameworks import array_types

    for fw in iter_frameworks():
        if fw.name in available_types():
            assert array_types(fw), fw.name
