"""Count OpenCL devices through a given ICD loader; run as ``python -m`` in a child process.

Prints the number of devices of all platforms (0 when the loader finds none). Run apart
from the caller so that a broken driver cannot crash it and the caller's loader stays
uninitialised (see :mod:`memtype.frameworks._opencl`).
"""

from __future__ import annotations

import ctypes
import sys

_ALL_DEVICES = 0xFFFFFFFF  # CL_DEVICE_TYPE_ALL


def count_devices(loader: str) -> int:
    """Devices of every platform the loader at ``loader`` enumerates."""
    lib = ctypes.CDLL(loader)
    count = ctypes.c_uint(0)
    if lib.clGetPlatformIDs(0, None, ctypes.byref(count)) != 0 or count.value == 0:
        return 0
    platforms = (ctypes.c_void_p * count.value)()
    if lib.clGetPlatformIDs(count.value, platforms, None) != 0:
        return 0
    total = 0
    for platform in platforms:
        found = ctypes.c_uint(0)
        status = lib.clGetDeviceIDs(ctypes.c_void_p(platform), ctypes.c_ulonglong(_ALL_DEVICES),
                                    0, None, ctypes.byref(found))
        if status == 0:
            total += found.value
    return total


def main(argv: list[str]) -> int:
    """Print the device count for the loader named in ``argv[1]``."""
    if len(argv) != 2:
        print("usage: python -m memtype.frameworks._opencl_probe LIBOPENCL", file=sys.stderr)
        return 2
    print(count_devices(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
