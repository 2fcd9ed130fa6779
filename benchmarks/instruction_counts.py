"""Interpreter instructions per decorated call and conversion, two git revisions side by side.

Wall time on a shared machine swings with its load; the instructions a call executes do not.
Each revision runs once under ``valgrind --tool=callgrind`` with instrumentation off until the
measured loop (a tiny C shim, built here with the system compiler, switches it on and off
through callgrind's client requests, so the imports cost almost nothing); the cyclic garbage
collector is off inside the loop. A count is the loop's instructions divided by its calls
(the loop's own cost is the ``identity`` row). Needs valgrind (with its headers) and a C
compiler. Writes ``benchmarks/results/instruction_counts.md``.

Run: ``python benchmarks/instruction_counts.py --before 79e71514 [--after WORKTREE]``
(about 2.5 minutes per revision on a loaded 2-core machine).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from compare_revisions import export

OUT = Path(__file__).resolve().parent / "results" / "instruction_counts.md"
CALLS = 1000
SHIM = """#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS;
                      CALLGRIND_TOGGLE_COLLECT; }
void cg_stop(void) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_DUMP_STATS;
                     CALLGRIND_STOP_INSTRUMENTATION; }
"""
CASES = ("@mt.numpy(numpy)", "@mt.torch(torch)", "@mt.torch(numpy)", "@mt.numpy(torch)",
         "@mt.numpy(jax)", "policy numpy u8*1.5 256B", "convert numpy->torch",
         "convert torch->numpy", "identity")


def child(shim: str) -> None:
    """The measured process: each case's loop between the shim's start and stop."""
    import ctypes
    import gc

    import jax
    import numpy as np
    import torch

    import memtype as mt

    control = ctypes.CDLL(shim)
    host = np.arange(256, dtype=np.float32).reshape(1, 16, 16)
    t = torch.arange(256, dtype=torch.float32).reshape(1, 16, 16)
    j = jax.numpy.arange(256, dtype=jax.numpy.float32).reshape(1, 16, 16)
    u8 = np.full((1, 16, 16), 100, np.uint8)

    def identity(x: object) -> object:
        return x

    def scale(x: np.ndarray) -> np.ndarray:
        return x * 1.5

    deco_np, deco_torch, deco_scale = mt.numpy(identity), mt.torch(identity), mt.numpy(scale)
    calls = {"@mt.numpy(numpy)": lambda: deco_np(host), "@mt.torch(torch)": lambda: deco_torch(t),
             "@mt.torch(numpy)": lambda: deco_torch(host), "@mt.numpy(torch)": lambda: deco_np(t),
             "@mt.numpy(jax)": lambda: deco_np(j),
             "policy numpy u8*1.5 256B": lambda: deco_scale(u8),
             "convert numpy->torch": lambda: mt.convert(host, "torch"),
             "convert torch->numpy": lambda: mt.convert(t, "numpy"),
             "identity": lambda: identity(host)}
    for name in CASES:
        call = calls[name]
        for _ in range(200):  # caches filled, frameworks loaded
            call()
        gc.collect()
        gc.disable()
        control.cg_start()
        for _ in range(CALLS):
            call()
        control.cg_stop()
        gc.enable()


def measure(src: Path, shim: Path, into: Path) -> dict[str, float]:
    """Instructions per call of each case with ``src`` first on the path."""
    prefix = into / "callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
                    f"--callgrind-out-file={prefix}", "-q", sys.executable, __file__,
                    "--child", str(shim)],
                   env={**os.environ, "PYTHONPATH": str(src)}, check=True,
                   stdout=subprocess.DEVNULL)
    dumps = sorted(into.glob("callgrind.out.*"), key=lambda p: int(p.suffix[1:]))
    if len(dumps) != len(CASES):
        sys.exit(f"expected {len(CASES)} callgrind dumps in {into}, found {len(dumps)}")
    counts = {}
    for name, dump in zip(CASES, dumps, strict=True):
        summary = next(line for line in dump.read_text().splitlines()
                       if line.startswith("summary:"))
        counts[name] = int(summary.split()[1]) / CALLS
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="git revision to compare against (required)")
    parser.add_argument("--after", default="WORKTREE", help="git revision, or WORKTREE")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    if not args.before:
        parser.error("--before is required")
    with tempfile.TemporaryDirectory(prefix="memtype-instructions-") as tmp:
        root = Path(tmp)
        (root / "shim.c").write_text(SHIM)
        shim = root / "libshim.so"
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(shim), str(root / "shim.c")],
                       check=True)
        counts = {}
        for side, revision in (("before", args.before), ("after", args.after)):
            (root / side).mkdir()
            counts[side] = measure(export(revision, root), shim, root / side)
    lines = [f"# Instructions per call: {args.after} vs {args.before}\n",
             f"{datetime.date.today()}, {platform.machine()}, Python "
             f"{platform.python_version()}, valgrind callgrind, {CALLS} calls per case, 1 KiB "
             "float32, identity functions (the policy row: x * 1.5 on uint8).\n",
             f"| case | {args.before} | {args.after} | ratio after/before |",
             "|---|---:|---:|---:|"]
    for name in CASES:
        b, a = counts["before"][name], counts["after"][name]
        lines.append(f"| {name} | {b / 1000:.1f}k | {a / 1000:.1f}k | {a / b:.2f} |")
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
