"""Build and run one small OpenCL kernel on every device a loader enumerates; run as
``python -m memtype.frameworks._opencl_probe LOADER`` in a child process.

Prints one JSON object: ``{"devices": [...], "working": [...], "error": "..."}``, where
``devices`` names every device found, ``working`` those that compiled the kernel and
computed the right values, and ``error`` the first failure in the runtime's own words (the
compiler's ``error:`` line of the build log where there is one). A runtime that lists a
device but cannot compile (pocl 3.0 on a CPU newer than its LLVM) is told apart from one
that works. Run apart from the caller so that a broken driver cannot crash it and the
caller's loader stays uninitialised (see :mod:`memtype.frameworks._opencl`).
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any

_ALL_DEVICES = 0xFFFFFFFF  # CL_DEVICE_TYPE_ALL
_DEVICE_NAME = 0x102B  # CL_DEVICE_NAME
_BUILD_LOG = 0x1183  # CL_PROGRAM_BUILD_LOG
_READ_WRITE_COPY = 0x1 | 0x20  # CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR
_SIZE = 16
_SOURCE = (b"__kernel void twice_plus_one(__global float* a) {"
           b" size_t i = get_global_id(0); a[i] = a[i] * 2.0f + 1.0f; }")

_p = ctypes.c_void_p
_i = ctypes.c_int32


class ProbeFailure(Exception):
    """One step of the probe failed; the message is what the runtime said."""


def _declare(lib: Any) -> None:
    """The argument and result types of the OpenCL entry points the probe calls."""
    size, u32, u64 = ctypes.c_size_t, ctypes.c_uint32, ctypes.c_uint64
    err = ctypes.POINTER(_i)
    table: dict[str, tuple[Any, list[Any]]] = {
        "clGetPlatformIDs": (_i, [u32, _p, ctypes.POINTER(u32)]),
        "clGetDeviceIDs": (_i, [_p, u64, u32, _p, ctypes.POINTER(u32)]),
        "clGetDeviceInfo": (_i, [_p, u32, size, _p, ctypes.POINTER(size)]),
        "clCreateContext": (_p, [_p, u32, _p, _p, _p, err]),
        "clCreateCommandQueue": (_p, [_p, _p, u64, err]),
        "clCreateProgramWithSource": (_p, [_p, u32, ctypes.POINTER(ctypes.c_char_p), _p, err]),
        "clBuildProgram": (_i, [_p, u32, _p, ctypes.c_char_p, _p, _p]),
        "clGetProgramBuildInfo": (_i, [_p, _p, u32, size, _p, ctypes.POINTER(size)]),
        "clCreateKernel": (_p, [_p, ctypes.c_char_p, err]),
        "clCreateBuffer": (_p, [_p, u64, size, _p, err]),
        "clSetKernelArg": (_i, [_p, u32, size, _p]),
        "clEnqueueNDRangeKernel": (_i, [_p, _p, u32, _p, ctypes.POINTER(size), _p, u32, _p, _p]),
        "clEnqueueReadBuffer": (_i, [_p, _p, u32, size, size, _p, u32, _p, _p]),
        "clFinish": (_i, [_p]),
    }
    for name, (restype, argtypes) in table.items():
        func = getattr(lib, name)
        func.restype, func.argtypes = restype, argtypes


def _check(status: int, what: str) -> None:
    """ProbeFailure naming ``what`` unless ``status`` is CL_SUCCESS (0)."""
    if status != 0:
        raise ProbeFailure(f"{what} failed (OpenCL status {status})")


def _devices(lib: Any) -> list[int]:
    """Every device of every platform the loader enumerates."""
    count = ctypes.c_uint32(0)
    if lib.clGetPlatformIDs(0, None, ctypes.byref(count)) != 0 or count.value == 0:
        return []
    platforms = (_p * count.value)()
    _check(lib.clGetPlatformIDs(count.value, platforms, None), "clGetPlatformIDs")
    found: list[int] = []
    for platform in platforms:
        n = ctypes.c_uint32(0)
        if lib.clGetDeviceIDs(platform, _ALL_DEVICES, 0, None, ctypes.byref(n)) != 0:
            continue
        ids = (_p * n.value)()
        if n.value and lib.clGetDeviceIDs(platform, _ALL_DEVICES, n.value, ids, None) == 0:
            found += [int(d) for d in ids if d]
    return found


def _text(getter: Any, *args: Any) -> str:
    """A string-valued OpenCL info query."""
    size = ctypes.c_size_t(0)
    if getter(*args, 0, None, ctypes.byref(size)) != 0 or size.value == 0:
        return ""
    buf = ctypes.create_string_buffer(size.value)
    getter(*args, size.value, buf, None)
    return buf.value.decode(errors="replace").strip()


def compiler_words(log: str) -> str:
    """The line of a build log that says what went wrong (its first ``error:`` line)."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower():
            return line
    return lines[0] if lines else ""


def _run_kernel(lib: Any, device: int) -> None:
    """Build the kernel for ``device``, run it on 16 floats and check the values."""
    err = _i(0)
    dev = _p(device)
    ctx = lib.clCreateContext(None, 1, ctypes.byref(dev), None, None, ctypes.byref(err))
    _check(err.value, "clCreateContext")
    queue = lib.clCreateCommandQueue(ctx, dev, 0, ctypes.byref(err))
    _check(err.value, "clCreateCommandQueue")
    source = ctypes.c_char_p(_SOURCE)
    program = lib.clCreateProgramWithSource(ctx, 1, ctypes.byref(source), None,
                                            ctypes.byref(err))
    _check(err.value, "clCreateProgramWithSource")
    status = lib.clBuildProgram(program, 1, ctypes.byref(dev), b"", None, None)
    if status != 0:
        log = _text(lib.clGetProgramBuildInfo, program, dev, _BUILD_LOG)
        raise ProbeFailure(compiler_words(log) or f"clBuildProgram failed (status {status})")
    kernel = lib.clCreateKernel(program, b"twice_plus_one", ctypes.byref(err))
    _check(err.value, "clCreateKernel")
    data = (ctypes.c_float * _SIZE)(*range(_SIZE))
    nbytes = ctypes.sizeof(data)
    buf = lib.clCreateBuffer(ctx, _READ_WRITE_COPY, nbytes, data, ctypes.byref(err))
    _check(err.value, "clCreateBuffer")
    handle = _p(buf)
    _check(lib.clSetKernelArg(kernel, 0, ctypes.sizeof(handle), ctypes.byref(handle)),
           "clSetKernelArg")
    work = ctypes.c_size_t(_SIZE)
    _check(lib.clEnqueueNDRangeKernel(queue, kernel, 1, None, ctypes.byref(work), None, 0,
                                      None, None), "clEnqueueNDRangeKernel")
    out = (ctypes.c_float * _SIZE)()
    _check(lib.clEnqueueReadBuffer(queue, buf, 1, 0, nbytes, out, 0, None, None),
           "clEnqueueReadBuffer")
    lib.clFinish(queue)
    if list(out) != [2.0 * v + 1.0 for v in range(_SIZE)]:
        raise ProbeFailure("the kernel ran but computed wrong values")


def probe(loader: str) -> dict[str, Any]:
    """What the runtime(s) behind ``loader`` can do: devices, working devices, first error."""
    lib = ctypes.CDLL(loader)
    _declare(lib)
    result: dict[str, Any] = {"devices": [], "working": [], "error": ""}
    for device in _devices(lib):
        name = _text(lib.clGetDeviceInfo, _p(device), _DEVICE_NAME) or "unnamed device"
        result["devices"].append(name)
        try:
            _run_kernel(lib, device)
        except ProbeFailure as exc:
            result["error"] = result["error"] or f"{name}: {exc}"
            continue
        result["working"].append(name)
    return result


def main(argv: list[str]) -> int:
    """Print the probe's JSON for the loader named in ``argv[1]``."""
    if len(argv) != 2:
        print("usage: python -m memtype.frameworks._opencl_probe LIBOPENCL", file=sys.stderr)
        return 2
    print(json.dumps(probe(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
