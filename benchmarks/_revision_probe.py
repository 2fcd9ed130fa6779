"""One round of benchmarks/compare_revisions.py: time conversions and decorated calls with
the memtype found on ``sys.path`` (the parent puts one revision's ``src`` first) and print
one JSON object ``{case: seconds per call}`` (the best of a few batches).

Not meant to be run by hand; see compare_revisions.py.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import torch  # noqa: E402  (torch before tensorflow)

import memtype as mt  # noqa: E402

BATCHES = 7
NUMPY_OFFSET = 16  # where NumPy's allocator usually puts a small array: 16 bytes past 64


def placed(a: np.ndarray, past: int = NUMPY_OFFSET) -> np.ndarray:
    """A copy of ``a`` starting ``past`` bytes after a 64-byte boundary.

    Whether a host array enters TensorFlow (and XLA) without a copy depends on its address
    (64-byte aligned: shared, else copied), and the allocator's choice differs between
    processes: pinned here so that both revisions time the same path. (memtype's own
    ``aligned_copy`` is not used: the probe also runs against revisions without it.)
    """
    raw = np.empty(a.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + past
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def per_call(fn: Callable[[], Any], budget: float = 0.02) -> float:
    """Seconds per call of ``fn``: the best of BATCHES batches of about ``budget`` each."""
    fn()
    n, start = 1, time.perf_counter()
    while time.perf_counter() - start < budget / 10:
        fn()
        n += 1
    best = float("inf")
    for _ in range(BATCHES):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def identity(x: Any) -> Any:
    return x


def cases() -> dict[str, Callable[[], Any]]:
    """Conversion and decorator cases on 1 KiB float32 arrays (overhead, not bandwidth)."""
    import jax
    import tensorflow as tf

    host = placed(np.arange(256, dtype=np.float32).reshape(1, 16, 16))  # [Z, Y, X]
    aligned = placed(host, past=0)
    t = torch.arange(256, dtype=torch.float32).reshape(1, 16, 16)
    j = jax.numpy.arange(256, dtype=jax.numpy.float32).reshape(1, 16, 16)
    tfx = tf.reshape(tf.range(256, dtype=tf.float32), (1, 16, 16))
    out: dict[str, Callable[[], Any]] = {
        "convert numpy->torch": lambda: mt.convert(host, "torch"),
        "convert torch->numpy": lambda: mt.convert(t, "numpy"),
        "convert numpy->jax": lambda: mt.convert(host, "jax"),
        "convert jax->numpy": lambda: mt.convert(j, "numpy"),
        "convert numpy->tensorflow": lambda: mt.convert(host, "tensorflow"),
        "convert numpy->jax 64-aligned": lambda: mt.convert(aligned, "jax"),
        "convert numpy->tensorflow 64-aligned": lambda: mt.convert(aligned, "tensorflow"),
        "convert torch->jax": lambda: mt.convert(t, "jax"),
        "convert numpy->numpy": lambda: mt.convert(host, "numpy"),
        "detect torch": lambda: mt.detect_memory_type(t),
    }
    deco_np, deco_torch = mt.numpy(identity), mt.torch(identity)
    deco_jax, deco_tf = mt.jax(identity), mt.tensorflow(identity)
    out |= {
        "@mt.numpy(numpy)": lambda: deco_np(host),
        "@mt.torch(torch)": lambda: deco_torch(t),
        "@mt.torch(numpy)": lambda: deco_torch(host),
        "@mt.jax(jax)": lambda: deco_jax(j),
        "@mt.tensorflow(tensorflow)": lambda: deco_tf(tfx),
        "@mt.numpy(torch)": lambda: deco_np(t),
        "@mt.numpy(jax)": lambda: deco_np(j),
        "@mt.torch(jax)": lambda: deco_torch(j),
    }
    return out | dtype_policy_cases()


def dtype_policy_cases() -> dict[str, Callable[[], Any]]:
    """Decorated calls whose float result the default dtype policy brings back to the
    input's dtype (rounded, or scaled back from [0, 1]), at 256 B and 16 MiB of input."""
    import jax

    def scale(x: Any) -> Any:
        return x * 1.5

    def unit(x: Any) -> Any:
        return x / 255.0

    def widen(x: Any) -> Any:
        return x.double() if isinstance(x, torch.Tensor) else x.astype(np.float64)

    out: dict[str, Callable[[], Any]] = {}
    for label, n in (("256B", 256), ("16MiB", 16 * 2**20)):
        u8 = placed(np.full((1, 16, n // 16), 100, np.uint8))
        f32 = placed(np.full((1, 16, n // 64), 0.5, np.float32))
        t8, j8 = torch.from_numpy(u8), jax.numpy.asarray(u8)
        deco = {"numpy": (mt.numpy(scale), mt.numpy(unit), mt.numpy(widen)),
                "torch": mt.torch(scale), "jax": mt.jax(unit)}
        out |= {
            f"policy numpy u8*1.5 {label}": _bound(deco["numpy"][0], u8),
            f"policy numpy u8/255 {label}": _bound(deco["numpy"][1], u8),
            f"policy numpy f32->f64 {label}": _bound(deco["numpy"][2], f32),
            f"policy torch u8*1.5 {label}": _bound(deco["torch"], t8),
            f"policy jax u8/255 {label}": _bound(deco["jax"], j8),
        }
    return out


def _bound(fn: Callable[[Any], Any], x: Any) -> Callable[[], Any]:
    """``fn(x)`` as a case."""
    return lambda: fn(x)


def main() -> None:
    only = set(sys.argv[1].split(",")) if len(sys.argv) > 1 and sys.argv[1] else None
    results = {name: per_call(fn) for name, fn in cases().items()
               if only is None or name in only}
    print(json.dumps({"memtype_file": mt.__file__, "results": results}))


if __name__ == "__main__":
    main()
