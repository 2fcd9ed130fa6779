"""Storage benchmark: memtype stores side by side with polystore 0.6.3 and plain library loops.

200 images of 1024 x 1024 (float32 and uint16): save and load through the memory store, the
disk store (.tif and .npy) and the zarr store, each next to polystore's memory, disk and
default zarr backends and a plain tifffile / numpy loop, all in one process. Then a plate of
1, 12, 48 and 96 wells written well by well, to show how writing grows with the plate.

Usage::

    python benchmarks/storage.py --quick          # small sizes, to try it
    python benchmarks/storage.py --write-docs     # full run; results into docs/benchmarks.md

Images are synthetic microscopy-like frames (a smooth background plus Poisson-like noise),
so codecs see realistic, moderately compressible data. Every timing is the median of
``--repeat`` runs; each run writes into a fresh directory, after ``os.sync()`` so that no
earlier run's dirty pages are flushed on its time (cleaning up is not timed).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SECTION = "## Storage (benchmarks/storage.py)"


@dataclass(frozen=True)
class Config:
    """Sizes of one run."""

    n: int
    size: int
    wells: tuple[int, ...]
    well_planes: int
    well_size: int
    repeat: int
    slow_repeat: int


FULL = Config(n=200, size=1024, wells=(1, 12, 48, 96), well_planes=4, well_size=256, repeat=7,
              slow_repeat=2)
QUICK = Config(n=20, size=256, wells=(1, 4, 12), well_planes=2, well_size=128, repeat=2,
               slow_repeat=1)


def images(cfg: Config, dtype: str) -> list[np.ndarray]:
    """``cfg.n`` distinct frames: smooth background + noise, uint16 or float32."""
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:cfg.size, 0:cfg.size] / cfg.size
    background = 800 + 400 * np.sin(3 * xx) * np.cos(2 * yy)
    out = []
    for _ in range(cfg.n):
        frame = rng.poisson(background).astype(np.float32)
        out.append(frame.astype(dtype) if dtype == "uint16" else frame / 4096)
    return out


def settle() -> None:
    """Start a timing from a clean state: no garbage, no dirty pages of earlier runs."""
    gc.collect()
    os.sync()


def median_time(run: Callable[[Path], Any], base: Path, repeat: int) -> float:
    """Median seconds of ``run(fresh_dir)`` over ``repeat`` runs."""
    times = []
    for i in range(repeat):
        work = base / f"run{i}"
        work.mkdir(parents=True)
        settle()
        start = time.perf_counter()
        run(work)
        times.append(time.perf_counter() - start)
        shutil.rmtree(work)
    return statistics.median(times)


def timed(run: Callable[[], Any], repeat: int) -> float:
    """Median seconds of ``run()`` (no directory)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


Case = tuple[Callable[[Path], Any], Callable[[Path], Any]]


def compare(systems: dict[str, Case], base: Path, repeat: int,
            limits: dict[str, int]) -> dict[str, tuple[float, float]]:
    """Median (save, load) seconds per system, runs interleaved round by round so that a
    noisy neighbour slows every system alike; ``limits`` caps the runs of slow systems, the
    others get one untimed warm-up round first. Each run saves into a fresh directory and
    loads back from it."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in systems}
    for r in range(-1, repeat):
        for name, (save, load) in systems.items():
            if r >= limits.get(name, repeat) or (r < 0 and name in limits):
                continue
            work = base / f"{name}-{r}".replace(" ", "_")
            work.mkdir(parents=True)
            settle()
            t0 = time.perf_counter()
            save(work)
            t1 = time.perf_counter()
            load(work)
            t2 = time.perf_counter()
            if r >= 0:
                times[name].append((t1 - t0, t2 - t1))
            shutil.rmtree(work)
    return {name: (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts))
            for name, ts in times.items()}


def memtype_cases(imgs: list[np.ndarray]) -> dict[str, tuple[Callable[[Path], Any], ...]]:
    """(save, load) of memtype's stores for these images."""
    from memtype.storage import DiskStore, MemoryStore, ZarrStore

    n = len(imgs)
    mem: dict[str, Any] = {}

    def mem_save(d: Path) -> None:
        mem["s"] = store = MemoryStore()
        store.ensure_directory("x")
        for i, a in enumerate(imgs):
            store.save(a, f"x/img{i}")

    def disk(ext: str) -> tuple[Callable[[Path], Any], ...]:
        def save(d: Path) -> None:
            store = DiskStore(d)
            for i, a in enumerate(imgs):
                store.save(a, f"img{i}{ext}")

        def load(d: Path) -> None:
            store = DiskStore(d)
            for i in range(n):
                store.load(f"img{i}{ext}")
        return save, load

    def zarr(codec: str) -> tuple[Callable[[Path], Any], ...]:
        def save(d: Path) -> None:
            ZarrStore(d / "p.zarr", codec=codec).save(np.stack(imgs), "A/1/0", parents=True)

        def load(d: Path) -> None:
            ZarrStore(d / "p.zarr").load("A/1/0")
        return save, load

    return {
        "memory": (mem_save, lambda d: drain(mem["s"].load(f"x/img{i}") for i in range(n))),
        "disk .tif": disk(".tif"),
        "disk .npy": disk(".npy"),
        "zarr (blosc-lz4, default)": zarr("blosc-lz4"),
        "zarr (no codec)": zarr("none"),
    }


def polystore_cases(imgs: list[np.ndarray]) -> dict[str, tuple[Callable[[Path], Any], ...]]:
    """(save, load) of polystore 0.6.3's memory, disk and default zarr backends."""
    from polystore.disk import DiskStorageBackend
    from polystore.memory import MemoryStorageBackend
    from polystore.zarr import ZarrStorageBackend

    n = len(imgs)
    mem: dict[str, Any] = {}

    def mem_save(d: Path) -> None:
        mem["s"] = store = MemoryStorageBackend()
        store.ensure_directory("/x")
        for i, a in enumerate(imgs):
            store.save(a, f"/x/img{i}")

    def disk(ext: str) -> tuple[Callable[[Path], Any], ...]:
        backend = DiskStorageBackend()

        def save(d: Path) -> None:
            for i, a in enumerate(imgs):
                backend.save(a, d / f"img{i}{ext}")

        def load(d: Path) -> None:
            for i in range(n):
                backend.load(d / f"img{i}{ext}")
        return save, load

    def zarr_save(d: Path) -> None:
        write_polystore_well(ZarrStorageBackend(), d / "p.zarr", "A", "01", imgs)

    def zarr_load(d: Path) -> None:
        ZarrStorageBackend().load_batch(polystore_paths(d / "p.zarr", "A", "01", n))

    return {
        "memory": (mem_save, lambda d: drain(mem["s"].load(f"/x/img{i}") for i in range(n))),
        "disk .tif": disk(".tif"),
        "disk .npy": disk(".npy"),
        "zarr (default: zlib, one chunk per well)": (zarr_save, zarr_load),
    }


def drain(values: Iterable[Any]) -> None:
    """Consume loaded values one at a time (each is dropped before the next is loaded)."""
    for _ in values:
        pass


def polystore_paths(store: Path, row: str, col: str, n: int) -> list[Path]:
    return [store / f"{row}{col}_z{i:03d}.tif" for i in range(n)]


def write_polystore_well(backend: Any, store: Path, row: str, col: str,
                         imgs: list[np.ndarray]) -> None:
    """One well of ``len(imgs)`` planes through polystore's batch API (its zarr write path)."""
    from polystore.zarr_batch import ZarrBatchAxis, ZarrBatchLayout

    n = len(imgs)
    layout = ZarrBatchLayout(axes=(ZarrBatchAxis("z", tuple(str(i) for i in range(n))),),
                             item_coordinates=tuple((i,) for i in range(n)))
    backend.save_batch(imgs, polystore_paths(store, row, col, n), chunk_name=f"{row}{col}",
                       batch_layout=layout, row=row, col=col)


def plain_cases(imgs: list[np.ndarray]) -> dict[str, tuple[Callable[[Path], Any], ...]]:
    """(save, load) of a plain tifffile loop and a plain numpy loop."""
    import tifffile

    n = len(imgs)

    def tif_save(d: Path) -> None:
        for i, a in enumerate(imgs):
            tifffile.imwrite(d / f"img{i}.tif", a)

    def npy_save(d: Path) -> None:
        for i, a in enumerate(imgs):
            np.save(d / f"img{i}.npy", a)

    return {
        "disk .tif": (tif_save, lambda d: drain(tifffile.imread(d / f"img{i}.tif")
                                                for i in range(n))),
        "disk .npy": (npy_save, lambda d: drain(np.load(d / f"img{i}.npy") for i in range(n))),
    }


# -- one plane ----------------------------------------------------------------------------------
def one_plane(imgs: list[np.ndarray], base: Path, repeat: int,
              slow_repeat: int) -> tuple[float, float]:
    """Median seconds to load one plane from a saved well: memtype, polystore."""
    from polystore.zarr import ZarrStorageBackend

    from memtype.storage import ZarrStore

    n = len(imgs)
    ours = ZarrStore(base / "ours.zarr")
    ours.save(np.stack(imgs), "A/1/0", parents=True)
    theirs = ZarrStorageBackend()
    write_polystore_well(theirs, base / "theirs.zarr", "A", "01", imgs)
    paths = polystore_paths(base / "theirs.zarr", "A", "01", n)
    picks = [n // 7, n // 2, n - 3]
    for k in picks:  # both return the right plane
        assert np.array_equal(ours.load("A/1/0", index=k), imgs[k])
        assert np.array_equal(theirs.load(paths[k]), imgs[k])
    t_ours = timed(lambda: drain(ours.load("A/1/0", index=k) for k in picks), repeat) / len(picks)
    t_theirs = timed(lambda: theirs.load(paths[picks[1]]), slow_repeat)
    return t_ours, t_theirs


# -- plate scaling ------------------------------------------------------------------------------
def plate_scaling(cfg: Config, base: Path) -> list[tuple[int, float, float]]:
    """Seconds to write plates of ``cfg.wells`` wells, well by well: memtype, polystore."""
    from polystore.zarr import ZarrStorageBackend

    from memtype.storage import ZarrStore

    rng = np.random.default_rng(3)
    well = [rng.integers(0, 4096, (cfg.well_size, cfg.well_size)).astype(np.uint16)
            for _ in range(cfg.well_planes)]
    stack = np.stack(well)
    rows = "ABCDEFGH"
    out = []
    for count in cfg.wells:
        names = [(rows[i // 12], i % 12 + 1) for i in range(count)]

        def ours(d: Path, names: list[tuple[str, int]] = names) -> None:
            store = ZarrStore(d / "p.zarr", rows=rows, columns=range(1, 13))
            for r, c in names:
                store.save(stack, f"{r}/{c}/0", parents=True)

        def theirs(d: Path, names: list[tuple[str, int]] = names) -> None:
            backend = ZarrStorageBackend()
            for r, c in names:
                write_polystore_well(backend, d / "p.zarr", r, f"{c:02d}", well)

        out.append((count, median_time(ours, base / f"po{count}", cfg.repeat),
                    median_time(theirs, base / f"pt{count}", cfg.slow_repeat)))
    return out


# -- report -------------------------------------------------------------------------------------
def fmt_s(seconds: float | None, nbytes: int) -> str:
    if seconds is None:
        return "--"
    rate = nbytes / seconds / 1e6
    return f"{seconds * 1e3:,.0f} ms ({rate:,.0f} MB/s)" if seconds >= 0.01 else \
        f"{seconds * 1e3:.2f} ms"


def ratio(slow: float | None, fast: float | None) -> str:
    if slow is None or fast is None:
        return "--"
    r = slow / fast
    return f"{r:,.0f}x" if r >= 100 else f"{r:.3g}x"


PAIRS = [("memory", "memory"), ("disk .tif", "disk .tif"), ("disk .npy", "disk .npy"),
         ("zarr (blosc-lz4, default)", "zarr (default: zlib, one chunk per well)"),
         ("zarr (no codec)", "zarr (default: zlib, one chunk per well)")]
GROUPS = [["memory"], ["disk .tif"], ["disk .npy"],
          ["zarr (blosc-lz4, default)", "zarr (no codec)"]]


def run_dtype(cfg: Config, dtype: str, base: Path) -> list[str]:
    """Table rows for one dtype."""
    imgs = images(cfg, dtype)
    nbytes = sum(a.nbytes for a in imgs)
    ours, theirs, plain = memtype_cases(imgs), polystore_cases(imgs), plain_cases(imgs)
    peer_of = dict(PAIRS)
    results: dict[str, dict[str, tuple[float, float]]] = {}
    for group in GROUPS:
        systems = {f"memtype {m}": ours[m] for m in group}
        systems[f"polystore {group[0]}"] = theirs[peer_of[group[0]]]
        if group[0] in plain:
            systems[f"plain {group[0]}"] = plain[group[0]]
        slow = {f"polystore {group[0]}": cfg.slow_repeat} if "zarr" in group[0] else {}
        results.update({group[0] + "|" + k: v
                        for k, v in compare(systems, base, cfg.repeat, slow).items()})
    rows = []
    for mine, _ in PAIRS:
        group = next(g for g in GROUPS if mine in g)[0]
        t_ours = results[f"{group}|memtype {mine}"]
        t_peer = results[f"{group}|polystore {group}"]
        t_plain = results.get(f"{group}|plain {group}")
        for i, op in enumerate(("save", "load")):
            p = t_plain[i] if t_plain else None
            rows.append(f"| {mine} | {op} | {dtype} | {fmt_s(t_ours[i], nbytes)} | "
                        f"{fmt_s(t_peer[i], nbytes)} | {fmt_s(p, nbytes)} | "
                        f"{ratio(t_peer[i], t_ours[i])} | {ratio(t_ours[i], p)} |")
            print(rows[-1], file=sys.stderr, flush=True)
    t1, t2 = one_plane(imgs, base / "plane", cfg.repeat, cfg.slow_repeat)
    rows.append(f"| zarr, one plane of the well | load | {dtype} | {t1 * 1e3:.2f} ms | "
                f"{t2 * 1e3:,.0f} ms | -- | {ratio(t2, t1)} | -- |")
    print(rows[-1], file=sys.stderr, flush=True)
    return rows


def report(cfg: Config, base: Path) -> str:
    head = ("| store | op | dtype | memtype | polystore 0.6.3 | plain loop | "
            "polystore / memtype | memtype / plain |\n|---|---|---|---|---|---|---|---|")
    rows = [r for dtype in ("uint16", "float32") for r in run_dtype(cfg, dtype, base / dtype)]
    plate = plate_scaling(cfg, base / "plate")
    print(*plate, sep="\n", file=sys.stderr, flush=True)
    plate_rows = [f"| {w} | {a:.2f} s | {a / w * 1e3:.0f} ms | {b:.2f} s | {b / w * 1e3:.0f} ms |"
                  for w, a, b in plate]
    per_well = f"{cfg.well_planes} planes of {cfg.well_size}x{cfg.well_size} uint16 per well"
    return "\n".join([
        f"Machine: {os.cpu_count()}-core CPU, no GPU (shared), ext4 disk, load average "
        f"{os.getloadavg()[0]:.1f} at the end; date {datetime.date.today()}. {cfg.n} images of "
        f"{cfg.size}x{cfg.size}; median of "
        f"{cfg.repeat} interleaved runs ({cfg.slow_repeat} for polystore's zarr backend, which "
        "takes tens of seconds per run). Memory: memtype copies on save, "
        "polystore stores a reference. Zarr: the whole stack as one well field "
        "(memtype: one chunk per plane; polystore: its default zlib, one chunk per well).",
        "", head, *rows, "",
        f"Writing a plate well by well ({per_well}):", "",
        "| wells | memtype | per well | polystore 0.6.3 | per well |",
        "|---|---|---|---|---|", *plate_rows, "",
        "memtype writes one well's files and, for a new well, rewrites the small plate "
        "document once; polystore rescans every well of the plate for each well it writes, so "
        "its cost per well grows with the plate. memtype's cost per well varies with the "
        "file system's journal commits on this shared disk; it does not depend on the wells "
        "already written.",
    ])


def write_docs(markdown: str) -> None:
    """Replace the body of the Storage section of docs/benchmarks.md (only that section)."""
    text = DOCS.read_text()
    start = text.index(SECTION) + len(SECTION)
    end = text.find("\n## ", start)
    end = len(text) if end < 0 else end
    DOCS.write_text(text[:start] + "\n\n" + markdown + "\n" + text[end:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one run each")
    parser.add_argument("--repeat", type=int, help="runs per timing (median)")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--tmp", help="directory for the files written (default: system temp)")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args.repeat:
        cfg = Config(cfg.n, cfg.size, cfg.wells, cfg.well_planes, cfg.well_size, args.repeat,
                     min(cfg.slow_repeat, args.repeat))
    with tempfile.TemporaryDirectory(dir=args.tmp, prefix="memtype-bench-") as tmp:
        markdown = report(cfg, Path(tmp))
    print(markdown)
    if args.write_docs:
        write_docs(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
