"""Shared fixtures. Import order matters: torch and pyclesperanto before tensorflow
(the pocl OpenCL runtime segfaults when pyclesperanto is imported after tensorflow)."""

from __future__ import annotations

import importlib.util
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

for _name in ("torch", "pyclesperanto", "jax", "tensorflow"):  # order is the workaround
    if importlib.util.find_spec(_name) is not None:
        importlib.import_module(_name)

import pytest  # noqa: E402

from tests.frameworks import available_types, has_gpu  # noqa: E402


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=available_types(), ids=str)
def memory_type(request: pytest.FixtureRequest) -> str:
    """Each memory type usable on this machine (installed, with a device)."""
    return str(request.param)
