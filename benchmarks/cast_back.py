"""The dtype policy's cast back (a float result of an integer input returned in the input's
dtype: ``PRESERVE_INPUT``'s ``"unit"`` scaling), against another revision, in alternating
rounds.

Each round starts one fresh process per revision (the order alternates), which times, on a
5x1024x1024 float64 result in [0, 1] for a uint16 input, in NumPy and torch: the cast back
alone (``cast_in`` told the decision's bounds, as a decorated call does) and the whole
decorated call (an ``@mt.numpy`` / ``@mt.torch`` function returning that result: decision
plus cast). Seconds are process CPU time (every thread; a shared machine's preemption is not
counted), the median of 7 calls after one warm-up. The table gives per case the median over
rounds and the median of the per-round ratios (after / before).

Run: ``python benchmarks/cast_back.py --before <rev> [--after WORKTREE] [--rounds 5]``.
Writes ``benchmarks/results/cast_back.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_revisions import alternate, run_probe, table, write_results  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "cast_back.md"

PROBE = r"""
import json, statistics, time
import numpy as np
import torch
import memtype as mt
from memtype.conversion.casting import cast_in
from memtype.frameworks import load_adapter

def per_call(fn, calls=7):
    fn()
    seen = []
    for _ in range(calls):
        t0 = time.process_time()
        fn()
        seen.append(time.process_time() - t0)
    return statistics.median(seen)

result = np.random.default_rng(0).random((5, 1024, 1024))
bounds = (float(result.min()), float(result.max()))
u16 = np.dtype("uint16")
tresult = torch.from_numpy(result.copy())
image, timage = np.zeros((5, 8, 8), np.uint16), torch.zeros((5, 8, 8), dtype=torch.uint16)
numpy_f = mt.numpy(lambda x: result)
torch_f = mt.torch(lambda x: tresult)
na, ta = load_adapter("numpy"), load_adapter("torch")
cases = {
    "numpy cast back f64->u16": lambda: cast_in(result, "numpy", na, u16, "unit", bounds),
    "numpy decorated call, f64 result": lambda: numpy_f(image),
    "torch cast back f64->u16": lambda: cast_in(tresult, "torch", ta, u16, "unit", bounds),
    "torch decorated call, f64 result": lambda: torch_f(timage),
}
assert numpy_f(image).dtype == u16 and torch_f(timage).dtype == torch.uint16
print(json.dumps({"memtype_file": mt.__file__,
                  "results": {k: per_call(f) for k, f in cases.items()}}))
"""


def one_round(src: Path) -> dict[str, float]:
    return run_probe(src, ["-c", PROBE])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision to compare against")
    parser.add_argument("--after", default="WORKTREE", help="git revision, or WORKTREE")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    rounds = alternate(args.before, args.after, args.rounds, one_round)
    body = table(args.before, args.after, rounds)
    write_results(OUT, f"The dtype policy's cast back, {args.after} vs {args.before}: CPU "
                  "seconds per call, 5x1024x1024 float64 -> uint16",
                  args.rounds, load_start, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
