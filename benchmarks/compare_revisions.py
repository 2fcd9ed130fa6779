"""Compare memtype's per-call costs between two git revisions, in alternating rounds.

Each round starts one fresh process per revision (the order alternates from round to round,
so machine drift hits both alike), with that revision's ``src`` first on ``sys.path``; the
process (benchmarks/_revision_probe.py) times conversions and decorated calls on 1 KiB
arrays and reports seconds per call. The table gives, per case, the median over rounds of
each revision and the median of the per-round ratios (after / before): below 1 is faster.

Run: ``python benchmarks/compare_revisions.py --before d3c097d [--after HEAD] [--rounds 9]``
(``--after WORKTREE`` times the working tree as it is). Writes
``benchmarks/results/compare_revisions.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).resolve().parent / "_revision_probe.py"
OUT = Path(__file__).resolve().parent / "results" / "compare_revisions.md"


def export(revision: str, into: Path) -> Path:
    """The ``src`` directory of ``revision`` (``WORKTREE``: the working tree's own)."""
    if revision == "WORKTREE":
        return ROOT / "src"
    archive = into / f"{revision}.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), revision, "src"],
                   check=True)
    target = into / revision
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target / "src"


def run_probe(src: Path, arguments: list[str]) -> dict[str, float]:
    """Run ``python *arguments`` with ``src`` first on the path: the probe prints a JSON line
    ``{"memtype_file": ..., "results": {case: seconds}}``; its results, once it is sure it
    imported the memtype of ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, *arguments], env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"the probe failed with {src}:\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if not str(report["memtype_file"]).startswith(str(src)):
        sys.exit(f"the probe imported {report['memtype_file']}, not the revision in {src}")
    return dict(report["results"])


def one_round(src: Path, only: str) -> dict[str, float]:
    return run_probe(src, [str(PROBE), only])


def alternate(before: str, after: str, rounds: int,
              run: Callable[[Path], dict[str, float]]) -> list[dict[str, dict[str, float]]]:
    """``run`` on each revision's ``src`` per round, in fresh exports, the order alternating
    from round to round (machine drift hits both alike)."""
    done = []
    with tempfile.TemporaryDirectory(prefix="memtype-revisions-") as tmp:
        trees = {"before": export(before, Path(tmp)), "after": export(after, Path(tmp))}
        for i in range(rounds):
            order = ("before", "after") if i % 2 == 0 else ("after", "before")
            done.append({side: run(trees[side]) for side in order})
            print(f"round {i + 1}/{rounds} done", file=sys.stderr, flush=True)
    return done


def table(before: str, after: str, rounds: list[dict[str, dict[str, float]]]) -> str:
    lines = [f"| case | {before} (µs) | {after} (µs) | ratio after/before |",
             "|---|---:|---:|---:|"]
    ratios_all = []
    for case in rounds[0]["before"]:
        b = [r["before"][case] for r in rounds]
        a = [r["after"][case] for r in rounds]
        ratio = statistics.median(x / y for x, y in zip(a, b, strict=True))
        ratios_all.append(ratio)
        lines.append(f"| {case} | {statistics.median(b) * 1e6:.2f} | "
                     f"{statistics.median(a) * 1e6:.2f} | {ratio:.2f} |")
    lines.append(f"| **geometric mean** | | | "
                 f"**{statistics.geometric_mean(ratios_all):.2f}** |")
    return "\n".join(lines)


def write_results(out: Path, title: str, rounds: int, load_start: float, body: str) -> None:
    """Write (and print) a results file: ``title``, the machine, date, rounds and load at the
    start and the end, then the table ``body``."""
    header = (f"# {title}\n\n{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, "
              f"{platform.machine()}, {os.cpu_count()} cores (shared), Python "
              f"{platform.python_version()}, {rounds} alternating rounds, load average "
              f"{load_start:.1f} at the start and {os.getloadavg()[0]:.1f} at the end. "
              "Medians; ratio = median of per-round ratios.\n\n")
    out.parent.mkdir(exist_ok=True)
    out.write_text(header + body + "\n")
    print(header + body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision to compare against")
    parser.add_argument("--after", default="HEAD", help="git revision, or WORKTREE")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--only", default="", help="comma-separated case names")
    args = parser.parse_args(argv)
    rounds = alternate(args.before, args.after, args.rounds,
                       lambda src: one_round(src, args.only))
    body = table(args.before, args.after, rounds)
    load = os.getloadavg()[0]
    header = (f"# memtype {args.after} vs {args.before}: seconds per call, 1 KiB float32\n\n"
              f"{datetime.date.today()}, {platform.machine()}, {os.cpu_count()} cores, "
              f"Python {platform.python_version()}, {args.rounds} alternating rounds, "
              f"load average {load:.1f} at the end. Medians; ratio = median of per-round "
              "ratios. Host arrays start 16 bytes past a 64-byte boundary (NumPy's usual "
              "place; rows marked 64-aligned: on it), the same in both revisions.\n\n")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(header + body + "\n")
    print(header + body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
