"""What the viewer-ready outputs cost a demo run (issue 24, section 6): labels, tables in the
plate and input metadata, against the same run without them.

* ``full``: :func:`memtype.pipeline.demo.run_demo` as shipped: the ``segment_nuclei`` step
  (labels ``nuclei`` staged and written beside every field, one row per nucleus) and every
  side-output table also written into the plate (``<field>/tables/<name>``);
* ``bare``: the demo pipeline without ``segment_nuclei`` and with the in-plate tables turned
  off (CSV only), i.e. the demo before issue 24's labels and tables.

Both write the same synthetic plate's images, counts.csv, plate_overview.png and montage;
the rounds alternate (bare, full, bare, full, ...) in one process after a warm-up of each,
and the medians and their ratio are printed.

Usage::

    python benchmarks/outputs_cost.py                       # 3 rounds, 4 wells x 2 sites
    python benchmarks/outputs_cost.py --rounds 5 --wells 8 --size 512
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import pyclesperanto  # noqa: F401  (before tensorflow, as everywhere in memtype)

from memtype.pipeline import demo, outputs
from memtype.pipeline.synthetic import SyntheticPlate


def _bare_pipeline(use_opencl: bool | None = None) -> Any:
    """The demo pipeline without its labels step."""
    full = _FULL_PIPELINE(use_opencl)
    full.steps = [s for s in full.steps if s.labels is None]
    return full


_FULL_PIPELINE = demo.demo_pipeline
_FULL_TABLES = outputs._write_zarr_tables


def _set(bare: bool) -> None:
    """Switch the demo between its shipped outputs and the bare ones."""
    demo.demo_pipeline = _bare_pipeline if bare else _FULL_PIPELINE  # type: ignore[assignment]
    outputs._write_zarr_tables = ((lambda *a, **k: None) if bare  # type: ignore[assignment]
                                  else _FULL_TABLES)


def _once(plate: SyntheticPlate, bare: bool) -> float:
    """One demo run into a fresh directory; its wall seconds."""
    _set(bare)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        result = demo.run_demo(out, plate, use_opencl=False, progress=False)
        seconds = time.perf_counter() - start
        assert result.report.ok and ("nuclei" in result.report.outputs) != bare
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--wells", type=int, default=4)
    parser.add_argument("--sites", type=int, default=2)
    parser.add_argument("--z-planes", type=int, default=4)
    parser.add_argument("--size", type=int, default=256)
    args = parser.parse_args()
    plate = SyntheticPlate(wells=args.wells, sites=args.sites, z_planes=args.z_planes,
                           size=args.size)
    _once(plate, True), _once(plate, False)  # warm-up: imports, jit
    times: dict[str, list[float]] = {"bare": [], "full": []}
    for _ in range(args.rounds):
        for name in ("bare", "full"):
            times[name].append(_once(plate, name == "bare"))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"plate {plate!r}, {args.rounds} alternating rounds")
    for name, values in times.items():
        print(f"{name}: median {med[name]:.2f} s  ({', '.join(f'{v:.2f}' for v in values)})")
    print(f"full / bare: {med['full'] / med['bare']:.3f}")


if __name__ == "__main__":
    main()
