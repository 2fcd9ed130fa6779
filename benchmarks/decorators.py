"""Decorator benchmark: per-call overhead of memtype's decorators vs a plain call and arraybridge.

The median time of one call

* of the undecorated function (``identity``: no work, so the decorator's cost stands alone),
* through memtype's decorator (``@mt.numpy``, ``@mt.torch``...),
* through arraybridge 0.5.2's decorator of the same name (the peer extracted from OpenHCS),

timed side by side in alternating rounds (every round times one batch of each), and the
overhead (decorated minus plain). Rows: every framework usable here with an input of its own
type at 1 KiB and 256 MiB (issue 13: the overhead must not grow with the size); inputs that
reach the function's framework zero-copy (the plain call converts by hand); the opt-in copy
of ``copy_inputs=True``; the dtype policy; slice by slice. Writes
``benchmarks/results/decorators.md``.
Run: ``python benchmarks/decorators.py [--repeats 31] [--sizes 1KiB,256MiB]``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import torch  # noqa: E402  (import order: torch and pyclesperanto before tensorflow)

import memtype as mt  # noqa: E402
from memtype._bench import parse_size, usable_types  # noqa: E402
from memtype.frameworks import load_adapter  # noqa: E402

for _name in ("pyclesperanto", "jax", "tensorflow"):  # through memtype: its runtime choice
    if _name in usable_types():
        load_adapter(_name)
import numpy as np  # noqa: E402
from _decorator_cases import Case, alternating, batch_size, identity  # noqa: E402

OUT = Path(__file__).resolve().parent / "results"
TARGET_US = 2.0
Builder = Callable[[], Case]


def image(nbytes: int, memory_type: str) -> Any:
    """A 64-byte-aligned float32 ``[Z, Y, 256]`` image of ``nbytes`` in ``memory_type``."""
    from memtype.frameworks._host import aligned_copy

    n = max(nbytes // 4, 256)
    rows = n // 256
    z = 64 if rows % 64 == 0 else 1
    host = aligned_copy(np.arange(n, dtype=np.float32).reshape(z, rows // z, 256))
    return mt.convert(host, memory_type)


def _same_type(name: str, nbytes: int, ab: Any) -> Case:
    x = image(nbytes, name)
    ours = getattr(mt, name)(identity)
    peer = getattr(ab, name, None)
    theirs = None if peer is None else peer(identity)
    return Case(f"{name} -> @mt.{name}", lambda: identity(x), lambda: ours(x),
                None if theirs is None else lambda: theirs(x))


def _cross(source: str, target: str, nbytes: int, by_hand: Callable[[Any], Any],
           note: str) -> Case:
    x = image(nbytes, source)
    ours = getattr(mt, target)(identity)
    assert mt.shares_memory(ours(x), x), f"{source} -> {target} is not zero-copy here"
    return Case(f"{source} -> @mt.{target} ({note})", lambda: identity(by_hand(x)),
                lambda: ours(x), None)


def builders(types: list[str], sizes: list[int], ab: Any) -> Iterator[tuple[str, Builder]]:
    """(size label, case builder) for every row; arrays are made when a row is measured."""
    for nbytes in sizes:
        size = _size(nbytes)
        for name in types:
            yield size, lambda name=name, nbytes=nbytes: _same_type(name, nbytes, ab)
        yield size, lambda nbytes=nbytes: _cross(
            "numpy", "torch", nbytes, torch.from_numpy, "plain: torch.from_numpy")
        yield size, lambda nbytes=nbytes: _cross(
            "torch", "numpy", nbytes, lambda t: t.numpy(), "zero-copy view; plain: .numpy()")
        if "jax" in types:
            yield size, lambda nbytes=nbytes: _cross(
                "jax", "numpy", nbytes, np.from_dlpack, "read-only view; plain: np.from_dlpack")
            yield size, lambda nbytes=nbytes: _cross(
                "jax", "torch", nbytes, torch.from_dlpack,
                "guarded by the version count; plain: torch.from_dlpack")
        yield size, lambda nbytes=nbytes: _copying(nbytes)
    for nbytes in (256, 16 * 2**20):  # the policy's passes over the data show at 16 MiB
        for fn in (brighten, to_unit):
            yield _size(nbytes), lambda nbytes=nbytes, fn=fn: _dtype_policy(fn, nbytes)
    yield _size(8 * 8 * 8 * 4), lambda: _by_slice(ab)


def _copying(nbytes: int) -> Case:
    t = image(nbytes, "torch")
    ours = mt.torch(copy_inputs=True)(identity)
    return Case("torch -> @mt.torch(copy_inputs=True) (opt-in copy)", lambda: identity(t),
                lambda: ours(t), None)


def brighten(image: Any) -> Any:
    """A float64 result on the integer scale from a uint8 image (100 -> 150.0)."""
    return image * 1.5


def to_unit(image: Any) -> Any:
    """A float64 result on scikit-image's [0, 1] scale from a uint8 image (100 -> 0.39)."""
    return image / 255.0


def _dtype_policy(fn: Callable[[Any], Any], nbytes: int) -> Case:
    """A uint8 ``[1, 16, X]`` image of ``nbytes`` (100 everywhere) through ``fn``: the
    default policy returns uint8 (150, rounded; 100, scaled back: arraybridge returns 0)."""
    from arraybridge import decorators as ab

    u8 = np.full((1, 16, max(nbytes // 16, 16)), 100, np.uint8)
    ours, theirs = mt.numpy(fn), ab.numpy(fn)
    scale = "[0, 1] (unit)" if fn is to_unit else "x 1.5 (rounded)"
    return Case(f"numpy uint8 -> float64 {scale}, PRESERVE_INPUT", lambda: fn(u8),
                lambda: ours(u8), lambda: theirs(u8))


def _by_slice(ab: Any) -> Case:
    stack = np.zeros((8, 8, 8), np.float32)
    ours, theirs = mt.numpy(identity), ab.numpy(identity)
    return Case("numpy, slice_by_slice (8 slices; plain: whole stack)", lambda: identity(stack),
                lambda: ours(stack, slice_by_slice=True),
                lambda: theirs(stack, slice_by_slice=True))


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def measure(case: Case, repeats: int) -> dict[str, float | None]:
    """Plain, memtype and arraybridge medians (seconds), in alternating rounds."""
    fns = [case.plain, case.memtype] + ([] if case.arraybridge is None else [case.arraybridge])
    number = min(batch_size(fn, 2e-3, 2000) for fn in fns)
    times = alternating(fns, number, repeats)
    return {"plain": times[0], "memtype": times[1],
            "arraybridge": times[2] if len(times) > 2 else None}


def _us(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds * 1e3:.2f} ms" if abs(seconds) >= 1e-3 else f"{seconds * 1e6:.2f} µs"


Row = tuple[str, Case, dict[str, float | None]]


def report(rows: list[Row], repeats: int) -> str:
    """The Markdown table and the notes under it."""
    lines = [
        "| case | input | plain call | memtype | memtype overhead | arraybridge "
        "| arraybridge overhead | overhead ratio (arraybridge / memtype) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, case, m in rows:
        plain, ours, peer = m["plain"], m["memtype"], m["arraybridge"]
        assert plain is not None and ours is not None
        ratio = "—" if peer is None else f"{(peer - plain) / max(ours - plain, 1e-12):.1f}x"
        lines.append(
            f"| {case.label} | {size} | {_us(plain)} | {_us(ours)} | {_us(ours - plain)} | "
            f"{_us(peer)} | {_us(None if peer is None else peer - plain)} | {ratio} |")
    lines += ["", *_verdicts(rows), "",
              f"Medians of {repeats} alternating rounds (batches of up to 2000 calls, loop "
              "overhead included).",
              f"Machine: {platform.machine()} {os.cpu_count()}-core CPU (load average "
              f"{os.getloadavg()[0]:.1f} at the end), no GPU; Python "
              f"{platform.python_version()}, numpy {np.__version__}, torch {torch.__version__}"
              f". Date: {datetime.date.today().isoformat()}."]
    return "\n".join(lines) + "\n"


def _verdicts(rows: list[Row]) -> list[str]:
    """Per same-type row pair: the overhead at the largest size against the smallest."""
    by_label: dict[str, list[tuple[str, float]]] = {}
    for size, case, m in rows:
        assert m["memtype"] is not None and m["plain"] is not None
        by_label.setdefault(case.label, []).append((size, m["memtype"] - m["plain"]))
    out = []
    for label, points in by_label.items():
        if len(points) < 2 or "copy_inputs=True" in label:
            continue
        (small, o_small), (large, o_large) = points[0], points[-1]
        ok = "met" if max(o_small, o_large) * 1e6 <= TARGET_US else "NOT met"
        out.append(f"- {label}: overhead {_us(o_small)} at {small}, {_us(o_large)} at {large} "
                   f"(≤ {TARGET_US:g} µs: {ok})")
    return out


def main() -> None:
    """Run every case and write the report."""
    from arraybridge import decorators as ab

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--sizes", default="1KiB,256MiB")
    opts = parser.parse_args()
    sizes = [parse_size(s) for s in opts.sizes.split(",")]
    types = [t for t in usable_types() if t != "cupy"]
    rows: list[Row] = []
    for size, build in builders(types, sizes, ab):
        case = build()
        rows.append((size, case, measure(case, opts.repeats)))
        del case
    text = report(rows, opts.repeats)
    OUT.mkdir(exist_ok=True)
    (OUT / "decorators.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
