"""Planned pipelines (issue 15): fixed alternating frameworks vs the plan vs hand-written NumPy.

A six-step chain (scale, offset, absolute, square root, square, shift) where every step has
NumPy, torch, JAX and pyclesperanto implementations, run three ways on the same stacks:

* **fixed**: step i runs in numpy, torch, jax, pyclesperanto, numpy, torch (what users write
  today with one decorated function per step);
* **plan**: ``Pipeline.plan`` picks each step's implementation (the run's chain: load
  conversion, the steps' decorated calls, the write conversion to NumPy);
* **hand**: the same operations written directly in NumPy, no memtype.

Copied bytes are counted with the conversion hook; times are medians over alternating
rounds. Also checks that the plan's predicted conversions and bytes equal what the hook
counts. Targets: plan copies >= 5x fewer bytes than fixed; plan time <= 1.1x hand-written.
Run: ``python benchmarks/pipeline_plan.py [--repeats 7] [--z 32] [--size 512]``.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
import torch  # noqa: F401  (import order: torch before anything that loads tensorflow)

import memtype as mt
from memtype.conversion import ConversionEvent, add_conversion_hook, remove_conversion_hook
from memtype.pipeline import FunctionStep, Pipeline, Variants


def _cle() -> Any:
    import pyclesperanto as cle

    return cle


# one operation per step, four implementations each
IMPLS: list[tuple[str, dict[str, Callable[[Any], Any]]]] = [
    ("scale", {"numpy": lambda x: x * 1.5, "torch": lambda x: x * 1.5,
               "jax": lambda x: x * 1.5,
               "pyclesperanto": lambda x: _cle().multiply_image_and_scalar(x, scalar=1.5)}),
    ("offset", {"numpy": lambda x: x + 2.0, "torch": lambda x: x + 2.0,
                "jax": lambda x: x + 2.0,
                "pyclesperanto": lambda x: _cle().add_image_and_scalar(x, scalar=2.0)}),
    ("absolute", {"numpy": np.abs, "torch": lambda x: x.abs(), "jax": jnp.abs,
                  "pyclesperanto": lambda x: _cle().absolute(x)}),
    ("root", {"numpy": np.sqrt, "torch": lambda x: x.sqrt(), "jax": jnp.sqrt,
              "pyclesperanto": lambda x: _cle().square_root(x)}),
    ("square", {"numpy": lambda x: x * x, "torch": lambda x: x * x, "jax": lambda x: x * x,
                "pyclesperanto": lambda x: _cle().multiply_images(x, x)}),
    ("shift", {"numpy": lambda x: x - 1.0, "torch": lambda x: x - 1.0,
               "jax": lambda x: x - 1.0,
               "pyclesperanto": lambda x: _cle().add_image_and_scalar(x, scalar=-1.0)}),
]
FIXED = ["numpy", "torch", "jax", "pyclesperanto", "numpy", "torch"]


def variant_steps() -> list[FunctionStep]:
    """The six steps, each with its four implementations."""
    return [FunctionStep(Variants(impls), name=name) for name, impls in IMPLS]


def run_chain(steps: list[FunctionStep], stack: np.ndarray[Any, Any]) -> Any:
    """What a group's run does with one stack: load conversion, steps, write conversion."""
    data = mt.convert(stack, steps[0].chain[0].input_type)
    for i, step in enumerate(steps):  # results stay where computed, the last one as declared
        data, _ = step.run(data, (), None, lazy=i < len(steps) - 1)
    return mt.convert(data, "numpy")


def hand(stack: np.ndarray[Any, Any]) -> Any:
    """The same six operations in NumPy, directly."""
    x = stack * 1.5
    x = x + 2.0
    x = np.abs(x)
    x = np.sqrt(x)
    x = x * x
    return x - 1.0


class Counter:
    """Conversion events and copied bytes seen by the hook."""

    def __init__(self) -> None:
        self.events: list[ConversionEvent] = []

    def __enter__(self) -> Counter:
        self.events.clear()
        add_conversion_hook(self.events.append)
        return self

    def __exit__(self, *exc: object) -> None:
        remove_conversion_hook(self.events.append)

    @property
    def copied(self) -> int:
        return sum(e.nbytes for e in self.events if not e.zero_copy)


def buffer_reuse(z: int, size: int, groups: int, repeats: int) -> tuple[float, float]:
    """Median seconds to stage ``groups`` groups' planes (uint16) as the load does: into the
    pool's reused buffers (on) vs a new stack per group (off, ``memtype.stack_slices``)."""
    from memtype.pipeline.execution.buffers import BufferPool

    rng = np.random.default_rng(1)
    planes = [rng.integers(0, 65535, (size, size), dtype=np.uint16) for _ in range(z)]

    def on(pool: BufferPool) -> None:
        for _ in range(groups):
            staged = pool.stack(planes)
            assert staged is not None
            pool.give_back([staged[0]])
            del staged

    def off() -> None:
        for _ in range(groups):
            mt.stack_slices(planes, "numpy", None)

    pool = BufferPool()
    on(pool)
    off()
    times: dict[str, list[float]] = {"on": [], "off": []}
    for r in range(repeats):
        for way in (("on", "off") if r % 2 == 0 else ("off", "on")):
            start = time.perf_counter()
            on(pool) if way == "on" else off()
            times[way].append(time.perf_counter() - start)
    return statistics.median(times["on"]), statistics.median(times["off"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--z", type=int, default=32)
    parser.add_argument("--size", type=int, default=512)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    stack = rng.random((args.z, args.size, args.size), dtype=np.float32)
    steps = variant_steps()
    plan = Pipeline(steps).plan(stack)
    fixed = [st.with_implementation(fw) for st, fw in zip(steps, FIXED, strict=True)]
    planned = plan.apply(steps)
    ways: dict[str, Callable[[], Any]] = {
        "fixed": lambda: run_chain(fixed, stack),
        "plan": lambda: run_chain(planned, stack),
        "hand": lambda: hand(stack),
    }
    reference = hand(stack)
    times: dict[str, list[float]] = {k: [] for k in ways}
    copied: dict[str, int] = {}
    counts: dict[str, tuple[int, int]] = {}
    for way, fn in ways.items():  # warm-up (JIT, kernels), correctness, bytes
        with Counter() as c:
            out = fn()
        np.testing.assert_allclose(out, reference, rtol=1e-4, atol=1e-4)
        copied[way] = c.copied
        counts[way] = (len(c.events), sum(e.nbytes for e in c.events))
    for r in range(args.repeats):
        order = list(ways) if r % 2 == 0 else list(reversed(ways))
        for way in order:
            start = time.perf_counter()
            ways[way]()
            times[way].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    predicted = (sum(p.events for p in plan.phases), sum(p.nbytes for p in plan.phases))
    fixed_plan = Pipeline(fixed).plan(stack)
    fixed_predicted = (sum(p.events for p in fixed_plan.phases),
                       sum(p.nbytes for p in fixed_plan.phases))
    print(plan.table())
    print()
    print(f"{datetime.date.today()} {platform.machine()} {platform.processor() or ''} "
          f"stack {stack.shape} float32, {args.repeats} alternating rounds, medians")
    print("| way | steps | copied MiB | time ms | vs hand |")
    print("|---|---|---:|---:|---:|")
    labels = {"fixed": ", ".join(FIXED), "plan": ", ".join(plan.choices.values()),
              "hand": "numpy (direct)"}
    for way in ways:
        print(f"| {way} | {labels[way]} | {copied[way] / 2**20:.1f} | {med[way] * 1e3:.1f} | "
              f"{med[way] / med['hand']:.2f}x |")
    ratio = f"{copied['fixed'] / copied['plan']:.1f}x" if copied["plan"] else "unbounded"
    print(f"fixed/plan copied bytes: {ratio} (plan copies {copied['plan']} B; target >= 5x)")
    print(f"plan/hand time: {med['plan'] / med['hand']:.2f}x (target <= 1.10x)")
    print(f"plan predicted (events, bytes) {predicted}; hook counted {counts['plan']}: "
          f"{'match' if predicted == counts['plan'] else 'MISMATCH'}")
    print(f"fixed predicted (events, bytes) {fixed_predicted}; hook counted {counts['fixed']}: "
          f"{'match' if fixed_predicted == counts['fixed'] else 'MISMATCH'}")
    on, off = buffer_reuse(args.z, args.size, 4, args.repeats)
    print(f"buffer reuse, 4 groups' load staging of {args.z} x {args.size} x {args.size} uint16: "
          f"on {on * 1e3:.1f} ms, off {off * 1e3:.1f} ms, off/on {off / on:.2f}x")


if __name__ == "__main__":
    main()
