"""Decorator benchmark: per-call overhead of memtype's decorators vs a plain call and arraybridge.

For small arrays (so that the function's own work is negligible), the median time of one call

* of the undecorated function,
* through memtype's decorator (``@mt.numpy``, ``@mt.torch``...),
* through arraybridge 0.5.2's decorator of the same name (the peer extracted from OpenHCS),

and the overhead (decorated minus plain). Cases: same-type input on the host (the 2 µs target),
a dtype change under ``PRESERVE_INPUT``, a numpy caller into a torch function (a conversion
arraybridge's decorators do not do), and slice by slice. Each figure is the median over
``--repeats`` batches of the mean time of a call in a batch of ``--number`` calls (loop
overhead included). Writes ``benchmarks/results/decorators.md``.
Run: ``python benchmarks/decorators.py [--repeats 101] [--number 2000]``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import torch  # noqa: E402  (import order: torch and pyclesperanto before tensorflow)

try:
    import pyclesperanto  # noqa: F401
except ImportError:
    pass
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _decorator_cases import Case, identity  # noqa: E402  (beside this script)

import memtype as mt  # noqa: E402
from memtype._matrix import median_seconds  # noqa: E402

OUT = Path(__file__).resolve().parent / "results"
TARGET_US = 2.0



def per_call(fn: Callable[[], Any], number: int, repeats: int) -> float:
    """Median over ``repeats`` batches of the mean seconds per call of ``fn``."""
    return median_seconds(fn, repeats, number)



def brighten(image: Any) -> Any:
    """A float result from a uint8 image (the dtype policy runs)."""
    return image * 1.5


def cases() -> list[Case]:
    """The rows (arraybridge ``None`` where its decorators have no equivalent)."""
    from arraybridge import decorators as ab

    image = np.zeros((1, 8, 8), np.float32)
    u8 = np.full((1, 8, 8), 200, np.uint8)
    tensor = torch.zeros(1, 8, 8)
    jarr = jnp.zeros((1, 8, 8))
    stack = np.zeros((8, 8, 8), np.float32)
    mt_np, ab_np = mt.numpy(identity), ab.numpy(identity)
    mt_t, mt_t_nocopy, ab_t = mt.torch(identity), mt.torch(copy_inputs=False)(identity), \
        ab.torch(identity)
    mt_j, ab_j = mt.jax(identity), ab.jax(identity)
    mt_b, ab_b = mt.numpy(brighten), ab.numpy(brighten)
    return [
        Case("numpy, same type (1x8x8 float32)", lambda: identity(image), lambda: mt_np(image),
             lambda: ab_np(image)),
        Case("torch CPU, same type (isolating copy)", lambda: identity(tensor),
             lambda: mt_t(tensor), lambda: ab_t(tensor)),
        Case("torch CPU, same type, copy_inputs=False", lambda: identity(tensor),
             lambda: mt_t_nocopy(tensor), lambda: ab_t(tensor)),
        Case("jax CPU, same type", lambda: identity(jarr), lambda: mt_j(jarr),
             lambda: ab_j(jarr)),
        Case("numpy uint8 -> float result, PRESERVE_INPUT", lambda: brighten(u8),
             lambda: mt_b(u8), lambda: ab_b(u8)),
        Case("numpy caller -> torch function (plain: torch.from_numpy by hand)",
             lambda: identity(torch.from_numpy(image)), lambda: mt_t(image), None),
        Case("numpy, slice_by_slice (8x8x8; plain: whole stack)", lambda: identity(stack),
             lambda: mt_np(stack, slice_by_slice=True),
             lambda: ab_np(stack, slice_by_slice=True)),
    ]


def measure(case: Case, number: int, repeats: int) -> dict[str, float | None]:
    """Plain, memtype and arraybridge medians (seconds) for one case."""
    peer = None if case.arraybridge is None else per_call(case.arraybridge, number, repeats)
    return {"plain": per_call(case.plain, number, repeats),
            "memtype": per_call(case.memtype, number, repeats), "arraybridge": peer}


def _us(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1e6:.2f} µs"


def report(rows: list[tuple[Case, dict[str, float | None]]], number: int, repeats: int) -> str:
    """The Markdown table and the notes under it."""
    lines = [
        "| case | plain call | memtype | memtype overhead | arraybridge | arraybridge overhead "
        "| overhead ratio (arraybridge / memtype) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for case, m in rows:
        plain, ours, peer = m["plain"], m["memtype"], m["arraybridge"]
        assert plain is not None and ours is not None
        ratio = "—" if peer is None else f"{(peer - plain) / max(ours - plain, 1e-12):.1f}x"
        lines.append(
            f"| {case.label} | {_us(plain)} | {_us(ours)} | {_us(ours - plain)} | {_us(peer)} | "
            f"{_us(None if peer is None else peer - plain)} | {ratio} |")
    first = rows[0][1]
    overhead = (first["memtype"] or 0.0) - (first["plain"] or 0.0)
    met = "met" if overhead * 1e6 <= TARGET_US else "NOT met"
    lines += [
        "",
        f"Same-type host overhead target (≤ {TARGET_US:g} µs): **{met}** "
        f"({overhead * 1e6:.2f} µs). Medians of {repeats} batches of {number} calls, loop "
        "overhead included.",
        f"Machine: {platform.machine()} {os.cpu_count()}-core CPU, no GPU; Python "
        f"{platform.python_version()}, numpy {np.__version__}, torch {torch.__version__}. "
        f"Date: {datetime.date(2026, 11, 21).isoformat()}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run every case and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=101)
    parser.add_argument("--number", type=int, default=2000)
    opts = parser.parse_args()
    rows = [(case, measure(case, opts.number, opts.repeats)) for case in cases()]
    text = report(rows, opts.number, opts.repeats)
    OUT.mkdir(exist_ok=True)
    (OUT / "decorators.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
