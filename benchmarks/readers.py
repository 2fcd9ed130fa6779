"""Listing a plate: memtype's ImageXpress reader next to openhcs 0.8.6 and a plain ``os.walk``
+ regex.

Builds a 384-well x 9 sites x 4 channels x 10 z ImageXpress tree (138,240 ``.TIF`` files in
``TimePoint_1/ZStep_<z>/``, hard links to one small TIFF per folder carrying a MetaXpress
description, beside a ``.HTD``) in a temporary directory, then lists it in alternating rounds
(the order rotates each round) with:

* ``memtype``: ``ImageXpressReader(root).records()`` (a fresh reader each round: walk, names
  parsed into well/site/channel/z/t records, canonical wells, natural sort, the collision
  check) and, timed once apart, with ``.metadata`` (the ``.HTD``, the missing list, one TIFF
  header per channel), and then, timed alone, every field's stage position (one TIFF header
  per field, read when first asked for);
* ``baseline``: ``os.walk`` and one regex per file name into (path, well, site, channel, z)
  tuples, sorted; what a script would do;
* ``openhcs`` (with ``--openhcs PYTHON``, openhcs's venv): what openhcs does before a run,
  ``PipelineOrchestrator(plate).initialize()`` (detection, its ImageXpress handler's virtual
  workspace: every file name parsed and rebuilt, the mapping written to
  ``openhcs_metadata.json``; component keys cached), in a subprocess of that venv
  (benchmarks/readers_openhcs_peer.py), timed inside it (interpreter start and imports left
  out). Its ``.HTD`` needs a ``"PixelSizeUM"`` line (not a MetaXpress key: openhcs 0.8.6 raises
  without one), which the tree has and memtype ignores.

Reported: median seconds over rounds, the ratio to the baseline, median CPU seconds of the
listing's process (on a shared machine, wall time includes waiting for a core), and peak Python
memory of one listing (``tracemalloc``; openhcs's in its own process). Listing never reads
pixel data, so the files' size does not matter.

Then the per-group read: one well of real 256 x 256 uint16 TIFFs (9 sites x 4 channels x
10 z = 360 files) read by ``reader.load_batch`` (through a read-only DiskStore, which resolves
each path from the root) against ``tifffile.imread`` of each file, alternating rounds, medians.

Usage::

    python benchmarks/readers.py               # about a minute on 2 busy cores
    python benchmarks/readers.py --rounds 7 --wells 96
    python benchmarks/readers.py --openhcs /tmp/ohcs/bin/python --wells 96
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
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
    """An ImageXpress tree (hard links to one small TIFF per folder: a name is all a listing
    sees, links are made 4x faster than files, and the metadata reads one header per channel);
    returns how many."""
    import numpy as np
    import tifffile

    names = wells(n_wells)
    root.mkdir(parents=True)
    selected = "".join(f'"WellsSelection{r + 1}", ' + ", ".join(
        "TRUE" if f"{chr(65 + r)}{c:02d}" in names else "FALSE" for c in range(1, 25)) + "\r\n"
        for r in range(16))
    (root / "plate.HTD").write_text(
        '"HTSInfoFile", Version 1.0\r\n"XWells", 24\r\n"YWells", 16\r\n' + selected
        + '"Sites", TRUE\r\n'
        f'"XSites", {sites}\r\n"YSites", 1\r\n"SiteSelection1", '
        + ", ".join(["TRUE"] * sites) + f'\r\n"NWavelengths", {channels}\r\n"ZSeries", TRUE'
        f'\r\n"ZSteps", {planes}\r\n"PixelSizeUM", 0.65\r\n"EndFile"\r\n')
    count = 0
    for z in range(1, planes + 1):
        folder = root / "TimePoint_1" / f"ZStep_{z}"
        folder.mkdir(parents=True)
        image = folder / ".image"  # one per folder: a file has at most 65,000 links (ext4)
        tifffile.imwrite(image, np.zeros((8, 8), np.uint16), software="MetaSeries",
                         metadata=None, description=_DESCRIPTION.format(z=1000 + 2 * z))
        for well in names:
            for s in range(1, sites + 1):
                for c in range(1, channels + 1):
                    os.link(image, folder / f"MFGTMP_140206180002_{well}_s{s}_w{c}.TIF")
                    count += 1
    return count


_DESCRIPTION = (
    '<MetaData><prop id="ApplicationName" type="string" value="MetaXpress"/><PlaneInfo>'
    '<prop id="spatial-calibration-state" type="bool" value="on"/>'
    '<prop id="spatial-calibration-x" type="float" value="0.65"/>'
    '<prop id="spatial-calibration-y" type="float" value="0.65"/>'
    '<prop id="spatial-calibration-units" type="string" value="um"/>'
    '<prop id="stage-position-x" type="float" value="12650.5"/>'
    '<prop id="stage-position-y" type="float" value="8000.25"/>'
    '<prop id="z-position" type="float" value="{z}"/>'
    '<prop id="_IllumSetting_" type="string" value="DAPI"/></PlaneInfo></MetaData>')


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


def openhcs(python: str, warm: str) -> Callable[[str], tuple[float, float, int]]:
    """openhcs's initialisation of the plate, in its venv (after that of the small plate
    ``warm``): (seconds, CPU seconds, peak bytes)."""
    peer = str(Path(__file__).resolve().parent / "readers_openhcs_peer.py")

    def run(root: str) -> tuple[float, float, int]:
        done = subprocess.run([python, peer, root, "--warm", warm], check=True,
                              capture_output=True, text=True)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        return float(result["seconds"]), float(result["cpu_seconds"]), int(result["peak_bytes"])

    return run


def timed(fn: Callable[[str], Any], root: str) -> tuple[float, float]:
    """Seconds and CPU seconds of one call."""
    start, cpu = time.perf_counter(), time.process_time()
    fn(root)
    return time.perf_counter() - start, time.process_time() - cpu


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
    parser.add_argument("--openhcs", metavar="PYTHON",
                        help="openhcs's venv python (e.g. /tmp/ohcs/bin/python)")
    parser.add_argument("--no-group", action="store_true", help="skip the per-group read")
    args = parser.parse_args()
    systems: dict[str, Callable[[str], Any]] = {"baseline": baseline, "memtype": memtype_records}
    with tempfile.TemporaryDirectory(prefix="memtype-readers-") as tmp:
        start = time.perf_counter()
        files = build(Path(tmp) / "plate", args.wells, args.sites, args.channels, args.planes)
        build(Path(tmp) / "warm", 1, 1, 1, 1)
        peer = openhcs(args.openhcs, f"{tmp}/warm") if args.openhcs else None
        plate = f"{tmp}/plate"
        print(f"{files} files built in {time.perf_counter() - start:.1f} s "
              f"({platform.node()}, {platform.processor() or platform.machine()}, "
              f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}, "
              f"load {os.getloadavg()[0]:.1f})")
        memtype_records(plate)  # imports, and a warm directory cache for every system
        order = list(systems) + (["openhcs"] if peer else [])
        times: dict[str, list[float]] = {name: [] for name in order}
        cpu: dict[str, list[float]] = {name: [] for name in order}
        memory: dict[str, int] = {}
        for r in range(args.rounds):
            for name in order[r % len(order):] + order[:r % len(order)]:
                if name == "openhcs" and peer is not None:
                    seconds, used, memory["openhcs"] = peer(plate)
                else:
                    seconds, used = timed(systems[name], plate)
                times[name].append(seconds)
                cpu[name].append(used)
        memory.update({name: peak(fn, plate) for name, fn in systems.items()})
        metadata = timed(memtype_metadata, plate)[0]
        meta = memtype_metadata(plate)  # its stage positions are read when first asked for
        positions = timed(lambda _: len(meta.field_positions), plate)
    base = statistics.median(times["baseline"])
    print(f"{'system':<18} {'median s':>9} {'x baseline':>10} {'CPU s':>7} {'peak MiB':>9}  "
          "rounds (s)")
    for name in times:
        med = statistics.median(times[name])
        rounds = " ".join(f"{t:.2f}" for t in times[name])
        print(f"{name:<18} {med:9.3f} {med / base:10.2f} {statistics.median(cpu[name]):7.2f} "
              f"{memory[name] / 2**20:9.1f}  {rounds}")
    print(f"memtype records + metadata (the .HTD, missing list, TIFF headers), once: "
          f"{metadata:.3f} s (load {os.getloadavg()[0]:.1f})")
    print(f"memtype: then every field's stage position (one TIFF header per field), once: "
          f"{positions[0]:.3f} s, CPU {positions[1]:.2f} s (load {os.getloadavg()[0]:.1f})")
    if not args.no_group:
        group_read(args.rounds, args.sites, args.channels, args.planes)


if __name__ == "__main__":
    main()
