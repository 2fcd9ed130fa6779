"""pyclesperanto's out-of-memory errors are recognised by origin, never by message text alone.

pyclesperanto raises a plain RuntimeError for every OpenCL failure; memtype counts one as
out-of-memory only when pyclesperanto's own code raised it with an OpenCL out-of-memory
status. A RuntimeError of torch (or of the caller) that mentions such a status is not one.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.gpu.oom import is_oom_error

pytestmark = [pytest.mark.requires("pyclesperanto"), pytest.mark.opencl]


def _pyclesperanto_error() -> RuntimeError:
    """A real error raised inside pyclesperanto: a buffer larger than any device allows."""
    import pyclesperanto as cle

    try:
        cle.create((65536, 65536, 1024), dtype=np.float32)  # 16 TiB: refused before allocating
    except RuntimeError as exc:
        return exc
    raise AssertionError("pyclesperanto created a 16 TiB buffer")


@pytest.mark.requires("torch")
def test_runtime_error_of_torch_mentioning_an_opencl_status_is_not_retried() -> None:
    torch = importlib.import_module("torch")
    mt.convert(np.ones((2, 2), np.float32), "pyclesperanto")  # pyclesperanto is loaded
    calls = []

    @mt.torch(contract="any")
    def f(x: Any) -> Any:
        calls.append(1)
        torch.ones(1).add_(x.sum())  # a real torch call first
        raise RuntimeError("log mentions CL_OUT_OF_RESOURCES")

    with pytest.raises(RuntimeError, match="log mentions"):
        f(np.ones((2, 2), np.float32))
    assert len(calls) == 1


def test_callers_runtime_error_in_pyclesperanto_format_is_not_oom() -> None:
    mt.convert(np.ones((2, 2), np.float32), "pyclesperanto")
    try:
        raise RuntimeError("Error: Failed to allocate buffer memory. OpenCL error: "
                           "CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)")
    except RuntimeError as exc:
        assert not is_oom_error(exc)


def test_real_pyclesperanto_error_that_is_not_oom() -> None:
    exc = _pyclesperanto_error()
    assert str(exc).endswith("CL_INVALID_BUFFER_SIZE (-61)")  # the format memtype reads
    assert not is_oom_error(exc)


@pytest.mark.parametrize("status", ["CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)",
                                    "CL_OUT_OF_RESOURCES (-5)", "CL_OUT_OF_HOST_MEMORY (-6)"])
def test_pyclesperanto_out_of_memory_status_is_oom(status: str) -> None:
    # pocl cannot report a failed allocation (it segfaults), so the status is put on an error
    # carrying the traceback of a real one raised inside pyclesperanto
    real = _pyclesperanto_error()
    exc = RuntimeError(f"Error: Failed to allocate buffer memory. OpenCL error: {status}")
    assert is_oom_error(exc.with_traceback(real.__traceback__))
    assert not is_oom_error(exc.with_traceback(None))
