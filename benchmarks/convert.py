"""Conversion benchmark: memtype.convert vs the best direct framework call vs arraybridge.

For every ordered pair of the memory types usable here and sizes 1 KiB, 1 MiB, 64 MiB and
256 MiB (float32, C-contiguous, 64-byte aligned), the median time of

* ``memtype.convert(x, target)``,
* the best direct framework call for that pair (zero-copy where one exists),
* ``arraybridge.convert_memory`` (arraybridge 0.5.2, the peer extracted from OpenHCS),

and whether memtype's result shares memory with its source. Writes a Markdown report and a
heatmap PNG. Run: ``python benchmarks/convert.py [--sizes 1KiB 1MiB] [--repeats 7]``.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import torch  # noqa: E402,F401  (import order: torch and pyclesperanto before tensorflow)

try:
    import pyclesperanto  # noqa: F401
except ImportError:
    pass
import numpy as np  # noqa: E402

import memtype as mt  # noqa: E402
from memtype._bench import (  # noqa: E402
    Cell,
    heatmap,
    median_seconds,
    parse_size,
    source_array,
    usable_types,
)

OUT = Path(__file__).resolve().parent / "results"


def _direct_calls() -> dict[tuple[str, str], Callable[[Any], Any]]:
    """The best direct call per ordered pair (what a user would write by hand)."""
    import jax
    import jax.numpy as jnp
    import tensorflow as tf

    # Host arrays enter JAX by jax.device_put (zero-copy for 64-byte-aligned buffers), as in
    # memtype: jax.dlpack.from_dlpack of a host array donates it to XLA, which frees it on a
    # worker thread where NumPy's and TensorFlow's deleters take the GIL (an abort at exit).
    calls: dict[tuple[str, str], Callable[[Any], Any]] = {
        ("numpy", "torch"): torch.from_numpy,
        ("numpy", "jax"): jax.device_put,
        ("numpy", "tensorflow"): lambda a: tf.experimental.dlpack.from_dlpack(a.__dlpack__()),
        ("torch", "numpy"): lambda t: t.numpy(),
        ("torch", "jax"): lambda t: jax.device_put(t.numpy()),
        ("torch", "tensorflow"): lambda t: tf.experimental.dlpack.from_dlpack(t.__dlpack__()),
        ("jax", "numpy"): np.asarray,
        ("jax", "torch"): torch.from_dlpack,
        ("jax", "tensorflow"): lambda j: tf.experimental.dlpack.from_dlpack(j.__dlpack__()),
        ("tensorflow", "numpy"): np.asarray,
        ("tensorflow", "torch"): torch.from_dlpack,
        ("tensorflow", "jax"): lambda t: jax.device_put(t.numpy()),
    }
    if "pyclesperanto" in usable_types():
        import pyclesperanto as cle

        host_of = {"numpy": lambda a: a, "torch": lambda t: t.numpy(), "jax": np.asarray,
                   "tensorflow": np.asarray}
        for src, fn in host_of.items():
            calls[(src, "pyclesperanto")] = lambda x, fn=fn: cle.push(fn(x))
        calls[("pyclesperanto", "numpy")] = lambda c: c.get()
        calls[("pyclesperanto", "torch")] = lambda c: torch.from_numpy(c.get())
        calls[("pyclesperanto", "jax")] = lambda c: jnp.asarray(c.get())
        calls[("pyclesperanto", "tensorflow")] = lambda c: tf.convert_to_tensor(c.get())
    if "mlx" in usable_types():
        import mlx.core as mx

        host_of = {"numpy": lambda a: a, "torch": lambda t: t.numpy(), "jax": np.asarray,
                   "tensorflow": np.asarray}
        for src, fn in host_of.items():  # MLX copies every import (mx.array or from_dlpack)
            calls[(src, "mlx")] = lambda x, fn=fn: mx.array(fn(x))
        calls[("mlx", "numpy")] = np.asarray  # NumPy's view of the MLX buffer
        calls[("mlx", "torch")] = torch.from_dlpack
        calls[("mlx", "jax")] = lambda m: jnp.asarray(np.asarray(m))
        calls[("mlx", "tensorflow")] = lambda m: tf.convert_to_tensor(np.asarray(m))
    return calls


def _arraybridge() -> Callable[[Any, str, str], Any] | None:
    """arraybridge's convert_memory bound to a device that works for the pair, or None."""
    try:
        from arraybridge import convert_memory
        from arraybridge.devices import HOST, AcceleratorDevice
    except ImportError:
        return None

    def call(x: Any, source: str, target: str) -> Any:
        device = AcceleratorDevice(0) if target == "pyclesperanto" else HOST
        return convert_memory(x, source, target, device)

    return call


def _time(fn: Callable[[], Any], nbytes: int, repeats: int) -> float:
    number = 300 if nbytes <= 2**12 else 30 if nbytes <= 2**22 else 1
    try:
        return median_seconds(fn, repeats, number)
    except Exception as exc:  # noqa: BLE001 - a peer failing on a pair is a result, recorded as n/a
        print(f"    failed: {type(exc).__name__}: {str(exc)[:100]}", file=sys.stderr)
        return float("nan")


def _fmt(s: float) -> str:
    if s != s:
        return "n/a"
    return f"{s * 1e6:.1f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def _ratio(a: float, b: float) -> str:
    return "n/a" if a != a or b != b or b == 0 else f"{a / b:.2f}x"


def run(sizes: list[str], repeats: int, only: list[str] | None = None) -> str:
    types = usable_types()
    direct = _direct_calls()
    peer = _arraybridge()
    rows, cells = [], []
    for label in sizes:
        nbytes = parse_size(label)
        for s in types:
            x = source_array(nbytes, s)
            for t in types:
                if only and s not in only and t not in only:
                    continue
                out = mt.convert(x, t)
                zero = mt.shares_memory(x, out)
                del out
                ours = _time(functools.partial(mt.convert, x, t), nbytes, repeats)
                fn = direct.get((s, t), (lambda y: y) if s == t else None)
                best = _time(functools.partial(fn, x), nbytes, repeats) if fn else float("nan")
                theirs = (_time(functools.partial(peer, x, s, t), nbytes, repeats) if peer
                          else float("nan"))
                rows.append((label, s, t, ours, best, theirs, zero))
                cells.append(Cell(s, t, nbytes, ours, zero))
                print(f"{label:>6} {s:>13} -> {t:<13} memtype {_fmt(ours):>10}  "
                      f"direct {_fmt(best):>10}"
                      f"  arraybridge {_fmt(theirs):>10}  zero-copy={zero}", file=sys.stderr)
    OUT.mkdir(exist_ok=True)
    if not only:  # the heatmap needs every pair
        heatmap(cells, types, [parse_size(s) for s in sizes], str(OUT / "convert_heatmap.png"))
    return _report(rows, types)


def _summary(rows: list[tuple[Any, ...]]) -> list[str]:
    """Per size: overhead over the direct call on zero-copy pairs, and the ratio to arraybridge."""
    lines = ["| size | zero-copy pairs | overhead vs direct: median / max | "
             "memtype / arraybridge (all pairs it ran): median / max |", "|---|---|---|---|"]
    for label in dict.fromkeys(r[0] for r in rows):
        sized = [r for r in rows if r[0] == label and r[1] != r[2]]
        over = sorted((r[3] - r[4]) * 1e6 for r in sized if r[6] and r[4] == r[4])
        ratio = sorted(r[3] / r[5] for r in sized if r[5] == r[5] and r[5] > 0)
        if not over or not ratio:
            continue
        lines.append(f"| {label} | {len(over)} | "
                     f"{over[len(over) // 2]:+.1f} µs / {over[-1]:+.1f} µs | "
                     f"{ratio[len(ratio) // 2]:.2f}x / {ratio[-1]:.2f}x |")
    return lines + [""]


def _report(rows: list[tuple[Any, ...]], types: list[str]) -> str:
    lines = [
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, no GPU; "
        f"Python {platform.python_version()}, numpy {np.__version__}, torch {torch.__version__}; "
        f"date {datetime.date.today().isoformat()}.",
        "",
        *_summary(rows),
        "| size | from | to | memtype | best direct | arraybridge | memtype - direct "
        "| memtype / arraybridge | zero-copy |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, s, t, ours, best, theirs, zero in rows:
        over = "n/a" if best != best else f"{(ours - best) * 1e6:+.1f} µs"
        lines.append(f"| {label} | {s} | {t} | {_fmt(ours)} | {_fmt(best)} | {_fmt(theirs)} | "
                     f"{over} | {_ratio(ours, theirs)} | {'yes' if zero else 'no'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["1KiB", "1MiB", "64MiB", "256MiB"])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", nargs="+", default=None,
                        help="only pairs from or to these types (report: convert_<types>.md)")
    args = parser.parse_args()
    report = run(args.sizes, args.repeats, args.only)
    OUT.mkdir(exist_ok=True)
    name = "convert" + ("_" + "_".join(args.only) if args.only else "") + ".md"
    (OUT / name).write_text(report + "\n")
    print(report)


if __name__ == "__main__":
    main()
