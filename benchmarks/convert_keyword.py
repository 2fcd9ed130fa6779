"""The cost of convert's one spelling (issue 22 section 2): ``convert(x, memory_type)`` with
the deprecated ``to=`` checked by one ``is None`` and the conversion modules split into
``memtype.conversion``, against a revision before both, in alternating rounds.

Each round starts one fresh process per revision (the order alternates), which times
``mt.convert`` positional calls on 1 KiB float32 arrays (NumPy, and torch unless
``--cases host``: the overhead, not the bandwidth) and reports CPU seconds per call (thread
time: preemption on a shared machine is not counted), the best of 15 batches. The table
gives per case the median over rounds and the median of the per-round ratios (after /
before).

Run: ``python benchmarks/convert_keyword.py --before 9030c16 [--after WORKTREE]
[--rounds 9] [--cases host]``. Writes ``benchmarks/results/convert_keyword.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_revisions import alternate, run_probe, table, write_results  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "convert_keyword.md"

PROBE = r"""
import json, sys, time
import numpy as np
import memtype as mt

def per_call(fn, budget=0.02):
    # CPU time of this thread: time spent preempted on a shared machine is not counted
    clock = time.thread_time
    fn()
    n, start = 1, clock()
    while clock() - start < budget / 10:
        fn()
        n += 1
    best = float("inf")
    for _ in range(15):
        t0 = clock()
        for _ in range(n):
            fn()
        best = min(best, (clock() - t0) / n)
    return best

host = np.arange(256, dtype=np.float32).reshape(16, 16)
cases = {
    "convert numpy->numpy": lambda: mt.convert(host, "numpy"),
    "convert numpy->numpy gpu_id=None": lambda: mt.convert(host, "numpy", gpu_id=None),
}
if sys.argv[1] == "all":
    import torch
    t = torch.from_numpy(host.copy())
    cases |= {
        "convert numpy->torch": lambda: mt.convert(host, "torch"),
        "convert torch->numpy": lambda: mt.convert(t, "numpy"),
        "convert torch->torch": lambda: mt.convert(t, "torch"),
        "convert_memory numpy->torch": lambda: mt.convert_memory(host, "numpy", "torch"),
    }
print(json.dumps({"memtype_file": mt.__file__,
                  "results": {k: per_call(f) for k, f in cases.items()}}))
"""


def one_round(src: Path, cases: str) -> dict[str, float]:
    return run_probe(src, ["-c", PROBE, cases])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision to compare against")
    parser.add_argument("--after", default="WORKTREE", help="git revision, or WORKTREE")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--cases", choices=("host", "all"), default="all",
                        help="host: NumPy only (no torch import: short rounds, many of them)")
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    rounds = alternate(args.before, args.after, args.rounds,
                       lambda src: one_round(src, args.cases))
    body = table(args.before, args.after, rounds)
    write_results(OUT, f"memtype.convert {args.after} vs {args.before}: seconds per call, "
                  "1 KiB float32",
                  args.rounds, load_start, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
