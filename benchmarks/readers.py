"""Listing a plate: memtype's ImageXpress reader next to a plain ``os.walk`` + regex.

Builds a 384-well x 9 sites x 4 channels x 10 z ImageXpress tree (138,240 empty ``.TIF``
files in ``TimePoint_1/ZStep_<z>/``, beside a ``.HTD``) in a temporary directory, then lists
it in alternating rounds with:

* ``memtype``: ``ImageXpressReader(root).records()`` (a fresh reader each round: walk, names
  parsed into well/site/channel/z/t records, canonical wells, natural sort, the collision
  check) and, timed once apart, with ``.metadata`` (the ``.HTD`` and the missing list);
* ``baseline``: ``os.walk`` and one regex per file name into (path, well, site, channel, z)
  tuples, sorted; what a script would do (openhcs 0.8.6 is not installed here: its
  ImageXpress handler could not be measured).

Reported: median seconds over rounds, the ratio memtype / baseline, and peak Python memory of
one listing (``tracemalloc``). The files are empty: listing never reads pixel data, so their
size does not matter.

Then the per-group read: one well of real 256 x 256 uint16 TIFFs (9 sites x 4 channels x
10 z = 360 files) read by ``reader.load_batch`` (through a read-only DiskStore, which resolves
each path from the root) against ``tifffile.imread`` of each file, alternating rounds, medians.

Usage::

    python benchmarks/readers.py               # about a minute on 2 busy cores
    python benchmarks/readers.py --rounds 7 --wells 96
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

_NAME = re.compile(r".*_([A-P]\d{2})_s(\d+)_w(\d+)\.TIF")


def wells(count: int) -> list[str]:
    """The first ``count`` wells of a 384-well plate, row by row."""
    return [f"{chr(65 + i // 24)}{i % 24 + 1:02d}" for i in range(count)]


def build(root: Path, n_wells: int, sites: int, channels: int, planes: int) -> int:
    """An ImageXpress tree of empty files (hard links to one empty file: a name is all a
    listing sees, and links are made 4x faster than files); returns how many."""
    names = wells(n_wells)
    (root / "plate.HTD").write_text(
        '"HTSInfoFile", Version 1.0\r\n"XWells", 24\r\n"YWells", 16\r\n"Sites", TRUE\r\n'
        f'"XSites", {sites}\r\n"YSites", 1\r\n"SiteSelection1", '
        + ", ".join(["TRUE"] * sites) + f'\r\n"NWavelengths", {channels}\r\n"ZSeries", TRUE'
        f'\r\n"ZSteps", {planes}\r\n"EndFile"\r\n')
    count = 0
    for z in range(1, planes + 1):
        folder = root / "TimePoint_1" / f"ZStep_{z}"
        folder.mkdir(parents=True)
        empty = folder / ".empty"  # one per folder: a file has at most 65,000 links (ext4)
        empty.touch()
        for well in names:
            for s in range(1, sites + 1):
                for c in range(1, channels + 1):
                    os.link(empty, folder / f"MFGTMP_140206180002_{well}_s{s}_w{c}.TIF")
                    count += 1
    return count


def baseline(root: str) -> list[tuple[str, str, int, int, int]]:
    """os.walk + a regex: (path, well, site, channel, z), sorted."""
    out = []
    for directory, _, files in os.walk(root):
        z = int(directory.rsplit("ZStep_", 1)[1]) if "ZStep_" in directory else 1
        for name in files:
            m = _NAME.fullmatch(name)
            if m is not None:
                out.append((os.path.join(directory, name), m[1], int(m[2]), int(m[3]), z))
    out.sort(key=lambda r: r[1:])
    return out


def memtype_records(root: str) -> list[Any]:
    """memtype's reader, fresh: its records."""
    from memtype.pipeline.readers import ImageXpressReader

    return ImageXpressReader(root).records()


def memtype_metadata(root: str) -> Any:
    """memtype's reader, fresh: records and metadata (HTD, missing list)."""
    from memtype.pipeline.readers import ImageXpressReader

    reader = ImageXpressReader(root)
    reader.records()
    return reader.metadata


def timed(fn: Callable[[str], Any], root: str) -> tuple[float, int]:
    """Seconds of one call and how many items it returned."""
    start = time.perf_counter()
    result = fn(root)
    return time.perf_counter() - start, len(result) if isinstance(result, list) else 1


def peak(fn: Callable[[str], Any], root: str) -> int:
    """Peak traced Python memory of one call, in bytes."""
    tracemalloc.start()
    try:
        fn(root)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def group_read(rounds: int, sites: int, channels: int, planes: int) -> None:
    """One well's images: the reader's load_batch against tifffile.imread per file."""
    import numpy as np
    import tifffile

    from memtype.pipeline.readers import ImageXpressReader

    with tempfile.TemporaryDirectory(prefix="memtype-group-") as tmp:
        plane = np.arange(256 * 256, dtype=np.uint16).reshape(256, 256)
        for z in range(1, planes + 1):
            folder = Path(tmp) / "TimePoint_1" / f"ZStep_{z}"
            folder.mkdir(parents=True)
            for s in range(1, sites + 1):
                for c in range(1, channels + 1):
                    tifffile.imwrite(folder / f"P_A01_s{s}_w{c}.TIF", plane)
        reader = ImageXpressReader(tmp)
        paths = [r.path for r in reader.records()]
        full = [os.path.join(tmp, p) for p in paths]
        systems: dict[str, Callable[[], Any]] = {
            "tifffile": lambda: [tifffile.imread(f) for f in full],
            "memtype": lambda: reader.load_batch(paths)}
        times: dict[str, list[float]] = {name: [] for name in systems}
        for r in range(rounds):
            for name in (list(systems) if r % 2 == 0 else list(systems)[::-1]):
                start = time.perf_counter()
                systems[name]()
                times[name].append(time.perf_counter() - start)
    base = statistics.median(times["tifffile"])
    print(f"one group: {len(paths)} files of 256 x 256 uint16")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:<18} {med:9.3f} {med / base:10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--wells", type=int, default=384)
    parser.add_argument("--sites", type=int, default=9)
    parser.add_argument("--channels", type=int, default=4)
    parser.add_argument("--planes", type=int, default=10)
    args = parser.parse_args()
    systems: dict[str, Callable[[str], Any]] = {"baseline": baseline, "memtype": memtype_records}
    with tempfile.TemporaryDirectory(prefix="memtype-readers-") as tmp:
        start = time.perf_counter()
        files = build(Path(tmp), args.wells, args.sites, args.channels, args.planes)
        print(f"{files} files built in {time.perf_counter() - start:.1f} s "
              f"({platform.node()}, {platform.processor() or platform.machine()}, "
              f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d')})")
        memtype_records(tmp)  # imports, and a warm directory cache for every system
        times: dict[str, list[float]] = {name: [] for name in systems}
        order = list(systems)
        for r in range(args.rounds):
            for name in order[r % len(order):] + order[:r % len(order)]:
                seconds, _ = timed(systems[name], tmp)
                times[name].append(seconds)
        memory = {name: peak(fn, tmp) for name, fn in systems.items()}
        metadata = timed(memtype_metadata, tmp)[0]
    base = statistics.median(times["baseline"])
    print(f"{'system':<18} {'median s':>9} {'x baseline':>10} {'peak MiB':>9}")
    for name in systems:
        med = statistics.median(times[name])
        print(f"{name:<18} {med:9.3f} {med / base:10.2f} {memory[name] / 2**20:9.1f}")
    print(f"memtype records + metadata (the .HTD, missing list), once: {metadata:.3f} s")
    group_read(args.rounds, args.sites, args.channels, args.planes)


if __name__ == "__main__":
    main()
