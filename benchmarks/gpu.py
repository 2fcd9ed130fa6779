"""GPU benchmark: conversions among NumPy, CuPy, PyTorch and JAX on one CUDA GPU, and the
decorators' overhead with GPU inputs; memtype vs the best direct call vs arraybridge 0.5.2.

Conversions: for every ordered pair of the memory types usable here (numpy, plus cupy, torch
and jax on GPU 0) and sizes 1 KiB, 1 MiB, 64 MiB and 1 GiB (float32, C-contiguous, 64-byte
aligned on the host), the median time per conversion of

* ``memtype.convert(x, target, gpu_id=0)`` (``gpu_id`` only for GPU targets),
* the best direct framework call for the pair: ``torch.from_dlpack``, ``cupy.from_dlpack``,
  ``jax.dlpack.from_dlpack`` between GPU frameworks; ``torch.as_tensor(a, device=...)``,
  ``cupy.asarray``, ``jax.device_put`` to the GPU; ``.cpu().numpy()``, ``cupy.asnumpy``,
  ``np.asarray`` back to the host,
* ``arraybridge.convert_memory`` (arraybridge 0.5.2; n/a when it is not importable).

Every timed batch ends with a device synchronisation inside the timed region, so copies
queued by a call are paid for by that call. JAX caches an array's host copy after its first
``np.asarray``; a JAX source is therefore re-wrapped (a DLPack alias, O(1)) before every call
of every column, and that re-wrap's own median is reported.

Decorators: one call of a function that returns its input, plain and through ``@mt.torch`` /
``@mt.cupy`` (and arraybridge's decorator of the same name), with a torch CUDA tensor, a CuPy
array, and a CuPy array into a torch function.

Writes a Markdown report to ``--out`` (default ``benchmarks/results/gpu.md``); exits with
status 2 and a message when no CUDA GPU is present.
Run: ``python benchmarks/gpu.py [--quick] [--sizes 1KiB 1GiB] [--repeats 7] [--budget-s 300]``.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _decorator_cases import Case, identity  # beside this script
from gpu_report import GPU_TYPES, DecoratorRow, Row, fmt, report

import memtype as mt
from memtype._bench import median_seconds, parse_size
from memtype.frameworks import load_adapter
from memtype.frameworks._host import aligned_copy

OUT = Path(__file__).resolve().parent / "results" / "gpu.md"
NO_GPU = 2  # exit status without a CUDA GPU
NAN = float("nan")


# -- set-up -----------------------------------------------------------------------------------


def cuda_types() -> list[str]:
    """The GPU frameworks that see a CUDA GPU; empty (JAX not even asked) without one."""
    if not any(importlib.util.find_spec(n) and load_adapter(n).gpu_count() for n in
               ("torch", "cupy")):
        return []
    mt.gpu.configure(jax_preallocate=False, tensorflow_memory_growth=None)  # before JAX starts
    return [n for n in GPU_TYPES if importlib.util.find_spec(n) and load_adapter(n).gpu_count()]


@functools.cache
def _device_synchronize() -> Callable[[], None]:
    """A call that waits for all work on GPU 0, in the one CUDA context every framework shares."""
    if importlib.util.find_spec("cupy") and load_adapter("cupy").gpu_count():
        import cupy as cp

        return cp.cuda.runtime.deviceSynchronize  # type: ignore[no-any-return]
    import torch

    return functools.partial(torch.cuda.synchronize, 0)


def finish(out: Any) -> None:
    """Wait until ``out`` is computed and GPU 0 is idle (every framework, every stream)."""
    ready = getattr(out, "block_until_ready", None)
    if ready is not None:
        ready()
    _device_synchronize()()


def per_call(fn: Callable[[], Any], number: int, repeats: int) -> float:
    """Median over ``repeats`` batches of the seconds per call, the batch's sync included."""

    def batch() -> None:
        out = None
        for _ in range(number):
            out = fn()
        finish(out)

    return median_seconds(batch, repeats) / number


def calls_for(nbytes: int) -> int:
    """Calls per timed batch: many for tiny sizes, one for large copies."""
    return 200 if nbytes <= 1 << 16 else 20 if nbytes <= 1 << 22 else 1


def host_array(nbytes: int) -> np.ndarray[Any, Any]:
    """A 64-byte aligned float32 array of ``nbytes`` whose pages are all written."""
    n = max(nbytes // 4, 1)
    return aligned_copy(np.arange(n, dtype=np.float32))


def on_gpu(name: str, host: np.ndarray[Any, Any]) -> Any:
    """``host`` on GPU 0 as a ``name`` array, made by the framework itself."""
    if name == "torch":
        import torch

        return torch.as_tensor(host, device="cuda:0")
    if name == "cupy":
        import cupy as cp

        with cp.cuda.Device(0):
            return cp.asarray(host)
    if name == "jax":
        import jax

        return jax.device_put(host, jax.devices("gpu")[0])
    return host


def direct_calls(types: list[str]) -> dict[tuple[str, str], Callable[[Any], Any]]:
    """The best direct call per ordered pair (what one writes by hand), GPU targets on GPU 0."""
    calls: dict[tuple[str, str], Callable[[Any], Any]] = {}
    if "torch" in types:
        import torch
        from torch.utils.dlpack import from_dlpack as torch_from_dlpack

        calls[("numpy", "torch")] = functools.partial(torch.as_tensor, device="cuda:0")
        calls[("torch", "numpy")] = lambda t: t.cpu().numpy()
        for src in ("cupy", "jax"):
            calls[(src, "torch")] = torch_from_dlpack
    if "cupy" in types:
        import cupy as cp

        calls[("numpy", "cupy")] = cp.asarray
        calls[("cupy", "numpy")] = cp.asnumpy
        for src in ("torch", "jax"):
            calls[(src, "cupy")] = cp.from_dlpack
    if "jax" in types:
        import jax

        calls[("numpy", "jax")] = functools.partial(jax.device_put, device=jax.devices("gpu")[0])
        calls[("jax", "numpy")] = np.asarray
        for src in ("torch", "cupy"):
            calls[(src, "jax")] = jax.dlpack.from_dlpack
    return calls


def arraybridge() -> tuple[str, Callable[[Any, str, str], Any] | None, Any]:
    """arraybridge's version, its convert_memory bound to the right device, its decorators."""
    try:
        import arraybridge as ab
        from arraybridge import convert_memory
        from arraybridge import decorators as ab_decorators
        from arraybridge.devices import HOST, AcceleratorDevice
    except ImportError:
        return "not installed", None, None

    def call(x: Any, source: str, target: str) -> Any:
        device = AcceleratorDevice(0) if target in GPU_TYPES else HOST
        return convert_memory(x, source, target, device)

    return str(ab.__version__), call, ab_decorators


def timed(fn: Callable[[], Any], number: int, repeats: int) -> float:
    """``per_call``, or NaN (with the reason on stderr) when the call fails."""
    try:
        return per_call(fn, number, repeats)
    except Exception as exc:  # noqa: BLE001 - a failing call is a result, reported as n/a
        print(f"    failed: {type(exc).__name__}: {str(exc)[:160]}", file=sys.stderr)
        return NAN


# -- conversions ------------------------------------------------------------------------------


@dataclass
class Budget:
    """A deadline for the whole run; what could not be measured in time is listed."""

    seconds: float | None
    start: float = field(default_factory=time.monotonic)
    skipped: list[str] = field(default_factory=list)

    def exhausted(self, what: str) -> bool:
        """True (and ``what`` recorded) once the deadline has passed."""
        if self.seconds is not None and time.monotonic() - self.start > self.seconds:
            self.skipped.append(what)
            return True
        return False


def _source_factory(name: str, host: np.ndarray[Any, Any]) -> Callable[[], Any]:
    """Returns the source array before each call (JAX: a fresh O(1) alias, see the notes)."""
    x = on_gpu(name, host)
    if name != "jax":
        return lambda: x
    import jax

    return lambda: jax.dlpack.from_dlpack(x)


def convert_rows(types: list[str], sizes: list[str], repeats: int,
                 budget: Budget) -> tuple[list[Row], dict[str, float]]:
    """Every ordered pair at every size; also the JAX re-wrap's median per size."""
    direct, (_, peer, _) = direct_calls(types), arraybridge()
    rows: list[Row] = []
    rewrap: dict[str, float] = {}
    for label in sizes:
        nbytes = parse_size(label)
        host = host_array(nbytes)
        sources = {name: _source_factory(name, host) for name in types}
        number = calls_for(nbytes)
        if "jax" in sources:
            rewrap[label] = timed(sources["jax"], number, repeats)
        for s in types:
            for t in types:
                if budget.exhausted(f"{label} {s} -> {t}"):
                    continue
                rows.append(_row(label, nbytes, s, t, sources[s], direct, peer, number, repeats))
        del sources, host
        mt.gpu.cleanup_all_gpu_frameworks()
    return rows, rewrap


def _row(label: str, nbytes: int, s: str, t: str, make: Callable[[], Any],
         direct: dict[tuple[str, str], Callable[[Any], Any]],
         peer: Callable[[Any, str, str], Any] | None, number: int, repeats: int) -> Row:
    """Time one pair in the three columns."""
    gpu_id = 0 if t in GPU_TYPES else None
    x = make()
    out = mt.convert(x, t, gpu_id=gpu_id)
    zero = mt.shares_memory(x, out)
    del out
    ours = timed(lambda: mt.convert(make(), t, gpu_id=gpu_id), number, repeats)
    fn = direct.get((s, t), (lambda y: y) if s == t else None)
    best = NAN if fn is None else timed(lambda: fn(make()), number, repeats)
    theirs = NAN if peer is None else timed(lambda: peer(make(), s, t), number, repeats)
    print(f"{label:>6} {s:>5} -> {t:<5} memtype {fmt(ours):>10}  direct {fmt(best):>10}  "
          f"arraybridge {fmt(theirs):>10}  zero-copy={zero}", file=sys.stderr)
    return Row(label, nbytes, s, t, ours, best, theirs, zero)


# -- decorators -------------------------------------------------------------------------------




def decorator_cases(types: list[str]) -> list[Case]:
    """The decorator rows possible with the frameworks here."""
    _, _, ab = arraybridge()
    cases: list[Case] = []
    if "torch" in types:
        import torch

        t = torch.zeros((1, 8, 8), device="cuda:0")
        mt_t, mt_t_nocopy = mt.torch(identity), mt.torch(copy_inputs=False)(identity)
        ab_t = None if ab is None else ab.torch(identity)
        cases += [
            Case("torch CUDA tensor -> @mt.torch (isolating copy)", lambda: identity(t),
                 lambda: mt_t(t), None if ab_t is None else lambda: ab_t(t)),
            Case("torch CUDA tensor -> @mt.torch(copy_inputs=False)", lambda: identity(t),
                 lambda: mt_t_nocopy(t), None if ab_t is None else lambda: ab_t(t)),
        ]
    if "cupy" in types:
        import cupy as cp

        c = cp.zeros((1, 8, 8), dtype=cp.float32)
        mt_c, mt_c_nocopy = mt.cupy(identity), mt.cupy(copy_inputs=False)(identity)
        ab_c = None if ab is None else ab.cupy(identity)
        cases += [
            Case("cupy array -> @mt.cupy (isolating copy)", lambda: identity(c),
                 lambda: mt_c(c), None if ab_c is None else lambda: ab_c(c)),
            Case("cupy array -> @mt.cupy(copy_inputs=False)", lambda: identity(c),
                 lambda: mt_c_nocopy(c), None if ab_c is None else lambda: ab_c(c)),
        ]
        if "torch" in types:
            from torch.utils.dlpack import from_dlpack as torch_from_dlpack

            mt_ct = mt.torch(copy_inputs=False)(identity)
            cases.append(Case(
                "cupy array -> @mt.torch(copy_inputs=False) (plain: torch.from_dlpack by hand)",
                lambda: identity(torch_from_dlpack(c)), lambda: mt_ct(c), None))
    return cases


def decorator_rows(types: list[str], number: int, repeats: int,
                   budget: Budget) -> list[DecoratorRow]:
    """Plain, memtype and arraybridge seconds per call for each case."""
    rows = []
    for case in decorator_cases(types):
        if budget.exhausted(f"decorators: {case.label}"):
            continue
        plain = timed(case.plain, number, repeats)
        ours = timed(case.memtype, number, repeats)
        peer = NAN if case.arraybridge is None else timed(case.arraybridge, number, repeats)
        print(f"{case.label}: plain {fmt(plain)}, memtype {fmt(ours)}, arraybridge {fmt(peer)}",
              file=sys.stderr)
        rows.append(DecoratorRow(case.label, plain, ours, peer))
    return rows


def main() -> int:
    """Parse options, measure, write the report; 2 without a CUDA GPU."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["1KiB", "1MiB", "64MiB", "1GiB"])
    parser.add_argument("--repeats", type=int, default=None, help="batches per conversion")
    parser.add_argument("--number", type=int, default=None, help="calls per decorator batch")
    parser.add_argument("--quick", action="store_true", help="fewer repeats (same sizes)")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="stop measuring after this many seconds (the rest is listed)")
    parser.add_argument("--out", type=Path, default=OUT)
    opts = parser.parse_args()
    opts.repeats = opts.repeats or (5 if opts.quick else 11)
    opts.number = opts.number or (500 if opts.quick else 2000)
    opts.repeats_decorators = 21 if opts.quick else 51
    types = cuda_types()
    if not types:
        print("benchmarks/gpu.py: no CUDA GPU is visible to torch or cupy here, so nothing "
              "was measured. Run it on a machine with an NVIDIA GPU (docs/gpu-validation.md).",
              file=sys.stderr)
        return NO_GPU
    budget = Budget(opts.budget_s)
    rows, rewrap = convert_rows(["numpy", *types], opts.sizes, opts.repeats, budget)
    deco = decorator_rows(types, opts.number, opts.repeats_decorators, budget)
    options = (f"sizes {' '.join(opts.sizes)}; {opts.repeats} repeats per conversion; "
               f"decorators: {opts.repeats_decorators} batches of {opts.number} calls"
               f"{'; --quick' if opts.quick else ''}")
    text = report(rows, rewrap, deco, options, budget.skipped, budget.seconds)
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
