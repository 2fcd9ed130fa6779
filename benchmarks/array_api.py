"""``@mt.array_api`` benchmark: the per-call cost of running where the data is.

For one Array API function with no work (``identity``: the decorators' cost stands alone),
the median time of one call

* undecorated,
* through the framework's own decorator (``@mt.numpy``, ``@mt.torch``, ``@mt.jax``),
* through ``@mt.array_api`` (dispatch on the first array, the dtype checks, ``xp=``),

in alternating rounds, on a 1 KiB float32 image of each framework; and the one O(n) cost
``@mt.array_api`` adds: a torch uint16 image widened to int32 (torch has no uint16 kernels),
against the same function on NumPy, at 1 KiB and 16 MiB. Prints a Markdown table.
Run: ``python benchmarks/array_api.py [--repeats 15]``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
from typing import Any

import numpy as np
import torch

import memtype as mt
from memtype.frameworks import load_adapter

load_adapter("jax")  # noqa: E402  (through memtype)
from _decorator_cases import alternating, batch_size  # noqa: E402


def identity(image: Any) -> Any:
    """No work."""
    return image


def identity_xp(image: Any, xp: Any) -> Any:
    """No work, with the namespace passed."""
    return image


def brighten(image: Any, xp: Any) -> Any:
    """``+``, ``>``, ``max``: the ops torch lacks for uint16."""
    return xp.where(image > 2, image + 1, xp.max(image))


def _row(label: str, fns: list[Any], repeats: int) -> str:
    number = batch_size(fns[-1], 0.02, 2000)
    times = alternating(fns, number, repeats)
    cells = " | ".join(f"{t * 1e6:.1f}" for t in times)
    return f"| {label} | {cells} |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    print(f"{datetime.date.today()}, {platform.processor() or platform.machine()}, "
          f"load average {os.getloadavg()[0]:.1f}; medians of {args.repeats} alternating rounds, "
          "µs per call\n")
    print("| input (1 KiB float32) | plain | @mt.<framework> | @mt.array_api |")
    print("|---|---|---|---|")
    api = mt.array_api(identity_xp, contract="any")
    for name in ("numpy", "torch", "jax"):
        x = mt.convert(np.zeros((1, 16, 16), np.float32), name)
        own = getattr(mt, name)(identity, contract="any")
        fns = [lambda x=x: identity(x), lambda x=x, own=own: own(x), lambda x=x: api(x)]
        print(_row(name, fns, args.repeats))
    print("\n| uint16 image | @mt.array_api on NumPy | @mt.array_api on torch (widened) |")
    print("|---|---|---|")
    work = mt.array_api(brighten)
    for n in (1 << 10, 16 << 20):
        host = np.arange(n // 2, dtype=np.uint16).reshape(1, -1, 256)
        tensor = torch.from_numpy(host.copy())
        fns = [lambda h=host: work(h), lambda t=tensor: work(t)]
        print(_row(f"{n >> 10} KiB", fns, args.repeats))


if __name__ == "__main__":
    main()
